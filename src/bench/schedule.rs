//! `sheetq bench --schedule-minutes M`: what a `[[schedules]]` entry costs in requests. One
//! daemon on the embedded spreadsheet at Google's quota runs for `M` minutes with a schedule
//! of every minute, then as long without it (each its own account): reads and writes a
//! minute of each, and the difference per occurrence.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::emulator::{Emulator, EmulatorOptions};
use crate::sheets::auth::Credentials;

/// One run: with the schedule or without.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRun {
    pub scheduled: bool,
    pub minutes: f64,
    pub reads: usize,
    pub writes: usize,
    /// Scheduled jobs queued (rows whose 依頼者 is `schedule:bench`).
    pub occurrences: usize,
}

/// Measures both runs, `minutes` each, writing progress to `out`.
pub async fn measure(minutes: u64, out: &mut impl Write) -> anyhow::Result<Vec<ScheduleRun>> {
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let state = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let mut runs = Vec::new();
    for scheduled in [true, false] {
        let worker = if scheduled {
            "bench-scheduled"
        } else {
            "bench-unscheduled"
        };
        let run = one(&emu, worker, scheduled, minutes, &state.path().join(worker)).await?;
        writeln!(
            out,
            "{worker}: {} reads, {} writes in {:.1} min, {} scheduled jobs",
            run.reads, run.writes, run.minutes, run.occurrences
        )?;
        runs.push(run);
    }
    Ok(runs)
}

async fn one(
    emu: &Emulator,
    worker: &str,
    scheduled: bool,
    minutes: u64,
    state_dir: &std::path::Path,
) -> anyhow::Result<ScheduleRun> {
    let schedule = if scheduled {
        "[[schedules]]\nname = \"bench\"\ncron = \"* * * * *\"\ntarget = \"サーバーA\"\nfunction = \"定期\"\n"
    } else {
        ""
    };
    let text = format!(
        "spreadsheet_id = {id:?}\napi_base_url = {url:?}\nworker_id = {worker:?}\nstate_dir = {state:?}\n\
         intake = \"poll\"\n[commands.echo]\nbuiltin = \"echo\"\n\
         [[functions]]\nlabel = \"定期\"\ncommand = \"echo\"\n{schedule}",
        id = emu.spreadsheet_id(),
        url = emu.base_url(),
        state = state_dir.display().to_string(),
    );
    let config = Config::parse(&text, "bench config", &Default::default())?;
    let registry = crate::setup::registry(&config)?;
    let key = Credentials::KeyJson(emu.credentials_json_for(worker));
    let observers = super::observers(&config);
    let health = observers.health.clone();
    let shutdown = CancellationToken::new();
    let daemon = super::daemon_thread(config, registry, key, observers, shutdown.clone())?;
    let started = tokio::time::Instant::now();
    while !health.verdict().is_healthy() {
        if started.elapsed() > Duration::from_secs(60) {
            shutdown.cancel();
            bail!("{worker} did not complete a first poll within a minute");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let from: DateTime<Utc> = Utc::now();
    tokio::time::sleep(Duration::from_secs(minutes * 60)).await;
    let to = Utc::now();
    shutdown.cancel();
    tokio::task::spawn_blocking(move || daemon.join())
        .await
        .context("cannot wait for the daemon")?
        .map_err(|_| anyhow::anyhow!("the daemon panicked"))?
        .context("the daemon failed")?;
    let account = super::account_email(worker);
    let log = emu.requests();
    let mine: Vec<_> = log
        .iter()
        .filter(|r| r.user == account && r.at > from && r.at <= to && r.status != 429)
        .collect();
    let writes = mine.iter().filter(|r| r.write).count();
    let occurrences = emu
        .values("'_ジョブキュー'!A2:C")
        .unwrap_or_default()
        .iter()
        .filter(|r| r.get(2).and_then(|v| v.as_str()) == Some("schedule:bench"))
        .count();
    Ok(ScheduleRun {
        scheduled,
        minutes: (to - from).num_milliseconds() as f64 / 60_000.0,
        reads: mine.len() - writes,
        writes,
        occurrences: if scheduled { occurrences } else { 0 },
    })
}

/// The Markdown table of the runs, with the cost of one occurrence.
pub fn table(runs: &[ScheduleRun]) -> String {
    let per_minute = |n: usize, r: &ScheduleRun| n as f64 / r.minutes.max(f64::EPSILON);
    let mut out = String::from(
        "| daemon | minutes | reads/min | writes/min | scheduled jobs |\n|---|---:|---:|---:|---:|\n",
    );
    for r in runs {
        out.push_str(&format!(
            "| {} | {:.1} | {:.2} | {:.2} | {} |\n",
            if r.scheduled {
                "schedule `* * * * *`"
            } else {
                "no schedule"
            },
            r.minutes,
            per_minute(r.reads, r),
            per_minute(r.writes, r),
            r.occurrences
        ));
    }
    if let (Some(with), Some(without)) = (
        runs.iter().find(|r| r.scheduled),
        runs.iter().find(|r| !r.scheduled),
    ) {
        let n = with.occurrences.max(1) as f64;
        let extra =
            |a: usize, b: usize| (per_minute(a, with) - per_minute(b, without)) * with.minutes / n;
        out.push_str(&format!(
            "\nPer scheduled job (queued, claimed, run and written back): {:+.2} reads, {:+.2} writes.\n",
            extra(with.reads, without.reads),
            extra(with.writes, without.writes)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_gives_each_runs_rates_and_the_difference_per_scheduled_job() {
        let runs = [
            ScheduleRun {
                scheduled: true,
                minutes: 2.0,
                reads: 90,
                writes: 14,
                occurrences: 2,
            },
            ScheduleRun {
                scheduled: false,
                minutes: 2.0,
                reads: 80,
                writes: 8,
                occurrences: 0,
            },
        ];
        let table = table(&runs);
        assert!(
            table.contains("| schedule `* * * * *` | 2.0 | 45.00 | 7.00 | 2 |"),
            "{table}"
        );
        assert!(
            table.contains("| no schedule | 2.0 | 40.00 | 4.00 | 0 |"),
            "{table}"
        );
        assert!(table.contains("+5.00 reads, +3.00 writes"), "{table}");
    }
}
