//! What sheetq protects on the panels and the index (`panels sync`, the daemon's panel jobs
//! and `check` want these areas): where each lies follows the layout, so it lives with the
//! panels; what a protection is and how it is judged is [`crate::protection`]'s.

use std::collections::BTreeSet;

use crate::a1;
use crate::protection::{Fix, People, Wanted};
use crate::sheets::{Area, GridRange};

use super::PanelLayout;

/// What sheetq protects on the panel `title` (sheet `sheet_id`): its marker cells (each run
/// of adjacent ones in a column as one area), its 機能 column and its hidden command,
/// argsJSON and flags columns, every row (each run of adjacent ones as one area). The ▶
/// column and the status, result and updated columns stay open.
pub fn panel(sheet_id: i32, title: &str, layout: &PanelLayout) -> Vec<Wanted> {
    let name = a1::quote_title(title);
    let markers = [
        layout.marker_cell,
        layout.label_cell,
        layout.position_cell,
        layout.generated_at_cell,
    ]
    .map(|c| (c.col, c.row - 1));
    let mut out: Vec<Wanted> = runs_in_columns(&markers)
        .into_iter()
        .map(|(col, rows)| {
            let area = Area::cells(GridRange {
                sheet_id,
                start_row: rows.start,
                end_row: rows.end,
                start_col: col,
                end_col: col + 1,
            });
            Wanted {
                area,
                what: format!("the markers {} of panel {name}", cells_text(&area)),
                fix: Fix::PanelsSync,
                people: People::default(),
            }
        })
        .collect();
    let c = &layout.columns;
    // The labels, closed to people as the hidden cells are: a sort by a person that would
    // split a function's label from its hidden command, argsJSON and flags (and so take
    // the panel out of use under the trigger intake) must take in the label column, and
    // Google refuses it whole.
    let function = Area::columns(sheet_id, c.function.0, c.function.0 + 1);
    out.push(Wanted {
        area: function,
        what: format!(
            "the 機能 column {} of panel {name}, so that no sort by a person splits a label from its hidden cells",
            columns_text(&function)
        ),
        fix: Fix::PanelsSync,
        people: People::default(),
    });
    let hidden = [c.inputs.0, c.command.0, c.args_json.0, c.flags.0];
    out.extend(runs(&hidden).into_iter().map(|cols| {
        let area = Area::columns(sheet_id, cols.start, cols.end);
        Wanted {
            area,
            what: format!(
                "the hidden inputs, command, argsJSON and flags columns {} of panel {name}",
                columns_text(&area)
            ),
            fix: Fix::PanelsSync,
            people: People::default(),
        }
    }));
    out
}

/// What sheetq protects on the index `title` (sheet `sheet_id`): its hidden column (the
/// marker's, which holds each target's last activity). Labels, ticks and the rest stay open:
/// people add targets there.
pub fn index(sheet_id: i32, title: &str, layout: &PanelLayout) -> Vec<Wanted> {
    let col = layout.marker_cell.col;
    let area = Area::columns(sheet_id, col, col + 1);
    vec![Wanted {
        area,
        what: format!(
            "the hidden column {} of the index {}",
            columns_text(&area),
            a1::quote_title(title)
        ),
        fix: Fix::PanelsSync,
        people: People::default(),
    }]
}

/// What sheetq protects on every panel of `panels` (sheet id, title) and on the index.
pub fn panels_and_index(
    panels: &[(i32, String)],
    index_sheet: Option<&(i32, String)>,
    layout: &PanelLayout,
) -> Vec<Wanted> {
    let mut out: Vec<Wanted> = panels
        .iter()
        .flat_map(|(id, title)| panel(*id, title, layout))
        .collect();
    if let Some((id, title)) = index_sheet {
        out.extend(index(*id, title, layout));
    }
    out
}

/// Runs of adjacent values (sorted, each once), as half-open ranges.
fn runs(values: &[u32]) -> Vec<std::ops::Range<u32>> {
    let set: BTreeSet<u32> = values.iter().copied().collect();
    let mut out: Vec<std::ops::Range<u32>> = Vec::new();
    for v in set {
        match out.last_mut() {
            Some(r) if r.end == v => r.end = v + 1,
            _ => out.push(v..v + 1),
        }
    }
    out
}

/// Cells (column, zero-based row) as runs of adjacent rows per column, columns in order.
fn runs_in_columns(cells: &[(u32, u32)]) -> Vec<(u32, std::ops::Range<u32>)> {
    let columns: BTreeSet<u32> = cells.iter().map(|(c, _)| *c).collect();
    columns
        .into_iter()
        .flat_map(|col| {
            let rows: Vec<u32> = cells
                .iter()
                .filter(|(c, _)| *c == col)
                .map(|(_, r)| *r)
                .collect();
            runs(&rows).into_iter().map(move |r| (col, r))
        })
        .collect()
}

/// `G1:G3`, or `G5` for one cell.
fn cells_text(area: &Area) -> String {
    let col = a1::column_letters(area.start_col);
    let first = area.start_row + 1;
    match area.end_row {
        Some(end) if end > first => format!("{col}{first}:{col}{end}"),
        _ => format!("{col}{first}"),
    }
}

/// `H:J`, or `G` for one column.
fn columns_text(area: &Area) -> String {
    let first = a1::column_letters(area.start_col);
    match area.end_col {
        Some(end) if end > area.start_col + 1 => {
            format!("{first}:{}", a1::column_letters(end - 1))
        }
        _ => first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_protects_its_markers_labels_and_hidden_columns_and_leaves_the_rest_open() {
        let wanted = panel(5001, "web-1", &PanelLayout::default());
        let areas: Vec<Area> = wanted.iter().map(|w| w.area).collect();
        let g = |rows: std::ops::Range<u32>| {
            Area::cells(GridRange {
                sheet_id: 5001,
                start_row: rows.start,
                end_row: rows.end,
                start_col: 6,
                end_col: 7,
            })
        };
        assert_eq!(
            areas,
            vec![
                g(0..3),
                g(4..5),
                Area::columns(5001, 1, 2),
                Area::columns(5001, 6, 10)
            ],
            "G1:G3 and G5 (G4 holds nothing), the labels B and G:J every row"
        );
        assert_eq!(wanted[0].what, "the markers G1:G3 of panel 'web-1'");
        assert_eq!(wanted[1].what, "the markers G5 of panel 'web-1'");
        assert_eq!(
            wanted[2].what,
            "the 機能 column B of panel 'web-1', so that no sort by a person splits a label from its hidden cells"
        );
        assert_eq!(
            wanted[3].what,
            "the hidden inputs, command, argsJSON and flags columns G:J of panel 'web-1'"
        );
        for open in [0, 2, 3, 4] {
            let column = Area::columns(5001, open, open + 1);
            assert!(
                !areas.iter().any(|a| a.overlaps(&column)),
                "column {} must stay editable",
                a1::column_letters(open)
            );
        }
        assert!(wanted.iter().all(|w| w.fix == Fix::PanelsSync));
    }

    #[test]
    fn a_panel_laid_out_otherwise_is_protected_where_its_layout_says() {
        let layout: PanelLayout = toml::from_str(
            "marker_cell = \"Z1\"\nlabel_cell = \"Z2\"\nposition_cell = \"Z3\"\ngenerated_at_cell = \"Z4\"\n\
             [columns]\ncommand = \"K\"\nargs_json = \"M\"\nflags = \"L\"",
        )
        .unwrap_or_else(|e| panic!("layout: {e}"));
        let areas: Vec<Area> = panel(9, "p", &layout).iter().map(|w| w.area).collect();
        assert_eq!(
            areas,
            vec![
                Area::cells(GridRange {
                    sheet_id: 9,
                    start_row: 0,
                    end_row: 4,
                    start_col: 25,
                    end_col: 26
                }),
                Area::columns(9, 1, 2),
                Area::columns(9, 6, 7),
                Area::columns(9, 10, 13)
            ]
        );
    }

    #[test]
    fn the_index_protects_only_its_hidden_column() {
        let wanted = index(0, "▶パネル", &PanelLayout::default());
        assert_eq!(wanted.len(), 1);
        assert_eq!(wanted[0].area, Area::columns(0, 6, 7));
        assert_eq!(wanted[0].what, "the hidden column G of the index '▶パネル'");
    }
}
