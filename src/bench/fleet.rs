//! `sheetq bench --fleet`: one daemon (the `sheetq` binary, a process of its own) serving
//! many spreadsheets of the embedded emulator under Google's quota, once with one service
//! account for all of them and once with two. Presses are ▶ ticks (`intake = "poll"`):
//! one busy spreadsheet ticked every few seconds, a burst of three on another, and the
//! others ticked now and then, so they spend most of the run quiet. Figures: each account's
//! peak reads and writes in any 60 s (from the emulator's request log), the requests its
//! quota refused, tick → `実行中` on the busy and on the quiet spreadsheets, jobs a minute,
//! and the daemon's peak RSS.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::json;

use crate::emulator::{Emulator, EmulatorOptions, Seed};
use crate::queue::{self, ColumnMap, StateWords};

use super::figures::{mib, p50_p95, peak_of, rss_of};
use super::process::spawn_daemon;

/// What a fleet run is asked to do.
#[derive(Debug, Clone)]
pub struct FleetParams {
    /// Spreadsheets one daemon serves.
    pub spreadsheets: usize,
    /// How long presses go on (the peak minute needs more than a minute).
    pub run_for: Duration,
    /// The daemon's job slots.
    pub slots: usize,
    /// The `sheetq` binary to run the daemon with.
    pub exe: PathBuf,
    /// The runs: how many service accounts the spreadsheets are split over in each.
    pub accounts: Vec<usize>,
    /// The quiet spreadsheets take turns being ticked, one every this / their number.
    pub quiet_every: Duration,
}

impl FleetParams {
    /// `sheetq bench --fleet`: `spreadsheets` under one account, then two.
    pub fn new(spreadsheets: usize, run_for: Duration, slots: usize, exe: PathBuf) -> Self {
        FleetParams {
            spreadsheets,
            run_for,
            slots,
            exe,
            accounts: vec![1, 2],
            quiet_every: Duration::from_secs(45),
        }
    }
}

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct FleetRun {
    pub spreadsheets: usize,
    pub accounts: usize,
    /// Per account: its peak reads and writes in any 60 s.
    pub peaks: Vec<(String, usize, usize)>,
    /// Requests the emulator's quota refused (429), all accounts.
    pub refused: u64,
    /// Tick → 実行中 on the busy spreadsheet, and on the quiet ones.
    pub busy: Vec<Duration>,
    pub quiet: Vec<Duration>,
    pub jobs: usize,
    pub elapsed: Duration,
    pub rss_kib: u64,
}

/// The panels and the row ticked: the demo's `動作確認 (2秒)`.
const PANELS: [&str; 3] = ["サーバーA", "サーバーB", "サーバーC"];
const ROW: u32 = 8;
/// The busy spreadsheet is ticked this often (a panel whose last press is still on is
/// skipped), a quiet one about this often.
const BUSY_EVERY: Duration = Duration::from_secs(5);

/// A tick waiting for its job to start.
struct Pending {
    spreadsheet: usize,
    panel: &'static str,
    at: Instant,
    known: usize,
}

/// Runs the fleet benchmark for each number of accounts asked; writes progress and the
/// table ([`table`]) to `out` and returns the runs.
pub async fn measure(p: &FleetParams, out: &mut impl Write) -> anyhow::Result<Vec<FleetRun>> {
    let mut runs = Vec::new();
    for &accounts in &p.accounts {
        writeln!(
            out,
            "fleet: {} spreadsheets under {accounts} account(s), presses for {} s",
            p.spreadsheets,
            p.run_for.as_secs()
        )?;
        let r = one(p, accounts).await?;
        writeln!(
            out,
            "fleet: {} jobs in {:.0} s, {} refused",
            r.jobs,
            r.elapsed.as_secs_f64(),
            r.refused
        )?;
        runs.push(r);
    }
    writeln!(out, "\n{}", table(&runs))?;
    Ok(runs)
}

/// One run: the emulator with its spreadsheets, the daemon process serving them, and the
/// presses made on them.
struct Run {
    emu: Emulator,
    ids: Vec<String>,
    columns: ColumnMap,
    child: tokio::process::Child,
    pid: u32,
    log: PathBuf,
    rss_kib: u64,
    pending: Vec<Pending>,
    _dir: tempfile::TempDir,
}

async fn one(p: &FleetParams, accounts: usize) -> anyhow::Result<FleetRun> {
    let mut run = Run::start(p, accounts).await?;
    let mut figures = FleetRun {
        spreadsheets: run.ids.len(),
        accounts,
        ..FleetRun::default()
    };
    run.press(p, &mut figures).await?;
    run.settle().await;
    run.stop(figures).await
}

impl Run {
    /// The emulator with `p.spreadsheets` demo spreadsheets, and the daemon serving them,
    /// once every spreadsheet shows its heartbeat; the request log starts empty then.
    async fn start(p: &FleetParams, accounts: usize) -> anyhow::Result<Run> {
        let emu = Emulator::start(EmulatorOptions::default())
            .await
            .context("cannot start the embedded spreadsheet")?;
        let mut ids = vec![emu.spreadsheet_id().to_string()];
        ids.extend((1..p.spreadsheets).map(|_| emu.add_spreadsheet(Seed::Demo)));
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let config = write_config(&emu, dir.path(), &ids, accounts, p.slots)?;
        let log = dir.path().join("daemon.log");
        let (child, pid) = spawn_daemon(&p.exe, &config, &log)?;
        let columns = queue_columns(&emu, &ids[0])?;
        let mut run = Run {
            emu,
            ids,
            columns,
            child,
            pid,
            log,
            rss_kib: 0,
            pending: Vec::new(),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !run
            .ids
            .iter()
            .all(|id| has_heartbeat(&run.emu, id, "fleet"))
        {
            run.check_alive()?;
            if Instant::now() > deadline {
                bail!("the fleet daemon did not start on every spreadsheet within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        run.emu.clear_requests();
        Ok(run)
    }

    /// Fails with the daemon's log if it stopped.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let said = std::fs::read_to_string(&self.log).unwrap_or_default();
            bail!("the fleet daemon stopped ({status}): {said}");
        }
        Ok(())
    }

    /// Ticks for `p.run_for` (the busy spreadsheet every [`BUSY_EVERY`], a burst of three
    /// on the second half-way, the quiet ones in turn), then waits for every tick's job to
    /// start; each tick → 実行中 goes into `figures`.
    async fn press(&mut self, p: &FleetParams, figures: &mut FleetRun) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut next_busy = started;
        // Quiet spreadsheets take turns, spread over `quiet_every`.
        let quiet: Vec<usize> = (2..self.ids.len()).collect();
        let quiet_gap = p.quiet_every / u32::try_from(quiet.len().max(1)).unwrap_or(1);
        let mut next_quiet = started + quiet_gap;
        let mut quiet_turn = 0;
        let mut burst_done = false;
        while started.elapsed() < p.run_for || !self.pending.is_empty() {
            self.rss_kib = self.rss_kib.max(rss_of(self.pid));
            let now = Instant::now();
            let mut ticks: Vec<(usize, &'static str)> = Vec::new();
            if started.elapsed() < p.run_for {
                if now >= next_busy {
                    next_busy = now + BUSY_EVERY;
                    let k = (started.elapsed().as_secs() / BUSY_EVERY.as_secs().max(1)) as usize;
                    ticks.push((0, PANELS[k % PANELS.len()]));
                }
                if !burst_done && started.elapsed() >= p.run_for / 2 {
                    burst_done = true;
                    ticks.extend(PANELS.iter().map(|panel| (1, *panel)));
                }
                if now >= next_quiet && !quiet.is_empty() {
                    next_quiet = now + quiet_gap;
                    ticks.push((quiet[quiet_turn % quiet.len()], PANELS[0]));
                    quiet_turn += 1;
                }
            }
            for (s, panel) in ticks {
                self.tick(s, panel)?;
            }
            self.take_started(figures);
            if started.elapsed() > p.run_for + Duration::from_secs(120) {
                bail!(
                    "presses did not start within 120 s of the run's end: {}",
                    self.stuck()
                );
            }
            self.check_alive()?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Ticks `panel` of spreadsheet `s`, unless its last press is still on (the duplicate
    /// guard would refuse it).
    fn tick(&mut self, s: usize, panel: &'static str) -> anyhow::Result<()> {
        if self
            .pending
            .iter()
            .any(|q| q.spreadsheet == s && q.panel == panel)
        {
            return Ok(());
        }
        let rows = queue_rows(&self.emu, &self.ids[s], &self.columns);
        if rows.iter().any(|r| r.target == panel && !is_finished(r)) {
            return Ok(());
        }
        self.emu
            .set_values_in(
                &self.ids[s],
                &crate::a1::range(panel, &format!("A{ROW}")),
                json!([[true]]),
                false,
            )
            .map_err(|e| anyhow::anyhow!("cannot tick {panel}!A{ROW}: {e:?}"))?;
        self.pending.push(Pending {
            spreadsheet: s,
            panel,
            at: Instant::now(),
            known: rows.len(),
        });
        Ok(())
    }

    /// Takes the ticks whose job started out of the pending ones, with how long it took.
    fn take_started(&mut self, figures: &mut FleetRun) {
        let (emu, ids, columns) = (&self.emu, &self.ids, &self.columns);
        self.pending.retain(|q| {
            let rows = queue_rows(emu, &ids[q.spreadsheet], columns);
            let started = rows.iter().skip(q.known).any(|r| {
                r.target == q.panel && (r.state.is(queue::State::Running) || is_finished(r))
            });
            if started {
                // The burst's spreadsheet (1) is busy while it lasts.
                match q.spreadsheet {
                    0 | 1 => figures.busy.push(q.at.elapsed()),
                    _ => figures.quiet.push(q.at.elapsed()),
                }
            }
            !started
        });
    }

    /// The pending ticks and what their panels' rows show.
    fn stuck(&self) -> String {
        let stuck: Vec<String> = self
            .pending
            .iter()
            .map(|q| {
                let rows = queue_rows(&self.emu, &self.ids[q.spreadsheet], &self.columns);
                let states: Vec<String> = rows
                    .iter()
                    .filter(|r| r.target == q.panel)
                    .map(|r| format!("{:?}", r.state))
                    .collect();
                format!(
                    "ss{:02} {} ({})",
                    q.spreadsheet + 1,
                    q.panel,
                    states.join(", ")
                )
            })
            .collect();
        stuck.join("; ")
    }

    /// Waits (up to a minute) for the last jobs to finish and land.
    async fn settle(&mut self) {
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_secs(60)
            && self.ids.iter().any(|id| {
                queue_rows(&self.emu, id, &self.columns)
                    .iter()
                    .any(|r| !is_finished(r))
            })
        {
            self.rss_kib = self.rss_kib.max(rss_of(self.pid));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the daemon and completes `figures` from the store and the request log.
    async fn stop(mut self, mut figures: FleetRun) -> anyhow::Result<FleetRun> {
        figures.elapsed = self.emu.requests().first().map_or(Duration::ZERO, |r| {
            (chrono::Utc::now() - r.at).to_std().unwrap_or_default()
        });
        figures.rss_kib = self.rss_kib.max(rss_of(self.pid));
        self.child
            .kill()
            .await
            .context("cannot stop the fleet daemon")?;
        figures.jobs = (self.ids.iter())
            .map(|id| {
                let rows = queue_rows(&self.emu, id, &self.columns);
                rows.iter().filter(|r| is_finished(r)).count()
            })
            .sum();
        let log = self.emu.requests();
        let mut users: Vec<&str> = (log.iter())
            .filter(|r| !r.user.is_empty() && r.method != "oauth2.token")
            .map(|r| r.user.as_str())
            .collect();
        users.sort_unstable();
        users.dedup();
        for user in users {
            figures.peaks.push((
                user.to_string(),
                peak_of(&log, user, false),
                peak_of(&log, user, true),
            ));
        }
        figures.refused = (self.emu.quota_refused().values())
            .map(|r| r.read + r.write)
            .sum();
        Ok(figures)
    }
}

/// The daemon's config: every spreadsheet listed, half of them under a second key when
/// `accounts` is 2; Google's defaults otherwise (poll_interval, idle_poll_interval, budget).
fn write_config(
    emu: &Emulator,
    dir: &Path,
    ids: &[String],
    accounts: usize,
    slots: usize,
) -> anyhow::Result<PathBuf> {
    let key = |name: &str| -> anyhow::Result<String> {
        let path = dir.join(format!("{name}.json"));
        std::fs::write(&path, emu.credentials_json_for(name))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path.display().to_string())
    };
    let first = key("fleet-a")?;
    let second = if accounts > 1 {
        Some(key("fleet-b")?)
    } else {
        None
    };
    let mut text = format!(
        "api_base_url = {:?}\nworker_id = \"fleet\"\nstate_dir = {:?}\ncredentials = {first:?}\nslots = {slots}\nintake = \"poll\"\n[commands.sleep]\nbuiltin = \"sleep\"\n",
        emu.base_url(),
        dir.join("state").display().to_string(),
    );
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!(
            "[[spreadsheets]]\nlabel = \"ss{:02}\"\nspreadsheet_id = {id:?}\n",
            i + 1
        ));
        if let Some(second) = second.as_ref().filter(|_| i % 2 == 1) {
            text.push_str(&format!("credentials = {second:?}\n"));
        }
    }
    let path = dir.join("sheetq.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Whether `worker`'s heartbeat row is on spreadsheet `id`.
pub(super) fn has_heartbeat(emu: &Emulator, id: &str, worker: &str) -> bool {
    emu.values_in(id, "'_ワーカー'!A2:A")
        .unwrap_or_default()
        .iter()
        .any(|r| r.first().is_some_and(|c| c == worker))
}

pub(super) fn queue_columns(emu: &Emulator, id: &str) -> anyhow::Result<ColumnMap> {
    let header = emu
        .values_in(id, "'_ジョブキュー'!1:1")
        .map_err(|e| anyhow::anyhow!("cannot read the queue header: {e:?}"))?;
    ColumnMap::from_header(
        header.first().map_or(&[][..], Vec::as_slice),
        &Default::default(),
    )
    .map_err(|e| anyhow::anyhow!("the queue header: {e}"))
}

pub(super) fn queue_rows(emu: &Emulator, id: &str, columns: &ColumnMap) -> Vec<queue::QueueRow> {
    let values = emu
        .values_in(id, "'_ジョブキュー'!A2:Z")
        .unwrap_or_default();
    queue::parse_rows(
        &values,
        2,
        columns,
        &StateWords::default(),
        chrono_tz::Asia::Tokyo,
    )
    .rows
}

pub(super) fn is_finished(r: &queue::QueueRow) -> bool {
    r.state.is(queue::State::Done)
        || r.state.is(queue::State::Error)
        || r.state.is(queue::State::Timeout)
}

/// The Markdown table of the runs.
pub fn table(runs: &[FleetRun]) -> String {
    let mut md = String::from(
        "| spreadsheets × accounts | peak reads / min (per account) | peak writes / min (per account) | refused (429) | tick → 実行中, busy p50 / p95 (presses) | tick → 実行中, quiet p50 / p95 (presses) | jobs / min | daemon peak RSS |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let peaks = |f: fn(&(String, usize, usize)) -> usize| {
            r.peaks
                .iter()
                .map(|p| f(p).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let minutes = r.elapsed.as_secs_f64() / 60.0;
        md.push_str(&format!(
            "| {} × {} | {} | {} | {} | {} | {} | {:.1} | {} |\n",
            r.spreadsheets,
            r.accounts,
            peaks(|p| p.1),
            peaks(|p| p.2),
            r.refused,
            p50_p95(&r.busy),
            p50_p95(&r.quiet),
            r.jobs as f64 / minutes.max(f64::EPSILON),
            mib(r.rss_kib),
        ));
    }
    md
}
