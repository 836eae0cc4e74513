//! `sheetq init`, `enqueue` and `status` against a spreadsheet that has nothing of sheetq yet.

use sheetq::admin::{self, NewJob};
use sheetq::queue::{HeaderNames, State};

use crate::support;

#[tokio::test(flavor = "multi_thread")]
async fn init_creates_the_hidden_sheets_once_and_formats_dates() {
    let emu = support::start_empty().await;
    let state = tempfile::tempdir().expect("tempdir");
    // One client under Google's quota: the production default budget (50 a minute) fits.
    let config = support::daemon_config(
        &emu,
        "init-1",
        state.path(),
        &[("requests_per_minute", "50")],
        "",
    );
    let sheets = support::client(&emu, &config).await;

    // Before init, the one-shot commands say what to do, not what the API refused.
    let before = admin::status(sheets.as_ref(), &config)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        before.contains("run `sheetq init") && before.contains("'_ジョブキュー'"),
        "status before init: {before}"
    );
    let job = NewJob {
        target: "サーバーA".into(),
        function: "f".into(),
        command: "sleep".into(),
        args_json: "{}".into(),
        requester: String::new(),
        panel_sheet: "サーバーA".into(),
        flags: vec![],
    };
    let before = admin::enqueue(sheets.as_ref(), &config, &job)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        before.contains("run `sheetq init"),
        "enqueue before init: {before}"
    );

    let first = admin::init(sheets.as_ref(), &config).await.expect("init");
    assert!(
        first
            .iter()
            .any(|l| l.contains("created hidden sheet '_ジョブキュー'")),
        "{first:?}"
    );
    assert!(
        first
            .iter()
            .any(|l| l.contains("created hidden sheet '_ワーカー'")),
        "{first:?}"
    );
    let second = admin::init(sheets.as_ref(), &config)
        .await
        .expect("init again");
    assert_eq!(
        second,
        ["nothing to do: the spreadsheet is ready"],
        "init is idempotent"
    );

    let header = emu.values("'_ジョブキュー'!A1:P1").expect("header");
    let expected: Vec<serde_json::Value> = HeaderNames::default()
        .header_row()
        .into_iter()
        .map(serde_json::Value::from)
        .collect();
    assert_eq!(header[0], expected, "the header in its default order");
    assert!(
        first
            .iter()
            .any(|l| l.contains("created hidden sheet '_ジョブ履歴'")),
        "{first:?}"
    );
    assert_eq!(
        emu.values("'_ジョブ履歴'!A1:P1").expect("archive header")[0],
        expected,
        "the archive has the queue's header"
    );
    assert_eq!(emu.values("'_ワーカー'!B1").expect("lease")[0][0], "free");
    let (queue_hidden, worker_hidden, date_format) = emu
        .with_spreadsheet(|ss| {
            let q = ss.sheet_by_title("_ジョブキュー").expect("queue sheet");
            let w = ss.sheet_by_title("_ワーカー").expect("worker sheet");
            let fmt = q
                .cell(5, 1)
                .and_then(|c| c.number_format.clone())
                .map(|f| (f.kind, f.pattern));
            (q.hidden, w.hidden, fmt)
        })
        .expect("spreadsheet");
    assert!(queue_hidden && worker_hidden, "both sheets are hidden");
    assert_eq!(
        date_format,
        Some((
            "DATE_TIME".to_string(),
            admin::DATE_TIME_PATTERN.to_string()
        )),
        "受付日時 (column B) shows serials as date-times"
    );

    let job = NewJob {
        target: "T".into(),
        function: "F".into(),
        command: "sleep".into(),
        args_json: "{}".into(),
        ..NewJob::default()
    };
    let id = admin::enqueue(sheets.as_ref(), &config, &job)
        .await
        .expect("enqueue");
    let rows = support::queue_rows(&emu);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].job_id, id);
    assert!(rows[0].state.is(State::Waiting));
    let status = admin::status(sheets.as_ref(), &config)
        .await
        .expect("status")
        .text();
    assert!(status.contains("待機: 1"), "{status}");
    assert!(
        status.contains(&format!("oldest waiting: {id}")),
        "{status}"
    );
    support::assert_no_quota_refusals(&emu);
}

#[tokio::test]
async fn status_shows_recent_failures_in_the_sheets_zone_and_a_daemon_that_stopped() {
    let emu = support::start_with_quota(sheetq::emulator::Quota::scaled(50)).await;
    let fleet = support::Fleet::start(&emu, &["d1"], &[], "").await;
    let config = fleet.configs[0].clone();
    let sheets = support::client(&emu, &config).await;
    let id = support::enqueue(sheets.as_ref(), &config, "サーバーA", "f", "nope", "{}", "").await;
    support::wait_finished(
        &emu,
        std::slice::from_ref(&id),
        std::time::Duration::from_secs(30),
    )
    .await;
    fleet.stop(&emu).await;
    let status = admin::status(sheets.as_ref(), &config)
        .await
        .expect("status");
    let failure = status
        .recent_failures
        .first()
        .unwrap_or_else(|| panic!("no recent failure: {status:?}"));
    assert_eq!(failure.job_id, id);
    assert!(
        failure.at.as_deref().is_some_and(|t| t.ends_with("+09:00")),
        "times carry the spreadsheet's zone (Asia/Tokyo): {failure:?}"
    );
    let d1 = status
        .workers
        .iter()
        .find(|w| w.id == "d1")
        .unwrap_or_else(|| panic!("{status:?}"));
    assert!(d1.stopped, "the last heartbeat says it stopped: {d1:?}");
    let text = status.text();
    assert!(
        text.contains("recent failures:") && text.contains(" JST"),
        "{text}"
    );
    assert!(
        text.contains("d1 host=") && text.contains("stopped at"),
        "{text}"
    );
    assert!(
        text.contains("outbox (this machine): 0 result(s)"),
        "{text}"
    );
    let json = serde_json::to_value(&status).expect("status as JSON");
    assert_eq!(json["workers"][0]["stopped"], true, "{json}");
}

#[tokio::test]
async fn enqueue_wait_rides_out_an_api_that_refuses_its_looks_for_a_while() {
    use sheetq::emulator::{Fault, FaultRule, Quota};
    // Google's quota, scaled so the client's budget lets the looks come quickly.
    let emu = support::start_with_quota(Quota::scaled(50)).await;
    let state = tempfile::tempdir().expect("tempdir");
    let config = support::daemon_config(&emu, "waiter", state.path(), &[], "");
    let sheets = support::client(&emu, &config).await;
    let job = support::enqueue(
        sheets.as_ref(),
        &config,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        "{}",
        "",
    )
    .await;
    // The queue cannot be read for a while: more 503s than one call retries, so several
    // looks fail whole.
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.values.batchGet"),
        Fault::Status(503),
        12,
    ));
    let waiting = {
        let sheets = sheets.clone();
        let config = config.clone();
        let job = job.clone();
        tokio::spawn(async move {
            admin::wait_finished(
                sheets.as_ref(),
                &config,
                &job,
                std::time::Duration::from_millis(50),
            )
            .await
        })
    };
    support::wait_for(
        "the faults to be spent",
        std::time::Duration::from_secs(60),
        || emu.faults().is_empty().then_some(()),
        || format!("{:?}", emu.faults()),
    )
    .await;
    let row = support::queue_rows(&emu)
        .into_iter()
        .find(|r| r.job_id == job)
        .expect("the job's row");
    let header = support::sheet_values(&emu, "_ジョブキュー")
        .first()
        .cloned()
        .unwrap_or_default();
    let state_col = header
        .iter()
        .position(|h| h == "状態")
        .expect("the queue has a 状態 column");
    emu.set_values(
        &format!(
            "'_ジョブキュー'!{}{}",
            sheetq::a1::column_letters(state_col as u32),
            row.row
        ),
        serde_json::json!([["完了"]]),
        false,
    )
    .expect("mark the job done");
    let finished = tokio::time::timeout(std::time::Duration::from_secs(60), waiting)
        .await
        .expect("the wait ends once the row is finished")
        .expect("join")
        .expect("the wait outlives the refused looks");
    assert_eq!(finished.state, State::Done);
}
