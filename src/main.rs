//! The `sheetq` binary: parses the command line, sets up logging and hands over to
//! [`sheetq::cli::execute`]. No logic lives here.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use sheetq::cli::{Cli, LogFormat};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo and the bench print their own progress; their daemons only speak up when
    // something is wrong.
    let default_level = match cli.command {
        // The demo's one failing press is on purpose, and its table shows the error: its
        // warning would only interleave with the progress lines (`-v` brings logs back).
        sheetq::cli::Command::Demo(_) => "error",
        sheetq::cli::Command::Bench(_) => "warn",
        _ => "info",
    };
    let filter = EnvFilter::try_from_env("SHEETQ_LOG")
        .unwrap_or_else(|_| EnvFilter::new(cli.log_level(default_level)));
    // A log line that cannot be written (the reader of stderr went away: `sheetq run 2>&1 |
    // head`) is dropped. By default the subscriber reports such a failure with `eprintln!`
    // on that same closed stderr, which panics, and a panic there would also cost the
    // daemon its SIGTERM handling.
    // Colour codes only for a person at a terminal: journald, files and pipes get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .log_internal_errors(false);
    match cli.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
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
