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
    /// A running row older than this (strictly more) times out.
    pub stale_after: Duration,
    /// A daemon whose heartbeat is older than this is dead: its running rows time out at once.
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

/// Why a running row times out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaleReason {
    /// Started more than `stale_after` ago.
    Expired { started_at: DateTime<Utc> },
    /// The row has no readable 開始日時, so its age cannot be known; it would otherwise
    /// block its target forever.
    NoStartTime,
    /// Claimed by a daemon whose last heartbeat is older than `dead_after`.
    DeadWorker {
        daemon_id: String,
        last_seen: DateTime<Utc>,
    },
}

impl StaleReason {
    /// The メッセージ text written to the row.
    pub fn message(&self, policy: &ClaimPolicy, now: DateTime<Utc>) -> String {
        match self {
            StaleReason::Expired { started_at } => format!(
                "タイムアウト: 開始から{}分を超えても終了しませんでした (stale_after = {}m)",
                (now - *started_at).num_minutes(),
                policy.stale_after.num_minutes()
            ),
            StaleReason::NoStartTime => {
                "タイムアウト: 実行中なのに開始日時が空か読めないため打ち切りました".to_string()
            }
            StaleReason::DeadWorker {
                daemon_id,
                last_seen,
            } => format!(
                "タイムアウト: ワーカー {daemon_id} が {} 分間応答していません (最終確認 {})",
                (now - *last_seen).num_minutes(),
                last_seen.to_rfc3339()
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

/// Running rows that have gone stale at `now`. `heartbeats` maps daemon id → last seen;
/// a daemon with no heartbeat row is only judged by `stale_after`.
pub fn stale_rows(
    snapshot: &Snapshot,
    now: DateTime<Utc>,
    policy: &ClaimPolicy,
    heartbeats: &HashMap<String, DateTime<Utc>>,
) -> Vec<Stale> {
    let mut out = Vec::new();
    for (index, row) in snapshot.rows.iter().enumerate() {
        if !row.state.is(State::Running) {
            continue;
        }
        let dead = row.worker_tag().and_then(|tag| {
            let last_seen = *heartbeats.get(&tag.daemon_id)?;
            (now - last_seen > policy.dead_after).then_some(StaleReason::DeadWorker {
                daemon_id: tag.daemon_id,
                last_seen,
            })
        });
        let reason = match (dead, row.started_at) {
            (Some(dead), _) => Some(dead),
            (None, None) => Some(StaleReason::NoStartTime),
            (None, Some(started_at)) => (now - started_at > policy.stale_after)
                .then_some(StaleReason::Expired { started_at }),
        };
        if let Some(reason) = reason {
            out.push(Stale { index, reason });
        }
    }
    out
}

/// Indices of the waiting rows in queue order: 受付日時 ascending, ties (and rows with no
/// readable 受付日時, which go last) by sheet row.
pub fn waiting_order(snapshot: &Snapshot) -> Vec<usize> {
    let mut waiting: Vec<usize> = (0..snapshot.rows.len())
        .filter(|i| snapshot.rows[*i].state.is(State::Waiting))
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

/// What one pass decides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PassPlan {
    pub stale: Vec<Stale>,
    /// Indices into `Snapshot::rows`, in the order chosen, with how each was picked.
    pub claims: Vec<(usize, Pick)>,
}

/// Plans one claim pass (docs/design.md §2): times out stale rows, then picks up to `free_slots`
/// waiting rows, each pick counting as running for the next. `eligible(row, picked)` lets
/// the caller hold back rows it cannot run now given the rows already picked in this pass
/// (e.g. a second heavy job); such rows are skipped, as if excluded, and are not taken by
/// the fallback either.
pub fn plan_pass(
    snapshot: &Snapshot,
    now: DateTime<Utc>,
    policy: &ClaimPolicy,
    heartbeats: &HashMap<String, DateTime<Utc>>,
    elsewhere: &[RunningRef],
    free_slots: usize,
    mut eligible: impl FnMut(&QueueRow, &[&QueueRow]) -> bool,
) -> PassPlan {
    let stale = stale_rows(snapshot, now, policy, heartbeats);
    let timed_out: HashSet<usize> = stale.iter().map(|s| s.index).collect();
    let mut busy_targets: HashSet<&str> = HashSet::new();
    let mut busy_requesters: HashSet<&str> = HashSet::new();
    for (i, row) in snapshot.rows.iter().enumerate() {
        if row.state.is(State::Running) && !timed_out.contains(&i) {
            busy_targets.insert(row.target_key());
            if let Some(r) = row.requester_key() {
                busy_requesters.insert(r);
            }
        }
    }
    // Jobs other daemons list as running in their heartbeats count wherever their rows are
    // (a person may have sorted them out of this read), unless this read shows the row as
    // no longer running: finished, put back, or timed out in this pass.
    for job in elsewhere.iter().filter(|j| !j.done) {
        let settled = snapshot.rows.iter().enumerate().any(|(i, r)| {
            r.job_id == job.job_id && (!r.state.is(State::Running) || timed_out.contains(&i))
        });
        if !settled {
            busy_targets.insert(job.target.trim());
            if !job.requester.trim().is_empty() {
                busy_requesters.insert(job.requester.trim());
            }
        }
    }
    // A waiting row whose jobId also stands on another row (a person copied a row) is never
    // claimed: its result could not be told apart from the other's. `parse_rows` reports it.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for r in &snapshot.rows {
        *seen.entry(r.job_id.as_str()).or_default() += 1;
    }
    // A waiting row whose job another live daemon lists as its own is never claimed: a
    // write that values moved under (a put-back meant for another row) can show a running
    // or finished job as 待機 until it is repaired, and running it again would be a
    // double run.
    let held: HashSet<&str> = elsewhere.iter().map(|j| j.job_id.as_str()).collect();
    let order: Vec<usize> = waiting_order(snapshot)
        .into_iter()
        .filter(|i| seen.get(snapshot.rows[*i].job_id.as_str()) == Some(&1))
        .filter(|i| !held.contains(snapshot.rows[*i].job_id.as_str()))
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
        let idle_target = |i: &usize| !busy_targets.contains(snapshot.rows[*i].target_key());
        let normal = candidates.iter().copied().find(|i| {
            idle_target(i)
                && snapshot.rows[*i]
                    .requester_key()
                    .is_none_or(|r| !busy_requesters.contains(r))
        });
        let pick = match normal {
            Some(i) => (i, Pick::Normal),
            None => match candidates.iter().copied().find(idle_target) {
                Some(i) => (i, Pick::Fallback),
                None => break,
            },
        };
        let row = &snapshot.rows[pick.0];
        busy_targets.insert(row.target_key());
        if let Some(r) = row.requester_key() {
            busy_requesters.insert(r);
        }
        claims.push(pick);
    }
    PassPlan { stale, claims }
}

/// The duplicate guard of the intake: the `待機` or `実行中` row, if any, for the same
/// panel (target) and function as a new press.
pub fn duplicate_of<'a>(
    snapshot: &'a Snapshot,
    target: &str,
    function: &str,
) -> Option<&'a QueueRow> {
    snapshot.rows.iter().find(|r| {
        (r.state.is(State::Waiting) || r.state.is(State::Running))
            && r.target_key() == target.trim()
            && r.function.trim() == function.trim()
    })
}

/// The answer to a duplicate press: `既に実行中です（依頼: <依頼者> / HH:mm）`, with the
/// existing row's requester (or `不明` when empty) and its 受付日時 in the sheet's zone.
pub fn duplicate_message(existing: &QueueRow, tz: Tz) -> String {
    let who = existing.requester_key().unwrap_or("不明");
    let at = existing
        .received_at
        .map(|t| t.with_timezone(&tz).format("%H:%M").to_string())
        .unwrap_or_else(|| "--:--".to_string());
    format!("既に実行中です（依頼: {who} / {at}）")
}

/// For each waiting row (index into `Snapshot::rows`), how many waiting rows were received
/// before it, in queue order.
pub fn waiting_positions(snapshot: &Snapshot) -> Vec<(usize, usize)> {
    waiting_order(snapshot)
        .into_iter()
        .enumerate()
        .map(|(ahead, index)| (index, ahead))
        .collect()
}

/// The panel status of a waiting row: `⏳ 順番待ち (前に n 件)`.
pub fn waiting_text(ahead: usize) -> String {
    format!("⏳ 順番待ち (前に {ahead} 件)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::RowState;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 0)
            .single()
            .unwrap()
    }

    fn at(minutes: i64, seconds: i64) -> DateTime<Utc> {
        t0() + Duration::minutes(minutes) + Duration::seconds(seconds)
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
        }
    }

    fn snap(rows: Vec<QueueRow>) -> Snapshot {
        Snapshot {
            rows,
            problems: vec![],
        }
    }

    fn plan(s: &Snapshot, slots: usize) -> Vec<String> {
        plan_pass(
            s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
            &[],
            3,
            |r, picked| r.command != "report" || picked.iter().all(|p| p.command != "report"),
        );
        assert_eq!(p.claims, vec![(0, Pick::Normal), (2, Pick::Normal)]);
    }

    fn running_since(started: DateTime<Utc>) -> Snapshot {
        let mut r = row(2, State::Running, "A", "x@example.com");
        r.started_at = Some(started);
        snap(vec![r, row(3, State::Waiting, "A", "y@example.com")])
    }

    #[test]
    fn stale_boundary_is_strictly_more_than_fifteen_minutes() {
        let policy = ClaimPolicy::default();
        let now = at(100, 0);
        for (age, times_out) in [
            (Duration::minutes(14) + Duration::seconds(59), false),
            (Duration::minutes(15), false),
            (Duration::minutes(15) + Duration::seconds(1), true),
            (Duration::minutes(15) + Duration::milliseconds(1), true),
            (Duration::minutes(15) + Duration::seconds(60), true),
        ] {
            let s = running_since(now - age);
            let p = plan_pass(&s, now, &policy, &HashMap::new(), &[], 1, |_, _| true);
            assert_eq!(
                !p.stale.is_empty(),
                times_out,
                "a job running for {age} should time out: {times_out}"
            );
            // A timed-out row frees its target in the same pass.
            assert_eq!(
                p.claims.len(),
                usize::from(times_out),
                "target A frees up only when the job timed out ({age})"
            );
        }
    }

    #[test]
    fn a_row_an_apps_script_worker_left_running_blocks_its_target_until_stale_after() {
        // The minute-trigger workers wrote their own text (or nothing) in ワーカー: no sheetq
        // heartbeat speaks for them, so only the age of the row counts.
        let now = at(100, 0);
        for worker in ["AppsScript", ""] {
            for (age, times_out) in [
                (Duration::minutes(10), false),
                (Duration::minutes(16), true),
            ] {
                let mut s = running_since(now - age);
                s.rows[0].worker = worker.to_string();
                let p = plan_pass(
                    &s,
                    now,
                    &ClaimPolicy::default(),
                    &HashMap::new(),
                    &[],
                    1,
                    |_, _| true,
                );
                assert_eq!(
                    (p.stale.len(), p.claims.len()),
                    if times_out { (1, 1) } else { (0, 0) },
                    "a row left 実行中 {age} ago by worker {worker:?}: times out only past stale_after, and its target waits until then"
                );
            }
        }
    }

    #[test]
    fn rows_of_a_dead_daemon_time_out_at_once() {
        let now = at(100, 0);
        let s = running_since(now - Duration::minutes(1));
        let mut beats = HashMap::new();
        beats.insert("vm-1".to_string(), now - Duration::minutes(3));
        let p = plan_pass(&s, now, &ClaimPolicy::default(), &beats, &[], 1, |_, _| {
            true
        });
        assert!(
            matches!(&p.stale[..], [Stale { index: 0, reason: StaleReason::DeadWorker { daemon_id, .. } }] if daemon_id == "vm-1"),
            "vm-1's heartbeat is 3 min old (> dead_after 2 min): {:?}",
            p.stale
        );
        beats.insert("vm-1".to_string(), now - Duration::seconds(30));
        let p = plan_pass(&s, now, &ClaimPolicy::default(), &beats, &[], 1, |_, _| {
            true
        });
        assert!(
            p.stale.is_empty(),
            "a live daemon's one-minute-old job keeps running"
        );
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
        }];
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
            &elsewhere,
            1,
            |_, _| true,
        );
        assert_eq!(
            p.claims,
            vec![(1, Pick::Normal)],
            "finished elsewhere: A is free"
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
        }];
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
        }];
        let p = plan_pass(
            &s,
            at(60, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
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
    fn a_running_row_without_a_start_time_times_out_with_a_reason() {
        let mut r = row(2, State::Running, "A", "");
        r.started_at = None;
        let s = snap(vec![r]);
        let p = plan_pass(
            &s,
            at(5, 0),
            &ClaimPolicy::default(),
            &HashMap::new(),
            &[],
            1,
            |_, _| true,
        );
        assert_eq!(
            p.stale,
            vec![Stale {
                index: 0,
                reason: StaleReason::NoStartTime
            }]
        );
        assert!(p.stale[0]
            .reason
            .message(&ClaimPolicy::default(), at(5, 0))
            .contains("開始日時"));
    }

    #[test]
    fn the_stale_message_says_how_long_it_ran() {
        let msg = StaleReason::Expired {
            started_at: at(0, 0),
        }
        .message(&ClaimPolicy::default(), at(16, 0));
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
    fn waiting_counts_follow_queue_order() {
        let mut first = row(4, State::Waiting, "C", "");
        first.received_at = Some(at(1, 0));
        let s = snap(vec![
            row(2, State::Running, "A", ""),
            row(3, State::Waiting, "B", ""),
            first,
            row(5, State::Done, "D", ""),
            row(6, State::Waiting, "E", ""),
        ]);
        let texts: Vec<(String, String)> = waiting_positions(&s)
            .into_iter()
            .map(|(i, n)| (s.rows[i].job_id.clone(), waiting_text(n)))
            .collect();
        assert_eq!(
            texts,
            [
                ("job-4".to_string(), "⏳ 順番待ち (前に 0 件)".to_string()),
                ("job-3".to_string(), "⏳ 順番待ち (前に 1 件)".to_string()),
                ("job-6".to_string(), "⏳ 順番待ち (前に 2 件)".to_string()),
            ]
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
            let p = plan_pass(&s, at(60, 0), &ClaimPolicy::default(), &HashMap::new(), &[], slots, |_, _| true);
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
