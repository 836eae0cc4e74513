//! Starting contents of a fresh emulator spreadsheet: `empty` (one sheet, `Sheet1`) or
//! `demo`, the layout of docs/design.md §1: the index sheet `▶パネル` first, three panel sheets with
//! markers and a function table of real checkboxes, the hidden `_ジョブキュー` with its header,
//! and the hidden `_ワーカー` with a free lease cell.
//!
//! Sheet ids of the demo are fixed so that tests and people can refer to them.

use serde_json::json;

use super::store::{NumberFormat, Sheet, Spreadsheet, Value};
use super::values;

/// Which spreadsheet a fresh emulator starts with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Seed {
    /// The docs/design.md §1 layout: index, three panels, queue, worker sheet.
    #[default]
    Demo,
    /// One empty sheet named `Sheet1`.
    Empty,
}

pub const INDEX_TITLE: &str = "▶パネル";
pub const QUEUE_TITLE: &str = "_ジョブキュー";
pub const WORKER_TITLE: &str = "_ワーカー";
pub const INDEX_SHEET_ID: i32 = 0;
pub const QUEUE_SHEET_ID: i32 = 2001;
pub const WORKER_SHEET_ID: i32 = 3001;
pub const LOG_SHEET_ID: i32 = 4001;
/// The job log sheet, as `sheetq init` makes it.
pub const LOG_TITLE: &str = "_ジョブログ";
/// The job log's header, as `sheetq init` writes it.
pub const LOG_HEADER: [&str; 6] = [
    "jobId",
    "対象ラベル",
    "機能ラベル",
    "開始日時",
    "終了日時",
    "出力",
];
/// The header of a panel's ■ column, as `sheetq panels sync` writes it.
pub const CANCEL_HEADER: &str = "■ 中止";

/// Queue header (docs/design.md §1.1), in default order, as `sheetq init` writes it.
pub const QUEUE_HEADER: [&str; 19] = [
    "jobId",
    "受付日時",
    "依頼者",
    "パネルシート名",
    "パネル行",
    "対象ラベル",
    "機能ラベル",
    "command",
    "argsJSON",
    "システムフラグ",
    "状態",
    "開始日時",
    "終了日時",
    "結果URL",
    "メッセージ",
    "ワーカー",
    "中止要求",
    "承認",
    "入力",
];

/// The demo's panels: (sheet id, title, target label, position).
pub const PANELS: [(i32, &str, &str, &str); 3] = [
    (1001, "サーバーA", "サーバーA", "東京/ラック1"),
    (1002, "サーバーB", "サーバーB", "東京/ラック2"),
    (1003, "サーバーC", "サーバーC", "大阪/ラック1"),
];

/// The demo's functions: (label, command, argsJSON, flags). `broken` is deliberately not a
/// configured command, so the demo can show a failure.
pub const FUNCTIONS: [(&str, &str, &str, &str); 4] = [
    ("動作確認 (2秒)", "sleep", r#"{"seconds":2}"#, ""),
    ("再起動 (5秒)", "sleep", r#"{"seconds":5}"#, ""),
    ("バックアップ (10秒)", "sleep", r#"{"seconds":10}"#, "heavy"),
    ("未設定の機能", "broken", "{}", ""),
];

pub fn build(seed: Seed, id: String) -> Spreadsheet {
    match seed {
        Seed::Empty => {
            let mut ss = Spreadsheet::new(id, "sheetq (empty)");
            ss.sheets.push(Sheet::new(0, "Sheet1"));
            ss
        }
        Seed::Demo => demo(id),
    }
}

fn text(s: &mut Sheet, r: u32, c: u32, v: &str) {
    s.set_value(r, c, Some(Value::String(v.to_string())));
}

fn demo(id: String) -> Spreadsheet {
    let mut ss = Spreadsheet::new(id, "sheetq demo");
    let now = chrono::Utc::now()
        .with_timezone(&chrono_tz::Asia::Tokyo)
        .naive_local();

    // The index as `sheetq panels sync` lays it out.
    let mut index = Sheet::new(INDEX_SHEET_ID, INDEX_TITLE);
    for (c, h) in ["▶", "対象", "位置", "パネル", "状況", "最終結果"]
        .iter()
        .enumerate()
    {
        text(&mut index, 0, c as u32, h);
    }
    text(&mut index, 0, 6, "PANEL_INDEX");
    index.frozen_row_count = 1;
    index.hidden_columns = vec![6];
    for (i, (sid, _, label, pos)) in PANELS.iter().enumerate() {
        let r = i as u32 + 1;
        index.set_value(r, 0, Some(Value::Bool(false)));
        index.cell_mut(r, 0).validation =
            Some(Box::new(json!({ "condition": { "type": "BOOLEAN" } })));
        text(&mut index, r, 1, label);
        text(&mut index, r, 2, pos);
        index.set_value(
            r,
            3,
            Some(Value::Formula(format!(
                "=HYPERLINK(\"#gid={sid}\", \"開く\")"
            ))),
        );
        index.set_value(r, 6, Some(Value::Number(values::to_serial(now))));
    }
    ss.sheets.push(index);

    for (sid, title, label, pos) in PANELS {
        let mut p = Sheet::new(sid, title);
        text(&mut p, 0, 6, "PANEL_V2");
        text(&mut p, 1, 6, label);
        text(&mut p, 2, 6, pos);
        p.set_value(4, 6, Some(Value::Number(values::to_serial(now))));
        p.cell_mut(4, 6).number_format = Some(Box::new(NumberFormat {
            kind: "DATE_TIME".into(),
            pattern: "yyyy/MM/dd HH:mm:ss".into(),
        }));
        text(&mut p, 0, 0, label);
        text(&mut p, 1, 0, &format!("位置: {pos}"));
        for (c, h) in [
            (0, "▶"),
            (1, "機能"),
            (2, "状態"),
            (3, "結果"),
            (4, "更新日時"),
            (5, CANCEL_HEADER),
            (7, "command"),
            (8, "argsJSON"),
            (9, "システムフラグ"),
        ] {
            text(&mut p, 6, c, h);
        }
        for (i, (flabel, cmd, args, flags)) in FUNCTIONS.iter().enumerate() {
            let r = 7 + i as u32;
            // ▶ and ■, as `panels sync` makes them: real checkboxes.
            for c in [0, 5] {
                p.set_value(r, c, Some(Value::Bool(false)));
                p.cell_mut(r, c).validation =
                    Some(Box::new(json!({ "condition": { "type": "BOOLEAN" } })));
            }
            text(&mut p, r, 1, flabel);
            // 更新日時 shows the serials sheetq writes as dates, as `panels sync` formats it.
            p.cell_mut(r, 4).number_format = Some(Box::new(NumberFormat {
                kind: "DATE_TIME".into(),
                pattern: "yyyy/MM/dd HH:mm:ss".into(),
            }));
            text(&mut p, r, 7, cmd);
            text(&mut p, r, 8, args);
            if !flags.is_empty() {
                text(&mut p, r, 9, flags);
            }
        }
        p.frozen_row_count = 7;
        p.hidden_columns = vec![6, 7, 8, 9];
        ss.sheets.push(p);
    }

    let mut queue = Sheet::new(QUEUE_SHEET_ID, QUEUE_TITLE);
    for (c, h) in QUEUE_HEADER.iter().enumerate() {
        text(&mut queue, 0, c as u32, h);
    }
    queue.hidden = true;
    queue.frozen_row_count = 1;
    // 受付日時, 開始日時 and 終了日時 as `sheetq init` formats them: the whole column.
    for c in [1, 11, 12] {
        date_column(&mut queue, c, 0);
    }
    ss.sheets.push(queue);

    let mut worker = Sheet::new(WORKER_SHEET_ID, WORKER_TITLE);
    text(&mut worker, 0, 0, "lease");
    text(&mut worker, 0, 1, "free");
    for (c, h) in ["daemon", "host", "version", "slots", "running", "lastSeen"]
        .iter()
        .enumerate()
    {
        text(&mut worker, 1, c as u32, h);
    }
    worker.hidden = true;
    date_column(&mut worker, 5, 2);
    ss.sheets.push(worker);

    let mut log = Sheet::new(LOG_SHEET_ID, LOG_TITLE);
    for (c, h) in LOG_HEADER.iter().enumerate() {
        text(&mut log, 0, c as u32, h);
    }
    log.hidden = true;
    log.frozen_row_count = 1;
    for c in [3, 4] {
        date_column(&mut log, c, 0);
    }
    ss.sheets.push(log);
    ss
}

/// Column `col` of `sheet` from row `from` to the grid's end shows serials as date-times,
/// as `sheetq init` formats a hidden sheet's date columns.
fn date_column(sheet: &mut Sheet, col: u32, from: u32) {
    for r in from..sheet.row_count {
        sheet.cell_mut(r, col).number_format = Some(Box::new(NumberFormat {
            kind: "DATE_TIME".into(),
            pattern: "yyyy/mm/dd hh:mm:ss".into(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_has_the_design_layout() {
        let ss = build(Seed::Demo, "x".into());
        let titles: Vec<&str> = ss.sheets.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles[0], INDEX_TITLE, "index sheet must come first");
        assert_eq!(
            titles.len(),
            7,
            "index, three panels, queue, workers, log: {titles:?}"
        );
        let queue = ss
            .sheet_by_title(QUEUE_TITLE)
            .unwrap_or_else(|| panic!("no queue"));
        assert!(queue.hidden);
        assert_eq!(queue.value(0, 15), Some(&Value::String("ワーカー".into())));
        assert!(
            queue
                .rows
                .iter()
                .skip(1)
                .all(|r| r.iter().all(|c| c.value.is_none())),
            "queue must hold only its header"
        );
        assert!(
            queue
                .cell(1, 1)
                .and_then(|c| c.number_format.as_ref())
                .is_some_and(|f| f.kind == "DATE_TIME"),
            "受付日時 is formatted as init formats it"
        );
        let worker = ss
            .sheet_by_title(WORKER_TITLE)
            .unwrap_or_else(|| panic!("no worker"));
        assert_eq!(worker.value(0, 1), Some(&Value::String("free".into())));
        let panel = &ss.sheets[1];
        assert_eq!(panel.value(0, 6), Some(&Value::String("PANEL_V2".into())));
        assert!(panel.cell(7, 0).is_some_and(|c| c.is_checkbox()));
        assert_eq!(panel.value(10, 7), Some(&Value::String("broken".into())));
    }
}
