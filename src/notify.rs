//! systemd integration without libsystemd (SEMANTICS.md §7.8): the readiness notification of
//! `Type=notify` services, and whether standard error is the journal.
//!
//! A service started with `NOTIFY_SOCKET` in its environment tells systemd it is ready by
//! sending `READY=1` as one datagram to that Unix socket (a path, or an abstract name written
//! with a leading `@`), as `sd_notify(3)` does. hudifs sends it once the mount is live, so units
//! ordered after the service start only then.

use std::ffi::OsString;
use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Mutex;

const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// The socket once [`ready`] took it out of the environment (for `STOPPING=1`).
static TAKEN: Mutex<Option<OsString>> = Mutex::new(None);

fn taken() -> std::sync::MutexGuard<'static, Option<OsString>> {
    TAKEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Send `state` (newline-separated `KEY=VALUE` lines) to systemd's notification socket. `Ok(false)`
/// when not started by systemd with one (no `NOTIFY_SOCKET`).
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(path) = std::env::var_os(NOTIFY_SOCKET).or_else(|| taken().clone()) else {
        return Ok(false);
    };
    let bytes = path.as_encoded_bytes();
    let addr = match bytes.first() {
        Some(b'@') => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(&bytes[1..])?
        }
        Some(b'/') => SocketAddr::from_pathname(&path)?,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("NOTIFY_SOCKET={path:?}: neither a path nor an abstract socket name"),
            ))
        }
    };
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(state.as_bytes(), &addr)?;
    Ok(true)
}

/// Tell systemd the mount is live and process `main_pid` serves it; later children do not see
/// the socket. Failures are logged, never fatal: the mount works either way.
pub fn ready(main_pid: u32, status: &str) {
    match notify(&format!("READY=1\nMAINPID={main_pid}\nSTATUS={status}\n")) {
        Ok(true) => log::info!("told systemd the mount is ready"),
        Ok(false) => {}
        Err(e) => log::warn!("could not tell systemd the mount is ready: {e}"),
    }
    if let Some(path) = std::env::var_os(NOTIFY_SOCKET) {
        *taken() = Some(path);
        std::env::remove_var(NOTIFY_SOCKET);
    }
}

/// Tell systemd the service is stopping (a no-op outside systemd).
pub fn stopping() {
    let _ = notify("STOPPING=1\n");
}

/// Whether standard error is the systemd journal: `JOURNAL_STREAM` (set by systemd for the
/// processes it connects to the journal) names the device and inode of fd 2.
pub fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var("JOURNAL_STREAM").ok() else {
        return false;
    };
    let Some((dev, ino)) = v.split_once(':') else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    crate::sys::fds::stderr_dev_ino() == Some((dev, ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test touches the environment (it is process-wide).
    #[test]
    fn readiness_reaches_a_path_socket_and_an_abstract_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        std::env::set_var(NOTIFY_SOCKET, &path);
        assert!(notify("STATUS=x\n").unwrap());
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STATUS=x\n");
        ready(42, "mounted t at m");
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(
            std::str::from_utf8(&buf[..n]).unwrap(),
            "READY=1\nMAINPID=42\nSTATUS=mounted t at m\n"
        );
        assert!(
            std::env::var_os(NOTIFY_SOCKET).is_none(),
            "unset after READY"
        );
        stopping();
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1\n", "the socket is remembered");
        *taken() = None;
        assert!(!notify("READY=1").unwrap(), "no socket: nothing sent");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("hudifs-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_listener = UnixDatagram::bind_addr(&addr).unwrap();
        std::env::set_var(NOTIFY_SOCKET, format!("@{name}"));
        assert!(notify("READY=1\n").unwrap());
        let n = abstract_listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");

        std::env::set_var(NOTIFY_SOCKET, "vsock:2:1234");
        assert!(notify("READY=1\n").is_err());
        std::env::remove_var(NOTIFY_SOCKET);

        // JOURNAL_STREAM must name fd 2 itself.
        let (dev, ino) = crate::sys::fds::stderr_dev_ino().expect("fstat of fd 2");
        let saved = std::env::var_os("JOURNAL_STREAM");
        std::env::set_var("JOURNAL_STREAM", format!("{dev}:{ino}"));
        assert!(stderr_is_journal());
        std::env::set_var("JOURNAL_STREAM", format!("{dev}:{}", ino + 1));
        assert!(!stderr_is_journal());
        std::env::set_var("JOURNAL_STREAM", "junk");
        assert!(!stderr_is_journal());
        match saved {
            Some(v) => std::env::set_var("JOURNAL_STREAM", v),
            None => std::env::remove_var("JOURNAL_STREAM"),
        }
    }
}
