//! End-to-end behaviour of the panel side (docs/design.md §1.2, §2): ticks taken in by polling,
//! the waiting/running/result texts on panel rows, panels found by marker after renames and
//! moves, and unknown commands. Daemons run in this process against the emulator.

use std::time::Duration;

use serde_json::json;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::{QueueRow, State};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);
const POLL: (&str, &str) = ("intake", "\"poll\"");
/// Daemons polling every 100 ms read 600 times a minute: Google's quota times 50 gives each
/// of the clients sharing the test's account (`support::budget_share`) about 740 requests a
/// minute, so the daemons' own budgets, not the emulator's 429s, hold them back.
const FAST: Quota = Quota::scaled(50);
/// For daemons polling every 50 ms (1200 reads a minute each): about 1490 a minute each.
const FASTER: Quota = Quota::scaled(100);

fn tick(emu: &Emulator, title: &str, row: u32) {
    emu.set_values(&format!("'{title}'!A{row}"), json!([[true]]), false)
        .unwrap_or_else(|e| panic!("cannot tick {title}!A{row}: {e:?}"));
}

/// Sets the hidden argsJSON of a panel function row.
fn set_args(emu: &Emulator, title: &str, row: u32, args: &str) {
    emu.set_values(&format!("'{title}'!I{row}"), json!([[args]]), false)
        .unwrap_or_else(|e| panic!("cannot set {title}!I{row}: {e:?}"));
}

async fn wait_status(
    emu: &Emulator,
    title: &str,
    row: u32,
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> Vec<String> {
    wait_for(
        &format!("{title} row {row} to show {what}"),
        WAIT,
        || {
            let cells = panel_row(emu, title, row);
            ok(&cells[2]).then_some(cells)
        },
        || {
            format!(
                "panel row: {:?}\nqueue:\n{}",
                panel_row(emu, title, row),
                describe_queue(&queue_rows(emu))
            )
        },
    )
    .await
}

fn rows_for<'a>(rows: &'a [QueueRow], target: &str, function: &str) -> Vec<&'a QueueRow> {
    rows.iter()
        .filter(|r| r.target == target && r.function == function)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticked_box_becomes_one_row_that_runs_and_the_panel_follows_it() {
    let emu = start_with_quota(FAST).await;
    let p = "サーバーA";
    set_args(&emu, p, 8, r#"{"seconds":1.5}"#);
    set_args(&emu, p, 9, r#"{"seconds":0.2}"#);
    // One slot, so that the second press on another function of the same target waits.
    let fleet = Fleet::start(&emu, &["vm-1"], &[POLL, ("slots", "1")], "").await;
    tick(&emu, p, 8);
    let running = wait_status(&emu, p, 8, "▶ 実行中", |s| s.starts_with("▶ 実行中 (")).await;
    assert_eq!(
        running[0], "FALSE",
        "the ▶ box is cleared once the press is taken: {running:?}"
    );
    // The index says so in the same write as the panel, not a poll later.
    let index = sheet_values(&emu, "▶パネル");
    let state = index
        .iter()
        .find(|r| r.get(1).map(sheetq::queue::cell_text).as_deref() == Some(p))
        .and_then(|r| r.get(sheetq::panel::index_sheet::STATE as usize))
        .map(sheetq::queue::cell_text)
        .unwrap_or_default();
    assert_eq!(
        state, "▶ 実行中: 動作確認 (2秒)",
        "the index's 状況 of {p} agrees with its panel: {index:?}"
    );
    let rows = queue_rows(&emu);
    assert_eq!(
        rows.len(),
        1,
        "one tick, one row:\n{}",
        describe_queue(&rows)
    );
    let r = &rows[0];
    assert_eq!(
        (
            r.target.as_str(),
            r.function.as_str(),
            r.command.as_str(),
            r.args_json.as_str(),
            r.panel_sheet.as_str(),
            r.panel_row,
            r.requester.as_str()
        ),
        (
            p,
            "動作確認 (2秒)",
            "sleep",
            r#"{"seconds":1.5}"#,
            p,
            Some(8),
            ""
        ),
        "the row carries the panel row's hidden command and args"
    );
    let started = r
        .started_at
        .unwrap_or_else(|| panic!("no 開始日時: {r:#?}"));
    assert_eq!(
        running[2],
        format!(
            "▶ 実行中 ({}〜)",
            sheetq::sheet_time::format_hhmm(started, TZ)
        )
    );
    // A duplicate tick while it runs: no row, the duplicate message.
    tick(&emu, p, 8);
    let dup = wait_status(&emu, p, 8, "the duplicate message", |s| {
        s.starts_with("既に実行中です")
    })
    .await;
    let received = r.received_at.unwrap_or_else(|| panic!("no 受付日時"));
    assert_eq!(
        dup[2],
        format!(
            "既に実行中です（依頼: 不明 / {}）",
            received.with_timezone(&TZ).format("%H:%M")
        )
    );
    assert_eq!(dup[0], "FALSE", "the duplicate tick is cleared too");
    // Another function of the same target waits behind it.
    tick(&emu, p, 9);
    wait_status(&emu, p, 9, "⏳ 順番待ち (前に 1 件)", |s| {
        s == "⏳ 順番待ち (前に 1 件)"
    })
    .await;
    // Results on both rows.
    let done = wait_status(&emu, p, 8, "✅ 完了", |s| s.starts_with("✅ 完了")).await;
    wait_status(&emu, p, 9, "✅ 完了", |s| s.starts_with("✅ 完了")).await;
    fleet.stop(&emu).await;
    let rows = queue_rows(&emu);
    assert_eq!(
        rows.len(),
        2,
        "two functions pressed, two rows (the duplicate made none):\n{}",
        describe_queue(&rows)
    );
    let first = &rows_for(&rows, p, "動作確認 (2秒)")[0];
    let finished = first
        .finished_at
        .unwrap_or_else(|| panic!("no 終了日時: {first:#?}"));
    assert_eq!(done[2], sheetq::panel::done_text(finished, TZ));
    assert_eq!(
        done[3], first.message,
        "結果 shows the message (linked to the job's log row)"
    );
    assert!(!done[4].is_empty(), "更新日時 is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_is_claimed_in_the_pass_that_takes_it_in() {
    let emu = start_with_quota(FAST).await;
    let p = "サーバーA";
    set_args(&emu, p, 9, r#"{"seconds":0.2}"#);
    let fleet = Fleet::start(&emu, &["vm-1"], &[POLL], "").await;
    tick(&emu, p, 9);
    wait_status(&emu, p, 9, "▶ 実行中", |s| s.starts_with("▶ 実行中 (")).await;
    let rows = queue_rows(&emu);
    let r = rows
        .iter()
        .find(|r| r.panel_row == Some(9))
        .unwrap_or_else(|| panic!("no row for the press:\n{}", describe_queue(&rows)));
    // One pass reads the clock once: the row it takes in gets that instant as 受付日時, and
    // the claim in the same pass's commit gets it as 開始日時.
    assert!(r.received_at.is_some(), "no 受付日時: {r:#?}");
    assert_eq!(
        r.started_at, r.received_at,
        "the press was claimed in a later pass than the one that took it in: {r:#?}"
    );
    fleet.stop(&emu).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_panel_and_a_moved_function_row_still_get_their_results() {
    let emu = start_with_quota(FAST).await;
    // The rename is noticed when the old title stops parsing as a range (the daemon then
    // rediscovers its panels instead of stopping), or from the sheet list, whichever first.
    let fleet = Fleet::start(&emu, &["vm-1"], &[POLL], "").await;
    set_args(&emu, "サーバーB", 8, r#"{"seconds":1}"#);
    set_args(&emu, "サーバーC", 9, r#"{"seconds":1}"#);
    tick(&emu, "サーバーB", 8);
    tick(&emu, "サーバーC", 9);
    wait_for(
        "both presses to run",
        WAIT,
        || {
            (queue_rows(&emu)
                .iter()
                .filter(|r| r.state.is(State::Running))
                .count()
                == 2)
                .then_some(())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    // While they run: サーバーB is renamed, and a row is inserted above サーバーC's functions.
    emu.batch_update(json!([
        { "updateSheetProperties": { "properties": { "sheetId": 1002, "title": "B (旧)" }, "fields": "title" } },
        { "insertDimension": { "range": { "sheetId": 1003, "dimension": "ROWS", "startIndex": 7, "endIndex": 8 }, "inheritFromBefore": false } }
    ]))
    .unwrap_or_else(|e| panic!("{e:?}"));
    let b = wait_status(&emu, "B (旧)", 8, "✅ 完了", |s| {
        s.starts_with("✅ 完了")
    })
    .await;
    assert_eq!(b[1], "動作確認 (2秒)");
    let c = wait_status(&emu, "サーバーC", 10, "✅ 完了", |s| {
        s.starts_with("✅ 完了")
    })
    .await;
    assert_eq!(
        c[1], "再起動 (5秒)",
        "the moved function row got the result"
    );
    fleet.stop(&emu).await;
    let c_old_row = panel_row(&emu, "サーバーC", 9);
    assert!(
        !c_old_row[2].starts_with("✅"),
        "the row now at the old row number ({}) must not get the result: {c_old_row:?}",
        c_old_row[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_panel_is_found_and_run_without_a_read_beyond_the_polls() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(
        &emu,
        &["vm-1"],
        &[POLL, ("heartbeat_interval", "\"1s\"")],
        "",
    )
    .await;
    let polls = "spreadsheets.values.batchGetByDataFilter";
    wait_polls(&emu, 3).await;
    emu.clear_requests();
    // A person copies サーバーB's panel for a new server and gives it its own label.
    emu.batch_update(json!([
        { "duplicateSheet": { "sourceSheetId": 1002, "newSheetName": "サーバーZ" } }
    ]))
    .unwrap_or_else(|e| panic!("{e:?}"));
    emu.set_values("'サーバーZ'!G2", json!([["サーバーZ"]]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    set_args(&emu, "サーバーZ", 8, r#"{"seconds":0}"#);
    tick(&emu, "サーバーZ", 8);
    let z = wait_status(&emu, "サーバーZ", 8, "✅ 完了", |s| {
        s.starts_with("✅ 完了")
    })
    .await;
    let log = emu.requests();
    fleet.stop(&emu).await;
    assert_eq!(z[1], "動作確認 (2秒)");
    let rows = queue_rows(&emu);
    assert_eq!(
        rows_for(&rows, "サーバーZ", "動作確認 (2秒)").len(),
        1,
        "one row for the press on the copy:\n{}",
        describe_queue(&rows)
    );
    // The sheet list came with a heartbeat's write and the markers with the polls: finding
    // the new panel cost no read of its own.
    let reads: Vec<&str> = log
        .iter()
        .map(|r| r.method.as_str())
        .filter(|m| !m.contains("batchUpdate") && !m.contains("append"))
        .collect();
    assert!(
        reads.iter().all(|m| *m == polls),
        "an idle daemon reads nothing but its polls, new panel or not; saw {:?}",
        reads.iter().filter(|m| **m != polls).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_polling_the_same_ticks_make_one_row_per_tick() {
    let emu = start_with_quota(FASTER).await;
    let panels = ["サーバーA", "サーバーB", "サーバーC"];
    for p in panels {
        for row in 8..=10 {
            set_args(&emu, p, row, r#"{"seconds":0.05}"#);
        }
    }
    let fleet = Fleet::start(
        &emu,
        &["vm-1", "vm-2"],
        &[POLL, ("poll_interval", "\"50ms\"")],
        "",
    )
    .await;
    let mut expected = 0;
    for round in 0..4 {
        // Each round ticks every function row of every panel, once the last round's jobs
        // are done, so every tick is a new press.
        for p in panels {
            for row in 8..=10 {
                tick(&emu, p, row);
            }
        }
        expected += 9;
        wait_for(
            &format!("round {round}: {expected} rows, all finished, all boxes cleared"),
            WAIT,
            || {
                let rows = queue_rows(&emu);
                let cleared = panels
                    .iter()
                    .all(|p| (8..=10).all(|r| panel_row(&emu, p, r)[0] == "FALSE"));
                (rows.len() >= expected && rows.iter().all(is_finished) && cleared).then_some(())
            },
            || describe_queue(&queue_rows(&emu)),
        )
        .await;
    }
    fleet.stop(&emu).await;
    let rows = queue_rows(&emu);
    assert_eq!(
        rows.len(),
        expected,
        "each tick makes exactly one row:\n{}",
        describe_queue(&rows)
    );
    for p in panels {
        for f in ["動作確認 (2秒)", "再起動 (5秒)", "バックアップ (10秒)"] {
            assert_eq!(
                rows_for(&rows, p, f).len(),
                4,
                "{p}/{f} was pressed 4 times:\n{}",
                describe_queue(&rows)
            );
        }
    }
}

#[tokio::test]
async fn an_unconfigured_command_is_an_error_on_the_row_and_the_panel() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1"], &[POLL], "").await;
    // Row 11 of the demo panels names the command "broken", which no config defines.
    tick(&emu, "サーバーC", 11);
    let shown = wait_status(&emu, "サーバーC", 11, "❌ エラー", |s| {
        s.starts_with("❌ エラー")
    })
    .await;
    fleet.stop(&emu).await;
    let rows = queue_rows(&emu);
    assert_eq!(rows.len(), 1, "{}", describe_queue(&rows));
    let r = &rows[0];
    assert!(r.state.is(State::Error), "{r:#?}");
    assert!(
        r.message.contains("broken"),
        "the message names the unknown command: {:?}",
        r.message
    );
    assert!(
        shown[2].contains("broken") || shown[3].contains("broken"),
        "the panel says which command: {shown:?}"
    );
}
