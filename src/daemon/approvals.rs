//! The approval room of the daemon: rows of functions with approvers change state in the
//! claim commit (docs/design.md §5.5). Their entries in the commit (the swap on 状態, and
//! for a final state a binding for its 終了日時/メッセージ), how their replies settle, and
//! the text a job awaiting approval shows. The rule (who approves, how many, when a request
//! expires) is `crate::approval`'s.

use chrono::Utc;
use tracing::{debug, info, warn};

use crate::approval;
use crate::binding;
use crate::config::Intake;
use crate::notifications::Step;
use crate::outbox::Finish;
use crate::queue::{Column, QueueRow};
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdateReply, Request, ValueRange};

use super::ledger::{cas, Landing, Ledger, Place};
use super::poll::Poll;
use super::writeback::Through;
use super::Daemon;

/// A row a claim commit turns for its approvals (docs/design.md §5.5): its swap, and for a
/// final state the binding its 終了日時/メッセージ follow through.
pub(super) struct Turned {
    pub(super) row: QueueRow,
    pub(super) turn: approval::Turn,
    pub(super) binding_id: Option<i32>,
    pub(super) place: Place,
}

impl Daemon {
    /// The commit's entries of the approval turns `planned` (indices into the fresh read):
    /// the swap on 状態, and for a final state a binding on the same row for its
    /// 終了日時/メッセージ, as for a cancel.
    pub(super) fn turn_entries(
        &self,
        ledger: &mut Ledger,
        fresh: &Poll,
        planned: &[(usize, approval::Turn)],
    ) -> Vec<Turned> {
        let (qid, cols) = (self.queue_sheet_id(), &self.served.layout.columns);
        let mut turns = Vec::new();
        for (index, turn) in planned {
            let row = &fresh.snapshot.rows[*index];
            let (from, to) = turn.swap();
            let bound = to.is_final().then(|| {
                let (token, binding_id) = binding::new_token();
                let bind = Request::BindRow {
                    sheet_id: qid,
                    row: row.row - 1,
                    id: binding_id,
                    key: binding::KEY.to_string(),
                    value: format!("{} approval #{token}", self.config.worker_id),
                };
                (binding_id, bind)
            });
            let place = ledger.row(
                cas(
                    qid,
                    row.row,
                    cols.index(Column::State),
                    self.config.states.word(from),
                    self.config.states.word(to),
                ),
                bound.as_ref().map(|(_, bind)| bind.clone()),
                self.row_range(row.row),
            );
            turns.push(Turned {
                row: row.clone(),
                turn: turn.clone(),
                binding_id: bound.map(|(id, _)| id),
                place,
            });
        }
        turns
    }

    /// Settles the approval turns of a commit, each read at its own place in the reply, as
    /// [`Self::settle_cancels`] settles cancels: a swap that hit the row it meant is logged,
    /// counted and announced, and a final state's 終了日時/メッセージ follow through its
    /// binding; a swap that hit another row (a sort moved the queue) is undone; a row no
    /// longer in the state planned is left for the next pass. Returns the undo requests.
    pub(super) fn settle_turns(
        &mut self,
        fresh: &Poll,
        reply: &BatchUpdateReply,
        turns: &[Turned],
        now: chrono::DateTime<Utc>,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) -> Vec<Request> {
        let tz = self.served.layout.tz;
        let state_col = self.served.layout.columns.index(Column::State);
        let qid = self.queue_sheet_id();
        let mut undo = Vec::new();
        for t in turns {
            let (from, to) = t.turn.swap();
            let row = &t.row;
            let hit = self.row_read_back(reply, t.place, row.row);
            match Landing::of(t.place.swapped(reply), hit.as_ref(), row) {
                Landing::Landed => {
                    self.observers.metrics.approval(t.turn.label());
                    let finish = match &t.turn {
                        approval::Turn::Await(tally) => {
                            info!(job.id = ?row.job_id, target = %Logged(row.target_key()), function = %Logged(&row.function), requester = %Logged(&row.requester), needed = tally.needed, "job awaits approval; it does not run before");
                            self.announce_step(fresh, row, Step::Requested, now);
                            None
                        }
                        approval::Turn::Release => {
                            info!(job.id = ?row.job_id, target = %Logged(row.target_key()), function = %Logged(&row.function), "job awaited approval, which its function needs no more; it waits to run");
                            None
                        }
                        approval::Turn::Approve(tally) => {
                            info!(job.id = ?row.job_id, target = %Logged(row.target_key()), function = %Logged(&row.function), approved_by = %Logged(&tally.approved_by.join(", ")), "job approved; it waits to run");
                            self.announce_step(fresh, row, Step::Approved, now);
                            None
                        }
                        approval::Turn::Reject(stop) => {
                            info!(job.id = ?row.job_id, target = %Logged(row.target_key()), by = %Logged(&stop.who), "job rejected; it never ran");
                            Some((Finish::Rejected, approval::rejected_message(stop, now, tz)))
                        }
                        approval::Turn::Withdraw(stop) => {
                            info!(job.id = ?row.job_id, target = %Logged(row.target_key()), by = %Logged(&stop.who), "job awaiting approval cancelled; it never ran");
                            self.observers.metrics.cancel_asked();
                            Some((Finish::Cancelled, stop.message(now, tz, "")))
                        }
                        approval::Turn::Expire(tally) => {
                            let rule = self.registry.catalog().approval_rule(&row.function);
                            let message = rule
                                .map(|r| approval::expired_message(&r, tally))
                                .unwrap_or_default();
                            info!(job.id = ?row.job_id, target = %Logged(row.target_key()), approvals = %tally.count_text(), "job not approved in time; it never ran");
                            Some((Finish::Expired, message))
                        }
                    };
                    if let (Some((finish, message)), Some(id)) = (finish, t.binding_id) {
                        self.end_unrun(fresh, row, (id, finish, message), now, through, follow_up);
                    }
                }
                Landing::Moved { at, hit } => {
                    warn!(job.id = ?hit, planned = ?row.job_id, "the queue moved during an approval step; putting the row that was hit back");
                    self.rows_moved();
                    undo.push(cas(
                        qid,
                        at,
                        state_col,
                        self.config.states.word(to),
                        self.config.states.word(from),
                    ));
                    self.served.unbind.extend(t.binding_id);
                }
                Landing::Missed => {
                    debug!(job.id = ?row.job_id, "the row was no longer in the state its approval step expected; the next pass looks again");
                    self.served.unbind.extend(t.binding_id);
                }
            }
        }
        undo
    }

    /// The panel's 状態 of a job waiting for approval with `tally`: who asked, the count,
    /// the approvals that do not count, and with the poll intake how to approve.
    pub(super) fn approval_text(&self, row: &QueueRow, tally: &approval::Tally) -> String {
        let text = approval::waiting_text(row, tally);
        if self.config.intake == Intake::Poll {
            format!("{text} · {}", approval::POLL_HINT)
        } else {
            text
        }
    }
}
