use clap::Parser;
use hudifs::cli::{Cli, Command};

fn main() {
    env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("warn,hudifs=info,fuser=error"),
    )
    .init();
    let cli = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    let result = match &cli.command {
        Command::Ls(args) => hudifs::cli::run_ls(args, &mut stdout),
        Command::Timeline(args) => hudifs::cli::run_timeline(args, &mut stdout),
        Command::Mount(args) => hudifs::daemon::mount(args),
        Command::Umount { mountpoint } => hudifs::daemon::umount(mountpoint),
    };
    if let Err(e) = result {
        eprintln!("hudifs: {e}");
        std::process::exit(e.exit_code());
    }
}
