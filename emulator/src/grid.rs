//! Spreadsheet JSON as `spreadsheets.get` returns it (and `batchUpdate`'s
//! `updatedSpreadsheet`): properties, sheets, grid data with `rowMetadata` and
//! `columnMetadata`, and developer metadata of the spreadsheet, its sheets, rows and columns.
//!
//! Reference: https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets#GridData
//! (`rowMetadata[]`/`columnMetadata[]` are `DimensionProperties`: `pixelSize`,
//! `hiddenByUser`, `developerMetadata`). The emulator's default pixel sizes are Google's
//! defaults for a new sheet: 21 for rows, 100 for columns.

use serde_json::{json, Map, Value as Json};

use super::error::ApiError;
use super::formula::{self, Eff};
use super::metadata::{self, Placed, Seer};
use super::protection;
use super::store::{Bounds, Cell, Sheet, Spreadsheet, Value};
use super::values;

/// Default row height and column width in pixels.
pub const ROW_PIXELS: u32 = 21;
pub const COLUMN_PIXELS: u32 = 100;

/// `spreadsheets.get` (and the `updatedSpreadsheet` of a batch) as `viewer` reads it. With
/// `ranges`, only the sheets they touch are listed; with grid data, each range's cells are
/// included as `data[]`, else the whole sheet's. Each sheet lists its `protectedRanges`,
/// their editors only to the viewers who may edit them. Developer metadata (the
/// spreadsheet's, the sheets', and in `rowMetadata`/`columnMetadata`) is only what `viewer`'s
/// developer project sees (`metadata::Seer`).
pub fn spreadsheet_json(
    ss: &Spreadsheet,
    ranges: &[String],
    grid: bool,
    viewer: &str,
) -> Result<Json, ApiError> {
    let seer = Seer::caller(viewer);
    let mut per_sheet: Vec<Vec<Bounds>> = vec![Vec::new(); ss.sheets.len()];
    for r in ranges {
        let b = ss.resolve_read(r)?;
        per_sheet[b.sheet].push(b);
    }
    let mut sheets = Vec::new();
    for (i, s) in ss.sheets.iter().enumerate() {
        if !ranges.is_empty() && per_sheet[i].is_empty() {
            continue;
        }
        let mut sheet = json!({ "properties": sheet_properties(s, i) });
        let own = metadata::at(ss, Placed::Sheet(i), &seer);
        if !own.is_empty() {
            sheet["developerMetadata"] = Json::Array(own);
        }
        if let Some(protected) = protection::sheet_json(ss, i, viewer) {
            sheet["protectedRanges"] = protected;
        }
        if grid {
            let blocks = if ranges.is_empty() {
                vec![Bounds {
                    sheet: i,
                    r0: 0,
                    r1: s.row_count,
                    c0: 0,
                    c1: s.column_count,
                }]
            } else {
                per_sheet[i].clone()
            };
            sheet["data"] = Json::Array(blocks.iter().map(|b| grid_data(ss, b, &seer)).collect());
        }
        sheets.push(sheet);
    }
    let own = metadata::at(ss, Placed::Spreadsheet, &seer);
    let mut reply = json!({
        "spreadsheetId": ss.id,
        "properties": {
            "title": ss.title,
            "locale": ss.locale,
            "autoRecalc": "ON_CHANGE",
            "timeZone": ss.time_zone,
        },
        "sheets": sheets,
        "spreadsheetUrl": format!("https://docs.google.com/spreadsheets/d/{}/edit", ss.id),
    });
    if !own.is_empty() {
        reply["developerMetadata"] = Json::Array(own);
    }
    Ok(reply)
}

/// `SheetProperties` JSON. `hidden` and zero frozen counts are omitted when false/zero, as
/// Google's replies omit default values.
pub fn sheet_properties(s: &Sheet, index: usize) -> Json {
    let mut grid = Map::new();
    grid.insert("rowCount".into(), json!(s.row_count));
    grid.insert("columnCount".into(), json!(s.column_count));
    if s.frozen_row_count > 0 {
        grid.insert("frozenRowCount".into(), json!(s.frozen_row_count));
    }
    if s.frozen_column_count > 0 {
        grid.insert("frozenColumnCount".into(), json!(s.frozen_column_count));
    }
    let mut p = json!({
        "sheetId": s.id,
        "title": s.title,
        "index": index,
        "sheetType": "GRID",
        "gridProperties": grid,
    });
    if s.hidden {
        p["hidden"] = json!(true);
    }
    p
}

/// `GridData` for a block: `startRow`/`startColumn` (omitted when 0, as proto3 JSON does),
/// `rowData[].values[]` up to the last non-blank cell of each row, trailing empty rows cut,
/// and `rowMetadata`/`columnMetadata` for every row and column of the block, each with the
/// developer metadata `seer` sees located there (the key is omitted when there is none).
pub fn grid_data(ss: &Spreadsheet, b: &Bounds, seer: &Seer) -> Json {
    let s = &ss.sheets[b.sheet];
    let end = b.r1.min(s.rows.len() as u32);
    let mut row_data = Vec::new();
    let mut last_nonempty = 0;
    for r in b.r0..end {
        let row = &s.rows[r as usize];
        let stop = b.c1.min(row.len() as u32);
        let mut cells = Vec::new();
        let mut last = 0;
        for c in b.c0..stop {
            let cell = &row[c as usize];
            cells.push(cell_json(ss, b.sheet, cell));
            if !cell.is_blank() {
                last = cells.len();
            }
        }
        cells.truncate(last);
        if cells.is_empty() {
            row_data.push(json!({}));
        } else {
            row_data.push(json!({ "values": cells }));
            last_nonempty = row_data.len();
        }
    }
    row_data.truncate(last_nonempty);
    let mut m = Map::new();
    if b.r0 > 0 {
        m.insert("startRow".into(), json!(b.r0));
    }
    if b.c0 > 0 {
        m.insert("startColumn".into(), json!(b.c0));
    }
    if !row_data.is_empty() {
        m.insert("rowData".into(), Json::Array(row_data));
    }
    let rows: Vec<Json> = (b.r0..b.r1)
        .map(|r| {
            let mut p = json!({ "pixelSize": ROW_PIXELS });
            let tagged = s
                .rows
                .get(r as usize)
                .is_some_and(|row| !row.meta.is_empty());
            let seen = if tagged {
                metadata::at(ss, Placed::Row(b.sheet, r), seer)
            } else {
                Vec::new()
            };
            if !seen.is_empty() {
                p["developerMetadata"] = Json::Array(seen);
            }
            p
        })
        .collect();
    m.insert("rowMetadata".into(), Json::Array(rows));
    let cols: Vec<Json> = (b.c0..b.c1)
        .map(|c| {
            let mut p = json!({ "pixelSize": COLUMN_PIXELS });
            if s.hidden_columns.contains(&c) {
                p["hiddenByUser"] = json!(true);
            }
            let tagged = s
                .column_meta
                .get(c as usize)
                .is_some_and(|ids| !ids.is_empty());
            let seen = if tagged {
                metadata::at(ss, Placed::Column(b.sheet, c), seer)
            } else {
                Vec::new()
            };
            if !seen.is_empty() {
                p["developerMetadata"] = Json::Array(seen);
            }
            p
        })
        .collect();
    m.insert("columnMetadata".into(), Json::Array(cols));
    Json::Object(m)
}

/// `CellData` JSON: userEnteredValue, effectiveValue, formattedValue, userEnteredFormat
/// (number format only) and dataValidation.
pub fn cell_json(ss: &Spreadsheet, sheet: usize, cell: &Cell) -> Json {
    let mut m = Map::new();
    if let Some(v) = &cell.value {
        m.insert("userEnteredValue".into(), extended_value(v));
        let eff = formula::effective(ss, sheet, v);
        m.insert("effectiveValue".into(), effective_json(&eff));
        m.insert(
            "formattedValue".into(),
            Json::String(values::format_value(&eff, cell.number_format.as_deref())),
        );
    }
    if let Some(nf) = &cell.number_format {
        let mut f = json!({ "type": nf.kind });
        if !nf.pattern.is_empty() {
            f["pattern"] = json!(nf.pattern);
        }
        m.insert("userEnteredFormat".into(), json!({ "numberFormat": f }));
    }
    if let Some(dv) = &cell.validation {
        m.insert("dataValidation".into(), (**dv).clone());
    }
    Json::Object(m)
}

pub fn extended_value(v: &Value) -> Json {
    match v {
        Value::Number(n) => json!({ "numberValue": values::number_json(*n) }),
        Value::String(s) => json!({ "stringValue": s }),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Formula(f) => json!({ "formulaValue": f }),
    }
}

fn effective_json(e: &Eff) -> Json {
    match e {
        Eff::Number(n) => json!({ "numberValue": values::number_json(*n) }),
        Eff::String(s) => json!({ "stringValue": s }),
        Eff::Bool(b) => json!({ "boolValue": b }),
        Eff::Error(e) => {
            let kind = match e.as_str() {
                "#DIV/0!" => "DIVIDE_BY_ZERO",
                "#VALUE!" => "VALUE",
                "#REF!" => "REF",
                "#NAME?" => "NAME",
                "#N/A" => "N_A",
                _ => "ERROR",
            };
            json!({ "errorValue": { "type": kind, "message": format!("Formula error {e}") } })
        }
    }
}
