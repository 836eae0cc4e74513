//! Time in sheet cells: reading the date cells of `_ジョブキュー` (受付日時, 開始日時, 終了日時)
//! into instants, writing instants back as date serials, and the short texts the panel and
//! the logs show.
//!
//! sheetq reads with `valueRenderOption=UNFORMATTED_VALUE` and
//! `dateTimeRenderOption=SERIAL_NUMBER` (docs/design.md §1.1), so a date cell holds either
//!
//! - a **serial number**: days since 1899-12-30 00:00, the fraction being the time of day
//!   (written by Apps Script `Date` objects and by sheetq itself), or
//! - a **string** someone typed or a script wrote as text: `2026/11/30 12:34:56`,
//!   `2026/11/30 12:34`, `2026/11/30`, `2026-11-30 12:34:56`, `2026-11-30T12:34:56`, or
//!   RFC 3339 with an offset (`2026-11-30T12:34:56+09:00`, `...Z`), seconds optionally with a
//!   fraction; month, day and hour may have one digit (`2026/1/5 9:05`). Anything else is an
//!   error that lists these forms, never a guess. A number written as text is a serial.
//!
//! # Why the spreadsheet's time zone matters
//! A serial (and a string without an offset) is a *wall-clock* reading, not an instant:
//! `46356.5` is "2026-11-30 12:00" on the clocks of whoever owns the spreadsheet, which is
//! 03:00 UTC for an `Asia/Tokyo` sheet and 17:00 UTC for an `America/New_York` one. The
//! reference is the spreadsheet's `timeZone` property, never the zone of the machine sheetq
//! runs on, so that the stale-job boundary, the order of 受付日時 and the times shown on the
//! panel agree with what the sheet's owner sees. Only an explicit RFC 3339 offset overrides
//! the sheet's zone.
//!
//! # Wall-clock times that a zone skips or repeats
//! Turning a wall-clock reading into an instant is not always one-to-one. sheetq resolves it
//! the way JavaScript `Date` (and so Apps Script) does, so a value means the same to sheetq as
//! to the script that wrote it:
//!
//! - **ambiguous** (the repeated hour when clocks go back, e.g. 01:30 on 2026-11-01 in
//!   `America/New_York`): the **earlier** instant, i.e. the offset in force before the change
//!   (01:30 EDT = 05:30 UTC);
//! - **skipped** (the gap when clocks go forward, e.g. 02:30 on 2026-03-08 in
//!   `America/New_York`): read with the offset in force **before** the gap, i.e. shifted
//!   forward by the length of the gap (02:30 EST = 07:30 UTC = 03:30 EDT).
//!
//! Going the other way, instant → serial, is always unique. So `serial_to_instant(
//! instant_to_serial(t)) == t` (to the millisecond) for every instant except those in the
//! second pass of a repeated hour: a serial cannot tell the two passes apart, and such an
//! instant comes back as the first pass, one "clocks went back" step earlier. The serial
//! itself always survives the round trip.
//!
//! Everything is rounded to the millisecond on the way in: serials are `f64` and carry float
//! noise (`46356.500000000007`), and a millisecond is far finer than anything sheetq decides.

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use serde_json::Value;

/// Milliseconds in one day of a date serial.
const MS_PER_DAY: i64 = 86_400_000;
/// First serial past the last day a sheet can hold: 10000-01-01 00:00 (9999-12-31 is
/// serial 2958465).
const SERIAL_END_DAYS: i64 = 2_958_466;

/// The spreadsheet's `timeZone` or a date cell could not be understood.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimeError {
    #[error(
        "unknown time zone {name:?}: the spreadsheet's time zone must be an IANA name such as \
         Asia/Tokyo, America/New_York or Europe/London"
    )]
    UnknownZone { name: String },

    #[error(
        "date serial {serial} is not a number a date cell can hold: expected days since \
         1899-12-30, e.g. 46356.5 for 2026-11-30 12:00"
    )]
    NotFinite { serial: f64 },

    #[error(
        "date {value} is outside the range a sheet holds (1899-12-30 00:00 to 9999-12-31 \
         23:59:59.999, serials 0 to 2958465.99999)"
    )]
    OutOfRange { value: String },

    #[error(
        "{text:?} is not a date sheetq can read: write it as 2026/11/30 12:34:56, \
         2026/11/30 12:34, 2026/11/30, 2026-11-30 12:34:56, 2026-11-30T12:34:56 or \
         2026-11-30T12:34:56+09:00, or store a date serial number"
    )]
    UnrecognizedText { text: String },

    #[error(
        "{text:?} looks like a date but names no such day or time (check the month, the day \
         of the month and the hour)"
    )]
    NoSuchDate { text: String },

    #[error(
        "{value} is not a date: a date cell must be empty or hold a date serial number or \
         text such as 2026/11/30 12:34:56"
    )]
    NotADate { value: String },
}

/// Parses the spreadsheet's `timeZone` property (an IANA name such as `Asia/Tokyo`).
pub fn parse_zone(name: &str) -> Result<Tz, TimeError> {
    name.trim()
        .parse::<Tz>()
        .map_err(|_| TimeError::UnknownZone {
            name: name.to_string(),
        })
}

/// Reads a date cell (as returned with `UNFORMATTED_VALUE` + `SERIAL_NUMBER`).
///
/// `null`, `""` and whitespace-only text are an empty cell: `Ok(None)`. A number is a serial;
/// text is one of the formats listed in the module docs, or a number written as text (also a
/// serial). Serials and offset-less text are wall-clock times in `tz`; an RFC 3339 offset
/// wins over `tz`. The result is rounded to the millisecond.
pub fn cell_to_instant(cell: &Value, tz: Tz) -> Result<Option<DateTime<Utc>>, TimeError> {
    match cell {
        Value::Null => Ok(None),
        Value::Number(n) => match n.as_f64() {
            Some(serial) => serial_to_instant(serial, tz).map(Some),
            None => Err(TimeError::NotADate {
                value: n.to_string(),
            }),
        },
        Value::String(s) => text_to_instant(s, tz),
        other => Err(TimeError::NotADate {
            value: other.to_string(),
        }),
    }
}

/// Turns a date serial (days since 1899-12-30 00:00 on the clocks of `tz`) into an instant,
/// rounded to the millisecond.
///
/// Rejects NaN and infinities, and serials before 1899-12-30 or after 9999-12-31 (float noise
/// below half a millisecond around serial 0 is rounded away, not rejected). Wall-clock times
/// that `tz` skips or repeats are resolved as described in the module docs.
pub fn serial_to_instant(serial: f64, tz: Tz) -> Result<DateTime<Utc>, TimeError> {
    if !serial.is_finite() {
        return Err(TimeError::NotFinite { serial });
    }
    let out_of_range = || TimeError::OutOfRange {
        value: format!("serial {serial}"),
    };
    let ms = (serial * MS_PER_DAY as f64).round();
    // The bound is checked on the f64 so the cast below can neither overflow nor saturate.
    if !(0.0..(SERIAL_END_DAYS * MS_PER_DAY) as f64).contains(&ms) {
        return Err(out_of_range());
    }
    let wall = serial_epoch()
        .checked_add_signed(TimeDelta::milliseconds(ms as i64))
        .ok_or_else(out_of_range)?;
    resolve_wall_clock(wall, tz).ok_or_else(out_of_range)
}

/// Turns an instant into the date serial a sheet in `tz` would show for it (days since
/// 1899-12-30 00:00 on the clocks of `tz`), after rounding the instant to the millisecond.
///
/// Instants before 1899-12-30 give negative serials, which [`serial_to_instant`] rejects;
/// sheetq only writes times it has read or taken from its clock.
pub fn instant_to_serial(t: DateTime<Utc>, tz: Tz) -> f64 {
    let wall = round_to_ms(t).with_timezone(&tz).naive_local();
    let ms = (wall - serial_epoch()).num_milliseconds();
    // Dividing an exact millisecond count keeps the error far below half a millisecond, so
    // `serial_to_instant` recovers the same millisecond.
    ms as f64 / MS_PER_DAY as f64
}

/// `11/30 14:05`: month/day and 24-hour time in `tz`, zero-padded (panel status
/// `✅ 完了 11/30 14:05`).
pub fn format_short(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz).format("%m/%d %H:%M").to_string()
}

/// `14:05`: 24-hour time in `tz` (`▶ 実行中 (14:05〜)`, `既に実行中です（依頼: … / 14:05）`).
pub fn format_hhmm(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz).format("%H:%M").to_string()
}

/// `2026/11/30 14:05:09`: full date and time in `tz`, for logs and CLI tables. It reads back
/// through [`cell_to_instant`] (to the second).
pub fn format_datetime(t: DateTime<Utc>, tz: Tz) -> String {
    t.with_timezone(&tz).format("%Y/%m/%d %H:%M:%S").to_string()
}

/// 1899-12-30 00:00, serial 0.
fn serial_epoch() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(1899, 12, 30)
        .unwrap_or(NaiveDate::MIN)
        .and_time(chrono::NaiveTime::MIN)
}

/// Rounds to the nearest millisecond (half up). Leaves `t` alone only at the very ends of
/// chrono's range, which sheet dates never reach.
fn round_to_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    // `timestamp_subsec_nanos` can exceed 999_999_999 during a leap second; the sum below
    // carries that into the next second like any other overflow.
    let ms = t.timestamp() * 1000 + i64::from((t.timestamp_subsec_nanos() + 500_000) / 1_000_000);
    DateTime::from_timestamp_millis(ms).unwrap_or(t)
}

/// True if `wall` lies between serial 0 and the end of 9999-12-31.
fn wall_in_range(wall: NaiveDateTime) -> bool {
    let ms = (wall - serial_epoch()).num_milliseconds();
    (0..SERIAL_END_DAYS * MS_PER_DAY).contains(&ms)
}

/// The latest instant whose wall-clock time in `tz` is the one `t` shows: `t` itself, or,
/// when `t` falls in an hour that `tz` repeats (clocks go back), its second pass. A cell
/// read as the first pass ([`serial_to_instant`]) may mean either; a rule that must not act
/// early takes this one.
pub fn latest_reading(t: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    let wall = t.with_timezone(&tz).naive_local();
    match tz.from_local_datetime(&wall) {
        LocalResult::Ambiguous(a, b) => a.max(b).with_timezone(&Utc).max(t),
        _ => t,
    }
}

/// The instant a wall-clock time in `tz` stands for (a time a person typed, in the
/// spreadsheet's zone), resolved as a cell's would be; the earliest instant past chrono's range.
pub fn local_to_utc(wall: NaiveDateTime, tz: Tz) -> DateTime<Utc> {
    resolve_wall_clock(wall, tz).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The instant a wall-clock reading in `tz` stands for; see the module docs for the repeated
/// and skipped hours. `None` only past the ends of chrono's range.
fn resolve_wall_clock(wall: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, b) => Some(a.min(b).with_timezone(&Utc)),
        LocalResult::None => {
            // `wall` is in a gap: some transition T moves the offset from `before` up to
            // `after`, and T + before <= wall < T + after. Reading `wall` with either offset
            // lands on the other side of T, where the other offset is in force; so starting
            // from the offset at `wall` read as UTC (within a day of T), two look-ups yield
            // both. The smaller is the offset before the gap.
            let as_if_utc = wall.and_utc();
            let offset_at = |u: DateTime<Utc>| {
                i64::from(
                    tz.offset_from_utc_datetime(&u.naive_utc())
                        .fix()
                        .local_minus_utc(),
                )
            };
            let shifted = |secs: i64| as_if_utc.checked_sub_signed(TimeDelta::seconds(secs));
            let first = offset_at(as_if_utc);
            let a = offset_at(shifted(first)?);
            let b = offset_at(shifted(a)?);
            shifted(a.min(b))
        }
    }
}

/// Reads a text cell: empty, a serial written as text, or one of the accepted formats.
fn text_to_instant(raw: &str, tz: Tz) -> Result<Option<DateTime<Utc>>, TimeError> {
    let text = raw.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(serial) = text.parse::<f64>() {
        // "inf" and "NaN" parse as f64 too; they are not what anyone meant as a serial.
        if serial.is_finite() {
            return serial_to_instant(serial, tz).map(Some);
        }
    }
    let out_of_range = || TimeError::OutOfRange {
        value: format!("{text:?}"),
    };
    match parse_text(text) {
        Parsed::WithOffset(t) => {
            if !wall_in_range(t.with_timezone(&tz).naive_local()) {
                return Err(out_of_range());
            }
            Ok(Some(round_to_ms(t)))
        }
        Parsed::WallClock(wall) => {
            if !wall_in_range(wall) {
                return Err(out_of_range());
            }
            let t = resolve_wall_clock(wall, tz).ok_or_else(out_of_range)?;
            Ok(Some(round_to_ms(t)))
        }
        Parsed::NoSuchDate => Err(TimeError::NoSuchDate {
            text: raw.to_string(),
        }),
        Parsed::Unrecognized => Err(TimeError::UnrecognizedText {
            text: raw.to_string(),
        }),
    }
}

/// What [`parse_text`] made of a trimmed, non-empty string.
enum Parsed {
    /// An instant with an explicit offset (`+09:00`, `Z`).
    WithOffset(DateTime<Utc>),
    /// A wall-clock reading, to be placed in the sheet's zone.
    WallClock(NaiveDateTime),
    /// The shape of a date, but an impossible one (`2026/02/30`, `25:00`).
    NoSuchDate,
    Unrecognized,
}

/// Reads the accepted text forms:
///
/// ```text
/// YYYY/M/D or YYYY-M-D                    (month and day: one or two digits)
///   [ (space or T) H:MM [:SS [.fraction]]  (hour: one or two digits)
///     [ Z | +HH:MM | +HHMM | +HH ] ]       (or -; only after a time)
/// ```
///
/// Hand-written rather than chrono format strings, whose spaces match zero or more
/// whitespace and whose numbers skip leading whitespace: with them `30/11/2026` reads as
/// year 30, day 20, hour 26, and `2026/11/3012:34` as a valid date.
fn parse_text(text: &str) -> Parsed {
    match parse_fields(text) {
        None => Parsed::Unrecognized,
        Some(fields) => fields.resolve().unwrap_or(Parsed::NoSuchDate),
    }
}

/// The numbers of a date text whose shape matched; values not yet checked.
struct Fields {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    nano: u32,
    /// The offset, if the text carried one.
    offset: Option<TextOffset>,
}

/// `Z`, `+09:00`, `-0500`, `+09` as written (`Z` is `+00:00`).
struct TextOffset {
    sign: i32,
    hours: u32,
    minutes: u32,
}

impl Fields {
    /// `None` if a value is out of range (month 13, 02-30, hour 25, offset +24:00).
    fn resolve(self) -> Option<Parsed> {
        let wall = NaiveDate::from_ymd_opt(self.year, self.month, self.day)?.and_hms_nano_opt(
            self.hour,
            self.minute,
            self.second,
            self.nano,
        )?;
        match self.offset {
            None => Some(Parsed::WallClock(wall)),
            Some(TextOffset {
                sign,
                hours,
                minutes,
            }) => {
                if hours > 23 || minutes > 59 {
                    return None;
                }
                let secs = i32::try_from(hours * 3600 + minutes * 60).ok()?;
                let offset = chrono::FixedOffset::east_opt(sign * secs)?;
                let t = offset.from_local_datetime(&wall).single()?;
                Some(Parsed::WithOffset(t.with_timezone(&Utc)))
            }
        }
    }
}

/// Matches the shape described at [`parse_text`]; `None` if it does not.
fn parse_fields(text: &str) -> Option<Fields> {
    let mut c = Cursor {
        rest: text.as_bytes(),
    };
    let year = c.number(4, 4)?;
    let sep = c.next().filter(|b| *b == b'/' || *b == b'-')?;
    let month = c.number(1, 2)?;
    c.expect(sep)?;
    let day = c.number(1, 2)?;
    let mut fields = Fields {
        year: i32::try_from(year).ok()?,
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
        nano: 0,
        offset: None,
    };
    if c.rest.is_empty() {
        return Some(fields);
    }
    c.next().filter(|b| matches!(b, b' ' | b'T' | b't'))?;
    fields.hour = c.number(1, 2)?;
    c.expect(b':')?;
    fields.minute = c.number(2, 2)?;
    if c.eat(b':') {
        fields.second = c.number(2, 2)?;
        if c.eat(b'.') {
            fields.nano = c.fraction()?;
        }
    }
    if c.rest.is_empty() {
        return Some(fields);
    }
    let sign = match c.next()? {
        b'Z' | b'z' => {
            fields.offset = Some(TextOffset {
                sign: 1,
                hours: 0,
                minutes: 0,
            });
            return c.rest.is_empty().then_some(fields);
        }
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let hours = c.number(2, 2)?;
    let minutes = if c.rest.is_empty() {
        0
    } else {
        c.eat(b':');
        c.number(2, 2)?
    };
    fields.offset = Some(TextOffset {
        sign,
        hours,
        minutes,
    });
    c.rest.is_empty().then_some(fields)
}

/// A forward-only reader over ASCII bytes.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl Cursor<'_> {
    fn next(&mut self) -> Option<u8> {
        let (first, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(*first)
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.rest.first() == Some(&b) {
            self.rest = &self.rest[1..];
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    /// Up to `max` ASCII digits; `None` if fewer than `min`. A digit left over after `max`
    /// fails whatever is expected next.
    fn number(&mut self, min: usize, max: usize) -> Option<u32> {
        let len = self
            .rest
            .iter()
            .take(max)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if len < min {
            return None;
        }
        let (digits, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    }

    /// One or more digits after a decimal point, as nanoseconds; digits past the ninth are
    /// dropped (the result is rounded to the millisecond later anyway).
    fn fraction(&mut self) -> Option<u32> {
        let len = self.rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        let (digits, rest) = self.rest.split_at(len);
        self.rest = rest;
        let nano = digits
            .iter()
            .chain(std::iter::repeat(&b'0'))
            .take(9)
            .fold(0, |n, d| n * 10 + u32::from(d - b'0'));
        Some(nano)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const TOKYO: Tz = chrono_tz::Asia::Tokyo;
    const NEW_YORK: Tz = chrono_tz::America::New_York;
    const LONDON: Tz = chrono_tz::Europe::London;
    const UTC_ZONE: Tz = chrono_tz::UTC;

    /// Zones for the round-trip sweeps: DST of one hour in both hemispheres, half-hour DST
    /// (Lord Howe), a whole skipped day (Apia, 2011), local mean time with odd seconds in
    /// 1899 (Kathmandu, Sao Paulo, Kolkata), and no DST at all.
    const ZONES: [Tz; 10] = [
        TOKYO,
        UTC_ZONE,
        NEW_YORK,
        LONDON,
        chrono_tz::Australia::Lord_Howe,
        chrono_tz::Pacific::Apia,
        chrono_tz::Asia::Kathmandu,
        chrono_tz::America::Sao_Paulo,
        chrono_tz::Asia::Kolkata,
        chrono_tz::Europe::Dublin,
    ];

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("bad test instant {s:?}: {e}"))
            .with_timezone(&Utc)
    }

    fn wall(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
            .unwrap_or_else(|e| panic!("bad test wall time {s:?}: {e}"))
    }

    fn serial_of_wall(w: NaiveDateTime) -> f64 {
        (w - serial_epoch()).num_milliseconds() as f64 / MS_PER_DAY as f64
    }

    fn at(serial: f64, tz: Tz) -> DateTime<Utc> {
        serial_to_instant(serial, tz)
            .unwrap_or_else(|e| panic!("serial {serial} in {tz} should convert: {e}"))
    }

    fn cell(v: Value, tz: Tz) -> DateTime<Utc> {
        match cell_to_instant(&v, tz) {
            Ok(Some(t)) => t,
            other => panic!("cell {v} in {tz} should hold a date, got {other:?}"),
        }
    }

    fn cell_err(v: Value, tz: Tz) -> TimeError {
        match cell_to_instant(&v, tz) {
            Err(e) => e,
            Ok(t) => panic!("cell {v} in {tz} should be rejected, got {t:?}"),
        }
    }

    fn local(t: DateTime<Utc>, tz: Tz) -> String {
        t.with_timezone(&tz)
            .format("%Y-%m-%d %H:%M:%S%.3f %::z")
            .to_string()
    }

    // ---- zones -------------------------------------------------------------------------

    #[test]
    fn parses_iana_zone_names() {
        assert_eq!(parse_zone("Asia/Tokyo"), Ok(TOKYO));
        assert_eq!(parse_zone("America/New_York"), Ok(NEW_YORK));
        assert_eq!(parse_zone(" Europe/London "), Ok(LONDON));
        assert_eq!(parse_zone("Etc/GMT"), Ok(chrono_tz::Etc::GMT));
    }

    #[test]
    fn unknown_zone_names_the_zone_and_the_expected_form() {
        for bad in ["Tokyo", "JST+9", "", "asia/tokyo_x"] {
            let e = parse_zone(bad).expect_err(bad);
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            assert!(msg.contains("IANA") && msg.contains("Asia/Tokyo"), "{msg}");
        }
    }

    // ---- serials -----------------------------------------------------------------------

    #[test]
    fn serial_epoch_is_1899_12_30_midnight_in_the_sheets_zone() {
        assert_eq!(at(0.0, UTC_ZONE), utc("1899-12-30T00:00:00Z"));
        assert_eq!(at(1.0, UTC_ZONE), utc("1899-12-31T00:00:00Z"));
        assert_eq!(at(-0.0, UTC_ZONE), utc("1899-12-30T00:00:00Z"));
        // Japan has been on +09:00 since 1888 (before that, local mean time +09:18:59).
        assert_eq!(at(0.0, TOKYO), utc("1899-12-29T15:00:00Z"));
        assert_eq!(at(1.0, TOKYO), utc("1899-12-30T15:00:00Z"));
        // New York on EST since 1883; London on GMT in winter.
        assert_eq!(at(0.0, NEW_YORK), utc("1899-12-30T05:00:00Z"));
        assert_eq!(at(0.0, LONDON), utc("1899-12-30T00:00:00Z"));
        // Kathmandu kept local mean time +05:41:16 until 1920.
        assert_eq!(
            at(0.0, chrono_tz::Asia::Kathmandu),
            utc("1899-12-29T18:18:44Z")
        );
        // A time-only cell (no date part) is a fraction of the epoch day.
        assert_eq!(at(0.25, UTC_ZONE), utc("1899-12-30T06:00:00Z"));
    }

    #[test]
    fn known_serials() {
        // 2026-11-30 is 46356 days after 1899-12-30.
        assert_eq!(
            NaiveDate::from_ymd_opt(2026, 11, 30).map(|d| (d - serial_epoch().date()).num_days()),
            Some(46356)
        );
        assert_eq!(at(46356.5, TOKYO), utc("2026-11-30T12:00:00+09:00"));
        assert_eq!(at(46356.5, UTC_ZONE), utc("2026-11-30T12:00:00Z"));
        assert_eq!(at(46356.5, NEW_YORK), utc("2026-11-30T12:00:00-05:00"));
        // 1900-03-01 is 61: sheets have no 1900-02-29, unlike Lotus/Excel's 1900 system.
        assert_eq!(at(61.0, UTC_ZONE), utc("1900-03-01T00:00:00Z"));
        assert_eq!(at(2958465.0, UTC_ZONE), utc("9999-12-31T00:00:00Z"));
        assert_eq!(
            instant_to_serial(utc("2026-11-30T03:00:00Z"), TOKYO),
            46356.5
        );
        assert_eq!(
            instant_to_serial(utc("2026-11-30T06:00:00Z"), TOKYO),
            46356.625
        );
        assert_eq!(
            instant_to_serial(utc("1899-12-30T00:00:00Z"), UTC_ZONE),
            0.0
        );
    }

    #[test]
    fn serials_round_to_the_millisecond() {
        // 14:05:09.250 on 2026-11-30, as a sheet would store it (with float noise).
        let exact = 46356.0 + (14.0 * 3600.0 + 5.0 * 60.0 + 9.25) / 86400.0;
        let want = utc("2026-11-30T14:05:09.250+09:00");
        assert_eq!(at(exact, TOKYO), want);
        assert_eq!(at(exact + 1e-11, TOKYO), want);
        assert_eq!(at(exact - 1e-11, TOKYO), want);
        // 0.4 ms rounds down, 0.6 ms rounds up.
        assert_eq!(
            at(0.4 / MS_PER_DAY as f64, UTC_ZONE),
            utc("1899-12-30T00:00:00Z")
        );
        assert_eq!(
            at(0.6 / MS_PER_DAY as f64, UTC_ZONE),
            utc("1899-12-30T00:00:00.001Z")
        );
        // Noise just below zero is still serial 0, not an error.
        assert_eq!(at(-1e-12, UTC_ZONE), utc("1899-12-30T00:00:00Z"));
        // Sub-millisecond instants are rounded before becoming a serial.
        let fine = utc("2026-11-30T05:05:09.123456789Z");
        assert_eq!(
            at(instant_to_serial(fine, TOKYO), TOKYO),
            utc("2026-11-30T05:05:09.123Z")
        );
        let half_up = utc("2026-11-30T05:05:09.1235Z");
        assert_eq!(
            at(instant_to_serial(half_up, TOKYO), TOKYO),
            utc("2026-11-30T05:05:09.124Z")
        );
    }

    #[test]
    fn rejects_non_finite_and_absurd_serials_naming_them() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = serial_to_instant(bad, TOKYO).expect_err("non-finite");
            assert!(matches!(e, TimeError::NotFinite { .. }), "{e:?}");
            assert!(e.to_string().contains("1899-12-30"), "{e}");
        }
        for bad in [-1.0, -0.001, 2958466.0, 1e300, f64::MAX, -f64::MAX] {
            let e = serial_to_instant(bad, TOKYO).expect_err("out of range");
            assert!(matches!(e, TimeError::OutOfRange { .. }), "{bad}: {e:?}");
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
        }
        // The last millisecond of 9999-12-31 is still a date.
        let last = (SERIAL_END_DAYS * MS_PER_DAY - 1) as f64 / MS_PER_DAY as f64;
        assert_eq!(at(last, UTC_ZONE), utc("9999-12-31T23:59:59.999Z"));
        // In New York that wall clock is already in year 10000 UTC, which is still fine.
        assert_eq!(at(last, NEW_YORK) - at(last, UTC_ZONE), TimeDelta::hours(5));
    }

    // ---- DST ---------------------------------------------------------------------------

    #[test]
    fn new_york_spring_forward_gap_shifts_forward_by_the_gap() {
        // 2026-03-08: clocks jump 02:00 EST -> 03:00 EDT; 02:30 does not exist.
        let s = serial_of_wall(wall("2026-03-08 02:30:00"));
        let t = at(s, NEW_YORK);
        assert_eq!(t, utc("2026-03-08T07:30:00Z"), "got {}", local(t, NEW_YORK));
        assert_eq!(local(t, NEW_YORK), "2026-03-08 03:30:00.000 -04:00:00");
        // The edges of the gap.
        assert_eq!(
            at(serial_of_wall(wall("2026-03-08 01:59:59.999")), NEW_YORK),
            utc("2026-03-08T06:59:59.999Z")
        );
        assert_eq!(
            at(serial_of_wall(wall("2026-03-08 02:00:00")), NEW_YORK),
            utc("2026-03-08T07:00:00Z")
        );
        assert_eq!(
            at(serial_of_wall(wall("2026-03-08 03:00:00")), NEW_YORK),
            utc("2026-03-08T07:00:00Z")
        );
        // The same through a text cell.
        assert_eq!(
            cell(json!("2026/03/08 02:30"), NEW_YORK),
            utc("2026-03-08T07:30:00Z")
        );
    }

    #[test]
    fn new_york_fall_back_ambiguity_takes_the_earlier_instant() {
        // 2026-11-01: clocks go 02:00 EDT -> 01:00 EST; 01:30 happens twice.
        let s = serial_of_wall(wall("2026-11-01 01:30:00"));
        let t = at(s, NEW_YORK);
        assert_eq!(t, utc("2026-11-01T05:30:00Z"), "got {}", local(t, NEW_YORK));
        assert_eq!(local(t, NEW_YORK), "2026-11-01 01:30:00.000 -04:00:00");
        // The second 01:30 (EST) gives the same serial and reads back as the first.
        let second = utc("2026-11-01T06:30:00Z");
        assert_eq!(instant_to_serial(second, NEW_YORK), s);
        assert_eq!(at(instant_to_serial(second, NEW_YORK), NEW_YORK), t);
        // Outside the repeated hour both passes are unique again.
        for instant in ["2026-11-01T04:59:59.999Z", "2026-11-01T07:00:00Z"] {
            let i = utc(instant);
            assert_eq!(at(instant_to_serial(i, NEW_YORK), NEW_YORK), i, "{instant}");
        }
        assert_eq!(cell(json!("2026-11-01 01:30"), NEW_YORK), t);
    }

    #[test]
    fn london_gap_and_repeat() {
        // 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT.
        assert_eq!(
            at(serial_of_wall(wall("2026-03-29 01:30:00")), LONDON),
            utc("2026-03-29T01:30:00Z")
        );
        assert_eq!(
            local(
                at(serial_of_wall(wall("2026-03-29 01:30:00")), LONDON),
                LONDON
            ),
            "2026-03-29 02:30:00.000 +01:00:00"
        );
        assert_eq!(
            at(serial_of_wall(wall("2026-10-25 01:30:00")), LONDON),
            utc("2026-10-25T00:30:00Z")
        );
        // Summer and winter noon.
        assert_eq!(
            cell(json!("2026/07/01 12:00"), LONDON),
            utc("2026-07-01T11:00:00Z")
        );
        assert_eq!(
            cell(json!("2026/12/01 12:00"), LONDON),
            utc("2026-12-01T12:00:00Z")
        );
    }

    #[test]
    fn whole_skipped_day_and_half_hour_dst() {
        // Samoa skipped 2011-12-30 entirely (-10:00 -> +14:00).
        let apia = chrono_tz::Pacific::Apia;
        let t = at(serial_of_wall(wall("2011-12-30 12:00:00")), apia);
        assert_eq!(local(t, apia), "2011-12-31 12:00:00.000 +14:00:00");
        // Lord Howe moves clocks by 30 minutes: 2026-10-04 02:00 +10:30 -> 02:30 +11:00.
        let lh = chrono_tz::Australia::Lord_Howe;
        let t = at(serial_of_wall(wall("2026-10-04 02:15:00")), lh);
        assert_eq!(local(t, lh), "2026-10-04 02:45:00.000 +11:00:00");
    }

    /// Instants at which the UTC offset of `tz` changes, between `from` and `to` (found by
    /// hourly probing, then narrowed to the second).
    fn transitions(tz: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let off = |t: DateTime<Utc>| tz.offset_from_utc_datetime(&t.naive_utc()).fix();
        let mut out = Vec::new();
        let mut t = from;
        while t < to {
            let next = t + TimeDelta::hours(1);
            if off(t) != off(next) {
                let (mut lo, mut hi) = (t, next);
                while hi - lo > TimeDelta::seconds(1) {
                    let mid = lo + (hi - lo) / 2;
                    if off(mid) == off(lo) {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                out.push(hi);
            }
            t = next;
        }
        out
    }

    /// Checks the round trip for one instant; `Err` says what went wrong.
    fn check_round_trip(t: DateTime<Utc>, tz: Tz) -> Result<(), String> {
        let serial = instant_to_serial(t, tz);
        let back = serial_to_instant(serial, tz)
            .map_err(|e| format!("{t} ({}) -> serial {serial} -> error {e}", local(t, tz)))?;
        let wall = t.with_timezone(&tz).naive_local();
        let expected = match tz.from_local_datetime(&wall) {
            // The only instants that cannot survive: the second pass of a repeated hour.
            LocalResult::Ambiguous(a, b) => a.min(b).with_timezone(&Utc),
            _ => t,
        };
        if back != expected {
            return Err(format!(
                "{t} ({}) -> serial {serial} -> {back} ({}), expected {expected}",
                local(t, tz),
                local(back, tz)
            ));
        }
        let again = instant_to_serial(back, tz);
        if again != serial {
            return Err(format!("{t} in {tz}: serial {serial} came back as {again}"));
        }
        Ok(())
    }

    #[test]
    fn round_trips_around_every_transition_near_the_epoch_and_in_2026() {
        let windows = [
            ("1899-12-25T00:00:00Z", "1900-01-10T00:00:00Z"),
            ("1918-01-01T00:00:00Z", "1919-01-01T00:00:00Z"),
            ("2011-01-01T00:00:00Z", "2012-01-10T00:00:00Z"),
            ("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"),
        ];
        let mut checked_transitions = 0;
        for tz in ZONES {
            for (from, to) in windows {
                for tr in transitions(tz, utc(from), utc(to)) {
                    checked_transitions += 1;
                    // Every 7 minutes 3.217 s from 3 h before to 3 h after the change (the
                    // odd step lands on many second and millisecond values).
                    let mut t = tr - TimeDelta::hours(3);
                    while t < tr + TimeDelta::hours(3) {
                        if let Err(msg) = check_round_trip(t, tz) {
                            panic!("{tz} around {tr}: {msg}");
                        }
                        t += TimeDelta::milliseconds(7 * 60_000 + 3_217);
                    }
                    for edge in [tr - TimeDelta::milliseconds(1), tr] {
                        if let Err(msg) = check_round_trip(edge, tz) {
                            panic!("{tz} at {tr}: {msg}");
                        }
                    }
                }
            }
            // The epoch itself and the first instants after it.
            let epoch = at(0.0, tz);
            for ms in [0, 1, 999, 60_000, 86_399_999] {
                let t = epoch + TimeDelta::milliseconds(ms);
                if let Err(msg) = check_round_trip(t, tz) {
                    panic!("{tz} near the epoch: {msg}");
                }
            }
        }
        // Guards the sweep itself: New York, London, Lord Howe, Sao Paulo and Dublin change
        // twice in 2026, Apia skipped a day in 2011, and so on.
        assert!(
            checked_transitions >= 20,
            "only {checked_transitions} transitions found"
        );
    }

    #[test]
    fn lmt_offsets_with_seconds_survive_the_round_trip() {
        // Asia/Tokyo before 1888: +09:18:59. Serials cannot express that era (negative), but
        // a zone still on local mean time at the epoch can.
        let ktm = chrono_tz::Asia::Kathmandu;
        let t = utc("1900-06-01T12:34:56.789Z");
        assert_eq!(local(t, ktm), "1900-06-01 18:16:12.789 +05:41:16");
        assert_eq!(at(instant_to_serial(t, ktm), ktm), t);
        assert_eq!(
            local(utc("1887-06-01T00:00:00Z"), TOKYO),
            "1887-06-01 09:18:59.000 +09:18:59"
        );
        assert!(instant_to_serial(utc("1887-06-01T00:00:00Z"), TOKYO) < 0.0);
    }

    fn zone() -> impl Strategy<Value = Tz> {
        proptest::sample::select(ZONES.to_vec())
    }

    proptest! {
        #[test]
        fn instant_serial_instant_round_trips_to_the_millisecond(
            tz in zone(),
            // 1900-01-01T00:00Z .. 2100-01-01T00:00Z in milliseconds.
            ms in -2_208_988_800_000i64..4_102_444_800_000i64,
        ) {
            let t = DateTime::from_timestamp_millis(ms)
                .ok_or_else(|| TestCaseError::fail(format!("bad ms {ms}")))?;
            check_round_trip(t, tz).map_err(TestCaseError::fail)?;
        }

        #[test]
        fn serial_instant_serial_keeps_the_wall_clock_except_in_gaps(
            tz in zone(),
            // Serial 1 (1899-12-31) .. 73051 (2100-01-01) in milliseconds.
            ms in MS_PER_DAY..73_051 * MS_PER_DAY,
        ) {
            let serial = ms as f64 / MS_PER_DAY as f64;
            let t = serial_to_instant(serial, tz).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let back_ms = (instant_to_serial(t, tz) * MS_PER_DAY as f64).round() as i64;
            let wall = serial_epoch() + TimeDelta::milliseconds(ms);
            match tz.from_local_datetime(&wall) {
                LocalResult::None => prop_assert!(
                    back_ms > ms,
                    "{wall} is skipped in {tz}; it should move forward, got {}", local(t, tz)
                ),
                _ => prop_assert_eq!(back_ms, ms, "{} in {}: came back as {}", wall, tz, local(t, tz)),
            }
        }

        #[test]
        fn format_datetime_reads_back(
            tz in zone(),
            secs in -2_208_988_800i64..4_102_444_800i64,
        ) {
            let t = DateTime::from_timestamp(secs, 0)
                .ok_or_else(|| TestCaseError::fail(format!("bad secs {secs}")))?;
            let text = format_datetime(t, tz);
            let back = cell_to_instant(&Value::String(text.clone()), tz)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let earliest = tz.from_local_datetime(&t.with_timezone(&tz).naive_local())
                .earliest().map(|x| x.with_timezone(&Utc));
            prop_assert_eq!(back, earliest, "{} from {}", text, t);
        }
    }

    // ---- cells -------------------------------------------------------------------------

    #[test]
    fn empty_cells_are_none() {
        for v in [json!(null), json!(""), json!("   ")] {
            assert_eq!(cell_to_instant(&v, TOKYO), Ok(None), "{v}");
        }
    }

    #[test]
    fn number_cells_are_serials() {
        let want = utc("2026-11-30T12:00:00+09:00");
        assert_eq!(cell(json!(46356.5), TOKYO), want);
        assert_eq!(cell(json!(46356), TOKYO), utc("2026-11-30T00:00:00+09:00"));
        assert_eq!(cell(json!("46356.5"), TOKYO), want);
        assert_eq!(cell(json!(" 46356.5 "), TOKYO), want);
        let e = cell_err(json!(-3), TOKYO);
        assert!(matches!(e, TimeError::OutOfRange { .. }), "{e:?}");
    }

    #[test]
    fn each_text_format_in_the_sheets_zone() {
        let cases = [
            ("2026/11/30 12:34:56", "2026-11-30T12:34:56+09:00"),
            ("2026/11/30 12:34", "2026-11-30T12:34:00+09:00"),
            ("2026/11/30", "2026-11-30T00:00:00+09:00"),
            ("2026-11-30 12:34:56", "2026-11-30T12:34:56+09:00"),
            ("2026-11-30T12:34:56", "2026-11-30T12:34:56+09:00"),
            ("2026-11-30T12:34", "2026-11-30T12:34:00+09:00"),
            ("2026-11-30 12:34", "2026-11-30T12:34:00+09:00"),
            ("2026-11-30", "2026-11-30T00:00:00+09:00"),
            ("2026/1/5 9:05", "2026-01-05T09:05:00+09:00"),
            ("2026/01/05 9:05:07", "2026-01-05T09:05:07+09:00"),
            ("  2026/11/30 12:34:56\n", "2026-11-30T12:34:56+09:00"),
            // Fractional seconds, rounded to the millisecond.
            ("2026/11/30 12:34:56.5", "2026-11-30T12:34:56.500+09:00"),
            (
                "2026-11-30T12:34:56.123456",
                "2026-11-30T12:34:56.123+09:00",
            ),
            ("2026-11-30 12:34:56.9996", "2026-11-30T12:34:57.000+09:00"),
        ];
        for (text, want) in cases {
            assert_eq!(cell(json!(text), TOKYO), utc(want), "{text:?}");
        }
        // The same wall clock is a different instant in another sheet's zone.
        assert_eq!(
            cell(json!("2026/11/30 12:34:56"), NEW_YORK),
            utc("2026-11-30T12:34:56-05:00")
        );
    }

    #[test]
    fn rfc3339_offsets_win_over_the_sheets_zone() {
        let want = utc("2026-11-30T03:34:56Z");
        for text in [
            "2026-11-30T12:34:56+09:00",
            "2026-11-30T03:34:56Z",
            "2026-11-30T03:34:56z",
            "2026-11-30 12:34:56+09:00",
            "2026-11-29T22:34:56-05:00",
            "2026-11-30T12:34:56+0900",
            "2026/11/30 12:34:56+09",
        ] {
            for tz in [TOKYO, NEW_YORK, LONDON, UTC_ZONE] {
                assert_eq!(cell(json!(text), tz), want, "{text:?} in {tz}");
            }
        }
        assert_eq!(
            cell(json!("2026-11-30T12:34+09:00"), NEW_YORK),
            utc("2026-11-30T03:34:00Z")
        );
        assert_eq!(
            cell(json!("2026-11-30T12:34:56.789+09:00"), NEW_YORK),
            utc("2026-11-30T03:34:56.789Z")
        );
        assert_eq!(
            cell(json!("2026-11-30T12:34:56.78951+09:00"), LONDON),
            utc("2026-11-30T03:34:56.790Z")
        );
    }

    #[test]
    fn unreadable_text_names_the_value_and_the_formats() {
        for text in [
            "tomorrow",
            "30/11/2026",
            "2026年11月30日",
            "12:34",
            "inf",
            "NaN",
            "2026/11",
            "2026/11/3012:34",
            "2026/ 11/30",
            "2026/11-30",
            "2026/11/30 9:5",
            "2026/11/30 12:34:56.",
            "2026/11/30 12",
            "2026/11/30 12:34 JST",
            "2026-11-30Z",
            "2026-11-30T12:34:56+9:00",
            "2026-11-30T12:34:56+09:00:00",
            "26/11/30",
            "20261/11/30",
        ] {
            let e = cell_err(json!(text), TOKYO);
            assert!(
                matches!(e, TimeError::UnrecognizedText { .. }),
                "{text:?}: {e:?}"
            );
            let msg = e.to_string();
            assert!(msg.contains(&format!("{text:?}")), "{msg}");
            assert!(
                msg.contains("2026/11/30 12:34:56") && msg.contains("+09:00"),
                "{msg}"
            );
        }
    }

    #[test]
    fn impossible_dates_say_so() {
        for text in [
            "2026/02/30",
            "2026/13/01",
            "2026/0/10",
            "2026/11/30 25:00",
            "2026/11/30 24:00",
            "2026-11-30T12:61:00",
            "2026-11-30T12:34:60Z",
            "2026-11-30T12:34:56+24:00",
            "2026-11-30T12:34:56+09:60",
            "2025-02-29",
        ] {
            let e = cell_err(json!(text), TOKYO);
            assert!(matches!(e, TimeError::NoSuchDate { .. }), "{text:?}: {e:?}");
            assert!(e.to_string().contains(text), "{e}");
        }
    }

    #[test]
    fn text_outside_the_serial_range_is_rejected() {
        for text in ["1899/12/29 23:59", "0001-01-01T00:00:00Z", "1800/01/01"] {
            let e = cell_err(json!(text), UTC_ZONE);
            assert!(matches!(e, TimeError::OutOfRange { .. }), "{text:?}: {e:?}");
            assert!(e.to_string().contains(text), "{e}");
        }
        // 1899-12-30 00:00 in Tokyo is fine; the same instant written in UTC is 15:00 the day
        // before, but it is judged in the sheet's zone, where it is serial 0.
        assert_eq!(
            cell(json!("1899-12-29T15:00:00Z"), TOKYO),
            utc("1899-12-29T15:00:00Z")
        );
    }

    #[test]
    fn other_json_values_are_not_dates() {
        for v in [
            json!(true),
            json!(false),
            json!([46356.5]),
            json!({"date": 1}),
        ] {
            let e = cell_err(v.clone(), TOKYO);
            assert!(matches!(e, TimeError::NotADate { .. }), "{v}: {e:?}");
            assert!(e.to_string().contains(&v.to_string()), "{e}");
        }
    }

    // ---- formatting --------------------------------------------------------------------

    #[test]
    fn formats_in_the_sheets_zone() {
        let t = utc("2026-11-30T05:05:09.999Z");
        assert_eq!(format_short(t, TOKYO), "11/30 14:05");
        assert_eq!(format_hhmm(t, TOKYO), "14:05");
        assert_eq!(format_datetime(t, TOKYO), "2026/11/30 14:05:09");
        assert_eq!(format_short(t, NEW_YORK), "11/30 00:05");
        assert_eq!(format_datetime(t, NEW_YORK), "2026/11/30 00:05:09");
        // Zero-padded month, day and hour; the date is the sheet's, not UTC's.
        let t = utc("2026-01-04T23:07:00Z");
        assert_eq!(format_short(t, TOKYO), "01/05 08:07");
        assert_eq!(format_hhmm(t, TOKYO), "08:07");
        assert_eq!(format_short(t, LONDON), "01/04 23:07");
        // Summer time shows as the clocks do.
        assert_eq!(format_hhmm(utc("2026-07-01T11:00:00Z"), LONDON), "12:00");
    }
}
