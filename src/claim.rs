//! The claim rules of docs/design.md §2 as pure functions over a [`Snapshot`] and `now`: which
//! running rows have gone stale, which waiting rows a pass claims, the intake's duplicate
//! guard and the waiting counts shown on panels.
//!
//! No I/O here: the daemon reads the queue (under the lease), asks [`plan_pass`] what to do,
//! and commits the plan. That keeps every rule testable with plain values, down to the
//! second at the 15-minute boundary.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;

use crate::queue::{QueueRow, Snapshot, State};
use crate::workers::RunningRef;

/// Limits the rules depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimPolicy {
    /// A running row watched for longer than this (strictly more) times out.
    pub stale_after: Duration,
    /// A daemon whose heartbeat was watched standing still for longer than this is dead: its
    /// running rows time out at once.
    pub dead_after: Duration,
}

impl Default for ClaimPolicy {
    fn default() -> Self {
        Self {
            stale_after: Duration::minutes(15),
            dead_after: Duration::minutes(2),
        }
    }
}

/// What this observer has watched ([`crate::watch`]), for the stale rules: no rule reads a
/// time another machine wrote (docs/design.md §3.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watched {
    /// This daemon's id: its own running rows are its runner's business (the command's
    /// timeout), never stale to itself.
    pub me: String,
    /// Daemon id → how long its heartbeat row has stood still, for daemons with a row.
    pub quiet: HashMap<String, Duration>,
    /// jobId → how long its row has been watched 実行中 under the same claim.
    pub running_for: HashMap<String, Duration>,
    /// Google's clock at this read (the `Date` of its replies, advanced by this observer's
    /// monotonic clock since), for the 開始日時 of rows whose worker is no live sheetq
    /// daemon; `None` before any reply said.
    pub google_now: Option<DateTime<Utc>>,
    /// The spreadsheet's time zone, in which 開始日時 is a wall-clock time.
    pub zone: Option<Tz>,
}

/// Why a running row times out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaleReason {
    /// Watched 実行中 under one claim for more than `stale_after`.
    Expired { watched: Duration },
    /// Claimed by a daemon whose heartbeat stood still for more than `dead_after`.
    DeadWorker { daemon_id: String, quiet: Duration },
    /// Claimed by a worker that showed no heartbeat during `dead_after` of watching (an Apps
    /// Script worker, a daemon long gone), and started more than `stale_after` before
    /// Google's clock.
    StartedLongAgo { worker: String, ago: Duration },
}

impl StaleReason {
    /// The メッセージ text written to the row.
    pub fn message(&self, policy: &ClaimPolicy) -> String {
        match self {
            StaleReason::Expired { watched } => format!(
                "タイムアウト: {}分を超えても終了しませんでした (stale_after = {}m)",
                watched.num_minutes(),
                policy.stale_after.num_minutes()
            ),
            StaleReason::StartedLongAgo { worker, ago } => format!(
                "タイムアウト: 開始日時から {}分が過ぎ、ワーカー {} のハートビートがありません (stale_after = {}m)",
                ago.num_minutes(),
                if worker.is_empty() { "(空)" } else { worker },
                policy.stale_after.num_minutes()
            ),
            StaleReason::DeadWorker { daemon_id, quiet } => format!(
                "タイムアウト: ワーカー {daemon_id} のハートビートが {} 秒間更新されていません (dead_after = {}s)。結果が後から届けば書き戻します",
                quiet.num_seconds(),
                policy.dead_after.num_seconds()
            ),
        }
    }
}

/// A running row that the pass times out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// Index into `Snapshot::rows`.
    pub index: usize,
    pub reason: StaleReason,
}

/// Running rows that have gone stale, as this observer has `watched` them: claimed by a
/// daemon dead to it, or running under one claim for longer than `stale_after`. Rows of our
/// own claims are never stale to us.
pub fn stale_rows(snapshot: &Snapshot, policy: &ClaimPolicy, watched: &Watched) -> Vec<Stale> {
    let mut out = Vec::new();
    for (index, row) in snapshot.rows.iter().enumerate() {
        // A rollout's row runs nothing: its end is the claim passes' to write.
        if !row.state.is(State::Running) || row.is_rollout() {
            continue;
        }
        let tag = row.worker_tag();
        if tag.as_ref().is_some_and(|t| t.daemon_id == watched.me) {
            continue;
        }
        let dead = tag.and_then(|tag| {
            let quiet = *watched.quiet.get(&tag.daemon_id)?;
            (quiet > policy.dead_after).then_some(StaleReason::DeadWorker {
                daemon_id: tag.daemon_id,
                quiet,
            })
        });
        let running = watched.running_for.get(&row.job_id).copied();
        let expired = || {
            let running = running?;
            (running > policy.stale_after).then_some(StaleReason::Expired { watched: running })
        };
        let started_long_ago = || {
            let worker = row.worker_tag().map(|t| t.daemon_id);
            let has_heartbeat = worker
                .as_ref()
                .is_some_and(|id| watched.quiet.contains_key(id));
            if has_heartbeat || running? <= policy.dead_after {
                return None;
            }
            let ago = started_ago(row, watched)?;
            (ago > policy.stale_after).then(|| StaleReason::StartedLongAgo {
                worker: worker.unwrap_or_else(|| row.worker.clone()),
                ago,
            })
        };
        if let Some(reason) = dead.or_else(started_long_ago).or_else(expired) {
            out.push(Stale { index, reason });
        }
    }
    out
}

/// How long before Google's clock (as `watched` last read it) a row's job started: its
/// 開始日時, a wall-clock time in the spreadsheet's zone, taken at the later reading where
/// daylight saving repeats an hour, so that a row never looks older than it is.
pub fn started_ago(row: &QueueRow, watched: &Watched) -> Option<Duration> {
    let started = row.started_at?;
    let started = match watched.zone {
        Some(zone) => crate::sheet_time::latest_reading(started, zone),
        None => started,
    };
    Some(watched.google_now? - started)
}

/// Whether a row's state is final (完了, エラー, タイムアウト, キャンセル): only then is its
/// job settled.
pub fn is_final(row: &QueueRow) -> bool {
    row.state.is_final()
}

/// Indices of the waiting rows in queue order: 受付日時 ascending, ties (and rows with no
/// readable 受付日時, which go last) by sheet row.
pub fn waiting_order(snapshot: &Snapshot) -> Vec<usize> {
    let mut waiting: Vec<usize> = (0..snapshot.rows.len())
        .filter(|i| snapshot.rows[*i].state.is(State::Waiting))
        .filter(|i| !cancel_asked(&snapshot.rows[*i]))
        .filter(|i| !snapshot.rows[*i].is_rollout())
        .collect();
    waiting.sort_by_key(|i| {
        let r = &snapshot.rows[*i];
        (r.received_at.is_none(), r.received_at, r.row)
    });
    waiting
}

/// How a claimed row was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The oldest row that passed both exclusions.
    Normal,
    /// Every candidate was excluded; the oldest row whose target is idle was taken.
    Fallback,
}

/// What one pass decides; `T` is what the daemon decides for rows of functions with
/// approvers (`approval::Turn`), which this module does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassPlan<T = ()> {
    pub stale: Vec<Stale>,
    /// Indices into `Snapshot::rows`, in the order chosen, with how each was picked.
    pub claims: Vec<(usize, Pick)>,
    /// Waiting rows someone asked to stop (中止要求), which end キャンセル in this pass's
    /// commit whatever their target runs: indices into `Snapshot::rows`, in row order.
    pub cancels: Vec<usize>,
    /// Rows of functions with `approvers` that change state (docs/design.md §5.5): indices
    /// into `Snapshot::rows`, in row order. Filled by the daemon, which knows the config.
    pub turns: Vec<(usize, T)>,
}

impl<T> Default for PassPlan<T> {
    fn default() -> Self {
        PassPlan {
            stale: Vec::new(),
            claims: Vec::new(),
            cancels: Vec::new(),
            turns: Vec::new(),
        }
    }
}

pub use crate::cancel::asked as cancel_asked;

/// Plans one claim pass (docs/design.md §2): times out stale rows, then picks up to `free_slots`
/// waiting rows, each pick counting as running for the next. `eligible(row, picked)` lets
/// the caller hold back rows it cannot run now given the rows already picked in this pass
/// (e.g. a second heavy job); such rows are skipped, as if excluded, and are not taken by
/// the fallback either.
pub fn plan_pass<T>(
    snapshot: &Snapshot,
    policy: &ClaimPolicy,
    watched: &Watched,
    elsewhere: &[RunningRef],
    free_slots: usize,
    mut eligible: impl FnMut(&QueueRow, &[&QueueRow]) -> bool,
) -> PassPlan<T> {
    let stale = stale_rows(snapshot, policy, watched);
    let mut busy = Busy::of(snapshot, elsewhere);
    let cancels = (0..snapshot.rows.len())
        .filter(|i| {
            let row = &snapshot.rows[*i];
            row.state.is(State::Waiting)
                && cancel_asked(row)
                && busy.may_claim(row)
                && !row.is_rollout()
        })
        .collect();
    let order: Vec<usize> = waiting_order(snapshot)
        .into_iter()
        .filter(|i| busy.may_claim(&snapshot.rows[*i]))
        .collect();
    let mut claims: Vec<(usize, Pick)> = Vec::new();
    while claims.len() < free_slots {
        let picked: Vec<&QueueRow> = claims.iter().map(|(i, _)| &snapshot.rows[*i]).collect();
        let candidates: Vec<usize> = order
            .iter()
            .copied()
            .filter(|i| !claims.iter().any(|(c, _)| c == i))
            .filter(|i| eligible(&snapshot.rows[*i], &picked))
            .collect();
        let idle_target = |i: &usize| busy.target_idle(&snapshot.rows[*i]);
        let normal = candidates
            .iter()
            .copied()
            .find(|i| idle_target(i) && busy.requester_idle(&snapshot.rows[*i]));
        let pick = match normal {
            Some(i) => (i, Pick::Normal),
            None => match candidates.iter().copied().find(idle_target) {
                Some(i) => (i, Pick::Fallback),
                None => break,
            },
        };
        busy.take(&snapshot.rows[pick.0]);
        claims.push(pick);
    }
    PassPlan {
        stale,
        claims,
        cancels,
        turns: Vec::new(),
    }
}

/// What keeps a waiting row from being claimed, as one read shows it together with what
/// other daemons list (`elsewhere`): busy targets and requesters, jobs another daemon
/// holds, jobIds that stand on more than one row. Both a pass's plan and a claim that a
/// sort put under another row go by it.
#[derive(Debug, Clone, Default)]
pub struct Busy {
    targets: HashSet<String>,
    requesters: HashSet<String>,
    /// Jobs another daemon lists (running, finished, held): never claimed again here.
    listed: HashSet<String>,
    /// How many rows of the read hold each jobId.
    rows_per_job: HashMap<String, usize>,
}

impl Busy {
    pub fn of(snapshot: &Snapshot, elsewhere: &[RunningRef]) -> Self {
        let mut busy = Busy::default();
        // A running row keeps its target busy, also one this pass times out: its job may
        // still be running (a daemon cut off from the API is not a dead one). The daemon
        // that times it out holds the target until the job could have ended on its own.
        for row in (snapshot.rows.iter()).filter(|r| r.state.is(State::Running) && !r.is_rollout())
        {
            busy.take(row);
        }
        // Jobs other daemons list as running in their heartbeats count wherever their rows
        // are (a person may have sorted them out of this read), unless this read shows the
        // job settled: its row in a final state (a 待機 row may be a put-back that values
        // moved under). A held job (timed out, maybe still running somewhere) keeps its
        // target busy whatever its row shows, and so does a job whose row a person set to
        // キャンセル by hand: its daemon still runs it until it says otherwise.
        for job in elsewhere.iter().filter(|j| !j.done) {
            let settled = !job.held
                && snapshot.rows.iter().any(|r| {
                    r.job_id == job.job_id && is_final(r) && !r.state.is(State::Cancelled)
                });
            if !settled {
                busy.targets
                    .insert(crate::sheet_text::trim(&job.target).to_string());
                let requester = crate::sheet_text::trim(&job.requester);
                if !requester.is_empty() {
                    busy.requesters.insert(requester.to_string());
                }
            }
        }
        // A waiting row whose job another live daemon lists as its own is never claimed: a
        // write that values moved under (a put-back meant for another row) can show a
        // running or finished job as 待機 until it is repaired, and running it again would
        // be a double run.
        busy.listed = elsewhere.iter().map(|j| j.job_id.clone()).collect();
        // A waiting row whose jobId also stands on another row (a person copied a row) is
        // never claimed: its result could not be told apart from the other's.
        for r in &snapshot.rows {
            *busy.rows_per_job.entry(r.job_id.clone()).or_default() += 1;
        }
        busy
    }

    /// Whether `row` may be claimed at all: its jobId on this row only, its job listed by
    /// no other daemon.
    pub fn may_claim(&self, row: &QueueRow) -> bool {
        self.rows_per_job.get(&row.job_id) == Some(&1) && !self.listed.contains(&row.job_id)
    }

    /// Whether nothing runs on `row`'s target.
    pub fn target_idle(&self, row: &QueueRow) -> bool {
        !self.targets.contains(row.target_key())
    }

    /// Whether `row`'s requester (if any) has nothing running.
    pub fn requester_idle(&self, row: &QueueRow) -> bool {
        row.requester_key()
            .is_none_or(|r| !self.requesters.contains(r))
    }

    /// `row` runs now: its target and requester are busy.
    pub fn take(&mut self, row: &QueueRow) {
        self.targets.insert(row.target_key().to_string());
        if let Some(r) = row.requester_key() {
            self.requesters.insert(r.to_string());
        }
    }
}

/// Whether `row`'s job is still to end: `待機`, `実行中` or `承認待ち`.
pub fn is_open(row: &QueueRow) -> bool {
    row.state.is(State::Waiting)
        || row.state.is(State::Running)
        || row.state.is(State::AwaitingApproval)
}

/// The duplicate guard of the intake: the `待機`, `実行中` or `承認待ち` row, if any, for the
/// same panel (target) and function as a new press.
pub fn duplicate_of<'a>(
    snapshot: &'a Snapshot,
    target: &str,
    function: &str,
) -> Option<&'a QueueRow> {
    snapshot.rows.iter().find(|r| {
        is_open(r)
            && r.target_key() == crate::sheet_text::trim(target)
            && crate::sheet_text::trim(&r.function) == crate::sheet_text::trim(function)
    })
}

/// The job a ■ tick on the panel row of `function` of `target` stops: the newest `待機`,
/// `実行中` or `承認待ち` row of that function (latest 受付日時, then the lower row); `None`
/// when it has none, its jobs being finished.
pub fn job_to_stop<'a>(
    snapshot: &'a Snapshot,
    target: &str,
    function: &str,
) -> Option<&'a QueueRow> {
    snapshot
        .rows
        .iter()
        .filter(|r| is_open(r))
        .filter(|r| {
            r.target_key() == crate::sheet_text::trim(target)
                && crate::sheet_text::trim(&r.function) == crate::sheet_text::trim(function)
        })
        .max_by_key(|r| (r.received_at, r.row))
}

/// The answer to a duplicate press: `既に実行中です（依頼: <依頼者> / HH:mm）`, with the
/// existing row's requester (or `不明` when empty) and its 受付日時 in the sheet's zone.
pub fn duplicate_message(existing: &QueueRow, tz: Tz) -> String {
    let who = crate::sheet_text::visible(
        existing.requester_key().unwrap_or("不明"),
        crate::sheet_text::LINE_CHARS,
    );
    let at = existing
        .received_at
        .map(|t| t.with_timezone(&tz).format("%H:%M").to_string())
        .unwrap_or_else(|| "--:--".to_string());
    if existing.state.is(State::AwaitingApproval) {
        format!("承認待ちです（依頼: {who} / {at}）")
    } else {
        format!("既に実行中です（依頼: {who} / {at}）")
    }
}

/// Each waiting row (index into `snapshot.rows`, in queue order) with how many jobs of its
/// target go before it: those running on it, and those waiting on it ahead in the queue.
/// One target runs one job at a time, so that is what it waits for; 0 means nothing of its
/// target does (it starts as soon as a daemon has a free slot).
pub fn waiting_positions(snapshot: &Snapshot) -> Vec<(usize, usize)> {
    let mut ahead: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in snapshot.rows.iter().filter(|r| r.state.is(State::Running)) {
        *ahead.entry(r.target_key()).or_default() += 1;
    }
    waiting_order(snapshot)
        .into_iter()
        .map(|index| {
            let n = ahead.entry(snapshot.rows[index].target_key()).or_default();
            let position = (index, *n);
            *n += 1;
            position
        })
        .collect()
}

/// The panel status of a waiting row with `ahead` jobs of its target before it:
/// `⏳ 順番待ち (前に n 件)`, or `⏳ 受付済み (開始待ち)` when nothing of its target goes first.
pub fn waiting_text(ahead: usize) -> String {
    if ahead == 0 {
        RECEIVED_TEXT.to_string()
    } else {
        format!("⏳ 順番待ち (前に {ahead} 件)")
    }
}

/// The panel status of a press taken in whose target runs nothing: it starts as soon as a
/// daemon has a free slot.
pub const RECEIVED_TEXT: &str = "⏳ 受付済み (開始待ち)";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::RowState;
    use chrono::{DateTime, TimeZone, Utc};
    use proptest::prelude::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 0)
            .single()
            .unwrap()
    }

    fn at(minutes: i64, seconds: i64) -> DateTime<Utc> {
        t0() + Duration::minutes(minutes) + Duration::seconds(seconds)
    }

    #[test]
    fn a_duplicate_press_quotes_no_acting_character_of_the_requester() {
        let hostile = format!(
            "{}{}",
            crate::sheet_text::every_acting_character(),
            "x".repeat(60_000)
        );
        let existing = row(2, State::Running, "A", &hostile);
        let message = duplicate_message(&existing, chrono_tz::Asia::Tokyo);
        let raw: Vec<char> = message
            .chars()
            .filter(|c| crate::sheet_text::acts(*c))
            .collect();
        assert!(raw.is_empty(), "the panel message carries {raw:?} raw");
        assert!(
            message.chars().count() < 10_000,
            "{} characters",
            message.chars().count()
        );
    }

    /// A queue row on sheet row `row`, received `row` minutes after t0 unless changed.
    fn row(row: u32, state: State, target: &str, requester: &str) -> QueueRow {
        QueueRow {
            row,
            job_id: format!("job-{row}"),
            received_at: Some(at(row as i64, 0)),
            requester: requester.into(),
            panel_sheet: format!("panel {target}"),
            panel_row: Some(8),
            target: target.into(),
            function: "集計".into(),
            command: "sleep".into(),
            args_json: "{}".into(),
            flags: vec![],
            state: RowState::Known(state),
            started_at: (state == State::Running).then(|| at(55, 0)),
            finished_at: None,
            result_url: String::new(),
            message: String::new(),
            worker: if state == State::Running {
                "vm-1/0 #tok".into()
            } else {
                String::new()
            },
            cancel_request: String::new(),
            approvals: String::new(),
        }
    }

    fn snap(rows: Vec<QueueRow>) -> Snapshot {
        Snapshot {
            rows,
            problems: vec![],
        }
    }

    fn plan(s: &Snapshot, slots: usize) -> Vec<String> {
        plan_pass::<()>(
            s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            slots,
            |_, _| true,
        )
        .claims
        .into_iter()
        .map(|(i, _)| s.rows[i].job_id.clone())
        .collect()
    }

    #[test]
    fn a_target_with_a_running_row_is_excluded() {
        let s = snap(vec![
            row(2, State::Running, "A", "x@example.com"),
            row(3, State::Waiting, "A", "y@example.com"),
            row(4, State::Waiting, "B", "z@example.com"),
        ]);
        assert_eq!(
            plan(&s, 1),
            ["job-4"],
            "target A is busy, so B's job must be claimed"
        );
    }

    #[test]
    fn a_waiting_row_asked_to_stop_is_never_claimed_and_is_cancelled_even_on_a_busy_target() {
        let mut asked_idle = row(3, State::Waiting, "B", "y@example.com");
        asked_idle.cancel_request = "y@example.com 2026/12/03 10:00:00".into();
        let mut asked_busy = row(4, State::Waiting, "A", "z@example.com");
        asked_busy.cancel_request = "不明".into();
        let s = snap(vec![
            row(2, State::Running, "A", "x@example.com"),
            asked_idle,
            asked_busy,
            row(5, State::Waiting, "C", "w@example.com"),
        ]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            3,
            |_, _| true,
        );
        let ids = |v: Vec<usize>| -> Vec<String> {
            v.into_iter().map(|i| s.rows[i].job_id.clone()).collect()
        };
        assert_eq!(
            ids(p.claims.iter().map(|(i, _)| *i).collect()),
            ["job-5"],
            "rows asked to stop must never run, with slots to spare"
        );
        assert_eq!(
            ids(p.cancels),
            ["job-3", "job-4"],
            "both asked rows end キャンセル, the one on busy target A too"
        );
    }

    #[test]
    fn a_requester_with_a_running_row_is_excluded() {
        let s = snap(vec![
            row(2, State::Running, "A", "x@example.com"),
            row(3, State::Waiting, "B", "x@example.com"),
            row(4, State::Waiting, "C", "y@example.com"),
        ]);
        assert_eq!(
            plan(&s, 1),
            ["job-4"],
            "x already runs a job, so y goes first"
        );
    }

    #[test]
    fn when_every_candidate_is_excluded_the_oldest_idle_target_is_taken() {
        let s = snap(vec![
            row(2, State::Running, "A", "x@example.com"),
            row(3, State::Waiting, "A", "y@example.com"),
            row(4, State::Waiting, "C", "x@example.com"),
            row(5, State::Waiting, "B", "x@example.com"),
        ]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            1,
            |_, _| true,
        );
        assert_eq!(
            p.claims,
            vec![(2, Pick::Fallback)],
            "row 4 (target C idle, oldest) is the fallback"
        );
    }

    #[test]
    fn the_fallback_never_takes_a_busy_target() {
        let s = snap(vec![
            row(2, State::Running, "A", "x@example.com"),
            row(3, State::Waiting, "A", "y@example.com"),
        ]);
        assert!(
            plan(&s, 2).is_empty(),
            "the only waiting row's target is busy"
        );
    }

    #[test]
    fn candidates_go_by_received_time_then_row_order() {
        let mut late = row(2, State::Waiting, "A", "");
        late.received_at = Some(at(30, 0));
        let mut tie_low = row(5, State::Waiting, "B", "");
        tie_low.received_at = Some(at(10, 0));
        let mut tie_high = row(3, State::Waiting, "C", "");
        tie_high.received_at = Some(at(10, 0));
        let mut unknown = row(4, State::Waiting, "D", "");
        unknown.received_at = None;
        let s = snap(vec![late, tie_low, tie_high, unknown]);
        assert_eq!(plan(&s, 4), ["job-3", "job-5", "job-2", "job-4"]);
    }

    #[test]
    fn one_pass_fills_several_slots_and_counts_each_claim_as_running() {
        let s = snap(vec![
            row(2, State::Waiting, "A", "x@example.com"),
            row(3, State::Waiting, "A", "y@example.com"),
            row(4, State::Waiting, "B", "x@example.com"),
            row(5, State::Waiting, "C", "z@example.com"),
        ]);
        // job-3 waits for A; job-4 waits because x now runs job-2.
        assert_eq!(plan(&s, 3), ["job-2", "job-5", "job-4"]);
        assert_eq!(plan(&s, 2), ["job-2", "job-5"]);
    }

    #[test]
    fn empty_requesters_are_never_excluded_by_the_requester_rule() {
        let s = snap(vec![
            row(2, State::Running, "A", ""),
            row(3, State::Waiting, "B", ""),
            row(4, State::Waiting, "C", ""),
        ]);
        assert_eq!(plan(&s, 2), ["job-3", "job-4"]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            2,
            |_, _| true,
        );
        assert!(p.claims.iter().all(|(_, pick)| *pick == Pick::Normal));
    }

    #[test]
    fn rows_held_back_by_the_caller_are_skipped() {
        let mut heavy = row(2, State::Waiting, "A", "");
        heavy.command = "report".into();
        let s = snap(vec![heavy, row(3, State::Waiting, "B", "")]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            2,
            |r, _| r.command != "report",
        );
        assert_eq!(p.claims, vec![(1, Pick::Normal)]);
    }

    #[test]
    fn a_waiting_row_with_a_copied_job_id_is_never_claimed() {
        let done = row(2, State::Done, "A", "");
        let mut copy = row(3, State::Waiting, "B", "");
        copy.job_id = done.job_id.clone();
        let s = snap(vec![done, copy, row(4, State::Waiting, "C", "")]);
        assert_eq!(plan(&s, 2), ["job-4"]);
    }

    #[test]
    fn the_caller_sees_the_rows_already_picked_in_the_pass() {
        let mut rows = vec![
            row(2, State::Waiting, "A", ""),
            row(3, State::Waiting, "B", ""),
            row(4, State::Waiting, "C", ""),
        ];
        rows[0].command = "report".into();
        rows[1].command = "report".into();
        let s = snap(rows);
        // At most one "report" per pass.
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            3,
            |r, picked| r.command != "report" || picked.iter().all(|p| p.command != "report"),
        );
        assert_eq!(p.claims, vec![(0, Pick::Normal), (2, Pick::Normal)]);
    }

    /// Row 2 running on target A (claimed by vm-1), row 3 waiting on A.
    fn running_on_a() -> Snapshot {
        snap(vec![
            row(2, State::Running, "A", "x@example.com"),
            row(3, State::Waiting, "A", "y@example.com"),
        ])
    }

    /// This observer (vm-9) has watched job-2 running for `running`.
    fn watched_running(running: Duration) -> Watched {
        Watched {
            me: "vm-9".into(),
            running_for: [("job-2".to_string(), running)].into(),
            ..Watched::default()
        }
    }

    #[test]
    fn stale_boundary_is_strictly_more_than_fifteen_minutes_of_watching() {
        let policy = ClaimPolicy::default();
        for (watched, times_out) in [
            (Duration::minutes(14) + Duration::seconds(59), false),
            (Duration::minutes(15), false),
            (Duration::minutes(15) + Duration::seconds(1), true),
            (Duration::minutes(15) + Duration::milliseconds(1), true),
            (Duration::minutes(15) + Duration::seconds(60), true),
        ] {
            let p = plan_pass::<()>(
                &running_on_a(),
                &policy,
                &watched_running(watched),
                &[],
                1,
                |_, _| true,
            );
            assert_eq!(
                !p.stale.is_empty(),
                times_out,
                "a job watched running for {watched} should time out: {times_out}"
            );
            assert!(
                p.claims.is_empty(),
                "a timed-out job may still run somewhere: its target stays busy in this pass ({watched})"
            );
        }
    }

    #[test]
    fn a_cancelled_row_is_final_never_claimed_and_no_press_is_its_duplicate() {
        let s = snap(vec![
            row(2, State::Cancelled, "A", "x@example.com"),
            row(3, State::Waiting, "B", "y@example.com"),
        ]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &[],
            5,
            |_, _| true,
        );
        assert_eq!(
            p.claims,
            vec![(1, Pick::Normal)],
            "only the 待機 row is claimed"
        );
        assert!(is_final(&s.rows[0]), "キャンセル is final");
        assert!(
            duplicate_of(&s, "A", "集計").is_none(),
            "a press of a cancelled job's function queues a new row"
        );
        let words = crate::queue::StateWords::default();
        assert_eq!(words.parse("キャンセル"), Some(State::Cancelled));
        assert_eq!(
            State::ALL.iter().filter(|s| s.is_final()).count(),
            6,
            "完了, エラー, タイムアウト, キャンセル, 却下 and 期限切れ are final"
        );
    }

    /// job-2 running since `started` (開始日時) under worker `worker`, watched for `watched`
    /// with no heartbeat of that worker, Google's clock at t0 + 60 min.
    fn started_by_a_worker_without_heartbeat(
        worker: &str,
        started: DateTime<Utc>,
        watched: Duration,
    ) -> (Snapshot, Watched) {
        let mut s = running_on_a();
        s.rows[0].worker = worker.to_string();
        s.rows[0].started_at = Some(started);
        let mut w = watched_running(watched);
        w.google_now = Some(at(60, 0));
        w.zone = Some(chrono_tz::Asia::Tokyo);
        (s, w)
    }

    #[test]
    fn a_row_of_a_worker_without_heartbeat_times_out_by_its_start_time_on_googles_clock() {
        // The seeds' test 4: 開始日時 rewritten into the past, the worker no sheetq daemon.
        // 14:59 before Google's clock stays, 15:01 times out, once dead_after was watched.
        for (ago, times_out) in [
            (Duration::minutes(20), true),
            (Duration::minutes(15) + Duration::seconds(1), true),
            (Duration::minutes(15), false),
            (Duration::minutes(14) + Duration::seconds(59), false),
        ] {
            for worker in ["AppsScript", "", "vm-gone/0 #abc"] {
                let (s, w) = started_by_a_worker_without_heartbeat(
                    worker,
                    at(60, 0) - ago,
                    Duration::minutes(2) + Duration::seconds(1),
                );
                let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &w, &[], 1, |_, _| true);
                assert_eq!(
                    p.stale.len(),
                    usize::from(times_out),
                    "started {ago} before Google's clock by worker {worker:?}, watched past dead_after: {:?}",
                    p.stale
                );
                if times_out {
                    let message = p.stale[0].reason.message(&ClaimPolicy::default());
                    assert!(message.contains("開始日時"), "{message}");
                }
            }
        }
    }

    #[test]
    fn a_start_time_counts_only_after_dead_after_of_watching_with_no_heartbeat() {
        // A daemon that just claimed may not have shown its heartbeat to us yet.
        let (s, w) =
            started_by_a_worker_without_heartbeat("AppsScript", at(0, 0), Duration::minutes(2));
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &w, &[], 1, |_, _| true);
        assert!(
            p.stale.is_empty(),
            "watched only dead_after, not more: {:?}",
            p.stale
        );
        // A live daemon's row keeps the heartbeat rule, however old its 開始日時.
        let (mut s, mut w) =
            started_by_a_worker_without_heartbeat("", at(0, 0), Duration::minutes(5));
        s.rows[0].worker = "vm-1/0 #abc".into();
        w.quiet.insert("vm-1".into(), Duration::seconds(10));
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &w, &[], 1, |_, _| true);
        assert!(
            p.stale.is_empty(),
            "vm-1's heartbeat is alive: {:?}",
            p.stale
        );
        // Without a reading of Google's clock, only watching counts.
        let (s, mut w) =
            started_by_a_worker_without_heartbeat("AppsScript", at(0, 0), Duration::minutes(5));
        w.google_now = None;
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &w, &[], 1, |_, _| true);
        assert!(p.stale.is_empty(), "no Date seen yet: {:?}", p.stale);
    }

    #[test]
    fn a_start_time_in_the_repeated_hour_is_read_as_its_later_pass() {
        // New York falls back at 02:00 EDT on 2026-11-01: 01:30 comes twice. A 開始日時 of
        // 01:30 read as the first pass (05:30 UTC) may be the second (06:30 UTC); Google's
        // clock at 06:40 UTC is 10 minutes after that: not stale yet, never early.
        let zone = chrono_tz::America::New_York;
        let first_pass = Utc.with_ymd_and_hms(2026, 11, 1, 5, 30, 0).single();
        let Some(first_pass) = first_pass else {
            panic!("a valid instant");
        };
        let (s, mut w) =
            started_by_a_worker_without_heartbeat("AppsScript", first_pass, Duration::minutes(5));
        w.zone = Some(zone);
        w.google_now = Some(first_pass + Duration::minutes(70));
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &w, &[], 1, |_, _| true);
        assert!(
            p.stale.is_empty(),
            "01:30 is taken at its later pass: {:?}",
            p.stale
        );
        w.google_now = Some(first_pass + Duration::minutes(76));
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &w, &[], 1, |_, _| true);
        assert_eq!(
            p.stale.len(),
            1,
            "16 minutes after the later pass it times out"
        );
    }

    #[test]
    fn a_start_time_in_the_sheet_decides_nothing_while_the_worker_may_be_alive() {
        // 開始日時 says the job started a day ago (another machine's clock, or a serial read
        // back across the night daylight saving falls back), but the row was watched for
        // less than dead_after: only what this observer watched counts.
        let mut s = running_on_a();
        s.rows[0].started_at = Some(at(-24 * 60, 0));
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &watched_running(Duration::seconds(5)),
            &[],
            1,
            |_, _| true,
        );
        assert!(p.stale.is_empty(), "{:?}", p.stale);
    }

    #[test]
    fn a_row_an_apps_script_worker_left_running_blocks_its_target_until_stale_after() {
        // The minute-trigger workers wrote their own text (or nothing) in ワーカー: no sheetq
        // heartbeat speaks for them, so only how long the row was watched running counts.
        for worker in ["AppsScript", ""] {
            for (watched, times_out) in [
                (Duration::minutes(10), false),
                (Duration::minutes(16), true),
            ] {
                let mut s = running_on_a();
                s.rows[0].worker = worker.to_string();
                let p = plan_pass::<()>(
                    &s,
                    &ClaimPolicy::default(),
                    &watched_running(watched),
                    &[],
                    1,
                    |_, _| true,
                );
                assert_eq!(
                    (p.stale.len(), p.claims.len()),
                    (usize::from(times_out), 0),
                    "a row watched 実行中 for {watched} by worker {worker:?}: times out only past stale_after, and its target stays busy"
                );
            }
        }
    }

    #[test]
    fn rows_of_a_daemon_dead_to_this_observer_time_out() {
        let s = running_on_a();
        let mut watched = watched_running(Duration::minutes(1));
        watched.quiet.insert("vm-1".into(), Duration::minutes(3));
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &watched, &[], 1, |_, _| true);
        assert!(
            matches!(&p.stale[..], [Stale { index: 0, reason: StaleReason::DeadWorker { daemon_id, .. } }] if daemon_id == "vm-1"),
            "vm-1's heartbeat stood still for 3 min (> dead_after 2 min): {:?}",
            p.stale
        );
        assert!(p.claims.is_empty(), "its target stays busy");
        let msg = p.stale[0].reason.message(&ClaimPolicy::default());
        assert!(msg.contains("vm-1") && msg.contains("180 秒"), "{msg}");
        watched.quiet.insert("vm-1".into(), Duration::seconds(30));
        let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &watched, &[], 1, |_, _| true);
        assert!(
            p.stale.is_empty(),
            "a live daemon's one-minute-old job keeps running"
        );
    }

    #[test]
    fn our_own_rows_are_never_stale_to_us() {
        // vm-1 watching its own job: even silent (its own heartbeat misread) and long, the
        // command's timeout is its runner's business.
        let mut watched = watched_running(Duration::hours(2));
        watched.me = "vm-1".into();
        watched.quiet.insert("vm-1".into(), Duration::hours(1));
        let p = plan_pass::<()>(
            &running_on_a(),
            &ClaimPolicy::default(),
            &watched,
            &[],
            1,
            |_, _| true,
        );
        assert!(p.stale.is_empty(), "{:?}", p.stale);
    }

    #[test]
    fn a_job_another_daemon_runs_keeps_its_target_busy_wherever_its_row_was_sorted() {
        // A person sorted the running row of target A out of this read: only the other
        // daemon's heartbeat still says A is busy.
        let s = snap(vec![
            row(5, State::Waiting, "A", "x@example.com"),
            row(6, State::Waiting, "B", "y@example.com"),
        ]);
        let elsewhere = [RunningRef {
            job_id: "job-2".into(),
            target: "A".into(),
            requester: "y@example.com".into(),
            done: false,
            held: false,
        }];
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &elsewhere,
            2,
            |_, _| true,
        );
        let picked: Vec<&str> = p
            .claims
            .iter()
            .map(|(i, _)| s.rows[*i].job_id.as_str())
            .collect();
        assert_eq!(
            picked,
            vec!["job-6"],
            "target A is busy; y's burst yields only as fallback"
        );
        assert_eq!(p.claims[0].1, Pick::Fallback);

        // Once this read shows that job finished, the heartbeat's word no longer counts.
        let mut done = row(2, State::Done, "A", "y@example.com");
        done.job_id = "job-2".into();
        let s = snap(vec![done, row(5, State::Waiting, "A", "x@example.com")]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &elsewhere,
            1,
            |_, _| true,
        );
        assert_eq!(
            p.claims,
            vec![(1, Pick::Normal)],
            "finished elsewhere: A is free"
        );

        // A person wrote キャンセル over the row while the other daemon still lists the job
        // running: nothing stopped it, so A stays busy until that daemon says otherwise.
        let mut cancelled = row(2, State::Cancelled, "A", "y@example.com");
        cancelled.job_id = "job-2".into();
        let s = snap(vec![
            cancelled,
            row(5, State::Waiting, "A", "x@example.com"),
        ]);
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &elsewhere,
            1,
            |_, _| true,
        );
        assert!(
            p.claims.is_empty(),
            "a job listed as running under a hand-written キャンセル keeps A busy: {:?}",
            p.claims
        );
    }

    #[test]
    fn a_finished_job_another_daemon_lists_is_never_run_again_and_leaves_its_target_free() {
        // Its result landed elsewhere (or a restore from an older read put its row back to
        // 待機): the daemon that ran it lists it as done.
        let mut shown_waiting = row(2, State::Waiting, "A", "");
        shown_waiting.job_id = "job-2".into();
        let s = snap(vec![shown_waiting, row(3, State::Waiting, "A", "")]);
        let elsewhere = [RunningRef {
            job_id: "job-2".into(),
            target: "A".into(),
            requester: String::new(),
            done: true,
            held: false,
        }];
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &elsewhere,
            2,
            |_, _| true,
        );
        let picked: Vec<&str> = p
            .claims
            .iter()
            .map(|(i, _)| s.rows[*i].job_id.as_str())
            .collect();
        assert_eq!(
            picked,
            vec!["job-3"],
            "job-2 ran already and is not run again; target A is free for job-3"
        );
    }

    #[test]
    fn a_waiting_row_whose_job_another_daemon_holds_is_not_claimed() {
        // A put-back meant for another row landed on job-2's row: it shows 待機 until the
        // repair, while the daemon that ran it still lists it.
        let mut shown_waiting = row(2, State::Waiting, "A", "");
        shown_waiting.job_id = "job-2".into();
        let s = snap(vec![shown_waiting, row(3, State::Waiting, "B", "")]);
        let elsewhere = [RunningRef {
            job_id: "job-2".into(),
            target: "A".into(),
            requester: String::new(),
            done: false,
            held: false,
        }];
        let p = plan_pass::<()>(
            &s,
            &ClaimPolicy::default(),
            &Watched::default(),
            &elsewhere,
            2,
            |_, _| true,
        );
        assert_eq!(
            p.claims,
            vec![(1, Pick::Normal)],
            "job-2 must not run a second time; B's job runs"
        );
    }

    #[test]
    fn the_stale_message_says_how_long_it_was_watched() {
        let msg = StaleReason::Expired {
            watched: Duration::minutes(16),
        }
        .message(&ClaimPolicy::default());
        assert!(msg.contains("16分") && msg.contains("15m"), "{msg}");
    }

    #[test]
    fn unknown_states_neither_run_nor_block() {
        let mut odd = row(2, State::Running, "A", "x@example.com");
        odd.state = RowState::Unknown("保留".into());
        let s = snap(vec![odd, row(3, State::Waiting, "A", "x@example.com")]);
        assert_eq!(plan(&s, 2), ["job-3"]);
    }

    #[test]
    fn a_waiting_row_counts_the_jobs_of_its_own_target_ahead_the_running_one_included() {
        let mut first = row(4, State::Waiting, "C", "");
        first.received_at = Some(at(1, 0));
        let s = snap(vec![
            row(2, State::Running, "A", ""),
            row(3, State::Waiting, "B", ""),
            first,
            row(5, State::Done, "D", ""),
            row(6, State::Waiting, "A", ""),
            row(7, State::Waiting, "A", ""),
        ]);
        let texts: Vec<(String, String)> = waiting_positions(&s)
            .into_iter()
            .map(|(i, n)| (s.rows[i].job_id.clone(), waiting_text(n)))
            .collect();
        assert_eq!(
            texts,
            [
                ("job-4".to_string(), "⏳ 受付済み (開始待ち)".to_string()),
                ("job-3".to_string(), "⏳ 受付済み (開始待ち)".to_string()),
                ("job-6".to_string(), "⏳ 順番待ち (前に 1 件)".to_string()),
                ("job-7".to_string(), "⏳ 順番待ち (前に 2 件)".to_string()),
            ],
            "A's job runs: its waiting jobs are 1 and 2 behind it, whatever other targets wait"
        );
    }

    #[test]
    fn duplicate_guard_finds_waiting_or_running_presses_of_the_same_function() {
        let tz: Tz = "Asia/Tokyo".parse().unwrap();
        let mut done = row(2, State::Done, "A", "x@example.com");
        done.function = "集計".into();
        let running = row(3, State::Running, "B", "y@example.com");
        let waiting = row(4, State::Waiting, "C", "");
        let s = snap(vec![done, running, waiting]);
        assert!(
            duplicate_of(&s, "A", "集計").is_none(),
            "a finished job does not block a new press"
        );
        assert!(
            duplicate_of(&s, "B", "別機能").is_none(),
            "another function of the panel is free"
        );
        let dup = duplicate_of(&s, "B", "集計").expect("B's 集計 is running");
        // Received 3 minutes after 03:00 UTC = 12:03 in Tokyo.
        assert_eq!(
            duplicate_message(dup, tz),
            "既に実行中です（依頼: y@example.com / 12:03）"
        );
        let dup = duplicate_of(&s, "C", "集計").expect("C's 集計 is waiting");
        assert_eq!(
            duplicate_message(dup, tz),
            "既に実行中です（依頼: 不明 / 12:04）"
        );
    }

    fn arb_snapshot() -> impl Strategy<Value = Snapshot> {
        let state = prop_oneof![
            Just(State::Waiting),
            Just(State::Waiting),
            Just(State::Running),
            Just(State::Done),
        ];
        let one = (state, 0..5u8, 0..4u8, 0..20i64);
        proptest::collection::vec(one, 0..25).prop_map(|rows| {
            snap(
                rows.into_iter()
                    .enumerate()
                    .map(|(i, (st, target, who, minute))| {
                        let mut r = row(
                            i as u32 + 2,
                            st,
                            &format!("T{target}"),
                            &if who == 0 {
                                String::new()
                            } else {
                                format!("u{who}@example.com")
                            },
                        );
                        r.received_at = Some(at(minute, 0));
                        if st == State::Running {
                            r.started_at = Some(at(50 + minute, 0));
                        }
                        r
                    })
                    .collect(),
            )
        })
    }

    proptest! {
        #[test]
        fn a_pass_keeps_the_invariants(s in arb_snapshot(), slots in 0..5usize) {
            let p = plan_pass::<()>(&s, &ClaimPolicy::default(), &Watched::default(), &[], slots, |_, _| true);
            prop_assert!(p.claims.len() <= slots, "more picks than free slots");
            let picked: HashSet<usize> = p.claims.iter().map(|(i, _)| *i).collect();
            prop_assert_eq!(picked.len(), p.claims.len(), "a row was picked twice");
            let mut running_per_target: HashMap<&str, usize> = HashMap::new();
            for (i, r) in s.rows.iter().enumerate() {
                if r.state.is(State::Running) || picked.contains(&i) {
                    *running_per_target.entry(r.target_key()).or_default() += 1;
                }
                if picked.contains(&i) {
                    prop_assert!(r.state.is(State::Waiting), "picked a row that was not waiting");
                }
            }
            for (target, n) in &running_per_target {
                let already = s.rows.iter().filter(|r| r.state.is(State::Running) && r.target_key() == *target).count();
                prop_assert!(*n <= 1 || already == *n, "target {} runs {} jobs after the pass", target, n);
            }
            // Fallback only when no row passes both rules, given the claims made before it.
            for (k, (i, pick)) in p.claims.iter().enumerate() {
                if *pick == Pick::Fallback {
                    let mut busy_t: HashSet<&str> = HashSet::new();
                    let mut busy_r: HashSet<&str> = HashSet::new();
                    for (j, r) in s.rows.iter().enumerate() {
                        if r.state.is(State::Running) || p.claims[..k].iter().any(|(c, _)| *c == j) {
                            busy_t.insert(r.target_key());
                            if let Some(q) = r.requester_key() { busy_r.insert(q); }
                        }
                    }
                    let normal_exists = s.rows.iter().enumerate().any(|(j, r)| {
                        r.state.is(State::Waiting)
                            && !p.claims[..k].iter().any(|(c, _)| *c == j)
                            && !busy_t.contains(r.target_key())
                            && r.requester_key().is_none_or(|q| !busy_r.contains(q))
                    });
                    prop_assert!(!normal_exists, "fallback chose row {} although a normal candidate existed", i);
                }
            }
            // Nothing eligible was left unclaimed while slots were free.
            if p.claims.len() < slots {
                let busy: HashSet<&str> = s.rows.iter().enumerate()
                    .filter(|(j, r)| r.state.is(State::Running) || picked.contains(j))
                    .map(|(_, r)| r.target_key()).collect();
                let idle_waiting = s.rows.iter().enumerate().any(|(j, r)| {
                    r.state.is(State::Waiting) && !picked.contains(&j) && !busy.contains(r.target_key())
                });
                prop_assert!(!idle_waiting, "a free slot was left while an idle target had a waiting row");
            }
        }
    }
}
