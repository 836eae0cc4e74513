//! The archive pass: under the lease, rows at the top of the queue that are past the
//! retention move to `_ジョブ履歴` in one atomic batch ([`crate::archive`]), which also adds
//! their number to the count in `_ワーカー!D1`, so every daemon moves its window up by as many
//! rows at its next poll. A row a person moved into the batch's way goes back to the queue.
//! Rows of `_ジョブログ` whose 終了日時 is past the retention are deleted in the same batch,
//! and output files under `state_dir/logs` as old are removed.

use std::time::Duration as StdDuration;

use chrono::Utc;
use tracing::{info, warn};

use crate::a1;
use crate::archive::{self, ARCHIVE_SHEET};
use crate::lease::{self, WORKER_SHEET};
use crate::queue::{self, Column, QueueRow, QUEUE_SHEET};
use crate::sheets::{BatchUpdate, Cell, GridRange, Request, ValueRange};

use super::{Daemon, DaemonError, Poll};

/// How this daemon paces its looks for rows to archive.
#[derive(Debug, Default)]
pub(super) struct Pace {
    /// The count of archived rows (`_ワーカー!D1`) as last read: when it grows, rows left the
    /// top of the queue and the window moves up by as many.
    pub(super) seen: Option<u64>,
    /// When this daemon last looked for rows to archive.
    pub(super) at: Option<tokio::time::Instant>,
    /// The last look moved a full batch: look again at the next pass.
    pub(super) more: bool,
    /// No row can be past the retention before this: start-up found no finished row, so
    /// every row that finishes did so after it (this daemon's clock alone decides).
    pub(super) not_before: Option<tokio::time::Instant>,
    /// The archive's counter showed rows moved at start-up: the archive may hold a row to
    /// put back, so its passes are never put off.
    pub(super) before: bool,
}

/// The columns an archive decision reads: whose row, its state, when it finished.
const ARCHIVE_COLUMNS: [Column; 3] = [Column::JobId, Column::State, Column::FinishedAt];

/// How often the top of the queue is looked at for rows past the retention, unless the last
/// look moved a full batch (then the next pass looks again).
const ARCHIVE_EVERY: StdDuration = StdDuration::from_secs(600);

/// What one archive pass found to do, from its read under the lease.
struct ArchiveWork {
    /// Runs of rows past the retention, to move.
    runs: Vec<archive::Run>,
    /// How many rows they hold.
    moving: u32,
    /// Archive rows (1-based) holding an unfinished job: to go back to the queue.
    in_flight: Vec<u32>,
    /// Where each queue column goes in the archive.
    plan: archive::ColumnPlan,
    /// The count of rows archived so far (`_ワーカー!D1`).
    counted: u64,
    /// How many queue rows the look covered.
    looked_at: u32,
    /// Runs of `_ジョブログ` rows past the retention (zero-based, half-open), bottom first.
    log_runs: Vec<(u32, u32)>,
}

impl Daemon {
    /// Whether this pass should look for rows to archive.
    pub(super) fn archive_due(&self) -> bool {
        let now = tokio::time::Instant::now();
        self.config.retention.is_some()
            && self.served.archive.not_before.is_none_or(|t| now >= t)
            && (self.served.archive.more
                || self
                    .served
                    .archive
                    .at
                    .is_none_or(|t| t.elapsed() >= ARCHIVE_EVERY))
    }

    /// One archive pass: take the lease reading the first [`archive::BATCH_ROWS`] queue rows,
    /// the count and the top of the archive; in one fenced batch, put back into the queue
    /// every archive row that should not be there (an unfinished or young job a person's
    /// sort moved into an earlier batch's way, found unfinished there: in flight, never
    /// deleted), move the rows past the retention, and release the lease. A row the
    /// batch's read-back shows should not have moved is put back by the next pass, which
    /// follows at once.
    pub(super) async fn archive_pass(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        let Some(retention) = self.config.retention else {
            return Ok(());
        };
        self.served.archive.at = Some(tokio::time::Instant::now());
        self.served.archive.more = false;
        let retention = chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
        let archive_id = match self.served.sheets.ids.get(ARCHIVE_SHEET) {
            Some(id) => *id,
            None => self.create_archive().await?,
        };
        let Some((lease, reply)) = self.take_lease(poll, self.archive_read()).await? else {
            return Ok(());
        };
        let held = lease.to_string();
        let now = Utc::now();
        // The jobs of a rollout still open stay: it counts them from their rows.
        let keep = self.open_rollout_jobs(&poll.snapshot);
        let work = self.archive_work(&reply.ranges, now, retention, &keep);
        if let Some(retention) = self.config.retention {
            let running = |job: &str| self.logs.outputs.contains_key(job);
            match crate::joblog::sweep_files(&self.config.state_dir, retention, &running) {
                Ok(0) => {}
                Ok(n) => info!(files = n, "removed job output files past the retention"),
                Err(e) => {
                    warn!(error = %e, "could not look for job output files past the retention")
                }
            }
        }
        if work.moving == 0 && work.in_flight.is_empty() && work.log_runs.is_empty() {
            self.release(&held).await;
            return Ok(());
        }
        // Put-backs go into fresh rows after the last row of the queue.
        let at = poll.snapshot.rows.iter().map(|r| r.row).max().unwrap_or(1);
        let requests = self.archive_requests(&held, archive_id, &work, at);
        if let Some(moved) = self.send_archive(requests, &held, &work).await {
            self.settle_archive(&moved.ranges, &work, now, retention);
        }
        Ok(())
    }

    /// What an archive pass reads with its lease: the decision's three columns of the
    /// first [`archive::BATCH_ROWS`] queue rows (the cells move on the server, so the rows
    /// themselves are not needed), the count, both header rows (they say where each column
    /// goes), and the top of the archive.
    fn archive_read(&self) -> Vec<String> {
        let queue_cols = |c: Column| self.served.layout.columns.index(c);
        let mut read = self.archive_columns(QUEUE_SHEET, 2, 1 + archive::BATCH_ROWS, queue_cols);
        read.push(a1::range(WORKER_SHEET, archive::COUNTER_CELLS));
        read.push(a1::range(QUEUE_SHEET, "1:1"));
        read.push(a1::range(ARCHIVE_SHEET, "1:1"));
        let archive_last = self
            .served
            .sheets
            .meta
            .sheet(ARCHIVE_SHEET)
            .map_or_else(|| "A".to_string(), |s| s.last_column());
        read.push(a1::range(
            ARCHIVE_SHEET,
            &format!("A2:{archive_last}{}", 1 + archive::BATCH_ROWS),
        ));
        if let Some(log) = &self.served.layout.log {
            for c in [
                crate::joblog::LogColumn::FinishedAt,
                crate::joblog::LogColumn::StartedAt,
            ] {
                let l = a1::column_letters(log.index(c));
                read.push(a1::range(crate::joblog::LOG_SHEET, &format!("{l}2:{l}")));
            }
        }
        read
    }

    /// What the read under the lease (`ranges`, as [`Self::archive_read`] asked) says to do.
    fn archive_work(
        &self,
        ranges: &[ValueRange],
        now: chrono::DateTime<Utc>,
        retention: chrono::Duration,
        keep: &std::collections::HashSet<String>,
    ) -> ArchiveWork {
        let (rows, looked_at) = self.archive_rows(ranges, 2);
        let runs = archive::runs(&rows, now, retention, keep);
        let moving: u32 = runs.iter().map(|r| r.job_ids.len() as u32).sum();
        let after = |k: usize| ranges.get(ARCHIVE_COLUMNS.len() + k);
        let counted = after(0)
            .and_then(|v| v.values.first())
            .and_then(|r| r.get(1))
            .and_then(count_of)
            .unwrap_or(0);
        let header_of = |k: usize| {
            after(k)
                .and_then(|v| v.values.first().cloned())
                .unwrap_or_default()
        };
        let queue_header = header_of(1);
        // The grid as last listed, or the header if a person widened it since.
        let width = self.queue_width().max(queue_header.len() as u32);
        let plan = archive::column_plan(&queue_header, &header_of(2), width);
        let in_flight = self.in_flight(after(3), &plan, width);
        // A log row leaves when it ended before the retention, or (no end: its job's daemon
        // died, or the row was never filled) started before it.
        let log_runs = match (after(4), after(5)) {
            (Some(ends), Some(starts)) if self.served.layout.log.is_some() => {
                let tz = self.served.layout.tz;
                let at = |v: &ValueRange, i: usize| {
                    v.values
                        .get(i)
                        .and_then(|r| r.first())
                        .and_then(|c| crate::sheet_time::cell_to_instant(c, tz).ok().flatten())
                };
                let rows = ends.values.len().max(starts.values.len());
                let old: Vec<bool> = (0..rows)
                    .map(|i| {
                        at(ends, i)
                            .or_else(|| at(starts, i))
                            .is_some_and(|t| t < now - retention)
                    })
                    .collect();
                crate::joblog::runs_of(&old, 1)
            }
            _ => Vec::new(),
        };
        ArchiveWork {
            runs,
            moving,
            in_flight,
            plan,
            counted,
            looked_at,
            log_runs,
        }
    }

    /// The archive batch, fenced like a claim commit (once the lease is taken over, nothing
    /// of it applies): the archive widened and its header completed as `work.plan` says,
    /// the put-backs into fresh rows after queue row `at` (below every run that moves), the
    /// runs bottom first, the count, and the lease's release.
    fn archive_requests(
        &self,
        held: &str,
        archive_id: i32,
        work: &ArchiveWork,
        at: u32,
    ) -> Vec<Request> {
        let plan = &work.plan;
        let mut requests = vec![lease::fence(self.served.layout.worker_sheet_id, held)];
        if let Some(narrow) = self
            .served
            .sheets
            .meta
            .sheet(ARCHIVE_SHEET)
            .filter(|a| (a.column_count as u32) < plan.archive_width)
        {
            requests.push(Request::SetColumnCount {
                sheet_id: narrow.sheet_id,
                columns: plan.archive_width as i32,
            });
        }
        requests.extend(
            plan.new_header
                .iter()
                .map(|(col, name)| Request::UpdateCells {
                    range: GridRange {
                        sheet_id: archive_id,
                        start_row: 0,
                        end_row: 1,
                        start_col: *col,
                        end_col: col + 1,
                    },
                    rows: vec![vec![Cell::from(name.as_str())]],
                }),
        );
        let queue_id = self.served.layout.queue_sheet_id;
        requests.extend(archive::put_back_requests(
            &work.in_flight,
            archive_id,
            queue_id,
            at,
            plan,
        ));
        requests.extend(archive::requests(&work.runs, queue_id, archive_id, plan));
        if let Some(log) = &self.served.layout.log {
            requests.extend(
                work.log_runs
                    .iter()
                    .map(|(start, end)| Request::DeleteRows {
                        sheet_id: log.sheet_id,
                        start: *start,
                        end: *end,
                    }),
            );
        }
        requests.push(Request::UpdateCells {
            range: GridRange {
                sheet_id: self.served.layout.worker_sheet_id,
                start_row: 0,
                end_row: 1,
                start_col: 2,
                end_col: 4,
            },
            rows: vec![vec![
                Cell::from(archive::COUNTER_LABEL),
                Cell::from(work.counted + u64::from(work.moving)),
            ]],
        });
        requests.push(lease::swap(
            self.served.layout.worker_sheet_id,
            held,
            lease::FREE,
        ));
        requests
    }

    /// Sends the archive batch while the lease holds, reading back the archive's top rows.
    /// `None` when it did not apply, or may not have: nothing is lost either way (the batch
    /// applies whole or not at all), and the next look starts afresh.
    async fn send_archive(
        &mut self,
        requests: Vec<Request>,
        held: &str,
        work: &ArchiveWork,
    ) -> Option<crate::sheets::BatchUpdateReply> {
        let left = self.lease_left().saturating_sub(self.config.lease_ttl / 4);
        let read_back = self.archive_columns(ARCHIVE_SHEET, 2, 1 + work.moving, |c| {
            let q = self.served.layout.columns.index(c);
            work.plan.archive_col(q).unwrap_or(q)
        });
        let moved = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges: read_back,
                sheet_list: false,
                send_by: Some(std::time::Instant::now() + left),
            })
            .await;
        match moved {
            Ok(m) => {
                self.served
                    .lease
                    .fences
                    .push((lease::fence_id(held), tokio::time::Instant::now()));
                Some(m)
            }
            Err(e) if lease::is_fenced(&e.message, held) => {
                warn!(
                    rows = work.moving,
                    "the lease was taken over before the archive batch applied; nothing moved"
                );
                None
            }
            Err(e) => {
                // The lease runs out on its own.
                warn!(error = %e, rows = work.moving, "could not move rows past the retention to '{ARCHIVE_SHEET}'; trying again later");
                None
            }
        }
    }

    /// After the batch applied: says what moved and what went back, and looks again at
    /// once when the look was a full batch or the read-back (`moved`) shows rows that
    /// should have stayed (in flight in the archive now, put back by that next pass).
    fn settle_archive(
        &mut self,
        moved: &[ValueRange],
        work: &ArchiveWork,
        now: chrono::DateTime<Utc>,
        retention: chrono::Duration,
    ) {
        self.served.archive.more = work.looked_at >= archive::BATCH_ROWS;
        if !work.in_flight.is_empty() {
            warn!(
                rows = work.in_flight.len(),
                "put rows that a person's rearranging had moved into the archive back at the end of the queue"
            );
        }
        let (landed, _) = self.archive_rows(moved, 2);
        let wrong = archive::misplaced(&work.runs, &landed, now, retention);
        info!(
            rows = work.moving,
            runs = work.runs.len(),
            misplaced = wrong.len(),
            "moved finished jobs past the retention to '{ARCHIVE_SHEET}'"
        );
        if !wrong.is_empty() {
            warn!(
                rows = wrong.len(),
                "a person rearranged the queue while finished rows were being archived; the rows that should have stayed go back at the next pass"
            );
            self.served.archive.more = true;
        }
    }

    /// Archive rows (1-based) at the top of the archive holding an unfinished job (待機,
    /// 実行中, or a state sheetq does not know): in flight, to go back to the queue. A
    /// finished row archived a little early stays (daemons whose clocks disagree by seconds
    /// must not move one row back and forth). `read` is the archive's top rows, laid out by
    /// `plan`.
    fn in_flight(
        &self,
        read: Option<&ValueRange>,
        plan: &archive::ColumnPlan,
        width: u32,
    ) -> Vec<u32> {
        let Some(read) = read else {
            return Vec::new();
        };
        let rows: Vec<Vec<Cell>> = read
            .values
            .iter()
            .map(|cells| plan.to_queue_row(cells, width))
            .collect();
        self.parse_rows(&rows, 2)
            .into_iter()
            .filter(|r| !r.job_id.trim().is_empty() && !crate::claim::is_final(r))
            .map(|r| r.row)
            .collect()
    }

    /// The A1 ranges of [`ARCHIVE_COLUMNS`] of rows `first..=last` of `sheet` (the queue,
    /// or the archive), each column at the index `col` gives it on that sheet.
    fn archive_columns(
        &self,
        sheet: &str,
        first: u32,
        last: u32,
        col: impl Fn(Column) -> u32,
    ) -> Vec<String> {
        ARCHIVE_COLUMNS
            .iter()
            .map(|c| {
                let c = a1::column_letters(col(*c));
                a1::range(sheet, &format!("{c}{first}:{c}{last}"))
            })
            .collect()
    }

    /// Queue rows from reads of [`ARCHIVE_COLUMNS`] (the first ranges of `ranges`), the
    /// first being sheet row `first`: only those cells are filled in. Also returns how many
    /// rows the reads reached.
    fn archive_rows(&self, ranges: &[ValueRange], first: u32) -> (Vec<QueueRow>, u32) {
        let width = self.served.layout.columns.width() as usize;
        let height = ranges
            .iter()
            .take(ARCHIVE_COLUMNS.len())
            .map(|r| r.values.len())
            .max()
            .unwrap_or(0);
        let mut cells = vec![vec![Cell::Null; width]; height];
        for (column, read) in ARCHIVE_COLUMNS.iter().zip(ranges) {
            let at = self.served.layout.columns.index(*column) as usize;
            for (row, values) in cells.iter_mut().zip(&read.values) {
                if let (Some(slot), Some(v)) = (row.get_mut(at), values.first()) {
                    *slot = v.clone();
                }
            }
        }
        (self.parse_rows(&cells, first), height as u32)
    }

    /// Columns the queue's grid has (A through its last column): what moves to the archive,
    /// so columns a person added go along.
    fn queue_width(&self) -> u32 {
        a1::column_index(&self.served.layout.last_col)
            .map_or(self.served.layout.columns.width(), |i| i + 1)
    }

    /// Creates the hidden archive sheet with the queue's header, protected (unless
    /// `protect = false`) so that only sheetq's service accounts write it, in the one batch
    /// that adds it; returns its sheet id.
    async fn create_archive(&mut self) -> Result<i32, DaemonError> {
        let l = self.served.layout.last_col.clone();
        let width = self.queue_width();
        let taken = self.served.sheets.ids.values().copied().collect();
        let sheet_id = crate::panel::sync::sheet_id_for(ARCHIVE_SHEET, &taken);
        let mut requests = vec![
            Request::AddSheetWithId {
                sheet_id,
                title: ARCHIVE_SHEET.to_string(),
                index: None,
                row_count: 2,
                column_count: width,
                frozen_rows: 0,
            },
            Request::UpdateSheetHidden {
                sheet_id,
                hidden: true,
            },
        ];
        requests.extend(self.archive_protection(sheet_id));
        let added = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                sheet_list: true,
                ..Default::default()
            })
            .await;
        let added = match added {
            Ok(a) => a,
            // Another daemon (or `sheetq init`) made it since our sheet list: use theirs.
            Err(e) if e.kind == crate::sheets::ErrorKind::InvalidArgument => {
                let meta = self.sheets.metadata().await?;
                self.take_in_sheets(meta.sheets);
                return match self.served.sheets.ids.get(ARCHIVE_SHEET) {
                    Some(id) => Ok(*id),
                    None => Err(e.into()),
                };
            }
            Err(e) => return Err(e.into()),
        };
        if !added.sheets.iter().any(|s| s.sheet_id == sheet_id) {
            return Err(DaemonError::Sheets(crate::sheets::SheetsError::new(
                crate::sheets::ErrorKind::Fatal,
                "spreadsheets.batchUpdate",
                format!("adding the sheet '{ARCHIVE_SHEET}' left no such sheet in the reply's sheet list"),
            )));
        }
        let header = self
            .sheets
            .read(&[a1::range(QUEUE_SHEET, &format!("A1:{l}1"))])
            .await?;
        self.sheets
            .write(&[ValueRange::new(
                a1::range(ARCHIVE_SHEET, &format!("A1:{l}1")),
                vec![crate::sheets::first_row(&header)],
            )])
            .await?;
        info!("created the hidden sheet '{ARCHIVE_SHEET}' for finished jobs past the retention");
        self.take_in_sheets(added.sheets);
        Ok(sheet_id)
    }

    /// The request that protects the new archive sheet `sheet_id` for sheetq's service
    /// accounts; none when the config turns protection off, or (logged) when this daemon
    /// cannot tell its account and the config names none.
    fn archive_protection(&self, sheet_id: i32) -> Vec<Request> {
        let editors = match crate::protection::Editors::of(
            self.config.protect,
            &self.config.protect_editors,
            &self.sheets.account(),
        ) {
            Ok(Some(editors)) => editors,
            Ok(None) => return Vec::new(),
            Err(why) => {
                warn!("the new sheet '{ARCHIVE_SHEET}' is left unprotected: {why}");
                return Vec::new();
            }
        };
        let wanted = crate::protection::hidden_sheets(&[(sheet_id, ARCHIVE_SHEET)]);
        crate::protection::plan(
            &crate::sheets::SpreadsheetMeta::default(),
            &wanted,
            &editors,
        )
        .requests
    }
}

/// A count cell's value (a number, or its text).
pub(super) fn count_of(cell: &Cell) -> Option<u64> {
    cell.as_u64()
        .or_else(|| cell.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        .or_else(|| queue::cell_text(cell).trim().parse().ok())
}
