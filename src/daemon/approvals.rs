//! The approval room of the daemon: rows of functions with approvers change state in the
//! claim commit (docs/design.md §5.5). Their entries in the commit (the swap on 状態, and
//! for a final state a binding for its 終了日時/メッセージ), how their replies settle, and
//! the text a job awaiting approval shows. The rule (who approves, how many, when a request
//! expires) is `crate::approval`'s.

use chrono::Utc;
use chrono_tz::Tz;
use tracing::{debug, info, warn};

use crate::approval;
use crate::binding;
use crate::config::Intake;
use crate::notifications::Step;
use crate::outbox::Finish;
use crate::queue::{Column, QueueRow};
use crate::sheet_text::Logged;
use crate::sheets::Request;

use super::effects::{Effect, Metric};
use super::ledger::{cas, Landing, Ledger, Place, ReadBack};
use super::poll::Poll;
use super::Daemon;

/// A row a claim commit turns for its approvals (docs/design.md §5.5): its swap, and for a
/// final state the binding its 終了日時/メッセージ follow through.
pub(super) struct Turned {
    pub(super) row: QueueRow,
    pub(super) turn: approval::Turn,
    pub(super) binding_id: Option<i32>,
    pub(super) place: Place,
    /// For an expiry, the メッセージ it ends with (the function's rule, as the entry was
    /// made); empty otherwise.
    pub(super) expired: String,
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
            let expired = match turn {
                approval::Turn::Expire(tally) => (self.registry.catalog())
                    .approval_rule(&row.function)
                    .map(|r| approval::expired_message(&r, tally))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            turns.push(Turned {
                row: row.clone(),
                turn: turn.clone(),
                binding_id: bound.map(|(id, _)| id),
                place,
                expired,
            });
        }
        turns
    }

    /// The panel's 状態 of a job waiting for approval with `tally`: who asked, the count,
    /// the approvals that do not count, and with the poll intake how to approve.
    pub(super) fn approval_text(&self, row: &QueueRow, tally: &approval::Tally) -> String {
        let mut text = approval::waiting_text(row, tally);
        // What is asked to be approved: the inputs, fixed in the protected queue row.
        let inputs = self
            .registry
            .catalog()
            .inputs_text(&row.function, &row.args_json);
        if !inputs.is_empty() {
            text.push_str(&format!(
                " · {}",
                crate::sheet_text::one_line(&inputs, crate::panel::status::INPUTS_TEXT_MAX_CHARS)
            ));
        }
        // A rollout is approved once for all its targets: they are named.
        if let Some(targets) = self.rollout_targets(row) {
            text.push_str(&format!(" · {}", crate::rollout::targets_text(&targets)));
        }
        if self.config.intake == Intake::Poll {
            format!("{text} · {}", approval::POLL_HINT)
        } else {
            text
        }
    }
}

/// What the reply decides of the approval turns a commit made, each read at its own
/// place, as [`super::cancels::settle`] decides of cancels: a swap that hit the row it meant
/// is counted and announced, and a final state's 終了日時/メッセージ follow through its
/// binding; a swap that hit another row (a sort moved the queue) is undone; a row no longer
/// in the state planned is left for the next pass.
pub(super) fn settle(
    turns: &[Turned],
    read: &ReadBack,
    now: chrono::DateTime<Utc>,
    tz: Tz,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for t in turns {
        let (from, to) = t.turn.swap();
        let row = &t.row;
        match read.landing(t.place, row) {
            Landing::Landed => {
                effects.push(Effect::Metric(Metric::Approval(t.turn.label())));
                let announce = |step| Effect::Announce {
                    row: row.clone(),
                    step,
                };
                let finish = match &t.turn {
                    approval::Turn::Await(tally) => {
                        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), function = %Logged(&row.function), requester = %Logged(&row.requester), needed = tally.needed, "job awaits approval; it does not run before");
                        effects.push(announce(Step::Requested));
                        None
                    }
                    approval::Turn::Release => {
                        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), function = %Logged(&row.function), "job awaited approval, which its function needs no more; it waits to run");
                        None
                    }
                    approval::Turn::Approve(tally) => {
                        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), function = %Logged(&row.function), approved_by = %Logged(&tally.approved_by.join(", ")), "job approved; it waits to run");
                        effects.push(announce(Step::Approved));
                        None
                    }
                    approval::Turn::Reject(stop) => {
                        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), by = %Logged(&stop.who), "job rejected; it never ran");
                        Some((Finish::Rejected, approval::rejected_message(stop, now, tz)))
                    }
                    approval::Turn::Withdraw(stop) => {
                        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), by = %Logged(&stop.who), "job awaiting approval cancelled; it never ran");
                        effects.push(Effect::Metric(Metric::CancelAsked));
                        Some((Finish::Cancelled, stop.message(now, tz, "")))
                    }
                    approval::Turn::Expire(tally) => {
                        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), approvals = %tally.count_text(), "job not approved in time; it never ran");
                        Some((Finish::Expired, t.expired.clone()))
                    }
                };
                if let (Some((finish, message)), Some(binding)) = (finish, t.binding_id) {
                    effects.push(Effect::EndUnrun {
                        row: row.clone(),
                        binding,
                        finish,
                        message,
                    });
                }
            }
            Landing::Moved { at, hit } => {
                warn!(job.id = ?hit, planned = ?row.job_id, "the queue moved during an approval step; putting the row that was hit back");
                effects.push(Effect::RowsMoved);
                effects.push(Effect::Undo {
                    row: at,
                    from: to,
                    to: from,
                });
                effects.extend(t.binding_id.map(Effect::Unbind));
            }
            Landing::Missed => {
                debug!(job.id = ?row.job_id, "the row was no longer in the state its approval step expected; the next pass looks again");
                effects.extend(t.binding_id.map(Effect::Unbind));
            }
        }
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::super::ledger::tests::{reply_of, Entry, Fixture};
    use super::*;
    use crate::queue::State;

    fn tally(needed: usize) -> approval::Tally {
        approval::Tally {
            approved_by: Vec::new(),
            refused: Vec::new(),
            needed,
        }
    }

    fn turned(f: &mut Fixture, row: u32, turn: approval::Turn, binding_id: Option<i32>) -> Turned {
        let (from, _) = turn.swap();
        Turned {
            row: f.row(row, "j1", from),
            turn,
            binding_id,
            place: f.place(row),
            expired: String::new(),
        }
    }

    #[test]
    fn a_job_turned_awaiting_is_counted_and_announced_and_a_rejected_one_ends_unrun() {
        let now = Utc::now();
        let mut f = Fixture::default();
        let rejected = approval::Turn::Reject(crate::cancel::Request::new("boss", now, "j1"));
        let turns = [
            turned(&mut f, 3, approval::Turn::Await(tally(1)), None),
            turned(&mut f, 4, rejected, Some(44)),
        ];
        let reply = reply_of(
            &f,
            &[
                Entry::swapped(3, "j1", State::AwaitingApproval),
                Entry::swapped(4, "j1", State::Rejected),
            ],
        );
        let effects = settle(&turns, &f.read(&reply), now, chrono_tz::Asia::Tokyo);
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::Metric(Metric::Approval("requested")),
                    Effect::Announce {
                        step: Step::Requested,
                        ..
                    },
                    Effect::Metric(Metric::Approval(_)),
                    Effect::EndUnrun {
                        binding: 44,
                        finish: Finish::Rejected,
                        ..
                    },
                ]
            ),
            "{effects:?}"
        );
    }

    #[test]
    fn a_turn_a_sort_moved_is_swapped_back_and_its_binding_dropped() {
        let mut f = Fixture::default();
        let turns = [turned(
            &mut f,
            3,
            approval::Turn::Expire(tally(2)),
            Some(33),
        )];
        let reply = reply_of(&f, &[Entry::swapped(3, "j8", State::Expired)]);
        let effects = settle(&turns, &f.read(&reply), Utc::now(), chrono_tz::Asia::Tokyo);
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::RowsMoved,
                    Effect::Undo {
                        row: 3,
                        from: State::Expired,
                        to: State::AwaitingApproval
                    },
                    Effect::Unbind(33),
                ]
            ),
            "j8 must go back to awaiting approval: {effects:?}"
        );
    }
}
