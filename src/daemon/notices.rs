//! The notices room of the daemon: what it tells the notification channels of a job's end,
//! of its approval steps, and of an end another daemon's job met here (a timeout, a cancel),
//! each recorded once by the announcer that sends them (`crate::notifications`).

use chrono::{DateTime, Utc};
use tracing::warn;

use crate::outbox::{Finish, FinishedJob};
use crate::queue::QueueRow;

use super::{Daemon, Poll};

impl Daemon {
    /// Records the notices of `jobs`, whose results have just landed (or will never land),
    /// for every `[[notify]]` channel that wants them: one per channel and job, whatever
    /// retries came before. A journal that cannot be written is logged; results go on.
    pub(super) fn announce(&mut self, poll: &Poll, jobs: &[FinishedJob]) {
        let channels = self.announcer.channels();
        let id = &self.config.spreadsheet_id;
        let now = Utc::now();
        let mut notices = Vec::new();
        for job in jobs {
            // Taken whether anyone wants it or not: the job is done with.
            let log_row = self.logs.rows_landed.remove(&job.job_id);
            let refused = self.jobs.refused.remove(&job.job_id);
            let (functions, targets) = self.notice_scope(job);
            let functions: Vec<&str> = functions.iter().map(String::as_str).collect();
            let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
            let wanting: Vec<_> = (channels.iter())
                .filter(|c| c.wants_of(job, &functions, &targets))
                .collect();
            if wanting.is_empty() {
                continue;
            }
            let links = crate::notifications::Links {
                panel: self
                    .result_panel_row(poll, &job.as_row())
                    .map(|(p, row)| crate::notifications::row_url(id, p.sheet_id, row)),
                log: self
                    .served
                    .layout
                    .log
                    .as_ref()
                    .zip(log_row)
                    .map(|(log, row)| crate::notifications::row_url(id, log.sheet_id, row)),
            };
            let state = self.config.states.word(job.finish.state());
            // A job refused before it ran is announced without the sheet's text.
            notices.extend(wanting.into_iter().map(|c| {
                let n = crate::notifications::Notice::of(c, job, id, state, links.clone(), now)
                    .with_inputs(job.inputs.clone());
                match refused {
                    Some(reason) => n.withheld(reason.as_str()),
                    None => n,
                }
            }));
        }
        if let Err(e) = self.announcer.record(notices) {
            warn!(error = %e, "could not record notifications of finished jobs; they are not sent");
        }
    }

    /// Records the notices of a job another daemon's claim held, ended here by a commit's
    /// swap (a dead daemon's job timed out, a waiting job cancelled): no result of ours
    /// announces it.
    pub(super) fn announce_ended(
        &mut self,
        poll: &Poll,
        row: &QueueRow,
        finish: Finish,
        message: &str,
        now: DateTime<Utc>,
    ) {
        let job = FinishedJob {
            target: row.target_key().to_string(),
            inputs: self
                .registry
                .catalog()
                .inputs_text(&row.function, &row.args_json),
            ..FinishedJob::ended(row, row.worker.clone(), finish, now, message.to_string())
        };
        self.announce(poll, &[job]);
    }

    /// The functions and targets `job`'s notice stands for, as `[[notify]]` filters them:
    /// its own; for a rollout's end, also its function and every target it names.
    fn notice_scope(&self, job: &FinishedJob) -> (Vec<String>, Vec<String>) {
        let mut functions = vec![job.function.clone()];
        let mut targets = vec![job.target.clone()];
        if crate::sheet_text::trim(&job.command) == crate::queue::ROLLOUT_COMMAND {
            let label = crate::sheet_text::trim(&job.function);
            if let Some(def) = self.config.rollouts.iter().find(|r| r.label() == label) {
                functions.push(def.function.clone());
                targets.extend(def.targets_in(self.registry.catalog()));
            }
        }
        (functions, targets)
    }

    /// Records the notices of approval `step` of `row`'s job (docs/design.md §5.5): a
    /// request tells who may approve it, an approval who gave it.
    pub(super) fn announce_step(
        &mut self,
        poll: &Poll,
        row: &QueueRow,
        step: crate::notifications::Step,
        now: DateTime<Utc>,
    ) {
        let channels = self.announcer.channels();
        let target = row.target_key();
        let wanting: Vec<_> = channels
            .iter()
            .filter(|c| c.wants_step(step, &row.function, target))
            .collect();
        if wanting.is_empty() {
            return;
        }
        let catalog = self.registry.catalog();
        let Some(rule) = catalog.approval_rule(&row.function) else {
            return;
        };
        let tz = self.served.layout.tz;
        let tally = crate::approval::tally(&rule, row, tz);
        let (state, message) = match step {
            crate::notifications::Step::Requested => (
                self.config.states.awaiting_approval.clone(),
                format!(
                    "承認が {} 件必要です (承認者: {}; 期限 {})",
                    rule.needed,
                    rule.approvers.join(", "),
                    crate::sheet_text::duration_ja(rule.expires)
                ),
            ),
            crate::notifications::Step::Approved => (
                "承認".to_string(),
                format!("承認: {}", tally.approved_by.join(", ")),
            ),
        };
        let id = &self.config.spreadsheet_id;
        let panel = self
            .result_panel_row(poll, row)
            .map(|(p, r)| crate::notifications::row_url(id, p.sheet_id, r));
        let notices = wanting
            .into_iter()
            .map(|c| {
                crate::notifications::Notice::of_step(
                    c,
                    step,
                    row,
                    id,
                    &state,
                    message.clone(),
                    panel.clone(),
                    now,
                )
                .with_inputs(
                    self.registry
                        .catalog()
                        .inputs_text(&row.function, &row.args_json),
                )
            })
            .collect();
        if let Err(e) = self.announcer.record(notices) {
            warn!(error = %e, "could not record notifications of an approval step; they are not sent");
        }
    }
}
