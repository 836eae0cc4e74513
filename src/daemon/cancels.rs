//! The cancel room of the daemon: a waiting job someone asked to stop ends キャンセル in the
//! claim commit. Its entries in the commit (the swap 待機 → キャンセル and a binding on the
//! same row), how their replies settle (the job's end written through the binding, or the
//! swap undone when a sort moved the row), and the ■ ticks a pass takes in. The rule of
//! who asked and what the row then says is `crate::cancel`'s.

use chrono::Utc;
use chrono_tz::Tz;
use tracing::{debug, info, warn};

use crate::binding;
use crate::cancel;
use crate::outbox::Finish;
use crate::queue::{Column, QueueRow, State};
use crate::sheet_text::Logged;
use crate::sheets::{Cell, Request, ValueRange};

use super::effects::{Effect, Metric};
use super::ledger::{cas, Landing, Ledger, Place, ReadBack};
use super::poll::Poll;
use super::Daemon;

/// The stops asked of running jobs, and each job's token.
#[derive(Debug, Default)]
pub(super) struct Stops {
    /// Each running job's own token (a child of `job_cancel`): cancelled when someone asks
    /// to stop that job.
    pub(super) tokens: std::collections::HashMap<String, tokio_util::sync::CancellationToken>,
    /// Who asked to stop which running job, from the row's 中止要求 or a ■ tick: a job that
    /// ends stopped with a request here ends キャンセル, not エラー.
    pub(super) asked: std::collections::HashMap<String, crate::cancel::Request>,
    /// 中止要求 texts a job's own read before a retry found (`Retrying::asked_to_stop`), by
    /// jobId: taken up as `stop_asked` when the job ends.
    pub(super) read: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

impl Stops {
    /// The request to stop job `job_id`, now that it ended, and forgets its token: the one
    /// taken in from its row or a ■ tick, else the 中止要求 text the job's own read before a
    /// retry found (a request without a readable name and time is still one).
    pub(super) fn take(&mut self, job_id: &str, tz: Tz) -> Option<cancel::Request> {
        self.tokens.remove(job_id);
        let read_before_retry = (self.read.lock())
            .unwrap_or_else(|e| e.into_inner())
            .remove(job_id);
        self.asked.remove(job_id).or_else(|| {
            let text = read_before_retry?;
            cancel::Request::parse(&text, tz)
                .or_else(|| Some(cancel::Request::new("", Utc::now(), job_id)))
        })
    }
}

/// A waiting row a claim commit cancels: the binding its 終了日時/メッセージ follow through.
pub(super) struct Cancelling {
    pub(super) row: QueueRow,
    pub(super) binding_id: i32,
    pub(super) place: Place,
}

impl Daemon {
    /// The commit's entries of the waiting rows `indices` (into the fresh read) asked to
    /// stop: the tripwire 待機 → キャンセル, and a binding on the same row, through which its
    /// 終了日時/メッセージ follow once the read-back shows the swap hit the row it meant.
    pub(super) fn cancel_entries(
        &self,
        ledger: &mut Ledger,
        fresh: &Poll,
        indices: &[usize],
    ) -> Vec<Cancelling> {
        let (qid, cols) = (self.queue_sheet_id(), &self.served.layout.columns);
        let mut cancels = Vec::new();
        for index in indices {
            let row = &fresh.snapshot.rows[*index];
            let (token, binding_id) = binding::new_token();
            let place = ledger.row(
                cas(
                    qid,
                    row.row,
                    cols.index(Column::State),
                    &self.config.states.waiting,
                    &self.config.states.cancelled,
                ),
                [Request::BindRow {
                    sheet_id: qid,
                    row: row.row - 1,
                    id: binding_id,
                    key: binding::KEY.to_string(),
                    value: format!("{} cancel #{token}", self.config.worker_id),
                }],
                self.row_range(row.row),
            );
            cancels.push(Cancelling {
                row: row.clone(),
                binding_id,
                place,
            });
        }
        cancels
    }

    /// Takes in the ■ ticks of this pass (`asked`: per job, its 中止要求 text): the rows of
    /// `fresh` carry them from now on, so that this very pass cancels a waiting job in its
    /// commit and stops a job running here. A job another daemon runs learns of it from
    /// its row: the request is written into the row's 中止要求 in the commit (returned). That
    /// write goes by the row number of `fresh`, read under the lease; the text names its
    /// job, so should a person's sort put another row there meanwhile, it stops nothing on
    /// that row.
    pub(super) fn take_in_cancels(
        &self,
        fresh: &mut Poll,
        asked: Vec<(String, String)>,
    ) -> Vec<Request> {
        let columns = &self.served.layout.columns;
        let mut writes = Vec::new();
        for (job, text) in asked {
            for row in fresh.snapshot.rows.iter_mut().filter(|r| r.job_id == job) {
                row.cancel_request = text.clone();
                let ours = self.jobs.running.contains_key(&job);
                if !row.state.is(State::Running) || ours {
                    continue;
                }
                match columns.position(Column::CancelRequest) {
                    Some(_) => writes.extend(self.grid_write(&ValueRange::new(
                        columns.cell(Column::CancelRequest, row.row),
                        vec![vec![Cell::from(text.as_str())]],
                    ))),
                    None => warn!(
                        job.id = ?job,
                        worker = %Logged(&row.worker),
                        "a ■ tick asks to stop a job another daemon runs, but the queue has no {} column to tell it by; run `sheetq init` to add it",
                        self.config.headers.cancel_request
                    ),
                }
            }
        }
        writes
    }
}

/// What the reply decides of the cancels a commit made: a swap that hit the row it meant
/// ended that job キャンセル, and its 終了日時/メッセージ follow through the binding made
/// with it (under our next lease, like a timeout's) and its panel row says so; a swap that
/// hit another waiting row (a sort moved the queue) is undone; a row that was no longer
/// waiting is left alone, its request taken up again by the next pass that reads it waiting.
pub(super) fn settle(
    cancels: &[Cancelling],
    read: &ReadBack,
    now: chrono::DateTime<Utc>,
    tz: Tz,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for Cancelling {
        row,
        binding_id,
        place,
    } in cancels
    {
        match read.landing(*place, row) {
            Landing::Landed => {
                let request = cancel::asked_of(row, tz, now)
                    .unwrap_or_else(|| cancel::Request::new("", now, &row.job_id));
                info!(job.id = ?row.job_id, target = %Logged(row.target_key()), by = %Logged(&request.who), "cancelled a waiting job; it never ran");
                effects.push(Effect::Metric(Metric::CancelAsked));
                effects.push(Effect::EndUnrun {
                    row: row.clone(),
                    binding: *binding_id,
                    finish: Finish::Cancelled,
                    message: request.message(now, tz, ""),
                });
            }
            Landing::Moved { at, hit } => {
                // The queue moved between the read and the commit: the swap cancelled
                // another waiting job. Put it back to 待機.
                warn!(job.id = ?hit, planned = ?row.job_id, "the queue moved during a cancel; putting the row that was hit back to waiting");
                effects.push(Effect::RowsMoved);
                effects.push(Effect::Undo {
                    row: at,
                    from: State::Cancelled,
                    to: State::Waiting,
                });
                effects.push(Effect::Unbind(*binding_id));
            }
            Landing::Missed => {
                debug!(job.id = ?row.job_id, "the row asked to stop was no longer waiting at the commit; the next pass looks again");
                effects.push(Effect::Unbind(*binding_id));
            }
        }
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::super::ledger::tests::{reply_of, Entry, Fixture};
    use super::*;

    fn cancelling(f: &mut Fixture, row: u32, job: &str, binding_id: i32) -> Cancelling {
        Cancelling {
            row: f.row(row, job, State::Waiting),
            binding_id,
            place: f.place(row),
        }
    }

    #[test]
    fn a_cancel_that_hit_its_row_ends_the_job_unrun_through_its_binding() {
        let mut f = Fixture::default();
        let cancels = [cancelling(&mut f, 4, "j1", 41)];
        let reply = reply_of(&f, &[Entry::swapped(4, "j1", State::Cancelled)]);
        let effects = settle(
            &cancels,
            &f.read(&reply),
            Utc::now(),
            chrono_tz::Asia::Tokyo,
        );
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::Metric(Metric::CancelAsked),
                    Effect::EndUnrun { row, binding: 41, finish: Finish::Cancelled, .. },
                ] if row.job_id == "j1"
            ),
            "{effects:?}"
        );
    }

    #[test]
    fn a_cancel_a_sort_moved_is_undone_and_one_that_missed_only_drops_its_binding() {
        let mut f = Fixture::default();
        let cancels = [
            cancelling(&mut f, 4, "j1", 41),
            cancelling(&mut f, 5, "j2", 42),
        ];
        let reply = reply_of(
            &f,
            &[
                Entry::swapped(4, "j7", State::Cancelled),
                Entry::unchanged(5, "j2", State::Running),
            ],
        );
        let effects = settle(
            &cancels,
            &f.read(&reply),
            Utc::now(),
            chrono_tz::Asia::Tokyo,
        );
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::RowsMoved,
                    Effect::Undo {
                        row: 4,
                        from: State::Cancelled,
                        to: State::Waiting
                    },
                    Effect::Unbind(41),
                    Effect::Unbind(42),
                ]
            ),
            "j7 goes back to waiting; j2, claimed first, is left to run: {effects:?}"
        );
    }
}
