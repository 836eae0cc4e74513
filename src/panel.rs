//! The panel side of sheetq (docs/design.md §1.2, §1.3, §2): finding panel sheets by their marker,
//! reading their function tables, the status texts people see, the cells of a result
//! write-back, the waiting/running display, and intake by polling ticked ▶ boxes.
//!
//! All of it is pure: values read from the sheet go in, ranges to read and cells to write
//! come out, and the daemon makes the calls. A pass reads the marker block of every sheet
//! ([`marker_ranges`]), builds a [`PanelIndex`] once, reads the function tables of the
//! panels it found ([`table_ranges`], [`parse_tables`]), and from then on resolves every
//! job through the index by target label and function label, never by title or row number.
//!
//! - [`layout`]: where the marker cells and table columns sit (`[panel]` in the config).
//! - [`index`]: discovery by marker, the label → panel map, the `▶パネル` index rows.
//! - [`table`]: a panel's function rows and finding one by its label.
//! - [`status`]: status texts, result write-back cells, the waiting/running display.
//! - [`intake`]: ticked boxes → queue rows, with the duplicate guard.

pub mod catalog;
pub mod guard;
pub mod index;
pub mod index_sheet;
pub mod intake;
pub mod layout;
pub mod protected;
pub mod status;
pub mod sync;
pub mod table;

pub use index::{marker_ranges, LabelConflict, PanelIndex, PanelRef, INDEX_SHEET, WORKER_SHEET};
pub use intake::{plan_index_intake, plan_intake, IntakePlan, NewJob, NO_FUNCTION_TEXT};
pub use layout::{CellRef, ColumnRef, PanelColumns, PanelLayout};
pub use status::{
    done_text, error_text, locate, newer_press, result_cells, retrying_cell, running_cell,
    running_row_text, running_text, status_and_time_cells, status_updates, PanelMiss, PanelOutcome,
    ERROR_TEXT_MAX_CHARS, RESULT_MAX_CHARS, TIMEOUT_TEXT,
};
pub use table::{parse_tables, table_ranges, PanelRow, PanelTable};

use crate::a1;
use crate::sheets::Cell;

/// What a missing cell reads as: the API leaves out trailing empty cells and rows.
static EMPTY: Cell = Cell::Null;

/// Cell `c` of a row, empty when the row is shorter.
fn cell_in(row: &[Cell], c: usize) -> &Cell {
    row.get(c).unwrap_or(&EMPTY)
}

/// Cell (`r`, `c`) of a block, both relative to its top-left corner.
fn cell_at(values: &[Vec<Cell>], r: usize, c: usize) -> &Cell {
    values.get(r).map(|row| cell_in(row, c)).unwrap_or(&EMPTY)
}

/// `'title'!C9` or `'title'!C9:E9`: columns `first..=last` (zero-based) of sheet row `row`.
fn cell_range(title: &str, first: u32, last: u32, row: u32) -> String {
    let cells = if first == last {
        format!("{}{row}", a1::column_letters(first))
    } else {
        format!(
            "{}{row}:{}{row}",
            a1::column_letters(first),
            a1::column_letters(last)
        )
    };
    a1::range(title, &cells)
}

/// Values shared by the tests of the panel modules.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::HashMap;

    use chrono::{DateTime, Duration, TimeZone, Utc};
    use chrono_tz::Tz;
    use serde_json::json;

    use super::{PanelIndex, PanelLayout, PanelRef, PanelTable};
    use crate::queue::{QueueRow, RowState, Snapshot, State};
    use crate::sheets::{Cell, SheetMeta, SpreadsheetMeta, ValueRange};

    pub fn tz() -> Tz {
        chrono_tz::Asia::Tokyo
    }

    /// 2026-11-30 12:00 in Tokyo plus `minutes`.
    pub fn at(minutes: i64) -> DateTime<Utc> {
        let t0 = Utc
            .with_ymd_and_hms(2026, 11, 30, 3, 0, 0)
            .single()
            .unwrap_or_default();
        t0 + Duration::minutes(minutes)
    }

    /// Sheets `(sheet_id, title)`, tab index in list order.
    pub fn meta(sheets: &[(i32, &str)]) -> SpreadsheetMeta {
        SpreadsheetMeta {
            spreadsheet_id: "s".into(),
            time_zone: "Asia/Tokyo".into(),
            sheets: sheets
                .iter()
                .enumerate()
                .map(|(i, (id, title))| SheetMeta {
                    sheet_id: *id,
                    title: (*title).into(),
                    index: i as i32,
                    hidden: false,
                    row_count: 1000,
                    column_count: 26,
                    protected_ranges: Vec::new(),
                })
                .collect(),
        }
    }

    /// The marker block of a panel as the API returns it.
    pub fn marker(title: &str, label: &str, position: &str) -> ValueRange {
        ValueRange::new(
            crate::a1::range(title, "G1:G3"),
            vec![
                vec![json!("PANEL_V2")],
                vec![json!(label)],
                vec![json!(position)],
            ],
        )
    }

    /// A function row A..J: ▶, 機能, 状態, 結果, 更新日時, (F, G), command, args, flags.
    pub fn func_row(
        ticked: bool,
        function: &str,
        status: &str,
        command: &str,
        args: &str,
        flags: &str,
    ) -> Vec<Cell> {
        vec![
            json!(ticked),
            json!(function),
            json!(status),
            json!(""),
            json!(""),
            json!(""),
            json!(""),
            json!(command),
            json!(args),
            json!(flags),
        ]
    }

    pub fn table(title: &str, rows: Vec<Vec<Cell>>) -> ValueRange {
        ValueRange::new(crate::a1::range(title, "A8:J207"), rows)
    }

    pub fn panel_ref(sheet_id: i32, title: &str, label: &str) -> PanelRef {
        PanelRef {
            sheet_id,
            title: title.into(),
            tab_index: 1,
            label: label.into(),
            position: String::new(),
        }
    }

    /// Panel 'P' (sheet id 5, target label "A") with these function rows from row 8.
    pub fn one_panel(rows: Vec<Vec<Cell>>) -> (PanelIndex, HashMap<String, PanelTable>) {
        let layout = PanelLayout::default();
        let index = PanelIndex::build(&meta(&[(5, "P")]), &[marker("P", "A", "")], &layout);
        let tables = super::parse_tables(&index, &[table("P", rows)], &layout);
        (index, tables)
    }

    /// A queue row on sheet row `row`, received `row` minutes after 12:00 Tokyo.
    pub fn queue_row(row: u32, state: State, target: &str, function: &str) -> QueueRow {
        QueueRow {
            row,
            job_id: format!("job-{row}"),
            received_at: Some(at(i64::from(row))),
            requester: String::new(),
            panel_sheet: "P".into(),
            panel_row: Some(8),
            target: target.into(),
            function: function.into(),
            command: "report".into(),
            args_json: "{}".into(),
            flags: vec![],
            state: RowState::Known(state),
            started_at: None,
            finished_at: None,
            result_url: String::new(),
            message: String::new(),
            worker: String::new(),
            cancel_request: String::new(),
            approvals: String::new(),
        }
    }

    pub fn snapshot(rows: Vec<QueueRow>) -> Snapshot {
        Snapshot {
            rows,
            problems: vec![],
        }
    }
}
