//! Row identity under people (docs/design.md §4): while daemons run, a person sorts (full width and
//! narrow), inserts, deletes, moves and cut-pastes queue rows in a tight loop, with API
//! faults on top. Whatever they do, no result lands on another job's row, no target runs two
//! jobs at once, no job runs twice, and every job whose row survived has its own result.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde_json::json;
use sheetq::emulator::{Emulator, Quota};

use crate::daemon::{assert_done, enqueue_many, fail_some_calls, jobs_over_targets, BUSY_FLEET};
use crate::support::*;

const QUEUE: i32 = 2001;

/// A command that logs its start and end (jobId, target, nanoseconds) and echoes its jobId as
/// the result message, so a result on the wrong row shows.
fn logging_command(file: &std::path::Path) -> String {
    format!(
        "[commands.record]\nexec = [\"/bin/sh\", \"-c\", \"echo \\\"S $SHEETQ_JOB_ID $SHEETQ_TARGET $(date +%s%N)\\\" >> {f}; sleep 0.05; echo \\\"E $SHEETQ_JOB_ID $SHEETQ_TARGET $(date +%s%N)\\\" >> {f}; echo \\\"$SHEETQ_JOB_ID\\\"\"]\n",
        f = file.display()
    )
}

/// Rows 2..=last of the queue as a person sees them: (row, jobId) of each non-blank row.
fn last_row(emu: &Emulator) -> u32 {
    queue_rows(emu).iter().map(|r| r.row).max().unwrap_or(1)
}

fn job_at(emu: &Emulator, row: u32) -> Option<String> {
    queue_rows(emu)
        .into_iter()
        .find(|r| r.row == row)
        .map(|r| r.job_id)
}

/// One thing a person does to the queue. Returns the jobId of a job row it deleted.
fn poke(
    emu: &Emulator,
    rng: &mut rand::rngs::StdRng,
    ours: &HashSet<String>,
    deleted: usize,
) -> Option<String> {
    let last = last_row(emu).max(3);
    let row = rng.gen_range(2..=last);
    let other = rng.gen_range(2..=last);
    let order = if rng.gen_bool(0.5) {
        "ASCENDING"
    } else {
        "DESCENDING"
    };
    let rows = |a: u32, b: u32| json!({"sheetId": QUEUE, "dimension": "ROWS", "startIndex": a - 1, "endIndex": b});
    let grid = |r0: u32, r1: u32, c1: u32| json!({"sheetId": QUEUE, "startRowIndex": r0 - 1, "endRowIndex": r1, "startColumnIndex": 0, "endColumnIndex": c1});
    let request = match rng.gen_range(0..7) {
        // A sort of every filled column (A to R, the notes column): row metadata moves too.
        0 => json!({"sortRange": {"range": grid(2, last, 18),
            "sortSpecs": [{"dimensionIndex": rng.gen_range(0..16), "sortOrder": order}]}}),
        // A sort of the job columns only (A:P) while notes in R stay: values move, metadata
        // stays where it was.
        1 => json!({"sortRange": {"range": grid(2, last, 16),
            "sortSpecs": [{"dimensionIndex": rng.gen_range(0..16), "sortOrder": order}]}}),
        2 => json!({"insertDimension": {"range": rows(row, row), "inheritFromBefore": true}}),
        3 => {
            let job = job_at(emu, row);
            // Job rows go rarely (a handful per run); blank and finished old rows freely.
            if job.as_ref().is_some_and(|j| ours.contains(j))
                && (deleted >= 8 || !rng.gen_bool(0.2))
            {
                return None;
            }
            emu.batch_update(json!([{"deleteDimension": {"range": rows(row, row)}}]))
                .unwrap_or_else(|e| panic!("delete row {row}: {e:?}"));
            return job.filter(|j| ours.contains(j));
        }
        4 => json!({"moveDimension": {"source": rows(row, row), "destinationIndex": other - 1}}),
        // Cut a row's job columns into a fresh blank row elsewhere: the values move, the
        // row's metadata stays behind on the now empty row.
        5 => {
            emu.batch_update(json!([{"insertDimension": {"range": rows(other, other)}}]))
                .unwrap_or_else(|e| panic!("insert: {e:?}"));
            let from = if row >= other { row + 1 } else { row };
            json!({"cutPaste": {"source": grid(from, from, 16),
                "destination": {"sheetId": QUEUE, "rowIndex": other - 1, "columnIndex": 0},
                "pasteType": "PASTE_NORMAL"}})
        }
        _ => json!({"updateCells": {"range": grid(row, row, 18).as_object().map(|g| {
                let mut g = g.clone();
                g.insert("startColumnIndex".into(), json!(17));
                json!(g)
            }).unwrap_or_default(),
            "rows": [{"values": [{"userEnteredValue": {"stringValue": "メモ"}}]}],
            "fields": "userEnteredValue"}}),
    };
    emu.batch_update(json!([request]))
        .unwrap_or_else(|e| panic!("{request}: {e:?}"));
    None
}

/// The person edits every 100 ms (some 600 edits a minute, a sort among every few): far
/// beyond anyone tidying a sheet, yet each misplaced claim or write must be found and mended.
/// With the daemons' logs: `SHEETQ_TEST_LOG=sheetq=info cargo test --test it people --
/// --nocapture`; `PEOPLE_EDIT_MS=15` makes the person faster still.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_keep_every_result_on_its_row_while_a_person_rearranges_the_queue() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(std::env::var("SHEETQ_TEST_LOG").unwrap_or_else(|_| "off".into()))
        .with_test_writer()
        .try_init();
    // Three daemons polling every 50 ms and the enqueuer share one account. This test is
    // about rows, not quota: Google's quota times 1000 leaves the daemons' budgets (split
    // three ways) room for every poll, so passes are not stretched by waits.
    let emu = start_with_quota(Quota::scaled(1000)).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("runs.txt");
    let commands = logging_command(&log);
    let settings = BUSY_FLEET;
    let enqueuer = daemon_config(&emu, "enqueuer", dir.path(), &settings, &commands);
    let sheets = client(&emu, &enqueuer).await;
    let jobs = jobs_over_targets(200, 20);
    let ids = enqueue_many(sheets.as_ref(), &enqueuer, &jobs).await;
    let ours: HashSet<String> = ids.iter().cloned().collect();
    fail_some_calls(
        &emu,
        &[
            "spreadsheets.values.batchGetByDataFilter",
            "spreadsheets.values.batchUpdateByDataFilter",
            "spreadsheets.batchUpdate",
            "spreadsheets.values.append",
        ],
        0.03,
    );
    let fleet = Fleet::start(&emu, &["vm-1", "vm-2", "vm-3"], &settings, &commands).await;

    // The person: an edit every 100 ms while the jobs run.
    let mut rng = rand::rngs::StdRng::seed_from_u64(20261130);
    let mut deleted: Vec<String> = Vec::new();
    let mut edits = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if let Some(job) = poke(&emu, &mut rng, &ours, deleted.len()) {
            deleted.push(job);
        }
        edits += 1;
        let rows = queue_rows(&emu);
        let open = ids
            .iter()
            .filter(|id| !deleted.contains(id))
            .any(|id| !rows.iter().any(|r| &r.job_id == id && is_finished(r)));
        if !open {
            break;
        }
        tokio::time::sleep(Duration::from_millis(
            std::env::var("PEOPLE_EDIT_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(100),
        ))
        .await;
    }
    let surviving: Vec<String> = ids
        .iter()
        .filter(|id| !deleted.contains(id))
        .cloned()
        .collect();
    let rows = wait_finished(&emu, &surviving, Duration::from_secs(90)).await;
    let reports = fleet.stop(&emu).await;
    emu.clear_faults();

    // No result on another job's row; every surviving job has its own.
    for r in rows.iter().filter(|r| ours.contains(&r.job_id)) {
        assert_done(r);
        assert_eq!(
            r.message,
            r.job_id,
            "row {} holds another job's result:\n{}",
            r.row,
            describe_queue(&rows)
        );
    }
    let on_rows: Vec<&str> = rows
        .iter()
        .map(|r| r.job_id.as_str())
        .filter(|j| ours.contains(*j))
        .collect();
    let distinct: HashSet<&str> = on_rows.iter().copied().collect();
    assert_eq!(on_rows.len(), distinct.len(), "a job row was duplicated");

    // Every job ran at most once; the target never ran two at a time.
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{e}"));
    let mut runs: BTreeMap<&str, (&str, u128, u128)> = BTreeMap::new();
    let mut starts = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let [kind, job, target, nanos] = f[..] else {
            panic!("unexpected log line {line:?}");
        };
        let t: u128 = nanos.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        let run = runs.entry(job).or_insert((target, 0, u128::MAX));
        match kind {
            "S" => {
                starts += 1;
                run.1 = t;
            }
            _ => run.2 = t,
        }
    }
    assert_eq!(starts, runs.len(), "some job ran twice");
    for id in &surviving {
        assert!(runs.contains_key(id.as_str()), "job {id} never ran");
    }
    let mut by_target: BTreeMap<&str, Vec<(u128, u128, &str)>> = BTreeMap::new();
    for (job, (target, s, e)) in &runs {
        by_target.entry(target).or_default().push((*s, *e, job));
    }
    for (target, mut v) in by_target {
        v.sort();
        for w in v.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "two jobs of {target} ran at once: {} and {}",
                w[0].2,
                w[1].2
            );
        }
    }
    // A running job whose row was deleted is reported, never written elsewhere.
    let unplaceable: u64 = reports.iter().map(|r| r.results_unplaceable).sum();
    let incidents: u64 = reports.iter().map(|r| r.write_incidents).sum();
    let ran_and_deleted = deleted
        .iter()
        .filter(|j| runs.contains_key(j.as_str()))
        .count() as u64;
    assert!(
        unplaceable <= ran_and_deleted,
        "{unplaceable} results reported unplaceable, but only {ran_and_deleted} running rows were deleted"
    );
    println!(
        "3 daemons, 200 jobs, {edits} edits by a person, {} job rows deleted ({ran_and_deleted} of them had run), {unplaceable} results reported unplaceable, {incidents} write incidents, conflicts {}",
        deleted.len(),
        reports.iter().map(|r| r.claim_conflicts).sum::<u64>()
    );
}
