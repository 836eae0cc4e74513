//! The Sheets API v4 methods other than `spreadsheets.batchUpdate`, as pure functions over
//! the store: `spreadsheets.create`, `spreadsheets.get` and the `spreadsheets.values.*`
//! family. They take parsed parameters and the account making the call, and return the reply
//! JSON (camelCase, as the discovery document defines it); HTTP, auth and accounting live in
//! `http.rs`. Every write passes the protection guard (`protection.rs`) with the block it
//! targets before anything is written: a refused call changes nothing.
//!
//! Reference: https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.values

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value as Json};

use super::error::ApiError;
pub use super::grid::{cell_json, extended_value, grid_data, sheet_properties, spreadsheet_json};
use super::protection::{self, Touch};
use super::store::{range_a1, Access, Bounds, Sheet, Spreadsheet, Store};
use super::values::{self, Input, Out, Render};

/// `majorDimension` of a `ValueRange`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Major {
    Rows,
    Columns,
}

impl Major {
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s {
            None | Some("") | Some("ROWS") | Some("DIMENSION_UNSPECIFIED") => Ok(Major::Rows),
            Some("COLUMNS") => Ok(Major::Columns),
            Some(other) => Err(ApiError::invalid(format!(
                "Invalid value at 'major_dimension' (type.googleapis.com/google.apps.sheets.v4.Dimension), \"{other}\""
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Major::Rows => "ROWS",
            Major::Columns => "COLUMNS",
        }
    }
}

/// Reads a block as a `ValueRange`. The echoed `range` is the requested one clamped to the
/// grid (`'_ジョブキュー'!A1:P1000`); trailing empty rows and trailing empty cells of each
/// row are omitted and `values` is absent when nothing is left, as Google does
/// (https://developers.google.com/sheets/api/guides/values#reading).
pub fn read_range(
    ss: &Spreadsheet,
    range: &str,
    render: Render,
    major: Major,
) -> Result<Json, ApiError> {
    let view = RangeView::new(ss, range, render, major)?;
    serde_json::to_value(&view).map_err(|e| ApiError::new(500, e.to_string()))
}

/// A `ValueRange` reply that serialises straight from the store, so that a 100,000-row read
/// is written out without building a JSON tree first.
pub struct RangeView<'a> {
    ss: &'a Spreadsheet,
    b: Bounds,
    rows: u32,
    cols: u32,
    major: Major,
    render: Render,
    range: String,
}

impl<'a> RangeView<'a> {
    pub fn new(
        ss: &'a Spreadsheet,
        range: &str,
        render: Render,
        major: Major,
    ) -> Result<Self, ApiError> {
        let b = ss.resolve_read(range)?;
        Ok(Self::of_bounds(ss, b, render, major))
    }

    /// A view of a block already resolved (and clamped to the grid).
    pub fn of_bounds(ss: &'a Spreadsheet, b: Bounds, render: Render, major: Major) -> Self {
        let sheet = &ss.sheets[b.sheet];
        let (rows, cols) = sheet.value_extent(&b);
        RangeView {
            ss,
            b,
            rows,
            cols,
            major,
            render,
            range: range_a1(&sheet.title, &b),
        }
    }

    /// Number of lines (rows, or columns with `COLUMNS`) and the length of each.
    fn shape(&self) -> (u32, u32) {
        match self.major {
            Major::Rows => (self.rows, self.cols),
            Major::Columns => (self.cols, self.rows),
        }
    }

    fn at(&self, line: u32, i: u32) -> (u32, u32) {
        match self.major {
            Major::Rows => (self.b.r0 + line, self.b.c0 + i),
            Major::Columns => (self.b.r0 + i, self.b.c0 + line),
        }
    }
}

impl Serialize for RangeView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (lines, _) = self.shape();
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("range", &self.range)?;
        m.serialize_entry("majorDimension", self.major.name())?;
        if lines > 0 {
            m.serialize_entry("values", &Lines(self))?;
        }
        m.end()
    }
}

struct Lines<'v, 'a>(&'v RangeView<'a>);

impl Serialize for Lines<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (lines, _) = self.0.shape();
        let mut seq = s.serialize_seq(Some(lines as usize))?;
        for line in 0..lines {
            seq.serialize_element(&Line(self.0, line))?;
        }
        seq.end()
    }
}

struct Line<'v, 'a>(&'v RangeView<'a>, u32);

impl Serialize for Line<'_, '_> {
    /// One row (or column): empty inner cells as `""`, trailing empty cells cut.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        let (_, len) = v.shape();
        let cells: Vec<Option<Out<'_>>> = (0..len)
            .map(|i| {
                let (r, c) = v.at(self.1, i);
                values::render_out(v.ss, v.b.sheet, r, c, v.render)
            })
            .collect();
        let last = cells.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        let mut seq = s.serialize_seq(Some(last))?;
        for cell in &cells[..last] {
            match cell {
                Some(out) => seq.serialize_element(out)?,
                None => seq.serialize_element("")?,
            }
        }
        seq.end()
    }
}

/// `values.batchGet`.
pub fn batch_get(
    ss: &Spreadsheet,
    ranges: &[String],
    render: Render,
    major: Major,
) -> Result<Json, ApiError> {
    let view = BatchGetView::new(ss, ranges, render, major)?;
    serde_json::to_value(&view).map_err(|e| ApiError::new(500, e.to_string()))
}

/// A `BatchGetValuesResponse` that serialises straight from the store.
#[derive(Serialize)]
pub struct BatchGetView<'a> {
    #[serde(rename = "spreadsheetId")]
    spreadsheet_id: &'a str,
    #[serde(rename = "valueRanges")]
    value_ranges: Vec<RangeView<'a>>,
}

impl<'a> BatchGetView<'a> {
    pub fn new(
        ss: &'a Spreadsheet,
        ranges: &[String],
        render: Render,
        major: Major,
    ) -> Result<Self, ApiError> {
        let value_ranges = ranges
            .iter()
            .map(|r| RangeView::new(ss, r, render, major))
            .collect::<Result<_, _>>()?;
        Ok(BatchGetView {
            spreadsheet_id: &ss.id,
            value_ranges,
        })
    }
}

/// What a values write did, for `UpdateValuesResponse`.
#[derive(Debug, Clone, Default)]
pub struct Written {
    pub range: String,
    pub rows: u32,
    pub cols: u32,
    pub cells: u32,
    pub bounds: Option<Bounds>,
}

impl Written {
    fn reply(&self, ss: &Spreadsheet, data: Option<(Render, Major)>) -> Result<Json, ApiError> {
        let mut m = Map::new();
        m.insert("spreadsheetId".into(), json!(ss.id));
        m.insert("updatedRange".into(), json!(self.range));
        if self.rows > 0 {
            m.insert("updatedRows".into(), json!(self.rows));
            m.insert("updatedColumns".into(), json!(self.cols));
            m.insert("updatedCells".into(), json!(self.cells));
        }
        if let Some((render, major)) = data {
            m.insert(
                "updatedData".into(),
                read_range(ss, &self.range, render, major)?,
            );
        }
        Ok(Json::Object(m))
    }
}

/// The rows of a request `ValueRange` as row-major cells, whatever its `majorDimension`.
pub(super) fn rows_of(body: &Json) -> Result<Vec<Vec<Json>>, ApiError> {
    let major = Major::parse(body.get("majorDimension").and_then(Json::as_str))?;
    let lines: Vec<Vec<Json>> = match body.get("values") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(lines)) => lines
            .iter()
            .map(|l| match l {
                Json::Array(cells) => Ok(cells.clone()),
                Json::Null => Ok(Vec::new()),
                _ => Err(ApiError::invalid(
                    "Invalid value at 'data.values' (type.googleapis.com/google.protobuf.ListValue)",
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::invalid(
                "Invalid value at 'data.values' (type.googleapis.com/google.protobuf.ListValue)",
            ))
        }
    };
    Ok(match major {
        Major::Rows => lines,
        Major::Columns => {
            let height = lines.iter().map(Vec::len).max().unwrap_or(0);
            (0..height)
                .map(|r| {
                    lines
                        .iter()
                        .map(|col| col.get(r).cloned().unwrap_or(Json::Null))
                        .collect()
                })
                .collect()
        }
    })
}

/// Writes `rows` with their top-left at (`r0`, `c0`) of sheet `sheet`. Writes grow the grid
/// when needed: the emulator assumes Google's values API expands a sheet rather than failing.
pub(super) fn write_rows(
    ss: &mut Spreadsheet,
    sheet: usize,
    r0: u32,
    c0: u32,
    rows: &[Vec<Json>],
    input: Input,
) -> Result<Written, ApiError> {
    // Validate every value before touching the sheet, so a bad value changes nothing.
    let mut parsed = Vec::with_capacity(rows.len());
    for row in rows {
        let mut line = Vec::with_capacity(row.len());
        for v in row {
            line.push(values::input_value(v, input)?);
        }
        parsed.push(line);
    }
    let s = &mut ss.sheets[sheet];
    let mut cells = 0;
    let mut cols = 0;
    // Google: `updatedRows`/`updatedColumns` count "rows/columns where at least one cell
    // was updated"; a JSON null updates nothing.
    let mut rows_written = 0;
    let mut cols_written = std::collections::BTreeSet::new();
    for (i, line) in parsed.into_iter().enumerate() {
        cols = cols.max(line.len() as u32);
        if line.iter().any(Option::is_some) {
            rows_written += 1;
        }
        for (j, v) in line.into_iter().enumerate() {
            let Some((value, format)) = v else { continue };
            cols_written.insert(j);
            let (r, c) = (r0 + i as u32, c0 + j as u32);
            s.grow_to(r + 1, c + 1);
            let cell = s.cell_mut(r, c);
            cell.value = value;
            // A typed date brings its number format; other input leaves the format alone.
            if let Some(f) = format {
                cell.number_format = Some(Box::new(f));
            }
            cells += 1;
        }
    }
    s.trim();
    let n_rows = rows.len() as u32;
    let b = Bounds {
        sheet,
        r0,
        r1: r0 + n_rows.max(1),
        c0,
        c1: c0 + cols.max(1),
    };
    Ok(Written {
        range: range_a1(&s.title, &b),
        rows: rows_written,
        cols: cols_written.len() as u32,
        cells,
        bounds: Some(b),
    })
}

/// The block `rows` written from (`b.r0`, `b.c0`) cover: as many rows as sent, as wide as
/// the widest, all counted (a `null` that leaves a cell alone still aims at it).
fn target(b: &Bounds, rows: &[Vec<Json>]) -> Bounds {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0) as u32;
    Bounds {
        sheet: b.sheet,
        r0: b.r0,
        r1: b.r0 + rows.len() as u32,
        c0: b.c0,
        c1: b.c0 + width,
    }
}

/// Checks that data fits the bounded sides of the target range, with Google's message.
/// (https://developers.google.com/sheets/api/guides/values#writing: a single-cell range
/// is the top-left corner of the write.)
fn check_fits(ss: &Spreadsheet, range: &str, rows: &[Vec<Json>]) -> Result<Bounds, ApiError> {
    let (b, parsed) = ss.resolve(range)?;
    let title = &ss.sheets[b.sheet].title;
    let width = rows.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let shown = range_a1(title, &b);
    // A single cell is only an anchor: Google writes the block starting there.
    if b.rows() == 1 && b.cols() == 1 && parsed.end_row.is_some() && parsed.end_col.is_some() {
        return Ok(b);
    }
    if parsed.end_row.is_some() && b.r0 + rows.len() as u32 > b.r1 {
        return Err(ApiError::invalid(format!(
            "Requested writing within range [{shown}], but tried writing to row [{}]",
            b.r1 + 1
        )));
    }
    if parsed.end_col.is_some() && b.c0 + width > b.c1 {
        return Err(ApiError::invalid(format!(
            "Requested writing within range [{shown}], but tried writing to column [{}]",
            crate::a1::column_letters(b.c1)
        )));
    }
    Ok(b)
}

/// `values.update` by `user`.
pub fn update(
    ss: &mut Spreadsheet,
    range: &str,
    body: &Json,
    input: Input,
    echo: Option<(Render, Major)>,
    user: &str,
) -> Result<Json, ApiError> {
    let rows = rows_of(body)?;
    let b = check_fits(ss, range, &rows)?;
    protection::guard(ss, user, &[Touch::Cells(target(&b, &rows))])?;
    let w = write_rows(ss, b.sheet, b.r0, b.c0, &rows, input)?;
    w.reply(ss, echo)
}

/// `values.batchUpdate` by `user`: every range is checked before any is written.
pub fn batch_update(ss: &mut Spreadsheet, body: &Json, user: &str) -> Result<Json, ApiError> {
    let input = Input::parse(body.get("valueInputOption").and_then(Json::as_str))?;
    let echo = if body.get("includeValuesInResponse").and_then(Json::as_bool) == Some(true) {
        Some((
            Render::parse(
                body.get("responseValueRenderOption").and_then(Json::as_str),
                body.get("responseDateTimeRenderOption")
                    .and_then(Json::as_str),
            )?,
            Major::Rows,
        ))
    } else {
        None
    };
    let data = match body.get("data") {
        Some(Json::Array(d)) => d.clone(),
        _ => Vec::new(),
    };
    let mut plan = Vec::with_capacity(data.len());
    for vr in &data {
        let range = vr
            .get("range")
            .and_then(Json::as_str)
            .ok_or_else(|| ApiError::invalid("Invalid data[0]: range is required"))?;
        let rows = rows_of(vr)?;
        let b = check_fits(ss, range, &rows)?;
        for row in &rows {
            for v in row {
                values::input_value(v, input)?;
            }
        }
        plan.push((b, rows));
    }
    let touched: Vec<Touch> = plan
        .iter()
        .map(|(b, rows)| Touch::Cells(target(b, rows)))
        .collect();
    protection::guard(ss, user, &touched)?;
    let mut responses = Vec::new();
    let (mut t_rows, mut t_cols, mut t_cells) = (0, 0, 0);
    let mut sheets = std::collections::BTreeSet::new();
    for (b, rows) in &plan {
        let w = write_rows(ss, b.sheet, b.r0, b.c0, rows, input)?;
        t_rows += w.rows;
        t_cols += w.cols;
        t_cells += w.cells;
        if w.cells > 0 {
            sheets.insert(b.sheet);
        }
        responses.push(w);
    }
    let responses = responses
        .iter()
        .map(|w| w.reply(ss, echo))
        .collect::<Result<Vec<_>, _>>()?;
    let mut m = Map::new();
    m.insert("spreadsheetId".into(), json!(ss.id));
    if t_cells > 0 {
        m.insert("totalUpdatedRows".into(), json!(t_rows));
        m.insert("totalUpdatedColumns".into(), json!(t_cols));
        m.insert("totalUpdatedCells".into(), json!(t_cells));
        m.insert("totalUpdatedSheets".into(), json!(sheets.len()));
    }
    if !responses.is_empty() {
        m.insert("responses".into(), Json::Array(responses));
    }
    Ok(Json::Object(m))
}

/// `values.append`. Finds the "table" the input range starts in, as Google describes
/// (https://developers.google.com/sheets/api/guides/values#append_values, and the reference:
/// "The input range is used to search for existing data and find a table within that
/// range. Values will be appended to the next row of the table, starting with the first
/// column of the table"): the first row inside the range with data in the range's columns
/// starts it, and it runs down through consecutive rows with data in those columns, past
/// the range's last row if the data goes on (so `range=A1` on a two-row table appends at
/// row 3, as users measured). Its columns span the data found. New rows go right after the
/// table, starting at its first column. `INSERT_ROWS` inserts fresh rows there (rows below,
/// with their developer metadata, move down; rows of the table are not touched);
/// `OVERWRITE` (the default) writes over whatever is there. Without a table, data goes to
/// the range's top-left cell. "Data" means a cell with a value: a format or a checkbox rule
/// alone is not data. The new rows are cells of the sheet like any other: a protected sheet
/// (open at its end) covers them, so an append below it by someone who may not edit it is
/// refused.
#[allow(clippy::too_many_arguments)]
pub fn append(
    ss: &mut Spreadsheet,
    range: &str,
    body: &Json,
    input: Input,
    insert: Option<&str>,
    echo: Option<(Render, Major)>,
    from_top: bool,
    user: &str,
) -> Result<Json, ApiError> {
    let insert_rows = match insert {
        None | Some("") | Some("OVERWRITE") => false,
        Some("INSERT_ROWS") => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "Invalid value at 'insert_data_option' (type.googleapis.com/google.apps.sheets.v4.InsertDataOption), \"{other}\""
            )))
        }
    };
    let rows = rows_of(body)?;
    for row in &rows {
        for v in row {
            values::input_value(v, input)?;
        }
    }
    let (b, _) = ss.resolve(range)?;
    let sheet = &ss.sheets[b.sheet];
    let title = sheet.title.clone();
    let searched = if from_top { Bounds { r0: 0, ..b } } else { b };
    let table = find_table(sheet, &searched);
    let (at_row, at_col) = match &table {
        Some(t) => (t.r1, t.c0),
        None => (b.r0, b.c0),
    };
    let n = rows.len() as u32;
    let at = Bounds {
        r0: at_row,
        c0: at_col,
        ..b
    };
    let mut touched = vec![Touch::Cells(target(&at, &rows))];
    if insert_rows && n > 0 && at_row < ss.sheets[b.sheet].row_count {
        touched.push(Touch::Insert {
            sheet: b.sheet,
            rows: true,
            at: at_row,
        });
    }
    protection::guard(ss, user, &touched)?;
    if insert_rows && n > 0 {
        let s = &mut ss.sheets[b.sheet];
        if at_row < s.row_count {
            // Like rows a person adds under a table: formatted as its last row.
            s.insert_rows_like(at_row, n, at_row.checked_sub(1));
        } else {
            s.grow_to(at_row + n, 0);
        }
    }
    let w = write_rows(ss, b.sheet, at_row, at_col, &rows, input)?;
    let mut m = Map::new();
    m.insert("spreadsheetId".into(), json!(ss.id));
    if let Some(t) = &table {
        m.insert("tableRange".into(), json!(range_a1(&title, t)));
    }
    m.insert("updates".into(), w.reply(ss, echo)?);
    Ok(Json::Object(m))
}

fn find_table(sheet: &Sheet, b: &Bounds) -> Option<Bounds> {
    let has_data = |r: u32| -> Option<(u32, u32)> {
        let row = sheet.rows.get(r as usize)?;
        let mut first = None;
        let mut last = None;
        for c in b.c0..b.c1.min(row.len() as u32) {
            if row[c as usize].value.is_some() {
                first.get_or_insert(c);
                last = Some(c);
            }
        }
        Some((first?, last?))
    };
    let stored = sheet.rows.len() as u32;
    let start = (b.r0..b.r1.min(stored)).find(|r| has_data(*r).is_some())?;
    let (mut c0, mut c1) = (u32::MAX, 0);
    let mut r = start;
    while r < stored {
        match has_data(r) {
            Some((f, l)) => {
                c0 = c0.min(f);
                c1 = c1.max(l + 1);
                r += 1;
            }
            None => break,
        }
    }
    // The table is the contiguous block: columns next to it holding data in its rows
    // belong to it (assumed from Google's "table" wording and users' reports that an
    // append to a range inside a table starts at the table's first column).
    let column_has_data = |c: u32| {
        (start..r).any(|row| {
            sheet
                .rows
                .get(row as usize)
                .and_then(|cells| cells.get(c as usize))
                .is_some_and(|cell| cell.value.is_some())
        })
    };
    while c0 > 0 && column_has_data(c0 - 1) {
        c0 -= 1;
    }
    while c1 < sheet.column_count && column_has_data(c1) {
        c1 += 1;
    }
    Some(Bounds {
        sheet: b.sheet,
        r0: start,
        r1: r,
        c0,
        c1,
    })
}

/// `values.clear` by `user`: values go, formats and validation stay. Replies with the
/// cleared range.
pub fn clear(ss: &mut Spreadsheet, range: &str, user: &str) -> Result<String, ApiError> {
    batch_clear_blocks(ss, &[range.to_string()], user)?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::new(500, format!("clearing {range} cleared nothing")))
}

/// `values.batchClear` by `user`: all ranges are checked first.
pub fn batch_clear(ss: &mut Spreadsheet, ranges: &[String], user: &str) -> Result<Json, ApiError> {
    let cleared = batch_clear_blocks(ss, ranges, user)?;
    Ok(json!({ "spreadsheetId": ss.id, "clearedRanges": cleared }))
}

/// Resolves every range, passes them all through the guard, then clears them; returns the
/// cleared ranges as Google echoes them.
fn batch_clear_blocks(
    ss: &mut Spreadsheet,
    ranges: &[String],
    user: &str,
) -> Result<Vec<String>, ApiError> {
    let blocks = ranges
        .iter()
        .map(|r| ss.resolve_read(r))
        .collect::<Result<Vec<_>, _>>()?;
    let touched: Vec<Touch> = blocks.iter().copied().map(Touch::Cells).collect();
    protection::guard(ss, user, &touched)?;
    Ok(blocks
        .iter()
        .map(|b| {
            ss.sheets[b.sheet].clear_values(b);
            range_a1(&ss.sheets[b.sheet].title, b)
        })
        .collect())
}

/// `spreadsheets.create`: title, time zone, locale and sheets from the request; a sheet
/// `Sheet1` when none is given. The account that creates a file owns it, as with Drive.
/// Returns the new spreadsheet's JSON.
pub fn create(store: &mut Store, body: &Json, id: String, owner: &str) -> Result<Json, ApiError> {
    let title = body
        .pointer("/properties/title")
        .and_then(Json::as_str)
        .unwrap_or("Untitled spreadsheet");
    let mut ss = Spreadsheet::new(id, title);
    ss.owner = owner.to_string();
    // Drive shares a new file with its creator alone.
    ss.sharing.others = Access::None;
    if let Some(tz) = body.pointer("/properties/timeZone").and_then(Json::as_str) {
        if tz.parse::<chrono_tz::Tz>().is_err() {
            return Err(ApiError::invalid(format!("Invalid timeZone: {tz}")));
        }
        ss.time_zone = tz.to_string();
    }
    if let Some(locale) = body.pointer("/properties/locale").and_then(Json::as_str) {
        ss.locale = locale.to_string();
    }
    if let Some(Json::Array(sheets)) = body.get("sheets") {
        for (i, sh) in sheets.iter().enumerate() {
            let p = sh.get("properties").cloned().unwrap_or(Json::Null);
            let id = p
                .get("sheetId")
                .and_then(Json::as_i64)
                .map(|v| v as i32)
                .unwrap_or(if i == 0 { 0 } else { ss.fresh_sheet_id() });
            let title = p
                .get("title")
                .and_then(Json::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("Sheet{}", i + 1));
            if ss.sheet_index(id).is_some() || ss.sheet_by_title(&title).is_some() {
                return Err(ApiError::invalid(format!(
                    "Invalid sheets[{i}]: duplicate sheet id or title"
                )));
            }
            let mut s = Sheet::new(id, title);
            if let Some(g) = p.get("gridProperties") {
                if let Some(n) = g.get("rowCount").and_then(Json::as_u64) {
                    s.row_count = n as u32;
                }
                if let Some(n) = g.get("columnCount").and_then(Json::as_u64) {
                    s.column_count = n as u32;
                }
            }
            s.hidden = p.get("hidden").and_then(Json::as_bool).unwrap_or(false);
            ss.sheets.push(s);
        }
    }
    if ss.sheets.is_empty() {
        ss.sheets.push(Sheet::new(0, "Sheet1"));
    }
    let reply = spreadsheet_json(&ss, &[], false, owner)?;
    store.insert(ss);
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::{DateRender, ValueRender};

    const UNFORMATTED: Render = Render {
        value: ValueRender::Unformatted,
        date: DateRender::Serial,
    };

    fn ss() -> Spreadsheet {
        let mut ss = Spreadsheet::new("id", "t");
        ss.sheets.push(Sheet::new(0, "Sheet1"));
        ss
    }

    fn put(ss: &mut Spreadsheet, range: &str, rows: Json) {
        let owner = ss.owner.clone();
        update(
            ss,
            range,
            &json!({ "values": rows }),
            Input::Raw,
            None,
            &owner,
        )
        .unwrap_or_else(|e| panic!("write {range}: {e}"));
    }

    #[test]
    fn reads_omit_trailing_empties_and_echo_clamped_range() {
        let mut s = ss();
        put(
            &mut s,
            "Sheet1!A1",
            json!([["a", "", "c", ""], ["", ""], ["x"]]),
        );
        let got = read_range(&s, "Sheet1!A1:D", UNFORMATTED, Major::Rows).unwrap_or_default();
        assert_eq!(got["range"], "Sheet1!A1:D1000");
        assert_eq!(got["values"], json!([["a", "", "c"], [], ["x"]]));
        let cols = read_range(&s, "Sheet1!A1:C3", UNFORMATTED, Major::Columns).unwrap_or_default();
        assert_eq!(cols["values"], json!([["a", "", "x"], [], ["c"]]));
        let empty = read_range(&s, "Sheet1!E5:F6", UNFORMATTED, Major::Rows).unwrap_or_default();
        assert!(
            empty.get("values").is_none(),
            "empty block has no values: {empty}"
        );
    }

    #[test]
    fn append_finds_table_and_inserts_rows() {
        let mut s = ss();
        put(
            &mut s,
            "Sheet1!A1",
            json!([["h1", "h2"], ["a", "b"], [], ["below"]]),
        );
        let body = json!({ "values": [["new", "row"]] });
        let got = append(
            &mut s,
            "Sheet1!A:B",
            &body,
            Input::Raw,
            Some("INSERT_ROWS"),
            None,
            false,
            crate::DEFAULT_OWNER,
        )
        .unwrap_or_else(|e| panic!("append: {e}"));
        assert_eq!(got["tableRange"], "Sheet1!A1:B2");
        assert_eq!(got["updates"]["updatedRange"], "Sheet1!A3:B3");
        let all = read_range(&s, "Sheet1!A1:B", UNFORMATTED, Major::Rows).unwrap_or_default();
        assert_eq!(
            all["values"],
            json!([["h1", "h2"], ["a", "b"], ["new", "row"], [], ["below"]])
        );
    }

    #[test]
    fn append_to_a_single_cell_range_goes_after_the_whole_table() {
        let mut s = ss();
        put(&mut s, "Sheet1!A1", json!([["h1", "h2"], ["a", "b"]]));
        let got = append(
            &mut s,
            "Sheet1!A1",
            &json!({ "values": [["c", "d"]] }),
            Input::Raw,
            Some("INSERT_ROWS"),
            None,
            false,
            crate::DEFAULT_OWNER,
        )
        .unwrap_or_else(|e| panic!("append: {e}"));
        assert_eq!(
            got["updates"]["updatedRange"], "Sheet1!A3:B3",
            "range=A1 on a 2-row table must append at row 3, not push row 2 down: {got}"
        );
        let all = read_range(&s, "Sheet1!A1:B", UNFORMATTED, Major::Rows).unwrap_or_default();
        assert_eq!(all["values"], json!([["h1", "h2"], ["a", "b"], ["c", "d"]]));
    }

    #[test]
    fn write_outside_bounded_range_is_rejected() {
        let mut s = ss();
        let err = update(
            &mut s,
            "Sheet1!A1:B1",
            &json!({"values": [["a","b","c"]]}),
            Input::Raw,
            None,
            crate::DEFAULT_OWNER,
        )
        .err()
        .map(|e| e.message);
        assert_eq!(
            err.as_deref(),
            Some("Requested writing within range [Sheet1!A1:B1], but tried writing to column [C]")
        );
    }
}
