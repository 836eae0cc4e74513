//! The Apps Script intake run for real: the spreadsheet's two kinds of Apps Script project,
//! each loading its own files unmodified (the bound one `intake.js`, `shell.js` and
//! `Code.js`; the owner's standalone one `intake.js`, `shell.js` and `Trigger.js`), executed
//! by Node on `apps-script/runtime/gas.js` (the `SpreadsheetApp`, `LockService`,
//! `PropertiesService`, `ScriptApp`, `Session` and `Utilities` calls they make, each Sheets
//! call one request to the emulator's HTTP API), then a sheetq daemon running what the
//! script queued. A project is made as a person makes it (`runtime/setup.js`: created, its
//! code put in, a script property set); a tick is the person's own write, then every trigger
//! Apps Script runs for it (`runtime/on-edit.js`): the bound project's simple `onEdit` as
//! that person, each installable trigger of either project as its owner;
//! `installSheetqTrigger` is run from a project's editor by an account (`runtime/run.js`).
//!
//! Ignored by a plain `cargo test` (it needs Node); `.ci/run` runs it with
//! `cargo test --test it apps_script -- --ignored`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value as Json};
use sheetq::emulator::auth::CLIENT_EMAIL;
use sheetq::emulator::seed::QUEUE_SHEET_ID;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::{QueueRow, State};

use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// People of the spreadsheet's Workspace domain (the emulator's owner is `owner@example.com`).
const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";
/// An editor of the spreadsheet who means harm (THREATS.md): of the domain, so Google names
/// her to the script.
const MALLORY: &str = "mallory@example.com";
/// Someone the spreadsheet is shared with from outside that domain.
const OUTSIDER: &str = "carol@elsewhere.example";

/// What one execution of a project did (`runtime/execution.js`).
#[derive(Debug, serde::Deserialize)]
struct Run {
    function: String,
    #[serde(rename = "as")]
    account: String,
    /// The kind of project it ran in: `bound` or `standalone`.
    project: String,
    ran: bool,
    toasts: Vec<Toast>,
    logs: Vec<String>,
    error: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct Toast {
    message: String,
}

impl Run {
    fn toasts(&self) -> Vec<String> {
        self.toasts.iter().map(|t| t.message.clone()).collect()
    }

    /// (project kind, function, account): which trigger this was.
    fn who(&self) -> (&str, &str, &str) {
        (&self.project, &self.function, &self.account)
    }
}

/// `node apps-script/runtime/<script>` with the arguments every runtime command against
/// `emu` needs.
fn node(emu: &Emulator, script: &str) -> Command {
    let base = emu.base_url();
    let base = base.trim_end_matches('/');
    let mut cmd = Command::new(std::env::var("NODE").unwrap_or_else(|_| "node".into()));
    cmd.arg(shipped().join("runtime").join(script))
        .args(["--api", &format!("{base}/v4")])
        .args(["--people-token", &format!("{base}/_emulator/people/token")]);
    cmd
}

/// The repository's `apps-script/`: the code a project holds unless an editor rewrote it.
fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("apps-script")
}

/// Runs `cmd` and parses what it printed.
async fn output<T: serde::de::DeserializeOwned>(what: String, mut cmd: Command) -> T {
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap_or_else(|e| panic!("{what} panicked: {e}"))
        .unwrap_or_else(|e| panic!("cannot run node (install Node.js; .ci/run does): {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// An Apps Script project of the emulator's spreadsheet (`runtime/project.js`): its kind,
/// owner and code, and what outlives one execution (the locks, script properties, installable
/// triggers), in its directory.
struct Project<'a> {
    emu: &'a Emulator,
    dir: tempfile::TempDir,
}

impl<'a> Project<'a> {
    /// The spreadsheet's bound project (Extensions → Apps Script), which Google shares with
    /// every editor, holding the code of `code`.
    async fn bound_with(emu: &'a Emulator, code: &Path) -> Project<'a> {
        let project = Project::empty(emu);
        project
            .setup(&[
                "--create",
                "bound",
                "--owner",
                &emu.owner(),
                "--container",
                emu.spreadsheet_id(),
            ])
            .await;
        project.put_code(code).await;
        project
    }

    /// The bound project holding the shipped `intake.js`, `shell.js` and `Code.js`.
    async fn bound(emu: &'a Emulator) -> Project<'a> {
        Project::bound_with(emu, &shipped()).await
    }

    /// A standalone project of `owner`'s (shared with no one), holding the shipped
    /// `intake.js`, `shell.js` and `Trigger.js`, with SHEETQ_SPREADSHEET_ID set to the
    /// emulator's spreadsheet, as the README says to.
    async fn standalone(emu: &'a Emulator, owner: &str) -> Project<'a> {
        let project = Project::empty(emu);
        project
            .setup(&["--create", "standalone", "--owner", owner])
            .await;
        project
            .setup(&[
                "--property",
                "SHEETQ_SPREADSHEET_ID",
                "--value",
                emu.spreadsheet_id(),
            ])
            .await;
        project
    }

    fn empty(emu: &'a Emulator) -> Project<'a> {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
        Project { emu, dir }
    }

    /// `runtime/setup.js` on this project: what a person does outside its functions.
    async fn setup(&self, args: &[&str]) {
        let mut cmd = node(self.emu, "setup.js");
        cmd.arg("--project-dir").arg(self.dir.path()).args(args);
        let _: Json = output(format!("setup.js {args:?}"), cmd).await;
    }

    /// Puts the code of directory `code` into the project (pasted, pushed, rewritten).
    async fn put_code(&self, code: &Path) {
        let mut cmd = node(self.emu, "setup.js");
        cmd.arg("--project-dir")
            .arg(self.dir.path())
            .arg("--code")
            .arg(code);
        let _: Json = output(format!("putting {} into a project", code.display()), cmd).await;
    }

    /// `who` runs `function` from the project's script editor.
    async fn run(&self, who: &str, function: &str) -> Run {
        let mut cmd = node(self.emu, "run.js");
        cmd.arg("--project-dir")
            .arg(self.dir.path())
            .args(["--as", who, "--function", function]);
        output(format!("{function} run by {who}"), cmd).await
    }
}

/// `editor` sets `cell` of sheet `title` to `value` (JSON): every run of a trigger it caused
/// in `projects`, in their order, each project's simple trigger before its installable ones.
/// Google runs them in no documented order, so a test puts first the one whose mistake it
/// means to catch. Whatever the scripts threw is in the runs.
async fn edit(
    emu: &Emulator,
    projects: &[&Project<'_>],
    editor: &str,
    title: &str,
    cell: &str,
    value: &str,
) -> Vec<Run> {
    let mut cmd = node(emu, "on-edit.js");
    cmd.args(["--spreadsheet", emu.spreadsheet_id()])
        .args(["--editor", editor])
        .args(["--sheet", title, "--cell", cell, "--value", value]);
    for p in projects {
        cmd.arg("--project").arg(p.dir.path());
    }
    #[derive(serde::Deserialize)]
    struct Runs {
        runs: Vec<Run>,
    }
    let runs: Runs = output(format!("{editor}'s edit of {title}!{cell}"), cmd).await;
    runs.runs
}

/// [`edit`] of a tick (`true`), asserting that no script threw.
async fn tick_in(
    emu: &Emulator,
    projects: &[&Project<'_>],
    editor: &str,
    title: &str,
    cell: &str,
) -> Vec<Run> {
    let runs = edit(emu, projects, editor, title, cell, "true").await;
    for r in &runs {
        assert!(
            r.error.is_none(),
            "{:?} threw on {editor}'s tick of {title}!{cell}: {:?}",
            r.who(),
            r.error
        );
    }
    runs
}

/// The emulator's spreadsheet with its Apps Script: the bound project, which holds the
/// shipped code, and, once the owner has made it and installed its trigger, the owner's
/// standalone project.
struct Intake<'a> {
    emu: &'a Emulator,
    bound: Project<'a>,
    standalone: Option<Project<'a>>,
}

impl<'a> Intake<'a> {
    /// The bound project alone: the open-queue intake.
    async fn bound_only(emu: &'a Emulator) -> Intake<'a> {
        Intake {
            emu,
            bound: Project::bound(emu).await,
            standalone: None,
        }
    }

    /// The bound project, and the owner's standalone project with its trigger installed as
    /// the README says: created, SHEETQ_SPREADSHEET_ID set, installSheetqTrigger run once by
    /// the owner.
    async fn with_standalone_trigger(emu: &'a Emulator) -> Intake<'a> {
        let standalone = Project::standalone(emu, &emu.owner()).await;
        let installed = standalone.run(&emu.owner(), "installSheetqTrigger").await;
        assert!(
            installed.ran && installed.error.is_none(),
            "the owner installs the standalone trigger: {installed:?}"
        );
        Intake {
            emu,
            bound: Project::bound(emu).await,
            standalone: Some(standalone),
        }
    }

    fn projects(&self) -> Vec<&Project<'a>> {
        std::iter::once(&self.bound)
            .chain(self.standalone.as_ref())
            .collect()
    }

    /// `editor` ticks `cell` of sheet `title`: every run of a trigger it caused, the bound
    /// project's first.
    async fn tick(&self, editor: &str, title: &str, cell: &str) -> Vec<Run> {
        tick_in(self.emu, &self.projects(), editor, title, cell).await
    }

    /// The toasts of a tick's runs, in order: what the person is told.
    async fn tick_toasts(&self, editor: &str, title: &str, cell: &str) -> Vec<String> {
        self.tick(editor, title, cell)
            .await
            .iter()
            .flat_map(Run::toasts)
            .collect()
    }
}

/// Protects `_ジョブキュー` as `sheetq init` does: a protected range whose only editor is the
/// service account (the owner can always edit), set by the service account itself. Returns
/// its id.
async fn protect_queue(emu: &Emulator) -> i32 {
    let request = json!({"requests": [{"addProtectedRange": {"protectedRange": {
        "range": {"sheetId": QUEUE_SHEET_ID},
        "description": "sheetq: only the daemon writes the queue",
        "editors": {"users": [CLIENT_EMAIL]},
    }}}]});
    let reply = ok(
        "addProtectedRange on the queue",
        hub(emu)
            .await
            .spreadsheets()
            .batch_update(from_json(request), emu.spreadsheet_id())
            .doit()
            .await,
    );
    to_json(&reply)["replies"][0]["addProtectedRange"]["protectedRange"]["protectedRangeId"]
        .as_i64()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or_else(|| panic!("addProtectedRange replied without an id: {reply:?}"))
}

/// The ids of the protected ranges of `_ジョブキュー`, as the owner reads them.
async fn queue_protections(emu: &Emulator) -> Vec<i64> {
    let token = emu.person_token(&emu.owner());
    let path = format!(
        "v4/spreadsheets/{}?fields=sheets(properties.sheetId,protectedRanges.protectedRangeId)",
        emu.spreadsheet_id()
    );
    let (status, got) = raw(emu, "GET", &path, None, Some(&token)).await;
    assert_eq!(status, 200, "{got}");
    got["sheets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["properties"]["sheetId"] == json!(QUEUE_SHEET_ID))
        .flat_map(|s| s["protectedRanges"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["protectedRangeId"].as_i64())
        .collect()
}

fn rows_of(emu: &Emulator, command: &str) -> Vec<QueueRow> {
    queue_rows(emu)
        .into_iter()
        .filter(|r| r.command == command)
        .collect()
}

/// How many `spreadsheets.batchUpdate` calls `user` made that were answered `status` (the
/// runtime's appendRow is one).
fn batch_updates_by(emu: &Emulator, user: &str, status: u16) -> usize {
    emu.requests()
        .iter()
        .filter(|r| r.method == "spreadsheets.batchUpdate" && r.user == user && r.status == status)
        .count()
}

/// A code directory with the shipped `intake.js` and `shell.js` and `code_js` as `Code.js`:
/// a bound project as someone rewrote it.
fn bound_code(code_js: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    for file in ["intake.js", "shell.js"] {
        std::fs::copy(shipped().join(file), dir.path().join(file))
            .unwrap_or_else(|e| panic!("cannot copy {file}: {e}"));
    }
    std::fs::write(dir.path().join("Code.js"), code_js)
        .unwrap_or_else(|e| panic!("cannot write Code.js: {e}"));
    dir
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_tick_run_through_code_js_is_queued_once_and_a_daemon_runs_it_to_done_on_its_panel_row() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let intake = Intake::bound_only(&emu).await;
    let function = panel_row(&emu, "サーバーA", 8)[1].clone();
    assert!(
        !function.is_empty(),
        "the demo's panel row 8 names a function"
    );
    // An earlier run of the script saw the heartbeat rows as they are now (none: no daemon
    // ever ran) three minutes ago, on its own clock.
    let three_minutes_ago = chrono::Utc::now().timestamp_millis() - 180_000;
    intake
        .bound
        .setup(&[
            "--property",
            "SHEETQ_HEARTBEATS_SEEN",
            "--value",
            &format!("{{\"sig\":\"[]\",\"since\":{three_minutes_ago}}}"),
        ])
        .await;

    let toasts = intake.tick_toasts(ALICE, "サーバーA", "A8").await;
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
    assert_eq!(row.requester, ALICE, "the press names who ticked");
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
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[2],
        "⏳ 受付済み (sheetq が止まっています: 2 分以上応答なし)",
        "no heartbeat changed for three minutes of the script's clock: the press says so"
    );
    assert_eq!(
        panel_row(&emu, "▶パネル", 2)[4],
        "⏳ 待機 1 件 · sheetq 停止中",
        "the index's 状況 agrees at once"
    );

    // A second tick of the same button while the first waits: the duplicate guard answers.
    let toasts = intake.tick_toasts(ALICE, "サーバーA", "A8").await;
    let hhmm = received
        .with_timezone(&chrono_tz::Asia::Tokyo)
        .format("%H:%M")
        .to_string();
    assert_eq!(
        toasts,
        [format!("既に実行中です（依頼: {ALICE} / {hhmm}）")],
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
    // One bound project, one document lock, whoever runs the script.
    let intake = Intake::bound_only(&emu).await;
    let (a, b) = tokio::join!(
        intake.tick_toasts(ALICE, "サーバーB", "A8"),
        intake.tick_toasts(BOB, "サーバーB", "A8"),
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
    let intake = Intake::bound_only(&emu).await;
    let index = sheet_values(&emu, "▶パネル");
    let label = index
        .get(1)
        .and_then(|r| r.get(1))
        .and_then(Json::as_str)
        .unwrap_or_else(|| panic!("the demo's index row 2 has a label: {index:?}"))
        .to_string();

    let toasts = intake.tick_toasts(ALICE, "▶パネル", "A2").await;
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

    let toasts = intake.tick_toasts(ALICE, "▶パネル", "A2").await;
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

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn the_standalone_trigger_installed_by_the_owner_takes_an_editors_press_into_the_protected_queue_and_a_daemon_runs_it(
) {
    let emu = start_with_quota(Quota::scaled(20)).await;
    protect_queue(&emu).await;
    let owner = emu.owner();
    let standalone = Project::standalone(&emu, &owner).await;

    let installed = standalone.run(&owner, "installSheetqTrigger").await;
    assert!(installed.ran && installed.error.is_none(), "{installed:?}");
    assert!(
        installed
            .logs
            .iter()
            .any(|l| l.contains("トリガーを入れました")),
        "the owner is told the trigger is in: {installed:?}"
    );
    let again = standalone.run(&owner, "installSheetqTrigger").await;
    assert!(
        again.error.is_none() && again.logs.iter().any(|l| l.contains("既にあります")),
        "running it twice keeps the one trigger: {again:?}"
    );
    // Were the owner to share the standalone project with alice, her install would be
    // refused twice over: she may not write the queue, and the owner's trigger is in.
    let other = standalone.run(ALICE, "installSheetqTrigger").await;
    assert!(
        other.error.as_deref().is_some_and(|e| e.contains(ALICE)),
        "an account that may not write the queue is refused, naming it: {other:?}"
    );

    let intake = Intake {
        emu: &emu,
        bound: Project::bound(&emu).await,
        standalone: Some(standalone),
    };
    let function = panel_row(&emu, "サーバーA", 8)[1].clone();
    let runs = intake.tick(ALICE, "サーバーA", "A8").await;
    let [simple, trusted] = &runs[..] else {
        panic!("one tick runs the bound simple trigger and the standalone trigger: {runs:?}");
    };
    assert_eq!(simple.who(), ("bound", "onEdit", ALICE));
    assert!(
        simple.toasts.is_empty(),
        "the bound simple trigger stands down on a protected queue: {simple:?}"
    );
    assert_eq!(
        trusted.who(),
        ("standalone", "onSheetqEdit", owner.as_str()),
        "the standalone trigger runs as its owner"
    );
    assert_eq!(
        trusted.toasts(),
        [format!("受け付けました: {function}（サーバーA）")]
    );

    let queued = queue_rows(&emu);
    let [row] = &queued[..] else {
        panic!("one tick must queue one row:\n{}", describe_queue(&queued));
    };
    assert!(row.state.is(State::Waiting), "{}", describe_queue(&queued));
    assert_eq!(
        row.requester, ALICE,
        "依頼者 is who ticked (the event's user), not the trigger's owner"
    );
    assert_eq!(row.function, function);
    assert_eq!(
        batch_updates_by(&emu, &owner, 200),
        1,
        "the row was appended by the trigger's owner"
    );
    assert_eq!(
        batch_updates_by(&emu, ALICE, 200) + batch_updates_by(&emu, ALICE, 400),
        0,
        "the person who ticked never wrote the queue"
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[0],
        "FALSE",
        "the ▶ box goes back after the press"
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[2],
        "⏳ 受付済み (開始待ち)",
        "the press is answered at once, before any daemon runs"
    );

    let fleet = Fleet::start(&emu, &["d1"], &[], "").await;
    let job = row.job_id.clone();
    let done = wait_finished(&emu, std::slice::from_ref(&job), WAIT).await;
    let finished = row_of(&done, &job);
    assert!(finished.state.is(State::Done), "{}", describe_queue(&done));
    assert_eq!(finished.requester, ALICE);
    fleet.stop(&emu).await;
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_person_outside_the_owners_domain_is_queued_with_an_empty_requester_never_the_owners() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    protect_queue(&emu).await;
    let owner = emu.owner();
    let intake = Intake::with_standalone_trigger(&emu).await;

    let toasts = intake.tick_toasts(OUTSIDER, "サーバーB", "A8").await;
    assert_eq!(toasts.len(), 1, "one press, one answer: {toasts:?}");
    assert!(toasts[0].starts_with("受け付けました"), "{toasts:?}");
    let queued = queue_rows(&emu);
    let [row] = &queued[..] else {
        panic!("one tick must queue one row:\n{}", describe_queue(&queued));
    };
    assert_eq!(
        row.requester, "",
        "Google does not show the script who ticked from outside the domain: 依頼者 stays empty, never {owner}"
    );
}

/// The owner's own press runs the bound simple trigger as the owner, who may write the
/// protected queue; it must leave the press to the standalone trigger, or the two (each
/// under its own project's lock) would queue it twice. The bound project runs first here:
/// had it taken the press, its toast would say so, whatever the standalone trigger then found.
#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn the_bound_simple_trigger_leaves_the_owners_press_to_the_standalone_trigger_which_queues_it_once(
) {
    let emu = start_with_quota(Quota::scaled(20)).await;
    protect_queue(&emu).await;
    let owner = emu.owner();
    let intake = Intake::with_standalone_trigger(&emu).await;
    let function = panel_row(&emu, "サーバーA", 8)[1].clone();

    let runs = intake.tick(&owner, "サーバーA", "A8").await;
    let [simple, trusted] = &runs[..] else {
        panic!("the owner's tick runs both triggers: {runs:?}");
    };
    assert_eq!(simple.who(), ("bound", "onEdit", owner.as_str()));
    assert!(
        simple.toasts.is_empty() && simple.logs.is_empty(),
        "the bound simple trigger, run as the owner, stands down on the protected queue: {simple:?}"
    );
    assert_eq!(
        trusted.who(),
        ("standalone", "onSheetqEdit", owner.as_str())
    );
    assert_eq!(
        trusted.toasts(),
        [format!("受け付けました: {function}（サーバーA）")],
        "the standalone trigger takes the owner's press"
    );
    let queued = queue_rows(&emu);
    let [row] = &queued[..] else {
        panic!(
            "the owner's press is queued once:\n{}",
            describe_queue(&queued)
        );
    };
    assert_eq!(row.requester, owner);
    assert_eq!(
        batch_updates_by(&emu, &owner, 200),
        1,
        "one append, the standalone trigger's"
    );
    assert_eq!(panel_row(&emu, "サーバーA", 8)[0], "FALSE");
}

/// If the queue loses its protection, it is the bound simple trigger's again: the standalone
/// trigger stands down (saying why in its owner's log), so the press is queued once, by the
/// person. The standalone trigger runs first here: had it taken the press, its toast would
/// say so.
#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn on_a_queue_no_longer_protected_the_standalone_trigger_stands_down_and_the_press_is_queued_once(
) {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let protection = protect_queue(&emu).await;
    let owner = emu.owner();
    let intake = Intake::with_standalone_trigger(&emu).await;
    let Some(standalone) = &intake.standalone else {
        unreachable!("made with the standalone trigger");
    };

    // The owner removes the protection.
    let token = emu.person_token(&owner);
    let path = format!("v4/spreadsheets/{}:batchUpdate", emu.spreadsheet_id());
    let remove = json!({"requests": [{"deleteProtectedRange": {"protectedRangeId": protection}}]});
    let (status, reply) = raw(&emu, "POST", &path, Some(remove), Some(&token)).await;
    assert_eq!(status, 200, "the owner may remove the protection: {reply}");
    assert_eq!(queue_protections(&emu).await, Vec::<i64>::new());

    let owners_before = batch_updates_by(&emu, &owner, 200);
    let runs = tick_in(&emu, &[standalone, &intake.bound], ALICE, "サーバーA", "A8").await;
    let [trusted, simple] = &runs[..] else {
        panic!("one tick runs both triggers: {runs:?}");
    };
    assert_eq!(
        trusted.who(),
        ("standalone", "onSheetqEdit", owner.as_str())
    );
    assert!(
        trusted.toasts.is_empty(),
        "the standalone trigger leaves an open queue alone: {trusted:?}"
    );
    assert!(
        trusted
            .logs
            .iter()
            .any(|l| l.contains("保護されていないため")),
        "and tells its owner why in the log: {trusted:?}"
    );
    assert_eq!(simple.who(), ("bound", "onEdit", ALICE));
    let [told] = &simple.toasts()[..] else {
        panic!("the bound simple trigger answers once: {simple:?}");
    };
    assert!(told.starts_with("受け付けました"), "{told}");
    let queued = queue_rows(&emu);
    assert_eq!(queued.len(), 1, "{}", describe_queue(&queued));
    assert_eq!(
        (
            batch_updates_by(&emu, ALICE, 200),
            batch_updates_by(&emu, &owner, 200) - owners_before
        ),
        (1, 0),
        "the person appended it, the owner's trigger did not"
    );
}

/// On a protected queue the bound simple trigger stands down for everyone: for a person
/// other than the owner Google would refuse the write anyway. It writes nothing and leaves the
/// ▶ ticked for the standalone trigger, which is not installed here, so nothing answers.
#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn the_bound_simple_trigger_leaves_a_protected_queue_alone_and_writes_nothing() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    protect_queue(&emu).await;
    let intake = Intake::bound_only(&emu).await;

    let runs = intake.tick(ALICE, "サーバーA", "A8").await;
    let [simple] = &runs[..] else {
        panic!("with no standalone trigger only the bound simple one runs: {runs:?}");
    };
    assert_eq!(
        simple.who(),
        ("bound", "onEdit", ALICE),
        "the simple trigger runs as the person"
    );
    assert!(
        simple.toasts.is_empty(),
        "it stands down without a word: {simple:?}"
    );
    assert_eq!(
        batch_updates_by(&emu, ALICE, 200) + batch_updates_by(&emu, ALICE, 400),
        0,
        "it never tries to write the queue"
    );
    let queued = queue_rows(&emu);
    assert!(
        queued.is_empty(),
        "no row is queued:\n{}",
        describe_queue(&queued)
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[0],
        "TRUE",
        "the ▶ stays ticked, for the standalone trigger to take"
    );
}

/// Mallory, an editor, rewrites the bound project's Code.js (Google shares a bound project
/// with every editor): her `onEdit` tries to remove the queue's protection and to append a
/// row naming bob as 依頼者, with an approval line and the continuation flag. Her simple
/// trigger runs as her, and Google refuses both: nothing is written and the queue stays
/// protected. The owner's standalone trigger, whose code she cannot see, ignores her edit.
#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_rewritten_bound_script_runs_as_its_editor_and_cannot_write_a_row_into_the_protected_queue(
) {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    set_up_for_approvals(&emu, dir.path()).await;
    let protections = queue_protections(&emu).await;
    assert_eq!(protections.len(), 1, "sheetq init protected the queue");
    let intake = Intake::with_standalone_trigger(&emu).await;

    let forged = bound_code(&format!(
        r#"// Mallory's Code.js: whatever an editor puts into the bound project.
function onEdit(e) {{
  var queue = e.source.getSheetByName(QUEUE_SHEET);
  var types = [SpreadsheetApp.ProtectionType.SHEET, SpreadsheetApp.ProtectionType.RANGE];
  types.forEach(function (t) {{ queue.getProtections(t).forEach(function (p) {{
    try {{
      p.remove();
      console.log('protection removed');
    }} catch (err) {{
      console.log('removing the protection was refused: ' + err.message);
    }}
  }}); }});
  var header = queue.getDataRange().getValues()[0];
  var cols = queueColumns(header).index;
  var row = queueRow(header, {{
    jobId: 'forged-1', wallMs: Date.now(), requester: '{BOB}', panelSheet: 'サーバーA',
    panelRow: 8, target: 'サーバーA', fn: '{APPROVED}', command: 'record', argsJson: '{{}}',
    flags: 'continuation',
  }});
  row[cols.approvals] = '{BOB} 2026/01/01 00:00:00 #forged-1';
  queue.appendRow(row);
}}
"#
    ));
    intake.bound.put_code(forged.path()).await;

    let runs = edit(
        &emu,
        &intake.projects(),
        MALLORY,
        "サーバーA",
        "M20",
        "\"hello\"",
    )
    .await;
    let [hers, trusted] = &runs[..] else {
        panic!("her edit runs her simple trigger and the owner's standalone one: {runs:?}");
    };
    assert_eq!(
        hers.who(),
        ("bound", "onEdit", MALLORY),
        "a bound simple trigger runs as whoever edited"
    );
    assert!(
        hers.logs
            .iter()
            .any(|l| l.contains("removing the protection was refused")),
        "Google refuses to remove the protection for her: {hers:?}"
    );
    assert!(
        hers.error
            .as_deref()
            .is_some_and(|e| e.contains("protected cell or object")),
        "and refuses her row: {hers:?}"
    );
    assert!(
        trusted.who() == ("standalone", "onSheetqEdit", emu.owner().as_str())
            && trusted.error.is_none()
            && trusted.toasts.is_empty(),
        "the owner's trigger does nothing with an edit that is no tick: {trusted:?}"
    );

    let queued = queue_rows(&emu);
    assert!(
        queued.is_empty(),
        "nothing is written:\n{}",
        describe_queue(&queued)
    );
    assert_eq!(
        (
            batch_updates_by(&emu, MALLORY, 200),
            batch_updates_by(&emu, MALLORY, 400)
        ),
        (0, 2),
        "Google refused both her batchUpdates (the removal and the append)"
    );
    assert_eq!(
        queue_protections(&emu).await,
        protections,
        "the queue is still protected"
    );
}

/// A spreadsheet whose owner once ran the bound installSheetqTrigger of an earlier sheetq:
/// the bound project holds a trigger of theirs with handler onSheetqEdit, and the script
/// property SHEETQ_TRIGGER_OWNER. Then the bound project gets the shipped code and the owner
/// installs the standalone trigger, as the README's migration says.
async fn with_a_legacy_bound_trigger(emu: &Emulator) -> Intake<'_> {
    let earlier = bound_code(
        r#"// The bound installer of an earlier sheetq, as its owner ran it.
function installSheetqTrigger() {
  ScriptApp.newTrigger('onSheetqEdit').forSpreadsheet(SpreadsheetApp.getActive()).onEdit().create();
  PropertiesService.getScriptProperties()
    .setProperty('SHEETQ_TRIGGER_OWNER', Session.getEffectiveUser().getEmail());
}
function onSheetqEdit(e) {
  takePress(e, INTAKE.standalone);
}
"#,
    );
    let bound = Project::bound_with(emu, earlier.path()).await;
    let installed = bound.run(&emu.owner(), "installSheetqTrigger").await;
    assert!(installed.ran && installed.error.is_none(), "{installed:?}");
    bound.put_code(&shipped()).await;
    let standalone = Project::standalone(emu, &emu.owner()).await;
    let installed = standalone.run(&emu.owner(), "installSheetqTrigger").await;
    assert!(installed.error.is_none(), "{installed:?}");
    Intake {
        emu,
        bound,
        standalone: Some(standalone),
    }
}

/// The bound installable trigger an earlier sheetq installed still fires, as the owner, on
/// every edit; the shipped bound project has no onSheetqEdit, so it runs nothing. The bound
/// simple trigger logs how to remove it on every edit, and shows the owner, when it is them
/// who edited, what to do.
#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_legacy_bound_trigger_finds_no_handler_and_its_owner_is_told_to_delete_it() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    protect_queue(&emu).await;
    let owner = emu.owner();
    let intake = with_a_legacy_bound_trigger(&emu).await;
    let function = panel_row(&emu, "サーバーA", 8)[1].clone();

    let runs = intake.tick(ALICE, "サーバーA", "A8").await;
    let [simple, legacy, trusted] = &runs[..] else {
        panic!("one tick runs the bound simple trigger, the legacy bound trigger and the standalone trigger: {runs:?}");
    };
    assert_eq!(simple.who(), ("bound", "onEdit", ALICE));
    assert!(
        simple.toasts.is_empty(),
        "alice is not shown what only the owner can do: {simple:?}"
    );
    assert!(
        simple
            .logs
            .iter()
            .any(|l| l.contains("トリガーを削除") && l.contains(&owner)),
        "the log says whose trigger to delete: {simple:?}"
    );
    assert_eq!(legacy.who(), ("bound", "onSheetqEdit", owner.as_str()));
    assert!(
        !legacy.ran,
        "the legacy bound trigger finds no handler in the shipped bound project: {legacy:?}"
    );
    assert_eq!(
        trusted.who(),
        ("standalone", "onSheetqEdit", owner.as_str())
    );
    assert_eq!(
        trusted.toasts(),
        [format!("受け付けました: {function}（サーバーA）")]
    );
    let queued = queue_rows(&emu);
    assert_eq!(
        queued.len(),
        1,
        "queued once, by the standalone trigger:\n{}",
        describe_queue(&queued)
    );
    assert_eq!(batch_updates_by(&emu, &owner, 200), 1);

    // The owner edits a cell: they are shown the way out, none of it a bound function.
    let runs = edit(
        &emu,
        &intake.projects(),
        &owner,
        "サーバーA",
        "M20",
        "\"note\"",
    )
    .await;
    let told: Vec<String> = runs
        .iter()
        .filter(|r| r.project == "bound")
        .flat_map(Run::toasts)
        .collect();
    let [told] = &told[..] else {
        panic!("the owner is told once: {runs:?}");
    };
    for step in [
        "「トリガー」（Triggers）でこのトリガーを削除",
        "SHEETQ_TRIGGER_OWNER を削除",
        "スタンドアロン プロジェクトで installSheetqTrigger を実行",
    ] {
        assert!(told.contains(step), "{told:?} lacks {step:?}");
    }
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_cancel_tick_run_through_code_js_ends_the_waiting_job_cancelled_without_running_it() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let intake = Intake::bound_only(&emu).await;
    let function = panel_row(&emu, "サーバーA", 8)[1].clone();
    intake.tick_toasts(ALICE, "サーバーA", "A8").await;
    let queued = queue_rows(&emu);
    let [row] = &queued[..] else {
        panic!("one tick must queue one row:\n{}", describe_queue(&queued));
    };

    let toasts = intake.tick_toasts(ALICE, "サーバーA", "F8").await;
    assert_eq!(
        toasts,
        [format!(
            "中止を要求しました: {function}（待機中のジョブは実行されません）"
        )],
        "the person is told the stop was asked for"
    );
    let asked = queue_rows(&emu);
    let asked = row_of(&asked, &row.job_id);
    assert!(
        asked.cancel_request.starts_with(&format!("{ALICE} "))
            && asked.cancel_request.ends_with(&format!(" #{}", row.job_id))
            && asked.state.is(State::Waiting),
        "中止要求 names who ticked, when, and the job: {asked:#?}"
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[5],
        "FALSE",
        "the ■ box goes back after the tick"
    );

    let fleet = Fleet::start(&emu, &["d1"], &[], "").await;
    let job = row.job_id.clone();
    let ended = wait_for(
        "the job to end キャンセル with its message",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let r = row_of(&rows, &job);
            (r.state.is(State::Cancelled) && !r.message.is_empty()).then(|| r.clone())
        },
        || describe_queue(&queue_rows(&emu)),
    )
    .await;
    assert!(
        ended.message.starts_with(&format!("中止: {ALICE} ")) && ended.started_at.is_none(),
        "the job never ran, and says who stopped it: {ended:#?}"
    );
    wait_for(
        "panel row 8 to show キャンセル",
        WAIT,
        || {
            panel_row(&emu, "サーバーA", 8)[2]
                .contains("キャンセル")
                .then_some(())
        },
        || format!("{:?}", panel_row(&emu, "サーバーA", 8)),
    )
    .await;
    fleet.stop(&emu).await;

    let toasts = intake.tick_toasts(ALICE, "サーバーA", "F8").await;
    assert_eq!(
        toasts,
        [format!(
            "{function} に中止できるジョブはありません（待機中・承認待ち・実行中のジョブがありません）"
        )],
        "a ■ on a finished job changes nothing and says so"
    );
    assert_eq!(
        row_of(&queue_rows(&emu), &job).cancel_request,
        asked.cancel_request,
        "the finished row is left as it was"
    );
}

// ---------------------------------------------------------------------------------------
// Approvals (docs/design.md §5.5): a function with `approvers` has its jobs held as 承認待ち
// until enough of them tick 承認 (column K of its panel row); the standalone trigger writes
// each tick as a line of who and when into the job's 承認 cell, and the daemon counts the
// lines of listed approvers other than 依頼者.

/// Someone of the owner's Workspace domain (so the script is told who ticked) whom the
/// approval tests' function does not list as an approver.
const CAROL: &str = "carol@example.com";

/// The demo's function on panel row 8 that the approval tests' config makes need approval.
const APPROVED: &str = "動作確認 (2秒)";

/// The config of the approval tests: [`APPROVED`] runs `record`, which writes its jobId as
/// one line into `ran` each time it runs; bob alone approves it, and one approval is enough.
fn approval_catalog(ran: &Path) -> String {
    let script = format!(
        "echo \"$SHEETQ_JOB_ID\" >> {}; echo \"$SHEETQ_JOB_ID\"",
        ran.display()
    );
    format!(
        r#"
[commands.record]
exec = ["/bin/sh", "-c", {script}]

[[functions]]
label = "{APPROVED}"
command = "record"
approvers = ["{BOB}"]
approvals = 1
"#,
        script = toml::Value::String(script)
    )
}

/// As an operator sets a spreadsheet up: `sheetq init` protects the queue for sheetq's
/// service account (so only the owner's standalone trigger and sheetq write it) and adds the
/// columns an older queue lacks, 承認 among them; panel row 8 runs `record`, as
/// `sheetq panels sync` writes the config's function into the panel's hidden columns.
async fn set_up_for_approvals(emu: &Emulator, dir: &Path) {
    let setup = daemon_config(emu, "setup", dir, &[], "");
    let sheets = client(emu, &setup).await;
    sheetq::admin::init(sheets.as_ref(), &setup)
        .await
        .unwrap_or_else(|e| panic!("sheetq init: {e}"));
    let header = sheet_values(emu, "_ジョブキュー")
        .into_iter()
        .next()
        .unwrap_or_default();
    assert!(
        header.iter().any(|h| h == "承認"),
        "sheetq init adds the 承認 column to the queue: {header:?}"
    );
    assert_eq!(panel_row(emu, "サーバーA", 8)[1], APPROVED);
    set_cells(emu, "'サーバーA'!H8:I8", json!([["record", "{}"]]));
}

/// How many `spreadsheets.values.update` calls of a range of the queue `user` made that
/// were answered `status` (the write of a ■ or 承認 tick's cell is one).
fn queue_cell_writes_by(emu: &Emulator, user: &str, status: u16) -> usize {
    emu.requests()
        .iter()
        .filter(|r| {
            r.method == "spreadsheets.values.update"
                && r.user == user
                && r.status == status
                && r.ranges.iter().any(|range| range.contains("_ジョブキュー"))
        })
        .count()
}

/// The 承認 box of panel row `row` of `title`, as text.
fn approve_box(emu: &Emulator, title: &str, row: u32) -> String {
    emu.values(&format!("'{title}'!K{row}"))
        .unwrap_or_else(|e| panic!("cannot read {title}!K{row}: {e:?}"))
        .first()
        .and_then(|r| r.first())
        .map(sheetq::queue::cell_text)
        .unwrap_or_default()
}

/// The toast of an approval written for `who`.
fn approved_toast(who: &str) -> String {
    format!(
        "承認を記録しました: {APPROVED}（{who}）。sheetq が承認者かどうかを確かめ、承認者の承認だけを数えます"
    )
}

/// A spreadsheet set up for approvals ([`set_up_for_approvals`]) with its bound project, the
/// owner's standalone project and its installed trigger, and a daemon (the real binary) running the approval config; alice has
/// pressed ▶ on サーバーA's [`APPROVED`], and the daemon holds her job as 承認待ち.
struct AwaitingJob<'a> {
    emu: &'a Emulator,
    intake: Intake<'a>,
    job: String,
    ran: std::path::PathBuf,
    log: std::path::PathBuf,
    _daemon: crate::daemon::Binary,
    _dir: tempfile::TempDir,
}

impl<'a> AwaitingJob<'a> {
    async fn start(emu: &'a Emulator) -> AwaitingJob<'a> {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
        let ran = dir.path().join("ran.txt");
        let log = dir.path().join("sheetq.log");
        set_up_for_approvals(emu, dir.path()).await;
        let config = crate::daemon::binary_config_with(
            emu,
            dir.path(),
            "vm-approve",
            "",
            &approval_catalog(&ran),
        );
        let intake = Intake::with_standalone_trigger(emu).await;
        let daemon = crate::daemon::Binary::start(&config, &log);

        let toasts = intake.tick_toasts(ALICE, "サーバーA", "A8").await;
        assert_eq!(toasts, [format!("受け付けました: {APPROVED}（サーバーA）")]);
        let queued = queue_rows(emu);
        let [row] = &queued[..] else {
            panic!("one tick must queue one row:\n{}", describe_queue(&queued));
        };
        assert_eq!(row.requester, ALICE);
        let awaiting = AwaitingJob {
            emu,
            intake,
            job: row.job_id.clone(),
            ran,
            log,
            _daemon: daemon,
            _dir: dir,
        };
        wait_row(
            emu,
            &awaiting.job,
            "the daemon to hold alice's job as 承認待ち",
            WAIT,
            |r| r.state.is(State::AwaitingApproval),
            || awaiting.show(),
        )
        .await;
        awaiting
    }

    /// The job's queue row now.
    fn row(&self) -> QueueRow {
        row_of(&queue_rows(self.emu), &self.job).clone()
    }

    /// The jobIds `record` wrote, one a run.
    fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(&self.ran)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The queue, the record of runs and the daemon's log, for a failure.
    fn show(&self) -> String {
        format!(
            "{}\nqueue row: {:#?}\nruns: {:?}\ndaemon log:\n{}",
            describe_queue(&queue_rows(self.emu)),
            queue_rows(self.emu).iter().find(|r| r.job_id == self.job),
            self.runs(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }

    /// Lets the daemon poll for a while (dozens of polls), then asserts that the job still
    /// awaits approval and never ran: `why` says what should not have counted.
    async fn assert_still_awaiting(&self, why: &str) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let row = self.row();
        assert!(
            row.state.is(State::AwaitingApproval) && row.started_at.is_none(),
            "{why}: the job must stay 承認待ち:\n{}",
            self.show()
        );
        assert!(
            self.runs().is_empty(),
            "{why}: the job must not run:\n{}",
            self.show()
        );
    }

    /// Waits for the job to end 完了, and asserts it ran exactly once.
    async fn assert_runs_once(&self) {
        let done = wait_finished_or(self.emu, std::slice::from_ref(&self.job), WAIT, || {
            self.show()
        })
        .await;
        assert!(
            row_of(&done, &self.job).state.is(State::Done),
            "the approved job runs to 完了:\n{}",
            self.show()
        );
        assert_eq!(
            self.runs(),
            std::slice::from_ref(&self.job),
            "the approved job ran exactly once:\n{}",
            self.show()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn an_approvers_tick_is_written_into_the_jobs_approvals_and_the_daemon_then_runs_it_once() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let awaiting = AwaitingJob::start(&emu).await;
    let job = awaiting.job.clone();
    awaiting
        .assert_still_awaiting("no one approved it yet")
        .await;

    let toasts = awaiting.intake.tick_toasts(BOB, "サーバーA", "K8").await;
    assert_eq!(
        toasts,
        [approved_toast(BOB)],
        "bob is told his approval was written"
    );
    let approved = awaiting.row();
    assert!(
        approved.approvals.starts_with(&format!("{BOB} "))
            && approved.approvals.ends_with(&format!(" #{job}"))
            && !approved.approvals.contains('\n'),
        "承認 holds one line naming bob, when, and the job: {approved:#?}"
    );
    assert_eq!(
        approve_box(&emu, "サーバーA", 8),
        "FALSE",
        "the 承認 box goes back after the tick"
    );
    let owner = emu.owner();
    assert_eq!(
        (
            queue_cell_writes_by(&emu, &owner, 200),
            queue_cell_writes_by(&emu, BOB, 200) + queue_cell_writes_by(&emu, BOB, 400),
        ),
        (1, 0),
        "{owner}'s trigger wrote the 承認 cell, bob never wrote the queue"
    );

    // A second tick: bob's approval is there already, or the daemon has taken the job on.
    let again = awaiting.intake.tick_toasts(BOB, "サーバーA", "K8").await;
    assert!(
        again == [format!("既に承認済みです: {APPROVED}（{BOB}）")]
            || again == [format!("{APPROVED} に承認待ちのジョブはありません")],
        "{again:?}"
    );
    assert_eq!(
        awaiting.row().approvals,
        approved.approvals,
        "a second tick by bob writes no second line"
    );

    awaiting.assert_runs_once().await;
    assert_no_quota_refusals(&emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn the_requester_cannot_approve_her_own_job_and_it_stays_awaiting_approval() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let awaiting = AwaitingJob::start(&emu).await;

    let toasts = awaiting.intake.tick_toasts(ALICE, "サーバーA", "K8").await;
    assert_eq!(
        toasts,
        [format!(
            "自分の依頼は承認できません: {APPROVED}（依頼者以外の承認者が承認してください）"
        )],
        "alice is told she cannot approve what she asked for"
    );
    assert_eq!(
        awaiting.row().approvals,
        "",
        "nothing is written for a self-approval:\n{}",
        awaiting.show()
    );
    assert_eq!(
        approve_box(&emu, "サーバーA", 8),
        "FALSE",
        "the 承認 box goes back, refused or not"
    );
    awaiting
        .assert_still_awaiting("alice's tick on her own job")
        .await;
    assert_no_quota_refusals(&emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_tick_by_someone_not_among_the_approvers_is_written_but_never_counted() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let awaiting = AwaitingJob::start(&emu).await;
    let job = awaiting.job.clone();

    // Someone outside the owner's domain: Google does not tell the script who, and an
    // approval by no one is not written.
    let toasts = awaiting
        .intake
        .tick_toasts(OUTSIDER, "サーバーA", "K8")
        .await;
    let [told] = &toasts[..] else {
        panic!("one tick, one answer: {toasts:?}");
    };
    assert!(
        told.starts_with("承認できません: Google が押した人をスクリプトに知らせなかった"),
        "{told}"
    );
    assert_eq!(awaiting.row().approvals, "", "{}", awaiting.show());

    // carol is of the domain, so the script names her and writes her line; sheetq does not
    // find her among the approvers.
    let toasts = awaiting.intake.tick_toasts(CAROL, "サーバーA", "K8").await;
    assert_eq!(toasts, [approved_toast(CAROL)]);
    let carols = awaiting.row().approvals;
    assert!(
        carols.starts_with(&format!("{CAROL} ")) && carols.ends_with(&format!(" #{job}")),
        "carol's approval is written as any other: {carols:?}"
    );
    awaiting
        .assert_still_awaiting("carol is not among the approvers")
        .await;

    // The same job with an approver's line besides carol's: the daemon was holding it for
    // want of a counted approval, not for anything else.
    let toasts = awaiting.intake.tick_toasts(BOB, "サーバーA", "K8").await;
    assert_eq!(toasts, [approved_toast(BOB)]);
    let both = awaiting.row().approvals;
    let lines: Vec<&str> = both.lines().collect();
    assert!(
        lines.len() == 2 && lines[0] == carols && lines[1].starts_with(&format!("{BOB} ")),
        "bob's line is added after carol's, which is kept: {both:?}"
    );
    awaiting.assert_runs_once().await;
    assert_no_quota_refusals(&emu);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn an_approvers_cancel_tick_on_an_awaiting_job_ends_it_rejected_without_running_it() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let awaiting = AwaitingJob::start(&emu).await;
    let job = awaiting.job.clone();

    let toasts = awaiting.intake.tick_toasts(BOB, "サーバーA", "F8").await;
    assert_eq!(
        toasts,
        [format!(
            "中止を要求しました: {APPROVED}（承認待ちのジョブは実行されません）"
        )],
        "bob is told the job will not run"
    );
    let asked = awaiting.row();
    assert!(
        asked.cancel_request.starts_with(&format!("{BOB} "))
            && asked.cancel_request.ends_with(&format!(" #{job}")),
        "中止要求 names bob, when, and the job: {asked:#?}"
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[5],
        "FALSE",
        "the ■ box goes back after the tick"
    );

    wait_row(
        &emu,
        &job,
        "the job to end 却下",
        WAIT,
        |r| r.state.is(State::Rejected),
        || awaiting.show(),
    )
    .await;
    let ended = awaiting.row();
    assert!(
        ended.started_at.is_none() && awaiting.runs().is_empty(),
        "a rejected job never ran:\n{}",
        awaiting.show()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        awaiting.row().state.is(State::Rejected) && awaiting.runs().is_empty(),
        "却下 is final:\n{}",
        awaiting.show()
    );
    assert_no_quota_refusals(&emu);
}

/// With no standalone trigger, the bound simple trigger, which runs as the person, leaves the
/// protected queue alone: a 承認 or ■ tick writes nothing, and its box stays ticked for the
/// standalone trigger.
#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn the_bound_simple_trigger_writes_no_approval_or_stop_into_a_protected_queue() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    set_up_for_approvals(&emu, dir.path()).await;
    let mut row = waiting_row("job-awaiting", "サーバーA", APPROVED, "record", ALICE);
    row[10] = json!("承認待ち");
    seed_queue(&emu, vec![row]);
    let intake = Intake::bound_only(&emu).await;

    for cell in ["K8", "F8"] {
        let runs = intake.tick(BOB, "サーバーA", cell).await;
        let [simple] = &runs[..] else {
            panic!("with no standalone trigger only the bound simple one runs: {runs:?}");
        };
        assert_eq!(simple.who(), ("bound", "onEdit", BOB));
        assert!(
            simple.toasts.is_empty(),
            "the {cell} tick is left alone: {simple:?}"
        );
    }
    assert_eq!(
        (
            queue_cell_writes_by(&emu, BOB, 400),
            queue_cell_writes_by(&emu, BOB, 200)
        ),
        (0, 0),
        "bob's triggers never tried to write the queue"
    );
    let rows = queue_rows(&emu);
    let held = row_of(&rows, "job-awaiting");
    assert!(
        held.approvals.is_empty() && held.cancel_request.is_empty(),
        "nothing is written: {held:#?}"
    );
    assert_eq!(approve_box(&emu, "サーバーA", 8), "TRUE");
    assert_eq!(panel_row(&emu, "サーバーA", 8)[5], "TRUE");
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_press_through_code_js_takes_the_inputs_under_its_lock_and_the_daemon_runs_them() {
    use crate::inputs::{serial, PANEL_CONFIG};
    let emu = start_with_quota(Quota::scaled(20)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    crate::inputs::add_releases(&emu, &["v1.0", "v1.1"]);
    let config = crate::daemon::binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "intake = \"none\"\n",
        PANEL_CONFIG,
    );
    let synced = run_sheetq(&config, &["panels", "sync"]).await;
    assert!(synced.status.success(), "{}", output_text(&synced));
    let intake = Intake::bound_only(&emu).await;

    // Alice picks a version, unticks dry_run, picks a day and a build; 一言's word too.
    for (cell, value) in [
        ("M8", json!("1.2.4")),
        ("O8", json!(false)),
        ("Q8", json!(serial("2027-01-15"))),
        ("S8", json!("hello")),
        ("U8", json!("v1.1")),
        ("M9", json!("once")),
    ] {
        set_cells(&emu, &format!("'サーバーA'!{cell}"), json!([[value]]));
    }
    let toasts = intake.tick_toasts(ALICE, "サーバーA", "A8").await;
    assert_eq!(toasts, ["受け付けました: デプロイ（サーバーA）"]);
    let toasts = intake.tick_toasts(ALICE, "サーバーA", "A9").await;
    assert_eq!(toasts, ["受け付けました: 一言（サーバーA）"]);
    // A change after the press never reaches the job.
    set_cells(&emu, "'サーバーA'!M8", json!([["1.2.3"]]));
    assert_eq!(
        emu.values("'サーバーA'!M9")
            .unwrap_or_else(|e| panic!("{e:?}")),
        vec![vec![json!("-")]],
        "reset_inputs: the script puts the word back to its default"
    );

    let _daemon = crate::daemon::Binary::start(&config, &dir.path().join("sheetq.log"));
    let rows = wait_queue_finished(&emu, 2, "both presses to run", WAIT).await;
    let args_of = |function: &str| -> Json {
        let row = rows
            .iter()
            .find(|r| r.function == function)
            .unwrap_or_else(|| panic!("no {function} row: {}", describe_queue(&rows)));
        assert_eq!(row.requester, ALICE);
        serde_json::from_str(&row.args_json).unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(
        args_of("デプロイ"),
        json!({
            "mode": "rolling",
            "version": "1.2.4",
            "dry_run": false,
            "day": "2027-01-15",
            "note": "hello",
            "build": "v1.1",
        }),
        "the values as they were under the press's lock, a date as its day"
    );
    assert_eq!(args_of("一言"), json!({ "word": "once" }));
}

#[tokio::test]
#[ignore = "needs Node.js; .ci/run runs it with --ignored"]
async fn a_press_on_the_bulk_panel_through_code_js_starts_the_rollout_the_daemon_then_runs() {
    let emu = start_with_quota(Quota::scaled(20)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = crate::daemon::binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "intake = \"none\"\n",
        r#"[commands.show]
exec = ["/bin/sh", "-c", "printf '%s on %s' \"$SHEETQ_ARGS_JSON\" \"$SHEETQ_TARGET\""]
[[targets]]
label = "web-1"
groups = ["web"]
[[targets]]
label = "web-2"
groups = ["web"]
[[functions]]
label = "デプロイ"
command = "show"
inputs = [{ name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], default = "1.2.3" }]
[[rollouts]]
name = "deploy-web"
label = "web デプロイ"
function = "デプロイ"
group = "web"
max_parallel = 2
"#,
    );
    let synced = run_sheetq(&config, &["panels", "sync"]).await;
    assert!(synced.status.success(), "{}", output_text(&synced));
    let row = (1..=20)
        .find(|r| {
            panel_row(&emu, "一括", *r)
                .iter()
                .any(|c| c == "web デプロイ")
        })
        .unwrap_or_else(|| panic!("the 一括 panel has the rollout's row"));
    let intake = Intake::bound_only(&emu).await;
    set_cells(&emu, &format!("'一括'!M{row}"), json!([["1.2.4"]]));
    let toasts = intake.tick_toasts(ALICE, "一括", &format!("A{row}")).await;
    assert_eq!(toasts, ["受け付けました: web デプロイ（一括）"]);

    let _daemon = crate::daemon::Binary::start(&config, &dir.path().join("sheetq.log"));
    let rows = wait_queue_finished(&emu, 3, "the rollout and its two jobs to end", WAIT).await;
    let rollout = rows.iter().find(|r| r.is_rollout()).unwrap_or_else(|| {
        panic!(
            "the script queued the rollout's row: {}",
            describe_queue(&rows)
        )
    });
    assert!(
        rollout.state.is(sheetq::queue::State::Done) && rollout.requester == ALICE,
        "{}",
        describe_queue(&rows)
    );
    for target in ["web-1", "web-2"] {
        let job = row_of(
            &rows,
            &sheetq::rollout::child_job_id(&rollout.job_id, target),
        );
        assert!(
            job.state.is(sheetq::queue::State::Done)
                && job.message.contains(r#""version":"1.2.4""#),
            "{target} ran with the version picked under the script's lock: {}",
            describe_queue(&rows)
        );
    }
}
