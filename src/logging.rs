//! The log line formats beyond `tracing-subscriber`'s own: JSON lines that carry Google
//! Cloud Logging's `severity` field, so a container's log shows each line at its level
//! rather than as DEFAULT
//! (https://cloud.google.com/logging/docs/structured-logging#special-payload-fields); and
//! which levels each crate logs at ([`directives`]).

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::MakeExt as _;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The filter directives for the level the flags ask for (`-v`: debug, `-vv`: trace): sheetq
/// itself logs at that level, every other crate at `info` at most. The OAuth library, the
/// HTTP and TLS stacks log the signed JWT assertion, access tokens, request headers and
/// webhook URLs at debug and trace; an operator who pastes `-vv` output into a ticket must
/// not hand out a bearer token, so their debug output is never turned on by the flags
/// (`SHEETQ_LOG`/`RUST_LOG`, set by hand, still reach them).
pub fn directives(level: &str) -> String {
    match level {
        "debug" | "trace" => format!("info,sheetq={level}"),
        other => other.to_string(),
    }
}

/// How many characters of a log line's message are kept (its fields keep
/// [`crate::sheet_text::LINE_CHARS`]): a message quoting a huge cell stays a line.
pub const MESSAGE_CHARS: usize = 4000;

/// The text format's fields, every value shown by the one rule for text that is not
/// sheetq's own (`sheet_text::visible`): control and format characters made visible, each
/// field cut at 200 characters, the message (sheetq's own words, which may quote a value) at
/// [`MESSAGE_CHARS`]. Span fields (a job's `target`, `function`) go through it too. The
/// journald layer and the JSON format write fields as they get them, so every field that
/// carries sheet text is bounded where it is logged ([`crate::sheet_text::Logged`]); this
/// format bounds whatever else a field holds. A 50,000-character label ticked on a panel
/// thus adds a few hundred bytes to any of the three outputs, not the label each time it is
/// named.
pub fn bounded_fields() -> impl for<'w> FormatFields<'w> + 'static {
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let message = field.name() == "message";
        let max = if message {
            MESSAGE_CHARS
        } else {
            crate::sheet_text::LINE_CHARS
        };
        let text = crate::sheet_text::visible(&format!("{value:?}"), max);
        if message {
            write!(writer, "{text}")
        } else {
            write!(writer, "{}={text}", field.name())
        }
    })
    .delimited(" ")
}

/// A JSON log line with every string value bounded as the text format bounds a field
/// (the message at [`MESSAGE_CHARS`]) and its control and format characters made visible:
/// fields are bounded where they are logged ([`crate::sheet_text::Logged`]), and this
/// catches one that is not. A line that is not JSON is left as it is.
fn bounded_json(line: String) -> String {
    fn bound(key: &str, v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                let max = if key == "message" {
                    MESSAGE_CHARS
                } else {
                    crate::sheet_text::LINE_CHARS
                };
                *s = crate::sheet_text::visible(s, max);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|i| bound(key, i)),
            serde_json::Value::Object(map) => map.iter_mut().for_each(|(k, v)| bound(k, v)),
            _ => {}
        }
    }
    let trimmed = line.trim_end_matches('\n');
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(mut value) => {
            bound("", &mut value);
            let end = &line[trimmed.len()..];
            format!("{value}{end}")
        }
        Err(_) => line,
    }
}

/// Cloud Logging's name for a level (`LogSeverity`).
pub fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARNING",
        Level::INFO => "INFO",
        Level::DEBUG | Level::TRACE => "DEBUG",
    }
}

/// Wraps a JSON event format: each line gains `"severity"` as its first key.
pub struct WithSeverity<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithSeverity<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let line = bounded_json(line);
        let severity = severity(event.metadata().level());
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"severity\":\"{severity}\",{rest}"),
            None => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    #[test]
    fn verbose_flags_raise_sheetq_alone_past_info() {
        assert_eq!(directives("trace"), "info,sheetq=trace");
        assert_eq!(directives("debug"), "info,sheetq=debug");
        assert_eq!(directives("info"), "info");
        assert_eq!(directives("warn"), "warn");
    }

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    #[test]
    fn json_lines_carry_cloud_loggings_severity_for_each_level() {
        let buffer = Buffer::default();
        let format = tracing_subscriber::fmt::format().json();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buffer.clone())
            .event_format(WithSeverity(format))
            .with_max_level(Level::DEBUG)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(job.id = "j1", "the write landed elsewhere");
            tracing::info!("polling");
            tracing::error!("cannot write");
        });
        let text = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default())
            .expect("utf-8 log");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        let severities: Vec<&str> = lines
            .iter()
            .map(|l| l["severity"].as_str().unwrap_or("missing"))
            .collect();
        assert_eq!(severities, ["WARNING", "INFO", "ERROR"], "{text}");
        assert_eq!(
            lines[0]["fields"]["job.id"], "j1",
            "the fields stay: {text}"
        );
    }

    #[test]
    fn a_json_line_bounds_every_string_a_call_site_left_whole() {
        let huge = format!("\u{1b}]0;x\u{7}{}", "長".repeat(10_000));
        let line = serde_json::json!({
            "fields": { "message": "m", "job.id": huge },
            "span": { "target": huge },
        })
        .to_string()
            + "\n";
        let out = bounded_json(line);
        assert!(out.ends_with('\n'), "the line keeps its end");
        assert!(out.len() < 2_000, "every value is cut: {} bytes", out.len());
        assert!(!out.contains('\u{1b}') && !out.contains("\\u001b"), "{out}");
        assert_eq!(bounded_json("not json".into()), "not json");
    }

    #[test]
    fn a_huge_or_hostile_field_stays_one_short_visible_line_in_spans_and_events() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buffer.clone())
            .with_ansi(false)
            .fmt_fields(bounded_fields())
            .finish();
        let label = format!("\u{1b}]0;OWNED\u{7}\u{202e}{}", "x".repeat(50_000));
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("job", target = %label);
            let _in = span.enter();
            tracing::warn!(function = ?label, shown = %label, "press taken into the queue");
        });
        let text = String::from_utf8(buffer.0.lock().map(|b| b.clone()).unwrap_or_default())
            .expect("utf-8 log");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.len() < 2_000,
            "a 50,000-character value is cut in each of its 3 places: {} bytes",
            text.len()
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "nothing in the line acts on a terminal: {text:?}"
        );
        assert!(text.contains("press taken into the queue"), "{text}");
    }
}
