//! What the daemons of one process share when it serves several spreadsheets
//! (`[[spreadsheets]]`, docs/design.md §6): the job slots, split fairly among the spreadsheets
//! that have work to claim, and each service account's request budget, split with the other
//! processes on that account as the heartbeats of every spreadsheet it serves show them (and
//! the daemons those heartbeats list in turn).
//!
//! A process serving one spreadsheet has one member of each, and behaves as before: every
//! free slot is its own, and its account's budget is split by its spreadsheet's heartbeats.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::workers::{self, Sharer};

/// The job slots of one process (`slots` in the config), numbered `0..slots`.
#[derive(Debug)]
pub(crate) struct SlotPool {
    state: Mutex<Pool>,
}

#[derive(Debug)]
struct Pool {
    free: Vec<u32>,
    members: Vec<Member>,
}

/// One spreadsheet's part of the pool.
#[derive(Debug, Default, Clone)]
struct Member {
    /// Slots it holds (claims running or unsettled).
    held: usize,
    /// Rows it could claim at its last poll, were slots free.
    claimable: usize,
    /// Heavy jobs it runs.
    heavy: usize,
}

impl SlotPool {
    /// A pool of `slots` shared by `members` spreadsheets: one handle each.
    pub(crate) fn shared(slots: usize, members: usize) -> Vec<Slots> {
        let pool = Arc::new(SlotPool {
            state: Mutex::new(Pool {
                free: (0..slots as u32).rev().collect(),
                members: vec![Member::default(); members.max(1)],
            }),
        });
        (0..members.max(1))
            .map(|me| Slots {
                pool: Arc::clone(&pool),
                me,
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Pool> {
        // The pool's state stays consistent at every step, so a panic elsewhere while it was
        // held leaves nothing to repair.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One spreadsheet's handle on its process's [`SlotPool`].
#[derive(Debug, Clone)]
pub(crate) struct Slots {
    pool: Arc<SlotPool>,
    me: usize,
}

impl Slots {
    /// A pool of `slots` for a process that serves one spreadsheet.
    pub(crate) fn alone(slots: usize) -> Slots {
        SlotPool::shared(slots, 1).remove(0)
    }

    /// How many slots this spreadsheet may take now: the free ones, up to its fair share
    /// ([`fair_shares`]) of the pool less what it holds.
    pub(crate) fn available(&self) -> usize {
        let pool = self.pool.lock();
        let desired: Vec<usize> = pool.members.iter().map(|m| m.held + m.claimable).collect();
        let total = pool.free.len() + pool.members.iter().map(|m| m.held).sum::<usize>();
        let share = fair_shares(total, &desired)[self.me];
        pool.free
            .len()
            .min(share.saturating_sub(pool.members[self.me].held))
    }

    /// Says how many rows this spreadsheet could claim now, were slots free.
    pub(crate) fn want(&self, claimable: usize) {
        self.pool.lock().members[self.me].claimable = claimable;
    }

    /// Takes a free slot, if any.
    pub(crate) fn take(&self) -> Option<u32> {
        let mut pool = self.pool.lock();
        let slot = pool.free.pop()?;
        pool.members[self.me].held += 1;
        Some(slot)
    }

    /// Gives back a slot taken with [`Slots::take`].
    pub(crate) fn give(&self, slot: u32) {
        let mut pool = self.pool.lock();
        pool.free.push(slot);
        let m = &mut pool.members[self.me];
        m.held = m.held.saturating_sub(1);
    }

    /// Notes that a heavy job started (`true`) or ended (`false`) here.
    pub(crate) fn heavy(&self, started: bool) {
        let mut pool = self.pool.lock();
        let m = &mut pool.members[self.me];
        if started {
            m.heavy += 1;
        } else {
            m.heavy = m.heavy.saturating_sub(1);
        }
    }

    /// Whether another spreadsheet of this process runs a heavy job (they run one at a time
    /// per process).
    pub(crate) fn heavy_elsewhere(&self) -> bool {
        let pool = self.pool.lock();
        pool.members
            .iter()
            .enumerate()
            .any(|(i, m)| i != self.me && m.heavy > 0)
    }
}

/// Max-min fair shares of `total` slots among members that want `desired[i]` each (what
/// they hold plus what they could claim): each gets what it wants up to an equal part, and
/// what one leaves goes to the others. A member that wants nothing gets nothing; the
/// shares never add up to more than `total`.
pub(crate) fn fair_shares(total: usize, desired: &[usize]) -> Vec<usize> {
    let mut shares = vec![0; desired.len()];
    let mut left = total;
    loop {
        let wanting: Vec<usize> = (0..desired.len())
            .filter(|&i| shares[i] < desired[i])
            .collect();
        if wanting.is_empty() || left == 0 {
            return shares;
        }
        let each = left / wanting.len();
        if each == 0 {
            // Fewer slots left than members wanting: one each to those with the least.
            let mut by_share = wanting;
            by_share.sort_by_key(|&i| (shares[i], i));
            for i in by_share.into_iter().take(left) {
                shares[i] += 1;
            }
            return shares;
        }
        for i in wanting {
            let add = each.min(desired[i] - shares[i]);
            shares[i] += add;
            left -= add;
        }
    }
}

/// One service account's request budget as this process splits it: with every other live
/// daemon on the account that any of its spreadsheets' heartbeats show, and every daemon
/// those list in turn (docs/design.md §6).
#[derive(Debug)]
pub(crate) struct AccountShare {
    /// Per member spreadsheet: the other live daemons on the account its last read showed,
    /// each with the daemons its heartbeat lists, and those it showed gone lately.
    seen: Mutex<Vec<(Vec<Seen>, Vec<String>)>>,
    /// Whether the budget holds the polls back, watched once for all its spreadsheets.
    watch: Mutex<BudgetWatch>,
}

/// A live daemon of the account that a spreadsheet's heartbeats show (its worker id), with the
/// daemons its heartbeat lists.
pub(crate) type Seen = (String, Vec<Sharer>);

/// What the account's budget has waited, sampled about once a minute.
#[derive(Debug, Default)]
struct BudgetWatch {
    /// The budget's total wait when last sampled, and when.
    sample: Option<(Instant, Duration)>,
    /// Whether the calls waited a tenth of the last sampled span or more.
    bound: bool,
    /// When that was last said in the log.
    said: Option<Instant>,
}

/// What [`Share::watch_budget`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetSeen {
    /// The budget held the polls back over the last sampled minute.
    pub(crate) bound: bool,
    /// Say so now (at most every ten minutes per account): the wait and the span it is of.
    pub(crate) say: Option<(Duration, Duration)>,
}

/// How often the budget's wait is sampled, and how long a warning stands for.
const SAMPLE_EVERY: Duration = Duration::from_secs(60);
const SAY_EVERY: Duration = Duration::from_secs(600);

impl AccountShare {
    /// The account's part of `members` spreadsheets served under it: one handle each.
    pub(crate) fn shared(members: usize) -> Vec<Share> {
        let account = Arc::new(AccountShare {
            seen: Mutex::new(vec![(Vec::new(), Vec::new()); members.max(1)]),
            watch: Mutex::new(BudgetWatch::default()),
        });
        (0..members.max(1))
            .map(|me| Share {
                account: Arc::clone(&account),
                me,
            })
            .collect()
    }
}

/// One spreadsheet's handle on its account's [`AccountShare`].
#[derive(Debug, Clone)]
pub(crate) struct Share {
    account: Arc<AccountShare>,
    me: usize,
}

impl Share {
    /// The share of a process serving one spreadsheet under its account.
    pub(crate) fn alone() -> Share {
        AccountShare::shared(1).remove(0)
    }

    /// Takes in the other live daemons on the account that this spreadsheet's heartbeats
    /// show (worker ids, each with the daemons it lists) and those they show gone lately
    /// ([`workers::gone_on_account`]), and returns how many daemons share the account: this
    /// process (`me`), every other one seen on any of its spreadsheets, and every one those
    /// know of ([`workers::sharers_known`]).
    pub(crate) fn report(
        &self,
        me: &str,
        others: impl IntoIterator<Item = Seen>,
        gone: impl IntoIterator<Item = String>,
    ) -> u32 {
        {
            let mut seen = self.account.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen[self.me] = (others.into_iter().collect(), gone.into_iter().collect());
        }
        u32::try_from(self.sharers(me).len() + 1).unwrap_or(u32::MAX)
    }

    /// The daemons on the account this process (`me`) knows of, as its last reports show
    /// them: what it counts, and what its heartbeats list.
    pub(crate) fn sharers(&self, me: &str) -> Vec<Sharer> {
        let seen = self.account.seen.lock().unwrap_or_else(|e| e.into_inner());
        let gone: std::collections::BTreeSet<&str> = seen
            .iter()
            .flat_map(|(_, gone)| gone.iter().map(String::as_str))
            .collect();
        workers::sharers_known(
            me,
            seen.iter()
                .flat_map(|(live, _)| live)
                .map(|(w, listed)| (w.as_str(), listed.as_slice())),
            &gone,
        )
    }

    /// Takes in, at `now`, the budget's total wait so far (`waited`, of every spreadsheet
    /// sharing it): it holds the polls back when its calls waited a tenth of the last
    /// minute or more. Said once per account, not once per spreadsheet.
    pub(crate) fn watch_budget(&self, now: Instant, waited: Duration) -> BudgetSeen {
        let mut w = self.account.watch.lock().unwrap_or_else(|e| e.into_inner());
        let Some((at, before)) = w.sample else {
            w.sample = Some((now, waited));
            return BudgetSeen {
                bound: w.bound,
                say: None,
            };
        };
        let span = now.saturating_duration_since(at);
        if span < SAMPLE_EVERY {
            return BudgetSeen {
                bound: w.bound,
                say: None,
            };
        }
        let wait = waited.saturating_sub(before);
        w.bound = wait >= span / 10;
        w.sample = Some((now, waited));
        let said_lately = w
            .said
            .is_some_and(|t| now.saturating_duration_since(t) < SAY_EVERY);
        let say = (w.bound && !said_lately).then_some((wait, span));
        if say.is_some() {
            w.said = Some(now);
        }
        BudgetSeen {
            bound: w.bound,
            say,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_spreadsheet_gets_every_slot_only_while_no_other_has_work() {
        assert_eq!(fair_shares(8, &[100, 0]), [8, 0]);
        assert_eq!(
            fair_shares(8, &[100, 1]),
            [7, 1],
            "a quiet one gets what it asks"
        );
        assert_eq!(fair_shares(8, &[100, 100]), [4, 4]);
        assert_eq!(fair_shares(8, &[100, 100, 2]), [3, 3, 2]);
        assert_eq!(
            fair_shares(2, &[5, 5, 5]),
            [1, 1, 0],
            "never more than the pool"
        );
        assert_eq!(fair_shares(0, &[5]), [0]);
        for (total, desired) in [(5, vec![9, 9, 9]), (7, vec![1, 2, 30, 0]), (3, vec![3])] {
            let shares = fair_shares(total, &desired);
            assert!(shares.iter().sum::<usize>() <= total, "{shares:?}");
            assert!(shares.iter().zip(&desired).all(|(s, d)| s <= d));
        }
    }

    #[test]
    fn slots_a_busy_spreadsheet_holds_go_to_a_quiet_one_as_they_free() {
        let [busy, quiet]: [Slots; 2] = SlotPool::shared(2, 2)
            .try_into()
            .unwrap_or_else(|_| panic!("two handles"));
        busy.want(10);
        assert_eq!(
            busy.available(),
            2,
            "alone with work, it may take every slot"
        );
        let (a, b) = (busy.take(), busy.take());
        assert!(a.is_some() && b.is_some());
        quiet.want(1);
        assert_eq!(quiet.available(), 0, "nothing free until a job ends");
        busy.give(a.unwrap_or_default());
        assert_eq!(
            busy.available(),
            0,
            "the busy one is at its share while the quiet one waits"
        );
        assert_eq!(quiet.available(), 1, "the freed slot is the quiet one's");
        assert!(quiet.take().is_some());
        assert!(busy.take().is_none(), "the pool is empty");
    }

    #[test]
    fn one_spreadsheet_alone_may_take_every_free_slot_it_can_use() {
        let slots = Slots::alone(3);
        slots.want(5);
        assert_eq!(slots.available(), 3);
        slots.want(1);
        assert_eq!(slots.available(), 1, "no more than it could claim");
    }

    #[test]
    fn heavy_jobs_of_one_spreadsheet_hold_back_the_others() {
        let [a, b]: [Slots; 2] = SlotPool::shared(4, 2)
            .try_into()
            .unwrap_or_else(|_| panic!("two handles"));
        a.heavy(true);
        assert!(b.heavy_elsewhere());
        assert!(!a.heavy_elsewhere(), "its own are counted by itself");
        a.heavy(false);
        assert!(!b.heavy_elsewhere());
    }

    #[test]
    fn the_accounts_budget_is_said_to_slow_the_polls_once_for_all_its_spreadsheets() {
        let [s1, s2]: [Share; 2] = AccountShare::shared(2)
            .try_into()
            .unwrap_or_else(|_| panic!("two handles"));
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(s1.watch_budget(t0, s(0)).say, None, "the first sample");
        assert_eq!(
            s2.watch_budget(t0 + s(30), s(10)).say,
            None,
            "within the minute"
        );
        let seen = s1.watch_budget(t0 + s(60), s(12));
        assert_eq!(
            seen,
            BudgetSeen {
                bound: true,
                say: Some((s(12), s(60)))
            }
        );
        let other = s2.watch_budget(t0 + s(61), s(13));
        assert!(
            other.bound && other.say.is_none(),
            "said once per account: {other:?}"
        );
        let later = s2.watch_budget(t0 + s(125), s(40));
        assert!(
            later.bound && later.say.is_none(),
            "not again within ten minutes"
        );
        let calm = s1.watch_budget(t0 + s(190), s(41));
        assert!(
            !calm.bound,
            "a second's wait in a minute is not the budget's doing"
        );
        assert!(
            s1.watch_budget(t0 + s(800), s(200)).say.is_some(),
            "said again after ten minutes"
        );
    }

    fn seen(ids: &[&str]) -> Vec<Seen> {
        ids.iter().map(|w| (w.to_string(), Vec::new())).collect()
    }

    #[test]
    fn an_account_is_shared_with_every_daemon_any_of_its_spreadsheets_shows() {
        let [s1, s2]: [Share; 2] = AccountShare::shared(2)
            .try_into()
            .unwrap_or_else(|_| panic!("two handles"));
        assert_eq!(s1.report("p1", seen(&["p2"]), []), 2);
        assert_eq!(
            s2.report("p1", seen(&["p2", "p3"]), []),
            3,
            "p2 counted once, though both spreadsheets show it"
        );
        assert_eq!(s1.report("p1", [], []), 3, "s2 still shows p2 and p3");
        assert_eq!(Share::alone().report("p1", [], []), 1);
    }

    #[test]
    fn daemons_overlapping_only_through_a_third_count_each_other() {
        // p1 serves {A, B}, p2 {B, C}, p3 {C, D}: p1 and p3 never read each other's
        // heartbeats, but p2's lists both, so all three split the account three ways.
        let (p1, p2, p3) = (Share::alone(), Share::alone(), Share::alone());
        assert_eq!(p2.report("p2", seen(&["p1", "p3"]), []), 3);
        let p2_lists = p2.sharers("p2");
        assert_eq!(
            p1.report("p1", [("p2".to_string(), p2_lists.clone())], []),
            3,
            "p1 hears of p3 through p2: {:?}",
            p1.sharers("p1")
        );
        assert_eq!(p3.report("p3", [("p2".to_string(), p2_lists)], []), 3);
        assert!(
            p1.sharers("p1")
                .iter()
                .any(|s| s.worker_id == "p3" && s.hops == 2 && s.via == "p2"),
            "p1 lists p3 two hops away, through p2: {:?}",
            p1.sharers("p1")
        );
    }

    #[test]
    fn word_of_a_dead_daemon_does_not_go_round_between_two_that_heard_of_it() {
        // p3 died: p2 no longer sees it, but p1 still lists it (heard through p2). p2 does
        // not take back its own word, so it counts two, and p1 follows at its next read.
        let (p1, p2) = (Share::alone(), Share::alone());
        p1.report(
            "p1",
            [(
                "p2".to_string(),
                vec![Sharer {
                    worker_id: "p3".into(),
                    hops: 1,
                    via: String::new(),
                }],
            )],
            [],
        );
        assert_eq!(
            p2.report("p2", [("p1".to_string(), p1.sharers("p1"))], []),
            2,
            "{:?}",
            p1.sharers("p1")
        );
        assert_eq!(
            p1.report("p1", [("p2".to_string(), p2.sharers("p2"))], []),
            2
        );
    }

    #[test]
    fn a_daemon_seen_gone_is_not_counted_on_anothers_older_word() {
        // p1, p2 and x serve one spreadsheet; x stopped. p2's heartbeat, written before it
        // read x's last one, still lists x: p1 sees x's row stopped itself, and counts two,
        // as a daemon that sees every other always did.
        let p1 = Share::alone();
        let p2_lists = vec![Sharer {
            worker_id: "x".into(),
            hops: 1,
            via: String::new(),
        }];
        assert_eq!(
            p1.report("p1", [("p2".to_string(), p2_lists)], ["x".to_string()]),
            2,
            "{:?}",
            p1.sharers("p1")
        );
    }

    #[test]
    fn word_travels_at_most_max_hops() {
        let far = Sharer {
            worker_id: "far".into(),
            hops: workers::MAX_HOPS,
            via: "x".into(),
        };
        let near = Sharer {
            worker_id: "near".into(),
            hops: workers::MAX_HOPS - 1,
            via: "x".into(),
        };
        let p1 = Share::alone();
        assert_eq!(
            p1.report("p1", [("p2".to_string(), vec![far, near])], []),
            3,
            "p2 and near, not far: {:?}",
            p1.sharers("p1")
        );
    }
}
