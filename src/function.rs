//! One `[[functions]]` entry of the config: what a panel's function runs (command, args,
//! flags) and who may press, approve and stop it. Plain data with the rules of who it
//! names ([`allow_matches`]), below both the panel catalog (`panel::catalog`, which admits
//! jobs by it) and the approval rule (`approval`, which counts approvals by it).

use serde::Deserialize;

use crate::protection::People;

/// How an empty 依頼者 reads in a refusal.
pub const NO_REQUESTER: &str = "(依頼者不明)";

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
    /// Who may run it: e-mail addresses and Google Groups (`"group:ops@example.com"`),
    /// without regard to case. `panels sync` protects the function's ▶ cells for them
    /// ([`crate::panel::guard`]). `None`: anyone who can press.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// The keys of `argsJSON` a job may set itself (still checked by the command's
    /// schema); every other key is the config's.
    #[serde(default)]
    pub args_from_sheet: Vec<String>,
    /// Who may approve its jobs (docs/design.md §5.5): e-mail addresses and Google Groups,
    /// each with a 承認 cell of its own that only they may tick. `Some`: a job waits as
    /// 承認待ち until approved, and never runs before.
    #[serde(default)]
    pub approvers: Option<Vec<String>>,
    /// How many distinct approvers must approve (1 when unset).
    #[serde(default)]
    pub approvals: Option<u32>,
    /// How long a job waits for its approvals before it ends 期限切れ (`"24h"` when unset).
    #[serde(default)]
    pub approval_expires: Option<String>,
    /// `"private"`: its jobs' output stays on the daemon's machine (as a command's
    /// `output = "private"`); `"sheet"` (the default) or unset: as its command says.
    #[serde(default)]
    pub output: Option<String>,
    /// Who may stop its jobs with ■ (addresses and groups, as `allow`); when unset, its
    /// `allow` and `approvers` together, or anyone who can press when it has neither
    /// ([`FunctionDef::stoppers`]).
    #[serde(default)]
    pub cancel: Option<Vec<String>>,
    /// Typed values a job of it takes (a version, a switch, a date), each under its name in
    /// the job's args, checked when the job is admitted ([`crate::inputs`]).
    #[serde(default)]
    pub inputs: Vec<crate::inputs::InputDef>,
    /// After a press, its panel input cells return to their defaults (the values the press
    /// took stay with its job); unset, they keep what the person picked.
    #[serde(default)]
    pub reset_inputs: bool,
}

impl FunctionDef {
    /// Whether its `allow` (when set) lets `requester` run it.
    pub fn allows(&self, requester: &str) -> bool {
        self.allow.as_ref().is_none_or(|allow| {
            allow
                .iter()
                .any(|who| allow_matches(who, crate::sheet_text::trim(requester)))
        })
    }

    /// Who may press it: `allow`, when set.
    pub fn pressers(&self) -> Option<People> {
        self.allow.as_ref().map(People::of)
    }

    /// Who may stop its jobs: `cancel` when set; else, when it names who may run or approve
    /// it, those people (whoever may start a job may withdraw it, and an approver may turn
    /// it down); else anyone who can press (`None`).
    pub fn stoppers(&self) -> Option<People> {
        if let Some(c) = &self.cancel {
            return Some(People::of(c));
        }
        match (&self.allow, &self.approvers) {
            (None, None) => None,
            (a, b) => Some(People::of(a.iter().flatten().chain(b.iter().flatten()))),
        }
    }

    /// The approvers one by one, each with a 承認 cell of its own.
    pub fn approver_people(&self) -> Vec<People> {
        self.approvers
            .iter()
            .flatten()
            .map(|a| People::of([a]))
            .collect()
    }

    /// The args as the panel's hidden argsJSON cell holds them (keys sorted).
    pub fn args_json(&self) -> String {
        serde_json::to_string(&self.args).unwrap_or_else(|_| "{}".into())
    }

    /// The args of a press whose inputs are `inputs` (by name): the config's args with the
    /// inputs merged over them, as a queue row's argsJSON.
    pub fn args_json_with(&self, inputs: &serde_json::Map<String, serde_json::Value>) -> String {
        let mut args = match serde_json::to_value(&self.args) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        args.extend(inputs.iter().map(|(k, v)| (k.clone(), v.clone())));
        serde_json::Value::Object(args).to_string()
    }

    /// The flags as the hidden システムフラグ cell holds them.
    pub fn flags_text(&self) -> String {
        self.flags.join(",")
    }
}

/// Whether 依頼者 `requester` is the `allow` (or `approvers`) entry `who`: the same address,
/// letters without regard to case. An empty 依頼者 matches nothing, and a group entry
/// (`group:…`) no address: who is in a group is Google's to know, and Google tells it only
/// by letting its members edit a cell ([`crate::panel::guard`]).
pub fn allow_matches(who: &str, requester: &str) -> bool {
    !requester.is_empty() && who.trim().eq_ignore_ascii_case(requester.trim())
}
