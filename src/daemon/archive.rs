//! The archive pass: under the lease, rows at the top of the queue that are past the
//! retention move to `_ジョブ履歴` in one atomic batch ([`crate::archive`]), which also adds
//! their number to the count in `_ワーカー!D1`, so every daemon moves its window up by as many
//! rows at its next poll. A row a person moved into the batch's way goes back to the queue.

use std::time::Duration as StdDuration;

use chrono::Utc;
use tracing::{info, warn};

use crate::a1;
use crate::archive::{self, ARCHIVE_SHEET};
use crate::lease::{self, WORKER_SHEET};
use crate::queue::{self, QUEUE_SHEET};
use crate::sheets::{BatchUpdate, Cell, GridRange, Request, ValueRange};

use super::{Daemon, DaemonError, Poll};

/// How often the top of the queue is looked at for rows past the retention, unless the last
/// look moved a full batch (then the next pass looks again).
const ARCHIVE_EVERY: StdDuration = StdDuration::from_secs(600);

impl Daemon {
    /// Whether this pass should look for rows to archive.
    pub(super) fn archive_due(&self) -> bool {
        self.config.retention.is_some()
            && (self.archive_more
                || self
                    .archived_at
                    .is_none_or(|t| t.elapsed() >= ARCHIVE_EVERY))
    }

    /// One archive pass: take the lease reading the first [`archive::BATCH_ROWS`] queue rows
    /// and the count, move the rows past the retention, release the lease in the same batch,
    /// and put back any row the batch's read-back shows should not have moved.
    pub(super) async fn archive_pass(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        let Some(retention) = self.config.retention else {
            return Ok(());
        };
        self.archived_at = Some(tokio::time::Instant::now());
        self.archive_more = false;
        let retention = chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
        let archive_id = match self.sheet_ids.get(ARCHIVE_SHEET) {
            Some(id) => *id,
            None => self.create_archive().await?,
        };
        let l = self.layout.last_col.clone();
        let block = a1::range(QUEUE_SHEET, &format!("A2:{l}{}", 1 + archive::BATCH_ROWS));
        let counter = a1::range(WORKER_SHEET, archive::COUNTER_CELLS);
        let Some((lease, reply)) = self.take_lease(poll, vec![block, counter]).await? else {
            return Ok(());
        };
        let held = lease.to_string();
        let now = Utc::now();
        let empty = ValueRange::default();
        let top = reply.ranges.first().unwrap_or(&empty);
        let rows = self.parse_rows(&top.values, 2);
        let runs = archive::runs(&rows, now, retention);
        let moving: u32 = runs.iter().map(|r| r.job_ids.len() as u32).sum();
        if moving == 0 {
            self.release(&held).await;
            return Ok(());
        }
        let counted = reply
            .ranges
            .get(1)
            .and_then(|v| v.values.first())
            .and_then(|r| r.get(1))
            .and_then(count_of)
            .unwrap_or(0);
        let width = a1::column_index(&l).map_or(self.layout.columns.width(), |i| i + 1);
        let mut requests = Vec::new();
        if let Some(narrow) = self
            .sheet_meta
            .sheet(ARCHIVE_SHEET)
            .filter(|a| (a.column_count as u32) < width)
        {
            requests.push(Request::SetColumnCount {
                sheet_id: narrow.sheet_id,
                columns: width as i32,
            });
        }
        requests.extend(archive::requests(
            &runs,
            self.layout.queue_sheet_id,
            archive_id,
            width,
        ));
        requests.push(Request::UpdateCells {
            range: GridRange {
                sheet_id: self.layout.worker_sheet_id,
                start_row: 0,
                end_row: 1,
                start_col: 2,
                end_col: 4,
            },
            rows: vec![vec![
                Cell::from(archive::COUNTER_LABEL),
                Cell::from(counted + u64::from(moving)),
            ]],
        });
        requests.push(lease::swap(self.layout.worker_sheet_id, &held, lease::FREE));
        let left = (lease.expires - self.lease_ttl() / 4 - Utc::now())
            .to_std()
            .unwrap_or_default();
        let landed_range = a1::range(ARCHIVE_SHEET, &format!("A2:{l}{}", 1 + moving));
        let moved = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges: vec![landed_range],
                sheet_list: false,
                send_by: Some(std::time::Instant::now() + left),
            })
            .await;
        let moved = match moved {
            Ok(m) => m,
            Err(e) => {
                // Nothing is lost either way: the batch applied whole or not at all. The
                // lease runs out on its own; the next look starts afresh.
                warn!(error = %e, rows = moving, "could not move rows past the retention to '{ARCHIVE_SHEET}'; trying again later");
                return Ok(());
            }
        };
        self.archive_more = top.values.len() as u32 >= archive::BATCH_ROWS;
        let landed_values = moved
            .ranges
            .first()
            .map(|v| v.values.as_slice())
            .unwrap_or(&[]);
        let landed = self.parse_rows(landed_values, 2);
        let wrong = archive::misplaced(&runs, &landed, now, retention);
        info!(
            rows = moving,
            runs = runs.len(),
            misplaced = wrong.len(),
            "moved finished jobs past the retention to '{ARCHIVE_SHEET}'"
        );
        if !wrong.is_empty() {
            let rows: Vec<u32> = wrong.iter().map(|r| r.row).collect();
            self.put_back(archive_id, landed_values, &rows).await?;
        }
        Ok(())
    }

    /// Rows a person moved into an archive batch's way (sheet rows `rows` of the archive,
    /// with `values` read from row 2 on) go back to the end of the queue and leave the
    /// archive.
    async fn put_back(
        &mut self,
        archive_id: i32,
        values: &[Vec<Cell>],
        rows: &[u32],
    ) -> Result<(), DaemonError> {
        let back: Vec<Vec<Cell>> = rows
            .iter()
            .filter_map(|r| values.get((*r - 2) as usize).cloned())
            .collect();
        warn!(
            rows = back.len(),
            "a person rearranged the queue while finished rows were being archived; putting the rows that should have stayed back at the end of the queue"
        );
        let l = &self.layout.last_col;
        self.sheets
            .append(&a1::range(QUEUE_SHEET, &format!("A1:{l}1")), &back)
            .await?;
        let mut deletes: Vec<Request> = rows
            .iter()
            .map(|r| Request::DeleteRows {
                sheet_id: archive_id,
                start: r - 1,
                end: *r,
            })
            .collect();
        deletes.reverse();
        self.sheets
            .batch_update(&BatchUpdate {
                requests: deletes,
                ..Default::default()
            })
            .await?;
        Ok(())
    }

    /// Creates the hidden archive sheet with the queue's header; returns its sheet id.
    async fn create_archive(&mut self) -> Result<i32, DaemonError> {
        let l = self.layout.last_col.clone();
        let width = a1::column_index(&l).map_or(self.layout.columns.width(), |i| i + 1);
        let added = self
            .sheets
            .batch_update(&BatchUpdate {
                requests: vec![Request::AddSheet {
                    title: ARCHIVE_SHEET.to_string(),
                    hidden: true,
                    row_count: 2,
                    column_count: width as i32,
                }],
                ..Default::default()
            })
            .await?;
        let Some(crate::sheets::Reply::AddSheet { sheet }) = added.replies.into_iter().next()
        else {
            return Err(DaemonError::Sheets(crate::sheets::SheetsError::new(
                crate::sheets::ErrorKind::Fatal,
                "spreadsheets.batchUpdate",
                format!("adding the sheet '{ARCHIVE_SHEET}' got no addSheet reply"),
            )));
        };
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
        let id = sheet.sheet_id;
        let mut sheets = self.sheet_meta.sheets.clone();
        sheets.push(sheet);
        self.take_in_sheets(sheets);
        Ok(id)
    }
}

/// A count cell's value (a number, or its text).
pub(super) fn count_of(cell: &Cell) -> Option<u64> {
    cell.as_u64()
        .or_else(|| cell.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        .or_else(|| queue::cell_text(cell).trim().parse().ok())
}
