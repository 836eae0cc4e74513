//! `sheetq schedules`: each `[[schedules]]` entry of the config with its next occurrences,
//! in the spreadsheet's time zone, and the jobId each will be queued under.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::schedule::{occurrence_job_id, ScheduleDef};

/// The listing of `schedules` after `now`: `count` occurrences each, in `tz`.
pub fn listing(
    schedules: &[ScheduleDef],
    spreadsheet_id: &str,
    tz: Tz,
    now: DateTime<Utc>,
    count: usize,
) -> String {
    if schedules.is_empty() {
        return "no [[schedules]] in the config\n".to_string();
    }
    let mut out = String::new();
    for s in schedules {
        let catch_up = s
            .catch_up
            .map(|d| format!(", catch_up {}", humantime::format_duration(d)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}: \"{}\" runs {} on {} as {} ({tz}{catch_up})",
            s.name,
            s.cron,
            s.function,
            s.target,
            s.requester()
        );
        for at in s.next_after(tz, now, count) {
            let local = at.with_timezone(&tz);
            let _ = writeln!(
                out,
                "  {}  jobId {}",
                local.format("%Y-%m-%d %H:%M %Z (%:z)"),
                occurrence_job_id(spreadsheet_id, &s.name, at)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    #[test]
    fn each_schedule_lists_its_next_runs_in_the_sheets_zone_with_their_job_ids() {
        let table: toml::Table = toml::from_str(
            "[[schedules]]\nname = \"nightly\"\ncron = \"30 1 * * *\"\ntarget = \"サーバーA\"\nfunction = \"バックアップ\"\ncatch_up = \"2h\"",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let schedules = crate::schedule::parse_schedules(table.get("schedules"))
            .unwrap_or_else(|e| panic!("{e:#?}"));
        let tz: Tz = "America/New_York".parse().unwrap_or_else(|e| panic!("{e}"));
        // The evening before the night New York falls back.
        let now = Utc
            .with_ymd_and_hms(2026, 10, 31, 12, 0, 0)
            .single()
            .unwrap_or_else(|| panic!("an instant"));
        let text = listing(&schedules, "sid", tz, now, 3);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "nightly: \"30 1 * * *\" runs バックアップ on サーバーA as schedule:nightly (America/New_York, catch_up 2h)"
        );
        assert!(
            lines[1].starts_with("  2026-11-01 01:30 EDT (-04:00)  jobId "),
            "{text}"
        );
        assert!(
            lines[2].starts_with("  2026-11-02 01:30 EST (-05:00)  jobId "),
            "the repeated 01:30 EST of the fall-back night is not a second run: {text}"
        );
        let first = Utc
            .with_ymd_and_hms(2026, 11, 1, 5, 30, 0)
            .single()
            .unwrap_or_else(|| panic!("an instant"));
        assert!(
            lines[1].ends_with(&occurrence_job_id("sid", "nightly", first)),
            "{text}"
        );
    }
}
