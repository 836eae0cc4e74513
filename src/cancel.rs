//! Stopping a job on request (docs/design.md §2.1): the 中止要求 cell (who asked, and when),
//! and the メッセージ a cancelled job ends with.
//!
//! A request reaches the queue row from an intake (a ■ tick on a panel, the Apps Script
//! trigger), from `sheetq cancel` or from a daemon passing a ■ tick on to the daemon that runs
//! the job. What the daemons then do with it is decided where the row is read: a waiting row
//! ends キャンセル in a claim commit (`claim::plan_pass` leaves it out of the candidates), the
//! daemon that runs the job stops its process group, and a row whose daemon is dead ends
//! キャンセル instead of タイムアウト when it is rescued. Pure: text in, values out.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::queue::QueueRow;
use crate::sheet_time;

/// Who asked, when nobody can tell: a tick read by polling, an empty name.
pub const UNKNOWN: &str = "不明";

/// The line under 「中止: …」 of a job ended by a daemon that rescued it: the daemon that ran
/// it stopped answering, so whether it stopped cannot be known.
pub const UNCONFIRMED: &str =
    "ジョブを実行していたワーカーが応答しないため、実際に止まったかは確かめられません";

/// A name longer than this is cut: it goes into a cell and a log line, nowhere else.
const WHO_MAX_CHARS: usize = 100;

/// One request to stop a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Who asked, as shown: an address, `schedule:…`, a shell user, or [`UNKNOWN`]. Text from
    /// the sheet with controls and text-direction marks removed and its length capped.
    pub who: String,
    /// When, when the cell says so (it is for people: no decision reads it).
    pub at: Option<DateTime<Utc>>,
    /// The job it is meant for (`#<jobId>` at the end of the cell), when the cell names one.
    /// A request written by position (Apps Script, `sheetq cancel`) names its job, so that a
    /// sort that moved rows between the writer's read and its write leaves it on a row it
    /// does not apply to, instead of stopping another job.
    pub job: Option<String>,
}

/// Whether the 中止要求 text `text` asks to stop the job of the row it stands on, `job_id`:
/// it is not empty and names that job, or names none (written by hand).
pub fn applies(text: &str, job_id: &str) -> bool {
    let text = text.trim();
    !text.is_empty() && split_job(text).1.is_none_or(|j| j == job_id)
}

/// The request to stop `row`'s job, if its 中止要求 asks for that ([`applies`]); `seen`
/// stands for when, should the cell not say.
pub fn asked_of(row: &QueueRow, tz: Tz, seen: DateTime<Utc>) -> Option<Request> {
    if !applies(&row.cancel_request, &row.job_id) {
        return None;
    }
    Request::parse(&row.cancel_request, tz).or_else(|| Some(Request::new("", seen, &row.job_id)))
}

/// `text` without its trailing `#<jobId>`, and that jobId.
fn split_job(text: &str) -> (&str, Option<&str>) {
    match text.rsplit_once(char::is_whitespace) {
        Some((rest, last)) if last.len() > 1 && last.starts_with('#') => {
            (rest.trim_end(), Some(&last[1..]))
        }
        None if text.len() > 1 && text.starts_with('#') => ("", Some(&text[1..])),
        _ => (text, None),
    }
}

impl Request {
    /// A request to stop job `job`, made at `at` by `who` (empty: not known).
    pub fn new(who: &str, at: DateTime<Utc>, job: &str) -> Self {
        Self {
            who: clean_who(who),
            at: Some(at),
            job: Some(job.to_string()),
        }
    }

    /// Reads a 中止要求 cell: `None` when it is empty. `#<jobId>` at the end names the job;
    /// a date and time in the spreadsheet's zone before it (`2026/12/03 21:30:05`, as
    /// [`Request::cell_text`] writes them) say when; the rest is who. Any other text is a
    /// request too, by whoever it names.
    pub fn parse(text: &str, tz: Tz) -> Option<Self> {
        let (text, job) = split_job(text.trim());
        let job = job.map(str::to_string);
        if text.is_empty() && job.is_none() {
            return None;
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.len() >= 2 {
            let when = words[words.len() - 2..].join(" ");
            let cell = serde_json::Value::String(when);
            if let Ok(Some(at)) = sheet_time::cell_to_instant(&cell, tz) {
                return Some(Self {
                    who: clean_who(&words[..words.len() - 2].join(" ")),
                    at: Some(at),
                    job,
                });
            }
        }
        Some(Self {
            who: clean_who(text),
            at: None,
            job,
        })
    }

    /// The cell's text: `<who> yyyy/MM/dd HH:mm:ss #<jobId>`, the time in the spreadsheet's
    /// zone.
    pub fn cell_text(&self, tz: Tz) -> String {
        let mut text = self.who.clone();
        if let Some(at) = self.at {
            text = format!("{text} {}", sheet_time::format_datetime(at, tz));
        }
        if let Some(job) = &self.job {
            text = format!("{text} #{job}");
        }
        text
    }

    /// The メッセージ of the job it stopped: 「中止: <who> HH:mm」 (the time of the request,
    /// else `seen`, when the daemon saw it), then what the job printed last, if anything.
    pub fn message(&self, seen: DateTime<Utc>, tz: Tz, tail: &str) -> String {
        let head = format!(
            "中止: {} {}",
            self.who,
            sheet_time::format_hhmm(self.at.unwrap_or(seen), tz)
        );
        let tail = tail.trim();
        if tail.is_empty() {
            head
        } else {
            crate::sheet_text::limit_message(&format!("{head}\n{tail}"))
        }
    }
}

/// `who` as it may be shown: trimmed, without control or text-direction characters (a name
/// could otherwise make a log line or a cell read other than it is), at most
/// [`WHO_MAX_CHARS`] characters; [`UNKNOWN`] when nothing is left.
fn clean_who(who: &str) -> String {
    let cleaned: String = who
        .chars()
        .filter(|c| !crate::sheet_text::disguises(*c))
        .take(WHO_MAX_CHARS)
        .collect();
    match cleaned.trim() {
        "" => UNKNOWN.to_string(),
        t => t.to_string(),
    }
}

/// Whether someone asked to stop `row`'s job (its 中止要求 cell asks, naming this job or
/// none: [`applies`]): never claimed, and it ends キャンセル instead of running or timing
/// out.
pub fn asked(row: &crate::queue::QueueRow) -> bool {
    applies(&row.cancel_request, &row.job_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const TOKYO: Tz = chrono_tz::Asia::Tokyo;

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        TOKYO
            .with_ymd_and_hms(2026, 12, 3, h, m, 5)
            .single()
            .expect("a plain Tokyo time")
            .with_timezone(&Utc)
    }

    #[test]
    fn a_request_written_by_sheetq_reads_back_as_who_when_and_which_job() {
        let asked = Request::new("taro@example.com", at(21, 30), "job-1");
        let text = asked.cell_text(TOKYO);
        assert_eq!(text, "taro@example.com 2026/12/03 21:30:05 #job-1");
        assert_eq!(Request::parse(&text, TOKYO), Some(asked));
    }

    #[test]
    fn a_request_applies_to_the_job_it_names_or_to_its_row_when_it_names_none() {
        let text = "taro@example.com 2026/12/03 21:30:05 #job-1";
        assert!(applies(text, "job-1"));
        assert!(
            !applies(text, "job-2"),
            "a request a sort left on another job's row stops nothing"
        );
        assert!(
            applies("止めて", "job-2"),
            "a request written by hand names no job"
        );
        assert!(!applies("  ", "job-1"));
    }

    #[test]
    fn an_empty_cell_is_no_request_and_other_text_is_a_request_by_whoever_it_names() {
        assert_eq!(Request::parse("  ", TOKYO), None);
        let r = Request::parse("止めてください", TOKYO).expect("any text asks");
        assert_eq!(
            (r.who.as_str(), r.at, r.job),
            ("止めてください", None, None)
        );
        let r = Request::parse("2026/12/03 21:30:05", TOKYO).expect("a bare time asks");
        assert_eq!((r.who.as_str(), r.at), (UNKNOWN, Some(at(21, 30))));
        let r = Request::parse("#job-9", TOKYO).expect("a bare job asks");
        assert_eq!((r.who.as_str(), r.job.as_deref()), (UNKNOWN, Some("job-9")));
    }

    #[test]
    fn the_message_names_who_and_when_then_the_output_tail() {
        let asked = Request::new("", at(9, 7), "j");
        assert_eq!(asked.message(at(10, 0), TOKYO, ""), "中止: 不明 09:07");
        let by = Request::parse("hanako@example.com", TOKYO).expect("a request");
        assert_eq!(
            by.message(at(10, 0), TOKYO, "step 3 of 5\n"),
            "中止: hanako@example.com 10:00\nstep 3 of 5"
        );
    }

    #[test]
    fn a_name_cannot_carry_line_breaks_or_direction_marks_into_a_cell_or_log() {
        let r = Request::new("evil\n\u{202E}moc.elpmaxe@x", at(9, 0), "j");
        assert_eq!(r.who, "evilmoc.elpmaxe@x");
        let long = "a".repeat(500);
        assert_eq!(Request::new(&long, at(9, 0), "j").who.chars().count(), 100);
    }
}
