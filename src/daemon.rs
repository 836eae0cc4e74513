//! The daemon: the poll loop that claims queue rows under the sheet lease, runs them in
//! parallel slots, and writes results back (docs/design.md §2–§4, §6).
//!
//! One task owns all sheet state (the poll loop); jobs run in a `JoinSet` and hand back
//! their outcome. Because only that loop ever claims, it is the local mutex of docs/design.md §2:
//! two claim passes of one process can never overlap. Between processes, the lease cell
//! serialises claim passes, and a per-row compare-and-swap in the commit catches what the
//! lease cannot (a pause longer than its TTL), so a job never runs twice.
//!
//! API cost per docs/design.md §6: an idle poll is one `values.batchGet`; a claim pass adds the lease
//! acquire (which returns the fresh queue) and one commit; the results of every job that
//! finished since the last poll go back in one `values.batchUpdate`, which also carries the
//! heartbeat.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn, Instrument};

use crate::a1;
use crate::claim::ClaimPolicy;
use crate::commands::{JobSpec, Outcome, OutcomeStatus, Registry, Runner};
use crate::config::Config;
use crate::lease::WORKER_SHEET;
use crate::metrics::{self, Health, Metrics, RunningJob};
use crate::notify::Notifier;
use crate::outbox::{Continuation, Finish, FinishedJob, Outbox, OutboxError};
use crate::panel::PanelIndex;
use crate::queue::{self, ColumnMap, QueueRow, WorkerTag, QUEUE_SHEET};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{
    BatchUpdate, Cell, ErrorKind, Filter, GridRange, Precedence, Request, Sheets, SheetsError,
    SpreadsheetMeta, ValueRange,
};
use crate::watch::Watch;
use crate::workers::{self, RunningRef};

use claim_work::ClaimWork;

mod approvals;
mod archive;
mod cancels;
mod claim_pass;
mod claim_work;
mod claims;
mod effects;
mod guards;
mod hold_off;
mod kept_lease;
mod ledger;
mod panel;
mod poll;
mod provenance;
mod schedules;
pub(crate) mod shared;
mod stale;
mod start_pace;
mod writeback;

use poll::Poll;
use shared::{Share, Slots};

/// Why the daemon stopped with an error (retryable API trouble never stops it).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Sheets(#[from] SheetsError),
    #[error(
        "sheet '{0}' is missing from the spreadsheet; run `sheetq init --config FILE` to create it"
    )]
    MissingSheet(String),
    #[error(transparent)]
    Layout(#[from] queue::LayoutError),
    #[error("the spreadsheet's time zone: {0}")]
    TimeZone(#[from] sheet_time::TimeError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    #[error(transparent)]
    WorkerIdInUse(#[from] crate::workers::WorkerIdInUse),
    #[error(
        "'_ワーカー' has {columns} columns, but heartbeat rows now need 10 (A–J: their process, running jobs, account and the daemons they share it with) and it could not be widened; run `sheetq init --config FILE` once to widen it"
    )]
    WorkerSheetTooNarrow { columns: i32 },
    #[error(
        "a function of sheetq.toml limits who may run it (allow) or needs approvals (approvers), but 依頼者 and approvals cannot be trusted on this spreadsheet: {0}. Protect the queue (`sheetq init`), or remove allow and approvers from [[functions]]"
    )]
    AllowOnOpenQueue(String),
}

/// How many reported row problems a daemon remembers, so as not to report them again.
const REPORTED_KEPT: usize = 1000;

/// How many passes in a row may fail on a changed layout before the daemon gives up.
const MAX_LAYOUT_FAILURES: u32 = 3;

/// How long reads cover the whole queue after a person's edit moved rows under our claims
/// or bindings: sorting and tidying come in bursts.
const WHOLE_QUEUE_AFTER_MOVES: StdDuration = StdDuration::from_secs(10 * 60);

impl DaemonError {
    /// Whether the daemon cannot run as set up, whatever it waits for: the spreadsheet not
    /// shared or not found, a sheet or header missing, a worker_id in use. The process ends
    /// with exit code 2 (a service manager must not restart it in a loop).
    pub fn is_setup_problem(&self) -> bool {
        match self {
            DaemonError::Sheets(e) => matches!(e.kind, ErrorKind::Permission | ErrorKind::NotFound),
            DaemonError::MissingSheet(_)
            | DaemonError::Layout(_)
            | DaemonError::TimeZone(_)
            | DaemonError::WorkerIdInUse(_)
            | DaemonError::WorkerSheetTooNarrow { .. }
            | DaemonError::AllowOnOpenQueue(_) => true,
            DaemonError::Outbox(_) => false,
        }
    }

    /// A failure of the API that may pass by itself (429, 5xx, a timeout, a lost reply): the
    /// work is taken up again later, never a reason to end the process.
    pub fn is_transient(&self) -> bool {
        matches!(self, DaemonError::Sheets(e) if e.is_retryable())
    }

    /// Whether the error may come from a person changing the spreadsheet since the last
    /// discovery (a renamed panel makes its range unparsable, an inserted column moves a
    /// header out of the range read, deleted rows put the window past the grid).
    fn may_be_layout_change(&self) -> bool {
        match self {
            DaemonError::Sheets(e) => {
                matches!(e.kind, ErrorKind::InvalidArgument | ErrorKind::NotFound)
            }
            DaemonError::Layout(_) | DaemonError::MissingSheet(_) => true,
            _ => false,
        }
    }
}

/// What a finished run leaves behind, for the caller to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    pub jobs_finished: u64,
    pub claim_conflicts: u64,
    /// Writes through a row binding that found another job's row (repaired).
    pub write_incidents: u64,
    /// Results whose queue row a person deleted: reported, written nowhere in the queue.
    pub results_unplaceable: u64,
    /// Results that could not be written before exit; they stay in the outbox.
    pub results_pending: usize,
}

/// The sheets sheetq works with, found once at start.
#[derive(Debug, Clone)]
struct Layout {
    tz: Tz,
    queue_sheet_id: i32,
    worker_sheet_id: i32,
    /// Letters of the queue sheet's last grid column: reads stay inside the grid.
    last_col: String,
    columns: ColumnMap,
    /// `_ジョブログ`, when it exists with its header and `log_chars` is not 0: claims then
    /// make each job a log row.
    log: Option<crate::joblog::LogLayout>,
}

/// A job this daemon claimed and is running.
#[derive(Debug, Clone)]
struct Claimed {
    row: QueueRow,
    tag: WorkerTag,
    slot: u32,
    /// When the claim was committed (by our clock), as its 開始日時 says.
    started_at: DateTime<Utc>,
    /// For a claim whose commit reply was lost: the lease the commit was made under, and
    /// when it was sent (it settles once that lease is off the cell).
    lost_commit: Option<(String, tokio::time::Instant)>,
    /// Whether the claim commit made the job a `_ジョブログ` row.
    log_row: bool,
    /// Whether the claim commit wrote this job's links (結果URL and the panel's 結果 as
    /// formulas naming its jobId): not when the commit landed on another job's row.
    linked: bool,
    /// Whether the claim commit wrote the panel row's 結果 formula (its panel row was found).
    panel_linked: bool,
    /// The jobId of the continuation step this claim was planned on, when sheetq's mark
    /// vouched for it then (`provenance`): the commit spends the mark, so the verdict is
    /// kept here for the job, and holds only if the claim took that very row.
    continuation: Option<String>,
}

/// Runs the daemon until `shutdown` is cancelled, then drains running jobs within the
/// configured grace period, writes every result it can, and returns.
pub async fn run(
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<RunReport, DaemonError> {
    run_observed(sheets, config, registry, shutdown, Observers::default()).await
}

/// What watches a running daemon: its metrics, the liveness and readiness behind `/livez`,
/// `/readyz` and the systemd watchdog, and the service manager's notification socket.
#[derive(Clone)]
pub struct Observers {
    pub metrics: Arc<Metrics>,
    pub health: Health,
    pub notifier: Arc<Notifier>,
    /// New configs to apply without a restart (`sheetq run` sends one on SIGHUP).
    pub reloads: Option<Reloads>,
}

/// New configs, each with the commands it defines, for a running daemon to take up
/// ([`Reload`]); the latest one counts.
pub type Reloads = tokio::sync::watch::Receiver<Option<Arc<Reload>>>;

/// A config read and checked anew, with its command registry.
#[derive(Debug)]
pub struct Reload {
    pub config: Config,
    pub registry: Registry,
}

/// The settings a running daemon cannot change: its identity, where it keeps state, its
/// client, the size of its slot pool and the sheets' layout. A reload that changes one of
/// them says so and keeps the running value; the rest apply at once.
pub const RESTART_ONLY: [&str; 10] = [
    "spreadsheet_id",
    "credentials",
    "api_base_url",
    "worker_id",
    "state_dir",
    "slots",
    "call_timeout",
    "max_retries",
    "[queue]",
    "[panel]",
];

impl Default for Observers {
    fn default() -> Self {
        Self {
            metrics: Arc::new(Metrics::new()),
            health: Health::new(StdDuration::from_secs(60)),
            notifier: Arc::new(Notifier::disabled()),
            reloads: None,
        }
    }
}

/// [`run`], reporting to `observers`.
pub async fn run_observed(
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    shutdown: CancellationToken,
    observers: Observers,
) -> Result<RunReport, DaemonError> {
    let shared = Shared::alone(&config, &registry);
    start_and_run(sheets, config, registry, shutdown, observers, shared).await
}

/// One spreadsheet a process serves: its client, its config (its part of a
/// `[[spreadsheets]]` config, [`Config::each_spreadsheet`]) and its commands.
pub struct Spreadsheet {
    pub sheets: Arc<dyn Sheets>,
    pub config: Config,
    pub registry: Registry,
}

/// Serves several spreadsheets in one process (docs/design.md §6): a daemon each, each with
/// its own queue, lease, heartbeat and outbox, sharing the process's `slots` job slots (split
/// fairly among the spreadsheets with work to claim), one heavy job at a time, and each
/// service account's request budget (the clients of one account share one budget, split
/// with every other daemon on the account that any of these spreadsheets shows). A problem
/// that one spreadsheet cannot start with (not shared, a sheet or header missing), or one
/// only the operator can fix, stops them all, after their jobs drain: the process exits as
/// it would with one. Anything a person does to a running spreadsheet holds that one off
/// (`hold_off`), and the others keep their pace.
pub async fn run_spreadsheets(
    spreadsheets: Vec<Spreadsheet>,
    slots: usize,
    shutdown: CancellationToken,
    mut observers: Observers,
) -> Result<RunReport, DaemonError> {
    let n = spreadsheets.len();
    observers.notifier.ready_after(n);
    let mut pools = shared::SlotPool::shared(slots, n).into_iter();
    // One share of each account's budget, with a handle per spreadsheet served under it.
    let accounts: Vec<String> = spreadsheets.iter().map(|s| s.sheets.account()).collect();
    let mut shares: HashMap<&str, std::vec::IntoIter<Share>> = HashMap::new();
    for a in &accounts {
        let under = accounts.iter().filter(|b| *b == a).count();
        shares
            .entry(a.as_str())
            .or_insert_with(|| shared::AccountShare::shared(under).into_iter());
    }
    let mut senders = Vec::new();
    // One webhook client and pace per process: two spreadsheets posting to one space share
    // its limit.
    let webhooks: Arc<crate::notifications::sender::Webhooks> = Arc::default();
    let first_runner = spreadsheets.first().map(|s| s.registry.runner());
    let mut tasks = JoinSet::new();
    for (s, account) in spreadsheets.into_iter().zip(&accounts) {
        let (Some(slots), Some(share), Some(runner)) = (
            pools.next(),
            shares.get_mut(account.as_str()).and_then(Iterator::next),
            first_runner.as_ref().map(Runner::sharing_gate),
        ) else {
            continue;
        };
        let (tx, rx) = tokio::sync::watch::channel(None);
        senders.push((s.config.spreadsheet_id.clone(), tx));
        // Each spreadsheet's counters and loop are its own, labelled in /metrics, and /livez
        // names the one whose loop is stuck.
        let label = &s.config.label;
        let api = s.sheets.call_stats();
        let limit = Health::limit_for(s.config.poll_interval, s.config.call_timeout);
        let observers = Observers {
            metrics: observers.metrics.spreadsheet(label, api.clone()),
            health: observers.health.spreadsheet(label, limit, api),
            reloads: Some(rx),
            notifier: observers.notifier.clone(),
        };
        let shared = Shared {
            slots,
            share,
            runner,
            webhooks: Arc::clone(&webhooks),
        };
        let span = tracing::info_span!("spreadsheet", label = %s.config.label);
        let stop = shutdown.clone();
        tasks.spawn(
            async move {
                let result = start_and_run(
                    s.sheets,
                    s.config,
                    s.registry,
                    stop.clone(),
                    observers,
                    shared,
                )
                .await;
                if result.is_err() {
                    // One spreadsheet cannot be served as configured: the process stops.
                    stop.cancel();
                }
                result
            }
            .instrument(span),
        );
    }
    if let Some(reloads) = observers.reloads.take() {
        tokio::spawn(fan_out_reloads(reloads, senders));
    }
    let mut report = RunReport::default();
    let mut fatal = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(r)) => {
                report.jobs_finished += r.jobs_finished;
                report.claim_conflicts += r.claim_conflicts;
                report.write_incidents += r.write_incidents;
                report.results_unplaceable += r.results_unplaceable;
                report.results_pending += r.results_pending;
            }
            Ok(Err(e)) => {
                fatal.get_or_insert(e);
            }
            Err(e) => error!(error = %e, "a spreadsheet's daemon task failed unexpectedly"),
        }
    }
    match fatal {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Hands each spreadsheet's daemon its part of every config reloaded; a reload that adds or
/// removes spreadsheets needs a restart, and says so.
async fn fan_out_reloads(
    mut reloads: Reloads,
    senders: Vec<(String, tokio::sync::watch::Sender<Option<Arc<Reload>>>)>,
) {
    while reloads.changed().await.is_ok() {
        let Some(reload) = reloads.borrow_and_update().clone() else {
            continue;
        };
        let parts = reload.config.each_spreadsheet();
        let same = parts.len() == senders.len()
            && senders
                .iter()
                .all(|(id, _)| parts.iter().any(|c| &c.spreadsheet_id == id));
        if !same {
            warn!("the reloaded config adds or removes spreadsheets, which needs a restart (systemctl restart sheetq); the others take up the rest of it");
        }
        for (id, tx) in &senders {
            if let Some(config) = parts.iter().find(|c| &c.spreadsheet_id == id) {
                let registry = reload.registry.clone().with_catalog(config.catalog.clone());
                let _ = tx.send(Some(Arc::new(Reload {
                    config: config.clone(),
                    registry,
                })));
            }
        }
    }
}

/// Starts one spreadsheet's daemon, again and again while the API fails for a moment, and
/// runs it until `shutdown`.
async fn start_and_run(
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    shutdown: CancellationToken,
    observers: Observers,
    shared: Shared,
) -> Result<RunReport, DaemonError> {
    // Starts that ended the process before, in a row: this one waits its turn first.
    let paced = start_pace::wait_before_start(&config.state_dir);
    if !paced.is_zero() {
        warn!(wait = ?paced, "the last starts failed: waiting before this one, so that restarts cannot spend the account's quota");
        if !wait_to_start(&observers, &shutdown, paced).await {
            return Ok(RunReport::default());
        }
    }
    let result = start_and_run_paced(
        sheets,
        config.clone(),
        registry,
        shutdown,
        observers,
        shared,
    )
    .await;
    if result.is_err() {
        start_pace::failed(&config.state_dir);
    }
    result
}

/// [`start_and_run`] once its pace allows.
async fn start_and_run_paced(
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    shutdown: CancellationToken,
    observers: Observers,
    shared: Shared,
) -> Result<RunReport, DaemonError> {
    let mut failures = 0u32;
    let mut held = None;
    let mut held_since: Option<DateTime<Utc>> = None;
    let mut daemon = loop {
        let started = Daemon::start(
            Arc::clone(&sheets),
            config.clone(),
            registry.clone(),
            observers.clone(),
            shared.clone(),
        );
        let e = tokio::select! {
            _ = shutdown.cancelled() => return Ok(RunReport::default()),
            started = started => match started {
                Ok(daemon) => break daemon,
                Err(e) => e,
            },
        };
        // What only the operator can fix, or a spreadsheet that cannot be served as set up
        // (not shared, a sheet or header missing: exit 2), ends the process.
        if e.ends_the_process() || e.is_setup_problem() {
            return Err(e);
        }
        if !e.is_transient() {
            // Anything else a person can cause (a write refused, a layout changed under the
            // start) is tried again with the hold-off's backoff, not by a restart loop.
            let wait = hold_off::next_wait(held);
            let now = Utc::now();
            let since = held_since.get_or_insert(now);
            held = Some(wait);
            error!(error = %e, retry_in = ?wait, "could not start on this spreadsheet as it is now; trying again with backoff");
            observers.health.set_paused(Some(e.to_string()));
            crate::pause::Pause::new(*since, now, wait, &e.to_string()).leave(&config.state_dir);
            if !wait_to_start(&observers, &shutdown, wait).await {
                return Ok(RunReport::default());
            }
            continue;
        }
        // Google (or the way to it) is down, or refused us for a moment: nothing is wrong
        // with the configuration, so wait and start again rather than exit (docs/design.md
        // §3.1). Start-up steps read afresh and are safe to repeat.
        failures += 1;
        let wait = START_RETRY
            .delay(failures, &mut rand::thread_rng())
            .max(START_RETRY_FLOOR);
        warn!(error = %e, attempt = failures, retry_in = ?wait, "could not start: the API failed for a moment; starting again");
        if !wait_to_start(&observers, &shutdown, wait).await {
            return Ok(RunReport::default());
        }
    };
    if held.is_some() {
        observers.health.set_paused(None);
    }
    daemon.run(shutdown).await
}

/// Waits `wait` before a start, keeping the service manager from timing the start-up out
/// meanwhile; `false` when `shutdown` came first.
async fn wait_to_start(
    observers: &Observers,
    shutdown: &CancellationToken,
    wait: StdDuration,
) -> bool {
    observers.health.loop_turned();
    if let Err(e) = observers.notifier.extend_timeout(wait + START_STEP_LIMIT) {
        debug!(error = %e, "cannot ask the service manager for more time to start");
    }
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    }
}

/// How long one attempt to start may take, as the service manager's start-up timeout is
/// extended while the API fails: the client's retries of one call fit well inside it.
const START_STEP_LIMIT: StdDuration = StdDuration::from_secs(180);

/// Waits between attempts to start while the API fails: backoff with full jitter up to a
/// minute, never given up (only configuration and credential errors end the process).
const START_RETRY: crate::sheets::retry::RetryPolicy = crate::sheets::retry::RetryPolicy {
    max_attempts: u32::MAX,
    initial_delay: StdDuration::from_millis(500),
    max_delay: StdDuration::from_secs(60),
    max_elapsed: StdDuration::MAX,
};
/// The shortest wait between two attempts to start.
const START_RETRY_FLOOR: StdDuration = StdDuration::from_millis(100);

/// One daemon: what the process owns (the client, config and commands, the job slots and
/// their tasks, the outbox, the observers, the claims not yet settled) and, in
/// [`Served`], what it keeps of the spreadsheet it serves.
struct Daemon {
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    runner: Runner,
    /// What runs the panel jobs (it follows a reloaded config).
    panel_opener: Arc<panel::DaemonPanels>,
    outbox: Outbox,
    /// Records the notices of results that landed, and sends them.
    announcer: crate::notifications::sender::Announcer,
    /// The log row each finished job's output landed on (from the write's reply), for the
    /// link in its notices.
    log_rows_landed: HashMap<String, u32>,
    policy: ClaimPolicy,
    jobs: JoinSet<(Claimed, Outcome, RunningJob)>,
    observers: Observers,
    running: HashMap<String, Claimed>,
    /// Claims whose commit reply was lost; their slots stay reserved until the next poll
    /// shows whether the commit applied.
    unsettled: Vec<Claimed>,
    /// Which job each task runs, to free its slot even if the task panics.
    task_jobs: HashMap<tokio::task::Id, String>,
    /// The process's job slots, shared with the other spreadsheets it serves.
    slots: Slots,
    /// The account's request budget as this process splits it.
    share: Share,
    /// Cancels running jobs once the shutdown grace period is over.
    job_cancel: CancellationToken,
    /// Cancelled when shutdown begins: a job waiting for a retry ends with its last
    /// attempt's outcome instead of holding the drain for its wait.
    retries_stop: CancellationToken,
    /// Each running job's own token (a child of `job_cancel`): cancelled when someone asks
    /// to stop that job.
    job_stops: HashMap<String, CancellationToken>,
    /// Who asked to stop which running job, from the row's 中止要求 or a ■ tick: a job that
    /// ends stopped with a request here ends キャンセル, not エラー.
    stop_asked: HashMap<String, crate::cancel::Request>,
    /// 中止要求 texts a job's own read before a retry found (`Retrying::asked_to_stop`), by
    /// jobId: taken up as `stop_asked` when the job ends.
    stops_read: std::sync::Arc<std::sync::Mutex<HashMap<String, String>>>,
    /// Jobs refused before they ran, by jobId, with why: their notices carry none of the
    /// sheet's text (`Notice::withheld`). Lost with a restart, when the notice is a plain one.
    refused_jobs: HashMap<String, crate::commands::Refusal>,
    /// What each running job printed so far, and the capture's version its log row last
    /// showed (refreshed riding the heartbeat's write).
    outputs: HashMap<String, (crate::joblog::Capture, u64)>,
    /// What each running job waiting for (or making) a retry asks メッセージ to show
    /// ([`crate::commands::RetryNote`]); written when it changes, riding the next values
    /// write.
    retry_notes: HashMap<String, tokio::sync::watch::Receiver<Option<String>>>,
    /// Writes of `_ジョブログ` rows waiting for the next values write (results, heartbeats).
    log_writes: Vec<writeback::LogWrite>,
    /// Jobs whose log row takes no more writes: filled, or found gone.
    log_dead: std::collections::HashSet<String>,
    /// The status line last sent to the service manager (sent again only when it changes).
    status_sent: String,
    /// `host pid` of this process, in the heartbeat: one worker_id, one process.
    process: String,
    report: RunReport,
    /// The spreadsheet this daemon serves, and what it has learnt of it.
    served: Served,
}

/// What one daemon keeps of the spreadsheet it serves, apart from what the process owns
/// (slots, runner, outbox, observers): the layout, the queue window and sweep, the archive's
/// pace, panels and the sheet list, the heartbeat, bindings and writes pending, results
/// landed, the account's share, the watch, holds, the lease and its fences.
struct Served {
    layout: Layout,
    /// Whether the last heartbeat carried running jobs' output (the next one goes alone).
    beat_carried_logs: bool,
    /// First sheet row that may hold an unfinished job; rows above are all finished.
    window_start: u32,
    /// Where the next sweep slice of the 状態 column above the window starts.
    sweep_at: u32,
    /// The count of archived rows (`_ワーカー!D1`) as last read: when it grows, rows left the
    /// top of the queue and the window moves up by as many.
    archived_seen: Option<u64>,
    /// When this daemon last looked for rows to archive.
    archived_at: Option<tokio::time::Instant>,
    /// The last look moved a full batch: look again at the next pass.
    archive_more: bool,
    /// No row can be past the retention before this: start-up found no finished row, so
    /// every row that finishes did so after it (this daemon's clock alone decides).
    archive_not_before: Option<tokio::time::Instant>,
    /// The archive's counter showed rows moved at start-up: the archive may hold a row to
    /// put back, so its passes are never put off.
    archived_before: bool,
    /// How many polls the passes have read: the first, which takes in the presses made
    /// while this daemon started, goes ahead of plain calls (sheets::turns).
    polls: u64,
    /// The last read showed [`PRESSING`] presses or more waiting here (rows 待機, ticks)
    /// that this daemon acts on: this spreadsheet's calls go ahead of those on which less
    /// waits (sheets::turns).
    pressing: bool,
    /// The read start-up ended with, for the first pass, when start-up wrote nothing after
    /// it ([`Daemon::recover`]).
    start_poll: Option<Poll>,
    /// Re-discover panels and re-read the whole queue at the next pass (the layout changed).
    relayout: bool,
    /// Panels by target label, as the marker cells of the last poll showed them.
    panels: PanelIndex,
    /// The sheets of the spreadsheet, as last listed (at start, then by heartbeat replies).
    sheet_meta: SpreadsheetMeta,
    /// When the sheet list was last taken in.
    sheets_seen: Option<tokio::time::Instant>,
    /// When idle panels were last looked for.
    idle_checked: Option<tokio::time::Instant>,
    /// Sheet title → sheet id, for turning A1 writes into grid requests of a commit.
    sheet_ids: HashMap<String, i32>,
    last_heartbeat: Option<tokio::time::Instant>,
    /// Bindings of finished (or abandoned) claims, removed with the next batch sent anyway.
    unbind: Vec<i32>,
    /// Writes that set or restore a claim's cells (put-backs, restores, a timeout's cells,
    /// repairs), sent under the next lease we take (docs/design.md §4).
    pending_through: Vec<writeback::Through>,
    /// Results written lately, watched for a repair from an older read undoing them.
    landed: Vec<(FinishedJob, tokio::time::Instant)>,
    /// Per schedule, up to when (this machine's clock) its occurrences were looked at and
    /// queued or found queued; none until the first (docs/design.md §5.4).
    schedules_seen: HashMap<String, DateTime<Utc>>,
    /// When a person's edit last moved rows under our claims or bindings (see
    /// [`Daemon::rows_moved`]).
    rows_moved_at: Option<tokio::time::Instant>,
    /// The service account the calls are made as, in the heartbeat: daemons on one account
    /// split its budget.
    account: String,
    /// How many live daemons share our account, as last applied to the budgets.
    sharing: u32,
    /// Our place among them (0-based, by worker_id): the phase of our polls.
    rank: u32,
    /// How long each heartbeat, the lease and each running row's claim have stood still,
    /// in our own time while our reads succeed: every liveness and staleness decision
    /// (docs/design.md §3.1).
    watch: Watch,
    /// Jobs of other daemons this one timed out, each held (listed in our heartbeat, its
    /// target busy) until it could have ended on its own.
    holds: Vec<Hold>,
    /// When the acquire of the lease we last took was sent (or the commit that renewed it).
    lease_sent: Option<tokio::time::Instant>,
    /// The lease our last commit renewed instead of releasing, since rows were left waiting
    /// that this daemon, alone on the spreadsheet, claims as soon as a job of its ends
    /// (docs/design.md §3): the next claim pass commits under it on its poll's read,
    /// without an acquire.
    kept_lease: Option<kept_lease::KeptLease>,
    /// Until when our commits renew the lease instead of releasing it: a write sent under
    /// it may still be applied (its reply was lost), and no claim may come before that.
    lease_kept_until: Option<tokio::time::Instant>,
    /// Those writes, not sent again until they show on their rows or can no longer apply.
    unsure: Vec<writeback::Through>,
    /// Fences this daemon created or found untracked (docs/design.md §3.1), with when:
    /// removed with a batch sent anyway once the commit each fences can no longer apply.
    fences: Vec<(i32, tokio::time::Instant)>,
    /// When to look next for fences that no daemon tracks (left by a stopped daemon).
    fence_sweep_at: tokio::time::Instant,
    /// Whether the account's budget held the polls back over the last sampled minute
    /// ([`Daemon::watch_budget`]).
    budget_bound: bool,
    /// When a poll last showed work here (rows waiting or ticked, jobs of ours running,
    /// results or follow-ups to write): quiet spreadsheets are polled less often.
    busy_at: tokio::time::Instant,
    /// The row problems already reported ([`Daemon::report_row_problems`]).
    reported: HashSet<String>,
    /// The marks of continuation rows this daemon knows of (`provenance`).
    marks: crate::provenance::Marks,
    /// Whether every live daemon of the spreadsheet calls as an account of our Cloud
    /// project, so that a row without a mark we can see has none (`provenance`).
    marks_seen_by_all: bool,
    /// Cells of people's sheets someone else's protection bars: left out of our writes.
    barred: Vec<crate::protection::Barred>,
    /// The protected ranges as the last metadata read listed them (its sheets, with their
    /// protections): which ▶/承認/■ cells are guarded for whom (`crate::panel::guard`).
    protections: SpreadsheetMeta,
    /// Set while the spreadsheet is held off (`hold_off`).
    held_off: Option<hold_off::HeldOff>,
    /// The last pass's write-back was refused (400): the layout and protections are read
    /// afresh for the next, and a second refusal in a row fails the pass.
    write_refused: bool,
}

/// What one spreadsheet's daemon shares with the others its process serves: the job slots,
/// the account's budget split, and the runner (its heavy-job gate).
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) slots: Slots,
    pub(crate) share: Share,
    pub(crate) runner: Runner,
    /// The webhook client and each URL's pace.
    pub(crate) webhooks: Arc<crate::notifications::sender::Webhooks>,
}

impl Shared {
    /// For a process that serves one spreadsheet.
    fn alone(config: &Config, registry: &Registry) -> Shared {
        Shared {
            slots: Slots::alone(config.slots),
            share: Share::alone(),
            runner: registry.runner(),
            webhooks: Arc::default(),
        }
    }
}

/// A job of another daemon that this one timed out, held until it could have ended.
struct Hold {
    job: RunningRef,
    /// The daemon that ran it (its ワーカー tag's id; empty for a claim without a tag).
    daemon: String,
    since: tokio::time::Instant,
    until: tokio::time::Instant,
}

/// The claim rules' timing from `config`.
fn claim_policy(config: &Config) -> ClaimPolicy {
    ClaimPolicy {
        stale_after: chrono::Duration::from_std(config.stale_after)
            .unwrap_or(chrono::Duration::minutes(15)),
        dead_after: chrono::Duration::from_std(config.dead_after)
            .unwrap_or(chrono::Duration::minutes(2)),
    }
}

/// The next config to take up; pending forever without a source of reloads (or once the
/// sender is gone).
async fn next_reload(reloads: &mut Option<Reloads>) -> Arc<Reload> {
    if let Some(rx) = reloads {
        while rx.changed().await.is_ok() {
            if let Some(reload) = rx.borrow_and_update().clone() {
                return reload;
            }
        }
    }
    *reloads = None;
    std::future::pending().await
}

/// How long to wait between polls of a spreadsheet that has been `quiet_for` without work:
/// `poll_interval` while it has work and for a while after, then a tenth of the quiet time,
/// up to `longest` (`idle_poll_interval`). A poll that sees work brings it back to
/// `poll_interval` at once.
fn pace(quiet_for: StdDuration, poll_interval: StdDuration, longest: StdDuration) -> StdDuration {
    (quiet_for / 10).clamp(poll_interval, longest.max(poll_interval))
}

/// The period of one daemon's polls when `sharing` daemons of its account take turns, each
/// at its own phase: `pace` × `sharing`. A quiet spreadsheet's spacing ([`pace`]) never
/// stretches it past what the turns take at `poll_interval`, or `heartbeat_interval` if that
/// is longer: a heartbeat goes out with a poll, and the other daemons judge liveness by it.
fn poll_period(
    pace: StdDuration,
    poll_interval: StdDuration,
    heartbeat_interval: StdDuration,
    sharing: u32,
) -> StdDuration {
    let n = sharing.max(1);
    (pace * n).min((poll_interval * n).max(heartbeat_interval))
}

/// How many of the results that landed in the last minute a heartbeat lists as done.
const LANDED_LISTED: usize = 100;

impl Daemon {
    async fn start(
        sheets: Arc<dyn Sheets>,
        config: Config,
        registry: Registry,
        observers: Observers,
        shared: Shared,
    ) -> Result<Self, DaemonError> {
        // Any number of presses may wait on a start-up: its reads go ahead of the calls of
        // the account's other spreadsheets, which are serving already (sheets::turns).
        sheets.set_precedence(Precedence::Pressing);
        let Started {
            layout,
            protection: queue_protection,
            meta,
            panels,
            archived,
            states,
        } = load_layout(sheets.as_ref(), &config).await?;
        let registry = trust_queue(registry, &config, queue_protection)?;
        let outbox = Outbox::open(&config.state_dir)?;
        // A note left by a run that ended while holding the spreadsheet off says nothing of
        // this one.
        if let Err(e) = crate::pause::clear(&config.state_dir) {
            warn!(error = %e, "could not remove an old hold-off note from state_dir");
        }
        let policy = claim_policy(&config);
        let Shared {
            slots,
            share,
            runner,
            webhooks,
        } = shared;
        let announcer = crate::notifications::sender::Announcer::start(
            &config.state_dir,
            config.notify.clone(),
            webhooks,
            Arc::clone(&observers.metrics),
        )
        .map_err(crate::outbox::OutboxError::from)?;
        let panel_opener = Arc::new(panel::DaemonPanels::new(
            Arc::clone(&sheets),
            config.clone(),
        ));
        runner.set_panel_opener(panel_opener.clone());
        let account = sheets.account();
        let marks = crate::provenance::Marks::new(&config.spreadsheet_id);
        let watch = Watch::new(config.heartbeat_interval.max(config.poll_interval * 2));
        let mut daemon = Self {
            sheets,
            runner,
            panel_opener,
            registry,
            outbox,
            announcer,
            log_rows_landed: HashMap::new(),
            policy,
            jobs: JoinSet::new(),
            observers,
            running: HashMap::new(),
            task_jobs: HashMap::new(),
            unsettled: Vec::new(),
            slots,
            share,
            job_cancel: CancellationToken::new(),
            retries_stop: CancellationToken::new(),
            job_stops: HashMap::new(),
            outputs: HashMap::new(),
            retry_notes: HashMap::new(),
            log_writes: Vec::new(),
            log_dead: std::collections::HashSet::new(),
            stop_asked: HashMap::new(),
            stops_read: Default::default(),
            refused_jobs: HashMap::new(),
            status_sent: String::new(),
            process: crate::workers::process_id(&crate::config::host_name(), std::process::id()),
            report: RunReport::default(),
            config,
            served: Served {
                layout,
                window_start: 2,
                sweep_at: 2,
                archived_seen: None,
                archived_at: None,
                archive_more: false,
                archive_not_before: None,
                archived_before: archived > 0,
                polls: 0,
                start_poll: None,
                pressing: false,
                relayout: false,
                panels: PanelIndex::default(),
                sheet_meta: SpreadsheetMeta::default(),
                sheets_seen: None,
                idle_checked: None,
                sheet_ids: HashMap::new(),
                last_heartbeat: None,
                beat_carried_logs: false,
                unbind: Vec::new(),
                pending_through: Vec::new(),
                landed: Vec::new(),
                schedules_seen: HashMap::new(),
                rows_moved_at: None,
                account,
                sharing: 1,
                rank: 0,
                watch,
                holds: Vec::new(),
                lease_sent: None,
                kept_lease: None,
                fence_sweep_at: tokio::time::Instant::now() + claim_pass::FENCE_FIRST_SWEEP,
                lease_kept_until: None,
                unsure: Vec::new(),
                fences: Vec::new(),
                budget_bound: false,
                busy_at: tokio::time::Instant::now(),
                reported: HashSet::new(),
                marks,
                marks_seen_by_all: true,
                barred: Vec::new(),
                protections: SpreadsheetMeta::default(),
                held_off: None,
                write_refused: false,
            },
        };
        daemon.take_in_protections(&meta);
        daemon.take_in_sheets(meta.sheets);
        daemon.take_in_panels(panels);
        match states {
            Some(states) => daemon.take_in_window(&states),
            None => daemon.find_window().await?,
        }
        daemon.recover().await?;
        daemon.sheets.set_precedence(Precedence::Plain);
        Ok(daemon)
    }

    async fn run(&mut self, shutdown: CancellationToken) -> Result<RunReport, DaemonError> {
        info!(worker = %self.config.worker_id, slots = self.config.slots, "sheetq daemon started");
        // What `sheetq check` finds without a request: programs missing on the jobs' PATH,
        // an unwritable state_dir, a budget above Google's quota, a clock off Google's.
        crate::check::log_at_start(&self.config, &self.registry, self.sheets.as_ref());
        if !self.config.worker_id_is_set {
            warn!(
                worker = %self.config.worker_id,
                "worker_id is not set, so it changes with every restart and a restarted daemon cannot recognise the jobs it was running (they time out after dead_after instead); set worker_id (or SHEETQ_WORKER_ID) to a stable name"
            );
        }
        let idle_per_minute = 60.0 / self.config.poll_interval.as_secs_f64();
        if idle_per_minute > f64::from(self.config.requests_per_minute) {
            warn!(
                poll_interval = ?self.config.poll_interval,
                requests_per_minute = self.config.requests_per_minute,
                "idle polls alone need {idle_per_minute:.0} requests a minute, more than the budget: polls will wait for it; raise poll_interval"
            );
        }
        let mut ready = false;
        let mut failures = 0;
        let mut fatal = None;
        let mut first = true;
        let mut reloads = self.observers.reloads.take();
        loop {
            self.observers.health.loop_turned();
            let (next, period) = self.next_poll(first);
            self.observers.health.turn_planned(next.into_std(), period);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                reload = next_reload(&mut reloads) => {
                    self.reload(&reload).await;
                    continue;
                }
                _ = tokio::time::sleep_until(next) => { first = false; }
                Some(joined) = self.jobs.join_next(), if !self.jobs.is_empty() => {
                    self.finished(joined)?;
                    continue;
                }
            }
            match self.pass().await {
                Ok(()) => {
                    self.served_again();
                    self.observers.health.poll_completed();
                    self.observers
                        .metrics
                        .poll_succeeded(std::time::SystemTime::now());
                    if !ready {
                        ready = true;
                        start_pace::cleared(&self.config.state_dir);
                        if let Err(e) = self.observers.notifier.ready() {
                            warn!(error = %e, "cannot tell the service manager we are ready");
                        }
                    }
                }
                Err(DaemonError::Sheets(e)) if e.is_retryable() => {
                    warn!(error = %e, "poll failed; trying again at the next tick");
                    if !ready {
                        // Still starting (READY=1 waits for a first pass that works).
                        let more = self.config.poll_interval + START_STEP_LIMIT;
                        if let Err(e) = self.observers.notifier.extend_timeout(more) {
                            debug!(error = %e, "cannot ask the service manager for more time to start");
                        }
                    }
                    let mut why = e.to_string();
                    why.truncate(why.char_indices().nth(120).map_or(why.len(), |(i, _)| i));
                    self.tell_status(&format!("poll failed, retrying: {why}"));
                }
                // A person renamed or deleted a panel, inserted a queue column or deleted rows
                // since the last discovery: look at the spreadsheet afresh next time. Only a
                // problem that outlives that is fatal, and even then jobs are drained first.
                Err(e) if e.may_be_layout_change() && failures < MAX_LAYOUT_FAILURES => {
                    failures += 1;
                    warn!(error = %e, attempt = failures, "the spreadsheet changed under the poll; re-reading its layout");
                    self.served.relayout = true;
                    continue;
                }
                Err(other) if other.ends_the_process() => {
                    error!(error = %other, "stopping: only the VM's operator can put this right");
                    fatal = Some(other);
                    break;
                }
                // Whatever a person did to the spreadsheet (a protection over sheetq's own
                // sheets, a sheet or header gone, its sharing withdrawn) costs this
                // spreadsheet, for a while, never the process nor its other spreadsheets.
                Err(other) => {
                    self.hold_off(&other);
                    continue;
                }
            }
            failures = 0;
        }
        self.observers.health.set_stopping();
        if let Err(e) = self.observers.notifier.stopping() {
            debug!(error = %e, "cannot tell the service manager we are stopping");
        }
        self.tell_status(&format!(
            "stopping: {} running job(s) get up to {} to finish",
            self.running.len(),
            humantime::format_duration(self.config.shutdown_grace)
        ));
        self.drain().await?;
        match fatal {
            Some(e) => Err(e),
            None => Ok(self.report.clone()),
        }
    }

    /// Takes up a config read anew (docs/design.md §5): commands, functions and targets,
    /// intake, timing, budget and retention apply from the next pass on; running jobs go
    /// on as they started. A setting of [`RESTART_ONLY`] that changed is named and keeps
    /// its running value.
    async fn reload(&mut self, reload: &Reload) {
        // Who may press is honoured only on a protected queue: read its protection afresh
        // (one read, only on a reload), and refuse a config that asks for `allow` without it.
        let registry = match self.sheets.metadata().await {
            Ok(meta) => {
                let protection = queue_protection(&meta, self.sheets.as_ref(), &reload.config);
                match trust_queue(reload.registry.clone(), &reload.config, protection) {
                    Ok(registry) => registry,
                    Err(e) => {
                        error!(error = %e, "the config was not reloaded, the one in force stays");
                        return;
                    }
                }
            }
            Err(e) if reload.registry.catalog().needs_protected_queue() => {
                error!(error = %e, "the config was not reloaded, the one in force stays: its allow or approvers need the queue's protection, which could not be read; send SIGHUP again");
                return;
            }
            Err(e) => {
                warn!(error = %e, "could not read the queue's protection; continuation steps keep the trust they had");
                reload
                    .registry
                    .clone()
                    .with_queue_protected(self.registry.queue_protected())
            }
        };
        let new = &reload.config;
        let old = &self.config;
        let changed: Vec<&str> = [
            old.spreadsheet_id != new.spreadsheet_id,
            old.credentials != new.credentials,
            old.api_base_url != new.api_base_url,
            old.worker_id != new.worker_id,
            old.state_dir != new.state_dir,
            old.slots != new.slots,
            old.call_timeout != new.call_timeout,
            old.max_retries != new.max_retries,
            old.headers != new.headers || old.states != new.states,
            old.panel != new.panel,
        ]
        .iter()
        .zip(RESTART_ONLY)
        .filter(|(changed, _)| **changed)
        .map(|(_, name)| name)
        .collect();
        if !changed.is_empty() {
            warn!(settings = ?changed, "the reloaded config changes settings that need a restart (systemctl restart sheetq); they keep their running values");
        }
        self.config = Config {
            commands: new.commands.clone(),
            catalog: new.catalog.clone(),
            intake: new.intake,
            poll_interval: new.poll_interval,
            idle_poll_interval: new.idle_poll_interval,
            heartbeat_interval: new.heartbeat_interval,
            stale_after: new.stale_after,
            dead_after: new.dead_after,
            lease_ttl: new.lease_ttl,
            shutdown_grace: new.shutdown_grace,
            requests_per_minute: new.requests_per_minute,
            sweep_rows: new.sweep_rows,
            retention: new.retention,
            notify: new.notify.clone(),
            schedules: new.schedules.clone(),
            ..self.config.clone()
        };
        self.announcer.set_channels(self.config.notify.clone());
        self.registry = registry;
        self.policy = claim_policy(&self.config);
        // The account's budget is split again at the next pass, from the new total.
        self.served.sharing = 0;
        self.panel_opener.set_config(self.config.clone());
        info!(
            commands = self.registry.names().count(),
            functions = self.config.catalog.functions.len(),
            targets = self.config.catalog.targets.len(),
            running = self.running.len(),
            "reloaded the config; running jobs go on as they started"
        );
    }

    /// `STATUS=` for `systemctl status`, when it changed.
    fn tell_status(&mut self, text: &str) {
        if self.status_sent == text {
            return;
        }
        if let Err(e) = self.observers.notifier.status(text) {
            debug!(error = %e, "cannot send the status line to the service manager");
        }
        self.status_sent = text.to_string();
    }

    /// One tick: read, write back what finished (with the panels' waiting/running display and
    /// the heartbeat in the same call), claim what fits, take in ticked boxes.
    async fn pass(&mut self) -> Result<(), DaemonError> {
        self.take_ended()?;
        // A poll with work of our own behind it (a job running, whose result this very pass
        // may write back; results to write; a claim to finish under the lease), and the first
        // one, which takes in the presses made while this daemon started, wait for the
        // account's budget ahead of the other spreadsheets' plain polls (sheets::turns):
        // someone is waiting on them. Those of a spreadsheet where the last read showed
        // several presses waiting go first: the commit they lead to serves them all.
        self.sheets
            .set_precedence(self.precedence(self.served.polls == 0 || self.has_work()));
        if std::mem::take(&mut self.served.relayout) {
            self.discover_panels().await?;
            self.find_window().await?;
        }
        // The first pass goes on the read start-up ended with, when nothing was written
        // since: made a moment ago, a second one would cost a read and show the same.
        let poll = match self.served.start_poll.take() {
            Some(poll) => poll,
            None => {
                self.served.polls += 1;
                self.poll(false).await?
            }
        };
        // Jobs that ended while the read waited for its turn (a busy account's budget holds it
        // for seconds) are written back by this pass: the read looked up their rows, as it
        // looks up every running job's.
        self.take_ended()?;
        // Before anything is planned on it: a row that says it is a continuation step is
        // one only by sheetq's mark.
        self.learn_marks(&poll).await;
        self.report_row_problems(&poll);
        self.report_refused_approvals(&poll);
        // Someone else now writes the heartbeat row of our worker_id: two processes share
        // it, and neither may touch the other's jobs. Stop claiming (jobs drain first).
        if let workers::IdCheck::InUse(e) = workers::check_worker_id(
            &poll.workers,
            &self.config.worker_id,
            &self.process,
            self.config.dead_after,
            pid_alive,
        ) {
            return Err(e.into());
        }
        self.settle_unsettled(&poll);
        self.stop_asked_jobs(&poll.snapshot);
        self.stop_asked_by_heartbeat(&poll);
        self.expire_holds(&poll);
        self.share_budget(&poll);
        self.watch_budget();
        // The waiting/running texts of the panels ride on a write sent anyway: the write-back
        // when it has results or a heartbeat to send, else the claim commit, else they wait
        // (recomputed) for the next pass that writes. They never cost a write of their own.
        let display = self.panel_display(&poll);
        // The first heartbeat, due since start-up, rides the claim commit when this pass
        // sends one (presses to take in, rows to claim) rather than a write of its own.
        let first_beat_rides = || {
            self.served.last_heartbeat.is_none()
                && (self.has_ticks(&poll)
                    || !(self.plan_claims(
                        &poll.snapshot,
                        &poll.watched,
                        &self.running_elsewhere(&poll),
                    ))
                    .claims
                    .is_empty())
        };
        let writing_back = !self.outbox.is_empty() || (self.heartbeat_due() && !first_beat_rides());
        let (display, deferred) = if writing_back {
            (display, Vec::new())
        } else {
            (Vec::new(), display)
        };
        // A write-back that fails must not stop claiming: its results wait in the outbox.
        let flushed_at = tokio::time::Instant::now();
        let refused_before = std::mem::take(&mut self.served.write_refused);
        let wrote_heartbeat = match self.flush(&poll, display).await {
            Ok(wrote) => wrote,
            // Refused too: a bound row deleted between the read and the write makes Google
            // refuse the whole write. The next poll resolves every result afresh.
            // Refused twice in a row, the cells left out did not help: the pass fails, and the
            // loop holds the spreadsheet off if that goes on.
            Err(DaemonError::Sheets(e))
                if e.is_retryable()
                    || (e.kind == ErrorKind::InvalidArgument && !refused_before) =>
            {
                warn!(error = %e, pending = self.outbox.len(), "could not write results; they stay in the outbox and are resolved afresh at the next poll");
                // Refused for a cell someone protected since the last look: the next pass
                // reads the protections (and the layout) afresh, and leaves those cells out.
                if e.kind == ErrorKind::InvalidArgument {
                    self.served.relayout = true;
                    self.served.write_refused = true;
                }
                false
            }
            Err(e) => return Err(e),
        };
        let elsewhere = self.running_elsewhere(&poll);
        // The rows whose results this pass just wrote are planned on as the write left them:
        // a target freed by a result is claimed in this very pass (whose lease call reads the
        // queue afresh), not a poll later.
        let written = self.as_written(&poll.snapshot, flushed_at);
        let plan = self.plan_claims(&written, &poll.watched, &elsewhere);
        // Several presses wait here, and this daemon acts on them now or as soon as a job of
        // its ends: ticks to take in, rows to claim, or jobs of ours running. Rows that wait
        // for other daemons' jobs do not make our polls pressing.
        self.served.pressing = self.presses_waiting(&poll) >= PRESSING
            && (self.has_ticks(&poll) || self.has_work() || !plan.claims.is_empty());
        let mut wrote_heartbeat = wrote_heartbeat;
        // A claim commit whose reply was lost is fenced by taking our lease back at once:
        // its job then settles (runs, or waits to be claimed again) without waiting out
        // Google's 180 s request limit.
        let open_commit = !self.unsettled.is_empty();
        // Follow-ups go out under the lease, and a lease we keep is renewed or released by
        // a claim pass.
        let under_lease =
            !self.served.pending_through.is_empty() || self.served.lease_kept_until.is_some();
        let work = ClaimWork {
            schedules: !self.schedules_due(&poll, Utc::now()).is_empty(),
            ticks: self.has_ticks(&poll),
            open_commit,
            under_lease,
            ..ClaimWork::of_plan(&plan)
        };
        if work.any() {
            // Presses, results or a held lease wait on it: its calls go ahead of plain ones.
            self.sheets.set_precedence(self.precedence(true));
            wrote_heartbeat |= self.claim_pass(&poll, &written, deferred).await?;
        } else if self.kept_lease_blocks(&poll, &written, &plan) {
            self.release_kept().await;
        } else if self.archive_due() {
            self.archive_pass(&poll).await?;
        } else if self.idle_check_due() {
            self.hide_idle_panels(&poll).await?;
        }
        self.sheets.set_precedence(Precedence::Plain);
        if self.fence_sweep_due() {
            self.sweep_fences().await;
        }
        if !wrote_heartbeat && self.heartbeat_due() {
            self.heartbeat_alone(&poll).await?;
        } else if self.sheets_overdue() {
            // Busy: the heartbeat rides the write-backs and commits, whose replies carry no
            // sheet list, so it is read (one call a few minutes) to notice new panels.
            let meta = self.sheets.metadata().await?;
            self.retrust(&meta);
            self.take_in_protections(&meta);
            self.take_in_sheets(meta.sheets);
        }
        let waiting = poll
            .snapshot
            .rows
            .iter()
            .filter(|r| r.state.is(queue::State::Waiting))
            .count();
        if waiting > 0 || self.has_ticks(&poll) || self.has_work() {
            self.served.busy_at = tokio::time::Instant::now();
        }
        let bound = if self.served.budget_bound {
            "slowed by the account's request budget; "
        } else {
            ""
        };
        let label = match self.config.label.as_str() {
            "" => String::new(),
            l => format!("{l}: "),
        };
        self.tell_status(&format!(
            "{label}{bound}polling: {}/{} slots busy, {waiting} waiting, {} result(s) to write",
            self.running.len(),
            self.config.slots,
            self.outbox.len()
        ));
        Ok(())
    }

    /// How this spreadsheet's next calls wait for the account's budget (sheets::turns):
    /// pressing while several presses wait here, urgent when `urgent` (a press or a result
    /// waits on them), else plain.
    fn precedence(&self, urgent: bool) -> Precedence {
        if self.served.pressing {
            Precedence::Pressing
        } else if urgent {
            Precedence::Urgent
        } else {
            Precedence::Plain
        }
    }

    /// Takes every job that has ended into the outbox ([`Self::finished`]), without waiting.
    fn take_ended(&mut self) -> Result<(), DaemonError> {
        while let Some(joined) = self.jobs.try_join_next() {
            self.finished(joined)?;
        }
        Ok(())
    }

    /// `snapshot` as the results that landed since `since` left it: their rows (those still
    /// holding our claim) read in their final state. Only a plan reads it; the claim pass
    /// that plan starts decides on its own fresh read.
    fn as_written<'a>(
        &self,
        snapshot: &'a queue::Snapshot,
        since: tokio::time::Instant,
    ) -> std::borrow::Cow<'a, queue::Snapshot> {
        let written: Vec<&FinishedJob> = (self.served.landed.iter())
            .filter(|(_, at)| *at >= since)
            .map(|(job, _)| job)
            .collect();
        if written.is_empty() {
            return std::borrow::Cow::Borrowed(snapshot);
        }
        let mut after = snapshot.clone();
        for row in &mut after.rows {
            let ours = |j: &&&FinishedJob| j.job_id == row.job_id && j.worker == row.worker;
            if let Some(job) = written.iter().find(ours) {
                row.state = queue::RowState::Known(writeback::finish_state(job.finish));
            }
        }
        std::borrow::Cow::Owned(after)
    }

    /// Notices when the account's request budget holds the polls back: its calls (those of
    /// every spreadsheet sharing it) waited a tenth of the last minute or more
    /// ([`Share::watch_budget`]). Then polls come further apart than `poll_interval`,
    /// evenly, instead of meeting 429s; the log says so (once per account, at most every ten
    /// minutes), the status line while it lasts, and `sheetq_throttled_wait_seconds_total`
    /// counts the waits.
    fn watch_budget(&mut self) {
        let seen = self
            .share
            .watch_budget(tokio::time::Instant::now(), self.sheets.budget_waited());
        if let Some((waited, over)) = seen.say {
            warn!(
                waited_s = waited.as_secs(),
                over_s = over.as_secs(),
                requests_per_minute = self.config.requests_per_minute,
                sharing = self.served.sharing,
                "polls are slowed by the account's request budget: what its spreadsheets want is more than its share of Google's quota. Presses wait longer; raise poll_interval, or give some spreadsheets a key of another service account"
            );
        }
        self.served.budget_bound = seen.bound;
    }

    /// The heartbeat on its own: a `spreadsheets.batchUpdate` whose reply lists every sheet,
    /// so that finding a new or renamed panel costs no read. A daemon without a heartbeat row
    /// yet appends one.
    async fn heartbeat_alone(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        let Some(r) = poll.own_heartbeat_row else {
            return self
                .heartbeat_into(poll, &mut Vec::new(), true, &[])
                .await
                .map(drop);
        };
        let beat = self.heartbeat_request(r, self.heartbeat_row(Utc::now(), &[], &[]));
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests: vec![beat],
                sheet_list: true,
                ..Default::default()
            })
            .await?;
        self.served.last_heartbeat = Some(tokio::time::Instant::now());
        if !reply.sheets.is_empty() {
            self.take_in_sheets(reply.sheets);
        }
        Ok(())
    }

    /// The write of our heartbeat row (sheet row `row` of `_ワーカー`) as a grid request.
    fn heartbeat_request(&self, row: u32, cells: Vec<Cell>) -> Request {
        Request::UpdateCells {
            range: GridRange {
                sheet_id: self.served.layout.worker_sheet_id,
                start_row: row - 1,
                end_row: row,
                start_col: 0,
                end_col: workers::HEADER.len() as u32,
            },
            rows: vec![cells],
        }
    }

    /// When the next poll is due. The live daemons of one account take turns: each polls every
    /// `poll_interval × n` (n of them), at its own phase (`rank × poll_interval`) on the wall
    /// clock, so the group reads the queue about once per `poll_interval` whatever its size,
    /// and their reads do not bunch up. The first poll is at once. Also returns the period:
    /// how far apart this daemon's polls are now.
    fn next_poll(&self, first: bool) -> (tokio::time::Instant, StdDuration) {
        let now = tokio::time::Instant::now();
        // A spreadsheet held off is tried again once its wait is over, and not before.
        if let Some(held) = self.served.held_off.filter(|h| h.until > now) {
            return (held.until, held.wait);
        }
        if first {
            return (now, self.config.poll_interval);
        }
        // Work of our own (a job running, a result to write) keeps the pace, also while
        // passes fail: a result must not wait out idle_poll_interval once the API is back.
        let quiet_for = if self.has_work() {
            StdDuration::ZERO
        } else {
            self.served.busy_at.elapsed()
        };
        let pace = pace(
            quiet_for,
            self.config.poll_interval,
            self.config.idle_poll_interval,
        );
        let sharing = self.served.sharing.max(1);
        let period = poll_period(
            pace,
            self.config.poll_interval,
            self.config.heartbeat_interval,
            sharing,
        );
        let n = u64::from(sharing);
        let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(n);
        let phase = (period_ms / n).saturating_mul(u64::from(self.served.rank) % n);
        let wall = u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0);
        let into = (wall + period_ms - phase % period_ms) % period_ms;
        let next = now + StdDuration::from_millis(period_ms - into);
        // A schedule's next occurrence (by this machine's clock) does not wait for a quiet
        // spreadsheet's slow polls: the poll after it comes a second past it.
        let occurrence = self.next_occurrence(Utc::now()).and_then(|at| {
            let until = (at - Utc::now()).to_std().ok()?;
            Some(now + until + StdDuration::from_secs(1))
        });
        (occurrence.map_or(next, |o| o.min(next)), period)
    }

    /// Whether this daemon has work of its own on the spreadsheet: jobs running or waiting
    /// for their commit's outcome, results or follow-ups to write, a lease kept.
    fn has_work(&self) -> bool {
        !self.running.is_empty()
            || !self.unsettled.is_empty()
            || !self.outbox.is_empty()
            || !self.served.pending_through.is_empty()
            || !self.served.unsure.is_empty()
            || self.served.lease_kept_until.is_some()
    }

    /// The jobs that other live daemons list (each keeps its target busy unless settled), the
    /// jobs we hold, and the jobs we run ourselves: the claim rules' view of what runs beyond
    /// this read. Our own keep their targets busy whatever their rows show (another daemon
    /// may have timed one out while we were cut off from the API: it still runs here).
    fn running_elsewhere(&self, poll: &Poll) -> Vec<RunningRef> {
        let mut jobs = workers::running_elsewhere(
            &poll.workers,
            &self.config.worker_id,
            self.config.dead_after,
        );
        jobs.extend(self.served.holds.iter().map(|h| h.job.clone()));
        jobs.extend(
            self.running
                .values()
                .chain(&self.unsettled)
                .map(|c| RunningRef::of(&c.row).held()),
        );
        jobs
    }

    /// Holds a job of another daemon that this one just timed out: its target stays busy
    /// until the job could have ended on its own (its command's timeout and kill grace, or
    /// `stale_after` for a command we do not know, plus a heartbeat interval), counted from
    /// now, when its daemon had already been silent or its row stale for a while.
    fn hold(&mut self, row: &QueueRow, watched: &crate::claim::Watched) {
        let could_run = self
            .registry
            .get(&row.command)
            .map_or(self.config.stale_after, |def| def.timeout + def.kill_grace);
        // A worker that is no sheetq daemon (an Apps Script minute trigger's) wrote its
        // 開始日時 on Google's clock: the time the job has had since counts. A sheetq claim
        // wrote it on its own machine's clock, which decides nothing here.
        let not_sheetq = row.worker_tag().is_none();
        let had = not_sheetq
            .then(|| crate::claim::started_ago(row, watched))
            .flatten()
            .and_then(|ago| ago.to_std().ok())
            .unwrap_or_default();
        let margin = (could_run + self.config.heartbeat_interval).saturating_sub(had);
        if margin.is_zero() {
            return;
        }
        let since = tokio::time::Instant::now();
        self.served.holds.retain(|h| h.job.job_id != row.job_id);
        self.served.holds.push(Hold {
            job: RunningRef::of(row).held(),
            daemon: row.worker_tag().map(|t| t.daemon_id).unwrap_or_default(),
            since,
            until: since + margin,
        });
    }

    /// Ends the holds whose time is up, or whose job has ended: its row shows the real
    /// outcome (its daemon came back and wrote 完了 or エラー), or, when that row lies
    /// outside our read, its daemon's heartbeat, changed since, lists it running no more.
    fn expire_holds(&mut self, poll: &Poll) {
        let now = tokio::time::Instant::now();
        self.served.holds.retain(|h| {
            let ended = poll.snapshot.rows_with(&h.job.job_id).any(|r| {
                r.state.is(queue::State::Done) || r.state.is(queue::State::Error)
            }) || workers::ended_on(
                &poll.workers,
                &h.daemon,
                &h.job.job_id,
                h.since.elapsed(),
            );
            if ended || now >= h.until {
                info!(job.id = ?h.job.job_id, target = %Logged(&h.job.target), ended, "the target of a job we timed out is free again");
                return false;
            }
            true
        });
    }

    /// Splits the account's budget (`requests_per_minute`, for reads and for writes each)
    /// evenly among the live daemons on our account, as their heartbeats show them.
    fn share_budget(&mut self, poll: &Poll) {
        let (rank, sharing) = workers::place_on_account(
            &poll.workers,
            &self.config.worker_id,
            &self.served.account,
            self.config.dead_after,
        );
        self.served.rank = rank;
        // Every daemon on the account that any spreadsheet of this process shows, and every
        // one their heartbeats list.
        let others = workers::live_on_account(
            &poll.workers,
            &self.config.worker_id,
            &self.served.account,
            self.config.dead_after,
        )
        .map(|h| (h.worker_id.clone(), h.sharers.clone()));
        // Word of a daemon we see gone ourselves is old: it may still go round for a few
        // heartbeats after its death.
        let gone = workers::gone_on_account(
            &poll.workers,
            &self.config.worker_id,
            &self.served.account,
            self.config.dead_after,
            workers::hearsay_lasts(self.config.dead_after, self.config.heartbeat_interval),
        )
        .map(str::to_string);
        let sharing = self
            .share
            .report(&self.config.worker_id, others, gone)
            .max(sharing);
        if sharing == self.served.sharing {
            return;
        }
        let share = (self.config.requests_per_minute / sharing).max(1);
        info!(
            account = %self.served.account,
            daemons = sharing,
            reads_per_minute = share,
            writes_per_minute = share,
            "the account's request budget is now shared by {sharing} live daemon(s)"
        );
        self.sheets.set_budget_share(share, share);
        self.served.sharing = sharing;
    }

    /// Takes up the queue's protection as metadata read anyway shows it: a queue that lost
    /// its protection since start no longer vouches for 依頼者 (functions with `allow` are
    /// then refused) nor for a continuation's args; one that gained it does.
    fn retrust(&mut self, meta: &crate::sheets::SpreadsheetMeta) {
        let protection = queue_protection(meta, self.sheets.as_ref(), &self.config);
        let protected = protection.is_ok();
        if protected == self.registry.queue_protected() {
            return;
        }
        match protection {
            Ok(()) => {
                info!("the queue is protected now: 依頼者 and continuation steps are trusted")
            }
            Err(why) => error!(
                why = %why,
                "the queue lost its protection: jobs of functions with allow or approvers are refused (and approvals not taken) until it is protected again"
            ),
        }
        self.registry = self.registry.clone().with_queue_protected(protected);
    }

    /// Approvals on 承認待ち rows that do not count (docs/design.md §5.5: the requester's
    /// own, someone not among `approvers`, nobody known): warned of and counted once each
    /// (`sheetq_approvals_total{outcome="refused_…"}`); the panel row says so too.
    fn report_refused_approvals(&mut self, poll: &Poll) {
        let tz = self.served.layout.tz;
        let mut refused = Vec::new();
        {
            let catalog = self.registry.catalog();
            for row in poll
                .snapshot
                .rows
                .iter()
                .filter(|r| r.state.is(crate::queue::State::AwaitingApproval))
            {
                let Some(rule) = catalog.approval_rule(&row.function) else {
                    continue;
                };
                for (who, why) in crate::approval::tally(&rule, row, tz).refused {
                    refused.push((row.job_id.clone(), row.function.clone(), who, why));
                }
            }
        }
        for (job, function, who, why) in refused {
            let text = format!("approval/{job}/{who}");
            if self.served.reported.contains(&text) {
                continue;
            }
            if self.served.reported.len() >= REPORTED_KEPT {
                self.served.reported.clear();
            }
            self.served.reported.insert(text);
            self.observers.metrics.approval(why.label());
            warn!(job.id = ?job, function = %Logged(&function), approver = %Logged(&who), reason = why.label(), "an approval does not count: {}", why.words());
        }
    }

    /// Rows the queue holds that sheetq does not understand. A waiting row that can never
    /// run as it stands (no jobId, or another row's) is a refused press: warned of and counted
    /// once (`sheetq_jobs_refused_total{reason="unreadable"}`), since it has no identity a
    /// write could find it by; other problems are for debugging.
    fn report_row_problems(&mut self, poll: &Poll) {
        for p in &poll.snapshot.problems {
            if !p.never_runs {
                debug!(problem = %p, "queue row not understood");
                continue;
            }
            let text = p.to_string();
            if self.served.reported.contains(&text) {
                continue;
            }
            if self.served.reported.len() >= REPORTED_KEPT {
                self.served.reported.clear();
            }
            self.served.reported.insert(text);
            self.observers
                .metrics
                .job_refused(crate::commands::Refusal::Unreadable);
            warn!(
                reason = %crate::commands::Refusal::Unreadable,
                row = p.row,
                problem = ?p.what,
                "a waiting queue row cannot be run as a job; nothing ran"
            );
        }
    }

    /// Notes that a person's edit moved rows under our claims or bindings (a sort, a
    /// cut-and-paste): for a while every read covers the whole queue, so that a row such an
    /// edit puts under a write, finished or not, is in the read just before and can be
    /// restored. A quiet sheet keeps reading only its unfinished window.
    fn rows_moved(&mut self) {
        self.served.rows_moved_at = Some(tokio::time::Instant::now());
    }

    /// Whether reads cover the whole queue because rows moved recently.
    fn rows_moving(&self) -> bool {
        self.served
            .rows_moved_at
            .is_some_and(|t| t.elapsed() < WHOLE_QUEUE_AFTER_MOVES)
    }

    fn spawn(&mut self, claimed: Claimed) {
        let row = &claimed.row;
        let spec = JobSpec {
            job_id: row.job_id.clone(),
            target: row.target_key().to_string(),
            function: row.function.clone(),
            requester: row.requester.clone(),
            command: row.command.clone(),
            args_json: row.args_json.clone(),
            flags: row.flags.clone(),
            panel_sheet: row.panel_sheet.clone(),
            panel_row: row.panel_row,
            approvals: row.approvals.clone(),
            continuation: claimed.continuation.as_deref() == Some(row.job_id.as_str())
                || self.served.marks.vouches(row),
        };
        let span = tracing::info_span!("job", job.id = ?row.job_id, target = %Logged(row.target_key()), worker = %claimed.tag);
        span.in_scope(|| info!(command = %Logged(&row.command), "claimed"));
        let prepared = if spec.target.is_empty() {
            // Nothing to serialise it by, nothing for `{target}`: not a job as it stands.
            Err(crate::commands::JobRejected::new(
                crate::commands::Refusal::Unreadable,
                format!(
                    "the row names no target ({} and {} are empty), so nothing ran",
                    self.config.headers.target, self.config.headers.panel_sheet
                ),
            ))
        } else {
            self.registry.prepare(&spec)
        };
        if let Err(rejected) = &prepared {
            refused(&self.observers.metrics, &spec, rejected, &span);
            self.refused_jobs
                .insert(row.job_id.clone(), rejected.reason);
        }
        let runner = self.runner.clone();
        let cancel = self.job_cancel.child_token();
        self.job_stops.insert(row.job_id.clone(), cancel.clone());
        // `output = "private"`: the file on this machine only, no tail for the sheet.
        let private = self
            .registry
            .keeps_output_private(&row.command, &row.function);
        let chars = if private { 0 } else { self.config.log_chars };
        let output = crate::joblog::Capture::new(
            chars,
            crate::joblog::file_path(&self.config.state_dir, &row.job_id),
        );
        self.outputs.insert(row.job_id.clone(), (output.clone(), 0));
        let (notes, noted) = tokio::sync::watch::channel(None);
        self.retry_notes.insert(row.job_id.clone(), noted);
        let retrying = crate::commands::Retrying {
            notes,
            stop: self.retries_stop.clone(),
            asked_to_stop: self.stop_check(&claimed),
        };
        if self.is_heavy(row) {
            self.slots.heavy(true);
        }
        self.running.insert(row.job_id.clone(), claimed.clone());
        let running = self.observers.metrics.job_started();
        let job_id = row.job_id.clone();
        let handle = self.jobs.spawn(
            async move {
                let outcome = match prepared {
                    Ok(job) => runner.run_logged(job, cancel, &output, &retrying).await,
                    Err(rejected) => {
                        let outcome = rejected.into_outcome();
                        output.push(format!("{}\n", outcome.message).as_bytes());
                        outcome
                    }
                };
                (claimed, outcome, running)
            }
            .instrument(span),
        );
        self.task_jobs.insert(handle.id(), job_id);
    }

    /// What a job with retries asks right before each retry (`Retrying::asked_to_stop`):
    /// one read of its row, through its binding, for a 中止要求 naming it. `None` when the
    /// job's command has no retries, or the queue has no 中止要求 column.
    fn stop_check(&self, claimed: &Claimed) -> Option<crate::commands::runner::StopCheck> {
        let retries = self.registry.retries_of(&claimed.row.command).unwrap_or(0);
        let column = self
            .served
            .layout
            .columns
            .position(queue::Column::CancelRequest)?;
        let id = crate::binding::id_of_token(&claimed.tag.token)?;
        if retries == 0 {
            return None;
        }
        let id_column = self.served.layout.columns.index(queue::Column::JobId) as usize;
        let sheets = self.sheets.clone();
        let job = claimed.row.job_id.clone();
        let found = self.stops_read.clone();
        Some(Box::new(move || {
            let sheets = sheets.clone();
            let job = job.clone();
            let found = found.clone();
            Box::pin(async move {
                match sheets.read_filtered(&[Filter::Metadata(id)]).await {
                    Ok(read) => {
                        // Only the job's own row counts: a person's sort can leave a
                        // binding on another row, whose 中止要求 is that row's job's.
                        let text = read
                            .first()
                            .and_then(|r| r.row())
                            .filter(|(_, cells)| {
                                cells.get(id_column).map(queue::cell_text).as_deref()
                                    == Some(job.as_str())
                            })
                            .and_then(|(_, cells)| cells.get(column as usize))
                            .map(queue::cell_text)
                            .filter(|text| crate::cancel::applies(text, &job));
                        let asked = text.is_some();
                        if let Some(text) = text {
                            found
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(job.clone(), text);
                        }
                        asked
                    }
                    Err(e) => {
                        debug!(error = %e, job.id = ?job, "could not read the row before a retry; the polls still see a stop");
                        false
                    }
                }
            })
        }))
    }

    /// A job ended: its result goes to the outbox (durably) before anything else.
    fn finished(
        &mut self,
        joined: Result<(Claimed, Outcome, RunningJob), tokio::task::JoinError>,
    ) -> Result<(), DaemonError> {
        let (claimed, outcome) = match joined {
            Ok((claimed, outcome, running)) => {
                self.observers
                    .metrics
                    .job_retries(outcome.attempts.saturating_sub(1));
                running.finish(match outcome.status {
                    OutcomeStatus::Done => metrics::Outcome::Done,
                    OutcomeStatus::Failed => metrics::Outcome::Error,
                    OutcomeStatus::TimedOut => metrics::Outcome::Timeout,
                    OutcomeStatus::Cancelled => metrics::Outcome::Cancelled,
                });
                (claimed, outcome)
            }
            Err(e) => {
                // A job task panicked (a bug): free its slot and record the job as failed,
                // rather than leaving the slot taken and the row 実行中 until it times out.
                error!(error = %e, "a job task failed unexpectedly");
                let Some(claimed) = self
                    .task_jobs
                    .remove(&e.id())
                    .and_then(|job_id| self.running.get(&job_id).cloned())
                else {
                    return Ok(());
                };
                let outcome = Outcome {
                    status: OutcomeStatus::Failed,
                    message: format!("エラー: sheetq の内部エラーでジョブが中断しました ({e})"),
                    url: None,
                    continue_args: None,
                    exit_code: None,
                    attempts: 1,
                    duration: std::time::Duration::ZERO,
                };
                (claimed, outcome)
            }
        };
        self.task_jobs
            .retain(|_, job_id| *job_id != claimed.row.job_id);
        self.running.remove(&claimed.row.job_id);
        self.job_stops.remove(&claimed.row.job_id);
        self.retry_notes.remove(&claimed.row.job_id);
        let read_before_retry = self
            .stops_read
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&claimed.row.job_id);
        let asked = self.stop_asked.remove(&claimed.row.job_id).or_else(|| {
            let text = read_before_retry?;
            let tz = self.served.layout.tz;
            crate::cancel::Request::parse(&text, tz).or_else(|| {
                Some(crate::cancel::Request::new(
                    "",
                    Utc::now(),
                    &claimed.row.job_id,
                ))
            })
        });
        let private = self
            .registry
            .keeps_output_private(&claimed.row.command, &claimed.row.function);
        let output = match self.outputs.remove(&claimed.row.job_id) {
            Some((capture, _)) => {
                capture.finish();
                if private {
                    format!("({})", crate::commands::output::KEPT_PRIVATE)
                } else {
                    capture.text(self.config.log_chars)
                }
            }
            None => String::new(),
        };
        if claimed.row.command.trim() == crate::panel::catalog::PANELS_COMMAND {
            // It made or showed panels: find them now, so results of presses on them land.
            self.served.relayout = true;
        }
        self.slots.give(claimed.slot);
        if self.is_heavy(&claimed.row) {
            self.slots.heavy(false);
        }
        self.report.jobs_finished += 1;
        let (finish, message) = match outcome.status {
            OutcomeStatus::Done => (Finish::Done, outcome.message.clone()),
            OutcomeStatus::Failed => (Finish::Error, outcome.message.clone()),
            OutcomeStatus::TimedOut => (Finish::Timeout, outcome.message.clone()),
            OutcomeStatus::Cancelled => match &asked {
                Some(request) => (
                    Finish::Cancelled,
                    request.message(Utc::now(), self.served.layout.tz, &outcome.message),
                ),
                None => (
                    Finish::Error,
                    "エラー: sheetq の停止時に猶予時間内に終わらなかったため中断しました (stopped at shutdown after the grace period)".to_string(),
                ),
            },
        };
        let row = &claimed.row;
        info!(job.id = ?row.job_id, target = %Logged(row.target_key()), worker = %claimed.tag, outcome = ?outcome.status, "job finished");
        let continuation = outcome.continue_args.as_ref().map(|args| Continuation {
            job_id: uuid::Uuid::new_v4().to_string(),
            args_json: serde_json::Value::Object(args.clone()).to_string(),
        });
        self.outbox.put(FinishedJob {
            url: outcome.url.clone().unwrap_or_default(),
            continuation,
            started_at: Some(claimed.started_at),
            log_row: claimed.log_row,
            linked: claimed.linked,
            panel_linked: claimed.panel_linked,
            output,
            ..FinishedJob::ended(row, claimed.tag.to_string(), finish, Utc::now(), message)
        })?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        Ok(())
    }

    /// Stops the jobs running here whose rows in `snapshot`, still under our claim, carry a
    /// request to stop (中止要求): their process groups get SIGTERM, `kill_grace`, SIGKILL,
    /// as at a timeout, and they end キャンセル. A job asked once is not asked again.
    fn stop_asked_jobs(&mut self, snapshot: &crate::queue::Snapshot) {
        let tz = self.served.layout.tz;
        for row in &snapshot.rows {
            let Some(claimed) = self.running.get(&row.job_id) else {
                continue;
            };
            if row.worker != claimed.tag.to_string() || self.stop_asked.contains_key(&row.job_id) {
                continue;
            }
            if let Some(request) = crate::cancel::asked_of(row, tz, Utc::now()) {
                self.stop(&row.job_id, request);
            }
        }
    }

    /// Stops the jobs of ours that `sheetq cancel` asked to stop through our heartbeat row
    /// (`workers::STOP_COLUMN`): jobs whose queue row is gone, which no 中止要求 can reach.
    fn stop_asked_by_heartbeat(&mut self, poll: &Poll) {
        let Some(own) = poll.own_heartbeat_row else {
            return;
        };
        let Some(beat) = poll.workers.iter().find(|h| h.row == own) else {
            return;
        };
        let tz = self.served.layout.tz;
        let asked: Vec<(String, crate::cancel::Request)> = beat
            .stops
            .lines()
            .filter_map(|line| crate::cancel::Request::parse(line, tz))
            .filter_map(|r| Some((r.job.clone()?, r)))
            .filter(|(job, _)| self.running.contains_key(job) && !self.stop_asked.contains_key(job))
            .collect();
        for (job, request) in asked {
            info!(job.id = ?job, "a stop asked through this daemon's heartbeat row (the job's queue row is gone)");
            self.stop(&job, request);
        }
    }

    /// Stops job `job_id` running here on `request`.
    fn stop(&mut self, job_id: &str, request: crate::cancel::Request) {
        let Some(token) = self.job_stops.get(job_id) else {
            return;
        };
        info!(job.id = ?job_id, by = %Logged(&request.who), "asked to stop the job; stopping its process group");
        self.observers.metrics.cancel_asked();
        token.cancel();
        self.stop_asked.insert(job_id.to_string(), request);
    }

    fn heartbeat_due(&self) -> bool {
        self.served
            .last_heartbeat
            .is_none_or(|t| t.elapsed() >= self.config.heartbeat_interval)
    }

    /// Our heartbeat row: the jobs we run or whose results we still have to write (plus
    /// `claiming`, the claims of a commit that carries it, less `writing`, the results that
    /// go in the same call) are listed for the other daemons' claim rules.
    fn heartbeat_row(
        &self,
        now: DateTime<Utc>,
        claiming: &[RunningRef],
        writing: &[&str],
    ) -> Vec<Cell> {
        // A job whose result still waits in the outbox is listed too: its row is still
        // 実行中, and other daemons must neither start its target nor take its row for free.
        // One whose result goes in this very call, or landed within the last minute (which
        // we watch), is listed as done: should that write land on another row, or a restore
        // from an older read show the job as 待機 again, no other daemon may run it a second
        // time; its target is free.
        let mut jobs: Vec<RunningRef> = self
            .running
            .values()
            .chain(&self.unsettled)
            .map(|c| RunningRef::of(&c.row))
            .chain(self.outbox.pending().map(|j| {
                let r = RunningRef::of(&j.as_row());
                if writing.contains(&j.job_id.as_str()) {
                    r.finished()
                } else {
                    r
                }
            }))
            .chain(self.served.holds.iter().map(|h| h.job.clone()))
            .chain(
                // The newest ones only: the cell holds at most 50,000 characters, and an
                // entry takes some 60 to 200.
                self.served
                    .landed
                    .iter()
                    .rev()
                    .filter(|(j, _)| !self.outbox.contains(&j.job_id))
                    .take(LANDED_LISTED)
                    .map(|(j, _)| RunningRef::of(&j.as_row()).finished()),
            )
            .collect();
        jobs.extend(claiming.iter().cloned());
        workers::row_cells(
            &self.config.worker_id,
            &crate::config::host_name(),
            self.config.slots,
            &jobs,
            now,
            &self.process,
            &self.served.account,
            &self.share.sharers(&self.config.worker_id),
        )
    }

    /// Adds our heartbeat row to `data` when due (or `force`d); a daemon without a row yet
    /// appends one. Returns whether a heartbeat was written or added.
    async fn heartbeat_into(
        &mut self,
        poll: &Poll,
        data: &mut Vec<ValueRange>,
        force: bool,
        writing: &[&str],
    ) -> Result<bool, DaemonError> {
        if !force && !self.heartbeat_due() {
            return Ok(false);
        }
        let row = self.heartbeat_row(Utc::now(), &[], writing);
        let last = workers::LAST_COLUMN;
        match poll.own_heartbeat_row {
            Some(r) => data.push(ValueRange::new(
                a1::range(WORKER_SHEET, &format!("A{r}:{last}{r}")),
                vec![row],
            )),
            None => {
                self.sheets
                    .append(
                        &a1::range(WORKER_SHEET, &format!("A{}:{last}", workers::FIRST_ROW)),
                        &[row],
                    )
                    .await?;
            }
        }
        self.served.last_heartbeat = Some(tokio::time::Instant::now());
        Ok(true)
    }

    /// Shutdown: no more claims; running jobs get the grace period, then are stopped; every
    /// result is written (or left in the outbox for the next start).
    async fn drain(&mut self) -> Result<(), DaemonError> {
        self.retries_stop.cancel();
        if !self.jobs.is_empty() {
            info!(running = self.jobs.len(), grace = ?self.config.shutdown_grace, "shutting down: waiting for running jobs");
        }
        let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
        while !self.jobs.is_empty() {
            tokio::select! {
                Some(joined) = self.jobs.join_next() => self.finished(joined)?,
                _ = tokio::time::sleep_until(deadline), if !self.job_cancel.is_cancelled() => {
                    warn!(running = self.jobs.len(), "grace period over: stopping the remaining jobs");
                    self.job_cancel.cancel();
                }
            }
        }
        match self.poll(true).await {
            Ok(poll) => {
                if let Err(e) = self.flush(&poll, Vec::new()).await {
                    warn!(error = %e, pending = self.outbox.len(), "results stay in the outbox until the next start");
                }
                // A last heartbeat with 0 slots: `status` shows this daemon stopped, and the
                // others stop sharing the quota with it.
                if let Some(row) = poll.own_heartbeat_row {
                    let mut cells = self.heartbeat_row(Utc::now(), &[], &[]);
                    if let Some(slots) = cells.get_mut(3) {
                        *slots = Cell::from(0u64);
                    }
                    let mut requests = vec![self.heartbeat_request(row, cells)];
                    // A lease kept for a claim that will not come now goes free with it.
                    requests.extend(self.release_kept_lease());
                    let batch = BatchUpdate {
                        requests,
                        ..Default::default()
                    };
                    if let Err(e) = self.sheets.batch_update(&batch).await {
                        debug!(error = %e, "could not write the last heartbeat");
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, pending = self.outbox.len(), "results stay in the outbox until the next start")
            }
        }
        if !self.served.unbind.is_empty() {
            let requests = self
                .served
                .unbind
                .drain(..)
                .map(|id| crate::sheets::Request::DeleteMetadata { id })
                .collect();
            let batch = crate::sheets::BatchUpdate {
                requests,
                ..Default::default()
            };
            if let Err(e) = self.sheets.batch_update(&batch).await {
                warn!(error = %e, "could not remove the bindings of finished jobs; `sheetq status` counts them");
            }
        }
        self.announcer
            .drain(self.config.shutdown_grace.min(NOTICES_AT_SHUTDOWN))
            .await;
        self.report.results_pending = self.outbox.len();
        info!(
            finished = self.report.jobs_finished,
            pending = self.report.results_pending,
            "sheetq daemon stopped"
        );
        Ok(())
    }
}

/// How many presses waiting (rows 待機 and ticks) make a spreadsheet's calls pressing
/// ([`Precedence::Pressing`]): more than the one a quiet spreadsheet's press makes.
const PRESSING: usize = 2;

/// The longest a stopping daemon waits for the notices due to go.
const NOTICES_AT_SHUTDOWN: StdDuration = StdDuration::from_secs(5);

/// Whether a process with this pid exists on this host (for telling our own dead
/// predecessor from a live second process with the same worker_id).
fn pid_alive(pid: u32) -> bool {
    crate::sheets::ledger::pid_alive(pid)
}

/// What start-up reads of the spreadsheet before its first poll.
struct Started {
    layout: Layout,
    protection: QueueProtection,
    meta: SpreadsheetMeta,
    panels: PanelIndex,
    /// Rows the archive took so far, by its counter.
    archived: u64,
    /// The queue's 状態 cells, when the queue was small enough to read whole.
    states: Option<Vec<Vec<Cell>>>,
}

/// Reads the spreadsheet's metadata, then the queue header with every sheet's marker cells
/// (the panels) and the archive's counter in one read: the fatal checks of start-up, in two
/// of the account's requests.
async fn load_layout(sheets: &dyn Sheets, config: &Config) -> Result<Started, DaemonError> {
    let mut meta = sheets.metadata().await?;
    let protection = queue_protection(&meta, sheets, config);
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let queue = meta
        .sheet(QUEUE_SHEET)
        .ok_or_else(|| DaemonError::MissingSheet(QUEUE_SHEET.into()))?;
    let worker = meta
        .sheet(WORKER_SHEET)
        .ok_or_else(|| DaemonError::MissingSheet(WORKER_SHEET.into()))?;
    // The heartbeat's columns and the stop column right of them (`workers::STOP_COLUMN`,
    // which `sheetq cancel` writes and every poll reads once the sheet is that wide).
    let wanted = (workers::HEADER.len() as i32).max(workers::STOP_COLUMN as i32 + 1);
    let mut widened = None;
    if worker.column_count < wanted {
        // Heartbeat rows grew a column (the account, the stop column): make room rather
        // than stop, once, at start.
        info!(
            columns = worker.column_count,
            wanted, "widening '_ワーカー' for the heartbeat's new columns"
        );
        let widen = crate::sheets::BatchUpdate {
            requests: vec![crate::sheets::Request::SetColumnCount {
                sheet_id: worker.sheet_id,
                columns: wanted,
            }],
            ..Default::default()
        };
        match sheets.batch_update(&widen).await {
            Ok(_) => widened = Some(wanted),
            Err(e) if worker.column_count < workers::HEADER.len() as i32 => {
                warn!(error = %e, "could not widen '_ワーカー'");
                return Err(DaemonError::WorkerSheetTooNarrow {
                    columns: worker.column_count,
                });
            }
            // The heartbeat fits: only `sheetq cancel` of a job whose row is gone waits
            // for a wider sheet (it widens it itself).
            Err(e) => warn!(error = %e, "could not widen '_ワーカー' for its stop column"),
        }
    }
    let last_col = queue.last_column();
    let markers = crate::panel::marker_ranges(&meta, &config.panel);
    // A small queue (a fresh one has 1000 rows) is read whole with the header: its 状態
    // column then needs no read of its own.
    let small = queue.row_count <= SMALL_QUEUE_ROWS;
    let queue_rows = if small { queue.row_count.max(1) } else { 1 };
    let mut ranges = vec![
        a1::range(QUEUE_SHEET, &format!("A1:{last_col}{queue_rows}")),
        a1::range(WORKER_SHEET, crate::archive::COUNTER_CELLS),
    ];
    let panel_ranges = markers.len();
    ranges.extend(markers);
    let log_sheet = meta
        .sheet(crate::joblog::LOG_SHEET)
        .filter(|_| config.log_chars > 0);
    if log_sheet.is_some() {
        ranges.push(a1::range(crate::joblog::LOG_SHEET, "1:1"));
    }
    let read = sheets.read(&ranges).await?;
    let log = log_sheet.and_then(|sheet| {
        let header = read
            .get(2 + panel_ranges)
            .and_then(|v| v.values.first())
            .cloned()
            .unwrap_or_default();
        crate::joblog::LogLayout::from_header(sheet.sheet_id, &header)
            .inspect_err(|e| warn!("{e}"))
            .ok()
    });
    if log.is_none() && config.log_chars > 0 {
        info!(
            "no '{}' sheet: jobs' output is kept under state_dir only; `sheetq init` makes the sheet",
            crate::joblog::LOG_SHEET
        );
    }
    let header_row = crate::sheets::first_row(&read);
    let columns = ColumnMap::from_header(&header_row, &config.headers)?;
    let states = small.then(|| {
        let rows = read.first().map(|v| v.values.as_slice()).unwrap_or(&[]);
        state_cells(
            rows.get(1..).unwrap_or_default(),
            columns.index(queue::Column::State),
        )
    });
    let archived = (read.get(1))
        .and_then(|v| v.values.first()?.get(1).and_then(archive::count_of))
        .unwrap_or(0);
    let panels = PanelIndex::build(
        &meta,
        read.get(2..2 + panel_ranges).unwrap_or_default(),
        &config.panel,
    );
    let layout = Layout {
        tz,
        worker_sheet_id: worker.sheet_id,
        queue_sheet_id: queue.sheet_id,
        last_col,
        columns,
        log,
    };
    if let Some(columns) = widened {
        // So that the first poll reads the stop column already.
        if let Some(w) = meta.sheets.iter_mut().find(|s| s.title == WORKER_SHEET) {
            w.column_count = columns;
        }
    }
    Ok(Started {
        layout,
        protection,
        meta,
        panels,
        archived,
        states,
    })
}

/// Queues of at most this many grid rows are read whole at start-up (with the header), so
/// that finding the unfinished window costs no read of its own.
const SMALL_QUEUE_ROWS: i32 = 2000;

/// The 状態 cells of queue `rows` (from row 2), shaped as a read of the 状態 column
/// alone gives them: one cell a row where there is one, nothing after the last.
fn state_cells(rows: &[Vec<Cell>], state: u32) -> Vec<Vec<Cell>> {
    let mut cells: Vec<Vec<Cell>> = rows
        .iter()
        .map(|row| {
            row.get(state as usize)
                .filter(|c| !queue::cell_text(c).is_empty())
                .cloned()
                .into_iter()
                .collect()
        })
        .collect();
    while cells.last().is_some_and(Vec::is_empty) {
        cells.pop();
    }
    cells
}

/// Whether only sheetq's service accounts (and the owner) can write the queue, as the
/// spreadsheet's protected ranges say: `Err` says why not, with the fix.
type QueueProtection = Result<(), String>;

/// The queue's protection, from metadata read anyway (at start, or on a reload).
fn queue_protection(
    meta: &crate::sheets::SpreadsheetMeta,
    sheets: &dyn Sheets,
    config: &Config,
) -> QueueProtection {
    let editors = crate::protection::Editors::new(&sheets.account(), &config.protect_editors)?;
    crate::protection::queue_protected(meta, QUEUE_SHEET, editors.accounts())
}

/// The registry that trusts the queue as far as `protection` allows: a continuation's args
/// only on a protected queue; and `allow` (who may press) only there, since anyone may write
/// any 依頼者 into an open queue. A config with `allow` on an open queue cannot run.
fn trust_queue(
    registry: Registry,
    config: &Config,
    protection: QueueProtection,
) -> Result<Registry, DaemonError> {
    match protection {
        Ok(()) => Ok(registry.with_queue_protected(true)),
        Err(why) if registry.catalog().needs_protected_queue() => {
            Err(DaemonError::AllowOnOpenQueue(why))
        }
        Err(why) => {
            if config.protect {
                warn!(why = %why, "the queue is not protected: any editor of the spreadsheet can write any job into it (sheetq still checks each against the config)");
            } else {
                warn!("protect = false: the queue is open to every editor of the spreadsheet; 依頼者 can be forged, and allow cannot be used");
            }
            Ok(registry.with_queue_protected(false))
        }
    }
}

/// A job the config does not allow: logged with who asked for what, and counted by reason.
/// Its row and panel show the refusal as the job's エラー message. Sheet values go to the log
/// escaped (`?`), never as raw text: a line break in a 依頼者 must not forge a log line.
fn refused(
    metrics: &metrics::Metrics,
    spec: &JobSpec,
    rejected: &crate::commands::JobRejected,
    span: &tracing::Span,
) {
    metrics.job_refused(rejected.reason);
    span.in_scope(|| {
        warn!(
            reason = %rejected.reason,
            requester = %Logged(&spec.requester),
            target = %Logged(&spec.target),
            function = %Logged(&spec.function),
            command = %Logged(&spec.command),
            refused = %Logged(&rejected.message),
            "job refused; nothing ran"
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_queue_read_whole_gives_the_state_cells_a_read_of_the_state_column_would() {
        let rows = vec![
            vec![json!("j1"), json!("x"), json!("完了")],
            vec![json!("j2")],
            vec![json!("j3"), json!("x"), json!("待機"), json!("more")],
            vec![json!("j4"), json!("x"), json!("")],
            vec![],
        ];
        assert_eq!(
            state_cells(&rows, 2),
            vec![vec![json!("完了")], vec![], vec![json!("待機")]],
            "one cell a row where there is one, nothing after the last filled one"
        );
    }

    #[test]
    fn a_quiet_spreadsheet_is_polled_less_often_up_to_idle_poll_interval() {
        let s = StdDuration::from_secs;
        let (poll, idle) = (s(2), s(30));
        assert_eq!(pace(s(0), poll, idle), poll, "work just seen");
        assert_eq!(
            pace(s(20), poll, idle),
            poll,
            "still quiet only for a while"
        );
        assert_eq!(pace(s(60), poll, idle), s(6), "a tenth of the quiet time");
        assert_eq!(
            pace(s(3600), poll, idle),
            idle,
            "never longer than idle_poll_interval"
        );
        assert_eq!(
            pace(s(3600), poll, poll),
            poll,
            "idle_poll_interval = poll_interval: as before"
        );
    }

    #[test]
    fn spacing_never_lets_a_heartbeat_lapse_however_many_daemons_take_turns() {
        let s = StdDuration::from_secs;
        let (poll, beat) = (s(2), s(30));
        assert_eq!(
            poll_period(poll, poll, beat, 3),
            s(6),
            "turns at poll_interval, as before"
        );
        assert_eq!(
            poll_period(poll, poll, beat, 20),
            s(40),
            "as before, many daemons"
        );
        assert_eq!(poll_period(s(30), poll, beat, 1), s(30));
        assert_eq!(
            poll_period(s(30), poll, beat, 4),
            beat,
            "four quiet daemons would each poll every 2 min, past dead_after's 2 heartbeats"
        );
        assert_eq!(poll_period(s(30), poll, beat, 20), s(40));
    }
}
