//! What panels offer and which targets get one: the config's `[[functions]]` and
//! `[[targets]]` and `hide_panels_after` (README, "Panels"). The config is the one
//! source of the functions; panels carry copies in their hidden columns, written by
//! `sheetq panels sync`, and a job whose function the config no longer has is refused.
//!
//! Below the command registry: plain data and its own checks, importing nothing of
//! `commands` (which holds a catalog to refuse such jobs, and checks each function's command
//! and args: `Registry::check_functions`).

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

/// The command of the jobs that create or show panels (a tick on the index). It is built
/// into the daemon and needs no `[commands]` entry.
pub const PANELS_COMMAND: &str = "sheetq.panels";
/// The target key of those jobs: one at a time, since each rewrites the index.
pub const PANELS_TARGET: &str = "▶パネル";
/// Their function label.
pub const PANELS_FUNCTION: &str = "パネルを開く";
/// How many panels one such job creates before it continues with the rest in a new step.
pub const PANELS_PER_STEP: usize = 10;

/// One function a panel offers (`[[functions]]`), in the order the panels list them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionDef {
    /// 機能 as people see it; a job names its function by this label.
    pub label: String,
    /// A command configured under `[commands]`.
    pub command: String,
    /// The job's args (`argsJSON`), as a TOML table.
    #[serde(default)]
    pub args: toml::Table,
    /// システムフラグ, e.g. `["heavy"]`.
    #[serde(default)]
    pub flags: Vec<String>,
}

impl FunctionDef {
    /// The args as the panel's hidden argsJSON cell holds them (keys sorted).
    pub fn args_json(&self) -> String {
        serde_json::to_string(&self.args).unwrap_or_else(|_| "{}".into())
    }

    /// The flags as the hidden システムフラグ cell holds them.
    pub fn flags_text(&self) -> String {
        self.flags.join(",")
    }
}

/// One target that gets a row on the index (`[[targets]]`). A person may add more by
/// writing a label into the index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDef {
    pub label: String,
    #[serde(default)]
    pub position: String,
}

/// The functions and targets of a config, checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub functions: Vec<FunctionDef>,
    pub targets: Vec<TargetDef>,
    /// A panel whose target had no job for this long is hidden (never deleted); `None`:
    /// panels stay visible.
    pub hide_after: Option<Duration>,
}

impl Catalog {
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
            if f.flags
                .iter()
                .any(|x| x.contains(',') || x.trim().is_empty())
            {
                out.push(format!(
                    "{at}: flags must be non-empty words without commas, e.g. flags = [\"heavy\"]"
                ));
            }
        }
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

    pub fn function(&self, label: &str) -> Option<&FunctionDef> {
        self.functions.iter().find(|f| f.label == label.trim())
    }

    /// Why a job must not run although its command is configured: the config lists
    /// functions and the job's function is not one of them, or runs another command now
    /// (the panel that sent it is older than the config). `None` when no functions are
    /// configured (jobs then name their command freely) and for the panels' own jobs.
    pub fn refuse(&self, function: &str, command: &str) -> Option<String> {
        let command = command.trim();
        if self.functions.is_empty() || command == PANELS_COMMAND {
            return None;
        }
        match self.function(function) {
            None => Some(format!(
                "function \"{}\" is not among the [[functions]] of sheetq.toml, so nothing ran; \
                 the panel is older than the config: run `sheetq panels sync`",
                function.trim()
            )),
            Some(f) if f.command != command => Some(format!(
                "function \"{}\" runs command \"{}\" in sheetq.toml but this job asks for \"{}\", \
                 so nothing ran; the panel is older than the config: run `sheetq panels sync`",
                f.label, f.command, command
            )),
            Some(_) => None,
        }
    }
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
            hide_after: None,
        }
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
        assert_eq!(c.refuse("確認", "echo"), None);
        let gone = c.refuse("削除済み", "echo").unwrap_or_default();
        assert!(
            gone.contains("\"削除済み\"") && gone.contains("sheetq panels sync"),
            "{gone}"
        );
        let moved = c.refuse("確認", "sleep").unwrap_or_default();
        assert!(moved.contains("runs command \"echo\""), "{moved}");
        assert_eq!(
            c.refuse("x", PANELS_COMMAND),
            None,
            "the panels' own jobs always pass"
        );
        assert_eq!(
            Catalog::default().refuse("any", "echo"),
            None,
            "no functions configured: no check"
        );
    }
}
