//! The rollout room of the daemon (`[[rollouts]]`, docs/design.md §5.8): each claim pass,
//! under the lease and on its fresh read, follows every open rollout row by
//! `crate::rollout::plan` and rides the commit it sends anyway: the next wave's rows
//! appended (each with the jobId derived from the rollout and its target, so that no daemon,
//! however many race or restart, queues a target twice), the 中止要求 of the jobs a stop
//! reaches, the rollout row's progress, and its start (待機 → 実行中) and end (完了, エラー,
//! キャンセル) as swaps read back like a cancel's. Nothing of a rollout lives in a daemon's
//! memory: a pass decides from the rows alone.

use chrono::{DateTime, Utc};
use tracing::{debug, info, warn};

use crate::binding;
use crate::commands::JobSpec;
use crate::outbox::Finish;
use crate::panel::NewJob;
use crate::queue::{Column, QueueRow, State, ROLLOUT_FLAG};
use crate::rollout::{self, Limits, Step};
use crate::sheet_text::Logged;
use crate::sheets::{Cell, Request, ValueRange};

use super::effects::Effect;
use super::ledger::{cas, Landing, Ledger, Place, ReadBack};
use super::poll::Poll;
use super::through::Through;
use super::{Daemon, DaemonError};

/// The most jobs of a rollout one commit appends (each, of a function with approvers, with
/// a mark in the spreadsheet's developer metadata, whose room is shared): a wider wave goes
/// on in the next pass.
const MAX_WAVE: usize = 50;

/// How a claim commit turns a rollout's own row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Turn {
    /// 待機 → 実行中, its first wave queued in the same commit; `progress` follows as its
    /// メッセージ through the binding.
    Start { progress: String },
    /// To its end, with the メッセージ `成功 18 · 失敗 1 · 中止 1 (失敗: web-3)`.
    End { finish: Finish, message: String },
}

impl Turn {
    /// The 状態 the swap leaves the row in.
    fn state(&self) -> State {
        match self {
            Turn::Start { .. } => State::Running,
            Turn::End { finish, .. } => finish.state(),
        }
    }
}

/// What this pass does for the rollouts: requests riding the commit (appends, 中止要求,
/// progress), and the rollout rows to turn (indices into the fresh read).
#[derive(Debug, Default)]
pub(super) struct RolloutWork {
    pub(super) requests: Vec<Request>,
    pub(super) turns: Vec<(usize, Turn)>,
    /// The jobs appended of a function with approvers: approved with their rollout, each is
    /// a step sheetq's mark vouches for (`provenance`), created in the same commit.
    pub(super) vouched: Vec<NewJob>,
}

/// A rollout row the commit turns: its swap's place and the binding its cells follow.
pub(super) struct Turning {
    row: QueueRow,
    turn: Turn,
    binding_id: i32,
    place: Place,
}

/// A rollout row's step as the claim work sees it before taking the lease.
fn needs_commit(row: &QueueRow, progress: &rollout::Progress, step: &Step) -> bool {
    match step {
        Step::Wait => {
            // As `progress_write` has it: an empty cell waits for the start's write.
            let shown = row.message.trim();
            row.state.is(State::Running) && !shown.is_empty() && shown != progress.running_text()
        }
        _ => true,
    }
}

impl Daemon {
    /// The open rollout rows of `snapshot` (待機, 実行中, on the 一括 target, `ready`) that
    /// the passes follow now: indices. A rollout whose jobId stands on more than one row (a
    /// person copied it) is left alone, as such a job is never claimed; of two open
    /// rollouts of one label, the older goes first and the other waits for its end (both
    /// would take down the same targets at once).
    fn open_rollouts(
        snapshot: &crate::queue::Snapshot,
        ready: impl Fn(&QueueRow) -> bool,
    ) -> Vec<usize> {
        let mut rows_per_job: std::collections::HashMap<&str, usize> = Default::default();
        for r in &snapshot.rows {
            *rows_per_job.entry(r.job_id.as_str()).or_default() += 1;
        }
        let mut open: Vec<usize> = (0..snapshot.rows.len())
            .filter(|i| {
                let r = &snapshot.rows[*i];
                r.is_rollout()
                    && r.target_key() == crate::queue::ROLLOUT_TARGET
                    && (r.state.is(State::Waiting) || r.state.is(State::Running))
                    && rows_per_job.get(r.job_id.as_str()) == Some(&1)
                    && ready(r)
            })
            .collect();
        open.sort_by_key(|i| {
            let r = &snapshot.rows[*i];
            let started = r.state.is(State::Running);
            (!started, r.received_at.is_none(), r.received_at, r.row)
        });
        let mut labels = std::collections::HashSet::new();
        open.retain(|i| labels.insert(crate::sheet_text::trim(&snapshot.rows[*i].function)));
        open.sort_unstable();
        open
    }

    /// The jobIds of the jobs of every open rollout of `snapshot`, for every target it
    /// names: rows the archive leaves in the queue while their rollout counts them.
    pub(super) fn open_rollout_jobs(
        &self,
        snapshot: &crate::queue::Snapshot,
    ) -> std::collections::HashSet<String> {
        let catalog = self.registry.catalog();
        snapshot
            .rows
            .iter()
            .filter(|r| r.is_rollout() && !r.state.is_final())
            .filter_map(|r| Some((r, self.rollout_of(r).ok()?)))
            .flat_map(|(r, def)| {
                def.targets_in(catalog)
                    .into_iter()
                    .map(|t| rollout::child_job_id(&r.job_id, &t))
            })
            .collect()
    }

    /// Whether `poll` shows a rollout with something to do: a wave to queue, jobs to stop,
    /// an end, or progress its row does not show yet. Pure: no request.
    pub(super) fn rollouts_due(&self, poll: &Poll) -> bool {
        let ready = |r: &QueueRow| self.ready(r);
        Self::open_rollouts(&poll.snapshot, ready)
            .into_iter()
            .any(|i| {
                let row = &poll.snapshot.rows[i];
                match self.follow(row, &poll.snapshot) {
                    // A wave it may not queue is no work until its last job ended: it then ends.
                    Ok((progress, Step::Queue(targets)))
                        if self.rollout_of(row).is_ok_and(|def| {
                            self.wave(row, def, &targets, Utc::now()).is_err()
                        }) =>
                    {
                        progress.running + progress.waiting == 0
                    }
                    Ok((progress, step)) => needs_commit(row, &progress, &step),
                    // A rollout this daemon's config does not have is another daemon's to
                    // follow (a config being rolled out); asked to stop, it ends here.
                    Err(_) => crate::cancel::asked(row),
                }
            })
    }

    /// The plan of rollout row `row` on `snapshot`: its progress and step; `Err`: why it
    /// cannot run at all (its definition is gone, or the job it would queue is refused).
    fn follow(
        &self,
        row: &QueueRow,
        snapshot: &crate::queue::Snapshot,
    ) -> Result<(rollout::Progress, Step), String> {
        let def = self.rollout_of(row)?;
        let catalog = self.registry.catalog();
        let targets = def.targets_in(catalog);
        let limits = Limits {
            max_parallel: def.max_parallel,
            max_failures: def.max_failures,
        };
        let stopped = crate::cancel::asked(row);
        Ok(rollout::plan(
            &row.job_id,
            &targets,
            limits,
            stopped,
            snapshot,
        ))
    }

    /// Whether the passes follow rollout row `row` now: not while it waits for its
    /// approvals (unless someone asked to stop it: it then ends), nor while its jobs would
    /// go with sheetq's mark on a queue others may write (held, as a job of a function
    /// with approvers is, until the queue is protected again).
    fn ready(&self, row: &QueueRow) -> bool {
        if crate::cancel::asked(row) {
            return true;
        }
        if self.awaits_approval(row) {
            return false;
        }
        let held = self
            .rollout_of(row)
            .is_ok_and(|def| self.jobs_vouched(def) && !self.registry.queue_protected());
        !held
    }

    /// The jobs of rollout row `row` on `targets`, each checked; `Err`: why it may not queue
    /// them now: its function or targets are no longer what was pressed (and approved), it
    /// is not approved, or the daemon would refuse a job of it (its function, `allow`, the
    /// args and inputs of the press, checked for each target as the job will be; its
    /// approval is its row's).
    fn wave(
        &self,
        row: &QueueRow,
        def: &rollout::RolloutDef,
        targets: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<NewJob>, String> {
        let all = def.targets_in(self.registry.catalog());
        let flag = rollout::scope_flag(&def.function, &all);
        if !row.has_flag(&flag) {
            return Err(format!(
                "一括処理「{}」の機能か対象が押されたときと変わったため、これ以上実行しません (the function or targets of rollout {:?} changed in sheetq.toml since it was pressed; run `sheetq panels sync` and press it again)",
                def.label(),
                def.name
            ));
        }
        let rule = self.registry.catalog().approval_rule(&row.function);
        if !crate::approval::cleared(row, rule.as_ref()) {
            return Err(format!(
                "一括処理「{}」は承認されていないため実行しません (rollout {:?} runs only once approved, and its row holds no approval)",
                def.label(),
                def.name
            ));
        }
        let mut jobs = Vec::with_capacity(targets.len());
        for target in targets {
            let Some(job) = self.child_job(row, def, target, now) else {
                return Err(format!(
                    "rollout {:?} runs function {:?}, which is not among the [[functions]] of sheetq.toml",
                    def.name, def.function
                ));
            };
            if let Some(why) = self.refusal_of(&job) {
                return Err(why);
            }
            jobs.push(job);
        }
        Ok(jobs)
    }

    /// Whether rollout row `row` waits for its approvals: its function has approvers, and
    /// its 承認 cell does not hold enough yet (the approval room turns it 承認待ち, and back
    /// to 待機 once approved).
    fn awaits_approval(&self, row: &QueueRow) -> bool {
        let rule = self.registry.catalog().approval_rule(&row.function);
        row.state.is(State::Waiting) && !crate::approval::cleared(row, rule.as_ref())
    }

    /// Whether the jobs of rollout `def` are of a function with approvers: approved with
    /// their rollout, each goes with sheetq's mark.
    fn jobs_vouched(&self, def: &rollout::RolloutDef) -> bool {
        self.registry
            .catalog()
            .approval_rule(&def.function)
            .is_some()
    }

    /// The targets of rollout row `row` (`None` for any other row, or a rollout the config
    /// no longer has).
    pub(super) fn rollout_targets(&self, row: &QueueRow) -> Option<Vec<String>> {
        if !row.is_rollout() {
            return None;
        }
        let def = self.rollout_of(row).ok()?;
        Some(def.targets_in(self.registry.catalog()))
    }

    /// The `[[rollouts]]` entry a rollout row names by its 機能 (the rollout's label).
    fn rollout_of(&self, row: &QueueRow) -> Result<&rollout::RolloutDef, String> {
        let label = crate::sheet_text::trim(&row.function);
        self.config
            .rollouts
            .iter()
            .find(|r| r.label() == label)
            .ok_or_else(|| {
                format!(
                    "rollout {} is not among the [[rollouts]] of sheetq.toml: no job of it is queued any more",
                    crate::sheet_text::shown(label)
                )
            })
    }

    /// The job of rollout row `row` on `target`, as it is appended: the function's command,
    /// the rollout row's args (the function's, with the inputs of the press), the rollout's
    /// requester, landing on the target's own panel row.
    fn child_job(
        &self,
        row: &QueueRow,
        def: &rollout::RolloutDef,
        target: &str,
        now: DateTime<Utc>,
    ) -> Option<NewJob> {
        let catalog = self.registry.catalog();
        let f = catalog.function(&def.function)?;
        let mut flags = f.flags.clone();
        if !def.notify_each {
            flags.push(ROLLOUT_FLAG.to_string());
        }
        if self.jobs_vouched(def) {
            flags.push(crate::queue::CONTINUATION_FLAG.to_string());
        }
        Some(NewJob {
            inputs: catalog.inputs_text(&f.label, &row.args_json),
            job_id: rollout::child_job_id(&row.job_id, target),
            received_at: now,
            requester: row.requester.clone(),
            panel_sheet: target.to_string(),
            panel_row: None,
            target: target.to_string(),
            function: f.label.clone(),
            command: f.command.clone(),
            args_json: row.args_json.clone(),
            flags: flags.join(","),
        })
    }

    /// Why the daemon would refuse `job`, a rollout's job, if it would: checked as a press of
    /// it is (its args untrusted), its approval being its rollout's.
    fn refusal_of(&self, job: &NewJob) -> Option<String> {
        let spec = JobSpec {
            job_id: job.job_id.clone(),
            target: job.target.clone(),
            function: job.function.clone(),
            requester: job.requester.clone(),
            command: job.command.clone(),
            args_json: job.args_json.clone(),
            flags: Vec::new(),
            panel_sheet: job.panel_sheet.clone(),
            panel_row: None,
            approvals: String::new(),
            continuation: false,
            approved_with_rollout: true,
        };
        self.registry
            .prepare_with(&spec, Some(&self.served.listed))
            .err()
            .map(|r| r.message)
    }

    /// Under the lease, on its fresh read: each open rollout's step, as the commit's
    /// requests and turns. A rollout whose wave or end is decided on a read that did not
    /// cover the whole queue reads it whole first (one read), so that a job of it a sort
    /// put above the window is never taken for one not queued. The 中止要求 of the jobs a
    /// stop reaches go on `fresh`'s rows too, so that this very commit cancels the waiting
    /// ones and this daemon stops the ones it runs.
    pub(super) async fn take_in_rollouts(
        &mut self,
        fresh: &mut Poll,
        now: DateTime<Utc>,
    ) -> Result<RolloutWork, DaemonError> {
        let mut work = RolloutWork::default();
        let open = Self::open_rollouts(&fresh.snapshot, |r| self.ready(r));
        if open.is_empty() {
            return Ok(work);
        }
        let mut whole: Option<crate::queue::Snapshot> = None;
        let mut ids: Option<std::collections::HashSet<String>> = None;
        for index in open {
            let row = fresh.snapshot.rows[index].clone();
            let def = match self.rollout_of(&row) {
                Ok(def) => def.clone(),
                // Not in this daemon's config: left to a daemon whose config has it (its
                // jobs run on as any job), unless someone asks to stop it. `sheetq check`
                // and `status` name it.
                Err(why) if crate::cancel::asked(&row) => {
                    work.turns.push((index, end(Finish::Cancelled, why)));
                    continue;
                }
                Err(_) => continue,
            };
            let Ok((mut progress, mut step)) = self.follow(&row, &fresh.snapshot) else {
                continue;
            };
            if !fresh.full && whole.is_none() {
                // The read covered the unfinished window: a job of this rollout that a sort
                // moved above it (or whose row was deleted) must never pass for one not
                // queued. Waves go in the targets' order, so a job missing before a later
                // one's is elsewhere; and before a wave or the end, the jobId column (one
                // read) says whether those taken for unqueued are.
                let targets = def.targets_in(self.registry.catalog());
                let mut elsewhere = rollout::has_gap(&row.job_id, &targets, &fresh.snapshot);
                if !elsewhere && matches!(step, Step::Queue(_) | Step::End { .. }) {
                    if ids.is_none() {
                        match self.queue_job_ids().await {
                            Ok(read) => ids = Some(read),
                            Err(e) => {
                                warn!(error = %e, job.id = ?row.job_id, "could not read the queue's jobIds for a rollout's step; the next pass tries again");
                                continue;
                            }
                        }
                    }
                    elsewhere = ids.as_ref().is_some_and(|ids| {
                        (progress.unqueued.iter())
                            .any(|t| ids.contains(&rollout::child_job_id(&row.job_id, t)))
                    });
                }
                if elsewhere {
                    match self.whole_queue().await {
                        Ok(all) => {
                            info!(job.id = ?row.job_id, "a rollout's jobs are not all in the unfinished window (rows were moved): deciding on the whole queue, and reading it whole for a while");
                            self.rows_moved();
                            whole = Some(all);
                        }
                        Err(e) => {
                            warn!(error = %e, job.id = ?row.job_id, "could not read the whole queue for a rollout's step; the next pass tries again");
                            continue;
                        }
                    }
                }
            }
            if let Some(Ok(planned)) = whole.as_ref().map(|all| self.follow(&row, all)) {
                (progress, step) = planned;
            }
            let running = row.state.is(State::Running);
            match step {
                Step::Queue(mut targets) => {
                    // At most so many rows (and marks) a commit: the rest in the next.
                    targets.truncate(MAX_WAVE);
                    let jobs = match self.wave(&row, &def, &targets, now) {
                        Ok(jobs) => jobs,
                        Err(why) => {
                            let active = progress.running + progress.waiting;
                            warn!(job.id = ?row.job_id, rollout = %def.name, reason = %Logged(&why), jobs_left = active, "a rollout queues no more jobs");
                            if active == 0 {
                                let message = if progress.unqueued.len() == progress.total {
                                    why
                                } else {
                                    format!("{} · {why}", progress.end_text())
                                };
                                work.turns.push((index, end(Finish::Error, message)));
                            }
                            continue;
                        }
                    };
                    let rows: Vec<Vec<Cell>> = jobs
                        .iter()
                        .map(|j| {
                            j.to_row(
                                &self.served.layout.columns,
                                &self.config.states,
                                self.served.layout.tz,
                            )
                        })
                        .collect();
                    if self.jobs_vouched(&def) {
                        work.vouched.extend(jobs);
                    }
                    if rows.is_empty() {
                        continue;
                    }
                    info!(job.id = ?row.job_id, rollout = %def.name, targets = ?targets, "queueing a rollout's next wave");
                    work.requests.push(Request::AppendRows {
                        sheet_id: self.queue_sheet_id(),
                        rows,
                    });
                    if running {
                        work.requests.extend(self.progress_write(&row, &progress));
                    } else {
                        let progress = progress.running_text();
                        work.turns.push((index, Turn::Start { progress }));
                    }
                    work.requests
                        .extend(self.panel_progress(fresh, &row, &progress));
                }
                Step::Stop { cancel, who } => {
                    info!(job.id = ?row.job_id, rollout = %def.name, jobs = cancel.len(), by = %who, "stopping a rollout's jobs");
                    work.requests
                        .extend(self.ask_to_stop(fresh, &cancel, &who, now));
                    if running {
                        work.requests.extend(self.progress_write(&row, &progress));
                    }
                }
                Step::Wait => {
                    if running {
                        work.requests.extend(self.progress_write(&row, &progress));
                        work.requests
                            .extend(self.panel_progress(fresh, &row, &progress));
                    }
                }
                Step::End { state, message } => {
                    let finish = match state {
                        State::Done => Finish::Done,
                        State::Cancelled => Finish::Cancelled,
                        _ => Finish::Error,
                    };
                    work.turns.push((index, end(finish, message)));
                }
            }
        }
        Ok(work)
    }

    /// Every row of the queue (one read): what a rollout's wave and end are decided on when
    /// the poll read only the unfinished window.
    async fn whole_queue(&self) -> Result<crate::queue::Snapshot, DaemonError> {
        let l = &self.served.layout.last_col;
        let range = crate::a1::range(crate::queue::QUEUE_SHEET, &format!("A2:{l}"));
        let read = self.sheets.read(&[range]).await?;
        let values = read.first().map(|v| v.values.as_slice()).unwrap_or(&[]);
        debug!(
            rows = values.len(),
            "read the whole queue for a rollout's step"
        );
        Ok(crate::queue::Snapshot {
            rows: self.parse_rows(values, 2),
            ..Default::default()
        })
    }

    /// The 中止要求 of each job `ids` names, in the name of `who` (so that it ends
    /// キャンセル with 「中止: <who>」): on `fresh`'s rows, and written into the rows (by the
    /// row numbers of `fresh`, read under the lease; the text names its job, so a sort that
    /// put another row there meanwhile stops nothing on it).
    fn ask_to_stop(
        &self,
        fresh: &mut Poll,
        ids: &[String],
        who: &str,
        now: DateTime<Utc>,
    ) -> Vec<Request> {
        let tz = self.served.layout.tz;
        let columns = &self.served.layout.columns;
        let mut writes = Vec::new();
        for row in (fresh.snapshot.rows.iter_mut()).filter(|r| ids.contains(&r.job_id)) {
            let text = crate::cancel::Request::new(who, now, &row.job_id).cell_text(tz);
            row.cancel_request = text.clone();
            match columns.position(Column::CancelRequest) {
                Some(_) => writes.extend(self.grid_write(&ValueRange::new(
                    columns.cell(Column::CancelRequest, row.row),
                    vec![vec![Cell::from(text.as_str())]],
                ))),
                None => warn!(
                    job.id = ?row.job_id,
                    "a rollout asks to stop its jobs, but the queue has no {} column to tell them by; run `sheetq init` to add it",
                    self.config.headers.cancel_request
                ),
            }
        }
        writes
    }

    /// The rollout row's progress in its メッセージ, when it shows another: a swap of the
    /// whole cell from the text it shows (so that a sort that put another row there leaves
    /// it alone). An empty cell is left (the start's write through the binding fills it).
    fn progress_write(&self, row: &QueueRow, progress: &rollout::Progress) -> Option<Request> {
        let shown = row.message.trim();
        let text = progress.running_text();
        if shown.is_empty() || shown == text {
            return None;
        }
        Some(cas(
            self.queue_sheet_id(),
            row.row,
            self.served.layout.columns.index(Column::Message),
            &row.message,
            &text,
        ))
    }

    /// The rollout's row on the 一括 panel, when it shows other than `progress`: `▶ 実行中
    /// 7/20 · 失敗 0`, as the display of later passes shows it from the queue row.
    fn panel_progress(
        &self,
        fresh: &Poll,
        row: &QueueRow,
        progress: &rollout::Progress,
    ) -> Option<Request> {
        let text = format!("▶ {}", progress.running_text());
        let shown =
            crate::panel::status::shown_status(row, &self.served.panels.index, &fresh.tables);
        if shown.as_deref() == Some(text.as_str()) {
            return None;
        }
        let cell = crate::panel::status::status_cell(
            row,
            text,
            &self.served.panels.index,
            &fresh.tables,
            &self.config.panel,
        )?;
        self.grid_write(&cell)
    }

    /// The commit's entries of the rollout rows `turns` turns (indices into the fresh
    /// read): the swap of 状態, and a binding on the same row for the cells that follow.
    pub(super) fn rollout_entries(
        &self,
        ledger: &mut Ledger,
        fresh: &Poll,
        turns: &[(usize, Turn)],
    ) -> Vec<Turning> {
        let (qid, cols) = (self.queue_sheet_id(), &self.served.layout.columns);
        let mut out = Vec::new();
        for (index, turn) in turns {
            let row = &fresh.snapshot.rows[*index];
            let Some(from) = row.state.known() else {
                continue;
            };
            let (token, binding_id) = binding::new_token();
            let mut then = vec![Request::BindRow {
                sheet_id: qid,
                row: row.row - 1,
                id: binding_id,
                key: binding::KEY.to_string(),
                value: format!("{} rollout #{token}", self.config.worker_id),
            }];
            // The end's counts go in this very batch, over the progress the row shows (a
            // swap of the whole cell): they never wait in memory for a later write that a
            // restart would lose. The binding's write follows, for a cell that showed
            // nothing yet.
            if let Turn::End { message, .. } = turn {
                if !row.message.trim().is_empty() && row.message != *message {
                    then.push(cas(
                        qid,
                        row.row,
                        cols.index(Column::Message),
                        &row.message,
                        message,
                    ));
                }
            }
            let place = ledger.row(
                cas(
                    qid,
                    row.row,
                    cols.index(Column::State),
                    self.config.states.word(from),
                    self.config.states.word(turn.state()),
                ),
                then,
                self.row_range(row.row),
            );
            out.push(Turning {
                row: row.clone(),
                turn: turn.clone(),
                binding_id,
                place,
            });
        }
        out
    }
}

/// The end of a rollout with `finish` and `message`.
fn end(finish: Finish, message: String) -> Turn {
    Turn::End { finish, message }
}

/// What the reply decides of the rollout rows a commit turned: a start that hit its row
/// writes its progress through the binding; an end that did ends the rollout as a job that
/// never ran ends (終了日時, メッセージ, its panel row, one notice); a swap a sort moved onto
/// another row is undone; a row no longer as planned is left to the next pass.
pub(super) fn settle(turns: Vec<Turning>, read: &ReadBack) -> Vec<Effect> {
    let mut effects = Vec::new();
    for Turning {
        row,
        turn,
        binding_id,
        place,
    } in turns
    {
        match read.landing(place, &row) {
            Landing::Landed => match turn {
                Turn::Start { progress } => {
                    info!(job.id = ?row.job_id, rollout = %Logged(&row.function), "a rollout started");
                    effects.push(Effect::Follow(Through {
                        id: binding_id,
                        job_id: row.job_id.clone(),
                        worker: row.worker.clone(),
                        state: Some(State::Running),
                        cells: vec![(Column::Message, Cell::from(progress))],
                        unbind: true,
                        result: false,
                    }));
                }
                Turn::End { finish, message } => {
                    info!(job.id = ?row.job_id, rollout = %Logged(&row.function), state = ?finish, message = %Logged(&message), "a rollout ended");
                    effects.push(Effect::EndUnrun {
                        row,
                        binding: binding_id,
                        finish,
                        message,
                    });
                }
            },
            Landing::Moved { at, hit } => {
                warn!(job.id = ?hit, planned = ?row.job_id, "the queue moved during a rollout's turn; putting the row that was hit back");
                effects.push(Effect::RowsMoved);
                if let Some(from) = row.state.known() {
                    effects.push(Effect::Undo {
                        row: at,
                        from: turn.state(),
                        to: from,
                    });
                }
                effects.push(Effect::Unbind(binding_id));
            }
            Landing::Missed => {
                debug!(job.id = ?row.job_id, "the rollout row was no longer as read at the commit; the next pass looks again");
                effects.push(Effect::Unbind(binding_id));
            }
        }
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::super::ledger::tests::{reply_of, Entry, Fixture};
    use super::*;
    use crate::queue::RowState;

    fn turning(f: &mut Fixture, row: u32, job: &str, from: State, turn: Turn) -> Turning {
        Turning {
            row: f.row(row, job, from),
            turn,
            binding_id: 40 + row as i32,
            place: f.place(row),
        }
    }

    #[test]
    fn a_start_that_hit_its_row_writes_the_progress_through_its_binding_and_an_end_ends_it() {
        let mut f = Fixture::default();
        let progress = "実行中 0/6 · 失敗 0".to_string();
        let turns = vec![
            turning(
                &mut f,
                4,
                "r1",
                State::Waiting,
                Turn::Start {
                    progress: progress.clone(),
                },
            ),
            turning(
                &mut f,
                5,
                "r2",
                State::Running,
                end(
                    Finish::Error,
                    "成功 5 · 失敗 1 · 中止 0 (失敗: web-3)".into(),
                ),
            ),
        ];
        let reply = reply_of(
            &f,
            &[
                Entry::swapped(4, "r1", State::Running),
                Entry::swapped(5, "r2", State::Error),
            ],
        );
        let effects = settle(turns, &f.read(&reply));
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::Follow(Through { id: 44, cells, state: Some(State::Running), .. }),
                    Effect::EndUnrun { row, binding: 45, finish: Finish::Error, message },
                ] if cells == &vec![(Column::Message, Cell::from(progress.as_str()))]
                    && row.job_id == "r2"
                    && message.ends_with("(失敗: web-3)")
            ),
            "{effects:?}"
        );
    }

    #[test]
    fn a_turn_a_sort_moved_is_undone_and_one_that_missed_only_drops_its_binding() {
        let mut f = Fixture::default();
        let turns = vec![
            turning(
                &mut f,
                4,
                "r1",
                State::Waiting,
                Turn::Start {
                    progress: "実行中 0/2 · 失敗 0".into(),
                },
            ),
            turning(
                &mut f,
                5,
                "r2",
                State::Running,
                end(Finish::Done, "成功 2 · 失敗 0 · 中止 0".into()),
            ),
        ];
        let reply = reply_of(
            &f,
            &[
                Entry::swapped(4, "other", State::Running),
                Entry::unchanged(5, "r2", State::Done),
            ],
        );
        let effects = settle(turns, &f.read(&reply));
        assert!(
            matches!(
                &effects[..],
                [
                    Effect::RowsMoved,
                    Effect::Undo {
                        row: 4,
                        from: State::Running,
                        to: State::Waiting
                    },
                    Effect::Unbind(44),
                    Effect::Unbind(45),
                ]
            ),
            "the row hit goes back to waiting; the rollout another pass ended is left: {effects:?}"
        );
    }

    fn rollout_row(row: u32, job: &str, label: &str, state: State) -> QueueRow {
        QueueRow {
            job_id: job.into(),
            function: label.into(),
            command: crate::queue::ROLLOUT_COMMAND.into(),
            target: crate::queue::ROLLOUT_TARGET.into(),
            state: RowState::Known(state),
            ..QueueRow::blank(row)
        }
    }

    #[test]
    fn a_copied_rollout_row_is_left_alone_and_a_second_of_one_label_waits_for_the_first() {
        let snapshot = crate::queue::Snapshot {
            rows: vec![
                rollout_row(2, "done", "web", State::Done),
                rollout_row(3, "later", "web", State::Waiting),
                rollout_row(4, "first", "web", State::Running),
                rollout_row(5, "copied", "db", State::Waiting),
                rollout_row(6, "copied", "db", State::Waiting),
                rollout_row(7, "other", "cache", State::Waiting),
            ],
            ..Default::default()
        };
        let followed: Vec<&str> = Daemon::open_rollouts(&snapshot, |_| true)
            .into_iter()
            .map(|i| snapshot.rows[i].job_id.as_str())
            .collect();
        assert_eq!(
            followed,
            ["first", "other"],
            "the running web rollout goes on, the later one waits; a jobId on two rows is never followed"
        );
    }

    #[test]
    fn a_commit_is_needed_for_a_step_or_for_progress_the_row_does_not_show() {
        let p = rollout::Progress {
            total: 4,
            done: 1,
            running: 1,
            ..Default::default()
        };
        let mut row = QueueRow {
            state: RowState::Known(State::Running),
            message: "実行中 1/4 · 失敗 0".into(),
            ..QueueRow::blank(3)
        };
        assert!(
            !needs_commit(&row, &p, &Step::Wait),
            "nothing new: no lease taken"
        );
        assert!(needs_commit(&row, &p, &Step::Queue(vec!["web-3".into()])));
        row.message = "実行中 0/4 · 失敗 0".into();
        assert!(
            needs_commit(&row, &p, &Step::Wait),
            "a job ended: its count changed"
        );
        row.message.clear();
        assert!(
            !needs_commit(&row, &p, &Step::Wait),
            "an empty cell waits for the start's write through the binding, never a commit each poll"
        );
    }
}
