//! Rollouts with the real binary (`[[rollouts]]`, `sheetq rollout NAME`): one row in the
//! queue, its targets' jobs queued in waves by the claim passes under the lease, each an
//! ordinary job on its own panel row, the rollout ending 完了, エラー or キャンセル with its
//! counts. The command records, in a directory of the test, which targets ran and how many
//! ran at once.

use std::path::Path;
use std::time::Duration;

use sheetq::emulator::Quota;
use sheetq::queue::{QueueRow, State};

use crate::daemon::{protected_set_up, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(90);

/// A command that marks its target running in `dir` while it sleeps `seconds` (noting in
/// `overlap` a target that runs already), counts how many run at that moment (`counts`),
/// lists its target in `ran`, and fails on the targets named in `dir/fail`.
fn commands(dir: &Path, seconds: &str) -> String {
    let d = dir.display();
    format!(
        r#"[commands.work]
exec = ["/bin/sh", "-c", "d='{d}'; t=\"$SHEETQ_TARGET\"; if [ -e \"$d/run.$t\" ]; then echo \"$t\" >> \"$d/overlap\"; fi; : > \"$d/run.$t\"; ls \"$d\" | grep -c '^run[.]' >> \"$d/counts\"; echo \"$t\" >> \"$d/ran\"; sleep {seconds}; rm -f \"$d/run.$t\"; if grep -qx \"$t\" \"$d/fail\" 2>/dev/null; then echo \"$t broke\"; exit 1; fi; echo \"$t ok\""]
"#
    )
}

/// Six web servers and a database, the function that restarts one, and rollouts over them.
const TARGETS: &str = r#"
[[targets]]
label = "web-1"
groups = ["web"]
[[targets]]
label = "web-2"
groups = ["web"]
[[targets]]
label = "web-3"
groups = ["web"]
[[targets]]
label = "web-4"
groups = ["web"]
[[targets]]
label = "web-5"
groups = ["web"]
[[targets]]
label = "web-6"
groups = ["web"]
[[targets]]
label = "db-1"
groups = ["db"]
[[functions]]
label = "再起動"
command = "work"
"#;

/// The config of a daemon (`worker`) with the rollouts `rollouts` (TOML) over [`TARGETS`],
/// set up as an operator does (`init`, `panels sync`, every panel opened); the record
/// directory.
async fn set_up(
    emu: &sheetq::emulator::Emulator,
    dir: &Path,
    seconds: &str,
    rollouts: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (path, record) = set_up_with(emu, dir, seconds, "", &format!("{TARGETS}{rollouts}")).await;
    let opened = run_sheetq(&path, &["panels", "sync", "--all"]).await;
    assert!(opened.status.success(), "{}", output_text(&opened));
    (path, record)
}

/// [`set_up`] with top-level `settings` (TOML lines) and a `catalog` (targets, functions
/// and rollouts) of the test's own, no panel opened; the record directory.
async fn set_up_with(
    emu: &sheetq::emulator::Emulator,
    dir: &Path,
    seconds: &str,
    settings: &str,
    catalog: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let record = dir.join("record");
    std::fs::create_dir_all(&record).unwrap_or_else(|e| panic!("{e}"));
    let config = format!("{settings}{}{catalog}", commands(&record, seconds));
    let (path, _, _) = protected_set_up(emu, dir, "vm-1", &config).await;
    (path, record)
}

/// The 1-based row of the 一括 panel that shows rollout `label`.
fn bulk_row(emu: &sheetq::emulator::Emulator, label: &str) -> u32 {
    (1..=20)
        .find(|r| panel_row(emu, "一括", *r).iter().any(|c| c == label))
        .unwrap_or_else(|| panic!("`panels sync` makes the 一括 panel with a row for {label}"))
}

/// The targets that ran, in the order they started.
fn ran(record: &Path) -> Vec<String> {
    std::fs::read_to_string(record.join("ran"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The most jobs that ran at once.
fn most_at_once(record: &Path) -> usize {
    std::fs::read_to_string(record.join("counts"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .unwrap_or(0)
}

/// The rollout's own row.
fn rollout_row(rows: &[QueueRow]) -> &QueueRow {
    rows.iter()
        .find(|r| r.is_rollout())
        .unwrap_or_else(|| panic!("no rollout row: {}", describe_queue(rows)))
}

/// `sheetq rollout NAME --wait`: its output once it ended (within [`WAIT`], else the queue
/// and the daemon's `log` say where it stands).
async fn rollout_waited(
    emu: &sheetq::emulator::Emulator,
    config: &Path,
    name: &str,
    log: &Path,
) -> std::process::Output {
    let (path, name) = (config.to_path_buf(), name.to_string());
    let run = tokio::spawn(async move { run_sheetq(&path, &["rollout", &name, "--wait"]).await });
    tokio::time::timeout(WAIT, run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the rollout did not end within {WAIT:?}: {}\nlog:\n{}",
                describe_queue(&queue_rows(emu)),
                std::fs::read_to_string(log).unwrap_or_default()
            )
        })
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_over_a_group_runs_every_target_once_never_more_than_max_parallel_at_once() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-web"
label = "web 再起動"
function = "再起動"
group = "web"
max_parallel = 2
"#;
    let (config, record) = set_up(&emu, dir.path(), "1", rollouts).await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);

    let out = rollout_waited(&emu, &config, "restart-web", &log).await;
    let rows = queue_rows(&emu);
    assert!(
        out.status.success(),
        "{}\n{}",
        output_text(&out),
        describe_queue(&rows)
    );
    assert!(
        output_text(&out).contains("完了: 成功 6 · 失敗 0 · 中止 0"),
        "the shell hears the outcome with its counts: {}",
        output_text(&out)
    );
    let rollout = rollout_row(&rows);
    assert!(rollout.state.is(State::Done), "{}", describe_queue(&rows));
    assert_eq!(rollout.message, "成功 6 · 失敗 0 · 中止 0");

    let mut targets = ran(&record);
    targets.sort();
    assert_eq!(
        targets,
        ["web-1", "web-2", "web-3", "web-4", "web-5", "web-6"],
        "every web target ran once, the database never"
    );
    assert_eq!(
        most_at_once(&record),
        2,
        "two at once, never more than max_parallel = 2: {:?}",
        std::fs::read_to_string(record.join("counts"))
    );
    let children: Vec<&QueueRow> = rows.iter().filter(|r| !r.is_rollout()).collect();
    assert_eq!(children.len(), 6, "{}", describe_queue(&rows));
    for child in &children {
        assert!(
            child.state.is(State::Done)
                && child.job_id == sheetq::rollout::child_job_id(&rollout.job_id, &child.target),
            "each target's job is an ordinary job under its derived jobId: {}",
            describe_queue(&rows)
        );
    }
    let status = run_sheetq(&config, &["status"]).await;
    assert!(
        output_text(&status).contains(&format!(
            "{} web 再起動 完了: 6 targets: 6 done, 0 failed, 0 cancelled, 0 running, 0 waiting, 0 not queued yet",
            rollout.job_id
        )),
        "status lists the rollout with its counts: {}",
        output_text(&status)
    );
    // Each lands on its target's own panel row, as a single press does.
    let web3 = (1..=20)
        .map(|r| panel_row(&emu, "web-3", r))
        .find(|cells| cells.iter().any(|c| c == "再起動"))
        .unwrap_or_else(|| panic!("web-3's panel has no row of 再起動"));
    assert!(
        web3.iter().any(|c| c.contains("完了")),
        "web-3's panel row shows its own job's end: {web3:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_failure_stops_a_rollout_at_max_failures_zero_and_the_rest_never_run() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-web"
function = "再起動"
targets = ["web-1", "web-2", "web-3", "web-4", "web-5", "web-6"]
"#;
    let (config, record) = set_up(&emu, dir.path(), "0", rollouts).await;
    std::fs::write(record.join("fail"), "web-2\n").unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);

    let out = rollout_waited(&emu, &config, "restart-web", &log).await;
    let rows = queue_rows(&emu);
    assert_eq!(
        out.status.code(),
        Some(4),
        "a failed rollout exits 4: {}",
        output_text(&out)
    );
    let rollout = rollout_row(&rows);
    assert!(rollout.state.is(State::Error), "{}", describe_queue(&rows));
    assert_eq!(
        rollout.message, "成功 1 · 失敗 1 · 中止 4 (失敗: web-2)",
        "the end names its counts and the target that failed"
    );
    assert_eq!(
        ran(&record),
        ["web-1", "web-2"],
        "one at a time, in order, and nothing after the failure"
    );
}

/// The rows of a rollout's jobs, those of single presses left out.
fn children<'a>(rows: &'a [QueueRow], rollout: &QueueRow) -> Vec<&'a QueueRow> {
    rows.iter()
        .filter(|r| r.job_id == sheetq::rollout::child_job_id(&rollout.job_id, &r.target))
        .collect()
}

/// Waits until `n` targets have started.
async fn wait_started(emu: &sheetq::emulator::Emulator, record: &Path, n: usize) {
    wait_for(
        &format!("{n} targets started"),
        WAIT,
        || (ran(record).len() >= n).then_some(()),
        || describe_queue(&queue_rows(emu)),
    )
    .await;
}

/// Waits until the rollout's row is final, its メッセージ written; the queue then.
async fn wait_rollout_ended(emu: &sheetq::emulator::Emulator, log: &Path) -> Vec<QueueRow> {
    wait_for(
        "the rollout to end",
        WAIT,
        || {
            let rows = queue_rows(emu);
            // Its メッセージ follows the swap of its 状態 under the next lease.
            rows.iter()
                .any(|r| {
                    r.is_rollout()
                        && r.state.is_final()
                        && !r.message.is_empty()
                        && !r.message.starts_with("実行中")
                })
                .then_some(rows)
        },
        || {
            format!(
                "{}\nlog:\n{}",
                describe_queue(&queue_rows(emu)),
                std::fs::read_to_string(log).unwrap_or_default()
            )
        },
    )
    .await
}

/// Starts rollout `name` without waiting; its jobId.
async fn rollout_id(config: &Path, name: &str) -> String {
    let out = run_sheetq(config, &["rollout", name]).await;
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_mid_rollout_stops_the_running_jobs_and_queues_no_more() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-web"
function = "再起動"
group = "web"
max_parallel = 2
"#;
    let (config, record) = set_up(&emu, dir.path(), "30", rollouts).await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let id = rollout_id(&config, "restart-web").await;
    wait_started(&emu, &record, 2).await;
    let status = run_sheetq(&config, &["status"]).await;
    assert!(
        output_text(&status).contains(&format!("{id} restart-web 実行中: 6 targets: 0 done, 0 failed, 0 cancelled, 2 running, 0 waiting, 4 not queued yet")),
        "status counts the running rollout's jobs: {}",
        output_text(&status)
    );

    let cancel = run_sheetq(&config, &["cancel", &id]).await;
    assert!(cancel.status.success(), "{}", output_text(&cancel));
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert!(
        rollout.state.is(State::Cancelled),
        "{}",
        describe_queue(&rows)
    );
    assert_eq!(rollout.message, "成功 0 · 失敗 0 · 中止 6");
    let children = children(&rows, rollout);
    assert_eq!(
        children.len(),
        2,
        "no wave after the stop: {}",
        describe_queue(&rows)
    );
    for child in &children {
        assert!(
            child.state.is(State::Cancelled) && child.message.contains("中止: 一括処理の中止"),
            "the running jobs were stopped as a cancel stops them, naming the rollout: {}",
            describe_queue(&rows)
        );
    }
    assert_eq!(ran(&record).len(), 2, "nothing started after the stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_racing_over_one_rollout_run_each_target_once() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-all"
function = "再起動"
all_targets = true
max_parallel = "50%"
"#;
    let (config, record) = set_up(&emu, dir.path(), "1", rollouts).await;
    let second = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let other = crate::daemon::binary_config_with(
        &emu,
        second.path(),
        "vm-2",
        "",
        &format!("{}{TARGETS}{rollouts}", commands(&record, "1")),
    );
    let log = dir.path().join("sheetq.log");
    let _one = Binary::start(&config, &log);
    let _two = Binary::start(&other, &second.path().join("sheetq.log"));

    let id = rollout_id(&config, "restart-all").await;
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert_eq!(rollout.job_id, id);
    assert!(rollout.state.is(State::Done), "{}", describe_queue(&rows));
    assert_eq!(rollout.message, "成功 7 · 失敗 0 · 中止 0");
    let mut targets = ran(&record);
    targets.sort();
    assert_eq!(
        targets,
        ["db-1", "web-1", "web-2", "web-3", "web-4", "web-5", "web-6"],
        "each target ran once, whichever daemon queued or ran it"
    );
    assert_eq!(
        children(&rows, rollout).len(),
        7,
        "{}",
        describe_queue(&rows)
    );
    assert!(
        most_at_once(&record) <= 4,
        "50% of 7 is 4 at once: {:?}",
        std::fs::read_to_string(record.join("counts"))
    );
    let workers: std::collections::BTreeSet<&str> = children(&rows, rollout)
        .iter()
        .filter_map(|r| r.worker.split('/').next())
        .collect();
    assert_eq!(
        workers.into_iter().collect::<Vec<_>>(),
        ["vm-1", "vm-2"],
        "both daemons ran the rollout's jobs (two slots each, four at once): {}",
        describe_queue(&rows)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_goes_on_after_every_daemon_was_killed_and_one_started_again() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The jobs cut off by the kill end エラー (their daemon died under them); the rollout
    // lets two failures pass, so it goes on with the rest.
    let rollouts = r#"
[[rollouts]]
name = "restart-web"
function = "再起動"
group = "web"
max_parallel = 2
max_failures = 2
"#;
    let (config, record) = set_up(&emu, dir.path(), "2", rollouts).await;
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start(&config, &log);
    let id = rollout_id(&config, "restart-web").await;
    wait_started(&emu, &record, 3).await;
    daemon.kill();
    let before = ran(&record);

    let _again = Binary::start(&config, &dir.path().join("sheetq-again.log"));
    let rows = wait_rollout_ended(&emu, &dir.path().join("sheetq-again.log")).await;
    let rollout = rollout_row(&rows);
    assert_eq!(rollout.job_id, id);
    let children = children(&rows, rollout);
    assert_eq!(
        children.len(),
        6,
        "every target got its job, none skipped: {}",
        describe_queue(&rows)
    );
    let all = ran(&record);
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        all.len(),
        "no target ran twice across the kill: {all:?}"
    );
    assert_eq!(
        all.len(),
        6,
        "every target ran: {all:?} (before the kill: {before:?})"
    );
    let failed = children.iter().filter(|r| r.state.is(State::Error)).count();
    let done = children.iter().filter(|r| r.state.is(State::Done)).count();
    assert!(
        failed >= 1,
        "the kill cut off a running job (the third had just started): {}",
        describe_queue(&rows)
    );
    assert_eq!(
        done + failed,
        6,
        "each job ended: {}",
        describe_queue(&rows)
    );
    assert!(
        rollout
            .message
            .starts_with(&format!("成功 {done} · 失敗 {failed} · 中止 0")),
        "the rollout's counts are its jobs' rows: {}",
        describe_queue(&rows)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollouts_job_waits_for_its_target_busy_with_a_single_press() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-two"
function = "再起動"
targets = ["web-1", "web-2"]
max_parallel = 2
"#;
    let (config, record) = set_up(&emu, dir.path(), "3", rollouts).await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let single = run_sheetq(
        &config,
        &["enqueue", "--target", "web-1", "--function", "再起動"],
    )
    .await;
    assert!(single.status.success(), "{}", output_text(&single));
    let single = String::from_utf8_lossy(&single.stdout).trim().to_string();
    wait_started(&emu, &record, 1).await;

    let id = rollout_id(&config, "restart-two").await;
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert_eq!(rollout.job_id, id);
    assert!(rollout.state.is(State::Done), "{}", describe_queue(&rows));
    assert_eq!(
        std::fs::read_to_string(record.join("overlap")).unwrap_or_default(),
        "",
        "web-1 never ran two jobs at once"
    );
    assert_eq!(
        ran(&record).len(),
        3,
        "the single press and both targets' jobs"
    );
    let first = row_of(&rows, &single);
    let web1 = row_of(&rows, &sheetq::rollout::child_job_id(&id, "web-1"));
    assert!(
        first.state.is(State::Done)
            && first.finished_at.is_some()
            && web1.started_at >= first.finished_at,
        "the rollout's job on web-1 started once the single press's had ended: {}",
        describe_queue(&rows)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_on_the_bulk_panel_runs_the_rollout_and_its_row_shows_the_end() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-web"
label = "web 再起動"
function = "再起動"
group = "web"
max_parallel = 3
"#;
    let (config, _) = set_up_with(
        &emu,
        dir.path(),
        "0",
        "intake = \"poll\"\n",
        &format!("{TARGETS}{rollouts}"),
    )
    .await;
    let row = bulk_row(&emu, "web 再起動");
    let checked = run_sheetq(&config, &["check"]).await;
    assert!(
        !output_text(&checked).contains("一括"),
        "check finds nothing wrong with the 一括 panel: {}",
        output_text(&checked)
    );

    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    crate::daemon::tick(&emu, "一括", row);
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert!(
        rollout.state.is(State::Done)
            && rollout.target == "一括"
            && rollout.function == "web 再起動"
            && rollout.message == "成功 6 · 失敗 0 · 中止 0",
        "the press made the rollout's row, and it ran to its end: {}",
        describe_queue(&rows)
    );
    assert_eq!(
        children(&rows, rollout).len(),
        6,
        "{}",
        describe_queue(&rows)
    );
    let shown = wait_for(
        "the 一括 row to show the rollout's end",
        WAIT,
        || {
            let cells = panel_row(&emu, "一括", row);
            cells
                .iter()
                .any(|c| c.contains("成功 6 · 失敗 0 · 中止 0"))
                .then_some(cells)
        },
        || format!("{:?}", panel_row(&emu, "一括", row)),
    )
    .await;
    assert!(
        shown.iter().any(|c| c.contains("完了")),
        "its 状態 says 完了: {shown:?}"
    );

    // `sheetq rerun` of the rollout's row starts the rollout again, as a new press.
    let again = run_sheetq(
        &config,
        &[
            "rerun",
            &rollout.job_id,
            "--as",
            "bob@example.com",
            "--wait",
        ],
    )
    .await;
    assert!(
        again.status.success() && output_text(&again).contains("完了: 成功 6 · 失敗 0 · 中止 0"),
        "{}",
        output_text(&again)
    );
    let rows = queue_rows(&emu);
    let runs: Vec<&QueueRow> = rows.iter().filter(|r| r.is_rollout()).collect();
    assert!(
        runs.len() == 2 && runs[1].requester == "bob@example.com",
        "a second rollout row, bob's: {}",
        describe_queue(&rows)
    );
    assert_eq!(
        children(&rows, runs[1]).len(),
        6,
        "{}",
        describe_queue(&rows)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_of_a_function_with_approvers_is_approved_once_naming_its_targets_then_runs() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let catalog = r#"
[[targets]]
label = "web-1"
groups = ["web"]
[[targets]]
label = "web-2"
groups = ["web"]
[[functions]]
label = "本番再起動"
command = "work"
approvers = ["lead@example.com"]
[[rollouts]]
name = "restart-web"
label = "web 本番再起動"
function = "本番再起動"
group = "web"
max_parallel = 2
"#;
    let (config, record) = set_up_with(&emu, dir.path(), "0", "", catalog).await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let out = run_sheetq(
        &config,
        &["rollout", "restart-web", "--requester", "alice@example.com"],
    )
    .await;
    assert!(out.status.success(), "{}", output_text(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let row = bulk_row(&emu, "web 本番再起動");
    let asked = wait_for(
        "the rollout to await its approval, naming its targets",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let waiting = rows
                .iter()
                .any(|r| r.job_id == id && r.state.is(State::AwaitingApproval));
            let cells = panel_row(&emu, "一括", row);
            (waiting && cells.iter().any(|c| c.contains("対象 2: web-1, web-2"))).then_some(cells)
        },
        || {
            format!(
                "{}\n{:?}\nlog:\n{}",
                describe_queue(&queue_rows(&emu)),
                panel_row(&emu, "一括", row),
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        },
    )
    .await;
    assert!(
        ran(&record).is_empty(),
        "nothing runs before the approval: {asked:?}"
    );

    let approved = run_sheetq(&config, &["approve", &id, "--as", "lead@example.com"]).await;
    assert!(approved.status.success(), "{}", output_text(&approved));
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert!(
        rollout.state.is(State::Done) && rollout.message == "成功 2 · 失敗 0 · 中止 0",
        "one approval ran every target's job: {}",
        describe_queue(&rows)
    );
    let mut targets = ran(&record);
    targets.sort();
    assert_eq!(targets, ["web-1", "web-2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_whose_targets_changed_since_its_press_queues_nothing_and_says_why() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let rollouts = r#"
[[rollouts]]
name = "restart-web"
function = "再起動"
group = "web"
max_parallel = 2
"#;
    let (config, record) = set_up(&emu, dir.path(), "0", rollouts).await;
    let id = rollout_id(&config, "restart-web").await;
    // The config gains a web server between the press and the run.
    let text = std::fs::read_to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    let grown = text.replace(
        "[[functions]]",
        "[[targets]]\nlabel = \"web-7\"\ngroups = [\"web\"]\n[[functions]]",
    );
    assert_ne!(grown, text, "the config gained web-7");
    std::fs::write(&config, grown).unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert_eq!(rollout.job_id, id);
    assert!(
        rollout.state.is(State::Error) && rollout.message.contains("changed in sheetq.toml"),
        "what was pressed (and would be approved) is not what the config says now: {}",
        describe_queue(&rows)
    );
    assert!(ran(&record).is_empty(), "no target ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_who_may_run_the_function_may_press_its_rollout_and_choose_its_inputs_as_google_enforces_it(
) {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let catalog = r#"
[[targets]]
label = "web-1"
groups = ["web"]
[[targets]]
label = "web-2"
groups = ["web"]
[[functions]]
label = "デプロイ"
command = "work"
allow = ["alice@example.com"]
inputs = [{ name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], default = "1.2.3" }]
[[rollouts]]
name = "deploy-web"
label = "web デプロイ"
function = "デプロイ"
group = "web"
max_parallel = 2
"#;
    let (config, _) = set_up_with(&emu, dir.path(), "0", "intake = \"poll\"\n", catalog).await;
    let row = bulk_row(&emu, "web デプロイ");
    // Mallory, an editor of the file, tries its input value, its label and ▶: Google
    // refuses each, as the protection `panels sync` made for alice says.
    for col in ["M", "L", "A"] {
        let (status, body) = person_writes(
            &emu,
            "mallory@example.com",
            &format!("'一括'!{col}{row}"),
            serde_json::json!([["1.2.4"]]),
        )
        .await;
        assert_ne!(status, 200, "mallory must not write {col}{row}: {body}");
    }
    for (cell, value) in [
        ("M", serde_json::json!("1.2.4")),
        ("A", serde_json::json!(true)),
    ] {
        let (status, body) = person_writes(
            &emu,
            "alice@example.com",
            &format!("'一括'!{cell}{row}"),
            serde_json::json!([[value]]),
        )
        .await;
        assert_eq!(status, 200, "alice may write {cell}{row}: {body}");
    }
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let rows = wait_rollout_ended(&emu, &log).await;
    let rollout = rollout_row(&rows);
    assert!(
        rollout.state.is(State::Done),
        "alice's press ran: {}",
        describe_queue(&rows)
    );
    for child in children(&rows, rollout) {
        let args: serde_json::Value = serde_json::from_str(&child.args_json)
            .unwrap_or_else(|e| panic!("{e}: {}", describe_queue(&rows)));
        assert_eq!(
            args,
            serde_json::json!({ "version": "1.2.4" }),
            "each target runs with the version only alice could choose: {}",
            describe_queue(&rows)
        );
    }
}
