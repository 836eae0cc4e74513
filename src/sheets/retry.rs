//! The retry policy of the Google implementation: how many attempts, how long to wait between
//! them (exponential backoff with full jitter) and when to give up, plus the generic loop
//! that applies it.
//!
//! Full jitter (wait uniformly between zero and the exponential ceiling) is what Google and
//! AWS recommend for many clients hitting one quota: several daemons that were throttled at
//! the same moment do not come back at the same moment. Which failures are retryable is not
//! decided here but where the reply is read (see `google.rs`).

use std::future::Future;
use std::time::Duration;

use rand::Rng;

/// When and how often a failed call is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included; 1 means never retry.
    pub max_attempts: u32,
    /// Ceiling of the first wait; each further retry doubles it.
    pub initial_delay: Duration,
    /// The ceiling never grows beyond this.
    pub max_delay: Duration,
    /// No retry is started that would begin later than this after the first attempt.
    pub max_elapsed: Duration,
}

impl RetryPolicy {
    /// For a command a person waits on: three attempts, waits of up to 0.25 and 0.5 s, no
    /// retry begun after 5 s.
    pub fn one_shot() -> Self {
        Self {
            max_attempts: 3,
            initial_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(2),
            max_elapsed: Duration::from_secs(5),
        }
    }
}

impl Default for RetryPolicy {
    /// Seven attempts, waits of up to 0.5, 1, 2, 4, 8 and 16 s (about 16 s in all on
    /// average, 31.5 s at most), and no retry begun after 90 s: enough to ride out a blip or
    /// a few quota refusals, while a call never holds up the daemon for long. An outage
    /// longer than that is met by the caller (results wait in the outbox).
    fn default() -> Self {
        Self {
            max_attempts: 7,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(16),
            max_elapsed: Duration::from_secs(90),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retries.
    pub fn never() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The ceiling of the wait before retry number `retry` (1-based):
    /// `min(max_delay, initial_delay * 2^(retry-1))`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let shift = retry.saturating_sub(1).min(30);
        self.initial_delay
            .saturating_mul(1u32 << shift)
            .min(self.max_delay)
    }

    /// A full-jitter wait before retry number `retry`: uniform in `[0, ceiling]`.
    pub fn delay(&self, retry: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self.ceiling(retry);
        if ceiling.is_zero() {
            return Duration::ZERO;
        }
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.gen_range(0..=nanos))
    }

    /// The wait before the next attempt after `attempts` attempts failed and `elapsed` passed
    /// since the first began; `None` when the policy is exhausted.
    pub fn next_delay(
        &self,
        attempts: u32,
        elapsed: Duration,
        rng: &mut impl Rng,
    ) -> Option<Duration> {
        if attempts >= self.max_attempts {
            return None;
        }
        let delay = self.delay(attempts, rng);
        if elapsed.saturating_add(delay) > self.max_elapsed {
            return None;
        }
        Some(delay)
    }
}

/// Whether a failure may be tried again, and the short reason logged with the retry.
pub trait Retryable {
    /// `Some(reason)` if another attempt may succeed.
    fn retry_reason(&self) -> Option<String>;
}

/// A failed call after the retry loop gave up or met a failure not worth retrying.
#[derive(Debug)]
pub struct GaveUp<E> {
    pub error: E,
    /// Attempts made, the failing one included.
    pub attempts: u32,
    /// How long the loop ran.
    pub elapsed: Duration,
}

/// One retry about to happen, for logging and counting.
#[derive(Debug)]
pub struct RetryEvent<'a, E> {
    /// The attempt that failed (1-based).
    pub attempt: u32,
    pub delay: Duration,
    pub reason: &'a str,
    pub error: &'a E,
}

/// Runs `op` (given the 1-based attempt number) until it succeeds, fails with an error that
/// is not retryable, or `policy` is exhausted. `on_retry` is called before each wait.
pub async fn retry<T, E, F, Fut>(
    policy: &RetryPolicy,
    mut op: F,
    mut on_retry: impl FnMut(&RetryEvent<'_, E>),
) -> Result<T, GaveUp<E>>
where
    E: Retryable,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let start = tokio::time::Instant::now();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let error = match op(attempt).await {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let elapsed = start.elapsed();
        let gave_up = |error| GaveUp {
            error,
            attempts: attempt,
            elapsed,
        };
        let Some(reason) = error.retry_reason() else {
            return Err(gave_up(error));
        };
        let Some(delay) = policy.next_delay(attempt, elapsed, &mut rand::thread_rng()) else {
            return Err(gave_up(error));
        };
        on_retry(&RetryEvent {
            attempt,
            delay,
            reason: &reason,
            error: &error,
        });
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::cell::Cell;

    #[derive(Debug, PartialEq)]
    enum E {
        Busy,
        Bad,
    }

    impl Retryable for E {
        fn retry_reason(&self) -> Option<String> {
            match self {
                E::Busy => Some("busy".into()),
                E::Bad => None,
            }
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(250),
            max_elapsed: Duration::from_secs(60),
        }
    }

    #[test]
    fn ceilings_double_up_to_the_cap() {
        let p = fast();
        assert_eq!(p.ceiling(1), Duration::from_millis(100));
        assert_eq!(p.ceiling(2), Duration::from_millis(200));
        assert_eq!(p.ceiling(3), Duration::from_millis(250));
        assert_eq!(p.ceiling(40), Duration::from_millis(250));
    }

    #[test]
    fn full_jitter_spreads_between_zero_and_the_ceiling() {
        let p = fast();
        let mut rng = StdRng::seed_from_u64(7);
        let delays: Vec<_> = (0..200).map(|_| p.delay(2, &mut rng)).collect();
        assert!(delays.iter().all(|d| *d <= Duration::from_millis(200)));
        assert!(delays.iter().any(|d| *d < Duration::from_millis(50)));
        assert!(delays.iter().any(|d| *d > Duration::from_millis(150)));
    }

    #[test]
    fn exhausted_by_attempts_or_elapsed_time() {
        let p = fast();
        let mut rng = StdRng::seed_from_u64(1);
        assert!(p.next_delay(3, Duration::ZERO, &mut rng).is_some());
        assert!(p.next_delay(4, Duration::ZERO, &mut rng).is_none());
        assert!(p.next_delay(1, Duration::from_secs(61), &mut rng).is_none());
        assert!(RetryPolicy::never()
            .next_delay(1, Duration::ZERO, &mut rng)
            .is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retryable_errors_until_success() {
        let calls = Cell::new(0);
        let mut events = Vec::new();
        let out = retry(
            &fast(),
            |attempt| {
                calls.set(calls.get() + 1);
                async move {
                    if attempt < 3 {
                        Err(E::Busy)
                    } else {
                        Ok(attempt)
                    }
                }
            },
            |ev| events.push((ev.attempt, ev.reason.to_string())),
        )
        .await;
        assert_eq!(out.ok(), Some(3));
        assert_eq!(calls.get(), 3);
        assert_eq!(events, vec![(1, "busy".into()), (2, "busy".into())]);
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_what_cannot_succeed() {
        let calls = Cell::new(0);
        let out: Result<(), _> = retry(
            &fast(),
            |_| {
                calls.set(calls.get() + 1);
                async { Err(E::Bad) }
            },
            |_| panic!("must not retry"),
        )
        .await;
        let gave_up = out.err().map(|g| (g.error, g.attempts));
        assert_eq!(gave_up, Some((E::Bad, 1)));
        assert_eq!(calls.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_attempts() {
        let out: Result<(), _> = retry(&fast(), |_| async { Err(E::Busy) }, |_| {}).await;
        let gave_up = out.err().map(|g| (g.error, g.attempts));
        assert_eq!(gave_up, Some((E::Busy, 4)));
    }
}
