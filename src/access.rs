//! Who may read a mount: the owner, group and permission bits every node shows
//! (`--uid`, `--gid`, `--file-mode`, `--dir-mode`, as mount-s3 has them; SEMANTICS.md §7.1),
//! and the parsers the command line and `-o` share. A mode never carries a write bit: the
//! mount is read-only whatever the bits say, and a mode that claimed otherwise would mislead.
//!
//! The bits are enforced by the kernel only with `default_permissions`, which the daemon turns
//! on whenever one of these options is given; without it (and without any of them) the mount
//! behaves as before: owner and group of the table root, `r-x` for directories, the table file's
//! read and execute bits for data files, `r--` for `timeline/` files.

/// Owner and modes to show, each `None` for "as before".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Access {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Permission bits of every file (data files and `timeline/` files).
    pub file_mode: Option<u16>,
    /// Permission bits of every directory.
    pub dir_mode: Option<u16>,
}

impl Access {
    /// Whether any of the options was given (the kernel must then check the bits).
    pub fn is_set(&self) -> bool {
        *self != Access::default()
    }
}

/// An octal mode of read and execute bits: `0444`, `444`, `0o550`. Write bits, set-id and sticky
/// bits are refused.
pub fn parse_mode(s: &str) -> Result<u16, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(format!("{s:?} is not an octal mode (e.g. 0444, 0550)"));
    }
    let mode = u32::from_str_radix(digits, 8).map_err(|_| format!("{s:?} is too large"))?;
    if mode > 0o777 {
        return Err(format!(
            "{s}: only permission bits (at most 0777) are accepted, no set-id or sticky bits"
        ));
    }
    if mode & 0o222 != 0 {
        return Err(format!(
            "{s}: hudifs mounts are read-only, a mode with a write bit is refused (e.g. {:04o})",
            mode & 0o555
        ));
    }
    Ok(mode as u16)
}

/// A user: a number, or a name of the user database.
pub fn parse_uid(s: &str) -> Result<u32, String> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    lookup(s, true).ok_or_else(|| format!("{s:?}: no such user (give a name or a number)"))
}

/// A group: a number, or a name of the group database.
pub fn parse_gid(s: &str) -> Result<u32, String> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    lookup(s, false).ok_or_else(|| format!("{s:?}: no such group (give a name or a number)"))
}

/// The id of user (or group) `name`, through the C library (NSS: files, LDAP, ...).
fn lookup(name: &str, user: bool) -> Option<u32> {
    if user {
        crate::sys::ids::user_named(name)
    } else {
        crate::sys::ids::group_named(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_octal_read_and_execute_bits() {
        assert_eq!(parse_mode("0444"), Ok(0o444));
        assert_eq!(parse_mode("444"), Ok(0o444));
        assert_eq!(parse_mode("0o550"), Ok(0o550));
        assert_eq!(parse_mode("0"), Ok(0));
        for bad in [
            "0644", "0755", "0200", "4555", "01555", "abc", "", "0o", "9", "0x1ed",
        ] {
            assert!(parse_mode(bad).is_err(), "{bad} accepted");
        }
        assert!(parse_mode("0644").unwrap_err().contains("0444"));
    }

    #[test]
    fn owners_are_numbers_or_names() {
        assert_eq!(parse_uid("1234"), Ok(1234));
        assert_eq!(parse_gid("0"), Ok(0));
        assert_eq!(parse_uid("root"), Ok(0));
        assert_eq!(parse_gid("root"), Ok(0));
        assert!(parse_uid("no-such-user-hudifs").is_err());
        assert!(parse_gid("no-such-group-hudifs").is_err());
        assert!(parse_uid("-1").is_err());
    }
}
