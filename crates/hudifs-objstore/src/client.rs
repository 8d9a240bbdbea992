//! The `object_store` client of a store URL: the S3, GCS and Azure builders with their
//! credentials (the environment, web identity and instance metadata, the AWS profile files,
//! `--no-sign-request`), the endpoint and region options, the retries and timeouts of every
//! request; and what to tell a user to check when a store does not answer.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use object_store::list::PaginatedListStore;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};

use crate::azure;
use crate::gcs;
use crate::profile;
use crate::url::{Scheme, StoreOptions, StoreUrl};

fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 5,
        retry_timeout: Duration::from_secs(30),
    }
}

fn client_options(opts: &StoreOptions) -> ClientOptions {
    ClientOptions::new()
        .with_allow_http(opts.http_allowed())
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(30))
}

/// A client and its single-page listings.
pub(crate) type Clients = (Arc<dyn ObjectStore>, Arc<dyn PaginatedListStore>);

/// Build the client for `url`: credentials from the environment, web identity and instance
/// metadata (the builders' own chain), plus the AWS profile files.
pub(crate) fn build_client(url: &StoreUrl, opts: &StoreOptions) -> io::Result<Clients> {
    fn both<T: ObjectStore + PaginatedListStore>(client: T) -> Clients {
        let client = Arc::new(client);
        (client.clone(), client)
    }
    let bad = |e: object_store::Error| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let store = match url.scheme {
        Scheme::S3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(&url.bucket)
                .with_retry(retry_config())
                .with_client_options(client_options(opts));
            let env_keys = std::env::var_os("AWS_ACCESS_KEY_ID").is_some();
            let prof = if opts.no_sign_request {
                None
            } else {
                profile::load(opts.profile.as_deref())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?
            };
            if let Some(p) = &prof {
                // Explicit --profile beats environment keys; else the environment wins, as
                // with the AWS CLI.
                if opts.profile.is_some() || !env_keys {
                    if let (Some(id), Some(secret)) = (&p.access_key_id, &p.secret_access_key) {
                        b = b.with_access_key_id(id).with_secret_access_key(secret);
                        if let Some(t) = &p.session_token {
                            b = b.with_token(t);
                        }
                    } else if !p.unsupported.is_empty() && opts.profile.is_some() {
                        log::warn!(
                            "AWS profile settings not supported: {}; export keys or use \
                             web identity / instance metadata",
                            p.unsupported.join(", ")
                        );
                    }
                }
                if std::env::var_os("AWS_REGION").is_none()
                    && std::env::var_os("AWS_DEFAULT_REGION").is_none()
                {
                    if let Some(r) = &p.region {
                        b = b.with_region(r);
                    }
                }
                if opts.endpoint_url.is_none() && std::env::var_os("AWS_ENDPOINT_URL").is_none() {
                    if let Some(e) = &p.endpoint_url {
                        b = b.with_endpoint(e);
                    }
                }
            }
            if let Some(r) = &opts.region {
                b = b.with_region(r);
            }
            if let Some(e) = &opts.endpoint_url {
                b = b.with_endpoint(e);
            }
            if opts.force_path_style {
                b = b.with_virtual_hosted_style_request(false);
            }
            if opts.no_sign_request {
                b = b.with_skip_signature(true);
            }
            both(b.build().map_err(bad)?)
        }
        Scheme::Gcs => {
            let mut b = gcs::builder(opts.endpoint_url.as_deref())
                .with_bucket_name(&url.bucket)
                .with_retry(retry_config())
                .with_client_options(client_options(opts));
            if opts.no_sign_request {
                b = b.with_skip_signature(true);
            }
            both(b.build().map_err(bad)?)
        }
        Scheme::Azure => {
            let b = object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_container_name(&url.bucket)
                .with_retry(retry_config())
                .with_client_options(client_options(opts));
            let mut b = azure::configure(b, url, opts)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            if opts.no_sign_request {
                b = b.with_skip_signature(true);
            }
            both(b.build().map_err(bad)?)
        }
    };
    Ok(store)
}

/// What to check when a store does not answer, by kind of store.
pub(crate) fn what_to_check(url: &StoreUrl) -> String {
    match url.scheme {
        Scheme::S3 => format!(
            "the endpoint (--endpoint-url, --region), the credentials (AWS_ACCESS_KEY_ID / \
             --profile / --no-sign-request) and that the bucket {:?} exists",
            url.bucket
        ),
        Scheme::Gcs => format!(
            "the endpoint (--endpoint-url), the credentials (GOOGLE_APPLICATION_CREDENTIALS / \
             GOOGLE_SERVICE_ACCOUNT / --no-sign-request) and that the bucket {:?} exists",
            url.bucket
        ),
        Scheme::Azure => format!(
            "the endpoint (--endpoint-url), the account and credentials \
             (AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_KEY, \
             AZURE_STORAGE_CONNECTION_STRING, --no-sign-request) and that the container {:?} \
             exists",
            url.bucket
        ),
    }
}
