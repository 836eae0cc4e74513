//! What a command's retries cost in requests, for `sheetq bench`: the same failing job run
//! twice by a fresh daemon of its own (and its own account) on a fresh embedded
//! spreadsheet, once without retries and once with [`RETRIES`], everything that daemon
//! sent from its start to the job's end counted from the emulator's request log. The
//! difference is what the retries add: one read of the job's row before each retry (is a
//! stop asked? docs/design.md §5.2), and nothing else. The claim pass's
//! `spreadsheets.batchUpdate` commits are left out of both counts: whether the lease takes a
//! batch of its own, rides the claim or is kept from the pass before is timing.
//!
//! The job goes in once the daemon has started, and the retries wait 10 ms each while the
//! polls come 2 s apart, so in both runs the job is claimed by one poll and its result
//! written by the next: the polls are the same, and the difference is the retries' own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::emulator::{Emulator, EmulatorOptions};
use crate::queue::{Column, QUEUE_SHEET};
use crate::sheets::auth::Credentials;
use crate::{a1, admin};

/// Attempts after the first of the measured job.
pub const RETRIES: u32 = 3;

/// What one run sent, from the daemon's start to the job's end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub reads: usize,
    pub writes: usize,
}

/// The failing job's requests without and with retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryCost {
    pub without: Load,
    pub with: Load,
}

impl RetryCost {
    /// Reads the retries added, per retry.
    pub fn reads_per_retry(&self) -> f64 {
        (self.with.reads as f64 - self.without.reads as f64) / f64::from(RETRIES)
    }

    /// Writes the retries added, per retry.
    pub fn writes_per_retry(&self) -> f64 {
        (self.with.writes as f64 - self.without.writes as f64) / f64::from(RETRIES)
    }
}

/// Runs the failing job without and with retries; their loads.
pub async fn measure(deadline: Duration) -> anyhow::Result<RetryCost> {
    Ok(RetryCost {
        without: run_once(0, deadline).await?,
        with: run_once(RETRIES, deadline).await?,
    })
}

/// One daemon on a fresh spreadsheet, one job of a command that fails at once with
/// `retries` retries 10 ms apart: what the daemon sent from the job's arrival until it ended,
/// but for the claim pass's structural commits.
async fn run_once(retries: u32, deadline: Duration) -> anyhow::Result<Load> {
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let state = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let worker = format!("bench-retry-{retries}");
    let retry = if retries == 0 {
        String::new()
    } else {
        format!("retries = {retries}\nretry_delay = \"10ms\"\nretry_max_delay = \"10ms\"\n")
    };
    let text = format!(
        r#"
spreadsheet_id = {id:?}
api_base_url = {url:?}
worker_id = {worker:?}
poll_interval = "2s"
requests_per_minute = 10000
state_dir = {state:?}
[commands.fail]
exec = ["sh", "-c", "exit 3"]
{retry}"#,
        id = emu.spreadsheet_id(),
        url = emu.base_url(),
        state = state.path().display().to_string(),
    );
    let config = Config::parse(&text, "bench retry config", &BTreeMap::new())?;
    let registry = crate::setup::registry(&config)?;
    let columns = super::queue_columns(&emu)?;
    let job = admin::NewJob {
        target: "サーバーA".into(),
        function: "失敗する".into(),
        command: "fail".into(),
        args_json: "{}".into(),
        requester: String::new(),
        panel_sheet: "サーバーA".into(),
        flags: vec![],
    };
    let id = uuid::Uuid::new_v4().to_string();
    let row = admin::job_row(
        &columns,
        &config,
        chrono_tz::Asia::Tokyo,
        &id,
        Utc::now(),
        &job,
    );
    let account = super::account_email(&worker);
    let key = Credentials::KeyJson(emu.credentials_json_for(&worker));
    let sheets = crate::setup::connect(&config, Some(key), false).await?;
    let shutdown = CancellationToken::new();
    let observers = super::observers(&config);
    let daemon = tokio::spawn(crate::daemon::run_observed(
        sheets,
        config,
        registry,
        shutdown.clone(),
        observers,
    ));
    // The job goes in once the daemon has started (its heartbeat row is written): whether a
    // start-up commit would claim it depends on timing, and the runs must compare alike.
    let started = Instant::now();
    while emu
        .values("'_ワーカー'!A3")
        .unwrap_or_default()
        .first()
        .and_then(|r| r.first())
        .map(crate::queue::cell_text)
        .unwrap_or_default()
        .is_empty()
    {
        if started.elapsed() > deadline || daemon.is_finished() {
            shutdown.cancel();
            bail!("the retry daemon did not start within {deadline:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    emu.clear_requests();
    emu.replace_rows(QUEUE_SHEET, 2, &[row])
        .map_err(|e| anyhow::anyhow!("cannot enqueue the job: {e:?}"))?;
    let state_col = a1::column_letters(columns.index(Column::State));
    let cell = a1::range(QUEUE_SHEET, &format!("{state_col}2"));
    let arrived = Instant::now();
    loop {
        let state = emu
            .values(&cell)
            .unwrap_or_default()
            .first()
            .and_then(|r| r.first())
            .map(crate::queue::cell_text)
            .unwrap_or_default();
        if super::is_final(&state) {
            break;
        }
        if arrived.elapsed() > deadline || daemon.is_finished() {
            shutdown.cancel();
            bail!("the failing job with {retries} retries did not end within {deadline:?} (it shows {state:?})");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The claim pass's `spreadsheets.batchUpdate` commits are left out of both runs: whether
    // the lease goes in a batch of its own or rides the claim, or is kept from the pass
    // before, is timing (docs/design.md §3), not the retries. What a retry could add is a
    // values write (a note, a result): those count.
    // The emulator logs a request once it has answered it: the row may show the result a
    // moment before its write is in the log.
    let result_logged = |log: &[crate::emulator::RequestRecord]| {
        log.iter()
            .any(|r| r.user == account && r.write && r.method.starts_with("spreadsheets.values."))
    };
    let mut log = emu.requests();
    while !result_logged(&log) && arrived.elapsed() <= deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        log = emu.requests();
    }
    let mine = log.iter().filter(|r| {
        r.user == account
            && r.method != "oauth2.token"
            && r.status != 429
            && !(r.write && r.method == "spreadsheets.batchUpdate")
    });
    let (writes, reads): (Vec<_>, Vec<_>) = mine.partition(|r| r.write);

    shutdown.cancel();
    daemon
        .await
        .context("the retry daemon panicked")?
        .context("the retry daemon failed")?;
    Ok(Load {
        reads: reads.len(),
        writes: writes.len(),
    })
}
