//! Continuation end to end: a command that asks to continue gets a new `待機` queue row for
//! the same target and function, flagged `continuation`, which the daemon then runs.

use std::collections::BTreeMap;
use std::time::Duration;

use sheetq::admin::{self, NewJob};
use sheetq::config::Config;
use sheetq::emulator::Quota;
use sheetq::queue::{self, ColumnMap, State, QUEUE_SHEET};
use sheetq::sheets::auth::Credentials;
use tokio_util::sync::CancellationToken;

use crate::support;

#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_asks_to_continue_appends_and_runs_its_next_step() {
    // One client polling every 200 ms (300 reads a minute): Google's quota times 10 is
    // 600 a minute, and the client's budget stays under it.
    let emu = support::start_with_quota(Quota::scaled(10)).await;
    let state = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "spreadsheet_id = \"{}\"\napi_base_url = \"{}\"\nworker_id = \"cont-1\"\npoll_interval = \"200ms\"\nrequests_per_minute = 500\nstate_dir = \"{}\"\n[commands.echo]\nbuiltin = \"echo\"\n",
        emu.spreadsheet_id(),
        emu.base_url(),
        state.path().display()
    );
    let config = Config::parse(&text, "test", &BTreeMap::new()).expect("config");
    let credentials = Some(Credentials::KeyJson(emu.credentials_json()));
    let sheets = sheetq::setup::connect(&config, credentials, false)
        .await
        .expect("client");
    let job = NewJob {
        target: "サーバーA".into(),
        function: "動作確認 (2秒)".into(),
        command: "echo".into(),
        args_json: r#"{"step":1,"continue":{"step":2}}"#.into(),
        panel_sheet: "サーバーA".into(),
        ..NewJob::default()
    };
    let first = admin::enqueue(sheets.as_ref(), &config, &job)
        .await
        .expect("enqueue");
    let shutdown = CancellationToken::new();
    let registry = sheetq::setup::registry(&config).expect("registry");
    let daemon = tokio::spawn(sheetq::daemon::run(
        sheets.clone(),
        config.clone(),
        registry,
        shutdown.clone(),
    ));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let header = emu.values("'_ジョブキュー'!A1:P1").expect("header");
        let data = emu.values("'_ジョブキュー'!A2:P").expect("rows");
        let columns = ColumnMap::from_header(&header[0], &config.headers).expect("columns");
        let rows =
            queue::parse_rows(&data, 2, &columns, &config.states, chrono_tz::Asia::Tokyo).rows;
        if rows.len() == 2 && rows.iter().all(|r| r.state.is(State::Done)) {
            break rows;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "both steps should finish; queue now: {:?}",
            rows.iter()
                .map(|r| (&r.job_id, &r.state, &r.args_json))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    shutdown.cancel();
    daemon.await.expect("join").expect("daemon stops cleanly");

    let (one, two) = (&rows[0], &rows[1]);
    assert_eq!(
        one.job_id, first,
        "the original row stays first ({QUEUE_SHEET})"
    );
    assert_ne!(two.job_id, first, "the next step is a new job");
    assert_eq!(
        (
            two.target.as_str(),
            two.function.as_str(),
            two.command.as_str()
        ),
        ("サーバーA", "動作確認 (2秒)", "echo")
    );
    assert_eq!(
        two.args_json, r#"{"step":2}"#,
        "the new args come from `continue`"
    );
    assert!(two.has_flag("continuation"), "flags: {:?}", two.flags);
    assert!(
        two.started_at >= one.finished_at,
        "one target runs serially: step 2 starts after step 1 ended"
    );
    support::assert_no_quota_refusals(&emu);
}
