//! Write-back (docs/design.md §4): finished results from the outbox go to the queue row through its
//! binding (Google resolves the row when the write is applied; the reply proves which row it
//! was) and to the panel row found by label, in one `values.batchUpdateByDataFilter`; plus
//! rebinding, restart recovery and continuation rows.
//!
//! Nothing here sends a write to a queue row number computed from an earlier read, except for
//! rows claimed without a binding (older versions, other tools), which have no other way to be
//! found. A write that fails is not retried at the same places: its result stays in the
//! outbox and is resolved afresh from the next poll.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use tracing::{debug, error, info, warn};

use crate::a1;
use crate::binding::{self, WriteCheck, WritePlan};
use crate::joblog::LogColumn;
use crate::outbox::{Continuation, Finish, FinishedJob};
use crate::panel::{self, PanelOutcome};
use crate::provenance::Fields;
use crate::queue::{Column, QueueRow, State};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{BatchUpdate, Cell, Filter, FilterWrite, FilterWritten, Request, ValueRange};

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
            self.served.start_poll = Some(poll);
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

    /// The waiting/running status cells that differ from what the panels show (at most 20),
    /// leaving out rows whose result is about to be written in the same call.
    pub(super) fn panel_display(&self, poll: &Poll) -> Vec<ValueRange> {
        let mut snapshot = poll.snapshot.clone();
        snapshot.rows.retain(|r| !self.outbox.contains(&r.job_id));
        let mut display = panel::status_updates(
            &snapshot,
            &self.served.panels,
            &poll.tables,
            self.served.layout.tz,
            &self.config.panel,
            20,
        );
        let catalog = self.registry.catalog();
        let tz = self.served.layout.tz;
        display.extend(panel::status::approval_updates(
            &snapshot,
            &self.served.panels,
            &poll.tables,
            &self.config.panel,
            20,
            |row| {
                let rule = catalog.approval_rule(&row.function)?;
                Some(self.approval_text(row, &crate::approval::tally(&rule, row, tz)))
            },
        ));
        display.extend(panel::status::next_run_updates(
            &poll.snapshot,
            &self.served.panels,
            &poll.tables,
            &self.next_runs(),
            self.served.layout.tz,
            &self.config.panel,
        ));
        if let Some(index) = &poll.index {
            // A panel some of whose cells someone else's protection bars says so on the
            // index (`hold_off`), where people look first.
            let barred: std::collections::HashSet<String> = self
                .served
                .panels
                .panels()
                .iter()
                .filter(|p| {
                    self.served
                        .barred
                        .iter()
                        .any(|b| b.area.sheet_id == p.sheet_id)
                })
                .map(|p| p.label.clone())
                .collect();
            display.extend(panel::index_sheet::index_updates(
                &index.title,
                &index.entries,
                &poll.tables,
                &poll.snapshot.rows,
                &self.config.panel,
                &barred,
            ));
        }
        display
    }

    /// The panel cells (状態, 結果, 更新日時) of a finished job, found by target label and
    /// function label. A panel or row that cannot be found is a warning: the queue row is
    /// written regardless.
    pub(super) fn panel_result(
        &self,
        poll: &Poll,
        row: &QueueRow,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Option<ValueRange> {
        let (panel_ref, panel_row) = self.result_panel_row(poll, row)?;
        Some(panel::result_cells(
            panel_ref,
            panel_row,
            &panel_outcome(
                finish,
                at,
                url,
                message,
                self.next_run(row.target_key(), &row.function),
            ),
            self.served.layout.tz,
            &self.config.panel,
        ))
    }

    /// The panel and row a finished job's outcome goes to, if any: none for a panel job,
    /// nor when a newer press of its function owns the row, nor when it cannot be found
    /// (a warning: the queue row is written regardless).
    fn result_panel_row<'p>(
        &'p self,
        poll: &'p Poll,
        row: &QueueRow,
    ) -> Option<(&'p panel::PanelRef, u32)> {
        if row.target_key() == panel::catalog::PANELS_TARGET {
            // A panel job has no panel row: its outcome is its queue row (and the panels
            // and index links it made).
            return None;
        }
        if let Some(newer) = panel::newer_press(&poll.snapshot, row) {
            // The panel row shows the newest press of its function (a late result of a job
            // timed out meanwhile, whose function was pressed again): the queue row alone
            // takes this one.
            debug!(job.id = ?row.job_id, newer = ?newer.job_id, "a newer press of this function owns its panel row; writing the result to the queue row only");
            return None;
        }
        match panel::locate(&self.served.panels, &poll.tables, row) {
            Ok((panel_ref, panel_row)) => Some((panel_ref, panel_row.row)),
            Err(miss) => {
                warn!(job.id = ?row.job_id, target = %Logged(row.target_key()), "{miss}; only the queue row is written");
                None
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
        if self.heartbeat_due() && !std::mem::take(&mut self.served.beat_carried_logs) {
            self.refresh_logs();
        }
        let carry_logs = !self.log_writes.is_empty();
        let heartbeat = if data.is_empty() && through.is_empty() && !carry_logs {
            false
        } else {
            // With results, the heartbeat goes too: its list of running jobs is what other
            // daemons' claims go by.
            let force = !through.is_empty();
            self.served.beat_carried_logs = carry_logs;
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
            .landed
            .extend(landed.into_iter().map(|j| (j, now)));
        self.outbox.done(settled.iter().map(String::as_str))?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        // Only a job still running or with its result pending can be written to again.
        let (outbox, running) = (&self.outbox, &self.running);
        self.log_dead
            .retain(|j| outbox.contains(j) || running.contains_key(j));
        Ok(heartbeat)
    }

    /// Records the notices of `jobs`, whose results have just landed (or will never land),
    /// for every `[[notify]]` channel that wants them: one per channel and job, whatever
    /// retries came before. A journal that cannot be written is logged; results go on.
    fn announce(&mut self, poll: &Poll, jobs: &[FinishedJob]) {
        let channels = self.announcer.channels();
        let id = &self.config.spreadsheet_id;
        let now = Utc::now();
        let mut notices = Vec::new();
        for job in jobs {
            // Taken whether anyone wants it or not: the job is done with.
            let log_row = self.log_rows_landed.remove(&job.job_id);
            let refused = self.refused_jobs.remove(&job.job_id);
            let wanting: Vec<_> = channels.iter().filter(|c| c.wants(job)).collect();
            if wanting.is_empty() {
                continue;
            }
            let links = crate::notifications::Links {
                panel: self
                    .result_panel_row(poll, &job.as_row())
                    .map(|(p, row)| crate::notifications::row_url(id, p.sheet_id, row)),
                log: self
                    .served
                    .layout
                    .log
                    .as_ref()
                    .zip(log_row)
                    .map(|(log, row)| crate::notifications::row_url(id, log.sheet_id, row)),
            };
            let state = self.config.states.word(finish_state(job.finish));
            // A job refused before it ran is announced without the sheet's text.
            notices.extend(wanting.into_iter().map(|c| {
                let n = crate::notifications::Notice::of(c, job, id, state, links.clone(), now);
                match refused {
                    Some(reason) => n.withheld(reason.as_str()),
                    None => n,
                }
            }));
        }
        if let Err(e) = self.announcer.record(notices) {
            warn!(error = %e, "could not record notifications of finished jobs; they are not sent");
        }
    }

    /// Records the notices of a job another daemon's claim held, ended here by a commit's
    /// swap (a dead daemon's job timed out, a waiting job cancelled): no result of ours
    /// announces it.
    pub(super) fn announce_ended(
        &mut self,
        poll: &Poll,
        row: &QueueRow,
        finish: Finish,
        message: &str,
        now: DateTime<Utc>,
    ) {
        let job = FinishedJob {
            target: row.target_key().to_string(),
            ..FinishedJob::ended(row, row.worker.clone(), finish, now, message.to_string())
        };
        self.announce(poll, &[job]);
    }

    /// Records the notices of approval `step` of `row`'s job (docs/design.md §5.5): a
    /// request tells who may approve it, an approval who gave it.
    pub(super) fn announce_step(
        &mut self,
        poll: &Poll,
        row: &QueueRow,
        step: crate::notifications::Step,
        now: DateTime<Utc>,
    ) {
        let channels = self.announcer.channels();
        let target = row.target_key();
        let wanting: Vec<_> = channels
            .iter()
            .filter(|c| c.wants_step(step, &row.function, target))
            .collect();
        if wanting.is_empty() {
            return;
        }
        let catalog = self.registry.catalog();
        let Some(rule) = catalog.approval_rule(&row.function) else {
            return;
        };
        let tz = self.served.layout.tz;
        let tally = crate::approval::tally(&rule, row, tz);
        let (state, message) = match step {
            crate::notifications::Step::Requested => (
                self.config.states.awaiting_approval.clone(),
                format!(
                    "承認が {} 件必要です (承認者: {}; 期限 {})",
                    rule.needed,
                    rule.approvers.join(", "),
                    humantime::format_duration(rule.expires)
                ),
            ),
            crate::notifications::Step::Approved => (
                "承認".to_string(),
                format!("承認: {}", tally.approved_by.join(", ")),
            ),
        };
        let id = &self.config.spreadsheet_id;
        let panel = self
            .result_panel_row(poll, row)
            .map(|(p, r)| crate::notifications::row_url(id, p.sheet_id, r));
        let notices = wanting
            .into_iter()
            .map(|c| {
                crate::notifications::Notice::of_step(
                    c,
                    step,
                    row,
                    id,
                    &state,
                    message.clone(),
                    panel.clone(),
                    now,
                )
            })
            .collect();
        if let Err(e) = self.announcer.record(notices) {
            warn!(error = %e, "could not record notifications of an approval step; they are not sent");
        }
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
            .retry_notes
            .iter()
            .filter(|(_, noted)| noted.has_changed().unwrap_or(false))
            .filter_map(|(job_id, noted)| Some((job_id.clone(), noted.borrow().clone()?)))
            .collect();
        for (job_id, note) in changed {
            let Some(claimed) = self.running.get(&job_id) else {
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
            if let Some(noted) = self.retry_notes.get_mut(&job_id) {
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
                self.served.pending_through.push(t);
                continue;
            }
            let at_binding = poll.bound.get(&t.id).and_then(Option::as_ref);
            let with_job = poll.rows_with_job(&t.job_id);
            let live = |r: &QueueRow| self.claim_is_live(poll, r);
            match binding::plan_write(&t.job_id, &t.worker, t.state, at_binding, &with_job, live) {
                WritePlan::Write => through.push(t),
                WritePlan::Rebind { row } => {
                    rebind.push((t.id, row, t.job_id.clone()));
                    self.served.pending_through.push(t);
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
                    self.served.unbind.extend(id);
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
                .running
                .values()
                .chain(&self.unsettled)
                .any(|c| c.tag == tag)
                || self.outbox.pending().any(|j| j.worker == row.worker)
                || self
                    .served
                    .pending_through
                    .iter()
                    .chain(&self.served.unsure)
                    .any(|t| t.worker == row.worker)
                || self
                    .served
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
            self.served.pending_through.extend(through);
        }
    }

    /// Results that landed in the last minute and whose row `poll` shows back at `実行中`
    /// under our claim go back to the outbox: another daemon's repair, made from a read
    /// taken before our write, put the row back as it was (it cannot make its write
    /// conditional on the row being unchanged). Without this the row would wait for
    /// `stale_after` and its result be lost.
    fn rewrite_undone(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        self.served
            .landed
            .retain(|(_, at)| at.elapsed() < LANDED_WATCH);
        let (undone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.served.landed)
            .into_iter()
            .partition(|(job, _)| {
                poll.rows_with_job(&job.job_id)
                    .iter()
                    .any(|r| r.worker == job.worker && r.state.is(State::Running))
            });
        self.served.landed = kept;
        for (job, _) in undone {
            warn!(job.id = ?job.job_id, worker = %job.worker, "a result that had landed was undone (its row is back at 実行中 under our claim, restored from an older read); writing it again");
            self.observers.metrics.write_incident();
            // Its binding is wanted again: not removed with the next batch.
            if let Some(id) = binding::id_of_tag(&job.worker) {
                self.served.unbind.retain(|u| *u != id);
            }
            self.outbox.put(job)?;
        }
        Ok(())
    }

    /// The panel cells of a finished job. A job whose claim commit wrote its panel 結果 as
    /// a formula (its メッセージ linked to its 結果URL, looked up by jobId when shown,
    /// `joblog::panel_result_formula`) gets only 状態 and 更新日時.
    fn job_panel_result(&self, poll: &Poll, row: &QueueRow, job: &FinishedJob) -> Vec<ValueRange> {
        let Some((panel_ref, panel_row)) = self.result_panel_row(poll, row) else {
            return Vec::new();
        };
        let outcome = panel_outcome(
            job.finish,
            job.finished_at,
            &job.url,
            &job.message,
            self.next_run(&job.target, &job.function),
        );
        let (tz, layout) = (self.served.layout.tz, &self.config.panel);
        if job.panel_linked {
            panel::status_and_time_cells(panel_ref, panel_row, &outcome, tz, layout)
        } else {
            vec![panel::result_cells(
                panel_ref, panel_row, &outcome, tz, layout,
            )]
        }
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
                self.served.unbind.push(*id);
            }
        }
        Ok(())
    }

    /// Sends `through` (writes to queue rows through their bindings) and `data` (A1 writes:
    /// panel cells, display, heartbeat, rows without a binding) in one
    /// `values.batchUpdateByDataFilter`, then checks each bound write against its reply row.
    /// A write that found another job's row is an incident: logged, counted, and repaired
    /// at once from `poll` (the values read just before). Returns the jobIds whose write
    /// landed.
    pub(super) async fn write_through(
        &mut self,
        poll: &Poll,
        through: Vec<Through>,
        data: Vec<ValueRange>,
        under: Under,
    ) -> Result<Vec<String>, DaemonError> {
        // Cells someone else's protection bars are left out (`hold_off`): the rest goes.
        let data: Vec<ValueRange> = data.into_iter().filter(|v| self.writable(v)).collect();
        if through.is_empty() && data.is_empty() {
            return Ok(Vec::new());
        }
        let logs: Vec<LogWrite> = std::mem::take(&mut self.log_writes)
            .into_iter()
            .filter(|l| self.served.layout.log.is_some() && !self.log_dead.contains(&l.job_id))
            .collect();
        let writes: Vec<FilterWrite> = through
            .iter()
            .map(|t| self.bound_write(t.id, &t.cells))
            .chain(data.iter().map(FilterWrite::a1))
            .chain(logs.iter().filter_map(|l| self.log_write(l)))
            .collect();
        let base = through.len() + data.len();
        let replies = match self
            .sheets
            .write_filtered_by(&writes, under.send_by())
            .await
        {
            Ok(r) => r,
            Err(e) if under.is_lease() && e.may_have_applied() => {
                let again = self.hold_in_doubt(through);
                self.keep_follow_ups(again);
                self.refresh_again(&logs);
                return Err(e.into());
            }
            Err(e) => {
                self.keep_follow_ups(through);
                self.forget_refused_logs(&e, base, &logs);
                self.refresh_again(&logs);
                return Err(e.into());
            }
        };
        if let Some(log) = &self.served.layout.log {
            let replies = replies
                .get(through.len() + data.len()..)
                .unwrap_or_default();
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
                                self.log_rows_landed.insert(l.job_id.clone(), row + 1);
                            }
                            // Done: its binding goes, and nothing is written through it again
                            // (a write through a binding that is gone fails the whole call).
                            self.served.unbind.push(l.id);
                            self.log_dead.insert(l.job_id.clone());
                        }
                    }
                    None => {
                        debug!(job.id = ?l.job_id, "the job's log row is gone; its output stays under state_dir")
                    }
                }
            }
        }
        let mut landed = Vec::new();
        let mut missed = Vec::new();
        let mut repairs = Vec::new();
        // Two of our writes in this call can land on one row (a result and a restore whose
        // bindings values moved under): neither may take the other's cells for a change made
        // since our read.
        let reply_row = |w: &Option<FilterWritten>| {
            w.as_ref()
                .and_then(|w| a1::A1Range::parse(&w.range).ok()?.start_row)
        };
        let mut written_here: HashMap<u32, Vec<Column>> = HashMap::new();
        for (t, reply) in through.iter().zip(&replies) {
            if let Some(row) = reply_row(reply) {
                written_here
                    .entry(row)
                    .or_default()
                    .extend(t.cells.iter().map(|(c, _)| *c));
            }
        }
        for (t, reply) in through.iter().zip(&replies) {
            match self.check_reply(t, reply.as_ref()) {
                WriteCheck::Landed => {
                    if t.unbind {
                        self.served.unbind.push(t.id);
                    }
                    landed.push(t.job_id.clone());
                }
                WriteCheck::Missed => {
                    warn!(job.id = ?t.job_id, binding = t.id, "the row binding matched no row when the write was applied (row deleted?); resolving it afresh at the next pass");
                    missed.push(t.clone());
                }
                WriteCheck::Wrong { found_job_id } => {
                    missed.push(t.clone());
                    self.rows_moved();
                    self.report.write_incidents += 1;
                    self.observers.metrics.write_incident();
                    error!(
                        job.id = ?t.job_id,
                        binding = t.id,
                        found = %found_job_id,
                        range = reply.as_ref().map(|w| w.range.as_str()).unwrap_or(""),
                        "incident: a write through a row binding landed on another job's row (values moved under the binding); repairing that row"
                    );
                    let after = reply
                        .as_ref()
                        .and_then(|w| self.parse_row_at(&w.range, w.values.first()?));
                    let before = poll.before_image(&found_job_id);
                    // The reply covers the row only as wide as the write was (its range;
                    // its values leave out trailing empty cells, which are empty, not unseen).
                    let width = reply
                        .as_ref()
                        .and_then(|w| written_width(&w.range))
                        .unwrap_or(0);
                    let cols = &self.served.layout.columns;
                    let ours = reply_row(reply)
                        .and_then(|r| written_here.get(&r))
                        .map_or(&[][..], Vec::as_slice);
                    let compared = |c: Column| {
                        (cols.index(c) as usize) < width
                            && !t.cells.iter().any(|(w, _)| *w == c)
                            && !ours.contains(&c)
                    };
                    let moved_on = match (&before, &after) {
                        (Some(b), Some(a)) => changed_since(b, a, compared),
                        _ => None,
                    };
                    if let Some(column) = moved_on {
                        // Restoring what our read saw would undo a change made since (a
                        // claim another daemon made): the row's owner mends it instead.
                        error!(job.id = ?found_job_id, ?column, cells = ?t.cells, "the row that was hit changed after our read; not restoring it from that read");
                        continue;
                    }
                    match before {
                        Some(before) => repairs.push(self.repair_of(t, found_job_id, &before)),
                        None => {
                            error!(job.id = ?found_job_id, "the row that was hit was not in the read just before; its cells cannot be restored")
                        }
                    }
                }
            }
        }
        self.keep_follow_ups(missed);
        self.repair(poll, repairs, under).await;
        Ok(landed)
    }

    /// Gives rows that misplaced writes hit their values back (`repairs`, from the read just
    /// before), through the binding the write went through. A repair is itself a write
    /// through a binding, checked by its reply: one refused or missed is sent again, one that
    /// found yet another row (the values moved again) repairs that row too, for a few rounds.
    /// What is left is repaired at the next passes, through bindings of its own.
    async fn repair(&mut self, poll: &Poll, mut repairs: Vec<Through>, under: Under) {
        const ROUNDS: u32 = 3;
        for round in 1..=ROUNDS {
            if repairs.is_empty() {
                return;
            }
            let writes: Vec<FilterWrite> = repairs
                .iter()
                .map(|t| self.bound_write(t.id, &t.cells))
                .collect();
            let replies = match self
                .sheets
                .write_filtered_by(&writes, under.send_by())
                .await
            {
                Ok(r) => r,
                Err(e) if under.is_lease() && e.may_have_applied() => {
                    warn!(error = %e, round, "the repair of a row a misplaced write hit may or may not have applied");
                    repairs = self.hold_in_doubt(repairs);
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, round, "the repair of a row a misplaced write hit was refused");
                    if round < ROUNDS {
                        tokio::time::sleep(std::time::Duration::from_millis(
                            200 * u64::from(round),
                        ))
                        .await;
                    }
                    continue;
                }
            };
            let mut again = Vec::new();
            for (t, reply) in repairs.into_iter().zip(replies) {
                match self.check_reply(&t, reply.as_ref()) {
                    WriteCheck::Landed => {
                        info!(job.id = ?t.job_id, "repaired the row a misplaced write had hit")
                    }
                    WriteCheck::Missed => again.push(t),
                    WriteCheck::Wrong { found_job_id } => {
                        self.report.write_incidents += 1;
                        self.observers.metrics.write_incident();
                        error!(job.id = ?t.job_id, found = %found_job_id, "incident: the repair of a row landed on yet another row (the rows moved again); repairing that one now, and the first one through a binding of its own at the next pass");
                        if let Some(before) = poll.before_image(&found_job_id) {
                            again.push(self.repair_of(&t, found_job_id, &before));
                        }
                        self.repair_later(t);
                    }
                }
            }
            repairs = again;
        }
        for t in repairs {
            warn!(job.id = ?t.job_id, "could not repair the row a misplaced write had hit yet; trying again at the next pass");
            self.repair_later(t);
        }
    }

    /// A repair the values moved away from goes to the next write-back as a follow-up under a
    /// binding of its own (a fresh id, not yet on any row): planned against that poll, the
    /// binding is created on the row that holds the job and shows `worker`, checked by its
    /// read-back, and the cells are written through it at the pass after.
    fn repair_later(&mut self, t: Through) {
        let (_, id) = binding::new_token();
        error!(job.id = ?t.job_id, cells = ?t.cells, "this row should show these values; repairing it at the next passes");
        self.served.pending_through.push(Through {
            id,
            unbind: true,
            ..t
        });
    }

    /// Cells for a claimed `row` (as a read showed it; its ワーカー text is the claim it must
    /// still show, `state` the state it must be in): through the binding that claim names,
    /// or, for a claim without one, to the row number of that read, the only way such a row
    /// can be reached.
    pub(super) fn follow_up(
        &self,
        row: &QueueRow,
        state: Option<State>,
        cells: Vec<(Column, Cell)>,
        through: &mut Vec<Through>,
        data: &mut Vec<ValueRange>,
    ) {
        match binding::id_of_tag(&row.worker) {
            Some(id) => through.push(Through {
                id,
                job_id: row.job_id.clone(),
                worker: row.worker.clone(),
                state,
                cells,
                unbind: true,
                result: false,
            }),
            None => data.extend(self.cells_at(row.row, cells)),
        }
    }

    /// Whether `row`'s claim (its ワーカー text) is one a live daemon runs: ours when one of
    /// our running or unsettled claims shows that text, another daemon's when its live
    /// heartbeat lists the job. A claim commit that missed its row leaves such text on a row
    /// it did not claim; that claim runs nothing. An empty cell is no claim; other text (a
    /// person's note) counts as live, so nothing is overwritten on its account.
    pub(super) fn claim_is_live(&self, poll: &Poll, row: &QueueRow) -> bool {
        if row.worker.trim().is_empty() {
            return false;
        }
        let Some(tag) = row.worker_tag() else {
            return true;
        };
        if tag.daemon_id == self.config.worker_id {
            return self
                .running
                .values()
                .chain(&self.unsettled)
                .any(|c| c.tag == tag);
        }
        poll.workers.iter().any(|h| {
            h.worker_id == tag.daemon_id
                && h.is_live(self.config.dead_after)
                && h.jobs.iter().any(|j| j.job_id == row.job_id)
        })
    }

    /// What the reply of a write through a binding proves ([`binding::check_write`] on the
    /// jobId cell of the row as the write left it).
    fn check_reply(&self, t: &Through, reply: Option<&FilterWritten>) -> WriteCheck {
        let job_col = self.served.layout.columns.index(Column::JobId) as usize;
        let found = reply.map(|w| {
            w.values
                .first()
                .and_then(|row| row.get(job_col))
                .map(crate::queue::cell_text)
                .unwrap_or_default()
        });
        binding::check_write(&t.job_id, found.as_deref())
    }

    /// The repair of the row holding `found_job_id`, hit by the misplaced write `t`: the
    /// cells `t` wrote, given back the values `before` (our read) had, through `t`'s binding.
    /// It expects the row as `t` left it (its ワーカー text and state): a row changed since
    /// (a claim made after the misplaced write, a person's edit) is not restored.
    fn repair_of(&self, t: &Through, found_job_id: String, before: &QueueRow) -> Through {
        let state_written = t
            .cells
            .iter()
            .find(|(c, _)| *c == Column::State)
            .map(|(_, v)| self.config.states.parse(&crate::queue::cell_text(v)));
        let state = match state_written {
            Some(written) => written,
            None => match before.state {
                crate::queue::RowState::Known(s) => Some(s),
                crate::queue::RowState::Unknown(_) => None,
            },
        };
        Through {
            id: t.id,
            job_id: found_job_id,
            worker: worker_after(before, &t.cells),
            state,
            cells: self.restore_values(before, &t.cells),
            unbind: false,
            result: false,
        }
    }

    /// Keeps the follow-ups among `through` that did not land for the next write-back (results
    /// stay in the outbox anyway), where they are planned afresh against a new poll.
    pub(super) fn keep_follow_ups(&mut self, through: impl IntoIterator<Item = Through>) {
        self.served
            .pending_through
            .extend(through.into_iter().filter(|t| !t.result));
    }

    /// A row of `cells` at their columns and `null` elsewhere, through binding `id`: Google
    /// skips the nulls, so only these cells of the bound row change. The row reaches at
    /// least the jobId column, wherever the header puts it: the reply covers only the span
    /// written, and [`Self::check_reply`] reads the jobId from it.
    /// Queues the final write of `job`'s log row (through `joblog::binding_id` of queue
    /// binding `queue_binding`), unless it has none or it is done.
    fn push_final_log(&mut self, queue_binding: i32, job: &FinishedJob) {
        if job.log_row && !self.log_dead.contains(&job.job_id) {
            let write = self.final_log_write(queue_binding, job);
            self.queue_log_write(write);
        }
    }

    /// The write of a finished job's whole log row: restated jobId, target, function and
    /// start (a claim a sort put on another row runs that row's job), its end and output.
    fn final_log_write(&self, queue_binding: i32, job: &FinishedJob) -> LogWrite {
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
            (LogColumn::Function, Cell::from(job.function.as_str())),
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
        for (job_id, (capture, shown)) in &mut self.outputs {
            let Some(claimed) = self
                .running
                .get(job_id)
                .filter(|c| c.log_row && !self.log_dead.contains(job_id))
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
    fn forget_refused_logs(
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
            self.log_dead.insert(l.job_id.clone());
        }
    }

    /// Queues `write`, in place of any write of the same job's log row still queued (a
    /// write that did not go, while the API refused or failed): the newer says it all.
    fn queue_log_write(&mut self, write: LogWrite) {
        self.log_writes.retain(|l| l.job_id != write.job_id);
        self.log_writes.push(write);
    }

    /// The running jobs' output carried by a call that failed is sent again with the next
    /// heartbeat that carries output, even if they print nothing more.
    fn refresh_again(&mut self, logs: &[LogWrite]) {
        for l in logs.iter().filter(|l| !l.last) {
            if let Some((_, shown)) = self.outputs.get_mut(&l.job_id) {
                *shown = 0;
            }
        }
    }

    fn log_write(&self, l: &LogWrite) -> Option<FilterWrite> {
        let log = self.served.layout.log.as_ref()?;
        Some(FilterWrite {
            filter: Filter::Metadata(l.id),
            values: vec![log.sparse_row(&l.cells)],
        })
    }

    fn bound_write(&self, id: i32, cells: &[(Column, Cell)]) -> FilterWrite {
        FilterWrite {
            filter: Filter::Metadata(id),
            values: vec![self.served.layout.columns.sparse_row(cells, Column::JobId)],
        }
    }

    /// Whether a write in doubt ([`Self::hold_in_doubt`]) goes through binding `id`.
    fn in_doubt(&self, id: i32) -> bool {
        self.served.unsure.iter().any(|t| t.id == id)
    }

    /// Whether `row` shows every cell of `cells` (times to the millisecond): a write of
    /// them was applied.
    pub(super) fn shows(&self, row: &QueueRow, cells: &[(Column, Cell)]) -> bool {
        self.restore_values(row, cells)
            .iter()
            .zip(cells)
            .all(
                |((_, seen), (_, written))| match (seen.as_f64(), written.as_f64()) {
                    // About 9 ms in a day serial.
                    (Some(a), Some(b)) => (a - b).abs() < 1e-7,
                    _ => crate::queue::cell_text(seen) == crate::queue::cell_text(written),
                },
            )
    }

    /// The values `before` had in the columns of `cells`.
    fn restore_values(&self, before: &QueueRow, cells: &[(Column, Cell)]) -> Vec<(Column, Cell)> {
        let tz = self.served.layout.tz;
        let serial = |t: Option<DateTime<Utc>>| {
            t.map(|t| Cell::from(sheet_time::instant_to_serial(t, tz)))
                .unwrap_or_else(|| Cell::from(""))
        };
        cells
            .iter()
            .map(|(c, _)| {
                let v = match c {
                    Column::State => match &before.state {
                        crate::queue::RowState::Known(s) => Cell::from(self.config.states.word(*s)),
                        crate::queue::RowState::Unknown(t) => Cell::from(t.clone()),
                    },
                    Column::StartedAt => serial(before.started_at),
                    Column::FinishedAt => serial(before.finished_at),
                    Column::ResultUrl => Cell::from(before.result_url.clone()),
                    Column::Message => Cell::from(before.message.clone()),
                    Column::Worker => Cell::from(before.worker.clone()),
                    _ => Cell::Null,
                };
                (*c, v)
            })
            .collect()
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
        let state = finish_state(finish);
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

/// Whether a write through bindings goes out under the lease we hold (docs/design.md §4).
#[derive(Debug, Clone, Copy)]
pub(super) enum Under {
    /// We hold the lease, and the read the write was planned on was taken under it: no claim
    /// can come between them, nor between a misplaced write and its repair. No attempt
    /// starts after `send_by` (the lease's margin), and one whose outcome is unknown keeps
    /// the lease until Google can no longer apply it.
    Lease { send_by: std::time::Instant },
    /// Results, and rows only their own daemon writes: no lease.
    NoLease,
}

impl Under {
    fn send_by(self) -> Option<std::time::Instant> {
        match self {
            Under::Lease { send_by } => Some(send_by),
            Under::NoLease => None,
        }
    }

    fn is_lease(self) -> bool {
        matches!(self, Under::Lease { .. })
    }
}

/// A write to a queue row through its binding: the cells to change, and what the row must
/// show (checked against the poll before sending and against the write's reply after).
/// Sending one again is safe (Google resolves the row anew, and the reply is checked), so
/// one that failed or missed is planned afresh at the next write-back.
#[derive(Debug, Clone)]
pub(super) struct Through {
    pub(super) id: i32,
    /// The jobId the row must hold.
    pub(super) job_id: String,
    /// The claim (ワーカー text) the row must show.
    pub(super) worker: String,
    /// The state the row must be in, if any (a result: still running).
    pub(super) state: Option<State>,
    pub(super) cells: Vec<(Column, Cell)>,
    /// Remove the binding once the write has landed (the job is finished with).
    pub(super) unbind: bool,
    /// A finished job's result, kept by the outbox until it lands; anything else (a
    /// follow-up of a claim pass) is kept in `pending_through`.
    pub(super) result: bool,
}

/// How many columns, from A, the A1 `range` of a write's reply covers.
fn written_width(range: &str) -> Option<usize> {
    Some(a1::A1Range::parse(range).ok()?.end_col? as usize)
}

/// The ワーカー text a row shows after a write of `cells` onto it (`before` as our read saw it).
fn worker_after(before: &QueueRow, cells: &[(Column, Cell)]) -> String {
    cells
        .iter()
        .find(|(c, _)| *c == Column::Worker)
        .map(|(_, v)| crate::queue::cell_text(v))
        .unwrap_or_else(|| before.worker.clone())
}

/// The first `compared` column (one the write did not touch and its reply shows) whose value
/// differs between `before` (our read) and `after` (the row as the write left it): the row
/// changed after our read, so our read is no before-image to restore it from.
fn changed_since(
    before: &QueueRow,
    after: &QueueRow,
    compared: impl Fn(Column) -> bool,
) -> Option<Column> {
    [
        (Column::State, before.state == after.state),
        (Column::StartedAt, before.started_at == after.started_at),
        (Column::Worker, before.worker == after.worker),
        (Column::FinishedAt, before.finished_at == after.finished_at),
    ]
    .into_iter()
    .find(|(c, same)| compared(*c) && !same)
    .map(|(c, _)| c)
}

pub(super) fn finish_state(finish: Finish) -> State {
    match finish {
        Finish::Done => State::Done,
        Finish::Error => State::Error,
        Finish::Timeout => State::Timeout,
        Finish::Cancelled => State::Cancelled,
        Finish::Rejected => State::Rejected,
        Finish::Expired => State::Expired,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::queue::{RowState, Snapshot, WorkerTag};

    fn row(n: u32, job: &str, state: State, worker: &str) -> QueueRow {
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

    #[test]
    fn a_row_that_changed_after_our_read_in_a_column_we_did_not_write_is_not_restored() {
        let before = row(4, "j2", State::Waiting, "");
        let claimed = row(4, "j2", State::Running, "vm-2/0 #00000001");
        let every = |_: Column| true;
        assert_eq!(changed_since(&before, &claimed, every), Some(Column::State));
        // Only the columns our write did not touch (and its reply shows) are compared.
        let not_state = |c: Column| c != Column::State;
        assert_eq!(
            changed_since(&before, &claimed, not_state),
            Some(Column::Worker)
        );
        let neither = |c: Column| c != Column::State && c != Column::Worker;
        assert_eq!(changed_since(&before, &claimed, neither), None);
        assert_eq!(changed_since(&before, &before, every), None);
    }

    #[test]
    fn a_repair_expects_the_worker_text_our_misplaced_write_left() {
        let before = row(4, "j2", State::Done, "old-vm/0 #0ld0ld00");
        let wrote_worker = [(Column::Worker, Cell::from("vm-1/0 #00000007"))];
        assert_eq!(worker_after(&before, &wrote_worker), "vm-1/0 #00000007");
        let wrote_state = [(Column::State, Cell::from("待機"))];
        assert_eq!(worker_after(&before, &wrote_state), "old-vm/0 #0ld0ld00");
    }

    #[test]
    fn a_reply_range_tells_how_wide_the_write_was_whatever_its_values_leave_out() {
        assert_eq!(written_width("'_ジョブキュー'!A5:P5"), Some(16));
        assert_eq!(written_width("'_ジョブキュー'!A5:AB5"), Some(28));
        assert_eq!(written_width("'_ジョブキュー'!A5"), Some(1));
        assert_eq!(written_width("not a range"), None);
    }
}

/// How a job ended, as its panel row shows it.
fn panel_outcome(
    finish: Finish,
    at: DateTime<Utc>,
    url: &str,
    message: &str,
    next_run: Option<DateTime<Utc>>,
) -> PanelOutcome {
    PanelOutcome {
        state: finish_state(finish),
        finished_at: at,
        url: (!url.is_empty()).then(|| url.to_string()),
        message: message.to_string(),
        next_run,
    }
}

/// A write of a job's `_ジョブログ` row through its binding (`joblog::binding_id` of the
/// job's queue binding), sent with a values write that goes anyway.
#[derive(Debug, Clone)]
pub(super) struct LogWrite {
    job_id: String,
    id: i32,
    cells: Vec<(LogColumn, Cell)>,
    /// The job's last write (its result's): the binding goes once it landed.
    last: bool,
}
