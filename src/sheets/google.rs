//! The Google implementation of the [`Sheets`] port: `google-sheets4` over HTTPS (plain HTTP
//! for the loopback emulator), with per-call timeouts, retries with full-jitter backoff, the
//! client-side request budget and counters.
//!
//! This file (and `google/`) is the only place in sheetq that names a `google-sheets4` type.
//! Each port method is one API call:
//! - `metadata` → `spreadsheets.get` (properties and sheet properties only);
//! - `read` → `values.batchGet` with `UNFORMATTED_VALUE`, `SERIAL_NUMBER`, `ROWS`;
//! - `write` → `values.batchUpdate` with `RAW`;
//! - `batch_update` → `spreadsheets.batchUpdate`, the response ranges read back in the same
//!   call from `updatedSpreadsheet` grid data; sent by [`GoogleSheets::post_raw`] so that the
//!   reply parses into `convert::lean`'s types, which keep only each cell's value;
//! - `append` → `values.append` with `INSERT_ROWS`, `RAW`;
//! - `read_filtered` → `values.batchGetByDataFilter`; `search_metadata` →
//!   `developerMetadata.search`;
//! - `write_filtered` → `values.batchUpdateByDataFilter`, sent by [`GoogleSheets::post_raw`]
//!   rather than the hub, because the client crate strips every JSON `null` from request
//!   bodies, array elements included (`google-apis-common`'s `remove_json_null_values`):
//!   the nulls that tell Google "leave this cell alone" would vanish and shift the row's
//!   values to the left.
//!
//! Every attempt first takes its turn from the [`Budget`], then runs under its own
//! `tokio::time::timeout` (the hub has none). Failures are classified once, here, from
//! Google's JSON error (`error.code`/`error.status`) or the transport error.

mod convert;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use google_sheets4::api::{self, Scope};
use google_sheets4::common;
use hyper_rustls::HttpsConnectorBuilder;

use super::auth::{self, Connector, Credentials, CredentialsError, TokenError, TokenSource};
use super::budget::Budgets;
use super::retry::{self, RetryPolicy, Retryable};
use super::stats::{ApiMethod, Outcome, SheetsStats};
use super::turns::Precedence;
use super::{
    AppendReply, BatchUpdate, BatchUpdateReply, Cell, ErrorKind, Filter, FilterRead, FilterWrite,
    FilterWritten, MetadataEntry, MetadataLookup, Sheets, SheetsError, SpreadsheetMeta, ValueRange,
};

/// Google's endpoint.
pub const DEFAULT_API_BASE_URL: &str = "https://sheets.googleapis.com/";

/// Per-call timeout when the config does not say. Google fails requests after 180 s; a
/// sheetq call is small, and a hung one should be retried long before that.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How to build a [`GoogleSheets`].
#[derive(Debug, Clone)]
pub struct GoogleSheetsConfig {
    pub spreadsheet_id: String,
    /// Where the API lives; a trailing `/` is added if missing (the hub needs it).
    pub api_base_url: String,
    pub credentials: Credentials,
    /// Bound on each HTTP attempt, token fetch included.
    pub call_timeout: Duration,
    /// Bound on fetching an access token alone.
    pub token_timeout: Duration,
    pub retry: RetryPolicy,
    /// Shared with any other client that spends the same quota.
    /// Read and write budgets (Google's quotas are per kind).
    pub budget: Budgets,
    /// Where the client counts its calls; pass one in to render it before the client
    /// exists (the metrics endpoint), or leave the fresh default.
    pub stats: Arc<SheetsStats>,
    /// For a one-shot command: a call still waiting for the budget after this long says so
    /// (at INFO, once per call), naming the account and the expected wait.
    pub say_waits_after: Option<Duration>,
}

impl GoogleSheetsConfig {
    /// Google's endpoint, 30 s timeouts, the default retry policy and a 50/min budget.
    pub fn new(spreadsheet_id: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            spreadsheet_id: spreadsheet_id.into(),
            api_base_url: DEFAULT_API_BASE_URL.to_string(),
            credentials,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            token_timeout: DEFAULT_CALL_TIMEOUT,
            retry: RetryPolicy::default(),
            budget: Budgets::default(),
            stats: Arc::default(),
            say_waits_after: None,
        }
    }
}

/// Why a [`GoogleSheets`] could not be built: a startup error for the daemon.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("api_base_url {url:?} is not usable: {reason}")]
    BaseUrl { url: String, reason: String },
    #[error("spreadsheet_id is empty: set it to the id in the spreadsheet's URL (…/d/<id>/edit)")]
    NoSpreadsheetId,
}

type Hub = google_sheets4::Sheets<Connector>;

/// What a `spreadsheets.batchUpdate` reply is cut down to (a field mask): the replies, and of
/// the read-back ranges only what [`convert::response_ranges`] reads (each block's position,
/// its cells' effective values and its rows' metadata ids). Without it Google returns every
/// cell's formats and properties, ten times the bytes.
///
/// The protected ranges of the sheets the reply lists ride along too: the claim commit's
/// lease acquire reads the panels' ticks and, in the same call, who may tick which cell
/// (`crate::panel::guard`), so neither can change between the two.
const BATCH_UPDATE_FIELDS: &str = "replies,updatedSpreadsheet.sheets(properties(sheetId,title,index,hidden,gridProperties(rowCount,columnCount)),protectedRanges,data(startRow,startColumn,rowData.values.effectiveValue,rowMetadata.developerMetadata.metadataId))";

/// The spreadsheet, reached through Google's API.
pub struct GoogleSheets {
    hub: Hub,
    spreadsheet_id: String,
    /// `spreadsheet_id` percent-encoded: the hub puts it into the URL path verbatim.
    encoded_id: String,
    base_url: String,
    call_timeout: Duration,
    retry: RetryPolicy,
    budget: Budgets,
    /// How this client's calls wait for the budget ([`Sheets::set_precedence`]): a
    /// [`Precedence`] as its number.
    precedence: std::sync::atomic::AtomicU8,
    stats: Arc<SheetsStats>,
    tokens: TokenSource,
    /// The service account's e-mail, for "share the spreadsheet with ..." hints.
    client_email: Option<String>,
    /// [`GoogleSheetsConfig::say_waits_after`].
    say_waits_after: Option<Duration>,
}

impl std::fmt::Debug for GoogleSheets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleSheets")
            .field("spreadsheet_id", &self.spreadsheet_id)
            .field("base_url", &self.base_url)
            .field("client_email", &self.client_email)
            .finish_non_exhaustive()
    }
}

/// The TLS connector: the system's roots (webpki's if there are none), HTTP allowed because
/// the emulator listens on plain loopback HTTP.
pub(crate) fn connector() -> Connector {
    let builder = match HttpsConnectorBuilder::new().with_native_roots() {
        Ok(b) => b,
        Err(e) => {
            tracing::debug!(error = %e, "no native root certificates; using webpki roots");
            HttpsConnectorBuilder::new().with_webpki_roots()
        }
    };
    builder.https_or_http().enable_http1().build()
}

/// `url` with exactly one trailing `/`, checked to be an http(s) URL.
fn normalise_base_url(url: &str) -> Result<String, BuildError> {
    let bad = |reason: &str| BuildError::BaseUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let trimmed = url.trim();
    let uri: hyper::Uri = trimmed.parse().map_err(|_| bad("not a URL"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            return Err(bad(
                "it must start with https:// (or http:// for a local emulator)",
            ))
        }
    }
    if uri.host().is_none() {
        return Err(bad("it has no host"));
    }
    if uri.query().is_some() {
        return Err(bad("it must not have a query"));
    }
    Ok(format!("{}/", trimmed.trim_end_matches('/')))
}

impl GoogleSheets {
    /// Reads and checks the credentials and builds the client. Nothing is sent yet: the
    /// first call fetches the token.
    pub async fn new(config: GoogleSheetsConfig) -> Result<Self, BuildError> {
        if config.spreadsheet_id.trim().is_empty() {
            return Err(BuildError::NoSpreadsheetId);
        }
        let base_url = normalise_base_url(&config.api_base_url)?;
        let key = auth::load_key(&config.credentials).await?;
        let tokens = auth::token_source(
            &config.credentials,
            key.as_ref(),
            connector(),
            config.token_timeout,
        )
        .await?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector());
        let mut hub = Hub::new(client, tokens.clone());
        hub.base_url(base_url.clone());
        hub.root_url(base_url.clone());
        hub.user_agent(format!("sheetq/{}", env!("CARGO_PKG_VERSION")));
        tracing::debug!(
            spreadsheet_id = %config.spreadsheet_id,
            api = %base_url,
            credentials = %config.credentials,
            client_email = key.as_ref().map(|k| k.client_email.as_str()).unwrap_or("(metadata server)"),
            budget = ?config.budget,
            "Sheets API client ready"
        );
        Ok(Self {
            hub,
            encoded_id: convert::encode_path_param(config.spreadsheet_id.trim()),
            spreadsheet_id: config.spreadsheet_id.trim().to_string(),
            base_url,
            call_timeout: config.call_timeout,
            retry: config.retry,
            budget: config.budget,
            precedence: std::sync::atomic::AtomicU8::new(0),
            stats: config.stats,
            tokens,
            client_email: key.map(|k| k.client_email),
            say_waits_after: config.say_waits_after,
        })
    }

    pub fn spreadsheet_id(&self) -> &str {
        &self.spreadsheet_id
    }

    /// A one-shot command's line about a call that waits for the account's budget.
    fn say_wait(&self, method: ApiMethod, left: Duration) {
        let kind = if method.is_write() { "writes" } else { "reads" };
        let account = self.client_email.as_deref().unwrap_or("the account");
        let left = match left.as_secs() {
            0 => "a moment".to_string(),
            s => format!("about {s} s"),
        };
        tracing::info!(
            "waiting for {account}'s request budget: Google allows it {} {kind} a minute, and the sheetq processes of this machine (daemons included) have spent them; the next goes out in {left}",
            super::budget::GOOGLE_PER_MINUTE
        );
    }

    /// The counters of this client, to be rendered by the metrics endpoint.
    pub fn stats(&self) -> Arc<SheetsStats> {
        Arc::clone(&self.stats)
    }

    /// The OAuth scopes asked for so far (always only the spreadsheets scope).
    pub fn requested_scopes(&self) -> Vec<Vec<String>> {
        self.tokens.requested_scopes()
    }

    /// One API call: budget, timeout, classification and retries around `op`, which builds
    /// and sends one attempt.
    async fn call<T, F, Fut>(&self, method: ApiMethod, op: F) -> Result<T, SheetsError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = common::Result<(common::Response, T)>>,
    {
        self.call_by(method, None, op).await
    }

    /// [`Self::call`], but no attempt starts after `send_by` (nor after the budget wait
    /// that precedes it): such a call fails unsent, so the caller knows it did not apply.
    async fn call_by<T, F, Fut>(
        &self,
        method: ApiMethod,
        send_by: Option<std::time::Instant>,
        op: F,
    ) -> Result<T, SheetsError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = common::Result<(common::Response, T)>>,
    {
        let name = method.name();
        let late = move || send_by.is_some_and(|d| std::time::Instant::now() >= d);
        // How many times this call's token was refused (401).
        let refusals = std::sync::atomic::AtomicU32::new(0);
        let refusals = &refusals;
        let result = retry::retry(
            &self.retry,
            |attempt| {
                let send = op();
                async move {
                    if late() {
                        return Err(Failure::late(method));
                    }
                    let precedence = Precedence::from_number(
                        self.precedence.load(std::sync::atomic::Ordering::Relaxed),
                    );
                    // When the call expects to go out, as last estimated.
                    let until = std::sync::Mutex::new(None::<tokio::time::Instant>);
                    let acquire = self.budget.of(method.is_write()).acquire_as(
                        precedence,
                        |wait| {
                            let mut until = until.lock().unwrap_or_else(|p| p.into_inner());
                            if until.is_none() {
                                self.stats.record_throttled();
                                // Counted in `sheetq_throttled_waits_total`; per call it is
                                // detail.
                                tracing::debug!(
                                    method = name,
                                    wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                                    "request budget spent; the call waits for its turn"
                                );
                            }
                            *until = Some(tokio::time::Instant::now() + wait);
                        },
                    );
                    let waited = match self.say_waits_after {
                        None => acquire.await,
                        Some(after) => {
                            tokio::pin!(acquire);
                            tokio::select! {
                                waited = &mut acquire => waited,
                                () = tokio::time::sleep(after) => {
                                    let left = until
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .map(|t| t.saturating_duration_since(tokio::time::Instant::now()))
                                        .unwrap_or_default();
                                    self.say_wait(method, left);
                                    acquire.await
                                }
                            }
                        }
                    };
                    if !waited.is_zero() {
                        self.stats.record_throttled_wait(waited);
                    }
                    if late() {
                        return Err(Failure::late(method));
                    }
                    tracing::debug!(method = name, attempt, "sending");
                    let sent = chrono::Utc::now();
                    let sent_mono = std::time::Instant::now();
                    let outcome = tokio::time::timeout(self.call_timeout, send).await;
                    let mut failure = match outcome {
                        Ok(Ok((response, value))) => {
                            self.stats.record_request(method, Outcome::Ok);
                            if let Some(date) = server_date(&response) {
                                self.stats.record_server_date(
                                    date,
                                    sent,
                                    chrono::Utc::now(),
                                    sent_mono.elapsed(),
                                );
                            }
                            return Ok(value);
                        }
                        Ok(Err(e)) => classify(method, e, &self.context()),
                        Err(_) => Failure::timeout(method, self.call_timeout),
                    };
                    self.stats.record_request(method, failure.outcome);
                    if failure.outcome == Outcome::TooManyRequests {
                        // The account's quota is spent (shared with someone we do not see):
                        // slow this kind of call down for a minute, Google's quota window.
                        self.budget
                            .of(method.is_write())
                            .slow_down(Duration::from_secs(60));
                    }
                    if failure.outcome == Outcome::Unauthorized {
                        // The token was refused (revoked, expired early, or a local
                        // spreadsheet restarted without its tokens): never present it again.
                        // Google authenticates before it applies anything, so the call is
                        // sent once more, at once, with a fresh token, whichever attempt
                        // met the refusal (the first may have met a server that was down).
                        self.tokens.invalidate();
                        let first =
                            refusals.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
                        failure = Failure::token_refused(method, failure.error.message, first);
                    }
                    Err(failure)
                }
            },
            |ev| {
                self.stats.record_retry();
                tracing::warn!(
                    method = name,
                    attempt = ev.attempt,
                    delay_ms = u64::try_from(ev.delay.as_millis()).unwrap_or(u64::MAX),
                    reason = ev.reason,
                    error = %ev.error.error.message,
                    "Sheets API call failed; retrying"
                );
            },
        )
        .await;
        result.map_err(|gave_up| {
            let mut error = gave_up.error.error;
            if gave_up.attempts > 1 {
                error.message = format!(
                    "{} (gave up after {} attempts in {:.1?})",
                    error.message, gave_up.attempts, gave_up.elapsed
                );
            }
            error
        })
    }

    /// One POST of a JSON body to `v4/spreadsheets/{id}{suffix}?{query}` through the hub's own
    /// HTTP client and token source, answered the way the hub answers: the parsed reply, or
    /// the same `common::Error` variants, so [`classify`] treats both alike.
    async fn post_raw<T: serde::de::DeserializeOwned>(
        &self,
        suffix: &str,
        query: &str,
        body: String,
    ) -> common::Result<(common::Response, T)> {
        use http_body_util::BodyExt;
        use hyper::header;
        let amp = if query.is_empty() { "" } else { "&" };
        let url = format!(
            "{}v4/spreadsheets/{}{suffix}?alt=json{amp}{query}",
            self.base_url, self.encoded_id
        );
        let token = common::GetToken::get_token(&self.tokens, &[Scope::Spreadsheet.as_ref()])
            .await
            .map_err(common::Error::MissingToken)?;
        let mut builder = hyper::Request::builder()
            .method(hyper::Method::POST)
            .uri(url)
            .header(
                header::USER_AGENT,
                format!("sheetq/{}", env!("CARGO_PKG_VERSION")),
            )
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, body.len() as u64);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = builder
            .body(common::to_body(Some(body)))
            .map_err(|e| common::Error::Io(std::io::Error::other(e)))?;
        let response = self
            .hub
            .client
            .request(request)
            .await
            .map_err(common::Error::HttpError)?;
        let (parts, body) = response.into_parts();
        let bytes = body
            .collect()
            .await
            .map_err(|e| common::Error::Io(std::io::Error::other(e)))?
            .to_bytes();
        if !parts.status.is_success() {
            return Err(match serde_json::from_slice::<serde_json::Value>(&bytes) {
                Ok(json) => common::Error::BadRequest(json),
                Err(_) => common::Error::Failure(common::to_response(parts, Some(bytes))),
            });
        }
        // Parsed straight from the bytes into the typed reply: the body is never also held
        // as a string or as a tree of values.
        match serde_json::from_slice(&bytes) {
            Ok(value) => Ok((common::to_response(parts, None::<Vec<u8>>), value)),
            Err(e) => Err(common::Error::JsonDecodeError(
                String::from_utf8_lossy(&bytes).into_owned(),
                e,
            )),
        }
    }

    fn context(&self) -> Context<'_> {
        Context {
            spreadsheet_id: &self.spreadsheet_id,
            base_url: &self.base_url,
            client_email: self.client_email.as_deref(),
        }
    }
}

#[async_trait]
impl Sheets for GoogleSheets {
    fn account(&self) -> String {
        self.client_email.clone().unwrap_or_default()
    }

    fn clock_skew(&self) -> Option<chrono::TimeDelta> {
        self.stats.clock_skew()
    }

    fn google_now(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.stats.google_now()
    }

    fn call_stats(&self) -> Option<Arc<SheetsStats>> {
        Some(self.stats())
    }

    fn budget_waited(&self) -> std::time::Duration {
        self.budget.waited()
    }

    fn set_budget_share(&self, reads: u32, writes: u32) {
        self.budget.read.set_rate(reads);
        self.budget.write.set_rate(writes);
    }

    fn set_precedence(&self, precedence: Precedence) {
        self.precedence
            .store(precedence.number(), std::sync::atomic::Ordering::Relaxed);
    }

    async fn metadata(&self) -> Result<SpreadsheetMeta, SheetsError> {
        let s = self
            .call(ApiMethod::SpreadsheetsGet, || {
                self.hub
                    .spreadsheets()
                    .get(&self.encoded_id)
                    .include_grid_data(false)
                    .param(
                        "fields",
                        // The protected ranges ride along: no request of their own.
                        "spreadsheetId,properties.timeZone,sheets.properties,sheets.protectedRanges",
                    )
                    .add_scope(Scope::Spreadsheet)
                    .doit()
            })
            .await?;
        Ok(convert::spreadsheet_meta(&self.spreadsheet_id, &s))
    }

    async fn read(&self, ranges: &[String]) -> Result<Vec<ValueRange>, SheetsError> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let method = ApiMethod::ValuesBatchGet;
        let reply = self
            .call(method, || {
                // `ranges` travel in the query string, which the client encodes itself.
                let mut call = self
                    .hub
                    .spreadsheets()
                    .values_batch_get(&self.encoded_id)
                    .value_render_option("UNFORMATTED_VALUE")
                    .date_time_render_option("SERIAL_NUMBER")
                    .major_dimension("ROWS")
                    .add_scope(Scope::Spreadsheet);
                for r in ranges {
                    call = call.add_ranges(r);
                }
                call.doit()
            })
            .await?;
        let got = reply.value_ranges.unwrap_or_default();
        if got.len() != ranges.len() {
            return Err(SheetsError::new(
                ErrorKind::Fatal,
                method.name(),
                format!(
                    "asked for {} ranges, the reply has {}",
                    ranges.len(),
                    got.len()
                ),
            ));
        }
        Ok(got
            .into_iter()
            .zip(ranges)
            .map(|(vr, asked)| {
                ValueRange::new(
                    vr.range.unwrap_or_else(|| asked.clone()),
                    vr.values.unwrap_or_default(),
                )
            })
            .collect())
    }

    async fn write(&self, data: &[ValueRange]) -> Result<(), SheetsError> {
        if data.is_empty() {
            return Ok(());
        }
        let request = api::BatchUpdateValuesRequest {
            data: Some(
                data.iter()
                    .map(|vr| api::ValueRange {
                        range: Some(vr.range.clone()),
                        major_dimension: Some("ROWS".into()),
                        values: Some(convert::to_api_rows(&vr.values)),
                    })
                    .collect(),
            ),
            value_input_option: Some("RAW".into()),
            include_values_in_response: Some(false),
            ..Default::default()
        };
        self.call(ApiMethod::ValuesBatchUpdate, || {
            self.hub
                .spreadsheets()
                .values_batch_update(request.clone(), &self.encoded_id)
                .add_scope(Scope::Spreadsheet)
                .doit()
        })
        .await?;
        Ok(())
    }

    async fn batch_update(&self, batch: &BatchUpdate) -> Result<BatchUpdateReply, SheetsError> {
        let method = ApiMethod::SpreadsheetsBatchUpdate;
        let want_ranges = !batch.response_ranges.is_empty();
        let request = api::BatchUpdateSpreadsheetRequest {
            requests: Some(batch.requests.iter().map(convert::to_api_request).collect()),
            include_spreadsheet_in_response: Some(want_ranges || batch.sheet_list),
            response_ranges: want_ranges.then(|| batch.response_ranges.clone()),
            response_include_grid_data: Some(want_ranges),
        };
        // Sent by hand so the reply parses into the lean types (see `convert::lean`).
        let mut body = serde_json::to_value(&request).map_err(|e| {
            SheetsError::new(
                ErrorKind::Fatal,
                method.name(),
                format!("cannot encode: {e}"),
            )
        })?;
        common::remove_json_null_values(&mut body);
        let body = body.to_string();
        let fields = format!("fields={}", convert::encode_path_param(BATCH_UPDATE_FIELDS));
        let reply: convert::lean::BatchReply = self
            .call_by(method, batch.send_by, || {
                self.post_raw(":batchUpdate", &fields, body.clone())
            })
            .await?;
        let fatal = |m: String| SheetsError::new(ErrorKind::Fatal, method.name(), m);
        let replies = convert::replies(
            &batch.requests,
            reply.replies.as_deref().unwrap_or_default(),
        )
        .map_err(fatal)?;
        let (ranges, row_metadata) =
            convert::response_ranges(&batch.response_ranges, reply.updated_spreadsheet.as_ref())
                .map_err(fatal)?
                .into_iter()
                .unzip();
        let sheets = match (&reply.updated_spreadsheet, batch.sheet_list && !want_ranges) {
            (Some(s), true) => convert::sheets_of(s),
            _ => Vec::new(),
        };
        let protections = reply
            .updated_spreadsheet
            .as_ref()
            .map(convert::protections_of)
            .unwrap_or_default();
        Ok(BatchUpdateReply {
            replies,
            ranges,
            row_metadata,
            sheets,
            protections,
        })
    }

    async fn read_filtered(&self, filters: &[Filter]) -> Result<Vec<FilterRead>, SheetsError> {
        if filters.is_empty() {
            return Ok(Vec::new());
        }
        let request = api::BatchGetValuesByDataFilterRequest {
            data_filters: Some(filters.iter().map(convert::to_api_filter).collect()),
            date_time_render_option: Some("SERIAL_NUMBER".into()),
            major_dimension: Some("ROWS".into()),
            value_render_option: Some("UNFORMATTED_VALUE".into()),
        };
        let reply = self
            .call(ApiMethod::ValuesBatchGetByDataFilter, || {
                self.hub
                    .spreadsheets()
                    .values_batch_get_by_data_filter(request.clone(), &self.encoded_id)
                    .add_scope(Scope::Spreadsheet)
                    .doit()
            })
            .await?;
        Ok(convert::filtered_reads(filters, &reply))
    }

    async fn write_filtered(
        &self,
        data: &[FilterWrite],
    ) -> Result<Vec<Option<FilterWritten>>, SheetsError> {
        self.write_filtered_by(data, None).await
    }

    async fn write_filtered_by(
        &self,
        data: &[FilterWrite],
        send_by: Option<std::time::Instant>,
    ) -> Result<Vec<Option<FilterWritten>>, SheetsError> {
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let body = convert::write_filtered_body(data).to_string();
        let reply: api::BatchUpdateValuesByDataFilterResponse = self
            .call_by(ApiMethod::ValuesBatchUpdateByDataFilter, send_by, || {
                self.post_raw("/values:batchUpdateByDataFilter", "", body.clone())
            })
            .await?;
        Ok(convert::filtered_writes(data, &reply))
    }

    async fn search_metadata(
        &self,
        lookup: &MetadataLookup,
    ) -> Result<Vec<MetadataEntry>, SheetsError> {
        let lookups = match lookup {
            MetadataLookup::Key(key) => vec![api::DeveloperMetadataLookup {
                metadata_key: Some(key.clone()),
                ..Default::default()
            }],
            // An empty list of data filters is refused by Google; no sheet, nothing found.
            MetadataLookup::OnSheets(ids) if ids.is_empty() => return Ok(Vec::new()),
            // INTERSECTING_LOCATION on a sheet selects the sheet's own entries and its
            // rows' and columns' (DeveloperMetadataLookup.locationMatchingStrategy).
            MetadataLookup::OnSheets(ids) => ids
                .iter()
                .map(|id| api::DeveloperMetadataLookup {
                    metadata_location: Some(api::DeveloperMetadataLocation {
                        sheet_id: Some(*id),
                        ..Default::default()
                    }),
                    location_matching_strategy: Some("INTERSECTING_LOCATION".into()),
                    ..Default::default()
                })
                .collect(),
        };
        let request = api::SearchDeveloperMetadataRequest {
            data_filters: Some(
                lookups
                    .into_iter()
                    .map(|l| api::DataFilter {
                        developer_metadata_lookup: Some(l),
                        ..Default::default()
                    })
                    .collect(),
            ),
        };
        let reply = self
            .call(ApiMethod::DeveloperMetadataSearch, || {
                self.hub
                    .spreadsheets()
                    .developer_metadata_search(request.clone(), &self.encoded_id)
                    .add_scope(Scope::Spreadsheet)
                    .doit()
            })
            .await?;
        // An entry two filters select is listed under each (MatchedDeveloperMetadata):
        // keep it once.
        let mut entries = convert::metadata_entries(&reply);
        let mut seen = std::collections::BTreeSet::new();
        entries.retain(|m| seen.insert(m.id));
        Ok(entries)
    }

    async fn append(&self, range: &str, rows: &[Vec<Cell>]) -> Result<AppendReply, SheetsError> {
        let request = api::ValueRange {
            range: Some(range.to_string()),
            major_dimension: Some("ROWS".into()),
            values: Some(convert::to_api_rows(rows)),
        };
        let encoded_range = convert::encode_path_param(range);
        let reply = self
            .call(ApiMethod::ValuesAppend, || {
                self.hub
                    .spreadsheets()
                    .values_append(request.clone(), &self.encoded_id, &encoded_range)
                    .value_input_option("RAW")
                    .insert_data_option("INSERT_ROWS")
                    .add_scope(Scope::Spreadsheet)
                    .doit()
            })
            .await?;
        Ok(AppendReply {
            updated_range: reply
                .updates
                .and_then(|u| u.updated_range)
                .unwrap_or_default(),
        })
    }
}

/// What a failure message may mention.
struct Context<'a> {
    spreadsheet_id: &'a str,
    base_url: &'a str,
    client_email: Option<&'a str>,
}

/// One failed attempt, classified.
#[derive(Debug)]
struct Failure {
    error: SheetsError,
    outcome: Outcome,
    /// Whether the retry loop may repeat the call here. False for errors that cannot
    /// succeed, and for a non-idempotent call whose failure leaves open that it was applied
    /// (the error stays `Retryable` for the caller, which can check the sheet first).
    retry_here: bool,
}

impl Retryable for Failure {
    fn retry_reason(&self) -> Option<String> {
        self.retry_here.then(|| self.outcome.label().to_string())
    }
}

impl Failure {
    /// The API refused the call's token (401). Never a set-up problem: the token endpoint
    /// issued it, so the key still signs (a key Google refuses fails there, before anything
    /// is sent), and nothing was applied (Google authenticates first). The `first` refusal of
    /// a call is sent again at once, with a fresh token, whichever attempt met it (the one
    /// before may have met a server that was down); a fresh token refused too means the
    /// API's sign-in is out, an outage like a 503: retried as one, a new token each time.
    fn token_refused(method: ApiMethod, message: String, first: bool) -> Self {
        let message = if first {
            message
        } else {
            format!("{message}; a fresh token was refused too, though the key still signs: the API's sign-in is out (or the local spreadsheet at api_base_url restarted), retrying as for an outage")
        };
        let mut failure = Failure::new(
            method,
            ErrorKind::Retryable,
            Outcome::Unauthorized,
            true,
            message,
        );
        failure.retry_here |= first;
        failure
    }

    fn new(
        method: ApiMethod,
        kind: ErrorKind,
        outcome: Outcome,
        not_applied: bool,
        message: String,
    ) -> Self {
        let retry_here = kind == ErrorKind::Retryable
            && method.retried_by_client()
            && (not_applied || method.is_idempotent());
        let error = SheetsError::new(kind, method.name(), message);
        Self {
            error: if not_applied {
                error.unapplied()
            } else {
                error
            },
            outcome,
            retry_here,
        }
    }

    /// Not sent: its deadline passed (the caller's reason to send it no longer holds).
    fn late(method: ApiMethod) -> Self {
        let mut f = Self::new(
            method,
            ErrorKind::Retryable,
            Outcome::Other,
            true,
            "not sent: its send-by deadline passed".into(),
        );
        f.retry_here = false;
        f
    }

    fn timeout(method: ApiMethod, timeout: Duration) -> Self {
        Self::new(
            method,
            ErrorKind::Retryable,
            Outcome::Timeout,
            false,
            format!("no reply within {timeout:?}"),
        )
    }
}

/// The kind of a Google error from its HTTP code, or its gRPC status name when the code is
/// missing.
/// The reply's `Date` header (RFC 9110's IMF-fixdate, e.g. `Tue, 01 Dec 2026 19:00:00 GMT`).
fn server_date(response: &common::Response) -> Option<chrono::DateTime<chrono::Utc>> {
    let text = response.headers().get(hyper::header::DATE)?.to_str().ok()?;
    chrono::DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|d| d.with_timezone(&chrono::Utc))
}

fn kind_of(code: Option<u16>, status: Option<&str>) -> ErrorKind {
    match code {
        Some(408 | 409 | 429) | Some(500..=599) => ErrorKind::Retryable,
        Some(400) => ErrorKind::InvalidArgument,
        Some(401 | 403) => ErrorKind::Permission,
        Some(404) => ErrorKind::NotFound,
        Some(_) => ErrorKind::Fatal,
        None => match status.unwrap_or_default() {
            "RESOURCE_EXHAUSTED" | "UNAVAILABLE" | "INTERNAL" | "DEADLINE_EXCEEDED" | "ABORTED" => {
                ErrorKind::Retryable
            }
            "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => {
                ErrorKind::InvalidArgument
            }
            "PERMISSION_DENIED" | "UNAUTHENTICATED" => ErrorKind::Permission,
            "NOT_FOUND" => ErrorKind::NotFound,
            _ => ErrorKind::Fatal,
        },
    }
}

/// Google's message, with the fix where sheetq knows it.
fn google_message(
    code: Option<u16>,
    status: Option<&str>,
    message: &str,
    ctx: &Context<'_>,
) -> String {
    let head = match (code, status) {
        (Some(c), Some(s)) => format!("{c} {s}: {message}"),
        (Some(c), None) => format!("{c}: {message}"),
        (None, Some(s)) => format!("{s}: {message}"),
        (None, None) => message.to_string(),
    };
    let hint = match code {
        Some(401) => {
            " (the API refused the token; sheetq fetches a fresh one and sends the call again)"
                .to_string()
        }
        Some(403) => match ctx.client_email {
            Some(email) => format!(
                " (share spreadsheet {} with {email} as an editor)",
                ctx.spreadsheet_id
            ),
            None => format!(
                " (share spreadsheet {} with the VM's service account as an editor)",
                ctx.spreadsheet_id
            ),
        },
        Some(404) => format!(
            " (check spreadsheet_id {:?}, and that the sheet named in the range exists)",
            ctx.spreadsheet_id
        ),
        Some(429) => " (quota exceeded; consider a lower request budget)".to_string(),
        _ => String::new(),
    };
    format!("{head}{hint}")
}

/// The message of an error and its sources, `: `-joined.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string().trim_end().to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(text.trim_end()) {
            out.push_str(": ");
            out.push_str(text.trim_end());
        }
        source = s.source();
    }
    out
}

fn classify(method: ApiMethod, error: common::Error, ctx: &Context<'_>) -> Failure {
    use common::Error as E;
    match error {
        E::BadRequest(json) => {
            let err = &json["error"];
            let code = err["code"].as_u64().and_then(|c| u16::try_from(c).ok());
            let status = err["status"].as_str();
            let message = err["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| json.to_string());
            let kind = kind_of(code, status);
            let outcome = code.map(Outcome::from_status).unwrap_or(Outcome::Other);
            // Only a 429 surely comes before anything was applied (the quota is checked
            // first). That a 503 applied nothing is believed, not documented: a request that
            // is not idempotent (an append) is not repeated on it; its caller looks first.
            let not_applied = matches!(code, Some(429));
            Failure::new(
                method,
                kind,
                outcome,
                not_applied,
                google_message(code, status, &message, ctx),
            )
        }
        E::Failure(response) => {
            let code = response.status().as_u16();
            Failure::new(
                method,
                kind_of(Some(code), None),
                Outcome::from_status(code),
                code == 429,
                format!(
                    "HTTP {} from {} without a JSON error body",
                    response.status(),
                    ctx.base_url
                ),
            )
        }
        E::HttpError(e) => {
            // A connect error means nothing reached the server.
            let not_applied = e.is_connect();
            let hint = if not_applied {
                " (nothing answers there: check api_base_url in the config, and that the server it names is running; for the local spreadsheet, `sheetq emulator`)"
            } else {
                ""
            };
            Failure::new(
                method,
                ErrorKind::Retryable,
                Outcome::Connection,
                not_applied,
                format!("no reply from {}: {}{hint}", ctx.base_url, chain(&e)),
            )
        }
        E::MissingToken(e) => {
            let permanent = e
                .downcast_ref::<TokenError>()
                .is_some_and(TokenError::is_permanent);
            let kind = if permanent {
                ErrorKind::Permission
            } else {
                ErrorKind::Retryable
            };
            Failure::new(method, kind, Outcome::Token, true, chain(e.as_ref()))
        }
        E::JsonDecodeError(body, e) if body.trim().is_empty() || e.is_eof() => Failure::new(
            method,
            ErrorKind::Retryable,
            Outcome::Connection,
            false,
            format!("the reply was cut off: {e}"),
        ),
        E::JsonDecodeError(body, e) => Failure::new(
            method,
            ErrorKind::Fatal,
            Outcome::Other,
            false,
            format!(
                "unexpected reply ({e}): {}",
                body.chars().take(200).collect::<String>()
            ),
        ),
        E::Io(e) => Failure::new(
            method,
            ErrorKind::Retryable,
            Outcome::Connection,
            false,
            format!("reading the reply failed: {e}"),
        ),
        other => Failure::new(
            method,
            ErrorKind::Fatal,
            Outcome::Other,
            false,
            other.to_string().trim_end().to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CTX: Context<'static> = Context {
        spreadsheet_id: "SHEET",
        base_url: "http://127.0.0.1:9/",
        client_email: Some("bot@p.iam.gserviceaccount.com"),
    };

    fn google(code: u16, status: &str, message: &str) -> common::Error {
        common::Error::BadRequest(
            json!({"error": {"code": code, "status": status, "message": message}}),
        )
    }

    #[test]
    fn quota_and_server_errors_are_retried() {
        for (code, status) in [
            (429, "RESOURCE_EXHAUSTED"),
            (500, "INTERNAL"),
            (503, "UNAVAILABLE"),
        ] {
            let f = classify(
                ApiMethod::ValuesBatchGet,
                google(code, status, "busy"),
                &CTX,
            );
            assert_eq!(f.error.kind, ErrorKind::Retryable, "{code}");
            assert!(f.retry_reason().is_some(), "{code} must be retried");
            assert_eq!(f.outcome, Outcome::from_status(code));
        }
    }

    #[test]
    fn value_writes_are_never_repeated_by_the_client() {
        // What they write was decided from a read; by the time a retry goes out, rows may
        // have moved. The caller resolves them afresh instead.
        for method in [
            ApiMethod::ValuesBatchUpdate,
            ApiMethod::ValuesBatchUpdateByDataFilter,
        ] {
            let f = classify(method, google(429, "RESOURCE_EXHAUSTED", "quota"), &CTX);
            assert_eq!(
                f.error.kind,
                ErrorKind::Retryable,
                "the caller may retry later"
            );
            assert!(
                f.retry_reason().is_none(),
                "{} must not be repeated here",
                method.name()
            );
            let f = Failure::timeout(method, Duration::from_secs(1));
            assert!(f.retry_reason().is_none());
        }
    }

    #[test]
    fn client_errors_are_not_retried_and_keep_googles_message() {
        let f = classify(
            ApiMethod::ValuesBatchGet,
            google(400, "INVALID_ARGUMENT", "Unable to parse range: Nope!A1"),
            &CTX,
        );
        assert_eq!(f.error.kind, ErrorKind::InvalidArgument);
        assert!(f.retry_reason().is_none());
        assert_eq!(f.error.method, "values.batchGet");
        assert!(
            f.error.message.contains("Unable to parse range: Nope!A1"),
            "{}",
            f.error.message
        );

        let f = classify(
            ApiMethod::ValuesBatchGet,
            google(
                403,
                "PERMISSION_DENIED",
                "The caller does not have permission",
            ),
            &CTX,
        );
        assert_eq!(f.error.kind, ErrorKind::Permission);
        assert!(
            f.error.message.contains("bot@p.iam.gserviceaccount.com"),
            "{}",
            f.error.message
        );

        let f = classify(
            ApiMethod::SpreadsheetsGet,
            google(404, "NOT_FOUND", "Requested entity was not found."),
            &CTX,
        );
        assert_eq!(f.error.kind, ErrorKind::NotFound);
        assert!(f.error.message.contains("SHEET"), "{}", f.error.message);

        let f = classify(
            ApiMethod::SpreadsheetsGet,
            google(401, "UNAUTHENTICATED", "bad token"),
            &CTX,
        );
        assert_eq!(f.error.kind, ErrorKind::Permission);
        assert!(f.retry_reason().is_none());
    }

    #[test]
    fn status_name_is_enough_without_a_code() {
        assert_eq!(
            kind_of(None, Some("RESOURCE_EXHAUSTED")),
            ErrorKind::Retryable
        );
        assert_eq!(
            kind_of(None, Some("INVALID_ARGUMENT")),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            kind_of(None, Some("PERMISSION_DENIED")),
            ErrorKind::Permission
        );
        assert_eq!(kind_of(None, Some("NOT_FOUND")), ErrorKind::NotFound);
        assert_eq!(kind_of(None, None), ErrorKind::Fatal);
    }

    #[test]
    fn an_append_is_only_repeated_when_it_surely_was_not_applied() {
        let f = classify(
            ApiMethod::ValuesAppend,
            google(429, "RESOURCE_EXHAUSTED", "quota"),
            &CTX,
        );
        assert!(f.retry_reason().is_some());
        let f = classify(
            ApiMethod::ValuesAppend,
            google(500, "INTERNAL", "oops"),
            &CTX,
        );
        assert_eq!(
            f.error.kind,
            ErrorKind::Retryable,
            "the caller may still retry"
        );
        assert!(f.retry_reason().is_none(), "a 500 append may have landed");
        let f = classify(
            ApiMethod::ValuesAppend,
            google(503, "UNAVAILABLE", "try again"),
            &CTX,
        );
        assert!(
            f.retry_reason().is_none(),
            "that a 503 applied nothing is believed, not documented: an append is not repeated"
        );
        let f = Failure::timeout(ApiMethod::ValuesAppend, Duration::from_secs(1));
        assert!(f.retry_reason().is_none());
        let f = Failure::timeout(ApiMethod::ValuesBatchGet, Duration::from_secs(1));
        assert!(f.retry_reason().is_some());
    }

    #[test]
    fn token_failures_are_retried_unless_the_key_is_rejected() {
        let transient = common::Error::MissingToken(Box::new(TokenError::Timeout {
            source_desc: "metadata".into(),
            timeout: Duration::from_secs(3),
        }));
        let f = classify(ApiMethod::ValuesAppend, transient, &CTX);
        assert_eq!(f.outcome, Outcome::Token);
        assert!(
            f.retry_reason().is_some(),
            "no request was sent, even an append may retry"
        );
        let rejected = common::Error::MissingToken(Box::new(TokenError::Failed {
            source_desc: "key file k.json".into(),
            message: "invalid_grant: Invalid JWT Signature.".into(),
            rejected: true,
        }));
        let f = classify(ApiMethod::ValuesBatchGet, rejected, &CTX);
        assert_eq!(f.error.kind, ErrorKind::Permission);
        assert!(f.error.message.contains("k.json"), "{}", f.error.message);
        assert!(f.retry_reason().is_none());
    }

    #[test]
    fn cut_off_replies_are_retried_garbage_is_not() {
        let eof = serde_json::from_str::<serde_json::Value>("{\"a\":").err();
        if let Some(e) = eof {
            let f = classify(
                ApiMethod::ValuesBatchGet,
                common::Error::JsonDecodeError("{\"a\":".into(), e),
                &CTX,
            );
            assert!(f.retry_reason().is_some());
        }
        let bad = serde_json::from_str::<serde_json::Value>("<html>").err();
        if let Some(e) = bad {
            let f = classify(
                ApiMethod::ValuesBatchGet,
                common::Error::JsonDecodeError("<html>".into(), e),
                &CTX,
            );
            assert_eq!(f.error.kind, ErrorKind::Fatal);
        }
    }

    #[test]
    fn base_url_gets_exactly_one_trailing_slash() {
        let ok = |u: &str| normalise_base_url(u).ok();
        assert_eq!(
            ok("http://127.0.0.1:8787"),
            Some("http://127.0.0.1:8787/".into())
        );
        assert_eq!(
            ok("https://sheets.googleapis.com/"),
            Some(DEFAULT_API_BASE_URL.into())
        );
        assert_eq!(ok("http://h/prefix//"), Some("http://h/prefix/".into()));
        assert!(ok("sheets.googleapis.com").is_none());
        assert!(ok("ftp://h/").is_none());
    }
}
