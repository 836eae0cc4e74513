//! `findReplace`, the request the daemon's lease and claim tripwires are built on (docs/design.md §3):
//! limited to one cell with `matchEntireCell`, `matchCase` and no regex, it is a
//! compare-and-swap whose reply counts say whether it swapped.

use std::collections::BTreeSet;

use google_sheets4::api::FindReplaceRequest;
use regex::{NoExpand, Regex, RegexBuilder};
use serde_json::{json, Value as Json};

use super::formula;
use super::request::{grid_range, sheet_of};
use super::store::{Bounds, Spreadsheet, Value};
use super::values;

/// `findReplace`, the daemon's compare-and-swap. Per cell, the text searched is a string
/// cell's text, a formula's text (only with `includeFormulas`; otherwise formula cells are
/// skipped, as documented), or a number's/boolean's formatted value. Counts are exact:
/// `occurrencesChanged` counts matches, `valuesChanged`/`formulasChanged` cells,
/// `rowsChanged` and `sheetsChanged` distinct rows and sheets. Assumptions where Google does
/// not say: a match counts even if the replacement equals the found text; a string cell stays
/// a string after replacement, while a number or boolean is re-read as if typed.
/// https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/request#findreplacerequest
pub fn find_replace(ss: &mut Spreadsheet, f: &FindReplaceRequest) -> Result<Json, String> {
    let plan = plan(ss, f)?;
    let mut changed = BTreeSet::new();
    for (sheet, r, c, v) in plan.changes {
        ss.sheets[sheet].cell_mut(r, c).value = v;
        changed.insert(sheet);
    }
    for sheet in changed {
        ss.sheets[sheet].trim();
    }
    let mut m = serde_json::Map::new();
    for (k, v) in [
        ("valuesChanged", plan.values_changed),
        ("formulasChanged", plan.formulas),
        ("rowsChanged", plan.rows),
        ("sheetsChanged", plan.sheets),
        ("occurrencesChanged", plan.occurrences),
    ] {
        if v > 0 {
            m.insert(k.into(), json!(v));
        }
    }
    Ok(json!({ "findReplace": m }))
}

/// The cells (sheet index, row, column) a `findReplace` would change, as it sees the
/// spreadsheet now: every matched cell, even one whose replacement equals what is there.
pub fn cells(ss: &Spreadsheet, f: &FindReplaceRequest) -> Result<Vec<(usize, u32, u32)>, String> {
    Ok(plan(ss, f)?
        .changes
        .into_iter()
        .map(|(sheet, r, c, _)| (sheet, r, c))
        .collect())
}

/// What a `findReplace` does: each matched cell's new value, and the reply's counts.
struct Plan {
    changes: Vec<(usize, u32, u32, Option<Value>)>,
    occurrences: u32,
    values_changed: u32,
    formulas: u32,
    rows: u32,
    sheets: u32,
}

fn plan(ss: &Spreadsheet, f: &FindReplaceRequest) -> Result<Plan, String> {
    let find = f.find.clone().unwrap_or_default();
    if find.is_empty() {
        return Err("find must not be empty.".into());
    }
    let replacement = f.replacement.clone().unwrap_or_default();
    let scopes = [
        f.range.is_some(),
        f.sheet_id.is_some(),
        f.all_sheets == Some(true),
    ];
    if scopes.iter().filter(|s| **s).count() != 1 {
        return Err("exactly one of range, sheetId or allSheets must be set.".into());
    }
    let pattern = if f.search_by_regex == Some(true) {
        find.clone()
    } else {
        regex::escape(&find)
    };
    let pattern = if f.match_entire_cell == Some(true) {
        format!("^(?:{pattern})$")
    } else {
        pattern
    };
    let re: Regex = RegexBuilder::new(&pattern)
        .case_insensitive(f.match_case != Some(true))
        .build()
        .map_err(|e| format!("Invalid regular expression: {e}"))?;
    let blocks: Vec<Bounds> = if let Some(g) = &f.range {
        vec![grid_range(ss, g)?]
    } else if let Some(id) = f.sheet_id {
        let i = sheet_of(ss, Some(id))?;
        vec![ss.whole_sheet(i)]
    } else {
        (0..ss.sheets.len()).map(|i| ss.whole_sheet(i)).collect()
    };
    let regex_replacement = f.search_by_regex == Some(true);
    let include_formulas = f.include_formulas == Some(true);
    let (mut occurrences, mut values_changed, mut formulas) = (0u32, 0u32, 0u32);
    let mut rows = BTreeSet::new();
    let mut sheets = BTreeSet::new();
    let mut changes = Vec::new();
    for b in blocks {
        let s = &ss.sheets[b.sheet];
        let end = b.r1.min(s.rows.len() as u32);
        for r in b.r0..end {
            let row = &s.rows[r as usize];
            for c in b.c0..b.c1.min(row.len() as u32) {
                let cell = &row[c as usize];
                let Some(v) = &cell.value else { continue };
                let text = match v {
                    Value::Formula(t) if include_formulas => t.clone(),
                    Value::Formula(_) => continue,
                    Value::String(t) => t.clone(),
                    Value::Number(_) | Value::Bool(_) => values::format_value(
                        &formula::effective(ss, b.sheet, v),
                        cell.number_format.as_deref(),
                    ),
                };
                let n = re.find_iter(&text).count() as u32;
                if n == 0 {
                    continue;
                }
                let new_text = if regex_replacement {
                    re.replace_all(&text, replacement.as_str()).into_owned()
                } else {
                    re.replace_all(&text, NoExpand(&replacement)).into_owned()
                };
                let new_value = match v {
                    Value::Formula(_) => {
                        formulas += 1;
                        if new_text.starts_with('=') {
                            Some(Value::Formula(new_text))
                        } else {
                            Some(values::parse_user_entered(&new_text).0)
                        }
                    }
                    Value::String(_) => {
                        values_changed += 1;
                        (!new_text.is_empty()).then_some(Value::String(new_text))
                    }
                    _ => {
                        values_changed += 1;
                        (!new_text.is_empty()).then(|| values::parse_user_entered(&new_text).0)
                    }
                };
                occurrences += n;
                rows.insert((b.sheet, r));
                sheets.insert(b.sheet);
                changes.push((b.sheet, r, c, new_value));
            }
        }
    }
    Ok(Plan {
        changes,
        occurrences,
        values_changed,
        formulas,
        rows: rows.len() as u32,
        sheets: sheets.len() as u32,
    })
}
