//! The log line formats beyond `tracing-subscriber`'s own: JSON lines that carry Google
//! Cloud Logging's `severity` field, so a container's log shows each line at its level
//! rather than as DEFAULT
//! (https://cloud.google.com/logging/docs/structured-logging#special-payload-fields); and
//! which levels each crate logs at ([`directives`]).

use tracing::{Event, Level, Subscriber};
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
}
