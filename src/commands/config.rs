//! The `[commands.NAME]` tables of `sheetq.toml`, parsed into validated [`CommandDef`]s.
//!
//! Validation reports every problem at once (an operator fixes the file in one go), each
//! naming the command, the key and the fix. Unknown keys are errors: a typo such as
//! `timout = "1h"` must not silently fall back to the default.

use std::path::PathBuf;
use std::time::Duration;

use super::argv::{ArgTemplate, Pattern, Patterns, Placeholder};
use super::schema::{self, ArgsChecks, Schema};

/// The keys a command table may have.
const KEYS: &[&str] = &[
    "builtin",
    "exec",
    "timeout",
    "kill_grace",
    "heavy",
    "workdir",
    "env",
    "args_required",
    "args_schema",
    "placeholder_patterns",
    "description",
    "retries",
    "retry_delay",
    "retry_max_delay",
    "retry_on",
    "output",
    "mask",
    "secrets",
];

/// Default run-time limit of a command, unless `stale_after` is so short that half of it
/// is less.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Default time between SIGTERM and SIGKILL when a command is stopped, unless a tenth of
/// `stale_after` is less.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(3);

/// Longest accepted `kill_grace`: a stop must stay prompt for shutdown.
pub const MAX_KILL_GRACE: Duration = Duration::from_secs(60);

/// Most `retries` a command may have: more is a loop, not a retry.
pub const MAX_RETRIES: u32 = 10;

/// Default ceiling of the first wait before a retry (`retry_delay`).
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Default cap of the wait before a retry (`retry_max_delay`).
pub const DEFAULT_RETRY_MAX_DELAY: Duration = Duration::from_secs(5 * 60);

/// How a command's failed attempts are tried again: `retries`, `retry_delay`,
/// `retry_max_delay`, `retry_on`. The daemon that ran an attempt keeps the claim through the
/// wait and runs the next attempt itself (docs/design.md §5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Attempts after the first; 0 is never.
    pub retries: u32,
    /// The ceiling of the wait before the first retry; each further retry doubles it.
    pub delay: Duration,
    /// The ceiling never grows beyond this.
    pub max_delay: Duration,
    pub on: RetryOn,
}

/// Which outcomes of an attempt are tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryOn {
    /// Every エラー (a non-zero exit, a signal, a command that could not start).
    pub error: bool,
    /// タイムアウト.
    pub timeout: bool,
    /// エラー with one of these exit codes (when `error` is false).
    pub codes: Vec<i32>,
}

impl Default for Retry {
    /// Never.
    fn default() -> Self {
        Retry {
            retries: 0,
            delay: DEFAULT_RETRY_DELAY,
            max_delay: DEFAULT_RETRY_MAX_DELAY,
            on: RetryOn {
                error: true,
                timeout: true,
                codes: Vec::new(),
            },
        }
    }
}

impl Retry {
    /// The waits' policy: full jitter under `min(max_delay, delay * 2^(k-1))` before retry k.
    pub fn policy(&self) -> crate::sheets::retry::RetryPolicy {
        crate::sheets::retry::RetryPolicy {
            max_attempts: self.retries + 1,
            initial_delay: self.delay,
            max_delay: self.max_delay,
            max_elapsed: Duration::MAX,
        }
    }

    /// The longest all waits together can be (every wait at its ceiling).
    pub fn longest_waits(&self) -> Duration {
        let policy = self.policy();
        (1..=self.retries)
            .map(|k| policy.ceiling(k))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// Whether an attempt that ended with `status` (and `exit_code`, when it exited) is tried
    /// again, attempts left permitting.
    pub fn retries_on(&self, status: super::OutcomeStatus, exit_code: Option<i32>) -> bool {
        use super::OutcomeStatus;
        match status {
            OutcomeStatus::Failed => {
                self.on.error || exit_code.is_some_and(|c| self.on.codes.contains(&c))
            }
            OutcomeStatus::TimedOut => self.on.timeout,
            OutcomeStatus::Done | OutcomeStatus::Cancelled => false,
        }
    }
}

/// One configured command.
#[derive(Debug, Clone)]
pub struct CommandDef {
    /// The name used in the sheet's `command` cell (the TOML table name).
    pub name: String,
    pub kind: CommandKind,
    /// Run-time limit, measured from [`super::Runner::run`] (so it includes any wait for the
    /// heavy gate); always `timeout + kill_grace < stale_after`, so the sheet never times out
    /// a job that is still running.
    pub timeout: Duration,
    pub kill_grace: Duration,
    /// At most one heavy job runs at a time per runner.
    pub heavy: bool,
    /// Working directory of an `exec` command; the daemon's own when `None`.
    pub workdir: Option<PathBuf>,
    /// Names of the daemon's environment variables passed through to an `exec` command.
    pub env: Vec<String>,
    pub description: Option<String>,
    /// Failed attempts tried again; `timeout + kill_grace` per attempt plus the longest
    /// waits stay shorter than `stale_after`, so the sheet never times out a job that is
    /// still retrying.
    pub retry: Retry,
    pub(crate) checks: ArgsChecks,
    /// `placeholder_patterns`: what each placeholder's value must match, whole, to be put
    /// into argv (besides the rules every value passes, [`super::argv::unfit`]).
    pub(crate) patterns: Patterns,
    /// `output = "private"`: what the job prints stays on this machine (`state_dir/logs`,
    /// `sheetq logs`); the sheet and notifications get the result's message or a fixed text.
    pub private_output: bool,
    /// `mask = [...]`: patterns whose matches in the job's output are shown as `***`.
    pub mask: std::sync::Arc<Vec<regex::bytes::Regex>>,
}

/// `mask = ["regex", ...]`: each a regex (Rust's syntax) that matches something.
fn parse_mask(
    at: &str,
    v: Option<&toml::Value>,
    is_builtin: bool,
    errors: &mut Vec<String>,
) -> Vec<regex::bytes::Regex> {
    let Some(v) = v else {
        return Vec::new();
    };
    if is_builtin {
        errors.push(format!(
            "{at}.mask only applies to exec commands: remove it"
        ));
        return Vec::new();
    }
    let Some(items) = v.as_array() else {
        errors.push(format!(
            "{at}.mask = {v} must be a list of regexes, e.g. mask = [\"ghp_[A-Za-z0-9]{{36}}\"]"
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        let Some(source) = item.as_str() else {
            errors.push(format!("{at}.mask: {item} must be a regex string"));
            continue;
        };
        match regex::bytes::Regex::new(source) {
            Ok(r) if r.is_match(b"") => errors.push(format!(
                "{at}.mask: {source:?} matches the empty string, so it would mask between every two characters; make it match the secret itself"
            )),
            Ok(r) => out.push(r),
            Err(e) => errors.push(format!("{at}.mask: {source:?} is not a regex: {e}")),
        }
    }
    out
}

/// The values of `output`, in a command or a function: where a job's output may go.
pub fn parse_output(at: &str, v: Option<&toml::Value>, errors: &mut Vec<String>) -> bool {
    match v {
        None => false,
        Some(toml::Value::String(s)) if s == "sheet" => false,
        Some(toml::Value::String(s)) if s == "private" => true,
        Some(other) => {
            errors.push(format!(
                "{at}.output = {other} must be \"sheet\" (the default: the output's tail on _ジョブログ, the last line as メッセージ) or \"private\" (kept on this machine only: `sheetq logs` prints it)"
            ));
            false
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum CommandKind {
    Builtin(Builtin),
    /// argv templates; element 0 (the program) never contains a placeholder.
    Exec {
        argv: Vec<ArgTemplate>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// Sleeps `args.seconds` and returns a fixed message and URL: the verification dummy.
    Sleep,
    /// Returns its args as the message: for smoke tests of the whole path.
    Echo,
    /// Creates or shows panels (`sheetq.panels`, the jobs of ticks on the index); not
    /// configurable, always there.
    Panels,
}

/// The definition of the built-in `sheetq.panels`: five minutes (or less, to stay under
/// `stale_after`), not heavy, no argument checks beyond its own.
pub(crate) fn panels_def(stale_after: Duration) -> CommandDef {
    let kill_grace = Duration::from_secs(5).min(stale_after / 4);
    CommandDef {
        name: crate::panel::catalog::PANELS_COMMAND.to_string(),
        kind: CommandKind::Builtin(Builtin::Panels),
        timeout: Duration::from_secs(300).min(stale_after / 2),
        kill_grace,
        heavy: false,
        workdir: None,
        env: Vec::new(),
        description: Some("creates or shows panels asked for on the index".into()),
        retry: Retry::default(),
        checks: ArgsChecks::default(),
        patterns: Patterns::new(),
        private_output: false,
        mask: std::sync::Arc::default(),
    }
}

/// Parses every command table, keeping what parsed: the commands that did, every problem
/// found, and the names of those that did not (configured, with a fault of its own to
/// report once, never also "not configured" wherever it is used).
pub(crate) fn parse_commands_partly(
    table: &toml::Table,
    stale_after: Duration,
) -> (Vec<CommandDef>, Vec<String>, Vec<String>) {
    let mut errors = Vec::new();
    let mut defs = Vec::new();
    let mut broken = Vec::new();
    for (name, value) in table {
        let at = format!("commands.{}", key_text(name));
        if name.trim().is_empty() || name.trim() != name {
            errors.push(format!(
                "{at}: a command name must not be empty or start/end with spaces (the sheet's \
                 command cell is matched exactly after trimming)"
            ));
            continue;
        }
        let Some(t) = value.as_table() else {
            errors.push(format!(
                "{at} must be a table, e.g. [{at}] with builtin = \"sleep\" or exec = [\"/path/to/program\"]"
            ));
            broken.push(name.clone());
            continue;
        };
        match parse_one(name, &at, t, stale_after, &mut errors) {
            Some(def) => defs.push(def),
            None => broken.push(name.clone()),
        }
    }
    (defs, errors, broken)
}

/// One `[commands.<name>]` table (`at` names it in messages), every key checked; what is
/// wrong goes to `errors`, each with its fix, and the command is then `None`.
fn parse_one(
    name: &str,
    at: &str,
    t: &toml::Table,
    stale_after: Duration,
    errors: &mut Vec<String>,
) -> Option<CommandDef> {
    let before = errors.len();
    for key in t.keys() {
        if !KEYS.contains(&key.as_str()) {
            errors.push(format!(
                "{at}.{} is not a known key (known: {})",
                key_text(key),
                KEYS.join(", ")
            ));
        }
    }
    let kind = parse_kind(at, t, errors);
    let is_builtin = matches!(kind, Some(CommandKind::Builtin(_))) || t.contains_key("builtin");
    let kill_grace = parse_kill_grace(at, t.get("kill_grace"), stale_after, errors);
    let retry = parse_retry(at, t, errors);
    let attempts = retry.retries + 1;
    let timeout = parse_timeout(
        at,
        t.get("timeout"),
        stale_after,
        kill_grace,
        attempts,
        errors,
    );
    check_retry_span(at, &retry, timeout, kill_grace, stale_after, errors);
    let heavy = match t.get("heavy") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(v) => {
            errors.push(format!("{at}.heavy = {v} must be true or false"));
            false
        }
    };
    let workdir = t.get("workdir").and_then(|v| parse_workdir(at, v, errors));
    if workdir.is_some() && is_builtin {
        errors.push(format!(
            "{at}.workdir only applies to exec commands: remove it"
        ));
    }
    let env = t
        .get("env")
        .map(|v| parse_env(at, v, errors))
        .unwrap_or_default();
    if !env.is_empty() && is_builtin {
        errors.push(format!("{at}.env only applies to exec commands: remove it"));
    }
    if let Some(v) = t.get("secrets") {
        check_secrets(at, v, &env, errors);
    }
    let checks = parse_checks(at, t, errors);
    let patterns = t
        .get("placeholder_patterns")
        .map(|v| parse_patterns(at, v, kind.as_ref(), is_builtin, errors))
        .unwrap_or_default();
    let private_output = parse_output(at, t.get("output"), errors);
    let mask = std::sync::Arc::new(parse_mask(at, t.get("mask"), is_builtin, errors));
    let description = match t.get("description") {
        None => None,
        Some(toml::Value::String(s)) => Some(s.clone()),
        Some(v) => {
            errors.push(format!("{at}.description = {v} must be a string"));
            None
        }
    };
    if errors.len() > before {
        return None;
    }
    Some(CommandDef {
        name: name.to_string(),
        kind: kind?,
        timeout,
        kill_grace,
        heavy,
        workdir,
        env,
        description,
        retry,
        checks,
        patterns,
        private_output,
        mask,
    })
}

/// What the command runs: exactly one of `builtin` and `exec`.
fn parse_kind(at: &str, t: &toml::Table, errors: &mut Vec<String>) -> Option<CommandKind> {
    match (t.get("builtin"), t.get("exec")) {
        (Some(_), Some(_)) => {
            errors.push(format!("{at} has both builtin and exec: keep exactly one"));
            None
        }
        (None, None) => {
            errors.push(format!(
                "{at} needs builtin = \"sleep\" | \"echo\" or exec = [\"/path/to/program\", \"arg\", ...]"
            ));
            None
        }
        (Some(b), None) => match b.as_str() {
            Some("sleep") => Some(CommandKind::Builtin(Builtin::Sleep)),
            Some("echo") => Some(CommandKind::Builtin(Builtin::Echo)),
            _ => {
                errors.push(format!(
                    "{at}.builtin = {b} is not a built-in command (built-ins: \"sleep\", \"echo\")"
                ));
                None
            }
        },
        (None, Some(e)) => parse_exec(at, e, errors).map(|argv| CommandKind::Exec { argv }),
    }
}

/// How long a stopped command gets between SIGTERM and SIGKILL.
fn parse_kill_grace(
    at: &str,
    value: Option<&toml::Value>,
    stale_after: Duration,
    errors: &mut Vec<String>,
) -> Duration {
    let Some(v) = value else {
        return DEFAULT_KILL_GRACE.min(stale_after / 10);
    };
    match duration(at, "kill_grace", v, errors) {
        Some(d) if d > MAX_KILL_GRACE => {
            errors.push(format!(
                "{at}.kill_grace = \"{}\" is too long: at most {} so that a stop stays prompt",
                humantime::format_duration(d),
                humantime::format_duration(MAX_KILL_GRACE)
            ));
            DEFAULT_KILL_GRACE
        }
        Some(d) => d,
        None => DEFAULT_KILL_GRACE,
    }
}

/// The command's timeout: with its kill grace, shorter than `stale_after`, or the sheet
/// would time a job out while it still runs. Unset, it is five minutes or what leaves half of
/// `stale_after` to `attempts` attempts, whichever is less.
fn parse_timeout(
    at: &str,
    value: Option<&toml::Value>,
    stale_after: Duration,
    kill_grace: Duration,
    attempts: u32,
    errors: &mut Vec<String>,
) -> Duration {
    let Some(v) = value else {
        // Half of stale_after for all attempts, the other half for the waits between them.
        return DEFAULT_TIMEOUT.min(stale_after / 2 / attempts.max(1));
    };
    let Some(d) = duration(at, "timeout", v, errors) else {
        return DEFAULT_TIMEOUT;
    };
    if d.is_zero() {
        errors.push(format!("{at}.timeout must be longer than 0s"));
        return DEFAULT_TIMEOUT;
    }
    let stale = humantime::format_duration(stale_after);
    let shown = humantime::format_duration(d);
    if d >= stale_after {
        errors.push(format!(
            "{at}.timeout = \"{shown}\" must be shorter than stale_after ({stale}): \
             a job would be timed out by the sheet while still running"
        ));
    } else if d + kill_grace >= stale_after {
        errors.push(format!(
            "{at}.timeout = \"{shown}\" plus kill_grace ({}) must be shorter than \
             stale_after ({stale}): a job would be timed out by the sheet while \
             still stopping",
            humantime::format_duration(kill_grace)
        ));
    }
    d
}

/// `retries`, `retry_delay`, `retry_max_delay` and `retry_on`; the other three need
/// `retries`.
fn parse_retry(at: &str, t: &toml::Table, errors: &mut Vec<String>) -> Retry {
    let mut retry = Retry::default();
    match t.get("retries") {
        None => {
            for key in ["retry_delay", "retry_max_delay", "retry_on"] {
                if t.contains_key(key) {
                    errors.push(format!(
                        "{at}.{key} has no effect without retries: add retries = 2 (say), or remove it"
                    ));
                }
            }
            return retry;
        }
        Some(v) => match v.as_integer().map(u32::try_from) {
            Some(Ok(n)) if n <= MAX_RETRIES => retry.retries = n,
            _ => errors.push(format!(
                "{at}.retries = {v} must be a whole number from 0 to {MAX_RETRIES} (attempts after the first)"
            )),
        },
    }
    if let Some(v) = t.get("retry_delay") {
        match duration(at, "retry_delay", v, errors) {
            Some(d) if d.is_zero() => errors.push(format!(
                "{at}.retry_delay must be longer than 0s: write e.g. \"30s\""
            )),
            Some(d) => retry.delay = d,
            None => {}
        }
    }
    if let Some(v) = t.get("retry_max_delay") {
        if let Some(d) = duration(at, "retry_max_delay", v, errors) {
            retry.max_delay = d;
        }
    } else {
        retry.max_delay = retry.max_delay.max(retry.delay);
    }
    if retry.max_delay < retry.delay {
        errors.push(format!(
            "{at}.retry_max_delay ({}) must not be shorter than retry_delay ({})",
            humantime::format_duration(retry.max_delay),
            humantime::format_duration(retry.delay)
        ));
    }
    if let Some(v) = t.get("retry_on") {
        if let Some(on) = parse_retry_on(at, v, errors) {
            retry.on = on;
        }
    }
    retry
}

/// `retry_on = ["エラー", "タイムアウト", 75]`: the state words (or `error`, `timeout`) and
/// exit codes whose attempts are tried again.
fn parse_retry_on(at: &str, v: &toml::Value, errors: &mut Vec<String>) -> Option<RetryOn> {
    let hint = "e.g. retry_on = [\"タイムアウト\", 75] (エラー or error, タイムアウト or timeout, exit codes 1-255)";
    let Some(items) = v.as_array() else {
        errors.push(format!("{at}.retry_on = {v} must be a list, {hint}"));
        return None;
    };
    if items.is_empty() {
        errors.push(format!(
            "{at}.retry_on = [] retries nothing: remove retries instead, or list what retries, {hint}"
        ));
        return None;
    }
    let mut on = RetryOn {
        error: false,
        timeout: false,
        codes: Vec::new(),
    };
    let before = errors.len();
    for item in items {
        match item {
            toml::Value::String(s) if s == "エラー" || s == "error" => on.error = true,
            toml::Value::String(s) if s == "タイムアウト" || s == "timeout" => {
                on.timeout = true
            }
            toml::Value::Integer(c) if (1..=255).contains(c) => on.codes.push(*c as i32),
            other => errors.push(format!(
                "{at}.retry_on: {other} is not an outcome that can be retried, {hint}"
            )),
        }
    }
    (errors.len() == before).then_some(on)
}

/// With retries, one claim holds every attempt and the waits between them: all of it must
/// end before `stale_after`, or other daemons would time the job out while it still
/// retries.
fn check_retry_span(
    at: &str,
    retry: &Retry,
    timeout: Duration,
    kill_grace: Duration,
    stale_after: Duration,
    errors: &mut Vec<String>,
) {
    if retry.retries == 0 {
        return;
    }
    let attempts = retry.retries + 1;
    let waits = retry.longest_waits();
    let span = (timeout + kill_grace)
        .saturating_mul(attempts)
        .saturating_add(waits);
    if span >= stale_after {
        errors.push(format!(
            "{at}: retries = {} can hold the job for up to {attempts} × (timeout {} + kill_grace {}) \
             + waits of up to {} = {}, not shorter than stale_after ({}): other daemons would time \
             the job out while it still retries; lower timeout, retries or retry_max_delay, or \
             raise stale_after",
            retry.retries,
            humantime::format_duration(timeout),
            humantime::format_duration(kill_grace),
            humantime::format_duration(waits),
            humantime::format_duration(span),
            humantime::format_duration(stale_after),
        ));
    }
}

fn parse_workdir(at: &str, v: &toml::Value, errors: &mut Vec<String>) -> Option<PathBuf> {
    match v.as_str() {
        Some(s) if PathBuf::from(s).is_absolute() => Some(PathBuf::from(s)),
        _ => {
            errors.push(format!(
                "{at}.workdir = {v} must be an absolute path, e.g. \"/var/lib/sheetq/work\""
            ));
            None
        }
    }
}

/// `args_required` and `args_schema`: what a job's arguments must hold.
fn parse_checks(at: &str, t: &toml::Table, errors: &mut Vec<String>) -> ArgsChecks {
    let mut checks = ArgsChecks::default();
    if let Some(v) = t.get("args_required") {
        match v
            .as_array()
            .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
        {
            Some(keys) => checks.required = keys,
            None => errors.push(format!(
                "{at}.args_required = {v} must be a list of key names, e.g. [\"month\"]"
            )),
        }
    }
    if let Some(v) = t.get("args_schema") {
        checks.schema = parse_schema(at, v, errors);
    }
    checks
}

/// `placeholder_patterns = { target = "[a-z0-9][a-z0-9.-]*" }`: a regex per placeholder
/// that `exec` puts into argv, which its whole value must match.
fn parse_patterns(
    at: &str,
    v: &toml::Value,
    kind: Option<&CommandKind>,
    is_builtin: bool,
    errors: &mut Vec<String>,
) -> Patterns {
    let here = format!("{at}.placeholder_patterns");
    if is_builtin {
        errors.push(format!("{here} only applies to exec commands: remove it"));
        return Patterns::new();
    }
    let Some(table) = v.as_table() else {
        errors.push(format!(
            "{here} = {v} must be a table of placeholder name to regex, e.g. \
             placeholder_patterns = {{ target = \"[a-z0-9][a-z0-9.-]*\" }}"
        ));
        return Patterns::new();
    };
    let argv = match kind {
        Some(CommandKind::Exec { argv }) => Some(argv.as_slice()),
        _ => None,
    };
    let mut patterns = Patterns::new();
    for (key, value) in table {
        let at_key = format!("{here}.{}", key_text(key));
        let Some(p) = Placeholder::from_name(key) else {
            errors.push(format!(
                "{at_key} is not a placeholder (known: {})",
                Placeholder::ALL
                    .iter()
                    .map(Placeholder::name)
                    .chain([format!("{}NAME", super::argv::INPUT_PREFIX)])
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        };
        let Some(source) = value.as_str() else {
            errors.push(format!(
                "{at_key} = {value} must be a regex string, e.g. \"[a-z0-9][a-z0-9.-]*\""
            ));
            continue;
        };
        if argv.is_some_and(|argv| !argv.iter().any(|e| e.placeholders().any(|q| *q == p))) {
            errors.push(format!(
                "{at_key}: exec never puts {p} into argv, so the pattern would check nothing; \
                 remove it, or use {p} in exec"
            ));
            continue;
        }
        match Pattern::new(source) {
            Ok(pattern) => {
                patterns.insert(p, pattern);
            }
            Err(e) => errors.push(format!("{at_key} = {value} is not a valid regex: {e}")),
        }
    }
    patterns
}

fn parse_exec(at: &str, v: &toml::Value, errors: &mut Vec<String>) -> Option<Vec<ArgTemplate>> {
    let Some(list) = v.as_array() else {
        errors.push(format!(
            "{at}.exec must be a list (argv, no shell), e.g. exec = [\"/opt/tools/report\", \"--target\", \"{{target}}\"]"
        ));
        return None;
    };
    if list.is_empty() {
        errors.push(format!("{at}.exec is empty: name the program to run"));
        return None;
    }
    let mut argv = Vec::new();
    let mut ok = true;
    for (i, item) in list.iter().enumerate() {
        let Some(text) = item.as_str() else {
            errors.push(format!("{at}.exec[{i}] = {item} must be a string"));
            ok = false;
            continue;
        };
        if text.contains('\0') {
            errors.push(format!("{at}.exec[{i}] contains a NUL character"));
            ok = false;
            continue;
        }
        match ArgTemplate::parse(text) {
            Ok(tpl) if i == 0 && (text.is_empty() || tpl.has_placeholder()) => {
                errors.push(format!(
                    "{at}.exec[0] = \"{text}\" must name a fixed program (no placeholders): \
                     the sheet must never choose what runs"
                ));
                ok = false;
            }
            Ok(tpl) => argv.push(tpl),
            Err(e) => {
                errors.push(format!("{at}.exec[{i}] = \"{text}\": {e}"));
                ok = false;
            }
        }
    }
    ok.then_some(argv)
}

/// The variables that say where the daemon's credentials are: no command may pass them on.
const KEY_VARIABLES: &[&str] = &["GOOGLE_APPLICATION_CREDENTIALS", "CREDENTIALS_DIRECTORY"];

fn parse_env(at: &str, v: &toml::Value, errors: &mut Vec<String>) -> Vec<String> {
    let Some(list) = v.as_array() else {
        errors.push(format!(
            "{at}.env = {v} must be a list of variable names to pass through, e.g. [\"HOME\", \"REPORT_TOKEN\"]"
        ));
        return Vec::new();
    };
    let mut names = Vec::new();
    for item in list {
        match item.as_str() {
            Some(n) if n.starts_with("SHEETQ_") => errors.push(format!(
                "{at}.env: \"{n}\" is reserved: sheetq sets the SHEETQ_* variables itself"
            )),
            // Where the daemon's own key is: never handed to a job (it would let the job call
            // the API as sheetq, or read the key itself).
            Some(n) if KEY_VARIABLES.contains(&n) => errors.push(format!(
                "{at}.env: \"{n}\" names where sheetq's service account key is; a job must not be handed it. \
                 Give the job a credential of its own under another name"
            )),
            Some(n) if is_env_name(n) => names.push(n.to_string()),
            _ => errors.push(format!(
                "{at}.env: {item} is not a variable name (letters, digits, _; e.g. \"REPORT_TOKEN\"); \
                 values come from the daemon's environment, not from this file"
            )),
        }
    }
    names
}

/// `secrets = ["REPORT_TOKEN"]`: the `env` variables that hold secrets. Each must be in
/// `env`, and a value set in the daemon's environment must be long enough to mask
/// (`mask::MIN_CHARS`, as GitLab asks of masked variables): a shorter one would show in the
/// job's output wherever it goes, so the config is refused, at start and at reload, naming
/// the variable. (Every `env` value that long is masked, secret or not; `secrets` is what
/// makes a short one an error rather than a value shown as it is.)
fn check_secrets(at: &str, v: &toml::Value, env: &[String], errors: &mut Vec<String>) {
    let Some(list) = v.as_array() else {
        errors.push(format!(
            "{at}.secrets = {v} must be a list of the env variables that hold secrets, e.g. [\"REPORT_TOKEN\"]"
        ));
        return;
    };
    for item in list {
        let Some(name) = item.as_str().filter(|n| env.iter().any(|e| e == n)) else {
            errors.push(format!(
                "{at}.secrets: {item} is not among its env; list the variable in env too (a secret is passed through env)"
            ));
            continue;
        };
        let length = std::env::var(name).map_or(0, |v| v.chars().count());
        if length > 0 && length < super::mask::MIN_CHARS {
            errors.push(format!(
                "{at}.secrets: the value of {name} has {length} characters, fewer than {}: too short to mask in the job's output (it would be guessable, and masking every such string would garble the output); use a longer secret",
                super::mask::MIN_CHARS
            ));
        }
    }
}

fn is_env_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_schema(at: &str, v: &toml::Value, errors: &mut Vec<String>) -> Option<Schema> {
    let here = format!("{at}.args_schema");
    let json = match v {
        toml::Value::String(text) => match serde_json::from_str(text) {
            Ok(j) => j,
            Err(e) => {
                errors.push(format!("{here} is not valid JSON: {e}"));
                return None;
            }
        },
        toml::Value::Table(_) => match schema::toml_to_json(v) {
            Ok(j) => j,
            Err(e) => {
                errors.push(format!("{here}: {e}"));
                return None;
            }
        },
        other => {
            errors.push(format!(
                "{here} = {other} must be a table (inline JSON Schema) or a JSON string"
            ));
            return None;
        }
    };
    if let Some(t) = json.get("type") {
        if t != "object" {
            errors.push(format!(
                "{here}.type must be \"object\": argsJSON is always an object"
            ));
        }
    }
    let before = errors.len();
    let compiled = Schema::compile(&json, &here, errors);
    (errors.len() == before).then_some(compiled)
}

fn duration(at: &str, key: &str, v: &toml::Value, errors: &mut Vec<String>) -> Option<Duration> {
    match v.as_str().map(humantime::parse_duration) {
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            errors.push(format!(
                "{at}.{key} = {v} is not a duration ({e}); write e.g. \"90s\", \"10m\""
            ));
            None
        }
        None => {
            errors.push(format!(
                "{at}.{key} = {v} must be a duration string, e.g. \"90s\", \"10m\""
            ));
            None
        }
    }
}

/// A TOML key as it would be written in the file (quoted when not bare).
pub(crate) fn key_text(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::Registry;

    const STALE: Duration = Duration::from_secs(15 * 60);

    fn errors(text: &str) -> Vec<String> {
        Registry::from_toml_str(text, STALE).unwrap_err()
    }

    #[test]
    fn design_example_is_accepted() {
        let r = Registry::from_toml_str(
            r#"
            [sleep]
            builtin = "sleep"

            [report]
            exec    = ["/opt/tools/report", "--target", "{target}"]
            timeout = "10m"
            heavy   = true
            "#,
            STALE,
        )
        .unwrap();
        let report = r.get("report").unwrap();
        assert_eq!(report.timeout, Duration::from_secs(600));
        assert!(report.heavy);
        assert_eq!(r.get("sleep").unwrap().timeout, DEFAULT_TIMEOUT);
        assert_eq!(r.get("sleep").unwrap().kill_grace, DEFAULT_KILL_GRACE);
    }

    #[test]
    fn retries_default_to_errors_and_timeouts_and_shorten_the_default_timeout() {
        let r = Registry::from_toml_str(
            "[flaky]\nexec = [\"/bin/true\"]\nretries = 2\nretry_delay = \"10s\"",
            STALE,
        )
        .unwrap();
        let flaky = r.get("flaky").unwrap();
        assert_eq!(flaky.retry.retries, 2);
        assert_eq!(flaky.retry.delay, Duration::from_secs(10));
        assert!(flaky.retry.on.error && flaky.retry.on.timeout);
        // Half of stale_after shared by three attempts.
        assert_eq!(flaky.timeout, Duration::from_secs(150));
        assert_eq!(
            flaky.retry.longest_waits(),
            Duration::from_secs(30),
            "waits of up to 10 s and 20 s"
        );
        let never = Registry::from_toml_str("[once]\nexec = [\"/bin/true\"]", STALE).unwrap();
        assert_eq!(never.get("once").unwrap().retry.retries, 0);
        assert_eq!(never.get("once").unwrap().timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn retry_on_takes_state_words_and_exit_codes() {
        let r = Registry::from_toml_str(
            "[a]\nexec = [\"/bin/true\"]\nretries = 1\nretry_on = [\"タイムアウト\", 75]",
            STALE,
        )
        .unwrap();
        let retry = &r.get("a").unwrap().retry;
        use crate::commands::OutcomeStatus::*;
        assert!(retry.retries_on(TimedOut, None));
        assert!(retry.retries_on(Failed, Some(75)));
        assert!(!retry.retries_on(Failed, Some(1)), "exit 1 is not listed");
        assert!(!retry.retries_on(Failed, None), "a signal is not listed");
        assert!(!retry.retries_on(Done, Some(0)));
        assert!(
            !retry.retries_on(Cancelled, None),
            "a stop is never retried"
        );
    }

    #[test]
    fn retry_keys_are_checked_and_explained() {
        let e = errors(
            "[a]\nexec = [\"/bin/true\"]\nretry_delay = \"5s\"\n\
             [b]\nexec = [\"/bin/true\"]\nretries = 11\n\
             [c]\nexec = [\"/bin/true\"]\nretries = 1\nretry_on = [\"完了\", 0]\n\
             [d]\nexec = [\"/bin/true\"]\nretries = 1\nretry_delay = \"2m\"\nretry_max_delay = \"1m\"",
        );
        let expected = [
            "commands.a.retry_delay has no effect without retries",
            "commands.b.retries = 11 must be a whole number from 0 to 10",
            "commands.c.retry_on: \"完了\" is not an outcome that can be retried",
            "commands.c.retry_on: 0 is not an outcome that can be retried",
            "commands.d.retry_max_delay (1m) must not be shorter than retry_delay (2m)",
        ];
        for want in expected {
            assert!(
                e.iter().any(|m| m.starts_with(want)),
                "no error starting {want:?} among {e:#?}"
            );
        }
        assert_eq!(e.len(), expected.len(), "{e:#?}");
    }

    #[test]
    fn retries_that_could_outlast_stale_after_are_refused_with_the_arithmetic() {
        let e = errors(
            "[long]\nexec = [\"/bin/true\"]\ntimeout = \"4m\"\nretries = 3\nretry_delay = \"1m\"",
        );
        assert_eq!(
            e,
            vec![
                "commands.long: retries = 3 can hold the job for up to 4 × (timeout 4m + \
                 kill_grace 3s) + waits of up to 7m = 23m 12s, not shorter than stale_after \
                 (15m): other daemons would time the job out while it still retries; lower \
                 timeout, retries or retry_max_delay, or raise stale_after"
            ]
        );
    }

    #[test]
    fn timeout_not_shorter_than_stale_after_is_explained() {
        let e = errors("[report]\nexec = [\"/bin/true\"]\ntimeout = \"20m\"");
        assert_eq!(
            e,
            vec![
                "commands.report.timeout = \"20m\" must be shorter than stale_after (15m): a job \
                 would be timed out by the sheet while still running"
            ]
        );
        let e = errors("[report]\nexec = [\"/bin/true\"]\ntimeout = \"15m\"");
        assert_eq!(e.len(), 1);
        let e = errors("[report]\nexec = [\"/bin/true\"]\ntimeout = \"14m58s\"");
        assert!(e[0].contains("plus kill_grace (3s)"), "{e:?}");
    }

    #[test]
    fn defaults_fit_a_short_stale_after() {
        let r =
            Registry::from_toml_str("[s]\nbuiltin = \"sleep\"", Duration::from_secs(2)).unwrap();
        let s = r.get("s").unwrap();
        assert_eq!(s.timeout, Duration::from_secs(1));
        assert_eq!(s.kill_grace, Duration::from_millis(200));
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let e = errors(
            r#"
            [a]
            builtin = "sleep"
            exec = ["/bin/true"]
            [b]
            timout = "1h"
            [c]
            exec = ["{target}", "{tagret}"]
            heavy = "yes"
            [d]
            builtin = "spawn"
            env = ["PATH", "SHEETQ_X", "A-B"]
            workdir = "relative/dir"
            timeout = "soon"
            args_required = "month"
            args_schema = { type = "array", oneOf = [] }
            [e]
            builtin = "echo"
            workdir = "/tmp"
            [e2]
            exec = []
            f = 1
            [g]
            exec = "/bin/sh -c 'x'"
            "#,
        );
        let expect = [
            "commands.a has both builtin and exec",
            "commands.b.timout is not a known key",
            "commands.b needs builtin",
            "commands.c.exec[0] = \"{target}\" must name a fixed program",
            "commands.c.exec[1] = \"{tagret}\": unknown placeholder {tagret}",
            "commands.c.heavy = \"yes\" must be true or false",
            "commands.d.builtin = \"spawn\" is not a built-in command",
            "commands.d.timeout = \"soon\" is not a duration",
            "commands.d.workdir = \"relative/dir\" must be an absolute path",
            "commands.d.env: \"SHEETQ_X\" is reserved",
            "commands.d.env: \"A-B\" is not a variable name",
            "commands.d.env only applies to exec commands",
            "commands.d.args_required = \"month\" must be a list",
            "commands.d.args_schema.type must be \"object\"",
            "commands.d.args_schema: keyword \"oneOf\" is not supported",
            "commands.e.workdir only applies to exec commands",
            "commands.e2.f is not a known key",
            "commands.e2.exec is empty",
            "commands.g.exec must be a list",
        ];
        for want in expect {
            assert!(
                e.iter().any(|got| got.starts_with(want)),
                "missing {want:?} in {e:#?}"
            );
        }
        assert_eq!(e.len(), expect.len(), "{e:#?}");
    }

    #[test]
    fn schema_may_be_a_json_string() {
        let r = Registry::from_toml_str(
            r#"
            [r]
            exec = ["/bin/true"]
            args_schema = '{"type":"object","required":["month"]}'
            "#,
            STALE,
        )
        .unwrap();
        assert!(!r.get("r").unwrap().checks.is_empty());
        let e = errors("[r]\nexec = [\"/bin/true\"]\nargs_schema = '{nope'");
        assert!(
            e[0].starts_with("commands.r.args_schema is not valid JSON"),
            "{e:?}"
        );
    }

    #[test]
    fn placeholder_patterns_are_kept_for_the_placeholders_exec_uses() {
        let r = Registry::from_toml_str(
            r#"
            [uptime]
            exec = ["/usr/bin/ssh", "--", "{target}", "uptime", "{requester}"]
            placeholder_patterns = { target = "[a-z0-9][a-z0-9.-]*", requester = '.+@example\.com' }
            "#,
            STALE,
        )
        .unwrap_or_else(|e| panic!("{e:#?}"));
        let patterns = &r.get("uptime").unwrap().patterns;
        let shown: Vec<(String, &str)> = patterns
            .iter()
            .map(|(p, pattern)| (p.name(), pattern.as_str()))
            .collect();
        let shown: Vec<(&str, &str)> = shown.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        assert_eq!(
            shown,
            [
                ("target", "[a-z0-9][a-z0-9.-]*"),
                ("requester", ".+@example\\.com")
            ]
        );
    }

    #[test]
    fn every_placeholder_patterns_problem_is_listed_at_once() {
        let e = errors(
            r#"
            [a]
            exec = ["/usr/bin/ssh", "{target}", "{requester}"]
            placeholder_patterns = { target = "[a-z", host = ".*", requester = 5, function = ".*" }
            [b]
            builtin = "sleep"
            placeholder_patterns = { target = ".*" }
            [c]
            exec = ["/bin/true"]
            placeholder_patterns = "[a-z]+"
            "#,
        );
        let expect = [
            "commands.a.placeholder_patterns.function: exec never puts {function} into argv, \
             so the pattern would check nothing; remove it, or use {function} in exec",
            "commands.a.placeholder_patterns.host is not a placeholder (known: target, \
             function, job_id, requester, input.NAME)",
            "commands.a.placeholder_patterns.requester = 5 must be a regex string",
            "commands.a.placeholder_patterns.target = \"[a-z\" is not a valid regex",
            "commands.b.placeholder_patterns only applies to exec commands: remove it",
            "commands.c.placeholder_patterns = \"[a-z]+\" must be a table of placeholder name \
             to regex",
        ];
        for want in expect {
            assert!(
                e.iter().any(|got| got.starts_with(want)),
                "missing {want:?} in {e:#?}"
            );
        }
        assert_eq!(e.len(), expect.len(), "{e:#?}");
    }

    #[test]
    fn a_value_that_is_not_a_table_is_named() {
        let e = errors("sleep = \"builtin\"");
        assert!(e[0].starts_with("commands.sleep must be a table"), "{e:?}");
    }

    #[test]
    fn output_is_sheet_or_private_and_anything_else_is_named_with_both() {
        let r = Registry::from_toml_str(
            "[pay]\nexec = [\"/bin/true\"]\noutput = \"private\"\n[echo2]\nbuiltin = \"echo\"\noutput = \"sheet\"",
            STALE,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(r.keeps_output_private("pay", "any"));
        assert!(!r.keeps_output_private("echo2", "any"));
        let e = errors("[pay]\nexec = [\"/bin/true\"]\noutput = \"hidden\"");
        assert!(
            e[0].contains("commands.pay.output") && e[0].contains("\"private\""),
            "{e:?}"
        );
    }

    #[test]
    fn mask_patterns_are_regexes_that_match_something() {
        let r = Registry::from_toml_str(
            "[rep]\nexec = [\"/bin/true\"]\nmask = [\"ghp_[A-Za-z0-9]{8,}\"]",
            STALE,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(r.get("rep").map(|d| d.mask.len()), Some(1));
        let e = errors("[rep]\nexec = [\"/bin/true\"]\nmask = [\"(\", \"x*\"]");
        assert!(
            e.iter()
                .any(|m| m.contains("commands.rep.mask") && m.contains("not a regex"))
                && e.iter().any(|m| m.contains("matches the empty string")),
            "{e:?}"
        );
    }

    #[test]
    fn a_secret_too_short_to_mask_is_refused_naming_the_variable() {
        // Set for this test alone; no other test reads these names.
        std::env::set_var("SHEETQ_TEST_SHORT_SECRET", "abc123");
        std::env::set_var("SHEETQ_TEST_LONG_SECRET", "abcdef123456");
        let mut errors = Vec::new();
        let env = vec![
            "SHEETQ_TEST_SHORT_SECRET".to_string(),
            "SHEETQ_TEST_LONG_SECRET".to_string(),
        ];
        let list = toml::Value::Array(vec![
            "SHEETQ_TEST_SHORT_SECRET".into(),
            "SHEETQ_TEST_LONG_SECRET".into(),
            "NOT_PASSED".into(),
        ]);
        check_secrets("commands.report", &list, &env, &mut errors);
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors[0].contains("SHEETQ_TEST_SHORT_SECRET has 6 characters"),
            "{errors:#?}"
        );
        assert!(errors[1].contains("not among its env"), "{errors:#?}");
    }

    #[test]
    fn no_command_is_handed_where_the_key_is() {
        let mut errors = Vec::new();
        let list = toml::Value::Array(vec![
            "GOOGLE_APPLICATION_CREDENTIALS".into(),
            "CREDENTIALS_DIRECTORY".into(),
            "HOME".into(),
        ]);
        assert_eq!(parse_env("commands.report", &list, &mut errors), ["HOME"]);
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors.iter().all(|e| e.contains("service account key")),
            "{errors:#?}"
        );
    }
}
