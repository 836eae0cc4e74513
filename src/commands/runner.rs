//! Running prepared jobs: the built-ins in process, `exec` commands through
//! the `process` module, the heavy-job gate, the timeout clock and cancellation, and the
//! [`Outcome`] the daemon writes back.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;
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
    /// From [`Runner::run`] being called to the end, including a wait for the heavy gate.
    pub duration: Duration,
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
    #[instrument(skip_all, fields(job.id = ?job.job_id(), command = %job.command(), target = ?job.spec().target))]
    pub async fn run(&self, job: PreparedJob, cancel: CancellationToken) -> Outcome {
        self.run_logged(job, cancel, &Capture::none()).await
    }

    /// [`Runner::run`], with what the job prints going to `log` as it comes (an `exec`
    /// job's stdout and stderr merged; a built-in's message once it ends).
    pub async fn run_logged(
        &self,
        job: PreparedJob,
        cancel: CancellationToken,
        log: &Capture,
    ) -> Outcome {
        let started = Instant::now();
        let deadline = started + job.timeout();
        let mut outcome = self.run_until(&job, deadline, &cancel, log).await;
        if !matches!(job.plan(), Plan::Exec { .. }) && !outcome.message.is_empty() {
            log.push(format!("{}\n", outcome.message).as_bytes());
        }
        log.finish();
        outcome.duration = started.elapsed();
        info!(
            status = ?outcome.status,
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
                duration: Duration::ZERO,
            };
        }
    }
    Outcome {
        status: OutcomeStatus::Done,
        message: limit_message(&serde_json::to_string(&args).unwrap_or_default()),
        url: None,
        continue_args,
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
        duration: Duration::ZERO,
    }
}
