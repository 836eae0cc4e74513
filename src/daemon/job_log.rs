//! The job-log room of the daemon: the writes of `_ジョブログ` rows (a running job's output so
//! far, riding the heartbeat's write; the final output with the result), through the row's
//! binding, and what a refused or lost one leaves to do (`crate::joblog` owns the row's
//! shape and texts).

use tracing::{debug, warn};

use crate::a1;
use crate::binding;
use crate::joblog::LogColumn;
use crate::outbox::FinishedJob;
use crate::sheet_time;
use crate::sheets::{Cell, Filter, FilterWrite};

use super::Daemon;

/// The `_ジョブログ` writes waiting, and what each running job printed so far.
#[derive(Debug, Default)]
pub(super) struct Logs {
    /// What each running job printed so far, and the capture's version its log row last
    /// showed (refreshed riding the heartbeat's write).
    pub(super) outputs: std::collections::HashMap<String, (crate::joblog::Capture, u64)>,
    /// Writes of `_ジョブログ` rows waiting for the next values write (results, heartbeats).
    pub(super) writes: Vec<LogWrite>,
    /// Jobs whose log row takes no more writes: filled, or found gone.
    pub(super) dead: std::collections::HashSet<String>,
    /// The log row each finished job's output landed on (from the write's reply), for the
    /// link in its notices.
    pub(super) rows_landed: std::collections::HashMap<String, u32>,
    /// Whether the last heartbeat carried running jobs' output (the next one goes alone).
    pub(super) beat_carried: bool,
}

impl Logs {
    /// What job `job_id` printed, now that it ended (its capture closed), as its result
    /// carries it: up to `log_chars`, or only a note that it is kept private.
    pub(super) fn take_output(&mut self, job_id: &str, private: bool, log_chars: u32) -> String {
        match self.outputs.remove(job_id) {
            Some((capture, _)) => {
                capture.finish();
                if private {
                    format!("({})", crate::commands::output::KEPT_PRIVATE)
                } else {
                    capture.text(log_chars)
                }
            }
            None => String::new(),
        }
    }
}

impl Daemon {
    /// A row of `cells` at their columns and `null` elsewhere, through binding `id`: Google
    /// skips the nulls, so only these cells of the bound row change. The row reaches at
    /// least the jobId column, wherever the header puts it: the reply covers only the span
    /// written, and [`Self::check_reply`] reads the jobId from it.
    /// Queues the final write of `job`'s log row (through `joblog::binding_id` of queue
    /// binding `queue_binding`), unless it has none or it is done.
    pub(super) fn push_final_log(&mut self, queue_binding: i32, job: &FinishedJob) {
        if job.log_row && !self.logs.dead.contains(&job.job_id) {
            let write = self.final_log_write(queue_binding, job);
            self.queue_log_write(write);
        }
    }

    /// The write of a finished job's whole log row: restated jobId, target, function and
    /// start (a claim a sort put on another row runs that row's job), its end and output.
    pub(super) fn final_log_write(&self, queue_binding: i32, job: &FinishedJob) -> LogWrite {
        let tz = self.served.layout.tz;
        let serial = |t| Cell::from(sheet_time::instant_to_serial(t, tz));
        let target = if job.target.trim().is_empty() {
            &job.panel_sheet
        } else {
            &job.target
        };
        let mut cells = vec![
            (LogColumn::JobId, Cell::from(job.job_id.as_str())),
            (LogColumn::Target, Cell::from(target.as_str())),
            (
                LogColumn::Function,
                Cell::from(crate::joblog::function_text(&job.function, &job.inputs)),
            ),
            (LogColumn::FinishedAt, serial(job.finished_at)),
            (LogColumn::Output, Cell::from(job.output.as_str())),
        ];
        if let Some(at) = job.started_at {
            cells.push((LogColumn::StartedAt, serial(at)));
        }
        LogWrite {
            job_id: job.job_id.clone(),
            id: crate::joblog::binding_id(queue_binding),
            cells,
            last: true,
        }
    }

    /// The output so far of each job running here whose log row shows less than it
    /// printed: to ride the heartbeat's write.
    pub(super) fn refresh_logs(&mut self) {
        if self.served.layout.log.is_none() {
            return;
        }
        let chars = self.config.log_chars;
        let mut refreshes = Vec::new();
        for (job_id, (capture, shown)) in &mut self.logs.outputs {
            let Some(claimed) = self
                .jobs
                .running
                .get(job_id)
                .filter(|c| c.log_row && !self.logs.dead.contains(job_id))
            else {
                continue;
            };
            let Some(id) = binding::id_of_token(&claimed.tag.token) else {
                continue;
            };
            let version = capture.version();
            if version == *shown {
                continue;
            }
            *shown = version;
            refreshes.push(LogWrite {
                job_id: job_id.clone(),
                id: crate::joblog::binding_id(id),
                // Not the jobId: the reply then shows whose row the output landed on.
                cells: vec![(LogColumn::Output, Cell::from(capture.text(chars)))],
                last: false,
            });
        }
        for write in refreshes {
            self.queue_log_write(write);
        }
    }

    /// Google refuses a whole `values.batchUpdateByDataFilter` when one filter matches
    /// nothing: a log row a person deleted (or its sheet) would hold back every result. The
    /// refusal names the entry; a log write it names (or, when it names none, every log write
    /// of the call) is given up, its output kept under `state_dir` only, and the results go
    /// at the next poll.
    pub(super) fn forget_refused_logs(
        &mut self,
        e: &crate::sheets::SheetsError,
        base: usize,
        logs: &[LogWrite],
    ) {
        if e.kind != crate::sheets::ErrorKind::InvalidArgument || logs.is_empty() {
            return;
        }
        let named = e
            .message
            .split_once("dataFilterValueRange[")
            .and_then(|(_, rest)| rest.split_once(']'))
            .and_then(|(n, _)| n.parse::<usize>().ok());
        let given_up: Vec<&LogWrite> = match named {
            Some(i) if i >= base => logs.get(i - base).into_iter().collect(),
            Some(_) => Vec::new(),
            None => logs.iter().collect(),
        };
        for l in given_up {
            warn!(job.id = ?l.job_id, "the job's log row is gone (deleted, or its sheet); its output is kept under state_dir only");
            self.logs.dead.insert(l.job_id.clone());
        }
    }

    /// Queues `write`, in place of any write of the same job's log row still queued (a
    /// write that did not go, while the API refused or failed): the newer says it all.
    pub(super) fn queue_log_write(&mut self, write: LogWrite) {
        self.logs.writes.retain(|l| l.job_id != write.job_id);
        self.logs.writes.push(write);
    }

    /// The running jobs' output carried by a call that failed is sent again with the next
    /// heartbeat that carries output, even if they print nothing more.
    pub(super) fn refresh_again(&mut self, logs: &[LogWrite]) {
        for l in logs.iter().filter(|l| !l.last) {
            if let Some((_, shown)) = self.logs.outputs.get_mut(&l.job_id) {
                *shown = 0;
            }
        }
    }

    pub(super) fn log_write(&self, l: &LogWrite) -> Option<FilterWrite> {
        let log = self.served.layout.log.as_ref()?;
        Some(FilterWrite {
            filter: Filter::Metadata(l.id),
            values: vec![log.sparse_row(&l.cells)],
        })
    }
}

/// A write of a job's `_ジョブログ` row through its binding (`joblog::binding_id` of the
/// job's queue binding), sent with a values write that goes anyway.
#[derive(Debug, Clone)]
pub(super) struct LogWrite {
    pub(super) job_id: String,
    pub(super) id: i32,
    pub(super) cells: Vec<(LogColumn, Cell)>,
    /// The job's last write (its result's): the binding goes once it landed.
    pub(super) last: bool,
}

impl Daemon {
    /// Takes in the replies of the `_ジョブログ` writes `logs` of a write-back: a job's last
    /// write that landed frees its binding and notes the row, for the link in its notices;
    /// a write that found its row gone leaves the output under state_dir.
    pub(super) fn log_writes_landed(
        &mut self,
        logs: &[LogWrite],
        replies: &[Option<crate::sheets::FilterWritten>],
    ) {
        if let Some(log) = &self.served.layout.log {
            for (l, reply) in logs.iter().zip(replies) {
                match reply {
                    Some(w) => {
                        let found = w
                            .values
                            .first()
                            .map(|row| log.job_id_of(row))
                            .unwrap_or_default();
                        if !l.last && found != l.job_id {
                            warn!(job.id = ?l.job_id, found = ?found, "the job's output landed on a log row showing another jobId (a person's edit of the log moved its binding, or the claim ran another row than planned); the result's write restates the row");
                        }
                        if l.last {
                            // Zero-based in the parse; a link names the sheet's row.
                            if let Some(row) =
                                a1::A1Range::parse(&w.range).ok().and_then(|r| r.start_row)
                            {
                                self.logs.rows_landed.insert(l.job_id.clone(), row + 1);
                            }
                            // Done: its binding goes, and nothing is written through it again
                            // (a write through a binding that is gone fails the whole call).
                            self.served.writes.unbind.push(l.id);
                            self.logs.dead.insert(l.job_id.clone());
                        }
                    }
                    None => {
                        debug!(job.id = ?l.job_id, "the job's log row is gone; its output stays under state_dir")
                    }
                }
            }
        }
    }
}
