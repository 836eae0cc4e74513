//! `sheetq demo`: the whole flow on an embedded local spreadsheet, no Google account and no
//! config. It starts the emulator with the demo spreadsheet, presses functions on several
//! panels as different people (two on one target, one that fails), runs two daemons against
//! it, shows progress, and ends with a table of every job that makes the parallel and serial
//! behaviour visible. With `--spreadsheets 2`, a second spreadsheet (承認ボタン) gets presses
//! of its own, and each daemon serves both (`[[spreadsheets]]`), each spreadsheet's jobs
//! shown under its heading.
//!
//! The embedded spreadsheet enforces Google's quota (60 reads and 60 writes a minute per
//! user), so the demo runs as it would on Google: each daemon is its own service account
//! (as one key per machine), the progress display a third, and every client keeps the
//! default budget of 50 requests a minute, which fits one user's quota.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, NewJob};
use crate::config::Config;
use crate::emulator::{Emulator, EmulatorOptions};
use crate::queue::{ColumnMap, QueueRow, RowState, State, QUEUE_SHEET};
use crate::sheets::auth::Credentials;
use crate::sheets::Sheets;
use crate::{a1, queue, sheet_time};

/// Options of `sheetq demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Give up waiting for the jobs after this many seconds.
    #[arg(long, default_value_t = 50)]
    pub timeout_secs: u64,
    /// After the table, keep the embedded spreadsheet and both daemons running until Ctrl-C,
    /// so you can go on pressing ▶ boxes in its web view.
    #[arg(long)]
    pub keep: bool,
    /// 2: a second spreadsheet with presses of its own, both served by each daemon.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub spreadsheets: u8,
}

/// One finished job, as the closing table shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoRow {
    pub target: String,
    pub function: String,
    pub requester: String,
    pub worker: String,
    pub started: Option<DateTime<Utc>>,
    pub finished: Option<DateTime<Utc>>,
    pub state: String,
    pub message: String,
}

/// The presses of the demo.
const PRESSES: [Press; 5] = [
    (
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":2}"#,
        "alice@example.com",
    ),
    (
        "サーバーA",
        "再起動 (5秒)",
        "sleep",
        r#"{"seconds":5}"#,
        "bob@example.com",
    ),
    (
        "サーバーB",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":2}"#,
        "carol@example.com",
    ),
    ("サーバーC", "再起動 (5秒)", "sleep", r#"{"seconds":5}"#, ""),
    (
        "サーバーC",
        "未設定の機能",
        "broken",
        "{}",
        "dave@example.com",
    ),
];

/// The presses on the second spreadsheet of `--spreadsheets 2`: the same target as one of the
/// first's, which another spreadsheet's target does not hold up, twice, which it does.
const SECOND_PRESSES: [Press; 2] = [
    (
        "サーバーA",
        "動作確認 (2秒)",
        "sleep",
        r#"{"seconds":2}"#,
        "erin@example.com",
    ),
    (
        "サーバーA",
        "再起動 (5秒)",
        "sleep",
        r#"{"seconds":5}"#,
        "frank@example.com",
    ),
];

/// A press: (target, function, command, args, requester).
type Press = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// The title of the second spreadsheet of `--spreadsheets 2`.
const SECOND_TITLE: &str = "承認ボタン";

/// Runs the demo, writing progress and the final table to `out`.
pub async fn run(args: DemoArgs, out: &mut impl Write) -> anyhow::Result<Vec<DemoRow>> {
    if args.spreadsheets == 2 {
        return run_two(args, out).await;
    }
    let emulator = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let state_root = tempfile::tempdir().context("cannot create a temporary state directory")?;
    writeln!(
        out,
        "embedded spreadsheet {} at {}",
        emulator.spreadsheet_id(),
        emulator.base_url()
    )?;
    writeln!(
        out,
        "web view: open {} in a browser to watch the panels (--keep to go on pressing after the table)",
        emulator.base_url()
    )?;
    let config = |worker: &str| demo_config(&emulator, state_root.path(), worker);
    // The presses and the progress display use the emulator's own service account.
    let credentials = Credentials::KeyJson(emulator.credentials_json());
    let first = config("demo-1")?;
    let sheets = crate::setup::connect(&first, Some(credentials), false).await?;
    press_all(sheets.as_ref(), &first, &PRESSES, out).await?;
    let shutdown = CancellationToken::new();
    let mut daemons = Vec::new();
    for worker in ["demo-1", "demo-2"] {
        let config = config(worker)?;
        let registry = crate::setup::registry(&config)?;
        // Each daemon its own service account, so each has a user's quota to itself.
        let key = Credentials::KeyJson(emulator.credentials_json_for(worker));
        let sheets = crate::setup::connect(&config, Some(key), false).await?;
        daemons.push(tokio::spawn(crate::daemon::run(
            sheets,
            config,
            registry,
            shutdown.clone(),
        )));
    }
    writeln!(out, "started two daemons (demo-1, demo-2), 2 slots each")?;
    let finished = wait_done(
        sheets.as_ref(),
        &first,
        PRESSES.len(),
        args.timeout_secs,
        out,
    )
    .await;
    let (rows, tz) = match finished {
        Ok(done) => done,
        Err(e) => {
            shutdown.cancel();
            return Err(e);
        }
    };
    if !args.keep {
        shutdown.cancel();
    }
    let table: Vec<DemoRow> = rows.iter().map(|r| demo_row(r, &first)).collect();
    write_table(out, &table, tz)?;
    writeln!(
        out,
        "\nSame target (サーバーA, サーバーC): the second job starts after the first ends.\nDifferent targets: jobs overlap in time, on different workers/slots."
    )?;
    write_panels(out, sheets.as_ref(), &first, &PRESSES).await?;
    finish(out, &emulator, args.keep, &shutdown, daemons).await?;
    drop(emulator);
    Ok(table)
}

/// The demo on two spreadsheets: each daemon serves both, one slot pool and one budget each.
async fn run_two(args: DemoArgs, out: &mut impl Write) -> anyhow::Result<Vec<DemoRow>> {
    let emulator = Emulator::start(EmulatorOptions::default())
        .await
        .context("cannot start the embedded spreadsheet")?;
    let second = emulator.add_spreadsheet(crate::emulator::Seed::Demo);
    emulator.with_store(|store| {
        if let Some(ss) = store.spreadsheets.get_mut(&second) {
            ss.title = SECOND_TITLE.to_string();
        }
    });
    let state_root = tempfile::tempdir().context("cannot create a temporary state directory")?;
    writeln!(
        out,
        "embedded spreadsheets {} and {second} ({SECOND_TITLE}) at {}",
        emulator.spreadsheet_id(),
        emulator.base_url()
    )?;
    writeln!(
        out,
        "web view: open {} in a browser and pick a spreadsheet (--keep to go on pressing after the tables)",
        emulator.base_url()
    )?;
    let ids = [emulator.spreadsheet_id().to_string(), second];
    let labels = ["実行パネル", SECOND_TITLE];
    let presses: [&[Press]; 2] = [&PRESSES, &SECOND_PRESSES];
    // The presses and the progress display use the emulator's own service account.
    let mut shown = Vec::new();
    for (id, label) in ids.iter().zip(labels) {
        let mut config = demo_config(&emulator, state_root.path(), "demo-1")?;
        config.spreadsheet_id.clone_from(id);
        config.label = label.to_string();
        let key = Credentials::KeyJson(emulator.credentials_json());
        let sheets = crate::setup::connect(&config, Some(key), false).await?;
        shown.push((config, sheets));
    }
    for ((config, sheets), presses) in shown.iter().zip(presses) {
        writeln!(out, "== {}", config.label)?;
        press_all(sheets.as_ref(), config, presses, out).await?;
    }
    let shutdown = CancellationToken::new();
    let mut daemons = Vec::new();
    for worker in ["demo-1", "demo-2"] {
        let listed: Vec<(&str, &str)> = labels
            .iter()
            .zip(&ids)
            .map(|(l, id)| (*l, id.as_str()))
            .collect();
        let config = fleet_config(&emulator, state_root.path(), worker, &listed)?;
        let spreadsheets = crate::setup::spreadsheets(config.each_spreadsheet(), false).await?;
        daemons.push(tokio::spawn(crate::daemon::run_spreadsheets(
            spreadsheets,
            config.slots,
            shutdown.clone(),
            crate::daemon::Observers::default(),
        )));
    }
    writeln!(
        out,
        "started two daemons (demo-1, demo-2), 2 slots each, each serving both spreadsheets"
    )?;
    let mut tables = Vec::new();
    for ((config, sheets), presses) in shown.iter().zip(presses) {
        writeln!(out, "== {}", config.label)?;
        let finished = wait_done(
            sheets.as_ref(),
            config,
            presses.len(),
            args.timeout_secs,
            out,
        )
        .await;
        match finished {
            Ok(done) => tables.push(done),
            Err(e) => {
                shutdown.cancel();
                return Err(e);
            }
        }
    }
    if !args.keep {
        shutdown.cancel();
    }
    let mut all = Vec::new();
    for (((config, sheets), presses), (rows, tz)) in shown.iter().zip(presses).zip(tables) {
        writeln!(out, "\n== {}", config.label)?;
        let table: Vec<DemoRow> = rows.iter().map(|r| demo_row(r, config)).collect();
        write_table(out, &table, tz)?;
        write_panels(out, sheets.as_ref(), config, presses).await?;
        all.extend(table);
    }
    writeln!(
        out,
        "\nサーバーA of {SECOND_TITLE} is another target than サーバーA of 実行パネル: their jobs overlap; within one spreadsheet, one after the other."
    )?;
    finish(out, &emulator, args.keep, &shutdown, daemons).await?;
    drop(emulator);
    Ok(all)
}

/// The closing count of API requests; with `keep`, waits for Ctrl-C before cancelling
/// `shutdown`; then waits for the `daemons` to stop.
async fn finish(
    out: &mut impl Write,
    emulator: &Emulator,
    keep: bool,
    shutdown: &CancellationToken,
    daemons: Vec<
        tokio::task::JoinHandle<Result<crate::daemon::RunReport, crate::daemon::DaemonError>>,
    >,
) -> anyhow::Result<()> {
    let counters = emulator.counters();
    writeln!(
        out,
        "\n{} API requests, {} refused by Google's quota (60 reads and 60 writes a minute per service account)",
        counters.total - counters.by_method.get("oauth2.token").copied().unwrap_or(0),
        counters.quota_refused_total()
    )?;
    if keep {
        writeln!(
            out,
            "\nStill running: tick ▶ boxes at {} and watch the rows change. Ctrl-C stops.",
            emulator.base_url()
        )?;
        out.flush()?;
        tokio::signal::ctrl_c()
            .await
            .context("cannot wait for Ctrl-C")?;
        shutdown.cancel();
    }
    for d in daemons {
        d.await.context("a demo daemon panicked")??;
    }
    Ok(())
}

/// The config of demo daemon `worker` serving the spreadsheets `listed` (label, id) of
/// `emulator` as its own service account (its key written under `state_root`). Two
/// spreadsheets polled every 3 s, each with a heartbeat every 10 s, keep inside the default
/// budget of 50 requests a minute.
fn fleet_config(
    emulator: &Emulator,
    state_root: &std::path::Path,
    worker: &str,
    listed: &[(&str, &str)],
) -> anyhow::Result<Config> {
    let key = state_root.join(format!("{worker}-key.json"));
    write_key(&key, &emulator.credentials_json_for(worker))?;
    let head = format!(
        "credentials = \"{}\"\npoll_interval = \"3s\"",
        key.display()
    );
    let mut text = config_text(emulator, state_root, worker, &head);
    for (label, id) in listed {
        text.push_str(&format!(
            "[[spreadsheets]]\nlabel = \"{label}\"\nspreadsheet_id = \"{id}\"\n"
        ));
    }
    Ok(Config::parse(&text, "demo config", &BTreeMap::new())?)
}

/// Writes a service-account key where only this user may read it, as sheetq asks of one.
fn write_key(path: &std::path::Path, json: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot protect {}", path.display()))?;
    Ok(())
}

/// The config of demo daemon `worker` on `emulator`, its state under `state_root`.
fn demo_config(
    emulator: &Emulator,
    state_root: &std::path::Path,
    worker: &str,
) -> anyhow::Result<Config> {
    // Polls and heartbeats stay inside the default budget (50 requests a minute): 40 polls
    // and 6 heartbeats a minute leave room for claims and results.
    let head = format!(
        "spreadsheet_id = \"{}\"\npoll_interval = \"1500ms\"",
        emulator.spreadsheet_id()
    );
    let text = config_text(emulator, state_root, worker, &head);
    Ok(Config::parse(&text, "demo config", &BTreeMap::new())?)
}

/// What every demo daemon's config says, after `head` (which spreadsheets, as whom, how
/// often polled): its worker id and state under `state_root`, 2 slots, ticks taken in by
/// polling, and the `sleep` command.
fn config_text(
    emulator: &Emulator,
    state_root: &std::path::Path,
    worker: &str,
    head: &str,
) -> String {
    format!(
        r#"{head}
api_base_url = "{url}"
worker_id = "{worker}"
slots = 2
# Ticks in the web view are taken in by the daemons.
intake = "poll"
heartbeat_interval = "10s"
dead_after = "30s"
state_dir = "{state}"
[commands.sleep]
builtin = "sleep"
"#,
        url = emulator.base_url(),
        state = state_root.join(worker).display(),
    )
}

/// Presses every function of `presses`, saying so.
async fn press_all(
    sheets: &dyn Sheets,
    config: &Config,
    presses: &[Press],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    for &(target, function, command, args_json, requester) in presses {
        let job = NewJob::pressed(target, function, command, args_json, requester);
        admin::enqueue(sheets, config, &job).await?;
        let who = if requester.is_empty() {
            "(no requester)"
        } else {
            requester
        };
        writeln!(out, "pressed  {target} / {function}  by {who}")?;
    }
    Ok(())
}

/// Looks at the queue once a second, saying each change of its counts, until its `presses`
/// have ended (or `timeout_secs` passed): the rows then, and the spreadsheet's zone.
async fn wait_done(
    sheets: &dyn Sheets,
    config: &Config,
    presses: usize,
    timeout_secs: u64,
    out: &mut impl Write,
) -> anyhow::Result<(Vec<QueueRow>, Tz)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout_secs);
    let mut last = String::new();
    loop {
        let (rows, tz) = read_queue(sheets, config).await?;
        let count = |s: State| rows.iter().filter(|r| r.state.is(s)).count();
        let line = format!(
            "waiting {} · running {} · done {} · error {} · timeout {} · cancelled {}",
            count(State::Waiting),
            count(State::Running),
            count(State::Done),
            count(State::Error),
            count(State::Timeout),
            count(State::Cancelled)
        );
        if line != last {
            writeln!(out, "  {line}")?;
            last = line;
        }
        let open = count(State::Waiting) + count(State::Running);
        if open == 0 && rows.len() >= presses {
            return Ok((rows, tz));
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("the demo jobs did not finish within {timeout_secs}s");
        }
        // Two reads a look: a look a second stays under the display's budget.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A queue row as the demo's table shows it.
fn demo_row(r: &QueueRow, config: &Config) -> DemoRow {
    DemoRow {
        target: r.target.clone(),
        function: r.function.clone(),
        requester: r.requester.clone(),
        worker: r.worker.clone(),
        started: r.started_at,
        finished: r.finished_at,
        state: match &r.state {
            RowState::Known(s) => config.states.word(*s).to_string(),
            RowState::Unknown(t) => t.clone(),
        },
        message: r.message.clone(),
    }
}

async fn read_queue(sheets: &dyn Sheets, config: &Config) -> anyhow::Result<(Vec<QueueRow>, Tz)> {
    let meta = sheets.metadata().await?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let last = meta
        .sheet(QUEUE_SHEET)
        .map_or_else(|| "P".to_string(), |s| s.last_column());
    let values = sheets
        .read(&[
            a1::range(QUEUE_SHEET, "1:1"),
            a1::range(QUEUE_SHEET, &format!("A2:{last}")),
        ])
        .await?;
    let header = crate::sheets::first_row(&values);
    let columns = ColumnMap::from_header(&header, &config.headers)?;
    let data = values.get(1).map(|v| v.values.clone()).unwrap_or_default();
    Ok((
        queue::parse_rows(&data, 2, &columns, &config.states, tz).rows,
        tz,
    ))
}

/// What the people who pressed see: each panel's function rows with status and result.
async fn write_panels(
    out: &mut impl Write,
    sheets: &dyn Sheets,
    config: &Config,
    presses: &[Press],
) -> anyhow::Result<()> {
    let layout = &config.panel;
    let titles: Vec<&str> = presses
        .iter()
        .map(|p| p.0)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let ranges: Vec<String> = titles
        .iter()
        .map(|t| {
            a1::range(
                t,
                &format!("A{}:J{}", layout.first_row, layout.first_row + 3),
            )
        })
        .collect();
    let values = sheets.read(&ranges).await?;
    writeln!(out, "\nOn the panels:")?;
    for (title, v) in titles.iter().zip(&values) {
        let table = crate::panel::PanelTable::parse(v, layout);
        for row in table.rows.iter().filter(|r| !r.status.is_empty()) {
            writeln!(
                out,
                "  {}  {}  {}  {}",
                pad(title, 10),
                pad(&row.function, 20),
                pad(&row.status, 22),
                row.result
            )?;
        }
    }
    Ok(())
}

/// Terminal width of `s`: East Asian wide characters take two columns (`unicode-width`).
fn width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

fn pad(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(width(s))))
}

fn write_table(out: &mut impl Write, rows: &[DemoRow], tz: Tz) -> std::io::Result<()> {
    let time = |t: Option<DateTime<Utc>>| {
        t.map(|t| t.with_timezone(&tz).format("%H:%M:%S%.3f").to_string())
            .unwrap_or_default()
    };
    let header = [
        "target",
        "function",
        "requester",
        "worker",
        "開始",
        "終了",
        "状態",
        "メッセージ",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut msg: String = r.message.chars().take(60).collect();
            if r.message.chars().count() > 60 {
                msg.push('…');
            }
            vec![
                r.target.clone(),
                r.function.clone(),
                if r.requester.is_empty() {
                    "-".into()
                } else {
                    r.requester.clone()
                },
                r.worker.split(" #").next().unwrap_or("").to_string(),
                time(r.started),
                time(r.finished),
                r.state.clone(),
                msg,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| width(&c[i]))
                .chain([width(header[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    writeln!(out)?;
    let line = |cols: Vec<String>| {
        cols.iter()
            .zip(&widths)
            .map(|(c, w)| pad(c, *w))
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(
        out,
        "{}",
        line(header.iter().map(|h| h.to_string()).collect())
    )?;
    writeln!(
        out,
        "{}",
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  ")
    )?;
    for c in cells {
        writeln!(out, "{}", line(c))?;
    }
    Ok(())
}
