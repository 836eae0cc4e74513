//! Where the daemon's writes go: a queue row's range, its claim cells, A1 writes turned into
//! grid requests of a batch on a known sheet (`sheet_ids`), and a read-back row parsed.

use crate::a1;
use crate::queue::{Column, QueueRow, QUEUE_SHEET};
use crate::sheets::{Cell, GridRange, Request, ValueRange};

use super::Daemon;

/// The sheets of the spreadsheet as last listed, and their ids by title.
#[derive(Debug, Default)]
pub(super) struct SheetList {
    /// The sheets of the spreadsheet, as last listed (at start, then by heartbeat replies).
    pub(super) meta: crate::sheets::SpreadsheetMeta,
    /// When the sheet list was last taken in.
    pub(super) seen: Option<tokio::time::Instant>,
    /// Sheet title → sheet id, for turning A1 writes into grid requests of a commit.
    pub(super) ids: std::collections::HashMap<String, i32>,
}

impl Daemon {
    /// A read-back of one queue row (`range`), parsed; `hint` is the sheet row it was asked
    /// for.
    pub(super) fn read_back_row(&self, range: Option<&ValueRange>, hint: u32) -> Option<QueueRow> {
        let values = range?.values.first()?;
        self.parse_row(values, hint)
    }

    /// The claim cells of a queue row (状態, 開始日時, ワーカー), for undoing a claim that
    /// landed on the wrong row.
    pub(super) fn claim_values(
        &self,
        state: Option<&str>,
        started: &Cell,
        worker: &str,
    ) -> Vec<(Column, Cell)> {
        state
            .map(|s| (Column::State, Cell::from(s)))
            .into_iter()
            .chain([
                (Column::StartedAt, started.clone()),
                (Column::Worker, Cell::from(worker)),
            ])
            .collect()
    }

    /// Cells of one queue row as A1 writes at a row number: only for rows claimed without a
    /// binding (by older versions or another tool), which have no other way to be found.
    pub(super) fn cells_at(&self, row: u32, cells: Vec<(Column, Cell)>) -> Vec<ValueRange> {
        let cols = &self.served.layout.columns;
        cells
            .into_iter()
            .map(|(c, v)| ValueRange::new(cols.cell(c, row), vec![vec![v]]))
            .collect()
    }

    /// An A1 write on a known sheet as a grid request, so it can join a commit batch.
    pub(super) fn grid_write(&self, v: &ValueRange) -> Option<Request> {
        if !self.writable(v) {
            return None;
        }
        Some(Request::UpdateCells {
            range: self.grid_range(v)?,
            rows: v.values.clone(),
        })
    }

    /// The cells an A1 write covers, on a sheet of the last sheet list.
    pub(super) fn grid_range(&self, v: &ValueRange) -> Option<GridRange> {
        let r = a1::A1Range::parse(&v.range).ok()?;
        let sheet_id = *self.served.sheets.ids.get(r.sheet.as_deref()?)?;
        let start_row = r.start_row?;
        let start_col = r.start_col?;
        let width = v.values.iter().map(Vec::len).max().unwrap_or(0) as u32;
        Some(GridRange {
            sheet_id,
            start_row,
            end_row: start_row + v.values.len() as u32,
            start_col,
            end_col: start_col + width,
        })
    }

    pub(super) fn row_range(&self, row: u32) -> String {
        a1::range(
            QUEUE_SHEET,
            &format!("A{row}:{}{row}", self.served.layout.last_col),
        )
    }

    pub(super) fn queue_sheet_id(&self) -> i32 {
        self.served.layout.queue_sheet_id
    }
}
