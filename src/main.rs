//! The `sheetq` binary: parses the command line, sets up logging and hands over to
//! [`sheetq::cli::execute`]. No logic lives here.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use sheetq::cli::{Cli, LogFormat};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // First: every file sheetq creates (state_dir, outbox, output files) is 0600/0700.
    sheetq::privacy::keep_files_private();
    let cli = Cli::parse();
    // The demo and the bench print their own progress; their daemons only speak up when
    // something is wrong.
    let default_level = match cli.command {
        // The demo's one failing press is on purpose, and its table shows the error: its
        // warning would only interleave with the progress lines (`-v` brings logs back).
        #[cfg(feature = "emulator")]
        sheetq::cli::Command::Demo(_) => "error",
        #[cfg(feature = "emulator")]
        sheetq::cli::Command::Bench(_) => "warn",
        _ => "info",
    };
    // SHEETQ_LOG, else the ecosystem's RUST_LOG, else the flags.
    let filter = EnvFilter::try_from_env("SHEETQ_LOG")
        .or_else(|_| EnvFilter::try_from_env("RUST_LOG"))
        .unwrap_or_else(|_| {
            EnvFilter::new(sheetq::logging::directives(cli.log_level(default_level)))
        });
    // Under systemd, with stderr connected to the journal, log to journald itself: each line
    // keeps its level (as the journal's priority) and its fields (job.id, target, worker) as
    // journal fields, for `journalctl -p warning` and `-o json`. `--log-format json` keeps
    // JSON on stderr.
    if cli.log_format == LogFormat::Text && stderr_is_journal() {
        if let Ok(journald) = tracing_journald::layer() {
            tracing_subscriber::registry()
                .with(filter)
                .with(journald.with_syslog_identifier("sheetq".into()))
                .init();
            return run(cli);
        }
    }
    // A log line that cannot be written (the reader of stderr went away: `sheetq run 2>&1 |
    // head`) is dropped. By default the subscriber reports such a failure with `eprintln!`
    // on that same closed stderr, which panics, and a panic there would also cost the
    // daemon its SIGTERM handling.
    // Colour codes only for a person at a terminal: files and pipes get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false);
    match cli.log_format {
        // With Cloud Logging's `severity`, so a container's lines keep their level.
        LogFormat::Json => builder
            .json()
            .event_format(sheetq::logging::WithSeverity(
                tracing_subscriber::fmt::format().json(),
            ))
            .init(),
        // Fields bounded and made visible: a cell's text never floods or rewrites a line.
        LogFormat::Text => builder.fmt_fields(sheetq::logging::bounded_fields()).init(),
    }
    run(cli)
}

/// Whether stderr is the journal's stream: systemd sets `JOURNAL_STREAM` to the device and
/// inode of it, and a process must compare them with its own stderr (a child whose stderr
/// was redirected inherits the variable).
fn stderr_is_journal() -> bool {
    let Ok(value) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.split_once(':') else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    nix::sys::stat::fstat(2).is_ok_and(|st| st.st_dev == dev && st.st_ino == ino)
}

fn run(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sheetq: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(sheetq::cli::execute(cli))
}
