//! `sheetq approve JOBID --as WHO` and `sheetq reject JOBID --as WHO`: an operator's
//! approval or rejection from a shell on the VM (docs/design.md §5.5), for a queue served
//! with the poll intake, which cannot tell who ticked.
//!
//! Both check the job against the config before writing (its function has `approvers`,
//! `WHO` matches them and is not the requester, the job waits for approval), so that a
//! refusal is said here rather than found later in the daemon's log. An approval adds a line
//! to the row's 承認 cell; a rejection is a request to stop the job (中止要求) by an approver,
//! which the daemons turn into 却下. Both are written by position and checked by the reply
//! as `sheetq cancel` writes ([`super::cancel::write_on_row`]).

use chrono::Utc;

use super::cancel::{known_state, write_on_row, Step};
use super::AdminError;
use crate::approval::{self, Rule};
use crate::config::Config;
use crate::panel::catalog::Catalog;
use crate::queue::{Column, QueueRow, State};
use crate::sheets::Sheets;

/// What `sheetq approve` or `sheetq reject` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written: the job has `count` of the `needed` approvals with this one (an approval),
    /// or is asked to end 却下 (a rejection, `count` 0).
    Written { count: usize, needed: usize },
    /// This person had already approved (or asked to stop) it; nothing was written.
    Already,
}

/// Approves `job_id` as `who`.
pub async fn approve(
    sheets: &dyn Sheets,
    config: &Config,
    catalog: &Catalog,
    job_id: &str,
    who: &str,
) -> Result<Outcome, AdminError> {
    write_on_row(sheets, config, job_id, Column::Approvals, |row, tz| {
        let rule = awaiting(catalog, row, job_id, who, false)?;
        let tally = approval::tally(&rule, row, tz);
        if tally
            .approved_by
            .iter()
            .any(|a| approval::same_person(a, who))
        {
            return Ok(Step::Done(Outcome::Already));
        }
        let text = approval::with_approval(&row.approvals, who, Utc::now(), job_id, tz);
        Ok(Step::Write(
            text,
            Outcome::Written {
                count: tally.approved_by.len() + 1,
                needed: rule.needed,
            },
        ))
    })
    .await
}

/// Rejects `job_id` as `who`: a request to stop it, which the daemons turn into 却下.
pub async fn reject(
    sheets: &dyn Sheets,
    config: &Config,
    catalog: &Catalog,
    job_id: &str,
    who: &str,
) -> Result<Outcome, AdminError> {
    write_on_row(sheets, config, job_id, Column::CancelRequest, |row, tz| {
        let rule = awaiting(catalog, row, job_id, who, true)?;
        if crate::cancel::applies(&row.cancel_request, job_id) {
            return Ok(Step::Done(Outcome::Already));
        }
        let text = crate::cancel::Request::new(who, Utc::now(), job_id).cell_text(tz);
        Ok(Step::Write(
            text,
            Outcome::Written {
                count: 0,
                needed: rule.needed,
            },
        ))
    })
    .await
}

/// The rule `row`'s job waits under, when `who` may approve or reject it; else the error
/// that says why not and what to do.
fn awaiting<'a>(
    catalog: &'a Catalog,
    row: &QueueRow,
    job_id: &str,
    who: &str,
    rejecting: bool,
) -> Result<Rule<'a>, AdminError> {
    let refuse = |why: String| Err(AdminError::Problems(vec![why]));
    let Some(rule) = catalog.approval_rule(&row.function) else {
        return refuse(format!(
            "job {job_id} is a job of function {:?}, which has no approvers in sheetq.toml; nothing to approve",
            row.function
        ));
    };
    let state = known_state(row, job_id, "nothing to approve")?;
    // A 待機 row not yet turned 承認待ち (queued by an intake that does not know) takes an
    // approval too; a rejection only once it is 承認待ち, which the daemons turn it into
    // within a poll (before that, a stop would end it キャンセル, not 却下).
    let unturned = state == State::Waiting && !approval::cleared(row, Some(&rule));
    if unturned && rejecting {
        return Err(AdminError::NotYet(format!(
            "job {job_id} is not waiting for approval yet: a daemon turns it 承認待ち within a poll"
        )));
    }
    if state != State::AwaitingApproval && !unturned {
        return refuse(format!(
            "job {job_id} is {}, not waiting for approval; nothing to do",
            state_name(state)
        ));
    }
    if let Some(why) = rule.refusal(who, &row.requester) {
        let (what, hint) = match why {
            approval::Refusal::Unknown => (
                "not an e-mail address",
                "say who with --as, as an address such as lead@example.com",
            ),
            approval::Refusal::Requester => {
                ("it is the requester's own job", "another approver must do it")
            }
            approval::Refusal::RequesterUnknown => (
                "nobody knows who asked for it (its 依頼者 is empty), so nobody can be told apart from the requester",
                "queue it where 依頼者 is known: the Apps Script's installable trigger, or `sheetq enqueue --requester`",
            ),
            approval::Refusal::NotListed => (
                "not among its approvers",
                "only those its function's approvers lists may; add them there, or ask one of them",
            ),
        };
        return refuse(format!(
            "{who:?} may not approve or reject job {job_id} of function {:?}: {what} ({hint})",
            row.function
        ));
    }
    Ok(rule)
}

fn state_name(state: State) -> &'static str {
    match state {
        State::Waiting => "waiting to run (待機)",
        State::Running => "running (実行中)",
        State::AwaitingApproval => "waiting for approval (承認待ち)",
        State::Done | State::Error | State::Timeout => "finished",
        State::Cancelled | State::Rejected | State::Expired => "ended without running",
    }
}
