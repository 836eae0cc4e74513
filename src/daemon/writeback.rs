//! Write-back (DESIGN §4): finished results from the outbox go to the queue row found by jobId
//! in a fresh read (only while it is still our claim) and to the panel row found by label,
//! in one `values.batchUpdate`; plus restart recovery and continuation rows.

use chrono::{DateTime, Utc};
use tracing::{info, warn};

use crate::a1;
use crate::outbox::{Continuation, Finish, FinishedJob};
use crate::panel::{self, PanelOutcome};
use crate::queue::{Column, QueueRow, State, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{Cell, ValueRange};

use super::{Daemon, DaemonError, Poll};

impl Daemon {
    /// After a restart: rows still `実行中` under our id whose result is not in the outbox
    /// were cut off mid-job; they become `エラー` at once. Pending results are written.
    pub(super) async fn recover(&mut self) -> Result<(), DaemonError> {
        let poll = self.poll(true).await?;
        let now = Utc::now();
        let mut data = Vec::new();
        for row in &poll.snapshot.rows {
            let ours = row
                .worker_tag()
                .is_some_and(|t| t.daemon_id == self.config.worker_id);
            if ours && row.state.is(State::Running) && !self.outbox.contains(&row.job_id) {
                warn!(job.id = %row.job_id, row = row.row, "job was running when this worker stopped; marking it as failed");
                let message =
                    "エラー: ワーカーがジョブの実行中に再起動しました (worker restarted during the job)";
                data.extend(self.finish_cells(row.row, Finish::Error, now, "", message));
                data.extend(self.panel_result(&poll, row, Finish::Error, now, "", message));
            }
        }
        if !data.is_empty() {
            self.sheets.write(&data).await?;
        }
        let mut beat = Vec::new();
        self.heartbeat_into(&poll, &mut beat, true).await?;
        if !beat.is_empty() {
            self.sheets.write(&beat).await?;
        }
        self.flush(&poll, Vec::new()).await?;
        Ok(())
    }

    /// The waiting/running status cells that differ from what the panels show (at most 20),
    /// leaving out rows whose result is about to be written in the same call.
    pub(super) fn panel_display(&self, poll: &Poll) -> Vec<ValueRange> {
        let mut snapshot = poll.snapshot.clone();
        snapshot.rows.retain(|r| !self.outbox.contains(&r.job_id));
        panel::status_updates(
            &snapshot,
            &self.panels,
            &poll.tables,
            self.layout.tz,
            &self.config.panel,
            20,
        )
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
        match panel::locate(&self.panels, &poll.tables, row) {
            Ok((panel_ref, panel_row)) => {
                let outcome = PanelOutcome {
                    state: finish_state(finish),
                    finished_at: at,
                    url: (!url.is_empty()).then(|| url.to_string()),
                    message: message.to_string(),
                };
                Some(panel::result_cells(
                    panel_ref,
                    panel_row.row,
                    &outcome,
                    self.layout.tz,
                    &self.config.panel,
                ))
            }
            Err(miss) => {
                warn!(job.id = %row.job_id, target = %row.target_key(), "{miss}; only the queue row is written");
                None
            }
        }
    }

    /// Writes every pending result in one `values.batchUpdate`, each to the row that holds
    /// its jobId in `poll` (a read made just now) and only while that row's ワーカー still
    /// carries our claim; the panel rows, `display` (waiting/running texts) and a due
    /// heartbeat go in the same call. Returns whether the heartbeat went with it.
    pub(super) async fn flush(
        &mut self,
        poll: &Poll,
        display: Vec<ValueRange>,
    ) -> Result<bool, DaemonError> {
        let pending: Vec<FinishedJob> = self.outbox.pending().cloned().collect();
        // A row may have been sorted above the window: look in the whole queue then.
        let full;
        let poll = if !poll.full
            && pending
                .iter()
                .any(|j| poll.snapshot.by_job_id(&j.job_id).is_none())
        {
            full = self.poll(true).await?;
            &full
        } else {
            poll
        };
        let mut data = Vec::new();
        let mut settled = Vec::new();
        for job in &pending {
            // A copied row may carry the same jobId: ours is the one with our claim on it.
            let row = poll
                .snapshot
                .rows
                .iter()
                .find(|r| r.job_id == job.job_id && r.worker == job.worker)
                .or_else(|| poll.snapshot.by_job_id(&job.job_id));
            let Some(row) = row else {
                warn!(job.id = %job.job_id, target = %job.target, "the job's queue row is gone (deleted by a person?); only its panel row is written");
                data.extend(self.panel_result(
                    poll,
                    &job.as_row(),
                    job.finish,
                    job.finished_at,
                    &job.url,
                    &job.message,
                ));
                settled.push(job.job_id.clone());
                continue;
            };
            // A row timed out meanwhile keeps our ワーカー tag but is no longer ours to
            // finish: its タイムアウト stands, and its panel row may belong to a new press.
            if row.worker != job.worker || !row.state.is(State::Running) {
                warn!(
                    job.id = %job.job_id,
                    target = %job.target,
                    worker = %job.worker,
                    now = %row.worker,
                    state = ?row.state,
                    "the row no longer carries our running claim (timed out and maybe re-run); not overwriting it"
                );
                settled.push(job.job_id.clone());
                continue;
            }
            if let Some(cont) = &job.continuation {
                if poll.snapshot.by_job_id(&cont.job_id).is_none() {
                    self.append_continuation(job, cont).await?;
                }
            }
            data.extend(self.finish_cells(
                row.row,
                job.finish,
                job.finished_at,
                &job.url,
                &job.message,
            ));
            data.extend(self.panel_result(
                poll,
                row,
                job.finish,
                job.finished_at,
                &job.url,
                &job.message,
            ));
            settled.push(job.job_id.clone());
        }
        data.extend(display);
        let heartbeat = if data.is_empty() {
            false
        } else {
            let heartbeat = self.heartbeat_into(poll, &mut data, false).await?;
            self.sheets.write(&data).await?;
            heartbeat
        };
        self.outbox.done(settled.iter().map(String::as_str))?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        Ok(heartbeat)
    }

    pub(super) async fn append_continuation(
        &self,
        job: &FinishedJob,
        cont: &Continuation,
    ) -> Result<(), DaemonError> {
        let mut flags: Vec<String> = job
            .flags
            .iter()
            .filter(|f| *f != "continuation")
            .cloned()
            .collect();
        flags.push("continuation".into());
        let row = panel::NewJob {
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
        }
        .to_row(&self.layout.columns, &self.config.states, self.layout.tz);
        let range = a1::range(QUEUE_SHEET, &format!("A1:{}", self.layout.last_col));
        self.sheets.append(&range, &[row]).await?;
        info!(job.id = %job.job_id, next = %cont.job_id, target = %job.target, "appended a continuation row");
        Ok(())
    }

    /// The queue cells of a finished job: 状態, 終了日時, 結果URL, メッセージ.
    pub(super) fn finish_cells(
        &self,
        row: u32,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Vec<ValueRange> {
        let cols = &self.layout.columns;
        let state = finish_state(finish);
        [
            (Column::State, Cell::from(self.config.states.word(state))),
            (
                Column::FinishedAt,
                Cell::from(sheet_time::instant_to_serial(at, self.layout.tz)),
            ),
            (Column::ResultUrl, Cell::from(url)),
            (Column::Message, Cell::from(message)),
        ]
        .into_iter()
        .map(|(c, v)| ValueRange::new(cols.cell(c, row), vec![vec![v]]))
        .collect()
    }
}

pub(super) fn finish_state(finish: Finish) -> State {
    match finish {
        Finish::Done => State::Done,
        Finish::Error => State::Error,
        Finish::Timeout => State::Timeout,
    }
}
