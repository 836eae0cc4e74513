//! The claim pass (DESIGN §2–§3): take the lease with a compare-and-swap that reads the queue
//! in the same call, decide on that fresh data, and commit claims, timeouts, intake and the
//! lease release in one atomic batch whose reply says which claims really are ours.

use chrono::Utc;
use tracing::{debug, info, instrument, warn};

use crate::a1;
use crate::claim;
use crate::config::Intake;
use crate::lease::{self, Lease, LeaseState, WORKER_SHEET};
use crate::outbox::Finish;
use crate::panel;
use crate::queue::{self, Column, QueueRow, State, WorkerTag, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{BatchUpdate, BatchUpdateReply, Cell, GridRange, Reply, Request, ValueRange};

use super::{Claimed, Daemon, DaemonError, Poll};

impl Daemon {
    /// The lease protocol of DESIGN §3: take the lease (reading the queue in the same call),
    /// decide on that fresh data, then commit in two atomic batches while holding it:
    ///
    /// 1. the tripwires: one compare-and-swap per row (`待機 → 実行中` for a claim,
    ///    `実行中 → タイムアウト` for a stale row), the heartbeat and the intake's box
    ///    clears, with every touched row read back. Nothing positional is written yet, so a
    ///    row that moved (a person sorted) or that another daemon claimed is never overwritten;
    /// 2. for the rows whose swap changed and which still hold the planned job: 開始日時 and
    ///    ワーカー (claims) or 終了日時, メッセージ and the panel cells (timeouts); a swap
    ///    that hit another row (the queue moved) is run if it may be, or put back; then the
    ///    lease release. The rows to run are read back, and only rows carrying our token run.
    ///
    /// Returns whether the heartbeat went with it.
    #[instrument(skip_all, fields(worker = %self.config.worker_id))]
    pub(super) async fn claim_pass(&mut self, poll: &Poll) -> Result<bool, DaemonError> {
        self.observers.metrics.claim_pass();
        let Some((lease, fresh)) = self.acquire(poll).await? else {
            return Ok(false);
        };
        let held = lease.to_string();
        let now = Utc::now();
        let plan = claim::plan_pass(
            &fresh.snapshot,
            now,
            &self.policy,
            &fresh.heartbeats,
            self.free_slots.len(),
            |row, picked| self.may_start(row, picked),
        );
        let intake_writes = match self.take_in_presses(&fresh, now).await {
            Ok(w) => w,
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        let states = self.config.states.clone();
        let state_col = self.layout.columns.index(Column::State);
        let qid = self.queue_sheet_id();

        // Phase 1: the tripwires.
        let mut requests = Vec::new();
        let mut response_ranges = Vec::new();
        let stale: Vec<(QueueRow, String)> = plan
            .stale
            .iter()
            .map(|s| {
                let row = fresh.snapshot.rows[s.index].clone();
                (row, s.reason.message(&self.policy, now))
            })
            .collect();
        for (row, _) in &stale {
            requests.push(cas(
                qid,
                row.row,
                state_col,
                &states.running,
                &states.timeout,
            ));
            response_ranges.push(self.row_range(row.row));
        }
        let mut claims = Vec::new();
        for (index, _) in &plan.claims {
            let Some(slot) = self.free_slots.pop() else {
                break;
            };
            let row = fresh.snapshot.rows[*index].clone();
            requests.push(cas(
                qid,
                row.row,
                state_col,
                &states.waiting,
                &states.running,
            ));
            response_ranges.push(self.row_range(row.row));
            claims.push(Claimed {
                row,
                tag: WorkerTag {
                    daemon_id: self.config.worker_id.clone(),
                    slot,
                    token: uuid::Uuid::new_v4().simple().to_string()[..8].to_string(),
                },
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
        let tripped = self
            .commit(
                &held,
                Some(&lease),
                requests,
                response_ranges,
                &mut claims,
                false,
            )
            .await?;
        let Some(tripped) = tripped else {
            return Ok(false);
        };
        if with_heartbeat {
            self.last_heartbeat = Some(tokio::time::Instant::now());
        }
        let changed = |i: usize| {
            matches!(
                tripped.replies.get(i),
                Some(Reply::CompareAndSwap { changed: 1 })
            )
        };
        let row_after = |i: usize, hint: u32| -> Option<QueueRow> {
            tripped.ranges.get(i).and_then(|v| {
                queue::parse_rows(
                    &v.values,
                    hint,
                    &self.layout.columns,
                    &states,
                    self.layout.tz,
                )
                .rows
                .into_iter()
                .next()
            })
        };

        // Phase 2: the cells of the rows that really are ours, and the release.
        let mut writes: Vec<ValueRange> = Vec::new();
        let mut undo: Vec<Request> = Vec::new();
        for (k, (planned, message)) in stale.iter().enumerate() {
            if !changed(k) {
                continue;
            }
            match row_after(k, planned.row) {
                Some(hit) if hit.job_id == planned.job_id => {
                    warn!(job.id = %hit.job_id, target = %hit.target_key(), reason = %message, "timed out a stale job");
                    writes.extend(self.finish_cells(hit.row, Finish::Timeout, now, "", message));
                    writes.extend(self.panel_result(
                        &fresh,
                        &hit,
                        Finish::Timeout,
                        now,
                        "",
                        message,
                    ));
                }
                Some(hit) => {
                    // The queue moved: we timed out someone else's running job. Undo it.
                    warn!(job.id = %hit.job_id, planned = %planned.job_id, "the queue moved during a timeout; restoring the row that was hit");
                    undo.push(cas(
                        qid,
                        hit.row,
                        state_col,
                        &states.timeout,
                        &states.running,
                    ));
                }
                None => {}
            }
        }
        let serial = Cell::from(sheet_time::instant_to_serial(now, self.layout.tz));
        let mut busy: std::collections::HashSet<String> = fresh
            .snapshot
            .rows
            .iter()
            .filter(|r| r.state.is(State::Running))
            .filter(|r| !stale.iter().any(|(s, _)| s.job_id == r.job_id))
            .map(|r| r.target_key().to_string())
            .collect();
        busy.extend(claims.iter().map(|c| c.row.target_key().to_string()));
        let mut to_run: Vec<Claimed> = Vec::new();
        for (k, claimed) in claims.into_iter().enumerate() {
            let i = stale.len() + k;
            let hit = if changed(i) {
                row_after(i, claimed.row.row)
            } else {
                None
            };
            let Some(hit) = hit else {
                self.report.claim_conflicts += 1;
                self.observers.metrics.claim_conflict();
                warn!(
                    job.id = %claimed.row.job_id,
                    target = %claimed.row.target_key(),
                    worker = %claimed.tag,
                    "claim conflict: the row was no longer waiting at commit time; not running it"
                );
                self.free_slots.push(claimed.slot);
                continue;
            };
            let claimed = if hit.job_id == claimed.row.job_id {
                claimed
            } else {
                // A person sorted the queue between our read and the commit, and another
                // waiting row sat at that position: its 待機 turned 実行中. Run it if it may
                // run now, else put it back.
                let picked: Vec<&QueueRow> = to_run.iter().map(|c| &c.row).collect();
                if self.may_start(&hit, &picked) && busy.insert(hit.target_key().to_string()) {
                    warn!(job.id = %hit.job_id, target = %hit.target_key(), planned = %claimed.row.job_id, "the queue moved during the claim; running the row that was claimed instead");
                    Claimed {
                        row: hit,
                        ..claimed
                    }
                } else {
                    warn!(job.id = %hit.job_id, target = %hit.target_key(), "the queue moved during the claim; putting the row that was hit back to waiting");
                    undo.push(cas(
                        qid,
                        hit.row,
                        state_col,
                        &states.running,
                        &states.waiting,
                    ));
                    self.free_slots.push(claimed.slot);
                    continue;
                }
            };
            let cols = &self.layout.columns;
            writes.push(ValueRange::new(
                cols.cell(Column::StartedAt, claimed.row.row),
                vec![vec![serial.clone()]],
            ));
            writes.push(ValueRange::new(
                cols.cell(Column::Worker, claimed.row.row),
                vec![vec![Cell::from(claimed.tag.to_string())]],
            ));
            to_run.push(claimed);
        }
        let mut requests: Vec<Request> = writes.iter().filter_map(|v| self.grid_write(v)).collect();
        requests.extend(undo);
        let response_ranges = to_run.iter().map(|c| self.row_range(c.row.row)).collect();
        // Phase 2 writes only to rows whose swap we won, so it is safe even if the lease ran
        // out meanwhile: no margin check.
        let settled = self
            .commit(&held, None, requests, response_ranges, &mut to_run, true)
            .await?;
        let Some(settled) = settled else {
            return Ok(with_heartbeat);
        };
        if !matches!(
            settled.replies.last(),
            Some(Reply::CompareAndSwap { changed: 1 })
        ) {
            warn!("the lease was no longer ours at the end of the claim pass; per-row checks decided what runs");
        }
        for (k, claimed) in to_run.into_iter().enumerate() {
            let after = settled.ranges.get(k).and_then(|v| {
                queue::parse_rows(
                    &v.values,
                    claimed.row.row,
                    &self.layout.columns,
                    &states,
                    self.layout.tz,
                )
                .rows
                .into_iter()
                .next()
            });
            match after {
                Some(r)
                    if r.job_id == claimed.row.job_id && r.worker == claimed.tag.to_string() =>
                {
                    self.spawn(claimed);
                }
                _ => {
                    self.report.claim_conflicts += 1;
                    self.observers.metrics.claim_conflict();
                    warn!(job.id = %claimed.row.job_id, worker = %claimed.tag, "claim conflict: our claim was not on the row afterwards; not running it");
                    self.free_slots.push(claimed.slot);
                }
            }
        }
        Ok(with_heartbeat)
    }

    /// Sends one batch of the claim pass; `release` appends the lease release (the last
    /// batch). On a failure that may have applied (timeout, dropped reply) the claims are
    /// kept as unsettled, their slots reserved, and resolved from the next poll by their
    /// token; on one that surely did not apply, their slots are freed. `margin`: give up
    /// (and release) rather than send when less than this much of the lease is left.
    async fn commit(
        &mut self,
        held: &str,
        margin: Option<&Lease>,
        mut requests: Vec<Request>,
        response_ranges: Vec<String>,
        claims: &mut Vec<Claimed>,
        release: bool,
    ) -> Result<Option<BatchUpdateReply>, DaemonError> {
        if let Some(lease) = margin {
            let ttl = chrono::Duration::from_std(self.config.lease_ttl)
                .unwrap_or(chrono::Duration::seconds(30));
            if !lease.has_left(Utc::now(), ttl / 4) {
                warn!("lease nearly expired before the commit; releasing it without claiming");
                for c in claims.drain(..) {
                    self.free_slots.push(c.slot);
                }
                self.release(held).await;
                return Ok(None);
            }
        }
        if release {
            requests.push(lease::swap(self.layout.worker_sheet_id, held, lease::FREE));
        }
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges,
            })
            .await;
        match reply {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                if e.is_retryable() {
                    warn!(error = %e, claims = claims.len(), "the claim commit may or may not have applied; checking its rows at the next poll");
                    self.unsettled.append(claims);
                } else {
                    for c in claims.drain(..) {
                        self.free_slots.push(c.slot);
                    }
                }
                self.release(held).await;
                Err(e.into())
            }
        }
    }

    /// Claims whose commit reply was lost, resolved from a fresh poll by jobId:
    /// - the row carries our token and is 実行中: everything applied; run it;
    /// - the row is 実行中 with no ワーカー: only the tripwire applied (nobody else can have
    ///   flipped a row we planned while we held the lease, and 実行中 rows are not claimed);
    ///   finish the claim (開始日時, ワーカー) and run it;
    /// - anything else: the commit did not apply; the slot is freed.
    pub(super) async fn settle_unsettled(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        let mut writes = Vec::new();
        let mut run = Vec::new();
        let now = Utc::now();
        for c in std::mem::take(&mut self.unsettled) {
            let tag = c.tag.to_string();
            let row = poll.snapshot.rows.iter().find(|r| {
                r.job_id == c.row.job_id
                    && r.state.is(State::Running)
                    && (r.worker == tag || r.worker.is_empty())
            });
            match row {
                Some(r) => {
                    info!(job.id = %r.job_id, worker = %tag, "the lost claim commit had applied; running the job");
                    if r.worker.is_empty() {
                        let cols = &self.layout.columns;
                        let serial = sheet_time::instant_to_serial(now, self.layout.tz);
                        writes.push(ValueRange::new(
                            cols.cell(Column::StartedAt, r.row),
                            vec![vec![Cell::from(serial)]],
                        ));
                        writes.push(ValueRange::new(
                            cols.cell(Column::Worker, r.row),
                            vec![vec![Cell::from(tag.clone())]],
                        ));
                    }
                    run.push(Claimed {
                        row: r.clone(),
                        ..c
                    });
                }
                None => {
                    info!(job.id = %c.row.job_id, worker = %tag, "the lost claim commit had not applied; not running the job");
                    self.free_slots.push(c.slot);
                }
            }
        }
        if !writes.is_empty() {
            if let Err(e) = self.sheets.write(&writes).await {
                for c in run {
                    self.free_slots.push(c.slot);
                }
                return Err(e.into());
            }
        }
        for c in run {
            self.spawn(c);
        }
        Ok(())
    }

    /// Takes the lease with a compare-and-swap from the value `poll` saw, reading the queue
    /// in the same call. `None` when another daemon holds it or won the race, or when too
    /// little of it is left to commit safely (then it is released at once).
    async fn acquire(&mut self, poll: &Poll) -> Result<Option<(Lease, Poll)>, DaemonError> {
        let now = Utc::now();
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
            return Ok(None);
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
            self.observers.metrics.lease_wait();
            return Ok(None);
        }
        self.observers.metrics.lease_acquired();
        let fresh = match self.parse_poll(&ranges, &reply.ranges, poll.full) {
            Ok(p) => p,
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        // Give up rather than commit on a lease that may run out while the commit travels.
        if !lease.has_left(Utc::now(), ttl / 2) {
            warn!("lease nearly expired before the commit; releasing it without claiming");
            self.release(&held).await;
            return Ok(None);
        }
        Ok(Some((lease, fresh)))
    }

    /// Intake by polling, under the lease so two daemons never turn one tick into two rows:
    /// new rows are appended now (INSERT_ROWS); the returned requests clear the boxes (and
    /// show duplicate/rejection texts) in the commit. A crash in between leaves the ticks,
    /// and the duplicate guard then finds the rows already queued.
    async fn take_in_presses(
        &self,
        fresh: &Poll,
        now: chrono::DateTime<Utc>,
    ) -> Result<Vec<Request>, DaemonError> {
        if self.config.intake != Intake::Poll {
            return Ok(Vec::new());
        }
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
            self.sheets.append(&range, &rows).await?;
            for j in &intake.new_rows {
                info!(job.id = %j.job_id, target = %j.target, function = %j.function, "press taken into the queue");
            }
        }
        Ok(intake
            .clears
            .iter()
            .chain(&intake.duplicates)
            .chain(&intake.rejected)
            .filter_map(|v| self.grid_write(v))
            .collect())
    }

    pub(super) async fn release(&self, held: &str) {
        let batch = BatchUpdate {
            requests: vec![lease::swap(self.layout.worker_sheet_id, held, lease::FREE)],
            response_ranges: vec![],
        };
        if let Err(e) = self.sheets.batch_update(&batch).await {
            warn!(error = %e, "could not release the lease; it expires on its own");
        }
    }

    /// An A1 write on a known sheet as a grid request, so it can join a commit batch.
    pub(super) fn grid_write(&self, v: &ValueRange) -> Option<Request> {
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

    pub(super) fn row_range(&self, row: u32) -> String {
        a1::range(
            QUEUE_SHEET,
            &format!("A{row}:{}{row}", self.layout.last_col),
        )
    }

    pub(super) fn queue_sheet_id(&self) -> i32 {
        self.layout.queue_sheet_id
    }

    /// Whether this daemon may start `row` now, with `picked` already chosen in this pass: a
    /// heavy job (by its command's config or the row's `heavy` flag) waits while another
    /// heavy job runs here or was just picked, rather than being claimed and spending its
    /// timeout at the heavy gate.
    pub(super) fn may_start(&self, row: &QueueRow, picked: &[&QueueRow]) -> bool {
        let heavy = |r: &QueueRow| {
            self.registry.is_heavy(&r.command) || r.flags.iter().any(|f| f == "heavy")
        };
        !heavy(row)
            || !(self.running.values().any(|c| heavy(&c.row)) || picked.iter().any(|p| heavy(p)))
    }

    /// Whether polling intake is on and some ▶ box is ticked.
    pub(super) fn has_ticks(&self, poll: &Poll) -> bool {
        self.config.intake == Intake::Poll
            && poll
                .tables
                .values()
                .any(|t| t.rows.iter().any(|r| r.ticked))
    }
}

pub(super) fn cas(sheet_id: i32, row: u32, col: u32, from: &str, to: &str) -> Request {
    Request::CompareAndSwap {
        range: GridRange::cell(sheet_id, row - 1, col),
        find: from.to_string(),
        replacement: to.to_string(),
    }
}
