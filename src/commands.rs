//! Commands: the registry of what a queue row's `command` may name, the checks a job's
//! `argsJSON` must pass before anything runs, and the [`Runner`] that runs a prepared job
//! (built-ins in process, `exec` commands as a child process group) and turns what happened
//! into an [`Outcome`].
//!
//! The daemon's `sheetq.toml` is the only place a command is defined (docs/design.md §5). A sheet
//! editor chooses a command *name* and its arguments; [`Registry::prepare`] refuses anything
//! not configured, and sheet values only ever reach a program as data: JSON on stdin,
//! `SHEETQ_*` environment variables, or whole-text substitution into configured argv
//! elements, where a value is never an option nor a control character ([`argv`]). No shell
//! ever sees a value from the sheet.
//!
//! - [`config`]: the `[commands.NAME]` tables, validated all at once.
//! - [`argv`]: `exec` argv templates and the rules a placeholder value passes to go there
//!   (pure).
//! - [`schema`]: `args_required` and the supported subset of JSON Schema.
//! - [`output`]: bounded capture of a child's output and the `exec` result protocol (pure).
//! - [`runner`]: running prepared jobs, the heavy-job gate, timeouts and cancellation.
//! - `process`: spawning a child in its own process group that cannot outlive the daemon.
//! - [`reaper`]: `sheetq run` as the child subreaper, reaping what commands leave behind.

pub mod argv;
pub mod config;
pub mod mask;
pub mod output;
mod process;
pub mod reaper;
pub mod runner;
pub mod schema;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use config::{Builtin, CommandDef, CommandKind};
pub use process::SAFE_PATH;
pub use runner::{Opened, PanelOpener};

use crate::panel::catalog::{look_alike_message, Asked, Catalog, Refused, PANELS_COMMAND};
use crate::sheet_text;
pub use runner::{
    is_retry_note, Outcome, OutcomeStatus, RetryNote, Retrying, Runner, RETRY_NOTE_PREFIX,
};

pub use crate::queue::CONTINUATION_FLAG;

/// Upper bound of `args.seconds` for the built-in `sleep`.
pub const SLEEP_MAX_SECONDS: f64 = 3600.0;

/// The most characters a cell holds (Sheets limit); also the limit for `argsJSON` and for the
/// `continue` args a command hands back, since those become a cell of a new queue row.
pub const CELL_MAX_CHARS: usize = 50_000;

/// One claimed queue row, as the daemon read it. Every field is sheet data: untrusted text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobSpec {
    pub job_id: String,
    pub target: String,
    pub function: String,
    /// Requester e-mail; may be empty (docs/design.md §1.1).
    pub requester: String,
    pub command: String,
    /// The raw `argsJSON` cell; empty (or only whitespace) means `{}`.
    pub args_json: String,
    /// The システムフラグ cell split on commas, e.g. `["heavy", "continuation"]`.
    pub flags: Vec<String>,
    pub panel_sheet: String,
    pub panel_row: Option<u32>,
    /// The 承認 cell: the approvals a function with `approvers` runs on.
    pub approvals: String,
    /// Whether sheetq's own mark on the queue vouches for this row as a step a command
    /// handed back (`provenance`): set by the daemon from what Google let only sheetq's
    /// project write, never from the システムフラグ cell.
    pub continuation: bool,
    /// Whether the job was approved with its rollout, whose row the daemon checked for its
    /// approvals (`daemon/rollouts.rs`): its own 承認 cell is not asked for, its args are
    /// checked as any press's.
    pub approved_with_rollout: bool,
}

impl JobSpec {
    /// Whether the row's システムフラグ says it is a continuation step, in any form that
    /// looks like the word (`sheet_text::skeleton`): a claim that only [`JobSpec::continuation`]
    /// can back.
    pub fn claims_continuation(&self) -> bool {
        self.flags
            .iter()
            .any(|f| sheet_text::skeleton(f) == CONTINUATION_FLAG)
    }
}

/// Why a job cannot fill command `command`'s argv: an `{input.NAME}` it puts there that the
/// job's admitted `args` lack (its function has no such input, or it has no value and no
/// default). An argv element is never left with a hole.
fn missing_input(
    command: &str,
    argv: &[argv::ArgTemplate],
    spec: &JobSpec,
    args: &serde_json::Map<String, serde_json::Value>,
) -> Option<String> {
    argv.iter()
        .flat_map(argv::ArgTemplate::placeholders)
        .find(|p| matches!(p, argv::Placeholder::Input(_)) && p.value(spec, args).is_none())
        .map(|p| {
            format!(
                "command \"{command}\" puts {p} into argv, but function {} gave it no value (no such input, or one without a value or default), so nothing ran",
                sheet_text::shown(&spec.function)
            )
        })
}

/// What kind of rule refused a job: the `reason` label of `sheetq_jobs_refused_total`, and
/// the `reason` field of the log line every refusal gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Refusal {
    /// The row names a command `sheetq.toml` does not configure, or none.
    UnknownCommand,
    /// The row's function is not among `[[functions]]`, or runs another command there.
    Function,
    /// `argsJSON` is not a JSON object, does not fit the command's checks, or differs from the
    /// function's args in the config.
    Args,
    /// The target is not among `[[targets]]`.
    Target,
    /// A value put into argv through a placeholder could be read as an option, holds a
    /// control character, is too long, or does not match the command's pattern.
    Placeholder,
    /// The requester is not allowed to run the function.
    Requester,
    /// The row cannot be read as a job at all.
    Unreadable,
    /// The function needs approvals the job does not have.
    Approval,
    /// A command, function or target only looks like a configured one (a hidden, control
    /// or format character, a fullwidth letter, another case: `sheet_text`).
    LookAlike,
    /// The row says it is a continuation step, but no mark of sheetq's vouches for it.
    Unmarked,
    /// A tick (▶, 承認, ■) of a function that names who may make it, in a cell the
    /// spreadsheet does not guard for them (`crate::panel::guard`): it proves nothing of who made it.
    Unguarded,
}

impl Refusal {
    /// Every reason, in the order metrics list them.
    pub const ALL: [Refusal; 11] = [
        Refusal::UnknownCommand,
        Refusal::Function,
        Refusal::Args,
        Refusal::Target,
        Refusal::Placeholder,
        Refusal::Requester,
        Refusal::Unreadable,
        Refusal::Approval,
        Refusal::LookAlike,
        Refusal::Unmarked,
        Refusal::Unguarded,
    ];

    /// The label value, e.g. `unknown_command`.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::UnknownCommand => "unknown_command",
            Refusal::Function => "function",
            Refusal::Args => "args",
            Refusal::Target => "target",
            Refusal::Placeholder => "placeholder",
            Refusal::Requester => "requester",
            Refusal::Unreadable => "unreadable",
            Refusal::Approval => "approval",
            Refusal::LookAlike => "lookalike",
            Refusal::Unmarked => "unmarked",
            Refusal::Unguarded => "unguarded",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a job was refused before anything ran. `message` names the problem and is written to
/// the row's メッセージ cell as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct JobRejected {
    pub reason: Refusal,
    pub message: String,
}

impl JobRejected {
    pub(crate) fn new(reason: Refusal, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: output::limit_message(&message.into()),
        }
    }

    /// The outcome to record for a refused job: `Failed` (エラー), nothing ran.
    pub fn into_outcome(self) -> Outcome {
        Outcome {
            status: OutcomeStatus::Failed,
            message: self.message,
            url: None,
            continue_args: None,
            exit_code: None,
            attempts: 1,
            duration: Duration::ZERO,
        }
    }
}

/// A job that passed every check and is ready for [`Runner::run`]: the command's definition,
/// the parsed args, and the concrete plan (argv already substituted).
#[derive(Debug, Clone)]
pub struct PreparedJob {
    spec: JobSpec,
    /// Heavy by the config (the command, or the function's flags).
    heavy: bool,
    args: serde_json::Map<String, serde_json::Value>,
    def: Arc<CommandDef>,
    plan: Plan,
    /// Its output stays on this machine (`output = "private"`, its command's or function's).
    private_output: bool,
}

/// What running a prepared job means, decided by [`Registry::prepare`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    Sleep(Duration),
    Echo,
    Exec {
        argv: Vec<String>,
    },
    /// Create or show the panels of these targets (a tick on the index).
    Panels(Vec<String>),
}

impl PreparedJob {
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    pub fn job_id(&self) -> &str {
        &self.spec.job_id
    }

    /// The configured command name (as in `sheetq.toml`).
    pub fn command(&self) -> &str {
        &self.def.name
    }

    /// The parsed `argsJSON` object.
    pub fn args(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.args
    }

    /// The argv an `exec` command will be started with; `None` for a built-in.
    pub fn argv(&self) -> Option<&[String]> {
        match &self.plan {
            Plan::Exec { argv } => Some(argv),
            _ => None,
        }
    }

    /// Heavy if the command is configured `heavy`, or the row carries the `heavy` flag: a
    /// sheet can make a job more careful, never less.
    pub fn is_heavy(&self) -> bool {
        self.heavy || self.spec.flags.iter().any(|f| f.trim() == "heavy")
    }

    pub fn timeout(&self) -> Duration {
        self.def.timeout
    }

    /// Whether its output stays on this machine (`output = "private"`).
    pub fn private_output(&self) -> bool {
        self.private_output
    }

    pub(crate) fn def(&self) -> &CommandDef {
        &self.def
    }

    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }
}

/// Every configured command, by name. Built once at startup by [`Registry::from_toml`].
#[derive(Debug, Clone)]
pub struct Registry {
    commands: BTreeMap<String, Arc<CommandDef>>,
    /// The panels' functions: when it lists any, a job must name one of them.
    catalog: Arc<Catalog>,
    /// The built-in command of the panel jobs ([`PANELS_COMMAND`]), always available.
    panels: Arc<CommandDef>,
    /// Whether only sheetq's accounts and the owner can write the queue: a continuation
    /// step's args (which its command handed back) are then trusted as they are.
    queue_protected: bool,
    /// Commands the config names but could not define (`check` reports their faults once;
    /// [`Registry::from_toml_partly`]): configured, though nothing runs them.
    broken: Arc<std::collections::BTreeSet<String>>,
}

/// A command's name as the config's errors write it after `commands.` (quoted unless bare).
pub fn config_key_text(name: &str) -> String {
    config::key_text(name)
}

impl Default for Registry {
    /// No commands configured, no functions listed (only the built-in panel jobs).
    fn default() -> Self {
        Registry {
            commands: BTreeMap::new(),
            catalog: Arc::default(),
            panels: Arc::new(config::panels_def(Duration::from_secs(15 * 60))),
            queue_protected: false,
            broken: Arc::default(),
        }
    }
}

impl Registry {
    /// Builds the registry from the raw `[commands]` table of `sheetq.toml`. Returns every
    /// problem at once, each naming the command, the key and the fix.
    pub fn from_toml(table: &toml::Table, stale_after: Duration) -> Result<Registry, Vec<String>> {
        match Registry::from_toml_partly(table, stale_after) {
            (registry, errors) if errors.is_empty() => Ok(registry),
            (_, errors) => Err(errors),
        }
    }

    /// [`Registry::from_toml`] for `check`, which reports every fault: the commands that
    /// parse, the errors of those that do not, and those names kept as configured (so one
    /// typo inside `[commands.X]` is one error, not also "X is not configured" on every
    /// row and panel that names X).
    pub fn from_toml_partly(table: &toml::Table, stale_after: Duration) -> (Registry, Vec<String>) {
        let (defs, errors, broken) = config::parse_commands_partly(table, stale_after);
        let registry = Registry {
            commands: defs
                .into_iter()
                .map(|d| (d.name.clone(), Arc::new(d)))
                .collect(),
            catalog: Arc::default(),
            panels: Arc::new(config::panels_def(stale_after)),
            queue_protected: false,
            broken: Arc::new(broken.into_iter().collect()),
        };
        (registry, errors)
    }

    /// Whether the config names `command`: defined, or named with a fault `check` reports
    /// on its own.
    pub fn is_configured(&self, command: &str) -> bool {
        self.get(command).is_some() || self.broken.contains(sheet_text::trim(command))
    }

    /// This registry, refusing jobs whose function `catalog` does not list (when it lists
    /// any): see [`Catalog::refuse`].
    pub fn with_catalog(mut self, catalog: Catalog) -> Registry {
        self.catalog = Arc::new(catalog);
        self
    }

    /// This registry, knowing whether the queue is protected (only sheetq's accounts and the
    /// owner write it), as the daemon read it at start or reload.
    pub fn with_queue_protected(mut self, protected: bool) -> Registry {
        self.queue_protected = protected;
        self
    }

    /// Whether the queue was found protected ([`Registry::with_queue_protected`]).
    pub fn queue_protected(&self) -> bool {
        self.queue_protected
    }

    /// The functions and targets jobs are checked against.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Parses `toml_text` as the body of a `[commands]` table; for tests and tools.
    pub fn from_toml_str(toml_text: &str, stale_after: Duration) -> Result<Registry, Vec<String>> {
        let table: toml::Table = toml_text
            .parse()
            .map_err(|e: toml::de::Error| vec![format!("commands: not valid TOML: {e}")])?;
        Registry::from_toml(&table, stale_after)
    }

    /// Configured command names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.commands.keys().map(String::as_str)
    }

    pub fn get(&self, command: &str) -> Option<&CommandDef> {
        self.lookup(command).map(|d| d.as_ref())
    }

    fn lookup(&self, command: &str) -> Option<&Arc<CommandDef>> {
        match sheet_text::trim(command) {
            PANELS_COMMAND => Some(&self.panels),
            name => self.commands.get(name),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// What on this machine would stop a configured command from starting: an `exec`
    /// program that is not an executable file (or not found on `PATH`), a `workdir` that
    /// is not a directory. Checked by `sheetq check` on the machine the daemon runs on.
    pub fn host_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for def in self.commands.values() {
            if let CommandKind::Exec { argv } = &def.kind {
                let program = argv
                    .first()
                    .map(|t| t.render(&JobSpec::default(), &serde_json::Map::new()))
                    .unwrap_or_default();
                if let Err(why) = process::find_program(&program, &process::job_path(&def.env)) {
                    out.push(format!("commands.{}: program {program:?} {why}", def.name));
                }
            }
            if let Some(dir) = &def.workdir {
                if !dir.is_dir() {
                    out.push(format!(
                        "commands.{}: workdir {} is not a directory on this machine; create it or fix the path",
                        def.name,
                        dir.display()
                    ));
                }
            }
        }
        out
    }

    /// Problems of the config's `[[functions]]` against this registry: each function's
    /// command must be configured and its args must pass that command's checks, as a press
    /// would.
    pub fn check_functions(&self, catalog: &Catalog) -> Vec<String> {
        // The command and its args alone: who presses, and on which target, is the press's.
        let commands_only = Registry {
            catalog: Arc::default(),
            ..self.clone()
        };
        catalog
            .functions
            .iter()
            .enumerate()
            .filter(|(_, f)| !self.broken.contains(sheet_text::trim(&f.command)))
            .filter_map(|(i, f)| {
                // An `{input.NAME}` of its command's argv that it has no input for: every
                // press would be refused.
                if let Some(missing) = self.inputs_not_declared(f) {
                    return Some(format!(
                        "[[functions]] entry {} (\"{}\"): command \"{}\" puts {missing} into argv; add an input {} to the function's inputs, or use another command",
                        i + 1,
                        f.label,
                        f.command,
                        missing.name().trim_start_matches(argv::INPUT_PREFIX)
                    ));
                }
                // Its args as a job with its inputs' defaults carries them: an input the
                // command's args_schema does not take is said here, not at the first press.
                let mut args = match serde_json::to_value(&f.args) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => serde_json::Map::new(),
                };
                for d in &f.inputs {
                    if let Some(Ok(v)) = d.default_value() {
                        args.insert(d.name.clone(), v);
                    }
                }
                let spec = JobSpec {
                    command: f.command.clone(),
                    args_json: serde_json::Value::Object(args).to_string(),
                    flags: f.flags.clone(),
                    function: f.label.clone(),
                    ..JobSpec::default()
                };
                let refused = commands_only.prepare(&spec).err()?;
                let message = match refused.reason {
                    // A press brings the target, requester and jobId; only the label is
                    // known here.
                    Refusal::Placeholder => self.unfit_label(&spec)?,
                    _ => refused.message,
                };
                Some(format!(
                    "[[functions]] entry {} (\"{}\"): {message}",
                    i + 1,
                    f.label
                ))
            })
            .collect()
    }

    /// The first `{input.NAME}` of `f`'s command's argv that `f` declares no input for.
    fn inputs_not_declared(
        &self,
        f: &crate::panel::catalog::FunctionDef,
    ) -> Option<argv::Placeholder> {
        let def = self.get(&f.command)?;
        let CommandKind::Exec { argv: templates } = &def.kind else {
            return None;
        };
        templates
            .iter()
            .flat_map(argv::ArgTemplate::placeholders)
            .find(|p| match p {
                argv::Placeholder::Input(name) => !f.inputs.iter().any(|d| &d.name == name),
                _ => false,
            })
            .cloned()
    }

    /// Why the function label of `spec` cannot go where its command's argv puts `{function}`.
    fn unfit_label(&self, spec: &JobSpec) -> Option<String> {
        let def = self.get(&spec.command)?;
        let CommandKind::Exec { argv: templates } = &def.kind else {
            return None;
        };
        argv::unfit(&def.name, templates, &def.patterns, |p| {
            (*p == argv::Placeholder::Function)
                .then_some(std::borrow::Cow::Borrowed(spec.function.as_str()))
        })
    }

    /// Every `exec` element that puts a placeholder where its program reads options (it
    /// begins the element, and no `--` comes before it), one line per command and element
    /// saying how to write it safely. Jobs are safe all the same, since a value starting with
    /// `-` is refused there; `sheetq check` warns, so the argv can be written to take any
    /// value.
    pub fn option_positions(&self) -> Vec<String> {
        self.commands
            .values()
            .flat_map(|def| match &def.kind {
                CommandKind::Exec { argv: templates } => {
                    argv::option_warnings(&def.name, templates)
                }
                CommandKind::Builtin(_) => Vec::new(),
            })
            .collect()
    }

    /// One warning per `env` variable whose value here is too short to mask (`mask`): a
    /// command could print it, and it would show.
    pub fn unmasked_env(&self) -> Vec<String> {
        self.commands
            .values()
            .flat_map(|def| {
                mask::too_short_to_mask(&def.env)
                    .into_iter()
                    .map(|n| {
                        format!(
                            "commands.{}.env: the value of {n} has fewer than {} characters, too few to mask in the job's output; a secret that short would show wherever its output goes",
                            def.name,
                            mask::MIN_CHARS
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Whether a job of `function` running `command` keeps its output on this machine:
    /// `output = "private"` on the command, or on the function in `[[functions]]`.
    pub fn keeps_output_private(&self, command: &str, function: &str) -> bool {
        self.lookup(command).is_some_and(|d| d.private_output)
            || self
                .catalog
                .function(function)
                .is_some_and(|f| f.output.as_deref() == Some("private"))
    }

    /// How many times `command` is tried again after a failure (`retries`); `None` for a
    /// command not configured.
    pub fn retries_of(&self, command: &str) -> Option<u32> {
        self.lookup(command).map(|d| d.retry.retries)
    }

    /// Whether `command` is configured `heavy`; unknown commands are not (they never run).
    pub fn is_heavy(&self, command: &str) -> bool {
        self.get(command).is_some_and(|d| d.heavy)
    }

    /// Whether a job of `function` running `command` is heavy by the config: its command, or
    /// its function's `flags` in `[[functions]]` (the panel's copy of them is the sheet's).
    pub fn is_heavy_job(&self, command: &str, function: &str) -> bool {
        self.is_heavy(command)
            || self
                .catalog
                .function(function)
                .is_some_and(|f| f.flags.iter().any(|x| x.trim() == "heavy"))
    }

    /// A runner for this registry's jobs. Clones share its heavy-job gate, so make one per
    /// daemon.
    pub fn runner(&self) -> Runner {
        Runner::new(self)
    }

    /// Checks a claimed row against the configuration: the command must be configured, the
    /// args must be a JSON object that passes the command's checks, and the values must be
    /// representable as argv/environment text. Nothing is executed here.
    pub fn prepare(&self, spec: &JobSpec) -> Result<PreparedJob, JobRejected> {
        self.prepare_with(spec, None)
    }

    /// [`Registry::prepare`] with the `choices_from` ranges as the daemon read them: a
    /// choice from a range must be among its values.
    pub fn prepare_with(
        &self,
        spec: &JobSpec,
        listed: Option<&crate::inputs::Listed>,
    ) -> Result<PreparedJob, JobRejected> {
        if let Some(why) = self.look_alike(spec) {
            return Err(JobRejected::new(Refusal::LookAlike, why));
        }
        if !spec.continuation && spec.claims_continuation() {
            return Err(JobRejected::new(
                Refusal::Unmarked,
                format!(
                    "the row's システムフラグ says {CONTINUATION_FLAG}, but sheetq did not write it: no mark of \
                     sheetq's own vouches for it on the queue, so nothing ran; only a command's \
                     `continue` makes a continuation step"
                ),
            ));
        }
        let name = sheet_text::trim(&spec.command);
        let Some(def) = self.lookup(name) else {
            return Err(JobRejected::new(
                Refusal::UnknownCommand,
                self.unknown_command_message(name),
            ));
        };
        let sheet_args = parse_args(&spec.args_json)?;
        let args = self.admit(spec, sheet_args, listed)?;
        if matches!(def.kind, CommandKind::Exec { .. }) && env_has_nul(spec) {
            return Err(JobRejected::new(
                Refusal::Placeholder,
                "a job field (target, function, requester, jobId, panel sheet or flags) \
                 contains a NUL character, which cannot be passed to a program",
            ));
        }
        let mut problems = def.checks.check(&args);
        let plan = match &def.kind {
            CommandKind::Builtin(Builtin::Sleep) => match sleep_seconds(&args, def.timeout) {
                Ok(d) => Some(Plan::Sleep(d)),
                Err(p) => {
                    problems.push(p);
                    None
                }
            },
            CommandKind::Builtin(Builtin::Echo) => Some(Plan::Echo),
            CommandKind::Builtin(Builtin::Panels) => match panel_labels(&args) {
                Ok(labels) => {
                    // A panel only for the targets that may run: on the index, people may
                    // write any label.
                    if let Some(why) = labels.iter().find_map(|l| self.catalog.refuse_target(l)) {
                        return Err(JobRejected::new(Refusal::Target, why));
                    }
                    Some(Plan::Panels(labels))
                }
                Err(p) => {
                    problems.push(p);
                    None
                }
            },
            CommandKind::Exec { argv: templates } => {
                // After the args checks, so that `check_functions`, which knows no target
                // yet, still hears of bad args.
                if problems.is_empty() {
                    if let Some(why) = missing_input(&def.name, templates, spec, &args) {
                        return Err(JobRejected::new(Refusal::Placeholder, why));
                    }
                    let value = |p: &argv::Placeholder| p.value(spec, &args);
                    if let Some(why) = argv::unfit(&def.name, templates, &def.patterns, value) {
                        return Err(JobRejected::new(Refusal::Placeholder, why));
                    }
                }
                let argv = templates.iter().map(|t| t.render(spec, &args)).collect();
                Some(Plan::Exec { argv })
            }
        };
        match plan {
            Some(plan) if problems.is_empty() => Ok(PreparedJob {
                heavy: self.is_heavy_job(&def.name, &spec.function),
                spec: spec.clone(),
                args,
                def: Arc::clone(def),
                plan,
                private_output: self.keeps_output_private(&def.name, &spec.function),
            }),
            _ => Err(JobRejected::new(
                Refusal::Args,
                format!(
                    "argsJSON does not fit command \"{}\": {}",
                    def.name,
                    problems.join("; ")
                ),
            )),
        }
    }

    /// The args a job runs with, by the catalog's rules: its function's args from the
    /// config (plus what people may set), or the sheet's when no functions are configured.
    /// Refuses a job whose function, target, 依頼者 or args the config does not allow.
    fn admit(
        &self,
        spec: &JobSpec,
        sheet_args: serde_json::Map<String, serde_json::Value>,
        listed: Option<&crate::inputs::Listed>,
    ) -> Result<serde_json::Map<String, serde_json::Value>, JobRejected> {
        let asked = Asked {
            function: &spec.function,
            command: &spec.command,
            target: &spec.target,
            requester: &spec.requester,
            args: &sheet_args,
            args_trusted: self.queue_protected && spec.continuation,
            approved_elsewhere: self.queue_protected && spec.approved_with_rollout,
            requester_trusted: self.queue_protected,
            job_id: &spec.job_id,
            approvals: &spec.approvals,
            listed,
        };
        match self.catalog.admit(&asked) {
            Ok(Some(args)) => Ok(args),
            Ok(None) => Ok(sheet_args),
            Err(Refused::Function(m)) => Err(JobRejected::new(Refusal::Function, m)),
            Err(Refused::Target(m)) => Err(JobRejected::new(Refusal::Target, m)),
            Err(Refused::Requester(m)) => Err(JobRejected::new(Refusal::Requester, m)),
            Err(Refused::Args(m)) => Err(JobRejected::new(Refusal::Args, m)),
            Err(Refused::Approval(m)) => Err(JobRejected::new(Refusal::Approval, m)),
        }
    }

    /// Why the job's command, function or target only looks like one of the config's
    /// (`sheet_text`): refused before anything is matched, so that no two readings of one
    /// value (this one's, the intake's) can disagree about what it names.
    fn look_alike(&self, spec: &JobSpec) -> Option<String> {
        let commands = self
            .commands
            .keys()
            .map(String::as_str)
            .chain([PANELS_COMMAND]);
        if let Some((name, how)) = sheet_text::look_alike(&spec.command, commands) {
            return Some(look_alike_message("command", &spec.command, name, &how));
        }
        self.catalog.look_alike(&spec.function, &spec.target)
    }

    fn unknown_command_message(&self, name: &str) -> String {
        let configured: Vec<&str> = self.names().collect();
        let configured = if configured.is_empty() {
            "none".to_string()
        } else {
            configured.join(", ")
        };
        if name.is_empty() {
            format!("the command cell is empty (configured: {configured})")
        } else {
            format!(
                "command {} is not configured in sheetq.toml (configured: {configured})",
                crate::panel::catalog::shown(name)
            )
        }
    }
}

/// The targets of a panel job: `args.open`, a non-empty list of labels.
fn panel_labels(args: &serde_json::Map<String, serde_json::Value>) -> Result<Vec<String>, String> {
    let labels: Option<Vec<String>> = args.get("open").and_then(|v| v.as_array()).and_then(|a| {
        a.iter()
            .map(|l| l.as_str().map(|s| s.trim().to_string()))
            .collect()
    });
    match labels {
        Some(l) if l.iter().any(|s| s.chars().any(argv::disguises)) => Err(
            "args.open holds a label with a control, line-break or text-direction character; \
             a label names a sheet and must read as it is"
                .into(),
        ),
        Some(l) if l.iter().any(|s| s.chars().count() > argv::MAX_VALUE_CHARS) => Err(format!(
            "args.open holds a label longer than {} characters",
            argv::MAX_VALUE_CHARS
        )),
        Some(l) if !l.is_empty() && l.iter().all(|s| !s.is_empty()) => Ok(l),
        _ => Err(
            "args.open must be a list of target labels, e.g. {\"open\": [\"サーバーA\"]}".into(),
        ),
    }
}

/// Parses the `argsJSON` cell: empty means `{}`, anything else must be a JSON object.
fn parse_args(raw: &str) -> Result<serde_json::Map<String, serde_json::Value>, JobRejected> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(other) => Err(JobRejected::new(
            Refusal::Args,
            format!(
                "argsJSON must be a JSON object like {{\"key\": \"value\"}}, found {}",
                schema::describe_type(&other)
            ),
        )),
        Err(e) => Err(JobRejected::new(
            Refusal::Args,
            format!("argsJSON is not valid JSON: {e}"),
        )),
    }
}

/// `args.seconds` for the built-in `sleep`: default 1, a number in `0..=3600` and shorter
/// than the command's timeout (a sleep that cannot finish is a mistake in the args).
fn sleep_seconds(
    args: &serde_json::Map<String, serde_json::Value>,
    timeout: Duration,
) -> Result<Duration, String> {
    let secs = match args.get("seconds") {
        None | Some(serde_json::Value::Null) => 1.0,
        Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(other) => {
            return Err(format!(
                "args.seconds must be a number of seconds, found {}",
                schema::describe_value(other)
            ))
        }
    };
    if !(0.0..=SLEEP_MAX_SECONDS).contains(&secs) {
        return Err(format!(
            "args.seconds must be between 0 and {SLEEP_MAX_SECONDS}, found {secs}"
        ));
    }
    let d = Duration::from_secs_f64(secs);
    if d >= timeout {
        return Err(format!(
            "args.seconds = {secs} must be shorter than the command's timeout ({})",
            humantime::format_duration(timeout)
        ));
    }
    Ok(d)
}

fn env_has_nul(spec: &JobSpec) -> bool {
    [
        &spec.job_id,
        &spec.target,
        &spec.function,
        &spec.requester,
        &spec.command,
        &spec.args_json,
        &spec.panel_sheet,
    ]
    .iter()
    .any(|s| s.contains('\0'))
        || spec.flags.iter().any(|f| f.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALE: Duration = Duration::from_secs(15 * 60);

    fn registry() -> Registry {
        Registry::from_toml_str(
            r#"
            [sleep]
            builtin = "sleep"
            [echo]
            builtin = "echo"
            [report]
            exec = ["/opt/tools/report", "--target", "{target}", "--who={requester}"]
            timeout = "10m"
            heavy = true
            args_required = ["month"]
            "#,
            STALE,
        )
        .unwrap()
    }

    fn catalog(text: &str) -> Catalog {
        #[derive(serde::Deserialize)]
        struct Raw {
            functions: Vec<crate::panel::catalog::FunctionDef>,
            #[serde(default)]
            targets: Vec<crate::panel::catalog::TargetDef>,
        }
        let raw: Raw = toml::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        Catalog {
            functions: raw.functions,
            targets: raw.targets,
            ..Catalog::default()
        }
    }

    #[test]
    fn functions_whose_command_is_configured_and_args_pass_have_no_problem() {
        let c = catalog(
            "[[functions]]\nlabel = \"再起動\"\ncommand = \"sleep\"\nargs = { seconds = 5 }\n\
             [[functions]]\nlabel = \"確認\"\ncommand = \"echo\"",
        );
        assert_eq!(registry().check_functions(&c), Vec::<String>::new());
    }

    #[test]
    fn a_function_with_an_unknown_command_or_bad_args_is_named() {
        let c = catalog(
            "[[functions]]\nlabel = \"A\"\ncommand = \"missing\"\n\
             [[functions]]\nlabel = \"B\"\ncommand = \"sleep\"\nargs = { seconds = \"five\" }",
        );
        let problems = registry().check_functions(&c);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("(\"A\")")
                && problems[0].contains("\"missing\" is not configured"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].contains("(\"B\")") && problems[1].contains("seconds"),
            "{}",
            problems[1]
        );
    }

    #[test]
    fn an_input_placeholder_puts_the_admitted_value_into_argv_under_every_placeholder_rule() {
        let r = Registry::from_toml_str(
            r#"
            [deploy]
            exec = ["/opt/deploy", "--version", "{input.version}", "--dry-run={input.dry_run}"]
            placeholder_patterns = { "input.version" = "[0-9][0-9.]*" }
            [early]
            exec = ["/opt/deploy", "{input.version}"]
            "#,
            STALE,
        )
        .unwrap_or_else(|e| panic!("{e:#?}"));
        let functions = r#"
            [[functions]]
            label = "デプロイ"
            command = "deploy"
            inputs = [{ name = "version", type = "text" }, { name = "dry_run", type = "bool", default = true }]
            [[functions]]
            label = "早い"
            command = "early"
            inputs = [{ name = "version", type = "text" }]
            [[functions]]
            label = "入力なし"
            command = "deploy"
            "#;
        let r = r.with_catalog(catalog(functions));
        let press = |function: &str, command: &str, args: &str| JobSpec {
            function: function.into(),
            ..spec(command, args)
        };
        let job = r
            .prepare(&press("デプロイ", "deploy", r#"{"version":"1.2.4"}"#))
            .unwrap_or_else(|e| panic!("a version the pattern takes runs: {e}"));
        assert_eq!(
            job.argv(),
            Some(
                &[
                    "/opt/deploy".to_string(),
                    "--version".into(),
                    "1.2.4".into(),
                    "--dry-run=true".into()
                ][..]
            ),
            "the value as admitted, the default filled in"
        );
        let refused = |function: &str, command: &str, args: &str| {
            r.prepare(&press(function, command, args))
                .err()
                .map(|e| (e.reason, e.message))
                .unwrap_or_else(|| panic!("{function} {args} must be refused"))
        };
        let (reason, why) = refused("デプロイ", "deploy", r#"{"version":"1.2.x"}"#);
        assert_eq!(reason, Refusal::Placeholder);
        assert!(why.contains("placeholder_patterns.input.version"), "{why}");
        let (_, why) = refused("早い", "early", r#"{"version":"-oProxyCommand=id"}"#);
        assert!(why.contains("starts with \"-\""), "never an option: {why}");
        let (_, why) = refused("早い", "early", r#"{"version":"a\nb"}"#);
        assert!(why.contains("control"), "no controls: {why}");
        let (_, why) = refused("入力なし", "deploy", "{}");
        assert!(
            why.contains("{input.version}") && why.contains("nothing ran"),
            "a function without the input cannot fill the hole: {why}"
        );
        let problems = r.check_functions(&catalog(functions));
        assert!(
            problems.len() == 1
                && problems[0].contains("(\"入力なし\")")
                && problems[0].contains("add an input version"),
            "check names the function that lacks the input: {problems:?}"
        );
    }

    fn spec(command: &str, args: &str) -> JobSpec {
        JobSpec {
            job_id: "j-1".into(),
            target: "A社".into(),
            function: "月次レポート".into(),
            requester: "a@example.com".into(),
            command: command.into(),
            args_json: args.into(),
            ..JobSpec::default()
        }
    }

    #[test]
    fn a_job_runs_its_functions_args_from_the_config_whatever_the_sheet_copy_says() {
        let r = registry().with_catalog(catalog(
            "[[functions]]\nlabel = \"月次レポート\"\ncommand = \"report\"\n\
             args = { month = \"2026-11\" }",
        ));
        let job = r
            .prepare(&spec("report", r#"{"month":"2026-11"}"#))
            .unwrap_or_else(|e| panic!("the config's own args must pass: {e}"));
        assert_eq!(job.args().get("month"), Some(&serde_json::json!("2026-11")));
        let forged = r
            .prepare(&spec("report", r#"{"month":"2026-11","path":"/etc"}"#))
            .unwrap_err();
        assert_eq!(forged.reason, Refusal::Args, "{forged}");
        assert!(forged.message.contains("\"path\""), "{forged}");
        let other = r.prepare(&spec("sleep", "{}")).unwrap_err();
        assert_eq!(other.reason, Refusal::Function, "{other}");
    }

    #[test]
    fn a_continuation_keeps_its_handed_back_args_only_when_marked_on_a_protected_queue() {
        let mut step = spec("report", r#"{"month":"2026-12"}"#);
        step.flags = vec![CONTINUATION_FLAG.into()];
        step.continuation = true;
        let r = registry().with_catalog(catalog(
            "[[functions]]\nlabel = \"月次レポート\"\ncommand = \"report\"\n\
             args = { month = \"2026-11\" }",
        ));
        let open = r.clone().prepare(&step).unwrap_err();
        assert_eq!(
            open.reason,
            Refusal::Args,
            "on an open queue a marked row could have been flipped back to 待機 by anyone"
        );
        let protected = r.with_queue_protected(true);
        let job = protected
            .prepare(&step)
            .unwrap_or_else(|e| panic!("a marked continuation on a protected queue must run: {e}"));
        assert_eq!(job.args().get("month"), Some(&serde_json::json!("2026-12")));
        step.continuation = false;
        let forged = protected.prepare(&step).unwrap_err();
        assert_eq!(
            forged.reason,
            Refusal::Unmarked,
            "the flag without sheetq's mark grants nothing: {forged}"
        );
    }

    #[test]
    fn a_flag_or_name_that_only_looks_like_the_configs_is_refused_never_matched() {
        let r = registry()
            .with_catalog(catalog(
                "[[functions]]\nlabel = \"月次レポート\"\ncommand = \"report\"\n\
                 args = { month = \"2026-11\" }\n\
                 [[targets]]\nlabel = \"A社\"",
            ))
            .with_queue_protected(true);
        let mut press = spec("report", r#"{"month":"2026-11"}"#);
        r.prepare(&press)
            .unwrap_or_else(|e| panic!("the press as the config has it runs: {e}"));
        for flag in [
            "continuation\u{85}",
            "\u{feff}continuation",
            "Continuation",
            "ｃontinuation",
        ] {
            press.flags = vec![flag.into()];
            let e = r.prepare(&press).unwrap_err();
            assert_eq!(e.reason, Refusal::Unmarked, "flag {flag:?}: {e}");
        }
        press.flags = Vec::new();
        for (field, value) in [
            ("command", "report\u{85}"),
            ("function", "月次レポート\u{200b}"),
            ("target", "A社\u{3000}"),
            ("target", "Ａ社"),
        ] {
            let mut asked = press.clone();
            match field {
                "command" => asked.command = value.into(),
                "function" => asked.function = value.into(),
                _ => asked.target = value.into(),
            }
            let e = r.prepare(&asked).unwrap_err();
            assert_eq!(e.reason, Refusal::LookAlike, "{field} {value:?}: {e}");
            assert!(
                e.message.contains("looks like") && e.message.contains("U+"),
                "the refusal names what it looks like and the character: {e}"
            );
        }
    }

    #[test]
    fn a_panel_job_opens_only_listed_targets() {
        let mut c = catalog("[[functions]]\nlabel = \"確認\"\ncommand = \"echo\"");
        c.targets = vec![crate::panel::catalog::TargetDef {
            label: "サーバーA".into(),
            position: String::new(),
            groups: Vec::new(),
        }];
        let r = registry().with_catalog(c);
        let mut open = spec(
            PANELS_COMMAND,
            r#"{"open":["サーバーA","-oProxyCommand=x"]}"#,
        );
        open.target = crate::panel::catalog::PANELS_TARGET.into();
        let refused = r.prepare(&open).unwrap_err();
        assert_eq!(refused.reason, Refusal::Target, "{refused}");
        open.args_json = r#"{"open":["サーバーA"]}"#.into();
        assert!(r.prepare(&open).is_ok());
    }

    #[test]
    fn unknown_command_names_it_and_lists_the_configured_ones() {
        let err = registry().prepare(&spec("rm", "")).unwrap_err();
        assert_eq!(
            err.message,
            "command \"rm\" is not configured in sheetq.toml (configured: echo, report, sleep)"
        );
    }

    #[test]
    fn empty_command_cell_is_named_as_such() {
        let err = registry().prepare(&spec("  ", "")).unwrap_err();
        assert!(
            err.message.starts_with("the command cell is empty"),
            "{err}"
        );
    }

    #[test]
    fn command_name_is_trimmed() {
        assert!(registry().prepare(&spec(" echo ", "")).is_ok());
    }

    #[test]
    fn empty_args_mean_an_empty_object() {
        let job = registry().prepare(&spec("echo", "  ")).unwrap();
        assert!(job.args().is_empty());
    }

    #[test]
    fn args_that_are_not_an_object_are_rejected() {
        let err = registry().prepare(&spec("echo", "[1,2]")).unwrap_err();
        assert!(err.message.contains("must be a JSON object"), "{err}");
        assert!(err.message.contains("an array"), "{err}");
        let err = registry().prepare(&spec("echo", "{oops")).unwrap_err();
        assert!(
            err.message.starts_with("argsJSON is not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn missing_required_key_is_named() {
        let err = registry().prepare(&spec("report", "{}")).unwrap_err();
        assert_eq!(
            err.message,
            "argsJSON does not fit command \"report\": args.month is required"
        );
    }

    #[test]
    fn placeholders_are_substituted_as_text_inside_one_element() {
        let mut s = spec("report", r#"{"month":"2026-11"}"#);
        s.target = "A社; rm -rf / $(x) `y`".into();
        s.requester = String::new();
        let job = registry().prepare(&s).unwrap();
        assert_eq!(
            job.argv().unwrap(),
            [
                "/opt/tools/report",
                "--target",
                "A社; rm -rf / $(x) `y`",
                "--who="
            ]
        );
    }

    #[test]
    fn sleep_seconds_defaults_and_bounds() {
        let r = registry();
        let job = r.prepare(&spec("sleep", "")).unwrap();
        assert_eq!(job.plan(), &Plan::Sleep(Duration::from_secs(1)));
        let job = r.prepare(&spec("sleep", r#"{"seconds":0.25}"#)).unwrap();
        assert_eq!(job.plan(), &Plan::Sleep(Duration::from_millis(250)));
        for bad in [
            r#"{"seconds":-1}"#,
            r#"{"seconds":3601}"#,
            r#"{"seconds":"2"}"#,
        ] {
            let err = r.prepare(&spec("sleep", bad)).unwrap_err();
            assert!(err.message.contains("args.seconds"), "{bad}: {err}");
        }
    }

    #[test]
    fn sleep_longer_than_its_timeout_is_rejected() {
        let r =
            Registry::from_toml_str("[nap]\nbuiltin = \"sleep\"\ntimeout = \"2s\"", STALE).unwrap();
        let err = r.prepare(&spec("nap", r#"{"seconds":5}"#)).unwrap_err();
        assert!(
            err.message
                .contains("shorter than the command's timeout (2s)"),
            "{err}"
        );
    }

    #[test]
    fn heavy_comes_from_config_or_the_row_flag() {
        let r = registry();
        assert!(r.is_heavy("report"));
        assert!(!r.is_heavy("echo"));
        assert!(!r.is_heavy("nope"));
        let mut s = spec("echo", "");
        assert!(!r.prepare(&s).unwrap().is_heavy());
        s.flags = vec!["nightly".into(), " heavy".into()];
        assert!(r.prepare(&s).unwrap().is_heavy());
    }

    #[test]
    fn a_function_heavy_in_the_config_stays_heavy_whatever_its_row_flags_say() {
        let r = registry().with_catalog(catalog(
            "[[functions]]\nlabel = \"月次レポート\"\ncommand = \"echo\"\nflags = [\"heavy\"]",
        ));
        assert!(r.is_heavy_job("echo", "月次レポート"));
        let s = spec("echo", "");
        assert!(
            r.prepare(&s).unwrap().is_heavy(),
            "the row carries no heavy flag, the config's function does"
        );
    }

    /// A "check a server" button configured the usual way.
    fn uptime() -> Registry {
        Registry::from_toml_str(
            "[uptime]\nexec = [\"/usr/bin/ssh\", \"-o\", \"BatchMode=yes\", \"{target}\", \"uptime\"]",
            STALE,
        )
        .unwrap_or_else(|e| panic!("{e:#?}"))
    }

    #[test]
    fn a_target_that_would_be_an_option_is_refused_before_anything_runs() {
        let mut s = spec("uptime", "");
        s.target = "-oProxyCommand=sh -c 'id > /tmp/x'".into();
        let err = uptime().prepare(&s).unwrap_err();
        assert_eq!(err.reason, Refusal::Placeholder);
        assert!(
            err.message
                .contains("\"-oProxyCommand=sh -c 'id > /tmp/x'\"")
                && err.message.contains("reads options"),
            "the message names the value and the rule: {err}"
        );
        s.target = "web-1.example".into();
        let job = uptime().prepare(&s).unwrap();
        assert_eq!(
            job.argv().unwrap(),
            [
                "/usr/bin/ssh",
                "-o",
                "BatchMode=yes",
                "web-1.example",
                "uptime"
            ]
        );
    }

    #[test]
    fn a_placeholder_refusal_comes_after_the_args_checks() {
        let r = Registry::from_toml_str(
            "[r]\nexec = [\"/opt/r\", \"{target}\"]\nargs_required = [\"month\"]",
            STALE,
        )
        .unwrap();
        let mut s = spec("r", "{}");
        s.target = "-x".into();
        assert_eq!(r.prepare(&s).unwrap_err().reason, Refusal::Args);
        s.args_json = r#"{"month":"x"}"#.into();
        assert_eq!(r.prepare(&s).unwrap_err().reason, Refusal::Placeholder);
    }

    #[test]
    fn functions_are_not_judged_by_a_target_they_cannot_know_but_by_their_label() {
        let r = Registry::from_toml_str(
            r#"
            [uptime]
            exec = ["/usr/bin/ssh", "--", "{target}", "run", "{function}"]
            placeholder_patterns = { target = "[a-z0-9.-]+", function = "[a-z]+" }
            "#,
            STALE,
        )
        .unwrap();
        let c = catalog(
            "[[functions]]\nlabel = \"uptime\"\ncommand = \"uptime\"\n\
             [[functions]]\nlabel = \"稼働時間\"\ncommand = \"uptime\"",
        );
        let problems = r.check_functions(&c);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].starts_with("[[functions]] entry 2 (\"稼働時間\"): {function} value")
                && problems[0].contains("\"[a-z]+\""),
            "a label its command's pattern refuses is named; the empty target is not: {}",
            problems[0]
        );
    }

    #[test]
    fn option_positions_name_each_command_and_element() {
        let r = Registry::from_toml_str(
            r#"
            [uptime]
            exec = ["/usr/bin/ssh", "-o", "BatchMode=yes", "{target}", "uptime"]
            [safe]
            exec = ["/usr/bin/ssh", "-o", "BatchMode=yes", "--", "{target}", "uptime"]
            [report]
            exec = ["/opt/tools/report", "--target", "{target}", "--who={requester}"]
            [sleep]
            builtin = "sleep"
            "#,
            STALE,
        )
        .unwrap();
        let lines = r.option_positions();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].starts_with("commands.report.exec[2] = \"{target}\"")
                && lines[0].contains("\"--target={target}\""),
            "{}",
            lines[0]
        );
        assert!(
            lines[1]
                .starts_with("commands.uptime.exec[3] = \"{target}\" is where ssh reads options")
                && lines[1].contains("(\"--\", \"{target}\")"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn nul_in_a_field_is_rejected_for_exec() {
        let mut s = spec("report", r#"{"month":"x"}"#);
        s.target = "a\0b".into();
        let err = registry().prepare(&s).unwrap_err();
        assert!(err.message.contains("NUL"), "{err}");
    }
}
