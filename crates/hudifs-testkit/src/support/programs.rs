//! Running programs the tests talk to: the `hudifs` binary, HTTP endpoints, a process that keeps
//! a directory busy.

use std::path::Path;

use serde_json::Value;

/// Run the hudifs binary: (exit code, stdout, stderr).
pub fn run_hudifs<I, S>(args: I) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = std::process::Command::new(crate::mount::binary("hudifs"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `hudifs ls --json TABLE` with `args` and `env`, without the files' mtimes (an object's is
/// the time of its upload).
pub fn ls_files(table: &str, args: &[String], env: &[(&str, String)]) -> Value {
    let out = std::process::Command::new(crate::mount::binary("hudifs"))
        .args(["ls", "--json", table])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "hudifs ls {table}: {stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let mut files = v["files"].clone();
    for f in files.as_array_mut().expect("files") {
        f.as_object_mut().unwrap().remove("mtime_ms");
    }
    files
}

/// `GET path` on 127.0.0.1:`port`: the status line and the body.
pub fn http_get(port: u16, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// A process whose working directory is `dir` (a `sleep`), so that a mount holding `dir` is
/// busy until this is dropped: the process is killed and reaped then.
pub struct BusyIn(std::process::Child);
impl BusyIn {
    pub fn start(dir: &Path) -> BusyIn {
        BusyIn(
            std::process::Command::new("sleep")
                .arg("60")
                .current_dir(dir)
                .spawn()
                .expect("sleep"),
        )
    }
}

impl Drop for BusyIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
