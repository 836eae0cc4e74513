//! The kept lease (docs/design.md §3): a daemon that sees no other live daemon on its
//! spreadsheet may leave the lease it committed under in the cell for its next claim pass,
//! which then commits on its poll's read without an acquire, one write less a round. When
//! it may be kept ([`may_keep`]), used ([`may_commit_under`]) and must be freed
//! ([`Daemon::kept_lease_blocks`]) are decided here, on plain values.

use std::collections::HashSet;
use std::time::Duration;

use tracing::info;

use crate::claim::PassPlan;
use crate::lease::LeaseState;
use crate::queue::{self, State};
use crate::sheets::Request;
use crate::workers::Heartbeat;

use super::poll::Poll;
use super::Daemon;

/// How many commits in a row keep the lease at most: the acquire that follows carries the
/// removals of finished rows' bindings and of old fences, which ride on acquires.
pub(super) const KEPT_ROUNDS: u32 = 8;

/// A lease a commit of ours left in the cell for our next claim ([`may_keep`]).
#[derive(Debug, Clone)]
pub(super) struct KeptLease {
    /// The cell's text, as the commit wrote it.
    pub(super) value: String,
    /// How many commits in a row have kept it.
    pub(super) rounds: u32,
}

/// Whether a commit may leave the lease ours for the next claim pass. Only when the claims
/// that follow can be nobody else's: rows of `snapshot` stay waiting after `plan`, every
/// one of them for a target a job of ours runs on (`running`, and what `plan` claims), so
/// no daemon may claim it before our result, and the pass that writes that result claims
/// it; and no other live daemon shows among `workers` (a stopped one's row counts for
/// nothing), whose presses the kept lease would hold back. A row another daemon could
/// claim now (its target free, our slots full) lets the lease go.
pub(super) fn may_keep<T>(
    me: &str,
    dead_after: Duration,
    workers: &[Heartbeat],
    running: &[&str],
    snapshot: &queue::Snapshot,
    plan: &PassPlan<T>,
) -> bool {
    let alone = !(workers.iter()).any(|h| h.worker_id != me && !h.stopped && h.is_live(dead_after));
    let rows = &snapshot.rows;
    let decided: HashSet<usize> = (plan.claims.iter().map(|(i, _)| *i))
        .chain(plan.cancels.iter().copied())
        .chain(plan.turns.iter().map(|(i, _)| *i))
        .collect();
    let ours: HashSet<&str> = (running.iter().copied())
        .chain(plan.claims.iter().map(|(i, _)| rows[*i].target_key()))
        .collect();
    let mut left = (rows.iter().enumerate())
        .filter(|(i, r)| r.state.is(State::Waiting) && !decided.contains(i))
        .peekable();
    let any_left = left.peek().is_some();
    alone && any_left && left.all(|(_, r)| ours.contains(r.target_key()))
}

/// Whether a pass may commit under the lease our last commit kept, on a read made after
/// that commit applied: the cell still holds it (`on_cell`), at least half of its time to
/// live is `left` (so the commit cannot outlive it), and nothing of ours is `in_doubt` (a
/// commit whose reply was lost, writes to settle under a fresh acquire: those take the
/// lease back, fencing what was sent under it).
pub(super) fn may_commit_under(
    on_cell: bool,
    left: Duration,
    ttl: Duration,
    in_doubt: bool,
) -> bool {
    on_cell && left >= ttl / 2 && !in_doubt
}

impl Daemon {
    /// Whether a commit leaves the lease ours for the next claim pass ([`may_keep`], on this
    /// daemon's running jobs and settings).
    pub(super) fn keep_lease(
        &self,
        workers: &[Heartbeat],
        snapshot: &queue::Snapshot,
        plan: &PassPlan<crate::approval::Turn>,
    ) -> bool {
        let running: Vec<&str> = self
            .jobs
            .running
            .values()
            .map(|c| c.row.target_key())
            .collect();
        may_keep(
            &self.config.worker_id,
            self.config.dead_after,
            workers,
            &running,
            snapshot,
            plan,
        )
    }

    /// Whether this pass may commit under `kept` on `poll` ([`may_commit_under`]).
    pub(super) fn can_commit_under(&self, kept: &KeptLease, poll: &Poll) -> bool {
        let on_cell = matches!(&poll.lease, LeaseState::Held(l) if l.to_string() == kept.value);
        let in_doubt = !self.jobs.unsettled.is_empty()
            || !self.served.writes.pending.is_empty()
            || !self.served.writes.unsure.is_empty()
            || self.served.lease.kept_until.is_some();
        may_commit_under(on_cell, self.lease_left(), self.config.lease_ttl, in_doubt)
    }

    /// Whether a pass that sends no commit should free the lease our last commit kept: kept
    /// for a claim of ours that is no longer the only one coming (another daemon shows up,
    /// a row waits that another daemon could claim while our slots are full), it would
    /// hold the others back until it ran out. `written`: the queue as this pass's read and
    /// write-back left it; `plan`: what this pass would claim on it.
    pub(super) fn kept_lease_blocks(
        &self,
        poll: &Poll,
        written: &queue::Snapshot,
        plan: &PassPlan<crate::approval::Turn>,
    ) -> bool {
        self.served.lease.kept.is_some() && !self.keep_lease(&poll.workers, written, plan)
    }

    /// Frees the lease our last commit kept (one compare-and-swap; taken over meanwhile, it
    /// changes nothing).
    pub(super) async fn release_kept(&mut self) {
        if let Some(kept) = self.served.lease.kept.take() {
            info!("freeing the lease kept for our next claim: another daemon may claim first");
            self.release(&kept.value).await;
        }
    }

    /// The compare-and-swap that frees the lease our last commit kept, if any (and no write
    /// sent under it is in doubt): at shutdown, riding the last heartbeat. Changed by then
    /// (taken over), it changes nothing.
    pub(super) fn release_kept_lease(&mut self) -> Option<Request> {
        let kept = self.served.lease.kept.take()?;
        self.release_request(&kept.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::Pick;
    use crate::queue::{QueueRow, RowState, Snapshot};

    const ME: &str = "vm-1";
    const DEAD_AFTER: Duration = Duration::from_secs(90);

    fn waiting(n: u32, target: &str) -> QueueRow {
        QueueRow {
            job_id: format!("j{n}"),
            target: target.into(),
            state: RowState::Known(State::Waiting),
            ..QueueRow::blank(n)
        }
    }

    fn heartbeat(worker: &str, quiet: u64, stopped: bool) -> Heartbeat {
        Heartbeat {
            worker_id: worker.into(),
            quiet: Duration::from_secs(quiet),
            stopped,
            ..Heartbeat::default()
        }
    }

    fn snapshot(rows: Vec<QueueRow>) -> Snapshot {
        Snapshot {
            rows,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_lone_daemon_keeps_the_lease_while_what_waits_waits_for_its_own_targets() {
        let rows = snapshot(vec![waiting(2, "A"), waiting(3, "B"), waiting(4, "A")]);
        let mut plan: PassPlan<()> = PassPlan::default();
        plan.claims.push((0, Pick::Normal));
        // Row 3 waits for B, which our running job holds; row 4 for A, claimed now.
        assert!(may_keep(ME, DEAD_AFTER, &[], &["B"], &rows, &plan));
        let others = [heartbeat(ME, 0, false), heartbeat("vm-2", 5, false)];
        assert!(
            !may_keep(ME, DEAD_AFTER, &others, &["B"], &rows, &plan),
            "another live daemon's presses would wait behind it"
        );
        let gone = [heartbeat("vm-2", 5, true), heartbeat("vm-3", 600, false)];
        assert!(
            may_keep(ME, DEAD_AFTER, &gone, &["B"], &rows, &plan),
            "a stopped or dead daemon counts for nothing"
        );
        assert!(
            !may_keep(ME, DEAD_AFTER, &[], &[], &rows, &plan),
            "row 3's target is free: another daemon could claim it now"
        );
        let nothing: PassPlan<()> = PassPlan::default();
        assert!(
            !may_keep(
                ME,
                DEAD_AFTER,
                &[],
                &["A", "B"],
                &snapshot(vec![]),
                &nothing
            ),
            "nothing left waiting: nothing to keep it for"
        );
    }

    #[test]
    fn a_kept_lease_is_used_only_while_it_stands_with_time_left_and_nothing_in_doubt() {
        let ttl = Duration::from_secs(30);
        assert!(may_commit_under(true, Duration::from_secs(15), ttl, false));
        assert!(
            !may_commit_under(false, ttl, ttl, false),
            "the cell changed"
        );
        assert!(
            !may_commit_under(true, Duration::from_secs(14), ttl, false),
            "less than half its time left"
        );
        assert!(
            !may_commit_under(true, ttl, ttl, true),
            "a write in doubt takes it back"
        );
    }
}
