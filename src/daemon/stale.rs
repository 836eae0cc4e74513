//! The stale-rows room of the daemon (docs/design.md §3.1): a running row whose daemon is
//! gone or whose claim stood still too long ends in the claim commit. Its entry there (the
//! swap 実行中 → タイムアウト, or キャンセル when someone had asked to stop it) and what
//! the commit's reply decides of it ([`settle`], pure): the job's end as the sheet shows
//! it, or an undo when a sort put another running row under the swap. Which rows are stale
//! is `crate::claim`'s rule.

use chrono::Utc;
use tracing::warn;

use crate::cancel;
use crate::claim;
use crate::outbox::Finish;
use crate::queue::{Column, QueueRow, State};
use crate::sheet_text::Logged;

use super::effects::{Effect, Metric};
use super::ledger::{cas, Ledger, Place, ReadBack};
use super::poll::Poll;
use super::Daemon;

/// A running row a claim commit ends: timed out, or cancelled when someone asked to stop it.
#[derive(Debug)]
pub(super) struct Ended {
    pub(super) row: QueueRow,
    pub(super) finish: Finish,
    pub(super) message: String,
    pub(super) place: Place,
}

impl Daemon {
    /// The commit's entries of the stale rows `planned` (on the fresh read): each row's swap
    /// from 実行中 to its end. A row someone asked to stop, whose daemon is gone, ends
    /// キャンセル: it is rescued as any dead daemon's row, and the request still holds.
    pub(super) fn stale_entries(
        &self,
        ledger: &mut Ledger,
        fresh: &Poll,
        planned: &[claim::Stale],
        now: chrono::DateTime<Utc>,
    ) -> Vec<Ended> {
        let tz = self.served.layout.tz;
        let state_col = self.served.layout.columns.index(Column::State);
        let mut stale = Vec::new();
        for s in planned {
            let row = &fresh.snapshot.rows[s.index];
            let reason = s.reason.message(&self.policy);
            let (finish, message) = match cancel::asked_of(row, tz, now) {
                Some(request) => (
                    Finish::Cancelled,
                    request.message(now, tz, &format!("{}\n({reason})", cancel::UNCONFIRMED)),
                ),
                None => (Finish::Timeout, reason),
            };
            let place = ledger.row(
                cas(
                    self.queue_sheet_id(),
                    row.row,
                    state_col,
                    &self.config.states.running,
                    self.config.states.word(finish.state()),
                ),
                [],
                self.row_range(row.row),
            );
            stale.push(Ended {
                row: row.clone(),
                finish,
                message,
                place,
            });
        }
        stale
    }
}

/// What the reply decides of the stale rows a commit ended: a swap that hit the row it
/// meant is the job's end (its target held until the job could have ended on its own); a
/// swap that hit another running row (the queue moved) is undone; a swap that changed
/// nothing leaves the row to whoever changed it first.
pub(super) fn settle(stale: &[Ended], read: &ReadBack) -> Vec<Effect> {
    let mut effects = Vec::new();
    for ended in stale {
        let (row, finish) = (&ended.row, ended.finish);
        if !read.swapped(ended.place) {
            continue;
        }
        match read.row(ended.place, row.row) {
            Some(hit) if hit.job_id != row.job_id => {
                warn!(job.id = ?hit.job_id, planned = ?row.job_id, "the queue moved during a timeout; restoring the row that was hit");
                effects.push(Effect::RowsMoved);
                effects.push(Effect::Undo {
                    row: hit.row,
                    from: finish.state(),
                    to: State::Running,
                });
            }
            _ => {
                warn!(job.id = ?row.job_id, target = %Logged(row.target_key()), reason = %ended.message, state = ?finish.state(), "ended a stale job; its target stays busy until the job could have ended on its own");
                if finish == Finish::Cancelled {
                    effects.push(Effect::Metric(Metric::CancelAsked));
                }
                effects.push(Effect::EndStale {
                    row: row.clone(),
                    finish,
                    message: ended.message.clone(),
                });
            }
        }
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::super::ledger::tests::{reply_of, Entry, Fixture};
    use super::*;

    fn ended(fixture: &mut Fixture, row: u32, job: &str, finish: Finish) -> Ended {
        Ended {
            row: fixture.row(row, job, State::Running),
            finish,
            message: "stood still".into(),
            place: fixture.place(row),
        }
    }

    #[test]
    fn a_stale_row_our_swap_hit_ends_and_a_cancel_asked_for_it_is_counted() {
        let mut f = Fixture::default();
        let stale = [
            ended(&mut f, 2, "j1", Finish::Timeout),
            ended(&mut f, 3, "j2", Finish::Cancelled),
        ];
        let reply = reply_of(
            &f,
            &[
                Entry::swapped(2, "j1", State::Timeout),
                Entry::swapped(3, "j2", State::Cancelled),
            ],
        );
        let effects = settle(&stale, &f.read(&reply));
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::EndStale { row: a, finish: Finish::Timeout, .. },
                    Effect::Metric(Metric::CancelAsked),
                    Effect::EndStale { row: b, finish: Finish::Cancelled, .. },
                ] if a.job_id == "j1" && b.job_id == "j2"
            ),
            "each stale job ends as planned: {effects:?}"
        );
    }

    #[test]
    fn a_swap_a_sort_put_on_another_running_row_is_undone_and_one_that_missed_is_left() {
        let mut f = Fixture::default();
        let stale = [
            ended(&mut f, 2, "j1", Finish::Timeout),
            ended(&mut f, 3, "j2", Finish::Timeout),
        ];
        let reply = reply_of(
            &f,
            &[
                Entry::swapped(2, "j9", State::Timeout),
                Entry::unchanged(3, "j2", State::Done),
            ],
        );
        let effects = settle(&stale, &f.read(&reply));
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::RowsMoved,
                    Effect::Undo {
                        row: 2,
                        from: State::Timeout,
                        to: State::Running
                    },
                ]
            ),
            "j9 goes back to running, and j2 (finished first) is left alone: {effects:?}"
        );
    }
}
