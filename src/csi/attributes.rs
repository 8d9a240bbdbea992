//! A CSI volume's attributes (`volumeAttributes` of an inline volume or a PersistentVolume) as
//! one checked [`VolumeSpec`]: which table, which view of it, pinned or not, and the `hudifs
//! mount -o` options. Everything here is checked at publish time, so a bad volume fails its
//! publish with `InvalidArgument` and a message kubelet shows in the pod's events.

use std::collections::HashMap;

/// The attribute names a volume may carry (plus kubelet's own `csi.storage.k8s.io/*`).
pub const TABLE: &str = "table";
pub const VIEW: &str = "view";
pub const PIN: &str = "pin";
pub const MOUNT_OPTIONS: &str = "mountOptions";
const KNOWN: [&str; 4] = [TABLE, VIEW, PIN, MOUNT_OPTIONS];

/// Options the plugin decides itself: a volume may not set them.
const PLUGIN_OWNED: [(&str, &str); 3] = [
    (
        "foreground",
        "the plugin runs each daemon in the background itself",
    ),
    ("fsname", "the plugin names each mount after its table"),
    (
        "metrics",
        "a volume's daemon is shared by pods; scrape the plugin's --metrics instead",
    ),
];

/// The prefixes of the environment variables a volume's secrets may set: the credentials hudifs
/// reads for S3, Google Cloud Storage and Azure (SEMANTICS.md §9).
const SECRET_PREFIXES: [&str; 3] = ["AWS_", "GOOGLE_", "AZURE_"];

/// A volume's secrets (`nodePublishSecretRef`): environment variables for its daemon. Their
/// values are never shown: `Debug` names the variables only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(pub Vec<(String, String)>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| k))
            .finish()
    }
}

impl Secrets {
    /// The secrets of a publish request, checked: each key names a credential variable.
    pub fn from_request(secrets: &HashMap<String, String>) -> Result<Secrets, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in secrets {
            let name_ok = !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !name_ok || !SECRET_PREFIXES.iter().any(|p| k.starts_with(p)) {
                return Err(format!(
                    "secret key {k:?} is not a credential variable hudifs reads (names start \
                     with {})",
                    SECRET_PREFIXES.join(", ")
                ));
            }
            out.push((k.clone(), v.clone()));
        }
        out.sort();
        Ok(Secrets(out))
    }
}

/// When a volume's view is fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// The view as named: `latest/` moves as writers commit.
    Follow,
    /// `latest` is resolved once, when the volume is published: every pod of a job that
    /// publishes it reads that one instant (`as_of/<instant>`).
    MountTime,
}

/// A volume, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeSpec {
    /// The table: a path or a store URL.
    pub table: String,
    /// The view's path inside the mount, relative, without `.` or `..` components.
    pub view: String,
    pub pin: Pin,
    /// `-o` option items in the order given: the `mountOptions` attribute, then the
    /// PersistentVolume's `mountOptions` (kubelet passes those as mount flags).
    pub options: Vec<String>,
}

/// The volume that `context` (the volume attributes) and `mount_flags` (a PersistentVolume's
/// `mountOptions`) describe, or why not.
pub fn parse(
    context: &HashMap<String, String>,
    mount_flags: &[String],
) -> Result<VolumeSpec, String> {
    for key in context.keys() {
        if !KNOWN.contains(&key.as_str()) && !key.starts_with("csi.storage.k8s.io/") {
            return Err(format!(
                "unknown volume attribute {key:?} (known: {})",
                KNOWN.join(", ")
            ));
        }
    }
    let table = context
        .get(TABLE)
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .ok_or("the volume attribute \"table\" is required: a table path or an s3://, gs:// or az:// URL")?
        .to_string();
    let view = check_view(context.get(VIEW).map(String::as_str).unwrap_or("latest"))?;
    let pin = match context.get(PIN).map(|p| p.trim()) {
        None | Some("") | Some("none") => Pin::Follow,
        Some("mount-time") => Pin::MountTime,
        Some(other) => {
            return Err(format!(
                "pin: {other:?} is not a pin (use \"mount-time\", or leave it out)"
            ))
        }
    };
    if pin == Pin::MountTime {
        pinned_view(&view, "0")?;
    }
    let mut options = Vec::new();
    let groups = context
        .get(MOUNT_OPTIONS)
        .into_iter()
        .map(String::as_str)
        .chain(mount_flags.iter().map(String::as_str));
    for item in groups.flat_map(|g| g.split(',')).map(str::trim) {
        if item.is_empty() {
            continue;
        }
        let name = item.split_once('=').map_or(item, |(n, _)| n);
        if let Some((_, why)) = PLUGIN_OWNED.iter().find(|(n, _)| *n == name) {
            return Err(format!(
                "mount option {item:?} cannot be set on a volume: {why}"
            ));
        }
        options.push(item.to_string());
    }
    Ok(VolumeSpec {
        table,
        view,
        pin,
        options,
    })
}

/// `view` as a relative path inside the mount: no absolute path, no `.` or `..` component (a
/// volume must not reach outside its mount), no empty component.
pub fn check_view(view: &str) -> Result<String, String> {
    let trimmed = view.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("latest".into());
    }
    let bad = || {
        format!(
            "view {view:?} is not a view path inside the mount (e.g. latest, merged/latest, \
             as_of/2025-12-20T21:01:28Z, incremental/T1..T2)"
        )
    };
    // Component by component: `Path::components` would drop a `.` in the middle.
    if trimmed.starts_with('/')
        || trimmed
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad());
    }
    Ok(trimmed.to_string())
}

/// The view that pins `view` at `instant`: `latest[/…]` becomes `as_of/<instant>[/…]` and
/// `merged/latest[/…]` becomes `merged/as_of/<instant>[/…]` (SEMANTICS.md §2.3: reading
/// `as_of/<user.hudi.instant of latest/>` is how a job stays on one snapshot).
pub fn pinned_view(view: &str, instant: &str) -> Result<String, String> {
    let swap = |prefix: &str, rest: &str| format!("{prefix}as_of/{instant}{rest}");
    for prefix in ["", "merged/"] {
        if let Some(rest) = view.strip_prefix(prefix) {
            if rest == "latest" {
                return Ok(swap(prefix, ""));
            }
            if let Some(tail) = rest.strip_prefix("latest/") {
                return Ok(swap(prefix, &format!("/{tail}")));
            }
        }
    }
    Err(format!(
        "pin: mount-time pins a latest view (latest, merged/latest, or a directory in them); \
         view {view:?} does not move"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_volume_needs_a_table_and_defaults_to_latest() {
        let e = parse(&ctx(&[]), &[]).unwrap_err();
        assert!(e.contains("\"table\" is required"), "{e}");
        let v = parse(&ctx(&[("table", "s3://b/t")]), &[]).unwrap();
        assert_eq!(
            v,
            VolumeSpec {
                table: "s3://b/t".into(),
                view: "latest".into(),
                pin: Pin::Follow,
                options: vec![],
            }
        );
    }

    #[test]
    fn options_come_from_the_attribute_then_the_volume_mount_options() {
        let v = parse(
            &ctx(&[
                ("table", "/t"),
                ("mountOptions", "region=eu-west-3, cache=/c,,"),
                ("csi.storage.k8s.io/pod.name", "p"),
            ]),
            &["ro".into(), "poll_interval=500,read_optimized".into()],
        )
        .unwrap();
        assert_eq!(
            v.options,
            [
                "region=eu-west-3",
                "cache=/c",
                "ro",
                "poll_interval=500",
                "read_optimized"
            ]
        );
    }

    #[test]
    fn unknown_attributes_and_plugin_owned_options_are_refused() {
        let e = parse(&ctx(&[("table", "/t"), ("tabel", "/t")]), &[]).unwrap_err();
        assert!(e.contains("unknown volume attribute \"tabel\""), "{e}");
        for o in ["foreground", "fsname=x", "metrics=:9000"] {
            let e = parse(&ctx(&[("table", "/t"), ("mountOptions", o)]), &[]).unwrap_err();
            assert!(e.contains("cannot be set on a volume"), "{o}: {e}");
        }
        let e = parse(&ctx(&[("table", "/t"), ("pin", "forever")]), &[]).unwrap_err();
        assert!(e.contains("not a pin"), "{e}");
    }

    #[test]
    fn views_stay_inside_the_mount() {
        for ok in [
            "latest",
            "merged/latest/",
            "as_of/2025-12-20T21:01:28Z",
            "incremental/20251220210108078..20251220210129235",
            "latest/city=chennai",
        ] {
            assert!(check_view(ok).is_ok(), "{ok}");
        }
        assert_eq!(check_view("").unwrap(), "latest");
        for bad in [
            "/etc",
            "..",
            "latest/../..",
            "./latest",
            "latest//x",
            "a/./b",
        ] {
            assert!(check_view(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pinning_turns_latest_into_as_of() {
        let p = |v| pinned_view(v, "20251220210129235");
        assert_eq!(p("latest").unwrap(), "as_of/20251220210129235");
        assert_eq!(
            p("merged/latest").unwrap(),
            "merged/as_of/20251220210129235"
        );
        assert_eq!(
            p("latest/city=sf").unwrap(),
            "as_of/20251220210129235/city=sf"
        );
        for fixed in [
            "as_of/2025",
            "incremental/1..2",
            "timeline",
            "latestx",
            "merged",
        ] {
            assert!(p(fixed).is_err(), "{fixed}");
        }
        let e = parse(
            &ctx(&[("table", "/t"), ("pin", "mount-time"), ("view", "timeline")]),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("does not move"), "{e}");
    }
}
