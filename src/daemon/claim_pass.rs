//! The claim pass (docs/design.md §2–§3): take the lease with a compare-and-swap that reads the queue
//! in the same call, decide on that fresh data, and commit claims, timeouts, intake and the
//! lease release in one atomic batch whose reply says which claims really are ours.

use chrono::Utc;
use tracing::{debug, info, instrument, warn};

use crate::a1;
use crate::approval;
use crate::claim;
use crate::config::Intake;
use crate::lease::{self, LeaseState};
use crate::panel;
use crate::queue::{self, QueueRow, State};
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdate, BatchUpdateReply, Cell, Precedence, Reply, Request, ValueRange};
use crate::workers::RunningRef;

use super::approvals::{self, Turned};
use super::cancels::{self, Cancelling};
use super::effects::{Effect, Writes};
use super::kept_lease::{KeptLease, KEPT_ROUNDS};
use super::ledger::{Ledger, Place, ReadBack, REQUEST_LIMIT};
use super::rollouts::{self, RolloutWork};
use super::stale::{self, Ended};

use super::through::Under;
use super::{Claimed, Daemon, DaemonError, Poll};

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
    /// Rollout rows starting or ending.
    rollouts: Vec<rollouts::Turning>,
}

/// What a pass took in under the lease, for its commit: the requests (appends, ■ and
/// approval texts, a rollout's stops and progress) and the rollout rows to turn.
struct TakenIn {
    writes: Vec<Request>,
    rollouts: Vec<(usize, rollouts::Turn)>,
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
        let kept = self.served.lease.kept.take();
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
        let rows_before = fresh.snapshot.rows.len();
        let (intake_writes, scheduled, (rollout_turns, vouched)) =
            match self.take_in(&mut fresh, now).await {
                Ok(taken) => taken,
                Err(e) => {
                    self.release(&held).await;
                    return Err(e);
                }
            };
        // Presses taken in now say so on their panel rows in this very commit (what they
        // wait for, or 実行中 for those it claims), not at a later pass's write.
        let display = if fresh.snapshot.rows.len() > rows_before {
            self.panel_display(&fresh)
        } else {
            display
        };
        self.stop_asked_jobs(&fresh.snapshot);
        let elsewhere = self.running_elsewhere(&fresh);
        let plan = self.plan_claims(&fresh.snapshot, &fresh.watched, &elsewhere);
        let keep = (rounds < KEPT_ROUNDS
            && self.keep_lease(&fresh.workers, &fresh.snapshot, &plan))
        .then_some(rounds + 1);
        let taken_in = TakenIn {
            writes: intake_writes,
            rollouts: rollout_turns,
        };
        let mut commit = self.commit_of(&fresh, &plan, &held, now, &display, taken_in);
        // Marks of continuation rows claimed or gone ride along (`provenance`).
        let claimed: Vec<&QueueRow> = commit.claims.iter().map(|c| &c.row).collect();
        let mut marks = self.mark_work(&fresh, &claimed);
        commit.ledger.extend(std::mem::take(&mut marks.requests));
        // The marks of a rollout's jobs appended now (approved with it), after the marks'
        // own work: a mark of a row this commit appends is no mark of a row gone.
        let vouched: Vec<Request> = (vouched.iter())
            .map(|j| {
                self.continuation_mark(&crate::provenance::Fields {
                    job_id: &j.job_id,
                    requester: &j.requester,
                    panel_sheet: &j.panel_sheet,
                    target: &j.target,
                    function: &j.function,
                    command: &j.command,
                    args_json: &j.args_json,
                })
            })
            .collect();
        let vouched_marks: Vec<crate::provenance::Mark> = (vouched.iter())
            .filter_map(|r| match r {
                Request::MarkSheet { id, value, .. } => Some(crate::provenance::Mark {
                    value: value.clone(),
                    id: *id,
                }),
                _ => None,
            })
            .collect();
        commit.ledger.extend(vouched);
        // Last, the lease: released, or swapped to a new lease of ours that it keeps.
        let after = self.lease_after_commit(keep.is_some());
        commit.ledger.extend([lease::swap(
            self.served.layout.worker_sheet_id,
            &held,
            &after,
        )]);
        let sent = tokio::time::Instant::now();
        let Some(reply) = self.send_commit(&mut commit, &held).await? else {
            // Nothing of it applied: the marks it carried are none.
            self.served.continuations.marks.removed(&vouched_marks);
            return Ok(false);
        };

        if let (Some(rounds), Some(Reply::CompareAndSwap { changed: 1 })) =
            (keep, reply.replies.last())
        {
            // Counted from before the commit was sent, in our own time, as an acquire's is.
            self.served.lease.sent = Some(sent);
            self.served.lease.kept = Some(KeptLease {
                value: after,
                rounds,
            });
        }
        self.schedules_queued(&scheduled, now);
        let effects = self.commit_effects(&fresh, &reply, &elsewhere, commit, now);
        let mut writes = Writes::default();
        self.apply(&fresh, effects, now, &mut writes);
        let Writes {
            through,
            follow_up,
            undo,
        } = writes;
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
        self.served.writes.pending.extend(through);
        self.write_through(&fresh, Vec::new(), follow_up, Under::NoLease)
            .await?;
        // Our heartbeat went with the commit.
        self.served.fleet.last_heartbeat = Some(tokio::time::Instant::now());
        Ok(true)
    }

    /// What the pass takes in under the lease, on its fresh read, before deciding: presses
    /// first (the rows they become are claimable in this very pass), ■ ticks and approval
    /// ticks, the rollouts' steps (their waves appended, their stops asked, their rows to
    /// turn), then the occurrences of [[schedules]] that no row has (appended by the commit,
    /// all or nothing with it, claimed at a later pass). Returns the commit's requests for
    /// them, the occurrences appended and the rollout rows to turn.
    async fn take_in(
        &mut self,
        fresh: &mut Poll,
        now: chrono::DateTime<Utc>,
    ) -> Result<
        (
            Vec<Request>,
            Vec<super::schedules::Occurrence>,
            (Vec<(usize, rollouts::Turn)>, Vec<panel::NewJob>),
        ),
        DaemonError,
    > {
        let (mut writes, taken, plan) = self.take_in_presses(fresh, now).await?;
        fresh.snapshot.rows.extend(taken);
        writes.extend(self.take_in_cancels(fresh, plan.cancels));
        writes.extend(self.take_in_approvals(fresh, plan.approvals, now));
        let RolloutWork {
            requests,
            turns,
            vouched,
        } = self.take_in_rollouts(fresh, now).await?;
        writes.extend(requests);
        let (appends, scheduled) = self.take_in_schedules(fresh, now).await?;
        writes.extend(appends);
        Ok((writes, scheduled, (turns, vouched)))
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
        taken_in: TakenIn,
    ) -> Commit {
        // The fence of our lease first: should the lease have been taken over by the time
        // Google applies this batch (however late), the fence exists and nothing applies.
        let mut ledger =
            Ledger::starting_with(lease::fence(self.served.layout.worker_sheet_id, held));
        let stale = self.stale_entries(&mut ledger, fresh, &plan.stale, now);
        let (mut claims, claim_places) = self.claim_entries(&mut ledger, fresh, &plan.claims, now);
        let cancels = self.cancel_entries(&mut ledger, fresh, &plan.cancels);
        let turns = self.turn_entries(&mut ledger, fresh, &plan.turns);
        let rollouts = self.rollout_entries(&mut ledger, fresh, &taken_in.rollouts);
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
        requests.extend(taken_in.writes);
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
                    &self.served.panels.index,
                    &fresh.tables,
                    &self.config.panel,
                );
                requests.extend(cell.as_ref().and_then(|v| self.grid_write(v)));
            }
        }
        // The index says so too, in the same write: its 状況 counts the rows claimed now as
        // running, not as waiting.
        let mut as_committed = fresh.snapshot.rows.clone();
        for row in as_committed.iter_mut() {
            if claims.iter().any(|c| c.row.job_id == row.job_id) {
                row.state = crate::queue::RowState::Known(State::Running);
            }
        }
        requests.extend(
            (self.index_display(fresh, &as_committed).iter()).filter_map(|v| self.grid_write(v)),
        );
        for c in &claims {
            let cell = panel::running_cell(
                &c.row,
                now,
                &self.served.panels.index,
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
            rollouts,
        }
    }

    /// What the commit's reply decides, section by section in the commit's order, each
    /// through its own entries' places: the stale rows, the claims, the cancels and the
    /// approval turns.
    fn commit_effects(
        &self,
        fresh: &Poll,
        reply: &BatchUpdateReply,
        elsewhere: &[RunningRef],
        commit: Commit,
        now: chrono::DateTime<Utc>,
    ) -> Vec<Effect> {
        let tz = self.served.layout.tz;
        let read = ReadBack::new(reply, &self.served.layout.columns, &self.config.states, tz);
        let mut effects = stale::settle(&commit.stale, &read);
        effects.extend(self.claim_effects(
            fresh,
            &read,
            elsewhere,
            commit.claims,
            &commit.claim_places,
        ));
        effects.extend(cancels::settle(&commit.cancels, &read, now, tz));
        effects.extend(approvals::settle(&commit.turns, &read, now, tz));
        effects.extend(rollouts::settle(commit.rollouts, &read));
        effects
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
                    self.jobs
                        .unsettled
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
            .lease
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

    /// Claims whose commit reply was lost, resolved from a poll once the commit can no longer
    /// apply: the lease it was made under is off the cell (taken over with the fence, or
    /// released by the commit itself), or Google's 180 s request limit has passed. Then a
    /// row that holds the job, is 実行中 and carries our token means the commit applied, and
    /// the job runs; otherwise it did not (the commit is atomic), and the slot is freed.
    pub(super) fn settle_unsettled(&mut self, poll: &Poll) {
        for c in std::mem::take(&mut self.jobs.unsettled) {
            let open = c.lost_commit.as_ref().is_some_and(|(lease, sent)| {
                poll.lease == LeaseState::parse(lease) && sent.elapsed() < REQUEST_LIMIT
            });
            if open {
                self.jobs.unsettled.push(c);
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
            index: &self.served.panels.index,
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
