//! `sheetq logs JOBID [--follow]`: what a job printed. On the machine that runs (or ran)
//! the job, from its full output under `state_dir/logs`; elsewhere, from its row of
//! `_ジョブログ` (the tail the sheet keeps), found by jobId, never by position.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::AdminError;
use crate::joblog::{self, LogColumn, LogLayout, LOG_SHEET};
use crate::queue;
use crate::sheets::Sheets;

/// How often `--follow` looks again: at a file, and at the sheet (two reads each look).
pub const FILE_EVERY: Duration = Duration::from_millis(500);
pub const SHEET_EVERY: Duration = Duration::from_secs(10);

/// Prints job `job_id`'s output to `out` from its file under `state_dir`, when this machine
/// has one; `Ok(false)` when it has none. With `follow`, goes on printing what the job adds
/// until it ends.
pub async fn from_file(
    state_dir: &Path,
    job_id: &str,
    follow: bool,
    out: &mut dyn Write,
) -> Result<bool, AdminError> {
    let Some(path) = joblog::file_path(state_dir, job_id) else {
        return Ok(false);
    };
    let mut printed = 0usize;
    loop {
        // The end marker first: output written before it was made is all in the file.
        let ended = joblog::end_path(&path).exists();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(printed > 0),
            Err(e) => {
                return Err(AdminError::Problems(vec![format!(
                    "cannot read {}: {e}",
                    path.display()
                )]))
            }
        };
        // A character the job is halfway through writing waits for its other bytes, unless
        // nothing more will come.
        let done = !follow || ended;
        let upto = if done {
            bytes.len()
        } else {
            printed + complete_prefix(&bytes[printed..])
        };
        if upto > printed {
            print_lossy(out, &bytes[printed..upto])?;
            printed = upto;
        }
        if !follow || ended {
            return Ok(true);
        }
        tokio::time::sleep(FILE_EVERY).await;
    }
}

/// Prints job `job_id`'s output from its `_ジョブログ` row. With `follow`, looks again every
/// [`SHEET_EVERY`] and prints what was added, until the row shows an end.
pub async fn from_sheet(
    sheets: &dyn Sheets,
    job_id: &str,
    follow: bool,
    out: &mut dyn Write,
) -> Result<(), AdminError> {
    let meta = sheets.metadata().await?;
    let sheet = meta.sheet(LOG_SHEET).ok_or_else(|| {
        AdminError::Problems(vec![format!(
            "the spreadsheet has no '{LOG_SHEET}' sheet, so no job's output is kept in it; `sheetq init` makes it (the output of jobs run since is under state_dir on the machine that ran them)"
        )])
    })?;
    let header = sheets.read(&[crate::a1::range(LOG_SHEET, "1:1")]).await?;
    let log = LogLayout::from_header(sheet.sheet_id, &crate::sheets::first_row(&header))
        .map_err(|e| AdminError::Problems(vec![e]))?;
    let mut printed = String::new();
    loop {
        let (output, ended) = read_row(sheets, &log, job_id).await?;
        let new = new_part(&printed, &output);
        if !new.is_empty() {
            out.write_all(new.as_bytes()).map_err(io_problem)?;
            out.flush().map_err(io_problem)?;
        }
        printed = output;
        if !follow || ended {
            if !printed.is_empty() && !printed.ends_with('\n') {
                writeln!(out).map_err(io_problem)?;
            }
            return Ok(());
        }
        tokio::time::sleep(SHEET_EVERY).await;
    }
}

/// The output and whether the job ended, from the log row holding `job_id` now: one read of
/// the jobId column, one of that row's output and end (rows may move between the two; the
/// second read's jobId is checked, and a moved row is looked up again).
async fn read_row(
    sheets: &dyn Sheets,
    log: &LogLayout,
    job_id: &str,
) -> Result<(String, bool), AdminError> {
    let letters = |c: LogColumn| crate::a1::column_letters(log.index(c));
    for _ in 0..3 {
        let id = letters(LogColumn::JobId);
        let ids = sheets
            .read(&[crate::a1::range(LOG_SHEET, &format!("{id}2:{id}"))])
            .await?;
        let ids: Vec<String> = ids
            .first()
            .map(|v| {
                v.values
                    .iter()
                    .map(|r| r.first().map(queue::cell_text).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        // The newest row of the job (rows are inserted at the top): the first found.
        let Some(i) = ids.iter().position(|t| t == job_id) else {
            return Err(AdminError::Problems(vec![format!(
                "job {job_id:?} has no row in '{LOG_SHEET}': it has not started, ran before the sheet existed, left with the archive, or the jobId is mistyped"
            )]));
        };
        let row = i as u32 + 2;
        let cells = [LogColumn::JobId, LogColumn::Output, LogColumn::FinishedAt];
        let ranges: Vec<String> = cells
            .iter()
            .map(|c| crate::a1::range(LOG_SHEET, &format!("{l}{row}", l = letters(*c))))
            .collect();
        let read = sheets.read(&ranges).await?;
        let cell = |k: usize| {
            read.get(k)
                .and_then(|v| v.values.first())
                .and_then(|r| r.first())
                .map(queue::cell_text)
                .unwrap_or_default()
        };
        if cell(0) == job_id {
            return Ok((cell(1), !cell(2).trim().is_empty()));
        }
    }
    Err(AdminError::Problems(vec![format!(
        "the rows of '{LOG_SHEET}' kept moving while job {job_id}'s row was read; try again"
    )]))
}

/// What `now` adds to `printed`: the output is a tail, so its start may have moved on since
/// (and carries the mark of a cut); what follows the longest end of `printed` that `now`
/// starts with is new.
fn new_part<'a>(printed: &str, now: &'a str) -> &'a str {
    let marker = crate::commands::output::TRUNCATED_START;
    let p = printed.strip_prefix(marker).unwrap_or(printed);
    let n = now.strip_prefix(marker).unwrap_or(now);
    if p.is_empty() {
        return now;
    }
    let longest = p.len().min(n.len());
    (1..=longest)
        .rev()
        .filter(|k| p.is_char_boundary(p.len() - k) && n.is_char_boundary(*k))
        .find(|k| n.starts_with(&p[p.len() - k..]))
        .map_or(n, |k| &n[k..])
}

/// How many bytes of `bytes` end on a whole character: all but a UTF-8 sequence cut short
/// at the end (bytes that are no UTF-8 at all count as whole: they print as U+FFFD).
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(e) => {
            e.valid_up_to()
                + e.error_len().unwrap_or(0)
                + complete_prefix(&bytes[e.valid_up_to() + e.error_len().unwrap_or(0)..])
        }
    }
}

fn print_lossy(out: &mut dyn Write, bytes: &[u8]) -> Result<(), AdminError> {
    out.write_all(String::from_utf8_lossy(bytes).as_bytes())
        .and_then(|()| out.flush())
        .map_err(io_problem)
}

fn io_problem(e: std::io::Error) -> AdminError {
    AdminError::Problems(vec![format!("cannot print the output: {e}")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_prints_only_what_a_moving_tail_added() {
        assert_eq!(new_part("", "abc"), "abc");
        assert_eq!(new_part("abc", "abcdef"), "def");
        assert_eq!(
            new_part(
                "(truncated) …line 1\nline 2\n",
                "(truncated) …ne 2\nline 3\n"
            ),
            "line 3\n",
            "the tail's start moved: the overlap is found by what was printed last"
        );
    }

    #[test]
    fn a_character_cut_at_the_end_waits_for_its_other_bytes() {
        let text = "ok あ".as_bytes();
        assert_eq!(complete_prefix(text), text.len());
        assert_eq!(
            complete_prefix(&text[..text.len() - 1]),
            3,
            "あ is cut: wait"
        );
        assert_eq!(
            complete_prefix(b"a\xffb\xe3"),
            3,
            "a byte that is no UTF-8 prints; a sequence cut at the end waits"
        );
    }

    #[tokio::test]
    async fn a_file_is_printed_with_bytes_that_are_not_utf8_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = joblog::file_path(dir.path(), "j1").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"ok \xff\n").unwrap();
        let mut out = Vec::new();
        assert!(from_file(dir.path(), "j1", false, &mut out).await.unwrap());
        assert_eq!(String::from_utf8(out).unwrap(), "ok \u{FFFD}\n");
        let mut none = Vec::new();
        assert!(!from_file(dir.path(), "j2", false, &mut none).await.unwrap());
        assert!(
            !from_file(dir.path(), "../j1", false, &mut none)
                .await
                .unwrap(),
            "a jobId that is no plain name is no file"
        );
    }
}
