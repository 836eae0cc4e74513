//! The daemon's side of panels beyond results: it lends the runner its spreadsheet client
//! and config for panel jobs (`sheetq.panels`, a tick on the index: one panel sync per job
//! step), and hides panels whose target has been idle for `hide_panels_after`.

use std::sync::Arc;

use std::time::Duration;

use chrono::Utc;
use tracing::info;

use super::poll::Poll;
use super::{Daemon, DaemonError};
use crate::apply::panel::{self as sync_panels, SyncRequest};
use crate::commands::{Opened, PanelOpener};
use crate::config::Config;
use crate::panel::index_sheet;
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdate, Cell, GridRange, Request, Sheets};

/// How often the daemon looks for idle panels (a look costs nothing but this poll's data;
/// hiding costs one write).
const IDLE_CHECK_EVERY: Duration = Duration::from_secs(600);

impl Daemon {
    pub(super) fn idle_check_due(&self) -> bool {
        self.config.catalog.hide_after.is_some()
            && self.served.panels.index_sheet.is_some()
            && self
                .served
                .idle_checked
                .is_none_or(|t| t.elapsed() >= IDLE_CHECK_EVERY)
    }

    /// Hides the panels whose target has been idle for `hide_panels_after` (never deletes
    /// one), and says so in their index row's link cell; one write for all of them.
    pub(super) async fn hide_idle_panels(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        self.served.idle_checked = Some(tokio::time::Instant::now());
        let Some(index) = &poll.index else {
            return Ok(());
        };
        let idle = index_sheet::idle_panels(
            &index.entries,
            &self.served.panels,
            &self.served.sheet_meta,
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
                .sheet_meta
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

    fn config(&self) -> Arc<Config> {
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
