//! The claim pass (docs/design.md §2–§3): take the lease with a compare-and-swap that reads the queue
//! in the same call, decide on that fresh data, and commit claims, timeouts, intake and the
//! lease release in one atomic batch whose reply says which claims really are ours.

use chrono::Utc;
use tracing::{debug, info, instrument, warn};

use crate::a1;
use crate::approval;
use crate::binding;
use crate::cancel;
use crate::claim;
use crate::config::Intake;
use crate::joblog::{self, LogColumn};
use crate::lease::{self, Lease, LeaseState, WORKER_SHEET};
use crate::outbox::Finish;
use crate::panel;
use crate::provenance::Provenance;
use crate::queue::{self, Column, QueueRow, State, WorkerTag, QUEUE_SHEET};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{
    BatchUpdate, BatchUpdateReply, Cell, GridRange, MetadataLookup, Precedence, Reply, Request,
    ValueRange,
};
use crate::workers::RunningRef;

use super::approvals::Turned;
use super::cancels::Cancelling;
use super::kept_lease::{KeptLease, KEPT_ROUNDS};
use super::ledger::{cas, cell, Ledger, Place};

use super::writeback::{finish_state, needs_whole_queue, Through, Under};
use super::{Claimed, Daemon, DaemonError, Poll};

/// Google's limit on one request: a request is not applied later than this after it was
/// sent (docs/design.md §6), with a margin.
const REQUEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(190);

/// How many fences one batch removes at most.
const FENCES_PER_BATCH: usize = 100;

/// How often a daemon looks for fences that no daemon tracks any more.
const FENCE_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60 * 60);
/// The first look for abandoned fences comes this long after start: past the first minute,
/// whose reads a fleet started right after `sheetq init` needs for its polls (the README's
/// "A fleet's first minute"). An abandoned fence waits for its commit's 190 s anyway.
pub(super) const FENCE_FIRST_SWEEP: std::time::Duration = std::time::Duration::from_secs(90);

/// How long a fence is kept: while the commit it fences could still be applied (its lease's
/// TTL, then Google's request limit).
pub(super) fn fence_kept(lease_ttl: std::time::Duration) -> std::time::Duration {
    REQUEST_LIMIT + lease_ttl
}

/// A claim commit before it is sent: its requests and read-back ranges, and what they
/// stand for (the timeouts and claims, in request order).
struct Commit {
    /// The batch, each section's entries at the places they keep below.
    ledger: Ledger,
    /// The stale rows being timed out (or, asked to stop, cancelled), with their message.
    stale: Vec<Ended>,
    claims: Vec<Claimed>,
    /// Where each claim's entry is, in the order of `claims`.
    claim_places: Vec<Place>,
    /// Waiting rows asked to stop, each with the binding its 終了日時/メッセージ go through.
    cancels: Vec<Cancelling>,
    /// Rows of functions with `approvers` changing state.
    turns: Vec<Turned>,
}

/// A running row a claim commit ends: timed out, or cancelled when someone asked to stop it.
struct Ended {
    row: QueueRow,
    finish: Finish,
    message: String,
    place: Place,
}

impl Daemon {
    /// The lease protocol of docs/design.md §3, as its steps: acquire the lease (reading the
    /// queue in the same call; or, under a lease our last commit kept, take `poll` with
    /// `written` as that read), take in presses, decide on that fresh data, commit claims,
    /// timeouts, heartbeat, `display` (panel texts waiting for a write) and the lease
    /// release (or renewal) in one atomic batch, then settle what the commit's reply shows.
    /// Returns whether the heartbeat went with it: whether a commit applied.
    #[instrument(skip_all, fields(worker = %self.config.worker_id))]
    pub(super) async fn claim_pass(
        &mut self,
        poll: &Poll,
        written: &queue::Snapshot,
        display: Vec<ValueRange>,
    ) -> Result<bool, DaemonError> {
        self.observers.metrics.claim_pass();
        let kept = self.served.kept_lease.take();
        let rounds = kept.as_ref().map_or(0, |k| k.rounds);
        let (held, mut fresh) = match kept.filter(|k| self.can_commit_under(k, poll)) {
            // Our last commit renewed the lease, and this pass's read, made after that
            // commit applied, shows it still ours: the read is the fresh one the decision
            // needs, as the acquire's would be. `written`: the results this pass just wrote
            // back, as they left their rows.
            Some(k) => {
                debug!(
                    rounds = k.rounds,
                    "committing under the lease our last commit kept"
                );
                let mut fresh = poll.clone();
                fresh.snapshot = written.clone();
                (k.value, fresh)
            }
            None => match self.acquire(poll).await? {
                Some((lease, fresh)) => (lease.to_string(), fresh),
                None => return Ok(false),
            },
        };
        // Under the lease, the pass's writes go first: delayed, they would hold every other
        // daemon's claims back and could outlast the lease, wasting the acquire.
        self.sheets.set_precedence(Precedence::Pressing);
        let now = Utc::now();
        // Our lease taken back fenced any commit of ours whose reply was lost: this read,
        // made after that, shows for good whether it applied.
        self.settle_unsettled(&fresh);
        self.write_follow_ups(&mut fresh).await;
        // Presses first: the rows they become are claimable in this very pass.
        let mut intake_writes = match self.take_in_presses(&fresh, now).await {
            Ok((mut writes, taken, plan)) => {
                fresh.snapshot.rows.extend(taken);
                writes.extend(self.take_in_cancels(&mut fresh, plan.cancels));
                writes.extend(self.take_in_approvals(&mut fresh, plan.approvals, now));
                writes
            }
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        // Occurrences of [[schedules]] that no row has: appended by the commit, all or
        // nothing with it, claimed at a later pass.
        let scheduled = match self.take_in_schedules(&fresh, now).await {
            Ok((appends, scheduled)) => {
                intake_writes.extend(appends);
                scheduled
            }
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        self.stop_asked_jobs(&fresh.snapshot);
        let elsewhere = self.running_elsewhere(&fresh);
        let plan = self.plan_claims(&fresh.snapshot, &fresh.watched, &elsewhere);
        let keep = (rounds < KEPT_ROUNDS
            && self.keep_lease(&fresh.workers, &fresh.snapshot, &plan))
        .then_some(rounds + 1);
        let mut commit = self.commit_of(&fresh, &plan, &held, now, &display, intake_writes);
        // Marks of continuation rows claimed or gone ride along (`provenance`).
        let claimed: Vec<&QueueRow> = commit.claims.iter().map(|c| &c.row).collect();
        let mut marks = self.mark_work(&fresh, &claimed);
        commit.ledger.extend(std::mem::take(&mut marks.requests));
        // Last, the lease: released, or swapped to a new lease of ours that it keeps.
        let after = self.lease_after_commit(keep.is_some());
        commit.ledger.extend([lease::swap(
            self.served.layout.worker_sheet_id,
            &held,
            &after,
        )]);
        let sent = tokio::time::Instant::now();
        let Some(reply) = self.send_commit(&mut commit, &held).await? else {
            return Ok(false);
        };

        if let (Some(rounds), Some(Reply::CompareAndSwap { changed: 1 })) =
            (keep, reply.replies.last())
        {
            // Counted from before the commit was sent, in our own time, as an acquire's is.
            self.served.lease_sent = Some(sent);
            self.served.kept_lease = Some(KeptLease {
                value: after,
                rounds,
            });
        }
        self.schedules_queued(&scheduled, now);
        let mut follow_up = Vec::new();
        let mut through = Vec::new();
        let undo = self.settle_timeouts(
            &fresh,
            &reply,
            &commit.stale,
            now,
            &mut through,
            &mut follow_up,
        );
        let cancels = std::mem::take(&mut commit.cancels);
        let turns = std::mem::take(&mut commit.turns);
        self.settle_claims(
            &fresh,
            &reply,
            &elsewhere,
            commit,
            &mut through,
            &mut follow_up,
        );
        let mut undo = undo;
        undo.extend(self.settle_cancels(
            &fresh,
            &reply,
            &cancels,
            now,
            &mut through,
            &mut follow_up,
        ));
        undo.extend(self.settle_turns(&fresh, &reply, &turns, now, &mut through, &mut follow_up));
        // After the claims settled (their jobs spawned): a step whose claim did not take
        // gets its mark again.
        self.marks_committed(marks);
        if !undo.is_empty() {
            self.sheets
                .batch_update(&BatchUpdate {
                    requests: undo,
                    ..Default::default()
                })
                .await?;
        }
        // Put-backs, restores and timeouts go under our next lease, planned on its read:
        // sent now, blind, a restore could undo a claim another daemon makes as soon as our
        // commit released the lease. Their rows show our claim (or, for a timeout,
        // タイムアウト) until then, so no one claims them meanwhile.
        self.served.pending_through.extend(through);
        self.write_through(&fresh, Vec::new(), follow_up, Under::NoLease)
            .await?;
        // Our heartbeat went with the commit.
        self.served.last_heartbeat = Some(tokio::time::Instant::now());
        Ok(true)
    }

    /// The claim commit of a pass: its fence, the timeouts and claims `plan` decided (each
    /// claim taking a free slot), our heartbeat listing them, the presses taken in and the
    /// panel texts, in that order. The lease's swap, which goes last, is the caller's: it
    /// depends on whether the lease is kept.
    fn commit_of(
        &mut self,
        fresh: &Poll,
        plan: &claim::PassPlan<crate::approval::Turn>,
        held: &str,
        now: chrono::DateTime<Utc>,
        display: &[ValueRange],
        intake_writes: Vec<Request>,
    ) -> Commit {
        let cols = self.served.layout.columns.clone();
        let qid = self.queue_sheet_id();
        let serial = Cell::from(sheet_time::instant_to_serial(now, self.served.layout.tz));
        // The fence of our lease first: should the lease have been taken over by the time
        // Google applies this batch (however late), the fence exists and nothing applies.
        let mut ledger =
            Ledger::starting_with(lease::fence(self.served.layout.worker_sheet_id, held));
        let mut stale = Vec::new();
        for s in &plan.stale {
            let row = &fresh.snapshot.rows[s.index];
            // A row someone asked to stop, whose daemon is gone, ends キャンセル: it is
            // rescued as any dead daemon's row, and the request still holds.
            let reason = s.reason.message(&self.policy);
            let (finish, message) = match cancel::asked_of(row, self.served.layout.tz, now) {
                Some(request) => (
                    Finish::Cancelled,
                    request.message(
                        now,
                        self.served.layout.tz,
                        &format!("{}\n({reason})", cancel::UNCONFIRMED),
                    ),
                ),
                None => (Finish::Timeout, reason),
            };
            let place = ledger.row(
                cas(
                    qid,
                    row.row,
                    cols.index(Column::State),
                    &self.config.states.running,
                    self.config.states.word(finish_state(finish)),
                ),
                [],
                self.row_range(row.row),
            );
            stale.push(Ended {
                row: row.clone(),
                finish,
                message,
                place,
            });
        }
        let mut claims = Vec::new();
        let mut claim_places = Vec::new();
        for (index, _) in &plan.claims {
            let row = &fresh.snapshot.rows[*index];
            let Some(slot) = self.slots.take() else {
                break;
            };
            let (token, binding_id) = binding::new_token();
            let tag = WorkerTag {
                daemon_id: self.config.worker_id.clone(),
                slot,
                token,
            };
            // The tripwire, then the binding on the same row in the same atomic batch: the
            // binding lands exactly where the swap did, and the read-back says which job
            // that row holds.
            claim_places.push(ledger.row(
                cas(
                    qid,
                    row.row,
                    cols.index(Column::State),
                    &self.config.states.waiting,
                    &self.config.states.running,
                ),
                [
                    Request::BindRow {
                        sheet_id: qid,
                        row: row.row - 1,
                        id: binding_id,
                        key: binding::KEY.to_string(),
                        value: tag.to_string(),
                    },
                    cell(qid, row.row, cols.index(Column::StartedAt), serial.clone()),
                    cell(
                        qid,
                        row.row,
                        cols.index(Column::Worker),
                        Cell::from(tag.to_string()),
                    ),
                ],
                self.row_range(row.row),
            ));
            claims.push(Claimed {
                row: row.clone(),
                tag,
                slot,
                started_at: now,
                lost_commit: None,
                log_row: self.served.layout.log.is_some(),
                // Set by `log_rows` where it writes the links.
                linked: false,
                panel_linked: false,
                continuation: self.served.marks.vouches(row).then(|| row.job_id.clone()),
            });
        }
        let cancels = self.cancel_entries(&mut ledger, fresh, &plan.cancels);
        let turns = self.turn_entries(&mut ledger, fresh, &plan.turns);
        // Nothing from here on is read back by its place in the reply: cells someone else's
        // protection bars are left out of it below (`hold_off`).
        let read_back = ledger.len();
        let mut requests = Vec::new();
        // Our heartbeat lists the jobs we run, the new claims included, in the same atomic
        // batch: the next daemon's claim sees them even if a person sorts their rows away.
        let claimed_refs: Vec<RunningRef> = claims.iter().map(|c| RunningRef::of(&c.row)).collect();
        // A daemon without a heartbeat row yet (its first) appends one, with the batch.
        let beat = self.heartbeat_row(now, &claimed_refs, &[]);
        requests.push(match fresh.own_heartbeat_row {
            Some(r) => self.heartbeat_request(r, beat),
            None => Request::AppendRows {
                sheet_id: self.served.layout.worker_sheet_id,
                rows: vec![beat],
            },
        });
        requests.extend(self.log_rows(fresh, &mut claims, now));
        requests.extend(intake_writes);
        // Panel texts no other write carried this pass ride in the commit, and after them
        // (so they win) the ▶ 実行中 of each row claimed now.
        requests.extend(display.iter().filter_map(|v| self.grid_write(v)));
        // A job turned 承認待ち shows it at once, in the same commit.
        for t in &turns {
            if let approval::Turn::Await(tally) = &t.turn {
                let text = self.approval_text(&t.row, tally);
                let cell = panel::status::status_cell(
                    &t.row,
                    text,
                    &self.served.panels,
                    &fresh.tables,
                    &self.config.panel,
                );
                requests.extend(cell.as_ref().and_then(|v| self.grid_write(v)));
            }
        }
        for c in &claims {
            let cell = panel::running_cell(
                &c.row,
                now,
                &self.served.panels,
                &fresh.tables,
                self.served.layout.tz,
                &self.config.panel,
            );
            requests.extend(cell.as_ref().and_then(|v| self.grid_write(v)));
        }
        ledger.extend(requests);
        ledger.retain_from(read_back, |r| self.request_writable(r));
        Commit {
            ledger,
            stale,
            claims,
            claim_places,
            cancels,
            turns,
        }
    }

    /// Sends the commit while its lease still holds. `Ok(None)`: nothing of it applied (the
    /// lease was taken over first), its slots are free again. A failure that may have
    /// applied leaves its claims unsettled and the lease held, to be fenced and checked.
    async fn send_commit(
        &mut self,
        commit: &mut Commit,
        held: &str,
    ) -> Result<Option<BatchUpdateReply>, DaemonError> {
        // The commit writes 開始日時/ワーカー next to each tripwire, unconditionally (the API
        // has no conditional write of an empty cell). That is only safe while the lease
        // holds, so it is never sent, nor retried, once less than a quarter of it is left.
        let left = self.lease_left().saturating_sub(self.config.lease_ttl / 4);
        let (requests, response_ranges) = commit.ledger.take();
        let result = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges,
                sheet_list: false,
                send_by: Some(std::time::Instant::now() + left),
            })
            .await;
        let reply = match result {
            Ok(c) => c,
            Err(e) if lease::is_fenced(&e.message, held) => {
                // The lease was taken over before the commit applied: nothing of it did.
                warn!(
                    claims = commit.claims.len(),
                    "the lease was taken over before the claim commit applied; nothing was claimed"
                );
                for c in commit.claims.drain(..) {
                    self.slots.give(c.slot);
                }
                return Ok(None);
            }
            Err(e) => {
                // A failure may leave open whether the batch applied (a lost reply, which
                // Google may still apply for up to 180 s): the claims stay unsettled, their
                // slots reserved, and the lease is left held, so that whoever takes it next
                // (this daemon at its next claim pass) fences the commit. A read after that
                // shows for good whether it applied. A repeated send would report "0
                // changed" and take our own claim for someone else's.
                if e.is_retryable() {
                    warn!(error = %e, claims = commit.claims.len(), "the claim commit may or may not have applied; it is fenced when the lease is next taken, and its rows checked then");
                    let sent = tokio::time::Instant::now();
                    self.unsettled
                        .extend(commit.claims.drain(..).map(|c| Claimed {
                            lost_commit: Some((held.to_string(), sent)),
                            ..c
                        }));
                    return Err(e.into());
                }
                for c in commit.claims.drain(..) {
                    self.slots.give(c.slot);
                }
                self.release(held).await;
                return Err(e.into());
            }
        };
        // Applied: its fence has done its work (the lease is free again) and goes later.
        self.served
            .fences
            .push((lease::fence_id(held), tokio::time::Instant::now()));
        if !matches!(
            reply.replies.last(),
            Some(Reply::CompareAndSwap { changed: 1 })
        ) {
            warn!("the lease was no longer ours at commit time; per-row checks decide what runs");
        }
        Ok(Some(reply))
    }

    /// Settles the timeouts of a commit: a swap that hit the row it meant holds the job's
    /// target (it may still run) and has its 終了日時/メッセージ written through its binding;
    /// a swap that hit another row (the queue moved) is undone. Returns the undo requests.
    fn settle_timeouts(
        &mut self,
        fresh: &Poll,
        reply: &BatchUpdateReply,
        stale: &[Ended],
        now: chrono::DateTime<Utc>,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) -> Vec<Request> {
        let cols = self.served.layout.columns.clone();
        let qid = self.queue_sheet_id();
        let mut undo = Vec::new();
        for ended in stale {
            let (row, message, finish) = (&ended.row, &ended.message, ended.finish);
            let word = self.config.states.word(finish_state(finish)).to_string();
            if !ended.place.swapped(reply) {
                continue;
            }
            let hit = self.row_read_back(reply, ended.place, row.row);
            match hit {
                Some(hit) if hit.job_id != row.job_id => {
                    // The queue moved: the swap timed out another running job. Undo it.
                    warn!(job.id = ?hit.job_id, planned = ?row.job_id, "the queue moved during a timeout; restoring the row that was hit");
                    self.rows_moved();
                    undo.push(cas(
                        qid,
                        hit.row,
                        cols.index(Column::State),
                        &word,
                        &self.config.states.running,
                    ));
                }
                _ => {
                    warn!(job.id = ?row.job_id, target = %Logged(row.target_key()), reason = %message, state = %word, "ended a stale job; its target stays busy until the job could have ended on its own");
                    if finish == Finish::Cancelled {
                        self.observers.metrics.cancel_asked();
                    }
                    self.hold(row, &fresh.watched);
                    // Its 終了日時/メッセージ go through its binding when it has one (any
                    // daemon's claim token names it), never to a row number from this read.
                    let mut cells = self.finish_values(finish, now, "", message);
                    // Its 結果URL is empty or the claim's link to its log row: left as it is.
                    cells.retain(|(c, _)| *c != Column::ResultUrl);
                    let ended = Some(finish_state(finish));
                    self.follow_up(row, ended, cells, through, follow_up);
                    follow_up.extend(self.panel_result(fresh, row, finish, now, "", message));
                    // Its daemon is gone (or cut off): this swap, which only one daemon's
                    // commit can make, is the job's end as the sheet shows it.
                    self.announce_ended(fresh, row, finish, message, now);
                }
            }
        }
        undo
    }

    /// Settles the claims of a commit by its read-back ([`settle_claims`] decides) and
    /// applies what it decided: runs, put-backs, conflicts with their cells given back.
    fn settle_claims(
        &mut self,
        fresh: &Poll,
        reply: &BatchUpdateReply,
        elsewhere: &[RunningRef],
        commit: Commit,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) {
        let after: Vec<Option<QueueRow>> = (commit.claims.iter().zip(&commit.claim_places))
            .map(|(c, place)| self.row_read_back(reply, *place, c.row.row))
            .collect();
        let busy = claim::Busy::of(&fresh.snapshot, elsewhere);
        let settled = settle_claims(
            reply,
            &commit.claim_places,
            commit.claims,
            after,
            busy,
            |row| self.may_start(row, &[]),
        );
        for s in settled {
            self.apply_settled(fresh, s, through, follow_up);
        }
    }

    /// Applies what [`settle_claims`] decided of one claim.
    fn apply_settled(
        &mut self,
        fresh: &Poll,
        settled: Settled,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) {
        match settled {
            Settled::Run(claimed) => self.spawn(claimed),
            Settled::RunInstead {
                mut claimed,
                planned,
            } => {
                self.rows_moved();
                // The commit's link formulas name the planned job: this one's result is
                // written as text (its log row is restated with the result).
                claimed.linked = false;
                claimed.panel_linked = false;
                warn!(job.id = ?claimed.row.job_id, target = %Logged(claimed.row.target_key()), worker = %claimed.tag, %planned, "the queue moved during the claim; running the row that was claimed instead");
                self.spawn(claimed);
            }
            Settled::PutBack { row, slot } => {
                self.rows_moved();
                warn!(job.id = ?row.job_id, target = %Logged(row.target_key()), "the queue moved during the claim and the claimed row's target is busy; putting it back to waiting");
                let mut cells =
                    self.claim_values(Some(&self.config.states.waiting), &Cell::from(""), "");
                // The commit's link to a log row that will not be filled goes too.
                cells.push((Column::ResultUrl, Cell::from("")));
                self.follow_up(&row, Some(State::Running), cells, through, follow_up);
                self.slots.give(slot);
            }
            Settled::Conflict {
                claimed,
                landed_on,
                unbind,
            } => {
                self.report.claim_conflicts += 1;
                self.observers.metrics.claim_conflict();
                warn!(
                    job.id = ?claimed.row.job_id,
                    target = %Logged(claimed.row.target_key()),
                    worker = %claimed.tag,
                    "claim conflict: the row was not ours after the commit; not running it"
                );
                if let Some(row) = &landed_on {
                    self.rows_moved();
                    self.give_back(fresh, row, &claimed.tag, through, follow_up);
                }
                self.served.unbind.extend(unbind);
                if claimed.log_row {
                    // The commit made the job a log row that nothing will fill: unbound, it
                    // leaves with the archive.
                    let log = binding::id_of_token(&claimed.tag.token).map(joblog::binding_id);
                    self.served.unbind.extend(log);
                }
                self.slots.give(claimed.slot);
            }
        }
    }

    /// Our 開始日時/ワーカー landed on `row`, which was not waiting (the queue moved): give it
    /// back the values it had, through the binding that landed with them.
    fn give_back(
        &mut self,
        fresh: &Poll,
        row: &QueueRow,
        tag: &WorkerTag,
        through: &mut Vec<Through>,
        follow_up: &mut Vec<ValueRange>,
    ) {
        let Some(before) = fresh.before_image(&row.job_id) else {
            // It came from above the unfinished window, so its old values were not read: say
            // so rather than guess.
            warn!(
                job.id = ?row.job_id,
                row = row.row,
                worker = %tag,
                "a sort moved a finished row under a claim; its 開始日時/ワーカー now show this claim"
            );
            return;
        };
        let started = before
            .started_at
            .map(|t| Cell::from(sheet_time::instant_to_serial(t, self.served.layout.tz)))
            .unwrap_or_else(|| Cell::from(""));
        let mut cells = self.claim_values(None, &started, &before.worker);
        // The commit wrote its link formula over the row's 結果URL too.
        cells.push((Column::ResultUrl, Cell::from(before.result_url.as_str())));
        info!(job.id = ?row.job_id, row = row.row, worker = %Logged(&before.worker), claim = %tag, "giving the row our claim landed on its 開始日時/ワーカー back");
        self.follow_up(row, None, cells, through, follow_up);
    }

    /// How much of the lease we last took is left, in our own monotonic time from before
    /// its acquire was sent: another daemon takes it over only after watching it stand still
    /// for longer than its TTL, which began after that.
    pub(super) fn lease_left(&self) -> std::time::Duration {
        self.served
            .lease_sent
            .map_or(std::time::Duration::ZERO, |sent| {
                self.config.lease_ttl.saturating_sub(sent.elapsed())
            })
    }

    /// The lease's time to live, as the sheet's clock arithmetic needs it.
    pub(super) fn lease_ttl(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config.lease_ttl).unwrap_or(chrono::Duration::seconds(30))
    }

    /// The queue row of a commit's entry at `place` as the reply read it back, parsed;
    /// `hint` is the sheet row it was asked for.
    pub(super) fn row_read_back(
        &self,
        reply: &BatchUpdateReply,
        place: Place,
        hint: u32,
    ) -> Option<QueueRow> {
        self.read_back_row(place.read_back(reply), hint)
    }

    /// A read-back of one queue row (`range`), parsed; `hint` is the sheet row it was asked
    /// for.
    pub(super) fn read_back_row(&self, range: Option<&ValueRange>, hint: u32) -> Option<QueueRow> {
        let values = range?.values.first()?;
        self.parse_row(values, hint)
    }

    /// Claims whose commit reply was lost, resolved from a poll once the commit can no longer
    /// apply: the lease it was made under is off the cell (taken over with the fence, or
    /// released by the commit itself), or Google's 180 s request limit has passed. Then a
    /// row that holds the job, is 実行中 and carries our token means the commit applied, and
    /// the job runs; otherwise it did not (the commit is atomic), and the slot is freed.
    pub(super) fn settle_unsettled(&mut self, poll: &Poll) {
        for c in std::mem::take(&mut self.unsettled) {
            let open = c.lost_commit.as_ref().is_some_and(|(lease, sent)| {
                poll.lease == LeaseState::parse(lease) && sent.elapsed() < REQUEST_LIMIT
            });
            if open {
                self.unsettled.push(c);
                continue;
            }
            let tag = c.tag.to_string();
            let row = poll.snapshot.rows.iter().find(|r| {
                r.job_id == c.row.job_id && r.state.is(State::Running) && r.worker == tag
            });
            match row {
                Some(r) => {
                    info!(job.id = ?r.job_id, worker = %tag, "the claim commit whose reply was lost had applied; running the job");
                    let row = r.clone();
                    self.spawn(Claimed { row, ..c });
                }
                None => {
                    info!(job.id = ?c.row.job_id, worker = %tag, "the claim commit whose reply was lost had not applied");
                    self.slots.give(c.slot);
                }
            }
        }
    }

    /// Takes the lease with a compare-and-swap from the value `poll` saw, reading the queue
    /// in the same call. `None` when another daemon holds it or won the race, or when too
    /// little of it is left to commit safely (then it is released at once).
    async fn acquire(&mut self, poll: &Poll) -> Result<Option<(Lease, Poll)>, DaemonError> {
        // Follow-ups whose rows the poll did not find are placed on a read of the whole queue.
        let full = poll.full || needs_whole_queue(poll, &[], &self.served.pending_through);
        let plan = self.read_plan(full, false);
        let Some((lease, reply)) = self.take_lease(poll, plan.ranges.clone()).await? else {
            return Ok(None);
        };
        let held = lease.to_string();
        let fresh = match self.parse_poll(&plan, &reply.ranges) {
            Ok(p) => Poll {
                protections: (!reply.protections.is_empty()).then(|| reply.protections.clone()),
                ..p
            },
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        // Give up rather than commit on a lease that may run out while the commit travels.
        if self.lease_left() < self.config.lease_ttl / 2 {
            warn!("lease nearly expired before the commit; releasing it without claiming");
            self.release(&held).await;
            return Ok(None);
        }
        Ok(Some((lease, fresh)))
    }

    /// The lease's compare-and-swap from the value `poll` saw, with `read` read back in the
    /// same call and the removals of finished rows' bindings riding along. `None` when
    /// another daemon holds the lease or won the race.
    pub(super) async fn take_lease(
        &mut self,
        poll: &Poll,
        read: Vec<String>,
    ) -> Result<Option<(Lease, BatchUpdateReply)>, DaemonError> {
        let Some(from) = poll.lease.takeable(
            &self.config.worker_id,
            poll.lease_quiet,
            self.config.lease_ttl,
        ) else {
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
        // The expiry written is for people; no daemon compares it with its clock. Ours is
        // counted from before this request was sent, in our own monotonic time.
        let lease = Lease::new(&self.config.worker_id, Utc::now() + self.lease_ttl());
        self.served.lease_sent = Some(tokio::time::Instant::now());
        let held = lease.to_string();
        // Bindings of finished rows, and fences whose commits can no longer apply, go with
        // the acquire, a batch sent anyway.
        let old = self.fences_to_remove();
        let mut unbind = std::mem::take(&mut self.served.unbind);
        unbind.extend(old);
        let mut requests = vec![lease::swap(
            self.served.layout.worker_sheet_id,
            &from,
            &held,
        )];
        // Taking over a held lease (an abandoned one, or our own whose commit reply was
        // lost) fences every commit made under it: none can apply after this batch.
        let fencing = from != lease::FREE;
        if fencing {
            requests.push(lease::fence(self.served.layout.worker_sheet_id, &from));
        }
        requests.extend(unbind.iter().map(|id| Request::DeleteMetadata { id: *id }));
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges: read,
                ..Default::default()
            })
            .await;
        let reply = match reply {
            Ok(r) => r,
            Err(e) if fencing && lease::is_fenced(&e.message, &from) => {
                // The commit made under that lease applied (with its fence) first, or another
                // daemon took it over first: the lease is not ours to take.
                debug!("the lease we meant to take over was settled first");
                self.served.unbind.extend(unbind);
                self.observers.metrics.lease_wait();
                return Ok(None);
            }
            Err(e) => {
                self.served.watch.read_failed();
                if e.is_retryable() {
                    self.served.unbind.extend(unbind);
                } else if !unbind.is_empty() {
                    // A refused batch applies nothing: leave those bindings (`sheetq status`
                    // shows them) rather than let them block every later acquire.
                    warn!(error = %e, bindings = unbind.len(), "the lease acquire carrying binding removals was refused; not removing them");
                }
                return Err(e.into());
            }
        };
        if fencing {
            self.served
                .fences
                .push((lease::fence_id(&from), tokio::time::Instant::now()));
        }
        if !matches!(
            reply.replies.first(),
            Some(Reply::CompareAndSwap { changed: 1 })
        ) {
            debug!("another daemon took the lease first");
            self.observers.metrics.lease_wait();
            return Ok(None);
        }
        self.observers.metrics.lease_acquired();
        Ok(Some((lease, reply)))
    }

    /// The fences whose commits can no longer apply, at most [`FENCES_PER_BATCH`] (the
    /// rest go with the next batches); the others stay.
    fn fences_to_remove(&mut self) -> Vec<i32> {
        let kept = fence_kept(self.config.lease_ttl);
        let (mut old, young): (Vec<_>, Vec<_>) = std::mem::take(&mut self.served.fences)
            .into_iter()
            .partition(|(_, at)| at.elapsed() >= kept);
        let later = old.split_off(old.len().min(FENCES_PER_BATCH));
        self.served.fences = young;
        self.served.fences.extend(later);
        old.into_iter().map(|(id, _)| id).collect()
    }

    /// Whether to look for fences no daemon will remove (see [`Self::sweep_fences`]).
    pub(super) fn fence_sweep_due(&self) -> bool {
        tokio::time::Instant::now() >= self.served.fence_sweep_at
    }

    /// Finds every fence on the spreadsheet (`developerMetadata.search`, one read,
    /// [`FENCE_FIRST_SWEEP`] after start-up and then hourly) and removes those this daemon does not know yet once
    /// [`fence_kept`] has passed from now: fences left by a daemon that stopped or crashed
    /// before removing its own, which would otherwise pile up against Google's 30,000
    /// characters of metadata per sheet. Seen now, each was created before now, so no
    /// commit it fences can apply by then; its creator removing it too does no harm.
    pub(super) async fn sweep_fences(&mut self) {
        let now = tokio::time::Instant::now();
        match self
            .sheets
            .search_metadata(&MetadataLookup::key(lease::FENCE_KEY))
            .await
        {
            Ok(found) => {
                let known: std::collections::HashSet<i32> =
                    self.served.fences.iter().map(|(id, _)| *id).collect();
                let new: Vec<i32> = found
                    .iter()
                    .map(|m| m.id)
                    .filter(|id| !known.contains(id))
                    .collect();
                if !new.is_empty() {
                    info!(fences = new.len(), "found fences no daemon tracks (left by a stopped one); removing them once no commit they fence can apply");
                }
                self.served
                    .fences
                    .extend(new.into_iter().map(|id| (id, now)));
                self.served.fence_sweep_at = now + FENCE_SWEEP_EVERY;
            }
            Err(e) => {
                debug!(error = %e, "could not look for abandoned fences; trying again in a minute");
                self.served.fence_sweep_at = now + std::time::Duration::from_secs(60);
            }
        }
    }

    /// Intake by polling, under the lease so two daemons never turn one tick into two rows:
    /// new rows are appended now (INSERT_ROWS); the returned requests clear the boxes (and
    /// show duplicate/rejection texts) in the commit, and the returned rows (where the append
    /// put them) may be claimed by that same commit. A crash in between leaves the ticks,
    /// and the duplicate guard then finds the rows already queued.
    async fn take_in_presses(
        &mut self,
        fresh: &Poll,
        now: chrono::DateTime<Utc>,
    ) -> Result<(Vec<Request>, Vec<QueueRow>, panel::IntakePlan), DaemonError> {
        if self.config.intake != Intake::Poll {
            return Ok((Vec::new(), Vec::new(), panel::IntakePlan::default()));
        }
        let takeable = self.takeable(fresh);
        let (tables, index) = match &takeable {
            Some(t) => (&t.tables, t.index.as_ref()),
            None => (&fresh.tables, fresh.index.as_ref()),
        };
        let guards = self
            .guards_for(tables, fresh.protections.as_deref())
            .await?;
        let ticks = panel::intake::Ticks {
            tables,
            index: &self.served.panels,
            snapshot: &fresh.snapshot,
            now,
            tz: self.served.layout.tz,
            layout: &self.config.panel,
            catalog: self.registry.catalog(),
            guards: &guards,
        };
        let mut intake = panel::plan_intake(&ticks, || uuid::Uuid::new_v4().to_string());
        self.say_unguarded(&intake);
        if let Some(index) = index {
            let ticks = panel::plan_index_intake(
                &index.title,
                &index.entries,
                &fresh.snapshot,
                now,
                || uuid::Uuid::new_v4().to_string(),
            );
            intake.new_rows.extend(ticks.new_rows);
            intake.clears.extend(ticks.clears);
        }
        // A press of a function with approvers is received on Google's clock (the `Date` of
        // its replies), as the Apps Script intake's are: its expiry compares 受付日時 with that
        // clock alone (docs/design.md §5.5). Other presses keep this machine's clock, whose
        // readings never go back, for their order.
        if let Some(google) = self.sheets.google_now() {
            let catalog = self.registry.catalog();
            for job in &mut intake.new_rows {
                if catalog.approval_rule(&job.function).is_some() {
                    job.received_at = google;
                }
            }
        }
        let mut taken = Vec::new();
        if !intake.new_rows.is_empty() {
            let rows: Vec<Vec<Cell>> = intake
                .new_rows
                .iter()
                .map(|j| {
                    j.to_row(
                        &self.served.layout.columns,
                        &self.config.states,
                        self.served.layout.tz,
                    )
                })
                .collect();
            let reply = self.sheets.append(&self.append_range(fresh), &rows).await?;
            for j in &intake.new_rows {
                info!(job.id = ?j.job_id, target = %Logged(&j.target), function = %Logged(&j.function), "press taken into the queue");
            }
            // Where Google put them, so they can be claimed now (the commit's read-back
            // checks each claim as usual).
            if let Some(first) = a1::A1Range::parse(&reply.updated_range)
                .ok()
                .and_then(|r| r.start_row)
            {
                taken.extend(
                    rows.iter()
                        .enumerate()
                        .filter_map(|(k, cells)| self.parse_row(cells, first + 1 + k as u32)),
                );
            }
        }
        let writes = intake
            .clears
            .iter()
            .chain(&intake.duplicates)
            .chain(&intake.rejected)
            .filter_map(|v| self.grid_write(v))
            .collect();
        Ok((writes, taken, intake))
    }

    /// The compare-and-swap that frees `held`, our lease; none while a write sent under it
    /// is in doubt: kept on purpose, it may still be applied. Our next pass takes the lease
    /// back (renewing it), or it runs out on its own.
    pub(super) fn release_request(&self, held: &str) -> Option<Request> {
        if self.served.lease_kept_until.is_some() {
            return None;
        }
        Some(lease::swap(
            self.served.layout.worker_sheet_id,
            held,
            lease::FREE,
        ))
    }

    pub(super) async fn release(&self, held: &str) {
        let Some(swap) = self.release_request(held) else {
            return;
        };
        let batch = BatchUpdate {
            requests: vec![swap],
            response_ranges: vec![],
            ..Default::default()
        };
        if let Err(e) = self.sheets.batch_update(&batch).await {
            warn!(error = %e, "could not release the lease; it expires on its own");
        }
    }

    /// Sends the follow-ups waiting since earlier passes (put-backs, restores, a timeout's
    /// cells, repairs) under the lease we hold, planned on `fresh` (read under it) and on
    /// the rows their bindings sit on now (one more read, also under it). No claim can
    /// come between that read and these writes, so none of them overwrites a claim made
    /// since the read (docs/design.md §4); one that a person's sort put on another row is
    /// repaired before the lease is released. A failure leaves them for the next pass.
    async fn write_follow_ups(&mut self, fresh: &mut Poll) {
        if self.served.pending_through.is_empty() && self.served.unsure.is_empty() {
            return;
        }
        let mut ids: Vec<i32> = self
            .served
            .pending_through
            .iter()
            .chain(&self.served.unsure)
            .map(|t| t.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        match self.read_bound(&ids).await {
            Ok(bound) => fresh.bound.extend(bound),
            Err(e) => {
                warn!(error = %e, "could not read the rows of the follow-up writes; they wait for the next pass");
                return;
            }
        }
        self.settle_unsure(fresh);
        let follow_ups = std::mem::take(&mut self.served.pending_through);
        if follow_ups.is_empty() {
            return;
        }
        let mut through = Vec::new();
        let mut rebind = Vec::new();
        self.place_follow_ups(fresh, follow_ups, &mut through, &mut rebind);
        if !rebind.is_empty() {
            self.rows_moved();
            if let Err(e) = self.rebind(&rebind).await {
                warn!(error = %e, "could not move the bindings of follow-up writes back; trying again at the next pass");
                self.keep_follow_ups(through);
                return;
            }
        }
        let left = self.lease_left().saturating_sub(self.config.lease_ttl / 4);
        let under = Under::Lease {
            send_by: std::time::Instant::now() + left,
        };
        if let Err(e) = self.write_through(fresh, through, Vec::new(), under).await {
            warn!(error = %e, "the follow-up writes failed; they are planned again at the next pass");
        }
    }

    /// Of `writes`, sent under the lease and failed in a way that leaves open whether
    /// Google applies them (it may, for up to its 180 s request limit), keeps those whose
    /// row is claimable (the repair of a row that a misplaced put-back turned 待機) and
    /// returns the others, to be sent again: their rows show a claim, so no one claims them
    /// meanwhile, and a second copy writes the same cells. A repair in doubt is not sent
    /// again until it shows on its row or can no longer apply (a second copy landing would
    /// look like the first), and the lease is kept until then: each of our commits renews
    /// it instead of releasing it, so no other daemon claims that row, which shows 待機 for
    /// a job that may have run already.
    pub(super) fn hold_in_doubt(&mut self, writes: Vec<Through>) -> Vec<Through> {
        let (claimable, again): (Vec<_>, Vec<_>) = writes
            .into_iter()
            .filter(|t| !t.result)
            .partition(|t| t.state == Some(State::Waiting));
        if claimable.is_empty() {
            return again;
        }
        warn!(
            writes = claimable.len(),
            "the repair of a row a misplaced put-back turned 待機 may still be applied by Google; keeping the lease until it shows on its row or can no longer apply"
        );
        let until = tokio::time::Instant::now() + REQUEST_LIMIT;
        self.served.lease_kept_until =
            Some(self.served.lease_kept_until.map_or(until, |u| u.max(until)));
        self.served.unsure.extend(claimable);
        again
    }

    /// Settles the writes of [`Self::hold_in_doubt`] by `fresh` (read under the lease):
    /// one whose row shows its cells was applied and cannot apply again; once Google's
    /// request limit has passed, the rest never will be and are planned afresh. With none
    /// left, the lease is released by this pass's commit.
    fn settle_unsure(&mut self, fresh: &Poll) {
        let expired = self
            .served
            .lease_kept_until
            .is_some_and(|until| tokio::time::Instant::now() >= until);
        let unsure = std::mem::take(&mut self.served.unsure);
        let (applied, open): (Vec<_>, Vec<_>) = unsure.into_iter().partition(|t| {
            fresh
                .bound
                .get(&t.id)
                .and_then(Option::as_ref)
                .is_some_and(|r| r.job_id == t.job_id && self.shows(r, &t.cells))
        });
        for t in &applied {
            info!(job.id = ?t.job_id, binding = t.id, "a write whose reply was lost shows on its row: it was applied");
            if t.unbind {
                self.served.unbind.push(t.id);
            }
        }
        if expired {
            for t in &open {
                warn!(job.id = ?t.job_id, binding = t.id, "a write whose reply was lost never showed on its row, and Google can no longer apply it; planning it afresh");
            }
            self.served.pending_through.extend(open);
        } else {
            self.served.unsure = open;
        }
        if self.served.unsure.is_empty() && self.served.lease_kept_until.take().is_some() {
            info!("no write sent under the lease is in doubt any more; the lease is released");
        }
    }

    /// What a commit leaves in the lease cell: `free`, or a new lease of ours when it is
    /// kept for the next claim (`keep`, [`Self::keep_lease`]) or while a write sent under it
    /// is in doubt ([`Self::hold_in_doubt`]), so that other daemons, which take over only a
    /// lease they watched stand still, wait.
    fn lease_after_commit(&self, keep: bool) -> String {
        if keep || self.served.lease_kept_until.is_some() {
            Lease::new(&self.config.worker_id, Utc::now() + self.lease_ttl()).to_string()
        } else {
            lease::FREE.to_string()
        }
    }

    /// The claim cells of a queue row (状態, 開始日時, ワーカー), for undoing a claim that
    /// landed on the wrong row.
    pub(super) fn claim_values(
        &self,
        state: Option<&str>,
        started: &Cell,
        worker: &str,
    ) -> Vec<(Column, Cell)> {
        state
            .map(|s| (Column::State, Cell::from(s)))
            .into_iter()
            .chain([
                (Column::StartedAt, started.clone()),
                (Column::Worker, Cell::from(worker)),
            ])
            .collect()
    }

    /// Cells of one queue row as A1 writes at a row number: only for rows claimed without a
    /// binding (by older versions or another tool), which have no other way to be found.
    pub(super) fn cells_at(&self, row: u32, cells: Vec<(Column, Cell)>) -> Vec<ValueRange> {
        let cols = &self.served.layout.columns;
        cells
            .into_iter()
            .map(|(c, v)| ValueRange::new(cols.cell(c, row), vec![vec![v]]))
            .collect()
    }

    /// An A1 write on a known sheet as a grid request, so it can join a commit batch.
    pub(super) fn grid_write(&self, v: &ValueRange) -> Option<Request> {
        if !self.writable(v) {
            return None;
        }
        Some(Request::UpdateCells {
            range: self.grid_range(v)?,
            rows: v.values.clone(),
        })
    }

    /// The cells an A1 write covers, on a sheet of the last sheet list.
    pub(super) fn grid_range(&self, v: &ValueRange) -> Option<GridRange> {
        let r = a1::A1Range::parse(&v.range).ok()?;
        let sheet_id = *self.served.sheet_ids.get(r.sheet.as_deref()?)?;
        let start_row = r.start_row?;
        let start_col = r.start_col?;
        let width = v.values.iter().map(Vec::len).max().unwrap_or(0) as u32;
        Some(GridRange {
            sheet_id,
            start_row,
            end_row: start_row + v.values.len() as u32,
            start_col,
            end_col: start_col + width,
        })
    }

    /// The claims' `_ジョブログ` rows, in the commit: one inserted under the header per claim
    /// (newest first), with its jobId, target, function and start, bound to the job
    /// ([`joblog::binding_id`] of its queue binding) so that its output follows through the
    /// binding wherever the row goes; and the links to it: the queue row's 結果URL and the
    /// panel row's 結果, as formulas that find the rows by jobId when shown. Inserting at a
    /// fixed place needs no read of the log. Nothing when the spreadsheet has no log sheet.
    /// Each claim's `linked` and `panel_linked` say which links were written.
    fn log_rows(
        &self,
        fresh: &Poll,
        claims: &mut [Claimed],
        now: chrono::DateTime<Utc>,
    ) -> Vec<Request> {
        let Some(log) = &self.served.layout.log else {
            return Vec::new();
        };
        if claims.is_empty() {
            return Vec::new();
        }
        let tz = self.served.layout.tz;
        let serial = Cell::from(sheet_time::instant_to_serial(now, tz));
        let mut requests = vec![Request::InsertRows {
            sheet_id: log.sheet_id,
            at: 1,
            count: claims.len() as u32,
        }];
        for (i, c) in claims.iter_mut().enumerate() {
            let row = 1 + i as u32;
            let cells = log.sparse_row(&[
                (LogColumn::JobId, Cell::from(c.row.job_id.as_str())),
                (LogColumn::Target, Cell::from(c.row.target_key())),
                (LogColumn::Function, Cell::from(c.row.function.as_str())),
                (LogColumn::StartedAt, serial.clone()),
            ]);
            let cells: Vec<Cell> = cells
                .into_iter()
                .map(|c| c.unwrap_or_else(|| Cell::from("")))
                .collect();
            requests.push(Request::UpdateCells {
                range: GridRange {
                    sheet_id: log.sheet_id,
                    start_row: row,
                    end_row: row + 1,
                    start_col: 0,
                    end_col: cells.len() as u32,
                },
                rows: vec![cells],
            });
            if let Some(id) = binding::id_of_token(&c.tag.token) {
                requests.push(Request::BindRow {
                    sheet_id: log.sheet_id,
                    row,
                    id: joblog::binding_id(id),
                    key: binding::KEY.to_string(),
                    value: format!("log {}", c.tag),
                });
            }
            let cols = &self.served.layout.columns;
            if let Some(f) =
                joblog::result_url_formula(&self.config.spreadsheet_id, log, &c.row.job_id)
            {
                requests.push(Request::WriteFormulas {
                    range: GridRange::cell(
                        self.queue_sheet_id(),
                        c.row.row - 1,
                        cols.index(Column::ResultUrl),
                    ),
                    rows: vec![vec![Cell::from(f)]],
                });
                c.linked = true;
            }
            let located = panel::locate(&self.served.panels, &fresh.tables, &c.row);
            let formula =
                joblog::panel_result_formula(cols, &c.row.job_id, panel::RESULT_MAX_CHARS);
            if let (Ok((panel_ref, panel_row)), Some(f)) = (located, formula) {
                let link = Request::WriteFormulas {
                    range: GridRange::cell(
                        panel_ref.sheet_id,
                        panel_row.row - 1,
                        self.config.panel.columns.result.0,
                    ),
                    rows: vec![vec![Cell::from(f)]],
                };
                // A 結果 cell someone else's protection bars gets no link (`hold_off`).
                if self.request_writable(&link) {
                    requests.push(link);
                    c.panel_linked = true;
                }
            }
        }
        requests
    }

    pub(super) fn row_range(&self, row: u32) -> String {
        a1::range(
            QUEUE_SHEET,
            &format!("A{row}:{}{row}", self.served.layout.last_col),
        )
    }

    pub(super) fn queue_sheet_id(&self) -> i32 {
        self.served.layout.queue_sheet_id
    }

    /// Whether this daemon may start `row` now, with `picked` already chosen in this pass: a
    /// heavy job (by its command's config or the row's `heavy` flag) waits while another
    /// heavy job runs here or was just picked, rather than being claimed and spending its
    /// timeout at the heavy gate.
    pub(super) fn may_start(&self, row: &QueueRow, picked: &[&QueueRow]) -> bool {
        match self.served.marks.of(row) {
            // A row that says it is a continuation step waits for the search of marks that
            // tells whether sheetq wrote it (`provenance`).
            Provenance::Unknown => return false,
            // One sheetq did not write is claimed to be refused (nothing runs): neither its
            // approvers nor the heavy gate need to wait for it. While a daemon of another
            // Cloud project serves the spreadsheet, its mark may be one we cannot read: the
            // row is left to it.
            Provenance::Unmarked => return self.served.marks_seen_by_all && !self.held(row),
            Provenance::Continuation | Provenance::Plain => {}
        }
        // A job of a function with approvers starts only with enough of them, on a queue
        // that vouches for them (docs/design.md §5.5); admission checks them again. A
        // continuation step goes on with work already approved.
        let rule = self.registry.catalog().approval_rule(&row.function);
        if let (Some(rule), false) = (rule, self.served.marks.vouches(row)) {
            if !self.registry.queue_protected() || !crate::approval::cleared(row, Some(&rule)) {
                return false;
            }
        }
        let heavy = |r: &QueueRow| self.is_heavy(r);
        !self.held(row)
            && (!heavy(row)
                || !(self.running.values().any(|c| heavy(&c.row))
                    || picked.iter().any(|p| heavy(p))
                    || self.slots.heavy_elsewhere()))
    }

    /// A job we run, or whose result we still have to write, may show as 待機 for a moment
    /// (a misplaced put-back, before its repair): it is not ours to start again.
    fn held(&self, row: &QueueRow) -> bool {
        self.running
            .values()
            .chain(&self.unsettled)
            .any(|c| c.row.job_id == row.job_id)
            || self.outbox.contains(&row.job_id)
            || self
                .served
                .landed
                .iter()
                .any(|(j, _)| j.job_id == row.job_id)
    }

    /// Whether `row` is a heavy job: by its command's or its function's config, or its
    /// `heavy` flag (a row can make a job more careful, never less).
    pub(super) fn is_heavy(&self, row: &QueueRow) -> bool {
        self.registry.is_heavy_job(&row.command, &row.function)
            || row.flags.iter().any(|f| f == "heavy")
    }

    /// The claim plan on `snapshot` (a poll's read, or what the poll read as our writes since
    /// left it) within the slots this spreadsheet may take now: the process's slot pool
    /// learns how many rows it could claim, and the plan keeps as many as its fair share
    /// leaves (the plan picks one row after another, so a shorter plan is a prefix of a
    /// longer one).
    pub(super) fn plan_claims(
        &self,
        snapshot: &crate::queue::Snapshot,
        watched: &claim::Watched,
        elsewhere: &[RunningRef],
    ) -> claim::PassPlan<crate::approval::Turn> {
        let catalog = self.registry.catalog();
        let mut plan = claim::plan_pass(
            snapshot,
            &self.policy,
            watched,
            elsewhere,
            usize::MAX,
            |row, picked| self.may_start(row, picked),
        );
        self.slots.want(plan.claims.len());
        plan.claims.truncate(self.slots.available());
        let busy = claim::Busy::of(snapshot, elsewhere);
        // On a queue that lost its protection approvals cannot be trusted: nothing of such
        // functions is turned (nor claimed, `may_start`) until it is protected again.
        let protected = self.registry.queue_protected();
        // Only presses turn: a continuation step goes on with work already approved, and a
        // row that only says it is one is refused, or waits for the marks' search.
        let marks = &self.served.marks;
        plan.turns = crate::approval::turns(
            &snapshot.rows,
            |f| catalog.approval_rule(f),
            |row| busy.may_claim(row) && marks.of(row) == Provenance::Plain,
            protected,
            self.served.layout.tz,
            watched.google_now,
        );
        plan
    }

    /// Whether polling intake is on and some ▶ or ■ box is ticked, on a panel or on the
    /// index.
    /// How many presses `poll` shows waiting here: rows 待機, and ▶ ticks not taken in yet.
    pub(super) fn presses_waiting(&self, poll: &Poll) -> usize {
        let rows = (poll.snapshot.rows.iter())
            .filter(|r| r.state.is(State::Waiting))
            .count();
        let ticks = if self.config.intake == Intake::Poll {
            let on_panels = (poll.tables.values())
                .map(|t| t.rows.iter().filter(|r| r.ticked).count())
                .sum::<usize>();
            let on_index =
                (poll.index.as_ref()).map_or(0, |i| i.entries.iter().filter(|e| e.ticked).count());
            on_panels + on_index
        } else {
            0
        };
        rows + ticks
    }

    pub(super) fn has_ticks(&self, poll: &Poll) -> bool {
        self.config.intake == Intake::Poll
            && (poll.tables.values().any(|t| {
                t.rows
                    .iter()
                    .any(|r| r.ticked || r.cancel_ticked || !r.approve_ticks.is_empty())
            }) || poll
                .index
                .as_ref()
                .is_some_and(|i| i.entries.iter().any(|e| e.ticked)))
    }
}

/// What the read-back of a claim commit says of one claim (docs/design.md §2, settle).
#[derive(Debug)]
enum Settled {
    /// The row holds our claim on the job we meant: run it.
    Run(Claimed),
    /// A person sorted the queue between our read and the commit, and another waiting row
    /// sat at that position: we did claim *that* row (its 待機 turned 実行中 under our
    /// token), and its target is idle, so it runs instead of `planned`.
    RunInstead { claimed: Claimed, planned: String },
    /// As above, but the claimed row's target is busy: it goes back to 待機 and the slot is
    /// free.
    PutBack { row: QueueRow, slot: u32 },
    /// The row was not ours after the commit: nothing runs and the slot is free.
    /// `landed_on` is the other job's row our 開始日時/ワーカー landed on (to give back its
    /// values); else `unbind` is the binding to remove, wherever it landed.
    Conflict {
        claimed: Claimed,
        landed_on: Option<Box<QueueRow>>,
        unbind: Option<i32>,
    },
}

/// Decides each claim of a commit from its reply: `after[k]` is claim `k`'s row as the
/// read-back shows it, `places[k]` where its entry is in the commit, `busy`
/// what keeps a row from being claimed (the plan's rules, on the fresh read), `may_start`
/// whether this daemon may start a row now (the heavy gate, jobs it already holds).
fn settle_claims(
    reply: &BatchUpdateReply,
    places: &[Place],
    claims: Vec<Claimed>,
    after: Vec<Option<QueueRow>>,
    mut busy: claim::Busy,
    may_start: impl Fn(&QueueRow) -> bool,
) -> Vec<Settled> {
    for c in &claims {
        busy.take(&c.row);
    }
    let mut settled = Vec::with_capacity(claims.len());
    for ((claimed, after), place) in claims.into_iter().zip(after).zip(places) {
        let swap = place.swapped(reply);
        let ours = after
            .as_ref()
            .is_some_and(|r| r.worker == claimed.tag.to_string());
        let binding_id = binding::id_of_token(&claimed.tag.token);
        let bound_here = binding_id.is_some_and(|id| place.bound_here(reply, id));
        if ours && !bound_here {
            // The batch is atomic and the binding was created at the swap's row, so this
            // means the reply did not show it: say so; the write-back rebinds if needed.
            warn!(job.id = ?claimed.row.job_id, worker = %claimed.tag, "the claim commit's read-back does not show the row binding");
        }
        settled.push(match after {
            Some(row) if swap && ours && row.job_id == claimed.row.job_id => Settled::Run(claimed),
            Some(row) if swap && ours => {
                if busy.may_claim(&row) && busy.target_idle(&row) && may_start(&row) {
                    busy.take(&row);
                    let planned = claimed.row.job_id.clone();
                    Settled::RunInstead {
                        claimed: Claimed { row, ..claimed },
                        planned,
                    }
                } else {
                    Settled::PutBack {
                        row,
                        slot: claimed.slot,
                    }
                }
            }
            other => {
                let landed_on =
                    (other.filter(|r| ours && r.job_id != claimed.row.job_id)).map(Box::new);
                let unbind = binding_id.filter(|_| landed_on.is_none());
                Settled::Conflict {
                    claimed,
                    landed_on,
                    unbind,
                }
            }
        });
    }
    settled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(n: u32, job: &str, target: &str, state: State, worker: &str) -> QueueRow {
        QueueRow {
            job_id: job.into(),
            target: target.into(),
            state: crate::queue::RowState::Known(state),
            worker: worker.into(),
            ..QueueRow::blank(n)
        }
    }

    /// Claim `slot` of job `job` (waiting on row `n`, target `target`), with a fresh token.
    fn claim_of(n: u32, job: &str, target: &str, slot: u32) -> Claimed {
        let (token, _) = binding::new_token();
        Claimed {
            row: queued(n, job, target, State::Waiting, ""),
            tag: WorkerTag {
                daemon_id: "vm-1".into(),
                slot,
                token,
            },
            slot,
            started_at: Utc::now(),
            lost_commit: None,
            log_row: false,
            linked: false,
            panel_linked: false,
            continuation: None,
        }
    }

    /// The reply of a commit with no timeouts whose claims' tripwires changed (or not) as
    /// `swapped` says, each claim's binding shown on its row.
    fn commit_reply(claims: &[Claimed], swapped: &[bool]) -> BatchUpdateReply {
        let mut replies = vec![Reply::Empty];
        for s in swapped {
            replies.push(Reply::CompareAndSwap {
                changed: u32::from(*s),
            });
            replies.extend([Reply::Empty, Reply::Empty, Reply::Empty]);
        }
        let row_metadata = claims
            .iter()
            .map(|c| vec![binding::id_of_token(&c.tag.token).into_iter().collect()])
            .collect();
        BatchUpdateReply {
            replies,
            row_metadata,
            ..Default::default()
        }
    }

    fn nothing_busy(rows: &[QueueRow]) -> claim::Busy {
        let snapshot = crate::queue::Snapshot {
            rows: rows.to_vec(),
            problems: Vec::new(),
        };
        claim::Busy::of(&snapshot, &[])
    }

    /// The places of `claims` claims in a commit after `stale` timeouts, as `commit_of`
    /// lays them out (the fence first, one swap per timeout, four requests per claim).
    fn claim_places(stale: u32, claims: u32) -> Vec<Place> {
        let mut ledger = Ledger::starting_with(Request::DeleteMetadata { id: 0 });
        for row in 0..stale {
            ledger.row(
                cas(1, row + 2, 10, "実行中", "タイムアウト"),
                [],
                format!("A{row}"),
            );
        }
        (0..claims)
            .map(|k| {
                let row = stale + k + 2;
                ledger.row(
                    cas(1, row, 10, "待機", "実行中"),
                    [
                        Request::DeleteMetadata { id: 0 },
                        Request::DeleteMetadata { id: 0 },
                        Request::DeleteMetadata { id: 0 },
                    ],
                    format!("A{row}"),
                )
            })
            .collect()
    }

    /// Settles the single claim `c` of a commit with no timeouts, its row read back as
    /// `after`, on a fresh read of `rows`.
    fn settle_one(
        c: &Claimed,
        reply: &BatchUpdateReply,
        after: QueueRow,
        rows: &[QueueRow],
        may_start: bool,
    ) -> Vec<Settled> {
        settle_claims(
            reply,
            &claim_places(0, 1),
            vec![c.clone()],
            vec![Some(after)],
            nothing_busy(rows),
            |_| may_start,
        )
    }

    #[test]
    fn a_claim_whose_row_shows_our_tag_on_its_job_runs() {
        let c = claim_of(5, "j1", "A", 0);
        let reply = commit_reply(std::slice::from_ref(&c), &[true]);
        let after = queued(5, "j1", "A", State::Running, &c.tag.to_string());
        let settled = settle_one(&c, &reply, after, std::slice::from_ref(&c.row), true);
        assert!(
            matches!(&settled[..], [Settled::Run(r)] if r.row.job_id == "j1"),
            "the claim that hit its own row must run: {settled:?}"
        );
    }

    #[test]
    fn a_row_a_sort_put_under_the_claim_runs_instead_when_its_target_is_idle_else_goes_back() {
        let c = claim_of(5, "j1", "A", 3);
        let reply = commit_reply(std::slice::from_ref(&c), &[true]);
        // The tripwire flipped the 待機 of j2 (target B), which a sort moved to row 5.
        let other = queued(5, "j2", "B", State::Running, &c.tag.to_string());
        let waiting_j2 = queued(9, "j2", "B", State::Waiting, "");
        let rows = [c.row.clone(), waiting_j2.clone()];
        let settled = settle_one(&c, &reply, other.clone(), &rows, true);
        match &settled[..] {
            [Settled::RunInstead { claimed, planned }] => {
                assert_eq!(claimed.row.job_id, "j2", "the row really claimed runs");
                assert_eq!(planned, "j1");
                assert_eq!(claimed.slot, 3, "in the slot the claim took");
            }
            other => panic!("expected j2 to run instead of j1, got {other:?}"),
        }
        // B runs something already: j2 goes back to 待機, the slot is free.
        let b_running = queued(12, "j3", "B", State::Running, "vm-2/0 #00000009");
        let settled = settle_one(
            &c,
            &reply,
            other.clone(),
            &[c.row.clone(), waiting_j2.clone(), b_running],
            true,
        );
        assert!(
            matches!(&settled[..], [Settled::PutBack { row, slot: 3 }] if row.job_id == "j2"),
            "a busy target's row must go back to waiting: {settled:?}"
        );
        // The heavy gate (or a job this daemon holds) refuses it just the same.
        let settled = settle_one(&c, &reply, other, &rows, false);
        assert!(matches!(&settled[..], [Settled::PutBack { .. }]));
    }

    #[test]
    fn a_claim_that_lost_its_row_runs_nothing_and_gives_back_where_its_cells_landed() {
        let c = claim_of(5, "j1", "A", 1);
        let id = binding::id_of_token(&c.tag.token);
        // Another daemon was first: the tripwire changed nothing and the row shows its tag.
        let reply = commit_reply(std::slice::from_ref(&c), &[false]);
        let theirs = queued(5, "j1", "A", State::Running, "vm-2/0 #0000000a");
        let settled = settle_one(&c, &reply, theirs, std::slice::from_ref(&c.row), true);
        match &settled[..] {
            [Settled::Conflict {
                landed_on: None,
                unbind,
                claimed,
            }] => {
                assert_eq!(*unbind, id, "the claim's binding goes wherever it landed");
                assert_eq!(claimed.slot, 1);
            }
            other => panic!("expected a plain conflict, got {other:?}"),
        }
        // A sort put a finished row there: our 開始日時/ワーカー landed on it, not a claim.
        let finished = queued(5, "j0", "A", State::Done, &c.tag.to_string());
        let settled = settle_one(&c, &reply, finished, std::slice::from_ref(&c.row), true);
        assert!(
            matches!(&settled[..], [Settled::Conflict { landed_on: Some(r), unbind: None, .. }] if r.job_id == "j0"),
            "the finished row gets its values back through the binding, which stays for that: {settled:?}"
        );
    }

    #[test]
    fn claims_after_timeouts_are_read_at_their_own_replies() {
        // One stale row's swap (changed) comes first; the claim's own swap did not change.
        let c = claim_of(5, "j1", "A", 0);
        let reply = BatchUpdateReply {
            replies: vec![
                Reply::Empty,
                Reply::CompareAndSwap { changed: 1 },
                Reply::CompareAndSwap { changed: 0 },
            ],
            row_metadata: vec![Vec::new(), Vec::new()],
            ..Default::default()
        };
        let after = queued(5, "j1", "A", State::Running, &c.tag.to_string());
        let settled = settle_claims(
            &reply,
            &claim_places(1, 1),
            vec![c.clone()],
            vec![Some(after)],
            nothing_busy(std::slice::from_ref(&c.row)),
            |_| true,
        );
        assert!(
            matches!(&settled[..], [Settled::Conflict { .. }]),
            "the timeout's swap must not be taken for the claim's: {settled:?}"
        );
    }

    #[test]
    fn a_fence_outlives_every_batch_it_fences() {
        let ttl = std::time::Duration::from_secs(30);
        assert!(fence_kept(ttl) >= ttl + std::time::Duration::from_secs(180));
    }
}
