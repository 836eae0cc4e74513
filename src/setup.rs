//! Setting up from a validated [`Config`]: the spreadsheet client (credentials, budget,
//! timeouts, retries, dry run) and the command registry. Shared by the command line, the
//! demo and the bench.

use std::sync::Arc;

use anyhow::Context as _;

use crate::commands::Registry;
use crate::config::Config;
use crate::sheets::auth::Credentials;
use crate::sheets::budget::{Budget, Budgets, Cap, GOOGLE_PER_MINUTE, ONE_SHOT_CAP};
use crate::sheets::dry_run::DryRunSheets;
use crate::sheets::google::{GoogleSheets, GoogleSheetsConfig};
use crate::sheets::ledger::{Ledger, Role};
use crate::sheets::retry::RetryPolicy;
use crate::sheets::stats::SheetsStats;
use crate::sheets::Sheets;

/// The command registry of `config`, or every problem in its `[commands]` tables and in
/// the `[[functions]]` that name those commands.
pub fn registry(config: &Config) -> anyhow::Result<Registry> {
    let problems = |source: &str, problems| {
        anyhow::Error::new(crate::config::ConfigError {
            source_name: source.into(),
            problems,
        })
    };
    match checked_registry(config) {
        Err(commands) => Err(problems("[commands]", commands)),
        Ok((_, functions)) if !functions.is_empty() => Err(problems("[[functions]]", functions)),
        Ok((registry, _)) => Ok(registry),
    }
}

/// The command registry of `config` with the problems of the `[[functions]]` that name its
/// commands (`Ok`), or the problems of its `[commands]` tables (`Err`). `sheetq check` reports
/// either with the spreadsheet's problems; the daemon refuses to start on any.
pub fn checked_registry(config: &Config) -> Result<(Registry, Vec<String>), Vec<String>> {
    let registry = Registry::from_toml(&config.commands, config.stale_after)?;
    let problems = registry.check_functions(&config.catalog);
    Ok((registry.with_catalog(config.catalog.clone()), problems))
}

/// [`checked_registry`] for `check`, which goes on past faults: the commands that parse,
/// and every problem once (a command's own faults, then the functions' against it).
pub fn registry_for_check(config: &Config) -> (Registry, Vec<String>) {
    let (registry, mut problems) = Registry::from_toml_partly(&config.commands, config.stale_after);
    problems.extend(registry.check_functions(&config.catalog));
    (registry.with_catalog(config.catalog.clone()), problems)
}

/// The spreadsheet port for `config`: the Google client (pointed at `api_base_url`), with
/// the configured budget, timeouts and retries; wrapped in dry-run when asked.
/// `credentials` overrides the config's (the embedded local mode passes the emulator's key).
pub async fn connect(
    config: &Config,
    credentials: Option<Credentials>,
    dry_run: bool,
) -> anyhow::Result<Arc<dyn Sheets>> {
    connect_with(config, credentials, dry_run, Arc::new(SheetsStats::new())).await
}

/// [`connect`], counting every request into `stats` (which the metrics endpoint renders).
pub async fn connect_with(
    config: &Config,
    credentials: Option<Credentials>,
    dry_run: bool,
    stats: Arc<SheetsStats>,
) -> anyhow::Result<Arc<dyn Sheets>> {
    let (retry, budgets) = (daemon_retry(config), budgets(config));
    let (sheets, budgets) =
        connect_retrying(config, credentials, dry_run, stats, retry, budgets, None).await?;
    keep_to_record(config, &budgets, &sheets.account(), Role::Daemon);
    Ok(sheets)
}

/// The clients of a config that serves several spreadsheets (`[[spreadsheets]]`), one per
/// spreadsheet of `configs` ([`Config::each_spreadsheet`]): those that use one key file
/// share one request budget, as they share the account's quota at Google. Two key files of
/// one service account would each get the whole budget, so that is refused. Each client
/// counts its calls apart ([`Sheets::call_stats`]), for its spreadsheet's metrics and liveness.
pub async fn connect_each(
    configs: &[Config],
    dry_run: bool,
) -> anyhow::Result<Vec<Arc<dyn Sheets>>> {
    let mut by_key: Vec<(Option<std::path::PathBuf>, Budgets)> = Vec::new();
    let mut clients = Vec::new();
    let mut accounts: Vec<(String, Option<std::path::PathBuf>, String)> = Vec::new();
    for config in configs {
        let budgets = match by_key.iter().find(|(k, _)| *k == config.credentials) {
            Some((_, b)) => b.clone(),
            None => {
                let b = budgets(config);
                by_key.push((config.credentials.clone(), b.clone()));
                b
            }
        };
        let retry = daemon_retry(config);
        let stats = Arc::new(SheetsStats::new());
        let (client, budgets) =
            connect_retrying(config, None, dry_run, stats, retry, budgets, None).await?;
        keep_to_record(config, &budgets, &client.account(), Role::Daemon);
        let account = client.account();
        if let Some((_, key, label)) = accounts
            .iter()
            .find(|(a, k, _)| *a == account && !account.is_empty() && *k != config.credentials)
        {
            anyhow::bail!(
                "spreadsheets {label:?} and {:?} use two key files ({} and {}) of one service account, {account}: each would get the account's whole request budget; give them the same credentials",
                config.label,
                shown(key),
                shown(&config.credentials)
            );
        }
        accounts.push((account, config.credentials.clone(), config.label.clone()));
        clients.push(client);
    }
    Ok(clients)
}

/// What one process serves of a `[[spreadsheets]]` config: each of `configs`
/// ([`Config::each_spreadsheet`]) with its commands, all checked before any request is made,
/// and its client ([`connect_each`]).
pub async fn spreadsheets(
    configs: Vec<Config>,
    dry_run: bool,
) -> anyhow::Result<Vec<crate::daemon::Spreadsheet>> {
    let registries = configs
        .iter()
        .map(registry)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let clients = connect_each(&configs, dry_run).await?;
    Ok(clients
        .into_iter()
        .zip(configs)
        .zip(registries)
        .map(|((sheets, config), registry)| crate::daemon::Spreadsheet {
            sheets,
            config,
            registry,
        })
        .collect())
}

fn shown(key: &Option<std::path::PathBuf>) -> String {
    key.as_ref().map_or_else(
        || "the default credentials".to_string(),
        |p| p.display().to_string(),
    )
}

/// The daemon's retries of a failing call: `max_retries` after the first attempt.
fn daemon_retry(config: &Config) -> RetryPolicy {
    RetryPolicy {
        max_attempts: config.max_retries + 1,
        ..RetryPolicy::default()
    }
}

/// Two buckets: Google counts reads and writes apart. The daemon narrows both to its share
/// of the account's budget once it sees the other daemons on the account.
fn budgets(config: &Config) -> Budgets {
    Budgets {
        read: budget(config.requests_per_minute),
        write: budget(config.requests_per_minute),
    }
}

/// How long a one-shot command's call waits for the account's budget before it says so.
pub const ONE_SHOT_SAYS_WAITS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// The client of a one-shot command (`init`, `check`, `status`, `enqueue`): a person waits
/// for it, so a failing call is retried for a few seconds, not the daemon's minute and a half,
/// and a call that waits for the account's budget longer than
/// [`ONE_SHOT_SAYS_WAITS_AFTER`] says so. The one-shot clients of one key file (a command
/// acting on several spreadsheets) share one budget, as they share the account's quota.
pub async fn connect_one_shot(config: &Config) -> anyhow::Result<Arc<dyn Sheets>> {
    static BY_KEY: std::sync::Mutex<Vec<(Option<std::path::PathBuf>, Budgets)>> =
        std::sync::Mutex::new(Vec::new());
    let budgets = {
        let mut by_key = BY_KEY.lock().unwrap_or_else(|p| p.into_inner());
        match by_key.iter().find(|(k, _)| *k == config.credentials) {
            Some((_, b)) => b.clone(),
            None => {
                let b = budgets(config);
                by_key.push((config.credentials.clone(), b.clone()));
                b
            }
        }
    };
    connect_retrying(
        config,
        None,
        false,
        Arc::new(SheetsStats::new()),
        RetryPolicy::one_shot(),
        budgets,
        Some(ONE_SHOT_SAYS_WAITS_AFTER),
    )
    .await
    .map(|(sheets, budgets)| {
        keep_to_record(config, &budgets, &sheets.account(), Role::OneShot);
        sheets
    })
}

/// Keeps `budgets` to the record this machine's sheetq processes keep of `account`'s
/// requests (docs/design.md §6): a daemon leaves room for the one-shot commands' requests
/// within its share; a one-shot command keeps the account's whole minute within Google's
/// quota (or within the budget configured above it, for a raised quota). Without a record
/// (an unwritable `state_dir`), the budget goes on alone, and says so.
fn keep_to_record(config: &Config, budgets: &Budgets, account: &str, role: Role) {
    let account = if account.is_empty() {
        "default"
    } else {
        account
    };
    let dir = config.quota_dir();
    let ledger = match Ledger::open(&dir, account, role) {
        Ok(ledger) => ledger,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot keep the record of the account's requests: the daemons and one-shot commands of the account on this machine will not leave room for each other; make the state directory writable for every user that runs sheetq");
            return;
        }
    };
    let cap = match role {
        Role::Daemon => Cap::Share,
        Role::OneShot => match budgets.read.limits() {
            Some((requests, _, burst)) if requests > GOOGLE_PER_MINUTE => {
                Cap::Fixed(requests + burst - 1)
            }
            _ => ONE_SHOT_CAP,
        },
    };
    budgets.read.keep_to(Arc::clone(&ledger), false, cap);
    budgets.write.keep_to(ledger, true, cap);
}

async fn connect_retrying(
    config: &Config,
    credentials: Option<Credentials>,
    dry_run: bool,
    stats: Arc<SheetsStats>,
    retry: RetryPolicy,
    budgets: Budgets,
    say_waits_after: Option<std::time::Duration>,
) -> anyhow::Result<(Arc<dyn Sheets>, Budgets)> {
    let credentials =
        credentials.unwrap_or_else(|| Credentials::resolve(config.credentials.as_deref()));
    let mut gc = GoogleSheetsConfig::new(config.spreadsheet_id.clone(), credentials);
    gc.api_base_url = config.api_base_url.clone();
    gc.call_timeout = config.call_timeout;
    gc.retry = retry;
    gc.budget = budgets.clone();
    gc.stats = stats;
    gc.say_waits_after = say_waits_after;
    let google = GoogleSheets::new(gc)
        .await
        .context("cannot set up the Google Sheets client")?;
    let sheets: Arc<dyn Sheets> = if dry_run {
        Arc::new(DryRunSheets::new(google))
    } else {
        Arc::new(google)
    };
    Ok((sheets, budgets))
}

/// The client-side request budget: `per_minute` on average, with a burst small enough that
/// no 60-second window holds more than Google's 60 requests per user (for budgets of 50 or
/// less) yet large enough for a claim pass plus a write-back to go out without waiting.
pub fn budget(per_minute: u32) -> Budget {
    let burst = if per_minute <= 60 {
        (61 - per_minute).clamp(1, 10)
    } else {
        10
    };
    Budget::with_burst(per_minute, std::time::Duration::from_secs(60), burst)
}
