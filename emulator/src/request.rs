//! The parts of a `batchUpdate` request every operation reads, checked as Google checks
//! them: required fields, non-negative indexes, sheet ids, grid ranges within the grid and
//! field masks. Below every request module (`batch`, `dimension`, `paste`, `find_replace`,
//! `data_filter`), which import it and not each other.

use google_sheets4::api::GridRange;

use super::store::{range_a1, Bounds, Sheet, Spreadsheet};

pub(super) fn need<T>(v: &Option<T>) -> Result<&T, String> {
    v.as_ref()
        .ok_or_else(|| "a required field is missing".to_string())
}

pub(super) fn nonneg(v: Option<i32>) -> Result<u32, String> {
    match v.unwrap_or(0) {
        n if n < 0 => Err(format!("index {n} must not be negative")),
        n => Ok(n as u32),
    }
}

pub(super) fn sheet_of(ss: &Spreadsheet, id: Option<i32>) -> Result<usize, String> {
    let id = id.unwrap_or(0);
    ss.sheet_index(id)
        .ok_or_else(|| format!("No grid with id: {id}"))
}

/// A `GridRange` as bounds: unset sides run to the grid's edge; a side past the grid is the
/// error Google gives, `Range ('S'!A1001) exceeds grid limits...`.
pub(super) fn grid_range(ss: &Spreadsheet, g: &GridRange) -> Result<Bounds, String> {
    let sheet = sheet_of(ss, g.sheet_id)?;
    let s = &ss.sheets[sheet];
    let b = Bounds {
        sheet,
        r0: nonneg(g.start_row_index)?,
        r1: match g.end_row_index {
            Some(e) => nonneg(Some(e))?,
            None => s.row_count,
        },
        c0: nonneg(g.start_column_index)?,
        c1: match g.end_column_index {
            Some(e) => nonneg(Some(e))?,
            None => s.column_count,
        },
    };
    if b.r1 < b.r0 || b.c1 < b.c0 {
        return Err("the range's end is before its start".into());
    }
    if b.r1 > s.row_count || b.c1 > s.column_count {
        return Err(exceeds(s, &b));
    }
    Ok(b)
}

pub(super) fn exceeds(s: &Sheet, b: &Bounds) -> String {
    format!(
        "Range ({}) exceeds grid limits. Max rows: {}, max columns: {}",
        range_a1(&s.title, b),
        s.row_count,
        s.column_count
    )
}

/// Parses a field mask for cells or sheet properties. `*` means every field. The emulator
/// ignores fields it does not model (e.g. `note`, `userEnteredFormat.backgroundColor`).
pub(super) fn fields(
    mask: Option<&google_sheets4::common::FieldMask>,
) -> Result<Vec<String>, String> {
    let text = mask.map(|m| m.to_string()).unwrap_or_default();
    let parts: Vec<String> = text
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() {
        return Err("At least one field must be specified in 'fields'.".into());
    }
    Ok(parts)
}
