//! `--dry-run`: a decorator over any [`Sheets`] that performs reads and, instead of each
//! write, logs what it would have sent (method, ranges, a summary of the values).
//!
//! Replies are chosen so that the daemon stays safe without knowing it is in dry-run:
//! - every compare-and-swap reports `changed: 0`, so acquiring the lease fails and every
//!   row's claim CAS fails: no job is ever claimed, so none runs (docs/design.md §3 treats a CAS that
//!   changed nothing as "not ours");
//! - response ranges are read for real (one `values.batchGet`), so they show the sheet as it
//!   is, which is consistent with nothing having changed;
//! - `write` and `append` report success; an append reports the range it was given, since
//!   no row was added;
//! - `AddSheet` replies with the existing sheet of that title if there is one, otherwise a
//!   placeholder with a sheet id that no sheet has; a sheet list asked for with the batch
//!   shows the sheets its `AddSheetWithId` requests would have added;
//! - protected-range requests reply as if applied, with nothing to say (`Empty`): the
//!   spreadsheet's protections are as they were.
//!
//! The daemon should still skip claiming entirely in dry-run, so its log shows the waits
//! and results it would write rather than a stream of lost leases.

use async_trait::async_trait;

use super::{
    AppendReply, BatchUpdate, BatchUpdateReply, Cell, Filter, FilterRead, FilterWrite,
    FilterWritten, GridRange, MetadataEntry, MetadataLookup, Reply, Request, SheetMeta, Sheets,
    SheetsError, SpreadsheetMeta, ValueRange,
};

/// How many leading cells of a write are shown in the log, and how long each may be.
const SHOWN_CELLS: usize = 4;
const SHOWN_CHARS: usize = 40;

/// Passes reads through to `S`; logs writes and does not send them.
#[derive(Debug)]
pub struct DryRunSheets<S> {
    inner: S,
}

impl<S: Sheets> DryRunSheets<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }
}

fn short(cell: &Cell) -> String {
    let text = match cell {
        Cell::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if text.chars().count() > SHOWN_CHARS {
        format!("{}…", text.chars().take(SHOWN_CHARS).collect::<String>())
    } else {
        text
    }
}

/// `3×16 cells: ["abc", 46000.5, …]`: the shape and first cells of a block of values.
pub fn summarise(rows: &[Vec<Cell>]) -> String {
    let cells: usize = rows.iter().map(Vec::len).sum();
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let first: Vec<String> = rows.iter().flatten().take(SHOWN_CELLS).map(short).collect();
    let more = if cells > SHOWN_CELLS { ", …" } else { "" };
    format!(
        "{} rows × {width} cols, {cells} cells: [{}{more}]",
        rows.len(),
        first.join(", ")
    )
}

/// One line saying what `request` would change. Long for a reason: one arm per kind of
/// request, a table that reads best whole.
fn describe(request: &Request) -> String {
    match request {
        Request::CompareAndSwap {
            range,
            find,
            replacement,
        } => format!(
            "compare-and-swap sheet {} R{}C{}: {} → {}",
            range.sheet_id,
            range.start_row + 1,
            range.start_col + 1,
            short(&Cell::String(find.clone())),
            short(&Cell::String(replacement.clone()))
        ),
        Request::AppendRows { sheet_id, rows } => {
            format!("append to sheet {sheet_id}: {}", summarise(rows))
        }
        Request::UpdateCells { range, rows } => format!(
            "update cells sheet {} from R{}C{}: {}",
            range.sheet_id,
            range.start_row + 1,
            range.start_col + 1,
            summarise(rows)
        ),
        Request::AddSheet { title, hidden, .. } => {
            format!(
                "add sheet {title:?}{}",
                if *hidden { " (hidden)" } else { "" }
            )
        }
        Request::UpdateSheetHidden { sheet_id, hidden } => {
            format!("set sheet {sheet_id} hidden={hidden}")
        }
        Request::SetDateTimeFormat { range, pattern } => {
            format!("date-time format {pattern:?} on {}", block(range))
        }
        Request::BindRow {
            sheet_id,
            row,
            id,
            key,
            value,
        } => format!(
            "bind row {} of sheet {sheet_id} as metadata #{id} {key}={value}",
            row + 1
        ),
        Request::DeleteMetadata { id } => format!("delete metadata #{id}"),
        Request::MoveMetadataToRow { id, sheet_id, row } => {
            format!("move metadata #{id} to row {} of sheet {sheet_id}", row + 1)
        }
        Request::MarkSheet {
            sheet_id,
            id,
            key,
            value,
        } => format!("mark sheet {sheet_id} with project metadata #{id} {key}={value}"),
        Request::DeleteSheet { sheet_id } => format!("delete sheet {sheet_id}"),
        Request::SortRows {
            range,
            column,
            ascending,
        } => format!(
            "sort {} by column {} {}",
            block(range),
            column + 1,
            if *ascending {
                "ascending"
            } else {
                "descending"
            }
        ),
        Request::MoveRows {
            sheet_id,
            start,
            end,
            destination,
        } => format!(
            "move rows {}..{end} of sheet {sheet_id} before row {}",
            start + 1,
            destination + 1
        ),
        Request::InsertRows {
            sheet_id,
            at,
            count,
        } => {
            format!(
                "insert {count} rows before row {} of sheet {sheet_id}",
                at + 1
            )
        }
        Request::MoveCells {
            source,
            sheet_id,
            row,
            col,
        } => format!(
            "move sheet {} rows {}..{} to sheet {sheet_id} R{}C{}",
            source.sheet_id,
            source.start_row + 1,
            source.end_row,
            row + 1,
            col + 1
        ),
        Request::DeleteRows {
            sheet_id,
            start,
            end,
        } => format!("delete rows {}..{end} of sheet {sheet_id}", start + 1),
        Request::SetColumnCount { sheet_id, columns } => {
            format!("widen sheet {sheet_id} to {columns} columns")
        }
        Request::SetCheckboxes { range } => format!("checkboxes on {}", block(range)),
        Request::ClearCheckboxes { range } => format!("no checkboxes on {}", block(range)),
        Request::SetValidation { range, rule } => {
            format!("data validation {rule:?} on {}", block(range))
        }
        Request::AddSheetWithId {
            sheet_id, title, ..
        } => format!("add sheet {title:?} with id {sheet_id}"),
        Request::DuplicateSheet {
            source,
            sheet_id,
            title,
        } => format!("copy sheet {source} to {title:?} with id {sheet_id}"),
        Request::WriteFormulas { range, rows } => format!(
            "update cells (formulas entered) sheet {} from R{}C{}: {}",
            range.sheet_id,
            range.start_row + 1,
            range.start_col + 1,
            summarise(rows)
        ),
        Request::HideColumns {
            sheet_id,
            start,
            end,
        } => format!("hide columns {}..{end} of sheet {sheet_id}", start + 1),
        Request::PlaceSheet {
            sheet_id,
            index,
            frozen_rows,
        } => format!("move sheet {sheet_id} to tab {index}, {frozen_rows} rows frozen"),
        Request::SetRowCount { sheet_id, rows } => {
            format!("grow sheet {sheet_id} to {rows} rows")
        }
        Request::AddProtectedRange {
            area,
            description,
            editors,
            groups,
        } => format!(
            "protect {} ({description:?}), editors {}{}",
            area_text(area),
            editors.join(", "),
            groups_text(groups)
        ),
        Request::UpdateProtectedRange {
            id,
            editors,
            groups,
            clear_unprotected,
        } => format!(
            "protected range #{id}: not warning-only, editors {}{}{}",
            editors.join(", "),
            groups_text(groups),
            if *clear_unprotected {
                ", no unprotected holes"
            } else {
                ""
            }
        ),
        Request::DeleteProtectedRange { id } => format!("remove protected range #{id}"),
    }
}

/// `sheet 5 rows 1.. cols 8..10`: an area as the dry-run log names it (1-based, inclusive;
/// an open end left blank).
fn area_text(area: &crate::sheets::Area) -> String {
    let end = |e: Option<u32>| e.map_or(String::new(), |e| e.to_string());
    format!(
        "sheet {} rows {}..{} cols {}..{}",
        area.sheet_id,
        area.start_row + 1,
        end(area.end_row),
        area.start_col + 1,
        end(area.end_col)
    )
}

/// `sheet 5 rows 8..12 cols 1..1`: a block as the dry-run log names it (1-based, inclusive).
fn block(range: &GridRange) -> String {
    format!(
        "sheet {} rows {}..{} cols {}..{}",
        range.sheet_id,
        range.start_row + 1,
        range.end_row,
        range.start_col + 1,
        range.end_col
    )
}

impl<S: Sheets> DryRunSheets<S> {
    /// The reply to an `AddSheet` that was not sent.
    async fn pretend_add_sheet(
        &self,
        meta: &mut Option<SpreadsheetMeta>,
        title: &str,
        hidden: bool,
        row_count: i32,
        column_count: i32,
    ) -> Result<SheetMeta, SheetsError> {
        if meta.is_none() {
            *meta = Some(self.inner.metadata().await?);
        }
        let meta = meta.get_or_insert_with(SpreadsheetMeta::default);
        if let Some(existing) = meta.sheet(title) {
            return Ok(existing.clone());
        }
        let sheet = SheetMeta {
            sheet_id: meta.sheets.iter().map(|s| s.sheet_id).max().unwrap_or(0) + 1,
            title: title.to_string(),
            index: i32::try_from(meta.sheets.len()).unwrap_or(i32::MAX),
            hidden,
            row_count,
            column_count,
            protected_ranges: Vec::new(),
        };
        meta.sheets.push(sheet.clone());
        Ok(sheet)
    }
}

#[async_trait]
impl<S: Sheets> Sheets for DryRunSheets<S> {
    fn account(&self) -> String {
        self.inner.account()
    }

    fn clock_skew(&self) -> Option<chrono::TimeDelta> {
        self.inner.clock_skew()
    }

    fn google_now(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.inner.google_now()
    }

    fn budget_waited(&self) -> std::time::Duration {
        self.inner.budget_waited()
    }

    fn call_stats(&self) -> Option<std::sync::Arc<crate::sheets::stats::SheetsStats>> {
        self.inner.call_stats()
    }

    fn set_budget_share(&self, reads: u32, writes: u32) {
        self.inner.set_budget_share(reads, writes)
    }

    fn set_precedence(&self, precedence: super::Precedence) {
        self.inner.set_precedence(precedence)
    }

    async fn metadata(&self) -> Result<SpreadsheetMeta, SheetsError> {
        self.inner.metadata().await
    }

    async fn read(&self, ranges: &[String]) -> Result<Vec<ValueRange>, SheetsError> {
        self.inner.read(ranges).await
    }

    async fn write(&self, data: &[ValueRange]) -> Result<(), SheetsError> {
        for vr in data {
            tracing::info!(
                dry_run = true,
                method = "values.batchUpdate",
                range = %vr.range,
                values = %summarise(&vr.values),
                "dry run: not writing"
            );
        }
        Ok(())
    }

    async fn batch_update(&self, batch: &BatchUpdate) -> Result<BatchUpdateReply, SheetsError> {
        let mut meta = None;
        let mut replies = Vec::with_capacity(batch.requests.len());
        for request in &batch.requests {
            tracing::info!(
                dry_run = true,
                method = "spreadsheets.batchUpdate",
                request = %describe(request),
                "dry run: not sending"
            );
            replies.push(match request {
                Request::CompareAndSwap { .. } => Reply::CompareAndSwap { changed: 0 },
                Request::AddSheet {
                    title,
                    hidden,
                    row_count,
                    column_count,
                } => Reply::AddSheet {
                    sheet: self
                        .pretend_add_sheet(&mut meta, title, *hidden, *row_count, *column_count)
                        .await?,
                },
                _ => Reply::Empty,
            });
        }
        let ranges = if batch.response_ranges.is_empty() {
            Vec::new()
        } else {
            self.inner.read(&batch.response_ranges).await?
        };
        // The sheet list is a read of what is there, with the sheets the batch would have
        // added by id (so a caller that names its new sheet finds it, as after a real batch).
        let sheets = if batch.sheet_list && batch.response_ranges.is_empty() {
            let mut sheets = self.inner.metadata().await?.sheets;
            for request in &batch.requests {
                if let Request::AddSheetWithId {
                    sheet_id,
                    title,
                    row_count,
                    column_count,
                    ..
                } = request
                {
                    if !sheets.iter().any(|s| s.title == *title) {
                        sheets.push(SheetMeta {
                            sheet_id: *sheet_id,
                            title: title.clone(),
                            index: i32::try_from(sheets.len()).unwrap_or(i32::MAX),
                            row_count: i32::try_from(*row_count).unwrap_or(i32::MAX),
                            column_count: i32::try_from(*column_count).unwrap_or(i32::MAX),
                            ..SheetMeta::default()
                        });
                    }
                }
            }
            sheets
        } else {
            Vec::new()
        };
        Ok(BatchUpdateReply {
            replies,
            ranges,
            row_metadata: Vec::new(),
            sheets,
            // The dry run reads no protections: a tick that needs a guard is judged by the
            // last metadata read.
            protections: Vec::new(),
        })
    }

    async fn read_filtered(&self, filters: &[Filter]) -> Result<Vec<FilterRead>, SheetsError> {
        self.inner.read_filtered(filters).await
    }

    /// Logs each entry and reports that none landed, so nothing counts as written.
    async fn write_filtered(
        &self,
        data: &[FilterWrite],
    ) -> Result<Vec<Option<FilterWritten>>, SheetsError> {
        for w in data {
            let cells = w
                .values
                .iter()
                .map(|r| r.iter().map(|c| c.clone().unwrap_or(Cell::Null)).collect())
                .collect::<Vec<_>>();
            tracing::info!(
                dry_run = true,
                method = "values.batchUpdateByDataFilter",
                filter = %w.filter,
                values = %summarise(&cells),
                "dry run: not writing"
            );
        }
        Ok(vec![None; data.len()])
    }

    async fn search_metadata(
        &self,
        lookup: &MetadataLookup,
    ) -> Result<Vec<MetadataEntry>, SheetsError> {
        self.inner.search_metadata(lookup).await
    }

    async fn append(&self, range: &str, rows: &[Vec<Cell>]) -> Result<AppendReply, SheetsError> {
        tracing::info!(
            dry_run = true,
            method = "values.append",
            range = %range,
            values = %summarise(rows),
            "dry run: not appending"
        );
        Ok(AppendReply {
            updated_range: range.to_string(),
        })
    }
}

/// `, groups a@x, b@y` when a protection lets groups in.
fn groups_text(groups: &[String]) -> String {
    if groups.is_empty() {
        String::new()
    } else {
        format!(", groups {}", groups.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sheets::{ErrorKind, GridRange};
    use serde_json::json;
    use std::sync::Mutex;

    /// A port that answers reads and fails the test on any write.
    #[derive(Default)]
    struct ReadOnly {
        reads: Mutex<Vec<Vec<String>>>,
    }

    fn refuse(method: &'static str) -> SheetsError {
        SheetsError::new(ErrorKind::Fatal, method, "dry run sent a write")
    }

    #[async_trait]
    impl Sheets for ReadOnly {
        async fn metadata(&self) -> Result<SpreadsheetMeta, SheetsError> {
            Ok(SpreadsheetMeta {
                spreadsheet_id: "x".into(),
                time_zone: "Asia/Tokyo".into(),
                sheets: vec![SheetMeta {
                    sheet_id: 9,
                    title: "_ワーカー".into(),
                    ..Default::default()
                }],
            })
        }
        async fn read(&self, ranges: &[String]) -> Result<Vec<ValueRange>, SheetsError> {
            if let Ok(mut r) = self.reads.lock() {
                r.push(ranges.to_vec());
            }
            Ok(ranges
                .iter()
                .map(|r| ValueRange::new(r.clone(), vec![vec![json!("free")]]))
                .collect())
        }
        async fn write(&self, _: &[ValueRange]) -> Result<(), SheetsError> {
            Err(refuse("values.batchUpdate"))
        }
        async fn batch_update(&self, _: &BatchUpdate) -> Result<BatchUpdateReply, SheetsError> {
            Err(refuse("spreadsheets.batchUpdate"))
        }
        async fn append(&self, _: &str, _: &[Vec<Cell>]) -> Result<AppendReply, SheetsError> {
            Err(refuse("values.append"))
        }
        async fn read_filtered(&self, filters: &[Filter]) -> Result<Vec<FilterRead>, SheetsError> {
            Ok(vec![FilterRead::default(); filters.len()])
        }
        async fn write_filtered(
            &self,
            _: &[FilterWrite],
        ) -> Result<Vec<Option<FilterWritten>>, SheetsError> {
            Err(refuse("values.batchUpdateByDataFilter"))
        }
        async fn search_metadata(
            &self,
            _: &MetadataLookup,
        ) -> Result<Vec<MetadataEntry>, SheetsError> {
            Ok(Vec::new())
        }
    }

    #[tokio::test]
    async fn writes_are_not_sent_and_claims_fail_safely() {
        let dry = DryRunSheets::new(ReadOnly::default());
        dry.write(&[ValueRange::new("'Q'!A1", vec![vec![json!("x")]])])
            .await
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let appended = dry.append("'Q'!A:P", &[vec![json!("job")]]).await;
        assert_eq!(
            appended.ok().map(|a| a.updated_range),
            Some("'Q'!A:P".into())
        );

        let batch = BatchUpdate {
            requests: vec![
                Request::CompareAndSwap {
                    range: GridRange::cell(9, 0, 1),
                    find: "free".into(),
                    replacement: "lease|me|n|t".into(),
                },
                Request::UpdateCells {
                    range: GridRange::cell(1, 3, 0),
                    rows: vec![vec![json!("実行中")]],
                },
                Request::AddSheet {
                    title: "_ワーカー".into(),
                    hidden: true,
                    row_count: 10,
                    column_count: 5,
                },
                Request::AddSheet {
                    title: "new".into(),
                    hidden: false,
                    row_count: 10,
                    column_count: 5,
                },
            ],
            response_ranges: vec!["'_ワーカー'!B1".into()],
            ..Default::default()
        };
        let reply = dry
            .batch_update(&batch)
            .await
            .map_err(|e| e.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reply.replies[0], Reply::CompareAndSwap { changed: 0 });
        assert_eq!(reply.replies[1], Reply::Empty);
        match (&reply.replies[2], &reply.replies[3]) {
            (Reply::AddSheet { sheet: a }, Reply::AddSheet { sheet: b }) => {
                assert_eq!(a.sheet_id, 9, "an existing sheet is answered as itself");
                assert_eq!(b.sheet_id, 10, "a new sheet gets an unused id");
            }
            other => panic!("unexpected replies {other:?}"),
        }
        assert_eq!(
            reply.ranges,
            vec![ValueRange::new("'_ワーカー'!B1", vec![vec![json!("free")]])],
            "response ranges are the sheet as it is"
        );
        let reads = dry
            .inner()
            .reads
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        assert_eq!(reads, vec![vec!["'_ワーカー'!B1".to_string()]]);
    }

    #[test]
    fn summary_shows_shape_and_first_cells() {
        let long = "x".repeat(100);
        let s = summarise(&[
            vec![json!("a"), json!(1), json!(long)],
            vec![json!(true), json!(null)],
        ]);
        assert!(
            s.starts_with("2 rows × 3 cols, 5 cells: [\"a\", 1, \""),
            "{s}"
        );
        assert!(s.contains("…"), "{s}");
        assert!(s.ends_with(", …]"), "{s}");
    }
}
