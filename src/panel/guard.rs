//! Who may press, approve and stop a function, as Google enforces it (docs/design.md §5.7),
//! pure: the people a function's `allow`, `approvers` and `cancel` name ([`People`]), the
//! panel cells that only they may edit ([`cells`]: its ▶ cell, one 承認 cell per approver,
//! its ■ cell), and which of those cells the spreadsheet guards exactly as the config says
//! ([`Guards`]).
//!
//! A protected range whose editors are the listed people (addresses, and Google Groups
//! written `group:team@example.com`), sheetq's service accounts and the owner lets no one
//! else edit its cells: Google refuses the edit, from the web and through the API. So a
//! tick found in such a cell was made by one of them, whoever reads it and however it was
//! read; no script, cell or flag of the spreadsheet takes part. A tick in a cell that is not
//! guarded exactly (unprotected, or its protection lists someone else, or only warns) proves
//! nothing, and a function that names people does not take it.
//!
//! The spreadsheet's owner may always edit, whatever a protection lists
//! (https://developers.google.com/apps-script/reference/spreadsheet/protection#canedit):
//! the owner can press, approve and stop everything.

use std::collections::BTreeMap;
use std::fmt;

use crate::panel::catalog::Catalog;
use crate::panel::PanelLayout;
use crate::protection::{self, Editors, Fix, People, Wanted};
use crate::sheets::{Area, GridRange, SpreadsheetMeta};

/// What a guarded cell lets its people do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// ▶: run the function (`allow`).
    Press,
    /// The `n`-th 承認 cell: the function's `n`-th approver approves (`approvers`).
    Approve(usize),
    /// ■: stop the function's job (`cancel`, by default its allow and approvers).
    Stop,
    /// The input cells of a function that names who may press: only they choose the values
    /// a press takes.
    Inputs,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Press => f.write_str("▶"),
            Role::Approve(n) => write!(f, "承認 {}", n + 1),
            Role::Stop => f.write_str("■"),
            Role::Inputs => f.write_str("入力"),
        }
    }
}

/// How many 承認 columns the panels need: one per approver of the function with the most.
pub fn approval_columns(catalog: &Catalog) -> usize {
    catalog
        .functions
        .iter()
        .map(|f| f.approvers.as_ref().map_or(0, Vec::len))
        .max()
        .unwrap_or(0)
}

/// One cell of a panel that only some people may edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardCell {
    pub function: String,
    pub role: Role,
    /// 1-based row, as the sheet shows it.
    pub row: u32,
    /// Zero-based column (the left-most of a block).
    pub col: u32,
    /// How many columns from `col` (1 but for the inputs, a label and a value each).
    pub width: u32,
    /// Who may edit it besides sheetq's accounts and the owner.
    pub people: People,
}

/// The guarded cells of a panel laid out by `layout` with `catalog`'s functions (one row
/// each, in the config's order, as `panels sync` writes them).
pub fn cells(layout: &PanelLayout, catalog: &Catalog) -> Vec<GuardCell> {
    let cols = &layout.columns;
    let mut out = Vec::new();
    for (i, f) in catalog.functions.iter().enumerate() {
        let row = layout.first_row + i as u32;
        let cell = |role, col, people| GuardCell {
            function: f.label.clone(),
            role,
            row,
            col,
            width: 1,
            people,
        };
        if let Some(p) = f.pressers() {
            if !f.inputs.is_empty() {
                out.push(GuardCell {
                    width: 2 * f.inputs.len() as u32,
                    ..cell(Role::Inputs, layout.input_cells(0).0, p.clone())
                });
            }
            out.push(cell(Role::Press, cols.tick.0, p));
        }
        for (n, p) in f.approver_people().into_iter().enumerate() {
            out.push(cell(Role::Approve(n), cols.approve.0 + n as u32, p));
        }
        if let Some(p) = f.stoppers() {
            out.push(cell(Role::Stop, cols.cancel.0, p));
        }
    }
    out
}

/// What `panels sync` protects on panel `title` (sheet `sheet_id`) for who may press,
/// approve and stop.
pub fn wanted(sheet_id: i32, title: &str, layout: &PanelLayout, catalog: &Catalog) -> Vec<Wanted> {
    cells(layout, catalog)
        .into_iter()
        .map(|c| wanted_of(sheet_id, title, &c))
        .collect()
}

/// What `panels sync` protects on every panel of `panels` (sheet id, title, target label)
/// for who may press, approve and stop, each by its own functions
/// ([`Catalog::of_panel`]: the 一括 panel's are the rollouts).
pub fn wanted_on(
    panels: &[(i32, String, String)],
    layout: &PanelLayout,
    catalog: &Catalog,
) -> Vec<Wanted> {
    panels
        .iter()
        .flat_map(|(id, title, label)| wanted(*id, title, layout, catalog.of_panel(label)))
        .collect()
}

fn wanted_of(sheet_id: i32, title: &str, c: &GuardCell) -> Wanted {
    Wanted {
        area: Area::cells(GridRange {
            sheet_id,
            start_row: c.row - 1,
            end_row: c.row,
            start_col: c.col,
            end_col: c.col + c.width,
        }),
        what: format!(
            "the {} {} {}{}{} of function {} on panel {}",
            c.role,
            if c.width > 1 { "cells" } else { "cell" },
            crate::a1::column_letters(c.col),
            c.row,
            if c.width > 1 {
                format!(
                    ":{}{}",
                    crate::a1::column_letters(c.col + c.width - 1),
                    c.row
                )
            } else {
                String::new()
            },
            crate::panel::catalog::shown(&c.function),
            crate::a1::quote_title(title)
        ),
        fix: Fix::PanelsSync,
        people: c.people.clone(),
    }
}

/// The guarded cells of every panel that the spreadsheet protects exactly as the config
/// says, read from the metadata a poll reads anyway: a tick there is taken as one of the
/// cell's people's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guards {
    /// (panel title, 1-based row, column) of each cell guarded exactly.
    exact: BTreeMap<(String, u32, u32), GuardCell>,
}

impl Guards {
    /// Judges the cells of `panels` (sheet id, title, target label) against `meta`'s
    /// protections, each panel's by its own functions ([`Catalog::of_panel`]).
    pub fn read(
        meta: &SpreadsheetMeta,
        panels: &[(i32, String, String)],
        layout: &PanelLayout,
        catalog: &Catalog,
        editors: &Editors,
    ) -> Self {
        let owner = protection::presumed_owner(meta);
        let mut exact = BTreeMap::new();
        for (sheet_id, title, label) in panels {
            for c in &cells(layout, catalog.of_panel(label)) {
                if protection::is_exact(meta, &owner, &wanted_of(*sheet_id, title, c), editors) {
                    exact.insert((title.clone(), c.row, c.col), c.clone());
                }
            }
        }
        Self { exact }
    }

    /// Whether the cell at (`title`, 1-based `row`, `col`) is guarded exactly for `role` of
    /// `function`.
    pub fn holds(&self, title: &str, row: u32, col: u32, function: &str, role: Role) -> bool {
        self.exact
            .get(&(title.to_string(), row, col))
            .is_some_and(|c| c.function == function && c.role == role)
    }

    /// How many cells are guarded exactly.
    pub fn len(&self) -> usize {
        self.exact.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::catalog::FunctionDef;

    fn function(label: &str, allow: Option<&[&str]>, approvers: Option<&[&str]>) -> FunctionDef {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        FunctionDef {
            label: label.into(),
            command: "run".into(),
            args: toml::Table::new(),
            flags: Vec::new(),
            allow: allow.map(list),
            args_from_sheet: Vec::new(),
            inputs: Vec::new(),
            reset_inputs: false,
            approvers: approvers.map(list),
            approvals: None,
            approval_expires: None,
            output: None,
            cancel: None,
        }
    }

    #[test]
    fn who_may_stop_defaults_to_who_may_run_and_approve_and_cancel_overrides_it() {
        let open = function("a", None, None);
        assert_eq!(open.stoppers(), None, "anyone who can press may stop");
        let gated = function(
            "b",
            Some(&["alice@example.com"]),
            Some(&["lead@example.com"]),
        );
        assert_eq!(
            gated.stoppers().map(|p| p.to_string()),
            Some("alice@example.com, lead@example.com".to_string())
        );
        let mut own = gated.clone();
        own.cancel = Some(vec!["oncall@example.com".into()]);
        assert_eq!(
            own.stoppers().map(|p| p.to_string()),
            Some("oncall@example.com".to_string())
        );
        own.cancel = Some(Vec::new());
        assert_eq!(
            own.stoppers().map(|p| p.to_string()),
            Some("nobody but the owner".to_string()),
            "cancel = [] leaves the ■ to the owner and `sheetq cancel`"
        );
    }

    #[test]
    fn each_approver_gets_a_column_of_its_own_and_open_functions_no_cell() {
        let catalog = Catalog {
            functions: vec![
                function("open", None, None),
                function(
                    "deploy",
                    Some(&["alice@example.com"]),
                    Some(&["lead@example.com", "group:sre@example.com"]),
                ),
            ],
            ..Catalog::default()
        };
        let layout = PanelLayout::default();
        let got: Vec<(String, Role, String, String)> = cells(&layout, &catalog)
            .into_iter()
            .map(|c| {
                (
                    c.function,
                    c.role,
                    format!("{}{}", crate::a1::column_letters(c.col), c.row),
                    c.people.to_string(),
                )
            })
            .collect();
        let s = |x: &str| x.to_string();
        assert_eq!(
            got,
            [
                (s("deploy"), Role::Press, s("A9"), s("alice@example.com")),
                (
                    s("deploy"),
                    Role::Approve(0),
                    s("K9"),
                    s("lead@example.com")
                ),
                (
                    s("deploy"),
                    Role::Approve(1),
                    s("L9"),
                    s("group:sre@example.com")
                ),
                (
                    s("deploy"),
                    Role::Stop,
                    s("F9"),
                    s("alice@example.com, lead@example.com, group:sre@example.com")
                ),
            ]
        );
        assert_eq!(approval_columns(&catalog), 2);
    }

    #[test]
    fn the_inputs_of_a_function_only_some_may_press_are_theirs_to_choose() {
        let mut deploy = function("deploy", Some(&["alice@example.com"]), None);
        deploy.inputs = crate::inputs::from_toml(
            r#"inputs = [{ name = "version", type = "text" }, { name = "dry_run", type = "bool" }]"#,
        );
        let mut open = function("open", None, None);
        open.inputs = deploy.inputs.clone();
        let catalog = Catalog {
            functions: vec![open, deploy],
            ..Catalog::default()
        };
        let layout = PanelLayout {
            input_slots: 2,
            ..PanelLayout::default()
        };
        let inputs: Vec<(String, u32, u32, u32, String)> = cells(&layout, &catalog)
            .into_iter()
            .filter(|c| c.role == Role::Inputs)
            .map(|c| (c.function, c.row, c.col, c.width, c.people.to_string()))
            .collect();
        assert_eq!(
            inputs,
            [(
                "deploy".to_string(),
                9,
                11,
                4,
                "alice@example.com".to_string()
            )],
            "L9:O9 (two labels, two values) for alice; an open function's inputs stay open"
        );
        let wanted = wanted(5, "P", &layout, &catalog);
        assert!(
            wanted
                .iter()
                .any(|w| w.what == "the 入力 cells L9:O9 of function \"deploy\" on panel 'P'"),
            "{:?}",
            wanted.iter().map(|w| &w.what).collect::<Vec<_>>()
        );
    }
}
