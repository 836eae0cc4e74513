//! Whether a poll runs a claim pass: the lease costs two calls (acquire, commit), so a poll
//! takes it only when something there needs it. Each capability gives its own answer, and
//! the pass claims when any of them has work; a poll with none of them writes nothing more
//! than its heartbeat.

use crate::claim::PassPlan;

/// What a poll found that only a claim pass can act on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct ClaimWork {
    /// Waiting rows this daemon may claim now.
    pub claims: bool,
    /// Running rows whose daemon is gone or whose time is up.
    pub stale: bool,
    /// Waiting rows someone asked to stop.
    pub cancels: bool,
    /// Rows of functions with approvers that change state.
    pub turns: bool,
    /// Schedule occurrences due, appended in the commit.
    pub schedules: bool,
    /// Rollouts with a step to take: a wave, a stop, an end, progress to show.
    pub rollouts: bool,
    /// Ticks on the panels to take in (the poll intake).
    pub ticks: bool,
    /// A commit whose reply was lost: it is fenced by taking the lease back at once.
    pub open_commit: bool,
    /// Follow-up writes that go under the lease, or a lease kept from the last commit,
    /// which a claim pass renews or releases.
    pub under_lease: bool,
}

impl ClaimWork {
    /// The parts a pass plan answers for.
    pub(super) fn of_plan<T>(plan: &PassPlan<T>) -> Self {
        ClaimWork {
            claims: !plan.claims.is_empty(),
            stale: !plan.stale.is_empty(),
            cancels: !plan.cancels.is_empty(),
            turns: !plan.turns.is_empty(),
            ..ClaimWork::default()
        }
    }

    /// Whether the poll runs a claim pass.
    pub(super) fn any(&self) -> bool {
        let ClaimWork {
            claims,
            stale,
            cancels,
            turns,
            schedules,
            rollouts,
            ticks,
            open_commit,
            under_lease,
        } = *self;
        claims
            || stale
            || cancels
            || turns
            || schedules
            || rollouts
            || ticks
            || open_commit
            || under_lease
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claim::{Pick, Stale, StaleReason};

    #[test]
    fn a_poll_claims_when_any_one_capability_has_work_and_only_then() {
        assert!(!ClaimWork::default().any(), "nothing to do: no lease taken");
        let each: [fn(&mut ClaimWork); 9] = [
            |w| w.claims = true,
            |w| w.rollouts = true,
            |w| w.stale = true,
            |w| w.cancels = true,
            |w| w.turns = true,
            |w| w.schedules = true,
            |w| w.ticks = true,
            |w| w.open_commit = true,
            |w| w.under_lease = true,
        ];
        for (i, set) in each.iter().enumerate() {
            let mut work = ClaimWork::default();
            set(&mut work);
            assert!(work.any(), "part {i} alone takes the lease: {work:?}");
        }
    }

    #[test]
    fn the_plan_answers_for_claims_timeouts_cancels_and_turns() {
        let mut plan: PassPlan<u8> = PassPlan::default();
        assert_eq!(ClaimWork::of_plan(&plan), ClaimWork::default());
        plan.claims.push((0, Pick::Normal));
        plan.stale.push(Stale {
            index: 1,
            reason: StaleReason::Expired {
                watched: chrono::Duration::minutes(20),
            },
        });
        plan.cancels.push(2);
        plan.turns.push((3, 7));
        let work = ClaimWork::of_plan(&plan);
        assert!(
            work.claims && work.stale && work.cancels && work.turns,
            "{work:?}"
        );
        assert!(
            !work.schedules
                && !work.rollouts
                && !work.ticks
                && !work.open_commit
                && !work.under_lease
        );
    }
}
