//! Tables on a real Azure Blob Storage server: Azurite (npm `azurite`, installed by the test kit
//! into target/azurite on first use) on 127.0.0.1, docs/SEMANTICS.md §9. Every fixture table
//! with expected answers (copy-on-write and merge-on-read, table versions 6, 8 and 9) is
//! uploaded through the StorageWrite seam, then real FUSE mounts of the `az://` tables, reached
//! the three ways a user reaches an emulator (`--endpoint-url` naming the account,
//! `AZURE_STORAGE_USE_EMULATOR`, `AZURE_STORAGE_CONNECTION_STRING`), give every expected answer
//! and the local mount's answer for every view, the table's bytes for every file of `latest/`
//! and `timeline/`, and `hudifs ls az://…` the local listing. An object replaced while open
//! gives ESTALE (Azurite honours If-Match), a commit the project's generator makes on the store
//! after the mount shows up (polling), and a wrong key fails the mount with a message saying
//! what to check and no secret.

use hudifs_testkit::support;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hudifs_core::table::TableType;
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{StorageWrite, TablePath};
use hudifs_testkit::azurite::{self, Azurite};
use hudifs_testkit::generator::{Clock, TableSpec, TableWriter};
use hudifs_testkit::mount::{binary, fuse_available, MountGuard};

/// How a user reaches the emulator: the arguments and environment of `hudifs`.
#[derive(Debug, Clone, Copy)]
enum Reach {
    /// `--endpoint-url http://127.0.0.1:PORT/devstoreaccount1`, the key in
    /// AZURE_STORAGE_ACCOUNT_KEY (the account is the endpoint's path).
    Endpoint,
    /// AZURE_STORAGE_USE_EMULATOR=true and AZURITE_BLOB_STORAGE_URL, no option.
    Emulator,
    /// AZURE_STORAGE_CONNECTION_STRING as the Azure tools print it, no option.
    ConnectionString,
}

impl Reach {
    const ALL: [Reach; 3] = [Reach::Endpoint, Reach::Emulator, Reach::ConnectionString];

    fn args(self, az: &Azurite) -> Vec<String> {
        match self {
            Reach::Endpoint => azurite::store_args(&az.endpoint),
            Reach::Emulator | Reach::ConnectionString => Vec::new(),
        }
    }

    fn env(self, az: &Azurite) -> Vec<(&'static str, String)> {
        match self {
            Reach::Endpoint => Vec::new(),
            Reach::Emulator => az.emulator_env(),
            Reach::ConnectionString => {
                vec![("AZURE_STORAGE_CONNECTION_STRING", az.connection_string())]
            }
        }
    }
}

fn mount(url: &str, az: &Azurite, reach: Reach, extra: &[&str]) -> MountGuard {
    let mut args = reach.args(az);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = reach.env(az);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    MountGuard::mount_with_env(Path::new(url), &args, &env)
}

#[test]
fn az_tables_give_the_local_answers_and_bytes_through_a_real_mount() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !fuse_available() {
        return;
    }
    let t0 = Instant::now();
    let Some(az) = support::azurite() else {
        return;
    };
    let started = t0.elapsed();
    let fixtures = support::fixtures(&dir);
    let tmp = tempfile::tempdir().unwrap();
    let (mut objects, mut views, mut files, mut listings) = (0, 0, 0, 0);
    let mut problems = Vec::new();
    for (i, fx) in fixtures.iter().enumerate() {
        let name = &fx.name;
        let root = support::unzip(&fx.zip, &tmp.path().join(format!("t{i}")));
        let url = format!("az://{}/fixtures/t{i}", azurite::CONTAINER);
        objects += azurite::upload(&root, &url, &az.endpoint);
        let reach = Reach::ALL[i % Reach::ALL.len()];
        // hudifs ls: the local table's latest/, file for file.
        assert_eq!(
            support::ls_files(root.to_str().unwrap(), &[], &[]),
            support::ls_files(&url, &reach.args(&az), &reach.env(&az)),
            "{name} ({reach:?}): hudifs ls differs"
        );
        listings += 1;
        let m = mount(&url, &az, reach, &[]);
        let ro = mount(&url, &az, reach, &["--read-optimized"]);
        let lm = MountGuard::mount(&root, &[]);
        let lro = MountGuard::mount(&root, &["--read-optimized"]);
        // Every view of the expected answers, and the local mount's answer to each.
        let (n, p) = support::views_match_local(
            &format!("{name} ({reach:?})"),
            &fx.expected,
            (m.path(), ro.path()),
            (lm.path(), lro.path()),
        );
        views += n;
        problems.extend(p);
        // The bytes of every file of latest/ and of timeline/.
        for sub in ["latest", "timeline"] {
            files += support::same_files(&format!("{name} ({reach:?})"), m.path(), lm.path(), sub);
        }
    }
    eprintln!(
        "azurite: started in {:.1} s; {} tables ({objects} objects), {listings} `hudifs ls` \
         listings and {views} views compared with the expected and the local mount's answers, \
         {files} files read byte-exact, {} mismatches, {:.1} s in all",
        started.as_secs_f64(),
        fixtures.len(),
        problems.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A store of the emulator's table at `url`, as the test kit's uploads reach it.
fn seam(url: &str, az: &Azurite) -> Arc<ObjectStorage> {
    Arc::new(
        ObjectStorage::new(
            StoreUrl::parse(url).unwrap(),
            &azurite::options(&az.endpoint),
        )
        .unwrap(),
    )
}

/// Ask the kernel to drop its cached pages of `f` (FUSE honours POSIX_FADV_DONTNEED).
fn drop_kernel_cache(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain advice call on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

#[test]
fn a_replaced_az_object_is_estale_and_a_commit_on_the_store_shows_up() {
    if !fuse_available() {
        return;
    }
    let Some(az) = support::azurite() else {
        return;
    };
    let url = format!("az://{}/live", azurite::CONTAINER);
    let store = seam(&url, &az);
    // The project's generator writes the table straight to the store.
    let spec = TableSpec::new("live", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create_in(
        store.clone(),
        spec,
        Clock::Logical {
            start_ms: 1_767_225_600_000,
        },
    )
    .unwrap();
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", 8 << 20).unwrap();
    t.complete().unwrap();
    let first: Vec<String> = w.events().last().unwrap().written.clone();
    let m = mount(&url, &az, Reach::Endpoint, &["--poll-interval", "200"]);
    let rel = &first[0];
    let want = w.read(&TablePath::new(rel).unwrap()).unwrap();
    assert!(want.len() > 7 << 20, "{rel}: {} bytes", want.len());
    let path = m.path().join("latest").join(rel);
    assert!(std::fs::read(&path).unwrap() == want, "{rel} differs");
    // Replaced while open: the next read of bytes not yet fetched gives ESTALE.
    let f = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0; 4096];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf == want[..4096]);
    let mut other = want.clone();
    other[100] ^= 1;
    store.put(&TablePath::new(rel).unwrap(), &other).unwrap();
    drop_kernel_cache(&f);
    let err = f.read_exact_at(&mut buf, 6 << 20).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
    assert!(
        m.log_text().contains("changed since it was opened"),
        "{}",
        m.log_text()
    );
    drop(f);
    // A commit made on the store after the mount: latest/ follows it (polling).
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=b", 1 << 20).unwrap();
    t.complete().unwrap();
    let second: Vec<String> = w.events().last().unwrap().written.clone();
    let new = m.path().join("latest").join(&second[0]);
    let t0 = Instant::now();
    while !new.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{} not in latest/ after 30 s",
            second[0]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let want = w.read(&TablePath::new(&second[0]).unwrap()).unwrap();
    assert!(
        std::fs::read(&new).unwrap() == want,
        "{} differs",
        second[0]
    );
    eprintln!(
        "azurite: ESTALE for a replaced object; a commit on the store shown after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

#[test]
fn a_wrong_az_key_fails_the_mount_saying_what_to_check() {
    if !fuse_available() {
        return;
    }
    let Some(az) = support::azurite() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let local: PathBuf = tmp.path().join("t");
    let spec = TableSpec::new("k", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(&local, spec, 1_767_225_600_000).unwrap();
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", 64 << 10).unwrap();
    t.complete().unwrap();
    let url = format!("az://{}/wrongkey", azurite::CONTAINER);
    azurite::upload(&local, &url, &az.endpoint);
    let wrong = "d3JvbmcgYnV0IHdlbGwtZm9ybWVkIGJhc2U2NCBrZXk=";
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new(binary("hudifs"))
        .env("AZURE_STORAGE_ACCOUNT_KEY", wrong)
        .args(["mount", &url])
        .arg(&mnt)
        .args(azurite::store_args(&az.endpoint))
        .output()
        .unwrap();
    let _guard = MountGuard::adopt(
        &binary("hudifs"),
        &mnt,
        &String::from_utf8_lossy(&out.stdout),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("AZURE_STORAGE_ACCOUNT_KEY"), "message: {err}");
    assert!(
        !err.contains(wrong) && !err.contains(azurite::KEY),
        "a secret: {err}"
    );
    // The right key (this process's environment) mounts it.
    let m = mount(&url, &az, Reach::Endpoint, &[]);
    assert!(m.path().join("latest").is_dir());
}
