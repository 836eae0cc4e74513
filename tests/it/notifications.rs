//! Webhook notifications (`[[notify]]`) with the real binary against the emulator and a
//! local HTTP receiver the test starts: one message per job's final outcome, after its last
//! retry, whatever the receiver answers first (a 500, a 429 storm) and across a `kill -9`
//! between the job's end and the send.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{RawQuery, State as Shared};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{json, Value};
use sheetq::emulator::{Emulator, Quota};

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(60);
const FUNCTION: &str = "動作確認 (2秒)";

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    at: Instant,
    status: u16,
    query: String,
    body: Value,
}

#[derive(Default)]
struct Book {
    /// Answers to give, in order (status, Retry-After seconds); then `otherwise`.
    plan: VecDeque<(u16, Option<u64>)>,
    otherwise: u16,
    hits: Vec<Hit>,
    /// How long each answer takes.
    delay: Duration,
}

/// A webhook receiver on 127.0.0.1 that answers as planned and keeps every request.
struct Receiver {
    port: u16,
    book: Arc<Mutex<Book>>,
    _server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start(plan: &[(u16, Option<u64>)], otherwise: u16) -> Receiver {
        let book = Arc::new(Mutex::new(Book {
            plan: plan.iter().copied().collect(),
            otherwise,
            hits: Vec::new(),
            delay: Duration::ZERO,
        }));
        let app = axum::Router::new()
            .route("/hook", post(answer))
            .with_state(Arc::clone(&book));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            port,
            book,
            _server: server,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn hits(&self) -> Vec<Hit> {
        self.book
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hits
            .clone()
    }

    /// The bodies it took (answered 2xx).
    fn taken(&self) -> Vec<Value> {
        self.hits()
            .into_iter()
            .filter(|h| (200..300).contains(&h.status))
            .map(|h| h.body)
            .collect()
    }

    fn answer_after(&self, delay: Duration) {
        self.book.lock().unwrap_or_else(|e| e.into_inner()).delay = delay;
    }

    fn answer_from_now(&self, status: u16) {
        self.book
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .otherwise = status;
    }
}

async fn answer(
    Shared(book): Shared<Arc<Mutex<Book>>>,
    RawQuery(query): RawQuery,
    body: String,
) -> (StatusCode, HeaderMap, &'static str) {
    let (status, after, delay) = {
        let mut book = book.lock().unwrap_or_else(|e| e.into_inner());
        let otherwise = book.otherwise;
        let (status, after) = book.plan.pop_front().unwrap_or((otherwise, None));
        book.hits.push(Hit {
            at: Instant::now(),
            status,
            query: query.unwrap_or_default(),
            body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
        });
        (status, after, book.delay)
    };
    tokio::time::sleep(delay).await;
    let mut headers = HeaderMap::new();
    if let Some(s) = after {
        headers.insert("retry-after", s.into());
    }
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        headers,
        "{}",
    )
}

/// A waiting queue row A..Q for `command` on `target`'s panel row of [`FUNCTION`].
fn waiting(job: &str, target: &str, command: &str) -> serde_json::Value {
    waiting_row(job, target, FUNCTION, command, "ops@example.com")
}

fn sh(name: &str, script: &str, extra: &str, work: &Path) -> String {
    format!(
        "[commands.{name}]\nexec = [\"/bin/sh\", \"-c\", {}]\nworkdir = {}\n{extra}\n",
        toml::Value::String(script.to_string()),
        toml::Value::String(work.display().to_string()),
    )
}

fn notify(url: &str, format: &str, on: &str) -> String {
    format!("[[notify]]\nname = \"ops\"\nurl = \"{url}\"\nformat = \"{format}\"\n{on}\n")
}

/// Starts the daemon for `jobs` (queue rows) with `commands` (TOML), returning it, its
/// config and its log.
fn start(
    emu: &Emulator,
    dir: &Path,
    jobs: Vec<Value>,
    commands: &str,
) -> (Binary, PathBuf, PathBuf) {
    let end = jobs.len() + 1;
    emu.set_values(&format!("'_ジョブキュー'!A2:Q{end}"), json!(jobs), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let config = binary_config_with(emu, dir, "vm-1", "", commands);
    let log = dir.join("sheetq.log");
    (Binary::start(&config, &log), config, log)
}

/// SIGTERM, then waits for the process to end (the drain writes what it has).
async fn stop(mut daemon: Binary) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    wait_for("the daemon to stop", WAIT, || daemon.exited(), String::new).await;
}

fn show<'a>(emu: &'a Emulator, log: &'a Path, hook: &'a Receiver) -> impl Fn() -> String + 'a {
    move || {
        format!(
            "{}\nreceiver: {:#?}\ndaemon log:\n{}",
            describe_queue(&queue_rows(emu)),
            hook.hits()
                .iter()
                .map(|h| (h.status, h.body.to_string()))
                .collect::<Vec<_>>(),
            std::fs::read_to_string(log).unwrap_or_default()
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_retried_twice_is_announced_once_after_its_last_attempt_even_when_the_hook_first_fails(
) {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[(500, None)], 200).await;
    let flaky =
        "echo run >> runs; n=$(wc -l < runs); if [ \"$n\" -le 2 ]; then exit 1; fi; echo fixed";
    let commands = sh(
        "flaky",
        flaky,
        "retries = 2\nretry_delay = \"200ms\"",
        dir.path(),
    ) + &notify(&hook.url(), "json", "on = [\"完了\", \"エラー\"]");
    let (daemon, _, log) = start(
        &emu,
        dir.path(),
        vec![waiting("flaky", "サーバーA", "flaky")],
        &commands,
    );
    let taken = wait_for(
        "the webhook to take the job's notification",
        WAIT,
        || {
            let taken = hook.taken();
            (!taken.is_empty()).then_some(taken)
        },
        show(&emu, &log, &hook),
    )
    .await;
    stop(daemon).await;
    let hits = hook.hits();
    assert_eq!(
        hits.iter().map(|h| h.status).collect::<Vec<_>>(),
        [500, 200],
        "one notice: refused once, then taken, never one per attempt:\n{}",
        show(&emu, &log, &hook)()
    );
    let body = &taken[0];
    assert_eq!(body["jobId"], "flaky");
    assert_eq!(body["state"], "完了", "the last attempt's outcome: {body}");
    assert_eq!(body["message"], "fixed");
    assert_eq!(body["target"], "サーバーA");
    assert_eq!(body["function"], FUNCTION);
    assert_eq!(body["requester"], "ops@example.com");
    let sid = emu.spreadsheet_id();
    let panel = body["panelUrl"].as_str().unwrap_or_default();
    assert!(
        panel.starts_with(&format!(
            "https://docs.google.com/spreadsheets/d/{sid}/edit#gid="
        )) && panel.contains("&range=A"),
        "a link to the panel row: {body}"
    );
    let log_url = body["logUrl"].as_str().unwrap_or_default();
    let log_row = log_url
        .strip_prefix(&log_link_prefix(&emu))
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("a link to a log row: {body}"));
    let linked = emu
        .values(&format!("'_ジョブログ'!A{log_row}"))
        .unwrap_or_default();
    assert_eq!(
        linked
            .first()
            .and_then(|r| r.first())
            .and_then(Value::as_str),
        Some("flaky"),
        "the log link leads to the job's own log row: {body}"
    );
    let panel_row: u32 = panel
        .rsplit_once("&range=A")
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or_else(|| panic!("{panel}"));
    assert_eq!(
        crate::support::panel_row(&emu, "サーバーA", panel_row)[1],
        FUNCTION,
        "the panel link leads to the function's row: {body}"
    );
    let daemon_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !daemon_log.contains(&hook.url()) && !daemon_log.contains(&format!(":{}/hook", hook.port)),
        "the webhook URL never appears in the daemon's log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_before_the_send_sends_the_notice_once_after_restart() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[], 503).await;
    let commands = sh("broken", "echo 'disk full' >&2; exit 1", "", dir.path())
        + &notify(&hook.url(), "google-chat", "");
    let (daemon, config, log) = start(
        &emu,
        dir.path(),
        vec![waiting("broken", "サーバーB", "broken")],
        &commands,
    );
    // The result is on the sheet and the receiver was tried (and failed): the notice waits
    // in the journal when the daemon is killed.
    wait_for(
        "the result on the sheet and a refused send",
        WAIT,
        || {
            let ended = queue_rows(&emu)
                .iter()
                .any(|r| r.job_id == "broken" && r.state.is_final());
            (ended && !hook.hits().is_empty()).then_some(())
        },
        show(&emu, &log, &hook),
    )
    .await;
    daemon.kill();
    assert!(hook.taken().is_empty(), "nothing was taken before the kill");
    let status = run_sheetq(&config, &["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("notifications (this machine): 1 waiting to be sent")
            && text.contains("ops job broken (エラー)"),
        "status shows the notice waiting:\n{text}"
    );
    assert!(
        !text.contains(&format!(":{}/hook", hook.port)),
        "status never shows the webhook URL:\n{text}"
    );
    hook.answer_from_now(200);
    let log2 = dir.path().join("sheetq-2.log");
    let again = Binary::start(&config, &log2);
    wait_for(
        "the notice to be sent after the restart",
        WAIT,
        || (!hook.taken().is_empty()).then_some(()),
        show(&emu, &log2, &hook),
    )
    .await;
    stop(again).await;
    let taken = hook.taken();
    assert_eq!(taken.len(), 1, "one message: {taken:#?}");
    let text = taken[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("❌ エラー: `サーバーB` / ") && text.contains("disk full"),
        "the Google Chat text: {text}"
    );
    let ids: Vec<String> = hook.hits().iter().map(|h| h.query.clone()).collect();
    assert!(
        ids.iter()
            .all(|q| q.starts_with("requestId=") && *q == ids[0]),
        "every send of one notice carries one requestId, so Google Chat shows it once: {ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_storm_is_ridden_out_each_job_announced_once_and_retry_after_honoured() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let storm: Vec<(u16, Option<u64>)> = vec![(429, Some(1)); 4];
    let hook = Receiver::start(&storm, 200).await;
    let commands = sh("broken", "exit 3", "", dir.path()) + &notify(&hook.url(), "slack", "");
    let jobs = vec![
        waiting("a", "サーバーA", "broken"),
        waiting("b", "サーバーB", "broken"),
        waiting("c", "サーバーC", "broken"),
    ];
    let (daemon, _, log) = start(&emu, dir.path(), jobs, &commands);
    wait_for(
        "the three notices to be taken",
        WAIT,
        || (hook.taken().len() >= 3).then_some(()),
        show(&emu, &log, &hook),
    )
    .await;
    stop(daemon).await;
    let hits = hook.hits();
    let taken = hook.taken();
    assert_eq!(
        taken.len(),
        3,
        "one message per job:\n{}",
        show(&emu, &log, &hook)()
    );
    for target in ["サーバーA", "サーバーB", "サーバーC"] {
        assert_eq!(
            taken
                .iter()
                .filter(|b| b["text"].as_str().unwrap_or_default().contains(target))
                .count(),
            1,
            "{target} announced once: {taken:#?}"
        );
    }
    for pair in hits.windows(2) {
        if pair[0].status == 429 {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap >= Duration::from_millis(900),
                "a send {gap:?} after a 429 asking for 1 s: {hits:#?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_daemons_job_is_announced_by_the_daemon_that_times_it_out() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let hook = Receiver::start(&[], 200).await;
    let dirs =
        [tempfile::tempdir(), tempfile::tempdir()].map(|d| d.unwrap_or_else(|e| panic!("{e}")));
    let commands = sh("long", "sleep 20", "", dirs[0].path()) + &notify(&hook.url(), "json", "");
    let settings = "heartbeat_interval = \"1s\"\ndead_after = \"3s\"\n";
    emu.set_values(
        "'_ジョブキュー'!A2:Q2",
        json!([waiting("long", "サーバーC", "long")]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let config = |i: usize, worker: &str| {
        binary_config_with(&emu, dirs[i].path(), worker, settings, &commands)
    };
    let logs = [0, 1].map(|i| dirs[i].path().join("sheetq.log"));
    let first = Binary::start(&config(0, "vm-1"), &logs[0]);
    wait_row(
        &emu,
        "long",
        "the job to run",
        WAIT,
        |r| r.state.is(sheetq::queue::State::Running),
        show(&emu, &logs[0], &hook),
    )
    .await;
    first.kill();
    let second = Binary::start(&config(1, "vm-2"), &logs[1]);
    wait_for(
        "the rescuer's notification",
        WAIT,
        || (!hook.taken().is_empty()).then_some(()),
        show(&emu, &logs[1], &hook),
    )
    .await;
    stop(second).await;
    let taken = hook.taken();
    assert_eq!(taken.len(), 1, "one message: {taken:#?}");
    assert_eq!(taken[0]["jobId"], "long");
    assert_eq!(taken[0]["state"], "タイムアウト", "{taken:#?}");
    assert!(
        taken[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("vm-1"),
        "it says whose heartbeat stopped: {taken:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_ends_while_its_daemon_stops_is_announced_before_the_daemon_exits() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[], 200).await;
    // A slow webhook: a daemon that did not wait for the send would exit before its answer,
    // and leave the notice unsent in its journal (to be sent again at its next start).
    hook.answer_after(Duration::from_millis(800));
    let commands =
        sh("ending", "sleep 2; exit 1", "", dir.path()) + &notify(&hook.url(), "json", "");
    let (daemon, config, log) = start(
        &emu,
        dir.path(),
        vec![waiting("ending", "サーバーA", "ending")],
        &commands,
    );
    wait_row(
        &emu,
        "ending",
        "the job to run",
        WAIT,
        |r| r.state.is(sheetq::queue::State::Running),
        show(&emu, &log, &hook),
    )
    .await;
    // SIGTERM while it runs: the drain lets it end, writes its result, and sends its notice.
    stop(daemon).await;
    let taken = hook.taken();
    assert_eq!(taken.len(), 1, "{}", show(&emu, &log, &hook)());
    assert_eq!(taken[0]["jobId"], "ending");
    assert_eq!(taken[0]["state"], "エラー");
    let status = run_sheetq(&config, &["status"]).await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        !text.contains("notifications (this machine)"),
        "the daemon exited only once the send was answered and noted:\n{text}"
    );
}

/// Approvals (docs/design.md §5.5) notify too: a channel with `on = ["承認待ち", "承認"]`
/// (the approvers' space) hears of a request, naming who may approve, and of its approval,
/// once each; the job's end then goes to the channels that want it, and a rejection as the
/// final state 却下.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_approval_its_approval_and_a_rejection_each_notify_once() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[], 200).await;
    let commands = format!(
        "[commands.echo]\nbuiltin = \"echo\"\n\n\
         [[functions]]\nlabel = \"{FUNCTION}\"\ncommand = \"echo\"\nargs = {{ greeting = \"hi\" }}\n\
         approvers = [\"lead@example.com\"]\n\n{}",
        notify(
            &hook.url(),
            "json",
            "on = [\"承認待ち\", \"承認\", \"完了\", \"却下\"]"
        )
    );
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", &commands);
    let operator = daemon_config(&emu, "operator", dir.path(), &[], "");
    let sheets = client(&emu, &operator).await;
    sheetq::admin::init(sheets.as_ref(), &operator)
        .await
        .unwrap_or_else(|e| panic!("sheetq init: {e}"));
    let mut jobs = Vec::new();
    for target in ["サーバーA", "サーバーB"] {
        jobs.push(
            enqueue(
                sheets.as_ref(),
                &operator,
                target,
                FUNCTION,
                "echo",
                r#"{"greeting":"hi"}"#,
                "alice@example.com",
            )
            .await,
        );
    }
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start(&config, &log);
    let requested = |job: &str| {
        hook.taken()
            .into_iter()
            .filter(|b| b["jobId"] == job && b["approvalStep"] == "requested")
            .count()
    };
    wait_for(
        "both requests for approval to be announced",
        WAIT,
        || (requested(&jobs[0]) == 1 && requested(&jobs[1]) == 1).then_some(()),
        show(&emu, &log, &hook),
    )
    .await;
    let request = hook
        .taken()
        .into_iter()
        .find(|b| b["jobId"] == jobs[0].as_str())
        .unwrap_or_default();
    assert_eq!(request["state"], "承認待ち", "{request}");
    assert!(
        request["message"]
            .as_str()
            .is_some_and(|m| m.contains("lead@example.com")),
        "the request names who may approve: {request}"
    );
    let approve = run_sheetq(&config, &["approve", &jobs[0], "--as", "lead@example.com"]).await;
    assert!(approve.status.success(), "{approve:?}");
    let reject = run_sheetq(&config, &["reject", &jobs[1], "--as", "lead@example.com"]).await;
    assert!(reject.status.success(), "{reject:?}");
    let by_job = |job: &str| -> Vec<String> {
        hook.taken()
            .into_iter()
            .filter(|b| b["jobId"] == job)
            .map(|b| b["state"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    wait_for(
        "the approved job's end and the rejection to be announced",
        WAIT,
        || (by_job(&jobs[0]).len() == 3 && by_job(&jobs[1]).len() == 2).then_some(()),
        show(&emu, &log, &hook),
    )
    .await;
    stop(daemon).await;
    assert_eq!(
        by_job(&jobs[0]),
        ["承認待ち", "承認", "完了"],
        "request, approval and end, once each:\n{}",
        show(&emu, &log, &hook)()
    );
    assert_eq!(
        by_job(&jobs[1]),
        ["承認待ち", "却下"],
        "{}",
        show(&emu, &log, &hook)()
    );
}

/// An editor's phishing label (a bare URL, markup, `@channel`, a direction override) on a
/// failed job reaches Slack and Google Chat quoted: inside code spans, its URL broken, the
/// override dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phishing_label_reaches_slack_and_google_chat_as_quoted_data() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[], 200).await;
    let label = "https://evil.example/sso-reset *至急* _再ログイン_ @channel\u{202e}";
    let commands = sh(
        "fail",
        "echo 'see https://evil.example/x'; exit 1",
        "",
        dir.path(),
    ) + &notify(&hook.url(), "slack", "on = [\"エラー\"]")
        + &notify(&hook.url(), "google-chat", "on = [\"エラー\"]").replace("\"ops\"", "\"chat\"");
    let (daemon, _, log) = start(
        &emu,
        dir.path(),
        vec![waiting("phish", label, "fail")],
        &commands,
    );
    let taken = wait_for(
        "both channels to take the job's notification",
        WAIT,
        || {
            let taken = hook.taken();
            (taken.len() >= 2).then_some(taken)
        },
        show(&emu, &log, &hook),
    )
    .await;
    stop(daemon).await;
    for body in &taken {
        let text = body["text"].as_str().unwrap_or_default();
        assert!(
            !text.contains("https://evil") && text.contains("https:／／evil.example"),
            "no bare URL a chat would link: {text}"
        );
        assert!(!text.contains('\u{202e}'), "no direction override: {text}");
        let head = text.lines().next().unwrap_or_default();
        let at = head
            .find("*至急*")
            .unwrap_or_else(|| panic!("the label in {head}"));
        assert_eq!(
            head[..at].matches('`').count() % 2,
            1,
            "the label's markup sits inside a code span: {head}"
        );
    }
}

/// A job refused before it ran (its function is not in the config, as a look-alike panel's
/// would be) is announced with its jobId and the reason, none of the sheet's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_job_is_announced_without_the_text_an_editor_typed() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[], 200).await;
    let label = "https://evil.example/sso-reset 至急";
    let commands = sh("fail", "exit 1", "", dir.path())
        + "[[functions]]\nlabel = \"別の機能\"\ncommand = \"fail\"\n\n"
        + &notify(&hook.url(), "slack", "on = [\"エラー\"]");
    let (daemon, _, log) = start(
        &emu,
        dir.path(),
        vec![waiting("refused-1", label, "fail")],
        &commands,
    );
    let taken = wait_for(
        "the refused job's notification",
        WAIT,
        || {
            let taken = hook.taken();
            (!taken.is_empty()).then_some(taken)
        },
        show(&emu, &log, &hook),
    )
    .await;
    stop(daemon).await;
    let text = taken[0]["text"].as_str().unwrap_or_default();
    assert!(
        !text.contains("evil") && !text.contains("至急") && !text.contains(FUNCTION),
        "none of the sheet's text: {text}"
    );
    assert!(
        text.contains("refused-1") && text.contains("reason: function"),
        "the jobId and why: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_is_announced_once_at_its_end_naming_the_target_that_failed() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let hook = Receiver::start(&[], 200).await;
    let restart = "if [ \"$SHEETQ_TARGET\" = web-2 ]; then echo broke; exit 1; fi; echo ok";
    let commands = sh("restart", restart, "", dir.path())
        + &notify(&hook.url(), "json", "on = [\"完了\", \"エラー\"]")
        + r#"
[[targets]]
label = "web-1"
groups = ["web"]
[[targets]]
label = "web-2"
groups = ["web"]
[[targets]]
label = "web-3"
groups = ["web"]
[[functions]]
label = "再起動"
command = "restart"
[[rollouts]]
name = "restart-web"
label = "web 再起動"
function = "再起動"
group = "web"
max_parallel = 3
max_failures = 1
"#;
    let (daemon, config, log) = start(&emu, dir.path(), Vec::new(), &commands);
    let out = run_sheetq(&config, &["rollout", "restart-web", "--wait"]).await;
    assert_eq!(out.status.code(), Some(4), "{}", output_text(&out));
    let taken = wait_for(
        "the webhook to take the rollout's notice",
        WAIT,
        || {
            let taken = hook.taken();
            (!taken.is_empty()).then_some(taken)
        },
        show(&emu, &log, &hook),
    )
    .await;
    // A notice of a target's job would have been recorded with its result, before the
    // rollout's end: by now, it would have been sent too.
    stop(daemon).await;
    let [body] = &hook.taken()[..] else {
        panic!(
            "one notice for the whole rollout, none per target: {taken:?}\n{}",
            show(&emu, &log, &hook)()
        );
    };
    assert_eq!(body["function"], "web 再起動", "{body}");
    assert_eq!(body["state"], "エラー", "{body}");
    assert_eq!(
        body["message"], "成功 2 · 失敗 1 · 中止 0 (失敗: web-2)",
        "the notice names the target that failed: {body}"
    );
}
