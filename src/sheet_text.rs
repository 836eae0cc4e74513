//! Text in sheet cells compared with the config's: the one written rule that the daemon,
//! the poll intake and the Apps Script intake (`apps-script/intake.js`: `sheetTrim`, `skeleton`, `compareSheetText`) share
//! (docs/design.md, "Sheet text against the config"); pure.
//!
//! A value read from the sheet names a configured thing (a command, a function, a target,
//! the `continuation` flag) only when it is **the same** text: its [`trim`] equal to the
//! configured value code point for code point. Rust's `str::trim` and JavaScript's
//! `String.prototype.trim` disagree (U+0085 is whitespace to one and not the other, U+FEFF
//! the other way round), so neither is used on a value that decides anything: a value that
//! one side trimmed into a match and the other did not is exactly how a flag or a label
//! slipped past a check. A value that is not the same but has the same [`skeleton`]
//! **looks like** the configured one (an invisible, control or format character, a
//! fullwidth letter, another case): it is refused, never normalised into a match.
//!
//! The vectors in `tests/vectors/sheet_text.json` hold both implementations to the rule.

/// What a value read from the sheet is to a configured one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Likeness {
    /// The same text, spaces and tabs at either end aside.
    Same,
    /// Not the same, yet the same once invisible, control and format characters are dropped,
    /// fullwidth forms folded and letters lowercased: a look-alike. `first_hidden` is the
    /// first code point of the sheet's value that is hidden, a fullwidth form, or not in the
    /// configured value at all (another case), when it has one.
    LookAlike { first_hidden: Option<char> },
    /// Another text altogether.
    Other,
}

/// The value with U+0020 SPACE and U+0009 TAB removed at both ends, and nothing else.
pub fn trim(value: &str) -> &str {
    value.trim_matches([' ', '\t'])
}

/// Whether `c` is dropped by the [`skeleton`]: Unicode `White_Space`, a control (`Cc`) or a
/// format character (`Cf`: zero-width characters, bidirectional marks, the BOM, tags).
pub fn hidden(c: char) -> bool {
    c.is_whitespace() || c.is_control() || is_format(c)
}

/// Unicode general category `Cf` (Unicode 15.1); the same ranges are in the vectors file,
/// where the Node test checks them against JavaScript's `\p{Cf}`.
pub const FORMAT_RANGES: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

fn is_format(c: char) -> bool {
    let c = c as u32;
    FORMAT_RANGES.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// The fullwidth form U+FF01–U+FF5E of an ASCII character as that character; any other
/// character as it is.
fn folded(c: char) -> char {
    match c as u32 {
        cp @ 0xFF01..=0xFF5E => char::from_u32(cp - 0xFF01 + 0x21).unwrap_or(c),
        _ => c,
    }
}

/// What is left of a value for telling look-alikes: hidden characters dropped, fullwidth
/// forms folded to ASCII, A–Z lowercased.
pub fn skeleton(value: &str) -> String {
    value
        .chars()
        .filter(|&c| !hidden(c))
        .map(|c| folded(c).to_ascii_lowercase())
        .collect()
}

/// The sheet's `value` against the configured `configured`.
pub fn compare(value: &str, configured: &str) -> Likeness {
    if trim(value) == trim(configured) {
        return Likeness::Same;
    }
    let shape = skeleton(value);
    if shape.is_empty() || shape != skeleton(configured) {
        return Likeness::Other;
    }
    let first_hidden = value
        .chars()
        .find(|&c| hidden(c) || folded(c) != c || !configured.contains(c));
    Likeness::LookAlike { first_hidden }
}

/// Whether `value` is the same as `configured` ([`Likeness::Same`]).
pub fn same(value: &str, configured: &str) -> bool {
    compare(value, configured) == Likeness::Same
}

/// `U+0085`, with the character's name when it is one people meet in these attacks.
pub fn code_point(c: char) -> String {
    let name = match c {
        '\u{0009}' => " (TAB)",
        '\u{000A}' => " (LINE FEED)",
        '\u{000D}' => " (CARRIAGE RETURN)",
        '\u{0020}' => " (SPACE)",
        '\u{0085}' => " (NEXT LINE)",
        '\u{00A0}' => " (NO-BREAK SPACE)",
        '\u{00AD}' => " (SOFT HYPHEN)",
        '\u{200B}' => " (ZERO WIDTH SPACE)",
        '\u{200C}' => " (ZERO WIDTH NON-JOINER)",
        '\u{200D}' => " (ZERO WIDTH JOINER)",
        '\u{200E}' => " (LEFT-TO-RIGHT MARK)",
        '\u{200F}' => " (RIGHT-TO-LEFT MARK)",
        '\u{2028}' => " (LINE SEPARATOR)",
        '\u{2029}' => " (PARAGRAPH SEPARATOR)",
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => " (a bidirectional control)",
        '\u{3000}' => " (IDEOGRAPHIC SPACE)",
        '\u{FEFF}' => " (ZERO WIDTH NO-BREAK SPACE)",
        '\u{FF01}'..='\u{FF5E}' => " (a fullwidth form)",
        'A'..='Z' => " (an upper-case letter)",
        _ => "",
    };
    format!("U+{:04X}{name}", c as u32)
}

/// How a look-alike differs, for a refusal: "differs by U+0085 (NEXT LINE)".
pub fn difference(first_hidden: Option<char>) -> String {
    match first_hidden {
        Some(c) => format!("differs by {}", code_point(c)),
        None => "differs by invisible characters".into(),
    }
}

/// The first configured value among `configured` that `value` only looks like, with how it
/// differs: `None` when `value` is the same as one of them, or like none of them.
pub fn look_alike<'a>(
    value: &str,
    configured: impl IntoIterator<Item = &'a str>,
) -> Option<(&'a str, String)> {
    let mut found = None;
    for c in configured {
        match compare(value, c) {
            Likeness::Same => return None,
            Likeness::LookAlike { first_hidden } if found.is_none() => {
                found = Some((c, difference(first_hidden)));
            }
            _ => {}
        }
    }
    found
}

/// Whether `c` would act on a terminal, a log line or a rendered message rather than show:
/// a control character (`Cc`: ESC and the rest) or a format character (`Cf`: bidirectional
/// overrides and isolates, zero-width characters, the BOM). Line breaks and tabs are
/// controls too; [`visible`] keeps none, [`VisibleWriter`] keeps the two of output text.
pub fn acts(c: char) -> bool {
    c.is_control() || is_format(c)
}

/// The one rule for showing a sheet value (or anything people typed) where it could act
/// (an operator's terminal, a log line, a status listing): every control and format
/// character made visible as `\u{1b}`, and at most `max` characters of the value kept, the
/// cut marked with `…`. The rest shows as it is (Japanese text stays readable).
pub fn visible(value: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in value.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        push_visible(&mut out, c, acts(c));
    }
    out
}

/// [`visible`] for a cell sheetq writes (a panel's or the index's text that quotes a sheet
/// value): line feeds and tabs are kept, as a cell shows them, every other control and
/// format character is made visible, and at most `max` characters are kept. A copied value
/// can thus neither disguise the rest of its cell (a bidi override) nor push the cell past
/// Google's 50,000-character limit, which would fail the whole write it rides in.
pub fn for_cell(value: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in value.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        push_visible(&mut out, c, acts(c) && c != '\n' && c != '\t');
    }
    out
}

/// Every character [`acts`] is true of, in one string: what a printer's test feeds it.
#[cfg(test)]
pub(crate) fn every_acting_character() -> String {
    (0..=0x10_FFFF_u32)
        .filter_map(char::from_u32)
        .filter(|c| acts(*c))
        .collect()
}

/// Pushes `c` onto `out`: as `\\u{1b}` when `escape`, else as it is.
fn push_visible(out: &mut String, c: char, escape: bool) {
    if escape {
        out.push_str(&format!("\\u{{{:x}}}", c as u32));
    } else {
        out.push(c);
    }
}

/// How many characters of a sheet value a log line or a terminal line shows
/// ([`visible`]); the whole value stays where it was written (the sheet, the job's log file).
pub const LINE_CHARS: usize = 200;

/// A writer of text that is not sheetq's own (a job's output, for `sheetq logs`) to a
/// terminal: control and format characters other than line feed and tab are written as
/// `\u{1b}`, bytes that are not UTF-8 as `\xff`, so no escape sequence reaches the terminal.
/// A character split across two writes is held back until its end comes.
pub struct VisibleWriter<W: std::io::Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> VisibleWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, text: &str) -> std::io::Result<()> {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            push_visible(&mut out, c, acts(c) && c != '\n' && c != '\t');
        }
        self.inner.write_all(out.as_bytes())
    }
}

impl<W: std::io::Write> Drop for VisibleWriter<W> {
    /// A character cut off at the end of the stream (a capped log, a killed job) is shown
    /// as its bytes, not lost.
    fn drop(&mut self) {
        for b in std::mem::take(&mut self.pending) {
            let _ = self.inner.write_all(format!("\\x{b:02x}").as_bytes());
        }
        let _ = self.inner.flush();
    }
}

impl<W: std::io::Write> std::io::Write for VisibleWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut bytes = std::mem::take(&mut self.pending);
        let mut start = 0;
        loop {
            match std::str::from_utf8(&bytes[start..]) {
                Ok(text) => {
                    let text = text.to_string();
                    self.emit(&text)?;
                    break;
                }
                Err(e) => {
                    let good = start + e.valid_up_to();
                    let text = String::from_utf8_lossy(&bytes[start..good]).into_owned();
                    self.emit(&text)?;
                    match e.error_len() {
                        Some(len) => {
                            for b in &bytes[good..good + len] {
                                self.inner.write_all(format!("\\x{b:02x}").as_bytes())?;
                            }
                            start = good + len;
                        }
                        // The rest is the start of a character whose end is to come.
                        None => {
                            bytes.drain(..good);
                            self.pending = bytes;
                            return Ok(buf.len());
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A value from the sheet (or anything people typed) as a log field or a log message
/// shows it, whatever the output (text, JSON, journald): [`visible`] with
/// [`LINE_CHARS`], so a field is one short line with nothing raw in it. The JSON and
/// journald outputs write fields as they get them, so every field that carries sheet text
/// goes through this: `target = %Logged(&row.target)`.
#[derive(Clone, Copy)]
pub struct Logged<'a>(pub &'a str);

impl std::fmt::Display for Logged<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&visible(self.0, LINE_CHARS))
    }
}

/// At most this many characters of a sheet value are shown in a message or a log line.
pub const SHOWN_CHARS: usize = 40;

/// A value from the sheet as a message or a log line shows it: quoted, escaped (`\n`,
/// `\u{202e}`: never raw, so a cell or log line cannot be broken or disguised by it), cut
/// after a few dozen characters. Sheet text is data.
pub fn shown(value: &str) -> String {
    let cut: String = value.chars().take(SHOWN_CHARS).collect();
    let mut out = format!("{cut:?}");
    if cut.len() < value.len() {
        out.insert(out.len() - 1, '…');
    }
    out
}

// Cutting text to fit a cell: what every writer of メッセージ and the panels shares.

/// Longest メッセージ sheetq writes, in characters. Far below the 50,000-character cell
/// limit on purpose: the message is read in a cell of a panel, and the full log belongs in
/// the command's own output (a file, the URL).
pub const MESSAGE_MAX_CHARS: usize = 2_000;

/// Marks a message cut at its end.
pub const TRUNCATED_END: &str = "… (truncated)";
/// Marks a message whose beginning was dropped (a tail).
pub const TRUNCATED_START: &str = "(truncated) …";

/// Cuts `message` to [`MESSAGE_MAX_CHARS`], keeping the beginning, with a visible marker.
pub fn limit_message(message: &str) -> String {
    head_chars(message, MESSAGE_MAX_CHARS)
}

/// `text` on one line (whitespace, newlines included, collapsed to single spaces), cut to
/// `max` characters, the last being `…` when anything was cut.
pub fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut out: String = line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The first `max` characters of `text` (marker included when cut).
pub fn head_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(TRUNCATED_END.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(TRUNCATED_END);
    out
}

/// The last `max` characters of `text` (marker included when cut).
pub fn tail_chars(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(TRUNCATED_START.chars().count());
    let mut out = TRUNCATED_START.to_string();
    out.extend(text.chars().skip(total - keep));
    out
}
/// Characters that end a line, control a terminal, or make text read other than it is:
/// the C0 and C1 controls and DEL, the line and paragraph separators, and the bidirectional
/// marks, embeddings, overrides and isolates (Unicode Standard Annex #9,
/// https://www.unicode.org/reports/tr9/), which can show `-x` where `x-` is.
pub fn disguises(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200E}'
                | '\u{200F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// A duration in Japanese units, for a sentence in Japanese: `1日`, `2時間30分`, `45秒`
/// (at most the two largest units, rounded down; `0秒` for less than a second).
pub fn duration_ja(d: std::time::Duration) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "日"), (3_600, "時間"), (60, "分"), (1, "秒")];
    let mut left = d.as_secs();
    let mut parts = Vec::new();
    for (size, unit) in UNITS {
        if left >= size && parts.len() < 2 {
            parts.push(format!("{}{unit}", left / size));
            left %= size;
        } else if !parts.is_empty() {
            // Units below the largest are shown only when they follow it directly.
            break;
        }
    }
    if parts.is_empty() {
        "0秒".into()
    } else {
        parts.concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_a_japanese_sentence_use_japanese_units() {
        let s = std::time::Duration::from_secs;
        assert_eq!(duration_ja(s(86_400)), "1日");
        assert_eq!(duration_ja(s(9_000)), "2時間30分");
        assert_eq!(duration_ja(s(30 * 86_400)), "30日");
        assert_eq!(
            duration_ja(s(86_400 + 60)),
            "1日",
            "a gap of units ends the text"
        );
        assert_eq!(duration_ja(s(45)), "45秒");
        assert_eq!(duration_ja(std::time::Duration::from_millis(300)), "0秒");
    }

    const VECTORS: &str = include_str!("../tests/vectors/sheet_text.json");

    fn vectors() -> serde_json::Value {
        serde_json::from_str(VECTORS).unwrap_or_else(|e| panic!("the vectors file parses: {e}"))
    }

    #[test]
    fn trim_removes_spaces_and_tabs_only() {
        for pair in vectors()["trim"].as_array().unwrap() {
            let (input, want) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
            assert_eq!(trim(input), want, "trim({input:?})");
        }
    }

    #[test]
    fn every_vector_gets_the_verdict_the_rule_gives_it() {
        for case in vectors()["compare"].as_array().unwrap() {
            let sheet = case["sheet"].as_str().unwrap();
            let config = case["config"].as_str().unwrap();
            let got = compare(sheet, config);
            let (verdict, hidden) = match &got {
                Likeness::Same => ("same", None),
                Likeness::LookAlike { first_hidden } => (
                    "lookalike",
                    first_hidden.map(|c| format!("U+{:04X}", c as u32)),
                ),
                Likeness::Other => ("other", None),
            };
            assert_eq!(
                verdict,
                case["verdict"].as_str().unwrap(),
                "{sheet:?} against {config:?}: {got:?}"
            );
            assert_eq!(
                hidden.as_deref(),
                case["first_hidden"].as_str(),
                "the first hidden code point of {sheet:?}"
            );
        }
    }

    #[test]
    fn the_format_table_is_the_one_the_vectors_hold_for_node() {
        let ranges: Vec<(u32, u32)> = vectors()["format_ranges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[0].as_u64().unwrap() as u32, r[1].as_u64().unwrap() as u32))
            .collect();
        assert_eq!(
            ranges, FORMAT_RANGES,
            "src/sheet_text.rs and the vectors file list Cf alike"
        );
    }

    #[test]
    fn a_look_alike_is_named_with_its_configured_value_and_how_it_differs() {
        assert_eq!(
            look_alike("deploy\u{85}", ["restart", "deploy"]),
            Some(("deploy", "differs by U+0085 (NEXT LINE)".to_string()))
        );
        assert_eq!(
            look_alike("deploy", ["Deploy", "deploy"]),
            None,
            "the same one wins"
        );
        assert_eq!(look_alike("build", ["deploy"]), None);
    }

    #[test]
    fn a_value_shown_makes_every_control_and_format_character_visible_and_is_cut() {
        let attack = "\u{1b}]0;OWNED\u{7}\u{1b}[2J\u{202e}evil\u{200b}\n名前";
        let shown = visible(attack, LINE_CHARS);
        assert!(
            !shown.chars().any(acts),
            "nothing in {shown:?} acts on a terminal"
        );
        assert_eq!(
            shown,
            "\\u{1b}]0;OWNED\\u{7}\\u{1b}[2J\\u{202e}evil\\u{200b}\\u{a}名前"
        );
        assert_eq!(
            visible(&"x".repeat(50_000), LINE_CHARS).chars().count(),
            LINE_CHARS + 1
        );
    }

    #[test]
    fn output_written_for_a_terminal_keeps_lines_and_tabs_and_nothing_else_that_acts() {
        use std::io::Write;
        let mut buffer = Vec::new();
        {
            let mut out = VisibleWriter::new(&mut buffer);
            let text = "ok\tfine\n\u{1b}[1A\u{1b}[K\u{202e}名前\n".as_bytes();
            // Written a byte at a time: a character split across writes is still whole.
            for b in text {
                out.write_all(&[*b]).unwrap_or_else(|e| panic!("{e}"));
            }
            out.write_all(&[0xff, b'\n'])
                .unwrap_or_else(|e| panic!("{e}"));
            // The stream ends inside a character: its bytes are shown, not lost.
            out.write_all(&"名".as_bytes()[..2])
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let got = String::from_utf8(buffer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got,
            "ok\tfine\n\\u{1b}[1A\\u{1b}[K\\u{202e}名前\n\\xff\n\\xe5\\x90"
        );
    }
}
