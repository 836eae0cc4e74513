//! Who may run what (docs/design.md §5.1), with the real binary against the emulator under
//! Google's quota: a spreadsheet editor can make sheetq run only what its config allows. Rows
//! are written as any editor could write them (the hidden queue, any args, any command, any
//! target, any 依頼者), and each refusal must show on the queue row, the panel row, the log
//! and `sheetq_jobs_refused_total`, with nothing run.

use std::time::Duration;

use sheetq::emulator::Quota;
use sheetq::queue::State;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// Fast enough to run quickly, still enforced per account as Google does.
const FAST: Quota = Quota::scaled(50);

/// `[[functions]]` and `[[targets]]` of the tests: 動作確認 echoes the config's args, and people
/// may set only `comment`.
const CATALOG: &str = r#"
[commands.echo]
builtin = "echo"
[commands.sleep]
builtin = "sleep"

[[functions]]
label = "動作確認 (2秒)"
command = "echo"
args = { greeting = "hello from sheetq.toml" }
args_from_sheet = ["comment"]

[[targets]]
label = "サーバーA"
[[targets]]
label = "サーバーB"
[[targets]]
label = "サーバーC"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_args_commands_and_targets_are_refused_visibly_and_only_the_configs_args_run() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config_with(&emu, dir.path(), "vm-access", "", CATALOG);
    let log = dir.path().join("sheetq.log");
    let editor = daemon_config(&emu, "editor", dir.path(), &[], "");
    let sheets = client(&emu, &editor).await;
    let press = |target: &'static str, command: &'static str, args: &'static str| {
        let sheets = std::sync::Arc::clone(&sheets);
        let editor = editor.clone();
        async move {
            enqueue(
                sheets.as_ref(),
                &editor,
                target,
                "動作確認 (2秒)",
                command,
                args,
                "alice@example.com",
            )
            .await
        }
    };
    let legit = press(
        "サーバーA",
        "echo",
        r#"{"greeting":"hello from sheetq.toml","comment":"朝の確認"}"#,
    )
    .await;
    let forged_args = press("サーバーB", "echo", r#"{"greeting":"$(id)","comment":"x"}"#).await;
    let forged_command = press("サーバーC", "sleep", r#"{"seconds":3000}"#).await;
    let unlisted = press("本番DB", "echo", r#"{"greeting":"hello from sheetq.toml"}"#).await;

    let (daemon, port) = Binary::start_listening(&config, &log);
    let jobs = [
        legit.clone(),
        forged_args.clone(),
        forged_command.clone(),
        unlisted.clone(),
    ];
    let log_text = || {
        format!(
            "log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };
    let rows = wait_finished_or(&emu, &jobs, WAIT, log_text).await;
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&rows),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };

    let ok = row_of(&rows, &legit);
    assert!(
        ok.state.is(State::Done),
        "the press as configured must run: {}",
        show()
    );
    assert!(
        ok.message.contains("hello from sheetq.toml") && ok.message.contains("朝の確認"),
        "it runs with the config's args plus the comment people may set: {:?}",
        ok.message
    );
    for (job, what, words) in [
        (&forged_args, "forged argsJSON", "\"greeting\""),
        (&forged_command, "a forged command", "runs command \"echo\""),
        (
            &unlisted,
            "a target not in [[targets]]",
            "\"本番DB\" is not among the [[targets]]",
        ),
    ] {
        let r = row_of(&rows, job);
        assert!(
            r.state.is(State::Error)
                && r.message.contains(words)
                && r.message.contains("nothing ran"),
            "{what} must end エラー naming what was refused ({words}): {:?}\n{}",
            r.message,
            show()
        );
    }
    let panel = panel_row(&emu, "サーバーB", 8);
    assert!(
        panel[2].starts_with("❌ エラー") && panel.iter().any(|c| c.contains("greeting")),
        "the panel row of the forged press shows the refusal: {panel:?}"
    );

    let (status, metrics) = http_get(port, "/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    for (reason, n) in [
        ("args", 1.0),
        ("function", 1.0),
        ("target", 1.0),
        ("requester", 0.0),
    ] {
        assert_eq!(
            sample(
                &metrics,
                &format!("sheetq_jobs_refused_total{{reason=\"{reason}\"}}")
            ),
            Some(n),
            "refusals counted by reason {reason}:\n{metrics}"
        );
    }
    drop(daemon);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let refusals: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("job refused; nothing ran"))
        .collect();
    assert_eq!(refusals.len(), 3, "one log line per refusal:\n{text}");
    assert!(
        refusals
            .iter()
            .all(|l| l.contains("alice@example.com") && l.contains("reason=")),
        "each names the requester and the reason:\n{text}"
    );
    assert_no_quota_refusals(&emu);
}

/// `[[functions]]` with `allow`: 動作確認 only for alice and carol.
const ALLOW: &str = r#"
[commands.echo]
builtin = "echo"

[[functions]]
label = "動作確認 (2秒)"
command = "echo"
args = { greeting = "hello" }
allow = ["alice@example.com", "carol@ops.example.com"]
"#;

/// Waits up to [`WAIT`] for the process to exit; its exit code.
fn exit_code(daemon: &mut Binary) -> Option<i32> {
    let deadline = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < deadline {
        if let Some(status) = daemon.exited() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_on_an_unprotected_queue_refuses_to_start_and_to_reload() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("sheetq.log");
    let show = || std::fs::read_to_string(&log).unwrap_or_default();

    let config = binary_config_with(&emu, dir.path(), "vm-allow", "", ALLOW);
    let mut daemon = Binary::start(&config, &log);
    assert_eq!(
        exit_code(&mut daemon),
        Some(2),
        "allow on an open queue must stop the daemon as a setup problem:\n{}",
        show()
    );
    let text = show();
    assert!(
        text.contains("allow") && text.contains("sheetq init"),
        "the error names allow and the fix:\n{text}"
    );

    // Started without allow, then reloaded with it: the reload is refused, the daemon runs on.
    let without = ALLOW.replace(
        "allow = [\"alice@example.com\", \"carol@ops.example.com\"]\n",
        "",
    );
    binary_config_with(&emu, dir.path(), "vm-allow", "", &without);
    let mut daemon = Binary::start(&config, &log);
    wait_for(
        "the daemon to start without allow",
        WAIT,
        || show().contains("the queue is not protected").then_some(()),
        show,
    )
    .await;
    binary_config_with(&emu, dir.path(), "vm-allow", "", ALLOW);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap_or_else(|e| panic!("SIGHUP: {e}"));
    wait_for(
        "the reload with allow to be refused",
        WAIT,
        || {
            show()
                .contains("the config was not reloaded, the one in force stays")
                .then_some(())
        },
        show,
    )
    .await;
    assert_eq!(
        daemon.exited(),
        None,
        "a refused reload leaves the daemon running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_protected_queue_only_allowed_requesters_run_and_an_empty_one_is_refused() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config_with(&emu, dir.path(), "vm-allow", "", ALLOW);
    let log = dir.path().join("sheetq.log");
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    // As an operator sets up a spreadsheet: init protects the hidden sheets for sheetq's
    // service account, so 依頼者 can be trusted.
    sheetq::admin::init(sheets.as_ref(), &enqueuer)
        .await
        .unwrap_or_else(|e| panic!("sheetq init: {e}"));
    let mut jobs = Vec::new();
    for (target, requester) in [
        ("サーバーA", "Alice@Example.com"),
        ("サーバーB", "carol@ops.example.com"),
        ("サーバーC", "mallory@example.com"),
        ("サーバーD", ""),
    ] {
        jobs.push(
            enqueue(
                sheets.as_ref(),
                &enqueuer,
                target,
                "動作確認 (2秒)",
                "echo",
                r#"{"greeting":"hello"}"#,
                requester,
            )
            .await,
        );
    }
    let (daemon, port) = Binary::start_listening(&config, &log);
    let log_text = || {
        format!(
            "log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };
    let rows = wait_finished_or(&emu, &jobs, WAIT, log_text).await;
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&rows),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };
    for job in &jobs[..2] {
        assert!(
            row_of(&rows, job).state.is(State::Done),
            "an allowed requester's job runs:\n{}",
            show()
        );
    }
    let mallory = row_of(&rows, &jobs[2]);
    assert!(
        mallory.state.is(State::Error)
            && mallory.message == "\"mallory@example.com\" は \"動作確認 (2秒)\" を実行できません",
        "a requester allow does not list is refused in the configured words: {:?}\n{}",
        mallory.message,
        show()
    );
    let nobody = row_of(&rows, &jobs[3]);
    assert!(
        nobody.state.is(State::Error) && nobody.message.starts_with("(依頼者不明) は"),
        "an empty 依頼者 matches nothing: {:?}",
        nobody.message
    );
    let panel = panel_row(&emu, "サーバーC", 8);
    assert!(
        panel.iter().any(|c| c.contains("を実行できません")),
        "the refused press shows on its panel row: {panel:?}"
    );
    let (_, metrics) = http_get(port, "/metrics").await;
    assert_eq!(
        sample(&metrics, "sheetq_jobs_refused_total{reason=\"requester\"}"),
        Some(2.0),
        "{metrics}"
    );
    drop(daemon);
    assert_no_quota_refusals(&emu);
}
