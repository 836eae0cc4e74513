//! Write-back (docs/design.md §4): finished results from the outbox go to the queue row through its
//! binding (Google resolves the row when the write is applied; the reply proves which row it
//! was) and to the panel row found by label, in one `values.batchUpdateByDataFilter`; plus
//! rebinding, restart recovery and continuation rows.
//!
//! Nothing here sends a write to a queue row number computed from an earlier read, except for
//! rows claimed without a binding (older versions, other tools), which have no other way to be
//! found. A write that fails is not retried at the same places: its result stays in the
//! outbox and is resolved afresh from the next poll.

use chrono::{DateTime, Utc};
use tracing::{debug, info, warn};

use crate::binding::{self, WritePlan};
use crate::outbox::{Continuation, Finish, FinishedJob};
use crate::panel;
use crate::provenance::Fields;
use crate::queue::{Column, QueueRow, State};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{BatchUpdate, Cell, Request, ValueRange};

use super::through::{Through, Under};
use super::{Daemon, DaemonError, Poll};

/// How long a result that landed is watched for being undone by a repair made from an
/// older read.
const LANDED_WATCH: std::time::Duration = std::time::Duration::from_secs(60);

impl Daemon {
    /// After a restart: rows still `実行中` under our id whose result is not in the outbox
    /// were cut off mid-job; they become `エラー` at once. Pending results are written.
    pub(super) async fn recover(&mut self) -> Result<(), DaemonError> {
        // Rows left 実行中 are unfinished, so the window (found by `find_window`) holds them.
        let poll = self.watch_our_row().await?;
        let now = Utc::now();
        let mut data = Vec::new();
        let mut through = Vec::new();
        for row in &poll.snapshot.rows {
            let ours = row
                .worker_tag()
                .is_some_and(|t| t.daemon_id == self.config.worker_id);
            if ours && row.state.is(State::Running) && !self.outbox.contains(&row.job_id) {
                warn!(job.id = ?row.job_id, row = row.row, "job was running when this worker stopped; marking it as failed");
                let message =
                    "エラー: ワーカーがジョブの実行中に再起動しました (worker restarted during the job)";
                let cells = self.finish_values(Finish::Error, now, "", message);
                self.follow_up(row, Some(State::Running), cells, &mut through, &mut data);
                data.extend(self.panel_result(&poll, row, Finish::Error, now, "", message));
            }
        }
        let wrote = !through.is_empty() || !data.is_empty() || !self.outbox.is_empty();
        self.write_through(&poll, through, data, Under::NoLease)
            .await?;
        // Our first heartbeat goes with the first pass, due at once: in its claim commit when
        // it claims or takes presses in (no write of its own), else on its own.
        self.flush(&poll, Vec::new()).await?;
        if !wrote {
            // Nothing changed the sheet since this read: the first pass goes on it.
            self.served.pass.start_poll = Some(poll);
        }
        Ok(())
    }

    /// Polls until it is clear whether another live process runs with our worker_id: its
    /// heartbeat row (naming another process) changes while we watch (it is alive: refused
    /// here, before anything is written), or stands still for `dead_after` (a predecessor
    /// that is gone: its jobs are ours to fail). No clock of another machine is read
    /// (docs/design.md §3.1); the wait costs one read a poll interval, and only after a
    /// crash on another host (a clean stop says so in the row).
    async fn watch_our_row(&mut self) -> Result<Poll, DaemonError> {
        let mut said = false;
        loop {
            let poll = self.poll(false).await?;
            match crate::workers::check_worker_id(
                &poll.workers,
                &self.config.worker_id,
                &self.process,
                self.config.dead_after,
                super::fleet::pid_alive,
            ) {
                crate::workers::IdCheck::Free => return Ok(poll),
                crate::workers::IdCheck::InUse(e) => return Err(e.into()),
                crate::workers::IdCheck::Watching => {
                    if !std::mem::replace(&mut said, true) {
                        warn!(
                            worker = %self.config.worker_id,
                            dead_after = ?self.config.dead_after,
                            "the heartbeat row of this worker_id names another process; watching it for up to dead_after before taking its jobs over"
                        );
                    }
                    self.observers.health.loop_turned();
                    tokio::time::sleep(self.config.poll_interval).await;
                }
            }
        }
    }

    /// Writes every pending result in one `values.batchUpdateByDataFilter`: each queue row
    /// through its binding, checked against `poll` (a read made just now) first and against
    /// the write's reply after; the panel rows, `display` (waiting/running texts) and our
    /// heartbeat go in the same call. A binding a person's edit left on another row is moved
    /// back first (the result follows at the next pass); a result whose row was deleted is
    /// reported once and written nowhere. Returns whether the heartbeat went with it.
    ///
    /// Writes that set or restore a claim's cells (put-backs, restores, a timeout's cells,
    /// the repair of a row a misplaced write hit) are not sent here but under the lease, by
    /// the claim pass ([`Self::write_follow_ups`]): no claim can come between the read they
    /// are planned on and their write.
    pub(super) async fn flush(
        &mut self,
        poll: &Poll,
        display: Vec<ValueRange>,
    ) -> Result<bool, DaemonError> {
        self.rewrite_undone(poll)?;
        self.put_back_orphans(poll);
        let pending: Vec<FinishedJob> = self.outbox.pending().cloned().collect();
        let full;
        let poll = if !poll.full && needs_whole_queue(poll, &pending, &[]) {
            full = self.poll(true).await?;
            &full
        } else {
            poll
        };
        let mut data = Vec::new();
        let mut through = Vec::new();
        let mut settled = Vec::new();
        let mut rebind = Vec::new();
        let placed = self
            .place_results(
                poll,
                &pending,
                &mut through,
                &mut data,
                &mut settled,
                &mut rebind,
            )
            .await;
        // Results that are not written now stay in the outbox: nothing else to keep.
        placed?;
        if !rebind.is_empty() {
            self.rows_moved();
            self.rebind(&rebind).await?;
        }
        let notes_shown = self.place_retry_notes(poll, &mut through);
        data.extend(display);
        // After the display: its running text for that row comes from the read before the
        // note, and the later of two writes to a cell wins.
        data.extend(notes_shown);
        // Running jobs' output so far rides a heartbeat that is due, every other one (the
        // heartbeat alone also brings the sheet list, which finds new panels).
        if self.heartbeat_due() && !std::mem::take(&mut self.logs.beat_carried) {
            self.refresh_logs();
        }
        let carry_logs = !self.logs.writes.is_empty();
        let heartbeat = if data.is_empty() && through.is_empty() && !carry_logs {
            false
        } else {
            // With results, the heartbeat goes too: its list of running jobs is what other
            // daemons' claims go by.
            let force = !through.is_empty();
            self.logs.beat_carried = carry_logs;
            let writing: Vec<&str> = through
                .iter()
                .filter(|t| t.result)
                .map(|t| t.job_id.as_str())
                .collect();
            let heartbeat = self
                .heartbeat_into(poll, &mut data, force, &writing)
                .await?;
            settled.extend(
                self.write_through(poll, through, data, Under::NoLease)
                    .await?,
            );
            heartbeat
        };
        let now = tokio::time::Instant::now();
        let landed: Vec<FinishedJob> = pending
            .into_iter()
            .filter(|j| settled.contains(&j.job_id))
            .collect();
        // Recorded before the results leave the outbox: a crash in between writes them
        // again, and the journal, knowing them, announces them once.
        self.announce(poll, &landed);
        self.served
            .writes
            .landed
            .extend(landed.into_iter().map(|j| (j, now)));
        self.outbox.done(settled.iter().map(String::as_str))?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        // Only a job still running or with its result pending can be written to again.
        let (outbox, running) = (&self.outbox, &self.jobs.running);
        self.logs
            .dead
            .retain(|j| outbox.contains(j) || running.contains_key(j));
        Ok(heartbeat)
    }

    /// The retry notes that changed since they were last sent
    /// ([`crate::commands::RetryNote`]): each to メッセージ through its job's queue binding,
    /// onto a row that still shows our claim 実行中; returns its panel row's 状態 cell, for
    /// the same call. A note that cannot go now (its binding in doubt or off its row) is left for the
    /// next change or the result, which says more.
    fn place_retry_notes(&mut self, poll: &Poll, through: &mut Vec<Through>) -> Vec<ValueRange> {
        let mut shown = Vec::new();
        // Peeked, not taken: a note that cannot go now is tried again at the next write-back
        // rather than waiting for the next change.
        let changed: Vec<(String, String)> = self
            .jobs
            .retry_notes
            .iter()
            .filter(|(_, noted)| noted.has_changed().unwrap_or(false))
            .filter_map(|(job_id, noted)| Some((job_id.clone(), noted.borrow().clone()?)))
            .collect();
        for (job_id, note) in changed {
            let Some(claimed) = self.jobs.running.get(&job_id) else {
                continue;
            };
            let Some(id) = binding::id_of_token(&claimed.tag.token) else {
                continue;
            };
            let worker = claimed.tag.to_string();
            let at_binding = poll.bound.get(&id).and_then(Option::as_ref);
            let with_job = poll.rows_with_job(&job_id);
            let plan = binding::plan_write(
                &job_id,
                &worker,
                Some(State::Running),
                at_binding,
                &with_job,
                |r| self.claim_is_live(poll, r),
            );
            if self.in_doubt(id) || plan != WritePlan::Write {
                debug!(job.id = ?job_id, ?plan, "the retry note waits for the next write-back: the job's row binding is not on its row now");
                continue;
            }
            if let Some((panel_ref, row)) = self.result_panel_row(poll, &claimed.row) {
                shown.push(panel::retrying_cell(
                    panel_ref,
                    row,
                    &note,
                    &self.config.panel,
                ));
            }
            if let Some(noted) = self.jobs.retry_notes.get_mut(&job_id) {
                noted.mark_unchanged();
            }
            through.push(Through {
                id,
                job_id,
                worker,
                state: Some(State::Running),
                cells: vec![(Column::Message, Cell::from(note))],
                unbind: false,
                result: false,
            });
        }
        shown
    }

    /// Follow-ups (a put-back, a restore, a timeout's cells, a repair) are planned like
    /// results: through their bindings, once each binding is back on its row, and only onto
    /// a row that still shows what the follow-up expects (its job, its ワーカー text, its
    /// state): one that changed since (a newer claim, a person's edit) is left as it is.
    pub(super) fn place_follow_ups(
        &mut self,
        poll: &Poll,
        follow_ups: Vec<Through>,
        through: &mut Vec<Through>,
        rebind: &mut Vec<(i32, u32, String)>,
    ) {
        for t in follow_ups {
            if self.in_doubt(t.id) {
                // A write in doubt goes through that binding: it may still land wherever the
                // binding sits, so nothing else is written through it, nor is it moved.
                self.served.writes.pending.push(t);
                continue;
            }
            let at_binding = poll.bound.get(&t.id).and_then(Option::as_ref);
            let with_job = poll.rows_with_job(&t.job_id);
            let live = |r: &QueueRow| self.claim_is_live(poll, r);
            match binding::plan_write(&t.job_id, &t.worker, t.state, at_binding, &with_job, live) {
                WritePlan::Write => through.push(t),
                WritePlan::Rebind { row } => {
                    rebind.push((t.id, row, t.job_id.clone()));
                    self.served.writes.pending.push(t);
                }
                WritePlan::NotOurs | WritePlan::Deleted => {
                    warn!(job.id = ?t.job_id, worker = %t.worker, "a follow-up write no longer finds its row as it left it (changed or deleted meanwhile); dropping it");
                }
            }
        }
    }

    /// Decides where each pending result goes (docs/design.md §4): through its binding,
    /// after moving the binding back to its row, by row number for a legacy claim without
    /// one, nowhere when its row no longer carries our claim or was deleted (said once).
    async fn place_results(
        &mut self,
        poll: &Poll,
        pending: &[FinishedJob],
        through: &mut Vec<Through>,
        data: &mut Vec<ValueRange>,
        settled: &mut Vec<String>,
        rebind: &mut Vec<(i32, u32, String)>,
    ) -> Result<(), DaemonError> {
        for job in pending {
            let id = binding::id_of_tag(&job.worker);
            if id.is_some_and(|id| self.in_doubt(id)) {
                continue;
            }
            let at_binding = id
                .and_then(|id| poll.bound.get(&id))
                .and_then(Option::as_ref);
            let with_job = poll.rows_with_job(&job.job_id);
            let plan = match id {
                Some(_) => binding::plan_write(
                    &job.job_id,
                    &job.worker,
                    Some(State::Running),
                    at_binding,
                    &with_job,
                    |r| self.claim_is_live(poll, r),
                ),
                None => binding::plan_unbound_write(&job.worker, &with_job),
            };
            match (plan, id) {
                (WritePlan::Write, Some(id)) => {
                    match self.continuation_appended(poll, job).await {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => return Err(e),
                    }
                    through.push(Through {
                        id,
                        job_id: job.job_id.clone(),
                        worker: job.worker.clone(),
                        state: Some(State::Running),
                        cells: self.result_cells(job),
                        unbind: true,
                        result: true,
                    });
                    self.push_final_log(id, job);
                    if let Some(row) = at_binding {
                        data.extend(self.job_panel_result(poll, row, job));
                    }
                }
                (WritePlan::Rebind { row }, Some(id)) => rebind.push((id, row, job.job_id.clone())),
                // Legacy claim without a binding: the row number this read found, the only
                // way such a row can be reached.
                (WritePlan::Rebind { row }, None) => {
                    match self.continuation_appended(poll, job).await {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => return Err(e),
                    }
                    data.extend(self.finish_cells(
                        row,
                        job.finish,
                        job.finished_at,
                        &job.url,
                        &job.message,
                    ));
                    if let Some(r) = with_job.iter().find(|r| r.row == row) {
                        data.extend(self.job_panel_result(poll, r, job));
                    }
                    settled.push(job.job_id.clone());
                }
                (WritePlan::Write, None) => {}
                (WritePlan::NotOurs, _) => {
                    // A row timed out meanwhile keeps our ワーカー tag but is no longer ours to
                    // finish: its タイムアウト stands, and its panel row may belong to a new press.
                    warn!(
                        job.id = ?job.job_id,
                        target = %Logged(&job.target),
                        worker = %job.worker,
                        rows = ?with_job.iter().map(|r| (r.row, r.state.clone(), r.worker.as_str())).collect::<Vec<_>>(),
                        bound = ?at_binding.map(|r| (r.row, r.job_id.as_str(), r.state.clone(), r.worker.as_str())),
                        "the row no longer carries our running claim (timed out and maybe re-run); not overwriting it"
                    );
                    self.served.writes.unbind.extend(id);
                    // Our run's output still goes to our run's log row.
                    if let Some(id) = id {
                        self.push_final_log(id, job);
                    }
                    settled.push(job.job_id.clone());
                }
                (WritePlan::Deleted, id) => {
                    if let Some(id) = id {
                        self.push_final_log(id, job);
                    }
                    self.result_unplaceable(poll, job, data)?
                }
            }
        }
        Ok(())
    }

    /// The cells of a result: its finish, and its claim stamp restated (a claim commit that
    /// landed on this row after a sort, its daemon killed before it gave the cells back, may
    /// have left another ワーカー and 開始日時 here, and a finished row must name who ran it).
    fn result_cells(&self, job: &FinishedJob) -> Vec<(Column, Cell)> {
        let mut cells = self.finish_values(job.finish, job.finished_at, &job.url, &job.message);
        if job.linked && job.url.trim().is_empty() {
            // Its 結果URL is the link to its log row, a formula the claim commit wrote.
            cells.retain(|(c, _)| *c != Column::ResultUrl);
        }
        cells.push((Column::Worker, Cell::from(job.worker.as_str())));
        if let Some(at) = job.started_at {
            let serial = sheet_time::instant_to_serial(at, self.served.layout.tz);
            cells.push((Column::StartedAt, Cell::from(serial)));
        }
        cells
    }

    /// A result whose queue row a person deleted: reported and recorded, written only to its
    /// panel row, and out of the outbox at once (said once, even if that write fails).
    fn result_unplaceable(
        &mut self,
        poll: &Poll,
        job: &FinishedJob,
        data: &mut Vec<ValueRange>,
    ) -> Result<(), DaemonError> {
        self.report.results_unplaceable += 1;
        self.observers.metrics.result_unplaceable();
        warn!(
            job.id = ?job.job_id,
            target = %Logged(&job.target),
            outcome = ?job.finish,
            message = %Logged(&job.message),
            "the job's queue row was deleted by a person; its result is written nowhere in the queue (only its panel row)"
        );
        if let Err(e) = self.outbox.record_unplaceable(job) {
            warn!(error = %e, "could not record the unplaceable result");
        }
        data.extend(self.job_panel_result(poll, &job.as_row(), job));
        self.announce(poll, std::slice::from_ref(job));
        self.outbox.done(std::iter::once(job.job_id.as_str()))?;
        Ok(())
    }

    /// Rows `poll` shows `実行中` under a claim of this process that runs nothing (not
    /// running, not waiting for its commit's outcome, no result or follow-up pending, and no
    /// other live daemon lists the job in its heartbeat): a
    /// repair from an older read put back a claim we had already given up (a claimed row put
    /// back to 待機 because the queue moved under the commit). They go back to 待機 through
    /// their binding, planned like any follow-up at the next flush, so the job runs and its
    /// target is not blocked until `stale_after`.
    fn put_back_orphans(&mut self, poll: &Poll) {
        // Restores from older reads also move ワーカー texts between rows: a row may show our
        // tag while another daemon runs its job. That one's heartbeat lists the job.
        let elsewhere = self.running_elsewhere(poll);
        let mut found = Vec::new();
        for row in &poll.snapshot.rows {
            let Some(tag) = row.worker_tag() else {
                continue;
            };
            if tag.daemon_id != self.config.worker_id || !row.state.is(State::Running) {
                continue;
            }
            let known = self
                .jobs
                .running
                .values()
                .chain(&self.jobs.unsettled)
                .any(|c| c.tag == tag)
                || self.outbox.pending().any(|j| j.worker == row.worker)
                || self
                    .served
                    .writes
                    .pending
                    .iter()
                    .chain(&self.served.writes.unsure)
                    .any(|t| t.worker == row.worker)
                || self
                    .served
                    .writes
                    .landed
                    .iter()
                    .any(|(j, _)| j.worker == row.worker)
                || elsewhere.iter().any(|r| r.job_id == row.job_id);
            if !known {
                found.push(row.clone());
            }
        }
        for row in found {
            warn!(job.id = ?row.job_id, worker = %Logged(&row.worker), row = row.row, "a row shows a claim of ours that runs nothing (put back by a repair from an older read); putting it back to waiting");
            self.observers.metrics.write_incident();
            let cells = self.claim_values(Some(&self.config.states.waiting), &Cell::from(""), "");
            let mut through = Vec::new();
            let mut data = Vec::new();
            self.follow_up(&row, Some(State::Running), cells, &mut through, &mut data);
            self.served.writes.pending.extend(through);
        }
    }

    /// Results that landed in the last minute and whose row `poll` shows back at `実行中`
    /// under our claim go back to the outbox: another daemon's repair, made from a read
    /// taken before our write, put the row back as it was (it cannot make its write
    /// conditional on the row being unchanged). Without this the row would wait for
    /// `stale_after` and its result be lost.
    fn rewrite_undone(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        self.served
            .writes
            .landed
            .retain(|(_, at)| at.elapsed() < LANDED_WATCH);
        let (undone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.served.writes.landed)
            .into_iter()
            .partition(|(job, _)| {
                poll.rows_with_job(&job.job_id)
                    .iter()
                    .any(|r| r.worker == job.worker && r.state.is(State::Running))
            });
        self.served.writes.landed = kept;
        for (job, _) in undone {
            warn!(job.id = ?job.job_id, worker = %job.worker, "a result that had landed was undone (its row is back at 実行中 under our claim, restored from an older read); writing it again");
            self.observers.metrics.write_incident();
            // Its binding is wanted again: not removed with the next batch.
            if let Some(id) = binding::id_of_tag(&job.worker) {
                self.served.writes.unbind.retain(|u| *u != id);
            }
            self.outbox.put(job)?;
        }
        Ok(())
    }

    /// Appends a finished job's continuation row unless `poll` already shows it. `false`
    /// when the append failed (the result then waits, so the continuation is not lost).
    async fn continuation_appended(
        &mut self,
        poll: &Poll,
        job: &FinishedJob,
    ) -> Result<bool, DaemonError> {
        let Some(cont) = &job.continuation else {
            return Ok(true);
        };
        if poll.snapshot.by_job_id(&cont.job_id).is_some() {
            return Ok(true);
        }
        match self.append_continuation(job, cont).await {
            Ok(()) => Ok(true),
            // Refused too (400: the sheet's metadata storage full, a mark's id in use): this
            // job's result waits and is tried again, the other results go on.
            Err(DaemonError::Sheets(e))
                if e.is_retryable() || e.kind == crate::sheets::ErrorKind::InvalidArgument =>
            {
                warn!(job.id = ?job.job_id, error = %e, "could not append the continuation row; the result waits for it");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Moves bindings back onto their jobs' rows (a narrow sort or a cut-and-paste left them
    /// behind, or they were lost): one atomic batch of delete + create per binding, with the
    /// rows read back in the same call. A binding that did not land on its job's row (the
    /// rows moved again meanwhile) is removed again at the next batch and retried from the
    /// next poll; the results themselves are written at the next pass, through the binding.
    pub(super) async fn rebind(
        &mut self,
        rebind: &[(i32, u32, String)],
    ) -> Result<(), DaemonError> {
        let qid = self.queue_sheet_id();
        let mut requests = Vec::new();
        let mut ranges = Vec::new();
        for (id, row, _) in rebind {
            requests.push(Request::DeleteMetadata { id: *id });
            requests.push(Request::BindRow {
                sheet_id: qid,
                row: row - 1,
                id: *id,
                key: binding::KEY.to_string(),
                value: String::new(),
            });
            ranges.push(self.row_range(*row));
        }
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges: ranges,
                ..Default::default()
            })
            .await?;
        for (k, (id, row, job_id)) in rebind.iter().enumerate() {
            let landed = self.read_back_row(reply.ranges.get(k), *row);
            if landed.as_ref().is_some_and(|r| &r.job_id == job_id) {
                self.observers.metrics.rebind();
                info!(job.id = ?job_id, row, binding = id, "moved the row binding back onto the job's row");
            } else {
                warn!(job.id = ?job_id, row, binding = id, "the rows moved again while rebinding; trying again at the next pass");
                self.served.writes.unbind.push(*id);
            }
        }
        Ok(())
    }

    pub(super) async fn append_continuation(
        &mut self,
        job: &FinishedJob,
        cont: &Continuation,
    ) -> Result<(), DaemonError> {
        let mut flags: Vec<String> = job
            .flags
            .iter()
            .filter(|f| *f != crate::commands::CONTINUATION_FLAG)
            .cloned()
            .collect();
        flags.push(crate::commands::CONTINUATION_FLAG.into());
        let new_row = panel::NewJob {
            job_id: cont.job_id.clone(),
            received_at: Utc::now(),
            requester: job.requester.clone(),
            panel_sheet: job.panel_sheet.clone(),
            panel_row: job.panel_row,
            target: job.target.clone(),
            function: job.function.clone(),
            command: job.command.clone(),
            args_json: cont.args_json.clone(),
            flags: flags.join(","),
            inputs: self
                .registry
                .catalog()
                .inputs_text(&job.function, &cont.args_json),
        };
        let cells = new_row.to_row(
            &self.served.layout.columns,
            &self.config.states,
            self.served.layout.tz,
        );
        // The row and sheetq's mark of it in one atomic batch: a continuation step is one
        // only by the mark (`provenance`), so the row never stands without it, nor the mark
        // without its row.
        let mark = self.continuation_mark(&Fields {
            job_id: &new_row.job_id,
            requester: &new_row.requester,
            panel_sheet: &new_row.panel_sheet,
            target: &new_row.target,
            function: &new_row.function,
            command: &new_row.command,
            args_json: &new_row.args_json,
        });
        self.sheets
            .batch_update(&BatchUpdate {
                requests: vec![
                    Request::AppendRows {
                        sheet_id: self.served.layout.queue_sheet_id,
                        rows: vec![cells],
                    },
                    mark,
                ],
                ..Default::default()
            })
            .await?;
        info!(job.id = ?job.job_id, next = %cont.job_id, target = %Logged(&job.target), "appended a continuation row");
        Ok(())
    }

    /// The queue cells of a finished job: 状態, 終了日時, 結果URL, メッセージ.
    pub(super) fn finish_values(
        &self,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Vec<(Column, Cell)> {
        let state = finish.state();
        vec![
            (Column::State, Cell::from(self.config.states.word(state))),
            (
                Column::FinishedAt,
                Cell::from(sheet_time::instant_to_serial(at, self.served.layout.tz)),
            ),
            (Column::ResultUrl, Cell::from(url)),
            (Column::Message, Cell::from(message)),
        ]
    }

    /// [`Self::finish_values`] as A1 writes at a row number, for rows without a binding.
    pub(super) fn finish_cells(
        &self,
        row: u32,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Vec<ValueRange> {
        self.cells_at(row, self.finish_values(finish, at, url, message))
    }
}

/// Whether placing the pending results and follow-ups needs every row of the queue (a
/// partial read may not show a row that decides "deleted" or "rebind"): a job that no bound
/// row of `poll` shows as ours and that the read does not hold, or a late result whose row
/// was timed out meanwhile (whether its function was pressed again, so that press owns the
/// panel row, needs the whole queue too).
pub(super) fn needs_whole_queue(
    poll: &Poll,
    pending: &[FinishedJob],
    follow_ups: &[Through],
) -> bool {
    let unresolved = |id: Option<i32>, job_id: &str, worker: &str| {
        let bound_ok = id
            .and_then(|id| poll.bound.get(&id))
            .and_then(Option::as_ref)
            .is_some_and(|r| r.job_id == job_id && r.worker == worker);
        !bound_ok && poll.snapshot.by_job_id(job_id).is_none()
    };
    let timed_out = |id: Option<i32>| {
        id.and_then(|id| poll.bound.get(&id))
            .and_then(Option::as_ref)
            .is_some_and(|r| r.state.is(State::Timeout))
    };
    pending.iter().any(|j| {
        let id = binding::id_of_tag(&j.worker);
        unresolved(id, &j.job_id, &j.worker) || timed_out(id)
    }) || follow_ups
        .iter()
        .any(|t| unresolved(Some(t.id), &t.job_id, &t.worker))
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::queue::{RowState, Snapshot, WorkerTag};

    pub(in crate::daemon) fn row(n: u32, job: &str, state: State, worker: &str) -> QueueRow {
        QueueRow {
            job_id: job.into(),
            state: RowState::Known(state),
            worker: worker.into(),
            ..QueueRow::blank(n)
        }
    }

    /// A poll that read `rows` (not the whole queue) and found `bound` bindings' rows.
    fn poll(rows: Vec<QueueRow>, bound: Vec<(i32, Option<QueueRow>)>) -> Poll {
        Poll {
            snapshot: Snapshot {
                rows,
                problems: Vec::new(),
            },
            lease: crate::lease::LeaseState::Free,
            lease_quiet: std::time::Duration::ZERO,
            watched: Default::default(),
            workers: Vec::new(),
            own_heartbeat_row: None,
            full: false,
            tables: HashMap::new(),
            bound: bound.into_iter().collect(),
            index: None,
            append_from: 2,
            protections: None,
        }
    }

    fn result_of(job: &str, tag: &WorkerTag) -> FinishedJob {
        FinishedJob {
            job_id: job.into(),
            worker: tag.to_string(),
            finish: Finish::Done,
            finished_at: Utc::now(),
            url: String::new(),
            message: String::new(),
            target: "A".into(),
            function: "f".into(),
            panel_sheet: "A".into(),
            panel_row: None,
            requester: String::new(),
            command: "sleep".into(),
            flags: Vec::new(),
            continuation: None,
            started_at: None,
            log_row: false,
            linked: false,
            panel_linked: false,
            output: String::new(),
            inputs: String::new(),
        }
    }

    #[test]
    fn the_whole_queue_is_read_only_when_a_result_or_follow_up_cannot_be_placed_from_the_window() {
        let (token, id) = binding::new_token();
        let tag = WorkerTag {
            daemon_id: "vm-1".into(),
            slot: 0,
            token,
        };
        let ours = row(7, "j1", State::Running, &tag.to_string());
        let result = [result_of("j1", &tag)];
        // The binding sits on the job's row: nothing more to read.
        let placed = poll(vec![ours.clone()], vec![(id, Some(ours.clone()))]);
        assert!(!needs_whole_queue(&placed, &result, &[]));
        // The binding matched nothing and the window does not show the job: read it all.
        let lost = poll(Vec::new(), vec![(id, None)]);
        assert!(needs_whole_queue(&lost, &result, &[]));
        // The job is in the window although its binding is lost: it can be rebound from it.
        let in_window = poll(vec![ours.clone()], vec![(id, None)]);
        assert!(!needs_whole_queue(&in_window, &result, &[]));
        // Timed out meanwhile: its real result must find the row wherever a sort put it.
        let timed_out = row(7, "j1", State::Timeout, &tag.to_string());
        let late = poll(Vec::new(), vec![(id, Some(timed_out))]);
        assert!(needs_whole_queue(&late, &result, &[]));
        // A follow-up whose binding does not show its row and its job not in the window.
        let follow_up = Through {
            id,
            job_id: "j1".into(),
            worker: tag.to_string(),
            state: Some(State::Running),
            cells: Vec::new(),
            unbind: true,
            result: false,
        };
        assert!(needs_whole_queue(
            &lost,
            &[],
            std::slice::from_ref(&follow_up)
        ));
        assert!(!needs_whole_queue(&placed, &[], &[follow_up]));
    }
}
