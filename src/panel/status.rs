//! What the panel row of a job shows: the status texts, the result write-back cells, and
//! the waiting/running display refreshed every pass (docs/design.md §1.2, §2, §4).
//!
//! Every function returns the cells to write; the daemon merges them into the batched
//! `values.batchUpdate` it makes anyway, written RAW so a message beginning with `=` stays
//! text.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{cell_range, PanelIndex, PanelLayout, PanelRef, PanelRow, PanelTable};
use crate::claim;
use crate::queue::{QueueRow, Snapshot, State};
use crate::sheet_text::one_line;
use crate::sheet_time;
use crate::sheets::{Cell, ValueRange};

/// Status of a timed-out job.
pub const TIMEOUT_TEXT: &str = "⏱ タイムアウト";
/// Status of a job stopped on request.
pub const CANCELLED_TEXT: &str = "⏹ キャンセル";
/// 状態 of a job an approver rejected (its 結果 says who and when).
pub const REJECTED_TEXT: &str = "⛔ 却下";
/// 状態 of a job not approved in time.
pub const EXPIRED_TEXT: &str = "⌛ 期限切れ";
/// Longest error message shown in the status cell, in characters; the full text is in 結果
/// and in the queue row.
pub const ERROR_TEXT_MAX_CHARS: usize = 40;
/// Longest text written to 結果, in characters. The queue row keeps the whole message; the
/// panel is for reading at a glance, and a sheet cell holds at most 50,000 characters.
pub const RESULT_MAX_CHARS: usize = 1000;

/// `✅ 完了 11/30 14:05`, the finish time in the sheet's zone.
pub fn done_text(finished_at: DateTime<Utc>, tz: Tz) -> String {
    format!("✅ 完了 {}", sheet_time::format_short(finished_at, tz))
}

/// How much of a job's inputs its 状態 shows, in characters.
pub const INPUTS_TEXT_MAX_CHARS: usize = 400;

/// `❌ エラー: <message>`, the message on one line and cut to [`ERROR_TEXT_MAX_CHARS`] with
/// `…`; `❌ エラー` alone when there is no message.
pub fn error_text(message: &str) -> String {
    let short = one_line(message, ERROR_TEXT_MAX_CHARS);
    if short.is_empty() {
        "❌ エラー".to_string()
    } else {
        format!("❌ エラー: {short}")
    }
}

/// How the status of a scheduled function's row that shows nothing else begins.
pub const NEXT_RUN_PREFIX: &str = "⏰ 次回 ";

/// `⏰ 次回 12/05 01:30`: a scheduled function's row before its first run.
pub fn next_run_text(next: DateTime<Utc>, tz: Tz) -> String {
    format!("{NEXT_RUN_PREFIX}{}", sheet_time::format_short(next, tz))
}

/// The status cells of scheduled functions' rows (`next_runs`: target label, function
/// label, next run) that show nothing, or an older `⏰ 次回`: to ride a write sent anyway,
/// as the waiting/running display does. A row with a result shows its next run after it
/// ([`PanelOutcome::next_run`]), written with the result; one whose function has a job
/// waiting or running in `snapshot` shows that ([`status_updates`]).
pub fn next_run_updates(
    snapshot: &Snapshot,
    index: &PanelIndex,
    tables: &HashMap<String, PanelTable>,
    next_runs: &[(String, String, DateTime<Utc>)],
    tz: Tz,
    layout: &PanelLayout,
) -> Vec<ValueRange> {
    let mut out = Vec::new();
    for (target, function, next) in next_runs {
        let busy = snapshot.rows.iter().any(|r| {
            r.target_key() == target && r.function.trim() == function && claim::is_open(r)
        });
        if busy {
            continue;
        }
        let Ok((panel, row)) = locate_labels(index, tables, target, function, None) else {
            continue;
        };
        let text = next_run_text(*next, tz);
        let shows = row.status.trim();
        if shows == text || !(shows.is_empty() || shows.starts_with(NEXT_RUN_PREFIX)) {
            continue;
        }
        out.push(status_write(panel, row.row, text, layout));
    }
    out
}

/// `▶ 実行中 (14:05〜)`, the claim time in the sheet's zone; `▶ 実行中` when the row has no
/// readable 開始日時.
pub fn running_text(started_at: Option<DateTime<Utc>>, tz: Tz) -> String {
    match started_at {
        Some(t) => format!("▶ 実行中 ({}〜)", sheet_time::format_hhmm(t, tz)),
        None => "▶ 実行中".to_string(),
    }
}

/// Longest retry note shown in the status cell, in characters.
pub const RETRYING_TEXT_MAX_CHARS: usize = 60;

/// `🔁 再試行 1/3: exit code 1 (30 秒後)`: a running job between two attempts, whose
/// メッセージ is the retry note (`commands::RetryNote`), cut to
/// [`RETRYING_TEXT_MAX_CHARS`].
pub fn retrying_text(note: &str) -> String {
    format!("🔁 {}", one_line(note, RETRYING_TEXT_MAX_CHARS))
}

/// What the panel row of a running `job` shows: its retry note while it retries, else
/// `▶ 実行中 (HH:mm〜)`.
pub fn running_row_text(job: &QueueRow, tz: Tz) -> String {
    if job.is_rollout() && crate::queue::is_rollout_progress(&job.message) {
        // A rollout's row shows its progress (`▶ 実行中 7/20 · 失敗 0`).
        format!("▶ {}", job.message.trim())
    } else if crate::queue::is_retry_note(&job.message) {
        retrying_text(&job.message)
    } else {
        running_text(job.started_at, tz)
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// How a job ended, as far as its panel row is concerned.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelOutcome {
    pub state: State,
    pub finished_at: DateTime<Utc>,
    pub url: Option<String>,
    pub message: String,
    /// The function's next scheduled run on this target, shown after a final state.
    pub next_run: Option<DateTime<Utc>>,
    /// The job's inputs as one line (`version=1.2.4, dry_run=true`), shown after the state:
    /// which values this outcome is for. Empty for a function without inputs.
    pub inputs: String,
}

impl PanelOutcome {
    /// The 状態 text for this outcome.
    pub fn status_text(&self, tz: Tz) -> String {
        let inputs = one_line(&self.inputs, INPUTS_TEXT_MAX_CHARS);
        let text = match self.state {
            State::Error if !inputs.is_empty() => {
                let message = one_line(&self.message, ERROR_TEXT_MAX_CHARS);
                if message.is_empty() {
                    format!("❌ エラー · {inputs}")
                } else {
                    format!("❌ エラー · {inputs}: {message}")
                }
            }
            State::Error => error_text(&self.message),
            State::Done => done_text(self.finished_at, tz),
            State::Timeout => TIMEOUT_TEXT.to_string(),
            State::Cancelled => CANCELLED_TEXT.to_string(),
            State::Rejected => REJECTED_TEXT.to_string(),
            State::Expired => EXPIRED_TEXT.to_string(),
            State::AwaitingApproval => return "承認待ち".to_string(),
            State::Running => return running_text(Some(self.finished_at), tz),
            State::Waiting => return claim::waiting_text(0),
        };
        let text = if inputs.is_empty() || self.state == State::Error {
            text
        } else {
            format!("{text} · {inputs}")
        };
        match self.next_run {
            Some(next) => format!("{text} · 次回 {}", sheet_time::format_short(next, tz)),
            None => text,
        }
    }

    /// The 結果 text: the link when there is one, else the message.
    pub fn result_text(&self) -> String {
        match self.url.as_deref().map(str::trim) {
            Some(url) if !url.is_empty() => url.to_string(),
            _ => cut(self.message.trim(), RESULT_MAX_CHARS),
        }
    }
}

/// The write-back of a finished job to its panel row: 状態, 結果 and 更新日時 (a date serial
/// of `finished_at`), as one range from the status column. `row` is the row found by
/// [`locate`], not the queue's stored hint.
///
/// The three columns must be adjacent and in that order, which [`PanelLayout::problems`]
/// checks, so that a write-back is one range.
pub fn result_cells(
    panel: &PanelRef,
    row: u32,
    outcome: &PanelOutcome,
    tz: Tz,
    layout: &PanelLayout,
) -> ValueRange {
    let start = layout.columns.status.0;
    ValueRange::new(
        cell_range(&panel.title, start, start + 2, row),
        vec![vec![
            Cell::String(outcome.status_text(tz)),
            Cell::String(outcome.result_text()),
            Cell::from(sheet_time::instant_to_serial(outcome.finished_at, tz)),
        ]],
    )
}

/// [`result_cells`] but 結果, which holds the claim commit's link formula for the job
/// (`joblog::panel_result_formula`): 状態 and 更新日時, one cell each.
pub fn status_and_time_cells(
    panel: &PanelRef,
    row: u32,
    outcome: &PanelOutcome,
    tz: Tz,
    layout: &PanelLayout,
) -> Vec<ValueRange> {
    let status = layout.columns.status.0;
    [
        (status, Cell::String(outcome.status_text(tz))),
        (
            status + 2,
            Cell::from(sheet_time::instant_to_serial(outcome.finished_at, tz)),
        ),
    ]
    .into_iter()
    .map(|(col, cell)| ValueRange::new(cell_range(&panel.title, col, col, row), vec![vec![cell]]))
    .collect()
}

/// Why a queue row's panel row could not be found; logged as a warning, the queue row is
/// written regardless.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PanelMiss {
    #[error("no panel carries target label \"{target}\" (or more than one does); the panel was not updated")]
    NoPanel { target: String },
    #[error("panel '{title}' (target \"{target}\") was not read in this pass; the panel was not updated")]
    NotRead { target: String, title: String },
    #[error("panel '{title}' (target \"{target}\") has no function row \"{function}\"; the panel was not updated")]
    NoRow {
        target: String,
        title: String,
        function: String,
    },
}

/// The panel and function row of a queue row: the panel whose label is the row's target
/// (対象ラベル, or パネルシート名 when empty), then the row whose 機能 is its 機能ラベル, the
/// stored パネル行 only breaking ties.
pub fn locate<'a>(
    index: &'a PanelIndex,
    tables: &'a HashMap<String, PanelTable>,
    job: &QueueRow,
) -> Result<(&'a PanelRef, &'a PanelRow), PanelMiss> {
    locate_labels(
        index,
        tables,
        job.target_key(),
        &job.function,
        job.panel_row,
    )
}

/// [`locate`] by labels: the panel of `target`, the row of `function` (`hint` breaking ties).
pub fn locate_labels<'a>(
    index: &'a PanelIndex,
    tables: &'a HashMap<String, PanelTable>,
    target: &str,
    function: &str,
    hint: Option<u32>,
) -> Result<(&'a PanelRef, &'a PanelRow), PanelMiss> {
    let panel = index.get(target).ok_or_else(|| PanelMiss::NoPanel {
        target: target.to_string(),
    })?;
    let table = tables.get(&panel.label).ok_or_else(|| PanelMiss::NotRead {
        target: target.to_string(),
        title: panel.title.clone(),
    })?;
    let row = table.find(function, hint).ok_or_else(|| PanelMiss::NoRow {
        target: target.to_string(),
        title: panel.title.clone(),
        function: function.to_string(),
    })?;
    Ok((panel, row))
}

/// A press of `job`'s function on its panel made after it, if the queue shows one: the panel
/// row then shows that newer press, not `job`'s late result. Newer: received later, or (a
/// 受付日時 missing) further down the queue, where appends go.
pub fn newer_press<'a>(queue: &'a Snapshot, job: &QueueRow) -> Option<&'a QueueRow> {
    queue.rows.iter().find(|r| {
        r.job_id != job.job_id
            && r.target_key() == job.target_key()
            && r.function.trim() == job.function.trim()
            && match (r.received_at, job.received_at) {
                (Some(theirs), Some(ours)) => theirs > ours,
                _ => r.row > job.row,
            }
    })
}

/// The `▶ 実行中 (HH:mm〜)` cell of the panel row a claimed `job` belongs to (started at
/// `started_at`), for the claim commit itself, so a press shows it runs without waiting for
/// another write; `None` when its panel row cannot be found.
pub fn running_cell(
    job: &QueueRow,
    started_at: DateTime<Utc>,
    index: &PanelIndex,
    tables: &HashMap<String, PanelTable>,
    tz: Tz,
    layout: &PanelLayout,
) -> Option<ValueRange> {
    status_cell(
        job,
        running_text(Some(started_at), tz),
        index,
        tables,
        layout,
    )
}

/// The status cell of `job`'s panel row showing `text`, for a commit that changes what the
/// row should show (a job turned 承認待ち): the display of later passes then finds it shown.
pub fn status_cell(
    job: &QueueRow,
    text: String,
    index: &PanelIndex,
    tables: &HashMap<String, PanelTable>,
    layout: &PanelLayout,
) -> Option<ValueRange> {
    let (panel, row) = locate(index, tables, job).ok()?;
    Some(status_write(panel, row.row, text, layout))
}

/// What the 状態 cell of `job`'s panel row shows, when the row is found.
pub fn shown_status(
    job: &QueueRow,
    index: &PanelIndex,
    tables: &HashMap<String, PanelTable>,
) -> Option<String> {
    let (_, row) = locate(index, tables, job).ok()?;
    Some(row.status.clone())
}

/// The write of `text` into the 状態 cell of row `row` of `panel`.
fn status_write(panel: &PanelRef, row: u32, text: String, layout: &PanelLayout) -> ValueRange {
    let col = layout.columns.status.0;
    ValueRange::new(
        cell_range(&panel.title, col, col, row),
        vec![vec![Cell::String(text)]],
    )
}

/// The status cell of panel row `row` of `panel`, whose running job's メッセージ becomes
/// `note`, for the write that carries the note: the display of later passes then finds it
/// shown.
pub fn retrying_cell(panel: &PanelRef, row: u32, note: &str, layout: &PanelLayout) -> ValueRange {
    status_write(panel, row, retrying_text(note), layout)
}

/// The waiting/running display of one pass: for each `実行中` row `▶ 実行中 (HH:mm〜)` (or
/// its retry note, [`running_row_text`]), for
/// each `待機` row `⏳ 順番待ち (前に n 件)`, as single status cells.
///
/// Only cells whose text differs from what the panel shows are returned, and at most
/// `limit` of them, so a long queue costs a bounded write per pass; the rest follow in
/// later passes. Running rows come first (oldest 受付日時 first), then waiting rows in queue
/// order, so the oldest presses are updated first. A panel row wanted by two queue rows
/// (possible only with rows appended past the duplicate guard) shows the older one. Rows
/// whose panel or function row cannot be found are skipped; their result write-back reports
/// the miss.
///
/// The duplicate guard's answer on a waiting function's row is replaced by the waiting text
/// on the next pass: docs/design.md §2 asks every waiting row to show its place, and the place says
/// the press was not needed.
pub fn status_updates(
    snapshot: &Snapshot,
    index: &PanelIndex,
    tables: &HashMap<String, PanelTable>,
    tz: Tz,
    layout: &PanelLayout,
    limit: usize,
) -> Vec<ValueRange> {
    let mut running: Vec<&QueueRow> = snapshot
        .rows
        .iter()
        .filter(|r| r.state.is(State::Running))
        .collect();
    running.sort_by_key(|r| (r.received_at.is_none(), r.received_at, r.row));
    let wanted = running
        .into_iter()
        .map(|r| (r, running_row_text(r, tz)))
        .chain(
            claim::waiting_positions(snapshot)
                .into_iter()
                .map(|(i, ahead)| (&snapshot.rows[i], claim::waiting_text(ahead))),
        );
    let mut taken: HashSet<(i32, u32)> = HashSet::new();
    let mut out = Vec::new();
    for (job, text) in wanted {
        if out.len() >= limit {
            break;
        }
        let Ok((panel, row)) = locate(index, tables, job) else {
            continue;
        };
        if !taken.insert((panel.sheet_id, row.row)) || row.status == text {
            continue;
        }
        out.push(status_write(panel, row.row, text, layout));
    }
    out
}

/// The status cells of `承認待ち` rows whose panel shows another text: `text_of` says what
/// each shows ([`crate::approval::waiting_text`]: who asked, approvals counted, approvals
/// that did not count). At most `limit`, riding a write sent anyway, as
/// [`status_updates`] does.
pub fn approval_updates(
    snapshot: &Snapshot,
    index: &PanelIndex,
    tables: &HashMap<String, PanelTable>,
    layout: &PanelLayout,
    limit: usize,
    text_of: impl Fn(&QueueRow) -> Option<String>,
) -> Vec<ValueRange> {
    let mut out = Vec::new();
    for job in snapshot
        .rows
        .iter()
        .filter(|r| r.state.is(State::AwaitingApproval))
    {
        if out.len() >= limit {
            break;
        }
        // A job of the function waiting or running besides (queued past the duplicate guard:
        // a schedule, `enqueue`) has the row: the waiting/running display writes it.
        let shown_by_another = snapshot.rows.iter().any(|r| {
            (r.state.is(State::Waiting) || r.state.is(State::Running))
                && r.target_key() == job.target_key()
                && r.function.trim() == job.function.trim()
        });
        if shown_by_another {
            continue;
        }
        let Some(text) = text_of(job) else {
            continue;
        };
        let Ok((panel, row)) = locate(index, tables, job) else {
            continue;
        };
        if row.status == text {
            continue;
        }
        out.push(status_write(panel, row.row, text, layout));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::fixtures::*;
    use chrono::Duration;
    use serde_json::json;

    #[test]
    fn status_texts_are_exact() {
        // 05:05 UTC is 14:05 in Tokyo.
        let t = at(125);
        assert_eq!(done_text(t, tz()), "✅ 完了 11/30 14:05");
        assert_eq!(running_text(Some(t), tz()), "▶ 実行中 (14:05〜)");
        assert_eq!(running_text(None, tz()), "▶ 実行中");
        assert_eq!(error_text("exit 2"), "❌ エラー: exit 2");
        assert_eq!(error_text("  "), "❌ エラー");
        assert_eq!(TIMEOUT_TEXT, "⏱ タイムアウト");
        assert_eq!(claim::waiting_text(3), "⏳ 順番待ち (前に 3 件)");
        let mut existing = queue_row(2, State::Running, "A", "集計");
        existing.requester = "x@example.com".into();
        assert_eq!(
            claim::duplicate_message(&existing, tz()),
            "既に実行中です（依頼: x@example.com / 12:02）"
        );
    }

    #[test]
    fn a_job_with_inputs_shows_them_after_its_state() {
        let done = PanelOutcome {
            state: State::Done,
            finished_at: at(125),
            url: None,
            message: String::new(),
            next_run: None,
            inputs: "version=1.2.4, dry_run=true".into(),
        };
        assert_eq!(
            done.status_text(tz()),
            "✅ 完了 11/30 14:05 · version=1.2.4, dry_run=true"
        );
        let failed = PanelOutcome {
            state: State::Error,
            message: "exit code 1".into(),
            ..done.clone()
        };
        assert_eq!(
            failed.status_text(tz()),
            "❌ エラー · version=1.2.4, dry_run=true: exit code 1"
        );
        let long = PanelOutcome {
            inputs: format!("note={}", "x".repeat(1000)),
            ..done
        };
        assert!(
            long.status_text(tz()).chars().count() < INPUTS_TEXT_MAX_CHARS + 30,
            "inputs are cut: {}",
            long.status_text(tz())
        );
    }

    #[test]
    fn long_errors_are_cut_on_one_line() {
        let long = format!("line one\n{}", "あ".repeat(100));
        let text = error_text(&long);
        let shown = text
            .strip_prefix("❌ エラー: ")
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(shown.chars().count(), ERROR_TEXT_MAX_CHARS, "{text}");
        assert!(shown.starts_with("line one あ"), "{text}");
        assert!(shown.ends_with("あ…"), "{text}");
    }

    #[test]
    fn result_cells_write_status_result_and_a_date_serial() {
        let panel = panel_ref(5, "Bob's", "A");
        let done = PanelOutcome {
            state: State::Done,
            finished_at: at(125),
            url: Some("https://example.com/r/1".into()),
            message: "ok".into(),
            next_run: None,
            inputs: String::new(),
        };
        let vr = result_cells(&panel, 9, &done, tz(), &PanelLayout::default());
        assert_eq!(vr.range, "'Bob''s'!C9:E9");
        assert_eq!(
            vr.values,
            [[
                json!("✅ 完了 11/30 14:05"),
                json!("https://example.com/r/1"),
                json!(sheet_time::instant_to_serial(at(125), tz()))
            ]]
        );
        let serial = vr.values[0][2].as_f64().unwrap_or_default();
        assert!((serial - 46356.586805).abs() < 1e-5, "serial {serial}");
    }

    #[test]
    fn a_linked_result_keeps_its_formula_and_writes_status_and_time_only() {
        let panel = panel_ref(5, "P", "A");
        let done = PanelOutcome {
            state: State::Done,
            finished_at: at(125),
            url: None,
            message: "ok".into(),
            next_run: None,
            inputs: String::new(),
        };
        let cells = status_and_time_cells(&panel, 9, &done, tz(), &PanelLayout::default());
        let ranges: Vec<&str> = cells.iter().map(|v| v.range.as_str()).collect();
        assert_eq!(ranges, ["'P'!C9", "'P'!E9"], "結果 (D9) is left as it is");
        assert_eq!(cells[0].values, [[json!("✅ 完了 11/30 14:05")]]);
    }

    #[test]
    fn a_message_beginning_with_equals_stays_a_string() {
        let err = PanelOutcome {
            state: State::Error,
            finished_at: at(0),
            url: None,
            message: "=IMPORTXML(\"http://evil\")".into(),
            next_run: None,
            inputs: String::new(),
        };
        let vr = result_cells(
            &panel_ref(5, "P", "A"),
            8,
            &err,
            tz(),
            &PanelLayout::default(),
        );
        assert_eq!(
            vr.values[0][1],
            Cell::String("=IMPORTXML(\"http://evil\")".into())
        );
        assert_eq!(
            vr.values[0][0],
            json!("❌ エラー: =IMPORTXML(\"http://evil\")")
        );
        let timeout = PanelOutcome {
            state: State::Timeout,
            ..err
        };
        let vr = result_cells(
            &panel_ref(5, "P", "A"),
            8,
            &timeout,
            tz(),
            &PanelLayout::default(),
        );
        assert_eq!(vr.values[0][0], json!("⏱ タイムアウト"));
        let cancelled = PanelOutcome {
            state: State::Cancelled,
            ..timeout
        };
        let vr = result_cells(
            &panel_ref(5, "P", "A"),
            8,
            &cancelled,
            tz(),
            &PanelLayout::default(),
        );
        assert_eq!(vr.values[0][0], json!("⏹ キャンセル"));
    }

    #[test]
    fn locate_reports_what_is_missing() {
        let (index, tables) = one_panel(vec![func_row(false, "集計", "", "r", "", "")]);
        let mut job = queue_row(2, State::Done, "A", "集計");
        job.panel_row = Some(30);
        let found = locate(&index, &tables, &job).map(|(p, r)| (p.sheet_id, r.row));
        assert_eq!(found, Ok((5, 8)));
        job.function = "消えた".into();
        let miss = locate(&index, &tables, &job).map(|_| ()).unwrap_err();
        assert!(
            miss.to_string().contains("no function row \"消えた\""),
            "{miss}"
        );
        job.target = "Z".into();
        assert!(matches!(
            locate(&index, &tables, &job),
            Err(PanelMiss::NoPanel { .. })
        ));
    }

    #[test]
    fn waiting_and_running_rows_show_on_their_panel() {
        let (index, tables) = one_panel(vec![
            func_row(false, "集計", "", "r", "", ""),
            func_row(false, "再起動", "✅ 完了 11/30 09:00", "r", "", ""),
            func_row(false, "検査", "⏳ 順番待ち (前に 2 件)", "r", "", ""),
        ]);
        let mut running = queue_row(2, State::Running, "A", "集計");
        running.started_at = Some(at(125));
        let s = snapshot(vec![
            running,
            queue_row(3, State::Waiting, "A", "再起動"),
            queue_row(4, State::Waiting, "A", "検査"),
            queue_row(5, State::Waiting, "Z", "集計"),
        ]);
        let got = status_updates(&s, &index, &tables, tz(), &PanelLayout::default(), 20);
        let got: Vec<(String, Cell)> = got
            .into_iter()
            .map(|v| (v.range, v.values[0][0].clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("'P'!C8".to_string(), json!("▶ 実行中 (14:05〜)")),
                ("'P'!C9".to_string(), json!("⏳ 順番待ち (前に 1 件)")),
            ],
            "再起動 waits behind 集計, which runs on its target; 検査 already shows the right text; target Z has no panel"
        );
    }

    #[test]
    fn a_scheduled_function_shows_its_next_run_before_its_first_run_and_after_each_result() {
        let (index, tables) = one_panel(vec![
            func_row(false, "集計", "", "r", "", ""),
            func_row(false, "再起動", "✅ 完了 11/30 09:00", "r", "", ""),
            func_row(false, "検査", "⏰ 次回 11/30 01:30", "r", "", ""),
        ]);
        let next = at(125);
        let runs: Vec<(String, String, DateTime<Utc>)> = ["集計", "再起動", "検査"]
            .iter()
            .map(|f| ("A".to_string(), f.to_string(), next))
            .collect();
        let got: Vec<(String, serde_json::Value)> = next_run_updates(
            &snapshot(vec![]),
            &index,
            &tables,
            &runs,
            tz(),
            &PanelLayout::default(),
        )
        .into_iter()
        .map(|v| (v.range, v.values[0][0].clone()))
        .collect();
        assert_eq!(
            got,
            [
                ("'P'!C8".to_string(), json!("⏰ 次回 11/30 14:05")),
                ("'P'!C10".to_string(), json!("⏰ 次回 11/30 14:05")),
            ],
            "a row showing a result keeps it (the next run is written with the result)"
        );
        let waiting = snapshot(vec![queue_row(2, State::Waiting, "A", "集計")]);
        assert!(
            next_run_updates(
                &waiting,
                &index,
                &tables,
                &runs[..1],
                tz(),
                &PanelLayout::default()
            )
            .is_empty(),
            "a function with a job waiting shows its place, not its next run"
        );
        let done = PanelOutcome {
            state: State::Done,
            finished_at: at(65),
            url: None,
            message: "ok".into(),
            next_run: Some(next),
            inputs: String::new(),
        };
        assert_eq!(
            done.status_text(tz()),
            "✅ 完了 11/30 13:05 · 次回 11/30 14:05"
        );
    }

    #[test]
    fn at_most_limit_cells_oldest_first_and_only_changed_ones() {
        let rows: Vec<_> = (0..25)
            .map(|i| func_row(false, &format!("f{i:02}"), "", "r", "", ""))
            .collect();
        let (index, mut tables) = one_panel(rows);
        // Queue rows received newest-first in sheet order, to show the order is by 受付日時.
        let jobs: Vec<_> = (0..25u32)
            .map(|i| {
                let mut r = queue_row(2 + i, State::Waiting, "A", &format!("f{:02}", 24 - i));
                r.received_at = Some(at(0) - Duration::minutes(i64::from(i)));
                r
            })
            .collect();
        let s = snapshot(jobs);
        let got = status_updates(&s, &index, &tables, tz(), &PanelLayout::default(), 20);
        assert_eq!(got.len(), 20);
        assert_eq!(got[0].range, "'P'!C8", "f00 was received first");
        assert_eq!(got[0].values[0][0], json!("⏳ 受付済み (開始待ち)"));
        assert_eq!(got[1].values[0][0], json!("⏳ 順番待ち (前に 1 件)"));
        assert_eq!(got[19].range, "'P'!C27");

        // After the daemon wrote them, the next pass writes only the remaining five.
        let table = tables.get_mut("A").unwrap_or_else(|| panic!("table A"));
        for vr in &got {
            let row: u32 = vr.range.trim_start_matches("'P'!C").parse().unwrap_or(0);
            let r = table
                .rows
                .iter_mut()
                .find(|r| r.row == row)
                .unwrap_or_else(|| panic!("{row}"));
            r.status = vr.values[0][0].as_str().unwrap_or_default().to_string();
        }
        let next = status_updates(&s, &index, &tables, tz(), &PanelLayout::default(), 20);
        let ranges: Vec<&str> = next.iter().map(|v| v.range.as_str()).collect();
        assert_eq!(
            ranges,
            ["'P'!C28", "'P'!C29", "'P'!C30", "'P'!C31", "'P'!C32"]
        );
    }
}
