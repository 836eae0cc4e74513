//! The Google implementation of the port against the emulator, over real HTTP with the real
//! service-account JWT flow: round trips, the fault plan (429/503/dropped connections), the
//! request budget, dry-run and awkward sheet titles. Assertions are on what the sheet holds
//! and on the emulator's request log, not on timing.

use std::time::Duration;

use serde_json::json;
use sheetq::a1;
use sheetq::emulator::{Emulator, Fault, FaultRule, Quota, RequestRecord};
use sheetq::sheets::auth::{Credentials, SPREADSHEETS_SCOPE};
use sheetq::sheets::budget::{Budget, Budgets};
use sheetq::sheets::dry_run::DryRunSheets;
use sheetq::sheets::google::{GoogleSheets, GoogleSheetsConfig};
use sheetq::sheets::retry::RetryPolicy;
use sheetq::sheets::{BatchUpdate, ErrorKind, GridRange, Reply, Request, Sheets, ValueRange};

use crate::support::{start_empty, start_emulator};

const BATCH_GET: &str = "spreadsheets.values.batchGet";
const VALUES_BATCH_UPDATE: &str = "spreadsheets.values.batchUpdate";
const APPEND: &str = "spreadsheets.values.append";
const TOKEN: &str = "oauth2.token";

/// Fast retries (a loaded test machine gets many attempts, each with a generous timeout),
/// no budget unless the test sets one.
fn config(emu: &Emulator) -> GoogleSheetsConfig {
    let mut c = GoogleSheetsConfig::new(
        emu.spreadsheet_id(),
        Credentials::KeyJson(emu.credentials_json()),
    );
    // Without the trailing `/`: the client must add it.
    c.api_base_url = emu.base_url().trim_end_matches('/').to_string();
    c.call_timeout = Duration::from_secs(20);
    c.token_timeout = Duration::from_secs(20);
    c.retry = RetryPolicy {
        max_attempts: 10,
        initial_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(200),
        max_elapsed: Duration::from_secs(120),
    };
    c.budget = Budgets::unlimited();
    c
}

async fn client_with(config: GoogleSheetsConfig) -> GoogleSheets {
    GoogleSheets::new(config)
        .await
        .unwrap_or_else(|e| panic!("client did not build: {e}"))
}

async fn client(emu: &Emulator) -> GoogleSheets {
    client_with(config(emu)).await
}

fn log_of(emu: &Emulator, method: &str) -> Vec<RequestRecord> {
    emu.requests()
        .into_iter()
        .filter(|r| r.method == method)
        .collect()
}

fn statuses(emu: &Emulator, method: &str) -> Vec<u16> {
    log_of(emu, method).iter().map(|r| r.status).collect()
}

fn values(emu: &Emulator, range: &str) -> Vec<Vec<serde_json::Value>> {
    emu.values(range)
        .unwrap_or_else(|e| panic!("emulator cannot read {range}: {e}"))
}

async fn sheet_id(sheets: &GoogleSheets, title: &str) -> i32 {
    let meta = sheets
        .metadata()
        .await
        .unwrap_or_else(|e| panic!("metadata: {e}"));
    meta.sheet(title)
        .unwrap_or_else(|| panic!("no sheet {title:?} in {:?}", meta.sheets))
        .sheet_id
}

#[tokio::test]
async fn round_trip_over_http_with_the_jwt_flow_and_only_the_spreadsheets_scope() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;

    let meta = sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(meta.spreadsheet_id, emu.spreadsheet_id());
    assert!(!meta.time_zone.is_empty(), "time zone missing: {meta:?}");
    let sid = meta
        .sheet("Sheet1")
        .map(|s| s.sheet_id)
        .unwrap_or_else(|| panic!("no Sheet1 in {meta:?}"));

    let range = a1::range("Sheet1", "A1:C2");
    sheets
        .write(&[ValueRange::new(
            &range,
            vec![
                vec![json!("jobId"), json!("=1+1"), json!(46000.5)],
                vec![json!("a"), json!(null), json!(true)],
            ],
        )])
        .await
        .unwrap_or_else(|e| panic!("write: {e}"));
    let read = sheets
        .read(&[range.clone(), a1::range("Sheet1", "C1")])
        .await
        .unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(read.len(), 2);
    assert_eq!(
        read[0].values,
        vec![
            vec![json!("jobId"), json!("=1+1"), json!(46000.5)],
            vec![json!("a"), json!(""), json!(true)]
        ],
        "RAW write must keep '=1+1' as text and empty cells in place"
    );
    assert_eq!(read[1].values, vec![vec![json!(46000.5)]]);

    let appended = sheets
        .append(&a1::range("Sheet1", "A:C"), &[vec![json!("b"), json!(2)]])
        .await
        .unwrap_or_else(|e| panic!("append: {e}"));
    assert!(
        appended.updated_range.contains("A3"),
        "append should land on row 3: {appended:?}"
    );

    let batch = BatchUpdate {
        requests: vec![
            Request::CompareAndSwap {
                range: GridRange::cell(sid, 0, 0),
                find: "jobId".into(),
                replacement: "claimed".into(),
            },
            Request::CompareAndSwap {
                range: GridRange::cell(sid, 1, 0),
                find: "not what is there".into(),
                replacement: "x".into(),
            },
            Request::UpdateCells {
                range: GridRange {
                    sheet_id: sid,
                    start_row: 3,
                    end_row: 4,
                    start_col: 0,
                    end_col: 2,
                },
                rows: vec![vec![json!("=SUM(1,2)"), json!(7)]],
            },
        ],
        response_ranges: vec![a1::range("Sheet1", "A1:C"), a1::range("Sheet1", "B4")],
        ..Default::default()
    };
    let reply = sheets
        .batch_update(&batch)
        .await
        .unwrap_or_else(|e| panic!("batch_update: {e}"));
    assert_eq!(
        reply.replies,
        vec![
            Reply::CompareAndSwap { changed: 1 },
            Reply::CompareAndSwap { changed: 0 },
            Reply::Empty
        ]
    );
    assert_eq!(reply.ranges.len(), 2);
    assert_eq!(
        reply.ranges[0].values,
        vec![
            vec![json!("claimed"), json!("=1+1"), json!(46000.5)],
            vec![json!("a"), json!(""), json!(true)],
            vec![json!("b"), json!(2)],
            vec![json!("=SUM(1,2)"), json!(7)],
        ],
        "response ranges must show the sheet after the batch"
    );
    assert_eq!(reply.ranges[1].values, vec![vec![json!(7)]]);

    // The real JWT flow ran, asking for the spreadsheets scope and nothing else.
    let tokens = log_of(&emu, TOKEN);
    assert!(!tokens.is_empty(), "no token request: {:?}", emu.requests());
    for t in &tokens {
        assert_eq!(t.status, 200, "token grant failed: {t:?}");
        assert_eq!(t.ranges, vec![SPREADSHEETS_SCOPE.to_string()], "{t:?}");
    }
    assert!(sheets
        .requested_scopes()
        .iter()
        .all(|s| s == &vec![SPREADSHEETS_SCOPE.to_string()]));
    let stats = sheets.stats().snapshot();
    assert_eq!(stats.retries, 0, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "ok"), 1, "{stats:?}");
    assert_eq!(
        stats.count("spreadsheets.batchUpdate", "ok"),
        1,
        "{stats:?}"
    );
}

#[tokio::test]
async fn bursts_of_429_and_503_and_a_dropped_connection_recover_reading_once() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    // Token first, so the fault plan meets the reads only.
    sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    emu.set_values("Sheet1!A1:B1", json!([["once", 1]]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let m = Some(BATCH_GET);
    emu.add_fault(FaultRule::next(m, Fault::Status(429), 2));
    emu.add_fault(FaultRule::next(m, Fault::Status(503), 2));
    emu.add_fault(FaultRule::next(m, Fault::Drop, 1));

    let got = sheets
        .read(&[a1::range("Sheet1", "A1:B1")])
        .await
        .unwrap_or_else(|e| panic!("read did not recover: {e}"));
    assert_eq!(got[0].values, vec![vec![json!("once"), json!(1)]]);
    assert_eq!(
        statuses(&emu, BATCH_GET),
        vec![0, 429, 429, 503, 503, 200],
        "expected five failed attempts then one success; the dropped connection (0) first, as the network fails before a server looks at a request"
    );
    let stats = sheets.stats().snapshot();
    assert_eq!(stats.retries, 5, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "429"), 2, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "5xx"), 2, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "connection"), 1, "{stats:?}");
}

#[tokio::test]
async fn a_value_write_refused_with_429_is_sent_once_and_left_to_the_caller() {
    // What a write puts where was decided from an earlier read: repeating it after a
    // backoff could hit rows a person has moved meanwhile (docs/design.md §4).
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    emu.add_fault(FaultRule::next(
        Some(VALUES_BATCH_UPDATE),
        Fault::Status(429),
        1,
    ));
    let err = sheets
        .write(&[ValueRange::new(
            a1::range("Sheet1", "A1:B1"),
            vec![vec![json!("once"), json!(1)]],
        )])
        .await
        .err()
        .unwrap_or_else(|| panic!("a refused write must surface as an error"));
    assert_eq!(
        err.kind,
        ErrorKind::Retryable,
        "the caller may try again later: {err}"
    );
    assert_eq!(
        statuses(&emu, VALUES_BATCH_UPDATE),
        vec![429],
        "sent exactly once"
    );
    assert!(
        values(&emu, "Sheet1!A1:B1").is_empty(),
        "nothing was written"
    );
    // The caller's next attempt, from a fresh read, goes through.
    sheets
        .write(&[ValueRange::new(
            a1::range("Sheet1", "A1:B1"),
            vec![vec![json!("once"), json!(1)]],
        )])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn appends_are_retried_only_when_nothing_was_applied() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    emu.set_values("Sheet1!A1:B1", json!([["once", 1]]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    // An append is retried on 429 (the quota is checked before anything is applied) and
    // lands exactly once.
    let m = Some(APPEND);
    emu.add_fault(FaultRule::next(m, Fault::Status(429), 1));
    sheets
        .append(&a1::range("Sheet1", "A:B"), &[vec![json!("row"), json!(2)]])
        .await
        .unwrap_or_else(|e| panic!("append did not recover: {e}"));
    assert_eq!(statuses(&emu, APPEND), vec![429, 200]);
    assert_eq!(
        values(&emu, "Sheet1!A1:B9"),
        vec![vec![json!("once"), json!(1)], vec![json!("row"), json!(2)]],
        "the appended row must be there exactly once"
    );
    // That a 503 applied nothing is believed, not documented: it is not repeated, and the
    // caller looks for its row first.
    emu.add_fault(FaultRule::next(m, Fault::Status(503), 1));
    let refused = sheets
        .append(
            &a1::range("Sheet1", "A:B"),
            &[vec![json!("again"), json!(3)]],
        )
        .await;
    assert!(
        refused.as_ref().is_err_and(|e| e.is_retryable()),
        "a 503 append is left to the caller, as retryable: {refused:?}"
    );
    assert_eq!(statuses(&emu, APPEND), vec![429, 200, 503]);
}

#[tokio::test]
async fn an_append_whose_reply_is_lost_is_not_repeated() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    emu.add_fault(FaultRule::next(Some(APPEND), Fault::DropAfterApply, 1));
    let err = sheets
        .append(&a1::range("Sheet1", "A:A"), &[vec![json!("maybe")]])
        .await
        .err()
        .unwrap_or_else(|| panic!("a dropped reply must surface as an error"));
    assert_eq!(err.kind, ErrorKind::Retryable, "{err}");
    assert_eq!(
        statuses(&emu, APPEND),
        vec![0],
        "the append must not be re-sent"
    );
    assert_eq!(
        values(&emu, "Sheet1!A1:A9"),
        vec![vec![json!("maybe")]],
        "applied once, and only once"
    );
}

#[tokio::test]
async fn a_bad_range_is_not_retried_and_carries_googles_message() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    let err = sheets
        .read(&["NoSuchSheet!A1".to_string()])
        .await
        .err()
        .unwrap_or_else(|| panic!("reading a missing sheet must fail"));
    assert_eq!(err.kind, ErrorKind::InvalidArgument, "{err}");
    assert_eq!(err.method, "values.batchGet");
    assert!(
        err.message
            .contains("Unable to parse range: NoSuchSheet!A1"),
        "Google's message must survive: {err}"
    );
    assert_eq!(
        statuses(&emu, BATCH_GET),
        vec![400],
        "a 400 must be sent once"
    );
    assert_eq!(sheets.stats().snapshot().retries, 0);
}

#[tokio::test]
async fn timeouts_and_token_endpoint_failures_are_retried() {
    let emu = start_empty().await;
    emu.add_fault(FaultRule::next(Some(TOKEN), Fault::Status(503), 2));
    emu.add_fault(FaultRule::next(
        Some(BATCH_GET),
        Fault::Latency(Duration::from_secs(30)),
        1,
    ));
    let mut c = config(&emu);
    c.call_timeout = Duration::from_secs(2);
    let sheets = client_with(c).await;
    let read = sheets
        .read(&[a1::range("Sheet1", "A1")])
        .await
        .unwrap_or_else(|e| panic!("read did not recover: {e}"));
    assert_eq!(read.len(), 1);
    let tokens = statuses(&emu, TOKEN);
    assert_eq!(&tokens[..2], &[503, 503], "token fetches: {tokens:?}");
    assert_eq!(tokens.last(), Some(&200), "token fetches: {tokens:?}");
    let stats = sheets.stats().snapshot();
    assert!(stats.count("values.batchGet", "token") >= 1, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "timeout"), 1, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "ok"), 1, "{stats:?}");
}

/// The budget, not the server, holds a hot loop back: with 5 requests per minute the loop
/// gets exactly its 5 and waits for the 6th, and the emulator (set to 5 reads per minute per
/// user, as a tight Google quota would be) never has to answer 429.
#[tokio::test]
async fn the_budget_keeps_a_hot_loop_under_its_limit() {
    let emu = start_empty().await;
    emu.set_quota(Some(Quota::per_user(5, 5)));
    let mut c = config(&emu);
    c.budget = Budgets::shared(Budget::with_burst(5, Duration::from_secs(60), 5));
    let sheets = std::sync::Arc::new(client_with(c).await);
    let looping = {
        let sheets = sheets.clone();
        tokio::spawn(async move {
            for _ in 0..50 {
                if let Err(e) = sheets.read(&[a1::range("Sheet1", "A1")]).await {
                    panic!("read in the hot loop failed: {e}");
                }
            }
        })
    };
    // Wait (bounded) until the loop has been throttled: it has spent the budget.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while sheets.stats().snapshot().throttled_waits == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hot loop was never throttled; requests: {:?}",
            statuses(&emu, BATCH_GET)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Give a budget that failed to hold plenty of time to show it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    looping.abort();
    assert_eq!(
        statuses(&emu, BATCH_GET),
        vec![200; 5],
        "exactly the budget's 5 requests may reach the server, none refused"
    );
    let stats = sheets.stats().snapshot();
    assert_eq!(stats.throttled_waits, 1, "{stats:?}");
    assert_eq!(stats.count("values.batchGet", "429"), 0, "{stats:?}");
    assert_eq!(emu.counters().quota_refused_total(), 0);
}

#[tokio::test]
async fn dry_run_reads_but_sends_no_writes() {
    let emu = start_emulator().await;
    let dry = DryRunSheets::new(client(&emu).await);
    let meta = dry.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    let worker = meta
        .sheet("_ワーカー")
        .map(|s| s.sheet_id)
        .unwrap_or_else(|| panic!("demo has no _ワーカー: {meta:?}"));
    let lease_range = a1::range("_ワーカー", "B1");
    let before = values(&emu, &lease_range);

    dry.write(&[ValueRange::new(
        a1::range("_ジョブキュー", "K2"),
        vec![vec![json!("実行中")]],
    )])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    dry.append(
        &a1::range("_ジョブキュー", "A:P"),
        &[vec![json!("new job")]],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let reply = dry
        .batch_update(&BatchUpdate {
            requests: vec![Request::CompareAndSwap {
                range: GridRange::cell(worker, 0, 1),
                find: before
                    .first()
                    .and_then(|r| r.first())
                    .and_then(|c| c.as_str())
                    .unwrap_or("free")
                    .to_string(),
                replacement: "lease|dry|n|2099-01-01T00:00:00Z".into(),
            }],
            response_ranges: vec![lease_range.clone()],
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reply.replies, vec![Reply::CompareAndSwap { changed: 0 }]);
    assert_eq!(reply.ranges.len(), 1);
    assert_eq!(
        reply.ranges[0].values, before,
        "response ranges are real reads"
    );

    let methods: Vec<String> = emu.requests().into_iter().map(|r| r.method).collect();
    for m in &methods {
        assert!(
            [TOKEN, "spreadsheets.get", BATCH_GET].contains(&m.as_str()),
            "dry run sent {m}; all requests: {methods:?}"
        );
    }
    assert_eq!(values(&emu, &lease_range), before, "the lease cell changed");
}

#[tokio::test]
async fn titles_with_quotes_hashes_percent_slashes_spaces_and_japanese_work() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    for title in ["it's #1? 100%/ジョブ キュー", "a'b''c", "?#%/ "] {
        let reply = sheets
            .batch_update(&BatchUpdate {
                requests: vec![Request::AddSheet {
                    title: title.into(),
                    hidden: true,
                    row_count: 20,
                    column_count: 4,
                }],
                response_ranges: vec![],
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("add sheet {title:?}: {e}"));
        let added = match reply.replies.as_slice() {
            [Reply::AddSheet { sheet }] => sheet.clone(),
            other => panic!("add sheet {title:?}: unexpected replies {other:?}"),
        };
        assert_eq!(
            (added.title.as_str(), added.hidden),
            (title, true),
            "{added:?}"
        );
        assert_eq!(sheet_id(&sheets, title).await, added.sheet_id);

        sheets
            .write(&[ValueRange::new(
                a1::range(title, "A1:B1"),
                vec![vec![json!("head"), json!(title)]],
            )])
            .await
            .unwrap_or_else(|e| panic!("write to {title:?}: {e}"));
        let appended = sheets
            .append(&a1::range(title, "A:B"), &[vec![json!("row"), json!(2)]])
            .await
            .unwrap_or_else(|e| panic!("append to {title:?}: {e}"));
        assert!(
            appended.updated_range.ends_with("A2:B2"),
            "{title:?}: {appended:?}"
        );
        let read = sheets
            .read(&[a1::range(title, "A1:B")])
            .await
            .unwrap_or_else(|e| panic!("read {title:?}: {e}"));
        let expected = vec![
            vec![json!("head"), json!(title)],
            vec![json!("row"), json!(2)],
        ];
        assert_eq!(read[0].values, expected, "{title:?}");
        let reply = sheets
            .batch_update(&BatchUpdate {
                requests: vec![],
                response_ranges: vec![a1::range(title, "A2:B2")],
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("response range on {title:?}: {e}"));
        assert_eq!(
            reply.ranges[0].values,
            vec![expected[1].clone()],
            "{title:?}"
        );
        assert_eq!(
            values(&emu, &a1::range(title, "A1:B2")),
            expected,
            "{title:?}"
        );
    }
    let meta = sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(meta.sheets.len(), 4, "{:?}", meta.sheets);
}

#[tokio::test]
async fn a_broken_key_file_is_a_startup_error_naming_the_file() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("key.json");
    std::fs::write(&path, "{\"type\": \"authorized_user\"}")
        .unwrap_or_else(|e| panic!("write key: {e}"));
    let mut c = config(&emu);
    c.credentials = Credentials::KeyFile {
        path: path.clone(),
        from_env: false,
    };
    let err = GoogleSheets::new(c)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| panic!("an authorized_user key must be refused"));
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("service_account"), "{err}");
    assert!(
        emu.requests().is_empty(),
        "nothing may be sent with a bad key"
    );
}

#[tokio::test]
async fn a_refused_token_is_replaced_within_the_call_and_fresh_ones_refused_are_an_outage() {
    let emu = start_empty().await;
    let sheets = client(&emu).await;
    sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    emu.revoke_tokens();
    sheets
        .read(&[a1::range("Sheet1", "A1")])
        .await
        .unwrap_or_else(|e| panic!("a revoked token must be replaced, not fail the call: {e}"));
    assert_eq!(
        statuses(&emu, BATCH_GET),
        vec![401, 200],
        "sent again at once with a fresh token"
    );
    assert_eq!(statuses(&emu, TOKEN), vec![200, 200]);

    // The server was down for the first attempt (a restart), then refused the old token:
    // the refusal still gets a fresh token at once, whichever attempt met it.
    emu.add_fault(FaultRule::next(Some(BATCH_GET), Fault::Drop, 1));
    emu.revoke_tokens();
    sheets
        .read(&[a1::range("Sheet1", "A1")])
        .await
        .unwrap_or_else(|e| panic!("a restart that forgot the tokens must not fail the call: {e}"));
    assert_eq!(
        statuses(&emu, BATCH_GET)[2..],
        [0, 401, 200],
        "dropped, refused, then sent with a fresh token"
    );

    // Refused whatever the token while the token endpoint still issues them (the key
    // signs): an outage, retried as one and reported as transient, never as a setup problem.
    emu.clear_requests();
    emu.add_fault(FaultRule {
        method: Some(BATCH_GET.into()),
        fault: Fault::Status(401),
        remaining: None,
        probability: None,
        user: None,
        body_contains: None,
    });
    let err = sheets
        .read(&[a1::range("Sheet1", "A1")])
        .await
        .err()
        .unwrap_or_else(|| panic!("a token refused every time must fail the call"));
    assert_eq!(err.kind, ErrorKind::Retryable, "{err}");
    assert!(
        err.message.contains("fresh token was refused too")
            && err.message.contains("key still signs"),
        "the error says what it is: {err}"
    );
    let refused = statuses(&emu, BATCH_GET);
    assert!(
        refused.len() > 2 && refused.iter().all(|s| *s == 401),
        "retried as for an outage: {refused:?}"
    );
    assert_eq!(
        statuses(&emu, TOKEN).len(),
        refused.len() - 1,
        "each attempt after the first with a fresh token"
    );
}
