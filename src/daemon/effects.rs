//! What the sections of a claim commit ask for once its reply is read, and the one applier
//! that carries it out. Each room (stale rows, claims, cancels, approval turns) decides
//! from the reply alone, as a pure function returning [`Effect`]s; [`Daemon::apply`] is the
//! only place where those decisions touch the daemon: slots, tasks, bindings, follow-up
//! writes, notices and metrics.

use chrono::Utc;
use tracing::{info, warn};

use crate::notifications::Step;
use crate::outbox::Finish;
use crate::queue::{Column, QueueRow, State, WorkerTag};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{Cell, Request, ValueRange};

use super::ledger::cas;
use super::poll::Poll;
use super::through::Through;
use super::{Claimed, Daemon};

/// One thing a settled entry asks of the daemon.
#[derive(Debug)]
pub(super) enum Effect {
    /// Run a job the commit claimed.
    Spawn(Claimed),
    /// Give back a slot the commit reserved and nothing runs in.
    FreeSlot(u32),
    /// A person's edit moved rows under the commit (see `Daemon::rows_moved`).
    RowsMoved,
    /// Put sheet row `row`'s 状態 back from `from` to `to`: a swap that hit another row.
    Undo { row: u32, from: State, to: State },
    /// Remove binding `id` with the next batch sent anyway.
    Unbind(i32),
    /// A job that never ran ended with our swap (cancelled, rejected, withdrawn, expired):
    /// its 終了日時/メッセージ follow through binding `binding`, under our next lease; its
    /// panel row and its notices say so.
    EndUnrun {
        row: QueueRow,
        binding: i32,
        finish: Finish,
        message: String,
    },
    /// A stale running job our swap ended: its target stays held until the job could have
    /// ended on its own, its 終了日時/メッセージ follow through its claim's binding, its panel
    /// row and its notices say so.
    EndStale {
        row: QueueRow,
        finish: Finish,
        message: String,
    },
    /// A claimed row whose target is busy goes back to 待機: its claim cells and the
    /// commit's link cleared.
    PutBack(QueueRow),
    /// Our claim's 開始日時/ワーカー landed on `row`, which was not waiting: give it its own
    /// values back.
    GiveBack { row: QueueRow, tag: WorkerTag },
    /// Write cells through a binding, under our next lease (a rollout's progress).
    Follow(Through),
    /// Tell the job's notification channels of a step.
    Announce { row: QueueRow, step: Step },
    /// Count an event.
    Metric(Metric),
}

/// The counters a settle moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Metric {
    /// Someone's request to stop a job took effect.
    CancelAsked,
    /// An approval step, by its `sheetq_approvals_total` outcome label.
    Approval(&'static str),
    /// A claim the commit's read-back showed was not ours.
    ClaimConflict,
}

/// What applying a commit's effects leaves to be written: follow-ups through bindings
/// (under our next lease), A1 writes and panel texts (with the next write), and the undo
/// swaps (sent at once).
#[derive(Debug, Default)]
pub(super) struct Writes {
    pub(super) through: Vec<Through>,
    pub(super) follow_up: Vec<ValueRange>,
    pub(super) undo: Vec<Request>,
}

impl Daemon {
    /// Carries out `effects`, the decisions of a commit read on `fresh`, into `writes`.
    pub(super) fn apply(
        &mut self,
        fresh: &Poll,
        effects: Vec<Effect>,
        now: chrono::DateTime<Utc>,
        writes: &mut Writes,
    ) {
        for effect in effects {
            self.apply_one(fresh, effect, now, writes);
        }
    }

    fn apply_one(
        &mut self,
        fresh: &Poll,
        effect: Effect,
        now: chrono::DateTime<Utc>,
        writes: &mut Writes,
    ) {
        let Writes {
            through,
            follow_up,
            undo,
        } = writes;
        match effect {
            Effect::Spawn(claimed) => self.spawn(claimed),
            Effect::FreeSlot(slot) => self.slots.give(slot),
            Effect::RowsMoved => self.rows_moved(),
            Effect::Undo { row, from, to } => undo.push(cas(
                self.queue_sheet_id(),
                row,
                self.served.layout.columns.index(Column::State),
                self.config.states.word(from),
                self.config.states.word(to),
            )),
            Effect::Unbind(id) => self.served.writes.unbind.push(id),
            Effect::EndUnrun {
                row,
                binding,
                finish,
                message,
            } => {
                through.push(Through {
                    id: binding,
                    job_id: row.job_id.clone(),
                    worker: row.worker.clone(),
                    state: Some(finish.state()),
                    cells: self.finish_values(finish, now, "", &message),
                    unbind: true,
                    result: false,
                });
                follow_up.extend(self.panel_result(fresh, &row, finish, now, "", &message));
                self.announce_ended(fresh, &row, finish, &message, now);
            }
            Effect::EndStale {
                row,
                finish,
                message,
            } => {
                self.hold(&row, &fresh.watched);
                // Its 終了日時/メッセージ go through its binding when it has one (any daemon's
                // claim token names it), never to a row number from this read.
                let mut cells = self.finish_values(finish, now, "", &message);
                // Its 結果URL is empty or the claim's link to its log row: left as it is.
                cells.retain(|(c, _)| *c != Column::ResultUrl);
                let ended = Some(finish.state());
                self.follow_up(&row, ended, cells, through, follow_up);
                follow_up.extend(self.panel_result(fresh, &row, finish, now, "", &message));
                // Its daemon is gone (or cut off): this swap, which only one daemon's commit
                // can make, is the job's end as the sheet shows it.
                self.announce_ended(fresh, &row, finish, &message, now);
            }
            Effect::PutBack(row) => {
                let mut cells =
                    self.claim_values(Some(&self.config.states.waiting), &Cell::from(""), "");
                // The commit's link to a log row that will not be filled goes too.
                cells.push((Column::ResultUrl, Cell::from("")));
                self.follow_up(&row, Some(State::Running), cells, through, follow_up);
            }
            Effect::Follow(t) => through.push(t),
            Effect::GiveBack { row, tag } => self.give_back(fresh, &row, &tag, writes),
            Effect::Announce { row, step } => self.announce_step(fresh, &row, step, now),
            Effect::Metric(Metric::CancelAsked) => self.observers.metrics.cancel_asked(),
            Effect::Metric(Metric::Approval(outcome)) => self.observers.metrics.approval(outcome),
            Effect::Metric(Metric::ClaimConflict) => {
                self.report.claim_conflicts += 1;
                self.observers.metrics.claim_conflict();
            }
        }
    }

    /// Our 開始日時/ワーカー landed on `row`, which was not waiting (the queue moved): give it
    /// back the values it had, through the binding that landed with them.
    fn give_back(&mut self, fresh: &Poll, row: &QueueRow, tag: &WorkerTag, writes: &mut Writes) {
        let Some(before) = fresh.before_image(&row.job_id) else {
            // It came from above the unfinished window, so its old values were not read: say
            // so rather than guess.
            warn!(
                job.id = ?row.job_id,
                row = row.row,
                worker = %tag,
                "a sort moved a finished row under a claim; its 開始日時/ワーカー now show this claim"
            );
            return;
        };
        let started = before
            .started_at
            .map(|t| Cell::from(sheet_time::instant_to_serial(t, self.served.layout.tz)))
            .unwrap_or_else(|| Cell::from(""));
        let mut cells = self.claim_values(None, &started, &before.worker);
        // The commit wrote its link formula over the row's 結果URL too.
        cells.push((Column::ResultUrl, Cell::from(before.result_url.as_str())));
        info!(job.id = ?row.job_id, row = row.row, worker = %Logged(&before.worker), claim = %tag, "giving the row our claim landed on its 開始日時/ワーカー back");
        self.follow_up(row, None, cells, &mut writes.through, &mut writes.follow_up);
    }
}
