//! The daemon: the poll loop that claims queue rows under the sheet lease, runs them in
//! parallel slots, and writes results back (DESIGN §2–§4, §6).
//!
//! One task owns all sheet state (the poll loop); jobs run in a `JoinSet` and hand back
//! their outcome. Because only that loop ever claims, it is the local mutex of DESIGN §2:
//! two claim passes of one process can never overlap. Between processes, the lease cell
//! serialises claim passes, and a per-row compare-and-swap in the commit catches what the
//! lease cannot (a pause longer than its TTL), so a job never runs twice.
//!
//! API cost per DESIGN §6: an idle poll is one `values.batchGet`; a claim pass adds the lease
//! acquire (which returns the fresh queue) and one commit; the results of every job that
//! finished since the last poll go back in one `values.batchUpdate`, which also carries the
//! heartbeat.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, instrument, warn, Instrument};

use crate::a1;
use crate::claim::{self, ClaimPolicy};
use crate::commands::{JobSpec, Outcome, OutcomeStatus, Registry, Runner};
use crate::config::Config;
use crate::config::Intake;
use crate::lease::{self, Lease, LeaseState, WORKER_SHEET};
use crate::metrics::{self, Health, Metrics, RunningJob};
use crate::notify::Notifier;
use crate::outbox::{Continuation, Finish, FinishedJob, Outbox, OutboxError};
use crate::panel::{self, PanelIndex, PanelOutcome, PanelTable};
use crate::queue::{self, Column, ColumnMap, QueueRow, Snapshot, State, WorkerTag, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{
    BatchUpdate, Cell, GridRange, Reply, Request, Sheets, SheetsError, ValueRange,
};

/// Why the daemon stopped with an error (retryable API trouble never stops it).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Sheets(#[from] SheetsError),
    #[error(
        "sheet '{0}' is missing from the spreadsheet; run `sheetq init --config FILE` to create it"
    )]
    MissingSheet(String),
    #[error(transparent)]
    Layout(#[from] queue::LayoutError),
    #[error("the spreadsheet's time zone: {0}")]
    TimeZone(#[from] sheet_time::TimeError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
}

/// What a finished run leaves behind, for the caller to report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    pub jobs_finished: u64,
    pub claim_conflicts: u64,
    /// Results that could not be written before exit; they stay in the outbox.
    pub results_pending: usize,
}

/// The sheets sheetq works with, found once at start.
#[derive(Debug, Clone)]
struct Layout {
    tz: Tz,
    queue_sheet_id: i32,
    worker_sheet_id: i32,
    /// Letters of the queue sheet's last grid column: reads stay inside the grid.
    last_col: String,
    columns: ColumnMap,
}

/// A job this daemon claimed and is running.
#[derive(Debug, Clone)]
struct Claimed {
    row: QueueRow,
    tag: WorkerTag,
    slot: u32,
}

/// One read of what a decision needs: the queue (window) and the worker sheet.
struct Poll {
    snapshot: Snapshot,
    lease: LeaseState,
    heartbeats: HashMap<String, DateTime<Utc>>,
    /// 1-based row of our heartbeat in `_ワーカー`, if we have one.
    own_heartbeat_row: Option<u32>,
    /// Whether this read covered the whole queue.
    full: bool,
    /// Function tables of the known panels, by target label.
    tables: HashMap<String, PanelTable>,
}

/// Runs the daemon until `shutdown` is cancelled, then drains running jobs within the
/// configured grace period, writes every result it can, and returns.
pub async fn run(
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    shutdown: CancellationToken,
) -> Result<RunReport, DaemonError> {
    run_observed(sheets, config, registry, shutdown, Observers::default()).await
}

/// What watches a running daemon: its metrics, the health verdict behind `/healthz` and the
/// systemd watchdog, and the service manager's notification socket.
#[derive(Clone)]
pub struct Observers {
    pub metrics: Arc<Metrics>,
    pub health: Health,
    pub notifier: Arc<Notifier>,
}

impl Default for Observers {
    fn default() -> Self {
        Self {
            metrics: Arc::new(Metrics::new()),
            health: Health::new(StdDuration::from_secs(60)),
            notifier: Arc::new(Notifier::disabled()),
        }
    }
}

/// [`run`], reporting to `observers`.
pub async fn run_observed(
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    shutdown: CancellationToken,
    observers: Observers,
) -> Result<RunReport, DaemonError> {
    let mut daemon = Daemon::start(sheets, config, registry, observers).await?;
    daemon.run(shutdown).await
}

struct Daemon {
    sheets: Arc<dyn Sheets>,
    config: Config,
    registry: Registry,
    runner: Runner,
    layout: Layout,
    outbox: Outbox,
    policy: ClaimPolicy,
    jobs: JoinSet<(Claimed, Outcome, RunningJob)>,
    observers: Observers,
    running: HashMap<String, Claimed>,
    free_slots: Vec<u32>,
    /// Cancels running jobs once the shutdown grace period is over.
    job_cancel: CancellationToken,
    /// First sheet row that may hold an unfinished job; rows above are all finished.
    window_start: u32,
    polls: u64,
    /// Panels by target label, rebuilt at start and on every full scan.
    panels: PanelIndex,
    /// Sheet title → sheet id, for turning A1 writes into grid requests of a commit.
    sheet_ids: HashMap<String, i32>,
    last_heartbeat: Option<tokio::time::Instant>,
    report: RunReport,
}

impl Daemon {
    async fn start(
        sheets: Arc<dyn Sheets>,
        config: Config,
        registry: Registry,
        observers: Observers,
    ) -> Result<Self, DaemonError> {
        let layout = load_layout(sheets.as_ref(), &config).await?;
        let outbox = Outbox::open(&config.state_dir)?;
        let policy = ClaimPolicy {
            stale_after: chrono::Duration::from_std(config.stale_after)
                .unwrap_or(chrono::Duration::minutes(15)),
            dead_after: chrono::Duration::from_std(config.dead_after)
                .unwrap_or(chrono::Duration::minutes(2)),
        };
        let runner = registry.runner();
        let free_slots = (0..config.slots as u32).rev().collect();
        let mut daemon = Self {
            sheets,
            runner,
            registry,
            layout,
            outbox,
            policy,
            jobs: JoinSet::new(),
            observers,
            running: HashMap::new(),
            free_slots,
            job_cancel: CancellationToken::new(),
            window_start: 2,
            polls: 0,
            panels: PanelIndex::default(),
            sheet_ids: HashMap::new(),
            last_heartbeat: None,
            report: RunReport::default(),
            config,
        };
        daemon.discover_panels().await?;
        daemon.recover().await?;
        Ok(daemon)
    }

    /// After a restart: rows still `実行中` under our id whose result is not in the outbox
    /// were cut off mid-job; they become `エラー` at once. Pending results are written.
    async fn recover(&mut self) -> Result<(), DaemonError> {
        let poll = self.poll(true).await?;
        let now = Utc::now();
        let mut data = Vec::new();
        for row in &poll.snapshot.rows {
            let ours = row
                .worker_tag()
                .is_some_and(|t| t.daemon_id == self.config.worker_id);
            if ours && row.state.is(State::Running) && !self.outbox.contains(&row.job_id) {
                warn!(job.id = %row.job_id, row = row.row, "job was running when this worker stopped; marking it as failed");
                let message =
                    "エラー: ワーカーがジョブの実行中に再起動しました (worker restarted during the job)";
                data.extend(self.finish_cells(row.row, Finish::Error, now, "", message));
                data.extend(self.panel_result(&poll, row, Finish::Error, now, "", message));
            }
        }
        if !data.is_empty() {
            self.sheets.write(&data).await?;
        }
        let mut beat = Vec::new();
        self.heartbeat_into(&poll, &mut beat, true).await?;
        if !beat.is_empty() {
            self.sheets.write(&beat).await?;
        }
        self.flush(&poll, Vec::new()).await?;
        Ok(())
    }

    async fn run(&mut self, shutdown: CancellationToken) -> Result<RunReport, DaemonError> {
        info!(worker = %self.config.worker_id, slots = self.config.slots, "sheetq daemon started");
        let idle_per_minute = 60.0 / self.config.poll_interval.as_secs_f64();
        if idle_per_minute > f64::from(self.config.requests_per_minute) {
            warn!(
                poll_interval = ?self.config.poll_interval,
                requests_per_minute = self.config.requests_per_minute,
                "idle polls alone need {idle_per_minute:.0} requests a minute, more than the budget: polls will wait for it; raise poll_interval"
            );
        }
        let mut ready = false;
        let mut tick = tokio::time::interval(self.config.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
                Some(joined) = self.jobs.join_next(), if !self.jobs.is_empty() => {
                    self.finished(joined)?;
                    continue;
                }
            }
            match self.pass().await {
                Ok(()) => {
                    self.observers.health.poll_completed();
                    self.observers
                        .metrics
                        .poll_succeeded(std::time::SystemTime::now());
                    if !ready {
                        ready = true;
                        if let Err(e) = self.observers.notifier.ready() {
                            warn!(error = %e, "cannot tell the service manager we are ready");
                        }
                    }
                }
                Err(DaemonError::Sheets(e)) if e.is_retryable() => {
                    warn!(error = %e, "poll failed; trying again at the next tick");
                }
                Err(other) => return Err(other),
            }
        }
        self.observers.health.set_stopping();
        if let Err(e) = self.observers.notifier.stopping() {
            debug!(error = %e, "cannot tell the service manager we are stopping");
        }
        self.drain().await?;
        Ok(self.report.clone())
    }

    /// One tick: read, write back what finished (with the panels' waiting/running display and
    /// the heartbeat in the same call), claim what fits, take in ticked boxes.
    async fn pass(&mut self) -> Result<(), DaemonError> {
        while let Some(joined) = self.jobs.try_join_next() {
            self.finished(joined)?;
        }
        self.polls += 1;
        let full = self.polls % u64::from(self.config.full_scan_every) == 0;
        if full {
            self.discover_panels().await?;
        }
        let poll = self.poll(full).await?;
        for p in &poll.snapshot.problems {
            debug!(problem = %p, "queue row not understood");
        }
        let display = self.panel_display(&poll);
        // A write-back that fails must not stop claiming: its results wait in the outbox.
        let wrote_heartbeat = match self.flush(&poll, display).await {
            Ok(wrote) => wrote,
            Err(DaemonError::Sheets(e)) if e.is_retryable() => {
                warn!(error = %e, pending = self.outbox.len(), "could not write results; they stay in the outbox");
                false
            }
            Err(e) => return Err(e),
        };
        let now = Utc::now();
        let plan = claim::plan_pass(
            &poll.snapshot,
            now,
            &self.policy,
            &poll.heartbeats,
            self.free_slots.len(),
            |row| self.may_start(row),
        );
        if !plan.claims.is_empty() || !plan.stale.is_empty() || self.has_ticks(&poll) {
            self.claim_pass(&poll).await?;
        } else if !wrote_heartbeat && self.heartbeat_due() {
            let mut data = Vec::new();
            self.heartbeat_into(&poll, &mut data, false).await?;
            if !data.is_empty() {
                self.sheets.write(&data).await?;
            }
        }
        Ok(())
    }

    /// Whether this daemon may start `row` now: a heavy job (by its command's config or
    /// the row's `heavy` flag) waits while another heavy job runs here, rather than being
    /// claimed and spending its timeout at the heavy gate.
    fn may_start(&self, row: &QueueRow) -> bool {
        let heavy = |command: &str, flags: &[String]| {
            self.registry.is_heavy(command) || flags.iter().any(|f| f == "heavy")
        };
        !heavy(&row.command, &row.flags)
            || !self
                .running
                .values()
                .any(|c| heavy(&c.row.command, &c.row.flags))
    }

    /// Whether polling intake is on and some ▶ box is ticked.
    fn has_ticks(&self, poll: &Poll) -> bool {
        self.config.intake == Intake::Poll
            && poll
                .tables
                .values()
                .any(|t| t.rows.iter().any(|r| r.ticked))
    }

    /// The waiting/running status cells that differ from what the panels show (at most 20),
    /// leaving out rows whose result is about to be written in the same call.
    fn panel_display(&self, poll: &Poll) -> Vec<ValueRange> {
        let mut snapshot = poll.snapshot.clone();
        snapshot.rows.retain(|r| !self.outbox.contains(&r.job_id));
        panel::status_updates(
            &snapshot,
            &self.panels,
            &poll.tables,
            self.layout.tz,
            &self.config.panel,
            20,
        )
    }

    /// The panel cells (状態, 結果, 更新日時) of a finished job, found by target label and
    /// function label. A panel or row that cannot be found is a warning: the queue row is
    /// written regardless.
    fn panel_result(
        &self,
        poll: &Poll,
        row: &QueueRow,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Option<ValueRange> {
        match panel::locate(&self.panels, &poll.tables, row) {
            Ok((panel_ref, panel_row)) => {
                let outcome = PanelOutcome {
                    state: finish_state(finish),
                    finished_at: at,
                    url: (!url.is_empty()).then(|| url.to_string()),
                    message: message.to_string(),
                };
                Some(panel::result_cells(
                    panel_ref,
                    panel_row.row,
                    &outcome,
                    self.layout.tz,
                    &self.config.panel,
                ))
            }
            Err(miss) => {
                warn!(job.id = %row.job_id, target = %row.target_key(), "{miss}; only the queue row is written");
                None
            }
        }
    }

    /// An A1 write on a known sheet as a grid request, so it can join a commit batch.
    fn grid_write(&self, v: &ValueRange) -> Option<Request> {
        let r = a1::A1Range::parse(&v.range).ok()?;
        let sheet_id = *self.sheet_ids.get(r.sheet.as_deref()?)?;
        let start_row = r.start_row?;
        let start_col = r.start_col?;
        let width = v.values.iter().map(Vec::len).max().unwrap_or(0) as u32;
        Some(Request::UpdateCells {
            range: GridRange {
                sheet_id,
                start_row,
                end_row: start_row + v.values.len() as u32,
                start_col,
                end_col: start_col + width,
            },
            rows: v.values.clone(),
        })
    }

    /// Finds the panels by their marker cells (two calls: metadata, markers). Done at start
    /// and with every full scan, so a renamed, moved or new panel is picked up.
    async fn discover_panels(&mut self) -> Result<(), DaemonError> {
        let meta = self.sheets.metadata().await?;
        let ranges = panel::marker_ranges(&meta, &self.config.panel);
        let values = if ranges.is_empty() {
            Vec::new()
        } else {
            self.sheets.read(&ranges).await?
        };
        let index = PanelIndex::build(&meta, &values, &self.config.panel);
        for c in &index.conflicts {
            warn!(target = %c.label, "{c}");
        }
        for p in &index.problems {
            warn!("{p}");
        }
        self.sheet_ids = meta
            .sheets
            .iter()
            .map(|s| (s.title.clone(), s.sheet_id))
            .collect();
        if let Some(q) = meta.sheet(QUEUE_SHEET) {
            self.layout.last_col = a1::column_letters((q.column_count.max(1) - 1) as u32);
        }
        self.panels = index;
        Ok(())
    }

    /// What a poll reads, in one `values.batchGet`: the queue header, the unfinished window
    /// of the queue (or all of it), the worker sheet, and the function table of each panel.
    fn queue_ranges(&self, full: bool) -> Vec<String> {
        let l = &self.layout.last_col;
        let start = if full { 2 } else { self.window_start.max(2) };
        let mut ranges = vec![
            a1::range(QUEUE_SHEET, &format!("A1:{l}1")),
            a1::range(QUEUE_SHEET, &format!("A{start}:{l}")),
            a1::range(WORKER_SHEET, "A1:F"),
        ];
        ranges.extend(panel::table_ranges(&self.panels, &self.config.panel));
        ranges
    }

    async fn poll(&mut self, full: bool) -> Result<Poll, DaemonError> {
        let ranges = self.queue_ranges(full);
        let values = self.sheets.read(&ranges).await?;
        self.parse_poll(&ranges, &values, full)
    }

    fn parse_poll(
        &mut self,
        ranges: &[String],
        values: &[ValueRange],
        full: bool,
    ) -> Result<Poll, DaemonError> {
        let empty = ValueRange::default();
        let header = values.first().unwrap_or(&empty);
        let header_row = header.values.first().cloned().unwrap_or_default();
        // Columns may be moved by a person at any time: the header is re-read every poll.
        let columns = ColumnMap::from_header(&header_row, &self.config.headers)?;
        self.layout.columns = columns;
        let start = ranges
            .get(1)
            .and_then(|r| a1::A1Range::parse(r).ok())
            .and_then(|r| r.start_row)
            .map(|r| r + 1)
            .unwrap_or(2);
        let window = values.get(1).unwrap_or(&empty);
        let snapshot = queue::parse_rows(
            &window.values,
            start,
            &self.layout.columns,
            &self.config.states,
            self.layout.tz,
        );
        let last_row = start + window.values.len() as u32;
        // Move the window down to the first unfinished row (keeping the last row in it, so
        // the range never starts past the grid).
        let first_open = snapshot
            .rows
            .iter()
            .filter(|r| {
                !(r.state.is(State::Done) || r.state.is(State::Error) || r.state.is(State::Timeout))
            })
            .map(|r| r.row)
            .min();
        self.window_start = first_open.unwrap_or(last_row.saturating_sub(1)).max(2);
        let worker = values.get(2).unwrap_or(&empty);
        let lease_text = worker
            .values
            .first()
            .and_then(|r| r.get(1))
            .map(queue::cell_text)
            .unwrap_or_default();
        let mut heartbeats = HashMap::new();
        let mut own_heartbeat_row = None;
        for (i, row) in worker.values.iter().enumerate().skip(2) {
            let id = row.first().map(queue::cell_text).unwrap_or_default();
            if id.trim().is_empty() {
                continue;
            }
            if id == self.config.worker_id {
                own_heartbeat_row = Some(i as u32 + 1);
            }
            if let Some(Ok(Some(seen))) = row
                .get(5)
                .map(|c| sheet_time::cell_to_instant(c, self.layout.tz))
            {
                heartbeats.insert(id, seen);
            }
        }
        let tables = panel::parse_tables(
            &self.panels,
            values.get(3..).unwrap_or(&[]),
            &self.config.panel,
        );
        Ok(Poll {
            snapshot,
            lease: LeaseState::parse(&lease_text),
            heartbeats,
            own_heartbeat_row,
            full,
            tables,
        })
    }

    /// The lease protocol of DESIGN §3: take the lease (reading the queue in the same call),
    /// decide on that fresh data, and commit claims, timeouts, heartbeat and the lease
    /// release in one atomic batch. Returns whether the heartbeat went with it.
    #[instrument(skip_all, fields(worker = %self.config.worker_id))]
    async fn claim_pass(&mut self, poll: &Poll) -> Result<bool, DaemonError> {
        let now = Utc::now();
        self.observers.metrics.claim_pass();
        let Some(from) = poll.lease.takeable(now) else {
            self.observers.metrics.lease_wait();
            if let LeaseState::Invalid(text) = &poll.lease {
                warn!(lease = %text, "the lease cell _ワーカー!B1 holds no lease; resetting it to free");
                let free = ValueRange::new(
                    a1::range(WORKER_SHEET, lease::LEASE_CELL),
                    vec![vec![Cell::from(lease::FREE)]],
                );
                self.sheets.write(&[free]).await?;
            } else {
                debug!("lease held by another daemon; waiting for the next tick");
            }
            return Ok(false);
        };
        let ttl = chrono::Duration::from_std(self.config.lease_ttl)
            .unwrap_or(chrono::Duration::seconds(30));
        let lease = Lease::new(&self.config.worker_id, now + ttl);
        let held = lease.to_string();
        let ranges = self.queue_ranges(poll.full);
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests: vec![lease::swap(self.layout.worker_sheet_id, &from, &held)],
                response_ranges: ranges.clone(),
            })
            .await?;
        if !matches!(
            reply.replies.first(),
            Some(Reply::CompareAndSwap { changed: 1 })
        ) {
            debug!("another daemon took the lease first");
            return Ok(false);
        }
        let fresh = match self.parse_poll(&ranges, &reply.ranges, poll.full) {
            Ok(p) => p,
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        let now = Utc::now();
        // Give up rather than commit on a lease that may run out while the commit travels.
        if !lease.has_left(now, ttl / 2) {
            warn!("lease nearly expired before the commit; releasing it without claiming");
            self.release(&held).await;
            return Ok(false);
        }
        let plan = claim::plan_pass(
            &fresh.snapshot,
            now,
            &self.policy,
            &fresh.heartbeats,
            self.free_slots.len(),
            |row| self.may_start(row),
        );
        // Intake by polling, under the lease so two daemons never turn one tick into two
        // rows: new rows are appended now (INSERT_ROWS), the boxes are cleared in the commit.
        // A crash in between leaves the ticks, and the duplicate guard then finds the rows.
        let mut intake_writes = Vec::new();
        if self.config.intake == Intake::Poll {
            let intake = panel::plan_intake(
                &fresh.tables,
                &self.panels,
                &fresh.snapshot,
                now,
                self.layout.tz,
                &self.config.panel,
                || uuid::Uuid::new_v4().to_string(),
            );
            if !intake.new_rows.is_empty() {
                let rows: Vec<Vec<Cell>> = intake
                    .new_rows
                    .iter()
                    .map(|j| j.to_row(&self.layout.columns, &self.config.states, self.layout.tz))
                    .collect();
                let range = a1::range(QUEUE_SHEET, &format!("A1:{}", self.layout.last_col));
                if let Err(e) = self.sheets.append(&range, &rows).await {
                    self.release(&held).await;
                    return Err(e.into());
                }
                for j in &intake.new_rows {
                    info!(job.id = %j.job_id, target = %j.target, function = %j.function, "press taken into the queue");
                }
            }
            intake_writes = intake
                .clears
                .iter()
                .chain(&intake.duplicates)
                .chain(&intake.rejected)
                .filter_map(|v| self.grid_write(v))
                .collect();
        }
        let cols = self.layout.columns.clone();
        let qid = self.queue_sheet_id();
        let serial = Cell::from(sheet_time::instant_to_serial(now, self.layout.tz));
        let mut requests = Vec::new();
        let mut response_ranges = Vec::new();
        let mut stale = Vec::new();
        for s in &plan.stale {
            let row = &fresh.snapshot.rows[s.index];
            requests.push(cas(
                qid,
                row.row,
                cols.index(Column::State),
                &self.config.states.running,
                &self.config.states.timeout,
            ));
            response_ranges.push(self.row_range(row.row));
            stale.push((row.clone(), s.reason.message(&self.policy, now)));
        }
        let mut claims = Vec::new();
        for (index, _) in &plan.claims {
            let row = &fresh.snapshot.rows[*index];
            let Some(slot) = self.free_slots.pop() else {
                break;
            };
            let tag = WorkerTag {
                daemon_id: self.config.worker_id.clone(),
                slot,
                token: uuid::Uuid::new_v4().simple().to_string()[..8].to_string(),
            };
            requests.push(cas(
                qid,
                row.row,
                cols.index(Column::State),
                &self.config.states.waiting,
                &self.config.states.running,
            ));
            requests.push(cell(
                qid,
                row.row,
                cols.index(Column::StartedAt),
                serial.clone(),
            ));
            requests.push(cell(
                qid,
                row.row,
                cols.index(Column::Worker),
                Cell::from(tag.to_string()),
            ));
            response_ranges.push(self.row_range(row.row));
            claims.push(Claimed {
                row: row.clone(),
                tag,
                slot,
            });
        }
        let heartbeat = fresh.own_heartbeat_row.map(|r| Request::UpdateCells {
            range: GridRange {
                sheet_id: self.layout.worker_sheet_id,
                start_row: r - 1,
                end_row: r,
                start_col: 0,
                end_col: 6,
            },
            rows: vec![self.heartbeat_row(now, claims.len())],
        });
        let with_heartbeat = heartbeat.is_some();
        requests.extend(heartbeat);
        requests.extend(intake_writes);
        requests.push(lease::swap(self.layout.worker_sheet_id, &held, lease::FREE));
        let commit = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges,
            })
            .await;
        let commit = match commit {
            Ok(c) => c,
            Err(e) => {
                // Nothing of the batch applied (it is atomic): the slots are free again and
                // the lease expires on its own if the release cannot be sent either.
                for c in claims {
                    self.free_slots.push(c.slot);
                }
                self.release(&held).await;
                return Err(e.into());
            }
        };
        if !matches!(
            commit.replies.last(),
            Some(Reply::CompareAndSwap { changed: 1 })
        ) {
            warn!("the lease was no longer ours at commit time; per-row checks decide what runs");
        }
        // Replies: stale CASes first, then 3 per claim.
        let changed = |i: usize| {
            matches!(
                commit.replies.get(i),
                Some(Reply::CompareAndSwap { changed: 1 })
            )
        };
        let mut follow_up = Vec::new();
        for (k, (row, message)) in stale.iter().enumerate() {
            if changed(k) {
                warn!(job.id = %row.job_id, target = %row.target_key(), reason = %message, "timed out a stale job");
                follow_up.extend(self.finish_cells(row.row, Finish::Timeout, now, "", message));
                follow_up.extend(self.panel_result(&fresh, row, Finish::Timeout, now, "", message));
            }
        }
        // Targets busy after this pass, for a claim that landed on another row (below).
        let mut busy: std::collections::HashSet<String> = fresh
            .snapshot
            .rows
            .iter()
            .filter(|r| r.state.is(State::Running))
            .filter(|r| !stale.iter().any(|(s, _)| s.job_id == r.job_id))
            .map(|r| r.target_key().to_string())
            .collect();
        busy.extend(claims.iter().map(|c| c.row.target_key().to_string()));
        for (k, claimed) in claims.into_iter().enumerate() {
            let reply_index = stale.len() + 3 * k;
            let after = commit
                .ranges
                .get(stale.len() + k)
                .map(|v| {
                    queue::parse_rows(
                        &v.values,
                        claimed.row.row,
                        &cols,
                        &self.config.states,
                        self.layout.tz,
                    )
                })
                .and_then(|s| s.rows.into_iter().next());
            let ours = after
                .as_ref()
                .is_some_and(|r| r.worker == claimed.tag.to_string());
            match after {
                Some(row) if changed(reply_index) && ours && row.job_id == claimed.row.job_id => {
                    self.spawn(claimed);
                }
                // A person sorted the queue between our read and the commit, and another
                // waiting row sat at that position: we did claim *that* row (its 待機 turned
                // 実行中 under our token). Run it if its target is idle, else put it back.
                Some(row) if changed(reply_index) && ours => {
                    if busy.insert(row.target_key().to_string()) {
                        warn!(job.id = %row.job_id, target = %row.target_key(), worker = %claimed.tag, planned = %claimed.row.job_id, "the queue moved during the claim; running the row that was claimed instead");
                        self.spawn(Claimed { row, ..claimed });
                    } else {
                        warn!(job.id = %row.job_id, target = %row.target_key(), "the queue moved during the claim and the claimed row's target is busy; putting it back to waiting");
                        follow_up.extend(self.claim_cells(
                            row.row,
                            Some(&self.config.states.waiting),
                            &Cell::from(""),
                            "",
                        ));
                        self.free_slots.push(claimed.slot);
                    }
                }
                other => {
                    self.report.claim_conflicts += 1;
                    self.observers.metrics.claim_conflict();
                    warn!(
                        job.id = %claimed.row.job_id,
                        target = %claimed.row.target_key(),
                        worker = %claimed.tag,
                        "claim conflict: the row was not ours after the commit; not running it"
                    );
                    // Our 開始日時/ワーカー landed on a row that was not waiting (the queue
                    // moved): give that row back the values it had.
                    if let Some(row) = other.filter(|r| ours && r.job_id != claimed.row.job_id) {
                        if let Some(before) = fresh.snapshot.by_job_id(&row.job_id) {
                            let started = before
                                .started_at
                                .map(|t| {
                                    Cell::from(sheet_time::instant_to_serial(t, self.layout.tz))
                                })
                                .unwrap_or_else(|| Cell::from(""));
                            follow_up.extend(self.claim_cells(
                                row.row,
                                None,
                                &started,
                                &before.worker,
                            ));
                        } else {
                            // It came from above the unfinished window, so its old values
                            // were not read: say so rather than guess.
                            warn!(
                                job.id = %row.job_id,
                                row = row.row,
                                worker = %claimed.tag,
                                "a sort moved a finished row under a claim; its 開始日時/ワーカー now show this claim"
                            );
                        }
                    }
                    self.free_slots.push(claimed.slot);
                }
            }
        }
        if !follow_up.is_empty() {
            self.sheets.write(&follow_up).await?;
        }
        if with_heartbeat {
            self.last_heartbeat = Some(tokio::time::Instant::now());
        }
        Ok(with_heartbeat)
    }

    async fn release(&self, held: &str) {
        let batch = BatchUpdate {
            requests: vec![lease::swap(self.layout.worker_sheet_id, held, lease::FREE)],
            response_ranges: vec![],
        };
        if let Err(e) = self.sheets.batch_update(&batch).await {
            warn!(error = %e, "could not release the lease; it expires on its own");
        }
    }

    fn spawn(&mut self, claimed: Claimed) {
        let row = &claimed.row;
        let spec = JobSpec {
            job_id: row.job_id.clone(),
            target: row.target_key().to_string(),
            function: row.function.clone(),
            requester: row.requester.clone(),
            command: row.command.clone(),
            args_json: row.args_json.clone(),
            flags: row.flags.clone(),
            panel_sheet: row.panel_sheet.clone(),
            panel_row: row.panel_row,
        };
        let span = tracing::info_span!("job", job.id = %row.job_id, target = %row.target_key(), worker = %claimed.tag);
        span.in_scope(|| info!(command = %row.command, "claimed"));
        let prepared = self.registry.prepare(&spec);
        let runner = self.runner.clone();
        let cancel = self.job_cancel.child_token();
        self.running.insert(row.job_id.clone(), claimed.clone());
        let running = self.observers.metrics.job_started();
        self.jobs.spawn(
            async move {
                let outcome = match prepared {
                    Ok(job) => runner.run(job, cancel).await,
                    Err(rejected) => {
                        warn!(reason = %rejected, "job rejected before running");
                        rejected.into_outcome()
                    }
                };
                (claimed, outcome, running)
            }
            .instrument(span),
        );
    }

    /// A job ended: its result goes to the outbox (durably) before anything else.
    fn finished(
        &mut self,
        joined: Result<(Claimed, Outcome, RunningJob), tokio::task::JoinError>,
    ) -> Result<(), DaemonError> {
        let (claimed, outcome, running) = match joined {
            Ok(v) => v,
            Err(e) => {
                // A job task panicked: its row times out by the stale rule.
                error!(error = %e, "a job task failed unexpectedly");
                return Ok(());
            }
        };
        self.running.remove(&claimed.row.job_id);
        self.free_slots.push(claimed.slot);
        self.report.jobs_finished += 1;
        running.finish(match outcome.status {
            OutcomeStatus::Done => metrics::Outcome::Done,
            OutcomeStatus::Failed => metrics::Outcome::Error,
            OutcomeStatus::TimedOut => metrics::Outcome::Timeout,
            OutcomeStatus::Cancelled => metrics::Outcome::Cancelled,
        });
        let (finish, message) = match outcome.status {
            OutcomeStatus::Done => (Finish::Done, outcome.message.clone()),
            OutcomeStatus::Failed => (Finish::Error, outcome.message.clone()),
            OutcomeStatus::TimedOut => (Finish::Timeout, outcome.message.clone()),
            OutcomeStatus::Cancelled => (
                Finish::Error,
                "エラー: sheetq の停止時に猶予時間内に終わらなかったため中断しました (stopped at shutdown after the grace period)".to_string(),
            ),
        };
        let row = &claimed.row;
        info!(job.id = %row.job_id, target = %row.target_key(), worker = %claimed.tag, outcome = ?outcome.status, "job finished");
        let continuation = outcome.continue_args.as_ref().map(|args| Continuation {
            job_id: uuid::Uuid::new_v4().to_string(),
            args_json: serde_json::Value::Object(args.clone()).to_string(),
        });
        self.outbox.put(FinishedJob {
            job_id: row.job_id.clone(),
            worker: claimed.tag.to_string(),
            finish,
            finished_at: Utc::now(),
            url: outcome.url.clone().unwrap_or_default(),
            message,
            target: row.target.clone(),
            function: row.function.clone(),
            panel_sheet: row.panel_sheet.clone(),
            panel_row: row.panel_row,
            requester: row.requester.clone(),
            command: row.command.clone(),
            flags: row.flags.clone(),
            continuation,
        })?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        Ok(())
    }

    /// Writes every pending result in one `values.batchUpdate`, each to the row that holds
    /// its jobId in `poll` (a read made just now) and only while that row's ワーカー still
    /// carries our claim; the panel rows, `display` (waiting/running texts) and a due
    /// heartbeat go in the same call. Returns whether the heartbeat went with it.
    async fn flush(&mut self, poll: &Poll, display: Vec<ValueRange>) -> Result<bool, DaemonError> {
        let pending: Vec<FinishedJob> = self.outbox.pending().cloned().collect();
        // A row may have been sorted above the window: look in the whole queue then.
        let full;
        let poll = if !poll.full
            && pending
                .iter()
                .any(|j| poll.snapshot.by_job_id(&j.job_id).is_none())
        {
            full = self.poll(true).await?;
            &full
        } else {
            poll
        };
        let mut data = Vec::new();
        let mut settled = Vec::new();
        for job in &pending {
            let Some(row) = poll.snapshot.by_job_id(&job.job_id) else {
                warn!(job.id = %job.job_id, target = %job.target, "the job's queue row is gone (deleted by a person?); only its panel row is written");
                data.extend(self.panel_result(
                    poll,
                    &job.as_row(),
                    job.finish,
                    job.finished_at,
                    &job.url,
                    &job.message,
                ));
                settled.push(job.job_id.clone());
                continue;
            };
            // A row timed out meanwhile keeps our ワーカー tag but is no longer ours to
            // finish: its タイムアウト stands, and its panel row may belong to a new press.
            if row.worker != job.worker || !row.state.is(State::Running) {
                warn!(
                    job.id = %job.job_id,
                    target = %job.target,
                    worker = %job.worker,
                    now = %row.worker,
                    state = ?row.state,
                    "the row no longer carries our running claim (timed out and maybe re-run); not overwriting it"
                );
                settled.push(job.job_id.clone());
                continue;
            }
            if let Some(cont) = &job.continuation {
                if poll.snapshot.by_job_id(&cont.job_id).is_none() {
                    self.append_continuation(job, cont).await?;
                }
            }
            data.extend(self.finish_cells(
                row.row,
                job.finish,
                job.finished_at,
                &job.url,
                &job.message,
            ));
            data.extend(self.panel_result(
                poll,
                row,
                job.finish,
                job.finished_at,
                &job.url,
                &job.message,
            ));
            settled.push(job.job_id.clone());
        }
        data.extend(display);
        let heartbeat = if data.is_empty() {
            false
        } else {
            let heartbeat = self.heartbeat_into(poll, &mut data, false).await?;
            self.sheets.write(&data).await?;
            heartbeat
        };
        self.outbox.done(settled.iter().map(String::as_str))?;
        self.observers
            .metrics
            .set_outbox_depth(self.outbox.len() as u64);
        Ok(heartbeat)
    }

    async fn append_continuation(
        &self,
        job: &FinishedJob,
        cont: &Continuation,
    ) -> Result<(), DaemonError> {
        let mut flags: Vec<String> = job
            .flags
            .iter()
            .filter(|f| *f != "continuation")
            .cloned()
            .collect();
        flags.push("continuation".into());
        let row = panel::NewJob {
            job_id: cont.job_id.clone(),
            received_at: Utc::now(),
            requester: job.requester.clone(),
            panel_sheet: job.panel_sheet.clone(),
            panel_row: job.panel_row,
            target: job.target.clone(),
            function: job.function.clone(),
            command: job.command.clone(),
            args_json: cont.args_json.clone(),
            flags: flags.join(","),
        }
        .to_row(&self.layout.columns, &self.config.states, self.layout.tz);
        let range = a1::range(QUEUE_SHEET, &format!("A1:{}", self.layout.last_col));
        self.sheets.append(&range, &[row]).await?;
        info!(job.id = %job.job_id, next = %cont.job_id, target = %job.target, "appended a continuation row");
        Ok(())
    }

    /// The claim cells of a queue row (状態, 開始日時, ワーカー), for undoing a claim that
    /// landed on the wrong row.
    fn claim_cells(
        &self,
        row: u32,
        state: Option<&str>,
        started: &Cell,
        worker: &str,
    ) -> Vec<ValueRange> {
        let cols = &self.layout.columns;
        state
            .map(|s| (Column::State, Cell::from(s)))
            .into_iter()
            .chain([
                (Column::StartedAt, started.clone()),
                (Column::Worker, Cell::from(worker)),
            ])
            .map(|(c, v)| ValueRange::new(cols.cell(c, row), vec![vec![v]]))
            .collect()
    }

    /// The queue cells of a finished job: 状態, 終了日時, 結果URL, メッセージ.
    fn finish_cells(
        &self,
        row: u32,
        finish: Finish,
        at: DateTime<Utc>,
        url: &str,
        message: &str,
    ) -> Vec<ValueRange> {
        let cols = &self.layout.columns;
        let state = finish_state(finish);
        [
            (Column::State, Cell::from(self.config.states.word(state))),
            (
                Column::FinishedAt,
                Cell::from(sheet_time::instant_to_serial(at, self.layout.tz)),
            ),
            (Column::ResultUrl, Cell::from(url)),
            (Column::Message, Cell::from(message)),
        ]
        .into_iter()
        .map(|(c, v)| ValueRange::new(cols.cell(c, row), vec![vec![v]]))
        .collect()
    }

    fn heartbeat_due(&self) -> bool {
        self.last_heartbeat
            .is_none_or(|t| t.elapsed() >= self.config.heartbeat_interval)
    }

    fn heartbeat_row(&self, now: DateTime<Utc>, extra_running: usize) -> Vec<Cell> {
        vec![
            Cell::from(self.config.worker_id.clone()),
            Cell::from(host_name()),
            Cell::from(env!("CARGO_PKG_VERSION")),
            Cell::from(self.config.slots as u64),
            Cell::from((self.running.len() + extra_running) as u64),
            Cell::from(sheet_time::instant_to_serial(now, self.layout.tz)),
        ]
    }

    /// Adds our heartbeat row to `data` when due (or `force`d); a daemon without a row yet
    /// appends one. Returns whether a heartbeat was written or added.
    async fn heartbeat_into(
        &mut self,
        poll: &Poll,
        data: &mut Vec<ValueRange>,
        force: bool,
    ) -> Result<bool, DaemonError> {
        if !force && !self.heartbeat_due() {
            return Ok(false);
        }
        let row = self.heartbeat_row(Utc::now(), 0);
        match poll.own_heartbeat_row {
            Some(r) => data.push(ValueRange::new(
                a1::range(WORKER_SHEET, &format!("A{r}:F{r}")),
                vec![row],
            )),
            None => {
                self.sheets
                    .append(&a1::range(WORKER_SHEET, "A3:F"), &[row])
                    .await?;
            }
        }
        self.last_heartbeat = Some(tokio::time::Instant::now());
        Ok(true)
    }

    fn row_range(&self, row: u32) -> String {
        a1::range(
            QUEUE_SHEET,
            &format!("A{row}:{}{row}", self.layout.last_col),
        )
    }

    fn queue_sheet_id(&self) -> i32 {
        self.layout.queue_sheet_id
    }

    /// Shutdown: no more claims; running jobs get the grace period, then are stopped; every
    /// result is written (or left in the outbox for the next start).
    async fn drain(&mut self) -> Result<(), DaemonError> {
        if !self.jobs.is_empty() {
            info!(running = self.jobs.len(), grace = ?self.config.shutdown_grace, "shutting down: waiting for running jobs");
        }
        let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
        while !self.jobs.is_empty() {
            tokio::select! {
                Some(joined) = self.jobs.join_next() => self.finished(joined)?,
                _ = tokio::time::sleep_until(deadline), if !self.job_cancel.is_cancelled() => {
                    warn!(running = self.jobs.len(), "grace period over: stopping the remaining jobs");
                    self.job_cancel.cancel();
                }
            }
        }
        match self.poll(true).await {
            Ok(poll) => {
                if let Err(e) = self.flush(&poll, Vec::new()).await {
                    warn!(error = %e, pending = self.outbox.len(), "results stay in the outbox until the next start");
                }
            }
            Err(e) => {
                warn!(error = %e, pending = self.outbox.len(), "results stay in the outbox until the next start")
            }
        }
        self.report.results_pending = self.outbox.len();
        info!(
            finished = self.report.jobs_finished,
            pending = self.report.results_pending,
            "sheetq daemon stopped"
        );
        Ok(())
    }
}

fn finish_state(finish: Finish) -> State {
    match finish {
        Finish::Done => State::Done,
        Finish::Error => State::Error,
        Finish::Timeout => State::Timeout,
    }
}

fn cas(sheet_id: i32, row: u32, col: u32, from: &str, to: &str) -> Request {
    Request::CompareAndSwap {
        range: GridRange::cell(sheet_id, row - 1, col),
        find: from.to_string(),
        replacement: to.to_string(),
    }
}

fn cell(sheet_id: i32, row: u32, col: u32, value: Cell) -> Request {
    Request::UpdateCells {
        range: GridRange::cell(sheet_id, row - 1, col),
        rows: vec![vec![value]],
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Reads the spreadsheet's metadata and the queue header: the fatal checks of start-up.
async fn load_layout(sheets: &dyn Sheets, config: &Config) -> Result<Layout, DaemonError> {
    let meta = sheets.metadata().await?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let queue = meta
        .sheet(QUEUE_SHEET)
        .ok_or_else(|| DaemonError::MissingSheet(QUEUE_SHEET.into()))?;
    let worker = meta
        .sheet(WORKER_SHEET)
        .ok_or_else(|| DaemonError::MissingSheet(WORKER_SHEET.into()))?;
    let last_col = a1::column_letters((queue.column_count.max(1) - 1) as u32);
    let header = sheets
        .read(&[a1::range(QUEUE_SHEET, &format!("A1:{last_col}1"))])
        .await?;
    let header_row = header
        .first()
        .and_then(|v| v.values.first())
        .cloned()
        .unwrap_or_default();
    let columns = ColumnMap::from_header(&header_row, &config.headers)?;
    Ok(Layout {
        tz,
        worker_sheet_id: worker.sheet_id,
        queue_sheet_id: queue.sheet_id,
        last_col,
        columns,
    })
}
