//! What a job printed (docs/design.md §1.6), with the real binary against the emulator: each
//! job's merged output lands in its own `_ジョブログ` row (the tail, written RAW, bytes that
//! are not UTF-8 replaced), in full under `state_dir/logs`; 結果URL and the panel's 結果 link
//! to that row and still do after a person sorts the log; `sheetq logs` prints it.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::State;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);
const FAST: Quota = Quota::scaled(50);
const FUNCTION: &str = "動作確認 (2秒)";

/// A waiting queue row A..Q for `command` on `target`'s panel row of [`FUNCTION`].
fn waiting(job: &str, target: &str, command: &str) -> serde_json::Value {
    waiting_row(job, target, FUNCTION, command, "")
}

fn sh(name: &str, script: &str) -> String {
    format!(
        "[commands.{name}]\nexec = [\"/bin/sh\", \"-c\", {}]\n",
        toml::Value::String(script.to_string())
    )
}

/// The log sheet's rows from row 2: (sheet row, jobId, output, has an end).
fn log_rows(emu: &Emulator) -> Vec<(u32, String, String, bool)> {
    emu.values("'_ジョブログ'!A2:F")
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let text = |k: usize| {
                r.get(k)
                    .map(|v| match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default()
            };
            (i as u32 + 2, text(0), text(5), !text(4).is_empty())
        })
        .collect()
}

fn log_of(emu: &Emulator, job: &str) -> (u32, String, bool) {
    let rows = log_rows(emu);
    let found: Vec<_> = rows.iter().filter(|r| r.1 == job).collect();
    assert_eq!(found.len(), 1, "one log row for {job}: {rows:#?}");
    (found[0].0, found[0].2.clone(), found[0].3)
}

/// The log row a 結果URL leads to: the row number after `range=A`.
fn linked_row(emu: &Emulator, url: &str) -> u32 {
    let prefix = log_link_prefix(emu);
    url.strip_prefix(&prefix)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("結果URL {url:?} is no link to a log row ({prefix}…)"))
}

fn show<'a>(emu: &'a Emulator, log: &'a Path) -> impl Fn() -> String + 'a {
    move || {
        format!(
            "{}\nlog rows: {:#?}\ndaemon log:\n{}",
            describe_queue(&queue_rows(emu)),
            log_rows(emu)
                .into_iter()
                .map(|(r, j, o, e)| (r, j, o.chars().take(80).collect::<String>(), e))
                .collect::<Vec<_>>(),
            std::fs::read_to_string(log).unwrap_or_default()
        )
    }
}

/// Waits until `job` is final with its メッセージ; returns the queue then.
async fn wait_ended(emu: &Emulator, job: &str, log: &Path) -> Vec<sheetq::queue::QueueRow> {
    wait_ended_with_messages(emu, &[job], WAIT, show(emu, log)).await
}

async fn sheetq_logs(config: &Path, job: &str) -> std::process::Output {
    run_sheetq(config, &["logs", job]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_jobs_output_lands_in_its_log_row_raw_whole_and_linked_even_after_a_sort() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q4",
        json!([
            waiting("big", "サーバーA", "big"),
            waiting("formula", "サーバーB", "formula"),
            waiting("binary", "サーバーC", "binary"),
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let commands = [
        sh(
            "big",
            // The streams are two pipes, read as their chunks come: a line written to
            // stderr a moment after stdout's last one comes after it.
            "head -c 100000 /dev/zero | tr '\\000' x; echo; sleep 0.3; echo finished >&2",
        ),
        sh(
            "formula",
            "printf '=1+1\\n=IMPORTXML(\"http://x\",\"//a\")\\n'",
        ),
        sh("binary", "printf 'ok \\377\\376\\n'"),
    ]
    .concat();
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &commands,
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let rows = wait_for(
        "the three jobs to end with their log rows filled",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let logs = log_rows(&emu);
            let done = ["big", "formula", "binary"].iter().all(|j| {
                rows.iter().any(|r| r.job_id == *j && r.state.is_final())
                    && logs.iter().any(|l| l.1 == *j && l.3)
            });
            done.then_some(rows)
        },
        show(&emu, &log),
    )
    .await;
    for job in ["big", "formula", "binary"] {
        assert!(
            row_of(&rows, job).state.is(State::Done),
            "{job} ran to 完了:\n{}",
            show(&emu, &log)()
        );
    }

    let (_, big, _) = log_of(&emu, "big");
    let marker = sheetq::commands::output::TRUNCATED_START;
    assert!(
        big.starts_with(marker) && big.contains("x\nfinished\n"),
        "the tail of 100,001 x's and the stderr line after them: {:?}…{:?}",
        big.chars().take(40).collect::<String>(),
        big.chars().rev().take(40).collect::<String>()
    );
    assert_eq!(
        big.chars().count(),
        20_000 + marker.chars().count(),
        "log_chars (20,000) characters are kept in the cell"
    );
    let file = dir.path().join("state/logs/big.log");
    let full = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(
        full.iter().filter(|b| **b == b'x').count(),
        100_000,
        "the file under state_dir keeps the whole output"
    );
    assert_eq!(
        log_of(&emu, "formula").1,
        "=1+1\n=IMPORTXML(\"http://x\",\"//a\")\n",
        "output is written RAW: a line starting with = stays text"
    );
    assert_eq!(
        log_of(&emu, "binary").1,
        "ok \u{FFFD}\u{FFFD}\n",
        "bytes that are not UTF-8 are shown as replacement characters"
    );

    // The links: 結果URL to the log row, the panel's 結果 showing the message.
    let check_links = |when: &str| {
        let rows = queue_rows(&emu);
        for job in ["big", "formula", "binary"] {
            let r = row_of(&rows, job);
            let linked = linked_row(&emu, &r.result_url);
            let (row, _, _) = log_of(&emu, job);
            assert_eq!(linked, row, "{when}: {job}'s 結果URL leads to its log row");
        }
        let panel = panel_row(&emu, "サーバーB", 8);
        assert_eq!(
            panel[3],
            row_of(&rows, "formula").message,
            "{when}: the panel's 結果 shows the job's message: {panel:?}"
        );
    };
    check_links("after the run");
    // A person sorts the log by jobId, moving every row.
    let before: Vec<u32> = ["big", "formula", "binary"]
        .iter()
        .map(|j| log_of(&emu, j).0)
        .collect();
    emu.batch_update_as(
        &emu.owner(),
        json!([{ "sortRange": {
            "range": { "sheetId": sheetq::emulator::seed::LOG_SHEET_ID, "startRowIndex": 1 },
            "sortSpecs": [{ "dimensionIndex": 0, "sortOrder": "ASCENDING" }] } }]),
    )
    .unwrap_or_else(|e| panic!("sort the log: {e:?}"));
    let after: Vec<u32> = ["big", "formula", "binary"]
        .iter()
        .map(|j| log_of(&emu, j).0)
        .collect();
    assert_ne!(before, after, "the sort moved the log rows");
    check_links("after a sort of the log");

    // `sheetq logs`: the full output here (the file), the tail elsewhere (the sheet).
    let out = sheetq_logs(&config, "big").await;
    assert!(
        out.status.success() && out.stdout.iter().filter(|b| **b == b'x').count() == 100_000,
        "sheetq logs on the machine that ran the job prints the whole output: {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap_or_else(|e| panic!("{e}"));
    let other = binary_config_with(&emu, &elsewhere, "vm-2", "", &commands);
    let out = sheetq_logs(&other, "formula").await;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "=1+1\n=IMPORTXML(\"http://x\",\"//a\")\n",
        "sheetq logs elsewhere prints the log row: {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// While a job runs, its log row shows what it printed so far, riding the heartbeat's write,
/// and `sheetq logs --follow` on its machine prints its output as it comes, to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobs_log_row_shows_its_output_so_far() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("slow", "サーバーA", "slow")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &sh("slow", "echo step 1 of 2; sleep 8; echo step 2 of 2"),
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_for(
        "the running job's log row to show its first line",
        WAIT,
        || {
            let running = queue_rows(&emu)
                .iter()
                .any(|r| r.job_id == "slow" && r.state.is(State::Running));
            let shown = log_rows(&emu)
                .iter()
                .any(|l| l.1 == "slow" && l.2 == "step 1 of 2\n" && !l.3);
            (running && shown).then_some(())
        },
        show(&emu, &log),
    )
    .await;
    // Followed on this machine, the output comes as it is printed, to the job's end.
    let follow = run_sheetq(&config, &["logs", "slow", "--follow"]).await;
    assert_eq!(
        String::from_utf8_lossy(&follow.stdout),
        "step 1 of 2\nstep 2 of 2\n",
        "sheetq logs --follow prints until the job ends: {:?}",
        String::from_utf8_lossy(&follow.stderr)
    );
    wait_for(
        "the finished job's log row to hold all of its output",
        WAIT,
        || {
            log_rows(&emu)
                .iter()
                .any(|l| l.1 == "slow" && l.2 == "step 1 of 2\nstep 2 of 2\n" && l.3)
                .then_some(())
        },
        show(&emu, &log),
    )
    .await;
}

/// A person deletes a running job's log row, then the whole log sheet: results still land
/// (a write through a binding that is gone would make Google refuse the whole call) and
/// later jobs are still claimed and run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_log_row_or_log_sheet_holds_back_no_result_and_no_claim() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("slow", "サーバーA", "slow")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &[
            sh("slow", "echo started; sleep 4; echo done"),
            sh("quick", "echo quick"),
        ]
        .concat(),
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let (row, _, _) = wait_for(
        "the running job's log row",
        WAIT,
        || {
            log_rows(&emu)
                .into_iter()
                .find(|l| l.1 == "slow")
                .map(|l| (l.0, l.2, l.3))
        },
        show(&emu, &log),
    )
    .await;
    emu.batch_update_as(
        &emu.owner(),
        json!([{ "deleteDimension": { "range": {
            "sheetId": sheetq::emulator::seed::LOG_SHEET_ID, "dimension": "ROWS",
            "startIndex": row - 1, "endIndex": row } } }]),
    )
    .unwrap_or_else(|e| panic!("delete the log row: {e:?}"));
    let rows = wait_ended(&emu, "slow", &log).await;
    let slow = row_of(&rows, "slow");
    assert!(
        slow.state.is(State::Done) && slow.message == "done",
        "the result lands without its log row: {slow:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("state/logs/slow.log")).unwrap_or_default(),
        "started\ndone\n",
        "the output is still kept under state_dir"
    );

    emu.batch_update_as(
        &emu.owner(),
        json!([{ "deleteSheet": { "sheetId": sheetq::emulator::seed::LOG_SHEET_ID } }]),
    )
    .unwrap_or_else(|e| panic!("delete the log sheet: {e:?}"));
    emu.set_values(
        "'_ジョブキュー'!A3:Q3",
        json!([waiting("after", "サーバーB", "quick")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let rows = wait_ended(&emu, "after", &log).await;
    let after = row_of(&rows, "after");
    assert!(
        after.state.is(State::Done) && after.message == "quick",
        "a job is claimed and run without the log sheet: {after:#?}"
    );
}
