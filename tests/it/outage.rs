//! Guarantees through outages, partitions and clocks (docs/design.md §3.1): a daemon cut off
//! from the API for longer than `dead_after` is dead only to the others' eyes. Its job may
//! still run, so the daemon that times it out holds its target until the job could have
//! ended; the job's real result, written when the daemon is back, replaces the タイムアウト.
//! Every check reads what ran from the command's own execution log, not only the sheet.

use std::collections::BTreeMap;
use std::time::Duration;

use sheetq::emulator::{Emulator, Fault, FaultRule, Quota};
use sheetq::queue::State;

use crate::daemon::assert_done;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);
const FAST: Quota = Quota::scaled(50);
/// One slot, and liveness in seconds: a heartbeat every 500 ms, dead after 3 s, the lease
/// taken over after standing still 3 s.
const QUICK_ONE_SLOT: [(&str, &str); 4] = [
    ("slots", "1"),
    ("heartbeat_interval", "\"500ms\""),
    ("dead_after", "\"3s\""),
    ("lease_ttl", "\"3s\""),
];

/// A command that logs its start (jobId, target, nanoseconds since the epoch, and the
/// worker id a [`Fleet`] puts for `{worker}`) and its end to `file`, sleeps `args.seconds`,
/// and answers its jobId as its result message.
fn recording_command(file: &std::path::Path) -> String {
    format!(
        "[commands.record]\ntimeout = \"12s\"\nexec = [\"/bin/sh\", \"-c\", \"echo \\\"S $SHEETQ_JOB_ID $SHEETQ_TARGET $(date +%s%N) {{worker}}\\\" >> {f}; sleep $(echo \\\"$SHEETQ_ARGS_JSON\\\" | sed 's/[^0-9.]//g'); echo \\\"E $SHEETQ_JOB_ID $SHEETQ_TARGET $(date +%s%N)\\\" >> {f}; echo \\\"$SHEETQ_JOB_ID\\\"\"]\n",
        f = file.display()
    )
}

/// One run of a command: when it started and (once it did) ended, in nanoseconds.
type Run = (u128, Option<u128>);

/// What most tests here start from: the daemons' logs on, the emulator with Google's quota
/// (time-compressed), a temporary directory and the execution log's path in it.
async fn lab() -> (Emulator, tempfile::TempDir, std::path::PathBuf) {
    logs();
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    (emu, dir, log)
}

/// Queues a job of the command of [`recording_command`] that sleeps `seconds`.
async fn record_job(
    sheets: &dyn sheetq::sheets::Sheets,
    config: &sheetq::config::Config,
    target: &str,
    function: &str,
    seconds: u32,
) -> String {
    let args = format!(r#"{{"seconds":{seconds}}}"#);
    enqueue(sheets, config, target, function, "record", &args, "").await
}

/// Waits until `worker` runs `job`.
async fn wait_running_on(emu: &Emulator, job: &str, worker: &str) {
    let prefix = format!("{worker}/");
    wait_for(
        &format!("{worker} to run job {job}"),
        WAIT,
        || {
            let rows = queue_rows(emu);
            let r = row_of(&rows, job);
            (r.state.is(State::Running) && r.worker.starts_with(&prefix)).then_some(())
        },
        || describe_queue(&queue_rows(emu)),
    )
    .await;
}

/// What ran, from the execution log: per jobId, its target and each run.
fn runs(file: &std::path::Path) -> BTreeMap<String, (String, Vec<Run>)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out: BTreeMap<String, (String, Vec<Run>)> = BTreeMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [kind, job, target, at, ..] = parts[..] else {
            continue;
        };
        let at: u128 = at.parse().unwrap_or(0);
        let entry = out
            .entry(job.to_string())
            .or_insert_with(|| (target.to_string(), Vec::new()));
        match kind {
            "S" => entry.1.push((at, None)),
            _ => {
                if let Some(run) = entry.1.iter_mut().rev().find(|r| r.1.is_none()) {
                    run.1 = Some(at);
                }
            }
        }
    }
    out
}

/// The daemons' logs, with `SHEETQ_TEST_LOG=sheetq=info cargo test --test it outage --
/// --nocapture`.
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("SHEETQ_TEST_LOG").unwrap_or_else(|_| "off".into()))
        .with_test_writer()
        .try_init();
}

/// Every job ran exactly once, and no two runs of one target overlapped.
fn assert_once_each_and_one_at_a_time(file: &std::path::Path, jobs: &[&str]) {
    let log = runs(file);
    let text = std::fs::read_to_string(file).unwrap_or_default();
    for job in jobs {
        let (_, r) = log
            .get(*job)
            .unwrap_or_else(|| panic!("job {job} never ran; log:\n{text}"));
        assert_eq!(r.len(), 1, "job {job} ran {} times; log:\n{text}", r.len());
    }
    let mut by_target: BTreeMap<&str, Vec<(u128, u128)>> = BTreeMap::new();
    for (target, r) in log.values() {
        for (s, e) in r {
            by_target
                .entry(target)
                .or_default()
                .push((*s, e.unwrap_or(u128::MAX)));
        }
    }
    for (target, mut spans) in by_target {
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "two jobs of {target} ran at once ({:?} and {:?}); log:\n{text}",
                w[0],
                w[1]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_cut_off_longer_than_dead_after_keeps_its_target_and_its_result() {
    let (emu, _dir, log) = lab().await;
    let settings = QUICK_ONE_SLOT;
    let commands = recording_command(&log);
    // a1 alone first, so it is the one that claims the long job.
    let first = Fleet::start_on_own_accounts(&emu, &["a1"], &settings, &commands).await;
    let c = first.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let long = record_job(sheets.as_ref(), &c, "サーバーA", "動作確認 (2秒)", 6).await;
    wait_running_on(&emu, &long, "a1").await;
    // a1 is cut off from the API (every request 503): its job runs on.
    emu.add_fault(FaultRule::cut_off(
        &Emulator::account("a1"),
        Fault::Status(503),
    ));
    let second = Fleet::start_on_own_accounts(&emu, &["a2"], &settings, &commands).await;
    let next = record_job(sheets.as_ref(), &c, "サーバーA", "再起動 (5秒)", 0).await;
    // a2 sees a1's heartbeat stand still past dead_after and times the long job out...
    let timed_out = wait_for(
        "a2 to time out the job of the silent a1",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let r = row_of(&rows, &long).clone();
            (r.state.is(State::Timeout) && !r.message.is_empty()).then_some(r)
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    assert!(
        timed_out.message.contains("a1"),
        "the timeout names the silent daemon: {:?}",
        timed_out.message
    );
    // ...but holds its target: the next job of サーバーA must wait for the long one.
    let early = queue_rows(&emu);
    assert!(
        row_of(&early, &next).state.is(State::Waiting),
        "the target's next job must not start while the timed-out one may still run:\n{}",
        describe_queue(&early)
    );
    // a1's job ends while it is cut off; then a1 comes back.
    wait_for(
        "the long job to end on a1",
        WAIT,
        || {
            runs(&log)
                .get(&long)
                .is_some_and(|(_, r)| r.iter().all(|run| run.1.is_some()))
                .then_some(())
        },
        || std::fs::read_to_string(&log).unwrap_or_default(),
    )
    .await;
    emu.clear_faults();
    let rows = wait_for(
        "the real result to replace the タイムアウト, and the next job to run",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            (row_of(&rows, &long).state.is(State::Done)
                && row_of(&rows, &next).state.is(State::Done))
            .then_some(rows)
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    first.stop(&emu).await;
    second.stop(&emu).await;
    let l = row_of(&rows, &long);
    assert_done(l);
    assert_eq!(l.message, long, "the long job's own result: {l:#?}");
    assert!(
        l.worker.starts_with("a1/"),
        "the row names who ran it: {l:#?}"
    );
    assert_done(row_of(&rows, &next));
    assert_once_each_and_one_at_a_time(&log, &[&long, &next]);
    let panel = panel_row(&emu, "サーバーA", 8);
    assert!(
        panel[2].starts_with("✅ 完了"),
        "the long job's panel row shows its real result: {panel:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_in_the_sheet_even_across_the_night_daylight_saving_falls_back_decide_nothing() {
    logs();
    let emu = start_with_quota(FAST).await;
    // A spreadsheet in New York: on 2026-11-01 its clocks show 01:00–01:59 twice, so a date
    // serial of 01:05 that night names two instants an hour apart.
    emu.with_spreadsheet(|ss| ss.time_zone = "America/New_York".into())
        .unwrap_or_else(|e| panic!("{e:?}"));
    let ambiguous: f64 = 46327.0 + (1.0 * 60.0 + 5.0) / 1440.0; // 2026-11-01 01:05
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    let settings = [
        ("heartbeat_interval", "\"500ms\""),
        ("dead_after", "\"3s\""),
        ("stale_after", "\"20s\""),
    ];
    let fleet = Fleet::start(&emu, &["d1", "d2"], &settings, &recording_command(&log)).await;
    let c = fleet.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let long = record_job(sheets.as_ref(), &c, "サーバーA", "動作確認 (2秒)", 6).await;
    let next = record_job(sheets.as_ref(), &c, "サーバーA", "再起動 (5秒)", 0).await;
    // While the long job runs, its 開始日時 reads as that ambiguous 01:05 (an hour, then a
    // month, before the real time), as a wall clock misread across the fall-back night
    // would show it; so do both heartbeats' "last seen" once (the daemons write theirs in
    // UTC, which no decision reads either).
    for row in 3..5 {
        let _ = emu.set_values(
            &format!("'_ワーカー'!F{row}"),
            serde_json::json!([[ambiguous]]),
            false,
        );
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    while tokio::time::Instant::now() < deadline {
        let rows = queue_rows(&emu);
        if let Some(r) = rows
            .iter()
            .find(|r| r.job_id == long && r.state.is(State::Running))
        {
            emu.set_values(
                &format!("'_ジョブキュー'!L{}", r.row),
                serde_json::json!([[ambiguous]]),
                false,
            )
            .unwrap_or_else(|e| panic!("{e:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows = wait_finished(&emu, &[long.clone(), next.clone()], WAIT).await;
    fleet.stop(&emu).await;
    assert_done(row_of(&rows, &long));
    assert_done(row_of(&rows, &next));
    assert_once_each_and_one_at_a_time(&log, &[&long, &next]);
}

/// The exit code of `sheetq health --listen LISTEN --path PATH`.
fn sheetq_health(listen: &str, path: &str) -> Option<i32> {
    std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"))
        .args(["health", "--listen", listen, "--path", path])
        .env_remove("SHEETQ_METRICS_LISTEN")
        .output()
        .unwrap_or_else(|e| panic!("cannot run sheetq health: {e}"))
        .status
        .code()
}

/// The status code of `GET path` on 127.0.0.1:`port` (0 when nothing answers).
async fn status_of(port: u16, path: &str) -> u16 {
    http_get(port, path).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_google_outage_longer_than_dead_after_restarts_nothing_and_the_running_job_lands() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    let config = crate::daemon::binary_config_with(
        &emu,
        dir.path(),
        "vm-out",
        "heartbeat_interval = \"500ms\"\ndead_after = \"3s\"\nlease_ttl = \"3s\"\n",
        &recording_command(&log).replace("{worker}", "vm-out"),
    );
    let out = dir.path().join("sheetq.log");
    let (mut daemon, port) = crate::daemon::Binary::start_listening(&config, &out);
    let listen = format!("127.0.0.1:{port}");
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&out).unwrap_or_default()
        )
    };
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let job = record_job(sheets.as_ref(), &enqueuer, "サーバーB", "動作確認 (2秒)", 4).await;
    wait_for(
        "the job to run",
        WAIT,
        || {
            row_of(&queue_rows(&emu), &job)
                .state
                .is(State::Running)
                .then_some(())
        },
        show,
    )
    .await;
    // Google is down for everyone for 8 s: longer than dead_after, the lease's TTL and the
    // job itself, which ends during the outage.
    emu.add_fault(FaultRule::always(Fault::Status(503)));
    let outage_ends = tokio::time::Instant::now() + Duration::from_secs(8);
    while tokio::time::Instant::now() < outage_ends {
        assert_eq!(
            status_of(port, "/livez").await,
            200,
            "an outage of the API is no reason to restart the daemon\n{}",
            show()
        );
        assert_eq!(
            daemon.exited(),
            None,
            "the daemon must ride the outage out\n{}",
            show()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // What a container's HEALTHCHECK runs says the same: live, not ready.
    assert_eq!(sheetq_health(&listen, "/livez"), Some(0), "{}", show());
    emu.clear_faults();
    let rows = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    assert_eq!(daemon.exited(), None, "{}", show());
    assert_eq!(
        status_of(port, "/readyz").await,
        200,
        "ready again: {}",
        show()
    );
    assert_eq!(sheetq_health(&listen, "/readyz"), Some(0), "{}", show());
    assert_eq!(
        sheetq_health(&format!("127.0.0.1:{}", free_port()), "/livez"),
        Some(1),
        "nothing listening is unhealthy"
    );
    drop(daemon);
    let r = row_of(&rows, &job);
    assert_done(r);
    assert_eq!(
        r.message, job,
        "the job's own result landed after the outage: {r:#?}"
    );
    assert_once_each_and_one_at_a_time(&log, &[&job]);
}

/// A local spreadsheet that restarts forgets the tokens it gave out; a daemon that meets
/// that (its next call dropped while the server was down, then its token refused) takes a
/// fresh token and goes on. So does it while the server refuses even fresh tokens for a
/// while, the key still signing: an outage, never an exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spreadsheet_that_forgets_its_tokens_is_an_outage_and_the_daemon_goes_on() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    let config = crate::daemon::binary_config_with(
        &emu,
        dir.path(),
        "vm-auth",
        "heartbeat_interval = \"500ms\"\n",
        &recording_command(&log).replace("{worker}", "vm-auth"),
    );
    let out = dir.path().join("sheetq.log");
    let (mut daemon, _port) = crate::daemon::Binary::start_listening(&config, &out);
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&out).unwrap_or_default()
        )
    };
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let first = record_job(sheets.as_ref(), &enqueuer, "サーバーB", "動作確認 (2秒)", 1).await;
    wait_finished(&emu, std::slice::from_ref(&first), WAIT).await;

    // The restart: the server is gone for the daemon's next two requests, and comes back
    // without the tokens it issued before.
    emu.add_fault(FaultRule::next(None, Fault::Drop, 2));
    emu.revoke_tokens();
    let refused_before = emu.requests().iter().filter(|r| r.status == 401).count();
    wait_for(
        "the daemon to meet the restart",
        WAIT,
        || {
            (emu.requests().iter().filter(|r| r.status == 401).count() > refused_before)
                .then_some(())
        },
        show,
    )
    .await;
    // Then the server refuses every token for 4 s, fresh ones included (its token endpoint
    // still issues them: the key signs).
    emu.add_fault(FaultRule::always(Fault::Status(401)));
    let refusing_until = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < refusing_until {
        assert_eq!(
            daemon.exited(),
            None,
            "refused tokens while the key signs are an outage, not a reason to exit\n{}",
            show()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    emu.clear_faults();
    let second = record_job(sheets.as_ref(), &enqueuer, "サーバーB", "動作確認 (2秒)", 1).await;
    let rows = wait_finished(&emu, std::slice::from_ref(&second), WAIT).await;
    assert_eq!(daemon.exited(), None, "{}", show());
    assert_done(row_of(&rows, &second));
    assert_once_each_and_one_at_a_time(&log, &[&first, &second]);
}

/// The outage above for a daemon serving two spreadsheets (`[[spreadsheets]]`): each
/// spreadsheet's loop is judged alive on its own, through its own client's attempts, and
/// neither is taken for stuck; the job running on each lands once Google is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_restarts_no_daemon_of_two_spreadsheets_and_both_running_jobs_land() {
    let emu = start_with_quota(FAST).await;
    let west_id = emu.add_spreadsheet(sheetq::emulator::Seed::Demo);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    let config = crate::daemon::binary_config_with(
        &emu,
        dir.path(),
        "vm-two",
        "heartbeat_interval = \"500ms\"\ndead_after = \"3s\"\nlease_ttl = \"3s\"\n",
        &recording_command(&log).replace("{worker}", "vm-two"),
    );
    // The same settings, serving both spreadsheets.
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let listed = format!(
        "{}[[spreadsheets]]\nlabel = \"east\"\nspreadsheet_id = {:?}\n[[spreadsheets]]\nlabel = \"west\"\nspreadsheet_id = {west_id:?}\n",
        text.replace(&format!("spreadsheet_id = \"{}\"\n", emu.spreadsheet_id()), ""),
        emu.spreadsheet_id(),
    );
    std::fs::write(&config, listed).unwrap_or_else(|e| panic!("{e}"));
    let out = dir.path().join("sheetq.log");
    let (mut daemon, port) = crate::daemon::Binary::start_listening(&config, &out);
    let show = || {
        format!(
            "east:\n{}\nwest:\n{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            describe_queue(&queue_rows_in(&emu, &west_id)),
            std::fs::read_to_string(&out).unwrap_or_default()
        )
    };
    let east = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let west = sheetq::config::Config {
        spreadsheet_id: west_id.clone(),
        ..east.clone()
    };
    let (east_sheets, west_sheets) = (client(&emu, &east).await, client(&emu, &west).await);
    let east_job = record_job(
        east_sheets.as_ref(),
        &east,
        "サーバーB",
        "動作確認 (2秒)",
        4,
    )
    .await;
    let west_job = record_job(west_sheets.as_ref(), &west, "サーバーC", "再起動 (5秒)", 4).await;
    let running = |rows: Vec<sheetq::queue::QueueRow>, job: &str| {
        rows.iter()
            .any(|r| r.job_id == job && r.state.is(State::Running))
    };
    wait_for(
        "both jobs to run",
        WAIT,
        || {
            (running(queue_rows(&emu), &east_job)
                && running(queue_rows_in(&emu, &west_id), &west_job))
            .then_some(())
        },
        show,
    )
    .await;
    emu.add_fault(FaultRule::always(Fault::Status(503)));
    let outage_ends = tokio::time::Instant::now() + Duration::from_secs(8);
    while tokio::time::Instant::now() < outage_ends {
        let (code, body) = http_get(port, "/livez").await;
        assert_eq!(
            code,
            200,
            "no loop is stuck in an outage: {body}\n{}",
            show()
        );
        assert_eq!(daemon.exited(), None, "the daemon rides it out\n{}", show());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    emu.clear_faults();
    let finished = |rows: Vec<sheetq::queue::QueueRow>, job: &str| {
        rows.into_iter().find(|r| r.job_id == job && is_finished(r))
    };
    let (east_row, west_row) = wait_for(
        "both jobs' results to land",
        WAIT,
        || {
            let e = finished(queue_rows(&emu), &east_job)?;
            let w = finished(queue_rows_in(&emu, &west_id), &west_job)?;
            Some((e, w))
        },
        show,
    )
    .await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while http_get(port, "/readyz").await.0 != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon is ready again once both spreadsheets' polls work: {}",
            show()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(daemon.exited(), None, "{}", show());
    drop(daemon);
    for (row, job) in [(&east_row, &east_job), (&west_row, &west_job)] {
        assert_done(row);
        assert_eq!(&row.message, job, "its own result landed: {row:#?}");
    }
    assert_once_each_and_one_at_a_time(&log, &[&east_job, &west_job]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_commit_applied_after_its_reply_was_lost_cannot_take_effect() {
    let (emu, _dir, log) = lab().await;
    let settings = [
        ("heartbeat_interval", "\"500ms\""),
        ("dead_after", "\"3s\""),
        ("lease_ttl", "\"3s\""),
    ];
    let commands = recording_command(&log);
    // d1's first claim commit loses its reply at once, and Google applies it 4 s later.
    emu.add_fault(FaultRule {
        method: Some("spreadsheets.batchUpdate".into()),
        fault: Fault::ApplyLater(Duration::from_secs(4)),
        remaining: Some(1),
        probability: None,
        user: Some(Emulator::account("d1")),
        body_contains: Some("\"replacement\":\"実行中\"".into()),
    });
    let first = Fleet::start_on_own_accounts(&emu, &["d1"], &settings, &commands).await;
    let c = first.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let job = record_job(sheets.as_ref(), &c, "サーバーA", "動作確認 (2秒)", 1).await;
    wait_for(
        "d1's claim commit to be held back",
        WAIT,
        || emu.faults().is_empty().then_some(()),
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    let second = Fleet::start_on_own_accounts(&emu, &["d2"], &settings, &commands).await;
    let next = record_job(sheets.as_ref(), &c, "サーバーA", "再起動 (5秒)", 0).await;
    let finished = wait_finished(&emu, &[job.clone(), next.clone()], WAIT).await;
    // Past the moment the held-back commit is applied (or refused).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rows = queue_rows(&emu);
    for id in [&job, &next] {
        let (then, now) = (row_of(&finished, id), row_of(&rows, id));
        assert_eq!(
            (&now.worker, now.started_at),
            (&then.worker, then.started_at),
            "a commit applied late rewrote the claim stamp of a finished row"
        );
    }
    first.stop(&emu).await;
    second.stop(&emu).await;
    for id in [&job, &next] {
        let r = row_of(&rows, id);
        assert_done(r);
        assert_eq!(&r.message, id, "{r:#?}");
        let (Some(started), Some(finished)) = (r.started_at, r.finished_at) else {
            panic!("no 開始日時/終了日時: {r:#?}");
        };
        assert!(
            started <= finished,
            "a late commit rewrote the claim stamp of a finished row (開始 {started} after 終了 {finished}): {r:#?}"
        );
    }
    assert_once_each_and_one_at_a_time(&log, &[&job, &next]);
}

/// One queue row's cells, A to P, as the emulator holds them (blank cells as "").
fn row_cells(emu: &Emulator, row: u32) -> serde_json::Value {
    let mut cells = emu
        .values(&format!("'_ジョブキュー'!A{row}:P{row}"))
        .unwrap_or_else(|e| panic!("read row {row}: {e:?}"))
        .into_iter()
        .next()
        .unwrap_or_default();
    cells.resize(16, serde_json::json!(""));
    serde_json::json!([cells])
}

/// A put-back goes out under the lease, planned on a read taken under it; here a person
/// swaps two rows' values while it travels, so it lands on a finished job's row (待機 there
/// now, claimable) and is repaired under the same lease. The repair's reply is lost and
/// Google applies it 3 s later: until the daemon sees it on its row, it keeps the lease
/// (renewed, so the others, who take over only a lease they watched stand still, wait), and
/// no daemon claims anything, the finished job least of all. Then every job runs once, and
/// the finished one never again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_whose_reply_was_lost_keeps_the_lease_until_it_shows_on_its_row() {
    let (emu, dir, log) = lab().await;
    let settings = QUICK_ONE_SLOT;
    let commands = recording_command(&log);
    let setup = daemon_config(&emu, "setup", dir.path(), &settings, &commands);
    let sheets = client(&emu, &setup).await;
    // x runs a long job: its one slot stays busy, so whatever else waits is y's to run.
    let x = Fleet::start_on_own_accounts(&emu, &["x"], &settings, &commands).await;
    let long = record_job(sheets.as_ref(), &setup, "サーバーA", "動作確認 (2秒)", 10).await;
    wait_running_on(&emu, &long, "x").await;
    // While x is cut off: a row comes to show a claim of x's that runs nothing (as a
    // restore from an older read can leave one), and below it stands a finished job.
    let cut = FaultRule::cut_off(&Emulator::account("x"), Fault::Status(503));
    emu.add_fault(cut.clone());
    let orphan = record_job(sheets.as_ref(), &setup, "サーバーB", "動作確認 (2秒)", 0).await;
    let finished = record_job(sheets.as_ref(), &setup, "サーバーD", "動作確認 (2秒)", 0).await;
    let rows = queue_rows(&emu);
    let (o, f) = (row_of(&rows, &orphan).row, row_of(&rows, &finished).row);
    let set = |range: String, cells: serde_json::Value| {
        emu.set_values(&range, cells, false)
            .unwrap_or_else(|e| panic!("set {range}: {e:?}"))
    };
    set(
        format!("'_ジョブキュー'!K{o}"),
        serde_json::json!([["実行中"]]),
    );
    set(
        format!("'_ジョブキュー'!P{o}"),
        serde_json::json!([["x/0 #0000abcd"]]),
    );
    set(
        format!("'_ジョブキュー'!K{f}:P{f}"),
        serde_json::json!([[
            "完了",
            46356.5,
            46356.6,
            "",
            "done long ago",
            "old-vm/0 #0ld0ld00"
        ]]),
    );
    // x's put-back travels 1.5 s; the repair's reply is lost and it is applied 3 s later.
    let travel = FaultRule {
        method: Some("spreadsheets.values.batchUpdateByDataFilter".into()),
        fault: Fault::Latency(Duration::from_millis(1500)),
        remaining: Some(1),
        probability: None,
        user: Some(Emulator::account("x")),
        body_contains: Some("待機".into()),
    };
    emu.add_fault(travel.clone());
    emu.add_fault(FaultRule {
        fault: Fault::ApplyLater(Duration::from_secs(3)),
        body_contains: Some("0ld0ld00".into()),
        ..travel.clone()
    });
    emu.remove_fault(&cut);
    let y = Fleet::start_on_own_accounts(&emu, &["y"], &settings, &commands).await;
    wait_for(
        "x to send the put-back",
        WAIT,
        || (!emu.faults().contains(&travel)).then_some(()),
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    // A person swaps the two rows' values (the row metadata stays where it was).
    let (orphan_cells, finished_cells) = (row_cells(&emu, o), row_cells(&emu, f));
    set(format!("'_ジョブキュー'!A{o}:P{o}"), finished_cells);
    set(format!("'_ジョブキュー'!A{f}:P{f}"), orphan_cells);
    wait_for(
        "the put-back to land on the finished job's row",
        WAIT,
        || {
            row_of(&queue_rows(&emu), &finished)
                .state
                .is(State::Waiting)
                .then_some(())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    // A job only y can run (x's slot is busy) arrives while the repair is in doubt.
    let waiting = record_job(sheets.as_ref(), &setup, "サーバーC", "動作確認 (2秒)", 0).await;
    let mut samples = 0;
    wait_for(
        "the repair to show on the finished job's row",
        WAIT,
        || {
            let lease = emu
                .values("'_ワーカー'!B1")
                .ok()
                .and_then(|v| v.first()?.first()?.as_str().map(str::to_string))
                .unwrap_or_default();
            let rows = queue_rows(&emu);
            let repaired = row_of(&rows, &finished).state.is(State::Done);
            if !repaired {
                samples += 1;
                assert!(
                    lease.starts_with("lease|x|"),
                    "while x's repair may still be applied, x keeps the lease; it shows {lease:?}"
                );
                for id in [&finished, &waiting] {
                    assert!(
                        row_of(&rows, id).state.is(State::Waiting),
                        "a job was claimed while x's repair was in doubt:\n{}",
                        describe_queue(&rows)
                    );
                }
            }
            repaired.then_some(())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    assert!(
        samples > 10,
        "the repair showed too soon to watch ({samples} looks)"
    );
    // Seen applied, the repair cannot apply again: the lease goes, long before Google's
    // 180 s limit, and what waits runs.
    let rows = wait_finished(&emu, &[long.clone(), orphan.clone(), waiting.clone()], WAIT).await;
    x.stop(&emu).await;
    y.stop(&emu).await;
    for id in [&long, &orphan, &waiting] {
        let r = row_of(&rows, id);
        assert_done(r);
        assert_eq!(&r.message, id, "{r:#?}");
    }
    let history = row_of(&rows, &finished);
    assert_eq!(
        (history.worker.as_str(), history.message.as_str()),
        ("old-vm/0 #0ld0ld00", "done long ago"),
        "the finished job's row is given its history back:\n{}",
        describe_queue(&rows)
    );
    assert!(
        !runs(&log).contains_key(&finished),
        "the finished job ran again:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_once_each_and_one_at_a_time(&log, &[&long, &orphan, &waiting]);
}

/// The ids of the fences on the spreadsheet (docs/design.md §3).
fn fence_ids(emu: &Emulator) -> Vec<i64> {
    emu.developer_metadata()
        .iter()
        .filter(|m| m["metadataKey"] == sheetq::lease::FENCE_KEY)
        .filter_map(|m| m["metadataId"].as_i64())
        .collect()
}

/// A daemon that stops (or crashes) within Google's 180 s request limit of its last commit
/// leaves that commit's fence behind: only it tracked it. The next daemon finds such fences
/// (one `developerMetadata.search` 90 s after start, then hourly) and removes them once no commit
/// they fence can apply, so they do not pile up against Google's 30,000 characters of
/// metadata per sheet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "waits out Google's 180 s request limit; .ci/run runs it"]
async fn fences_left_by_a_stopped_daemon_are_removed_by_the_next_one() {
    let (emu, _dir, log) = lab().await;
    let commands = recording_command(&log);
    let first = Fleet::start_on_own_accounts(&emu, &["d1"], &QUICK_ONE_SLOT, &commands).await;
    let c = first.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let job = record_job(sheets.as_ref(), &c, "サーバーA", "動作確認 (2秒)", 0).await;
    wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    first.stop(&emu).await;
    let left = fence_ids(&emu);
    assert!(
        !left.is_empty(),
        "d1's claim commit left its fence: {:#?}",
        emu.developer_metadata()
    );
    let second = Fleet::start_on_own_accounts(&emu, &["d2"], &QUICK_ONE_SLOT, &commands).await;
    // The first look comes 90 s after start, past a fleet's busy first minute.
    wait_for(
        "d2 to look for fences",
        Duration::from_secs(120),
        || (emu.count("spreadsheets.developerMetadata.search") >= 1).then_some(()),
        || format!("{:#?}", emu.requests()),
    )
    .await;
    // Past Google's request limit and the lease's TTL from when d2 found them (it cannot
    // know when d1 made them), d2's next lease takes them away.
    tokio::time::sleep(Duration::from_secs(200)).await;
    let next = record_job(sheets.as_ref(), &c, "サーバーB", "動作確認 (2秒)", 0).await;
    wait_finished(&emu, std::slice::from_ref(&next), WAIT).await;
    second.stop(&emu).await;
    let now = fence_ids(&emu);
    assert!(
        left.iter().all(|id| !now.contains(id)),
        "d1's fences {left:?} are still there: {now:?}"
    );
}

#[tokio::test]
async fn a_lost_append_reply_makes_no_second_row_and_new_rows_go_after_the_last_job() {
    let emu = start_with_quota(FAST).await;
    // Rows 2–4 and 6–7 hold finished jobs; row 5 is a blank row a person left.
    let mut rows: Vec<serde_json::Value> = (0..3)
        .map(|i| finished_row(&format!("old-{i}"), "完了", 1))
        .collect();
    rows.push(serde_json::json!([]));
    rows.extend((3..5).map(|i| finished_row(&format!("old-{i}"), "完了", 1)));
    seed_queue(&emu, rows);
    // The append is applied, but its reply is lost.
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.values.append"),
        Fault::DropAfterApply,
        1,
    ));
    // Its state directory is never used; a temporary one keeps the tree clean.
    let scratch = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let config = daemon_config(&emu, "enqueuer", scratch.path(), &[], "");
    let sheets = client(&emu, &config).await;
    let job = enqueue(
        sheets.as_ref(),
        &config,
        "サーバーA",
        "動作確認 (2秒)",
        "echo",
        "{}",
        "",
    )
    .await;
    let queue = queue_rows(&emu);
    let with_job: Vec<u32> = queue
        .iter()
        .filter(|r| r.job_id == job)
        .map(|r| r.row)
        .collect();
    assert_eq!(
        with_job,
        [8],
        "one row for the job, after the last row holding a job (not in the blank row 5):\n{}",
        describe_queue(&queue)
    );
    // The daemon's own intake appends after the last job too.
    let fleet = Fleet::start(&emu, &["vm-1"], &[("intake", "\"poll\"")], "").await;
    emu.set_values(
        "'サーバーB'!I8",
        serde_json::json!([[r#"{"seconds":0}"#]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    crate::daemon::tick(&emu, "サーバーB", 8);
    let rows = wait_queue_finished(&emu, 7, "the enqueued job and the press to finish", WAIT).await;
    fleet.stop(&emu).await;
    let pressed = rows
        .iter()
        .find(|r| r.target == "サーバーB")
        .unwrap_or_else(|| panic!("the press made no row:\n{}", describe_queue(&rows)));
    assert_eq!(
        pressed.row,
        9,
        "after the last job:\n{}",
        describe_queue(&rows)
    );
    assert!(
        !rows.iter().any(|r| r.row == 5),
        "the blank row stays blank:\n{}",
        describe_queue(&rows)
    );
}

/// Per jobId, the daemons that started it (from [`recording_command`]'s log, where the
/// fleet put each daemon's worker id).
fn runners(file: &std::path::Path) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        if let ["S", job, _, _, worker] = line.split_whitespace().collect::<Vec<_>>()[..] {
            out.entry(job.to_string())
                .or_default()
                .push(worker.to_string());
        }
    }
    out
}

/// Three daemons on their own accounts while the API fails at random (503s, dropped
/// connections, writes applied with their reply lost, batches applied 3 s late) and, one
/// after another, each daemon is cut off for longer than `dead_after`. Every job runs once,
/// no target runs two at a time, no daemon stops, and every finished row names the daemon
/// that ran its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_every_job_once_every_stamp_its_runner() {
    let (emu, _dir, log) = lab().await;
    let settings = [
        ("heartbeat_interval", "\"500ms\""),
        ("dead_after", "\"3s\""),
        ("lease_ttl", "\"3s\""),
        ("max_retries", "1"),
    ];
    let workers = ["c1", "c2", "c3"];
    let fleet =
        Fleet::start_on_own_accounts(&emu, &workers, &settings, &recording_command(&log)).await;
    let c = fleet.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let mut jobs = Vec::new();
    // Six jobs a target, about 10 s of work each: the work spans every cut below.
    for i in 0..36 {
        let seconds = [0.5, 1.5, 3.0][i % 3];
        jobs.push(
            enqueue(
                sheets.as_ref(),
                &c,
                &format!("T{}", i % 6),
                "f",
                "record",
                &format!(r#"{{"seconds":{seconds}}}"#),
                "",
            )
            .await,
        );
    }
    let random = |fault: Fault, method: Option<&str>, p: f64| FaultRule {
        method: method.map(str::to_string),
        fault,
        remaining: None,
        probability: Some(p),
        user: None,
        body_contains: None,
    };
    let faults = [
        random(Fault::Status(503), None, 0.03),
        random(Fault::Drop, None, 0.02),
        random(Fault::DropAfterApply, None, 0.02),
        random(
            Fault::ApplyLater(Duration::from_secs(3)),
            Some("spreadsheets.batchUpdate"),
            0.02,
        ),
    ];
    for f in &faults {
        emu.add_fault(f.clone());
    }
    // Each daemon in turn is cut off for 4 s (longer than dead_after).
    for w in workers {
        let cut = FaultRule::cut_off(&Emulator::account(w), Fault::Status(503));
        emu.add_fault(cut.clone());
        tokio::time::sleep(Duration::from_secs(4)).await;
        emu.remove_fault(&cut);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for f in &faults {
        emu.remove_fault(f);
    }
    let rows = wait_finished(&emu, &jobs, Duration::from_secs(120)).await;
    // Late batches land (or are refused) within 3 s.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let rows_later = queue_rows(&emu);
    fleet.stop(&emu).await;
    let refs: Vec<&str> = jobs.iter().map(String::as_str).collect();
    assert_once_each_and_one_at_a_time(&log, &refs);
    let ran_by = runners(&log);
    for id in &jobs {
        let r = row_of(&rows_later, id);
        assert_done(r);
        assert_eq!(&r.message, id, "{r:#?}");
        let runner = &ran_by[id][0];
        let tag = r
            .worker_tag()
            .unwrap_or_else(|| panic!("no ワーカー on the row of {id}: {r:#?}"));
        assert_eq!(
            &tag.daemon_id,
            runner,
            "the finished row of {id} names {} but {runner} ran it:\n{}",
            r.worker,
            describe_queue(&rows_later)
        );
        let then = row_of(&rows, id);
        assert_eq!(
            (&then.worker, then.started_at),
            (&r.worker, r.started_at),
            "the claim stamp of {id} changed after it finished"
        );
    }
}

/// A daemon binary, its metrics port and its log file.
type DefaultDaemon = (crate::daemon::Binary, u16, std::path::PathBuf);

/// A daemon as an operator deploys it: every setting at its default (poll every 2 s,
/// heartbeat every 30 s, dead_after 2 min, lease_ttl 30 s, the client's own retries and
/// timeouts), its own state_dir and metrics port.
fn default_daemon(
    emu: &Emulator,
    dir: &std::path::Path,
    worker: &str,
    log: &std::path::Path,
) -> DefaultDaemon {
    use std::os::unix::fs::PermissionsExt as _;
    let home = dir.join(worker);
    std::fs::create_dir_all(&home).unwrap_or_else(|e| panic!("{e}"));
    let key = home.join("key.json");
    std::fs::write(&key, emu.credentials_json()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    // The job runs through the outage: its timeout is above it.
    let command = recording_command(log)
        .replace("{worker}", worker)
        .replace("timeout = \"12s\"", "timeout = \"14m\"");
    let config = home.join("sheetq.toml");
    std::fs::write(
        &config,
        format!(
            "spreadsheet_id = \"{}\"\napi_base_url = \"{}\"\ncredentials = \"{}\"\nworker_id = \"{worker}\"\nstate_dir = \"{}\"\n{command}",
            emu.spreadsheet_id(),
            emu.base_url(),
            key.display(),
            home.join("state").display(),
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = home.join("sheetq.log");
    let (daemon, port) = crate::daemon::Binary::start_listening(&config, &out);
    (daemon, port, out)
}

/// Google unreachable for ten minutes, for both daemons of a spreadsheet, with every setting
/// at its default (docs/design.md §3.1): nothing restarts (`/livez` stays 200 throughout and
/// no process exits), no job is timed out, the job that ends during the outage and the one
/// that runs through it land when it is over, the job waiting behind the first runs after it,
/// and each ran once. Not time-compressed: it takes about twelve minutes, so `cargo test`
/// leaves it out and `.ci/run` runs it beside the other tests
/// (`cargo test --test it outage::ten -- --ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "takes twelve minutes; .ci/run runs it"]
async fn ten_minutes_without_google_at_the_default_settings_restart_nothing_and_every_job_lands() {
    const OUTAGE: Duration = Duration::from_secs(600);
    let emu = start_emulator().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    let mut daemons: Vec<DefaultDaemon> = ["vm-1", "vm-2"]
        .iter()
        .map(|w| default_daemon(&emu, dir.path(), w, &log))
        .collect();
    let show = |daemons: &[DefaultDaemon]| {
        let mut text = describe_queue(&queue_rows(&emu));
        for (_, _, out) in daemons {
            text.push_str(&format!(
                "\n{}:\n{}",
                out.display(),
                std::fs::read_to_string(out).unwrap_or_default()
            ));
        }
        text
    };
    // Jobs come from a person's account (as through the Apps Script intake), with a budget
    // of its own: the daemons' account keeps its whole quota.
    let enqueuer = daemon_config(
        &emu,
        "enqueuer",
        dir.path(),
        &[("requests_per_minute", "50")],
        "",
    );
    let sheets = client_as(&emu, &enqueuer, "person").await;
    let job = |target: &'static str, seconds: u32| {
        let sheets = sheets.clone();
        let enqueuer = enqueuer.clone();
        async move {
            enqueue(
                sheets.as_ref(),
                &enqueuer,
                target,
                "動作確認 (2秒)",
                "record",
                &format!("{{\"seconds\":{seconds}}}"),
                "",
            )
            .await
        }
    };
    // Ends during the outage; its result waits in its daemon's outbox.
    let ends_inside = job("サーバーA", 60).await;
    // Runs through the whole outage.
    let runs_through = job("サーバーB", 660).await;
    // Waits behind the first on the same target.
    let waits = job("サーバーA", 2).await;
    wait_for(
        "both long jobs to run",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            [&ends_inside, &runs_through]
                .iter()
                .all(|j| row_of(&rows, j).state.is(State::Running))
                .then_some(())
        },
        || show(&daemons),
    )
    .await;
    // Unreachable: half the calls get no reply at all, the others a 503.
    emu.add_fault(FaultRule {
        probability: Some(0.5),
        ..FaultRule::always(Fault::Drop)
    });
    emu.add_fault(FaultRule::always(Fault::Status(503)));
    let ends = tokio::time::Instant::now() + OUTAGE;
    let mut unready_seen = false;
    while tokio::time::Instant::now() < ends {
        for i in 0..daemons.len() {
            let port = daemons[i].1;
            let exited = daemons[i].0.exited();
            assert_eq!(
                exited,
                None,
                "no daemon may exit during the outage\n{}",
                show(&daemons)
            );
            assert_eq!(
                status_of(port, "/livez").await,
                200,
                "an outage of the API is no reason to restart a daemon\n{}",
                show(&daemons)
            );
            unready_seen |= status_of(port, "/readyz").await != 200;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert!(
        unready_seen,
        "readiness must follow the API: no daemon ever said it was not ready\n{}",
        show(&daemons)
    );
    emu.clear_faults();
    let rows = wait_finished(
        &emu,
        &[ends_inside.clone(), runs_through.clone(), waits.clone()],
        Duration::from_secs(240),
    )
    .await;
    let exits: Vec<_> = daemons.iter_mut().map(|(d, _, _)| d.exited()).collect();
    assert_eq!(
        exits,
        [None, None],
        "no daemon may exit\n{}",
        show(&daemons)
    );
    for j in [&ends_inside, &runs_through, &waits] {
        let r = row_of(&rows, j);
        assert_done(r);
        assert_eq!(
            &r.message, j,
            "the job's own result landed after the outage: {r:#?}"
        );
    }
    assert_once_each_and_one_at_a_time(&log, &[&ends_inside, &runs_through, &waits]);
    assert_no_quota_refusals(&emu);
}

/// Every process of this test (the emulator, both daemons, `sheetq enqueue`) lives in New
/// York at 01:58:30 EDT on 2026-11-01, ninety seconds before the clocks there fall back to
/// 01:00 EST: their wall clock is offset by libfaketime (their monotonic clock is not, as
/// no real clock jumps it). A job of 100 s runs across the fall-back (the ninety seconds
/// leave a loaded machine time to start both daemons and claim it first), so the 開始日時
/// the daemon writes reads as 01:5x EDT and its 終了日時 as 01:00 EST of the same night,
/// and the target's next job waits behind it. Each runs once, one after the other, and ends 完了 with its own
/// result: no daemon judges the other, or itself, by a time read back from the sheet.
/// Needs libfaketime, so `cargo test` leaves it out and `.ci/run` installs it and runs this
/// (`cargo test --test it outage::fall_back -- --ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime; .ci/run installs it and runs this"]
async fn fall_back_night_under_a_faked_clock_runs_each_job_once_and_one_at_a_time() {
    use chrono::TimeZone as _;
    let Some(lib) = faketime_library() else {
        panic!("libfaketime is not installed: apt-get install libfaketime (.ci/run does)");
    };
    let fall_back = chrono::Utc
        .with_ymd_and_hms(2026, 11, 1, 6, 0, 0)
        .single()
        .unwrap_or_else(|| panic!("a UTC instant"));
    let offset = (fall_back - chrono::TimeDelta::seconds(90) - chrono::Utc::now()).num_seconds();
    let faked = |cmd: &mut std::process::Command| {
        cmd.env("LD_PRELOAD", &lib)
            .env("FAKETIME", format!("{offset:+}"))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .env("TZ", "America/New_York");
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (_emulator, port) = start_faked_emulator(
        &lib,
        offset,
        "fall-back-night",
        "America/New_York",
        dir.path(),
    )
    .await;
    // The daemons' service account, and a person's (the jobs' intake) with its own quota.
    let daemons_key = emulator_key(port, "daemons", dir.path()).await;
    let person_key = emulator_key(port, "person", dir.path()).await;
    let log = dir.path().join("runs.log");
    let config_of = |worker: &str, key_path: &std::path::Path| {
        let path = dir.path().join(format!("{worker}.toml"));
        let command = recording_command(&log)
            .replace("{worker}", worker)
            .replace("timeout = \"12s\"", "timeout = \"150s\"");
        std::fs::write(
            &path,
            format!(
                "spreadsheet_id = \"fall-back-night\"\napi_base_url = \"http://127.0.0.1:{port}/\"\ncredentials = \"{}\"\nworker_id = \"{worker}\"\nstate_dir = \"{}\"\npoll_interval = \"1s\"\nheartbeat_interval = \"500ms\"\ndead_after = \"3s\"\nlease_ttl = \"3s\"\nstale_after = \"200s\"\n{command}",
                key_path.display(),
                dir.path().join(worker).display(),
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        path
    };
    let start = |worker: &str| {
        let config = config_of(worker, &daemons_key);
        let out = std::fs::File::create(dir.path().join(format!("{worker}.log")))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"));
        cmd.arg("run").arg("--config").arg(&config);
        faked(&mut cmd);
        Child(
            cmd.stdout(out.try_clone().unwrap_or_else(|e| panic!("{e}")))
                .stderr(out)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start sheetq: {e}")),
        )
    };
    let mut daemons = [start("ny-1"), start("ny-2")];
    let enqueue_wait = |seconds: u32| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"));
        cmd.args(["enqueue", "--config"])
            .arg(config_of("enqueuer", &person_key))
            .args([
                "--target",
                "サーバーA",
                "--function",
                "動作確認 (2秒)",
                "--command",
                "record",
                "--args",
                &format!("{{\"seconds\":{seconds}}}"),
                "--wait",
            ]);
        faked(&mut cmd);
        tokio::task::spawn_blocking(move || cmd.output())
    };
    let long = enqueue_wait(100);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let next = enqueue_wait(0);
    let show = || {
        ["emulator", "ny-1", "ny-2"]
            .iter()
            .map(|name| {
                format!(
                    "{name}:\n{}",
                    std::fs::read_to_string(dir.path().join(format!("{name}.log")))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (what, waited) in [("the long job", long), ("the next job", next)] {
        let out = tokio::time::timeout(Duration::from_secs(240), waited)
            .await
            .unwrap_or_else(|_| panic!("{what} did not finish in 240 s\n{}", show()))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("cannot run sheetq enqueue: {e}"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what} must end 完了: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            show()
        );
    }
    for d in &mut daemons {
        assert_eq!(
            d.0.try_wait().ok().flatten(),
            None,
            "a daemon exited\n{}",
            show()
        );
    }
    let ran = runs(&log);
    let jobs: Vec<&str> = ran.keys().map(String::as_str).collect();
    assert_eq!(jobs.len(), 2, "two jobs ran; log:\n{:?}", ran);
    assert_once_each_and_one_at_a_time(&log, &jobs);
    // The long job really ran across the fall-back, by the daemons' faked clock.
    let fake = |nanos: u128| {
        chrono::DateTime::from_timestamp_nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
            + chrono::TimeDelta::seconds(offset)
    };
    let across = ran.values().any(|(_, r)| {
        r.iter()
            .any(|(s, e)| fake(*s) < fall_back && e.is_some_and(|e| fake(e) > fall_back))
    });
    assert!(
        across,
        "no job ran across 06:00 UTC by the faked clock: {ran:?}\n{}",
        show()
    );
}
