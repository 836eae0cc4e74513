//! What a log may carry (`logging::directives`): the most verbose log of the real binary
//! holds no credential of the service account (its private key, the signed JWT assertion,
//! an access token) and no webhook URL, whatever a dependency logs.

use std::time::Duration;

use sheetq::emulator::Quota;
use sheetq::queue::State;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_most_verbose_log_holds_no_credential_and_no_webhook_url() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook_secret = "T0PSECRET-hook-path-7f3a9";
    let url = format!("http://127.0.0.1:{}/services/{hook_secret}", free_port());
    let settings = format!(
        "[[notify]]\nname = \"ops\"\nurl = \"{url}\"\nformat = \"slack\"\non = [\"完了\"]\n"
    );
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-vv",
        &settings,
        "[commands.echo]\nbuiltin = \"echo\"\n",
    );
    let job = queue_one(&emu, dir.path(), false, "動作確認 (2秒)", "echo").await;
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start_with(&config, &log, &["-vv"]);
    wait_row(
        &emu,
        &job,
        "the job to end 完了",
        Duration::from_secs(40),
        |r| r.state.is(State::Done),
        queue_and_log(&emu, &log),
    )
    .await;
    // The notification is tried (and fails: nobody listens) at least once.
    wait_for(
        "a try of the notification",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("a notification was not sent")
                .then_some(())
        },
        queue_and_log(&emu, &log),
    )
    .await;
    daemon.kill();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("DEBUG sheetq"),
        "-vv turns on sheetq's own debug and trace lines; the log:\n{text}"
    );
    let key: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("key.json")).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("the key file: {e}"));
    let pem = key["private_key"].as_str().unwrap_or_default();
    let body_line = pem
        .lines()
        .find(|l| l.len() > 40 && !l.starts_with("-----"))
        .unwrap_or_else(|| panic!("the key has a PEM body: {pem}"));
    for (what, secret) in [
        ("a line of the private key", body_line),
        ("an access token", "ya29."),
        ("a signed JWT (its header)", "eyJhbGciOi"),
        ("the webhook URL's path", hook_secret),
    ] {
        assert!(
            !text.contains(secret),
            "the -vv log holds {what} ({secret:?}); the log:\n{text}"
        );
    }
}

/// Queues one job of `function` running `command` on サーバーA as `sheetq enqueue` does, after
/// `sheetq init` when `init`; its jobId.
async fn queue_one(
    emu: &sheetq::emulator::Emulator,
    dir: &std::path::Path,
    init: bool,
    function: &str,
    command: &str,
) -> String {
    let operator = daemon_config(emu, "operator", dir, &[], "");
    let sheets = client(emu, &operator).await;
    if init {
        sheetq::admin::init(sheets.as_ref(), &operator)
            .await
            .unwrap_or_else(|e| panic!("sheetq init: {e}"));
    }
    enqueue(
        sheets.as_ref(),
        &operator,
        "サーバーA",
        function,
        command,
        "{}",
        "",
    )
    .await
}

/// Waits for `job` to end 完了 and for the receiver to have taken a notification.
async fn done_and_notified(
    emu: &sheetq::emulator::Emulator,
    job: &str,
    log: &std::path::Path,
    bodies: &std::sync::Mutex<Vec<String>>,
) {
    wait_row(
        emu,
        job,
        "the job to end 完了",
        Duration::from_secs(40),
        |r| r.state.is(State::Done),
        queue_and_log(emu, log),
    )
    .await;
    wait_for(
        "the notification",
        Duration::from_secs(30),
        || (!bodies.lock().unwrap_or_else(|e| e.into_inner()).is_empty()).then_some(()),
        queue_and_log(emu, log),
    )
    .await;
}

/// Everything `_ジョブログ` holds, as text.
fn log_sheet(emu: &sheetq::emulator::Emulator) -> String {
    serde_json::to_string(
        &emu.values("'_ジョブログ'!A1:Z")
            .unwrap_or_else(|e| panic!("the log sheet: {e:?}")),
    )
    .unwrap_or_default()
}

/// Every file and directory under `dir`, with its permission bits.
fn modes_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        out.push((p.clone(), meta.permissions().mode() & 0o777));
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                todo.push(entry.path());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_umask_022_the_state_directory_is_private_and_a_jobs_own_files_are_not() {
    use std::os::unix::process::CommandExt;
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let report = dir.path().join("report.txt");
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-umask",
        "",
        &format!(
            "[commands.report]\nexec = [\"sh\", \"-c\", \"echo made > '{}'; echo done\"]\n",
            report.display()
        ),
    );
    let job = queue_one(&emu, dir.path(), false, "集計", "report").await;
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start_configured(&config, &log, &[], |command| {
        // SAFETY: umask(2) in the child before exec; async-signal-safe, allocates nothing.
        unsafe {
            command.pre_exec(|| {
                nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
                Ok(())
            });
        }
    });
    wait_row(
        &emu,
        &job,
        "the job to end 完了",
        Duration::from_secs(40),
        |r| r.state.is(State::Done),
        queue_and_log(&emu, &log),
    )
    .await;
    daemon.kill();
    let state = dir.path().join("state");
    let modes = modes_under(&state);
    assert!(
        modes.len() > 2,
        "the state directory holds the outbox and the job's output: {modes:?}"
    );
    for (path, mode) in &modes {
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(
            *mode,
            want,
            "{} is {mode:o} under umask 022; every local user could read it",
            path.display()
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let made = std::fs::metadata(&report)
        .unwrap_or_else(|e| panic!("the job wrote {}: {e}", report.display()))
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(
        made, 0o644,
        "a job's own file keeps the umask sheetq was started with"
    );
}

/// A local webhook receiver that answers 200 and keeps each body.
async fn hook() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::sync::{Arc, Mutex};
    let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = Arc::clone(&bodies);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let kept = Arc::clone(&kept);
            async move {
                kept.lock().unwrap_or_else(|e| e.into_inner()).push(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://127.0.0.1:{port}/hook"), bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_a_job_prints_whole_split_or_registered_shows_nowhere_as_itself() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let token = "tok-9d1e55a0c3f2";
    let runtime = "runtime-secret-77";
    let (url, bodies) = hook().await;
    let settings = format!(
        "[[notify]]\nname = \"ops\"\nurl = \"{url}\"\nformat = \"slack\"\non = [\"完了\"]\n"
    );
    // Prints the token whole, then split over two writes with a pause between them,
    // registers a value of its own and prints it, and ends with both on its last line.
    let script = "echo \"start $REPORT_TOKEN\"; \
        printf 'split %s' \"$(printf %s \"$REPORT_TOKEN\" | cut -c1-6)\"; sleep 0.3; \
        printf '%s\\n' \"$(printf %s \"$REPORT_TOKEN\" | cut -c7-)\"; \
        echo '::add-mask::runtime-secret-77'; echo 'then runtime-secret-77'; \
        echo \"to stderr $REPORT_TOKEN\" >&2; \
        echo 'a pattern: ghp_ABCDEFGH12345678 (from the config)'; \
        echo \"done $REPORT_TOKEN runtime-secret-77\"";
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-mask",
        &settings,
        &format!(
            "[commands.report]\nexec = [\"sh\", \"-c\", {}]\nenv = [\"REPORT_TOKEN\"]\nmask = [\"ghp_[A-Za-z0-9]{{8,}}\"]\n",
            toml::Value::String(script.to_string())
        ),
    );
    let job = queue_one(&emu, dir.path(), true, "集計", "report").await;
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start_configured(&config, &log, &[], |command| {
        command.env("REPORT_TOKEN", token);
    });
    done_and_notified(&emu, &job, &log, &bodies).await;
    let logs = run_sheetq(&config, &["logs", &job]).await;
    daemon.kill();
    let message = row_of(&queue_rows(&emu), &job).message.clone();
    let log_sheet = log_sheet(&emu);
    let file = std::fs::read_to_string(dir.path().join("state/logs").join(format!("{job}.log")))
        .unwrap_or_else(|e| panic!("the output file: {e}"));
    let notification = bodies.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
    let printed = String::from_utf8_lossy(&logs.stdout).into_owned();
    // The two streams are read apart, so a stderr line may land inside a split stdout
    // line in the merged output: the pieces are what must never show.
    assert!(
        file.contains("start ***")
            && file.contains("then ***")
            && file.contains("a pattern: *** (from the config)")
            && file.matches("***").count() >= 6,
        "the output keeps its shape, the values masked: {file}"
    );
    assert!(
        !file.contains("::add-mask::"),
        "the registering line is dropped: {file}"
    );
    for (place, text) in [
        ("メッセージ", &message),
        ("the _ジョブログ row", &log_sheet),
        ("the output file", &file),
        ("the notification", &notification),
        ("`sheetq logs`", &printed),
        (
            "the daemon's log",
            &std::fs::read_to_string(&log).unwrap_or_default(),
        ),
    ] {
        // The whole values, and each half of the token as the job printed it apart.
        for secret in [token, runtime, "1e55a0c3f2", "ghp_ABCDEFGH12345678"] {
            assert!(!text.contains(secret), "{place} holds {secret:?}: {text}");
        }
    }
    assert!(message.contains("done *** ***"), "メッセージ: {message:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_functions_output_stays_on_the_machine_and_sheetq_logs_prints_it() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (url, bodies) = hook().await;
    let printed_line = "salary table: alice 123456";
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-private",
        &format!(
            "[[notify]]\nname = \"ops\"\nurl = \"{url}\"\nformat = \"slack\"\non = [\"完了\"]\n"
        ),
        &format!(
            "[commands.payroll]\nexec = [\"sh\", \"-c\", \"echo '{printed_line}'; echo 'closing line 42'\"]\n\n\
             [[functions]]\nlabel = \"給与\"\ncommand = \"payroll\"\noutput = \"private\"\n"
        ),
    );
    let job = queue_one(&emu, dir.path(), true, "給与", "payroll").await;
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start(&config, &log);
    done_and_notified(&emu, &job, &log, &bodies).await;
    let logs = run_sheetq(&config, &["logs", &job]).await;
    daemon.kill();
    let message = row_of(&queue_rows(&emu), &job).message.clone();
    assert!(
        message.contains("output kept on the machine that ran it"),
        "メッセージ says where the output is: {message:?}"
    );
    let log_sheet = log_sheet(&emu);
    let panel = panel_row(&emu, "サーバーA", 8).join(" ");
    let notification = bodies.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
    for (place, text) in [
        ("メッセージ", &message),
        ("the _ジョブログ sheet", &log_sheet),
        ("the panel", &panel),
        ("the notification", &notification),
    ] {
        for line in [printed_line, "closing line 42"] {
            assert!(!text.contains(line), "{place} holds {line:?}: {text}");
        }
    }
    let printed = String::from_utf8_lossy(&logs.stdout);
    assert!(
        printed.contains(printed_line) && printed.contains("closing line 42"),
        "`sheetq logs` on this machine prints the whole output: {printed} {logs:?}"
    );
}
