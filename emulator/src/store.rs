//! The emulator's spreadsheet model: spreadsheets, sheets, rows and cells as the user entered
//! them, and the grid edits (write, clear, insert/delete/move rows and columns) that both the
//! API handlers and tests simulating a person share.
//!
//! Rows are objects ([`Row`]): their cells plus the ids of the developer metadata attached to
//! them, so that a row's metadata travels with it through every insert, delete and move
//! without any index bookkeeping (columns carry theirs in [`Sheet::column_meta`], moved by the
//! same edits). The metadata itself (key, value, visibility, creating project) lives in
//! [`Spreadsheet::developer_metadata`]; see `metadata.rs`.
//!
//! Protected ranges live on the sheet they protect ([`Sheet::protected`], `store/protected.rs`)
//! and follow the same edits, as Google moves a protected range with its cells.
//!
//! A row's cells are an `Arc<Vec<Cell>>` so that cloning a sheet (done once per
//! `batchUpdate`, to apply the whole batch on a copy and keep it only if every request
//! succeeds) costs one pointer per row; cells are deep-copied only when written
//! (`Arc::make_mut`).

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use crate::a1::{self, A1Range};

mod protected;
pub use protected::{Area, Editors, Protected, Span};

/// Google's default grid for a new sheet: 1000 rows × 26 columns.
pub const DEFAULT_ROWS: u32 = 1000;
pub const DEFAULT_COLS: u32 = 26;

/// What a person (or the API) entered into a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Number(f64),
    String(String),
    Bool(bool),
    /// The formula text including the leading `=`.
    Formula(String),
}

/// A number format (`userEnteredFormat.numberFormat`): `type` is `DATE`, `TIME`,
/// `DATE_TIME`, `NUMBER`, `PERCENT`, `TEXT`, ...; `pattern` may be empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberFormat {
    pub kind: String,
    pub pattern: String,
}

/// One cell. Formatting other than the number format is not modelled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The data-validation rule as the API sent it (JSON of `DataValidationRule`), kept
    /// verbatim so that it is returned unchanged; `BOOLEAN` makes the cell a checkbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Box<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_format: Option<Box<NumberFormat>>,
}

impl Cell {
    pub fn is_blank(&self) -> bool {
        self.value.is_none() && self.validation.is_none() && self.number_format.is_none()
    }

    /// A checkbox is a cell whose data validation is `BOOLEAN`.
    pub fn is_checkbox(&self) -> bool {
        self.validation
            .as_ref()
            .and_then(|v| v.pointer("/condition/type"))
            .and_then(|t| t.as_str())
            == Some("BOOLEAN")
    }
}

/// One row object: its cells (possibly fewer than the grid's columns) and the ids of the
/// developer metadata located on it. Derefs to its cells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    cells: Arc<Vec<Cell>>,
    /// Ids of developer metadata whose location is this row.
    pub meta: Vec<i32>,
}

impl Deref for Row {
    type Target = Vec<Cell>;
    fn deref(&self) -> &Vec<Cell> {
        &self.cells
    }
}

impl Row {
    pub fn from_cells(cells: Vec<Cell>) -> Self {
        Row {
            cells: Arc::new(cells),
            meta: Vec::new(),
        }
    }

    /// The cells for writing (copied first if another sheet clone shares them).
    pub fn cells_mut(&mut self) -> &mut Vec<Cell> {
        Arc::make_mut(&mut self.cells)
    }

    /// Whether two rows share the same cell storage (a clone not yet written).
    pub fn shares_cells(&self, other: &Row) -> bool {
        Arc::ptr_eq(&self.cells, &other.cells)
    }

    /// No cell content and no metadata: the row may be dropped from the end of a sheet.
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty() && self.cells.iter().all(Cell::is_blank)
    }
}

/// The state file keeps a row without metadata as the plain array of its cells (the format
/// older state files have), and a row with metadata as `{"cells": [...], "developerMetadata":
/// [ids]}`.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RowRepr {
    Plain(Vec<Cell>),
    Tagged {
        cells: Vec<Cell>,
        #[serde(rename = "developerMetadata")]
        meta: Vec<i32>,
    },
}

impl Serialize for Row {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if self.meta.is_empty() {
            return self.cells.serialize(s);
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("cells", &*self.cells)?;
        m.serialize_entry("developerMetadata", &self.meta)?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match RowRepr::deserialize(d)? {
            RowRepr::Plain(cells) => Row::from_cells(cells),
            RowRepr::Tagged { cells, meta } => Row {
                cells: Arc::new(cells),
                meta,
            },
        })
    }
}

/// One sheet (tab). Its index is its position in [`Spreadsheet::sheets`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sheet {
    pub id: i32,
    pub title: String,
    #[serde(default)]
    pub hidden: bool,
    pub row_count: u32,
    pub column_count: u32,
    #[serde(default)]
    pub frozen_row_count: u32,
    #[serde(default)]
    pub frozen_column_count: u32,
    /// Zero-based indexes of columns hidden by the user.
    #[serde(default)]
    pub hidden_columns: Vec<u32>,
    /// Rows from the top; rows past the end are empty. A row may be shorter than the grid.
    #[serde(default)]
    pub rows: Vec<Row>,
    /// Per column from the left, the ids of developer metadata located on that column
    /// (columns past the end carry none). Moved by every column edit, like `rows`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub column_meta: Vec<Vec<i32>>,
    /// The protected ranges on this sheet, in the order they were added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<Protected>,
}

/// A concrete block of one sheet: zero-based, half-open, clamped to the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub sheet: usize,
    pub r0: u32,
    pub r1: u32,
    pub c0: u32,
    pub c1: u32,
}

impl Bounds {
    pub fn rows(&self) -> u32 {
        self.r1.saturating_sub(self.r0)
    }
    pub fn cols(&self) -> u32 {
        self.c1.saturating_sub(self.c0)
    }
}

impl Sheet {
    pub fn new(id: i32, title: impl Into<String>) -> Self {
        Sheet {
            id,
            title: title.into(),
            hidden: false,
            row_count: DEFAULT_ROWS,
            column_count: DEFAULT_COLS,
            frozen_row_count: 0,
            frozen_column_count: 0,
            hidden_columns: Vec::new(),
            rows: Vec::new(),
            column_meta: Vec::new(),
            protected: Vec::new(),
        }
    }

    pub fn cell(&self, row: u32, col: u32) -> Option<&Cell> {
        self.rows.get(row as usize)?.get(col as usize)
    }

    pub fn value(&self, row: u32, col: u32) -> Option<&Value> {
        self.cell(row, col)?.value.as_ref()
    }

    /// The cell for writing; grows the stored rows (not the grid) as needed.
    pub fn cell_mut(&mut self, row: u32, col: u32) -> &mut Cell {
        let c = col as usize;
        let cells = self.row_mut(row).cells_mut();
        if cells.len() <= c {
            cells.resize_with(c + 1, Cell::default);
        }
        &mut cells[c]
    }

    /// The row object for writing; grows the stored rows (not the grid) as needed.
    pub fn row_mut(&mut self, row: u32) -> &mut Row {
        let r = row as usize;
        if self.rows.len() <= r {
            self.rows.resize_with(r + 1, Row::default);
        }
        &mut self.rows[r]
    }

    /// The metadata ids of a column, for writing; grows the stored columns as needed.
    pub fn column_meta_mut(&mut self, col: u32) -> &mut Vec<i32> {
        let c = col as usize;
        if self.column_meta.len() <= c {
            self.column_meta.resize_with(c + 1, Vec::new);
        }
        &mut self.column_meta[c]
    }

    /// Sets a cell's value, keeping its validation and format. `None` clears the value.
    pub fn set_value(&mut self, row: u32, col: u32, value: Option<Value>) {
        if value.is_none() && self.cell(row, col).is_none() {
            return;
        }
        self.grow_to(row + 1, col + 1);
        self.cell_mut(row, col).value = value;
    }

    /// The number of rows down to the last one holding a value ("the last row with data": a
    /// cell with only a format or a rule, or a row with only metadata, is not data).
    pub fn data_end(&self) -> u32 {
        self.rows
            .iter()
            .rposition(|row| row.iter().any(|c| c.value.is_some()))
            .map_or(0, |i| i as u32 + 1)
    }

    /// Grows the grid so that it has at least `rows` × `cols`.
    pub fn grow_to(&mut self, rows: u32, cols: u32) {
        self.row_count = self.row_count.max(rows);
        self.column_count = self.column_count.max(cols);
    }

    /// Clears values (not validation or formats) in a block, as `values.clear` does.
    pub fn clear_values(&mut self, b: &Bounds) {
        let end = (b.r1 as usize).min(self.rows.len());
        for r in (b.r0 as usize)..end {
            let has_any = self.rows[r]
                .iter()
                .enumerate()
                .any(|(c, cell)| (b.c0..b.c1).contains(&(c as u32)) && cell.value.is_some());
            if !has_any {
                continue;
            }
            let cells = self.rows[r].cells_mut();
            for c in b.c0..b.c1.min(cells.len() as u32) {
                cells[c as usize].value = None;
            }
        }
        self.trim();
    }

    /// The extent of data: (rows, cols) up to the last non-blank cell in a block, relative
    /// to the block's start. Used for "trailing empty rows/columns are omitted".
    pub fn value_extent(&self, b: &Bounds) -> (u32, u32) {
        let mut rows = 0;
        let mut cols = 0;
        let end = (b.r1 as usize).min(self.rows.len());
        for r in (b.r0 as usize)..end {
            let row = &self.rows[r];
            let stop = (b.c1 as usize).min(row.len());
            let mut last = None;
            for c in (b.c0 as usize)..stop {
                if row[c].value.is_some() {
                    last = Some(c);
                }
            }
            if let Some(last) = last {
                rows = r as u32 - b.r0 + 1;
                cols = cols.max(last as u32 - b.c0 + 1);
            }
        }
        (rows, cols)
    }

    /// Inserts `n` empty rows before `at`; the grid grows by `n`. Rows at and below `at` move
    /// down as objects, with their metadata.
    pub fn insert_rows(&mut self, at: u32, n: u32) {
        self.insert_rows_like(at, n, None);
    }

    /// [`Sheet::insert_rows`], the new rows taking the number formats of the row `like`
    /// (0-based, before the insertion): Google extends a row's properties to the rows
    /// inserted next to it (`insertDimension`'s `inheritFromBefore`: from the row before,
    /// else the row after; `values.append` with `INSERT_ROWS`: from the table's last row),
    /// so a date column stays a date column. Data validation is not copied here.
    pub fn insert_rows_like(&mut self, at: u32, n: u32, like: Option<u32>) {
        for p in &mut self.protected {
            p.insert(true, at, n);
        }
        let formats: Vec<Option<Box<NumberFormat>>> = like
            .and_then(|r| self.rows.get(r as usize))
            .map(|row| row.iter().map(|c| c.number_format.clone()).collect())
            .unwrap_or_default();
        let at = at as usize;
        if at < self.rows.len() || formats.iter().any(Option::is_some) {
            if at > self.rows.len() {
                self.rows.resize_with(at, Row::default);
            }
            let fresh = (0..n).map(|_| {
                Row::from_cells(
                    formats
                        .iter()
                        .map(|f| Cell {
                            number_format: f.clone(),
                            ..Cell::default()
                        })
                        .collect(),
                )
            });
            self.rows.splice(at..at, fresh);
        }
        self.row_count += n;
    }

    /// Deletes rows `[start, end)` with their metadata ids; the grid shrinks accordingly.
    /// The caller drops metadata left without a location (`metadata::prune`).
    pub fn delete_rows(&mut self, start: u32, end: u32) {
        self.protected.retain_mut(|p| p.delete(true, start, end));
        let (s, e) = (start as usize, (end as usize).min(self.rows.len()));
        if s < e {
            self.rows.drain(s..e);
        }
        self.row_count = self.row_count.saturating_sub(end - start).max(1);
    }

    /// Moves rows `[start, end)` so that they sit before row `dest` as counted before the
    /// move (`moveDimension`); row objects move whole, with their metadata.
    pub fn move_rows(&mut self, start: u32, end: u32, dest: u32) {
        if dest >= start && dest <= end {
            return;
        }
        for p in &mut self.protected {
            p.relocate(true, start, end, dest);
        }
        let need = end.max(dest) as usize;
        if self.rows.len() < need {
            self.rows.resize_with(need, Row::default);
        }
        let moved: Vec<Row> = self.rows.drain(start as usize..end as usize).collect();
        let at = if dest < start {
            dest
        } else {
            dest - (end - start)
        } as usize;
        self.rows.splice(at..at, moved);
        self.trim();
    }

    pub fn insert_columns(&mut self, at: u32, n: u32) {
        for p in &mut self.protected {
            p.insert(false, at, n);
        }
        for row in &mut self.rows {
            if (at as usize) < row.len() {
                let cells = row.cells_mut();
                let fresh = (0..n).map(|_| Cell::default());
                cells.splice(at as usize..at as usize, fresh);
            }
        }
        if (at as usize) < self.column_meta.len() {
            let fresh = (0..n).map(|_| Vec::new());
            self.column_meta.splice(at as usize..at as usize, fresh);
        }
        for h in &mut self.hidden_columns {
            if *h >= at {
                *h += n;
            }
        }
        self.column_count += n;
    }

    pub fn delete_columns(&mut self, start: u32, end: u32) {
        self.protected.retain_mut(|p| p.delete(false, start, end));
        for row in &mut self.rows {
            let e = (end as usize).min(row.len());
            if (start as usize) < e {
                row.cells_mut().drain(start as usize..e);
            }
        }
        let e = (end as usize).min(self.column_meta.len());
        if (start as usize) < e {
            self.column_meta.drain(start as usize..e);
        }
        let n = end - start;
        self.hidden_columns.retain(|h| !(start..end).contains(h));
        for h in &mut self.hidden_columns {
            if *h >= end {
                *h -= n;
            }
        }
        self.column_count = self.column_count.saturating_sub(n).max(1);
    }

    /// Moves columns `[start, end)` before column `dest` (counted before the move): cells,
    /// column metadata and the hidden flag move together.
    pub fn move_columns(&mut self, start: u32, end: u32, dest: u32) {
        if dest >= start && dest <= end {
            return;
        }
        for p in &mut self.protected {
            p.relocate(false, start, end, dest);
        }
        let (s, e, d) = (start as usize, end as usize, dest as usize);
        let at = if d < s { d } else { d - (e - s) };
        let need = e.max(d);
        for row in &mut self.rows {
            if row.len() <= s && row.len() <= d {
                continue;
            }
            let cells = row.cells_mut();
            if cells.len() < need {
                cells.resize_with(need, Cell::default);
            }
            let moved: Vec<Cell> = cells.drain(s..e).collect();
            cells.splice(at..at, moved);
        }
        if self.column_meta.len() > s || self.column_meta.len() > d {
            if self.column_meta.len() < need {
                self.column_meta.resize_with(need, Vec::new);
            }
            let moved: Vec<Vec<i32>> = self.column_meta.drain(s..e).collect();
            self.column_meta.splice(at..at, moved);
        }
        // Where each column index ends up, for the hidden flags.
        let new_index = |c: u32| -> u32 {
            let c = c as usize;
            let out = if (s..e).contains(&c) {
                at + (c - s)
            } else {
                let without = if c >= e { c - (e - s) } else { c };
                if without >= at {
                    without + (e - s)
                } else {
                    without
                }
            };
            out as u32
        };
        for h in &mut self.hidden_columns {
            *h = new_index(*h);
        }
        self.hidden_columns.sort_unstable();
        while self.column_meta.last().is_some_and(Vec::is_empty) {
            self.column_meta.pop();
        }
    }

    /// Drops trailing empty rows so that extents stay cheap to compute.
    pub fn trim(&mut self) {
        while self.rows.last().is_some_and(Row::is_empty) {
            self.rows.pop();
        }
    }
}

/// The owner of a spreadsheet the emulator seeds: a person. sheetq's service account is an
/// editor of the file, never its owner, as in a deployment where a person shares their
/// spreadsheet with the service account.
pub const DEFAULT_OWNER: &str = "owner@example.com";

fn default_owner() -> String {
    DEFAULT_OWNER.to_string()
}

/// A role a file is shared with an account as (Drive's `permissions.role`, less `owner`,
/// which is [`Spreadsheet::owner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Not shared: every call is refused with 403.
    None,
    /// Viewer: reads pass, writes are refused with 403.
    Reader,
    /// Commenter: to the Sheets API a viewer (comments are Drive's, not the Sheets API's).
    Commenter,
    /// Editor: writes pass, as far as protected ranges let them.
    Writer,
}

/// How one file is shared: each listed account's role, and everyone else's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sharing {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, Access>,
    /// The role of an account not listed: `Writer` for a spreadsheet the emulator seeds (a
    /// file its owner shared "anyone with the link can edit", the test's default), `None`
    /// for one made through `spreadsheets.create` (Drive shares a new file with no one).
    pub others: Access,
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing {
            roles: BTreeMap::new(),
            others: Access::Writer,
        }
    }
}

/// One spreadsheet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spreadsheet {
    pub id: String,
    pub title: String,
    pub time_zone: String,
    pub locale: String,
    /// Who owns the file: a person for a seeded spreadsheet, the creating account for one
    /// made through `spreadsheets.create`. The owner is always able to edit protected ranges
    /// (https://developers.google.com/apps-script/reference/spreadsheet/protection#canedit).
    #[serde(default = "default_owner")]
    pub owner: String,
    pub sheets: Vec<Sheet>,
    /// Every developer metadata of the spreadsheet, by id. Where a row or column metadata is
    /// right now is known from the row or column carrying its id (`metadata::locate`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub developer_metadata: BTreeMap<i32, Metadata>,
    /// Who else has the file, and as what.
    #[serde(default)]
    pub sharing: Sharing,
}

impl Spreadsheet {
    pub fn new(id: impl Into<String>, title: impl Into<String>) -> Self {
        Spreadsheet {
            id: id.into(),
            title: title.into(),
            time_zone: "Asia/Tokyo".into(),
            locale: "ja_JP".into(),
            owner: default_owner(),
            sheets: Vec::new(),
            developer_metadata: BTreeMap::new(),
            sharing: Sharing::default(),
        }
    }

    /// How the file is shared with `user` (a service account or a person, compared without
    /// regard to case): its owner is always an editor.
    pub fn access(&self, user: &str) -> Access {
        if self.owner.eq_ignore_ascii_case(user) {
            return Access::Writer;
        }
        self.sharing
            .roles
            .iter()
            .find(|(who, _)| who.eq_ignore_ascii_case(user))
            .map_or(self.sharing.others, |(_, a)| *a)
    }

    /// Whether `user` may edit the file at all: its owner or an editor. Listing someone
    /// among a protected range's editors does not share the file with them ("does not
    /// automatically give the user permission to edit the spreadsheet itself",
    /// https://developers.google.com/apps-script/reference/spreadsheet/protection#addeditoremailaddress).
    pub fn may_edit_file(&self, user: &str) -> bool {
        self.access(user) == Access::Writer
    }

    /// The whole grid of sheet index `i` as bounds.
    pub fn whole_sheet(&self, i: usize) -> Bounds {
        let s = &self.sheets[i];
        Bounds {
            sheet: i,
            r0: 0,
            r1: s.row_count,
            c0: 0,
            c1: s.column_count,
        }
    }

    pub fn sheet_index(&self, id: i32) -> Option<usize> {
        self.sheets.iter().position(|s| s.id == id)
    }

    pub fn sheet_by_title(&self, title: &str) -> Option<&Sheet> {
        self.sheets.iter().find(|s| s.title == title)
    }

    pub fn sheet_by_title_mut(&mut self, title: &str) -> Option<&mut Sheet> {
        self.sheets.iter_mut().find(|s| s.title == title)
    }

    /// The protected range `id`: its sheet's index and its index on that sheet.
    pub fn protected_range(&self, id: i32) -> Option<(usize, usize)> {
        self.sheets
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.protected.iter().position(|p| p.id == id).map(|j| (i, j)))
    }

    /// A protected range id not yet used in this spreadsheet (random and positive, as
    /// Google's).
    pub fn fresh_protected_id(&self) -> i32 {
        let mut rng = rand::thread_rng();
        loop {
            let id = rng.gen_range(1..i32::MAX);
            if self.protected_range(id).is_none() {
                return id;
            }
        }
    }

    /// A sheet id not yet used in this spreadsheet. Google picks random positive ids.
    pub fn fresh_sheet_id(&self) -> i32 {
        let mut rng = rand::thread_rng();
        loop {
            let id = rng.gen_range(1..i32::MAX);
            if self.sheet_index(id).is_none() {
                return id;
            }
        }
    }

    /// Resolves an A1 range for reading: open sides run to the grid's edge; a start beyond
    /// the grid is an error, as Google answers
    /// `Range ('Sheet1'!A1001) exceeds grid limits. Max rows: 1000, max columns: 26`.
    pub fn resolve_read(&self, range: &str) -> Result<Bounds, ApiError> {
        let (b, _) = self.resolve(range)?;
        let sheet = &self.sheets[b.sheet];
        if b.r0 >= sheet.row_count || b.c0 >= sheet.column_count {
            return Err(ApiError::invalid(format!(
                "Range ({}) exceeds grid limits. Max rows: {}, max columns: {}",
                range_a1(&sheet.title, &b),
                sheet.row_count,
                sheet.column_count
            )));
        }
        Ok(Bounds {
            r1: b.r1.min(sheet.row_count),
            c1: b.c1.min(sheet.column_count),
            ..b
        })
    }

    /// Resolves an A1 range without clamping the bounded sides; open sides run to the
    /// grid's edge. Also returns the parsed range so that writers know which sides were open.
    pub fn resolve(&self, range: &str) -> Result<(Bounds, A1Range), ApiError> {
        let parsed = A1Range::parse(range)
            .map_err(|_| ApiError::invalid(format!("Unable to parse range: {range}")))?;
        let sheet = match &parsed.sheet {
            // Google: a range without a sheet name refers to the first visible sheet.
            None => self
                .sheets
                .iter()
                .position(|s| !s.hidden)
                .or(if self.sheets.is_empty() {
                    None
                } else {
                    Some(0)
                }),
            Some(t) => self.sheets.iter().position(|s| &s.title == t),
        }
        .ok_or_else(|| ApiError::invalid(format!("Unable to parse range: {range}")))?;
        let s = &self.sheets[sheet];
        let b = Bounds {
            sheet,
            r0: parsed.start_row.unwrap_or(0),
            r1: parsed.end_row.unwrap_or(s.row_count),
            c0: parsed.start_col.unwrap_or(0),
            c1: parsed.end_col.unwrap_or(s.column_count),
        };
        Ok((b, parsed))
    }
}

/// Formats a block the way Google echoes ranges: `Sheet1!A1:C10`, `'_ジョブキュー'!A1:P20`,
/// a single cell as `'_ワーカー'!B1`.
pub fn range_a1(title: &str, b: &Bounds) -> String {
    let start = format!("{}{}", a1::column_letters(b.c0), b.r0 + 1);
    let cells = if b.rows() <= 1 && b.cols() <= 1 {
        start
    } else {
        format!(
            "{start}:{}{}",
            a1::column_letters(b.c1.max(b.c0 + 1) - 1),
            b.r1.max(b.r0 + 1)
        )
    };
    format!("{}!{cells}", reply_title(title))
}

/// Google leaves a title unquoted in echoed ranges only when it is a plain ASCII identifier
/// that cannot be read as a cell reference (`Sheet1`); otherwise it is quoted.
pub fn reply_title(title: &str) -> String {
    let plain = title
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && title.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && A1Range::parse(title).is_ok_and(|r| r.sheet.is_some());
    if plain {
        title.to_string()
    } else {
        a1::quote_title(title)
    }
}

/// All spreadsheets the emulator serves, by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Store {
    pub spreadsheets: BTreeMap<String, Spreadsheet>,
}

impl Store {
    pub fn get(&self, id: &str) -> Result<&Spreadsheet, ApiError> {
        self.spreadsheets.get(id).ok_or_else(ApiError::not_found)
    }

    pub fn get_mut(&mut self, id: &str) -> Result<&mut Spreadsheet, ApiError> {
        self.spreadsheets
            .get_mut(id)
            .ok_or_else(ApiError::not_found)
    }

    pub fn insert(&mut self, ss: Spreadsheet) {
        self.spreadsheets.insert(ss.id.clone(), ss);
    }
}

/// A spreadsheet id shaped like Google's (44 URL-safe characters).
pub fn fresh_spreadsheet_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut rng = rand::thread_rng();
    let mut id = String::from("1");
    for _ in 0..43 {
        id.push(ALPHABET[rng.gen_range(0..ALPHABET.len())] as char);
    }
    id
}

/// `DeveloperMetadataVisibility`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Visibility {
    Document,
    Project,
}

impl Visibility {
    /// Google: "Developer metadata must always have a visibility specified."
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s {
            Some("DOCUMENT") => Ok(Visibility::Document),
            Some("PROJECT") => Ok(Visibility::Project),
            None | Some("") | Some("DEVELOPER_METADATA_VISIBILITY_UNSPECIFIED") => {
                Err("Developer metadata must always have a visibility specified.".into())
            }
            Some(other) => Err(format!(
                "Invalid value at 'visibility' (type.googleapis.com/google.apps.sheets.v4.DeveloperMetadata.DeveloperMetadataVisibility), \"{other}\""
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Visibility::Document => "DOCUMENT",
            Visibility::Project => "PROJECT",
        }
    }
}

/// What a metadata is attached to. Rows and columns are found by the id they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Anchor {
    Spreadsheet,
    Sheet { sheet_id: i32 },
    Row,
    Column,
}

/// One developer metadata (its id is its key in `Spreadsheet::developer_metadata`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub visibility: Visibility,
    pub anchor: Anchor,
    /// The developer project that created the entry (`metadata::project_of` its creator),
    /// whatever its visibility: a `PROJECT` entry is seen by that project alone
    /// (`metadata::Seer::sees`). `None` for an entry saved before the emulator recorded it
    /// (state files load without the field): created by no one in particular.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sheet_with(rows: &[&[&str]]) -> Sheet {
        let mut s = Sheet::new(0, "S");
        for (r, row) in rows.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                if !v.is_empty() {
                    s.set_value(r as u32, c as u32, Some(Value::String(v.to_string())));
                }
            }
        }
        s
    }

    fn text(s: &Sheet, r: u32, c: u32) -> Option<String> {
        match s.value(r, c)? {
            Value::String(v) => Some(v.clone()),
            other => Some(format!("{other:?}")),
        }
    }

    #[test]
    fn reply_titles_are_quoted_unless_plain() {
        assert_eq!(reply_title("Sheet1"), "Sheet1");
        assert_eq!(reply_title("_ジョブキュー"), "'_ジョブキュー'");
        assert_eq!(reply_title("My Sheet"), "'My Sheet'");
        assert_eq!(reply_title("A1"), "'A1'");
        assert_eq!(reply_title("Bob's"), "'Bob''s'");
    }

    #[test]
    fn inserted_rows_take_their_neighbours_number_formats_and_no_value() {
        let mut s = sheet_with(&[&["header"], &["a"]]);
        let date = NumberFormat {
            kind: "DATE_TIME".into(),
            pattern: "yyyy/mm/dd hh:mm:ss".into(),
        };
        s.cell_mut(1, 0).number_format = Some(Box::new(date.clone()));
        // Under the header, taking the row after (the formatted one).
        s.insert_rows_like(1, 1, Some(1));
        assert_eq!(s.value(1, 0), None, "an inserted row is empty");
        assert_eq!(
            s.cell(1, 0).and_then(|c| c.number_format.as_deref()),
            Some(&date),
            "the inserted row takes the format of the row it was inserted before"
        );
        // Below the last row, taking that row's format.
        s.insert_rows_like(3, 1, Some(2));
        assert_eq!(
            s.cell(3, 0).and_then(|c| c.number_format.as_deref()),
            Some(&date)
        );
        // Under the header alone: no format to take.
        s.insert_rows_like(1, 1, Some(0));
        assert_eq!(s.cell(1, 0).and_then(|c| c.number_format.as_deref()), None);
    }

    #[test]
    fn insert_and_delete_rows_shift_data_and_grid() {
        let mut s = sheet_with(&[&["a"], &["b"], &["c"]]);
        s.insert_rows(1, 2);
        assert_eq!(s.row_count, DEFAULT_ROWS + 2);
        assert_eq!(text(&s, 0, 0).as_deref(), Some("a"));
        assert_eq!(text(&s, 1, 0), None);
        assert_eq!(text(&s, 3, 0).as_deref(), Some("b"));
        s.delete_rows(0, 3);
        assert_eq!(text(&s, 0, 0).as_deref(), Some("b"));
        assert_eq!(text(&s, 1, 0).as_deref(), Some("c"));
        assert_eq!(s.row_count, DEFAULT_ROWS - 1);
    }

    #[test]
    fn columns_shift_and_extent_ignores_trailing_blanks() {
        let mut s = sheet_with(&[&["a", "b", "c"], &["", "", ""]]);
        s.delete_columns(0, 1);
        assert_eq!(text(&s, 0, 0).as_deref(), Some("b"));
        s.insert_columns(0, 1);
        assert_eq!(text(&s, 0, 1).as_deref(), Some("b"));
        let b = Bounds {
            sheet: 0,
            r0: 0,
            r1: 100,
            c0: 0,
            c1: 26,
        };
        assert_eq!(s.value_extent(&b), (1, 3));
    }

    #[test]
    fn cloned_sheet_shares_rows_until_written() {
        let s = sheet_with(&[&["a"], &["b"]]);
        let mut copy = s.clone();
        copy.set_value(0, 0, Some(Value::String("x".into())));
        assert_eq!(
            text(&s, 0, 0).as_deref(),
            Some("a"),
            "original must not change"
        );
        assert!(
            s.rows[1].shares_cells(&copy.rows[1]),
            "untouched rows are shared"
        );
    }

    fn tags(s: &Sheet) -> Vec<(u32, Vec<i32>)> {
        s.rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.meta.is_empty())
            .map(|(i, r)| (i as u32, r.meta.clone()))
            .collect()
    }

    #[test]
    fn row_metadata_travels_with_its_row_through_inserts_deletes_and_moves() {
        let mut s = sheet_with(&[&["h"], &["a"], &["b"], &["c"]]);
        s.row_mut(2).meta.push(7); // on "b"
        s.insert_rows(1, 2);
        assert_eq!(
            tags(&s),
            vec![(4, vec![7])],
            "inserting above moves it down"
        );
        s.delete_rows(0, 1);
        assert_eq!(tags(&s), vec![(3, vec![7])], "deleting above moves it up");
        assert_eq!(text(&s, 3, 0).as_deref(), Some("b"), "still on b's row");
        // Move b (row 3) before row 0: rows [3, 4) to destination 0.
        s.move_rows(3, 4, 0);
        assert_eq!(text(&s, 0, 0).as_deref(), Some("b"));
        assert_eq!(tags(&s), vec![(0, vec![7])], "moveDimension carries it");
        // Move it down past "c": source [0, 1), destination 5 (before the move).
        s.move_rows(0, 1, 5);
        assert_eq!(text(&s, 4, 0).as_deref(), Some("b"), "{:?}", s.rows);
        assert_eq!(tags(&s), vec![(4, vec![7])]);
        s.delete_rows(4, 5);
        assert_eq!(
            tags(&s),
            vec![],
            "deleting the row deletes its metadata ids"
        );
    }

    #[test]
    fn a_row_with_only_metadata_is_kept_and_round_trips_through_json() {
        let mut s = sheet_with(&[&["a"]]);
        s.row_mut(5).meta.push(3);
        s.trim();
        assert_eq!(
            s.rows.len(),
            6,
            "an empty row carrying metadata is not trimmed"
        );
        let json = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(
            json["rows"][0],
            serde_json::json!([{ "value": { "String": "a" } }])
        );
        assert_eq!(
            json["rows"][5],
            serde_json::json!({ "cells": [], "developerMetadata": [3] })
        );
        let back: Sheet = serde_json::from_value(json).unwrap_or_else(|e| panic!("parse: {e}"));
        assert_eq!(back, s);
    }

    #[test]
    fn moving_columns_carries_cells_metadata_and_hidden_flags() {
        let mut s = sheet_with(&[&["a", "b", "c", "d"]]);
        s.column_meta_mut(1).push(9);
        s.hidden_columns = vec![1];
        s.move_columns(1, 2, 4); // b to the end
        let row: Vec<String> = (0..4).filter_map(|c| text(&s, 0, c)).collect();
        assert_eq!(row, vec!["a", "c", "d", "b"]);
        assert_eq!(s.column_meta.get(3), Some(&vec![9]), "{:?}", s.column_meta);
        assert_eq!(s.hidden_columns, vec![3]);
        s.delete_columns(3, 4);
        assert!(
            s.column_meta.iter().all(Vec::is_empty),
            "deleted with its column"
        );
    }
}
