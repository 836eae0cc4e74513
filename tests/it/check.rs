//! `sheetq check` as an operator's first hour needs it: nothing to say about a good setup,
//! and each deployment problem named with its fix: a spreadsheet not shared (or shared
//! read-only) with the service account, missing sheets, a clock two minutes off, live
//! daemons that overrun the account's budget, an `exec` program the jobs' PATH cannot find,
//! hidden sheets left unprotected or with a person among their editors, a live daemon whose
//! account may not write them, and the `protect = false` opt-out.

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use sheetq::check::{self, Findings};
use sheetq::commands::Registry;
use sheetq::config::Config;
use sheetq::emulator::{Access, Emulator};
use sheetq::sheets::{BatchUpdate, Request, Sheets, ValueRange};

use crate::support::{client, daemon_config, start_empty};

/// A config a careful operator would write for one daemon: default-ish cadence.
fn config_for(emu: &Emulator, dir: &std::path::Path, commands: &str) -> Config {
    // A good setup's state_dir is its user's alone, as sheetq makes it.
    let mut private = std::fs::metadata(dir).expect("the state dir").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut private, 0o700);
    std::fs::set_permissions(dir, private).expect("chmod 700 the state dir");
    daemon_config(
        emu,
        "checked",
        dir,
        &[
            ("poll_interval", "\"2s\""),
            ("heartbeat_interval", "\"30s\""),
            ("dead_after", "\"2m\""),
            ("requests_per_minute", "50"),
        ],
        commands,
    )
}

/// A spreadsheet made ready by `sheetq init`, and a client of it.
async fn ready(emu: &Emulator, config: &Config) -> Arc<dyn Sheets> {
    let sheets = client(emu, config).await;
    sheetq::admin::init(sheets.as_ref(), config)
        .await
        .expect("init on the empty spreadsheet");
    sheets
}

async fn findings(sheets: &dyn Sheets, config: &Config) -> Findings {
    let registry: Registry = sheetq::setup::registry(config).expect("the test config's commands");
    check::deployment(sheets, config, &registry)
        .await
        .expect("check runs")
}

fn named(f: &Findings, words: &[&str]) -> bool {
    f.problems
        .iter()
        .any(|p| words.iter().all(|w| p.contains(w)))
}

#[tokio::test]
async fn a_good_setup_has_no_problem_and_says_who_it_is() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(&emu, dir.path(), "");
    let sheets = ready(&emu, &config).await;
    emu.clear_requests();
    let f = findings(sheets.as_ref(), &config).await;
    // Three reads (the metadata, one read of the queue, lease, panels, index, workers and
    // markers, one developer-metadata search) and the one write that proves write access:
    // a check beside a daemon must fit in what the account's minute leaves.
    let sent: Vec<String> = emu
        .requests()
        .into_iter()
        .map(|r| r.method)
        .filter(|m| m != "oauth2.token")
        .collect();
    assert_eq!(
        sent,
        [
            "spreadsheets.get",
            "spreadsheets.batchUpdate",
            "spreadsheets.values.batchGet",
            "spreadsheets.developerMetadata.search"
        ],
        "check's requests"
    );
    assert_eq!(f.problems, Vec::<String>::new(), "a good setup: {f:#?}");
    assert_eq!(f.warnings, Vec::<String>::new(), "a good setup: {f:#?}");
    let account = sheets.account();
    assert!(
        f.facts
            .iter()
            .any(|l| l.contains(&account) && l.contains("may write")),
        "check must say which account it is and that it may write: {:#?}",
        f.facts
    );
    assert!(
        f.facts.iter().any(|l| l.contains("clock")),
        "check must say how this clock stands against Google's: {:#?}",
        f.facts
    );

    // Without the log sheet, check says what is lost and how to get it back.
    let meta = sheets.metadata().await.expect("metadata");
    let log = meta.sheet("_ジョブログ").expect("init made the log sheet");
    sheets
        .batch_update(&BatchUpdate {
            requests: vec![Request::DeleteSheet {
                sheet_id: log.sheet_id,
            }],
            ..Default::default()
        })
        .await
        .expect("delete the log sheet");
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        f.warnings
            .iter()
            .any(|w| w.contains("no sheet '_ジョブログ'") && w.contains("sheetq init")),
        "a missing log sheet is a warning naming the fix: {f:#?}"
    );
    assert_eq!(f.problems, Vec::<String>::new(), "and no problem: {f:#?}");
}

#[tokio::test]
async fn a_spreadsheet_not_shared_or_shared_read_only_is_named_with_the_account() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(&emu, dir.path(), "");
    let sheets = ready(&emu, &config).await;
    let account = sheets.account();
    emu.share(&account, Access::Reader);
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        named(&f, &["read-only", &account, "Editor"]),
        "a viewer's account: {:#?}",
        f.problems
    );
    emu.share(&account, Access::None);
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        named(&f, &["not shared", &account, "Editor"]),
        "an account the spreadsheet is not shared with: {:#?}",
        f.problems
    );
}

#[tokio::test]
async fn missing_sheets_are_named_with_init_as_the_fix() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(&emu, dir.path(), "");
    let sheets = client(&emu, &config).await;
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        named(&f, &["_ジョブキュー", "missing", "sheetq init"]),
        "{:#?}",
        f.problems
    );
}

#[tokio::test]
async fn a_clock_two_minutes_off_googles_is_named() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(&emu, dir.path(), "");
    let sheets = ready(&emu, &config).await;
    emu.set_clock_skew(TimeDelta::minutes(2));
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        named(&f, &["clock is 120 s behind Google's", "synchronised"]),
        "Google's clock 2 minutes ahead: {:#?}",
        f
    );
    emu.set_clock_skew(TimeDelta::seconds(-20));
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        f.warnings
            .iter()
            .any(|w| w.contains("20 s ahead of Google's"))
            && f.problems.is_empty(),
        "20 s off is a warning, not a problem: {f:#?}"
    );
}

#[tokio::test]
async fn live_daemons_that_overrun_the_accounts_budget_are_named() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(&emu, dir.path(), "");
    let sheets = ready(&emu, &config).await;
    let account = sheets.account();
    // 29 other daemons of this account wrote their heartbeats just now: with this one,
    // 30 heartbeats every 30 s are 60 writes a minute, more than the budget of 50.
    let rows: Vec<Vec<serde_json::Value>> = (0..29)
        .map(|i| {
            sheetq::workers::row_cells(
                &format!("other-{i}"),
                "vm",
                2,
                &[],
                Utc::now(),
                &format!("vm {}", 1000 + i),
                &account,
                &[],
            )
        })
        .collect();
    sheets
        .write(&[ValueRange::new("'_ワーカー'!A3:J31", rows)])
        .await
        .expect("write the heartbeats");
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        named(&f, &["30 live daemons", &account, "heartbeat"]),
        "{:#?}",
        f
    );
}

#[tokio::test]
async fn an_exec_program_missing_on_the_path_jobs_run_with_is_named() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(
        &emu,
        dir.path(),
        "[commands.tool]\nexec = [\"sheetq-no-such-tool\"]\n\
         [commands.mine]\nexec = [\"sheetq-no-such-tool\"]\nenv = [\"PATH\"]\n",
    );
    let sheets = ready(&emu, &config).await;
    let f = findings(sheets.as_ref(), &config).await;
    // Jobs run with the system directories only, not the PATH of whoever runs `check`.
    let safe = sheetq::commands::SAFE_PATH;
    assert!(
        named(
            &f,
            &[
                "commands.tool",
                "sheetq-no-such-tool",
                "PATH jobs run with",
                safe
            ]
        ),
        "{:#?}",
        f.problems
    );
    // A command that allow-lists PATH runs with the daemon's own.
    let own = std::env::var("PATH").unwrap_or_default();
    assert!(
        named(&f, &["commands.mine", &format!("({own})")]),
        "{:#?}",
        f.problems
    );
}

#[tokio::test]
async fn a_placeholder_where_the_program_reads_options_is_a_warning_with_the_fix() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(
        &emu,
        dir.path(),
        "[commands.uptime]\nexec = [\"/bin/true\", \"-o\", \"BatchMode=yes\", \"{target}\", \"uptime\"]\n\
         [commands.safe]\nexec = [\"/bin/true\", \"--target={target}\", \"--\", \"{requester}\"]\n",
    );
    let sheets = ready(&emu, &config).await;
    let f = findings(sheets.as_ref(), &config).await;
    assert_eq!(
        f.warnings.len(),
        1,
        "only commands.uptime puts a placeholder where options are read: {f:#?}"
    );
    assert!(
        f.warnings[0].starts_with("commands.uptime.exec[3] = \"{target}\"")
            && f.warnings[0].contains("\"--\", \"{target}\""),
        "the warning names the command, the element and the fix: {}",
        f.warnings[0]
    );
    assert!(
        f.ok(),
        "jobs are refused a value that would be an option, so it is no problem: {f:#?}"
    );
}

/// [`config_for`] with `protect = false`: the opt-out for an open queue.
fn open_config(emu: &Emulator, dir: &std::path::Path) -> Config {
    daemon_config(
        emu,
        "checked",
        dir,
        &[
            ("poll_interval", "\"2s\""),
            ("heartbeat_interval", "\"30s\""),
            ("dead_after", "\"2m\""),
            ("requests_per_minute", "50"),
            ("protect", "false"),
        ],
        "",
    )
}

/// The problems that name `what`.
fn about<'f>(f: &'f Findings, what: &str) -> Vec<&'f String> {
    f.problems.iter().filter(|p| p.contains(what)).collect()
}

#[tokio::test]
async fn an_unprotected_queue_and_a_person_among_its_editors_are_named_with_the_fix() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let open = open_config(&emu, dir.path());
    let sheets = ready(&emu, &open).await;

    // The opt-out: a warning on every run, with how to turn protection back on.
    let f = findings(sheets.as_ref(), &open).await;
    assert_eq!(f.problems, Vec::<String>::new(), "{f:#?}");
    assert!(
        f.warnings.iter().any(|w| w.contains("protect = false")
            && w.contains("remove the line")
            && w.contains("sheetq init")),
        "protect = false must be warned of: {f:#?}"
    );

    // The same spreadsheet under a config that protects: each hidden sheet is named.
    let config = config_for(&emu, dir.path(), "");
    let f = findings(sheets.as_ref(), &config).await;
    for title in [
        "'_ジョブキュー'",
        "'_ワーカー'",
        "'_ジョブ履歴'",
        "'_ジョブログ'",
    ] {
        assert!(
            named(
                &f,
                &[&format!("sheet {title}: not protected"), "sheetq init"]
            ),
            "{title} unprotected must be named with its fix: {:#?}",
            f.problems
        );
    }
    assert_eq!(f.problems.len(), 4, "{:#?}", f.problems);

    // Protected by init, then a person made an editor of the queue's protection.
    sheetq::admin::init(sheets.as_ref(), &config)
        .await
        .expect("init protects");
    assert_eq!(
        findings(sheets.as_ref(), &config).await.problems,
        Vec::<String>::new()
    );
    let meta = sheets.metadata().await.expect("metadata");
    let queue = &meta
        .sheet("_ジョブキュー")
        .expect("the queue")
        .protected_ranges[0];
    let mallory = "mallory@example.com";
    sheets
        .batch_update(&BatchUpdate {
            requests: vec![Request::UpdateProtectedRange {
                id: queue.id,
                editors: vec![sheets.account(), mallory.to_string()],
                groups: Vec::new(),
                clear_unprotected: false,
            }],
            ..Default::default()
        })
        .await
        .expect("add a person to the queue's editors");
    let f = findings(sheets.as_ref(), &config).await;
    let queue_problems = about(&f, mallory);
    assert_eq!(queue_problems.len(), 1, "{:#?}", f.problems);
    assert!(
        queue_problems[0].contains("'_ジョブキュー'")
            && queue_problems[0].contains("sheetq init")
            && !queue_problems[0].contains(&emu.owner()),
        "the person, not the owner, is named with the fix: {}",
        queue_problems[0]
    );
    assert_eq!(f.problems.len(), 1, "{:#?}", f.problems);

    // The fix it names puts it right.
    let done = sheetq::admin::init(sheets.as_ref(), &config)
        .await
        .expect("init again");
    assert!(
        done.iter()
            .any(|l| l.contains("put the protection of sheet '_ジョブキュー' right")),
        "{done:?}"
    );
    assert_eq!(
        findings(sheets.as_ref(), &config).await.problems,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn a_live_daemon_whose_account_may_not_write_the_protected_sheets_is_named() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = config_for(&emu, dir.path(), "");
    let sheets = ready(&emu, &config).await;
    let other = Emulator::account("second");
    let row = sheetq::workers::row_cells("vm-2", "vm", 2, &[], Utc::now(), "vm 2000", &other, &[]);
    sheets
        .write(&[ValueRange::new("'_ワーカー'!A3:J3", vec![row])])
        .await
        .expect("write the heartbeat");
    let f = findings(sheets.as_ref(), &config).await;
    assert!(
        named(&f, &["vm-2", &other, "protect_editors"]),
        "a daemon on another account must be named with the fix: {:#?}",
        f.problems
    );

    // Listed, and the protections put right by init, it is no problem.
    let both = daemon_config(
        &emu,
        "checked",
        dir.path(),
        &[
            ("poll_interval", "\"2s\""),
            ("heartbeat_interval", "\"30s\""),
            ("dead_after", "\"2m\""),
            ("requests_per_minute", "50"),
            ("protect_editors", &format!("[{other:?}]")),
        ],
        "",
    );
    let f = findings(sheets.as_ref(), &both).await;
    assert!(
        about(&f, &other)
            .iter()
            .all(|p| p.contains("may not write it, and should")),
        "listed but not yet an editor, each sheet says so: {:#?}",
        f.problems
    );
    assert_eq!(
        about(&f, &other).len(),
        4,
        "queue, workers, archive, log: {:#?}",
        f.problems
    );
    sheetq::admin::init(sheets.as_ref(), &both)
        .await
        .expect("init adds the account");
    assert_eq!(
        findings(sheets.as_ref(), &both).await.problems,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn allow_where_requester_cannot_be_trusted_or_is_always_empty_is_named() {
    let emu = start_empty().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let allow =
        "[[functions]]\nlabel = \"再起動\"\ncommand = \"sleep\"\nallow = [\"group:ops@example.com\"]\n";
    let mut overrides = vec![
        ("poll_interval", "\"2s\""),
        ("heartbeat_interval", "\"30s\""),
        ("dead_after", "\"2m\""),
        ("requests_per_minute", "50"),
        ("intake", "\"poll\""),
    ];
    let polled = daemon_config(&emu, "checked", dir.path(), &overrides, allow);
    let sheets = ready(&emu, &polled).await;
    let f = findings(sheets.as_ref(), &polled).await;
    assert!(
        !f.warnings.iter().any(|w| w.contains("intake = \"poll\"")),
        "allow works with the poll intake, through ▶ cells guarded for the allowed: {f:#?}"
    );
    assert!(f.ok(), "on a protected queue it is no problem: {f:#?}");

    overrides.push(("protect", "false"));
    let open = daemon_config(&emu, "checked", dir.path(), &overrides, allow);
    let f = findings(sheets.as_ref(), &open).await;
    assert!(
        named(&f, &["\"再起動\"", "protect = false", "will not start"]),
        "allow on an open queue is a problem: {:#?}",
        f.problems
    );
}
