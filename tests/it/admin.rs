//! `sheetq init`, `enqueue` and `status` against a spreadsheet that has nothing of sheetq yet,
//! and `init` protecting the hidden sheets (on a new spreadsheet and on one made before).

use sheetq::admin::{self, NewJob};
use sheetq::queue::{HeaderNames, State};
use sheetq::sheets::{ProtectedRange, SpreadsheetMeta};

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

    let header = emu.values("'_ジョブキュー'!A1:S1").expect("header");
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
        emu.values("'_ジョブ履歴'!A1:S1").expect("archive header")[0],
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

/// sheetq's three hidden sheets.
const HIDDEN: [&str; 3] = ["_ジョブキュー", "_ワーカー", "_ジョブ履歴"];

/// The protected ranges of sheet `title`, as sheetq's service account reads them.
fn protections_of(meta: &SpreadsheetMeta, title: &str) -> Vec<ProtectedRange> {
    meta.sheet(title)
        .unwrap_or_else(|| panic!("no sheet {title}"))
        .protected_ranges
        .clone()
}

/// `a` and `b` as sets of addresses.
fn same_people(a: &[String], b: &[String]) -> bool {
    let set = |v: &[String]| {
        v.iter()
            .map(|e| e.to_lowercase())
            .collect::<std::collections::BTreeSet<_>>()
    };
    set(a) == set(b)
}

#[tokio::test(flavor = "multi_thread")]
async fn init_protects_the_hidden_sheets_for_the_service_account_alone() {
    let emu = support::start_empty().await;
    let state = tempfile::tempdir().expect("tempdir");
    // One client under Google's quota: the production default budget (50 a minute) fits.
    let config = support::daemon_config(
        &emu,
        "init-p",
        state.path(),
        &[("requests_per_minute", "50")],
        "",
    );
    let sheets = support::client(&emu, &config).await;
    let first = admin::init(sheets.as_ref(), &config).await.expect("init");
    let meta = sheets.metadata().await.expect("metadata");
    let ours = [sheets.account(), emu.owner()];
    for title in HIDDEN {
        assert!(
            first
                .iter()
                .any(|l| l.starts_with(&format!("protected sheet '{title}'"))),
            "init must say it protected {title}: {first:?}"
        );
        let p = protections_of(&meta, title);
        assert_eq!(p.len(), 1, "{title}: one protection: {p:?}");
        assert!(p[0].area.is_sheet(), "{title}: the whole sheet: {p:?}");
        assert!(!p[0].warning_only, "{title}: a protection, not a warning");
        assert!(
            same_people(&p[0].editors, &ours),
            "{title}: the service account is the only editor Google lists besides the owner: {:?}",
            p[0].editors
        );
        assert!(
            p[0].groups.is_empty() && !p[0].domain_users_can_edit,
            "{p:?}"
        );
    }

    // A person, editor of the file, can no longer forge a queue row; sheetq still writes.
    let (status, body) = support::person_writes(
        &emu,
        "alice@example.com",
        "'_ジョブキュー'!A2:C2",
        serde_json::json!([["forged", "", "boss@example.com"]]),
    )
    .await;
    assert_eq!(status, 400, "a person's write to the queue: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("protected cell")),
        "Google's refusal: {body}"
    );
    let job = NewJob::pressed("T", "F", "sleep", "{}", "");
    let id = admin::enqueue(sheets.as_ref(), &config, &job)
        .await
        .expect("sheetq writes through its own protection");
    assert_eq!(support::queue_rows(&emu)[0].job_id, id);

    emu.clear_requests();
    let second = admin::init(sheets.as_ref(), &config)
        .await
        .expect("init again");
    assert_eq!(second, ["nothing to do: the spreadsheet is ready"]);
    assert!(
        emu.requests()
            .iter()
            .all(|r| r.method != "spreadsheets.batchUpdate"),
        "a second init changes nothing: {:?}",
        emu.requests()
            .iter()
            .map(|r| r.method.clone())
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn init_on_a_spreadsheet_made_before_protection_adds_only_the_protection() {
    let emu = support::start_empty().await;
    let state = tempfile::tempdir().expect("tempdir");
    let open = support::daemon_config(
        &emu,
        "init-o",
        state.path(),
        &[("protect", "false"), ("requests_per_minute", "50")],
        "",
    );
    let sheets = support::client(&emu, &open).await;
    admin::init(sheets.as_ref(), &open)
        .await
        .expect("init with protect = false");
    let meta = sheets.metadata().await.expect("metadata");
    for title in HIDDEN {
        assert_eq!(
            protections_of(&meta, title),
            Vec::new(),
            "protect = false leaves {title} open"
        );
    }
    let job = NewJob::pressed("T", "F", "sleep", r#"{"seconds":1}"#, "alice@example.com");
    admin::enqueue(sheets.as_ref(), &open, &job)
        .await
        .expect("enqueue");
    let before: Vec<_> = HIDDEN
        .iter()
        .map(|t| support::sheet_values(&emu, t))
        .collect();

    let protected = support::daemon_config(
        &emu,
        "init-o",
        state.path(),
        &[("requests_per_minute", "50")],
        "",
    );
    emu.clear_requests();
    let done = admin::init(sheets.as_ref(), &protected)
        .await
        .expect("init with protection");
    assert_eq!(
        done.len(),
        4,
        "init on an initialised spreadsheet only protects (queue, workers, archive, log): {done:?}"
    );
    assert!(
        done.iter().all(|l| l.starts_with("protected sheet '")),
        "{done:?}"
    );
    let methods: Vec<String> = emu
        .requests()
        .into_iter()
        .map(|r| r.method)
        .filter(|m| m != "oauth2.token")
        .collect();
    assert_eq!(
        methods,
        ["spreadsheets.get", "spreadsheets.batchUpdate"],
        "the protection rides in the one batch init sends, whose reply brings the headers: no read of its own"
    );
    let after: Vec<_> = HIDDEN
        .iter()
        .map(|t| support::sheet_values(&emu, t))
        .collect();
    assert_eq!(after, before, "protecting changes no cell");
    let meta = sheets.metadata().await.expect("metadata");
    for title in HIDDEN {
        assert_eq!(protections_of(&meta, title).len(), 1, "{title}");
    }
}

/// A queue made before 中止要求, 承認 and 入力 existed gets the columns from `init`, right of its
/// last header (a person's own column included), the sheet widened for them; no cell moves,
/// and a second `init` has nothing to do.
#[tokio::test(flavor = "multi_thread")]
async fn init_adds_the_cancel_and_approval_columns_to_a_queue_made_before_them_and_moves_nothing() {
    let emu = support::start_empty().await;
    let state = tempfile::tempdir().expect("tempdir");
    let config = support::daemon_config(
        &emu,
        "init-c",
        state.path(),
        &[("requests_per_minute", "50")],
        "",
    );
    let sheets = support::client(&emu, &config).await;
    admin::init(sheets.as_ref(), &config).await.expect("init");
    // As an older version left it: sixteen columns, then a person's own.
    emu.set_values(
        "'_ジョブキュー'!Q1:S1",
        serde_json::json!([["メモ", "", ""]]),
        false,
    )
    .expect("a person's column");
    let job = NewJob::pressed("T", "F", "sleep", r#"{"seconds":1}"#, "alice@example.com");
    admin::enqueue(sheets.as_ref(), &config, &job)
        .await
        .expect("enqueue");
    let before = support::sheet_values(&emu, "_ジョブキュー");

    let done = admin::init(sheets.as_ref(), &config)
        .await
        .expect("init on the older queue");
    assert_eq!(
        done,
        [
            "added the column \"中止要求\" to '_ジョブキュー' (column R); nothing else moved",
            "added the column \"承認\" to '_ジョブキュー' (column S); nothing else moved",
            "added the column \"入力\" to '_ジョブキュー' (column T); nothing else moved"
        ],
        "init says what it added and where"
    );
    let after = support::sheet_values(&emu, "_ジョブキュー");
    assert_eq!(
        after[0].get(17),
        Some(&serde_json::json!("中止要求")),
        "the header gains 中止要求 right of the person's column: {:?}",
        after[0]
    );
    assert_eq!(
        after[0].get(18),
        Some(&serde_json::json!("承認")),
        "{:?}",
        after[0]
    );
    assert_eq!(
        after[0].get(19),
        Some(&serde_json::json!("入力")),
        "{:?}",
        after[0]
    );
    for (r, (old, new)) in before.iter().zip(&after).enumerate() {
        assert_eq!(&new[..old.len()], &old[..], "row {} changed", r + 1);
    }
    let again = admin::init(sheets.as_ref(), &config)
        .await
        .expect("init again");
    assert_eq!(again, ["nothing to do: the spreadsheet is ready"]);
}
