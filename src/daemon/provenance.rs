//! The daemon's step for `provenance`: the mark that goes with each continuation row this
//! daemon appends (in the same atomic batch), the search for marks when a read shows a
//! waiting row that says it is a continuation step and that no mark this daemon knows of
//! answers for, and, riding the claim commit, the deletion of the mark of each step it
//! claims (a mark is good for one claim), of marks whose rows are no longer waiting, and the
//! marks made again for steps whose claim did not take. A daemon alone on its spreadsheet
//! knows every mark it wrote and never searches.

use tracing::{debug, warn};

use super::{Daemon, Poll};
use crate::provenance::{Fields, Mark, CONTINUATION_KEY};
use crate::sheets::{MetadataLookup, Request};

/// What this daemon knows of continuation rows' marks.
#[derive(Debug)]
pub(super) struct Continuations {
    /// The marks of continuation rows this daemon knows of (`provenance`).
    pub(super) marks: crate::provenance::Marks,
    /// Whether every live daemon of the spreadsheet calls as an account of our Cloud
    /// project, so that a row without a mark we can see has none (`provenance`).
    pub(super) seen_by_all: bool,
}

impl Continuations {
    /// `marks` known; every daemon presumed to see them until a heartbeat shows otherwise.
    pub(super) fn new(marks: crate::provenance::Marks) -> Self {
        Continuations {
            marks,
            seen_by_all: true,
        }
    }
}

/// A fresh explicit `metadataId` for a mark: random and positive, as the row bindings'.
fn fresh_id() -> i32 {
    rand::random::<i32>().checked_abs().unwrap_or(1).max(1)
}

/// What a claim commit does to the marks: the requests it carries, and what to take up
/// once it applied.
#[derive(Debug, Default)]
pub(super) struct MarkWork {
    pub(super) requests: Vec<Request>,
    /// Marks of rows no longer waiting, deleted.
    removed: Vec<Mark>,
    /// The steps claimed, whose marks the commit deletes.
    spent: Vec<String>,
}

impl Daemon {
    /// The request that marks the continuation row `fields` as sheetq's, for the batch that
    /// appends it; the mark is known to this daemon from now on.
    pub(super) fn continuation_mark(&mut self, fields: &Fields<'_>) -> Request {
        let mark = Mark {
            value: self.served.continuations.marks.value_of(fields),
            id: fresh_id(),
        };
        self.served.continuations.marks.wrote(mark.clone());
        self.mark_request(mark)
    }

    fn mark_request(&self, mark: Mark) -> Request {
        Request::MarkSheet {
            sheet_id: self.served.layout.queue_sheet_id,
            id: mark.id,
            key: CONTINUATION_KEY.to_string(),
            value: mark.value,
        }
    }

    /// Looks the marks up (one read) when `poll` shows a waiting row that says it is a
    /// continuation step and that no known mark answers for: another daemon appended it, or
    /// a person or a trigger wrote the flag. Made after `poll`'s read, the search sees every
    /// mark of every row that read showed, since a mark is created with its row. A failed
    /// search leaves those rows waiting for the next.
    pub(super) async fn learn_marks(&mut self, poll: &Poll) {
        let ours = self.config.worker_id.as_str();
        let dead_after = self.config.dead_after;
        let others = poll
            .workers
            .iter()
            .filter(|h| h.worker_id != ours && !h.stopped && h.quiet < dead_after)
            .map(|h| h.account.as_str());
        let sees_all = crate::provenance::sees_every_mark(&self.served.fleet.account, others);
        if !sees_all && self.served.continuations.seen_by_all {
            warn!("a live daemon of this spreadsheet calls as a service account of another Cloud project, whose marks this one cannot read: continuation rows without a mark of ours are left to it; serve one spreadsheet from one project (docs/design.md)");
        }
        self.served.continuations.seen_by_all = sees_all;
        let asked = self.served.continuations.marks.to_search(&poll.snapshot);
        if asked.is_empty() {
            return;
        }
        match self
            .sheets
            .search_metadata(&MetadataLookup::key(CONTINUATION_KEY))
            .await
        {
            Ok(found) => {
                // Only PROJECT entries on the queue sheet are sheetq's own: a DOCUMENT one
                // with the same key is anyone's with access to the file.
                let queue = self.served.layout.queue_sheet_id;
                let marks = found
                    .into_iter()
                    .filter(|m| {
                        m.project_only && m.key == CONTINUATION_KEY && m.sheet_id == Some(queue)
                    })
                    .map(|m| Mark {
                        value: m.value,
                        id: m.id,
                    });
                self.served.continuations.marks.learn(&asked, marks);
                debug!(
                    rows = asked.len(),
                    "looked up the marks of continuation rows"
                );
            }
            Err(e) => {
                warn!(error = %e, rows = asked.len(), "could not look up the marks of continuation rows; they wait for the next pass");
            }
        }
    }

    /// What the claim commit on `fresh` does to the marks: deletes the mark of each step it
    /// claims (`claimed`: the rows of its claims), and of each row `fresh` shows no longer
    /// waiting (or gone, when it read the whole queue); makes again those given back. By id,
    /// as the row bindings are deleted ("nothing happens if it is gone").
    pub(super) fn mark_work(
        &mut self,
        fresh: &Poll,
        claimed: &[&crate::queue::QueueRow],
    ) -> MarkWork {
        let marks = &self.served.continuations.marks;
        let removed = marks.to_remove(&fresh.snapshot, fresh.full);
        let spending: Vec<Mark> = claimed
            .iter()
            .filter_map(|r| marks.to_spend(r).cloned())
            .collect();
        let mut requests: Vec<Request> = removed
            .iter()
            .chain(&spending)
            .map(|m| Request::DeleteMetadata { id: m.id })
            .collect();
        let creates = self.served.continuations.marks.take_to_create();
        requests.extend(creates.into_iter().map(|m| self.mark_request(m)));
        MarkWork {
            requests,
            removed,
            spent: spending
                .iter()
                .filter_map(|m| m.job().map(str::to_string))
                .collect(),
        }
    }

    /// The claim commit carrying `work` applied: the marks it deleted are forgotten, the
    /// steps it claimed are spent, and a step whose claim did not take (no job of ours runs
    /// it now) gets its mark again with the next commit.
    pub(super) fn marks_committed(&mut self, work: MarkWork) {
        self.served.continuations.marks.removed(&work.removed);
        self.served.continuations.marks.spent(&work.spent);
        for job in &work.spent {
            if !self.jobs.running.contains_key(job) {
                self.served.continuations.marks.give_back(job, fresh_id());
            }
        }
    }
}
