//! What an `exec` command said, and what it means: bounded capture of stdout/stderr, the
//! result protocol (last stdout line may be `{"url":..,"message":..,"continue":{..}}`), and
//! cutting messages to fit the sheet. Pure: no I/O, tested with plain values.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::CELL_MAX_CHARS;
pub use crate::sheet_text::{
    head_chars, limit_message, one_line, tail_chars, MESSAGE_MAX_CHARS, TRUNCATED_END,
    TRUNCATED_START,
};

/// Bytes of each of stdout and stderr that are kept (the tail). Older output is dropped as
/// new output arrives, so a command printing gigabytes costs no more memory than this.
pub const CAPTURE_BYTES: usize = 64 * 1024;

/// How much of stderr's tail goes into a failure message, in characters.
pub const STDERR_TAIL_CHARS: usize = 1_500;

/// The last [`CAPTURE_BYTES`] (or `cap`) bytes written to a stream.
#[derive(Debug, Clone)]
pub struct Tail {
    buf: VecDeque<u8>,
    cap: usize,
    dropped: bool,
}

impl Tail {
    pub fn new(cap: usize) -> Tail {
        Tail {
            buf: VecDeque::with_capacity(cap.min(8 * 1024)),
            cap,
            dropped: false,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let bytes = if bytes.len() > self.cap {
            self.dropped = true;
            &bytes[bytes.len() - self.cap..]
        } else {
            bytes
        };
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.cap);
        if overflow > 0 {
            self.dropped = true;
            self.buf.drain(..overflow);
        }
        self.buf.extend(bytes);
    }

    /// Whether earlier output was dropped.
    pub fn truncated(&self) -> bool {
        self.dropped
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The kept bytes as text: invalid UTF-8 replaced, and a character cut at the start of
    /// the tail skipped rather than shown as garbage.
    pub fn text(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let start = if self.dropped {
            bytes
                .iter()
                .take(4)
                .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
                .count()
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// What a job whose output is kept private (`output = "private"`) says where its output
/// would have been shown.
pub const KEPT_PRIVATE: &str = "output kept on the machine that ran it: sheetq logs JOBID there";

/// The メッセージ of a job whose output stays on this machine: the result's `message`, which
/// the command wrote for the sheet on purpose (its JSON result line), or else what happened
/// and where the output is; never a line of what it printed.
pub fn private_message(ok: bool, exit_code: Option<i32>, timed_out: bool, stdout: &str) -> String {
    let reported = last_line(stdout)
        .filter(|l| matches!(serde_json::from_str::<Value>(l), Ok(Value::Object(_))))
        .and_then(|_| parse_stdout(stdout).ok())
        .and_then(|r| r.message);
    match (ok, reported) {
        (true, Some(m)) => limit_message(&m),
        (true, None) => format!("done ({KEPT_PRIVATE})"),
        (false, _) if timed_out => format!("timed out ({KEPT_PRIVATE})"),
        (false, _) => match exit_code {
            Some(c) => format!("failed with exit code {c} ({KEPT_PRIVATE})"),
            None => format!("failed ({KEPT_PRIVATE})"),
        },
    }
}

/// What the last line of stdout said, under the result protocol.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reported {
    pub message: Option<String>,
    pub url: Option<String>,
    pub continue_args: Option<Map<String, Value>>,
}

/// The meaning of a finished child, before timing information is added.
#[derive(Debug, Clone, PartialEq)]
pub struct Interpreted {
    pub ok: bool,
    pub message: String,
    pub url: Option<String>,
    pub continue_args: Option<Map<String, Value>>,
}

/// Reads the result protocol from stdout: if the last non-empty line is a JSON object with
/// at least one of `url`, `message`, `continue`, it is the result; otherwise that line is
/// the message. A result object with a wrong type is an error (a continuation bug must not
/// silently end a batch).
pub fn parse_stdout(stdout: &str) -> Result<Reported, String> {
    let Some(line) = last_line(stdout) else {
        return Ok(Reported::default());
    };
    let obj = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(obj))
            if ["url", "message", "continue"]
                .iter()
                .any(|k| obj.contains_key(*k)) =>
        {
            obj
        }
        _ => {
            return Ok(Reported {
                message: Some(line.to_string()),
                ..Reported::default()
            })
        }
    };
    let mut r = Reported::default();
    match obj.get("message") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => r.message = Some(s.clone()),
        Some(other) => r.message = Some(compact(other)),
    }
    match obj.get("url") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.trim().is_empty() => {}
        Some(Value::String(s)) if s.chars().count() > CELL_MAX_CHARS => {
            return Err(format!(
                "the result's \"url\" is longer than a cell holds ({CELL_MAX_CHARS} characters)"
            ))
        }
        Some(Value::String(s)) => r.url = Some(s.trim().to_string()),
        Some(other) => {
            return Err(format!(
                "the result's \"url\" must be a string, found {}",
                super::schema::describe_type(other)
            ))
        }
    }
    match obj.get("continue") {
        None | Some(Value::Null) => {}
        Some(Value::Object(args)) => {
            if compact(&Value::Object(args.clone())).chars().count() > CELL_MAX_CHARS {
                return Err(format!(
                    "the result's \"continue\" args are longer than a cell holds \
                     ({CELL_MAX_CHARS} characters as JSON)"
                ));
            }
            r.continue_args = Some(args.clone());
        }
        Some(other) => {
            return Err(format!(
                "the result's \"continue\" must be a JSON object of args, found {}",
                super::schema::describe_type(other)
            ))
        }
    }
    Ok(r)
}

/// Decides done/failed and the message from the exit and the captured output.
pub fn interpret(exit: Exit, stdout: &str, stderr: &str) -> Interpreted {
    let reported = parse_stdout(stdout);
    if exit == Exit::Code(0) {
        return match reported {
            Ok(r) => Interpreted {
                ok: true,
                message: limit_message(
                    r.message
                        .as_deref()
                        .filter(|m| !m.trim().is_empty())
                        .unwrap_or("done (no output)"),
                ),
                url: r.url,
                continue_args: r.continue_args,
            },
            Err(problem) => Interpreted {
                ok: false,
                message: limit_message(&format!("exit code 0, but {problem}")),
                url: None,
                continue_args: None,
            },
        };
    }
    let how = match exit {
        Exit::Code(c) => format!("exit code {c}"),
        Exit::Signal(s) => format!("killed by signal {}", signal_name(s)),
    };
    let detail = match tail_chars(stderr.trim(), STDERR_TAIL_CHARS) {
        t if !t.is_empty() => t,
        _ => match reported {
            Ok(Reported {
                message: Some(m), ..
            }) => tail_chars(m.trim(), STDERR_TAIL_CHARS),
            _ => String::new(),
        },
    };
    let message = if detail.is_empty() {
        format!("{how} (no output)")
    } else {
        format!("{how}: {detail}")
    };
    Interpreted {
        ok: false,
        message: limit_message(&message),
        url: None,
        continue_args: None,
    }
}

/// The last line with something on it, trimmed.
pub fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// The last line a stopped command itself printed: [`last_line`], passing over the notice a
/// shell prints when the job it ran was stopped (`Terminated`, `Killed`, or bash's
/// `bash: line 1:  4242 Terminated  sleep 100`), which says nothing the message does not.
pub fn last_said(text: &str) -> Option<&str> {
    fn is_shell_notice(line: &str) -> bool {
        let rest = match line.split_once(": line ") {
            // `<shell>: line N:  PID Terminated  command`
            Some((_, rest)) => rest
                .split_once(':')
                .map(|(_, r)| {
                    r.trim_start()
                        .trim_start_matches(|c: char| c.is_ascii_digit())
                })
                .unwrap_or(rest),
            None => line,
        };
        let word = rest.split_whitespace().next().unwrap_or_default();
        matches!(word, "Terminated" | "Killed" | "Hangup" | "Interrupt")
    }
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !is_shell_notice(l))
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn signal_name(sig: i32) -> String {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(s) => format!("{sig} ({})", s.as_str()),
        Err(_) => sig.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_commands_last_words_are_its_own_not_the_shells_notice() {
        assert_eq!(last_said("copying 40%\nTerminated\n"), Some("copying 40%"));
        assert_eq!(
            last_said("step 2\nbash: line 1:  4242 Terminated              sleep 100\n"),
            Some("step 2")
        );
        assert_eq!(last_said("Killed"), None);
        assert_eq!(
            last_said("Terminated early by the user"),
            None,
            "a notice by its first word"
        );
        assert_eq!(
            last_said("the job Terminated nothing"),
            Some("the job Terminated nothing")
        );
    }
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn json_last_line_is_the_result() {
        let out = "working…\n{\"url\":\"https://x/1\",\"message\":\"3 rows\",\"continue\":{\"page\":2}}\n\n";
        let r = interpret(Exit::Code(0), out, "");
        assert!(r.ok);
        assert_eq!(r.message, "3 rows");
        assert_eq!(r.url.as_deref(), Some("https://x/1"));
        assert_eq!(
            r.continue_args,
            Some(json!({"page": 2}).as_object().unwrap().clone())
        );
    }

    #[test]
    fn plain_last_line_is_the_message() {
        let r = interpret(Exit::Code(0), "a\nall good  \n  \n", "noise");
        assert_eq!((r.ok, r.message.as_str(), r.url), (true, "all good", None));
        let r = interpret(Exit::Code(0), "{\"count\": 3}\n", "");
        assert_eq!(r.message, "{\"count\": 3}");
        let r = interpret(Exit::Code(0), "", "");
        assert_eq!(r.message, "done (no output)");
    }

    #[test]
    fn bad_result_object_fails_the_job() {
        let r = interpret(Exit::Code(0), "{\"continue\": [1]}", "");
        assert!(!r.ok);
        assert!(
            r.message.contains("\"continue\" must be a JSON object"),
            "{}",
            r.message
        );
        let r = interpret(Exit::Code(0), "{\"url\": 5, \"message\": \"x\"}", "");
        assert!(!r.ok);
    }

    #[test]
    fn failure_carries_the_stderr_tail() {
        let r = interpret(
            Exit::Code(3),
            "{\"message\":\"partial\"}",
            "line1\nboom: disk full\n",
        );
        assert!(!r.ok);
        assert_eq!(r.message, "exit code 3: line1\nboom: disk full");
        let r = interpret(
            Exit::Code(2),
            "{\"message\":\"partial\",\"continue\":{}}",
            "",
        );
        assert_eq!(
            (r.message.as_str(), r.continue_args),
            ("exit code 2: partial", None)
        );
        let r = interpret(Exit::Signal(9), "", "");
        assert_eq!(r.message, "killed by signal 9 (SIGKILL) (no output)");
        let long = "x".repeat(10_000) + "END";
        let r = interpret(Exit::Code(1), "", &long);
        assert!(r.message.starts_with("exit code 1: (truncated) …x"));
        assert!(r.message.ends_with("END"));
        assert!(r.message.chars().count() <= MESSAGE_MAX_CHARS);
    }

    #[test]
    fn long_messages_are_cut_with_a_marker() {
        let m = "あ".repeat(5_000);
        let r = interpret(Exit::Code(0), &m, "");
        assert_eq!(r.message.chars().count(), MESSAGE_MAX_CHARS);
        assert!(r.message.ends_with(TRUNCATED_END));
    }

    #[test]
    fn tail_keeps_the_last_bytes_and_skips_a_cut_character() {
        let mut t = Tail::new(8);
        t.push(b"abc");
        assert_eq!((t.text().as_str(), t.truncated()), ("abc", false));
        t.push("xyzé12".as_bytes()); // 7 more bytes: "ab" dropped
        assert_eq!(t.len(), 8);
        assert_eq!((t.text().as_str(), t.truncated()), ("cxyzé12", true));
        t.push("é".as_bytes());
        assert_eq!(t.text(), "yzé12é");
        let mut t = Tail::new(4);
        t.push("日本".as_bytes()); // 6 bytes: keeps the last 4 = tail of 日 + 本
        assert_eq!(t.text(), "本");
    }

    proptest! {
        #[test]
        fn tail_never_exceeds_its_cap(chunks in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..300), 0..40)) {
            let mut t = Tail::new(256);
            let mut all = Vec::new();
            for c in &chunks {
                t.push(c);
                all.extend_from_slice(c);
                prop_assert!(t.len() <= 256);
            }
            let keep = all.len().min(256);
            let (a, b) = t.buf.as_slices();
            prop_assert_eq!([a, b].concat(), all[all.len() - keep..].to_vec());
        }

        #[test]
        fn limited_messages_fit(s in ".{0,3000}") {
            prop_assert!(limit_message(&s).chars().count() <= MESSAGE_MAX_CHARS);
            prop_assert!(tail_chars(&s, 100).chars().count() <= 100);
        }
    }
}
