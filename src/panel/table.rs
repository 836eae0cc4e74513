//! A panel's function table as data: one [`PanelRow`] per function, read in one block per
//! panel (`'title'!A8:J207` by default).
//!
//! Rows are found by their 機能 text, never by row number alone: people insert, sort and
//! move function rows, and a result written by number would land on the wrong function.

use std::collections::HashMap;

use super::{cell_in, PanelIndex, PanelLayout};
use crate::a1::{self, A1Range};
use crate::queue::cell_text;
use crate::sheets::{Cell, ValueRange};

/// The table ranges of every usable panel, in the index's (tab) order.
pub fn table_ranges(index: &PanelIndex, layout: &PanelLayout) -> Vec<String> {
    let (first, last) = layout.table_span();
    let cells = format!(
        "{}{}:{}{}",
        a1::column_letters(first),
        layout.first_row,
        a1::column_letters(last),
        layout.last_row()
    );
    index
        .panels()
        .iter()
        .map(|p| a1::range(&p.title, &cells))
        .collect()
}

/// One function row of a panel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PanelRow {
    /// 1-based sheet row at the time of the read.
    pub row: u32,
    /// The ▶ box is ticked.
    pub ticked: bool,
    /// The ■ box is ticked: stop the function's job.
    pub cancel_ticked: bool,
    /// The 承認 boxes ticked, by approver: `n` for the `n`-th 承認 column (the installable
    /// trigger clears a box once it records who; the poll intake takes a tick in a cell only
    /// that approver may edit, `crate::panel::guard`).
    pub approve_ticks: Vec<usize>,
    /// 機能, trimmed.
    pub function: String,
    /// 状態 as shown now.
    pub status: String,
    /// 結果 as shown now.
    pub result: String,
    /// 更新日時 as read (a date serial when sheetq wrote it).
    pub updated: Cell,
    /// Hidden command name, trimmed.
    pub command: String,
    /// Hidden argsJSON, as written.
    pub args_json: String,
    /// Hidden システムフラグ, trimmed (comma-separated, as in the queue).
    pub flags: String,
    /// The input columns' cells, left to right (`PanelLayout::input_columns`): each input's
    /// label, then its value.
    pub inputs: Vec<Cell>,
}

impl PanelRow {
    /// The value cell of the `n`-th input when its label cell shows `label` (as `panels
    /// sync` writes it); `None` when it does not, so a value is never taken from a cell
    /// whose meaning the row does not show.
    pub fn input(&self, n: usize, label: &str) -> Option<&Cell> {
        let shown = self.inputs.get(2 * n).map(cell_text).unwrap_or_default();
        (crate::sheet_text::trim(&shown) == crate::sheet_text::trim(label))
            .then(|| cell_in(&self.inputs, 2 * n + 1))
    }
}

/// The function table of one panel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PanelTable {
    pub rows: Vec<PanelRow>,
}

/// A checkbox reads as JSON `true`; text `TRUE` (any case) is accepted too, for a box that
/// a script or a paste left as text.
pub(super) fn is_ticked(cell: &Cell) -> bool {
    match cell {
        Cell::Bool(b) => *b,
        Cell::String(s) => s.trim().eq_ignore_ascii_case("true"),
        _ => false,
    }
}

impl PanelTable {
    /// Reads the values of one [`table_ranges`] range. Row 0 of `values` is
    /// `layout.first_row`, column 0 the table's left-most column, as that range asks for.
    /// Rows with neither a function label nor a tick are left out (spacers, notes).
    pub fn parse(range: &ValueRange, layout: &PanelLayout) -> Self {
        let (left, _) = layout.table_span();
        let cols = &layout.columns;
        let mut rows = Vec::new();
        for (i, cells) in range.values.iter().enumerate() {
            let get = |c: super::ColumnRef| cell_in(cells, (c.0 - left) as usize);
            let text =
                |c: super::ColumnRef| crate::sheet_text::trim(&cell_text(get(c))).to_string();
            let row = PanelRow {
                row: layout.first_row + i as u32,
                ticked: is_ticked(get(cols.tick)),
                cancel_ticked: is_ticked(get(cols.cancel)),
                approve_ticks: layout
                    .approve_columns()
                    .enumerate()
                    .filter(|(_, c)| is_ticked(cell_in(cells, (c - left) as usize)))
                    .map(|(n, _)| n)
                    .collect(),
                function: text(cols.function),
                status: text(cols.status),
                result: text(cols.result),
                updated: get(cols.updated).clone(),
                command: text(cols.command),
                args_json: cell_text(get(cols.args_json)),
                flags: text(cols.flags),
                inputs: layout
                    .input_columns()
                    .map(|c| cell_in(cells, (c - left) as usize).clone())
                    .collect(),
            };
            if row.ticked || row.cancel_ticked || !row.function.is_empty() {
                rows.push(row);
            }
        }
        Self { rows }
    }

    /// The row whose 機能 is `function` (compared trimmed). The stored row number `hint`
    /// only breaks a tie between rows sharing a label; with no hint among them, the top-most
    /// one is used, as a person reading the panel would.
    pub fn find(&self, function: &str, hint: Option<u32>) -> Option<&PanelRow> {
        let function = crate::sheet_text::trim(function);
        if function.is_empty() {
            return None;
        }
        let mut matches = self.rows.iter().filter(|r| r.function == function);
        let first = matches.next()?;
        if hint == Some(first.row) {
            return Some(first);
        }
        Some(matches.find(|r| Some(r.row) == hint).unwrap_or(first))
    }
}

/// Parses the values of [`table_ranges`] into tables keyed by target label. Each range is
/// matched to its panel by the sheet title in its A1 text; a range that names no usable
/// panel is skipped.
pub fn parse_tables(
    index: &PanelIndex,
    ranges: &[ValueRange],
    layout: &PanelLayout,
) -> HashMap<String, PanelTable> {
    ranges
        .iter()
        .filter_map(|vr| {
            let title = A1Range::parse(&vr.range).ok()?.sheet?;
            let panel = index.by_title(&title)?;
            Some((panel.label.clone(), PanelTable::parse(vr, layout)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::fixtures::*;
    use serde_json::json;

    #[test]
    fn table_ranges_cover_the_function_block_of_each_panel() {
        let meta = meta(&[(5, "Bob's"), (6, "B")]);
        let index = PanelIndex::build(
            &meta,
            &[marker("Bob's", "A", ""), marker("B", "B", "")],
            &PanelLayout::default(),
        );
        assert_eq!(
            table_ranges(&index, &PanelLayout::default()),
            ["'Bob''s'!A8:K207", "'B'!A8:K207"]
        );
    }

    #[test]
    fn parses_checkboxes_text_and_hidden_columns() {
        let t = PanelTable::parse(
            &table(
                "A",
                vec![
                    func_row(true, "集計", "", "report", "{\"d\":1}", "heavy"),
                    vec![],
                    func_row(false, "再起動", "✅ 完了 11/30 14:05", "restart", "", ""),
                    vec![json!("TRUE"), json!(" バックアップ ")],
                    vec![json!(false), json!(""), json!("")],
                ],
            ),
            &PanelLayout::default(),
        );
        let got: Vec<(u32, bool, &str)> = t
            .rows
            .iter()
            .map(|r| (r.row, r.ticked, r.function.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (8, true, "集計"),
                (10, false, "再起動"),
                (11, true, "バックアップ")
            ],
            "blank rows are left out, text TRUE is a tick"
        );
        let r = &t.rows[0];
        assert_eq!(
            (r.command.as_str(), r.args_json.as_str(), r.flags.as_str()),
            ("report", "{\"d\":1}", "heavy")
        );
        assert_eq!(t.rows[1].status, "✅ 完了 11/30 14:05");
        assert_eq!(t.rows[2].command, "", "a short row reads as empty cells");
    }

    #[test]
    fn a_moved_function_row_is_found_by_its_label() {
        // Pressed on row 8; someone inserted two rows above it since.
        let t = PanelTable::parse(
            &table(
                "A",
                vec![
                    func_row(false, "新機能", "", "x", "", ""),
                    func_row(false, "別機能", "", "y", "", ""),
                    func_row(false, "集計", "", "report", "", ""),
                ],
            ),
            &PanelLayout::default(),
        );
        let r = t.find("集計", Some(8)).map(|r| r.row);
        assert_eq!(r, Some(10), "the label wins over the stale row number");
        assert_eq!(t.find("ない", Some(8)), None);
        assert_eq!(t.find("", None), None);
    }

    #[test]
    fn the_hint_breaks_a_tie_between_rows_sharing_a_label() {
        let t = PanelTable::parse(
            &table(
                "A",
                vec![
                    func_row(false, "集計", "", "a", "", ""),
                    func_row(false, "集計", "", "b", "", ""),
                ],
            ),
            &PanelLayout::default(),
        );
        assert_eq!(t.find("集計", Some(9)).map(|r| r.row), Some(9));
        assert_eq!(t.find("集計", Some(8)).map(|r| r.row), Some(8));
        assert_eq!(
            t.find("集計", Some(40)).map(|r| r.row),
            Some(8),
            "no hint match: top-most"
        );
    }

    #[test]
    fn parse_tables_keys_by_label_not_title() {
        let meta = meta(&[(5, "サーバーA")]);
        let index = PanelIndex::build(
            &meta,
            &[marker("サーバーA", "A", "")],
            &PanelLayout::default(),
        );
        let tables = parse_tables(
            &index,
            &[
                table("サーバーA", vec![func_row(true, "集計", "", "r", "", "")]),
                table("ghost", vec![func_row(true, "集計", "", "r", "", "")]),
            ],
            &PanelLayout::default(),
        );
        assert_eq!(tables.len(), 1, "{tables:?}");
        assert_eq!(tables.get("A").map(|t| t.rows.len()), Some(1));
    }
}
