//! Mount options as `mount(8)`, `/etc/fstab` and systemd give them (SEMANTICS.md §7.1, §7.7).
//!
//! [`OPTIONS`] is the one table from `-o` option name to what it does: every option of
//! `hudifs mount` spelled the fstab way (`poll_interval=500`, `read_optimized`, `uid=analyst`),
//! the kernel options that have no flag (`fsname=`, `noexec`), the generic options `mount(8)`,
//! `mount.fuse3` and systemd put on the line (accepted and ignored), and `rw` (refused). A new
//! option is a new row; [`resolve`] folds a command line's `-o` options into its flags, each
//! value parsed once, and `mount_config.rs` makes the one typed configuration of the result.
//!
//! [`helper_argv`] accepts `mount.fuse3`'s calling convention: `mount -t fuse.hudifs TABLE MNT -o
//! OPTS` (or an fstab line of type `fuse.hudifs`) runs `mount.fuse3`, which runs `hudifs TABLE MNT
//! -o OPTS`, without a subcommand.

use std::ffi::OsString;

use crate::access;
use crate::cli::MountArgs;
use crate::error::{Error, Result};

/// What an option does.
#[derive(Clone, Copy)]
pub enum Effect {
    /// An option without a value that sets a flag.
    Flag(fn(&mut MountArgs)),
    /// An option with a value (`name=VALUE`; the string names the value in messages).
    Value(&'static str, fn(&mut MountArgs, &str) -> Result<(), String>),
    /// Accepted, with or without a value, and ignored: the row's text says why.
    Ignored,
    /// Refused: the row's text is the message.
    Refused,
}

/// One row of the table.
#[derive(Clone, Copy)]
pub struct MountOpt {
    /// The option's name; a name ending in `*` matches every option that starts with the rest.
    pub name: &'static str,
    pub effect: Effect,
    /// What it does (the `--help` and man page words), or why it is ignored or refused.
    pub text: &'static str,
}

const fn flag(name: &'static str, set: fn(&mut MountArgs), text: &'static str) -> MountOpt {
    MountOpt {
        name,
        effect: Effect::Flag(set),
        text,
    }
}

const fn value(
    name: &'static str,
    meta: &'static str,
    set: fn(&mut MountArgs, &str) -> Result<(), String>,
    text: &'static str,
) -> MountOpt {
    MountOpt {
        name,
        effect: Effect::Value(meta, set),
        text,
    }
}

const fn ignored(name: &'static str, text: &'static str) -> MountOpt {
    MountOpt {
        name,
        effect: Effect::Ignored,
        text,
    }
}

fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{v:?} is not a number in range"))
}

const ALWAYS_RO: &str = "hudifs mounts are always read-only";
const NODEV_NOSUID: &str =
    "hudifs mounts are always nodev,nosuid (mount.fuse3 adds dev,suid unless told otherwise)";
const READ_ONLY_TIMES: &str = "a read-only mount never updates access times or syncs writes";
const FOR_MOUNT: &str = "for mount(8), mount.fuse3 or systemd, not for the file system";

/// Every `-o` option hudifs knows, in the order `--help` lists them.
pub const OPTIONS: &[MountOpt] = &[
    // The options of `hudifs mount`, spelled the fstab way.
    flag(
        "foreground",
        |a| a.foreground = true,
        "--foreground: serve in the foreground",
    ),
    flag(
        "delta_change_data",
        |a| a.delta_change_data = true,
        "--delta-change-data: delta/ with its change data feed",
    ),
    flag(
        "read_optimized",
        |a| a.read_optimized = true,
        "--read-optimized: base files only",
    ),
    value(
        "timezone",
        "TZ",
        |a, v| {
            a.timezone = Some(crate::cli::parse_zone(v)?);
            Ok(())
        },
        "--timezone: zone of naive times in paths",
    ),
    value(
        "poll_interval",
        "MS",
        |a, v| {
            a.poll_interval = number(v)?;
            Ok(())
        },
        "--poll-interval: timeline polling period in milliseconds",
    ),
    value(
        "metrics",
        "ADDR",
        |a, v| {
            a.metrics = Some(v.to_string());
            Ok(())
        },
        "--metrics: serve metrics on HOST:PORT",
    ),
    value(
        "lake_depth",
        "N",
        |a, v| {
            a.lake_depth = number(v)?;
            Ok(())
        },
        "--lake-depth: how deep to look for the tables of a lake",
    ),
    value(
        "iceberg_prefix",
        "PATH",
        |a, v| {
            a.iceberg_prefix = Some(std::path::PathBuf::from(v));
            Ok(())
        },
        "--iceberg-prefix: where readers see the mount (iceberg/ data file paths)",
    ),
    value(
        "endpoint_url",
        "URL",
        |a, v| {
            a.store.endpoint_url = Some(v.to_string());
            Ok(())
        },
        "--endpoint-url: the store's endpoint (S3-compatible server, Azure blob endpoint, GCS emulator)",
    ),
    value(
        "region",
        "REGION",
        |a, v| {
            a.store.region = Some(v.to_string());
            Ok(())
        },
        "--region: region of the bucket",
    ),
    flag(
        "force_path_style",
        |a| a.store.force_path_style = true,
        "--force-path-style: path-style S3 requests",
    ),
    flag(
        "no_sign_request",
        |a| a.store.no_sign_request = true,
        "--no-sign-request: anonymous requests",
    ),
    value(
        "profile",
        "NAME",
        |a, v| {
            a.store.profile = Some(v.to_string());
            Ok(())
        },
        "--profile: AWS shared-config profile",
    ),
    value(
        "listing",
        "MODE",
        |a, v| {
            a.store.listing = v.parse()?;
            Ok(())
        },
        "--listing: auto, metadata, storage or verify (where the table's listing comes from)",
    ),
    flag(
        "allow_http",
        |a| a.store.allow_http = true,
        "--allow-http: plain HTTP to the store",
    ),
    value(
        "cache",
        "DIR",
        |a, v| {
            a.cache = Some(v.into());
            Ok(())
        },
        "--cache: local data cache of store tables",
    ),
    value(
        "max_cache_size",
        "SIZE",
        |a, v| {
            a.max_cache_size = crate::cli::parse_size(v)?;
            Ok(())
        },
        "--max-cache-size: how much the data cache may hold",
    ),
    flag(
        "no_passthrough",
        |a| a.no_passthrough = true,
        "--no-passthrough: read table files through the daemon",
    ),
    value(
        "threads",
        "N",
        |a, v| {
            a.threads = number(v)?;
            Ok(())
        },
        "--threads: FUSE worker threads",
    ),
    value(
        "merge_cache",
        "DIR",
        |a, v| {
            a.merge_cache = Some(v.into());
            Ok(())
        },
        "--merge-cache: directory of the merged view's cache",
    ),
    value(
        "merge_cache_size",
        "SIZE",
        |a, v| {
            a.merge_cache_size = crate::cli::parse_size(v)?;
            Ok(())
        },
        "--merge-cache-size: how much the merge cache may hold",
    ),
    value(
        "merge_memory",
        "SIZE",
        |a, v| {
            a.merge_memory = crate::cli::parse_size(v)?;
            Ok(())
        },
        "--merge-memory: memory cap of one slice's log records while it is merged",
    ),
    value(
        "max_memory",
        "SIZE",
        |a, v| {
            a.max_memory = Some(crate::cli::parse_size(v)?);
            Ok(())
        },
        "--max-memory: the most memory the daemon may hold",
    ),
    flag(
        "allow_other",
        |a| a.allow_other = true,
        "--allow-other: let other users read the mount",
    ),
    value(
        "uid",
        "USER",
        |a, v| {
            a.uid = Some(access::parse_uid(v)?);
            Ok(())
        },
        "--uid: owner of every node",
    ),
    value(
        "gid",
        "GROUP",
        |a, v| {
            a.gid = Some(access::parse_gid(v)?);
            Ok(())
        },
        "--gid: group of every node",
    ),
    value(
        "file_mode",
        "MODE",
        |a, v| {
            a.file_mode = Some(access::parse_mode(v)?);
            Ok(())
        },
        "--file-mode: permission bits of every file",
    ),
    value(
        "dir_mode",
        "MODE",
        |a, v| {
            a.dir_mode = Some(access::parse_mode(v)?);
            Ok(())
        },
        "--dir-mode: permission bits of every directory",
    ),
    flag(
        "default_permissions",
        |a| a.default_permissions = true,
        "--default-permissions: the kernel checks the permission bits",
    ),
    // For the kernel, without a flag of their own.
    value(
        "fsname",
        "NAME",
        |a, v| {
            a.fsname = Some(v.to_string());
            Ok(())
        },
        "the source mount(8) shows (default hudifs:TABLE)",
    ),
    flag("noexec", |a| a.noexec = true, "no program runs from the mount"),
    // Refused.
    MountOpt {
        name: "rw",
        effect: Effect::Refused,
        text: "hudifs mounts are always read-only: write `ro` (mount(8) passes rw when an fstab \
               line or -o says neither)",
    },
    // Accepted and ignored.
    ignored("ro", ALWAYS_RO),
    ignored("nodev", NODEV_NOSUID),
    ignored("nosuid", NODEV_NOSUID),
    ignored("dev", NODEV_NOSUID),
    ignored("suid", NODEV_NOSUID),
    ignored("exec", "the default"),
    ignored(
        "subtype",
        "the subtype is always hudifs (fs type fuse.hudifs)",
    ),
    ignored("defaults", FOR_MOUNT),
    ignored("auto", FOR_MOUNT),
    ignored("noauto", FOR_MOUNT),
    ignored("user", FOR_MOUNT),
    ignored("nouser", FOR_MOUNT),
    ignored("users", FOR_MOUNT),
    ignored("owner", FOR_MOUNT),
    ignored("group", FOR_MOUNT),
    ignored("_netdev", FOR_MOUNT),
    ignored("nofail", FOR_MOUNT),
    ignored("comment", FOR_MOUNT),
    ignored("x-*", FOR_MOUNT),
    ignored("X-*", FOR_MOUNT),
    ignored("atime", READ_ONLY_TIMES),
    ignored("noatime", READ_ONLY_TIMES),
    ignored("relatime", READ_ONLY_TIMES),
    ignored("norelatime", READ_ONLY_TIMES),
    ignored("strictatime", READ_ONLY_TIMES),
    ignored("nostrictatime", READ_ONLY_TIMES),
    ignored("diratime", READ_ONLY_TIMES),
    ignored("nodiratime", READ_ONLY_TIMES),
    ignored("lazytime", READ_ONLY_TIMES),
    ignored("nolazytime", READ_ONLY_TIMES),
    ignored("sync", READ_ONLY_TIMES),
    ignored("async", READ_ONLY_TIMES),
    ignored("dirsync", READ_ONLY_TIMES),
];

/// The row for option `name`: an exact name first, then the longest prefix row.
pub fn find(name: &str) -> Option<&'static MountOpt> {
    OPTIONS.iter().find(|o| o.name == name).or_else(|| {
        OPTIONS
            .iter()
            .filter(|o| {
                o.name
                    .strip_suffix('*')
                    .is_some_and(|prefix| name.starts_with(prefix))
            })
            .max_by_key(|o| o.name.len())
    })
}

/// `args` with its `-o` options applied to its flags (after the flags given on the command
/// line, so an `-o` option wins, and of two the later), `options` left empty.
pub fn resolve(args: &MountArgs) -> Result<MountArgs> {
    let mut out = args.clone();
    out.options.clear();
    for group in &args.options {
        for item in group.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            let (name, val) = match item.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (item, None),
            };
            let usage = |why: String| Error::Usage(format!("-o {item}: {why}"));
            let row = find(name).ok_or_else(|| {
                usage(format!(
                    "unknown mount option (known: {})",
                    OPTIONS
                        .iter()
                        .filter(|o| !matches!(o.effect, Effect::Ignored | Effect::Refused))
                        .map(|o| o.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            match row.effect {
                Effect::Flag(set) => {
                    if val.is_some() {
                        return Err(usage("takes no value".into()));
                    }
                    set(&mut out);
                }
                Effect::Value(meta, set) => {
                    let v = val
                        .filter(|v| !v.is_empty())
                        .ok_or_else(|| usage(format!("needs a value: {name}={meta}")))?;
                    set(&mut out, v).map_err(usage)?;
                }
                Effect::Ignored => log::debug!("-o {item}: ignored ({})", row.text),
                Effect::Refused => return Err(usage(row.text.to_string())),
            }
        }
    }
    Ok(out)
}

/// The command line as clap should see it: `hudifs TABLE MNT [-o OPTS]...`, the way
/// `mount.fuse3` runs the program named after `fuse.` in the type, is `hudifs mount TABLE MNT
/// [-o OPTS]...`. A first argument that is an option or a subcommand leaves the line alone, and
/// so does one that looks like neither a path nor a URL (a mistyped subcommand keeps clap's
/// message).
pub fn helper_argv(argv: Vec<OsString>, subcommands: &[&str]) -> Vec<OsString> {
    let positional =
        |a: Option<&OsString>| a.is_some_and(|a| !a.to_string_lossy().starts_with('-'));
    let Some(first) = argv.get(1).map(|a| a.to_string_lossy().to_string()) else {
        return argv;
    };
    let is_subcommand = subcommands.contains(&first.as_str());
    let looks_like_a_table =
        first.contains('/') || first.contains(':') || std::path::Path::new(&first).exists();
    if is_subcommand || !positional(argv.get(1)) || !positional(argv.get(2)) || !looks_like_a_table
    {
        return argv;
    }
    let mut out = argv;
    out.insert(1, "mount".into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> MountArgs {
        let mut argv = vec!["hudifs", "mount", "/t", "/m"];
        argv.extend_from_slice(line);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Mount(a) => a,
            _ => unreachable!(),
        }
    }

    fn resolved(opts: &str) -> Result<MountArgs> {
        resolve(&args(&["-o", opts]))
    }

    #[test]
    fn object_store_options_as_o_options() {
        let a = resolved(
            "endpoint_url=http://127.0.0.1:9000,region=eu-west-3,force_path_style,\
             no_sign_request,profile=dev,allow_http",
        )
        .unwrap();
        assert_eq!(
            a.store.endpoint_url.as_deref(),
            Some("http://127.0.0.1:9000")
        );
        assert_eq!(a.store.region.as_deref(), Some("eu-west-3"));
        assert_eq!(a.store.profile.as_deref(), Some("dev"));
        assert!(a.store.force_path_style && a.store.no_sign_request && a.store.allow_http);
        assert!(resolved("endpoint_url").is_err());
    }

    #[test]
    fn every_mount_flag_has_an_option() {
        let a = resolved(
            "foreground,read_optimized,timezone=Asia/Kolkata,poll_interval=500,no_passthrough,\
             threads=8,allow_other,uid=1000,gid=root,file_mode=0440,dir_mode=550,\
             default_permissions,lake_depth=2",
        )
        .unwrap();
        assert_eq!(a.lake_depth, 2);
        assert!(a.foreground && a.read_optimized && a.no_passthrough && a.allow_other);
        assert!(a.default_permissions);
        assert_eq!(
            a.timezone,
            Some(crate::cli::parse_zone("Asia/Kolkata").unwrap())
        );
        assert_eq!((a.poll_interval, a.threads), (500, 8));
        assert_eq!((a.uid, a.gid), (Some(1000), Some(0)));
        assert_eq!((a.file_mode, a.dir_mode), (Some(0o440), Some(0o550)));
        assert!(a.options.is_empty(), "{:?}", a.options);
        // Each long flag of `hudifs mount` is a row (the names agree once dashes are
        // underscores), so the two spellings cannot drift apart.
        use clap::CommandFactory;
        let cmd = crate::cli::Cli::command();
        let mount = cmd.find_subcommand("mount").unwrap();
        for arg in mount.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help") {
                continue;
            }
            let name = long.replace('-', "_");
            assert!(
                matches!(
                    find(&name).map(|o| o.effect),
                    Some(Effect::Flag(_) | Effect::Value(..))
                ),
                "--{long} has no -o {name}"
            );
        }
    }

    #[test]
    fn generic_options_are_accepted_and_ignored() {
        let a = resolved(
            "ro,defaults,_netdev,nofail,noauto,auto,user,users,nouser,user=alice,exec,nosuid,\
             nodev,dev,suid,x-systemd.automount,x-systemd.idle-timeout=60,x-mount.mkdir,\
             noatime,relatime,comment=systemd.automount",
        )
        .unwrap();
        assert!(a.options.is_empty(), "{:?}", a.options);
        assert_eq!(a.poll_interval, 1000, "defaults kept");
    }

    #[test]
    fn kernel_options_without_a_flag() {
        let a = resolved("fsname=trips,noexec,ro,noexec").unwrap();
        assert_eq!((a.fsname.as_deref(), a.noexec), (Some("trips"), true));
        assert!(a.options.is_empty(), "{:?}", a.options);
        let a = resolved("fsname=first,fsname=second").unwrap();
        assert_eq!(a.fsname.as_deref(), Some("second"), "the later one wins");
        let a = resolved("ro").unwrap();
        assert_eq!((a.fsname, a.noexec), (None, false));
    }

    #[test]
    fn several_groups_and_spaces() {
        let a = resolve(&args(&["-o", "ro, poll_interval=200", "-o", "threads=2,"])).unwrap();
        assert_eq!((a.poll_interval, a.threads), (200, 2));
    }

    #[test]
    fn an_option_wins_over_the_flag_before_it() {
        let a = resolve(&args(&["--poll-interval", "50", "-o", "poll_interval=700"])).unwrap();
        assert_eq!(a.poll_interval, 700);
    }

    #[test]
    fn refusals_say_why() {
        let msg = |o: &str| match resolved(o) {
            Err(e) => {
                assert_eq!(e.exit_code(), 2, "{o}: a usage error");
                e.to_string()
            }
            Ok(a) => panic!("-o {o} accepted: {a:?}"),
        };
        assert!(msg("rw").contains("read-only"));
        assert!(msg("ro,rw").contains("-o rw"));
        assert!(msg("frobnicate").contains("unknown mount option"));
        assert!(msg("frobnicate").contains("poll_interval"));
        assert!(msg("poll_interval").contains("poll_interval=MS"));
        assert!(msg("poll_interval=").contains("needs a value"));
        assert!(msg("poll_interval=soon").contains("not a number"));
        assert!(msg("threads=-1").contains("not a number"));
        assert!(msg("read_optimized=1").contains("takes no value"));
        assert!(msg("file_mode=0644").contains("write bit"));
        assert!(msg("dir_mode=0777").contains("write bit"));
        assert!(msg("uid=no-such-user-hudifs").contains("no such user"));
        assert!(msg("timezone=Mars/Olympus").contains("timezone"));
    }

    #[test]
    fn prefix_rows_match_by_prefix_only() {
        assert_eq!(find("x-systemd.requires=a.service").unwrap().name, "x-*");
        assert!(find("xsystemd").is_none());
        assert_eq!(find("ro").unwrap().name, "ro");
    }

    #[test]
    fn the_mount_helper_convention_becomes_hudifs_mount() {
        let subs = ["mount", "umount", "ls", "timeline", "status", "help"];
        let v = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            helper_argv(
                v(&["hudifs", "/data/t", "/mnt/t", "-o", "ro,allow_other"]),
                &subs
            ),
            v(&[
                "hudifs",
                "mount",
                "/data/t",
                "/mnt/t",
                "-o",
                "ro,allow_other"
            ])
        );
        assert_eq!(
            helper_argv(v(&["hudifs", "s3://b/t", "/mnt/t"]), &subs),
            v(&["hudifs", "mount", "s3://b/t", "/mnt/t"])
        );
        for unchanged in [
            &["hudifs"][..],
            &["hudifs", "--version"],
            &["hudifs", "ls", "/data/t"],
            &["hudifs", "mount", "/data/t", "/mnt/t"],
            &["hudifs", "status", "/mnt/t"],
            &["hudifs", "/data/t"],
            &["hudifs", "/data/t", "-o", "ro"],
            &["hudifs", "lss", "x"],
        ] {
            assert_eq!(helper_argv(v(unchanged), &subs), v(unchanged));
        }
    }
}
