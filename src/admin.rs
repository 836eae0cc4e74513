//! The one-shot operator commands that are not the daemon: `init` (create what is missing),
//! `check` (validate the sheet against the config, listing every problem), `status` (what
//! the queue and the workers look like now) and `enqueue` (append a job from the shell);
//! `cancel` (ask the daemons to stop a job) is in [`cancel`], `logs` (what a job printed) in
//! [`logs`].

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::a1;
use crate::archive::ARCHIVE_SHEET;
use crate::commands::Registry;
use crate::config::Config;
use crate::lease::{self, LeaseState, WORKER_SHEET};
use crate::queue::{self, Column, ColumnMap, State, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{BatchUpdate, Cell, GridRange, Request, Sheets, SheetsError, ValueRange};

pub mod approve;
pub mod cancel;
pub mod history;
pub mod logs;
pub mod schedules;

/// Header of the heartbeat rows in `_ワーカー` (row 2).
pub const WORKER_HEADER: [&str; 10] = crate::workers::HEADER;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(transparent)]
    Sheets(#[from] SheetsError),
    #[error("{}", .0.join("\n"))]
    Problems(Vec<String>),
    #[error(
        "job {0:?} is not in '{QUEUE_SHEET}': it was archived, its row was deleted, or the jobId is mistyped (`sheetq status` lists the running and waiting jobs)"
    )]
    NotInQueue(String),
    /// The job is not in the state the command acts on yet, and a daemon turns it so within
    /// a poll (a rejection of a job not yet 承認待ち): the caller may wait and try again.
    #[error("{0}")]
    NotYet(String),
}

impl From<queue::LayoutError> for AdminError {
    fn from(e: queue::LayoutError) -> Self {
        AdminError::Problems(vec![e.to_string()])
    }
}

impl From<sheet_time::TimeError> for AdminError {
    fn from(e: sheet_time::TimeError) -> Self {
        AdminError::Problems(vec![format!("the spreadsheet's time zone: {e}")])
    }
}

/// The sheets a one-shot command needs, or the one message that says to run `init`.
fn require_init(meta: &crate::sheets::SpreadsheetMeta) -> Result<(), AdminError> {
    let missing: Vec<&str> = [QUEUE_SHEET, WORKER_SHEET]
        .into_iter()
        .filter(|t| meta.sheet(t).is_none())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(AdminError::Problems(vec![format!(
        "spreadsheet {} has no {} sheet yet: run `sheetq init --config FILE` once to create what sheetq needs",
        meta.spreadsheet_id,
        missing
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(" or ")
    )]))
}

/// `sheetq init`: creates `_ジョブキュー` (with its header), `_ワーカー` (with the lease
/// cell `free`) and `_ジョブ履歴`, hidden, where missing; fills an empty header or lease
/// cell; and (unless `protect = false`) protects the three sheets whole so that only
/// sheetq's service accounts write them, in the batch that creates them. On a spreadsheet
/// made before protection, it adds only the protection: no cell changes. Returns what it
/// did, one line each; running it twice does nothing the second time.
pub async fn init(sheets: &dyn Sheets, config: &Config) -> Result<Vec<String>, AdminError> {
    let meta = sheets.metadata().await?;
    let editors =
        crate::protection::Editors::of(config.protect, &config.protect_editors, &sheets.account())
            .map_err(|e| AdminError::Problems(vec![e]))?;
    let mut done = Vec::new();
    let mut add = Vec::new();
    // The heartbeat's columns, and the stop column right of them (`sheetq cancel` of a job
    // whose queue row is gone, `workers::STOP_COLUMN`).
    let worker_cols = (WORKER_HEADER.len() as i32).max(crate::workers::STOP_COLUMN as i32 + 1);
    let new_archive = meta.sheet(ARCHIVE_SHEET).is_none();
    let mut taken: std::collections::HashSet<i32> =
        meta.sheets.iter().map(|s| s.sheet_id).collect();
    let mut hidden: Vec<(i32, &str)> = Vec::new();
    let queue_cols = config.headers.header_row().len() as i32;
    let log_cols = crate::joblog::HEADER.len() as i32;
    for (title, cols) in [
        (QUEUE_SHEET, queue_cols),
        (WORKER_SHEET, worker_cols),
        (ARCHIVE_SHEET, queue_cols),
        (crate::joblog::LOG_SHEET, log_cols),
    ] {
        match meta.sheet(title) {
            Some(sheet) => hidden.push((sheet.sheet_id, title)),
            None => {
                // An id of our choosing, so the protection can go in the same batch.
                let sheet_id = crate::panel::sync::sheet_id_for(title, &taken);
                taken.insert(sheet_id);
                add.push(Request::AddSheetWithId {
                    sheet_id,
                    title: title.to_string(),
                    index: None,
                    row_count: 1000,
                    column_count: cols as u32,
                    frozen_rows: 0,
                });
                add.push(Request::UpdateSheetHidden {
                    sheet_id,
                    hidden: true,
                });
                hidden.push((sheet_id, title));
                done.push(format!("created hidden sheet '{title}'"));
            }
        }
    }
    // Heartbeat rows grew from 6 to 10 columns (process, running jobs, account, sharers),
    // and the stop column came after them: widen an older sheet.
    if let Some(w) = meta
        .sheet(WORKER_SHEET)
        .filter(|w| w.column_count < worker_cols)
    {
        add.push(Request::SetColumnCount {
            sheet_id: w.sheet_id,
            columns: worker_cols,
        });
        done.push(format!(
            "widened '{WORKER_SHEET}' to {worker_cols} columns for the heartbeat rows"
        ));
    }
    if let Some(editors) = &editors {
        let planned =
            crate::protection::plan(&meta, &crate::protection::hidden_sheets(&hidden), editors);
        add.extend(planned.requests);
        done.extend(planned.done);
        done.extend(
            planned
                .blocked
                .into_iter()
                .map(|b| format!("could not protect: {b}")),
        );
    }
    let ranges = vec![
        a1::range(QUEUE_SHEET, "1:1"),
        a1::range(
            WORKER_SHEET,
            &format!("A1:{}2", crate::workers::LAST_COLUMN),
        ),
        a1::range(crate::joblog::LOG_SHEET, "1:1"),
    ];
    // The header cells come back in the reply of the batch that makes the sheets (they all
    // exist after it), as Google reads them after applying it: a read fewer on the account,
    // whose quota the daemons started next need in their first minute.
    let current = if add.is_empty() {
        sheets.read(&ranges).await?
    } else {
        let reply = sheets
            .batch_update(&BatchUpdate {
                requests: add,
                response_ranges: ranges,
                ..Default::default()
            })
            .await?;
        reply.ranges
    };
    let log_header = current
        .get(2)
        .and_then(|v| v.values.first())
        .cloned()
        .unwrap_or_default();
    let mut writes = Vec::new();
    let header: Vec<Cell> = crate::sheets::first_row(&current);
    let wrote_header = header.iter().all(|c| queue::cell_text(c).trim().is_empty());
    if wrote_header {
        let row: Vec<Cell> = config
            .headers
            .header_row()
            .into_iter()
            .map(Cell::from)
            .collect();
        let last = a1::column_letters(row.len().saturating_sub(1) as u32);
        writes.push(ValueRange::new(
            a1::range(QUEUE_SHEET, &format!("A1:{last}1")),
            vec![row],
        ));
        done.push(format!("wrote the header of '{QUEUE_SHEET}'"));
    } else {
        let columns = ColumnMap::from_header(&header, &config.headers)?;
        if let Some(added) = add_optional_columns(sheets, config, &meta, &header, &columns).await? {
            writes.push(added.header);
            done.extend(added.done);
        }
    }
    if new_archive {
        // The archive's columns are the queue's, as they are now (finished rows move whole).
        let queue_header = writes
            .first()
            .and_then(|w: &ValueRange| w.values.first().cloned())
            .unwrap_or(header.clone());
        let width = queue_header.len().max(1) as u32;
        writes.push(ValueRange::new(
            a1::range(
                ARCHIVE_SHEET,
                &format!("A1:{}1", a1::column_letters(width - 1)),
            ),
            vec![queue_header],
        ));
    }
    let worker = current.get(1).map(|v| v.values.clone()).unwrap_or_default();
    let lease_text = worker
        .first()
        .and_then(|r| r.get(1))
        .map(queue::cell_text)
        .unwrap_or_default();
    if lease_text.trim().is_empty() {
        writes.push(ValueRange::new(
            a1::range(WORKER_SHEET, "A1:B1"),
            vec![vec![Cell::from("lease"), Cell::from(lease::FREE)]],
        ));
        done.push(format!("set the lease cell '{WORKER_SHEET}'!B1 to free"));
    }
    if worker.get(1).is_none_or(|r| {
        r.len() < WORKER_HEADER.len() || r.iter().all(|c| queue::cell_text(c).is_empty())
    }) {
        writes.push(ValueRange::new(
            a1::range(
                WORKER_SHEET,
                &format!("A2:{}2", crate::workers::LAST_COLUMN),
            ),
            vec![WORKER_HEADER.iter().map(|h| Cell::from(*h)).collect()],
        ));
    }
    let wrote_log_header = log_header
        .iter()
        .all(|c| queue::cell_text(c).trim().is_empty());
    if wrote_log_header {
        let last = a1::column_letters(log_cols as u32 - 1);
        writes.push(ValueRange::new(
            a1::range(crate::joblog::LOG_SHEET, &format!("A1:{last}1")),
            vec![crate::joblog::HEADER
                .iter()
                .map(|h| Cell::from(*h))
                .collect()],
        ));
        done.push(format!(
            "wrote the header of '{}' (one row per job run: its output)",
            crate::joblog::LOG_SHEET
        ));
    }
    if !writes.is_empty() {
        sheets.write(&writes).await?;
    }
    if wrote_header || wrote_log_header {
        format_dates(sheets, config).await?;
        done.push(format!(
            "formatted the date columns of '{QUEUE_SHEET}' and '{WORKER_SHEET}' as date-times"
        ));
    }
    if done.is_empty() {
        done.push("nothing to do: the spreadsheet is ready".to_string());
    }
    Ok(done)
}

/// The header cells `init` adds to an existing queue, and what it says of them.
struct AddedColumns {
    header: ValueRange,
    done: Vec<String>,
}

/// The optional queue columns ([`queue::Column::OPTIONAL`]) a queue made by an older version
/// lacks, as header cells right of its last header (the sheet widened first when its grid
/// ends before them); `None` when it has them all. The columns people read stay where they
/// are: nothing moves.
async fn add_optional_columns(
    sheets: &dyn Sheets,
    config: &Config,
    meta: &crate::sheets::SpreadsheetMeta,
    header: &[Cell],
    columns: &ColumnMap,
) -> Result<Option<AddedColumns>, AdminError> {
    let missing: Vec<&str> = (queue::Column::OPTIONAL.iter())
        .filter(|c| !columns.has(**c))
        .map(|c| config.headers.name(*c))
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let first = header
        .iter()
        .rposition(|c| !queue::cell_text(c).trim().is_empty())
        .map_or(0, |i| i + 1) as u32;
    let end = first + missing.len() as u32;
    if let Some(queue) = meta
        .sheet(QUEUE_SHEET)
        .filter(|q| (q.column_count as u32) < end)
    {
        sheets
            .batch_update(&BatchUpdate {
                requests: vec![Request::SetColumnCount {
                    sheet_id: queue.sheet_id,
                    columns: end as i32,
                }],
                ..Default::default()
            })
            .await?;
    }
    let range = format!(
        "{}1:{}1",
        a1::column_letters(first),
        a1::column_letters(end - 1)
    );
    let done = missing
        .iter()
        .enumerate()
        .map(|(k, name)| {
            format!(
                "added the column \"{name}\" to '{QUEUE_SHEET}' (column {}); nothing else moved",
                a1::column_letters(first + k as u32)
            )
        })
        .collect();
    Ok(Some(AddedColumns {
        header: ValueRange::new(
            a1::range(QUEUE_SHEET, &range),
            vec![missing.into_iter().map(Cell::from).collect()],
        ),
        done,
    }))
}

/// The pattern of the date-time columns `init` formats.
pub const DATE_TIME_PATTERN: &str = "yyyy/mm/dd hh:mm:ss";

/// sheetq writes times as serial numbers (docs/design.md §1.1); this makes a person see them as
/// dates: 受付日時, 開始日時 and 終了日時 of the queue, and the heartbeats' last-seen column.
async fn format_dates(sheets: &dyn Sheets, config: &Config) -> Result<(), AdminError> {
    let meta = sheets.metadata().await?;
    let header = sheets.read(&[a1::range(QUEUE_SHEET, "1:1")]).await?;
    let header = crate::sheets::first_row(&header);
    let columns = ColumnMap::from_header(&header, &config.headers)?;
    let mut requests = Vec::new();
    let block =
        |sheet: &crate::sheets::SheetMeta, first_row: u32, col: u32| Request::SetDateTimeFormat {
            range: GridRange {
                sheet_id: sheet.sheet_id,
                start_row: first_row,
                end_row: sheet.row_count.max(first_row as i32 + 1) as u32,
                start_col: col,
                end_col: col + 1,
            },
            pattern: DATE_TIME_PATTERN.to_string(),
        };
    // The header's cells too (a text shows as it is under any number format): a row
    // inserted under it, as an append into an empty queue or log inserts one, takes the
    // format of its neighbour, and the header may be that neighbour.
    if let Some(q) = meta.sheet(QUEUE_SHEET) {
        for c in [Column::ReceivedAt, Column::StartedAt, Column::FinishedAt] {
            requests.push(block(q, 0, columns.index(c)));
        }
    }
    if let Some(w) = meta.sheet(WORKER_SHEET) {
        requests.push(block(w, 2, 5));
    }
    if let Some(l) = meta.sheet(crate::joblog::LOG_SHEET) {
        for c in [
            crate::joblog::LogColumn::StartedAt,
            crate::joblog::LogColumn::FinishedAt,
        ] {
            requests.push(block(l, 0, c as u32));
        }
    }
    sheets
        .batch_update(&BatchUpdate {
            requests,
            response_ranges: vec![],
            ..Default::default()
        })
        .await?;
    Ok(())
}

/// What `sheetq check` reads of the queue, the lease cell, the panels and the index, in
/// the one read it makes (`check::deployment` adds its own ranges after these): `Err` with
/// the problems when a sheet it needs is missing, so there is nothing to read.
pub fn check_ranges(
    meta: &crate::sheets::SpreadsheetMeta,
    config: &Config,
) -> Result<Vec<String>, Vec<String>> {
    let missing: Vec<String> = [QUEUE_SHEET, WORKER_SHEET]
        .into_iter()
        .filter(|title| meta.sheet(title).is_none())
        .map(|title| {
            format!("sheet '{title}' is missing; run `sheetq init --config FILE` to create it")
        })
        .collect();
    if !missing.is_empty() {
        return Err(missing);
    }
    let mut ranges = vec![
        a1::range(QUEUE_SHEET, "1:1"),
        queue_data_range(meta),
        a1::range(WORKER_SHEET, "B1"),
    ];
    // The panels and the index, in the same read.
    ranges.extend(crate::panel::sync::read_ranges(meta, &config.panel));
    Ok(ranges)
}

/// `sheetq check`'s findings in what [`check_ranges`] read (`values`, in its order): every
/// problem that would stop or confuse the daemon, at once.
pub fn check(
    meta: &crate::sheets::SpreadsheetMeta,
    config: &Config,
    registry: &Registry,
    mut values: Vec<crate::sheets::ValueRange>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let tz = match sheet_time::parse_zone(&meta.time_zone) {
        Ok(tz) => Some(tz),
        Err(e) => {
            problems.push(format!(
                "the spreadsheet's time zone: {e}; set it under File → Settings"
            ));
            None
        }
    };
    let panel_values = values.split_off(3.min(values.len()));
    problems.extend(crate::panel::sync::check(
        &crate::panel::sync::SyncInput {
            meta,
            values: &panel_values,
            catalog: &config.catalog,
            layout: &config.panel,
            tz: tz.unwrap_or(chrono_tz::UTC),
            now: chrono::Utc::now(),
            open: &[],
            open_all: false,
            queue: None,
        },
        |command| registry.is_configured(command),
    ));
    let header = crate::sheets::first_row(&values);
    match ColumnMap::from_header(&header, &config.headers) {
        Err(e) => problems.push(e.to_string()),
        Ok(columns) => {
            let rows = values.get(1).map(|v| v.values.clone()).unwrap_or_default();
            let snapshot = queue::parse_rows(
                &rows,
                2,
                &columns,
                &config.states,
                tz.unwrap_or(chrono_tz::UTC),
            );
            problems.extend(snapshot.problems.iter().map(ToString::to_string));
            for row in &snapshot.rows {
                if row.state.is(State::Waiting) && !registry.is_configured(&row.command) {
                    problems.push(format!(
                        "'{QUEUE_SHEET}' row {}: command \"{}\" is not configured; add [commands.{}] to the config or the job will end as {}",
                        row.row, row.command, row.command, config.states.error
                    ));
                }
            }
        }
    }
    let lease_text = values
        .get(2)
        .and_then(|v| v.values.first())
        .and_then(|r| r.first())
        .map(queue::cell_text)
        .unwrap_or_default();
    if let LeaseState::Invalid(text) = LeaseState::parse(&lease_text) {
        problems.push(format!(
            "the lease cell '{WORKER_SHEET}'!B1 holds {text:?}, not a lease; set it to \"free\" (sheetq init does)"
        ));
    }
    problems
}

/// Every data row of the queue, bounded by the sheet's grid (Google rejects ranges past it).
fn queue_data_range(meta: &crate::sheets::SpreadsheetMeta) -> String {
    let last = meta
        .sheet(QUEUE_SHEET)
        .map(|s| s.last_column())
        .unwrap_or_else(|| "P".to_string());
    a1::range(QUEUE_SHEET, &format!("A2:{last}"))
}

/// A job to append from the shell.
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    pub target: String,
    pub function: String,
    pub command: String,
    pub args_json: String,
    pub requester: String,
    pub panel_sheet: String,
    pub flags: Vec<String>,
}

impl NewJob {
    /// A press of `function` on the panel of `target` (the panel sheet named after it).
    pub fn pressed(
        target: &str,
        function: &str,
        command: &str,
        args_json: &str,
        requester: &str,
    ) -> Self {
        NewJob {
            target: target.into(),
            function: function.into(),
            command: command.into(),
            args_json: args_json.into(),
            requester: requester.into(),
            panel_sheet: target.into(),
            flags: Vec::new(),
        }
    }
}

/// The job `sheetq enqueue` asks for, as the config defines it: for a function of
/// `[[functions]]`, its command, args and flags, with `args` (a JSON object) setting only
/// the keys its `args_from_sheet` lets a job set; without `[[functions]]`, `command` and
/// `args` as given. The error says, in the shell's words, which option to change.
pub fn job_of(
    config: &Config,
    target: &str,
    function: &str,
    command: Option<&str>,
    args: Option<&str>,
    inputs: &[(String, serde_json::Value)],
    requester: &str,
) -> Result<NewJob, String> {
    let given = |text: &str| match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!(
            "--args must be a JSON object such as '{{\"version\":\"1.2\"}}', not {text}"
        )),
        Err(e) => Err(format!("--args is not JSON ({e}): {text}")),
    };
    let job = |command: &str, args_json: String, flags: Vec<String>| NewJob {
        target: target.into(),
        function: function.into(),
        command: command.into(),
        args_json,
        requester: requester.into(),
        panel_sheet: target.into(),
        flags,
    };
    let catalog = &config.catalog;
    let Some(f) = catalog.function(function) else {
        if !catalog.functions.is_empty() {
            let known: Vec<String> = catalog
                .functions
                .iter()
                .map(|f| format!("\"{}\"", f.label))
                .collect();
            return Err(format!(
                "--function {} is not among the [[functions]] of sheetq.toml; it has {}",
                crate::sheet_text::shown(function),
                known.join(", ")
            ));
        }
        if let Some((name, _)) = inputs.first() {
            return Err(format!(
                "--input {} needs a function of [[functions]] with inputs; sheetq.toml has none",
                crate::sheet_text::shown(name)
            ));
        }
        let Some(command) = command else {
            return Err(
                "--command is needed: sheetq.toml has no [[functions]] to take it from".into(),
            );
        };
        let args = match args {
            Some(text) => serde_json::Value::Object(given(text)?).to_string(),
            None => "{}".into(),
        };
        return Ok(job(command, args, Vec::new()));
    };
    if let Some(command) = command.filter(|c| crate::sheet_text::trim(c) != f.command) {
        return Err(format!(
            "function \"{}\" runs command \"{}\" (sheetq.toml), not {}: leave out --command",
            f.label,
            f.command,
            crate::sheet_text::shown(command)
        ));
    }
    let mut merged = match serde_json::to_value(&f.args) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    if let Some(text) = args {
        for (key, value) in given(text)? {
            if !f.args_from_sheet.contains(&key) {
                let may = match f.args_from_sheet.as_slice() {
                    [] => "none of its args".to_string(),
                    keys => keys.join(", "),
                };
                return Err(format!(
                    "--args may set {may} for function \"{}\" (its args_from_sheet), not {}: the rest comes from sheetq.toml",
                    f.label,
                    crate::sheet_text::shown(&key)
                ));
            }
            merged.insert(key, value);
        }
    }
    // Its inputs, checked as the daemon checks them when it admits the job; the defaults
    // filled in, so the queue row says what will run.
    merged.extend(input_values(f, serde_json::Map::new(), inputs)?);
    Ok(job(
        &f.command,
        serde_json::Value::Object(merged).to_string(),
        f.flags.clone(),
    ))
}

/// The inputs of a job of `f` from the shell: `fixed` (a rollout's), then `inputs` (each
/// `--input`, checked by its rule), then the defaults; checked as the daemon checks them
/// when it admits the job, so the queue row says what will run.
fn input_values(
    f: &crate::function::FunctionDef,
    fixed: serde_json::Map<String, serde_json::Value>,
    inputs: &[(String, serde_json::Value)],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut given = fixed;
    for (name, value) in inputs {
        let Some(d) = f.inputs.iter().find(|d| &d.name == name) else {
            let known: Vec<&str> = f.inputs.iter().map(|d| d.name.as_str()).collect();
            return Err(format!(
                "--input {}: function \"{}\" has {}",
                crate::sheet_text::shown(name),
                f.label,
                if known.is_empty() {
                    "no inputs".to_string()
                } else {
                    format!("the inputs {}", known.join(", "))
                }
            ));
        };
        let value = crate::inputs::value_of(d, value, None)
            .map_err(|why| format!("--input {name}: {why}"))?;
        given.insert(name.clone(), value);
    }
    crate::inputs::values_of(&f.inputs, &given, None).map_err(|why| format!("--input: {why}"))
}

/// The row `sheetq rollout NAME` appends: the rollout's own row (command
/// [`crate::queue::ROLLOUT_COMMAND`], on [`crate::queue::ROLLOUT_TARGET`], 機能 its label),
/// whose args are its function's with the inputs: those the rollout fixes, then `inputs`
/// (the press's; a fixed one cannot be given), then the defaults, checked as the daemon
/// will check each target's job. The error says which option to change.
pub fn rollout_job(
    config: &Config,
    name: &str,
    inputs: &[(String, serde_json::Value)],
    requester: &str,
) -> Result<NewJob, String> {
    let Some(r) = config.rollouts.iter().find(|r| r.name == name) else {
        let known: Vec<&str> = config.rollouts.iter().map(|r| r.name.as_str()).collect();
        return Err(match known.as_slice() {
            [] => format!(
                "rollout {} is not in sheetq.toml: it has no [[rollouts]]",
                crate::sheet_text::shown(name)
            ),
            known => format!(
                "rollout {} is not among the [[rollouts]] of sheetq.toml; it has {}",
                crate::sheet_text::shown(name),
                known.join(", ")
            ),
        });
    };
    let Some(f) = config.catalog.function(&r.function) else {
        return Err(format!(
            "rollout {:?} runs function {:?}, which is not among the [[functions]]; run `sheetq check`",
            r.name, r.function
        ));
    };
    if let Some((input, _)) = inputs.iter().find(|(i, _)| r.inputs.contains_key(i)) {
        return Err(format!(
            "--input {}: rollout {:?} fixes this input in sheetq.toml; leave it out",
            crate::sheet_text::shown(input),
            r.name
        ));
    }
    let values = input_values(f, r.inputs.clone(), inputs)?;
    Ok(NewJob {
        target: crate::queue::ROLLOUT_TARGET.into(),
        function: r.label().into(),
        command: crate::queue::ROLLOUT_COMMAND.into(),
        args_json: f.args_json_with(&values),
        requester: requester.into(),
        panel_sheet: crate::queue::ROLLOUT_TARGET.into(),
        // What is pressed (and approved): its function and targets, as the 一括 panel says.
        flags: vec![crate::rollout::scope_flag(
            &f.label,
            &r.targets_in(&config.catalog),
        )],
    })
}

/// `sheetq enqueue`: appends one `待機` row (INSERT_ROWS, RAW); returns its jobId.
pub async fn enqueue(
    sheets: &dyn Sheets,
    config: &Config,
    job: &NewJob,
) -> Result<String, AdminError> {
    let meta = sheets.metadata().await?;
    require_init(&meta)?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let header = sheets.read(&[a1::range(QUEUE_SHEET, "1:1")]).await?;
    let header = crate::sheets::first_row(&header);
    let columns = ColumnMap::from_header(&header, &config.headers)?;
    let job_id = uuid::Uuid::new_v4().to_string();
    // A job of a function with approvers is received on Google's clock, as far as this
    // process has read it (the Apps Script intake's are too): its expiry compares 受付日時
    // with that clock alone (docs/design.md §5.5).
    let received = match config.catalog.approval_rule(&job.function) {
        Some(_) => sheets.google_now().unwrap_or_else(Utc::now),
        None => Utc::now(),
    };
    let row = job_row(&columns, config, tz, &job_id, received, job);
    let last = a1::column_letters(columns.width() - 1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        // After the last job, not into a blank row a person left in the queue
        // (`queue::append_anchor`).
        let (found, from) = find_job(sheets, &columns, &job_id).await?;
        if found {
            return Ok(job_id);
        }
        let range = a1::range(QUEUE_SHEET, &format!("A{from}:{last}{from}"));
        match sheets.append(&range, std::slice::from_ref(&row)).await {
            Ok(_) => return Ok(job_id),
            // The reply did not come (or a 5xx): the row may have landed all the same. The
            // next look for its jobId tells, so a lost reply never makes a second row.
            Err(e) if e.is_retryable() && attempt < ENQUEUE_ATTEMPTS => {
                tracing::warn!(error = %e, job.id = %job_id, attempt, "the append may or may not have applied; looking for the row before trying again");
                tokio::time::sleep(std::time::Duration::from_millis(300 * u64::from(attempt)))
                    .await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// How often `enqueue` tries to append its row while the API fails.
const ENQUEUE_ATTEMPTS: u32 = 3;

/// Whether the queue holds `job_id`, and the row an append should start its range at
/// (from the jobId column and column A: one read).
async fn find_job(
    sheets: &dyn Sheets,
    columns: &ColumnMap,
    job_id: &str,
) -> Result<(bool, u32), AdminError> {
    let c = columns.letters(Column::JobId);
    let read = sheets
        .read(&[
            a1::range(QUEUE_SHEET, &format!("{c}2:{c}")),
            a1::range(QUEUE_SHEET, "A2:A"),
        ])
        .await?;
    let column = |k: usize| -> Vec<String> {
        read.get(k)
            .map(|v| {
                v.values
                    .iter()
                    .map(|r| r.first().map(crate::queue::cell_text).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (ids, a) = (column(0), column(1));
    let found = ids.iter().any(|id| id == job_id);
    let filled = |v: &[String], i: usize| v.get(i).is_some_and(|t| !t.trim().is_empty());
    let rows: Vec<(u32, bool)> = (0..ids.len().max(a.len()))
        .filter(|i| filled(&ids, *i) || filled(&a, *i))
        .map(|i| (i as u32 + 2, filled(&a, i)))
        .collect();
    Ok((found, crate::queue::append_anchor(&rows)))
}

/// How a job ended, as its queue row says.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub state: State,
    pub message: String,
    pub result_url: String,
}

/// `enqueue --wait`: reads the queue every `every` until the row of `job_id` is finished
/// (完了, エラー or タイムアウト). Each look is one read: the header and the jobId, 状態,
/// 結果URL and メッセージ columns, matched up by position within that one reply (rows may
/// move between looks, not within one). A look the API refuses for a while (429, 5xx, no
/// reply) is taken again at the next; an error if the row is gone (deleted, or archived
/// before it was seen finished).
pub async fn wait_finished(
    sheets: &dyn Sheets,
    config: &Config,
    job_id: &str,
    every: std::time::Duration,
) -> Result<Finished, AdminError> {
    const WANTED: [Column; 4] = [
        Column::JobId,
        Column::State,
        Column::ResultUrl,
        Column::Message,
    ];
    let header = read_riding_out(sheets, &[a1::range(QUEUE_SHEET, "1:1")], every, job_id).await?;
    let mut columns = ColumnMap::from_header(&crate::sheets::first_row(&header), &config.headers)?;
    loop {
        let mut ranges = vec![a1::range(QUEUE_SHEET, "1:1")];
        ranges.extend(WANTED.iter().map(|c| {
            let l = columns.letters(*c);
            a1::range(QUEUE_SHEET, &format!("{l}2:{l}"))
        }));
        let read = read_riding_out(sheets, &ranges, every, job_id).await?;
        let now = ColumnMap::from_header(&crate::sheets::first_row(&read), &config.headers)?;
        if now != columns {
            // A person moved a column between looks: read by the new layout next time.
            columns = now;
            continue;
        }
        let cell = |col: usize, row: usize| -> String {
            read.get(col + 1)
                .and_then(|v| v.values.get(row))
                .and_then(|r| r.first())
                .map(queue::cell_text)
                .unwrap_or_default()
        };
        let ids = read.get(1).map_or(0, |v| v.values.len());
        let Some(i) = (0..ids).find(|i| cell(0, *i) == job_id) else {
            return Err(AdminError::Problems(vec![format!(
                "job {job_id} is no longer in '{QUEUE_SHEET}' (a person deleted its row, or it was archived); its outcome cannot be read there"
            )]));
        };
        let state = config.states.parse(&cell(1, i));
        if let Some(state) = state.filter(|s| s.is_final()) {
            return Ok(Finished {
                state,
                result_url: cell(2, i),
                message: cell(3, i),
            });
        }
        tokio::time::sleep(every).await;
    }
}

/// A read for [`wait_finished`], tried again every `every` while the API refuses it for a
/// while (429: the account's daemons spend its quota; 5xx; no reply): the job's outcome is
/// still to come, so the wait goes on, as a daemon's would.
async fn read_riding_out(
    sheets: &dyn Sheets,
    ranges: &[String],
    every: std::time::Duration,
    job_id: &str,
) -> Result<Vec<ValueRange>, SheetsError> {
    loop {
        match sheets.read(ranges).await {
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, job.id = %job_id, "cannot read the queue just now; still waiting");
                tokio::time::sleep(every).await;
            }
            answered => return answered,
        }
    }
}

/// The cells of a new `待機` queue row, laid out by the header map.
pub fn job_row(
    columns: &ColumnMap,
    config: &Config,
    tz: Tz,
    job_id: &str,
    now: DateTime<Utc>,
    job: &NewJob,
) -> Vec<Cell> {
    crate::panel::NewJob {
        job_id: job_id.to_string(),
        received_at: now,
        requester: job.requester.clone(),
        panel_sheet: job.panel_sheet.clone(),
        panel_row: None,
        target: job.target.clone(),
        function: job.function.clone(),
        command: job.command.clone(),
        args_json: job.args_json.clone(),
        flags: job.flags.join(","),
        inputs: config.catalog.inputs_text(&job.function, &job.args_json),
    }
    .to_row(columns, &config.states, tz)
}

/// What `sheetq status` reports; printed as text, or as JSON with `--json`. Times are in
/// the spreadsheet's time zone (RFC 3339 with its offset in JSON, the zone's name in text).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    pub spreadsheet_id: String,
    pub time_zone: String,
    pub queue_rows: usize,
    /// Rows per 状態 word, the configured words first, in lifecycle order.
    pub counts: Vec<(String, usize)>,
    pub running: Vec<StatusJob>,
    /// Jobs a live daemon's heartbeat lists as running whose queue row is gone (deleted
    /// while they ran): `sheetq cancel` still stops them, through that daemon.
    pub running_without_row: Vec<StatusOrphan>,
    pub oldest_waiting: Option<StatusJob>,
    /// Jobs waiting for approval (承認待ち), oldest first: `sheetq approve` takes their jobIds.
    pub awaiting_approval: Vec<StatusJob>,
    /// The latest エラー and タイムアウト rows, newest first (at most 5).
    pub recent_failures: Vec<StatusJob>,
    /// Rollouts running or waiting to start, then the latest ended (at most 5 in all, by
    /// row), with their jobs' counts as the rows show them.
    pub rollouts: Vec<StatusRollout>,
    pub archive: StatusArchive,
    pub lease: String,
    /// Results in this machine's outbox (`state_dir`) not yet on the sheet.
    pub outbox_pending: Vec<StatusJob>,
    /// Results written nowhere: their queue rows were deleted (newest first, at most 10).
    pub unplaceable: Vec<StatusJob>,
    /// Notifications in this machine's journal not yet sent (oldest first); never a URL.
    pub notifications_waiting: Vec<StatusNotice>,
    /// Whether a daemon on this machine holds the spreadsheet off, since when, why, and
    /// when it tries again (`crate::pause`).
    pub held_off: Option<crate::pause::Pause>,
    pub workers: Vec<StatusWorker>,
}

/// One rollout as `sheetq status` lists it: its row, and its jobs counted from their rows
/// (`crate::rollout::plan`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusRollout {
    pub job_id: String,
    /// Its `[[rollouts]]` name; empty when the config no longer has it.
    pub name: String,
    pub label: String,
    pub state: String,
    pub targets: usize,
    pub done: usize,
    /// The targets whose job failed, in the rollout's order.
    pub failed: Vec<String>,
    pub cancelled: usize,
    pub running: usize,
    pub waiting: usize,
    /// Targets whose job is not queued yet.
    pub not_queued: usize,
    /// Its メッセージ: the progress while it runs, the counts once it ended.
    pub message: String,
}

/// The rollouts of `snapshot` as `status` lists them: open ones first, then the latest
/// ended, at most `limit`.
fn status_rollouts(
    snapshot: &queue::Snapshot,
    config: &Config,
    limit: usize,
) -> Vec<StatusRollout> {
    let mut rows: Vec<&queue::QueueRow> = snapshot.rows.iter().filter(|r| r.is_rollout()).collect();
    rows.sort_by_key(|r| (crate::claim::is_final(r), std::cmp::Reverse(r.row)));
    rows.into_iter()
        .take(limit)
        .map(|r| {
            let label = crate::sheet_text::trim(&r.function).to_string();
            let def = config.rollouts.iter().find(|d| d.label() == label);
            let progress = def
                .map(|d| {
                    let limits = crate::rollout::Limits {
                        max_parallel: d.max_parallel,
                        max_failures: d.max_failures,
                    };
                    let targets = d.targets_in(&config.catalog);
                    crate::rollout::plan(&r.job_id, &targets, limits, false, snapshot).0
                })
                .unwrap_or_default();
            StatusRollout {
                job_id: r.job_id.clone(),
                name: def.map(|d| d.name.clone()).unwrap_or_default(),
                label,
                state: match &r.state {
                    queue::RowState::Known(s) => config.states.word(*s).to_string(),
                    queue::RowState::Unknown(t) => t.clone(),
                },
                targets: progress.total,
                done: progress.done,
                failed: progress.failed.clone(),
                cancelled: progress.cancelled,
                running: progress.running,
                waiting: progress.waiting,
                not_queued: progress.unqueued.len(),
                message: r.message.clone(),
            }
        })
        .collect()
}

/// A running job without a queue row, as its daemon's heartbeat lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusOrphan {
    pub job_id: String,
    pub target: String,
    pub worker: String,
}

/// A notification waiting to be sent: its channel's name, the job, its sends so far.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusNotice {
    pub channel: String,
    pub job_id: String,
    pub state: String,
    pub tries: u32,
    pub next_try: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusJob {
    pub job_id: String,
    pub target: String,
    pub function: String,
    pub state: String,
    pub worker: String,
    /// When it was received, started or finished, as fits the list it is in.
    pub at: Option<String>,
    pub age_secs: Option<i64>,
    pub message: String,
    /// Who asked to stop it (its 中止要求), while the request waits to be acted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_asked_by: Option<String>,
    /// Its function's inputs as its args carry them (`version=1.2.4, dry_run=true`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub inputs: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusArchive {
    pub exists: bool,
    pub rows_moved: u64,
    pub retention: Option<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StatusWorker {
    pub id: String,
    pub host: String,
    pub version: String,
    pub slots: String,
    pub running: String,
    pub last_seen: Option<String>,
    pub seen_secs_ago: Option<i64>,
    /// Its last heartbeat was written as it shut down.
    pub stopped: bool,
}

/// An instant as `status` shows it: RFC 3339 in the spreadsheet's zone.
fn zoned(t: DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    t.with_timezone(&tz)
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

/// An RFC 3339 time of [`zoned`] as text: `2026-11-30 21:10:05 JST`.
fn readable(rfc3339: &str, tz: chrono_tz::Tz) -> String {
    DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| {
            t.with_timezone(&tz)
                .format("%Y-%m-%d %H:%M:%S %Z")
                .to_string()
        })
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// `sheetq status`: queue counts, running jobs, the oldest waiting job, recent failures, the
/// archive, the lease, row bindings, this machine's outbox, and the daemons' heartbeats.
pub async fn status(sheets: &dyn Sheets, config: &Config) -> Result<Status, AdminError> {
    let meta = sheets.metadata().await?;
    require_init(&meta)?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let ranges = [
        a1::range(QUEUE_SHEET, "1:1"),
        queue_data_range(&meta),
        a1::range(WORKER_SHEET, &format!("A1:{}", crate::workers::LAST_COLUMN)),
    ];
    let values = sheets.read(&ranges).await?;
    let header = crate::sheets::first_row(&values);
    let columns = ColumnMap::from_header(&header, &config.headers)?;
    let rows = values.get(1).map(|v| v.values.clone()).unwrap_or_default();
    let snapshot = queue::parse_rows(&rows, 2, &columns, &config.states, tz);
    let view = JobView {
        states: &config.states,
        catalog: &config.catalog,
        tz,
        now: Utc::now(),
    };
    let running = snapshot
        .rows
        .iter()
        .filter(|r| r.state.is(State::Running) && !r.is_rollout())
        .map(|r| view.job(r, r.started_at))
        .collect();
    let oldest_waiting = crate::claim::waiting_order(&snapshot)
        .first()
        .map(|i| &snapshot.rows[*i])
        .map(|r| view.job(r, r.received_at));
    let mut awaiting: Vec<&queue::QueueRow> = snapshot
        .rows
        .iter()
        .filter(|r| r.state.is(State::AwaitingApproval))
        .collect();
    awaiting.sort_by_key(|r| (r.received_at.is_none(), r.received_at, r.row));
    let awaiting_approval = awaiting
        .into_iter()
        .map(|r| view.job(r, r.received_at))
        .collect();
    let worker = values.get(2).map(|v| v.values.clone()).unwrap_or_default();
    let in_queue: std::collections::HashSet<&str> =
        snapshot.rows.iter().map(|r| r.job_id.as_str()).collect();
    let running_without_row = crate::workers::parse(&worker, tz)
        .into_iter()
        .filter(|h| !h.stopped)
        .flat_map(|h| {
            h.jobs
                .into_iter()
                .filter(|j| !j.done && !j.held && !in_queue.contains(j.job_id.as_str()))
                .map(move |j| StatusOrphan {
                    job_id: j.job_id,
                    target: j.target,
                    worker: h.worker_id.clone(),
                })
        })
        .collect();
    let lease = worker
        .first()
        .and_then(|r| r.get(1))
        .map(queue::cell_text)
        .unwrap_or_default();
    let outbox_pending = crate::outbox::read_pending(&config.state_dir)
        .iter()
        .map(|j| view.finished(j))
        .collect();
    let unplaceable = crate::outbox::read_unplaceable(&config.state_dir)
        .iter()
        .rev()
        .take(10)
        .map(|j| view.finished(j))
        .collect();
    let notifications_waiting = crate::notifications::sender::read_waiting(&config.state_dir)
        .into_iter()
        .map(|n| StatusNotice {
            channel: n.channel,
            job_id: n.job_id,
            state: n.state,
            tries: n.tries,
            next_try: n.next_try,
        })
        .collect();
    Ok(Status {
        spreadsheet_id: meta.spreadsheet_id.clone(),
        time_zone: meta.time_zone.clone(),
        queue_rows: snapshot.rows.len(),
        counts: view.counts(&snapshot),
        running,
        running_without_row,
        oldest_waiting,
        awaiting_approval,
        recent_failures: view.recent_failures(&snapshot, 5),
        rollouts: status_rollouts(&snapshot, config, 5),
        archive: status_archive(&meta, &worker, config),
        lease,
        outbox_pending,
        unplaceable,
        notifications_waiting,
        held_off: crate::pause::read(&config.state_dir),
        workers: view.workers(&worker),
    })
}

/// How `sheetq status` shows jobs and daemons: state words as configured, times in the
/// spreadsheet's zone and as ages from `now`.
struct JobView<'a> {
    states: &'a queue::StateWords,
    catalog: &'a crate::panel::catalog::Catalog,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
}

impl JobView<'_> {
    fn word(&self, r: &queue::QueueRow) -> String {
        match &r.state {
            queue::RowState::Known(s) => self.states.word(*s).to_string(),
            queue::RowState::Unknown(t) => format!("? {t}"),
        }
    }

    /// Queue row `r`, dated `at`.
    fn job(&self, r: &queue::QueueRow, at: Option<DateTime<Utc>>) -> StatusJob {
        StatusJob {
            job_id: r.job_id.clone(),
            target: r.target_key().to_string(),
            function: r.function.clone(),
            state: self.word(r),
            worker: r.worker.clone(),
            at: at.map(|t| zoned(t, self.tz)),
            age_secs: at.map(|t| (self.now - t).num_seconds()),
            message: r.message.clone(),
            stop_asked_by: (!r.state.is_final())
                .then(|| crate::cancel::asked_of(r, self.tz, self.now))
                .flatten()
                .map(|asked| asked.who),
            inputs: self.catalog.inputs_text(&r.function, &r.args_json),
        }
    }

    /// A result kept in this machine's `state_dir`.
    fn finished(&self, j: &crate::outbox::FinishedJob) -> StatusJob {
        StatusJob {
            job_id: j.job_id.clone(),
            target: j.target.clone(),
            function: j.function.clone(),
            state: String::new(),
            worker: j.worker.clone(),
            at: Some(zoned(j.finished_at, self.tz)),
            age_secs: Some((self.now - j.finished_at).num_seconds()),
            message: j.message.clone(),
            stop_asked_by: None,
            inputs: String::new(),
        }
    }

    /// Rows per state word: the configured ones first, then any other text found.
    fn counts(&self, snapshot: &queue::Snapshot) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = State::ALL
            .iter()
            .map(|s| (self.states.word(*s).to_string(), 0))
            .collect();
        for r in &snapshot.rows {
            let w = self.word(r);
            match counts.iter_mut().find(|(k, _)| *k == w) {
                Some((_, n)) => *n += 1,
                None => counts.push((w, 1)),
            }
        }
        counts
    }

    /// The latest `n` rows that ended エラー or タイムアウト, newest first.
    fn recent_failures(&self, snapshot: &queue::Snapshot, n: usize) -> Vec<StatusJob> {
        let mut failed: Vec<&queue::QueueRow> = snapshot
            .rows
            .iter()
            .filter(|r| r.state.is(State::Error) || r.state.is(State::Timeout))
            .collect();
        failed.sort_by_key(|r| std::cmp::Reverse(r.finished_at));
        failed
            .into_iter()
            .take(n)
            .map(|r| self.job(r, r.finished_at))
            .collect()
    }

    /// The daemons' heartbeat rows (`worker`: the worker sheet as read).
    fn workers(&self, worker: &[Vec<Cell>]) -> Vec<StatusWorker> {
        crate::workers::parse(worker, self.tz)
            .into_iter()
            .map(|h| {
                let row = worker.get(h.row as usize - 1).cloned().unwrap_or_default();
                let cell = |i: usize| row.get(i).map(queue::cell_text).unwrap_or_default();
                StatusWorker {
                    id: h.worker_id.clone(),
                    host: h.host.clone(),
                    version: cell(2),
                    slots: cell(3),
                    running: cell(4),
                    last_seen: h.seen.map(|t| zoned(t, self.tz)),
                    seen_secs_ago: h.seen.map(|t| (self.now - t).num_seconds()),
                    stopped: h.stopped,
                }
            })
            .collect()
    }
}

/// The archive: whether it exists, the count of rows moved (`_ワーカー!D1`), the retention.
fn status_archive(
    meta: &crate::sheets::SpreadsheetMeta,
    worker: &[Vec<Cell>],
    config: &Config,
) -> StatusArchive {
    StatusArchive {
        exists: meta.sheet(crate::archive::ARCHIVE_SHEET).is_some(),
        rows_moved: worker
            .first()
            .and_then(|r| r.get(3))
            .map(queue::cell_text)
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0),
        retention: config
            .retention
            .map(|r| humantime::format_duration(r).to_string()),
    }
}

impl Status {
    /// The text `sheetq status` prints.
    pub fn text(&self) -> String {
        let tz: chrono_tz::Tz = self.time_zone.parse().unwrap_or(chrono_tz::UTC);
        let at = |j: &StatusJob| j.at.as_deref().map(|t| readable(t, tz)).unwrap_or_default();
        // Everything read from the spreadsheet is shown by the one rule for sheet text
        // (`sheet_text::visible`): no escape sequence reaches the terminal, no line is
        // longer than a screenful.
        let v = |s: &str| crate::sheet_text::visible(s, crate::sheet_text::LINE_CHARS);
        // A job's inputs, after its function: ` [version=1.2.4, dry_run=true]`.
        let inputs = |j: &StatusJob| {
            if j.inputs.is_empty() {
                String::new()
            } else {
                format!(" [{}]", v(&j.inputs))
            }
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "queue '{QUEUE_SHEET}': {} rows (times in {})",
            self.queue_rows, self.time_zone
        );
        for (w, n) in &self.counts {
            let _ = writeln!(out, "  {}: {n}", v(w));
        }
        if !self.running.is_empty() {
            let _ = writeln!(out, "running:");
            for j in &self.running {
                let asked = j
                    .stop_asked_by
                    .as_ref()
                    .map(|who| format!("; asked to stop by {}", v(who)))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {} target={} function={}{} worker={} since {} ({}s){asked}",
                    v(&j.job_id),
                    v(&j.target),
                    v(&j.function),
                    inputs(j),
                    v(&j.worker),
                    at(j),
                    j.age_secs.unwrap_or(0)
                );
            }
        }
        if !self.running_without_row.is_empty() {
            let _ = writeln!(
                out,
                "running without a queue row (its row was deleted; `sheetq cancel JOBID` stops it through its daemon):"
            );
            for j in &self.running_without_row {
                let _ = writeln!(
                    out,
                    "  {} target={} on {}",
                    v(&j.job_id),
                    v(&j.target),
                    v(&j.worker)
                );
            }
        }
        if let Some(j) = &self.oldest_waiting {
            let _ = writeln!(
                out,
                "oldest waiting: {} target={} since {}",
                v(&j.job_id),
                v(&j.target),
                at(j)
            );
        }
        if !self.awaiting_approval.is_empty() {
            let _ = writeln!(out, "awaiting approval (sheetq approve JOBID --as WHO):");
            for j in &self.awaiting_approval {
                let _ = writeln!(
                    out,
                    "  {} target={} function={}{} since {}",
                    v(&j.job_id),
                    v(&j.target),
                    v(&j.function),
                    inputs(j),
                    at(j)
                );
            }
        }
        if !self.rollouts.is_empty() {
            let _ = writeln!(out, "rollouts:");
            for r in &self.rollouts {
                let failed = if r.failed.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", v(&r.failed.join(", ")))
                };
                if r.name.is_empty() {
                    let _ = writeln!(
                        out,
                        "  {} {} {}: not among the [[rollouts]] of sheetq.toml, so no daemon with this config follows it (`sheetq cancel {}` ends it)",
                        v(&r.job_id),
                        v(&r.label),
                        v(&r.state),
                        v(&r.job_id)
                    );
                    continue;
                }
                let _ = writeln!(
                    out,
                    "  {} {} {}: {} targets: {} done, {} failed{failed}, {} cancelled, {} running, {} waiting, {} not queued yet",
                    v(&r.job_id),
                    v(&r.label),
                    v(&r.state),
                    r.targets,
                    r.done,
                    r.failed.len(),
                    r.cancelled,
                    r.running,
                    r.waiting,
                    r.not_queued
                );
            }
        }
        if !self.recent_failures.is_empty() {
            let _ = writeln!(out, "recent failures:");
            for j in &self.recent_failures {
                let _ = writeln!(
                    out,
                    "  {} {} target={} function={}{} at {}: {}",
                    v(&j.state),
                    v(&j.job_id),
                    v(&j.target),
                    v(&j.function),
                    inputs(j),
                    at(j),
                    v(&j.message)
                );
            }
        }
        let retention = match &self.archive.retention {
            Some(r) => format!("finished jobs older than {r} move there"),
            None => "retention = \"0\": finished jobs stay in the queue".to_string(),
        };
        let archive = crate::archive::ARCHIVE_SHEET;
        let _ = if self.archive.exists {
            writeln!(
                out,
                "archive '{archive}': {} rows moved there so far; {retention}",
                self.archive.rows_moved
            )
        } else {
            writeln!(out, "archive '{archive}': not created yet; {retention}")
        };
        let _ = writeln!(out, "lease: {}", v(&self.lease));
        if let Some(p) = &self.held_off {
            let _ = writeln!(out, "{}", p.line(tz));
        }
        let _ = writeln!(
            out,
            "outbox (this machine): {} result(s) waiting to be written",
            self.outbox_pending.len()
        );
        for j in &self.outbox_pending {
            let _ = writeln!(
                out,
                "  {} target={} function={} finished {}",
                v(&j.job_id),
                v(&j.target),
                v(&j.function),
                at(j)
            );
        }
        if !self.unplaceable.is_empty() {
            let _ = writeln!(
                out,
                "results written nowhere, their queue rows were deleted ({}):",
                self.unplaceable.len()
            );
            for j in &self.unplaceable {
                let _ = writeln!(
                    out,
                    "  {} target={} function={} finished {}: {}",
                    v(&j.job_id),
                    v(&j.target),
                    v(&j.function),
                    at(j),
                    v(&j.message)
                );
            }
        }
        if !self.notifications_waiting.is_empty() {
            let _ = writeln!(
                out,
                "notifications (this machine): {} waiting to be sent",
                self.notifications_waiting.len()
            );
            for n in &self.notifications_waiting {
                let _ = writeln!(
                    out,
                    "  {} job {} ({}), {} send(s) tried{}",
                    v(&n.channel),
                    v(&n.job_id),
                    v(&n.state),
                    n.tries,
                    n.next_try
                        .map(|t| format!(
                            ", next at {}",
                            t.with_timezone(&tz).format("%m/%d %H:%M:%S")
                        ))
                        .unwrap_or_default()
                );
            }
        }
        let _ = writeln!(out, "workers:");
        for w in &self.workers {
            let seen = match (&w.last_seen, w.seen_secs_ago) {
                (Some(t), Some(ago)) if w.stopped => {
                    format!("stopped at {} ({ago}s ago)", readable(t, tz))
                }
                (Some(t), Some(ago)) => format!("last seen {} ({ago}s ago)", readable(t, tz)),
                _ => "never seen".to_string(),
            };
            let _ = writeln!(
                out,
                "  {} host={} version={} slots={} running={} {seen}",
                v(&w.id),
                v(&w.host),
                v(&w.version),
                v(&w.slots),
                v(&w.running)
            );
        }
        out
    }
}

/// Whether a panel carries `label` as its target label (metadata and one read of the
/// marker cells). `enqueue` warns when none does: the job runs, its result shows nowhere
/// but the queue.
pub async fn has_panel(
    sheets: &dyn Sheets,
    config: &Config,
    label: &str,
) -> Result<bool, AdminError> {
    let (_, index) = crate::apply::panel::discover(sheets, &config.panel).await?;
    Ok(index.get(label).is_some())
}
