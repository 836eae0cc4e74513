//! Writes through a row binding (docs/design.md §4): a result's or a follow-up's cells go to
//! the row Google finds by the binding when the write applies, the reply proves which row
//! that was, and a write that landed on another job's row is repaired from what the read
//! before showed. What is in doubt (a lost reply) is held until it shows or can no longer
//! apply.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use tracing::{error, info, warn};

use crate::a1;
use crate::binding::{self, WriteCheck};
use crate::queue::{Column, QueueRow, State};
use crate::sheet_time;
use crate::sheets::{Cell, Filter, FilterWrite, FilterWritten, ValueRange};

use super::job_log::LogWrite;
use super::ledger::REQUEST_LIMIT;
use super::{Daemon, DaemonError, Poll};

/// Writes through bindings waiting for a lease, in doubt, or landed and watched.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Bindings of finished (or abandoned) claims, removed with the next batch sent anyway.
    pub(super) unbind: Vec<i32>,
    /// Writes that set or restore a claim's cells (put-backs, restores, a timeout's cells,
    /// repairs), sent under the next lease we take (docs/design.md §4).
    pub(super) pending: Vec<Through>,
    /// Those writes, not sent again until they show on their rows or can no longer apply.
    pub(super) unsure: Vec<Through>,
    /// Results written lately, watched for a repair from an older read undoing them.
    pub(super) landed: Vec<(crate::outbox::FinishedJob, tokio::time::Instant)>,
    /// When a person's edit last moved rows under our claims or bindings (see
    /// [`Daemon::rows_moved`]).
    pub(super) rows_moved_at: Option<tokio::time::Instant>,
}

impl Daemon {
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
        let logs: Vec<LogWrite> = std::mem::take(&mut self.logs.writes)
            .into_iter()
            .filter(|l| self.served.layout.log.is_some() && !self.logs.dead.contains(&l.job_id))
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
        self.log_writes_landed(&logs, replies.get(base..).unwrap_or_default());
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
                        self.served.writes.unbind.push(t.id);
                    }
                    landed.push(t.job_id.clone());
                }
                WriteCheck::Missed => {
                    warn!(job.id = ?t.job_id, binding = t.id, "the row binding matched no row when the write was applied (row deleted?); resolving it afresh at the next pass");
                    missed.push(t.clone());
                }
                WriteCheck::Wrong { found_job_id } => {
                    missed.push(t.clone());
                    let ours = reply_row(reply)
                        .and_then(|r| written_here.get(&r))
                        .map_or(&[][..], Vec::as_slice);
                    repairs.extend(self.repair_for(poll, t, reply.as_ref(), found_job_id, ours));
                }
            }
        }
        self.keep_follow_ups(missed);
        self.repair(poll, repairs, under).await;
        Ok(landed)
    }

    /// A write through binding `t` landed on the row of job `found_job_id` (the reply
    /// `reply`): an incident, logged and counted, and the repair that gives that row its
    /// values back from `poll` (the read just before), unless the row changed since in a
    /// column none of our writes (`ours`: the columns this call wrote on that row) touched.
    fn repair_for(
        &mut self,
        poll: &Poll,
        t: &Through,
        reply: Option<&FilterWritten>,
        found_job_id: String,
        ours: &[Column],
    ) -> Option<Through> {
        self.rows_moved();
        self.report.write_incidents += 1;
        self.observers.metrics.write_incident();
        error!(
            job.id = ?t.job_id,
            binding = t.id,
            found = %found_job_id,
            range = reply.map(|w| w.range.as_str()).unwrap_or(""),
            "incident: a write through a row binding landed on another job's row (values moved under the binding); repairing that row"
        );
        let after = reply.and_then(|w| self.parse_row_at(&w.range, w.values.first()?));
        let before = poll.before_image(&found_job_id);
        // The reply covers the row only as wide as the write was (its range;
        // its values leave out trailing empty cells, which are empty, not unseen).
        let width = reply.and_then(|w| written_width(&w.range)).unwrap_or(0);
        let cols = &self.served.layout.columns;
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
            return None;
        }
        match before {
            Some(before) => Some(self.repair_of(t, found_job_id, &before)),
            None => {
                error!(job.id = ?found_job_id, "the row that was hit was not in the read just before; its cells cannot be restored");
                None
            }
        }
    }

    /// Gives rows that misplaced writes hit their values back (`repairs`, from the read just
    /// before), through the binding the write went through. A repair is itself a write
    /// through a binding, checked by its reply: one refused or missed is sent again, one that
    /// found yet another row (the values moved again) repairs that row too, for a few rounds.
    /// What is left is repaired at the next passes, through bindings of its own.
    pub(super) async fn repair(&mut self, poll: &Poll, mut repairs: Vec<Through>, under: Under) {
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
    pub(super) fn repair_later(&mut self, t: Through) {
        let (_, id) = binding::new_token();
        error!(job.id = ?t.job_id, cells = ?t.cells, "this row should show these values; repairing it at the next passes");
        self.served.writes.pending.push(Through {
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
                .jobs
                .running
                .values()
                .chain(&self.jobs.unsettled)
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
    pub(super) fn check_reply(&self, t: &Through, reply: Option<&FilterWritten>) -> WriteCheck {
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
    pub(super) fn repair_of(
        &self,
        t: &Through,
        found_job_id: String,
        before: &QueueRow,
    ) -> Through {
        let state_written = t
            .cells
            .iter()
            .find(|(c, _)| *c == Column::State)
            .map(|(_, v)| self.config.states.parse(&crate::queue::cell_text(v)));
        let state = match state_written {
            Some(written) => written,
            None => before.state.known(),
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
            .writes
            .pending
            .extend(through.into_iter().filter(|t| !t.result));
    }

    pub(super) fn bound_write(&self, id: i32, cells: &[(Column, Cell)]) -> FilterWrite {
        FilterWrite {
            filter: Filter::Metadata(id),
            values: vec![self.served.layout.columns.sparse_row(cells, Column::JobId)],
        }
    }

    /// Whether a write in doubt ([`Self::hold_in_doubt`]) goes through binding `id`.
    pub(super) fn in_doubt(&self, id: i32) -> bool {
        self.served.writes.unsure.iter().any(|t| t.id == id)
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
    pub(super) fn restore_values(
        &self,
        before: &QueueRow,
        cells: &[(Column, Cell)],
    ) -> Vec<(Column, Cell)> {
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
pub(super) fn written_width(range: &str) -> Option<usize> {
    Some(a1::A1Range::parse(range).ok()?.end_col? as usize)
}

/// The ワーカー text a row shows after a write of `cells` onto it (`before` as our read saw it).
pub(super) fn worker_after(before: &QueueRow, cells: &[(Column, Cell)]) -> String {
    cells
        .iter()
        .find(|(c, _)| *c == Column::Worker)
        .map(|(_, v)| crate::queue::cell_text(v))
        .unwrap_or_else(|| before.worker.clone())
}

/// The first `compared` column (one the write did not touch and its reply shows) whose value
/// differs between `before` (our read) and `after` (the row as the write left it): the row
/// changed after our read, so our read is no before-image to restore it from.
pub(super) fn changed_since(
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

impl Under {
    pub(super) fn send_by(self) -> Option<std::time::Instant> {
        match self {
            Under::Lease { send_by } => Some(send_by),
            Under::NoLease => None,
        }
    }

    pub(super) fn is_lease(self) -> bool {
        matches!(self, Under::Lease { .. })
    }
}

impl Daemon {
    /// Sends the follow-ups waiting since earlier passes (put-backs, restores, a timeout's
    /// cells, repairs) under the lease we hold, planned on `fresh` (read under it) and on
    /// the rows their bindings sit on now (one more read, also under it). No claim can
    /// come between that read and these writes, so none of them overwrites a claim made
    /// since the read (docs/design.md §4); one that a person's sort put on another row is
    /// repaired before the lease is released. A failure leaves them for the next pass.
    pub(super) async fn write_follow_ups(&mut self, fresh: &mut Poll) {
        if self.served.writes.pending.is_empty() && self.served.writes.unsure.is_empty() {
            return;
        }
        let mut ids: Vec<i32> = self
            .served
            .writes
            .pending
            .iter()
            .chain(&self.served.writes.unsure)
            .map(|t| t.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        match self.read_bound(&ids).await {
            Ok(bound) => fresh.bound.extend(bound),
            Err(e) => {
                warn!(error = %e, "could not read the rows of the follow-up writes; they wait for the next pass");
                return;
            }
        }
        self.settle_unsure(fresh);
        let follow_ups = std::mem::take(&mut self.served.writes.pending);
        if follow_ups.is_empty() {
            return;
        }
        let mut through = Vec::new();
        let mut rebind = Vec::new();
        self.place_follow_ups(fresh, follow_ups, &mut through, &mut rebind);
        if !rebind.is_empty() {
            self.rows_moved();
            if let Err(e) = self.rebind(&rebind).await {
                warn!(error = %e, "could not move the bindings of follow-up writes back; trying again at the next pass");
                self.keep_follow_ups(through);
                return;
            }
        }
        let left = self.lease_left().saturating_sub(self.config.lease_ttl / 4);
        let under = Under::Lease {
            send_by: std::time::Instant::now() + left,
        };
        if let Err(e) = self.write_through(fresh, through, Vec::new(), under).await {
            warn!(error = %e, "the follow-up writes failed; they are planned again at the next pass");
        }
    }

    /// Of `writes`, sent under the lease and failed in a way that leaves open whether
    /// Google applies them (it may, for up to its 180 s request limit), keeps those whose
    /// row is claimable (the repair of a row that a misplaced put-back turned 待機) and
    /// returns the others, to be sent again: their rows show a claim, so no one claims them
    /// meanwhile, and a second copy writes the same cells. A repair in doubt is not sent
    /// again until it shows on its row or can no longer apply (a second copy landing would
    /// look like the first), and the lease is kept until then: each of our commits renews
    /// it instead of releasing it, so no other daemon claims that row, which shows 待機 for
    /// a job that may have run already.
    pub(super) fn hold_in_doubt(&mut self, writes: Vec<Through>) -> Vec<Through> {
        let (claimable, again): (Vec<_>, Vec<_>) = writes
            .into_iter()
            .filter(|t| !t.result)
            .partition(|t| t.state == Some(State::Waiting));
        if claimable.is_empty() {
            return again;
        }
        warn!(
            writes = claimable.len(),
            "the repair of a row a misplaced put-back turned 待機 may still be applied by Google; keeping the lease until it shows on its row or can no longer apply"
        );
        let until = tokio::time::Instant::now() + REQUEST_LIMIT;
        self.served.lease.kept_until =
            Some(self.served.lease.kept_until.map_or(until, |u| u.max(until)));
        self.served.writes.unsure.extend(claimable);
        again
    }

    /// Settles the writes of [`Self::hold_in_doubt`] by `fresh` (read under the lease):
    /// one whose row shows its cells was applied and cannot apply again; once Google's
    /// request limit has passed, the rest never will be and are planned afresh. With none
    /// left, the lease is released by this pass's commit.
    pub(super) fn settle_unsure(&mut self, fresh: &Poll) {
        let expired = self
            .served
            .lease
            .kept_until
            .is_some_and(|until| tokio::time::Instant::now() >= until);
        let unsure = std::mem::take(&mut self.served.writes.unsure);
        let (applied, open): (Vec<_>, Vec<_>) = unsure.into_iter().partition(|t| {
            fresh
                .bound
                .get(&t.id)
                .and_then(Option::as_ref)
                .is_some_and(|r| r.job_id == t.job_id && self.shows(r, &t.cells))
        });
        for t in &applied {
            info!(job.id = ?t.job_id, binding = t.id, "a write whose reply was lost shows on its row: it was applied");
            if t.unbind {
                self.served.writes.unbind.push(t.id);
            }
        }
        if expired {
            for t in &open {
                warn!(job.id = ?t.job_id, binding = t.id, "a write whose reply was lost never showed on its row, and Google can no longer apply it; planning it afresh");
            }
            self.served.writes.pending.extend(open);
        } else {
            self.served.writes.unsure = open;
        }
        if self.served.writes.unsure.is_empty() && self.served.lease.kept_until.take().is_some() {
            info!("no write sent under the lease is in doubt any more; the lease is released");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::writeback::tests::row;
    use super::*;

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
