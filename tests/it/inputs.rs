//! A function's typed inputs with the real binary: `sheetq enqueue --input` checks them as
//! the daemon will and the job runs with them in its args; a value outside its rule is refused
//! before a row exists; a forged value written straight into the queue row is refused by the
//! daemon (エラー naming the input), never run.

use std::time::Duration;

use serde_json::json;
use sheetq::emulator::Quota;
use sheetq::queue::State;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// The command prints the args it was given; the function takes a version from a list and a
/// dry-run switch that defaults to true.
const CONFIG: &str = r#"[commands.show]
exec = ["/bin/sh", "-c", "printf '%s' \"$SHEETQ_ARGS_JSON\""]
[[targets]]
label = "サーバーA"
[[functions]]
label = "デプロイ"
command = "show"
args = { mode = "rolling" }
inputs = [
  { name = "version", label = "バージョン", type = "choice", choices = ["1.2.3", "1.2.4"], required = true },
  { name = "dry_run", type = "bool", default = true },
]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_checks_inputs_as_the_daemon_will_and_a_forged_value_in_the_queue_never_runs() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config_with(&emu, dir.path(), "vm-1", "", CONFIG);

    let outside = run_sheetq(
        &config,
        &[
            "enqueue",
            "--target",
            "サーバーA",
            "--function",
            "デプロイ",
            "--input",
            "version=9.9.9",
        ],
    )
    .await;
    assert_eq!(outside.status.code(), Some(2), "{}", output_text(&outside));
    assert!(
        output_text(&outside)
            .contains("バージョン = \"9.9.9\" is not among its choices (\"1.2.3\", \"1.2.4\")"),
        "the refusal names the input and its rule: {}",
        output_text(&outside)
    );
    let unknown = run_sheetq(
        &config,
        &[
            "enqueue",
            "--target",
            "サーバーA",
            "--function",
            "デプロイ",
            "--input",
            "colour=red",
        ],
    )
    .await;
    assert_eq!(unknown.status.code(), Some(2), "{}", output_text(&unknown));
    assert!(
        output_text(&unknown).contains("has the inputs version, dry_run"),
        "{}",
        output_text(&unknown)
    );
    let missing = run_sheetq(
        &config,
        &["enqueue", "--target", "サーバーA", "--function", "デプロイ"],
    )
    .await;
    assert_eq!(missing.status.code(), Some(2), "{}", output_text(&missing));
    assert!(
        output_text(&missing).contains("input バージョン is required"),
        "{}",
        output_text(&missing)
    );
    assert!(queue_rows(&emu).is_empty(), "nothing refused was queued");

    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);

    let queued = run_sheetq(
        &config,
        &[
            "enqueue",
            "--target",
            "サーバーA",
            "--function",
            "デプロイ",
            "--input",
            "version=1.2.4",
            "--wait",
        ],
    )
    .await;
    assert!(queued.status.success(), "{}", output_text(&queued));
    let rows = queue_rows(&emu);
    let [row] = &rows[..] else {
        panic!("one row: {}", describe_queue(&rows));
    };
    let args: serde_json::Value = serde_json::from_str(&row.args_json)
        .unwrap_or_else(|e| panic!("argsJSON {:?}: {e}", row.args_json));
    assert_eq!(
        args,
        json!({ "mode": "rolling", "version": "1.2.4", "dry_run": true }),
        "the inputs, the default filled in, over the function's args"
    );
    assert!(row.state.is(State::Done), "{}", describe_queue(&rows));
    assert!(
        row.message.contains("\"version\":\"1.2.4\""),
        "the command ran with the input in its args: {}",
        describe_queue(&rows)
    );

    // Seen where the job is seen: `show` and `status` name its inputs.
    let shown = run_sheetq(&config, &["show", &row.job_id]).await;
    assert!(
        output_text(&shown).contains("入力       version=1.2.4, dry_run=true"),
        "{}",
        output_text(&shown)
    );

    // The owner writes a row by hand with a version the list does not offer.
    let mut forged = waiting_row("forged", "サーバーA", "デプロイ", "show", "");
    forged[8] = json!(r#"{"mode":"rolling","version":"9.9.9","dry_run":false}"#);
    emu.set_values("'_ジョブキュー'!A3:Q3", json!([forged]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let rows = wait_ended_with_messages(&emu, &["forged"], WAIT, || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })
    .await;
    let forged = row_of(&rows, "forged");
    assert!(
        forged.state.is(State::Error)
            && forged
                .message
                .contains("バージョン = \"9.9.9\" is not among its choices"),
        "the forged value is refused, naming the input and its rule: {}",
        describe_queue(&rows)
    );
    let status = run_sheetq(&config, &["status"]).await;
    assert!(
        output_text(&status).contains("function=デプロイ [version=9.9.9, dry_run=false] at"),
        "a failure is listed with the inputs its row asked for: {}",
        output_text(&status)
    );
    assert!(
        forged.message.contains("so nothing ran") && !forged.message.contains("rolling"),
        "a refused job never runs its command: {}",
        describe_queue(&rows)
    );
}
