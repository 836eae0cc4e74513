//! The claim commit as a typed ledger: one atomic `batchUpdate` that every capability rides
//! (docs/design.md §2–§5), built section by section. A section adds a row's entry through
//! [`Ledger::row`] and keeps the [`Place`] it gets back; the reply is then read through that
//! place ([`Place::swapped`], [`Place::read_back`], [`Place::bound_here`]), so no section
//! counts the requests of the others, and adding a section touches only its own code.
//!
//! Only the entries that are read back take a place: the requests that follow them (the
//! heartbeat, log rows, panel texts, continuation marks) are never read by position, which
//! is also what lets the commit leave out the cells someone else's protection bars. The
//! lease's swap is the one exception: the caller appends it after everything else and
//! reads it as the last reply.

use chrono_tz::Tz;

use crate::queue::{self, ColumnMap, QueueRow, StateWords};
use crate::sheets::{BatchUpdateReply, Cell, GridRange, Reply, Request, ValueRange};

/// Google's limit on one request: a request is not applied later than this after it was
/// sent (docs/design.md §6), with a margin.
pub(super) const REQUEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(190);

/// Where a row's entry sits in the commit: its compare-and-swap among the requests (and so
/// among the replies), and its read-back among the `responseRanges`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    swap: usize,
    read_back: usize,
}

impl Place {
    /// Whether the entry's compare-and-swap changed its cell.
    pub(super) fn swapped(self, reply: &BatchUpdateReply) -> bool {
        matches!(
            reply.replies.get(self.swap),
            Some(Reply::CompareAndSwap { changed: 1 })
        )
    }

    /// The entry's row as the reply read it back, after the whole batch applied.
    pub(super) fn read_back(self, reply: &BatchUpdateReply) -> Option<&ValueRange> {
        reply.ranges.get(self.read_back)
    }

    /// Whether the reply shows developer metadata `id` on the entry's row.
    pub(super) fn bound_here(self, reply: &BatchUpdateReply, id: i32) -> bool {
        reply
            .row_metadata
            .get(self.read_back)
            .and_then(|rows| rows.first())
            .is_some_and(|ids| ids.contains(&id))
    }
}

/// Where a row's compare-and-swap landed, as the commit's reply shows it: the same
/// judgement for every section whose swap moves a waiting row (a cancel, an approval turn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Landing {
    /// The swap changed the row it meant: it holds the planned job.
    Landed,
    /// The swap changed another row (a sort moved the queue between the read and the
    /// commit): sheet row `at`, holding job `hit` if the read-back shows one. To be undone.
    Moved { at: u32, hit: Option<String> },
    /// The swap changed nothing: the row was no longer in the state planned.
    Missed,
}

impl Landing {
    /// How a swap that `changed` its cell (or not) landed, given the row `hit` the reply
    /// read back where `planned` was.
    pub(super) fn of(changed: bool, hit: Option<&QueueRow>, planned: &QueueRow) -> Landing {
        match hit {
            _ if !changed => Landing::Missed,
            Some(hit) if hit.job_id == planned.job_id => Landing::Landed,
            hit => Landing::Moved {
                at: hit.map_or(planned.row, |h| h.row),
                hit: hit.map(|h| h.job_id.clone()),
            },
        }
    }
}

/// A commit's reply as the sections read it: through the [`Place`] each entry got, with
/// the rows read back parsed as queue rows (the layout's columns, the state words, the
/// spreadsheet's time zone). What every section's pure settle takes, so a test gives it a
/// fake reply.
pub(super) struct ReadBack<'a> {
    reply: &'a BatchUpdateReply,
    columns: &'a ColumnMap,
    states: &'a StateWords,
    tz: Tz,
}

impl<'a> ReadBack<'a> {
    pub(super) fn new(
        reply: &'a BatchUpdateReply,
        columns: &'a ColumnMap,
        states: &'a StateWords,
        tz: Tz,
    ) -> Self {
        ReadBack {
            reply,
            columns,
            states,
            tz,
        }
    }

    /// Whether the entry at `place` changed its cell.
    pub(super) fn swapped(&self, place: Place) -> bool {
        place.swapped(self.reply)
    }

    /// The queue row the entry at `place` read back, parsed; `hint` is the sheet row it was
    /// asked for.
    pub(super) fn row(&self, place: Place, hint: u32) -> Option<QueueRow> {
        let values = place.read_back(self.reply)?.values.first()?;
        queue::parse_rows(
            std::slice::from_ref(values),
            hint,
            self.columns,
            self.states,
            self.tz,
        )
        .rows
        .into_iter()
        .next()
    }

    /// Whether the reply shows binding `id` on the entry's row.
    pub(super) fn bound_here(&self, place: Place, id: i32) -> bool {
        place.bound_here(self.reply, id)
    }

    /// Where the swap of the entry at `place`, planned on `planned`, landed.
    pub(super) fn landing(&self, place: Place, planned: &QueueRow) -> Landing {
        let hit = self.row(place, planned.row);
        Landing::of(self.swapped(place), hit.as_ref(), planned)
    }
}

/// The requests and read-back ranges of a commit, in the order they go.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    requests: Vec<Request>,
    response_ranges: Vec<String>,
    /// The end of the last entry's requests: nothing before it is ever removed.
    entries_end: usize,
}

impl Ledger {
    /// A ledger that starts with `first` (the lease's fence).
    pub(super) fn starting_with(first: Request) -> Self {
        Ledger {
            requests: vec![first],
            response_ranges: Vec::new(),
            entries_end: 1,
        }
    }

    /// A row's entry: its compare-and-swap, the requests that go with it (`then`), and the
    /// range that reads the row back. Returns where the reply answers for it.
    pub(super) fn row(
        &mut self,
        swap: Request,
        then: impl IntoIterator<Item = Request>,
        read_back: String,
    ) -> Place {
        let place = Place {
            swap: self.requests.len(),
            read_back: self.response_ranges.len(),
        };
        self.requests.push(swap);
        self.requests.extend(then);
        self.response_ranges.push(read_back);
        self.entries_end = self.requests.len();
        place
    }

    /// Requests no one reads back by position.
    pub(super) fn extend(&mut self, requests: impl IntoIterator<Item = Request>) {
        self.requests.extend(requests);
    }

    /// How many requests the ledger holds so far.
    pub(super) fn len(&self) -> usize {
        self.requests.len()
    }

    /// Keeps, of the requests from `from` on, those `keep` lets through. Only for requests
    /// added after every entry: an entry's place never moves.
    pub(super) fn retain_from(&mut self, from: usize, keep: impl Fn(&Request) -> bool) {
        let from = from.max(self.entries_end).min(self.requests.len());
        let rest = self.requests.split_off(from);
        self.requests.extend(rest.into_iter().filter(|r| keep(r)));
    }

    /// The batch's requests and ranges, leaving the ledger empty.
    pub(super) fn take(&mut self) -> (Vec<Request>, Vec<String>) {
        (
            std::mem::take(&mut self.requests),
            std::mem::take(&mut self.response_ranges),
        )
    }
}

/// The compare-and-swap of one queue cell (zero-based `col`, 1-based `row`): `from` to `to`,
/// matching the whole cell, case and all.
pub(super) fn cas(sheet_id: i32, row: u32, col: u32, from: &str, to: &str) -> Request {
    Request::CompareAndSwap {
        range: GridRange::cell(sheet_id, row - 1, col),
        find: from.to_string(),
        replacement: to.to_string(),
    }
}

/// An unconditional write of one cell (1-based `row`).
pub(super) fn cell(sheet_id: i32, row: u32, col: u32, value: Cell) -> Request {
    Request::UpdateCells {
        range: GridRange::cell(sheet_id, row - 1, col),
        rows: vec![vec![value]],
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::queue::{Column, HeaderNames, State};

    /// A commit under test: its ledger (a fence, then one swap entry per row) and the queue's
    /// standard columns its read-backs are parsed in.
    pub(in crate::daemon) struct Fixture {
        ledger: Ledger,
        columns: ColumnMap,
        states: StateWords,
    }

    impl Default for Fixture {
        fn default() -> Self {
            let header: Vec<Cell> = HeaderNames::default()
                .header_row()
                .into_iter()
                .map(Cell::from)
                .collect();
            Fixture {
                ledger: Ledger::starting_with(Request::DeleteMetadata { id: 0 }),
                columns: ColumnMap::from_header(&header, &HeaderNames::default())
                    .expect("the default header has every column"),
                states: StateWords::default(),
            }
        }
    }

    impl Fixture {
        /// Queue row `row` holding job `job` in `state`, as the read before the commit saw it.
        pub(in crate::daemon) fn row(&self, row: u32, job: &str, state: State) -> QueueRow {
            QueueRow {
                job_id: job.into(),
                target: "A".into(),
                state: crate::queue::RowState::Known(state),
                ..QueueRow::blank(row)
            }
        }

        /// An entry swapping row `row`'s 状態, with nothing after it.
        pub(in crate::daemon) fn place(&mut self, row: u32) -> Place {
            self.ledger.row(swap(row), [], range(row))
        }

        /// The commit's reply read as the daemon reads it.
        pub(in crate::daemon) fn read<'a>(&'a self, reply: &'a BatchUpdateReply) -> ReadBack<'a> {
            ReadBack::new(reply, &self.columns, &self.states, chrono_tz::Asia::Tokyo)
        }

        /// A row's cells in the standard columns: its jobId and 状態.
        fn cells(&self, job: &str, state: State) -> Vec<Cell> {
            let mut cells = vec![Cell::from(""); self.columns.width() as usize];
            cells[self.columns.index(Column::JobId) as usize] = Cell::from(job);
            cells[self.columns.index(Column::State) as usize] = Cell::from(self.states.word(state));
            cells[self.columns.index(Column::Target) as usize] = Cell::from("A");
            cells
        }
    }

    /// How one entry's swap came out, and what its row read back.
    pub(in crate::daemon) struct Entry {
        row: u32,
        changed: bool,
        job: String,
        state: State,
    }

    impl Entry {
        /// The swap changed row `row`, which now holds `job` in `state`.
        pub(in crate::daemon) fn swapped(row: u32, job: &str, state: State) -> Self {
            Entry {
                row,
                changed: true,
                job: job.into(),
                state,
            }
        }

        /// The swap changed nothing; row `row` holds `job` in `state`.
        pub(in crate::daemon) fn unchanged(row: u32, job: &str, state: State) -> Self {
            Entry {
                changed: false,
                ..Entry::swapped(row, job, state)
            }
        }
    }

    /// The reply of `fixture`'s commit whose entries came out as `entries` say, in order.
    pub(in crate::daemon) fn reply_of(fixture: &Fixture, entries: &[Entry]) -> BatchUpdateReply {
        let replies = std::iter::once(Reply::Empty)
            .chain(entries.iter().map(|e| Reply::CompareAndSwap {
                changed: u32::from(e.changed),
            }))
            .collect();
        let ranges = entries
            .iter()
            .map(|e| ValueRange::new(range(e.row), vec![fixture.cells(&e.job, e.state)]))
            .collect();
        BatchUpdateReply {
            replies,
            ranges,
            row_metadata: entries.iter().map(|_| vec![Vec::new()]).collect(),
            ..Default::default()
        }
    }

    fn swap(row: u32) -> Request {
        Request::CompareAndSwap {
            range: GridRange::cell(1, row, 10),
            find: "待機".into(),
            replacement: "実行中".into(),
        }
    }

    fn range(row: u32) -> String {
        format!("'_ジョブキュー'!A{row}:R{row}")
    }

    #[test]
    fn each_entry_is_answered_where_it_went_whatever_came_before() {
        let mut ledger = Ledger::starting_with(Request::DeleteMetadata { id: 0 });
        // A section of two-request entries, then one of four, then one of one.
        let cancel = ledger.row(swap(2), [Request::DeleteMetadata { id: 0 }], range(2));
        let claim = ledger.row(
            swap(3),
            [
                Request::DeleteMetadata { id: 0 },
                Request::DeleteMetadata { id: 0 },
                Request::DeleteMetadata { id: 0 },
            ],
            range(3),
        );
        let turn = ledger.row(swap(4), [], range(4));
        ledger.extend([Request::DeleteMetadata { id: 0 }]);
        let (requests, ranges) = ledger.take();
        assert_eq!((requests.len(), ranges.len()), (9, 3));
        let reply = BatchUpdateReply {
            replies: vec![
                Reply::Empty,
                Reply::CompareAndSwap { changed: 1 },
                Reply::Empty,
                Reply::CompareAndSwap { changed: 0 },
                Reply::Empty,
                Reply::Empty,
                Reply::Empty,
                Reply::CompareAndSwap { changed: 1 },
            ],
            ranges: (2..5)
                .map(|r| ValueRange::new(range(r), Vec::new()))
                .collect(),
            row_metadata: vec![vec![vec![]], vec![vec![77]], vec![vec![]]],
            ..Default::default()
        };
        assert!(
            cancel.swapped(&reply),
            "the cancel's swap is the second reply"
        );
        assert!(!claim.swapped(&reply), "the claim's swap changed nothing");
        assert!(
            turn.swapped(&reply),
            "the turn's swap comes after the claim's four"
        );
        assert_eq!(
            turn.read_back(&reply).map(|v| v.range.as_str()),
            Some(range(4).as_str()),
            "each entry reads its own row back"
        );
        assert!(claim.bound_here(&reply, 77) && !cancel.bound_here(&reply, 77));
    }

    #[test]
    fn a_swap_landed_on_its_row_on_another_or_nowhere() {
        let planned = QueueRow {
            job_id: "j1".into(),
            ..QueueRow::blank(5)
        };
        let other = QueueRow {
            job_id: "j2".into(),
            ..QueueRow::blank(5)
        };
        assert_eq!(Landing::of(true, Some(&planned), &planned), Landing::Landed);
        assert_eq!(
            Landing::of(true, Some(&other), &planned),
            Landing::Moved {
                at: 5,
                hit: Some("j2".into())
            },
            "a sort put another job where the planned one was"
        );
        assert_eq!(
            Landing::of(true, None, &planned),
            Landing::Moved { at: 5, hit: None },
            "changed, but the read-back shows no job there"
        );
        assert_eq!(
            Landing::of(false, Some(&planned), &planned),
            Landing::Missed
        );
    }

    #[test]
    fn a_place_past_the_reply_answers_no() {
        let mut ledger = Ledger::starting_with(Request::DeleteMetadata { id: 0 });
        let place = ledger.row(swap(2), [], range(2));
        let empty = BatchUpdateReply::default();
        assert!(!place.swapped(&empty) && place.read_back(&empty).is_none());
    }
}
