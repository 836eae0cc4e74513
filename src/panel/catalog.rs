//! What panels offer and which targets get one: the config's `[[functions]]` and
//! `[[targets]]` and `hide_panels_after` (README, "Panels"), and what a job of the sheet may
//! run by them (docs/design.md §5.1). The config is the one source of the functions; panels
//! carry copies in their hidden columns, written by `sheetq panels sync`, and a job is
//! checked against the config, never trusted: its function must be one the config has, it
//! runs that function's command with that function's args (people set only the keys
//! `args_from_sheet` names), its target must be listed (unless `targets_from_index`), and
//! its 依頼者 must match the function's `allow`.
//!
//! Below the command registry: plain data and its own checks, importing nothing of
//! `commands` (which holds a catalog to refuse such jobs, and checks each function's command
//! and args: `Registry::check_functions`).

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

pub use crate::function::{allow_matches, FunctionDef, NO_REQUESTER};
use crate::protection::People;

/// The command of the jobs that create or show panels (a tick on the index). It is built
/// into the daemon and needs no `[commands]` entry.
pub const PANELS_COMMAND: &str = "sheetq.panels";
/// The target key of those jobs: one at a time, since each rewrites the index.
pub const PANELS_TARGET: &str = "▶パネル";
/// Their function label.
pub const PANELS_FUNCTION: &str = "パネルを開く";
/// How many panels one such job creates before it continues with the rest in a new step.
pub const PANELS_PER_STEP: usize = 10;

/// One target that gets a row on the index (`[[targets]]`). A person may add more by
/// writing a label into the index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDef {
    pub label: String,
    #[serde(default)]
    pub position: String,
    /// The groups it belongs to (`groups = ["web", "tokyo"]`), for rollouts that name one.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The functions and targets of a config, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub functions: Vec<FunctionDef>,
    pub targets: Vec<TargetDef>,
    /// A panel whose target had no job for this long is hidden (never deleted); `None`:
    /// panels stay visible.
    pub hide_after: Option<Duration>,
    /// Whether a job may name a target that `[[targets]]` does not list (one a person wrote
    /// on the index): `targets_from_index = true`. Without `[[targets]]`, every target may.
    pub targets_from_index: bool,
    /// The words of a refusal by `allow` (`[messages] not_allowed`).
    pub not_allowed: NotAllowed,
    /// The catalog of the 一括 panel ([`crate::queue::ROLLOUT_TARGET`]): each `[[rollouts]]`
    /// entry as one of its functions (`crate::rollout::bulk_catalog`); `None` without
    /// rollouts. [`Catalog::of_panel`] picks it for that panel.
    pub bulk: Option<Box<Catalog>>,
}

/// The message of a job whose 依頼者 a function's `allow` does not match, with `{requester}`
/// and `{function}` in it: `[messages] not_allowed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAllowed(pub String);

/// The default words of [`NotAllowed`].
pub const NOT_ALLOWED: &str = "{requester} は {function} を実行できません";

impl Default for NotAllowed {
    fn default() -> Self {
        NotAllowed(NOT_ALLOWED.to_string())
    }
}

impl NotAllowed {
    /// Problems of the words: a placeholder other than `{requester}` and `{function}`.
    pub fn problems(&self) -> Vec<String> {
        let mut rest = self.0.replace("{requester}", "").replace("{function}", "");
        rest.retain(|c| c == '{' || c == '}');
        if rest.is_empty() {
            Vec::new()
        } else {
            vec![format!(
                "[messages] not_allowed = {:?} may hold only {{requester}} and {{function}} in braces",
                self.0
            )]
        }
    }

    fn render(&self, requester: &str, function: &str) -> String {
        let requester = if requester.is_empty() {
            NO_REQUESTER.to_string()
        } else {
            shown(requester)
        };
        self.0
            .replace("{requester}", &requester)
            .replace("{function}", &shown(function))
    }
}

/// Why a job must not run although its command is configured, by the catalog's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Its function is not in `[[functions]]`, or runs another command there.
    Function(String),
    /// Its target is not in `[[targets]]`.
    Target(String),
    /// Its 依頼者 does not match the function's `allow`.
    Requester(String),
    /// Its `argsJSON` differs from the function's args in the config.
    Args(String),
    /// Its function needs approvals that its 承認 cell does not hold.
    Approval(String),
}

/// What a job of the sheet asks for, as the catalog judges it.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub function: &'a str,
    pub command: &'a str,
    pub target: &'a str,
    pub requester: &'a str,
    /// The job's `argsJSON`, parsed.
    pub args: &'a serde_json::Map<String, serde_json::Value>,
    /// Whether the job's args are trusted as they are: a continuation step, vouched for by
    /// sheetq's own mark (`provenance`) on a protected queue, carries the args its command
    /// handed back.
    pub args_trusted: bool,
    /// Whether the job's approvals were checked elsewhere, on a trusted queue: a rollout's
    /// job, approved with its rollout. Its args are checked all the same.
    pub approved_elsewhere: bool,
    /// Whether 依頼者 can be trusted: only on a queue only sheetq's accounts (and the owner)
    /// write. A function with `allow` runs only then.
    pub requester_trusted: bool,
    /// The job's id and its 承認 cell: a function with `approvers` runs only with enough
    /// approvals of this job in it, on a trusted queue.
    pub job_id: &'a str,
    pub approvals: &'a str,
    /// The `choices_from` ranges as the daemon's read found them; `None` where nothing was
    /// read (the shell): a choice from a range is then checked by its other rules only.
    pub listed: Option<&'a crate::inputs::Listed>,
}

pub use crate::sheet_text::{shown, SHOWN_CHARS};

impl Catalog {
    /// The inputs a job of `function` with args `args_json` carries, as one line for people
    /// (`version=1.2.4, dry_run=true`); empty for a function without inputs.
    pub fn inputs_text(&self, function: &str, args_json: &str) -> String {
        let f = self.function(function).or_else(|| self.rollout(function));
        let Some(f) = f.filter(|f| !f.inputs.is_empty()) else {
            return String::new();
        };
        match serde_json::from_str::<serde_json::Value>(args_json) {
            // As the job will run: its values checked and the defaults filled in; as the
            // row asks when they do not pass (the job is then refused, and says why).
            Ok(serde_json::Value::Object(args)) => {
                match crate::inputs::values_of(&f.inputs, &args, None) {
                    Ok(values) => crate::inputs::summary(&f.inputs, &values),
                    Err(_) => crate::inputs::summary(&f.inputs, &args),
                }
            }
            _ => String::new(),
        }
    }

    /// Every `choices_from` range of the functions' inputs, each once: read with the queue
    /// (a poll, the lease's read), so that a job's choice is checked against the list as it
    /// stands, at no request of its own.
    pub fn choices_ranges(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .functions
            .iter()
            .flat_map(|f| &f.inputs)
            .filter_map(|d| d.choices_from.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Problems of the lists by themselves: empty or repeated labels, flags with commas.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (i, f) in self.functions.iter().enumerate() {
            let at = format!("[[functions]] entry {} (\"{}\")", i + 1, f.label);
            if f.label.trim().is_empty() {
                out.push(format!("[[functions]] entry {} has an empty label", i + 1));
            } else if f.label.trim() != f.label || f.label.contains('\n') {
                out.push(format!(
                    "{at}: the label must not start or end with spaces nor hold a line break"
                ));
            } else if !seen.insert(f.label.as_str()) {
                out.push(format!(
                    "{at} repeats a label; every function needs its own"
                ));
            }
            if f.command.trim().is_empty() {
                out.push(format!("{at} has an empty command"));
            }
            if let Some(o) = f
                .output
                .as_deref()
                .filter(|o| !matches!(*o, "sheet" | "private"))
            {
                out.push(format!(
                    "{at}: output = {o:?} must be \"sheet\" (the default) or \"private\" (the output stays on the daemon's machine)"
                ));
            }
            if f.flags
                .iter()
                .any(|x| x.contains(',') || x.trim().is_empty())
            {
                out.push(format!(
                    "{at}: flags must be non-empty words without commas, e.g. flags = [\"heavy\"]"
                ));
            }
            for (key, list) in [("allow", &f.allow), ("cancel", &f.cancel)] {
                out.extend(
                    list.iter()
                        .flatten()
                        .filter_map(|who| crate::protection::entry_problem(&at, key, who)),
                );
            }
            if f.allow.as_ref().is_some_and(Vec::is_empty) {
                out.push(format!(
                    "{at}: allow = [] lets nobody run it; list who may, or remove allow to let everyone"
                ));
            }
            out.extend(crate::approval::problems(&at, f));
            if f.flags.iter().any(|x| x.trim() == "continuation") {
                out.push(format!(
                    "{at}: flags = [\"continuation\"] is sheetq's own mark of a step a command handed back (its args trusted, its approvals taken as given); remove it"
                ));
            }
            out.extend(crate::inputs::problems(&at, &f.inputs));
            for d in &f.inputs {
                if f.args.contains_key(&d.name) || f.args_from_sheet.contains(&d.name) {
                    out.push(format!(
                        "{at}: input {:?} is also a key of its args or args_from_sheet; a job's value for it would have two sources: rename the input or drop the key",
                        d.name
                    ));
                }
            }
            for key in &f.args_from_sheet {
                if key.trim().is_empty() || key.trim() != key {
                    out.push(format!(
                        "{at}: args_from_sheet entry {key:?} must be a key name without spaces"
                    ));
                }
            }
        }
        out.extend(self.not_allowed.problems());
        let mut seen = HashSet::new();
        for (i, t) in self.targets.iter().enumerate() {
            if t.label.trim().is_empty() || t.label.trim() != t.label {
                out.push(format!(
                    "[[targets]] entry {} (\"{}\") needs a label without leading or trailing spaces",
                    i + 1,
                    t.label
                ));
            } else if t.label == PANELS_TARGET {
                out.push(format!(
                    "[[targets]] entry {}: \"{PANELS_TARGET}\" is the index's own name; choose another label",
                    i + 1
                ));
            } else if !seen.insert(t.label.as_str()) {
                out.push(format!(
                    "[[targets]] entry {} repeats the label \"{}\"",
                    i + 1,
                    t.label
                ));
            }
        }
        out
    }

    /// The function whose label `label` is the same as ([`crate::sheet_text`]: spaces and
    /// tabs at either end aside, nothing else).
    /// The catalog of the panel of `target`: the 一括 panel's for
    /// [`crate::queue::ROLLOUT_TARGET`] when rollouts are configured, else this one.
    pub fn of_panel(&self, target: &str) -> &Catalog {
        match &self.bulk {
            Some(bulk) if crate::sheet_text::trim(target) == crate::queue::ROLLOUT_TARGET => bulk,
            _ => self,
        }
    }

    pub fn function(&self, label: &str) -> Option<&FunctionDef> {
        let label = crate::sheet_text::trim(label);
        self.functions.iter().find(|f| f.label == label)
    }

    /// Why a job's function or target label only looks like one of the config's (another
    /// character hidden in it, a fullwidth letter, another case): such a value is refused,
    /// never taken for the configured one. `None` when neither does.
    pub fn look_alike(&self, function: &str, target: &str) -> Option<String> {
        let functions = self.functions.iter().map(|f| f.label.as_str());
        if let Some((label, how)) = crate::sheet_text::look_alike(function, functions) {
            return Some(look_alike_message("function", function, label, &how));
        }
        let targets = self
            .targets
            .iter()
            .map(|t| t.label.as_str())
            .chain([PANELS_TARGET]);
        crate::sheet_text::look_alike(target, targets)
            .map(|(label, how)| look_alike_message("target", target, label, &how))
    }

    /// Whether any function limits who may run it (`allow`) or needs approvals
    /// (`approvers`): the daemon then needs a protected queue, where 依頼者 and the 承認
    /// cell can be trusted.
    pub fn needs_protected_queue(&self) -> bool {
        self.functions
            .iter()
            .any(|f| f.allow.is_some() || f.approvers.is_some())
    }

    /// The approval rule of the function `label`, when it has `approvers`.
    pub fn approval_rule(&self, label: &str) -> Option<crate::approval::Rule<'_>> {
        (self.function(label).or_else(|| self.rollout(label))).and_then(crate::approval::Rule::of)
    }

    /// The 一括 panel's function of rollout `label` (its labels are no function's: the
    /// config refuses one that is), for what a rollout's row shares with a function's row:
    /// its approval rule and its inputs' text.
    fn rollout(&self, label: &str) -> Option<&FunctionDef> {
        self.bulk.as_ref()?.function(label)
    }

    /// Why `target` must not be run on: `[[targets]]` is set, does not list it, and
    /// `targets_from_index` is off. `None` when it may.
    pub fn refuse_target(&self, target: &str) -> Option<String> {
        let target = crate::sheet_text::trim(target);
        if self.targets.is_empty()
            || self.targets_from_index
            || self.targets.iter().any(|t| t.label == target)
        {
            return None;
        }
        Some(format!(
            "target {} is not among the [[targets]] of sheetq.toml, so nothing ran; list it there \
             (or set targets_from_index = true to let people add targets on the index)",
            shown(target)
        ))
    }

    /// Checks a job against the config. `Ok(Some(args))`: run with these args (the
    /// function's, plus the keys people may set); `Ok(None)`: no functions are configured,
    /// or it is one of the panels' own jobs, and the job's args stand as they are.
    pub fn admit(
        &self,
        asked: &Asked<'_>,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, Refused> {
        let command = crate::sheet_text::trim(asked.command);
        if command == PANELS_COMMAND {
            // One panel job at a time rewrites the index: they all share its target.
            if crate::sheet_text::trim(asked.target) != PANELS_TARGET {
                return Err(Refused::Target(format!(
                    "the job that opens panels runs on target \"{PANELS_TARGET}\" only, not {}, so nothing ran",
                    shown(crate::sheet_text::trim(asked.target))
                )));
            }
            return Ok(None);
        }
        if let Some(why) = self.refuse_target(asked.target) {
            return Err(Refused::Target(why));
        }
        if self.functions.is_empty() {
            return Ok(None);
        }
        let Some(f) = self.function(asked.function) else {
            return Err(Refused::Function(format!(
                "function {} is not among the [[functions]] of sheetq.toml, so nothing ran; \
                 the panel is older than the config: run `sheetq panels sync`",
                shown(crate::sheet_text::trim(asked.function))
            )));
        };
        if f.command != command {
            return Err(Refused::Function(format!(
                "function \"{}\" runs command \"{}\" in sheetq.toml but this job asks for {}, \
                 so nothing ran; the panel is older than the config: run `sheetq panels sync`",
                f.label,
                f.command,
                shown(command)
            )));
        }
        if let Some(allow) = &f.allow {
            if !asked.requester_trusted {
                return Err(Refused::Requester(format!(
                    "function \"{}\" may be run only by those its allow lists, and 依頼者 cannot be trusted while the queue is not protected, so nothing ran; \
                     run `sheetq init` to protect it",
                    f.label
                )));
            }
            let requester = crate::sheet_text::trim(asked.requester);
            // A press the poll intake took from a ▶ cell that only these people may edit
            // carries what Google vouched for (`crate::panel::guard`), in a queue only sheetq writes.
            let vouched = People::of(allow).vouched_requester();
            if requester != vouched && !allow.iter().any(|who| allow_matches(who, requester)) {
                return Err(Refused::Requester(
                    self.not_allowed.render(requester, &f.label),
                ));
            }
        }
        let args = f
            .args_for(asked.args, asked.args_trusted, asked.listed)
            .map_err(Refused::Args)?;
        if let Some(rule) = crate::approval::Rule::of(f) {
            // A continuation step (its args trusted) goes on with work already approved:
            // only sheetq's mark makes a row one, never a cell or a flag.
            if !asked.args_trusted && !asked.approved_elsewhere {
                self.check_approved(&rule, asked)?;
            }
        }
        Ok(Some(args))
    }

    /// Refuses a job of a function with `approvers` that its 承認 cell does not approve
    /// enough, or whose queue cannot vouch for that cell.
    fn check_approved(
        &self,
        rule: &crate::approval::Rule<'_>,
        asked: &Asked<'_>,
    ) -> Result<(), Refused> {
        if !asked.requester_trusted {
            return Err(Refused::Approval(format!(
                "function \"{}\" runs only once approved, and approvals cannot be trusted while the queue is not protected, so nothing ran; \
                 run `sheetq init` to protect it",
                rule.function
            )));
        }
        let mut row = crate::queue::QueueRow::blank(0);
        row.job_id = asked.job_id.to_string();
        row.requester = asked.requester.to_string();
        row.approvals = asked.approvals.to_string();
        let tally = crate::approval::tally(rule, &row, chrono_tz::UTC);
        if tally.enough() {
            Ok(())
        } else {
            Err(Refused::Approval(format!(
                "function \"{}\" runs only once approved by {} of its approvers, and this job has {} approval(s), so nothing ran",
                rule.function,
                rule.needed,
                tally.approved_by.len()
            )))
        }
    }
}

impl FunctionDef {
    /// The args a job of this function runs with: the config's, with the keys of
    /// `args_from_sheet` taken from the job. Any other key of the job's args that differs
    /// from the config's (added, missing or changed) refuses the job, naming the keys.
    /// `trusted` (a continuation step on a protected queue): the job's args as they are.
    fn args_for(
        &self,
        sheet: &serde_json::Map<String, serde_json::Value>,
        trusted: bool,
        listed: Option<&crate::inputs::Listed>,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        if trusted {
            return Ok(sheet.clone());
        }
        let mut args = match serde_json::to_value(&self.args) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        let from_sheet = |k: &str| {
            self.args_from_sheet.iter().any(|a| a == k) || self.inputs.iter().any(|i| i.name == k)
        };
        let mut differs: Vec<String> = Vec::new();
        let keys: std::collections::BTreeSet<&String> = args.keys().chain(sheet.keys()).collect();
        for key in keys {
            if from_sheet(key) {
                continue;
            }
            let (mine, theirs) = (args.get(key), sheet.get(key));
            if !matches!((mine, theirs), (Some(a), Some(b)) if same_json(a, b)) {
                differs.push(format!(
                    "{} (sheet: {}, sheetq.toml: {})",
                    shown(key),
                    theirs.map_or("none".into(), |v| shown(&v.to_string())),
                    mine.map_or("none".into(), |v| v.to_string())
                ));
            }
        }
        if !differs.is_empty() {
            let may = if self.args_from_sheet.is_empty() {
                String::new()
            } else {
                format!(" (people may set only {})", self.args_from_sheet.join(", "))
            };
            return Err(format!(
                "argsJSON differs from function \"{}\" in sheetq.toml at {}{may}, so nothing ran; \
                 only the config says what runs: run `sheetq panels sync` if the panel is older than the config",
                self.label,
                differs.join(", ")
            ));
        }
        for key in &self.args_from_sheet {
            if let Some(v) = sheet.get(key) {
                args.insert(key.clone(), v.clone());
            }
        }
        // Its inputs: each checked by its rule (or defaulted), over the config's args.
        let inputs = crate::inputs::values_of(&self.inputs, sheet, listed)
            .map_err(|why| format!("function \"{}\": {why}, so nothing ran", self.label))?;
        args.extend(inputs);
        Ok(args)
    }
}

/// JSON equality with numbers compared by value: `5` in the config is `5.0` in a cell.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// The refusal of a sheet value that only looks like the configured `configured`.
pub fn look_alike_message(what: &str, value: &str, configured: &str, how: &str) -> String {
    format!(
        "{what} {} looks like \"{configured}\" of sheetq.toml but {how}, so nothing ran: a value on the \
         sheet names a configured one only when it is the same text; run `sheetq panels sync` to \
         rewrite the panel",
        shown(value)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(text: &str) -> Catalog {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            functions: Vec<FunctionDef>,
            #[serde(default)]
            targets: Vec<TargetDef>,
        }
        let raw: Raw = toml::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        Catalog {
            functions: raw.functions,
            targets: raw.targets,
            ..Catalog::default()
        }
    }

    fn args(json: &str) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::from_str(json) {
            Ok(serde_json::Value::Object(m)) => m,
            other => panic!("{json} is no JSON object: {other:?}"),
        }
    }

    /// A job pressed by alice on サーバーA, asking for `function` with `command` and `args`.
    fn admit(
        c: &Catalog,
        function: &str,
        command: &str,
        json: &str,
    ) -> Result<Option<serde_json::Map<String, serde_json::Value>>, Refused> {
        c.admit(&Asked {
            function,
            command,
            target: "サーバーA",
            requester: "alice@example.com",
            args: &args(json),
            args_trusted: false,
            approved_elsewhere: false,
            requester_trusted: true,
            job_id: "job-1",
            approvals: "",
            listed: None,
        })
    }

    #[test]
    fn functions_keep_their_order_and_carry_args_as_json() {
        let c = catalog(
            "[[functions]]\nlabel = \"再起動\"\ncommand = \"sleep\"\nargs = { seconds = 5 }\nflags = [\"heavy\"]\n\
             [[functions]]\nlabel = \"確認\"\ncommand = \"echo\"",
        );
        assert_eq!(c.problems(), Vec::<String>::new());
        let labels: Vec<_> = c.functions.iter().map(|f| f.label.as_str()).collect();
        assert_eq!(labels, ["再起動", "確認"]);
        assert_eq!(c.functions[0].args_json(), r#"{"seconds":5}"#);
        assert_eq!(c.functions[0].flags_text(), "heavy");
        assert_eq!(c.functions[1].args_json(), "{}");
    }

    #[test]
    fn repeated_or_empty_labels_are_problems() {
        let c = catalog(
            "[[functions]]\nlabel = \"A\"\ncommand = \"sleep\"\n[[functions]]\nlabel = \"A\"\ncommand = \"sleep\"\n\
             [[targets]]\nlabel = \"\"\n[[targets]]\nlabel = \"▶パネル\"",
        );
        let p = c.problems();
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("repeats a label"));
    }

    #[test]
    fn a_job_for_a_function_the_config_dropped_is_refused_before_it_runs() {
        let c = catalog("[[functions]]\nlabel = \"確認\"\ncommand = \"echo\"");
        assert_eq!(admit(&c, "確認", "echo", "{}"), Ok(Some(args("{}"))));
        let Err(Refused::Function(gone)) = admit(&c, "削除済み", "echo", "{}") else {
            panic!("a function the config does not have must be refused");
        };
        assert!(
            gone.contains("\"削除済み\"") && gone.contains("sheetq panels sync"),
            "{gone}"
        );
        let Err(Refused::Function(moved)) = admit(&c, "確認", "sleep", "{}") else {
            panic!("a function asking for another command must be refused");
        };
        assert!(moved.contains("runs command \"echo\""), "{moved}");
        let panels_job = |target| {
            c.admit(&Asked {
                function: PANELS_FUNCTION,
                command: PANELS_COMMAND,
                target,
                requester: "",
                args: &args("{}"),
                args_trusted: false,
                approved_elsewhere: false,
                requester_trusted: false,
                job_id: "job-1",
                approvals: "",
                listed: None,
            })
        };
        assert_eq!(
            panels_job(PANELS_TARGET),
            Ok(None),
            "the panels' own jobs pass on the index's target"
        );
        assert!(
            matches!(panels_job("サーバーA"), Err(Refused::Target(_))),
            "a panels job on another target would run beside the one that rewrites the index"
        );
        assert_eq!(
            admit(&Catalog::default(), "any", "echo", r#"{"a":1}"#),
            Ok(None),
            "no functions configured: the job's args stand"
        );
    }

    #[test]
    fn a_job_runs_its_functions_args_from_the_config_and_forged_args_are_refused() {
        let c = catalog(
            "[[functions]]\nlabel = \"再起動\"\ncommand = \"sleep\"\nargs = { seconds = 5 }",
        );
        assert_eq!(
            admit(&c, "再起動", "sleep", r#"{"seconds":5.0}"#),
            Ok(Some(args(r#"{"seconds":5}"#))),
            "the same number written as 5.0 is the same args"
        );
        let Err(Refused::Args(changed)) = admit(&c, "再起動", "sleep", r#"{"seconds":3000}"#)
        else {
            panic!("a changed arg must be refused");
        };
        assert!(
            changed.contains("\"seconds\" (sheet: \"3000\", sheetq.toml: 5)"),
            "the message names the key and both values: {changed}"
        );
        let Err(Refused::Args(added)) =
            admit(&c, "再起動", "sleep", r#"{"seconds":5,"extra":"x"}"#)
        else {
            panic!("an added arg must be refused");
        };
        assert!(added.contains("\"extra\""), "{added}");
        assert!(
            matches!(admit(&c, "再起動", "sleep", "{}"), Err(Refused::Args(_))),
            "a missing arg differs too"
        );
    }

    #[test]
    fn keys_people_may_set_come_from_the_sheet_and_the_rest_from_the_config() {
        let c = catalog(
            "[[functions]]\nlabel = \"報告\"\ncommand = \"report\"\n\
             args = { month = \"2026-11\", comment = \"\" }\nargs_from_sheet = [\"comment\"]",
        );
        assert_eq!(
            admit(
                &c,
                "報告",
                "report",
                r#"{"month":"2026-11","comment":"至急"}"#
            ),
            Ok(Some(args(r#"{"month":"2026-11","comment":"至急"}"#)))
        );
        assert_eq!(
            admit(&c, "報告", "report", r#"{"month":"2026-11"}"#),
            Ok(Some(args(r#"{"month":"2026-11","comment":""}"#))),
            "a key people may set keeps the config's value when the job leaves it out"
        );
        let Err(Refused::Args(why)) = admit(&c, "報告", "report", r#"{"month":"1999-01"}"#)
        else {
            panic!("a key people may not set must be refused");
        };
        assert!(why.contains("people may set only comment"), "{why}");
        let trusted = c.admit(&Asked {
            function: "報告",
            command: "report",
            target: "サーバーA",
            requester: "",
            args: &args(r#"{"month":"2026-12","step":2}"#),
            args_trusted: true,
            approved_elsewhere: false,
            requester_trusted: true,
            job_id: "job-1",
            approvals: "",
            listed: None,
        });
        assert_eq!(
            trusted,
            Ok(Some(args(r#"{"month":"2026-12","step":2}"#))),
            "a continuation on a protected queue runs with the args its command handed back"
        );
    }

    #[test]
    fn only_listed_targets_run_unless_the_index_may_add_them() {
        let mut c = catalog(
            "[[functions]]\nlabel = \"確認\"\ncommand = \"echo\"\n[[targets]]\nlabel = \"サーバーB\"",
        );
        let Err(Refused::Target(why)) = admit(&c, "確認", "echo", "{}") else {
            panic!("サーバーA is not listed and must be refused");
        };
        assert!(
            why.contains("\"サーバーA\"") && why.contains("targets_from_index"),
            "{why}"
        );
        c.targets_from_index = true;
        assert!(admit(&c, "確認", "echo", "{}").is_ok());
        assert_eq!(
            Catalog::default().refuse_target("anything"),
            None,
            "without [[targets]] every target may run"
        );
    }

    #[test]
    fn allow_lets_only_the_listed_requesters_run_a_function() {
        let c = catalog(
            "[[functions]]\nlabel = \"再起動\"\ncommand = \"echo\"\n\
             allow = [\"alice@example.com\", \"group:ops@example.com\"]",
        );
        let ask = |requester: &str| {
            c.admit(&Asked {
                function: "再起動",
                command: "echo",
                target: "サーバーA",
                requester,
                args: &args("{}"),
                args_trusted: false,
                approved_elsewhere: false,
                requester_trusted: true,
                job_id: "job-1",
                approvals: "",
                listed: None,
            })
        };
        assert!(ask("Alice@Example.com").is_ok(), "case does not matter");
        assert!(
            matches!(ask("carol@example.com"), Err(Refused::Requester(_))),
            "a group's member is known only by a cell Google lets them tick"
        );
        assert!(
            ask("保護された▶: alice@example.com, group:ops@example.com").is_ok(),
            "a press from a ▶ cell guarded for exactly these people"
        );
        assert!(
            matches!(
                ask("保護された▶: alice@example.com"),
                Err(Refused::Requester(_))
            ),
            "a press vouched for other people than the function's"
        );
        assert_eq!(
            ask("mallory@example.com"),
            Err(Refused::Requester(
                "\"mallory@example.com\" は \"再起動\" を実行できません".into()
            ))
        );
        assert_eq!(
            ask(""),
            Err(Refused::Requester(
                "(依頼者不明) は \"再起動\" を実行できません".into()
            )),
            "an empty 依頼者 matches nothing"
        );
        assert!(
            matches!(
                ask("alice@example.com.evil.test"),
                Err(Refused::Requester(_))
            ),
            "an entry matches the whole address, not a prefix"
        );
        let on_an_open_queue = c.admit(&Asked {
            function: "再起動",
            command: "echo",
            target: "サーバーA",
            requester: "alice@example.com",
            args: &args("{}"),
            args_trusted: false,
            approved_elsewhere: false,
            requester_trusted: false,
            job_id: "job-1",
            approvals: "",
            listed: None,
        });
        assert!(
            matches!(&on_an_open_queue, Err(Refused::Requester(m)) if m.contains("not protected")),
            "on an open queue anyone may write alice's address: {on_an_open_queue:?}"
        );
    }

    #[test]
    fn entries_match_whole_addresses_in_any_case_and_never_as_patterns() {
        assert!(allow_matches("Alice@Example.com", "alice@example.com"));
        assert!(!allow_matches("*", "a@b"), "a star is no pattern any more");
        assert!(!allow_matches("*@ops.example.com", "bob@ops.example.com"));
        assert!(!allow_matches("group:ops@example.com", "ops@example.com"));
        assert!(!allow_matches("alice@example.com", "alice@example.co"));
        assert!(!allow_matches("alice@example.com", ""));
    }

    #[test]
    fn sheet_values_are_shown_escaped_and_cut() {
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        assert_eq!(shown("\u{202e}x"), "\"\\u{202e}x\"");
        assert!(shown(&"x".repeat(100)).ends_with("…\""));
    }

    #[test]
    fn bad_allow_entries_and_words_are_problems() {
        let mut c = catalog(
            "[[functions]]\nlabel = \"A\"\ncommand = \"echo\"\nallow = [\"alice\", \"a b@x\"]\n\
             [[functions]]\nlabel = \"B\"\ncommand = \"echo\"\nallow = []",
        );
        c.not_allowed = NotAllowed("{who} may not".into());
        let p = c.problems();
        assert_eq!(p.len(), 4, "{p:#?}");
    }

    #[test]
    fn a_function_cannot_carry_sheetqs_continuation_flag() {
        let c = catalog(
            "[[functions]]\nlabel = \"A\"\ncommand = \"echo\"\nflags = [\"continuation\"]\napprovers = [\"lead@example.com\"]",
        );
        let p = c.problems().join("\n");
        assert!(
            p.contains("flags = [\"continuation\"] is sheetq's own mark"),
            "a configured continuation flag would skip approvals and trust args: {p}"
        );
    }
}
