//! Retries (docs/design.md §5.2) with the real binary against the emulator: a command that
//! fails twice runs three times under one claim, its target busy throughout, メッセージ and
//! the panel showing 「再試行 k/N」 while it waits, and ends 完了 with every attempt's
//! output in its log row.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::State;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);
const FUNCTION: &str = "動作確認 (2秒)";
/// Another function of the demo panels.
const OTHER_FUNCTION: &str = "再起動 (5秒)";

/// A waiting queue row A..Q for `command` on `target`'s panel row of [`FUNCTION`].
fn waiting(job: &str, target: &str, command: &str) -> serde_json::Value {
    waiting_row(job, target, FUNCTION, command, "")
}

/// The row of `target`'s panel that shows [`FUNCTION`].
fn function_row(emu: &Emulator, target: &str) -> u32 {
    (2..40)
        .find(|r| panel_row(emu, target, *r)[1] == FUNCTION)
        .unwrap_or_else(|| panic!("no row of panel {target} shows {FUNCTION}"))
}

fn show<'a>(emu: &'a Emulator, log: &'a Path) -> impl Fn() -> String + 'a {
    move || {
        format!(
            "{}\ndaemon log:\n{}",
            describe_queue(&queue_rows(emu)),
            std::fs::read_to_string(log).unwrap_or_default()
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_failing_twice_runs_three_times_under_one_claim_and_ends_done() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("{e}"));
    // The job after it is of another function of the panel: a newer press of the same
    // function would own the panel row (and show its own status there, not the retry's).
    emu.set_values(
        "'_ジョブキュー'!A2:Q3",
        json!([
            waiting("flaky", "サーバーA", "flaky"),
            waiting_row("after", "サーバーA", OTHER_FUNCTION, "after", ""),
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    // Each run appends a line to `runs` in the shared workdir: their order is the evidence
    // that nothing else ran on the target between the attempts.
    // Each attempt takes three seconds, so the note of a running retry is written (by a pass
    // of a loaded machine) and seen whatever the jittered waits.
    let flaky = "echo flaky >> runs; n=$(grep -c flaky runs); echo \"attempt $n\"; sleep 3; \
                 if [ \"$n\" -le 2 ]; then echo \"broken $n\" >&2; exit 1; fi; echo fixed";
    let commands = format!(
        "[commands.flaky]\nexec = [\"/bin/sh\", \"-c\", {}]\nworkdir = {}\nretries = 2\n\
         retry_delay = \"2s\"\nretry_max_delay = \"2s\"\n\
         [commands.after]\nexec = [\"/bin/sh\", \"-c\", \"echo after >> runs\"]\nworkdir = {}\n",
        toml::Value::String(flaky.into()),
        toml::Value::String(work.display().to_string()),
        toml::Value::String(work.display().to_string()),
    );
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", &commands);
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let panel = function_row(&emu, "サーバーA");

    // While it waits, the queue row and the panel say so.
    let (note, shown) = wait_for(
        "the queue row and the panel to show a retry note",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let row = rows.iter().find(|r| r.job_id == "flaky")?;
            let status = panel_row(&emu, "サーバーA", panel)[2].clone();
            (row.state.is(State::Running)
                && row.message.starts_with("再試行 ")
                && status.starts_with("🔁 再試行 "))
            .then(|| (row.message.clone(), status))
        },
        show(&emu, &log),
    )
    .await;
    assert!(
        note.contains("/2") && note.contains("exit code 1"),
        "「再試行 k/2: <the failure>」: {note:?}"
    );
    assert!(shown.contains("exit code 1"), "panel status {shown:?}");

    let rows = wait_ended_with_messages(&emu, &["flaky", "after"], WAIT, show(&emu, &log)).await;
    let flaky_row = row_of(&rows, "flaky");
    assert!(
        flaky_row.state.is(State::Done) && flaky_row.message == "fixed",
        "the last attempt's outcome: {flaky_row:?}"
    );
    let runs = std::fs::read_to_string(work.join("runs")).unwrap_or_default();
    assert_eq!(
        runs.lines().collect::<Vec<_>>(),
        ["flaky", "flaky", "flaky", "after"],
        "three attempts, and the target's next job only after the last:\n{}",
        show(&emu, &log)()
    );
    let output = emu
        .values("'_ジョブログ'!A2:F")
        .unwrap_or_default()
        .into_iter()
        .find(|r| r.first().and_then(|v| v.as_str()) == Some("flaky"))
        .and_then(|r| r.get(5).and_then(|v| v.as_str()).map(str::to_string))
        .unwrap_or_default();
    for n in 1..=3 {
        assert!(
            output.contains(&format!("attempt {n}")),
            "attempt {n} missing from the log row:\n{output}"
        );
    }
    assert!(
        output.contains("再試行 1/2"),
        "the log marks the retries:\n{output}"
    );
    let status = panel_row(&emu, "サーバーA", panel)[2].clone();
    assert!(
        status.starts_with("✅ 完了"),
        "panel after the end: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_dies_while_a_job_waits_for_its_retry_is_rescued_and_the_job_not_run_again() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let runs = work.path().join("runs");
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("flaky", "サーバーB", "flaky")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let commands = format!(
        "[commands.flaky]\nexec = [\"/bin/sh\", \"-c\", \"echo run >> {}; exit 1\"]\n\
         retries = 2\nretry_delay = \"1m\"\nretry_max_delay = \"1m\"\n",
        runs.display()
    );
    let settings = "heartbeat_interval = \"1s\"\ndead_after = \"3s\"\n";
    let dirs =
        [tempfile::tempdir(), tempfile::tempdir()].map(|d| d.unwrap_or_else(|e| panic!("{e}")));
    let config = |i: usize, worker: &str| {
        binary_config_with(&emu, dirs[i].path(), worker, settings, &commands)
    };
    let logs = [0, 1].map(|i| dirs[i].path().join("sheetq.log"));
    let show = || {
        format!(
            "{}\nruns: {:?}\nvm-1:\n{}\nvm-2:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&runs).unwrap_or_default(),
            std::fs::read_to_string(&logs[0]).unwrap_or_default(),
            std::fs::read_to_string(&logs[1]).unwrap_or_default()
        )
    };
    let first = Binary::start(&config(0, "vm-1"), &logs[0]);
    wait_row(
        &emu,
        "flaky",
        "the job to wait for a retry",
        WAIT,
        |r| r.message.ends_with("秒後)"),
        show,
    )
    .await;
    first.kill();
    let attempts = lines_in(&runs);
    let _second = Binary::start(&config(1, "vm-2"), &logs[1]);
    // The rescue swaps 状態 in its commit and writes メッセージ right after.
    let rows = wait_for(
        "the job rescued with the rescue's message",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            rows.iter()
                .any(|r| r.job_id == "flaky" && r.state.is_final() && r.message.contains("vm-1"))
                .then_some(rows)
        },
        show,
    )
    .await;
    let row = row_of(&rows, "flaky");
    assert!(
        row.state.is(State::Timeout) && row.message.contains("vm-1"),
        "rescued as a dead daemon's job: {row:?}\n{}",
        show()
    );
    assert_eq!(
        lines_in(&runs),
        attempts,
        "the rescuer ran no attempt of its own:\n{}",
        show()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_while_a_job_waits_for_its_retry_ends_it_cancelled_with_no_more_attempts() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let runs = dir.path().join("runs");
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("doomed", "サーバーC", "doomed")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let commands = format!(
        "[commands.doomed]\nexec = [\"/bin/sh\", \"-c\", \"echo run >> {}; exit 1\"]\n\
         retries = 3\nretry_delay = \"1m\"\nretry_max_delay = \"1m\"\n",
        runs.display()
    );
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", &commands);
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_row(
        &emu,
        "doomed",
        "the job to wait for a retry",
        WAIT,
        |r| r.message.ends_with("秒後)"),
        show(&emu, &log),
    )
    .await;
    let attempts = lines_in(&runs);
    let asked = run_sheetq(&config, &["cancel", "doomed", "--as", "ops"]).await;
    assert!(
        asked.status.success(),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    let rows = wait_for(
        "the job to end cancelled",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            rows.iter()
                .any(|r| r.job_id == "doomed" && r.state.is(State::Cancelled))
                .then_some(rows)
        },
        show(&emu, &log),
    )
    .await;
    let row = row_of(&rows, "doomed");
    assert!(
        row.message.starts_with("中止: ops"),
        "who stopped it: {row:?}"
    );
    assert_eq!(
        lines_in(&runs),
        attempts,
        "no attempt after the cancel:\n{}",
        show(&emu, &log)()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_stopped_while_a_job_waits_for_its_retry_ends_it_with_its_last_failure() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let runs = dir.path().join("runs");
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("patient", "サーバーC", "patient")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let commands = format!(
        "[commands.patient]\nexec = [\"/bin/sh\", \"-c\", \"echo run >> {}; echo 'disk full' >&2; exit 1\"]\n\
         retries = 2\nretry_delay = \"1m\"\nretry_max_delay = \"1m\"\n",
        runs.display()
    );
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", &commands);
    let log = dir.path().join("sheetq.log");
    let mut daemon = Binary::start(&config, &log);
    wait_row(
        &emu,
        "patient",
        "the job to wait for a retry",
        WAIT,
        |r| r.message.ends_with("秒後)"),
        show(&emu, &log),
    )
    .await;
    let attempts = lines_in(&runs);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    wait_for(
        "the daemon to stop",
        WAIT,
        || daemon.exited(),
        show(&emu, &log),
    )
    .await;
    let rows = queue_rows(&emu);
    let row = row_of(&rows, "patient");
    assert!(
        row.state.is(State::Error)
            && row.message.contains("disk full")
            && row.message.contains("停止のため再試行を打ち切りました"),
        "the last attempt's failure, saying no retry followed: {row:?}\n{}",
        show(&emu, &log)()
    );
    assert_eq!(lines_in(&runs), attempts, "no attempt after the stop");
}

/// The race of a stop against quick retries: with polls 5 s apart and a retry every second,
/// the daemon would see `sheetq cancel`'s request only at its next poll; each retry reads
/// the row first, so no attempt starts once `cancel` has returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_attempt_starts_after_sheetq_cancel_returns_even_between_two_polls() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let starts = dir.path().join("starts");
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("hasty", "サーバーC", "hasty")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let commands = format!(
        "[commands.hasty]\nexec = [\"/bin/sh\", \"-c\", \"date +%s%N >> {}; exit 1\"]\n\
         retries = 6\nretry_delay = \"1s\"\nretry_max_delay = \"1s\"\n",
        starts.display()
    );
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", &commands);
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        &config,
        text.replace("poll_interval = \"100ms\"", "poll_interval = \"5s\""),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_for(
        "the first attempt",
        WAIT,
        || (lines_in(&starts) >= 1).then_some(()),
        show(&emu, &log),
    )
    .await;
    let asked = run_sheetq(&config, &["cancel", "hasty", "--as", "ops"]).await;
    let returned = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    assert!(
        asked.status.success(),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    wait_row(
        &emu,
        "hasty",
        "the job to end cancelled",
        WAIT,
        |r| r.state.is(State::Cancelled),
        show(&emu, &log),
    )
    .await;
    let late: Vec<u128> = std::fs::read_to_string(&starts)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse::<u128>().ok())
        .filter(|t| *t > returned)
        .collect();
    assert!(
        late.is_empty(),
        "{} attempt(s) started after `sheetq cancel` returned:\n{}",
        late.len(),
        show(&emu, &log)()
    );
}
