//! The command line: clap definitions of every subcommand and the code that turns a parsed
//! command into calls into the library. This is the binary's edge, so it alone uses
//! `anyhow` and maps failures to exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

use crate::admin;
use crate::commands::Registry;
use crate::config::Config;
use crate::daemon::Observers;
#[cfg(feature = "emulator")]
use crate::emulator::EmulatorArgs;
use crate::metrics::{self, Health, Metrics};
use crate::notify::Notifier;
use crate::setup::{connect_one_shot, connect_with, registry};
use crate::sheets::stats::SheetsStats;

/// Exit code when `check` finds problems.
pub const EXIT_PROBLEMS: u8 = 3;
/// Exit code for a bad config, bad arguments (clap also uses 2), unusable credentials, or a
/// spreadsheet the daemon cannot run on as set up (not shared, a sheet missing).
pub const EXIT_CONFIG: u8 = 2;
/// Exit code of `enqueue --wait` when the job itself ended エラー or タイムアウト (sheetq
/// worked; 1 stays for sheetq's own failures).
pub const EXIT_JOB_FAILED: u8 = 4;

/// sheetq: runs the jobs of a Google Sheets checkbox panel.
#[derive(Debug, Parser)]
#[command(name = "sheetq", version = env!("SHEETQ_LONG_VERSION"), about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// More log: -v debug, -vv trace (SHEETQ_LOG, when set, wins).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Less log: -q warnings and errors only, -qq errors only (SHEETQ_LOG, when set, wins).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub quiet: u8,
}

impl Cli {
    /// The log level the flags ask for, over `default` (what the command logs without them).
    pub fn log_level(&self, default: &'static str) -> &'static str {
        match (self.verbose, self.quiet) {
            (0, 0) => default,
            (1, _) => "debug",
            (v, _) if v >= 2 => "trace",
            (_, 1) => "warn",
            _ => "error",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon until SIGTERM/SIGINT.
    Run(RunArgs),
    /// Run the whole flow on an embedded local spreadsheet: presses, two daemons, a table.
    #[cfg(feature = "emulator")]
    Demo(crate::demo::DemoArgs),
    /// Measure throughput, API cost per job, press latency and idle-poll cost on an embedded
    /// spreadsheet under Google's quota; prints a Markdown table.
    #[cfg(feature = "emulator")]
    Bench(crate::bench::BenchArgs),
    /// Serve the local Sheets API emulator and its web view.
    #[cfg(feature = "emulator")]
    Emulator(EmulatorArgs),
    /// Create the hidden sheets sheetq needs, where missing.
    Init(ConfigArgs),
    /// Validate the spreadsheet, its panels and the commands against the config; exit 3
    /// listing every problem.
    Check(CheckArgs),
    /// Show queue counts, running jobs, recent failures, the outbox, workers and the oldest
    /// waiting job.
    Status(ReportArgs),
    /// Append a job to the queue from the shell; prints its jobId.
    Enqueue(EnqueueArgs),
    /// Start a rollout of the config's [[rollouts]]: its function on each of its targets,
    /// a few at a time, stopping on failures; prints its jobId.
    Rollout(RolloutArgs),
    /// Ask the daemons to stop a job: a waiting job ends キャンセル without running, a
    /// running one has its process group stopped (as the panel's ■ 中止 tick does).
    Cancel(CancelArgs),
    /// Approve a job of a function with approvers, as WHO (an operator on this machine):
    /// once enough approvers have, it waits to run (承認待ち → 待機).
    Approve(ApproveArgs),
    /// Reject a job waiting for approval, as WHO (one of its approvers): it ends 却下 and
    /// never runs.
    Reject(ApproveArgs),
    /// List the config's [[schedules]] with their next occurrences, in the spreadsheet's
    /// time zone, and the jobId each will be queued under.
    Schedules(SchedulesArgs),
    /// Print what a job printed: its full output when it runs (or ran) on this machine
    /// (`state_dir/logs`), else the tail its `_ジョブログ` row keeps.
    Logs(LogsArgs),
    /// List jobs from the queue and the archive, newest first: filter by state, target,
    /// function and age.
    Jobs(JobsArgs),
    /// Print everything known of one job: states with times, who pressed, approved and
    /// stopped it, attempts, its output's tail, links to its panel and log rows.
    Show(ShowArgs),
    /// Queue a job again: the same function, target and inputs, as a new press by the caller,
    /// checked as `enqueue` checks a job (prints the new jobId).
    Rerun(RerunArgs),
    /// Build the index sheet and the panels from the config's [[functions]] and [[targets]].
    #[command(subcommand)]
    Panels(PanelsCommand),
    /// Ask a running daemon's health endpoint (`/livez` by default) and exit 0 when it
    /// answers 200, 1 otherwise: a container HEALTHCHECK without curl.
    Health(HealthArgs),
    /// Print a shell completion script (e.g. `sheetq completions bash >
    /// /etc/bash_completion.d/sheetq`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `sheetq man > /usr/local/share/man/man1/sheetq.1`;
    /// with --dir, write one page per subcommand there (sheetq.1, sheetq-run.1, …).
    Man {
        /// Write every page (sheetq.1 and sheetq-<subcommand>.1) into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum PanelsCommand {
    /// Build or refresh the index `▶パネル` and every existing panel (3 API requests in all);
    /// create panels only for the targets named with --open (or all with --all).
    Sync(PanelsSyncArgs),
    /// Replace an old panel sheet by the index: it keeps its title, its content moves to a
    /// hidden copy; its rows whose label is a known target get panels, the others are listed.
    Migrate(PanelsMigrateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct PanelsSyncArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Create (or show again) the panel of this target; repeat for more.
    #[arg(long, value_name = "LABEL")]
    pub open: Vec<String>,
    /// Create (or show again) the panel of every target.
    #[arg(long)]
    pub all: bool,
    /// Read and report what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Args)]
pub struct PanelsMigrateArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Title (tab name) of the old panel sheet.
    pub sheet: String,
    /// Column of the old sheet holding the target labels.
    #[arg(long, default_value = "A", value_parser = column_arg)]
    pub label_column: u32,
    /// Column of the old sheet holding the targets' positions, if any.
    #[arg(long, value_parser = column_arg)]
    pub position_column: Option<u32>,
    /// First row of targets (below the old sheet's header).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    pub first_row: u32,
    /// Read and report what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A column given as letters (`B`), zero-based.
fn column_arg(text: &str) -> Result<u32, String> {
    crate::a1::column_index(text.trim())
        .ok_or_else(|| format!("\"{text}\" is not a column; write letters such as \"B\""))
}

#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// Config file [default: ./sheetq.toml, else /etc/sheetq/sheetq.toml].
    #[arg(long, short, env = "SHEETQ_CONFIG")]
    pub config: Option<PathBuf>,
    /// With a config that lists [[spreadsheets]]: act on this one only (its label or id).
    #[arg(long, value_name = "LABEL_OR_ID")]
    pub spreadsheet: Option<String>,
}

impl ConfigArgs {
    /// The config file to read (`--config`, `SHEETQ_CONFIG`, else the first of
    /// [`crate::config::CONFIG_PLACES`] that exists).
    pub fn path(&self) -> Result<PathBuf, crate::config::ConfigError> {
        crate::config::find_config(self.config.as_deref(), Path::exists)
    }

    /// Finds and reads the config, for a command that acts on one spreadsheet: the one
    /// `--spreadsheet` names, or the config's only one.
    pub fn load(&self) -> anyhow::Result<Config> {
        let path = self.path()?;
        let config = Config::load(&path)?;
        let mut each = self.select(&config, &path)?;
        if each.len() == 1 {
            return Ok(each.remove(0));
        }
        let labels: Vec<&str> = each.iter().map(|c| c.label.as_str()).collect();
        Err(problem_in(
            &path,
            format!(
                "the config serves {} spreadsheets ({}); name one with --spreadsheet LABEL_OR_ID",
                each.len(),
                labels.join(", ")
            ),
        )
        .into())
    }

    /// Finds and reads the config, for a command that acts on every spreadsheet it serves:
    /// each one's config ([`Config::each_spreadsheet`]), or only the one `--spreadsheet` names.
    pub fn load_each(&self) -> anyhow::Result<Vec<Config>> {
        let path = self.path()?;
        let config = Config::load(&path)?;
        self.select(&config, &path)
    }

    /// The spreadsheets of `config` (read from `path`) this command acts on.
    pub fn select(&self, config: &Config, path: &Path) -> anyhow::Result<Vec<Config>> {
        match &self.spreadsheet {
            Some(which) => Ok(vec![config
                .spreadsheet(which)
                .map_err(|p| problem_in(path, p))?]),
            None => Ok(config.each_spreadsheet()),
        }
    }
}

/// A problem of the config at `path` (exit code 2, as for any bad config or argument).
fn problem_in(path: &Path, problem: String) -> crate::config::ConfigError {
    crate::config::ConfigError {
        source_name: path.display().to_string(),
        problems: vec![problem],
    }
}

/// A heading naming `config`'s spreadsheet, before what a command says of it, when it acts
/// on several.
fn heading(config: &Config, several: bool) -> Option<String> {
    several.then(|| format!("== {} ({})", config.label, config.spreadsheet_id))
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print JSON instead of text, for scripts.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Print JSON instead of text, for scripts.
    #[arg(long)]
    pub json: bool,
    /// Also test every Google behaviour sheetq relies on, on a temporary hidden sheet of the
    /// spreadsheet (`_sheetq_probe_…`, deleted afterwards, also on Ctrl-C). Writes: run it
    /// before the first daemon, or while none claims.
    #[arg(long)]
    pub probe: bool,
    /// With --probe: save the results as JSON to FILE (to compare with the emulator; see
    /// tests/fixtures/google/).
    #[arg(long, value_name = "FILE", requires = "probe")]
    pub save: Option<PathBuf>,
    /// With --probe: run only these probes (names as the table prints them).
    #[arg(long, value_name = "PROBE", requires = "probe", value_delimiter = ',')]
    pub only: Vec<String>,
    /// With --probe: the key file of a service account of another Cloud project, shared on
    /// the spreadsheet as Editor, for the probes of what other editors may do (protect inside
    /// sheetq's ranges, see or delete its developer metadata); skipped without it.
    #[arg(long, value_name = "FILE", requires = "probe")]
    pub probe_editor: Option<PathBuf>,
    /// With --probe: the key file of a service account shared on the spreadsheet as Viewer,
    /// for the probe of a viewer's write; skipped without it.
    #[arg(long, value_name = "FILE", requires = "probe")]
    pub probe_viewer: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Read the real sheet but write nothing; log each write that would have been sent.
    #[arg(long)]
    pub dry_run: bool,
    /// Serve Prometheus metrics at /metrics, liveness at /livez and readiness at /readyz on
    /// this address (HOST:PORT; HOST a name such as `localhost` or an IP, `[::1]` for IPv6).
    #[arg(long, env = "SHEETQ_METRICS_LISTEN", value_parser = listen_address)]
    pub metrics_listen: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct EnqueueArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Target label (the panel's G2 marker).
    #[arg(long)]
    pub target: String,
    /// Function label.
    #[arg(long)]
    pub function: String,
    /// Command name, for a config without [[functions]]; with them it comes from the
    /// function (give it only to say which one you expect).
    #[arg(long)]
    pub command: Option<String>,
    /// Arguments as a JSON object: with [[functions]], only the keys its `args_from_sheet`
    /// lets a job set, over the function's args; without, the job's whole args.
    #[arg(long)]
    pub args: Option<String>,
    /// A value of one of the function's inputs (its `inputs` in [[functions]]), checked by
    /// its rule as the daemon will; repeat for more. Inputs not given take their default.
    #[arg(long = "input", value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,
    /// Requester e-mail (may be empty).
    #[arg(long, default_value = "")]
    pub requester: String,
    /// Wait for the job to finish and print its outcome; the exit code follows it (0 完了,
    /// 4 エラー or タイムアウト; 1 is sheetq's own failure). The queue is read every 5 s
    /// meanwhile (one read each).
    #[arg(long)]
    pub wait: bool,
    /// Print JSON (the jobId, warnings, and with --wait the outcome) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RolloutArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The rollout's name (`name` of its [[rollouts]] entry).
    pub name: String,
    /// A value of one of its function's inputs that the rollout does not fix, checked by
    /// its rule as the daemon will; repeat for more. Inputs not given take their default.
    #[arg(long = "input", value_name = "NAME=VALUE")]
    pub inputs: Vec<String>,
    /// Requester e-mail (may be empty); its function's `allow` must let it run.
    #[arg(long, default_value = "")]
    pub requester: String,
    /// Wait for the rollout to end and print its outcome (`成功 18 · 失敗 1 · 中止 1`); the
    /// exit code follows it (0 完了, 4 エラー or キャンセル; 1 is sheetq's own failure). The
    /// queue is read every 5 s meanwhile (one read each).
    #[arg(long)]
    pub wait: bool,
    /// Print JSON (the jobId, and with --wait the outcome) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The job's jobId.
    pub job_id: String,
    /// Go on printing what the job adds until it ends (a local file is looked at every
    /// 0.5 s; the sheet every 10 s, two reads each time).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Print the output's bytes as they are. Without it, control and format characters
    /// other than line feeds and tabs are shown as `\u{1b}`, so no escape sequence in a
    /// job's output acts on the terminal. Refused when stdout is a terminal, unless
    /// `--force`.
    #[arg(long)]
    pub raw: bool,
    /// With `--raw`, print to a terminal all the same.
    #[arg(long, requires = "raw")]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Only jobs in this state: the word the queue shows (完了) or its name (waiting,
    /// running, done, error, timeout, cancelled, awaiting-approval, rejected, expired).
    #[arg(long)]
    pub state: Option<String>,
    /// Only jobs of this target label.
    #[arg(long)]
    pub target: Option<String>,
    /// Only jobs of this function label.
    #[arg(long)]
    pub function: Option<String>,
    /// Only jobs received since: an age (2h, 7d) or a date in the spreadsheet's time zone
    /// (2026-12-01, "2026-12-01 09:30").
    #[arg(long, value_name = "WHEN")]
    pub since: Option<crate::admin::history::Since>,
    /// At most this many jobs (0: all of them). The archive is read only as far as needed.
    #[arg(long, default_value_t = crate::admin::history::DEFAULT_LIMIT)]
    pub limit: usize,
    /// Print JSON instead of text, for scripts.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The job's jobId (from `sheetq jobs`, the queue, or a notification).
    pub job_id: String,
    /// Print JSON instead of text, for scripts.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RerunArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The jobId of the job to queue again (in the queue or the archive).
    pub job_id: String,
    /// Who asks, as 依頼者 shows it; default: the shell's `user@host`. A function with
    /// approvers needs its approvals again: a rerun is a new press.
    #[arg(long = "as", value_name = "WHO")]
    pub who: Option<String>,
    /// Wait for the new job to finish and print its outcome, as `enqueue --wait` does.
    #[arg(long)]
    pub wait: bool,
    /// Print JSON (the new jobId, warnings, and with --wait the outcome) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct SchedulesArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How many occurrences to list per schedule.
    #[arg(long, default_value_t = 5)]
    pub count: usize,
    /// The spreadsheet's time zone (e.g. Asia/Tokyo), instead of reading it from the
    /// spreadsheet (one request).
    #[arg(long, value_name = "TZ")]
    pub time_zone: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The job's jobId (as `enqueue` printed it, or from the queue or `sheetq status`).
    pub job_id: String,
    /// Who asks, as メッセージ shows it (「中止: <who> HH:mm」); default: the shell's `user@host`.
    #[arg(long = "as", value_name = "WHO")]
    pub who: Option<String>,
    /// Wait for the job to end and print its outcome: exit 0 when it ended キャンセル, 4 when
    /// it ended otherwise (it finished first). The queue is read every 5 s (one read each).
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The job's jobId (from the panel's queue row, `sheetq status` or a notification).
    pub job_id: String,
    /// Who approves or rejects: an address among the function's approvers, not the
    /// requester. Recorded on the queue row with the time.
    #[arg(long = "as", value_name = "WHO")]
    pub who: String,
}

/// Runs a parsed command line to its exit code.
pub async fn execute(cli: Cli) -> ExitCode {
    match dispatch(cli.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sheetq: {e:#}");
            let setup = e.downcast_ref::<crate::config::ConfigError>().is_some()
                || e.downcast_ref::<crate::sheets::auth::CredentialsError>()
                    .is_some()
                // A key file missing or unusable, an api_base_url or spreadsheet_id that
                // cannot work: set-up, whichever command met it.
                || e.downcast_ref::<crate::sheets::google::BuildError>()
                    .is_some()
                || e.downcast_ref::<crate::daemon::DaemonError>()
                    .is_some_and(crate::daemon::DaemonError::is_setup_problem);
            if setup {
                ExitCode::from(EXIT_CONFIG)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run(args).await,
        #[cfg(feature = "emulator")]
        Command::Demo(args) => {
            crate::demo::run(args, &mut std::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "emulator")]
        Command::Bench(args) => {
            crate::bench::run(&args, &mut std::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "emulator")]
        Command::Emulator(args) => {
            let shutdown = CancellationToken::new();
            tokio::spawn(cancel_on_signal(shutdown.clone()));
            if !args.allow_remote && !args.listen.ip().is_loopback() {
                return Err(
                    crate::emulator::EmulatorError::NotLoopback { addr: args.listen }.into(),
                );
            }
            crate::emulator::serve(args.into(), shutdown).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Init(args) => {
            let configs = args.load_each()?;
            for config in &configs {
                if let Some(h) = heading(config, configs.len() > 1) {
                    println!("{h}");
                }
                let sheets = connect_one_shot(config).await?;
                for line in admin::init(sheets.as_ref(), config).await? {
                    println!("{line}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(args) => {
            let configs = args.config.load_each()?;
            let mut ok = true;
            let mut seen = Vec::new();
            for config in configs.iter() {
                if let Some(h) = heading(config, configs.len() > 1 && !args.json) {
                    println!("{h}");
                }
                let (passed, saw) = check(&args, config.clone()).await?;
                ok &= passed;
                seen.push(saw);
            }
            if configs.len() > 1 {
                // What one spreadsheet's check cannot tell: each account's budget across all.
                let each: Vec<_> = configs
                    .iter()
                    .zip(seen.iter().map(Option::as_ref))
                    .collect();
                let findings = crate::check::accounts(&each);
                if !args.json {
                    println!(
                        "== the service accounts' budgets, across the {} spreadsheets",
                        configs.len()
                    );
                }
                let fits = "ok: each account's budget fits what its spreadsheets need";
                ok &= print_findings(&args, &findings, None, fits, |json| {
                    json["accounts"] = serde_json::json!(true);
                });
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_PROBLEMS)
            })
        }
        Command::Status(args) => {
            let configs = args.config.load_each()?;
            let mut all = Vec::new();
            for config in &configs {
                // A daemon on this machine holding the spreadsheet off says why, even when
                // the spreadsheet cannot be read from here either (sharing withdrawn, a sheet
                // deleted): the note is local.
                let status = match connect_one_shot(config).await {
                    Ok(sheets) => admin::status(sheets.as_ref(), config)
                        .await
                        .map_err(anyhow::Error::from),
                    Err(e) => Err(e),
                };
                let status = match status {
                    Ok(status) => status,
                    Err(e) => {
                        if let Some(p) = crate::pause::read(&config.state_dir) {
                            eprintln!("{}", p.line(chrono_tz::UTC));
                        }
                        return Err(e);
                    }
                };
                if !args.json {
                    if let Some(h) = heading(config, configs.len() > 1) {
                        println!("{h}");
                    }
                    print!("{}", status.text());
                }
                all.push((config.label.clone(), config.spreadsheet_id.clone(), status));
            }
            if args.json {
                match &all[..] {
                    [(_, _, one)] => println!("{}", serde_json::to_string_pretty(one)?),
                    several => {
                        let list: Vec<serde_json::Value> = several
                            .iter()
                            .map(|(label, id, status)| {
                                serde_json::json!({ "spreadsheet": label, "spreadsheet_id": id, "status": status })
                            })
                            .collect();
                        println!("{}", serde_json::to_string_pretty(&list)?);
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Health(args) => health(args).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "sheetq", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: None } => {
            let command = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(command)
                .render(&mut std::io::stdout())
                .context("cannot write the man page")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir: Some(dir) } => {
            let command = <Cli as clap::CommandFactory>::command();
            clap_mangen::generate_to(command, &dir).with_context(|| {
                format!(
                    "cannot write the man pages into {} (does the directory exist?)",
                    dir.display()
                )
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Panels(command) => panels(command).await,
        Command::Enqueue(args) => enqueue(args).await,
        Command::Rollout(args) => rollout(args).await,
        Command::Cancel(args) => cancel(args).await,
        Command::Approve(args) => approve(args, false).await,
        Command::Reject(args) => approve(args, true).await,
        Command::Logs(args) => logs(args).await,
        Command::Jobs(args) => jobs(args).await,
        Command::Show(args) => show(args).await,
        Command::Rerun(args) => rerun(args).await,
        Command::Schedules(args) => schedules(args).await,
    }
}

/// `sheetq run`: the daemon, with its metrics and health endpoint and the systemd
/// watchdog beside it, until a signal; results not yet written stay in the outbox.
async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config_path = args.config.path()?;
    let config = Config::load(&config_path)?;
    let configs = args.config.select(&config, &config_path)?;
    let stats = Arc::new(SheetsStats::new());
    let serving = if config.spreadsheets.is_empty() {
        let registry = registry(&config)?;
        let sheets = connect_with(&config, None, args.dry_run, stats.clone()).await?;
        Serving::One(sheets, registry)
    } else {
        Serving::Several(crate::setup::spreadsheets(configs, args.dry_run).await?)
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    let limit = Health::limit_for(config.poll_interval, config.call_timeout);
    // Several spreadsheets: run_spreadsheets gives each its own registry and health, with
    // its client's counters, under these.
    let (metrics, health) = match &serving {
        Serving::One(..) => (
            Metrics::with_api_stats(stats.clone()),
            Health::with_api_stats(limit, stats),
        ),
        Serving::Several(_) => (Metrics::new(), Health::new(limit)),
    };
    let observers = Observers {
        metrics: Arc::new(metrics),
        health,
        notifier: Arc::new(Notifier::from_env().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "systemd notification disabled");
            Notifier::disabled()
        })),
        reloads: None,
    };
    let (reload_tx, reload_rx) = tokio::sync::watch::channel(None);
    let observers = Observers {
        reloads: Some(reload_rx),
        ..observers
    };
    let mut side_tasks = tokio::task::JoinSet::new();
    if let Some(addr) = args.metrics_listen.clone() {
        let (m, h, s) = (
            observers.metrics.clone(),
            observers.health.clone(),
            shutdown.clone(),
        );
        // Bind before the daemon starts, so a taken port is a startup error.
        let listener = tokio::net::TcpListener::bind(addr.as_str())
            .await
            .with_context(|| format!("cannot listen on --metrics-listen {addr}"))?;
        side_tasks.spawn(async move {
            if let Err(e) = metrics::serve_listener(listener, m, h, s).await {
                tracing::error!(error = %e, "metrics endpoint stopped");
            }
        });
    }
    {
        let (n, h, s) = (
            observers.notifier.clone(),
            observers.health.clone(),
            shutdown.clone(),
        );
        side_tasks.spawn(async move { n.watchdog_loop(h, s).await });
    }
    // What commands leave behind is reparented to sheetq and reaped (sheetq may be PID 1).
    side_tasks.spawn(crate::commands::reaper::run(shutdown.clone()));
    side_tasks.spawn(reload_on_hangup(config_path, reload_tx, shutdown.clone()));
    let result = match serving {
        Serving::One(sheets, registry) => {
            crate::daemon::run_observed(sheets, config, registry, shutdown.clone(), observers).await
        }
        Serving::Several(spreadsheets) => {
            crate::daemon::run_spreadsheets(spreadsheets, config.slots, shutdown.clone(), observers)
                .await
        }
    };
    shutdown.cancel();
    while side_tasks.join_next().await.is_some() {}
    let report = result?;
    if report.results_pending > 0 {
        eprintln!(
            "sheetq: {} result(s) could not be written and stay in the outbox for the next start",
            report.results_pending
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What one `sheetq run` serves: a config's one spreadsheet, or its `[[spreadsheets]]`.
enum Serving {
    One(Arc<dyn crate::sheets::Sheets>, Registry),
    Several(Vec<crate::daemon::Spreadsheet>),
}

/// On each SIGHUP, reads and checks the config at `path` again and hands it to the daemon
/// (`systemctl reload sheetq`); a config with problems is refused, each named, and the one
/// in force stays.
async fn reload_on_hangup(
    path: PathBuf,
    reloads: tokio::sync::watch::Sender<Option<Arc<crate::daemon::Reload>>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch for SIGHUP: the config is read only at start");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            got = hangups.recv() => if got.is_none() { return },
        }
        tracing::info!(config = %path.display(), "SIGHUP: reading the config again");
        let read = Config::load(&path)
            .map_err(anyhow::Error::new)
            .and_then(|config| Ok((registries(&config)?, config)));
        match read {
            Ok((registry, config)) => {
                reloads.send_replace(Some(Arc::new(crate::daemon::Reload { config, registry })));
            }
            Err(e) => {
                tracing::error!("the config was not reloaded, the one in force stays: {e:#}");
            }
        }
    }
}

/// The command registry of `config`, checked as at start: with `[[spreadsheets]]`, each
/// spreadsheet's functions (its own, or the top level's) against the commands, so a reload
/// is refused for what would have stopped a start.
fn registries(config: &Config) -> anyhow::Result<Registry> {
    if config.spreadsheets.is_empty() {
        return registry(config);
    }
    let mut first = None;
    for part in config.each_spreadsheet() {
        let checked = registry(&part).with_context(|| format!("spreadsheet {:?}", part.label))?;
        first.get_or_insert(checked);
    }
    first.ok_or_else(|| anyhow::anyhow!("the config lists no spreadsheet"))
}

/// `sheetq panels sync|migrate`: one panel sync; exit 3 when something is left unresolved.
async fn panels(command: PanelsCommand) -> anyhow::Result<ExitCode> {
    let (configs, request) = match command {
        PanelsCommand::Sync(a) => (
            a.config.load_each()?,
            crate::apply::panel::SyncRequest {
                open: a.open,
                open_all: a.all,
                migrate: None,
                dry_run: a.dry_run,
            },
        ),
        PanelsCommand::Migrate(a) => (
            vec![a.config.load()?],
            crate::apply::panel::SyncRequest {
                migrate: Some(crate::panel::sync::Migration {
                    title: a.sheet,
                    label_col: a.label_column,
                    position_col: a.position_column,
                    first_row: a.first_row,
                }),
                dry_run: a.dry_run,
                ..Default::default()
            },
        ),
    };
    let mut unresolved = false;
    for config in &configs {
        if let Some(h) = heading(config, configs.len() > 1) {
            println!("{h}");
        }
        registry(config)?;
        let sheets = connect_one_shot(config).await?;
        let done = crate::apply::panel::sync(sheets.as_ref(), config, &request, None).await?;
        if request.dry_run {
            println!("dry run: nothing was written; a sync would:");
            print!("{}", would(&done.report.to_string()));
        } else {
            print!("{}", done.report);
        }
        println!(
            "{} API requests ({} changes in one batch)",
            done.requests, done.batch_len
        );
        unresolved |= !done.report.unresolved.is_empty();
    }
    Ok(if !unresolved {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROBLEMS)
    })
}

/// A sync's report, said of what a dry run would do: each line's leading verb in the
/// present ("protect", "create panel"), not the past tense of what a sync did.
fn would(report: &str) -> String {
    const VERBS: [(&str, &str); 8] = [
        ("index: created", "index: create"),
        ("index: updated", "index: update"),
        ("index: made from", "index: make from"),
        ("created panel", "create panel"),
        ("updated panels", "update panels"),
        ("shown again", "show again"),
        ("hidden (idle)", "hide (idle)"),
        ("protected ", "protect "),
    ];
    report
        .lines()
        .map(|line| {
            let line = VERBS
                .iter()
                .find_map(|(did, does)| line.strip_prefix(did).map(|rest| format!("{does}{rest}")))
                .unwrap_or_else(|| line.to_string());
            format!("  {line}\n")
        })
        .collect()
}

/// The `--input NAME=VALUE` options, each value a text the input's rule reads; `None` (said
/// on stderr, with `not_done` first) for one that is not NAME=VALUE.
fn given_inputs(given: &[String], not_done: &str) -> Option<Vec<(String, serde_json::Value)>> {
    let mut inputs = Vec::new();
    for given in given {
        let Some((name, value)) = given.split_once('=') else {
            eprintln!(
                "sheetq: {not_done}: --input {given:?} must be NAME=VALUE, e.g. --input version=1.2.4"
            );
            return None;
        };
        inputs.push((
            name.trim().to_string(),
            serde_json::Value::String(value.to_string()),
        ));
    }
    Some(inputs)
}

/// `sheetq enqueue [--wait]`: refuses what the daemon would refuse, appends the row, and
/// with `--wait` waits for the outcome (exit 4 for エラー or タイムアウト).
async fn enqueue(args: EnqueueArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let Some(inputs) = given_inputs(&args.inputs, "not enqueued") else {
        return Ok(ExitCode::from(EXIT_CONFIG));
    };
    let job = match admin::job_of(
        &config,
        &args.target,
        &args.function,
        args.command.as_deref(),
        args.args.as_deref(),
        &inputs,
        &args.requester,
    ) {
        Ok(job) => job,
        Err(why) => {
            eprintln!("sheetq: not enqueued: {why}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    if let Some(why) = daemon_would_refuse(&config, &job)? {
        eprintln!("sheetq: not enqueued, the daemon would refuse it: {why}");
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    let sheets = connect_one_shot(&config).await?;
    submit(&config, sheets.as_ref(), &job, args.wait, args.json).await
}

/// `sheetq rollout NAME [--wait]`: refuses what the daemon would refuse of its jobs,
/// appends the rollout's row, and with `--wait` waits for its end (exit 4 for エラー or
/// キャンセル).
async fn rollout(args: RolloutArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let Some(inputs) = given_inputs(&args.inputs, "rollout not started") else {
        return Ok(ExitCode::from(EXIT_CONFIG));
    };
    let job = match admin::rollout_job(&config, &args.name, &inputs, &args.requester) {
        Ok(job) => job,
        Err(why) => {
            eprintln!("sheetq: rollout not started: {why}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    let sheets = connect_one_shot(&config).await?;
    queue_rollout(
        &config,
        sheets.as_ref(),
        &args.name,
        &job,
        args.wait,
        args.json,
    )
    .await
}

/// Queues the row `job` of rollout `name`, as `rollout` and `rerun` do: its jobs checked as
/// the daemon will check the first, then appended; prints its jobId, and with `wait` its end
/// (exit 4 for エラー or キャンセル).
async fn queue_rollout(
    config: &Config,
    sheets: &dyn crate::sheets::Sheets,
    name: &str,
    job: &admin::NewJob,
    wait: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    // Each target's job is the function's with these args: refused here as the daemon
    // would refuse the first.
    let (function, targets) = config
        .rollouts
        .iter()
        .find(|r| r.name == name)
        .map(|r| (r.function.clone(), r.targets_in(&config.catalog)))
        .unwrap_or_default();
    if let (Some(target), Some(f)) = (targets.first(), config.catalog.function(&function)) {
        let child =
            admin::NewJob::pressed(target, &f.label, &f.command, &job.args_json, &job.requester);
        if let Some(why) = daemon_would_refuse(config, &child)? {
            eprintln!("sheetq: rollout not started, the daemon would refuse its jobs: {why}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    }
    let job_id = admin::enqueue(sheets, config, job).await?;
    if !json || !wait {
        if json {
            println!(
                "{}",
                serde_json::json!({ "job_id": job_id, "targets": targets })
            );
        } else {
            println!("{job_id}");
        }
    }
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let every = std::time::Duration::from_secs(5);
    // Its end's counts go with the swap of its 状態, or (a row that showed no progress yet)
    // follow it under the daemon's next lease: a few looks more at most.
    let mut looks = 0;
    let done = loop {
        let done = admin::wait_finished(sheets, config, &job_id, every).await?;
        looks += 1;
        let to_come =
            done.message.trim().is_empty() || crate::queue::is_rollout_progress(&done.message);
        if !to_come || looks > 6 {
            break done;
        }
        tokio::time::sleep(every).await;
    };
    let word = config.states.word(done.state);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "job_id": job_id,
                "targets": targets,
                "state": word,
                "message": done.message,
            })
        );
    } else {
        println!(
            "{word}: {}",
            crate::sheet_text::visible(&done.message, 1000)
        );
    }
    Ok(if done.state == crate::queue::State::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_JOB_FAILED)
    })
}

/// Why the daemon would refuse `job` when it ran its row, if it would: checked before a
/// row exists. A function with approvers is not refused for want of approvals: the row is
/// queued and waits for them (承認待ち), as a press does.
fn daemon_would_refuse(config: &Config, job: &admin::NewJob) -> anyhow::Result<Option<String>> {
    // What the daemon would refuse is refused here, before a row exists. `enqueue` makes the
    // row's jobId; one of the same shape stands in for it (a `{job_id}` pattern sees a UUID).
    let spec = crate::commands::JobSpec {
        job_id: uuid::Uuid::new_v4().to_string(),
        target: job.target.clone(),
        function: job.function.clone(),
        requester: job.requester.clone(),
        command: job.command.clone(),
        args_json: job.args_json.clone(),
        panel_sheet: job.panel_sheet.clone(),
        flags: job.flags.clone(),
        ..Default::default()
    };
    // Whether the queue vouches for 依頼者 is the daemon's to judge when it runs the row
    // (it reads the protection); here, the job itself is checked as if it does.
    // A function with approvers is refused for want of approvals only: the row is queued
    // and waits for them (承認待ち), as a press does.
    Ok(registry(config)?
        .with_queue_protected(true)
        .prepare(&spec)
        .err()
        .filter(|r| r.reason != crate::commands::Refusal::Approval)
        .map(|r| r.message))
}

/// Queues `job` as `enqueue` and `rerun` do, once [`daemon_would_refuse`] passed it: warns
/// of a target without a panel, appends the row, prints its jobId, and with `wait` waits for
/// the outcome (exit 4 for エラー or タイムアウト).
async fn submit(
    config: &Config,
    sheets: &dyn crate::sheets::Sheets,
    job: &admin::NewJob,
    wait: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut warnings = Vec::new();
    if !admin::has_panel(sheets, config, &job.target).await? {
        warnings.push(format!(
            "no panel carries the target label \"{}\": the job runs, but its result shows only in the queue (check the label, or make its panel with `sheetq panels sync --open`)",
            job.target
        ));
    }
    if !json {
        for w in &warnings {
            eprintln!("sheetq: warning: {w}");
        }
    }
    let job_id = admin::enqueue(sheets, config, job).await?;
    if !wait {
        if json {
            println!(
                "{}",
                serde_json::json!({ "job_id": job_id, "warnings": warnings })
            );
        } else {
            println!("{job_id}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        println!("{job_id}");
    }
    let every = std::time::Duration::from_secs(5);
    let done = admin::wait_finished(sheets, config, &job_id, every).await?;
    let word = config.states.word(done.state);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "job_id": job_id,
                "warnings": warnings,
                "state": word,
                "message": done.message,
                "result_url": done.result_url,
            })
        );
    } else {
        let url = if done.result_url.is_empty() {
            String::new()
        } else {
            format!(" {}", done.result_url)
        };
        // The job's メッセージ may quote its output: shown by the rule for sheet text.
        println!(
            "{word}: {}{}",
            crate::sheet_text::visible(&done.message, 1000),
            crate::sheet_text::visible(&url, crate::sheet_text::LINE_CHARS)
        );
    }
    Ok(if done.state == crate::queue::State::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_JOB_FAILED)
    })
}

/// `sheetq jobs`: the jobs of the queue and the archive, newest first.
async fn jobs(args: JobsArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let sheets = connect_one_shot(&config).await?;
    let filter = admin::history::Filter {
        state: args.state,
        target: args.target,
        function: args.function,
        since: args.since,
        limit: args.limit,
    };
    let listing = admin::history::jobs(sheets.as_ref(), &config, &filter).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        print!("{}", listing.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// `sheetq show JOBID`: everything known of one job.
async fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let sheets = connect_one_shot(&config).await?;
    let shown = admin::history::show(sheets.as_ref(), &config, &args.job_id).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        print!("{}", shown.text());
    }
    Ok(ExitCode::SUCCESS)
}

/// `sheetq rerun JOBID [--as WHO] [--wait]`: the job's function, target and inputs queued
/// again as a new press, through every check `enqueue` makes.
async fn rerun(args: RerunArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let who = args.who.unwrap_or_else(shell_user);
    let sheets = connect_one_shot(&config).await?;
    let old = admin::history::show(sheets.as_ref(), &config, &args.job_id).await?;
    if old.row.is_rollout() {
        // A rollout again: the same rollout with the inputs of its press.
        let queued = admin::history::rollout_rerun_of(&config, &old.row, &who);
        let (name, job) = match queued {
            Ok(queued) => queued,
            Err(why) => {
                eprintln!("sheetq: not queued again: {why}");
                return Ok(ExitCode::from(EXIT_CONFIG));
            }
        };
        return queue_rollout(&config, sheets.as_ref(), &name, &job, args.wait, args.json).await;
    }
    let job = match admin::history::rerun_of(&config, &old.row, &who) {
        Ok(job) => job,
        Err(why) => {
            eprintln!("sheetq: not queued again: {why}");
            return Ok(ExitCode::from(EXIT_CONFIG));
        }
    };
    if let Some(why) = daemon_would_refuse(&config, &job)? {
        eprintln!("sheetq: not queued again, the daemon would refuse it: {why}");
        return Ok(ExitCode::from(EXIT_CONFIG));
    }
    if !args.json {
        eprintln!(
            "sheetq: queuing {} of {} again (as job {} had it), requested by {}",
            crate::sheet_text::shown(&job.function),
            crate::sheet_text::shown(&job.target),
            args.job_id,
            crate::sheet_text::shown(&who)
        );
    }
    submit(&config, sheets.as_ref(), &job, args.wait, args.json).await
}

/// `sheetq logs JOBID [--follow]`: from this machine's file when there is one, else from
/// the sheet.
async fn logs(args: LogsArgs) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let config = args.config.load()?;
    let stdout = std::io::stdout();
    if args.raw && !args.force && stdout.is_terminal() {
        anyhow::bail!(
            "--raw prints the job's output as it is, escape sequences included, and stdout is a terminal they would act on; \
             pipe it (`sheetq logs --raw JOBID | less -R`, `> file`), leave --raw out to see them made visible, or add --force"
        );
    }
    let mut out: Box<dyn std::io::Write> = if args.raw {
        Box::new(stdout.lock())
    } else {
        Box::new(crate::sheet_text::VisibleWriter::new(stdout.lock()))
    };
    let local =
        admin::logs::from_file(&config.state_dir, &args.job_id, args.follow, &mut out).await?;
    if !local {
        let sheets = connect_one_shot(&config).await?;
        admin::logs::from_sheet(sheets.as_ref(), &args.job_id, args.follow, &mut out).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `sheetq schedules`: the next occurrences of each `[[schedules]]` entry.
async fn schedules(args: SchedulesArgs) -> anyhow::Result<ExitCode> {
    let config = args.config.load()?;
    let several = !config.spreadsheets.is_empty();
    for c in config.each_spreadsheet() {
        let zone = match &args.time_zone {
            Some(tz) => tz.clone(),
            None if c.schedules.is_empty() => "UTC".to_string(),
            None => connect_one_shot(&c).await?.metadata().await?.time_zone,
        };
        let tz: chrono_tz::Tz = zone
            .parse()
            .map_err(|_| anyhow::anyhow!("{zone:?} is not a time zone name (e.g. Asia/Tokyo)"))?;
        if several {
            println!("== {} ({})", c.label, c.spreadsheet_id);
        }
        print!(
            "{}",
            admin::schedules::listing(
                &c.schedules,
                &c.spreadsheet_id,
                tz,
                chrono::Utc::now(),
                args.count.clamp(1, 100)
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `sheetq cancel JOBID [--as WHO] [--wait]`: writes the request; exit 0 when the job is
/// asked to stop (or already ended キャンセル), 4 when it had ended otherwise, and with
/// `--wait` as it ends.
/// Who runs this command, as a stop request names them without `--as`: `user@host` (the
/// login name from the environment, else the account of the process's uid).
fn shell_user() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.trim().is_empty()))
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        })
        .unwrap_or_else(|| format!("uid {}", nix::unistd::getuid()));
    format!("{user}@{}", crate::config::host_name())
}

async fn cancel(args: CancelArgs) -> anyhow::Result<ExitCode> {
    use crate::admin::cancel::Outcome;
    let config = args.config.load()?;
    let who = args.who.unwrap_or_else(shell_user);
    let sheets = connect_one_shot(&config).await?;
    let outcome = admin::cancel::cancel(sheets.as_ref(), &config, &args.job_id, &who).await?;
    let word = |s| config.states.word(s);
    let job = &args.job_id;
    match &outcome {
        Outcome::Asked { state } => {
            println!(
                "{job}: asked to stop (it was {}); the daemon holding it acts within a poll",
                word(*state)
            );
        }
        Outcome::AlreadyAsked { state, by } => {
            // Who asked is the row's text: shown by the rule for sheet text.
            println!(
                "{job}: already asked to stop by {}; it is {}",
                crate::sheet_text::visible(by, crate::sheet_text::LINE_CHARS),
                word(*state)
            );
        }
        Outcome::AskedDaemon { worker } => {
            // No row to wait on: the job's result goes nowhere (its row is gone).
            println!(
                "{job}: its queue row is gone; asked the daemon {} that runs it (through its heartbeat row) to stop it within a poll",
                crate::sheet_text::visible(worker, crate::sheet_text::LINE_CHARS)
            );
            return Ok(ExitCode::SUCCESS);
        }
        Outcome::Ended { state } => {
            println!("{job}: already ended {}; nothing to stop", word(*state));
            return Ok(if *state == crate::queue::State::Cancelled {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_JOB_FAILED)
            });
        }
    }
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let every = std::time::Duration::from_secs(5);
    let done = admin::wait_finished(sheets.as_ref(), &config, job, every).await?;
    println!(
        "{}: {}",
        word(done.state),
        crate::sheet_text::visible(&done.message, 1000)
    );
    Ok(if done.state == crate::queue::State::Cancelled {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_JOB_FAILED)
    })
}

/// `sheetq approve|reject JOBID --as WHO`: checks WHO against the function's approvers and
/// writes the approval (or the rejection) to the job's row; exit 1, naming why, when it may not.
/// How long `reject` waits for a daemon to turn its job 承認待ち.
const REJECT_WAITS: std::time::Duration = std::time::Duration::from_secs(60);

async fn approve(args: ApproveArgs, reject: bool) -> anyhow::Result<ExitCode> {
    use crate::admin::approve::Outcome;
    let config = args.config.load()?;
    let registry = registry(&config)?;
    let sheets = connect_one_shot(&config).await?;
    let (job, who) = (&args.job_id, args.who.trim());
    let catalog = registry.catalog();
    let outcome = if reject {
        // A job a daemon has not turned 承認待ち yet is waited for: its turn comes within a
        // poll, and a rejection before it would end the job キャンセル, not 却下.
        let until = tokio::time::Instant::now() + REJECT_WAITS;
        let mut said = false;
        loop {
            match admin::approve::reject(sheets.as_ref(), &config, catalog, job, who).await {
                Err(admin::AdminError::NotYet(why)) if tokio::time::Instant::now() < until => {
                    if !said {
                        eprintln!(
                            "sheetq: {why}; waiting for it (up to {} s)",
                            REJECT_WAITS.as_secs()
                        );
                        said = true;
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                }
                other => break other?,
            }
        }
    } else {
        admin::approve::approve(sheets.as_ref(), &config, catalog, job, who).await?
    };
    match (outcome, reject) {
        (Outcome::Already, false) => println!("{job}: {who} had already approved it"),
        (Outcome::Already, true) => println!("{job}: already asked to stop; the daemons end it within a poll"),
        (Outcome::Written { count, needed }, false) if count >= needed => println!(
            "{job}: approved by {who} ({count}/{needed}); a daemon turns it {} within a poll, then it runs by the claim rules",
            config.states.waiting
        ),
        (Outcome::Written { count, needed }, false) => println!(
            "{job}: approved by {who} ({count}/{needed}); it waits for {} more",
            needed - count
        ),
        (Outcome::Written { .. }, true) => println!(
            "{job}: rejected by {who}; a daemon ends it {} within a poll",
            config.states.rejected
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `sheetq check [--probe]`: the deployment's problems, then (with `--probe`) Google's
/// behaviours on a temporary sheet; exit 3 when a problem is found or a probe did not pass.
async fn check(
    args: &CheckArgs,
    config: Config,
) -> anyhow::Result<(bool, Option<crate::check::Seen>)> {
    let (registry, config_problems) = crate::setup::registry_for_check(&config);
    // Each fault of a [commands.X] table with where it is in the file.
    let config_problems = match args.config.path().map(std::fs::read_to_string) {
        Ok(Ok(text)) => crate::config::with_places(&text, config_problems),
        _ => config_problems,
    };
    let only = args
        .only
        .iter()
        .map(|name| {
            crate::probe::Probe::parse(name).ok_or_else(|| {
                let names: Vec<String> =
                    crate::probe::Probe::ALL.iter().map(|p| p.name()).collect();
                anyhow::anyhow!(
                    "--only {name}: no such probe; the probes are {}",
                    names.join(", ")
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let sheets = connect_one_shot(&config).await?;
    let mut findings = crate::check::deployment(sheets.as_ref(), &config, &registry).await?;
    findings.problems.splice(0..0, config_problems);
    let probes = if args.probe {
        // A budget whose burst lets the concurrent probe's two calls go out at once (a
        // budget of 60 a minute has a burst of one).
        let mut probing = config.clone();
        if probing.requests_per_minute > 50 && probing.requests_per_minute <= 60 {
            probing.requests_per_minute = 50;
        }
        let sheets = connect_one_shot(&probing).await?;
        let as_other = |key: &Option<PathBuf>| {
            let mut other = probing.clone();
            other.credentials = key.clone();
            async move {
                match &other.credentials {
                    Some(_) => connect_one_shot(&other).await.map(Some),
                    None => Ok(None),
                }
            }
        };
        let editor = as_other(&args.probe_editor).await?;
        let viewer = as_other(&args.probe_viewer).await?;
        let others = crate::probe::Others {
            editor: editor.as_deref(),
            viewer: viewer.as_deref(),
        };
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let report = crate::probe::run(sheets.as_ref(), others, &only, stop).await;
        if let Some(file) = &args.save {
            std::fs::write(file, crate::probe::saved_json(&report))
                .with_context(|| format!("cannot write the probe results to {}", file.display()))?;
        }
        Some(report)
    } else {
        None
    };
    let probes_pass = probes.as_ref().is_none_or(crate::probe::Report::all_pass);
    let matches = format!(
        "ok: the spreadsheet matches {}",
        args.config.path()?.display()
    );
    let ok = print_findings(args, &findings, probes.as_ref(), &matches, |out| {
        // With several spreadsheets, one line each, naming it.
        if !config.label.is_empty() {
            out["spreadsheet"] = serde_json::json!(config.label);
            out["spreadsheet_id"] = serde_json::json!(config.spreadsheet_id);
        }
    });
    Ok((ok && probes_pass, findings.seen))
}

/// Prints what `check` found (and the probes' table), as text (`ok_line` when it found no
/// problem) or as one JSON line that `name` completes; whether it found no problem.
fn print_findings(
    args: &CheckArgs,
    findings: &crate::check::Findings,
    probes: Option<&crate::probe::Report>,
    ok_line: &str,
    name: impl FnOnce(&mut serde_json::Value),
) -> bool {
    let ok = findings.ok() && probes.is_none_or(crate::probe::Report::all_pass);
    if args.json {
        let mut out = serde_json::json!({
            "ok": ok,
            "problems": findings.problems,
            "warnings": findings.warnings,
            "facts": findings.facts,
        });
        if let Some(r) = probes {
            out["probes"] = serde_json::to_value(r).unwrap_or_default();
        }
        name(&mut out);
        println!("{out}");
        return ok;
    }
    for fact in &findings.facts {
        println!("  {fact}");
    }
    for w in &findings.warnings {
        eprintln!("warning: {w}");
    }
    if findings.ok() {
        println!("{ok_line}");
    } else {
        eprintln!("{} problem(s):", findings.problems.len());
        for p in &findings.problems {
            eprintln!("  - {p}");
        }
    }
    if let Some(r) = probes {
        print!("{}", r.table());
    }
    ok
}

/// Cancels `token` on SIGTERM or SIGINT: the caller owns shutdown.
pub async fn cancel_on_signal(token: CancellationToken) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
    tracing::info!("signal received: shutting down (a second Ctrl-C stops at once)");
    token.cancel();
    // A person who presses Ctrl-C again does not want to wait for the drain.
    if tokio::signal::ctrl_c().await.is_ok() {
        eprintln!("sheetq: second interrupt: stopping now without waiting for running jobs; their results stay in the outbox or their rows time out");
        std::process::exit(130);
    }
}

/// `HOST:PORT` for a listening socket: a host name or an IP (IPv6 in brackets) and a port
/// number. Names are resolved when the socket is bound.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Where the daemon serves its endpoints (its --metrics-listen); a wildcard address is
    /// asked on the loopback interface.
    #[arg(long, env = "SHEETQ_METRICS_LISTEN", default_value = "127.0.0.1:9184", value_parser = listen_address)]
    pub listen: String,
    /// The endpoint: /livez (the poll loop turns) or /readyz (polls succeed).
    #[arg(long, default_value = "/livez")]
    pub path: String,
}

/// `sheetq health`: one HTTP/1.0 GET of the daemon's endpoint, within 5 s.
async fn health(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let (host, port) = args
        .listen
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("--listen {} is not HOST:PORT", args.listen))?;
    let host = match host {
        "0.0.0.0" => "127.0.0.1",
        "[::]" => "[::1]",
        other => other,
    };
    let address = format!("{host}:{port}");
    let ask = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(&address).await?;
        let request = format!("GET {} HTTP/1.0\r\nHost: {address}\r\n\r\n", args.path);
        stream.write_all(request.as_bytes()).await?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&reply).into_owned())
    };
    let reply = match tokio::time::timeout(std::time::Duration::from_secs(5), ask).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => {
            eprintln!("sheetq health: cannot ask {address}{}: {e} (is the daemon running with --metrics-listen {}?)", args.path, args.listen);
            return Ok(ExitCode::FAILURE);
        }
        Err(_) => {
            eprintln!(
                "sheetq health: {address}{} did not answer within 5 s",
                args.path
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    let status = reply.lines().next().unwrap_or_default().to_string();
    let body = reply
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_string();
    if status.split_whitespace().nth(1) == Some("200") {
        println!("{body}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "sheetq health: {address}{} answered {status}: {body}",
            args.path
        );
        Ok(ExitCode::FAILURE)
    }
}

fn listen_address(s: &str) -> Result<String, String> {
    let bad =
        || format!("{s:?} is not HOST:PORT (e.g. localhost:9184, 0.0.0.0:9184 or [::1]:9184)");
    let (host, port) = s.trim().rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    Ok(s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[test]
    fn v_and_q_set_the_log_level_over_each_commands_default() {
        let level = |args: &[&str]| {
            let cli = super::Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{e}"));
            cli.log_level("info")
        };
        assert_eq!(level(&["sheetq", "status"]), "info");
        assert_eq!(level(&["sheetq", "-v", "status"]), "debug");
        assert_eq!(level(&["sheetq", "status", "-vv"]), "trace");
        assert_eq!(level(&["sheetq", "-q", "status"]), "warn");
        assert_eq!(level(&["sheetq", "-qq", "status"]), "error");
        assert!(super::Cli::try_parse_from(["sheetq", "-v", "-q", "status"]).is_err());
    }

    #[test]
    fn metrics_listen_takes_host_names_as_well_as_addresses() {
        for ok in [
            "localhost:9184",
            "127.0.0.1:9184",
            "[::1]:9184",
            "0.0.0.0:0",
        ] {
            assert_eq!(super::listen_address(ok).as_deref(), Ok(ok));
        }
        for bad in ["localhost", ":9184", "localhost:http", "localhost:99999"] {
            let err = super::listen_address(bad).err().unwrap_or_default();
            assert!(err.contains("HOST:PORT"), "{bad}: {err}");
        }
    }
}
