//! What a person can take away from a daemon, and how little it costs: cells of the panels
//! and the index that someone else's protected range bars (left out of every write, so the
//! claim commit and the results go on without them), and a spreadsheet the daemon cannot
//! use for now (a refusal on its own sheets, a sheet or header gone, its sharing withdrawn),
//! which it holds off with backoff while the process serves its other spreadsheets and its
//! running jobs finish. Only what the VM's operator alone can fix ends the process
//! ([`DaemonError::ends_the_process`]).

use std::time::Duration as StdDuration;

use tracing::{error, info, warn};

use super::{Daemon, DaemonError, Poll};
use crate::protection;
use crate::sheets::{Area, GridRange, Request, SpreadsheetMeta, ValueRange};

/// The first wait of a spreadsheet held off; each failure after it doubles the wait.
pub(super) const HOLD_OFF_FIRST: StdDuration = StdDuration::from_secs(30);

/// The longest wait between two attempts on a spreadsheet held off.
pub(super) const HOLD_OFF_MAX: StdDuration = StdDuration::from_secs(10 * 60);

/// sheetq's own sheets: a refusal there holds the spreadsheet off rather than costing cells.
const OWN_SHEETS: [&str; 4] = [
    crate::queue::QUEUE_SHEET,
    crate::lease::WORKER_SHEET,
    crate::joblog::LOG_SHEET,
    crate::archive::ARCHIVE_SHEET,
];

/// The ticks of a pass's read that the poll intake may take ([`Daemon::takeable`]).
pub(super) struct Ticks {
    pub(super) tables: std::collections::HashMap<String, crate::panel::PanelTable>,
    pub(super) index: Option<super::poll::IndexRead>,
}

/// A spreadsheet held off: when to try again, and the wait that brought it there.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeldOff {
    pub(super) until: tokio::time::Instant,
    pub(super) wait: StdDuration,
    /// When this run of failures began, for people (`sheetq status`).
    pub(super) since: chrono::DateTime<chrono::Utc>,
}

/// The wait after `last` (none: the first failure).
pub(super) fn next_wait(last: Option<StdDuration>) -> StdDuration {
    last.map_or(HOLD_OFF_FIRST, |w| (w * 2).min(HOLD_OFF_MAX))
}

impl DaemonError {
    /// Whether only the VM's operator can put this right, so that the process ends: its
    /// worker_id taken by another process, or its own state directory failing. Anything a
    /// person can do to the spreadsheet (protect cells, delete or rename sheets, headers and
    /// markers, withdraw its sharing) holds that spreadsheet off instead
    /// ([`Daemon::hold_off`]). The config and the key are checked at start, where a problem
    /// ends the process with exit code 2.
    pub fn ends_the_process(&self) -> bool {
        matches!(self, DaemonError::WorkerIdInUse(_) | DaemonError::Outbox(_))
    }
}

impl Daemon {
    /// Takes up which cells of people's sheets someone else's protection bars, from
    /// metadata read anyway (start, panel discovery, the sheet list a busy daemon reads):
    /// said when it changes.
    pub(super) fn take_in_protections(&mut self, meta: &SpreadsheetMeta) {
        self.served.guards.protections = meta.clone();
        let barred = protection::barred(meta, &OWN_SHEETS);
        if barred == self.served.guards.barred {
            return;
        }
        for b in barred
            .iter()
            .filter(|b| !self.served.guards.barred.contains(b))
        {
            warn!(range = %b, "cells sheetq writes are protected by someone else: they are left out of its writes (the panel's 状態/結果, the index's 状況) until that protection lists sheetq's account or goes; jobs there still run and their results go to the queue");
        }
        if barred.is_empty() {
            info!("no protection of someone else's bars sheetq's writes any more");
        }
        self.observers
            .metrics
            .set_barred_ranges(barred.len() as u64);
        self.served.guards.barred = barred;
    }

    /// Whether the A1 write `v` may go: it touches no cell someone else's protection bars.
    /// A write whose range cannot be placed goes, for Google to judge.
    pub(super) fn writable(&self, v: &ValueRange) -> bool {
        if self.served.guards.barred.is_empty() {
            return true;
        }
        self.grid_range(v).is_none_or(|g| {
            // A write of no values still names its first cell.
            let end_row = g.end_row.max(g.start_row + 1);
            let end_col = g.end_col.max(g.start_col + 1);
            !self.barred_area(Area::cells(GridRange {
                end_row,
                end_col,
                ..g
            }))
        })
    }

    /// Whether someone else's protection bars a cell of `area`.
    fn barred_area(&self, area: Area) -> bool {
        self.served
            .guards
            .barred
            .iter()
            .any(|b| b.area.overlaps(&area))
    }

    /// Whether a grid request of a commit may go: it writes no cell someone else's
    /// protection bars. Requests that write no cells of a sheet (metadata, the lease's swap)
    /// go.
    pub(super) fn request_writable(&self, r: &Request) -> bool {
        if self.served.guards.barred.is_empty() {
            return true;
        }
        let range = match r {
            Request::UpdateCells { range, .. }
            | Request::WriteFormulas { range, .. }
            | Request::CompareAndSwap { range, .. }
            | Request::SetCheckboxes { range }
            | Request::SetValidation { range, .. }
            | Request::ClearCheckboxes { range }
            | Request::SetDateTimeFormat { range, .. } => range,
            _ => return true,
        };
        !self.barred_area(Area::cells(*range))
    }

    /// Whether the one cell (`sheet_id`, zero-based `row`, `col`) is barred.
    fn cell_barred(&self, sheet_id: i32, row: u32, col: u32) -> bool {
        self.barred_area(Area::cells(GridRange::cell(sheet_id, row, col)))
    }

    /// The panels' and the index's ticks as the poll intake may take them (`None`: as
    /// `fresh` read them): a tick whose box someone else's protection bars could never be
    /// cleared, so it would be taken again at every pass; it is left as it is (and said once
    /// per pass). Only the function tables and the index are copied, not the queue.
    pub(super) fn takeable(&self, fresh: &Poll) -> Option<Ticks> {
        if self.served.guards.barred.is_empty() {
            return None;
        }
        let cols = &self.config.panel.columns;
        let mut out = Ticks {
            tables: fresh.tables.clone(),
            index: fresh.index.clone(),
        };
        let mut left = 0;
        for (label, table) in out.tables.iter_mut() {
            let Some(panel) = self.served.panels.index.get(label) else {
                continue;
            };
            for row in &mut table.rows {
                let r = row.row.saturating_sub(1);
                for (ticked, col) in [
                    (&mut row.ticked, cols.tick.0),
                    (&mut row.cancel_ticked, cols.cancel.0),
                ] {
                    if *ticked && self.cell_barred(panel.sheet_id, r, col) {
                        *ticked = false;
                        left += 1;
                    }
                }
                let approve = self.config.panel.columns.approve.0;
                let before = row.approve_ticks.len();
                row.approve_ticks
                    .retain(|n| !self.cell_barred(panel.sheet_id, r, approve + *n as u32));
                left += before - row.approve_ticks.len();
            }
        }
        if let Some(index) = &mut out.index {
            for entry in &mut index.entries {
                let r = entry.row.saturating_sub(1);
                if entry.ticked
                    && self.cell_barred(index.sheet_id, r, crate::panel::index_sheet::TICK)
                {
                    entry.ticked = false;
                    left += 1;
                }
            }
        }
        if left > 0 {
            warn!(ticks = left, "ticked boxes that someone else's protection keeps sheetq from clearing are not taken in: each would be taken again at every pass");
        }
        Some(out)
    }

    /// Holds the spreadsheet off after `e`: no pass until the wait (doubling from
    /// [`HOLD_OFF_FIRST`] to [`HOLD_OFF_MAX`]) is over, then its layout is read afresh.
    /// Running jobs go on and their results wait in the outbox; `/readyz`, the service
    /// manager's status and `sheetq status` on this machine (`crate::pause`) say why.
    pub(super) fn hold_off(&mut self, e: &DaemonError) {
        let wait = next_wait(self.served.held_off.map(|h| h.wait));
        let now = chrono::Utc::now();
        let since = self.served.held_off.map_or(now, |h| h.since);
        self.served.held_off = Some(HeldOff {
            until: tokio::time::Instant::now() + wait,
            wait,
            since,
        });
        self.served.pass.relayout = true;
        let pause = crate::pause::Pause::new(since, now, wait, &e.to_string());
        pause.leave(&self.config.state_dir);
        let why = pause.reason;
        error!(error = %e, retry_in = ?wait, "this spreadsheet cannot be served as it is now; holding it off and trying again with backoff (running jobs go on, their results wait in the outbox)");
        self.observers.health.set_paused(Some(why.clone()));
        self.observers.metrics.set_held_off(true);
        self.tell_status(&format!(
            "held off for {}: {why}",
            humantime::format_duration(wait)
        ));
    }

    /// A pass went through: a spreadsheet held off is served again.
    pub(super) fn served_again(&mut self) {
        if self.served.held_off.take().is_some() {
            info!("the spreadsheet can be served again");
            if let Err(e) = crate::pause::clear(&self.config.state_dir) {
                warn!(error = %e, "could not remove the hold-off note from state_dir");
            }
            self.observers.health.set_paused(None);
            self.observers.metrics.set_held_off(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_half_a_minute_up_to_ten_minutes() {
        let mut waits = Vec::new();
        let mut last = None;
        for _ in 0..8 {
            let w = next_wait(last);
            waits.push(w.as_secs());
            last = Some(w);
        }
        assert_eq!(waits, [30, 60, 120, 240, 480, 600, 600, 600]);
    }
}
