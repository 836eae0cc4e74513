//! The `[[schedules]]` of `sheetq.toml`: jobs queued by the clock. This module owns their
//! validation, when each occurrence falls in the spreadsheet's time zone (daylight saving
//! included), the jobId of an occurrence, and which occurrence is due now; pure, the caller
//! passes the time zone and the clock.
//!
//! A pattern is five cron fields (minute, hour, day of month, month, day of week) or a
//! nickname (`@hourly`, `@daily`/`@midnight`, `@weekly`, `@monthly`, `@yearly`/`@annually`);
//! no seconds and no year field. The `croner` crate parses it, with its defaults: when both
//! the day of month and the day of week are restricted (neither is `*` or `?`), a day that
//! matches either runs (Vixie cron's OR), and `+` before the day of week asks for both
//! (`0 9 1-7 * +MON` is the first Monday); unlike Vixie cron, a stepped star such as `*/2`
//! counts as restricted. Its extras `L`, `W` and `#` are accepted as it documents them.
//!
//! croner is only asked which local wall-clock minutes match, on a `NaiveDateTime` that has
//! no daylight saving, and sheetq's own rules turn each into an instant (see
//! `run_instant`): croner's rules for zoned times differ for interval patterns (it skips
//! `*/15` in a spring-forward gap and runs it twice in a repeated hour), and one rule for
//! every pattern is what an operator can predict.

use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use croner::{Cron, Direction};
use uuid::Uuid;

/// The keys a `[[schedules]]` table may have.
const KEYS: &[&str] = &["name", "cron", "target", "function", "catch_up", "inputs"];

/// Nicknames and the five fields each stands for.
const NICKNAMES: &[(&str, &str)] = &[
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// The five fields, named for messages, with the values each takes.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31 (or L, nW)"),
    ("month", "1-12 or JAN-DEC"),
    ("day of week", "0-7 or SUN-SAT, 7 = 0 = Sunday (or nL, n#k)"),
];

/// The fix that ends every message about a pattern.
const CRON_HINT: &str =
    "five fields, e.g. \"30 2 * * *\", or @daily/@hourly/@weekly/@monthly/@yearly";

/// Most occurrences one call lists: a `* * * * *` asked about a year stops here.
pub const MAX_OCCURRENCES: usize = 10_000;

/// The longest run of local times a daylight-saving change (or a zone's change of offset)
/// skips; Samoa skipped a whole day in 2011.
const MAX_GAP: TimeDelta = TimeDelta::days(2);

/// The namespace of occurrence jobIds. Fixed for good: changing it changes every jobId, and
/// daemons of two versions would then queue the same occurrence twice.
const JOB_ID_NAMESPACE: Uuid = Uuid::from_u128(0x9b38e89e_72a2_48dd_a76f_a2ad9290dc65);

/// One validated `[[schedules]]` entry.
#[derive(Debug, Clone)]
pub struct ScheduleDef {
    /// Unique among the schedules; goes into the jobId and the 依頼者 (`schedule:<name>`).
    pub name: String,
    /// The pattern as written in the file, for messages and listings.
    pub cron: String,
    /// Carried as written; whether the config has this target is checked elsewhere.
    pub target: String,
    /// Carried as written; whether the config has this function is checked elsewhere.
    pub function: String,
    /// How old an occurrence a daemon that was not running may still queue; `None`: only
    /// one that just fell due (see [`ScheduleDef::due`]).
    pub catch_up: Option<Duration>,
    /// Values of the function's inputs (`inputs = { version = "1.2.4" }`), checked by their
    /// rules when the config is read; the inputs not given take their defaults.
    pub inputs: serde_json::Map<String, serde_json::Value>,
    pattern: Cron,
}

impl ScheduleDef {
    /// The argsJSON of this schedule's jobs of function `f`: its args, with the schedule's
    /// inputs checked by their rules (and the others' defaults) over them; the refusal names
    /// the input and the rule.
    pub fn args_json_of(&self, f: &crate::function::FunctionDef) -> Result<String, String> {
        for name in self.inputs.keys() {
            if !f.inputs.iter().any(|d| &d.name == name) {
                let known: Vec<&str> = f.inputs.iter().map(|d| d.name.as_str()).collect();
                return Err(format!(
                    "inputs.{name}: function {:?} has {}",
                    f.label,
                    if known.is_empty() {
                        "no inputs".to_string()
                    } else {
                        format!("the inputs {}", known.join(", "))
                    }
                ));
            }
        }
        let values = crate::inputs::values_of(&f.inputs, &self.inputs, None)
            .map_err(|why| format!("inputs: {why}"))?;
        let mut args = match serde_json::to_value(&f.args) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        args.extend(values);
        Ok(serde_json::Value::Object(args).to_string())
    }
}

/// Parses the `schedules` array of tables (`None` when the file has none); `Err` holds
/// every problem found, each naming the entry, the key and the fix.
pub fn parse_schedules(value: Option<&toml::Value>) -> Result<Vec<ScheduleDef>, Vec<String>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Some(entries) = value.as_array() else {
        return Err(vec![format!(
            "schedules = {value} must be an array of tables: [[schedules]] with name, cron, \
             target and function"
        )]);
    };
    let mut errors = Vec::new();
    let mut defs: Vec<ScheduleDef> = Vec::new();
    let mut names: Vec<(&str, usize)> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let Some(table) = entry.as_table() else {
            errors.push(format!(
                "schedules[{index}] = {entry} must be a table: [[schedules]] with name, cron, \
                 target and function"
            ));
            continue;
        };
        let name = table.get("name").and_then(toml::Value::as_str);
        if let Some(name) = name {
            match names.iter().find(|(seen, _)| *seen == name) {
                Some((_, first)) => errors.push(format!(
                    "schedules[{index}] {name:?}: name is already used by schedules[{first}]; \
                     give each schedule its own name (it goes into the jobId)"
                )),
                None => names.push((name, index)),
            }
        }
        if let Some(def) = parse_one(index, table, &mut errors) {
            defs.push(def);
        }
    }
    if errors.is_empty() {
        Ok(defs)
    } else {
        Err(errors)
    }
}

/// One entry (`schedules[index]`), every key checked; what is wrong goes to `errors`.
fn parse_one(index: usize, t: &toml::Table, errors: &mut Vec<String>) -> Option<ScheduleDef> {
    let before = errors.len();
    let at = match t.get("name").and_then(toml::Value::as_str) {
        Some(name) => format!("schedules[{index}] {name:?}"),
        None => format!("schedules[{index}]"),
    };
    for key in t.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        errors.push(format!(
            "{at}: {key:?} is not a known key (known: {})",
            KEYS.join(", ")
        ));
    }
    let name = text(&at, t, "name", "\"nightly-report\"", errors);
    if let Some(bad) = name
        .as_deref()
        .and_then(|n| n.chars().find(|c| !fits_name(*c)))
    {
        errors.push(format!(
            "{at}: name holds {bad:?}, which a schedule name may not (it is shown as \
             schedule:<name>); use letters, digits, '-', '_' and '.'"
        ));
    }
    let target = text(&at, t, "target", "\"db-1\"", errors);
    let function = text(&at, t, "function", "\"backup\"", errors);
    let cron = text(&at, t, "cron", "\"30 2 * * *\"", errors);
    let pattern = cron.as_deref().and_then(|c| match parse_cron(c) {
        Ok(pattern) => Some(pattern),
        Err(problem) => {
            errors.push(format!("{at}: cron = {c:?}: {problem}; {CRON_HINT}"));
            None
        }
    });
    let catch_up = t.get("catch_up").and_then(|v| {
        let problem = match v.as_str().map(|s| humantime::parse_duration(s.trim())) {
            Some(Ok(d)) if !d.is_zero() => return Some(d),
            Some(Ok(_)) => "must be longer than 0s; leave it out for no catch-up".to_string(),
            Some(Err(e)) => format!("is not a duration ({e}); write e.g. \"2h\" or \"30m\""),
            None => "must be a duration string, e.g. \"2h\" or \"30m\"".to_string(),
        };
        errors.push(format!("{at}: catch_up = {v} {problem}"));
        None
    });
    let inputs = match t.get("inputs") {
        None => serde_json::Map::new(),
        Some(toml::Value::Table(table)) => match serde_json::to_value(table) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        },
        Some(v) => {
            errors.push(format!(
                "{at}: inputs = {v} must be a table of the function's inputs, e.g. inputs = {{ version = \"1.2.4\" }}"
            ));
            serde_json::Map::new()
        }
    };
    if errors.len() > before {
        return None;
    }
    Some(ScheduleDef {
        name: name?,
        cron: cron?,
        target: target?,
        function: function?,
        catch_up,
        inputs,
        pattern: pattern?,
    })
}

/// The required, non-blank string `key` (`example` shows one in messages).
fn text(
    at: &str,
    t: &toml::Table,
    key: &str,
    example: &str,
    errors: &mut Vec<String>,
) -> Option<String> {
    let problem = match t.get(key) {
        Some(toml::Value::String(s)) if !s.trim().is_empty() => return Some(s.clone()),
        Some(toml::Value::String(_)) => "is empty; write".to_string(),
        Some(v) => format!("= {v} must be a string, e.g."),
        None => "is missing; add".to_string(),
    };
    errors.push(format!("{at}: {key} {problem} {key} = {example}"));
    None
}

/// What a schedule name may hold: letters and digits of any script, `-`, `_` and `.`.
fn fits_name(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// A pattern as written to croner's `Cron`; `Err` says what is wrong, naming the field.
fn parse_cron(written: &str) -> Result<Cron, String> {
    let trimmed = written.trim();
    let fields = if trimmed.starts_with('@') {
        let known = NICKNAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(trimmed));
        let Some((_, fields)) = known else {
            let all: Vec<&str> = NICKNAMES.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "{trimmed} is not a known nickname ({})",
                all.join(", ")
            ));
        };
        fields.to_string()
    } else {
        trimmed.to_string()
    };
    let count = fields.split_whitespace().count();
    if count != 5 {
        return Err(format!(
            "has {count} fields, not five (minute hour day-of-month month day-of-week); \
             sheetq takes no seconds or year field"
        ));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let pattern = parser.parse(&fields).map_err(|whole| {
        // Each field alone, the others `*`, finds the one croner refused.
        let parts: Vec<&str> = fields.split_whitespace().collect();
        let culprit = (0..parts.len()).find_map(|i| {
            let mut alone = ["*"; 5];
            alone[i] = parts[i];
            let error = parser.parse(&alone.join(" ")).err()?;
            let (field, takes) = FIELDS[i];
            Some(format!(
                "{field} {:?} is not valid ({}); the {field} takes {takes}",
                parts[i],
                reason(&error)
            ))
        });
        culprit.unwrap_or_else(|| reason(&whole))
    })?;
    // A fixed start, so the verdict never depends on the day the file is read.
    let start = NaiveDate::from_ymd_opt(2000, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0));
    if let Some(start) = start {
        if pattern.find_next_occurrence(&start, false).is_err() {
            return Err("never falls on a real date (e.g. 31 February)".to_string());
        }
    }
    Ok(pattern)
}

/// croner's words for what is wrong, without its framing.
fn reason(error: &CronError) -> String {
    let text = match error {
        CronError::ComponentError(m)
        | CronError::InvalidPattern(m)
        | CronError::IllegalCharacters(m) => m.clone(),
        other => other.to_string(),
    };
    text.trim_end_matches('.').to_lowercase()
}

impl ScheduleDef {
    /// The occurrences with `after < t <= until`, in order, at most [`MAX_OCCURRENCES`]
    /// (the earliest ones).
    pub fn occurrences(
        &self,
        tz: Tz,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        self.forward(tz, after)
            .take_while(|at| *at <= until)
            .take(MAX_OCCURRENCES)
            .collect()
    }

    /// The next `n` occurrences after `after` (at most [`MAX_OCCURRENCES`]): for listings
    /// and the panel's next run.
    pub fn next_after(&self, tz: Tz, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        self.forward(tz, after)
            .take(n.min(MAX_OCCURRENCES))
            .collect()
    }

    /// Who asked, in the 依頼者 cell of the jobs this schedule queues.
    pub fn requester(&self) -> String {
        format!("schedule:{}", self.name)
    }

    /// The occurrence a daemon should queue now, if any. `seen_until`: the instant up to
    /// which this daemon already considered occurrences (`None` on start); the caller sets
    /// it to `now` after every call, whatever the answer.
    ///
    /// Only the latest occurrence at or before `now` is ever due, and only while it is at
    /// most `max(catch_up, fresh)` old: a daemon that was down or stalled queues the last
    /// run it missed, never a backlog. `fresh` is a grace the caller passes (a couple of
    /// poll intervals), so that a daemon started at 02:00:10 still runs the 02:00 job
    /// without `catch_up`. On start, an occurrence another daemon (or this one before a
    /// restart) already queued is due again: its jobId ([`occurrence_job_id`]) is the
    /// same, so the caller sees it is in the queue already.
    pub fn due(
        &self,
        tz: Tz,
        seen_until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        fresh: Duration,
    ) -> Option<DateTime<Utc>> {
        let latest = self.latest_at_or_before(tz, now)?;
        if seen_until.is_some_and(|seen| latest <= seen) {
            return None;
        }
        let window = self.catch_up.unwrap_or(Duration::ZERO).max(fresh);
        let age = (now - latest).to_std().ok()?;
        (age <= window).then_some(latest)
    }

    /// The occurrences after `after`, in order, each once.
    fn forward(&self, tz: Tz, after: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> {
        // A wall time before `after`'s own maps to an instant at or before `after`, so the
        // walk starts there; `after` in the second pass of a repeated hour meets wall
        // times whose (earlier) instants are behind it, and the filter drops them.
        let start = after.with_timezone(&tz).naive_local();
        let mut last = after;
        self.pattern
            .iter_from(start, Direction::Forward)
            .filter_map(move |wall| run_instant(tz, wall))
            .filter(move |at| {
                // Instants never decrease along wall time; equal ones are the wall times
                // of one spring-forward gap, which run once.
                let new = *at > last;
                last = last.max(*at);
                new
            })
    }

    /// The latest occurrence at or before `now`.
    fn latest_at_or_before(&self, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // In the second pass of a repeated hour, wall times after `now`'s own ran in the
        // first pass, before `now`: the walk back starts from the wall time `now` shows
        // under the larger of its offset and the one two days before (a fold is younger).
        let offset = |at: DateTime<Utc>| {
            let seconds = tz
                .offset_from_utc_datetime(&at.naive_utc())
                .fix()
                .local_minus_utc();
            TimeDelta::seconds(i64::from(seconds))
        };
        let earlier = now.checked_sub_signed(TimeDelta::days(2)).unwrap_or(now);
        let start = now
            .naive_utc()
            .checked_add_signed(offset(now).max(offset(earlier)))?;
        self.pattern
            .iter_from(start, Direction::Backward)
            .filter_map(|wall| run_instant(tz, wall))
            .take(MAX_OCCURRENCES)
            .find(|at| *at <= now)
    }
}

/// The instant a matching local wall-clock minute runs at: itself where it exists once;
/// the first of the two where daylight saving repeats it (fall-back), so a wall time runs
/// once; the first whole minute after the gap where daylight saving skips it
/// (spring-forward: 02:30 in New York on the change day runs at 03:00). `None` only for a
/// gap longer than any zone has had.
fn run_instant(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let mut probe = wall;
    while probe - wall <= MAX_GAP {
        match tz.from_local_datetime(&probe) {
            LocalResult::Single(at) | LocalResult::Ambiguous(at, _) => {
                return Some(at.with_timezone(&Utc))
            }
            LocalResult::None => probe = probe.checked_add_signed(TimeDelta::minutes(1))?,
        }
    }
    None
}

/// The jobId of an occurrence: a UUIDv5 of the spreadsheet id, the schedule's name and the
/// instant (RFC 3339, seconds, UTC), one per line, so every daemon serving the spreadsheet
/// computes the same id and the queue keeps one row. Neither an id nor a name holds a line
/// break (names are checked here; ids are letters, digits, `-` and `_`).
pub fn occurrence_job_id(spreadsheet_id: &str, schedule: &str, at: DateTime<Utc>) -> String {
    let instant = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let name = format!("{spreadsheet_id}\n{schedule}\n{instant}");
    Uuid::new_v5(&JOB_ID_NAMESPACE, name.as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NY: Tz = chrono_tz::America::New_York;
    const TOKYO: Tz = chrono_tz::Asia::Tokyo;
    const FRESH: Duration = Duration::from_secs(120);

    /// A UTC instant written `2027-03-14 07:00`, seconds optional.
    fn utc(text: &str) -> DateTime<Utc> {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
            .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M"))
            .unwrap_or_else(|e| panic!("test instant {text:?}: {e}"))
            .and_utc()
    }

    /// Instants written as [`utc`] reads them, joined by ", "; "" for none.
    fn texts(instants: impl IntoIterator<Item = DateTime<Utc>>) -> String {
        let texts: Vec<String> = instants
            .into_iter()
            .map(|at| at.format("%Y-%m-%d %H:%M").to_string())
            .collect();
        texts.join(", ")
    }

    /// The occurrences in (after, until], in UTC.
    fn runs(def: &ScheduleDef, tz: Tz, after: &str, until: &str) -> String {
        texts(def.occurrences(tz, utc(after), utc(until)))
    }

    fn next(def: &ScheduleDef, tz: Tz, after: &str, n: usize) -> String {
        texts(def.next_after(tz, utc(after), n))
    }

    /// What is due at `now` after `seen` (`None`: on start), with a two-minute `fresh`.
    fn due(def: &ScheduleDef, tz: Tz, seen: Option<&str>, now: &str) -> String {
        texts(def.due(tz, seen.map(utc), utc(now), FRESH))
    }

    /// One schedule with this pattern and catch_up; panics with the messages if refused.
    fn schedule(cron: &str, catch_up: Option<&str>) -> ScheduleDef {
        let catch_up = catch_up.map_or(String::new(), |c| format!(", catch_up = {c:?}"));
        let text = format!(
            "schedules = [{{ name = \"s\", cron = {cron:?}, target = \"t\", function = \"f\" \
             {catch_up} }}]"
        );
        let mut defs = parse(&text).unwrap_or_else(|e| panic!("{cron:?} was refused: {e:#?}"));
        defs.remove(0)
    }

    fn parse(text: &str) -> Result<Vec<ScheduleDef>, Vec<String>> {
        let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("test TOML: {e}"));
        parse_schedules(table.get("schedules"))
    }

    fn errors(text: &str) -> Vec<String> {
        parse(text).map(|d| format!("{d:#?}")).unwrap_err()
    }

    #[test]
    fn five_fields_and_nicknames_are_accepted() {
        let defs = parse(
            r#"schedules = [
            { name = "nightly", cron = "30 2 * * *", target = "db-1", function = "backup", catch_up = "2h" },
            { name = "毎日.report_2", cron = "@daily", target = "all", function = "report" },
            ]"#,
        )
        .unwrap_or_else(|e| panic!("{e:#?}"));
        let [nightly, daily] = &defs[..] else {
            panic!("two schedules expected: {defs:#?}")
        };
        let text = |d: &ScheduleDef| format!("{} {} {} {}", d.name, d.cron, d.target, d.function);
        assert_eq!(text(nightly), "nightly 30 2 * * * db-1 backup");
        assert_eq!(nightly.catch_up, Some(Duration::from_secs(7200)));
        assert_eq!(daily.catch_up, None, "catch_up defaults to none");
        assert_eq!(daily.requester(), "schedule:毎日.report_2");
        for cron in ["@daily", "@midnight", "@DAILY", "0 0 * * *"] {
            let midnights = next(&schedule(cron, None), TOKYO, "2027-05-10 12:00", 2);
            assert_eq!(midnights, "2027-05-10 15:00, 2027-05-11 15:00", "{cron}");
        }
        let leap_day = next(&schedule("0 0 29 2 *", None), TOKYO, "2027-05-10 12:00", 1);
        assert_eq!(leap_day, "2028-02-28 15:00", "29 February is a real date");
        assert_eq!(parse("").map(|d| d.len()), Ok(0), "no [[schedules]]");
    }

    #[test]
    fn a_bad_cron_names_the_entry_the_field_and_the_fix() {
        let e = errors(
            r#"schedules = [{ name = "nightly", cron = "61 * * * *", target = "t", function = "f" }]"#,
        );
        assert_eq!(
            e,
            [
                "schedules[0] \"nightly\": cron = \"61 * * * *\": minute \"61\" is not valid \
                 (number out of bounds); the minute takes 0-59; five fields, e.g. \
                 \"30 2 * * *\", or @daily/@hourly/@weekly/@monthly/@yearly"
            ]
        );
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let e = errors(
            r#"schedules = [
            { name = "a", cron = "0 2 * * *", target = "t", fuction = "f" },
            { name = "a", cron = "0 0 2 * * *", target = "t", function = "f" },
            { name = "b c", cron = "@reboot", target = "", function = "f", catch_up = "soon" },
            { name = "d", cron = "0 0 31 2 *", target = "t", function = 5, catch_up = "0s" },
            { name = "e", cron = "0 25 * * MON", target = "t", function = "f" },
            ]"#,
        );
        let expect = [
            "schedules[0] \"a\": \"fuction\" is not a known key (known: name, cron, target, \
             function, catch_up, inputs)",
            "schedules[0] \"a\": function is missing; add function = \"backup\"",
            "schedules[1] \"a\": name is already used by schedules[0]",
            "schedules[1] \"a\": cron = \"0 0 2 * * *\": has 6 fields, not five",
            "schedules[2] \"b c\": name holds ' ', which a schedule name may not",
            "schedules[2] \"b c\": target is empty; write target = \"db-1\"",
            "schedules[2] \"b c\": cron = \"@reboot\": @reboot is not a known nickname",
            "schedules[2] \"b c\": catch_up = \"soon\" is not a duration",
            "schedules[3] \"d\": function = 5 must be a string, e.g. function = \"backup\"",
            "schedules[3] \"d\": cron = \"0 0 31 2 *\": never falls on a real date",
            "schedules[3] \"d\": catch_up = \"0s\" must be longer than 0s",
            "schedules[4] \"e\": cron = \"0 25 * * MON\": hour \"25\" is not valid",
        ];
        for want in expect {
            let found = e.iter().any(|got| got.starts_with(want));
            assert!(found, "missing {want:?} in {e:#?}");
        }
        assert_eq!(e.len(), expect.len(), "{e:#?}");
        assert!(errors("schedules = \"nightly\"")[0].contains("must be an array of tables"));
        assert!(errors("schedules = [1]")[0].starts_with("schedules[0] = 1 must be a table"));
    }

    #[test]
    fn day_of_month_and_day_of_week_both_restricted_match_either() {
        // 2027-04-01 is a Thursday, 2027-11-01 the next 1st that is a Monday.
        let (after, either, both) = ("2027-03-28 15:00", "0 0 1 * MON", "0 0 1 * +MON");
        let either = next(&schedule(either, None), TOKYO, after, 3);
        assert_eq!(
            either,
            "2027-03-31 15:00, 2027-04-04 15:00, 2027-04-11 15:00"
        );
        let both = next(&schedule(both, None), TOKYO, after, 1);
        assert_eq!(
            both, "2027-10-31 15:00",
            "+ asks for a 1st that is a Monday"
        );
        // Odd days (the 11th, 13th) or Mondays (the 12th).
        let stepped = schedule("0 0 */2 * MON", None);
        let stepped = runs(&stepped, TOKYO, "2027-04-10 00:00", "2027-04-13 00:00");
        assert_eq!(
            stepped,
            "2027-04-10 15:00, 2027-04-11 15:00, 2027-04-12 15:00"
        );
    }

    #[test]
    fn tokyo_runs_on_local_time_without_daylight_saving() {
        // Thursday 09:00 in Tokyo, itself excluded; 2027-01-02 and 03 are a weekend.
        let weekdays = schedule("0 9 * * MON-FRI", None);
        let weekdays = next(&weekdays, TOKYO, "2026-12-31 00:00", 3);
        assert_eq!(
            weekdays,
            "2027-01-01 00:00, 2027-01-04 00:00, 2027-01-05 00:00"
        );
        let minutes = schedule("* * * * *", None);
        let year = minutes.occurrences(TOKYO, utc("2027-01-01 00:00"), utc("2028-01-01 00:00"));
        assert_eq!(
            year.len(),
            MAX_OCCURRENCES,
            "a year of minutes stops at the cap"
        );
        assert_eq!(texts([year[0]]), "2027-01-01 00:01", "after is excluded");
    }

    #[test]
    fn spring_forward_runs_a_skipped_time_at_the_end_of_the_gap() {
        // New York skips 02:00-02:59 on 2027-03-14 (EST -5 to EDT -4): 02:30 EST, then
        // 03:00 EDT, the first minute after the gap, then 02:30 EDT.
        let nightly = schedule("30 2 * * *", None);
        let days = runs(&nightly, NY, "2027-03-13 00:00", "2027-03-16 00:00");
        assert_eq!(days, "2027-03-13 07:30, 2027-03-14 07:00, 2027-03-15 06:30");
        // 02:00, 02:30 and 03:00 all fall on 03:00 EDT: one run.
        let half = schedule("*/30 * * * *", None);
        let gap = runs(&half, NY, "2027-03-14 06:00", "2027-03-14 07:30");
        assert_eq!(gap, "2027-03-14 06:30, 2027-03-14 07:00, 2027-03-14 07:30");
        let polled = due(
            &nightly,
            NY,
            Some("2027-03-14 06:59"),
            "2027-03-14 07:00:30",
        );
        assert_eq!(polled, "2027-03-14 07:00", "due when polled");
    }

    #[test]
    fn fall_back_runs_each_local_wall_time_once_at_its_first_instant() {
        // New York repeats 01:00-01:59 on 2027-11-07 (EDT -4, then EST -5): 01:30 EDT,
        // 01:30 EDT and not again at 01:30 EST (06:30), 01:30 EST.
        let nightly = schedule("30 1 * * *", None);
        let days = runs(&nightly, NY, "2027-11-06 00:00", "2027-11-09 00:00");
        assert_eq!(days, "2027-11-06 05:30, 2027-11-07 05:30, 2027-11-08 06:30");
        // 00:00 to 01:30 EDT, then 02:00 EST on: 01:00 and 01:30 EST do not run.
        let half = schedule("*/30 * * * *", Some("1h"));
        assert_eq!(
            runs(&half, NY, "2027-11-07 03:59", "2027-11-07 08:00"),
            "2027-11-07 04:00, 2027-11-07 04:30, 2027-11-07 05:00, 2027-11-07 05:30, \
             2027-11-07 07:00, 2027-11-07 07:30, 2027-11-07 08:00"
        );
        // At 01:10 EST, in the second pass: 01:30 ran in the first, a later wall time.
        let second_pass = "2027-11-07 06:10";
        assert_eq!(next(&half, NY, second_pass, 1), "2027-11-07 07:00");
        let latest = due(&half, NY, Some("2027-11-07 05:20"), second_pass);
        assert_eq!(latest, "2027-11-07 05:30");
    }

    #[test]
    fn job_id_is_stable_and_distinct_per_spreadsheet_name_and_instant() {
        let at = utc("2027-03-14 07:00");
        // uuid5(JOB_ID_NAMESPACE, "1BxiMVs0XRA5nFMd\nnightly\n2027-03-14T07:00:00Z"), as
        // any UUID library computes it.
        let id = occurrence_job_id("1BxiMVs0XRA5nFMd", "nightly", at);
        assert_eq!(
            id, "3c51d1c0-02e4-51c4-9bcd-dee757b6fded",
            "the jobId of an occurrence changed: daemons of two versions would queue it twice"
        );
        let others = [
            occurrence_job_id("1BxiMVs0XRA5nFMe", "nightly", at),
            occurrence_job_id("1BxiMVs0XRA5nFMd", "nightly2", at),
            occurrence_job_id("1BxiMVs0XRA5nFMd", "nightly", utc("2027-03-15 06:30")),
        ];
        for other in others {
            assert_ne!(id, other, "two occurrences share a jobId");
        }
    }

    #[test]
    fn due_on_start_without_catch_up_is_only_a_fresh_occurrence() {
        // 02:00 in Tokyo is 17:00 UTC the day before.
        let nightly = schedule("0 2 * * *", None);
        let at_start = |now| due(&nightly, TOKYO, None, now);
        assert_eq!(at_start("2027-05-10 17:00"), "2027-05-10 17:00");
        assert_eq!(
            at_start("2027-05-10 17:02"),
            "2027-05-10 17:00",
            "within fresh"
        );
        assert_eq!(at_start("2027-05-10 17:02:01"), "", "older than fresh");
        assert_eq!(at_start("2027-05-10 16:59:59"), "", "yesterday's is past");
    }

    #[test]
    fn due_on_start_with_catch_up_is_the_latest_occurrence_within_it() {
        let hourly = schedule("0 * * * *", Some("3h"));
        let latest = due(&hourly, TOKYO, None, "2027-05-10 18:30");
        assert_eq!(latest, "2027-05-10 18:00", "the latest only");
        let nightly = schedule("0 2 * * *", Some("2h"));
        let at_start = |now| due(&nightly, TOKYO, None, now);
        assert_eq!(at_start("2027-05-10 19:00"), "2027-05-10 17:00");
        assert_eq!(at_start("2027-05-10 19:00:01"), "", "beyond catch_up");
    }

    #[test]
    fn due_while_running_is_the_latest_unseen_occurrence() {
        let hourly = schedule("0 * * * *", None);
        let running = |seen, now| due(&hourly, TOKYO, Some(seen), now);
        // 16:00 and 17:00 passed while the daemon stalled: only 17:00.
        let stalled = running("2027-05-10 15:00", "2027-05-10 17:01");
        assert_eq!(stalled, "2027-05-10 17:00");
        assert_eq!(running("2027-05-10 17:00", "2027-05-10 17:01"), "", "seen");
        assert_eq!(running("2027-05-10 16:59:30", "2027-05-10 16:59:45"), "");
        assert_eq!(
            running("2027-05-10 12:00", "2027-05-10 17:30"),
            "",
            "not fresh"
        );
        let caught_up = schedule("0 * * * *", Some("1h"));
        let late = due(
            &caught_up,
            TOKYO,
            Some("2027-05-10 12:00"),
            "2027-05-10 17:30",
        );
        assert_eq!(late, "2027-05-10 17:00", "within catch_up");
    }
}
