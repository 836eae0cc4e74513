//! The pace of a daemon that keeps failing at start-up, kept across restarts: the count of
//! starts in a row that ended the process, and when the last one did, in
//! `state_dir/start-failures`. Each start waits `5 s × 2^(n−1)` (at most 10 minutes) after
//! the n-th failure before its first request, so a service manager that restarts it every
//! few seconds cannot make it spend the account's quota; the first pass that works clears
//! the record. Only this machine's clock is compared with itself.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{debug, warn};

/// The record's file under `state_dir`.
const FILE: &str = "start-failures";

/// The wait after the first failed start; each one after it doubles it.
const FIRST: Duration = Duration::from_secs(5);

/// The longest wait before a start.
const MAX: Duration = Duration::from_secs(10 * 60);

fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// `(failures in a row, unix seconds of the last)`, or none.
fn read(state_dir: &Path) -> Option<(u32, u64)> {
    let text = std::fs::read_to_string(path(state_dir)).ok()?;
    let (n, at) = text.trim().split_once(' ')?;
    Some((n.parse().ok()?, at.parse().ok()?))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The wait after `failures` failed starts in a row.
pub(super) fn wait_after(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(MAX)
}

/// How long this start waits before its first request: what is left of the wait after the
/// failures recorded (a clock set back counts as no time passed).
pub(super) fn wait_before_start(state_dir: &Path) -> Duration {
    let Some((failures, at)) = read(state_dir) else {
        return Duration::ZERO;
    };
    let passed = Duration::from_secs(now_secs().saturating_sub(at));
    wait_after(failures).saturating_sub(passed)
}

/// A start ended the process: one more failure in a row, recorded.
pub(super) fn failed(state_dir: &Path) {
    let failures = read(state_dir).map_or(0, |(n, _)| n).saturating_add(1);
    let text = format!("{failures} {}\n", now_secs());
    if let Err(e) = write_private(&path(state_dir), text.as_bytes()) {
        warn!(error = %e, "could not record the failed start; the next one will not wait for it");
    }
}

/// Writes `bytes` to `path`, readable by this user only.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// A pass worked: the record of failed starts goes.
pub(super) fn cleared(state_dir: &Path) {
    match std::fs::remove_file(path(state_dir)) {
        Ok(()) => debug!("started well: the record of failed starts is cleared"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => warn!(error = %e, "could not clear the record of failed starts"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failed_start_doubles_the_wait_from_five_seconds_up_to_ten_minutes() {
        let waits: Vec<u64> = (0..10).map(|n| wait_after(n).as_secs()).collect();
        assert_eq!(waits, [0, 5, 10, 20, 40, 80, 160, 320, 600, 600]);
    }

    #[test]
    fn the_record_outlives_the_process_and_a_good_start_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(wait_before_start(dir.path()), Duration::ZERO);
        failed(dir.path());
        failed(dir.path());
        let wait = wait_before_start(dir.path());
        assert!(
            wait > Duration::from_secs(8) && wait <= Duration::from_secs(10),
            "two failures just now: about 10 s left, got {wait:?}"
        );
        cleared(dir.path());
        assert_eq!(wait_before_start(dir.path()), Duration::ZERO);
    }
}
