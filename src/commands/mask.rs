//! Secrets kept out of what a job printed, before it goes anywhere: the values of the
//! variables a command receives through `env`, and values the job registers itself with a
//! line `::add-mask::VALUE` (GitHub Actions' syntax), are replaced by `***` in its output as
//! it is read. Everything sheetq shows of a job's output (the `_ジョブログ` row, メッセージ and
//! the panel's 結果, notifications, `sheetq logs`, the file under `state_dir/logs`) is taken
//! from what comes out of here, so one place masks them all.
//!
//! A command's `mask = [...]` patterns (regexes) are masked too, line by line: with patterns,
//! a line is shown once it is complete (or 4 KiB long, or the stream ended).
//!
//! Output comes in chunks of whatever size the pipe gives; a secret split over two reads is
//! still masked: the masker holds back the end of a chunk while it could be the beginning
//! of a secret, and an `::add-mask::` line until its end. Values shorter than
//! [`MIN_CHARS`] are not masked (as GitLab requires of masked variables: replacing every
//! short common string would garble the output and still leave the value guessable);
//! `sheetq check` and the daemon's start name the `env` variables whose values are that
//! short.

use std::sync::{Arc, Mutex};

/// The fewest characters a value has to be masked.
pub const MIN_CHARS: usize = 8;

/// What stands for a masked value.
pub const SHOWN: &[u8] = b"***";

/// The line a job prints to have a value masked from then on; the line itself is dropped.
pub const ADD_MASK: &[u8] = b"::add-mask::";

/// The longest `::add-mask::` line held back waiting for its end; a longer one is output.
const MAX_MASK_LINE: usize = 4096;

/// The values to mask for one job, shared by its stdout and stderr: a value one stream
/// registers is masked in both from then on.
#[derive(Debug, Clone, Default)]
pub struct Secrets(Arc<Mutex<Vec<Vec<u8>>>>);

impl Secrets {
    /// The values among `values` long enough to mask.
    pub fn new(values: impl IntoIterator<Item = String>) -> Self {
        let s = Secrets::default();
        for v in values {
            s.add(v.as_bytes());
        }
        s
    }

    /// Masks `value` from now on, if it is long enough; whether it will be.
    pub fn add(&self, value: &[u8]) -> bool {
        let long_enough = String::from_utf8_lossy(value).chars().count() >= MIN_CHARS;
        if long_enough {
            let mut values = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if !values.iter().any(|v| v == value) {
                values.push(value.to_vec());
                // Longest first: of two values where one contains the other, the whole goes.
                values.sort_by_key(|v| std::cmp::Reverse(v.len()));
            }
        }
        long_enough
    }

    fn values(&self) -> Vec<Vec<u8>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The names among `names` (a command's `env`) whose values in this environment are too
/// short to mask, for a warning.
pub fn too_short_to_mask(names: &[String]) -> Vec<&str> {
    names
        .iter()
        .filter(|n| {
            std::env::var(n.as_str()).is_ok_and(|v| !v.is_empty() && v.chars().count() < MIN_CHARS)
        })
        .map(String::as_str)
        .collect()
}

/// The longest line held back for the `mask` patterns before it is matched as it is.
const MAX_PATTERN_LINE: usize = 4096;

/// One stream's masker: bytes in, bytes safe to show out.
#[derive(Debug)]
pub struct Masker {
    secrets: Secrets,
    held: Vec<u8>,
    at_line_start: bool,
    /// The command's `mask` patterns, and the line being gathered for them.
    patterns: Arc<Vec<regex::bytes::Regex>>,
    line: Vec<u8>,
}

impl Masker {
    pub fn new(secrets: Secrets) -> Self {
        Self::with_patterns(secrets, Arc::default())
    }

    /// A masker that also masks what `patterns` match, line by line.
    pub fn with_patterns(secrets: Secrets, patterns: Arc<Vec<regex::bytes::Regex>>) -> Self {
        Masker {
            secrets,
            held: Vec::new(),
            at_line_start: true,
            patterns,
            line: Vec::new(),
        }
    }

    /// Takes a chunk; returns what may be shown of the output so far.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(bytes);
        let out = self.run(false);
        self.by_line(out, false)
    }

    /// The stream ended: what was held back, masked.
    pub fn finish(&mut self) -> Vec<u8> {
        let out = self.run(true);
        self.by_line(out, true)
    }

    /// Masks what the patterns match in each complete line of `out` (values already
    /// masked); an incomplete line waits for its end, unless `end` or it is too long.
    fn by_line(&mut self, out: Vec<u8>, end: bool) -> Vec<u8> {
        if self.patterns.is_empty() {
            return out;
        }
        self.line.extend(out);
        let mut shown = Vec::new();
        while let Some(nl) = self.line.iter().position(|b| *b == b'\n') {
            let rest = self.line.split_off(nl + 1);
            let line = std::mem::replace(&mut self.line, rest);
            shown.extend(self.masked_line(&line));
        }
        if end || self.line.len() > MAX_PATTERN_LINE {
            let line = std::mem::take(&mut self.line);
            shown.extend(self.masked_line(&line));
        }
        shown
    }

    fn masked_line(&self, line: &[u8]) -> Vec<u8> {
        let mut line = line.to_vec();
        for p in self.patterns.iter() {
            line = p.replace_all(&line, SHOWN).into_owned();
        }
        line
    }

    fn run(&mut self, end: bool) -> Vec<u8> {
        let mut secrets = self.secrets.values();
        let buf = std::mem::take(&mut self.held);
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        while i < buf.len() {
            let rest = &buf[i..];
            if self.at_line_start {
                if !end && rest.len() < ADD_MASK.len() && ADD_MASK.starts_with(rest) {
                    break;
                }
                if rest.starts_with(ADD_MASK) {
                    match rest.iter().position(|b| *b == b'\n') {
                        Some(nl) => {
                            let value = trim_line(&rest[ADD_MASK.len()..nl]);
                            self.secrets.add(value);
                            secrets = self.secrets.values();
                            i += nl + 1;
                            continue;
                        }
                        None if end => {
                            self.secrets.add(trim_line(&rest[ADD_MASK.len()..]));
                            i = buf.len();
                            continue;
                        }
                        None if rest.len() <= MAX_MASK_LINE => break,
                        None => {}
                    }
                }
            }
            if let Some(s) = secrets.iter().find(|s| rest.starts_with(s)) {
                out.extend_from_slice(SHOWN);
                i += s.len();
                self.at_line_start = false;
                continue;
            }
            if !end
                && secrets
                    .iter()
                    .any(|s| s.len() > rest.len() && s.starts_with(rest))
            {
                break;
            }
            out.push(buf[i]);
            self.at_line_start = buf[i] == b'\n';
            i += 1;
        }
        self.held = buf[i..].to_vec();
        out
    }
}

/// An `::add-mask::` value without its line end and surrounding spaces.
fn trim_line(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "tok-3f9a1c7e5b";

    fn masked(secrets: &Secrets, chunks: &[&[u8]]) -> String {
        let mut m = Masker::new(secrets.clone());
        let mut out = Vec::new();
        for c in chunks {
            out.extend(m.feed(c));
        }
        out.extend(m.finish());
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_secret_is_masked_wherever_the_pipe_splits_it() {
        let secrets = Secrets::new([TOKEN.to_string()]);
        let text = format!("curl: (22) token={TOKEN} refused\n");
        let bytes = text.as_bytes();
        for split in 0..=bytes.len() {
            let got = masked(&secrets, &[&bytes[..split], &bytes[split..]]);
            assert_eq!(
                got, "curl: (22) token=*** refused\n",
                "split after byte {split}"
            );
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            masked(&secrets, &bytewise),
            "curl: (22) token=*** refused\n"
        );
    }

    #[test]
    fn a_value_registered_with_add_mask_is_masked_from_then_on_and_its_line_dropped() {
        let secrets = Secrets::default();
        let got = masked(
            &secrets,
            &[
                b"before runtime-secret-42\n::add-mask::runtime-",
                b"secret-42\r\nafter runtime-secret-42 and runtime-sec",
                b"ret-42\n",
            ],
        );
        assert_eq!(
            got, "before runtime-secret-42\nafter *** and ***\n",
            "printed before it was registered, a value cannot be taken back (as on GitHub)"
        );
        let other = masked(&secrets, &[b"the other stream: runtime-secret-42\n"]);
        assert_eq!(
            other, "the other stream: ***\n",
            "both streams share what a job registers"
        );
    }

    #[test]
    fn short_values_are_not_masked_and_text_that_only_starts_like_a_secret_is_shown() {
        let secrets = Secrets::new(["short".to_string(), TOKEN.to_string()]);
        assert_eq!(
            masked(&secrets, &[b"short tok-3f9 tok-"]),
            "short tok-3f9 tok-"
        );
        assert!(!secrets.add(b"1234567"), "seven characters are too few");
        assert!(
            secrets.add("ひみつのあいことば".as_bytes()),
            "characters count, not bytes"
        );
        assert_eq!(
            masked(&secrets, &["ひみつのあいことば!".as_bytes()]),
            "***!"
        );
    }

    #[test]
    fn an_add_mask_line_that_is_not_at_a_line_start_is_plain_output() {
        let secrets = Secrets::default();
        assert_eq!(
            masked(
                &secrets,
                &[b"echo ::add-mask::not-registered-1\nnot-registered-1\n"]
            ),
            "echo ::add-mask::not-registered-1\nnot-registered-1\n"
        );
    }

    #[test]
    fn a_pattern_masks_whole_lines_once_they_are_complete() {
        let patterns = Arc::new(vec![
            regex::bytes::Regex::new(r"ghp_[A-Za-z0-9]{8,}").unwrap()
        ]);
        let mut m = Masker::with_patterns(Secrets::default(), patterns);
        let mut out = m.feed(b"token ghp_abcd");
        assert!(out.is_empty(), "a line is held until it ends: {out:?}");
        out.extend(m.feed(b"EFGH1234 used\nnext"));
        out.extend(m.finish());
        assert_eq!(String::from_utf8_lossy(&out), "token *** used\nnext");
    }
}
