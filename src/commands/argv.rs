//! An `exec` command's argv: the templates of its elements, and the rules a value from the
//! sheet must pass before a placeholder puts it there (docs/design.md §5). A placeholder value
//! is data: never an option, never a control character, bounded in length, and matching the
//! command's own pattern where `placeholder_patterns` sets one. Pure: decided from the
//! templates and the values, tested with plain strings.
//!
//! Only argv needs these rules. The same values also reach the program in `SHEETQ_*`
//! environment variables and in the stdin JSON, where no program reads them as options.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use regex::Regex;

pub use crate::sheet_text::{shown, SHOWN_CHARS};

use super::JobSpec;

/// The most characters a value may have to be put into argv: room for any host name (253)
/// or e-mail address (254), far less than a text a person could hide a payload in.
pub const MAX_VALUE_CHARS: usize = 256;

/// A job field that an argv element can name as `{target}`, `{function}`, `{job_id}` or
/// `{requester}`, or one of its function's inputs as `{input.NAME}` (the value the job was
/// admitted with, its default filled in).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placeholder {
    Target,
    Function,
    JobId,
    Requester,
    /// `{input.NAME}`: the job's input `NAME`.
    Input(String),
}

/// How an input placeholder begins: `{input.version}`.
pub const INPUT_PREFIX: &str = "input.";

impl Placeholder {
    /// The job's own fields; inputs are named by their function's config.
    pub const ALL: [Placeholder; 4] = [
        Placeholder::Target,
        Placeholder::Function,
        Placeholder::JobId,
        Placeholder::Requester,
    ];

    /// The word between the braces, e.g. `target`, `input.version`.
    pub fn name(&self) -> String {
        match self {
            Placeholder::Target => "target".into(),
            Placeholder::Function => "function".into(),
            Placeholder::JobId => "job_id".into(),
            Placeholder::Requester => "requester".into(),
            Placeholder::Input(name) => format!("{INPUT_PREFIX}{name}"),
        }
    }

    /// The placeholder `word` names: a job field, or `input.` and an input's name (letters,
    /// digits and `_`, as `crate::inputs` allows).
    pub fn from_name(word: &str) -> Option<Placeholder> {
        if let Some(name) = word.strip_prefix(INPUT_PREFIX) {
            return crate::inputs::plain_name(name).then(|| Placeholder::Input(name.to_string()));
        }
        Placeholder::ALL.into_iter().find(|p| p.name() == word)
    }

    /// This value of a job `spec` admitted with `args`; `None` for an input the args lack.
    /// A text input is its text; a number or a bool its JSON text (`3`, `true`).
    pub fn value<'a>(
        &self,
        spec: &'a JobSpec,
        args: &'a serde_json::Map<String, serde_json::Value>,
    ) -> Option<Cow<'a, str>> {
        Some(Cow::Borrowed(match self {
            Placeholder::Target => &spec.target,
            Placeholder::Function => &spec.function,
            Placeholder::JobId => &spec.job_id,
            Placeholder::Requester => &spec.requester,
            Placeholder::Input(name) => {
                return match args.get(name)? {
                    serde_json::Value::String(s) => Some(Cow::Borrowed(s)),
                    serde_json::Value::Null => None,
                    other => Some(Cow::Owned(other.to_string())),
                }
            }
        }))
    }

    /// Every placeholder as written in argv, for messages: `{target}, {function}, …`.
    pub(crate) fn known() -> String {
        let mut known: Vec<String> = Placeholder::ALL.iter().map(|p| p.to_string()).collect();
        known.push(format!("{{{INPUT_PREFIX}NAME}}"));
        known.join(", ")
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.name())
    }
}

/// One argv element: literal text with `{target}`, `{function}`, `{job_id}`, `{requester}`
/// placeholders. A placeholder becomes part of this one element's text (spaces, quotes and
/// `;` included): the element is never split and never seen by a shell. What the text may
/// hold is [`unfit`]'s to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field(Placeholder),
}

impl ArgTemplate {
    /// Parses one element. `{word}` with `word` made of letters, digits and `_` is a
    /// placeholder and must be a known one (typo protection); any other brace is literal
    /// text, so `{print $1}` or `{"a":1}` need no escaping.
    pub fn parse(text: &str) -> Result<ArgTemplate, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            // `input.NAME` is one word; elsewhere a dot ends it, so `{a.b}` stays text.
            let dotted = after.starts_with(INPUT_PREFIX);
            let word_len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || (dotted && c == '.')))
                .unwrap_or(after.len());
            let is_placeholder = word_len > 0 && after[word_len..].starts_with('}');
            if !is_placeholder {
                literal.push_str(&rest[..=open]);
                rest = after;
                continue;
            }
            let word = &after[..word_len];
            let Some(field) = Placeholder::from_name(word) else {
                return Err(format!(
                    "unknown placeholder {{{word}}} (known: {})",
                    Placeholder::known()
                ));
            };
            literal.push_str(&rest[..open]);
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            parts.push(Part::Field(field));
            rest = &after[word_len + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() || parts.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(ArgTemplate { parts })
    }

    pub(crate) fn has_placeholder(&self) -> bool {
        self.placeholders().next().is_some()
    }

    /// The placeholders of this element, in order (a repeated one each time).
    pub fn placeholders(&self) -> impl Iterator<Item = &Placeholder> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(f) => Some(f),
            Part::Text(_) => None,
        })
    }

    /// The element's text for `spec` admitted with `args` (an input the args lack is
    /// empty: [`unfit`] refuses such a job before it is rendered).
    pub fn render(
        &self,
        spec: &JobSpec,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Field(f) => out.push_str(&f.value(spec, args).unwrap_or_default()),
            }
        }
        out
    }

    /// Whether this element is exactly `--`, which ends a program's options: what follows
    /// is an operand even if it starts with `-` (POSIX utility syntax guideline 10,
    /// https://pubs.opengroup.org/onlinepubs/9699919799/basedefs/V1_chap12.html).
    fn ends_options(&self) -> bool {
        matches!(self.parts.as_slice(), [Part::Text(t)] if t == "--")
    }

    /// Whether the element begins with a placeholder, so that a value can be its first
    /// character.
    fn begins_with_placeholder(&self) -> bool {
        matches!(self.parts.first(), Some(Part::Field(_)))
    }

    /// The fixed text of an element without placeholders.
    fn literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// The placeholder whose value begins the rendered element, and that value: the first
    /// non-empty one of the placeholders the element begins with. `None` when literal text
    /// comes first, or when a value that could come first is not known.
    fn opening<'a>(
        &self,
        value: &impl Fn(&Placeholder) -> Option<Cow<'a, str>>,
    ) -> Option<(&Placeholder, Cow<'a, str>)> {
        for part in &self.parts {
            match part {
                Part::Text(_) => return None,
                Part::Field(f) => match value(f)? {
                    v if v.is_empty() => continue,
                    v => return Some((f, v)),
                },
            }
        }
        None
    }
}

/// The element as written in `sheetq.toml`.
impl fmt::Display for ArgTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.parts {
            match part {
                Part::Text(t) => f.write_str(t)?,
                Part::Field(p) => write!(f, "{p}")?,
            }
        }
        Ok(())
    }
}

/// A command's own rule for a placeholder's values (`placeholder_patterns`): a regex the
/// whole value must match.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    whole: Regex,
}

impl Pattern {
    /// Compiles `source` (Rust `regex` syntax) to match whole values only.
    pub fn new(source: &str) -> Result<Pattern, regex::Error> {
        // Compiled alone first: only a valid (so balanced) regex is wrapped, so `a)|(b`
        // cannot escape the anchors.
        Regex::new(source)?;
        let whole = Regex::new(&format!(r"\A(?:{source})\z"))?;
        Ok(Pattern {
            source: source.to_string(),
            whole,
        })
    }

    pub fn is_match(&self, value: &str) -> bool {
        self.whole.is_match(value)
    }

    /// The pattern as configured.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// A command's patterns, by placeholder.
pub type Patterns = BTreeMap<Placeholder, Pattern>;

/// Why a value cannot go where `argv` (of command `command`) puts it: the first value that
/// cannot, with the rule it breaks; `None` when every one fits. `value` gives each
/// placeholder's value, `None` for one not known yet (it is not judged). A placeholder the
/// argv does not use is never looked at.
pub fn unfit<'a>(
    command: &str,
    argv: &[ArgTemplate],
    patterns: &Patterns,
    value: impl Fn(&Placeholder) -> Option<Cow<'a, str>>,
) -> Option<String> {
    let mut options_ended = false;
    for (i, element) in argv.iter().enumerate() {
        if element.ends_options() {
            options_ended = true;
            continue;
        }
        for p in element.placeholders() {
            if let Some(why) = value(p).and_then(|v| unfit_text(command, p, &v, patterns)) {
                return Some(why);
            }
        }
        if options_ended || i == 0 {
            continue;
        }
        if let Some((p, v)) = element.opening(&value) {
            if v.starts_with('-') {
                return Some(format!(
                    "{p} value {} starts with \"-\" and would begin argv element {i} of \
                     command \"{command}\", where the program reads options: a value from the \
                     sheet is never passed as an option",
                    shown(&v)
                ));
            }
        }
    }
    None
}

/// What is wrong with `v` as text for `p` wherever it goes in argv.
fn unfit_text(command: &str, p: &Placeholder, v: &str, patterns: &Patterns) -> Option<String> {
    if let Some(c) = v.chars().find(|c| disguises(*c)) {
        return Some(format!(
            "{p} value {} holds U+{:04X}, a control, line-break or text-direction character: \
             a value put into argv must be plain text on one line",
            shown(v),
            u32::from(c)
        ));
    }
    let chars = v.chars().count();
    if chars > MAX_VALUE_CHARS {
        return Some(format!(
            "{p} value {} is {chars} characters long, more than the {MAX_VALUE_CHARS} a value \
             put into argv may have",
            shown(v)
        ));
    }
    match patterns.get(p) {
        Some(pattern) if !pattern.is_match(v) => Some(format!(
            "{p} value {} does not match the pattern {:?} that \
             commands.{command}.placeholder_patterns.{} requires",
            shown(v),
            pattern.as_str(),
            p.name()
        )),
        _ => None,
    }
}

pub(crate) use crate::sheet_text::disguises;

/// The elements of `argv` that begin with a placeholder where the program still reads
/// options (no `--` before them), by index.
pub fn option_positions(argv: &[ArgTemplate]) -> Vec<usize> {
    let end = argv
        .iter()
        .position(ArgTemplate::ends_options)
        .unwrap_or(argv.len());
    (1..end)
        .filter(|&i| argv[i].begins_with_placeholder())
        .collect()
}

/// One line per [`option_positions`] element of command `command`: where it is, what a
/// job meets there, and how to write it so that any value passes as data.
pub fn option_warnings(command: &str, argv: &[ArgTemplate]) -> Vec<String> {
    let program = argv
        .first()
        .and_then(ArgTemplate::literal)
        .map(|p| {
            Path::new(p)
                .file_name()
                .map_or(p.to_string(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "the program".into());
    option_positions(argv)
        .into_iter()
        .map(|i| {
            let element = &argv[i];
            let first = element.placeholders().next().map_or(String::new(), |p| {
                format!(": a job whose {p} starts with \"-\" is refused there")
            });
            let fix = match argv[i - 1].literal() {
                Some(option) if is_long_option(option) => {
                    format!("write \"{option}={element}\" in place of \"{option}\", \"{element}\"")
                }
                Some(option) if is_short_option(option) => {
                    format!("write \"{option}{element}\" in place of \"{option}\", \"{element}\"")
                }
                _ => format!(
                    "write \"--\" before it (\"--\", \"{element}\") if {program} ends its \
                     options at \"--\", or pass it as an option's value (\"--name={element}\")"
                ),
            };
            format!(
                "commands.{command}.exec[{i}] = \"{element}\" is where {program} reads \
                 options{first}; {fix}"
            )
        })
        .collect()
}

/// `--name`: a long option that takes its value as `--name=value` too (getopt_long).
fn is_long_option(text: &str) -> bool {
    text.strip_prefix("--")
        .is_some_and(|name| !name.is_empty() && !name.contains('='))
}

/// `-x`: a short option that takes its value attached, `-xvalue` (getopt).
fn is_short_option(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next() == Some('-')
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's args without inputs.
    static NO_ARGS: std::sync::LazyLock<serde_json::Map<String, serde_json::Value>> =
        std::sync::LazyLock::new(serde_json::Map::new);

    fn argv(elements: &[&str]) -> Vec<ArgTemplate> {
        elements
            .iter()
            .map(|e| ArgTemplate::parse(e).unwrap_or_else(|err| panic!("{e}: {err}")))
            .collect()
    }

    /// Why `target` cannot go into `elements` (of command "cmd"), with `requester` "r@x".
    fn refusal(elements: &[&str], target: &str) -> Option<String> {
        refusal_with(elements, &Patterns::new(), target)
    }

    fn refusal_with(elements: &[&str], patterns: &Patterns, target: &str) -> Option<String> {
        let spec = JobSpec {
            target: target.into(),
            requester: "r@x".into(),
            ..JobSpec::default()
        };
        unfit("cmd", &argv(elements), patterns, |p| {
            p.value(&spec, &NO_ARGS)
        })
    }

    const PROXY: &str = "-oProxyCommand=sh -c 'id > /tmp/x'";

    #[test]
    fn a_value_starting_with_a_dash_as_a_whole_element_is_refused_as_an_option() {
        let why = refusal(&["ssh", "-o", "BatchMode=yes", "{target}", "uptime"], PROXY)
            .expect("a target that would be an ssh option must be refused");
        assert_eq!(
            why,
            "{target} value \"-oProxyCommand=sh -c 'id > /tmp/x'\" starts with \"-\" and would \
             begin argv element 3 of command \"cmd\", where the program reads options: a value \
             from the sheet is never passed as an option"
        );
        assert!(
            refusal(&["scp", "{target}:/etc/motd", "."], "-oProxyCommand=x").is_some(),
            "a value beginning its element is an option even with text after it"
        );
        assert!(
            refusal(&["tool", "{requester}{target}"], "-x").is_none(),
            "the requester r@x begins that element"
        );
    }

    #[test]
    fn an_empty_value_leaves_the_next_placeholder_beginning_the_element() {
        let spec = JobSpec {
            target: "-x".into(),
            ..JobSpec::default()
        };
        let why = unfit(
            "cmd",
            &argv(&["tool", "{requester}{target}"]),
            &Patterns::new(),
            |p| p.value(&spec, &NO_ARGS),
        );
        assert!(
            why.as_deref()
                .is_some_and(|w| w.starts_with("{target} value \"-x\"")),
            "with an empty requester, the target begins the element: {why:?}"
        );
    }

    #[test]
    fn after_a_double_dash_a_value_starting_with_a_dash_is_an_operand() {
        assert_eq!(
            refusal(
                &["ssh", "-o", "BatchMode=yes", "--", "{target}", "uptime"],
                PROXY
            ),
            None
        );
        assert!(
            refusal(&["tool", "{target}", "--", "{target}"], "-x").is_some(),
            "the first use is still before the --"
        );
        assert!(
            refusal(&["tool", "--x", "{target}"], "-y").is_some(),
            "--x is an option, not the end of options"
        );
    }

    #[test]
    fn a_value_after_an_options_equals_sign_or_letters_is_that_options_value() {
        for elements in [
            &["tool", "--target={target}"][..],
            &["ssh", "-l{target}", "host"][..],
            &["tool", "x{target}"][..],
        ] {
            assert_eq!(refusal(elements, "-rf"), None, "{elements:?}");
        }
    }

    #[test]
    fn control_line_break_and_text_direction_characters_are_refused_anywhere() {
        for (value, code) in [
            ("a\nb", "U+000A"),
            ("a\tb", "U+0009"),
            ("a\0b", "U+0000"),
            ("a\rb", "U+000D"),
            ("a\u{85}b", "U+0085"),
            ("a\u{2028}b", "U+2028"),
            ("a\u{2029}b", "U+2029"),
            ("txt.\u{202E}exe", "U+202E"),
            ("a\u{202A}b", "U+202A"),
            ("a\u{2066}b", "U+2066"),
            ("a\u{2069}b", "U+2069"),
        ] {
            let why = refusal(&["tool", "--target={target}"], value)
                .unwrap_or_else(|| panic!("{value:?} was let into argv"));
            assert!(
                why.contains(code) && why.contains("plain text on one line"),
                "{value:?}: {why}"
            );
            assert!(
                !why.chars().any(disguises),
                "the message itself must show {value:?} escaped: {why:?}"
            );
        }
        assert_eq!(
            refusal(
                &["tool", "--target={target}"],
                "サーバーA 1号機 (本番) 'x' \"y\" $z"
            ),
            None,
            "spaces, quotes and any script are plain text"
        );
    }

    #[test]
    fn a_value_longer_than_the_bound_is_refused() {
        let fits = "a".repeat(MAX_VALUE_CHARS);
        assert_eq!(refusal(&["tool", "--t={target}"], &fits), None);
        let long = "あ".repeat(MAX_VALUE_CHARS + 1);
        let why = refusal(&["tool", "--t={target}"], &long).expect("one character too many");
        assert!(
            why.contains("is 257 characters long, more than the 256"),
            "{why}"
        );
        assert!(
            why.chars().count() < 300,
            "the message shows only the start of the value: {why}"
        );
    }

    #[test]
    fn a_value_not_matching_the_commands_pattern_is_refused_naming_the_pattern() {
        let mut patterns = Patterns::new();
        patterns.insert(
            Placeholder::Target,
            Pattern::new("[a-z0-9][a-z0-9.-]*").unwrap(),
        );
        let elements = ["ssh", "--", "{target}", "uptime"];
        assert_eq!(refusal_with(&elements, &patterns, "web-1.example"), None);
        let why = refusal_with(&elements, &patterns, "web 1").expect("a space is not allowed");
        assert_eq!(
            why,
            "{target} value \"web 1\" does not match the pattern \"[a-z0-9][a-z0-9.-]*\" that \
             commands.cmd.placeholder_patterns.target requires"
        );
        assert!(
            refusal_with(&elements, &patterns, "x.example; id").is_some(),
            "the whole value must match, not a part of it"
        );
    }

    #[test]
    fn a_pattern_cannot_escape_its_anchors() {
        assert!(Pattern::new("a)|(b").is_err());
        let p = Pattern::new("a|b").unwrap();
        assert!(p.is_match("a") && p.is_match("b"));
        assert!(
            !p.is_match("ab") && !p.is_match("xa"),
            "each alternative whole"
        );
    }

    #[test]
    fn placeholders_the_argv_does_not_use_are_not_checked() {
        let spec = JobSpec {
            target: "web-1".into(),
            requester: format!("-\n{}", "x".repeat(1000)),
            function: "\u{202E}".into(),
            ..JobSpec::default()
        };
        let mut patterns = Patterns::new();
        patterns.insert(Placeholder::JobId, Pattern::new("never").unwrap());
        assert_eq!(
            unfit(
                "cmd",
                &argv(&["ssh", "{target}", "uptime"]),
                &patterns,
                |p| { p.value(&spec, &NO_ARGS) }
            ),
            None,
            "only {{target}} goes into argv"
        );
    }

    #[test]
    fn a_value_not_known_yet_is_not_judged() {
        let unknown = |_: &Placeholder| None;
        assert_eq!(
            unfit(
                "cmd",
                &argv(&["tool", "{target}"]),
                &Patterns::new(),
                unknown
            ),
            None
        );
    }

    #[test]
    fn a_refused_value_is_shown_escaped_and_cut() {
        assert_eq!(shown("a\nb\u{202e}"), "\"a\\nb\\u{202e}\"");
        let long = format!("{}tail", "x".repeat(SHOWN_CHARS));
        assert_eq!(shown(&long), format!("\"{}…\"", "x".repeat(SHOWN_CHARS)));
        assert_eq!(shown(PROXY), format!("\"{PROXY}\""));
    }

    #[test]
    fn option_positions_are_placeholders_beginning_an_element_before_any_double_dash() {
        let a = argv(&[
            "tool",
            "{target}",
            "--name={target}",
            "x{target}",
            "{requester}@",
            "--",
            "{target}",
        ]);
        assert_eq!(option_positions(&a), [1, 4]);
    }

    #[test]
    fn option_warnings_say_how_to_write_each_position_safely() {
        let w = option_warnings(
            "uptime",
            &argv(&["/usr/bin/ssh", "-o", "BatchMode=yes", "{target}", "uptime"]),
        );
        assert_eq!(
            w,
            [
                "commands.uptime.exec[3] = \"{target}\" is where ssh reads options: a job whose \
              {target} starts with \"-\" is refused there; write \"--\" before it (\"--\", \
              \"{target}\") if ssh ends its options at \"--\", or pass it as an option's value \
              (\"--name={target}\")"
            ]
        );
        let w = option_warnings(
            "report",
            &argv(&["/opt/report", "--target", "{target}", "-l", "{requester}"]),
        );
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(
            w[0].ends_with("write \"--target={target}\" in place of \"--target\", \"{target}\""),
            "{}",
            w[0]
        );
        assert!(
            w[1].ends_with("write \"-l{requester}\" in place of \"-l\", \"{requester}\""),
            "{}",
            w[1]
        );
        assert_eq!(
            option_warnings("ok", &argv(&["/opt/report", "--target={target}"])),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_input_placeholder_is_input_dot_a_plain_name_and_a_dot_elsewhere_is_text() {
        let t = ArgTemplate::parse("--v={input.version}")
            .unwrap_or_else(|e| panic!("an input placeholder parses: {e}"));
        assert_eq!(
            t.placeholders().collect::<Vec<_>>(),
            [&Placeholder::Input("version".into())]
        );
        assert_eq!(t.to_string(), "--v={input.version}");
        for bad in ["{input.}", "{input.9x}", "{input.a.b}"] {
            assert!(
                ArgTemplate::parse(bad).is_err(),
                "{bad} names no input and must be refused, not taken as text"
            );
        }
        let text = ArgTemplate::parse("{a.b}").unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.has_placeholder(), "{{a.b}} is text, as before");
    }

    #[test]
    fn braces_that_are_not_placeholders_stay_literal() {
        let spec = JobSpec {
            target: "T".into(),
            job_id: "J".into(),
            ..JobSpec::default()
        };
        for (tpl, want) in [
            ("{print $1}", "{print $1}"),
            ("{\"a\":1}", "{\"a\":1}"),
            ("x{target}y{job_id}", "xTyJ"),
            ("{}{target}{", "{}T{"),
            ("", ""),
            ("{requester}", ""),
        ] {
            let t = ArgTemplate::parse(tpl).unwrap();
            assert_eq!(t.render(&spec, &NO_ARGS), want, "{tpl}");
            assert_eq!(t.to_string(), tpl, "shown as written");
        }
    }
}
