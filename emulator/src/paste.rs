//! `cutPaste` and `copyPaste` of `batchUpdate`: cell contents (values, number formats, data
//! validation) move or are copied; rows do not, so developer metadata stays on the rows it
//! was on (users measured that a cut-and-paste leaves row metadata at the old index;
//! docs/design.md §4).
//!
//! Reference: https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/request#cutpasterequest
//! and #copypasterequest. Paste types: `PASTE_NORMAL` and `PASTE_NO_BORDERS` paste whole
//! cells; `PASTE_VALUES` "the values ONLY without formats, formulas" (a formula pastes as
//! its current value); `PASTE_FORMULA` the values and formulas as entered; `PASTE_FORMAT`
//! "the format and data validation only"; `PASTE_DATA_VALIDATION` the rule only;
//! `PASTE_CONDITIONAL_FORMATTING` nothing the emulator models. Not modelled: formula
//! references are not adjusted to the new position.

use google_sheets4::api::{CopyPasteRequest, CutPasteRequest};
use serde_json::{json, Value as Json};

use super::formula::{self, Eff};
use super::request::{exceeds, grid_range, need, nonneg, sheet_of};
use super::store::{Bounds, Cell, Spreadsheet, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PasteType {
    Normal,
    Values,
    Formula,
    Format,
    DataValidation,
    Nothing,
}

impl PasteType {
    fn parse(s: Option<&str>) -> Result<Self, String> {
        Ok(match s {
            None | Some("PASTE_NORMAL") | Some("PASTE_NO_BORDERS") => PasteType::Normal,
            Some("PASTE_VALUES") => PasteType::Values,
            Some("PASTE_FORMULA") => PasteType::Formula,
            Some("PASTE_FORMAT") => PasteType::Format,
            Some("PASTE_DATA_VALIDATION") => PasteType::DataValidation,
            Some("PASTE_CONDITIONAL_FORMATTING") => PasteType::Nothing,
            Some(other) => {
                return Err(format!(
                    "Invalid value at 'paste_type' (type.googleapis.com/google.apps.sheets.v4.PasteType), \"{other}\""
                ))
            }
        })
    }
}

/// The source block's cells, row-major, as they are before anything is changed. For
/// `PASTE_VALUES` a formula is replaced by its current value.
fn snapshot(ss: &Spreadsheet, b: &Bounds, t: PasteType) -> Vec<Vec<Cell>> {
    let s = &ss.sheets[b.sheet];
    (b.r0..b.r1)
        .map(|r| {
            (b.c0..b.c1)
                .map(|c| {
                    let mut cell = s.cell(r, c).cloned().unwrap_or_default();
                    if t == PasteType::Values {
                        if let Some(Value::Formula(_)) = &cell.value {
                            cell.value = cell.value.as_ref().map(|v| {
                                match formula::effective(ss, b.sheet, v) {
                                    Eff::Number(n) => Value::Number(n),
                                    Eff::String(t) => Value::String(t),
                                    Eff::Bool(x) => Value::Bool(x),
                                    Eff::Error(e) => Value::String(e),
                                }
                            });
                        }
                    }
                    cell
                })
                .collect()
        })
        .collect()
}

fn paste_cell(target: &mut Cell, src: &Cell, t: PasteType) {
    match t {
        PasteType::Normal => *target = src.clone(),
        PasteType::Values | PasteType::Formula => target.value = src.value.clone(),
        PasteType::Format => {
            target.number_format = src.number_format.clone();
            target.validation = src.validation.clone();
        }
        PasteType::DataValidation => target.validation = src.validation.clone(),
        PasteType::Nothing => {}
    }
}

/// Writes `cells` with their top-left at (`r0`, `c0`) of sheet `sheet`; the block must fit
/// the grid.
fn put(
    ss: &mut Spreadsheet,
    sheet: usize,
    r0: u32,
    c0: u32,
    cells: &[Vec<Cell>],
    t: PasteType,
) -> Result<(), String> {
    let h = cells.len() as u32;
    let w = cells.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let s = &mut ss.sheets[sheet];
    let block = Bounds {
        sheet,
        r0,
        r1: r0 + h,
        c0,
        c1: c0 + w,
    };
    if block.r1 > s.row_count || block.c1 > s.column_count {
        return Err(exceeds(s, &block));
    }
    for (i, row) in cells.iter().enumerate() {
        for (j, src) in row.iter().enumerate() {
            let (r, c) = (r0 + i as u32, c0 + j as u32);
            if src.is_blank() && s.cell(r, c).is_none() {
                continue;
            }
            paste_cell(s.cell_mut(r, c), src, t);
        }
    }
    s.trim();
    Ok(())
}

/// `cutPaste`: "All the source data will be cut, regardless of what is pasted."
pub fn cut(ss: &mut Spreadsheet, req: &CutPasteRequest) -> Result<Json, String> {
    let t = PasteType::parse(req.paste_type.as_deref())?;
    let src = grid_range(ss, need(&req.source)?)?;
    let dest = need(&req.destination)?;
    let sheet = sheet_of(ss, dest.sheet_id)?;
    let (r0, c0) = (nonneg(dest.row_index)?, nonneg(dest.column_index)?);
    let cells = snapshot(ss, &src, t);
    let s = &mut ss.sheets[src.sheet];
    for r in src.r0..src.r1.min(s.rows.len() as u32) {
        for c in src.c0..src.c1 {
            if s.cell(r, c).is_some() {
                *s.cell_mut(r, c) = Cell::default();
            }
        }
    }
    s.trim();
    put(ss, sheet, r0, c0, &cells, t)?;
    Ok(json!({}))
}

/// The blocks a `cutPaste` changes: its source, and the block of the same size at its
/// destination.
pub fn cut_blocks(ss: &Spreadsheet, req: &CutPasteRequest) -> Result<[Bounds; 2], String> {
    let src = grid_range(ss, need(&req.source)?)?;
    let dest = need(&req.destination)?;
    let sheet = sheet_of(ss, dest.sheet_id)?;
    let (r0, c0) = (nonneg(dest.row_index)?, nonneg(dest.column_index)?);
    let to = Bounds {
        sheet,
        r0,
        r1: r0 + src.rows(),
        c0,
        c1: c0 + src.cols(),
    };
    Ok([src, to])
}

/// The block a `copyPaste` writes: the source's shape (turned with `TRANSPOSE`), repeated
/// to fill a destination that spans a multiple of it; `None` for an empty source.
pub fn copy_block(ss: &Spreadsheet, req: &CopyPasteRequest) -> Result<Option<Bounds>, String> {
    let src = grid_range(ss, need(&req.source)?)?;
    let dest = grid_range(ss, need(&req.destination)?)?;
    let (h, w) = if transposed(req)? {
        (src.cols(), src.rows())
    } else {
        (src.rows(), src.cols())
    };
    if h == 0 || w == 0 {
        return Ok(None);
    }
    Ok(Some(Bounds {
        sheet: dest.sheet,
        r0: dest.r0,
        r1: dest.r0 + h * repeats(dest.rows(), h),
        c0: dest.c0,
        c1: dest.c0 + w * repeats(dest.cols(), w),
    }))
}

fn transposed(req: &CopyPasteRequest) -> Result<bool, String> {
    match req.paste_orientation.as_deref() {
        None | Some("NORMAL") => Ok(false),
        Some("TRANSPOSE") => Ok(true),
        Some(other) => Err(format!(
            "Invalid value at 'paste_orientation' (type.googleapis.com/google.apps.sheets.v4.PasteOrientation), \"{other}\""
        )),
    }
}

/// How many times a source `unit` long fits a destination `span` long: a whole multiple
/// repeats it, anything else takes it once.
fn repeats(span: u32, unit: u32) -> u32 {
    if span >= unit && span.is_multiple_of(unit) {
        span / unit
    } else {
        1
    }
}

/// `copyPaste`: a destination that spans a multiple of the source's height or width repeats
/// the data to fill it; a smaller one still receives the whole source, as documented.
pub fn copy(ss: &mut Spreadsheet, req: &CopyPasteRequest) -> Result<Json, String> {
    let t = PasteType::parse(req.paste_type.as_deref())?;
    let transpose = transposed(req)?;
    let src = grid_range(ss, need(&req.source)?)?;
    let dest = grid_range(ss, need(&req.destination)?)?;
    let mut cells = snapshot(ss, &src, t);
    if transpose {
        let (h, w) = (src.rows() as usize, src.cols() as usize);
        cells = (0..w)
            .map(|j| (0..h).map(|i| cells[i][j].clone()).collect())
            .collect();
    }
    let h = cells.len() as u32;
    let w = cells.first().map_or(0, Vec::len) as u32;
    if h == 0 || w == 0 {
        return Ok(json!({}));
    }
    let tiled: Vec<Vec<Cell>> = (0..h * repeats(dest.rows(), h))
        .map(|i| {
            (0..w * repeats(dest.cols(), w))
                .map(|j| cells[(i % h) as usize][(j % w) as usize].clone())
                .collect()
        })
        .collect();
    put(ss, dest.sheet, dest.r0, dest.c0, &tiled, t)?;
    Ok(json!({}))
}
