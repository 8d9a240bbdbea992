//! The S3 servers the S3 figures run against, on 127.0.0.1: moto (Python, the tests' server;
//! a table is uploaded to it) and, in a build with the `s3bench` feature, s3s-fs in this
//! process (a table is linked into the directory it serves, no upload).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[cfg(feature = "s3bench")]
use hudifs_testkit::s3::BUCKET;
use hudifs_testkit::s3::{upload, FaultProxy, Moto};

use crate::Res;

/// What an S3 figure measures on: a table, the server it is put on, the latencies added, and
/// the hudi-rs side (a Python with `hudi` and `moto[server]`, and the timing script).
#[derive(clap::Args, Clone)]
pub struct S3Table {
    pub table: PathBuf,
    #[arg(long)]
    pub python: PathBuf,
    /// The hudi-rs timing script (scripts/bench-hudi-rs.py).
    #[arg(long)]
    pub script: PathBuf,
    /// Per-request latencies to measure at, in ms.
    #[arg(long, value_delimiter = ',', default_value = "0,20")]
    pub latency_ms: Vec<u64>,
    /// The S3 server: moto, or s3s-fs (in process; a build with --features s3bench).
    #[arg(long, default_value = "moto")]
    pub server: String,
}

/// A figure's table on its server, reached through the test kit's latency proxy.
pub struct Served {
    pub server: Server,
    pub proxy: FaultProxy,
    /// The objects the table has on the server.
    pub objects: usize,
}

/// Start `s3.server`, put `s3.table` on it as `url` and start the proxy in front of it (the
/// test credentials set in this process, for the programs it starts).
pub fn serve(s3: &S3Table, url: &str) -> Res<Served> {
    hudifs_testkit::s3::set_keys();
    let server = Server::start(&s3.server, &s3.python)?;
    let proxy = FaultProxy::start(server.addr(), 1);
    let t = Instant::now();
    let objects = server.put_table(&s3.table, url)?;
    println!(
        "   put {objects} objects on {} in {:.1} s",
        server.name(),
        t.elapsed().as_secs_f64()
    );
    Ok(Served {
        server,
        proxy,
        objects,
    })
}

pub enum Server {
    Moto(Moto),
    #[cfg(feature = "s3bench")]
    S3sFs {
        _rt: tokio::runtime::Runtime,
        addr: SocketAddr,
        root: tempfile::TempDir,
    },
}

impl Server {
    /// Start `kind` (`moto` or `s3s-fs`).
    pub fn start(kind: &str, python: &Path) -> Res<Server> {
        match kind {
            "moto" => Ok(Server::Moto(Moto::start(python))),
            #[cfg(feature = "s3bench")]
            "s3s-fs" => {
                let root = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
                std::fs::create_dir(root.path().join(BUCKET)).map_err(|e| e.to_string())?;
                let rt = crate::s3read::runtime()?;
                let endpoint = crate::s3read::start_server(&rt, root.path())?;
                let addr = endpoint
                    .trim_start_matches("http://")
                    .parse()
                    .map_err(|e| format!("{endpoint}: {e}"))?;
                Ok(Server::S3sFs {
                    _rt: rt,
                    addr,
                    root,
                })
            }
            other => Err(format!(
                "unknown S3 server {other:?} (moto{})",
                if cfg!(feature = "s3bench") {
                    ", s3s-fs"
                } else {
                    "; s3s-fs needs a build with --features s3bench"
                }
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Server::Moto(_) => "moto",
            #[cfg(feature = "s3bench")]
            Server::S3sFs { .. } => "s3s-fs",
        }
    }

    pub fn addr(&self) -> SocketAddr {
        match self {
            Server::Moto(m) => m.addr,
            #[cfg(feature = "s3bench")]
            Server::S3sFs { addr, .. } => *addr,
        }
    }

    /// Put the table at `table` on the server as `url` (`s3://lake/<key>`); the objects put.
    pub fn put_table(&self, table: &Path, url: &str) -> Res<usize> {
        match self {
            Server::Moto(m) => Ok(upload(table, url, &m.endpoint)),
            #[cfg(feature = "s3bench")]
            Server::S3sFs { root, .. } => {
                let key = url
                    .strip_prefix(&format!("s3://{BUCKET}/"))
                    .ok_or_else(|| format!("{url} is not in bucket {BUCKET}"))?;
                link_tree(table, &root.path().join(BUCKET).join(key))
            }
        }
    }
}

/// Hard-link (or copy) every file below `from` to the same place below `to`; the files.
#[cfg(feature = "s3bench")]
fn link_tree(from: &Path, to: &Path) -> Res<usize> {
    let mut n = 0;
    let mut stack = vec![from.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rel = dir.strip_prefix(from).map_err(|e| e.to_string())?;
        std::fs::create_dir_all(to.join(rel)).map_err(|e| e.to_string())?;
        for e in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let dst = to.join(p.strip_prefix(from).map_err(|e| e.to_string())?);
                if std::fs::hard_link(&p, &dst).is_err() {
                    std::fs::copy(&p, &dst).map_err(|e| format!("{}: {e}", p.display()))?;
                }
                n += 1;
            }
        }
    }
    Ok(n)
}
