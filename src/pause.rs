//! The note a daemon leaves in its `state_dir` while it holds a spreadsheet off
//! (`daemon::hold_off`): since when, why, and when it tries again. `sheetq status` on the
//! same machine shows it, at no request: the spreadsheet that refuses the daemon's writes
//! cannot be told, and `/readyz` answers only on the daemon's own port.
//!
//! One small JSON file, `state_dir/held-off.json`, written whole through a temporary file
//! and a rename (so a reader never sees half of it) and removed when the spreadsheet is
//! served again. Its reason is the error's text, which may quote sheet values: the printer
//! escapes it (`catalog::shown`-style) like any text that is not sheetq's own.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A spreadsheet held off, as its daemon last said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// When the hold-off began (this run of failures' first).
    pub since: DateTime<Utc>,
    /// When the daemon tries again.
    pub retry_at: DateTime<Utc>,
    /// Why: the error that held it off, cut to 200 characters.
    pub reason: String,
}

impl Pause {
    /// A hold-off that began at `since` and tries again `wait` after `now`, because of
    /// `reason` (cut to 200 characters).
    pub fn new(
        since: DateTime<Utc>,
        now: DateTime<Utc>,
        wait: std::time::Duration,
        reason: &str,
    ) -> Self {
        let cut = reason
            .char_indices()
            .nth(200)
            .map_or(reason.len(), |(i, _)| i);
        Self {
            since,
            retry_at: now + chrono::Duration::from_std(wait).unwrap_or_default(),
            reason: reason[..cut].to_string(),
        }
    }

    /// The line `sheetq status` prints, times in `tz`: the reason escaped, since it may
    /// quote sheet values.
    pub fn line(&self, tz: chrono_tz::Tz) -> String {
        format!(
            "HELD OFF (this machine's daemon) since {}: {:?}; next try {}",
            self.since.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %Z"),
            self.reason,
            self.retry_at.with_timezone(&tz).format("%H:%M:%S %Z")
        )
    }

    /// Leaves it for `sheetq status` in `state_dir`; a failure is logged (the note is for
    /// people, nothing decides on it).
    pub fn leave(&self, state_dir: &Path) {
        if let Err(e) = write(state_dir, self) {
            tracing::warn!(error = %e, "could not leave the hold-off note for `sheetq status` in state_dir");
        }
    }
}

fn file(state_dir: &Path) -> PathBuf {
    state_dir.join("held-off.json")
}

/// Leaves `pause` for `sheetq status`; an error says why it could not (the daemon logs it
/// and goes on: the note is for people, nothing decides on it).
pub fn write(state_dir: &Path, pause: &Pause) -> std::io::Result<()> {
    let text = serde_json::to_vec(pause).map_err(std::io::Error::other)?;
    let tmp = state_dir.join("held-off.json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, file(state_dir))
}

/// Removes the note: the spreadsheet is served again. Gone already is fine.
pub fn clear(state_dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(file(state_dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The note, when a daemon on this machine holds the spreadsheet off; a note that does not
/// parse reads as none.
pub fn read(state_dir: &Path) -> Option<Pause> {
    let text = std::fs::read(file(state_dir)).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_note_left_is_read_back_until_it_is_cleared() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(dir.path()), None, "no note: not held off");
        let at = |m| Utc.with_ymd_and_hms(2026, 12, 6, 10, m, 0).unwrap();
        let pause = Pause {
            since: at(0),
            retry_at: at(1),
            reason: "You are trying to edit a protected cell".into(),
        };
        write(dir.path(), &pause).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(dir.path()), Some(pause));
        clear(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(dir.path()), None);
        clear(dir.path()).unwrap_or_else(|e| panic!("clearing twice is fine: {e}"));
    }
}
