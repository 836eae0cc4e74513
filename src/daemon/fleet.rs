//! The other daemons of the spreadsheet and the account: the heartbeat this daemon writes
//! (alone or riding a batch), the jobs others run, the holds on jobs this daemon timed out,
//! and the account's request budget split among the daemons that share it (docs/design.md
//! §3.1, §6).

use chrono::{DateTime, Utc};
use tracing::{info, warn};

use crate::a1;
use crate::lease::WORKER_SHEET;
use crate::queue::{self, QueueRow};
use crate::sheet_text::Logged;
use crate::sheets::{BatchUpdate, Cell, GridRange, Request, ValueRange};
use crate::workers::{self, RunningRef};

use super::poll::Poll;
use super::{Daemon, DaemonError};

/// What this daemon knows of the others: the account it shares, its place among the
/// daemons on it, the jobs it holds for them, and when its own heartbeat last went out.
#[derive(Debug)]
pub(super) struct Fleet {
    /// The service account the calls are made as, in the heartbeat: daemons on one account
    /// split its budget.
    pub(super) account: String,
    /// How many live daemons share our account, as last applied to the budgets.
    pub(super) sharing: u32,
    /// Our place among them (0-based, by worker_id): the phase of our polls.
    pub(super) rank: u32,
    /// Whether the account's budget held the polls back over the last sampled minute
    /// ([`Daemon::watch_budget`]).
    pub(super) budget_bound: bool,
    /// Jobs of other daemons this one timed out, each held (listed in our heartbeat, its
    /// target busy) until it could have ended on its own.
    pub(super) holds: Vec<Hold>,
    /// When our heartbeat last went out (alone or riding a batch).
    pub(super) last_heartbeat: Option<tokio::time::Instant>,
}

impl Fleet {
    /// A daemon calling as `account`, alone on it until a heartbeat shows others.
    pub(super) fn new(account: String) -> Self {
        Fleet {
            account,
            sharing: 1,
            rank: 0,
            budget_bound: false,
            holds: Vec::new(),
            last_heartbeat: None,
        }
    }
}

impl Daemon {
    /// Notices when the account's request budget holds the polls back: its calls (those of
    /// every spreadsheet sharing it) waited a tenth of the last minute or more
    /// ([`Share::watch_budget`]). Then polls come further apart than `poll_interval`,
    /// evenly, instead of meeting 429s; the log says so (once per account, at most every ten
    /// minutes), the status line while it lasts, and `sheetq_throttled_wait_seconds_total`
    /// counts the waits.
    pub(super) fn watch_budget(&mut self) {
        let seen = self
            .share
            .watch_budget(tokio::time::Instant::now(), self.sheets.budget_waited());
        if let Some((waited, over)) = seen.say {
            warn!(
                waited_s = waited.as_secs(),
                over_s = over.as_secs(),
                requests_per_minute = self.config.requests_per_minute,
                sharing = self.served.fleet.sharing,
                "polls are slowed by the account's request budget: what its spreadsheets want is more than its share of Google's quota. Presses wait longer; raise poll_interval, or give some spreadsheets a key of another service account"
            );
        }
        self.served.fleet.budget_bound = seen.bound;
    }

    /// The heartbeat on its own: a `spreadsheets.batchUpdate` whose reply lists every sheet,
    /// so that finding a new or renamed panel costs no read. A daemon without a heartbeat row
    /// yet appends one.
    pub(super) async fn heartbeat_alone(&mut self, poll: &Poll) -> Result<(), DaemonError> {
        let Some(r) = poll.own_heartbeat_row else {
            return self
                .heartbeat_into(poll, &mut Vec::new(), true, &[])
                .await
                .map(drop);
        };
        let beat = self.heartbeat_request(r, self.heartbeat_row(Utc::now(), &[], &[]));
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests: vec![beat],
                sheet_list: true,
                ..Default::default()
            })
            .await?;
        self.served.fleet.last_heartbeat = Some(tokio::time::Instant::now());
        if !reply.sheets.is_empty() {
            self.take_in_sheets(reply.sheets);
        }
        Ok(())
    }

    /// The write of our heartbeat row (sheet row `row` of `_ワーカー`) as a grid request.
    pub(super) fn heartbeat_request(&self, row: u32, cells: Vec<Cell>) -> Request {
        Request::UpdateCells {
            range: GridRange {
                sheet_id: self.served.layout.worker_sheet_id,
                start_row: row - 1,
                end_row: row,
                start_col: 0,
                end_col: workers::HEADER.len() as u32,
            },
            rows: vec![cells],
        }
    }

    /// The jobs that other live daemons list (each keeps its target busy unless settled), the
    /// jobs we hold, and the jobs we run ourselves: the claim rules' view of what runs beyond
    /// this read. Our own keep their targets busy whatever their rows show (another daemon
    /// may have timed one out while we were cut off from the API: it still runs here).
    pub(super) fn running_elsewhere(&self, poll: &Poll) -> Vec<RunningRef> {
        let mut jobs = workers::running_elsewhere(
            &poll.workers,
            &self.config.worker_id,
            self.config.dead_after,
        );
        jobs.extend(self.served.fleet.holds.iter().map(|h| h.job.clone()));
        jobs.extend(
            self.jobs
                .running
                .values()
                .chain(&self.jobs.unsettled)
                .map(|c| RunningRef::of(&c.row).held()),
        );
        jobs
    }

    /// Holds a job of another daemon that this one just timed out: its target stays busy
    /// until the job could have ended on its own (its command's timeout and kill grace, or
    /// `stale_after` for a command we do not know, plus a heartbeat interval), counted from
    /// now, when its daemon had already been silent or its row stale for a while.
    pub(super) fn hold(&mut self, row: &QueueRow, watched: &crate::claim::Watched) {
        let could_run = self
            .registry
            .get(&row.command)
            .map_or(self.config.stale_after, |def| def.timeout + def.kill_grace);
        // A worker that is no sheetq daemon (an Apps Script minute trigger's) wrote its
        // 開始日時 on Google's clock: the time the job has had since counts. A sheetq claim
        // wrote it on its own machine's clock, which decides nothing here.
        let not_sheetq = row.worker_tag().is_none();
        let had = not_sheetq
            .then(|| crate::claim::started_ago(row, watched))
            .flatten()
            .and_then(|ago| ago.to_std().ok())
            .unwrap_or_default();
        let margin = (could_run + self.config.heartbeat_interval).saturating_sub(had);
        if margin.is_zero() {
            return;
        }
        let since = tokio::time::Instant::now();
        self.served
            .fleet
            .holds
            .retain(|h| h.job.job_id != row.job_id);
        self.served.fleet.holds.push(Hold {
            job: RunningRef::of(row).held(),
            daemon: row.worker_tag().map(|t| t.daemon_id).unwrap_or_default(),
            since,
            until: since + margin,
        });
    }

    /// Ends the holds whose time is up, or whose job has ended: its row shows the real
    /// outcome (its daemon came back and wrote 完了 or エラー), or, when that row lies
    /// outside our read, its daemon's heartbeat, changed since, lists it running no more.
    pub(super) fn expire_holds(&mut self, poll: &Poll) {
        let now = tokio::time::Instant::now();
        self.served.fleet.holds.retain(|h| {
            let ended = poll.snapshot.rows_with(&h.job.job_id).any(|r| {
                r.state.is(queue::State::Done) || r.state.is(queue::State::Error)
            }) || workers::ended_on(
                &poll.workers,
                &h.daemon,
                &h.job.job_id,
                h.since.elapsed(),
            );
            if ended || now >= h.until {
                info!(job.id = ?h.job.job_id, target = %Logged(&h.job.target), ended, "the target of a job we timed out is free again");
                return false;
            }
            true
        });
    }

    /// Splits the account's budget (`requests_per_minute`, for reads and for writes each)
    /// evenly among the live daemons on our account, as their heartbeats show them.
    pub(super) fn share_budget(&mut self, poll: &Poll) {
        let (rank, sharing) = workers::place_on_account(
            &poll.workers,
            &self.config.worker_id,
            &self.served.fleet.account,
            self.config.dead_after,
        );
        self.served.fleet.rank = rank;
        // Every daemon on the account that any spreadsheet of this process shows, and every
        // one their heartbeats list.
        let others = workers::live_on_account(
            &poll.workers,
            &self.config.worker_id,
            &self.served.fleet.account,
            self.config.dead_after,
        )
        .map(|h| (h.worker_id.clone(), h.sharers.clone()));
        // Word of a daemon we see gone ourselves is old: it may still go round for a few
        // heartbeats after its death.
        let gone = workers::gone_on_account(
            &poll.workers,
            &self.config.worker_id,
            &self.served.fleet.account,
            self.config.dead_after,
            workers::hearsay_lasts(self.config.dead_after, self.config.heartbeat_interval),
        )
        .map(str::to_string);
        let sharing = self
            .share
            .report(&self.config.worker_id, others, gone)
            .max(sharing);
        if sharing == self.served.fleet.sharing {
            return;
        }
        let share = (self.config.requests_per_minute / sharing).max(1);
        info!(
            account = %self.served.fleet.account,
            daemons = sharing,
            reads_per_minute = share,
            writes_per_minute = share,
            "the account's request budget is now shared by {sharing} live daemon(s)"
        );
        self.sheets.set_budget_share(share, share);
        self.served.fleet.sharing = sharing;
    }

    pub(super) fn heartbeat_due(&self) -> bool {
        self.served
            .fleet
            .last_heartbeat
            .is_none_or(|t| t.elapsed() >= self.config.heartbeat_interval)
    }

    /// Our heartbeat row: the jobs we run or whose results we still have to write (plus
    /// `claiming`, the claims of a commit that carries it, less `writing`, the results that
    /// go in the same call) are listed for the other daemons' claim rules.
    pub(super) fn heartbeat_row(
        &self,
        now: DateTime<Utc>,
        claiming: &[RunningRef],
        writing: &[&str],
    ) -> Vec<Cell> {
        // A job whose result still waits in the outbox is listed too: its row is still
        // 実行中, and other daemons must neither start its target nor take its row for free.
        // One whose result goes in this very call, or landed within the last minute (which
        // we watch), is listed as done: should that write land on another row, or a restore
        // from an older read show the job as 待機 again, no other daemon may run it a second
        // time; its target is free.
        let mut jobs: Vec<RunningRef> = self
            .jobs
            .running
            .values()
            .chain(&self.jobs.unsettled)
            .map(|c| RunningRef::of(&c.row))
            .chain(self.outbox.pending().map(|j| {
                let r = RunningRef::of(&j.as_row());
                if writing.contains(&j.job_id.as_str()) {
                    r.finished()
                } else {
                    r
                }
            }))
            .chain(self.served.fleet.holds.iter().map(|h| h.job.clone()))
            .chain(
                // The newest ones only: the cell holds at most 50,000 characters, and an
                // entry takes some 60 to 200.
                self.served
                    .writes
                    .landed
                    .iter()
                    .rev()
                    .filter(|(j, _)| !self.outbox.contains(&j.job_id))
                    .take(LANDED_LISTED)
                    .map(|(j, _)| RunningRef::of(&j.as_row()).finished()),
            )
            .collect();
        jobs.extend(claiming.iter().cloned());
        workers::row_cells(
            &self.config.worker_id,
            &crate::config::host_name(),
            self.config.slots,
            &jobs,
            now,
            &self.process,
            &self.served.fleet.account,
            &self.share.sharers(&self.config.worker_id),
        )
    }

    /// Adds our heartbeat row to `data` when due (or `force`d); a daemon without a row yet
    /// appends one. Returns whether a heartbeat was written or added.
    pub(super) async fn heartbeat_into(
        &mut self,
        poll: &Poll,
        data: &mut Vec<ValueRange>,
        force: bool,
        writing: &[&str],
    ) -> Result<bool, DaemonError> {
        if !force && !self.heartbeat_due() {
            return Ok(false);
        }
        let row = self.heartbeat_row(Utc::now(), &[], writing);
        let last = workers::LAST_COLUMN;
        match poll.own_heartbeat_row {
            Some(r) => data.push(ValueRange::new(
                a1::range(WORKER_SHEET, &format!("A{r}:{last}{r}")),
                vec![row],
            )),
            None => {
                self.sheets
                    .append(
                        &a1::range(WORKER_SHEET, &format!("A{}:{last}", workers::FIRST_ROW)),
                        &[row],
                    )
                    .await?;
            }
        }
        self.served.fleet.last_heartbeat = Some(tokio::time::Instant::now());
        Ok(true)
    }
}

/// A job of another daemon that this one timed out, held until it could have ended.
#[derive(Debug)]
pub(super) struct Hold {
    job: RunningRef,
    /// The daemon that ran it (its ワーカー tag's id; empty for a claim without a tag).
    daemon: String,
    since: tokio::time::Instant,
    until: tokio::time::Instant,
}

/// How many of the results that landed in the last minute a heartbeat lists as done.
pub(super) const LANDED_LISTED: usize = 100;

/// Whether a process with this pid exists on this host (for telling our own dead
/// predecessor from a live second process with the same worker_id).
pub(super) fn pid_alive(pid: u32) -> bool {
    crate::sheets::ledger::pid_alive(pid)
}
