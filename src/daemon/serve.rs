//! Serving spreadsheets: one daemon per spreadsheet a process serves, started in turn
//! (`start_pace`) and retried while the API fails, the reloads fanned out to each, and the
//! process's slots and account budgets split among them (docs/design.md §6).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, warn, Instrument};

use crate::commands::{Registry, Runner};
use crate::config::Config;
use crate::metrics::Health;
use crate::sheets::Sheets;

use super::shared::Share;
use super::{
    hold_off, shared, start_pace, Daemon, DaemonError, Observers, Reload, Reloads, RunReport,
    Shared, Spreadsheet,
};

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
pub(super) async fn fan_out_reloads(
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
pub(super) async fn start_and_run(
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
pub(super) async fn start_and_run_paced(
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
pub(super) async fn wait_to_start(
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
pub(super) const START_STEP_LIMIT: StdDuration = StdDuration::from_secs(180);

/// Waits between attempts to start while the API fails: backoff with full jitter up to a
/// minute, never given up (only configuration and credential errors end the process).
pub(super) const START_RETRY: crate::sheets::retry::RetryPolicy =
    crate::sheets::retry::RetryPolicy {
        max_attempts: u32::MAX,
        initial_delay: StdDuration::from_millis(500),
        max_delay: StdDuration::from_secs(60),
        max_elapsed: StdDuration::MAX,
    };

/// The shortest wait between two attempts to start.
pub(super) const START_RETRY_FLOOR: StdDuration = StdDuration::from_millis(100);

/// The next config to take up; pending forever without a source of reloads (or once the
/// sender is gone).
pub(super) async fn next_reload(reloads: &mut Option<Reloads>) -> Arc<Reload> {
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
