//! The daemon's side of panels beyond results: it lends the runner its spreadsheet client
//! and config for panel jobs (`sheetq.panels`, a tick on the index: one panel sync per job
//! step), and hides panels whose target has been idle for `hide_panels_after`.

use std::sync::Arc;

use std::time::Duration;

use chrono::{DateTime, Utc};
use tracing::{debug, info, warn};

use super::poll::Poll;
use super::{Daemon, DaemonError};
use crate::apply::panel::{self as sync_panels, SyncRequest};
use crate::commands::{Opened, PanelOpener};
use crate::config::Config;
use crate::outbox::{Finish, FinishedJob};
use crate::panel::index_sheet;
use crate::panel::{self, PanelOutcome};
use crate::queue::QueueRow;
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdate, Cell, GridRange, Request, Sheets, ValueRange};

/// The panels as the last poll's marker cells showed them, and when idle ones were last
/// looked for.
#[derive(Debug, Default)]
pub(super) struct Panels {
    /// Panels by target label, as the marker cells of the last poll showed them.
    pub(super) index: crate::panel::PanelIndex,
    /// When idle panels were last looked for.
    pub(super) idle_checked: Option<tokio::time::Instant>,
}

/// How often the daemon looks for idle panels (a look costs nothing but this poll's data;
/// hiding costs one write).
pub(super) const IDLE_CHECK_EVERY: Duration = Duration::from_secs(600);

impl Daemon {
    pub(super) fn idle_check_due(&self) -> bool {
        self.config.catalog.hide_after.is_some()
            && self.served.panels.index.index_sheet.is_some()
            && self
                .served
                .panels
                .idle_checked
                .is_none_or(|t| t.elapsed() >= IDLE_CHECK_EVERY)
    }

    /// Hides the panels whose target has been idle for `hide_panels_after` (never deletes
    /// one), and says so in their index row's link cell; one write for all of them.
    pub(super) async fn hide_idle_panels(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        self.served.panels.idle_checked = Some(tokio::time::Instant::now());
        let Some(index) = &poll.index else {
            return Ok(());
        };
        let idle = index_sheet::idle_panels(
            &index.entries,
            &self.served.panels.index,
            &self.served.sheets.meta,
            self.config.catalog.hide_after,
            Utc::now(),
            self.served.layout.tz,
        );
        if idle.is_empty() {
            return Ok(());
        }
        let mut requests = Vec::new();
        let mut hidden = Vec::new();
        for (panel, row) in &idle {
            requests.push(Request::UpdateSheetHidden {
                sheet_id: panel.sheet_id,
                hidden: true,
            });
            requests.push(Request::UpdateCells {
                range: GridRange::cell(index.sheet_id, row - 1, index_sheet::LINK),
                rows: vec![vec![Cell::String(index_sheet::HIDDEN_TEXT.into())]],
            });
            hidden.push((panel.sheet_id, panel.label.clone()));
        }
        self.sheets
            .batch_update(&BatchUpdate {
                requests,
                ..Default::default()
            })
            .await?;
        for (id, label) in hidden {
            info!(target = %Logged(&label), "panel hidden: its target had no job for hide_panels_after");
            if let Some(s) = self
                .served
                .sheets
                .meta
                .sheets
                .iter_mut()
                .find(|s| s.sheet_id == id)
            {
                s.hidden = true;
            }
        }
        Ok(())
    }
}

pub(super) struct DaemonPanels {
    pub(super) sheets: Arc<dyn Sheets>,
    /// The config in force (a reload replaces it: new `[[functions]]` and `[[targets]]`).
    config: std::sync::RwLock<Arc<Config>>,
}

impl DaemonPanels {
    pub(super) fn new(sheets: Arc<dyn Sheets>, config: Config) -> Self {
        Self {
            sheets,
            config: std::sync::RwLock::new(Arc::new(config)),
        }
    }

    /// The config panel jobs go by from now on.
    pub(super) fn set_config(&self, config: Config) {
        match self.config.write() {
            Ok(mut c) => *c = Arc::new(config),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(config),
        }
    }

    pub(super) fn config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(c) => Arc::clone(&c),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

impl std::fmt::Debug for DaemonPanels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonPanels")
            .field("spreadsheet_id", &self.config().spreadsheet_id)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl PanelOpener for DaemonPanels {
    async fn open(&self, labels: &[String]) -> Result<Opened, String> {
        let config = self.config();
        let request = SyncRequest {
            open: labels.to_vec(),
            ..SyncRequest::default()
        };
        let done = sync_panels::sync(self.sheets.as_ref(), &config, &request, None)
            .await
            .map_err(|e| e.to_string())?;
        let report = &done.report;
        let opened: Vec<&str> = labels
            .iter()
            .map(String::as_str)
            .filter(|l| report.panels.contains_key(*l))
            .collect();
        if opened.is_empty() {
            return Err(format!(
                "no panel was opened: {}",
                report.to_string().trim().replace('\n', "; ")
            ));
        }
        let url = match opened.as_slice() {
            [one] => report.panels.get(*one).map(|gid| {
                format!(
                    "https://docs.google.com/spreadsheets/d/{}/edit#gid={gid}",
                    config.spreadsheet_id
                )
            }),
            _ => None,
        };
        Ok(Opened {
            message: report.to_string().trim().replace('\n', "; "),
            url,
        })
    }
}

impl Daemon {
    /// The waiting/running status cells that differ from what the panels show (at most 20),
    /// leaving out rows whose result is about to be written in the same call.
    pub(super) fn panel_display(&self, poll: &Poll) -> Vec<ValueRange> {
        let mut snapshot = poll.snapshot.clone();
        snapshot.rows.retain(|r| !self.outbox.contains(&r.job_id));
        let mut display = panel::status_updates(
            &snapshot,
            &self.served.panels.index,
            &poll.tables,
            self.served.layout.tz,
            &self.config.panel,
            20,
        );
        let catalog = self.registry.catalog();
        let tz = self.served.layout.tz;
        display.extend(panel::status::approval_updates(
            &snapshot,
            &self.served.panels.index,
            &poll.tables,
            &self.config.panel,
            20,
            |row| {
                let rule = catalog.approval_rule(&row.function)?;
                Some(self.approval_text(row, &crate::approval::tally(&rule, row, tz)))
            },
        ));
        display.extend(panel::status::next_run_updates(
            &poll.snapshot,
            &self.served.panels.index,
            &poll.tables,
            &self.next_runs(),
            self.served.layout.tz,
            &self.config.panel,
        ));
        display.extend(self.index_display(poll, &snapshot.rows));
        display
    }

    /// The index's 状況 and 最終結果 cells that differ from what `rows` (the queue as this
    /// write leaves it: results written with it left out, claims made with it running) and
    /// the panels of `poll` say. A panel some of whose cells someone else's protection bars
    /// says so on the index (`hold_off`), where people look first.
    pub(super) fn index_display(&self, poll: &Poll, rows: &[QueueRow]) -> Vec<ValueRange> {
        let Some(index) = &poll.index else {
            return Vec::new();
        };
        let barred: std::collections::HashSet<String> = (self.served.panels.index.panels())
            .iter()
            .filter(|p| {
                (self.served.guards.barred)
                    .iter()
                    .any(|b| b.area.sheet_id == p.sheet_id)
            })
            .map(|p| p.label.clone())
            .collect();
        panel::index_sheet::index_updates(
            &index.title,
            &index.entries,
            &poll.tables,
            rows,
            &self.config.panel,
            &barred,
        )
    }

    /// The panel cells (状態, 結果, 更新日時) of a finished job, found by target label and
    /// function label. A panel or row that cannot be found is a warning: the queue row is
    /// written regardless.
    pub(super) fn panel_result(
        &self,
        poll: &Poll,
        row: &QueueRow,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Option<ValueRange> {
        let (panel_ref, panel_row) = self.result_panel_row(poll, row)?;
        Some(panel::result_cells(
            panel_ref,
            panel_row,
            &panel_outcome(
                finish,
                at,
                url,
                message,
                self.next_run(row.target_key(), &row.function),
            ),
            self.served.layout.tz,
            &self.config.panel,
        ))
    }

    /// The panel and row a finished job's outcome goes to, if any: none for a panel job,
    /// nor when a newer press of its function owns the row, nor when it cannot be found
    /// (a warning: the queue row is written regardless).
    pub(super) fn result_panel_row<'p>(
        &'p self,
        poll: &'p Poll,
        row: &QueueRow,
    ) -> Option<(&'p panel::PanelRef, u32)> {
        if row.target_key() == panel::catalog::PANELS_TARGET {
            // A panel job has no panel row: its outcome is its queue row (and the panels
            // and index links it made).
            return None;
        }
        if let Some(newer) = panel::newer_press(&poll.snapshot, row) {
            // The panel row shows the newest press of its function (a late result of a job
            // timed out meanwhile, whose function was pressed again): the queue row alone
            // takes this one.
            debug!(job.id = ?row.job_id, newer = ?newer.job_id, "a newer press of this function owns its panel row; writing the result to the queue row only");
            return None;
        }
        match panel::locate(&self.served.panels.index, &poll.tables, row) {
            Ok((panel_ref, panel_row)) => Some((panel_ref, panel_row.row)),
            Err(miss) => {
                warn!(job.id = ?row.job_id, target = %Logged(row.target_key()), "{miss}; only the queue row is written");
                None
            }
        }
    }

    /// The panel cells of a finished job. A job whose claim commit wrote its panel 結果 as
    /// a formula (its メッセージ linked to its 結果URL, looked up by jobId when shown,
    /// `joblog::panel_result_formula`) gets only 状態 and 更新日時.
    pub(super) fn job_panel_result(
        &self,
        poll: &Poll,
        row: &QueueRow,
        job: &FinishedJob,
    ) -> Vec<ValueRange> {
        let Some((panel_ref, panel_row)) = self.result_panel_row(poll, row) else {
            return Vec::new();
        };
        let mut outcome = panel_outcome(
            job.finish,
            job.finished_at,
            &job.url,
            &job.message,
            self.next_run(&job.target, &job.function),
        );
        outcome.inputs = job.inputs.clone();
        let (tz, layout) = (self.served.layout.tz, &self.config.panel);
        if job.panel_linked {
            panel::status_and_time_cells(panel_ref, panel_row, &outcome, tz, layout)
        } else {
            vec![panel::result_cells(
                panel_ref, panel_row, &outcome, tz, layout,
            )]
        }
    }
}

/// How a job ended, as its panel row shows it.
pub(super) fn panel_outcome(
    finish: Finish,
    at: DateTime<Utc>,
    url: &str,
    message: &str,
    next_run: Option<DateTime<Utc>>,
) -> PanelOutcome {
    PanelOutcome {
        state: finish.state(),
        finished_at: at,
        url: (!url.is_empty()).then(|| url.to_string()),
        message: message.to_string(),
        next_run,
        inputs: String::new(),
    }
}
