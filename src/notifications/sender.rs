//! Sending the notices: the journal that keeps them (`notifications.jsonl` beside the
//! outbox, so a notice survives `kill -9` and an API outage), the HTTP client and the pace
//! per webhook URL ([`Webhooks`], one per process), and the task that sends what is due,
//! with backoff, giving up only after [`GIVE_UP_AFTER`] or on a refusal no retry can mend.
//!
//! The task runs beside the daemon's poll loop and shares nothing with it but the journal's
//! lock: a slow or failing webhook never delays a result.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};
use http_body_util::Full;
use hyper::body::Bytes;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::{Channel, Format, Notice, WebhookUrl};
use crate::journal::{Journal, JournalError};
use crate::metrics::{Metrics, NotificationOutcome};
use crate::sheets::budget::TokioClock;

/// The journal's file in the state directory.
pub const NOTICES_FILE: &str = "notifications.jsonl";

/// A notice not sent within this long of being recorded is given up (logged and counted).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How long a sent notice is remembered, so that a result written again after a crash is
/// not announced twice.
pub const REMEMBER_SENT: Duration = Duration::from_secs(2 * 24 * 3600);

/// How long one send may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(15);

/// Sends to one URL: one per 1.1 s with a burst of 5, at most 59 in any minute, inside
/// Google Chat's 60 messages a minute per space
/// (<https://developers.google.com/workspace/chat/limits>).
const PACE_PERIOD: Duration = Duration::from_millis(1100);
const PACE_BURST: u32 = 5;

/// The notices in `dir`'s journal still to be sent, read without changing it (for `sheetq
/// status` beside a running daemon); none when there is no journal.
pub fn read_waiting(dir: &Path) -> Vec<Notice> {
    let mut waiting: Vec<Notice> = crate::journal::read(&dir.join(NOTICES_FILE), Notice::key)
        .into_iter()
        .filter(|n: &Notice| !n.settled)
        .collect();
    waiting.sort_by_key(|n| n.recorded_at);
    waiting
}

/// The notices of one daemon, durable.
#[derive(Debug)]
pub struct Notices {
    journal: Journal<Notice>,
}

impl Notices {
    /// Opens `dir/notifications.jsonl`; sent notices older than [`REMEMBER_SENT`] are
    /// forgotten. The outbox's lock in `dir` keeps a second daemon out.
    pub fn open(dir: &Path) -> Result<Self, JournalError> {
        let now = Utc::now();
        let journal = Journal::open(&dir.join(NOTICES_FILE), Notice::key, |n| {
            !n.settled || age(n, now) < REMEMBER_SENT
        })?;
        Ok(Self { journal })
    }

    /// Records `notice` durably unless one with its key (channel and job) is already known,
    /// sent or not: a result written twice is announced once. Returns whether it is new.
    pub fn record(&mut self, notice: Notice) -> Result<bool, JournalError> {
        if self.journal.contains(&notice.key()) {
            return Ok(false);
        }
        self.journal.put(notice)?;
        Ok(true)
    }

    /// The notices waiting to be sent, oldest first.
    pub fn waiting(&self) -> usize {
        self.journal.records().filter(|n| !n.settled).count()
    }

    fn due(&self, now: DateTime<Utc>) -> Vec<Notice> {
        let mut due: Vec<Notice> = self
            .journal
            .records()
            .filter(|n| !n.settled && n.next_try.is_none_or(|t| t <= now))
            .cloned()
            .collect();
        due.sort_by_key(|n| n.recorded_at);
        due
    }

    fn next_try(&self) -> Option<DateTime<Utc>> {
        self.journal
            .records()
            .filter(|n| !n.settled)
            .filter_map(|n| n.next_try)
            .min()
    }

    fn update(&mut self, notice: Notice) -> Result<(), JournalError> {
        self.journal.put(notice)
    }
}

fn age(n: &Notice, now: DateTime<Utc>) -> Duration {
    (now - n.recorded_at).to_std().unwrap_or_default()
}

type Limiter = RateLimiter<String, HashMapStateStore<String>, TokioClock, NoOpMiddleware<Duration>>;

/// The process's webhook client and each URL's pace, shared by every spreadsheet it
/// serves (two spreadsheets posting to one space share its limit).
pub struct Webhooks {
    client: hyper_util::client::legacy::Client<crate::sheets::auth::Connector, Full<Bytes>>,
    pace: Limiter,
    /// Tokio's time, so a test with paused time sees the pace it would keep.
    clock: TokioClock,
    /// A URL that answered 429 is left alone until then.
    held: Mutex<HashMap<String, tokio::time::Instant>>,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks").finish_non_exhaustive()
    }
}

impl Default for Webhooks {
    fn default() -> Self {
        let quota = Quota::with_period(PACE_PERIOD)
            .unwrap_or_else(|| Quota::per_second(std::num::NonZeroU32::MIN))
            .allow_burst(
                std::num::NonZeroU32::new(PACE_BURST).unwrap_or(std::num::NonZeroU32::MIN),
            );
        let clock = TokioClock::starting_now();
        Self {
            client: hyper_util::client::legacy::Client::builder(
                hyper_util::rt::TokioExecutor::new(),
            )
            .build(crate::sheets::google::connector()),
            pace: RateLimiter::hashmap_with_clock(quota, clock.clone()),
            clock,
            held: Mutex::new(HashMap::new()),
        }
    }
}

/// How one send went.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    Ok,
    /// Worth another try (5xx, 408, 429, no answer), not before `after` when the receiver
    /// said so.
    Again {
        why: String,
        after: Option<Duration>,
    },
    /// A refusal no retry mends (400, 401, 403, 404, …).
    Refused(String),
}

impl Webhooks {
    /// Waits for `url`'s turn: its pace, and any hold a 429 put on it.
    async fn turn(&self, url: &WebhookUrl) {
        loop {
            let held = self
                .held
                .lock()
                .ok()
                .and_then(|h| h.get(url.expose()).copied());
            if let Some(until) = held.filter(|t| *t > tokio::time::Instant::now()) {
                tokio::time::sleep_until(until).await;
                continue;
            }
            match self.pace.check_key(&url.expose().to_string()) {
                Ok(()) => return,
                Err(not_until) => {
                    tokio::time::sleep(not_until.wait_time_from(self.clock.now())).await
                }
            }
        }
    }

    fn hold(&self, url: &WebhookUrl, for_: Duration) {
        if let Ok(mut h) = self.held.lock() {
            h.insert(url.expose().to_string(), tokio::time::Instant::now() + for_);
        }
    }

    /// POSTs `notice` to `channel`, in its format.
    async fn send(&self, channel: &Channel, notice: &Notice) -> Sent {
        let mut url = channel.url.expose().to_string();
        if channel.format == Format::GoogleChat {
            // Google Chat returns the message made with a requestId already used instead of
            // making another: a notice sent again (its first reply lost, or the daemon killed
            // before it noted the send) shows once.
            // https://developers.google.com/workspace/chat/api/reference/rest/v1/spaces.messages/create
            let sep = if url.contains('?') { '&' } else { '?' };
            url.push_str(&format!("{sep}requestId={}", request_id(notice)));
        }
        let body = notice.body(channel.format).to_string();
        let request = hyper::Request::post(url.as_str())
            .header(
                hyper::header::CONTENT_TYPE,
                "application/json; charset=UTF-8",
            )
            .header(
                hyper::header::USER_AGENT,
                format!("sheetq/{}", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::from(body)));
        let request = match request {
            Ok(r) => r,
            Err(_) => return Sent::Refused("the URL cannot be sent to".into()),
        };
        let reply = match tokio::time::timeout(SEND_TIMEOUT, self.client.request(request)).await {
            Err(_) => {
                return Sent::Again {
                    why: format!("no answer within {}s", SEND_TIMEOUT.as_secs()),
                    after: None,
                }
            }
            // The error's text can hold the URL: it is not shown.
            Ok(Err(e)) if e.is_connect() => {
                return Sent::Again {
                    why: "could not connect".into(),
                    after: None,
                }
            }
            Ok(Err(_)) => {
                return Sent::Again {
                    why: "the request failed".into(),
                    after: None,
                }
            }
            Ok(Ok(reply)) => reply,
        };
        let status = reply.status();
        let after = reply
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        match status.as_u16() {
            200..=299 => Sent::Ok,
            408 | 429 | 500..=599 => Sent::Again {
                why: format!("HTTP {}", status.as_u16()),
                after,
            },
            code => Sent::Refused(format!("HTTP {code}")),
        }
    }
}

/// A Google Chat `requestId` for `notice`: the same for every send of it.
fn request_id(notice: &Notice) -> uuid::Uuid {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, notice.key().as_bytes())
}

/// The wait before try `tries + 1`: full jitter under `min(10 min, 5 s × 2^(tries-1))`, and
/// at least what the receiver asked.
fn backoff(tries: u32, asked: Option<Duration>) -> Duration {
    let policy = crate::sheets::retry::RetryPolicy {
        max_attempts: u32::MAX,
        initial_delay: Duration::from_secs(5),
        max_delay: Duration::from_secs(600),
        max_elapsed: Duration::MAX,
    };
    policy
        .delay(tries, &mut rand::thread_rng())
        .max(asked.unwrap_or_default())
        .max(Duration::from_secs(1))
}

/// What the sending task needs.
pub struct Sending {
    pub notices: Arc<Mutex<Notices>>,
    pub channels: watch::Receiver<Arc<Vec<Channel>>>,
    pub webhooks: Arc<Webhooks>,
    pub metrics: Arc<Metrics>,
    /// Told when a notice is recorded.
    pub wake: Arc<tokio::sync::Notify>,
}

/// Sends the notices that are due until `stop`; what is left waits in the journal for the
/// next start.
pub async fn run(s: Sending, stop: CancellationToken) {
    loop {
        let due = match s.notices.lock() {
            Ok(n) => n.due(Utc::now()),
            Err(_) => return,
        };
        for notice in due {
            if stop.is_cancelled() {
                return;
            }
            let channel = s
                .channels
                .borrow()
                .iter()
                .find(|c| c.name == notice.channel)
                .cloned();
            let outcome = match &channel {
                None => Sent::Refused("its [[notify]] entry is no longer configured".into()),
                Some(c) => {
                    tokio::select! {
                        _ = s.webhooks.turn(&c.url) => {}
                        _ = stop.cancelled() => return,
                    }
                    s.webhooks.send(c, &notice).await
                }
            };
            settle(&s, channel.as_ref(), notice, outcome);
        }
        let next = s.notices.lock().ok().and_then(|n| n.next_try());
        // A try already due (its time passed while others were sent) goes at once.
        let wait = next
            .map(|t| (t - Utc::now()).to_std().unwrap_or_default())
            .unwrap_or(Duration::from_secs(60))
            .min(Duration::from_secs(60));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = s.wake.notified() => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Notes how a send went in the journal, logs it and counts it.
fn settle(s: &Sending, channel: Option<&Channel>, mut notice: Notice, sent: Sent) {
    let now = Utc::now();
    notice.tries += 1;
    let (outcome, log) = match sent {
        Sent::Ok => {
            notice.settled = true;
            info!(channel = %notice.channel, job.id = ?notice.job_id, tries = notice.tries, "notification sent");
            (NotificationOutcome::Sent, None)
        }
        Sent::Again { why, after } if age(&notice, now) < GIVE_UP_AFTER => {
            let wait = backoff(notice.tries, after);
            if let (Some(c), true) = (channel, why == "HTTP 429") {
                // The receiver's limit: every notice to it waits, not only this one.
                s.webhooks.hold(&c.url, after.unwrap_or(wait));
            }
            notice.next_try = chrono::Duration::from_std(wait).ok().map(|w| now + w);
            // Each failed try once, at WARN: the channel by its name, never its URL (a webhook's URL
            // is its secret).
            warn!(channel = %notice.channel, job.id = ?notice.job_id, tries = notice.tries, %why, retry_in = ?wait, "a notification was not sent; trying again later");
            (NotificationOutcome::Retried, None)
        }
        Sent::Again { why, .. } => {
            notice.settled = true;
            (
                NotificationOutcome::Failed,
                Some(format!(
                    "{why}, still after {} tries over {}h",
                    notice.tries,
                    GIVE_UP_AFTER.as_secs() / 3600
                )),
            )
        }
        Sent::Refused(why) => {
            notice.settled = true;
            (NotificationOutcome::Failed, Some(why))
        }
    };
    if let Some(why) = log {
        warn!(channel = %notice.channel, job.id = ?notice.job_id, tries = notice.tries, reason = %why, "a notification failed for good; it is not sent");
    }
    s.metrics.notification(outcome);
    let kept = s.notices.lock().map(|mut n| n.update(notice));
    if let Ok(Err(e)) = kept {
        warn!(error = %e, "could not record a notification's send in the journal; it may be sent again after a restart");
    }
}

/// A daemon's side of notifications: the journal it records into, the channels of its
/// config (a reload replaces them), and the task that sends, stopped when this is dropped.
#[derive(Debug)]
pub struct Announcer {
    notices: Arc<Mutex<Notices>>,
    channels: watch::Sender<Arc<Vec<Channel>>>,
    wake: Arc<tokio::sync::Notify>,
    stop: CancellationToken,
}

impl Announcer {
    /// Opens the journal in `dir` and starts sending what it holds.
    pub fn start(
        dir: &Path,
        channels: Vec<Channel>,
        webhooks: Arc<Webhooks>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, JournalError> {
        let notices = Arc::new(Mutex::new(Notices::open(dir)?));
        let (channels, watched) = watch::channel(Arc::new(channels));
        let wake = Arc::new(tokio::sync::Notify::new());
        let stop = CancellationToken::new();
        tokio::spawn(run(
            Sending {
                notices: Arc::clone(&notices),
                channels: watched,
                webhooks,
                metrics,
                wake: Arc::clone(&wake),
            },
            stop.clone(),
        ));
        Ok(Self {
            notices,
            channels,
            wake,
            stop,
        })
    }

    /// The channels of a reloaded config.
    pub fn set_channels(&self, channels: Vec<Channel>) {
        self.channels.send_replace(Arc::new(channels));
    }

    pub fn channels(&self) -> Arc<Vec<Channel>> {
        Arc::clone(&self.channels.borrow())
    }

    /// Records `notices` durably (each once per channel and job) and wakes the sender.
    pub fn record(&self, notices: Vec<Notice>) -> Result<(), JournalError> {
        if notices.is_empty() {
            return Ok(());
        }
        {
            let Ok(mut journal) = self.notices.lock() else {
                return Ok(());
            };
            for n in notices {
                journal.record(n)?;
            }
        }
        self.wake.notify_one();
        Ok(())
    }

    /// Notices waiting to be sent.
    pub fn waiting(&self) -> usize {
        self.notices.lock().map(|n| n.waiting()).unwrap_or(0)
    }

    /// At shutdown: gives the notices due now (those of the jobs that just ended among them)
    /// up to `within` to go, so that a daemon stopped for good does not keep an alert to
    /// itself; what is still waiting then (a webhook failing, a backoff) goes at the next
    /// start.
    pub async fn drain(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let due = self
                .notices
                .lock()
                .map(|n| !n.due(Utc::now()).is_empty())
                .unwrap_or(false);
            if !due || tokio::time::Instant::now() >= deadline {
                return;
            }
            self.wake.notify_one();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Announcer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> WebhookUrl {
        WebhookUrl(s.to_string())
    }

    #[tokio::test(start_paused = true)]
    async fn sends_to_one_url_stay_within_sixty_a_minute_and_other_urls_do_not_wait() {
        let hooks = Webhooks::default();
        let space = url("https://chat.googleapis.com/v1/spaces/A/messages?key=k");
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        for _ in 0..130 {
            hooks.turn(&space).await;
            at.push(start.elapsed());
        }
        for (i, t) in at.iter().enumerate() {
            let in_minute = at[i..]
                .iter()
                .take_while(|u| **u < *t + Duration::from_secs(60))
                .count();
            assert!(
                in_minute <= 60,
                "{in_minute} sends in the minute from {t:?}: {at:?}"
            );
        }
        let other = tokio::time::Instant::now();
        hooks.turn(&url("https://hooks.slack.com/services/B")).await;
        assert_eq!(
            other.elapsed(),
            Duration::ZERO,
            "another URL has its own pace"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_holds_every_send_to_that_url_for_as_long_as_it_asked() {
        let hooks = Webhooks::default();
        let space = url("https://chat.googleapis.com/v1/spaces/A/messages?key=k");
        hooks.hold(&space, Duration::from_secs(30));
        let start = tokio::time::Instant::now();
        hooks.turn(&space).await;
        assert!(
            start.elapsed() >= Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_notice_is_recorded_once_per_channel_and_job_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let notice = Notice {
            channel: "ops".into(),
            job_id: "j-1".into(),
            spreadsheet_id: "sid".into(),
            target: "A".into(),
            function: "f".into(),
            requester: String::new(),
            inputs: String::new(),
            finish: Some(crate::outbox::Finish::Error),
            step: None,
            state: "エラー".into(),
            message: "exit code 1".into(),
            duration_secs: Some(3),
            finished_at: Utc::now(),
            panel_url: None,
            log_url: None,
            tries: 0,
            next_try: None,
            settled: false,
            recorded_at: Utc::now(),
        };
        {
            let mut n = Notices::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
            assert!(n.record(notice.clone()).unwrap_or_else(|e| panic!("{e}")));
            assert!(
                !n.record(notice.clone()).unwrap_or_else(|e| panic!("{e}")),
                "a second result write of the job is not announced again"
            );
            let mut sent = notice.clone();
            sent.settled = true;
            n.update(sent).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut n = Notices::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(n.waiting(), 0, "the sent notice is not sent again");
        assert!(
            !n.record(notice).unwrap_or_else(|e| panic!("{e}")),
            "a sent notice is remembered after a restart"
        );
    }
}
