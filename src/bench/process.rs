//! The daemon under measurement as a process of its own: the `sheetq` binary running
//! `sheetq run` on a config, its log in a file, stopped when dropped.

use std::path::Path;

use anyhow::Context as _;

/// Starts `exe run --config CONFIG`, logging warnings to `log`; the child and its pid.
pub fn spawn_daemon(
    exe: &Path,
    config: &Path,
    log: &Path,
) -> anyhow::Result<(tokio::process::Child, u32)> {
    let stderr =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let child = tokio::process::Command::new(exe)
        .arg("run")
        .arg("--config")
        .arg(config)
        .env("SHEETQ_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let pid = child.id().context("the daemon process has no pid")?;
    Ok((child, pid))
}
