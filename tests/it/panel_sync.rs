//! Panels as a product, end to end on the emulator: `panels sync` builds the index and the
//! panels from the config in three requests, a config change re-syncs them, a press on a
//! generated panel runs, a tick on the index creates a missing panel, idle panels are
//! hidden, an old panel sheet is migrated, and each panel's markers and hidden columns are
//! protected so that people press and type only where they should.

use std::time::Duration;

use serde_json::json;
use sheetq::apply::panel::{self as panels, SyncRequest};
use sheetq::config::Config;
use sheetq::emulator::{Emulator, EmulatorOptions, Quota, Seed};
use sheetq::panel::catalog::PANELS_COMMAND;
use sheetq::queue::{self, State};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);

const FUNCTIONS: &str = r#"
[[functions]]
label = "動作確認"
command = "echo"
args = { hello = "world" }

[[functions]]
label = "再起動"
command = "sleep"
args = { seconds = 0.2 }
flags = ["heavy"]

[[functions]]
label = "バックアップ"
command = "sleep"
args = { seconds = 0.1 }
"#;

fn targets(n: usize) -> String {
    (1..=n)
        .map(|i| format!("[[targets]]\nlabel = \"server-{i}\"\nposition = \"rack {i}\"\n"))
        .collect()
}

/// An empty spreadsheet whose quota lets a daemon poll every 100 ms.
async fn start_fast_empty() -> Emulator {
    start_with(EmulatorOptions {
        seed: Seed::Empty,
        quota: Some(Quota::scaled(50)),
        ..EmulatorOptions::default()
    })
    .await
}

/// `sheetq init`: the queue and worker sheets a daemon needs.
async fn init(emu: &Emulator, config: &Config) {
    sheetq::admin::init(client(emu, config).await.as_ref(), config)
        .await
        .unwrap_or_else(|e| panic!("init: {e}"));
}

fn config(emu: &Emulator, dir: &std::path::Path, extra: &str) -> Config {
    daemon_config(emu, "sync", dir, &[], extra)
}

async fn sync(emu: &Emulator, config: &Config, request: SyncRequest) -> panels::SyncDone {
    let sheets = client(emu, config).await;
    panels::sync(sheets.as_ref(), config, &request, None)
        .await
        .unwrap_or_else(|e| panic!("sync failed: {e}"))
}

fn open_all() -> SyncRequest {
    SyncRequest {
        open_all: true,
        ..SyncRequest::default()
    }
}

fn text_rows(emu: &Emulator, range: &str) -> Vec<Vec<String>> {
    emu.values(range)
        .unwrap_or_else(|e| panic!("cannot read {range}: {e:?}"))
        .iter()
        .map(|r| r.iter().map(queue::cell_text).collect())
        .collect()
}

fn titles(emu: &Emulator) -> Vec<(String, bool)> {
    emu.with_spreadsheet(|ss| {
        ss.sheets
            .iter()
            .map(|s| (s.title.clone(), s.hidden))
            .collect()
    })
    .unwrap_or_else(|e| panic!("{e:?}"))
}

fn is_hidden(emu: &Emulator, title: &str) -> bool {
    titles(emu)
        .into_iter()
        .find(|(t, _)| t == title)
        .unwrap_or_else(|| panic!("no sheet {title}: {:?}", titles(emu)))
        .1
}

/// Requests the emulator saw since the log was cleared, except token fetches.
fn api_requests(emu: &Emulator) -> Vec<String> {
    emu.requests()
        .into_iter()
        .map(|r| r.method)
        .filter(|m| m != "oauth2.token")
        .collect()
}

#[tokio::test]
async fn sync_builds_the_index_and_twelve_panels_in_three_requests() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(12)));
    emu.clear_requests();
    let done = sync(&emu, &config, open_all()).await;
    assert_eq!(
        api_requests(&emu),
        [
            "spreadsheets.get",
            "spreadsheets.values.batchGet",
            "spreadsheets.batchUpdate"
        ],
        "a sync of any number of panels is the metadata, one read and one batch"
    );
    assert_eq!(done.report.created.len(), 12, "{}", done.report);

    let sheets = titles(&emu);
    assert_eq!(
        sheets[0].0, "▶パネル",
        "the index is the first sheet: {sheets:?}"
    );
    let index = text_rows(&emu, "'▶パネル'!A1:G13");
    assert_eq!(
        index[0][..6],
        ["▶", "対象", "位置", "パネル", "状況", "最終結果"]
    );
    assert_eq!(index[0][6], "PANEL_INDEX");
    assert_eq!(index[1][..4], ["FALSE", "server-1", "rack 1", "開く"]);
    assert_eq!(index[12][1], "server-12");

    let panel = text_rows(&emu, "'server-3'!A1:J10");
    assert_eq!(panel[0][6], "PANEL_V2");
    assert_eq!(panel[1][6], "server-3");
    assert_eq!(panel[2][6], "rack 3");
    assert_eq!(panel[6][..5], ["▶", "機能", "状態", "結果", "更新日時"]);
    assert_eq!(
        panel[7..10]
            .iter()
            .map(|r| (
                r[0].as_str(),
                r[1].as_str(),
                r[7].as_str(),
                r[8].as_str(),
                r.get(9).map_or("", String::as_str)
            ))
            .collect::<Vec<_>>(),
        [
            ("FALSE", "動作確認", "echo", r#"{"hello":"world"}"#, ""),
            ("FALSE", "再起動", "sleep", r#"{"seconds":0.2}"#, "heavy"),
            ("FALSE", "バックアップ", "sleep", r#"{"seconds":0.1}"#, ""),
        ]
    );
    emu.with_spreadsheet(|ss| {
        let s = ss
            .sheet_by_title("server-3")
            .unwrap_or_else(|| panic!("no panel"));
        for row in 7..10 {
            assert!(
                s.cell(row, 0).is_some_and(|c| c.validation.is_some()),
                "row {} of the panel must hold a checkbox",
                row + 1
            );
        }
        assert!(s.cell(10, 0).is_none_or(|c| c.validation.is_none()));
        assert_eq!(
            s.hidden_columns,
            [6, 7, 8, 9],
            "markers and copies are hidden"
        );
        assert_eq!(s.frozen_row_count, 7);
    })
    .unwrap_or_else(|e| panic!("{e:?}"));

    // Nothing changed: nothing is written.
    emu.clear_requests();
    let again = sync(&emu, &config, SyncRequest::default()).await;
    assert_eq!(again.batch_len, 0, "{}", again.report);
    assert_eq!(api_requests(&emu).len(), 2);
    assert_eq!(again.report.unchanged.len(), 12);
}

#[tokio::test]
async fn a_config_change_resyncs_every_panel_and_keeps_what_rows_show() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let before = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(3)));
    sync(&emu, &before, open_all()).await;
    // A result shown on 再起動 of server-2, and a pending tick on its バックアップ.
    set_cells(
        &emu,
        "'server-2'!C9:E9",
        json!([["✅ 完了 12:00", "ok", 46000.5]]),
    );
    set_cells(&emu, "'server-2'!A10", json!([[true]]));

    // 動作確認 dropped, 再起動 now runs echo, a new function last.
    let after = config(
        &emu,
        dir.path(),
        &format!(
            "{}{}",
            r#"
[[functions]]
label = "バックアップ"
command = "sleep"
args = { seconds = 0.1 }

[[functions]]
label = "再起動"
command = "echo"

[[functions]]
label = "ログ取得"
command = "echo"
args = { lines = 100 }
"#,
            targets(3)
        ),
    );
    emu.clear_requests();
    let done = sync(&emu, &after, SyncRequest::default()).await;
    assert_eq!(api_requests(&emu).len(), 3);
    assert_eq!(done.report.refreshed.len(), 3, "{}", done.report);
    assert!(done.report.created.is_empty());

    let rows = text_rows(&emu, "'server-2'!A8:J11");
    let table: Vec<_> = rows
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.resize(10, String::new());
            (r[0].clone(), r[1].clone(), r[2].clone(), r[7].clone())
        })
        .collect();
    assert_eq!(
        table,
        [
            (
                "TRUE".into(),
                "バックアップ".into(),
                String::new(),
                "sleep".into()
            ),
            (
                "FALSE".into(),
                "再起動".into(),
                "✅ 完了 12:00".into(),
                "echo".into()
            ),
            (
                "FALSE".into(),
                "ログ取得".into(),
                String::new(),
                "echo".into()
            ),
        ],
        "rows follow the config; each keeps its tick and status by label"
    );
    assert!(
        rows.get(3).is_none_or(|r| r.iter().all(String::is_empty)),
        "the dropped function's row is gone: {rows:?}"
    );
}

#[tokio::test]
async fn a_press_on_a_generated_panel_runs_and_a_dropped_function_is_refused() {
    let emu = start_fast_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let extra = format!("{FUNCTIONS}{}", targets(2));
    let config = config(&emu, dir.path(), &extra);
    init(&emu, &config).await;
    sync(&emu, &config, open_all()).await;
    // A panel row for a function the config does not have (an older panel's copy).
    set_cells(
        &emu,
        "'server-1'!A11:J11",
        json!([[false, "廃止済み", "", "", "", "", "", "echo", "{}", ""]]),
    );
    let fleet = Fleet::start(&emu, &["d1"], &[("intake", "\"poll\"")], &extra).await;
    set_cells(&emu, "'server-1'!A8", json!([[true]]));
    set_cells(&emu, "'server-1'!A11", json!([[true]]));
    let rows = wait_queue_finished(&emu, 2, "both presses to finish", WAIT).await;
    let index = wait_for(
        "the index to show server-1's last result, and nothing running",
        WAIT,
        || {
            let row = text_rows(&emu, "'▶パネル'!A2:G2").pop()?;
            let done = row.get(4).is_some_and(String::is_empty)
                && row.get(5).is_some_and(|last| last.contains(": "));
            done.then_some(row)
        },
        || format!("{:?}", text_rows(&emu, "'▶パネル'!A1:G3")),
    )
    .await;
    assert!(
        index[5].starts_with("動作確認: ✅") || index[5].starts_with("廃止済み: ❌"),
        "the last result names its function: {index:?}"
    );
    assert!(
        index[6].parse::<f64>().is_ok(),
        "the last activity is recorded for idle-hiding: {index:?}"
    );
    fleet.stop(&emu).await;
    let ran = rows
        .iter()
        .find(|r| r.function == "動作確認")
        .unwrap_or_else(|| panic!("{}", describe_queue(&rows)));
    assert!(ran.state.is(State::Done), "{}", describe_queue(&rows));
    assert!(ran.message.contains("world"), "{}", ran.message);
    let dropped = rows
        .iter()
        .find(|r| r.function == "廃止済み")
        .unwrap_or_else(|| panic!("{}", describe_queue(&rows)));
    assert!(dropped.state.is(State::Error), "{}", describe_queue(&rows));
    assert!(
        dropped.message.contains("sheetq panels sync"),
        "{}",
        dropped.message
    );
    let cells = panel_row(&emu, "server-1", 8);
    assert!(
        cells[2].starts_with("✅"),
        "the result lands on the panel: {cells:?}"
    );
}

#[tokio::test]
async fn a_tick_on_the_index_creates_the_missing_panel() {
    let emu = start_fast_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let extra = format!("{FUNCTIONS}{}", targets(3));
    // People may add targets on the index (server-x is none of [[targets]]).
    let config = daemon_config(
        &emu,
        "sync",
        dir.path(),
        &[("targets_from_index", "true")],
        &extra,
    );
    init(&emu, &config).await;
    let done = sync(&emu, &config, SyncRequest::default()).await;
    assert!(
        done.report.created.is_empty(),
        "no panel until asked: {}",
        done.report
    );
    assert_eq!(text_rows(&emu, "'▶パネル'!D3")[0][0], "未作成 (▶ で作成)");
    // A person adds a target to the index by hand, then ticks it and server-2.
    set_cells(
        &emu,
        "'▶パネル'!A5:C5",
        json!([[false, "server-x", "annex"]]),
    );
    let fleet = Fleet::start(
        &emu,
        &["d1"],
        &[("intake", "\"poll\""), ("targets_from_index", "true")],
        &extra,
    )
    .await;
    set_cells(&emu, "'▶パネル'!A3", json!([[true]]));
    set_cells(&emu, "'▶パネル'!A5", json!([[true]]));
    let rows = wait_queue_finished(&emu, 1, "the panel job to finish", WAIT).await;
    fleet.stop(&emu).await;
    assert_eq!(rows[0].command, PANELS_COMMAND);
    assert!(rows[0].state.is(State::Done), "{}", describe_queue(&rows));
    let sheets: Vec<String> = titles(&emu).into_iter().map(|(t, _)| t).collect();
    assert!(sheets.contains(&"server-2".to_string()), "{sheets:?}");
    assert!(sheets.contains(&"server-x".to_string()), "{sheets:?}");
    assert!(
        !sheets.contains(&"server-1".to_string()),
        "only what was asked: {sheets:?}"
    );
    let index = text_rows(&emu, "'▶パネル'!A1:D5");
    assert_eq!(
        index[2][..4],
        ["FALSE", "server-2", "rack 2", "開く"],
        "{index:?}"
    );
    assert_eq!(
        index[4][..4],
        ["FALSE", "server-x", "annex", "開く"],
        "{index:?}"
    );
    assert_eq!(index[1][3], "未作成 (▶ で作成)");
    // The daemon protects the panels it makes, as `panels sync` does.
    let service_account = client(&emu, &config).await;
    for title in ["server-2", "server-x"] {
        assert_eq!(
            protected_areas(service_account.as_ref(), title).await.len(),
            4,
            "{title}: its markers G1:G3 and G5, its labels B and G:J"
        );
    }
}

#[tokio::test]
async fn idle_panels_are_hidden_and_shown_again_when_asked() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = daemon_config(
        &emu,
        "sync",
        dir.path(),
        &[("hide_panels_after", "\"14d\"")],
        &format!("{FUNCTIONS}{}", targets(2)),
    );
    sync(&emu, &config, open_all()).await;
    // server-1's last activity: 20 days ago.
    let tz = chrono_tz::Asia::Tokyo;
    let old =
        sheetq::sheet_time::instant_to_serial(chrono::Utc::now() - chrono::Duration::days(20), tz);
    set_cells(&emu, "'▶パネル'!G2", json!([[old]]));
    let done = sync(&emu, &config, SyncRequest::default()).await;
    assert_eq!(done.report.hidden, ["server-1"], "{}", done.report);
    assert!(is_hidden(&emu, "server-1"), "hidden, not deleted");
    assert!(!is_hidden(&emu, "server-2"));
    assert_eq!(text_rows(&emu, "'▶パネル'!D2")[0][0], "非表示 (▶ で表示)");

    let shown = sync(
        &emu,
        &config,
        SyncRequest {
            open: vec!["server-1".into()],
            ..SyncRequest::default()
        },
    )
    .await;
    assert_eq!(shown.report.shown, ["server-1"], "{}", shown.report);
    assert!(!is_hidden(&emu, "server-1"));
    assert_eq!(text_rows(&emu, "'▶パネル'!D2")[0][0], "開く");
    // Asked for now: not idle any more, so the next sync leaves it visible.
    let next = sync(&emu, &config, SyncRequest::default()).await;
    assert!(next.report.hidden.is_empty(), "{}", next.report);
}

#[tokio::test]
async fn the_daemon_hides_an_idle_panel_on_its_own() {
    let emu = start_fast_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let extra = format!("{FUNCTIONS}{}", targets(2));
    let overrides = [("hide_panels_after", "\"14d\"")];
    let config = daemon_config(&emu, "sync", dir.path(), &overrides, &extra);
    init(&emu, &config).await;
    sync(&emu, &config, open_all()).await;
    let old = sheetq::sheet_time::instant_to_serial(
        chrono::Utc::now() - chrono::Duration::days(30),
        chrono_tz::Asia::Tokyo,
    );
    set_cells(&emu, "'▶パネル'!G3", json!([[old]]));
    let fleet = Fleet::start(&emu, &["d1"], &overrides, &extra).await;
    wait_for(
        "the daemon to hide server-2",
        WAIT,
        || is_hidden(&emu, "server-2").then_some(()),
        || format!("{:?}", titles(&emu)),
    )
    .await;
    fleet.stop(&emu).await;
    assert!(!is_hidden(&emu, "server-1"), "server-1 was used just now");
    assert_eq!(text_rows(&emu, "'▶パネル'!D3")[0][0], "非表示 (▶ で表示)");
}

#[tokio::test]
async fn an_old_panel_sheet_becomes_the_index_and_keeps_its_name() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(2)));
    // The old panel: one row per target, its label in column B, a stray label.
    set_cells(
        &emu,
        "'Sheet1'!A1:D4",
        json!([
            ["▶", "対象", "状態", "位置"],
            [false, "server-1", "✅", "old rack"],
            [false, "server-9", "", ""],
            [false, "server-2", "", "hall"],
        ]),
    );
    let sheets = client(&emu, &config).await;
    emu.clear_requests();
    let done = panels::sync(
        sheets.as_ref(),
        &config,
        &SyncRequest {
            migrate: Some(sheetq::panel::sync::Migration {
                title: "Sheet1".into(),
                label_col: 1,
                position_col: Some(3),
                first_row: 2,
            }),
            ..SyncRequest::default()
        },
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("migrate: {e}"));
    assert_eq!(api_requests(&emu).len(), 3);
    assert_eq!(done.report.unresolved, ["server-9"], "{}", done.report);
    let created: Vec<&str> = done.report.created.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(created, ["server-1", "server-2"]);

    let sheets = titles(&emu);
    assert_eq!(
        sheets[0],
        ("Sheet1".to_string(), false),
        "the old title, first: {sheets:?}"
    );
    assert!(
        sheets
            .iter()
            .any(|(t, hidden)| t == "Sheet1 (移行前)" && *hidden),
        "the old content is kept, hidden: {sheets:?}"
    );
    let backup = text_rows(&emu, "'Sheet1 (移行前)'!B3");
    assert_eq!(backup[0][0], "server-9");
    let index = text_rows(&emu, "'Sheet1'!A1:G3");
    assert_eq!(index[0][6], "PANEL_INDEX");
    assert_eq!(index[1][..4], ["FALSE", "server-1", "rack 1", "開く"]);
    assert_eq!(index[2][1], "server-2");
    assert!(
        text_rows(&emu, "'Sheet1'!A4:D4")
            .iter()
            .flatten()
            .all(String::is_empty),
        "nothing of the old content is left below the index"
    );
    // The migrated index is found by its marker from now on.
    let again = sync(&emu, &config, SyncRequest::default()).await;
    assert_eq!(again.batch_len, 0, "{}", again.report);
}

#[tokio::test]
async fn an_index_title_without_its_marker_is_not_overwritten() {
    let emu = start_empty().await;
    emu.batch_update(json!([{ "addSheet": { "properties": { "title": "▶パネル" } } }]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    set_cells(&emu, "'▶パネル'!A1", json!([["a person's notes"]]));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), FUNCTIONS);
    let sheets = client(&emu, &config).await;
    let error = match panels::sync(sheets.as_ref(), &config, &SyncRequest::default(), None).await {
        Ok(done) => panic!(
            "a sync over an unmarked ▶パネル must stop, it did: {}",
            done.report
        ),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("sheetq panels migrate") && error.contains("'▶パネル'"),
        "{error}"
    );
    assert_eq!(text_rows(&emu, "'▶パネル'!A1")[0][0], "a person's notes");
}

#[tokio::test]
async fn twelve_index_ticks_open_their_panels_in_two_steps() {
    let emu = start_fast_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let extra = format!("{FUNCTIONS}{}", targets(12));
    let config = config(&emu, dir.path(), &extra);
    init(&emu, &config).await;
    sync(&emu, &config, SyncRequest::default()).await;
    set_cells(&emu, "'▶パネル'!A2:A13", json!(vec![[true]; 12]));
    let fleet = Fleet::start(&emu, &["d1"], &[("intake", "\"poll\"")], &extra).await;
    let rows = wait_queue_finished(
        &emu,
        2,
        "the panel job and its continuation to finish",
        WAIT,
    )
    .await;
    fleet.stop(&emu).await;
    assert!(
        rows.iter().all(|r| r.state.is(State::Done)),
        "{}",
        describe_queue(&rows)
    );
    assert_eq!(rows[1].args_json, r#"{"open":["server-11","server-12"]}"#);
    let panels = titles(&emu)
        .iter()
        .filter(|(t, _)| t.starts_with("server-"))
        .count();
    assert_eq!(panels, 12);
    let index = text_rows(&emu, "'▶パネル'!A2:D13");
    assert!(
        index.iter().all(|r| r[0] == "FALSE" && r[3] == "開く"),
        "every tick cleared, every link set: {index:?}"
    );
}

#[tokio::test]
async fn a_panel_whose_rows_a_person_deleted_grows_before_it_is_written() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(1)));
    let done = sync(&emu, &config, open_all()).await;
    let id = done.report.created[0].2;
    // A person deletes every row below the table's first two.
    emu.batch_update(json!([{ "deleteDimension": { "range": {
        "sheetId": id, "dimension": "ROWS", "startIndex": 9, "endIndex": 207 } } }]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let more = format!(
        "{FUNCTIONS}{}{}",
        "[[functions]]\nlabel = \"ログ取得\"\ncommand = \"echo\"\n\
         [[functions]]\nlabel = \"停止\"\ncommand = \"echo\"\n",
        targets(1)
    );
    let config = self::config(&emu, dir.path(), &more);
    let done = sync(&emu, &config, SyncRequest::default()).await;
    assert_eq!(done.report.refreshed, ["server-1"], "{}", done.report);
    let rows = text_rows(&emu, "'server-1'!B8:B12");
    assert_eq!(rows[4][0], "停止", "{rows:?}");
}

#[tokio::test]
async fn a_label_on_two_panels_gets_no_third_and_the_index_says_why() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(2)));
    let done = sync(&emu, &config, open_all()).await;
    let id = done.report.panels["server-2"];
    emu.batch_update(
        json!([{ "duplicateSheet": { "sourceSheetId": id, "newSheetName": "server-2 copy" } }]),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    for _ in 0..2 {
        let again = sync(&emu, &config, open_all()).await;
        assert!(again.report.created.is_empty(), "{}", again.report);
        assert!(
            again.report.problems.iter().any(|p| p.contains("server-2")),
            "{}",
            again.report
        );
    }
    let sheets = titles(&emu);
    assert_eq!(
        sheets
            .iter()
            .filter(|(t, _)| t.starts_with("server-2"))
            .count(),
        2,
        "{sheets:?}"
    );
    let link = text_rows(&emu, "'▶パネル'!D3")[0][0].clone();
    assert!(link.contains("複数のパネル"), "{link}");
}

#[tokio::test]
async fn a_panel_with_a_job_waiting_is_not_hidden_however_old_its_last_result() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = daemon_config(
        &emu,
        "sync",
        dir.path(),
        &[("hide_panels_after", "\"14d\"")],
        &format!("{FUNCTIONS}{}", targets(1)),
    );
    sync(&emu, &config, open_all()).await;
    let old = sheetq::sheet_time::instant_to_serial(
        chrono::Utc::now() - chrono::Duration::days(20),
        chrono_tz::Asia::Tokyo,
    );
    set_cells(&emu, "'▶パネル'!E2:G2", json!([["⏳ 待機 1 件", "", old]]));
    let done = sync(&emu, &config, SyncRequest::default()).await;
    assert!(done.report.hidden.is_empty(), "{}", done.report);
    assert!(!is_hidden(&emu, "server-1"));
}

#[tokio::test]
async fn index_rows_stay_where_a_person_put_them_and_their_notes_stay_beside_them() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(2)));
    sync(&emu, &config, SyncRequest::default()).await;
    // A heading row of the person's between the targets, a note beside server-2 (H), a
    // tick waiting on server-2, and a target of their own below.
    emu.batch_update(json!([{ "insertDimension": { "range": {
        "sheetId": sheet_id(&emu, "▶パネル"), "dimension": "ROWS", "startIndex": 2, "endIndex": 3 } } }]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    set_cells(&emu, "'▶パネル'!C3", json!([["-- 大阪拠点 --"]]));
    set_cells(&emu, "'▶パネル'!H4", json!([["担当: 田中"]]));
    set_cells(&emu, "'▶パネル'!A4", json!([[true]]));
    set_cells(&emu, "'▶パネル'!B6", json!([["server-x"]]));
    let more = format!(
        "{FUNCTIONS}{}[[targets]]\nlabel = \"server-new\"\n",
        targets(2)
    );
    let config = self::config(&emu, dir.path(), &more);
    sync(&emu, &config, SyncRequest::default()).await;
    let index = text_rows(&emu, "'▶パネル'!A1:H7");
    let col = |c: usize| -> Vec<String> {
        index
            .iter()
            .map(|r| r.get(c).cloned().unwrap_or_default())
            .collect()
    };
    assert_eq!(
        col(1),
        [
            "対象",
            "server-1",
            "",
            "server-2",
            "",
            "server-x",
            "server-new"
        ],
        "targets keep their rows; a new one goes below: {index:?}"
    );
    assert_eq!(col(2)[2], "-- 大阪拠点 --", "the person's heading stays");
    assert_eq!(col(7)[3], "担当: 田中", "the note stays beside server-2");
    assert_eq!(col(0)[3], "TRUE", "the waiting tick is left for the intake");
    assert_eq!(
        col(3)[5],
        "未作成 (▶ で作成)",
        "the person's target is listed like any"
    );
}

fn sheet_id(emu: &Emulator, title: &str) -> i32 {
    emu.with_spreadsheet(|ss| ss.sheet_by_title(title).map(|s| s.id))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no sheet {title}"))
}

#[tokio::test]
async fn migrating_a_panel_is_refused() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = config(&emu, dir.path(), &format!("{FUNCTIONS}{}", targets(1)));
    sync(&emu, &config, open_all()).await;
    let sheets = client(&emu, &config).await;
    let error = panels::sync(
        sheets.as_ref(),
        &config,
        &SyncRequest {
            migrate: Some(sheetq::panel::sync::Migration {
                title: "server-1".into(),
                label_col: 1,
                position_col: None,
                first_row: 2,
            }),
            ..SyncRequest::default()
        },
        None,
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(error.contains("is a panel"), "{error}");
}

/// The areas of the protected ranges on sheet `title`, as the service account reads them.
async fn protected_areas(
    sheets: &dyn sheetq::sheets::Sheets,
    title: &str,
) -> Vec<sheetq::sheets::Area> {
    let meta = sheets
        .metadata()
        .await
        .unwrap_or_else(|e| panic!("metadata: {e}"));
    meta.sheet(title)
        .unwrap_or_else(|| panic!("no sheet {title}"))
        .protected_ranges
        .iter()
        .map(|p| p.area)
        .collect()
}

#[tokio::test]
async fn sync_protects_each_panels_markers_labels_and_hidden_columns_and_leaves_the_rest_to_people()
{
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let catalog = format!("{FUNCTIONS}{}", targets(3));
    let open = daemon_config(&emu, "sync", dir.path(), &[("protect", "false")], &catalog);
    sync(&emu, &open, open_all()).await;
    // What people and the daemon left on the panels before protection came.
    set_cells(
        &emu,
        "'server-2'!C9:E9",
        json!([["✅ 完了 12:00", "ok", 46000.5]]),
    );
    set_cells(&emu, "'server-2'!A10", json!([[true]]));
    // The index takes in the result: what follows changes only protection.
    sync(&emu, &open, SyncRequest::default()).await;
    let panel_before = text_rows(&emu, "'server-2'!A1:J10");
    let index_before = text_rows(&emu, "'▶パネル'!A1:G4");
    let sheets = client(&emu, &open).await;
    assert_eq!(
        protected_areas(sheets.as_ref(), "server-2").await,
        Vec::new(),
        "protect = false leaves the panels open"
    );

    let protected = daemon_config(&emu, "sync", dir.path(), &[], &catalog);
    emu.clear_requests();
    let done = sync(&emu, &protected, SyncRequest::default()).await;
    assert_eq!(
        api_requests(&emu),
        [
            "spreadsheets.get",
            "spreadsheets.values.batchGet",
            "spreadsheets.batchUpdate"
        ],
        "the protections ride in the sync's one batch"
    );
    assert_eq!(
        done.report.protected.len(),
        3 * 4 + 1,
        "per panel G1:G3, G5, B and G:J, and the index's hidden column: {}",
        done.report
    );
    assert_eq!(
        text_rows(&emu, "'server-2'!A1:J10"),
        panel_before,
        "protecting changes no cell of a panel"
    );
    assert_eq!(text_rows(&emu, "'▶パネル'!A1:G4"), index_before);

    let g = |rows: std::ops::Range<u32>| {
        let mut a = sheetq::sheets::Area::columns(0, 6, 7);
        a.start_row = rows.start;
        a.end_row = Some(rows.end);
        a
    };
    let mut areas = protected_areas(sheets.as_ref(), "server-2").await;
    let id = areas.first().map(|a| a.sheet_id).unwrap_or_default();
    areas.sort_by_key(|a| (a.start_col, a.start_row));
    let mut expected = vec![
        sheetq::sheets::Area {
            sheet_id: id,
            ..g(0..3)
        },
        sheetq::sheets::Area {
            sheet_id: id,
            ..g(4..5)
        },
        sheetq::sheets::Area::columns(id, 1, 2),
        sheetq::sheets::Area::columns(id, 6, 10),
    ];
    expected.sort_by_key(|a| (a.start_col, a.start_row));
    assert_eq!(
        areas, expected,
        "the markers, the labels B and G:J (the hidden inputs, command, argsJSON and flags), every row"
    );

    // A person, editor of the file, presses and types where people do, and nowhere else.
    let alice = "alice@example.com";
    for (range, value, allowed) in [
        ("'server-2'!A8", json!([[true]]), true),
        ("'▶パネル'!B5", json!([["server-9"]]), true),
        ("'server-2'!H8", json!([["rm"]]), false),
        ("'server-2'!B8", json!([["another label"]]), false),
        (
            "'server-2'!I8",
            json!([[r#"{"target":"-oProxyCommand=id"}"#]]),
            false,
        ),
        ("'server-2'!G2", json!([["server-1"]]), false),
        ("'▶パネル'!G2", json!([[0]]), false),
    ] {
        let (status, body) = person_writes(&emu, alice, range, value).await;
        assert_eq!(
            status == 200,
            allowed,
            "a person writing {range} must be {}: {status} {body}",
            if allowed { "allowed" } else { "refused" }
        );
    }

    emu.clear_requests();
    let again = sync(&emu, &protected, SyncRequest::default()).await;
    assert!(
        again.report.protected.is_empty(),
        "protected once is protected: {}",
        again.report
    );
}
