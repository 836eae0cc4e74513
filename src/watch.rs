//! What one observer has watched (docs/design.md §3.1): for each thing it reads again and
//! again (another daemon's heartbeat row, the lease cell, a running row's claim), how long
//! that thing has stayed unchanged, counted in the observer's own monotonic time and only
//! while its own reads succeed.
//!
//! This is how sheetq decides that a daemon is dead, that a lease is abandoned or that a
//! running row is stale without comparing one machine's clock with another's: a time another
//! daemon wrote is never read back to decide anything (a wall-clock serial is ambiguous for an
//! hour a year when daylight saving falls back, and two machines' clocks may disagree). An
//! observer that was itself cut off from the API judges nobody until it has watched again:
//! the time between its last read before a failure and its first read after one does not
//! count, nor does more than `max_step` between two reads (a pause of the whole process).
//!
//! Pure: the caller passes the instants.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long each watched thing has stayed the same; see the module docs.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The most one interval between two successful reads counts for.
    max_step: Duration,
    seen: HashMap<String, Watched>,
    /// The last successful read, unless a read failed since.
    last_read: Option<Instant>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    fingerprint: String,
    unchanged_for: Duration,
    /// The fingerprint changed at least once while watched.
    changed: bool,
}

impl Watch {
    pub fn new(max_step: Duration) -> Self {
        Self {
            max_step,
            seen: HashMap::new(),
            last_read: None,
        }
    }

    /// A read succeeded at `at` and showed `items` (key, fingerprint): each unchanged one has
    /// stayed so for the time since the previous successful read (at most `max_step`); a
    /// changed one starts again from zero; a key not shown any more is forgotten.
    pub fn observed<I, K, F>(&mut self, at: Instant, items: I)
    where
        I: IntoIterator<Item = (K, F)>,
        K: Into<String>,
        F: Into<String>,
    {
        let step = self
            .last_read
            .map(|last| at.saturating_duration_since(last).min(self.max_step))
            .unwrap_or_default();
        let mut next = HashMap::new();
        for (key, fingerprint) in items {
            let (key, fingerprint) = (key.into(), fingerprint.into());
            let watched = match self.seen.remove(&key) {
                Some(w) if w.fingerprint == fingerprint => Watched {
                    unchanged_for: w.unchanged_for + step,
                    ..w
                },
                Some(_) => Watched {
                    fingerprint,
                    unchanged_for: Duration::ZERO,
                    changed: true,
                },
                None => Watched {
                    fingerprint,
                    unchanged_for: Duration::ZERO,
                    changed: false,
                },
            };
            next.insert(key, watched);
        }
        self.seen = next;
        self.last_read = Some(at);
    }

    /// A read failed: the time until the next successful read does not count.
    pub fn read_failed(&mut self) {
        self.last_read = None;
    }

    /// How long `key` has been watched unchanged (zero when it is not watched).
    pub fn unchanged_for(&self, key: &str) -> Duration {
        self.seen
            .get(key)
            .map_or(Duration::ZERO, |w| w.unchanged_for)
    }

    /// Whether `key` changed at least once since this observer began to watch it.
    pub fn changed(&self, key: &str) -> bool {
        self.seen.get(key).is_some_and(|w| w.changed)
    }
}

/// The key a heartbeat row of daemon `worker_id` is watched by.
pub fn heartbeat_key(worker_id: &str) -> String {
    format!("heartbeat {worker_id}")
}

/// The key of the lease cell.
pub const LEASE_KEY: &str = "lease";

/// The key a running queue row is watched by: its job, whose claim is the fingerprint.
pub fn running_key(job_id: &str) -> String {
    format!("running {job_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn beat(text: &str) -> [(&'static str, String); 1] {
        [("a", text.to_string())]
    }

    #[test]
    fn an_unchanged_value_ages_by_the_time_between_successful_reads() {
        let t0 = Instant::now();
        let mut w = Watch::new(10 * S);
        w.observed(t0, beat("1"));
        assert_eq!(w.unchanged_for("a"), Duration::ZERO, "just seen");
        w.observed(t0 + 2 * S, beat("1"));
        w.observed(t0 + 5 * S, beat("1"));
        assert_eq!(w.unchanged_for("a"), 5 * S);
        assert!(!w.changed("a"));
        w.observed(t0 + 6 * S, beat("2"));
        assert_eq!(w.unchanged_for("a"), Duration::ZERO, "it changed");
        assert!(w.changed("a"), "seen changing: its writer is alive");
    }

    #[test]
    fn an_observer_cut_off_judges_nobody_for_the_time_it_could_not_read() {
        let t0 = Instant::now();
        let mut w = Watch::new(10 * S);
        w.observed(t0, beat("1"));
        w.observed(t0 + 3 * S, beat("1"));
        // Our own reads fail for five minutes: the other daemon's silence is not news.
        w.read_failed();
        w.observed(t0 + 303 * S, beat("1"));
        assert_eq!(w.unchanged_for("a"), 3 * S);
        w.observed(t0 + 305 * S, beat("1"));
        assert_eq!(
            w.unchanged_for("a"),
            5 * S,
            "counting goes on once reads succeed"
        );
    }

    #[test]
    fn a_pause_of_the_observer_counts_for_at_most_one_step() {
        let t0 = Instant::now();
        let mut w = Watch::new(10 * S);
        w.observed(t0, beat("1"));
        w.observed(t0 + 600 * S, beat("1"));
        assert_eq!(w.unchanged_for("a"), 10 * S);
    }

    #[test]
    fn a_value_no_longer_shown_is_forgotten_and_starts_afresh() {
        let t0 = Instant::now();
        let mut w = Watch::new(10 * S);
        w.observed(t0, beat("1"));
        w.observed(t0 + 5 * S, beat("1"));
        w.observed(t0 + 6 * S, Vec::<(&str, &str)>::new());
        w.observed(t0 + 7 * S, beat("1"));
        assert_eq!(w.unchanged_for("a"), Duration::ZERO);
        assert_eq!(w.unchanged_for("never seen"), Duration::ZERO);
    }
}
