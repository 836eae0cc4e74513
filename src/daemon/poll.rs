//! The poll: what one read of the sheet covers (queue header, the unfinished window of the
//! queue, the worker sheet, every panel's function table), how it is parsed, and the panel
//! discovery that refreshes which sheets are panels.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use tracing::warn;

use crate::a1;
use crate::lease::{LeaseState, WORKER_SHEET};
use crate::panel::{self, PanelIndex, PanelTable};
use crate::queue::{self, ColumnMap, Snapshot, State, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::ValueRange;

use super::{Daemon, DaemonError};

/// One read of what a decision needs: the queue (window) and the worker sheet.
pub(super) struct Poll {
    pub(super) snapshot: Snapshot,
    pub(super) lease: LeaseState,
    pub(super) heartbeats: HashMap<String, DateTime<Utc>>,
    /// 1-based row of our heartbeat in `_ワーカー`, if we have one.
    pub(super) own_heartbeat_row: Option<u32>,
    /// Whether this read covered the whole queue.
    pub(super) full: bool,
    /// Function tables of the known panels, by target label.
    pub(super) tables: HashMap<String, PanelTable>,
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
    /// of the queue (or all of it), the worker sheet, and the function table of each panel.
    pub(super) fn queue_ranges(&self, full: bool) -> Vec<String> {
        let l = &self.layout.last_col;
        let start = if full { 2 } else { self.window_start.max(2) };
        let mut ranges = vec![
            a1::range(QUEUE_SHEET, &format!("A1:{l}1")),
            a1::range(QUEUE_SHEET, &format!("A{start}:{l}")),
            a1::range(WORKER_SHEET, "A1:F"),
        ];
        ranges.extend(panel::table_ranges(&self.panels, &self.config.panel));
        ranges
    }

    pub(super) async fn poll(&mut self, full: bool) -> Result<Poll, DaemonError> {
        let ranges = self.queue_ranges(full);
        let values = self.sheets.read(&ranges).await?;
        self.parse_poll(&ranges, &values, full)
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
        let mut heartbeats = HashMap::new();
        let mut own_heartbeat_row = None;
        for (i, row) in worker.values.iter().enumerate().skip(2) {
            let id = row.first().map(queue::cell_text).unwrap_or_default();
            if id.trim().is_empty() {
                continue;
            }
            if id == self.config.worker_id {
                own_heartbeat_row = Some(i as u32 + 1);
            }
            if let Some(Ok(Some(seen))) = row
                .get(5)
                .map(|c| sheet_time::cell_to_instant(c, self.layout.tz))
            {
                heartbeats.insert(id, seen);
            }
        }
        let tables = panel::parse_tables(
            &self.panels,
            values.get(3..).unwrap_or(&[]),
            &self.config.panel,
        );
        Ok(Poll {
            snapshot,
            lease: LeaseState::parse(&lease_text),
            heartbeats,
            own_heartbeat_row,
            full,
            tables,
        })
    }
}
