//! The poll loop and its pass: each pass reads, writes back what finished, decides whether
//! to claim ([`super::claim_work::ClaimWork`]) and what else is due (archive, idle panels,
//! fences, the heartbeat alone), and paces the next poll (docs/design.md §2, §6).

use std::time::Duration as StdDuration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::outbox::FinishedJob;
use crate::queue;
use crate::sheets::{ErrorKind, Precedence};
use crate::workers;

use super::claim_work::ClaimWork;
use super::fleet::pid_alive;
use super::poll::Poll;
use super::serve::{next_reload, START_STEP_LIMIT};
use super::start::{queue_protection, trust_queue};
use super::{
    claim_policy, start_pace, Daemon, DaemonError, Reload, RunReport, MAX_LAYOUT_FAILURES,
    RESTART_ONLY,
};

/// What the passes keep for their own pace.
pub(super) struct PassState {
    /// How many polls the passes have read: the first, which takes in the presses made
    /// while this daemon started, goes ahead of plain calls (sheets::turns).
    pub(super) polls: u64,
    /// The last read showed [`PRESSING`] presses or more waiting here (rows 待機, ticks)
    /// that this daemon acts on: this spreadsheet's calls go ahead of those on which less
    /// waits (sheets::turns).
    pub(super) pressing: bool,
    /// The read start-up ended with, for the first pass, when start-up wrote nothing after
    /// it ([`Daemon::recover`]).
    pub(super) start_poll: Option<Poll>,
    /// Re-discover panels and re-read the whole queue at the next pass (the layout changed).
    pub(super) relayout: bool,
    /// When a poll last showed work here (rows waiting or ticked, jobs of ours running,
    /// results or follow-ups to write): quiet spreadsheets are polled less often.
    pub(super) busy_at: tokio::time::Instant,
    /// The last pass's write-back was refused (400): the layout and protections are read
    /// afresh for the next, and a second refusal in a row fails the pass.
    pub(super) write_refused: bool,
}

impl PassState {
    /// Before the first poll: nothing read, work seen now (polls start at their pace).
    pub(super) fn new() -> Self {
        PassState {
            polls: 0,
            pressing: false,
            start_poll: None,
            relayout: false,
            busy_at: tokio::time::Instant::now(),
            write_refused: false,
        }
    }
}

impl Daemon {
    pub(super) async fn run(
        &mut self,
        shutdown: CancellationToken,
    ) -> Result<RunReport, DaemonError> {
        info!(worker = %self.config.worker_id, slots = self.config.slots, "sheetq daemon started");
        // What `sheetq check` finds without a request: programs missing on the jobs' PATH,
        // an unwritable state_dir, a budget above Google's quota, a clock off Google's.
        crate::check::log_at_start(&self.config, &self.registry, self.sheets.as_ref());
        if !self.config.worker_id_is_set {
            warn!(
                worker = %self.config.worker_id,
                "worker_id is not set, so it changes with every restart and a restarted daemon cannot recognise the jobs it was running (they time out after dead_after instead); set worker_id (or SHEETQ_WORKER_ID) to a stable name"
            );
        }
        let idle_per_minute = 60.0 / self.config.poll_interval.as_secs_f64();
        if idle_per_minute > f64::from(self.config.requests_per_minute) {
            warn!(
                poll_interval = ?self.config.poll_interval,
                requests_per_minute = self.config.requests_per_minute,
                "idle polls alone need {idle_per_minute:.0} requests a minute, more than the budget: polls will wait for it; raise poll_interval"
            );
        }
        let mut ready = false;
        let mut failures = 0;
        let mut fatal = None;
        let mut first = true;
        let mut reloads = self.observers.reloads.take();
        loop {
            self.observers.health.loop_turned();
            let (next, period) = self.next_poll(first);
            self.observers.health.turn_planned(next.into_std(), period);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                reload = next_reload(&mut reloads) => {
                    self.reload(&reload).await;
                    continue;
                }
                _ = tokio::time::sleep_until(next) => { first = false; }
                Some(joined) = self.jobs.tasks.join_next(), if !self.jobs.tasks.is_empty() => {
                    self.finished(joined)?;
                    continue;
                }
            }
            match self.pass().await {
                Ok(()) => {
                    self.served_again();
                    self.observers.health.poll_completed();
                    self.observers
                        .metrics
                        .poll_succeeded(std::time::SystemTime::now());
                    if !ready {
                        ready = true;
                        start_pace::cleared(&self.config.state_dir);
                        if let Err(e) = self.observers.notifier.ready() {
                            warn!(error = %e, "cannot tell the service manager we are ready");
                        }
                    }
                }
                Err(DaemonError::Sheets(e)) if e.is_retryable() => {
                    warn!(error = %e, "poll failed; trying again at the next tick");
                    if !ready {
                        // Still starting (READY=1 waits for a first pass that works).
                        let more = self.config.poll_interval + START_STEP_LIMIT;
                        if let Err(e) = self.observers.notifier.extend_timeout(more) {
                            debug!(error = %e, "cannot ask the service manager for more time to start");
                        }
                    }
                    let mut why = e.to_string();
                    why.truncate(why.char_indices().nth(120).map_or(why.len(), |(i, _)| i));
                    self.tell_status(&format!("poll failed, retrying: {why}"));
                }
                // A person renamed or deleted a panel, inserted a queue column or deleted rows
                // since the last discovery: look at the spreadsheet afresh next time. Only a
                // problem that outlives that is fatal, and even then jobs are drained first.
                Err(e) if e.may_be_layout_change() && failures < MAX_LAYOUT_FAILURES => {
                    failures += 1;
                    warn!(error = %e, attempt = failures, "the spreadsheet changed under the poll; re-reading its layout");
                    self.served.pass.relayout = true;
                    continue;
                }
                Err(other) if other.ends_the_process() => {
                    error!(error = %other, "stopping: only the VM's operator can put this right");
                    fatal = Some(other);
                    break;
                }
                // Whatever a person did to the spreadsheet (a protection over sheetq's own
                // sheets, a sheet or header gone, its sharing withdrawn) costs this
                // spreadsheet, for a while, never the process nor its other spreadsheets.
                Err(other) => {
                    self.hold_off(&other);
                    continue;
                }
            }
            failures = 0;
        }
        self.observers.health.set_stopping();
        if let Err(e) = self.observers.notifier.stopping() {
            debug!(error = %e, "cannot tell the service manager we are stopping");
        }
        self.tell_status(&format!(
            "stopping: {} running job(s) get up to {} to finish",
            self.jobs.running.len(),
            humantime::format_duration(self.config.shutdown_grace)
        ));
        self.drain().await?;
        match fatal {
            Some(e) => Err(e),
            None => Ok(self.report.clone()),
        }
    }

    /// Takes up a config read anew (docs/design.md §5): commands, functions and targets,
    /// intake, timing, budget and retention apply from the next pass on; running jobs go
    /// on as they started. A setting of [`RESTART_ONLY`] that changed is named and keeps
    /// its running value.
    pub(super) async fn reload(&mut self, reload: &Reload) {
        // Who may press is honoured only on a protected queue: read its protection afresh
        // (one read, only on a reload), and refuse a config that asks for `allow` without it.
        let registry = match self.sheets.metadata().await {
            Ok(meta) => {
                let protection = queue_protection(&meta, self.sheets.as_ref(), &reload.config);
                match trust_queue(reload.registry.clone(), &reload.config, protection) {
                    Ok(registry) => registry,
                    Err(e) => {
                        error!(error = %e, "the config was not reloaded, the one in force stays");
                        return;
                    }
                }
            }
            Err(e) if reload.registry.catalog().needs_protected_queue() => {
                error!(error = %e, "the config was not reloaded, the one in force stays: its allow or approvers need the queue's protection, which could not be read; send SIGHUP again");
                return;
            }
            Err(e) => {
                warn!(error = %e, "could not read the queue's protection; continuation steps keep the trust they had");
                reload
                    .registry
                    .clone()
                    .with_queue_protected(self.registry.queue_protected())
            }
        };
        let new = &reload.config;
        let old = &self.config;
        let changed: Vec<&str> = [
            old.spreadsheet_id != new.spreadsheet_id,
            old.credentials != new.credentials,
            old.api_base_url != new.api_base_url,
            old.worker_id != new.worker_id,
            old.state_dir != new.state_dir,
            old.slots != new.slots,
            old.call_timeout != new.call_timeout,
            old.max_retries != new.max_retries,
            old.headers != new.headers || old.states != new.states,
            old.panel != new.panel,
        ]
        .iter()
        .zip(RESTART_ONLY)
        .filter(|(changed, _)| **changed)
        .map(|(_, name)| name)
        .collect();
        if !changed.is_empty() {
            warn!(settings = ?changed, "the reloaded config changes settings that need a restart (systemctl restart sheetq); they keep their running values");
        }
        self.config = Config {
            commands: new.commands.clone(),
            catalog: new.catalog.clone(),
            intake: new.intake,
            poll_interval: new.poll_interval,
            idle_poll_interval: new.idle_poll_interval,
            heartbeat_interval: new.heartbeat_interval,
            stale_after: new.stale_after,
            dead_after: new.dead_after,
            lease_ttl: new.lease_ttl,
            shutdown_grace: new.shutdown_grace,
            requests_per_minute: new.requests_per_minute,
            sweep_rows: new.sweep_rows,
            retention: new.retention,
            notify: new.notify.clone(),
            schedules: new.schedules.clone(),
            ..self.config.clone()
        };
        self.announcer.set_channels(self.config.notify.clone());
        self.registry = registry;
        self.policy = claim_policy(&self.config);
        // The account's budget is split again at the next pass, from the new total.
        self.served.fleet.sharing = 0;
        self.panel_opener.set_config(self.config.clone());
        info!(
            commands = self.registry.names().count(),
            functions = self.config.catalog.functions.len(),
            targets = self.config.catalog.targets.len(),
            running = self.jobs.running.len(),
            "reloaded the config; running jobs go on as they started"
        );
    }

    /// `STATUS=` for `systemctl status`, when it changed.
    pub(super) fn tell_status(&mut self, text: &str) {
        if self.status_sent == text {
            return;
        }
        if let Err(e) = self.observers.notifier.status(text) {
            debug!(error = %e, "cannot send the status line to the service manager");
        }
        self.status_sent = text.to_string();
    }

    /// One tick: read, write back what finished (with the panels' waiting/running display and
    /// the heartbeat in the same call), claim what fits, take in ticked boxes.
    pub(super) async fn pass(&mut self) -> Result<(), DaemonError> {
        self.take_ended()?;
        // A poll with work of our own behind it (a job running, whose result this very pass
        // may write back; results to write; a claim to finish under the lease), and the first
        // one, which takes in the presses made while this daemon started, wait for the
        // account's budget ahead of the other spreadsheets' plain polls (sheets::turns):
        // someone is waiting on them. Those of a spreadsheet where the last read showed
        // several presses waiting go first: the commit they lead to serves them all.
        self.sheets
            .set_precedence(self.precedence(self.served.pass.polls == 0 || self.has_work()));
        if std::mem::take(&mut self.served.pass.relayout) {
            self.discover_panels().await?;
            self.find_window().await?;
        }
        // The first pass goes on the read start-up ended with, when nothing was written
        // since: made a moment ago, a second one would cost a read and show the same.
        let poll = match self.served.pass.start_poll.take() {
            Some(poll) => poll,
            None => {
                self.served.pass.polls += 1;
                self.poll(false).await?
            }
        };
        // Jobs that ended while the read waited for its turn (a busy account's budget holds it
        // for seconds) are written back by this pass: the read looked up their rows, as it
        // looks up every running job's.
        self.take_ended()?;
        // Before anything is planned on it: a row that says it is a continuation step is
        // one only by sheetq's mark.
        self.learn_marks(&poll).await;
        self.report_row_problems(&poll);
        self.report_refused_approvals(&poll);
        // Someone else now writes the heartbeat row of our worker_id: two processes share
        // it, and neither may touch the other's jobs. Stop claiming (jobs drain first).
        if let workers::IdCheck::InUse(e) = workers::check_worker_id(
            &poll.workers,
            &self.config.worker_id,
            &self.process,
            self.config.dead_after,
            pid_alive,
        ) {
            return Err(e.into());
        }
        self.settle_unsettled(&poll);
        self.stop_asked_jobs(&poll.snapshot);
        self.stop_asked_by_heartbeat(&poll);
        self.expire_holds(&poll);
        self.share_budget(&poll);
        self.watch_budget();
        // The waiting/running texts of the panels ride on a write sent anyway: the write-back
        // when it has results or a heartbeat to send, else the claim commit, else they wait
        // (recomputed) for the next pass that writes. They never cost a write of their own.
        let (wrote_heartbeat, deferred, flushed_at) = self.write_back_step(&poll).await?;
        let elsewhere = self.running_elsewhere(&poll);
        // The rows whose results this pass just wrote are planned on as the write left them:
        // a target freed by a result is claimed in this very pass (whose lease call reads the
        // queue afresh), not a poll later.
        let written = self.as_written(&poll.snapshot, flushed_at);
        let plan = self.plan_claims(&written, &poll.watched, &elsewhere);
        // Several presses wait here, and this daemon acts on them now or as soon as a job of
        // its ends: ticks to take in, rows to claim, or jobs of ours running. Rows that wait
        // for other daemons' jobs do not make our polls pressing.
        self.served.pass.pressing = self.presses_waiting(&poll) >= PRESSING
            && (self.has_ticks(&poll) || self.has_work() || !plan.claims.is_empty());
        let mut wrote_heartbeat = wrote_heartbeat;
        // A claim commit whose reply was lost is fenced by taking our lease back at once:
        // its job then settles (runs, or waits to be claimed again) without waiting out
        // Google's 180 s request limit.
        let open_commit = !self.jobs.unsettled.is_empty();
        // Follow-ups go out under the lease, and a lease we keep is renewed or released by
        // a claim pass.
        let under_lease =
            !self.served.writes.pending.is_empty() || self.served.lease.kept_until.is_some();
        let work = ClaimWork {
            schedules: !self.schedules_due(&poll, Utc::now()).is_empty(),
            rollouts: self.rollouts_due(&poll),
            ticks: self.has_ticks(&poll),
            open_commit,
            under_lease,
            ..ClaimWork::of_plan(&plan)
        };
        if work.any() {
            // Presses, results or a held lease wait on it: its calls go ahead of plain ones.
            self.sheets.set_precedence(self.precedence(true));
            wrote_heartbeat |= self.claim_pass(&poll, &written, deferred).await?;
        } else if self.kept_lease_blocks(&poll, &written, &plan) {
            self.release_kept().await;
        } else if self.archive_due() {
            self.archive_pass(&poll).await?;
        } else if self.idle_check_due() {
            self.hide_idle_panels(&poll).await?;
        }
        self.sheets.set_precedence(Precedence::Plain);
        if self.fence_sweep_due() {
            self.sweep_fences().await;
        }
        if !wrote_heartbeat && self.heartbeat_due() {
            self.heartbeat_alone(&poll).await?;
        } else if self.sheets_overdue() {
            // Busy: the heartbeat rides the write-backs and commits, whose replies carry no
            // sheet list, so it is read (one call a few minutes) to notice new panels.
            let meta = self.sheets.metadata().await?;
            self.retrust(&meta);
            self.take_in_protections(&meta);
            self.take_in_sheets(meta.sheets);
        }
        self.after_pass(&poll);
        Ok(())
    }

    /// What a pass leaves for the next: whether work was seen (the pace of the polls), and
    /// the status line.
    fn after_pass(&mut self, poll: &Poll) {
        let waiting = poll
            .snapshot
            .rows
            .iter()
            .filter(|r| r.state.is(queue::State::Waiting))
            .count();
        if waiting > 0 || self.has_ticks(poll) || self.has_work() {
            self.served.pass.busy_at = tokio::time::Instant::now();
        }
        let bound = if self.served.fleet.budget_bound {
            "slowed by the account's request budget; "
        } else {
            ""
        };
        let label = match self.config.label.as_str() {
            "" => String::new(),
            l => format!("{l}: "),
        };
        self.tell_status(&format!(
            "{label}{bound}polling: {}/{} slots busy, {waiting} waiting, {} result(s) to write",
            self.jobs.running.len(),
            self.config.slots,
            self.outbox.len()
        ));
    }

    /// The write-back of a pass: the results in the outbox and a heartbeat due, with the
    /// panels' waiting/running texts riding along (they never cost a write of their own:
    /// without a write-back they are returned, deferred, for the claim commit). A write-back
    /// that fails must not stop claiming: its results wait in the outbox. Returns whether
    /// the heartbeat went, the texts deferred, and when the write was sent.
    async fn write_back_step(
        &mut self,
        poll: &Poll,
    ) -> Result<(bool, Vec<crate::sheets::ValueRange>, tokio::time::Instant), DaemonError> {
        let display = self.panel_display(poll);
        // The first heartbeat, due since start-up, rides the claim commit when this pass
        // sends one (presses to take in, rows to claim) rather than a write of its own.
        let first_beat_rides = || {
            self.served.fleet.last_heartbeat.is_none()
                && (self.has_ticks(poll)
                    || !(self.plan_claims(
                        &poll.snapshot,
                        &poll.watched,
                        &self.running_elsewhere(poll),
                    ))
                    .claims
                    .is_empty())
        };
        let writing_back = !self.outbox.is_empty() || (self.heartbeat_due() && !first_beat_rides());
        let (display, deferred) = if writing_back {
            (display, Vec::new())
        } else {
            (Vec::new(), display)
        };
        // A write-back that fails must not stop claiming: its results wait in the outbox.
        let flushed_at = tokio::time::Instant::now();
        let refused_before = std::mem::take(&mut self.served.pass.write_refused);
        let wrote_heartbeat = match self.flush(poll, display).await {
            Ok(wrote) => wrote,
            // Refused too: a bound row deleted between the read and the write makes Google
            // refuse the whole write. The next poll resolves every result afresh.
            // Refused twice in a row, the cells left out did not help: the pass fails, and the
            // loop holds the spreadsheet off if that goes on.
            Err(DaemonError::Sheets(e))
                if e.is_retryable()
                    || (e.kind == ErrorKind::InvalidArgument && !refused_before) =>
            {
                warn!(error = %e, pending = self.outbox.len(), "could not write results; they stay in the outbox and are resolved afresh at the next poll");
                // Refused for a cell someone protected since the last look: the next pass
                // reads the protections (and the layout) afresh, and leaves those cells out.
                if e.kind == ErrorKind::InvalidArgument {
                    self.served.pass.relayout = true;
                    self.served.pass.write_refused = true;
                }
                false
            }
            Err(e) => return Err(e),
        };
        Ok((wrote_heartbeat, deferred, flushed_at))
    }

    /// How this spreadsheet's next calls wait for the account's budget (sheets::turns):
    /// pressing while several presses wait here, urgent when `urgent` (a press or a result
    /// waits on them), else plain.
    pub(super) fn precedence(&self, urgent: bool) -> Precedence {
        if self.served.pass.pressing {
            Precedence::Pressing
        } else if urgent {
            Precedence::Urgent
        } else {
            Precedence::Plain
        }
    }

    /// Takes every job that has ended into the outbox ([`Self::finished`]), without waiting.
    pub(super) fn take_ended(&mut self) -> Result<(), DaemonError> {
        while let Some(joined) = self.jobs.tasks.try_join_next() {
            self.finished(joined)?;
        }
        Ok(())
    }

    /// `snapshot` as the results that landed since `since` left it: their rows (those still
    /// holding our claim) read in their final state. Only a plan reads it; the claim pass
    /// that plan starts decides on its own fresh read.
    pub(super) fn as_written<'a>(
        &self,
        snapshot: &'a queue::Snapshot,
        since: tokio::time::Instant,
    ) -> std::borrow::Cow<'a, queue::Snapshot> {
        let written: Vec<&FinishedJob> = (self.served.writes.landed.iter())
            .filter(|(_, at)| *at >= since)
            .map(|(job, _)| job)
            .collect();
        if written.is_empty() {
            return std::borrow::Cow::Borrowed(snapshot);
        }
        let mut after = snapshot.clone();
        for row in &mut after.rows {
            let ours = |j: &&&FinishedJob| j.job_id == row.job_id && j.worker == row.worker;
            if let Some(job) = written.iter().find(ours) {
                row.state = queue::RowState::Known(job.finish.state());
            }
        }
        std::borrow::Cow::Owned(after)
    }

    /// When the next poll is due. The live daemons of one account take turns: each polls every
    /// `poll_interval × n` (n of them), at its own phase (`rank × poll_interval`) on the wall
    /// clock, so the group reads the queue about once per `poll_interval` whatever its size,
    /// and their reads do not bunch up. The first poll is at once. Also returns the period:
    /// how far apart this daemon's polls are now.
    pub(super) fn next_poll(&self, first: bool) -> (tokio::time::Instant, StdDuration) {
        let now = tokio::time::Instant::now();
        // A spreadsheet held off is tried again once its wait is over, and not before.
        if let Some(held) = self.served.held_off.filter(|h| h.until > now) {
            return (held.until, held.wait);
        }
        if first {
            return (now, self.config.poll_interval);
        }
        // Work of our own (a job running, a result to write) keeps the pace, also while
        // passes fail: a result must not wait out idle_poll_interval once the API is back.
        let quiet_for = if self.has_work() {
            StdDuration::ZERO
        } else {
            self.served.pass.busy_at.elapsed()
        };
        let pace = pace(
            quiet_for,
            self.config.poll_interval,
            self.config.idle_poll_interval,
        );
        let sharing = self.served.fleet.sharing.max(1);
        let period = poll_period(
            pace,
            self.config.poll_interval,
            self.config.heartbeat_interval,
            sharing,
        );
        let n = u64::from(sharing);
        let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(n);
        let phase = (period_ms / n).saturating_mul(u64::from(self.served.fleet.rank) % n);
        let wall = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0);
        let into = (wall + period_ms - phase % period_ms) % period_ms;
        let next = now + StdDuration::from_millis(period_ms - into);
        // A schedule's next occurrence (by this machine's clock) does not wait for a quiet
        // spreadsheet's slow polls: the poll after it comes a second past it.
        let occurrence = self.next_occurrence(Utc::now()).and_then(|at| {
            let until = (at - Utc::now()).to_std().ok()?;
            Some(now + until + StdDuration::from_secs(1))
        });
        (occurrence.map_or(next, |o| o.min(next)), period)
    }

    /// Whether this daemon has work of its own on the spreadsheet: jobs running or waiting
    /// for their commit's outcome, results or follow-ups to write, a lease kept.
    pub(super) fn has_work(&self) -> bool {
        !self.jobs.running.is_empty()
            || !self.jobs.unsettled.is_empty()
            || !self.outbox.is_empty()
            || !self.served.writes.pending.is_empty()
            || !self.served.writes.unsure.is_empty()
            || self.served.lease.kept_until.is_some()
    }
}

/// How long to wait between polls of a spreadsheet that has been `quiet_for` without work:
/// `poll_interval` while it has work and for a while after, then a tenth of the quiet time,
/// up to `longest` (`idle_poll_interval`). A poll that sees work brings it back to
/// `poll_interval` at once.
pub(super) fn pace(
    quiet_for: StdDuration,
    poll_interval: StdDuration,
    longest: StdDuration,
) -> StdDuration {
    (quiet_for / 10).clamp(poll_interval, longest.max(poll_interval))
}

/// The period of one daemon's polls when `sharing` daemons of its account take turns, each
/// at its own phase: `pace` × `sharing`. A quiet spreadsheet's spacing ([`pace`]) never
/// stretches it past what the turns take at `poll_interval`, or `heartbeat_interval` if that
/// is longer: a heartbeat goes out with a poll, and the other daemons judge liveness by it.
pub(super) fn poll_period(
    pace: StdDuration,
    poll_interval: StdDuration,
    heartbeat_interval: StdDuration,
    sharing: u32,
) -> StdDuration {
    let n = sharing.max(1);
    (pace * n).min((poll_interval * n).max(heartbeat_interval))
}

/// How many presses waiting (rows 待機 and ticks) make a spreadsheet's calls pressing
/// ([`Precedence::Pressing`]): more than the one a quiet spreadsheet's press makes.
pub(super) const PRESSING: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_spreadsheet_is_polled_less_often_up_to_idle_poll_interval() {
        let s = StdDuration::from_secs;
        let (poll, idle) = (s(2), s(30));
        assert_eq!(pace(s(0), poll, idle), poll, "work just seen");
        assert_eq!(
            pace(s(20), poll, idle),
            poll,
            "still quiet only for a while"
        );
        assert_eq!(pace(s(60), poll, idle), s(6), "a tenth of the quiet time");
        assert_eq!(
            pace(s(3600), poll, idle),
            idle,
            "never longer than idle_poll_interval"
        );
        assert_eq!(
            pace(s(3600), poll, poll),
            poll,
            "idle_poll_interval = poll_interval: as before"
        );
    }

    #[test]
    fn spacing_never_lets_a_heartbeat_lapse_however_many_daemons_take_turns() {
        let s = StdDuration::from_secs;
        let (poll, beat) = (s(2), s(30));
        assert_eq!(
            poll_period(poll, poll, beat, 3),
            s(6),
            "turns at poll_interval, as before"
        );
        assert_eq!(
            poll_period(poll, poll, beat, 20),
            s(40),
            "as before, many daemons"
        );
        assert_eq!(poll_period(s(30), poll, beat, 1), s(30));
        assert_eq!(
            poll_period(s(30), poll, beat, 4),
            beat,
            "four quiet daemons would each poll every 2 min, past dead_after's 2 heartbeats"
        );
        assert_eq!(poll_period(s(30), poll, beat, 20), s(40));
    }
}
