//! Row bindings (DESIGN §4): the developer metadata that ties a claimed job to its queue row
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

/// Decides where a result may go. `at_binding` is the row the binding resolved to (`None`:
/// it matched nothing); `rows_with_job` are every row of a read that covers the whole queue
/// holding the job's jobId (a copied row may repeat it); `tag` is our claim (ワーカー text).
pub fn plan_write(
    job_id: &str,
    tag: &str,
    at_binding: Option<&QueueRow>,
    rows_with_job: &[&QueueRow],
) -> WritePlan {
    let ours = |r: &QueueRow| r.job_id == job_id && r.worker == tag;
    if let Some(r) = at_binding.filter(|r| ours(r)) {
        return if r.state.is(State::Running) {
            WritePlan::Write
        } else {
            WritePlan::NotOurs
        };
    }
    match rows_with_job.iter().find(|r| ours(r)) {
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
        }
    }

    const TAG: &str = "vm-1/0 #0000abcd";

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
    fn a_binding_on_our_running_row_is_written_through() {
        let r = row(7, "j1", State::Running, TAG);
        assert_eq!(plan_write("j1", TAG, Some(&r), &[&r]), WritePlan::Write);
        // The binding's word is enough: the job's row need not be in the window read.
        assert_eq!(plan_write("j1", TAG, Some(&r), &[]), WritePlan::Write);
    }

    #[test]
    fn a_narrow_sort_that_left_the_binding_behind_rebinds_to_the_jobs_row() {
        let other = row(7, "j2", State::Waiting, "");
        let ours = row(12, "j1", State::Running, TAG);
        assert_eq!(
            plan_write("j1", TAG, Some(&other), &[&ours]),
            WritePlan::Rebind { row: 12 }
        );
    }

    #[test]
    fn a_lost_binding_on_an_existing_row_rebinds() {
        let ours = row(4, "j1", State::Running, TAG);
        assert_eq!(
            plan_write("j1", TAG, None, &[&ours]),
            WritePlan::Rebind { row: 4 }
        );
    }

    #[test]
    fn a_row_that_timed_out_or_was_reclaimed_is_not_ours() {
        let timed_out = row(4, "j1", State::Timeout, TAG);
        assert_eq!(
            plan_write("j1", TAG, Some(&timed_out), &[&timed_out]),
            WritePlan::NotOurs
        );
        let rerun = row(4, "j1", State::Running, "vm-2/1 #00001234");
        assert_eq!(plan_write("j1", TAG, None, &[&rerun]), WritePlan::NotOurs);
    }

    #[test]
    fn no_row_with_the_job_means_it_was_deleted() {
        let other = row(4, "j2", State::Running, "vm-2/0 #00000001");
        assert_eq!(plan_write("j1", TAG, Some(&other), &[]), WritePlan::Deleted);
        assert_eq!(plan_write("j1", TAG, None, &[]), WritePlan::Deleted);
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
        /// Whatever a person did to the rows, a result is written only through a binding
        /// that sits on a row holding the job under our running claim, moved only to such a
        /// row, and "deleted" is said only when no row holds the job.
        #[test]
        fn results_only_go_to_our_running_row(
            rows in prop::collection::vec(
                (0usize..3, any_state(), prop::bool::ANY, 2u32..50), 0..6),
            binding in prop::option::of(0usize..6),
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
            match plan_write("j1", TAG, at, &with_job) {
                WritePlan::Write => {
                    let r = at.expect("a write needs a binding");
                    prop_assert_eq!(&r.job_id, "j1");
                    prop_assert_eq!(&r.worker, TAG);
                    prop_assert!(r.state.is(State::Running));
                }
                WritePlan::Rebind { row: n } => {
                    prop_assert!(with_job.iter().any(|r| r.row == n
                        && r.worker == TAG
                        && r.state.is(State::Running)));
                }
                WritePlan::Deleted => prop_assert!(with_job.is_empty()),
                WritePlan::NotOurs => prop_assert!(!with_job.is_empty() || at.is_some_and(|r| r.job_id == "j1")),
            }
        }
    }
}
