//! Shared helpers of the integration tests: start the emulator on `127.0.0.1:0`, build a
//! `google-sheets4` hub that reaches it with real service-account auth (yup-oauth2 signs a
//! JWT with the emulator's test key and POSTs it to the emulator's `/token`), and send raw
//! HTTP for what the client cannot express (missing token, admin endpoints).
#![allow(dead_code)]

use google_sheets4::api::Scope;
use google_sheets4::Sheets;
use http_body_util::BodyExt as _;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::Value as Json;
use sheetq::emulator::{Emulator, EmulatorOptions, Quota, Seed};

/// The hub type the tests use.
pub type Hub = Sheets<hyper_rustls::HttpsConnector<HttpConnector>>;

/// The scope every call asks for (docs/design.md §8: never the broad drive scopes).
pub const SCOPE: Scope = Scope::Spreadsheet;

/// Starts an emulator seeded with the demo spreadsheet, enforcing Google's quota (60 reads
/// and 60 writes a minute per user). Stops when dropped.
pub async fn start_emulator() -> Emulator {
    start_with(EmulatorOptions::default()).await
}

/// Starts an emulator seeded with the demo spreadsheet under `quota`: for tests whose
/// daemons poll many times a second, a quota scaled to that speed ([`Quota::scaled`]).
pub async fn start_with_quota(quota: Quota) -> Emulator {
    start_with(EmulatorOptions {
        quota: Some(quota),
        ..EmulatorOptions::default()
    })
    .await
}

/// Starts an emulator with one empty sheet, `Sheet1`.
pub async fn start_empty() -> Emulator {
    start_with(EmulatorOptions {
        seed: Seed::Empty,
        ..EmulatorOptions::default()
    })
    .await
}

pub async fn start_with(opts: EmulatorOptions) -> Emulator {
    Emulator::start(opts)
        .await
        .unwrap_or_else(|e| panic!("emulator did not start: {e}"))
}

/// Puts the emulator's service-account key at `dir/key.json` (mode 0600) and returns its path.
/// A daemon started earlier may be reading the key right now, so it is put in place whole by
/// a rename, never truncated and rewritten.
pub fn place_key(emu: &Emulator, dir: &std::path::Path) -> std::path::PathBuf {
    let key = dir.join("key.json");
    let mut staged = tempfile::NamedTempFile::new_in(dir).unwrap_or_else(|e| panic!("key: {e}"));
    std::io::Write::write_all(&mut staged, emu.credentials_json().as_bytes())
        .unwrap_or_else(|e| panic!("key: {e}"));
    staged.persist(&key).unwrap_or_else(|e| panic!("key: {e}"));
    key
}

/// A `google-sheets4` hub pointed at `emu` (`base_url`/`root_url`), authenticated with the
/// emulator's service-account credentials through `yup-oauth2`.
pub async fn hub(emu: &Emulator) -> Hub {
    hub_with(emu, emu.credentials_json()).await
}

/// Like [`hub`], as another service account of the emulator's project (`name@...`): a
/// second user with its own per-user quota.
pub async fn hub_for(emu: &Emulator, name: &str) -> Hub {
    hub_with(emu, emu.credentials_json_for(name)).await
}

async fn hub_with(emu: &Emulator, credentials: String) -> Hub {
    let key = yup_oauth2::parse_service_account_key(credentials).unwrap_or_else(|e| {
        panic!("credentials JSON does not parse as a service-account key: {e}")
    });
    let auth = yup_oauth2::ServiceAccountAuthenticator::builder(key)
        .build()
        .await
        .unwrap_or_else(|e| panic!("service-account authenticator: {e}"));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    let mut hub = Sheets::new(client, auth);
    hub.base_url(emu.base_url());
    hub.root_url(emu.base_url());
    hub
}

/// Deserialises a google-sheets4 request type from JSON. Goes through a string because
/// `FieldMask` only deserialises from borrowed text.
pub fn from_json<T: serde::de::DeserializeOwned>(v: Json) -> T {
    serde_json::from_str(&v.to_string()).unwrap_or_else(|e| panic!("bad request JSON {v}: {e}"))
}

/// The `{"error": {...}}` JSON of a failed call; panics (naming the call) on success or on
/// a failure that is not an API error reply.
pub fn api_error<T: std::fmt::Debug>(what: &str, r: google_sheets4::Result<T>) -> Json {
    match r {
        Err(google_sheets4::Error::BadRequest(json)) => json,
        Err(other) => panic!("{what}: expected an API error reply, got {other:?}"),
        Ok(v) => panic!("{what}: expected an API error reply, got success {v:?}"),
    }
}

/// Unwraps a call's result, naming the call when it failed.
pub fn ok<T>(what: &str, r: google_sheets4::Result<(google_sheets4::common::Response, T)>) -> T {
    match r {
        Ok((_, v)) => v,
        Err(e) => panic!("{what} failed: {e:?}"),
    }
}

/// Sends a raw HTTP request to the emulator; returns status and JSON body (`Null` if none).
pub async fn raw(
    emu: &Emulator,
    method: &str,
    path_and_query: &str,
    body: Option<Json>,
    bearer: Option<&str>,
) -> (u16, Json) {
    let (status, bytes) = raw_bytes(emu, method, path_and_query, body, bearer).await;
    (status, serde_json::from_slice(&bytes).unwrap_or(Json::Null))
}

/// A POST of `body` as it is, with exactly `headers` (for requests a browser could send
/// from another page); returns the status.
pub async fn post_with_headers(
    emu: &Emulator,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> u16 {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<hyper::body::Bytes>>();
    let mut req = hyper::Request::builder().method("POST").uri(format!(
        "{}{}",
        emu.base_url(),
        path.trim_start_matches('/')
    ));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(http_body_util::Full::new(hyper::body::Bytes::from(
            body.to_string(),
        )))
        .unwrap_or_else(|e| panic!("bad request: {e}"));
    client
        .request(req)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
        .status()
        .as_u16()
}

/// `values.update` of `range` (RAW) by the person `email`, with a token of their own, as
/// their browser or a simple `onEdit` would write: the status and Google's reply.
pub async fn person_writes(emu: &Emulator, email: &str, range: &str, rows: Json) -> (u16, Json) {
    let token = emu.person_token(email);
    let path = format!(
        "v4/spreadsheets/{}/values/{}?valueInputOption=RAW",
        emu.spreadsheet_id(),
        percent_encoding::utf8_percent_encode(range, percent_encoding::NON_ALPHANUMERIC)
    );
    raw(
        emu,
        "PUT",
        &path,
        Some(serde_json::json!({ "values": rows })),
        Some(&token),
    )
    .await
}

/// Like [`raw`], returning the body bytes unparsed.
pub async fn raw_bytes(
    emu: &Emulator,
    method: &str,
    path_and_query: &str,
    body: Option<Json>,
    bearer: Option<&str>,
) -> (u16, Vec<u8>) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<hyper::body::Bytes>>();
    let url = format!(
        "{}{}",
        emu.base_url(),
        path_and_query.trim_start_matches('/')
    );
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json");
    if let Some(t) = bearer {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = req
        .body(http_body_util::Full::new(hyper::body::Bytes::from(body)))
        .unwrap_or_else(|e| panic!("bad request: {e}"));
    let resp = client
        .request(req)
        .await
        .unwrap_or_else(|e| panic!("{method} {path_and_query}: {e}"));
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    (status, bytes.to_vec())
}

/// A google-sheets4 reply as JSON, with the `null`s of its unset `Option` fields removed so
/// that it compares like the JSON the server sent.
pub fn to_json<T: serde::Serialize>(v: &T) -> Json {
    let mut j = serde_json::to_value(v).unwrap_or_else(|e| panic!("reply does not serialise: {e}"));
    google_sheets4::common::remove_json_null_values(&mut j);
    j
}

// ---------------------------------------------------------------------------------------
// Daemons against the emulator, and reading the sheet back as a person (or a test) would.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sheetq::admin::{self, NewJob};
use sheetq::config::Config;
use sheetq::daemon::{DaemonError, RunReport};
use sheetq::queue::{self, ColumnMap, QueueRow};
use sheetq::sheets::auth::Credentials;
use tokio_util::sync::CancellationToken;

/// The time zone of the demo spreadsheet.
pub const TZ: chrono_tz::Tz = chrono_tz::Asia::Tokyo;

/// Most clients a test runs on the emulator's one service account (three daemons and the
/// test's own client); each gets an equal share of the per-user quota ([`budget_share`]).
pub const CLIENTS_PER_ACCOUNT: u32 = 4;

/// The client-side budget (`requests_per_minute`) of every test client: a
/// [`CLIENTS_PER_ACCOUNT`]th of the emulator's per-user quota (the smaller of reads and
/// writes, as the budget counts both together), less the burst `cli::budget` allows on top
/// of the rate in any minute, so that the test's clients together are never refused by the
/// quota: no test relies on 429 handling by accident. Panics, naming the fix, when the
/// quota is too small for a useful share.
pub fn budget_share(emu: &Emulator) -> u32 {
    let Some(quota) = emu.quota() else {
        return 10_000;
    };
    let per_user = quota.per_user.read.min(quota.per_user.write);
    let share = per_user / CLIENTS_PER_ACCOUNT;
    // `cli::budget` lets `rate + burst` requests into one minute, the burst at most 10.
    let rate = share.saturating_sub(11).min(10_000);
    assert!(
        rate >= 1,
        "the emulator's quota ({} per user a minute) leaves {CLIENTS_PER_ACCOUNT} test clients no budget: start the test with a larger one (support::start_with_quota(Quota::scaled(n)))",
        quota.per_user
    );
    let burst = if rate <= 60 {
        (61 - rate).clamp(1, 10)
    } else {
        10
    };
    assert!(
        rate + burst <= share,
        "budget {rate}+{burst} over the share {share}"
    );
    rate
}

/// Panics when the emulator refused any request for its quota since the counters were last
/// cleared (injected 429 faults are not counted): the test's clients must fit the quota.
pub fn assert_no_quota_refusals(emu: &Emulator) {
    let refused = emu.quota_refused();
    assert!(
        refused.is_empty(),
        "the emulator's quota {:?} refused requests (by user): {refused:?}; scale the test's quota or lower its clients' budget",
        emu.quota()
    );
}

/// Settings every test daemon starts from: quick polls, a client-side budget that fits the
/// emulator's quota ([`budget_share`]), and the commands the tests use. `overrides` replace
/// or add top-level keys (values as TOML text, e.g. `("slots", "1")`); `commands` is
/// appended as extra `[commands.NAME]` tables.
pub fn daemon_config(
    emu: &Emulator,
    worker: &str,
    state_dir: &std::path::Path,
    overrides: &[(&str, &str)],
    commands: &str,
) -> Config {
    let mut keys: BTreeMap<&str, String> = BTreeMap::new();
    keys.insert("spreadsheet_id", format!("{:?}", emu.spreadsheet_id()));
    keys.insert("api_base_url", format!("{:?}", emu.base_url()));
    keys.insert("worker_id", format!("{worker:?}"));
    keys.insert(
        "state_dir",
        format!("{:?}", state_dir.display().to_string()),
    );
    keys.insert("slots", "2".into());
    keys.insert("poll_interval", "\"100ms\"".into());
    keys.insert("requests_per_minute", budget_share(emu).to_string());
    keys.insert("heartbeat_interval", "\"1s\"".into());
    keys.insert("dead_after", "\"30s\"".into());
    for (k, v) in overrides {
        keys.insert(k, (*v).to_string());
    }
    let mut text: String = keys.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    text.push_str("[commands.sleep]\nbuiltin = \"sleep\"\n[commands.echo]\nbuiltin = \"echo\"\n");
    text.push_str(commands);
    Config::parse(&text, "test config", &BTreeMap::new())
        .unwrap_or_else(|e| panic!("test config does not parse: {e}\n{text}"))
}

/// A client of the emulator through the real Google client, as the daemon builds it.
pub async fn client(emu: &Emulator, config: &Config) -> Arc<dyn sheetq::sheets::Sheets> {
    sheetq::setup::connect(
        config,
        Some(Credentials::KeyJson(emu.credentials_json())),
        false,
    )
    .await
    .unwrap_or_else(|e| panic!("cannot connect to the emulator: {e:#}"))
}

/// Like [`client`], calling the API as the emulator's service account named `name`.
pub async fn client_as(
    emu: &Emulator,
    config: &Config,
    name: &str,
) -> Arc<dyn sheetq::sheets::Sheets> {
    sheetq::setup::connect(
        config,
        Some(Credentials::KeyJson(emu.credentials_json_for(name))),
        false,
    )
    .await
    .unwrap_or_else(|e| panic!("cannot connect to the emulator as {name}: {e:#}"))
}

/// Daemons running in this process against one emulator, each with its own state dir.
pub struct Fleet {
    pub shutdown: CancellationToken,
    pub configs: Vec<Config>,
    handles: Vec<tokio::task::JoinHandle<Result<RunReport, DaemonError>>>,
    _state: tempfile::TempDir,
}

impl Fleet {
    /// Starts one daemon per worker id with the same overrides and extra commands.
    pub async fn start(
        emu: &Emulator,
        workers: &[&str],
        overrides: &[(&str, &str)],
        commands: &str,
    ) -> Fleet {
        Self::start_with(emu, workers, overrides, commands, false).await
    }

    /// Like [`Fleet::start`], each daemon calling the API as a service account of its own,
    /// named after its worker id ([`Emulator::account`]): one of them can be cut off
    /// (`FaultRule::cut_off`) while the others go on. `{worker}` in `commands` becomes each
    /// daemon's worker id.
    pub async fn start_on_own_accounts(
        emu: &Emulator,
        workers: &[&str],
        overrides: &[(&str, &str)],
        commands: &str,
    ) -> Fleet {
        Self::start_with(emu, workers, overrides, commands, true).await
    }

    async fn start_with(
        emu: &Emulator,
        workers: &[&str],
        overrides: &[(&str, &str)],
        commands: &str,
        own_accounts: bool,
    ) -> Fleet {
        assert!(
            workers.len() < CLIENTS_PER_ACCOUNT as usize,
            "{} daemons and the test's client are more than the {CLIENTS_PER_ACCOUNT} clients the quota is shared by",
            workers.len()
        );
        let state = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let shutdown = CancellationToken::new();
        let mut configs = Vec::new();
        let mut handles = Vec::new();
        for w in workers {
            let commands = commands.replace("{worker}", w);
            let config = daemon_config(emu, w, &state.path().join(w), overrides, &commands);
            let registry = sheetq::setup::registry(&config)
                .unwrap_or_else(|e| panic!("commands of the test config: {e:#}"));
            let sheets = if own_accounts {
                client_as(emu, &config, w).await
            } else {
                client(emu, &config).await
            };
            handles.push(tokio::spawn(sheetq::daemon::run(
                sheets,
                config.clone(),
                registry,
                shutdown.clone(),
            )));
            configs.push(config);
        }
        Fleet {
            shutdown,
            configs,
            handles,
            _state: state,
        }
    }

    /// Cancels every daemon and waits for each to drain; panics if one failed, or if the
    /// emulator refused any request for its quota.
    pub async fn stop(self, emu: &Emulator) -> Vec<RunReport> {
        self.shutdown.cancel();
        let mut reports = Vec::new();
        for (h, c) in self.handles.into_iter().zip(&self.configs) {
            let r = tokio::time::timeout(Duration::from_secs(60), h)
                .await
                .unwrap_or_else(|_| panic!("daemon {} did not stop within 60s", c.worker_id))
                .unwrap_or_else(|e| panic!("daemon {} panicked: {e}", c.worker_id))
                .unwrap_or_else(|e| panic!("daemon {} stopped with an error: {e}", c.worker_id));
            reports.push(r);
        }
        assert_no_quota_refusals(emu);
        reports
    }
}

/// Appends a `待機` row as `sheetq enqueue` does; returns its jobId.
pub async fn enqueue(
    sheets: &dyn sheetq::sheets::Sheets,
    config: &Config,
    target: &str,
    function: &str,
    command: &str,
    args_json: &str,
    requester: &str,
) -> String {
    let job = NewJob::pressed(target, function, command, args_json, requester);
    admin::enqueue(sheets, config, &job)
        .await
        .unwrap_or_else(|e| panic!("enqueue {target}/{function}: {e}"))
}

/// The queue as typed rows, read straight from the emulator's store.
pub fn queue_rows(emu: &Emulator) -> Vec<QueueRow> {
    sheet_rows(emu, "_ジョブキュー")
}

/// The queue of spreadsheet `id` (one of several the emulator holds), parsed by its header.
pub fn queue_rows_in(emu: &Emulator, id: &str) -> Vec<QueueRow> {
    let values = emu
        .values_in(id, "'_ジョブキュー'!A1:Z")
        .unwrap_or_else(|e| panic!("cannot read the queue of {id}: {e:?}"));
    let Some(header) = values.first() else {
        return Vec::new();
    };
    let columns = ColumnMap::from_header(header, &Default::default())
        .unwrap_or_else(|e| panic!("queue header of {id}: {e}"));
    queue::parse_rows(&values[1..], 2, &columns, &Default::default(), TZ).rows
}

/// The rows of a sheet laid out like the queue (the queue, the archive), parsed by its header
/// wherever its columns stand.
pub fn sheet_rows(emu: &Emulator, title: &str) -> Vec<QueueRow> {
    let values = sheet_values(emu, title);
    let Some(header) = values.first().cloned() else {
        return Vec::new();
    };
    let columns = ColumnMap::from_header(&header, &Default::default())
        .unwrap_or_else(|e| panic!("queue header: {e}"));
    let data = values.get(1..).unwrap_or(&[]);
    queue::parse_rows(data, 2, &columns, &Default::default(), TZ).rows
}

/// Every cell of sheet `title`, row 1 on, across all its columns (none when the sheet does
/// not exist yet).
pub fn sheet_values(emu: &Emulator, title: &str) -> Vec<Vec<Json>> {
    let Some(columns) = emu
        .with_spreadsheet(|ss| ss.sheet_by_title(title).map(|s| s.column_count))
        .ok()
        .flatten()
    else {
        return Vec::new();
    };
    let last = sheetq::a1::column_letters(columns.saturating_sub(1));
    emu.values(&format!("'{title}'!A1:{last}"))
        .unwrap_or_else(|e| panic!("cannot read '{title}': {e:?}"))
}

/// A finished `sleep` job's queue row (16 columns, target `T`) in `state`, which ended
/// `days_ago` days ago; its message is its jobId, as the tests' recording command writes.
pub fn finished_row(job_id: &str, state: &str, days_ago: i64) -> Json {
    let at = sheetq::sheet_time::instant_to_serial(
        chrono::Utc::now() - chrono::Duration::days(days_ago),
        TZ,
    );
    serde_json::json!([
        job_id,
        at,
        "",
        "T",
        "",
        "T",
        "f",
        "sleep",
        "{}",
        "",
        state,
        at,
        at,
        "",
        job_id,
        "old/0 #00000000"
    ])
}

/// Writes `rows` into the queue from row 2 on.
pub fn seed_queue(emu: &Emulator, rows: Vec<Json>) {
    emu.set_values("'_ジョブキュー'!A2", Json::Array(rows), false)
        .unwrap_or_else(|e| panic!("cannot seed the queue: {e:?}"));
}

/// The method of a daemon's poll (one read a poll).
pub const POLL_METHOD: &str = "spreadsheets.values.batchGetByDataFilter";

/// Waits until the daemons have polled `n` times between them (started: the first polls
/// read, and the heartbeat is written).
pub async fn wait_polls(emu: &Emulator, n: u64) {
    wait_for(
        "the daemons to start polling",
        Duration::from_secs(30),
        || (emu.count(POLL_METHOD) >= n).then_some(()),
        || format!("{:?}", emu.counters()),
    )
    .await;
}

/// The queue row holding `job_id`; panics naming it when there is none.
pub fn row_of<'a>(rows: &'a [QueueRow], job_id: &str) -> &'a QueueRow {
    rows.iter()
        .find(|r| r.job_id == job_id)
        .unwrap_or_else(|| panic!("no queue row has jobId {job_id}; queue: {rows:#?}"))
}

/// Whether a row is in a final state.
pub fn is_finished(r: &QueueRow) -> bool {
    r.state.is_final()
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after `within` saying what
/// was awaited and what `describe` shows of the state then.
pub async fn wait_for<T>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> Option<T>,
    describe: impl FnOnce() -> String,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "timed out after {within:?} waiting for {what}; state then:\n{}",
                describe()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until every row of `job_ids` is finished; returns the queue then.
pub async fn wait_finished(emu: &Emulator, job_ids: &[String], within: Duration) -> Vec<QueueRow> {
    wait_finished_or(emu, job_ids, within, String::new).await
}

/// [`wait_finished`], adding what `more` says (a daemon's log) to the queue on a timeout.
pub async fn wait_finished_or(
    emu: &Emulator,
    job_ids: &[String],
    within: Duration,
    more: impl FnOnce() -> String,
) -> Vec<QueueRow> {
    wait_for(
        &format!("{} jobs to finish", job_ids.len()),
        within,
        || {
            let rows = queue_rows(emu);
            job_ids
                .iter()
                .all(|id| rows.iter().any(|r| &r.job_id == id && is_finished(r)))
                .then_some(rows)
        },
        || format!("{}{}", describe_queue(&queue_rows(emu)), more()),
    )
    .await
}

/// One line per queue row: row, jobId, state, target, worker, start, message.
pub fn describe_queue(rows: &[QueueRow]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "{:>4} {} {:?} {} [{}] {:?} {:?}\n",
                r.row, r.job_id, r.state, r.target, r.worker, r.started_at, r.message
            )
        })
        .collect()
}

/// Waits until the queue holds `n` rows, all finished; returns them.
pub async fn wait_queue_finished(
    emu: &Emulator,
    n: usize,
    what: &str,
    within: Duration,
) -> Vec<QueueRow> {
    wait_for(
        what,
        within,
        || {
            let rows = queue_rows(emu);
            (rows.len() == n && rows.iter().all(is_finished)).then_some(rows)
        },
        || describe_queue(&queue_rows(emu)),
    )
    .await
}

/// Writes `values` at `range` as a person would (the owner, RAW), panicking with the range
/// when the emulator refuses.
pub fn set_cells(emu: &Emulator, range: &str, values: serde_json::Value) {
    emu.set_values(range, values, false)
        .unwrap_or_else(|e| panic!("cannot write {range}: {e:?}"));
}

/// A panel row's A..F cells (▶, 機能, 状態, 結果, 更新日時, ■) as text, by sheet title and row.
pub fn panel_row(emu: &Emulator, title: &str, row: u32) -> Vec<String> {
    let values = emu
        .values(&format!("'{title}'!A{row}:F{row}"))
        .unwrap_or_else(|e| panic!("cannot read panel {title} row {row}: {e:?}"));
    let mut cells: Vec<String> = values
        .first()
        .map(|r| r.iter().map(queue::cell_text).collect())
        .unwrap_or_default();
    cells.resize(6, String::new());
    cells
}

/// `GET path` on 127.0.0.1:`port`: the status code and the body; 0 and nothing when nothing
/// answers.
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply).await;
    let code = reply
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = reply
        .split_once("\r\n\r\n")
        .map_or_else(String::new, |(_, b)| b.to_string());
    (code, body)
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// How a link to a row of the demo spreadsheet's `_ジョブログ` starts (the row number follows).
pub fn log_link_prefix(emu: &Emulator) -> String {
    format!(
        "https://docs.google.com/spreadsheets/d/{}/edit#gid={}&range=A",
        emu.spreadsheet_id(),
        sheetq::emulator::seed::LOG_SHEET_ID
    )
}

/// What a finished `sheetq` said, for a failure message: its exit code, stdout and stderr.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `sheetq <args> --config <config>` run to its end off the test's runtime (a one-shot
/// command: `cancel`, `logs`).
pub async fn run_sheetq(config: &std::path::Path, args: &[&str]) -> std::process::Output {
    let config = config.to_path_buf();
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"))
            .args(&args)
            .arg("--config")
            .arg(&config)
            .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
            .env("SHEETQ_LOG", "warn")
            .output()
            .unwrap_or_else(|e| panic!("run sheetq {args:?}: {e}"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits (up to `within`) until every job of `jobs` is final with its メッセージ written (a
/// result's 終了日時/メッセージ may follow its state in a later write); returns the queue then,
/// or panics with `show()`.
pub async fn wait_ended_with_messages(
    emu: &Emulator,
    jobs: &[&str],
    within: Duration,
    show: impl FnOnce() -> String,
) -> Vec<QueueRow> {
    wait_for(
        &format!("{jobs:?} to end with their messages"),
        within,
        || {
            let rows = queue_rows(emu);
            jobs.iter()
                .all(|id| {
                    rows.iter()
                        .any(|r| r.job_id == *id && r.state.is_final() && !r.message.is_empty())
                })
                .then_some(rows)
        },
        show,
    )
    .await
}

/// Debian's libfaketime (package `libfaketime`), multithreaded flavour.
pub fn faketime_library() -> Option<std::path::PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
        "/usr/lib/faketime/libfaketimeMT.so.1",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists())
}

/// A child process, killed when dropped.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The body of `GET path` on 127.0.0.1:`port` (empty when nothing answers).
pub async fn body_of(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply).await;
    reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

/// `LD_PRELOAD` libfaketime into `cmd` so that its wall clock reads `offset_secs` ahead of
/// the real one (its monotonic clock is left alone), in time zone `tz`.
pub fn fake_clock(
    cmd: &mut std::process::Command,
    lib: &std::path::Path,
    offset_secs: i64,
    tz: &str,
) {
    cmd.env("LD_PRELOAD", lib)
        .env("FAKETIME", format!("{offset_secs:+}"))
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("TZ", tz);
}

/// The emulator binary on a free port of 127.0.0.1, serving spreadsheet `id` in time zone
/// `tz`, with its clock faked by `offset_secs` (see [`fake_clock`]), logging into `dir`;
/// returns it and its port once it answers.
pub async fn start_faked_emulator(
    lib: &std::path::Path,
    offset_secs: i64,
    id: &str,
    tz: &str,
    dir: &std::path::Path,
) -> (Child, u16) {
    let port = free_port();
    let mut emulator = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"));
    emulator.args([
        "emulator",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--spreadsheet-id",
        id,
        "--time-zone",
        tz,
    ]);
    fake_clock(&mut emulator, lib, offset_secs, tz);
    let log = std::fs::File::create(dir.join("emulator.log")).unwrap_or_else(|e| panic!("{e}"));
    let child = Child(
        emulator
            .stdout(log.try_clone().unwrap_or_else(|e| panic!("{e}")))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the emulator: {e}")),
    );
    for _ in 0..100 {
        if http_get(port, "/_emulator/credentials").await.0 == 200 {
            return (child, port);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the emulator did not start");
}

/// The key of service account `account` of the emulator on `port`, written (mode 600) to
/// `dir/<account>.key.json`.
pub async fn emulator_key(port: u16, account: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join(format!("{account}.key.json"));
    let key = body_of(port, &format!("/_emulator/credentials?account={account}")).await;
    assert!(
        key.contains("private_key"),
        "no credentials for {account}: {key}"
    );
    std::fs::write(&path, key).unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .unwrap_or_else(|e| panic!("{e}"));
    path
}

/// A waiting queue row A..Q: job `job` of `function` on `target`'s panel, running
/// `command`, asked by `requester`.
pub fn waiting_row(
    job: &str,
    target: &str,
    function: &str,
    command: &str,
    requester: &str,
) -> Json {
    serde_json::json!([
        job,
        sheetq::sheet_time::instant_to_serial(chrono::Utc::now(), TZ),
        requester,
        target,
        "",
        target,
        function,
        command,
        "{}",
        "",
        "待機",
        "",
        "",
        "",
        "",
        "",
        ""
    ])
}

/// Waits until queue row `job` satisfies `seen` (read from the emulator), failing with `what`
/// and `describe` after `within`.
pub async fn wait_row(
    emu: &Emulator,
    job: &str,
    what: &str,
    within: Duration,
    seen: impl Fn(&QueueRow) -> bool,
    describe: impl FnOnce() -> String,
) {
    wait_for(
        what,
        within,
        || {
            queue_rows(emu)
                .iter()
                .any(|r| r.job_id == job && seen(r))
                .then_some(())
        },
        describe,
    )
    .await
}

/// Lines in file `path` (0 when it does not exist).
pub fn lines_in(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

/// The value of the sample `name{labels}` in a Prometheus text, if shown.
pub fn sample(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(name_and_labels)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// The queue and a daemon's log `log`, for a failure message.
pub fn queue_and_log<'a>(emu: &'a Emulator, log: &'a std::path::Path) -> impl Fn() -> String + 'a {
    move || {
        format!(
            "{}\nlog:\n{}",
            describe_queue(&queue_rows(emu)),
            std::fs::read_to_string(log).unwrap_or_default()
        )
    }
}

/// `values.append` of `rows` under the table of `range` (RAW, new rows inserted) by the
/// person `email`, with a token of their own, as an installable trigger running as them
/// appends: the status and Google's reply.
pub async fn person_appends(emu: &Emulator, email: &str, range: &str, rows: Json) -> (u16, Json) {
    let token = emu.person_token(email);
    let path = format!(
        "v4/spreadsheets/{}/values/{}:append?valueInputOption=RAW&insertDataOption=INSERT_ROWS",
        emu.spreadsheet_id(),
        percent_encoding::utf8_percent_encode(range, percent_encoding::NON_ALPHANUMERIC)
    );
    raw(
        emu,
        "POST",
        &path,
        Some(serde_json::json!({ "values": rows })),
        Some(&token),
    )
    .await
}

/// `spreadsheets.batchUpdate` of `requests` as the person `email`, with their own token.
pub async fn person_batch(emu: &Emulator, email: &str, requests: Json) -> (u16, Json) {
    let token = emu.person_token(email);
    let path = format!("v4/spreadsheets/{}:batchUpdate", emu.spreadsheet_id());
    raw(
        emu,
        "POST",
        &path,
        Some(serde_json::json!({ "requests": requests })),
        Some(&token),
    )
    .await
}
