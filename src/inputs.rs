//! The inputs of a `[[functions]]` entry: typed values a person picks for a job (a version
//! to deploy, a dry-run switch, a date, a comment), declared in the config and nowhere else.
//! Each has a name (the key it takes in the job's args), a label, a type (`choice`, `text`,
//! `number`, `bool`, `date`), a default, whether it is required, and rules by type: a
//! choice's list (fixed, or a range of the spreadsheet the team keeps), a text's pattern and
//! length. Pure: the config checks the definitions ([`problems`]); the catalog checks a job's
//! values when it admits it, and `sheetq enqueue --input` before it queues one ([`value_of`]);
//! a panel cell's value becomes a job's ([`from_cell`]) and a default a cell's ([`to_cell`]),
//! under the cell's data validation ([`validation`]).
//! A value is data: whatever its source, it is checked, bounded and never run as code.

use serde::Deserialize;

/// Characters a text input holds when its definition sets no `max_length`.
pub const DEFAULT_MAX_LENGTH: usize = 200;

/// The most characters any input's value may hold (a cell holds 50,000).
pub const MAX_LENGTH: usize = 2000;

/// The most inputs a function takes: each is two cells of its panel row.
pub const MAX_INPUTS: usize = 10;

/// The most values a fixed `choices` list holds (a dropdown a person scrolls; Google's
/// list rule takes a few hundred).
pub const MAX_CHOICES: usize = 200;

/// What kind of value an input takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One of a list: `choices`, or the values of the range `choices_from`.
    Choice,
    /// Free text, bounded by `max_length` and, when set, matching `pattern`.
    Text,
    /// A number, within `min` and `max` when set.
    Number,
    /// A checkbox: true or false.
    Bool,
    /// A day, `YYYY-MM-DD`.
    Date,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Choice => "choice",
            Kind::Text => "text",
            Kind::Number => "number",
            Kind::Bool => "bool",
            Kind::Date => "date",
        }
    }
}

/// One entry of a function's `inputs`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputDef {
    /// The key the value takes in the job's args (`SHEETQ_ARGS_JSON`), and `{input.NAME}`.
    pub name: String,
    /// What the panel's header shows; the name when unset.
    #[serde(default)]
    pub label: Option<String>,
    #[serde(rename = "type")]
    pub kind: Kind,
    /// The value a job takes when none is given (and the panel's cell starts with).
    #[serde(default)]
    pub default: Option<toml::Value>,
    /// A job without a value (and without a default) is refused.
    #[serde(default)]
    pub required: bool,
    /// A choice's fixed list.
    #[serde(default)]
    pub choices: Option<Vec<String>>,
    /// A choice's list kept in the spreadsheet: an A1 range with its sheet
    /// (`"'リリース'!A2:A"`). Its values are data: each is checked by `pattern` and bounded.
    #[serde(default)]
    pub choices_from: Option<String>,
    /// A text's (or a choice's) pattern, matched against the whole value.
    #[serde(default)]
    pub pattern: Option<String>,
    /// A text's most characters ([`DEFAULT_MAX_LENGTH`] when unset, [`MAX_LENGTH`] at most).
    #[serde(default)]
    pub max_length: Option<usize>,
    /// A number's least and greatest values.
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
}

impl InputDef {
    /// What people see: the label, else the name.
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.name)
    }

    fn max_length(&self) -> usize {
        self.max_length
            .unwrap_or(DEFAULT_MAX_LENGTH)
            .min(MAX_LENGTH)
    }

    /// The pattern as a whole-value match; `None` without one (or one that does not
    /// compile, which [`problems`] reports).
    fn matcher(&self) -> Option<regex::Regex> {
        let p = self.pattern.as_deref()?;
        regex::Regex::new(&format!("^(?:{p})$")).ok()
    }

    /// The default as a job's value, checked like any other.
    pub fn default_value(&self) -> Option<Result<serde_json::Value, String>> {
        let d = self.default.as_ref()?;
        let json = serde_json::to_value(d).unwrap_or(serde_json::Value::Null);
        Some(value_of(self, &json, None))
    }
}

/// Whether `name` may name an input: ASCII letters, digits and `_`, starting with a letter,
/// at most 40 characters (it is a key of the job's args and a placeholder's name).
pub(crate) fn plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 40
}

/// Every problem of the `inputs` of the function at `at` (e.g. `[[functions]] entry 2
/// ("デプロイ")`), each naming the input and the fix.
pub fn problems(at: &str, inputs: &[InputDef]) -> Vec<String> {
    let mut out = Vec::new();
    if inputs.len() > MAX_INPUTS {
        out.push(format!(
            "{at}: {} inputs, at most {MAX_INPUTS}; take the rarely changed ones into args",
            inputs.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, d) in inputs.iter().enumerate() {
        let here = format!("{at}: inputs entry {} ({:?})", i + 1, d.name);
        if !plain_name(&d.name) {
            out.push(format!(
                "{here}: name must be ASCII letters, digits and _, starting with a letter (it becomes a key of the job's args)"
            ));
        }
        if !seen.insert(d.name.as_str()) {
            out.push(format!(
                "{here}: another input has this name; give each its own"
            ));
        }
        let list = match (d.kind, &d.choices, &d.choices_from) {
            (Kind::Choice, Some(_), Some(_)) => {
                out.push(format!(
                    "{here}: a choice takes choices or choices_from, not both"
                ));
                None
            }
            (Kind::Choice, None, None) => {
                out.push(format!(
                    "{here}: a choice needs choices = [\"a\", \"b\"] or choices_from = \"'Sheet'!A2:A\""
                ));
                None
            }
            (Kind::Choice, Some(list), None) => {
                if list.is_empty() {
                    out.push(format!(
                        "{here}: choices = [] offers nothing; list the values"
                    ));
                } else if list.len() > MAX_CHOICES {
                    out.push(format!(
                        "{here}: {} choices, at most {MAX_CHOICES}; keep a long list in the spreadsheet and name it with choices_from",
                        list.len()
                    ));
                }
                Some(list)
            }
            (Kind::Choice, None, Some(range)) => {
                if !range_with_sheet(range) || list_read_range(range).is_none() {
                    out.push(format!(
                        "{here}: choices_from = {range:?} must be a range with its sheet, such as \"'リリース'!A2:A\""
                    ));
                }
                None
            }
            (kind, choices, from) => {
                if choices.is_some() || from.is_some() {
                    out.push(format!(
                        "{here}: choices and choices_from belong to type = \"choice\", not {:?}",
                        kind.name()
                    ));
                }
                None
            }
        };
        if let Some(p) = &d.pattern {
            if !matches!(d.kind, Kind::Text | Kind::Choice) {
                out.push(format!(
                    "{here}: pattern belongs to a text or a choice, not {:?}",
                    d.kind.name()
                ));
            } else if regex::Regex::new(&format!("^(?:{p})$")).is_err() {
                out.push(format!("{here}: pattern {p:?} is not a regular expression"));
            }
        }
        if let Some(n) = d.max_length {
            if d.kind != Kind::Text {
                out.push(format!("{here}: max_length belongs to a text"));
            } else if n == 0 || n > MAX_LENGTH {
                out.push(format!(
                    "{here}: max_length = {n} must be between 1 and {MAX_LENGTH}"
                ));
            }
        }
        if (d.min.is_some() || d.max.is_some()) && d.kind != Kind::Number {
            out.push(format!("{here}: min and max belong to a number"));
        }
        if let (Some(lo), Some(hi)) = (d.min, d.max) {
            if lo > hi {
                out.push(format!("{here}: min ({lo}) is more than max ({hi})"));
            }
        }
        if let Some(Err(why)) = d.default_value() {
            out.push(format!("{here}: default: {why}"));
        }
        if let Some(list) = list {
            for c in list {
                if let Err(why) = value_of(
                    &InputDef {
                        choices: None,
                        choices_from: Some(String::new()),
                        ..d.clone()
                    },
                    &serde_json::Value::String(c.clone()),
                    None,
                ) {
                    out.push(format!("{here}: choice {c:?}: {why}"));
                }
            }
        }
    }
    out
}

/// Whether `range` names its sheet and cells (`'Sheet'!A2:A`, `Sheet!B:B`).
fn range_with_sheet(range: &str) -> bool {
    range
        .rsplit_once('!')
        .is_some_and(|(sheet, cells)| !sheet.trim().is_empty() && !cells.trim().is_empty())
}

/// Input `d`'s value from `given` (a cell's value, a JSON value, or the text after
/// `--input NAME=`), checked by its rules and made the JSON a job's args carry: a choice or a
/// text a string, a number a number, a bool a bool, a date `YYYY-MM-DD`. `listed`: the
/// values of a choice's `choices_from` range as read (`None` for a fixed list, or when the
/// range was not read, in which case the value is checked by the other rules only).
pub fn value_of(
    d: &InputDef,
    given: &serde_json::Value,
    listed: Option<&[String]>,
) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    let text = match given {
        J::String(s) => s.trim().to_string(),
        J::Number(n) => n.to_string(),
        J::Bool(b) => b.to_string(),
        J::Null => String::new(),
        other => {
            return Err(format!(
                "{} takes a single {} value, not {other}",
                d.label(),
                d.kind.name()
            ))
        }
    };
    let shown = crate::sheet_text::shown(&crate::sheet_text::head_chars(&text, 60));
    if text.chars().count() > MAX_LENGTH {
        return Err(format!(
            "{} is longer than {MAX_LENGTH} characters",
            d.label()
        ));
    }
    if let Some(c) = text.chars().find(|c| crate::sheet_text::acts(*c)) {
        return Err(format!(
            "{} holds the control character {}; type the value again",
            d.label(),
            crate::sheet_text::code_point(c)
        ));
    }
    match d.kind {
        Kind::Bool => match (given, text.to_ascii_lowercase().as_str()) {
            (J::Bool(b), _) => Ok(J::Bool(*b)),
            (_, "true") => Ok(J::Bool(true)),
            (_, "false") => Ok(J::Bool(false)),
            _ => Err(format!("{} is true or false, not {shown}", d.label())),
        },
        Kind::Number => {
            let n: f64 = match given {
                J::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                _ => text.parse().unwrap_or(f64::NAN),
            };
            if !n.is_finite() {
                return Err(format!("{} is a number, not {shown}", d.label()));
            }
            if d.min.is_some_and(|lo| n < lo) || d.max.is_some_and(|hi| n > hi) {
                return Err(format!(
                    "{} = {n} is outside {}..{}",
                    d.label(),
                    d.min.map_or("".into(), |v| v.to_string()),
                    d.max.map_or("".into(), |v| v.to_string())
                ));
            }
            Ok(serde_json::Number::from_f64(n).map_or(J::Null, J::Number))
        }
        Kind::Date => chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .map(|day| J::String(day.format("%Y-%m-%d").to_string()))
            .map_err(|_| format!("{} is a date such as 2026-12-31, not {shown}", d.label())),
        Kind::Text | Kind::Choice => {
            let limit = if d.kind == Kind::Text {
                d.max_length()
            } else {
                DEFAULT_MAX_LENGTH
            };
            if text.chars().count() > limit {
                return Err(format!("{} is longer than {limit} characters", d.label()));
            }
            if let Some(re) = d.matcher() {
                if !re.is_match(&text) {
                    return Err(format!(
                        "{} = {shown} does not match its pattern {:?}",
                        d.label(),
                        d.pattern.as_deref().unwrap_or_default()
                    ));
                }
            }
            if d.kind == Kind::Choice {
                let list: Option<&[String]> = d.choices.as_deref().or(listed);
                if let Some(list) = list {
                    if !list.iter().any(|c| c.trim() == text) {
                        let offered: Vec<String> = list
                            .iter()
                            .take(10)
                            .map(|c| crate::sheet_text::shown(c))
                            .collect();
                        return Err(format!(
                            "{} = {shown} is not among its choices ({}{})",
                            d.label(),
                            offered.join(", "),
                            if list.len() > 10 { ", …" } else { "" }
                        ));
                    }
                }
            }
            Ok(J::String(text))
        }
    }
}

/// The values of the `choices_from` ranges as a read found them, by the range's text as the
/// config writes it.
pub type Listed = std::collections::HashMap<String, Vec<String>>;

/// The inputs of a job: each input's value from `given` (the job's args, by input name), or
/// its default; a required input with neither refuses the job. `listed`: the `choices_from`
/// ranges as the daemon read them, a range missing from it refusing a value (it could not be
/// read); `None` where none were read (the shell), so a choice from a range is checked by
/// its pattern and length only. Returns the values to merge
/// into the job's args, by name, or the first refusal, naming the input and the rule.
pub fn values_of(
    inputs: &[InputDef],
    given: &serde_json::Map<String, serde_json::Value>,
    listed: Option<&Listed>,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut out = serde_json::Map::new();
    for d in inputs {
        let value = match given.get(&d.name) {
            Some(v)
                if !matches!(v, serde_json::Value::Null)
                    && v.as_str().is_none_or(|s| !s.trim().is_empty()) =>
            {
                let list = match (&d.choices_from, listed) {
                    (Some(range), Some(listed)) => match listed.get(range) {
                        Some(list) => Some(list.as_slice()),
                        None => {
                            return Err(format!(
                                "{}'s list {range} could not be read (is its sheet there?)",
                                d.label()
                            ))
                        }
                    },
                    _ => None,
                };
                Some(value_of(d, v, list)?)
            }
            _ => d.default_value().transpose()?,
        };
        match value {
            Some(v) => {
                out.insert(d.name.clone(), v);
            }
            None if d.required => {
                return Err(format!(
                    "input {} is required and was given no value",
                    d.label()
                ))
            }
            None => {}
        }
    }
    Ok(out)
}

/// The first day of Google's date serials: serial 0 is 1899-12-30
/// (https://developers.google.com/sheets/api/reference/rest/v4/DateTimeRenderOption).
fn serial_epoch() -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(1899, 12, 30).unwrap_or_default()
}

/// What input `d`'s panel cell holds, as a job's raw value (checked later, when the job is
/// admitted, by [`values_of`]): a date cell's serial becomes its day (`YYYY-MM-DD`), every
/// other cell its value as read. A date's serial names a day, not an instant: no zone.
pub fn from_cell(d: &InputDef, cell: &crate::sheets::Cell) -> serde_json::Value {
    match (d.kind, cell.as_f64()) {
        (Kind::Date, Some(serial))
            if serial.is_finite() && (0.0..3_000_000.0).contains(&serial) =>
        {
            let day = serial_epoch() + chrono::Days::new(serial.floor() as u64);
            serde_json::Value::String(day.format("%Y-%m-%d").to_string())
        }
        _ => cell.clone(),
    }
}

/// The panel cell holding `value` for input `d` (its default, or a value carried over): a
/// date as its serial (so the cell's date format and validation read it as a day), other
/// values as they are.
pub fn to_cell(d: &InputDef, value: &serde_json::Value) -> crate::sheets::Cell {
    if d.kind == Kind::Date {
        if let Some(day) = value
            .as_str()
            .and_then(|t| chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
        {
            let serial = (day - serial_epoch()).num_days() as f64;
            return crate::sheets::Cell::from(serial);
        }
    }
    value.clone()
}

/// The data validation of input `d`'s panel cell; `None` for a bool (a checkbox) and a text
/// (free, checked by sheetq when the job is admitted).
pub fn validation(d: &InputDef) -> Option<crate::sheets::Validation> {
    use crate::sheets::Validation as V;
    match d.kind {
        Kind::Choice => match (&d.choices, &d.choices_from) {
            (Some(list), _) => Some(V::List(list.clone())),
            (None, Some(range)) => Some(V::Range(range.clone())),
            (None, None) => None,
        },
        Kind::Date => Some(V::Date),
        Kind::Number => Some(V::Number {
            min: d.min.unwrap_or(-1e15),
            max: d.max.unwrap_or(1e15),
        }),
        Kind::Bool | Kind::Text => None,
    }
}

/// What input `d`'s value cell holds before anyone picks: its default, unticked for a bool
/// without one, else empty.
pub fn default_cell(d: &InputDef) -> crate::sheets::Cell {
    match d.default_value() {
        Some(Ok(v)) => to_cell(d, &v),
        _ if is_checkbox(d) => crate::sheets::Cell::Bool(false),
        _ => crate::sheets::Cell::Null,
    }
}

/// Whether `d`'s panel cell is a checkbox.
pub fn is_checkbox(d: &InputDef) -> bool {
    d.kind == Kind::Bool
}

/// Whether `d`'s panel cell shows a day.
pub fn is_date(d: &InputDef) -> bool {
    d.kind == Kind::Date
}

/// The values a `choices_from` range holds, as a read returns its rows: every non-empty cell,
/// trimmed, at most [`MAX_LISTED`] of them. Data, never trusted: each value a job takes is
/// still checked by the input's pattern and length.
pub fn listed_values(rows: &[Vec<crate::sheets::Cell>]) -> Vec<String> {
    rows.iter()
        .flatten()
        .map(crate::queue::cell_text)
        .map(|t| crate::sheet_text::trim(&t).to_string())
        // No choice is longer than a choice may be: such a cell offers nothing.
        .filter(|t| !t.is_empty() && t.chars().count() <= DEFAULT_MAX_LENGTH)
        .take(MAX_LISTED)
        .collect()
}

/// The most values read from a `choices_from` range.
pub const MAX_LISTED: usize = 5000;

/// What the daemon reads of `choices_from` range `range`: its first column, at most
/// [`MAX_LISTED`] rows from its top, so that a list a person lets grow (or fills on purpose)
/// costs a bounded read every poll. `None` for a range without its sheet, which
/// [`problems`] refuses.
pub fn list_read_range(range: &str) -> Option<String> {
    let r = crate::a1::A1Range::parse(range).ok()?;
    let title = r.sheet?;
    let col = r.start_col.unwrap_or(0);
    let top = r.start_row.unwrap_or(0);
    let bottom = r
        .end_row
        .unwrap_or(u32::MAX)
        .min(top + MAX_LISTED as u32)
        .max(top + 1);
    let letters = crate::a1::column_letters(col);
    Some(crate::a1::range(
        &title,
        &format!("{letters}{}:{letters}{bottom}", top + 1),
    ))
}

/// The inputs as one line for people (`version=1.2.4, dry_run=true`), in the order the
/// config lists them.
/// A text is shown as it is while it reads unmistakably (no `,`, `=` or quote, nothing that
/// acts, at most [`crate::sheet_text::SHOWN_CHARS`] characters); else quoted, escaped and
/// cut, so that no value can pass for another input's (`note=x, dry_run=true`) or push
/// the others out of a cut line.
pub fn summary(inputs: &[InputDef], values: &serde_json::Map<String, serde_json::Value>) -> String {
    let text = |s: &str| {
        let plain = s.chars().count() <= crate::sheet_text::SHOWN_CHARS
            && !s
                .chars()
                .any(|c| matches!(c, ',' | '=' | '"') || crate::sheet_text::acts(c));
        if plain {
            s.to_string()
        } else {
            crate::sheet_text::shown(s)
        }
    };
    inputs
        .iter()
        .filter_map(|d| {
            values.get(&d.name).map(|v| match v {
                serde_json::Value::String(s) => format!("{}={}", d.name, text(s)),
                other => format!("{}={}", d.name, text(&other.to_string())),
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The inputs of `inputs = [...]` in `text`, for tests; panics naming the fault.
#[cfg(test)]
pub(crate) fn from_toml(text: &str) -> Vec<InputDef> {
    #[derive(Deserialize)]
    struct W {
        inputs: Vec<InputDef>,
    }
    toml::from_str::<W>(text)
        .unwrap_or_else(|e| panic!("inputs {text:?} do not parse: {e}"))
        .inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_summary_never_lets_a_text_pass_for_another_input_or_run_long() {
        let inputs = from_toml(
            r#"inputs = [{ name = "note", type = "text" }, { name = "dry_run", type = "bool" }]"#,
        );
        let values = json!({ "note": "x, dry_run=true", "dry_run": false });
        assert_eq!(
            summary(&inputs, values.as_object().unwrap()),
            "note=\"x, dry_run=true\", dry_run=false"
        );
        let long = json!({ "note": "y".repeat(500) });
        let text = summary(&inputs, long.as_object().unwrap());
        assert!(text.chars().count() < 60, "cut: {text}");
        let plain = json!({ "note": "hello world" });
        assert_eq!(
            summary(&inputs, plain.as_object().unwrap()),
            "note=hello world"
        );
    }

    #[test]
    fn a_list_is_read_one_column_and_a_bounded_number_of_rows() {
        assert_eq!(
            list_read_range("'リリース'!A2:A").as_deref(),
            Some("'リリース'!A2:A5001")
        );
        assert_eq!(
            list_read_range("Sheet!B:B").as_deref(),
            Some("'Sheet'!B1:B5000")
        );
        assert_eq!(
            list_read_range("'R'!C3:D10").as_deref(),
            Some("'R'!C3:C10"),
            "the first column only"
        );
        assert_eq!(list_read_range("A2:A"), None, "a range names its sheet");
        let long = "x".repeat(DEFAULT_MAX_LENGTH + 1);
        assert_eq!(
            listed_values(&[vec![json!(" v1 ")], vec![json!("")], vec![json!(long)]]),
            ["v1"],
            "trimmed, blanks and values no choice may be left out"
        );
    }

    fn deploy() -> Vec<InputDef> {
        from_toml(
            r#"
inputs = [
  { name = "version", type = "choice", choices = ["1.2.3", "1.2.4"], required = true },
  { name = "dry_run", label = "試運転", type = "bool", default = true },
  { name = "day", type = "date" },
  { name = "ticket", type = "text", pattern = "[A-Z]+-[0-9]+", max_length = 12 },
  { name = "count", type = "number", min = 1, max = 5, default = 1 },
]"#,
        )
    }

    #[test]
    fn a_jobs_values_are_checked_typed_and_defaulted() {
        let given = json!({ "version": "1.2.4", "day": "2026-12-31", "ticket": "OPS-12" });
        let values = values_of(&deploy(), given.as_object().unwrap(), None).unwrap();
        assert_eq!(
            serde_json::Value::Object(values.clone()),
            json!({ "version": "1.2.4", "dry_run": true, "day": "2026-12-31", "ticket": "OPS-12", "count": 1.0 })
        );
        assert_eq!(
            summary(&deploy(), &values),
            "version=1.2.4, dry_run=true, day=2026-12-31, ticket=OPS-12, count=1.0"
        );
    }

    #[test]
    fn a_value_outside_its_rule_is_refused_naming_the_input_and_the_rule() {
        let refused = |given: serde_json::Value| {
            values_of(&deploy(), given.as_object().unwrap(), None).unwrap_err()
        };
        let e = refused(json!({ "version": "9.9.9" }));
        assert!(
            e.contains("version") && e.contains("not among its choices") && e.contains("\"1.2.3\""),
            "{e}"
        );
        let e = refused(json!({}));
        assert!(e.contains("version is required"), "{e}");
        let e = refused(json!({ "version": "1.2.3", "ticket": "ops-1" }));
        assert!(e.contains("does not match its pattern"), "{e}");
        let e = refused(json!({ "version": "1.2.3", "ticket": "OPS-1234567890" }));
        assert!(e.contains("longer than 12"), "{e}");
        let e = refused(json!({ "version": "1.2.3", "day": "31/12/2026" }));
        assert!(e.contains("a date such as"), "{e}");
        let e = refused(json!({ "version": "1.2.3", "dry_run": "yes" }));
        assert!(e.contains("試運転 is true or false"), "{e}");
        let e = refused(json!({ "version": "1.2.3", "count": 9 }));
        assert!(e.contains("outside 1..5"), "{e}");
        let e = refused(json!({ "version": "1.2.3\u{202e}" }));
        assert!(e.contains("control character"), "{e}");
    }

    #[test]
    fn a_choice_from_a_range_takes_the_values_read_and_its_pattern_still_rules() {
        let d = &from_toml(
            r#"inputs = [{ name = "v", type = "choice", choices_from = "'リリース'!A2:A", pattern = "[0-9.]+" }]"#,
        )[0];
        let listed = ["1.0".to_string(), "rm -rf /".to_string()];
        assert_eq!(value_of(d, &json!("1.0"), Some(&listed)), Ok(json!("1.0")));
        assert!(
            value_of(d, &json!("2.0"), Some(&listed)).is_err(),
            "not in the range"
        );
        let e = value_of(d, &json!("rm -rf /"), Some(&listed)).unwrap_err();
        assert!(
            e.contains("pattern"),
            "a listed value breaking the pattern is refused: {e}"
        );
    }

    #[test]
    fn bad_definitions_are_refused_naming_the_entry() {
        let all = problems(
            "[[functions]] entry 1 (\"デプロイ\")",
            &from_toml(
                r#"
inputs = [
  { name = "1st", type = "text" },
  { name = "v", type = "choice" },
  { name = "v", type = "text", choices = ["a"] },
  { name = "t", type = "text", pattern = "(" },
  { name = "c", type = "choice", choices = ["ok", "NO"], pattern = "[a-z]+" },
  { name = "d", type = "date", default = "tomorrow" },
  { name = "r", type = "choice", choices_from = "A2:A" },
]"#,
            ),
        );
        let expect = [
            "inputs entry 1 (\"1st\"): name must be",
            "inputs entry 2 (\"v\"): a choice needs choices",
            "inputs entry 3 (\"v\"): another input has this name",
            "inputs entry 3 (\"v\"): choices and choices_from belong to type = \"choice\"",
            "inputs entry 4 (\"t\"): pattern \"(\" is not a regular expression",
            "inputs entry 5 (\"c\"): choice \"NO\": c = \"NO\" does not match its pattern",
            "inputs entry 6 (\"d\"): default: d is a date such as",
            "inputs entry 7 (\"r\"): choices_from = \"A2:A\" must be a range with its sheet",
        ];
        for e in expect {
            assert!(all.iter().any(|p| p.contains(e)), "{e:?} among {all:#?}");
        }
        assert!(all
            .iter()
            .all(|p| p.starts_with("[[functions]] entry 1 (\"デプロイ\")")));
    }
}
