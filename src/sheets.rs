//! The port through which sheetq reaches a spreadsheet: the [`Sheets`] trait, the plain
//! value types it speaks, and the classification of its errors.
//!
//! The daemon, `init`, `check` and the CLI only ever see this trait. The Google
//! implementation (`google-sheets4` over HTTP, which is also how the emulator is reached) and
//! decorators such as dry-run live behind it, so nothing else in the crate names a
//! `google-sheets4` type.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One cell value as the API returns it with `valueRenderOption=UNFORMATTED_VALUE`:
/// a string, a number (dates are serial numbers), a boolean, or null for an empty cell.
pub type Cell = serde_json::Value;

/// A range and its values, row-major. Trailing empty rows and cells are omitted by the API,
/// so a row may be shorter than the range is wide.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ValueRange {
    /// A1 notation, e.g. `'_ジョブキュー'!A1:P`.
    pub range: String,
    pub values: Vec<Vec<Cell>>,
}

impl ValueRange {
    pub fn new(range: impl Into<String>, values: Vec<Vec<Cell>>) -> Self {
        Self {
            range: range.into(),
            values,
        }
    }
}

/// The first row of the first range of a read (e.g. a header read as `A1:P1`), empty when
/// the API left it out (an empty row is omitted, as trailing empty rows always are).
pub fn first_row(ranges: &[ValueRange]) -> Vec<Cell> {
    ranges
        .first()
        .and_then(|v| v.values.first())
        .cloned()
        .unwrap_or_default()
}

/// What sheetq needs to know of a spreadsheet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SpreadsheetMeta {
    pub spreadsheet_id: String,
    /// IANA zone of the spreadsheet (`properties.timeZone`), e.g. `Asia/Tokyo`. Date serials
    /// in cells are wall-clock times in this zone.
    pub time_zone: String,
    pub sheets: Vec<SheetMeta>,
}

impl SpreadsheetMeta {
    pub fn sheet(&self, title: &str) -> Option<&SheetMeta> {
        self.sheets.iter().find(|s| s.title == title)
    }
}

/// Whether A1 `range` (with its sheet) may be read as `meta` shows the spreadsheet: its sheet
/// exists and its top-left cell lies inside the grid. Google refuses a whole read for one
/// range that names a missing sheet ("Unable to parse range") or starts past the grid
/// ("exceeds grid limits"), so a range from the config or a cell is asked only then.
pub fn fits_grid(meta: &SpreadsheetMeta, range: &str) -> bool {
    let Ok(r) = crate::a1::A1Range::parse(range) else {
        return false;
    };
    let Some(sheet) = r.sheet.as_deref().and_then(|t| meta.sheet(t)) else {
        return false;
    };
    let inside = |start: Option<u32>, count: i32| start.unwrap_or(0) < count.max(0) as u32;
    inside(r.start_row, sheet.row_count) && inside(r.start_col, sheet.column_count)
}

/// One sheet (tab) of a spreadsheet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SheetMeta {
    pub sheet_id: i32,
    pub title: String,
    pub index: i32,
    pub hidden: bool,
    pub row_count: i32,
    pub column_count: i32,
    /// The sheet's protected ranges (`sheets.protectedRanges`), as far as this account may
    /// see them: Google shows a protection's editors only to those who may edit it.
    pub protected_ranges: Vec<ProtectedRange>,
}

impl SheetMeta {
    /// Letters of the sheet's last grid column (`P` for 16 columns): reads that name it stay
    /// inside the grid, which Google requires.
    pub fn last_column(&self) -> String {
        crate::a1::column_letters((self.column_count.max(1) - 1) as u32)
    }
}

/// A block of cells in grid coordinates: zero-based, half-open, as the API's `GridRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridRange {
    pub sheet_id: i32,
    pub start_row: u32,
    pub end_row: u32,
    pub start_col: u32,
    pub end_col: u32,
}

impl GridRange {
    /// The single cell at zero-based `row`, `col`.
    pub fn cell(sheet_id: i32, row: u32, col: u32) -> Self {
        Self {
            sheet_id,
            start_row: row,
            end_row: row + 1,
            start_col: col,
            end_col: col + 1,
        }
    }
}

/// A block of a sheet whose far ends may be open, as Google describes the area of a
/// protected range: zero-based, half-open, and an end it leaves out is the sheet's edge
/// (wherever rows or columns added later move it). Every end open is the whole sheet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Area {
    pub sheet_id: i32,
    pub start_row: u32,
    pub end_row: Option<u32>,
    pub start_col: u32,
    pub end_col: Option<u32>,
}

impl Area {
    /// The whole sheet, now and however it grows.
    pub fn sheet(sheet_id: i32) -> Self {
        Self {
            sheet_id,
            start_row: 0,
            end_row: None,
            start_col: 0,
            end_col: None,
        }
    }

    /// Whole columns `start..end` (zero-based, half-open), every row now and later.
    pub fn columns(sheet_id: i32, start: u32, end: u32) -> Self {
        Self {
            start_col: start,
            end_col: Some(end),
            ..Self::sheet(sheet_id)
        }
    }

    /// Exactly the cells of `range`.
    pub fn cells(range: GridRange) -> Self {
        Self {
            sheet_id: range.sheet_id,
            start_row: range.start_row,
            end_row: Some(range.end_row),
            start_col: range.start_col,
            end_col: Some(range.end_col),
        }
    }

    /// Whether it is the whole sheet (a "protected sheet" in Google's words).
    pub fn is_sheet(&self) -> bool {
        *self == Self::sheet(self.sheet_id)
    }

    /// Whether every cell of `other` is in it.
    pub fn contains(&self, other: &Area) -> bool {
        let within = |start: u32, end: Option<u32>, o_start: u32, o_end: Option<u32>| {
            start <= o_start
                && match (end, o_end) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some(e), Some(o)) => o <= e,
                }
        };
        self.sheet_id == other.sheet_id
            && within(self.start_row, self.end_row, other.start_row, other.end_row)
            && within(self.start_col, self.end_col, other.start_col, other.end_col)
    }

    /// Whether it and `other` share a cell.
    pub fn overlaps(&self, other: &Area) -> bool {
        let meet = |start: u32, end: Option<u32>, o_start: u32, o_end: Option<u32>| {
            end.is_none_or(|e| o_start < e) && o_end.is_none_or(|o| start < o)
        };
        self.sheet_id == other.sheet_id
            && meet(self.start_row, self.end_row, other.start_row, other.end_row)
            && meet(self.start_col, self.end_col, other.start_col, other.end_col)
    }
}

/// A protected range as `spreadsheets.get` lists it under its sheet: the parts of Google's
/// `ProtectedRange` that decide who may write the area. One backed by a named range or a
/// table and without a `range` is not listed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProtectedRange {
    /// `protectedRangeId`.
    pub id: i32,
    /// What it protects.
    pub area: Area,
    pub description: String,
    /// Anyone may still edit, after a warning: no protection at all against a script.
    pub warning_only: bool,
    /// `editors.users`: e-mail addresses of the users who may edit it. Google shows them only
    /// to a caller who may edit the range (see `requesting_user_can_edit`).
    pub editors: Vec<String>,
    /// `editors.groups`: e-mail addresses of groups whose members may edit it.
    pub groups: Vec<String>,
    /// `editors.domainUsersCanEdit`: everyone in the document's Workspace domain may edit it.
    pub domain_users_can_edit: bool,
    /// Holes in a protected sheet that anyone with edit access to the file may edit.
    pub unprotected: Vec<Area>,
    /// Whether the account that read it may edit the area (Google's `requestingUserCanEdit`).
    pub requesting_user_can_edit: bool,
}

/// A data-validation rule of [`Request::SetValidation`]
/// (https://developers.google.com/sheets/api/reference/rest/v4/other#ConditionType).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Validation {
    /// One of these values, offered as a dropdown (`ONE_OF_LIST`).
    List(Vec<String>),
    /// One of the values of an A1 range with its sheet, offered as a dropdown (`ONE_OF_RANGE`).
    Range(String),
    /// A valid date (`DATE_IS_VALID`).
    Date,
    /// A number from `min` to `max` (`NUMBER_BETWEEN`).
    Number { min: f64, max: f64 },
}

/// The `spreadsheets.batchUpdate` requests sheetq sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// A compare-and-swap on the cells of `range`: every cell whose whole, case-sensitive
    /// text equals `find` becomes `replacement` (`matchEntireCell`, `matchCase`, no regex).
    CompareAndSwap {
        range: GridRange,
        find: String,
        replacement: String,
    },
    /// Write string values into a block (as `updateCells` with `userEnteredValue`), RAW.
    UpdateCells {
        range: GridRange,
        rows: Vec<Vec<Cell>>,
    },
    /// Add a sheet with the given title at the end, optionally hidden.
    AddSheet {
        title: String,
        hidden: bool,
        row_count: i32,
        column_count: i32,
    },
    /// Hide or show an existing sheet (`updateSheetProperties` with `fields: "hidden"`):
    /// `init` hides `_ジョブキュー` and `_ワーカー` when a person has un-hidden them.
    UpdateSheetHidden { sheet_id: i32, hidden: bool },
    /// Widen (never narrow) a sheet's grid to `columns` columns (`updateSheetProperties`
    /// with `fields: "gridProperties.columnCount"`).
    SetColumnCount { sheet_id: i32, columns: i32 },
    /// Make every cell of `range` a checkbox (`setDataValidation` with a `BOOLEAN`
    /// condition): the ▶ column of a panel.
    SetCheckboxes { range: GridRange },
    /// Give every cell of `range` a data-validation rule (`setDataValidation`, strict, so
    /// the web refuses a value that breaks it; the API writes it anyway, so sheetq checks
    /// every value it takes itself): an input cell of a panel.
    SetValidation { range: GridRange, rule: Validation },
    /// Show the numbers in a block as date-times (`repeatCell` with a `DATE_TIME` number
    /// format), so the serials sheetq writes read as dates to people. Values are untouched.
    SetDateTimeFormat { range: GridRange, pattern: String },
    /// Attach developer metadata with an explicit id to one row (`createDeveloperMetadata`,
    /// location `dimensionRange` ROWS, visibility `DOCUMENT`): the row binding of a claimed
    /// job. Google documents that it stays with its row when rows are inserted or deleted
    /// above it and is deleted with the row; creating an id that exists fails the batch.
    BindRow {
        sheet_id: i32,
        /// Zero-based row index.
        row: u32,
        id: i32,
        key: String,
        value: String,
    },
    /// Append rows of values after the last row with data of a sheet (`appendCells` with
    /// `fields: "userEnteredValue"`, RAW), growing the grid as needed: inside a batch, an
    /// append that applies with the batch or not at all.
    AppendRows { sheet_id: i32, rows: Vec<Vec<Cell>> },
    /// Insert `count` empty rows before zero-based row `at` (`insertDimension`, not
    /// inheriting the format of the row above).
    InsertRows { sheet_id: i32, at: u32, count: u32 },
    /// Move the cells of `source` (values, formats, notes) so that their top-left lands at
    /// zero-based (`row`, `col`) of sheet `sheet_id` (`cutPaste`, `PASTE_NORMAL`); the
    /// source is left empty. Row metadata stays where it was.
    MoveCells {
        source: GridRange,
        sheet_id: i32,
        row: u32,
        col: u32,
    },
    /// Delete the rows `start..end` (zero-based, half-open) of a sheet (`deleteDimension`);
    /// their row metadata goes with them.
    DeleteRows { sheet_id: i32, start: u32, end: u32 },
    /// Add a sheet with an id chosen by the caller (`addSheet` with `properties.sheetId`;
    /// an id in use fails the batch), at tab position `index` (the end when `None`), with
    /// `frozen_rows` frozen: later requests of the same batch can name it at once.
    AddSheetWithId {
        sheet_id: i32,
        title: String,
        index: Option<u32>,
        row_count: u32,
        column_count: u32,
        frozen_rows: u32,
    },
    /// Copy a sheet (values, formats, validation; not its developer metadata) to a new
    /// sheet with the given id and title, placed right after it (`duplicateSheet`): a backup
    /// kept before a sheet's content is replaced.
    DuplicateSheet {
        source: i32,
        sheet_id: i32,
        title: String,
    },
    /// Like [`Request::UpdateCells`], except that a string starting with `=` is entered as
    /// a formula (`formulaValue`). Only for text sheetq composes itself (the index's
    /// `HYPERLINK` cells), never for a value read from a sheet or a command.
    WriteFormulas {
        range: GridRange,
        rows: Vec<Vec<Cell>>,
    },
    /// Remove the data validation (checkboxes) from every cell of `range`
    /// (`setDataValidation` without a rule).
    ClearCheckboxes { range: GridRange },
    /// Hide columns `start..end` (zero-based, half-open) of a sheet
    /// (`updateDimensionProperties`, `hiddenByUser`).
    HideColumns { sheet_id: i32, start: u32, end: u32 },
    /// Move a sheet to tab position `index` and freeze its first `frozen_rows` rows
    /// (`updateSheetProperties` with `fields: "index,gridProperties.frozenRowCount"`).
    PlaceSheet {
        sheet_id: i32,
        index: u32,
        frozen_rows: u32,
    },
    /// Make a sheet's grid `rows` rows high (`updateSheetProperties` with
    /// `fields: "gridProperties.rowCount"`); only ever sent to grow a grid.
    SetRowCount { sheet_id: i32, rows: u32 },
    /// Delete the developer metadata with this id wherever it is (`deleteDeveloperMetadata`
    /// with a `developerMetadataLookup` by `metadataId`); nothing happens if it is gone.
    DeleteMetadata { id: i32 },
    /// Move the developer metadata with this id to zero-based row `row` of a sheet
    /// (`updateDeveloperMetadata` by `metadataId`, `fields: "location"`): what a person
    /// might try on a row binding; sheetq itself only does it in `check --probe`.
    MoveMetadataToRow { id: i32, sheet_id: i32, row: u32 },
    /// Attach `key` = `value` to a sheet as developer metadata of visibility `PROJECT`
    /// (`createDeveloperMetadata`, location `sheetId`): only the caller's own Cloud project
    /// can read, change or delete it, so no person and no Apps Script can write or copy
    /// one (`provenance`). A sheet location, so that it can go in the very batch that
    /// appends a row whose index is not known in advance.
    /// It is created with the explicit `metadataId` `id` (an id in use fails the batch), so
    /// that it is deleted by id ([`Request::DeleteMetadata`]).
    MarkSheet {
        sheet_id: i32,
        id: i32,
        key: String,
        value: String,
    },
    /// Delete a sheet (`deleteSheet`): `check --probe` removes its temporary sheet.
    DeleteSheet { sheet_id: i32 },
    /// Sort the rows of `range` by one of its columns (`sortRange`, one `sortSpec` on the
    /// zero-based sheet column `column`): what a person's 並べ替え does; `check --probe`
    /// sees where row metadata goes.
    SortRows {
        range: GridRange,
        column: u32,
        ascending: bool,
    },
    /// Move rows `start..end` so that they land before row `destination` as counted before
    /// the move (`moveDimension`): a person dragging rows.
    MoveRows {
        sheet_id: i32,
        start: u32,
        end: u32,
        destination: u32,
    },
    /// Protect `area` so that only `editors` (e-mail addresses; the spreadsheet's owner
    /// always may) and the members of `groups` (Google Groups' addresses) edit it:
    /// `addProtectedRange`, not warning-only, not the whole domain. The area's cells keep
    /// their values.
    AddProtectedRange {
        area: Area,
        description: String,
        editors: Vec<String>,
        groups: Vec<String>,
    },
    /// Make protected range `id` a real protection whose only editors are `editors` and the
    /// members of `groups`
    /// (`updateProtectedRange` with `fields: "warningOnly,editors"`: setting both at once,
    /// because Google makes every editor of the file an editor when `warningOnly` turns false
    /// without `editors`); with `clear_unprotected`, also without holes
    /// (`unprotectedRanges` emptied). Its area and description stay.
    UpdateProtectedRange {
        id: i32,
        editors: Vec<String>,
        groups: Vec<String>,
        clear_unprotected: bool,
    },
    /// Remove protected range `id` (`deleteProtectedRange`); its cells keep their values.
    DeleteProtectedRange { id: i32 },
}

/// The reply to one [`Request`], in request order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// How many cells the compare-and-swap changed (`occurrencesChanged`).
    CompareAndSwap {
        changed: u32,
    },
    AddSheet {
        sheet: SheetMeta,
    },
    /// The id Google gave the protected range an [`Request::AddProtectedRange`] added.
    AddProtectedRange {
        id: i32,
    },
    Empty,
}

/// A `spreadsheets.batchUpdate`: applied atomically, requests in order. `response_ranges`
/// are read back after the requests applied, in the same call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BatchUpdate {
    pub requests: Vec<Request>,
    pub response_ranges: Vec<String>,
    /// Ask for every sheet's properties in the reply (with no `response_ranges` Google
    /// returns them all, without grid data): the sheet list rides on a write sent anyway.
    pub sheet_list: bool,
    /// Never send (nor retry) after this instant: a claim commit must land while the lease
    /// it was decided under still holds. Past it, the call fails as `Retryable` unsent.
    #[serde(skip)]
    pub send_by: Option<std::time::Instant>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BatchUpdateReply {
    pub replies: Vec<Reply>,
    /// Values of `response_ranges`, in the order they were asked for.
    pub ranges: Vec<ValueRange>,
    /// Per response range, per row of it: the ids of the developer metadata on that row
    /// (`rowMetadata[].developerMetadata`), so a commit proves where a binding landed.
    /// Empty when the implementation cannot tell (dry run).
    pub row_metadata: Vec<Vec<Vec<i32>>>,
    /// Every sheet of the spreadsheet after the update, when [`BatchUpdate::sheet_list`]
    /// asked for them (and no response ranges narrowed the reply); else empty.
    pub sheets: Vec<SheetMeta>,
    /// The protected ranges of each sheet the reply lists (those of the response ranges, or
    /// all with [`BatchUpdate::sheet_list`]), by sheet id, as this account may see them.
    pub protections: Vec<(i32, Vec<ProtectedRange>)>,
}

/// Where a data-filtered read or write goes. Google resolves it when the request is
/// applied, so a row found through [`Filter::Metadata`] is wherever that row is *then*.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Filter {
    /// The row carrying the developer metadata with this id (a job's row binding): the
    /// whole row, column A to the sheet's last grid column.
    Metadata(i32),
    /// A range in A1 notation.
    A1(String),
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Filter::Metadata(id) => write!(f, "metadata #{id}"),
            Filter::A1(range) => f.write_str(range),
        }
    }
}

/// What one filter of a `values.batchGetByDataFilter` matched: every range, in the reply's
/// order; empty when it matched nothing (a bound row that was deleted).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FilterRead {
    pub ranges: Vec<ValueRange>,
}

impl FilterRead {
    /// The only row of the first matched range (a bound row), if any matched.
    pub fn row(&self) -> Option<(&str, &[Cell])> {
        let r = self.ranges.first()?;
        Some((
            r.range.as_str(),
            r.values.first().map(Vec::as_slice).unwrap_or(&[]),
        ))
    }
}

/// One entry of a `values.batchUpdateByDataFilter`: `None` cells are sent as JSON `null`,
/// which Google skips, so only the chosen cells of a bound row change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilterWrite {
    pub filter: Filter,
    pub values: Vec<Vec<Option<Cell>>>,
}

impl FilterWrite {
    /// A plain block of values at an A1 range (every cell written).
    pub fn a1(v: &ValueRange) -> Self {
        Self {
            filter: Filter::A1(v.range.clone()),
            values: v
                .values
                .iter()
                .map(|row| row.iter().cloned().map(Some).collect())
                .collect(),
        }
    }
}

/// What one [`FilterWrite`] did: the range Google resolved it to and the values there
/// after the write (`includeValuesInResponse`), the proof of which row was written.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FilterWritten {
    pub range: String,
    pub values: Vec<Vec<Cell>>,
}

/// What a `developerMetadata.search` looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataLookup {
    /// Every entry with this key, wherever it is.
    Key(String),
    /// Every entry on these sheets: the sheets' own and their rows' and columns'
    /// (`INTERSECTING_LOCATION` on each sheet, one data filter per sheet).
    OnSheets(Vec<i32>),
}

impl MetadataLookup {
    pub fn key(key: &str) -> Self {
        MetadataLookup::Key(key.to_string())
    }
}

/// One developer metadata entry as `developerMetadata.search` reports it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MetadataEntry {
    pub id: i32,
    pub key: String,
    pub value: String,
    /// The sheet of a row or sheet location; `None` for other locations.
    pub sheet_id: Option<i32>,
    /// Zero-based row of a row location; `None` for other locations.
    pub row: Option<u32>,
    /// Visibility `PROJECT`: written by the caller's own Cloud project, and by nobody else
    /// (`provenance`). `DOCUMENT` entries are anyone's with API access to the file.
    #[serde(default)]
    pub project_only: bool,
}

/// The reply of an append: where the rows landed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AppendReply {
    /// `updates.updatedRange`, e.g. `'_ジョブキュー'!A12:P12`.
    pub updated_range: String,
}

/// How a failed call should be treated; decided once, where the reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 429, 5xx, timeout, dropped connection: try again later.
    Retryable,
    /// 400: the request itself is wrong; retrying cannot help.
    InvalidArgument,
    /// 401/403: credentials or sharing are wrong.
    Permission,
    /// 404: spreadsheet (or sheet) does not exist.
    NotFound,
    /// Anything else that is not worth retrying.
    Fatal,
}

/// A failed call to the spreadsheet.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{method}: {message}")]
pub struct SheetsError {
    pub kind: ErrorKind,
    /// The API method, e.g. `values.batchGet`.
    pub method: &'static str,
    /// Google's message (or the transport's), with the fix where one is known.
    pub message: String,
    /// Surely not applied: refused before Google applies anything (a 429, a connection
    /// never made, a call not sent). False when the failure leaves that open (a 5xx, a
    /// timeout, a dropped reply: Google may still apply the request, docs/design.md §3).
    pub unapplied: bool,
}

impl SheetsError {
    pub fn new(kind: ErrorKind, method: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            method,
            message: message.into(),
            unapplied: false,
        }
    }

    /// The same error, known not to have been applied.
    pub fn unapplied(self) -> Self {
        Self {
            unapplied: true,
            ..self
        }
    }

    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }

    /// Whether the request may have been applied although it failed: it failed in a way
    /// that leaves that open (a lost reply, a 5xx, a timeout).
    pub fn may_have_applied(&self) -> bool {
        self.is_retryable() && !self.unapplied
    }
}

/// The spreadsheet, as the rest of sheetq sees it.
///
/// Reads always use `valueRenderOption=UNFORMATTED_VALUE` and
/// `dateTimeRenderOption=SERIAL_NUMBER`; writes always use `valueInputOption=RAW`, so text
/// from a command or a person never becomes a formula.
#[async_trait]
pub trait Sheets: Send + Sync {
    /// `spreadsheets.get` without grid data: time zone, sheets and their protected ranges.
    async fn metadata(&self) -> Result<SpreadsheetMeta, SheetsError>;

    /// `values.batchGet`: several ranges in one call, in the order given.
    async fn read(&self, ranges: &[String]) -> Result<Vec<ValueRange>, SheetsError>;

    /// `values.batchUpdate`: several ranges in one call, RAW.
    async fn write(&self, data: &[ValueRange]) -> Result<(), SheetsError>;

    /// `spreadsheets.batchUpdate`, atomic, with the values of `response_ranges` read back.
    async fn batch_update(&self, batch: &BatchUpdate) -> Result<BatchUpdateReply, SheetsError>;

    /// `values.append` with `insertDataOption=INSERT_ROWS` (never OVERWRITE, which can clobber
    /// a row another writer appended at the same moment), RAW.
    async fn append(&self, range: &str, rows: &[Vec<Cell>]) -> Result<AppendReply, SheetsError>;

    /// `values.batchGetByDataFilter` (a read): per filter, in the order given, the ranges it
    /// matched when the request was applied.
    async fn read_filtered(&self, filters: &[Filter]) -> Result<Vec<FilterRead>, SheetsError>;

    /// `values.batchUpdateByDataFilter`, RAW, with the written values in the reply: per
    /// entry, in the order given, where it landed, or `None` when its filter matched nothing
    /// (the bound row is gone). Never retried by the client: a failed or ambiguous write is
    /// resolved afresh by the caller from a new read, never sent again at the same places.
    async fn write_filtered(
        &self,
        data: &[FilterWrite],
    ) -> Result<Vec<Option<FilterWritten>>, SheetsError>;

    /// [`Self::write_filtered`], but no attempt starts after `send_by` (such a call fails
    /// unsent, and says so): for a write that is safe only while a lease holds.
    async fn write_filtered_by(
        &self,
        data: &[FilterWrite],
        send_by: Option<std::time::Instant>,
    ) -> Result<Vec<Option<FilterWritten>>, SheetsError> {
        if send_by.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(SheetsError::new(
                ErrorKind::Retryable,
                "values.batchUpdateByDataFilter",
                "not sent: its send-by deadline passed",
            )
            .unapplied());
        }
        self.write_filtered(data).await
    }

    /// `developerMetadata.search` (a read): every entry `lookup` selects that the caller's
    /// project sees (its own `PROJECT` entries and every `DOCUMENT` one), each once.
    async fn search_metadata(
        &self,
        lookup: &MetadataLookup,
    ) -> Result<Vec<MetadataEntry>, SheetsError>;

    /// Who the calls are made as (the service account's e-mail), to find the other daemons
    /// that share its quota; empty when unknown.
    fn account(&self) -> String {
        String::new()
    }

    /// How far the API's clock is ahead of ours (negative: behind), from the `Date` header of
    /// the last reply; `None` before any reply or where there is no server.
    fn clock_skew(&self) -> Option<chrono::TimeDelta> {
        None
    }

    /// Google's clock now, from the `Date` of the last reply advanced by this process's
    /// monotonic clock; `None` before any reply or where there is no server.
    fn google_now(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        None
    }

    /// The counters of this client's calls (for the metrics, and for the liveness probe, to
    /// which an attempt is progress); `None` where there is no API client.
    fn call_stats(&self) -> Option<std::sync::Arc<stats::SheetsStats>> {
        None
    }

    /// Narrows the client-side budgets to this process's share of the account's: `reads` and
    /// `writes` per minute. No effect where there is no budget.
    fn set_budget_share(&self, _reads: u32, _writes: u32) {}

    /// How much waits on this client's next calls (results to write back, a claim under the
    /// lease, several presses): they then wait for the account's budget ahead of calls on
    /// which less waits ([`turns`]). No effect where there is no budget.
    fn set_precedence(&self, _precedence: Precedence) {}

    /// How long calls have waited for the client-side budget so far, in all (of every client
    /// that shares it); zero where there is none.
    fn budget_waited(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

pub mod auth;
pub mod budget;
pub mod dry_run;
pub mod google;
pub mod ledger;
pub mod retry;
pub mod stats;
pub mod turns;

pub use turns::Precedence;
