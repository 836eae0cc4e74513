//! End-to-end behaviour of the daemon (docs/design.md §2–§4, §6): daemons run in this process (or as
//! the real binary) against the emulator through the real Google client, and every check
//! reads what the sheet holds afterwards: states, the 開始/終了 cells, the ワーカー column.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sheetq::emulator::{Fault, FaultRule, Quota};
use sheetq::queue::{QueueRow, State, WorkerTag};

use crate::support::{self, *};

const WAIT: Duration = Duration::from_secs(30);
/// Daemons polling every 100 ms read 600 times a minute: Google's quota times 50 gives each
/// of the clients sharing the test's account (`support::budget_share`) about 740 requests a
/// minute, so the daemons' own budgets, not the emulator's 429s, hold them back.
const FAST: Quota = Quota::scaled(50);
/// For daemons polling every 50 ms (1200 reads a minute each): about 1490 a minute each.
const FASTER: Quota = Quota::scaled(100);

fn interval(r: &QueueRow) -> (DateTime<Utc>, DateTime<Utc>) {
    match (r.started_at, r.finished_at) {
        (Some(s), Some(f)) => (s, f),
        _ => panic!(
            "row {} ({}) has no 開始日時/終了日時 pair: {r:#?}",
            r.row, r.job_id
        ),
    }
}

fn tag(r: &QueueRow) -> WorkerTag {
    r.worker_tag()
        .unwrap_or_else(|| panic!("row {} has no readable ワーカー: {:?}", r.row, r.worker))
}

pub(crate) fn assert_done(r: &QueueRow) {
    assert!(
        r.state.is(State::Done),
        "job {} on {} should be 完了, is {:?} with message {:?}",
        r.job_id,
        r.target,
        r.state,
        r.message
    );
}

#[tokio::test]
async fn jobs_on_different_targets_run_in_parallel_in_different_slots() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    let sheets = client(&emu, &fleet.configs[0]).await;
    let c = &fleet.configs[0];
    let a = enqueue(
        sheets.as_ref(),
        c,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":1}"#,
        "alice@example.com",
    )
    .await;
    let b = enqueue(
        sheets.as_ref(),
        c,
        "サーバーB",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":1}"#,
        "bob@example.com",
    )
    .await;
    let rows = wait_finished(&emu, &[a.clone(), b.clone()], WAIT).await;
    fleet.stop(&emu).await;
    let (ra, rb) = (row_of(&rows, &a), row_of(&rows, &b));
    assert_done(ra);
    assert_done(rb);
    let ((sa, fa), (sb, fb)) = (interval(ra), interval(rb));
    assert!(
        sa < fb && sb < fa,
        "jobs on different targets should overlap: A {sa}..{fa}, B {sb}..{fb}"
    );
    let (ta, tb) = (tag(ra), tag(rb));
    assert_ne!(
        (ta.daemon_id.as_str(), ta.slot),
        (tb.daemon_id.as_str(), tb.slot),
        "parallel jobs must run in different slots: {} and {}",
        ra.worker,
        rb.worker
    );
}

#[tokio::test]
async fn jobs_on_one_target_run_one_after_the_other() {
    let emu = start_with_quota(FAST).await;
    // Two daemons with two slots each: plenty of room, so only the target rule keeps the
    // second job waiting.
    let fleet = Fleet::start(&emu, &["vm-1", "vm-2"], &[], "").await;
    let c = &fleet.configs[0];
    let sheets = client(&emu, c).await;
    let first = enqueue(
        sheets.as_ref(),
        c,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0.8}"#,
        "alice@example.com",
    )
    .await;
    let second = enqueue(
        sheets.as_ref(),
        c,
        "サーバーA",
        "再起動 (5秒)",
        "sleep",
        r#"{"seconds":0.8}"#,
        "bob@example.com",
    )
    .await;
    let rows = wait_finished(&emu, &[first.clone(), second.clone()], WAIT).await;
    fleet.stop(&emu).await;
    let (r1, r2) = (row_of(&rows, &first), row_of(&rows, &second));
    assert_done(r1);
    assert_done(r2);
    let ((s1, f1), (s2, f2)) = (interval(r1), interval(r2));
    assert!(
        s2 >= f1,
        "the second job on サーバーA started at {s2}, before the first ended at {f1} (first {s1}..{f1}, second {s2}..{f2})"
    );
}

/// Enqueues three half-second jobs of different functions on サーバーA, in that order: they
/// run one after the other. Their jobIds.
async fn three_on_one_target(
    sheets: &dyn sheetq::sheets::Sheets,
    c: &sheetq::config::Config,
) -> Vec<String> {
    let mut jobs = Vec::new();
    for function in ["動作確認 (2秒)", "再起動 (5秒)", "バックアップ (10秒)"] {
        jobs.push(
            enqueue(
                sheets,
                c,
                "サーバーA",
                function,
                "sleep",
                r#"{"seconds":0.5}"#,
                "alice@example.com",
            )
            .await,
        );
    }
    jobs
}

/// The pass whose write-back frees a target claims the next job waiting for it: the plan
/// reads the finished row as the write left it, and the claim's own lease call reads the
/// queue afresh. Between the first job's end and the second's start there is the one read
/// that found the result to write, not a second poll to see the target free.
#[tokio::test]
async fn a_target_freed_by_a_result_is_claimed_in_the_pass_that_writes_the_result() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    let c = &fleet.configs[0];
    let sheets = client(&emu, c).await;
    let jobs = three_on_one_target(sheets.as_ref(), c).await;
    let rows = wait_finished(&emu, &jobs, WAIT).await;
    fleet.stop(&emu).await;
    let mut runs: Vec<(DateTime<Utc>, DateTime<Utc>)> = jobs
        .iter()
        .map(|j| {
            let r = row_of(&rows, j);
            assert_done(r);
            interval(r)
        })
        .collect();
    runs.sort();
    let requests = emu.requests();
    for pair in runs.windows(2) {
        let ((_, ended), (started, _)) = (pair[0], pair[1]);
        let reads: Vec<String> = requests
            .iter()
            .filter(|r| !r.write && r.method != "oauth2.token" && r.at > ended && r.at < started)
            .map(|r| format!("{} {}", r.at.format("%H:%M:%S%.3f"), r.method))
            .collect();
        assert!(
            reads.len() <= 1,
            "the job after the one that ended at {ended} started at {started}, {} reads later; the pass that wrote the result should have claimed it: {reads:#?}",
            reads.len()
        );
    }
}

/// The spreadsheet's lease acquires in the request log: the `spreadsheets.batchUpdate`
/// calls that read the queue from its header back (a claim commit reads its rows only).
fn lease_acquires(emu: &sheetq::emulator::Emulator) -> usize {
    emu.requests()
        .iter()
        .filter(|r| {
            r.method == "spreadsheets.batchUpdate"
                && r.status == 200
                && r.ranges
                    .iter()
                    .any(|x| x.starts_with("'_ジョブキュー'!A1:"))
        })
        .count()
}

/// A daemon alone on its spreadsheet, with rows left waiting for its targets, keeps the
/// lease its commit took: the claims that follow each cost the result and the commit, no
/// acquire. The commit that leaves nothing waiting frees the lease.
#[tokio::test]
async fn a_daemon_alone_claims_the_jobs_waiting_for_its_target_under_the_lease_it_kept() {
    let emu = start_with_quota(FAST).await;
    // All three wait before the daemon starts: its first commit sees the other two left.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let jobs = three_on_one_target(sheets.as_ref(), &enqueuer).await;
    emu.clear_requests();
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    let rows = wait_finished(&emu, &jobs, WAIT).await;
    let lease = emu.values("'_ワーカー'!B1").expect("the lease cell");
    let acquires = lease_acquires(&emu);
    fleet.stop(&emu).await;
    for j in &jobs {
        assert_done(row_of(&rows, j));
    }
    assert_eq!(
        acquires, 1,
        "three jobs on one target, claimed one after the other by a daemon alone, should take the lease once and keep it for the next two claims"
    );
    assert_eq!(
        lease[0][0], "free",
        "the commit that claimed the last waiting job should have freed the lease"
    );
}

/// A kept lease is freed as soon as a row waits that another daemon could claim: here a
/// job for a free target while the daemon's one slot is busy.
#[tokio::test]
async fn a_kept_lease_is_freed_when_a_row_waits_that_the_daemon_cannot_claim_now() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let mut jobs = Vec::new();
    for (function, seconds) in [("動作確認 (2秒)", "6"), ("再起動 (5秒)", "0.2")] {
        let args = format!("{{\"seconds\":{seconds}}}");
        jobs.push(
            enqueue(
                sheets.as_ref(),
                &enqueuer,
                "サーバーA",
                function,
                "sleep",
                &args,
                "alice@example.com",
            )
            .await,
        );
    }
    let fleet = Fleet::start(&emu, &["vm-1"], &[("slots", "1")], "").await;
    let lease = || emu.values("'_ワーカー'!B1").expect("the lease cell")[0][0].clone();
    let running = |job: &str| row_of(&queue_rows(&emu), job).state.is(State::Running);
    wait_for(
        "the daemon to keep the lease while the first job runs and the second waits for its target",
        WAIT,
        || {
            (running(&jobs[0])
                && lease()
                    .as_str()
                    .is_some_and(|l| l.starts_with("lease|vm-1|")))
            .then_some(())
        },
        || format!("lease {:?}; {}", lease(), describe_queue(&queue_rows(&emu))),
    )
    .await;
    let other = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーB",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0.2}"#,
        "bob@example.com",
    )
    .await;
    wait_for(
        "the kept lease to be freed while the first job still runs",
        Duration::from_secs(5),
        || (lease() == "free").then_some(()),
        || format!("lease {:?}; {}", lease(), describe_queue(&queue_rows(&emu))),
    )
    .await;
    assert!(
        running(&jobs[0]),
        "the lease should have been freed while the first job ran, not after: {}",
        describe_queue(&queue_rows(&emu))
    );
    jobs.push(other);
    let rows = wait_finished(&emu, &jobs, WAIT).await;
    fleet.stop(&emu).await;
    for j in &jobs {
        assert_done(row_of(&rows, j));
    }
}

/// A daemon that starts with a job waiting reaches it in three reads (the metadata, the
/// queue with the marker cells, one poll: the first pass goes on start-up's last read) and
/// the lease acquire; its first heartbeat row goes in with the claim commit, not in a write
/// of its own.
#[tokio::test]
async fn a_daemon_started_with_a_job_waiting_claims_it_after_three_reads_and_no_write_of_its_own() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let job = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0.2}"#,
        "alice@example.com",
    )
    .await;
    emu.clear_requests();
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    let rows = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    let requests = emu.requests();
    let workers = emu.values("'_ワーカー'!A3:A").expect("the heartbeat rows");
    fleet.stop(&emu).await;
    let (started, _) = interval(row_of(&rows, &job));
    let before: Vec<String> = requests
        .iter()
        .filter(|r| r.method != "oauth2.token" && r.at < started)
        .map(|r| {
            format!(
                "{} {} {:?}",
                if r.write { "W" } else { "R" },
                r.method,
                r.ranges
            )
        })
        .collect();
    let reads = before.iter().filter(|r| r.starts_with('R')).count();
    let writes = before.iter().filter(|r| r.starts_with('W')).count();
    assert_eq!(
        (reads, writes),
        (3, 1),
        "before the job started the daemon should have read three times and sent only the lease acquire: {before:#?}"
    );
    assert!(
        !requests
            .iter()
            .any(|r| r.method == "spreadsheets.values.append"
                && r.ranges.iter().any(|x| x.contains("_ワーカー"))),
        "the first heartbeat should ride the claim commit, not a values.append of its own"
    );
    assert_eq!(
        workers,
        vec![vec![serde_json::json!("vm-1")]],
        "the daemon's heartbeat row is there, once"
    );
}

/// With another live daemon on the spreadsheet, no commit keeps the lease: each claim
/// takes it afresh, so neither daemon holds the other's presses back.
#[tokio::test]
async fn with_two_daemons_on_a_spreadsheet_every_claim_takes_the_lease_afresh() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1", "vm-2"], &[], "").await;
    let c = &fleet.configs[0];
    let sheets = client(&emu, c).await;
    emu.clear_requests();
    let jobs = three_on_one_target(sheets.as_ref(), c).await;
    let rows = wait_finished(&emu, &jobs, WAIT).await;
    let acquires = lease_acquires(&emu);
    fleet.stop(&emu).await;
    for j in &jobs {
        assert_done(row_of(&rows, j));
    }
    assert!(
        acquires >= jobs.len(),
        "with two live daemons each of the {} claims should have taken the lease afresh, but only {acquires} acquires were sent",
        jobs.len()
    );
}

#[tokio::test]
async fn every_requester_is_served_and_an_empty_requester_works() {
    let emu = start_with_quota(FAST).await;
    let config = daemon_config(
        &emu,
        "enqueuer",
        std::path::Path::new("/nonexistent"),
        &[],
        "",
    );
    let sheets = client(&emu, &config).await;
    let job = |target: &'static str, requester: &'static str| {
        let sheets = sheets.clone();
        let config = config.clone();
        async move {
            enqueue(
                sheets.as_ref(),
                &config,
                target,
                "動作確認 (2秒)",
                "sleep",
                r#"{"seconds":0.6}"#,
                requester,
            )
            .await
        }
    };
    // In order of receipt: two presses without a requester, then alice's burst, then bob.
    let anon1 = job("T1", "").await;
    let anon2 = job("T2", "").await;
    let alice1 = job("T3", "alice@example.com").await;
    let alice2 = job("T4", "alice@example.com").await;
    let bob = job("T5", "bob@example.com").await;
    let all = [
        anon1.clone(),
        anon2.clone(),
        alice1.clone(),
        alice2.clone(),
        bob.clone(),
    ];
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    let rows = wait_finished(&emu, &all, WAIT).await;
    fleet.stop(&emu).await;
    for id in &all {
        assert_done(row_of(&rows, id));
    }
    let (sa1, fa1) = interval(row_of(&rows, &anon1));
    let (sa2, fa2) = interval(row_of(&rows, &anon2));
    assert!(
        sa1 < fa2 && sa2 < fa1,
        "two presses with an empty 依頼者 are not one person: they should run together ({sa1}..{fa1}, {sa2}..{fa2})"
    );
    let (s_alice2, _) = interval(row_of(&rows, &alice2));
    let (s_bob, _) = interval(row_of(&rows, &bob));
    let (s_alice1, _) = interval(row_of(&rows, &alice1));
    assert!(
        s_bob < s_alice2,
        "bob's press (received after alice's two) should start before alice's second ({s_bob} vs {s_alice2}; alice's first at {s_alice1})"
    );
}

/// Ticks the ▶ box of a demo panel row, as a person does.
pub fn tick(emu: &sheetq::emulator::Emulator, title: &str, row: u32) {
    emu.set_values(&format!("'{title}'!A{row}"), json!([[true]]), false)
        .unwrap_or_else(|e| panic!("cannot tick {title}!A{row}: {e:?}"));
}

#[tokio::test]
async fn a_start_time_moved_into_the_past_decides_nothing_and_the_function_can_be_pressed_again() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1"], &[("intake", "\"poll\"")], "").await;
    let panel = "サーバーA";
    emu.set_values(
        &format!("'{panel}'!I8"),
        json!([[r#"{"seconds":2}"#]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    tick(&emu, panel, 8);
    let first = wait_for(
        "the press to be claimed",
        WAIT,
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.state.is(State::Running))
        },
        || format!("{:#?}", queue_rows(&emu)),
    )
    .await;
    // A person (or a clock that is off, or daylight saving falling back) makes the start
    // 16 minutes old, past stale_after (15m): no decision reads another machine's clock, so
    // the job runs to its end as if nothing happened.
    let past = Utc::now() - chrono::Duration::minutes(16);
    emu.set_values(
        &format!("'_ジョブキュー'!L{}", first.row),
        json!([[sheetq::sheet_time::instant_to_serial(past, TZ)]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let rows = wait_finished(&emu, std::slice::from_ref(&first.job_id), WAIT).await;
    let done = row_of(&rows, &first.job_id);
    assert_done(done);
    assert!(
        done.started_at
            .is_some_and(|t| t > past + chrono::Duration::minutes(10)),
        "the result restates the claim's own 開始日時: {done:#?}"
    );
    // Pressed again: the duplicate guard no longer sees a running row, so a new row runs.
    emu.set_values(
        &format!("'{panel}'!I8"),
        json!([[r#"{"seconds":0.2}"#]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    tick(&emu, panel, 8);
    let second = wait_for(
        "the second press to finish",
        WAIT,
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.job_id != first.job_id && r.state.is(State::Done))
        },
        || format!("{:#?}", queue_rows(&emu)),
    )
    .await;
    fleet.stop(&emu).await;
    let rows = queue_rows(&emu);
    assert_eq!(rows.len(), 2, "two presses, two rows: {rows:#?}");
    let done = sheetq::panel::done_text(
        second.finished_at.unwrap_or_else(|| panic!("no 終了日時")),
        TZ,
    );
    let shown = support::panel_row(&emu, panel, 8);
    assert_eq!(
        shown[2], done,
        "the panel shows the second run's result: {shown:?}"
    );
}

#[tokio::test]
async fn shutdown_stops_a_job_that_outlives_the_grace_period_and_says_so() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1"], &[("shutdown_grace", "\"300ms\"")], "").await;
    let c = fleet.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let job = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーB",
        "再起動 (5秒)",
        "sleep",
        r#"{"seconds":60}"#,
        "",
    )
    .await;
    wait_for(
        "the job to run",
        WAIT,
        || {
            row_of(&queue_rows(&emu), &job)
                .state
                .is(State::Running)
                .then_some(())
        },
        || format!("{:#?}", queue_rows(&emu)),
    )
    .await;
    let reports = fleet.stop(&emu).await;
    assert_eq!(
        reports[0].results_pending, 0,
        "every result is written at shutdown"
    );
    let rows = queue_rows(&emu);
    let r = row_of(&rows, &job);
    assert!(
        r.state.is(State::Error) && r.message.contains("shutdown"),
        "a job stopped at shutdown is エラー with a message saying so: {r:#?}"
    );
    let shown = support::panel_row(&emu, "サーバーB", 9);
    assert!(
        shown[2].starts_with("❌ エラー"),
        "the panel row shows the error: {shown:?}"
    );
}

/// Fills the queue with `n` rows of `sleep` jobs finished long ago (rows 2 to n+1), as a
/// year of history would.
fn seed_finished(emu: &sheetq::emulator::Emulator, n: usize) {
    seed_queue(
        emu,
        (0..n)
            .map(|i| finished_row(&format!("old-{i}"), "完了", 365))
            .collect(),
    );
}

#[tokio::test]
async fn an_idle_poll_is_one_read_of_the_unfinished_window() {
    let emu = start_with_quota(FAST).await;
    // A year of finished rows: the idle poll must not read them.
    seed_finished(&emu, 300);
    let fleet = Fleet::start(
        &emu,
        &["vm-1"],
        &[
            ("heartbeat_interval", "\"1m\""),
            ("dead_after", "\"5m\""),
            ("retention", "\"0\""),
        ],
        "",
    )
    .await;
    let reads = "spreadsheets.values.batchGetByDataFilter";
    // Started: it has read and written its heartbeat once.
    wait_polls(&emu, 3).await;
    assert_no_quota_refusals(&emu);
    emu.clear_requests();
    let polls = 20;
    wait_for(
        "20 idle polls",
        WAIT,
        || (emu.count(reads) >= polls).then_some(()),
        || format!("{:?}", emu.counters()),
    )
    .await;
    let log = emu.requests();
    fleet.stop(&emu).await;
    let log: Vec<_> = log.into_iter().take(polls as usize).collect();
    let others: Vec<_> = log.iter().filter(|r| r.method != reads).collect();
    assert!(
        others.is_empty(),
        "an idle poll must be one read and nothing else; also saw {others:#?}"
    );
    for r in &log {
        let window = r
            .ranges
            .iter()
            .find(|g| g.contains("_ジョブキュー") && !g.ends_with("1:P1") && !g.contains("!A1:"))
            .unwrap_or_else(|| panic!("the poll reads no queue window: {:?}", r.ranges));
        let start: u32 = window
            .rsplit('!')
            .next()
            .and_then(|a| a.trim_start_matches('A').split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("cannot read the window's first row from {window}"));
        assert!(
            start >= 300,
            "an idle poll should read from the end of the finished rows, not {window} (all ranges: {:?})",
            r.ranges
        );
    }
}

#[tokio::test]
async fn a_finished_row_set_back_to_waiting_by_hand_is_found_by_the_sweep_and_run() {
    let emu = start_with_quota(FAST).await;
    seed_finished(&emu, 300);
    let fleet = Fleet::start(
        &emu,
        &["vm-1"],
        &[("sweep_rows", "40"), ("retention", "\"0\"")],
        "",
    )
    .await;
    let polls = "spreadsheets.values.batchGetByDataFilter";
    wait_polls(&emu, 3).await;
    // Far above the window, a person sets old-10 (row 12) back to 待機 to run it again.
    emu.set_values(
        "'_ジョブキュー'!K12:P12",
        json!([["待機", "", "", "", "", ""]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let rows = wait_finished(&emu, &["old-10".to_string()], WAIT).await;
    let log = emu.requests();
    fleet.stop(&emu).await;
    let again = row_of(&rows, "old-10");
    assert!(again.state.is(State::Done), "old-10 ran again: {again:#?}");
    assert!(
        again.worker.starts_with("vm-1/"),
        "old-10 was run by vm-1 this time: {again:#?}"
    );
    // The sweep reads the 状態 column 40 rows at a time; no poll read the whole queue.
    let sweeps: Vec<&String> = log
        .iter()
        .filter(|r| r.method == polls)
        .flat_map(|r| &r.ranges)
        .filter(|g| g.starts_with("'_ジョブキュー'!K"))
        .collect();
    assert!(
        sweeps
            .iter()
            .any(|g| g.as_str() == "'_ジョブキュー'!K2:K41"),
        "the sweep starts at row 2 in slices of 40: {sweeps:?}"
    );
    let whole: Vec<&String> = log
        .iter()
        .flat_map(|r| &r.ranges)
        .filter(|g| g.contains("!A2:"))
        .collect();
    assert!(
        whole.is_empty(),
        "polls must not read the whole queue: {whole:?}"
    );
}

/// Settings of the tests where several busy daemons share a queue: 4 slots, 50 ms polls,
/// a lease that outlasts a slow commit, retries enough for the injected faults.
pub(crate) const BUSY_FLEET: [(&str, &str); 4] = [
    ("slots", "4"),
    ("poll_interval", "\"50ms\""),
    ("lease_ttl", "\"10s\""),
    ("max_retries", "10"),
];

/// `n` jobs spread round-robin over `targets` targets (`T00`, `T01`, ...), each with its
/// number as args.
pub(crate) fn jobs_over_targets(n: usize, targets: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("T{:02}", i % targets), format!("{{\"n\":{i}}}")))
        .collect()
}

/// Makes a share (`probability`) of the calls to each of `methods` fail, with 429 and with
/// 503, for as long as the emulator runs or until the faults are cleared.
pub(crate) fn fail_some_calls(
    emu: &sheetq::emulator::Emulator,
    methods: &[&str],
    probability: f64,
) {
    for method in methods {
        for status in [429, 503] {
            emu.add_fault(FaultRule {
                method: Some((*method).into()),
                fault: Fault::Status(status),
                remaining: None,
                probability: Some(probability),
                user: None,
                body_contains: None,
            });
        }
    }
}

/// Appends `n` waiting rows in one call, as an Apps Script intake would over time.
pub(crate) async fn enqueue_many(
    sheets: &dyn sheetq::sheets::Sheets,
    config: &sheetq::config::Config,
    jobs: &[(String, String)],
) -> Vec<String> {
    let meta = sheets.metadata().await.unwrap_or_else(|e| panic!("{e}"));
    let header = sheets
        .read(&["'_ジョブキュー'!A1:P1".to_string()])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let header = header[0].values[0].clone();
    let columns = sheetq::queue::ColumnMap::from_header(&header, &config.headers)
        .unwrap_or_else(|e| panic!("{e}"));
    let tz = sheetq::sheet_time::parse_zone(&meta.time_zone).unwrap_or_else(|e| panic!("{e}"));
    let mut ids = Vec::new();
    let rows: Vec<Vec<serde_json::Value>> = jobs
        .iter()
        .map(|(target, args)| {
            let id = uuid::Uuid::new_v4().to_string();
            ids.push(id.clone());
            let job = sheetq::admin::NewJob {
                target: target.clone(),
                function: "記録".into(),
                command: "record".into(),
                args_json: args.clone(),
                requester: String::new(),
                panel_sheet: target.clone(),
                flags: vec![],
            };
            sheetq::admin::job_row(&columns, config, tz, &id, Utc::now(), &job)
        })
        .collect();
    sheets
        .append("'_ジョブキュー'!A1:P", &rows)
        .await
        .unwrap_or_else(|e| panic!("append: {e}"));
    ids
}

/// A command that appends its jobId to `file` and echoes it as the result message.
fn record_command(file: &std::path::Path, sleep: &str) -> String {
    format!(
        "[commands.record]\nexec = [\"/bin/sh\", \"-c\", \"sleep {sleep}; echo \\\"$SHEETQ_JOB_ID\\\" >> {}; echo \\\"$SHEETQ_JOB_ID\\\"\"]\n",
        file.display()
    )
}

/// One run of a job: 開始, 終了, jobId.
type Run<'a> = (DateTime<Utc>, DateTime<Utc>, &'a str);

/// Asserts that no two rows of one target ran at the same time.
fn assert_serial_per_target(rows: &[QueueRow]) {
    let mut by_target: BTreeMap<&str, Vec<Run>> = BTreeMap::new();
    for r in rows {
        let (s, f) = interval(r);
        by_target
            .entry(&r.target)
            .or_default()
            .push((s, f, &r.job_id));
    }
    for (target, mut runs) in by_target {
        runs.sort();
        for w in runs.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "two jobs overlapped on {target}: {} ran {}..{} and {} started at {}",
                w[0].2,
                w[0].0,
                w[0].1,
                w[1].2,
                w[1].0
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_with_api_faults_run_300_jobs_over_20_targets_exactly_once() {
    let emu = start_with_quota(FASTER).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ran = dir.path().join("ran.txt");
    let commands = record_command(&ran, "0.02");
    let settings = BUSY_FLEET;
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &settings, &commands);
    let sheets = client(&emu, &enqueuer).await;
    let jobs = jobs_over_targets(300, 20);
    let ids = enqueue_many(sheets.as_ref(), &enqueuer, &jobs).await;
    fail_some_calls(
        &emu,
        &[
            "spreadsheets.values.batchGet",
            "spreadsheets.values.batchUpdate",
            "spreadsheets.batchUpdate",
            "spreadsheets.values.append",
            "spreadsheets.get",
        ],
        0.05,
    );
    assert_no_quota_refusals(&emu);
    emu.clear_requests();
    let fleet = Fleet::start(&emu, &["vm-1", "vm-2"], &settings, &commands).await;
    let rows = wait_finished(&emu, &ids, Duration::from_secs(100)).await;
    let counters = emu.counters();
    let reports = fleet.stop(&emu).await;
    emu.clear_faults();
    for id in &ids {
        let r = row_of(&rows, id);
        assert_done(r);
        assert_eq!(&r.message, id, "row {} carries another job's result", r.row);
    }
    assert_eq!(rows.len(), 300, "no row was added or lost");
    let lines = std::fs::read_to_string(&ran).unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<&str> = lines.lines().collect();
    let distinct: HashSet<&str> = lines.iter().copied().collect();
    assert_eq!(
        (lines.len(), distinct.len()),
        (300, 300),
        "every job must run exactly once"
    );
    assert_serial_per_target(&rows);
    let workers: HashSet<String> = rows.iter().map(|r| tag(r).daemon_id).collect();
    assert_eq!(workers.len(), 2, "both daemons took part: {workers:?}");
    let finished: u64 = reports.iter().map(|r| r.jobs_finished).sum();
    let n = |m: &str| counters.by_method.get(m).copied().unwrap_or(0);
    let reads = n("spreadsheets.values.batchGet") + n("spreadsheets.get");
    let writes = n("spreadsheets.values.batchUpdate")
        + n("spreadsheets.batchUpdate")
        + n("spreadsheets.values.append");
    println!(
        "300 jobs, 2 daemons, faults 5%+5% per method: {} requests ({} answered with an error), {reads} reads ({:.2}/job), {writes} writes ({:.2}/job), conflicts {}; by method {:?}",
        counters.total,
        counters.errors,
        reads as f64 / 300.0,
        writes as f64 / 300.0,
        reports.iter().map(|r| r.claim_conflicts).sum::<u64>(),
        counters.by_method
    );
    assert_eq!(finished, 300, "the daemons report 300 finished jobs");
}

fn sort_queue(emu: &sheetq::emulator::Emulator, column: u32, order: &str) {
    let end = queue_rows(emu).iter().map(|r| r.row).max().unwrap_or(1);
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": 2001, "startRowIndex": 1, "endRowIndex": end,
                   "startColumnIndex": 0, "endColumnIndex": 16 },
        "sortSpecs": [{ "dimensionIndex": column, "sortOrder": order }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e:?}"));
}

fn delete_row(emu: &sheetq::emulator::Emulator, row: u32) {
    emu.batch_update(json!([{ "deleteDimension": { "range": {
        "sheetId": 2001, "dimension": "ROWS", "startIndex": row - 1, "endIndex": row } } }]))
        .unwrap_or_else(|e| panic!("delete: {e:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_sorted_and_deleted_by_a_person_mid_run_never_get_another_jobs_result() {
    let emu = start_with_quota(FASTER).await;
    seed_queue(
        &emu,
        (0..20)
            .map(|i| finished_row(&format!("old-{i:03}"), "完了", 365))
            .collect(),
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ran = dir.path().join("ran.txt");
    let commands = record_command(&ran, "1.5");
    // The old rows stay (no archiving): this test is about the rows people move.
    let settings = [
        ("slots", "6"),
        ("poll_interval", "\"50ms\""),
        ("retention", "\"0\""),
    ];
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &settings, &commands);
    let sheets = client(&emu, &enqueuer).await;
    let jobs: Vec<(String, String)> = (0..12)
        .map(|i| (format!("T{i}"), format!("{{\"n\":{i}}}")))
        .collect();
    let ids = enqueue_many(sheets.as_ref(), &enqueuer, &jobs).await;
    let fleet = Fleet::start(&emu, &["vm-1", "vm-2"], &settings, &commands).await;
    wait_for(
        "all 12 jobs to run",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            ids.iter()
                .all(|id| row_of(&rows, id).state.is(State::Running))
                .then_some(())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    // While they run, a person re-sorts the queue, deletes old rows above them and deletes
    // one running job's row outright.
    sort_queue(&emu, 0, "DESCENDING");
    let rows = queue_rows(&emu);
    let victim = row_of(&rows, &ids[5]).row;
    delete_row(&emu, victim);
    for old in ["old-003", "old-010", "old-017"] {
        let row = row_of(&queue_rows(&emu), old).row;
        delete_row(&emu, row);
    }
    sort_queue(&emu, 5, "DESCENDING");
    let remaining: Vec<String> = ids.iter().filter(|id| *id != &ids[5]).cloned().collect();
    let rows = wait_finished(&emu, &remaining, WAIT).await;
    // The deleted job's result has nowhere to go; give it the time the others took.
    fleet.stop(&emu).await;
    let rows_after = queue_rows(&emu);
    assert_eq!(
        rows_after, rows,
        "nothing was written after the others finished"
    );
    assert_eq!(rows.len(), 20 - 3 + 11, "{}", describe_queue(&rows));
    for r in &rows {
        assert_eq!(
            r.message,
            r.job_id,
            "row {} holds another job's result (or none):\n{}",
            r.row,
            describe_queue(&rows)
        );
        if !r.job_id.starts_with("old-") {
            assert_done(r);
        } else {
            assert_eq!(
                r.worker, "old/0 #00000000",
                "an old row was written to: {r:#?}"
            );
        }
    }
    let lines = std::fs::read_to_string(&ran).unwrap_or_else(|e| panic!("{e}"));
    let distinct: HashSet<&str> = lines.lines().collect();
    assert_eq!(
        (lines.lines().count(), distinct.len()),
        (12, 12),
        "every job ran exactly once"
    );
}

/// The real `sheetq run --config FILE` against the emulator, killed with SIGKILL on drop.
pub(crate) struct Binary {
    child: std::process::Child,
}

impl Binary {
    pub(crate) fn start(config: &std::path::Path, log: &std::path::Path) -> Binary {
        Self::start_with(config, log, &[])
    }

    /// [`Binary::start`] with more arguments after `run` (e.g. `--metrics-listen`).
    pub(crate) fn start_with(
        config: &std::path::Path,
        log: &std::path::Path,
        args: &[&str],
    ) -> Binary {
        Self::start_configured(config, log, args, |_| {})
    }

    /// [`Binary::start_with`], the process set up by `configure` first (its environment,
    /// its umask).
    pub(crate) fn start_configured(
        config: &std::path::Path,
        log: &std::path::Path,
        args: &[&str],
        configure: impl FnOnce(&mut std::process::Command),
    ) -> Binary {
        let out = std::fs::File::create(log).unwrap_or_else(|e| panic!("{e}"));
        let err = out.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"));
        command
            .arg("run")
            .args(args)
            .arg("--config")
            .arg(config)
            .stdout(out)
            .stderr(err);
        configure(&mut command);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start sheetq: {e}"));
        Binary { child }
    }

    /// [`Binary::start`] serving `/metrics` and the health endpoints on a free local port,
    /// which it returns.
    pub(crate) fn start_listening(
        config: &std::path::Path,
        log: &std::path::Path,
    ) -> (Binary, u16) {
        let port = crate::support::free_port();
        let listen = format!("127.0.0.1:{port}");
        (
            Self::start_with(config, log, &["--metrics-listen", &listen]),
            port,
        )
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, if the process has ended.
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap_or_else(|e| panic!("{e}"))
    }

    /// SIGKILL: no drain, no flush, no lease release.
    pub(crate) fn kill(mut self) {
        self.child.kill().unwrap_or_else(|e| panic!("kill -9: {e}"));
        let _ = self.child.wait();
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the key file (mode 600) and a config for the binary; returns the config path.
fn binary_config(emu: &sheetq::emulator::Emulator, dir: &std::path::Path) -> std::path::PathBuf {
    binary_config_with(
        emu,
        dir,
        "vm-kill",
        "heartbeat_interval = \"1s\"\ndead_after = \"1m\"\n",
        "[commands.sleep]\nbuiltin = \"sleep\"\n",
    )
}

/// Like [`binary_config`], as worker `worker` with more top-level `settings` (TOML lines)
/// and `commands` (TOML tables).
pub(crate) fn binary_config_with(
    emu: &sheetq::emulator::Emulator,
    dir: &std::path::Path,
    worker: &str,
    settings: &str,
    commands: &str,
) -> std::path::PathBuf {
    let key = crate::support::place_key(emu, dir);
    let path = dir.join("sheetq.toml");
    let text = format!(
        r#"spreadsheet_id = "{id}"
api_base_url = "{url}"
credentials = "{key}"
worker_id = "{worker}"
state_dir = "{state}"
slots = 2
poll_interval = "100ms"
requests_per_minute = {rpm}
max_retries = 1
{settings}{commands}"#,
        id = emu.spreadsheet_id(),
        url = emu.base_url(),
        key = key.display(),
        state = dir.join("state").display(),
        rpm = support::budget_share(emu),
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// A spreadsheet set up as an operator sets it up (`sheetq init` protects the queue,
/// `sheetq panels sync` makes the panels), the daemon's config for the binary
/// ([`binary_config_with`] with `commands`), and the operator's config and client, for
/// queueing jobs as `sheetq enqueue` does.
pub(crate) async fn protected_set_up(
    emu: &sheetq::emulator::Emulator,
    dir: &std::path::Path,
    worker: &str,
    commands: &str,
) -> (
    std::path::PathBuf,
    sheetq::config::Config,
    std::sync::Arc<dyn sheetq::sheets::Sheets>,
) {
    let config = binary_config_with(emu, dir, worker, "", commands);
    let operator = daemon_config(emu, "operator", dir, &[], "");
    let sheets = client(emu, &operator).await;
    sheetq::admin::init(sheets.as_ref(), &operator)
        .await
        .unwrap_or_else(|e| panic!("sheetq init: {e}"));
    let synced = run_sheetq(&config, &["panels", "sync"]).await;
    assert!(synced.status.success(), "sheetq panels sync: {synced:?}");
    (config, operator, sheets)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_job_marks_the_job_failed_and_writes_pending_results_after_restart() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config(&emu, dir.path());
    let log = dir.path().join("sheetq.log");
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };

    // 1. Killed while a long job runs.
    let long = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーA",
        "再起動 (5秒)",
        "sleep",
        r#"{"seconds":120}"#,
        "",
    )
    .await;
    let daemon = Binary::start(&config, &log);
    wait_for(
        "the long job to run under vm-kill",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let r = row_of(&rows, &long);
            (r.state.is(State::Running) && r.worker.starts_with("vm-kill/")).then_some(())
        },
        show,
    )
    .await;

    // 2. A short job finishes while every values write fails (by range, and by data filter,
    // which results and heartbeats use): its result waits in the outbox.
    for method in [
        "spreadsheets.values.batchUpdate",
        "spreadsheets.values.batchUpdateByDataFilter",
    ] {
        emu.add_fault(FaultRule {
            method: Some(method.into()),
            fault: Fault::Status(503),
            remaining: None,
            probability: None,
            user: None,
            body_contains: None,
        });
    }
    let short = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーB",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0.1}"#,
        "",
    )
    .await;
    let outbox = dir.path().join("state").join("outbox.jsonl");
    wait_for(
        "the short job's result to be kept in the outbox",
        WAIT,
        || {
            std::fs::read_to_string(&outbox)
                .ok()
                .filter(|t| t.contains(&short))
                .map(|_| ())
        },
        show,
    )
    .await;
    assert!(
        row_of(&queue_rows(&emu), &short).state.is(State::Running),
        "with values writes failing, the short job's row cannot have been written yet: {}",
        show()
    );
    daemon.kill();
    emu.clear_faults();

    // 3. Restarted while the API fails: the first requests are refused (more often than the
    // client retries), a connection drops, and the recovery's write applies but its reply
    // is lost. The daemon keeps trying instead of exiting; then the cut-off job is an error,
    // the kept result is written.
    emu.add_fault(FaultRule::next(None, Fault::Status(503), 3));
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.values.batchUpdateByDataFilter"),
        Fault::DropAfterApply,
        1,
    ));
    emu.add_fault(FaultRule::next(None, Fault::Drop, 1));
    emu.add_fault(FaultRule::next(None, Fault::Status(429), 2));
    let mut daemon = Binary::start(&config, &log);
    let rows = wait_finished(&emu, &[long.clone(), short.clone()], WAIT).await;
    assert_eq!(
        daemon.exited(),
        None,
        "a transient API failure during start-up must not end the process
{}",
        show()
    );
    drop(daemon);
    let l = row_of(&rows, &long);
    assert!(
        l.state.is(State::Error) && l.message.contains("worker restarted during the job"),
        "the job cut off by the kill should be エラー \"worker restarted during the job\": {l:#?}"
    );
    let s = row_of(&rows, &short);
    assert_done(s);
    assert!(
        s.result_url.starts_with(&support::log_link_prefix(&emu)),
        "結果URL links to the job's log row: {s:#?}"
    );
    let panel = support::panel_row(&emu, "サーバーA", 9);
    assert!(
        panel[2].starts_with("❌ エラー"),
        "panel of the cut-off job: {panel:?}"
    );
    let panel = support::panel_row(&emu, "サーバーB", 8);
    assert!(
        panel[2].starts_with("✅ 完了"),
        "panel of the kept result: {panel:?}"
    );
    assert_no_quota_refusals(&emu);
}

/// A person sorts the queue in the instant between a daemon's lease read and its commit, so
/// the row the daemon planned to claim is no longer at the position it commits to. The
/// per-row compare-and-swap then flips whichever waiting row sits there: the daemon must run
/// exactly that row (it did claim it), leave the planned one waiting for a later pass, and
/// never leave a row stuck in 実行中.
#[tokio::test(flavor = "multi_thread")]
async fn a_sort_between_the_lease_read_and_the_commit_still_runs_each_job_once() {
    let emu = support::start_with_quota(FAST).await;
    // Its state directory is never used; a temporary one keeps the tree clean.
    let scratch = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let setup = support::daemon_config(&emu, "setup", scratch.path(), &[], "");
    let sheets = support::client(&emu, &setup).await;
    let first = support::enqueue(
        sheets.as_ref(),
        &setup,
        "サーバーA",
        "動作確認 (2秒)",
        "echo",
        r#"{"id":"first"}"#,
        "",
    )
    .await;
    let second = support::enqueue(
        sheets.as_ref(),
        &setup,
        "サーバーB",
        "動作確認 (2秒)",
        "echo",
        r#"{"id":"second"}"#,
        "",
    )
    .await;
    // Newest first (受付日時 descending): `second` moves to row 2, where the commit lands.
    let fleet = sort_between_read_and_commit(&emu, "sorted-1", 3, 1, "DESCENDING").await;
    let rows = support::wait_finished(
        &emu,
        &[first.clone(), second.clone()],
        Duration::from_secs(30),
    )
    .await;
    fleet.stop(&emu).await;
    for (id, marker) in [(&first, "first"), (&second, "second")] {
        let row = support::row_of(&rows, id);
        assert!(
            row.state.is(State::Done),
            "{marker} should be 完了:\n{}",
            support::describe_queue(&rows)
        );
        assert!(
            row.message.contains(marker),
            "{marker}'s row holds its own result, not another's: {:?}",
            row.message
        );
    }
}

/// The same race, with a finished row sorted into the claimed position: the compare-and-swap
/// refuses it (it is not 待機), and the 開始日時/ワーカー the commit wrote over it are put
/// back, so a person's history is not rewritten; the planned job still runs once, later.
#[tokio::test(flavor = "multi_thread")]
async fn a_finished_row_sorted_under_a_claim_keeps_its_history() {
    let emu = support::start_with_quota(FAST).await;
    // Its state directory is never used; a temporary one keeps the tree clean.
    let scratch = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let setup = support::daemon_config(&emu, "setup", scratch.path(), &[], "");
    let sheets = support::client(&emu, &setup).await;
    // Row 2 runs on another daemon (so the unfinished window starts there), row 3 is an old
    // finished job with its own claim record, row 4 waits.
    support::enqueue(
        sheets.as_ref(),
        &setup,
        "サーバーB",
        "動作確認 (2秒)",
        "echo",
        "{}",
        "b@example.com",
    )
    .await;
    let now = sheetq::sheet_time::instant_to_serial(Utc::now(), support::TZ);
    emu.set_values("'_ジョブキュー'!K2:L2", json!([["実行中", now]]), false)
        .unwrap_or_else(|e| panic!("mark row 2 running: {e:?}"));
    emu.set_values(
        "'_ジョブキュー'!P2",
        json!([["other-vm/0 #07e40000"]]),
        false,
    )
    .unwrap_or_else(|e| panic!("mark row 2 running: {e:?}"));
    let old = support::enqueue(
        sheets.as_ref(),
        &setup,
        "サーバーC",
        "動作確認 (2秒)",
        "echo",
        "{}",
        "c@example.com",
    )
    .await;
    emu.set_values(
        "'_ジョブキュー'!K3:P3",
        json!([[
            "完了",
            46356.5,
            46356.6,
            "",
            "done long ago",
            "old-vm/0 #0ld0ld00"
        ]]),
        false,
    )
    .unwrap_or_else(|e| panic!("finish row 3: {e:?}"));
    let waiting = support::enqueue(
        sheets.as_ref(),
        &setup,
        "サーバーA",
        "動作確認 (2秒)",
        "echo",
        r#"{"id":"waiting"}"#,
        "a@example.com",
    )
    .await;
    // By requester: a (waiting) → row 2, b (running) → row 3, c (finished) → row 4, where the
    // claim of `waiting` lands.
    let fleet = sort_between_read_and_commit(&emu, "sorted-2", 4, 2, "ASCENDING").await;
    let rows = support::wait_finished(
        &emu,
        std::slice::from_ref(&waiting),
        Duration::from_secs(30),
    )
    .await;
    fleet.stop(&emu).await;
    let done = support::row_of(&rows, &waiting);
    assert!(
        done.state.is(State::Done) && done.message.contains("waiting"),
        "the planned job ran: {done:?}"
    );
    let history = support::row_of(&rows, &old);
    assert_eq!(
        history.worker,
        "old-vm/0 #0ld0ld00",
        "the old row's ワーカー is restored:\n{}",
        support::describe_queue(&rows)
    );
    assert_eq!(history.message, "done long ago");
    assert!(history.state.is(State::Done));
    assert_eq!(
        history
            .started_at
            .map(|t| sheetq::sheet_time::instant_to_serial(t, support::TZ)),
        Some(46356.5),
        "the old row's 開始日時 is restored"
    );
}

/// A `heavy` command runs one at a time per daemon even with free slots and different
/// targets: the second is not claimed (its 開始日時 is not written) until the first ended,
/// so it does not spend its timeout waiting at the heavy gate.
#[tokio::test]
async fn heavy_jobs_are_claimed_one_at_a_time_per_daemon() {
    let emu = start_with_quota(FAST).await;
    let heavy = "[commands.report]\nbuiltin = \"sleep\"\nheavy = true\n";
    let fleet = Fleet::start(&emu, &["vm-heavy"], &[("slots", "3")], heavy).await;
    let sheets = client(&emu, &fleet.configs[0]).await;
    let c = &fleet.configs[0];
    let mut ids = Vec::new();
    for target in ["サーバーA", "サーバーB"] {
        ids.push(
            enqueue(
                sheets.as_ref(),
                c,
                target,
                "バックアップ (10秒)",
                "report",
                r#"{"seconds":0.5}"#,
                "",
            )
            .await,
        );
    }
    let light = enqueue(
        sheets.as_ref(),
        c,
        "サーバーC",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0.5}"#,
        "",
    )
    .await;
    let mut all = ids.clone();
    all.push(light.clone());
    let rows = wait_finished(&emu, &all, WAIT).await;
    fleet.stop(&emu).await;
    let (first, second) = (row_of(&rows, &ids[0]), row_of(&rows, &ids[1]));
    assert_done(first);
    assert_done(second);
    let ((s1, f1), (s2, f2)) = (interval(first), interval(second));
    assert!(
        s2 >= f1 || s1 >= f2,
        "heavy jobs must not overlap: {s1}..{f1} and {s2}..{f2}"
    );
    let (sl, fl) = interval(row_of(&rows, &light));
    assert!(
        sl < f1.max(f2) && s1.min(s2) < fl,
        "a light job still runs beside a heavy one: light {sl}..{fl}"
    );
}

/// The reply to a claim pass's batch is lost after Google applied it (the connection drops).
/// A retry would find the lease or the row already changed and take our own claim for
/// someone else's; instead the daemon takes back its own lease at once, and resolves a lost
/// commit from the next poll by its token, so the job runs exactly once and nothing is left
/// stuck. Both batches of a pass are tried: the lease acquire and the commit.
#[tokio::test]
async fn a_lost_reply_to_a_claim_commit_still_runs_the_job_once() {
    for batch in ["lease acquire", "commit"] {
        let emu = start_with_quota(FAST).await;
        // The acquire is the first spreadsheets.batchUpdate of a pass, the commit the second.
        if batch == "commit" {
            emu.add_fault(FaultRule::next(
                Some("spreadsheets.batchUpdate"),
                Fault::Latency(Duration::ZERO),
                1,
            ));
        }
        emu.add_fault(FaultRule::next(
            Some("spreadsheets.batchUpdate"),
            Fault::DropAfterApply,
            1,
        ));
        let fleet = Fleet::start(&emu, &["vm-lost"], &[], "").await;
        let sheets = client(&emu, &fleet.configs[0]).await;
        let id = enqueue(
            sheets.as_ref(),
            &fleet.configs[0],
            "サーバーA",
            "動作確認 (2秒)",
            "sleep",
            r#"{"seconds":0.2}"#,
            "",
        )
        .await;
        let rows = wait_finished(&emu, std::slice::from_ref(&id), WAIT).await;
        let reports = fleet.stop(&emu).await;
        let row = row_of(&rows, &id);
        assert!(
            row.state.is(State::Done),
            "losing the reply of the {batch} must not lose the job: {row:?}"
        );
        assert_eq!(
            reports.iter().map(|r| r.jobs_finished).sum::<u64>(),
            1,
            "the job ran exactly once (lost reply of the {batch})"
        );
        assert!(
            emu.requests().iter().any(|r| r.status == 0),
            "the fault really dropped a reply ({batch})"
        );
    }
}

/// A person inserts a column into the queue while a job runs (the sheet `init` made is
/// exactly as wide as its header, so the header's last column moves past the range the daemon
/// read until then). The daemon re-reads the layout instead of stopping, the running job's
/// result lands in the moved columns, and a later job runs too.
#[tokio::test]
async fn a_column_inserted_into_the_queue_mid_run_is_followed() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-cols"], &[], "").await;
    let sheets = client(&emu, &fleet.configs[0]).await;
    let c = &fleet.configs[0];
    let first = enqueue(
        sheets.as_ref(),
        c,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":1}"#,
        "",
    )
    .await;
    wait_for(
        "the first job to run",
        WAIT,
        || {
            queue_rows(&emu)
                .iter()
                .any(|r| r.job_id == first && r.state.is(State::Running))
                .then_some(())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    let width = emu
        .with_spreadsheet(|ss| ss.sheet_by_title("_ジョブキュー").map(|s| s.column_count))
        .unwrap_or_else(|e| panic!("{e:?}"))
        .unwrap_or_default();
    emu.batch_update(json!([
        { "insertDimension": { "range": { "sheetId": 2001, "dimension": "COLUMNS", "startIndex": 1, "endIndex": 2 }, "inheritFromBefore": false } },
        { "updateCells": { "range": { "sheetId": 2001, "startRowIndex": 0, "endRowIndex": 1, "startColumnIndex": 1, "endColumnIndex": 2 },
                           "rows": [{ "values": [{ "userEnteredValue": { "stringValue": "メモ" } }] }], "fields": "userEnteredValue" } }
    ]))
    .unwrap_or_else(|e| panic!("insert a column: {e:?}"));
    let grown = emu
        .with_spreadsheet(|ss| ss.sheet_by_title("_ジョブキュー").map(|s| s.column_count))
        .unwrap_or_else(|e| panic!("{e:?}"))
        .unwrap_or_default();
    assert_eq!(
        grown,
        width + 1,
        "the queue grid grew by the inserted column"
    );
    let second = enqueue(
        sheets.as_ref(),
        c,
        "サーバーB",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0.2}"#,
        "",
    )
    .await;
    // Read the queue by its (moved) header, as the daemon must.
    let rows = wait_for(
        "both jobs to finish",
        WAIT,
        || {
            let values = emu.values("'_ジョブキュー'!A1:Q").ok()?;
            let columns =
                sheetq::queue::ColumnMap::from_header(&values[0], &Default::default()).ok()?;
            let rows =
                sheetq::queue::parse_rows(&values[1..], 2, &columns, &Default::default(), TZ).rows;
            let done = |id: &str| {
                rows.iter()
                    .any(|r| r.job_id == id && r.state.is(State::Done))
            };
            (done(&first) && done(&second)).then_some(rows)
        },
        || format!("{:?}", emu.values("'_ジョブキュー'!A1:Q")),
    )
    .await;
    fleet.stop(&emu).await;
    assert!(
        rows.iter().all(|r| r.message.starts_with("slept")),
        "{}",
        describe_queue(&rows)
    );
}

/// Starts one daemon (one slot) whose lease acquire and commit are slowed down, waits until
/// the acquire has read the queue, then sorts queue rows `2..=last_row` by column
/// `dimension` in `order`: the sort lands between the daemon's read and its commit.
async fn sort_between_read_and_commit(
    emu: &sheetq::emulator::Emulator,
    worker: &str,
    last_row: u32,
    dimension: u32,
    order: &str,
) -> Fleet {
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.batchUpdate"),
        Fault::Latency(Duration::from_millis(1500)),
        2,
    ));
    let fleet = Fleet::start(emu, &[worker], &[("slots", "1")], "").await;
    support::wait_for(
        "the lease acquire to complete",
        Duration::from_secs(20),
        || (emu.count("spreadsheets.batchUpdate") >= 1).then_some(()),
        || support::describe_queue(&support::queue_rows(emu)),
    )
    .await;
    emu.batch_update(json!([{"sortRange": {
        "range": {"sheetId": 2001, "startRowIndex": 1, "endRowIndex": last_row, "startColumnIndex": 0, "endColumnIndex": 16},
        "sortSpecs": [{"dimensionIndex": dimension, "sortOrder": order}]
    }}]))
    .unwrap_or_else(|e| panic!("sort the queue: {e:?}"));
    fleet
}

/// A token the API refuses once (revoked, expired early, the emulator restarted) costs one
/// fresh token, not the daemon: the refused call is sent again at once and work goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_replaced_and_the_daemon_goes_on() {
    let emu = start_with_quota(FAST).await;
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    wait_polls(&emu, 3).await;
    let tokens = emu.count("oauth2.token");
    emu.add_fault(FaultRule {
        method: Some("spreadsheets.values.batchGetByDataFilter".into()),
        fault: Fault::Status(401),
        remaining: Some(1),
        probability: None,
        user: None,
        body_contains: None,
    });
    let sheets = client(&emu, &fleet.configs[0]).await;
    let job = enqueue(
        sheets.as_ref(),
        &fleet.configs[0],
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":0}"#,
        "",
    )
    .await;
    let rows = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    assert!(
        row_of(&rows, &job).state.is(State::Done),
        "the job ran after the 401"
    );
    assert!(
        emu.count("oauth2.token") > tokens,
        "the refused token was replaced by a fresh one"
    );
    // Stops cleanly: the 401 did not end the daemon.
    fleet.stop(&emu).await;
}

/// A fake systemd in `dir`: the notification socket (reads time out after 30 s) and the
/// notifier a daemon is given to reach it.
fn fake_systemd(
    dir: &std::path::Path,
) -> (std::os::unix::net::UnixDatagram, sheetq::notify::Notifier) {
    let path = dir.join("notify.sock");
    let systemd = std::os::unix::net::UnixDatagram::bind(&path).unwrap_or_else(|e| panic!("{e}"));
    systemd
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let notifier = sheetq::notify::Notifier::from_values(
        Some(path.as_os_str()),
        None,
        None,
        std::process::id(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (systemd, notifier)
}

/// A daemon run in this process with `notifier` as its systemd, until `shutdown`.
fn spawn_notified(
    sheets: std::sync::Arc<dyn sheetq::sheets::Sheets>,
    config: sheetq::config::Config,
    notifier: sheetq::notify::Notifier,
    shutdown: &tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<Result<sheetq::daemon::RunReport, sheetq::daemon::DaemonError>> {
    let registry = sheetq::setup::registry(&config).unwrap_or_else(|e| panic!("{e:#}"));
    let observers = sheetq::daemon::Observers {
        notifier: std::sync::Arc::new(notifier),
        ..Default::default()
    };
    tokio::spawn(sheetq::daemon::run_observed(
        sheets,
        config,
        registry,
        shutdown.clone(),
        observers,
    ))
}

/// What `systemd` hears, up to the first message `last` accepts (or a read timeout).
async fn hear_until(
    systemd: std::os::unix::net::UnixDatagram,
    last: fn(&str) -> bool,
) -> (Vec<String>, std::os::unix::net::UnixDatagram) {
    tokio::task::spawn_blocking(move || {
        let mut heard = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = systemd.recv(&mut buf) {
            let line = String::from_utf8_lossy(&buf[..n]).to_string();
            let done = last(&line);
            heard.push(line);
            if done {
                break;
            }
        }
        (heard, systemd)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn systemd_hears_ready_a_status_line_of_what_the_daemon_does_and_stopping() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (systemd, notifier) = fake_systemd(dir.path());
    let config = daemon_config(&emu, "d1", &dir.path().join("state"), &[], "");
    let sheets = client(&emu, &config).await;
    enqueue(
        sheets.as_ref(),
        &config,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":1}"#,
        "",
    )
    .await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let daemon = spawn_notified(sheets, config, notifier, &shutdown);
    let (mut heard, systemd) =
        hear_until(systemd, |l| l.starts_with("STATUS=polling: 1/2 slots busy")).await;
    shutdown.cancel();
    daemon
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut buf = [0u8; 4096];
    systemd
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap_or_else(|e| panic!("{e}"));
    while let Ok(n) = systemd.recv(&mut buf) {
        heard.push(String::from_utf8_lossy(&buf[..n]).to_string());
    }
    assert!(heard.contains(&"READY=1".to_string()), "{heard:?}");
    assert!(
        heard
            .iter()
            .any(|l| l.starts_with("STATUS=polling: 1/2 slots busy")),
        "the status line says a job runs: {heard:?}"
    );
    let stopping = heard.iter().position(|l| l == "STOPPING=1");
    assert!(stopping.is_some(), "{heard:?}");
    assert!(
        heard.iter().any(|l| l.starts_with("STATUS=stopping: ")),
        "{heard:?}"
    );
}

/// Started while the API fails, the daemon tries again instead of exiting and, until its
/// first pass works, asks systemd for more time to start (`EXTEND_TIMEOUT_USEC`) before
/// each try: an outage at boot does not get the unit killed and restarted until its start
/// limit gives up. READY=1 comes once the API answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_started_during_an_outage_asks_systemd_for_time_then_says_ready() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (systemd, notifier) = fake_systemd(dir.path());
    let config = daemon_config(
        &emu,
        "d1",
        &dir.path().join("state"),
        &[("max_retries", "0")],
        "",
    );
    let sheets = client(&emu, &config).await;
    emu.add_fault(FaultRule::next(None, Fault::Status(503), 3));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let daemon = spawn_notified(sheets, config, notifier, &shutdown);
    let (heard, _) = hear_until(systemd, |l| l == "READY=1").await;
    shutdown.cancel();
    daemon
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("the daemon must not fail on an outage at start: {e}"));
    let ready = heard.iter().position(|l| l == "READY=1");
    let extended = heard
        .iter()
        .position(|l| l.starts_with("EXTEND_TIMEOUT_USEC="));
    assert!(
        matches!((extended, ready), (Some(e), Some(r)) if e < r),
        "more time asked for before READY=1: {heard:?}"
    );
}

/// The state letter and parent pid of process `pid` (`None`: it is gone, reaped).
pub(crate) fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// A command that leaves a process behind (one that left its group with `setsid`, so the
/// group's SIGKILL does not reach it): that process is reparented to `sheetq run`, the
/// child subreaper, and reaped by it when it ends, instead of staying a zombie (in a
/// container where sheetq is PID 1, nothing else would reap it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_a_command_leaves_behind_is_reaped_by_sheetq_not_left_a_zombie() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The process left behind says when it has left the group (the group is killed as soon
    // as the command ends), then sleeps 2 s with its output closed.
    let ready = dir.path().join("left-the-group");
    let script = format!(
        "setsid sh -c 'touch {ready}; exec sleep 2' >/dev/null 2>&1 </dev/null & while [ ! -e {ready} ]; do sleep 0.05; done; echo $!",
        ready = ready.display()
    );
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-reaper",
        "heartbeat_interval = \"1s\"\ndead_after = \"1m\"\n",
        &format!(
            "[commands.leave]\nexec = [\"/bin/sh\", \"-c\", {}]\n",
            toml::Value::String(script)
        ),
    );
    let log = dir.path().join("sheetq.log");
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let daemon = Binary::start(&config, &log);
    let job = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーA",
        "動作確認 (2秒)",
        "leave",
        "{}",
        "",
    )
    .await;
    let rows = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    let r = row_of(&rows, &job);
    assert_done(r);
    let left: u32 = r.message.trim().parse().unwrap_or_else(|e| {
        panic!(
            "the command prints the pid it left behind, got {:?}: {e}",
            r.message
        )
    });
    eprintln!(
        "left {left}: {:?}, daemon {}",
        state_and_parent(left),
        daemon.pid()
    );
    // Its shell has ended: the process left behind now belongs to sheetq.
    if let Some((state, parent)) = state_and_parent(left) {
        assert_eq!(
            parent,
            daemon.pid(),
            "the process a command left behind is reparented to sheetq (state {state})"
        );
    }
    let gone = wait_for(
        "the process left behind to end and be reaped",
        WAIT,
        || match state_and_parent(left) {
            None => Some(None),
            Some(('Z', parent)) if parent != daemon.pid() => Some(Some(parent)),
            Some(_) => None,
        },
        || {
            format!(
                "{:?}\n{}",
                state_and_parent(left),
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        },
    )
    .await;
    assert_eq!(gone, None, "a zombie left with another parent");
    drop(daemon);
}

/// SIGHUP (`systemctl reload sheetq`) reads the config again: a command added since runs,
/// the job running through the reload finishes as it started, and a config with a problem
/// is refused with its reason while the one in force stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_config_without_dropping_a_running_job_and_refuses_a_bad_one() {
    use nix::sys::signal::{kill, Signal};
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let settings = "heartbeat_interval = \"1s\"\ndead_after = \"1m\"\n";
    let sleep = "[commands.sleep]\nbuiltin = \"sleep\"\n";
    let config = binary_config_with(&emu, dir.path(), "vm-reload", settings, sleep);
    let log = dir.path().join("sheetq.log");
    let show = || std::fs::read_to_string(&log).unwrap_or_default();
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let mut daemon = Binary::start(&config, &log);
    let hangup = |daemon: &Binary| {
        kill(
            nix::unistd::Pid::from_raw(daemon.pid() as i32),
            Signal::SIGHUP,
        )
        .unwrap_or_else(|e| panic!("SIGHUP: {e}"))
    };
    let long = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":3}"#,
        "",
    )
    .await;
    wait_for(
        "the long job to run",
        WAIT,
        || {
            row_of(&queue_rows(&emu), &long)
                .state
                .is(State::Running)
                .then_some(())
        },
        show,
    )
    .await;
    // A command added to the file, taken up on SIGHUP while the long job runs.
    let with_hello = format!("{sleep}[commands.hello]\nbuiltin = \"echo\"\n");
    binary_config_with(&emu, dir.path(), "vm-reload", settings, &with_hello);
    hangup(&daemon);
    wait_for(
        "the daemon to reload its config",
        WAIT,
        || show().contains("reloaded the config").then_some(()),
        show,
    )
    .await;
    let hello = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーB",
        "動作確認 (2秒)",
        "hello",
        "{}",
        "",
    )
    .await;
    let rows = wait_finished(&emu, &[long.clone(), hello.clone()], WAIT).await;
    for id in [&long, &hello] {
        assert_done(row_of(&rows, id));
    }
    // A config with a syntax error: refused, named, and the one in force stays.
    std::fs::write(&config, "spreadsheet_id = \n").unwrap_or_else(|e| panic!("{e}"));
    hangup(&daemon);
    wait_for(
        "the daemon to refuse the broken config",
        WAIT,
        || show().contains("was not reloaded").then_some(()),
        show,
    )
    .await;
    assert!(
        show().contains("line 1"),
        "the refusal names where the problem is:\n{}",
        show()
    );
    let again = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーC",
        "動作確認 (2秒)",
        "hello",
        "{}",
        "",
    )
    .await;
    let rows = wait_finished(&emu, std::slice::from_ref(&again), WAIT).await;
    assert_done(row_of(&rows, &again));
    assert_eq!(
        daemon.exited(),
        None,
        "a bad config on reload must not stop the daemon\n{}",
        show()
    );
}

/// The seeds' acceptance test 4, through the real binary: a 実行中 row whose 開始日時 a
/// person moved 20 minutes into the past, claimed by a worker that is no sheetq daemon (an
/// Apps Script minute trigger's), times out once `dead_after` was watched with no
/// heartbeat of it, judged on Google's clock; its target runs the next job. A row only 14
/// minutes old stays 実行中.
#[tokio::test]
async fn a_row_an_apps_script_worker_started_twenty_minutes_ago_times_out_and_its_target_runs_again(
) {
    let emu = start_with_quota(FAST).await;
    let serial = |minutes_ago: i64| {
        sheetq::sheet_time::instant_to_serial(
            Utc::now() - chrono::Duration::minutes(minutes_ago),
            TZ,
        )
    };
    let row = |job: &str, target: &str, state: &str, started: Option<f64>, worker: &str| {
        json!([
            job,
            serial(25),
            "",
            target,
            "",
            target,
            "動作確認",
            "sleep",
            r#"{"seconds":0.2}"#,
            "",
            state,
            started.map_or(json!(""), |s| json!(s)),
            "",
            "",
            "",
            worker
        ])
    };
    emu.set_values(
        "'_ジョブキュー'!A2:P4",
        json!([
            row(
                "gas-old",
                "サーバーA",
                "実行中",
                Some(serial(20)),
                "AppsScript"
            ),
            row(
                "gas-recent",
                "サーバーB",
                "実行中",
                Some(serial(14)),
                "AppsScript"
            ),
            row("next-a", "サーバーA", "待機", None, ""),
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-4",
        "heartbeat_interval = \"1s\"\ndead_after = \"3s\"\n",
        "[commands.sleep]\nbuiltin = \"sleep\"\n",
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let rows = wait_finished_or(
        &emu,
        &["gas-old".to_string(), "next-a".to_string()],
        WAIT,
        || std::fs::read_to_string(&log).unwrap_or_default(),
    )
    .await;
    let old = row_of(&rows, "gas-old");
    assert!(
        old.state.is(State::Timeout) && old.message.contains("開始日時"),
        "the row started 20 minutes before Google's clock times out, saying why: {old:#?}"
    );
    assert_done(row_of(&rows, "next-a"));
    let recent = row_of(&rows, "gas-recent");
    assert!(
        recent.state.is(State::Running),
        "a row started 14 minutes ago (stale_after is 15) keeps running: {recent:#?}"
    );
}

/// キャンセル is a final state word: a row a person set to it is never claimed, stays as it
/// is, and the next job of its target runs.
#[tokio::test]
async fn a_row_set_to_cancelled_is_final_and_never_runs() {
    let emu = start_with_quota(FAST).await;
    let row = |job: &str, state: &str| {
        json!([
            job,
            sheetq::sheet_time::instant_to_serial(Utc::now(), TZ),
            "",
            "サーバーA",
            "",
            "サーバーA",
            "動作確認",
            "sleep",
            r#"{"seconds":0.1}"#,
            "",
            state,
            "",
            "",
            "",
            "",
            ""
        ])
    };
    emu.set_values(
        "'_ジョブキュー'!A2:P3",
        json!([row("stopped", "キャンセル"), row("next", "待機")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let fleet = Fleet::start(&emu, &["vm-1"], &[], "").await;
    let rows = wait_finished(&emu, &["next".to_string()], WAIT).await;
    assert_done(row_of(&rows, "next"));
    let stopped = row_of(&rows, "stopped");
    assert!(
        stopped.state.is(State::Cancelled)
            && stopped.started_at.is_none()
            && stopped.worker.is_empty(),
        "the キャンセル row was never claimed: {stopped:#?}"
    );
    fleet.stop(&emu).await;
}
