//! What a rollout costs against the same jobs pressed one by one, for `sheetq bench`: on a
//! fresh embedded spreadsheet each, one daemon (its own account, [`SLOTS`] slots) and
//! [`TARGETS`] targets whose function sleeps [`JOB_SECONDS`]: first [`TARGETS`] single
//! presses queued at once (one per target), then one rollout over every target with
//! `max_parallel = 5`. Counted from the emulator's request log: the daemon's requests from
//! the queueing until the last result (the rollout's end) is in the log, per job; and the
//! wall time, against the ideal `ceil(20/5) × job time`.
//!
//! A rollout's waves ride claim passes: each is appended once its previous jobs ended, and
//! claimed at the next pass, so a wave starts a poll or two after the last one ended; the
//! single presses all wait in the queue from the start.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::config::Config;
use crate::emulator::{Emulator, EmulatorOptions, RequestRecord};
use crate::queue::Column;
use crate::sheets::auth::Credentials;

/// The rollout's targets, and the single presses beside it.
pub const TARGETS: usize = 20;
/// Its `max_parallel`, and the daemon's slots.
pub const SLOTS: usize = 5;
/// How long each job sleeps.
pub const JOB_SECONDS: f64 = 1.0;

/// What one way of running the jobs took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunLoad {
    pub jobs: usize,
    pub reads: usize,
    pub writes: usize,
    /// From the queueing to the last result in the log.
    pub wall: Duration,
}

impl RunLoad {
    pub fn requests_per_job(&self) -> f64 {
        (self.reads + self.writes) as f64 / self.jobs.max(1) as f64
    }
}

/// Single presses and a rollout over the same targets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RolloutCost {
    pub singles: RunLoad,
    pub rollout: RunLoad,
}

impl RolloutCost {
    /// `ceil(TARGETS / SLOTS) × job time`: what neither can beat.
    pub fn ideal() -> Duration {
        Duration::from_secs_f64(TARGETS.div_ceil(SLOTS) as f64 * JOB_SECONDS)
    }
}

/// Runs the single presses, then the rollout; their loads.
pub async fn measure(deadline: Duration) -> anyhow::Result<RolloutCost> {
    Ok(RolloutCost {
        singles: one(false, deadline).await?,
        rollout: one(true, deadline).await?,
    })
}

/// The config of the bench daemon: [`TARGETS`] targets in group `all`, the sleeping
/// function and the rollout over them.
fn config_text(emu: &Emulator, worker: &str, state: &std::path::Path) -> String {
    let targets: String = (1..=TARGETS)
        .map(|i| format!("[[targets]]\nlabel = \"web-{i:02}\"\ngroups = [\"all\"]\n"))
        .collect();
    format!(
        r#"
spreadsheet_id = {id:?}
api_base_url = {url:?}
worker_id = {worker:?}
poll_interval = "200ms"
requests_per_minute = 10000
slots = {SLOTS}
state_dir = {state:?}
[commands.sleep]
builtin = "sleep"
{targets}
[[functions]]
label = "再起動"
command = "sleep"
args = {{ seconds = {JOB_SECONDS} }}
[[rollouts]]
name = "restart-all"
function = "再起動"
group = "all"
max_parallel = {SLOTS}
"#,
        id = emu.spreadsheet_id(),
        url = emu.base_url(),
        state = state.display().to_string(),
    )
}

/// [`TARGETS`] jobs, as one rollout or as single presses.
async fn one(as_rollout: bool, deadline: Duration) -> anyhow::Result<RunLoad> {
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let state = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let worker = if as_rollout {
        "bench-rollout"
    } else {
        "bench-singles"
    };
    let config = Config::parse(
        &config_text(&emu, worker, state.path()),
        "bench rollout config",
        &BTreeMap::new(),
    )?;
    let registry = crate::setup::registry(&config)?;
    let key = Credentials::KeyJson(emu.credentials_json_for(worker));
    let sheets = crate::setup::connect(&config, Some(key), false).await?;
    let operator = crate::setup::connect(
        &config,
        Some(Credentials::KeyJson(
            emu.credentials_json_for("bench-operator"),
        )),
        false,
    )
    .await?;
    let columns = super::queue_columns(&emu)?;
    let daemon =
        super::PartDaemon::start(sheets, config.clone(), registry, "rollout bench", deadline)
            .await?;
    emu.clear_requests();
    let queued = Instant::now();
    if as_rollout {
        let job = crate::admin::rollout_job(&config, "restart-all", &[], "")
            .map_err(|why| anyhow::anyhow!("the bench rollout: {why}"))?;
        crate::admin::enqueue(operator.as_ref(), &config, &job).await?;
    } else {
        for i in 1..=TARGETS {
            let job = crate::admin::job_of(
                &config,
                &format!("web-{i:02}"),
                "再起動",
                None,
                None,
                &[],
                "",
            )
            .map_err(|why| anyhow::anyhow!("a bench press: {why}"))?;
            crate::admin::enqueue(operator.as_ref(), &config, &job).await?;
        }
    }
    let account = super::account_email(worker);
    let wall = loop {
        let rows = super::rows_from(&emu, &columns, 2);
        let done = rows
            .iter()
            .filter(|r| super::is_final(&super::text_at(r, &columns, Column::State)))
            .filter(|r| {
                !as_rollout
                    || super::text_at(r, &columns, Column::Command) == crate::queue::ROLLOUT_COMMAND
                        && !crate::queue::is_rollout_progress(&super::text_at(
                            r,
                            &columns,
                            Column::Message,
                        ))
            })
            .count();
        let wanted = if as_rollout { 1 } else { TARGETS };
        if done == wanted {
            break queued.elapsed();
        }
        if queued.elapsed() > deadline || daemon.is_finished() {
            daemon.stop("rollout bench").await?;
            bail!(
                "the {} did not end within {deadline:?}",
                if as_rollout {
                    "rollout"
                } else {
                    "single presses"
                }
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // The last result's write is in the log once the state says so (the emulator logs a
    // request once it answered it): count what the daemon sent until then.
    let load = count(&emu.requests(), &account, wall);
    daemon.stop("rollout bench").await?;
    let jobs = super::rows_from(&emu, &columns, 2)
        .iter()
        .filter(|r| super::text_at(r, &columns, Column::Command) == "sleep")
        .count();
    if jobs != TARGETS {
        bail!("{jobs} jobs ran instead of {TARGETS}: each target's once");
    }
    Ok(RunLoad { jobs, ..load })
}

/// The requests of `account` in `log`.
fn count(log: &[RequestRecord], account: &str, wall: Duration) -> RunLoad {
    let mut load = RunLoad {
        wall,
        ..RunLoad::default()
    };
    for r in log
        .iter()
        .filter(|r| r.user == account && r.method != "oauth2.token" && r.status != 429)
    {
        if r.write {
            load.writes += 1;
        } else {
            load.reads += 1;
        }
    }
    load
}

/// The bench table's row: per job and wall time, single presses / the rollout.
pub fn row(c: &RolloutCost) -> (String, String) {
    (
        format!(
            "{TARGETS} jobs of {JOB_SECONDS:.0} s, {SLOTS} at once: {TARGETS} single presses / one rollout (max_parallel = {SLOTS}): requests per job; wall time (ideal {:.0} s)",
            RolloutCost::ideal().as_secs_f64()
        ),
        format!(
            "{:.1} / {:.1}; {:.1} s / {:.1} s",
            c.singles.requests_per_job(),
            c.rollout.requests_per_job(),
            c.singles.wall.as_secs_f64(),
            c.rollout.wall.as_secs_f64()
        ),
    )
}
