//! The `_ジョブキュー` sheet as data: its header (found by name, never by letter), the state
//! words, the ワーカー tag, and one [`QueueRow`] per data row.
//!
//! Everything here is pure: a snapshot of cells goes in, typed rows and a list of problems
//! come out. A row that cannot be understood is reported, never guessed at, because a guess
//! on a shared sheet ends with a job run twice or never.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Deserialize;

use crate::sheet_time;
use crate::sheets::Cell;

/// Title of the hidden queue sheet.
pub const QUEUE_SHEET: &str = "_ジョブキュー";

/// The columns sheetq knows, in their default order: sixteen it needs ([`Column::ALL`])
/// and [`Column::OPTIONAL`] ones a queue made by an older version may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Column {
    JobId,
    ReceivedAt,
    Requester,
    PanelSheet,
    PanelRow,
    Target,
    Function,
    Command,
    ArgsJson,
    Flags,
    State,
    StartedAt,
    FinishedAt,
    ResultUrl,
    Message,
    Worker,
    /// 中止要求: who asked to stop the job and when (`<who> yyyy/MM/dd HH:mm:ss`), written by
    /// an intake, `sheetq cancel` or a daemon passing a ■ tick on.
    CancelRequest,
    /// 承認: the approvals a job of a function with `approvers` has, one per line
    /// (`<who> yyyy/MM/dd HH:mm:ss #<jobId>`), written by the installable trigger or
    /// `sheetq approve` (docs/design.md §5.5).
    Approvals,
    /// 入力: the job's inputs for people (`version=1.2.4, dry_run=true`), written with the
    /// row; the job runs on its argsJSON, never on this text.
    Inputs,
}

impl Column {
    /// The columns a queue must have.
    pub const ALL: [Column; 16] = [
        Column::JobId,
        Column::ReceivedAt,
        Column::Requester,
        Column::PanelSheet,
        Column::PanelRow,
        Column::Target,
        Column::Function,
        Column::Command,
        Column::ArgsJson,
        Column::Flags,
        Column::State,
        Column::StartedAt,
        Column::FinishedAt,
        Column::ResultUrl,
        Column::Message,
        Column::Worker,
    ];

    /// Columns a queue may lack: without one, what it carries is not offered (`sheetq init`
    /// adds them to an existing queue).
    pub const OPTIONAL: [Column; 3] = [Column::CancelRequest, Column::Approvals, Column::Inputs];

    fn slot(self) -> usize {
        self as usize
    }
}

/// Header names of the queue sheet; configurable for sheets in other languages.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeaderNames {
    pub job_id: String,
    pub received_at: String,
    pub requester: String,
    pub panel_sheet: String,
    pub panel_row: String,
    pub target: String,
    pub function: String,
    pub command: String,
    pub args_json: String,
    pub flags: String,
    pub state: String,
    pub started_at: String,
    pub finished_at: String,
    pub result_url: String,
    pub message: String,
    pub worker: String,
    pub cancel_request: String,
    pub approvals: String,
    pub inputs: String,
}

impl Default for HeaderNames {
    fn default() -> Self {
        Self {
            job_id: "jobId".into(),
            received_at: "受付日時".into(),
            requester: "依頼者".into(),
            panel_sheet: "パネルシート名".into(),
            panel_row: "パネル行".into(),
            target: "対象ラベル".into(),
            function: "機能ラベル".into(),
            command: "command".into(),
            args_json: "argsJSON".into(),
            flags: "システムフラグ".into(),
            state: "状態".into(),
            started_at: "開始日時".into(),
            finished_at: "終了日時".into(),
            result_url: "結果URL".into(),
            message: "メッセージ".into(),
            worker: "ワーカー".into(),
            cancel_request: "中止要求".into(),
            approvals: "承認".into(),
            inputs: "入力".into(),
        }
    }
}

impl HeaderNames {
    pub fn name(&self, column: Column) -> &str {
        match column {
            Column::JobId => &self.job_id,
            Column::ReceivedAt => &self.received_at,
            Column::Requester => &self.requester,
            Column::PanelSheet => &self.panel_sheet,
            Column::PanelRow => &self.panel_row,
            Column::Target => &self.target,
            Column::Function => &self.function,
            Column::Command => &self.command,
            Column::ArgsJson => &self.args_json,
            Column::Flags => &self.flags,
            Column::State => &self.state,
            Column::StartedAt => &self.started_at,
            Column::FinishedAt => &self.finished_at,
            Column::ResultUrl => &self.result_url,
            Column::Message => &self.message,
            Column::Worker => &self.worker,
            Column::CancelRequest => &self.cancel_request,
            Column::Approvals => &self.approvals,
            Column::Inputs => &self.inputs,
        }
    }

    /// The header row `sheetq init` writes, in the default order, optional columns last.
    pub fn header_row(&self) -> Vec<String> {
        Column::ALL
            .iter()
            .chain(&Column::OPTIONAL)
            .map(|c| self.name(*c).to_string())
            .collect()
    }
}

/// The lifecycle of a queue row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Waiting,
    Running,
    Done,
    Error,
    Timeout,
    /// Stopped on request before it ended (or before it began).
    Cancelled,
    /// Queued for a function with `approvers`, waiting for enough approvals: never claimed.
    AwaitingApproval,
    /// An approver stopped it before it ran: final, like [`State::Cancelled`].
    Rejected,
    /// Not approved within the function's `approval_expires`: final.
    Expired,
}

impl State {
    /// Every state, in lifecycle order.
    pub const ALL: [State; 9] = [
        State::Waiting,
        State::Running,
        State::Done,
        State::Error,
        State::Timeout,
        State::Cancelled,
        State::AwaitingApproval,
        State::Rejected,
        State::Expired,
    ];

    /// Whether a row in this state is settled for good (完了, エラー, タイムアウト,
    /// キャンセル, 却下, 期限切れ): never claimed, archived once past the retention, not a
    /// duplicate.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            State::Done
                | State::Error
                | State::Timeout
                | State::Cancelled
                | State::Rejected
                | State::Expired
        )
    }
}

/// The words the sheet uses for each [`State`]; configurable, Japanese by default.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateWords {
    pub waiting: String,
    pub running: String,
    pub done: String,
    pub error: String,
    pub timeout: String,
    pub cancelled: String,
    pub awaiting_approval: String,
    pub rejected: String,
    pub expired: String,
}

impl Default for StateWords {
    fn default() -> Self {
        Self {
            waiting: "待機".into(),
            running: "実行中".into(),
            done: "完了".into(),
            error: "エラー".into(),
            timeout: "タイムアウト".into(),
            cancelled: "キャンセル".into(),
            awaiting_approval: "承認待ち".into(),
            rejected: "却下".into(),
            expired: "期限切れ".into(),
        }
    }
}

impl StateWords {
    pub fn word(&self, state: State) -> &str {
        match state {
            State::Waiting => &self.waiting,
            State::Running => &self.running,
            State::Done => &self.done,
            State::Error => &self.error,
            State::Timeout => &self.timeout,
            State::Cancelled => &self.cancelled,
            State::AwaitingApproval => &self.awaiting_approval,
            State::Rejected => &self.rejected,
            State::Expired => &self.expired,
        }
    }

    /// The state a cell's text names, exactly: the claim and timeout compare-and-swaps match
    /// the whole cell, so `"待機 "` (with a space) is not 待機 but unknown text, reported and
    /// left alone rather than claimed again every pass.
    pub fn parse(&self, text: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| self.word(*s) == text)
    }
}

/// Where each known column sits, found from row 1 by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMap {
    index: [Option<u32>; 19],
    width: u32,
    names: HeaderNames,
}

/// Why the queue sheet cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "{} missing from '{sheet}' row 1 (found: {}); add the column (any position) or set its name under [queue.headers] in sheetq.toml",
        quote_list("column", missing),
        if found.is_empty() { "nothing".to_string() } else { found.join(", ") }
    )]
    MissingHeaders {
        sheet: String,
        missing: Vec<String>,
        found: Vec<String>,
    },
    #[error(
        "'{sheet}'!A1 is empty: new queue rows are appended at the first column of the table Google finds (https://developers.google.com/sheets/api/guides/values#append_values), so with column A empty every new row would land one column to the right of its header; give column A a header (any name: a column of your own is fine) or delete the empty column"
    )]
    BlankFirstColumn { sheet: String },
    #[error("column \"{name}\" appears twice in '{sheet}' row 1 (columns {first} and {second}); remove one")]
    DuplicateHeader {
        sheet: String,
        name: String,
        first: String,
        second: String,
    },
}

fn quote_list(noun: &str, names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    if names.len() == 1 {
        format!("{noun} {} is", quoted[0])
    } else {
        format!("{noun}s {} are", quoted.join(", "))
    }
}

impl ColumnMap {
    /// Maps the header row. Extra columns anywhere are fine; a required header that is
    /// missing, or present twice, is an error naming it.
    pub fn from_header(header: &[Cell], names: &HeaderNames) -> Result<Self, LayoutError> {
        let found: Vec<String> = header.iter().map(cell_text).collect();
        let mut positions: BTreeMap<&str, u32> = BTreeMap::new();
        for (i, name) in found.iter().enumerate() {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            let i = i as u32;
            if let Some(first) = positions.insert(name, i) {
                if (Column::ALL.iter().chain(&Column::OPTIONAL)).any(|c| names.name(*c) == name) {
                    return Err(LayoutError::DuplicateHeader {
                        sheet: QUEUE_SHEET.into(),
                        name: name.into(),
                        first: crate::a1::column_letters(first),
                        second: crate::a1::column_letters(i),
                    });
                }
            }
        }
        let mut index = [None; 19];
        let mut missing = Vec::new();
        for column in Column::ALL {
            match positions.get(names.name(column)) {
                Some(i) => index[column.slot()] = Some(*i),
                None => missing.push(names.name(column).to_string()),
            }
        }
        for column in Column::OPTIONAL {
            index[column.slot()] = positions.get(names.name(column)).copied();
        }
        if !missing.is_empty() {
            return Err(LayoutError::MissingHeaders {
                sheet: QUEUE_SHEET.into(),
                missing,
                found: found.into_iter().filter(|f| !f.trim().is_empty()).collect(),
            });
        }
        if found.first().is_none_or(|a1| a1.trim().is_empty()) {
            return Err(LayoutError::BlankFirstColumn {
                sheet: QUEUE_SHEET.into(),
            });
        }
        let width = index.iter().flatten().max().copied().unwrap_or(0) + 1;
        Ok(Self {
            index,
            width,
            names: names.clone(),
        })
    }

    /// Zero-based column index of a column the queue must have ([`Column::ALL`]). An
    /// optional column the queue lacks answers the first column past the known ones
    /// ([`ColumnMap::width`]); reads and writes of optional columns ask
    /// [`ColumnMap::position`] instead.
    pub fn index(&self, column: Column) -> u32 {
        self.position(column).unwrap_or(self.width)
    }

    /// Zero-based column index of `column`, `None` for an optional column the queue lacks.
    pub fn position(&self, column: Column) -> Option<u32> {
        self.index[column.slot()]
    }

    /// Whether the queue has `column` (always, for one it must have).
    pub fn has(&self, column: Column) -> bool {
        self.position(column).is_some()
    }

    /// Column letters of `column`, e.g. `K`.
    pub fn letters(&self, column: Column) -> String {
        crate::a1::column_letters(self.index(column))
    }

    /// Number of columns from A through the right-most known column.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// A row from column A holding `cells` at their columns and `None` (Google: `null`, the
    /// cell is left as it is) everywhere else, reaching at least column `through`, so that a
    /// reply covering the written span shows that column too, whatever the header's order.
    /// A cell of an optional column the queue lacks is left out.
    pub fn sparse_row(&self, cells: &[(Column, Cell)], through: Column) -> Vec<Option<Cell>> {
        let width = cells
            .iter()
            .map(|(c, _)| *c)
            .chain([through])
            .filter_map(|c| self.position(c))
            .map(|i| i as usize + 1)
            .max()
            .unwrap_or(0);
        let mut row = vec![None; width];
        for (c, v) in cells {
            if let Some(i) = self.position(*c) {
                row[i as usize] = Some(v.clone());
            }
        }
        row
    }

    /// The A1 cell of `column` on sheet row `row` (1-based), e.g. `'_ジョブキュー'!K12`.
    pub fn cell(&self, column: Column, row: u32) -> String {
        crate::a1::range(QUEUE_SHEET, &format!("{}{}", self.letters(column), row))
    }
}

/// The text of a cell as a person sees it in an unformatted read.
pub fn cell_text(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::String(s) => s.clone(),
        Cell::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
        Cell::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// The ワーカー cell: which daemon and slot claimed the row, and the claim token that proves
/// a later write-back still belongs to that claim. Written as `vm-1/0 #3f9c2a1b`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerTag {
    pub daemon_id: String,
    pub slot: u32,
    pub token: String,
}

impl WorkerTag {
    /// Parses the cell; `None` for text that sheetq did not write (e.g. a person's note).
    pub fn parse(text: &str) -> Option<Self> {
        let (who, token) = text.trim().rsplit_once(" #")?;
        let (daemon_id, slot) = who.rsplit_once('/')?;
        if daemon_id.is_empty() || token.is_empty() {
            return None;
        }
        Some(Self {
            daemon_id: daemon_id.into(),
            slot: slot.parse().ok()?,
            token: token.into(),
        })
    }
}

impl fmt::Display for WorkerTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} #{}", self.daemon_id, self.slot, self.token)
    }
}

/// What a row's 状態 cell says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowState {
    Known(State),
    /// Text that is not one of the configured state words (reported, not guessed).
    Unknown(String),
}

impl RowState {
    /// The state, when it is one of the configured words.
    pub fn known(&self) -> Option<State> {
        match self {
            RowState::Known(s) => Some(*s),
            RowState::Unknown(_) => None,
        }
    }

    pub fn is(&self, state: State) -> bool {
        *self == RowState::Known(state)
    }

    /// Whether the row is settled for good ([`State::is_final`]).
    pub fn is_final(&self) -> bool {
        matches!(self, RowState::Known(s) if s.is_final())
    }
}

/// One data row of the queue, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    /// 1-based sheet row number at the time of the read (a hint: rows move).
    pub row: u32,
    pub job_id: String,
    pub received_at: Option<DateTime<Utc>>,
    /// Requester e-mail; may be empty.
    pub requester: String,
    pub panel_sheet: String,
    pub panel_row: Option<u32>,
    pub target: String,
    pub function: String,
    pub command: String,
    pub args_json: String,
    pub flags: Vec<String>,
    pub state: RowState,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub result_url: String,
    pub message: String,
    pub worker: String,
    /// 中止要求 as written (empty: nobody asked; also when the queue has no such column).
    pub cancel_request: String,
    /// 承認 as written (empty: no approval yet; also when the queue has no such column).
    pub approvals: String,
}

impl QueueRow {
    /// A row with every cell empty (a blank row a person inserted, or one a cut-and-paste
    /// emptied), at sheet row `row`.
    pub fn blank(row: u32) -> Self {
        QueueRow {
            row,
            job_id: String::new(),
            received_at: None,
            requester: String::new(),
            panel_sheet: String::new(),
            panel_row: None,
            target: String::new(),
            function: String::new(),
            command: String::new(),
            args_json: String::new(),
            flags: Vec::new(),
            state: RowState::Unknown(String::new()),
            started_at: None,
            finished_at: None,
            result_url: String::new(),
            message: String::new(),
            worker: String::new(),
            cancel_request: String::new(),
            approvals: String::new(),
        }
    }
}

impl QueueRow {
    /// The serialisation key: 対象ラベル, or パネルシート名 when the label is empty.
    pub fn target_key(&self) -> &str {
        let target = crate::sheet_text::trim(&self.target);
        if target.is_empty() {
            crate::sheet_text::trim(&self.panel_sheet)
        } else {
            target
        }
    }

    /// The requester, or `None` when empty (an empty requester is never grouped).
    pub fn requester_key(&self) -> Option<&str> {
        let r = crate::sheet_text::trim(&self.requester);
        (!r.is_empty()).then_some(r)
    }

    pub fn worker_tag(&self) -> Option<WorkerTag> {
        WorkerTag::parse(&self.worker)
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Whether this is a rollout's own row ([`ROLLOUT_COMMAND`]): the claim passes follow
    /// it, and no daemon claims, times out or runs it.
    pub fn is_rollout(&self) -> bool {
        crate::sheet_text::trim(&self.command) == ROLLOUT_COMMAND
    }
}

/// The sheet row the range of a `values.append` of new queue rows should start at, from the
/// non-blank rows of a read that reaches the end of the queue (`(sheet row, whether its
/// column A holds a value)`, in order; the header is row 1).
///
/// Google appends after the "table" the range starts in, from the table's first column: a
/// table runs down to the first blank row, and starts at its leftmost column holding data.
/// From row 1 (the header, whose A1 is never empty), a blank row a person left in the queue
/// would take the new rows, above the part of the queue that polls read. So the range starts
/// at the lowest row with column A filled from which no blank row lies before the end (the
/// rows then land after the last one); when there is none, at the header.
pub fn append_anchor(rows: &[(u32, bool)]) -> u32 {
    let mut below = None;
    for &(row, a_filled) in rows.iter().rev() {
        if below.is_some_and(|b| b != row + 1) {
            break;
        }
        if a_filled {
            return row;
        }
        below = Some(row);
    }
    1
}

/// Something in a row that sheetq could not understand; logged, and the row left alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{sheet}' row {row}: {what}", sheet = QUEUE_SHEET)]
pub struct RowProblem {
    pub row: u32,
    pub what: String,
    /// Whether the row waits (待機) for a job that will never run as it stands (no jobId, or
    /// another row's): a press nobody would hear of unless it is reported.
    pub never_runs: bool,
}

/// The queue as read in one pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub rows: Vec<QueueRow>,
    pub problems: Vec<RowProblem>,
}

impl Snapshot {
    pub fn by_job_id(&self, job_id: &str) -> Option<&QueueRow> {
        self.rows.iter().find(|r| r.job_id == job_id)
    }

    /// Every row holding `job_id` (a copied row may repeat it).
    pub fn rows_with<'a>(&'a self, job_id: &'a str) -> impl Iterator<Item = &'a QueueRow> + 'a {
        self.rows.iter().filter(move |r| r.job_id == job_id)
    }
}

/// Reads data rows. `first_row` is the 1-based sheet row of `rows[0]` (2 for a read from
/// A2). Blank rows are skipped silently; rows without a jobId or with unreadable cells are
/// reported in `problems`: a row without a jobId is left out (it cannot be re-found, so it is
/// never claimed), other problems leave the row in with the unreadable part empty.
pub fn parse_rows(
    rows: &[Vec<Cell>],
    first_row: u32,
    columns: &ColumnMap,
    states: &StateWords,
    tz: Tz,
) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for (i, cells) in rows.iter().enumerate() {
        let row = first_row + i as u32;
        if cells.iter().all(|c| cell_text(c).trim().is_empty()) {
            continue;
        }
        if let Some(parsed) = parse_row(row, cells, columns, states, tz, &mut snapshot.problems) {
            snapshot.rows.push(parsed);
        }
    }
    let mut seen_at: BTreeMap<&str, u32> = BTreeMap::new();
    let mut copies = Vec::new();
    for r in &snapshot.rows {
        if let Some(first) = seen_at.insert(&r.job_id, r.row) {
            copies.push(RowProblem {
                row: r.row,
                never_runs: r.state.is(State::Waiting),
                what: format!(
                    "jobId {} is also on row {first}; a copied row is never claimed: give it a new jobId",
                    r.job_id
                ),
            });
        }
    }
    snapshot.problems.extend(copies);
    snapshot
}

fn parse_row(
    row: u32,
    cells: &[Cell],
    columns: &ColumnMap,
    states: &StateWords,
    tz: Tz,
    problems: &mut Vec<RowProblem>,
) -> Option<QueueRow> {
    let get = |c: Column| {
        (columns.position(c))
            .and_then(|i| cells.get(i as usize))
            .unwrap_or(&Cell::Null)
    };
    // Spaces and tabs at either end only (`sheet_text`): a value whose other characters
    // were trimmed away here could match a configured one that it only looks like.
    let text = |c: Column| crate::sheet_text::trim(&cell_text(get(c))).to_string();
    let job_id = text(Column::JobId);
    if job_id.is_empty() {
        problems.push(RowProblem {
            row,
            never_runs: states.parse(&cell_text(get(Column::State))) == Some(State::Waiting),
            what: format!(
                "{} is empty; the row is ignored until it has one",
                columns.names.job_id
            ),
        });
        return None;
    }
    // An unreadable time is reported and read as empty: the row stays visible to the claim
    // rules (a running row must still block its target) instead of vanishing.
    let mut time = |c: Column| match sheet_time::cell_to_instant(get(c), tz) {
        Ok(t) => t,
        Err(e) => {
            problems.push(RowProblem {
                row,
                never_runs: false,
                what: format!(
                    "{} (column {}): {e}",
                    columns.names.name(c),
                    columns.letters(c)
                ),
            });
            None
        }
    };
    let received_at = time(Column::ReceivedAt);
    let started_at = time(Column::StartedAt);
    let finished_at = time(Column::FinishedAt);
    let state_text = cell_text(get(Column::State));
    let state = match states.parse(&state_text) {
        Some(s) => RowState::Known(s),
        None => {
            problems.push(RowProblem {
                row,
                never_runs: false,
                what: format!(
                    "{} \"{state_text}\" is not one of {}; the row is left alone",
                    columns.names.state,
                    State::ALL.map(|s| states.word(s)).join(", ")
                ),
            });
            RowState::Unknown(state_text)
        }
    };
    let panel_row = match text(Column::PanelRow) {
        t if t.is_empty() => None,
        t => t
            .parse::<f64>()
            .ok()
            .filter(|n| *n >= 1.0)
            .map(|n| n as u32),
    };
    let flags = text(Column::Flags)
        .split(',')
        .map(|f| crate::sheet_text::trim(f).to_string())
        .filter(|f| !f.is_empty())
        .collect();
    Some(QueueRow {
        row,
        received_at,
        requester: text(Column::Requester),
        panel_sheet: text(Column::PanelSheet),
        panel_row,
        target: text(Column::Target),
        function: text(Column::Function),
        command: text(Column::Command),
        args_json: cell_text(get(Column::ArgsJson)),
        flags,
        state,
        started_at,
        finished_at,
        result_url: text(Column::ResultUrl),
        message: cell_text(get(Column::Message)),
        worker: text(Column::Worker),
        cancel_request: text(Column::CancelRequest),
        approvals: cell_text(get(Column::Approvals)),
        job_id,
    })
}

/// How メッセージ of a job waiting to be tried again begins (「再試行 2/3: …」).
pub const RETRY_NOTE_PREFIX: &str = "再試行 ";

/// Whether a running job's メッセージ is a retry note (`commands::RetryNote`) (sheetq writes nothing else
/// starting so on a running row).
pub fn is_retry_note(message: &str) -> bool {
    message
        .strip_prefix(RETRY_NOTE_PREFIX)
        .and_then(|rest| rest.split_once(['/']))
        .is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_digit()))
}

/// The システムフラグ of a row a command's `continue` appended: the next step of its job.
pub const CONTINUATION_FLAG: &str = "continuation";

/// The command of a rollout's own row (`[[rollouts]]`, `crate::rollout`): never claimed nor
/// run as a job; the claim passes queue its targets' jobs, follow them and end it.
pub const ROLLOUT_COMMAND: &str = "sheetq.rollout";

/// The target (and panel sheet) of a rollout's own row: the 一括 sheet.
pub const ROLLOUT_TARGET: &str = "一括";

/// How a rollout row's progress begins in its メッセージ (`実行中 7/20 · 失敗 0`).
pub const ROLLOUT_PROGRESS_PREFIX: &str = "実行中 ";

/// Whether a rollout row's メッセージ is its progress, not yet its end.
pub fn is_rollout_progress(message: &str) -> bool {
    message.trim_start().starts_with(ROLLOUT_PROGRESS_PREFIX)
}

/// The システムフラグ of a rollout's job on one target: its end is told in the rollout's
/// one notice, not a notice of its own (unless the rollout's `notify_each` asks).
pub const ROLLOUT_FLAG: &str = "rollout";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn header(names: &[&str]) -> Vec<Cell> {
        names.iter().map(|n| json!(n)).collect()
    }

    fn default_header() -> Vec<Cell> {
        HeaderNames::default()
            .header_row()
            .into_iter()
            .map(Cell::String)
            .collect()
    }

    #[test]
    fn columns_are_found_by_name_whatever_their_order() {
        let mut h = default_header();
        h.reverse();
        h.insert(3, json!("メモ"));
        let map = ColumnMap::from_header(&h, &HeaderNames::default()).unwrap();
        assert_eq!(map.position(Column::Inputs), Some(0));
        assert_eq!(map.position(Column::Approvals), Some(1));
        assert_eq!(map.position(Column::CancelRequest), Some(2));
        assert_eq!(map.index(Column::Worker), 4, "right of the extra column");
        assert_eq!(
            map.index(Column::JobId),
            19,
            "jobId moved right past the extra column"
        );
        assert_eq!(map.width(), 20);
        assert_eq!(map.cell(Column::State, 12), "'_ジョブキュー'!J12");
    }

    #[test]
    fn a_queue_made_before_the_cancel_column_maps_without_it_and_reads_no_request() {
        let mut h = default_header();
        h.retain(|c| c != &json!("中止要求"));
        h.push(json!("メモ"));
        let map = ColumnMap::from_header(&h, &HeaderNames::default())
            .unwrap_or_else(|e| panic!("a queue without 中止要求 is usable: {e}"));
        assert!(!map.has(Column::CancelRequest));
        let mut row: Vec<Cell> = vec![json!(""); 17];
        row[0] = json!("j-1");
        row[10] = json!("待機");
        row[16] = json!("a person's note in メモ");
        let s = parse_rows(&[row], 2, &map, &StateWords::default(), Tz::UTC);
        assert_eq!(
            s.rows[0].cancel_request, "",
            "the column right of the known ones is a person's, not 中止要求"
        );
        let written = map.sparse_row(
            &[
                (Column::CancelRequest, json!("x")),
                (Column::State, json!("待機")),
            ],
            Column::JobId,
        );
        assert_eq!(
            written.iter().filter(|c| c.is_some()).count(),
            1,
            "a cell of a column the queue lacks is never written: {written:?}"
        );
    }

    #[test]
    fn appends_start_below_any_blank_row_at_a_row_whose_column_a_is_filled() {
        // Rows 2–4 and 6–8 hold jobs, row 5 is blank; column A filled on every row.
        let all = [
            (2, true),
            (3, true),
            (4, true),
            (6, true),
            (7, true),
            (8, true),
        ];
        assert_eq!(append_anchor(&all), 8);
        // Column A empty on the last rows (a waiting row's ワーカー first): the next row up.
        let waiting_last = [(2, true), (3, true), (6, true), (7, false), (8, false)];
        assert_eq!(append_anchor(&waiting_last), 6);
        // Nothing filled below the blank row: from the header (the blank row takes them).
        let none_below = [(2, true), (4, false)];
        assert_eq!(append_anchor(&none_below), 1);
        assert_eq!(append_anchor(&[]), 1, "an empty queue: from the header");
    }

    #[test]
    fn a_sparse_row_reaches_the_column_its_reply_is_checked_by() {
        // jobId last, behind the result columns: the row must still reach it.
        let mut h = default_header();
        h.rotate_left(1);
        let map = ColumnMap::from_header(&h, &HeaderNames::default()).unwrap();
        let row = map.sparse_row(&[(Column::State, json!("完了"))], Column::JobId);
        assert_eq!(row.len(), 19, "the row reaches jobId in S: {row:?}");
        assert_eq!(row[map.index(Column::State) as usize], Some(json!("完了")));
        assert_eq!(
            row.iter().filter(|c| c.is_some()).count(),
            1,
            "only the written cell is set; the rest (jobId too) is left alone: {row:?}"
        );
        // jobId first: the row ends at the right-most written cell.
        let map = ColumnMap::from_header(&default_header(), &HeaderNames::default()).unwrap();
        let row = map.sparse_row(&[(Column::State, json!("完了"))], Column::JobId);
        assert_eq!(row.len(), map.index(Column::State) as usize + 1);
    }

    #[test]
    fn a_missing_header_is_named_with_what_was_found() {
        let h = header(&["jobId", "受付日時", "状態"]);
        let err = ColumnMap::from_header(&h, &HeaderNames::default()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("\"ワーカー\""), "{text}");
        assert!(text.contains("found: jobId, 受付日時, 状態"), "{text}");
        assert!(text.contains("'_ジョブキュー' row 1"), "{text}");
    }

    #[test]
    fn a_header_that_leaves_column_a_empty_is_an_error_naming_the_fix() {
        let mut h = default_header();
        h.insert(0, json!(""));
        let err = ColumnMap::from_header(&h, &HeaderNames::default()).unwrap_err();
        assert_eq!(
            err,
            LayoutError::BlankFirstColumn {
                sheet: QUEUE_SHEET.into()
            }
        );
        assert!(err.to_string().contains("give column A a header"), "{err}");
        h[0] = json!("メモ");
        assert!(
            ColumnMap::from_header(&h, &HeaderNames::default()).is_ok(),
            "a column of people's own in A is fine"
        );
    }

    #[test]
    fn a_header_present_twice_is_an_error() {
        let mut h = default_header();
        h.push(json!("状態"));
        let err = ColumnMap::from_header(&h, &HeaderNames::default()).unwrap_err();
        assert!(
            matches!(err, LayoutError::DuplicateHeader { ref name, .. } if name == "状態"),
            "{err}"
        );
    }

    #[test]
    fn state_words_are_configurable() {
        let words = StateWords {
            waiting: "queued".into(),
            ..StateWords::default()
        };
        assert_eq!(words.parse("queued"), Some(State::Waiting));
        assert_eq!(words.parse("queued "), None, "only the exact word counts");
        assert_eq!(
            words.parse("待機"),
            None,
            "the default word no longer applies"
        );
        assert_eq!(words.parse("実行中"), Some(State::Running));
    }

    #[test]
    fn worker_tags_round_trip_and_reject_foreign_text() {
        let tag = WorkerTag {
            daemon_id: "vm-1.example".into(),
            slot: 1,
            token: "3f9c2a1b".into(),
        };
        assert_eq!(tag.to_string(), "vm-1.example/1 #3f9c2a1b");
        assert_eq!(WorkerTag::parse(&tag.to_string()), Some(tag));
        assert_eq!(WorkerTag::parse("Apps Script"), None);
        assert_eq!(WorkerTag::parse("vm/x #t"), None);
    }

    fn parse(rows: Vec<Vec<Cell>>) -> Snapshot {
        let map = ColumnMap::from_header(&default_header(), &HeaderNames::default()).unwrap();
        parse_rows(
            &rows,
            2,
            &map,
            &StateWords::default(),
            chrono_tz::Asia::Tokyo,
        )
    }

    #[test]
    fn rows_parse_with_serial_and_string_dates() {
        let s = parse(vec![vec![
            json!("id-1"),
            json!(46356.5),
            json!(""),
            json!("パネルA"),
            json!(8),
            json!("A"),
            json!("集計"),
            json!("sleep"),
            json!("{\"seconds\":1}"),
            json!("heavy, continuation"),
            json!("実行中"),
            json!("2026/11/30 12:34:56"),
        ]]);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        let r = &s.rows[0];
        assert_eq!(r.row, 2);
        assert_eq!(
            r.received_at.map(|t| t.to_rfc3339()),
            Some("2026-11-30T03:00:00+00:00".into())
        );
        assert_eq!(
            r.started_at.map(|t| t.to_rfc3339()),
            Some("2026-11-30T03:34:56+00:00".into())
        );
        assert_eq!(
            r.requester_key(),
            None,
            "an empty requester is no requester"
        );
        assert_eq!(r.panel_row, Some(8));
        assert!(r.has_flag("heavy") && r.has_flag("continuation"));
        assert!(r.state.is(State::Running));
        assert_eq!(r.worker, "", "short rows read as empty cells");
    }

    #[test]
    fn unknown_states_and_missing_ids_are_reported_not_guessed() {
        let mut odd = vec![json!("id-2")];
        odd.resize(10, json!(""));
        odd.push(json!("保留中"));
        let s = parse(vec![
            vec![json!(""), json!(46356.5), json!("x@example.com")],
            vec![],
            odd,
        ]);
        assert_eq!(s.rows.len(), 1);
        assert_eq!(s.rows[0].state, RowState::Unknown("保留中".into()));
        let problems: Vec<String> = s.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("row 2") && problems[0].contains("jobId is empty"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("row 4") && problems[1].contains("\"保留中\""),
            "{problems:?}"
        );
    }

    #[test]
    fn an_unreadable_date_is_reported_and_the_row_kept() {
        let mut r = vec![json!("id-3"), json!("yesterday-ish")];
        r.resize(10, json!(""));
        r.push(json!("実行中"));
        let s = parse(vec![r]);
        assert_eq!(
            s.rows.len(),
            1,
            "a running row must stay visible so it still blocks its target"
        );
        assert_eq!(s.rows[0].received_at, None);
        assert!(
            s.problems[0].to_string().contains("受付日時"),
            "{:?}",
            s.problems
        );
    }
}
