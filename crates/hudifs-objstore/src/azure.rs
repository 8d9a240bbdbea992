//! How an `az://` table reaches its storage account (docs/SEMANTICS.md §9), on top of what the
//! client library reads from the environment (`AZURE_STORAGE_ACCOUNT_NAME`,
//! `AZURE_STORAGE_ACCOUNT_KEY`, `AZURE_STORAGE_SAS_KEY`, `AZURE_STORAGE_USE_EMULATOR`, the
//! service principal and managed identity variables):
//!
//! - `AZURE_STORAGE_CONNECTION_STRING`, which the Azure CLI and SDKs read and the client library
//!   does not: `AccountName`, `AccountKey`, `SharedAccessSignature`, `BlobEndpoint`,
//!   `DefaultEndpointsProtocol`, `EndpointSuffix`, and `UseDevelopmentStorage=true` (the
//!   emulator). It wins over the separate variables, as with the Azure CLI.
//! - `--endpoint-url` naming the account in its path, as an emulator's blob endpoint does
//!   (`http://127.0.0.1:10000/devstoreaccount1`): the account when nothing else names one.
//! - `--endpoint-url` with the emulator asked for (`AZURE_STORAGE_USE_EMULATOR=true` or
//!   `UseDevelopmentStorage=true`): the emulator at that address, with its well-known account
//!   and key unless others are given (the client library alone only knows
//!   `AZURITE_BLOB_STORAGE_URL`).

use std::fmt;

use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::ClientConfigKey;

use crate::url::{StoreOptions, StoreUrl};

/// The account of the Azure storage emulators (Azurite), published by Microsoft.
pub const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The well-known key of [`EMULATOR_ACCOUNT`], published by Microsoft (not a secret).
pub const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// What an Azure storage connection string says. `Debug` never prints a secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConnectionString {
    pub account: Option<String>,
    pub key: Option<String>,
    pub sas: Option<String>,
    /// `BlobEndpoint`, or one made of `DefaultEndpointsProtocol`, the account and
    /// `EndpointSuffix`.
    pub blob_endpoint: Option<String>,
    /// `UseDevelopmentStorage=true`.
    pub development: bool,
}

impl fmt::Debug for ConnectionString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionString")
            .field("account", &self.account)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("sas", &self.sas.as_ref().map(|_| "<redacted>"))
            .field("blob_endpoint", &self.blob_endpoint)
            .field("development", &self.development)
            .finish()
    }
}

impl ConnectionString {
    /// Parse `Key=Value;Key=Value` (values may hold `=`, as keys and signatures do). An unknown
    /// key is ignored (queue, table and file endpoints); a malformed part is an error that
    /// quotes no value.
    pub fn parse(s: &str) -> Result<ConnectionString, String> {
        let mut out = ConnectionString::default();
        let (mut protocol, mut suffix) = (None, None);
        for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(
                    "AZURE_STORAGE_CONNECTION_STRING: a part without '=' (expected \
                     Key=Value;Key=Value)"
                        .into(),
                );
            };
            let v = v.trim().to_string();
            match k.trim().to_ascii_lowercase().as_str() {
                "accountname" => out.account = Some(v),
                "accountkey" => out.key = Some(v),
                "sharedaccesssignature" => out.sas = Some(v),
                "blobendpoint" => out.blob_endpoint = Some(v.trim_end_matches('/').to_string()),
                "defaultendpointsprotocol" => protocol = Some(v),
                "endpointsuffix" => suffix = Some(v),
                "usedevelopmentstorage" => out.development = v.eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        if out.blob_endpoint.is_none() {
            if let (Some(account), Some(suffix)) = (&out.account, &suffix) {
                let protocol = protocol.as_deref().unwrap_or("https");
                out.blob_endpoint = Some(format!("{protocol}://{account}.blob.{suffix}"));
            }
        }
        Ok(out)
    }
}

/// The first path segment of an endpoint URL (`http://host:port/ACCOUNT`), if any.
fn account_in_path(endpoint: &str) -> Option<String> {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let (_, path) = rest.split_once('/')?;
    path.split('/').find(|s| !s.is_empty()).map(str::to_string)
}

/// `endpoint` with `/account` appended when its path is empty (an emulator's address given
/// as `http://127.0.0.1:10000`).
fn with_account_path(endpoint: &str, account: &str) -> String {
    if account_in_path(endpoint).is_some() {
        endpoint.to_string()
    } else {
        format!("{}/{account}", endpoint.trim_end_matches('/'))
    }
}

fn truthy(v: Option<String>) -> bool {
    v.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
}

/// Apply `AZURE_STORAGE_CONNECTION_STRING`, the URL's account and `--endpoint-url` to `b` (a
/// builder made from the environment).
pub(crate) fn configure(
    b: MicrosoftAzureBuilder,
    url: &StoreUrl,
    opts: &StoreOptions,
) -> Result<MicrosoftAzureBuilder, String> {
    let cs = std::env::var("AZURE_STORAGE_CONNECTION_STRING").ok();
    configure_with(b, url, opts, cs.as_deref())
}

/// [`configure`] with the connection string given.
fn configure_with(
    mut b: MicrosoftAzureBuilder,
    url: &StoreUrl,
    opts: &StoreOptions,
    connection_string: Option<&str>,
) -> Result<MicrosoftAzureBuilder, String> {
    if let Some(cs) = connection_string.filter(|s| !s.trim().is_empty()) {
        let cs = ConnectionString::parse(cs)?;
        if cs.development {
            b = b.with_use_emulator(true);
        }
        if let Some(a) = &cs.account {
            b = b.with_account(a);
        }
        if let Some(k) = &cs.key {
            b = b.with_access_key(k);
        }
        if let Some(s) = &cs.sas {
            b = b.with_config(AzureConfigKey::SasKey, s);
        }
        if let Some(e) = &cs.blob_endpoint {
            if opts.endpoint_url.is_none() {
                b = b.with_endpoint(e.clone());
                // Plain HTTP where the connection string says so (an emulator's).
                if e.to_ascii_lowercase().starts_with("http://") {
                    b = b.with_config(AzureConfigKey::Client(ClientConfigKey::AllowHttp), "true");
                }
            }
        }
    }
    if let Some(a) = &url.account {
        b = b.with_account(a);
    }
    let emulator = truthy(b.get_config_value(&AzureConfigKey::UseEmulator));
    let account = b.get_config_value(&AzureConfigKey::AccountName);
    if let Some(e) = &opts.endpoint_url {
        if emulator {
            // The client library's emulator mode takes its address from
            // AZURITE_BLOB_STORAGE_URL only: the same requests, to this endpoint.
            let account = account.unwrap_or_else(|| EMULATOR_ACCOUNT.to_string());
            b = b
                .with_use_emulator(false)
                .with_endpoint(with_account_path(e, &account))
                .with_account(&account);
            let has_key = b.get_config_value(&AzureConfigKey::AccessKey).is_some()
                || b.get_config_value(&AzureConfigKey::SasKey).is_some();
            if !has_key && account == EMULATOR_ACCOUNT {
                b = b.with_access_key(EMULATOR_KEY);
            }
        } else {
            b = b.with_endpoint(e.clone());
            if account.is_none() {
                if let Some(a) = account_in_path(e) {
                    b = b.with_account(a);
                }
            }
        }
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_connection_strings() {
        let cs = ConnectionString::parse(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;\
             AccountKey=abc==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1/;",
        )
        .unwrap();
        assert_eq!(cs.account.as_deref(), Some("devstoreaccount1"));
        assert_eq!(cs.key.as_deref(), Some("abc=="));
        assert_eq!(
            cs.blob_endpoint.as_deref(),
            Some("http://127.0.0.1:10000/devstoreaccount1")
        );
        assert!(!cs.development);
        assert!(!format!("{cs:?}").contains("abc=="), "{cs:?}");
        let cs = ConnectionString::parse(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=k;\
             EndpointSuffix=core.windows.net",
        )
        .unwrap();
        assert_eq!(
            cs.blob_endpoint.as_deref(),
            Some("https://acct.blob.core.windows.net")
        );
        let cs = ConnectionString::parse("UseDevelopmentStorage=true").unwrap();
        assert!(cs.development);
        assert_eq!(cs.account, None);
        let cs = ConnectionString::parse(
            "BlobEndpoint=https://a.example;SharedAccessSignature=sv=1&sig=x%3D",
        )
        .unwrap();
        assert_eq!(cs.sas.as_deref(), Some("sv=1&sig=x%3D"));
        let err = ConnectionString::parse("AccountName=a;AccountKey").unwrap_err();
        assert!(err.contains("without '='"), "{err}");
    }

    fn configured(
        url: &str,
        endpoint: Option<&str>,
        cs: Option<&str>,
        b: MicrosoftAzureBuilder,
    ) -> MicrosoftAzureBuilder {
        let opts = StoreOptions {
            endpoint_url: endpoint.map(str::to_string),
            ..StoreOptions::default()
        };
        configure_with(b, &StoreUrl::parse(url).unwrap(), &opts, cs).unwrap()
    }

    fn get(b: &MicrosoftAzureBuilder, k: AzureConfigKey) -> Option<String> {
        b.get_config_value(&k)
    }

    #[test]
    fn how_an_az_table_reaches_its_account() {
        use AzureConfigKey::{AccessKey, AccountName, Endpoint, UseEmulator};
        let plain = MicrosoftAzureBuilder::new;
        // The account named by the endpoint's path, when nothing else names one.
        let ep = "http://127.0.0.1:10000/devstoreaccount1";
        let b = configured("az://lake/t", Some(ep), None, plain());
        assert_eq!(get(&b, AccountName).as_deref(), Some("devstoreaccount1"));
        assert_eq!(get(&b, Endpoint).as_deref(), Some(ep));
        assert_eq!(get(&b, AccessKey), None, "no key is made up");
        // ... but the URL's account wins.
        let b = configured(
            "abfss://lake@acct.dfs.core.windows.net/t",
            Some(ep),
            None,
            plain(),
        );
        assert_eq!(get(&b, AccountName).as_deref(), Some("acct"));
        // The emulator at --endpoint-url: its account and well-known key, the account's path.
        let emu = || plain().with_use_emulator(true);
        let b = configured("az://lake/t", Some("http://127.0.0.1:4000/"), None, emu());
        assert_eq!(get(&b, UseEmulator).as_deref(), Some("false"));
        assert_eq!(
            get(&b, Endpoint).as_deref(),
            Some("http://127.0.0.1:4000/devstoreaccount1")
        );
        assert_eq!(get(&b, AccountName).as_deref(), Some(EMULATOR_ACCOUNT));
        assert_eq!(get(&b, AccessKey).as_deref(), Some(EMULATOR_KEY));
        // ... with another account: no key of ours.
        let b = configured(
            "az://lake/t",
            Some("http://127.0.0.1:4000"),
            None,
            emu().with_account("other"),
        );
        assert_eq!(
            get(&b, Endpoint).as_deref(),
            Some("http://127.0.0.1:4000/other")
        );
        assert_eq!(get(&b, AccessKey), None);
        // Without --endpoint-url the emulator mode is the client library's own.
        let b = configured("az://lake/t", None, None, emu());
        assert_eq!(get(&b, UseEmulator).as_deref(), Some("true"));
        // A connection string wins over the separate variables; --endpoint-url over its
        // endpoint.
        let cs = "AccountName=csacct;AccountKey=a2V5;BlobEndpoint=http://h:1/csacct";
        let env = || plain().with_account("envacct").with_access_key("ZW52");
        let b = configured("az://lake/t", None, Some(cs), env());
        assert_eq!(get(&b, AccountName).as_deref(), Some("csacct"));
        assert_eq!(get(&b, AccessKey).as_deref(), Some("a2V5"));
        assert_eq!(get(&b, Endpoint).as_deref(), Some("http://h:1/csacct"));
        let b = configured("az://lake/t", Some("https://x.example"), Some(cs), env());
        assert_eq!(get(&b, Endpoint).as_deref(), Some("https://x.example"));
        let b = configured(
            "az://lake/t",
            None,
            Some("UseDevelopmentStorage=true"),
            plain(),
        );
        assert_eq!(get(&b, UseEmulator).as_deref(), Some("true"));
        let bad = StoreOptions::default();
        let err = configure_with(
            plain(),
            &StoreUrl::parse("az://lake/t").unwrap(),
            &bad,
            Some("AccountKey"),
        )
        .unwrap_err();
        assert!(err.contains("without '='"), "{err}");
    }

    #[test]
    fn the_account_in_an_endpoint_path() {
        assert_eq!(
            account_in_path("http://127.0.0.1:10000/devstoreaccount1").as_deref(),
            Some("devstoreaccount1")
        );
        assert_eq!(
            account_in_path("http://127.0.0.1:10000/devstoreaccount1/").as_deref(),
            Some("devstoreaccount1")
        );
        assert_eq!(account_in_path("https://acct.blob.core.windows.net"), None);
        assert_eq!(account_in_path("https://acct.blob.core.windows.net/"), None);
        assert_eq!(
            with_account_path("http://127.0.0.1:10000/", "devstoreaccount1"),
            "http://127.0.0.1:10000/devstoreaccount1"
        );
        assert_eq!(
            with_account_path("http://h:1/other", "devstoreaccount1"),
            "http://h:1/other"
        );
    }
}
