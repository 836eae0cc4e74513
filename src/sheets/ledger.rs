//! The record every sheetq process on this machine keeps of the requests it sends as one
//! service account, so that the daemons and the one-shot commands (`init`, `check`,
//! `status`, `enqueue`, …) of the account together stay within Google's per-minute quota
//! (docs/design.md §6).
//!
//! Each process appends a line per request (`<unix ms> r|w`) to a file of its own,
//! `<quota_dir>/<account>/<pid>.<role>`; nobody else writes that file, so no lock is
//! needed, and it is rewritten (by a rename, whole) to the last minute when it grows. A
//! reader lists the account's directory and takes the lines of the last 60 s from the files
//! of other live processes: a daemon those of the one-shot commands (the daemons of an
//! account split its budget through their heartbeats already), a one-shot command all of
//! them. Times are this machine's wall clock, compared only with itself.
//!
//! A one-shot command that waits for room adds `<unix ms> wr|ww` lines ("waiting for a
//! read, a write") while it waits; a daemon seeing a fresh one holds its plain calls (idle
//! polls) back for a while ([`YIELD_MAX`]), so that a person at the shell waits for the
//! quota's minute, not behind polls that find nothing.

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Google's window: requests of the last minute count.
pub const WINDOW: Duration = Duration::from_secs(60);

/// How long a recorded request is counted: Google's minute and two seconds more, since a
/// request is recorded before it is sent and Google counts it when it arrives, which for a
/// slow request can be that much later than for the next one.
pub const COUNTED: Duration = Duration::from_secs(62);

/// How long a waiting line says a one-shot command waits: it adds one each
/// [`WANT_EVERY`] while it does.
pub const WANT_FRESH: Duration = Duration::from_secs(3);

/// How often a waiting one-shot command says again that it waits.
pub const WANT_EVERY: Duration = Duration::from_millis(500);

/// Longest a daemon holds its plain calls back, in a row, for one-shot commands that wait:
/// a script calling `sheetq status` in a loop slows the daemon's idle polls, never stops them.
pub const YIELD_MAX: Duration = Duration::from_secs(10);

/// What a process is, as far as the record goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `sheetq run`: honours the one-shot commands' requests.
    Daemon,
    /// Any other command: honours every process's requests.
    OneShot,
}

impl Role {
    fn suffix(self) -> &'static str {
        match self {
            Role::Daemon => "daemon",
            Role::OneShot => "oneshot",
        }
    }

    /// Whether a process of this role leaves room for the requests of a process of `other`.
    fn honours(self, other: Role) -> bool {
        self == Role::OneShot || other == Role::OneShot
    }
}

/// Lines an own file may grow to before it is cut back to the last minute.
const COMPACT_AT: usize = 2000;

/// One account's record as this process keeps and reads it.
pub struct Ledger {
    dir: PathBuf,
    own: PathBuf,
    role: Role,
    inner: Mutex<Own>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("dir", &self.dir)
            .field("role", &self.role)
            .finish()
    }
}

/// This process's lines: what it sent in the last minute, and the file's length in lines.
struct Own {
    sent: VecDeque<(u64, bool)>,
    lines: usize,
    /// The first failure to write the file, logged once.
    failed: bool,
}

/// The requests of a kind (reads or writes) the record shows in the last minute, from
/// the processes a reader honours: their times in unix milliseconds, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Others {
    pub times: Vec<u64>,
    /// Whether a one-shot command this process honours waits for room for a request of
    /// this kind now (a waiting line of the last [`WANT_FRESH`]).
    pub one_shot_waits: bool,
}

impl Ledger {
    /// The record of `account` under `quota_dir`, kept by this process as `role`: one per
    /// process and account (every client of the account in this process shares it).
    pub fn open(quota_dir: &Path, account: &str, role: Role) -> std::io::Result<Arc<Ledger>> {
        static OPEN: Mutex<Vec<Arc<Ledger>>> = Mutex::new(Vec::new());
        let dir = quota_dir.join(file_name_of(account));
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = open.iter().find(|l| l.dir == dir && l.role == role) {
            return Ok(Arc::clone(l));
        }
        std::fs::create_dir_all(&dir)?;
        let own = dir.join(format!("{}.{}", std::process::id(), role.suffix()));
        // A file of this pid's is a dead process's whose pid came round again.
        let _ = std::fs::remove_file(&own);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&own)?;
        let ledger = Arc::new(Ledger {
            dir,
            own,
            role,
            inner: Mutex::new(Own {
                sent: VecDeque::new(),
                lines: 0,
                failed: false,
            }),
        });
        open.push(Arc::clone(&ledger));
        Ok(ledger)
    }

    /// Records one request sent now.
    pub fn record(&self, write: bool) {
        self.record_at(now_ms(), write);
    }

    fn record_at(&self, now: u64, write: bool) {
        let mut own = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        own.sent.push_back((now, write));
        let since = now.saturating_sub(COUNTED.as_millis() as u64);
        while own.sent.front().is_some_and(|(t, _)| *t <= since) {
            own.sent.pop_front();
        }
        let result = if own.lines >= COMPACT_AT {
            self.rewrite(&own.sent).map(|()| own.sent.len())
        } else {
            self.append(now, write).map(|()| own.lines + 1)
        };
        match result {
            Ok(lines) => own.lines = lines,
            Err(e) if !own.failed => {
                own.failed = true;
                tracing::warn!(path = %self.own.display(), error = %e, "cannot record this process's requests for the other sheetq processes of the account on this machine: they will not leave room for them");
            }
            Err(_) => {}
        }
    }

    /// Says, for [`WANT_FRESH`], that this process waits for room for a request of kind
    /// `write`: a daemon's plain calls hold back meanwhile.
    pub fn want(&self, write: bool) {
        let mut own = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let line = format!("{} {}\n", now_ms(), if write { "ww" } else { "wr" });
        let written = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.own)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if written.is_ok() {
            own.lines += 1;
        }
    }

    /// The role this process keeps the record as.
    pub fn role(&self) -> Role {
        self.role
    }

    fn append(&self, at: u64, write: bool) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.own)?;
        f.write_all(line(at, write).as_bytes())
    }

    /// Puts `sent` in place of the own file, whole.
    fn rewrite(&self, sent: &VecDeque<(u64, bool)>) -> std::io::Result<()> {
        // Only this process writes its own file, so a fixed name for the new one is safe;
        // it does not parse as an own file's name, so readers pass it by.
        let staged = self.own.with_extension("new");
        let text: String = sent.iter().map(|(t, w)| line(*t, *w)).collect();
        std::fs::write(&staged, text)?;
        std::fs::rename(&staged, &self.own)
    }

    /// The requests of kind `write` of the processes this one honours, counted for
    /// [`COUNTED`].
    /// Files of processes that are gone are removed once their last minute is over.
    pub fn others(&self, write: bool) -> Others {
        let now = now_ms();
        let since = now.saturating_sub(COUNTED.as_millis() as u64);
        let mut times = Vec::new();
        let mut one_shot_waits = false;
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Others::default();
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path == self.own {
                continue;
            }
            let Some((pid, role)) = parse_name(&path) else {
                continue;
            };
            let fresh = (entry.metadata().and_then(|m| m.modified()))
                .ok()
                .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                .is_some_and(|m| m.as_millis() as u64 > since);
            if !fresh {
                if !pid_alive(pid) {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            if !self.role.honours(role) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            times.extend(parse_lines(&text, write).filter(|t| *t > since && *t <= now));
            let fresh_want = now.saturating_sub(WANT_FRESH.as_millis() as u64);
            one_shot_waits |= role == Role::OneShot
                && parse_wants(&text, write).any(|t| t > fresh_want && t <= now);
        }
        times.sort_unstable();
        Others {
            times,
            one_shot_waits,
        }
    }
}

/// Milliseconds since the Unix epoch on this machine's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn line(at: u64, write: bool) -> String {
    format!("{at} {}\n", if write { 'w' } else { 'r' })
}

/// The times of the lines of kind `write`; a line cut short by a writer still appending
/// is skipped.
fn parse_lines(text: &str, write: bool) -> impl Iterator<Item = u64> + '_ {
    let kind = if write { "w" } else { "r" };
    text.lines().filter_map(move |l| {
        let (t, k) = l.split_once(' ')?;
        (k == kind).then(|| t.parse().ok()).flatten()
    })
}

/// The times of the waiting lines of kind `write`.
fn parse_wants(text: &str, write: bool) -> impl Iterator<Item = u64> + '_ {
    let kind = if write { "ww" } else { "wr" };
    text.lines().filter_map(move |l| {
        let (t, k) = l.split_once(' ')?;
        (k == kind).then(|| t.parse().ok()).flatten()
    })
}

/// `<pid>.<role>` of an own file's name.
fn parse_name(path: &Path) -> Option<(u32, Role)> {
    let name = path.file_name()?.to_str()?;
    let (pid, role) = name.split_once('.')?;
    let role = match role {
        "daemon" => Role::Daemon,
        "oneshot" => Role::OneShot,
        _ => return None,
    };
    Some((pid.parse().ok()?, role))
}

/// Whether a process with this pid exists on this machine.
pub(crate) fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
        Ok(()) => true,
        Err(e) => e != nix::errno::Errno::ESRCH,
    }
}

/// An account's address as a directory name: what is not a letter, digit, `@`, `.`, `-` or
/// `_` becomes `_`.
fn file_name_of(account: &str) -> String {
    let name: String = account
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "@.-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        format!("account{name}")
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_shot_commands_fresh_waiting_line_is_seen_by_kind_and_a_stale_one_is_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let daemon = Ledger::open(dir.path(), "wants@b", Role::Daemon)
            .unwrap_or_else(|e| panic!("open: {e}"));
        let other = dir
            .path()
            .join("wants@b")
            .join(format!("{}.oneshot", nix::unistd::getppid()));
        let now = now_ms();
        let stale = now - WANT_FRESH.as_millis() as u64 - 1000;
        std::fs::write(&other, format!("{stale} wr\n{now} ww\n{now} r\n"))
            .unwrap_or_else(|e| panic!("write: {e}"));
        let reads = daemon.others(false);
        assert!(!reads.one_shot_waits, "the read wait is stale");
        assert_eq!(reads.times, [now], "waiting lines are no requests");
        assert!(
            daemon.others(true).one_shot_waits,
            "a write is waited for now"
        );
    }

    #[test]
    fn a_daemon_honours_one_shot_commands_and_a_one_shot_command_honours_everyone() {
        assert!(Role::Daemon.honours(Role::OneShot));
        assert!(
            !Role::Daemon.honours(Role::Daemon),
            "daemons split the budget through their heartbeats, not through the record"
        );
        assert!(Role::OneShot.honours(Role::Daemon));
        assert!(Role::OneShot.honours(Role::OneShot));
    }

    #[test]
    fn lines_of_the_other_kind_and_lines_cut_short_are_not_counted() {
        let text = "1000 r\n1001 w\n1002 r\n10";
        assert_eq!(parse_lines(text, false).collect::<Vec<_>>(), [1000, 1002]);
        assert_eq!(parse_lines(text, true).collect::<Vec<_>>(), [1001]);
    }

    #[test]
    fn an_accounts_address_makes_a_plain_directory_name() {
        assert_eq!(
            file_name_of("sheetq@p.iam.gserviceaccount.com"),
            "sheetq@p.iam.gserviceaccount.com"
        );
        assert_eq!(file_name_of("../x/y"), "account.._x_y");
        assert_eq!(file_name_of(""), "account");
    }

    #[test]
    fn another_processs_requests_of_the_last_minute_are_read_and_its_old_ones_are_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let ledger =
            Ledger::open(dir.path(), "a@b", Role::Daemon).unwrap_or_else(|e| panic!("open: {e}"));
        ledger.record(false);
        assert_eq!(
            ledger.others(false),
            Others::default(),
            "its own are not others'"
        );
        // A one-shot command of another (live) process: this test's parent.
        let other = dir
            .path()
            .join("a@b")
            .join(format!("{}.oneshot", nix::unistd::getppid()));
        let now = now_ms();
        let old = now - 63_000;
        std::fs::write(&other, format!("{old} r\n{} r\n{} w\n", now - 10, now - 5))
            .unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(
            ledger.others(false).times,
            [now - 10],
            "reads of the last minute"
        );
        assert_eq!(ledger.others(true).times, [now - 5], "writes apart");
        // Another daemon's are not honoured by a daemon.
        let daemon = other.with_extension("daemon");
        std::fs::write(&daemon, format!("{} r\n", now - 3)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ledger.others(false).times, [now - 10]);
    }

    #[test]
    fn a_gone_processs_file_is_removed_once_its_minute_is_over() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let ledger = Ledger::open(dir.path(), "gone@b", Role::OneShot)
            .unwrap_or_else(|e| panic!("open: {e}"));
        // No process has pid 4194304 + 1 (above Linux's pid_max).
        let gone = dir.path().join("gone@b").join("4194305.oneshot");
        std::fs::write(&gone, "1 r\n").unwrap_or_else(|e| panic!("write: {e}"));
        let long_ago = std::fs::FileTimes::new().set_modified(UNIX_EPOCH + WINDOW);
        std::fs::File::options()
            .write(true)
            .open(&gone)
            .and_then(|f| f.set_times(long_ago))
            .unwrap_or_else(|e| panic!("set times: {e}"));
        assert_eq!(ledger.others(false), Others::default());
        assert!(!gone.exists(), "the file of a process that is gone stays");
    }

    #[test]
    fn the_own_file_is_cut_back_to_the_last_minute_when_it_grows() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let ledger = Ledger::open(dir.path(), "grow@b", Role::OneShot)
            .unwrap_or_else(|e| panic!("open: {e}"));
        let now = now_ms();
        for _ in 0..COMPACT_AT {
            ledger.record_at(now - 120_000, false);
        }
        for _ in 0..3 {
            ledger.record_at(now, true);
        }
        let text = std::fs::read_to_string(&ledger.own).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.len() <= 3 && lines.iter().all(|l| l.ends_with(" w")),
            "after compaction the file holds only the last minute: {} lines, {:?}…",
            lines.len(),
            lines.first()
        );
    }
}
