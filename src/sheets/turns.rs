//! The order in which the calls waiting for one request budget take their turn: the order
//! they came in, except that a call with work to finish ([`Precedence::Urgent`]: a result
//! to write back, a claim under the lease) goes ahead of plain ones that came less than
//! [`HEAD_START`] before it, and one on which several presses wait
//! ([`Precedence::Pressing`]) also ahead of urgent ones that came less than
//! [`PRESSING_LEAD`] before it. A call never waits more than [`HEAD_START`] +
//! [`PRESSING_LEAD`] for calls that came after it, so an idle spreadsheet's polls, and a
//! quiet one's single press, are delayed, never starved.
//!
//! The spreadsheets of one account share its budget; when what they want is more than it
//! gives (a fleet's first minute, a busy hour), the budget's time goes where presses are
//! waiting for it, most of them first, rather than to polls that will find nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

/// How far ahead of plain calls an urgent one is placed: a little more than what six
/// spreadsheets sharing the default budget (50 a minute, 1.2 s apart) queue up, so a
/// result goes out at the next free slot, and well inside `idle_poll_interval`, so that a
/// quiet spreadsheet's press is still seen in time.
pub const HEAD_START: Duration = Duration::from_secs(10);

/// How far ahead of urgent calls a pressing one is placed: about what three calls wait for
/// the default budget, so that among the calls with work behind them those that serve
/// several presses go first, while a single press waits at most this much longer.
pub const PRESSING_LEAD: Duration = Duration::from_secs(4);

/// How much a call's work is waiting on its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Precedence {
    /// A poll or write that finds or changes nothing anyone waits for yet.
    #[default]
    Plain,
    /// A call that a press waits on: results to write back, or a claim under the lease.
    Urgent,
    /// A call that several presses wait on (a start-up, which may find any number; a pass
    /// whose spreadsheet has two or more waiting): the one commit it leads to serves them
    /// all, so the account's request does the most for the people waiting.
    Pressing,
}

impl Precedence {
    /// As a number, for an atomic cell ([`Precedence::from_number`] reads it back).
    pub fn number(self) -> u8 {
        match self {
            Precedence::Plain => 0,
            Precedence::Urgent => 1,
            Precedence::Pressing => 2,
        }
    }

    /// The precedence [`Precedence::number`] gave `n`; plain for any other number.
    pub fn from_number(n: u8) -> Self {
        match n {
            2 => Precedence::Pressing,
            1 => Precedence::Urgent,
            _ => Precedence::Plain,
        }
    }

    /// How much later than its arrival a call of this precedence is placed.
    fn delay(self) -> Duration {
        match self {
            Precedence::Plain => PRESSING_LEAD + HEAD_START,
            Precedence::Urgent => PRESSING_LEAD,
            Precedence::Pressing => Duration::ZERO,
        }
    }
}

/// The calls waiting for a budget, and whether one holds the turn.
#[derive(Default)]
pub struct Turns {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    taken: bool,
    /// Tie-breaker keeping arrival order among calls placed at the same instant.
    next: u64,
    /// Waiting calls by place (arrival, plus the head start for plain ones).
    waiting: BTreeMap<(Duration, u64), oneshot::Sender<Turn>>,
}

/// The turn: held while a call waits for the budget's room; dropping it passes it on to the
/// first waiting call (or frees it).
pub struct Turn {
    turns: Option<Arc<Turns>>,
}

impl Turns {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Every change to the queue is complete before the lock is let go: a panic elsewhere
        // leaves a whole queue.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the turn. `now` is the budget's clock; a call dropped while it waits
    /// leaves its place, and a turn handed to it then goes to the next one.
    pub async fn take(self: &Arc<Self>, now: Duration, precedence: Precedence) -> Turn {
        // Calls are placed later by how little waits on them, rather than pressing ones
        // earlier: the clock starts at zero, and nothing may saturate there.
        let place = now + precedence.delay();
        loop {
            let rx = {
                let mut q = self.queue();
                if !q.taken {
                    q.taken = true;
                    return Turn {
                        turns: Some(Arc::clone(self)),
                    };
                }
                let (tx, rx) = oneshot::channel();
                let seq = q.next;
                q.next += 1;
                q.waiting.insert((place, seq), tx);
                rx
            };
            // `pass_on` sends every sender it takes or gets the turn back: none is dropped
            // unsent. Should one ever be, this call waits again rather than go without it.
            if let Ok(turn) = rx.await {
                return turn;
            }
        }
    }

    /// Gives the turn to the first waiting call still there, or frees it.
    fn pass_on(self: &Arc<Self>) {
        let mut q = self.queue();
        while let Some((_, tx)) = q.waiting.pop_first() {
            let turn = Turn {
                turns: Some(Arc::clone(self)),
            };
            match tx.send(turn) {
                Ok(()) => return,
                // That call was dropped while it waited: the turn comes back unused.
                Err(mut unused) => unused.turns = None,
            }
        }
        q.taken = false;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(turns) = self.turns.take() {
            turns.pass_on();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lets every spawned task run until it waits.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// Spawns a call that takes the turn at `at` (seconds) as `precedence`, records its name
    /// in `order` when it has the turn, and holds it until the test lets it go.
    fn waiter(
        turns: &Arc<Turns>,
        order: &Arc<Mutex<Vec<&'static str>>>,
        name: &'static str,
        at: u64,
        precedence: Precedence,
    ) -> tokio::task::JoinHandle<()> {
        let (turns, order) = (Arc::clone(turns), Arc::clone(order));
        tokio::spawn(async move {
            let _turn = turns.take(Duration::from_secs(at), precedence).await;
            order.lock().unwrap_or_else(|p| p.into_inner()).push(name);
        })
    }

    /// The order in which `calls` (name, arrival in seconds, precedence), all waiting while
    /// a call that came at 100 s holds the turn, get it once that call lets it go.
    async fn order_of(calls: &[(&'static str, u64, Precedence)]) -> Vec<&'static str> {
        let turns = Arc::new(Turns::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = turns
            .take(Duration::from_secs(100), Precedence::Plain)
            .await;
        let waiting: Vec<_> = (calls.iter())
            .map(|&(name, at, precedence)| waiter(&turns, &order, name, at, precedence))
            .collect();
        settle().await;
        drop(held);
        for call in waiting {
            call.await
                .unwrap_or_else(|e| panic!("a waiting call failed: {e}"));
        }
        let order = order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        order
    }

    #[tokio::test]
    async fn an_urgent_call_goes_ahead_of_plain_ones_that_came_shortly_before_it_only() {
        let order = order_of(&[
            ("plain, long waiting", 80, Precedence::Plain),
            ("plain", 101, Precedence::Plain),
            ("plain, later", 102, Precedence::Plain),
            ("urgent", 103, Precedence::Urgent),
            ("urgent, later", 104, Precedence::Urgent),
        ])
        .await;
        assert_eq!(
            order,
            [
                "plain, long waiting",
                "urgent",
                "urgent, later",
                "plain",
                "plain, later"
            ],
            "urgent calls go ahead of plain ones that came less than {HEAD_START:?} before them, in arrival order among themselves"
        );
    }

    #[tokio::test]
    async fn a_call_several_presses_wait_on_goes_ahead_of_urgent_and_plain_ones_within_their_leads()
    {
        // Placed at: 100 (plain at 86), 99 (urgent at 95), 112, 102, 101, 103.
        let order = order_of(&[
            ("plain, long waiting", 86, Precedence::Plain),
            ("urgent, long waiting", 95, Precedence::Urgent),
            ("plain", 98, Precedence::Plain),
            ("urgent", 98, Precedence::Urgent),
            ("pressing", 101, Precedence::Pressing),
            ("pressing, later", 103, Precedence::Pressing),
        ])
        .await;
        assert_eq!(
            order,
            [
                "urgent, long waiting",
                "plain, long waiting",
                "pressing",
                "urgent",
                "pressing, later",
                "plain",
            ],
            "a pressing call goes ahead of urgent ones that came less than {PRESSING_LEAD:?} and plain ones that came less than {:?} before it; no call waits longer than that for later ones",
            HEAD_START + PRESSING_LEAD
        );
    }

    #[test]
    fn a_precedence_comes_back_from_its_number() {
        for p in [Precedence::Plain, Precedence::Urgent, Precedence::Pressing] {
            assert_eq!(Precedence::from_number(p.number()), p, "{p:?}");
        }
    }

    #[tokio::test]
    async fn a_call_dropped_while_it_waits_leaves_the_turn_to_the_next() {
        let turns = Arc::new(Turns::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = turns.take(Duration::ZERO, Precedence::Plain).await;
        let gone = waiter(&turns, &order, "dropped", 1, Precedence::Urgent);
        let next = waiter(&turns, &order, "next", 2, Precedence::Plain);
        settle().await;
        gone.abort();
        settle().await;
        drop(held);
        next.await
            .unwrap_or_else(|e| panic!("the call after the dropped one failed: {e}"));
        assert_eq!(*order.lock().unwrap_or_else(|p| p.into_inner()), ["next"]);
        let again = tokio::time::timeout(
            Duration::from_secs(5),
            turns.take(Duration::from_secs(3), Precedence::Plain),
        )
        .await;
        assert!(
            again.is_ok(),
            "the turn must be free once every call is through"
        );
    }
}
