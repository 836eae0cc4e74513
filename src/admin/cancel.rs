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
    let meta = sheets.metadata().await?;
    require_init(&meta)?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let request = Request::new(who, Utc::now(), job_id);
    let text = request.cell_text(tz);
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
        let state = match &row.state {
            RowState::Known(state) => *state,
            RowState::Unknown(text) => {
                return Err(AdminError::Problems(vec![format!(
                    "job {job_id}'s row {} has 状態 {text:?}, not one of the configured state words, so no daemon takes it up; nothing to stop (`sheetq check` lists such rows)",
                    row.row
                )]))
            }
        };
        if state.is_final() {
            return Ok(Outcome::Ended { state });
        }
        if crate::cancel::applies(&row.cancel_request, job_id) {
            let by = crate::cancel::asked_of(row, tz, Utc::now())
                .map(|asked| asked.who)
                .unwrap_or_default();
            return Ok(Outcome::AlreadyAsked { state, by });
        }
        let Some(cancel_at) = columns.position(Column::CancelRequest) else {
            return Err(AdminError::Problems(vec![format!(
                "'{QUEUE_SHEET}' has no column \"{}\" to write the request into; run `sheetq init`, which adds it right of the last column and moves nothing",
                config.headers.cancel_request
            )]));
        };
        let id_at = columns.index(Column::JobId);
        let (first, last) = (cancel_at.min(id_at), cancel_at.max(id_at));
        let cells: Vec<Option<Cell>> = (first..=last)
            .map(|c| (c == cancel_at).then(|| Cell::from(text.as_str())))
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
                    return Ok(Outcome::Asked { state });
                }
                // Rows moved between the read and the write: the request sits on another
                // job's row, where it stops nothing (it names this job). Look again.
                tracing::warn!(
                    job.id = %job_id,
                    row = row.row,
                    landed_on = ?landed_on,
                    "the queue's rows moved while the request was written; writing it again where the job is now"
                );
            }
            // No reply, or a 5xx: the write may or may not have applied. The next read tells
            // (the row then already asks, and that is reported).
            Err(e) if e.is_retryable() && attempt < ATTEMPTS => {
                tracing::warn!(error = %e, job.id = %job_id, attempt, "the request may or may not have been written; reading the row again");
            }
            Err(e) => return Err(e.into()),
        }
        if attempt >= ATTEMPTS {
            return Err(AdminError::Problems(vec![format!(
                "the queue's rows kept moving while the request to stop job {job_id} was written ({ATTEMPTS} tries); try again"
            )]));
        }
        tokio::time::sleep(std::time::Duration::from_millis(300 * u64::from(attempt))).await;
    }
}

/// The row of `job_id`, or the error that says where it may have gone.
fn find<'a>(rows: &'a [QueueRow], job_id: &str) -> Result<&'a QueueRow, AdminError> {
    rows.iter().find(|r| r.job_id == job_id).ok_or_else(|| {
        AdminError::Problems(vec![format!(
            "job {job_id:?} is not in '{QUEUE_SHEET}': it was archived, its row was deleted, or the jobId is mistyped (`sheetq status` lists the running and waiting jobs)"
        )])
    })
}
