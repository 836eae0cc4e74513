//! `sheetq cancel JOBID`: writes a request to stop a job into its queue row's 中止要求 cell,
//! as the Apps Script intake does (docs/design.md §2.1). The daemons do the rest: a waiting
//! row ends キャンセル in the next claim commit, the daemon that runs the job stops it.
//!
//! The row is found by its jobId in one read of the queue, and written by position; the
//! reply carries the row's values after the write, so a row that a sort or the archive moved
//! in between is noticed (its jobId is not ours) and the write is made again where the job
//! is now. The request names its job (`#<jobId>`), so one left on another job's row by such
//! a move stops nothing there.

use chrono::Utc;

use super::{queue_data_range, require_init, AdminError};
use crate::cancel::Request;
use crate::config::Config;
use crate::queue::{self, Column, QueueRow, RowState, State, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{Cell, Filter, FilterWrite, Sheets};

/// What `sheetq cancel` found, and whether it wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The request is now on the job's row; the job was in `state` when it was written.
    Asked { state: State },
    /// The row already asks to stop the job, `by` whom (as a person may be shown: text of
    /// the sheet, cleaned); nothing was written.
    AlreadyAsked { state: State, by: String },
    /// The job had already ended `state`; nothing was written.
    Ended { state: State },
    /// The job's queue row is gone, and the daemon `worker`, whose heartbeat lists it as
    /// running, was asked to stop it through its heartbeat row.
    AskedDaemon { worker: String },
}

/// How often the row is looked up again after a write that landed on another row (moved in
/// between) or whose reply did not come.
const ATTEMPTS: u32 = 3;

/// Asks the daemons to stop `job_id`, as `who` (empty: not known). Errors name the fix: a
/// queue without the 中止要求 column (`sheetq init` adds it), a job not in the queue.
pub async fn cancel(
    sheets: &dyn Sheets,
    config: &Config,
    job_id: &str,
    who: &str,
) -> Result<Outcome, AdminError> {
    let on_row = write_on_row(sheets, config, job_id, Column::CancelRequest, |row, tz| {
        let state = known_state(row, job_id, "nothing to stop")?;
        if state.is_final() {
            return Ok(Step::Done(Outcome::Ended { state }));
        }
        if crate::cancel::applies(&row.cancel_request, job_id) {
            let by = crate::cancel::asked_of(row, tz, Utc::now())
                .map(|asked| asked.who)
                .unwrap_or_default();
            return Ok(Step::Done(Outcome::AlreadyAsked { state, by }));
        }
        let text = Request::new(who, Utc::now(), job_id).cell_text(tz);
        Ok(Step::Write(text, Outcome::Asked { state }))
    })
    .await;
    match on_row {
        // Its row is gone (deleted, or moved out while it ran): the daemon that runs it
        // still lists it in its heartbeat, and is asked there.
        Err(AdminError::NotInQueue(_)) => match through_heartbeat(sheets, job_id, who).await? {
            Some(worker) => Ok(Outcome::AskedDaemon { worker }),
            None => Err(AdminError::NotInQueue(job_id.to_string())),
        },
        other => other,
    }
}

/// What [`write_on_row`] does with the row it found: write `text` into its cell and answer
/// `T` once the reply shows it landed on the job's row, or answer `T` without writing.
pub(super) enum Step<T> {
    Write(String, T),
    Done(T),
}

/// The row's state, or the error for a 状態 that no daemon takes up.
pub(super) fn known_state(row: &QueueRow, job_id: &str, what: &str) -> Result<State, AdminError> {
    match &row.state {
        RowState::Known(state) => Ok(*state),
        RowState::Unknown(text) => Err(AdminError::Problems(vec![format!(
            "job {job_id}'s row {} has 状態 {text:?}, not one of the configured state words, so no daemon takes it up; {what} (`sheetq check` lists such rows)",
            row.row
        )])),
    }
}

/// Finds `job_id`'s row in one read of the queue, asks `plan` what to do with it, and
/// writes the cell of `column` by position when it says so. The reply carries the row's
/// values after the write: a write that a sort or the archive put on another row (whose
/// jobId is not ours) is made again where the job is now, after reading it again; so is one
/// whose reply did not come.
pub(super) async fn write_on_row<T>(
    sheets: &dyn Sheets,
    config: &Config,
    job_id: &str,
    column: Column,
    plan: impl Fn(&QueueRow, chrono_tz::Tz) -> Result<Step<T>, AdminError>,
) -> Result<T, AdminError> {
    let meta = sheets.metadata().await?;
    require_init(&meta)?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let read = sheets
            .read(&[
                crate::a1::range(QUEUE_SHEET, "1:1"),
                queue_data_range(&meta),
            ])
            .await?;
        let columns =
            queue::ColumnMap::from_header(&crate::sheets::first_row(&read), &config.headers)?;
        let rows = read.get(1).map(|v| v.values.clone()).unwrap_or_default();
        let snapshot = queue::parse_rows(&rows, 2, &columns, &config.states, tz);
        let row = find(&snapshot.rows, job_id)?;
        let (text, answer) = match plan(row, tz)? {
            Step::Done(answer) => return Ok(answer),
            Step::Write(text, answer) => (text, answer),
        };
        let Some(cell_at) = columns.position(column) else {
            return Err(AdminError::Problems(vec![format!(
                "'{QUEUE_SHEET}' has no column \"{}\" to write into; run `sheetq init`, which adds it right of the last column and moves nothing",
                config.headers.name(column)
            )]));
        };
        let id_at = columns.index(Column::JobId);
        let (first, last) = (cell_at.min(id_at), cell_at.max(id_at));
        let cells: Vec<Option<Cell>> = (first..=last)
            .map(|c| (c == cell_at).then(|| Cell::from(text.as_str())))
            .collect();
        let range = crate::a1::range(
            QUEUE_SHEET,
            &format!(
                "{}{r}:{}{r}",
                crate::a1::column_letters(first),
                crate::a1::column_letters(last),
                r = row.row
            ),
        );
        let write = FilterWrite {
            filter: Filter::A1(range),
            values: vec![cells],
        };
        match sheets.write_filtered(std::slice::from_ref(&write)).await {
            Ok(written) => {
                let landed_on = written
                    .first()
                    .and_then(Option::as_ref)
                    .and_then(|w| w.values.first())
                    .and_then(|r| r.get((id_at - first) as usize))
                    .map(queue::cell_text);
                if landed_on.as_deref() == Some(job_id) {
                    return Ok(answer);
                }
                // Rows moved between the read and the write: the text sits on another
                // job's row, where it does nothing (it names this job). Look again.
                tracing::warn!(
                    job.id = %job_id,
                    row = row.row,
                    landed_on = ?landed_on,
                    "the queue's rows moved while the cell was written; writing it again where the job is now"
                );
            }
            // No reply, or a 5xx: the write may or may not have applied. The next read tells.
            Err(e) if e.is_retryable() && attempt < ATTEMPTS => {
                tracing::warn!(error = %e, job.id = %job_id, attempt, "the write may or may not have applied; reading the row again");
            }
            Err(e) => return Err(e.into()),
        }
        if attempt >= ATTEMPTS {
            return Err(AdminError::Problems(vec![format!(
                "the queue's rows kept moving while job {job_id}'s row was written ({ATTEMPTS} tries); try again"
            )]));
        }
        tokio::time::sleep(std::time::Duration::from_millis(300 * u64::from(attempt))).await;
    }
}

/// The row of `job_id`, or the error that says where it may have gone.
fn find<'a>(rows: &'a [QueueRow], job_id: &str) -> Result<&'a QueueRow, AdminError> {
    rows.iter()
        .find(|r| r.job_id == job_id)
        .ok_or_else(|| AdminError::NotInQueue(job_id.to_string()))
}

/// Asks the daemon running `job_id`, whose queue row is gone, to stop it: the heartbeat
/// rows list each daemon's running jobs, and the request goes into the stop column of the
/// one that lists it (`workers::STOP_COLUMN`), which that daemon reads at every poll. The
/// sheet is widened to that column first when it is not yet. `None`: no live heartbeat
/// lists the job.
async fn through_heartbeat(
    sheets: &dyn Sheets,
    job_id: &str,
    who: &str,
) -> Result<Option<String>, AdminError> {
    use crate::workers;
    let meta = sheets.metadata().await?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let worker = meta
        .sheet(crate::lease::WORKER_SHEET)
        .ok_or_else(|| AdminError::NotInQueue(job_id.to_string()))?;
    let wide = worker.column_count > workers::STOP_COLUMN as i32;
    let stop = crate::a1::column_letters(workers::STOP_COLUMN);
    let last = if wide {
        stop.as_str()
    } else {
        workers::LAST_COLUMN
    };
    let read = sheets
        .read(&[crate::a1::range(
            crate::lease::WORKER_SHEET,
            &format!("A1:{last}"),
        )])
        .await?;
    let rows = read.first().map(|v| v.values.clone()).unwrap_or_default();
    let Some(beat) = workers::parse(&rows, tz).into_iter().find(|h| {
        !h.stopped
            && h.jobs
                .iter()
                .any(|j| j.job_id == job_id && !j.done && !j.held)
    }) else {
        return Ok(None);
    };
    if !wide {
        sheets
            .batch_update(&crate::sheets::BatchUpdate {
                requests: vec![crate::sheets::Request::SetColumnCount {
                    sheet_id: worker.sheet_id,
                    columns: workers::STOP_COLUMN as i32 + 1,
                }],
                ..Default::default()
            })
            .await?;
    }
    let line = Request::new(who, Utc::now(), job_id).cell_text(tz);
    let cell = crate::a1::range(
        crate::lease::WORKER_SHEET,
        &format!("{stop}{r}", r = beat.row),
    );
    let mut stops = beat.stops.clone();
    // Read, add, write, read back: a request another `cancel` wrote in between is kept, and
    // ours is written again should that one have overwritten it.
    for _ in 0..ATTEMPTS {
        let mut lines: Vec<&str> = stops.lines().collect();
        lines.push(&line);
        let keep = lines.len().saturating_sub(workers::STOPS_KEPT);
        let text = lines[keep..].join("\n");
        // By position: the heartbeat rows do not move (only daemons write the protected
        // sheet, each its own row), and the request names its job, so one that landed on
        // another daemon's row stops nothing there.
        sheets
            .write(&[crate::sheets::ValueRange::new(
                cell.clone(),
                vec![vec![Cell::from(text.as_str())]],
            )])
            .await?;
        let back = sheets.read(std::slice::from_ref(&cell)).await?;
        stops = back
            .first()
            .and_then(|v| v.values.first())
            .and_then(|r| r.first())
            .map(queue::cell_text)
            .unwrap_or_default();
        if stops.lines().any(|l| l == line) {
            return Ok(Some(beat.worker_id));
        }
    }
    Err(AdminError::Problems(vec![format!(
        "the request to stop {job_id} kept being overwritten on the heartbeat row of {} ({ATTEMPTS} tries); try again",
        beat.worker_id
    )]))
}
