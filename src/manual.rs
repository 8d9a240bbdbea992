//! What the command line says about itself, generated from its clap definitions so it cannot
//! drift: `hudifs completions bash|zsh|fish` (a completion script on standard output) and
//! `hudifs man` (the manual page as roff, `hudifs man | man -l -`; packagers write it to
//! `hudifs.1`). SEMANTICS.md §7.10.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::{Error, Result};

/// Write the completion script of `shell` for the `hudifs` program.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "hudifs", out);
    Ok(())
}

/// Write the manual page: `hudifs(1)` with every subcommand's options in it.
pub fn man(out: &mut dyn Write) -> Result<()> {
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    let cmd = Cli::command();
    let page = clap_mangen::Man::new(cmd.clone());
    page.render_title(out).map_err(w)?;
    page.render_name_section(out).map_err(w)?;
    page.render_synopsis_section(out).map_err(w)?;
    page.render_description_section(out).map_err(w)?;
    page.render_options_section(out).map_err(w)?;
    // Each subcommand is a section of this page (not a page of its own, as clap_mangen's
    // SUBCOMMANDS section would have it).
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = sub.get_name();
        writeln!(out, ".SH \"HUDIFS {}\"", name.to_uppercase()).map_err(w)?;
        let sub = sub.clone().bin_name(format!("hudifs {name}"));
        let sub_page = clap_mangen::Man::new(sub.clone());
        // The subcommand's synopsis and options as paragraphs of the one page.
        let mut buf = Vec::new();
        sub_page.render_synopsis_section(&mut buf).map_err(w)?;
        sub_page.render_options_section(&mut buf).map_err(w)?;
        sub_page.render_extra_section(&mut buf).map_err(w)?;
        let text = String::from_utf8_lossy(&buf).replace(".SH ", ".SS ");
        out.write_all(text.as_bytes()).map_err(w)?;
    }
    out.write_all(FILES_AND_EXAMPLES.as_bytes()).map_err(w)?;
    page.render_version_section(out).map_err(w)?;
    Ok(())
}

const FILES_AND_EXAMPLES: &str = r#".SH EXAMPLES
.nf
hudifs mount /data/trips /mnt/trips
mount \-t fuse.hudifs /data/trips /mnt/trips \-o ro,allow_other,poll_interval=500
/data/trips  /mnt/trips  fuse.hudifs  ro,allow_other,x\-systemd.automount,_netdev  0 0
hudifs status \-\-json
hudifs umount /mnt/trips
.fi
.SH FILES
.TP
$TMPDIR/hudifs\-<uid>/<mount point>.log
the log of a background daemon (/tmp without TMPDIR)
.TP
$TMPDIR/hudifs\-<uid>/<mount point>.state
the daemon's pid and log while it serves the mount (read by hudifs status)
.SH EXIT STATUS
0 success, 1 a runtime error, 2 a usage error.
.SH SEE ALSO
mount(8), fstab(5), mount.fuse3(8), systemd.mount(5), systemd.automount(5)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_for_three_shells() {
        for (shell, marker) in [
            (clap_complete::Shell::Bash, "complete -F"),
            (clap_complete::Shell::Zsh, "#compdef hudifs"),
            (clap_complete::Shell::Fish, "complete -c hudifs"),
        ] {
            let mut out = Vec::new();
            completions(shell, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains(marker), "{shell}: {text:.200}");
            for word in ["mount", "status", "poll-interval", "file-mode"] {
                assert!(text.contains(word), "{shell} completion lacks {word}");
            }
        }
    }

    #[test]
    fn the_man_page_covers_every_subcommand() {
        let mut out = Vec::new();
        man(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH hudifs"),
            "{text:.300}"
        );
        for sub in [
            "MOUNT",
            "UMOUNT",
            "LS",
            "TIMELINE",
            "STATUS",
            "COMPLETIONS",
            "MAN",
        ] {
            assert!(text.contains(&format!(".SH \"HUDIFS {sub}\"")), "no {sub}");
        }
        for opt in [
            "poll\\-interval",
            "file\\-mode",
            "dir\\-mode",
            "allow\\-other",
            "fuse.hudifs",
        ] {
            assert!(text.contains(opt), "man page lacks {opt}");
        }
        assert!(text.contains(crate::VERSION), "version");
    }
}
