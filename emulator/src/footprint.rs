//! What each `spreadsheets.batchUpdate` request changes, as the protection guard judges it
//! ([`Touch`], `protection.rs`): worked out on the spreadsheet as the request finds it (after
//! the batch's earlier requests), with the helpers the request itself uses, so that the guard
//! and the edit agree on where it lands. A request the guard refuses changes nothing, and
//! the batch with it.
//!
//! The block a request targets counts whole, even cells it would leave as they are (a
//! `sortRange` that changes no order still sorts a protected range); a request that only
//! reads (`duplicateSheet`'s source), adds a sheet (`addSheet`) or changes nothing modelled
//! (`autoResizeDimensions`) touches nothing.
//!
//! Protected ranges: adding one touches every cell it would protect, and changing what one
//! protects or who it lets in, or deleting one, touches every cell of its area besides its
//! own settings (`protection.rs`: Google lets people who can edit protect; the stricter
//! reading of cells closed to them).
//!
//! Developer metadata: Google documents nothing about protection and developer metadata;
//! the stricter reading is that creating, updating (key, value, visibility or location) or
//! deleting an entry is an edit of where it lies: a row or column location counts as every
//! cell of that row or column, a sheet location as every cell of the sheet, and a move
//! touches both the old and the new place. Which entries an update or delete selects is
//! worked out as the request does it, among those its caller sees (`metadata::Seer`). The
//! spreadsheet's own entries touch no cell: they need the caller to be an editor of the
//! file, which the sharing check (HTTP 403 for a viewer's write, `http.rs`, `web.rs`) has
//! made sure of before any batch runs. Reading (search, get) is not a write and is not
//! judged here; deleting the row, column or sheet an entry is on is judged as that deletion
//! (the entry goes with it, `metadata::prune`).

use google_sheets4::api::Request;

use super::dimension;
use super::find_replace;
use super::lookup;
use super::metadata::{self, Placed, Seer};
use super::paste;
use super::protection::{self, lines, Touch};
use super::request::{fields, grid_range, need, nonneg, sheet_of};
use super::store::{Bounds, Spreadsheet};

/// What request `r` (of kind `kind`, its JSON key) by `user` would change in `ss`; the
/// request's own error when it is malformed.
pub fn of_request(
    ss: &Spreadsheet,
    r: &Request,
    kind: &str,
    user: &str,
) -> Result<Vec<Touch>, String> {
    Ok(match kind {
        "updateCells" => {
            let u = need(&r.update_cells)?;
            match (&u.start, &u.range) {
                (Some(start), None) => {
                    let sheet = sheet_of(ss, start.sheet_id)?;
                    let (r0, c0) = (nonneg(start.row_index)?, nonneg(start.column_index)?);
                    let rows = u.rows.as_deref().unwrap_or_default();
                    let width = rows
                        .iter()
                        .map(|row| row.values.as_ref().map_or(0, Vec::len))
                        .max()
                        .unwrap_or(0) as u32;
                    vec![Touch::Cells(block(sheet, r0, c0, rows.len() as u32, width))]
                }
                (None, Some(range)) => vec![Touch::Cells(grid_range(ss, range)?)],
                _ => return Err("exactly one of start or range must be set".into()),
            }
        }
        "appendCells" => {
            let a = need(&r.append_cells)?;
            let sheet = sheet_of(ss, a.sheet_id)?;
            let rows = a.rows.as_deref().unwrap_or_default();
            let width = rows
                .iter()
                .map(|row| row.values.as_ref().map_or(0, Vec::len))
                .max()
                .unwrap_or(0) as u32;
            let at = ss.sheets[sheet].data_end();
            vec![Touch::Cells(block(sheet, at, 0, rows.len() as u32, width))]
        }
        "repeatCell" => vec![Touch::Cells(grid_range(
            ss,
            need(&need(&r.repeat_cell)?.range)?,
        )?)],
        "setDataValidation" => vec![Touch::Cells(grid_range(
            ss,
            need(&need(&r.set_data_validation)?.range)?,
        )?)],
        "sortRange" => vec![Touch::Cells(grid_range(
            ss,
            need(&need(&r.sort_range)?.range)?,
        )?)],
        "findReplace" => find_replace::cells(ss, need(&r.find_replace)?)?
            .into_iter()
            .map(|(sheet, r, c)| Touch::Cells(block(sheet, r, c, 1, 1)))
            .collect(),
        "cutPaste" => paste::cut_blocks(ss, need(&r.cut_paste)?)?
            .into_iter()
            .map(Touch::Cells)
            .collect(),
        "copyPaste" => paste::copy_block(ss, need(&r.copy_paste)?)?
            .into_iter()
            .map(Touch::Cells)
            .collect(),
        "insertDimension" => {
            let (sheet, rows, at, _) =
                dimension::dimension(ss, need(&need(&r.insert_dimension)?.range)?)?;
            vec![Touch::Insert { sheet, rows, at }]
        }
        "deleteDimension" => {
            let (sheet, rows, from, to) =
                dimension::dimension(ss, need(&need(&r.delete_dimension)?.range)?)?;
            vec![Touch::Cells(lines(sheet, rows, from, to))]
        }
        "moveDimension" => {
            let m = need(&r.move_dimension)?;
            let (sheet, rows, from, to) = dimension::dimension(ss, need(&m.source)?)?;
            let at = nonneg(m.destination_index)?;
            vec![
                Touch::Cells(lines(sheet, rows, from, to)),
                Touch::Insert { sheet, rows, at },
            ]
        }
        // Hiding or resizing rows and columns of a protected range is refused for people
        // who may not edit it (assumed: Google does not say; the stricter reading).
        "updateDimensionProperties" => {
            let (sheet, rows, from, to) =
                dimension::dimension(ss, need(&need(&r.update_dimension_properties)?.range)?)?;
            vec![Touch::Cells(lines(sheet, rows, from, to))]
        }
        "deleteSheet" => vec![Touch::Sheet {
            sheet: sheet_of(ss, need(&r.delete_sheet)?.sheet_id)?,
            whole_only: false,
        }],
        "updateSheetProperties" => sheet_properties(ss, r)?,
        "addProtectedRange" => protection::add_touches(ss, need(&r.add_protected_range)?)?,
        "updateProtectedRange" => protection::update_touches(ss, need(&r.update_protected_range)?)?,
        "deleteProtectedRange" => protection::delete_touches(ss, need(&r.delete_protected_range)?),
        "createDeveloperMetadata" => metadata_at([metadata::create_place(
            ss,
            need(&r.create_developer_metadata)?,
        )?]),
        "updateDeveloperMetadata" => metadata_at(lookup::update_places(
            ss,
            need(&r.update_developer_metadata)?,
            &Seer::caller(user),
        )?),
        "deleteDeveloperMetadata" => metadata_at(lookup::delete_places(
            ss,
            need(&r.delete_developer_metadata)?,
            &Seer::caller(user),
        )?),
        _ => Vec::new(),
    })
}

/// The cells developer metadata at `places` lies on: a row's or a column's, a sheet's
/// every cell; none for the spreadsheet's own (see the module's notes).
fn metadata_at(places: impl IntoIterator<Item = Placed>) -> Vec<Touch> {
    places
        .into_iter()
        .filter_map(|p| match p {
            Placed::Spreadsheet => None,
            Placed::Sheet(i) => Some(Touch::Cells(lines(i, true, 0, u32::MAX))),
            Placed::Row(i, r) => Some(Touch::Cells(lines(i, true, r, r + 1))),
            Placed::Column(i, c) => Some(Touch::Cells(lines(i, false, c, c + 1))),
        })
        .collect()
}

/// `rows` × `cols` cells from (`r0`, `c0`) of sheet index `sheet`.
fn block(sheet: usize, r0: u32, c0: u32, rows: u32, cols: u32) -> Bounds {
    Bounds {
        sheet,
        r0,
        r1: r0 + rows,
        c0,
        c1: c0 + cols,
    }
}

/// `updateSheetProperties`: the sheet's properties (a protected sheet's title, visibility,
/// place and grid are its editors' to change), and the rows or columns a smaller grid
/// deletes or a larger one adds.
fn sheet_properties(ss: &Spreadsheet, r: &Request) -> Result<Vec<Touch>, String> {
    let u = need(&r.update_sheet_properties)?;
    let props = u.properties.clone().unwrap_or_default();
    let sheet = sheet_of(ss, props.sheet_id)?;
    let mask = fields(u.fields.as_ref())?;
    let grid = |f: &str| {
        mask.iter()
            .any(|m| m == "*" || m == "gridProperties" || m == &format!("gridProperties.{f}"))
    };
    let g = props.grid_properties.unwrap_or_default();
    let s = &ss.sheets[sheet];
    let mut touches = vec![Touch::Sheet {
        sheet,
        whole_only: true,
    }];
    for (rows, asked, now) in [
        (true, grid("rowCount").then_some(g.row_count), s.row_count),
        (
            false,
            grid("columnCount").then_some(g.column_count),
            s.column_count,
        ),
    ] {
        let Some(asked) = asked else { continue };
        let n = nonneg(asked)?.max(1);
        if n < now {
            touches.push(Touch::Cells(lines(sheet, rows, n, now)));
        } else if n > now {
            touches.push(Touch::Insert {
                sheet,
                rows,
                at: now,
            });
        }
    }
    Ok(touches)
}
