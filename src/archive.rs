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

use crate::queue::{cell_text, QueueRow};
use crate::sheets::{Cell, GridRange, Request};

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

/// Whether a row may leave the queue: finished (完了, エラー, タイムアウト, キャンセル) with a
/// 終了日時 older than `retention` before `now`. A row without a readable 終了日時 stays.
pub fn is_past_retention(row: &QueueRow, now: DateTime<Utc>, retention: chrono::Duration) -> bool {
    row.state.is_final()
        && !row.job_id.trim().is_empty()
        && row.finished_at.is_some_and(|t| t < now - retention)
}

/// The runs of rows past the retention among `rows` (a read of consecutive sheet rows, in
/// order), but the jobs `kept` names (the jobs of a rollout still open, which it counts
/// from their rows: `crate::rollout`).
pub fn runs(
    rows: &[QueueRow],
    now: DateTime<Utc>,
    retention: chrono::Duration,
    kept: &std::collections::HashSet<String>,
) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let leaving = rows
        .iter()
        .filter(|r| is_past_retention(r, now, retention) && !kept.contains(&r.job_id));
    for r in leaving {
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

/// Where the queue's columns go in the archive: each under the archive's column of the same
/// header name, so that rows archived before and after a person rearranged the queue's
/// columns stand under one header (docs/design.md §1.1: columns are found by name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnPlan {
    /// Blocks of adjacent queue columns that land on adjacent archive columns, left to
    /// right: one block when both sheets share a layout.
    pub spans: Vec<Span>,
    /// Header cells the archive lacks (a column new to the queue): (archive column, name),
    /// written in the same batch as the move.
    pub new_header: Vec<(u32, String)>,
    /// Columns the archive needs (A through the right-most one a queue column lands on).
    pub archive_width: u32,
}

/// Queue columns `queue_start..queue_start + len` land on archive columns from
/// `archive_start` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub queue_start: u32,
    pub archive_start: u32,
    pub len: u32,
}

impl ColumnPlan {
    /// The archive column that queue column `queue_col` lands on.
    pub fn archive_col(&self, queue_col: u32) -> Option<u32> {
        self.spans.iter().find_map(|s| {
            (s.queue_start..s.queue_start + s.len)
                .contains(&queue_col)
                .then(|| s.archive_start + queue_col - s.queue_start)
        })
    }

    /// An archive row laid out again as a queue row (`width` columns): the way back.
    pub fn to_queue_row(&self, archive_row: &[Cell], width: u32) -> Vec<Cell> {
        let mut row = vec![Cell::String(String::new()); width as usize];
        for s in &self.spans {
            for k in 0..s.len {
                let (q, a) = ((s.queue_start + k) as usize, (s.archive_start + k) as usize);
                if let (Some(slot), Some(v)) = (row.get_mut(q), archive_row.get(a)) {
                    *slot = v.clone();
                }
            }
        }
        row
    }
}

/// Plans where the first `width` queue columns go, from both header rows (as read, possibly
/// shorter than `width`). A named column goes under the archive column of the same name (the
/// n-th of a name repeated among people's columns under the n-th), or to a new column at the
/// archive's right whose header this plan writes. A column without a header name goes to the
/// first archive column from its own position on that has no header and is not taken: the
/// same place every time, so an empty spacer column does not widen the archive batch after
/// batch.
pub fn column_plan(queue_header: &[Cell], archive_header: &[Cell], width: u32) -> ColumnPlan {
    let name = |c: &Cell| cell_text(c).trim().to_string();
    let archive_names: Vec<String> = archive_header.iter().map(name).collect();
    let mut target: Vec<Option<u32>> = vec![None; width as usize];
    let mut taken: Vec<bool> = vec![false; archive_names.len()];
    let mut next_new = archive_names.len() as u32;
    let mut new_header = Vec::new();
    for (slot, n) in target.iter_mut().zip(queue_header.iter().map(name)) {
        if n.is_empty() {
            continue;
        }
        let found = (0..archive_names.len()).find(|a| archive_names[*a] == n && !taken[*a]);
        let a = match found {
            Some(a) => a as u32,
            None => {
                let a = next_new;
                next_new += 1;
                new_header.push((a, n));
                a
            }
        };
        if let Some(t) = taken.get_mut(a as usize) {
            *t = true;
        }
        *slot = Some(a);
    }
    let used = |a: u32, target: &[Option<u32>]| target.contains(&Some(a));
    for q in 0..width as usize {
        if target[q].is_some() {
            continue;
        }
        let mut a = q as u32;
        while archive_names.get(a as usize).is_some_and(|n| !n.is_empty())
            || used(a, &target)
            || new_header.iter().any(|(c, _)| *c == a)
        {
            a += 1;
        }
        target[q] = Some(a);
    }
    let mut spans: Vec<Span> = Vec::new();
    for (q, a) in target.iter().enumerate() {
        let (q, a) = (q as u32, a.unwrap_or(q as u32));
        match spans.last_mut() {
            Some(s) if s.queue_start + s.len == q && s.archive_start + s.len == a => s.len += 1,
            _ => spans.push(Span {
                queue_start: q,
                archive_start: a,
                len: 1,
            }),
        }
    }
    let archive_width = target
        .iter()
        .flatten()
        .map(|a| a + 1)
        .chain([archive_names.len() as u32])
        .max()
        .unwrap_or(0);
    ColumnPlan {
        spans,
        new_header,
        archive_width,
    }
}

/// The requests that move `runs` to the top of the archive, under its header, each queue
/// column under the archive column `columns` gives it, and delete their queue rows: bottom
/// run first, so the row numbers of the runs above stay true within the batch. The archive
/// then holds them in queue order, each batch above the ones before.
pub fn requests(
    runs: &[Run],
    queue_sheet: i32,
    archive_sheet: i32,
    columns: &ColumnPlan,
) -> Vec<Request> {
    runs.iter()
        .rev()
        .flat_map(|run| {
            let count = run.job_ids.len() as u32;
            let start = run.first - 1;
            let moves = columns.spans.iter().map(move |s| Request::MoveCells {
                source: GridRange {
                    sheet_id: queue_sheet,
                    start_row: start,
                    end_row: start + count,
                    start_col: s.queue_start,
                    end_col: s.queue_start + s.len,
                },
                sheet_id: archive_sheet,
                row: 1,
                col: s.archive_start,
            });
            std::iter::once(Request::InsertRows {
                sheet_id: archive_sheet,
                at: 1,
                count,
            })
            .chain(moves)
            .chain(std::iter::once(Request::DeleteRows {
                sheet_id: queue_sheet,
                start,
                end: start + count,
            }))
        })
        .collect()
}

/// The requests that put archive rows (1-based sheet rows `rows` of the archive: rows that
/// should not be there, moved by a batch that a person's sort got in the way of) back into
/// the queue, each into a fresh row inserted at zero-based queue index `at` (after the last
/// row), column for column by `columns`, and delete them from the archive: bottom row
/// first, so the rows above keep their numbers. One atomic batch with the rest of an
/// archive pass: a row is never in both sheets, nor in neither.
pub fn put_back_requests(
    rows: &[u32],
    archive_sheet: i32,
    queue_sheet: i32,
    at: u32,
    columns: &ColumnPlan,
) -> Vec<Request> {
    let mut rows = rows.to_vec();
    rows.sort_unstable();
    rows.dedup();
    rows.iter()
        .rev()
        .flat_map(|r| {
            let source_row = r - 1;
            let moves = columns.spans.iter().map(move |s| Request::MoveCells {
                source: GridRange {
                    sheet_id: archive_sheet,
                    start_row: source_row,
                    end_row: source_row + 1,
                    start_col: s.archive_start,
                    end_col: s.archive_start + s.len,
                },
                sheet_id: queue_sheet,
                row: at,
                col: s.queue_start,
            });
            std::iter::once(Request::InsertRows {
                sheet_id: queue_sheet,
                at,
                count: 1,
            })
            .chain(moves)
            .chain(std::iter::once(Request::DeleteRows {
                sheet_id: archive_sheet,
                start: source_row,
                end: source_row + 1,
            }))
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
    use crate::queue::{RowState, State};

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
            row(9, State::Cancelled, Some(45)),
            row(10, State::Cancelled, Some(1)),
        ];
        let leaving: Vec<bool> = rows
            .iter()
            .map(|r| is_past_retention(r, at(), MONTH))
            .collect();
        assert_eq!(
            leaving,
            [true, true, true, false, false, false, false, true, false],
            "old 完了/エラー/タイムアウト/キャンセル leave; young, unfinished or undated rows stay"
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
            runs(&rows, at(), MONTH, &Default::default()),
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
    fn a_job_of_an_open_rollout_stays_however_old_and_splits_the_run() {
        let rows = [
            row(2, State::Done, Some(40)),
            row(3, State::Done, Some(40)),
            row(4, State::Done, Some(40)),
        ];
        let kept = ["job-3".to_string()].into_iter().collect();
        assert_eq!(
            runs(&rows, at(), MONTH, &kept),
            [
                Run {
                    first: 2,
                    job_ids: vec!["job-2".into()]
                },
                Run {
                    first: 4,
                    job_ids: vec!["job-4".into()]
                },
            ],
            "its rollout counts it from its row: archived, it would be queued again"
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
        let requests = requests(&runs, 11, 13, &same_layout(16));
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

    fn header(names: &[&str]) -> Vec<Cell> {
        names.iter().map(|n| Cell::from(*n)).collect()
    }

    /// The plan for a queue and an archive that share one layout `width` columns wide.
    fn same_layout(width: u32) -> ColumnPlan {
        let names: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
        let h: Vec<Cell> = names.iter().map(|n| Cell::from(n.as_str())).collect();
        column_plan(&h, &h, width)
    }

    #[test]
    fn one_layout_moves_as_one_block() {
        let plan = same_layout(16);
        assert_eq!(
            plan.spans,
            [Span {
                queue_start: 0,
                archive_start: 0,
                len: 16
            }]
        );
        assert!(plan.new_header.is_empty());
        assert_eq!(plan.archive_width, 16);
    }

    #[test]
    fn a_rearranged_queue_moves_each_column_under_its_name_in_the_archive() {
        let archive = header(&["jobId", "状態", "メッセージ", "ワーカー"]);
        // A person moved ワーカー to the front and added a note column after 状態.
        let queue = header(&["ワーカー", "jobId", "状態", "メモ", "メッセージ"]);
        let plan = column_plan(&queue, &archive, 5);
        let lands: Vec<Option<u32>> = (0..5).map(|q| plan.archive_col(q)).collect();
        assert_eq!(
            lands,
            [Some(3), Some(0), Some(1), Some(4), Some(2)],
            "ワーカー→D, jobId→A, 状態→B, the new メモ→E, メッセージ→C: {plan:#?}"
        );
        assert_eq!(plan.new_header, [(4, "メモ".to_string())]);
        assert_eq!(plan.archive_width, 5);
        let requests = requests(
            &[Run {
                first: 2,
                job_ids: vec!["a".into()],
            }],
            11,
            13,
            &plan,
        );
        let moves = requests
            .iter()
            .filter(|r| matches!(r, Request::MoveCells { .. }))
            .count();
        assert_eq!(
            moves, 4,
            "jobId and 状態 are adjacent in both: one move for the two"
        );
        let archived = header(&["j", "s", "m", "w", "note"]);
        assert_eq!(
            plan.to_queue_row(&archived, 5),
            header(&["w", "j", "s", "note", "m"]),
            "an archive row put back is laid out as the queue is"
        );
    }

    #[test]
    fn a_column_without_a_name_keeps_its_place_batch_after_batch() {
        let archive = header(&["jobId", "状態"]);
        let queue = header(&["jobId", "", "状態"]);
        let plan = column_plan(&queue, &archive, 3);
        assert_eq!(
            plan.archive_col(1),
            Some(2),
            "the unnamed column goes to a free column"
        );
        assert_eq!(plan.archive_col(2), Some(1));
        assert_eq!(plan.archive_width, 3);
        // The next batch, against the same archive: the same plan, no wider.
        assert_eq!(column_plan(&queue, &archive, 3), plan);
    }

    #[test]
    fn a_row_put_back_moves_into_a_fresh_queue_row_and_leaves_the_archive_in_one_go() {
        let plan = same_layout(16);
        let requests = put_back_requests(&[3, 2], 13, 11, 40, &plan);
        assert!(
            matches!(
                &requests[..],
                [
                    Request::InsertRows { sheet_id: 11, at: 40, count: 1 },
                    Request::MoveCells { source: a, sheet_id: 11, row: 40, col: 0 },
                    Request::DeleteRows { sheet_id: 13, start: 2, end: 3 },
                    Request::InsertRows { sheet_id: 11, at: 40, count: 1 },
                    Request::MoveCells { source: b, sheet_id: 11, row: 40, col: 0 },
                    Request::DeleteRows { sheet_id: 13, start: 1, end: 2 },
                ] if a.start_row == 2 && b.start_row == 1 && a.sheet_id == 13 && a.end_col == 16
            ),
            "archive row 3 first, then row 2, each into a fresh queue row: {requests:#?}"
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
