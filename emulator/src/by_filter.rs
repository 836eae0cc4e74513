//! The `spreadsheets.values.*ByDataFilter` methods: `batchGetByDataFilter`,
//! `batchUpdateByDataFilter` and `batchClearByDataFilter`. Each filter is resolved (see
//! `data_filter.rs`) against the spreadsheet as it is when the request is applied, so a
//! metadata lookup finds its row wherever a person has moved it meanwhile.
//!
//! Reference: https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.values/batchGetByDataFilter,
//! .../batchUpdateByDataFilter and .../batchClearByDataFilter; `DataFilterValueRange`:
//! "If the provided values exceed any of the ranges matched by the data filter then the
//! request fails. If the provided values are less than the matched ranges only the specified
//! values are written, existing values in the matched ranges remain unaffected", and "if
//! more than one range is matched by the specified DataFilter the specified values are
//! applied to all of those ranges". A JSON `null` value leaves its cell unchanged; `""`
//! clears it (`ValueRange.values`).
//!
//! Filters matching nothing: for reads, Google omits them from `valueRanges` (a
//! `MatchedValueRange` exists only for a range that matched). For writes and clears Google
//! does not document it; the emulator chooses the strict answer and fails the whole request
//! with 400 `INVALID_ARGUMENT` ("... matched no ranges"), so a writer never mistakes a write
//! that went nowhere for a success.
//!
//! Every method works on a copy and keeps it only when everything succeeded: all or nothing.
//! The writes pass the protection guard (`protection.rs`) with every matched block before
//! any is written.
//!
//! A metadata lookup resolves among the entries the caller sees (`metadata::Seer`): a
//! `PROJECT` entry of another developer project matches nothing, so its row is neither read,
//! written nor cleared through it.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value as Json};

use super::api::{self, Major, RangeView};
use super::data_filter;
use super::deviation::{Deviation, Rules};
use super::error::ApiError;
use super::metadata::{self, Seer};
use super::protection::{self, Touch};
use super::store::{Bounds, Spreadsheet};
use super::values::{self, Input, Render};

/// `A1` with `$` anchors, as Google names a matched range in errors: `Sheet2!$A$1:$C$1`.
fn absolute_a1(ss: &Spreadsheet, b: &Bounds) -> String {
    let col = crate::a1::column_letters;
    format!(
        "{}!${}${}:${}${}",
        super::store::reply_title(&ss.sheets[b.sheet].title),
        col(b.c0),
        b.r0 + 1,
        col(b.c1.max(b.c0 + 1) - 1),
        b.r1.max(b.r0 + 1)
    )
}

/// `values.batchGetByDataFilter` by `user`: one `MatchedValueRange` per distinct matched
/// range, in the order first matched, listing every filter that matched it.
pub fn batch_get(ss: &Spreadsheet, body: &Json, user: &str) -> Result<Json, ApiError> {
    let filters = data_filter::parse_filters(body.get("dataFilters"), "dataFilters")?;
    let major = Major::parse(body.get("majorDimension").and_then(Json::as_str))?;
    let render = Render::parse(
        body.get("valueRenderOption").and_then(Json::as_str),
        body.get("dateTimeRenderOption").and_then(Json::as_str),
    )?;
    let seen = metadata::locate_as(ss, &Seer::caller(user));
    let mut matched: Vec<(Bounds, Vec<Json>)> = Vec::new();
    for (i, (raw, f)) in filters.iter().enumerate() {
        let ranges = data_filter::ranges(ss, f, &seen)
            .map_err(|m| ApiError::invalid(format!("Invalid dataFilters[{i}]: {m}")))?;
        for b in ranges {
            match matched.iter_mut().find(|(m, _)| *m == b) {
                Some((_, fs)) => fs.push(raw.clone()),
                None => matched.push((b, vec![raw.clone()])),
            }
        }
    }
    let mut value_ranges = Vec::with_capacity(matched.len());
    for (b, fs) in matched {
        let view = serde_json::to_value(RangeView::of_bounds(ss, b, render, major))
            .map_err(|e| ApiError::new(500, e.to_string()))?;
        value_ranges.push(json!({ "valueRange": view, "dataFilters": fs }));
    }
    let mut m = Map::new();
    m.insert("spreadsheetId".into(), json!(ss.id));
    if !value_ranges.is_empty() {
        m.insert("valueRanges".into(), Json::Array(value_ranges));
    }
    Ok(Json::Object(m))
}

fn no_match(what: &str, i: usize) -> ApiError {
    ApiError::invalid(format!(
        "Invalid {what}[{i}]: the data filter matched no ranges in the spreadsheet."
    ))
}

/// `values.batchUpdateByDataFilter` by `user`.
pub fn batch_update(
    ss: &mut Spreadsheet,
    body: &Json,
    rules: &Rules,
    user: &str,
) -> Result<Json, ApiError> {
    let input = Input::parse(body.get("valueInputOption").and_then(Json::as_str))?;
    let echo = if body.get("includeValuesInResponse").and_then(Json::as_bool) == Some(true) {
        Some(Render::parse(
            body.get("responseValueRenderOption").and_then(Json::as_str),
            body.get("responseDateTimeRenderOption")
                .and_then(Json::as_str),
        )?)
    } else {
        None
    };
    let data = match body.get("data") {
        Some(Json::Array(d)) => d.clone(),
        _ => Vec::new(),
    };
    let seen = metadata::locate_as(ss, &Seer::caller(user));
    let mut plan = Vec::new();
    for (i, entry) in data.iter().enumerate() {
        let raw = entry.get("dataFilter").ok_or_else(|| {
            ApiError::invalid(format!("Invalid data[{i}]: dataFilter is required."))
        })?;
        let (echo_filter, f) = data_filter::parse_one(raw)
            .map_err(|m| ApiError::invalid(format!("Invalid data[{i}].dataFilter: {m}")))?;
        let mut rows = api::rows_of(entry)?;
        if rules.deviates(Deviation::FilterWriteNullClears) {
            for v in rows.iter_mut().flatten().filter(|v| v.is_null()) {
                *v = json!("");
            }
        }
        for row in &rows {
            for v in row {
                values::input_value(v, input)?;
            }
        }
        let ranges = data_filter::ranges(ss, &f, &seen)
            .map_err(|m| ApiError::invalid(format!("Invalid data[{i}].dataFilter: {m}")))?;
        if ranges.is_empty() {
            if rules.deviates(Deviation::FilterMissSkipped) {
                continue;
            }
            return Err(no_match("dataFilterValueRange", i));
        }
        for b in ranges {
            let fits_rows = rows.len() as u32 <= b.rows();
            let too_wide = rows.iter().position(|r| r.len() as u32 > b.cols());
            if !fits_rows || too_wide.is_some() {
                let what = if fits_rows {
                    format!(
                        "columns cannot fit the data described in data.values[{}]",
                        too_wide.unwrap_or(0)
                    )
                } else {
                    "rows cannot fit the data described in data.values".to_string()
                };
                return Err(ApiError::invalid(format!(
                    "Invalid dataFilterValueRange[{i}]: dataFilterValueRange.dataFilter matched \
                     range {} whose {what}",
                    absolute_a1(ss, &b)
                )));
            }
            plan.push((echo_filter.clone(), b, rows.clone()));
        }
    }
    let touched: Vec<Touch> = plan
        .iter()
        .map(|(_, b, rows)| {
            let width = rows.iter().map(Vec::len).max().unwrap_or(0) as u32;
            Touch::Cells(Bounds {
                r1: b.r0 + rows.len() as u32,
                c1: b.c0 + width,
                ..*b
            })
        })
        .collect();
    protection::guard(ss, user, &touched)?;
    let mut work = ss.clone();
    let (mut t_rows, mut t_cols, mut t_cells) = (0, 0, 0);
    let mut sheets = BTreeSet::new();
    let mut responses = Vec::with_capacity(plan.len());
    for (filter, b, rows) in &plan {
        let w = api::write_rows(&mut work, b.sheet, b.r0, b.c0, rows, input)?;
        t_rows += w.rows;
        t_cols += w.cols;
        t_cells += w.cells;
        if w.cells > 0 {
            sheets.insert(b.sheet);
        }
        responses.push((filter, w));
    }
    let mut out = Vec::with_capacity(responses.len());
    for (filter, w) in responses {
        let mut m = Map::new();
        m.insert("updatedRange".into(), json!(w.range));
        if w.cells > 0 {
            m.insert("updatedRows".into(), json!(w.rows));
            m.insert("updatedColumns".into(), json!(w.cols));
            m.insert("updatedCells".into(), json!(w.cells));
        }
        m.insert("dataFilter".into(), filter.clone());
        if let Some(render) = echo {
            m.insert(
                "updatedData".into(),
                api::read_range(&work, &w.range, render, Major::Rows)?,
            );
        }
        out.push(Json::Object(m));
    }
    let mut m = Map::new();
    m.insert("spreadsheetId".into(), json!(work.id));
    if t_cells > 0 {
        m.insert("totalUpdatedRows".into(), json!(t_rows));
        m.insert("totalUpdatedColumns".into(), json!(t_cols));
        m.insert("totalUpdatedCells".into(), json!(t_cells));
        m.insert("totalUpdatedSheets".into(), json!(sheets.len()));
    }
    if !out.is_empty() {
        m.insert("responses".into(), Json::Array(out));
    }
    *ss = work;
    Ok(Json::Object(m))
}

/// `values.batchClearByDataFilter` by `user`: values go, formats and validation stay.
pub fn batch_clear(ss: &mut Spreadsheet, body: &Json, user: &str) -> Result<Json, ApiError> {
    let filters = data_filter::parse_filters(body.get("dataFilters"), "dataFilters")?;
    let seen = metadata::locate_as(ss, &Seer::caller(user));
    let mut blocks = Vec::new();
    for (i, (_, f)) in filters.iter().enumerate() {
        let ranges = data_filter::ranges(ss, f, &seen)
            .map_err(|m| ApiError::invalid(format!("Invalid dataFilters[{i}]: {m}")))?;
        if ranges.is_empty() {
            return Err(no_match("dataFilters", i));
        }
        blocks.extend(ranges);
    }
    let touched: Vec<Touch> = blocks.iter().copied().map(Touch::Cells).collect();
    protection::guard(ss, user, &touched)?;
    let mut cleared = Vec::with_capacity(blocks.len());
    for b in &blocks {
        ss.sheets[b.sheet].clear_values(b);
        cleared.push(super::store::range_a1(&ss.sheets[b.sheet].title, b));
    }
    Ok(json!({ "spreadsheetId": ss.id, "clearedRanges": cleared }))
}
