//! Extended attributes.

use std::path::Path;

use super::c_path;

/// Extended attribute `name` of `path`, read whole (the buffer grows on ERANGE).
pub fn get(path: &Path, name: &str) -> std::io::Result<String> {
    let p = c_path(path).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let n = std::ffi::CString::new(name).expect("attribute name");
    let mut buf = vec![0u8; 256];
    loop {
        // SAFETY: valid C strings and a buffer of the length given.
        let len =
            unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if len >= 0 {
            buf.truncate(len as usize);
            return Ok(String::from_utf8_lossy(&buf).to_string());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ERANGE) || buf.len() >= 1 << 16 {
            return Err(err);
        }
        // Larger than asked for (the metrics): the kernel allows up to 64 KiB.
        buf.resize(1 << 16, 0);
    }
}
