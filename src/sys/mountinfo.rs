//! The mount table of this process (`/proc/self/mountinfo`).

use std::path::Path;

/// Whether `path` is a mount point (listed in /proc/self/mountinfo).
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(canon) = path.canonicalize().or_else(|_| std::path::absolute(path)) else {
        return false;
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let target = canon.to_string_lossy();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .map(unescape)
            .is_some_and(|p| p == target)
    })
}

/// The device (`major:minor`) of the last mount at `target` (a path as the mount table spells
/// it), read from the mount table, not from a stat of the mount point (which would wait for a
/// FUSE daemon that does not serve yet).
pub fn device_of(target: &Path) -> Option<String> {
    let target = target.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .rfind(|l| l.split(' ').nth(4).map(unescape).as_deref() == Some(&target))
                .and_then(|l| l.split(' ').nth(2).map(str::to_string))
        })
}

/// A field of the mount table with its octal escapes (space, tab, newline, backslash) undone.
pub fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}
