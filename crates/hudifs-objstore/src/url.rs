//! Table locations on object stores: `s3://bucket/prefix`, `gs://bucket/prefix`,
//! `az://container/prefix` (also `s3a://`, `gcs://`, `abfs[s]://container@account...`), and the
//! options that say how to reach the store.

use std::fmt;

/// Which kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    S3,
    Gcs,
    Azure,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Gcs => "gs",
            Scheme::Azure => "az",
        }
    }
}

/// A table's location on a store: bucket (or container) and the key prefix of the table root,
/// without leading or trailing `/` (empty for a table at the bucket's root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    pub scheme: Scheme,
    pub bucket: String,
    pub prefix: String,
    /// The Azure storage account when the URL names one (`abfss://c@account.dfs...`).
    pub account: Option<String>,
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

/// Whether `s` names an object-store location rather than a local path.
pub fn is_store_url(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    [
        "s3://", "s3a://", "gs://", "gcs://", "az://", "azure://", "abfs://", "abfss://",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
}

impl StoreUrl {
    pub fn parse(s: &str) -> Result<StoreUrl, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("{s:?} is not a store URL (s3://, gs://, az://)"))?;
        let scheme_kind = match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => Scheme::S3,
            "gs" | "gcs" => Scheme::Gcs,
            "az" | "azure" | "abfs" | "abfss" => Scheme::Azure,
            other => return Err(format!("unknown store scheme {other}:// in {s:?}")),
        };
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        if rest.contains('?') || rest.contains('#') {
            return Err(format!(
                "{s:?}: query strings and fragments are not supported"
            ));
        }
        let (bucket, account) = match (scheme_kind, host.split_once('@')) {
            (Scheme::Azure, Some((container, acct_host))) => {
                let account = acct_host.split('.').next().unwrap_or("").to_string();
                if account.is_empty() {
                    return Err(format!("{s:?}: no storage account after '@'"));
                }
                (container.to_string(), Some(account))
            }
            _ => (host.to_string(), None),
        };
        if bucket.is_empty() {
            return Err(format!("{s:?}: no bucket name"));
        }
        if !bucket
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        {
            return Err(format!("{s:?}: {bucket:?} is not a valid bucket name"));
        }
        let mut parts = Vec::new();
        for c in path.split('/') {
            match c {
                "" => {}
                "." | ".." => return Err(format!("{s:?}: '.' and '..' are not allowed")),
                c => parts.push(c),
            }
        }
        Ok(StoreUrl {
            scheme: scheme_kind,
            bucket,
            prefix: parts.join("/"),
            account,
        })
    }

    /// The key of a table-relative path (`""` is the table root).
    pub fn key(&self, rel: &str) -> String {
        match (self.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}/{rel}", self.prefix),
        }
    }
}

/// How to reach a store. Holds no secret: keys come from the environment, the AWS profile
/// files or instance metadata when the store is built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// `--endpoint-url`: an S3-compatible server (or emulator) instead of the provider's.
    pub endpoint_url: Option<String>,
    /// `--region`.
    pub region: Option<String>,
    /// `--force-path-style`: `http://endpoint/bucket/key` instead of virtual-hosted buckets.
    pub force_path_style: bool,
    /// `--no-sign-request`: anonymous access to public buckets.
    pub no_sign_request: bool,
    /// `--profile`: the AWS shared-config profile (else `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// `--allow-http`: plain HTTP even when the endpoint does not say `http://`.
    pub allow_http: bool,
}

impl StoreOptions {
    /// Plain HTTP is allowed when asked, or when the endpoint itself is `http://`.
    pub fn http_allowed(&self) -> bool {
        self.allow_http
            || self
                .endpoint_url
                .as_deref()
                .is_some_and(|e| e.to_ascii_lowercase().starts_with("http://"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_stores() {
        let u = StoreUrl::parse("s3://bucket/path/to/table/").unwrap();
        assert_eq!(u.scheme, Scheme::S3);
        assert_eq!(u.bucket, "bucket");
        assert_eq!(u.prefix, "path/to/table");
        assert_eq!(u.to_string(), "s3://bucket/path/to/table");
        assert_eq!(u.key(""), "path/to/table");
        assert_eq!(u.key(".hoodie/x"), "path/to/table/.hoodie/x");
        let g = StoreUrl::parse("gs://b//t").unwrap();
        assert_eq!((g.scheme, g.prefix.as_str()), (Scheme::Gcs, "t"));
        let a = StoreUrl::parse("abfss://data@acct.dfs.core.windows.net/tables/t").unwrap();
        assert_eq!(a.scheme, Scheme::Azure);
        assert_eq!(a.bucket, "data");
        assert_eq!(a.account.as_deref(), Some("acct"));
        let root = StoreUrl::parse("s3a://b").unwrap();
        assert_eq!(root.prefix, "");
        assert_eq!(root.key("x"), "x");
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "/local/path",
            "http://x/y",
            "s3:///t",
            "s3://b/../t",
            "s3://b/t?versionId=1",
            "s3://b a/t",
            "abfs://c@/t",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
        assert!(is_store_url("S3://b/t"));
        assert!(!is_store_url("/data/s3://x"));
        assert!(!is_store_url("file:///data"));
    }

    #[test]
    fn http_only_when_asked_or_endpoint_is_http() {
        let mut o = StoreOptions::default();
        assert!(!o.http_allowed());
        o.endpoint_url = Some("https://minio:9000".into());
        assert!(!o.http_allowed());
        o.endpoint_url = Some("HTTP://127.0.0.1:9000".into());
        assert!(o.http_allowed());
        o.endpoint_url = None;
        o.allow_http = true;
        assert!(o.http_allowed());
    }
}
