//! What a press with inputs costs against one without, for `sheetq bench`: twice, on a
//! fresh embedded spreadsheet each, one daemon (its own account, `intake = "poll"`) whose
//! panel サーバーA `panels sync` gave one function of the built-in `echo`: without inputs,
//! then with three (a choice, a bool, a text). Its ▶ is ticked [`PRESSES`] times, and
//! everything the daemon sent from a tick until its job's result is in the log is counted
//! from the emulator's request log: requests, bytes each way, and the bytes of its polls'
//! replies.
//!
//! The inputs cost no request: their cells ride the read that finds the tick, and their
//! values the row the press appends. What they add is bytes: the wider function table every
//! poll reads (the same each poll, so the figure to compare), and the values in the row and
//! the status (a few dozen bytes, less than what the timing of polls varies).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::config::Config;
use crate::emulator::{Emulator, EmulatorOptions, RequestRecord};
use crate::queue::{Column, QUEUE_SHEET};
use crate::sheets::auth::Credentials;

/// Presses of each kind.
pub const PRESSES: usize = 5;

/// The panel the presses tick, and the row `panels sync` gives the function.
const PANEL: &str = "サーバーA";
const ROW: u32 = 8;

/// What the presses of one kind sent, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PressLoad {
    pub presses: usize,
    pub reads: usize,
    pub writes: usize,
    /// Request bodies sent, and replies received, in bytes.
    pub bytes_out: usize,
    pub bytes_in: usize,
    /// The polls among the reads, and their replies' bytes.
    pub polls: usize,
    pub poll_bytes: usize,
}

impl PressLoad {
    fn per_press(&self, n: usize) -> f64 {
        n as f64 / self.presses.max(1) as f64
    }

    pub fn reads_per_press(&self) -> f64 {
        self.per_press(self.reads)
    }

    pub fn writes_per_press(&self) -> f64 {
        self.per_press(self.writes)
    }

    /// Bytes both ways, per press.
    pub fn bytes_per_press(&self) -> f64 {
        self.per_press(self.bytes_in + self.bytes_out)
    }

    /// A poll reply's bytes, on average.
    pub fn bytes_per_poll(&self) -> f64 {
        self.poll_bytes as f64 / self.polls.max(1) as f64
    }
}

/// Presses without and with inputs, in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputsCost {
    pub without: PressLoad,
    pub with: PressLoad,
}

/// Runs the presses, without inputs and then with; their loads.
pub async fn measure(deadline: Duration) -> anyhow::Result<InputsCost> {
    Ok(InputsCost {
        without: one(false, deadline).await?,
        with: one(true, deadline).await?,
    })
}

/// [`PRESSES`] presses of the one function, with three inputs or none.
async fn one(with_inputs: bool, deadline: Duration) -> anyhow::Result<PressLoad> {
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let state = tempfile::tempdir().context("cannot create a temporary state directory")?;
    let worker = if with_inputs {
        "bench-inputs"
    } else {
        "bench-no-inputs"
    };
    let inputs = if with_inputs {
        r#"inputs = [
  { name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], default = "1.2.3" },
  { name = "dry_run", type = "bool", default = true },
  { name = "note", type = "text", default = "bench" },
]"#
    } else {
        ""
    };
    let text = format!(
        r#"
spreadsheet_id = {id:?}
api_base_url = {url:?}
worker_id = {worker:?}
poll_interval = "200ms"
requests_per_minute = 10000
intake = "poll"
state_dir = {state:?}
[commands.echo]
builtin = "echo"
[[functions]]
label = "デプロイ"
command = "echo"
{inputs}
"#,
        id = emu.spreadsheet_id(),
        url = emu.base_url(),
        state = state.path().display().to_string(),
    );
    let config = Config::parse(&text, "bench inputs config", &BTreeMap::new())?;
    let registry = crate::setup::registry(&config)?;
    let key = Credentials::KeyJson(emu.credentials_json_for(worker));
    let sheets = crate::setup::connect(&config, Some(key), false).await?;
    crate::apply::panel::sync(
        sheets.as_ref(),
        &config,
        &crate::apply::panel::SyncRequest::default(),
        None,
    )
    .await
    .context("cannot lay out the bench panel")?;
    let columns = super::queue_columns(&emu)?;
    let daemon =
        super::PartDaemon::start(sheets, config, registry, "inputs bench", deadline).await?;
    let account = super::account_email(worker);
    let mut load = PressLoad::default();
    for i in 0..PRESSES {
        emu.clear_requests();
        emu.set_values(
            &crate::a1::range(PANEL, &format!("A{ROW}")),
            serde_json::json!([[true]]),
            false,
        )
        .map_err(|e| anyhow::anyhow!("cannot tick ▶ on row {ROW}: {e:?}"))?;
        let ticked = Instant::now();
        // The press's job ended, and its result is in the log (the emulator logs a request
        // once it has answered it).
        loop {
            let rows = super::rows_from(&emu, &columns, 2);
            let ended = rows.len() == i + 1
                && rows
                    .iter()
                    .all(|r| super::is_final(&super::text_at(r, &columns, Column::State)));
            let log = emu.requests();
            if ended && result_logged(&log, &account) {
                add(&mut load, &log, &account);
                break;
            }
            if ticked.elapsed() > deadline || daemon.is_finished() {
                daemon.stop("inputs bench").await?;
                bail!("press {} of {PANEL} did not end within {deadline:?}", i + 1);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    daemon.stop("inputs bench").await?;
    if emu
        .values(&crate::a1::range(QUEUE_SHEET, "A2:A"))
        .unwrap_or_default()
        .len()
        != PRESSES
    {
        bail!("the presses did not make one queue row each");
    }
    Ok(load)
}

/// Whether `log` holds a values write of `account`: the result.
fn result_logged(log: &[RequestRecord], account: &str) -> bool {
    log.iter()
        .any(|r| r.user == account && r.write && r.method.starts_with("spreadsheets.values."))
}

/// Adds one press's requests of `account` in `log` to `load`.
fn add(load: &mut PressLoad, log: &[RequestRecord], account: &str) {
    load.presses += 1;
    for r in log
        .iter()
        .filter(|r| r.user == account && r.method != "oauth2.token" && r.status != 429)
    {
        if r.write {
            load.writes += 1;
        } else {
            load.reads += 1;
        }
        if r.method == "spreadsheets.values.batchGetByDataFilter" {
            load.polls += 1;
            load.poll_bytes += r.bytes_out;
        }
        load.bytes_out += r.bytes_in;
        load.bytes_in += r.bytes_out;
    }
}

/// The bench table's row: per press, without and with inputs.
pub fn row(c: &InputsCost) -> (String, String) {
    (
        format!(
            "a press without / with 3 inputs ({PRESSES} each): reads, writes and KiB per press; bytes per poll reply"
        ),
        format!(
            "{:.1} / {:.1}, {:.1} / {:.1}, {:.1} / {:.1}; {:.0} / {:.0}",
            c.without.reads_per_press(),
            c.with.reads_per_press(),
            c.without.writes_per_press(),
            c.with.writes_per_press(),
            c.without.bytes_per_press() / 1024.0,
            c.with.bytes_per_press() / 1024.0,
            c.without.bytes_per_poll(),
            c.with.bytes_per_poll()
        ),
    )
}
