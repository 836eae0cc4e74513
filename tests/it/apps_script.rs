//! The Apps Script intake run for real: `apps-script/Code.js` and `intake.js`, unmodified,
//! executed by Node on `apps-script/runtime/gas.js` (the `SpreadsheetApp`, `LockService`,
//! `Session` and `Utilities` calls Code.js makes, each one request to the emulator's HTTP
//! API, as the person who ticked), then a sheetq daemon running what the script queued.
//!
//! Ignored by a plain `cargo test` (it needs Node); `.ci/run` runs it with
//! `cargo test --test it apps_script -- --ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::{QueueRow, State};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// A person of the spreadsheet who ticks boxes: their credentials (a service account of
/// the emulator standing for them), e-mail and the document lock's home.
struct Person {
    dir: tempfile::TempDir,
    credentials: PathBuf,
    email: String,
}

impl Person {
    fn new(emu: &Emulator, name: &str) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
        let credentials = dir.path().join("key.json");
        std::fs::write(&credentials, emu.credentials_json_for(name))
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", credentials.display()));
        Person {
            dir,
            credentials,
            email: Emulator::account(name),
        }
    }

    /// Ticks `cell` of sheet `title` and runs the project's onEdit for that edit, with the
    /// document lock under `lock_dir`; returns the toasts it showed.
    async fn tick(&self, emu: &Emulator, lock_dir: &Path, title: &str, cell: &str) -> Vec<String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps-script/runtime/on-edit.js");
        let mut cmd = Command::new(std::env::var("NODE").unwrap_or_else(|_| "node".into()));
        cmd.arg(&script)
            .args([
                "--api",
                &format!("{}/v4", emu.base_url().trim_end_matches('/')),
            ])
            .args(["--spreadsheet", emu.spreadsheet_id()])
            .arg("--credentials")
            .arg(&self.credentials)
            .args(["--user", &self.email])
            .arg("--lock-dir")
            .arg(lock_dir)
            .args(["--sheet", title, "--cell", cell]);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap_or_else(|e| panic!("the onEdit run panicked: {e}"))
            .unwrap_or_else(|e| panic!("cannot run node (install Node.js; .ci/run does): {e}"));
        assert!(
            out.status.success(),
            "onEdit for {title}!{cell} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let printed: Json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "on-edit.js printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        printed["toasts"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["message"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn rows_of(emu: &Emulator, command: &str) -> Vec<QueueRow> {
    queue_rows(emu)
        .into_iter()
        .filter(|r| r.command == command)
        .collect()
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_tick_run_through_code_js_is_queued_once_and_a_daemon_runs_it_to_done_on_its_panel_row() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let alice = Person::new(&emu, "alice");
    let lock_dir = alice.dir.path().to_path_buf();
    let function = panel_row(&emu, "サーバーA", 8)[1].clone();
    assert!(
        !function.is_empty(),
        "the demo's panel row 8 names a function"
    );

    let toasts = alice.tick(&emu, &lock_dir, "サーバーA", "A8").await;
    assert_eq!(
        toasts,
        [format!("受け付けました: {function}（サーバーA）")],
        "the person is told the press was taken"
    );
    let queued = queue_rows(&emu);
    let [row] = &queued[..] else {
        panic!("one tick must queue one row:\n{}", describe_queue(&queued));
    };
    assert!(row.state.is(State::Waiting), "{}", describe_queue(&queued));
    assert_eq!(row.target, "サーバーA");
    assert_eq!(row.function, function);
    assert_eq!(row.panel_sheet, "サーバーA");
    assert_eq!(row.panel_row, Some(8));
    assert_eq!(row.requester, alice.email, "the press names who ticked");
    let received = row.received_at.unwrap_or_else(|| {
        panic!(
            "受付日時 is not a time sheetq reads: {}",
            describe_queue(&queued)
        )
    });
    let age = chrono::Utc::now() - received;
    assert!(
        age > chrono::Duration::seconds(-5) && age < chrono::Duration::seconds(60),
        "受付日時 {received} is the moment of the tick, read in the spreadsheet's zone"
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[0],
        "FALSE",
        "the ▶ box goes back after the press"
    );

    // A second tick of the same button while the first waits: the duplicate guard answers.
    let toasts = alice.tick(&emu, &lock_dir, "サーバーA", "A8").await;
    let hhmm = received
        .with_timezone(&chrono_tz::Asia::Tokyo)
        .format("%H:%M")
        .to_string();
    assert_eq!(
        toasts,
        [format!("既に実行中です（依頼: {} / {hhmm}）", alice.email)],
        "the second tick is refused, naming who asked first and when"
    );
    assert_eq!(
        queue_rows(&emu).len(),
        1,
        "no second row for the same button"
    );

    // The daemon runs what the script queued; its result lands on the panel row.
    let fleet = Fleet::start(&emu, &["d1"], &[], "").await;
    let job = row.job_id.clone();
    let done = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    assert!(
        row_of(&done, &job).state.is(State::Done),
        "{}",
        describe_queue(&done)
    );
    wait_for(
        "panel row 8 to show 完了",
        WAIT,
        || {
            panel_row(&emu, "サーバーA", 8)[2]
                .contains("完了")
                .then_some(())
        },
        || format!("{:?}", panel_row(&emu, "サーバーA", 8)),
    )
    .await;
    fleet.stop(&emu).await;
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn two_people_ticking_one_button_at_once_queue_one_row_under_the_document_lock() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let alice = Person::new(&emu, "alice");
    let bob = Person::new(&emu, "bob");
    // One document, one lock, whoever runs the script.
    let lock_dir = alice.dir.path().to_path_buf();
    let (a, b) = tokio::join!(
        alice.tick(&emu, &lock_dir, "サーバーB", "A8"),
        bob.tick(&emu, &lock_dir, "サーバーB", "A8"),
    );
    let queued = queue_rows(&emu);
    assert_eq!(
        queued.len(),
        1,
        "two ticks of one button at once must queue one row:\n{}",
        describe_queue(&queued)
    );
    let told: Vec<&String> = a.iter().chain(&b).collect();
    assert_eq!(
        told.iter()
            .filter(|t| t.starts_with("受け付けました"))
            .count(),
        1,
        "exactly one press is taken: {told:?}"
    );
    assert_eq!(
        told.iter()
            .filter(|t| t.starts_with("既に実行中です"))
            .count(),
        1,
        "the other is told it is running already: {told:?}"
    );
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn an_index_tick_run_through_code_js_queues_a_panel_job_that_a_daemon_runs() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let alice = Person::new(&emu, "alice");
    let lock_dir = alice.dir.path().to_path_buf();
    let index = sheet_values(&emu, "▶パネル");
    let label = index
        .get(1)
        .and_then(|r| r.get(1))
        .and_then(Json::as_str)
        .unwrap_or_else(|| panic!("the demo's index row 2 has a label: {index:?}"))
        .to_string();

    let toasts = alice.tick(&emu, &lock_dir, "▶パネル", "A2").await;
    assert_eq!(
        toasts,
        [format!(
            "パネル「{label}」を準備します。少し待ってから開いてください"
        )]
    );
    let jobs = rows_of(&emu, "sheetq.panels");
    let [job] = &jobs[..] else {
        panic!(
            "an index tick queues one panel job:\n{}",
            describe_queue(&queue_rows(&emu))
        );
    };
    assert!(job.state.is(State::Waiting));
    assert_eq!(job.panel_row, None, "a panel job has no panel row");
    let open: Json = serde_json::from_str(&job.args_json)
        .unwrap_or_else(|e| panic!("argsJSON {:?} is not JSON: {e}", job.args_json));
    assert_eq!(open, serde_json::json!({ "open": [label] }));

    let toasts = alice.tick(&emu, &lock_dir, "▶パネル", "A2").await;
    assert_eq!(toasts, [format!("パネル「{label}」は準備中です")]);
    assert_eq!(rows_of(&emu, "sheetq.panels").len(), 1);

    let fleet = Fleet::start(&emu, &["d1"], &[], "").await;
    let id = job.job_id.clone();
    let done = wait_finished(&emu, std::slice::from_ref(&id), WAIT).await;
    assert!(
        row_of(&done, &id).state.is(State::Done),
        "{}",
        describe_queue(&done)
    );
    fleet.stop(&emu).await;
}
