//! The CSI node plugin (`hudifs csi`, docs/kubernetes.md) driven as kubelet drives it: a gRPC
//! client on the plugin's Unix socket publishes volumes of a table the project's generator
//! writes into a temporary kubelet tree, and the test reads them through the real mounts.
//!
//! No cluster runs here; what kubelet would do is done by the test: Identity calls, inline and
//! static volumes, idempotent publishes and unpublishes, two pods sharing one daemon, refusals,
//! and pinned volumes while a writer commits.

use hudifs_testkit::support;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::csi_client::{
    self as proto, identity_client::IdentityClient, node_client::NodeClient, volume_capability,
};
use hudifs_core::table::TableType;
use hudifs_testkit::generator::{TableSpec, TableWriter};
use hudifs_testkit::mount::fuse_available;
use tonic::transport::Channel;

const HUDIFS: &str = env!("CARGO_BIN_EXE_hudifs");

/// A table of two commits in two partitions.
fn table(root: &Path) -> TableWriter {
    let spec = TableSpec::new("trips", TableType::CopyOnWrite, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    commit(&mut w);
    commit(&mut w);
    w
}

fn commit(w: &mut TableWriter) {
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("city=sf", 64 << 10).unwrap();
    t.insert_sized("city=chennai", 64 << 10).unwrap();
    t.complete().unwrap();
}

/// The plugin, serving on a socket in `dir`; on drop it is stopped and every mount under `dir`
/// (pods' binds, shared mounts) is taken down, so no daemon outlives the test.
struct Plugin {
    dir: PathBuf,
    child: Child,
    runtime: tokio::runtime::Runtime,
    channel: Channel,
}

impl Plugin {
    fn start(dir: &Path) -> Plugin {
        Self::start_with(dir, &[])
    }

    fn start_with(dir: &Path, args: &[&str]) -> Plugin {
        Self::start_env(dir, args, &[])
    }

    /// The plugin with `args`, without the variables `unset` in its environment.
    fn start_env(dir: &Path, args: &[&str], unset: &[&str]) -> Plugin {
        let socket = dir.join("plugin/csi.sock");
        let mut cmd = Command::new(HUDIFS);
        for v in unset {
            cmd.env_remove(v);
        }
        let child = cmd
            .args(["csi", "--node-id", "node-a"])
            .args(args)
            .arg("--endpoint")
            .arg(format!("unix://{}", socket.display()))
            .arg("--state-dir")
            .arg(dir.join("plugin/state"))
            .env("RUST_LOG", "info")
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        // A socket a killed plugin left behind is there before the new one binds it: wait
        // for one that answers.
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                Instant::now() < until,
                "the plugin does not answer on its socket"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let channel = runtime.block_on(async {
            tonic::transport::Endpoint::try_from("http://[::1]:50051")
                .unwrap()
                .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                    let socket = socket.clone();
                    async move {
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                            tokio::net::UnixStream::connect(socket).await?,
                        ))
                    }
                }))
                .await
                .unwrap()
        });
        Plugin {
            dir: dir.to_path_buf(),
            child,
            runtime,
            channel,
        }
    }

    /// Kill the plugin as a crash would, leaving its mounts and daemons up.
    fn crash(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::forget(self);
    }

    fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone())
    }

    fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }

    fn state(&self) -> PathBuf {
        self.dir.join("plugin/state")
    }

    /// The target path kubelet gives a pod's volume.
    fn target(&self, pod: &str, volume: &str) -> PathBuf {
        self.dir.join(format!(
            "kubelet/pods/{pod}/volumes/kubernetes.io~csi/{volume}/mount"
        ))
    }

    fn publish(
        &self,
        volume_id: &str,
        target: &Path,
        context: &[(&str, &str)],
        mount_flags: &[&str],
    ) -> Result<(), tonic::Status> {
        self.publish_with_secrets(volume_id, target, context, mount_flags, &[])
    }

    fn publish_with_secrets(
        &self,
        volume_id: &str,
        target: &Path,
        context: &[(&str, &str)],
        mount_flags: &[&str],
        secrets: &[(&str, &str)],
    ) -> Result<(), tonic::Status> {
        let request = proto::NodePublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.to_string_lossy().into(),
            volume_capability: Some(proto::VolumeCapability {
                access_mode: Some(volume_capability::AccessMode {
                    mode: volume_capability::access_mode::Mode::MultiNodeReaderOnly as i32,
                }),
                access_type: Some(volume_capability::AccessType::Mount(
                    volume_capability::MountVolume {
                        fs_type: String::new(),
                        mount_flags: mount_flags.iter().map(|f| f.to_string()).collect(),
                        volume_mount_group: String::new(),
                    },
                )),
            }),
            readonly: true,
            volume_context: context
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            secrets: secrets
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        let mut node = self.node();
        self.runtime
            .block_on(node.node_publish_volume(request))
            .map(|_| ())
    }

    fn unpublish(&self, volume_id: &str, target: &Path) -> Result<(), tonic::Status> {
        let mut node = self.node();
        self.runtime
            .block_on(
                node.node_unpublish_volume(proto::NodeUnpublishVolumeRequest {
                    volume_id: volume_id.into(),
                    target_path: target.to_string_lossy().into(),
                }),
            )
            .map(|_| ())
    }

    /// The shared daemons' mount points, with the pids their state files name.
    fn daemons(&self) -> Vec<(PathBuf, Vec<u32>)> {
        let Ok(entries) = std::fs::read_dir(self.state().join("daemons")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| {
                let mnt = e.path().join("mnt");
                let state = hudifs::status::read_state(&hudifs::status::state_path(
                    &hudifs::daemon::log_path(&mnt),
                ));
                let pids = state
                    .map(|s| [Some(s.pid), s.keeper_pid].into_iter().flatten().collect())
                    .unwrap_or_default();
                (mnt, pids)
            })
            .collect()
    }
}

/// Mount points under `dir`, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|p| p.starts_with(dir))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

/// Takes down every mount under a directory when dropped (pods' binds first, then the shared
/// mounts, whose daemons then exit), also when a test fails before its plugin is up.
struct MountsUnder(PathBuf);

impl Drop for MountsUnder {
    fn drop(&mut self) {
        for m in mounts_under(&self.0) {
            let _ = Command::new(HUDIFS).arg("umount").arg(&m).output();
            if mounts_under(&self.0).contains(&m) {
                let _ = Command::new("umount").arg("-l").arg(&m).status();
            }
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        drop(MountsUnder(self.dir.clone()));
    }
}

/// Every file under `dir`: relative path to size.
fn files(dir: &Path) -> BTreeMap<String, u64> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let m = std::fs::metadata(&p).unwrap();
            if m.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().to_string();
                out.insert(rel, m.len());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `hudifs ls TABLE ARGS`: table-relative paths.
fn ls(table: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new(HUDIFS)
        .arg("ls")
        .arg(table)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut v: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn alive(pid: u32) -> bool {
    hudifs::sys::spawn::alive(pid)
}

/// A test's world: the plugin, a table the generator wrote, and a temporary directory holding
/// both (dropped in this order: the plugin stops, every mount under the directory is taken
/// down, the directory goes).
struct Scene {
    plugin: Plugin,
    writer: TableWriter,
    root: PathBuf,
    table: String,
    _unmount: MountsUnder,
    tmp: tempfile::TempDir,
}

impl Scene {
    /// The scene with the plugin given `args` (made from the scene's directory), or None
    /// when FUSE is missing (a skip, which `HUDIFS_REQUIRE_FUSE=1` turns into a failure).
    fn new(args: impl FnOnce(&Path) -> Vec<String>) -> Option<Scene> {
        if !fuse_available() {
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let unmount = MountsUnder(tmp.path().to_path_buf());
        let root = tmp.path().join("trips");
        let writer = table(&root);
        let args = args(tmp.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let plugin = Plugin::start_with(tmp.path(), &args);
        let table = root.to_string_lossy().to_string();
        Some(Scene {
            plugin,
            writer,
            root,
            table,
            _unmount: unmount,
            tmp,
        })
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }
}

#[test]
fn identity_and_node_info_answer_as_kubelet_expects() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let _unmount = MountsUnder(tmp.path().to_path_buf());
    let p = Plugin::start(tmp.path());
    let mut id = p.identity();
    let info = p
        .runtime
        .block_on(id.get_plugin_info(proto::GetPluginInfoRequest {}))
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "csi.hudifs.dev");
    assert_eq!(info.vendor_version, hudifs::VERSION);
    let caps = p
        .runtime
        .block_on(id.get_plugin_capabilities(proto::GetPluginCapabilitiesRequest {}))
        .unwrap()
        .into_inner();
    assert!(caps.capabilities.is_empty(), "a node plugin only: {caps:?}");
    let probe = p
        .runtime
        .block_on(id.probe(proto::ProbeRequest {}))
        .unwrap()
        .into_inner();
    assert_eq!(probe.ready, Some(true));
    let mut node = p.node();
    let info = p
        .runtime
        .block_on(node.node_get_info(proto::NodeGetInfoRequest {}))
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "node-a");
    let caps = p
        .runtime
        .block_on(node.node_get_capabilities(proto::NodeGetCapabilitiesRequest {}))
        .unwrap()
        .into_inner();
    assert!(caps.capabilities.is_empty(), "{caps:?}");
    let staged = p
        .runtime
        .block_on(node.node_stage_volume(proto::NodeStageVolumeRequest::default()));
    assert_eq!(staged.unwrap_err().code(), tonic::Code::Unimplemented);
}

/// Python's grpcio (and grpc-java) name a Unix socket's path as the `:authority`, which is no URI
/// authority: the plugin serves them as it serves kubelet, which names `localhost`.
#[test]
fn clients_that_name_the_socket_as_authority_are_served() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let _unmount = MountsUnder(tmp.path().to_path_buf());
    let p = Plugin::start(tmp.path());
    let py = support::python();
    {
        let _lock = support::venv_lock();
        let has = Command::new(&py).args(["-c", "import grpc"]).status();
        if !has.is_ok_and(|s| s.success()) {
            support::pip_install(&py, &["grpcio"]);
        }
    }
    let socket = p.dir.join("plugin/csi.sock");
    // A GetPluginInfo call with grpcio's default authority (the socket path, percent-encoded),
    // then with the path itself, as grpc-java sends it.
    let script = r#"
import sys, grpc
path = sys.argv[1]
for options in ([], [("grpc.default_authority", path)]):
    with grpc.insecure_channel("unix:" + path, options=options) as ch:
        call = ch.unary_unary("/csi.v1.Identity/GetPluginInfo",
                              request_serializer=lambda m: m, response_deserializer=lambda b: b)
        print(call(b"", timeout=20).hex())
"#;
    let out = Command::new(&py)
        .args(["-c", script])
        .arg(&socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "grpcio's call failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers = String::from_utf8(out.stdout).unwrap();
    let name = "csi.hudifs.dev"
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    assert_eq!(answers.lines().count(), 2, "{answers}");
    for a in answers.lines() {
        assert!(a.contains(&name), "no plugin name in the answer {a}");
    }
}

#[test]
fn pods_share_one_daemon_and_the_last_unpublish_stops_it() {
    let Some(s) = Scene::new(|_| Vec::new()) else {
        return;
    };
    let (p, root, table) = (&s.plugin, &s.root, &s.table);

    // An inline (ephemeral) volume in pod a, as kubelet names it.
    let inline = p.target("pod-a", "trips");
    let context = [
        ("table", table.as_str()),
        ("csi.storage.k8s.io/ephemeral", "true"),
        ("csi.storage.k8s.io/pod.name", "reader-a"),
    ];
    p.publish("csi-0a1b", &inline, &context, &[]).unwrap();
    let shown = files(&inline);
    let expected = ls(root, &[]);
    assert_eq!(shown.keys().cloned().collect::<Vec<_>>(), expected);
    for (rel, size) in &shown {
        let on_disk = std::fs::read(root.join(rel)).unwrap();
        assert_eq!(on_disk.len() as u64, *size, "{rel}");
        assert_eq!(std::fs::read(inline.join(rel)).unwrap(), on_disk, "{rel}");
    }
    // Read-only, whatever the pod asks.
    let err = std::fs::write(inline.join("x"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");

    // kubelet may call again: the same answer, nothing new.
    p.publish("csi-0a1b", &inline, &context, &[]).unwrap();
    assert_eq!(p.daemons().len(), 1);

    // A static PersistentVolume of the same table and options, in two pods: the same daemon.
    let static_a = p.target("pod-b", "pv-trips");
    let static_b = p.target("pod-c", "pv-trips");
    let pv = [("table", table.as_str()), ("view", "latest/city=sf")];
    p.publish("pv-trips", &static_a, &pv, &[]).unwrap();
    p.publish("pv-trips", &static_b, &pv, &[]).unwrap();
    let daemons = p.daemons();
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let sf: Vec<String> = expected
        .iter()
        .filter_map(|f| f.strip_prefix("city=sf/"))
        .map(str::to_string)
        .collect();
    assert!(!sf.is_empty());
    assert_eq!(files(&static_b).keys().cloned().collect::<Vec<_>>(), sf);

    // The PersistentVolume's own mountOptions make other options: another daemon.
    let tuned = p.target("pod-d", "pv-tuned");
    let options = ["poll_interval=500", "timezone=UTC"];
    p.publish("pv-tuned", &tuned, &pv, &options).unwrap();
    assert_eq!(p.daemons().len(), 2);
    // The same options in another order mean the same configuration: the same daemon.
    let reordered = p.target("pod-e", "pv-tuned-too");
    p.publish(
        "pv-tuned-too",
        &reordered,
        &pv,
        &["timezone=UTC", "poll_interval=500"],
    )
    .unwrap();
    assert_eq!(p.daemons().len(), 2, "{:?}", p.daemons());
    assert_eq!(files(&reordered).len(), sf.len());
    p.unpublish("pv-tuned-too", &reordered).unwrap();
    let all_pids: Vec<u32> = p.daemons().iter().flat_map(|(_, v)| v.clone()).collect();
    assert!(
        all_pids.len() >= 4 && all_pids.iter().all(|&pid| alive(pid)),
        "{all_pids:?}"
    );

    // Unpublishing one pod's volume leaves the daemon to the others.
    p.unpublish("pv-trips", &static_a).unwrap();
    p.unpublish("pv-trips", &static_a).unwrap();
    assert!(!static_a.exists(), "the target directory is removed");
    assert_eq!(files(&static_b).len(), sf.len());
    p.unpublish("csi-0a1b", &inline).unwrap();
    assert_eq!(p.daemons().len(), 2);
    p.unpublish("pv-tuned", &tuned).unwrap();
    assert_eq!(p.daemons().len(), 1);

    // The last one stops the daemon: its processes are gone when the call returns.
    let (mnt, pids) = p.daemons().remove(0);
    assert!(!pids.is_empty());
    p.unpublish("pv-trips", &static_b).unwrap();
    assert!(p.daemons().is_empty());
    assert!(pids.iter().all(|&pid| !alive(pid)), "{pids:?} still run");
    assert!(!hudifs::daemon::is_mount_point(&mnt));
    assert!(
        mounts_under(s.dir()).is_empty(),
        "{:?}",
        mounts_under(s.dir())
    );
    // Unpublishing what is not published is fine.
    p.unpublish("pv-trips", &static_b).unwrap();
}

#[test]
fn bad_volumes_fail_their_publish_with_the_reason() {
    let Some(s) = Scene::new(|dir| {
        vec![
            "--cache-root".into(),
            dir.join("cache").to_string_lossy().into(),
        ]
    }) else {
        return;
    };
    let (p, table) = (&s.plugin, &s.table);
    let cache_root = s.dir().join("cache");
    let target = p.target("pod-x", "v");
    let refused = |context: &[(&str, &str)], flags: &[&str], code: tonic::Code, says: &str| {
        let e = p.publish("v", &target, context, flags).unwrap_err();
        assert_eq!(e.code(), code, "{context:?} {flags:?}: {e:?}");
        assert!(
            e.message().contains(says),
            "{:?} lacks {says:?}",
            e.message()
        );
        assert!(
            p.daemons().is_empty(),
            "no daemon is left by a refused publish"
        );
        assert!(mounts_under(s.dir()).is_empty());
    };
    let invalid = tonic::Code::InvalidArgument;
    let t = table.as_str();
    refused(
        &[("table", t), ("mountOptions", "poll_interval=soon")],
        &[],
        invalid,
        "poll_interval",
    );
    refused(
        &[("table", t)],
        &["no_such_option"],
        invalid,
        "no_such_option",
    );
    refused(&[("table", t)], &["rw"], invalid, "read-only");
    refused(
        &[("table", t), ("mountOptions", "foreground")],
        &[],
        invalid,
        "foreground",
    );
    refused(&[("tabel", t)], &[], invalid, "tabel");
    refused(&[("table", t), ("view", "../..")], &[], invalid, "../..");
    refused(
        &[("table", t), ("pin", "mount-time"), ("view", "timeline")],
        &[],
        invalid,
        "does not move",
    );
    refused(
        &[("table", t), ("view", "as_of/not-a-time")],
        &[],
        tonic::Code::NotFound,
        "as_of/not-a-time",
    );
    // A volume may not make the plugin (root) write outside its cache root.
    let escape = format!("cache={}/../etc", cache_root.display());
    for o in ["cache=/etc/hudifs", "merge_cache=/root/x", escape.as_str()] {
        refused(
            &[("table", t), ("mountOptions", o)],
            &[],
            invalid,
            "--cache-root",
        );
    }
    let inside = format!("cache={}/trips", cache_root.display());
    p.publish(
        "v",
        &target,
        &[("table", t), ("mountOptions", &inside)],
        &[],
    )
    .unwrap();
    p.unpublish("v", &target).unwrap();
    let missing = s.dir().join("no-table");
    refused(
        &[("table", &missing.to_string_lossy())],
        &[],
        tonic::Code::Internal,
        "no-table",
    );
    // Block access is not a file system.
    let mut node = p.node();
    let block = p
        .runtime
        .block_on(node.node_publish_volume(proto::NodePublishVolumeRequest {
            volume_id: "v".into(),
            target_path: target.to_string_lossy().into(),
            volume_capability: Some(proto::VolumeCapability {
                access_mode: None,
                access_type: Some(volume_capability::AccessType::Block(
                    volume_capability::BlockVolume {},
                )),
            }),
            volume_context: HashMap::from([("table".to_string(), table.clone())]),
            ..Default::default()
        }));
    assert_eq!(block.unwrap_err().code(), invalid);
}

#[test]
fn pinned_volumes_stay_on_their_instant_while_a_writer_commits() {
    let Some(mut s) = Scene::new(|_| Vec::new()) else {
        return;
    };
    let (p, root, table, w) = (&s.plugin, &s.root, &s.table, &mut s.writer);
    let pinned_ctx = [
        ("table", table.as_str()),
        ("pin", "mount-time"),
        ("mountOptions", "poll_interval=100"),
    ];
    let follow_ctx = [
        ("table", table.as_str()),
        ("mountOptions", "poll_interval=100"),
    ];
    let pinned = p.target("job-0", "trips");
    let following = p.target("job-0", "live");
    p.publish("pv-pinned", &pinned, &pinned_ctx, &[]).unwrap();
    p.publish("pv-live", &following, &follow_ctx, &[]).unwrap();
    let before = files(&pinned);
    assert_eq!(before, files(&following));
    assert_eq!(before.keys().cloned().collect::<Vec<_>>(), ls(root, &[]));

    commit(w);
    let after = ls(root, &[]);
    assert!(after.len() > before.len());
    let until = Instant::now() + Duration::from_secs(20);
    while files(&following).keys().cloned().collect::<Vec<_>>() != after {
        assert!(
            Instant::now() < until,
            "latest/ never showed the new commit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(files(&pinned), before, "the pinned volume moved");

    // Another pod of the job publishes the same volume after the commit: the same instant.
    let second = p.target("job-1", "trips");
    p.publish("pv-pinned", &second, &pinned_ctx, &[]).unwrap();
    assert_eq!(files(&second), before);
    // A new volume pins the instant of its own publish.
    let fresh = p.target("job-2", "trips");
    p.publish("pv-other", &fresh, &pinned_ctx, &[]).unwrap();
    assert_eq!(files(&fresh).keys().cloned().collect::<Vec<_>>(), after);

    for (v, t) in [
        ("pv-pinned", &pinned),
        ("pv-live", &following),
        ("pv-pinned", &second),
        ("pv-other", &fresh),
    ] {
        p.unpublish(v, t).unwrap();
    }
    assert!(p.daemons().is_empty());
    assert!(mounts_under(s.dir()).is_empty());
}

#[test]
fn a_restarted_plugin_knows_what_it_published() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let _unmount = MountsUnder(tmp.path().to_path_buf());
    let root = tmp.path().join("trips");
    let _w = table(&root);
    let table = root.to_string_lossy().to_string();
    let target;
    let pids;
    {
        let p = Plugin::start(tmp.path());
        target = p.target("pod-a", "trips");
        p.publish("v", &target, &[("table", &table)], &[]).unwrap();
        pids = p.daemons()[0].1.clone();
        p.crash();
    }
    // The daemon outlives its plugin, and the pod keeps reading.
    assert!(pids.iter().all(|&pid| alive(pid)), "{pids:?}");
    assert_eq!(files(&target).len(), ls(&root, &[]).len());
    let p = Plugin::start(tmp.path());
    p.publish("v", &target, &[("table", &table)], &[]).unwrap();
    assert_eq!(p.daemons().len(), 1);
    assert_eq!(p.daemons()[0].1, pids, "the same daemon serves");
    p.unpublish("v", &target).unwrap();
    assert!(p.daemons().is_empty());
    assert!(pids.iter().all(|&pid| !alive(pid)));
}

#[test]
fn the_plugin_serves_its_calls_and_its_daemons_metrics() {
    let port = hudifs_testkit::server::free_port();
    let Some(s) = Scene::new(|_| vec!["--metrics".into(), format!("127.0.0.1:{port}")]) else {
        return;
    };
    let (p, table) = (&s.plugin, &s.table);
    let target = p.target("pod-a", "trips");
    p.publish("v", &target, &[("table", table)], &[]).unwrap();
    assert!(p
        .publish("v", &target, &[("table", table), ("x", "y")], &[])
        .is_err());
    let shown = files(&target);
    for rel in shown.keys() {
        std::fs::read(target.join(rel)).unwrap();
    }
    let key = p.daemons()[0]
        .0
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();

    let parsed = support::openmetrics(&support::http_get(port, "/metrics").1);
    let calls = |method: &str, outcome: &str| {
        support::sample(
            &parsed,
            "hudifs_csi_calls",
            "hudifs_csi_calls_total",
            &[("method", method), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("NodePublishVolume", "ok"), 1.0, "{parsed:#}");
    assert_eq!(calls("NodePublishVolume", "invalid_argument"), 1.0);
    assert_eq!(
        support::sample(&parsed, "hudifs_csi_volumes", "hudifs_csi_volumes", &[]),
        1.0
    );
    assert_eq!(
        support::sample(&parsed, "hudifs_csi_daemons", "hudifs_csi_daemons", &[]),
        1.0
    );
    // The shared daemon's own families, labelled with its key: the pod's opens are counted.
    let opens = support::sample(
        &parsed,
        "hudifs_fuse_requests",
        "hudifs_fuse_requests_total",
        &[("daemon", &key), ("op", "open"), ("outcome", "ok")],
    );
    assert!(
        opens >= shown.len() as f64,
        "{opens} opens for {} files",
        shown.len()
    );

    p.unpublish("v", &target).unwrap();
    let parsed = support::openmetrics(&support::http_get(port, "/metrics").1);
    assert!(
        parsed.get("hudifs_fuse_requests").is_none(),
        "no daemon, no daemon families"
    );
    assert_eq!(
        support::sample(&parsed, "hudifs_csi_daemons", "hudifs_csi_daemons", &[]),
        0.0
    );
}

#[test]
fn volume_secrets_reach_their_own_daemon_and_are_written_nowhere() {
    let Some(s) = Scene::new(|_| Vec::new()) else {
        return;
    };
    let (p, table) = (&s.plugin, &s.table);
    let ctx = [("table", table.as_str())];
    let secret = "wJalrXUtnFEMI-not-a-real-key-0123456789";
    let with = p.target("pod-a", "creds");
    p.publish_with_secrets(
        "v1",
        &with,
        &ctx,
        &[],
        &[
            ("AWS_SECRET_ACCESS_KEY", secret),
            ("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE"),
        ],
    )
    .unwrap();
    let without = p.target("pod-b", "plain");
    p.publish("v2", &without, &ctx, &[]).unwrap();
    // Other credentials, another daemon: a pod never reads through someone else's.
    let daemons = p.daemons();
    assert_eq!(daemons.len(), 2, "{daemons:?}");
    let environ = |pid: u32| std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let has_secret = |pid: u32| {
        environ(pid)
            .split(|b| *b == 0)
            .any(|kv| kv == format!("AWS_SECRET_ACCESS_KEY={secret}").as_bytes())
    };
    let carrying: Vec<bool> = daemons
        .iter()
        .map(|(_, pids)| !pids.is_empty() && pids.iter().all(|&pid| has_secret(pid)))
        .collect();
    assert_eq!(carrying.iter().filter(|c| **c).count(), 1, "{carrying:?}");
    assert_eq!(files(&with), files(&without));
    // The value is in no file the plugin wrote.
    fn grep(dir: &Path, needle: &str) -> Vec<PathBuf> {
        let mut hits = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                if !hudifs::daemon::is_mount_point(&p) {
                    hits.extend(grep(&p, needle));
                }
            } else if std::fs::read(&p)
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                hits.push(p);
            }
        }
        hits
    }
    assert_eq!(grep(&p.state(), secret), Vec::<PathBuf>::new());
    // Keys that are not credentials are refused, without their values in the message.
    let e = p
        .publish_with_secrets(
            "v3",
            &p.target("pod-c", "x"),
            &ctx,
            &[],
            &[("LD_PRELOAD", "/evil.so")],
        )
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("LD_PRELOAD") && !e.message().contains("evil"),
        "{}",
        e.message()
    );
    p.unpublish("v1", &with).unwrap();
    p.unpublish("v2", &without).unwrap();
    assert!(p.daemons().is_empty());
}

#[test]
fn an_azure_table_is_read_with_the_volume_s_own_key() {
    if !fuse_available() {
        return;
    }
    let Some(az) = support::azurite() else {
        return;
    };
    use hudifs_testkit::azurite;
    let tmp = tempfile::tempdir().unwrap();
    let _unmount = MountsUnder(tmp.path().to_path_buf());
    let local = tmp.path().join("trips");
    let _w = table(&local);
    let url = format!("az://{}/csi-trips", azurite::CONTAINER);
    azurite::upload(&local, &url, &az.endpoint);
    // The plugin has no key of its own: only the volume's secret can open the table.
    let p = Plugin::start_env(tmp.path(), &[], &["AZURE_STORAGE_ACCOUNT_KEY"]);
    let options = format!("endpoint_url={}", az.endpoint);
    let ctx = [("table", url.as_str()), ("mountOptions", options.as_str())];
    let target = p.target("pod-a", "trips");
    let wrong = "d3JvbmcgYnV0IHdlbGwtZm9ybWVkIGJhc2U2NCBrZXk=";
    let e = p
        .publish_with_secrets(
            "v",
            &target,
            &ctx,
            &[],
            &[("AZURE_STORAGE_ACCOUNT_KEY", wrong)],
        )
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Internal, "{e:?}");
    assert!(!e.message().contains(wrong), "{}", e.message());
    assert!(p.daemons().is_empty());
    p.publish_with_secrets(
        "v",
        &target,
        &ctx,
        &[],
        &[("AZURE_STORAGE_ACCOUNT_KEY", azurite::KEY)],
    )
    .unwrap();
    let shown = files(&target);
    assert_eq!(shown.keys().cloned().collect::<Vec<_>>(), ls(&local, &[]));
    for rel in shown.keys() {
        assert_eq!(
            std::fs::read(target.join(rel)).unwrap(),
            std::fs::read(local.join(rel)).unwrap(),
            "{rel}"
        );
    }
    p.unpublish("v", &target).unwrap();
    assert!(p.daemons().is_empty());
}
