//! The build's git revision for `hudifs --version` (`HUDIFS_GIT_REV`): `git rev-parse --short
//! HEAD` where the source is a git checkout and git is installed, `unknown` otherwise (a source
//! tarball or a clone without .git still builds).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rev = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HUDIFS_GIT_REV={rev}");
    // Rebuild when HEAD moves: HEAD itself, the branch it names, packed refs. Only files that
    // exist (a missing one would rerun this script on every build).
    let mut watch = Vec::new();
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        watch.push(head);
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &branch]) {
            watch.push(p);
        }
    }
    if let Some(p) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        watch.push(p);
    }
    for p in watch {
        if std::path::Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
