//! Row and column edits of `batchUpdate`: `insertDimension`, `deleteDimension`,
//! `moveDimension`, `sortRange` and `updateDimensionProperties`. Rows move as objects (see
//! `store.rs`), so their developer metadata goes wherever they go; a deleted row's metadata
//! is dropped after the request (`metadata::prune`).
//!
//! What Google documents: metadata on a row stays with it when rows are inserted or deleted
//! above it, and is deleted with the row
//! (https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata).
//! What users measured, not documented: a `sortRange` whose range covers every filled column
//! (from column A to the last column holding data) moves the row metadata with the rows; a
//! narrower sort reorders the values only and leaves the metadata at its index. That is
//! [`SortMetadata::WhenFullWidth`], the default; the other variants let a test pin either
//! extreme.

use google_sheets4::api::{
    DeleteDimensionRequest, DimensionRange, InsertDimensionRequest, MoveDimensionRequest,
    SortRangeRequest, UpdateDimensionPropertiesRequest,
};
use serde_json::{json, Value as Json};

use super::formula::{self, Eff};
use super::request::{fields, grid_range, need, nonneg, sheet_of};
use super::store::{Bounds, Cell, Spreadsheet};

/// Whether `sortRange` moves the developer metadata of the sorted rows with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortMetadata {
    /// Only when the range spans from column A to the last column holding data (measured).
    #[default]
    WhenFullWidth,
    /// Always, like a row object moved whole.
    Always,
    /// Never: values are reordered, metadata stays at its row index.
    Never,
}

/// A `DimensionRange` as (sheet index, is-rows, start, end); `endIndex` is required.
pub fn dimension(ss: &Spreadsheet, d: &DimensionRange) -> Result<(usize, bool, u32, u32), String> {
    let sheet = sheet_of(ss, d.sheet_id)?;
    let rows = match d.dimension.as_deref() {
        Some("ROWS") => true,
        Some("COLUMNS") => false,
        other => return Err(format!("dimension must be ROWS or COLUMNS, got {other:?}")),
    };
    let start = nonneg(d.start_index)?;
    let end = match d.end_index {
        Some(e) => nonneg(Some(e))?,
        None => return Err("endIndex is required".into()),
    };
    if end <= start {
        return Err(format!(
            "endIndex ({end}) must be greater than startIndex ({start})"
        ));
    }
    Ok((sheet, rows, start, end))
}

fn noun(rows: bool) -> &'static str {
    if rows {
        "rows"
    } else {
        "columns"
    }
}

pub fn insert(ss: &mut Spreadsheet, d: &InsertDimensionRequest) -> Result<Json, String> {
    let (sheet, rows, start, end) = dimension(ss, need(&d.range)?)?;
    let s = &mut ss.sheets[sheet];
    let limit = if rows { s.row_count } else { s.column_count };
    if start > limit {
        return Err(format!(
            "startIndex ({start}) must be less than or equal to the number of {} ({limit}).",
            noun(rows)
        ));
    }
    if d.inherit_from_before == Some(true) && start == 0 {
        return Err("Cannot inherit from before when inserting at index 0.".into());
    }
    if rows {
        // The new rows take the format of the row before them, or else of the row after.
        let like = if d.inherit_from_before == Some(true) {
            start - 1
        } else {
            start
        };
        s.insert_rows_like(start, end - start, Some(like));
    } else {
        s.insert_columns(start, end - start);
    }
    Ok(json!({}))
}

pub fn delete(ss: &mut Spreadsheet, d: &DeleteDimensionRequest) -> Result<Json, String> {
    let (sheet, rows, start, end) = dimension(ss, need(&d.range)?)?;
    let s = &mut ss.sheets[sheet];
    let limit = if rows { s.row_count } else { s.column_count };
    let end = end.min(limit);
    if start >= end {
        return Err(format!(
            "Invalid range: startIndex {start} is beyond the sheet."
        ));
    }
    if start == 0 && end == limit {
        return Err(format!(
            "You can't delete all the {} on the sheet.",
            noun(rows)
        ));
    }
    if rows {
        s.delete_rows(start, end);
    } else {
        s.delete_columns(start, end);
    }
    s.trim();
    Ok(json!({}))
}

/// `moveDimension`: `destinationIndex` counts "based on the coordinates *before* the source
/// data is removed from the grid"; a destination inside the source (or at its end) leaves
/// everything where it is.
pub fn move_dimension(ss: &mut Spreadsheet, m: &MoveDimensionRequest) -> Result<Json, String> {
    let (sheet, rows, start, end) = dimension(ss, need(&m.source)?)?;
    let dest = match m.destination_index {
        Some(d) => nonneg(Some(d))?,
        None => return Err("destinationIndex is required".into()),
    };
    let s = &mut ss.sheets[sheet];
    let limit = if rows { s.row_count } else { s.column_count };
    if end > limit {
        return Err(format!(
            "endIndex ({end}) is beyond the sheet ({limit} {}).",
            noun(rows)
        ));
    }
    if dest > limit {
        return Err(format!(
            "destinationIndex ({dest}) is beyond the sheet ({limit} {}).",
            noun(rows)
        ));
    }
    if rows {
        s.move_rows(start, end, dest);
    } else {
        s.move_columns(start, end, dest);
    }
    Ok(json!({}))
}

/// `updateDimensionProperties`: only `hiddenByUser` of columns is modelled; row properties
/// and pixel sizes are accepted and ignored (presentation only).
pub fn update_properties(
    ss: &mut Spreadsheet,
    u: &UpdateDimensionPropertiesRequest,
) -> Result<Json, String> {
    let mask = fields(u.fields.as_ref())?;
    let (sheet, rows, start, end) = dimension(ss, need(&u.range)?)?;
    let hide = u
        .properties
        .as_ref()
        .and_then(|p| p.hidden_by_user)
        .unwrap_or(false);
    let touches_hidden = mask.iter().any(|f| f == "*" || f == "hiddenByUser");
    let s = &mut ss.sheets[sheet];
    let limit = if rows { s.row_count } else { s.column_count };
    if end > limit {
        return Err(format!("endIndex ({end}) is beyond the sheet ({limit})."));
    }
    if !rows && touches_hidden {
        s.hidden_columns.retain(|c| !(start..end).contains(c));
        if hide {
            s.hidden_columns.extend(start..end);
            s.hidden_columns.sort_unstable();
        }
    }
    Ok(json!({}))
}

pub fn sort_range(
    ss: &mut Spreadsheet,
    sr: &SortRangeRequest,
    rule: SortMetadata,
) -> Result<Json, String> {
    let b = grid_range(ss, need(&sr.range)?)?;
    let mut specs = Vec::new();
    for spec in sr.sort_specs.as_deref().unwrap_or_default() {
        let col = nonneg(spec.dimension_index)?;
        if col < b.c0 || col >= b.c1 {
            return Err(format!("sort column {col} is outside the sorted range."));
        }
        let desc = match spec.sort_order.as_deref() {
            None | Some("ASCENDING") | Some("SORT_ORDER_UNSPECIFIED") => false,
            Some("DESCENDING") => true,
            Some(other) => return Err(format!("unknown sortOrder {other}")),
        };
        specs.push((col, desc));
    }
    let move_metadata = match rule {
        SortMetadata::Always => true,
        SortMetadata::Never => false,
        SortMetadata::WhenFullWidth => covers_filled_columns(ss, &b),
    };
    sort_rows(ss, &b, &specs, move_metadata);
    Ok(json!({}))
}

/// Whether a block spans from column A to the last column of its sheet holding a value.
pub fn covers_filled_columns(ss: &Spreadsheet, b: &Bounds) -> bool {
    let s = &ss.sheets[b.sheet];
    let last_filled = s
        .rows
        .iter()
        .filter_map(|row| row.iter().rposition(|c| c.value.is_some()))
        .max();
    b.c0 == 0 && last_filled.is_none_or(|c| (c as u32) < b.c1)
}

/// Sorts the rows of a block by the sort specs; cells outside the block's columns stay.
/// Assumed order (Google's, as far as sheetq relies on it): numbers, then text
/// (case-insensitive), then booleans, then errors; empty cells always last; stable. With
/// `move_metadata` the rows' metadata ids follow the same permutation.
fn sort_rows(ss: &mut Spreadsheet, b: &Bounds, specs: &[(u32, bool)], move_metadata: bool) {
    let end = b.r1.min(ss.sheets[b.sheet].rows.len() as u32);
    if end <= b.r0 {
        return;
    }
    type Key = Vec<Option<(u8, f64, String)>>;
    let s = &ss.sheets[b.sheet];
    let keys: Vec<Key> = (b.r0..end)
        .map(|r| {
            specs
                .iter()
                .map(|(c, _)| {
                    s.value(r, *c)
                        .map(|v| match formula::effective(ss, b.sheet, v) {
                            Eff::Number(n) => (0, n, String::new()),
                            Eff::String(t) => (1, 0.0, t.to_lowercase()),
                            Eff::Bool(x) => (2, f64::from(u8::from(x)), String::new()),
                            Eff::Error(e) => (3, 0.0, e),
                        })
                })
                .collect()
        })
        .collect();
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&i, &j| {
        let (a, z) = (&keys[i], &keys[j]);
        for (k, (_, desc)) in specs.iter().enumerate() {
            let ord = match (&a[k], &z[k]) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(x), Some(y)) => {
                    let o =
                        x.0.cmp(&y.0)
                            .then(x.1.partial_cmp(&y.1).unwrap_or(std::cmp::Ordering::Equal))
                            .then(x.2.cmp(&y.2));
                    if *desc {
                        o.reverse()
                    } else {
                        o
                    }
                }
            };
            if ord != std::cmp::Ordering::Equal {
                return ord;
            }
        }
        std::cmp::Ordering::Equal
    });
    let blocks: Vec<Vec<Cell>> = (b.r0..end)
        .map(|r| {
            (b.c0..b.c1)
                .map(|c| s.cell(r, c).cloned().unwrap_or_default())
                .collect()
        })
        .collect();
    let tags: Vec<Vec<i32>> = (b.r0..end)
        .map(|r| s.rows[r as usize].meta.clone())
        .collect();
    let s = &mut ss.sheets[b.sheet];
    for (i, &from) in order.iter().enumerate() {
        let r = b.r0 + i as u32;
        for (j, cell) in blocks[from].iter().enumerate() {
            let c = b.c0 + j as u32;
            if cell.is_blank() && s.cell(r, c).is_none() {
                continue;
            }
            *s.cell_mut(r, c) = cell.clone();
        }
        if move_metadata {
            s.row_mut(r).meta = tags[from].clone();
        }
    }
    s.trim();
}
