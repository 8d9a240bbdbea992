//! The AWS CLI's shared configuration and credentials files, which `object_store` does not read:
//! `~/.aws/config` (`[default]`, `[profile NAME]`) and `~/.aws/credentials` (`[NAME]`), found
//! through `AWS_CONFIG_FILE` / `AWS_SHARED_CREDENTIALS_FILE`, the profile through `--profile` or
//! `AWS_PROFILE`. Only what a profile says directly is used: keys, session token, region,
//! endpoint; `source_profile`, `credential_process` and SSO are not followed (they are named in
//! the error so the user can export keys instead).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// What one profile says. `Debug` never prints a secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
    /// Settings this parser does not follow (`source_profile`, `credential_process`,
    /// `sso_session`, `role_arn`...), by name.
    pub unsupported: Vec<String>,
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .field("unsupported", &self.unsupported)
            .finish()
    }
}

/// Sections of an INI file: section name -> key -> value (keys lower-cased, values trimmed).
pub type Sections = HashMap<String, HashMap<String, String>>;

/// Parse the AWS INI dialect: `[section]`, `key = value`, `#`/`;` comments, indented lines
/// continuing a nested block (`s3 =` followed by `  key = value`) are kept as `s3.key`.
pub fn parse_ini(text: &str) -> Sections {
    let mut out: Sections = HashMap::new();
    let mut section: Option<String> = None;
    let mut nested: Option<String> = None;
    for raw in text.lines() {
        let indented = raw.starts_with(' ') || raw.starts_with('\t');
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            let name = line[1..line.len() - 1].trim().to_string();
            out.entry(name.clone()).or_default();
            section = Some(name);
            nested = None;
            continue;
        }
        let Some(sec) = &section else { continue };
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let key = k.trim().to_ascii_lowercase();
        let value = v.trim().to_string();
        let map = out.entry(sec.clone()).or_default();
        if indented {
            if let Some(parent) = &nested {
                map.insert(format!("{parent}.{key}"), value);
            }
            continue;
        }
        if value.is_empty() {
            nested = Some(key);
            continue;
        }
        nested = None;
        map.insert(key, value);
    }
    out
}

/// Where the files are: the environment's override, else `~/.aws/NAME`.
pub fn default_path(env_var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env_var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".aws").join(name))
}

/// The profile named `name` from the text of a config file and a credentials file (either may
/// be absent). The credentials file wins for keys, as with the AWS CLI. `None` if neither file
/// has the profile.
pub fn resolve(name: &str, config: Option<&str>, credentials: Option<&str>) -> Option<Profile> {
    let cfg = config.map(parse_ini).unwrap_or_default();
    let creds = credentials.map(parse_ini).unwrap_or_default();
    let cfg_section = if name == "default" {
        cfg.get("default").or_else(|| cfg.get("profile default"))
    } else {
        cfg.get(&format!("profile {name}"))
    };
    let cred_section = creds.get(name);
    if cfg_section.is_none() && cred_section.is_none() {
        return None;
    }
    let get = |key: &str| -> Option<String> {
        cred_section
            .and_then(|s| s.get(key))
            .or_else(|| cfg_section.and_then(|s| s.get(key)))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let mut unsupported: Vec<String> = [
        "source_profile",
        "credential_process",
        "sso_session",
        "sso_start_url",
        "role_arn",
        "web_identity_token_file",
    ]
    .iter()
    .filter(|k| get(k).is_some())
    .map(|k| k.to_string())
    .collect();
    unsupported.sort();
    Some(Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token").or_else(|| get("aws_security_token")),
        region: get("region"),
        endpoint_url: get("endpoint_url").or_else(|| get("s3.endpoint_url")),
        unsupported,
    })
}

/// Load profile `name` from the files the environment names (or `~/.aws/`). `Ok(None)` when
/// no file has it and the profile was not asked for explicitly; an error when it was.
pub fn load(name: Option<&str>) -> Result<Option<Profile>, String> {
    let explicit = name.is_some() || std::env::var_os("AWS_PROFILE").is_some();
    let name = name
        .map(str::to_string)
        .or_else(|| std::env::var("AWS_PROFILE").ok())
        .unwrap_or_else(|| "default".to_string());
    let read =
        |p: Option<PathBuf>| -> Option<String> { p.and_then(|p| std::fs::read_to_string(p).ok()) };
    let config = read(default_path("AWS_CONFIG_FILE", "config"));
    let creds = read(default_path("AWS_SHARED_CREDENTIALS_FILE", "credentials"));
    match resolve(&name, config.as_deref(), creds.as_deref()) {
        Some(p) => Ok(Some(p)),
        None if explicit => Err(format!(
            "AWS profile {name:?} is in neither the config file ({}) nor the credentials file ({})",
            show(default_path("AWS_CONFIG_FILE", "config")),
            show(default_path("AWS_SHARED_CREDENTIALS_FILE", "credentials")),
        )),
        None => Ok(None),
    }
}

fn show(p: Option<PathBuf>) -> String {
    p.map(|p| p.display().to_string())
        .unwrap_or_else(|| "unknown: no HOME".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "\
[default]
region = us-east-1

[profile dev]
region = eu-west-3
s3 =
  endpoint_url = http://127.0.0.1:9000
  addressing_style = path
# a comment
[profile assumed]
role_arn = arn:aws:iam::123:role/x
source_profile = dev
";
    const CREDS: &str = "\
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = secretdefault

[dev]
aws_access_key_id=AKIDDEV
aws_secret_access_key=secret/dev=
aws_session_token = tok
; another comment
";

    #[test]
    fn default_profile_merges_both_files() {
        let p = resolve("default", Some(CONFIG), Some(CREDS)).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDDEFAULT"));
        assert_eq!(p.secret_access_key.as_deref(), Some("secretdefault"));
        assert_eq!(p.region.as_deref(), Some("us-east-1"));
        assert!(p.unsupported.is_empty());
    }

    #[test]
    fn named_profile_uses_profile_prefix_in_config_and_nested_s3_block() {
        let p = resolve("dev", Some(CONFIG), Some(CREDS)).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDDEV"));
        // '=' inside a value survives: only the first one separates.
        assert_eq!(p.secret_access_key.as_deref(), Some("secret/dev="));
        assert_eq!(p.session_token.as_deref(), Some("tok"));
        assert_eq!(p.region.as_deref(), Some("eu-west-3"));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
    }

    #[test]
    fn unknown_profile_and_unsupported_settings() {
        assert!(resolve("nope", Some(CONFIG), Some(CREDS)).is_none());
        assert!(resolve("dev", None, None).is_none());
        let p = resolve("assumed", Some(CONFIG), None).unwrap();
        assert_eq!(p.unsupported, vec!["role_arn", "source_profile"]);
        assert!(p.access_key_id.is_none());
    }

    #[test]
    fn credentials_file_alone_is_enough() {
        let p = resolve("dev", None, Some(CREDS)).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDDEV"));
        assert!(p.region.is_none());
    }

    #[test]
    fn debug_never_shows_secrets() {
        let p = resolve("dev", Some(CONFIG), Some(CREDS)).unwrap();
        let s = format!("{p:?}");
        assert!(!s.contains("secret/dev="), "{s}");
        assert!(!s.contains("tok\""), "{s}");
        assert!(s.contains("AKIDDEV"));
    }
}
