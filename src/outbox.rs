//! The durable local outbox: every finished job's result is written here (and fsync'd)
//! before sheetq tries to write it to the sheet, and marked done once the sheet has it.
//!
//! This is what makes "a result is never lost" true when the API is down or the daemon is
//! killed between the end of a job and the write-back: on start, whatever is still pending
//! is written first. A record is keyed by jobId and carries the claim token, so it can only
//! ever land on the row it was claimed from.
//!
//! Format: a [`crate::journal`] keyed by jobId (`{"put": {...}}` / `{"done": "<jobId>"}`),
//! compacted on open. A lock file keeps two daemons from sharing one outbox (and the
//! notification outbox beside it).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::journal::{Journal, JournalError};

/// How a finished job ended, as it will be written to 状態.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Finish {
    Done,
    Error,
    Timeout,
    /// Stopped (or never started) because someone asked to (中止要求, ■, `sheetq cancel`).
    Cancelled,
    /// Never ran: an approver stopped it while it waited for approval (docs/design.md §5.5).
    Rejected,
    /// Never ran: not approved within its function's `approval_expires`.
    Expired,
}

impl Finish {
    /// The 状態 of a job that ended so.
    pub fn state(self) -> crate::queue::State {
        use crate::queue::State;
        match self {
            Finish::Done => State::Done,
            Finish::Error => State::Error,
            Finish::Timeout => State::Timeout,
            Finish::Cancelled => State::Cancelled,
            Finish::Rejected => State::Rejected,
            Finish::Expired => State::Expired,
        }
    }
}

/// A queue row to append when a job asked to continue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    /// Fixed when the job finished, so a retried append can see it already landed.
    pub job_id: String,
    pub args_json: String,
}

/// A finished job waiting to be written to the sheet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedJob {
    pub job_id: String,
    /// The ワーカー text of our claim; the row is only written while it still says this.
    pub worker: String,
    pub finish: Finish,
    pub finished_at: DateTime<Utc>,
    pub url: String,
    pub message: String,
    pub target: String,
    pub function: String,
    pub panel_sheet: String,
    pub panel_row: Option<u32>,
    pub requester: String,
    pub command: String,
    pub flags: Vec<String>,
    pub continuation: Option<Continuation>,
    /// When our claim committed (by our clock): written back with the result, so a finished
    /// row always names who ran it and since when. Absent in records of older versions.
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    /// Whether the claim commit made the job a `_ジョブログ` row (bound to it through
    /// [`crate::joblog::binding_id`]), which the result then fills.
    #[serde(default)]
    pub log_row: bool,
    /// Whether its 結果URL and panel 結果 are the claim commit's link formulas, which the
    /// result then leaves in place.
    #[serde(default)]
    pub linked: bool,
    /// Whether its panel row's 結果 is the claim commit's formula.
    #[serde(default)]
    pub panel_linked: bool,
    /// The tail of what the job printed, for its log row.
    #[serde(default)]
    pub output: String,
    /// Its inputs for people (`version=1.2.4`), for its log row, panel row and notices;
    /// empty for a function without (and in records of older versions).
    #[serde(default)]
    pub inputs: String,
}

impl FinishedJob {
    /// Queue row `row`'s job, ended `finish` at `at` with `message` under claim `worker`, as
    /// far as the row tells: no URL, continuation, output or links.
    pub fn ended(
        row: &crate::queue::QueueRow,
        worker: String,
        finish: Finish,
        at: DateTime<Utc>,
        message: String,
    ) -> Self {
        FinishedJob {
            job_id: row.job_id.clone(),
            worker,
            finish,
            finished_at: at,
            url: String::new(),
            message,
            target: row.target.clone(),
            function: row.function.clone(),
            panel_sheet: row.panel_sheet.clone(),
            panel_row: row.panel_row,
            requester: row.requester.clone(),
            command: row.command.clone(),
            flags: row.flags.clone(),
            continuation: None,
            started_at: row.started_at,
            log_row: false,
            linked: false,
            panel_linked: false,
            output: String::new(),
            inputs: String::new(),
        }
    }

    /// The job as a queue row (as far as the record knows it), for finding its panel row
    /// when the queue row itself is gone.
    pub fn as_row(&self) -> crate::queue::QueueRow {
        crate::queue::QueueRow {
            row: 0,
            job_id: self.job_id.clone(),
            received_at: None,
            requester: self.requester.clone(),
            panel_sheet: self.panel_sheet.clone(),
            panel_row: self.panel_row,
            target: self.target.clone(),
            function: self.function.clone(),
            command: self.command.clone(),
            args_json: String::new(),
            flags: self.flags.clone(),
            state: crate::queue::RowState::Known(crate::queue::State::Running),
            started_at: None,
            finished_at: Some(self.finished_at),
            result_url: self.url.clone(),
            message: self.message.clone(),
            worker: self.worker.clone(),
            cancel_request: String::new(),
            approvals: String::new(),
        }
    }
}

/// Why the outbox cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error(
        "outbox {path}: {source}; check that state_dir exists and is writable by the daemon's user"
    )]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("outbox {path} is in use by another sheetq process (lock held); give each daemon its own state_dir")]
    Locked { path: PathBuf },
}

/// Results whose queue row was deleted, beside `outbox.jsonl` in the state directory.
pub const UNPLACEABLE_FILE: &str = "unplaceable.jsonl";

/// Reads the results recorded by [`Outbox::record_unplaceable`] in `dir` (none if the file
/// does not exist; unreadable lines are skipped).
pub fn read_unplaceable(dir: &Path) -> Vec<FinishedJob> {
    let Ok(text) = fs::read_to_string(dir.join(UNPLACEABLE_FILE)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The results waiting in the outbox of `dir`, read without taking its lock or changing it
/// (for `sheetq status` beside a running daemon); none when there is no outbox.
pub fn read_pending(dir: &Path) -> Vec<FinishedJob> {
    crate::journal::read(&dir.join(OUTBOX_FILE), key)
}

/// The outbox's file in the state directory.
const OUTBOX_FILE: &str = "outbox.jsonl";

/// A result's key in the journal: its jobId.
fn key(job: &FinishedJob) -> String {
    job.job_id.clone()
}

/// The outbox of one daemon.
#[derive(Debug)]
pub struct Outbox {
    journal: Journal<FinishedJob>,
    _lock: nix::fcntl::Flock<File>,
}

impl From<JournalError> for OutboxError {
    fn from(e: JournalError) -> Self {
        OutboxError::Io {
            path: e.path,
            source: e.source,
        }
    }
}

impl Outbox {
    /// Opens (creating if needed) `dir/outbox.jsonl`, replays it, and compacts it.
    pub fn open(dir: &Path) -> Result<Self, OutboxError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OutboxError::Io {
                path: path.clone(),
                source,
            }
        };
        fs::create_dir_all(dir).map_err(io(dir))?;
        let lock_path = dir.join("outbox.lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        let lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|_| OutboxError::Locked {
                path: lock_path.clone(),
            })?;
        let journal = Journal::open(&dir.join(OUTBOX_FILE), key, |_| true)?;
        Ok(Self {
            journal,
            _lock: lock,
        })
    }

    /// Stores a finished job durably (fsync) before anything else happens to it.
    pub fn put(&mut self, job: FinishedJob) -> Result<(), OutboxError> {
        Ok(self.journal.put(job)?)
    }

    /// Marks jobs as written (or as never to be written, e.g. a claim lost to a timeout).
    pub fn done<'a>(
        &mut self,
        job_ids: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), OutboxError> {
        for id in job_ids {
            self.journal.done(id)?;
        }
        Ok(())
    }

    /// Replaces a pending record (e.g. once its continuation row has been appended).
    pub fn update(&mut self, job: FinishedJob) -> Result<(), OutboxError> {
        self.put(job)
    }

    pub fn pending(&self) -> impl Iterator<Item = &FinishedJob> {
        self.journal.records()
    }

    /// The pending result of `job_id`, if any.
    pub fn get(&self, job_id: &str) -> Option<&FinishedJob> {
        self.journal.get(job_id)
    }

    pub fn contains(&self, job_id: &str) -> bool {
        self.journal.contains(job_id)
    }

    pub fn len(&self) -> usize {
        self.journal.len()
    }

    pub fn is_empty(&self) -> bool {
        self.journal.is_empty()
    }

    pub fn path(&self) -> &Path {
        self.journal.path()
    }

    /// Keeps a result whose queue row a person deleted in `unplaceable.jsonl` beside the
    /// outbox (one JSON line each, appended and fsynced), so it is never silently lost and
    /// `sheetq status` can show it.
    pub fn record_unplaceable(&self, job: &FinishedJob) -> Result<(), OutboxError> {
        let path = self.path().with_file_name(UNPLACEABLE_FILE);
        let err = |source| OutboxError::Io {
            path: path.clone(),
            source,
        };
        let line = serde_json::to_string(job).map_err(|e| err(e.into()))?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(err)?;
        writeln!(f, "{line}").map_err(err)?;
        f.sync_all().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str) -> FinishedJob {
        FinishedJob {
            job_id: id.into(),
            worker: "vm-1/0 #abc".into(),
            finish: Finish::Done,
            finished_at: Utc::now(),
            url: "https://example.com".into(),
            message: "=1+1 stays text".into(),
            target: "A".into(),
            function: "集計".into(),
            panel_sheet: "パネルA".into(),
            panel_row: Some(8),
            requester: String::new(),
            command: "sleep".into(),
            flags: vec![],
            continuation: None,
            started_at: None,
            log_row: true,
            linked: true,
            panel_linked: true,
            output: "=cmd output\nstays text".into(),
            inputs: String::new(),
        }
    }

    #[test]
    fn pending_results_survive_a_reopen_and_done_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut o = Outbox::open(dir.path()).unwrap();
            o.put(job("a")).unwrap();
            o.put(job("b")).unwrap();
            o.done(["a"]).unwrap();
        }
        let o = Outbox::open(dir.path()).unwrap();
        let ids: Vec<&str> = o.pending().map(|j| j.job_id.as_str()).collect();
        assert_eq!(
            ids,
            ["b"],
            "b was never written to the sheet, so it must still be pending"
        );
        assert_eq!(
            o.pending().next().unwrap(),
            &job_with_time("b", o.pending().next().unwrap().finished_at)
        );
    }

    fn job_with_time(id: &str, t: DateTime<Utc>) -> FinishedJob {
        FinishedJob {
            finished_at: t,
            ..job(id)
        }
    }

    #[test]
    fn a_torn_last_line_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut o = Outbox::open(dir.path()).unwrap();
            o.put(job("a")).unwrap();
        }
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("outbox.jsonl"))
            .unwrap();
        write!(f, "{{\"put\": {{\"job_id\": \"b\"").unwrap();
        drop(f);
        let o = Outbox::open(dir.path()).unwrap();
        assert_eq!(o.len(), 1);
        assert!(o.contains("a"));
    }

    #[test]
    fn a_second_daemon_cannot_share_the_outbox() {
        let dir = tempfile::tempdir().unwrap();
        let _first = Outbox::open(dir.path()).unwrap();
        let err = Outbox::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("own state_dir"), "{err}");
    }
}
