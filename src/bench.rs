//! `sheetq bench`: a benchmark anyone can run, on the embedded spreadsheet under Google's
//! quota. It owns the whole measurement: the emulator and the daemons it starts in-process,
//! the jobs and presses it puts in, the figures it takes from the emulator's request log and
//! store, from `/proc`, and the Markdown table it prints.
//!
//! Four parts, one after the other:
//! - saturation: N daemons (one service account, or one each) run M zero-second `echo` jobs
//!   over T targets, each target a panel; jobs/min, reads and writes per job, the peak
//!   minute of each account and the requests the quota refused;
//! - presses: a ▶ box ticked K times on the demo panels while those daemons run (they take
//!   ticks in themselves, `intake = "poll"`): tick → queue row and tick → `実行中`, watched in
//!   the store, not through the API;
//! - idle: for each queue size, that many finished rows seeded straight into the store, then
//!   one daemon (its own account) left idle for P polls: bytes and CPU time per poll;
//! - peak RSS (`VmHWM`) after the saturation run and after each idle run;
//! - then, each on a spreadsheet of its own: a failing job without and with retries
//!   ([`retry`]), presses without and with inputs ([`inputs`]), and 20 jobs pressed one by
//!   one against one rollout over the same targets ([`rollout`]).
//!
//! Everything runs in one process, the emulator too: process CPU and RSS include it, which
//! is why the daemon's own CPU is measured on its threads alone (see [`cpu_of_threads`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chrono::{DateTime, Utc};
use serde_json::{json, Value as Json};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::daemon::{Observers, RunReport};
use crate::emulator::{Emulator, EmulatorOptions, RequestRecord};
use crate::metrics::{Health, Metrics, Verdict};
use crate::notify::Notifier;
use crate::queue::{self, Column, ColumnMap, QUEUE_SHEET};
use crate::sheets::auth::Credentials;
use crate::sheets::stats::SheetsStats;
use crate::{a1, admin};

pub mod cold;
mod figures;
pub mod fleet;
pub mod inputs;
mod process;
pub mod retry;
pub mod rollout;
pub mod schedule;

use figures::{mib, rss_of, secs, vm_hwm};
pub use figures::{peak_per_minute, percentile};

/// Whose service account the daemons use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Accounts {
    /// All daemons share one service account, hence one user's quota (the usual set-up: one
    /// key copied to every VM).
    #[default]
    One,
    /// Each daemon has its own service account and its own user quota.
    Each,
}

/// A comma-separated list of queue sizes (`0,1000,10000`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes(pub Vec<usize>);

impl FromStr for Sizes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let sizes = s
            .split(',')
            .map(|p| p.trim().replace('_', "").parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                format!("{s:?} is not a comma-separated list of row counts (0,1000,10000)")
            })?;
        Ok(Sizes(sizes))
    }
}

impl std::fmt::Display for Sizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// Options of `sheetq bench`. Those `--quick` sets are options here so that an explicit
/// value wins over `--quick`'s.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Daemons run in the saturation and press parts [default: 2].
    #[arg(long)]
    pub daemons: Option<usize>,
    /// Job slots of each daemon.
    #[arg(long, default_value_t = 8)]
    pub slots: usize,
    /// The daemons' `log_chars`: each job's output kept in its `_ジョブログ` row, made in the
    /// claim commit and filled with the result; 0 turns the log rows off, to compare.
    #[arg(long, default_value_t = crate::joblog::DEFAULT_CHARS)]
    pub log_chars: u32,
    /// One service account for all daemons (one user quota), or one each.
    #[arg(long, value_enum, default_value_t = Accounts::One)]
    pub accounts: Accounts,
    /// Zero-second jobs in the saturation run [default: 200].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Targets (panels) the jobs are spread over; one target runs one job at a time.
    #[arg(long, default_value_t = 50)]
    pub targets: usize,
    /// Ticks of a ▶ box for the tick → row / → 実行中 latencies [default: 10].
    #[arg(long)]
    pub presses: Option<usize>,
    /// Queue sizes (finished rows) for the idle-poll measurements [default:
    /// 0,1000,10000,100000].
    #[arg(long)]
    pub sizes: Option<Sizes>,
    /// Idle polls measured at each queue size.
    #[arg(long, default_value_t = 20)]
    pub idle_polls: usize,
    /// Small numbers: 2 daemons, 40 jobs, sizes 0,1000, 5 presses (options given
    /// explicitly still win).
    #[arg(long)]
    pub quick: bool,
    /// The daemons' poll_interval in the saturation and press parts (the config's default).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,
    /// The daemons' requests_per_minute budget (the config's default).
    #[arg(long, default_value_t = 50)]
    pub requests_per_minute: u32,
    /// Presses start at least this far apart: a press costs about 4 writes (lease, intake
    /// row, commit, result), so the default 6 s keeps them within two daemons' budget.
    #[arg(long, default_value = "6s", value_parser = humantime::parse_duration)]
    pub press_every: Duration,
    /// Rest between the saturation run and the first press, so the budget it spent is back
    /// (a minute: Google's quota window).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub press_rest: Duration,
    /// Give up when a part has not finished after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub deadline_secs: u64,
    /// Instead of the parts above: one daemon serving many spreadsheets (`--spreadsheets`),
    /// under one service account and then two; per-account peak minute, tick → 実行中 on a
    /// busy and on quiet spreadsheets, jobs a minute, the daemon's RSS.
    #[arg(long)]
    pub fleet: bool,
    /// Spreadsheets of the fleet runs: the warm runs' (10 unless given) and, with `--cold`,
    /// the cold run's (6 unless given).
    #[arg(long)]
    pub spreadsheets: Option<usize>,
    /// How long the fleet run's presses go on (over a minute, for the peak minute).
    #[arg(long, default_value = "150s", value_parser = humantime::parse_duration)]
    pub fleet_for: Duration,
    /// With `--fleet`: only the start from cold (`init`, then `run`, then ticks in its first
    /// seconds on `--spreadsheets` spreadsheets, 6 unless given), not the warm runs.
    #[arg(long, requires = "fleet")]
    pub cold: bool,
    /// Only what a `[[schedules]]` entry costs: one daemon with a schedule of every minute
    /// for this many minutes, then as long without it; requests a minute and per scheduled
    /// job.
    #[arg(long, value_name = "MINUTES", conflicts_with = "fleet")]
    pub schedule_minutes: Option<u64>,
}

impl Default for BenchArgs {
    /// What `sheetq bench` without options runs.
    fn default() -> Self {
        let d = Params::default();
        BenchArgs {
            daemons: None,
            slots: d.slots,
            log_chars: d.log_chars,
            accounts: d.accounts,
            jobs: None,
            targets: d.targets,
            presses: None,
            sizes: None,
            idle_polls: d.idle_polls,
            quick: false,
            poll_interval: d.poll_interval,
            requests_per_minute: d.requests_per_minute,
            press_every: d.press_every,
            press_rest: d.press_rest,
            deadline_secs: d.deadline_secs,
            fleet: false,
            spreadsheets: None,
            fleet_for: Duration::from_secs(150),
            cold: false,
            schedule_minutes: None,
        }
    }
}

impl BenchArgs {
    /// The parameters of the run: explicit options, else `--quick`'s, else the defaults.
    pub fn params(&self) -> Params {
        let d = Params::default();
        fn pick<T>(quick: bool, q: T, normal: T) -> T {
            if quick {
                q
            } else {
                normal
            }
        }
        let quick = self.quick;
        let mut sizes = self
            .sizes
            .clone()
            .unwrap_or_else(|| pick(quick, Sizes(vec![0, 1000]), d.sizes.clone()));
        sizes.0.sort_unstable();
        sizes.0.dedup();
        Params {
            daemons: self.daemons.unwrap_or(pick(quick, 2, d.daemons)).max(1),
            slots: self.slots,
            log_chars: self.log_chars,
            accounts: self.accounts,
            jobs: self.jobs.unwrap_or(pick(quick, 40, d.jobs)),
            targets: self.targets.max(1),
            presses: self.presses.unwrap_or(pick(quick, 5, d.presses)),
            sizes,
            idle_polls: self.idle_polls,
            poll_interval: self.poll_interval,
            requests_per_minute: self.requests_per_minute,
            press_every: self.press_every,
            press_rest: self.press_rest,
            deadline_secs: self.deadline_secs,
            daemon_exe: std::env::current_exe().ok(),
        }
    }
}

/// What one run measures (see [`BenchArgs`] for each).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub daemons: usize,
    pub slots: usize,
    pub log_chars: u32,
    pub accounts: Accounts,
    pub jobs: usize,
    pub targets: usize,
    pub presses: usize,
    pub sizes: Sizes,
    pub idle_polls: usize,
    pub poll_interval: Duration,
    pub requests_per_minute: u32,
    pub press_every: Duration,
    pub press_rest: Duration,
    pub deadline_secs: u64,
    /// The `sheetq` binary to run one idle daemon as a process of its own, for its peak RSS
    /// without the in-process emulator's store (`None`: not measured).
    pub daemon_exe: Option<std::path::PathBuf>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            daemons: 2,
            slots: 8,
            log_chars: crate::joblog::DEFAULT_CHARS,
            accounts: Accounts::One,
            jobs: 200,
            targets: 50,
            presses: 10,
            sizes: Sizes(vec![0, 1000, 10_000, 100_000]),
            idle_polls: 20,
            poll_interval: Duration::from_secs(2),
            requests_per_minute: 50,
            press_every: Duration::from_secs(6),
            press_rest: Duration::from_secs(60),
            deadline_secs: 900,
            daemon_exe: None,
        }
    }
}

impl Params {
    /// The command line that repeats this run.
    pub fn command_line(&self) -> String {
        format!(
            "sheetq bench --daemons {} --slots {} --accounts {} --jobs {} --targets {} --presses {} --sizes {} --idle-polls {} --poll-interval {} --requests-per-minute {} --press-every {} --press-rest {}",
            self.daemons,
            self.slots,
            match self.accounts {
                Accounts::One => "one",
                Accounts::Each => "each",
            },
            self.jobs,
            self.targets,
            self.presses,
            self.sizes,
            self.idle_polls,
            humantime::format_duration(self.poll_interval),
            self.requests_per_minute,
            humantime::format_duration(self.press_every),
            humantime::format_duration(self.press_rest)
        )
    }
}

/// Requests of one account in the saturation run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccountLoad {
    pub account: String,
    pub reads: usize,
    pub writes: usize,
    /// Most requests served in any 60 s window (the whole run when it was shorter).
    pub peak_reads_per_min: usize,
    pub peak_writes_per_min: usize,
    pub refused_reads: u64,
    pub refused_writes: u64,
}

/// How the daemons' Google clients waited, summed over the daemons, in one part.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientWaits {
    /// Calls that waited for the client-side budget (`requests_per_minute`).
    pub budget_waits: u64,
    pub budget_waited: Duration,
    /// Attempts repeated after a retryable failure (429, 5xx, timeout).
    pub retries: u64,
}

impl ClientWaits {
    fn of(stats: &[Arc<SheetsStats>]) -> Self {
        stats
            .iter()
            .map(|s| s.snapshot())
            .fold(Self::default(), |a, s| ClientWaits {
                budget_waits: a.budget_waits + s.throttled_waits,
                budget_waited: a.budget_waited + s.throttled_wait_total,
                retries: a.retries + s.retries,
            })
    }

    fn since(self, before: Self) -> Self {
        ClientWaits {
            budget_waits: self.budget_waits.saturating_sub(before.budget_waits),
            budget_waited: self.budget_waited.saturating_sub(before.budget_waited),
            retries: self.retries.saturating_sub(before.retries),
        }
    }
}

/// Requests of one API method in the saturation run (all daemons).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MethodLoad {
    pub method: String,
    pub write: bool,
    pub count: usize,
    /// Request bodies, sent by the daemons.
    pub bytes_sent: usize,
    /// Reply bodies, received by the daemons.
    pub bytes_received: usize,
}

/// Served requests by API method, reads first.
fn by_method(served: &[&RequestRecord]) -> Vec<MethodLoad> {
    let mut methods: BTreeMap<(bool, String), MethodLoad> = BTreeMap::new();
    for r in served {
        let m = methods
            .entry((r.write, r.method.clone()))
            .or_insert_with(|| MethodLoad {
                method: r.method.clone(),
                write: r.write,
                ..MethodLoad::default()
            });
        m.count += 1;
        m.bytes_sent += r.bytes_in;
        m.bytes_received += r.bytes_out;
    }
    methods.into_values().collect()
}

/// The saturation run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Saturation {
    pub jobs: usize,
    pub done: usize,
    pub failed: usize,
    /// First enqueue to the last result on the sheet.
    pub elapsed: Duration,
    pub jobs_per_min: f64,
    pub reads: usize,
    pub writes: usize,
    pub accounts: Vec<AccountLoad>,
    pub methods: Vec<MethodLoad>,
    /// Whether the run was shorter than the 60 s window of the peaks.
    pub shorter_than_a_minute: bool,
    /// `VmHWM` in KiB after the run.
    pub peak_rss_kib: u64,
}

impl Saturation {
    pub fn reads_per_job(&self) -> f64 {
        per(self.reads, self.jobs)
    }

    pub fn writes_per_job(&self) -> f64 {
        per(self.writes, self.jobs)
    }
}

/// One press: from the tick to the row and to `実行中`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Press {
    pub to_row: Duration,
    pub to_running: Duration,
}

/// One queue size left idle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Idle {
    pub rows: usize,
    /// How long seeding the rows into the store took.
    pub seeded_in: Duration,
    pub poll_interval: Duration,
    /// Start-up (which reads the 状態 column of the whole queue once) and the first poll.
    pub first_bytes: usize,
    pub first_cpu: Duration,
    pub first_wall: Duration,
    /// The polls after the first.
    pub polls: usize,
    pub requests: usize,
    pub bytes: usize,
    /// CPU time of the daemon's own threads.
    pub daemon_cpu: Duration,
    /// CPU time of the whole process (daemon and emulator).
    pub process_cpu: Duration,
    pub refused: u64,
    /// `VmHWM` in KiB after the run.
    pub peak_rss_kib: u64,
    /// `VmHWM` in KiB of a daemon run as a process of its own on the same queue, through
    /// start-up and the idle polls (0: not measured).
    pub alone_rss_kib: u64,
}

/// Everything `sheetq bench` measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchReport {
    pub command_line: String,
    pub saturation: Saturation,
    pub presses: Vec<Press>,
    /// Requests the quota refused while the presses were taken in, by account.
    pub press_refused: BTreeMap<String, u64>,
    /// Requests served while the presses were taken in (all daemons), by method.
    pub press_methods: Vec<MethodLoad>,
    /// The daemons' waits for their budget and retries, in the saturation run and while the
    /// presses were taken in.
    pub saturation_waits: ClientWaits,
    pub press_waits: ClientWaits,
    pub idle: Vec<Idle>,
    /// Jobs the daemons said they finished (saturation and presses).
    pub daemon_jobs_finished: u64,
    /// Peak RSS in KiB of one daemon run as a process of its own through the saturation
    /// jobs (0: not measured).
    pub busy_alone_rss_kib: u64,
    /// What a failing job's retries add in requests.
    pub retry: retry::RetryCost,
    /// What a press with inputs costs against one without.
    pub inputs: inputs::InputsCost,
    /// A rollout against the same jobs pressed one by one.
    pub rollout: rollout::RolloutCost,
    /// The Markdown printed.
    pub markdown: String,
}

/// The function every job and press runs: the demo panels' first row, made a zero-second
/// `echo` so that only sheetq's own work is measured.
const FUNCTION: &str = "動作確認 (2秒)";
const FUNCTION_ROW: u32 = 8;
/// The demo panels the presses tick.
const PRESS_PANELS: [&str; 3] = ["サーバーA", "サーバーB", "サーバーC"];
/// Sheet ids of the panels made for the saturation targets.
const FIRST_TARGET_SHEET_ID: i32 = 5000;
/// How often the store is looked at while waiting for presses.
const PRESS_LOOK: Duration = Duration::from_millis(2);

/// Runs the benchmark, writing progress and the tables to `out`.
pub async fn run(args: &BenchArgs, out: &mut impl Write) -> anyhow::Result<BenchReport> {
    if let Some(minutes) = args.schedule_minutes {
        let markdown = schedule::table(&schedule::measure(minutes.max(1), out).await?);
        writeln!(out, "\n{markdown}")?;
        return Ok(BenchReport {
            markdown,
            ..BenchReport::default()
        });
    }
    if args.fleet {
        let exe = std::env::current_exe().context("cannot find the sheetq binary to run")?;
        let cold = cold::ColdParams {
            spreadsheets: args.spreadsheets.filter(|_| args.cold).unwrap_or(6).max(2),
            slots: args.slots,
            exe: exe.clone(),
        };
        let cold = cold::table(&cold::measure(&cold, out).await?);
        writeln!(out, "\n{cold}")?;
        if args.cold {
            return Ok(BenchReport {
                markdown: cold,
                ..BenchReport::default()
            });
        }
        let params = fleet::FleetParams::new(
            args.spreadsheets.unwrap_or(10).max(2),
            args.fleet_for,
            args.slots,
            exe,
        );
        let runs = fleet::measure(&params, out).await?;
        return Ok(BenchReport {
            markdown: format!("{cold}\n{}", fleet::table(&runs)),
            ..BenchReport::default()
        });
    }
    measure(args.params(), out).await
}

/// Runs the benchmark with `args`, writing progress and the tables to `out`.
pub async fn measure(args: Params, out: &mut impl Write) -> anyhow::Result<BenchReport> {
    let deadline = Duration::from_secs(args.deadline_secs);
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let quota = emu.quota();
    let state = tempfile::tempdir().context("cannot create a temporary state directory")?;
    writeln!(out, "{}", args.command_line())?;
    prepare_panels(&emu, args.targets)?;
    let mut report = BenchReport {
        command_line: args.command_line(),
        ..BenchReport::default()
    };

    // Saturation: the daemons first, so that their start-up is not part of the figures.
    let accounts: Vec<String> = (1..=args.daemons)
        .map(|i| match args.accounts {
            Accounts::One => "bench".to_string(),
            Accounts::Each => format!("bench-{i}"),
        })
        .collect();
    let shutdown = CancellationToken::new();
    let (fleet, client_stats) =
        start_fleet(&emu, &args, state.path(), &accounts, &shutdown, deadline).await?;
    let started = Instant::now();
    let at = |t: Instant| format!("[{:5.1} s]", t.elapsed().as_secs_f64());
    writeln!(
        out,
        "{} {} daemon(s) polling; enqueueing {} jobs over {} targets",
        at(started),
        args.daemons,
        args.jobs,
        args.targets
    )?;
    let columns = queue_columns(&emu)?;
    emu.clear_requests();
    let waits = ClientWaits::of(&client_stats);
    let saturation = saturate(&emu, &args, &columns, &accounts, deadline).await;
    let saturation = match saturation {
        Ok(s) => s,
        Err(e) => {
            shutdown.cancel();
            return Err(e);
        }
    };
    writeln!(
        out,
        "{} saturation: {} jobs finished in {:.1} s; ticking ▶ boxes",
        at(started),
        saturation.jobs,
        saturation.elapsed.as_secs_f64()
    )?;
    report.saturation = saturation;
    let waits = {
        let now = ClientWaits::of(&client_stats);
        report.saturation_waits = now.since(waits);
        now
    };

    // Presses, with the same daemons still running.
    emu.clear_requests();
    let presses = press(&emu, &args, &columns, deadline).await;
    report.press_waits = ClientWaits::of(&client_stats).since(waits);
    let log = emu.requests();
    let served: Vec<&RequestRecord> = log
        .iter()
        .filter(|r| r.method != "oauth2.token" && r.status != 429)
        .collect();
    report.press_methods = by_method(&served);
    report.press_refused = emu
        .quota_refused()
        .into_iter()
        .map(|(user, r)| (user, r.read + r.write))
        .collect();
    shutdown.cancel();
    for d in fleet {
        let r: RunReport = d.await.context("a bench daemon panicked")??;
        report.daemon_jobs_finished += r.jobs_finished;
    }
    report.presses = presses?;
    writeln!(
        out,
        "{} presses: {} taken in and started",
        at(started),
        report.presses.len()
    )?;

    // Memory under load: one daemon as a process of its own through the same jobs.
    if let Some(exe) = &args.daemon_exe {
        let dir = state.path().join("bench-busy-alone");
        report.busy_alone_rss_kib = busy_alone(&emu, exe, &args, &columns, &dir, deadline).await?;
        writeln!(
            out,
            "{} busy: one daemon process alone ran {} jobs, peak RSS {}",
            at(started),
            args.jobs,
            mib(report.busy_alone_rss_kib)
        )?;
    }

    // Idle polls at each queue size, one fresh daemon (and account) each.
    let template = finished_template(&emu, &columns)?;
    for &rows in &args.sizes.0 {
        let idle = idle(&emu, &args, &columns, &template, rows, &state, deadline).await?;
        writeln!(
            out,
            "{} idle: {rows} finished rows seeded in {:.2} s, {} polls measured",
            at(started),
            idle.seeded_in.as_secs_f64(),
            idle.polls
        )?;
        report.idle.push(idle);
    }

    report.retry = retry::measure(deadline).await?;
    writeln!(
        out,
        "{} retries: a failing job without and with {} retries run",
        at(started),
        retry::RETRIES
    )?;
    report.inputs = inputs::measure(deadline).await?;
    writeln!(
        out,
        "{} inputs: {} presses without and {} with inputs taken in",
        at(started),
        inputs::PRESSES,
        inputs::PRESSES
    )?;

    report.rollout = rollout::measure(deadline).await?;
    writeln!(
        out,
        "{} rollout: {} single presses, then one rollout over {} targets",
        at(started),
        rollout::TARGETS,
        rollout::TARGETS
    )?;

    report.markdown = markdown(&report, &args, quota);
    writeln!(out, "\n{}", report.markdown)?;
    Ok(report)
}

/// The daemons of the saturation run, one per account of `accounts` (`bench-1`, …), each
/// with its client's statistics; returned once every one has completed a first poll.
async fn start_fleet(
    emu: &Emulator,
    args: &Params,
    state: &std::path::Path,
    accounts: &[String],
    shutdown: &CancellationToken,
    deadline: Duration,
) -> anyhow::Result<(
    Vec<tokio::task::JoinHandle<Result<RunReport, crate::daemon::DaemonError>>>,
    Vec<Arc<SheetsStats>>,
)> {
    let mut fleet = Vec::new();
    let mut healths = Vec::new();
    let mut client_stats = Vec::new();
    for (i, account) in accounts.iter().enumerate() {
        let worker = format!("bench-{}", i + 1);
        let config = daemon_config(
            emu,
            &worker,
            &state.join(&worker),
            args.slots,
            args.poll_interval,
            args.requests_per_minute,
            args.log_chars,
        )?;
        let registry = crate::setup::registry(&config)?;
        let key = Credentials::KeyJson(emu.credentials_json_for(account));
        let stats = Arc::new(SheetsStats::new());
        let sheets = crate::setup::connect_with(&config, Some(key), false, stats.clone()).await?;
        client_stats.push(stats);
        let observers = observers(&config);
        healths.push(observers.health.clone());
        fleet.push(tokio::spawn(crate::daemon::run_observed(
            sheets,
            config,
            registry,
            shutdown.clone(),
            observers,
        )));
    }
    let started = Instant::now();
    while !healths.iter().all(|h| h.verdict().is_healthy()) {
        if started.elapsed() > deadline {
            shutdown.cancel();
            bail!("the daemons did not complete a first poll within {deadline:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((fleet, client_stats))
}

/// Settings of a bench daemon: the config's defaults but for the measured knobs, panel
/// intake on (the local mode), and the two built-ins.
fn daemon_config(
    emu: &Emulator,
    worker: &str,
    state_dir: &std::path::Path,
    slots: usize,
    poll_interval: Duration,
    requests_per_minute: u32,
    log_chars: u32,
) -> anyhow::Result<Config> {
    let text = config_text(
        emu,
        worker,
        state_dir,
        slots,
        poll_interval,
        requests_per_minute,
    )
    .replacen(
        "\nintake = ",
        &format!("\nlog_chars = {log_chars}\nintake = "),
        1,
    );
    Ok(Config::parse(&text, "bench config", &BTreeMap::new())?)
}

/// The TOML of [`daemon_config`].
fn config_text(
    emu: &Emulator,
    worker: &str,
    state_dir: &std::path::Path,
    slots: usize,
    poll_interval: Duration,
    requests_per_minute: u32,
) -> String {
    format!(
        r#"
spreadsheet_id = {id:?}
api_base_url = {url:?}
worker_id = {worker:?}
slots = {slots}
poll_interval = "{poll}ms"
requests_per_minute = {requests_per_minute}
intake = "poll"
state_dir = {state:?}
[commands.echo]
builtin = "echo"
[commands.sleep]
builtin = "sleep"
"#,
        id = emu.spreadsheet_id(),
        url = emu.base_url(),
        poll = poll_interval.as_millis().max(1),
        state = state_dir.display().to_string(),
    )
}

/// One daemon run as a process of its own (the `sheetq` binary, `sheetq run`) on the
/// emulator, watched for its peak resident set size: the daemon's memory without the
/// in-process emulator's store.
struct Alone {
    child: tokio::process::Child,
    pid: u32,
    log: std::path::PathBuf,
    peak_rss_kib: u64,
}

impl Alone {
    async fn start(
        emu: &Emulator,
        exe: &std::path::Path,
        worker: &str,
        dir: &std::path::Path,
        slots: usize,
        poll_interval: Duration,
        requests_per_minute: u32,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let key = dir.join("key.json");
        std::fs::write(&key, emu.credentials_json_for(worker))
            .with_context(|| format!("cannot write {}", key.display()))?;
        let text = config_text(emu, worker, dir, slots, poll_interval, requests_per_minute)
            .replacen(
                "\nworker_id",
                &format!("\ncredentials = {:?}\nworker_id", key.display().to_string()),
                1,
            );
        let config = dir.join("sheetq.toml");
        std::fs::write(&config, text)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let log = dir.join("daemon.log");
        let (child, pid) = process::spawn_daemon(exe, &config, &log)?;
        Ok(Alone {
            child,
            pid,
            log,
            peak_rss_kib: 0,
        })
    }

    /// Samples the peak RSS until `progress` says the part is over (it returns whether it is,
    /// and where it stands); fails, with where it stood, if the process stops first (with
    /// its log) or `deadline` passes.
    async fn until(
        &mut self,
        deadline: Duration,
        mut progress: impl FnMut() -> (bool, String),
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let (over, stand) = progress();
            if over {
                return Ok(());
            }
            self.peak_rss_kib = self.peak_rss_kib.max(rss_of(self.pid));
            if let Some(status) = self.child.try_wait()? {
                let said = std::fs::read_to_string(&self.log).unwrap_or_default();
                bail!("the daemon process stopped ({status}) with {stand}: {said}");
            }
            if started.elapsed() > deadline {
                bail!("the daemon process got to {stand} within {deadline:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the process; its peak RSS in KiB.
    async fn stop(mut self) -> anyhow::Result<u64> {
        self.peak_rss_kib = self.peak_rss_kib.max(rss_of(self.pid));
        self.child
            .kill()
            .await
            .context("cannot stop the daemon process")?;
        Ok(self.peak_rss_kib)
    }
}

/// Runs one idle daemon as a process of its own on the emulator's queue until it has polled
/// `polls` times; its peak RSS in KiB.
async fn daemon_alone(
    emu: &Emulator,
    exe: &std::path::Path,
    worker: &str,
    dir: &std::path::Path,
    poll_interval: Duration,
    polls: usize,
    deadline: Duration,
) -> anyhow::Result<u64> {
    let mut alone = Alone::start(emu, exe, worker, dir, 2, poll_interval, 10_000).await?;
    let account = account_email(worker);
    alone
        .until(deadline, || {
            let done = emu
                .requests()
                .iter()
                .filter(|r| {
                    r.user == account && r.method == "spreadsheets.values.batchGetByDataFilter"
                })
                .count();
            (done >= polls, format!("{done} of {polls} polls"))
        })
        .await?;
    alone.stop().await
}

/// Runs one daemon (`slots` slots, the bench's poll interval and budget) as a process of its
/// own through `jobs` zero-second jobs; its peak RSS in KiB.
async fn busy_alone(
    emu: &Emulator,
    exe: &std::path::Path,
    args: &Params,
    columns: &ColumnMap,
    dir: &std::path::Path,
    deadline: Duration,
) -> anyhow::Result<u64> {
    let jobs = args.jobs;
    emu.replace_rows(QUEUE_SHEET, 2, &job_rows(columns, jobs, args.targets)?)
        .map_err(|e| anyhow::anyhow!("cannot enqueue the jobs: {e:?}"))?;
    let worker = "bench-busy-alone";
    let mut alone = Alone::start(
        emu,
        exe,
        worker,
        dir,
        args.slots,
        args.poll_interval,
        args.requests_per_minute,
    )
    .await?;
    alone
        .until(deadline, || {
            let finished = finished_count(emu, columns, jobs);
            (
                finished >= jobs,
                format!("{finished} of {jobs} jobs finished"),
            )
        })
        .await?;
    alone.stop().await
}

/// One daemon of a bench part, run in this process on `sheets`, and the token that stops it.
struct PartDaemon {
    task: tokio::task::JoinHandle<Result<crate::daemon::RunReport, crate::daemon::DaemonError>>,
    shutdown: CancellationToken,
}

impl PartDaemon {
    /// Starts the daemon of `config` and waits (within `deadline`) until its first poll
    /// succeeded; `what` names it in the error.
    async fn start(
        sheets: std::sync::Arc<dyn crate::sheets::Sheets>,
        config: Config,
        registry: crate::commands::Registry,
        what: &str,
        deadline: Duration,
    ) -> anyhow::Result<Self> {
        let shutdown = CancellationToken::new();
        let observers = observers(&config);
        let health = observers.health.clone();
        let task = tokio::spawn(crate::daemon::run_observed(
            sheets,
            config,
            registry,
            shutdown.clone(),
            observers,
        ));
        let started = Instant::now();
        while !health.verdict().is_healthy() {
            if started.elapsed() > deadline || task.is_finished() {
                shutdown.cancel();
                bail!("the {what} daemon did not complete a first poll within {deadline:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(PartDaemon { task, shutdown })
    }

    /// Whether it ended (it should not before it is stopped).
    fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops it and waits for its end; `what` names it in the error.
    async fn stop(self, what: &str) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task
            .await
            .with_context(|| format!("the {what} daemon panicked"))?
            .with_context(|| format!("the {what} daemon failed"))?;
        Ok(())
    }
}

/// How many of the first `jobs` queue rows are finished.
fn finished_count(emu: &Emulator, columns: &ColumnMap, jobs: usize) -> usize {
    let state_col = a1::column_letters(columns.index(Column::State));
    let range = a1::range(
        QUEUE_SHEET,
        &format!("{state_col}2:{state_col}{}", jobs + 1),
    );
    emu.values(&range)
        .unwrap_or_default()
        .iter()
        .filter(|r| is_final(&r.first().map(queue::cell_text).unwrap_or_default()))
        .count()
}

fn observers(config: &Config) -> Observers {
    Observers {
        metrics: Arc::new(Metrics::new()),
        health: Health::new(Health::limit_for(config.poll_interval, config.call_timeout)),
        notifier: Arc::new(Notifier::disabled()),
        reloads: None,
    }
}

/// Makes the demo panels' first function a zero-second `echo`, and one panel per target
/// (a copy of the first demo panel with its own label), straight in the store.
fn prepare_panels(emu: &Emulator, targets: usize) -> anyhow::Result<()> {
    for title in PRESS_PANELS {
        emu.set_values(
            &a1::range(title, &format!("H{FUNCTION_ROW}:I{FUNCTION_ROW}")),
            json!([["echo", "{}"]]),
            false,
        )
        .map_err(|e| anyhow::anyhow!("cannot set up panel {title}: {e:?}"))?;
    }
    emu.with_spreadsheet(|ss| {
        let Some(model) = ss.sheet_by_title(PRESS_PANELS[0]).cloned() else {
            bail!("the demo spreadsheet has no panel {}", PRESS_PANELS[0]);
        };
        for i in 0..targets {
            let mut panel = model.clone();
            let label = target_label(i);
            panel.id = FIRST_TARGET_SHEET_ID + i as i32;
            panel.title = label.clone();
            let text = |s: &str| Some(crate::emulator::Value::String(s.to_string()));
            panel.set_value(0, 0, text(&label));
            panel.set_value(1, 6, text(&label));
            ss.sheets.push(panel);
        }
        Ok(())
    })
    .map_err(|e| anyhow::anyhow!("cannot add the target panels: {e:?}"))?
}

fn target_label(i: usize) -> String {
    format!("対象{:02}", i + 1)
}

fn queue_columns(emu: &Emulator) -> anyhow::Result<ColumnMap> {
    let header = emu
        .values(&a1::range(QUEUE_SHEET, "1:1"))
        .map_err(|e| anyhow::anyhow!("cannot read the queue header: {e:?}"))?;
    let header = header.into_iter().next().unwrap_or_default();
    Ok(ColumnMap::from_header(&header, &Default::default())?)
}

/// The queue rows from sheet row `first` down, as the store holds them now (`[]` when there
/// are none, or the range is past the grid).
fn rows_from(emu: &Emulator, columns: &ColumnMap, first: usize) -> Vec<Vec<Json>> {
    let last = a1::column_letters(columns.width().saturating_sub(1));
    emu.values(&a1::range(QUEUE_SHEET, &format!("A{first}:{last}")))
        .unwrap_or_default()
}

fn text_at(row: &[Json], columns: &ColumnMap, c: Column) -> String {
    row.get(columns.index(c) as usize)
        .map(queue::cell_text)
        .unwrap_or_default()
}

fn is_final(state: &str) -> bool {
    let words = queue::StateWords::default();
    state == words.done || state == words.error || state == words.timeout
}

/// `jobs` queue rows of zero-second `echo` jobs, round-robin over `targets` targets.
fn job_rows(columns: &ColumnMap, jobs: usize, targets: usize) -> anyhow::Result<Vec<Vec<Json>>> {
    let config = Config::parse("spreadsheet_id = \"bench\"", "bench", &BTreeMap::new())?;
    let tz = chrono_tz::Asia::Tokyo;
    let now = Utc::now();
    Ok((0..jobs)
        .map(|i| {
            let label = target_label(i % targets);
            let job = admin::NewJob {
                target: label.clone(),
                function: FUNCTION.into(),
                command: "echo".into(),
                args_json: "{}".into(),
                requester: String::new(),
                panel_sheet: label,
                flags: vec![],
            };
            let id = uuid::Uuid::new_v4().to_string();
            admin::job_row(columns, &config, tz, &id, now, &job)
        })
        .collect())
}

/// Enqueues every job at once (as the Apps Script intake would, outside the daemons'
/// quota), waits until each is finished on the sheet, and reads the request log.
async fn saturate(
    emu: &Emulator,
    args: &Params,
    columns: &ColumnMap,
    accounts: &[String],
    deadline: Duration,
) -> anyhow::Result<Saturation> {
    emu.replace_rows(QUEUE_SHEET, 2, &job_rows(columns, args.jobs, args.targets)?)
        .map_err(|e| anyhow::anyhow!("cannot enqueue the jobs: {e:?}"))?;
    let t0 = Instant::now();
    let t0_utc = Utc::now();
    let state_col = a1::column_letters(columns.index(Column::State));
    let range = a1::range(
        QUEUE_SHEET,
        &format!("{state_col}2:{state_col}{}", args.jobs + 1),
    );
    let words = queue::StateWords::default();
    let (done, failed) = loop {
        let states: Vec<String> = emu
            .values(&range)
            .unwrap_or_default()
            .iter()
            .map(|r| r.first().map(queue::cell_text).unwrap_or_default())
            .collect();
        let finished = states.iter().filter(|s| is_final(s)).count();
        if finished >= args.jobs {
            let done = states.iter().filter(|s| **s == words.done).count();
            break (done, finished - done);
        }
        if t0.elapsed() > deadline {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for s in &states {
                *counts.entry(s.as_str()).or_default() += 1;
            }
            bail!(
                "only {finished} of {} jobs finished within {deadline:?} (states: {counts:?}); raise --deadline-secs or look at the daemons' warnings",
                args.jobs
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let elapsed = t0.elapsed();
    let log = emu.requests();
    let refused = emu.quota_refused();
    let mine: BTreeSet<String> = accounts.iter().map(|a| account_email(a)).collect();
    let served: Vec<&RequestRecord> = log
        .iter()
        .filter(|r| mine.contains(&r.user) && r.status != 429 && r.at >= t0_utc)
        .collect();
    let mut loads = Vec::new();
    for account in &mine {
        let of = |write: bool| -> Vec<DateTime<Utc>> {
            served
                .iter()
                .filter(|r| &r.user == account && r.write == write)
                .map(|r| r.at)
                .collect()
        };
        let (reads, writes) = (of(false), of(true));
        let refused = refused.get(account).copied().unwrap_or_default();
        loads.push(AccountLoad {
            account: account.clone(),
            reads: reads.len(),
            writes: writes.len(),
            peak_reads_per_min: peak_per_minute(&reads),
            peak_writes_per_min: peak_per_minute(&writes),
            refused_reads: refused.read,
            refused_writes: refused.write,
        });
    }
    Ok(Saturation {
        jobs: args.jobs,
        done,
        failed,
        elapsed,
        jobs_per_min: args.jobs as f64 / elapsed.as_secs_f64().max(1e-9) * 60.0,
        reads: served.iter().filter(|r| !r.write).count(),
        writes: served.iter().filter(|r| r.write).count(),
        accounts: loads,
        methods: by_method(&served),
        shorter_than_a_minute: elapsed < Duration::from_secs(60),
        peak_rss_kib: peak_rss_kib(),
    })
}

fn account_email(name: &str) -> String {
    format!("{name}@sheetq-emulator.iam.gserviceaccount.com")
}

/// Ticks the first function of the demo panels in turn, `presses` times, and watches the
/// store for the queue row and for its `実行中`. After a rest (`press_rest`), presses start
/// `press_every` apart plus a varying fraction of the poll interval (golden-ratio steps), so
/// that ticks land at every phase of the polls.
async fn press(
    emu: &Emulator,
    args: &Params,
    columns: &ColumnMap,
    deadline: Duration,
) -> anyhow::Result<Vec<Press>> {
    let words = queue::StateWords::default();
    let mut presses = Vec::new();
    // Job ids of each panel's last press: a panel is ticked again only once it finished.
    let mut last_of: BTreeMap<&str, String> = BTreeMap::new();
    let mut known = rows_from(emu, columns, 2).len();
    let started = Instant::now();
    tokio::time::sleep(args.press_rest).await;
    let mut last_tick: Option<Instant> = None;
    for k in 0..args.presses {
        let panel = PRESS_PANELS[k % PRESS_PANELS.len()];
        if let Some(job) = last_of.get(panel) {
            while !rows_from(emu, columns, 2).iter().any(|r| {
                text_at(r, columns, Column::JobId) == *job
                    && is_final(&text_at(r, columns, Column::State))
            }) {
                if started.elapsed() > deadline {
                    bail!("the press on {panel} did not finish within {deadline:?}");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if let Some(t) = last_tick {
            tokio::time::sleep(args.press_every.saturating_sub(t.elapsed())).await;
        }
        let phase = (k as f64 * 0.618_033_988_75).fract();
        tokio::time::sleep(args.poll_interval.mul_f64(phase)).await;
        last_tick = Some(Instant::now());
        emu.set_values(
            &a1::range(panel, &format!("A{FUNCTION_ROW}")),
            json!([[true]]),
            false,
        )
        .map_err(|e| anyhow::anyhow!("cannot tick {panel}!A{FUNCTION_ROW}: {e:?}"))?;
        let tick = Instant::now();
        let mut to_row = None;
        let mut job_id = String::new();
        let to_running = loop {
            let fresh = rows_from(emu, columns, known + 2);
            if let Some(row) = fresh
                .iter()
                .find(|r| text_at(r, columns, Column::Target) == panel)
            {
                let at = tick.elapsed();
                if to_row.is_none() {
                    to_row = Some(at);
                    job_id = text_at(row, columns, Column::JobId);
                }
                let state = text_at(row, columns, Column::State);
                if state == words.running || is_final(&state) {
                    break at;
                }
            }
            if tick.elapsed() > deadline {
                bail!("the tick on {panel}!A{FUNCTION_ROW} did not become a running job within {deadline:?}");
            }
            tokio::time::sleep(PRESS_LOOK).await;
        };
        known = rows_from(emu, columns, 2).len();
        last_of.insert(panel, job_id);
        presses.push(Press {
            to_row: to_row.unwrap_or(to_running),
            to_running,
        });
    }
    Ok(presses)
}

/// A finished queue row as the daemons wrote it (the first one of the saturation run), the
/// model of the rows seeded for the idle runs.
fn finished_template(emu: &Emulator, columns: &ColumnMap) -> anyhow::Result<Vec<Json>> {
    let mut row = rows_from(emu, columns, 2)
        .into_iter()
        .find(|r| is_final(&text_at(r, columns, Column::State)))
        .context("no finished queue row to model the idle runs' rows on")?;
    row.resize(columns.width() as usize, Json::String(String::new()));
    Ok(row)
}

/// One queue size: seeds `rows` finished rows, runs one daemon on a thread of its own for
/// `idle_polls` polls after its first, and measures each poll.
async fn idle(
    emu: &Emulator,
    args: &Params,
    columns: &ColumnMap,
    template: &[Json],
    rows: usize,
    state: &tempfile::TempDir,
    deadline: Duration,
) -> anyhow::Result<Idle> {
    let seeded_in = seed_finished(emu, columns, template, rows)?;
    // Polls as fast as a fresh account's minute of quota allows: the figures per poll do
    // not depend on the interval, and the run stays short.
    let (poll_interval, budget) = if args.idle_polls + 10 <= 55 {
        (Duration::from_millis(100), 10_000)
    } else {
        (Duration::from_millis(1200), 50)
    };
    let worker = format!("bench-idle-{rows}");
    let config = daemon_config(
        emu,
        &worker,
        &state.path().join(&worker),
        2,
        poll_interval,
        budget,
        args.log_chars,
    )?;
    let registry = crate::setup::registry(&config)?;
    let key = Credentials::KeyJson(emu.credentials_json_for(&worker));
    let observers = observers(&config);
    let health = observers.health.clone();
    let shutdown = CancellationToken::new();
    emu.clear_requests();
    let launched = Instant::now();
    let launched_utc = Utc::now();
    let daemon = daemon_thread(config, registry, key, observers, shutdown.clone())?;
    let samples = match sample_polls(&health, &daemon, args.idle_polls + 1, launched, deadline)
        .await
    {
        Ok(samples) => samples,
        Err(taken) => {
            shutdown.cancel();
            let why = match daemon.join() {
                Ok(Err(e)) => format!("{e:#}"),
                Ok(Ok(_)) => "it stopped".into(),
                Err(_) => "it panicked".into(),
            };
            bail!(
                "the idle daemon at {rows} rows completed {taken} of {} polls within {deadline:?}: {why}",
                args.idle_polls + 1
            );
        }
    };
    shutdown.cancel();
    let joined = tokio::task::spawn_blocking(move || daemon.join())
        .await
        .context("cannot wait for the idle daemon")?;
    match joined {
        Ok(r) => {
            r.context("the idle daemon failed")?;
        }
        Err(_) => bail!("the idle daemon panicked"),
    }
    let account = account_email(&worker);
    let log = emu.requests();
    let between = |from: DateTime<Utc>, to: DateTime<Utc>| -> Vec<&RequestRecord> {
        log.iter()
            .filter(|r| r.user == account && r.at > from && r.at <= to)
            .collect()
    };
    let bytes = |rs: &[&RequestRecord]| rs.iter().map(|r| r.bytes_in + r.bytes_out).sum();
    let (first, last) = match (samples.first(), samples.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => bail!("no poll was measured at {rows} rows"),
    };
    let first_requests = between(launched_utc, first.1);
    let later = between(first.1, last.1);
    let refused = emu.quota_refused().values().map(|r| r.read + r.write).sum();
    let peak_rss_kib = peak_rss_kib();
    let alone_rss_kib = match &args.daemon_exe {
        Some(exe) => {
            let worker = format!("bench-alone-{rows}");
            let dir = state.path().join(&worker);
            daemon_alone(
                emu,
                exe,
                &worker,
                &dir,
                poll_interval,
                args.idle_polls + 1,
                deadline,
            )
            .await?
        }
        None => 0,
    };
    Ok(Idle {
        rows,
        seeded_in,
        poll_interval,
        first_bytes: bytes(&first_requests),
        first_cpu: first.2,
        first_wall: first.0 - launched,
        polls: samples.len() - 1,
        requests: later.len(),
        bytes: bytes(&later),
        daemon_cpu: last.2.saturating_sub(first.2),
        process_cpu: last.3.saturating_sub(first.3),
        refused,
        peak_rss_kib,
        alone_rss_kib,
    })
}

/// Seeds `rows` finished rows like `template` (each its own jobId) below the queue's header;
/// returns how long it took.
fn seed_finished(
    emu: &Emulator,
    columns: &ColumnMap,
    template: &[Json],
    rows: usize,
) -> anyhow::Result<Duration> {
    let seeding = Instant::now();
    let job_col = columns.index(Column::JobId) as usize;
    let seeded: Vec<Vec<Json>> = (0..rows)
        .map(|i| {
            let mut r = template.to_vec();
            r[job_col] = Json::String(format!("00000000-0000-4000-8000-{i:012}"));
            r
        })
        .collect();
    emu.replace_rows(QUEUE_SHEET, 2, &seeded)
        .map_err(|e| anyhow::anyhow!("cannot seed {rows} rows: {e:?}"))?;
    Ok(seeding.elapsed())
}

/// A daemon on a thread (and runtime) of its own, [`DAEMON_THREAD`], so its CPU time can be
/// told from the emulator's.
fn daemon_thread(
    config: Config,
    registry: crate::commands::Registry,
    key: Credentials,
    observers: crate::daemon::Observers,
    shutdown: CancellationToken,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<RunReport>>> {
    std::thread::Builder::new()
        .name(DAEMON_THREAD.into())
        .spawn(move || -> anyhow::Result<RunReport> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name(DAEMON_THREAD)
                .build()?;
            rt.block_on(async move {
                let sheets = crate::setup::connect(&config, Some(key), false).await?;
                Ok(
                    crate::daemon::run_observed(sheets, config, registry, shutdown, observers)
                        .await?,
                )
            })
        })
        .context("cannot start the idle daemon's thread")
}

/// One sample per completed poll of the daemon `health` watches, `polls` of them: when, and
/// the CPU time so far (its thread's, the process's). `Err(taken)` when the daemon ended or
/// `deadline` (from `launched`) passed first.
async fn sample_polls(
    health: &crate::metrics::Health,
    daemon: &std::thread::JoinHandle<anyhow::Result<RunReport>>,
    polls: usize,
    launched: Instant,
    deadline: Duration,
) -> Result<Vec<(Instant, DateTime<Utc>, Duration, Duration)>, usize> {
    let mut samples = Vec::new();
    let mut last_poll = None;
    while samples.len() < polls {
        let now = Instant::now();
        if let Verdict::Healthy { last_poll_age } = health.verdict_at(now) {
            let at = now.checked_sub(last_poll_age);
            if at != last_poll {
                last_poll = at;
                samples.push((
                    now,
                    Utc::now(),
                    cpu_of_threads(Some(DAEMON_THREAD)),
                    cpu_of_threads(None),
                ));
            }
        }
        if daemon.is_finished() || launched.elapsed() > deadline {
            return Err(samples.len());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(samples)
}

/// The name of the idle daemon's thread and of its runtime's blocking threads.
const DAEMON_THREAD: &str = "bench-daemon";

/// CPU time of this process's threads named `name` (all threads: `None`), from
/// `/proc/self/task/*/schedstat` (nanoseconds on CPU), or from `stat`'s utime + stime
/// (10 ms ticks) where the kernel keeps no schedstat. Threads that ended are not counted.
pub fn cpu_of_threads(name: Option<&str>) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let mut total = Duration::ZERO;
    for task in tasks.flatten() {
        let dir = task.path();
        if let Some(name) = name {
            let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
            if comm.trim_end() != name {
                continue;
            }
        }
        let on_cpu = std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .map(Duration::from_nanos)
            .or_else(|| {
                let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
                // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
                let rest = stat.rsplit_once(')')?.1;
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let ticks =
                    fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
                Some(Duration::from_millis(ticks * 10))
            });
        total += on_cpu.unwrap_or_default();
    }
    total
}

/// The process's peak resident set size so far (`VmHWM`), in KiB; 0 where unknown.
pub fn peak_rss_kib() -> u64 {
    vm_hwm("/proc/self/status")
}

fn per(n: usize, jobs: usize) -> f64 {
    n as f64 / jobs.max(1) as f64
}

fn micros(d: Duration, n: usize) -> String {
    let us = d.as_secs_f64() * 1e6 / n.max(1) as f64;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn kib(n: f64) -> String {
    if n >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", n / 1024.0 / 1024.0)
    } else if n >= 1024.0 {
        format!("{:.1} KiB", n / 1024.0)
    } else {
        format!("{n:.0} B")
    }
}

/// The report as Markdown: the command, the set-up, the main table, where the requests
/// went, and the idle polls.
fn markdown(r: &BenchReport, args: &Params, quota: Option<crate::emulator::Quota>) -> String {
    let mut md = setup_line(r, args, quota);
    main_table(r, args, &mut md);
    requests_table(r, &mut md);
    idle_table(r, &mut md);
    md
}

/// The command line and what it ran on.
fn setup_line(r: &BenchReport, args: &Params, quota: Option<crate::emulator::Quota>) -> String {
    let mut md = String::new();
    let build = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let quota = match quota {
        Some(q) => format!(
            "{} read/write requests a minute per account, {} per project",
            q.per_user, q.per_project
        ),
        None => "quota off".into(),
    };
    md.push_str(&format!(
        "`{}` ({build}, {cores} cores; embedded spreadsheet with Google's quota: {quota}; daemons: poll_interval {}, requests_per_minute {}, log_chars {}, intake = \"poll\", {} target panels)\n\n",
        r.command_line,
        humantime::format_duration(args.poll_interval),
        args.requests_per_minute,
        args.log_chars,
        args.targets,
    ));
    md
}

/// The main table: throughput, requests per job, peaks per account, press latencies,
/// budget waits, memory.
fn main_table(r: &BenchReport, args: &Params, md: &mut String) {
    let s = &r.saturation;
    md.push_str("| measure | value |\n|---|---|\n");
    let mut row = |k: String, v: String| md.push_str(&format!("| {k} | {v} |\n"));
    row(
        "jobs/min (first enqueue → last result on the sheet)".into(),
        format!(
            "{:.1} ({} jobs in {:.1} s; {} done, {} failed)",
            s.jobs_per_min,
            s.jobs,
            s.elapsed.as_secs_f64(),
            s.done,
            s.failed
        ),
    );
    row(
        "reads / writes per job".into(),
        format!("{:.2} / {:.2}", s.reads_per_job(), s.writes_per_job()),
    );
    let c = &r.retry;
    row(
        format!(
            "a failing job, without / with {} retries: reads, writes",
            retry::RETRIES
        ),
        format!(
            "{} / {}, {} / {} ({:.1} read and {:.1} write per retry: the stop check before it)",
            c.without.reads,
            c.with.reads,
            c.without.writes,
            c.with.writes,
            c.reads_per_retry(),
            c.writes_per_retry()
        ),
    );
    let (label, value) = inputs::row(&r.inputs);
    row(label, value);
    let (label, value) = rollout::row(&r.rollout);
    row(label, value);
    let window = if s.shorter_than_a_minute {
        " (run < 60 s: whole run)"
    } else {
        ""
    };
    for a in &s.accounts {
        let name = a.account.split('@').next().unwrap_or(&a.account);
        row(
            format!("peak reads / writes per minute, account `{name}`{window}"),
            format!("{} / {}", a.peak_reads_per_min, a.peak_writes_per_min),
        );
        row(
            format!("refused with 429 (reads / writes), account `{name}`"),
            format!("{} / {}", a.refused_reads, a.refused_writes),
        );
    }
    let to_row: Vec<Duration> = r.presses.iter().map(|p| p.to_row).collect();
    let to_running: Vec<Duration> = r.presses.iter().map(|p| p.to_running).collect();
    row(
        format!("tick → queue row, p50 / p95 ({} presses)", r.presses.len()),
        format!(
            "{} / {}",
            secs(percentile(&to_row, 50.0)),
            secs(percentile(&to_row, 95.0))
        ),
    );
    row(
        "tick → 実行中, p50 / p95".into(),
        format!(
            "{} / {}",
            secs(percentile(&to_running, 50.0)),
            secs(percentile(&to_running, 95.0))
        ),
    );
    if !r.press_refused.is_empty() {
        let list: Vec<String> = r
            .press_refused
            .iter()
            .map(|(u, n)| format!("`{}` {n}", u.split('@').next().unwrap_or(u)))
            .collect();
        row(
            "refused with 429 while taking presses in".into(),
            list.join(", "),
        );
    }
    for (part, w) in [
        ("saturation run", r.saturation_waits),
        ("presses", r.press_waits),
    ] {
        row(
            format!("daemons' calls that waited for their budget, {part} (waits / total wait / retries)"),
            format!(
                "{} / {:.1} s / {}",
                w.budget_waits,
                w.budget_waited.as_secs_f64(),
                w.retries
            ),
        );
    }
    row(
        "peak RSS (VmHWM) after the saturation run".into(),
        mib(s.peak_rss_kib),
    );
    if let Some(i) = r.idle.last() {
        row(
            format!("peak RSS (VmHWM) after the {}-row idle run", i.rows),
            mib(i.peak_rss_kib),
        );
    }
    if r.busy_alone_rss_kib > 0 {
        row(
            format!(
                "peak RSS of a daemon process alone through {} jobs ({} slots)",
                s.jobs, args.slots
            ),
            mib(r.busy_alone_rss_kib),
        );
    }
    for i in r.idle.iter().filter(|i| i.alone_rss_kib > 0) {
        row(
            format!(
                "peak RSS of a daemon process alone (start-up and idle polls), {} finished rows",
                i.rows
            ),
            mib(i.alone_rss_kib),
        );
    }
}

/// Where the requests went, per part of the run and API method.
fn requests_table(r: &BenchReport, md: &mut String) {
    let s = &r.saturation;
    md.push_str(
        "\nWhere the requests went (all daemons; bytes as the daemons sent / received them):\n\n",
    );
    md.push_str("| part | method | kind | requests | per job | bytes sent / received per request |\n|---|---|---|---|---|---|\n");
    let parts = [
        ("saturation", &s.methods, s.jobs),
        ("presses", &r.press_methods, r.presses.len()),
    ];
    for (part, methods, jobs) in parts {
        for m in methods {
            let n = m.count.max(1) as f64;
            md.push_str(&format!(
                "| {part} | `{}` | {} | {} | {:.2} | {} / {} |\n",
                m.method,
                if m.write { "write" } else { "read" },
                m.count,
                per(m.count, jobs),
                kib(m.bytes_sent as f64 / n),
                kib(m.bytes_received as f64 / n),
            ));
        }
    }
}

/// The idle polls, per queue size.
fn idle_table(r: &BenchReport, md: &mut String) {
    md.push_str(
        "\nIdle polls (one daemon on its own account, nothing to do). Bytes: sent + received, from the emulator's request log. CPU: the daemon's own threads (`/proc/self/task/*/schedstat`), and the whole process including the in-process emulator (the sum over its live threads: a thread that ends between samples takes its time along, so this one can read low). Start-up reads the 状態 column of the whole queue once to find the unfinished window; every poll reads that window plus a `sweep_rows` slice (1000) of the 状態 column above it.\n\n",
    );
    md.push_str("| finished rows | start-up + first poll: bytes / daemon CPU / wall | idle poll: requests / bytes | idle poll: daemon CPU | idle poll: process CPU | 429 | VmHWM after |\n|---|---|---|---|---|---|---|\n");
    for i in &r.idle {
        md.push_str(&format!(
            "| {} | {} / {} / {} | {:.2} / {} | {} | {} | {} | {} |\n",
            i.rows,
            kib(i.first_bytes as f64),
            micros(i.first_cpu, 1),
            secs(i.first_wall),
            per(i.requests, i.polls),
            kib(i.bytes as f64 / i.polls.max(1) as f64),
            micros(i.daemon_cpu, i.polls),
            micros(i.process_cpu, i.polls),
            i.refused,
            mib(i.peak_rss_kib),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_minute_slides_over_the_log() {
        let t0 = Utc::now();
        let at = |s: i64| t0 + chrono::Duration::milliseconds(s);
        let times = [
            at(0),
            at(10_000),
            at(59_999),
            at(60_000),
            at(61_000),
            at(62_000),
        ];
        // [0, 60 s) holds 3; [10 s, 70 s) holds 5.
        assert_eq!(peak_per_minute(&times), 5);
        assert_eq!(peak_per_minute(&[]), 0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<Duration> = (1..=10).map(Duration::from_secs).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_secs(5));
        assert_eq!(percentile(&v, 95.0), Duration::from_secs(10));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn quick_sets_what_is_not_given_and_sizes_parse() {
        let quick = BenchArgs {
            quick: true,
            daemons: Some(3),
            ..BenchArgs::default()
        }
        .params();
        assert_eq!(
            (
                quick.daemons,
                quick.jobs,
                quick.presses,
                quick.sizes.0.clone()
            ),
            (3, 40, 5, vec![0, 1000])
        );
        assert!(quick.command_line().contains("--daemons 3 "));
        assert!(quick.command_line().contains("--sizes 0,1000 "));
        let plain = BenchArgs {
            sizes: Some(Sizes(vec![10, 0, 10])),
            ..BenchArgs::default()
        }
        .params();
        assert_eq!((plain.daemons, plain.jobs, plain.presses), (2, 200, 10));
        assert_eq!(plain.sizes, Sizes(vec![0, 10]));
        assert_eq!("100_000, 0,1000".parse(), Ok(Sizes(vec![100_000, 0, 1000])));
        assert!("1k".parse::<Sizes>().is_err());
    }

    #[test]
    fn this_process_has_cpu_time_and_a_peak_rss() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(cpu_of_threads(None) > Duration::ZERO);
        assert!(peak_rss_kib() > 0);
    }
}
