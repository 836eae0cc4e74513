//! Rollouts (`[[rollouts]]`): one press runs a function across many targets, a few at a time,
//! stopping on failures, with no leader. Pure: a rollout's definition and its problems, the
//! targets it covers (a group of `[[targets]]`, a list, or every target), each target's jobId
//! derived from the rollout's own ([`child_job_id`], so that no daemon, however many race or
//! restart, queues a target twice), and the rule a claim pass follows for a rollout given the
//! queue as read ([`plan`]): the next wave, the stop, the end and its counts. Everything it
//! decides from lives in the sheet (the rollout's row and its children's rows), never in a
//! daemon's memory.
//!
//! The daemon follows it in every claim pass (`daemon/rollouts.rs`, docs/design.md §5.8);
//! `sheetq rollout NAME` queues a rollout's row, and `sheetq status` counts its jobs by it.

use serde::Deserialize;
use uuid::Uuid;

use crate::panel::catalog::Catalog;
use crate::queue::{QueueRow, Snapshot, State};

/// How many of a rollout's targets: a count, or a percentage of its targets
/// (`max_parallel = 5`, `max_parallel = "25%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Count(u32),
    Percent(u32),
}

impl Amount {
    /// The amount out of `total` targets: a percentage rounded up (25 % of 10 is 3).
    pub fn of(self, total: usize) -> usize {
        match self {
            Amount::Count(n) => n as usize,
            Amount::Percent(p) => (total * p as usize).div_ceil(100),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(i64),
            Text(String),
        }
        let bad = || {
            serde::de::Error::custom(
                "must be a count (5) or a percentage of the rollout's targets (\"25%\")",
            )
        };
        match Raw::deserialize(d)? {
            Raw::Count(n) => u32::try_from(n).map(Amount::Count).map_err(|_| bad()),
            Raw::Text(t) => t
                .trim()
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<u32>().ok())
                .filter(|p| *p <= 100)
                .map(Amount::Percent)
                .ok_or_else(bad),
        }
    }
}

/// One `[[rollouts]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutDef {
    /// The rollout's key (`sheetq rollout NAME`): ASCII letters, digits, `-` and `_`.
    pub name: String,
    /// What its row shows; the name when unset.
    #[serde(default)]
    pub label: Option<String>,
    /// The `[[functions]]` label each target's job runs.
    pub function: String,
    /// Its targets: the `[[targets]]` carrying this group, …
    #[serde(default)]
    pub group: Option<String>,
    /// … these `[[targets]]` labels, in this order, …
    #[serde(default)]
    pub targets: Option<Vec<String>>,
    /// … or every target.
    #[serde(default)]
    pub all_targets: bool,
    /// How many of its jobs wait or run at once (1 when unset).
    #[serde(default = "one")]
    pub max_parallel: Amount,
    /// How many failures it takes in its stride: one more stops it (0 when unset: the first
    /// failure stops it).
    #[serde(default = "none")]
    pub max_failures: Amount,
    /// The function's inputs it fixes for every target (checked as a schedule's are); the
    /// rest come from the press (`sheetq rollout NAME --input k=v`) or their defaults.
    #[serde(default)]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// Whether each target's job is announced to `[[notify]]` on its own too; unset, only
    /// the rollout's end is, naming the targets that failed.
    #[serde(default)]
    pub notify_each: bool,
}

fn one() -> Amount {
    Amount::Count(1)
}

fn none() -> Amount {
    Amount::Count(0)
}

impl RolloutDef {
    /// What its row shows.
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.name)
    }

    /// Its targets, in the order `[[targets]]` lists them (in `targets`' order for a list).
    pub fn targets_in(&self, catalog: &Catalog) -> Vec<String> {
        if let Some(list) = &self.targets {
            return list.clone();
        }
        catalog
            .targets
            .iter()
            .filter(|t| {
                self.all_targets
                    || self
                        .group
                        .as_ref()
                        .is_some_and(|g| t.groups.iter().any(|h| h == g))
            })
            .map(|t| t.label.clone())
            .collect()
    }
}

/// Every problem of `rollouts` against `catalog`, each naming the entry and the fix.
pub fn problems(rollouts: &[RolloutDef], catalog: &Catalog) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut labels = std::collections::HashSet::new();
    for (i, r) in rollouts.iter().enumerate() {
        let at = format!("[[rollouts]] entry {} ({:?})", i + 1, r.name);
        let plain = !r.name.is_empty()
            && r.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !plain {
            out.push(format!(
                "{at}: name must be ASCII letters, digits, - and _ (it is typed as `sheetq rollout NAME`)"
            ));
        }
        if !seen.insert(r.name.as_str()) {
            out.push(format!(
                "{at}: another rollout has this name; give each its own"
            ));
        }
        if !labels.insert(r.label()) {
            out.push(format!(
                "{at}: another rollout shows the label {:?}; give each its own",
                r.label()
            ));
        }
        if catalog.function(r.label()).is_some() {
            out.push(format!(
                "{at}: label {:?} is also a [[functions]] label; a rollout's row must not read as a function's, so give it another",
                r.label()
            ));
        }
        let function = catalog.function(&r.function);
        if function.is_none() {
            out.push(format!(
                "{at}: function {:?} is not among the [[functions]]; name one of them",
                r.function
            ));
        }
        let ways = [r.group.is_some(), r.targets.is_some(), r.all_targets]
            .into_iter()
            .filter(|w| *w)
            .count();
        if ways != 1 {
            out.push(format!(
                "{at}: name its targets one way: group = \"web\", targets = [\"web-1\", …] or all_targets = true"
            ));
        }
        if catalog.targets.is_empty() {
            out.push(format!(
                "{at}: a rollout runs over the [[targets]] of sheetq.toml, and it lists none"
            ));
        }
        if i == 0
            && (catalog.targets.iter()).any(|t| t.label.trim() == crate::queue::ROLLOUT_TARGET)
        {
            out.push(format!(
                "[[targets]]: the label {:?} is the rollouts' panel's; give that target another",
                crate::queue::ROLLOUT_TARGET
            ));
        }
        if let Some(list) = &r.targets {
            for t in list {
                if !catalog.targets.iter().any(|d| &d.label == t) {
                    out.push(format!("{at}: target {t:?} is not among the [[targets]]"));
                }
            }
            let mut unique = std::collections::HashSet::new();
            if let Some(t) = list.iter().find(|t| !unique.insert(t.as_str())) {
                out.push(format!("{at}: target {t:?} is listed twice"));
            }
        }
        let targets = r.targets_in(catalog);
        if ways == 1 && targets.is_empty() && !catalog.targets.is_empty() {
            out.push(match &r.group {
                Some(g) => format!(
                    "{at}: no target carries group {g:?}; add it to the targets' groups = [...]"
                ),
                None => format!("{at}: it covers no target"),
            });
        }
        match r.max_parallel {
            Amount::Count(0) | Amount::Percent(0) => out.push(format!(
                "{at}: max_parallel must let at least one job run (1 or more, or 1% to 100%)"
            )),
            _ => {}
        }
        if let Some(f) = function {
            if let Err(why) = crate::inputs::values_of(&f.inputs, &r.inputs, None) {
                out.push(format!("{at}: inputs: {why}"));
            }
            for key in r.inputs.keys() {
                if !f.inputs.iter().any(|d| &d.name == key) {
                    out.push(format!(
                        "{at}: inputs: function {:?} has no input {key:?}",
                        f.label
                    ));
                }
            }
        }
    }
    out
}

/// The catalog of the 一括 panel ([`crate::queue::ROLLOUT_TARGET`]): each rollout as a
/// function of it, so that the panel's rows, their ▶, ■ and input cells, who may press and
/// stop them and what a press queues follow the rules of any function. A rollout's
/// function there has its label, runs [`crate::queue::ROLLOUT_COMMAND`] with its
/// function's args and the inputs it fixes, offers the inputs it does not fix, and is
/// pressed and stopped by whom its function names (`allow`, `cancel`). `None` without
/// rollouts (or when a rollout's function is unknown: the config is refused then).
pub fn bulk_catalog(rollouts: &[RolloutDef], catalog: &Catalog) -> Option<Catalog> {
    if rollouts.is_empty() {
        return None;
    }
    let functions = rollouts
        .iter()
        .map(|r| {
            let f = catalog.function(&r.function)?;
            let mut args = f.args.clone();
            for (k, v) in &r.inputs {
                args.insert(k.clone(), toml::Value::try_from(v).ok()?);
            }
            Some(crate::function::FunctionDef {
                label: r.label().to_string(),
                command: crate::queue::ROLLOUT_COMMAND.to_string(),
                args,
                flags: vec![scope_flag(&f.label, &r.targets_in(catalog))],
                allow: f.allow.clone(),
                args_from_sheet: Vec::new(),
                // Approved once for the whole rollout, by its function's approvers.
                approvers: f.approvers.clone(),
                approvals: f.approvals,
                approval_expires: f.approval_expires.clone(),
                output: None,
                cancel: f.cancel.clone(),
                inputs: (f.inputs.iter())
                    .filter(|d| !r.inputs.contains_key(&d.name))
                    .cloned()
                    .collect(),
                reset_inputs: f.reset_inputs,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Catalog {
        functions,
        targets: Vec::new(),
        hide_after: None,
        targets_from_index: false,
        not_allowed: catalog.not_allowed.clone(),
        bulk: None,
    })
}

/// The namespace of the children's jobIds (a UUID of its own, so no other derived id meets
/// one).
const CHILD_NAMESPACE: Uuid = Uuid::from_u128(0x4f0e_6a1d_8c52_4b7e_9d13_57a2_c0b8_e941);

/// The jobId of rollout `rollout_job_id`'s job on `target`: the same on every daemon and
/// after every restart, so a target's job is queued once, and found again by its id.
pub fn child_job_id(rollout_job_id: &str, target: &str) -> String {
    // The id's length first: no pair of texts reads as another pair.
    let name = format!("{}:{rollout_job_id}\n{target}", rollout_job_id.len());
    Uuid::new_v5(&CHILD_NAMESPACE, name.as_bytes()).to_string()
}

/// The システムフラグ of a rollout's row that says what was pressed (and approved): a
/// digest of its function and its targets, in order (`targets=<16 hex>`). The passes queue
/// its jobs only while the config still gives the rollout that function and those targets,
/// so that an approval never reaches a target or a function it did not see.
pub fn scope_flag(function: &str, targets: &[String]) -> String {
    let canonical = serde_json::to_string(&(function, targets)).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("targets={hex}")
}

/// How many targets the text of a rollout's targets names before it counts the rest.
const TARGETS_NAMED: usize = 10;

/// A rollout's targets for people (the approval it waits for): `対象 6: web-1, web-2, …`,
/// the first ten named and the rest counted.
pub fn targets_text(targets: &[String]) -> String {
    let named: Vec<&str> = targets
        .iter()
        .take(TARGETS_NAMED)
        .map(String::as_str)
        .collect();
    let rest = targets.len().saturating_sub(TARGETS_NAMED);
    let more = if rest > 0 {
        format!(" ほか {rest}")
    } else {
        String::new()
    };
    format!("対象 {}: {}{more}", targets.len(), named.join(", "))
}

/// Whether `snapshot` lacks the job of one of `targets` while it holds the job of a later
/// one: since waves go in the targets' order, that job is elsewhere (a sort moved it out
/// of the rows read, or its row was deleted), never unqueued.
pub fn has_gap(rollout_job_id: &str, targets: &[String], snapshot: &Snapshot) -> bool {
    let ids: std::collections::HashSet<&str> =
        snapshot.rows.iter().map(|r| r.job_id.as_str()).collect();
    let present: Vec<bool> = targets
        .iter()
        .map(|t| ids.contains(child_job_id(rollout_job_id, t).as_str()))
        .collect();
    present
        .iter()
        .enumerate()
        .any(|(i, here)| !here && present[i + 1..].iter().any(|p| *p))
}

/// How far a rollout has got, by its children's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Its targets.
    pub total: usize,
    /// Children ended 完了.
    pub done: usize,
    /// Children ended エラー or タイムアウト, and their targets, in the rollout's order.
    pub failed: Vec<String>,
    /// Children ended キャンセル, 却下 or 期限切れ.
    pub cancelled: usize,
    pub running: usize,
    /// Children waiting (待機, 承認待ち) or in a state nobody knows yet.
    pub waiting: usize,
    /// Targets whose job is not queued yet, in the rollout's order.
    pub unqueued: Vec<String>,
}

impl Progress {
    /// What its row shows while it runs: `実行中 7/20 · 失敗 0` (finished of all).
    pub fn running_text(&self) -> String {
        format!(
            "{}{}/{} · 失敗 {}",
            crate::queue::ROLLOUT_PROGRESS_PREFIX,
            self.done + self.failed.len() + self.cancelled,
            self.total,
            self.failed.len()
        )
    }

    /// Its メッセージ at the end: `成功 18 · 失敗 1 · 中止 1` (targets never run count as
    /// 中止), and the failed targets named.
    pub fn end_text(&self) -> String {
        let mut text = format!(
            "成功 {} · 失敗 {} · 中止 {}",
            self.done,
            self.failed.len(),
            self.cancelled + self.unqueued.len()
        );
        if !self.failed.is_empty() {
            text.push_str(&format!(" (失敗: {})", self.failed.join(", ")));
        }
        text
    }
}

/// What a claim pass does for a rollout now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Queue the jobs of these targets ([`child_job_id`] each), in this order.
    Queue(Vec<String>),
    /// Queue nothing more; ask these children (their jobIds) to stop, in the name of
    /// `who` (their 中止要求, so that they end キャンセル with `中止: <who>`): the waiting
    /// ones, and the running ones too when the rollout itself was stopped (after failures,
    /// running ones finish). Children asked already are not asked again.
    Stop { cancel: Vec<String>, who: String },
    /// Nothing to do: its wave is full, and jobs wait or run.
    Wait,
    /// Every child ended, or none will be queued: the rollout ends `state` with `message`.
    End { state: State, message: String },
}

/// How many of a rollout's jobs may wait or run at once, and how many may fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_parallel: Amount,
    pub max_failures: Amount,
}

/// The rule for rollout `rollout_job_id` over `targets` (in order) with `limits`, given the
/// queue as read (`snapshot`: its children are the rows with their derived jobIds) and
/// whether it was asked to stop (■, `sheetq cancel`): its progress, and the step.
///
/// - Failures past `max_failures` (more than it, so 0 stops at the first) or a stop: nothing
///   more is queued, waiting children end キャンセル, and once none runs the rollout ends
///   (エラー after failures, キャンセル after a stop).
/// - Else a wave: as many unqueued targets as leave at most `max_parallel` children waiting
///   or running, in order. A child's target that is busy with another job waits by the usual
///   claim rule, one job a target at a time.
/// - Once every child ended: 完了 when all did, エラー when one failed, キャンセル when one
///   was stopped.
pub fn plan(
    rollout_job_id: &str,
    targets: &[String],
    limits: Limits,
    stopped: bool,
    snapshot: &Snapshot,
) -> (Progress, Step) {
    let by_id: std::collections::HashMap<&str, &QueueRow> = snapshot
        .rows
        .iter()
        .map(|r| (r.job_id.as_str(), r))
        .collect();
    let mut p = Progress {
        total: targets.len(),
        ..Progress::default()
    };
    let mut waiting_ids = Vec::new();
    let mut running_ids = Vec::new();
    // Waves go in the targets' order: a target whose job is missing before the last one
    // queued had its job queued, and its row is gone (deleted): it counts as 中止 and is
    // never queued again, for its job may have run.
    let queued_up_to = targets
        .iter()
        .rposition(|t| by_id.contains_key(child_job_id(rollout_job_id, t).as_str()));
    for (i, target) in targets.iter().enumerate() {
        let id = child_job_id(rollout_job_id, target);
        let Some(row) = by_id.get(id.as_str()) else {
            if queued_up_to.is_some_and(|last| i < last) {
                p.cancelled += 1;
            } else {
                p.unqueued.push(target.clone());
            }
            continue;
        };
        match &row.state {
            crate::queue::RowState::Known(State::Done) => p.done += 1,
            crate::queue::RowState::Known(State::Error | State::Timeout) => {
                p.failed.push(target.clone())
            }
            crate::queue::RowState::Known(State::Cancelled | State::Rejected | State::Expired) => {
                p.cancelled += 1
            }
            crate::queue::RowState::Known(State::Running) => {
                p.running += 1;
                if !crate::cancel::asked(row) {
                    running_ids.push(id);
                }
            }
            _ => {
                p.waiting += 1;
                if !crate::cancel::asked(row) {
                    waiting_ids.push(id);
                }
            }
        }
    }
    let over_limit = p.failed.len() > limits.max_failures.of(p.total);
    if stopped || over_limit {
        let mut cancel = waiting_ids;
        if stopped {
            cancel.extend(running_ids);
        }
        if !cancel.is_empty() {
            let who = if stopped {
                "一括処理の中止".to_string()
            } else {
                format!("一括処理の失敗 {} 件", p.failed.len())
            };
            return (p, Step::Stop { cancel, who });
        }
        if p.running + p.waiting > 0 {
            return (p, Step::Wait);
        }
        let state = if stopped && p.failed.is_empty() {
            State::Cancelled
        } else {
            State::Error
        };
        let message = p.end_text();
        return (p, Step::End { state, message });
    }
    let active = p.running + p.waiting;
    if p.unqueued.is_empty() {
        if active > 0 {
            return (p, Step::Wait);
        }
        let state = if !p.failed.is_empty() {
            State::Error
        } else if p.cancelled > 0 {
            State::Cancelled
        } else {
            State::Done
        };
        let message = p.end_text();
        return (p, Step::End { state, message });
    }
    let room = limits
        .max_parallel
        .of(p.total)
        .max(1)
        .saturating_sub(active);
    if room == 0 {
        return (p, Step::Wait);
    }
    let wave = p.unqueued.iter().take(room).cloned().collect();
    (p, Step::Queue(wave))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::catalog::TargetDef;
    use crate::panel::fixtures::{queue_row, snapshot};

    fn targets(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("web-{i}")).collect()
    }

    /// The children of rollout `r` on `targets` in these states, as the queue holds them.
    fn children(r: &str, states: &[(&str, State)]) -> Snapshot {
        snapshot(
            states
                .iter()
                .enumerate()
                .map(|(i, (target, state))| {
                    let mut row = queue_row(i as u32 + 2, *state, target, "再起動");
                    row.job_id = child_job_id(r, target);
                    row
                })
                .collect(),
        )
    }

    const LIMITS: Limits = Limits {
        max_parallel: Amount::Count(2),
        max_failures: Amount::Count(0),
    };

    #[test]
    fn a_childs_job_id_is_the_same_everywhere_and_differs_by_rollout_and_target() {
        let a = child_job_id("r-1", "web-1");
        assert_eq!(
            a,
            child_job_id("r-1", "web-1"),
            "every daemon derives the same id"
        );
        assert_ne!(a, child_job_id("r-1", "web-2"));
        assert_ne!(a, child_job_id("r-2", "web-1"));
        assert_ne!(
            child_job_id("r-1\nweb", "1"),
            child_job_id("r-1", "web\n1"),
            "a line break cannot make two names one"
        );
    }

    #[test]
    fn waves_keep_at_most_max_parallel_jobs_waiting_or_running_in_the_targets_order() {
        let t = targets(6);
        let (p, step) = plan("r", &t, LIMITS, false, &snapshot(vec![]));
        assert_eq!(step, Step::Queue(vec!["web-1".into(), "web-2".into()]));
        assert_eq!(p.running_text(), "実行中 0/6 · 失敗 0");

        let s = children("r", &[("web-1", State::Running), ("web-2", State::Waiting)]);
        assert_eq!(
            plan("r", &t, LIMITS, false, &s).1,
            Step::Wait,
            "the wave is full"
        );

        let s = children("r", &[("web-1", State::Done), ("web-2", State::Running)]);
        assert_eq!(
            plan("r", &t, LIMITS, false, &s).1,
            Step::Queue(vec!["web-3".into()]),
            "one finished, one more goes"
        );

        let all_done: Vec<(&str, State)> = t.iter().map(|x| (x.as_str(), State::Done)).collect();
        let (p, step) = plan("r", &t, LIMITS, false, &children("r", &all_done));
        assert_eq!(
            step,
            Step::End {
                state: State::Done,
                message: "成功 6 · 失敗 0 · 中止 0".into()
            }
        );
        assert_eq!(p.running_text(), "実行中 6/6 · 失敗 0");
    }

    #[test]
    fn a_failure_past_max_failures_stops_new_jobs_cancels_the_waiting_and_ends_once_none_runs() {
        let t = targets(5);
        let s = children(
            "r",
            &[
                ("web-1", State::Error),
                ("web-2", State::Running),
                ("web-3", State::Waiting),
            ],
        );
        let (_, step) = plan("r", &t, LIMITS, false, &s);
        assert_eq!(
            step,
            Step::Stop {
                cancel: vec![child_job_id("r", "web-3")],
                who: "一括処理の失敗 1 件".into()
            },
            "the waiting job is stopped, the running one finishes"
        );
        let s = children(
            "r",
            &[
                ("web-1", State::Error),
                ("web-2", State::Running),
                ("web-3", State::Cancelled),
            ],
        );
        assert_eq!(
            plan("r", &t, LIMITS, false, &s).1,
            Step::Wait,
            "running ones finish"
        );
        let s = children(
            "r",
            &[
                ("web-1", State::Error),
                ("web-2", State::Done),
                ("web-3", State::Cancelled),
            ],
        );
        assert_eq!(
            plan("r", &t, LIMITS, false, &s).1,
            Step::End {
                state: State::Error,
                message: "成功 1 · 失敗 1 · 中止 3 (失敗: web-1)".into()
            },
            "web-4 and web-5 never ran: 中止"
        );
        let lenient = Limits {
            max_failures: Amount::Percent(20),
            ..LIMITS
        };
        let s = children("r", &[("web-1", State::Error), ("web-2", State::Done)]);
        assert_eq!(
            plan("r", &t, lenient, false, &s).1,
            Step::Queue(vec!["web-3".into(), "web-4".into()]),
            "20% of 5 lets one failure pass"
        );
    }

    #[test]
    fn a_stopped_rollout_cancels_its_waiting_jobs_and_ends_cancelled() {
        let t = targets(4);
        let s = children("r", &[("web-1", State::Running), ("web-2", State::Waiting)]);
        let (_, step) = plan("r", &t, LIMITS, true, &s);
        assert_eq!(
            step,
            Step::Stop {
                cancel: vec![child_job_id("r", "web-2"), child_job_id("r", "web-1")],
                who: "一括処理の中止".into()
            },
            "waiting and running jobs alike are asked to stop"
        );
        let mut asked = s.clone();
        for row in &mut asked.rows {
            row.cancel_request = format!("一括処理の中止 #{}", row.job_id);
        }
        assert_eq!(
            plan("r", &t, LIMITS, true, &asked).1,
            Step::Wait,
            "jobs asked already are not asked again; the rollout waits for them to end"
        );
        let s = children(
            "r",
            &[("web-1", State::Cancelled), ("web-2", State::Cancelled)],
        );
        assert_eq!(
            plan("r", &t, LIMITS, true, &s).1,
            Step::End {
                state: State::Cancelled,
                message: "成功 0 · 失敗 0 · 中止 4".into()
            }
        );
    }

    #[test]
    fn a_job_missing_before_a_later_targets_job_is_a_gap_not_an_unqueued_target() {
        let t = targets(4);
        let s = children("r", &[("web-1", State::Done), ("web-2", State::Running)]);
        assert!(
            !has_gap("r", &t, &s),
            "web-3 and web-4 are simply not queued yet"
        );
        let s = children("r", &[("web-1", State::Done), ("web-3", State::Running)]);
        assert!(
            has_gap("r", &t, &s),
            "web-2's job was queued before web-3's: it is elsewhere"
        );
        let (p, step) = plan("r", &t, LIMITS, false, &s);
        assert_eq!(
            (p.cancelled, p.unqueued.clone()),
            (1, vec!["web-4".to_string()]),
            "web-2's row is gone: it counts as 中止 and is never queued again"
        );
        assert_eq!(
            step,
            Step::Queue(vec!["web-4".into()]),
            "web-3 runs, one place is free"
        );
    }

    #[test]
    fn amounts_are_counts_or_percentages_rounded_up() {
        #[derive(Deserialize)]
        struct W {
            a: Amount,
        }
        let a = |t: &str| toml::from_str::<W>(t).map(|w| w.a);
        assert_eq!(a("a = 5").ok(), Some(Amount::Count(5)));
        assert_eq!(a("a = \"25%\"").ok(), Some(Amount::Percent(25)));
        assert!(a("a = \"150%\"").is_err() && a("a = -1").is_err() && a("a = \"x\"").is_err());
        assert_eq!(Amount::Percent(25).of(10), 3);
        assert_eq!(Amount::Percent(0).of(10), 0);
        assert_eq!(Amount::Count(2).of(10), 2);
    }

    #[test]
    fn a_definition_names_one_set_of_known_targets_and_a_known_function() {
        let catalog = Catalog {
            functions: vec![crate::panel::catalog::FunctionDef {
                label: "再起動".into(),
                command: "restart".into(),
                args: toml::Table::new(),
                flags: vec![],
                allow: None,
                args_from_sheet: vec![],
                inputs: Vec::new(),
                reset_inputs: false,
                approvers: None,
                approvals: None,
                approval_expires: None,
                output: None,
                cancel: None,
            }],
            targets: ["web-1", "web-2", "db-1"]
                .iter()
                .map(|l| TargetDef {
                    label: l.to_string(),
                    position: String::new(),
                    groups: if l.starts_with("web") {
                        vec!["web".into()]
                    } else {
                        vec![]
                    },
                })
                .collect(),
            ..Catalog::default()
        };
        let parse = |text: &str| -> RolloutDef {
            toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
        };
        let good =
            parse("name = \"web\"\nfunction = \"再起動\"\ngroup = \"web\"\nmax_parallel = \"50%\"");
        assert_eq!(good.targets_in(&catalog), ["web-1", "web-2"]);
        assert_eq!(
            problems(std::slice::from_ref(&good), &catalog),
            Vec::<String>::new()
        );
        for (text, needle) in [
            (
                "name = \"a b\"\nfunction = \"再起動\"\nall_targets = true",
                "name must be",
            ),
            (
                "name = \"x\"\nfunction = \"消去\"\nall_targets = true",
                "not among the [[functions]]",
            ),
            ("name = \"x\"\nfunction = \"再起動\"", "one way"),
            (
                "name = \"x\"\nfunction = \"再起動\"\ngroup = \"db\"\nall_targets = true",
                "one way",
            ),
            (
                "name = \"x\"\nfunction = \"再起動\"\ngroup = \"cache\"",
                "no target carries group",
            ),
            (
                "name = \"x\"\nfunction = \"再起動\"\ntargets = [\"web-9\"]",
                "not among the [[targets]]",
            ),
            (
                "name = \"x\"\nfunction = \"再起動\"\nall_targets = true\nmax_parallel = 0",
                "at least one",
            ),
            (
                "name = \"x\"\nfunction = \"再起動\"\nall_targets = true\ninputs = { v = 1 }",
                "has no input",
            ),
        ] {
            let found = problems(&[parse(text)], &catalog);
            assert!(
                found.iter().any(|p| p.contains(needle)),
                "{text:?} must be refused with {needle:?}: {found:?}"
            );
        }
        assert!(
            toml::from_str::<RolloutDef>("name = \"x\"\nfunction = \"再起動\"\nall = true")
                .is_err(),
            "unknown keys are refused"
        );
        let clash =
            parse("name = \"x\"\nlabel = \"再起動\"\nfunction = \"再起動\"\nall_targets = true");
        assert!(
            problems(&[clash], &catalog)
                .iter()
                .any(|p| p.contains("also a [[functions]] label")),
            "a rollout's row must never read as a function's"
        );
        let twice = parse("name = \"x\"\nfunction = \"再起動\"\nall_targets = true");
        assert!(problems(&[twice.clone(), twice], &catalog)
            .iter()
            .any(|p| p.contains("another rollout has this name")),);
        let mut gated = catalog.clone();
        gated.functions[0].approvers = Some(vec!["boss@example.com".into()]);
        let bulk = bulk_catalog(std::slice::from_ref(&good), &gated)
            .unwrap_or_else(|| panic!("a rollout of a known function has its 一括 row"));
        assert_eq!(
            bulk.functions[0].approvers,
            Some(vec!["boss@example.com".to_string()]),
            "a rollout of a function with approvers is approved once, by them"
        );
        assert_eq!(bulk.functions[0].command, crate::queue::ROLLOUT_COMMAND);
        assert_eq!(
            bulk.functions[0].flags,
            [scope_flag(
                "再起動",
                &["web-1".to_string(), "web-2".to_string()]
            )],
            "its row says what was pressed: the function and the targets"
        );
        assert_ne!(
            scope_flag("再起動", &["web-1".to_string()]),
            scope_flag("再起動", &["web-1".to_string(), "web-2".to_string()]),
            "a target added since the press is seen"
        );
    }
}
