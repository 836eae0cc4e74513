//! A daemon's start: the sheets and their layout found once (`load_layout`), the queue's
//! protection checked before anything is trusted, the window of unfinished rows and the
//! outbox's results taken up again (docs/design.md §2, §4).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::a1;
use crate::commands::Registry;
use crate::config::Config;
use crate::lease::WORKER_SHEET;
use crate::outbox::Outbox;
use crate::panel::PanelIndex;
use crate::queue::{self, ColumnMap, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{Cell, Precedence, Sheets, SpreadsheetMeta};
use crate::watch::Watch;
use crate::workers;

use super::cancels::Stops;
use super::cells::SheetList;
use super::fleet::Fleet;
use super::guards::Protections;
use super::job_log::Logs;
use super::jobs::Jobs;
use super::lease_calls::Held;
use super::panel::Panels;
use super::pass::PassState;
use super::poll::Window;
use super::provenance::Continuations;
use super::through::Pending;
use super::{
    archive, claim_policy, panel, Daemon, DaemonError, Layout, Observers, QueueProtection,
    RunReport, Served, Shared,
};

impl Daemon {
    pub(super) async fn start(
        sheets: Arc<dyn Sheets>,
        config: Config,
        registry: Registry,
        observers: Observers,
        shared: Shared,
    ) -> Result<Self, DaemonError> {
        // Any number of presses may wait on a start-up: its reads go ahead of the calls of
        // the account's other spreadsheets, which are serving already (sheets::turns).
        sheets.set_precedence(Precedence::Pressing);
        let Started {
            layout,
            protection: queue_protection,
            meta,
            panels,
            archived,
            states,
        } = load_layout(sheets.as_ref(), &config).await?;
        let registry = trust_queue(registry, &config, queue_protection)?;
        let outbox = Outbox::open(&config.state_dir)?;
        // A note left by a run that ended while holding the spreadsheet off says nothing of
        // this one.
        if let Err(e) = crate::pause::clear(&config.state_dir) {
            warn!(error = %e, "could not remove an old hold-off note from state_dir");
        }
        let policy = claim_policy(&config);
        let Shared {
            slots,
            share,
            runner,
            webhooks,
        } = shared;
        let announcer = crate::notifications::sender::Announcer::start(
            &config.state_dir,
            config.notify.clone(),
            webhooks,
            Arc::clone(&observers.metrics),
        )
        .map_err(crate::outbox::OutboxError::from)?;
        let panel_opener = Arc::new(panel::DaemonPanels::new(
            Arc::clone(&sheets),
            config.clone(),
        ));
        runner.set_panel_opener(panel_opener.clone());
        let account = sheets.account();
        let marks = crate::provenance::Marks::new(&config.spreadsheet_id);
        let watch = Watch::new(config.heartbeat_interval.max(config.poll_interval * 2));
        let mut daemon = Self {
            sheets,
            runner,
            panel_opener,
            registry,
            outbox,
            announcer,
            policy,
            observers,
            slots,
            share,
            jobs: Jobs::default(),
            stops: Stops::default(),
            logs: Logs::default(),
            job_cancel: CancellationToken::new(),
            retries_stop: CancellationToken::new(),
            status_sent: String::new(),
            process: crate::workers::process_id(&crate::config::host_name(), std::process::id()),
            report: RunReport::default(),
            config,
            served: Served {
                layout,
                window: Window::default(),
                pass: PassState::new(),
                sheets: SheetList::default(),
                panels: Panels::default(),
                archive: archive::Pace {
                    before: archived > 0,
                    ..Default::default()
                },
                lease: Held::new(),
                fleet: Fleet::new(account),
                writes: Pending::default(),
                continuations: Continuations::new(marks),
                guards: Protections::default(),
                schedules_seen: HashMap::new(),
                watch,
                reported: HashSet::new(),
                held_off: None,
                listed: HashMap::new(),
            },
        };
        daemon.take_in_protections(&meta);
        daemon.take_in_sheets(meta.sheets);
        daemon.take_in_panels(panels);
        match states {
            Some(states) => daemon.take_in_window(&states),
            None => daemon.find_window().await?,
        }
        daemon.recover().await?;
        daemon.sheets.set_precedence(Precedence::Plain);
        Ok(daemon)
    }
}

/// What start-up reads of the spreadsheet before its first poll.
pub(super) struct Started {
    layout: Layout,
    protection: QueueProtection,
    meta: SpreadsheetMeta,
    panels: PanelIndex,
    /// Rows the archive took so far, by its counter.
    archived: u64,
    /// The queue's 状態 cells, when the queue was small enough to read whole.
    states: Option<Vec<Vec<Cell>>>,
}

/// Reads the spreadsheet's metadata, then the queue header with every sheet's marker cells
/// (the panels) and the archive's counter in one read: the fatal checks of start-up, in two
/// of the account's requests.
pub(super) async fn load_layout(
    sheets: &dyn Sheets,
    config: &Config,
) -> Result<Started, DaemonError> {
    let mut meta = sheets.metadata().await?;
    let protection = queue_protection(&meta, sheets, config);
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let queue = meta
        .sheet(QUEUE_SHEET)
        .ok_or_else(|| DaemonError::MissingSheet(QUEUE_SHEET.into()))?;
    let worker = meta
        .sheet(WORKER_SHEET)
        .ok_or_else(|| DaemonError::MissingSheet(WORKER_SHEET.into()))?;
    let widened = widen_worker_sheet(sheets, worker).await?;
    let last_col = queue.last_column();
    let markers = crate::panel::marker_ranges(&meta, &config.panel);
    // A small queue (a fresh one has 1000 rows) is read whole with the header: its 状態
    // column then needs no read of its own.
    let small = queue.row_count <= SMALL_QUEUE_ROWS;
    let queue_rows = if small { queue.row_count.max(1) } else { 1 };
    let mut ranges = vec![
        a1::range(QUEUE_SHEET, &format!("A1:{last_col}{queue_rows}")),
        a1::range(WORKER_SHEET, crate::archive::COUNTER_CELLS),
    ];
    let panel_ranges = markers.len();
    ranges.extend(markers);
    let log_sheet = meta
        .sheet(crate::joblog::LOG_SHEET)
        .filter(|_| config.log_chars > 0);
    if log_sheet.is_some() {
        ranges.push(a1::range(crate::joblog::LOG_SHEET, "1:1"));
    }
    let read = sheets.read(&ranges).await?;
    let log = log_sheet.and_then(|sheet| {
        let header = read
            .get(2 + panel_ranges)
            .and_then(|v| v.values.first())
            .cloned()
            .unwrap_or_default();
        crate::joblog::LogLayout::from_header(sheet.sheet_id, &header)
            .inspect_err(|e| warn!("{e}"))
            .ok()
    });
    if log.is_none() && config.log_chars > 0 {
        info!(
            "no '{}' sheet: jobs' output is kept under state_dir only; `sheetq init` makes the sheet",
            crate::joblog::LOG_SHEET
        );
    }
    let header_row = crate::sheets::first_row(&read);
    let columns = ColumnMap::from_header(&header_row, &config.headers)?;
    let states = small.then(|| {
        let rows = read.first().map(|v| v.values.as_slice()).unwrap_or(&[]);
        state_cells(
            rows.get(1..).unwrap_or_default(),
            columns.index(queue::Column::State),
        )
    });
    let archived = (read.get(1))
        .and_then(|v| v.values.first()?.get(1).and_then(archive::count_of))
        .unwrap_or(0);
    let panels = PanelIndex::build(
        &meta,
        read.get(2..2 + panel_ranges).unwrap_or_default(),
        &config.panel,
    );
    let layout = Layout {
        tz,
        worker_sheet_id: worker.sheet_id,
        queue_sheet_id: queue.sheet_id,
        last_col,
        columns,
        log,
    };
    if let Some(columns) = widened {
        // So that the first poll reads the stop column already.
        if let Some(w) = meta.sheets.iter_mut().find(|s| s.title == WORKER_SHEET) {
            w.column_count = columns;
        }
    }
    Ok(Started {
        layout,
        protection,
        meta,
        panels,
        archived,
        states,
    })
}

/// Makes room on `_ワーカー` for the heartbeat's columns and the stop column right of them
/// (`workers::STOP_COLUMN`, which `sheetq cancel` writes and every poll reads once the sheet
/// is that wide), once, at start, rather than stop: heartbeat rows grew a column (the
/// account, the stop column). Returns the new width when it widened the sheet.
async fn widen_worker_sheet(
    sheets: &dyn Sheets,
    worker: &crate::sheets::SheetMeta,
) -> Result<Option<i32>, DaemonError> {
    let wanted = (workers::HEADER.len() as i32).max(workers::STOP_COLUMN as i32 + 1);
    if worker.column_count < wanted {
        info!(
            columns = worker.column_count,
            wanted, "widening '_ワーカー' for the heartbeat's new columns"
        );
        let widen = crate::sheets::BatchUpdate {
            requests: vec![crate::sheets::Request::SetColumnCount {
                sheet_id: worker.sheet_id,
                columns: wanted,
            }],
            ..Default::default()
        };
        match sheets.batch_update(&widen).await {
            Ok(_) => return Ok(Some(wanted)),
            Err(e) if worker.column_count < workers::HEADER.len() as i32 => {
                warn!(error = %e, "could not widen '_ワーカー'");
                return Err(DaemonError::WorkerSheetTooNarrow {
                    columns: worker.column_count,
                });
            }
            // The heartbeat fits: only `sheetq cancel` of a job whose row is gone waits
            // for a wider sheet (it widens it itself).
            Err(e) => warn!(error = %e, "could not widen '_ワーカー' for its stop column"),
        }
    }
    Ok(None)
}

/// Queues of at most this many grid rows are read whole at start-up (with the header), so
/// that finding the unfinished window costs no read of its own.
pub(super) const SMALL_QUEUE_ROWS: i32 = 2000;

/// The 状態 cells of queue `rows` (from row 2), shaped as a read of the 状態 column
/// alone gives them: one cell a row where there is one, nothing after the last.
pub(super) fn state_cells(rows: &[Vec<Cell>], state: u32) -> Vec<Vec<Cell>> {
    let mut cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|row| {
            row.get(state as usize)
                .filter(|c| !queue::cell_text(c).is_empty())
                .cloned()
                .into_iter()
                .collect()
        })
        .collect();
    while cells.last().is_some_and(Vec::is_empty) {
        cells.pop();
    }
    cells
}

/// The queue's protection, from metadata read anyway (at start, or on a reload).
pub(super) fn queue_protection(
    meta: &crate::sheets::SpreadsheetMeta,
    sheets: &dyn Sheets,
    config: &Config,
) -> QueueProtection {
    let editors = crate::protection::Editors::new(&sheets.account(), &config.protect_editors)?;
    crate::protection::queue_protected(meta, QUEUE_SHEET, editors.accounts())
}

/// The registry that trusts the queue as far as `protection` allows: a continuation's args
/// only on a protected queue; and `allow` (who may press) only there, since anyone may write
/// any 依頼者 into an open queue. A config with `allow` on an open queue cannot run.
pub(super) fn trust_queue(
    registry: Registry,
    config: &Config,
    protection: QueueProtection,
) -> Result<Registry, DaemonError> {
    match protection {
        Ok(()) => Ok(registry.with_queue_protected(true)),
        Err(why) if registry.catalog().needs_protected_queue() => {
            Err(DaemonError::AllowOnOpenQueue(why))
        }
        Err(why) => {
            if config.protect {
                warn!(why = %why, "the queue is not protected: any editor of the spreadsheet can write any job into it (sheetq still checks each against the config)");
            } else {
                warn!("protect = false: the queue is open to every editor of the spreadsheet; 依頼者 can be forged, and allow cannot be used");
            }
            Ok(registry.with_queue_protected(false))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_queue_read_whole_gives_the_state_cells_a_read_of_the_state_column_would() {
        let rows = vec![
            vec![json!("j1"), json!("x"), json!("完了")],
            vec![json!("j2")],
            vec![json!("j3"), json!("x"), json!("待機"), json!("more")],
            vec![json!("j4"), json!("x"), json!("")],
            vec![],
        ];
        assert_eq!(
            state_cells(&rows, 2),
            vec![vec![json!("完了")], vec![], vec![json!("待機")]],
            "one cell a row where there is one, nothing after the last filled one"
        );
    }
}
