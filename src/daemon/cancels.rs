//! The cancel room of the daemon: a waiting job someone asked to stop ends キャンセル in the
//! claim commit. Its entries in the commit (the swap 待機 → キャンセル and a binding on the
//! same row), how their replies settle (the job's end written through the binding, or the
//! swap undone when a sort moved the row), and the ■ ticks a pass takes in. The rule of
//! who asked and what the row then says is `crate::cancel`'s.

use chrono::Utc;
use tracing::{debug, info, warn};

use crate::binding;
use crate::cancel;
use crate::outbox::Finish;
use crate::queue::{Column, QueueRow, State};
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdateReply, Cell, Request, ValueRange};

use super::ledger::{cas, Landing, Ledger, Place};
use super::poll::Poll;
use super::writeback::{finish_state, Through};
use super::Daemon;

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

    /// Settles the cancels of a commit: a swap that hit the row it meant ended that job
    /// キャンセル, and its 終了日時/メッセージ follow through the binding made with it (under
    /// our next lease, like a timeout's) and its panel row says so; a swap that hit another
    /// waiting row (a sort moved the queue) is undone; a row that was no longer waiting is
    /// left alone, its request taken up again by the next pass that reads it waiting.
    /// Returns the undo requests.
    pub(super) fn settle_cancels(
        &mut self,
        fresh: &Poll,
        reply: &BatchUpdateReply,
        cancels: &[Cancelling],
        now: chrono::DateTime<Utc>,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) -> Vec<Request> {
        let tz = self.served.layout.tz;
        let state_col = self.served.layout.columns.index(Column::State);
        let qid = self.queue_sheet_id();
        let mut undo = Vec::new();
        for Cancelling {
            row,
            binding_id,
            place,
        } in cancels
        {
            let hit = self.row_read_back(reply, *place, row.row);
            match Landing::of(place.swapped(reply), hit.as_ref(), row) {
                Landing::Landed => {
                    let request = cancel::asked_of(row, tz, now)
                        .unwrap_or_else(|| cancel::Request::new("", now, &row.job_id));
                    let message = request.message(now, tz, "");
                    info!(job.id = ?row.job_id, target = %Logged(row.target_key()), by = %Logged(&request.who), "cancelled a waiting job; it never ran");
                    self.observers.metrics.cancel_asked();
                    let ended = (*binding_id, Finish::Cancelled, message);
                    self.end_unrun(fresh, row, ended, now, through, follow_up);
                }
                Landing::Moved { at, hit } => {
                    // The queue moved between the read and the commit: the swap cancelled
                    // another waiting job. Put it back to 待機.
                    warn!(job.id = ?hit, planned = ?row.job_id, "the queue moved during a cancel; putting the row that was hit back to waiting");
                    self.rows_moved();
                    undo.push(cas(
                        qid,
                        at,
                        state_col,
                        &self.config.states.cancelled,
                        &self.config.states.waiting,
                    ));
                    self.served.unbind.push(*binding_id);
                }
                Landing::Missed => {
                    debug!(job.id = ?row.job_id, "the row asked to stop was no longer waiting at the commit; the next pass looks again");
                    self.served.unbind.push(*binding_id);
                }
            }
        }
        undo
    }

    /// The end of a job that never ran, whose swap to its final state hit its row: its
    /// 終了日時/メッセージ follow through the binding made with the swap (`ended`: binding,
    /// finish, message), under our next lease like a timeout's; its panel row and its
    /// notifications say so.
    pub(super) fn end_unrun(
        &mut self,
        fresh: &Poll,
        row: &QueueRow,
        (id, finish, message): (i32, Finish, String),
        now: chrono::DateTime<Utc>,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) {
        through.push(Through {
            id,
            job_id: row.job_id.clone(),
            worker: row.worker.clone(),
            state: Some(finish_state(finish)),
            cells: self.finish_values(finish, now, "", &message),
            unbind: true,
            result: false,
        });
        follow_up.extend(self.panel_result(fresh, row, finish, now, "", &message));
        self.announce_ended(fresh, row, finish, &message, now);
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
                let ours = self.running.contains_key(&job);
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
