//! The command line as an operator meets it: the demo's table, `check` on a broken sheet,
//! and a config with several mistakes. Runs the real `sheetq` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::json;

use crate::support;

fn sheetq() -> Command {
    let mut cmd = Command::cargo_bin("sheetq").unwrap_or_else(|e| panic!("sheetq binary: {e}"));
    cmd.env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .env("SHEETQ_LOG", "warn");
    cmd
}

/// A row of the demo's closing table: (target, worker, start, end, state).
fn table_rows(stdout: &str) -> Vec<(String, String, String, String, String)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("target "))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            assert!(cols.len() >= 7, "a table row has at least 7 columns: {l:?}");
            // target, function, requester, worker, start, end, state, [message]
            (
                cols[0].into(),
                cols[3].into(),
                cols[4].into(),
                cols[5].into(),
                cols[6].into(),
            )
        })
        .collect()
}

/// What `sheetq demo ARGS` printed; it must have succeeded.
fn demo(args: &[&str]) -> String {
    let out = sheetq()
        .arg("demo")
        .args(args)
        .output()
        .expect("run sheetq demo");
    assert!(
        out.status.success(),
        "demo {args:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn demo_of_two_spreadsheets_runs_each_ones_presses_with_daemons_serving_both() {
    let stdout = demo(&["--spreadsheets", "2"]);
    let (first, second) = stdout
        .split_once("\n== 承認ボタン\n\n")
        .unwrap_or_else(|| panic!("a table under each spreadsheet's heading:\n{stdout}"));
    let (_, first) = first
        .split_once("\n== 実行パネル\n\n")
        .unwrap_or_else(|| panic!("実行パネル's table:\n{stdout}"));
    let (run, approve) = (table_rows(first), table_rows(second));
    assert_eq!(run.len(), 5, "実行パネル's five presses:\n{stdout}");
    assert_eq!(approve.len(), 2, "承認ボタン's two presses:\n{stdout}");
    assert!(
        run.iter()
            .chain(&approve)
            .all(|r| r.4 == "完了" || r.4 == "エラー"),
        "every job ended:\n{stdout}"
    );
    let (a, b) = (&approve[0], &approve[1]);
    assert!(
        b.2 >= a.3 || a.2 >= b.3,
        "承認ボタン's two jobs on サーバーA ran one after the other:\n{stdout}"
    );
    assert!(
        stdout.contains(" 0 refused by Google's quota"),
        "two spreadsheets per daemon stay inside the quota:\n{stdout}"
    );
    let bad = sheetq()
        .args(["demo", "--spreadsheets", "3"])
        .output()
        .expect("run sheetq demo --spreadsheets 3");
    assert_eq!(bad.status.code(), Some(2), "one or two, as a bad argument");
}

#[test]
fn demo_shows_a_serialised_same_target_pair_and_overlapping_different_targets() {
    let stdout = demo(&[]);
    let rows = table_rows(&stdout);
    assert_eq!(rows.len(), 5, "five presses, five rows:\n{stdout}");
    assert!(
        stdout.contains(" 0 refused by Google's quota"),
        "the demo's daemons stay inside the quota:\n{stdout}"
    );
    let a: Vec<_> = rows.iter().filter(|r| r.0 == "サーバーA").collect();
    assert_eq!(a.len(), 2, "two jobs on サーバーA:\n{stdout}");
    let (first, second) = if a[0].2 <= a[1].2 {
        (a[0], a[1])
    } else {
        (a[1], a[0])
    };
    assert!(
        second.2 >= first.3,
        "same target must run serially: second starts {} before first ends {}\n{stdout}",
        second.2,
        first.3
    );
    let b = rows
        .iter()
        .find(|r| r.0 == "サーバーB")
        .expect("a サーバーB row");
    assert!(
        b.2 < first.3 && first.2 < b.3,
        "different targets should overlap: A {}–{} vs B {}–{}\n{stdout}",
        first.2,
        first.3,
        b.2,
        b.3
    );
    assert_ne!(b.1, first.1, "overlapping jobs hold different worker slots");
    assert!(
        rows.iter().any(|r| r.4 == "エラー"),
        "the unconfigured command ends as エラー:\n{stdout}"
    );
    assert_eq!(rows.iter().filter(|r| r.4 == "完了").count(), 4, "{stdout}");
    let panels = stdout.split("On the panels:").nth(1).unwrap_or("");
    assert_eq!(
        panels.matches("✅ 完了").count(),
        4,
        "the panel rows show the results:\n{stdout}"
    );
    assert_eq!(
        panels.matches("❌ エラー").count(),
        1,
        "the failing press shows on its panel:\n{stdout}"
    );
}

/// Runs `sheetq ARGS --config CONFIG` off the async runtime.
fn with_config(config: &Path, args: Vec<String>) -> tokio::task::JoinHandle<std::process::Output> {
    let config = config.to_path_buf();
    tokio::task::spawn_blocking(move || {
        sheetq()
            .args(&args)
            .arg("--config")
            .arg(&config)
            .output()
            .expect("run sheetq")
    })
}

fn write_config(dir: &Path, emu: &sheetq::emulator::Emulator, extra: &str) -> std::path::PathBuf {
    let key = dir.join("key.json");
    std::fs::write(&key, emu.credentials_json()).expect("write key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod key");
    }
    let config = dir.join("sheetq.toml");
    std::fs::write(
        &config,
        format!(
            "spreadsheet_id = \"{}\"\ncredentials = \"{}\"\napi_base_url = \"{}\"\nstate_dir = \"{}\"\n{extra}\n[commands.sleep]\nbuiltin = \"sleep\"\n",
            emu.spreadsheet_id(),
            key.display(),
            emu.base_url(),
            dir.join("state").display()
        ),
    )
    .expect("write config");
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn check_names_a_missing_header_and_exits_non_zero() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "");
    // A person renames the ワーカー header (column P).
    emu.set_values("'_ジョブキュー'!P1", json!([["worker?"]]), false)
        .expect("edit the header");
    let out = tokio::task::spawn_blocking(move || {
        sheetq().arg("check").arg("--config").arg(&config).output()
    })
    .await
    .expect("join")
    .expect("run sheetq check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "check must exit 3 on problems; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("\"ワーカー\""),
        "the missing header is named:\n{stderr}"
    );
    assert!(
        stderr.contains("worker?"),
        "what was found is listed:\n{stderr}"
    );
}

async fn run_check(config: PathBuf) -> std::process::Output {
    tokio::task::spawn_blocking(move || sheetq().arg("check").arg("--config").arg(&config).output())
        .await
        .expect("join")
        .expect("run sheetq check")
}

#[tokio::test(flavor = "multi_thread")]
async fn check_on_the_demo_spreadsheet_names_only_its_deliberately_unconfigured_function() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "");
    // The seeded spreadsheet as sheetq leaves it: its sheets and panels protected. With no
    // [[functions]] in the config, the sync leaves the panels' tables as they are.
    for args in [&["init"][..], &["panels", "sync"][..]] {
        let config = config.clone();
        let out = tokio::task::spawn_blocking(move || {
            sheetq().args(args).arg("--config").arg(&config).output()
        })
        .await
        .expect("join")
        .expect("run sheetq");
        assert!(
            out.status.success(),
            "sheetq {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = run_check(config).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("  - ")).count(),
        3,
        "one problem per panel, the 未設定の機能 row:\n{stderr}"
    );
    assert_eq!(
        stderr
            .matches("(\"未設定の機能\"): command \"broken\" is not configured")
            .count(),
        3,
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn check_names_panels_older_than_the_config_and_programs_missing_here() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = r#"
[[functions]]
label = "動作確認 (2秒)"
command = "sleep"
args = { seconds = 2 }

[commands.report]
exec = ["/nonexistent/report"]
workdir = "/nonexistent/work"
[commands.broken]
builtin = "echo"
"#;
    let config = write_config(dir.path(), &emu, extra);
    let out = run_check(config.clone()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    for expected in [
        "markers, header): サーバーA, サーバーB, サーバーC; run `sheetq panels sync`",
        "commands.report: program \"/nonexistent/report\" does not exist on this machine",
        "commands.report: workdir /nonexistent/work is not a directory",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }

    // The sync the message asks for, from the command line: three requests, then clean.
    let sync = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            sheetq()
                .args(["panels", "sync", "--config"])
                .arg(&config)
                .output()
        })
        .await
        .expect("join")
        .expect("run sheetq panels sync")
    };
    let stdout = String::from_utf8_lossy(&sync.stdout);
    assert!(
        sync.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&sync.stderr)
    );
    assert!(
        stdout.contains("updated panels: サーバーA, サーバーB, サーバーC"),
        "{stdout}"
    );
    assert!(stdout.contains("3 API requests"), "{stdout}");
    let stderr = String::from_utf8_lossy(&run_check(config).await.stderr).to_string();
    assert!(!stderr.contains("panels that differ"), "{stderr}");
    assert!(
        !stderr.contains("未設定の機能"),
        "the dropped function's rows are gone: {stderr}"
    );
}

#[test]
fn a_bad_config_is_one_message_listing_each_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("sheetq.toml");
    std::fs::write(
        &config,
        "slots = 0\npoll_interval = \"soon\"\nintake = \"push\"\n[commands.report]\nexec = []\n",
    )
    .expect("write config");
    let out = sheetq()
        .arg("check")
        .arg("--config")
        .arg(&config)
        .output()
        .expect("run sheetq check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad config exits 2:\n{stderr}"
    );
    for expected in [
        "spreadsheet_id is required",
        "slots = 0",
        "poll_interval = \"soon\"",
        "intake = \"push\"",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    assert_eq!(
        stderr.matches("sheetq:").count(),
        1,
        "one message, not one per problem:\n{stderr}"
    );
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        "run", "demo", "emulator", "init", "check", "status", "enqueue", "panels",
    ] {
        let out = sheetq().args([sub, "--help"]).output().expect("run --help");
        assert!(out.status.success(), "{sub} --help failed");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{sub} --help prints usage"
        );
    }
}

/// `sheetq run 2>&1 | head -1`: the log reader goes away after one line. The daemon must go on
/// (a log line it cannot write is dropped, never a panic) and still stop cleanly on SIGTERM.
/// Its metrics endpoint is given a host name, not an IP.
#[tokio::test(flavor = "multi_thread")]
async fn a_daemon_whose_log_reader_went_away_keeps_running_and_stops_on_sigterm() {
    use std::io::BufRead;
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = write_config(
        dir.path(),
        &emu,
        "worker_id = \"pipe-1\"\npoll_interval = \"200ms\"\nrequests_per_minute = 50",
    );
    let mut child = sheetq()
        .env("SHEETQ_LOG", "debug")
        .args(["run", "--metrics-listen", "localhost:0", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start sheetq run: {e}"));
    {
        let stderr = child
            .stderr
            .take()
            .unwrap_or_else(|| panic!("no stderr pipe"));
        let mut first = String::new();
        std::io::BufReader::new(stderr)
            .read_line(&mut first)
            .unwrap_or_else(|e| panic!("read the first log line: {e}"));
        assert!(!first.is_empty(), "the daemon logged nothing");
        assert!(
            !first.contains('\u{1b}'),
            "no colour codes when stderr is not a terminal: {first:?}"
        );
        // The reader is dropped here: every later log line meets a closed pipe.
    }
    let polls = "spreadsheets.values.batchGetByDataFilter";
    let before = emu.count(polls);
    support::wait_for(
        "the daemon to keep polling with nobody reading its log",
        std::time::Duration::from_secs(30),
        || (emu.count(polls) >= before + 3).then_some(()),
        || format!("{:?}", emu.counters()),
    )
    .await;
    assert!(
        child.try_wait().ok().flatten().is_none(),
        "the daemon stopped once its log reader went away: {:?}",
        child.try_wait()
    );
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)
        .unwrap_or_else(|e| panic!("SIGTERM: {e}"));
    let status = support::wait_for(
        "the daemon to stop after SIGTERM",
        std::time::Duration::from_secs(30),
        || child.try_wait().ok().flatten(),
        || "still running".to_string(),
    )
    .await;
    assert_eq!(
        status.code(),
        Some(0),
        "a daemon that could not write its log must still stop cleanly on SIGTERM: {status:?}"
    );
}

/// A person waits on a one-shot command: when the API keeps failing, `status` gives up after
/// three attempts, not the daemon's seven.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_command_gives_up_after_a_few_attempts() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = write_config(dir.path(), &emu, "");
    emu.add_fault(sheetq::emulator::FaultRule {
        method: Some("spreadsheets.get".into()),
        fault: sheetq::emulator::Fault::Status(503),
        remaining: None,
        probability: None,
        user: None,
        body_contains: None,
    });
    let out = tokio::task::spawn_blocking(move || {
        sheetq()
            .args(["status", "--config"])
            .arg(&config)
            .output()
            .unwrap_or_else(|e| panic!("run sheetq status: {e}"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !out.status.success(),
        "status cannot succeed while the API fails"
    );
    assert_eq!(
        emu.count("spreadsheets.get"),
        3,
        "three attempts; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = sheetq()
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("sheetq --version: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with(&format!("sheetq {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    // The test binary is built with the default features: the emulator is named.
    assert!(
        text.trim_end().ends_with("; features: emulator)"),
        "--version names the cargo features: {text}"
    );
}

/// `enqueue` refuses what the daemon would refuse (an unknown command, args that are not a
/// JSON object or do not fit the command) before any row exists.
#[tokio::test(flavor = "multi_thread")]
async fn enqueue_refuses_what_the_daemon_would_refuse_before_writing() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = write_config(dir.path(), &emu, "");
    for (command, args, says) in [
        ("nope", "{}", "\"nope\" is not configured"),
        ("sleep", "{oops", "--args is not JSON"),
        (
            "sleep",
            r#"{"seconds":"soon"}"#,
            "argsJSON does not fit command \"sleep\"",
        ),
    ] {
        let config = config.clone();
        let out = tokio::task::spawn_blocking(move || {
            sheetq()
                .args(["enqueue", "--target", "サーバーA", "--function", "f"])
                .args(["--command", command, "--args", args, "--config"])
                .arg(&config)
                .output()
                .unwrap_or_else(|e| panic!("run sheetq enqueue: {e}"))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command} {args}: {stderr}");
        assert!(
            stderr.contains("not enqueued") && stderr.contains(says),
            "{command} {args}: {stderr}"
        );
    }
    assert_eq!(
        emu.count("spreadsheets.values.append"),
        0,
        "nothing was appended"
    );
}

/// `enqueue --wait` prints the jobId, then the outcome once a daemon has run the job, and
/// exits as the job ended: 0 完了, 4 (its own code, apart from sheetq's failures) エラー.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_wait_prints_the_outcome_and_exits_as_the_job_ended() {
    // The test daemon polls every 100 ms and beats every second: a quota to match, so that
    // its budget share does not make the job wait.
    let emu = support::start_with_quota(sheetq::emulator::Quota::scaled(50)).await;
    let failing = "[commands.fail]\nexec = [\"/bin/false\"]\n";
    let fleet = support::Fleet::start(&emu, &["vm-1"], &[], failing).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = write_config(dir.path(), &emu, failing);
    let wait = |command: &'static str, target: &'static str| {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            sheetq()
                .args(["enqueue", "--target", target, "--function", "f"])
                .args(["--command", command, "--args", "{}", "--wait", "--config"])
                .arg(&config)
                .output()
                .unwrap_or_else(|e| panic!("run sheetq enqueue --wait: {e}"))
        })
    };
    let out = wait("sleep", "T-wait")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let failed = wait("fail", "T-fail")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    fleet.stop(&emu).await;
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(
        failed.status.code(),
        Some(4),
        "a job that failed exits 4: {stdout}\n{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    assert!(stdout.contains("エラー: "), "{stdout}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "the jobId, then the outcome: {stdout}");
    assert_eq!(lines[0].len(), 36, "a UUID jobId first: {stdout}");
    assert!(lines[1].starts_with("完了: "), "{stdout}");
}

#[test]
fn the_emulator_refuses_an_address_other_machines_reach_without_allow_remote() {
    let out = sheetq()
        .args(["emulator", "--listen", "0.0.0.0:0"])
        .output()
        .expect("run sheetq emulator");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("local only") && stderr.contains("--allow-remote"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn enqueue_warns_of_a_target_without_a_panel_and_check_and_status_speak_json() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "");
    let run = |args: Vec<String>| with_config(&config, args);
    let out = run([
        "enqueue",
        "--target",
        "どこにもない",
        "--function",
        "f",
        "--command",
        "sleep",
        "--args",
        r#"{"seconds":1}"#,
        "--json",
    ]
    .map(String::from)
    .to_vec())
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("enqueue --json prints JSON");
    assert!(
        reply["job_id"].as_str().is_some_and(|id| !id.is_empty()),
        "{reply}"
    );
    assert!(
        reply["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("no panel carries the target label")),
        "{reply}"
    );
    let out = run(["status", "--json"].map(String::from).to_vec())
        .await
        .expect("join");
    let status: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("status --json prints JSON");
    assert_eq!(status["counts"][0], json!(["待機", 1]), "{status}");
    let out = run(["check", "--json"].map(String::from).to_vec())
        .await
        .expect("join");
    let check: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("check --json prints JSON");
    assert_eq!(
        check["ok"], false,
        "the demo's unconfigured function: {check}"
    );
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn without_a_config_the_error_names_every_place_tried_and_a_toml_error_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = sheetq()
        .arg("status")
        .current_dir(dir.path())
        .env_remove("SHEETQ_CONFIG")
        .output()
        .expect("run sheetq status");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // /etc/sheetq/sheetq.toml may exist on a machine that runs sheetq: then it is read.
    if !std::path::Path::new("/etc/sheetq/sheetq.toml").exists() {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("tried sheetq.toml, /etc/sheetq/sheetq.toml")
                && stderr.contains("--config FILE"),
            "{stderr}"
        );
    }
    let bad = dir.path().join("bad1.toml");
    std::fs::write(&bad, "spreadsheet_id = \"x\"\n\nworker_id = \"vm-1\n").expect("write");
    let out = sheetq()
        .arg("check")
        .arg("--config")
        .arg(&bad)
        .output()
        .expect("run sheetq check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad1.toml") && stderr.contains("at line 3, column"),
        "a TOML error names its line and column: {stderr}"
    );
}

/// A daemon that cannot run as set up (here: the queue sheet is missing) exits 2, the code
/// a service manager is told not to restart on; it names the fix.
#[tokio::test(flavor = "multi_thread")]
async fn run_on_a_spreadsheet_without_the_queue_exits_2_naming_the_fix() {
    let emu = support::start_empty().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "");
    let out = tokio::task::spawn_blocking(move || {
        sheetq()
            .args(["run", "--config"])
            .arg(&config)
            .output()
            .expect("run sheetq run")
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sheetq init"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_probe_prints_its_table_saves_json_and_leaves_no_sheet() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A budget that lets the probes go as fast as the emulator's quota (Google's) allows.
    let config = write_config(dir.path(), &emu, "requests_per_minute = 600");
    let saved = dir.path().join("probes.json");
    // The other editor (a service account of another project) and a viewer.
    let editor_key = dir.path().join("editor.json");
    let other = "other@proj-b.iam.gserviceaccount.com";
    let key = support::body_of(
        emu.addr().port(),
        &format!("/_emulator/credentials?account={other}"),
    )
    .await;
    std::fs::write(&editor_key, key).expect("write the editor's key");
    let viewer_key = dir.path().join("viewer.json");
    std::fs::write(&viewer_key, emu.credentials_json_for("viewer"))
        .expect("write the viewer's key");
    emu.share(
        &sheetq::emulator::Emulator::account("viewer"),
        sheetq::emulator::Access::Reader,
    );
    let args = [
        "check".to_string(),
        "--config".into(),
        config.display().to_string(),
        "--probe".into(),
        "--probe-editor".into(),
        editor_key.display().to_string(),
        "--probe-viewer".into(),
        viewer_key.display().to_string(),
        "--save".into(),
        saved.display().to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || sheetq().args(args).output())
        .await
        .expect("join")
        .expect("run sheetq check --probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("PASS ")).count(),
        sheetq::probe::Probe::ALL.len(),
        "every probe passes on the emulator:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("is deleted"), "{stdout}");
    // The budget above Google's quota is itself a problem: exit 3.
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("requests_per_minute = 600"), "{stderr}");
    let text = std::fs::read_to_string(&saved).expect("--save wrote the file");
    let results = sheetq::probe::load_saved(&text).expect("the saved file loads");
    assert_eq!(results.len(), sheetq::probe::Probe::ALL.len());
    let left: Vec<String> = emu
        .with_spreadsheet(|ss| {
            ss.sheets
                .iter()
                .map(|s| s.title.clone())
                .collect::<Vec<_>>()
        })
        .expect("spreadsheet")
        .into_iter()
        .filter(|t| t.starts_with("_sheetq_probe_"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}

/// `sheetq man --dir` writes one page per subcommand, the same bytes every time (so
/// `install.sh` changes only what differs), and each shell's completion names the
/// subcommands.
#[test]
fn man_pages_come_one_per_subcommand_and_completions_for_each_shell() {
    let dirs =
        [tempfile::tempdir(), tempfile::tempdir()].map(|d| d.unwrap_or_else(|e| panic!("{e}")));
    for d in &dirs {
        sheetq()
            .args(["man", "--dir"])
            .arg(d.path())
            .assert()
            .success();
    }
    for page in [
        "sheetq.1",
        "sheetq-run.1",
        "sheetq-panels-sync.1",
        "sheetq-enqueue.1",
    ] {
        let [a, b] = dirs
            .each_ref()
            .map(|d| std::fs::read_to_string(d.path().join(page)).unwrap_or_default());
        assert!(
            a.starts_with(".ie") || a.contains(".TH"),
            "{page} is a man page: {a:.200}"
        );
        assert_eq!(a, b, "{page} differs between two runs");
    }
    let run = std::fs::read_to_string(dirs[0].path().join("sheetq-run.1")).unwrap_or_default();
    assert!(
        run.contains("config"),
        "sheetq-run(1) documents --config:\n{run}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = sheetq()
            .args(["completions", shell])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("enqueue"),
            "{shell} completion:\n{text:.400}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_of_two_spreadsheets_is_acted_on_each_or_by_spreadsheet() {
    let emu = support::start_emulator().await;
    let second = emu.add_spreadsheet(sheetq::emulator::Seed::Demo);
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("key.json");
    std::fs::write(&key, emu.credentials_json()).expect("write key");
    let config = dir.path().join("sheetq.toml");
    std::fs::write(
        &config,
        format!(
            "credentials = {:?}\napi_base_url = {:?}\nstate_dir = {:?}\n[commands.sleep]\nbuiltin = \"sleep\"\n[[spreadsheets]]\nlabel = \"east\"\nspreadsheet_id = {:?}\n[[spreadsheets]]\nlabel = \"west\"\nspreadsheet_id = {:?}\n",
            key.display().to_string(),
            emu.base_url(),
            dir.path().join("state").display().to_string(),
            emu.spreadsheet_id(),
            second,
        ),
    )
    .expect("write config");
    let run = |args: &[&str]| with_config(&config, args.iter().map(|a| a.to_string()).collect());
    let job = [
        "enqueue",
        "--target",
        "サーバーA",
        "--function",
        "動作確認 (2秒)",
        "--command",
        "sleep",
    ];
    let out = run(&job).await.expect("join");
    assert_eq!(
        out.status.code(),
        Some(2),
        "enqueue must ask which spreadsheet, as for a bad argument"
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("serves 2 spreadsheets (east, west)") && said.contains("--spreadsheet"),
        "{said}"
    );
    let out = run(&[&job[..], &["--spreadsheet", "west"]].concat())
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let west = emu
        .values_in(&second, "'_ジョブキュー'!A2:A")
        .expect("west's queue");
    assert_eq!(west.len(), 1, "the job went to west");
    assert!(
        emu.values("'_ジョブキュー'!A2:A")
            .expect("east's queue")
            .is_empty(),
        "and not to east"
    );
    let out = run(&["status"]).await.expect("join");
    let shown = String::from_utf8_lossy(&out.stdout);
    let (east_at, west_at) = (
        shown.find(&format!("== east ({})", emu.spreadsheet_id())),
        shown.find(&format!("== west ({second})")),
    );
    assert!(
        east_at.is_some() && west_at.is_some(),
        "status speaks of each under its heading:\n{shown}"
    );
    let out = run(&["status", "--json"]).await.expect("join");
    let list: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("status --json prints JSON");
    assert_eq!(list[1]["spreadsheet"], "west", "{list}");
    assert_eq!(list[1]["status"]["counts"][0], json!(["待機", 1]), "{list}");
    let out = run(&["check"]).await.expect("join");
    let shown = String::from_utf8_lossy(&out.stdout);
    let accounts = shown
        .split_once("== the service accounts' budgets, across the 2 spreadsheets")
        .map(|(_, after)| after)
        .unwrap_or_else(|| panic!("check adds up the account's budget after both:\n{shown}"));
    assert!(
        accounts.contains("serves 2 spreadsheet(s) (east, west) on one budget"),
        "{accounts}"
    );
    let out = run(&["status", "--spreadsheet", "nowhere"])
        .await
        .expect("join");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("names none of the config's spreadsheets"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn schedules_lists_the_next_runs_and_a_bad_cron_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = dir.path().join("sheetq.toml");
    let write = |cron: &str| {
        std::fs::write(
            &config,
            format!(
                "spreadsheet_id = \"sid\"\n[commands.backup]\nbuiltin = \"echo\"\n\
                 [[functions]]\nlabel = \"バックアップ\"\ncommand = \"backup\"\n\
                 [[schedules]]\nname = \"nightly\"\ncron = \"{cron}\"\ntarget = \"サーバーA\"\nfunction = \"バックアップ\"\n"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    };
    write("30 2 * * *");
    let out = sheetq()
        .args([
            "schedules",
            "--time-zone",
            "Asia/Tokyo",
            "--count",
            "2",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "the schedule and two runs:\n{stdout}");
    assert!(
        lines[0].starts_with("nightly: \"30 2 * * *\" runs バックアップ on サーバーA"),
        "{stdout}"
    );
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.contains(" 02:30 JST (+09:00)  jobId ")),
        "{stdout}"
    );

    write("61 2 * * *");
    let out = sheetq()
        .args(["schedules", "--time-zone", "Asia/Tokyo", "--config"])
        .arg(&config)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad cron is refused");
    assert!(
        stderr.contains("nightly") && stderr.contains("61"),
        "the error names the schedule and the field: {stderr}"
    );
}

/// One typo inside a `[commands.X]` table is one problem, with its line and column, and not
/// also "X is not configured" on every panel row that names X.
#[tokio::test(flavor = "multi_thread")]
async fn check_reports_a_typo_in_a_command_once_with_where_it_is() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        &emu,
        "[commands.broken]\nbuiltin = \"echo\"\nexce = 1\n",
    );
    let line = std::fs::read_to_string(&config)
        .unwrap_or_default()
        .lines()
        .position(|l| l.starts_with("exce"))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("the config has the typo"));
    let out = run_check(config).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let typo: Vec<&str> = stderr.lines().filter(|l| l.contains("exce")).collect();
    assert_eq!(typo.len(), 1, "the typo once:\n{stderr}");
    assert!(
        typo[0].contains(&format!("(line {line}, column 1)")),
        "it says where: {}",
        typo[0]
    );
    assert!(
        !stderr.contains("\"broken\" is not configured"),
        "a command with a fault of its own is configured:\n{stderr}"
    );
}

/// A panel of a target that `[[targets]]` does not list is named: every press there is
/// refused.
#[tokio::test(flavor = "multi_thread")]
async fn check_names_panels_of_targets_the_config_does_not_list() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "[[targets]]\nlabel = \"サーバーA\"\n");
    let out = run_check(config).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    for target in ["サーバーB", "サーバーC"] {
        assert!(
            stderr.contains(&format!(
                "is for target \"{target}\", which is not among the [[targets]]"
            )),
            "{target} is named:\n{stderr}"
        );
    }
    assert!(
        !stderr.contains("is for target \"サーバーA\""),
        "a listed target is fine:\n{stderr}"
    );
}

/// A key file that is missing is a set-up problem: exit 2, its message once.
#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_file_exits_2_saying_so_once() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "");
    std::fs::remove_file(dir.path().join("key.json")).expect("remove the key");
    for args in [&["status"][..], &["check"][..]] {
        let config = config.clone();
        let out = tokio::task::spawn_blocking(move || {
            sheetq().args(args).arg("--config").arg(&config).output()
        })
        .await
        .expect("join")
        .expect("run sheetq");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "sheetq {args:?}: {stderr}");
        assert_eq!(
            stderr.matches("No such file or directory").count(),
            1,
            "sheetq {args:?} says it once:\n{stderr}"
        );
        assert!(stderr.contains("key.json"), "it names the file:\n{stderr}");
    }
}

/// `panels sync --dry-run` says what a sync would do, in the present tense, and writes
/// nothing.
#[tokio::test(flavor = "multi_thread")]
async fn panels_sync_dry_run_says_what_it_would_do() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &emu, "");
    let out = with_config(
        &config,
        vec!["panels".into(), "sync".into(), "--dry-run".into()],
    )
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("a sync would:"), "{stdout}");
    assert!(
        stdout.contains("  protect "),
        "what it would protect:\n{stdout}"
    );
    assert!(
        !stdout.contains("protected "),
        "nothing is said done:\n{stdout}"
    );
    assert_eq!(emu.count("spreadsheets.batchUpdate"), 0, "nothing written");
}

/// `enqueue --function F` takes F's command, args and flags from `[[functions]]`, as a
/// press does; `--args` sets only what `args_from_sheet` lets a job set.
#[tokio::test(flavor = "multi_thread")]
async fn enqueue_takes_what_runs_from_the_functions_of_the_config() {
    let emu = support::start_emulator().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let functions = r#"
[[functions]]
label = "動作確認 (2秒)"
command = "sleep"
args = { seconds = 2 }
args_from_sheet = ["seconds"]
"#;
    let config = write_config(dir.path(), &emu, functions);
    let enqueue = |args: &[&str]| {
        let mut all = vec![
            "enqueue",
            "--target",
            "サーバーA",
            "--function",
            "動作確認 (2秒)",
        ];
        all.extend_from_slice(args);
        with_config(&config, all.into_iter().map(String::from).collect())
    };
    let out = enqueue(&[]).await.expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let job = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let row = support::queue_rows(&emu)
        .into_iter()
        .find(|r| r.job_id == job)
        .unwrap_or_else(|| panic!("no row {job}"));
    assert_eq!(row.command, "sleep");
    assert_eq!(row.args_json, r#"{"seconds":2}"#);

    let out = enqueue(&["--args", r#"{"seconds":1}"#])
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = enqueue(&["--args", r#"{"other":1}"#]).await.expect("join");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--args may set seconds") && !stderr.contains("panel"),
        "the shell's words:\n{stderr}"
    );
}

/// The README's "Running against a local spreadsheet" runs as written: the emulator, then
/// the second terminal's lines (`check` exiting 0 on the way), then `run`, and `status`
/// shows the job that `enqueue` queued done.
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_local_spreadsheet_walkthrough_runs_clean_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let section = readme
        .split("## Running against a local spreadsheet you can poke at")
        .nth(1)
        .expect("the README has the section");
    let blocks: Vec<&str> = section
        .split("```sh\n")
        .skip(1)
        .take(2)
        .map(|b| b.split("```").next().unwrap_or_default())
        .collect();
    let [emulator, terminal] = blocks[..] else {
        panic!("the section opens with two sh blocks: {blocks:?}")
    };
    let bin = env!("CARGO_BIN_EXE_sheetq");
    let (port, metrics) = (support::free_port(), support::free_port());
    let as_here = |line: &str| {
        line.replace("cargo run --release --", &format!("'{bin}'"))
            .replace("8787", &port.to_string())
            .replace("9184", &metrics.to_string())
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let emulator_line = as_here(emulator.trim());
    let _emulator = support::Child(
        Command::new("sh")
            .args(["-c", &format!("exec {emulator_line}")])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the emulator"),
    );
    for _ in 0..100 {
        if support::http_get(port, "/_emulator/credentials").await.0 == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The second terminal up to `run`, which goes on until stopped: it is started apart.
    let (before_run, after_run) = terminal
        .split_once("\ncargo run --release -- run ")
        .expect("the terminal runs the daemon");
    let script = format!("set -e\n{}\n", as_here(before_run));
    let out = tokio::task::spawn_blocking({
        let dir = dir.path().to_path_buf();
        move || {
            Command::new("sh")
                .args(["-c", &script])
                .current_dir(dir)
                .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
                .output()
        }
    })
    .await
    .expect("join")
    .expect("run the walkthrough");
    assert!(
        out.status.success(),
        "every line before `run` succeeds, `check` included:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let run_line = as_here(&format!(
        "cargo run --release -- run {}",
        after_run.lines().next().unwrap_or_default()
    ));
    let run_line = run_line
        .split('#')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let _daemon = support::Child(
        Command::new("sh")
            .args(["-c", &format!("exec {run_line}")])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the daemon"),
    );
    let status_line = as_here(
        after_run
            .lines()
            .find(|l| l.contains(" status"))
            .expect("the walkthrough ends with status")
            .split('#')
            .next()
            .unwrap_or_default(),
    );
    let mut last = String::new();
    for _ in 0..60 {
        let out = Command::new("sh")
            .args(["-c", &status_line])
            .current_dir(dir.path())
            .output()
            .expect("status");
        last = String::from_utf8_lossy(&out.stdout).to_string();
        if last.contains("完了: 1") {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!("the enqueued job did not end 完了:\n{last}");
}
