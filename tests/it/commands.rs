//! Commands end to end through the public API: configured `/bin/sh -c` scripts stand in for
//! an operator's programs (the script is configuration; sheet values only reach it as data).
//! Evidence is files the scripts write in their workdir, never wall-clock speed. The last
//! test runs the real binary against the emulator, as a sheet editor would meet it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use sheetq::commands::{JobSpec, Outcome, OutcomeStatus, Registry, Runner};
use tokio_util::sync::CancellationToken;

const STALE: Duration = Duration::from_secs(15 * 60);

/// Upper bound for any single wait in these tests: generous for a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// A registry with one command `name` running `script` under `/bin/sh -c` in `dir`.
fn script_registry(dir: &Path, name: &str, script: &str, extra: &str) -> Registry {
    script_registry_with_argv(dir, name, script, &[], extra)
}

/// As [`script_registry`], with `tail` appended to the argv (the script's `$1`, `$2`, ...).
fn script_registry_with_argv(
    dir: &Path,
    name: &str,
    script: &str,
    tail: &[&str],
    extra: &str,
) -> Registry {
    let tail: String = tail.iter().map(|t| format!(", {}", toml_str(t))).collect();
    let text = format!(
        "[{name}]\nexec = [\"/bin/sh\", \"-c\", {script}, \"sh\"{tail}]\nworkdir = {dir}\n{extra}\n",
        script = toml_str(script),
        dir = toml_str(&dir.display().to_string()),
    );
    Registry::from_toml_str(&text, STALE).unwrap_or_else(|e| panic!("{e:#?}\n{text}"))
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn spec(command: &str, args: &str) -> JobSpec {
    JobSpec {
        job_id: "job-1".into(),
        target: "A社".into(),
        function: "月次レポート".into(),
        requester: "a@example.com".into(),
        command: command.into(),
        args_json: args.into(),
        flags: vec![],
        panel_sheet: "A社パネル".into(),
        panel_row: Some(12),
        approvals: String::new(),
        continuation: false,
        approved_with_rollout: false,
    }
}

async fn run(registry: &Registry, spec: &JobSpec) -> Outcome {
    run_with(&registry.runner(), registry, spec, CancellationToken::new()).await
}

async fn run_with(
    runner: &Runner,
    registry: &Registry,
    spec: &JobSpec,
    cancel: CancellationToken,
) -> Outcome {
    let job = registry.prepare(spec).unwrap_or_else(|e| panic!("{e}"));
    tokio::time::timeout(PATIENCE, runner.run(job, cancel))
        .await
        .expect("the job did not finish in time")
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

/// Waits until `cond` holds, failing the test after [`PATIENCE`].
async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A process is gone when it no longer exists or is a zombie waiting to be reaped.
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

fn pid_in(path: PathBuf) -> u32 {
    read(&path).trim().parse().expect("a pid")
}

#[tokio::test]
async fn json_last_line_gives_message_url_and_continuation() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "report",
        r#"echo "working on $SHEETQ_TARGET"
echo '{"url":"https://example.com/r/1","message":"3 rows","continue":{"page":2}}'"#,
        "",
    );
    let out = run(&r, &spec("report", "")).await;
    assert_eq!(out.status, OutcomeStatus::Done, "{out:?}");
    assert_eq!(out.message, "3 rows");
    assert_eq!(out.url.as_deref(), Some("https://example.com/r/1"));
    assert_eq!(
        out.continue_args.map(Value::Object),
        Some(json!({"page": 2}))
    );
}

#[tokio::test]
async fn plain_last_line_is_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(dir.path(), "p", r"printf 'one\nall good\n\n'", "");
    let out = run(&r, &spec("p", "")).await;
    assert_eq!(
        (out.status, out.message.as_str(), out.url, out.continue_args),
        (OutcomeStatus::Done, "all good", None, None)
    );
}

#[tokio::test]
async fn non_zero_exit_fails_with_the_stderr_tail() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "f",
        "echo 'partial'; echo 'reading input' >&2; echo 'boom: disk full' >&2; exit 3",
        "",
    );
    let out = run(&r, &spec("f", "")).await;
    assert_eq!(out.status, OutcomeStatus::Failed);
    assert_eq!(out.message, "exit code 3: reading input\nboom: disk full");
}

#[tokio::test]
async fn a_program_that_cannot_start_fails_with_its_name() {
    let r = Registry::from_toml_str("[x]\nexec = [\"/nonexistent/sheetq-tool\"]", STALE).unwrap();
    let out = run(&r, &spec("x", "")).await;
    assert_eq!(out.status, OutcomeStatus::Failed);
    assert!(
        out.message
            .starts_with("could not start \"/nonexistent/sheetq-tool\""),
        "{}",
        out.message
    );
}

#[tokio::test]
async fn timeout_kills_a_group_that_ignores_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    // Ignores SIGTERM, and so does its child (ignored signals are inherited).
    let r = script_registry(
        dir.path(),
        "stubborn",
        "trap '' TERM; sleep 300 & echo $! > child.pid; echo $$ > leader.pid; \
         echo 'still busy' >&2; while :; do wait; done",
        "timeout = \"3s\"\nkill_grace = \"200ms\"",
    );
    let out = run(&r, &spec("stubborn", "")).await;
    assert_eq!(out.status, OutcomeStatus::TimedOut, "{out:?}");
    assert_eq!(
        out.message,
        "timed out after 3s (commands.stubborn.timeout); the process group was stopped; \
         last output: still busy"
    );
    let leader = pid_in(dir.path().join("leader.pid"));
    let child = pid_in(dir.path().join("child.pid"));
    wait_for("the leader to be gone", || is_gone(leader)).await;
    wait_for("its child sleep to be gone", || is_gone(child)).await;
}

#[tokio::test]
async fn cancellation_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "long",
        "sleep 300 & echo $! > child.pid; echo $$ > leader.pid; wait",
        "",
    );
    let runner = r.runner();
    let cancel = CancellationToken::new();
    let task = {
        let (runner, r, cancel) = (runner.clone(), r.clone(), cancel.clone());
        tokio::spawn(async move { run_with(&runner, &r, &spec("long", ""), cancel).await })
    };
    let leader_file = dir.path().join("leader.pid");
    wait_for("the script to start", || {
        std::fs::read_to_string(&leader_file).is_ok_and(|s| s.ends_with('\n'))
    })
    .await;
    cancel.cancel();
    let out = task.await.unwrap();
    assert_eq!(out.status, OutcomeStatus::Cancelled, "{out:?}");
    let leader = pid_in(leader_file);
    let child = pid_in(dir.path().join("child.pid"));
    wait_for("the leader to be gone", || is_gone(leader)).await;
    wait_for("its child sleep to be gone", || is_gone(child)).await;
}

#[tokio::test]
async fn processes_left_behind_are_killed_when_the_command_exits() {
    let dir = tempfile::tempdir().unwrap();
    // The background sleep keeps stdout open: the job must still end.
    let r = script_registry(
        dir.path(),
        "leaky",
        "sleep 300 & echo $! > child.pid; echo done",
        "",
    );
    let out = run(&r, &spec("leaky", "")).await;
    assert_eq!(
        (out.status, out.message.as_str()),
        (OutcomeStatus::Done, "done")
    );
    let child = pid_in(dir.path().join("child.pid"));
    wait_for("the left-behind sleep to be gone", || is_gone(child)).await;
}

#[tokio::test]
async fn megabytes_of_output_are_drained_and_the_tail_kept() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "chatty",
        "head -c 4000000 /dev/zero | tr '\\0' 'e' >&2 & \
         head -c 8000000 /dev/zero | tr '\\0' 'x'; echo; wait; \
         echo '{\"message\":\"big done\"}'",
        "",
    );
    let out = run(&r, &spec("chatty", "")).await;
    assert_eq!(
        (out.status, out.message.as_str()),
        (OutcomeStatus::Done, "big done")
    );

    let r = script_registry(
        dir.path(),
        "chatty_fail",
        "head -c 3000000 /dev/zero | tr '\\0' 'e' >&2; echo ' the end' >&2; exit 1",
        "",
    );
    let out = run(&r, &spec("chatty_fail", "")).await;
    assert_eq!(out.status, OutcomeStatus::Failed);
    assert!(
        out.message.starts_with("exit code 1: (truncated) …eee"),
        "{}",
        &out.message[..40]
    );
    assert!(out.message.ends_with("eee the end"));
    assert!(out.message.chars().count() <= 2_000);
}

#[tokio::test]
async fn sheet_values_arrive_unchanged_as_data() {
    let dir = tempfile::tempdir().unwrap();
    let nasty = "$(touch pwned1); `touch pwned2` | & \\ ' \" ; rm -rf / > x < y * ? ~ \n\t";
    let args = json!({"evil": nasty, "formula": "=1+1", "f2": "=HYPERLINK(\"http://x\")", "n": 1});
    let r = script_registry_with_argv(
        dir.path(),
        "data",
        r#"cat > stdin.json
printf '%s' "$SHEETQ_ARGS_JSON" > env_args
printf '%s' "$SHEETQ_TARGET" > env_target
printf '%s' "$SHEETQ_FUNCTION" > env_function
printf '%s' "$SHEETQ_REQUESTER" > env_requester
printf '%s' "$1" > argv1
printf '%s' "$2" > argv2
echo ok"#,
        &["{target}", "x{requester}y"],
        "",
    );
    let mut s = spec("data", &args.to_string());
    // argv refuses line breaks and tabs; the args carry them to stdin and SHEETQ_ARGS_JSON.
    s.target = format!("=1+1 {}", nasty.trim_end());
    s.function = "=SUM(A1:A9)".into();
    s.requester = "`touch pwned3`$(touch pwned4)".into();
    let out = run(&r, &s).await;
    assert_eq!(
        (out.status, out.message.as_str()),
        (OutcomeStatus::Done, "ok"),
        "{out:?}"
    );

    let d = dir.path();
    let stdin: Value = serde_json::from_str(&read(d.join("stdin.json"))).unwrap();
    assert_eq!(stdin, args);
    let env_args: Value = serde_json::from_str(&read(d.join("env_args"))).unwrap();
    assert_eq!(env_args, args);
    assert_eq!(read(d.join("env_target")), s.target);
    assert_eq!(read(d.join("env_function")), s.function);
    assert_eq!(read(d.join("env_requester")), s.requester);
    assert_eq!(read(d.join("argv1")), s.target);
    assert_eq!(read(d.join("argv2")), format!("x{}y", s.requester));
    for marker in ["pwned1", "pwned2", "pwned3", "pwned4"] {
        assert!(
            !d.join(marker).exists(),
            "{marker} was created: a value ran"
        );
    }
}

#[tokio::test]
async fn environment_is_cleared_but_for_the_allow_list_and_sheetq_fields() {
    let dir = tempfile::tempdir().unwrap();
    // Cargo sets CARGO_PKG_NAME and CARGO_MANIFEST_DIR for test processes.
    let r = script_registry(
        dir.path(),
        "envy",
        "env > env.txt; echo ok",
        "env = [\"CARGO_PKG_NAME\", \"NOT_SET_ANYWHERE_XYZ\"]",
    );
    let mut s = spec("envy", r#"{"a": 1}"#);
    s.flags = vec!["heavy".into(), " continuation ".into()];
    // A step sheetq marked: the flag alone would be refused before anything ran.
    s.continuation = true;
    s.requester = String::new();
    let out = run(&r, &s).await;
    assert_eq!(out.status, OutcomeStatus::Done, "{out:?}");
    let env = read(dir.path().join("env.txt"));
    let vars: std::collections::BTreeMap<&str, &str> =
        env.lines().filter_map(|l| l.split_once('=')).collect();
    let want = [
        ("CARGO_PKG_NAME", "sheetq"),
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("LANG", "C.UTF-8"),
        ("SHEETQ_JOB_ID", "job-1"),
        ("SHEETQ_TARGET", "A社"),
        ("SHEETQ_FUNCTION", "月次レポート"),
        ("SHEETQ_REQUESTER", ""),
        ("SHEETQ_COMMAND", "envy"),
        ("SHEETQ_ARGS_JSON", "{\"a\":1}"),
        ("SHEETQ_FLAGS", "heavy,continuation"),
        ("SHEETQ_PANEL_SHEET", "A社パネル"),
        ("SHEETQ_PANEL_ROW", "12"),
    ];
    for (k, v) in want {
        assert_eq!(vars.get(k).copied(), Some(v), "{k} in\n{env}");
    }
    assert!(!vars.contains_key("CARGO_MANIFEST_DIR"), "leaked:\n{env}");
    assert!(!vars.contains_key("NOT_SET_ANYWHERE_XYZ"), "{env}");
}

#[tokio::test]
async fn rejected_jobs_run_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "report",
        "touch ran; echo ok",
        "args_required = [\"month\"]\nargs_schema = { properties = { month = { type = \"string\", pattern = '^\\d{4}-\\d{2}$' } } }",
    );
    let cases = [
        (
            spec("reprot", r#"{"month":"2026-11"}"#),
            "command \"reprot\" is not configured in sheetq.toml (configured: report)",
        ),
        (
            spec("report", r#"{"month": "2026-11""#),
            "argsJSON is not valid JSON: EOF while parsing an object at line 1 column 19",
        ),
        (
            spec("report", r#""2026-11""#),
            "argsJSON must be a JSON object like {\"key\": \"value\"}, found a string",
        ),
        (
            spec("report", "{}"),
            "argsJSON does not fit command \"report\": args.month is required",
        ),
        (
            spec("report", r#"{"month": "=1+1"}"#),
            "argsJSON does not fit command \"report\": args.month must match the pattern ^\\d{4}-\\d{2}$",
        ),
    ];
    for (s, want) in cases {
        let err = r.prepare(&s).expect_err(&s.args_json);
        assert_eq!(err.message, want);
        let outcome = err.into_outcome();
        assert_eq!(outcome.status, OutcomeStatus::Failed);
    }
    assert!(!dir.path().join("ran").exists());
    // The same command with good args does run: the marker proves the check above.
    let out = run(&r, &spec("report", r#"{"month":"2026-11"}"#)).await;
    assert_eq!(out.status, OutcomeStatus::Done, "{out:?}");
    assert!(dir.path().join("ran").exists());
}

/// Each job takes a lock directory (mkdir is atomic) and logs start/end; an overlap is
/// recorded in a file. Without the gate both would be inside at once.
const LOCKING_SCRIPT: &str = r#"mkdir lock 2>/dev/null || echo "$SHEETQ_JOB_ID" >> overlap
echo "start $SHEETQ_JOB_ID" >> log
i=0; while [ $i -lt 10 ]; do i=$((i+1)); sleep 0.05; done
echo "end $SHEETQ_JOB_ID" >> log
rmdir lock 2>/dev/null
echo ok"#;

#[tokio::test]
async fn heavy_jobs_run_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(dir.path(), "heavy", LOCKING_SCRIPT, "heavy = true");
    let runner = r.runner();
    let other = runner.clone();
    let (mut a, mut b) = (spec("heavy", ""), spec("heavy", ""));
    a.job_id = "A".into();
    b.job_id = "B".into();
    let (oa, ob) = tokio::join!(
        run_with(&runner, &r, &a, CancellationToken::new()),
        run_with(&other, &r, &b, CancellationToken::new()),
    );
    assert_eq!(
        (oa.status, ob.status),
        (OutcomeStatus::Done, OutcomeStatus::Done)
    );
    assert!(
        !dir.path().join("overlap").exists(),
        "heavy jobs overlapped"
    );
    let log = read(dir.path().join("log"));
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines == ["start A", "end A", "start B", "end B"]
            || lines == ["start B", "end B", "start A", "end A"],
        "{log}"
    );
}

#[tokio::test]
async fn light_jobs_run_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    // Each waits until both have started: only possible if they run at the same time.
    let r = script_registry(
        dir.path(),
        "light",
        r#"touch "started_$SHEETQ_JOB_ID"
i=0
while [ ! -e started_A ] || [ ! -e started_B ]; do
  i=$((i+1)); if [ $i -gt 1000 ]; then echo 'never met' >&2; exit 1; fi; sleep 0.05
done
echo met"#,
        "",
    );
    let runner = r.runner();
    let (mut a, mut b) = (spec("light", ""), spec("light", ""));
    a.job_id = "A".into();
    b.job_id = "B".into();
    let (oa, ob) = tokio::join!(
        run_with(&runner, &r, &a, CancellationToken::new()),
        run_with(&runner, &r, &b, CancellationToken::new()),
    );
    assert_eq!((oa.message.as_str(), ob.message.as_str()), ("met", "met"));
}

#[tokio::test]
async fn builtins_sleep_and_echo() {
    let r = Registry::from_toml_str(
        "[sleep]\nbuiltin = \"sleep\"\n[echo]\nbuiltin = \"echo\"",
        STALE,
    )
    .unwrap();
    let out = run(&r, &spec("sleep", r#"{"seconds": 0.05}"#)).await;
    assert_eq!(
        (out.status, out.message.as_str(), out.url.as_deref()),
        (OutcomeStatus::Done, "slept 50ms", None),
        "sleep makes up no URL: its 結果 links to its log row"
    );

    let args = json!({"b": "=1+1", "a": [1, "$(x)"], "continue": {"page": 2}});
    let out = run(&r, &spec("echo", &args.to_string())).await;
    assert_eq!(out.status, OutcomeStatus::Done);
    assert_eq!(serde_json::from_str::<Value>(&out.message).unwrap(), args);
    assert_eq!(
        out.continue_args.map(Value::Object),
        Some(json!({"page": 2}))
    );

    // Cancelling a sleep ends it at once.
    let runner = r.runner();
    let cancel = CancellationToken::new();
    let job = r.prepare(&spec("sleep", r#"{"seconds": 200}"#)).unwrap();
    let task = tokio::spawn({
        let (runner, cancel) = (runner.clone(), cancel.clone());
        async move { runner.run(job, cancel).await }
    });
    cancel.cancel();
    let out = tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
    assert_eq!(out.status, OutcomeStatus::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn builtin_sleep_honours_the_timeout_while_waiting_for_the_heavy_gate() {
    let r = Registry::from_toml_str(
        "[nap]\nbuiltin = \"sleep\"\nheavy = true\ntimeout = \"10s\"",
        STALE,
    )
    .unwrap();
    let runner = r.runner();
    let first = r.prepare(&spec("nap", r#"{"seconds": 8}"#)).unwrap();
    let second = r.prepare(&spec("nap", r#"{"seconds": 8}"#)).unwrap();
    let (a, b) = tokio::join!(
        runner.run(first, CancellationToken::new()),
        runner.run(second, CancellationToken::new()),
    );
    assert_eq!(a.status, OutcomeStatus::Done);
    // Waited 8s for the gate, then had 2s left of its 10s: timed out, never overlapping.
    assert_eq!(b.status, OutcomeStatus::TimedOut, "{b:?}");
    assert_eq!(b.duration, Duration::from_secs(10));
}

/// A person who may edit the spreadsheet writes a queue row whose 対象ラベル is an ssh option
/// carrying a shell command, for a "check a server" button configured the usual way. The real
/// binary runs against the emulator, with a stand-in for ssh that records its argv: the row
/// must end エラー naming the value and the rule, the stand-in must never start, and a plain
/// target must still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_written_as_an_option_is_refused_and_the_program_never_starts() {
    use crate::support::{self, *};
    use sheetq::queue::State;

    let emu = start_with_quota(sheetq::emulator::Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let record = dir.path().join("argv.log");
    let ssh = dir.path().join("fake-ssh");
    std::fs::write(
        &ssh,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done >> '{}'\necho >> '{}'\n",
            record.display(),
            record.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let commands = format!(
        "[commands.uptime]\nexec = [{}, \"-o\", \"BatchMode=yes\", \"{{target}}\", \"uptime\"]\n",
        toml_str(&ssh.display().to_string())
    );
    let config = crate::daemon::binary_config_with(
        &emu,
        dir.path(),
        "vm-argv",
        "heartbeat_interval = \"1s\"\n",
        &commands,
    );
    let log = dir.path().join("sheetq.log");
    let enqueuer = daemon_config(&emu, "enqueuer", &dir.path().join("enqueuer"), &[], "");
    let sheets = client(&emu, &enqueuer).await;
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };

    let proxy = "-oProxyCommand=sh -c 'id > /tmp/x'";
    let attempt = enqueue(
        sheets.as_ref(),
        &enqueuer,
        proxy,
        "稼働時間",
        "uptime",
        "",
        "",
    )
    .await;
    let _daemon = crate::daemon::Binary::start(&config, &log);
    let rows = wait_finished(&emu, std::slice::from_ref(&attempt), PATIENCE).await;
    let r = support::row_of(&rows, &attempt);
    assert!(
        r.state.is(State::Error),
        "the ProxyCommand row should be エラー: {r:#?}\n{}",
        show()
    );
    assert!(
        r.message.contains(&format!("{proxy:?}")) && r.message.contains("reads options"),
        "the message names the value and the rule: {:?}",
        r.message
    );
    assert!(
        !record.exists(),
        "the program started with {:?}",
        std::fs::read_to_string(&record).unwrap_or_default()
    );

    let plain = enqueue(
        sheets.as_ref(),
        &enqueuer,
        "web-1",
        "稼働時間",
        "uptime",
        "",
        "",
    )
    .await;
    let rows = wait_finished(&emu, std::slice::from_ref(&plain), PATIENCE).await;
    let r = support::row_of(&rows, &plain);
    assert!(
        r.state.is(State::Done),
        "a plain target runs: {r:#?}\n{}",
        show()
    );
    assert_eq!(
        read(&record),
        "[-o][BatchMode=yes][web-1][uptime]\n",
        "the program ran once, for web-1 only"
    );
    assert_no_quota_refusals(&emu);
}

/// A script that fails the first `fails` times it runs (counting runs in `runs`, in its
/// workdir), then succeeds.
fn flaky_script(fails: u32) -> String {
    format!(
        "echo run >> runs; n=$(wc -l < runs); echo \"attempt $n\"; \
         if [ \"$n\" -le {fails} ]; then echo \"broken $n\" >&2; exit 75; fi; echo ok"
    )
}

/// Runs `spec` with its output captured and every retry note collected as it is sent.
async fn run_retrying(
    registry: &Registry,
    spec: &JobSpec,
    cancel: CancellationToken,
) -> (Outcome, String, Vec<String>) {
    let job = registry.prepare(spec).unwrap_or_else(|e| panic!("{e}"));
    let capture = sheetq::joblog::Capture::new(20_000, None);
    let retrying = sheetq::commands::Retrying::unwatched();
    let mut noted = retrying.notes.subscribe();
    let seen = tokio::spawn(async move {
        let mut seen = Vec::new();
        while noted.changed().await.is_ok() {
            seen.extend(noted.borrow_and_update().clone());
        }
        seen
    });
    let outcome = tokio::time::timeout(
        PATIENCE,
        registry
            .runner()
            .run_logged(job, cancel, &capture, &retrying),
    )
    .await
    .expect("the job did not finish in time");
    drop(retrying);
    let seen = seen.await.unwrap();
    (outcome, capture.text(20_000), seen)
}

#[tokio::test]
async fn a_command_that_fails_twice_is_run_three_times_and_ends_done() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "flaky",
        &flaky_script(2),
        "retries = 3\nretry_delay = \"50ms\"",
    );
    let (out, log, notes) = run_retrying(&r, &spec("flaky", ""), CancellationToken::new()).await;
    assert_eq!(out.status, OutcomeStatus::Done, "{out:?}");
    assert_eq!(out.message, "ok", "the final message is the last attempt's");
    assert_eq!(read(dir.path().join("runs")).lines().count(), 3);
    for n in 1..=3 {
        assert!(
            log.contains(&format!("attempt {n}")),
            "attempt {n} missing from the log:\n{log}"
        );
    }
    assert!(
        log.contains("broken 2"),
        "a failed attempt's stderr is in the log:\n{log}"
    );
    // The last note the daemon would write is the running one of the second retry.
    let waiting: Vec<&String> = notes.iter().filter(|n| n.ends_with("秒後)")).collect();
    assert!(
        waiting
            .iter()
            .all(|n| n.starts_with("再試行 ") && n.contains("exit code 75")),
        "waiting notes name the retry and the failure: {notes:#?}"
    );
    assert!(
        notes
            .last()
            .is_some_and(|n| n.starts_with("再試行 2/3 実行中: exit code 75")),
        "the note while the second retry runs: {notes:#?}"
    );
}

#[tokio::test]
async fn only_the_outcomes_of_retry_on_are_retried() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "picky",
        "echo run >> runs; exit 1",
        "retries = 2\nretry_delay = \"10ms\"\nretry_on = [75]",
    );
    let (out, _, notes) = run_retrying(&r, &spec("picky", ""), CancellationToken::new()).await;
    assert_eq!(out.status, OutcomeStatus::Failed, "{out:?}");
    assert_eq!(
        read(dir.path().join("runs")).lines().count(),
        1,
        "exit 1 is not in retry_on"
    );
    assert!(notes.is_empty(), "{notes:#?}");
    assert!(
        !out.message.contains("試行"),
        "one attempt says nothing of attempts: {out:?}"
    );
}

#[tokio::test]
async fn a_job_failing_every_attempt_ends_with_the_last_failure_and_its_count() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "broken",
        &flaky_script(99),
        "retries = 2\nretry_delay = \"10ms\"",
    );
    let (out, _, _) = run_retrying(&r, &spec("broken", ""), CancellationToken::new()).await;
    assert_eq!(out.status, OutcomeStatus::Failed, "{out:?}");
    assert_eq!(read(dir.path().join("runs")).lines().count(), 3);
    assert!(
        out.message.contains("broken 3") && out.message.ends_with("(試行 3 回)"),
        "the last attempt's message and the count: {out:?}"
    );
}

#[tokio::test]
async fn a_cancel_during_the_wait_ends_the_retries() {
    let dir = tempfile::tempdir().unwrap();
    let r = script_registry(
        dir.path(),
        "slow-retry",
        &flaky_script(99),
        "retries = 1\nretry_delay = \"4m\"\ntimeout = \"1m\"",
    );
    let cancel = CancellationToken::new();
    // Stopped once the job waits for its retry: when its retry note goes out (a stop during
    // the attempt itself is another test's).
    let job = r
        .prepare(&spec("slow-retry", ""))
        .unwrap_or_else(|e| panic!("{e}"));
    let capture = sheetq::joblog::Capture::new(20_000, None);
    let retrying = sheetq::commands::Retrying::unwatched();
    let mut noted = retrying.notes.subscribe();
    let stopper = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            while noted.changed().await.is_ok() {
                if noted.borrow_and_update().iter().next().is_some() {
                    cancel.cancel();
                    return true;
                }
            }
            false
        })
    };
    let out = tokio::time::timeout(
        PATIENCE,
        r.runner().run_logged(job, cancel, &capture, &retrying),
    )
    .await
    .expect("the job did not finish in time");
    drop(retrying);
    assert!(
        stopper.await.unwrap(),
        "the job went into its retry wait with a note"
    );
    assert_eq!(out.status, OutcomeStatus::Cancelled, "{out:?}");
    assert!(
        out.message.contains("broken 1"),
        "what the attempt said: {out:?}"
    );
    assert_eq!(read(dir.path().join("runs")).lines().count(), 1);
}
