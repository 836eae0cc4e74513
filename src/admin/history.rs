//! A job's history from the shell: `sheetq jobs` (the jobs of the queue and the archive
//! `_ジョブ履歴`, newest first, filtered), `sheetq show` (everything known of one job) and
//! what `sheetq rerun` queues again (the same function, target and inputs).
//!
//! Reading only what it needs: `jobs` reads the queue whole (one request, as `status` does)
//! and the archive from its top (its newest rows: archived runs go in at the top) a
//! [`ARCHIVE_CHUNK`] of rows at a time, only while the listing is not full and the rows may
//! still be recent enough. `show` reads the jobId columns, then the one row and its
//! `_ジョブログ` row: four requests at any size.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use chrono_tz::Tz;

use super::{require_init, zoned, AdminError};
use crate::a1;
use crate::archive::ARCHIVE_SHEET;
use crate::config::Config;
use crate::joblog::{LogColumn, LogLayout, LOG_SHEET};
use crate::queue::{self, cell_text, Column, ColumnMap, QueueRow, State, QUEUE_SHEET};
use crate::sheet_time;
use crate::sheets::{Cell, Sheets, ValueRange};

/// Archive rows one read of `sheetq jobs` takes (about 2 MB of cells).
pub const ARCHIVE_CHUNK: u32 = 5000;

/// The jobs `sheetq jobs` lists by default.
pub const DEFAULT_LIMIT: usize = 50;

/// Output characters `show` prints: the tail of what the log row keeps.
const SHOWN_OUTPUT_CHARS: usize = 2000;

/// `--since`: a time in the spreadsheet's zone, or an age from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// `2h`, `7d`, `30min`: that long before now.
    Ago(std::time::Duration),
    /// `2026-12-01` or `2026-12-01 09:30`: a wall-clock time in the spreadsheet's zone.
    Local(NaiveDateTime),
}

impl std::str::FromStr for Since {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if let Ok(d) = humantime::parse_duration(t) {
            return Ok(Since::Ago(d));
        }
        for format in [
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%d %H:%M",
            "%Y-%m-%dT%H:%M:%S",
            "%Y/%m/%d %H:%M",
        ] {
            if let Ok(at) = NaiveDateTime::parse_from_str(t, format) {
                return Ok(Since::Local(at));
            }
        }
        for format in ["%Y-%m-%d", "%Y/%m/%d"] {
            if let Ok(day) = NaiveDate::parse_from_str(t, format) {
                return Ok(Since::Local(day.and_time(chrono::NaiveTime::MIN)));
            }
        }
        Err(format!(
            "{text:?} is neither an age (2h, 7d, 30min) nor a date in the spreadsheet's time zone (2026-12-01, 2026-12-01 09:30)"
        ))
    }
}

impl Since {
    /// The instant this stands for, `now` and the spreadsheet's zone given.
    pub fn at(self, tz: Tz, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Since::Ago(d) => chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| now.checked_sub_signed(d))
                .unwrap_or(DateTime::<Utc>::MIN_UTC),
            Since::Local(t) => sheet_time::local_to_utc(t, tz),
        }
    }
}

/// Which jobs `sheetq jobs` lists.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// A state word as the queue writes it (完了), or its name (done, error, …).
    pub state: Option<String>,
    pub target: Option<String>,
    pub function: Option<String>,
    /// Only jobs received at or after this.
    pub since: Option<Since>,
    /// At most this many (0: all).
    pub limit: usize,
}

/// The English name of each state, as `--state` also takes it.
pub const STATE_NAMES: [(State, &str); 9] = [
    (State::Waiting, "waiting"),
    (State::Running, "running"),
    (State::Done, "done"),
    (State::Error, "error"),
    (State::Timeout, "timeout"),
    (State::Cancelled, "cancelled"),
    (State::AwaitingApproval, "awaiting-approval"),
    (State::Rejected, "rejected"),
    (State::Expired, "expired"),
];

/// The state `--state` names: a configured word (完了) or an English name (done).
pub fn state_named(text: &str, states: &queue::StateWords) -> Result<State, String> {
    let t = text.trim();
    if let Some(s) = states.parse(t) {
        return Ok(s);
    }
    STATE_NAMES
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(t))
        .map(|(s, _)| *s)
        .ok_or_else(|| {
            let words: Vec<String> = STATE_NAMES
                .iter()
                .map(|(s, n)| format!("{} ({n})", states.word(*s)))
                .collect();
            format!(
                "--state {} is no state; use one of {}",
                crate::sheet_text::shown(t),
                words.join(", ")
            )
        })
}

/// One job as `sheetq jobs` and `sheetq show` print it. Times are RFC 3339 in the
/// spreadsheet's zone.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobLine {
    pub job_id: String,
    pub state: String,
    pub target: String,
    pub function: String,
    pub requester: String,
    pub received_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub message: String,
    pub result_url: String,
    /// `queue` or `archive`: the sheet the row is in.
    pub sheet: &'static str,
}

/// What `sheetq jobs` prints.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listing {
    pub time_zone: String,
    pub jobs: Vec<JobLine>,
    /// Whether more jobs match than the limit let through.
    pub more: bool,
    /// Archive rows read (the queue is read whole).
    pub archive_rows_read: u32,
}

/// `sheetq jobs`: the jobs matching `filter`, newest received first: the queue's, then the
/// archive's from its top while the listing is not full and its rows may be recent enough.
pub async fn jobs(
    sheets: &dyn Sheets,
    config: &Config,
    filter: &Filter,
) -> Result<Listing, AdminError> {
    let meta = sheets.metadata().await?;
    require_init(&meta)?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let now = Utc::now();
    let since = filter.since.map(|s| s.at(tz, now));
    let state = filter
        .state
        .as_deref()
        .map(|s| state_named(s, &config.states))
        .transpose()
        .map_err(|e| AdminError::Problems(vec![e]))?;
    let wanted = |r: &QueueRow| {
        !r.job_id.trim().is_empty()
            && state.is_none_or(|s| r.state.is(s))
            && filter
                .target
                .as_deref()
                .is_none_or(|t| crate::sheet_text::same(r.target_key(), t))
            && filter
                .function
                .as_deref()
                .is_none_or(|f| crate::sheet_text::same(&r.function, f))
            && since.is_none_or(|s| r.received_at.is_some_and(|t| t >= s))
    };
    let archive = meta.sheet(ARCHIVE_SHEET).map(|s| s.row_count.max(0) as u32);
    let mut ranges = vec![
        a1::range(QUEUE_SHEET, "1:1"),
        super::queue_data_range(&meta),
    ];
    if archive.is_some() {
        ranges.push(a1::range(ARCHIVE_SHEET, "1:1"));
    }
    let read = sheets.read(&ranges).await?;
    let columns = ColumnMap::from_header(&crate::sheets::first_row(&read), &config.headers)?;
    let queue_rows = values_of(&read, 1);
    let snapshot = queue::parse_rows(&queue_rows, 2, &columns, &config.states, tz);
    let view = View { config, tz };
    let mut found: Vec<(Option<DateTime<Utc>>, JobLine)> = snapshot
        .rows
        .iter()
        .filter(|r| wanted(r))
        .map(|r| (r.received_at, view.line(r, "queue")))
        .collect();
    let limit = if filter.limit == 0 {
        usize::MAX
    } else {
        filter.limit
    };
    let mut archive_rows_read = 0;
    // An archive without a header has no rows yet.
    let archive_header = values_of(&read, 2)
        .into_iter()
        .next()
        .filter(|h| !h.is_empty());
    if let (Some(rows), Some(header)) = (archive, archive_header) {
        let columns = ColumnMap::from_header(&header, &config.headers)?;
        let last = a1::column_letters(columns.width().saturating_sub(1));
        let mut first = 2;
        // One more than the limit tells whether more match.
        while first <= rows && found.len() <= limit {
            let end = (first + ARCHIVE_CHUNK - 1).min(rows);
            let range = a1::range(ARCHIVE_SHEET, &format!("A{first}:{last}{end}"));
            let chunk = sheets.read(&[range]).await?;
            archive_rows_read += end + 1 - first;
            let cells = values_of(&chunk, 0);
            let parsed = queue::parse_rows(&cells, first, &columns, &config.states, tz);
            found.extend(
                parsed
                    .rows
                    .iter()
                    .filter(|r| wanted(r))
                    .map(|r| (r.received_at, view.line(r, "archive"))),
            );
            // Archived runs go in at the top: once a whole chunk was received before
            // `since`, the rows below it are older still. A short reply: the rest is blank.
            let recent = parsed
                .rows
                .iter()
                .any(|r| since.is_none_or(|s| r.received_at.is_none_or(|t| t >= s)));
            if !recent || cells.len() < (end + 1 - first) as usize {
                break;
            }
            first = end + 1;
        }
    }
    // Newest received first; rows without a time last, in the order read.
    found.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let more = found.len() > limit;
    let found: Vec<JobLine> = found.into_iter().take(limit).map(|(_, j)| j).collect();
    Ok(Listing {
        time_zone: meta.time_zone.clone(),
        jobs: found,
        more,
        archive_rows_read,
    })
}

/// The rows of range `k` of a read.
fn values_of(read: &[ValueRange], k: usize) -> Vec<Vec<Cell>> {
    read.get(k).map(|v| v.values.clone()).unwrap_or_default()
}

/// How jobs are shown: state words as configured, times in the spreadsheet's zone.
struct View<'a> {
    config: &'a Config,
    tz: Tz,
}

impl View<'_> {
    fn line(&self, r: &QueueRow, sheet: &'static str) -> JobLine {
        let at = |t: Option<DateTime<Utc>>| t.map(|t| zoned(t, self.tz));
        JobLine {
            job_id: r.job_id.clone(),
            state: match &r.state {
                queue::RowState::Known(s) => self.config.states.word(*s).to_string(),
                queue::RowState::Unknown(t) => format!("? {t}"),
            },
            target: r.target_key().to_string(),
            function: r.function.clone(),
            requester: r.requester.clone(),
            received_at: at(r.received_at),
            started_at: at(r.started_at),
            finished_at: at(r.finished_at),
            message: r.message.clone(),
            result_url: r.result_url.clone(),
            sheet,
        }
    }
}

impl Listing {
    /// The text `sheetq jobs` prints: one line a job, columns aligned.
    pub fn text(&self) -> String {
        let tz: Tz = self.time_zone.parse().unwrap_or(chrono_tz::UTC);
        let v = |s: &str, max: usize| {
            crate::sheet_text::one_line(&crate::sheet_text::visible(s, max), max)
        };
        let mut table: Vec<[String; 6]> = vec![[
            "受付日時".into(),
            "状態".into(),
            "対象".into(),
            "機能".into(),
            "jobId".into(),
            "メッセージ".into(),
        ]];
        for j in &self.jobs {
            table.push([
                j.received_at
                    .as_deref()
                    .map(|t| short_time(t, tz))
                    .unwrap_or_default(),
                v(&j.state, 20),
                v(&j.target, 30),
                v(&j.function, 30),
                v(&j.job_id, 64),
                v(&j.message, 60),
            ]);
        }
        let mut out = if self.jobs.is_empty() {
            "no job matches\n".to_string()
        } else {
            aligned(&table)
        };
        if self.more {
            out.push_str(&format!(
                "(more match: --limit N shows more, --limit 0 all; times in {})\n",
                self.time_zone
            ));
        }
        out
    }
}

/// `2026-12-06 10:00:01` from an RFC 3339 time, in `tz`.
fn short_time(rfc3339: &str, tz: Tz) -> String {
    DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// Rows of cells as text columns padded to the widest cell (East Asian wide characters
/// count two), two spaces apart, the last column unpadded.
fn aligned<const N: usize>(rows: &[[String; N]]) -> String {
    use unicode_width::UnicodeWidthStr;
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.width());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < N {
                line.push_str(&" ".repeat(widths[i] - cell.width() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Everything known of one job, as `sheetq show` prints it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Shown {
    #[serde(flatten)]
    pub job: JobLine,
    pub time_zone: String,
    pub command: String,
    pub args_json: String,
    pub flags: Vec<String>,
    pub panel_sheet: String,
    /// The daemon that ran it (`host/slot #token` as the row keeps it).
    pub worker: String,
    /// Who approved it, with when (as written), one per approval that names this job.
    pub approvals: Vec<String>,
    /// Who asked to stop it, and when, as 中止要求 says.
    pub stop_asked: Option<String>,
    /// Attempts made: 1, or as many as メッセージ counts (「試行 N 回」); 0 before it ran.
    pub attempts: u32,
    /// Its function's inputs as its args carry them (`version=1.2.4, dry_run=true`).
    pub inputs: String,
    /// The tail of its output the `_ジョブログ` row keeps (empty: none kept).
    pub output_tail: String,
    /// Links to the panel sheet and the log row.
    pub links: Vec<(String, String)>,
    /// The function, target and args a rerun queues ([`rerun_of`]).
    #[serde(skip)]
    pub row: QueueRow,
}

/// `sheetq show JOBID`: the job's row in the queue, else in the archive, and its log row.
/// Four requests: the metadata, the header rows, the jobId columns, the two rows.
pub async fn show(sheets: &dyn Sheets, config: &Config, job_id: &str) -> Result<Shown, AdminError> {
    let meta = sheets.metadata().await?;
    require_init(&meta)?;
    let tz = sheet_time::parse_zone(&meta.time_zone)?;
    let sheets_with_jobs: Vec<(&str, &'static str)> = [
        (QUEUE_SHEET, "queue"),
        (ARCHIVE_SHEET, "archive"),
        (LOG_SHEET, "log"),
    ]
    .into_iter()
    .filter(|(t, _)| meta.sheet(t).is_some())
    .collect();
    let headers = sheets
        .read(
            &sheets_with_jobs
                .iter()
                .map(|(t, _)| a1::range(t, "1:1"))
                .collect::<Vec<_>>(),
        )
        .await?;
    let header = |k: usize| -> Vec<Cell> {
        values_of(&headers, k)
            .into_iter()
            .next()
            .unwrap_or_default()
    };
    // The layout of each sheet: the queue's must be whole; an archive or log sheet with no
    // header yet has no rows.
    let mut layouts: Vec<Layout> = Vec::new();
    for (k, (title, kind)) in sheets_with_jobs.iter().enumerate() {
        let h = header(k);
        let layout = match *kind {
            "log" => LogLayout::from_header(meta.sheet(title).map_or(0, |s| s.sheet_id), &h)
                .ok()
                .map(Layout::Log),
            _ if h.is_empty() && *kind == "archive" => None,
            _ => Some(Layout::Queue(
                Box::new(ColumnMap::from_header(&h, &config.headers)?),
                kind,
                title,
            )),
        };
        layouts.extend(layout);
    }
    let id_columns: Vec<String> = layouts.iter().map(Layout::job_id_range).collect();
    let ids = sheets.read(&id_columns).await?;
    let row_of = |k: usize| -> Option<u32> {
        values_of(&ids, k)
            .iter()
            .position(|r| r.first().map(cell_text).is_some_and(|t| t == job_id))
            .map(|i| i as u32 + 2)
    };
    // The queue first, then the archive: a row a daemon is moving may briefly be in both.
    let job = layouts
        .iter()
        .enumerate()
        .filter(|(_, l)| matches!(l, Layout::Queue(..)))
        .find_map(|(k, l)| row_of(k).map(|row| (l, row)));
    let Some((Layout::Queue(columns, kind, title), row)) = job else {
        return Err(AdminError::NotInQueue(job_id.to_string()).or_archive());
    };
    let log = layouts.iter().enumerate().find_map(|(k, l)| match l {
        Layout::Log(log) => row_of(k).map(|row| (log, row)),
        _ => None,
    });
    let mut ranges = vec![a1::range(
        title,
        &format!(
            "A{row}:{}{row}",
            a1::column_letters(columns.width().saturating_sub(1))
        ),
    )];
    if let Some((log, row)) = log {
        let output = a1::column_letters(log.index(LogColumn::Output));
        let id = a1::column_letters(log.index(LogColumn::JobId));
        ranges.push(a1::range(LOG_SHEET, &format!("{id}{row}")));
        ranges.push(a1::range(LOG_SHEET, &format!("{output}{row}")));
    }
    let read = sheets.read(&ranges).await?;
    let parsed = queue::parse_rows(&values_of(&read, 0), row, columns, &config.states, tz);
    let Some(r) = parsed.rows.into_iter().find(|r| r.job_id == job_id) else {
        return Err(AdminError::Problems(vec![format!(
            "the row of job {job_id} moved while it was read (a sort, or the archive); try again"
        )]));
    };
    let cell = |k: usize| {
        values_of(&read, k)
            .first()
            .and_then(|r| r.first())
            .map(cell_text)
            .unwrap_or_default()
    };
    // The log row is taken only if it still holds the job (rows may move between reads).
    let output_tail = if log.is_some() && cell(1) == job_id {
        crate::sheet_text::tail_chars(&cell(2), SHOWN_OUTPUT_CHARS)
    } else {
        String::new()
    };
    let mut links = Vec::new();
    if let Some(panel) = meta.sheet(r.panel_sheet.trim()) {
        // The row a press came from; a job queued from the shell names the sheet alone.
        let url = match r.panel_row {
            Some(row) => crate::notifications::row_url(&meta.spreadsheet_id, panel.sheet_id, row),
            None => format!(
                "https://docs.google.com/spreadsheets/d/{}/edit#gid={}",
                meta.spreadsheet_id, panel.sheet_id
            ),
        };
        links.push(("パネル".to_string(), url));
    }
    if let Some((log, row)) = log.filter(|_| !output_tail.is_empty()) {
        let url = crate::notifications::row_url(&meta.spreadsheet_id, log.sheet_id, row);
        // 結果URL leads there already when the command gave none of its own.
        if url != r.result_url {
            links.push(("ログ".to_string(), url));
        }
    }
    let view = View { config, tz };
    Ok(Shown {
        job: view.line(&r, kind),
        time_zone: meta.time_zone.clone(),
        command: r.command.clone(),
        args_json: r.args_json.clone(),
        flags: r.flags.clone(),
        panel_sheet: r.panel_sheet.clone(),
        worker: r.worker.clone(),
        approvals: crate::approval::entries(&r.approvals, job_id, tz)
            .into_iter()
            .map(|a| request_text(&a, tz))
            .collect(),
        stop_asked: crate::cancel::asked_of(&r, tz, Utc::now()).map(|a| request_text(&a, tz)),
        attempts: attempts_of(&r),
        inputs: config.catalog.inputs_text(&r.function, &r.args_json),
        output_tail,
        links,
        row: r,
    })
}

/// Who and when, as `show` prints an approval or a stop request.
fn request_text(r: &crate::cancel::Request, tz: Tz) -> String {
    let who = if r.who.is_empty() {
        crate::cancel::UNKNOWN
    } else {
        &r.who
    };
    match r.at {
        Some(t) => format!("{who} {}", t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S")),
        None => who.to_string(),
    }
}

/// Attempts a row's job made: as メッセージ counts them when it was tried again, else 1
/// once it started, 0 before.
fn attempts_of(r: &QueueRow) -> u32 {
    static COUNTED: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let counted = COUNTED
        .get_or_init(|| regex::Regex::new(r"試行 (\d+) 回").ok())
        .as_ref()
        .and_then(|re| re.captures_iter(&r.message).last())
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse().ok());
    counted.unwrap_or(u32::from(r.started_at.is_some()))
}

/// Where the rows of jobs are, by each sheet's header.
enum Layout<'a> {
    /// The queue or the archive (laid out alike).
    Queue(Box<ColumnMap>, &'static str, &'a str),
    Log(LogLayout),
}

impl Layout<'_> {
    /// The jobId column below the header.
    fn job_id_range(&self) -> String {
        match self {
            Layout::Queue(columns, _, title) => {
                let c = columns.letters(Column::JobId);
                a1::range(title, &format!("{c}2:{c}"))
            }
            Layout::Log(log) => {
                let c = a1::column_letters(log.index(LogColumn::JobId));
                a1::range(LOG_SHEET, &format!("{c}2:{c}"))
            }
        }
    }
}

impl AdminError {
    /// Not in the queue, nor in the archive.
    fn or_archive(self) -> Self {
        match self {
            AdminError::NotInQueue(id) => AdminError::Problems(vec![format!(
                "job {id:?} is neither in '{QUEUE_SHEET}' nor in '{ARCHIVE_SHEET}': its row was deleted, or the jobId is mistyped (`sheetq jobs` lists the jobs)"
            )]),
            other => other,
        }
    }
}

impl Shown {
    /// The text `sheetq show` prints: one field a line, the output's tail last.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let tz: Tz = self.time_zone.parse().unwrap_or(chrono_tz::UTC);
        let v = |s: &str| crate::sheet_text::visible(s, crate::sheet_text::LINE_CHARS);
        let t = |s: &Option<String>| {
            s.as_deref()
                .map(|s| short_time(s, tz))
                .unwrap_or_else(|| "-".into())
        };
        let j = &self.job;
        let mut out = String::new();
        // Names padded to ten columns as a terminal shows them (a kana is two wide).
        let mut field = |name: &str, value: String| {
            let pad = 10usize.saturating_sub(unicode_width::UnicodeWidthStr::width(name));
            let _ = writeln!(out, "{name}{} {value}", " ".repeat(pad));
        };
        field("jobId", v(&j.job_id));
        field("状態", v(&j.state));
        field("対象", v(&j.target));
        field("機能", v(&j.function));
        field(
            "依頼者",
            if j.requester.is_empty() {
                "-".into()
            } else {
                v(&j.requester)
            },
        );
        field("受付", t(&j.received_at));
        field("開始", t(&j.started_at));
        field("終了", t(&j.finished_at));
        field("試行", format!("{} 回", self.attempts));
        field(
            "ワーカー",
            if self.worker.is_empty() {
                "-".into()
            } else {
                v(&self.worker)
            },
        );
        for a in &self.approvals {
            field("承認", v(a));
        }
        if let Some(stop) = &self.stop_asked {
            field("中止要求", v(stop));
        }
        field("コマンド", v(&self.command));
        if !self.inputs.is_empty() {
            field("入力", v(&self.inputs));
        }
        field("引数", v(&self.args_json));
        if !self.flags.is_empty() {
            field("フラグ", v(&self.flags.join(",")));
        }
        field("メッセージ", v(&j.message));
        if !j.result_url.is_empty() {
            field("結果URL", v(&j.result_url));
        }
        for (name, url) in &self.links {
            field(name, url.clone());
        }
        field(
            "シート",
            format!("{} (times in {})", j.sheet, self.time_zone),
        );
        if !self.output_tail.is_empty() {
            let _ = writeln!(out, "--- 出力 (末尾) ---");
            // Lines kept as lines; every other control or format character made visible.
            let tail = crate::sheet_text::for_cell(&self.output_tail, SHOWN_OUTPUT_CHARS + 16);
            let _ = writeln!(out, "{}", tail.trim_end_matches('\n'));
        }
        out
    }
}

/// The rollout `sheetq rerun` starts again for rollout row `old`: the rollout of its label
/// as the config has it now, with the inputs `old` was pressed with (those the rollout
/// does not fix), requested by `who`; its name and its row.
pub fn rollout_rerun_of(
    config: &Config,
    old: &QueueRow,
    who: &str,
) -> Result<(String, super::NewJob), String> {
    let label = crate::sheet_text::trim(&old.function);
    let Some(r) = config.rollouts.iter().find(|r| r.label() == label) else {
        return Err(format!(
            "job {} is a run of rollout {}, which is not among the [[rollouts]] of sheetq.toml any more",
            old.job_id,
            crate::sheet_text::shown(label)
        ));
    };
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&old.args_json).unwrap_or_default();
    let inputs: Vec<(String, serde_json::Value)> = config
        .catalog
        .function(&r.function)
        .map(|f| {
            (f.inputs.iter())
                .filter(|d| !r.inputs.contains_key(&d.name))
                .filter_map(|d| args.get(&d.name).map(|v| (d.name.clone(), v.clone())))
                .collect()
        })
        .unwrap_or_default();
    let job = super::rollout_job(config, &r.name, &inputs, who)?;
    Ok((r.name.clone(), job))
}

/// The job `sheetq rerun` queues for `old`: the same function, target and panel, with the
/// args a job may set and its inputs taken from `old` (the rest from the config as it is
/// now, the inputs checked by their rules as they are now), requested
/// by `who`. Through [`super::job_of`], so a function gone from the config, or an arg it no
/// longer lets a job set, is refused as for `enqueue`.
pub fn rerun_of(config: &Config, old: &QueueRow, who: &str) -> Result<super::NewJob, String> {
    let args: serde_json::Map<String, serde_json::Value> =
        match serde_json::from_str(&old.args_json) {
            Ok(serde_json::Value::Object(map)) => map,
            _ if old.args_json.trim().is_empty() => serde_json::Map::new(),
            _ => {
                return Err(format!(
                    "job {}'s args are not a JSON object ({}), so they cannot be queued again",
                    old.job_id,
                    crate::sheet_text::shown(&old.args_json)
                ))
            }
        };
    let target = old.target_key();
    let (command, args, inputs) = match config.catalog.function(&old.function) {
        // What the function lets a job set, and its inputs, as the old job had them; the
        // rest is the config's.
        Some(f) => {
            let set: serde_json::Map<String, serde_json::Value> = args
                .iter()
                .filter(|(k, _)| f.args_from_sheet.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let inputs: Vec<(String, serde_json::Value)> = f
                .inputs
                .iter()
                .filter_map(|d| args.get(&d.name).map(|v| (d.name.clone(), v.clone())))
                .collect();
            (None, serde_json::Value::Object(set).to_string(), inputs)
        }
        None => (
            Some(old.command.as_str()),
            serde_json::Value::Object(args).to_string(),
            Vec::new(),
        ),
    };
    let mut job = super::job_of(
        config,
        target,
        &old.function,
        command,
        Some(&args),
        &inputs,
        who,
    )?;
    if !old.panel_sheet.trim().is_empty() {
        job.panel_sheet = old.panel_sheet.clone();
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_an_age_or_a_date_in_the_spreadsheets_zone() {
        let tz: Tz = "Asia/Tokyo".parse().unwrap();
        let now = DateTime::parse_from_rfc3339("2026-12-06T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let at = |text: &str| text.parse::<Since>().map(|s| s.at(tz, now).to_rfc3339());
        assert_eq!(at("2h"), Ok("2026-12-06T08:00:00+00:00".into()));
        assert_eq!(at("7d"), Ok("2026-11-29T10:00:00+00:00".into()));
        assert_eq!(
            at("2026-12-01"),
            Ok("2026-11-30T15:00:00+00:00".into()),
            "midnight in Tokyo"
        );
        assert_eq!(
            at("2026-12-01 09:30"),
            Ok("2026-12-01T00:30:00+00:00".into())
        );
        let bad = at("yesterday").unwrap_err();
        assert!(bad.contains("\"yesterday\"") && bad.contains("2h"), "{bad}");
    }

    #[test]
    fn state_takes_the_configured_word_or_its_english_name() {
        let states = queue::StateWords::default();
        assert_eq!(state_named("完了", &states), Ok(State::Done));
        assert_eq!(state_named("Error", &states), Ok(State::Error));
        assert_eq!(
            state_named("awaiting-approval", &states),
            Ok(State::AwaitingApproval)
        );
        let bad = state_named("finished", &states).unwrap_err();
        assert!(
            bad.contains("\"finished\"") && bad.contains("完了 (done)"),
            "{bad}"
        );
    }

    #[test]
    fn attempts_are_counted_from_the_message_of_a_job_tried_again() {
        let mut r = QueueRow::blank(2);
        assert_eq!(attempts_of(&r), 0, "not started");
        r.started_at = Some(Utc::now());
        assert_eq!(attempts_of(&r), 1);
        r.message = "exit code 1 (試行 3 回)".into();
        assert_eq!(attempts_of(&r), 3);
    }

    #[test]
    fn columns_line_up_under_wide_characters() {
        let table = aligned(&[
            ["状態".to_string(), "x".to_string()],
            ["done".to_string(), "y".to_string()],
        ]);
        assert_eq!(table, "状態  x\ndone  y\n");
    }
}
