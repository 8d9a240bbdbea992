//! The S3 servers the S3 figures run against, on 127.0.0.1: moto (Python, the tests' server;
//! a table is uploaded to it) and, in a build with the `s3bench` feature, s3s-fs in this
//! process (a table is linked into the directory it serves, no upload).

use std::net::SocketAddr;
use std::path::Path;

#[cfg(feature = "s3bench")]
use hudifs_testkit::s3::BUCKET;
use hudifs_testkit::s3::{upload, Moto};

use crate::Res;

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
