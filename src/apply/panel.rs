//! Applying a panel sync: read the spreadsheet (metadata, then one `values.batchGet`), plan
//! with [`crate::panel::sync`] and (unless `protect = false`) [`crate::protection`] for each
//! panel's markers and hidden columns, send the plan as one `spreadsheets.batchUpdate`. Three
//! requests whatever the number of panels. Used by `sheetq panels sync|migrate` and by the
//! daemon's panel jobs (a tick on the index).

use chrono::Utc;

use crate::config::Config;
use crate::panel::sync::{self, Migration, SyncError, SyncInput, SyncReport};
use crate::queue::QueueRow;
use crate::sheet_time;
use crate::sheets::{BatchUpdate, Sheets, SheetsError};

/// The panels of the spreadsheet as their marker cells show them now: the metadata, then one
/// read of every sheet's marker block. For the daemon's start (and re-discovery) and for
/// `enqueue`'s check that a panel carries the target.
pub async fn discover(
    sheets: &dyn Sheets,
    layout: &crate::panel::PanelLayout,
) -> Result<(crate::sheets::SpreadsheetMeta, crate::panel::PanelIndex), SheetsError> {
    let meta = sheets.metadata().await?;
    let index = discover_in(sheets, &meta, layout).await?;
    Ok((meta, index))
}

/// [`discover`] in the spreadsheet as `meta` shows it (read just before): one read.
pub async fn discover_in(
    sheets: &dyn Sheets,
    meta: &crate::sheets::SpreadsheetMeta,
    layout: &crate::panel::PanelLayout,
) -> Result<crate::panel::PanelIndex, SheetsError> {
    let ranges = crate::panel::marker_ranges(meta, layout);
    let values = if ranges.is_empty() {
        Vec::new()
    } else {
        sheets.read(&ranges).await?
    };
    Ok(crate::panel::PanelIndex::build(meta, &values, layout))
}

/// What to sync.
#[derive(Debug, Clone, Default)]
pub struct SyncRequest {
    /// Targets whose panels must exist and be visible.
    pub open: Vec<String>,
    /// Every target's panel must exist and be visible.
    pub open_all: bool,
    /// Turn this old panel sheet into the index.
    pub migrate: Option<Migration>,
    /// Plan and report, send nothing.
    pub dry_run: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PanelsError {
    #[error(transparent)]
    Sheets(#[from] SheetsError),
    #[error(transparent)]
    Plan(#[from] SyncError),
    #[error("the spreadsheet's time zone: {0}")]
    Zone(#[from] sheet_time::TimeError),
    #[error("{0}")]
    Protect(String),
}

/// Adds to `plan`'s batch what protects every panel's markers and hidden columns and the
/// index's hidden column (those the batch creates included: their ids are chosen by the
/// plan), and says so in its report; what this account may not change is reported as a
/// problem.
fn protect(
    meta: &crate::sheets::SpreadsheetMeta,
    config: &Config,
    editors: &crate::protection::Editors,
    plan: &mut sync::SyncPlan,
) {
    let panels = plan.report.panel_sheets(meta);
    let mut wanted = crate::panel::protected::panels_and_index(
        &panels,
        plan.report.index_sheet.as_ref(),
        &config.panel,
    );
    // The ▶/承認/■ cells of functions that name people; the sync itself writes them
    // unticked (`panel::sync`), so no tick made while others could edit one is kept.
    let labelled: Vec<(i32, String, String)> = panels
        .iter()
        .filter_map(|(id, title)| {
            let label = plan.report.panels.iter().find(|(_, p)| *p == id)?.0;
            Some((*id, title.clone(), label.clone()))
        })
        .collect();
    wanted.extend(crate::panel::guard::wanted_on(
        &labelled,
        &config.panel,
        &config.catalog,
    ));
    let planned = crate::protection::plan(meta, &wanted, editors);
    plan.requests.extend(planned.requests);
    plan.report.protected.extend(planned.done);
    plan.report.problems.extend(planned.blocked);
}

/// What a sync did, and how many API requests it took.
#[derive(Debug, Clone)]
pub struct SyncDone {
    pub report: SyncReport,
    /// Requests sent (reads and the write).
    pub requests: u32,
    /// Requests in the one batch (0: nothing to write, no batch sent).
    pub batch_len: usize,
}

/// Reads, plans and (unless a dry run) writes one sync. `queue` (rows of the unfinished
/// window) refreshes the index's 状況 column; `None` keeps it.
pub async fn sync(
    sheets: &dyn Sheets,
    config: &Config,
    request: &SyncRequest,
    queue: Option<&[QueueRow]>,
) -> Result<SyncDone, PanelsError> {
    let meta = sheets.metadata().await?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let layout = &config.panel;
    let mut ranges = sync::read_ranges(&meta, layout);
    let old_range = match &request.migrate {
        Some(m) => match sync::migration_range(&meta, &m.title) {
            Some(r) => Some(r),
            None => {
                return Err(SyncError::NoSuchSheet {
                    title: crate::a1::quote_title(&m.title),
                }
                .into())
            }
        },
        None => None,
    };
    ranges.extend(old_range.iter().cloned());
    let mut values = sheets.read(&ranges).await?;
    let old_values = if old_range.is_some() {
        values.pop().map(|v| v.values).unwrap_or_default()
    } else {
        Vec::new()
    };
    let input = SyncInput {
        meta: &meta,
        values: &values,
        catalog: &config.catalog,
        layout,
        tz,
        now: Utc::now(),
        open: &request.open,
        open_all: request.open_all,
        queue,
    };
    let mut plan = match &request.migrate {
        Some(m) => sync::plan_migration(&input, m, &old_values)?,
        None => sync::plan(&input)?,
    };
    if let Some(editors) =
        crate::protection::Editors::of(config.protect, &config.protect_editors, &sheets.account())
            .map_err(PanelsError::Protect)?
    {
        protect(&meta, config, &editors, &mut plan);
    }
    let batch_len = plan.requests.len();
    let mut requests = 2;
    if !request.dry_run && batch_len > 0 {
        sheets
            .batch_update(&BatchUpdate {
                requests: plan.requests,
                ..Default::default()
            })
            .await?;
        requests += 1;
    }
    Ok(SyncDone {
        report: plan.report,
        requests,
        batch_len,
    })
}
