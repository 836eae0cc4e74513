//! One daemon serving several spreadsheets (`[[spreadsheets]]`): one slot pool and one
//! request budget per service account across them, checked against the emulator's quota,
//! which refuses what Google would.

use std::time::Duration;

use serde_json::json;
use sheetq::config::Config;
use sheetq::daemon::{Observers, RunReport};
use sheetq::emulator::{Emulator, Quota, Seed};
use sheetq::queue::State;
use tokio_util::sync::CancellationToken;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);

/// A config serving the spreadsheets `ids` (labelled s1, s2, …) as worker `worker`, as the
/// emulator's service account, with `slots` slots and an account budget of `per_minute`.
fn fleet_config(
    emu: &Emulator,
    dir: &std::path::Path,
    worker: &str,
    ids: &[&str],
    slots: usize,
    per_minute: u32,
) -> Config {
    let text = fleet_config_text(emu, dir, worker, ids, slots, per_minute);
    Config::parse(&text, "test config", &Default::default())
        .unwrap_or_else(|e| panic!("the test config does not parse: {e}\n{text}"))
}

/// The text of [`fleet_config`], for the binary.
fn fleet_config_text(
    emu: &Emulator,
    dir: &std::path::Path,
    worker: &str,
    ids: &[&str],
    slots: usize,
    per_minute: u32,
) -> String {
    let key = crate::support::place_key(emu, dir);
    let mut text = format!(
        "api_base_url = {:?}\nworker_id = {worker:?}\nstate_dir = {:?}\ncredentials = {:?}\nslots = {slots}\npoll_interval = \"100ms\"\nheartbeat_interval = \"1s\"\ndead_after = \"30s\"\nrequests_per_minute = {per_minute}\n[commands.sleep]\nbuiltin = \"sleep\"\n",
        emu.base_url(),
        dir.join(worker).display().to_string(),
        key.display().to_string(),
    );
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!(
            "[[spreadsheets]]\nlabel = \"s{}\"\nspreadsheet_id = {id:?}\n",
            i + 1
        ));
    }
    text
}

/// Starts `sheetq run` for `config` in this process, as the binary does.
async fn serve(
    config: &Config,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<Result<RunReport, sheetq::daemon::DaemonError>> {
    let spreadsheets = sheetq::setup::spreadsheets(config.each_spreadsheet(), false)
        .await
        .unwrap_or_else(|e| panic!("cannot serve the config's spreadsheets: {e:#}"));
    tokio::spawn(sheetq::daemon::run_spreadsheets(
        spreadsheets,
        config.slots,
        shutdown.clone(),
        Observers::default(),
    ))
}

/// Enqueues `n` two-second jobs on spreadsheet `id`, as another account (the tester's).
async fn press(
    emu: &Emulator,
    config: &Config,
    id: &str,
    targets: &[&str],
    n: usize,
) -> Vec<String> {
    let one = config.spreadsheet(id).unwrap_or_else(|e| panic!("{e}"));
    let sheets = client_as(emu, &one, "tester").await;
    let mut ids = Vec::new();
    for i in 0..n {
        let target = targets[i % targets.len()];
        ids.push(
            enqueue(
                sheets.as_ref(),
                &one,
                target,
                "動作確認 (2秒)",
                "sleep",
                r#"{"seconds":1}"#,
                "",
            )
            .await,
        );
    }
    ids
}

async fn wait_all_done(emu: &Emulator, id: &str, jobs: &[String]) {
    wait_for(
        &format!("{} jobs of spreadsheet {id} to finish", jobs.len()),
        WAIT,
        || {
            let rows = queue_rows_in(emu, id);
            jobs.iter()
                .all(|j| {
                    rows.iter()
                        .any(|r| &r.job_id == j && r.state.is(State::Done))
                })
                .then_some(())
        },
        || describe_queue(&queue_rows_in(emu, id)),
    )
    .await;
}

/// Checks, on the emulator's own log of `account`'s requests, that no stretch of time held
/// more reads (or writes) than a budget of `per_minute` lets out: its burst of 10 plus the
/// rate over that stretch, and a few more for requests that arrive closer together than
/// they were sent. An upper bound: a slow machine only sends fewer.
fn assert_within_budget(emu: &Emulator, account: &str, per_minute: u32) {
    let epoch = chrono::DateTime::<chrono::Utc>::MIN_UTC;
    assert_within_budget_since(emu, account, per_minute, 10, epoch);
}

/// [`assert_within_budget`] for the requests from `since` on, with bursts of `burst`.
fn assert_within_budget_since(
    emu: &Emulator,
    account: &str,
    per_minute: u32,
    burst: u32,
    since: chrono::DateTime<chrono::Utc>,
) {
    let requests = emu.requests();
    for write in [false, true] {
        let at: Vec<_> = requests
            .iter()
            .filter(|r| r.user == account && r.write == write && r.at >= since)
            .map(|r| r.at)
            .collect();
        for i in 0..at.len() {
            for j in i..at.len() {
                let secs = (at[j] - at[i]).num_milliseconds() as f64 / 1000.0;
                let allowed = f64::from(burst) + 3.0 + f64::from(per_minute) * secs / 60.0;
                let sent = (j - i + 1) as f64;
                assert!(
                    sent <= allowed,
                    "{account} sent {sent} {} in {secs:.1} s, more than one budget of {per_minute} a minute lets out ({allowed:.0}): the spreadsheets do not share the account's budget",
                    if write { "writes" } else { "reads" }
                );
            }
        }
    }
}

#[tokio::test]
async fn one_daemon_serves_three_spreadsheets_within_one_accounts_quota() {
    // 300 reads and 300 writes a minute per account; the daemon's budget is 250 of each,
    // for all three spreadsheets together (each alone polls ten times a second).
    let emu = start_with_quota(Quota::scaled(5)).await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
        emu.add_spreadsheet(Seed::Demo),
    ];
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let config = fleet_config(&emu, dir.path(), "d1", &id_refs, 4, 250);
    let shutdown = CancellationToken::new();
    let daemon = serve(&config, &shutdown).await;
    let mut jobs = Vec::new();
    for id in &ids {
        jobs.push(
            press(
                &emu,
                &config,
                id,
                &["サーバーA", "サーバーB", "サーバーC"],
                4,
            )
            .await,
        );
    }
    for (id, j) in ids.iter().zip(&jobs) {
        wait_all_done(&emu, id, j).await;
    }
    shutdown.cancel();
    let report = daemon
        .await
        .unwrap_or_else(|e| panic!("the daemon panicked: {e}"))
        .unwrap_or_else(|e| panic!("the daemon failed: {e}"));
    assert_eq!(report.jobs_finished, 12, "{report:?}");
    assert_no_quota_refusals(&emu);
    assert_within_budget(&emu, &Emulator::account("sheetq-emulator"), 250);
    for id in &ids {
        let beats = emu
            .values_in(id, "'_ワーカー'!A2:A")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(
            beats.iter().filter(|r| r == &&vec![json!("d1")]).count() == 1,
            "spreadsheet {id} has one heartbeat row of the daemon: {beats:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemon_processes_serving_overlapping_spreadsheets_split_their_accounts_budget() {
    // p1 serves s1 and s2, p2 serves s2 and s3: two `sheetq run` processes, both as one
    // service account with a budget of 250 a minute each. They see each other on s2, so
    // each takes half, and the account as a whole stays within one budget.
    let emu = start_with_quota(Quota::scaled(5)).await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
        emu.add_spreadsheet(Seed::Demo),
    ];
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let (mut daemons, mut logged) = (Vec::new(), Vec::new());
    let port = free_port();
    for (worker, served) in [("p1", [&ids[0], &ids[1]]), ("p2", [&ids[1], &ids[2]])] {
        let text = fleet_config_text(
            &emu,
            dir.path(),
            worker,
            &served.map(String::as_str),
            2,
            250,
        );
        let path = dir.path().join(format!("{worker}.toml"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {worker}'s config: {e}"));
        let log = dir.path().join(format!("{worker}.log"));
        let listen = format!("127.0.0.1:{port}");
        let args: &[&str] = if worker == "p1" {
            &["--metrics-listen", &listen]
        } else {
            &[]
        };
        daemons.push(crate::daemon::Binary::start_with(&path, &log, args));
        logged.push(log);
    }
    let logs = || {
        logged
            .iter()
            .map(|log| std::fs::read_to_string(log).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    // Both heartbeats on the shared spreadsheet: from then on each knows of the other.
    let both_seen = wait_for(
        "both daemons' heartbeats on the shared spreadsheet",
        WAIT,
        || {
            let beats = emu.values_in(&ids[1], "'_ワーカー'!A2:A").ok()?;
            let has = |w: &str| beats.iter().any(|r| r == &vec![json!(w)]);
            (has("p1") && has("p2")).then(chrono::Utc::now)
        },
        logs,
    )
    .await;
    let presser = fleet_config(
        &emu,
        dir.path(),
        "presser",
        &ids.each_ref().map(String::as_str),
        1,
        250,
    );
    let mut jobs = Vec::new();
    for id in &ids {
        jobs.push(press(&emu, &presser, id, &["サーバーA", "サーバーB"], 3).await);
    }
    for (id, j) in ids.iter().zip(&jobs) {
        wait_all_done(&emu, id, j).await;
    }
    // Ten seconds more of polling, all of it shared.
    tokio::time::sleep(Duration::from_secs(10)).await;

    // p1's endpoint counts each of its spreadsheets apart, by label; its loops all turn.
    let (code, metrics) = http_get(port, "/metrics").await;
    assert_eq!(code, 200, "GET /metrics of p1: {metrics}\n{}", logs());
    assert!(
        metrics.contains(r#"sheetq_jobs_finished_total{spreadsheet="s1",outcome="done"} 3"#),
        "p1 alone serves s1 and ran its three jobs:\n{metrics}"
    );
    assert!(
        metrics.contains(r#"sheetq_api_requests_total{spreadsheet="s2",method="values.batchGetByDataFilter",status="ok"}"#),
        "p1's polls of s2 are counted under s2:\n{metrics}"
    );
    assert_eq!(http_get(port, "/livez").await, (200, "ok\n".to_string()));
    for daemon in &mut daemons {
        assert_eq!(daemon.exited(), None, "a daemon exited:\n{}", logs());
    }
    assert_no_quota_refusals(&emu);
    // A second after both were seen, every stretch of their requests fits one budget (plus
    // the second burst: each daemon's bucket may have been full when the split came).
    let since = both_seen + chrono::Duration::seconds(1);
    assert_within_budget_since(&emu, &Emulator::account("sheetq-emulator"), 250, 20, since);
}

/// The real binary serving three spreadsheets on a budget too small for their polls: the
/// polls slow down to fit it (Google refuses nothing) and the daemon says so. The sample
/// takes a minute, so `.ci/run` runs this beside the other long tests.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "takes over a minute; .ci/run runs it with --ignored"]
async fn a_budget_too_small_for_three_spreadsheets_slows_their_polls_and_says_so() {
    use std::io::BufRead as _;
    use std::os::unix::process::CommandExt as _;

    let emu = start_emulator().await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
        emu.add_spreadsheet(Seed::Demo),
    ];
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    // Three spreadsheets polled every 100 ms want 1800 reads a minute; the budget is 30.
    let config = fleet_config(&emu, dir.path(), "slow", &id_refs, 2, 30);
    let path = dir.path().join("sheetq.toml");
    let mut text = format!(
        "api_base_url = {:?}\nworker_id = \"slow\"\nstate_dir = {:?}\ncredentials = {:?}\npoll_interval = \"100ms\"\nrequests_per_minute = 30\n[commands.sleep]\nbuiltin = \"sleep\"\n",
        emu.base_url(),
        dir.path().join("state").display().to_string(),
        config.credentials.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
    );
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!(
            "[[spreadsheets]]\nlabel = \"s{i}\"\nspreadsheet_id = {id:?}\n"
        ));
    }
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write config: {e}"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"))
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env("SHEETQ_LOG", "sheetq=info")
        .args(["run", "--config"])
        .arg(&path)
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start sheetq run: {e}"));
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let said = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("polls are slowed by the account's request budget"))
    });
    let said = tokio::time::timeout(Duration::from_secs(150), said).await;
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = child.wait();
    let line = said
        .unwrap_or_else(|_| panic!("the daemon never said its polls were slowed by the budget"))
        .unwrap_or_else(|e| panic!("reading the log: {e}"))
        .unwrap_or_else(|| panic!("the daemon's log ended without saying so"));
    assert!(line.contains("requests_per_minute=30"), "{line}");
    assert_no_quota_refusals(&emu);
    let polls = emu.count("spreadsheets.values.batchGetByDataFilter");
    assert!(
        polls < 3 * 600,
        "{polls} polls: the budget, not poll_interval, set their pace"
    );
}

#[tokio::test]
async fn a_quiet_spreadsheet_is_polled_at_most_every_idle_poll_interval_and_still_runs_a_press() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let busy = emu.spreadsheet_id().to_string();
    let quiet = emu.add_spreadsheet(Seed::Demo);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let base = fleet_config(&emu, dir.path(), "d1", &[&busy, &quiet], 4, 1000);
    let config = Config {
        idle_poll_interval: Duration::from_secs(1),
        ..base
    };
    let shutdown = CancellationToken::new();
    let daemon = serve(&config, &shutdown).await;
    // Polls space out to a tenth of the quiet time: after ten seconds, once a second.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let from = chrono::Utc::now();
    let jobs = press(
        &emu,
        &config,
        &busy,
        &["サーバーA", "サーバーB", "サーバーC"],
        6,
    )
    .await;
    wait_all_done(&emu, &busy, &jobs).await;
    let to = chrono::Utc::now();
    let polls_of = |id: &str| {
        emu.requests()
            .iter()
            .filter(|r| {
                r.spreadsheet == id
                    && r.method == "spreadsheets.values.batchGetByDataFilter"
                    && r.at >= from
                    && r.at <= to
            })
            .count()
    };
    let secs = (to - from).num_milliseconds() as f64 / 1000.0;
    let quiet_polls = polls_of(&quiet);
    assert!(
        quiet_polls as f64 <= secs + 2.0,
        "the quiet spreadsheet was polled {quiet_polls} times in {secs:.1} s, more than once a second"
    );
    assert!(
        polls_of(&busy) > quiet_polls,
        "the busy one is polled more than the quiet one"
    );
    // A press on the quiet one is seen at its next poll and runs.
    let late = press(&emu, &config, &quiet, &["サーバーA"], 1).await;
    wait_all_done(&emu, &quiet, &late).await;
    shutdown.cancel();
    daemon
        .await
        .unwrap_or_else(|e| panic!("the daemon panicked: {e}"))
        .unwrap_or_else(|e| panic!("the daemon failed: {e}"));
    assert_no_quota_refusals(&emu);
}

/// SIGHUP with a spreadsheet's own function naming a command the config lacks: refused as a
/// start would be, naming the spreadsheet, and the config in force stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_whose_spreadsheet_function_names_no_command_is_refused_naming_it() {
    let emu = start_emulator().await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
    ];
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let served = [ids[0].as_str(), ids[1].as_str()];
    let text = fleet_config_text(&emu, dir.path(), "hup", &served, 2, 50);
    let path = dir.path().join("sheetq.toml");
    std::fs::write(&path, &text).unwrap_or_else(|e| panic!("write config: {e}"));
    let log = dir.path().join("sheetq.log");
    let show = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut daemon = crate::daemon::Binary::start(&path, &log);
    wait_for(
        "both spreadsheets' heartbeats",
        WAIT,
        || {
            ids.iter()
                .all(|id| {
                    emu.values_in(id, "'_ワーカー'!A2:A")
                        .is_ok_and(|b| b.iter().any(|r| r == &vec![json!("hup")]))
                })
                .then_some(())
        },
        show,
    )
    .await;
    let broken =
        format!("{text}[[spreadsheets.functions]]\nlabel = \"承認\"\ncommand = \"approve\"\n");
    std::fs::write(&path, broken).unwrap_or_else(|e| panic!("write config: {e}"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap_or_else(|e| panic!("SIGHUP: {e}"));
    let refusal = wait_for(
        "the daemon to refuse the reload",
        WAIT,
        || {
            // The refusal's line and the problems listed under it.
            let all = show();
            let lines: Vec<&str> = all.lines().collect();
            let at = lines.iter().position(|l| l.contains("was not reloaded"))?;
            Some(lines[at..lines.len().min(at + 4)].join("\n"))
        },
        show,
    )
    .await;
    assert!(
        refusal.contains("spreadsheet \"s2\""),
        "the refusal names the spreadsheet: {refusal}"
    );
    assert!(refusal.contains("approve"), "and the command: {refusal}");
    assert!(
        !show().contains("reloaded the config"),
        "nothing of it was taken up:\n{}",
        show()
    );
    assert_eq!(daemon.exited(), None, "the daemon runs on:\n{}", show());
}

/// Three `sheetq run` processes on one account whose spreadsheets overlap only in a chain
/// (p1 on s1 and s2, p2 on s2 and s3, p3 on s3 and s4): p1 and p3 never read each other's
/// heartbeats, but hear of each other through p2's, so all three split the budget three
/// ways and the account stays within one budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_overlapping_only_through_a_third_split_their_accounts_budget_three_ways() {
    let emu = start_with_quota(Quota::scaled(5)).await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
        emu.add_spreadsheet(Seed::Demo),
        emu.add_spreadsheet(Seed::Demo),
    ];
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let (mut daemons, mut logged) = (Vec::new(), Vec::new());
    for (i, worker) in ["p1", "p2", "p3"].into_iter().enumerate() {
        let served = [ids[i].as_str(), ids[i + 1].as_str()];
        let text = fleet_config_text(&emu, dir.path(), worker, &served, 2, 250);
        let path = dir.path().join(format!("{worker}.toml"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {worker}'s config: {e}"));
        let log = dir.path().join(format!("{worker}.log"));
        daemons.push(crate::daemon::Binary::start(&path, &log));
        logged.push(log);
    }
    let log_of = |i: usize| std::fs::read_to_string(&logged[i]).unwrap_or_default();
    let logs = || (0..3).map(log_of).collect::<Vec<_>>().join("\n---\n");
    let three_ways = "now shared by 3 live daemon(s)";
    let converged = wait_for(
        "every daemon to split the account three ways",
        WAIT,
        || {
            (0..3)
                .all(|i| log_of(i).contains(three_ways))
                .then(chrono::Utc::now)
        },
        logs,
    )
    .await;
    // p1's heartbeat on s1 says, from its next write on, how it knows of p3: through p2,
    // two hops away.
    let p1_lists = || {
        let rows = emu.values_in(&ids[0], "'_ワーカー'!A3:J").ok()?;
        let cell = rows
            .iter()
            .find(|r| r.first() == Some(&json!("p1")))?
            .get(9)?
            .as_str()?
            .to_string();
        serde_json::from_str::<Vec<sheetq::workers::Sharer>>(&cell).ok()
    };
    wait_for(
        "p1's heartbeat to list p3, heard of through p2",
        WAIT,
        || {
            p1_lists()?
                .iter()
                .any(|s| s.worker_id == "p3" && s.hops == 2 && s.via == "p2")
                .then_some(())
        },
        || format!("p1 lists {:?}", p1_lists()),
    )
    .await;
    // Twenty seconds of all three polling their spreadsheets as fast as the budget lets them.
    tokio::time::sleep(Duration::from_secs(20)).await;
    for daemon in &mut daemons {
        assert_eq!(daemon.exited(), None, "a daemon exited:\n{}", logs());
    }
    assert_no_quota_refusals(&emu);
    let since = converged + chrono::Duration::seconds(2);
    assert_within_budget_since(&emu, &Emulator::account("sheetq-emulator"), 250, 20, since);
}

/// A deployment's first minute, as the README orders it: `sheetq init` on three
/// spreadsheets of one service account, `sheetq run` right after, and `sheetq status` while
/// it runs, all at Google's quota and the default budget, with polls every 250 ms, so the
/// daemon spends its whole budget. The one-shot commands and the daemon keep to one
/// record of the account's requests, so Google refuses none of them (without it, `init`'s
/// reads and `status`'s would come on top of a daemon's full minute), and every spreadsheet
/// is served within 30 s of `run`. The test looks through a second account, whose quota is
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_started_right_after_init_meets_no_429_and_serves_every_spreadsheet_within_30_s() {
    let emu = start_emulator().await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
        emu.add_spreadsheet(Seed::Demo),
    ];
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let key = place_key(&emu, dir.path());
    let mut text = format!(
        "api_base_url = {:?}\nworker_id = \"cold\"\nstate_dir = {:?}\ncredentials = {:?}\nintake = \"poll\"\npoll_interval = \"250ms\"\nidle_poll_interval = \"250ms\"\n[commands.sleep]\nbuiltin = \"sleep\"\n",
        emu.base_url(),
        dir.path().join("state").display().to_string(),
        key.display().to_string(),
    );
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!(
            "[[spreadsheets]]\nlabel = \"s{}\"\nspreadsheet_id = {id:?}\n",
            i + 1
        ));
    }
    let config = dir.path().join("sheetq.toml");
    std::fs::write(&config, text).unwrap_or_else(|e| panic!("write the config: {e}"));
    let one_shot = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"))
            .args(args)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap_or_else(|e| panic!("run sheetq {args:?}: {e}"));
        assert!(
            out.status.success(),
            "sheetq {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    one_shot(&["init"]);

    let log = dir.path().join("daemon.log");
    let mut daemon = crate::daemon::Binary::start(&config, &log);
    let started = std::time::Instant::now();
    let looker = hub_for(&emu, "looker").await;
    let mut serving: Vec<Option<Duration>> = vec![None; ids.len()];
    while serving.iter().any(Option::is_none) && started.elapsed() < Duration::from_secs(90) {
        for (i, id) in ids.iter().enumerate() {
            if serving[i].is_some() {
                continue;
            }
            let read = looker
                .spreadsheets()
                .values_get(id, "'_ワーカー'!A3:A")
                .doit()
                .await;
            let rows = read.map(|(_, v)| v.values.unwrap_or_default());
            if rows.is_ok_and(|rows| rows.iter().any(|r| r.first() == Some(&json!("cold")))) {
                serving[i] = Some(started.elapsed());
            }
        }
        assert_eq!(daemon.exited(), None, "the daemon stopped: {}", read(&log));
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(
        serving.iter().all(|s| s.is_some_and(|s| s <= Duration::from_secs(30))),
        "every spreadsheet should be served within 30 s of `run`; heartbeats came after {serving:?}:\n{}",
        read(&log)
    );
    // A person asks how things stand while the daemon polls as fast as its budget lets it,
    // and the minute that began with `init` runs out: by then, the daemon alone would
    // have spent the account's 60 reads.
    tokio::time::sleep(Duration::from_secs(40).saturating_sub(started.elapsed())).await;
    one_shot(&["status"]);
    tokio::time::sleep(Duration::from_secs(65).saturating_sub(started.elapsed())).await;
    let refused = emu.quota_refused();
    assert!(
        !refused.contains_key(&Emulator::account("sheetq-emulator")),
        "Google's quota refused requests of the account that `init`, `run` and `status` share: {refused:?}\n{}",
        read(&log)
    );
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spreadsheet_a_person_made_unusable_is_held_off_alone_and_the_others_keep_running() {
    let emu = start_with_quota(Quota::scaled(5)).await;
    let ids = [
        emu.spreadsheet_id().to_string(),
        emu.add_spreadsheet(Seed::Demo),
    ];
    // The owner of s2 protects its `_ワーカー` for themselves: every heartbeat and claim of
    // the daemon there is refused.
    let token = emu.person_token(sheetq::emulator::DEFAULT_OWNER);
    let (status, reply) = raw(
        &emu,
        "POST",
        &format!("v4/spreadsheets/{}:batchUpdate", ids[1]),
        Some(
            json!({ "requests": [{ "addProtectedRange": { "protectedRange": {
            "range": { "sheetId": sheetq::emulator::seed::WORKER_SHEET_ID },
            "editors": { "users": [sheetq::emulator::DEFAULT_OWNER] } } } }] }),
        ),
        Some(&token),
    )
    .await;
    assert_eq!(status, 200, "the owner protects s2's _ワーカー: {reply}");
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let config = fleet_config(&emu, dir.path(), "d1", &id_refs, 2, 250);
    let shutdown = CancellationToken::new();
    let daemon = serve(&config, &shutdown).await;
    let jobs = press(&emu, &config, &ids[0], &["サーバーA", "サーバーB"], 3).await;
    wait_all_done(&emu, &ids[0], &jobs).await;
    assert!(
        !daemon.is_finished(),
        "the process serves s1 while s2 is held off: {:?}",
        if daemon.is_finished() {
            Some(daemon.await)
        } else {
            None
        }
    );
    shutdown.cancel();
    let report = daemon
        .await
        .unwrap_or_else(|e| panic!("the daemon panicked: {e}"))
        .unwrap_or_else(|e| panic!("a spreadsheet held off ends nothing: {e}"));
    assert_eq!(report.jobs_finished, 3, "{report:?}");
}
