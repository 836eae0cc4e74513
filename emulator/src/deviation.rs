//! Deliberately wrong behaviours, one per Google behaviour sheetq relies on: a test switches
//! one on to show that the probe which checks that behaviour (sheetq's `check --probe`) reports
//! DIFFERS, so no probe is a test that cannot fail. Never on in normal use; `sheetq
//! emulator` has no flag for them.
//!
//! Each variant names what it changes; the hooks live where the behaviour does (`batch`,
//! `by_filter`, `api::append`, `http`), and the row-metadata ones share the helpers here.
//! [`Rules`] carries a test's choice of them, with the reading of `sortRange` it picked
//! (`SortMetadata`), to every request.

use super::dimension::SortMetadata;
use super::store::Spreadsheet;

/// Behaviours of the emulator that Google does not document and that a test may choose
/// (`EmulatorOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rules {
    /// Whether `sortRange` moves row metadata with the rows.
    pub sort_metadata: SortMetadata,
    /// A behaviour gotten wrong on purpose, for a probe's test (`deviation.rs`).
    pub deviation: Option<Deviation>,
}

impl Rules {
    pub fn deviates(&self, d: Deviation) -> bool {
        self.deviation == Some(d)
    }
}

/// One behaviour the emulator gets wrong on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deviation {
    /// `findReplace` ignores `matchCase` and `matchEntireCell`.
    LooseFindReplace,
    /// A `batchUpdate` with an invalid request keeps the requests before it.
    PartialBatch,
    /// `batchUpdate`'s `responseRanges` show the spreadsheet as it was before the requests.
    ReadBackBeforeRequests,
    /// Row metadata stays at its row index when rows are inserted, deleted or moved.
    RowMetadataKeepsIndex,
    /// `cutPaste` of whole rows' cells takes their row metadata along.
    CutPasteMovesMetadata,
    /// `values.batchUpdateByDataFilter` clears the cells sent as JSON `null`.
    FilterWriteNullClears,
    /// `values.batchUpdateByDataFilter` skips an entry whose filter matches nothing and
    /// applies the rest (instead of failing the whole call).
    FilterMissSkipped,
    /// `deleteDeveloperMetadata` that matches nothing fails the batch.
    DeleteMissingMetadataFails,
    /// `createDeveloperMetadata` with an id in use replaces the old entry.
    DuplicateMetadataIdReplaces,
    /// `values.append` looks for the table from the top of the sheet, whatever row the
    /// range starts at, so a blank row inside the queue receives the new row.
    AppendFromTop,
    /// Concurrent `batchUpdate` calls each work on a copy taken when they arrived, and the
    /// last to finish wins: two compare-and-swaps can both succeed.
    UnserialisedBatches,
    /// `addProtectedRange` is judged to touch no cell: anyone who may edit the file protects
    /// anything, even inside a range closed to them.
    ProtectAnywhere,
    /// Creating, moving and deleting developer metadata is judged to touch no cell: anyone
    /// who may edit the file changes entries on protected sheets and rows.
    MetadataIgnoresProtection,
    /// A viewer's (or commenter's) write goes through as an editor's.
    ViewersWrite,
}

/// The row metadata of sheet `sheet`, by row index: taken before an edit, to pin it back.
pub fn row_metadata(ss: &Spreadsheet, sheet: usize) -> Vec<Vec<i32>> {
    ss.sheets[sheet]
        .rows
        .iter()
        .map(|r| r.meta.clone())
        .collect()
}

/// Puts row metadata back at the indexes `before` had, as if rows had not moved: entries
/// past the sheet's last row are lost (and pruned by the caller).
pub fn pin_row_metadata(ss: &mut Spreadsheet, sheet: usize, before: Vec<Vec<i32>>) {
    let s = &mut ss.sheets[sheet];
    for row in &mut s.rows {
        row.meta.clear();
    }
    let rows = s.row_count;
    for (i, ids) in before.into_iter().enumerate() {
        if !ids.is_empty() && (i as u32) < rows {
            s.row_mut(i as u32).meta = ids;
        }
    }
}

/// Moves the row metadata of rows `from..from + n` to rows `to..to + n` of sheet `sheet`.
pub fn carry_row_metadata(ss: &mut Spreadsheet, sheet: usize, from: u32, to: u32, n: u32) {
    let s = &mut ss.sheets[sheet];
    let moved: Vec<Vec<i32>> = (from..from + n)
        .map(|r| {
            s.rows
                .get_mut(r as usize)
                .map(|row| std::mem::take(&mut row.meta))
                .unwrap_or_default()
        })
        .collect();
    for (k, ids) in moved.into_iter().enumerate() {
        if !ids.is_empty() {
            s.row_mut(to + k as u32).meta.extend(ids);
        }
    }
}
