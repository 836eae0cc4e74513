//! Row bindings (docs/design.md §4): the developer metadata that ties a claimed job to its queue row
//! so that Google, not a row number from an earlier read, decides where a write lands.
//!
//! A binding is created in the claim commit, in the same atomic batch as the row's 状態
//! tripwire, with an explicit `metadataId` derived from the claim token (so any daemon can
//! name the binding of any claimed row from its ワーカー cell alone). What Google documents:
//! row metadata stays with its row when rows are inserted or deleted above it, and is deleted
//! with the row. What users measured: a sort covering every filled column moves it with the
//! row; a narrower sort or a cut-and-paste moves only the values and leaves it behind. So a
//! binding is always checked against the row it sits on before it is written through, and
//! the write's reply is checked again; [`plan_write`] is that decision, free of I/O.

use rand::Rng;

use crate::queue::{QueueRow, State};

/// `metadataKey` of a row binding. Short on purpose: keys and values count against the
/// 30,000-character metadata limit of a sheet.
pub const KEY: &str = "sheetq.job";

/// Google's limit on developer metadata keys and values, per sheet and per spreadsheet.
pub const STORAGE_LIMIT_CHARS: usize = 30_000;

/// Unbinds wait for a batch the daemon sends anyway; past this many a batch is sent for them
/// alone (each binding is about 45 characters, so this stays far below the limit).
pub const MAX_PENDING_UNBINDS: usize = 100;

/// A new claim token and the binding id it stands for: a positive int32 (what Google
/// accepts as an explicit `metadataId`), written as 8 hex digits in the ワーカー cell.
pub fn new_token() -> (String, i32) {
    let id: i32 = rand::thread_rng().gen_range(1..=i32::MAX);
    (format!("{id:08x}"), id)
}

/// The binding id a claim token stands for; `None` for a token no binding can have (claims
/// made before bindings existed, by another tool, or a mangled cell), which then keep the
/// re-find-by-jobId path.
pub fn id_of_token(token: &str) -> Option<i32> {
    if token.len() != 8 {
        return None;
    }
    let n = u32::from_str_radix(token, 16).ok()?;
    i32::try_from(n).ok().filter(|id| *id > 0)
}

/// The binding id of a whole ワーカー tag text (`vm-1/0 #3f9c2a1b`).
pub fn id_of_tag(tag: &str) -> Option<i32> {
    crate::queue::WorkerTag::parse(tag).and_then(|t| id_of_token(&t.token))
}

/// What to do with a finished job's result, given what the sheet showed just now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WritePlan {
    /// The binding sits on the job's row and it is still our running claim: write through
    /// the binding.
    Write,
    /// The binding is gone or sits on another row (a narrow sort, a cut-and-paste), while
    /// the job's row is at `row` and still our running claim: move the binding there first
    /// (checked by the commit's read-back); the result is written at a later pass.
    Rebind { row: u32 },
    /// The row no longer carries our running claim (timed out, maybe re-run by another
    /// daemon): its state stands, the result is not written to the queue.
    NotOurs,
    /// No row holds the job any more: a person deleted it. Reported once, written nowhere.
    Deleted,
}

/// Decides where a write to a claimed row may go: a result (`state` is `Some(Running)`: the
/// row must still be our running claim) or a follow-up of a claim pass (a put-back, a
/// timeout's cells, a restore; `None`: any state). `at_binding` is the row the binding
/// resolved to (`None`: it matched nothing); `rows_with_job` are every row of a read that
/// covers the whole queue holding the job's jobId (a copied row may repeat it); `tag` is the
/// claim the row must show (its ワーカー text).
///
/// A row holding the job under another ワーカー text is still ours when that text is no
/// live claim (`live_claim` says whether a row's claim is one a live daemon runs): a claim
/// commit that landed on the wrong row leaves its 開始日時/ワーカー there until its daemon
/// restores them, and waiting for that must not lose the result. The write then puts our
/// ワーカー text back with it.
pub fn plan_write(
    job_id: &str,
    tag: &str,
    state: Option<State>,
    at_binding: Option<&QueueRow>,
    rows_with_job: &[&QueueRow],
    live_claim: impl Fn(&QueueRow) -> bool,
) -> WritePlan {
    let ours = |r: &QueueRow| r.job_id == job_id && (r.worker == tag || !live_claim(r));
    // A result may also go to a row under our own claim that a misplaced write (values a
    // narrow sort moved under another binding) turned 完了 or 待機, or that another daemon
    // timed out while the job ran (its daemon cut off from the API, not dead): only we
    // write those with our claim still on the row, and nobody has claimed it since (a
    // timed-out job's target is held until the job could have ended, so nothing else of
    // its target ran meanwhile). The real outcome replaces the タイムアウト: nothing a job
    // did is dropped (docs/design.md §3.1). A row failed by another daemon keeps its state.
    // Under a ワーカー text that is no live claim, our claim's cells were overwritten
    // (another daemon's misplaced write, or its repair from a read older than our claim,
    // put 待機 or 完了 back): nobody can have claimed the job since, for our heartbeat
    // lists it (docs/design.md §2, rule 3), so the row is still ours to finish.
    let in_state = |r: &QueueRow| match state {
        None => true,
        Some(State::Running) if r.worker == tag => [
            State::Running,
            State::Done,
            State::Waiting,
            State::Timeout,
            State::Cancelled,
        ]
        .iter()
        .any(|s| r.state.is(*s)),
        Some(State::Running) => [State::Running, State::Done, State::Waiting]
            .iter()
            .any(|s| r.state.is(*s)),
        Some(s) => r.state.is(s),
    };
    if let Some(r) = at_binding.filter(|r| ours(r)) {
        return if in_state(r) {
            WritePlan::Write
        } else {
            WritePlan::NotOurs
        };
    }
    // Our own tag first: a copied row may repeat the job under another claim.
    let mut candidates = rows_with_job
        .iter()
        .filter(|r| r.worker == tag)
        .chain(rows_with_job.iter().filter(|r| r.worker != tag));
    match candidates.find(|r| ours(r)) {
        Some(r) if in_state(r) => WritePlan::Rebind { row: r.row },
        Some(_) => WritePlan::NotOurs,
        None if rows_with_job.is_empty() => WritePlan::Deleted,
        None => WritePlan::NotOurs,
    }
}

/// Where the result of a claim made without a binding (by an older version, or another
/// tool) goes: the row that holds the job and our claim text, by the row number this read
/// found, the only way such a row can be reached; written only while it is still running.
pub fn plan_unbound_write(tag: &str, rows_with_job: &[&QueueRow]) -> WritePlan {
    match rows_with_job.iter().find(|r| r.worker == tag) {
        Some(r) if r.state.is(State::Running) => WritePlan::Rebind { row: r.row },
        Some(_) => WritePlan::NotOurs,
        None if rows_with_job.is_empty() => WritePlan::Deleted,
        None => WritePlan::NotOurs,
    }
}

/// What the reply of a write through a binding proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCheck {
    /// The row written holds the job: done.
    Landed,
    /// The binding matched nothing when the write was applied (the row was deleted between
    /// the read and the write): nothing was written; resolve afresh.
    Missed,
    /// The row written holds another job (values moved under the binding between the read
    /// and the write): an incident, to be repaired; resolve afresh.
    Wrong { found_job_id: String },
}

/// Checks the reply row of a write through a binding: `job_id_written` is the jobId cell of
/// the row as it is after the write (`None`: the filter matched nothing).
pub fn check_write(job_id: &str, job_id_written: Option<&str>) -> WriteCheck {
    match job_id_written {
        None => WriteCheck::Missed,
        Some(found) if found == job_id => WriteCheck::Landed,
        Some(found) => WriteCheck::Wrong {
            found_job_id: found.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::RowState;
    use proptest::prelude::*;

    fn row(n: u32, job: &str, state: State, worker: &str) -> QueueRow {
        QueueRow {
            row: n,
            job_id: job.into(),
            received_at: None,
            requester: String::new(),
            panel_sheet: String::new(),
            panel_row: None,
            target: "サーバーA".into(),
            function: String::new(),
            command: "sleep".into(),
            args_json: "{}".into(),
            flags: Vec::new(),
            state: RowState::Known(state),
            started_at: None,
            finished_at: None,
            result_url: String::new(),
            message: String::new(),
            worker: worker.into(),
            cancel_request: String::new(),
            approvals: String::new(),
        }
    }

    const TAG: &str = "vm-1/0 #0000abcd";
    /// What a result asks of its row: still our running claim.
    const RUNNING: Option<State> = Some(State::Running);

    /// Every claim other than ours is one a live daemon runs.
    fn live(_: &QueueRow) -> bool {
        true
    }

    #[test]
    fn tokens_stand_for_positive_int32_ids_and_back() {
        for _ in 0..1000 {
            let (token, id) = new_token();
            assert!(id > 0, "{id} is not a valid explicit metadataId");
            assert_eq!(id_of_token(&token), Some(id), "token {token}");
        }
        assert_eq!(id_of_tag(TAG), Some(0xabcd));
        assert_eq!(
            id_of_token("ffffffff"),
            None,
            "above int32: an old random token"
        );
        assert_eq!(id_of_token("00000000"), None, "0 is not a valid id");
        assert_eq!(id_of_token("3f9c2a"), None, "too short");
        assert_eq!(id_of_token("zzzzzzzz"), None);
        assert_eq!(id_of_tag("someone's note"), None);
    }

    #[test]
    fn a_claim_without_a_binding_is_written_by_row_number_only_while_it_runs_under_our_tag() {
        let legacy = "vm-1/0 #legacy01";
        let ours = row(9, "j1", State::Running, legacy);
        assert_eq!(
            plan_unbound_write(legacy, &[&ours]),
            WritePlan::Rebind { row: 9 }
        );
        let timed_out = row(9, "j1", State::Timeout, legacy);
        assert_eq!(
            plan_unbound_write(legacy, &[&timed_out]),
            WritePlan::NotOurs
        );
        let re_run = row(4, "j1", State::Running, "vm-2/0 #legacy02");
        assert_eq!(
            plan_unbound_write(legacy, &[&re_run]),
            WritePlan::NotOurs,
            "another daemon's claim on the job is not ours to finish"
        );
        assert_eq!(plan_unbound_write(legacy, &[]), WritePlan::Deleted);
    }

    #[test]
    fn a_binding_on_our_running_row_is_written_through() {
        let r = row(7, "j1", State::Running, TAG);
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&r), &[&r], live),
            WritePlan::Write
        );
        // The binding's word is enough: the job's row need not be in the window read.
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&r), &[], live),
            WritePlan::Write
        );
    }

    #[test]
    fn a_narrow_sort_that_left_the_binding_behind_rebinds_to_the_jobs_row() {
        let other = row(7, "j2", State::Waiting, "");
        let ours = row(12, "j1", State::Running, TAG);
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&other), &[&ours], live),
            WritePlan::Rebind { row: 12 }
        );
    }

    #[test]
    fn a_lost_binding_on_an_existing_row_rebinds() {
        let ours = row(4, "j1", State::Running, TAG);
        assert_eq!(
            plan_write("j1", TAG, RUNNING, None, &[&ours], live),
            WritePlan::Rebind { row: 4 }
        );
    }

    #[test]
    fn a_row_timed_out_under_our_claim_takes_the_real_result() {
        // Another daemon timed the job out while we were cut off from the API; the row
        // still shows our claim, so our result replaces the タイムアウト.
        let timed_out = row(4, "j1", State::Timeout, TAG);
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&timed_out), &[&timed_out], live),
            WritePlan::Write
        );
        let failed = row(4, "j1", State::Error, TAG);
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&failed), &[&failed], live),
            WritePlan::NotOurs,
            "a row failed by another daemon keeps its state"
        );
    }

    #[test]
    fn a_row_reclaimed_by_another_daemon_is_not_ours() {
        let rerun = row(4, "j1", State::Running, "vm-2/1 #00001234");
        assert_eq!(
            plan_write("j1", TAG, RUNNING, None, &[&rerun], live),
            WritePlan::NotOurs
        );
    }

    #[test]
    fn no_row_with_the_job_means_it_was_deleted() {
        let other = row(4, "j2", State::Running, "vm-2/0 #00000001");
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&other), &[], live),
            WritePlan::Deleted
        );
        assert_eq!(
            plan_write("j1", TAG, RUNNING, None, &[], live),
            WritePlan::Deleted
        );
    }

    #[test]
    fn a_follow_up_goes_to_the_rows_claim_whatever_its_state() {
        // A claim that landed on a finished row is restored through the binding it left
        // there; the row is not running, yet it is the one to write.
        let hit = row(9, "j1", State::Done, TAG);
        assert_eq!(
            plan_write("j1", TAG, None, Some(&hit), &[&hit], live),
            WritePlan::Write
        );
        let elsewhere = row(3, "j2", State::Done, "vm-2/0 #00000001");
        assert_eq!(
            plan_write("j1", TAG, None, Some(&elsewhere), &[&hit], live),
            WritePlan::Rebind { row: 9 }
        );
        // A timeout's cells wait for the row to be タイムアウト (the swap that made it so).
        let timed_out = row(5, "j1", State::Timeout, TAG);
        assert_eq!(
            plan_write("j1", TAG, Some(State::Timeout), Some(&timed_out), &[], live),
            WritePlan::Write
        );
        assert_eq!(
            plan_write("j1", TAG, Some(State::Timeout), None, &[&hit], live),
            WritePlan::NotOurs
        );
    }

    #[test]
    fn a_result_mends_our_claims_row_that_a_misplaced_write_finished_or_put_back() {
        for state in [State::Done, State::Waiting] {
            let hit = row(7, "j1", state, TAG);
            assert_eq!(
                plan_write("j1", TAG, RUNNING, Some(&hit), &[&hit], live),
                WritePlan::Write,
                "our claim's row turned {state:?} by someone else's misplaced write"
            );
        }
        let failed = row(7, "j1", State::Error, TAG);
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&failed), &[&failed], live),
            WritePlan::NotOurs
        );
    }

    #[test]
    fn a_result_lands_on_our_row_whose_claim_a_repair_from_an_older_read_erased() {
        // Another daemon read our row as 待機 just before we claimed it, then its write
        // through a binding a sort had moved landed there and its repair put the row back
        // as that read showed it: 待機 (or 完了, its own result) and no claim of ours.
        let no_claim = |_: &QueueRow| false;
        for (state, worker) in [(State::Waiting, ""), (State::Done, "vm-2/0 #00000077")] {
            let erased = row(7, "j1", state, worker);
            assert_eq!(
                plan_write("j1", TAG, RUNNING, Some(&erased), &[&erased], no_claim),
                WritePlan::Write,
                "{state:?} under {worker:?}: the job still runs only here"
            );
        }
        // Another daemon's live claim, or a failure it wrote, is not ours to overwrite.
        let failed = row(7, "j1", State::Error, "vm-2/0 #00000077");
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&failed), &[&failed], no_claim),
            WritePlan::NotOurs
        );
        let reclaimed = row(7, "j1", State::Waiting, "vm-2/0 #00000077");
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&reclaimed), &[&reclaimed], live),
            WritePlan::NotOurs
        );
    }

    #[test]
    fn a_claim_left_on_our_row_by_a_commit_that_missed_does_not_take_it_from_us() {
        // Another daemon's claim commit hit our running row: its CAS failed, but its
        // 開始日時/ワーカー landed. That claim runs nothing, so the row is still ours.
        let clobbered = row(7, "j1", State::Running, "vm-2/0 #00000077");
        let failed_claim = |_: &QueueRow| false;
        assert_eq!(
            plan_write(
                "j1",
                TAG,
                RUNNING,
                Some(&clobbered),
                &[&clobbered],
                failed_claim
            ),
            WritePlan::Write
        );
        assert_eq!(
            plan_write("j1", TAG, RUNNING, None, &[&clobbered], failed_claim),
            WritePlan::Rebind { row: 7 }
        );
        // The same text from a claim its daemon runs (the job was re-queued and re-run):
        // not ours to finish.
        assert_eq!(
            plan_write("j1", TAG, RUNNING, Some(&clobbered), &[&clobbered], live),
            WritePlan::NotOurs
        );
    }

    #[test]
    fn the_reply_row_decides_whether_a_write_landed() {
        assert_eq!(check_write("j1", Some("j1")), WriteCheck::Landed);
        assert_eq!(check_write("j1", None), WriteCheck::Missed);
        assert_eq!(
            check_write("j1", Some("j2")),
            WriteCheck::Wrong {
                found_job_id: "j2".into()
            }
        );
    }

    fn any_state() -> impl Strategy<Value = State> {
        prop_oneof![
            Just(State::Waiting),
            Just(State::Running),
            Just(State::Done),
            Just(State::Error),
            Just(State::Timeout)
        ]
    }

    proptest! {
        /// Whatever a person did to the rows, a write is sent only through a binding that
        /// sits on a row holding the job under the expected claim and state, a binding is
        /// moved only to such a row, and "deleted" is said only when no row holds the job.
        #[test]
        fn writes_only_go_to_the_row_under_the_expected_claim(
            rows in prop::collection::vec(
                (0usize..3, any_state(), prop::bool::ANY, 2u32..50), 0..6),
            binding in prop::option::of(0usize..6),
            wanted in prop::option::of(any_state()),
            others_live in prop::bool::ANY,
        ) {
            let jobs = ["j1", "j2", "j3"];
            let rows: Vec<QueueRow> = rows
                .iter()
                .map(|(j, s, mine, n)| {
                    row(*n, jobs[*j], *s, if *mine { TAG } else { "vm-2/0 #00000009" })
                })
                .collect();
            let at = binding.and_then(|i| rows.get(i));
            let with_job: Vec<&QueueRow> = rows.iter().filter(|r| r.job_id == "j1").collect();
            // A result may also mend our own claim's row that a misplaced write turned
            // 完了 or 待機 (also under a ワーカー text that is no live claim), or replace a
            // タイムアウト under our claim; failed rows are never written.
            let in_state = |r: &QueueRow| match wanted {
                Some(State::Running) if r.worker == TAG => !r.state.is(State::Error),
                Some(State::Running) => {
                    [State::Running, State::Done, State::Waiting].iter().any(|s| r.state.is(*s))
                }
                Some(s) => r.state.is(s),
                None => true,
            };
            let claim_live = |_: &QueueRow| others_live;
            let ours = |r: &QueueRow| r.worker == TAG || !others_live;
            match plan_write("j1", TAG, wanted, at, &with_job, claim_live) {
                WritePlan::Write => {
                    let r = at.expect("a write needs a binding");
                    prop_assert_eq!(&r.job_id, "j1");
                    prop_assert!(ours(r), "wrote to a row under a live claim {}", r.worker);
                    prop_assert!(in_state(r), "wrote to a row in state {:?}", r.state);
                }
                WritePlan::Rebind { row: n } => {
                    prop_assert!(with_job.iter().any(|r| r.row == n
                        && ours(r)
                        && in_state(r)));
                }
                WritePlan::Deleted => prop_assert!(with_job.is_empty()),
                WritePlan::NotOurs => prop_assert!(!with_job.is_empty() || at.is_some_and(|r| r.job_id == "j1")),
            }
        }
    }
}
