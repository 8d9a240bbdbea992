//! How a `gs://` table reaches a GCS endpoint other than Google's (docs/SEMANTICS.md §9): the
//! client library takes another base URL only from a service-account key's `gcs_base_url`, so
//! `--endpoint-url` on `gs://` becomes such a key with OAuth off (`disable_oauth`): requests
//! without credentials, as the emulators (fake-gcs-server) take them. Credentials from the
//! environment (GOOGLE_SERVICE_ACCOUNT, GOOGLE_APPLICATION_CREDENTIALS, instance metadata) are
//! used when no endpoint is given.

use object_store::gcp::GoogleCloudStorageBuilder;

/// A JSON string literal of `s`.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The service-account key that sends the client's requests to `endpoint`, unauthenticated.
pub fn emulator_key(endpoint: &str) -> String {
    format!(
        "{{\"gcs_base_url\": {}, \"disable_oauth\": true, \"client_email\": \"\", \
         \"private_key\": \"\", \"private_key_id\": \"\"}}",
        json_string(endpoint.trim_end_matches('/'))
    )
}

/// The builder of a `gs://` client: from the environment, or, with `--endpoint-url`, for that
/// endpoint without OAuth (the environment's service account is then not read: the library
/// takes one key only).
pub(crate) fn builder(endpoint: Option<&str>) -> GoogleCloudStorageBuilder {
    match endpoint {
        Some(e) => GoogleCloudStorageBuilder::new().with_service_account_key(emulator_key(e)),
        None => GoogleCloudStorageBuilder::from_env(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_becomes_an_unauthenticated_key() {
        assert_eq!(
            emulator_key("http://127.0.0.1:4443/"),
            "{\"gcs_base_url\": \"http://127.0.0.1:4443\", \"disable_oauth\": true, \
             \"client_email\": \"\", \"private_key\": \"\", \"private_key_id\": \"\"}"
        );
        assert!(emulator_key("http://a\"b\\c").contains("\"http://a\\\"b\\\\c\""));
    }
}
