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
    logs();
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
    let settings = [
        ("slots", "1"),
        ("heartbeat_interval", "\"500ms\""),
        ("dead_after", "\"3s\""),
        ("lease_ttl", "\"3s\""),
    ];
    let commands = recording_command(&log);
    // a1 alone first, so it is the one that claims the long job.
    let first = Fleet::start_on_own_accounts(&emu, &["a1"], &settings, &commands).await;
    let c = first.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let long = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "動作確認 (2秒)",
        "record",
        r#"{"seconds":6}"#,
        "",
    )
    .await;
    wait_for(
        "a1 to run the long job",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let r = row_of(&rows, &long);
            (r.state.is(State::Running) && r.worker.starts_with("a1/")).then_some(())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    // a1 is cut off from the API (every request 503): its job runs on.
    emu.add_fault(FaultRule::cut_off(
        &Emulator::account("a1"),
        Fault::Status(503),
    ));
    let second = Fleet::start_on_own_accounts(&emu, &["a2"], &settings, &commands).await;
    let next = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "再起動 (5秒)",
        "record",
        r#"{"seconds":0}"#,
        "",
    )
    .await;
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
    let long = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "動作確認 (2秒)",
        "record",
        r#"{"seconds":6}"#,
        "",
    )
    .await;
    let next = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "再起動 (5秒)",
        "record",
        r#"{"seconds":0}"#,
        "",
    )
    .await;
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

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// The status code of `GET path` on 127.0.0.1:`port` (0 when nothing answers).
async fn status_of(port: u16, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply).await;
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
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
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let out = dir.path().join("sheetq.log");
    let mut daemon =
        crate::daemon::Binary::start_with(&config, &out, &["--metrics-listen", &listen]);
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&out).unwrap_or_default()
        )
    };
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let job = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "サーバーB",
        "動作確認 (2秒)",
        "record",
        r#"{"seconds":4}"#,
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
        show,
    )
    .await;
    // Google is down for everyone for 8 s: longer than dead_after, the lease's TTL and the
    // job itself, which ends during the outage.
    emu.add_fault(FaultRule {
        method: None,
        fault: Fault::Status(503),
        remaining: None,
        probability: None,
        user: None,
        body_contains: None,
    });
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
    emu.clear_faults();
    let rows = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    assert_eq!(daemon.exited(), None, "{}", show());
    assert_eq!(
        status_of(port, "/readyz").await,
        200,
        "ready again: {}",
        show()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_commit_applied_after_its_reply_was_lost_cannot_take_effect() {
    logs();
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
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
    let job = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "動作確認 (2秒)",
        "record",
        r#"{"seconds":1}"#,
        "",
    )
    .await;
    wait_for(
        "d1's claim commit to be held back",
        WAIT,
        || emu.faults().is_empty().then_some(()),
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    let second = Fleet::start_on_own_accounts(&emu, &["d2"], &settings, &commands).await;
    let next = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "再起動 (5秒)",
        "record",
        r#"{"seconds":0}"#,
        "",
    )
    .await;
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
    let config = daemon_config(&emu, "enqueuer", std::path::Path::new("unused"), &[], "");
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
    logs();
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.log");
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
