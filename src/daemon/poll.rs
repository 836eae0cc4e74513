//! The poll: what one read of the sheet covers (queue header, the unfinished window of the
//! queue, the worker sheet, every panel's function table, and the rows our bindings sit on
//! now), how it is parsed, and the panel discovery that refreshes which sheets are panels.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use tracing::warn;

use crate::a1;
use crate::binding;
use crate::lease::{LeaseState, WORKER_SHEET};
use crate::panel::{self, PanelIndex, PanelTable};
use crate::queue::{self, ColumnMap, QueueRow, Snapshot, State, QUEUE_SHEET};
use crate::sheets::{Cell, Filter, FilterRead, ValueRange};
use crate::workers::{self, Heartbeat};

use super::{Daemon, DaemonError};

/// One read of what a decision needs: the queue (window) and the worker sheet.
pub(super) struct Poll {
    pub(super) snapshot: Snapshot,
    pub(super) lease: LeaseState,
    pub(super) heartbeats: HashMap<String, DateTime<Utc>>,
    /// The heartbeat rows themselves (with the jobs each daemon lists as running).
    pub(super) workers: Vec<Heartbeat>,
    /// 1-based row of our heartbeat in `_ワーカー`, if we have one.
    pub(super) own_heartbeat_row: Option<u32>,
    /// Whether this read covered the whole queue.
    pub(super) full: bool,
    /// Function tables of the known panels, by target label.
    pub(super) tables: HashMap<String, PanelTable>,
    /// Where each binding looked up sits now: the row it resolved to (`None`: it matched
    /// nothing, its row was deleted). Bindings not looked up are absent.
    pub(super) bound: HashMap<i32, Option<QueueRow>>,
}

impl Poll {
    /// The row holding `job_id` as this read showed it, to give a row a misplaced write hit
    /// its values back. A row without a jobId was blank (a person inserted it, or a
    /// cut-and-paste emptied it): blank it is again.
    pub(super) fn before_image(&self, job_id: &str) -> Option<QueueRow> {
        if job_id.trim().is_empty() {
            return Some(QueueRow::blank(0));
        }
        self.snapshot.by_job_id(job_id).cloned()
    }

    /// Every row of this read holding `job_id` (a copied row may repeat it).
    pub(super) fn rows_with_job(&self, job_id: &str) -> Vec<&QueueRow> {
        self.snapshot
            .rows
            .iter()
            .filter(|r| r.job_id == job_id)
            .collect()
    }
}

impl Daemon {
    /// Finds the panels by their marker cells (two calls: metadata, markers). Done at start
    /// and with every full scan, so a renamed, moved or new panel is picked up.
    pub(super) async fn discover_panels(&mut self) -> Result<(), DaemonError> {
        let meta = self.sheets.metadata().await?;
        let ranges = panel::marker_ranges(&meta, &self.config.panel);
        let values = if ranges.is_empty() {
            Vec::new()
        } else {
            self.sheets.read(&ranges).await?
        };
        let index = PanelIndex::build(&meta, &values, &self.config.panel);
        for c in &index.conflicts {
            warn!(target = %c.label, "{c}");
        }
        for p in &index.problems {
            warn!("{p}");
        }
        self.sheet_ids = meta
            .sheets
            .iter()
            .map(|s| (s.title.clone(), s.sheet_id))
            .collect();
        if let Some(q) = meta.sheet(QUEUE_SHEET) {
            self.layout.last_col = q.last_column();
        }
        self.panels = index;
        Ok(())
    }

    /// What a poll reads, in one `values.batchGet`: the queue header, the unfinished window
    /// of the queue (or all of it: asked for, or rows moved recently), the worker sheet, and
    /// the function table of each panel.
    pub(super) fn queue_ranges(&self, full: bool) -> Vec<String> {
        let full = full || self.rows_moving();
        let l = &self.layout.last_col;
        let start = if full { 2 } else { self.window_start.max(2) };
        let mut ranges = vec![
            a1::range(QUEUE_SHEET, &format!("A1:{l}1")),
            a1::range(QUEUE_SHEET, &format!("A{start}:{l}")),
            a1::range(WORKER_SHEET, &format!("A1:{}", workers::LAST_COLUMN)),
        ];
        ranges.extend(panel::table_ranges(&self.panels, &self.config.panel));
        ranges
    }

    /// One read (`values.batchGetByDataFilter`): the A1 ranges of [`Self::queue_ranges`] and,
    /// in the same call, the row each of our bindings sits on now.
    pub(super) async fn poll(&mut self, full: bool) -> Result<Poll, DaemonError> {
        let full = full || self.rows_moving();
        let ranges = self.queue_ranges(full);
        let ids = self.bindings_in_use();
        let filters: Vec<Filter> = ranges
            .iter()
            .cloned()
            .map(Filter::A1)
            .chain(ids.iter().copied().map(Filter::Metadata))
            .collect();
        let mut reads = self.sheets.read_filtered(&filters).await?;
        let bound_reads = reads.split_off(ranges.len().min(reads.len()));
        let values: Vec<ValueRange> = reads
            .into_iter()
            .zip(&ranges)
            .map(|(read, asked)| {
                read.ranges
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| ValueRange::new(asked.clone(), Vec::new()))
            })
            .collect();
        let mut poll = self.parse_poll(&ranges, &values, full)?;
        poll.bound = ids
            .into_iter()
            .zip(bound_reads)
            .map(|(id, read)| (id, self.bound_row(&read)))
            .collect();
        Ok(poll)
    }

    /// The binding ids of our running jobs, of claims not yet settled, of results waiting in
    /// the outbox, and of follow-up writes waiting for the next write-back.
    pub(super) fn bindings_in_use(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .running
            .values()
            .chain(&self.unsettled)
            .filter_map(|c| binding::id_of_token(&c.tag.token))
            .chain(
                self.outbox
                    .pending()
                    .filter_map(|j| binding::id_of_tag(&j.worker)),
            )
            .chain(self.pending_through.iter().map(|t| t.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The queue row a binding lookup resolved to, parsed with its row number.
    pub(super) fn bound_row(&self, read: &FilterRead) -> Option<QueueRow> {
        let (range, values) = read.row()?;
        self.parse_row_at(range, values)
    }

    /// One queue row's cells as the A1 `range` they came from (a bound read, a write's reply).
    pub(super) fn parse_row_at(&self, range: &str, values: &[Cell]) -> Option<QueueRow> {
        let row = a1::A1Range::parse(range).ok()?.start_row? + 1;
        self.parse_row(values, row)
    }

    /// One queue row's cells (a read-back, a bound row, a write's reply) as sheet row `row`.
    pub(super) fn parse_row(&self, values: &[Cell], row: u32) -> Option<QueueRow> {
        queue::parse_rows(
            &[values.to_vec()],
            row,
            &self.layout.columns,
            &self.config.states,
            self.layout.tz,
        )
        .rows
        .into_iter()
        .next()
    }

    pub(super) fn parse_poll(
        &mut self,
        ranges: &[String],
        values: &[ValueRange],
        full: bool,
    ) -> Result<Poll, DaemonError> {
        let empty = ValueRange::default();
        let header = values.first().unwrap_or(&empty);
        let header_row = header.values.first().cloned().unwrap_or_default();
        // Columns may be moved by a person at any time: the header is re-read every poll.
        let columns = ColumnMap::from_header(&header_row, &self.config.headers)?;
        self.layout.columns = columns;
        let start = ranges
            .get(1)
            .and_then(|r| a1::A1Range::parse(r).ok())
            .and_then(|r| r.start_row)
            .map(|r| r + 1)
            .unwrap_or(2);
        let window = values.get(1).unwrap_or(&empty);
        let snapshot = queue::parse_rows(
            &window.values,
            start,
            &self.layout.columns,
            &self.config.states,
            self.layout.tz,
        );
        let last_row = start + window.values.len() as u32;
        // Move the window down to the first unfinished row (keeping the last row in it, so
        // the range never starts past the grid).
        let first_open = snapshot
            .rows
            .iter()
            .filter(|r| {
                !(r.state.is(State::Done) || r.state.is(State::Error) || r.state.is(State::Timeout))
            })
            .map(|r| r.row)
            .min();
        self.window_start = first_open.unwrap_or(last_row.saturating_sub(1)).max(2);
        let worker = values.get(2).unwrap_or(&empty);
        let lease_text = worker
            .values
            .first()
            .and_then(|r| r.get(1))
            .map(queue::cell_text)
            .unwrap_or_default();
        let workers = workers::parse(&worker.values, self.layout.tz);
        let own_heartbeat_row = workers
            .iter()
            .find(|h| h.worker_id == self.config.worker_id)
            .map(|h| h.row);
        let heartbeats = workers
            .iter()
            .filter_map(|h| Some((h.worker_id.clone(), h.seen?)))
            .collect();
        let tables = panel::parse_tables(
            &self.panels,
            values.get(3..).unwrap_or(&[]),
            &self.config.panel,
        );
        Ok(Poll {
            snapshot,
            lease: LeaseState::parse(&lease_text),
            heartbeats,
            workers,
            own_heartbeat_row,
            full,
            tables,
            bound: HashMap::new(),
        })
    }
}
