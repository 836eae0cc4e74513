//! The panel builder, pure: from one read of the spreadsheet and the config's catalog, the
//! one `spreadsheets.batchUpdate` that makes the index and the panels what the config says
//! (`sheetq panels sync`, the daemon's panel jobs, `sheetq panels migrate`).
//!
//! A sync costs three requests whatever the number of panels: the metadata, one
//! `values.batchGet` of every sheet ([`read_ranges`]), and one atomic batch holding the new
//! sheets (with ids chosen here, so later requests of the same batch can name them), their
//! values, checkboxes (set on ranges), formats and hidden columns.
//!
//! What it does:
//! - the index lists every target: its rows as a person left them (a person may add a
//!   label), then `[[targets]]` not on it, then panels not on it; each row keeps its tick,
//!   its 状況 and its last result, and gets a link to its panel (`#gid=`);
//! - a panel exists only when asked for ([`SyncInput::open`]); asked for and hidden, it is
//!   shown; not asked for and idle longer than `hide_panels_after`, it is hidden;
//! - every panel's function table becomes the config's `[[functions]]`, each function row
//!   keeping its tick, status, result and updated time by label; a function the config
//!   dropped disappears;
//! - only panels whose cells differ are written.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::catalog::{Catalog, PANELS_TARGET};
use super::index_sheet::{self as ix, IndexEntry};
use super::{cell_at, PanelIndex, PanelLayout, PanelTable, INDEX_SHEET, WORKER_SHEET};
use crate::a1::{self, A1Range};
use crate::archive::ARCHIVE_SHEET;
use crate::queue::{cell_text, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{Cell, GridRange, Request, SheetMeta, SpreadsheetMeta, ValueRange};

/// The date-time pattern of the panels' 更新日時 and generated-at cells.
pub const DATE_TIME_PATTERN: &str = "yyyy/mm/dd hh:mm:ss";

/// Each input whose `choices_from` range the spreadsheet does not hold (its sheet missing,
/// or the range past its grid): its cell gets no dropdown, and every choice from it is
/// refused until the range is there.
pub fn missing_lists(meta: &SpreadsheetMeta, catalog: &Catalog) -> Vec<String> {
    catalog
        .functions
        .iter()
        .flat_map(|f| f.inputs.iter().map(move |d| (f, d)))
        .filter_map(|(f, d)| {
            let range = d.choices_from.as_deref()?;
            (!crate::sheets::fits_grid(meta, range)).then(|| {
                format!(
                    "function \"{}\": input {} lists its choices from {range}, which the spreadsheet does not hold (no such sheet, or the range starts past its grid): its cells get no dropdown and every choice is refused until the range is there; create the sheet or fix choices_from",
                    f.label,
                    d.label()
                )
            })
        })
        .collect()
}

/// The date pattern of a date input's panel cell.
pub const INPUT_DATE_PATTERN: &str = "yyyy-mm-dd";

/// The header of the 承認 column (`[panel.columns] approve`): a tick approves the row's job
/// waiting for approval; its rows have a box only where the function has `approvers`.
pub const APPROVE_HEADER: &str = "承認";
/// The header of the ■ column (`[panel.columns] cancel`): a tick stops the row's job.
pub const CANCEL_HEADER: &str = "■ 中止";

/// Why a sync cannot be planned; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error(
        "sheet {title} is titled like the index but does not carry the index marker ({INDEX_SHEET_MARKER} in {cell}); \
         turn it into the index with `sheetq panels migrate {title}` (its content is kept in a hidden copy) or rename it"
    )]
    UnmarkedIndex { title: String, cell: String },
    #[error(
        "sheet {title} already is the index; `panels migrate` replaces an old panel sheet by the index, \
         and this spreadsheet has one: run `sheetq panels sync` instead"
    )]
    AlreadyIndex { title: String },
    #[error(
        "the spreadsheet already has an index, {index}; migrating {title} would make a second one. \
         Copy what {title} lists into {index} by hand (a label per row in column B), or delete {index} first"
    )]
    IndexExists { index: String, title: String },
    #[error(
        "sheet {title} is a panel ({marker} marker), not an old panel sheet; `panels migrate` turns a sheet that lists targets into the index"
    )]
    MigratePanel { title: String, marker: String },
    #[error(
        "there is no sheet titled {title} to migrate; check the title (tab name) and its quoting"
    )]
    NoSuchSheet { title: String },
}

const INDEX_SHEET_MARKER: &str = ix::INDEX_MARKER;

/// What one sync is given.
#[derive(Debug, Clone)]
pub struct SyncInput<'a> {
    pub meta: &'a SpreadsheetMeta,
    /// The values of [`read_ranges`] (any order; matched by title).
    pub values: &'a [ValueRange],
    pub catalog: &'a Catalog,
    pub layout: &'a PanelLayout,
    pub tz: Tz,
    pub now: DateTime<Utc>,
    /// Targets whose panel must exist and be visible after this sync.
    pub open: &'a [String],
    /// Every target's panel must exist and be visible.
    pub open_all: bool,
    /// Queue rows of the unfinished window, for the index's 状況; `None` keeps what the
    /// index shows.
    pub queue: Option<&'a [crate::queue::QueueRow]>,
}

/// A planned sync: the one batch, and what it does in words.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncPlan {
    pub requests: Vec<Request>,
    pub report: SyncReport,
}

/// What a sync does (or, in a dry run, would do).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncReport {
    /// Panels created: (label, title, sheet id).
    pub created: Vec<(String, String, i32)>,
    /// Existing panels whose cells were rewritten.
    pub refreshed: Vec<String>,
    /// Existing panels that already matched.
    pub unchanged: Vec<String>,
    pub hidden: Vec<String>,
    pub shown: Vec<String>,
    /// Labels asked for that are no target: not turned into panels.
    pub unresolved: Vec<String>,
    /// The index: created, rewritten, or unchanged.
    pub index: IndexChange,
    /// Other things a person should know (label conflicts, repeated index rows, …).
    pub problems: Vec<String>,
    /// Sheet id of each target's panel after the sync (hidden ones included).
    pub panels: BTreeMap<String, i32>,
    /// The index after the sync (made by it, or as it was): sheet id and title.
    pub index_sheet: Option<(i32, String)>,
    /// Protections added or put right (`protect`), one line each.
    pub protected: Vec<String>,
}

impl SyncReport {
    /// Every panel after the sync, as (sheet id, title): those of `meta`, and those the sync
    /// creates.
    pub fn panel_sheets(&self, meta: &SpreadsheetMeta) -> Vec<(i32, String)> {
        self.panels
            .values()
            .filter_map(|id| {
                let title = meta
                    .sheets
                    .iter()
                    .find(|s| s.sheet_id == *id)
                    .map(|s| s.title.clone())
                    .or_else(|| {
                        self.created
                            .iter()
                            .find(|(_, _, c)| c == id)
                            .map(|(_, t, _)| t.clone())
                    })?;
                Some((*id, title))
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexChange {
    #[default]
    Unchanged,
    Created,
    Rewritten,
    /// An old panel sheet became the index (`panels migrate`).
    Migrated,
}

impl fmt::Display for SyncReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[String]| v.join(", ");
        match self.index {
            IndexChange::Created => writeln!(f, "index: created")?,
            IndexChange::Rewritten => writeln!(f, "index: updated")?,
            IndexChange::Unchanged => writeln!(f, "index: unchanged")?,
            IndexChange::Migrated => writeln!(f, "index: made from the old panel sheet")?,
        }
        for (label, title, id) in &self.created {
            writeln!(
                f,
                "created panel {label} (sheet {}, gid {id})",
                a1::quote_title(title)
            )?;
        }
        if !self.refreshed.is_empty() {
            writeln!(f, "updated panels: {}", list(&self.refreshed))?;
        }
        if !self.unchanged.is_empty() {
            writeln!(f, "unchanged panels: {}", list(&self.unchanged))?;
        }
        if !self.shown.is_empty() {
            writeln!(f, "shown again: {}", list(&self.shown))?;
        }
        if !self.hidden.is_empty() {
            writeln!(f, "hidden (idle): {}", list(&self.hidden))?;
        }
        if !self.unresolved.is_empty() {
            writeln!(
                f,
                "not turned into panels (no such target; add them to [[targets]] or to the index): {}",
                list(&self.unresolved)
            )?;
        }
        for p in &self.protected {
            writeln!(f, "{p}")?;
        }
        for p in &self.problems {
            writeln!(f, "problem: {p}")?;
        }
        Ok(())
    }
}

/// The ranges a sync reads, one per sheet except sheetq's own: columns A to the last column
/// panels or the index use, the first [`ix::INDEX_MAX_ROWS`] rows.
pub fn read_ranges(meta: &SpreadsheetMeta, layout: &PanelLayout) -> Vec<String> {
    let cells = format!(
        "A1:{}{}",
        a1::column_letters(last_col(layout)),
        rows_read(layout)
    );
    meta.sheets
        .iter()
        .filter(|s| ![QUEUE_SHEET, WORKER_SHEET, ARCHIVE_SHEET].contains(&s.title.as_str()))
        .map(|s| a1::range(&s.title, &cells))
        .collect()
}

fn rows_read(layout: &PanelLayout) -> u32 {
    layout.last_row().max(ix::INDEX_MAX_ROWS)
}

/// The right-most column panels or the index use (zero-based).
fn last_col(layout: &PanelLayout) -> u32 {
    let (_, table) = layout.table_span();
    [
        table,
        layout.marker_cell.col,
        layout.label_cell.col,
        layout.position_cell.col,
        layout.generated_at_cell.col,
        ix::LAST,
    ]
    .into_iter()
    .max()
    .unwrap_or(ix::LAST)
}

/// One sheet as read.
struct Read<'a> {
    meta: &'a SheetMeta,
    values: &'a [Vec<Cell>],
}

impl Read<'_> {
    fn cell(&self, row: u32, col: u32) -> &Cell {
        cell_at(self.values, row as usize, col as usize)
    }
}

/// Cells to write on one sheet, by (zero-based row, column); `formulas` may hold `=` text.
#[derive(Default)]
struct Cells {
    plain: BTreeMap<(u32, u32), Cell>,
    formulas: BTreeMap<(u32, u32), Cell>,
}

impl Cells {
    fn set(&mut self, row: u32, col: u32, value: Cell) {
        self.plain.insert((row, col), value);
    }

    /// Only the cells that differ from `read` (all of them for a sheet not read: a new
    /// one). A cell that already shows what it should is never written, so a person's tick
    /// or a status the daemon wrote since the read is not overwritten with the same value
    /// read a moment earlier.
    fn changed(self, read: Option<&Read>, formula_shows: &dyn Fn(&Cell) -> Cell) -> Cells {
        let Some(read) = read else { return self };
        let same = |a: &Cell, b: &Cell| {
            let blank = |c: &Cell| c.is_null() || c.as_str() == Some("");
            (blank(a) && blank(b))
                || a == b
                || cell_text(a) == cell_text(b) && a.is_string() == b.is_string()
        };
        Cells {
            plain: self
                .plain
                .into_iter()
                .filter(|((r, c), v)| !same(read.cell(*r, *c), v))
                .collect(),
            formulas: self
                .formulas
                .into_iter()
                .filter(|((r, c), v)| !same(read.cell(*r, *c), &formula_shows(v)))
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.formulas.is_empty()
    }

    /// One `updateCells` per run of adjacent rows in one column.
    fn requests(&self, sheet_id: i32, out: &mut Vec<Request>) {
        for (cells, formulas) in [(&self.plain, false), (&self.formulas, true)] {
            let mut by_col: BTreeMap<u32, Vec<(u32, &Cell)>> = BTreeMap::new();
            for ((r, c), v) in cells {
                by_col.entry(*c).or_default().push((*r, v));
            }
            for (col, cells) in by_col {
                let mut run: Vec<(u32, &Cell)> = Vec::new();
                let flush = |run: &mut Vec<(u32, &Cell)>, out: &mut Vec<Request>| {
                    let Some(&(start, _)) = run.first() else {
                        return;
                    };
                    let range = GridRange {
                        sheet_id,
                        start_row: start,
                        end_row: start + run.len() as u32,
                        start_col: col,
                        end_col: col + 1,
                    };
                    let rows = run.iter().map(|(_, v)| vec![(*v).clone()]).collect();
                    out.push(if formulas {
                        Request::WriteFormulas { range, rows }
                    } else {
                        Request::UpdateCells { range, rows }
                    });
                    run.clear();
                };
                for (r, v) in cells {
                    if run.last().is_some_and(|(last, _)| *last + 1 != r) {
                        flush(&mut run, out);
                    }
                    run.push((r, v));
                }
                flush(&mut run, out);
            }
        }
    }
}

fn text(s: impl Into<String>) -> Cell {
    Cell::String(s.into())
}

fn column_block(sheet_id: i32, col: u32, start: u32, end: u32) -> GridRange {
    GridRange {
        sheet_id,
        start_row: start,
        end_row: end,
        start_col: col,
        end_col: col + 1,
    }
}

/// A sheet id for a new sheet (a panel, the index, one of sheetq's hidden sheets): derived
/// from its label (so a panel deleted and made again gets its old `#gid=` links back), moved
/// on while taken. Positive int32, never 0. Chosen by sheetq, so later requests of the batch
/// that adds the sheet can name it.
pub fn sheet_id_for(label: &str, taken: &HashSet<i32>) -> i32 {
    // FNV-1a, 32 bits.
    let mut h: u32 = 0x811c_9dc5;
    for b in label.as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let mut id = (h & 0x7fff_ffff) as i32;
    while id == 0 || taken.contains(&id) {
        id = id.wrapping_add(1) & 0x7fff_ffff;
    }
    id
}

/// A title for a new panel: its label, or with ` (パネル)`, ` (パネル 2)`… when taken.
/// Sheet titles are unique ignoring case (`taken` holds them lower-cased).
fn title_for(label: &str, taken: &HashSet<String>) -> String {
    std::iter::once(label.to_string())
        .chain(std::iter::once(format!("{label} (パネル)")))
        .chain((2..).map(|n| format!("{label} (パネル {n})")))
        .find(|t| !taken.contains(&t.to_lowercase()))
        .unwrap_or_else(|| label.to_string())
}

/// Where the index goes.
enum IndexAt<'a> {
    /// An existing index sheet, or an empty sheet titled `▶パネル`.
    Existing(Read<'a>),
    /// None yet: one is created first in the tabs.
    New,
    /// An old panel sheet becomes the index: its cells are cleared first (a hidden copy
    /// keeps them), then the index is written into it.
    Migrate(Read<'a>),
}

/// An old panel sheet to migrate and where its labels are.
#[derive(Debug, Clone)]
pub struct Migration {
    pub title: String,
    /// Zero-based column of the target labels.
    pub label_col: u32,
    /// Zero-based column of the positions, if any.
    pub position_col: Option<u32>,
    /// 1-based first row of targets.
    pub first_row: u32,
}

/// The ranges `panels migrate` reads beside [`read_ranges`]: the old sheet, every column of
/// its grid.
pub fn migration_range(meta: &SpreadsheetMeta, title: &str) -> Option<String> {
    let sheet = meta.sheet(title)?;
    Some(a1::range(
        title,
        &format!("A1:{}{}", sheet.last_column(), sheet.row_count.max(1)),
    ))
}

/// Plans a sync.
pub fn plan(input: &SyncInput) -> Result<SyncPlan, SyncError> {
    plan_with(input, None, &[])
}

/// Plans a migration: `old_values` (of [`migration_range`]) names the targets; those the
/// index can resolve (a `[[targets]]` entry, a row of an existing index, or a panel) become
/// index rows and get their panels; the others are reported. The old sheet keeps its title
/// (links and menus into it keep working), its content moves to a hidden copy, and it
/// becomes the index, first in the tabs.
pub fn plan_migration(
    input: &SyncInput,
    migration: &Migration,
    old_values: &[Vec<Cell>],
) -> Result<SyncPlan, SyncError> {
    plan_with(input, Some(migration), old_values)
}

fn plan_with(
    input: &SyncInput,
    migration: Option<&Migration>,
    old_values: &[Vec<Cell>],
) -> Result<SyncPlan, SyncError> {
    let layout = input.layout;
    let mut report = SyncReport::default();
    let mut requests = Vec::new();

    let discovered = discover(input);
    let Discovered { reads, found, .. } = &discovered;
    for c in &found.conflicts {
        report.problems.push(c.to_string());
    }
    report.problems.extend(found.problems.iter().cloned());
    report
        .problems
        .extend(missing_lists(input.meta, input.catalog));

    let index_at = locate_index(input, migration, old_values, found, reads)?;

    let mut targets = gather_targets(input, found, &index_at, &mut report);

    let open = asked_for(
        input,
        migration,
        &index_at,
        found,
        &mut targets,
        &mut report,
    );

    // Sheets: ids and titles in use.
    let mut taken = Taken {
        ids: input.meta.sheets.iter().map(|s| s.sheet_id).collect(),
        titles: input
            .meta
            .sheets
            .iter()
            .map(|s| s.title.to_lowercase())
            .collect(),
    };

    // The index sheet first: new sheets are placed after it.
    let index_id = match &index_at {
        IndexAt::Existing(r) | IndexAt::Migrate(r) => r.meta.sheet_id,
        IndexAt::New => {
            let id = sheet_id_for(INDEX_SHEET, &taken.ids);
            taken.ids.insert(id);
            taken.titles.insert(INDEX_SHEET.to_lowercase());
            requests.push(Request::AddSheetWithId {
                sheet_id: id,
                title: INDEX_SHEET.into(),
                index: Some(0),
                row_count: (targets.len() as u32 + 1).max(100),
                column_count: last_col(layout) + 1,
                frozen_rows: 1,
            });
            id
        }
    };
    if let (Some(m), IndexAt::Migrate(old)) = (migration, &index_at) {
        let backup_id = sheet_id_for(&format!("{} (移行前)", m.title), &taken.ids);
        taken.ids.insert(backup_id);
        let backup_title = title_for(&format!("{} (移行前)", m.title), &taken.titles);
        taken.titles.insert(backup_title.to_lowercase());
        requests.push(Request::DuplicateSheet {
            source: old.meta.sheet_id,
            sheet_id: backup_id,
            title: backup_title.clone(),
        });
        requests.push(Request::UpdateSheetHidden {
            sheet_id: backup_id,
            hidden: true,
        });
        let height = old.values.len() as u32;
        let width = old.values.iter().map(Vec::len).max().unwrap_or(0) as u32;
        if height > 0 && width > 0 {
            let all = GridRange {
                sheet_id: old.meta.sheet_id,
                start_row: 0,
                end_row: height,
                start_col: 0,
                end_col: width,
            };
            requests.push(Request::UpdateCells {
                range: all,
                rows: vec![vec![Cell::Null; width as usize]; height as usize],
            });
            requests.push(Request::ClearCheckboxes { range: all });
        }
        report.problems.push(format!(
            "the old content of {} is kept in the hidden sheet {}",
            a1::quote_title(&m.title),
            a1::quote_title(&backup_title)
        ));
    }

    report.index_sheet = Some((
        index_id,
        match &index_at {
            IndexAt::Existing(r) | IndexAt::Migrate(r) => r.meta.title.clone(),
            IndexAt::New => INDEX_SHEET.to_string(),
        },
    ));
    let (panel_requests, panels) =
        plan_panels(input, &targets, &open, &discovered, &mut taken, &mut report);
    requests.extend(panel_requests);

    requests.extend(plan_index(
        input,
        &targets,
        &index_at,
        index_id,
        &discovered,
        &panels,
        &mut report,
    ));
    Ok(SyncPlan { requests, report })
}

/// The sheets of a sync taken so far (ids, and titles lowercased): new sheets get others.
struct Taken {
    ids: HashSet<i32>,
    titles: HashSet<String>,
}

/// What planning the panels learnt that the index shows: each target's last activity (a
/// serial), its panel's last result text, and the targets with more than one panel.
struct PanelsPlanned {
    activity: HashMap<String, Option<f64>>,
    last_text: HashMap<String, String>,
    conflicted: HashSet<String>,
}

/// The panels of a sync: each target's panel refreshed where its functions changed, shown
/// when asked for, hidden when idle, or created when asked for and missing; a target with
/// two panels is left alone.
fn plan_panels(
    input: &SyncInput,
    targets: &[Target],
    open: &HashSet<String>,
    discovered: &Discovered,
    taken: &mut Taken,
    report: &mut SyncReport,
) -> (Vec<Request>, PanelsPlanned) {
    let Discovered {
        reads,
        found,
        tables,
    } = discovered;
    let tz = input.tz;
    let now_serial = sheet_time::instant_to_serial(input.now, tz);
    let mut panel_requests = Vec::new();
    let mut activity: HashMap<String, Option<f64>> = HashMap::new();
    let mut last_text: HashMap<String, String> = HashMap::new();
    let mut conflicted: HashSet<String> = HashSet::new();
    for t in targets {
        // Each panel lists its own functions: the 一括 panel its rollouts.
        let own = SyncInput {
            catalog: input.catalog.of_panel(&t.label),
            ..input.clone()
        };
        let input = &own;
        let last = tables.get(t.label.as_str()).and_then(ix::last_result);
        let mut act = ix::later(
            t.entry.as_ref().and_then(|e| e.activity),
            last.as_ref().map(|(s, _)| *s),
        );
        if let Some((_, text)) = &last {
            last_text.insert(t.label.clone(), text.clone());
        }
        let asked = open.contains(&t.label);
        let busy = match input.queue {
            Some(rows) => !ix::state_text(&t.label, rows).is_empty(),
            None => t.entry.as_ref().is_some_and(|e| !e.state.is_empty()),
        };
        if found.conflicts.iter().any(|c| c.label == t.label) {
            // Which of the panels is the right one only a person can tell: none is
            // written, hidden or made anew.
            conflicted.insert(t.label.clone());
            activity.insert(t.label.clone(), act);
            continue;
        }
        match found.get(&t.label) {
            Some(p) => {
                let Some(read) = reads.get(p.title.as_str()) else {
                    continue;
                };
                report.panels.insert(t.label.clone(), p.sheet_id);
                let table = tables.get(t.label.as_str()).cloned().unwrap_or_default();
                let seen = Seen { asked, busy, act };
                act = plan_existing_panel(
                    input,
                    t,
                    p,
                    read,
                    &table,
                    seen,
                    &mut panel_requests,
                    report,
                );
            }
            None if asked && !input.catalog.functions.is_empty() => {
                plan_new_panel(input, t, taken, &mut panel_requests, report);
                act = Some(now_serial);
            }
            None => {}
        }
        activity.insert(t.label.clone(), act);
    }
    (
        panel_requests,
        PanelsPlanned {
            activity,
            last_text,
            conflicted,
        },
    )
}

/// What a sync knows of a target besides its panel: whether a person asked for the panel
/// (ticked it on the index), whether a job of it waits or runs, and its last activity.
#[derive(Clone, Copy)]
struct Seen {
    asked: bool,
    busy: bool,
    act: Option<f64>,
}

/// A target's existing panel `p` (`read` as the sync read it, `table` its function table):
/// refreshed where its functions changed, shown when asked for, hidden when idle. Returns
/// the target's last activity.
#[allow(clippy::too_many_arguments)] // The sync's parts a panel needs, each named.
fn plan_existing_panel(
    input: &SyncInput,
    t: &Target,
    p: &crate::panel::PanelRef,
    read: &Read<'_>,
    table: &PanelTable,
    seen: Seen,
    requests: &mut Vec<Request>,
    report: &mut SyncReport,
) -> Option<f64> {
    let layout = input.layout;
    let Seen {
        asked,
        busy,
        mut act,
    } = seen;
    if act.is_none() {
        act = read
            .cell(
                layout.generated_at_cell.row - 1,
                layout.generated_at_cell.col,
            )
            .as_f64();
    }
    if asked {
        act = Some(sheet_time::instant_to_serial(input.now, input.tz));
    }
    if !input.catalog.functions.is_empty() {
        let cells = panel_cells(layout, input.catalog, &t.label, &t.position, table, None)
            .changed(Some(read), &|c| c.clone());
        if cells.is_empty() {
            report.unchanged.push(t.label.clone());
        } else {
            // The grid first: a write past its end would fail the whole batch.
            grow(layout, input.catalog, read, table, requests);
            cells.requests(p.sheet_id, requests);
            panel_table_formats(input, p.sheet_id, table, requests);
            report.refreshed.push(t.label.clone());
        }
    }
    if read.meta.hidden && asked {
        requests.push(Request::UpdateSheetHidden {
            sheet_id: p.sheet_id,
            hidden: false,
        });
        report.shown.push(t.label.clone());
    } else if !read.meta.hidden
        && !asked
        && !busy
        && ix::is_idle(act, input.catalog.hide_after, input.now, input.tz)
    {
        requests.push(Request::UpdateSheetHidden {
            sheet_id: p.sheet_id,
            hidden: true,
        });
        report.hidden.push(t.label.clone());
    }
    act
}

/// A panel for target `t`, asked for and missing: a new sheet with an id and title no
/// other sheet has, its cells and formats.
fn plan_new_panel(
    input: &SyncInput,
    t: &Target,
    taken: &mut Taken,
    requests: &mut Vec<Request>,
    report: &mut SyncReport,
) {
    let layout = input.layout;
    let id = sheet_id_for(&t.label, &taken.ids);
    taken.ids.insert(id);
    let title = title_for(&t.label, &taken.titles);
    taken.titles.insert(title.to_lowercase());
    let rows = layout
        .last_row()
        .max(layout.first_row + input.catalog.functions.len() as u32);
    requests.push(Request::AddSheetWithId {
        sheet_id: id,
        title: title.clone(),
        index: None,
        row_count: rows,
        column_count: last_col(layout) + 1,
        frozen_rows: layout.header_row,
    });
    let now_serial = sheet_time::instant_to_serial(input.now, input.tz);
    let cells = panel_cells(
        layout,
        input.catalog,
        &t.label,
        &t.position,
        &PanelTable::default(),
        Some(now_serial),
    );
    cells.requests(id, requests);
    new_panel_formats(input, id, requests);
    report.created.push((t.label.clone(), title, id));
    report.panels.insert(t.label.clone(), id);
}

/// The index of a sync: one row per target (its tick, label, position, link, state, last
/// result and activity), written where it differs from what the index shows, with the
/// grid grown to fit, checkboxes on new rows, and the index first in the tabs.
fn plan_index(
    input: &SyncInput,
    targets: &[Target],
    index_at: &IndexAt,
    index_id: i32,
    discovered: &Discovered,
    panels: &PanelsPlanned,
    report: &mut SyncReport,
) -> Vec<Request> {
    let PanelsPlanned {
        activity,
        last_text,
        conflicted,
    } = panels;
    let layout = input.layout;
    let mut requests = Vec::new();
    let hidden_after = hidden_after(targets, discovered, report);
    let index_marker = layout.marker_cell;
    let mut cells = Cells::default();
    for (c, h) in ix::INDEX_HEADER.iter().enumerate() {
        cells.set(0, c as u32, text(*h));
    }
    cells.set(
        index_marker.row - 1,
        index_marker.col,
        text(ix::INDEX_MARKER),
    );
    for t in targets {
        let row = t.row;
        let entry = t.entry.as_ref();
        cells.set(row, ix::TICK, Cell::Bool(entry.is_some_and(|e| e.ticked)));
        cells.set(row, ix::LABEL, text(&t.label));
        cells.set(row, ix::POSITION, text(&t.position));
        let link = match report.panels.get(&t.label) {
            _ if conflicted.contains(&t.label) => text(ix::CONFLICT_TEXT),
            Some(_) if hidden_after.contains(t.label.as_str()) => text(ix::HIDDEN_TEXT),
            Some(id) => text(ix::link_formula(*id)),
            None => text(ix::NOT_CREATED_TEXT),
        };
        cells.formulas.insert((row, ix::LINK), link);
        let state = match input.queue {
            Some(rows) => ix::state_text(&t.label, rows),
            None => entry.map(|e| e.state.clone()).unwrap_or_default(),
        };
        cells.set(row, ix::STATE, text(state));
        let last = last_text
            .get(&t.label)
            .cloned()
            .or_else(|| entry.map(|e| e.last.clone()))
            .unwrap_or_default();
        cells.set(row, ix::LAST, text(last));
        let act = activity.get(&t.label).copied().flatten();
        cells.set(
            row,
            index_marker.col,
            act.map(Cell::from).unwrap_or(Cell::Null),
        );
    }
    let index_read = match index_at {
        IndexAt::Existing(r) => Some(r),
        _ => None,
    };
    let shows = |c: &Cell| match c.as_str() {
        Some(s) if s.starts_with('=') => text(ix::LINK_TEXT),
        _ => c.clone(),
    };
    let cells = cells.changed(index_read, &shows);
    let index_title = match index_at {
        IndexAt::Existing(r) | IndexAt::Migrate(r) => r.meta.title.clone(),
        IndexAt::New => INDEX_SHEET.to_string(),
    };
    let index_meta = input.meta.sheet(&index_title);
    if !cells.is_empty() || matches!(index_at, IndexAt::New | IndexAt::Migrate(_)) {
        let height = targets.iter().map(|t| t.row + 1).max().unwrap_or(1);
        if let Some(m) = index_meta {
            if (m.row_count.max(0) as u32) < height {
                requests.push(Request::SetRowCount {
                    sheet_id: index_id,
                    rows: height + 50,
                });
            }
            if (m.column_count.max(0) as u32) <= last_col(layout) {
                requests.push(Request::SetColumnCount {
                    sheet_id: index_id,
                    columns: (last_col(layout) + 1) as i32,
                });
            }
        }
        cells.requests(index_id, &mut requests);
        // Checkboxes on the rows new to the index (a person's rows keep what they have).
        for t in targets.iter().filter(|t| t.entry.is_none()) {
            requests.push(Request::SetCheckboxes {
                range: column_block(index_id, ix::TICK, t.row, t.row + 1),
            });
        }
        requests.push(Request::HideColumns {
            sheet_id: index_id,
            start: index_marker.col,
            end: index_marker.col + 1,
        });
        report.index = match index_at {
            IndexAt::New => IndexChange::Created,
            IndexAt::Migrate(_) => IndexChange::Migrated,
            IndexAt::Existing(_) => IndexChange::Rewritten,
        };
    }
    let at_front = index_meta.is_none_or(|m| m.index == 0);
    if !at_front || matches!(index_at, IndexAt::New | IndexAt::Migrate(_)) {
        requests.push(Request::PlaceSheet {
            sheet_id: index_id,
            index: 0,
            frozen_rows: 1,
        });
    }
    requests
}

/// The targets whose panel is hidden once this sync applies: hidden before and not shown
/// by it, or hidden by it.
fn hidden_after<'t>(
    targets: &'t [Target],
    discovered: &Discovered,
    report: &SyncReport,
) -> HashSet<&'t str> {
    let Discovered { reads, found, .. } = discovered;
    targets
        .iter()
        .filter(|t| {
            let was_hidden = found
                .get(&t.label)
                .and_then(|p| reads.get(p.title.as_str()))
                .is_some_and(|r| r.meta.hidden);
            (was_hidden && !report.shown.contains(&t.label)) || report.hidden.contains(&t.label)
        })
        .map(|t| t.label.as_str())
        .collect()
}

/// Where the index is (or goes): an existing index, a new sheet, or, for a migration, the
/// old panel sheet that becomes it; an error for a sheet that cannot be made the index.
fn locate_index<'a>(
    input: &SyncInput<'a>,
    migration: Option<&Migration>,
    old_values: &'a [Vec<Cell>],
    found: &PanelIndex,
    reads: &HashMap<&'a str, Read<'a>>,
) -> Result<IndexAt<'a>, SyncError> {
    Ok(match (migration, &found.index_sheet) {
        (Some(m), _)
            if found.by_title(&m.title).is_some()
                || found.conflicts.iter().any(|c| c.titles.contains(&m.title)) =>
        {
            return Err(SyncError::MigratePanel {
                title: a1::quote_title(&m.title),
                marker: input.layout.marker.clone(),
            })
        }
        (Some(m), Some((_, title))) if *title == m.title => {
            return Err(SyncError::AlreadyIndex {
                title: a1::quote_title(title),
            })
        }
        (Some(m), Some((_, title))) => {
            return Err(SyncError::IndexExists {
                index: a1::quote_title(title),
                title: a1::quote_title(&m.title),
            })
        }
        (Some(m), None) => match reads.get(m.title.as_str()) {
            Some(r) => IndexAt::Migrate(Read {
                meta: r.meta,
                values: old_values,
            }),
            None => {
                return Err(SyncError::NoSuchSheet {
                    title: a1::quote_title(&m.title),
                })
            }
        },
        (None, Some((_, title))) => match reads.get(title.as_str()) {
            Some(r) => IndexAt::Existing(Read {
                meta: r.meta,
                values: r.values,
            }),
            None => IndexAt::New,
        },
        (None, None) => match reads.get(INDEX_SHEET) {
            Some(r)
                if r.values
                    .iter()
                    .all(|row| row.iter().all(|c| cell_text(c).trim().is_empty())) =>
            {
                IndexAt::Existing(Read {
                    meta: r.meta,
                    values: r.values,
                })
            }
            Some(r) => {
                return Err(SyncError::UnmarkedIndex {
                    title: a1::quote_title(&r.meta.title),
                    cell: input.layout.marker_cell.to_string(),
                })
            }
            None => IndexAt::New,
        },
    })
}

/// The targets, in index order: the index's rows first, then the config's `[[targets]]`,
/// then panels the index does not list yet (placed below every row in use); each with its
/// position (the config's wins, a panel's G3 fills a gap).
fn gather_targets(
    input: &SyncInput,
    found: &PanelIndex,
    index_at: &IndexAt,
    report: &mut SyncReport,
) -> Vec<Target> {
    let layout = input.layout;
    let known_entries: Vec<IndexEntry> = match index_at {
        IndexAt::Existing(r) => ix::parse_entries(r.values, layout),
        _ => Vec::new(),
    };
    let mut targets: Vec<Target> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut add = |targets: &mut Vec<Target>,
                   label: &str,
                   position: &str,
                   entry: Option<&IndexEntry>,
                   report: &mut SyncReport| {
        let label = label.trim();
        if label.is_empty() || label == PANELS_TARGET {
            return;
        }
        if !seen.insert(label.to_string()) {
            if entry.is_some() {
                report.problems.push(format!(
                    "the index lists \"{label}\" more than once; the repeats were dropped"
                ));
            }
            return;
        }
        targets.push(Target {
            label: label.to_string(),
            position: position.trim().to_string(),
            entry: entry.cloned(),
            row: entry.map_or(0, |e| e.row - 1),
        });
    };
    for e in &known_entries {
        add(&mut targets, &e.label, &e.position, Some(e), report);
    }
    for t in &input.catalog.targets {
        add(&mut targets, &t.label, &t.position, None, report);
    }
    // With [[rollouts]], the 一括 panel: one row per rollout.
    if input.catalog.bulk.is_some() {
        add(&mut targets, crate::queue::ROLLOUT_TARGET, "", None, report);
    }
    for p in found.panels() {
        add(&mut targets, &p.label, &p.position, None, report);
    }
    // Targets new to the index go below every row in use (a person's notes included).
    let first_free = match index_at {
        IndexAt::Existing(r) => r
            .values
            .iter()
            .rposition(|row| row.iter().any(|c| !cell_text(c).trim().is_empty()))
            .map_or(1, |i| i as u32 + 1)
            .max(1),
        _ => 1,
    };
    for (row, t) in (first_free..).zip(targets.iter_mut().filter(|t| t.entry.is_none())) {
        t.row = row;
    }
    // Config positions win; a panel's G3 fills a gap.
    for t in &mut targets {
        if let Some(c) = input.catalog.targets.iter().find(|c| c.label == t.label) {
            if !c.position.is_empty() {
                t.position = c.position.clone();
            }
        }
        if t.position.is_empty() {
            if let Some(p) = found.get(&t.label) {
                t.position = p.position.clone();
            }
        }
    }
    targets
}

/// The targets whose panels are asked for: a migration's old rows, `--open` labels and
/// `--all`; labels that resolve to no target are reported as unresolved.
fn asked_for(
    input: &SyncInput,
    migration: Option<&Migration>,
    index_at: &IndexAt,
    found: &PanelIndex,
    targets: &mut [Target],
    report: &mut SyncReport,
) -> HashSet<String> {
    let mut open: Vec<String> = Vec::new();
    if let (Some(m), IndexAt::Migrate(old)) = (migration, index_at) {
        for row in old
            .values
            .iter()
            .skip(m.first_row.saturating_sub(1) as usize)
        {
            let label = cell_text(super::cell_in(row, m.label_col as usize))
                .trim()
                .to_string();
            if label.is_empty() {
                continue;
            }
            if targets.iter().any(|t| t.label == label) {
                if let Some(pc) = m.position_col {
                    let pos = cell_text(super::cell_in(row, pc as usize))
                        .trim()
                        .to_string();
                    if let Some(t) = targets.iter_mut().find(|t| t.label == label) {
                        if t.position.is_empty() {
                            t.position = pos;
                        }
                    }
                }
                open.push(label);
            } else if !report.unresolved.contains(&label) {
                report.unresolved.push(label);
            }
        }
    }
    for label in input.open {
        let label = label.trim();
        if targets.iter().any(|t| t.label == label) {
            open.push(label.to_string());
        } else if !label.is_empty() && !report.unresolved.iter().any(|u| u == label) {
            report.unresolved.push(label.to_string());
        }
    }
    if input.open_all {
        open.extend(targets.iter().map(|t| t.label.clone()));
    }
    // The 一括 panel is always there while rollouts are configured.
    if input.catalog.bulk.is_some() {
        open.push(crate::queue::ROLLOUT_TARGET.to_string());
    }
    let open: HashSet<String> = open.into_iter().collect();
    if input.catalog.functions.is_empty() && open.iter().any(|l| found.get(l).is_none()) {
        report.problems.push(
            "no panel was created: sheetq.toml has no [[functions]], and panels copy their functions from there"
                .into(),
        );
    }
    open
}

/// The sheets of one read: each sheet's values by title, the panels found by marker
/// (exactly as the daemon finds them), and their function tables by label.
struct Discovered<'a> {
    reads: HashMap<&'a str, Read<'a>>,
    found: PanelIndex,
    tables: HashMap<String, PanelTable>,
}

fn discover<'a>(input: &SyncInput<'a>) -> Discovered<'a> {
    let layout = input.layout;
    let mut reads: HashMap<&'a str, Read<'a>> = HashMap::new();
    for vr in input.values {
        let Some(title) = A1Range::parse(&vr.range).ok().and_then(|r| r.sheet) else {
            continue;
        };
        if let Some(meta) = input.meta.sheets.iter().find(|s| s.title == title) {
            reads.insert(
                &meta.title,
                Read {
                    meta,
                    values: &vr.values,
                },
            );
        }
    }
    let (top_left, bottom_right) = layout.marker_block();
    let markers: Vec<ValueRange> = reads
        .values()
        .map(|r| {
            let values = (top_left.row..=bottom_right.row)
                .map(|row| {
                    (top_left.col..=bottom_right.col)
                        .map(|col| r.cell(row - 1, col).clone())
                        .collect()
                })
                .collect();
            ValueRange::new(
                a1::range(&r.meta.title, &format!("{top_left}:{bottom_right}")),
                values,
            )
        })
        .collect();
    let found = PanelIndex::build(input.meta, &markers, layout);
    let tables = found
        .panels()
        .iter()
        .filter_map(|p| {
            let read = reads.get(p.title.as_str())?;
            Some((p.label.clone(), table_of(read, layout)))
        })
        .collect();
    Discovered {
        reads,
        found,
        tables,
    }
}

/// What `sheetq check` reports about the panels: label conflicts and markers without a
/// label, function rows whose command is not configured (`known` says which are), panels
/// that differ from `[[functions]]`, and an index title without its marker.
pub fn check(input: &SyncInput, known: impl Fn(&str) -> bool) -> Vec<String> {
    let Discovered { found, tables, .. } = discover(input);
    let mut out: Vec<String> = found.conflicts.iter().map(ToString::to_string).collect();
    out.extend(found.problems.iter().cloned());
    out.extend(missing_lists(input.meta, input.catalog));
    for p in found.panels() {
        let bulk = input.catalog.bulk.is_some() && p.label == crate::queue::ROLLOUT_TARGET;
        if !bulk && input.catalog.refuse_target(&p.label).is_some() {
            out.push(format!(
                "panel {} is for target {}, which is not among the [[targets]] of sheetq.toml, so every press there is refused: list the target there, or delete the panel",
                a1::quote_title(&p.title),
                crate::panel::catalog::shown(&p.label),
            ));
        }
        let Some(table) = tables.get(&p.label) else {
            continue;
        };
        for row in table.rows.iter().filter(|r| !r.function.is_empty()) {
            if let Some(f) = input.catalog.of_panel(&p.label).function(&row.function) {
                if crate::sheet_text::trim(&row.command) != f.command {
                    out.push(format!(
                        "panel {} row {} ({}): its hidden command is {}, not the config's {:?} for that function: the panel's rows were sorted or moved by a person (splitting the columns people edit from the hidden ones), or the config changed since the last sync; \
                         presses still run what the config says, and `sheetq panels sync` puts the rows back in line",
                        a1::quote_title(&p.title),
                        row.row,
                        crate::panel::catalog::shown(&row.function),
                        crate::panel::catalog::shown(&row.command),
                        f.command
                    ));
                    continue;
                }
            }
            let rollout =
                bulk && crate::sheet_text::trim(&row.command) == crate::queue::ROLLOUT_COMMAND;
            if !rollout && !known(&row.command) {
                out.push(format!(
                    "panel {} row {} ({}): command {} is not configured, so a press there ends as an error; \
                     add a [commands.…] entry for it or run `sheetq panels sync` to copy the functions of the config",
                    a1::quote_title(&p.title),
                    row.row,
                    crate::panel::catalog::shown(&row.function),
                    crate::panel::catalog::shown(&row.command),
                ));
            }
        }
    }
    match plan(input) {
        Err(e) => out.push(e.to_string()),
        Ok(plan) if !input.catalog.functions.is_empty() && !plan.report.refreshed.is_empty() => {
            out.push(format!(
                "panels that differ from what `sheetq panels sync` writes from the config ([[functions]], [[targets]] positions, markers, header): {}; run `sheetq panels sync`",
                plan.report.refreshed.join(", ")
            ))
        }
        Ok(_) => {}
    }
    out
}

/// A target as the index will list it.
struct Target {
    label: String,
    position: String,
    entry: Option<IndexEntry>,
    /// Its zero-based row on the index: where a person left it, or below every row in use
    /// for a target new to the index.
    row: u32,
}

/// A panel's function table from a whole-sheet read.
fn table_of(read: &Read, layout: &PanelLayout) -> PanelTable {
    let (left, right) = layout.table_span();
    let rows = (layout.first_row..=layout.last_row())
        .map(|row| {
            (left..=right)
                .map(|col| read.cell(row - 1, col).clone())
                .collect()
        })
        .collect();
    PanelTable::parse(&ValueRange::new(String::new(), rows), layout)
}

/// Every cell sheetq owns on a panel: title lines, markers, header, and one row per
/// function carrying over the tick, status, result and updated time of the row with its
/// label; rows the table had below the new end are emptied. `generated_at` is written on a
/// new panel only.
fn panel_cells(
    layout: &PanelLayout,
    catalog: &Catalog,
    label: &str,
    position: &str,
    table: &PanelTable,
    generated_at: Option<f64>,
) -> Cells {
    let cols = &layout.columns;
    let mut cells = Cells::default();
    cells.set(0, 0, text(label));
    cells.set(1, 0, text(format!("位置: {position}")));
    let at = |c: super::CellRef| (c.row - 1, c.col);
    let (r, c) = at(layout.marker_cell);
    cells.set(r, c, text(&layout.marker));
    let (r, c) = at(layout.label_cell);
    cells.set(r, c, text(label));
    let (r, c) = at(layout.position_cell);
    cells.set(r, c, text(position));
    if let Some(g) = generated_at {
        let (r, c) = at(layout.generated_at_cell);
        cells.set(r, c, Cell::from(g));
    }
    let header = layout.header_row - 1;
    for (col, h) in [
        (cols.tick, "▶"),
        (cols.function, "機能"),
        (cols.status, "状態"),
        (cols.result, "結果"),
        (cols.updated, "更新日時"),
        (cols.cancel, CANCEL_HEADER),
        (cols.approve, APPROVE_HEADER),
        (cols.command, "command"),
        (cols.args_json, "argsJSON"),
        (cols.flags, "システムフラグ"),
        (cols.inputs, "inputs"),
    ] {
        cells.set(header, col.0, text(h));
    }
    // One 承認 column per approver (`crate::panel::guard`): 承認, 承認 2, …; none without approvers.
    let approvers = crate::panel::guard::approval_columns(catalog);
    for (n, col) in layout.approve_columns().enumerate() {
        cells.set(
            header,
            col,
            match n {
                _ if n >= approvers => Cell::Null,
                0 => text(APPROVE_HEADER),
                _ => text(format!("{APPROVE_HEADER} {}", n + 1)),
            },
        );
    }
    // Each input slot: its label's column, then its value's.
    for (n, col) in layout.input_columns().enumerate() {
        let slot = n / 2 + 1;
        let name = if n % 2 == 0 { "入力" } else { "値" };
        cells.set(
            header,
            col,
            text(if slot == 1 {
                name.to_string()
            } else {
                format!("{name} {slot}")
            }),
        );
    }
    let first = layout.first_row - 1;
    for (i, f) in catalog.functions.iter().enumerate() {
        let row = first + i as u32;
        let old = table.find(&f.label, None);
        input_cells(layout, f, row, old, &mut cells);
        // A cell only some people may tick (`crate::panel::guard`) never gets a tick carried over:
        // the one found by label may sit in an open row someone labelled so, and the sync's
        // own write of it would pass for one of theirs. Such a cell is written unticked.
        let (press_open, stop_open) = (f.pressers().is_none(), f.stoppers().is_none());
        cells.set(
            row,
            cols.tick.0,
            Cell::Bool(press_open && old.is_some_and(|o| o.ticked)),
        );
        cells.set(
            row,
            cols.cancel.0,
            Cell::Bool(stop_open && old.is_some_and(|o| o.cancel_ticked)),
        );
        let approvers = f.approvers.as_ref().map_or(0, Vec::len);
        for (n, col) in layout.approve_columns().enumerate() {
            cells.set(
                row,
                col,
                if n < approvers {
                    // Each approver's own cell: never a tick carried over (see ▶ above).
                    Cell::Bool(false)
                } else {
                    Cell::Null
                },
            );
        }
        cells.set(row, cols.function.0, text(&f.label));
        cells.set(
            row,
            cols.status.0,
            text(old.map(|o| o.status.clone()).unwrap_or_default()),
        );
        cells.set(
            row,
            cols.result.0,
            text(old.map(|o| o.result.clone()).unwrap_or_default()),
        );
        cells.set(
            row,
            cols.updated.0,
            old.map(|o| o.updated.clone()).unwrap_or(Cell::Null),
        );
        cells.set(row, cols.command.0, text(&f.command));
        cells.set(row, cols.args_json.0, text(f.args_json()));
        cells.set(row, cols.flags.0, text(f.flags_text()));
        cells.set(row, cols.inputs.0, text(inputs_spec(layout, f)));
    }
    let end = first + catalog.functions.len() as u32;
    let old_end = table.rows.iter().map(|r| r.row).max().unwrap_or(0);
    for row in end..old_end {
        for col in cols
            .all()
            .map(|(_, c)| c.0)
            .into_iter()
            .chain(layout.approve_columns())
            .chain(layout.input_columns())
        {
            cells.set(row, col, Cell::Null);
        }
    }
    cells
}

/// The hidden inputs cell of function `f`: `[[name, label, column], …]` in slot order
/// (`column`: the 1-based column of the input's value, its label in the column left of it),
/// each with its cell's default fourth where the function says `reset_inputs`; empty
/// without inputs. The Apps Script intake knows the config and the layout only through this
/// protected cell: it never finds an input by a header anyone may edit.
fn inputs_spec(layout: &PanelLayout, f: &super::catalog::FunctionDef) -> String {
    if f.inputs.is_empty() {
        return String::new();
    }
    let entries: Vec<serde_json::Value> = f
        .inputs
        .iter()
        .enumerate()
        .map(|(n, d)| {
            let mut entry = vec![
                serde_json::Value::from(d.name.as_str()),
                serde_json::Value::from(d.label()),
                serde_json::Value::from(layout.input_cells(n).1 + 1),
            ];
            if f.reset_inputs {
                entry.push(match crate::inputs::default_cell(d) {
                    Cell::Null => Cell::from(""),
                    cell => cell,
                });
            }
            serde_json::Value::Array(entry)
        })
        .collect();
    serde_json::Value::Array(entries).to_string()
}

/// The input cells of function `f` on zero-based sheet row `row`: each input's label and
/// value, the value carried over from `old` (the row found by the function's label) where it
/// showed the same input, else the input's default; slots the function does not use are
/// emptied. A function only some people may press carries a value over only from its own
/// cell: one found by label may sit in an open row someone labelled so (see ▶ below).
fn input_cells(
    layout: &PanelLayout,
    f: &super::catalog::FunctionDef,
    row: u32,
    old: Option<&super::PanelRow>,
    cells: &mut Cells,
) {
    let old = old.filter(|o| f.pressers().is_none() || o.row == row + 1);
    for n in 0..layout.input_slots as usize {
        let (label_col, value_col) = layout.input_cells(n);
        let Some(d) = f.inputs.get(n) else {
            cells.set(row, label_col, Cell::Null);
            cells.set(row, value_col, Cell::Null);
            continue;
        };
        let kept = old
            .and_then(|o| o.input(n, d.label()))
            .filter(|v| !v.is_null() && v.as_str() != Some(""))
            .cloned();
        let value = kept.unwrap_or_else(|| crate::inputs::default_cell(d));
        cells.set(row, label_col, text(d.label()));
        cells.set(row, value_col, value);
    }
}

/// The validation and format of every input value cell of the function rows: a checkbox for
/// a bool, a dropdown for a choice, date and number rules, none for a text or an unused
/// slot; the rows from `end` to `old_end` (emptied) lose theirs.
fn input_formats(
    layout: &PanelLayout,
    catalog: &Catalog,
    meta: &SpreadsheetMeta,
    sheet_id: i32,
    old_end: u32,
    out: &mut Vec<Request>,
) {
    if layout.input_slots == 0 {
        return;
    }
    let first = layout.first_row - 1;
    for (i, f) in catalog.functions.iter().enumerate() {
        let row = first + i as u32;
        for n in 0..layout.input_slots as usize {
            let (_, col) = layout.input_cells(n);
            let range = column_block(sheet_id, col, row, row + 1);
            let d = f.inputs.get(n);
            out.push(match d {
                Some(d) if crate::inputs::is_checkbox(d) => Request::SetCheckboxes { range },
                Some(d) => match crate::inputs::validation(d) {
                    // A list whose sheet is missing: no dropdown (its rule could refuse the
                    // whole batch), and `missing_lists` says so.
                    Some(crate::sheets::Validation::Range(r))
                        if !crate::sheets::fits_grid(meta, &r) =>
                    {
                        Request::ClearCheckboxes { range }
                    }
                    Some(rule) => Request::SetValidation { range, rule },
                    None => Request::ClearCheckboxes { range },
                },
                None => Request::ClearCheckboxes { range },
            });
            if d.is_some_and(crate::inputs::is_date) {
                out.push(Request::SetDateTimeFormat {
                    range,
                    pattern: INPUT_DATE_PATTERN.into(),
                });
            }
        }
    }
    let end = first + catalog.functions.len() as u32;
    if old_end > end {
        for n in 0..layout.input_slots as usize {
            out.push(Request::ClearCheckboxes {
                range: column_block(sheet_id, layout.input_cells(n).1, end, old_end),
            });
        }
    }
}

/// Checkboxes and formats of a rewritten function table: the ▶ and ■ columns of the
/// function rows become checkboxes, rows below lose theirs.
fn panel_table_formats(
    input: &SyncInput,
    sheet_id: i32,
    table: &PanelTable,
    out: &mut Vec<Request>,
) {
    let (layout, catalog) = (input.layout, input.catalog);
    let first = layout.first_row - 1;
    let end = first + catalog.functions.len() as u32;
    let old_end = table.rows.iter().map(|r| r.row).max().unwrap_or(0);
    for col in [layout.columns.tick, layout.columns.cancel] {
        out.push(Request::SetCheckboxes {
            range: column_block(sheet_id, col.0, first, end),
        });
        if old_end > end {
            out.push(Request::ClearCheckboxes {
                range: column_block(sheet_id, col.0, end, old_end),
            });
        }
    }
    approve_boxes(layout, catalog, sheet_id, out);
    input_formats(layout, catalog, input.meta, sheet_id, old_end, out);
    if old_end > end {
        for col in layout.approve_columns() {
            out.push(Request::ClearCheckboxes {
                range: column_block(sheet_id, col, end, old_end),
            });
        }
    }
    out.push(Request::SetDateTimeFormat {
        range: column_block(sheet_id, layout.columns.updated.0, first, end),
        pattern: DATE_TIME_PATTERN.into(),
    });
}

/// The 承認 columns of the function rows: a checkbox in the `n`-th for the function's
/// `n`-th approver, none elsewhere.
fn approve_boxes(layout: &PanelLayout, catalog: &Catalog, sheet_id: i32, out: &mut Vec<Request>) {
    let first = layout.first_row - 1;
    for (i, f) in catalog.functions.iter().enumerate() {
        let row = first + i as u32;
        let approvers = f.approvers.as_ref().map_or(0, Vec::len);
        for (n, col) in layout.approve_columns().enumerate() {
            let range = column_block(sheet_id, col, row, row + 1);
            out.push(if n < approvers {
                Request::SetCheckboxes { range }
            } else {
                Request::ClearCheckboxes { range }
            });
        }
    }
}

/// Grows an existing panel's grid to hold the function rows (and the rows to empty below
/// them) and every column sheetq writes, before any of them is written.
fn grow(
    layout: &PanelLayout,
    catalog: &Catalog,
    read: &Read,
    table: &PanelTable,
    out: &mut Vec<Request>,
) {
    let sheet_id = read.meta.sheet_id;
    let old_end = table.rows.iter().map(|r| r.row).max().unwrap_or(0);
    let rows = (layout.first_row - 1 + catalog.functions.len() as u32).max(old_end);
    if (read.meta.row_count.max(0) as u32) < rows {
        out.push(Request::SetRowCount {
            sheet_id,
            rows: layout.last_row().max(rows),
        });
    }
    let columns = last_col(layout) + 1;
    if (read.meta.column_count.max(0) as u32) < columns {
        out.push(Request::SetColumnCount {
            sheet_id,
            columns: columns as i32,
        });
    }
}

/// Checkboxes, formats and hidden columns of a new panel.
fn new_panel_formats(input: &SyncInput, sheet_id: i32, out: &mut Vec<Request>) {
    let (layout, catalog) = (input.layout, input.catalog);
    let first = layout.first_row - 1;
    let end = first + catalog.functions.len() as u32;
    for col in [layout.columns.tick, layout.columns.cancel] {
        out.push(Request::SetCheckboxes {
            range: column_block(sheet_id, col.0, first, end),
        });
    }
    approve_boxes(layout, catalog, sheet_id, out);
    input_formats(layout, catalog, input.meta, sheet_id, 0, out);
    out.push(Request::SetDateTimeFormat {
        range: column_block(sheet_id, layout.columns.updated.0, first, end),
        pattern: DATE_TIME_PATTERN.into(),
    });
    let g = layout.generated_at_cell;
    out.push(Request::SetDateTimeFormat {
        range: GridRange::cell(sheet_id, g.row - 1, g.col),
        pattern: DATE_TIME_PATTERN.into(),
    });
    let cols = &layout.columns;
    let mut hidden: Vec<u32> = vec![
        layout.marker_cell.col,
        layout.label_cell.col,
        layout.position_cell.col,
        layout.generated_at_cell.col,
        cols.command.0,
        cols.args_json.0,
        cols.flags.0,
        cols.inputs.0,
    ];
    hidden.sort_unstable();
    hidden.dedup();
    let mut i = 0;
    while i < hidden.len() {
        let start = hidden[i];
        let mut end = start + 1;
        while i + 1 < hidden.len() && hidden[i + 1] == end {
            end += 1;
            i += 1;
        }
        out.push(Request::HideColumns {
            sheet_id,
            start,
            end,
        });
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::catalog::{FunctionDef, TargetDef};
    use crate::panel::fixtures::*;
    use serde_json::json;

    fn catalog() -> Catalog {
        Catalog {
            functions: vec![FunctionDef {
                label: "確認".into(),
                command: "echo".into(),
                args: toml::Table::new(),
                flags: vec![],
                allow: None,
                args_from_sheet: vec![],
                inputs: Vec::new(),
                reset_inputs: false,
                approvers: None,
                approvals: None,
                approval_expires: None,
                output: None,
                cancel: None,
            }],
            targets: vec![
                TargetDef {
                    label: "A".into(),
                    position: String::new(),
                    groups: Vec::new(),
                },
                TargetDef {
                    label: "B".into(),
                    position: String::new(),
                    groups: Vec::new(),
                },
            ],
            ..Catalog::default()
        }
    }

    /// An index listing A (ticked, waiting for the intake) and B, and no panel yet.
    fn index_values() -> ValueRange {
        let mut header: Vec<Cell> = ix::INDEX_HEADER.iter().map(|h| json!(h)).collect();
        header.push(json!(ix::INDEX_MARKER));
        ValueRange::new(
            "'▶パネル'!A1:J2000",
            vec![
                header,
                vec![
                    json!(true),
                    json!("A"),
                    json!(""),
                    json!(ix::NOT_CREATED_TEXT),
                ],
                vec![
                    json!(false),
                    json!("B"),
                    json!(""),
                    json!(ix::NOT_CREATED_TEXT),
                ],
            ],
        )
    }

    fn input<'a>(
        meta: &'a SpreadsheetMeta,
        values: &'a [ValueRange],
        catalog: &'a Catalog,
        layout: &'a PanelLayout,
        open: &'a [String],
    ) -> SyncInput<'a> {
        SyncInput {
            meta,
            values,
            catalog,
            layout,
            tz: tz(),
            now: at(0),
            open,
            open_all: false,
            queue: None,
        }
    }

    /// Every cell a request writes values into: (sheet id, zero-based row, column).
    fn written(requests: &[Request]) -> Vec<(i32, u32, u32)> {
        requests
            .iter()
            .flat_map(|r| match r {
                Request::UpdateCells { range, rows } | Request::WriteFormulas { range, rows } => {
                    rows.iter()
                        .enumerate()
                        .flat_map(|(i, row)| {
                            (0..row.len()).map(move |j| {
                                (
                                    range.sheet_id,
                                    range.start_row + i as u32,
                                    range.start_col + j as u32,
                                )
                            })
                        })
                        .collect::<Vec<_>>()
                }
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_sync_writes_only_the_cells_that_change_and_never_a_tick_it_read() {
        let meta = meta(&[(0, "▶パネル")]);
        let values = [index_values()];
        let (catalog, layout) = (catalog(), PanelLayout::default());
        let open = ["B".to_string()];
        let plan = plan(&input(&meta, &values, &catalog, &layout, &open))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.report.created.len(), 1, "{}", plan.report);
        let b_id = plan.report.panels["B"];
        let on_index: Vec<(u32, u32)> = written(&plan.requests)
            .into_iter()
            .filter(|(sheet, _, _)| *sheet == 0)
            .map(|(_, r, c)| (r, c))
            .collect();
        assert_eq!(
            on_index,
            [(2, 6), (2, 3)],
            "only B's activity and link change on the index; A's tick is not rewritten"
        );
        assert!(written(&plan.requests).iter().any(|(s, _, _)| *s == b_id));
    }

    #[test]
    fn a_second_sync_of_what_the_first_wrote_sends_nothing() {
        let meta = meta(&[(0, "▶パネル")]);
        let values = [index_values()];
        let (catalog, layout) = (catalog(), PanelLayout::default());
        let plan =
            plan(&input(&meta, &values, &catalog, &layout, &[])).unwrap_or_else(|e| panic!("{e}"));
        assert!(plan.requests.is_empty(), "{:?}", plan.requests);
        assert_eq!(plan.report.index, IndexChange::Unchanged);
    }

    #[test]
    fn new_sheet_titles_avoid_taken_ones_ignoring_case_and_ids_follow_the_label() {
        let taken: HashSet<String> = ["a", "a (パネル)"].iter().map(|s| s.to_string()).collect();
        assert_eq!(title_for("A", &taken), "A (パネル 2)");
        let ids = HashSet::new();
        assert_eq!(
            sheet_id_for("server-1", &ids),
            sheet_id_for("server-1", &ids)
        );
        let first = sheet_id_for("server-1", &ids);
        let moved = sheet_id_for("server-1", &[first].into_iter().collect());
        assert_ne!(moved, first, "a taken id moves on");
        assert!(moved > 0);
    }

    #[test]
    fn a_list_the_spreadsheet_does_not_hold_gets_no_dropdown_and_is_named() {
        let mut c = catalog();
        c.functions[0].inputs = crate::inputs::from_toml(
            r#"inputs = [{ name = "build", type = "choice", choices_from = "'リリース'!A2:A" }]"#,
        );
        let layout = PanelLayout {
            input_slots: 1,
            ..PanelLayout::default()
        };
        let rules = |m: &SpreadsheetMeta| {
            let mut out = Vec::new();
            input_formats(&layout, &c, m, 5, 0, &mut out);
            out
        };
        let without = meta(&[(5, "P")]);
        assert!(
            matches!(rules(&without)[..], [Request::ClearCheckboxes { .. }]),
            "no range rule that could refuse the batch: {:?}",
            rules(&without)
        );
        let problems = missing_lists(&without, &c);
        assert!(
            problems.len() == 1 && problems[0].contains("'リリース'!A2:A"),
            "{problems:?}"
        );
        let with = meta(&[(5, "P"), (6, "リリース")]);
        assert!(
            matches!(
                &rules(&with)[..],
                [Request::SetValidation { rule: crate::sheets::Validation::Range(r), .. }] if r == "'リリース'!A2:A"
            ),
            "{:?}",
            rules(&with)
        );
        assert!(missing_lists(&with, &c).is_empty());
    }

    #[test]
    fn a_tick_is_never_carried_into_a_cell_only_some_people_may_tick() {
        // An editor relabelled the function's row and wrote its label, ticked, into an open
        // row below: carried over by label, the tick would land in the guarded cells.
        let row = |n: u32, function: &str, ticked: bool| super::super::PanelRow {
            row: n,
            ticked,
            cancel_ticked: ticked,
            approve_ticks: if ticked { vec![0] } else { Vec::new() },
            function: function.into(),
            status: String::new(),
            result: String::new(),
            updated: Cell::Null,
            command: String::new(),
            args_json: String::new(),
            flags: String::new(),
            inputs: Vec::new(),
        };
        let table = PanelTable {
            rows: vec![row(8, "ほか", false), row(20, "確認", true)],
        };
        let layout = PanelLayout::default();
        let (tick, stop, approve) = (0, layout.columns.cancel.0, layout.columns.approve.0);
        let open = catalog();
        let cells = panel_cells(&layout, &open, "A", "", &table, None);
        assert_eq!(
            (cells.plain.get(&(7, tick)), cells.plain.get(&(7, stop))),
            (Some(&Cell::Bool(true)), Some(&Cell::Bool(true))),
            "a function open to everyone keeps its ticks by label"
        );
        let mut gated = catalog();
        gated.functions[0].allow = Some(vec!["alice@example.com".into()]);
        gated.functions[0].approvers = Some(vec!["lead@example.com".into()]);
        let cells = panel_cells(&layout, &gated, "A", "", &table, None);
        for (what, col) in [("▶", tick), ("■", stop), ("承認", approve)] {
            assert_eq!(
                cells.plain.get(&(7, col)),
                Some(&Cell::Bool(false)),
                "the guarded {what} cell is written unticked"
            );
        }
    }
}
