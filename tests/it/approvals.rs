//! Approvals (docs/design.md §5.5), with the real binary against the emulator: a job of a
//! function with `approvers` waits as 承認待ち and runs only once enough listed people other
//! than its requester approved it; an approver's stop ends it 却下, a wait past
//! `approval_expires` ends it 期限切れ (across a restart: nothing of it is kept locally), and
//! a daemon with approvers refuses to start on a queue anyone can write. Approvals come
//! through `sheetq approve`; the installable trigger's are in `apps_script.rs`.

use std::path::Path;
use std::time::Duration;

use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::State;

use crate::daemon::{binary_config_with, protected_set_up, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// Fast enough to run quickly, still enforced per account as Google does.
const FAST: Quota = Quota::scaled(50);

/// The functions of the tests; each run appends a line to `runs` in the test's directory.
fn catalog(dir: &Path) -> String {
    format!(
        r#"
[commands.deploy]
exec = ["sh", "-c", "echo \"$SHEETQ_JOB_ID\" >> '{runs}'; echo deployed"]

[[functions]]
label = "再起動"
command = "deploy"
approvers = ["lead@example.com", "bob@sre.example.com"]

[[functions]]
label = "本番反映"
command = "deploy"
approvers = ["lead@example.com", "bob@sre.example.com"]
approvals = 2

[[functions]]
label = "期限付き"
command = "deploy"
approvers = ["lead@example.com"]
approval_expires = "4s"

[[functions]]
label = "確認"
command = "deploy"
"#,
        runs = dir.join("runs").display()
    )
}

/// A spreadsheet set up as an operator sets it up (`sheetq init` protects the queue), the
/// daemon's config, and jobs queued by alice: `(function, target)` each.
async fn set_up(
    emu: &Emulator,
    dir: &Path,
    jobs: &[(&str, &str)],
) -> (std::path::PathBuf, Vec<String>) {
    let (config, operator, sheets) = protected_set_up(emu, dir, "vm-approve", &catalog(dir)).await;
    let mut ids = Vec::new();
    for (function, target) in jobs {
        ids.push(
            enqueue(
                sheets.as_ref(),
                &operator,
                target,
                function,
                "deploy",
                "{}",
                "alice@example.com",
            )
            .await,
        );
    }
    (config, ids)
}

async fn awaiting(emu: &Emulator, job: &str, log: &Path) {
    wait_row(
        emu,
        job,
        "the job to await approval",
        WAIT,
        |r| r.state.is(State::AwaitingApproval),
        queue_and_log(emu, log),
    )
    .await;
}

fn out_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_once_approved_by_another_listed_person_and_never_on_its_requesters_or_an_unlisted_ones(
) {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, ids) = set_up(&emu, dir.path(), &[("再起動", "サーバーA")]).await;
    let job = &ids[0];
    let log = dir.path().join("sheetq.log");
    let (daemon, port) = Binary::start_listening(&config, &log);
    awaiting(&emu, job, &log).await;

    let own = run_sheetq(&config, &["approve", job, "--as", "Alice@example.com"]).await;
    assert!(
        !own.status.success() && out_text(&own).contains("the requester's own job"),
        "the requester cannot approve her own job: {own:?}"
    );
    let unlisted = run_sheetq(&config, &["approve", job, "--as", "carol@example.com"]).await;
    assert!(
        !unlisted.status.success() && out_text(&unlisted).contains("not among its approvers"),
        "a person approvers does not list cannot approve: {unlisted:?}"
    );
    assert_eq!(
        row_of(&queue_rows(&emu), job).approvals,
        "",
        "a refused approval writes nothing"
    );

    // Written by hand by someone who may write the protected queue (the owner): the daemon
    // still counts only listed people.
    let row = row_of(&queue_rows(&emu), job).row;
    let forged = format!("carol@example.com 2026/12/04 10:00:00 #{job}\nalice@example.com 2026/12/04 10:00:01 #{job}");
    emu.set_values(
        &format!("'_ジョブキュー'!R{row}"),
        serde_json::json!([[forged]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    wait_for(
        "the panel to say which approvals do not count",
        WAIT,
        || {
            panel_row(&emu, "サーバーA", 8)
                .iter()
                .any(|c| {
                    c.contains("承認待ち (依頼: alice@example.com) 0/1")
                        && c.contains("carol@example.com: 承認者ではありません")
                        && c.contains("alice@example.com: 依頼者本人は承認できません")
                })
                .then_some(())
        },
        || {
            format!(
                "{:?}\n{}",
                panel_row(&emu, "サーバーA", 8),
                queue_and_log(&emu, &log)()
            )
        },
    )
    .await;
    assert!(
        row_of(&queue_rows(&emu), job)
            .state
            .is(State::AwaitingApproval),
        "{}",
        queue_and_log(&emu, &log)()
    );
    assert_eq!(
        lines_in(&dir.path().join("runs")),
        0,
        "nothing ran before an approval that counts"
    );

    let ok = run_sheetq(&config, &["approve", job, "--as", "bob@sre.example.com"]).await;
    assert!(
        ok.status.success() && out_text(&ok).contains("approved by bob@sre.example.com (1/1)"),
        "a listed approver other than the requester approves: {ok:?}"
    );
    let rows = wait_finished_or(&emu, std::slice::from_ref(job), WAIT, || {
        queue_and_log(&emu, &log)()
    })
    .await;
    let done = row_of(&rows, job);
    assert!(
        done.state.is(State::Done) && done.message.contains("deployed"),
        "{}",
        queue_and_log(&emu, &log)()
    );
    assert!(
        done.approvals.contains("bob@sre.example.com "),
        "the approval is on the row: {:?}",
        done.approvals
    );
    assert_eq!(
        lines_in(&dir.path().join("runs")),
        1,
        "the approved job ran once"
    );

    let again = run_sheetq(&config, &["approve", job, "--as", "lead@example.com"]).await;
    assert!(
        !again.status.success() && out_text(&again).contains("not waiting for approval"),
        "a finished job takes no approval: {again:?}"
    );
    let (_, metrics) = http_get(port, "/metrics").await;
    for (outcome, n) in [
        ("requested", 1.0),
        ("approved", 1.0),
        ("refused_not_listed", 1.0),
        ("refused_requester", 1.0),
    ] {
        assert_eq!(
            sample(
                &metrics,
                &format!("sheetq_approvals_total{{outcome=\"{outcome}\"}}")
            ),
            Some(n),
            "{outcome}: {metrics}"
        );
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("job awaits approval")
            && text.contains("job approved")
            && text.contains("an approval does not count"),
        "each step is logged:\n{text}"
    );
    drop(daemon);
    assert_no_quota_refusals(&emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_approvals_keeps_a_job_waiting_and_an_approvers_stop_rejects_it() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, ids) = set_up(
        &emu,
        dir.path(),
        &[("本番反映", "サーバーA"), ("再起動", "サーバーB")],
    )
    .await;
    let (two, rejected) = (&ids[0], &ids[1]);
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    awaiting(&emu, two, &log).await;
    awaiting(&emu, rejected, &log).await;

    let one = run_sheetq(&config, &["approve", two, "--as", "lead@example.com"]).await;
    assert!(
        one.status.success() && out_text(&one).contains("(1/2); it waits for 1 more"),
        "{one:?}"
    );
    wait_for(
        "the panel to count one approval of two",
        WAIT,
        || {
            panel_row(&emu, "サーバーA", 9)
                .iter()
                .any(|c| c.contains("承認待ち (依頼: alice@example.com) 1/2"))
                .then_some(())
        },
        || {
            format!(
                "{:?}\n{}",
                panel_row(&emu, "サーバーA", 9),
                queue_and_log(&emu, &log)()
            )
        },
    )
    .await;

    let reject = run_sheetq(
        &config,
        &["reject", rejected, "--as", "bob@sre.example.com"],
    )
    .await;
    assert!(
        reject.status.success() && out_text(&reject).contains("rejected by bob@sre.example.com"),
        "{reject:?}"
    );
    let rows =
        wait_ended_with_messages(&emu, &[rejected.as_str()], WAIT, queue_and_log(&emu, &log)).await;
    let r = row_of(&rows, rejected);
    assert!(
        r.state.is(State::Rejected)
            && r.message.starts_with("却下: bob@sre.example.com ")
            && r.started_at.is_none(),
        "an approver's stop ends the job 却下, saying who and when, never started: {r:#?}"
    );
    let panel = panel_row(&emu, "サーバーB", 8);
    assert!(
        panel.iter().any(|c| c == "⛔ 却下"),
        "the panel says so: {panel:?}"
    );
    assert!(
        row_of(&queue_rows(&emu), two)
            .state
            .is(State::AwaitingApproval),
        "one approval of two is not enough: {}",
        queue_and_log(&emu, &log)()
    );
    assert_eq!(lines_in(&dir.path().join("runs")), 0, "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_approved_in_time_expires_even_when_its_daemon_restarted_meanwhile() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, ids) = set_up(&emu, dir.path(), &[("期限付き", "サーバーA")]).await;
    let job = &ids[0];
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start(&config, &log);
    awaiting(&emu, job, &log).await;
    drop(daemon);
    // The 4 s run out while no daemon runs; the next one judges by the row and Google's clock.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(row_of(&queue_rows(&emu), job)
        .state
        .is(State::AwaitingApproval));
    let _daemon = Binary::start(&config, &dir.path().join("second.log"));
    let rows =
        wait_ended_with_messages(&emu, &[job.as_str()], WAIT, queue_and_log(&emu, &log)).await;
    let r = row_of(&rows, job);
    assert!(
        r.state.is(State::Expired)
            && r.message
                .contains("期限切れ: 4秒 以内に承認されませんでした (承認 0/1)"),
        "{r:#?}"
    );
    assert_eq!(
        lines_in(&dir.path().join("runs")),
        0,
        "an expired job never runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_approvers_a_daemon_refuses_an_open_queue_where_anyone_could_forge_an_approval() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config_with(&emu, dir.path(), "vm-open", "", &catalog(dir.path()));
    // No `sheetq init`: the queue is open to every editor, who writes a job with an approval.
    let editor = daemon_config(&emu, "editor", dir.path(), &[], "");
    let sheets = client(&emu, &editor).await;
    let job = enqueue(
        sheets.as_ref(),
        &editor,
        "サーバーA",
        "再起動",
        "deploy",
        "{}",
        "mallory@example.com",
    )
    .await;
    let row = row_of(&queue_rows(&emu), &job).row;
    emu.set_values(
        &format!("'_ジョブキュー'!R{row}"),
        serde_json::json!([[format!("lead@example.com 2026/12/04 10:00:00 #{job}")]]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let log = dir.path().join("sheetq.log");
    let mut daemon = Binary::start(&config, &log);
    let deadline = std::time::Instant::now() + WAIT;
    let code = loop {
        if let Some(status) = daemon.exited() {
            break status.code();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not stop: {}",
            queue_and_log(&emu, &log)()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        code,
        Some(2),
        "approvers on an open queue are a setup problem:\n{text}"
    );
    assert!(
        text.contains("approvers") && text.contains("sheetq init"),
        "the error names approvers and the fix:\n{text}"
    );
    assert_eq!(
        lines_in(&dir.path().join("runs")),
        0,
        "the forged approval ran nothing"
    );
    assert!(!row_of(&queue_rows(&emu), &job).state.is_final());
    // `sheetq check` says it before a start: with protect = false sheetq would never protect
    // the queue, nor the approvers' 承認 cells.
    let open = binary_config_with(
        &emu,
        dir.path(),
        "vm-open",
        "protect = false\nintake = \"poll\"\n",
        &catalog(dir.path()),
    );
    let check = out_text(&run_sheetq(&open, &["check"]).await);
    assert!(
        check.contains("have approvers, but protect = false leaves the queue open"),
        "sheetq check names approvers on an open queue:\n{check}"
    );
}

/// Write requests Google counts in `from..` that touch the queue (its ranges, or a row
/// binding on it): a daemon's standalone heartbeat (a write to `_ワーカー` every
/// `heartbeat_interval` whatever the jobs, which panel texts may ride) is no job's cost.
fn writes_since(emu: &Emulator, from: chrono::DateTime<chrono::Utc>) -> usize {
    emu.requests()
        .iter()
        .filter(|r| r.at >= from && r.write && r.status == 200)
        .filter(|r| {
            r.method == "spreadsheets.batchUpdate"
                || r.ranges.iter().any(|x| {
                    x.starts_with("'_ジョブキュー'") || x.starts_with("developerMetadataLookup")
                })
        })
        .count()
}

/// What approvals cost, counted by the emulator: a job waiting for approval costs nothing per
/// poll, and an approved job costs at most four writes more than a job without approvals (the
/// turn to 承認待ち and the turn back to 待機, each a claim pass of the lease's two writes when
/// nothing else rides it), the `approve` command's one write aside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waiting_for_approval_costs_nothing_per_poll_and_an_approval_at_most_four_writes() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, _) = set_up(&emu, dir.path(), &[]).await;
    let operator = daemon_config(&emu, "operator", dir.path(), &[], "");
    let sheets = client(&emu, &operator).await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    // Serving (its start-up writes done) before anything is counted.
    wait_for(
        "the daemon to serve",
        WAIT,
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("daemon started")
                .then_some(())
        },
        queue_and_log(&emu, &log),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let from = chrono::Utc::now();
    let plain = enqueue(
        sheets.as_ref(),
        &operator,
        "サーバーB",
        "確認",
        "deploy",
        "{}",
        "alice@example.com",
    )
    .await;
    wait_ended_with_messages(&emu, &[plain.as_str()], WAIT, queue_and_log(&emu, &log)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let plain_writes = writes_since(&emu, from) - 1;

    let from = chrono::Utc::now();
    let gated = enqueue(
        sheets.as_ref(),
        &operator,
        "サーバーA",
        "再起動",
        "deploy",
        "{}",
        "alice@example.com",
    )
    .await;
    awaiting(&emu, &gated, &log).await;
    // The commit that turned it shows it on the panel, in the same atomic batch; then nothing
    // is written while it waits.
    let panel = panel_row(&emu, "サーバーA", 8);
    assert!(
        panel
            .iter()
            .any(|c| c.starts_with("承認待ち (依頼: alice@example.com) 0/1")),
        "the turn's commit shows the request on the panel: {panel:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let quiet = chrono::Utc::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let while_waiting = writes_since(&emu, quiet);
    let reads_while_waiting = emu
        .requests()
        .iter()
        .filter(|r| r.at >= quiet && !r.write && r.method != "oauth2.token")
        .count();
    let approve = run_sheetq(&config, &["approve", &gated, "--as", "lead@example.com"]).await;
    assert!(approve.status.success(), "{approve:?}");
    wait_ended_with_messages(&emu, &[gated.as_str()], WAIT, queue_and_log(&emu, &log)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let gated_writes = writes_since(&emu, from) - 2;
    println!(
        "writes: plain job {plain_writes}, approved job {gated_writes}; while waiting 3 s: {while_waiting} writes, {reads_while_waiting} reads"
    );
    assert_eq!(
        while_waiting, 0,
        "a job waiting for approval costs no write per poll"
    );
    assert!(
        gated_writes <= plain_writes + 4,
        "an approved job cost {gated_writes} writes, a plain one {plain_writes}: more than the two turns' claim passes"
    );
}
