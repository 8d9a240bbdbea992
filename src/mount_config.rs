//! One mount's configuration as one typed value, [`MountConfig`]: built and checked once from
//! `hudifs mount`'s flags and `-o` options (and so from `mount -t fuse.hudifs` and fstab lines,
//! which arrive as `-o`, and from a CSI volume's `mountOptions`), then handed to everything that
//! mounts and serves: the daemon's session, background launch, keeper and takeover, the FUSE
//! session, a lake's mount, following and metrics. Nothing downstream parses an option again.
//!
//! [`MountConfig::to_mount_argv`] is the one place that turns a configuration back into
//! `hudifs mount` arguments (for the daemons a launch or a keeper starts, and for a CSI plugin);
//! parsed again they give an equal value (a property test below).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use hudifs_core::listing_source::ListingMode;
use hudifs_core::timefmt::TimelineZone;

use crate::access::Access;
use crate::cli::{Cli, Command, MountArgs};
use crate::error::{Error, Result};
use crate::fs::{FsOptions, MergeSettings};
use crate::lake::LakeOptions;
use crate::store::StoreArgs;

/// A mount's configuration: every option of `hudifs mount`, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct MountConfig {
    /// The table root, or a lake: a path, `file://`, `s3://`, `gs://` or `az://`, as given.
    pub table: PathBuf,
    /// Where to mount, as given.
    pub mountpoint: PathBuf,
    /// Serve in this process (`-f`) rather than start a background daemon.
    pub foreground: bool,
    /// How to reach an object store, and where the listing comes from (`--listing`).
    pub store: StoreArgs,
    /// Base files only (`--read-optimized`).
    pub read_optimized: bool,
    /// The zone of naive times in paths (`--timezone`); `None`: the table's, else UTC.
    pub zone: Option<TimelineZone>,
    /// How often to poll the timeline where inotify cannot see it (`--poll-interval`).
    pub poll_interval: Duration,
    /// How deep to look for the tables of a lake (`--lake-depth`).
    pub lake_depth: usize,
    /// `delta/` with its change data feed (`--delta-change-data`).
    pub delta_change_data: bool,
    /// Where readers see the mount (`--iceberg-prefix`); `None`: at the mount point.
    pub iceberg_prefix: Option<PathBuf>,
    /// Where to serve metrics (`--metrics`): `HOST:PORT`, or `:PORT` for 127.0.0.1.
    pub metrics: Option<String>,
    /// Read table files through kernel passthrough where it can (false: `--no-passthrough`).
    pub passthrough: bool,
    /// FUSE worker threads (`--threads`), at least 1.
    pub threads: usize,
    /// The merged view's cache and memory limit (`--merge-cache`, `--merge-cache-size`,
    /// `--merge-memory`).
    pub merge: MergeSettings,
    /// The most memory the daemon may hold (`--max-memory`); `None`: sized from the machine
    /// ([`hudifs_storage::ceiling::default_ceiling`]).
    pub max_memory: Option<u64>,
    /// The data cache of store files (`--cache`), if any.
    pub cache: Option<PathBuf>,
    /// How much the data cache may hold, in bytes (`--max-cache-size`).
    pub max_cache_size: u64,
    /// Owner and modes every node shows (`--uid`, `--gid`, `--file-mode`, `--dir-mode`).
    pub access: Access,
    /// `--default-permissions` as asked for (see [`MountConfig::kernel_checks_permissions`]).
    pub default_permissions: bool,
    /// Let other users read the mount (`--allow-other`).
    pub allow_other: bool,
    /// The source `mount` shows (`-o fsname=`); `None`: `hudifs:<table>`.
    pub fsname: Option<String>,
    /// No program runs from the mount (`-o noexec`).
    pub noexec: bool,
}

impl MountConfig {
    /// The configuration `hudifs mount` builds from its command line: the flags, then the `-o`
    /// options applied over them (`options.rs`), checked.
    pub fn from_args(args: &MountArgs) -> Result<MountConfig> {
        let a = crate::options::resolve(args)?;
        if a.threads == 0 {
            return Err(Error::Usage("--threads must be at least 1".into()));
        }
        Ok(MountConfig {
            table: a.table,
            mountpoint: a.mountpoint,
            foreground: a.foreground,
            store: a.store,
            read_optimized: a.read_optimized,
            zone: a.timezone,
            poll_interval: Duration::from_millis(a.poll_interval),
            lake_depth: a.lake_depth,
            iceberg_prefix: a.iceberg_prefix,
            delta_change_data: a.delta_change_data,
            metrics: a.metrics,
            passthrough: !a.no_passthrough,
            threads: a.threads,
            merge: MergeSettings {
                cache_dir: a.merge_cache,
                cache_bytes: a.merge_cache_size,
                memory_cap: a.merge_memory,
            },
            max_memory: a.max_memory,
            cache: a.cache,
            max_cache_size: a.max_cache_size,
            access: Access {
                uid: a.uid,
                gid: a.gid,
                file_mode: a.file_mode,
                dir_mode: a.dir_mode,
            },
            default_permissions: a.default_permissions,
            allow_other: a.allow_other,
            fsname: a.fsname,
            noexec: a.noexec,
        })
    }

    /// The config for mounting `table` at `mountpoint` with comma-separated `-o` style option
    /// groups (e.g. ["region=eu-west-3,cache=/var/cache/hudifs", "ro"]), checked as `hudifs mount -o` checks them.
    pub fn from_options(
        table: &str,
        mountpoint: &std::path::Path,
        options: &[String],
    ) -> crate::error::Result<MountConfig> {
        // The defaults are clap's, as for `hudifs mount TABLE MNT`; `--` keeps a table or mount
        // point that starts with `-` a path.
        let argv: [OsString; 2] = [table.into(), mountpoint.into()];
        let mut args = parse_mount_args(["--".into()].into_iter().chain(argv))?;
        args.options = options.to_vec();
        MountConfig::from_args(&args)
    }

    /// The configuration that `hudifs mount` arguments (after the `mount` subcommand) give;
    /// [`MountConfig::to_mount_argv`]'s read back.
    pub fn from_mount_argv(argv: impl IntoIterator<Item = OsString>) -> Result<MountConfig> {
        MountConfig::from_args(&parse_mount_args(argv)?)
    }

    /// The `hudifs mount` arguments (after the `mount` subcommand) that reproduce this config.
    ///
    /// Relative paths (the mount point, `--merge-cache`, `--cache`) are made absolute, so that
    /// a daemon started elsewhere finds them; for a configuration whose paths are absolute,
    /// [`MountConfig::from_mount_argv`] gives back an equal value.
    pub fn to_mount_argv(&self) -> Vec<OsString> {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let mut v: Vec<OsString> = Vec::new();
        let path_flag = |v: &mut Vec<OsString>, flag: &str, p: &Path| {
            let mut a = OsString::from(format!("{flag}="));
            a.push(abs(p));
            v.push(a);
        };
        let arg = |v: &mut Vec<OsString>, a: &str| v.push(a.into());
        if self.foreground {
            arg(&mut v, "-f");
        }
        if self.read_optimized {
            arg(&mut v, "--read-optimized");
        }
        if self.allow_other {
            arg(&mut v, "--allow-other");
        }
        if !self.passthrough {
            arg(&mut v, "--no-passthrough");
        }
        if let Some(z) = &self.zone {
            // Two words, as a person types it (`--timezone` takes values that start with `-`,
            // such as -05:00).
            arg(&mut v, "--timezone");
            arg(&mut v, &z.to_string());
        }
        arg(
            &mut v,
            &format!("--poll-interval={}", self.poll_interval.as_millis()),
        );
        if let Some(m) = &self.metrics {
            arg(&mut v, &format!("--metrics={m}"));
        }
        arg(&mut v, &format!("--threads={}", self.threads));
        arg(&mut v, &format!("--lake-depth={}", self.lake_depth));
        if let Some(p) = &self.iceberg_prefix {
            path_flag(&mut v, "--iceberg-prefix", p);
        }
        if self.delta_change_data {
            arg(&mut v, "--delta-change-data");
        }
        if let Some(dir) = &self.merge.cache_dir {
            path_flag(&mut v, "--merge-cache", dir);
        }
        arg(
            &mut v,
            &format!("--merge-cache-size={}", self.merge.cache_bytes),
        );
        arg(&mut v, &format!("--merge-memory={}", self.merge.memory_cap));
        if let Some(m) = self.max_memory {
            arg(&mut v, &format!("--max-memory={m}"));
        }
        if let Some(dir) = &self.cache {
            path_flag(&mut v, "--cache", dir);
        }
        arg(&mut v, &format!("--max-cache-size={}", self.max_cache_size));
        let s = &self.store;
        if let Some(e) = &s.endpoint_url {
            arg(&mut v, &format!("--endpoint-url={e}"));
        }
        if let Some(r) = &s.region {
            arg(&mut v, &format!("--region={r}"));
        }
        if s.force_path_style {
            arg(&mut v, "--force-path-style");
        }
        if s.no_sign_request {
            arg(&mut v, "--no-sign-request");
        }
        if let Some(p) = &s.profile {
            arg(&mut v, &format!("--profile={p}"));
        }
        if s.allow_http {
            arg(&mut v, "--allow-http");
        }
        if s.listing != ListingMode::Auto {
            arg(&mut v, &format!("--listing={}", s.listing));
        }
        // The options without a flag of their own (a name holds no comma: `-o` splits there).
        if let Some(name) = &self.fsname {
            arg(&mut v, &format!("-ofsname={name}"));
        }
        if self.noexec {
            arg(&mut v, "-onoexec");
        }
        if let Some(uid) = self.access.uid {
            arg(&mut v, &format!("--uid={uid}"));
        }
        if let Some(gid) = self.access.gid {
            arg(&mut v, &format!("--gid={gid}"));
        }
        if let Some(mode) = self.access.file_mode {
            arg(&mut v, &format!("--file-mode={mode:o}"));
        }
        if let Some(mode) = self.access.dir_mode {
            arg(&mut v, &format!("--dir-mode={mode:o}"));
        }
        if self.default_permissions {
            arg(&mut v, "--default-permissions");
        }
        // Last, after `--`: a table or mount point that starts with `-` stays a path.
        arg(&mut v, "--");
        v.push(self.table.clone().into());
        v.push(abs(&self.mountpoint).into());
        v
    }

    /// What the file system is told: the view, zone, merge limits, owner and modes, listing.
    pub fn fs_options(&self) -> FsOptions {
        FsOptions {
            read_optimized: self.read_optimized,
            zone: self.zone.clone(),
            merge: self.merge.clone(),
            access: self.access,
            listing: self.store.listing,
            sources: self.store.clone(),
            delta_change_data: self.delta_change_data,
            location: Some(
                self.iceberg_prefix
                    .clone()
                    .unwrap_or_else(|| {
                        std::path::absolute(&self.mountpoint)
                            .unwrap_or_else(|_| self.mountpoint.clone())
                    })
                    .to_string_lossy()
                    .trim_end_matches('/')
                    .to_string(),
            ),
        }
    }

    /// How a lake mount looks for its tables and follows them.
    pub fn lake_options(&self) -> LakeOptions {
        LakeOptions {
            depth: self.lake_depth,
            poll_interval: self.poll_period(),
            follow: true,
        }
    }

    /// The period at which the follower polls (`--poll-interval`, at least 10 ms).
    pub fn poll_period(&self) -> Duration {
        self.poll_interval.max(Duration::from_millis(10))
    }

    /// Whether the table lives on an object store.
    pub fn is_remote(&self) -> bool {
        crate::store::is_remote(&self.table)
    }

    /// The data cache of store files and its size, if asked for.
    pub fn data_cache(&self) -> Option<(&Path, u64)> {
        self.cache.as_deref().map(|d| (d, self.max_cache_size))
    }

    /// Whether to ask the kernel for passthrough: asked for, and the table is local (remote
    /// files have no descriptor to pass through).
    pub fn wants_passthrough(&self) -> bool {
        self.passthrough && !self.is_remote()
    }

    /// Whether the kernel checks permission bits: asked for, or implied by an owner or mode
    /// (the bits would mean nothing otherwise).
    pub fn kernel_checks_permissions(&self) -> bool {
        self.default_permissions || self.access.is_set()
    }

    /// The source `mount` shows for the table described as `table`: `-o fsname=`, else
    /// `hudifs:<table>`.
    pub fn fsname_for(&self, table: &str) -> String {
        self.fsname
            .clone()
            .unwrap_or_else(|| format!("hudifs:{table}"))
    }
}

/// `hudifs mount` arguments (after `mount`) as clap reads them; its errors are usage errors.
fn parse_mount_args(argv: impl IntoIterator<Item = OsString>) -> Result<MountArgs> {
    let full = [OsString::from("hudifs"), OsString::from("mount")]
        .into_iter()
        .chain(argv);
    match Cli::try_parse_from(full) {
        Ok(Cli {
            command: Command::Mount(args),
        }) => Ok(args),
        Ok(_) => Err(Error::Usage("not a hudifs mount command line".into())),
        Err(e) => Err(Error::Usage(e.to_string().trim_end().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn opts(groups: &[&str]) -> Vec<String> {
        groups.iter().map(|g| g.to_string()).collect()
    }

    #[test]
    fn options_become_typed_fields() {
        let c = MountConfig::from_options(
            "s3://lake/t",
            Path::new("/mnt/t"),
            &opts(&[
                "region=eu-west-3,cache=/var/cache/hudifs,ro",
                "timezone=Asia/Kolkata,poll_interval=250,fsname=trips,noexec,allow_other",
                "uid=12,file_mode=0440,listing=storage,max_cache_size=2G,merge_memory=64M",
            ]),
        )
        .unwrap();
        assert_eq!(c.table, Path::new("s3://lake/t"));
        assert_eq!(c.mountpoint, Path::new("/mnt/t"));
        assert_eq!(c.store.region.as_deref(), Some("eu-west-3"));
        assert_eq!(c.cache.as_deref(), Some(Path::new("/var/cache/hudifs")));
        assert_eq!(c.zone, Some(TimelineZone::parse("Asia/Kolkata").unwrap()));
        assert_eq!(c.poll_interval, Duration::from_millis(250));
        assert_eq!(c.fsname.as_deref(), Some("trips"));
        assert!(c.noexec && c.allow_other && !c.foreground);
        assert_eq!((c.access.uid, c.access.file_mode), (Some(12), Some(0o440)));
        assert!(
            c.kernel_checks_permissions(),
            "implied by uid and file_mode"
        );
        assert_eq!(c.store.listing, ListingMode::Storage);
        assert_eq!(c.max_cache_size, 2 << 30);
        assert_eq!(c.max_memory, None, "sized from the machine unless given");
        assert_eq!(c.merge.memory_cap, 64 << 20);
        assert_eq!(
            c.data_cache(),
            Some((Path::new("/var/cache/hudifs"), 2 << 30))
        );
        assert!(
            c.passthrough && !c.wants_passthrough(),
            "a store has no descriptors"
        );
        assert_eq!(c.fsname_for("s3://lake/t"), "trips");
    }

    #[test]
    fn defaults_are_the_command_lines() {
        let c = MountConfig::from_options("/t", Path::new("/m"), &[]).unwrap();
        let flags = MountConfig::from_mount_argv(["/t", "/m"].map(OsString::from)).unwrap();
        assert_eq!(c, flags);
        assert_eq!(c.poll_interval, Duration::from_millis(1000));
        assert_eq!((c.threads, c.lake_depth), (4, crate::lake::DEFAULT_DEPTH));
        assert_eq!(c.merge, MergeSettings::default());
        assert_eq!(c.zone, None);
        assert!(c.wants_passthrough() && !c.kernel_checks_permissions());
        assert_eq!(c.fsname_for("/t"), "hudifs:/t");
    }

    #[test]
    fn permissions_imply_kernel_checks() {
        let checks = |o: &str| {
            MountConfig::from_options("/t", Path::new("/m"), &opts(&[o]))
                .unwrap()
                .kernel_checks_permissions()
        };
        assert!(!checks("ro"));
        assert!(checks("default_permissions"));
        assert!(checks("file_mode=0400"));
        assert!(checks("dir_mode=0500"));
        assert!(checks("uid=0"));
        assert!(checks("gid=0"));
    }

    #[test]
    fn bad_options_are_usage_errors_naming_the_option() {
        let err = |groups: &[&str]| {
            let e = MountConfig::from_options("/t", Path::new("/m"), &opts(groups)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        };
        assert!(err(&["ro", "rw"]).contains("-o rw"));
        assert!(err(&["region=x,frobnicate"]).contains("-o frobnicate"));
        assert!(err(&["timezone=Mars/Olympus"]).contains("-o timezone=Mars/Olympus"));
        assert!(err(&["threads=0"]).contains("--threads"));
        assert!(err(&["fsname"]).contains("fsname=NAME"));
        assert!(err(&["noexec=1"]).contains("-o noexec=1"));
        let flag =
            MountConfig::from_mount_argv(["--timezone", "Mars", "/t", "/m"].map(OsString::from))
                .unwrap_err();
        assert_eq!(flag.exit_code(), 2);
        assert!(flag.to_string().contains("--timezone"), "{flag}");
    }

    #[test]
    fn the_argv_makes_relative_paths_absolute() {
        let c = MountConfig::from_options("t", Path::new("m"), &opts(&["cache=c,merge_cache=mc"]))
            .unwrap();
        let back = MountConfig::from_mount_argv(c.to_mount_argv()).unwrap();
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(back.mountpoint, cwd.join("m"));
        assert_eq!(back.cache, Some(cwd.join("c")));
        assert_eq!(back.merge.cache_dir, Some(cwd.join("mc")));
        assert_eq!(back.table, Path::new("t"), "the table as given");
    }

    fn word() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_./:-]{1,12}"
    }

    fn abs_path() -> impl Strategy<Value = PathBuf> {
        prop::collection::vec("[A-Za-z0-9_.-]{1,8}", 1..4).prop_map(|parts| {
            let mut p = PathBuf::from("/");
            for s in parts.iter().filter(|s| *s != "." && *s != "..") {
                p.push(s);
            }
            p
        })
    }

    fn zone() -> impl Strategy<Value = Option<TimelineZone>> {
        prop_oneof![
            Just(None),
            Just(Some(TimelineZone::Utc)),
            Just(Some(TimelineZone::Local)),
            Just(Some(TimelineZone::parse("America/Chicago").unwrap())),
            (any::<bool>(), 0u32..24, 0u32..60).prop_map(|(west, h, m)| {
                let sign = if west { '-' } else { '+' };
                Some(TimelineZone::parse(&format!("{sign}{h:02}:{m:02}")).unwrap())
            }),
        ]
    }

    fn mode() -> impl Strategy<Value = Option<u16>> {
        prop::option::of((0u16..0o1000).prop_map(|m| m & 0o555))
    }

    fn store() -> impl Strategy<Value = StoreArgs> {
        (
            prop::option::of(word()),
            prop::option::of(word()),
            any::<[bool; 3]>(),
            prop::option::of(word()),
            prop_oneof![
                Just(ListingMode::Auto),
                Just(ListingMode::Metadata),
                Just(ListingMode::Storage),
                Just(ListingMode::Verify),
            ],
        )
            .prop_map(|(endpoint_url, region, b, profile, listing)| StoreArgs {
                endpoint_url,
                region,
                force_path_style: b[0],
                no_sign_request: b[1],
                profile,
                allow_http: b[2],
                listing,
            })
    }

    fn config() -> impl Strategy<Value = MountConfig> {
        (
            (
                prop_oneof![
                    abs_path(),
                    Just(PathBuf::from("s3://b/t")),
                    Just(PathBuf::from("-t"))
                ],
                abs_path(),
                any::<[bool; 7]>(),
                store(),
                zone(),
                0u64..1_000_000,
                0usize..10,
                prop::option::of(word()),
            ),
            (
                1usize..64,
                prop::option::of(abs_path()),
                any::<[u64; 3]>(),
                (prop::option::of(abs_path()), prop::option::of(any::<u64>())),
                (
                    prop::option::of(any::<u32>()),
                    prop::option::of(any::<u32>()),
                ),
                (mode(), mode()),
                prop::option::of("[A-Za-z0-9_:.-]{1,12}"),
                prop::option::of(abs_path()),
            ),
        )
            .prop_map(
                |(
                    (table, mountpoint, b, store, zone, poll, lake_depth, metrics),
                    (
                        threads,
                        merge_dir,
                        sizes,
                        (cache, max_memory),
                        (uid, gid),
                        (file_mode, dir_mode),
                        fsname,
                        iceberg_prefix,
                    ),
                )| MountConfig {
                    table,
                    mountpoint,
                    foreground: b[0],
                    store,
                    read_optimized: b[1],
                    zone,
                    poll_interval: Duration::from_millis(poll),
                    lake_depth,
                    iceberg_prefix,
                    delta_change_data: b[6],
                    metrics,
                    passthrough: b[2],
                    threads,
                    merge: MergeSettings {
                        cache_dir: merge_dir,
                        cache_bytes: sizes[0],
                        memory_cap: sizes[1],
                    },
                    max_memory,
                    cache,
                    max_cache_size: sizes[2],
                    access: Access {
                        uid,
                        gid,
                        file_mode,
                        dir_mode,
                    },
                    default_permissions: b[3],
                    allow_other: b[4],
                    fsname,
                    noexec: b[5],
                },
            )
    }

    proptest! {
        /// What a launch or a keeper gives its daemon, and a CSI plugin its mount, is the
        /// configuration it has.
        #[test]
        fn the_mount_argv_reads_back_to_the_same_config(c in config()) {
            let argv = c.to_mount_argv();
            let back = MountConfig::from_mount_argv(argv.clone());
            prop_assert_eq!(back.as_ref().ok(), Some(&c), "{:?} -> {:?}", argv, back);
        }
    }
}
