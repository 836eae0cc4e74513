//! What only sheetq can have written, and the check of a queue row against it; pure.
//!
//! A cell, a flag or code in the spreadsheet grants nothing: every editor can write a cell,
//! the bound Apps Script is theirs to rewrite, and an installable trigger writes the queue
//! as its owner. What no person and no Apps Script can write is developer metadata with
//! `PROJECT` visibility created by sheetq's own Cloud project: Google documents that
//! "Project-visible metadata is only visible to and accessible by the developer project that
//! created the metadata"
//! (https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata#DeveloperMetadata.DeveloperMetadataVisibility).
//! A person's OAuth client and an Apps Script project are other projects, so they can
//! neither read such an entry, nor copy, move or delete it.
//!
//! One fact is marked so far: **a continuation step**, the row a command's `continue`
//! appends, whose args are the command's and whose approvals were given to the step before.
//! Its mark, on the queue sheet (a sheet location, so that it can be created in the same
//! atomic batch as the appended row, whose index is not known in advance), is key
//! [`CONTINUATION_KEY`] with value `"<jobId> <sha256>"`: the digest covers every cell of the
//! row that decides what runs ([`Fields`]), so a row edited after the append (by the
//! owner, or by a trigger running as the owner) no longer matches its mark. The
//! システムフラグ `continuation` stays on the row for people to read; it decides nothing.
//!
//! A mark is removed (riding a claim commit) once its row is no longer waiting, or is gone:
//! the sheet's 30,000 characters of metadata are shared with the row bindings.

use std::collections::{HashMap, HashSet};

use crate::queue::{QueueRow, Snapshot, State};

/// The developer-metadata key of a continuation step's mark.
pub const CONTINUATION_KEY: &str = "sheetq.continuation";

/// The Cloud project of a service account (`NAME@PROJECT.iam.gserviceaccount.com`): the
/// project whose marks it reads and writes. `None` for any other address.
pub fn project_of(account: &str) -> Option<&str> {
    let (_, domain) = account.rsplit_once('@')?;
    domain
        .strip_suffix(".iam.gserviceaccount.com")
        .filter(|p| !p.is_empty())
}

/// Whether a daemon calling as `ours` may take a row without a mark it can see for one
/// that nobody marked: not while a live daemon calls as an account of another project
/// (`others`), whose marks it cannot read (a row it cannot vouch for is then left to them).
pub fn sees_every_mark<'a>(ours: &str, others: impl IntoIterator<Item = &'a str>) -> bool {
    let mine = project_of(ours);
    others.into_iter().all(|a| project_of(a) == mine)
}

/// The cells of a queue row that decide what a job runs, as the mark's digest covers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    pub job_id: &'a str,
    pub requester: &'a str,
    pub panel_sheet: &'a str,
    pub target: &'a str,
    pub function: &'a str,
    pub command: &'a str,
    pub args_json: &'a str,
}

impl<'a> Fields<'a> {
    /// The fields of a row as the queue's parser read them.
    pub fn of_row(row: &'a QueueRow) -> Self {
        Fields {
            job_id: &row.job_id,
            requester: &row.requester,
            panel_sheet: &row.panel_sheet,
            target: &row.target,
            function: &row.function,
            command: &row.command,
            args_json: &row.args_json,
        }
    }

    /// The mark's value on spreadsheet `spreadsheet`: `"<jobId> <sha256 hex>"`. The fields
    /// are compared as the parser reads cells (spaces and tabs at either end aside,
    /// `sheet_text::trim`), so a value written and read back is the same; the spreadsheet's
    /// id is in the digest, so a mark carried to another spreadsheet vouches for nothing.
    pub fn mark(&self, spreadsheet: &str) -> String {
        let t = crate::sheet_text::trim;
        let parts = [
            spreadsheet,
            t(self.job_id),
            t(self.requester),
            t(self.panel_sheet),
            t(self.target),
            t(self.function),
            t(self.command),
            t(self.args_json),
        ];
        // A JSON array: unambiguous however the fields themselves hold commas or quotes.
        let canonical = serde_json::to_string(&parts).unwrap_or_default();
        let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("{} {hex}", t(self.job_id))
    }
}

/// The jobId a mark's value names.
fn job_of(mark: &str) -> Option<&str> {
    mark.split_once(' ').map(|(job, _)| job)
}

/// What sheetq's marks make of one queue row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// The row does not say it is a continuation step.
    Plain,
    /// A continuation step that sheetq appended, its cells as they were appended.
    Continuation,
    /// The row says it is a continuation step, and no search for marks has been made since
    /// it was first seen: it waits for one (never claimed on the word of its flag).
    Unknown,
    /// The row says it is a continuation step, and no mark of sheetq's matches it: the
    /// marks were searched after the row was seen (a mark is created in the very batch that
    /// appends its row), or its cells changed since.
    Unmarked,
}

/// One mark on the queue sheet: its value and its `metadataId` (explicit, chosen by the
/// daemon that creates it, so that it can be deleted by id: the form `check --probe` checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub value: String,
    pub id: i32,
}

impl Mark {
    /// The jobId the mark names.
    pub fn job(&self) -> Option<&str> {
        job_of(&self.value)
    }
}

/// The marks this daemon knows of, by jobId; the rows found to have none; the steps whose
/// mark a claim commit of ours spent (a mark is good for one claim: a finished step turned
/// back to 待機 by hand is no step any more); and the marks to create again.
#[derive(Debug, Clone, Default)]
pub struct Marks {
    /// The spreadsheet the marks are of (in every mark's digest).
    spreadsheet: String,
    known: HashMap<String, Mark>,
    absent: HashSet<String>,
    spent: HashMap<String, Mark>,
    to_create: Vec<Mark>,
}

impl Marks {
    /// The marks of spreadsheet `spreadsheet`, none known yet.
    pub fn new(spreadsheet: &str) -> Self {
        Marks {
            spreadsheet: spreadsheet.to_string(),
            ..Marks::default()
        }
    }

    /// The value of the mark of `fields` on this spreadsheet.
    pub fn value_of(&self, fields: &Fields<'_>) -> String {
        fields.mark(&self.spreadsheet)
    }

    /// Whether the row's システムフラグ says it is a continuation step, in any form that
    /// looks like the word (`sheet_text::skeleton`).
    pub fn claims_continuation(row: &QueueRow) -> bool {
        row.flags
            .iter()
            .any(|f| crate::sheet_text::skeleton(f) == crate::commands::CONTINUATION_FLAG)
    }

    /// What the marks make of `row`.
    pub fn of(&self, row: &QueueRow) -> Provenance {
        if !Self::claims_continuation(row) {
            return Provenance::Plain;
        }
        match self.known.get(&row.job_id) {
            Some(mark) if mark.value == self.value_of(&Fields::of_row(row)) => {
                Provenance::Continuation
            }
            Some(_) => Provenance::Unmarked,
            None if self.absent.contains(&row.job_id) || self.spent.contains_key(&row.job_id) => {
                Provenance::Unmarked
            }
            None => Provenance::Unknown,
        }
    }

    /// Whether sheetq's mark vouches for `row` as a continuation step.
    pub fn vouches(&self, row: &QueueRow) -> bool {
        self.of(row) == Provenance::Continuation
    }

    /// A mark this daemon sends with the row it appends, or found by a search.
    pub fn wrote(&mut self, mark: Mark) {
        if let Some(job) = mark.job().map(str::to_string) {
            self.absent.remove(&job);
            self.known.insert(job, mark);
        }
    }

    /// The jobIds of the waiting rows of `snapshot` that only a search can tell about.
    pub fn to_search(&self, snapshot: &Snapshot) -> Vec<String> {
        snapshot
            .rows
            .iter()
            .filter(|r| r.state.is(State::Waiting))
            .filter(|r| self.of(r) == Provenance::Unknown)
            .map(|r| r.job_id.clone())
            .collect()
    }

    /// What a search made after the rows of `asked` were read found: every mark of ours on
    /// the queue. A row asked about without a mark has none, for good.
    pub fn learn(&mut self, asked: &[String], found: impl IntoIterator<Item = Mark>) {
        for mark in found {
            if mark.job().is_some_and(|j| !self.spent.contains_key(j)) {
                self.wrote(mark);
            }
        }
        for job in asked {
            if !self.known.contains_key(job) {
                self.absent.insert(job.clone());
            }
        }
    }

    /// The mark of the step `row`, for the claim commit that takes it to delete: spent once
    /// that commit applied ([`Marks::spent`]).
    pub fn to_spend(&self, row: &QueueRow) -> Option<&Mark> {
        self.vouches(row)
            .then(|| self.known.get(&row.job_id))
            .flatten()
    }

    /// The claim commit that deleted the marks of `jobs` applied: those steps are no steps
    /// any more, unless given back ([`Marks::give_back`]).
    pub fn spent(&mut self, jobs: &[String]) {
        for job in jobs {
            if let Some(mark) = self.known.remove(job) {
                self.spent.insert(job.clone(), mark);
            }
        }
    }

    /// The claim of step `job` did not take (a person's sort put another row under it, or
    /// another daemon took the row): its mark is created again, under a new id, with the
    /// next commit, and vouches for its row meanwhile.
    pub fn give_back(&mut self, job: &str, new_id: i32) {
        if let Some(mark) = self.spent.remove(job) {
            let mark = Mark {
                value: mark.value,
                id: new_id,
            };
            self.to_create.push(mark.clone());
            self.known.insert(job.to_string(), mark);
        }
    }

    /// The marks to create with the next commit ([`Marks::give_back`]); taken.
    pub fn take_to_create(&mut self) -> Vec<Mark> {
        std::mem::take(&mut self.to_create)
    }

    /// The marks to remove: those whose row is no longer waiting, and, when `snapshot`
    /// covers the whole queue (`whole`), those whose row is gone.
    pub fn to_remove(&self, snapshot: &Snapshot, whole: bool) -> Vec<Mark> {
        let mut out: Vec<Mark> = self
            .known
            .iter()
            .filter(|(job, _)| {
                let rows: Vec<&QueueRow> =
                    snapshot.rows.iter().filter(|r| r.job_id == **job).collect();
                if rows.is_empty() {
                    whole
                } else {
                    rows.iter().all(|r| !r.state.is(State::Waiting))
                }
            })
            .map(|(_, mark)| mark.clone())
            .collect();
        out.sort_by_key(|m| m.id);
        out
    }

    /// Forgets marks that were removed.
    pub fn removed(&mut self, marks: &[Mark]) {
        for mark in marks {
            if let Some(job) = mark.job() {
                if self.known.get(job) == Some(mark) {
                    self.known.remove(job);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::RowState;

    fn step(job: &str, state: State) -> QueueRow {
        let mut r = QueueRow::blank(2);
        r.job_id = job.into();
        r.requester = "alice@example.com".into();
        r.target = "サーバーA".into();
        r.function = "デプロイ".into();
        r.command = "deploy".into();
        r.args_json = r#"{"env":"prod","step":2}"#.into();
        r.flags = vec!["continuation".into()];
        r.state = RowState::Known(state);
        r
    }

    fn snapshot(rows: Vec<QueueRow>) -> Snapshot {
        Snapshot {
            rows,
            problems: Vec::new(),
        }
    }

    const SPREADSHEET: &str = "sheet-1";

    fn mark(row: &QueueRow, id: i32) -> Mark {
        Mark {
            value: Fields::of_row(row).mark(SPREADSHEET),
            id,
        }
    }

    #[test]
    fn a_mark_vouches_only_for_the_row_it_was_made_for() {
        let row = step("j1", State::Waiting);
        let mut marks = Marks::new(SPREADSHEET);
        marks.wrote(mark(&row, 1));
        assert_eq!(marks.of(&row), Provenance::Continuation);
        let mut elsewhere = Marks::new("another-spreadsheet");
        elsewhere.wrote(mark(&row, 1));
        assert_eq!(
            elsewhere.of(&row),
            Provenance::Unmarked,
            "a mark carried to another spreadsheet vouches for nothing there"
        );
        for (what, change) in [
            (
                "args",
                (|r: &mut QueueRow| r.args_json = r#"{"env":"prod","force":true}"#.into())
                    as fn(&mut QueueRow),
            ),
            ("requester", |r| r.requester = "mallory@example.com".into()),
            ("command", |r| r.command = "destroy".into()),
            ("target", |r| r.target = "サーバーB".into()),
            ("function", |r| r.function = "削除".into()),
        ] {
            let mut edited = row.clone();
            change(&mut edited);
            assert_eq!(
                marks.of(&edited),
                Provenance::Unmarked,
                "a row whose {what} changed after the append is not the step sheetq marked"
            );
        }
    }

    #[test]
    fn a_flag_alone_waits_for_a_search_and_is_unmarked_after_one() {
        let mut forged = step("j2", State::Waiting);
        forged.flags = vec!["continuation\u{85}".into()];
        let mut marks = Marks::new(SPREADSHEET);
        assert_eq!(marks.of(&forged), Provenance::Unknown);
        let s = snapshot(vec![forged.clone()]);
        let asked = marks.to_search(&s);
        assert_eq!(asked, ["j2"]);
        marks.learn(&asked, Vec::new());
        assert_eq!(marks.of(&forged), Provenance::Unmarked);
        assert!(
            marks.to_search(&s).is_empty(),
            "one search answers for good"
        );
    }

    #[test]
    fn only_daemons_of_one_project_see_each_others_marks() {
        let a = "sheetq@ops-prod.iam.gserviceaccount.com";
        assert_eq!(project_of(a), Some("ops-prod"));
        assert_eq!(project_of("alice@example.com"), None);
        assert!(sees_every_mark(a, ["vm2@ops-prod.iam.gserviceaccount.com"]));
        assert!(!sees_every_mark(
            a,
            ["sheetq@ops-dev.iam.gserviceaccount.com"]
        ));
        assert!(sees_every_mark(a, []), "alone");
    }

    #[test]
    fn a_row_without_the_flag_is_plain_whatever_the_marks() {
        let mut row = step("j3", State::Waiting);
        row.flags = vec!["heavy".into()];
        assert_eq!(Marks::new(SPREADSHEET).of(&row), Provenance::Plain);
    }

    #[test]
    fn marks_go_once_their_row_is_claimed_or_gone() {
        let waiting = step("w", State::Waiting);
        let running = step("r", State::Running);
        let gone = step("g", State::Waiting);
        let mut marks = Marks::new(SPREADSHEET);
        for (id, r) in [&waiting, &running, &gone].into_iter().enumerate() {
            marks.wrote(mark(r, id as i32));
        }
        let read = snapshot(vec![waiting.clone(), running.clone()]);
        assert_eq!(
            marks.to_remove(&read, false),
            [mark(&running, 1)],
            "a window read says nothing of rows outside it"
        );
        let remove = marks.to_remove(&read, true);
        assert_eq!(remove.len(), 2, "the running row's and the vanished row's");
        marks.removed(&remove);
        assert_eq!(marks.of(&waiting), Provenance::Continuation);
        assert_eq!(marks.of(&running), Provenance::Unknown);
    }

    #[test]
    fn a_mark_is_good_for_one_claim_and_comes_back_when_the_claim_did_not_take() {
        let row = step("s2", State::Waiting);
        let mut marks = Marks::new(SPREADSHEET);
        marks.wrote(mark(&row, 7));
        assert_eq!(marks.to_spend(&row), Some(&mark(&row, 7)));
        marks.spent(&["s2".to_string()]);
        assert_eq!(
            marks.of(&row),
            Provenance::Unmarked,
            "a finished step turned back to 待機 by hand is no step any more"
        );
        marks.learn(&["s2".to_string()], [mark(&row, 7)]);
        assert_eq!(
            marks.of(&row),
            Provenance::Unmarked,
            "nor does a stale search bring it back"
        );
        marks.give_back("s2", 8);
        assert_eq!(marks.of(&row), Provenance::Continuation);
        assert_eq!(
            marks.take_to_create(),
            [mark(&row, 8)],
            "made again under a new id"
        );
        assert!(marks.take_to_create().is_empty());
    }
}
