//! The jobs this daemon runs: spawned into a slot, stopped when someone asks, their end taken
//! into the outbox with their output, retries and continuation, and the drain at shutdown
//! (docs/design.md §4, §5).

use std::time::Duration as StdDuration;

use chrono::Utc;
use tracing::{debug, error, info, warn, Instrument};

use crate::commands::{JobSpec, Outcome, OutcomeStatus};
use crate::metrics::{self, RunningJob};
use crate::outbox::{Continuation, Finish, FinishedJob};
use crate::queue;
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdate, Cell, Filter};

use super::poll::Poll;
use super::{Claimed, Daemon, DaemonError};

/// The jobs this daemon claimed: their tasks, the running ones, the claims not yet settled.
#[derive(Default)]
pub(super) struct Jobs {
    /// The tasks running the jobs; each hands back its claim, outcome and metrics entry.
    pub(super) tasks: tokio::task::JoinSet<(
        Claimed,
        crate::commands::Outcome,
        crate::metrics::RunningJob,
    )>,
    /// The running jobs, by jobId.
    pub(super) running: std::collections::HashMap<String, Claimed>,
    /// Claims whose commit reply was lost; their slots stay reserved until the next poll
    /// shows whether the commit applied.
    pub(super) unsettled: Vec<Claimed>,
    /// Which job each task runs, to free its slot even if the task panics.
    pub(super) task_jobs: std::collections::HashMap<tokio::task::Id, String>,
    /// Jobs refused before they ran, by jobId, with why: their notices carry none of the
    /// sheet's text (`Notice::withheld`). Lost with a restart, when the notice is a plain one.
    pub(super) refused: std::collections::HashMap<String, crate::commands::Refusal>,
    /// What each running job waiting for (or making) a retry asks メッセージ to show
    /// ([`crate::commands::RetryNote`]); written when it changes, riding the next values
    /// write.
    pub(super) retry_notes:
        std::collections::HashMap<String, tokio::sync::watch::Receiver<Option<String>>>,
}

impl Daemon {
    pub(super) fn spawn(&mut self, claimed: Claimed) {
        let row = &claimed.row;
        let spec = JobSpec {
            job_id: row.job_id.clone(),
            target: row.target_key().to_string(),
            function: row.function.clone(),
            requester: row.requester.clone(),
            command: row.command.clone(),
            args_json: row.args_json.clone(),
            flags: row.flags.clone(),
            panel_sheet: row.panel_sheet.clone(),
            panel_row: row.panel_row,
            approvals: row.approvals.clone(),
            continuation: claimed.continuation.as_deref() == Some(row.job_id.as_str())
                || self.served.continuations.marks.vouches(row),
            // A rollout's job of a function with approvers is vouched for by its mark.
            approved_with_rollout: false,
        };
        let span = tracing::info_span!("job", job.id = ?row.job_id, target = %Logged(row.target_key()), worker = %claimed.tag);
        span.in_scope(|| info!(command = %Logged(&row.command), "claimed"));
        let prepared = if spec.target.is_empty() {
            // Nothing to serialise it by, nothing for `{target}`: not a job as it stands.
            Err(crate::commands::JobRejected::new(
                crate::commands::Refusal::Unreadable,
                format!(
                    "the row names no target ({} and {} are empty), so nothing ran",
                    self.config.headers.target, self.config.headers.panel_sheet
                ),
            ))
        } else {
            self.registry.prepare_with(&spec, Some(&self.served.listed))
        };
        if let Err(rejected) = &prepared {
            refused(&self.observers.metrics, &spec, rejected, &span);
            self.jobs
                .refused
                .insert(row.job_id.clone(), rejected.reason);
        }
        let runner = self.runner.clone();
        let cancel = self.job_cancel.child_token();
        self.stops.tokens.insert(row.job_id.clone(), cancel.clone());
        // `output = "private"`: the file on this machine only, no tail for the sheet.
        let private = self
            .registry
            .keeps_output_private(&row.command, &row.function);
        let chars = if private { 0 } else { self.config.log_chars };
        let output = crate::joblog::Capture::new(
            chars,
            crate::joblog::file_path(&self.config.state_dir, &row.job_id),
        );
        self.logs
            .outputs
            .insert(row.job_id.clone(), (output.clone(), 0));
        let (notes, noted) = tokio::sync::watch::channel(None);
        self.jobs.retry_notes.insert(row.job_id.clone(), noted);
        let retrying = crate::commands::Retrying {
            notes,
            stop: self.retries_stop.clone(),
            asked_to_stop: self.stop_check(&claimed),
        };
        if self.is_heavy(row) {
            self.slots.heavy(true);
        }
        self.jobs
            .running
            .insert(row.job_id.clone(), claimed.clone());
        let running = self.observers.metrics.job_started();
        let job_id = row.job_id.clone();
        let handle = self.jobs.tasks.spawn(
            async move {
                let outcome = match prepared {
                    Ok(job) => runner.run_logged(job, cancel, &output, &retrying).await,
                    Err(rejected) => {
                        let outcome = rejected.into_outcome();
                        output.push(format!("{}\n", outcome.message).as_bytes());
                        outcome
                    }
                };
                (claimed, outcome, running)
            }
            .instrument(span),
        );
        self.jobs.task_jobs.insert(handle.id(), job_id);
    }

    /// What a job with retries asks right before each retry (`Retrying::asked_to_stop`):
    /// one read of its row, through its binding, for a 中止要求 naming it. `None` when the
    /// job's command has no retries, or the queue has no 中止要求 column.
    pub(super) fn stop_check(
        &self,
        claimed: &Claimed,
    ) -> Option<crate::commands::runner::StopCheck> {
        let retries = self.registry.retries_of(&claimed.row.command).unwrap_or(0);
        let column = self
            .served
            .layout
            .columns
            .position(queue::Column::CancelRequest)?;
        let id = crate::binding::id_of_token(&claimed.tag.token)?;
        if retries == 0 {
            return None;
        }
        let id_column = self.served.layout.columns.index(queue::Column::JobId) as usize;
        let sheets = self.sheets.clone();
        let job = claimed.row.job_id.clone();
        let found = self.stops.read.clone();
        Some(Box::new(move || {
            let sheets = sheets.clone();
            let job = job.clone();
            let found = found.clone();
            Box::pin(async move {
                match sheets.read_filtered(&[Filter::Metadata(id)]).await {
                    Ok(read) => {
                        // Only the job's own row counts: a person's sort can leave a
                        // binding on another row, whose 中止要求 is that row's job's.
                        let text = read
                            .first()
                            .and_then(|r| r.row())
                            .filter(|(_, cells)| {
                                cells.get(id_column).map(queue::cell_text).as_deref()
                                    == Some(job.as_str())
                            })
                            .and_then(|(_, cells)| cells.get(column as usize))
                            .map(queue::cell_text)
                            .filter(|text| crate::cancel::applies(text, &job));
                        let asked = text.is_some();
                        if let Some(text) = text {
                            found
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(job.clone(), text);
                        }
                        asked
                    }
                    Err(e) => {
                        debug!(error = %e, job.id = ?job, "could not read the row before a retry; the polls still see a stop");
                        false
                    }
                }
            })
        }))
    }

    /// A job ended: its result goes to the outbox (durably) before anything else.
    pub(super) fn finished(
        &mut self,
        joined: Result<(Claimed, Outcome, RunningJob), tokio::task::JoinError>,
    ) -> Result<(), DaemonError> {
        let (claimed, outcome) = match joined {
            Ok((claimed, outcome, running)) => {
                self.observers
                    .metrics
                    .job_retries(outcome.attempts.saturating_sub(1));
                running.finish(match outcome.status {
                    OutcomeStatus::Done => metrics::Outcome::Done,
                    OutcomeStatus::Failed => metrics::Outcome::Error,
                    OutcomeStatus::TimedOut => metrics::Outcome::Timeout,
                    OutcomeStatus::Cancelled => metrics::Outcome::Cancelled,
                });
                (claimed, outcome)
            }
            Err(e) => {
                // A job task panicked (a bug): free its slot and record the job as failed,
                // rather than leaving the slot taken and the row 実行中 until it times out.
                error!(error = %e, "a job task failed unexpectedly");
                let Some(claimed) = self
                    .jobs
                    .task_jobs
                    .remove(&e.id())
                    .and_then(|job_id| self.jobs.running.get(&job_id).cloned())
                else {
                    return Ok(());
                };
                let outcome = Outcome {
                    status: OutcomeStatus::Failed,
                    message: format!("エラー: sheetq の内部エラーでジョブが中断しました ({e})"),
                    url: None,
                    continue_args: None,
                    exit_code: None,
                    attempts: 1,
                    duration: std::time::Duration::ZERO,
                };
                (claimed, outcome)
            }
        };
        self.jobs
            .task_jobs
            .retain(|_, job_id| *job_id != claimed.row.job_id);
        self.jobs.running.remove(&claimed.row.job_id);
        self.jobs.retry_notes.remove(&claimed.row.job_id);
        let asked = (self.stops).take(&claimed.row.job_id, self.served.layout.tz);
        let private = self
            .registry
            .keeps_output_private(&claimed.row.command, &claimed.row.function);
        let output = (self.logs).take_output(&claimed.row.job_id, private, self.config.log_chars);
        if claimed.row.command.trim() == crate::panel::catalog::PANELS_COMMAND {
            // It made or showed panels: find them now, so results of presses on them land.
            self.served.pass.relayout = true;
        }
        self.slots.give(claimed.slot);
        if self.is_heavy(&claimed.row) {
            self.slots.heavy(false);
        }
        self.report.jobs_finished += 1;
        let (finish, message) = finish_of(&outcome, asked.as_ref(), self.served.layout.tz);
        let row = &claimed.row;
        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), worker = %claimed.tag, outcome = ?outcome.status, "job finished");
        let continuation = outcome.continue_args.as_ref().map(|args| Continuation {
            job_id: uuid::Uuid::new_v4().to_string(),
            args_json: serde_json::Value::Object(args.clone()).to_string(),
        });
        self.outbox.put(FinishedJob {
            url: outcome.url.clone().unwrap_or_default(),
            continuation,
            started_at: Some(claimed.started_at),
            log_row: claimed.log_row,
            linked: claimed.linked,
            panel_linked: claimed.panel_linked,
            output,
            inputs: self
                .registry
                .catalog()
                .inputs_text(&row.function, &row.args_json),
            ..FinishedJob::ended(row, claimed.tag.to_string(), finish, Utc::now(), message)
        })?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        Ok(())
    }

    /// Stops the jobs running here whose rows in `snapshot`, still under our claim, carry a
    /// request to stop (中止要求): their process groups get SIGTERM, `kill_grace`, SIGKILL,
    /// as at a timeout, and they end キャンセル. A job asked once is not asked again.
    pub(super) fn stop_asked_jobs(&mut self, snapshot: &crate::queue::Snapshot) {
        let tz = self.served.layout.tz;
        for row in &snapshot.rows {
            let Some(claimed) = self.jobs.running.get(&row.job_id) else {
                continue;
            };
            if row.worker != claimed.tag.to_string() || self.stops.asked.contains_key(&row.job_id) {
                continue;
            }
            if let Some(request) = crate::cancel::asked_of(row, tz, Utc::now()) {
                self.stop(&row.job_id, request);
            }
        }
    }

    /// Stops the jobs of ours that `sheetq cancel` asked to stop through our heartbeat row
    /// (`workers::STOP_COLUMN`): jobs whose queue row is gone, which no 中止要求 can reach.
    pub(super) fn stop_asked_by_heartbeat(&mut self, poll: &Poll) {
        let Some(own) = poll.own_heartbeat_row else {
            return;
        };
        let Some(beat) = poll.workers.iter().find(|h| h.row == own) else {
            return;
        };
        let tz = self.served.layout.tz;
        let asked: Vec<(String, crate::cancel::Request)> = beat
            .stops
            .lines()
            .filter_map(|line| crate::cancel::Request::parse(line, tz))
            .filter_map(|r| Some((r.job.clone()?, r)))
            .filter(|(job, _)| {
                self.jobs.running.contains_key(job) && !self.stops.asked.contains_key(job)
            })
            .collect();
        for (job, request) in asked {
            info!(job.id = ?job, "a stop asked through this daemon's heartbeat row (the job's queue row is gone)");
            self.stop(&job, request);
        }
    }

    /// Stops job `job_id` running here on `request`.
    pub(super) fn stop(&mut self, job_id: &str, request: crate::cancel::Request) {
        let Some(token) = self.stops.tokens.get(job_id) else {
            return;
        };
        info!(job.id = ?job_id, by = %Logged(&request.who), "asked to stop the job; stopping its process group");
        self.observers.metrics.cancel_asked();
        token.cancel();
        self.stops.asked.insert(job_id.to_string(), request);
    }

    /// Shutdown: no more claims; running jobs get the grace period, then are stopped; every
    /// result is written (or left in the outbox for the next start).
    pub(super) async fn drain(&mut self) -> Result<(), DaemonError> {
        self.retries_stop.cancel();
        if !self.jobs.tasks.is_empty() {
            info!(running = self.jobs.tasks.len(), grace = ?self.config.shutdown_grace, "shutting down: waiting for running jobs");
        }
        let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
        while !self.jobs.tasks.is_empty() {
            tokio::select! {
                Some(joined) = self.jobs.tasks.join_next() => self.finished(joined)?,
                _ = tokio::time::sleep_until(deadline), if !self.job_cancel.is_cancelled() => {
                    warn!(running = self.jobs.tasks.len(), "grace period over: stopping the remaining jobs");
                    self.job_cancel.cancel();
                }
            }
        }
        match self.poll(true).await {
            Ok(poll) => {
                // The last write leaves the panels and the index as the queue is: nothing this
                // daemon ran still shows as running or waiting.
                let display = self.panel_display(&poll);
                if let Err(e) = self.flush(&poll, display).await {
                    warn!(error = %e, pending = self.outbox.len(), "results stay in the outbox until the next start");
                }
                // A last heartbeat with 0 slots: `status` shows this daemon stopped, and the
                // others stop sharing the quota with it.
                if let Some(row) = poll.own_heartbeat_row {
                    let mut cells = self.heartbeat_row(Utc::now(), &[], &[]);
                    if let Some(slots) = cells.get_mut(3) {
                        *slots = Cell::from(0u64);
                    }
                    let mut requests = vec![self.heartbeat_request(row, cells)];
                    // A lease kept for a claim that will not come now goes free with it.
                    requests.extend(self.release_kept_lease());
                    let batch = BatchUpdate {
                        requests,
                        ..Default::default()
                    };
                    if let Err(e) = self.sheets.batch_update(&batch).await {
                        debug!(error = %e, "could not write the last heartbeat");
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, pending = self.outbox.len(), "results stay in the outbox until the next start")
            }
        }
        if !self.served.writes.unbind.is_empty() {
            let requests = self
                .served
                .writes
                .unbind
                .drain(..)
                .map(|id| crate::sheets::Request::DeleteMetadata { id })
                .collect();
            let batch = crate::sheets::BatchUpdate {
                requests,
                ..Default::default()
            };
            if let Err(e) = self.sheets.batch_update(&batch).await {
                warn!(error = %e, "could not remove the bindings of finished jobs; `sheetq status` counts them");
            }
        }
        self.announcer
            .drain(self.config.shutdown_grace.min(NOTICES_AT_SHUTDOWN))
            .await;
        self.report.results_pending = self.outbox.len();
        info!(
            finished = self.report.jobs_finished,
            pending = self.report.results_pending,
            "sheetq daemon stopped"
        );
        Ok(())
    }
}

/// The longest a stopping daemon waits for the notices due to go.
pub(super) const NOTICES_AT_SHUTDOWN: StdDuration = StdDuration::from_secs(5);

/// How a job that ran ends, from its outcome: a job stopped on someone's request (`asked`)
/// ends キャンセル with who asked; one stopped without a request was cut off at shutdown
/// after the grace period, an エラー.
fn finish_of(
    outcome: &Outcome,
    asked: Option<&crate::cancel::Request>,
    tz: chrono_tz::Tz,
) -> (Finish, String) {
    match outcome.status {
        OutcomeStatus::Done => (Finish::Done, outcome.message.clone()),
        OutcomeStatus::Failed => (Finish::Error, outcome.message.clone()),
        OutcomeStatus::TimedOut => (Finish::Timeout, outcome.message.clone()),
        OutcomeStatus::Cancelled => match asked {
            Some(request) => (
                Finish::Cancelled,
                request.message(Utc::now(), tz, &outcome.message),
            ),
            None => (
                Finish::Error,
                "エラー: sheetq の停止時に猶予時間内に終わらなかったため中断しました (stopped at shutdown after the grace period)".to_string(),
            ),
        },
    }
}

/// A job the config does not allow: logged with who asked for what, and counted by reason.
/// Its row and panel show the refusal as the job's エラー message. Sheet values go to the log
/// escaped (`?`), never as raw text: a line break in a 依頼者 must not forge a log line.
fn refused(
    metrics: &metrics::Metrics,
    spec: &JobSpec,
    rejected: &crate::commands::JobRejected,
    span: &tracing::Span,
) {
    metrics.job_refused(rejected.reason);
    span.in_scope(|| {
        warn!(
            reason = %rejected.reason,
            requester = %Logged(&spec.requester),
            target = %Logged(&spec.target),
            function = %Logged(&spec.function),
            command = %Logged(&spec.command),
            refused = %Logged(&rejected.message),
            "job refused; nothing ran"
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped() -> Outcome {
        Outcome {
            status: OutcomeStatus::Cancelled,
            message: "stopped".into(),
            url: None,
            continue_args: None,
            exit_code: None,
            attempts: 1,
            duration: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn a_job_stopped_on_request_ends_cancelled_and_one_cut_off_at_shutdown_an_error() {
        let tz = chrono_tz::Asia::Tokyo;
        let request = crate::cancel::Request::new("alice", Utc::now(), "j1");
        let (finish, message) = finish_of(&stopped(), Some(&request), tz);
        assert_eq!(finish, Finish::Cancelled);
        assert!(
            message.contains("alice"),
            "the message names who asked: {message}"
        );
        let (finish, message) = finish_of(&stopped(), None, tz);
        assert_eq!(finish, Finish::Error, "nobody asked: {message}");
        assert!(message.contains("grace period"), "{message}");
    }
}
