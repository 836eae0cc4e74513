//! Running an `exec` command as a child process group that never outlives the job or the
//! daemon: the spawner thread, the child's environment, output capture, and stopping the
//! whole group on timeout, cancellation, exit or drop.
//!
//! Why a dedicated spawner thread: on Linux the child asks the kernel for `SIGKILL` when its
//! parent dies (`PR_SET_PDEATHSIG`), but "parent" there is the *thread* that forked it. A
//! tokio worker or blocking-pool thread may end while the job still runs (idle blocking
//! threads exit after a few seconds), which would kill a healthy job. The spawner thread
//! lives as long as the [`super::Runner`], so the signal fires exactly when the daemon (or
//! the runner) is gone.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::time::{sleep_until, timeout, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::output::{self, Exit, Tail, CAPTURE_BYTES, STDERR_TAIL_CHARS};
use super::{Outcome, OutcomeStatus, PreparedJob};
use crate::joblog::Capture;

/// `PATH` given to every command (the daemon's own is not passed unless allow-listed):
/// system directories only, so a sheet-writable or user directory is never searched.
pub const SAFE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// `LANG` given to every command unless allow-listed: UTF-8 output for Japanese text.
pub const DEFAULT_LANG: &str = "C.UTF-8";

/// How long output is still read after the process group is gone. Output normally ends at
/// once; only a process that left the group (`setsid`) can hold a pipe open, and it must not
/// hold the job.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// How long to wait for the leader to be reaped after SIGKILL before giving up on it.
const REAP_LIMIT: Duration = Duration::from_secs(10);

type SpawnRequest = (Command, oneshot::Sender<io::Result<Child>>);

/// Forks children from one long-lived thread (see the module docs).
#[derive(Debug)]
pub(crate) struct Spawner {
    tx: mpsc::Sender<SpawnRequest>,
}

impl Spawner {
    /// Starts the thread; it enters `handle` so the children are driven by that runtime, and
    /// ends when the spawner is dropped.
    pub(crate) fn start(handle: tokio::runtime::Handle) -> io::Result<Spawner> {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("sheetq-spawner".into())
            .spawn(move || {
                let _runtime = handle.enter();
                while let Ok((mut cmd, reply)) = rx.recv() {
                    // Recorded before the reaper can look (it holds the same lock): a
                    // command's exit status is tokio's to take, never the reaper's.
                    let mut own = match super::reaper::OWN.lock() {
                        Ok(own) => own,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    let child = cmd.spawn();
                    if let Some(pid) = child.as_ref().ok().and_then(Child::id) {
                        own.insert(pid as i32);
                    }
                    drop(own);
                    // The requester may have given up (cancelled); kill_on_drop then
                    // stops the child as the reply is dropped.
                    let _ = reply.send(child);
                }
            })?;
        Ok(Spawner { tx })
    }

    async fn spawn(&self, cmd: Command) -> io::Result<Child> {
        let (reply, answer) = oneshot::channel();
        let stopped = || io::Error::other("the sheetq spawner thread has stopped");
        self.tx.send((cmd, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Forgets a command's leader once it has been waited for: from then on, its pid is the
/// reaper's to reap should it show up as a zombie again (reused by an orphan).
fn untrack(pid: u32) {
    let mut own = match super::reaper::OWN.lock() {
        Ok(own) => own,
        Err(poisoned) => poisoned.into_inner(),
    };
    own.remove(&(pid as i32));
}

/// Sends `sig` to the process group `pgid`; false if no process was left in it.
fn signal_group(pgid: Pid, sig: Signal) -> bool {
    killpg(pgid, sig).is_ok()
}

/// Kills the group if the job's future is dropped before the group was stopped (the
/// daemon aborted the task): the leader alone would be killed by `kill_on_drop`, its
/// children would not.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, Signal::SIGKILL);
            // Nobody waits for the leader now: the reaper may take it.
            untrack(pgid.as_raw() as u32);
        }
    }
}

/// Builds the command for `job`: argv without a shell, a cleared environment with the
/// allow-listed variables and `SHEETQ_*`, its own process group, parent-death signal.
fn command(job: &PreparedJob, argv: &[String], args_json: &str) -> Command {
    let def = job.def();
    let spec = job.spec();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd.env_clear();
    cmd.env("PATH", SAFE_PATH);
    cmd.env("LANG", DEFAULT_LANG);
    if let Some(home) = std::env::var_os("HOME") {
        cmd.env("HOME", home);
    }
    for name in &def.env {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    let flags: Vec<&str> = spec
        .flags
        .iter()
        .map(|f| f.trim())
        .filter(|f| !f.is_empty())
        .collect();
    cmd.env("SHEETQ_JOB_ID", &spec.job_id)
        .env("SHEETQ_TARGET", &spec.target)
        .env("SHEETQ_FUNCTION", &spec.function)
        .env("SHEETQ_REQUESTER", &spec.requester)
        .env("SHEETQ_COMMAND", &def.name)
        .env("SHEETQ_ARGS_JSON", args_json)
        .env("SHEETQ_FLAGS", flags.join(","))
        .env("SHEETQ_PANEL_SHEET", &spec.panel_sheet)
        .env(
            "SHEETQ_PANEL_ROW",
            spec.panel_row.map(|r| r.to_string()).unwrap_or_default(),
        );
    if let Some(dir) = &def.workdir {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The job gets back the umask sheetq was started with (sheetq's own is 077: `privacy`).
    let umask = crate::privacy::job_umask();
    // SAFETY: runs in the forked child before exec; umask(2) is async-signal-safe and
    // nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::stat::umask(umask);
            Ok(())
        });
    }
    #[cfg(target_os = "linux")]
    {
        let parent = Pid::from_raw(std::process::id() as i32);
        // SAFETY: runs in the forked child before exec; it only makes two system calls
        // (prctl, getppid), which are async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The daemon died between fork and prctl: nobody would send the signal.
                if nix::unistd::getppid() != parent {
                    return Err(nix::errno::Errno::ESRCH.into());
                }
                Ok(())
            });
        }
    }
    cmd
}

/// Reads `stream` to its end into `tail` and the job's merged `log`, so the child never
/// blocks on a full pipe. Both streams' readers push into one log as their chunks come,
/// each through its `mask` first: no secret reaches the tail or the log (`mask`).
async fn drain(
    mut stream: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    log: Capture,
    mut mask: super::mask::Masker,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let keep = |bytes: &[u8]| {
        if bytes.is_empty() {
            return;
        }
        log.push(bytes);
        tail.lock().unwrap_or_else(|e| e.into_inner()).push(bytes);
    };
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => keep(&mask.feed(&buf[..n])),
        }
    }
    keep(&mask.finish());
}

fn text_of(tail: &Mutex<Tail>) -> String {
    tail.lock().unwrap_or_else(|e| e.into_inner()).text()
}

enum End {
    Exited(ExitStatus),
    WaitFailed(io::Error),
    TimedOut,
    Cancelled,
}

/// Runs an `exec` job to its end; `deadline` is when it times out.
pub(crate) async fn run_exec(
    spawner: &Spawner,
    job: &PreparedJob,
    argv: &[String],
    deadline: Instant,
    cancel: &CancellationToken,
    log: &Capture,
) -> Outcome {
    let def = job.def();
    if let Some(dir) = &def.workdir {
        if !dir.is_dir() {
            return failed(format!(
                "could not start \"{}\": workdir {} does not exist or is not a directory \
                 (commands.{}.workdir)",
                argv[0],
                dir.display(),
                def.name
            ));
        }
    }
    let args_json = serde_json::to_string(job.args()).unwrap_or_else(|_| "{}".into());
    let mut child = match spawner.spawn(command(job, argv, &args_json)).await {
        Ok(child) => child,
        Err(e) => return failed(format!("could not start \"{}\": {e}", argv[0])),
    };
    let Some(pid) = child.id() else {
        return failed(format!("\"{}\" ended before it could be watched", argv[0]));
    };
    let pgid = Pid::from_raw(pid as i32);
    let mut guard = GroupGuard { pgid: Some(pgid) };
    debug!(pid, ?argv, "started");

    if let Some(mut stdin) = child.stdin.take() {
        let input = format!("{args_json}\n");
        // A child that never reads stdin closes the pipe: the write error is expected.
        tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
        });
    }
    let stdout = Arc::new(Mutex::new(Tail::new(CAPTURE_BYTES)));
    let stderr = Arc::new(Mutex::new(Tail::new(CAPTURE_BYTES)));
    // The values the command receives through `env` never come back out of it.
    let secrets = super::mask::Secrets::new(def.env.iter().filter_map(|n| std::env::var(n).ok()));
    let mut readers = tokio::task::JoinSet::new();
    if let Some(s) = child.stdout.take() {
        let mask = super::mask::Masker::with_patterns(secrets.clone(), Arc::clone(&def.mask));
        readers.spawn(drain(s, Arc::clone(&stdout), log.clone(), mask));
    }
    if let Some(s) = child.stderr.take() {
        let mask = super::mask::Masker::with_patterns(secrets.clone(), Arc::clone(&def.mask));
        readers.spawn(drain(s, Arc::clone(&stderr), log.clone(), mask));
    }

    let end = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => End::Exited(s),
            Err(e) => End::WaitFailed(e),
        },
        _ = sleep_until(deadline) => End::TimedOut,
        _ = cancel.cancelled() => End::Cancelled,
    };

    end_group(&mut child, pgid, &end, def.kill_grace).await;
    guard.disarm();
    untrack(pid);
    let drained = timeout(DRAIN_LIMIT, async {
        while readers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            pid,
            "a process outside the group kept the output open; stopped reading"
        );
        readers.abort_all();
    }
    let stdout = text_of(&stdout);
    let mut outcome = outcome_of(end, def, argv, &stdout, &text_of(&stderr));
    if job.private_output() {
        // `output = "private"`: nothing the job printed goes to the sheet or a notification.
        outcome.message = match outcome.status {
            // The daemon writes who stopped it; the output's last lines stay here.
            OutcomeStatus::Cancelled => format!("({})", output::KEPT_PRIVATE),
            status => output::private_message(
                status == OutcomeStatus::Done,
                outcome.exit_code,
                status == OutcomeStatus::TimedOut,
                &stdout,
            ),
        };
    }
    outcome
}

/// Ends the command's process group `pgid` as `end` requires: what the leader left behind
/// is killed; a job timed out or cancelled gets SIGTERM, `kill_grace`, then SIGKILL.
async fn end_group(child: &mut tokio::process::Child, pgid: Pid, end: &End, kill_grace: Duration) {
    let pid = pgid.as_raw();
    match end {
        End::Exited(_) | End::WaitFailed(_) => {
            // The leader is done; whatever it left running in its group goes with it.
            if signal_group(pgid, Signal::SIGKILL) {
                warn!(
                    pid,
                    "the command left processes in its group; they were killed"
                );
            }
        }
        End::TimedOut | End::Cancelled => {
            signal_group(pgid, Signal::SIGTERM);
            let exited = timeout(kill_grace, child.wait()).await.is_ok();
            signal_group(pgid, Signal::SIGKILL);
            if !exited && timeout(REAP_LIMIT, child.wait()).await.is_err() {
                warn!(pid, "the command did not end after SIGKILL");
            }
        }
    }
}

/// The outcome of a job that ended as `end`, from what it printed.
fn outcome_of(
    end: End,
    def: &super::CommandDef,
    argv: &[String],
    stdout: &str,
    stderr: &str,
) -> Outcome {
    match end {
        End::Exited(status) => {
            let exit = match (status.code(), status.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                (None, None) => Exit::Code(-1),
            };
            let r = output::interpret(exit, stdout, stderr);
            Outcome {
                status: if r.ok {
                    OutcomeStatus::Done
                } else {
                    OutcomeStatus::Failed
                },
                message: r.message,
                url: r.url,
                continue_args: r.continue_args,
                exit_code: exit_code(exit),
                attempts: 1,
                duration: Duration::ZERO,
            }
        }
        End::WaitFailed(e) => failed(format!("lost track of \"{}\": {e}", argv[0])),
        End::TimedOut => stopped(
            OutcomeStatus::TimedOut,
            format!(
                "timed out after {} (commands.{}.timeout); the process group was stopped",
                humantime::format_duration(def.timeout),
                def.name
            ),
            stdout,
            stderr,
        ),
        // Stopped on request or at shutdown: the daemon, which knows which, writes the
        // message; the outcome carries what the command printed last.
        End::Cancelled => Outcome {
            status: OutcomeStatus::Cancelled,
            message: printed_last(stdout, stderr),
            url: None,
            continue_args: None,
            exit_code: None,
            attempts: 1,
            duration: Duration::ZERO,
        },
    }
}

/// The exit code of a command that exited rather than being killed by a signal.
fn exit_code(exit: Exit) -> Option<i32> {
    match exit {
        Exit::Code(c) => Some(c),
        Exit::Signal(_) => None,
    }
}

/// The tail of what a stopped command printed: its stdout's last lines, then its stderr's,
/// at most [`STDERR_TAIL_CHARS`] characters of each; empty when it printed nothing.
fn printed_last(stdout: &str, stderr: &str) -> String {
    [stdout, stderr]
        .iter()
        .map(|s| output::tail_chars(s.trim(), STDERR_TAIL_CHARS / 2))
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// An outcome for a stopped job, with the last thing it said (stderr first) for context.
fn stopped(status: OutcomeStatus, what: String, stdout: &str, stderr: &str) -> Outcome {
    let last = output::last_said(stderr)
        .or_else(|| output::last_said(stdout))
        .map(|l| output::tail_chars(l, STDERR_TAIL_CHARS / 3));
    let message = match last {
        Some(l) => format!("{what}; last output: {l}"),
        None => what,
    };
    Outcome {
        status,
        message: output::limit_message(&message),
        url: None,
        continue_args: None,
        exit_code: None,
        attempts: 1,
        duration: Duration::ZERO,
    }
}

fn failed(message: String) -> Outcome {
    Outcome {
        status: OutcomeStatus::Failed,
        message: output::limit_message(&message),
        url: None,
        continue_args: None,
        exit_code: None,
        attempts: 1,
        duration: Duration::ZERO,
    }
}

/// The `PATH` a job of a command with allow-listed environment `env` runs with:
/// [`SAFE_PATH`], unless `PATH` is allow-listed and set for the daemon.
pub(crate) fn job_path(env: &[String]) -> std::ffi::OsString {
    env.iter()
        .any(|name| name == "PATH")
        .then(|| std::env::var_os("PATH"))
        .flatten()
        .unwrap_or_else(|| SAFE_PATH.into())
}

/// Where `program` would be found when a job starts: a path (with a `/`) must be an
/// executable file; a bare name is looked up on `path`, the `PATH` the job runs with
/// ([`job_path`]). Says why not, for `sheetq check`.
pub(crate) fn find_program(
    program: &str,
    path: &std::ffi::OsStr,
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = std::path::PathBuf::from(program);
        return if executable(&path) {
            Ok(path)
        } else if path.exists() {
            Err("is not an executable file; check its permissions (chmod +x)".into())
        } else {
            Err("does not exist on this machine; install it or fix the path".into())
        };
    }
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| {
            format!(
                "is not found on the PATH jobs run with ({}); give its absolute path, or allow-list \"PATH\" in the command's env to pass the daemon's own",
                path.to_string_lossy()
            )
        })
}
