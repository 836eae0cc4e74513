//! The poll: what one read of the sheet covers (queue header, the unfinished window of the
//! queue, the worker sheet, every panel's function table, and the rows our bindings sit on
//! now), how it is parsed, and the panel discovery that refreshes which sheets are panels.

use std::collections::HashMap;

use std::time::Duration as StdDuration;

use tracing::{debug, warn};

use crate::a1;
use crate::binding;
use crate::claim;
use crate::lease::{LeaseState, WORKER_SHEET};
use crate::panel::index_sheet::{self, IndexEntry};
use crate::panel::{self, PanelIndex, PanelTable};
use crate::queue::{self, Column, ColumnMap, QueueRow, Snapshot, State, QUEUE_SHEET};
use crate::sheet_text::Logged;
use crate::sheets::{Cell, Filter, FilterRead, SheetMeta, ValueRange};
use crate::watch;
use crate::workers::{self, Heartbeat};

use super::{Daemon, DaemonError};

/// The window of unfinished rows the polls read, and where the sweep above it goes next.
#[derive(Debug)]
pub(super) struct Window {
    /// First sheet row that may hold an unfinished job; rows above are all finished.
    pub(super) start: u32,
    /// Where the next sweep slice of the 状態 column above the window starts.
    pub(super) sweep_at: u32,
}

impl Default for Window {
    /// The whole queue below its header, until start-up finds the window.
    fn default() -> Self {
        Window {
            start: 2,
            sweep_at: 2,
        }
    }
}

/// One read of what a decision needs: the queue (window) and the worker sheet.
#[derive(Clone)]
pub(super) struct Poll {
    pub(super) snapshot: Snapshot,
    pub(super) lease: LeaseState,
    /// How long this daemon has watched the lease cell hold this very value.
    pub(super) lease_quiet: StdDuration,
    /// What this daemon has watched of the other daemons and the running rows, as of this
    /// read (docs/design.md §3.1).
    pub(super) watched: claim::Watched,
    /// The heartbeat rows themselves (with the jobs each daemon lists as running), each with
    /// how long this daemon has watched it stand still.
    pub(super) workers: Vec<Heartbeat>,
    /// 1-based row of our heartbeat in `_ワーカー`, if we have one.
    pub(super) own_heartbeat_row: Option<u32>,
    /// Whether this read covered the whole queue.
    pub(super) full: bool,
    /// Function tables of the known panels, by target label.
    pub(super) tables: HashMap<String, PanelTable>,
    /// Where each binding looked up sits now: the row it resolved to (`None`: it matched
    /// nothing, its row was deleted). Bindings not looked up are absent.
    pub(super) bound: HashMap<i32, Option<QueueRow>>,
    /// The index sheet's rows, when the spreadsheet has an index.
    pub(super) index: Option<IndexRead>,
    /// The row an append of new queue rows starts its range at ([`queue::append_anchor`]).
    pub(super) append_from: u32,
    /// The protected ranges of the sheets this read covered, when it was the lease
    /// acquire's (a `spreadsheets.batchUpdate`, whose reply lists them): who may tick which
    /// panel cell, read in the very call that read the ticks (`crate::panel::guard`).
    pub(super) protections: Option<Vec<(i32, Vec<crate::sheets::ProtectedRange>)>>,
}

/// The index sheet as one poll read it.
#[derive(Clone)]
pub(super) struct IndexRead {
    pub(super) sheet_id: i32,
    pub(super) title: String,
    pub(super) entries: Vec<IndexEntry>,
}

impl Poll {
    /// The row holding `job_id` as this read showed it, to give a row a misplaced write hit
    /// its values back. A row without a jobId was blank (a person inserted it, or a
    /// cut-and-paste emptied it): blank it is again.
    pub(super) fn before_image(&self, job_id: &str) -> Option<QueueRow> {
        if job_id.trim().is_empty() {
            return Some(QueueRow::blank(0));
        }
        self.snapshot.by_job_id(job_id).cloned()
    }

    /// Every row of this read holding `job_id` (a copied row may repeat it).
    pub(super) fn rows_with_job(&self, job_id: &str) -> Vec<&QueueRow> {
        self.snapshot
            .rows
            .iter()
            .filter(|r| r.job_id == job_id)
            .collect()
    }
}

/// What one read asks for, in this order: the queue header, the queue window, the worker
/// sheet, the panels' function tables, then (a poll's only) the sweep slice and the marker
/// cells of every sheet that may be a panel.
pub(super) struct ReadPlan {
    pub(super) ranges: Vec<String>,
    tables: usize,
    /// First and last row of the sweep slice of the 状態 column, when there is one.
    sweep: Option<(u32, u32)>,
    markers: usize,
    /// The index sheet, when the spreadsheet has one: its id and title.
    index: Option<(i32, String)>,
    /// The inputs' `choices_from` ranges read last, in order (those whose sheet exists).
    listed: Vec<String>,
}

impl ReadPlan {
    /// The sheet row the window range starts at.
    fn window_start(&self) -> u32 {
        self.ranges
            .get(1)
            .and_then(|r| a1::A1Range::parse(r).ok())
            .and_then(|r| r.start_row)
            .map(|r| r + 1)
            .unwrap_or(2)
    }

    /// Whether the window covers the whole queue.
    fn full(&self) -> bool {
        self.window_start() <= 2
    }
}

/// How old the sheet list may get while busy passes keep the heartbeat riding other writes
/// before it is read on its own (idle, every heartbeat brings it).
const SHEET_LIST_OVERDUE: StdDuration = StdDuration::from_secs(300);

impl Daemon {
    /// Finds the panels by their marker cells (two calls: metadata, markers). Done at start
    /// and when a read shows the layout changed under it (a range that no longer parses);
    /// otherwise the sheet list rides on the heartbeat's write ([`Self::take_in_sheets`])
    /// and the markers on every poll.
    pub(super) async fn discover_panels(&mut self) -> Result<(), DaemonError> {
        let (meta, index) =
            crate::apply::panel::discover(self.sheets.as_ref(), &self.config.panel).await?;
        self.take_in_protections(&meta);
        self.take_in_sheets(meta.sheets);
        self.take_in_panels(index);
        Ok(())
    }

    /// The sheets of the spreadsheet as a reply listed them: titles and ids for the next
    /// reads and for turning A1 writes into grid requests.
    pub(super) fn take_in_sheets(&mut self, sheets: Vec<SheetMeta>) {
        self.served.sheets.seen = Some(tokio::time::Instant::now());
        if sheets.is_empty() || sheets == self.served.sheets.meta.sheets {
            return;
        }
        self.served.sheets.ids = sheets
            .iter()
            .map(|s| (s.title.clone(), s.sheet_id))
            .collect();
        self.served.sheets.meta.sheets = sheets;
        if let Some(q) = self.served.sheets.meta.sheet(QUEUE_SHEET) {
            self.served.layout.last_col = q.last_column();
        }
        let log_title = crate::joblog::LOG_SHEET;
        if let Some(log) = &self.served.layout.log {
            if self.served.sheets.ids.get(log_title) != Some(&log.sheet_id) {
                // A claim commit inserting rows into a sheet that is gone would be refused
                // whole: no more log rows until a restart finds the sheet again.
                warn!("the sheet '{log_title}' is gone; jobs' output is kept under state_dir only until sheetq restarts (after `sheetq init` makes it again)");
                self.served.layout.log = None;
            }
        }
    }

    /// The panels the marker cells show now; what is wrong with them is logged when it
    /// changes, not on every poll.
    pub(super) fn take_in_panels(&mut self, index: PanelIndex) {
        if index == self.served.panels.index {
            return;
        }
        if index.conflicts != self.served.panels.index.conflicts
            || index.problems != self.served.panels.index.problems
        {
            for c in &index.conflicts {
                warn!(target = %Logged(&c.label), "{}", Logged(&c.to_string()));
            }
            for p in &index.problems {
                warn!("{}", Logged(&p.to_string()));
            }
        }
        self.served.panels.index = index;
    }

    /// Whether busy passes have kept the sheet list from riding a heartbeat for so long
    /// that it is read instead.
    pub(super) fn sheets_overdue(&self) -> bool {
        self.served
            .sheets
            .seen
            .is_none_or(|t| t.elapsed() >= SHEET_LIST_OVERDUE)
    }

    /// Where the unfinished part of the queue starts, from its 状態 column alone: at start
    /// (and after the layout changed), so that the first poll reads the window, not every
    /// finished row.
    pub(super) async fn find_window(&mut self) -> Result<(), DaemonError> {
        let c = self.served.layout.columns.letters(Column::State);
        let read = self
            .sheets
            .read(&[a1::range(QUEUE_SHEET, &format!("{c}2:{c}"))])
            .await?;
        self.take_in_window(read.first().map(|v| v.values.as_slice()).unwrap_or(&[]));
        Ok(())
    }

    /// [`Self::find_window`] from the 状態 cells of rows 2 and on, read already (each row
    /// holding its 状態 cell, or nothing; none after the last filled one).
    pub(super) fn take_in_window(&mut self, values: &[Vec<Cell>]) {
        let last_row = values.len() as u32 + 1;
        // A queue without a finished row whose archive never took one (a fresh one, right
        // after `init`) has nothing to archive, nor to put back, until a row that finishes
        // from now on is past the retention: no archive pass (a lease taken and given back,
        // two writes) before then.
        let finished = |row: &Vec<Cell>| self.state_cell_finished(row).unwrap_or(false);
        self.served.archive.not_before = match self.config.retention {
            Some(retention) if !self.served.archive.before && !values.iter().any(finished) => {
                Some(tokio::time::Instant::now() + retention)
            }
            _ => None,
        };
        self.served.window.start = self
            .first_open_in_sweep(values, 2)
            .unwrap_or(last_row)
            .max(2);
        self.served.window.sweep_at = 2;
    }

    /// Whether a sweep slice's 状態 cells hold an unfinished row; the first one's sheet row.
    fn first_open_in_sweep(&self, values: &[Vec<Cell>], from: u32) -> Option<u32> {
        values.iter().enumerate().find_map(|(i, row)| {
            (self.state_cell_finished(row) == Some(false)).then_some(from + i as u32)
        })
    }

    /// Whether a 状態 cell (the first of `row`) shows a finished job; `None` when empty.
    fn state_cell_finished(&self, row: &[Cell]) -> Option<bool> {
        let text = row.first().map(queue::cell_text).unwrap_or_default();
        let text = text.trim();
        let states = &self.config.states;
        (!text.is_empty()).then(|| states.parse(text).is_some_and(State::is_final))
    }

    /// What a read asks for: the queue header, the unfinished window of the queue (or all of
    /// it: asked for, or rows moved recently), the worker sheet and the function table of
    /// each panel. A poll (`poll`, not the lease acquire) also asks for the next slice of the
    /// sweep and the marker cells of every sheet that may be a panel, so neither a row set
    /// back to 待機 above the window nor a new or renamed panel costs a read of its own.
    pub(super) fn read_plan(&self, full: bool, poll: bool) -> ReadPlan {
        let full = full || self.rows_moving();
        let l = &self.served.layout.last_col;
        let start = if full {
            2
        } else {
            self.served.window.start.max(2)
        };
        let mut ranges = vec![
            a1::range(QUEUE_SHEET, &format!("A1:{l}1")),
            a1::range(QUEUE_SHEET, &format!("A{start}:{l}")),
            a1::range(WORKER_SHEET, &format!("A1:{}", self.worker_last_column())),
        ];
        let tables = panel::table_ranges(&self.served.panels.index, &self.config.panel);
        let table_count = tables.len();
        ranges.extend(tables);
        let sweep = poll.then(|| self.sweep_slice(start)).flatten();
        if let Some((from, to)) = sweep {
            let c = self.served.layout.columns.letters(Column::State);
            ranges.push(a1::range(QUEUE_SHEET, &format!("{c}{from}:{c}{to}")));
        }
        let markers = if poll {
            panel::marker_ranges(&self.served.sheets.meta, &self.config.panel)
        } else {
            Vec::new()
        };
        let marker_count = markers.len();
        ranges.extend(markers);
        // The index rides every poll, and the lease acquire's read when this daemon takes in
        // ticks (its intake clears the index's ticks from that read).
        let index = self
            .served
            .panels
            .index
            .index_sheet
            .clone()
            .filter(|_| poll || self.config.intake == crate::config::Intake::Poll);
        if let Some((_, title)) = &index {
            ranges.push(a1::range(
                title,
                &format!(
                    "A1:{}{}",
                    a1::column_letters(self.config.panel.marker_cell.col),
                    index_sheet::INDEX_MAX_ROWS
                ),
            ));
        }
        // The inputs' lists, in the read sent anyway; a range whose sheet is gone (or that
        // lies past its grid) is left out, since Google would refuse the whole read, and a
        // choice from it is refused instead.
        let listed: Vec<String> = self
            .registry
            .catalog()
            .choices_ranges()
            .into_iter()
            .filter(|r| {
                crate::sheets::fits_grid(&self.served.sheets.meta, r)
                    && crate::inputs::list_read_range(r).is_some()
            })
            .collect();
        ranges.extend(
            listed
                .iter()
                .filter_map(|r| crate::inputs::list_read_range(r)),
        );
        ReadPlan {
            ranges,
            tables: table_count,
            sweep,
            markers: marker_count,
            index,
            listed,
        }
    }

    /// The last column of `_ワーカー` a read covers: the heartbeat's, and the stop column
    /// right of it once the sheet is that wide (`workers::STOP_COLUMN`; a read past a
    /// sheet's last column is refused).
    fn worker_last_column(&self) -> String {
        let wide = self
            .served
            .sheets
            .meta
            .sheet(WORKER_SHEET)
            .is_some_and(|s| s.column_count > workers::STOP_COLUMN as i32);
        if wide {
            a1::column_letters(workers::STOP_COLUMN)
        } else {
            workers::LAST_COLUMN.to_string()
        }
    }

    /// The rows of the 状態 column this poll sweeps: the next `sweep_rows` above the window
    /// `start`, from where the last slice ended, starting over at row 2 once it reaches the
    /// window. None when nothing lies above the window (or the sweep is off).
    fn sweep_slice(&self, start: u32) -> Option<(u32, u32)> {
        let rows = self.config.sweep_rows;
        if rows == 0 || start <= 2 {
            return None;
        }
        let from = if (2..start).contains(&self.served.window.sweep_at) {
            self.served.window.sweep_at
        } else {
            2
        };
        Some((from, (from + rows - 1).min(start - 1)))
    }

    /// One read (`values.batchGetByDataFilter`): the A1 ranges of [`Self::read_plan`] and,
    /// in the same call, the row each of our bindings sits on now.
    pub(super) async fn poll(&mut self, full: bool) -> Result<Poll, DaemonError> {
        let plan = self.read_plan(full, true);
        let ids = self.bindings_in_use();
        let filters: Vec<Filter> = plan
            .ranges
            .iter()
            .cloned()
            .map(Filter::A1)
            .chain(ids.iter().copied().map(Filter::Metadata))
            .collect();
        let mut reads = match self.sheets.read_filtered(&filters).await {
            Ok(reads) => reads,
            Err(e) => {
                // Until a read succeeds again, nobody's silence is news (docs/design.md §3.1).
                self.served.watch.read_failed();
                return Err(e.into());
            }
        };
        let bound_reads = reads.split_off(plan.ranges.len().min(reads.len()));
        let values: Vec<ValueRange> = reads
            .into_iter()
            .zip(&plan.ranges)
            .map(|(read, asked)| {
                read.ranges
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| ValueRange::new(asked.clone(), Vec::new()))
            })
            .collect();
        let mut poll = self.parse_poll(&plan, &values)?;
        poll.bound = ids
            .into_iter()
            .zip(bound_reads)
            .map(|(id, read)| (id, self.bound_row(&read)))
            .collect();
        Ok(poll)
    }

    /// The rows bindings `ids` sit on now (`None`: a binding that matches no row), in one
    /// read (`values.batchGetByDataFilter`).
    pub(super) async fn read_bound(
        &mut self,
        ids: &[i32],
    ) -> Result<HashMap<i32, Option<QueueRow>>, DaemonError> {
        let filters: Vec<Filter> = ids.iter().copied().map(Filter::Metadata).collect();
        let reads = match self.sheets.read_filtered(&filters).await {
            Ok(reads) => reads,
            Err(e) => {
                self.served.watch.read_failed();
                return Err(e.into());
            }
        };
        Ok(ids
            .iter()
            .copied()
            .zip(reads)
            .map(|(id, read)| (id, self.bound_row(&read)))
            .collect())
    }

    /// The binding ids of our running jobs, of claims not yet settled, of results waiting in
    /// the outbox, and of follow-up writes waiting for the next write-back.
    pub(super) fn bindings_in_use(&self) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .jobs
            .running
            .values()
            .chain(&self.jobs.unsettled)
            .filter_map(|c| binding::id_of_token(&c.tag.token))
            .chain(
                self.outbox
                    .pending()
                    .filter_map(|j| binding::id_of_tag(&j.worker)),
            )
            .chain(self.served.writes.pending.iter().map(|t| t.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The range new queue rows are appended to ([`queue::append_anchor`], from `poll`'s
    /// window, which always reaches the end of the queue): after the last row, not into a
    /// blank row a person left above it, where polls would not see them until the sweep.
    pub(super) fn append_range(&self, poll: &Poll) -> String {
        let from = poll.append_from;
        let l = &self.served.layout.last_col;
        a1::range(QUEUE_SHEET, &format!("A{from}:{l}{from}"))
    }

    /// The queue row a binding lookup resolved to, parsed with its row number.
    pub(super) fn bound_row(&self, read: &FilterRead) -> Option<QueueRow> {
        let (range, values) = read.row()?;
        self.parse_row_at(range, values)
    }

    /// One queue row's cells as the A1 `range` they came from (a bound read, a write's reply).
    pub(super) fn parse_row_at(&self, range: &str, values: &[Cell]) -> Option<QueueRow> {
        let row = a1::A1Range::parse(range).ok()?.start_row? + 1;
        self.parse_row(values, row)
    }

    /// Consecutive queue rows' cells, the first being sheet row `first`.
    pub(super) fn parse_rows(&self, values: &[Vec<Cell>], first: u32) -> Vec<QueueRow> {
        queue::parse_rows(
            values,
            first,
            &self.served.layout.columns,
            &self.config.states,
            self.served.layout.tz,
        )
        .rows
    }

    /// One queue row's cells (a read-back, a bound row, a write's reply) as sheet row `row`.
    pub(super) fn parse_row(&self, values: &[Cell], row: u32) -> Option<QueueRow> {
        queue::parse_rows(
            &[values.to_vec()],
            row,
            &self.served.layout.columns,
            &self.config.states,
            self.served.layout.tz,
        )
        .rows
        .into_iter()
        .next()
    }

    /// Takes a successful read into the watch: the heartbeat rows, the lease cell and each
    /// running row's claim. Fills in how long each heartbeat has stood still, and returns
    /// what the stale rules need of the watch.
    fn watch_read(
        &mut self,
        snapshot: &Snapshot,
        workers: &mut [Heartbeat],
        lease_text: &str,
    ) -> claim::Watched {
        let running = snapshot.rows.iter().filter(|r| r.state.is(State::Running));
        let items = workers
            .iter()
            .map(|h| (watch::heartbeat_key(&h.worker_id), h.fingerprint.clone()))
            .chain([(watch::LEASE_KEY.to_string(), lease_text.to_string())])
            .chain(
                running
                    .clone()
                    .map(|r| (watch::running_key(&r.job_id), r.worker.clone())),
            );
        self.served
            .watch
            .observed(tokio::time::Instant::now().into_std(), items);
        let chrono =
            |d: StdDuration| chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX);
        for h in workers.iter_mut() {
            let key = watch::heartbeat_key(&h.worker_id);
            h.quiet = self.served.watch.unchanged_for(&key);
            h.changed = self.served.watch.changed(&key);
        }
        claim::Watched {
            me: self.config.worker_id.clone(),
            quiet: workers
                .iter()
                .map(|h| (h.worker_id.clone(), chrono(h.quiet)))
                .collect(),
            running_for: running
                .map(|r| {
                    let watched = self
                        .served
                        .watch
                        .unchanged_for(&watch::running_key(&r.job_id));
                    (r.job_id.clone(), chrono(watched))
                })
                .collect(),
            google_now: self.sheets.google_now(),
            zone: Some(self.served.layout.tz),
        }
    }

    /// Takes in the count of archived rows (`_ワーカー!D1`): rows archived since the last
    /// read left the top of the queue, so everything below moved up by as many rows, the
    /// window with it, and the sweep starts again from the top.
    fn take_in_archived(&mut self, cell: Option<&Cell>) {
        let archived = cell.and_then(super::archive::count_of);
        if let (Some(seen), Some(now)) = (self.served.archive.seen, archived) {
            if now > seen {
                let gone = u32::try_from(now - seen).unwrap_or(u32::MAX);
                self.served.window.start = self.served.window.start.saturating_sub(gone).max(2);
                self.served.window.sweep_at = 2;
            }
        }
        self.served.archive.seen = archived.or(self.served.archive.seen);
    }

    /// Parses the values of a [`ReadPlan`]'s ranges, in the plan's order; moves the window
    /// (and the sweep) on, and takes in the panels the marker cells show.
    pub(super) fn parse_poll(
        &mut self,
        plan: &ReadPlan,
        values: &[ValueRange],
    ) -> Result<Poll, DaemonError> {
        let full = plan.full();
        let empty = ValueRange::default();
        let header = values.first().unwrap_or(&empty);
        let header_row = header.values.first().cloned().unwrap_or_default();
        // Columns may be moved by a person at any time: the header is re-read every poll.
        let columns = ColumnMap::from_header(&header_row, &self.config.headers)?;
        self.served.layout.columns = columns;
        let start = plan.window_start();
        let window = values.get(1).unwrap_or(&empty);
        let snapshot = queue::parse_rows(
            &window.values,
            start,
            &self.served.layout.columns,
            &self.config.states,
            self.served.layout.tz,
        );
        let last_row = start + window.values.len() as u32;
        let append_from = append_from(&window.values, start);
        // Move the window down to the first unfinished row (keeping the last row in it, so
        // the range never starts past the grid).
        let first_open = snapshot
            .rows
            .iter()
            .filter(|r| !r.state.is_final())
            .map(|r| r.row)
            .min();
        self.served.window.start = first_open.unwrap_or(last_row.saturating_sub(1)).max(2);
        let tables_at = 3..3 + plan.tables;
        let mut next = tables_at.end;
        if let Some((from, to)) = plan.sweep {
            // An unfinished row above the window (a person set it back to 待機, or a sort
            // put it there) pulls the window back to it: the next poll reads it.
            let slice = values.get(next).unwrap_or(&empty);
            if let Some(open) = self.first_open_in_sweep(&slice.values, from) {
                debug!(
                    row = open,
                    "the sweep found an unfinished row above the window"
                );
                self.served.window.start = self.served.window.start.min(open);
            }
            self.served.window.sweep_at = to + 1;
            next += 1;
        }
        let tables = panel::parse_tables(
            &self.served.panels.index,
            values.get(tables_at).unwrap_or(&[]),
            &self.config.panel,
        );
        if plan.markers > 0 {
            let markers = values.get(next..next + plan.markers).unwrap_or(&[]);
            self.take_in_panels(PanelIndex::build(
                &self.served.sheets.meta,
                markers,
                &self.config.panel,
            ));
        }
        let index = plan.index.as_ref().map(|(sheet_id, title)| IndexRead {
            sheet_id: *sheet_id,
            title: title.clone(),
            entries: values
                .get(next + plan.markers)
                .map(|v| index_sheet::parse_entries(&v.values, &self.config.panel))
                .unwrap_or_default(),
        });
        let listed_at = plan.ranges.len() - plan.listed.len();
        self.served.listed = plan
            .listed
            .iter()
            .zip(values.get(listed_at..).unwrap_or(&[]))
            .map(|(range, read)| (range.clone(), crate::inputs::listed_values(&read.values)))
            .collect();
        let worker = values.get(2).unwrap_or(&empty);
        let lease_text = worker
            .values
            .first()
            .and_then(|r| r.get(1))
            .map(queue::cell_text)
            .unwrap_or_default();
        self.take_in_archived(worker.values.first().and_then(|r| r.get(3)));
        let mut workers = workers::parse(&worker.values, self.served.layout.tz);
        let own_heartbeat_row = workers
            .iter()
            .find(|h| h.worker_id == self.config.worker_id)
            .map(|h| h.row);
        let watched = self.watch_read(&snapshot, &mut workers, &lease_text);
        let lease_quiet = self.served.watch.unchanged_for(watch::LEASE_KEY);
        Ok(Poll {
            snapshot,
            lease: LeaseState::parse(&lease_text),
            lease_quiet,
            watched,
            workers,
            own_heartbeat_row,
            full,
            tables,
            bound: HashMap::new(),
            index,
            append_from,
            protections: None,
        })
    }
}

/// Where an append of new queue rows starts its range ([`queue::append_anchor`]), from the
/// window's cells, the first being sheet row `start`.
fn append_from(values: &[Vec<Cell>], start: u32) -> u32 {
    let text = |c: &Cell| !queue::cell_text(c).trim().is_empty();
    let filled: Vec<(u32, bool)> = (values.iter().enumerate())
        .filter(|(_, cells)| cells.iter().any(text))
        .map(|(i, cells)| (start + i as u32, cells.first().is_some_and(text)))
        .collect();
    queue::append_anchor(&filled)
}
