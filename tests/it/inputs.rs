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
    set_cells(&emu, "'_ジョブキュー'!A3:Q3", json!([forged]));
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

/// A panel with inputs of every kind: a version from a list, a dry-run switch, a day, a note
/// with a pattern, a build from a range of the spreadsheet; and a function whose one input
/// returns to its default after each press.
pub(crate) const PANEL_CONFIG: &str = r#"[commands.show]
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
  { name = "day", label = "日付", type = "date", default = "2026-12-31" },
  { name = "note", label = "メモ", type = "text", pattern = "[a-z ]*", max_length = 20 },
  { name = "build", label = "ビルド", type = "choice", choices_from = "'リリース'!A2:A", pattern = "v[0-9.]+" },
]
[[functions]]
label = "一言"
command = "show"
reset_inputs = true
inputs = [{ name = "word", label = "言葉", type = "text", default = "-" }]
"#;

/// The sheet リリース that `PANEL_CONFIG`'s build input lists its choices from: a header, then
/// `builds` from A2.
pub(crate) fn add_releases(emu: &sheetq::emulator::Emulator, builds: &[&str]) {
    emu.batch_update(json!([{ "addSheet": { "properties": { "title": "リリース" } } }]))
        .unwrap_or_else(|e| panic!("cannot add the sheet リリース: {e:?}"));
    let rows: Vec<serde_json::Value> = std::iter::once("ビルド")
        .chain(builds.iter().copied())
        .map(|b| json!([b]))
        .collect();
    set_cells(
        emu,
        &format!("'リリース'!A1:A{}", rows.len()),
        serde_json::Value::Array(rows),
    );
}

/// Google's serial of a day (days since 1899-12-30), as a date cell holds it.
pub(crate) fn serial(day: &str) -> i64 {
    let day = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap_or_default();
    let epoch = chrono::NaiveDate::from_ymd_opt(1899, 12, 30).unwrap_or_default();
    (day - epoch).num_days()
}

/// The data-validation condition type of a cell of the panel, if any.
fn rule_of(emu: &sheetq::emulator::Emulator, row: u32, col: u32) -> Option<String> {
    emu.with_spreadsheet(|ss| {
        let sheet = ss.sheet_by_title("サーバーA")?;
        let v = sheet.cell(row, col)?.validation.as_ref()?;
        v["condition"]["type"].as_str().map(str::to_string)
    })
    .unwrap_or_else(|e| panic!("{e:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_on_the_panel_go_with_the_press_and_a_later_change_never_reaches_the_job() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The team's list of builds, a sheet of its own (one of them breaks the input's pattern).
    add_releases(&emu, &["v1.0", "v1.1", "v1.2; rm -rf /"]);
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "intake = \"poll\"\n",
        PANEL_CONFIG,
    );
    for args in [&["init"][..], &["panels", "sync"][..]] {
        let out = run_sheetq(&config, args).await;
        assert!(out.status.success(), "{args:?}: {}", output_text(&out));
    }

    // Next to ▶, each input's label and a cell with its default and its rule (columns L on:
    // right of the one 承認 column).
    let row8 = emu
        .values("'サーバーA'!L8:U8")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        row8.first().cloned().unwrap_or_default(),
        vec![
            json!("バージョン"),
            json!(""),
            json!("dry_run"),
            json!(true),
            json!("日付"),
            json!(serial("2026-12-31")),
            json!("メモ"),
            json!(""),
            json!("ビルド"),
        ],
        "labels, and defaults where the config has them"
    );
    let rules: Vec<Option<String>> = [12, 14, 16, 18, 20]
        .into_iter()
        .map(|col| rule_of(&emu, 7, col))
        .collect();
    assert_eq!(
        rules,
        [
            Some("ONE_OF_LIST".to_string()),
            Some("BOOLEAN".to_string()),
            Some("DATE_IS_VALID".to_string()),
            None,
            Some("ONE_OF_RANGE".to_string()),
        ],
        "a dropdown, a checkbox, a date rule, free text, a dropdown of the range"
    );

    // A person picks values and presses; right after the press is taken, someone else
    // changes the version.
    set_cells(
        &emu,
        "'サーバーA'!M8:U8",
        json!([[
            "1.2.4",
            "x",
            false,
            "x",
            serial("2027-01-15"),
            "x",
            "hello world",
            "x",
            "v1.1"
        ]]),
    );
    // The labels stay as written: put them back over the x's.
    for (cell, label) in [
        ("N8", "dry_run"),
        ("P8", "日付"),
        ("R8", "メモ"),
        ("T8", "ビルド"),
    ] {
        set_cells(&emu, &format!("'サーバーA'!{cell}"), json!([[label]]));
    }
    set_cells(&emu, "'サーバーA'!M9", json!([["once"]]));
    set_cells(&emu, "'サーバーA'!A8:A9", json!([[true], [true]]));
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };
    wait_for(
        "both presses to be taken in",
        WAIT,
        || (queue_rows(&emu).len() == 2).then_some(()),
        show,
    )
    .await;
    set_cells(&emu, "'サーバーA'!M8", json!([["1.2.3"]]));
    let rows = wait_queue_finished(&emu, 2, "both jobs to finish", WAIT).await;
    let args_of = |function: &str| -> serde_json::Value {
        let row = rows
            .iter()
            .find(|r| r.function == function)
            .unwrap_or_else(|| panic!("no {function} row: {}", describe_queue(&rows)));
        assert!(row.state.is(State::Done), "{}", describe_queue(&rows));
        serde_json::from_str(&row.args_json).unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(
        args_of("デプロイ"),
        json!({
            "mode": "rolling",
            "version": "1.2.4",
            "dry_run": false,
            "day": "2027-01-15",
            "note": "hello world",
            "build": "v1.1",
        }),
        "the job carries the values as pressed, the later change left out"
    );
    assert_eq!(args_of("一言"), json!({ "word": "once" }));
    // For people, the queue row's 入力 column says the same.
    let queue = emu
        .values("'_ジョブキュー'!A1:Z3")
        .unwrap_or_else(|e| panic!("{e:?}"));
    let at = |name: &str| {
        queue[0]
            .iter()
            .position(|h| h == &json!(name))
            .unwrap_or_else(|| panic!("no {name} column: {:?}", queue[0]))
    };
    let shown: Vec<(String, String)> = queue[1..]
        .iter()
        .map(|r| {
            let cell = |c: usize| r.get(c).and_then(|v| v.as_str()).unwrap_or("").to_string();
            (cell(at("機能ラベル")), cell(at("入力")))
        })
        .collect();
    assert!(
        shown.contains(&(
            "デプロイ".to_string(),
            "version=1.2.4, dry_run=false, day=2027-01-15, note=hello world, build=v1.1"
                .to_string()
        )) && shown.contains(&("一言".to_string(), "word=once".to_string())),
        "{shown:?}"
    );
    // The log sheet's row of the job names them next to its output.
    let log_rows = emu
        .values("'_ジョブログ'!A1:F5")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert!(
        log_rows.iter().flatten().any(|c| c
            == &json!(
            "デプロイ · version=1.2.4, dry_run=false, day=2027-01-15, note=hello world, build=v1.1"
        )),
        "{log_rows:?}"
    );
    wait_for(
        "the panel row to show the job's inputs after its state",
        WAIT,
        || {
            let status = panel_row(&emu, "サーバーA", 8)[2].clone();
            (status.starts_with("✅ 完了")
                && status.ends_with(
                    " · version=1.2.4, dry_run=false, day=2027-01-15, note=hello world, build=v1.1",
                ))
            .then_some(())
        },
        || format!("{:?}", panel_row(&emu, "サーバーA", 8)),
    )
    .await;
    let cells = emu
        .values("'サーバーA'!M8:M9")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        cells,
        vec![vec![json!("1.2.3")], vec![json!("-")]],
        "the cells keep what people left there, or return to the default with reset_inputs"
    );

    // A value of the range that breaks the input's pattern is refused with the press,
    // naming the input and its rule, and never queued.
    set_cells(&emu, "'サーバーA'!U8", json!([["v1.2; rm -rf /"]]));
    set_cells(&emu, "'サーバーA'!A8", json!([[true]]));
    wait_for(
        "the press to be refused on its row",
        WAIT,
        || {
            let status = panel_row(&emu, "サーバーA", 8)[2].clone();
            (status.starts_with("❌ エラー")
                && status.contains("ビルド")
                && status.contains("does not match its pattern"))
            .then_some(())
        },
        || format!("{:?}\n{}", panel_row(&emu, "サーバーA", 8), show()),
    )
    .await;
    assert_eq!(queue_rows(&emu).len(), 2, "a refused press queues nothing");

    // A value that takes four thousand characters is refused the same way, and the
    // spreadsheet goes on: the next press is taken.
    set_cells(&emu, "'サーバーA'!S8", json!([["a".repeat(4000)]]));
    set_cells(&emu, "'サーバーA'!A8", json!([[true]]));
    wait_for(
        "the long value to be refused on its row",
        WAIT,
        || {
            let status = panel_row(&emu, "サーバーA", 8)[2].clone();
            (status.contains("メモ") && status.contains("longer than")).then_some(())
        },
        || format!("{:?}\n{}", panel_row(&emu, "サーバーA", 8), show()),
    )
    .await;
    set_cells(&emu, "'サーバーA'!S8", json!([["hello world"]]));

    // A value the list does not hold (written past the dropdown, as the API can) is refused
    // against the list as the daemon's read found it.
    set_cells(&emu, "'サーバーA'!U8", json!([["v9.9"]]));
    set_cells(&emu, "'サーバーA'!A8", json!([[true]]));
    let rows = wait_queue_finished(&emu, 3, "the third press to end", WAIT).await;
    let forged_choice = rows
        .iter()
        .max_by_key(|r| r.row)
        .unwrap_or_else(|| panic!("{}", describe_queue(&rows)));
    assert!(
        forged_choice.state.is(State::Error)
            && forged_choice
                .message
                .contains("ビルド = \"v9.9\" is not among its choices (\"v1.0\", \"v1.1\""),
        "a choice from a range must be in the range: {}",
        describe_queue(&rows)
    );
}

/// A function that runs once approved, and one a schedule runs with inputs of its own.
const APPROVED_CONFIG: &str = r#"[commands.show]
exec = ["/bin/sh", "-c", "printf '%s' \"$SHEETQ_ARGS_JSON\""]
[[targets]]
label = "サーバーA"
[[functions]]
label = "本番デプロイ"
command = "show"
approvers = ["lead@example.com"]
inputs = [{ name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], required = true }]
[[functions]]
label = "夜間"
command = "show"
inputs = [
  { name = "day", type = "date", default = "2026-12-31" },
  { name = "mode", type = "choice", choices = ["full", "quick"], default = "quick" },
]
[[schedules]]
name = "nightly"
cron = "* * * * *"
target = "サーバーA"
function = "夜間"
inputs = { mode = "full" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_asked_for_the_inputs_and_a_schedule_runs_with_its_own() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, _, _) =
        crate::daemon::protected_set_up(&emu, dir.path(), "vm-1", APPROVED_CONFIG).await;
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let show = || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };

    let queued = run_sheetq(
        &config,
        &[
            "enqueue",
            "--target",
            "サーバーA",
            "--function",
            "本番デプロイ",
            "--input",
            "version=1.2.4",
            "--requester",
            "alice@example.com",
        ],
    )
    .await;
    assert!(queued.status.success(), "{}", output_text(&queued));
    let job = String::from_utf8_lossy(&queued.stdout).trim().to_string();
    // The approvers are asked for these inputs: the panel row says which.
    wait_for(
        "the panel to ask for approval of version 1.2.4",
        WAIT,
        || {
            let status = panel_row(&emu, "サーバーA", 8)[2].clone();
            (status.starts_with("承認待ち") && status.contains("version=1.2.4")).then_some(())
        },
        || format!("{:?}\n{}", panel_row(&emu, "サーバーA", 8), show()),
    )
    .await;
    let approved = run_sheetq(&config, &["approve", &job, "--as", "lead@example.com"]).await;
    assert!(approved.status.success(), "{}", output_text(&approved));
    let rows = wait_finished_or(&emu, std::slice::from_ref(&job), WAIT, show).await;
    let row = row_of(&rows, &job);
    assert!(
        row.state.is(State::Done) && row.message.contains("\"version\":\"1.2.4\""),
        "the approved job ran with the inputs it was approved for: {}",
        describe_queue(&rows)
    );

    // The schedule's next occurrence (within a minute) runs with its inputs over the
    // function's defaults.
    let scheduled = wait_for(
        "the schedule's job to run",
        Duration::from_secs(75),
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.requester == "schedule:nightly" && r.state.is(State::Done))
        },
        show,
    )
    .await;
    let args: serde_json::Value = serde_json::from_str(&scheduled.message)
        .unwrap_or_else(|e| panic!("the command printed its args: {e}: {}", scheduled.message));
    assert_eq!(args, json!({ "day": "2026-12-31", "mode": "full" }));
}

/// A function only alice may press, with an input: only she chooses its value.
const ALLOWED_CONFIG: &str = r#"intake = "poll"
[commands.show]
exec = ["/bin/sh", "-c", "printf '%s' \"$SHEETQ_ARGS_JSON\""]
[[targets]]
label = "サーバーA"
[[functions]]
label = "デプロイ"
command = "show"
allow = ["alice@example.com"]
inputs = [{ name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], default = "1.2.3" }]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_who_may_press_may_choose_the_inputs_as_google_enforces_it() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, _, _) =
        crate::daemon::protected_set_up(&emu, dir.path(), "vm-1", ALLOWED_CONFIG).await;
    // Mallory, an editor of the file, tries the value cell, its label and ▶: Google refuses
    // each, as the protection `panels sync` made says.
    for cell in ["M8", "L8", "A8"] {
        let (status, body) = person_writes(
            &emu,
            "mallory@example.com",
            &format!("'サーバーA'!{cell}"),
            json!([["1.2.4"]]),
        )
        .await;
        assert_ne!(status, 200, "mallory must not write {cell}: {body}");
    }
    let (status, body) = person_writes(
        &emu,
        "alice@example.com",
        "'サーバーA'!M8",
        json!([["1.2.4"]]),
    )
    .await;
    assert_eq!(status, 200, "alice picks her version: {body}");
    let (status, body) =
        person_writes(&emu, "alice@example.com", "'サーバーA'!A8", json!([[true]])).await;
    assert_eq!(status, 200, "alice presses: {body}");
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    let rows = wait_queue_finished(&emu, 1, "alice's press to run", WAIT).await;
    let args: serde_json::Value = serde_json::from_str(&rows[0].args_json)
        .unwrap_or_else(|e| panic!("{e}: {}", describe_queue(&rows)));
    assert!(
        rows[0].state.is(State::Done) && args == json!({ "version": "1.2.4" }),
        "the press runs with the value only alice could choose: {}",
        describe_queue(&rows)
    );
}
