//! `sheetq bench --fleet`'s start from cold: a deployment's first minutes as an operator
//! runs them. `sheetq init` on a config of several `[[spreadsheets]]` sharing one service
//! account, `sheetq run` right after, and presses in its first seconds: three busy
//! spreadsheets (two targets each, three 2-second functions ticked per target) and three
//! quiet ones (one tick each). Figures: the 429s Google's quota answered after the daemon
//! started (and during `init`), each spreadsheet's time from `run` to its heartbeat,
//! tick → `実行中` on the busy and quiet spreadsheets, and the account's peak reads and
//! writes in any 60 s, `init`'s included.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde_json::json;

use crate::emulator::{Emulator, EmulatorOptions, Seed};
use crate::queue::{self, ColumnMap};

use super::figures::{p50_p95, peak_of, secs};
use super::fleet::{has_heartbeat, is_finished, queue_columns, queue_rows};
use super::process::spawn_daemon;

/// What a cold run is asked to do.
#[derive(Debug, Clone)]
pub struct ColdParams {
    /// Spreadsheets under the one account: the first half busy, the rest quiet.
    pub spreadsheets: usize,
    /// The daemon's job slots.
    pub slots: usize,
    /// The `sheetq` binary to run `init` and the daemon with.
    pub exe: PathBuf,
}

/// The figures of a cold run.
#[derive(Debug, Clone, Default)]
pub struct ColdRun {
    pub spreadsheets: usize,
    /// How long `sheetq init` took, and the 429s its requests met.
    pub init: Duration,
    pub refused_in_init: u64,
    /// 429s after `sheetq run` began.
    pub refused_after_start: u64,
    /// Per spreadsheet: `run` → its heartbeat on the sheet.
    pub serving: Vec<Duration>,
    /// Tick → 実行中 on the busy and on the quiet spreadsheets.
    pub busy: Vec<Duration>,
    pub quiet: Vec<Duration>,
    /// The account's peak reads and writes in any 60 s, from `init` on.
    pub peak_reads: usize,
    pub peak_writes: usize,
}

/// The panels a busy spreadsheet's ticks go to, and the function rows ticked on each.
const BUSY_PANELS: [&str; 2] = ["サーバーA", "サーバーB"];
const ROWS: [u32; 3] = [8, 9, 10];
/// The first tick goes out this long after `run` began; the next ones this far apart.
const FIRST_TICK: Duration = Duration::from_secs(2);
const TICK_GAP: Duration = Duration::from_millis(250);
const ACCOUNT: &str = "fleet-cold";
const WORKER: &str = "fleet";

/// A tick waiting for its job to start.
struct Pending {
    spreadsheet: usize,
    panel: &'static str,
    row: u32,
    at: Instant,
}

/// Runs the cold start once; writes progress to `out`.
pub async fn measure(p: &ColdParams, out: &mut impl Write) -> anyhow::Result<ColdRun> {
    writeln!(
        out,
        "cold: `init` then `run` on {} spreadsheets under one account, ticks in its first seconds",
        p.spreadsheets
    )?;
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let mut ids = vec![emu.spreadsheet_id().to_string()];
    ids.extend((1..p.spreadsheets).map(|_| emu.add_spreadsheet(Seed::Demo)));
    for id in &ids {
        two_second_functions(&emu, id)?;
    }
    let columns = queue_columns(&emu, &ids[0])?;
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let config = write_config(&emu, dir.path(), &ids, p.slots)?;
    let account = Emulator::account(ACCOUNT);
    let mut figures = ColdRun {
        spreadsheets: ids.len(),
        ..ColdRun::default()
    };

    let began = Instant::now();
    let init = tokio::process::Command::new(&p.exe)
        .args(["-q", "init", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .with_context(|| format!("cannot run {} init", p.exe.display()))?;
    if !init.status.success() {
        bail!(
            "`sheetq init` failed ({}): {}",
            init.status,
            String::from_utf8_lossy(&init.stderr)
        );
    }
    figures.init = began.elapsed();
    figures.refused_in_init = refused(&emu, &account);

    let log = dir.path().join("daemon.log");
    let (mut child, _pid) = spawn_daemon(&p.exe, &config, &log)?;
    let started = Instant::now();
    let mut serving: Vec<Option<Duration>> = vec![None; ids.len()];
    let mut ticks = plan_ticks(ids.len());
    let mut pending: Vec<Pending> = Vec::new();
    let busy = ids.len().div_ceil(2);
    while serving.iter().any(Option::is_none) || !ticks.is_empty() || !pending.is_empty() {
        if let Some(status) = child.try_wait()? {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("the daemon stopped ({status}): {said}");
        }
        for (i, id) in ids.iter().enumerate() {
            if serving[i].is_none() && has_heartbeat(&emu, id, WORKER) {
                serving[i] = Some(started.elapsed());
            }
        }
        while let Some(&(at, s, panel, row)) = ticks.first() {
            if started.elapsed() < at {
                break;
            }
            ticks.remove(0);
            emu.set_values_in(
                &ids[s],
                &crate::a1::range(panel, &format!("A{row}")),
                json!([[true]]),
                false,
            )
            .map_err(|e| anyhow::anyhow!("cannot tick {panel}!A{row}: {e:?}"))?;
            pending.push(Pending {
                spreadsheet: s,
                panel,
                row,
                at: Instant::now(),
            });
        }
        pending.retain(|q| {
            if !has_started(&emu, &ids[q.spreadsheet], &columns, q.panel, q.row) {
                return true;
            }
            let took = q.at.elapsed();
            if q.spreadsheet < busy {
                figures.busy.push(took);
            } else {
                figures.quiet.push(took);
            }
            false
        });
        if started.elapsed() > Duration::from_secs(300) {
            bail!(
                "the cold run did not finish within 300 s: {}",
                log_tail(&log)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill().await;
    figures.serving = serving.into_iter().flatten().collect();
    figures.refused_after_start = refused(&emu, &account) - figures.refused_in_init;
    let requests = emu.requests();
    figures.peak_reads = peak_of(&requests, &account, false);
    figures.peak_writes = peak_of(&requests, &account, true);
    writeln!(
        out,
        "cold: init {:.1} s ({} refused), every spreadsheet serving by {}, {} refused after start",
        figures.init.as_secs_f64(),
        figures.refused_in_init,
        secs(figures.serving.iter().copied().max().unwrap_or_default()),
        figures.refused_after_start,
    )?;
    Ok(figures)
}

/// The ticks of the run, in time order: (after `run` began, spreadsheet, panel, row). Busy
/// spreadsheets (the first half) get every function row of two panels, quiet ones one tick;
/// they take turns, one tick every [`TICK_GAP`].
fn plan_ticks(spreadsheets: usize) -> Vec<(Duration, usize, &'static str, u32)> {
    let busy = spreadsheets.div_ceil(2);
    let mut order = Vec::new();
    for &row in &ROWS {
        for panel in BUSY_PANELS {
            for s in 0..busy {
                order.push((s, panel, row));
            }
        }
        if row == ROWS[0] {
            order.extend((busy..spreadsheets).map(|s| (s, BUSY_PANELS[0], row)));
        }
    }
    let gap = |i: usize| TICK_GAP * u32::try_from(i).unwrap_or(u32::MAX);
    (order.into_iter().enumerate())
        .map(|(i, (s, panel, row))| (FIRST_TICK + gap(i), s, panel, row))
        .collect()
}

/// Makes the demo's function rows 8–10 all `sleep 2`, none heavy, so a target's three jobs
/// are alike (a setup of the store, not a request).
fn two_second_functions(emu: &Emulator, id: &str) -> anyhow::Result<()> {
    for panel in BUSY_PANELS {
        emu.set_values_in(
            id,
            &crate::a1::range(panel, "I8:J10"),
            json!([
                [r#"{"seconds":2}"#, ""],
                [r#"{"seconds":2}"#, ""],
                [r#"{"seconds":2}"#, ""]
            ]),
            false,
        )
        .map_err(|e| anyhow::anyhow!("cannot set {panel}'s functions: {e:?}"))?;
    }
    Ok(())
}

/// Whether the job of a tick on `panel`'s `row` runs or ran: a queue row for the panel and
/// the function of that row, no longer waiting.
fn has_started(emu: &Emulator, id: &str, columns: &ColumnMap, panel: &str, row: u32) -> bool {
    let function = emu
        .values_in(id, &crate::a1::range(panel, &format!("B{row}")))
        .ok()
        .and_then(|v| v.first()?.first()?.as_str().map(str::to_string))
        .unwrap_or_default();
    queue_rows(emu, id, columns).iter().any(|r| {
        r.target == panel
            && r.function == function
            && (r.state.is(queue::State::Running) || is_finished(r))
    })
}

fn refused(emu: &Emulator, account: &str) -> u64 {
    emu.quota_refused()
        .get(account)
        .map_or(0, |r| r.read + r.write)
}

fn log_tail(log: &Path) -> String {
    let said = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = said.lines().rev().take(20).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// The config of `init` and the daemon: every spreadsheet under one key, ticks taken in by
/// polling, Google's defaults otherwise.
fn write_config(
    emu: &Emulator,
    dir: &Path,
    ids: &[String],
    slots: usize,
) -> anyhow::Result<PathBuf> {
    let key = dir.join("key.json");
    std::fs::write(&key, emu.credentials_json_for(ACCOUNT))
        .with_context(|| format!("cannot write {}", key.display()))?;
    let mut text = format!(
        "api_base_url = {:?}\nworker_id = {WORKER:?}\nstate_dir = {:?}\ncredentials = {:?}\nslots = {slots}\nintake = \"poll\"\n[commands.sleep]\nbuiltin = \"sleep\"\n",
        emu.base_url(),
        dir.join("state").display().to_string(),
        key.display().to_string(),
    );
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!(
            "[[spreadsheets]]\nlabel = \"ss{:02}\"\nspreadsheet_id = {id:?}\n",
            i + 1
        ));
    }
    let path = dir.join("sheetq.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The Markdown table of a cold run.
pub fn table(r: &ColdRun) -> String {
    let serving = |f: fn(&[Duration]) -> Duration| secs(f(&r.serving));
    format!(
        "| spreadsheets × accounts | `init` (429s) | 429s after start | `run` → serving, first / last | tick → 実行中, busy p50 / p95 (presses) | tick → 実行中, quiet p50 / p95 (presses) | peak reads / writes per 60 s |\n|---|---|---|---|---|---|---|\n| {} × 1, cold | {:.1} s ({}) | {} | {} / {} | {} | {} | {} / {} |\n",
        r.spreadsheets,
        r.init.as_secs_f64(),
        r.refused_in_init,
        r.refused_after_start,
        serving(|v| v.iter().copied().min().unwrap_or_default()),
        serving(|v| v.iter().copied().max().unwrap_or_default()),
        p50_p95(&r.busy),
        p50_p95(&r.quiet),
        r.peak_reads,
        r.peak_writes,
    )
}
