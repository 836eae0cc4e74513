//! Discovery: which sheets are panels and which target each one serves, from the marker
//! cells alone (docs/design.md §1.2), plus the rows of the `▶パネル` index sheet (§1.3).
//!
//! A title is a person's choice and changes; the G2 label is what a job's 対象ラベル names.
//! So a pass reads the marker block of every sheet in one `values.batchGet`, builds the
//! label → sheet map once, and every later lookup in that pass goes through it.

use std::collections::HashMap;

use super::index_sheet::INDEX_MARKER;
use super::{cell_at, PanelLayout};
use crate::a1::{self, A1Range};
use crate::queue::{cell_text, QUEUE_SHEET};
use crate::sheets::{Cell, SpreadsheetMeta, ValueRange};

/// Title of the hidden coordination sheet (docs/design.md §1.4).
pub const WORKER_SHEET: &str = "_ワーカー";
/// Title of the index sheet (docs/design.md §1.3).
pub const INDEX_SHEET: &str = "▶パネル";

/// Sheets that are sheetq's own and never panels; their marker cells are not read.
const NOT_PANELS: [&str; 4] = [
    QUEUE_SHEET,
    WORKER_SHEET,
    crate::archive::ARCHIVE_SHEET,
    crate::joblog::LOG_SHEET,
];

/// The ranges to read for discovery: the marker block (`G1:G3` by default) of every sheet
/// except sheetq's own (`_ジョブキュー`, `_ワーカー`, `_ジョブ履歴`, `_ジョブログ`) and those
/// too small to hold it (Google refuses a read past a sheet's grid), in tab order; they ride
/// on every poll.
pub fn marker_ranges(meta: &SpreadsheetMeta, layout: &PanelLayout) -> Vec<String> {
    let (top_left, bottom_right) = layout.marker_block();
    let cells = format!("{top_left}:{bottom_right}");
    let fits = |s: &&crate::sheets::SheetMeta| {
        (bottom_right.col as i32) < s.column_count && (bottom_right.row as i32) <= s.row_count
    };
    let mut sheets: Vec<_> = meta
        .sheets
        .iter()
        .filter(|s| !NOT_PANELS.contains(&s.title.as_str()))
        .filter(fits)
        .collect();
    sheets.sort_by_key(|s| s.index);
    sheets.iter().map(|s| a1::range(&s.title, &cells)).collect()
}

/// One panel as found in this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelRef {
    pub sheet_id: i32,
    /// The title now (it may differ from a queue row's パネルシート名).
    pub title: String,
    /// Tab position, for listing panels in the order people see them.
    pub tab_index: i32,
    /// The target label from G2, trimmed.
    pub label: String,
    /// The target's physical position from G3 (reference only).
    pub position: String,
}

/// Two or more sheets carry the same target label. Neither is used: writing a result to the
/// wrong target's panel is worse than writing none, and which one is stale only a person
/// can tell.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "target label \"{label}\" is on {} panels ({}); none of them is used until the label cell is fixed so that only one carries it",
    titles.len(),
    titles.iter().map(|t| a1::quote_title(t)).collect::<Vec<_>>().join(", ")
)]
pub struct LabelConflict {
    pub label: String,
    /// Titles of the sheets claiming the label, in tab order.
    pub titles: Vec<String>,
}

/// The label → panel map of one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PanelIndex {
    /// Usable panels, in tab order.
    panels: Vec<PanelRef>,
    by_label: HashMap<String, usize>,
    /// Labels claimed by more than one sheet; those sheets are left out of the index.
    pub conflicts: Vec<LabelConflict>,
    /// Other things worth a warning: a marker without a label, a range that matches no
    /// sheet.
    pub problems: Vec<String>,
    /// The index sheet (its marker cell holds [`INDEX_MARKER`]): id and title. When two
    /// sheets carry the marker, the first in tab order.
    pub index_sheet: Option<(i32, String)>,
}

impl PanelIndex {
    /// Builds the index from the values of [`marker_ranges`]. Each range is matched to its
    /// sheet by the title in its A1 text (the API echoes the requested range), not by
    /// position, so a reply in another order cannot mix panels up.
    pub fn build(meta: &SpreadsheetMeta, ranges: &[ValueRange], layout: &PanelLayout) -> Self {
        let (top_left, _) = layout.marker_block();
        let at = |values: &[Vec<Cell>], cell: super::CellRef| {
            let text = cell_text(cell_at(
                values,
                (cell.row - top_left.row) as usize,
                (cell.col - top_left.col) as usize,
            ));
            crate::sheet_text::trim(&text).to_string()
        };
        let mut index = PanelIndex::default();
        let mut found: Vec<PanelRef> = Vec::new();
        for vr in ranges {
            let title = match A1Range::parse(&vr.range).ok().and_then(|r| r.sheet) {
                Some(t) => t,
                None => {
                    index.problems.push(format!(
                        "marker range \"{}\" names no sheet; it was ignored",
                        vr.range
                    ));
                    continue;
                }
            };
            let Some(sheet) = meta.sheet(&title) else {
                index.problems.push(format!(
                    "marker range \"{}\" names a sheet that is not in the spreadsheet's metadata; it was ignored",
                    vr.range
                ));
                continue;
            };
            let marker = at(&vr.values, layout.marker_cell);
            if marker == INDEX_MARKER {
                let earlier = index
                    .index_sheet
                    .as_ref()
                    .and_then(|(id, _)| meta.sheets.iter().find(|s| s.sheet_id == *id))
                    .is_some_and(|s| s.index < sheet.index);
                if !earlier {
                    index.index_sheet = Some((sheet.sheet_id, sheet.title.clone()));
                }
                continue;
            }
            if marker != layout.marker.trim() {
                continue;
            }
            let label = at(&vr.values, layout.label_cell);
            if label.is_empty() {
                index.problems.push(format!(
                    "sheet {} has the {} marker in {} but its target label cell {} is empty; fill it in or remove the marker",
                    a1::quote_title(&title),
                    layout.marker,
                    layout.marker_cell,
                    layout.label_cell
                ));
                continue;
            }
            found.push(PanelRef {
                sheet_id: sheet.sheet_id,
                title: sheet.title.clone(),
                tab_index: sheet.index,
                label,
                position: at(&vr.values, layout.position_cell),
            });
        }
        found.sort_by_key(|p| p.tab_index);
        let mut count: HashMap<&str, usize> = HashMap::new();
        for p in &found {
            *count.entry(p.label.as_str()).or_default() += 1;
        }
        let mut conflicts: Vec<LabelConflict> = Vec::new();
        let mut usable = Vec::new();
        for p in &found {
            if count.get(p.label.as_str()).copied().unwrap_or(0) > 1 {
                match conflicts.iter_mut().find(|c| c.label == p.label) {
                    Some(c) => c.titles.push(p.title.clone()),
                    None => conflicts.push(LabelConflict {
                        label: p.label.clone(),
                        titles: vec![p.title.clone()],
                    }),
                }
            } else {
                usable.push(p.clone());
            }
        }
        index.by_label = usable
            .iter()
            .enumerate()
            .map(|(i, p)| (p.label.clone(), i))
            .collect();
        index.panels = usable;
        index.conflicts = conflicts;
        index
    }

    /// The panel whose label cell holds `label` (compared trimmed, case-sensitive).
    pub fn get(&self, label: &str) -> Option<&PanelRef> {
        self.by_label
            .get(crate::sheet_text::trim(label))
            .map(|i| &self.panels[*i])
    }

    /// Usable panels in tab order.
    pub fn panels(&self) -> &[PanelRef] {
        &self.panels
    }

    /// The panel with this title, if it is a usable panel.
    pub fn by_title(&self, title: &str) -> Option<&PanelRef> {
        self.panels.iter().find(|p| p.title == title)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::fixtures::*;
    use serde_json::json;

    #[test]
    fn marker_ranges_skip_sheetq_sheets_and_quote_titles() {
        let meta = meta(&[
            (0, "▶パネル"),
            (11, "_ジョブキュー"),
            (12, "_ワーカー"),
            (5, "Bob's #1"),
        ]);
        assert_eq!(
            marker_ranges(&meta, &PanelLayout::default()),
            ["'▶パネル'!G1:G3", "'Bob''s #1'!G1:G3"]
        );
    }

    #[test]
    fn a_renamed_and_moved_panel_still_resolves_by_its_label() {
        let layout = PanelLayout::default();
        let before = meta(&[(0, "▶パネル"), (5, "サーバーA"), (7, "A")]);
        let values = [
            marker("サーバーA", "A", "ラック1"),
            // A sheet titled like the label but without the marker is not a panel.
            ValueRange::new("'A'!G1:G3", vec![vec![json!("メモ")], vec![json!("B")]]),
        ];
        let index = PanelIndex::build(&before, &values, &layout);
        let p = index
            .get("A")
            .unwrap_or_else(|| panic!("A should resolve: {index:?}"));
        assert_eq!((p.sheet_id, p.title.as_str()), (5, "サーバーA"));
        assert!(index.get("B").is_none(), "no marker, no panel");

        // Renamed and dragged to another tab position: same sheet id, same label.
        let mut after = meta(&[(0, "▶パネル"), (5, "サーバーA (旧)"), (7, "A")]);
        after.sheets[1].index = 9;
        let index = PanelIndex::build(&after, &[marker("サーバーA (旧)", "A", "ラック2")], &layout);
        let p = index
            .get(" A ")
            .unwrap_or_else(|| panic!("A should resolve: {index:?}"));
        assert_eq!(
            (p.sheet_id, p.title.as_str(), p.position.as_str()),
            (5, "サーバーA (旧)", "ラック2")
        );
    }

    #[test]
    fn two_panels_with_one_label_are_reported_and_neither_is_used() {
        let meta = meta(&[(5, "A-1"), (6, "A-2"), (7, "B")]);
        let values = [
            marker("A-1", "A", ""),
            marker("A-2", "A", ""),
            marker("B", "B", ""),
        ];
        let index = PanelIndex::build(&meta, &values, &PanelLayout::default());
        assert_eq!(
            index.conflicts,
            [LabelConflict {
                label: "A".into(),
                titles: vec!["A-1".into(), "A-2".into()]
            }]
        );
        assert!(
            index.get("A").is_none(),
            "a conflicting label must not be guessed"
        );
        assert_eq!(index.get("B").map(|p| p.sheet_id), Some(7));
        let text = index.conflicts[0].to_string();
        assert!(text.contains("'A-1', 'A-2'"), "{text}");
    }

    #[test]
    fn marker_cells_elsewhere_are_read_at_their_offsets() {
        let layout: PanelLayout =
            toml::from_str("marker_cell = \"K1\"\nlabel_cell = \"L1\"\nposition_cell = \"L2\"")
                .unwrap_or_else(|e| panic!("{e}"));
        let meta = meta(&[(5, "P")]);
        assert_eq!(marker_ranges(&meta, &layout), ["'P'!K1:L2"]);
        let vr = ValueRange::new(
            "P!K1:L2",
            vec![
                vec![json!("PANEL_V2"), json!("A")],
                vec![json!(""), json!("R9")],
            ],
        );
        let index = PanelIndex::build(&meta, &[vr], &layout);
        let p = index
            .get("A")
            .unwrap_or_else(|| panic!("A should resolve: {index:?}"));
        assert_eq!(p.position, "R9");
    }

    #[test]
    fn a_marker_without_a_label_is_a_problem_not_a_panel() {
        let meta = meta(&[(5, "P")]);
        let index = PanelIndex::build(&meta, &[marker("P", "", "")], &PanelLayout::default());
        assert!(index.panels().is_empty());
        assert!(
            index
                .problems
                .iter()
                .any(|p| p.contains("'P'") && p.contains("G2")),
            "{:?}",
            index.problems
        );
    }
}
