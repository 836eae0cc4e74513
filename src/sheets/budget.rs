//! The client-side request budget: a token bucket (GCRA, `governor`) that makes calls wait
//! for their turn instead of spending Google's per-minute quota and being answered with 429.
//!
//! Google counts 60 read and 60 write requests per minute per user (a service account is one
//! user). The default budget, 50 per minute with a burst of 5, keeps any 60-second window
//! under that quota (at most `requests + burst - 1` = 54) while still letting a claim pass's
//! two or three calls go out back to back.
//!
//! The clock is tokio's, so the window is honoured under `tokio::time::pause`, and the window
//! length is a parameter, so tests prove the limit with a window of a second instead of a
//! minute.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::ledger::{self, Ledger};
use super::turns::{Precedence, Turns};

/// Requests per minute when the config does not say (Google's quota is 60).
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 50;

/// A clock reading tokio's time as the duration since the limiter was made, so that a paused
/// tokio clock also pauses the budget.
#[derive(Debug, Clone)]
pub(crate) struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose zero is now.
    pub(crate) fn starting_now() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.origin)
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Duration>>;

/// The bucket in force and the rate it was made for.
struct Rate {
    limiter: Arc<Limiter>,
    requests: u32,
    burst: u32,
    /// The rate asked for ([`Budget::set_rate`]); `requests` is half of it while slowed down.
    base: u32,
    /// Until when (the clock's time) the rate stays halved after a 429.
    slowed_until: Option<Duration>,
}

/// How many requests of the last minute a budget with a [`Guard`] lets the record show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// As many as the budget's own rate lets into a minute (`requests + burst - 1`): a
    /// daemon's share, of which the one-shot commands' requests take their part.
    Share,
    /// At most this many: a one-shot command's ceiling for the whole account.
    Fixed(u32),
}

/// Google's per-minute quota per user, for reads and for writes.
pub const GOOGLE_PER_MINUTE: u32 = 60;

/// What a one-shot command lets the account's record show in a minute: Google's 60 less
/// two, for a daemon of the account sending at the same instant.
pub const ONE_SHOT_CAP: Cap = Cap::Fixed(GOOGLE_PER_MINUTE - 2);

/// The machine's record of the account's requests ([`Ledger`]) a budget keeps to: it
/// waits while its own requests of the last minute and those of the processes it honours
/// reach its cap, and records each request it lets through.
struct Guard {
    ledger: Arc<Ledger>,
    write: bool,
    cap: Cap,
    /// This budget's requests of the last minute (unix ms); held across the check and the
    /// record so that its clones never pass the cap together.
    own: tokio::sync::Mutex<std::collections::VecDeque<u64>>,
}

struct Inner {
    rate: std::sync::RwLock<Rate>,
    guard: std::sync::OnceLock<Guard>,
    /// Callers wait their turn in the order they came, urgent and pressing ones a little
    /// ahead ([`Turns`]): the spreadsheets of one account take turns, so none starts or polls late
    /// behind the others' polls, and a result to write goes before polls that find nothing.
    turns: Arc<Turns>,
    clock: TokioClock,
    per: Duration,
    /// Time calls have waited for this budget, in all (nanoseconds).
    waited: std::sync::atomic::AtomicU64,
}

impl Inner {
    /// Puts a new bucket for `requests` per window in force, its burst already spent (the
    /// old one may just have let a burst through).
    fn apply(&self, rate: &mut Rate, requests: u32) {
        let requests = requests.max(1);
        if rate.requests == requests {
            return;
        }
        let burst = rate.burst.clamp(1, requests);
        let limiter = limiter(requests, self.per, burst, &self.clock);
        for _ in 0..burst {
            let _ = limiter.check();
        }
        rate.limiter = Arc::new(limiter);
        rate.requests = requests;
        rate.burst = burst;
    }

    fn limiter(&self) -> Arc<Limiter> {
        Arc::clone(&self.read_rate().limiter)
    }

    /// The rate in force. A lock poisoned by a panic elsewhere still holds a whole `Rate`
    /// (every change replaces it in one assignment), so it is used as it is.
    fn read_rate(&self) -> std::sync::RwLockReadGuard<'_, Rate> {
        self.rate.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_rate(&self) -> std::sync::RwLockWriteGuard<'_, Rate> {
        self.rate.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// A shared request budget: clones draw from the same bucket.
#[derive(Clone)]
pub struct Budget {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.limits() {
            None => f.write_str("Budget(unlimited)"),
            Some((requests, per, burst)) => {
                write!(f, "Budget({requests} per {per:?}, burst {burst})")
            }
        }
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::per_minute(DEFAULT_REQUESTS_PER_MINUTE)
    }
}

fn limiter(requests: u32, per: Duration, burst: u32, clock: &TokioClock) -> Limiter {
    let interval = per / requests;
    let quota = Quota::with_period(interval.max(Duration::from_nanos(1)))
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
    RateLimiter::direct_with_clock(quota, clock.clone())
}

impl Budget {
    /// `requests` per `per`, with the default burst (a tenth of `requests`, at least 1).
    ///
    /// `requests` of 0 is treated as 1: a zero in a config file must not silently mean
    /// "unlimited". Use [`Budget::unlimited`] to say that.
    pub fn new(requests: u32, per: Duration) -> Self {
        let requests = requests.max(1);
        Self::with_burst(requests, per, (requests / 10).max(1))
    }

    /// `requests` per minute with the default burst.
    pub fn per_minute(requests: u32) -> Self {
        Self::new(requests, Duration::from_secs(60))
    }

    /// `requests` per `per`, of which up to `burst` may go out back to back after a quiet
    /// spell. In any window of length `per` at most `requests + burst - 1` calls are let
    /// through; the long-run rate is `requests / per`.
    pub fn with_burst(requests: u32, per: Duration, burst: u32) -> Self {
        let requests = requests.max(1);
        let burst = burst.clamp(1, requests);
        let per = per.max(Duration::from_millis(1));
        let clock = TokioClock {
            origin: tokio::time::Instant::now(),
        };
        let limiter = Arc::new(limiter(requests, per, burst, &clock));
        Self {
            inner: Some(Arc::new(Inner {
                rate: std::sync::RwLock::new(Rate {
                    limiter,
                    requests,
                    burst,
                    base: requests,
                    slowed_until: None,
                }),
                clock,
                guard: std::sync::OnceLock::new(),
                turns: Arc::default(),
                waited: std::sync::atomic::AtomicU64::new(0),
                per,
            })),
        }
    }

    /// No client-side limit (Google's quota still applies and is met with retries).
    pub fn unlimited() -> Self {
        Self { inner: None }
    }

    /// Changes the rate to `requests` per window (the burst shrinks with it when needed),
    /// for every clone: a daemon's share of its account's budget when the number of live
    /// daemons on the account changes. A new rate starts with an empty bucket, so a change
    /// never lets extra requests through. While slowed down after a 429 the new rate is
    /// halved too. No effect on an unlimited budget.
    pub fn set_rate(&self, requests: u32) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut rate = inner.write_rate();
        rate.base = requests.max(1);
        let effective = if rate.slowed_until.is_some() {
            (rate.base / 2).max(1)
        } else {
            rate.base
        };
        inner.apply(&mut rate, effective);
    }

    /// Google answered 429: the account's quota is spent (another daemon or tool shares it),
    /// so this budget halves its rate for `period` instead of letting retries storm. Another
    /// 429 meanwhile extends the period; the rate comes back on its own afterwards.
    pub fn slow_down(&self, period: Duration) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut rate = inner.write_rate();
        let until = inner.clock.now() + period;
        let was_slowed = rate.slowed_until.is_some();
        rate.slowed_until = Some(until);
        if !was_slowed {
            let half = (rate.base / 2).max(1);
            inner.apply(&mut rate, half);
        }
    }

    /// Ends a slow-down whose period is over.
    fn recover(&self) {
        let Some(inner) = &self.inner else {
            return;
        };
        let now = inner.clock.now();
        let over = inner.read_rate().slowed_until.is_some_and(|t| now >= t);
        if !over {
            return;
        }
        let mut rate = inner.write_rate();
        if rate.slowed_until.is_some_and(|t| now >= t) {
            rate.slowed_until = None;
            let base = rate.base;
            inner.apply(&mut rate, base);
        }
    }

    /// Waits until one more request fits the budget and takes it. Returns how long it
    /// waited (zero when the budget had room).
    pub async fn acquire(&self) -> Duration {
        self.acquire_with(|_| {}).await
    }

    /// [`Budget::acquire`], calling `on_wait` with the expected wait once, before waiting,
    /// if the budget is spent: so the caller can log and count throttling as it starts,
    /// with the method it was about to call.
    pub async fn acquire_with(&self, on_wait: impl FnOnce(Duration)) -> Duration {
        let mut once = Some(on_wait);
        self.acquire_as(Precedence::Plain, |wait| {
            if let Some(f) = once.take() {
                f(wait);
            }
        })
        .await
    }

    /// [`Budget::acquire_with`] for a call of `precedence`: an urgent or pressing one waits
    /// its turn a little ahead of those on which less waits ([`Turns`]). `on_wait` is told
    /// the expected wait each time the estimate is made again (the first call is the start
    /// of a wait).
    pub async fn acquire_as(
        &self,
        precedence: Precedence,
        mut on_wait: impl FnMut(Duration),
    ) -> Duration {
        self.recover();
        let Some(inner) = &self.inner else {
            return Duration::ZERO;
        };
        let start = inner.clock.now();
        let _turn = inner.turns.take(start, precedence).await;
        loop {
            match inner.limiter().check() {
                Ok(()) => {
                    if let Some(guard) = inner.guard.get() {
                        let cap = guard.cap(&inner.read_rate());
                        guard.admit(cap, precedence, &mut on_wait).await;
                    }
                    let waited = inner.clock.now().saturating_sub(start);
                    let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
                    inner
                        .waited
                        .fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
                    return waited;
                }
                Err(not_until) => {
                    let wait = not_until.wait_time_from(inner.clock.now());
                    on_wait(wait);
                    // A zero wait can come back on a clock tick boundary; sleep a little so
                    // the loop cannot spin.
                    tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
                }
            }
        }
    }

    /// Keeps this budget (every clone) to the machine's record of its account's requests,
    /// as kind `write`, up to `cap`: see [`Guard`]. A budget keeps to one record; later
    /// calls change nothing. No effect on an unlimited budget.
    pub fn keep_to(&self, ledger: Arc<Ledger>, write: bool, cap: Cap) {
        if let Some(inner) = &self.inner {
            let _ = inner.guard.set(Guard {
                ledger,
                write,
                cap,
                own: tokio::sync::Mutex::new(std::collections::VecDeque::new()),
            });
        }
    }

    /// How long calls have waited for this budget, in all (clones count together).
    pub fn waited(&self) -> Duration {
        self.inner.as_ref().map_or(Duration::ZERO, |i| {
            Duration::from_nanos(i.waited.load(std::sync::atomic::Ordering::Relaxed))
        })
    }

    /// Takes one request from the budget if there is room now, without waiting.
    pub fn try_acquire(&self) -> bool {
        match &self.inner {
            None => true,
            Some(inner) => inner.limiter().check().is_ok(),
        }
    }

    /// `(requests, per, burst)`, or `None` when unlimited.
    pub fn limits(&self) -> Option<(u32, Duration, u32)> {
        self.inner.as_ref().map(|i| {
            let rate = i.read_rate();
            (rate.requests, i.per, rate.burst)
        })
    }
}

impl Guard {
    fn cap(&self, rate: &Rate) -> usize {
        match self.cap {
            Cap::Share => (rate.requests + rate.burst).saturating_sub(1).max(1) as usize,
            Cap::Fixed(n) => n.max(1) as usize,
        }
    }

    /// Waits until this budget's requests of the last minute and those the record shows of
    /// the processes it honours are fewer than `cap`, then records one more. `on_wait` is
    /// told each time it looks again how long it expects to wait. A one-shot command that waits says so in the
    /// record; a daemon's plain call (an idle poll) holds back while one does, for at most
    /// [`ledger::YIELD_MAX`] in a row.
    async fn admit(&self, cap: usize, precedence: Precedence, on_wait: &mut impl FnMut(Duration)) {
        let window = ledger::COUNTED.as_millis() as u64;
        let role = self.ledger.role();
        // Since when this call holds back for one-shot commands (the time it waits for the
        // minute to have room does not count).
        let mut yielding: Option<std::time::Instant> = None;
        let mut said_want: Option<std::time::Instant> = None;
        loop {
            let mut own = self.own.lock().await;
            let now = ledger::now_ms();
            let since = now.saturating_sub(window);
            while own.front().is_some_and(|t| *t <= since) {
                own.pop_front();
            }
            let others = self.ledger.others(self.write);
            let taken = own.len() + others.times.len();
            let yields = role == ledger::Role::Daemon
                && precedence == Precedence::Plain
                && others.one_shot_waits
                && taken < cap
                && yielding.is_none_or(|t| t.elapsed() < ledger::YIELD_MAX);
            if yields && yielding.is_none() {
                yielding = Some(std::time::Instant::now());
            }
            if !yields && taken < cap {
                own.push_back(now);
                self.ledger.record(self.write);
                return;
            }
            drop(own);
            let wait = if taken < cap {
                // Room, left to the one-shot command that waits for it.
                Duration::from_millis(250)
            } else {
                // The window has room again when enough of its oldest requests are a
                // minute old.
                let mut all: Vec<u64> = others.times;
                all.extend(self.own.lock().await.iter().copied());
                all.sort_unstable();
                let frees = (all.len() + 1).saturating_sub(cap).max(1);
                let at = all.get(frees - 1).map_or(now, |t| t + window);
                Duration::from_millis(at.saturating_sub(now)).max(Duration::from_millis(20))
            };
            on_wait(wait);
            if role == ledger::Role::OneShot
                && said_want.is_none_or(|t| t.elapsed() >= ledger::WANT_EVERY)
            {
                self.ledger.want(self.write);
                said_want = Some(std::time::Instant::now());
            }
            // Other processes may add to the record meanwhile: look again at least each
            // second, and a waiting one-shot command each half second (so that its waiting
            // line stays fresh).
            let look = match role {
                ledger::Role::OneShot => ledger::WANT_EVERY,
                ledger::Role::Daemon => Duration::from_secs(1),
            };
            tokio::time::sleep(wait.min(look)).await;
        }
    }
}

/// A client's read and write budgets: Google counts read and write requests apart, each
/// with its own per-minute quota.
#[derive(Clone, Debug, Default)]
pub struct Budgets {
    pub read: Budget,
    pub write: Budget,
}

impl Budgets {
    /// No client-side limits.
    pub fn unlimited() -> Self {
        Self {
            read: Budget::unlimited(),
            write: Budget::unlimited(),
        }
    }

    /// One bucket for reads and writes together.
    pub fn shared(budget: Budget) -> Self {
        Self {
            read: budget.clone(),
            write: budget,
        }
    }

    /// How long calls have waited for these budgets, in all.
    pub fn waited(&self) -> Duration {
        self.read.waited() + self.write.waited()
    }

    /// The budget a call draws from.
    pub fn of(&self, write: bool) -> &Budget {
        if write {
            &self.write
        } else {
            &self.read
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_429_halves_the_rate_for_a_while_then_it_comes_back() {
        let budget = Budget::with_burst(60, Duration::from_secs(60), 1);
        budget.slow_down(Duration::from_secs(60));
        assert_eq!(budget.limits().map(|l| l.0), Some(30), "halved after a 429");
        budget.slow_down(Duration::from_secs(60));
        assert_eq!(
            budget.limits().map(|l| l.0),
            Some(30),
            "a second 429 extends the period, it does not halve again"
        );
        budget.set_rate(40);
        assert_eq!(
            budget.limits().map(|l| l.0),
            Some(20),
            "a new share is halved while slowed down"
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        budget.acquire().await;
        assert_eq!(
            budget.limits().map(|l| l.0),
            Some(40),
            "the share is back once the period is over"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_narrowed_rate_lets_fewer_calls_through_for_every_clone() {
        let budget = Budget::with_burst(60, Duration::from_secs(60), 1);
        let clone = budget.clone();
        budget.set_rate(20);
        assert_eq!(
            clone.limits(),
            Some((20, Duration::from_secs(60), 1)),
            "a clone sees the new share"
        );
        // A new rate starts spent: the first call waits a full interval (3 s at 20 a minute).
        let start = tokio::time::Instant::now();
        for _ in 0..3 {
            clone.acquire().await;
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(9),
            "three calls at 20 a minute took {took:?}, not about 9 s"
        );
        Budget::unlimited().set_rate(5);
        assert_eq!(Budget::unlimited().limits(), None);
    }

    #[test]
    fn default_budget_stays_under_googles_quota() {
        let (n, per, burst) = Budget::default().limits().unwrap_or_default();
        assert_eq!(per, Duration::from_secs(60));
        assert!(
            n + burst - 1 < 60,
            "default budget lets {} calls into one minute",
            n + burst - 1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_one_per_interval() {
        // 5 per second, burst 1: one call every 200 ms.
        let budget = Budget::with_burst(5, Duration::from_secs(1), 1);
        let start = tokio::time::Instant::now();
        let mut waited = Vec::new();
        let mut announced = 0;
        for _ in 0..6 {
            waited.push(budget.acquire_with(|_| announced += 1).await);
        }
        assert_eq!(announced, 5, "every throttled call is announced once");
        assert_eq!(waited[0], Duration::ZERO, "first call must not wait");
        assert!(
            waited[1..].iter().all(|w| *w > Duration::ZERO),
            "{waited:?}"
        );
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_millis(1000) && elapsed < Duration::from_millis(1100),
            "6 calls at 5/s with burst 1 should take 1 s, took {elapsed:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn never_more_than_requests_plus_burst_in_a_window() {
        let (requests, burst) = (10, 3);
        let budget = Budget::with_burst(requests, Duration::from_secs(60), burst);
        let limit = (requests + burst - 1) as usize;
        let start = tokio::time::Instant::now();
        let mut times = Vec::new();
        while start.elapsed() < Duration::from_secs(180) {
            budget.acquire().await;
            times.push(start.elapsed());
        }
        for (i, t) in times.iter().enumerate() {
            let in_window = times[i..]
                .iter()
                .take_while(|u| **u < *t + Duration::from_secs(60))
                .count();
            assert!(
                in_window <= limit,
                "{in_window} calls in the minute from {t:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_the_bucket_and_unlimited_never_waits() {
        let a = Budget::with_burst(2, Duration::from_secs(1), 2);
        let b = a.clone();
        assert!(a.try_acquire());
        assert!(b.try_acquire());
        assert!(!a.try_acquire(), "the clone must draw from the same bucket");
        let free = Budget::unlimited();
        for _ in 0..1000 {
            assert_eq!(free.acquire().await, Duration::ZERO);
        }
    }

    #[tokio::test]
    async fn a_budget_waits_for_the_minute_of_the_requests_another_process_recorded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let ledger = Ledger::open(dir.path(), "kept@b", ledger::Role::Daemon)
            .unwrap_or_else(|e| panic!("open: {e}"));
        // A one-shot command of another live process (this test's parent) sent two reads
        // almost a minute ago.
        let other = dir
            .path()
            .join("kept@b")
            .join(format!("{}.oneshot", nix::unistd::getppid()));
        let long_ago = ledger::now_ms() - 61_800;
        std::fs::write(&other, format!("{long_ago} r\n{long_ago} r\n"))
            .unwrap_or_else(|e| panic!("write: {e}"));
        // A share of 2 a minute with a burst of 2 lets 3 into a minute: room for one more.
        let budget = Budget::with_burst(2, Duration::from_secs(60), 2);
        budget.keep_to(ledger, false, Cap::Share);
        budget.acquire().await;
        let mut told = None;
        budget.acquire_with(|wait| told = Some(wait)).await;
        assert!(
            told.is_some(),
            "the second read must wait: the record holds the other process's two"
        );
        let now = ledger::now_ms();
        assert!(
            now >= long_ago + 62_000,
            "the second read went out {} ms after the other process's reads, inside their minute",
            now - long_ago
        );
    }

    #[tokio::test]
    async fn a_daemons_idle_poll_holds_back_while_a_one_shot_command_waits_and_its_urgent_call_does_not(
    ) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let ledger = Ledger::open(dir.path(), "yield@b", ledger::Role::Daemon)
            .unwrap_or_else(|e| panic!("open: {e}"));
        // A one-shot command of another live process (this test's parent) waits for a read.
        let other = dir
            .path()
            .join("yield@b")
            .join(format!("{}.oneshot", nix::unistd::getppid()));
        let wants = ledger::now_ms();
        std::fs::write(&other, format!("{wants} wr\n")).unwrap_or_else(|e| panic!("write: {e}"));
        let budget = Budget::with_burst(50, Duration::from_secs(60), 10);
        budget.keep_to(ledger, false, Cap::Share);
        let mut told = None;
        budget
            .acquire_as(Precedence::Urgent, |wait| told = Some(wait))
            .await;
        assert_eq!(told, None, "a result to write does not wait for the shell");
        budget
            .acquire_as(Precedence::Plain, |wait| told = Some(wait))
            .await;
        assert!(
            told.is_some(),
            "an idle poll waits while the one-shot command does"
        );
        let now = ledger::now_ms();
        assert!(
            now >= wants + ledger::WANT_FRESH.as_millis() as u64,
            "the idle poll went out {} ms after the one-shot command said it waits, before its line went stale",
            now - wants
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_call_waiting_for_the_budget_goes_before_plain_ones_that_came_just_before() {
        let budget = Budget::with_burst(60, Duration::from_secs(60), 1);
        budget.acquire().await;
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let call = |name: &'static str, precedence: Precedence| {
            let (budget, order) = (budget.clone(), Arc::clone(&order));
            tokio::spawn(async move {
                budget.acquire_as(precedence, |_| {}).await;
                order.lock().unwrap_or_else(|p| p.into_inner()).push(name);
            })
        };
        let plain = call("idle poll", Precedence::Plain);
        let later = call("second idle poll", Precedence::Plain);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let urgent = call("result to write", Precedence::Urgent);
        for c in [plain, later, urgent] {
            c.await.unwrap_or_else(|e| panic!("a call failed: {e}"));
        }
        let order = order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(
            order,
            ["idle poll", "result to write", "second idle poll"],
            "the first idle poll already holds the turn (waiting for the bucket); the result goes next"
        );
    }

    #[test]
    fn zero_requests_is_not_unlimited() {
        assert_eq!(
            Budget::new(0, Duration::from_secs(60)).limits(),
            Some((1, Duration::from_secs(60), 1))
        );
    }
}
