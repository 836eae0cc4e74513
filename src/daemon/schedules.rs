//! The daemon's step for `[[schedules]]` (docs/design.md §5.4): which occurrences are due by
//! this machine's clock, whether the queue already has each (by its jobId, derived from the
//! spreadsheet, the schedule and the instant), and the rows of those it has not, appended in
//! the claim commit: under the lease, in the batch its fence makes all-or-nothing.

use std::collections::HashSet;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use tracing::{debug, info};

use super::{Daemon, DaemonError, Poll};
use crate::a1;
use crate::panel::NewJob;
use crate::queue::Column;
use crate::schedule::occurrence_job_id;
use crate::sheets::Request;

/// At start, an occurrence due this long ago (or within its schedule's `catch_up`, if
/// longer) is still queued; what fell due before that was missed while no daemon ran.
pub(super) const SCHEDULE_GRACE: StdDuration = StdDuration::from_secs(120);

/// The furthest back a running daemon looks for the occurrence it has not queued yet (one
/// that fell due while the API was out of reach, or a pass was held up): a day, or half of
/// `retention` if less, so the row it looks for cannot have moved to the archive.
pub(super) const RUNNING_LOOK_BACK: StdDuration = StdDuration::from_secs(24 * 3600);

/// How far back an occurrence may lie and still be queued: `grace` for a daemon that has
/// not looked yet (a schedule's `catch_up` widens it, in [`ScheduleDef::due`]); for one that
/// has (`looked`), any occurrence since it last did, within [`RUNNING_LOOK_BACK`] or half of
/// `retention`, so that an outage delays an occurrence and never drops it.
///
/// [`ScheduleDef::due`]: crate::schedule::ScheduleDef::due
fn look_back(looked: bool, grace: StdDuration, retention: Option<StdDuration>) -> StdDuration {
    if !looked {
        return grace;
    }
    let cap = retention.map_or(RUNNING_LOOK_BACK, |r| (r / 2).min(RUNNING_LOOK_BACK));
    cap.max(grace)
}

/// One occurrence due now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Occurrence {
    pub(super) schedule: String,
    pub(super) at: DateTime<Utc>,
    pub(super) job_id: String,
}

impl Daemon {
    /// How late an occurrence may be seen at start and still be queued without `catch_up`.
    fn schedule_grace(&self) -> StdDuration {
        SCHEDULE_GRACE.max(self.config.idle_poll_interval * 2)
    }

    /// The occurrences due at `now` whose rows `poll` does not show; those it shows are
    /// taken as queued (by another daemon, or by us in a commit whose reply was lost).
    pub(super) fn schedules_due(&mut self, poll: &Poll, now: DateTime<Utc>) -> Vec<Occurrence> {
        let tz = self.served.layout.tz;
        let grace = self.schedule_grace();
        let mut due = Vec::new();
        for s in &self.config.schedules {
            let seen = match self.served.schedules_seen.get(&s.name) {
                Some(t) => Some(*t),
                // Without catch_up, what fell due before this daemon started is not its to
                // queue (another daemon's, or missed): it looks from its first pass on.
                None if s.catch_up.is_none() => {
                    self.served.schedules_seen.insert(s.name.clone(), now);
                    continue;
                }
                None => None,
            };
            let window = look_back(seen.is_some(), grace, self.config.retention);
            let Some(at) = s.due(tz, seen, now, window) else {
                continue;
            };
            let job_id = occurrence_job_id(&self.config.spreadsheet_id, &s.name, at);
            if poll.snapshot.rows.iter().any(|r| r.job_id == job_id) {
                self.served.schedules_seen.insert(s.name.clone(), now);
                continue;
            }
            due.push(Occurrence {
                schedule: s.name.clone(),
                at,
                job_id,
            });
        }
        due
    }

    /// Under the lease, on its fresh read: the occurrences due that no queue row has (the
    /// whole jobId column is read when the fresh read did not cover the whole queue), and
    /// the request appending their rows, for the commit. An occurrence found queued is taken
    /// as done.
    pub(super) async fn take_in_schedules(
        &mut self,
        fresh: &Poll,
        now: DateTime<Utc>,
    ) -> Result<(Vec<Request>, Vec<Occurrence>), DaemonError> {
        let mut due = self.schedules_due(fresh, now);
        if due.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        if !fresh.full {
            let ids = self.queue_job_ids().await?;
            let (queued, missing): (Vec<_>, Vec<_>) =
                due.into_iter().partition(|o| ids.contains(&o.job_id));
            for o in queued {
                self.served.schedules_seen.insert(o.schedule, now);
            }
            due = missing;
        }
        let columns = &self.served.layout.columns;
        let rows: Vec<_> = due
            .iter()
            .filter_map(|o| {
                let s = self
                    .config
                    .schedules
                    .iter()
                    .find(|s| s.name == o.schedule)?;
                let f = self.config.catalog.function(&s.function)?;
                // Checked when the config was read; a function whose inputs changed since
                // is the config's problem, said at its reload.
                let args_json = s.args_json_of(f).unwrap_or_else(|_| f.args_json());
                let job = NewJob {
                    inputs: self.config.catalog.inputs_text(&s.function, &args_json),
                    job_id: o.job_id.clone(),
                    received_at: now,
                    requester: s.requester(),
                    panel_sheet: s.target.clone(),
                    panel_row: None,
                    target: s.target.clone(),
                    function: s.function.clone(),
                    command: f.command.clone(),
                    args_json,
                    flags: f.flags_text(),
                };
                Some(job.to_row(columns, &self.config.states, self.served.layout.tz))
            })
            .collect();
        if rows.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        Ok((
            vec![Request::AppendRows {
                sheet_id: self.served.layout.queue_sheet_id,
                rows,
            }],
            due,
        ))
    }

    /// The commit that appended `queued` applied: they are in the queue.
    pub(super) fn schedules_queued(&mut self, queued: &[Occurrence], now: DateTime<Utc>) {
        for o in queued {
            info!(schedule = %o.schedule, at = %o.at.to_rfc3339(), job.id = ?o.job_id, "scheduled job queued");
            self.served.schedules_seen.insert(o.schedule.clone(), now);
        }
    }

    /// Every jobId of the queue (one read of its jobId column).
    pub(super) async fn queue_job_ids(&self) -> Result<HashSet<String>, DaemonError> {
        let columns = &self.served.layout.columns;
        let letters = columns.letters(Column::JobId);
        let range = a1::range(crate::queue::QUEUE_SHEET, &format!("{letters}2:{letters}"));
        let read = self.sheets.read(&[range]).await?;
        let ids: HashSet<String> = read
            .iter()
            .flat_map(|v| v.values.iter())
            .filter_map(|row| row.first())
            .map(crate::queue::cell_text)
            .filter(|id| !id.is_empty())
            .collect();
        debug!(
            ids = ids.len(),
            "read the queue's jobIds for the schedules due"
        );
        Ok(ids)
    }

    /// The next scheduled run of `function` on `target` (after now, this machine's clock).
    pub(super) fn next_run(&self, target: &str, function: &str) -> Option<DateTime<Utc>> {
        let tz = self.served.layout.tz;
        let now = Utc::now();
        self.config
            .schedules
            .iter()
            .filter(|s| s.target == target.trim() && s.function == function.trim())
            .filter_map(|s| s.next_after(tz, now, 1).into_iter().next())
            .min()
    }

    /// Each scheduled (target, function) with its next run.
    pub(super) fn next_runs(&self) -> Vec<(String, String, DateTime<Utc>)> {
        let mut out: Vec<(String, String, DateTime<Utc>)> = Vec::new();
        for s in &self.config.schedules {
            if out
                .iter()
                .any(|(t, f, _)| *t == s.target && *f == s.function)
            {
                continue;
            }
            if let Some(next) = self.next_run(&s.target, &s.function) {
                out.push((s.target.clone(), s.function.clone(), next));
            }
        }
        out
    }

    /// The next instant any schedule falls due after `now` (this machine's clock).
    pub(super) fn next_occurrence(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let tz = self.served.layout.tz;
        self.config
            .schedules
            .iter()
            .filter_map(|s| s.next_after(tz, now, 1).into_iter().next())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: StdDuration = StdDuration::from_secs(120);

    #[test]
    fn a_running_daemon_looks_back_past_an_outage_but_not_past_what_the_archive_keeps() {
        assert_eq!(
            look_back(false, GRACE, None),
            GRACE,
            "at start only the grace (or catch_up)"
        );
        assert_eq!(
            look_back(true, GRACE, None),
            RUNNING_LOOK_BACK,
            "a 10-minute outage is well inside it"
        );
        let day = StdDuration::from_secs(24 * 3600);
        assert_eq!(look_back(true, GRACE, Some(30 * day)), RUNNING_LOOK_BACK);
        assert_eq!(
            look_back(true, GRACE, Some(StdDuration::from_secs(3600))),
            StdDuration::from_secs(1800),
            "half of a short retention, so the row is still in the queue"
        );
    }
}
