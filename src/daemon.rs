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
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::claim::ClaimPolicy;
use crate::commands::{Registry, Runner};
use crate::config::Config;
use crate::metrics::{Health, Metrics};
use crate::notify::Notifier;
use crate::outbox::{Outbox, OutboxError};
use crate::queue::{self, ColumnMap, QueueRow, WorkerTag};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{ErrorKind, Sheets, SheetsError};
use crate::watch::Watch;

mod approvals;
mod archive;
mod cancels;
mod cells;
mod claim_pass;
mod claim_work;
mod claims;
mod effects;
mod fleet;
mod guards;
mod hold_off;
mod job_log;
mod jobs;
mod kept_lease;
mod lease_calls;
mod ledger;
mod notices;
mod panel;
mod pass;
mod poll;
mod provenance;
mod rollouts;
mod schedules;
mod serve;
pub(crate) mod shared;
mod stale;
mod start;
mod start_pace;
mod through;
mod writeback;

use poll::Poll;
pub use serve::run_spreadsheets;
use serve::start_and_run;
use shared::{Share, Slots};
use start::queue_protection;

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
    policy: ClaimPolicy,
    observers: Observers,
    /// The process's job slots, shared with the other spreadsheets it serves.
    slots: Slots,
    /// The account's request budget as this process splits it.
    share: Share,
    /// Cancels running jobs once the shutdown grace period is over.
    job_cancel: CancellationToken,
    /// Cancelled when shutdown begins: a job waiting for a retry ends with its last
    /// attempt's outcome instead of holding the drain for its wait.
    retries_stop: CancellationToken,
    /// The status line last sent to the service manager (sent again only when it changes).
    status_sent: String,
    /// `host pid` of this process, in the heartbeat: one worker_id, one process.
    process: String,
    report: RunReport,
    /// The spreadsheet this daemon serves, and what it has learnt of it.
    served: Served,
    /// Who asked to stop which running job, and each one's token (`cancels`).
    stops: cancels::Stops,
    /// The job log's writes and each running job's output (`job_log`).
    logs: job_log::Logs,
    /// The jobs this daemon runs, and their tasks (`jobs`).
    jobs: jobs::Jobs,
}

/// What one daemon keeps of the spreadsheet it serves, apart from what the process owns
/// (slots, runner, outbox, observers): the layout, the queue window and sweep, the archive's
/// pace, panels and the sheet list, the heartbeat, bindings and writes pending, results
/// landed, the account's share, the watch, holds, the lease and its fences.
struct Served {
    layout: Layout,
    /// Per schedule, up to when (this machine's clock) its occurrences were looked at and
    /// queued or found queued; none until the first (docs/design.md §5.4).
    schedules_seen: HashMap<String, DateTime<Utc>>,
    /// How long each heartbeat, the lease and each running row's claim have stood still,
    /// in our own time while our reads succeed: every liveness and staleness decision
    /// (docs/design.md §3.1).
    watch: Watch,
    /// The row problems already reported ([`Daemon::report_row_problems`]).
    reported: HashSet<String>,
    /// Set while the spreadsheet is held off (`hold_off`).
    held_off: Option<hold_off::HeldOff>,
    /// The archive's pace (`archive`).
    archive: archive::Pace,
    /// The window of unfinished rows the polls read, and the sweep above it (`poll`).
    window: poll::Window,
    /// The lease as this daemon last took, kept or fenced it (`lease_calls`, `kept_lease`).
    lease: lease_calls::Held,
    /// The other daemons, the account's budget and our heartbeat (`fleet`).
    fleet: fleet::Fleet,
    /// Writes through bindings waiting, in doubt or landed, and bindings to remove (`through`).
    writes: through::Pending,
    /// The marks of continuation rows and whether every daemon can see them (`provenance`).
    continuations: provenance::Continuations,
    /// Whose protections bar which cells (`guards`, `hold_off`).
    guards: guards::Protections,
    /// The pass's own pace: how many polls, whether presses press, when work was last seen,
    /// a layout to read again (`pass`).
    pass: pass::PassState,
    /// The sheets of the spreadsheet, as last listed, and their ids (`cells`).
    sheets: cells::SheetList,
    /// The panels, as the marker cells of the last poll showed them (`panel`).
    panels: panel::Panels,
    /// The inputs' `choices_from` ranges as the last read found them (`poll`): what a
    /// job's choice from a range is checked against when it is admitted.
    listed: crate::inputs::Listed,
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

/// The claim rules' timing from `config`.
fn claim_policy(config: &Config) -> ClaimPolicy {
    ClaimPolicy {
        stale_after: chrono::Duration::from_std(config.stale_after)
            .unwrap_or(chrono::Duration::minutes(15)),
        dead_after: chrono::Duration::from_std(config.dead_after)
            .unwrap_or(chrono::Duration::minutes(2)),
    }
}

impl Daemon {
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
        self.served.writes.rows_moved_at = Some(tokio::time::Instant::now());
    }

    /// Whether reads cover the whole queue because rows moved recently.
    fn rows_moving(&self) -> bool {
        self.served
            .writes
            .rows_moved_at
            .is_some_and(|t| t.elapsed() < WHOLE_QUEUE_AFTER_MOVES)
    }
}

/// Whether only sheetq's service accounts (and the owner) can write the queue, as the
/// spreadsheet's protected ranges say: `Err` says why not, with the fix.
type QueueProtection = Result<(), String>;
