//! The archive sheet `_ジョブ履歴`: which finished queue rows are past the retention, grouped
//! into runs of adjacent rows, the one atomic batch that moves them out of the queue, and the
//! check of where they landed. Pure: the daemon takes the lease, reads, and sends.
//!
//! A run moves with `cutPaste` into rows inserted at the top of the archive, then its emptied
//! queue rows are deleted, all in one `spreadsheets.batchUpdate`. Within that batch nothing
//! can move in between, so what is deleted is exactly what was moved: a row is never lost,
//! only (if a person rearranged the queue between the read and the batch) moved when it should
//! not have been, which [`misplaced`] finds in the batch's read-back.

use chrono::{DateTime, Utc};

use crate::queue::{QueueRow, State};
use crate::sheets::{GridRange, Request};

/// Title of the hidden archive sheet.
pub const ARCHIVE_SHEET: &str = "_ジョブ履歴";
/// Rows read at the top of the queue to look for rows to archive, and so at most moved by
/// one batch.
pub const BATCH_ROWS: u32 = 1000;
/// The `_ワーカー` cells that count the rows archived so far (label, count): a daemon whose
/// window lies below rows that left the queue moves it up by as many.
pub const COUNTER_CELLS: &str = "C1:D1";
/// The label written next to the count.
pub const COUNTER_LABEL: &str = "archived";

/// Adjacent queue rows to archive: sheet rows `first..first + job_ids.len()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub first: u32,
    pub job_ids: Vec<String>,
}

/// Whether a row may leave the queue: finished (完了, エラー, タイムアウト) with a 終了日時
/// older than `retention` before `now`. A row without a readable 終了日時 stays.
pub fn is_past_retention(row: &QueueRow, now: DateTime<Utc>, retention: chrono::Duration) -> bool {
    let finished = [State::Done, State::Error, State::Timeout]
        .iter()
        .any(|s| row.state.is(*s));
    finished
        && !row.job_id.trim().is_empty()
        && row.finished_at.is_some_and(|t| t < now - retention)
}

/// The runs of rows past the retention among `rows` (a read of consecutive sheet rows, in
/// order).
pub fn runs(rows: &[QueueRow], now: DateTime<Utc>, retention: chrono::Duration) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for r in rows.iter().filter(|r| is_past_retention(r, now, retention)) {
        match out.last_mut() {
            Some(run) if run.first + run.job_ids.len() as u32 == r.row => {
                run.job_ids.push(r.job_id.clone());
            }
            _ => out.push(Run {
                first: r.row,
                job_ids: vec![r.job_id.clone()],
            }),
        }
    }
    out
}

/// The requests that move `runs` (columns `0..width` of the queue) to the top of the
/// archive, under its header, and delete their queue rows: bottom run first, so the row
/// numbers of the runs above stay true within the batch. The archive then holds them in
/// queue order, each batch above the ones before.
pub fn requests(runs: &[Run], queue_sheet: i32, archive_sheet: i32, width: u32) -> Vec<Request> {
    runs.iter()
        .rev()
        .flat_map(|run| {
            let count = run.job_ids.len() as u32;
            let start = run.first - 1;
            [
                Request::InsertRows {
                    sheet_id: archive_sheet,
                    at: 1,
                    count,
                },
                Request::MoveCells {
                    source: GridRange {
                        sheet_id: queue_sheet,
                        start_row: start,
                        end_row: start + count,
                        start_col: 0,
                        end_col: width,
                    },
                    sheet_id: archive_sheet,
                    row: 1,
                    col: 0,
                },
                Request::DeleteRows {
                    sheet_id: queue_sheet,
                    start,
                    end: start + count,
                },
            ]
        })
        .collect()
}

/// The archive rows of a batch's read-back (`landed`, from archive row 2 on) that are not
/// what was meant to move: a person rearranged the queue between the read and the batch.
/// They go back to the queue. Compared by jobId in order, and by the rule itself.
pub fn misplaced<'a>(
    runs: &[Run],
    landed: &'a [QueueRow],
    now: DateTime<Utc>,
    retention: chrono::Duration,
) -> Vec<&'a QueueRow> {
    let meant: Vec<&String> = runs.iter().flat_map(|r| &r.job_ids).collect();
    landed
        .iter()
        .take(meant.len())
        .enumerate()
        .filter(|(i, row)| {
            meant.get(*i).is_none_or(|id| **id != row.job_id)
                || !is_past_retention(row, now, retention)
        })
        .map(|(_, row)| row)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::RowState;

    fn row(n: u32, state: State, days_ago: Option<i64>) -> QueueRow {
        let now = at();
        QueueRow {
            state: RowState::Known(state),
            job_id: format!("job-{n}"),
            finished_at: days_ago.map(|d| now - chrono::Duration::days(d)),
            ..QueueRow::blank(n)
        }
    }

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    const MONTH: chrono::Duration = chrono::Duration::days(30);

    #[test]
    fn only_finished_rows_past_the_retention_leave_the_queue() {
        let rows = [
            row(2, State::Done, Some(40)),
            row(3, State::Error, Some(31)),
            row(4, State::Timeout, Some(30 * 10)),
            row(5, State::Done, Some(29)),
            row(6, State::Waiting, None),
            row(7, State::Running, Some(90)),
            row(8, State::Done, None),
        ];
        let leaving: Vec<bool> = rows
            .iter()
            .map(|r| is_past_retention(r, at(), MONTH))
            .collect();
        assert_eq!(
            leaving,
            [true, true, true, false, false, false, false],
            "old 完了/エラー/タイムアウト leave; young, unfinished or undated rows stay"
        );
    }

    #[test]
    fn adjacent_old_rows_form_one_run_and_a_young_row_splits_them() {
        let rows = [
            row(2, State::Done, Some(40)),
            row(3, State::Done, Some(40)),
            row(4, State::Waiting, None),
            row(5, State::Done, Some(40)),
            row(6, State::Done, Some(40)),
            row(7, State::Done, Some(40)),
        ];
        assert_eq!(
            runs(&rows, at(), MONTH),
            [
                Run {
                    first: 2,
                    job_ids: vec!["job-2".into(), "job-3".into()]
                },
                Run {
                    first: 5,
                    job_ids: vec!["job-5".into(), "job-6".into(), "job-7".into()]
                },
            ]
        );
    }

    #[test]
    fn the_bottom_run_moves_first_so_the_rows_above_keep_their_numbers() {
        let runs = [
            Run {
                first: 2,
                job_ids: vec!["a".into(), "b".into()],
            },
            Run {
                first: 5,
                job_ids: vec!["c".into()],
            },
        ];
        let requests = requests(&runs, 11, 13, 16);
        let deletes: Vec<(u32, u32)> = requests
            .iter()
            .filter_map(|r| match r {
                Request::DeleteRows {
                    sheet_id: 11,
                    start,
                    end,
                } => Some((*start, *end)),
                _ => None,
            })
            .collect();
        assert_eq!(deletes, [(4, 5), (1, 3)], "row 5 first, then rows 2–3");
        assert!(
            matches!(
                &requests[..3],
                [
                    Request::InsertRows { sheet_id: 13, at: 1, count: 1 },
                    Request::MoveCells { source, sheet_id: 13, row: 1, col: 0 },
                    Request::DeleteRows { .. },
                ] if source.start_row == 4 && source.end_row == 5 && source.end_col == 16
            ),
            "each run: room at the top of the archive, the move, then the emptied rows go: {requests:#?}"
        );
    }

    #[test]
    fn a_row_that_moved_under_the_batch_is_found_misplaced() {
        let runs = [Run {
            first: 2,
            job_ids: vec!["job-2".into(), "job-3".into()],
        }];
        // A person sorted between the read and the batch: a waiting row came along.
        let landed = [row(2, State::Done, Some(40)), row(3, State::Waiting, None)];
        let wrong = misplaced(&runs, &landed, at(), MONTH);
        assert_eq!(wrong.len(), 1);
        assert_eq!(wrong[0].state, RowState::Known(State::Waiting));
        let landed = [row(2, State::Done, Some(40)), row(3, State::Done, Some(40))];
        assert!(misplaced(&runs, &landed, at(), MONTH).is_empty());
    }
}
