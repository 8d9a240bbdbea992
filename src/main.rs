use clap::{CommandFactory, Parser};
use hudifs::cli::{Cli, Command};

fn main() {
    env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("warn,hudifs=info,fuser=error"),
    )
    // Milliseconds: a mount, a listing or a poll is timed in them.
    .format_timestamp_millis()
    .init();
    // `hudifs TABLE MNT -o OPTS`, as mount.fuse3 runs it, is `hudifs mount TABLE MNT -o OPTS`.
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .chain(["help".to_string()])
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let cli = Cli::parse_from(hudifs::options::helper_argv(
        std::env::args_os().collect(),
        &names,
    ));
    let mut stdout = std::io::stdout().lock();
    let result = match &cli.command {
        Command::Ls(args) => hudifs::cli::run_ls(args, &mut stdout),
        Command::Timeline(args) => hudifs::cli::run_timeline(args, &mut stdout),
        Command::Mount(args) => hudifs::mount_config::MountConfig::from_args(args)
            .and_then(|cfg| hudifs::daemon::mount(&cfg)),
        Command::Umount { mountpoint } => hudifs::daemon::umount(mountpoint),
        Command::Status(args) => hudifs::status::run(args, &mut stdout),
        Command::Csi(args) => hudifs::csi::run(args),
        Command::Completions { shell } => hudifs::manual::completions(*shell, &mut stdout),
        Command::Man => hudifs::manual::man(&mut stdout),
    };
    if let Err(e) = result {
        eprintln!("hudifs: {e}");
        std::process::exit(e.exit_code());
    }
}
