//! Running prepared jobs: the built-ins in process, `exec` commands through
//! the `process` module, the heavy-job gate, the timeout clock and cancellation, and the
//! [`Outcome`] the daemon writes back.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::{watch, Semaphore};
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{info, instrument};

use super::output::limit_message;
use super::process::{self, Spawner};
use super::{Plan, PreparedJob, Registry, CELL_MAX_CHARS};
use crate::joblog::Capture;
use crate::panel::catalog::PANELS_PER_STEP;

/// How a job ended; the daemon maps it to the 状態 word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeStatus {
    /// 完了: exit code 0 / the built-in finished.
    Done,
    /// エラー: non-zero exit, a signal, could not start, or a malformed result.
    Failed,
    /// タイムアウト: the command's timeout passed; its process group was stopped.
    TimedOut,
    /// The daemon cancelled the job (shutdown after its grace period); its process group
    /// was stopped. The daemon decides what the row shows.
    Cancelled,
}

/// What a job produced, ready for the queue and panel rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub status: OutcomeStatus,
    /// For メッセージ; at most [`super::output::MESSAGE_MAX_CHARS`] characters.
    pub message: String,
    /// For 結果URL.
    pub url: Option<String>,
    /// Args of the next step, when the command asked to continue (only on `Done`). The
    /// daemon appends the continuation row.
    pub continue_args: Option<Map<String, Value>>,
    /// The exit code of an `exec` command that exited (for `retry_on`).
    pub exit_code: Option<i32>,
    /// Attempts made, the last included (more than 1 with the command's `retries`).
    pub attempts: u32,
    /// From [`Runner::run`] being called to the end, including a wait for the heavy gate.
    pub duration: Duration,
}

/// A job between two attempts: what メッセージ and the panel show while it waits for its
/// next attempt and while that attempt runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNote {
    /// The retry about to be made (1-based).
    pub retry: u32,
    /// How many retries the command has.
    pub retries: u32,
    /// The failed attempt's メッセージ.
    pub last: String,
    /// The wait before the retry.
    pub delay: Duration,
}

pub use crate::queue::{is_retry_note, RETRY_NOTE_PREFIX};

impl RetryNote {
    /// 「再試行 2/3: <last message> (30 秒後)」: shown while the job waits.
    pub fn waiting(&self) -> String {
        let secs = self.delay.as_secs() + u64::from(self.delay.subsec_nanos() > 0);
        limit_message(&format!(
            "{RETRY_NOTE_PREFIX}{}/{}: {} ({secs} 秒後)",
            self.retry,
            self.retries,
            one_line(&self.last)
        ))
    }

    /// 「再試行 2/3 実行中: <last message>」: shown while the retry runs.
    pub fn running(&self) -> String {
        limit_message(&format!(
            "{RETRY_NOTE_PREFIX}{}/{} 実行中: {}",
            self.retry,
            self.retries,
            one_line(&self.last)
        ))
    }
}

/// A message on one line, cut to about 200 characters (a note carries the gist, the log
/// the rest).
fn one_line(text: &str) -> String {
    super::output::one_line(text, 201)
}

/// How a job's retries are told and ended: the notes for the daemon to show, and a token
/// that ends retrying (cancelled when the daemon stops).
pub struct Retrying {
    pub notes: watch::Sender<Option<String>>,
    pub stop: CancellationToken,
    /// Asked right before each retry starts: whether a request to stop the job stands now
    /// (one read of its row's 中止要求, made after the wait): a stop written a moment ago,
    /// before any poll saw it, still keeps the next attempt from starting.
    pub asked_to_stop: Option<StopCheck>,
}

/// Whether a stop has been asked for the job, read afresh: `true` ends its retries
/// (キャンセル). A read that fails answers `false`: the daemon's polls still see the request.
pub type StopCheck = Box<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> + Send + Sync,
>;

impl std::fmt::Debug for Retrying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retrying")
            .field("stop", &self.stop)
            .field("asked_to_stop", &self.asked_to_stop.is_some())
            .finish()
    }
}

impl Retrying {
    /// Notes nobody reads, retries nothing ends.
    pub fn unwatched() -> Self {
        Self {
            notes: watch::channel(None).0,
            stop: CancellationToken::new(),
            asked_to_stop: None,
        }
    }
}

/// A failed attempt's outcome, standing as the job's when the daemon stops before the next.
fn stopped_retrying(last: Outcome) -> Outcome {
    Outcome {
        message: limit_message(&format!(
            "{} (sheetq の停止のため再試行を打ち切りました)",
            last.message
        )),
        ..last
    }
}

/// The outcome of a job cancelled while it waited for a retry: the failed attempt's message,
/// for the daemon to say who stopped it.
fn outcome_cancelled_waiting(last: Outcome) -> Outcome {
    Outcome {
        status: OutcomeStatus::Cancelled,
        url: None,
        continue_args: None,
        exit_code: None,
        attempts: 1,
        ..last
    }
}

/// Runs prepared jobs. Cheap to clone; clones share the heavy-job gate and the spawner
/// thread, so one runner (and its clones) serves one daemon, on one tokio runtime.
#[derive(Debug, Clone)]
pub struct Runner {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// One permit: heavy jobs run one at a time whatever the free slots (shared by the
    /// runners of one process, [`Runner::sharing_gate`]).
    heavy: Arc<Semaphore>,
    /// Started on the first `exec` job, from inside the runtime that runs the jobs.
    spawner: OnceLock<Spawner>,
    /// What runs the panel jobs; set by the daemon, which owns the spreadsheet client.
    panels: OnceLock<Arc<dyn PanelOpener>>,
}

/// Creates or shows panels for the built-in `sheetq.panels` jobs. The daemon implements it
/// with its spreadsheet client; the runner only knows this much of it.
#[async_trait::async_trait]
pub trait PanelOpener: Send + Sync + std::fmt::Debug {
    /// Makes the panels of `labels` exist and be visible; says what it did, or why not.
    async fn open(&self, labels: &[String]) -> Result<Opened, String>;
}

/// What a panel job did: its メッセージ and 結果URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub message: String,
    pub url: Option<String>,
}

impl Runner {
    pub fn new(_registry: &Registry) -> Runner {
        Runner {
            inner: Arc::new(Inner {
                heavy: Arc::new(Semaphore::new(1)),
                spawner: OnceLock::new(),
                panels: OnceLock::new(),
            }),
        }
    }

    /// A runner of its own (for another spreadsheet's panel jobs) that shares this one's
    /// heavy-job gate: a process runs one heavy job at a time, whatever it serves.
    pub fn sharing_gate(&self) -> Runner {
        Runner {
            inner: Arc::new(Inner {
                heavy: Arc::clone(&self.inner.heavy),
                spawner: OnceLock::new(),
                panels: OnceLock::new(),
            }),
        }
    }

    /// Gives this runner (and its clones) what runs panel jobs; the first call wins.
    pub fn set_panel_opener(&self, opener: Arc<dyn PanelOpener>) {
        let _ = self.inner.panels.set(opener);
    }

    /// Runs `job` to its end and says how it went. Never panics and never returns early
    /// without stopping what it started: on timeout or cancellation the command's whole
    /// process group is stopped (SIGTERM, then SIGKILL after `kill_grace`).
    ///
    /// The timeout clock starts here, not when the command starts, so that a heavy job
    /// waiting for the gate still ends before the sheet's `stale_after` would time it out.
    #[instrument(skip_all, fields(job.id = ?job.job_id(), command = %crate::sheet_text::Logged(job.command()), target = %crate::sheet_text::Logged(&job.spec().target)))]
    pub async fn run(&self, job: PreparedJob, cancel: CancellationToken) -> Outcome {
        self.run_logged(job, cancel, &Capture::none(), &Retrying::unwatched())
            .await
    }

    /// [`Runner::run`], with what the job prints going to `log` as it comes (an `exec`
    /// job's stdout and stderr merged; a built-in's message once it ends), and its
    /// command's `retries`: an attempt that ends in an outcome of `retry_on` is tried again
    /// after a full-jitter wait on this process's monotonic clock, each attempt with its own
    /// timeout. Before each wait, and as the next attempt starts, `retrying.notes` gets the
    /// text メッセージ shows meanwhile ([`RetryNote`]). The outcome is the last attempt's; a
    /// cancel ends the retries (キャンセル), and so does `retrying.stop` (the daemon stopping:
    /// the last attempt's outcome stands, saying no retry followed).
    pub async fn run_logged(
        &self,
        job: PreparedJob,
        cancel: CancellationToken,
        log: &Capture,
        retrying: &Retrying,
    ) -> Outcome {
        let notes = &retrying.notes;
        let started = Instant::now();
        let retry = &job.def().retry;
        let policy = retry.policy();
        let mut attempt = 1;
        let mut outcome = loop {
            let deadline = Instant::now() + job.timeout();
            let outcome = self.run_until(&job, deadline, &cancel, log).await;
            if !matches!(job.plan(), Plan::Exec { .. }) && !outcome.message.is_empty() {
                log.push(format!("{}\n", outcome.message).as_bytes());
            }
            if attempt > retry.retries || !retry.retries_on(outcome.status, outcome.exit_code) {
                break outcome;
            }
            if retrying.stop.is_cancelled() {
                break stopped_retrying(outcome);
            }
            let note = RetryNote {
                retry: attempt,
                retries: retry.retries,
                last: outcome.message.clone(),
                delay: policy.delay(attempt, &mut rand::thread_rng()),
            };
            info!(attempt, status = ?outcome.status, delay_ms = note.delay.as_millis() as u64, "attempt failed; trying again after the wait");
            log.push(format!("\n--- {} ---\n", note.waiting()).as_bytes());
            notes.send_replace(Some(note.waiting()));
            tokio::select! {
                _ = sleep(note.delay) => {}
                _ = cancel.cancelled() => break outcome_cancelled_waiting(outcome),
                _ = retrying.stop.cancelled() => break stopped_retrying(outcome),
            }
            // A stop is final: one written since the last poll keeps the retry from starting.
            if let Some(check) = &retrying.asked_to_stop {
                let asked = tokio::select! {
                    asked = check() => asked,
                    _ = cancel.cancelled() => true,
                };
                if asked || cancel.is_cancelled() {
                    info!(attempt, "a stop was asked for; no retry starts");
                    break outcome_cancelled_waiting(outcome);
                }
            }
            notes.send_replace(Some(note.running()));
            attempt += 1;
        };
        log.finish();
        if attempt > 1
            && matches!(
                outcome.status,
                OutcomeStatus::Failed | OutcomeStatus::TimedOut
            )
        {
            outcome.message = limit_message(&format!("{} (試行 {attempt} 回)", outcome.message));
        }
        outcome.duration = started.elapsed();
        info!(
            status = ?outcome.status,
            attempts = attempt,
            duration_ms = outcome.duration.as_millis() as u64,
            continues = outcome.continue_args.is_some(),
            "job finished"
        );
        outcome
    }

    async fn run_until(
        &self,
        job: &PreparedJob,
        deadline: Instant,
        cancel: &CancellationToken,
        log: &Capture,
    ) -> Outcome {
        if cancel.is_cancelled() {
            return cancelled("");
        }
        let _permit = if job.is_heavy() {
            tokio::select! {
                permit = self.inner.heavy.acquire() => permit.ok(),
                _ = cancel.cancelled() => return cancelled(""),
                _ = sleep_until(deadline) => return Outcome {
                    status: OutcomeStatus::TimedOut,
                    message: format!(
                        "timed out after {} waiting for another heavy job to finish; it never started",
                        humantime::format_duration(job.timeout())
                    ),
                    url: None,
                    continue_args: None,
                    exit_code: None,
                    attempts: 1,
                    duration: Duration::ZERO,
                },
            }
        } else {
            None
        };
        match job.plan() {
            Plan::Sleep(d) => run_sleep(*d, deadline, job, cancel).await,
            Plan::Echo => run_echo(job),
            Plan::Panels(labels) => {
                let Some(opener) = self.inner.panels.get() else {
                    return failed("panel jobs need the daemon: this runner cannot create panels");
                };
                tokio::select! {
                    outcome = run_panels(opener.as_ref(), labels) => outcome,
                    _ = sleep_until(deadline) => Outcome {
                        status: OutcomeStatus::TimedOut,
                        message: format!(
                            "timed out after {} creating panels",
                            humantime::format_duration(job.timeout())
                        ),
                        url: None,
                        continue_args: None,
                        exit_code: None,
                        attempts: 1,
                        duration: Duration::ZERO,
                    },
                    _ = cancel.cancelled() => cancelled(""),
                }
            }
            Plan::Exec { argv } => match self.spawner() {
                Ok(spawner) => process::run_exec(spawner, job, argv, deadline, cancel, log).await,
                Err(e) => Outcome {
                    status: OutcomeStatus::Failed,
                    message: format!("could not start a process: {e}"),
                    url: None,
                    continue_args: None,
                    exit_code: None,
                    attempts: 1,
                    duration: Duration::ZERO,
                },
            },
        }
    }

    fn spawner(&self) -> std::io::Result<&Spawner> {
        if let Some(s) = self.inner.spawner.get() {
            return Ok(s);
        }
        let started = Spawner::start(tokio::runtime::Handle::current())?;
        // If another job raced us, ours is dropped and its thread ends at once.
        let _ = self.inner.spawner.set(started);
        self.inner
            .spawner
            .get()
            .ok_or_else(|| std::io::Error::other("spawner was not kept"))
    }
}

/// Opens the first [`PANELS_PER_STEP`] panels of `labels`; the rest become the next step's
/// args, so a big batch of ticks proceeds through the queue a step at a time.
async fn run_panels(opener: &dyn PanelOpener, labels: &[String]) -> Outcome {
    let (now, later) = labels.split_at(labels.len().min(PANELS_PER_STEP));
    match opener.open(now).await {
        Ok(opened) => Outcome {
            status: OutcomeStatus::Done,
            message: limit_message(&opened.message),
            url: opened.url,
            continue_args: (!later.is_empty()).then(|| {
                let mut next = Map::new();
                next.insert("open".into(), Value::from(later.to_vec()));
                next
            }),
            exit_code: None,
            attempts: 1,
            duration: Duration::ZERO,
        },
        Err(message) => failed(&message),
    }
}

fn failed(message: &str) -> Outcome {
    Outcome {
        status: OutcomeStatus::Failed,
        message: limit_message(message),
        url: None,
        continue_args: None,
        exit_code: None,
        attempts: 1,
        duration: Duration::ZERO,
    }
}

async fn run_sleep(
    d: Duration,
    deadline: Instant,
    job: &PreparedJob,
    cancel: &CancellationToken,
) -> Outcome {
    tokio::select! {
        _ = sleep(d) => Outcome {
            status: OutcomeStatus::Done,
            message: format!("slept {}", humantime::format_duration(d)),
            url: None,
            continue_args: None,
            exit_code: None,
            attempts: 1,
            duration: Duration::ZERO,
        },
        _ = sleep_until(deadline) => Outcome {
            status: OutcomeStatus::TimedOut,
            message: format!(
                "timed out after {} (commands.{}.timeout)",
                humantime::format_duration(job.timeout()),
                job.command()
            ),
            url: None,
            continue_args: None,
            exit_code: None,
            attempts: 1,
            duration: Duration::ZERO,
        },
        _ = cancel.cancelled() => cancelled(""),
    }
}

/// Returns the args as the message; `args.continue` (an object) is handed back as the
/// next step's args, so the whole continuation path can be smoke-tested without a
/// program. Each step unwraps one level, so a chain always ends.
fn run_echo(job: &PreparedJob) -> Outcome {
    let args = Value::Object(job.args().clone());
    let continue_args = match job.args().get("continue") {
        Some(Value::Object(next)) => Some(next.clone()),
        _ => None,
    };
    if let Some(next) = &continue_args {
        let size = serde_json::to_string(next).map(|s| s.chars().count());
        if size.map_or(true, |n| n > CELL_MAX_CHARS) {
            return Outcome {
                status: OutcomeStatus::Failed,
                message: format!(
                    "args.continue is longer than a cell holds ({CELL_MAX_CHARS} characters as JSON)"
                ),
                url: None,
                continue_args: None,
                exit_code: None,
                attempts: 1,
                duration: Duration::ZERO,
            };
        }
    }
    Outcome {
        status: OutcomeStatus::Done,
        message: limit_message(&serde_json::to_string(&args).unwrap_or_default()),
        url: None,
        continue_args,
        exit_code: None,
        attempts: 1,
        duration: Duration::ZERO,
    }
}

/// A job stopped through its cancellation token (asked to, or at shutdown): the daemon
/// writes why; `printed` is what the job printed last, if anything.
fn cancelled(printed: &str) -> Outcome {
    Outcome {
        status: OutcomeStatus::Cancelled,
        message: printed.to_string(),
        url: None,
        continue_args: None,
        exit_code: None,
        attempts: 1,
        duration: Duration::ZERO,
    }
}
