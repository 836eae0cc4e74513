//! A job's history from the shell: `sheetq jobs` lists the queue's and the archive's jobs
//! with filters, `sheetq show` prints everything known of one, `sheetq rerun` queues it
//! again as a new press, all with the real binary; and `jobs`/`show` read only what they
//! need at 10,000 queue rows and 100,000 archive rows, counted by the emulator.

use std::time::Duration;

use serde_json::{json, Value as Json};
use sheetq::admin::history::{self, Filter, Since};
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::HeaderNames;

use crate::daemon::{binary_config_with, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);
const FAST: Quota = Quota::scaled(50);

/// Makes the hidden archive sheet with the queue's header and `rows` below it.
fn seed_archive(emu: &Emulator, rows: Vec<Vec<Json>>) {
    emu.batch_update(
        json!([{ "addSheet": { "properties": { "title": "_ジョブ履歴", "hidden": true } } }]),
    )
    .unwrap_or_else(|e| panic!("add the archive: {e:?}"));
    let header: Vec<Json> = HeaderNames::default()
        .header_row()
        .into_iter()
        .map(Json::from)
        .collect();
    let mut all = vec![header];
    all.extend(rows);
    emu.replace_rows("_ジョブ履歴", 1, &all)
        .unwrap_or_else(|e| panic!("seed the archive: {e:?}"));
}

/// `finished_row` as the cells `replace_rows` takes.
fn finished(job: &str, state: &str, days_ago: i64) -> Vec<Json> {
    match finished_row(job, state, days_ago) {
        Json::Array(cells) => cells,
        other => panic!("a row is an array: {other}"),
    }
}

/// A waiting row of `function` on `target`'s panel by `requester`, received `minutes_ago`.
fn waiting(job: &str, target: &str, function: &str, requester: &str, minutes_ago: i64) -> Json {
    let mut row = waiting_row(job, target, function, "hello", requester);
    row[1] = json!(sheetq::sheet_time::instant_to_serial(
        chrono::Utc::now() - chrono::Duration::minutes(minutes_ago),
        TZ
    ));
    row
}

/// The jobIds a `sheetq jobs` table lists, in order.
fn listed(out: &std::process::Output) -> Vec<String> {
    assert!(out.status.success(), "jobs: {}", output_text(out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('('))
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("job-") || w.starts_with("arch-"))
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_lists_show_tells_and_rerun_queues_the_same_job_again() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    emu.set_values(
        "'_ジョブキュー'!A2:Q4",
        json!([
            waiting("job-a1", "サーバーA", "挨拶", "alice@example.com", 3),
            waiting("job-b1", "サーバーB", "挨拶", "", 2),
            waiting("job-a2", "サーバーA", "確認", "", 1),
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    seed_archive(
        &emu,
        vec![
            finished("arch-1", "完了", 40),
            finished("arch-2", "エラー", 41),
        ],
    );
    let config = binary_config_with(
        &emu,
        dir.path(),
        "vm-1",
        "heartbeat_interval = \"1s\"\n",
        "[commands.hello]\nexec = [\"/bin/sh\", \"-c\", \"echo hello output\"]\n",
    );
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_ended_with_messages(&emu, &["job-a1", "job-b1", "job-a2"], WAIT, || {
        format!(
            "{}\ndaemon log:\n{}",
            describe_queue(&queue_rows(&emu)),
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })
    .await;

    let all = run_sheetq(&config, &["jobs"]).await;
    assert_eq!(
        listed(&all),
        ["job-a2", "job-b1", "job-a1", "arch-1", "arch-2"],
        "every job, newest received first, the archive's after the queue's: {}",
        output_text(&all)
    );
    let a = run_sheetq(&config, &["jobs", "--target", "サーバーA"]).await;
    assert_eq!(listed(&a), ["job-a2", "job-a1"], "{}", output_text(&a));
    let recent = run_sheetq(&config, &["jobs", "--state", "完了", "--since", "1d"]).await;
    assert_eq!(
        listed(&recent),
        ["job-a2", "job-b1", "job-a1"],
        "--since leaves out the archive's old jobs: {}",
        output_text(&recent)
    );
    let failed = run_sheetq(&config, &["jobs", "--state", "error"]).await;
    assert_eq!(listed(&failed), ["arch-2"], "{}", output_text(&failed));
    let two = run_sheetq(&config, &["jobs", "--limit", "2"]).await;
    assert_eq!(listed(&two), ["job-a2", "job-b1"], "{}", output_text(&two));
    assert!(
        String::from_utf8_lossy(&two.stdout).contains("(more match"),
        "a cut listing says more match: {}",
        output_text(&two)
    );
    let json = run_sheetq(&config, &["jobs", "--function", "確認", "--json"]).await;
    let parsed: Json = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("jobs --json is JSON ({e}): {}", output_text(&json)));
    assert_eq!(parsed["jobs"][0]["job_id"], "job-a2", "{parsed:#}");
    assert_eq!(
        parsed["jobs"].as_array().map(Vec::len),
        Some(1),
        "{parsed:#}"
    );
    let bad = run_sheetq(&config, &["jobs", "--since", "yesterday"]).await;
    assert_eq!(
        bad.status.code(),
        Some(2),
        "a bad --since is a bad argument: {}",
        output_text(&bad)
    );
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("2026-12-01"),
        "the error shows what --since takes: {}",
        output_text(&bad)
    );

    let shown = run_sheetq(&config, &["show", "job-a1"]).await;
    let said = output_text(&shown);
    assert!(shown.status.success(), "{said}");
    for expected in [
        "jobId      job-a1",
        "状態       完了",
        "対象       サーバーA",
        "機能       挨拶",
        "依頼者     alice@example.com",
        "試行       1 回",
        "ワーカー   vm-1",
        "--- 出力 (末尾) ---\nhello output\n",
        "結果URL    https://docs.google.com/spreadsheets/d/",
        "パネル     https://docs.google.com/spreadsheets/d/",
        "シート     queue",
    ] {
        assert!(said.contains(expected), "show prints {expected:?}: {said}");
    }
    let archived = run_sheetq(&config, &["show", "arch-2", "--json"]).await;
    let parsed: Json = serde_json::from_slice(&archived.stdout)
        .unwrap_or_else(|e| panic!("show --json is JSON ({e}): {}", output_text(&archived)));
    assert_eq!(parsed["sheet"], "archive", "{parsed:#}");
    assert_eq!(parsed["state"], "エラー", "{parsed:#}");
    let missing = run_sheetq(&config, &["show", "job-nope"]).await;
    assert_eq!(missing.status.code(), Some(1), "{}", output_text(&missing));
    assert!(
        output_text(&missing).contains("neither in '_ジョブキュー' nor in '_ジョブ履歴'"),
        "a jobId found nowhere says where it looked: {}",
        output_text(&missing)
    );

    let rerun = run_sheetq(
        &config,
        &["rerun", "job-a1", "--as", "bob@example.com", "--wait"],
    )
    .await;
    assert!(
        rerun.status.success(),
        "rerun --wait of a job that ends 完了: {}",
        output_text(&rerun)
    );
    let new_id = String::from_utf8_lossy(&rerun.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let rows = queue_rows(&emu);
    let (old, new) = (row_of(&rows, "job-a1"), row_of(&rows, &new_id));
    assert_eq!(
        (
            new.target.as_str(),
            new.function.as_str(),
            new.panel_sheet.as_str(),
            new.command.as_str()
        ),
        (
            old.target.as_str(),
            old.function.as_str(),
            old.panel_sheet.as_str(),
            old.command.as_str()
        ),
        "the rerun is the same function on the same target: {}",
        describe_queue(&rows)
    );
    assert_eq!(
        new.requester, "bob@example.com",
        "a rerun is the caller's press"
    );
    assert!(
        new.state.is(sheetq::queue::State::Done),
        "{}",
        describe_queue(&rows)
    );
    let gone = run_sheetq(&config, &["rerun", "job-nope"]).await;
    assert_eq!(gone.status.code(), Some(1), "{}", output_text(&gone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_show_read_only_what_they_need_at_10k_and_100k_rows() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let queue: Vec<Vec<Json>> = (0..10_000)
        .map(|i| finished(&format!("q-{i}"), "完了", 1))
        .collect();
    emu.replace_rows("_ジョブキュー", 2, &queue)
        .unwrap_or_else(|e| panic!("{e:?}"));
    seed_archive(
        &emu,
        (0..100_000)
            .map(|i| finished(&format!("a-{i}"), "完了", 40 + i / 5000))
            .collect(),
    );
    let config = daemon_config(
        &emu,
        "cli",
        state.path(),
        &[("requests_per_minute", "600")],
        "",
    );
    let sheets = client(&emu, &config).await;
    // Requests (and bytes the API sent) of one command.
    let measure = |what: &'static str| {
        let c = emu.counters();
        emu.clear_requests();
        eprintln!("{what}: {} requests, {} bytes out", c.total, c.bytes_out);
        c.total
    };
    sheetq::admin::status(sheets.as_ref(), &config)
        .await
        .unwrap_or_else(|e| panic!("status: {e}"));
    emu.clear_requests();

    let listed = |filter: Filter| {
        let sheets = sheets.clone();
        let config = config.clone();
        async move {
            history::jobs(sheets.as_ref(), &config, &filter)
                .await
                .unwrap_or_else(|e| panic!("jobs: {e}"))
        }
    };
    let newest = listed(Filter {
        limit: 50,
        ..Filter::default()
    })
    .await;
    assert_eq!(
        (newest.jobs.len(), newest.more, newest.archive_rows_read),
        (50, true, 0)
    );
    assert_eq!(
        measure("jobs (last 50)"),
        2,
        "the metadata and one read of the queue"
    );

    let week = listed(Filter {
        since: Some(Since::Ago(Duration::from_secs(7 * 86_400))),
        limit: 0,
        ..Filter::default()
    })
    .await;
    assert_eq!(week.jobs.len(), 10_000, "the queue's jobs of the week");
    assert_eq!(
        week.archive_rows_read,
        history::ARCHIVE_CHUNK,
        "one chunk shows the archive is older"
    );
    assert_eq!(measure("jobs --since 7d --limit 0"), 3);

    let nothing = listed(Filter {
        target: Some("no such target".into()),
        limit: 0,
        ..Filter::default()
    })
    .await;
    assert!(nothing.jobs.is_empty());
    assert_eq!(
        nothing.archive_rows_read, 100_000,
        "a filter that matches nothing reads it all"
    );
    assert_eq!(
        measure("jobs --target (none) --limit 0"),
        2 + 100_000 / u64::from(history::ARCHIVE_CHUNK)
    );

    let deep = history::show(sheets.as_ref(), &config, "a-99999")
        .await
        .unwrap_or_else(|e| panic!("show: {e}"));
    assert_eq!(deep.job.sheet, "archive");
    assert_eq!(
        measure("show (archive row 100,001)"),
        4,
        "metadata, headers, jobId columns, the row"
    );
}
