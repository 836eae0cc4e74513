//! Orphans of commands: `sheetq run` makes itself the child subreaper
//! (`PR_SET_CHILD_SUBREAPER`), so a process a command left behind (one that escaped its
//! process group with `setsid`, then outlived the command) is reparented to sheetq rather
//! than to PID 1, and sheetq reaps it when it ends. Where sheetq *is* PID 1 (a container
//! without an init) nothing else would, and the zombies would pile up.
//!
//! The commands themselves are sheetq's own children, waited for by tokio: the spawner
//! records each one's pid while holding [`OWN`], and the reaper, holding it too, never
//! touches those, so it never takes an exit status a job is waiting for.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The pids of the commands running now (their leaders: tokio waits for them).
pub(super) static OWN: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// How often the reaper looks without a `SIGCHLD` (one can be missed while it reaps).
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// Makes this process the child subreaper and reaps orphans until `shutdown`; returns at
/// once, with a warning, where the kernel refuses.
pub async fn run(shutdown: CancellationToken) {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        warn!(error = %e, "cannot become the child subreaper: processes that commands leave behind are reaped by PID 1, if at all");
        return;
    }
    let mut chld = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child()) {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "cannot watch for SIGCHLD; orphans of commands are reaped every few seconds");
            return reap_every(shutdown).await;
        }
    };
    loop {
        reap_orphans();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = chld.recv() => {}
            _ = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
}

async fn reap_every(shutdown: CancellationToken) {
    loop {
        reap_orphans();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
}

/// Reaps every zombie child of this process that is not a running command's leader;
/// returns how many.
pub fn reap_orphans() -> usize {
    let own = match OWN.lock() {
        Ok(own) => own,
        Err(poisoned) => poisoned.into_inner(),
    };
    let me = std::process::id() as i32;
    let mut reaped = 0;
    for pid in zombie_children(me) {
        if own.contains(&pid) {
            continue;
        }
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(status) => {
                reaped += 1;
                info!(pid, ?status, "reaped a process a command had left behind");
            }
            Err(e) => debug!(pid, error = %e, "could not reap"),
        }
    }
    reaped
}

/// The pids of the zombies whose parent is `parent`, from `/proc/<pid>/stat`.
fn zombie_children(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| state_and_parent(&stat))
                .is_some_and(|(state, ppid)| state == 'Z' && ppid == parent)
        })
        .collect()
}

/// The state letter and the parent pid of a `/proc/<pid>/stat` line. The command name, in
/// parentheses, may itself hold spaces and parentheses: the fields start after the last `)`.
fn state_and_parent(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_state_and_parent_whatever_the_command_name() {
        assert_eq!(
            state_and_parent("4242 (sleep) Z 17 4242 17 0 -1 4194564"),
            Some(('Z', 17))
        );
        assert_eq!(
            state_and_parent("4242 (my (odd) tool) S 1 4242 4242 0"),
            Some(('S', 1))
        );
        assert_eq!(state_and_parent("garbage"), None);
    }
}
