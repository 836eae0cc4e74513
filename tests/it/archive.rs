//! End-to-end behaviour of the archive: finished jobs past the retention leave the queue for
//! `_ジョブ履歴` in one batch, in queue order, counted in `_ワーカー!D1`; nothing else moves,
//! no row is lost, and jobs below keep running.

use std::time::Duration;

use serde_json::json;
use sheetq::emulator::Quota;
use sheetq::queue::State;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);
const FAST: Quota = Quota::scaled(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_past_the_retention_move_to_the_archive_and_nothing_else_does() {
    let emu = start_with_quota(FAST).await;
    // 100 old 完了, 10 young 完了, 50 old エラー, 5 old タイムアウト at the bottom.
    let mut rows = Vec::new();
    rows.extend((0..100).map(|i| finished_row(&format!("old-{i}"), "完了", 40)));
    rows.extend((0..10).map(|i| finished_row(&format!("young-{i}"), "完了", 1)));
    rows.extend((0..50).map(|i| finished_row(&format!("failed-{i}"), "エラー", 31)));
    rows.extend((0..5).map(|i| finished_row(&format!("late-{i}"), "タイムアウト", 365)));
    seed_queue(&emu, rows);
    // Log rows: three ended 40 days ago, two a day ago, one without an end started an hour
    // ago (running), one without an end started 41 days ago (its daemon died).
    let ended = |days: i64| {
        json!(sheetq::sheet_time::instant_to_serial(
            chrono::Utc::now() - chrono::Duration::days(days),
            TZ
        ))
    };
    let log_row = |id: &str, end: serde_json::Value| {
        let start = if id == "log-running" {
            ended(0)
        } else {
            ended(41)
        };
        json!([id, "T", "f", start, end, "out"])
    };
    emu.set_values(
        "'_ジョブログ'!A2:F8",
        json!([
            log_row("log-old-1", ended(40)),
            log_row("log-young-1", ended(1)),
            log_row("log-old-2", ended(40)),
            log_row("log-running", json!("")),
            log_row("log-old-3", ended(40)),
            log_row("log-young-2", ended(1)),
            log_row("log-orphan", json!("")),
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let fleet = Fleet::start(&emu, &["vm-1", "vm-2"], &[("retention", "\"30d\"")], "").await;
    let archive = wait_for(
        "155 rows in the archive",
        WAIT,
        || {
            let rows = emu.values("'_ジョブ履歴'!A2:A").ok()?;
            (rows.len() >= 155).then_some(rows)
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    // Jobs enqueued after the archive moved rows run as before, on either daemon.
    let sheets = client(&emu, &fleet.configs[0]).await;
    let mut new = Vec::new();
    for i in 0..4 {
        new.push(
            enqueue(
                sheets.as_ref(),
                &fleet.configs[0],
                &format!("N{i}"),
                "f",
                "sleep",
                r#"{"seconds":0}"#,
                "",
            )
            .await,
        );
    }
    let queue = wait_finished(&emu, &new, WAIT).await;
    let fleet_config = fleet.configs[0].clone();
    fleet.stop(&emu).await;
    assert_eq!(archive.len(), 155, "exactly the old rows were archived");
    let archived = sheet_rows(&emu, "_ジョブ履歴");
    let expected: Vec<String> = (0..100)
        .map(|i| format!("old-{i}"))
        .chain((0..50).map(|i| format!("failed-{i}")))
        .chain((0..5).map(|i| format!("late-{i}")))
        .collect();
    let got: Vec<String> = archived.iter().map(|r| r.job_id.clone()).collect();
    assert_eq!(
        got, expected,
        "the archive holds the old rows, in queue order"
    );
    assert!(
        archived
            .iter()
            .all(|r| !r.state.is(State::Waiting) && r.finished_at.is_some()),
        "archived rows keep their values: {:#?}",
        &archived[..3]
    );
    let young: Vec<&str> = queue
        .iter()
        .filter(|r| r.job_id.starts_with("young-"))
        .map(|r| r.job_id.as_str())
        .collect();
    assert_eq!(
        young.len(),
        10,
        "young rows stay: {}",
        describe_queue(&queue)
    );
    assert_eq!(
        queue.len(),
        14,
        "the queue holds the young rows and the new jobs, nothing else:\n{}",
        describe_queue(&queue)
    );
    for id in &new {
        assert!(row_of(&queue, id).state.is(State::Done), "{id} ran");
    }
    let logs: Vec<String> = emu
        .values("'_ジョブログ'!A2:A")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| r.first().and_then(|v| v.as_str().map(str::to_string)))
        .filter(|id| id.starts_with("log-"))
        .collect();
    assert_eq!(
        logs,
        ["log-young-1", "log-running", "log-young-2"],
        "log rows past the retention leave with the archive; the others stay"
    );
    let count = emu
        .values("'_ワーカー'!C1:D1")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        count,
        vec![vec![json!("archived"), json!(155)]],
        "the count of archived rows tells the other daemons how far rows moved up"
    );
    let meta = sheets
        .metadata()
        .await
        .unwrap_or_else(|e| panic!("metadata: {e}"));
    let protections = &meta
        .sheet("_ジョブ履歴")
        .unwrap_or_else(|| panic!("no archive sheet"))
        .protected_ranges;
    assert!(
        protections
            .iter()
            .any(|p| p.area.is_sheet() && !p.warning_only && p.editors.contains(&sheets.account())),
        "the daemon protects the archive it creates, for its service account: {protections:?}"
    );
    let status = sheetq::admin::status(sheets.as_ref(), &fleet_config)
        .await
        .unwrap_or_else(|e| panic!("status: {e}"))
        .text();
    assert!(
        status.contains("archive '_ジョブ履歴': 155 rows moved there so far"),
        "status tells how many rows the archive took:\n{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_row_found_in_the_archive_goes_back_to_the_queue_and_runs_once() {
    let emu = start_with_quota(FAST).await;
    seed_queue(&emu, vec![finished_row("old-0", "完了", 40)]);
    let retention = [("retention", "\"30d\"")];
    let fleet = Fleet::start(&emu, &["vm-1"], &retention, "").await;
    wait_for(
        "the old row in the archive",
        WAIT,
        || (sheet_rows(&emu, "_ジョブ履歴").len() == 1).then_some(()),
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    fleet.stop(&emu).await;
    // A put-back cut short (a daemon killed, a batch refused) left a waiting row in the
    // hidden archive, on top of the rows archived before.
    let archive_id = emu
        .with_spreadsheet(|ss| ss.sheet_by_title("_ジョブ履歴").map(|s| s.id))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no archive sheet"));
    emu.batch_update(json!([{"insertDimension": {"range": {"sheetId": archive_id,
        "dimension": "ROWS", "startIndex": 1, "endIndex": 2}}}]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut stranded = finished_row("stranded", "待機", 0);
    for c in [11, 12, 13, 14, 15] {
        stranded[c] = json!("");
    }
    stranded[8] = json!(r#"{"seconds":0}"#);
    emu.set_values("'_ジョブ履歴'!A2", json!([stranded]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let fleet = Fleet::start(&emu, &["vm-1"], &retention, "").await;
    let queue = wait_finished(&emu, &["stranded".to_string()], WAIT).await;
    fleet.stop(&emu).await;
    assert!(
        row_of(&queue, "stranded").state.is(State::Done),
        "{}",
        describe_queue(&queue)
    );
    let archived: Vec<String> = sheet_rows(&emu, "_ジョブ履歴")
        .into_iter()
        .map(|r| r.job_id)
        .collect();
    assert_eq!(
        archived,
        ["old-0"],
        "the stranded row left the archive, nothing else did"
    );
}
