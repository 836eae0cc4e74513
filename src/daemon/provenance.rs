//! The daemon's step for `provenance`: the mark that goes with each continuation row this
//! daemon appends (in the same atomic batch), the search for marks when a read shows a
//! waiting row that says it is a continuation step and that no mark this daemon knows of
//! answers for, and the removal of marks whose rows are no longer waiting, riding the claim
//! commit. A daemon alone on its spreadsheet knows every mark it wrote and never searches.

use tracing::{debug, warn};

use super::{Daemon, Poll};
use crate::provenance::{Fields, CONTINUATION_KEY};
use crate::sheets::Request;

impl Daemon {
    /// The request that marks the continuation row `fields` as sheetq's, for the batch that
    /// appends it; the mark is known to this daemon from now on.
    pub(super) fn continuation_mark(&mut self, fields: &Fields<'_>) -> Request {
        let value = fields.mark();
        self.served.marks.wrote(value.clone());
        Request::MarkSheet {
            sheet_id: self.served.layout.queue_sheet_id,
            key: CONTINUATION_KEY.to_string(),
            value,
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
        let sees_all = crate::provenance::sees_every_mark(&self.served.account, others);
        if !sees_all && self.served.marks_seen_by_all {
            warn!("a live daemon of this spreadsheet calls as a service account of another Cloud project, whose marks this one cannot read: continuation rows without a mark of ours are left to it; serve one spreadsheet from one project (docs/design.md)");
        }
        self.served.marks_seen_by_all = sees_all;
        let asked = self.served.marks.to_search(&poll.snapshot);
        if asked.is_empty() {
            return;
        }
        match self.sheets.search_metadata(CONTINUATION_KEY).await {
            Ok(found) => {
                // Only PROJECT entries are sheetq's own: a DOCUMENT one with the same key is
                // anyone's with access to the file.
                let marks = found
                    .into_iter()
                    .filter(|m| m.project_only && m.key == CONTINUATION_KEY)
                    .map(|m| m.value);
                self.served.marks.learn(&asked, marks);
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

    /// The requests that remove the marks whose rows `fresh` shows no longer waiting (or
    /// gone, when it read the whole queue), for the claim commit; with the marks they
    /// remove, to forget once the commit applied.
    pub(super) fn unmarks(&self, fresh: &Poll) -> (Vec<Request>, Vec<String>) {
        let marks = self.served.marks.to_remove(&fresh.snapshot, fresh.full);
        let requests = marks
            .iter()
            .map(|value| Request::Unmark {
                key: CONTINUATION_KEY.to_string(),
                value: value.clone(),
            })
            .collect();
        (requests, marks)
    }

    /// Forgets the marks a commit that applied removed.
    pub(super) fn unmarked(&mut self, marks: &[String]) {
        self.served.marks.removed(marks);
    }
}
