//! Stopping a job on request (docs/design.md §2.1), with the real binary against the
//! emulator: a request in the queue's 中止要求 column (as the Apps Script intake and
//! `sheetq cancel` write it) ends a waiting job キャンセル before it runs, stops a running
//! job's whole process group, and still holds when the daemon that ran the job is dead; a
//! request that names another job (a sort moved it) stops nothing.

use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use sheetq::emulator::{Emulator, Fault, FaultRule, Quota};
use sheetq::queue::State;

use crate::daemon::{binary_config_with, state_and_parent, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);
const FAST: Quota = Quota::scaled(50);

/// A queue row A..Q as an intake writes it, `state` and 中止要求 as given.
fn queue_row(
    job: &str,
    target: &str,
    command: &str,
    state: &str,
    asked: &str,
) -> serde_json::Value {
    json!([
        job,
        sheetq::sheet_time::instant_to_serial(Utc::now(), TZ),
        "",
        target,
        "",
        target,
        "動作確認 (2秒)",
        command,
        "{}",
        "",
        state,
        "",
        "",
        "",
        "",
        "",
        asked
    ])
}

/// Writes 中止要求 on the row that holds `job` now, as a person's trigger would.
fn ask_to_stop(emu: &Emulator, job: &str, text: &str) {
    let rows = queue_rows(emu);
    let row = row_of(&rows, job).row;
    emu.set_values(&format!("'_ジョブキュー'!Q{row}"), json!([[text]]), false)
        .unwrap_or_else(|e| panic!("writing 中止要求 of {job}: {e:?}"));
}

/// A command that records each run in `ran`, prints a line, and sleeps 300 s in a child
/// process whose pid it writes to `pids`, next to its own.
fn long_command(dir: &Path) -> String {
    let script = format!(
        "echo run >> {ran}; echo working on step 3; sleep 300 & echo $$ $! > {pids}; wait",
        ran = dir.join("ran").display(),
        pids = dir.join("pids").display()
    );
    format!(
        "[commands.long]\nexec = [\"/bin/sh\", \"-c\", {}]\ntimeout = \"10m\"\nkill_grace = \"1s\"\n",
        toml::Value::String(script)
    )
}

fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("ran"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// Waits until every job of `jobs` is final with its メッセージ (a cancel's 終了日時/メッセージ
/// follow its state in a later write); returns the queue then.
async fn wait_ended(emu: &Emulator, jobs: &[&str], log: &Path) -> Vec<sheetq::queue::QueueRow> {
    wait_ended_with_messages(emu, jobs, WAIT, queue_and_log(emu, log)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_job_asked_to_stop_ends_cancelled_and_never_runs() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q4",
        json!([
            queue_row(
                "asked",
                "サーバーA",
                "long",
                "待機",
                "hanako@example.com 2026/12/03 10:04:00 #asked"
            ),
            queue_row("next", "サーバーB", "echo", "待機", ""),
            // A request a sort left on another job's row: it names "elsewhere", not "moved".
            queue_row(
                "moved",
                "サーバーC",
                "echo",
                "待機",
                "jiro@example.com 2026/12/03 10:05:00 #elsewhere"
            ),
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &format!(
            "{}[commands.echo]\nbuiltin = \"echo\"\n",
            long_command(dir.path())
        ),
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let rows = wait_ended(&emu, &["asked", "next", "moved"], &log).await;
    let asked = row_of(&rows, "asked");
    assert!(
        asked.state.is(State::Cancelled)
            && asked.started_at.is_none()
            && asked.worker.is_empty()
            && asked.finished_at.is_some(),
        "the waiting row asked to stop ends キャンセル with its 終了日時, never claimed: {asked:#?}"
    );
    assert_eq!(
        asked.message, "中止: hanako@example.com 10:04",
        "メッセージ says who asked and when"
    );
    assert_eq!(runs(dir.path()), 0, "the cancelled job's command never ran");
    assert!(
        row_of(&rows, "next").state.is(State::Done),
        "the other job still runs"
    );
    assert!(
        row_of(&rows, "moved").state.is(State::Done),
        "a request naming another job stops nothing on the row it stands on: {:#?}",
        row_of(&rows, "moved")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_asked_to_stop_has_its_process_group_stopped_and_ends_cancelled_with_its_output(
) {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([queue_row("long", "サーバーA", "long", "待機", "")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &long_command(dir.path()),
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let pids: Vec<u32> = wait_for(
        "the long job to run and start its child",
        WAIT,
        || {
            let text = std::fs::read_to_string(dir.path().join("pids")).ok()?;
            let pids: Vec<u32> = text
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            (pids.len() == 2).then_some(pids)
        },
        queue_and_log(&emu, &log),
    )
    .await;
    ask_to_stop(&emu, "long", "taro@example.com 2026/12/03 21:30:00 #long");
    let rows = wait_ended(&emu, &["long"], &log).await;
    let r = row_of(&rows, "long");
    assert!(
        r.state.is(State::Cancelled) && r.worker.starts_with("vm-1/"),
        "the running job ends キャンセル under its claim: {r:#?}"
    );
    assert!(
        r.message.starts_with("中止: taro@example.com 21:30\n")
            && r.message.contains("working on step 3"),
        "メッセージ names who and when, then the output's tail: {:?}",
        r.message
    );
    for pid in pids {
        wait_for(
            &format!("process {pid} of the job's group to be gone"),
            WAIT,
            || match state_and_parent(pid) {
                None | Some(('Z', _)) => Some(()),
                Some(_) => None,
            },
            || format!("{pid}: {:?}", state_and_parent(pid)),
        )
        .await;
    }
    assert_eq!(runs(dir.path()), 1, "the job ran once and is not run again");
}

/// A job whose daemon died (SIGKILL) is rescued by another daemon once the dead one's
/// heartbeat stood still for `dead_after`; asked to stop, it ends キャンセル, not タイムアウト,
/// and never runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_asked_to_stop_whose_daemon_is_dead_ends_cancelled_when_rescued_and_never_runs_again()
{
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    for d in [&first, &second] {
        std::fs::create_dir(d).unwrap_or_else(|e| panic!("{e}"));
    }
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([queue_row("long", "サーバーA", "long", "待機", "")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let settings = "heartbeat_interval = \"1s\"\ndead_after = \"3s\"\n";
    let commands = long_command(dir.path());
    let config = binary_config_with(&emu, &first, "vm-dies", settings, &commands);
    let log = first.join("sheetq.log");
    let daemon = Binary::start(&config, &log);
    wait_for(
        "the long job to run under vm-dies",
        WAIT,
        || (runs(dir.path()) == 1).then_some(()),
        queue_and_log(&emu, &log),
    )
    .await;
    drop(daemon);
    ask_to_stop(&emu, "long", "jiro@example.com 2026/12/03 08:15:00");
    let config = binary_config_with(&emu, &second, "vm-rescuer", settings, &commands);
    let rescuer_log = second.join("sheetq.log");
    let _rescuer = Binary::start(&config, &rescuer_log);
    let rows = wait_ended(&emu, &["long"], &rescuer_log).await;
    let r = row_of(&rows, "long");
    assert!(
        r.state.is(State::Cancelled) && r.message.starts_with("中止: jiro@example.com 08:15"),
        "the dead daemon's job asked to stop ends キャンセル when rescued: {r:#?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(runs(dir.path()), 1, "the job is not run again");
}

const POLL: (&str, &str) = ("intake", "\"poll\"");

/// Ticks `column` of panel `title`'s row `row`, as a person does.
fn tick(emu: &Emulator, title: &str, column: &str, row: u32) {
    emu.set_values(&format!("'{title}'!{column}{row}"), json!([[true]]), false)
        .unwrap_or_else(|e| panic!("cannot tick {title}!{column}{row}: {e:?}"));
}

/// Makes the demo's sleep function on panel サーバーA row `row` sleep `seconds`.
fn sleep_for(emu: &Emulator, row: u32, seconds: u32) {
    emu.set_values(
        &format!("'サーバーA'!I{row}"),
        json!([[format!("{{\"seconds\":{seconds}}}")]]),
        false,
    )
    .unwrap_or_else(|e| panic!("cannot set サーバーA!I{row}: {e:?}"));
}

/// The queue row of `function` on サーバーA once `ok` holds for it.
async fn wait_row(
    emu: &Emulator,
    function: &str,
    what: &str,
    ok: impl Fn(&sheetq::queue::QueueRow) -> bool,
) -> sheetq::queue::QueueRow {
    wait_for(
        &format!("the {function} job to be {what}"),
        WAIT,
        || {
            queue_rows(emu)
                .into_iter()
                .find(|r| r.target == "サーバーA" && r.function == function && ok(r))
        },
        || describe_queue(&queue_rows(emu)),
    )
    .await
}

fn cancelled_with_message(r: &sheetq::queue::QueueRow) -> bool {
    r.state.is(State::Cancelled) && !r.message.is_empty()
}

/// ■ ticks read by the daemon's poll (`intake = "poll"`): one on a waiting job's function
/// ends it キャンセル before it runs; one on the running job's function stops it. Both boxes
/// go back, and the panel row shows the outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ticks_read_by_polling_cancel_the_waiting_job_and_stop_the_running_one() {
    let emu = start_with_quota(FAST).await;
    sleep_for(&emu, 8, 120);
    sleep_for(&emu, 9, 120);
    let fleet = Fleet::start(&emu, &["vm-1"], &[POLL], "").await;
    tick(&emu, "サーバーA", "A", 8);
    let running = wait_row(&emu, "動作確認 (2秒)", "running", |r| {
        r.state.is(State::Running)
    })
    .await;
    // Same target: the second press waits for the first.
    tick(&emu, "サーバーA", "A", 9);
    wait_row(&emu, "再起動 (5秒)", "waiting", |r| {
        r.state.is(State::Waiting)
    })
    .await;

    tick(&emu, "サーバーA", "F", 9);
    let waiting = wait_row(&emu, "再起動 (5秒)", "cancelled", cancelled_with_message).await;
    assert!(
        waiting.message.starts_with("中止: 不明 ") && waiting.started_at.is_none(),
        "the waiting job never ran; polling cannot tell who ticked: {waiting:#?}"
    );
    tick(&emu, "サーバーA", "F", 8);
    let stopped = wait_row(&emu, "動作確認 (2秒)", "stopped", cancelled_with_message).await;
    assert_eq!(stopped.job_id, running.job_id);
    assert!(
        stopped.message.starts_with("中止: 不明 ") && stopped.worker == running.worker,
        "the running job ends キャンセル under its claim: {stopped:#?}"
    );
    wait_for(
        "panel row 8 to show キャンセル with both boxes back",
        WAIT,
        || {
            let cells = panel_row(&emu, "サーバーA", 8);
            (cells[2].contains("キャンセル") && cells[0] == "FALSE" && cells[5] == "FALSE")
                .then_some(())
        },
        || format!("{:?}", panel_row(&emu, "サーバーA", 8)),
    )
    .await;
    fleet.stop(&emu).await;
}

/// A ■ tick on a job whose daemon is cut off from the API: another daemon takes the tick in
/// and writes the request on the job's row; it ends the row キャンセル once the silent
/// daemon's heartbeat stood still for `dead_after` (unconfirmed: the job may still run).
/// When the cut-off daemon is back, it reads the request on its row, stops the job and
/// confirms. The job is never run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_job_whose_daemon_is_cut_off_and_is_confirmed_when_it_is_back() {
    let emu = start_with_quota(FAST).await;
    sleep_for(&emu, 8, 120);
    let settings = [
        POLL,
        ("slots", "1"),
        ("heartbeat_interval", "\"500ms\""),
        ("dead_after", "\"3s\""),
        ("lease_ttl", "\"3s\""),
    ];
    let first = Fleet::start_on_own_accounts(&emu, &["a1"], &settings, "").await;
    tick(&emu, "サーバーA", "A", 8);
    let running = wait_row(&emu, "動作確認 (2秒)", "running on a1", |r| {
        r.state.is(State::Running) && r.worker.starts_with("a1/")
    })
    .await;
    emu.add_fault(FaultRule::cut_off(
        &Emulator::account("a1"),
        Fault::Status(503),
    ));
    let second = Fleet::start_on_own_accounts(&emu, &["a2"], &settings, "").await;
    tick(&emu, "サーバーA", "F", 8);
    let rescued = wait_row(
        &emu,
        "動作確認 (2秒)",
        "cancelled by a2",
        cancelled_with_message,
    )
    .await;
    assert!(
        rescued.message.starts_with("中止: 不明 ")
            && rescued.message.contains(sheetq::cancel::UNCONFIRMED)
            && rescued
                .cancel_request
                .ends_with(&format!("#{}", running.job_id)),
        "a2 wrote the request on the row and ended it キャンセル, unconfirmed: {rescued:#?}"
    );
    emu.clear_faults();
    let confirmed = wait_row(&emu, "動作確認 (2秒)", "confirmed by a1", |r| {
        cancelled_with_message(r) && !r.message.contains(sheetq::cancel::UNCONFIRMED)
    })
    .await;
    assert!(
        confirmed.message.starts_with("中止: 不明 ") && confirmed.worker == running.worker,
        "a1 stopped its job and wrote its own キャンセル: {confirmed:#?}"
    );
    first.stop(&emu).await;
    second.stop(&emu).await;
    let rows = queue_rows(&emu);
    assert_eq!(
        rows.len(),
        1,
        "the job is not queued or run again:\n{}",
        describe_queue(&rows)
    );
}

/// `sheetq cancel` with `args`.
async fn cancel_cli(config: &Path, args: &[&str]) -> std::process::Output {
    run_sheetq(config, &[&["cancel"], args].concat()).await
}

/// `sheetq cancel JOBID` from the shell: a waiting job ends キャンセル without running, a
/// running one is stopped (`--wait` exits 0 once it ended キャンセル); a finished job is left
/// as it is (exit 4), and an unknown jobId is an error naming where it may have gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sheetq_cancel_stops_waiting_and_running_jobs_and_leaves_finished_ones() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut done = queue_row("done", "サーバーC", "long", "完了", "");
    done[10] = json!("完了");
    // A job an Apps Script worker runs (no heartbeat, not ours to stop here).
    let mut elsewhere = queue_row("elsewhere", "サーバーD", "long", "実行中", "");
    elsewhere[11] = json!(sheetq::sheet_time::instant_to_serial(Utc::now(), TZ));
    elsewhere[15] = json!("gas/0 #0000abcd");
    emu.set_values(
        "'_ジョブキュー'!A2:Q5",
        json!([
            queue_row("waiting", "サーバーB", "long", "待機", ""),
            queue_row("long", "サーバーA", "long", "待機", ""),
            done,
            elsewhere,
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &long_command(dir.path()),
    );

    let out = cancel_cli(&config, &["waiting", "--as", "ops@example.com"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("asked to stop (it was 待機)"),
        "cancel of a waiting job: {out:?}"
    );
    let asked = row_of(&queue_rows(&emu), "waiting").cancel_request.clone();
    assert!(
        asked.starts_with("ops@example.com ") && asked.ends_with(" #waiting"),
        "中止要求 says who, when and which job: {asked:?}"
    );
    let again = cancel_cli(&config, &["waiting", "--as", "\u{1b}[2Jsomeone"]).await;
    assert!(
        again.status.success()
            && String::from_utf8_lossy(&again.stdout)
                .contains("already asked to stop by ops@example.com; it is 待機"),
        "a second request says who asked first and writes nothing: {again:?}"
    );
    let out = cancel_cli(&config, &["elsewhere", "--as", "ops@example.com"]).await;
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("asked to stop (it was 実行中)"),
        "cancel of a job running elsewhere: {out:?}"
    );
    let status = run_sheetq(&config, &["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("elsewhere") && l.ends_with("asked to stop by ops@example.com")),
        "status shows the request on the running job:\n{text}"
    );
    let out = cancel_cli(&config, &["done"]).await;
    assert!(
        out.status.code() == Some(4)
            && String::from_utf8_lossy(&out.stdout).contains("already ended 完了"),
        "a finished job is left as it is: {out:?}"
    );
    let out = cancel_cli(&config, &["no-such-job"]).await;
    assert!(
        out.status.code() == Some(1)
            && String::from_utf8_lossy(&out.stderr).contains("is not in '_ジョブキュー'"),
        "an unknown jobId is named: {out:?}"
    );

    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_for(
        "the long job to start its child",
        WAIT,
        || {
            std::fs::read_to_string(dir.path().join("pids"))
                .ok()
                .filter(|t| t.split_whitespace().count() == 2)
        },
        queue_and_log(&emu, &log),
    )
    .await;
    let out = cancel_cli(&config, &["long", "--as", "ops@example.com", "--wait"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("キャンセル: 中止: ops@example.com "),
        "cancel --wait of a running job prints its end and exits 0: {out:?}\n{}",
        queue_and_log(&emu, &log)()
    );
    let rows = wait_ended(&emu, &["waiting", "long"], &log).await;
    let waiting = row_of(&rows, "waiting");
    assert!(
        waiting.state.is(State::Cancelled) && waiting.started_at.is_none(),
        "the waiting job ended キャンセル without being claimed: {waiting:#?}"
    );
    assert_eq!(runs(dir.path()), 1, "only the running job's command ran");
}

/// The owner deletes the row of a running job. `sheetq status` still lists it (from its
/// daemon's heartbeat), and `sheetq cancel` stops it through that daemon: the request goes
/// into the daemon's heartbeat row, which it reads at every poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_whose_row_was_deleted_is_listed_and_stopped_through_its_daemon() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([queue_row("orphan", "サーバーA", "long", "待機", "")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        &long_command(dir.path()),
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let show = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_for(
        "the long job to run",
        WAIT,
        || (runs(dir.path()) == 1 && dir.path().join("pids").exists()).then_some(()),
        show,
    )
    .await;
    // Listed by its daemon's heartbeat, then its row deleted.
    wait_for(
        "the heartbeat to list the job",
        WAIT,
        || {
            sheet_values(&emu, "_ワーカー")
                .iter()
                .any(|r| {
                    r.iter()
                        .any(|c| c.as_str().is_some_and(|t| t.contains("orphan")))
                })
                .then_some(())
        },
        show,
    )
    .await;
    let queue = sheetq::emulator::seed::QUEUE_SHEET_ID;
    emu.batch_update(json!([{ "deleteDimension": { "range": {
        "sheetId": queue, "dimension": "ROWS", "startIndex": 1, "endIndex": 2 } } }]))
        .unwrap_or_else(|e| panic!("delete the job's row: {e:?}"));
    assert!(
        !queue_rows(&emu).iter().any(|r| r.job_id == "orphan"),
        "the row is gone"
    );

    let status = run_sheetq(&config, &["status"]).await;
    let listed = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        listed.contains("running without a queue row") && listed.contains("orphan"),
        "status lists the job from its daemon's heartbeat: {listed}"
    );
    let asked = run_sheetq(&config, &["cancel", "orphan", "--as", "ops"]).await;
    assert!(
        asked.status.success()
            && String::from_utf8_lossy(&asked.stdout).contains("asked the daemon vm-1"),
        "{asked:?}"
    );
    wait_for(
        "the daemon to stop the job",
        WAIT,
        || {
            show()
                .lines()
                .any(|l| {
                    l.contains("job finished") && l.contains("orphan") && l.contains("Cancelled")
                })
                .then_some(())
        },
        show,
    )
    .await;
    assert!(
        show().contains("a stop asked through this daemon's heartbeat row"),
        "{}",
        show()
    );
}

/// A `_ワーカー` made before the stop column (ten columns wide) is widened by the daemon at
/// start, so that its polls read column K from the first (a stop `sheetq cancel` leaves
/// there is not left waiting for the next metadata read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_started_on_a_ten_column_worker_sheet_widens_it_for_the_stop_column() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let width = |emu: &Emulator| {
        emu.with_spreadsheet(|ss| {
            ss.sheets
                .iter()
                .find(|s| s.title == "_ワーカー")
                .map(|s| s.column_count)
        })
        .ok()
        .flatten()
    };
    emu.with_spreadsheet(|ss| {
        for s in ss.sheets.iter_mut().filter(|s| s.title == "_ワーカー") {
            s.column_count = 10;
        }
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(width(&emu), Some(10));
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", "");
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_for(
        "the daemon to widen '_ワーカー' to K",
        WAIT,
        || (width(&emu) == Some(11)).then_some(()),
        || std::fs::read_to_string(&log).unwrap_or_default(),
    )
    .await;
    wait_for(
        "a poll to read column K",
        WAIT,
        || {
            emu.requests()
                .iter()
                .any(|r| {
                    r.ranges
                        .iter()
                        .any(|range| range.contains("_ワーカー") && range.contains(":K"))
                })
                .then_some(())
        },
        || {
            format!(
                "{:?}",
                emu.requests().iter().map(|r| &r.ranges).collect::<Vec<_>>()
            )
        },
    )
    .await;
}
