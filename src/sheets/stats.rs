//! Counters of the calls made to the Sheets API: requests by method and outcome, retries and
//! waits imposed by the request budget.
//!
//! They are plain atomics so recording never blocks a call, and a [`StatsSnapshot`] is what
//! the metrics endpoint and `sheetq check` render: the question an operator asks is "how close
//! are we to Google's quota, and is it pushing back?".

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The API methods sheetq calls; the names are Google's (and those in [`super::SheetsError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiMethod {
    SpreadsheetsGet,
    ValuesBatchGet,
    ValuesBatchUpdate,
    SpreadsheetsBatchUpdate,
    ValuesAppend,
    ValuesBatchGetByDataFilter,
    ValuesBatchUpdateByDataFilter,
    DeveloperMetadataSearch,
}

impl ApiMethod {
    pub const ALL: [ApiMethod; 8] = [
        ApiMethod::SpreadsheetsGet,
        ApiMethod::ValuesBatchGet,
        ApiMethod::ValuesBatchUpdate,
        ApiMethod::SpreadsheetsBatchUpdate,
        ApiMethod::ValuesAppend,
        ApiMethod::ValuesBatchGetByDataFilter,
        ApiMethod::ValuesBatchUpdateByDataFilter,
        ApiMethod::DeveloperMetadataSearch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ApiMethod::SpreadsheetsGet => "spreadsheets.get",
            ApiMethod::ValuesBatchGet => "values.batchGet",
            ApiMethod::ValuesBatchUpdate => "values.batchUpdate",
            ApiMethod::SpreadsheetsBatchUpdate => "spreadsheets.batchUpdate",
            ApiMethod::ValuesAppend => "values.append",
            ApiMethod::ValuesBatchGetByDataFilter => "values.batchGetByDataFilter",
            ApiMethod::ValuesBatchUpdateByDataFilter => "values.batchUpdateByDataFilter",
            ApiMethod::DeveloperMetadataSearch => "developerMetadata.search",
        }
    }

    /// Whether Google counts the call against the write quota (every call that can change
    /// the spreadsheet, `spreadsheets.batchUpdate` included even when it only reads back);
    /// the others count as reads (https://developers.google.com/sheets/api/limits).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            ApiMethod::ValuesBatchUpdate
                | ApiMethod::SpreadsheetsBatchUpdate
                | ApiMethod::ValuesAppend
                | ApiMethod::ValuesBatchUpdateByDataFilter
        )
    }

    /// Whether the client may repeat a failed call at all. Writes may not: what they write,
    /// and where (a claim commit's rows, a rebind's row), is decided from a read, and by the
    /// time a retry is sent a person may have sorted, inserted or deleted rows, so the caller
    /// resolves the write afresh from a new read instead (docs/design.md §4: a failed write is never
    /// retried at the same positions). A refused write also costs the account's quota
    /// nothing more until the next pass.
    pub fn retried_by_client(self) -> bool {
        !matches!(
            self,
            ApiMethod::ValuesBatchUpdate
                | ApiMethod::ValuesBatchUpdateByDataFilter
                | ApiMethod::SpreadsheetsBatchUpdate
        )
    }

    /// Whether sending the same request twice leaves the sheet as sending it once.
    ///
    /// `values.append` is not: if a reply is lost after Google applied it, a retry adds a
    /// second row. Nor is `spreadsheets.batchUpdate`: sheetq's batches are compare-and-swaps,
    /// and a CAS repeated after a lost reply reports "0 changed" although the first one did
    /// change the cell, so the daemon would take its own claim for someone else's. The retry
    /// loop therefore only repeats these when the failure proves the request was not applied
    /// (429, 503, no token); otherwise the caller decides.
    pub fn is_idempotent(self) -> bool {
        !matches!(
            self,
            ApiMethod::ValuesAppend
                | ApiMethod::SpreadsheetsBatchUpdate
                | ApiMethod::ValuesBatchUpdateByDataFilter
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How one HTTP attempt ended, bucketed for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    TooManyRequests,
    OtherClientError,
    ServerError,
    /// No reply within the per-call timeout.
    Timeout,
    /// The connection failed or was dropped before a reply.
    Connection,
    /// No access token could be obtained (the request was not sent).
    Token,
    Other,
}

impl Outcome {
    pub const ALL: [Outcome; 12] = [
        Outcome::Ok,
        Outcome::BadRequest,
        Outcome::Unauthorized,
        Outcome::Forbidden,
        Outcome::NotFound,
        Outcome::TooManyRequests,
        Outcome::OtherClientError,
        Outcome::ServerError,
        Outcome::Timeout,
        Outcome::Connection,
        Outcome::Token,
        Outcome::Other,
    ];

    /// The bucket of an HTTP status code.
    pub fn from_status(code: u16) -> Self {
        match code {
            200..=299 => Outcome::Ok,
            400 => Outcome::BadRequest,
            401 => Outcome::Unauthorized,
            403 => Outcome::Forbidden,
            404 => Outcome::NotFound,
            429 => Outcome::TooManyRequests,
            402..=499 => Outcome::OtherClientError,
            500..=599 => Outcome::ServerError,
            _ => Outcome::Other,
        }
    }

    /// Label used in logs and metrics (`ok`, `429`, `5xx`, `timeout`, ...).
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::BadRequest => "400",
            Outcome::Unauthorized => "401",
            Outcome::Forbidden => "403",
            Outcome::NotFound => "404",
            Outcome::TooManyRequests => "429",
            Outcome::OtherClientError => "4xx",
            Outcome::ServerError => "5xx",
            Outcome::Timeout => "timeout",
            Outcome::Connection => "connection",
            Outcome::Token => "token",
            Outcome::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

const METHODS: usize = ApiMethod::ALL.len();
const OUTCOMES: usize = Outcome::ALL.len();

/// Live counters, shared (`Arc`) between the client and whoever renders them.
#[derive(Debug)]
pub struct SheetsStats {
    requests: [[AtomicU64; OUTCOMES]; METHODS],
    retries: AtomicU64,
    throttled_waits: AtomicU64,
    throttled_nanos: AtomicU64,
    created: Instant,
    /// Nanoseconds after `created` at which the last attempt ended, plus one; 0 = none yet.
    last_attempt: AtomicU64,
    /// Google's clock minus ours, in milliseconds, from the `Date` header of the last reply;
    /// `i64::MIN` until one came.
    clock_skew_ms: AtomicI64,
    /// Google's clock as the last reply's `Date` said, and when (our monotonic clock).
    google_clock: std::sync::Mutex<Option<(chrono::DateTime<chrono::Utc>, Instant)>>,
}

impl Default for SheetsStats {
    fn default() -> Self {
        Self {
            requests: Default::default(),
            retries: AtomicU64::new(0),
            throttled_waits: AtomicU64::new(0),
            throttled_nanos: AtomicU64::new(0),
            created: Instant::now(),
            last_attempt: AtomicU64::new(0),
            clock_skew_ms: AtomicI64::new(i64::MIN),
            google_clock: std::sync::Mutex::new(None),
        }
    }
}

impl SheetsStats {
    pub fn new() -> Self {
        Self::default()
    }

    /// One HTTP attempt (a retry is a second attempt) ended with `outcome`.
    pub fn record_request(&self, method: ApiMethod, outcome: Outcome) {
        self.requests[method.index()][outcome.index()].fetch_add(1, Ordering::Relaxed);
        let nanos = Instant::now()
            .saturating_duration_since(self.created)
            .as_nanos();
        let stamp = u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1;
        self.last_attempt.fetch_max(stamp, Ordering::Relaxed);
    }

    /// When the last attempt ended (whatever its outcome): the client is working.
    pub fn last_attempt(&self) -> Option<Instant> {
        let stamp = self.last_attempt.load(Ordering::Relaxed);
        (stamp > 0).then(|| self.created + Duration::from_nanos(stamp - 1))
    }

    /// A reply's `Date` header (`date`, to the second) for a request sent at `sent` and
    /// answered at `received` (our wall clock, for the skew `check` reports), `trip` after
    /// it was sent (our monotonic clock, for [`Self::google_now`]): Google's clock is taken
    /// to have read `date` plus half a second at the midpoint.
    pub fn record_server_date(
        &self,
        date: chrono::DateTime<chrono::Utc>,
        sent: chrono::DateTime<chrono::Utc>,
        received: chrono::DateTime<chrono::Utc>,
        trip: std::time::Duration,
    ) {
        let mid = sent + (received - sent) / 2;
        let skew = date + chrono::TimeDelta::milliseconds(500) - mid;
        self.clock_skew_ms
            .store(skew.num_milliseconds(), Ordering::Relaxed);
        // The `Date` (whole seconds) was stamped about midway through the call: half a
        // round trip (`trip`, on the monotonic clock) before now, half a second after the
        // second it names.
        let at = Instant::now()
            .checked_sub(trip / 2)
            .unwrap_or_else(Instant::now);
        let reading = date + chrono::TimeDelta::milliseconds(500);
        if let Ok(mut clock) = self.google_clock.lock() {
            *clock = Some((reading, at));
        }
    }

    /// Google's clock now: the last reply's `Date`, advanced by our monotonic clock since
    /// (never our wall clock); `None` before any reply said. Accurate to about a second.
    pub fn google_now(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let (reading, at) = (*self.google_clock.lock().ok()?)?;
        let since = chrono::TimeDelta::from_std(at.elapsed()).ok()?;
        Some(reading + since)
    }

    /// How far Google's clock is ahead of ours (negative: behind), from the last reply that
    /// said; `None` before any did. Accurate to about a second plus half the round trip.
    pub fn clock_skew(&self) -> Option<chrono::TimeDelta> {
        let ms = self.clock_skew_ms.load(Ordering::Relaxed);
        (ms != i64::MIN).then(|| chrono::TimeDelta::milliseconds(ms))
    }

    pub fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// A call has to wait for the request budget before it is sent.
    pub fn record_throttled(&self) {
        self.throttled_waits.fetch_add(1, Ordering::Relaxed);
    }

    /// A throttled call waited `wait` in all.
    pub fn record_throttled_wait(&self, wait: Duration) {
        let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        self.throttled_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let mut requests = Vec::new();
        for method in ApiMethod::ALL {
            for outcome in Outcome::ALL {
                let count = self.requests[method.index()][outcome.index()].load(Ordering::Relaxed);
                if count > 0 {
                    requests.push(RequestCount {
                        method: method.name(),
                        outcome: outcome.label(),
                        count,
                    });
                }
            }
        }
        StatsSnapshot {
            requests,
            retries: self.retries.load(Ordering::Relaxed),
            throttled_waits: self.throttled_waits.load(Ordering::Relaxed),
            throttled_wait_total: Duration::from_nanos(
                self.throttled_nanos.load(Ordering::Relaxed),
            ),
        }
    }
}

/// How many attempts of one method ended with one outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCount {
    pub method: &'static str,
    pub outcome: &'static str,
    pub count: u64,
}

/// A point-in-time copy of [`SheetsStats`]; only non-zero request counters are listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    pub requests: Vec<RequestCount>,
    /// Attempts that were repeated after a retryable failure.
    pub retries: u64,
    /// Calls that had to wait for the request budget.
    pub throttled_waits: u64,
    pub throttled_wait_total: Duration,
}

impl StatsSnapshot {
    /// All attempts of `method` (any outcome).
    pub fn requests_of(&self, method: &str) -> u64 {
        self.requests
            .iter()
            .filter(|r| r.method == method)
            .map(|r| r.count)
            .sum()
    }

    /// Attempts of `method` that ended with `outcome` (a label such as `ok` or `429`).
    pub fn count(&self, method: &str, outcome: &str) -> u64 {
        self.requests
            .iter()
            .filter(|r| r.method == method && r.outcome == outcome)
            .map(|r| r.count)
            .sum()
    }

    pub fn total_requests(&self) -> u64 {
        self.requests.iter().map(|r| r.count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn googles_clock_is_the_last_date_moved_on_by_the_monotonic_clock_not_the_wall_clock() {
        let stats = SheetsStats::new();
        assert_eq!(stats.google_now(), None, "no reply yet, no reading");
        let date = chrono::DateTime::from_timestamp(2_000_000_000, 0)
            .unwrap_or_else(|| panic!("a valid instant"));
        // Our wall clock says the call took a day (it was set back meanwhile); the
        // monotonic clock says 200 ms: only the latter counts.
        let sent = chrono::Utc::now();
        let received = sent - chrono::TimeDelta::days(1);
        stats.record_server_date(date, sent, received, Duration::from_millis(200));
        let now = stats
            .google_now()
            .unwrap_or_else(|| panic!("a reading after a reply"));
        let ahead = now - date;
        assert!(
            ahead >= chrono::TimeDelta::milliseconds(600)
                && ahead < chrono::TimeDelta::milliseconds(5_600),
            "Google's clock reads the Date + 0.5 s + half the 200 ms trip + the time since, not {ahead}"
        );
    }

    #[test]
    fn snapshot_lists_only_what_happened() {
        let stats = SheetsStats::new();
        stats.record_request(ApiMethod::ValuesBatchGet, Outcome::Ok);
        stats.record_request(ApiMethod::ValuesBatchGet, Outcome::Ok);
        stats.record_request(ApiMethod::ValuesAppend, Outcome::from_status(429));
        stats.record_retry();
        stats.record_throttled();
        stats.record_throttled_wait(Duration::from_millis(250));
        let s = stats.snapshot();
        assert_eq!(s.requests.len(), 2, "{s:?}");
        assert_eq!(s.count("values.batchGet", "ok"), 2);
        assert_eq!(s.count("values.append", "429"), 1);
        assert_eq!(s.requests_of("values.append"), 1);
        assert_eq!(s.total_requests(), 3);
        assert_eq!(s.retries, 1);
        assert_eq!(s.throttled_waits, 1);
        assert_eq!(s.throttled_wait_total, Duration::from_millis(250));
    }

    #[test]
    fn status_buckets() {
        assert_eq!(Outcome::from_status(200), Outcome::Ok);
        assert_eq!(Outcome::from_status(409), Outcome::OtherClientError);
        assert_eq!(Outcome::from_status(503), Outcome::ServerError);
        assert_eq!(Outcome::from_status(503).label(), "5xx");
    }
}
