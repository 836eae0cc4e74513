//! The index sheet `▶パネル` as data: its marker, its columns, its rows (one per target),
//! and the two texts it shows per target — what is running or waiting, and the last
//! result — derived from the queue and the panels, so that `panels sync` and the daemon
//! write the same thing.
//!
//! The index is recognised by its marker (`PANEL_INDEX` in the panels' marker cell, `G1` by
//! default), not by its title: a migrated spreadsheet keeps the old panel's title for it.
//! Its visible columns are A–F; the marker's column is hidden and holds, per row, the
//! target's last activity as a date serial (what idle-hiding is decided on).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{cell_in, PanelIndex, PanelLayout, PanelRef, PanelTable};
use crate::queue::{cell_text, QueueRow, State};
use crate::sheet_text::{for_cell, visible, LINE_CHARS};
use crate::sheet_time;
use crate::sheets::{Cell, SpreadsheetMeta, ValueRange};

/// The index's marker, in the panels' marker cell.
pub const INDEX_MARKER: &str = "PANEL_INDEX";
/// Row 1 of the index, columns A–F.
pub const INDEX_HEADER: [&str; 6] = ["▶", "対象", "位置", "パネル", "状況", "最終結果"];
/// Columns of the index (zero-based).
pub const TICK: u32 = 0;
pub const LABEL: u32 = 1;
pub const POSITION: u32 = 2;
pub const LINK: u32 = 3;
pub const STATE: u32 = 4;
pub const LAST: u32 = 5;
/// Rows of the index that are read and written (header included): 1,999 targets.
pub const INDEX_MAX_ROWS: u32 = 2000;
/// What the link cell of a target shows when its panel is open.
pub const LINK_TEXT: &str = "開く";
/// The link cell of a target whose panel was never created.
pub const NOT_CREATED_TEXT: &str = "未作成 (▶ で作成)";
/// The link cell of a target whose label is on more than one panel.
pub const CONFLICT_TEXT: &str = "ラベルが複数のパネルにあります (G2 を直してください)";
/// The link cell of a target whose panel is hidden.
pub const HIDDEN_TEXT: &str = "非表示 (▶ で表示)";

/// One target row of the index, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    /// 1-based sheet row at the time of the read.
    pub row: u32,
    pub ticked: bool,
    pub label: String,
    pub position: String,
    /// What the link cell shows (its value, not its formula).
    pub link: String,
    pub state: String,
    pub last: String,
    /// Last activity (a date serial in the spreadsheet's zone), from the hidden column.
    pub activity: Option<f64>,
}

/// The `=HYPERLINK` formula of a panel's link cell.
pub fn link_formula(sheet_id: i32) -> String {
    format!("=HYPERLINK(\"#gid={sheet_id}\", \"{LINK_TEXT}\")")
}

/// The rows of an index read from `A1` (row 0 of `values` is the header). Rows with neither
/// a label nor a tick are left out.
pub fn parse_entries(values: &[Vec<Cell>], layout: &PanelLayout) -> Vec<IndexEntry> {
    let activity_col = layout.marker_cell.col as usize;
    values
        .iter()
        .enumerate()
        .skip(1)
        .filter_map(|(i, cells)| {
            let text = |c: u32| {
                crate::sheet_text::trim(&cell_text(cell_in(cells, c as usize))).to_string()
            };
            let entry = IndexEntry {
                row: i as u32 + 1,
                ticked: super::table::is_ticked(cell_in(cells, TICK as usize)),
                label: text(LABEL),
                position: text(POSITION),
                link: text(LINK),
                state: text(STATE),
                last: text(LAST),
                activity: cell_in(cells, activity_col).as_f64(),
            };
            (entry.ticked || !entry.label.is_empty()).then_some(entry)
        })
        .collect()
}

/// The 状況 text of a target: its running job and how many wait, from the queue rows of
/// this read (only unfinished rows matter), and how many wait for approval. Empty when
/// nothing runs or waits.
pub fn state_text<'a>(label: &str, rows: impl IntoIterator<Item = &'a QueueRow>) -> String {
    let mut running: Vec<&str> = Vec::new();
    let mut waiting = 0;
    let mut awaiting = 0;
    for r in rows.into_iter().filter(|r| r.target_key() == label) {
        if r.state.is(State::Running) {
            running.push(r.function.trim());
        } else if r.state.is(State::Waiting) {
            waiting += 1;
        } else if r.state.is(State::AwaitingApproval) {
            awaiting += 1;
        }
    }
    let running = running.first().map(|f| visible(f, LINE_CHARS));
    let text = match (running, waiting) {
        (None, 0) => String::new(),
        (None, n) => format!("⏳ 待機 {n} 件"),
        (Some(f), 0) => format!("▶ 実行中: {f}"),
        (Some(f), n) => format!("▶ 実行中: {f} (待機 {n} 件)"),
    };
    match (text.is_empty(), awaiting) {
        (_, 0) => text,
        (true, m) => format!("🙋 承認待ち {m} 件"),
        (false, m) => format!("{text} · 承認待ち {m} 件"),
    }
}

/// The last result of a target: the function row of its panel updated last, as
/// `<function>: <status>`, with that time as a date serial.
pub fn last_result(table: &PanelTable) -> Option<(f64, String)> {
    table
        .rows
        .iter()
        .filter_map(|r| r.updated.as_f64().map(|t| (t, r)))
        .filter(|(_, r)| !r.status.is_empty())
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(t, r)| {
            let (function, status) = (visible(&r.function, LINE_CHARS), for_cell(&r.status, 500));
            (t, format!("{function}: {status}"))
        })
}

/// The later of two optional serials.
pub fn later(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Whether a target whose last activity is `activity` has been idle for `hide_after` at
/// `now`. A target with no known activity is not idle: nothing says how long it has been.
pub fn is_idle(
    activity: Option<f64>,
    hide_after: Option<std::time::Duration>,
    now: DateTime<Utc>,
    tz: Tz,
) -> bool {
    let (Some(activity), Some(hide_after)) = (activity, hide_after) else {
        return false;
    };
    let Ok(hide_after) = chrono::Duration::from_std(hide_after) else {
        return false;
    };
    activity < sheet_time::instant_to_serial(now - hide_after, tz)
}

/// What 状況 says of a panel some of whose cells someone else's protection keeps sheetq from
/// writing (their jobs still run; their results go to the queue).
pub const BARRED_NOTE: &str = "⚠ 他の人の保護で書けないセルがあります (sheetq check)";

/// The index cells the daemon keeps current, where they differ from what it shows: per
/// target with a panel, 状況 (from the unfinished queue rows of this read, and
/// [`BARRED_NOTE`] for the targets in `barred`), 最終結果 and the hidden last activity (from
/// the panel's function rows). Rows are the ones just read; entries whose label is no panel
/// are left alone.
pub fn index_updates(
    title: &str,
    entries: &[IndexEntry],
    tables: &HashMap<String, PanelTable>,
    rows: &[QueueRow],
    layout: &PanelLayout,
    barred: &std::collections::HashSet<String>,
) -> Vec<ValueRange> {
    let mut out = Vec::new();
    for e in entries.iter().filter(|e| !e.label.is_empty()) {
        let Some(table) = tables.get(&e.label) else {
            continue;
        };
        let mut state = state_text(&e.label, rows);
        if barred.contains(&e.label) {
            state = if state.is_empty() {
                BARRED_NOTE.to_string()
            } else {
                format!("{state} · {BARRED_NOTE}")
            };
        }
        if state != e.state {
            out.push(ValueRange::new(
                super::cell_range(title, STATE, STATE, e.row),
                vec![vec![Cell::String(state)]],
            ));
        }
        if let Some((at, text)) = last_result(table) {
            if text != e.last {
                out.push(ValueRange::new(
                    super::cell_range(title, LAST, LAST, e.row),
                    vec![vec![Cell::String(text)]],
                ));
            }
            let col = layout.marker_cell.col;
            if e.activity.is_none_or(|a| a < at) {
                out.push(ValueRange::new(
                    super::cell_range(title, col, col, e.row),
                    vec![vec![Cell::from(at)]],
                ));
            }
        }
    }
    out
}

/// The panels to hide now: visible, listed on the index, idle for `hide_after`, and with
/// nothing running or waiting. A target missing from the index is never hidden (nothing
/// records its activity).
pub fn idle_panels<'a>(
    entries: &[IndexEntry],
    panels: &'a PanelIndex,
    meta: &SpreadsheetMeta,
    hide_after: Option<std::time::Duration>,
    now: DateTime<Utc>,
    tz: Tz,
) -> Vec<(&'a PanelRef, u32)> {
    entries
        .iter()
        .filter(|e| e.state.is_empty() && is_idle(e.activity, hide_after, now, tz))
        .filter_map(|e| {
            let p = panels.get(&e.label)?;
            let visible = meta
                .sheets
                .iter()
                .any(|s| s.sheet_id == p.sheet_id && !s.hidden);
            visible.then_some((p, e.row))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::fixtures::*;
    use crate::panel::PanelRow;
    use serde_json::json;

    #[test]
    fn entries_are_read_by_column_and_blank_rows_are_skipped() {
        let values = vec![
            vec![json!("▶"), json!("対象")],
            vec![
                json!(false),
                json!(" サーバーA "),
                json!("ラック1"),
                json!("開く"),
                json!(""),
                json!("再起動: ✅ 完了"),
                json!(46000.5),
            ],
            vec![],
            vec![json!(true), json!("サーバーB")],
        ];
        let entries = parse_entries(&values, &PanelLayout::default());
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[0].label, "サーバーA");
        assert_eq!(entries[0].activity, Some(46000.5));
        assert_eq!((entries[1].row, entries[1].ticked), (4, true));
    }

    #[test]
    fn state_text_names_the_running_function_and_counts_the_waiting() {
        let rows = [
            queue_row(2, State::Running, "A", "再起動"),
            queue_row(3, State::Waiting, "A", "確認"),
            queue_row(4, State::Waiting, "A", "確認"),
            queue_row(5, State::Done, "A", "確認"),
            queue_row(6, State::Waiting, "B", "確認"),
            queue_row(7, State::AwaitingApproval, "B", "再起動"),
            queue_row(8, State::AwaitingApproval, "D", "再起動"),
        ];
        assert_eq!(state_text("A", &rows), "▶ 実行中: 再起動 (待機 2 件)");
        assert_eq!(state_text("B", &rows), "⏳ 待機 1 件 · 承認待ち 1 件");
        assert_eq!(state_text("C", &rows), "");
        assert_eq!(state_text("D", &rows), "🙋 承認待ち 1 件");
    }

    #[test]
    fn the_last_result_is_the_row_updated_last() {
        let row = |function: &str, status: &str, updated: Cell| PanelRow {
            row: 8,
            ticked: false,
            cancel_ticked: false,
            approve_ticks: Vec::new(),
            function: function.into(),
            status: status.into(),
            result: String::new(),
            updated,
            command: String::new(),
            args_json: String::new(),
            flags: String::new(),
            inputs: Vec::new(),
        };
        let table = PanelTable {
            rows: vec![
                row("確認", "✅ 完了", json!(46000.0)),
                row("再起動", "❌ エラー", json!(46001.0)),
                row("未使用", "", Cell::Null),
            ],
        };
        assert_eq!(
            last_result(&table),
            Some((46001.0, "再起動: ❌ エラー".to_string()))
        );
        assert_eq!(last_result(&PanelTable::default()), None);
    }

    #[test]
    fn the_index_shows_no_acting_character_of_a_label_or_status_and_stays_short() {
        let hostile = format!(
            "{}{}",
            crate::sheet_text::every_acting_character(),
            "長".repeat(60_000)
        );
        let running = queue_row(2, State::Running, "A", &hostile);
        let state = state_text("A", [&running]);
        let table = PanelTable {
            rows: vec![PanelRow {
                row: 8,
                function: hostile.clone(),
                status: hostile.clone(),
                updated: json!(46000.0),
                ..PanelRow::default()
            }],
        };
        let (_, last) = last_result(&table).unwrap_or_default();
        for (cell, text, kept) in [("状況", &state, ""), ("最終結果", &last, "\n\t")] {
            let raw: Vec<char> = text
                .chars()
                .filter(|c| crate::sheet_text::acts(*c) && !kept.contains(*c))
                .collect();
            assert!(raw.is_empty(), "{cell} carries {raw:?} raw");
            assert!(
                text.chars().count() < 10_000,
                "{cell} stays far below Google's 50,000 characters a cell: {} characters",
                text.chars().count()
            );
        }
    }

    #[test]
    fn idle_means_older_than_hide_after_and_unknown_is_never_idle() {
        let now = at(0);
        let day = std::time::Duration::from_secs(86_400);
        let serial =
            |days: i64| sheet_time::instant_to_serial(now - chrono::Duration::days(days), tz());
        assert!(is_idle(Some(serial(15)), Some(day * 14), now, tz()));
        assert!(!is_idle(Some(serial(13)), Some(day * 14), now, tz()));
        assert!(!is_idle(None, Some(day * 14), now, tz()));
        assert!(!is_idle(Some(serial(400)), None, now, tz()));
        assert_eq!(later(Some(1.0), Some(2.0)), Some(2.0));
        assert_eq!(later(None, Some(2.0)), Some(2.0));
    }
}
