//! The heartbeat rows of `_ワーカー` (docs/design.md §1.4): one row per daemon from row 3 down,
//! their columns, parsing, and the three things they are trusted for beyond liveness:
//! - the jobs each daemon is running, so a claim sees every running job whichever queue row a
//!   person sorted it to (people do not sort the hidden `_ワーカー`); a claim commit writes
//!   the claiming daemon's list in the same atomic batch as its claims;
//! - which process a `worker_id` belongs to, so a second live daemon started with the same
//!   id is refused instead of failing the first one's jobs as "restarted";
//! - the daemons of its account each one knows of ([`Sharer`]), so daemons whose
//!   spreadsheets overlap only through others' still split the account's budget among all.
//!
//! Pure: no I/O, every rule tested with plain values.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::queue::{self, QueueRow};
use crate::sheet_time;
use crate::sheets::Cell;

/// Header of the heartbeat rows (row 2); the columns the daemon writes, A to J.
pub const HEADER: [&str; 10] = [
    "worker",
    "host",
    "version",
    "slots",
    "running",
    "last seen",
    "process",
    "running jobs",
    "account",
    "sharers",
];

/// Letter of the last heartbeat column.
pub const LAST_COLUMN: &str = "J";

/// The column right of the heartbeat (K, zero-based 10) where `sheetq cancel` asks a daemon
/// to stop a job whose queue row is gone (docs/design.md §2.1): one request per line, as
/// 中止要求 words them (`<who> yyyy/MM/dd HH:mm:ss #<jobId>`). The daemon never writes it,
/// its heartbeat covers A–J only, and the column is no part of the row's fingerprint, so a
/// request never passes for a sign of life. Read only where the sheet is that wide
/// (`sheetq cancel` widens it when it first needs it).
pub const STOP_COLUMN: u32 = 10;

/// How many requests the stop column of one row keeps (the newest).
pub const STOPS_KEPT: usize = 10;

/// How far word of a daemon on one's account travels from heartbeat to heartbeat: a daemon
/// heard of through more than this many others is not counted (docs/design.md §6), so a
/// chain of up to `MAX_HOPS + 1` processes, each overlapping the next, counts itself whole.
/// It bounds how long word of a daemon that died can go round a loop of daemons that keep
/// telling each other of it.
pub const MAX_HOPS: u32 = 8;

/// A daemon on the lister's account that it knows of, listed in its heartbeat so that
/// daemons whose spreadsheets overlap only through others' still count each other when they
/// split the account's budget (docs/design.md §6).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Sharer {
    #[serde(rename = "w")]
    pub worker_id: String,
    /// 1: the lister sees its heartbeat itself; n: it heard of it through n − 1 others.
    #[serde(rename = "n")]
    pub hops: u32,
    /// Whom the lister heard of it from (empty: seen itself). A reader does not take back
    /// word that came from itself, so two daemons do not keep a dead one alive between them.
    #[serde(rename = "v", default, skip_serializing_if = "String::is_empty")]
    pub via: String,
}

/// First sheet row of the heartbeat rows (1-based); row 1 holds the lease, row 2 the header.
pub const FIRST_ROW: u32 = 3;

/// A job a daemon says it is running, as listed in its heartbeat row (compact JSON keys:
/// the cell holds one entry per running job, and a cell holds at most 50,000 characters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningRef {
    #[serde(rename = "j")]
    pub job_id: String,
    #[serde(rename = "t")]
    pub target: String,
    #[serde(rename = "r", default, skip_serializing_if = "String::is_empty")]
    pub requester: String,
    /// Finished: its result is being written or has just landed. Listed so that no other
    /// daemon runs it again should its row show it as 待機 (a write that landed elsewhere, a
    /// restore from an older read); it does not keep its target busy.
    #[serde(rename = "d", default, skip_serializing_if = "std::ops::Not::not")]
    pub done: bool,
    /// Held: another daemon's job this daemon timed out (its daemon dead to us, or its row
    /// stale) that may still be running somewhere. Its target stays busy, whatever its row
    /// shows, until the job could have ended on its own (docs/design.md §3.1).
    #[serde(rename = "h", default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

impl RunningRef {
    pub fn of(row: &QueueRow) -> Self {
        Self {
            job_id: row.job_id.clone(),
            target: row.target_key().to_string(),
            requester: row.requester.trim().to_string(),
            done: false,
            held: false,
        }
    }

    /// The same job, held by the daemon that timed it out.
    pub fn held(mut self) -> Self {
        self.held = true;
        self
    }

    /// The same job, marked finished.
    pub fn finished(mut self) -> Self {
        self.done = true;
        self
    }
}

/// One heartbeat row, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Heartbeat {
    /// 1-based sheet row.
    pub row: u32,
    pub worker_id: String,
    pub host: String,
    /// When it was written, by its writer's clock: for people (`sheetq status`), never for a
    /// decision (docs/design.md §3.1).
    pub seen: Option<DateTime<Utc>>,
    /// How long this observer has watched the row unchanged ([`crate::watch`]): zero until
    /// the caller fills it in from its watch.
    pub quiet: StdDuration,
    /// The row changed while this observer watched it: its writer was alive then.
    pub changed: bool,
    /// The whole row as text: what the observer watches for a change.
    pub fingerprint: String,
    /// `host pid` of the process that wrote it; empty from versions that did not say.
    pub process: String,
    pub jobs: Vec<RunningRef>,
    /// The service account it calls the API as (empty from versions that did not say):
    /// daemons on one account share its quota.
    pub account: String,
    /// The other daemons on its account it knows of (empty from versions that did not say).
    pub sharers: Vec<Sharer>,
    /// Its last heartbeat says it stopped (0 slots, written as it shut down): it takes no
    /// share of the quota. Its listed jobs stay held until `dead_after`, as a crashed
    /// daemon's would, since its outbox may still hold their results.
    pub stopped: bool,
    /// The requests to stop a job of its whose row is gone ([`STOP_COLUMN`]), as written.
    pub stops: String,
}

impl Heartbeat {
    /// Not watched unchanged for longer than `dead_after` (docs/design.md §3.1): a daemon is
    /// dead only to an observer that has watched its heartbeat stand still that long.
    pub fn is_live(&self, dead_after: StdDuration) -> bool {
        self.quiet <= dead_after
    }
}

/// The heartbeat rows of a read of `_ワーカー!A1:H` (rows 1 and 2 are skipped). A row whose
/// job list does not parse keeps an empty list: a person's edit never stops a poll.
pub fn parse(rows: &[Vec<Cell>], tz: Tz) -> Vec<Heartbeat> {
    let text = |row: &[Cell], i: usize| row.get(i).map(queue::cell_text).unwrap_or_default();
    rows.iter()
        .enumerate()
        .skip((FIRST_ROW - 1) as usize)
        .filter_map(|(i, row)| {
            let worker_id = text(row, 0);
            if worker_id.trim().is_empty() {
                return None;
            }
            Some(Heartbeat {
                row: i as u32 + 1,
                fingerprint: row
                    .iter()
                    .take(HEADER.len())
                    .map(queue::cell_text)
                    .collect::<Vec<_>>()
                    .join("\t"),
                quiet: StdDuration::ZERO,
                changed: false,
                worker_id,
                host: text(row, 1),
                seen: row
                    .get(5)
                    .and_then(|c| sheet_time::cell_to_instant(c, tz).ok().flatten()),
                process: text(row, 6),
                jobs: serde_json::from_str(&text(row, 7)).unwrap_or_default(),
                account: text(row, 8),
                sharers: serde_json::from_str(&text(row, 9)).unwrap_or_default(),
                stopped: row.get(3).and_then(Cell::as_u64) == Some(0),
                stops: text(row, STOP_COLUMN as usize),
            })
        })
        .collect()
}

/// The identity of this process in its heartbeat: `host pid`.
pub fn process_id(host: &str, pid: u32) -> String {
    format!("{host} {pid}")
}

/// The heartbeat cells A–J of a daemon.
#[allow(clippy::too_many_arguments)]
pub fn row_cells(
    worker_id: &str,
    host: &str,
    slots: usize,
    jobs: &[RunningRef],
    now: DateTime<Utc>,
    process: &str,
    account: &str,
    sharers: &[Sharer],
) -> Vec<Cell> {
    vec![
        Cell::from(worker_id),
        Cell::from(host),
        Cell::from(env!("CARGO_PKG_VERSION")),
        Cell::from(slots as u64),
        // What runs here: not the jobs listed as done (results that landed lately) nor
        // those held for other daemons.
        Cell::from(jobs.iter().filter(|j| !j.done && !j.held).count() as u64),
        // UTC text, not a serial in the sheet's zone: unambiguous when read (a wall-clock
        // serial repeats an hour when daylight saving falls back).
        Cell::from(now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        Cell::from(process),
        Cell::from(serde_json::to_string(jobs).unwrap_or_else(|_| "[]".into())),
        Cell::from(account),
        Cell::from(serde_json::to_string(sharers).unwrap_or_else(|_| "[]".into())),
    ]
}

/// The other daemons on `account` that `me` knows of, from the live ones it sees (`seen`,
/// each with the daemons it lists): those it sees (1 hop), and those they list, one hop
/// further, up to [`MAX_HOPS`], leaving out `me`, what they heard from `me`, and the daemons
/// `me` itself sees gone (`gone`, [`gone_on_account`]): what it sees of a daemon outweighs
/// what others say of it. Each at its fewest hops.
pub fn sharers_known<'h>(
    me: &str,
    seen: impl IntoIterator<Item = (&'h str, &'h [Sharer])>,
    gone: &std::collections::BTreeSet<&str>,
) -> Vec<Sharer> {
    let mut known: std::collections::BTreeMap<&str, (u32, &str)> = Default::default();
    let mut heard = Vec::new();
    for (daemon, lists) in seen {
        if daemon == me {
            continue;
        }
        known.insert(daemon, (1, ""));
        heard.push((daemon, lists));
    }
    for (daemon, lists) in heard {
        for s in lists {
            let hops = s.hops.saturating_add(1);
            if s.worker_id == me
                || s.via == me
                || hops > MAX_HOPS
                || gone.contains(s.worker_id.as_str())
            {
                continue;
            }
            let better = known
                .get(s.worker_id.as_str())
                .is_none_or(|(h, _)| hops < *h);
            if better {
                known.insert(&s.worker_id, (hops, daemon));
            }
        }
    }
    known
        .into_iter()
        .map(|(w, (hops, via))| Sharer {
            worker_id: w.to_string(),
            hops,
            via: via.to_string(),
        })
        .collect()
}

/// Our place among the live daemons (`me` included) that call the API as `account`, and how
/// many they are: they share its quota and take turns polling. Places go by worker_id, so
/// every daemon reading the same heartbeats agrees on them. Daemons that do not say their
/// account are counted with an unknown (empty) one.
pub fn place_on_account(
    heartbeats: &[Heartbeat],
    me: &str,
    account: &str,
    dead_after: StdDuration,
) -> (u32, u32) {
    let mut ids: Vec<&str> = others_on_account(heartbeats, me, account, dead_after)
        .chain([me])
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let rank = ids.iter().position(|id| *id == me).unwrap_or(0);
    (
        u32::try_from(rank).unwrap_or(0),
        u32::try_from(ids.len()).unwrap_or(1),
    )
}

/// The live daemons other than `me` (their worker ids) that call the API as `account`.
pub fn others_on_account<'h>(
    heartbeats: &'h [Heartbeat],
    me: &'h str,
    account: &'h str,
    dead_after: StdDuration,
) -> impl Iterator<Item = &'h str> {
    live_on_account(heartbeats, me, account, dead_after).map(|h| h.worker_id.as_str())
}

/// The daemons on `account` whose own heartbeat rows this observer reads and finds stopped,
/// or dead to it, since `lately` at most (watched unchanged no longer than that): word of
/// them from others' heartbeats is old. An old row standing still counts for nothing: its
/// daemon may live on elsewhere, serving other spreadsheets.
pub fn gone_on_account<'h>(
    heartbeats: &'h [Heartbeat],
    me: &'h str,
    account: &'h str,
    dead_after: StdDuration,
    lately: StdDuration,
) -> impl Iterator<Item = &'h str> {
    heartbeats
        .iter()
        .filter(move |h| {
            h.worker_id != me
                && h.account == account
                && (h.stopped || !h.is_live(dead_after))
                && h.quiet <= lately
        })
        .map(|h| h.worker_id.as_str())
}

/// How long a daemon's own sight of another's row gone (stopped, or dead to it) outweighs
/// others' word of that daemon ([`gone_on_account`]'s `lately`): word may still go round,
/// one hop a heartbeat, for up to [`MAX_HOPS`] heartbeats after the death is seen.
pub fn hearsay_lasts(dead_after: StdDuration, heartbeat_interval: StdDuration) -> StdDuration {
    dead_after.saturating_add(heartbeat_interval.saturating_mul(MAX_HOPS.saturating_add(1)))
}

/// The heartbeats of [`others_on_account`].
pub fn live_on_account<'h>(
    heartbeats: &'h [Heartbeat],
    me: &'h str,
    account: &'h str,
    dead_after: StdDuration,
) -> impl Iterator<Item = &'h Heartbeat> {
    heartbeats.iter().filter(move |h| {
        h.worker_id != me && h.account == account && !h.stopped && h.is_live(dead_after)
    })
}

/// The jobs that live daemons other than `me` say they are running: for the claim rules,
/// whose own read of the queue may not show a row a person sorted away.
pub fn running_elsewhere(
    heartbeats: &[Heartbeat],
    me: &str,
    dead_after: StdDuration,
) -> Vec<RunningRef> {
    heartbeats
        .iter()
        .filter(|h| h.worker_id != me && h.is_live(dead_after))
        .flat_map(|h| h.jobs.iter().cloned())
        .collect()
}

/// Whether job `job_id`, which daemon `daemon_id` ran and we timed out `held_for` ago, has
/// ended there, as that daemon's heartbeat says: the row changed since (the daemon is back)
/// and lists the job as running no more (done, its result written; or not at all: a
/// restarted process runs nothing from before). Its queue row may lie outside our read.
pub fn ended_on(
    heartbeats: &[Heartbeat],
    daemon_id: &str,
    job_id: &str,
    held_for: StdDuration,
) -> bool {
    heartbeats.iter().any(|h| {
        h.worker_id == daemon_id
            && h.quiet < held_for
            && !h.jobs.iter().any(|j| j.job_id == job_id && !j.done)
    })
}

/// Another live process already runs with our `worker_id`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "worker_id \"{worker_id}\" is in use by another running sheetq ({process}, which wrote heartbeat row {row} of '_ワーカー' while this one watched): give every daemon its own worker_id (setting worker_id or SHEETQ_WORKER_ID), or stop the other one; a daemon that is gone frees the id once its heartbeat has stood still for {dead_after_secs} s"
)]
pub struct WorkerIdInUse {
    pub worker_id: String,
    pub process: String,
    pub row: u32,
    pub dead_after_secs: u64,
}

/// Who else runs as our `worker_id`, as far as this observer can tell yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdCheck {
    /// Nobody: no row, our own, a stopped or dead predecessor.
    Free,
    /// Another process's row that has not changed yet while watched, for less than
    /// `dead_after`: watch it longer before deciding.
    Watching,
    InUse(WorkerIdInUse),
}

/// Whether this process may run as `worker_id`. The heartbeat row with that id belongs to a
/// live other process when it names another process that is not a dead predecessor on this
/// host (same host, pid no longer alive: our own previous run, whose jobs restart recovery
/// then fails), did not say it stopped, and this observer saw it change (its writer is
/// alive) rather than stand still for `dead_after`. A row from a version that did not name
/// its process is taken as a predecessor: it cannot be told apart.
pub fn check_worker_id(
    heartbeats: &[Heartbeat],
    worker_id: &str,
    me: &str,
    dead_after: StdDuration,
    pid_alive: impl Fn(u32) -> bool,
) -> IdCheck {
    let Some(h) = heartbeats.iter().find(|h| h.worker_id == worker_id) else {
        return IdCheck::Free;
    };
    if h.process.is_empty() || h.process == me || h.stopped || !h.is_live(dead_after) {
        return IdCheck::Free;
    }
    let (my_host, _) = me.rsplit_once(' ').unwrap_or((me, ""));
    let predecessor = match h.process.rsplit_once(' ') {
        Some((host, pid)) => host == my_host && pid.parse().is_ok_and(|p| !pid_alive(p)),
        None => false,
    };
    if predecessor {
        return IdCheck::Free;
    }
    if !h.changed {
        return IdCheck::Watching;
    }
    IdCheck::InUse(WorkerIdInUse {
        worker_id: worker_id.to_string(),
        process: h.process.clone(),
        row: h.row,
        dead_after_secs: dead_after.as_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeat_counts_as_running_only_the_jobs_that_run_here() {
        let job = |id: &str| RunningRef {
            job_id: id.into(),
            target: "A".into(),
            requester: String::new(),
            done: false,
            held: false,
        };
        let jobs = [
            job("running"),
            RunningRef {
                done: true,
                ..job("landed")
            },
            RunningRef {
                held: true,
                ..job("held")
            },
        ];
        let cells = row_cells("vm-1", "h", 2, &jobs, chrono::Utc::now(), "h 1", "a", &[]);
        assert_eq!(
            cells[4],
            Cell::from(1u64),
            "finished and held jobs do not run here"
        );
    }
    use serde_json::json;

    const TZ: Tz = chrono_tz::Asia::Tokyo;
    const TWO_MIN: StdDuration = StdDuration::from_secs(120);

    fn job(j: &str, t: &str) -> RunningRef {
        RunningRef {
            job_id: j.into(),
            target: t.into(),
            requester: String::new(),
            done: false,
            held: false,
        }
    }

    #[test]
    fn done_and_held_jobs_are_marked_in_the_cell_and_older_entries_read_as_running() {
        let text = serde_json::to_string(&[job("j", "A").finished(), job("k", "B").held()])
            .unwrap_or_default();
        assert_eq!(
            text,
            r#"[{"j":"j","t":"A","d":true},{"j":"k","t":"B","h":true}]"#
        );
        let older: Vec<RunningRef> =
            serde_json::from_str(r#"[{"j":"j","t":"A"}]"#).unwrap_or_default();
        assert!(
            !older[0].done && !older[0].held,
            "an entry without the flags is a running job"
        );
    }

    /// A heartbeat row this observer has watched stand still for `quiet_secs`; `changed`:
    /// it saw the row change before that.
    fn beat(id: &str, process: &str, quiet_secs: u64, jobs: &[(&str, &str)]) -> Heartbeat {
        Heartbeat {
            row: 3,
            worker_id: id.into(),
            host: String::new(),
            seen: None,
            quiet: StdDuration::from_secs(quiet_secs),
            changed: true,
            fingerprint: String::new(),
            process: process.into(),
            jobs: jobs.iter().map(|(j, t)| job(j, t)).collect(),
            account: "sheetq@p.iam.gserviceaccount.com".into(),
            sharers: Vec::new(),
            stopped: false,
            stops: String::new(),
        }
    }

    #[test]
    fn a_held_job_ended_when_its_daemon_is_back_and_lists_it_running_no_more() {
        let held_for = StdDuration::from_secs(30);
        // Silent since before we took the hold: it has told us nothing.
        let silent = beat("vm-2", "b 1", 200, &[("j1", "A")]);
        assert!(!ended_on(&[silent], "vm-2", "j1", held_for));
        // Back, and still running it (a partition, not a crash).
        let running = beat("vm-2", "b 1", 1, &[("j1", "A")]);
        assert!(!ended_on(
            std::slice::from_ref(&running),
            "vm-2",
            "j1",
            held_for
        ));
        // Back, its result written (listed done), or not listed at all (a new process).
        let mut done = running.clone();
        done.jobs[0].done = true;
        assert!(ended_on(&[done], "vm-2", "j1", held_for));
        let restarted = beat("vm-2", "b 2", 1, &[]);
        assert!(ended_on(&[restarted], "vm-2", "j1", held_for));
        // Another daemon's heartbeat says nothing about vm-2's job.
        let other = beat("vm-3", "c 1", 1, &[]);
        assert!(!ended_on(&[other], "vm-2", "j1", held_for));
    }

    #[test]
    fn daemons_on_one_account_share_it_while_they_live() {
        let mut other_account = beat("vm-4", "d 1", 10, &[]);
        other_account.account = "other@p.iam.gserviceaccount.com".into();
        let beats = vec![
            beat("vm-1", "a 1", 10, &[]),
            beat("vm-2", "b 1", 60, &[]),
            beat("vm-3", "c 1", 600, &[]),
            other_account,
        ];
        let account = "sheetq@p.iam.gserviceaccount.com";
        assert_eq!(
            place_on_account(&beats, "vm-1", account, TWO_MIN),
            (0, 2),
            "vm-1 and vm-2 (vm-3 is dead to us, vm-4 on another account)"
        );
        assert_eq!(
            place_on_account(&beats, "vm-2", account, TWO_MIN),
            (1, 2),
            "vm-2 polls second"
        );
        assert_eq!(
            place_on_account(&[], "vm-9", account, TWO_MIN),
            (0, 1),
            "a daemon alone has the whole budget and every turn"
        );
    }

    #[test]
    fn rows_round_trip_through_cells_with_the_time_in_utc_text() {
        let jobs = vec![RunningRef {
            requester: "alice@example.com".into(),
            ..job("j1", "サーバーA")
        }];
        let now = DateTime::parse_from_rfc3339("2026-11-01T06:05:00.250Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default();
        let account = "sheetq@p.iam.gserviceaccount.com";
        let sharers = [Sharer {
            worker_id: "vm-9".into(),
            hops: 2,
            via: "vm-2".into(),
        }];
        let cells = row_cells(
            "vm-1",
            "host-a",
            2,
            &jobs,
            now,
            "host-a 4242",
            account,
            &sharers,
        );
        assert_eq!(
            cells[5],
            json!("2026-11-01T06:05:00.250Z"),
            "unambiguous whatever the sheet's zone does that night"
        );
        let rows = vec![
            vec![json!("lease"), json!("free")],
            HEADER.iter().map(|h| json!(h)).collect(),
            cells,
            vec![json!("")],
            vec![
                json!("vm-2"),
                json!("host-b"),
                json!("0.0.1"),
                json!(1),
                json!(0),
                json!(""),
                json!(""),
                json!("not json"),
            ],
        ];
        let got = parse(&rows, TZ);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].row, 3);
        assert_eq!(got[0].worker_id, "vm-1");
        assert_eq!(got[0].process, "host-a 4242");
        assert_eq!(got[0].jobs, jobs);
        assert_eq!(got[0].account, account);
        assert_eq!(
            got[0].sharers, sharers,
            "the daemons it knows of, with how far"
        );
        assert!(got[1].sharers.is_empty(), "an older daemon lists none");
        assert_eq!(got[0].seen, Some(now));
        assert_ne!(got[0].fingerprint, got[1].fingerprint);
        assert_eq!(got[1].row, 5);
        assert!(got[1].jobs.is_empty(), "a mangled job list reads as empty");
    }

    #[test]
    fn running_elsewhere_lists_live_daemons_but_not_us_or_the_dead() {
        let beats = vec![
            beat("vm-1", "a 1", 10, &[("j1", "A")]),
            beat("vm-2", "b 1", 60, &[("j2", "B")]),
            beat("vm-3", "c 1", 600, &[("j3", "C")]),
        ];
        let got = running_elsewhere(&beats, "vm-1", TWO_MIN);
        let ids: Vec<&str> = got.iter().map(|r| r.job_id.as_str()).collect();
        assert_eq!(ids, vec!["j2"]);
    }

    #[test]
    fn a_second_live_process_with_our_worker_id_is_refused() {
        let beats = vec![beat("vm-1", "host-a 100", 10, &[])];
        let alive = |_| true;
        let IdCheck::InUse(err) = check_worker_id(&beats, "vm-1", "host-b 200", TWO_MIN, alive)
        else {
            panic!("a row another process wrote while we watched is in use");
        };
        let msg = err.to_string();
        assert!(
            msg.contains("\"vm-1\"")
                && msg.contains("host-a 100")
                && msg.contains("SHEETQ_WORKER_ID"),
            "{msg}"
        );
        // Same host, and that pid is still alive: another process too.
        assert!(matches!(
            check_worker_id(&beats, "vm-1", "host-a 300", TWO_MIN, |p| p == 100),
            IdCheck::InUse(_)
        ));
    }

    #[test]
    fn a_row_not_yet_seen_changing_is_watched_before_deciding() {
        let mut unseen = beat("vm-1", "host-b 100", 30, &[]);
        unseen.changed = false;
        assert_eq!(
            check_worker_id(&[unseen.clone()], "vm-1", "host-a 1", TWO_MIN, |_| true),
            IdCheck::Watching
        );
        unseen.quiet = StdDuration::from_secs(121);
        assert_eq!(
            check_worker_id(&[unseen], "vm-1", "host-a 1", TWO_MIN, |_| true),
            IdCheck::Free,
            "standing still past dead_after: a predecessor that is gone"
        );
    }

    #[test]
    fn our_dead_predecessor_a_stopped_or_stale_row_or_another_id_is_no_obstacle() {
        let fresh = vec![beat("vm-1", "host-a 100", 10, &[])];
        let check = |beats: &[Heartbeat], id: &str, me: &str, alive: bool| {
            check_worker_id(beats, id, me, TWO_MIN, |_| alive)
        };
        assert_eq!(check(&fresh, "vm-1", "host-a 300", false), IdCheck::Free);
        assert_eq!(check(&fresh, "vm-1", "host-a 100", true), IdCheck::Free);
        assert_eq!(check(&fresh, "vm-2", "host-b 1", true), IdCheck::Free);
        let stale = vec![beat("vm-1", "host-b 100", 180, &[])];
        assert_eq!(check(&stale, "vm-1", "host-a 1", true), IdCheck::Free);
        let mut stopped = beat("vm-1", "host-b 100", 1, &[]);
        stopped.stopped = true;
        assert_eq!(check(&[stopped], "vm-1", "host-a 1", true), IdCheck::Free);
        let old_version = vec![beat("vm-1", "", 10, &[])];
        assert_eq!(check(&old_version, "vm-1", "host-a 1", true), IdCheck::Free);
    }
}
