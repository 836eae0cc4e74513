//! `spreadsheets.batchUpdate`: the structural and cell requests a person's edits and the
//! daemon's lease need, applied in order and atomically.
//!
//! Google documents that "the requests will be applied in the order they are specified. If
//! any request is not valid, no requests will be applied"
//! (https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/batchUpdate).
//! The emulator applies the batch to a copy of the spreadsheet (cheap: rows are shared until
//! written) and keeps the copy only if every request succeeded, so a later request may refer
//! to what an earlier one created (a sheet added by `addSheet`), as with Google.
//!
//! Replies follow proto3 JSON: zero counts are omitted, so a `findReplace` that changed
//! nothing replies `{"findReplace": {}}`. Clients must read a missing count as 0.
//!
//! Every request is made by someone (the token's account, or the person of the web view):
//! before it is applied, the protection guard (`protection.rs`) judges what it would change
//! (`footprint.rs`), and a request touching a protected cell its author may not edit fails
//! the whole batch with Google's 400, without the `Invalid requests[i]` prefix of a
//! malformed request.
//!
//! This file holds the dispatch, the cell and sheet requests and the helpers they share;
//! row/column edits are in `dimension.rs`, `cutPaste`/`copyPaste` in `paste.rs`,
//! `findReplace` in `find_replace.rs`, the developer metadata requests in `metadata.rs` and
//! the protected range requests in `protection.rs`. After every request, metadata whose
//! row, column or sheet was deleted is dropped, whoever created it.
//!
//! The developer metadata requests are the caller's (`metadata::Seer::caller`): a create is
//! recorded as its developer project's, and an update or delete selects only among the
//! entries that project sees.

use google_sheets4::api::{
    AppendCellsRequest, BatchUpdateSpreadsheetRequest, CellData, DuplicateSheetRequest,
    ExtendedValue, RepeatCellRequest, Request, RowData, SetDataValidationRequest, SheetProperties,
    UpdateCellsRequest,
};
use serde_json::{json, Value as Json};

use super::api;
use super::deviation::{self, Deviation, Rules};
use super::dimension;
use super::error::ApiError;
use super::find_replace::find_replace;
use super::footprint;
use super::lookup;
use super::metadata;
use super::paste;
use super::protection;
use super::request::{exceeds, fields, grid_range, need, nonneg, sheet_of};
use super::store::{range_a1, Bounds, Cell, NumberFormat, Sheet, Spreadsheet, Value};

/// Parses a `BatchUpdateSpreadsheetRequest` body.
pub fn parse(body: &[u8]) -> Result<BatchUpdateSpreadsheetRequest, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("Invalid JSON payload received. {e}")))
}

/// What the guard judges of a request of `kind` that touches `touches`: nothing, for the
/// deviations that let a request past protected ranges.
fn guarded_touches(
    rules: &Rules,
    kind: &str,
    touches: Vec<protection::Touch>,
) -> Vec<protection::Touch> {
    let metadata = matches!(
        kind,
        "createDeveloperMetadata" | "updateDeveloperMetadata" | "deleteDeveloperMetadata"
    );
    if (kind == "addProtectedRange" && rules.deviates(Deviation::ProtectAnywhere))
        || (metadata && rules.deviates(Deviation::MetadataIgnoresProtection))
    {
        Vec::new()
    } else {
        touches
    }
}

/// Runs a whole batch of `user` (a service account or a person) against `ss`: on success
/// `ss` holds the result and the reply is returned; on failure `ss` is untouched.
pub fn run(
    ss: &mut Spreadsheet,
    req: &BatchUpdateSpreadsheetRequest,
    rules: &Rules,
    user: &str,
) -> Result<Json, ApiError> {
    let mut work = ss.clone();
    let requests = req.requests.as_deref().unwrap_or_default();
    let mut replies = Vec::with_capacity(requests.len());
    for (i, r) in requests.iter().enumerate() {
        let kind =
            kind_of(r).map_err(|m| ApiError::invalid(format!("Invalid requests[{i}]: {m}")))?;
        let invalid = |m: String| ApiError::invalid(format!("Invalid requests[{i}].{kind}: {m}"));
        let step = footprint::of_request(&work, r, &kind, user)
            .map(|touches| guarded_touches(rules, &kind, touches))
            .map_err(invalid)
            .and_then(|touches| protection::guard(&work, user, &touches))
            .and_then(|()| apply(&mut work, r, &kind, rules, user).map_err(invalid));
        let reply = match step {
            Ok(reply) => reply,
            Err(e) => {
                if rules.deviates(Deviation::PartialBatch) {
                    metadata::prune(&mut work);
                    *ss = work;
                }
                return Err(e);
            }
        };
        metadata::prune(&mut work);
        replies.push(reply);
    }
    let mut out = json!({ "spreadsheetId": work.id, "replies": replies });
    if req.include_spreadsheet_in_response == Some(true) {
        let ranges = req.response_ranges.clone().unwrap_or_default();
        let grid = req.response_include_grid_data == Some(true);
        let shown = if rules.deviates(Deviation::ReadBackBeforeRequests) {
            &*ss
        } else {
            &work
        };
        out["updatedSpreadsheet"] = api::spreadsheet_json(shown, &ranges, grid, user)?;
    }
    *ss = work;
    Ok(out)
}

/// The request under a [`Deviation`] that changes it, or `None` to apply it as usual.
fn deviate(
    ss: &mut Spreadsheet,
    r: &Request,
    kind: &str,
    rules: &Rules,
    user: &str,
) -> Result<Option<Json>, String> {
    let usual = Rules {
        deviation: None,
        ..*rules
    };
    let rows_edit = |d: Option<&google_sheets4::api::DimensionRange>| {
        d.filter(|d| d.dimension.as_deref() == Some("ROWS"))
            .map(|d| d.sheet_id)
    };
    Ok(Some(match (rules.deviation, kind) {
        (Some(Deviation::LooseFindReplace), "findReplace") => {
            let mut f = need(&r.find_replace)?.clone();
            f.match_case = Some(false);
            f.match_entire_cell = Some(false);
            find_replace(ss, &f)?
        }
        (
            Some(Deviation::RowMetadataKeepsIndex),
            "insertDimension" | "deleteDimension" | "moveDimension",
        ) => {
            let range = match kind {
                "insertDimension" => need(&r.insert_dimension)?.range.as_ref(),
                "deleteDimension" => need(&r.delete_dimension)?.range.as_ref(),
                _ => need(&r.move_dimension)?.source.as_ref(),
            };
            let Some(sheet_id) = rows_edit(range) else {
                return Ok(None);
            };
            let sheet = sheet_of(ss, sheet_id)?;
            let before = deviation::row_metadata(ss, sheet);
            let reply = apply(ss, r, kind, &usual, user)?;
            deviation::pin_row_metadata(ss, sheet, before);
            reply
        }
        (Some(Deviation::CutPasteMovesMetadata), "cutPaste") => {
            let c = need(&r.cut_paste)?;
            let src = grid_range(ss, need(&c.source)?)?;
            let dest = need(&c.destination)?;
            let to = sheet_of(ss, dest.sheet_id)?;
            let row = nonneg(dest.row_index)?;
            let reply = apply(ss, r, kind, &usual, user)?;
            if to == src.sheet {
                deviation::carry_row_metadata(ss, src.sheet, src.r0, row, src.r1 - src.r0);
            }
            reply
        }
        (Some(Deviation::DeleteMissingMetadataFails), "deleteDeveloperMetadata") => {
            let reply = apply(ss, r, kind, &usual, user)?;
            if reply["deleteDeveloperMetadata"]
                .get("deletedDeveloperMetadata")
                .is_none()
            {
                return Err("No developer metadata matches the data filter.".into());
            }
            reply
        }
        (Some(Deviation::DuplicateMetadataIdReplaces), "createDeveloperMetadata") => {
            let id = need(&r.create_developer_metadata)?
                .developer_metadata
                .as_ref()
                .and_then(|m| m.metadata_id);
            if let Some(id) = id.filter(|id| ss.developer_metadata.contains_key(id)) {
                let by_id = google_sheets4::api::DeleteDeveloperMetadataRequest {
                    data_filter: Some(google_sheets4::api::DataFilter {
                        developer_metadata_lookup: Some(
                            google_sheets4::api::DeveloperMetadataLookup {
                                metadata_id: Some(id),
                                ..Default::default()
                            },
                        ),
                        ..Default::default()
                    }),
                };
                lookup::delete(ss, &by_id, &metadata::Seer::caller(user))?;
            }
            apply(ss, r, kind, &usual, user)?
        }
        _ => return Ok(None),
    }))
}

/// The one request kind set in a `Request` (its JSON key, e.g. `findReplace`).
fn kind_of(r: &Request) -> Result<String, String> {
    let mut v = serde_json::to_value(r).map_err(|e| e.to_string())?;
    google_sheets4::common::remove_json_null_values(&mut v);
    let keys: Vec<String> = v
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    match keys.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("request must have exactly one kind set; none was".into()),
        many => Err(format!(
            "request must have exactly one kind set; found {}",
            many.join(", ")
        )),
    }
}

fn apply(
    ss: &mut Spreadsheet,
    r: &Request,
    kind: &str,
    rules: &Rules,
    user: &str,
) -> Result<Json, String> {
    if rules.deviation.is_some() {
        if let Some(reply) = deviate(ss, r, kind, rules, user)? {
            return Ok(reply);
        }
    }
    Ok(match kind {
        "findReplace" => find_replace(ss, need(&r.find_replace)?)?,
        "updateCells" => update_cells(ss, need(&r.update_cells)?)?,
        "appendCells" => append_cells(ss, need(&r.append_cells)?)?,
        "addSheet" => {
            let props = need(&r.add_sheet)?.properties.clone().unwrap_or_default();
            let props = add_sheet(ss, &props)?;
            json!({ "addSheet": { "properties": props } })
        }
        "deleteSheet" => {
            let i = sheet_of(ss, need(&r.delete_sheet)?.sheet_id)?;
            if ss.sheets.len() == 1 {
                return Err("You can't remove all the sheets in a document.".into());
            }
            ss.sheets.remove(i);
            json!({})
        }
        "duplicateSheet" => duplicate_sheet(ss, need(&r.duplicate_sheet)?)?,
        "updateSheetProperties" => {
            let u = need(&r.update_sheet_properties)?;
            let props = u.properties.clone().unwrap_or_default();
            let mask = fields(u.fields.as_ref())?;
            update_sheet_properties(ss, &props, &mask)?;
            json!({})
        }
        "repeatCell" => repeat_cell(ss, need(&r.repeat_cell)?)?,
        "setDataValidation" => set_data_validation(ss, need(&r.set_data_validation)?)?,
        "insertDimension" => dimension::insert(ss, need(&r.insert_dimension)?)?,
        "deleteDimension" => dimension::delete(ss, need(&r.delete_dimension)?)?,
        "moveDimension" => dimension::move_dimension(ss, need(&r.move_dimension)?)?,
        "sortRange" => dimension::sort_range(ss, need(&r.sort_range)?, rules.sort_metadata)?,
        "updateDimensionProperties" => {
            dimension::update_properties(ss, need(&r.update_dimension_properties)?)?
        }
        "cutPaste" => paste::cut(ss, need(&r.cut_paste)?)?,
        "copyPaste" => paste::copy(ss, need(&r.copy_paste)?)?,
        "createDeveloperMetadata" => metadata::create(
            ss,
            need(&r.create_developer_metadata)?,
            &metadata::Seer::caller(user),
        )?,
        "updateDeveloperMetadata" => lookup::update(
            ss,
            need(&r.update_developer_metadata)?,
            &metadata::Seer::caller(user),
        )?,
        "deleteDeveloperMetadata" => lookup::delete(
            ss,
            need(&r.delete_developer_metadata)?,
            &metadata::Seer::caller(user),
        )?,
        "addProtectedRange" => protection::add(ss, need(&r.add_protected_range)?, user)?,
        "updateProtectedRange" => protection::update(ss, need(&r.update_protected_range)?, user)?,
        "deleteProtectedRange" => protection::delete(ss, need(&r.delete_protected_range)?)?,
        "autoResizeDimensions" => {
            // Column widths are not modelled.
            need(&r.auto_resize_dimensions)?;
            json!({})
        }
        other => {
            return Err(format!(
                "the emulator does not implement '{other}' (supported: findReplace, updateCells, \
                 appendCells, addSheet, deleteSheet, duplicateSheet, updateSheetProperties, \
                 repeatCell, setDataValidation, insertDimension, deleteDimension, \
                 moveDimension, sortRange, updateDimensionProperties, autoResizeDimensions, \
                 cutPaste, copyPaste, createDeveloperMetadata, updateDeveloperMetadata, \
                 deleteDeveloperMetadata, addProtectedRange, updateProtectedRange, \
                 deleteProtectedRange)"
            ))
        }
    })
}

/// `updateCells`: from `start`, or over `range` (cells outside it untouched).
fn update_cells(ss: &mut Spreadsheet, u: &UpdateCellsRequest) -> Result<Json, String> {
    let fields = fields(u.fields.as_ref())?;
    let rows = u.rows.as_deref().unwrap_or_default();
    match (&u.start, &u.range) {
        (Some(start), None) => {
            let sheet = sheet_of(ss, start.sheet_id)?;
            let (r0, c0) = (nonneg(start.row_index)?, nonneg(start.column_index)?);
            write_cells(ss, sheet, r0, c0, rows, &fields, None)?;
        }
        (None, Some(range)) => {
            let b = grid_range(ss, range)?;
            write_cells(ss, b.sheet, b.r0, b.c0, rows, &fields, Some(b))?;
        }
        _ => return Err("exactly one of start or range must be set".into()),
    }
    Ok(json!({}))
}

/// `appendCells`: "Appends new cells after the last row with data in a sheet, inserting new
/// rows into the sheet if necessary."
fn append_cells(ss: &mut Spreadsheet, a: &AppendCellsRequest) -> Result<Json, String> {
    let fields = fields(a.fields.as_ref())?;
    let sheet = sheet_of(ss, a.sheet_id)?;
    // "After the last row with data": a cell that only carries a number format or a data
    // validation rule (or a row that only carries metadata) is not data.
    let at = ss.sheets[sheet].data_end();
    let rows = a.rows.as_deref().unwrap_or_default();
    let s = &mut ss.sheets[sheet];
    let width = rows
        .iter()
        .map(|r| r.values.as_ref().map_or(0, Vec::len))
        .max()
        .unwrap_or(0) as u32;
    s.grow_to(at + rows.len() as u32, width);
    write_cells(ss, sheet, at, 0, rows, &fields, None)?;
    Ok(json!({}))
}

/// `duplicateSheet`: a copy of the sheet's cells, without its developer metadata.
fn duplicate_sheet(ss: &mut Spreadsheet, d: &DuplicateSheetRequest) -> Result<Json, String> {
    let src = sheet_of(ss, d.source_sheet_id)?;
    let mut copy = ss.sheets[src].clone();
    // Metadata ids are unique per spreadsheet, so the copy cannot carry the same ones; the
    // emulator assumes Google does not copy developer metadata.
    for row in &mut copy.rows {
        row.meta.clear();
    }
    copy.column_meta.clear();
    // The copy keeps the sheet's protection (assumed, as the Sheets UI's copy does), under
    // ids of its own: a protected range's id is unique in the spreadsheet.
    let mut taken = Vec::with_capacity(copy.protected.len());
    for p in &mut copy.protected {
        let id = loop {
            let id = ss.fresh_protected_id();
            if !taken.contains(&id) {
                break id;
            }
        };
        taken.push(id);
        p.id = id;
    }
    copy.trim();
    copy.id = match d.new_sheet_id {
        Some(id) if ss.sheet_index(id).is_some() => {
            return Err(format!("Sheet with id {id} already exists."))
        }
        Some(id) if id < 0 => return Err(format!("Invalid sheet id {id}.")),
        Some(id) => id,
        None => ss.fresh_sheet_id(),
    };
    copy.title = match &d.new_sheet_name {
        Some(t) => t.clone(),
        None => format!("Copy of {}", copy.title),
    };
    check_title(ss, &copy.title, None)?;
    let at = match d.insert_sheet_index {
        Some(i) => (i.max(0) as usize).min(ss.sheets.len()),
        None => src + 1,
    };
    ss.sheets.insert(at, copy);
    Ok(json!({ "duplicateSheet": { "properties": api::sheet_properties(&ss.sheets[at], at) } }))
}

/// `repeatCell`: the masked fields of one cell over a range.
fn repeat_cell(ss: &mut Spreadsheet, rc: &RepeatCellRequest) -> Result<Json, String> {
    let mask = fields(rc.fields.as_ref())?;
    let b = grid_range(ss, need(&rc.range)?)?;
    let cell = rc.cell.clone().unwrap_or_default();
    let template = cell_from(&cell)?;
    let s = &mut ss.sheets[b.sheet];
    for r in b.r0..b.r1 {
        for c in b.c0..b.c1 {
            apply_mask(s.cell_mut(r, c), &template, &mask);
        }
    }
    s.trim();
    Ok(json!({}))
}

/// What Google refuses in a data-validation rule's condition, for the condition types sheetq
/// sends: each takes a set number of values
/// (https://developers.google.com/sheets/api/reference/rest/v4/other#ConditionType:
/// `ONE_OF_LIST` one or more, `ONE_OF_RANGE` exactly one, a range formula; `NUMBER_BETWEEN`
/// exactly two; `DATE_IS_VALID` none; `BOOLEAN` none to two). Other types are kept unchecked.
fn condition_problem(condition: Option<&google_sheets4::api::BooleanCondition>) -> Option<String> {
    let Some(c) = condition else {
        return Some("Data validation rule requires a condition.".into());
    };
    let kind = c.type_.as_deref().unwrap_or("");
    let values: Vec<&str> = c
        .values
        .iter()
        .flatten()
        .map(|v| v.user_entered_value.as_deref().unwrap_or(""))
        .collect();
    let wrong = |want: &str| {
        Some(format!(
            "Invalid ConditionValue for {kind}: it takes {want}, got {}.",
            values.len()
        ))
    };
    match kind {
        "ONE_OF_LIST" if values.is_empty() => wrong("at least one value"),
        "ONE_OF_RANGE" if values.len() != 1 => wrong("exactly one value"),
        "ONE_OF_RANGE" if !values[0].starts_with('=') => Some(format!(
            "Invalid ConditionValue for ONE_OF_RANGE: {:?} is not a range formula (=Sheet!A1:A).",
            values[0]
        )),
        "NUMBER_BETWEEN" if values.len() != 2 => wrong("exactly two values"),
        "NUMBER_BETWEEN" if values.iter().any(|v| v.trim().parse::<f64>().is_err()) => Some(
            format!("Invalid ConditionValue for NUMBER_BETWEEN: {values:?} are not numbers."),
        ),
        "DATE_IS_VALID" if !values.is_empty() => wrong("no value"),
        "BOOLEAN" if values.len() > 2 => wrong("at most two values"),
        "" => Some("Data validation rule requires a condition type.".into()),
        _ => None,
    }
}

/// `setDataValidation`: a rule over a range, or none (cleared).
fn set_data_validation(
    ss: &mut Spreadsheet,
    sv: &SetDataValidationRequest,
) -> Result<Json, String> {
    let b = grid_range(ss, need(&sv.range)?)?;
    if let Some(rule) = &sv.rule {
        condition_problem(rule.condition.as_ref()).map_or(Ok(()), Err)?;
    }
    let rule = match &sv.rule {
        Some(rule) => Some(Box::new(
            serde_json::to_value(rule).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let rule = rule.map(|mut r| {
        google_sheets4::common::remove_json_null_values(&mut r);
        r
    });
    let s = &mut ss.sheets[b.sheet];
    for r in b.r0..b.r1 {
        for c in b.c0..b.c1 {
            if rule.is_none() && s.cell(r, c).is_none() {
                continue;
            }
            s.cell_mut(r, c).validation = rule.clone();
        }
    }
    s.trim();
    Ok(json!({}))
}

/// Which parts of a `CellData` a field mask touches.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Mask {
    pub value: bool,
    pub validation: bool,
    pub number_format: bool,
}

pub(super) fn cell_mask(fields: &[String]) -> Mask {
    let mut m = Mask::default();
    for f in fields {
        match f.as_str() {
            "*" => {
                m.value = true;
                m.validation = true;
                m.number_format = true;
            }
            "userEnteredValue" => m.value = true,
            "dataValidation" => m.validation = true,
            "userEnteredFormat" | "userEnteredFormat.numberFormat" => m.number_format = true,
            _ => {}
        }
    }
    m
}

fn value_from(v: &ExtendedValue) -> Result<Option<Value>, String> {
    Ok(if let Some(n) = v.number_value {
        Some(Value::Number(n))
    } else if let Some(s) = &v.string_value {
        super::values::check_length(s)?;
        Some(Value::String(s.clone()))
    } else if let Some(b) = v.bool_value {
        Some(Value::Bool(b))
    } else if let Some(f) = &v.formula_value {
        super::values::check_length(f)?;
        Some(Value::Formula(f.clone()))
    } else if v.error_value.is_some() {
        return Err("errorValue cannot be written".into());
    } else {
        None
    })
}

pub(super) fn cell_from(cd: &CellData) -> Result<Cell, String> {
    let value = match &cd.user_entered_value {
        Some(v) => value_from(v)?,
        None => None,
    };
    let validation = match &cd.data_validation {
        Some(rule) => {
            let mut v = serde_json::to_value(rule).map_err(|e| e.to_string())?;
            google_sheets4::common::remove_json_null_values(&mut v);
            Some(Box::new(v))
        }
        None => None,
    };
    let number_format = cd
        .user_entered_format
        .as_ref()
        .and_then(|f| f.number_format.as_ref())
        .map(|nf| {
            Box::new(NumberFormat {
                kind: nf.type_.clone().unwrap_or_else(|| "NUMBER".into()),
                pattern: nf.pattern.clone().unwrap_or_default(),
            })
        });
    Ok(Cell {
        value,
        validation,
        number_format,
    })
}

pub(super) fn apply_mask(target: &mut Cell, src: &Cell, fields: &[String]) {
    let m = cell_mask(fields);
    if m.value {
        target.value = src.value.clone();
    }
    if m.validation {
        target.validation = src.validation.clone();
    }
    if m.number_format {
        target.number_format = src.number_format.clone();
    }
}

/// `updateCells`/`appendCells`: writes rows of `CellData` from (`r0`, `c0`). With a range,
/// cells of the range not covered by `rows` get the masked fields cleared, as documented.
fn write_cells(
    ss: &mut Spreadsheet,
    sheet: usize,
    r0: u32,
    c0: u32,
    rows: &[RowData],
    fields: &[String],
    range: Option<Bounds>,
) -> Result<(), String> {
    let cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|r| {
            r.values
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(cell_from)
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()?;
    let s = &mut ss.sheets[sheet];
    let height = cells.len() as u32;
    let width = cells.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let limit = range.unwrap_or(Bounds {
        sheet,
        r0,
        r1: r0 + height,
        c0,
        c1: c0 + width,
    });
    if limit.r1 > s.row_count || limit.c1 > s.column_count {
        return Err(exceeds(s, &limit));
    }
    if range.is_some() && (height > limit.rows() || width > limit.cols()) {
        return Err(format!(
            "the rows do not fit the range {}",
            range_a1(&s.title, &limit)
        ));
    }
    let blank = Cell::default();
    for r in limit.r0..limit.r1 {
        for c in limit.c0..limit.c1 {
            let src = cells
                .get((r - r0) as usize)
                .and_then(|row| row.get((c - c0) as usize));
            match (src, range.is_some()) {
                (Some(src), _) => apply_mask(s.cell_mut(r, c), src, fields),
                (None, true) => {
                    if s.cell(r, c).is_some() {
                        apply_mask(s.cell_mut(r, c), &blank, fields);
                    }
                }
                (None, false) => {}
            }
        }
    }
    s.trim();
    Ok(())
}

fn check_title(ss: &Spreadsheet, title: &str, except: Option<i32>) -> Result<(), String> {
    if title.trim().is_empty() {
        return Err("Sheet title must not be empty.".into());
    }
    if ss
        .sheets
        .iter()
        .any(|s| s.title.eq_ignore_ascii_case(title) && Some(s.id) != except)
    {
        return Err(format!(
            "A sheet with the name \"{title}\" already exists. Please enter another name."
        ));
    }
    Ok(())
}

fn add_sheet(ss: &mut Spreadsheet, p: &SheetProperties) -> Result<Json, String> {
    let id = match p.sheet_id {
        Some(id) if ss.sheet_index(id).is_some() => {
            return Err(format!("Sheet with id {id} already exists."))
        }
        Some(id) if id < 0 => return Err(format!("Invalid sheet id {id}.")),
        Some(id) => id,
        None => ss.fresh_sheet_id(),
    };
    let title = match &p.title {
        Some(t) => t.clone(),
        None => (1..)
            .map(|n| format!("Sheet{n}"))
            .find(|t| ss.sheet_by_title(t).is_none())
            .unwrap_or_default(),
    };
    check_title(ss, &title, None)?;
    let mut s = Sheet::new(id, title);
    s.hidden = p.hidden.unwrap_or(false);
    if let Some(g) = &p.grid_properties {
        if let Some(n) = g.row_count {
            s.row_count = nonneg(Some(n))?.max(1);
        }
        if let Some(n) = g.column_count {
            s.column_count = nonneg(Some(n))?.max(1);
        }
        s.frozen_row_count = nonneg(g.frozen_row_count)?;
        s.frozen_column_count = nonneg(g.frozen_column_count)?;
    }
    let at = match p.index {
        Some(i) => (i.max(0) as usize).min(ss.sheets.len()),
        None => ss.sheets.len(),
    };
    ss.sheets.insert(at, s);
    check_not_all_hidden(ss)?;
    Ok(api::sheet_properties(&ss.sheets[at], at))
}

fn check_not_all_hidden(ss: &Spreadsheet) -> Result<(), String> {
    if ss.sheets.iter().all(|s| s.hidden) {
        return Err("You can't hide all the sheets in a document.".into());
    }
    Ok(())
}

fn update_sheet_properties(
    ss: &mut Spreadsheet,
    p: &SheetProperties,
    mask: &[String],
) -> Result<(), String> {
    let i = sheet_of(ss, p.sheet_id)?;
    let all = mask.iter().any(|f| f == "*");
    let has = |f: &str| {
        all || mask
            .iter()
            .any(|m| m == f || m.starts_with(&format!("{f}.")))
    };
    let grid = |f: &str| {
        all || mask
            .iter()
            .any(|m| m == "gridProperties" || m == &format!("gridProperties.{f}"))
    };
    if has("title") {
        let title = p.title.clone().unwrap_or_default();
        check_title(ss, &title, Some(ss.sheets[i].id))?;
        ss.sheets[i].title = title;
    }
    if has("hidden") {
        ss.sheets[i].hidden = p.hidden.unwrap_or(false);
        check_not_all_hidden(ss)?;
    }
    let g = p.grid_properties.clone().unwrap_or_default();
    let s = &mut ss.sheets[i];
    if grid("rowCount") {
        let n = nonneg(g.row_count)?.max(1);
        if n < s.row_count {
            s.delete_rows(n, s.row_count);
            s.row_count = n;
        }
        s.row_count = n;
    }
    if grid("columnCount") {
        let n = nonneg(g.column_count)?.max(1);
        if n < s.column_count {
            s.delete_columns(n, s.column_count);
        }
        s.column_count = n;
    }
    if grid("frozenRowCount") {
        s.frozen_row_count = nonneg(g.frozen_row_count)?;
    }
    if grid("frozenColumnCount") {
        s.frozen_column_count = nonneg(g.frozen_column_count)?;
    }
    if has("index") {
        let to = (nonneg(p.index)? as usize).min(ss.sheets.len() - 1);
        let sheet = ss.sheets.remove(i);
        ss.sheets.insert(to, sheet);
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_validation_condition_takes_the_values_its_type_does() {
        use google_sheets4::api::{BooleanCondition, ConditionValue};
        let cond = |kind: &str, values: &[&str]| BooleanCondition {
            type_: Some(kind.into()),
            values: Some(
                values
                    .iter()
                    .map(|v| ConditionValue {
                        user_entered_value: Some(v.to_string()),
                        ..Default::default()
                    })
                    .collect(),
            ),
        };
        for (kind, values, ok) in [
            ("ONE_OF_LIST", &["a", "b"][..], true),
            ("ONE_OF_LIST", &[][..], false),
            ("ONE_OF_RANGE", &["='リリース'!A2:A"][..], true),
            ("ONE_OF_RANGE", &["'リリース'!A2:A"][..], false),
            ("NUMBER_BETWEEN", &["1", "9"][..], true),
            ("NUMBER_BETWEEN", &["1"][..], false),
            ("NUMBER_BETWEEN", &["1", "x"][..], false),
            ("DATE_IS_VALID", &[][..], true),
            ("DATE_IS_VALID", &["x"][..], false),
            ("BOOLEAN", &[][..], true),
        ] {
            let problem = condition_problem(Some(&cond(kind, values)));
            assert_eq!(problem.is_none(), ok, "{kind} {values:?}: {problem:?}");
        }
        assert!(
            condition_problem(None).is_some(),
            "a rule needs a condition"
        );
    }
    use super::*;

    fn ss() -> Spreadsheet {
        let mut ss = Spreadsheet::new("id", "t");
        let mut lease = Sheet::new(7, "_ワーカー");
        lease.set_value(0, 1, Some(Value::String("free".into())));
        ss.sheets.push(Sheet::new(0, "Sheet1"));
        ss.sheets.push(lease);
        ss
    }

    fn batch(ss: &mut Spreadsheet, requests: Json) -> Result<Json, ApiError> {
        let body = serde_json::to_vec(&json!({ "requests": requests })).unwrap_or_default();
        run(ss, &parse(&body)?, &Rules::default(), crate::DEFAULT_OWNER)
    }

    fn cas(from: &str, to: &str) -> Json {
        json!({ "findReplace": {
            "find": from, "replacement": to, "matchCase": true, "matchEntireCell": true,
            "searchByRegex": false, "includeFormulas": false,
            "range": { "sheetId": 7, "startRowIndex": 0, "endRowIndex": 1,
                       "startColumnIndex": 1, "endColumnIndex": 2 } } })
    }

    #[test]
    fn find_replace_is_a_compare_and_swap() {
        let mut s = ss();
        let won = batch(&mut s, json!([cas("free", "lease|a")])).unwrap_or_default();
        assert_eq!(
            won["replies"][0]["findReplace"]["occurrencesChanged"], 1,
            "{won}"
        );
        let lost = batch(&mut s, json!([cas("free", "lease|b")])).unwrap_or_default();
        assert_eq!(
            lost["replies"][0]["findReplace"],
            json!({}),
            "second CAS must miss"
        );
        assert_eq!(
            s.sheets[1].value(0, 1),
            Some(&Value::String("lease|a".into()))
        );
        let case = batch(&mut s, json!([cas("LEASE|A", "free")])).unwrap_or_default();
        assert_eq!(
            case["replies"][0]["findReplace"],
            json!({}),
            "matchCase must hold"
        );
    }

    #[test]
    fn invalid_request_applies_nothing() {
        let mut s = ss();
        let before = s.clone();
        let err = batch(
            &mut s,
            json!([cas("free", "taken"), { "deleteSheet": { "sheetId": 999 } }]),
        )
        .err();
        assert_eq!(
            err.map(|e| e.message).as_deref(),
            Some("Invalid requests[1].deleteSheet: No grid with id: 999")
        );
        assert_eq!(s, before, "a failed batch must change nothing");
    }

    #[test]
    fn find_replace_counts_rows_sheets_and_occurrences() {
        let mut s = ss();
        for (r, c, t) in [(0, 0, "a-a"), (0, 1, "a"), (1, 0, "b"), (2, 0, "A")] {
            s.sheets[0].set_value(r, c, Some(Value::String(t.into())));
        }
        s.sheets[0].set_value(3, 0, Some(Value::Formula("=\"a\"".into())));
        let got = batch(
            &mut s,
            json!([{ "findReplace": { "find": "a", "replacement": "z", "allSheets": true } }]),
        )
        .unwrap_or_default();
        assert_eq!(
            got["replies"][0]["findReplace"],
            json!({ "valuesChanged": 3, "rowsChanged": 2, "sheetsChanged": 1, "occurrencesChanged": 4 })
        );
        assert_eq!(s.sheets[0].value(0, 0), Some(&Value::String("z-z".into())));
        assert_eq!(
            s.sheets[0].value(3, 0),
            Some(&Value::Formula("=\"a\"".into()))
        );
    }

    #[test]
    fn hiding_columns_shows_in_column_metadata() {
        let mut s = ss();
        batch(
            &mut s,
            json!([{ "updateDimensionProperties": {
                "range": { "sheetId": 0, "dimension": "COLUMNS", "startIndex": 7, "endIndex": 10 },
                "properties": { "hiddenByUser": true }, "fields": "hiddenByUser" } }]),
        )
        .unwrap_or_else(|e| panic!("hide: {e}"));
        assert_eq!(s.sheets[0].hidden_columns, vec![7, 8, 9]);
        let unknown = batch(
            &mut s,
            json!([{ "mergeCells": { "range": { "sheetId": 0 } } }]),
        )
        .err();
        let msg = unknown.map(|e| e.message).unwrap_or_default();
        assert!(
            msg.starts_with("Invalid requests[0].mergeCells: the emulator does not implement"),
            "{msg}"
        );
    }

    #[test]
    fn sort_range_orders_numbers_text_and_blanks() {
        let mut s = ss();
        let vals = [
            Some(Value::String("b".into())),
            None,
            Some(Value::Number(2.0)),
            Some(Value::String("A".into())),
        ];
        for (r, v) in vals.into_iter().enumerate() {
            s.sheets[0].set_value(r as u32, 0, v);
            s.sheets[0].set_value(r as u32, 1, Some(Value::Number(r as f64)));
        }
        batch(
            &mut s,
            json!([{ "sortRange": { "range": { "sheetId": 0, "startRowIndex": 0, "endRowIndex": 4 },
                     "sortSpecs": [{ "dimensionIndex": 0, "sortOrder": "ASCENDING" }] } }]),
        )
        .unwrap_or_else(|e| panic!("sort: {e}"));
        let order: Vec<Option<Value>> = (0..4).map(|r| s.sheets[0].value(r, 1).cloned()).collect();
        let n = |x: f64| Some(Value::Number(x));
        assert_eq!(order, vec![n(2.0), n(3.0), n(0.0), n(1.0)]);
    }
}
