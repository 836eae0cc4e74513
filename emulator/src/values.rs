//! Cell values in and out: how `valueInputOption` turns request values into cells, and how
//! `valueRenderOption` / `dateTimeRenderOption` turn cells into reply values
//! (https://developers.google.com/sheets/api/reference/rest/v4/ValueInputOption,
//! https://developers.google.com/sheets/api/reference/rest/v4/ValueRenderOption,
//! https://developers.google.com/sheets/api/reference/rest/v4/DateTimeRenderOption).
//!
//! Number and date formatting follow Google's `ja_JP` defaults as far as sheetq can see them;
//! the emulator assumes the "automatic" number format prints integers without decimals and
//! other numbers with up to 10 decimals, trailing zeros dropped.

use std::borrow::Cow;
use std::sync::OnceLock;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use regex::Regex;
use serde::{Serialize, Serializer};
use serde_json::Value as Json;

use super::error::ApiError;
use super::formula::{self, automatic, Eff};
use super::store::{NumberFormat, Spreadsheet, Value};

/// `valueInputOption`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Stored as given: strings stay strings, even `=1+1` or `123`.
    Raw,
    /// Parsed as if typed into the UI: numbers, booleans, dates, `=` formulas.
    UserEntered,
}

impl Input {
    /// Google requires the option on writes: a missing one is
    /// `'valueInputOption' is required but not specified`.
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s {
            Some("RAW") => Ok(Input::Raw),
            Some("USER_ENTERED") => Ok(Input::UserEntered),
            None | Some("") | Some("INPUT_VALUE_OPTION_UNSPECIFIED") => Err(ApiError::invalid(
                "'valueInputOption' is required but not specified",
            )),
            Some(other) => Err(ApiError::invalid(format!(
                "Invalid value at 'value_input_option' (type.googleapis.com/google.apps.sheets.v4.ValueInputOption), \"{other}\""
            ))),
        }
    }
}

/// `valueRenderOption`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRender {
    Formatted,
    Unformatted,
    Formula,
}

/// `dateTimeRenderOption` (ignored under `FORMATTED_VALUE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateRender {
    Serial,
    FormattedString,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Render {
    pub value: ValueRender,
    pub date: DateRender,
}

impl Render {
    /// Defaults are `FORMATTED_VALUE` and `SERIAL_NUMBER`, as documented.
    pub fn parse(value: Option<&str>, date: Option<&str>) -> Result<Self, ApiError> {
        let value = match value {
            None | Some("") | Some("FORMATTED_VALUE") => ValueRender::Formatted,
            Some("UNFORMATTED_VALUE") => ValueRender::Unformatted,
            Some("FORMULA") => ValueRender::Formula,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "Invalid value at 'value_render_option' (type.googleapis.com/google.apps.sheets.v4.ValueRenderOption), \"{other}\""
                )))
            }
        };
        let date = match date {
            None | Some("") | Some("SERIAL_NUMBER") => DateRender::Serial,
            Some("FORMATTED_STRING") => DateRender::FormattedString,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "Invalid value at 'date_time_render_option' (type.googleapis.com/google.apps.sheets.v4.DateTimeRenderOption), \"{other}\""
                )))
            }
        };
        Ok(Render { value, date })
    }
}

/// The most characters a cell holds (https://support.google.com/docs/answer/37603: "Cells
/// containing text: 50,000 characters").
pub const CELL_MAX_CHARS: usize = 50_000;

/// Google's refusal of a value longer than a cell holds; the whole request fails with it.
pub fn check_length(text: &str) -> Result<(), String> {
    if text.chars().count() > CELL_MAX_CHARS {
        Err(format!(
            "Your input contains more than the maximum of {CELL_MAX_CHARS} characters in a single cell."
        ))
    } else {
        Ok(())
    }
}

/// What a written value becomes: the cell's value (`None` clears it) and, for typed dates
/// and the like, the number format that comes with it.
pub type Entered = (Option<Value>, Option<NumberFormat>);

/// Converts one request value into what the cell stores. `Ok(None)` means "leave the cell
/// as it is" (JSON `null` is skipped, documented on `ValueRange.values`); an empty string
/// clears the value.
pub fn input_value(v: &Json, input: Input) -> Result<Option<Entered>, ApiError> {
    if let Json::String(s) = v {
        check_length(s).map_err(ApiError::invalid)?;
    }
    Ok(Some(match v {
        Json::Null => return Ok(None),
        Json::Bool(b) => (Some(Value::Bool(*b)), None),
        Json::Number(n) => (Some(Value::Number(n.as_f64().unwrap_or(0.0))), None),
        Json::String(s) if s.is_empty() => (None, None),
        Json::String(s) => match input {
            Input::Raw => (Some(Value::String(s.clone())), None),
            Input::UserEntered => {
                let (v, f) = parse_user_entered(s);
                (Some(v), f)
            }
        },
        Json::Array(_) | Json::Object(_) => {
            return Err(ApiError::invalid(format!(
                "Invalid values[0][0]: {} value",
                if v.is_array() {
                    "list_value"
                } else {
                    "struct_value"
                }
            )))
        }
    }))
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).unwrap_or_else(|e| panic!("bad pattern: {e}")))
}

/// Parses text the way the Sheets UI does for the inputs sheetq meets: `=` formulas, a
/// leading `'` forcing text, `TRUE`/`FALSE`, plain and thousands-separated numbers,
/// percentages, `yyyy/MM/dd[ HH:mm[:ss]]` (also with `-`) and `HH:mm[:ss]`. Anything else
/// stays text; the emulator assumes no other locale-specific formats.
pub fn parse_user_entered(s: &str) -> (Value, Option<NumberFormat>) {
    static NUM: OnceLock<Regex> = OnceLock::new();
    static GROUPED: OnceLock<Regex> = OnceLock::new();
    static PCT: OnceLock<Regex> = OnceLock::new();
    static DATE: OnceLock<Regex> = OnceLock::new();
    static TIME: OnceLock<Regex> = OnceLock::new();
    if s.len() > 1 && s.starts_with('=') {
        return (Value::Formula(s.to_string()), None);
    }
    if let Some(rest) = s.strip_prefix('\'') {
        return (Value::String(rest.to_string()), None);
    }
    let t = s.trim();
    if t.eq_ignore_ascii_case("TRUE") {
        return (Value::Bool(true), None);
    }
    if t.eq_ignore_ascii_case("FALSE") {
        return (Value::Bool(false), None);
    }
    if re(&NUM, r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$").is_match(t) {
        if let Ok(n) = t.parse::<f64>() {
            return (Value::Number(n), None);
        }
    }
    if re(&GROUPED, r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$").is_match(t) {
        if let Ok(n) = t.replace(',', "").parse::<f64>() {
            let pattern = if t.contains('.') { "#,##0.00" } else { "#,##0" };
            return (Value::Number(n), Some(fmt("NUMBER", pattern)));
        }
    }
    if let Some(c) = re(&PCT, r"^([+-]?(\d+\.?\d*|\.\d+))%$").captures(t) {
        if let Ok(n) = c[1].parse::<f64>() {
            let pattern = if c[1].contains('.') { "0.00%" } else { "0%" };
            return (Value::Number(n / 100.0), Some(fmt("PERCENT", pattern)));
        }
    }
    if let Some(c) = re(
        &DATE,
        r"^(\d{4})([/-])(\d{1,2})[/-](\d{1,2})(?:\s+(\d{1,2}):(\d{2})(?::(\d{2}))?)?$",
    )
    .captures(t)
    {
        let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
        let date = NaiveDate::from_ymd_opt(
            num(1).unwrap_or(0) as i32,
            num(3).unwrap_or(0),
            num(4).unwrap_or(0),
        );
        if let Some(date) = date {
            let sep = &c[2];
            let with_time = c.get(5).is_some();
            let time = NaiveTime::from_hms_opt(
                num(5).unwrap_or(0),
                num(6).unwrap_or(0),
                num(7).unwrap_or(0),
            );
            if let Some(time) = time {
                let serial = to_serial(date.and_time(time));
                let pattern = match (sep, with_time) {
                    ("/", false) => "yyyy/MM/dd",
                    ("/", true) => "yyyy/MM/dd HH:mm:ss",
                    (_, false) => "yyyy-MM-dd",
                    (_, true) => "yyyy-MM-dd HH:mm:ss",
                };
                let kind = if with_time { "DATE_TIME" } else { "DATE" };
                return (Value::Number(serial), Some(fmt(kind, pattern)));
            }
        }
    }
    if let Some(c) = re(&TIME, r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$").captures(t) {
        let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
        if let Some(time) = NaiveTime::from_hms_opt(
            num(1).unwrap_or(0),
            num(2).unwrap_or(0),
            num(3).unwrap_or(0),
        ) {
            let secs = f64::from(time.num_seconds_from_midnight());
            return (
                Value::Number(secs / 86_400.0),
                Some(fmt("TIME", "HH:mm:ss")),
            );
        }
    }
    (Value::String(s.to_string()), None)
}

fn fmt(kind: &str, pattern: &str) -> NumberFormat {
    NumberFormat {
        kind: kind.to_string(),
        pattern: pattern.to_string(),
    }
}

fn epoch() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(1899, 12, 30)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or_default()
}

/// Sheets' date serial: days since 1899-12-30 00:00, as wall-clock time in the spreadsheet's
/// time zone (https://developers.google.com/sheets/api/guides/formats#about_date_time_values).
pub fn to_serial(t: NaiveDateTime) -> f64 {
    (t - epoch()).num_milliseconds() as f64 / 86_400_000.0
}

pub fn from_serial(serial: f64) -> Option<NaiveDateTime> {
    if !serial.is_finite() || serial.abs() > 3.0e6 {
        return None;
    }
    let ms = (serial * 86_400_000.0).round() as i64;
    epoch().checked_add_signed(Duration::milliseconds(ms))
}

/// A rendered reply value that borrows the cell's text where it can, so that large reads
/// serialise without copying every string.
#[derive(Debug, Clone, PartialEq)]
pub enum Out<'a> {
    Str(Cow<'a, str>),
    Num(f64),
    Bool(bool),
}

impl Out<'_> {
    pub fn to_json(&self) -> Json {
        match self {
            Out::Str(s) => Json::String(s.to_string()),
            Out::Num(n) => number_json(*n),
            Out::Bool(b) => Json::Bool(*b),
        }
    }
}

impl Serialize for Out<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Out::Str(t) => s.serialize_str(t),
            Out::Num(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => s.serialize_i64(*n as i64),
            Out::Num(n) if n.is_finite() => s.serialize_f64(*n),
            Out::Num(_) => s.serialize_unit(),
            Out::Bool(b) => s.serialize_bool(*b),
        }
    }
}

/// Renders a cell for a `values` reply. `None` for an empty cell.
pub fn render(ss: &Spreadsheet, sheet: usize, row: u32, col: u32, r: Render) -> Option<Json> {
    render_out(ss, sheet, row, col, r).map(|o| o.to_json())
}

/// [`render`] without building JSON: plain text cells are borrowed.
pub fn render_out(
    ss: &Spreadsheet,
    sheet: usize,
    row: u32,
    col: u32,
    r: Render,
) -> Option<Out<'_>> {
    let cell = ss.sheets.get(sheet)?.cell(row, col)?;
    let value = cell.value.as_ref()?;
    let nf = cell.number_format.as_deref();
    match (r.value, value) {
        (ValueRender::Formula, Value::Formula(f)) => return Some(Out::Str(Cow::Borrowed(f))),
        (_, Value::String(s)) => return Some(Out::Str(Cow::Borrowed(s))),
        (ValueRender::Unformatted | ValueRender::Formula, Value::Number(n))
            if !(r.date == DateRender::FormattedString && is_date_format(nf)) =>
        {
            return Some(Out::Num(*n))
        }
        (ValueRender::Unformatted | ValueRender::Formula, Value::Bool(b)) => {
            return Some(Out::Bool(*b))
        }
        _ => {}
    }
    let eff = formula::effective(ss, sheet, value);
    Some(match r.value {
        ValueRender::Formatted => Out::Str(Cow::Owned(format_value(&eff, nf))),
        ValueRender::Unformatted | ValueRender::Formula => match eff {
            Eff::Number(n) => {
                if r.date == DateRender::FormattedString && is_date_format(nf) {
                    Out::Str(Cow::Owned(format_value(&eff, nf)))
                } else {
                    Out::Num(n)
                }
            }
            Eff::String(s) => Out::Str(Cow::Owned(s)),
            Eff::Bool(b) => Out::Bool(b),
            Eff::Error(e) => Out::Str(Cow::Owned(e)),
        },
    })
}

fn is_date_format(nf: Option<&NumberFormat>) -> bool {
    nf.is_some_and(|f| matches!(f.kind.as_str(), "DATE" | "TIME" | "DATE_TIME"))
}

/// A number as JSON, integral values without a fraction (`2`, not `2.0`) as Google sends.
pub fn number_json(n: f64) -> Json {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Json::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Json::Number)
            .unwrap_or(Json::Null)
    }
}

/// The formatted value (what the cell shows).
pub fn format_value(eff: &Eff, nf: Option<&NumberFormat>) -> String {
    match eff {
        Eff::String(s) => s.clone(),
        Eff::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
        Eff::Error(e) => e.clone(),
        Eff::Number(n) => format_number(*n, nf),
    }
}

fn format_number(n: f64, nf: Option<&NumberFormat>) -> String {
    let Some(nf) = nf else {
        return automatic(n);
    };
    match nf.kind.as_str() {
        "DATE" | "TIME" | "DATE_TIME" => {
            let pattern = if nf.pattern.is_empty() {
                match nf.kind.as_str() {
                    "DATE" => "yyyy/MM/dd",
                    "TIME" => "H:mm:ss",
                    _ => "yyyy/MM/dd H:mm:ss",
                }
            } else {
                nf.pattern.as_str()
            };
            match from_serial(n) {
                Some(t) => format_date(t, pattern),
                None => automatic(n),
            }
        }
        "PERCENT" => {
            let decimals = decimals_of(&nf.pattern);
            format!("{:.*}%", decimals, n * 100.0)
        }
        "NUMBER" | "CURRENCY" | "SCIENTIFIC" if !nf.pattern.is_empty() => {
            let decimals = decimals_of(&nf.pattern);
            let s = format!("{:.*}", decimals, n);
            if nf.pattern.contains(',') {
                group_thousands(&s)
            } else {
                s
            }
        }
        _ => automatic(n),
    }
}

fn decimals_of(pattern: &str) -> usize {
    pattern
        .split_once('.')
        .map(|(_, f)| f.chars().take_while(|c| *c == '0' || *c == '#').count())
        .unwrap_or(0)
}

fn group_thousands(s: &str) -> String {
    let (sign, rest) = s.strip_prefix('-').map(|r| ("-", r)).unwrap_or(("", s));
    let (int, frac) = rest
        .split_once('.')
        .map(|(i, f)| (i, Some(f)))
        .unwrap_or((rest, None));
    let mut out = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    match frac {
        Some(f) => format!("{sign}{out}.{f}"),
        None => format!("{sign}{out}"),
    }
}

/// Formats a date-time with a Sheets date pattern (`yyyy`, `yy`, `M`/`MM`, `d`/`dd`, `H`/`HH`,
/// `h`/`hh`, `m`/`mm`, `s`/`ss`). A lowercase `m` is minutes after an hour or before seconds
/// and months otherwise, as documented at
/// https://developers.google.com/sheets/api/guides/formats#date_and_time_format_patterns.
pub fn format_date(t: NaiveDateTime, pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let mut last_was_hour = false;
    while i < chars.len() {
        let c = chars[i];
        let mut n = 1;
        while i + n < chars.len() && chars[i + n] == c {
            n += 1;
        }
        let next_is_second = chars[i + n..]
            .iter()
            .find(|c| c.is_ascii_alphabetic())
            .is_some_and(|c| *c == 's');
        match c {
            'y' => {
                if n <= 2 {
                    out.push_str(&format!("{:02}", t.year() % 100));
                } else {
                    out.push_str(&format!("{:04}", t.year()));
                }
            }
            'M' => push_num(&mut out, t.month(), n),
            'm' if last_was_hour || next_is_second => push_num(&mut out, t.minute(), n),
            'm' => push_num(&mut out, t.month(), n),
            'd' => push_num(&mut out, t.day(), n),
            'H' => push_num(&mut out, t.hour(), n),
            'h' => push_num(&mut out, (t.hour() + 11) % 12 + 1, n),
            's' => push_num(&mut out, t.second(), n),
            other => {
                for _ in 0..n {
                    out.push(other);
                }
            }
        }
        if c.is_ascii_alphabetic() {
            last_was_hour = matches!(c, 'H' | 'h');
        }
        i += n;
    }
    out
}

fn push_num(out: &mut String, v: u32, width: usize) {
    if width >= 2 {
        out.push_str(&format!("{v:02}"));
    } else {
        out.push_str(&v.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_entered_parses_numbers_booleans_dates_and_formulas() {
        assert_eq!(parse_user_entered("42").0, Value::Number(42.0));
        assert_eq!(parse_user_entered("-1.5").0, Value::Number(-1.5));
        assert_eq!(parse_user_entered("1,234").0, Value::Number(1234.0));
        assert_eq!(parse_user_entered("true").0, Value::Bool(true));
        assert_eq!(parse_user_entered("=1+1").0, Value::Formula("=1+1".into()));
        assert_eq!(parse_user_entered("'=1+1").0, Value::String("=1+1".into()));
        assert_eq!(parse_user_entered("50%").0, Value::Number(0.5));
        assert_eq!(parse_user_entered("abc 1").0, Value::String("abc 1".into()));
        let (v, f) = parse_user_entered("2026/11/30 12:34:56");
        let Value::Number(n) = v else {
            panic!("date should be a serial, got {v:?}")
        };
        // 2026-11-30 is day 46356 after 1899-12-30; 12:34:56 is 45296 s into the day.
        assert!(
            (n - (46356.0 + 45296.0 / 86400.0)).abs() < 1e-9,
            "serial {n}"
        );
        assert_eq!(f.map(|f| f.kind), Some("DATE_TIME".to_string()));
    }

    #[test]
    fn raw_keeps_text() {
        let got = input_value(&Json::from("=1+1"), Input::Raw).ok().flatten();
        assert_eq!(got, Some((Some(Value::String("=1+1".into())), None)));
        let got = input_value(&Json::from("123"), Input::Raw).ok().flatten();
        assert_eq!(got, Some((Some(Value::String("123".into())), None)));
        assert_eq!(input_value(&Json::Null, Input::Raw).ok(), Some(None));
    }

    #[test]
    fn formats_numbers_and_dates() {
        assert_eq!(automatic(2.0), "2");
        assert_eq!(automatic(0.1 + 0.2), "0.3");
        assert_eq!(automatic(-3.25), "-3.25");
        let t = NaiveDate::from_ymd_opt(2026, 11, 30)
            .and_then(|d| d.and_hms_opt(9, 5, 7))
            .unwrap_or_default();
        assert_eq!(format_date(t, "yyyy/MM/dd HH:mm:ss"), "2026/11/30 09:05:07");
        assert_eq!(format_date(t, "yyyy-mm-dd h:mm"), "2026-11-30 9:05");
        let back = from_serial(to_serial(t));
        assert_eq!(back, Some(t));
        let nf = fmt("NUMBER", "#,##0.00");
        assert_eq!(format_number(1234.5, Some(&nf)), "1,234.50");
    }
}
