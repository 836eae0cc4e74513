//! What the daemon counts, and the `--metrics-listen` HTTP endpoint that shows it.
//!
//! [`Metrics`] is a plain registry of atomics shared as an `Arc<Metrics>`: there is no global
//! registry, so every test and every daemon in one process (the demo runs two) has its own
//! numbers. [`Metrics::render`] writes the Prometheus text exposition format 0.0.4. The API
//! counters (requests by method and status, retries, budget waits) are the Google client's own
//! [`SheetsStats`], attached with [`Metrics::with_api_stats`] and rendered from a snapshot, so
//! each call is counted in one place only.
//!
//! [`Health`] answers two questions apart (docs/design.md §3.1). `/livez`: does the poll loop
//! turn? It is 200 while the loop goes round or the API client makes attempts, also through
//! an outage of Google, so the systemd watchdog and a Kubernetes liveness probe restart only
//! a daemon that is really stuck (a wedged lock, a starved runtime), never one whose jobs are
//! riding out an outage. `/readyz` (and `/healthz`, its older name): do polls succeed? It is
//! 200 only while polls complete. [`serve`] runs the endpoints until its shutdown token fires.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::commands::Refusal;
use crate::sheets::stats::{SheetsStats, StatsSnapshot};

/// The index of `reason` in [`Refusal::ALL`].
fn refusal_slot(reason: Refusal) -> usize {
    Refusal::ALL.iter().position(|r| *r == reason).unwrap_or(0)
}

/// The `Content-Type` of the text exposition format Prometheus scrapes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds (seconds) of the job duration histogram: from the 1 s dummy job to the
/// hour-long batch step; slower jobs land in `+Inf`.
pub const JOB_DURATION_BUCKETS: [f64; 11] = [
    1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// How a job ended, as counted in `sheetq_jobs_finished_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Done,
    Error,
    Timeout,
    /// Stopped by shutdown (or an abort) before it produced a result.
    Cancelled,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Done,
        Outcome::Error,
        Outcome::Timeout,
        Outcome::Cancelled,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

/// How a notification's send went, as counted in `sheetq_notifications_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotificationOutcome {
    /// The webhook took it.
    Sent,
    /// Not taken this time (an error, a 429, no answer); tried again later.
    Retried,
    /// Given up: refused for good, or never taken within a day. Logged.
    Failed,
}

impl NotificationOutcome {
    pub const ALL: [NotificationOutcome; 3] = [
        NotificationOutcome::Sent,
        NotificationOutcome::Retried,
        NotificationOutcome::Failed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            NotificationOutcome::Sent => "sent",
            NotificationOutcome::Retried => "retried",
            NotificationOutcome::Failed => "failed",
        }
    }
}

/// The outcomes of `sheetq_approvals_total`: [`crate::approval::Turn::label`] and
/// [`crate::approval::Refusal::label`].
pub const APPROVAL_OUTCOMES: [&str; 10] = [
    "requested",
    "approved",
    "rejected",
    "withdrawn",
    "expired",
    "released",
    "refused_unknown",
    "refused_requester",
    "refused_requester_unknown",
    "refused_not_listed",
];

/// The daemon's counters and gauges. Cheap to update from any task; share it as
/// `Arc<Metrics>`.
#[derive(Debug)]
pub struct Metrics {
    jobs_finished: [AtomicU64; 4],
    /// By [`Refusal`], in the order of [`Refusal::ALL`].
    jobs_refused: [AtomicU64; Refusal::ALL.len()],
    claim_passes: AtomicU64,
    claim_conflicts: AtomicU64,
    cancel_requests: AtomicU64,
    /// By [`NotificationOutcome`], in the order of [`NotificationOutcome::ALL`].
    notifications: [AtomicU64; 3],
    job_retries: AtomicU64,
    /// By outcome, in the order of [`APPROVAL_OUTCOMES`].
    approvals: [AtomicU64; APPROVAL_OUTCOMES.len()],
    write_incidents: AtomicU64,
    results_unplaceable: AtomicU64,
    rebinds: AtomicU64,
    lease_waits: AtomicU64,
    lease_acquisitions: AtomicU64,
    /// The Google client's call counters; `None` for a sheet reached without it.
    api: Option<Arc<SheetsStats>>,
    outbox_depth: AtomicU64,
    /// Protected ranges of someone else's whose cells sheetq leaves out of its writes.
    barred_ranges: AtomicU64,
    /// 1 while the spreadsheet is held off (`daemon::hold_off`), else 0.
    held_off: AtomicU64,
    running_jobs: AtomicI64,
    job_duration: Histogram,
    /// Unix seconds of the last poll that read the queue; 0 until the first one.
    last_successful_poll: AtomicU64,
    /// The registries of the spreadsheets a process serves, by label
    /// ([`Metrics::spreadsheet`]); empty for a daemon of one spreadsheet.
    parts: Mutex<Vec<(String, Arc<Metrics>)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Self {
            jobs_finished: Default::default(),
            jobs_refused: Default::default(),
            claim_passes: AtomicU64::new(0),
            claim_conflicts: AtomicU64::new(0),
            cancel_requests: AtomicU64::new(0),
            notifications: Default::default(),
            job_retries: AtomicU64::new(0),
            approvals: Default::default(),
            write_incidents: AtomicU64::new(0),
            results_unplaceable: AtomicU64::new(0),
            rebinds: AtomicU64::new(0),
            lease_waits: AtomicU64::new(0),
            lease_acquisitions: AtomicU64::new(0),
            api: None,
            outbox_depth: AtomicU64::new(0),
            barred_ranges: AtomicU64::new(0),
            held_off: AtomicU64::new(0),
            running_jobs: AtomicI64::new(0),
            job_duration: Histogram::new(),
            last_successful_poll: AtomicU64::new(0),
            parts: Mutex::new(Vec::new()),
        }
    }

    /// A registry that also shows the API counters of the Google client
    /// (`GoogleSheets::stats`).
    pub fn with_api_stats(stats: Arc<SheetsStats>) -> Self {
        Self {
            api: Some(stats),
            ..Self::new()
        }
    }

    /// Marks a job as running until the returned guard is finished or dropped. Dropping it
    /// unfinished (the task was aborted at the end of the shutdown drain) counts the job as
    /// [`Outcome::Cancelled`], so `running_jobs` never drifts.
    pub fn job_started(self: &Arc<Self>) -> RunningJob {
        self.running_jobs.fetch_add(1, Ordering::Relaxed);
        RunningJob {
            metrics: Arc::clone(self),
            started: Instant::now(),
            finished: false,
        }
    }

    /// Counts a finished job and its running time. [`RunningJob::finish`] calls this; call
    /// it directly only for a job whose time was measured elsewhere.
    pub fn job_finished(&self, outcome: Outcome, duration: Duration) {
        self.jobs_finished[outcome.slot()].fetch_add(1, Ordering::Relaxed);
        self.job_duration.observe(duration);
    }

    /// A claimed job was refused before anything ran (it also finishes as an error).
    pub fn job_refused(&self, reason: Refusal) {
        self.jobs_refused[refusal_slot(reason)].fetch_add(1, Ordering::Relaxed);
    }

    /// Jobs refused so far for `reason`.
    pub fn jobs_refused(&self, reason: Refusal) -> u64 {
        self.jobs_refused[refusal_slot(reason)].load(Ordering::Relaxed)
    }

    /// One claim pass ran (lease held, queue read, claims committed or none to make).
    pub fn claim_pass(&self) {
        self.claim_passes.fetch_add(1, Ordering::Relaxed);
    }

    /// A claimed row turned out to carry another daemon's claim on re-read.
    pub fn claim_conflict(&self) {
        self.claim_conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// A request to stop a job was carried out here: a waiting row ended キャンセル, or a
    /// running job's process group was told to stop.
    pub fn cancel_asked(&self) {
        self.cancel_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A notification's send went as `outcome`.
    pub fn notification(&self, outcome: NotificationOutcome) {
        self.notifications[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Notifications whose sends went as `outcome` so far.
    pub fn notifications(&self, outcome: NotificationOutcome) -> u64 {
        self.notifications[outcome as usize].load(Ordering::Relaxed)
    }

    /// An approval step as counted in `sheetq_approvals_total{outcome}`: one of
    /// [`APPROVAL_OUTCOMES`] (an unknown one is not counted).
    pub fn approval(&self, outcome: &str) {
        if let Some(i) = APPROVAL_OUTCOMES.iter().position(|o| *o == outcome) {
            self.approvals[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Approval steps counted so far as `outcome`.
    pub fn approvals(&self, outcome: &str) -> u64 {
        APPROVAL_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .map_or(0, |i| self.approvals[i].load(Ordering::Relaxed))
    }

    /// A job's attempts failed and were tried again `n` times (its command's `retries`).
    pub fn job_retries(&self, n: u32) {
        self.job_retries.fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// A write through a row binding landed on a row holding another job (values moved
    /// under the binding between the read and the write); it was repaired.
    pub fn write_incident(&self) {
        self.write_incidents.fetch_add(1, Ordering::Relaxed);
    }

    /// A finished job's queue row was deleted by a person: its result went nowhere.
    pub fn result_unplaceable(&self) {
        self.results_unplaceable.fetch_add(1, Ordering::Relaxed);
    }

    /// A row binding was moved back onto its job's row (after a narrow sort or a
    /// cut-and-paste left it behind).
    pub fn rebind(&self) {
        self.rebinds.fetch_add(1, Ordering::Relaxed);
    }

    /// A claim pass was skipped because another daemon holds the sheet lease.
    pub fn lease_wait(&self) {
        self.lease_waits.fetch_add(1, Ordering::Relaxed);
    }

    /// This daemon took (or renewed) the sheet lease.
    pub fn lease_acquired(&self) {
        self.lease_acquisitions.fetch_add(1, Ordering::Relaxed);
    }

    /// Results waiting in the local outbox to be written to the sheet.
    pub fn set_outbox_depth(&self, depth: u64) {
        self.outbox_depth.store(depth, Ordering::Relaxed);
    }

    /// How many protected ranges of someone else's bar cells sheetq writes.
    pub fn set_barred_ranges(&self, n: u64) {
        self.barred_ranges.store(n, Ordering::Relaxed);
    }

    /// Whether the spreadsheet is held off now.
    pub fn set_held_off(&self, held: bool) {
        self.held_off.store(u64::from(held), Ordering::Relaxed);
    }

    /// A poll read the queue successfully at `at`.
    pub fn poll_succeeded(&self, at: SystemTime) {
        let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.last_successful_poll.store(secs, Ordering::Relaxed);
    }

    /// Jobs running now.
    pub fn running_jobs(&self) -> i64 {
        self.running_jobs.load(Ordering::Relaxed)
    }

    /// Jobs finished so far with `outcome`.
    pub fn jobs_finished(&self, outcome: Outcome) -> u64 {
        self.jobs_finished[outcome.slot()].load(Ordering::Relaxed)
    }

    /// The registry of one spreadsheet of a process that serves several (`[[spreadsheets]]`),
    /// counting `api`, its client's calls. Once a registry has spreadsheets, [`Metrics::render`]
    /// shows theirs, each sample labelled `spreadsheet="<label>"`, in place of its own.
    pub fn spreadsheet(&self, label: &str, api: Option<Arc<SheetsStats>>) -> Arc<Metrics> {
        let part = Arc::new(Self { api, ..Self::new() });
        if let Ok(mut parts) = self.parts.lock() {
            parts.push((label.to_string(), Arc::clone(&part)));
        }
        part
    }

    /// What one rendering shows: this registry alone, or each of its spreadsheets'.
    fn sources(&self) -> Vec<(Option<String>, Arc<Metrics>)> {
        self.parts
            .lock()
            .map(|parts| {
                parts
                    .iter()
                    .map(|(label, m)| (Some(label.clone()), Arc::clone(m)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The API families; present (and zero) without a client too, so dashboards and alerts
    /// do not break on a missing series.
    fn render_api(out: &mut String, sources: &[Source<'_>]) {
        family(
            out,
            "sheetq_api_requests_total",
            "counter",
            "Sheets API attempts, by API method and outcome (ok, 429, 5xx, timeout, ...).",
        );
        let snapshots: Vec<_> = sources
            .iter()
            .map(|s| {
                s.metrics
                    .api
                    .as_ref()
                    .map(|a| a.snapshot())
                    .unwrap_or_default()
            })
            .collect();
        for (s, api) in sources.iter().zip(&snapshots) {
            for r in &api.requests {
                s.sample(
                    out,
                    "sheetq_api_requests_total",
                    &[("method", r.method), ("status", r.outcome)],
                    r.count,
                );
            }
        }
        let families: [Family<ApiValue>; 3] = [
            Family {
                name: "sheetq_api_retries_total",
                help: "Sheets API attempts repeated after a retryable failure (429, 5xx, timeout).",
                value: |a| a.retries as f64,
            },
            Family {
                name: "sheetq_throttled_waits_total",
                help: "Calls that waited for the client-side request budget (requests_per_minute).",
                value: |a| a.throttled_waits as f64,
            },
            Family {
                name: "sheetq_throttled_wait_seconds_total",
                help: "Time spent waiting for the client-side request budget.",
                value: |a| a.throttled_wait_total.as_secs_f64(),
            },
        ];
        for f in families {
            family(out, f.name, "counter", f.help);
            for (s, api) in sources.iter().zip(&snapshots) {
                s.sample(out, f.name, &[], (f.value)(api));
            }
        }
    }

    /// Everything, in the Prometheus text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let parts = self.sources();
        let sources: Vec<Source<'_>> = if parts.is_empty() {
            vec![Source {
                label: None,
                metrics: self,
            }]
        } else {
            parts
                .iter()
                .map(|(label, m)| Source {
                    label: label.as_deref(),
                    metrics: m,
                })
                .collect()
        };
        let mut out = String::with_capacity(4096 * sources.len());
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

        family(
            &mut out,
            "sheetq_jobs_finished_total",
            "counter",
            "Jobs finished, by outcome.",
        );
        for s in &sources {
            for outcome in Outcome::ALL {
                s.sample(
                    &mut out,
                    "sheetq_jobs_finished_total",
                    &[("outcome", outcome.as_str())],
                    load(&s.metrics.jobs_finished[outcome.slot()]),
                );
            }
        }
        family(
            &mut out,
            "sheetq_jobs_refused_total",
            "counter",
            "Jobs refused before anything ran (the config does not allow them), by reason.",
        );
        for s in &sources {
            for reason in Refusal::ALL {
                s.sample(
                    &mut out,
                    "sheetq_jobs_refused_total",
                    &[("reason", reason.as_str())],
                    load(&s.metrics.jobs_refused[refusal_slot(reason)]),
                );
            }
        }
        family(
            &mut out,
            "sheetq_approvals_total",
            "counter",
            "Approval steps of jobs of functions with approvers (requested, approved, rejected, withdrawn, expired, released when a function lost its approvers; refused_* an approval that did not count), by outcome.",
        );
        for s in &sources {
            for (i, outcome) in APPROVAL_OUTCOMES.iter().enumerate() {
                s.sample(
                    &mut out,
                    "sheetq_approvals_total",
                    &[("outcome", outcome)],
                    load(&s.metrics.approvals[i]),
                );
            }
        }
        family(
            &mut out,
            "sheetq_notifications_total",
            "counter",
            "Sends of webhook notifications, by outcome (sent, retried later, failed for good).",
        );
        for s in &sources {
            for outcome in NotificationOutcome::ALL {
                s.sample(
                    &mut out,
                    "sheetq_notifications_total",
                    &[("outcome", outcome.as_str())],
                    load(&s.metrics.notifications[outcome as usize]),
                );
            }
        }
        let counters: [Family<Counter>; 9] = [
            Family {
                name: "sheetq_job_retries_total",
                help: "Failed attempts of jobs tried again (their commands' retries).",
                value: |m| &m.job_retries,
            },
            Family {
                name: "sheetq_claim_passes_total",
                help: "Claim passes run under the sheet lease.",
                value: |m| &m.claim_passes,
            },
            Family {
                name: "sheetq_claim_conflicts_total",
                help: "Claims found taken by another daemon on re-read.",
                value: |m| &m.claim_conflicts,
            },
            Family {
                name: "sheetq_cancel_requests_total",
                help: "Requests to stop a job carried out (a waiting row cancelled, a running job stopped).",
                value: |m| &m.cancel_requests,
            },
            Family {
                name: "sheetq_write_incidents_total",
                help: "Writes through a row binding that found another job's row (repaired).",
                value: |m| &m.write_incidents,
            },
            Family {
                name: "sheetq_results_unplaceable_total",
                help: "Results whose queue row a person deleted; written nowhere.",
                value: |m| &m.results_unplaceable,
            },
            Family {
                name: "sheetq_rebinds_total",
                help: "Row bindings moved back onto their job's row.",
                value: |m| &m.rebinds,
            },
            Family {
                name: "sheetq_lease_waits_total",
                help: "Claim passes skipped because another daemon held the sheet lease.",
                value: |m| &m.lease_waits,
            },
            Family {
                name: "sheetq_lease_acquisitions_total",
                help: "Sheet lease acquisitions and renewals by this daemon.",
                value: |m| &m.lease_acquisitions,
            },
        ];
        for f in counters {
            family(&mut out, f.name, "counter", f.help);
            for s in &sources {
                s.sample(&mut out, f.name, &[], load((f.value)(s.metrics)));
            }
        }

        Self::render_api(&mut out, &sources);
        let gauges: [Family<Gauge>; 5] = [
            Family {
                name: "sheetq_outbox_depth",
                help: "Finished results waiting in the local outbox to be written to the sheet.",
                value: |m| {
                    i64::try_from(m.outbox_depth.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
                },
            },
            Family {
                name: "sheetq_barred_ranges",
                help: "Protected ranges of someone else's over cells sheetq writes (panels, the index): their cells are left out of its writes.",
                value: |m| {
                    i64::try_from(m.barred_ranges.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
                },
            },
            Family {
                name: "sheetq_held_off",
                help: "1 while the spreadsheet is held off (it cannot be served as it is; tried again with backoff), else 0.",
                value: |m| i64::try_from(m.held_off.load(Ordering::Relaxed)).unwrap_or(i64::MAX),
            },
            Family {
                name: "sheetq_running_jobs",
                help: "Jobs running in this daemon now.",
                value: |m| m.running_jobs.load(Ordering::Relaxed),
            },
            Family {
                name: "sheetq_last_successful_poll_timestamp_seconds",
                help: "Unix time of the last poll that read the queue (0: none yet).",
                value: |m| {
                    i64::try_from(m.last_successful_poll.load(Ordering::Relaxed))
                        .unwrap_or(i64::MAX)
                },
            },
        ];
        for f in gauges {
            family(&mut out, f.name, "gauge", f.help);
            for s in &sources {
                s.sample(&mut out, f.name, &[], (f.value)(s.metrics));
            }
        }

        let name = "sheetq_job_duration_seconds";
        family(
            &mut out,
            name,
            "histogram",
            "Running time of finished jobs.",
        );
        for s in &sources {
            s.metrics.job_duration.render(&mut out, name, s);
        }
        out
    }
}

/// A family of one sample per registry: its name, its help and how to read the value.
struct Family<F> {
    name: &'static str,
    help: &'static str,
    value: F,
}

type ApiValue = fn(&StatsSnapshot) -> f64;
type Counter = fn(&Metrics) -> &AtomicU64;
type Gauge = fn(&Metrics) -> i64;

/// One registry's samples in a rendering, labelled with its spreadsheet when it is one of
/// several.
struct Source<'a> {
    label: Option<&'a str>,
    metrics: &'a Metrics,
}

impl Source<'_> {
    fn sample(
        &self,
        out: &mut String,
        name: &str,
        labels: &[(&str, &str)],
        value: impl SampleValue,
    ) {
        match self.label {
            None => sample(out, name, labels, value),
            Some(label) => {
                let mut all = Vec::with_capacity(labels.len() + 1);
                all.push(("spreadsheet", label));
                all.extend_from_slice(labels);
                sample(out, name, &all, value);
            }
        }
    }
}

/// A job counted in `sheetq_running_jobs`; see [`Metrics::job_started`].
#[derive(Debug)]
#[must_use = "dropping it at once counts the job as cancelled"]
pub struct RunningJob {
    metrics: Arc<Metrics>,
    started: Instant,
    finished: bool,
}

impl RunningJob {
    /// Counts the job as finished with `outcome`; returns how long it ran.
    pub fn finish(mut self, outcome: Outcome) -> Duration {
        let elapsed = self.started.elapsed();
        self.metrics.job_finished(outcome, elapsed);
        self.finished = true;
        elapsed
    }
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        if !self.finished {
            self.metrics
                .job_finished(Outcome::Cancelled, self.started.elapsed());
        }
        self.metrics.running_jobs.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A cumulative histogram with fixed buckets; the sum is kept in microseconds so it can be
/// an atomic integer.
#[derive(Debug)]
struct Histogram {
    buckets: [AtomicU64; JOB_DURATION_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new() -> Self {
        Self {
            buckets: Default::default(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: Duration) {
        let secs = value.as_secs_f64();
        // Only the first bucket that fits is bumped; render() accumulates, so an
        // observation costs one increment instead of one per larger bucket.
        if let Some(i) = JOB_DURATION_BUCKETS.iter().position(|le| secs <= *le) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add(saturating_micros(value), Ordering::Relaxed);
    }

    /// The samples of one registry's histogram (its family's `# HELP` and `# TYPE` are
    /// written once, before the first).
    fn render(&self, out: &mut String, name: &str, source: &Source<'_>) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0u64;
        for (le, n) in JOB_DURATION_BUCKETS.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            source.sample(out, &bucket, &[("le", &format_float(*le))], cumulative);
        }
        // Read after the buckets: a concurrent observe may make +Inf one higher than the
        // last bucket, never lower, which keeps the series monotonic.
        let count = self.count.load(Ordering::Relaxed).max(cumulative);
        source.sample(out, &bucket, &[("le", "+Inf")], count);
        source.sample(
            out,
            &format!("{name}_sum"),
            &[],
            micros_as_secs(self.sum_micros.load(Ordering::Relaxed)),
        );
        source.sample(out, &format!("{name}_count"), &[], count);
    }
}

/// A value Prometheus can read.
trait SampleValue {
    fn write_to(&self, out: &mut String);
}

impl SampleValue for u64 {
    fn write_to(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl SampleValue for i64 {
    fn write_to(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl SampleValue for f64 {
    fn write_to(&self, out: &mut String) {
        out.push_str(&format_float(*self));
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl SampleValue) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, val)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"{}\"", escape_label(val));
        }
        out.push('}');
    }
    out.push(' ');
    value.write_to(out);
    out.push('\n');
}

/// Label values escape `\`, `"` and line feeds (format 0.0.4).
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes `\` and line feeds only.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Go-style float text: `1`, `0.25`, `+Inf`, `NaN`.
fn format_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

fn saturating_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn micros_as_secs(micros: u64) -> f64 {
    micros as f64 / 1_000_000.0
}

/// Whether the poll loop is making progress; cloned into the loop and the HTTP server.
///
/// Time is monotonic ([`Instant`]), so a wall-clock jump neither fakes nor hides progress.
#[derive(Debug, Clone)]
pub struct Health {
    inner: Arc<HealthInner>,
}

#[derive(Debug)]
struct HealthInner {
    created: Instant,
    stale_after: Duration,
    /// Nanoseconds after `created` of the last completed poll, plus one; 0 = none yet.
    last_poll: AtomicU64,
    /// The same for the last turn of the loop (an attempt to start counts).
    last_turn: AtomicU64,
    /// The same for when the loop, going to sleep, planned to turn next: a loop that waits
    /// its turn among many daemons (a poll every `poll_interval × n`) is not stuck until
    /// that time has passed by the limit.
    planned: AtomicU64,
    /// Milliseconds between the loop's polls, as it last planned them: polls that far apart
    /// are not stale until the limit has passed on top of it.
    gap_ms: AtomicU64,
    /// The API client's counters: an attempt it ended is progress too (a pass waits through
    /// the client's retries in an outage).
    api: Option<Arc<SheetsStats>>,
    stopping: AtomicBool,
    /// Why the loop holds off its spreadsheet (a write Google refused, a sheet gone), until
    /// a pass succeeds again: `None` while it serves it.
    paused: Mutex<Option<String>>,
    /// The loops of the spreadsheets a process serves, by label ([`Health::spreadsheet`]);
    /// empty for a daemon of one spreadsheet.
    parts: Mutex<Vec<(String, Health)>>,
}

/// What [`Health::liveness_at`] found: whether the poll loop turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The loop turned, or the API client ended an attempt, this long ago.
    Turning { last_turn_age: Duration },
    /// Neither happened within the limit: the loop is stuck (of `spreadsheet`, in a process
    /// that serves several).
    Stuck {
        last_turn_age: Duration,
        limit: Duration,
        spreadsheet: Option<String>,
    },
    /// Shutdown has begun: the drain is governed by its own deadline.
    Stopping,
}

impl Liveness {
    pub fn is_live(&self) -> bool {
        !matches!(self, Liveness::Stuck { .. })
    }

    /// The `/livez` body: `ok`, or why not.
    pub fn reason(&self) -> String {
        match self {
            Liveness::Turning { .. } => "ok".into(),
            Liveness::Stuck {
                last_turn_age,
                limit,
                spreadsheet,
            } => format!(
                "stuck: the poll loop{} last turned {} ago (limit {})",
                of_spreadsheet(spreadsheet),
                whole_secs(last_turn_age),
                whole_secs(limit)
            ),
            Liveness::Stopping => "ok: stopping, draining running jobs".into(),
        }
    }
}

fn whole_secs(d: &Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs()))
}

/// ` of spreadsheet "label"`, or nothing for a daemon of one spreadsheet.
fn of_spreadsheet(spreadsheet: &Option<String>) -> String {
    spreadsheet
        .as_ref()
        .map_or_else(String::new, |label| format!(" of spreadsheet {label:?}"))
}

/// What [`Health::verdict_at`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A poll completed within the staleness limit.
    Healthy { last_poll_age: Duration },
    /// No poll has completed yet (of `spreadsheet`, in a process that serves several), for
    /// `since`.
    Starting {
        since: Duration,
        spreadsheet: Option<String>,
    },
    /// The last completed poll (of `spreadsheet`) is older than the limit.
    Stale {
        last_poll_age: Duration,
        limit: Duration,
        spreadsheet: Option<String>,
    },
    /// The loop holds off its spreadsheet (of `spreadsheet`), trying again with backoff:
    /// something it needs cannot be read or written, for `reason`. The process serves the
    /// others.
    Paused {
        reason: String,
        spreadsheet: Option<String>,
    },
    /// Shutdown has begun; the daemon no longer claims.
    Stopping,
}

impl Verdict {
    pub fn is_healthy(&self) -> bool {
        matches!(self, Verdict::Healthy { .. })
    }

    /// The `/healthz` body: `ok`, or why not.
    pub fn reason(&self) -> String {
        let secs = |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        match self {
            Verdict::Healthy { .. } => "ok".into(),
            Verdict::Starting { since, spreadsheet } => format!(
                "starting: no poll{} has completed yet ({} since start)",
                of_spreadsheet(spreadsheet),
                secs(since)
            ),
            Verdict::Stale {
                last_poll_age,
                limit,
                spreadsheet,
            } => format!(
                "stale: the last completed poll{} was {} ago (limit {}); check the logs for API errors",
                of_spreadsheet(spreadsheet),
                secs(last_poll_age),
                secs(limit)
            ),
            Verdict::Paused {
                reason,
                spreadsheet,
            } => format!(
                "paused: the spreadsheet{} is held off, tried again with backoff: {reason}",
                of_spreadsheet(spreadsheet)
            ),
            Verdict::Stopping => "stopping: shutdown in progress".into(),
        }
    }
}

impl Health {
    /// `stale_after`: how long without a completed poll before the daemon counts as stuck.
    /// Leave room for a slow poll with retries; see [`Health::limit_for`].
    pub fn new(stale_after: Duration) -> Self {
        Self::make(stale_after, None)
    }

    /// [`Health::new`], counting each attempt the API client ends (`api`) as a turn.
    pub fn with_api_stats(stale_after: Duration, api: Arc<SheetsStats>) -> Self {
        Self::make(stale_after, Some(api))
    }

    fn make(stale_after: Duration, api: Option<Arc<SheetsStats>>) -> Self {
        Self {
            inner: Arc::new(HealthInner {
                created: Instant::now(),
                stale_after,
                last_poll: AtomicU64::new(0),
                last_turn: AtomicU64::new(0),
                planned: AtomicU64::new(0),
                gap_ms: AtomicU64::new(0),
                api,
                stopping: AtomicBool::new(false),
                paused: Mutex::new(None),
                parts: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The health of one spreadsheet's loop in a process that serves several
    /// (`[[spreadsheets]]`): its turns, its polls and the attempts of its client (`api`),
    /// judged against `stale_after`. Once a health has spreadsheets, it is stuck when any of
    /// their loops is (naming it), so a loop wedged on one spreadsheet is restarted while the
    /// others turn, and ready only while every one's polls complete.
    pub fn spreadsheet(
        &self,
        label: &str,
        stale_after: Duration,
        api: Option<Arc<SheetsStats>>,
    ) -> Health {
        let part = Self::make(stale_after, api);
        if let Ok(mut parts) = self.inner.parts.lock() {
            parts.push((label.to_string(), part.clone()));
        }
        part
    }

    fn parts(&self) -> Vec<(String, Health)> {
        self.inner
            .parts
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    fn stamp(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.inner.created).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1
    }

    fn instant(&self, stamp: u64) -> Option<Instant> {
        (stamp > 0).then(|| self.inner.created + Duration::from_nanos(stamp - 1))
    }

    /// The poll loop went round (whatever the pass then did), or tried to start again.
    pub fn loop_turned(&self) {
        self.loop_turned_at(Instant::now());
    }

    /// The loop goes to sleep until `next`, when it turns again, polling every `period`:
    /// until then (and the limit after it) it is not stuck, however long it waits, and its
    /// polls are not stale until `period` and the limit have passed since the last. The
    /// latest plan counts, also when it is sooner than the one before.
    pub fn turn_planned(&self, next: Instant, period: Duration) {
        let stamp = self.stamp(next);
        self.inner.planned.store(stamp, Ordering::Relaxed);
        let gap = u64::try_from(period.as_millis()).unwrap_or(u64::MAX);
        self.inner.gap_ms.store(gap, Ordering::Relaxed);
    }

    /// [`Health::loop_turned`] with an explicit time, for tests.
    pub fn loop_turned_at(&self, at: Instant) {
        let stamp = self.stamp(at);
        self.inner.last_turn.fetch_max(stamp, Ordering::Relaxed);
    }

    /// Whether the loop turns (`/livez`, the systemd watchdog).
    pub fn liveness(&self) -> Liveness {
        self.liveness_at(Instant::now())
    }

    pub fn liveness_at(&self, now: Instant) -> Liveness {
        if self.inner.stopping.load(Ordering::Relaxed) {
            return Liveness::Stopping;
        }
        let parts = self.parts();
        if !parts.is_empty() {
            let mut oldest = Duration::ZERO;
            for (label, part) in parts {
                match part.liveness_at(now) {
                    // Shutdown is the process's: once one loop drains, all do.
                    Liveness::Stopping => return Liveness::Stopping,
                    Liveness::Stuck {
                        last_turn_age,
                        limit,
                        ..
                    } => {
                        return Liveness::Stuck {
                            last_turn_age,
                            limit,
                            spreadsheet: Some(label),
                        }
                    }
                    Liveness::Turning { last_turn_age } => oldest = oldest.max(last_turn_age),
                }
            }
            return Liveness::Turning {
                last_turn_age: oldest,
            };
        }
        let turned = self.instant(self.inner.last_turn.load(Ordering::Relaxed));
        let planned = self.instant(self.inner.planned.load(Ordering::Relaxed));
        let attempted = self.inner.api.as_ref().and_then(|a| a.last_attempt());
        // Before the first turn the process is starting: counted from its creation.
        let last = [turned, planned, attempted]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(self.inner.created);
        let age = now.saturating_duration_since(last);
        if age <= self.inner.stale_after {
            Liveness::Turning { last_turn_age: age }
        } else {
            Liveness::Stuck {
                last_turn_age: age,
                limit: self.inner.stale_after,
                spreadsheet: None,
            }
        }
    }

    /// A staleness limit that tolerates a poll that waits out its timeout and retries a
    /// few times: the larger of ten poll intervals, three call timeouts and one minute.
    pub fn limit_for(poll_interval: Duration, call_timeout: Duration) -> Duration {
        (poll_interval * 10)
            .max(call_timeout * 3)
            .max(Duration::from_secs(60))
    }

    /// The poll loop finished a poll (read the queue, whatever it then found).
    pub fn poll_completed(&self) {
        self.poll_completed_at(Instant::now());
    }

    /// [`Health::poll_completed`] with an explicit time, for tests.
    pub fn poll_completed_at(&self, at: Instant) {
        let stamp = self.stamp(at);
        self.inner.last_poll.fetch_max(stamp, Ordering::Relaxed);
        self.inner.last_turn.fetch_max(stamp, Ordering::Relaxed);
    }

    /// The loop holds off its spreadsheet for `reason` (`Some`), or serves it again (`None`).
    pub fn set_paused(&self, reason: Option<String>) {
        if let Ok(mut paused) = self.inner.paused.lock() {
            *paused = reason;
        }
    }

    /// Shutdown began: report unhealthy so a load balancer or probe stops expecting work.
    pub fn set_stopping(&self) {
        self.inner.stopping.store(true, Ordering::Relaxed);
    }

    /// Whether polls succeed (`/readyz`, `/healthz`).
    pub fn verdict(&self) -> Verdict {
        self.verdict_at(Instant::now())
    }

    pub fn verdict_at(&self, now: Instant) -> Verdict {
        if self.inner.stopping.load(Ordering::Relaxed) {
            return Verdict::Stopping;
        }
        let parts = self.parts();
        if !parts.is_empty() {
            let mut oldest = Duration::ZERO;
            for (label, part) in parts {
                match part.verdict_at(now) {
                    Verdict::Healthy { last_poll_age } => oldest = oldest.max(last_poll_age),
                    Verdict::Stopping => return Verdict::Stopping,
                    Verdict::Paused { reason, .. } => {
                        return Verdict::Paused {
                            reason,
                            spreadsheet: Some(label),
                        }
                    }
                    Verdict::Starting { since, .. } => {
                        return Verdict::Starting {
                            since,
                            spreadsheet: Some(label),
                        }
                    }
                    Verdict::Stale {
                        last_poll_age,
                        limit,
                        ..
                    } => {
                        return Verdict::Stale {
                            last_poll_age,
                            limit,
                            spreadsheet: Some(label),
                        }
                    }
                }
            }
            return Verdict::Healthy {
                last_poll_age: oldest,
            };
        }
        let paused = self.inner.paused.lock().ok().and_then(|p| p.clone());
        if let Some(reason) = paused {
            return Verdict::Paused {
                reason,
                spreadsheet: None,
            };
        }
        let stamp = self.inner.last_poll.load(Ordering::Relaxed);
        if stamp == 0 {
            return Verdict::Starting {
                since: now.saturating_duration_since(self.inner.created),
                spreadsheet: None,
            };
        }
        let last = self.inner.created + Duration::from_nanos(stamp - 1);
        let age = now.saturating_duration_since(last);
        // Polls planned further apart than the limit are not stale for that alone.
        let gap = Duration::from_millis(self.inner.gap_ms.load(Ordering::Relaxed));
        let limit = self.inner.stale_after + gap;
        if age <= limit {
            Verdict::Healthy { last_poll_age: age }
        } else {
            Verdict::Stale {
                last_poll_age: age,
                limit,
                spreadsheet: None,
            }
        }
    }

    /// The staleness limit this was made with.
    pub fn stale_after(&self) -> Duration {
        self.inner.stale_after
    }
}

/// Why the metrics endpoint could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr} for --metrics-listen: {source}; pick a free port or another address")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the metrics endpoint stopped: {0}")]
    Serve(#[source] std::io::Error),
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Health,
}

/// The `/metrics`, `/livez`, `/readyz` and `/healthz` (= `/readyz`) routes, for embedding or
/// for testing without a socket.
pub fn router(metrics: Arc<Metrics>, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/livez", get(live_handler))
        .route("/readyz", get(health_handler))
        .route("/healthz", get(health_handler))
        .with_state(AppState { metrics, health })
}

/// Binds `addr` and serves [`router`] until `shutdown` is cancelled.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    serve_listener(listener, metrics, health, shutdown).await
}

/// [`serve`] on a listener bound by the caller (e.g. on port 0 in tests).
pub async fn serve_listener(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /metrics, /livez and /readyz");
    }
    axum::serve(listener, router(metrics, health))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(ServeError::Serve)
}

async fn metrics_handler(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        state.metrics.render(),
    )
        .into_response()
}

async fn health_handler(State(state): State<AppState>) -> Response {
    let verdict = state.health.verdict();
    probe_answer(verdict.is_healthy(), verdict.reason())
}

async fn live_handler(State(state): State<AppState>) -> Response {
    let live = state.health.liveness();
    probe_answer(live.is_live(), live.reason())
}

/// 200 with `ok`, or 503 with why not, as plain text.
fn probe_answer(ok: bool, reason: String) -> Response {
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{reason}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sheets::stats::{ApiMethod, Outcome as ApiOutcome};
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use std::collections::BTreeMap;
    use tower::ServiceExt;

    /// One parsed sample line.
    #[derive(Debug, PartialEq)]
    struct Sample {
        name: String,
        labels: BTreeMap<String, String>,
        value: f64,
    }

    /// A strict reader of the text format: every sample must follow the `# HELP` and
    /// `# TYPE` of its family, and labels are unescaped.
    fn parse(text: &str) -> Vec<Sample> {
        let mut types: BTreeMap<String, String> = BTreeMap::new();
        let mut helps: BTreeMap<String, String> = BTreeMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap();
                assert!(
                    helps.insert(name.into(), help.into()).is_none(),
                    "HELP twice: {name}"
                );
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(helps.contains_key(name), "TYPE before HELP for {name}");
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                types.insert(name.into(), kind.into());
                continue;
            }
            assert!(
                !line.starts_with('#') && !line.is_empty(),
                "stray line {line:?}"
            );
            let name_end = line.find(['{', ' ']).unwrap();
            let name = &line[..name_end];
            let mut labels = BTreeMap::new();
            let mut rest = &line[name_end..];
            if let Some(after) = rest.strip_prefix('{') {
                let mut chars = after.char_indices();
                loop {
                    let (start, c) = chars.next().unwrap();
                    if c == '}' {
                        rest = &after[start + 1..];
                        break;
                    }
                    if c == ',' {
                        continue;
                    }
                    let eq = after[start..].find("=\"").unwrap() + start;
                    let key = after[start..eq].to_string();
                    while chars.next().unwrap().0 < eq + 1 {}
                    let mut value = String::new();
                    loop {
                        match chars.next().unwrap().1 {
                            '\\' => match chars.next().unwrap().1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.insert(key, value);
                }
            }
            let value = rest.trim();
            let value = match value {
                "+Inf" => f64::INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
                })
                .unwrap_or(name);
            assert!(types.contains_key(family), "sample before TYPE: {line}");
            samples.push(Sample {
                name: name.into(),
                labels,
                value,
            });
        }
        samples
    }

    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
    }

    #[test]
    fn a_fresh_registry_shows_every_family_at_zero() {
        let samples = parse(&Metrics::new().render());
        for outcome in ["done", "error", "timeout", "cancelled"] {
            assert_eq!(
                value(
                    &samples,
                    "sheetq_jobs_finished_total",
                    &[("outcome", outcome)]
                ),
                Some(0.0)
            );
        }
        for name in [
            "sheetq_claim_passes_total",
            "sheetq_claim_conflicts_total",
            "sheetq_cancel_requests_total",
            "sheetq_lease_waits_total",
            "sheetq_lease_acquisitions_total",
            "sheetq_api_retries_total",
            "sheetq_throttled_waits_total",
            "sheetq_throttled_wait_seconds_total",
            "sheetq_outbox_depth",
            "sheetq_running_jobs",
            "sheetq_last_successful_poll_timestamp_seconds",
            "sheetq_job_duration_seconds_count",
        ] {
            assert_eq!(value(&samples, name, &[]), Some(0.0), "{name}");
        }
    }

    #[test]
    fn counts_come_back_out_of_the_text() {
        let api = Arc::new(SheetsStats::new());
        let m = Arc::new(Metrics::with_api_stats(Arc::clone(&api)));
        m.claim_pass();
        m.claim_pass();
        m.claim_conflict();
        m.lease_wait();
        m.lease_acquired();
        api.record_request(ApiMethod::ValuesBatchGet, ApiOutcome::Ok);
        api.record_request(ApiMethod::ValuesBatchGet, ApiOutcome::Ok);
        api.record_request(ApiMethod::ValuesBatchGet, ApiOutcome::from_status(429));
        api.record_request(ApiMethod::ValuesBatchUpdate, ApiOutcome::Timeout);
        api.record_retry();
        api.record_throttled();
        api.record_throttled_wait(Duration::from_millis(1500));
        m.set_outbox_depth(3);
        m.poll_succeeded(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        m.job_finished(Outcome::Done, Duration::from_millis(500));
        m.job_finished(Outcome::Done, Duration::from_secs(45));
        m.job_finished(Outcome::Timeout, Duration::from_secs(7200));
        m.job_refused(Refusal::Requester);
        m.job_refused(Refusal::Requester);
        m.job_refused(Refusal::Placeholder);
        let running = m.job_started();

        let s = parse(&m.render());
        assert_eq!(value(&s, "sheetq_claim_passes_total", &[]), Some(2.0));
        let refused = |reason| value(&s, "sheetq_jobs_refused_total", &[("reason", reason)]);
        assert_eq!(refused("requester"), Some(2.0));
        assert_eq!(refused("placeholder"), Some(1.0));
        assert_eq!(
            refused("target"),
            Some(0.0),
            "every reason is shown, counted or not"
        );
        assert_eq!(value(&s, "sheetq_claim_conflicts_total", &[]), Some(1.0));
        assert_eq!(value(&s, "sheetq_lease_waits_total", &[]), Some(1.0));
        assert_eq!(value(&s, "sheetq_lease_acquisitions_total", &[]), Some(1.0));
        let api = |method, status| {
            value(
                &s,
                "sheetq_api_requests_total",
                &[("method", method), ("status", status)],
            )
        };
        assert_eq!(api("values.batchGet", "ok"), Some(2.0));
        assert_eq!(api("values.batchGet", "429"), Some(1.0));
        assert_eq!(api("values.batchUpdate", "timeout"), Some(1.0));
        assert_eq!(value(&s, "sheetq_api_retries_total", &[]), Some(1.0));
        assert_eq!(value(&s, "sheetq_throttled_waits_total", &[]), Some(1.0));
        assert_eq!(
            value(&s, "sheetq_throttled_wait_seconds_total", &[]),
            Some(1.5)
        );
        assert_eq!(value(&s, "sheetq_outbox_depth", &[]), Some(3.0));
        assert_eq!(value(&s, "sheetq_running_jobs", &[]), Some(1.0));
        assert_eq!(
            value(&s, "sheetq_last_successful_poll_timestamp_seconds", &[]),
            Some(1_700_000_000.0)
        );
        let done = |o| value(&s, "sheetq_jobs_finished_total", &[("outcome", o)]);
        assert_eq!((done("done"), done("timeout")), (Some(2.0), Some(1.0)));

        // Buckets are cumulative: 0.5 s is under le=1, 45 s under le=60, 2 h only in +Inf.
        let bucket = |le| value(&s, "sheetq_job_duration_seconds_bucket", &[("le", le)]);
        assert_eq!(bucket("1"), Some(1.0));
        assert_eq!(bucket("30"), Some(1.0));
        assert_eq!(bucket("60"), Some(2.0));
        assert_eq!(bucket("3600"), Some(2.0));
        assert_eq!(bucket("+Inf"), Some(3.0));
        assert_eq!(
            value(&s, "sheetq_job_duration_seconds_count", &[]),
            Some(3.0)
        );
        assert_eq!(
            value(&s, "sheetq_job_duration_seconds_sum", &[]),
            Some(7245.5)
        );
        drop(running);
    }

    #[test]
    fn a_running_job_leaves_the_gauge_however_it_ends() {
        let m = Arc::new(Metrics::new());
        let a = m.job_started();
        let b = m.job_started();
        assert_eq!(m.running_jobs(), 2);
        a.finish(Outcome::Error);
        assert_eq!(m.running_jobs(), 1);
        drop(b);
        assert_eq!(m.running_jobs(), 0);
        assert_eq!(m.jobs_finished(Outcome::Error), 1);
        assert_eq!(
            m.jobs_finished(Outcome::Cancelled),
            1,
            "an unfinished job that is dropped was cancelled"
        );
    }

    #[test]
    fn label_values_are_escaped_and_read_back_intact() {
        let odd = "we\"ird\\method\nname";
        let mut text = String::new();
        family(&mut text, "sheetq_x_total", "counter", "odd\nhelp \\ text");
        sample(
            &mut text,
            "sheetq_x_total",
            &[("method", odd), ("status", "ok")],
            1u64,
        );
        assert!(text.contains(r#"method="we\"ird\\method\nname""#), "{text}");
        assert!(
            text.contains(r"# HELP sheetq_x_total odd\nhelp \\ text"),
            "{text}"
        );
        let s = parse(&text);
        assert_eq!(
            value(&s, "sheetq_x_total", &[("method", odd), ("status", "ok")]),
            Some(1.0)
        );
    }

    #[test]
    fn health_follows_the_poll_loop() {
        let h = Health::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(matches!(h.verdict_at(t0), Verdict::Starting { .. }));
        h.poll_completed_at(t0);
        assert!(h.verdict_at(t0 + Duration::from_secs(59)).is_healthy());
        let late = h.verdict_at(t0 + Duration::from_secs(61));
        assert!(matches!(late, Verdict::Stale { .. }), "{late:?}");
        assert!(late.reason().contains("limit 1m"), "{}", late.reason());
        h.poll_completed_at(t0 + Duration::from_secs(61));
        assert!(h.verdict_at(t0 + Duration::from_secs(62)).is_healthy());
        h.set_stopping();
        assert_eq!(
            h.verdict_at(t0 + Duration::from_secs(62)),
            Verdict::Stopping
        );
    }

    #[test]
    fn liveness_follows_the_loop_and_the_api_client_not_the_api() {
        let api = Arc::new(SheetsStats::new());
        let h = Health::with_api_stats(Duration::from_secs(60), Arc::clone(&api));
        let t0 = Instant::now();
        assert!(h.liveness_at(t0).is_live(), "starting counts from creation");
        h.loop_turned_at(t0);
        // Google is down: no poll completes, but the loop keeps turning.
        h.loop_turned_at(t0 + Duration::from_secs(50));
        let at = t0 + Duration::from_secs(100);
        assert!(matches!(h.verdict_at(at), Verdict::Starting { .. }));
        assert!(h.liveness_at(at).is_live(), "an outage is not a stuck loop");
        let stuck = h.liveness_at(t0 + Duration::from_secs(111));
        assert!(matches!(stuck, Liveness::Stuck { .. }), "{stuck:?}");
        assert!(stuck.reason().contains("limit 1m"), "{}", stuck.reason());
        // An attempt the client ended (a pass waiting through its retries) is progress.
        api.record_request(
            crate::sheets::stats::ApiMethod::ALL[0],
            crate::sheets::stats::Outcome::ALL[0],
        );
        assert!(h.liveness().is_live());
        h.set_stopping();
        assert_eq!(
            h.liveness_at(t0 + Duration::from_secs(1000)),
            Liveness::Stopping
        );
        assert!(Liveness::Stopping.is_live(), "a drain is not restarted");
    }

    #[test]
    fn several_spreadsheets_show_their_own_counts_each_labelled_under_one_help() {
        let process = Metrics::new();
        let (api_a, api_b) = (Arc::new(SheetsStats::new()), Arc::new(SheetsStats::new()));
        let a = process.spreadsheet("経理", Some(Arc::clone(&api_a)));
        let b = process.spreadsheet("営業", Some(Arc::clone(&api_b)));
        a.job_finished(Outcome::Done, Duration::from_secs(3));
        a.job_finished(Outcome::Done, Duration::from_secs(4));
        b.job_finished(Outcome::Error, Duration::from_secs(100));
        b.set_outbox_depth(2);
        let _running = b.job_started();
        api_a.record_request(ApiMethod::ValuesBatchGet, ApiOutcome::Ok);
        api_b.record_throttled_wait(Duration::from_secs(2));

        // parse() refuses a family whose HELP comes twice.
        let s = parse(&process.render());
        let of = |name: &str, label: &str, more: &[(&str, &str)]| {
            let mut labels = vec![("spreadsheet", label)];
            labels.extend_from_slice(more);
            value(&s, name, &labels)
        };
        let done = [("outcome", "done")];
        assert_eq!(of("sheetq_jobs_finished_total", "経理", &done), Some(2.0));
        assert_eq!(of("sheetq_jobs_finished_total", "営業", &done), Some(0.0));
        assert_eq!(
            of(
                "sheetq_jobs_finished_total",
                "営業",
                &[("outcome", "error")]
            ),
            Some(1.0)
        );
        assert_eq!(of("sheetq_outbox_depth", "営業", &[]), Some(2.0));
        assert_eq!(of("sheetq_running_jobs", "営業", &[]), Some(1.0));
        assert_eq!(of("sheetq_running_jobs", "経理", &[]), Some(0.0));
        let reads = [("method", "values.batchGet"), ("status", "ok")];
        assert_eq!(of("sheetq_api_requests_total", "経理", &reads), Some(1.0));
        assert_eq!(of("sheetq_api_requests_total", "営業", &reads), None);
        assert_eq!(
            of("sheetq_throttled_wait_seconds_total", "営業", &[]),
            Some(2.0)
        );
        assert_eq!(
            of(
                "sheetq_job_duration_seconds_bucket",
                "営業",
                &[("le", "+Inf")]
            ),
            Some(1.0)
        );
        assert_eq!(
            of("sheetq_job_duration_seconds_count", "経理", &[]),
            Some(2.0)
        );
        assert!(
            s.iter().all(|x| x.labels.contains_key("spreadsheet")),
            "no unlabelled sample beside the spreadsheets' own: {:?}",
            s.iter().find(|x| !x.labels.contains_key("spreadsheet"))
        );
    }

    #[test]
    fn a_loop_stuck_on_one_spreadsheet_is_named_while_the_others_turn() {
        let process = Health::new(Duration::from_secs(60));
        let api_a = Arc::new(SheetsStats::new());
        let a = process.spreadsheet("経理", Duration::from_secs(60), Some(Arc::clone(&api_a)));
        let b = process.spreadsheet("営業", Duration::from_secs(60), None);
        let t0 = Instant::now();
        a.poll_completed_at(t0);
        let at = t0 + Duration::from_secs(30);
        assert!(
            matches!(process.verdict_at(at), Verdict::Starting { spreadsheet: Some(ref l), .. } if l == "営業"),
            "not ready until every spreadsheet has been polled: {:?}",
            process.verdict_at(at)
        );
        b.poll_completed_at(t0);
        assert!(process.verdict_at(at).is_healthy());
        assert!(process.liveness_at(at).is_live());

        // 営業's loop wedges; 経理's turns on, and its client's attempts count for it only.
        a.poll_completed_at(t0 + Duration::from_secs(100));
        api_a.record_request(ApiMethod::ValuesBatchGet, ApiOutcome::Ok);
        let later = t0 + Duration::from_secs(110);
        let live = process.liveness_at(later);
        assert!(
            !live.is_live(),
            "a wedged loop is not hidden by another's turns: {live:?}"
        );
        assert!(
            live.reason().contains("of spreadsheet \"営業\""),
            "{}",
            live.reason()
        );
        assert!(a.liveness_at(later).is_live());
        let ready = process.verdict_at(later);
        assert!(ready.reason().contains("営業"), "{}", ready.reason());

        b.set_stopping();
        assert_eq!(
            process.liveness_at(later),
            Liveness::Stopping,
            "the drain is the process's"
        );
    }

    #[test]
    fn a_loop_waiting_its_turn_past_the_limit_is_live_and_ready_until_the_turn_is_late() {
        // Twelve daemons share the account at poll_interval = 10 s: this one polls every
        // 120 s, longer than the limit of 100 s.
        let h = Health::new(Duration::from_secs(100));
        let t0 = Instant::now();
        let period = Duration::from_secs(120);
        h.loop_turned_at(t0);
        h.turn_planned(t0 + period, period);
        assert!(h.liveness_at(t0 + Duration::from_secs(119)).is_live());
        assert!(
            h.liveness_at(t0 + Duration::from_secs(219)).is_live(),
            "the limit counts from the planned turn"
        );
        let late = h.liveness_at(t0 + Duration::from_secs(221));
        assert!(!late.is_live(), "a turn that never came is stuck: {late:?}");
        // Nor is it unready while its polls complete a turn apart, also when the loop plans
        // again before the turn (a job finished): the period, not the time left, counts.
        h.poll_completed_at(t0);
        h.turn_planned(t0 + period, period);
        assert!(h.verdict_at(t0 + Duration::from_secs(210)).is_healthy());
        assert!(!h.verdict_at(t0 + Duration::from_secs(225)).is_healthy());
        // A sooner plan, polls every 5 s again, replaces the later one.
        let busy = Duration::from_secs(5);
        h.turn_planned(t0 + busy, busy);
        assert!(!h.liveness_at(t0 + Duration::from_secs(110)).is_live());
        assert!(!h.verdict_at(t0 + Duration::from_secs(110)).is_healthy());
    }

    #[test]
    fn the_limit_leaves_room_for_slow_polls() {
        let limit = Health::limit_for(Duration::from_secs(2), Duration::from_secs(30));
        assert_eq!(limit, Duration::from_secs(90));
        let limit = Health::limit_for(Duration::from_secs(1), Duration::from_secs(5));
        assert_eq!(limit, Duration::from_secs(60));
    }

    async fn get(router: Router, path: &str) -> (StatusCode, String, Option<String>) {
        let response = router
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            String::from_utf8(body.to_vec()).unwrap(),
            content_type,
        )
    }

    #[tokio::test]
    async fn the_routes_answer_as_a_probe_and_a_scraper_expect() {
        let metrics = Arc::new(Metrics::new());
        metrics.lease_acquired();
        let health = Health::new(Duration::from_secs(60));
        let app = router(Arc::clone(&metrics), health.clone());

        let (status, body, _) = get(app.clone(), "/healthz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.starts_with("starting"), "{body}");
        let (status, body, _) = get(app.clone(), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let (status, body, _) = get(app.clone(), "/livez").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));

        health.poll_completed();
        for path in ["/healthz", "/readyz", "/livez"] {
            let (status, body, _) = get(app.clone(), path).await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"), "{path}");
        }

        let (status, body, content_type) = get(app.clone(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some(CONTENT_TYPE));
        assert_eq!(
            value(&parse(&body), "sheetq_lease_acquisitions_total", &[]),
            Some(1.0)
        );

        let (status, _, _) = get(app, "/nothing").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn serve_answers_on_a_real_socket_and_stops_when_told() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let health = Health::new(Duration::from_secs(60));
        health.poll_completed();
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve_listener(
            listener,
            Arc::new(Metrics::new()),
            health,
            shutdown.clone(),
        ));

        // A bare HTTP/1.1 exchange: no client crate needed to see what a probe sees.
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("ok\n"), "{reply}");

        shutdown.cancel();
        let result = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stops within 10 s of cancellation")
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
    }

    #[tokio::test]
    async fn a_taken_port_is_named_in_the_error() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = serve(
            addr,
            Arc::new(Metrics::new()),
            Health::new(Duration::from_secs(1)),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
