//! Webhook notifications of jobs' final outcomes (`[[notify]]`): the channels of the
//! config, which of them hear of which outcome, the record kept for one message until it is
//! sent ([`Notice`]), and what each format sends. One message per job's final outcome and
//! channel, after its last retry: the daemon records it when the job's result lands on the
//! sheet, in the same step that takes the result out of the outbox ([`sender`] sends it,
//! paced, with retries, from a journal beside the outbox).
//!
//! A webhook URL is a secret: it is kept in [`WebhookUrl`], whose `Debug` and `Display`
//! never show it, so it reaches no log line and no `status` output.
//!
//! Values from the sheet (target, function, 依頼者, メッセージ) are data: control characters
//! are dropped, they are cut to a bounded length, and the text formats neutralise what the
//! chat would read as markup (`<users/all>`, `<!channel>`, links).

pub mod sender;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::outbox::{Finish, FinishedJob};

/// The keys a `[[notify]]` entry may have.
const KEYS: &[&str] = &[
    "name",
    "url",
    "url_env",
    "format",
    "on",
    "functions",
    "targets",
];

/// Longest メッセージ a notification carries, in characters (the job's log has the rest).
pub const MESSAGE_MAX_CHARS: usize = 1000;

/// What a channel's receiver expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Format {
    /// A Google Chat incoming webhook: `{"text": ...}`, sent with a `requestId` so that a
    /// message sent again after a crash is not shown twice.
    GoogleChat,
    /// A Slack incoming webhook: `{"text": ...}` in Slack's mrkdwn.
    Slack,
    /// The notice's fields as a JSON object, for a receiver of one's own.
    Json,
}

impl Format {
    fn parse(s: &str) -> Option<Format> {
        match s {
            "google-chat" => Some(Format::GoogleChat),
            "slack" => Some(Format::Slack),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// A step of a job waiting for approval that notifies before the job's end
/// (docs/design.md §5.5): `on = ["承認待ち"]` tells the approvers a request waits for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The job was queued as 承認待ち.
    Requested,
    /// Enough approvals came in: it waits to run (待機).
    Approved,
}

impl Step {
    fn as_str(self) -> &'static str {
        match self {
            Step::Requested => "requested",
            Step::Approved => "approved",
        }
    }
}

/// A webhook URL: a secret, never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

impl WebhookUrl {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookUrl(<redacted>)")
    }
}

/// One `[[notify]]` entry, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    /// How logs, metrics and the journal name it: its `name`, else `notify-<n>` (1-based).
    pub name: String,
    pub url: WebhookUrl,
    pub format: Format,
    /// The final states that notify.
    pub on: Vec<Finish>,
    /// The approval steps that notify.
    pub steps: Vec<Step>,
    /// Only jobs of these functions (labels), when any are listed.
    pub functions: Vec<String>,
    /// Only jobs on these targets (labels), when any are listed.
    pub targets: Vec<String>,
}

impl Channel {
    /// Whether this channel hears of `job`'s outcome. A rollout's job on one target is told
    /// in the rollout's one notice (its end, naming the targets that failed), not on its
    /// own, unless the rollout's `notify_each` left its flag off.
    pub fn wants(&self, job: &FinishedJob) -> bool {
        self.wants_of(job, &[&job.function], &[&job.target])
    }

    /// [`Channel::wants`] for a job that stands for `functions` on `targets`: a rollout's end
    /// is heard where its own label, its function or any of its targets is (and `一括`).
    pub fn wants_of(&self, job: &FinishedJob, functions: &[&str], targets: &[&str]) -> bool {
        let in_rollout = job.flags.iter().any(|f| f == crate::queue::ROLLOUT_FLAG);
        !in_rollout
            && self.on.contains(&job.finish)
            && (self.functions.is_empty()
                || functions
                    .iter()
                    .any(|f| self.functions.iter().any(|g| g == f)))
            && (self.targets.is_empty()
                || targets.iter().any(|t| self.targets.iter().any(|g| g == t)))
    }

    /// Whether this channel hears of `step` of a job of `function` on `target`.
    pub fn wants_step(&self, step: Step, function: &str, target: &str) -> bool {
        self.steps.contains(&step) && self.covers(function, target)
    }

    fn covers(&self, function: &str, target: &str) -> bool {
        (self.functions.is_empty() || self.functions.iter().any(|f| f == function))
            && (self.targets.is_empty() || self.targets.iter().any(|t| t == target))
    }
}

/// Parses the `notify` array of tables; `env` reads an environment variable (the process's
/// in production, a map in tests). `Err` holds every problem, each naming the entry, the key
/// and the fix; no message shows a URL.
pub fn parse_channels(
    value: Option<&toml::Value>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Channel>, Vec<String>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Some(entries) = value.as_array() else {
        return Err(vec![
            "notify must be a list of tables: write [[notify]] entries".to_string(),
        ]);
    };
    let mut errors = Vec::new();
    let mut channels: Vec<Channel> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("notify[{}]", i + 1);
        let Some(t) = entry.as_table() else {
            errors.push(format!("{at} must be a table: write it as [[notify]]"));
            continue;
        };
        if let Some(c) = parse_channel(&at, i, t, &env, &mut errors) {
            if channels.iter().any(|o| o.name == c.name) {
                errors.push(format!(
                    "{at}: name = {:?} is taken by an earlier [[notify]] entry; give each its own",
                    c.name
                ));
            } else {
                channels.push(c);
            }
        }
    }
    if errors.is_empty() {
        Ok(channels)
    } else {
        Err(errors)
    }
}

fn parse_channel(
    at: &str,
    i: usize,
    t: &toml::Table,
    env: &impl Fn(&str) -> Option<String>,
    errors: &mut Vec<String>,
) -> Option<Channel> {
    let before = errors.len();
    for key in t.keys() {
        if !KEYS.contains(&key.as_str()) {
            errors.push(format!(
                "{at}.{key} is not a known key (known: {})",
                KEYS.join(", ")
            ));
        }
    }
    let name = match t.get("name") {
        None => format!("notify-{}", i + 1),
        Some(toml::Value::String(s))
            if !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            s.clone()
        }
        Some(v) => {
            errors.push(format!(
                "{at}.name = {v} must be 1-64 letters, digits, - or _ (it names the channel in logs and metrics)"
            ));
            String::new()
        }
    };
    let url = match (t.get("url"), t.get("url_env")) {
        (Some(_), Some(_)) => {
            errors.push(format!(
                "{at} has both url and url_env: keep one (url_env keeps the secret out of the file)"
            ));
            None
        }
        (None, None) => {
            errors.push(format!(
                "{at} needs url_env = \"NAME\" (an environment variable holding the webhook URL) or url = \"https://…\""
            ));
            None
        }
        (Some(v), None) => match v.as_str() {
            Some(s) => check_url(at, "url", s, errors),
            None => {
                errors.push(format!("{at}.url must be a string"));
                None
            }
        },
        (None, Some(v)) => match v.as_str() {
            Some(var) => match env(var) {
                Some(s) if !s.trim().is_empty() => {
                    check_url(at, &format!("url_env ({var})"), s.trim(), errors)
                }
                _ => {
                    errors.push(format!(
                        "{at}.url_env = {var:?}: the environment variable {var} is not set or empty; set it to the webhook URL in the daemon's environment (e.g. an EnvironmentFile= of its unit)"
                    ));
                    None
                }
            },
            None => {
                errors.push(format!(
                    "{at}.url_env must be the name of an environment variable"
                ));
                None
            }
        },
    };
    let format = match t.get("format") {
        Some(toml::Value::String(s)) => Format::parse(s).or_else(|| {
            errors.push(format!(
                "{at}.format = {s:?} is not a format: \"google-chat\", \"slack\" or \"json\""
            ));
            None
        }),
        Some(v) => {
            errors.push(format!(
                "{at}.format = {v} must be \"google-chat\", \"slack\" or \"json\""
            ));
            None
        }
        None => {
            errors.push(format!(
                "{at} needs format = \"google-chat\", \"slack\" or \"json\""
            ));
            None
        }
    };
    let (on, steps) = match t.get("on") {
        None => (vec![Finish::Error, Finish::Timeout], Vec::new()),
        Some(v) => parse_on(at, v, errors),
    };
    let functions = labels(at, "functions", t.get("functions"), errors);
    let targets = labels(at, "targets", t.get("targets"), errors);
    if errors.len() > before {
        return None;
    }
    Some(Channel {
        name,
        url: url?,
        format: format?,
        on,
        steps,
        functions,
        targets,
    })
}

/// A webhook URL must be https (plain http only to this machine, for a local receiver).
/// Messages name the key, never the URL.
fn check_url(at: &str, key: &str, url: &str, errors: &mut Vec<String>) -> Option<WebhookUrl> {
    let Ok(uri) = url.parse::<hyper::Uri>() else {
        errors.push(format!("{at}.{key} is not a URL"));
        return None;
    };
    let host = uri.host().unwrap_or_default();
    let local = matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1");
    match uri.scheme_str() {
        Some("https") if !host.is_empty() => Some(WebhookUrl(url.to_string())),
        Some("http") if local => Some(WebhookUrl(url.to_string())),
        _ => {
            errors.push(format!(
                "{at}.{key} must be an https:// URL (plain http only to 127.0.0.1 or localhost): the URL is a secret and must not cross the network in clear"
            ));
            None
        }
    }
}

fn parse_on(at: &str, v: &toml::Value, errors: &mut Vec<String>) -> (Vec<Finish>, Vec<Step>) {
    let hint = "e.g. on = [\"エラー\", \"タイムアウト\"] (完了/done, エラー/error, タイムアウト/timeout, キャンセル/cancelled, 却下/rejected, 期限切れ/expired; 承認待ち/approval_requested, 承認/approved)";
    let Some(items) = v.as_array().filter(|a| !a.is_empty()) else {
        errors.push(format!("{at}.on = {v} must be a non-empty list, {hint}"));
        return (Vec::new(), Vec::new());
    };
    let mut on = Vec::new();
    let mut steps = Vec::new();
    for item in items {
        let finish = match item.as_str() {
            Some("完了" | "done") => Some(Finish::Done),
            Some("エラー" | "error") => Some(Finish::Error),
            Some("タイムアウト" | "timeout") => Some(Finish::Timeout),
            Some("キャンセル" | "cancelled") => Some(Finish::Cancelled),
            Some("却下" | "rejected") => Some(Finish::Rejected),
            Some("期限切れ" | "expired") => Some(Finish::Expired),
            _ => None,
        };
        let step = match item.as_str() {
            Some("承認待ち" | "approval_requested") => Some(Step::Requested),
            Some("承認" | "approved") => Some(Step::Approved),
            _ => None,
        };
        match (finish, step) {
            (Some(f), _) if !on.contains(&f) => on.push(f),
            (_, Some(s)) if !steps.contains(&s) => steps.push(s),
            (Some(_), _) | (_, Some(_)) => {}
            (None, None) => errors.push(format!(
                "{at}.on: {item} is not a final state or an approval step, {hint}"
            )),
        }
    }
    (on, steps)
}

fn labels(at: &str, key: &str, v: Option<&toml::Value>, errors: &mut Vec<String>) -> Vec<String> {
    let Some(v) = v else {
        return Vec::new();
    };
    match v
        .as_array()
        .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect())
    {
        Some(list) => list,
        None => {
            errors.push(format!(
                "{at}.{key} = {v} must be a list of labels, e.g. [\"サーバーA\"]"
            ));
            Vec::new()
        }
    }
}

/// One message to send: what the channel is told of one job's final outcome. Kept in the
/// notification journal until sent (and a while after, so a result written again after a
/// crash is not announced twice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notice {
    pub channel: String,
    pub job_id: String,
    pub spreadsheet_id: String,
    pub target: String,
    pub function: String,
    pub requester: String,
    /// The job's inputs (`version=1.2.4, dry_run=true`), empty for a function without:
    /// which values the outcome, or the approval asked for, is about.
    #[serde(default)]
    pub inputs: String,
    /// The job's end; `None` for an approval step's notice.
    pub finish: Option<Finish>,
    /// The approval step it tells of, for a notice before the job's end.
    #[serde(default)]
    pub step: Option<Step>,
    /// The state word the sheet shows.
    pub state: String,
    pub message: String,
    /// From the claim to the end, by this daemon's clock.
    pub duration_secs: Option<u64>,
    pub finished_at: DateTime<Utc>,
    /// The job's panel row and log row, when known.
    pub panel_url: Option<String>,
    pub log_url: Option<String>,
    /// Sends tried so far.
    #[serde(default)]
    pub tries: u32,
    /// Not before then (this machine's clock): the backoff after a failed send.
    #[serde(default)]
    pub next_try: Option<DateTime<Utc>>,
    /// Sent (or given up): kept until forgotten, so it is never sent again.
    #[serde(default)]
    pub settled: bool,
    /// When the daemon recorded it (this machine's clock).
    pub recorded_at: DateTime<Utc>,
}

impl Notice {
    /// Its key in the journal: channel names have no `/`.
    pub fn key(&self) -> String {
        match self.step {
            None => key(&self.channel, &self.job_id),
            Some(step) => key(&self.channel, &format!("{}/{}", self.job_id, step.as_str())),
        }
    }

    /// The notice of approval `step` of the job of queue row `row` for `channel`: `state`
    /// the word the sheet shows, `message` what to say.
    #[allow(clippy::too_many_arguments)]
    pub fn of_step(
        channel: &Channel,
        step: Step,
        row: &crate::queue::QueueRow,
        spreadsheet_id: &str,
        state: &str,
        message: String,
        panel: Option<String>,
        now: DateTime<Utc>,
    ) -> Notice {
        Notice {
            channel: channel.name.clone(),
            job_id: row.job_id.clone(),
            spreadsheet_id: spreadsheet_id.to_string(),
            target: row.target_key().to_string(),
            function: row.function.clone(),
            requester: row.requester.clone(),
            inputs: String::new(),
            finish: None,
            step: Some(step),
            state: state.to_string(),
            message,
            duration_secs: None,
            finished_at: now,
            panel_url: panel,
            log_url: None,
            tries: 0,
            next_try: None,
            settled: false,
            recorded_at: now,
        }
    }

    /// The notice of `job` for `channel`: `state` the word the sheet shows, the links where
    /// known.
    pub fn of(
        channel: &Channel,
        job: &FinishedJob,
        spreadsheet_id: &str,
        state: &str,
        links: Links,
        now: DateTime<Utc>,
    ) -> Notice {
        Notice {
            channel: channel.name.clone(),
            job_id: job.job_id.clone(),
            spreadsheet_id: spreadsheet_id.to_string(),
            target: job.target.clone(),
            function: job.function.clone(),
            requester: job.requester.clone(),
            inputs: String::new(),
            finish: Some(job.finish),
            step: None,
            state: state.to_string(),
            message: job.message.clone(),
            duration_secs: job
                .started_at
                .and_then(|s| (job.finished_at - s).to_std().ok())
                .map(|d| d.as_secs()),
            finished_at: job.finished_at,
            panel_url: links.panel,
            log_url: links.log,
            tries: 0,
            next_try: None,
            settled: false,
            recorded_at: now,
        }
    }

    /// The notice naming the job's inputs (`version=1.2.4, dry_run=true`).
    pub fn with_inputs(mut self, inputs: String) -> Notice {
        self.inputs = inputs;
        self
    }

    /// The request body for `format`.
    pub fn body(&self, format: Format) -> serde_json::Value {
        match format {
            Format::GoogleChat => serde_json::json!({ "text": self.text(chat_text) }),
            Format::Slack => serde_json::json!({ "text": self.text(slack_text) }),
            Format::Json => serde_json::json!({
                "jobId": data(&self.job_id, 200),
                "spreadsheetId": self.spreadsheet_id,
                "target": data(&self.target, 200),
                "function": data(&self.function, 200),
                "requester": data(&self.requester, 200),
                "inputs": data(&self.inputs, 500),
                "state": self.state,
                "outcome": self.finish,
                "approvalStep": self.step,
                "message": data(&self.message, MESSAGE_MAX_CHARS),
                "durationSeconds": self.duration_secs,
                "finishedAt": self.finished_at.to_rfc3339(),
                "panelUrl": self.panel_url,
                "logUrl": self.log_url,
            }),
        }
    }

    /// The notice of a job refused before it ran (`reason`: `function`, `target`, …), without
    /// the sheet's text: a refused job's target, function, 依頼者 and メッセージ are whatever
    /// an editor typed (a look-alike panel's phishing label), so the channel hears only
    /// that job so-and-so of this spreadsheet was refused, and why, with its links.
    pub fn withheld(mut self, reason: &str) -> Notice {
        self.target = "(設定にない値)".into();
        self.function = String::new();
        self.requester = String::new();
        self.inputs = String::new();
        self.message = format!(
            "ジョブ {} は設定に合わないため実行されませんでした (reason: {reason}); 内容はパネルかログで確認してください",
            data(&self.job_id, 80)
        );
        self
    }

    /// `❌ エラー: サーバーA / 月次レポート (依頼: a@example.com, 12 秒)`, the message, the links;
    /// sheet values passed through `escape`.
    fn text(&self, escape: fn(&str) -> String) -> String {
        let icon = match (self.finish, self.step) {
            (Some(Finish::Done), _) => "✅",
            (Some(Finish::Error), _) => "❌",
            (Some(Finish::Timeout), _) => "⏱",
            (Some(Finish::Cancelled), _) => "⏹",
            (Some(Finish::Rejected), _) => "⛔",
            (Some(Finish::Expired), _) => "⌛",
            (None, Some(Step::Requested)) => "🙋",
            (None, Some(Step::Approved)) | (None, None) => "👍",
        };
        let mut head = format!(
            "{icon} {}: {} / {}",
            escape(&data(&self.state, 40)),
            inline(&data(&self.target, 200), escape),
            inline(&data(&self.function, 200), escape)
        );
        let mut about = Vec::new();
        if !self.requester.trim().is_empty() {
            about.push(format!(
                "依頼: {}",
                inline(&data(&self.requester, 200), escape)
            ));
        }
        if let Some(s) = self.duration_secs {
            about.push(duration_text(Duration::from_secs(s)));
        }
        if !about.is_empty() {
            head.push_str(&format!(" ({})", about.join(", ")));
        }
        let mut lines = vec![head];
        if !self.inputs.trim().is_empty() {
            lines.push(format!(
                "入力: {}",
                inline(&data(&self.inputs, 500), escape)
            ));
        }
        let message = data(&self.message, MESSAGE_MAX_CHARS);
        if !message.trim().is_empty() {
            lines.push(block(&message, escape));
        }
        let links: Vec<String> = [("パネル", &self.panel_url), ("ログ", &self.log_url)]
            .into_iter()
            .filter_map(|(label, url)| Some(format!("<{}|{label}>", url.as_ref()?)))
            .collect();
        if !links.is_empty() {
            lines.push(links.join(" · "));
        }
        lines.join("\n")
    }
}

/// The journal key of `job_id`'s notice for channel `channel`.
pub fn key(channel: &str, job_id: &str) -> String {
    format!("{channel}/{job_id}")
}

/// Where a notice points: the job's panel row and its log row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    pub panel: Option<String>,
    pub log: Option<String>,
}

/// `https://docs.google.com/spreadsheets/d/<id>/edit#gid=<gid>&range=A<row>`.
pub fn row_url(spreadsheet_id: &str, gid: i32, row: u32) -> String {
    format!("https://docs.google.com/spreadsheets/d/{spreadsheet_id}/edit#gid={gid}&range=A{row}")
}

/// `12 秒`, `3 分 5 秒`, `1 時間 2 分`.
fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} 秒"),
        60..=3599 => format!("{} 分 {} 秒", s / 60, s % 60),
        _ => format!("{} 時間 {} 分", s / 3600, s % 3600 / 60),
    }
}

/// A sheet value as data: control and format characters (bidirectional overrides,
/// zero-width characters; line breaks but `\n` too) dropped, cut to `max` characters with
/// `…`.
fn data(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .filter(|c| *c == '\n' || !crate::sheet_text::acts(*c))
        .collect();
    match clean.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &clean[..i]),
        None => clean,
    }
}

/// A value from the sheet quoted in a chat line: an inline code span, where neither Slack's
/// mrkdwn nor Google Chat's formatting applies (no bold, italics, strikethrough or mention:
/// https://api.slack.com/reference/surfaces/formatting#basic-formatting,
/// https://developers.google.com/workspace/chat/format-messages), on one line, its own
/// backticks turned into `ˋ` so it cannot close the span, and `://` written `:／／` so that no
/// chat makes a bare URL of it a link (both link bare URLs in plain text).
fn inline(text: &str, escape: fn(&str) -> String) -> String {
    if text.trim().is_empty() {
        return String::new();
    }
    format!("`{}`", escape(&defang(&text.replace('\n', " "))))
}

/// A multi-line value (メッセージ) quoted as a code block, as [`inline`] quotes one line.
fn block(text: &str, escape: fn(&str) -> String) -> String {
    format!("```\n{}\n```", escape(&defang(text)))
}

/// A value's backticks and URL schemes made inert inside a code span or block.
fn defang(text: &str) -> String {
    text.replace('`', "ˋ").replace("://", ":／／")
}

/// Google Chat reads `<users/all>` as a mention and `<url|text>` as a link: a sheet value's
/// angle brackets become full-width ones, so it is shown, never acted on.
fn chat_text(text: &str) -> String {
    text.replace('<', "＜").replace('>', "＞")
}

/// Slack's three escapes (`&`, `<`, `>`), so `<!channel>` in a sheet value is shown, not
/// acted on.
fn slack_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Vec<Channel>, Vec<String>> {
        let table: toml::Table = toml::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_channels(table.get("notify"), |k| env.get(k).cloned())
    }

    fn job(finish: Finish, function: &str, target: &str) -> FinishedJob {
        let now = Utc::now();
        FinishedJob {
            job_id: "j-1".into(),
            worker: "vm-1/0 #t".into(),
            finish,
            finished_at: now,
            url: String::new(),
            message: "exit code 1: <!channel> <users/all> disk full".into(),
            target: target.into(),
            function: function.into(),
            panel_sheet: target.into(),
            panel_row: Some(8),
            requester: "a@example.com".into(),
            command: "backup".into(),
            flags: vec![],
            continuation: None,
            started_at: Some(now - chrono::Duration::seconds(75)),
            log_row: true,
            linked: true,
            panel_linked: true,
            output: String::new(),
            inputs: String::new(),
        }
    }

    #[test]
    fn a_channel_defaults_to_errors_and_timeouts_and_reads_its_url_from_the_environment() {
        let channels = parse(
            "[[notify]]\nurl_env = \"CHAT_URL\"\nformat = \"google-chat\"",
            &[(
                "CHAT_URL",
                "https://chat.googleapis.com/v1/spaces/X/messages?key=k&token=t",
            )],
        )
        .unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(channels.len(), 1);
        let c = &channels[0];
        assert_eq!(c.name, "notify-1");
        assert_eq!(c.on, [Finish::Error, Finish::Timeout]);
        assert!(c.wants(&job(Finish::Error, "f", "t")));
        assert!(
            !c.wants(&job(Finish::Done, "f", "t")),
            "完了 is not in the default"
        );
        assert!(
            !format!("{c:?}").contains("token"),
            "the URL never shows in Debug: {c:?}"
        );
    }

    #[test]
    fn filters_limit_a_channel_to_functions_and_targets() {
        let channels = parse(
            "[[notify]]\nurl = \"https://example.com/h\"\nformat = \"json\"\non = [\"完了\", \"error\"]\nfunctions = [\"バックアップ\"]\ntargets = [\"サーバーA\"]",
            &[],
        )
        .unwrap_or_else(|e| panic!("{e:#?}"));
        let c = &channels[0];
        assert!(c.wants(&job(Finish::Done, "バックアップ", "サーバーA")));
        assert!(!c.wants(&job(Finish::Done, "集計", "サーバーA")));
        assert!(!c.wants(&job(Finish::Done, "バックアップ", "サーバーB")));
        assert!(!c.wants(&job(Finish::Timeout, "バックアップ", "サーバーA")));
        // A rollout of バックアップ over サーバーA and サーバーB: its end is heard here, by its
        // function and a target it names; its jobs on each target are not, on their own.
        let end = job(Finish::Done, "一斉バックアップ", "一括");
        assert!(c.wants_of(
            &end,
            &["一斉バックアップ", "バックアップ"],
            &["一括", "サーバーA", "サーバーB"]
        ));
        assert!(!c.wants_of(
            &end,
            &["一斉バックアップ", "バックアップ"],
            &["一括", "サーバーB"]
        ));
        let mut one = job(Finish::Done, "バックアップ", "サーバーA");
        one.flags = vec![crate::queue::ROLLOUT_FLAG.to_string()];
        assert!(
            !c.wants(&one),
            "a rollout's job is told in the rollout's one notice"
        );
    }

    #[test]
    fn every_problem_is_named_and_no_message_shows_a_url() {
        let e = parse(
            "[[notify]]\nurl = \"http://hooks.example.com/secret-token\"\nformat = \"teams\"\n\
             [[notify]]\nurl_env = \"MISSING\"\nformat = \"slack\"\non = [\"実行中\"]\n\
             [[notify]]\nformat = \"json\"\nsecret = 1",
            &[],
        )
        .unwrap_err();
        let expected = [
            "notify[1].url must be an https:// URL",
            "notify[1].format = \"teams\" is not a format",
            "notify[2].url_env = \"MISSING\": the environment variable MISSING is not set",
            "notify[2].on: \"実行中\" is not a final state",
            "notify[3].secret is not a known key",
            "notify[3] needs url_env",
        ];
        for want in expected {
            assert!(
                e.iter().any(|m| m.starts_with(want)),
                "no error starting {want:?} among {e:#?}"
            );
        }
        assert_eq!(e.len(), expected.len(), "{e:#?}");
        assert!(
            e.iter().all(|m| !m.contains("secret-token")),
            "an error shows the URL: {e:#?}"
        );
    }

    #[test]
    fn chat_and_slack_texts_show_sheet_markup_without_acting_on_it() {
        let channel = &parse(
            "[[notify]]\nurl = \"https://example.com/h\"\nformat = \"slack\"",
            &[],
        )
        .unwrap_or_else(|e| panic!("{e:#?}"))[0];
        let links = Links {
            panel: Some(row_url("sid", 7, 8)),
            log: Some(row_url("sid", 4001, 2)),
        };
        let n = Notice::of(
            channel,
            &job(Finish::Error, "バックアップ", "サーバーA"),
            "sid",
            "エラー",
            links,
            Utc::now(),
        );
        let chat = n.body(Format::GoogleChat)["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            chat.starts_with(
                "❌ エラー: `サーバーA` / `バックアップ` (依頼: `a@example.com`, 1 分 15 秒)\n```\n"
            ),
            "{chat}"
        );
        assert!(
            chat.contains("＜users/all＞") && !chat.contains("<users/all>"),
            "{chat}"
        );
        assert!(
            chat.ends_with(
                "<https://docs.google.com/spreadsheets/d/sid/edit#gid=7&range=A8|パネル> · \
                 <https://docs.google.com/spreadsheets/d/sid/edit#gid=4001&range=A2|ログ>"
            ),
            "{chat}"
        );
        let slack = n.body(Format::Slack)["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            slack.contains("&lt;!channel&gt;") && !slack.contains("<!channel>"),
            "{slack}"
        );
        let json = n.body(Format::Json);
        assert_eq!(json["state"], "エラー");
        assert_eq!(json["outcome"], "error");
        assert_eq!(json["durationSeconds"], 75);
        assert_eq!(json["requester"], "a@example.com");

        // A job with inputs: which values the outcome is about, on a line of its own.
        let with = n.with_inputs("version=1.2.4, dry_run=true".into());
        let chat = with.body(Format::GoogleChat)["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            chat.lines().nth(1),
            Some("入力: `version=1.2.4, dry_run=true`"),
            "{chat}"
        );
        assert_eq!(
            with.body(Format::Json)["inputs"],
            "version=1.2.4, dry_run=true"
        );
        assert_eq!(
            with.withheld("function").inputs,
            "",
            "a refused job's notice carries none of the sheet's text"
        );
    }

    #[test]
    fn a_phishing_label_reaches_a_chat_as_quoted_data_with_no_link_markup_or_override() {
        let label = "https://evil.example/sso-reset *至急* _再ログイン_ ~x~ @channel\u{202e}`x`";
        for format in ["slack", "google-chat"] {
            let channel = &parse(
                &format!("[[notify]]\nurl = \"https://example.com/h\"\nformat = \"{format}\""),
                &[],
            )
            .unwrap_or_else(|e| panic!("{e:#?}"))[0];
            let n = Notice::of(
                channel,
                &job(Finish::Error, label, label),
                "sid",
                "エラー",
                Links::default(),
                Utc::now(),
            );
            let text = n.body(channel.format)["text"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(
                !text.contains("https://evil") && text.contains("https:／／evil.example"),
                "{format}: no bare URL a chat would link: {text}"
            );
            assert!(
                !text.contains('\u{202e}'),
                "{format}: no direction override: {text}"
            );
            // Every piece of the label sits inside a code span: between an odd and an even
            // backtick of the line, where no markup applies.
            let head = text.lines().next().unwrap_or_default();
            for piece in ["*至急*", "_再ログイン_", "~x~"] {
                let at = head
                    .find(piece)
                    .unwrap_or_else(|| panic!("{piece} in {head}"));
                let ticks_before = head[..at].matches('`').count();
                assert!(
                    ticks_before % 2 == 1,
                    "{format}: {piece} is quoted in {head}"
                );
            }
            assert_eq!(
                head.matches('`').count() % 2,
                0,
                "{format}: the label's own backticks cannot close a span: {head}"
            );
        }
    }

    #[test]
    fn a_refused_job_is_announced_without_the_sheets_text() {
        let channel = &parse(
            "[[notify]]\nurl = \"https://example.com/h\"\nformat = \"slack\"",
            &[],
        )
        .unwrap_or_else(|e| panic!("{e:#?}"))[0];
        let label = "https://evil.example/reset *至急*";
        let n = Notice::of(
            channel,
            &job(Finish::Error, label, label),
            "sid",
            "エラー",
            Links::default(),
            Utc::now(),
        )
        .withheld("function");
        for format in [Format::Slack, Format::GoogleChat, Format::Json] {
            let body = n.body(format).to_string();
            assert!(
                !body.contains("evil") && !body.contains("至急") && !body.contains("disk full"),
                "{format:?}: {body}"
            );
            assert!(
                body.contains("j-1") && body.contains("function"),
                "{format:?}: {body}"
            );
        }
    }
}
