//! The poll intake's side of who may press, approve and stop (`crate::panel::guard`): which of the
//! panels' ▶/承認/■ cells the spreadsheet guards exactly as the config says, judged on the
//! protections the lease acquire's call lists beside the very ticks it reads (no request of
//! its own); the approvals those cells' ticks carry into the queue, in the commit; and
//! every refusal said (log, metric).

use std::collections::HashMap;

use tracing::{info, warn};

use super::{Daemon, DaemonError, Poll};
use crate::commands::Refusal;
use crate::panel::catalog::Catalog;
use crate::panel::guard::Guards;
use crate::panel::intake::IntakePlan;
use crate::panel::PanelTable;
use crate::queue::{Column, State};
use crate::sheets::{Cell, ProtectedRange, Request, SpreadsheetMeta, ValueRange};

/// The protections that bar cells from our writes, as last read.
#[derive(Debug, Default)]
pub(super) struct Protections {
    /// Cells of people's sheets someone else's protection bars: left out of our writes.
    pub(super) barred: Vec<crate::protection::Barred>,
    /// The protected ranges as the last metadata read listed them (its sheets, with their
    /// protections): which ▶/承認/■ cells are guarded for whom (`crate::panel::guard`).
    pub(super) protections: crate::sheets::SpreadsheetMeta,
}

impl Daemon {
    /// The cells guarded exactly for the current config, judged on `meta`'s protections.
    fn guards_on(&self, meta: &SpreadsheetMeta) -> Guards {
        let editors = match crate::protection::Editors::of(
            self.config.protect,
            &self.config.protect_editors,
            &self.sheets.account(),
        ) {
            Ok(Some(e)) => e,
            // Without protection (`protect = false`) or an account to name, no cell is
            // guarded: functions that name people take no tick, and say so.
            Ok(None) | Err(_) => return Guards::default(),
        };
        let panels: Vec<(i32, String, String)> = self
            .served
            .panels
            .index
            .panels()
            .iter()
            .map(|p| (p.sheet_id, p.title.clone(), p.label.clone()))
            .collect();
        Guards::read(
            meta,
            &panels,
            &self.config.panel,
            self.registry.catalog(),
            &editors,
        )
    }

    /// The guards of this pass's ticks (`tables`): none when no tick needs one (an idle
    /// panel, an open function: nothing is judged); else judged on the protections `fresh`
    /// read (the lease acquire's call lists them beside the ticks), or, when that read did
    /// not list them (a commit under a kept lease), on the metadata read now: one request,
    /// only then.
    pub(super) async fn guards_for(
        &mut self,
        tables: &HashMap<String, PanelTable>,
        fresh: Option<&[(i32, Vec<ProtectedRange>)]>,
    ) -> Result<Guards, DaemonError> {
        if !needs_guard(tables, self.registry.catalog()) {
            return Ok(Guards::default());
        }
        match fresh {
            Some(read) => {
                let mut meta = self.served.guards.protections.clone();
                for (id, ranges) in read {
                    match meta.sheets.iter_mut().find(|s| s.sheet_id == *id) {
                        Some(sheet) => sheet.protected_ranges = ranges.clone(),
                        // A panel made since the last metadata read (a panel job's).
                        None => meta.sheets.push(crate::sheets::SheetMeta {
                            sheet_id: *id,
                            protected_ranges: ranges.clone(),
                            ..Default::default()
                        }),
                    }
                }
                self.take_in_protections(&meta);
            }
            None => {
                let meta = self.sheets.metadata().await?;
                self.take_in_protections(&meta);
            }
        }
        Ok(self.guards_on(&self.served.guards.protections))
    }

    /// Says each tick `plan` refused for want of a guard (log, metric).
    pub(super) fn say_unguarded(&self, plan: &IntakePlan) {
        for (panel, function, role) in &plan.unguarded {
            warn!(
                panel = %crate::panel::catalog::shown(panel),
                function = %crate::panel::catalog::shown(function),
                tick = %role,
                "a tick in a cell the config reserves for some people was refused: the cell is not protected for exactly them (run `sheetq panels sync`; `sheetq check` names the cells)"
            );
            self.observers.metrics.job_refused(Refusal::Unguarded);
        }
    }

    /// Takes in the 承認 ticks of guarded cells (`asked`: per job, the approver whose cell
    /// it was): the rows of `fresh` carry the approval from now on, so that this very
    /// pass's approval turns count it, and the commit writes it into the row's 承認 cell,
    /// worded as `sheetq approve` and the installable trigger word it. An approver counted
    /// already on the row adds nothing.
    pub(super) fn take_in_approvals(
        &self,
        fresh: &mut Poll,
        asked: Vec<(String, String)>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<Request> {
        let columns = &self.served.layout.columns;
        let tz = self.served.layout.tz;
        let mut writes = Vec::new();
        if columns.position(Column::Approvals).is_none() {
            if !asked.is_empty() {
                warn!("an approval was ticked, but the queue has no 承認 column to hold it, so it counts nothing; run `sheetq init` to add it");
            }
            return writes;
        }
        for (job, who) in asked {
            for row in fresh
                .snapshot
                .rows
                .iter_mut()
                .filter(|r| r.job_id == job && r.state.is(State::AwaitingApproval))
            {
                let counted = crate::approval::entries(&row.approvals, &job, tz)
                    .iter()
                    .any(|e| crate::approval::same_person(&e.who, &who));
                if counted {
                    continue;
                }
                row.approvals = crate::approval::with_approval(&row.approvals, &who, now, &job, tz);
                info!(job.id = ?job, approver = %who, "approval taken from the approver's own 承認 cell");
                writes.extend(self.grid_write(&ValueRange::new(
                    columns.cell(Column::Approvals, row.row),
                    vec![vec![Cell::from(row.approvals.as_str())]],
                )));
            }
        }
        writes
    }
}

/// Whether a tick of `tables` counts only from a guarded cell: a ▶ of a function with
/// `allow`, a ■ of one with who may stop it, any 承認.
fn needs_guard(tables: &HashMap<String, PanelTable>, catalog: &Catalog) -> bool {
    let rows = tables
        .iter()
        .flat_map(|(label, t)| t.rows.iter().map(move |r| (label, r)));
    rows.into_iter().any(|(label, row)| {
        let f = catalog.of_panel(label).function(&row.function);
        (row.ticked && f.and_then(|f| f.pressers()).is_some())
            || (row.cancel_ticked && f.and_then(|f| f.stoppers()).is_some())
            || !row.approve_ticks.is_empty()
    })
}
