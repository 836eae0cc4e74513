//! The queue's header is found by name, in any order (docs/design.md §1.1): for each layout
//! of `apps-script/fixtures/queue-layouts.json` (jobId first, last, in the middle, the
//! columns reversed, the written columns split by columns of people's own, a header reaching
//! past Z), jobs taken in by `enqueue` and by a ticked ▶ box run end to end on the emulator
//! and each ends 完了 with its own result on its own queue row and panel row, while the
//! people's columns keep what they held. A stale row times out and `status` reads it with
//! jobId last; the archive files each column under its name when a person rearranged the
//! queue between two batches.

use std::time::Duration;

use serde_json::{json, Value as Json};
use sheetq::emulator::seed::QUEUE_HEADER;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::{self, QueueRow, State};

use crate::daemon::{assert_done, tick};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);
const FAST: Quota = Quota::scaled(50);

/// A header cell that is none of sheetq's columns: a column a person added for their notes.
const PEOPLES: &str = "メモ";

/// Lays the queue's row 1 out as `header` (an empty queue, as a person would rearrange it
/// before the first job), widening the sheet when the header needs more columns.
fn lay_out_queue(emu: &Emulator, header: &[String]) {
    let width = header.len() as u32;
    emu.with_spreadsheet(|ss| {
        let sheet = ss
            .sheet_by_title_mut(queue::QUEUE_SHEET)
            .unwrap_or_else(|| panic!("the demo spreadsheet has no queue sheet"));
        sheet.grow_to(sheet.row_count, width);
        sheet.rows.truncate(1);
        sheet.row_mut(0).cells_mut().clear();
    })
    .unwrap_or_else(|e| panic!("{e:?}"));
    let last = sheetq::a1::column_letters(width - 1);
    emu.set_values(
        &format!("'{}'!A1:{last}1", queue::QUEUE_SHEET),
        json!([header]),
        false,
    )
    .unwrap_or_else(|e| panic!("cannot write the queue header: {e:?}"));
}

/// Runs two enqueued jobs and one ticked ▶ box through one daemon on a queue laid out as
/// `header`, and checks every job ended 完了 with its own result on its own rows.
async fn jobs_run_end_to_end_with_the_queue_laid_out_as(header: Vec<String>) {
    let emu = start_with_quota(FAST).await;
    lay_out_queue(&emu, &header);
    // The ticked function's own args: no wait, so all three finish quickly.
    emu.set_values("'サーバーC'!I8", json!([[r#"{"seconds":0}"#]]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let fleet = Fleet::start(&emu, &["vm-1"], &[("intake", "\"poll\"")], "").await;
    let c = fleet.configs[0].clone();
    let sheets = client(&emu, &c).await;
    let a = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーA",
        "動作確認 (2秒)",
        "echo",
        r#"{"job":"a"}"#,
        "alice@example.com",
    )
    .await;
    let b = enqueue(
        sheets.as_ref(),
        &c,
        "サーバーB",
        "再起動 (5秒)",
        "echo",
        r#"{"job":"b"}"#,
        "",
    )
    .await;
    tick(&emu, "サーバーC", 8);
    let rows = wait_for(
        "the two enqueued jobs and the ticked one to finish",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            (rows.len() == 3 && rows.iter().all(is_finished)).then_some(rows)
        },
        || layout_and_queue(&emu),
    )
    .await;
    fleet.stop(&emu).await;

    let layout = layout_and_queue(&emu);
    for (id, message) in [(&a, r#"{"job":"a"}"#), (&b, r#"{"job":"b"}"#)] {
        let r = row_of(&rows, id);
        assert_done(r);
        assert_eq!(
            r.message, message,
            "job {id} should carry its own result on its own row\n{layout}"
        );
        assert!(
            r.worker.starts_with("vm-1/"),
            "job {id}'s row should name the daemon that ran it: {:?}\n{layout}",
            r.worker
        );
    }
    let ticked = rows
        .iter()
        .find(|r| r.target == "サーバーC")
        .unwrap_or_else(|| panic!("the tick made no queue row\n{layout}"));
    assert_done(ticked);
    assert_eq!(ticked.message, "slept 0s", "{layout}");
    for (panel, row, r) in [
        ("サーバーA", 8, row_of(&rows, &a)),
        ("サーバーB", 9, row_of(&rows, &b)),
        ("サーバーC", 8, ticked),
    ] {
        let finished = r
            .finished_at
            .unwrap_or_else(|| panic!("job {} has no 終了日時\n{layout}", r.job_id));
        assert_eq!(
            panel_row(&emu, panel, row)[2],
            sheetq::panel::done_text(finished, TZ),
            "{panel} row {row} should show its job's result\n{layout}"
        );
    }
    assert_peoples_columns_untouched(&emu, &layout);
}

/// No write strayed into a column of people's own: below the header those cells are empty.
fn assert_peoples_columns_untouched(emu: &Emulator, layout: &str) {
    let values = sheet_values(emu, queue::QUEUE_SHEET);
    let header = values.first().cloned().unwrap_or_default();
    for (c, h) in header.iter().enumerate() {
        if !queue::cell_text(h).starts_with(PEOPLES) {
            continue;
        }
        for (r, row) in values.iter().enumerate().skip(1) {
            let v = row.get(c).map(queue::cell_text).unwrap_or_default();
            assert!(
                v.is_empty(),
                "{} (column {}) is a people's column, yet row {} holds {v:?}\n{layout}",
                queue::cell_text(h),
                sheetq::a1::column_letters(c as u32),
                r + 1
            );
        }
    }
}

/// The queue's header and rows, for a failure message.
fn layout_and_queue(emu: &Emulator) -> String {
    let values = sheet_values(emu, queue::QUEUE_SHEET);
    let header: Vec<String> = values
        .first()
        .map(|r| r.iter().map(queue::cell_text).collect())
        .unwrap_or_default();
    let rows: Vec<QueueRow> = queue_rows(emu);
    format!("header: {header:?}\nqueue:\n{}", describe_queue(&rows))
}

/// A header layout of `apps-script/fixtures/queue-layouts.json`, which the Apps Script
/// intake's test (`node --test apps-script/`) lays rows out by too.
fn layout(name: &str) -> Vec<String> {
    let fixture: Json = serde_json::from_str(include_str!(
        "../../apps-script/fixtures/queue-layouts.json"
    ))
    .unwrap_or_else(|e| panic!("the layouts fixture does not parse: {e}"));
    serde_json::from_value(fixture["layouts"][name].clone())
        .unwrap_or_else(|e| panic!("no layout {name:?} in the layouts fixture: {e}"))
}

#[tokio::test]
async fn the_default_order_with_job_id_first() {
    jobs_run_end_to_end_with_the_queue_laid_out_as(layout("default")).await;
}

#[tokio::test]
async fn job_id_last_behind_every_written_column() {
    jobs_run_end_to_end_with_the_queue_laid_out_as(layout("job_id_last")).await;
}

#[tokio::test]
async fn job_id_in_the_middle_of_the_written_columns() {
    jobs_run_end_to_end_with_the_queue_laid_out_as(layout("job_id_in_the_middle")).await;
}

#[tokio::test]
async fn the_columns_rotated_by_five() {
    jobs_run_end_to_end_with_the_queue_laid_out_as(layout("rotated_by_five")).await;
}

#[tokio::test]
async fn the_columns_reversed() {
    jobs_run_end_to_end_with_the_queue_laid_out_as(layout("reversed")).await;
}

#[tokio::test]
async fn the_written_columns_split_by_peoples_columns() {
    jobs_run_end_to_end_with_the_queue_laid_out_as(layout("split_by_peoples_columns")).await;
}

#[tokio::test]
async fn a_header_reaching_past_column_z() {
    let header = layout("past_column_z");
    assert!(header.len() > 26 && header.last().is_some_and(|h| h == "jobId"));
    jobs_run_end_to_end_with_the_queue_laid_out_as(header).await;
}

#[test]
fn the_layouts_fixture_holds_every_known_column_once_in_each_layout() {
    for name in [
        "default",
        "job_id_last",
        "job_id_in_the_middle",
        "rotated_by_five",
        "reversed",
        "split_by_peoples_columns",
        "past_column_z",
    ] {
        let names = layout(name);
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "layout {name} repeats a name");
        let header: Vec<Json> = names.iter().map(|n| json!(n)).collect();
        queue::ColumnMap::from_header(&header, &Default::default())
            .unwrap_or_else(|e| panic!("layout {name}: {e}"));
    }
}

/// `row`, a queue row in the default order ([`finished_row`]), laid out under `header`;
/// a people's column gets `note`.
fn laid_out(row: &Json, header: &[String], note: &str) -> Json {
    let cells: Vec<Json> = header
        .iter()
        .map(|h| match QUEUE_HEADER.iter().position(|k| k == h) {
            Some(i) => row[i].clone(),
            None => json!(note),
        })
        .collect();
    Json::Array(cells)
}

/// Writes `rows` (default order) into the queue from row 2 on, laid out under `header`.
fn seed_laid_out(emu: &Emulator, header: &[String], rows: &[(String, Json)]) {
    let last = sheetq::a1::column_letters(header.len() as u32 - 1);
    let first = queue_rows(emu).len() + 2;
    let cells: Vec<Json> = rows
        .iter()
        .map(|(note, r)| laid_out(r, header, note))
        .collect();
    emu.set_values(
        &format!("'{}'!A{first}:{last}", queue::QUEUE_SHEET),
        Json::Array(cells),
        false,
    )
    .unwrap_or_else(|e| panic!("cannot seed the queue: {e:?}"));
}

/// The archive's rows as (jobId, メッセージ, the people's column メモ), read by its header.
fn archived(emu: &Emulator) -> Vec<(String, String, String)> {
    let values = sheet_values(emu, "_ジョブ履歴");
    let header: Vec<String> = values
        .first()
        .map(|r| r.iter().map(queue::cell_text).collect())
        .unwrap_or_default();
    let col = |name: &str| header.iter().position(|h| h == name);
    let (job, message, note) = (col("jobId"), col("メッセージ"), col(PEOPLES));
    let text = |row: &[Json], c: Option<usize>| {
        c.and_then(|c| row.get(c))
            .map(queue::cell_text)
            .unwrap_or_default()
    };
    values
        .iter()
        .skip(1)
        .map(|r| (text(r, job), text(r, message), text(r, note)))
        .collect()
}

#[tokio::test]
async fn the_archive_files_each_column_under_its_name_when_a_person_rearranged_the_queue() {
    let emu = start_with_quota(FAST).await;
    // The queue starts reversed; the archive is made from it.
    let first = layout("reversed");
    lay_out_queue(&emu, &first);
    let old = |prefix: &str, n: usize| -> Vec<(String, Json)> {
        (0..n)
            .map(|i| {
                let id = format!("{prefix}-{i}");
                (format!("note-{id}"), finished_row(&id, "完了", 40))
            })
            .collect()
    };
    seed_laid_out(&emu, &first, &old("before", 3));
    let retention = [("retention", "\"30d\"")];
    let fleet = Fleet::start(&emu, &["vm-1"], &retention, "").await;
    wait_for(
        "the first three rows in the archive",
        WAIT,
        || (archived(&emu).len() >= 3).then_some(()),
        || layout_and_queue(&emu),
    )
    .await;
    fleet.stop(&emu).await;
    // A person then puts jobId back in front and adds a column of notes in the middle.
    let mut second = layout("default");
    second.insert(7, PEOPLES.to_string());
    assert!(queue_rows(&emu).is_empty(), "the first rows left the queue");
    lay_out_queue(&emu, &second);
    seed_laid_out(&emu, &second, &old("after", 3));
    let fleet = Fleet::start(&emu, &["vm-1"], &retention, "").await;
    wait_for(
        "six rows in the archive",
        WAIT,
        || (archived(&emu).len() >= 6).then_some(()),
        || format!("{}\narchive: {:#?}", layout_and_queue(&emu), archived(&emu)),
    )
    .await;
    fleet.stop(&emu).await;
    let rows = archived(&emu);
    let mut ids: Vec<&str> = rows.iter().map(|(id, _, _)| id.as_str()).collect();
    ids.sort();
    assert_eq!(
        ids,
        ["after-0", "after-1", "after-2", "before-0", "before-1", "before-2"],
        "every archived row is read by the archive's header: {rows:#?}"
    );
    for (id, message, note) in &rows {
        assert_eq!(
            message, id,
            "each archived row's メッセージ stands under that header: {rows:#?}"
        );
        if id.starts_with("after-") {
            assert_eq!(
                note,
                &format!("note-{id}"),
                "the people's column went along, under its own name: {rows:#?}"
            );
        }
    }
}

#[tokio::test]
async fn a_stale_row_times_out_and_status_reads_the_queue_with_job_id_last() {
    let emu = start_with_quota(FAST).await;
    let header = layout("job_id_last");
    lay_out_queue(&emu, &header);
    // A row left 実行中 by a daemon that is gone (no heartbeat speaks for it): the daemon
    // watches it stand still past stale_after (2 s here) and times it out.
    let mut stale = finished_row("stale-1", "実行中", 0);
    stale[12] = json!("");
    stale[14] = json!("");
    seed_laid_out(&emu, &header, &[(String::new(), stale)]);
    let fleet = Fleet::start(&emu, &["vm-1"], &[("stale_after", "\"2s\"")], "").await;
    let config = fleet.configs[0].clone();
    let timed_out = wait_for(
        "the stale row to time out with its message",
        WAIT,
        || {
            let rows = queue_rows(&emu);
            let r = row_of(&rows, "stale-1").clone();
            (r.state.is(State::Timeout) && !r.message.is_empty()).then_some(r)
        },
        || layout_and_queue(&emu),
    )
    .await;
    fleet.stop(&emu).await;
    let layout = layout_and_queue(&emu);
    assert!(
        timed_out.message.contains("stale_after") && timed_out.finished_at.is_some(),
        "the timeout says why and when, on the row itself: {timed_out:#?}\n{layout}"
    );
    let sheets = client(&emu, &config).await;
    let status = sheetq::admin::status(sheets.as_ref(), &config)
        .await
        .unwrap_or_else(|e| panic!("status: {e}"));
    assert_eq!(status.queue_rows, 1, "{layout}");
    assert!(
        status.recent_failures.iter().any(|j| j.job_id == "stale-1"),
        "status lists the timed-out job among recent failures: {:#?}\n{layout}",
        status.recent_failures
    );
}
