//! Nothing on the sheet grants trust (docs/design.md §5.6), with the real binary against the
//! emulator: a queue row that says `continuation` (in any spelling: U+0085 after it, the
//! exact word) runs neither without its approval nor with the args it carries, even when the
//! owner wrote it, as an installable trigger running as the owner does; a command, function
//! or target that only looks like a configured one is refused, never matched; and a step a
//! command handed back, marked by sheetq with PROJECT-visible developer metadata that no
//! person can read or write, still runs with its own args (that no person sees the mark is
//! the emulator's to show: `emulator_metadata.rs`).

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use sheetq::emulator::{Emulator, Quota, DEFAULT_OWNER};
use sheetq::queue::State;

use crate::daemon::{protected_set_up, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

const FAST: Quota = Quota::scaled(50);

/// `deploy` records each run's jobId and args; `再起動` needs an approval and runs with the
/// config's args only; `段階` hands back a next step once.
fn catalog(dir: &Path) -> String {
    format!(
        r#"
[commands.deploy]
exec = ["sh", "-c", "echo \"$SHEETQ_JOB_ID $SHEETQ_ARGS_JSON\" >> '{runs}'; echo deployed"]

[commands.steps]
exec = ["sh", "-c", "echo \"$SHEETQ_JOB_ID $SHEETQ_ARGS_JSON\" >> '{runs}'; case \"$SHEETQ_ARGS_JSON\" in *'\"step\":1'*) echo '{{\"message\":\"step 1\",\"continue\":{{\"step\":2}}}}';; *) echo '{{\"message\":\"step 2\"}}';; esac"]

[[functions]]
label = "再起動"
command = "deploy"
args = {{ env = "staging" }}
approvers = ["lead@example.com"]

[[functions]]
label = "段階"
command = "steps"
args = {{ step = 1 }}
"#,
        runs = dir.join("runs").display()
    )
}

fn runs(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("runs")).unwrap_or_default()
}

/// Appends a 待機 row to the queue as the owner, with the owner's own token: what an
/// installable trigger (which runs as the owner) writes, whatever code it runs.
async fn owner_appends(
    emu: &Emulator,
    job: &str,
    function: &str,
    command: &str,
    args: &str,
    flags: &str,
    target: &str,
) {
    let mut row = waiting_row(job, target, function, command, "mallory@example.com");
    row[8] = json!(args);
    row[9] = json!(flags);
    let (status, reply) =
        person_appends(emu, DEFAULT_OWNER, "'_ジョブキュー'!A1", json!([row])).await;
    assert_eq!(
        status, 200,
        "the owner may write the protected queue: {reply}"
    );
}

async fn ended(emu: &Emulator, job: &str, log: &Path) -> sheetq::queue::QueueRow {
    wait_row(
        emu,
        job,
        "the row to end",
        WAIT,
        |r| r.state.is(State::Error) || r.state.is(State::Done),
        queue_and_log(emu, log),
    )
    .await;
    row_of(&queue_rows(emu), job).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flag_on_the_queue_grants_neither_approval_nor_args_whoever_wrote_it() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, _, _) = protected_set_up(&emu, dir.path(), "vm-trust", &catalog(dir.path())).await;
    let prod = r#"{"env":"prod","force":true}"#;
    // The attack of a look-alike panel through the owner's trigger: the flag with U+0085
    // (NEXT LINE) after it, which one trim kept and the other removed; then the plain word,
    // as a rewritten trigger could write it; and a fullwidth spelling.
    let forged = [
        ("forged-nel", "continuation\u{85}"),
        ("forged-word", "continuation"),
        ("forged-wide", "ｃontinuation,heavy"),
    ];
    for (job, flags) in forged {
        owner_appends(&emu, job, "再起動", "deploy", prod, flags, "サーバーA").await;
    }
    // A label of a listed function with U+0085 after it: only looks like it.
    owner_appends(
        &emu,
        "look-alike",
        "再起動\u{85}",
        "deploy",
        r#"{"env":"staging"}"#,
        "",
        "サーバーB",
    )
    .await;
    let log = dir.path().join("sheetq.log");
    let (_daemon, port) = Binary::start_listening(&config, &log);

    for (job, flags) in forged {
        let row = ended(&emu, job, &log).await;
        assert!(
            row.state.is(State::Error) && row.message.contains("sheetq did not write it"),
            "{job} ({flags:?}) is refused as a step sheetq never wrote: {:?} {:?}",
            row.state,
            row.message
        );
    }
    let row = ended(&emu, "look-alike", &log).await;
    assert!(
        row.state.is(State::Error)
            && row.message.contains("looks like \"再起動\"")
            && row.message.contains("U+0085"),
        "a label that only looks like the config's is refused, naming the character: {:?}",
        row.message
    );
    assert_eq!(runs(dir.path()), "", "nothing ran: no approval was given");

    let (_, metrics) = http_get(port, "/metrics").await;
    assert_eq!(
        sample(&metrics, "sheetq_jobs_refused_total{reason=\"unmarked\"}"),
        Some(3.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "sheetq_jobs_refused_total{reason=\"lookalike\"}"),
        Some(1.0),
        "{metrics}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("reason=unmarked") || text.contains("\"reason\":\"unmarked\""),
        "the log names each refusal's reason: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_sheetq_appended_runs_with_the_args_its_command_handed_back() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, operator, sheets) =
        protected_set_up(&emu, dir.path(), "vm-trust", &catalog(dir.path())).await;
    let first = enqueue(
        sheets.as_ref(),
        &operator,
        "サーバーA",
        "段階",
        "steps",
        r#"{"step":1}"#,
        "alice@example.com",
    )
    .await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let one = ended(&emu, &first, &log).await;
    assert!(one.state.is(State::Done), "step 1: {:?}", one.message);
    let next = wait_for(
        "the next step's row",
        WAIT,
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.job_id != first && r.function == "段階")
        },
        queue_and_log(&emu, &log),
    )
    .await;
    let two = ended(&emu, &next.job_id, &log).await;
    assert!(
        two.state.is(State::Done) && two.message.contains("step 2"),
        "the marked step runs with the args step 1 handed back: {:?} {:?}",
        two.state,
        two.message
    );
    assert!(
        runs(dir.path()).contains(&format!("{} {{\"step\":2}}", next.job_id)),
        "step 2 ran with its own args: {}",
        runs(dir.path())
    );

    // The owner turns the finished step back to 待機: its mark was spent by the claim that
    // took it, so it is no step any more and runs nothing again.
    let row = row_of(&queue_rows(&emu), &next.job_id).row;
    let (status, reply) = person_writes(
        &emu,
        DEFAULT_OWNER,
        &format!("'_ジョブキュー'!K{row}"),
        json!([["待機"]]),
    )
    .await;
    assert_eq!(status, 200, "the owner may write the queue: {reply}");
    wait_row(
        &emu,
        &next.job_id,
        "the replayed step to be refused",
        // A result that landed is watched for a minute (writeback::LANDED_WATCH), and its
        // row is not claimed again before that.
        Duration::from_secs(120),
        |r| r.state.is(State::Error),
        queue_and_log(&emu, &log),
    )
    .await;
    let replayed = row_of(&queue_rows(&emu), &next.job_id).clone();
    assert!(
        replayed.message.contains("sheetq did not write it"),
        "a spent mark vouches for nothing: {:?}",
        replayed.message
    );
    assert_eq!(
        runs(dir.path()).matches(&next.job_id).count(),
        1,
        "step 2 ran once: {}",
        runs(dir.path())
    );
}
