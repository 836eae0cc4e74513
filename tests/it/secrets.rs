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
    let operator = daemon_config(&emu, "operator", dir.path(), &[], "");
    let sheets = client(&emu, &operator).await;
    let job = enqueue(
        sheets.as_ref(),
        &operator,
        "サーバーA",
        "動作確認 (2秒)",
        "echo",
        "{}",
        "",
    )
    .await;
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
                .contains("notification not sent")
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
