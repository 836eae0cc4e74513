//! The claims room of the daemon (docs/design.md §2): which waiting rows this daemon may
//! start ([`Daemon::plan_claims`], the heavy gate, approvals, provenance), each claim's
//! entry in the claim commit (the tripwire 待機 → 実行中, the row binding, 開始日時/ワーカー)
//! and its `_ジョブログ` row with the links to it, and what the commit's read-back decides of
//! each claim ([`settle_claims`], pure, and the [`Effect`]s it asks for).

use chrono::Utc;
use tracing::warn;

use crate::binding;
use crate::claim;
use crate::joblog::{self, LogColumn};
use crate::panel;
use crate::provenance::Provenance;
use crate::queue::{Column, QueueRow, WorkerTag};
use crate::sheet_text::Logged;
use crate::sheet_time;
use crate::sheets::{Cell, GridRange, Request};
use crate::workers::RunningRef;

use super::effects::{Effect, Metric};
use super::ledger::{cas, cell, Ledger, Place, ReadBack};
use super::poll::Poll;
use super::{Claimed, Daemon};

impl Daemon {
    /// The commit's entries of the claims `planned` (indices into the fresh read), each
    /// taking a free slot while there is one: the tripwire, then the binding on the same row
    /// in the same atomic batch (the binding lands exactly where the swap did, and the
    /// read-back says which job that row holds), then 開始日時 and ワーカー. Returns the
    /// claims and where each entry is.
    pub(super) fn claim_entries<T>(
        &mut self,
        ledger: &mut Ledger,
        fresh: &Poll,
        planned: &[(usize, T)],
        now: chrono::DateTime<Utc>,
    ) -> (Vec<Claimed>, Vec<Place>) {
        let cols = self.served.layout.columns.clone();
        let qid = self.queue_sheet_id();
        let serial = Cell::from(sheet_time::instant_to_serial(now, self.served.layout.tz));
        let mut claims = Vec::new();
        let mut claim_places = Vec::new();
        for (index, _) in planned {
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
                continuation: self
                    .served
                    .continuations
                    .marks
                    .vouches(row)
                    .then(|| row.job_id.clone()),
            });
        }
        (claims, claim_places)
    }

    /// What the commit's read-back decides of its claims (by [`settle_claims`], on the
    /// fresh read's busy targets and `elsewhere`, the jobs other daemons run), as effects.
    pub(super) fn claim_effects(
        &self,
        fresh: &Poll,
        read: &ReadBack,
        elsewhere: &[RunningRef],
        claims: Vec<Claimed>,
        places: &[Place],
    ) -> Vec<Effect> {
        let after: Vec<Option<QueueRow>> = (claims.iter().zip(places))
            .map(|(c, place)| read.row(*place, c.row.row))
            .collect();
        let busy = claim::Busy::of(&fresh.snapshot, elsewhere);
        settle_claims(read, places, claims, after, busy, |row| {
            self.may_start(row, &[])
        })
        .into_iter()
        .flat_map(Settled::effects)
        .collect()
    }

    /// The claims' `_ジョブログ` rows, in the commit: one inserted under the header per claim
    /// (newest first), with its jobId, target, function and start, bound to the job
    /// ([`joblog::binding_id`] of its queue binding) so that its output follows through the
    /// binding wherever the row goes; and the links to it: the queue row's 結果URL and the
    /// panel row's 結果, as formulas that find the rows by jobId when shown. Inserting at a
    /// fixed place needs no read of the log. Nothing when the spreadsheet has no log sheet.
    /// Each claim's `linked` and `panel_linked` say which links were written.
    pub(super) fn log_rows(
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
                (
                    LogColumn::Function,
                    Cell::from(crate::joblog::function_text(
                        &c.row.function,
                        &self
                            .registry
                            .catalog()
                            .inputs_text(&c.row.function, &c.row.args_json),
                    )),
                ),
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
            let located = panel::locate(&self.served.panels.index, &fresh.tables, &c.row);
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

    /// Whether this daemon may start `row` now, with `picked` already chosen in this pass: a
    /// heavy job (by its command's config or the row's `heavy` flag) waits while another
    /// heavy job runs here or was just picked, rather than being claimed and spending its
    /// timeout at the heavy gate.
    pub(super) fn may_start(&self, row: &QueueRow, picked: &[&QueueRow]) -> bool {
        match self.served.continuations.marks.of(row) {
            // A row that says it is a continuation step waits for the search of marks that
            // tells whether sheetq wrote it (`provenance`).
            Provenance::Unknown => return false,
            // One sheetq did not write is claimed to be refused (nothing runs): neither its
            // approvers nor the heavy gate need to wait for it. While a daemon of another
            // Cloud project serves the spreadsheet, its mark may be one we cannot read: the
            // row is left to it.
            Provenance::Unmarked => {
                return self.served.continuations.seen_by_all && !self.held(row)
            }
            Provenance::Continuation | Provenance::Plain => {}
        }
        // A job of a function with approvers starts only with enough of them, on a queue
        // that vouches for them (docs/design.md §5.5); admission checks them again. A
        // continuation step goes on with work already approved.
        let rule = self.registry.catalog().approval_rule(&row.function);
        if let (Some(rule), false) = (rule, self.served.continuations.marks.vouches(row)) {
            if !self.registry.queue_protected() || !crate::approval::cleared(row, Some(&rule)) {
                return false;
            }
        }
        let heavy = |r: &QueueRow| self.is_heavy(r);
        !self.held(row)
            && (!heavy(row)
                || !(self.jobs.running.values().any(|c| heavy(&c.row))
                    || picked.iter().any(|p| heavy(p))
                    || self.slots.heavy_elsewhere()))
    }

    /// A job we run, or whose result we still have to write, may show as 待機 for a moment
    /// (a misplaced put-back, before its repair): it is not ours to start again.
    fn held(&self, row: &QueueRow) -> bool {
        self.jobs
            .running
            .values()
            .chain(&self.jobs.unsettled)
            .any(|c| c.row.job_id == row.job_id)
            || self.outbox.contains(&row.job_id)
            || self
                .served
                .writes
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
        let marks = &self.served.continuations.marks;
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
}

/// What the read-back of a claim commit says of one claim (docs/design.md §2, settle).
#[derive(Debug)]
pub(super) enum Settled {
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
pub(super) fn settle_claims(
    read: &ReadBack,
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
        let swap = read.swapped(*place);
        let ours = after
            .as_ref()
            .is_some_and(|r| r.worker == claimed.tag.to_string());
        let binding_id = binding::id_of_token(&claimed.tag.token);
        let bound_here = binding_id.is_some_and(|id| read.bound_here(*place, id));
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

impl Settled {
    /// What the daemon does of one claim's settlement.
    pub(super) fn effects(self) -> Vec<Effect> {
        match self {
            Settled::Run(claimed) => vec![Effect::Spawn(claimed)],
            Settled::RunInstead {
                mut claimed,
                planned,
            } => {
                // The commit's link formulas name the planned job: this one's result is
                // written as text (its log row is restated with the result).
                claimed.linked = false;
                claimed.panel_linked = false;
                warn!(job.id = ?claimed.row.job_id, target = %Logged(claimed.row.target_key()), worker = %claimed.tag, %planned, "the queue moved during the claim; running the row that was claimed instead");
                vec![Effect::RowsMoved, Effect::Spawn(claimed)]
            }
            Settled::PutBack { row, slot } => {
                warn!(job.id = ?row.job_id, target = %Logged(row.target_key()), "the queue moved during the claim and the claimed row's target is busy; putting it back to waiting");
                vec![
                    Effect::RowsMoved,
                    Effect::PutBack(row),
                    Effect::FreeSlot(slot),
                ]
            }
            Settled::Conflict {
                claimed,
                landed_on,
                unbind,
            } => {
                warn!(
                    job.id = ?claimed.row.job_id,
                    target = %Logged(claimed.row.target_key()),
                    worker = %claimed.tag,
                    "claim conflict: the row was not ours after the commit; not running it"
                );
                let mut effects = vec![Effect::Metric(Metric::ClaimConflict)];
                if let Some(row) = landed_on {
                    effects.push(Effect::RowsMoved);
                    effects.push(Effect::GiveBack {
                        row: *row,
                        tag: claimed.tag.clone(),
                    });
                }
                effects.extend(unbind.map(Effect::Unbind));
                if claimed.log_row {
                    // The commit made the job a log row that nothing will fill: unbound, it
                    // leaves with the archive.
                    let log = binding::id_of_token(&claimed.tag.token).map(joblog::binding_id);
                    effects.extend(log.map(Effect::Unbind));
                }
                effects.push(Effect::FreeSlot(claimed.slot));
                effects
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ledger::tests::Fixture;
    use super::*;
    use crate::queue::State;
    use crate::sheets::{BatchUpdateReply, Reply};

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
            &Fixture::default().read(reply),
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
        let fixture = Fixture::default();
        let settled = settle_claims(
            &fixture.read(&reply),
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
    fn a_conflict_counts_unbinds_its_queue_and_log_rows_and_frees_its_slot() {
        let c = Claimed {
            log_row: true,
            ..claim_of(5, "j1", "A", 2)
        };
        let id = binding::id_of_token(&c.tag.token).expect("a fresh token names its binding");
        let effects = Settled::Conflict {
            claimed: c,
            landed_on: None,
            unbind: Some(id),
        }
        .effects();
        let log = joblog::binding_id(id);
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::Metric(Metric::ClaimConflict),
                    Effect::Unbind(q),
                    Effect::Unbind(l),
                    Effect::FreeSlot(2),
                ] if *q == id && *l == log
            ),
            "a lost claim must leave no binding and no reserved slot behind: {effects:?}"
        );
    }

    #[test]
    fn a_conflict_on_another_jobs_row_gives_its_values_back_and_keeps_that_binding() {
        let c = claim_of(5, "j1", "A", 0);
        let finished = queued(5, "j0", "A", State::Done, &c.tag.to_string());
        let effects = Settled::Conflict {
            claimed: c,
            landed_on: Some(Box::new(finished)),
            unbind: None,
        }
        .effects();
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::Metric(Metric::ClaimConflict),
                    Effect::RowsMoved,
                    Effect::GiveBack { row, .. },
                    Effect::FreeSlot(0),
                ] if row.job_id == "j0"
            ),
            "the row our cells landed on gets them back: {effects:?}"
        );
    }

    #[test]
    fn a_row_run_instead_drops_the_planned_jobs_links_and_a_put_back_frees_its_slot() {
        let claimed = Claimed {
            linked: true,
            panel_linked: true,
            ..claim_of(5, "j2", "B", 1)
        };
        let effects = Settled::RunInstead {
            claimed,
            planned: "j1".into(),
        }
        .effects();
        assert!(
            matches!(
                &effects[..],
                [Effect::RowsMoved, Effect::Spawn(c)] if !c.linked && !c.panel_linked
            ),
            "the links the commit wrote name j1, not the job that runs: {effects:?}"
        );
        let row = queued(5, "j2", "B", State::Running, "");
        let effects = Settled::PutBack { row, slot: 1 }.effects();
        assert!(
            matches!(
                &effects[..],
                [Effect::RowsMoved, Effect::PutBack(r), Effect::FreeSlot(1)] if r.job_id == "j2"
            ),
            "{effects:?}"
        );
    }
}
