//! Intake by polling (`intake = "poll"`, docs/design.md §9): ticked ▶ boxes become queue rows,
//! ticked ■ boxes requests to stop the job of their function (docs/design.md §2.1).
//!
//! [`plan_intake`] decides; the daemon carries the plan out. So that a tick is never lost
//! or doubled, also with two daemons polling the same panels, the daemon must read the
//! tables and the queue *under the sheet lease* and append the new rows and clear the boxes
//! before it releases the lease: the other daemon then reads the cleared boxes and the new
//! rows together. Appending before clearing means a crash in between leaves a ticked box
//! whose row exists; the next pass meets the duplicate guard and only clears it.
//!
//! Between the read and the clear a person could tick the same box again. That second tick
//! is absorbed by the clear, which is what the duplicate guard would have done with it
//! anyway: the function already has a `待機` row. Ticks on other rows are not touched.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::catalog::{shown, Catalog, PANELS_COMMAND, PANELS_FUNCTION, PANELS_TARGET};
use super::index_sheet::{self, IndexEntry};
use super::{cell_range, PanelIndex, PanelLayout, PanelTable};
use crate::cancel;
use crate::claim;
use crate::panel::guard::{Guards, Role};
use crate::queue::{Column, ColumnMap, Snapshot, State, StateWords};
use crate::sheet_time;
use crate::sheets::{Cell, ValueRange};

/// The longest index label a tick opens a panel for: the index is open to every editor,
/// and what a tick takes in is copied into a queue row, so a label past this (no target
/// is named so) is cleared and left out, never copied. A row is thus far below Google's
/// 50,000 characters a cell, which would refuse the append and with it every press of
/// the pass.
pub const MAX_LABEL_CHARS: usize = 100;

/// The most labels one panel job takes; further ticks wait for the next pass.
pub const MAX_LABELS_PER_JOB: usize = 100;

/// How much of the labels the job's 機能ラベル shows.
const MAX_NAMED_CHARS: usize = 500;
/// A new `待機` queue row: one press (intake), one job from the shell (`sheetq enqueue`), or
/// the next step of a job that asked to continue. The one place a queue row is laid out.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub job_id: String,
    /// When the daemon saw the tick.
    pub received_at: DateTime<Utc>,
    /// Polling cannot know who ticked the box: always empty, which every rule accepts.
    pub requester: String,
    pub panel_sheet: String,
    /// The panel row pressed (a hint for later look-ups); empty for jobs from the shell.
    pub panel_row: Option<u32>,
    pub target: String,
    pub function: String,
    pub command: String,
    pub args_json: String,
    pub flags: String,
    /// The inputs for people (入力, `version=1.2.4`); empty for a function without.
    pub inputs: String,
}

impl NewJob {
    /// The row's cells laid out by the queue's header map (columns found by name), as wide
    /// as the map: dates as serials in the sheet's zone, 状態 = the waiting word, columns
    /// sheetq does not know left empty. Appended RAW, so text stays text.
    pub fn to_row(&self, columns: &ColumnMap, states: &StateWords, tz: Tz) -> Vec<Cell> {
        let mut row = vec![Cell::String(String::new()); columns.width() as usize];
        let mut set = |c: Column, v: Cell| {
            if let Some(slot) = row.get_mut(columns.index(c) as usize) {
                *slot = v;
            }
        };
        let text = |s: &str| Cell::String(s.to_string());
        set(Column::JobId, text(&self.job_id));
        set(
            Column::ReceivedAt,
            Cell::from(sheet_time::instant_to_serial(self.received_at, tz)),
        );
        set(Column::Requester, text(&self.requester));
        set(Column::PanelSheet, text(&self.panel_sheet));
        set(
            Column::PanelRow,
            self.panel_row.map(Cell::from).unwrap_or_else(|| text("")),
        );
        set(Column::Target, text(&self.target));
        set(Column::Function, text(&self.function));
        set(Column::Command, text(&self.command));
        set(Column::ArgsJson, text(&self.args_json));
        set(Column::Flags, text(&self.flags));
        set(Column::Inputs, text(&self.inputs));
        set(Column::State, text(&states.waiting));
        row
    }
}

/// What one intake pass does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntakePlan {
    /// Rows to append, in panel (tab) then row order.
    pub new_rows: Vec<NewJob>,
    /// Every ticked box, set back to `false`.
    pub clears: Vec<ValueRange>,
    /// Status cells of refused presses: the duplicate guard's answer.
    pub duplicates: Vec<ValueRange>,
    /// Status cells of presses that cannot become a job (a tick on a row without a function
    /// label), saying why.
    pub rejected: Vec<ValueRange>,
    /// ■ ticks: per job to stop, the 中止要求 text asking for it (who cannot be known by
    /// polling: 不明).
    pub cancels: Vec<(String, String)>,
    /// 承認 ticks in guarded cells: per job to approve, the approver whose cell it was.
    pub approvals: Vec<(String, String)>,
    /// Ticks refused because their cell is not guarded for the people the function names
    /// (each also in `rejected`): (panel title, function, what was ticked).
    pub unguarded: Vec<(String, String, Role)>,
}

impl IntakePlan {
    pub fn is_empty(&self) -> bool {
        self.clears.is_empty()
    }
}

/// The status text of a tick on a row with no function label.
pub const NO_FUNCTION_TEXT: &str = "❌ エラー: 機能ラベルが空のため受け付けられません";

/// Ticks on the index (`▶パネル`): one panel job for the ticked labels not already asked
/// for by a waiting or running panel job, and every tick cleared. Labels that are no target
/// are left to the job, which reports them.
pub fn plan_index_intake(
    title: &str,
    entries: &[IndexEntry],
    snapshot: &Snapshot,
    now: DateTime<Utc>,
    new_job_id: impl FnOnce() -> String,
) -> IntakePlan {
    let mut plan = IntakePlan::default();
    let asked: HashSet<String> = snapshot
        .rows
        .iter()
        .filter(|r| r.command.trim() == PANELS_COMMAND)
        .filter(|r| r.state.is(State::Waiting) || r.state.is(State::Running))
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.args_json).ok())
        .flat_map(|v| {
            v.get("open")
                .and_then(|o| o.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|l| l.as_str().map(|s| s.trim().to_string()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect();
    let mut labels: Vec<String> = Vec::new();
    for e in entries.iter().filter(|e| e.ticked) {
        if labels.len() == MAX_LABELS_PER_JOB {
            // Left ticked: the next pass takes them.
            break;
        }
        plan.clears.push(ValueRange::new(
            cell_range(title, index_sheet::TICK, index_sheet::TICK, e.row),
            vec![vec![Cell::Bool(false)]],
        ));
        let fits = e.label.chars().count() <= MAX_LABEL_CHARS;
        if fits && !e.label.is_empty() && !asked.contains(&e.label) && !labels.contains(&e.label) {
            labels.push(e.label.clone());
        }
    }
    if !labels.is_empty() {
        // 機能ラベル names them for people; the args carry them whole.
        let named = crate::sheet_text::one_line(&labels.join(", "), MAX_NAMED_CHARS);
        plan.new_rows.push(NewJob {
            job_id: new_job_id(),
            received_at: now,
            requester: String::new(),
            panel_sheet: title.to_string(),
            panel_row: None,
            target: PANELS_TARGET.into(),
            function: format!("{PANELS_FUNCTION}: {named}"),
            command: PANELS_COMMAND.into(),
            args_json: serde_json::json!({ "open": labels }).to_string(),
            flags: String::new(),
            inputs: String::new(),
        });
    }
    plan
}

/// What one intake pass reads from: the panels' tables, under the lease, and what the
/// config and the spreadsheet's protections say of who may tick where.
#[derive(Debug, Clone, Copy)]
pub struct Ticks<'a> {
    pub tables: &'a HashMap<String, PanelTable>,
    pub index: &'a PanelIndex,
    pub snapshot: &'a Snapshot,
    pub now: DateTime<Utc>,
    pub tz: Tz,
    pub layout: &'a PanelLayout,
    pub catalog: &'a Catalog,
    /// The cells the spreadsheet guards exactly as the config says (`crate::panel::guard`).
    pub guards: &'a Guards,
}

/// The status text of a tick in a cell that a function reserves for some people but that
/// is not protected so (a tick there proves nothing of who made it).
pub fn unguarded_text(role: Role, function: &str) -> String {
    if role == Role::Inputs {
        return format!(
            "❌ エラー: {} の入力欄は押せる人だけが変えられるよう保護されていないため受け付けませんでした（sheetq panels sync で保護されます）",
            shown(function)
        );
    }
    format!(
        "❌ エラー: {} の {role} は許可された人だけが押せるよう保護されていないため受け付けませんでした（sheetq panels sync で保護されます）",
        shown(function)
    )
}

/// Turns the ticks of this pass into a plan: one queue row per ticked function unless
/// `claim::duplicate_of` finds a `待機`/`実行中` row for the same target and function (then
/// the status cell shows the duplicate message); two ticks of one function in a pass make
/// one row. Every ticked box is cleared. Only panels in `index` are polled, so a panel
/// whose label is in conflict keeps its ticks until the conflict is fixed.
///
/// Who ticked cannot be known by polling; who *could* have ticked can (`crate::panel::guard`). A
/// function that names who may press (`allow`), approve (`approvers`) or stop (`cancel`)
/// takes a tick only from a cell the spreadsheet guards exactly for them: a press then
/// carries the people Google vouched for as its 依頼者, an approval names the one approver
/// whose cell it is. A tick in such a cell left open is refused on the row's 状態.
pub fn plan_intake(t: &Ticks<'_>, mut new_job_id: impl FnMut() -> String) -> IntakePlan {
    let mut plan = IntakePlan::default();
    let mut taken: HashSet<(String, String)> = HashSet::new();
    let cols = &t.layout.columns;
    for panel in t.index.panels() {
        let Some(table) = t.tables.get(&panel.label) else {
            continue;
        };
        // The 一括 panel's functions are the rollouts.
        let catalog = t.catalog.of_panel(&panel.label);
        let status = |row: u32, text: String| {
            ValueRange::new(
                cell_range(&panel.title, cols.status.0, cols.status.0, row),
                vec![vec![Cell::String(text)]],
            )
        };
        let clear = |col: u32, row: u32| {
            ValueRange::new(
                cell_range(&panel.title, col, col, row),
                vec![vec![Cell::Bool(false)]],
            )
        };
        // Whether the tick in (`row`, `col`) may count for `role` of the function of the
        // row: the function names nobody for it, or the cell is guarded for them.
        let guarded = |row: &super::PanelRow, col: u32, role: Role| {
            let f = catalog.function(&row.function);
            let people = f.and_then(|f| match role {
                Role::Press | Role::Inputs => f.pressers(),
                Role::Stop => f.stoppers(),
                Role::Approve(_) => None,
            });
            people.is_none()
                || t.guards
                    .holds(&panel.title, row.row, col, &row.function, role)
        };
        for row in table.rows.iter().filter(|r| r.cancel_ticked) {
            plan.clears.push(clear(cols.cancel.0, row.row));
            if !guarded(row, cols.cancel.0, Role::Stop) {
                plan.rejected
                    .push(status(row.row, unguarded_text(Role::Stop, &row.function)));
                plan.unguarded
                    .push((panel.title.clone(), row.function.clone(), Role::Stop));
                continue;
            }
            // A tick on a function with nothing waiting or running changes nothing.
            if let Some(job) = claim::job_to_stop(t.snapshot, &panel.label, &row.function) {
                if !crate::cancel::asked(job) {
                    let request = cancel::Request::new("", t.now, &job.job_id);
                    plan.cancels
                        .push((job.job_id.clone(), request.cell_text(t.tz)));
                }
            }
        }
        for row in table.rows.iter() {
            for &n in &row.approve_ticks {
                let col = cols.approve.0 + n as u32;
                plan.clears.push(clear(col, row.row));
                let approver = catalog
                    .function(&row.function)
                    .and_then(|f| f.approvers.as_ref())
                    .and_then(|a| a.get(n));
                // Only a cell that this one approver (and the owner) may edit names them.
                let Some(approver) = approver.filter(|_| {
                    t.guards
                        .holds(&panel.title, row.row, col, &row.function, Role::Approve(n))
                }) else {
                    plan.rejected.push(status(
                        row.row,
                        unguarded_text(Role::Approve(n), &row.function),
                    ));
                    plan.unguarded.push((
                        panel.title.clone(),
                        row.function.clone(),
                        Role::Approve(n),
                    ));
                    continue;
                };
                if let Some(job) = job_to_approve(t.snapshot, &panel.label, &row.function) {
                    plan.approvals
                        .push((job.job_id.clone(), approver.trim().to_lowercase()));
                }
            }
        }
        for row in table.rows.iter().filter(|r| r.ticked) {
            plan.clears.push(clear(cols.tick.0, row.row));
            if row.function.is_empty() {
                plan.rejected
                    .push(status(row.row, NO_FUNCTION_TEXT.to_string()));
                continue;
            }
            if !guarded(row, cols.tick.0, Role::Press) {
                plan.rejected
                    .push(status(row.row, unguarded_text(Role::Press, &row.function)));
                plan.unguarded
                    .push((panel.title.clone(), row.function.clone(), Role::Press));
                continue;
            }
            if let Some(existing) = claim::duplicate_of(t.snapshot, &panel.label, &row.function) {
                plan.duplicates
                    .push(status(row.row, claim::duplicate_message(existing, t.tz)));
                continue;
            }
            if !taken.insert((panel.label.clone(), row.function.clone())) {
                continue;
            }
            let function = catalog.function(&row.function);
            let requester = function
                .and_then(|f| f.pressers())
                .map(|p| p.vouched_requester())
                .unwrap_or_default();
            // A configured function runs what the config says, whatever the row's hidden
            // cells hold: a person who sorted the panel's visible columns left them on other
            // functions' rows, and the press still runs its own function. Without
            // [[functions]] the hidden cells are all there is.
            let inputs = match function {
                Some(f) if !f.inputs.is_empty() => {
                    let first = t.layout.input_cells(0).0;
                    if !guarded(row, first, Role::Inputs) {
                        plan.rejected
                            .push(status(row.row, unguarded_text(Role::Inputs, &row.function)));
                        plan.unguarded.push((
                            panel.title.clone(),
                            row.function.clone(),
                            Role::Inputs,
                        ));
                        continue;
                    }
                    match pressed_inputs(f, row) {
                        Ok(values) => values,
                        Err(text) => {
                            plan.rejected.push(status(row.row, text));
                            continue;
                        }
                    }
                }
                _ => serde_json::Map::new(),
            };
            if let Some(f) = function.filter(|f| f.reset_inputs) {
                for (n, d) in f.inputs.iter().enumerate() {
                    let col = t.layout.input_cells(n).1;
                    let value = match crate::inputs::default_cell(d) {
                        Cell::Null => Cell::String(String::new()),
                        cell => cell,
                    };
                    plan.clears.push(ValueRange::new(
                        cell_range(&panel.title, col, col, row.row),
                        vec![vec![value]],
                    ));
                }
            }
            let (command, args_json, flags) = match function {
                Some(f) => (f.command.clone(), f.args_json_with(&inputs), f.flags_text()),
                None => (
                    row.command.clone(),
                    row.args_json.clone(),
                    press_flags(&row.flags),
                ),
            };
            plan.new_rows.push(NewJob {
                job_id: new_job_id(),
                received_at: t.now,
                requester,
                panel_sheet: panel.title.clone(),
                panel_row: Some(row.row),
                target: panel.label.clone(),
                function: row.function.clone(),
                inputs: catalog.inputs_text(&row.function, &args_json),
                command,
                args_json,
                flags,
            });
        }
    }
    plan
}

/// The values a press of `f` takes from its panel row `row`, by input name, each checked
/// by its rule as far as the press can tell (its list from a range is the admission's to
/// check); an empty cell is left out, so the input's default applies. `Err` with the row's
/// 状態 text: an input whose label cell does not show it (the row is not laid out as the
/// config says, and a value is never guessed), or a value its rule refuses. A refused value
/// never reaches the queue, where a cell past Google's limit would refuse the whole append
/// and with it every press of the pass.
fn pressed_inputs(
    f: &super::catalog::FunctionDef,
    row: &super::PanelRow,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut values = serde_json::Map::new();
    for (n, d) in f.inputs.iter().enumerate() {
        let cell = row
            .input(n, d.label())
            .ok_or_else(|| missing_input_text(&f.label, d.label()))?;
        let value = crate::inputs::from_cell(d, cell);
        if value.is_null() || value.as_str().is_some_and(|s| s.trim().is_empty()) {
            continue;
        }
        let value = crate::inputs::value_of(d, &value, None)
            .map_err(|why| bad_input_text(&f.label, &why))?;
        values.insert(d.name.clone(), value);
    }
    Ok(values)
}

/// A press refused for a value its input's rule refuses (`why`, naming the input and the
/// rule).
pub fn bad_input_text(function: &str, why: &str) -> String {
    format!(
        "❌ エラー: {} の入力が受け付けられません: {}（値を直してから押し直してください）",
        shown(function),
        crate::sheet_text::one_line(why, 160)
    )
}

/// A press refused because its row does not show input `label` (the config's) where
/// `panels sync` puts it.
pub fn missing_input_text(function: &str, label: &str) -> String {
    format!(
        "❌ エラー: {} の入力「{label}」が見当たらないため受け付けませんでした（sheetq panels sync で入力欄が作り直されます）",
        shown(function)
    )
}

/// The job a 承認 tick on the panel row of `function` approves: the newest of its target
/// and function waiting for approval, the one the panel row shows as 承認待ち (never a
/// row not turned yet, which the approver has not seen).
fn job_to_approve<'a>(
    snapshot: &'a Snapshot,
    target: &str,
    function: &str,
) -> Option<&'a crate::queue::QueueRow> {
    snapshot
        .rows
        .iter()
        .filter(|r| r.state.is(State::AwaitingApproval))
        .filter(|r| {
            r.target_key() == crate::sheet_text::trim(target)
                && crate::sheet_text::trim(&r.function) == crate::sheet_text::trim(function)
        })
        .max_by_key(|r| (r.received_at, r.row))
}

/// The flags a press takes from its panel row: all but `continuation`, which only sheetq
/// writes, on the row a command's `continue` appends. A panel's hidden cells are the sheet's,
/// and a sheet that merely looks like a panel is anyone's: a continuation's args are trusted
/// on a protected queue, so no press may bring the flag in, nor anything that looks like it
/// (`continuation` plus U+0085, fullwidth, another case: [`crate::sheet_text`]). The daemon
/// trusts a continuation only by sheetq's own mark on the queue (`provenance`), never by
/// this cell; dropping the word here keeps a press from being refused for carrying it.
pub fn press_flags(flags: &str) -> String {
    flags
        .split(',')
        .map(crate::sheet_text::trim)
        .filter(|f| {
            !f.is_empty() && crate::sheet_text::skeleton(f) != crate::queue::CONTINUATION_FLAG
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::fixtures::*;
    use crate::queue::{parse_rows, HeaderNames, RowState, State};
    use serde_json::json;

    /// A fixture shared with the Apps Script intake's tests (`apps-script/fixtures/`): a
    /// header, a time zone, a press and the queue row both intakes must write for it.
    struct SharedFixture {
        json: serde_json::Value,
        columns: ColumnMap,
        tz: Tz,
        received_at: DateTime<Utc>,
    }

    impl SharedFixture {
        fn load(text: &str) -> Self {
            let json: serde_json::Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("the shared fixture does not parse: {e}"));
            let header: Vec<Cell> = json["header"].as_array().cloned().unwrap_or_default();
            let columns = ColumnMap::from_header(&header, &HeaderNames::default())
                .unwrap_or_else(|e| panic!("fixture header: {e}"));
            let tz: Tz = json["timeZone"]
                .as_str()
                .and_then(|z| z.parse().ok())
                .unwrap_or_else(|| panic!("fixture time zone"));
            let received_at = DateTime::parse_from_rfc3339(
                json["press"]["receivedAt"].as_str().unwrap_or_default(),
            )
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|e| panic!("fixture receivedAt: {e}"));
            Self {
                json,
                columns,
                tz,
                received_at,
            }
        }

        /// A text field of the press.
        fn text(&self, key: &str) -> String {
            self.json["press"][key]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }

        /// The fixture's press as the job sheetq's intake makes of it.
        fn press(&self) -> NewJob {
            let text = |k: &str| self.text(k);
            NewJob {
                job_id: text("jobId"),
                received_at: self.received_at,
                requester: text("requester"),
                panel_sheet: text("panelSheet"),
                panel_row: self.json["press"]["panelRow"].as_u64().map(|r| r as u32),
                target: text("target"),
                function: text("fn"),
                command: text("command"),
                args_json: text("argsJson"),
                flags: text("flags"),
                inputs: String::new(),
            }
        }

        fn expected_row(&self) -> Vec<Cell> {
            self.json["row"].as_array().cloned().unwrap_or_default()
        }
    }

    /// The press of `apps-script/fixtures/press.json`, whose row the Apps Script intake's
    /// test (`node --test apps-script/`) also checks: both intakes write the same row.
    #[test]
    fn a_press_becomes_the_row_the_apps_script_intake_writes_too() {
        let f = SharedFixture::load(include_str!("../../apps-script/fixtures/press.json"));
        let expected = f.expected_row();
        assert_eq!(
            f.press().to_row(&f.columns, &StateWords::default(), f.tz),
            expected,
            "sheetq's row for the press differs from the shared fixture (and so from the Apps Script intake's)"
        );
    }

    /// Each layout of `apps-script/fixtures/queue-layouts.json` (which the Apps Script
    /// intake's test lays the same press out by): every value under its own header.
    #[test]
    fn a_press_is_laid_out_by_name_in_every_shared_layout() {
        let f = SharedFixture::load(include_str!("../../apps-script/fixtures/press.json"));
        let layouts: serde_json::Value = serde_json::from_str(include_str!(
            "../../apps-script/fixtures/queue-layouts.json"
        ))
        .unwrap_or_else(|e| panic!("the layouts fixture does not parse: {e}"));
        let default_header = f.json["header"].as_array().cloned().unwrap_or_default();
        let expected = f.expected_row();
        let job = f.press();
        let layouts = layouts["layouts"].as_object().cloned().unwrap_or_default();
        assert!(layouts.len() >= 7, "the fixture lists the layouts");
        for (name, header) in layouts {
            let header = header.as_array().cloned().unwrap_or_default();
            let columns = ColumnMap::from_header(&header, &HeaderNames::default())
                .unwrap_or_else(|e| panic!("layout {name}: {e}"));
            let row = job.to_row(&columns, &StateWords::default(), f.tz);
            for (i, h) in header.iter().enumerate().take(row.len()) {
                let want = default_header
                    .iter()
                    .position(|d| d == h)
                    .map_or_else(|| json!(""), |k| expected[k].clone());
                assert_eq!(row[i], want, "layout {name}, column {h}");
            }
        }
    }

    #[test]
    fn an_index_tick_becomes_the_row_the_apps_script_intake_writes_too() {
        let f = SharedFixture::load(include_str!("../../apps-script/fixtures/index-press.json"));
        let text = |k: &str| f.text(k);
        let (columns, tz, received_at) = (&f.columns, f.tz, f.received_at);
        let entry = index_entry(2, true, &text("label"));
        let plan = plan_index_intake(
            &text("indexSheet"),
            &[entry],
            &snapshot(vec![]),
            received_at,
            || text("jobId"),
        );
        assert_eq!(plan.new_rows.len(), 1);
        let expected = f.expected_row();
        assert_eq!(
            plan.new_rows[0].to_row(columns, &StateWords::default(), tz),
            expected,
            "sheetq's row for an index tick differs from the shared fixture (and so from the Apps Script intake's)"
        );
    }

    fn index_entry(row: u32, ticked: bool, label: &str) -> IndexEntry {
        IndexEntry {
            row,
            ticked,
            label: label.into(),
            position: String::new(),
            link: String::new(),
            state: String::new(),
            last: String::new(),
            activity: None,
        }
    }

    #[test]
    fn index_ticks_of_one_pass_are_one_panel_job_and_every_tick_is_cleared() {
        let mut asked = queue_row(2, State::Waiting, PANELS_TARGET, "パネルを開く: B");
        asked.command = PANELS_COMMAND.into();
        asked.args_json = r#"{"open":["B"]}"#.into();
        let entries = [
            index_entry(2, true, "A"),
            index_entry(3, true, "B"),
            index_entry(4, false, "C"),
            index_entry(5, true, "D"),
            index_entry(6, true, ""),
        ];
        let plan = plan_index_intake(
            "▶パネル",
            &entries,
            &snapshot(vec![asked]),
            at(0),
            || "job".into(),
        );
        assert_eq!(plan.new_rows.len(), 1);
        assert_eq!(
            plan.new_rows[0].args_json, r#"{"open":["A","D"]}"#,
            "B is asked already"
        );
        assert_eq!(plan.new_rows[0].function, "パネルを開く: A, D");
        let cleared: Vec<&str> = plan.clears.iter().map(|c| c.range.as_str()).collect();
        assert_eq!(
            cleared,
            [
                "'▶パネル'!A2",
                "'▶パネル'!A3",
                "'▶パネル'!A5",
                "'▶パネル'!A6"
            ]
        );
        let none = plan_index_intake(
            "▶パネル",
            &entries[2..3],
            &snapshot(vec![]),
            at(0),
            || "job".into(),
        );
        assert!(none.new_rows.is_empty() && none.clears.is_empty());
    }

    #[test]
    fn a_label_no_target_could_have_is_cleared_and_never_copied_into_the_queue() {
        let huge = "長".repeat(50_000);
        let mut entries = vec![index_entry(2, true, &huge)];
        entries.extend((0..150).map(|i| index_entry(3 + i, true, &format!("web-{i:03}"))));
        let plan = plan_index_intake("▶パネル", &entries, &snapshot(vec![]), at(0), || {
            "job".into()
        });
        assert_eq!(plan.new_rows.len(), 1);
        let job = &plan.new_rows[0];
        assert!(
            !job.args_json.contains('長') && !job.function.contains('長'),
            "the huge label is not copied"
        );
        assert!(
            job.function.chars().count() <= 600 && job.args_json.chars().count() < 50_000,
            "the row's cells stay short: {} and {} characters",
            job.function.chars().count(),
            job.args_json.chars().count()
        );
        let opened: serde_json::Value = serde_json::from_str(&job.args_json).unwrap_or_default();
        assert_eq!(
            opened["open"].as_array().map(Vec::len),
            Some(MAX_LABELS_PER_JOB),
            "one job takes at most {MAX_LABELS_PER_JOB} labels"
        );
        assert_eq!(
            plan.clears.len(),
            MAX_LABELS_PER_JOB + 1,
            "the huge label's tick and the labels taken are cleared; the rest wait ticked"
        );
    }

    fn plan(tables: &HashMap<String, PanelTable>, index: &PanelIndex, s: &Snapshot) -> IntakePlan {
        let mut n = 0;
        let catalog = Catalog::default();
        let ticks = Ticks {
            tables,
            index,
            snapshot: s,
            now: at(125),
            tz: tz(),
            layout: &PanelLayout::default(),
            catalog: &catalog,
            guards: &Guards::default(),
        };
        plan_intake(&ticks, || {
            n += 1;
            format!("new-{n}")
        })
    }

    #[test]
    fn a_tick_becomes_one_waiting_row_and_the_box_is_cleared() {
        let (index, tables) = one_panel(vec![
            func_row(false, "再起動", "", "restart", "", ""),
            func_row(
                true,
                "集計",
                "",
                "report",
                "{\"days\": 7}",
                "heavy,continuation",
            ),
        ]);
        let p = plan(&tables, &index, &snapshot(vec![]));
        assert_eq!(
            p.new_rows,
            [NewJob {
                job_id: "new-1".into(),
                received_at: at(125),
                requester: String::new(),
                panel_sheet: "P".into(),
                panel_row: Some(9),
                target: "A".into(),
                function: "集計".into(),
                command: "report".into(),
                args_json: "{\"days\": 7}".into(),
                flags: "heavy".into(),
                inputs: String::new(),
            }]
        );
        assert_eq!(
            p.clears,
            [ValueRange::new("'P'!A9", vec![vec![json!(false)]])]
        );
        assert!(p.duplicates.is_empty() && p.rejected.is_empty(), "{p:?}");
    }

    #[test]
    fn a_tick_on_a_waiting_function_shows_the_duplicate_message_and_makes_no_row() {
        let (index, tables) = one_panel(vec![func_row(true, "集計", "", "report", "", "")]);
        let mut existing = queue_row(2, State::Waiting, "A", "集計");
        existing.requester = "x@example.com".into();
        let p = plan(&tables, &index, &snapshot(vec![existing]));
        assert!(p.new_rows.is_empty(), "{:?}", p.new_rows);
        assert_eq!(
            p.clears,
            [ValueRange::new("'P'!A8", vec![vec![json!(false)]])]
        );
        assert_eq!(
            p.duplicates,
            [ValueRange::new(
                "'P'!C8",
                vec![vec![json!("既に実行中です（依頼: x@example.com / 12:02）")]]
            )]
        );
    }

    /// `func_row` with its ■ box (column F) ticked.
    fn cancel_ticked(mut cells: Vec<Cell>) -> Vec<Cell> {
        cells[5] = json!(true);
        cells
    }

    #[test]
    fn a_cancel_tick_asks_to_stop_the_newest_unfinished_job_of_its_function_by_name() {
        let (index, tables) = one_panel(vec![
            cancel_ticked(func_row(false, "集計", "", "report", "", "")),
            cancel_ticked(func_row(false, "再起動", "", "restart", "", "")),
        ]);
        let mut older = queue_row(2, State::Running, "A", "集計");
        older.received_at = Some(at(100));
        let mut newer = queue_row(3, State::Waiting, "A", "集計");
        newer.received_at = Some(at(110));
        let finished = queue_row(4, State::Done, "A", "再起動");
        let other = queue_row(5, State::Waiting, "B", "集計");
        let p = plan(
            &tables,
            &index,
            &snapshot(vec![older, newer, finished, other]),
        );
        assert_eq!(
            p.cancels,
            [("job-3".to_string(), "不明 2026/11/30 14:05:00 #job-3".to_string())],
            "the newest 集計 job of target A is asked to stop, by nobody known; the finished 再起動 is not"
        );
        assert_eq!(
            p.clears,
            [
                ValueRange::new("'P'!F8", vec![vec![json!(false)]]),
                ValueRange::new("'P'!F9", vec![vec![json!(false)]])
            ],
            "both ■ boxes go back"
        );
        assert!(p.new_rows.is_empty(), "a ■ tick is no press: {p:?}");
    }

    #[test]
    fn a_cancel_tick_on_a_job_asked_to_stop_already_asks_nothing_more() {
        let (index, tables) = one_panel(vec![cancel_ticked(func_row(
            false, "集計", "", "report", "", "",
        ))]);
        let mut asked = queue_row(2, State::Running, "A", "集計");
        asked.cancel_request = "x@example.com 2026/11/30 12:00:00 #job-2".into();
        let p = plan(&tables, &index, &snapshot(vec![asked]));
        assert!(p.cancels.is_empty(), "{p:?}");
        assert_eq!(p.clears.len(), 1);
    }

    #[test]
    fn a_finished_row_does_not_block_a_new_press() {
        let (index, tables) = one_panel(vec![func_row(true, "集計", "", "report", "", "")]);
        let p = plan(
            &tables,
            &index,
            &snapshot(vec![queue_row(2, State::Done, "A", "集計")]),
        );
        assert_eq!(p.new_rows.len(), 1, "{p:?}");
    }

    #[test]
    fn two_ticks_of_one_function_in_a_pass_make_one_row() {
        let (index, tables) = one_panel(vec![
            func_row(true, "集計", "", "report", "", ""),
            func_row(true, "集計", "", "report", "", ""),
            func_row(true, "", "", "", "", ""),
        ]);
        let p = plan(&tables, &index, &snapshot(vec![]));
        assert_eq!(p.new_rows.len(), 1, "{:?}", p.new_rows);
        assert_eq!(p.new_rows[0].panel_row, Some(8));
        let cleared: Vec<&str> = p.clears.iter().map(|c| c.range.as_str()).collect();
        assert_eq!(
            cleared,
            ["'P'!A8", "'P'!A9", "'P'!A10"],
            "every tick is cleared"
        );
        assert_eq!(
            p.rejected,
            [ValueRange::new(
                "'P'!C10",
                vec![vec![json!(NO_FUNCTION_TEXT)]]
            )]
        );
    }

    #[test]
    fn ticks_on_a_panel_whose_label_is_in_conflict_are_left_alone() {
        let layout = PanelLayout::default();
        let index = PanelIndex::build(
            &meta(&[(5, "P"), (6, "Q")]),
            &[marker("P", "A", ""), marker("Q", "A", "")],
            &layout,
        );
        let mut tables = HashMap::new();
        let t = PanelTable::parse(
            &table("P", vec![func_row(true, "集計", "", "r", "", "")]),
            &layout,
        );
        tables.insert("A".to_string(), t);
        let p = plan(&tables, &index, &snapshot(vec![]));
        assert!(
            p.is_empty(),
            "a conflicting label must not be guessed: {p:?}"
        );
    }

    #[test]
    fn new_rows_lay_out_by_header_name_and_read_back() {
        let names = HeaderNames::default();
        let mut header: Vec<Cell> = names.header_row().into_iter().map(Cell::String).collect();
        header.reverse();
        header.insert(2, json!("メモ"));
        let columns = ColumnMap::from_header(&header, &names)
            .unwrap_or_else(|e| panic!("header should map: {e}"));
        let job = NewJob {
            job_id: "j-1".into(),
            received_at: at(125),
            requester: String::new(),
            panel_sheet: "P".into(),
            panel_row: Some(9),
            target: "A".into(),
            function: "集計".into(),
            command: "report".into(),
            args_json: "{\"q\":\"=1+1\"}".into(),
            flags: "heavy".into(),
            inputs: String::new(),
        };
        let cells = job.to_row(&columns, &StateWords::default(), tz());
        assert_eq!(cells.len(), 20);
        assert_eq!(cells[columns.index(Column::JobId) as usize], json!("j-1"));
        assert_eq!(cells[columns.index(Column::PanelRow) as usize], json!(9));
        assert!(cells[columns.index(Column::ReceivedAt) as usize].is_f64());
        assert_eq!(cells[2], json!(""), "an unknown column stays empty");

        let s = parse_rows(&[cells], 2, &columns, &StateWords::default(), tz());
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        let r = &s.rows[0];
        assert_eq!(r.state, RowState::Known(State::Waiting));
        assert_eq!(r.received_at, Some(at(125)));
        assert_eq!(r.requester_key(), None, "an empty requester is fine");
        assert_eq!((r.target.as_str(), r.function.as_str()), ("A", "集計"));
        assert_eq!(r.args_json, "{\"q\":\"=1+1\"}");
        assert!(r.has_flag("heavy"));
    }

    #[test]
    fn text_beginning_with_equals_stays_a_string_value() {
        let (index, tables) = one_panel(vec![func_row(true, "=SUM(A1)", "", "=cmd", "=x", "")]);
        let p = plan(&tables, &index, &snapshot(vec![]));
        let columns = ColumnMap::from_header(
            &HeaderNames::default()
                .header_row()
                .into_iter()
                .map(Cell::String)
                .collect::<Vec<_>>(),
            &HeaderNames::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let cells = p.new_rows[0].to_row(&columns, &StateWords::default(), tz());
        for c in [Column::Function, Column::Command, Column::ArgsJson] {
            assert!(
                matches!(&cells[columns.index(c) as usize], Cell::String(s) if s.starts_with('=')),
                "{c:?} should be a string: {cells:?}"
            );
        }
    }

    #[test]
    fn a_press_never_brings_continuation_in_any_spelling() {
        assert_eq!(
            press_flags("heavy,continuation\u{85}, Continuation ,\u{ff43}ontinuation,\u{feff}continuation"),
            "heavy",
            "only sheetq's mark makes a continuation step; a press drops every look-alike of the word"
        );
        assert_eq!(
            press_flags(" heavy\t,nightly"),
            "heavy,nightly",
            "spaces and tabs at either end go, and nothing else"
        );
    }

    #[test]
    fn a_press_takes_the_inputs_of_its_row_and_never_guesses_a_missing_one() {
        let inputs = crate::inputs::from_toml(
            r#"inputs = [{ name = "version", label = "バージョン", type = "choice", choices = ["1", "2"] },
                         { name = "day", type = "date" }]"#,
        );
        let catalog = Catalog {
            functions: vec![crate::panel::catalog::FunctionDef {
                label: "デプロイ".into(),
                command: "deploy".into(),
                args: toml::from_str("mode = \"rolling\"").unwrap_or_default(),
                flags: Vec::new(),
                allow: None,
                args_from_sheet: Vec::new(),
                inputs,
                reset_inputs: true,
                approvers: None,
                approvals: None,
                approval_expires: None,
                output: None,
                cancel: None,
            }],
            ..Catalog::default()
        };
        let layout = PanelLayout {
            input_slots: 2,
            ..PanelLayout::default()
        };
        // ▶ … 承認 (K), then バージョン | 2 | day | 2026-12-31 (a date cell's serial).
        let row = |version_label: &str| {
            let mut cells = func_row(true, "デプロイ", "", "", "", "");
            cells.resize(11, json!(""));
            cells.extend([json!(version_label), json!("2"), json!("day"), json!(46387)]);
            cells
        };
        let plan_of = |cells: Vec<Cell>| {
            let index = PanelIndex::build(&meta(&[(5, "P")]), &[marker("P", "A", "")], &layout);
            let range = ValueRange::new(crate::a1::range("P", "A8:O207"), vec![cells]);
            let tables = super::super::parse_tables(&index, &[range], &layout);
            plan_intake(
                &Ticks {
                    tables: &tables,
                    index: &index,
                    snapshot: &snapshot(vec![]),
                    now: at(125),
                    tz: tz(),
                    layout: &layout,
                    catalog: &catalog,
                    guards: &Guards::default(),
                },
                || "new-1".to_string(),
            )
        };
        let p = plan_of(row("バージョン"));
        let [job] = &p.new_rows[..] else {
            panic!("one press, one row: {p:?}");
        };
        let args: serde_json::Value = serde_json::from_str(&job.args_json).unwrap_or_default();
        assert_eq!(
            args,
            json!({ "mode": "rolling", "version": "2", "day": "2026-12-31" }),
            "the inputs as read, a date's serial as its day, over the function's args"
        );
        let resets: Vec<&str> = p.clears.iter().map(|c| c.range.as_str()).collect();
        assert!(
            resets.contains(&"'P'!M8") && resets.contains(&"'P'!O8"),
            "reset_inputs writes the value cells back: {resets:?}"
        );

        let p = plan_of(row("版"));
        assert!(p.new_rows.is_empty(), "a value is never guessed: {p:?}");
        assert!(
            p.rejected
                .iter()
                .any(|r| crate::queue::cell_text(&r.values[0][0])
                    .contains("入力「バージョン」が見当たらない")),
            "the row says which input it lacks: {:?}",
            p.rejected
        );
    }

    /// A catalog of one function that names who may press, approve and stop it.
    fn gated_catalog() -> Catalog {
        let list = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        Catalog {
            functions: vec![crate::panel::catalog::FunctionDef {
                label: "本番反映".into(),
                command: "deploy".into(),
                args: toml::Table::new(),
                flags: Vec::new(),
                allow: list(&["alice@example.com"]),
                args_from_sheet: Vec::new(),
                inputs: Vec::new(),
                reset_inputs: false,
                approvers: list(&["lead@example.com", "group:sre@example.com"]),
                approvals: None,
                approval_expires: None,
                output: None,
                cancel: None,
            }],
            ..Catalog::default()
        }
    }

    const SA: &str = "sheetq@p.iam.gserviceaccount.com";

    /// Panel 'P' (sheet 5) with the cells at (column, 1-based row) protected for `users`
    /// (sheetq's account and the owner added), and its marker G1 for sheetq alone: Google
    /// lists the owner on every protected range, which is how sheetq tells who the owner is.
    fn guarded(cells: &[(u32, u32, &[&str])]) -> Guards {
        let mut m = meta(&[(5, "P")]);
        let marker: &[&str] = &[];
        m.sheets[0].protected_ranges = cells
            .iter()
            .chain([&(6, 1, marker)])
            .enumerate()
            .map(|(i, (col, row, users))| crate::sheets::ProtectedRange {
                id: i as i32 + 1,
                area: crate::sheets::Area::cells(crate::sheets::GridRange {
                    sheet_id: 5,
                    start_row: row - 1,
                    end_row: *row,
                    start_col: *col,
                    end_col: col + 1,
                }),
                description: String::new(),
                warning_only: false,
                editors: users
                    .iter()
                    .map(|u| u.to_string())
                    .chain([SA.to_string(), "owner@example.com".to_string()])
                    .collect(),
                groups: Vec::new(),
                domain_users_can_edit: false,
                unprotected: Vec::new(),
                requesting_user_can_edit: true,
            })
            .collect();
        let editors = crate::protection::Editors::new(SA, &[]).unwrap_or_else(|e| panic!("{e}"));
        Guards::read(
            &m,
            &[(5, "P".to_string(), "P".to_string())],
            &gated_layout(),
            &gated_catalog(),
            &editors,
        )
    }

    /// The default layout with the two 承認 columns (K, L) of [`gated_catalog`].
    fn gated_layout() -> PanelLayout {
        PanelLayout {
            approval_columns: 2,
            ..PanelLayout::default()
        }
    }

    fn plan_with(rows: Vec<Vec<Cell>>, s: &Snapshot, guards: &Guards) -> IntakePlan {
        let layout = gated_layout();
        let index = PanelIndex::build(&meta(&[(5, "P")]), &[marker("P", "A", "")], &layout);
        let tables = super::super::parse_tables(&index, &[table("P", rows)], &layout);
        let catalog = gated_catalog();
        let ticks = Ticks {
            tables: &tables,
            index: &index,
            snapshot: s,
            now: at(125),
            tz: tz(),
            layout: &layout,
            catalog: &catalog,
            guards,
        };
        plan_intake(&ticks, || "new-1".to_string())
    }

    /// Row 8 of the gated function, with ▶, ■ and the `n`-th 承認 boxes ticked as given.
    fn gated_row(press: bool, stop: bool, approve: &[usize]) -> Vec<Cell> {
        let mut cells = func_row(press, "本番反映", "", "deploy", "{}", "");
        cells[5] = json!(stop);
        cells.resize(12, json!(""));
        for n in approve {
            cells[10 + n] = json!(true);
        }
        cells
    }

    #[test]
    fn a_press_counts_only_from_a_cell_guarded_for_exactly_the_allowed_people() {
        let open = plan_with(
            vec![gated_row(true, false, &[])],
            &snapshot(vec![]),
            &Guards::default(),
        );
        assert!(
            open.new_rows.is_empty(),
            "an open ▶ cell proves nothing: {open:?}"
        );
        assert_eq!(
            open.unguarded,
            [("P".to_string(), "本番反映".to_string(), Role::Press)]
        );
        assert!(
            open.rejected[0].values[0][0]
                .as_str()
                .is_some_and(|t| t.contains("panels sync")),
            "the row says why and what fixes it: {:?}",
            open.rejected
        );
        let widened = guarded(&[(0, 8, &["alice@example.com", "mallory@example.com"])]);
        assert!(
            plan_with(
                vec![gated_row(true, false, &[])],
                &snapshot(vec![]),
                &widened
            )
            .new_rows
            .is_empty(),
            "a protection that lets someone else in proves nothing either"
        );
        let exact = guarded(&[(0, 8, &["alice@example.com"])]);
        let p = plan_with(vec![gated_row(true, false, &[])], &snapshot(vec![]), &exact);
        assert_eq!(p.new_rows.len(), 1, "{p:?}");
        assert_eq!(
            p.new_rows[0].requester, "保護された▶: alice@example.com",
            "the row carries who Google let tick, not a name nobody vouched for"
        );
    }

    #[test]
    fn an_approval_names_the_one_approver_whose_cell_was_ticked_and_an_open_cell_counts_nothing() {
        let mut waiting = queue_row(3, State::AwaitingApproval, "A", "本番反映");
        waiting.requester = "保護された▶: alice@example.com".into();
        let s = snapshot(vec![waiting]);
        // lead's cell (K8) is guarded for lead; the second approver's (L8) is left open.
        let g = guarded(&[(10, 8, &["lead@example.com"])]);
        let p = plan_with(vec![gated_row(false, false, &[0, 1])], &s, &g);
        assert_eq!(
            p.approvals,
            [("job-3".to_string(), "lead@example.com".to_string())]
        );
        assert_eq!(
            p.unguarded,
            [("P".to_string(), "本番反映".to_string(), Role::Approve(1))]
        );
        assert_eq!(p.clears.len(), 2, "both boxes are cleared: {:?}", p.clears);
    }

    #[test]
    fn a_stop_counts_only_from_a_cell_guarded_for_who_may_stop() {
        let s = snapshot(vec![queue_row(3, State::AwaitingApproval, "A", "本番反映")]);
        let open = plan_with(vec![gated_row(false, true, &[])], &s, &Guards::default());
        assert!(
            open.cancels.is_empty(),
            "an open ■ stops nobody's job: {open:?}"
        );
        let g = guarded(&[(5, 8, &["alice@example.com", "lead@example.com"])]);
        assert!(
            plan_with(vec![gated_row(false, true, &[])], &s, &g)
                .cancels
                .is_empty(),
            "the ■ of a function whose approvers include a group needs the group too"
        );
    }
}
