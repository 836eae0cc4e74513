//! Sheet values are inert wherever sheetq shows them (docs/design.md §5.6), with the real
//! binary: what people typed, and what a job printed, reaches an operator's terminal through
//! `sheetq status` and `sheetq logs` with every control and format character made visible,
//! so no escape sequence retitles, clears or rewrites the terminal.

use std::time::Duration;

use sheetq::emulator::Quota;
use sheetq::queue::State;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

/// Escape sequences an editor can type into a cell: a terminal title, a clear screen, an
/// OSC 8 hyperlink, a cursor move with a line erase, and a direction override.
const ATTACK: &str = "\u{1b}]0;OWNED-TITLE\u{7}\u{1b}[2J\u{1b}]8;;https://evil.example/\u{1b}\\link\u{1b}]8;;\u{1b}\\\u{1b}[1A\u{1b}[K\u{202e}x";

/// Whether `text` holds a character that acts on a terminal (other than line feeds and tabs).
fn acts(text: &str) -> Option<char> {
    text.chars()
        .find(|c| (c.is_control() && *c != '\n' && *c != '\t') || *c == '\u{202e}')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_typed_or_printed_reach_no_terminal_through_status_or_logs() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The job prints the same sequences; `[[targets]]` makes a row naming the attack as
    // its target a refused job, shown under "recent failures".
    let script = "printf 'before\\033]0;OWNED-TITLE\\007\\033[2J\\033[1A\\033[Kafter\\n'";
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-inert",
        "",
        &format!(
            "[commands.show]\nexec = [\"sh\", \"-c\", {}]\n\n[[targets]]\nlabel = \"サーバーA\"\n",
            toml::Value::String(script.to_string())
        ),
    );
    let operator = daemon_config(&emu, "operator", dir.path(), &[], "");
    let sheets = client(&emu, &operator).await;
    let printed = enqueue(
        sheets.as_ref(),
        &operator,
        "サーバーA",
        "表示",
        "show",
        "{}",
        "",
    )
    .await;
    // An editor's row, typed straight into the (unprotected) queue.
    let typed = "typed-by-an-editor".to_string();
    let row = waiting_row(&typed, ATTACK, ATTACK, "show", ATTACK);
    let (code, reply) = person_appends(
        &emu,
        sheetq::emulator::DEFAULT_OWNER,
        "'_ジョブキュー'!A1",
        serde_json::json!([row]),
    )
    .await;
    assert_eq!(code, 200, "{reply}");
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start(&config, &log);
    for job in [&printed, &typed] {
        wait_row(
            &emu,
            job,
            "the job to end",
            Duration::from_secs(40),
            |r| r.state.is_final(),
            queue_and_log(&emu, &log),
        )
        .await;
    }
    assert!(
        row_of(&queue_rows(&emu), &typed).state.is(State::Error),
        "the look-alike job was refused: {}",
        describe_queue(&queue_rows(&emu))
    );

    let status = run_sheetq(&config, &["status"]).await;
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{status:?}");
    assert!(
        shown.contains("recent failures") && shown.contains("OWNED-TITLE"),
        "the refused job is listed: {shown}"
    );
    assert_eq!(
        acts(&shown),
        None,
        "`sheetq status` printed a character that acts on the terminal: {shown:?}"
    );
    assert!(
        shown.contains("\\u{1b}]0;OWNED-TITLE"),
        "the sequence is shown, made visible: {shown}"
    );

    let logs = run_sheetq(&config, &["logs", &printed]).await;
    let out = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.status.success() && out.contains("after"), "{logs:?}");
    assert_eq!(
        acts(&out),
        None,
        "`sheetq logs` printed a character that acts on the terminal: {out:?}"
    );
    let raw = run_sheetq(&config, &["logs", "--raw", &printed]).await;
    assert!(
        String::from_utf8_lossy(&raw.stdout).contains("\u{1b}]0;OWNED-TITLE\u{7}"),
        "--raw into a pipe prints the bytes as they are: {raw:?}"
    );
    daemon.kill();
}

/// One tick of a 50,000-character label (Google's most for a cell) is named in the intake's
/// line, the job's span, the refusal and the end: each cut to a line, the log grows by a few
/// kilobytes, not the label four times over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_of_a_fifty_thousand_character_label_adds_under_ten_kilobytes_to_the_log() {
    fifty_thousand_character_label("text").await;
}

/// The JSON lines (and journald, which gets the same field values) write each field as the
/// call site gave it: every field with sheet text is bounded where it is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_of_a_fifty_thousand_character_label_adds_under_ten_kilobytes_to_the_json_log() {
    fifty_thousand_character_label("json").await;
}

async fn fifty_thousand_character_label(format: &str) {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = binary_config_with(&emu, dir.path(), "vm-flood", "intake = \"poll\"\n", "");
    let log = dir.path().join("sheetq.log");
    let daemon = Binary::start_with(&config, &log, &["--log-format", format]);
    wait_for(
        "the daemon to start",
        Duration::from_secs(40),
        || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("daemon started")
                .then_some(())
        },
        queue_and_log(&emu, &log),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let label = format!("\u{1b}[2J{}", "長".repeat(50_000 - 4));
    let (code, reply) = person_writes(
        &emu,
        sheetq::emulator::DEFAULT_OWNER,
        "'サーバーA'!A20:B20",
        serde_json::json!([[true, label]]),
    )
    .await;
    assert_eq!(code, 200, "{reply}");
    let job = wait_for(
        "the press to be taken in and end",
        Duration::from_secs(40),
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.function.chars().count() > 1000 && r.state.is_final())
        },
        queue_and_log(&emu, &log),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    daemon.kill();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let grew = text.len() as u64 - before;
    assert!(
        grew < 10_000,
        "the {format} log grew by {grew} bytes for one tick of job {}:\n{}",
        job.job_id,
        &text[before as usize..]
    );
    assert!(
        !text.contains('\u{1b}') && !text.contains("\\u001b"),
        "no escape sequence reaches the {format} log"
    );
}

/// An editor cannot sort a panel's visible columns (A:F): 機能 is protected as H:J are, and
/// Google refuses the sort whole. The owner can: the hidden H:J stay, so each row's hidden
/// command is another function's. The next press still runs what the config says its
/// function runs, and `sheetq check` names the sort and its fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panel_sorted_by_a_person_still_runs_each_press_as_its_function_says() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let runs = dir.path().join("runs");
    let catalog = format!(
        "intake = \"poll\"\n\n\
         [commands.alpha]\nexec = [\"sh\", \"-c\", \"echo alpha >> '{r}'\"]\n\
         [commands.beta]\nexec = [\"sh\", \"-c\", \"echo beta >> '{r}'\"]\n\n\
         [[functions]]\nlabel = \"い 最初\"\ncommand = \"alpha\"\n\n\
         [[functions]]\nlabel = \"あ 次\"\ncommand = \"beta\"\n",
        r = runs.display()
    );
    let (config, _, sheets) =
        crate::daemon::protected_set_up(&emu, dir.path(), "vm-sorted", &catalog).await;
    let panel = sheets
        .metadata()
        .await
        .ok()
        .and_then(|m| m.sheet("サーバーA").map(|s| s.sheet_id))
        .unwrap_or_else(|| panic!("panel サーバーA"));
    // Row 8 is い (alpha), row 9 あ (beta); sorted by 機能, あ comes first. An editor's
    // sort is refused whole: the 機能 column is closed to people.
    let sort = serde_json::json!([{ "sortRange": {
        "range": { "sheetId": panel, "startRowIndex": 7, "endRowIndex": 9,
                   "startColumnIndex": 0, "endColumnIndex": 6 },
        "sortSpecs": [{ "dimensionIndex": 1, "sortOrder": "ASCENDING" }] } }]);
    let (code, reply) = person_batch(&emu, "mallory@example.com", sort).await;
    assert_ne!(
        code, 200,
        "an editor's sort of the labels is refused: {reply}"
    );
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[1],
        "い 最初",
        "the editor's sort moved nothing"
    );
    // The owner may still sort.
    let (code, reply) = raw(
        &emu,
        "POST",
        &format!("v4/spreadsheets/{}:batchUpdate", emu.spreadsheet_id()),
        Some(serde_json::json!({ "requests": [{ "sortRange": {
            "range": { "sheetId": panel, "startRowIndex": 7, "endRowIndex": 9,
                       "startColumnIndex": 0, "endColumnIndex": 6 },
            "sortSpecs": [{ "dimensionIndex": 1, "sortOrder": "ASCENDING" }] } }] })),
        Some(&emu.person_token(sheetq::emulator::DEFAULT_OWNER)),
    )
    .await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(
        panel_row(&emu, "サーバーA", 8)[1],
        "あ 次",
        "the sort moved the labels"
    );
    let check = run_sheetq(&config, &["check"]).await;
    let said = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(
        said.contains("rows were sorted or moved by a person") && said.contains("panels sync"),
        "check names the sort and its fix: {said}"
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    // The person presses あ 次, now on row 8 beside alpha's hidden cells.
    let (code, reply) = person_writes(
        &emu,
        "alice@example.com",
        "'サーバーA'!A8",
        serde_json::json!([[true]]),
    )
    .await;
    assert_eq!(code, 200, "{reply}");
    let job = wait_for(
        "the press of あ 次 to end",
        Duration::from_secs(40),
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.function == "あ 次" && r.state.is_final())
        },
        queue_and_log(&emu, &log),
    )
    .await;
    assert!(
        job.state.is(State::Done),
        "the press ran, not refused as an old panel: {}",
        describe_queue(&queue_rows(&emu))
    );
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap_or_default(),
        "beta\n",
        "it ran beta, あ 次's command, not the hidden alpha beside it"
    );
}
