//! What a job printed (docs/design.md §1.6): the capture of an `exec` job's merged output
//! while it runs, the hidden sheet `_ジョブログ` (one row per job run: jobId, target,
//! function, start, end, the output's tail), and the full output in `state_dir/logs`.
//!
//! The log row is made in the claim commit (an inserted row under the header, bound to the
//! job like its queue row, docs/design.md §4), refreshed riding the heartbeat's write while
//! the job runs, and written with the job's result: it costs no request of its own. A row
//! is found by its binding, never by its position; a person may sort the sheet.

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::sheet_text::TRUNCATED_START;
use crate::sheets::Cell;

/// Title of the hidden log sheet.
pub const LOG_SHEET: &str = "_ジョブログ";

/// The log sheet's header, in the order `init` writes it. Columns are found by these names.
pub const HEADER: [&str; 6] = [
    "jobId",
    "対象ラベル",
    "機能ラベル",
    "開始日時",
    "終了日時",
    "出力",
];

/// Characters of output kept in a log row by default (`log_chars`); a cell holds 50,000.
pub const DEFAULT_CHARS: u32 = 20_000;

/// Most characters `log_chars` may ask for: a cell's 50,000, less room for the marker of a
/// cut beginning.
pub const MAX_CHARS: u32 = 49_000;

/// Bytes of a job's full output kept in its file under `state_dir/logs`; past this, what
/// follows is dropped and the file says so.
pub const FILE_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// A column of the log sheet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogColumn {
    JobId,
    Target,
    Function,
    StartedAt,
    FinishedAt,
    Output,
}

impl LogColumn {
    pub const ALL: [LogColumn; 6] = [
        LogColumn::JobId,
        LogColumn::Target,
        LogColumn::Function,
        LogColumn::StartedAt,
        LogColumn::FinishedAt,
        LogColumn::Output,
    ];

    pub fn name(self) -> &'static str {
        HEADER[self as usize]
    }
}

/// The log row's 機能: the function, and its inputs after ` · ` when it has any
/// (`デプロイ · version=1.2.4`), so that the output is read with the values it was run with.
pub fn function_text(function: &str, inputs: &str) -> String {
    if inputs.is_empty() {
        function.to_string()
    } else {
        format!("{function} · {inputs}")
    }
}

/// Where the log sheet is and where its columns stand, from its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLayout {
    pub sheet_id: i32,
    index: [u32; 6],
}

impl LogLayout {
    /// Finds every column by its header name, in any order; an error names the missing ones.
    pub fn from_header(sheet_id: i32, header: &[Cell]) -> Result<Self, String> {
        let names: Vec<String> = header.iter().map(crate::queue::cell_text).collect();
        let mut index = [0u32; 6];
        let mut missing = Vec::new();
        for column in LogColumn::ALL {
            match names.iter().position(|n| n.trim() == column.name()) {
                Some(i) => index[column as usize] = i as u32,
                None => missing.push(column.name()),
            }
        }
        if missing.is_empty() {
            Ok(Self { sheet_id, index })
        } else {
            Err(format!(
                "'{LOG_SHEET}' has no column {}; job output is not kept in the sheet until its header is put back (`sheetq init` writes it on an empty sheet)",
                missing.join(", ")
            ))
        }
    }

    /// Zero-based column index of `column`.
    pub fn index(&self, column: LogColumn) -> u32 {
        self.index[column as usize]
    }

    /// A row of cells from column A to the last of `cells` and the jobId column (so that a
    /// write's reply shows whose row it landed on), `None` (left as it is) between.
    pub fn sparse_row(&self, cells: &[(LogColumn, Cell)]) -> Vec<Option<Cell>> {
        let width = cells
            .iter()
            .map(|(c, _)| self.index(*c) + 1)
            .chain(std::iter::once(self.index(LogColumn::JobId) + 1))
            .max()
            .unwrap_or(0);
        let mut row = vec![None; width as usize];
        for (c, v) in cells {
            row[self.index(*c) as usize] = Some(v.clone());
        }
        row
    }

    /// The jobId a written row's values show, as a reply gives them back.
    pub fn job_id_of(&self, row: &[Cell]) -> String {
        row.get(self.index(LogColumn::JobId) as usize)
            .map(crate::queue::cell_text)
            .unwrap_or_default()
    }
}

/// The id of the binding on a job's log row, derived from its queue row's binding id, so
/// that whoever knows the claim token knows both. Never the queue binding's own id.
pub fn binding_id(queue_binding: i32) -> i32 {
    let mixed = (queue_binding as u32).rotate_left(16) ^ 0x2C5E_7A19;
    let id = (mixed & 0x7FFF_FFFF) as i32;
    if id == 0 || id == queue_binding {
        id ^ 0x0100_0001
    } else {
        id
    }
}

/// Whether `job_id` may go into a formula or a file name: letters, digits, `-` and `_`, at
/// most 64 (a jobId comes from the sheet; one sheetq or the Apps Script made is a UUID).
pub fn plain_job_id(job_id: &str) -> bool {
    !job_id.is_empty()
        && job_id.len() <= 64
        && job_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `'<title>'!$X:$X`, a whole column of a sheet, for a formula.
fn whole_column(title: &str, index: u32) -> String {
    let x = crate::a1::column_letters(index);
    format!("{}!${x}:${x}", crate::a1::quote_title(title))
}

/// The formula of a job's 結果URL when its command gives no URL: a link to its log row,
/// found by jobId when the cell is shown, so that it leads to the right row after people
/// sort the log or the archive deletes rows above it; empty once the row is gone. `None`
/// for a jobId that is no plain name ([`plain_job_id`]).
pub fn result_url_formula(spreadsheet_id: &str, log: &LogLayout, job_id: &str) -> Option<String> {
    if !plain_job_id(job_id) || !plain_job_id(spreadsheet_id) {
        return None;
    }
    Some(format!(
        "=IFERROR(HYPERLINK(\"https://docs.google.com/spreadsheets/d/{spreadsheet_id}/edit#gid={gid}&range=A\"&MATCH(\"{job_id}\",{ids},0)),\"\")",
        gid = log.sheet_id,
        ids = whole_column(LOG_SHEET, log.index(LogColumn::JobId)),
    ))
}

/// What a panel's 結果 shows while its job's メッセージ is still empty.
pub const OUTPUT_LABEL: &str = "📄 出力";

/// The formula of a panel row's 結果 for job `job_id`: its queue row's メッセージ (the first
/// `max_chars` characters; [`OUTPUT_LABEL`] while empty), linked to its 結果URL: the
/// command's own URL, else the log row ([`result_url_formula`]). Both are looked up by jobId
/// when the cell is shown, so sorts of the queue or the log never make it point elsewhere;
/// empty once the row is archived. `None` for a jobId that is no plain name.
pub fn panel_result_formula(
    queue: &crate::queue::ColumnMap,
    job_id: &str,
    max_chars: usize,
) -> Option<String> {
    use crate::queue::{Column, QUEUE_SHEET};
    if !plain_job_id(job_id) {
        return None;
    }
    let at = format!(
        "MATCH(\"{job_id}\",{},0)",
        whole_column(QUEUE_SHEET, queue.index(Column::JobId))
    );
    let of = |c: Column| format!("INDEX({},{at})", whole_column(QUEUE_SHEET, queue.index(c)));
    let message = of(Column::Message);
    Some(format!(
        "=IFERROR(HYPERLINK({url},IF({message}=\"\",\"{OUTPUT_LABEL}\",LEFT({message},{max_chars}))),\"\")",
        url = of(Column::ResultUrl),
    ))
}

/// The file a job's full output goes to, when `job_id` may name a file: a jobId comes from
/// the sheet, so only letters, digits, `-` and `_` (at most 64) are taken as a file name.
pub fn file_path(state_dir: &Path, job_id: &str) -> Option<PathBuf> {
    plain_job_id(job_id).then(|| state_dir.join("logs").join(format!("{job_id}.log")))
}

/// The marker file that says a job's output file is complete (the job ended).
pub fn end_path(log_file: &Path) -> PathBuf {
    log_file.with_extension("end")
}

/// The runs of `true` in `old` (one flag per row, the first at zero-based row `first`) as
/// zero-based half-open row ranges, bottom first, so that deleting them in that order in one
/// batch leaves each later range where it was read.
pub fn runs_of(old: &[bool], first: u32) -> Vec<(u32, u32)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, o) in old.iter().chain(std::iter::once(&false)).enumerate() {
        let row = first + i as u32;
        match (o, start) {
            (true, None) => start = Some(row),
            (false, Some(s)) => {
                runs.push((s, row));
                start = None;
            }
            _ => {}
        }
    }
    runs.reverse();
    runs
}

/// Removes output files (and their end markers) last written more than `older_than` ago,
/// but not those of the jobs in `running` (a quiet job writes nothing for a while); returns
/// how many logs went.
pub fn sweep_files(
    state_dir: &Path,
    older_than: std::time::Duration,
    running: &dyn Fn(&str) -> bool,
) -> std::io::Result<usize> {
    let dir = state_dir.join("logs");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path
            .file_stem()
            .and_then(|s| s.to_str())
            .is_some_and(running)
        {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > older_than);
        if old
            && std::fs::remove_file(&path).is_ok()
            && path.extension().is_some_and(|e| e == "log")
        {
            removed += 1;
        }
    }
    Ok(removed)
}

/// A running job's output as it arrives: stdout and stderr merged in the order their chunks
/// came, the tail kept for the sheet, everything (up to [`FILE_MAX_BYTES`]) in a file.
/// Cheap to clone; clones share one capture.
#[derive(Debug, Clone)]
pub struct Capture {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    tail: VecDeque<u8>,
    cap: usize,
    dropped: bool,
    /// Bumped at every chunk: whether there is something new to show.
    version: u64,
    file: Option<(std::fs::File, PathBuf)>,
    file_bytes: u64,
    /// The output file's path, kept after the file is closed at its cap.
    path: Option<PathBuf>,
}

impl Capture {
    /// A capture keeping `chars` characters for the sheet, writing to `file` when given (its
    /// directory is made; a file that cannot be opened is a warning, not a failed job).
    pub fn new(chars: u32, file: Option<PathBuf>) -> Self {
        let file = file.and_then(|path| {
            // A job run again (its row put back to 待機) starts a new file, not yet ended.
            let _ = std::fs::remove_file(end_path(&path));
            let opened = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::File::create(&path));
            match opened {
                Ok(f) => Some((f, path)),
                Err(e) => {
                    tracing::warn!(error = %e, path = %path.display(), "cannot write the job's output file; it is kept in the sheet only");
                    None
                }
            }
        });
        let path = file.as_ref().map(|(_, p)| p.clone());
        Self {
            inner: Arc::new(Mutex::new(Inner {
                path,
                tail: VecDeque::new(),
                // A character is at most 4 bytes: this many bytes hold `chars` of them.
                cap: chars as usize * 4,
                dropped: false,
                version: 0,
                file,
                file_bytes: 0,
            })),
        }
    }

    /// A capture that keeps nothing (logs off, or a job that prints nothing of interest).
    pub fn none() -> Self {
        Self::new(0, None)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one chunk of output, from either stream.
    pub fn push(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut inner = self.lock();
        inner.version += 1;
        inner.write_file(bytes);
        let cap = inner.cap;
        if cap == 0 {
            return;
        }
        let bytes = if bytes.len() > cap {
            inner.dropped = true;
            &bytes[bytes.len() - cap..]
        } else {
            bytes
        };
        let overflow = (inner.tail.len() + bytes.len()).saturating_sub(cap);
        if overflow > 0 {
            inner.dropped = true;
            inner.tail.drain(..overflow);
        }
        inner.tail.extend(bytes);
    }

    /// A count that changes whenever output arrives.
    pub fn version(&self) -> u64 {
        self.lock().version
    }

    /// The kept output as text, at most `chars` characters: bytes that are not UTF-8 shown
    /// as replacement characters, and a cut beginning marked.
    pub fn text(&self, chars: u32) -> String {
        let inner = self.lock();
        let (a, b) = inner.tail.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let mut cut = inner.dropped;
        drop(inner);
        // A character cut at the start of the kept bytes is skipped, not shown as garbage.
        let start = if cut {
            bytes
                .iter()
                .take(3)
                .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
                .count()
        } else {
            0
        };
        let text = String::from_utf8_lossy(&bytes[start..]);
        let count = text.chars().count();
        let chars = chars as usize;
        let text: String = if count > chars {
            cut = true;
            text.chars().skip(count - chars).collect()
        } else {
            text.into_owned()
        };
        if cut {
            format!("{TRUNCATED_START}{text}")
        } else {
            text
        }
    }

    /// The job ended: the file is flushed and marked complete (`sheetq logs --follow` stops).
    pub fn finish(&self) {
        let mut inner = self.lock();
        if let Some((file, _)) = inner.file.as_mut() {
            let _ = file.flush();
        }
        inner.file = None;
        if let Some(path) = &inner.path {
            let _ = std::fs::write(end_path(path), b"");
        }
    }
}

impl Inner {
    fn write_file(&mut self, bytes: &[u8]) {
        let Some((file, path)) = self.file.as_mut() else {
            return;
        };
        let room = FILE_MAX_BYTES.saturating_sub(self.file_bytes);
        let take = bytes.len().min(room as usize);
        let mut result = file.write_all(&bytes[..take]);
        self.file_bytes += take as u64;
        let full = take < bytes.len();
        if full && result.is_ok() {
            result = write!(
                file,
                "\n(sheetq: the output past {} MiB is not kept in this file)\n",
                FILE_MAX_BYTES / (1024 * 1024)
            );
        }
        if let Err(e) = &result {
            tracing::warn!(error = %e, path = %path.display(), "cannot write the job's output file; it is kept in the sheet only");
        }
        if full || result.is_err() {
            self.file = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_found_by_name_in_any_order() {
        let header: Vec<Cell> = [
            "出力",
            "jobId",
            "メモ",
            "終了日時",
            "開始日時",
            "機能ラベル",
            "対象ラベル",
        ]
        .into_iter()
        .map(Cell::from)
        .collect();
        let layout = LogLayout::from_header(7, &header).unwrap();
        assert_eq!(layout.index(LogColumn::Output), 0);
        assert_eq!(layout.index(LogColumn::JobId), 1);
        assert_eq!(
            layout.sparse_row(&[(LogColumn::JobId, Cell::from("j"))]),
            vec![None, Some(Cell::from("j"))],
            "only the named cells are written; the rest stay as they are"
        );
        assert_eq!(
            layout.sparse_row(&[(LogColumn::Output, Cell::from("o"))]),
            vec![Some(Cell::from("o")), None],
            "a write reaches the jobId column, for its reply"
        );
        let err = LogLayout::from_header(7, &header[..2]).unwrap_err();
        assert!(
            err.contains("終了日時") && err.contains("sheetq init"),
            "{err}"
        );
    }

    #[test]
    fn the_log_binding_is_derived_and_never_the_queue_binding() {
        for id in [1, 2, 0x3f9c2a1b, i32::MAX, 0x2C5E_7A19, 0x7A19_2C5E] {
            let log = binding_id(id);
            assert!(log > 0 && log != id, "{id:#x} -> {log:#x}");
            assert_eq!(
                log,
                binding_id(id),
                "the same claim always names the same row"
            );
        }
    }

    #[test]
    fn output_keeps_the_tail_marks_the_cut_and_replaces_bytes_that_are_not_utf8() {
        let c = Capture::new(10, None);
        c.push(b"line one\n");
        assert_eq!(c.text(10), "line one\n");
        c.push(b"\xff\xfe ok\n");
        let text = c.text(10);
        assert!(text.starts_with(TRUNCATED_START), "{text:?}");
        assert!(text.ends_with("\u{FFFD}\u{FFFD} ok\n"), "{text:?}");
        let big = Capture::new(DEFAULT_CHARS, None);
        big.push("あ".repeat(30_000).as_bytes());
        let text = big.text(DEFAULT_CHARS);
        assert_eq!(
            text.chars().count(),
            DEFAULT_CHARS as usize + TRUNCATED_START.chars().count(),
            "the last {DEFAULT_CHARS} characters, whole, after the marker"
        );
        assert!(!text.contains('\u{FFFD}'), "no character cut in half");
    }

    #[test]
    fn the_file_keeps_everything_up_to_its_cap_and_marks_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_path(dir.path(), "job-1").unwrap();
        let c = Capture::new(5, Some(path.clone()));
        c.push(b"0123456789");
        c.finish();
        assert_eq!(std::fs::read(&path).unwrap(), b"0123456789");
        assert!(
            end_path(&path).exists(),
            "the end marker says it is complete"
        );
        assert_eq!(c.text(5), format!("{TRUNCATED_START}56789"));
    }

    #[test]
    fn old_log_rows_are_deleted_bottom_run_first() {
        let old = [true, true, false, true, false, false, true];
        assert_eq!(runs_of(&old, 1), vec![(7, 8), (4, 5), (1, 3)]);
        assert!(runs_of(&[false, false], 1).is_empty());
    }

    #[test]
    fn a_job_id_that_is_no_plain_name_gets_no_file() {
        let dir = Path::new("/state");
        for bad in ["", "../etc/passwd", "a/b", "a b", &"x".repeat(65)] {
            assert_eq!(file_path(dir, bad), None, "{bad:?}");
        }
        assert_eq!(
            file_path(dir, "3f9c2a1b-0000-4000-8000-000000000000"),
            Some(PathBuf::from(
                "/state/logs/3f9c2a1b-0000-4000-8000-000000000000.log"
            ))
        );
    }
}
