//! systemd's service notification protocol (`sd_notify`): `READY=1` once the daemon works,
//! `WATCHDOG=1` while the poll loop makes progress, `STOPPING=1` when shutdown begins and
//! `STATUS=...` for `systemctl status`.
//!
//! The protocol is one datagram of `KEY=VALUE` lines to the socket named by `$NOTIFY_SOCKET`
//! (a path, or `@name` in the abstract namespace), so it is written here on
//! [`UnixDatagram`] rather than pulled in as a crate: the socket path and `WATCHDOG_USEC`
//! are plain parameters, which lets tests use their own socket without touching the
//! process environment. Outside systemd there is no socket and every call is a no-op.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::metrics::Health;

/// Why notifications cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET={0:?} is neither an absolute path nor an @abstract name")]
    BadSocket(OsString),
    #[error("WATCHDOG_USEC={0:?} is not a positive number of microseconds")]
    BadWatchdog(String),
    #[error("cannot open a socket for systemd notifications: {0}")]
    Socket(#[source] io::Error),
    #[error("cannot send {message:?} to systemd's NOTIFY_SOCKET: {source}")]
    Send {
        message: String,
        #[source]
        source: io::Error,
    },
}

/// A handle to systemd's notification socket, or a no-op when not started by systemd.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
    /// How many more [`Notifier::ready`] calls READY=1 waits for: one per spreadsheet served.
    ready_left: std::sync::atomic::AtomicUsize,
}

impl Notifier {
    /// A notifier that sends nothing (not under systemd, or in tests).
    pub fn disabled() -> Self {
        Self {
            target: None,
            watchdog: None,
            ready_left: std::sync::atomic::AtomicUsize::new(1),
        }
    }

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the process
    /// environment.
    ///
    /// The variables are left in place: commands run with an allow-listed environment, and
    /// the unit's `NotifyAccess=main` makes systemd ignore any child that writes anyway.
    pub fn from_env() -> Result<Self, NotifyError> {
        let socket = std::env::var_os("NOTIFY_SOCKET");
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Self::from_values(
            socket.as_deref(),
            usec.as_deref(),
            pid.as_deref(),
            std::process::id(),
        )
    }

    /// The same as [`Notifier::from_env`] with the variables' values passed in.
    ///
    /// `watchdog_pid` names the process the watchdog is meant for; when it is set and is
    /// not `own_pid`, this process must not ping (it was inherited from a parent).
    pub fn from_values(
        notify_socket: Option<&OsStr>,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
        own_pid: u32,
    ) -> Result<Self, NotifyError> {
        let target = match notify_socket.filter(|s| !s.is_empty()) {
            None => None,
            Some(path) => {
                let addr = socket_addr(path)?;
                let socket = UnixDatagram::unbound().map_err(NotifyError::Socket)?;
                // A full receive queue must never stall a runtime thread: a lost ping is
                // reported, and the next one follows within half the watchdog period.
                socket.set_nonblocking(true).map_err(NotifyError::Socket)?;
                Some((socket, addr))
            }
        };
        let for_us = match watchdog_pid.map(str::trim) {
            None | Some("") => true,
            Some(pid) => pid.parse::<u32>().ok() == Some(own_pid),
        };
        let watchdog = match watchdog_usec.map(str::trim) {
            None | Some("") => None,
            Some(text) => match text.parse::<u64>() {
                Ok(usec) if usec > 0 => Some(Duration::from_micros(usec)),
                _ => return Err(NotifyError::BadWatchdog(text.to_string())),
            },
        }
        .filter(|_| for_us && target.is_some());
        Ok(Self {
            target,
            watchdog,
            ready_left: std::sync::atomic::AtomicUsize::new(1),
        })
    }

    /// Whether a notification socket is configured.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// The watchdog period systemd enforces (`WatchdogSec=`), if any.
    pub fn watchdog_timeout(&self) -> Option<Duration> {
        self.watchdog
    }

    /// How often to ping: half the period, as `sd_watchdog_enabled(3)` advises, so one late
    /// tick does not get the service killed.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|d| d / 2)
    }

    /// Startup is complete: config valid, sheet reachable, loops started. With several
    /// spreadsheets ([`Notifier::ready_after`]), READY=1 goes with the last one's call.
    pub fn ready(&self) -> Result<(), NotifyError> {
        use std::sync::atomic::Ordering;
        let left = self
            .ready_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(1))
            })
            .unwrap_or(1);
        if left <= 1 {
            self.send("READY=1")
        } else {
            Ok(())
        }
    }

    /// Makes READY=1 wait for `n` calls of [`Notifier::ready`]: a process serving `n`
    /// spreadsheets is ready when each of them is.
    pub fn ready_after(&self, n: usize) {
        self.ready_left
            .store(n.max(1), std::sync::atomic::Ordering::SeqCst);
    }

    /// Still starting (the API fails for now, and the daemon tries again): the service
    /// manager's start-up timeout is extended to `by` from now, so an outage at boot does
    /// not get the service killed and restarted until its start limit gives up on it, while
    /// a start-up that hangs still times out.
    pub fn extend_timeout(&self, by: Duration) -> Result<(), NotifyError> {
        self.send(&format!("EXTEND_TIMEOUT_USEC={}", by.as_micros()))
    }

    /// The service is alive and making progress.
    pub fn watchdog_ping(&self) -> Result<(), NotifyError> {
        self.send("WATCHDOG=1")
    }

    /// Shutdown has begun (claiming stopped, running jobs draining).
    pub fn stopping(&self) -> Result<(), NotifyError> {
        self.send("STOPPING=1")
    }

    /// A one-line status shown by `systemctl status`; line breaks become spaces, since a
    /// newline would start a new assignment.
    pub fn status(&self, text: &str) -> Result<(), NotifyError> {
        let line: String = text
            .chars()
            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
            .collect();
        self.send(&format!("STATUS={line}"))
    }

    /// Sends one raw message (`KEY=VALUE` lines); a no-op when disabled.
    pub fn send(&self, message: &str) -> Result<(), NotifyError> {
        let Some((socket, addr)) = &self.target else {
            return Ok(());
        };
        socket
            .send_to_addr(message.as_bytes(), addr)
            .map(|_| ())
            .map_err(|source| NotifyError::Send {
                message: message.to_string(),
                source,
            })
    }

    /// Pings the watchdog every [`Notifier::watchdog_interval`] for as long as `health`
    /// says the poll loop is progressing (see [`should_ping`]), until `shutdown` fires.
    /// Returns at once when no watchdog is configured.
    ///
    /// Pinging from a timer alone would only prove the runtime is alive; tying it to the
    /// poll loop lets systemd restart a daemon that is running but stuck.
    pub async fn watchdog_loop(&self, health: Health, shutdown: CancellationToken) {
        let Some(interval) = self.watchdog_interval() else {
            return;
        };
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let live = health.liveness();
            if live.is_live() {
                if let Err(e) = self.watchdog_ping() {
                    tracing::warn!(error = %e, "watchdog ping not sent");
                }
            } else {
                tracing::warn!(
                    reason = %live.reason(),
                    "withholding the systemd watchdog ping: the poll loop is stuck"
                );
            }
        }
    }
}

fn socket_addr(path: &OsStr) -> Result<SocketAddr, NotifyError> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_bytes();
    let bad = || NotifyError::BadSocket(path.to_os_string());
    match bytes.first() {
        Some(b'/') => SocketAddr::from_pathname(path).map_err(|_| bad()),
        #[cfg(target_os = "linux")]
        Some(b'@') => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(&bytes[1..]).map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A socket standing in for systemd's, in a directory that is removed on drop.
    struct FakeSystemd {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        socket: UnixDatagram,
    }

    impl FakeSystemd {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("notify.sock");
            let socket = UnixDatagram::bind(&path).unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            Self {
                _dir: dir,
                path,
                socket,
            }
        }

        fn notifier(&self, watchdog_usec: Option<&str>) -> Notifier {
            Notifier::from_values(
                Some(self.path.as_os_str()),
                watchdog_usec,
                None,
                std::process::id(),
            )
            .unwrap()
        }

        /// The next datagram, waiting at most 10 s.
        fn recv(&self) -> String {
            let mut buf = [0u8; 4096];
            let n = self
                .socket
                .recv(&mut buf)
                .expect("a notification within 10 s");
            String::from_utf8(buf[..n].to_vec()).unwrap()
        }
    }

    #[test]
    fn messages_reach_the_socket_as_systemd_reads_them() {
        let systemd = FakeSystemd::new();
        let n = systemd.notifier(None);
        assert!(n.is_enabled());
        n.ready().unwrap();
        assert_eq!(systemd.recv(), "READY=1");
        n.status("polling\n3 running").unwrap();
        assert_eq!(systemd.recv(), "STATUS=polling 3 running");
        n.watchdog_ping().unwrap();
        assert_eq!(systemd.recv(), "WATCHDOG=1");
        n.stopping().unwrap();
        assert_eq!(systemd.recv(), "STOPPING=1");
        n.extend_timeout(Duration::from_secs(90)).unwrap();
        assert_eq!(systemd.recv(), "EXTEND_TIMEOUT_USEC=90000000");
    }

    #[test]
    fn without_systemd_everything_is_a_no_op() {
        for n in [
            Notifier::disabled(),
            Notifier::from_values(None, Some("60000000"), None, 1).unwrap(),
            Notifier::from_values(Some(OsStr::new("")), None, None, 1).unwrap(),
        ] {
            assert!(!n.is_enabled());
            assert_eq!(n.watchdog_interval(), None);
            n.ready().unwrap();
            n.status("x").unwrap();
        }
    }

    #[test]
    fn the_watchdog_period_comes_from_watchdog_usec_and_pid() {
        let systemd = FakeSystemd::new();
        let n = systemd.notifier(Some("60000000"));
        assert_eq!(n.watchdog_timeout(), Some(Duration::from_secs(60)));
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(30)));

        let path = Some(systemd.path.as_os_str());
        let other = Notifier::from_values(path, Some("60000000"), Some("1"), 2).unwrap();
        assert_eq!(other.watchdog_interval(), None, "meant for another pid");
        let ours = Notifier::from_values(path, Some("60000000"), Some("2"), 2).unwrap();
        assert!(ours.watchdog_interval().is_some());

        let err = Notifier::from_values(path, Some("soon"), None, 2).unwrap_err();
        assert!(err.to_string().contains("WATCHDOG_USEC=\"soon\""), "{err}");
    }

    #[test]
    fn a_relative_socket_path_is_refused() {
        let err = Notifier::from_values(Some(OsStr::new("run/notify")), None, None, 1).unwrap_err();
        assert!(matches!(err, NotifyError::BadSocket(_)), "{err}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_abstract_socket_name_is_understood() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("sheetq-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let systemd = UnixDatagram::bind_addr(&addr).unwrap();
        systemd
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let n =
            Notifier::from_values(Some(OsStr::new(&format!("@{name}"))), None, None, 1).unwrap();
        n.ready().unwrap();
        let mut buf = [0u8; 64];
        let len = systemd.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
    }

    #[tokio::test]
    async fn the_watchdog_is_pinged_through_an_outage_while_the_loop_turns() {
        let systemd = FakeSystemd::new();
        let n = Arc::new(systemd.notifier(Some("40000")));
        // The last poll that succeeded is older than the limit (Google is down): not
        // ready. The loop still turns, so the service is alive and must not be restarted.
        let health = Health::new(Duration::from_millis(300));
        health.poll_completed();
        tokio::time::sleep(Duration::from_millis(400)).await;
        health.loop_turned();
        assert!(!health.verdict().is_healthy(), "not ready");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let (n, shutdown) = (Arc::clone(&n), shutdown.clone());
            async move { n.watchdog_loop(health, shutdown).await }
        });
        let first = tokio::task::spawn_blocking(move || systemd.recv())
            .await
            .unwrap();
        assert_eq!(first, "WATCHDOG=1", "an outage is no reason to restart");
        shutdown.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn the_watchdog_loop_pings_until_shutdown() {
        let systemd = FakeSystemd::new();
        // 40 ms period: a ping every 20 ms.
        let n = Arc::new(systemd.notifier(Some("40000")));
        let health = Health::new(Duration::from_secs(60));
        health.poll_completed();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let n = Arc::clone(&n);
            let shutdown = shutdown.clone();
            async move { n.watchdog_loop(health, shutdown).await }
        });
        let received = tokio::task::spawn_blocking(move || {
            let first = systemd.recv();
            let second = systemd.recv();
            (first, second)
        })
        .await
        .unwrap();
        assert_eq!(received, ("WATCHDOG=1".into(), "WATCHDOG=1".into()));
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the loop ends on shutdown")
            .unwrap();
    }
}
