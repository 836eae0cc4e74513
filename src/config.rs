//! `sheetq.toml`: the raw file as serde reads it, and the validated [`Config`] the rest of the
//! crate uses (durations parsed, defaults filled, every problem reported at once).
//!
//! The keys of docs/design.md §9 are fixed; everything else is additive. Every top-level setting can
//! be overridden by a `SHEETQ_<KEY>` environment variable (e.g. `SHEETQ_SLOTS=4`), applied
//! before validation so an override is checked like the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::panel::catalog::{Catalog, FunctionDef, NotAllowed, TargetDef};
use crate::panel::PanelLayout;
use crate::queue::{HeaderNames, StateWords};

/// Google's endpoint; the trailing `/` matters to the client.
pub const GOOGLE_API_BASE_URL: &str = "https://sheets.googleapis.com/";

/// How queue rows come into being.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Intake {
    /// An Apps Script intake appends queue rows; the daemon only runs them.
    None,
    /// The daemon turns ticked ▶ boxes into queue rows itself.
    Poll,
}

/// The file as written, before validation. Unknown keys are errors (typos must not be
/// silently ignored), except under `[commands]`, which its own module validates.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    spreadsheet_id: Option<String>,
    credentials: Option<PathBuf>,
    api_base_url: Option<String>,
    worker_id: Option<String>,
    slots: Option<i64>,
    poll_interval: Option<String>,
    idle_poll_interval: Option<String>,
    stale_after: Option<String>,
    dead_after: Option<String>,
    heartbeat_interval: Option<String>,
    lease_ttl: Option<String>,
    shutdown_grace: Option<String>,
    intake: Option<String>,
    state_dir: Option<PathBuf>,
    requests_per_minute: Option<i64>,
    call_timeout: Option<String>,
    max_retries: Option<i64>,
    sweep_rows: Option<i64>,
    log_chars: Option<i64>,
    retention: Option<String>,
    hide_panels_after: Option<String>,
    targets_from_index: Option<bool>,
    #[serde(default)]
    messages: RawMessages,
    /// Replaced by `sweep_rows`; kept only to name the fix when an old config has it.
    full_scan_every: Option<toml::Value>,
    #[serde(default)]
    queue: RawQueue,
    #[serde(default)]
    panel: Option<PanelLayout>,
    #[serde(default)]
    commands: toml::Table,
    #[serde(default)]
    functions: Vec<FunctionDef>,
    #[serde(default)]
    targets: Vec<TargetDef>,
    #[serde(default)]
    spreadsheets: Vec<RawSpreadsheet>,
    protect: Option<bool>,
    #[serde(default)]
    protect_editors: Vec<String>,
    /// `[[notify]]`, checked by [`crate::notifications::parse_channels`].
    notify: Option<toml::Value>,
    /// `[[schedules]]`, checked by [`crate::schedule::parse_schedules`] and [`schedule_problems`].
    schedules: Option<toml::Value>,
    /// `[[rollouts]]`, checked by [`crate::rollout::problems`].
    #[serde(default)]
    rollouts: Vec<crate::rollout::RolloutDef>,
}

/// One `[[spreadsheets]]` entry as written: what differs per spreadsheet; the rest comes
/// from the top level.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpreadsheet {
    spreadsheet_id: Option<String>,
    label: Option<String>,
    credentials: Option<PathBuf>,
    intake: Option<String>,
    functions: Option<Vec<FunctionDef>>,
    targets: Option<Vec<TargetDef>>,
}

/// A spreadsheet of a config that serves several (`[[spreadsheets]]`), with what it sets
/// for itself; everything else is the top level's.
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadsheetEntry {
    /// How logs, metrics and `--spreadsheet` name it (its id when the entry has no label).
    pub label: String,
    pub spreadsheet_id: String,
    /// Its own key file (a service account of its own); `None`: the top level's.
    pub credentials: Option<PathBuf>,
    pub intake: Intake,
    /// Its own `[[spreadsheets.functions]]`/`[[spreadsheets.targets]]`, else the top level's.
    pub catalog: Catalog,
}

/// `[messages]`: words sheetq writes to the sheet, for spreadsheets in other languages.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMessages {
    not_allowed: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    #[serde(default)]
    headers: Option<HeaderNames>,
    #[serde(default)]
    states: Option<StateWords>,
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub spreadsheet_id: String,
    /// Explicit key file; `None` means `GOOGLE_APPLICATION_CREDENTIALS`, then ADC.
    pub credentials: Option<PathBuf>,
    pub api_base_url: String,
    pub worker_id: String,
    /// Whether `worker_id` was set (file or environment) rather than defaulted to host + pid.
    pub worker_id_is_set: bool,
    pub slots: usize,
    pub poll_interval: Duration,
    /// The longest a spreadsheet with nothing waiting or running goes between polls: after
    /// a while without work its polls space out, up to this, and come every `poll_interval`
    /// again once a poll sees work. `poll_interval` (no spacing) for a config of one
    /// spreadsheet unless set; 30 s (within `heartbeat_interval`) for `[[spreadsheets]]`.
    pub idle_poll_interval: Duration,
    pub stale_after: Duration,
    pub dead_after: Duration,
    pub heartbeat_interval: Duration,
    pub lease_ttl: Duration,
    pub shutdown_grace: Duration,
    pub intake: Intake,
    /// Where the durable outbox lives.
    pub state_dir: PathBuf,
    /// Where the record of the account's requests lives, when it is not `state_dir/quota`:
    /// the top-level `state_dir`'s for each spreadsheet of `[[spreadsheets]]`. See
    /// [`Config::quota_dir`].
    pub shared_quota_dir: Option<PathBuf>,
    /// The service account's client-side budget, for reads and for writes each (Google
    /// counts them apart, 60 a minute each per account): split evenly among the live daemons
    /// that call the API as that account.
    pub requests_per_minute: u32,
    pub call_timeout: Duration,
    pub max_retries: u32,
    /// Rows of the 状態 column above the unfinished window that each poll reads, a slice at a
    /// time, to notice a finished row set back to 待機 by hand (0: no sweep).
    pub sweep_rows: u32,
    /// Characters of each job's output kept in its `_ジョブログ` row (the tail); 0: none.
    pub log_chars: u32,
    /// Finished jobs older than this move from the queue to `_ジョブ履歴`; `None` (written
    /// `"0"`): they stay in the queue.
    pub retention: Option<Duration>,
    pub headers: HeaderNames,
    pub states: StateWords,
    /// Where panel markers and function columns sit (`[panel]`).
    pub panel: PanelLayout,
    /// The raw `[commands]` table, validated by the command registry.
    pub commands: toml::Table,
    /// What panels offer (`[[functions]]`), which targets get one (`[[targets]]`), and when
    /// an idle panel is hidden (`hide_panels_after`).
    pub catalog: Catalog,
    /// The spreadsheets one daemon serves when the config lists them (`[[spreadsheets]]`);
    /// empty when it names one `spreadsheet_id` at the top. See [`Config::each_spreadsheet`].
    pub spreadsheets: Vec<SpreadsheetEntry>,
    /// The label of the one spreadsheet this config is for, in logs and metrics (empty for a
    /// config of a single `spreadsheet_id`).
    pub label: String,
    /// Whether sheetq keeps its hidden sheets and the panels' markers and hidden columns
    /// protected, writable by its service accounts only (`protect`, default true). False is
    /// the opt-out for an open queue: `init` and `panels sync` leave protection alone, and
    /// `check` and the daemon warn.
    pub protect: bool,
    /// Service accounts besides the one sheetq calls as that may write what it protects:
    /// other daemons' that serve the same spreadsheet (`protect_editors`), lower-cased.
    pub protect_editors: Vec<String>,
    /// `[[notify]]`: where jobs' final outcomes are announced.
    pub notify: Vec<crate::notifications::Channel>,
    /// `[[schedules]]`: jobs queued by the clock.
    pub schedules: Vec<crate::schedule::ScheduleDef>,
    /// `[[rollouts]]`: one press over many targets, a few at a time.
    pub rollouts: Vec<crate::rollout::RolloutDef>,
}

/// Every problem found in a config, each naming the key and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name} has {} problem{}:\n{}", .problems.len(), if .problems.len() == 1 { "" } else { "s" }, .problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
pub struct ConfigError {
    /// The file (or `SHEETQ_*` environment) the problems come from.
    pub source_name: String,
    pub problems: Vec<String>,
}

/// Top-level keys that take a `SHEETQ_<KEY>` override, and whether the value is a number.
const ENV_KEYS: &[(&str, bool)] = &[
    ("spreadsheet_id", false),
    ("credentials", false),
    ("api_base_url", false),
    ("worker_id", false),
    ("slots", true),
    ("poll_interval", false),
    ("idle_poll_interval", false),
    ("stale_after", false),
    ("dead_after", false),
    ("heartbeat_interval", false),
    ("lease_ttl", false),
    ("shutdown_grace", false),
    ("intake", false),
    ("state_dir", false),
    ("requests_per_minute", true),
    ("call_timeout", false),
    ("max_retries", true),
    ("sweep_rows", true),
    ("log_chars", true),
    ("retention", false),
    ("hide_panels_after", false),
];

/// Top-level switches that take a `SHEETQ_<KEY>` override of `true` or `false`.
const ENV_SWITCHES: &[&str] = &["protect"];

/// What is wrong with `schedules` against a spreadsheet's `catalog` (`at` names the
/// spreadsheet): each must run a function of `[[functions]]` on a target of `[[targets]]` (when
/// listed), be let through by the function's `allow`, and catch up only within `retention`.
fn schedule_problems(
    schedules: &[crate::schedule::ScheduleDef],
    catalog: &Catalog,
    retention: Option<Duration>,
    at: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for s in schedules {
        let name = &s.name;
        match catalog.function(&s.function) {
            None => problems.push(format!(
                "schedule {name:?}: function {:?} is not among the [[functions]]{at}: a schedule runs a configured function; add it there or fix the name",
                s.function
            )),
            Some(f) if !f.allows(&s.requester()) => problems.push(format!(
                "schedule {name:?}: function {:?} has allow, which does not let {:?} run it{at}: add \"{}\" to its allow",
                s.function,
                s.requester(),
                s.requester()
            )),
            Some(f) => {
                if let Err(why) = s.args_json_of(f) {
                    problems.push(format!("schedule {name:?}: {why}{at}"));
                }
            }
        }
        if catalog.refuse_target(&s.target).is_some() {
            problems.push(format!(
                "schedule {name:?}: target {:?} is not among the [[targets]]{at}: add it there or fix the name",
                s.target
            ));
        }
        if let (Some(catch_up), Some(retention)) = (s.catch_up, retention) {
            if catch_up >= retention {
                problems.push(format!(
                    "schedule {name:?}: catch_up ({}) must be shorter than retention ({}): an occurrence is looked up in the queue, and one older than retention may have moved to the archive",
                    humantime::format_duration(catch_up),
                    humantime::format_duration(retention)
                ));
            }
        }
    }
    problems
}

/// The environment variable that overrides `key`.
pub fn env_var_for(key: &str) -> String {
    format!("SHEETQ_{}", key.to_ascii_uppercase())
}

/// Where a config is looked for when neither `--config` nor `SHEETQ_CONFIG` names one, in
/// order: the current directory, then where a packaged install keeps it.
pub const CONFIG_PLACES: [&str; 2] = ["sheetq.toml", "/etc/sheetq/sheetq.toml"];

/// The config file to read: `named` (from `--config` or `SHEETQ_CONFIG`) when given, else
/// the first of [`CONFIG_PLACES`] that `exists`; an error naming every place tried.
pub fn find_config(
    named: Option<&Path>,
    exists: impl Fn(&Path) -> bool,
) -> Result<PathBuf, ConfigError> {
    if let Some(path) = named {
        return Ok(path.to_path_buf());
    }
    CONFIG_PLACES
        .iter()
        .map(Path::new)
        .find(|p| exists(p))
        .map(Path::to_path_buf)
        .ok_or_else(|| ConfigError {
            source_name: "the config".into(),
            problems: vec![format!(
                "no config file found (tried {}); create one from sheetq.example.toml there, or name it with --config FILE or SHEETQ_CONFIG",
                CONFIG_PLACES.join(", ")
            )],
        })
}

/// Where `position` (a byte offset into `text`) is, as 1-based line and column.
fn line_and_column(text: &str, position: usize) -> (usize, usize) {
    let before = &text[..position.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// `problems` of `[commands.NAME]` tables (each starting with `commands.NAME` or
/// `commands.NAME.KEY`, as the command registry words them) with where in `text` (the
/// config file) the table or key is: " (line L, column C)". Others stay as they are.
pub fn with_places(text: &str, problems: Vec<String>) -> Vec<String> {
    type Tables = BTreeMap<String, toml::Spanned<BTreeMap<String, toml::Spanned<toml::Value>>>>;
    #[derive(serde::Deserialize)]
    struct Doc {
        #[serde(default)]
        commands: Tables,
    }
    let Ok(doc) = toml::from_str::<Doc>(text) else {
        return problems;
    };
    let place = |span: std::ops::Range<usize>| {
        // The key's line and the column its line starts at: a value's span begins after `=`.
        let (line, _) = line_and_column(text, span.start);
        let start = text.lines().nth(line - 1).unwrap_or_default();
        let column = start.chars().take_while(|c| c.is_whitespace()).count() + 1;
        format!(" (line {line}, column {column})")
    };
    problems
        .into_iter()
        .map(|problem| {
            let found = doc.commands.iter().find_map(|(name, table)| {
                let at = format!("commands.{}", crate::commands::config_key_text(name));
                let rest = problem.strip_prefix(&at)?;
                let key = rest.strip_prefix('.').and_then(|r| {
                    let key = r.split([' ', '.', ':']).next()?;
                    table.get_ref().get(key.trim_matches('"'))
                });
                Some(match key {
                    Some(value) => place(value.span()),
                    None => place(table.span()),
                })
            });
            match found {
                Some(at) => format!("{problem}{at}"),
                None => problem,
            }
        })
        .collect()
}

impl Config {
    /// Reads and validates `path`, applying `SHEETQ_*` overrides from the process
    /// environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source_name: path.display().to_string(),
            problems: vec![format!(
                "cannot read it: {e}; create it from sheetq.example.toml or pass --config FILE"
            )],
        })?;
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let mut config = Self::parse(&text, &path.display().to_string(), &env)?;
        config.anchor_paths(&text, path, &env);
        Ok(config)
    }

    /// Relative `credentials` and `state_dir` written in the file at `path` are relative to
    /// the file's folder, wherever sheetq is started from (a value from a `SHEETQ_*` variable
    /// stays relative to the current directory, as a shell user expects).
    fn anchor_paths(&mut self, text: &str, path: &Path, env: &BTreeMap<String, String>) {
        let Some(base) = path.parent().filter(|b| !b.as_os_str().is_empty()) else {
            return;
        };
        let written: toml::Table = toml::from_str(text).unwrap_or_default();
        let in_file = |key: &str| written.contains_key(key) && !env.contains_key(&env_var_for(key));
        if in_file("credentials") {
            if let Some(c) = self.credentials.as_mut().filter(|c| c.is_relative()) {
                *c = base.join(&*c);
            }
        }
        if in_file("state_dir") && self.state_dir.is_relative() {
            self.state_dir = base.join(&self.state_dir);
        }
    }

    /// Parses `text` with the overrides found in `env`; `source_name` names it in errors.
    pub fn parse(
        text: &str,
        source_name: &str,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let fail = |problems: Vec<String>| ConfigError {
            source_name: source_name.to_string(),
            problems,
        };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| line_and_column(text, s.start));
            let place = at.map_or_else(String::new, |(l, c)| format!(" at line {l}, column {c}"));
            fail(vec![format!(
                "is not valid TOML{place}: {}",
                e.message().trim()
            )])
        })?;
        // Under systemd (`StateDirectory=`), the state goes where the service manager made
        // room for it, unless the file or SHEETQ_STATE_DIR says otherwise.
        if !table.contains_key("state_dir") {
            if let Some(dir) = env
                .get("STATE_DIRECTORY")
                .and_then(|d| d.split(':').next())
                .filter(|d| !d.is_empty())
            {
                table.insert("state_dir".into(), toml::Value::String(dir.to_string()));
            }
        }
        let mut problems = Vec::new();
        for (key, numeric) in ENV_KEYS {
            let var = env_var_for(key);
            if let Some(value) = env.get(&var) {
                let value = if *numeric {
                    match value.trim().parse::<i64>() {
                        Ok(n) => toml::Value::Integer(n),
                        Err(_) => {
                            problems.push(format!("{var}={value:?} must be a whole number"));
                            continue;
                        }
                    }
                } else {
                    toml::Value::String(value.clone())
                };
                table.insert((*key).to_string(), value);
            }
        }
        for key in ENV_SWITCHES {
            let var = env_var_for(key);
            if let Some(value) = env.get(&var) {
                match value.trim() {
                    "true" => table.insert((*key).to_string(), toml::Value::Boolean(true)),
                    "false" => table.insert((*key).to_string(), toml::Value::Boolean(false)),
                    _ => {
                        problems.push(format!("{var}={value:?} must be true or false"));
                        continue;
                    }
                };
            }
        }
        let raw: RawConfig =
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| {
                    // Read from the text alone, the same mistake comes with its line and column; if
                    // the text alone reads fine, a SHEETQ_* override is what broke it.
                    match toml::from_str::<RawConfig>(text) {
                        Err(in_file) => fail(vec![describe_file_error(text, &in_file)]),
                        Ok(_) => fail(vec![format!(
                            "a SHEETQ_* environment override: {}",
                            describe_serde_error(&e)
                        )]),
                    }
                })?;
        let config = Self::validate(raw, &mut problems);
        // A bad value that came from the environment is blamed on its variable.
        for p in &mut problems {
            for (key, _) in ENV_KEYS {
                let var = env_var_for(key);
                if env.contains_key(&var) && p.starts_with(&format!("{key} = ")) {
                    *p = format!("{var} (overriding {key}): {}", &p[key.len() + 3..]);
                }
            }
        }
        match config {
            Some(c) if problems.is_empty() => Ok(c),
            _ => Err(fail(problems)),
        }
    }

    /// The config `raw` describes, every setting checked; each problem found (with its fix)
    /// goes to `problems`, and a default stands in for the setting it concerns.
    fn validate(raw: RawConfig, problems: &mut Vec<String>) -> Option<Self> {
        const DAY: u64 = 24 * 3600;
        let retention = never_or(problems, "retention", raw.retention, 30 * DAY);
        // "0s" means never as "0" does, not "hide every panel at once".
        let hide_after = never_or(
            problems,
            "hide_panels_after",
            raw.hide_panels_after,
            14 * DAY,
        )
        .filter(|d| !d.is_zero());
        let mut duration = |key: &str, value: Option<String>, default_secs: u64| {
            duration(problems, key, value, Duration::from_secs(default_secs))
        };
        let poll_interval = duration("poll_interval", raw.poll_interval, 2);
        let idle_set = raw.idle_poll_interval.is_some();
        let idle_poll_interval = duration("idle_poll_interval", raw.idle_poll_interval, 30);
        let stale_after = duration("stale_after", raw.stale_after, 15 * 60);
        let dead_after = duration("dead_after", raw.dead_after, 2 * 60);
        let heartbeat_interval = duration("heartbeat_interval", raw.heartbeat_interval, 30);
        let lease_ttl = duration("lease_ttl", raw.lease_ttl, 30);
        let shutdown_grace = duration("shutdown_grace", raw.shutdown_grace, 30);
        let call_timeout = duration("call_timeout", raw.call_timeout, 30);
        let spreadsheet_id = if raw.spreadsheets.is_empty() {
            spreadsheet_id(problems, raw.spreadsheet_id)
        } else {
            if raw.spreadsheet_id.is_some() {
                problems.push("spreadsheet_id is set at the top and the config also lists [[spreadsheets]]: move it into a [[spreadsheets]] entry of its own".into());
            }
            String::new()
        };
        let api_base_url = api_base_url(problems, raw.api_base_url);
        let mut count = |key: &str, value: Option<i64>, default: u32, min: i64, max: i64| {
            count(problems, key, value, default, (min, max))
        };
        let slots = count("slots", raw.slots, 2, 1, 64) as usize;
        let requests_per_minute = count(
            "requests_per_minute",
            raw.requests_per_minute,
            50,
            1,
            10_000,
        );
        let max_retries = count("max_retries", raw.max_retries, 6, 0, 100);
        let sweep_rows = count("sweep_rows", raw.sweep_rows, 1000, 0, 100_000);
        let log_chars = count(
            "log_chars",
            raw.log_chars,
            crate::joblog::DEFAULT_CHARS,
            0,
            i64::from(crate::joblog::MAX_CHARS),
        );
        if raw.full_scan_every.is_some() {
            problems.push(
                "full_scan_every is no longer a setting: polls never read the whole queue now, they sweep the 状態 column above the unfinished window `sweep_rows` rows at a time; remove the line (or set sweep_rows, default 1000)".to_string(),
            );
        }
        let intake = intake(problems, raw.intake.as_deref());
        let worker_id_is_set = raw.worker_id.is_some();
        let worker_id = worker_id(problems, raw.worker_id);
        check_liveness(
            problems,
            poll_interval,
            stale_after,
            dead_after,
            heartbeat_interval,
        );
        let headers = raw.queue.headers.unwrap_or_default();
        let states = raw.queue.states.unwrap_or_default();
        check_queue(problems, &headers, &states);
        let mut panel = raw.panel.unwrap_or_default();
        problems.extend(panel.problems().into_iter().map(|p| format!("[panel] {p}")));
        let mut catalog = Catalog {
            functions: raw.functions,
            targets: raw.targets,
            hide_after,
            targets_from_index: raw.targets_from_index.unwrap_or(false),
            not_allowed: raw.messages.not_allowed.map(NotAllowed).unwrap_or_default(),
            bulk: None,
        };
        problems.extend(catalog.problems());
        let mut spreadsheets = spreadsheet_entries(problems, raw.spreadsheets, intake, &catalog);
        // One 承認 column per approver of the function with the most, on every panel of
        // every spreadsheet served (they share one layout).
        let approval_columns = std::iter::once(&catalog)
            .chain(spreadsheets.iter().map(|e| &e.catalog))
            .map(crate::panel::guard::approval_columns)
            .max()
            .unwrap_or(0);
        panel.approval_columns = approval_columns.max(1) as u32;
        panel.input_slots = std::iter::once(&catalog)
            .chain(spreadsheets.iter().map(|e| &e.catalog))
            .flat_map(|c| c.functions.iter().map(|f| f.inputs.len()))
            .max()
            .unwrap_or(0) as u32;
        problems.extend(
            panel
                .approval_problems()
                .into_iter()
                .map(|p| format!("[panel] {p}")),
        );
        let protect_editors = protect_editors(problems, raw.protect_editors);
        let notify = crate::notifications::parse_channels(raw.notify.as_ref(), |var| {
            std::env::var(var).ok()
        })
        .unwrap_or_else(|errors| {
            problems.extend(errors);
            Vec::new()
        });
        let schedules =
            crate::schedule::parse_schedules(raw.schedules.as_ref()).unwrap_or_else(|errors| {
                problems.extend(errors);
                Vec::new()
            });
        if spreadsheets.is_empty() {
            problems.extend(schedule_problems(&schedules, &catalog, retention, ""));
        }
        for e in &spreadsheets {
            let at = format!(" (in spreadsheet {})", e.label);
            problems.extend(schedule_problems(&schedules, &e.catalog, retention, &at));
        }
        if spreadsheets.is_empty() {
            problems.extend(crate::rollout::problems(&raw.rollouts, &catalog));
        }
        for e in &spreadsheets {
            problems.extend(
                crate::rollout::problems(&raw.rollouts, &e.catalog)
                    .into_iter()
                    .map(|p| format!("{p} (in spreadsheet {})", e.label)),
            );
        }
        // The 一括 panel of each spreadsheet: its rollouts as functions.
        catalog.bulk = crate::rollout::bulk_catalog(&raw.rollouts, &catalog).map(Box::new);
        for e in &mut spreadsheets {
            e.catalog.bulk = crate::rollout::bulk_catalog(&raw.rollouts, &e.catalog).map(Box::new);
        }
        let idle_poll_interval = idle_poll_interval_of(
            problems,
            idle_set.then_some(idle_poll_interval),
            poll_interval,
            heartbeat_interval,
            !spreadsheets.is_empty(),
        );
        Some(Self {
            spreadsheet_id,
            // An empty value (`SHEETQ_CREDENTIALS=`) means unset, as it does for Google's
            // own GOOGLE_APPLICATION_CREDENTIALS.
            credentials: raw.credentials.filter(|p| !p.as_os_str().is_empty()),
            api_base_url,
            worker_id,
            worker_id_is_set,
            slots,
            poll_interval,
            idle_poll_interval,
            stale_after,
            dead_after,
            heartbeat_interval,
            lease_ttl,
            shutdown_grace,
            intake,
            state_dir: raw
                .state_dir
                .unwrap_or_else(|| PathBuf::from("sheetq-state")),
            shared_quota_dir: None,
            requests_per_minute,
            call_timeout,
            max_retries,
            sweep_rows,
            log_chars,
            retention,
            headers,
            states,
            panel,
            commands: raw.commands,
            catalog,
            spreadsheets,
            label: String::new(),
            protect: raw.protect.unwrap_or(true),
            protect_editors,
            notify,
            schedules,
            rollouts: raw.rollouts,
        })
    }

    /// The config of each spreadsheet this config serves: itself for a single
    /// `spreadsheet_id`; for `[[spreadsheets]]`, the top level with each entry's id, label,
    /// credentials, intake and catalog, and its own outbox under `state_dir/<spreadsheet_id>`.
    pub fn each_spreadsheet(&self) -> Vec<Config> {
        if self.spreadsheets.is_empty() {
            return vec![self.clone()];
        }
        self.spreadsheets
            .iter()
            .map(|e| Config {
                spreadsheet_id: e.spreadsheet_id.clone(),
                label: e.label.clone(),
                credentials: e.credentials.clone().or_else(|| self.credentials.clone()),
                intake: e.intake,
                catalog: e.catalog.clone(),
                state_dir: self.state_dir.join(&e.spreadsheet_id),
                shared_quota_dir: Some(self.quota_dir()),
                spreadsheets: Vec::new(),
                ..self.clone()
            })
            .collect()
    }

    /// Where every sheetq process run with this config (the daemon and the one-shot
    /// commands) records the requests it sends as each service account, so that together they
    /// stay within Google's quota (`sheets::ledger`): `state_dir/quota`, the top level's for
    /// each spreadsheet of `[[spreadsheets]]`.
    pub fn quota_dir(&self) -> PathBuf {
        (self.shared_quota_dir.clone()).unwrap_or_else(|| self.state_dir.join("quota"))
    }

    /// The spreadsheet `which` names (its label or its id) among those this config serves;
    /// an error listing them when none matches.
    pub fn spreadsheet(&self, which: &str) -> Result<Config, String> {
        let all = self.each_spreadsheet();
        let which = which.trim();
        if let Some(c) = all
            .iter()
            .find(|c| c.spreadsheet_id == which || (!c.label.is_empty() && c.label == which))
        {
            return Ok(c.clone());
        }
        let known: Vec<String> = all
            .iter()
            .map(|c| match c.label.as_str() {
                "" => c.spreadsheet_id.clone(),
                l if l == c.spreadsheet_id => l.to_string(),
                l => format!("{l} ({})", c.spreadsheet_id),
            })
            .collect();
        Err(format!(
            "--spreadsheet {which:?} names none of the config's spreadsheets: {}",
            known.join(", ")
        ))
    }
}

/// `idle_poll_interval`: as `set` (at least `poll_interval`, at most `heartbeat_interval`,
/// as a heartbeat goes out with a poll), else `poll_interval` for one spreadsheet (polls
/// never space out) and 30 s within those bounds for a list of spreadsheets.
fn idle_poll_interval_of(
    problems: &mut Vec<String>,
    set: Option<Duration>,
    poll_interval: Duration,
    heartbeat_interval: Duration,
    listed: bool,
) -> Duration {
    let shown = humantime::format_duration;
    match set {
        Some(idle) => {
            if idle < poll_interval {
                problems.push(format!(
                    "idle_poll_interval ({}) must be at least poll_interval ({})",
                    shown(idle),
                    shown(poll_interval)
                ));
            }
            if idle > heartbeat_interval {
                problems.push(format!(
                    "idle_poll_interval ({}) must be at most heartbeat_interval ({}): a heartbeat goes out with a poll",
                    shown(idle),
                    shown(heartbeat_interval)
                ));
            }
            idle
        }
        None if listed => Duration::from_secs(30)
            .min(heartbeat_interval)
            .max(poll_interval),
        None => poll_interval,
    }
}

/// The `[[spreadsheets]]` entries, checked: each needs its id; labels and ids are unique;
/// an entry's intake and catalog default to the top level's.
fn spreadsheet_entries(
    problems: &mut Vec<String>,
    raw: Vec<RawSpreadsheet>,
    top_intake: Intake,
    top_catalog: &Catalog,
) -> Vec<SpreadsheetEntry> {
    let mut out: Vec<SpreadsheetEntry> = Vec::new();
    for (i, e) in raw.into_iter().enumerate() {
        let at = format!("[[spreadsheets]] entry {}", i + 1);
        let id = e
            .spreadsheet_id
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        if id.is_empty() {
            problems.push(format!("{at} has no spreadsheet_id: copy it from the sheet's URL (https://docs.google.com/spreadsheets/d/<spreadsheet_id>/edit)"));
            continue;
        }
        let label = e
            .label
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| id.clone());
        if let Some(other) = out.iter().find(|o| o.spreadsheet_id == id) {
            problems.push(format!(
                "{at} lists spreadsheet {id} again (as {:?} already): list each spreadsheet once",
                other.label
            ));
            continue;
        }
        if out.iter().any(|o| o.label == label) {
            problems.push(format!(
                "{at}: label {label:?} is used twice: give each spreadsheet its own"
            ));
            continue;
        }
        let intake = match e.intake {
            Some(v) => intake(problems, Some(&v)),
            None => top_intake,
        };
        let catalog = match (e.functions, e.targets) {
            (None, None) => None,
            (functions, targets) => Some(Catalog {
                functions: functions.unwrap_or_default(),
                targets: targets.unwrap_or_default(),
                ..top_catalog.clone()
            }),
        };
        if let Some(c) = &catalog {
            problems.extend(
                c.problems()
                    .into_iter()
                    .map(|p| format!("[[spreadsheets]] {label:?}: {p}")),
            );
        }
        out.push(SpreadsheetEntry {
            label,
            spreadsheet_id: id,
            credentials: e.credentials.filter(|p| !p.as_os_str().is_empty()),
            intake,
            catalog: catalog.unwrap_or_else(|| top_catalog.clone()),
        });
    }
    out
}

/// The duration setting `key` (`value` as written; `default` when unset or wrong).
fn duration(
    problems: &mut Vec<String>,
    key: &str,
    value: Option<String>,
    default: Duration,
) -> Duration {
    let Some(text) = value else {
        return default;
    };
    match humantime::parse_duration(text.trim()) {
        Ok(d) if !d.is_zero() => d,
        Ok(_) => {
            problems.push(format!("{key} = {text:?} must be longer than zero"));
            default
        }
        Err(e) => {
            problems.push(format!(
                "{key} = {text:?} is not a duration ({e}); write it like \"500ms\", \"2s\" or \"15m\""
            ));
            default
        }
    }
}

/// A duration setting where "0" means never (`None`); `default_secs` when unset.
fn never_or(
    problems: &mut Vec<String>,
    key: &str,
    value: Option<String>,
    default_secs: u64,
) -> Option<Duration> {
    match value.as_deref().map(str::trim) {
        Some("0") => None,
        _ => Some(duration(
            problems,
            key,
            value,
            Duration::from_secs(default_secs),
        )),
    }
}

/// The whole-number setting `key`, within `range` (both ends included).
fn count(
    problems: &mut Vec<String>,
    key: &str,
    value: Option<i64>,
    default: u32,
    (min, max): (i64, i64),
) -> u32 {
    match value {
        None => default,
        Some(n) if (min..=max).contains(&n) => n as u32,
        Some(n) => {
            problems.push(format!("{key} = {n} must be between {min} and {max}"));
            default
        }
    }
}

fn spreadsheet_id(problems: &mut Vec<String>, value: Option<String>) -> String {
    match value.map(|s| s.trim().to_string()) {
        Some(id) if !id.is_empty() => id,
        _ => {
            problems.push(
                "spreadsheet_id is required: copy it from the sheet's URL (https://docs.google.com/spreadsheets/d/<spreadsheet_id>/edit)"
                    .into(),
            );
            String::new()
        }
    }
}

/// The API's base URL, ending in `/`.
fn api_base_url(problems: &mut Vec<String>, value: Option<String>) -> String {
    let mut url = value.unwrap_or_else(|| GOOGLE_API_BASE_URL.to_string());
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        problems.push(format!(
            "api_base_url = {url:?} must start with https:// (or http:// for a local emulator)"
        ));
    }
    if !url.ends_with('/') {
        url.push('/');
    }
    url
}

fn intake(problems: &mut Vec<String>, value: Option<&str>) -> Intake {
    match value.map(str::trim) {
        None | Some("none") => Intake::None,
        Some("poll") => Intake::Poll,
        Some(other) => {
            problems.push(format!(
                "intake = {other:?} must be \"none\" (an Apps Script intake appends queue rows) or \"poll\" (sheetq turns ticked boxes into rows)"
            ));
            Intake::None
        }
    }
}

/// `protect_editors`: e-mail addresses (of service accounts), trimmed and lower-cased as
/// Google lists a protected range's editors.
fn protect_editors(problems: &mut Vec<String>, raw: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for written in raw {
        let address = written.trim().to_lowercase();
        let looks_right = address.split_once('@').is_some_and(|(user, domain)| {
            !user.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
        }) && !address.contains(char::is_whitespace);
        if !looks_right {
            problems.push(format!(
                "protect_editors entry {written:?} is not an e-mail address; list the service accounts of the other daemons that serve this spreadsheet, as in \"sheetq@project.iam.gserviceaccount.com\""
            ));
        } else if !out.contains(&address) {
            out.push(address);
        }
    }
    out
}

/// The worker id as set (it is written into the ワーカー and lease cells), or this machine's.
fn worker_id(problems: &mut Vec<String>, value: Option<String>) -> String {
    match value.map(|w| w.trim().to_string()) {
        Some(w) if w.is_empty() || w.contains(['/', '#', '|', ' ']) => {
            problems.push(format!(
                "worker_id = {w:?} must be non-empty and free of '/', '#', '|' and spaces (it is written into the ワーカー and lease cells)"
            ));
            w
        }
        Some(w) => w,
        None => default_worker_id(),
    }
}

/// The timing settings that only make sense together.
fn check_liveness(
    problems: &mut Vec<String>,
    poll_interval: Duration,
    stale_after: Duration,
    dead_after: Duration,
    heartbeat_interval: Duration,
) {
    if stale_after <= poll_interval {
        problems.push(format!(
            "stale_after ({}) must be longer than poll_interval ({})",
            humantime::format_duration(stale_after),
            humantime::format_duration(poll_interval)
        ));
    }
    if dead_after <= heartbeat_interval.saturating_mul(2) {
        problems.push(format!(
            "dead_after ({}) must be more than twice heartbeat_interval ({}), or live daemons would be declared dead",
            humantime::format_duration(dead_after),
            humantime::format_duration(heartbeat_interval)
        ));
    }
}

/// `[queue.headers]` and `[queue.states]`: every name and word non-empty and its own.
fn check_queue(problems: &mut Vec<String>, headers: &HeaderNames, states: &StateWords) {
    let names = headers.header_row();
    for (i, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            problems.push(format!("[queue.headers] entry {} is empty", i + 1));
        } else if names[..i].contains(name) {
            problems.push(format!(
                "[queue.headers] uses \"{name}\" twice; every column needs its own name"
            ));
        }
    }
    let words = crate::queue::State::ALL.map(|s| states.word(s));
    for (i, w) in words.iter().enumerate() {
        if w.trim().is_empty() || words[..i].contains(w) {
            problems.push(format!(
                "[queue.states] \"{w}\" must be non-empty and different from the other state words"
            ));
        }
    }
}

/// This machine's host name (empty when it cannot be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// Host name plus pid: unique per running daemon, readable in the ワーカー column.
pub fn default_worker_id() -> String {
    let host = Some(host_name())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sheetq".to_string());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{host}-{}", std::process::id())
}

/// Serde's message, with the key it is about when it names one.
/// Keys whose value is a duration written as a string.
const DURATION_KEYS: [&str; 9] = [
    "poll_interval",
    "stale_after",
    "dead_after",
    "heartbeat_interval",
    "lease_ttl",
    "shutdown_grace",
    "call_timeout",
    "retention",
    "hide_panels_after",
];

/// A mistake in the file's text: where it is (line, column, the `[table]` it is in), which
/// key, what is wrong, and the line itself.
fn describe_file_error(text: &str, e: &toml::de::Error) -> String {
    let what = describe_serde_error(e);
    let Some(span) = e.span().filter(|s| s.start <= text.len()) else {
        return what;
    };
    let before = &text[..span.start];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_no = before.matches('\n').count() + 1;
    let column = text[line_start..span.start].chars().count() + 1;
    let line = text[line_start..].lines().next().unwrap_or("").trim_end();
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['));
    let mut out = format!("line {line_no}, column {column}");
    if let Some(t) = table {
        out.push_str(&format!(", in {t}"));
    }
    match key {
        Some(k) => out.push_str(&format!(", {k}: {what}")),
        None => out.push_str(&format!(": {what}")),
    }
    if key.is_some_and(|k| DURATION_KEYS.contains(&k)) && what.contains("expected a string") {
        out.push_str("; a duration is written as a string, like \"2s\", \"500ms\" or \"15m\"");
    }
    out.push_str(&format!("\n      {line}"));
    out
}

fn describe_serde_error(e: &toml::de::Error) -> String {
    let message = e.message().trim().to_string();
    if let Some(rest) = message.strip_prefix("unknown field ") {
        return format!("unknown setting {rest}; check the spelling against sheetq.example.toml");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "sheetq.toml", &BTreeMap::new())
    }

    #[test]
    fn a_bad_rollout_is_refused_when_the_config_is_read_naming_its_entry() {
        let text = |group: &str| {
            format!(
                r#"
spreadsheet_id = "1AbC"
[commands.restart]
builtin = "echo"
[[targets]]
label = "web-1"
groups = ["web"]
[[functions]]
label = "再起動"
command = "restart"
[[rollouts]]
name = "restart-web"
function = "再起動"
group = "{group}"
max_parallel = "50%"
"#
            )
        };
        let config = parse(&text("web")).unwrap_or_else(|e| panic!("{:#?}", e.problems));
        assert_eq!(config.rollouts[0].targets_in(&config.catalog), ["web-1"]);
        let refused = parse(&text("cache")).err().map(|e| e.problems);
        assert!(
            refused
                .as_ref()
                .is_some_and(|p| p.iter().any(|p| p.contains(
                    "[[rollouts]] entry 1 (\"restart-web\"): no target carries group \"cache\""
                ))),
            "the entry and the fix are named: {refused:#?}"
        );
    }

    #[test]
    fn a_schedules_inputs_are_checked_by_the_functions_rules_when_the_config_is_read() {
        let text = |inputs: &str| {
            format!(
                r#"
spreadsheet_id = "1AbC"
[commands.deploy]
builtin = "echo"
[[functions]]
label = "デプロイ"
command = "deploy"
args = {{ mode = "rolling" }}
inputs = [
  {{ name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], required = true }},
  {{ name = "dry_run", type = "bool", default = true }},
]
[[schedules]]
name = "nightly"
cron = "@daily"
target = "サーバーA"
function = "デプロイ"
{inputs}
"#
            )
        };
        let config = parse(&text("inputs = { version = \"1.2.4\" }"))
            .unwrap_or_else(|e| panic!("{:#?}", e.problems));
        let (s, f) = (&config.schedules[0], &config.catalog.functions[0]);
        assert_eq!(
            s.args_json_of(f)
                .map(|j| serde_json::from_str::<serde_json::Value>(&j).ok()),
            Ok(Some(
                serde_json::json!({ "mode": "rolling", "version": "1.2.4", "dry_run": true })
            ))
        );
        for (inputs, want) in [
            ("inputs = { version = \"9\" }", "schedule \"nightly\": inputs: version = \"9\" is not among its choices"),
            ("", "schedule \"nightly\": inputs: input version is required"),
            ("inputs = { version = \"1.2.3\", colour = \"red\" }", "schedule \"nightly\": inputs.colour: function \"デプロイ\" has the inputs version, dry_run"),
        ] {
            let e = parse(&text(inputs)).unwrap_err();
            assert!(
                e.problems.iter().any(|p| p.starts_with(want)),
                "no problem starting {want:?} among {:#?}",
                e.problems
            );
        }
    }

    #[test]
    fn a_schedule_must_run_a_configured_function_its_allow_lets_through_within_retention() {
        let e = parse(
            r#"
spreadsheet_id = "1AbC"
retention = "1h"
[commands.backup]
builtin = "echo"
[[functions]]
label = "バックアップ"
command = "backup"
allow = ["lead@example.com"]
[[targets]]
label = "サーバーA"
[[schedules]]
name = "nightly"
cron = "@daily"
target = "サーバーZ"
function = "バックアップ"
catch_up = "2h"
[[schedules]]
name = "weekly"
cron = "0 3 * * 1"
target = "サーバーA"
function = "集計"
"#,
        )
        .unwrap_err();
        let expected = [
            "schedule \"nightly\": function \"バックアップ\" has allow, which does not let \"schedule:nightly\" run it: add \"schedule:nightly\" to its allow",
            "schedule \"nightly\": target \"サーバーZ\" is not among the [[targets]]",
            "schedule \"nightly\": catch_up (2h) must be shorter than retention (1h)",
            "schedule \"weekly\": function \"集計\" is not among the [[functions]]",
        ];
        for want in expected {
            assert!(
                e.problems.iter().any(|p| p.starts_with(want)),
                "no problem starting {want:?} among {:#?}",
                e.problems
            );
        }
        assert_eq!(e.problems.len(), expected.len(), "{:#?}", e.problems);
    }

    #[test]
    fn the_keys_of_the_design_are_accepted_as_written() {
        let c = parse(
            r#"
spreadsheet_id = "1AbC"
credentials    = "/etc/sheetq/key.json"
api_base_url   = "http://127.0.0.1:8787/"
worker_id      = "vm-1"
slots          = 2
poll_interval  = "2s"
stale_after    = "15m"
intake         = "none"

[commands.sleep]
builtin = "sleep"

[commands.report]
exec    = ["/opt/tools/report", "--target", "{target}"]
timeout = "10m"
heavy   = true
"#,
        )
        .expect("the example of docs/design.md §9 is valid");
        assert_eq!(c.spreadsheet_id, "1AbC");
        assert_eq!(
            c.credentials.as_deref(),
            Some(Path::new("/etc/sheetq/key.json"))
        );
        assert_eq!(c.api_base_url, "http://127.0.0.1:8787/");
        assert_eq!(c.worker_id, "vm-1");
        assert_eq!(c.slots, 2);
        assert_eq!(c.poll_interval, Duration::from_secs(2));
        assert_eq!(c.stale_after, Duration::from_secs(900));
        assert_eq!(c.intake, Intake::None);
        assert!(c.commands.contains_key("sleep") && c.commands.contains_key("report"));
    }

    const FLEET: &str = r#"
credentials = "/etc/sheetq/ops.json"
state_dir   = "/var/lib/sheetq"
intake      = "poll"

[[functions]]
label   = "再起動"
command = "sleep"

[[spreadsheets]]
label          = "実行パネル"
spreadsheet_id = "1Run"

[[spreadsheets]]
spreadsheet_id = "1Approve"
credentials    = "/etc/sheetq/approvals.json"
intake         = "none"

[[spreadsheets.functions]]
label   = "承認"
command = "echo"
"#;

    #[test]
    fn each_listed_spreadsheet_takes_the_top_level_for_what_it_does_not_set() {
        let c = parse(FLEET).unwrap_or_else(|e| panic!("{e}"));
        let each = c.each_spreadsheet();
        assert_eq!(each.len(), 2);
        let (run, approve) = (&each[0], &each[1]);
        assert_eq!(run.label, "実行パネル");
        assert_eq!(run.spreadsheet_id, "1Run");
        assert_eq!(
            run.credentials.as_deref(),
            Some(Path::new("/etc/sheetq/ops.json"))
        );
        assert_eq!(run.intake, Intake::Poll);
        assert_eq!(run.catalog.functions[0].label, "再起動");
        assert_eq!(
            run.state_dir,
            Path::new("/var/lib/sheetq/1Run"),
            "an outbox each"
        );
        assert_eq!(approve.label, "1Approve", "no label: its id names it");
        assert_eq!(
            approve.credentials.as_deref(),
            Some(Path::new("/etc/sheetq/approvals.json"))
        );
        assert_eq!(approve.intake, Intake::None);
        assert_eq!(approve.catalog.functions.len(), 1);
        assert_eq!(approve.catalog.functions[0].label, "承認");
        assert!(each.iter().all(|c| c.spreadsheets.is_empty()));
        assert_eq!(
            c.spreadsheet("1Approve").map(|c| c.label),
            Ok("1Approve".into())
        );
        assert_eq!(
            c.spreadsheet("実行パネル").map(|c| c.spreadsheet_id),
            Ok("1Run".into())
        );
        let unknown = c.spreadsheet("nope").err().unwrap_or_default();
        assert!(
            unknown.contains("実行パネル (1Run)") && unknown.contains("1Approve"),
            "{unknown}"
        );
    }

    #[test]
    fn idle_poll_interval_must_lie_between_poll_interval_and_heartbeat_interval() {
        let problems = |text: &str| parse(text).err().map(|e| e.problems).unwrap_or_default();
        let short = problems("spreadsheet_id = \"1A\"\nidle_poll_interval = \"1s\"\n");
        assert!(
            short.iter().any(|p| p.contains("at least poll_interval")),
            "{short:?}"
        );
        let long = problems("spreadsheet_id = \"1A\"\nidle_poll_interval = \"5m\"\n");
        assert!(
            long.iter()
                .any(|p| p.contains("at most heartbeat_interval")),
            "{long:?}"
        );
        let c = parse("spreadsheet_id = \"1A\"\nidle_poll_interval = \"20s\"\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.idle_poll_interval, Duration::from_secs(20));
    }

    #[test]
    fn a_config_of_one_spreadsheet_is_its_own_only_spreadsheet() {
        let c = parse("spreadsheet_id = \"1AbC\"\n").unwrap_or_else(|e| panic!("{e}"));
        let each = c.each_spreadsheet();
        assert_eq!(each.len(), 1);
        assert_eq!(each[0].spreadsheet_id, "1AbC");
        assert_eq!(
            each[0].state_dir, c.state_dir,
            "the outbox stays where it was"
        );
        assert_eq!(each[0].label, "");
        assert!(c.spreadsheet("1AbC").is_ok());
    }

    #[test]
    fn a_spreadsheet_list_that_cannot_be_served_names_each_problem() {
        let problems = |text: &str| parse(text).err().map(|e| e.problems).unwrap_or_default();
        let both = problems("spreadsheet_id = \"1A\"\n[[spreadsheets]]\nspreadsheet_id = \"1B\"\n");
        assert!(
            both.iter()
                .any(|p| p.contains("move it into a [[spreadsheets]] entry")),
            "{both:?}"
        );
        let missing = problems("[[spreadsheets]]\nlabel = \"a\"\n");
        assert!(
            missing
                .iter()
                .any(|p| p.contains("entry 1 has no spreadsheet_id")),
            "{missing:?}"
        );
        let twice = problems("[[spreadsheets]]\nspreadsheet_id = \"1A\"\n[[spreadsheets]]\nspreadsheet_id = \"1A\"\n");
        assert!(
            twice
                .iter()
                .any(|p| p.contains("lists spreadsheet 1A again")),
            "{twice:?}"
        );
        let label = problems("[[spreadsheets]]\nspreadsheet_id = \"1A\"\nlabel = \"x\"\n[[spreadsheets]]\nspreadsheet_id = \"1B\"\nlabel = \"x\"\n");
        assert!(
            label
                .iter()
                .any(|p| p.contains("label \"x\" is used twice")),
            "{label:?}"
        );
        let typo = problems("[[spreadsheets]]\nspreadsheet_id = \"1A\"\nslots = 3\n");
        assert!(
            typo.iter().any(|p| p.contains("slots")),
            "a process-wide key in an entry is refused: {typo:?}"
        );
        let intake = problems("[[spreadsheets]]\nspreadsheet_id = \"1A\"\nintake = \"push\"\n");
        assert!(
            intake.iter().any(|p| p.contains("intake = \"push\"")),
            "{intake:?}"
        );
    }

    #[test]
    fn defaults_fill_what_is_missing() {
        let c = parse("spreadsheet_id = \"x\"\napi_base_url = \"http://127.0.0.1:1\"").unwrap();
        assert_eq!(
            c.api_base_url, "http://127.0.0.1:1/",
            "a trailing / is added"
        );
        assert_eq!(c.slots, 2);
        assert_eq!(c.stale_after, Duration::from_secs(900));
        assert_eq!(c.headers, HeaderNames::default());
        assert!(!c.worker_id.is_empty());
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let err = parse(
            r#"
slots = 0
poll_interval = "soon"
intake = "push"
worker_id = "vm 1"
"#,
        )
        .unwrap_err();
        let text = err.to_string();
        for expected in [
            "spreadsheet_id is required",
            "slots = 0",
            "poll_interval = \"soon\"",
            "intake = \"push\"",
            "worker_id = \"vm 1\"",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
        assert_eq!(err.problems.len(), 5, "{text}");
    }

    #[test]
    fn a_mistake_in_the_file_names_its_line_key_and_table() {
        let err = parse("spreadsheet_id = \"x\"\npoll_interval = 2\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("line 2, column 17, poll_interval:") && text.contains("\"2s\""),
            "{text}"
        );
        let err = parse("spreadsheet_id = \"x\"\n[queue.headers]\njob = \"x\"\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("line 3")
                && text.contains("in [queue.headers]")
                && text.contains("`job`"),
            "{text}"
        );
    }

    #[test]
    fn a_bad_value_from_the_environment_is_blamed_on_its_variable() {
        let mut env = BTreeMap::new();
        env.insert("SHEETQ_POLL_INTERVAL".to_string(), "2".to_string());
        let err = Config::parse("spreadsheet_id = \"x\"", "sheetq.toml", &env).unwrap_err();
        assert!(
            err.to_string()
                .contains("SHEETQ_POLL_INTERVAL (overriding poll_interval): \"2\""),
            "{err}"
        );
    }

    #[test]
    fn a_misspelt_key_is_named() {
        let err = parse("spreadsheet_id = \"x\"\nstale_afer = \"15m\"").unwrap_err();
        assert!(err.to_string().contains("stale_afer"), "{err}");
    }

    #[test]
    fn a_config_from_before_the_sweep_is_told_what_replaced_full_scan_every() {
        let err = parse("spreadsheet_id = \"x\"\nfull_scan_every = 30").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("full_scan_every") && text.contains("sweep_rows"),
            "the error names the old key and its replacement: {text}"
        );
        let c = parse("spreadsheet_id = \"x\"\nsweep_rows = 0").unwrap();
        assert_eq!(c.sweep_rows, 0, "0 turns the sweep off");
    }

    #[test]
    fn retention_is_thirty_days_unless_set_and_zero_keeps_every_job() {
        let c = parse("spreadsheet_id = \"x\"").unwrap();
        assert_eq!(c.retention, Some(Duration::from_secs(30 * 24 * 3600)));
        let c = parse("spreadsheet_id = \"x\"\nretention = \"7d\"").unwrap();
        assert_eq!(c.retention, Some(Duration::from_secs(7 * 24 * 3600)));
        let c = parse("spreadsheet_id = \"x\"\nretention = \"0\"").unwrap();
        assert_eq!(c.retention, None, "\"0\" keeps finished jobs in the queue");
        let err = parse("spreadsheet_id = \"x\"\nretention = \"a month\"").unwrap_err();
        assert!(err.to_string().contains("retention"), "{err}");
    }

    #[test]
    fn relative_paths_in_the_file_are_relative_to_its_folder() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("sheetq.toml");
        let text = "spreadsheet_id = \"x\"\ncredentials = \"key.json\"\nstate_dir = \"state\"\n";
        let mut c = parse(text).unwrap();
        c.anchor_paths(text, &path, &BTreeMap::new());
        assert_eq!(c.credentials, Some(dir.path().join("key.json")));
        assert_eq!(c.state_dir, dir.path().join("state"));

        // Absolute paths, unset ones and values from the environment are left as they are.
        let text = "spreadsheet_id = \"x\"\ncredentials = \"/etc/sheetq/key.json\"\n";
        let mut env = BTreeMap::new();
        env.insert("SHEETQ_STATE_DIR".to_string(), "here".to_string());
        let mut c = Config::parse(text, "t", &env).unwrap();
        c.anchor_paths(text, &path, &env);
        assert_eq!(c.credentials, Some(PathBuf::from("/etc/sheetq/key.json")));
        assert_eq!(c.state_dir, PathBuf::from("here"));
        let mut c = parse("spreadsheet_id = \"x\"").unwrap();
        c.anchor_paths("spreadsheet_id = \"x\"", &path, &BTreeMap::new());
        assert_eq!(
            c.state_dir,
            PathBuf::from("sheetq-state"),
            "the default stays as it was"
        );
    }

    #[test]
    fn a_toml_syntax_error_names_its_line_and_column() {
        let text = "spreadsheet_id = \"x\"\nslots = 2\nworker_id = \"vm-1\nposition = 3\n";
        let err = Config::parse(text, "bad1.toml", &BTreeMap::new()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("bad1.toml"), "{text}");
        assert!(text.contains("at line 3, column"), "{text}");
    }

    #[test]
    fn the_config_is_found_where_it_was_named_else_here_else_in_etc() {
        let named = find_config(Some(Path::new("/srv/a.toml")), |_| false);
        assert_eq!(named.ok(), Some(PathBuf::from("/srv/a.toml")));
        let here = find_config(None, |p| p == Path::new("sheetq.toml"));
        assert_eq!(here.ok(), Some(PathBuf::from("sheetq.toml")));
        let etc = find_config(None, |p| p.starts_with("/etc"));
        assert_eq!(etc.ok(), Some(PathBuf::from("/etc/sheetq/sheetq.toml")));
        let none = find_config(None, |_| false).unwrap_err().to_string();
        assert!(
            none.contains("sheetq.toml, /etc/sheetq/sheetq.toml") && none.contains("--config"),
            "{none}"
        );
    }

    #[test]
    fn state_dir_defaults_to_the_state_directory_systemd_made() {
        let mut env = BTreeMap::new();
        env.insert(
            "STATE_DIRECTORY".to_string(),
            "/var/lib/sheetq:/var/lib/other".to_string(),
        );
        let c = Config::parse("spreadsheet_id = \"x\"", "t", &env).unwrap();
        assert_eq!(c.state_dir, PathBuf::from("/var/lib/sheetq"));
        let c = Config::parse("spreadsheet_id = \"x\"\nstate_dir = \"s\"", "t", &env).unwrap();
        assert_eq!(c.state_dir, PathBuf::from("s"), "a state_dir written wins");
    }

    #[test]
    fn an_empty_credentials_value_means_unset() {
        let mut env = BTreeMap::new();
        env.insert("SHEETQ_CREDENTIALS".to_string(), String::new());
        let c = Config::parse("spreadsheet_id = \"x\"", "t", &env).unwrap();
        assert_eq!(c.credentials, None, "SHEETQ_CREDENTIALS= is no path");
        let c = parse("spreadsheet_id = \"x\"\ncredentials = \"\"").unwrap();
        assert_eq!(c.credentials, None);
    }

    #[test]
    fn environment_overrides_win_and_are_validated() {
        let mut env = BTreeMap::new();
        env.insert("SHEETQ_SLOTS".to_string(), "4".to_string());
        env.insert("SHEETQ_SPREADSHEET_ID".to_string(), "from-env".to_string());
        let c = Config::parse("spreadsheet_id = \"file\"\nslots = 1", "t", &env).unwrap();
        assert_eq!((c.slots, c.spreadsheet_id.as_str()), (4, "from-env"));
        env.insert("SHEETQ_SLOTS".to_string(), "many".to_string());
        let err = Config::parse("spreadsheet_id = \"file\"", "t", &env).unwrap_err();
        assert!(err.to_string().contains("SHEETQ_SLOTS=\"many\""), "{err}");
    }

    #[test]
    fn protection_is_on_unless_switched_off_and_its_editors_are_addresses() {
        let c = parse("spreadsheet_id = \"x\"").unwrap();
        assert!(c.protect, "protection must be the default");
        assert!(c.protect_editors.is_empty());
        let c = parse(
            "spreadsheet_id = \"x\"\nprotect = false\nprotect_editors = [\" Other@P.iam.gserviceaccount.com \", \"other@p.iam.gserviceaccount.com\"]",
        )
        .unwrap();
        assert!(!c.protect, "protect = false is the opt-out");
        assert_eq!(
            c.protect_editors,
            vec!["other@p.iam.gserviceaccount.com".to_string()],
            "addresses are trimmed, lower-cased as Google lists them, and listed once"
        );
        let err =
            parse("spreadsheet_id = \"x\"\nprotect_editors = [\"ops team\", \"a@b\"]").unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
        assert!(
            err.problems[0].contains("\"ops team\" is not an e-mail address")
                && err.problems[0].contains("service accounts"),
            "{err}"
        );
    }

    #[test]
    fn protect_takes_an_environment_override_of_true_or_false() {
        let mut env = BTreeMap::new();
        env.insert("SHEETQ_PROTECT".to_string(), "false".to_string());
        let c = Config::parse("spreadsheet_id = \"x\"\nprotect = true", "t", &env).unwrap();
        assert!(!c.protect, "SHEETQ_PROTECT=false must win over the file");
        env.insert("SHEETQ_PROTECT".to_string(), "no".to_string());
        let err = Config::parse("spreadsheet_id = \"x\"", "t", &env).unwrap_err();
        assert!(
            err.to_string()
                .contains("SHEETQ_PROTECT=\"no\" must be true or false"),
            "{err}"
        );
    }

    #[test]
    fn header_names_and_state_words_can_be_translated() {
        let c = parse(
            r#"
spreadsheet_id = "x"
[queue.headers]
state = "Status"
[queue.states]
waiting = "queued"
running = "running"
"#,
        )
        .unwrap();
        assert_eq!(c.headers.state, "Status");
        assert_eq!(
            c.headers.job_id, "jobId",
            "untouched names keep their default"
        );
        assert_eq!(c.states.waiting, "queued");
        assert_eq!(c.states.done, "完了");
        assert_eq!(c.states.cancelled, "キャンセル");
    }

    #[test]
    fn a_cancelled_word_that_another_state_uses_is_refused() {
        let err = parse(
            r#"
spreadsheet_id = "x"
[queue.states]
cancelled = "完了"
"#,
        )
        .map(drop)
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("[queue.states] \"完了\" must be non-empty and different"),
            "{err}"
        );
    }
}
