//! `sheetq check`: a deployment's problems, found in seconds and each named with its fix:
//! the credentials and the account they are, whether the spreadsheet is shared with it (and
//! writable), what only sheetq may write and whether it is protected so
//! ([`crate::protection`]), this machine's clock against Google's, the request budget against the live
//! daemons of the account, the state directory and its outbox, the programs of `exec`
//! commands on the `PATH` jobs run with, `exec` argv that puts a placeholder where the program
//! reads options (a warning: [`Registry::option_positions`]), and the spreadsheet's own
//! content ([`crate::admin::check`]). The daemon runs the checks that cost no request at start-up
//! ([`local_problems`]) and logs one line per problem.
//!
//! Read-only but for one request: whether the account may write is asked with a
//! compare-and-swap that cannot match anything (Google has no validate-only mode for
//! `spreadsheets.batchUpdate`, and the Drive permissions API needs a scope sheetq does not
//! ask for), so a viewer's 403 shows without changing a cell.

use std::path::Path;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use serde::Serialize;

use crate::a1;
use crate::commands::Registry;
use crate::config::Config;
use crate::lease::WORKER_SHEET;
use crate::sheets::{BatchUpdate, ErrorKind, GridRange, Request, Sheets, SheetsError};

/// What `check` found: facts to show, warnings, and problems (exit 3).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Findings {
    pub facts: Vec<String>,
    pub warnings: Vec<String>,
    pub problems: Vec<String>,
    /// What the spreadsheet's `_ワーカー` showed of the account, for [`accounts`].
    #[serde(skip)]
    pub seen: Option<Seen>,
}

/// The daemons other than this one that a spreadsheet's heartbeats show calling the API as
/// `account`: those whose own rows are live there (`direct`), and all the daemon would count,
/// with those their rows list (`others`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    pub account: String,
    pub direct: std::collections::BTreeSet<String>,
    pub others: std::collections::BTreeSet<String>,
}

impl Findings {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A clock this far from Google's is worth a warning: the times people read in the sheet
/// (開始日時, 終了日時) are off by as much.
pub const SKEW_WARNING: Duration = Duration::from_secs(5);
/// A clock this far off is a problem: `status` ages, timeouts as people see them and the
/// logs no longer match the sheet.
pub const SKEW_PROBLEM: Duration = Duration::from_secs(60);

/// Google's per-minute quota per account (service account), for reads and for writes each
/// (https://developers.google.com/sheets/api/limits).
pub const GOOGLE_PER_MINUTE: u32 = 60;

/// Every check of `sheetq check`.
pub async fn deployment(
    sheets: &dyn Sheets,
    config: &Config,
    registry: &Registry,
) -> Result<Findings, SheetsError> {
    let mut f = Findings::default();
    let account = sheets.account();
    let who = if account.is_empty() {
        "the credentials' account".to_string()
    } else {
        account.clone()
    };
    f.facts.push(format!(
        "credentials: {} ({})",
        crate::sheets::auth::Credentials::resolve(config.credentials.as_deref()),
        if account.is_empty() {
            "account not known until a token is obtained"
        } else {
            &account
        }
    ));
    let meta = match sheets.metadata().await {
        Ok(meta) => meta,
        Err(e) if e.kind == ErrorKind::Permission => {
            f.problems.push(format!(
                "spreadsheet {} is not shared with {who} (Google answered: {}); share it with that address as Editor",
                config.spreadsheet_id, e.message
            ));
            return Ok(f);
        }
        Err(e) if e.kind == ErrorKind::NotFound => {
            f.problems.push(format!(
                "spreadsheet {} does not exist: check spreadsheet_id (the long id in the spreadsheet's URL)",
                config.spreadsheet_id
            ));
            return Ok(f);
        }
        Err(e) => return Err(e),
    };
    f.facts.push(format!(
        "a token was obtained and spreadsheet {} read as {who}",
        config.spreadsheet_id
    ));
    if let Some(first) = meta.sheet(WORKER_SHEET).or(meta.sheets.first()) {
        match may_write(sheets, first.sheet_id).await {
            Ok(()) => f.facts.push(format!("{who} may write to the spreadsheet")),
            Err(e) if e.kind == ErrorKind::Permission => f.problems.push(format!(
                "spreadsheet {} is shared with {who} read-only (Google answered: {}); make that address an Editor",
                config.spreadsheet_id, e.message
            )),
            Err(e) => return Err(e),
        }
    }
    clock(sheets.clock_skew(), &mut f);
    // One read for everything below: the queue, the lease cell, the panels and the index
    // (`admin::check`), the worker sheet and the panels' markers (`protection`).
    let queue_ranges = crate::admin::check_ranges(&meta, config);
    let has_workers = meta.sheet(WORKER_SHEET).is_some();
    let mut ranges = queue_ranges.clone().unwrap_or_default();
    let ours = ranges.len();
    if has_workers {
        ranges.push(a1::range(
            WORKER_SHEET,
            &format!("A1:{}", crate::workers::LAST_COLUMN),
        ));
        ranges.extend(crate::panel::marker_ranges(&meta, &config.panel));
    }
    let mut values = if ranges.is_empty() {
        Vec::new()
    } else {
        sheets.read(&ranges).await?
    };
    let mut workers_and_markers = values.split_off(ours.min(values.len()));
    match queue_ranges {
        Err(missing) => f.problems.extend(missing),
        Ok(_) => f
            .problems
            .extend(crate::admin::check(&meta, config, registry, values)),
    }
    if has_workers {
        let markers = workers_and_markers.split_off(1.min(workers_and_markers.len()));
        let panels = crate::panel::PanelIndex::build(&meta, &markers, &config.panel);
        let tz = crate::sheet_time::parse_zone(&meta.time_zone).unwrap_or(chrono_tz::UTC);
        let rows = workers_and_markers
            .first()
            .map(|v| v.values.clone())
            .unwrap_or_default();
        let heartbeats = crate::workers::parse(&rows, tz);
        let google_now = Utc::now() + sheets.clock_skew().unwrap_or_default();
        let live: Vec<(String, String)> = heartbeats
            .iter()
            .filter(|h| !h.stopped && h.worker_id != config.worker_id)
            .filter(|h| {
                h.seen.is_some_and(|seen| {
                    (google_now - seen).to_std().unwrap_or_default() <= config.dead_after
                })
            })
            .map(|h| (h.worker_id.clone(), h.account.clone()))
            .collect();
        protection(sheets, &meta, config, &account, &live, &panels, &mut f).await?;
        let seen = seen_on_account(&heartbeats, account, config, google_now);
        let daemons = u32::try_from(seen.others.len())
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        budget(config, &seen.account, daemons, &mut f);
        f.seen = Some(seen);
    }
    if !config.protect {
        f.warnings.push(OPEN_QUEUE.to_string());
    }
    allow(config, &mut f);
    approvers(config, &mut f);
    state_dir(&config.state_dir, &mut f);
    f.problems.extend(local_problems(config, registry));
    // Warnings, not problems (exit 3): a value that would be an option there is refused
    // before the job runs, so the deployment is safe, only fragile: such a value ends エラー
    // where a safely written argv would have run it as data.
    f.warnings.extend(registry.option_positions());
    f.warnings.extend(registry.unmasked_env());
    Ok(f)
}

/// What sheetq protects ([`crate::protection`]): each area unprotected or protected wrongly,
/// and each live daemon whose account may not write it, as problems with their fixes;
/// nothing with `protect = false`. `live` are the other daemons seen alive (worker id,
/// account); `panels` the panels as their markers were read.
async fn protection(
    sheets: &dyn Sheets,
    meta: &crate::sheets::SpreadsheetMeta,
    config: &Config,
    account: &str,
    live: &[(String, String)],
    panels: &crate::panel::PanelIndex,
    f: &mut Findings,
) -> Result<(), SheetsError> {
    let editors =
        match crate::protection::Editors::of(config.protect, &config.protect_editors, account) {
            Ok(Some(editors)) => editors,
            // `deployment` warns of the open queue.
            Ok(None) => return Ok(()),
            Err(why) => {
                f.problems.push(why);
                return Ok(());
            }
        };
    if meta.sheet(crate::joblog::LOG_SHEET).is_none() && config.log_chars > 0 {
        f.warnings.push(format!(
            "no sheet '{}': jobs' output is kept under state_dir only and 結果 links nowhere; `sheetq init` makes it",
            crate::joblog::LOG_SHEET
        ));
    }
    let hidden: Vec<(i32, &str)> = [
        crate::queue::QUEUE_SHEET,
        WORKER_SHEET,
        crate::archive::ARCHIVE_SHEET,
        crate::joblog::LOG_SHEET,
    ]
    .into_iter()
    .filter_map(|t| meta.sheet(t).map(|s| (s.sheet_id, t)))
    .collect();
    let mut wanted = crate::protection::hidden_sheets(&hidden);
    let panel_sheets: Vec<(i32, String)> = panels
        .panels()
        .iter()
        .map(|p| (p.sheet_id, p.title.clone()))
        .collect();
    wanted.extend(crate::panel::protected::panels_and_index(
        &panel_sheets,
        panels.index_sheet.as_ref(),
        &config.panel,
    ));
    let labelled: Vec<(i32, String, String)> = panels
        .panels()
        .iter()
        .map(|p| (p.sheet_id, p.title.clone(), p.label.clone()))
        .collect();
    wanted.extend(crate::panel::guard::wanted_on(
        &labelled,
        &config.panel,
        &config.catalog,
    ));
    f.problems
        .extend(crate::protection::verdicts(meta, &wanted, &editors, live));
    f.problems.extend(barred_by_others(meta, &hidden, account));
    let mut ours: Vec<(i32, &str)> = hidden.clone();
    ours.extend(panel_sheets.iter().map(|(id, t)| (*id, t.as_str())));
    if let Some(index) = panels.index_sheet.as_ref() {
        ours.push((index.0, index.1.as_str()));
    }
    let ids = ours.iter().map(|(id, _)| *id).collect();
    match sheets
        .search_metadata(&crate::sheets::MetadataLookup::OnSheets(ids))
        .await
    {
        Ok(entries) => {
            bindings(&entries, f);
            let (on_hidden, on_panels) = foreign_metadata(&entries, &ours, &hidden);
            f.problems.extend(on_hidden);
            f.warnings.extend(on_panels);
        }
        // A sheet gone since the read, say: the other findings stand.
        Err(e) => f.warnings.push(format!(
            "could not list the developer metadata on sheetq's sheets ({e}); run `sheetq check` again"
        )),
    }
    Ok(())
}

/// What the row bindings use of Google's developer metadata storage: a fact, and a warning
/// past four fifths of it (a binding outlives its job only until its row is archived or
/// deleted, so a full storage means rows that never leave the queue).
fn bindings(entries: &[crate::sheets::MetadataEntry], f: &mut Findings) {
    let mine: Vec<&crate::sheets::MetadataEntry> = entries
        .iter()
        .filter(|m| !m.project_only && m.key == crate::binding::KEY)
        .collect();
    let chars: usize = mine
        .iter()
        .map(|m| m.key.chars().count() + m.value.chars().count())
        .sum();
    let limit = crate::binding::STORAGE_LIMIT_CHARS;
    f.facts.push(format!(
        "row bindings: {} ({chars} of the {limit} characters of developer metadata Google keeps per spreadsheet)",
        mine.len()
    ));
    if chars * 5 > limit * 4 {
        f.warnings.push(format!(
            "the row bindings use {chars} of the {limit} characters of developer metadata Google keeps: finished rows leave the queue (and their bindings with them) only with `retention`; set it, or lower it"
        ));
    }
}

/// Developer metadata on sheetq's sheets (`ours`: the hidden ones and the panels and index)
/// that sheetq did not write: as problems on its own sheets (`hidden`), where only sheetq
/// and the people `protect_editors` names may edit, and as warnings on the panels and the
/// index, which people may edit. sheetq writes two shapes only:
/// - row bindings (`binding::KEY`, `DOCUMENT`, on a row of the queue or the archive);
/// - its marks (`PROJECT`, keys `sheetq.*`). A `PROJECT` entry is seen only by the project
///   that made it (`provenance`), so one with another key was written by another program of
///   sheetq's own Cloud project.
///
/// Another project's `PROJECT` entries are invisible to sheetq and cannot be named; they are
/// also never read or trusted by it.
fn foreign_metadata(
    entries: &[crate::sheets::MetadataEntry],
    ours: &[(i32, &str)],
    hidden: &[(i32, &str)],
) -> (Vec<String>, Vec<String>) {
    let bindings_on: Vec<i32> = hidden
        .iter()
        .filter(|(_, t)| [crate::queue::QUEUE_SHEET, crate::archive::ARCHIVE_SHEET].contains(t))
        .map(|(id, _)| *id)
        .collect();
    let (mut problems, mut warnings) = (Vec::new(), Vec::new());
    for m in entries {
        let binding = !m.project_only
            && m.key == crate::binding::KEY
            && m.row.is_some()
            && m.sheet_id.is_some_and(|s| bindings_on.contains(&s));
        let mark = m.project_only && m.key.starts_with("sheetq.");
        if binding || mark {
            continue;
        }
        let Some((sheet_id, title)) = m
            .sheet_id
            .and_then(|s| ours.iter().find(|(id, _)| *id == s))
        else {
            continue;
        };
        let title = crate::sheet_text::shown(title);
        let place = match m.row {
            Some(r) => format!("{title} row {}", r + 1),
            None => title,
        };
        let written_by = if m.project_only {
            "another program of sheetq's own Cloud project (PROJECT visibility)"
        } else {
            "someone who may edit that sheet (DOCUMENT visibility)"
        };
        let line = format!(
            "developer metadata sheetq did not write is on {place}: key \"{}\" (id {}), by {written_by}; sheetq neither reads nor trusts it, but if nobody you know made it, find who may edit there and delete it (developerMetadata.search on the sheet, then deleteDeveloperMetadata by id)",
            crate::sheet_text::visible(&m.key, crate::sheet_text::LINE_CHARS),
            m.id,
        );
        if hidden.iter().any(|(id, _)| id == sheet_id) {
            problems.push(line);
        } else {
            warnings.push(line);
        }
    }
    (at_most(problems), at_most(warnings))
}

/// How many lines of one kind `check` prints of the entries it names.
const NAMED_AT_MOST: usize = 20;

/// The first [`NAMED_AT_MOST`] `lines`, and one saying how many more there are.
fn at_most(mut lines: Vec<String>) -> Vec<String> {
    if lines.len() > NAMED_AT_MOST {
        let more = lines.len() - NAMED_AT_MOST;
        lines.truncate(NAMED_AT_MOST);
        lines.push(format!(
            "…and {more} more such entries (developerMetadata.search on the sheet lists them all)"
        ));
    }
    lines
}

/// Protected ranges someone else made over cells sheetq writes, which its account may not
/// edit: on a panel or the index they cost those cells (left out of sheetq's writes), on
/// sheetq's own sheets (`hidden`) they hold the whole spreadsheet off (docs/design.md §1.5).
fn barred_by_others(
    meta: &crate::sheets::SpreadsheetMeta,
    hidden: &[(i32, &str)],
    account: &str,
) -> Vec<String> {
    crate::protection::barred(meta, &[])
        .into_iter()
        .map(|b| {
            let own = hidden.iter().any(|(id, _)| *id == b.area.sheet_id);
            let cost = if own {
                "sheetq cannot claim or write results on this spreadsheet while it stands: the daemon holds it off and tries again with backoff"
            } else {
                "sheetq leaves those cells out of its writes (状態/結果/更新日時 or 状況 there go stale, ticks there are not taken in); jobs still run and their results reach the queue"
            };
            format!(
                "{b} is protected by someone else and {account} may not edit it: {cost}; remove that protection (Data → Protect sheets and ranges), or add {account} to its editors"
            )
        })
        .collect()
}

/// What `check` and the daemon say, every time, of a config with `protect = false`.
pub const OPEN_QUEUE: &str = "protect = false: the hidden sheets and the panels' markers and hidden columns are open, so anyone who may edit the spreadsheet may write queue rows with any command, args or 依頼者; remove the line (protect = true is the default), then run `sheetq init --config FILE` and `sheetq panels sync --config FILE`";

/// A compare-and-swap on A1 of sheet `sheet_id` for a text no cell holds: it changes
/// nothing, and Google refuses it with 403 when the account may only read.
async fn may_write(sheets: &dyn Sheets, sheet_id: i32) -> Result<(), SheetsError> {
    sheets
        .batch_update(&BatchUpdate {
            requests: vec![Request::CompareAndSwap {
                range: GridRange::cell(sheet_id, 0, 0),
                find: format!("sheetq check {}", uuid::Uuid::new_v4()),
                replacement: String::new(),
            }],
            ..Default::default()
        })
        .await
        .map(drop)
}

/// This machine's clock against Google's (the `Date` of its last reply).
fn clock(skew: Option<TimeDelta>, f: &mut Findings) {
    let Some(skew) = skew else {
        return;
    };
    let secs = skew.num_milliseconds() as f64 / 1000.0;
    let off = skew.abs().to_std().unwrap_or_default();
    let line = format!(
        "this machine's clock is {:.0} s {} Google's",
        secs.abs(),
        if secs > 0.0 { "behind" } else { "ahead of" }
    );
    let fix = "keep it synchronised (chrony or systemd-timesyncd; on Google Cloud the metadata server's NTP): the times sheetq writes for people are off by as much";
    if off > SKEW_PROBLEM {
        f.problems.push(format!("{line}; {fix}"));
    } else if off > SKEW_WARNING {
        f.warnings.push(format!("{line}; {fix}"));
    } else {
        f.facts
            .push(format!("{line} (within {} s)", SKEW_WARNING.as_secs()));
    }
}

/// The daemons other than this config's that call the API as `account`: those live in
/// `_ワーカー`, and those their heartbeats list, as the daemon counts them
/// ([`crate::workers::live_on_account`], [`crate::workers::gone_on_account`]). `check`
/// watches nothing, so it takes each row's standing still from its own time, against
/// Google's clock: for a report, never for a decision of the daemon.
fn seen_on_account(
    heartbeats: &[crate::workers::Heartbeat],
    account: String,
    config: &Config,
    google_now: chrono::DateTime<Utc>,
) -> Seen {
    use crate::workers;
    let heartbeats: Vec<workers::Heartbeat> = heartbeats
        .iter()
        .cloned()
        .map(|mut h| {
            // A row written "after" Google's now (a fast clock) has not stood still at all.
            h.quiet = h.seen.map_or(Duration::MAX, |seen| {
                (google_now - seen).to_std().unwrap_or_default()
            });
            h
        })
        .collect();
    let me = config.worker_id.as_str();
    let live: Vec<&workers::Heartbeat> =
        workers::live_on_account(&heartbeats, me, &account, config.dead_after).collect();
    let lately = workers::hearsay_lasts(config.dead_after, config.heartbeat_interval);
    let gone =
        workers::gone_on_account(&heartbeats, me, &account, config.dead_after, lately).collect();
    let heard = live
        .iter()
        .map(|h| (h.worker_id.as_str(), h.sharers.as_slice()));
    let others = workers::sharers_known(me, heard, &gone)
        .into_iter()
        .map(|s| s.worker_id)
        .collect();
    Seen {
        direct: live.iter().map(|h| h.worker_id.clone()).collect(),
        others,
        account,
    }
}

/// The budget of each service account across the spreadsheets of a config that serves
/// several (`[[spreadsheets]]`), from what [`deployment`] saw on each (`None`: its heartbeats
/// could not be read). One process serves them all on one budget per account, split with
/// every other live daemon of the account on any of them (docs/design.md §6): what counts is
/// what all of them together want of it, which no one spreadsheet's check can tell.
pub fn accounts(spreadsheets: &[Checked<'_>]) -> Findings {
    let mut f = Findings::default();
    let mut groups: Vec<(&str, Vec<Checked<'_>>)> = Vec::new();
    for &(config, seen) in spreadsheets {
        let account = seen.map_or("", |s| s.account.as_str());
        match groups.iter_mut().find(|(a, _)| *a == account) {
            Some((_, members)) => members.push((config, seen)),
            None => groups.push((account, vec![(config, seen)])),
        }
    }
    for (account, members) in groups {
        account_budget(account, &members, &mut f);
    }
    f
}

/// A spreadsheet's config, with what its check saw of the account.
pub type Checked<'a> = (&'a Config, Option<&'a Seen>);

/// [`accounts`] for the spreadsheets served as one account.
fn account_budget(account: &str, members: &[Checked<'_>], f: &mut Findings) {
    let Some(&(config, _)) = members.first() else {
        return;
    };
    let account = if account.is_empty() {
        "an account not known (its heartbeats were not read)"
    } else {
        account
    };
    let n = members.len();
    let labels: Vec<&str> = members.iter().map(|(c, _)| c.label.as_str()).collect();
    let others: std::collections::BTreeSet<&String> = members
        .iter()
        .filter_map(|(_, s)| *s)
        .flat_map(|s| &s.others)
        .collect();
    // Each other daemon seen writes a heartbeat on every one of our spreadsheets it serves
    // (those only heard of write theirs elsewhere).
    let their_rows: usize = members
        .iter()
        .filter_map(|(_, s)| *s)
        .map(|s| s.direct.len())
        .sum();
    let rpm = config.requests_per_minute;
    let daemons = u32::try_from(others.len())
        .unwrap_or(u32::MAX)
        .saturating_add(1);
    let share = rpm / daemons;
    f.facts.push(format!(
        "{account}: this daemon serves {n} spreadsheet(s) ({}) on one budget, requests_per_minute = {rpm}, shared with {} other live daemon(s) seen on them or listed by those: {share} reads and {share} writes a minute for all {n}",
        labels.join(", "),
        others.len()
    ));
    let per_minute = |every: Duration| 60.0 / every.as_secs_f64().max(0.001);
    let n_f = n as f64;
    let busy = n_f * per_minute(config.poll_interval);
    let quiet = n_f * per_minute(config.idle_poll_interval);
    if quiet > f64::from(share) {
        f.problems.push(format!(
            "even when quiet, the {n} spreadsheets on {account} are polled {quiet:.0} times a minute (idle_poll_interval = {:?}), more than this daemon's {share} reads a minute: every press waits for the budget; raise idle_poll_interval, or give some of them a key of another service account (`credentials` in their entries)",
            config.idle_poll_interval
        ));
    } else if busy > f64::from(share) {
        f.warnings.push(format!(
            "when all {n} spreadsheets on {account} have work, their polls want {busy:.0} reads a minute, more than this daemon's {share}: the polls then come further apart, evenly (each about every {:.1} s), and the daemon says so; quiet ones are polled less (idle_poll_interval = {:?})",
            n_f * 60.0 / f64::from(share.max(1)),
            config.idle_poll_interval
        ));
    }
    let heartbeats = (n + their_rows) as f64 * per_minute(config.heartbeat_interval);
    if heartbeats >= f64::from(rpm) {
        f.problems.push(format!(
            "the heartbeats on {account}'s spreadsheets ({} rows, each written every {:?}) take {heartbeats:.0} writes a minute, leaving nothing of requests_per_minute = {rpm} for claims and results; raise heartbeat_interval, or give some spreadsheets a key of another service account",
            n + their_rows,
            config.heartbeat_interval
        ));
    }
}

/// The account's request budget against what its live daemons need.
fn budget(config: &Config, account: &str, daemons: u32, f: &mut Findings) {
    let rpm = config.requests_per_minute;
    let account = if account.is_empty() {
        "this account"
    } else {
        account
    };
    f.facts.push(format!(
        "{daemons} daemon(s) on {account} with this one share requests_per_minute = {rpm}: {} reads and {} writes a minute each",
        rpm / daemons.max(1),
        rpm / daemons.max(1)
    ));
    f.problems.extend(over_google_quota(config));
    let per_minute = |every: Duration| 60.0 / every.as_secs_f64().max(0.001);
    let polls = per_minute(config.poll_interval);
    if polls > f64::from(rpm) {
        f.problems.push(format!(
            "polling every {:?} takes {polls:.0} reads a minute (the daemons take turns), more than requests_per_minute = {rpm}: polls will wait for the budget; raise poll_interval to at least {:.1} s",
            config.poll_interval,
            60.0 / f64::from(rpm.max(1))
        ));
    }
    let heartbeats = per_minute(config.heartbeat_interval) * f64::from(daemons);
    if heartbeats >= f64::from(rpm) {
        f.problems.push(format!(
            "the {daemons} live daemons on {account} write their heartbeats every {:?}: {heartbeats:.0} writes a minute, leaving nothing of requests_per_minute = {rpm} for claims and results; run fewer daemons on this account, give some another service account, or raise heartbeat_interval",
            config.heartbeat_interval
        ));
    }
}

/// A budget above Google's own quota.
fn over_google_quota(config: &Config) -> Option<String> {
    let rpm = config.requests_per_minute;
    (rpm > GOOGLE_PER_MINUTE).then(|| format!(
        "requests_per_minute = {rpm} is more than Google's {GOOGLE_PER_MINUTE} reads and {GOOGLE_PER_MINUTE} writes a minute per service account: the daemons will meet 429s; set it to {GOOGLE_PER_MINUTE} or less (default 50)"
    ))
}

/// The state directory: writable, and what its outbox still holds.
fn state_dir(dir: &Path, f: &mut Findings) {
    if let Some(why) = crate::privacy::open_to_others(dir) {
        f.warnings.push(why);
    }
    let pending = crate::outbox::read_pending(dir).len();
    if pending > 0 {
        f.warnings.push(format!(
            "{pending} finished result(s) wait in the outbox of {}: the daemon writes them when it starts (keep state_dir; deleting it loses them)",
            dir.display()
        ));
    }
    let unplaceable = crate::outbox::read_unplaceable(dir).len();
    if unplaceable > 0 {
        f.warnings.push(format!(
            "{unplaceable} result(s) whose queue row was deleted are kept in {}; `sheetq status` lists them",
            dir.join(crate::outbox::UNPLACEABLE_FILE).display()
        ));
    }
}

/// `allow` (who may press) against what makes 依頼者 trustworthy: a daemon with `allow` and
/// `protect = false` does not start. (Under the poll intake a press counts from a ▶ cell
/// guarded for the allowed people; the protection checks name every cell that is not.)
fn allow(config: &Config, f: &mut Findings) {
    let limited: Vec<&str> = config
        .catalog
        .functions
        .iter()
        .filter(|fun| fun.allow.is_some())
        .map(|fun| fun.label.as_str())
        .collect();
    if limited.is_empty() {
        return;
    }
    if !config.protect {
        f.problems.push(format!(
            "[[functions]] {limited:?} have allow, but protect = false leaves the queue open, where anyone may write any 依頼者: the daemon will not start unless the queue is protected all the same, and sheetq will not protect it; \
             remove protect = false and run `sheetq init`, or remove allow"
        ));
    }
}

/// `approvers` against what makes approvals trustworthy (docs/design.md §5.5): a daemon with
/// `approvers` and `protect = false` does not start. (Under the poll intake an approval
/// counts from the approver's own guarded 承認 cell, as the protection checks see.)
fn approvers(config: &Config, f: &mut Findings) {
    let gated: Vec<&str> = config
        .catalog
        .functions
        .iter()
        .filter(|fun| fun.approvers.is_some())
        .map(|fun| fun.label.as_str())
        .collect();
    if gated.is_empty() {
        return;
    }
    if !config.protect {
        f.problems.push(format!(
            "[[functions]] {gated:?} have approvers, but protect = false leaves the queue open, where anyone may write an approval: the daemon will not start unless the queue is protected all the same; \
             remove protect = false and run `sheetq init`, or remove approvers"
        ));
    }
}

/// The checks that cost no request: the programs of `exec` commands on the `PATH` their
/// jobs run with, their working directories, the state directory being writable, and a
/// budget above Google's quota. The daemon logs each at start-up.
pub fn local_problems(config: &Config, registry: &Registry) -> Vec<String> {
    let mut problems = registry.host_problems();
    problems.extend(over_google_quota(config));
    if let Err(why) = writable_dir(&config.state_dir) {
        problems.push(format!(
            "state_dir {} {why}; the outbox of finished results lives there (set state_dir, or under systemd StateDirectory=)",
            config.state_dir.display()
        ));
    }
    problems
}

/// Whether files can be created in `dir` (or in the nearest existing parent, where the
/// daemon will create it).
fn writable_dir(dir: &Path) -> Result<(), String> {
    let existing = dir
        .ancestors()
        .find(|d| d.as_os_str().is_empty() || d.exists())
        .unwrap_or(dir);
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    if !existing.is_dir() {
        return Err(format!(
            "is not a directory ({} is a file)",
            existing.display()
        ));
    }
    let probe = existing.join(format!(".sheetq-check-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot be written by this user ({}: {e})",
            existing.display()
        )),
    }
}

/// Logs, at start-up, every problem [`local_problems`] finds, the clock's skew past
/// [`SKEW_WARNING`] and an open queue (`protect = false`), one line each.
pub fn log_at_start(config: &Config, registry: &Registry, sheets: &dyn Sheets) {
    for problem in local_problems(config, registry) {
        tracing::warn!(problem = %problem, "sheetq check: {problem}");
    }
    let mut f = Findings::default();
    clock(sheets.clock_skew(), &mut f);
    if !config.protect {
        f.warnings.push(OPEN_QUEUE.to_string());
    }
    f.warnings.extend(registry.unmasked_env());
    if let Some(why) = crate::privacy::open_to_others(&config.state_dir) {
        f.warnings.push(why);
    }
    for line in f.problems.iter().chain(&f.warnings) {
        tracing::warn!(problem = %line, "sheetq check: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_metadata_sheetq_does_not_write_is_named_problem_on_its_sheets_warning_on_panels() {
        use crate::sheets::MetadataEntry;
        let entry = |id, key: &str, sheet, row, project_only| MetadataEntry {
            id,
            key: key.to_string(),
            value: String::new(),
            sheet_id: Some(sheet),
            row,
            project_only,
        };
        let hidden = [(10, crate::queue::QUEUE_SHEET), (11, WORKER_SHEET)];
        let mut ours = hidden.to_vec();
        ours.push((20, "サーバーA"));
        let entries = [
            entry(1, crate::binding::KEY, 10, Some(4), false),
            entry(2, crate::lease::FENCE_KEY, 10, None, true),
            entry(3, crate::binding::KEY, 11, Some(1), false),
            entry(4, crate::lease::FENCE_KEY, 10, None, false),
            entry(5, "note", 20, None, false),
            entry(6, "other.tool", 10, None, true),
        ];
        let (problems, warnings) = foreign_metadata(&entries, &ours, &hidden);
        let ids = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .filter_map(|l| l.split("(id ").nth(1))
                .filter_map(|l| l.split(')').next())
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            ids(&problems),
            ["3", "4", "6"],
            "a binding off the queue, a mark anyone could have written and another program's mark are named: {problems:?}"
        );
        assert_eq!(
            ids(&warnings),
            ["5"],
            "a panel's entry is a warning: {warnings:?}"
        );
        assert!(
            problems[2].contains("sheetq's own Cloud project"),
            "{problems:?}"
        );
    }

    /// The configs of `n` spreadsheets served by one process, with `settings` at the top.
    fn fleet(n: usize, settings: &str) -> Vec<Config> {
        let mut text = format!("worker_id = \"vm-1\"\n{settings}\n");
        for i in 0..n {
            text.push_str(&format!(
                "[[spreadsheets]]\nlabel = \"s{i}\"\nspreadsheet_id = \"id{i}\"\n"
            ));
        }
        Config::parse(&text, "test config", &Default::default())
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
            .each_spreadsheet()
    }

    fn seen(account: &str, others: &[&str]) -> Seen {
        Seen {
            account: account.into(),
            direct: others.iter().map(|s| s.to_string()).collect(),
            others: others.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn one_account_counts_every_daemon_seen_on_any_of_its_spreadsheets_once() {
        let configs = fleet(3, "requests_per_minute = 50");
        let saw = [
            seen("ops@p", &["vm-2"]),
            seen("ops@p", &["vm-2"]),
            seen("ops@p", &[]),
        ];
        let each: Vec<_> = configs.iter().zip(saw.iter().map(Some)).collect();
        let f = accounts(&each);
        assert_eq!(f.facts.len(), 1, "{f:?}");
        assert!(
            f.facts[0].contains("serves 3 spreadsheet(s) (s0, s1, s2)")
                && f.facts[0].contains("1 other live daemon(s)")
                && f.facts[0].contains("25 reads and 25 writes a minute for all 3"),
            "{}",
            f.facts[0]
        );
        // Busy, three spreadsheets at poll_interval = 2 s want 90 reads a minute: they slow.
        assert_eq!(f.warnings.len(), 1, "{f:?}");
        assert!(
            f.warnings[0].contains("90 reads a minute"),
            "{}",
            f.warnings[0]
        );
        assert!(f.ok(), "slowing down evenly is no problem: {f:?}");
    }

    #[test]
    fn quiet_polls_or_heartbeats_beyond_the_accounts_budget_are_problems_named_with_a_fix() {
        let configs = fleet(
            10,
            "idle_poll_interval = \"5s\"\nheartbeat_interval = \"10s\"",
        );
        let saw = vec![seen("ops@p", &[]); 10];
        let each: Vec<_> = configs.iter().zip(saw.iter().map(Some)).collect();
        let f = accounts(&each);
        assert!(
            f.problems.iter().any(|p| p.contains("120 times a minute")
                && p.contains("raise idle_poll_interval")),
            "{f:?}"
        );
        let configs = fleet(10, "heartbeat_interval = \"10s\"");
        let each: Vec<_> = configs.iter().zip(saw.iter().map(Some)).collect();
        let f = accounts(&each);
        assert!(
            f.problems
                .iter()
                .any(|p| p.contains("60 writes a minute") && p.contains("raise heartbeat_interval")),
            "ten heartbeats every 10 s are the whole budget of 50: {f:?}"
        );
    }

    #[test]
    fn daemons_only_heard_of_share_the_budget_but_write_no_heartbeat_here() {
        let configs = fleet(2, "heartbeat_interval = \"10s\"");
        let heard: Vec<String> = (1..=8).map(|i| format!("far-{i}")).collect();
        let one = Seen {
            account: "ops@p".into(),
            direct: ["p2".to_string()].into(),
            others: heard.iter().cloned().chain(["p2".to_string()]).collect(),
        };
        let each: Vec<_> = configs.iter().map(|c| (c, Some(&one))).collect();
        let f = accounts(&each);
        assert!(f.facts[0].contains("shared with 9 other"), "{}", f.facts[0]);
        assert!(
            !f.problems.iter().any(|p| p.contains("heartbeats")),
            "four heartbeat rows every 10 s are 24 writes a minute: {f:?}"
        );
    }

    /// A heartbeat row of `worker` on ops@p, written `ago` seconds before Google's `now`.
    fn row(worker: &str, ago: i64, now: chrono::DateTime<Utc>) -> crate::workers::Heartbeat {
        crate::workers::Heartbeat {
            row: 3,
            worker_id: worker.into(),
            host: String::new(),
            seen: Some(now - TimeDelta::seconds(ago)),
            quiet: Duration::ZERO,
            changed: false,
            fingerprint: String::new(),
            process: String::new(),
            jobs: Vec::new(),
            account: "ops@p".into(),
            sharers: Vec::new(),
            stopped: false,
            stops: String::new(),
        }
    }

    #[test]
    fn check_counts_the_daemons_of_the_account_as_the_daemon_does() {
        // dead_after = 60 s and heartbeat_interval = 5 s: word of a daemon outlasts its own
        // row by 60 + 9 × 5 = 105 s at most.
        let config = &fleet(1, "dead_after = \"60s\"\nheartbeat_interval = \"5s\"")[0];
        let now = Utc::now();
        let mut p2 = row("p2", 3, now);
        p2.sharers = ["x", "y"]
            .map(|w| crate::workers::Sharer {
                worker_id: w.into(),
                hops: 1,
                via: String::new(),
            })
            .to_vec();
        let mut x = row("x", 30, now);
        x.stopped = true;
        let beats = [
            p2,
            x,
            row("y", 400, now),
            row("z", 61, now),
            row("vm-1", 1, now),
        ];
        let seen = seen_on_account(&beats, "ops@p".into(), config, now);
        assert_eq!(
            seen.direct,
            ["p2".to_string()].into(),
            "z's row is older than dead_after, and vm-1 is this daemon"
        );
        assert_eq!(
            seen.others,
            ["p2".to_string(), "y".to_string()].into(),
            "x stopped 30 s ago outweighs p2's word of it; y's row stood still 400 s ago, so \
             p2's word of y (serving elsewhere) counts"
        );
    }

    #[test]
    fn each_account_is_judged_on_its_own_spreadsheets() {
        let configs = fleet(4, "");
        let saw = [
            seen("ops@p", &[]),
            seen("approvals@p", &["vm-9"]),
            seen("ops@p", &[]),
            seen("approvals@p", &[]),
        ];
        let each: Vec<_> = configs.iter().zip(saw.iter().map(Some)).collect();
        let f = accounts(&each);
        assert_eq!(f.facts.len(), 2, "{f:?}");
        assert!(
            f.facts[0].starts_with("ops@p: this daemon serves 2 spreadsheet(s) (s0, s2)"),
            "{}",
            f.facts[0]
        );
        assert!(
            f.facts[1].starts_with("approvals@p: this daemon serves 2 spreadsheet(s) (s1, s3)")
                && f.facts[1].contains("25 reads"),
            "{}",
            f.facts[1]
        );
    }
}
