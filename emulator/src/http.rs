//! The HTTP face of the emulator: URL routing exactly as `google-sheets4` builds URLs
//! (`v4/spreadsheets/{spreadsheetId}/values/{range}:append`, ...), bearer-token checks,
//! fault injection, the quota (per user, per project), the request log, the `/token` endpoint and the
//! `/_emulator/...` admin endpoints; plus the accept loop that can drop a connection
//! without a reply.
//!
//! Every API request takes the store lock once and does all its work under it, so
//! concurrent requests are serialised, as sheetq assumes Google does per spreadsheet.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use percent_encoding::percent_decode_str;
use serde_json::{json, Value as Json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::admin;
use super::api::{self, Major};
use super::batch;
use super::by_filter;
use super::control::{Fault, RequestRecord};
use super::data_filter;
use super::deviation::{Deviation, Rules};
use super::error::ApiError;
use super::fields;
use super::lookup;
use super::metadata::{self, Seer};
use super::shared::{json_response, Access, Shared};
use super::store::{self, Store};
use super::values::{Input, Render};

/// Marks a response whose connection must be closed instead of answered.
#[derive(Clone, Copy)]
struct DropConnection;

#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for Dropped {}

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(super::web::page))
        .route("/_emulator/web/app.js", get(super::web::script))
        .route("/_emulator/web/app.css", get(super::web::style))
        .route("/_emulator/web/view", get(super::web::view))
        .route("/_emulator/web/edit", post(super::web::edit))
        .route("/_emulator/web/type", post(super::web::type_in))
        .route("/token", post(token))
        .route("/_emulator/requests", get(admin::requests))
        .route(
            "/_emulator/faults",
            get(admin::faults)
                .post(admin::add_faults)
                .delete(admin::clear_faults),
        )
        .route("/_emulator/quota", get(admin::quota).post(admin::set_quota))
        .route("/_emulator/reset", post(admin::reset))
        .route("/_emulator/credentials", get(admin::credentials))
        .route("/_emulator/people/token", post(admin::person_token))
        .fallback(api_call)
        // Google recommends payloads under 2 MB but accepts more; tests write large sheets.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// Serves `app` on `listener` until `cancel` fires. Hand-rolled (rather than
/// `axum::serve`) so that a fault can close a connection without any reply: when a response
/// carries [`DropConnection`], the service fails and hyper closes the connection.
pub async fn run(listener: TcpListener, app: Router, cancel: CancellationToken) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "emulator accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let app = app.clone();
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let app = app.clone();
                    async move {
                        let resp = match app.oneshot(req).await {
                            Ok(r) => r,
                            Err(never) => match never {},
                        };
                        if resp.extensions().get::<DropConnection>().is_some() {
                            Err(Dropped)
                        } else {
                            Ok::<_, Dropped>(resp)
                        }
                    }
                });
                conns.spawn(async move {
                    let builder = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    let _ = builder
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

/// A routed API call. Ids and ranges are percent-decoded.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    Create,
    Get(String),
    BatchUpdate(String),
    ValuesGet(String, String),
    ValuesUpdate(String, String),
    ValuesAppend(String, String),
    ValuesClear(String, String),
    ValuesBatchGet(String),
    ValuesBatchUpdate(String),
    ValuesBatchClear(String),
    ValuesBatchGetByDataFilter(String),
    ValuesBatchUpdateByDataFilter(String),
    ValuesBatchClearByDataFilter(String),
    /// Spreadsheet id and the metadata id as it appeared in the path.
    MetadataGet(String, String),
    MetadataSearch(String),
}

impl Call {
    /// The spreadsheet the call is about (none for `spreadsheets.create`).
    fn spreadsheet_id(&self) -> &str {
        match self {
            Call::Create => "",
            Call::Get(id)
            | Call::BatchUpdate(id)
            | Call::ValuesGet(id, _)
            | Call::ValuesUpdate(id, _)
            | Call::ValuesAppend(id, _)
            | Call::ValuesClear(id, _)
            | Call::ValuesBatchGet(id)
            | Call::ValuesBatchUpdate(id)
            | Call::ValuesBatchClear(id)
            | Call::ValuesBatchGetByDataFilter(id)
            | Call::ValuesBatchUpdateByDataFilter(id)
            | Call::ValuesBatchClearByDataFilter(id)
            | Call::MetadataGet(id, _)
            | Call::MetadataSearch(id) => id,
        }
    }

    fn method_id(&self) -> &'static str {
        match self {
            Call::Create => "spreadsheets.create",
            Call::Get(_) => "spreadsheets.get",
            Call::BatchUpdate(_) => "spreadsheets.batchUpdate",
            Call::ValuesGet(..) => "spreadsheets.values.get",
            Call::ValuesUpdate(..) => "spreadsheets.values.update",
            Call::ValuesAppend(..) => "spreadsheets.values.append",
            Call::ValuesClear(..) => "spreadsheets.values.clear",
            Call::ValuesBatchGet(_) => "spreadsheets.values.batchGet",
            Call::ValuesBatchUpdate(_) => "spreadsheets.values.batchUpdate",
            Call::ValuesBatchClear(_) => "spreadsheets.values.batchClear",
            Call::ValuesBatchGetByDataFilter(_) => "spreadsheets.values.batchGetByDataFilter",
            Call::ValuesBatchUpdateByDataFilter(_) => "spreadsheets.values.batchUpdateByDataFilter",
            Call::ValuesBatchClearByDataFilter(_) => "spreadsheets.values.batchClearByDataFilter",
            Call::MetadataGet(..) => "spreadsheets.developerMetadata.get",
            Call::MetadataSearch(_) => "spreadsheets.developerMetadata.search",
        }
    }

    /// Whether Google counts it against the write quota. Reads are the methods that change
    /// nothing, whatever their HTTP verb: `values.batchGetByDataFilter` and
    /// `developerMetadata.search` are POSTs but count as read requests
    /// (https://developers.google.com/sheets/api/limits: quotas are "read requests" and
    /// "write requests"; the emulator classes a method by what it does).
    fn is_write(&self) -> bool {
        !matches!(
            self,
            Call::Get(_)
                | Call::ValuesGet(..)
                | Call::ValuesBatchGet(_)
                | Call::ValuesBatchGetByDataFilter(_)
                | Call::MetadataGet(..)
                | Call::MetadataSearch(_)
        )
    }
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Maps method + raw path to a call, as the URL templates in `google-sheets4`'s `api.rs`.
fn route(method: &Method, path: &str) -> Option<Call> {
    let rest = path.strip_prefix("/v4/spreadsheets")?;
    if rest.is_empty() || rest == "/" {
        return (method == Method::POST).then_some(Call::Create);
    }
    let rest = rest.strip_prefix('/')?;
    let (head, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if tail.is_empty() {
        if let Some(id) = head.strip_suffix(":batchUpdate") {
            return (method == Method::POST).then(|| Call::BatchUpdate(decode(id)));
        }
        return (method == Method::GET).then(|| Call::Get(decode(head)));
    }
    let id = decode(head);
    match (method.clone(), tail) {
        (Method::GET, "/values:batchGet") => return Some(Call::ValuesBatchGet(id)),
        (Method::POST, "/values:batchUpdate") => return Some(Call::ValuesBatchUpdate(id)),
        (Method::POST, "/values:batchClear") => return Some(Call::ValuesBatchClear(id)),
        (Method::POST, "/values:batchGetByDataFilter") => {
            return Some(Call::ValuesBatchGetByDataFilter(id))
        }
        (Method::POST, "/values:batchUpdateByDataFilter") => {
            return Some(Call::ValuesBatchUpdateByDataFilter(id))
        }
        (Method::POST, "/values:batchClearByDataFilter") => {
            return Some(Call::ValuesBatchClearByDataFilter(id))
        }
        (Method::POST, "/developerMetadata:search") => return Some(Call::MetadataSearch(id)),
        _ => {}
    }
    if let Some(mid) = tail.strip_prefix("/developerMetadata/") {
        return (method == Method::GET && !mid.contains('/'))
            .then(|| Call::MetadataGet(id, decode(mid)));
    }
    let range = tail.strip_prefix("/values/")?;
    if let Some(r) = range.strip_suffix(":append") {
        return (method == Method::POST).then(|| Call::ValuesAppend(id, decode(r)));
    }
    if let Some(r) = range.strip_suffix(":clear") {
        return (method == Method::POST).then(|| Call::ValuesClear(id, decode(r)));
    }
    match *method {
        Method::GET => Some(Call::ValuesGet(id, decode(range))),
        Method::PUT => Some(Call::ValuesUpdate(id, decode(range))),
        _ => None,
    }
}

struct Query(Vec<(String, String)>);

impl Query {
    fn parse(uri: &Uri) -> Self {
        Query(
            form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn one(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn flag(&self, name: &str) -> bool {
        self.one(name) == Some("true")
    }

    fn render(&self, value: &str, date: &str) -> Result<Render, ApiError> {
        Render::parse(self.one(value), self.one(date))
    }
}

fn json_body(body: &[u8]) -> Result<Json, ApiError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("Invalid JSON payload received. {e}")))
}

/// The ranges a request names, for the request log.
fn ranges_of(call: &Call, q: &Query, body: &[u8]) -> Vec<String> {
    match call {
        Call::ValuesGet(_, r)
        | Call::ValuesUpdate(_, r)
        | Call::ValuesAppend(_, r)
        | Call::ValuesClear(_, r) => {
            vec![r.clone()]
        }
        Call::ValuesBatchGet(_) | Call::Get(_) => q.all("ranges"),
        Call::ValuesBatchUpdate(_) => json_body(body)
            .ok()
            .and_then(|b| b.get("data").cloned())
            .and_then(|d| d.as_array().cloned())
            .map(|d| {
                d.iter()
                    .filter_map(|vr| vr.get("range").and_then(Json::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        Call::ValuesBatchClear(_) => strings_at(body, "ranges"),
        Call::BatchUpdate(_) => strings_at(body, "responseRanges"),
        Call::ValuesBatchGetByDataFilter(_)
        | Call::ValuesBatchClearByDataFilter(_)
        | Call::MetadataSearch(_) => filters_at(body, "dataFilters", None),
        Call::ValuesBatchUpdateByDataFilter(_) => filters_at(body, "data", Some("dataFilter")),
        Call::MetadataGet(_, mid) => vec![format!("developerMetadata/{mid}")],
        Call::Create => Vec::new(),
    }
}

/// Descriptions of the data filters of a request body (`key[]`, or `key[].inner`), for the
/// request log: an A1 range as it is, other filters as their kind and JSON.
fn filters_at(body: &[u8], key: &str, inner: Option<&str>) -> Vec<String> {
    json_body(body)
        .ok()
        .and_then(|b| b.get(key).cloned())
        .and_then(|v| v.as_array().cloned())
        .map(|a| {
            a.iter()
                .filter_map(|item| match inner {
                    Some(k) => item.get(k),
                    None => Some(item),
                })
                .map(data_filter::describe)
                .collect()
        })
        .unwrap_or_default()
}

fn strings_at(body: &[u8], key: &str) -> Vec<String> {
    json_body(body)
        .ok()
        .and_then(|b| b.get(key).cloned())
        .and_then(|v| v.as_array().cloned())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A reply: JSON, or bytes already serialised (large reads skip the JSON tree).
enum Reply {
    Json(Json),
    Bytes(Vec<u8>),
}

/// Serialises a read view straight to bytes while the store is locked.
fn to_bytes<T: serde::Serialize>(view: &T) -> Result<Reply, ApiError> {
    serde_json::to_vec(view)
        .map(Reply::Bytes)
        .map_err(|e| ApiError::new(500, e.to_string()))
}

/// Runs a call of `user` against the store. Returns the reply and whether the store changed.
/// Reads are serialised to bytes directly unless a `fields` selection needs the JSON tree.
fn execute(
    store: &mut Store,
    call: &Call,
    q: &Query,
    body: &[u8],
    rules: &Rules,
    user: &str,
) -> Result<(Reply, bool), ApiError> {
    let direct = q.one("fields").is_none();
    if let (true, Call::ValuesGet(id, range)) = (direct, call) {
        let ss = store.get(id)?;
        let render = q.render("valueRenderOption", "dateTimeRenderOption")?;
        let major = Major::parse(q.one("majorDimension"))?;
        return Ok((
            to_bytes(&api::RangeView::new(ss, range, render, major)?)?,
            false,
        ));
    }
    if let (true, Call::ValuesBatchGet(id)) = (direct, call) {
        let ss = store.get(id)?;
        let render = q.render("valueRenderOption", "dateTimeRenderOption")?;
        let major = Major::parse(q.one("majorDimension"))?;
        let view = api::BatchGetView::new(ss, &q.all("ranges"), render, major)?;
        return Ok((to_bytes(&view)?, false));
    }
    execute_json(store, call, q, body, rules, user).map(|(j, changed)| (Reply::Json(j), changed))
}

fn execute_json(
    store: &mut Store,
    call: &Call,
    q: &Query,
    body: &[u8],
    rules: &Rules,
    user: &str,
) -> Result<(Json, bool), ApiError> {
    let major = || Major::parse(q.one("majorDimension"));
    let echo = |q: &Query| -> Result<Option<(Render, Major)>, ApiError> {
        Ok(if q.flag("includeValuesInResponse") {
            Some((
                q.render("responseValueRenderOption", "responseDateTimeRenderOption")?,
                Major::Rows,
            ))
        } else {
            None
        })
    };
    match call {
        Call::Create => {
            let id = store::fresh_spreadsheet_id();
            let reply = api::create(store, &json_body(body)?, id, user)?;
            Ok((reply, true))
        }
        Call::Get(id) => {
            let ss = store.get(id)?;
            let reply =
                api::spreadsheet_json(ss, &q.all("ranges"), q.flag("includeGridData"), user)?;
            Ok((reply, false))
        }
        Call::BatchUpdate(id) => {
            let req = batch::parse(body)?;
            let ss = store.get_mut(id)?;
            let reply = batch::run(ss, &req, rules, user)?;
            let changed = req.requests.as_ref().is_some_and(|r| !r.is_empty());
            Ok((reply, changed))
        }
        Call::ValuesGet(id, range) => {
            let ss = store.get(id)?;
            let render = q.render("valueRenderOption", "dateTimeRenderOption")?;
            Ok((api::read_range(ss, range, render, major()?)?, false))
        }
        Call::ValuesBatchGet(id) => {
            let ss = store.get(id)?;
            let render = q.render("valueRenderOption", "dateTimeRenderOption")?;
            Ok((
                api::batch_get(ss, &q.all("ranges"), render, major()?)?,
                false,
            ))
        }
        Call::ValuesUpdate(id, range) => {
            let ss = store.get_mut(id)?;
            let input = Input::parse(q.one("valueInputOption"))?;
            let reply = api::update(ss, range, &json_body(body)?, input, echo(q)?, user)?;
            Ok((reply, true))
        }
        Call::ValuesAppend(id, range) => {
            let ss = store.get_mut(id)?;
            let input = Input::parse(q.one("valueInputOption"))?;
            let reply = api::append(
                ss,
                range,
                &json_body(body)?,
                input,
                q.one("insertDataOption"),
                echo(q)?,
                rules.deviates(Deviation::AppendFromTop),
                user,
            )?;
            Ok((reply, true))
        }
        Call::ValuesBatchUpdate(id) => {
            let ss = store.get_mut(id)?;
            Ok((api::batch_update(ss, &json_body(body)?, user)?, true))
        }
        Call::ValuesClear(id, range) => {
            let ss = store.get_mut(id)?;
            let cleared = api::clear(ss, range, user)?;
            Ok((
                json!({ "spreadsheetId": id, "clearedRange": cleared }),
                true,
            ))
        }
        Call::ValuesBatchClear(id) => {
            let ss = store.get_mut(id)?;
            let ranges = strings_at(body, "ranges");
            Ok((api::batch_clear(ss, &ranges, user)?, true))
        }
        Call::ValuesBatchGetByDataFilter(id) => {
            let ss = store.get(id)?;
            Ok((by_filter::batch_get(ss, &json_body(body)?, user)?, false))
        }
        Call::ValuesBatchUpdateByDataFilter(id) => {
            let ss = store.get_mut(id)?;
            Ok((
                by_filter::batch_update(ss, &json_body(body)?, rules, user)?,
                true,
            ))
        }
        Call::ValuesBatchClearByDataFilter(id) => {
            let ss = store.get_mut(id)?;
            Ok((by_filter::batch_clear(ss, &json_body(body)?, user)?, true))
        }
        Call::MetadataGet(id, mid) => {
            let ss = store.get(id)?;
            // The path parameter is an int32; anything else is Google's parse error.
            let n: i32 = mid.parse().map_err(|_| {
                ApiError::invalid(format!(
                    "Invalid value at 'metadata_id' (TYPE_INT32), \"{mid}\""
                ))
            })?;
            Ok((metadata::get(ss, n, &Seer::caller(user))?, false))
        }
        Call::MetadataSearch(id) => {
            let ss = store.get(id)?;
            Ok((
                lookup::search(ss, &json_body(body)?, &Seer::caller(user))?,
                false,
            ))
        }
    }
}

fn bytes_response(bytes: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        Body::from(bytes),
    )
        .into_response()
}

fn dropped_response() -> Response {
    let mut resp = Response::new(Body::empty());
    resp.extensions_mut().insert(DropConnection);
    resp
}

struct Pending<'a> {
    shared: &'a Shared,
    method: String,
    spreadsheet: String,
    ranges: Vec<String>,
    bytes_in: usize,
    user: String,
    write: bool,
}

impl Pending<'_> {
    fn finish(self, result: Result<Json, ApiError>) -> Response {
        self.finish_reply(result.map(Reply::Json))
    }

    fn finish_reply(self, result: Result<Reply, ApiError>) -> Response {
        let (resp, status, len) = match result {
            Ok(Reply::Json(j)) => {
                let (resp, len) = json_response(200, &j);
                (resp, 200, len)
            }
            Ok(Reply::Bytes(bytes)) => {
                let len = bytes.len();
                (bytes_response(bytes), 200, len)
            }
            Err(e) => {
                let (resp, len) = json_response(e.code, &e.body());
                (resp, e.code, len)
            }
        };
        let mut resp = resp;
        if let Ok(date) = header::HeaderValue::from_str(&self.shared.date_header()) {
            resp.headers_mut().insert(header::DATE, date);
        }
        self.log(status, len);
        resp
    }

    fn drop_connection(self) -> Response {
        self.log(0, 0);
        dropped_response()
    }

    fn log(self, status: u16, bytes_out: usize) {
        self.shared.control().record(RequestRecord {
            method: self.method,
            spreadsheet: self.spreadsheet,
            ranges: self.ranges,
            user: self.user,
            write: self.write,
            status,
            bytes_in: self.bytes_in,
            bytes_out,
            at: chrono::Utc::now(),
        });
    }
}

async fn api_call(
    State(sh): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(call) = route(&method, uri.path()) else {
        let err = ApiError::new(
            404,
            format!("The requested URL {} was not found.", uri.path()),
        );
        let pending = Pending {
            shared: &sh,
            method: format!("unknown {method} {}", uri.path()),
            spreadsheet: String::new(),
            ranges: Vec::new(),
            bytes_in: body.len(),
            user: String::new(),
            write: false,
        };
        return pending.finish(Err(err));
    };
    let q = Query::parse(&uri);
    let mut pending = Pending {
        shared: &sh,
        method: call.method_id().to_string(),
        spreadsheet: call.spreadsheet_id().to_string(),
        ranges: ranges_of(&call, &q, &body),
        bytes_in: body.len(),
        user: String::new(),
        write: call.is_write(),
    };
    // A server that is down answers no one, whatever token is shown.
    // (The control's lock is let go before the drop is logged, which takes it again.)
    let network = sh.control().network_fault_for(call.method_id(), &body);
    if let Some(Fault::Drop) = network {
        return pending.drop_connection();
    }
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    // The user quota is counted for: the service account the token was issued to.
    let Some(user) = sh.auth.user(auth) else {
        return pending.finish(Err(ApiError::unauthenticated()));
    };
    pending.user = user.clone();
    // Google checks sharing before anything else: 403 PERMISSION_DENIED, "The caller does
    // not have permission", for an account the spreadsheet is not shared with and for a
    // viewer's write. The owner always has the file.
    match sh.access_to(call.spreadsheet_id(), &user) {
        Access::None => return pending.finish(Err(ApiError::for_status(403, call.is_write()))),
        Access::Reader | Access::Commenter
            if call.is_write() && !sh.rules.deviates(Deviation::ViewersWrite) =>
        {
            return pending.finish(Err(ApiError::for_status(403, true)))
        }
        Access::Reader | Access::Commenter | Access::Writer => {}
    }
    let fault = sh.control().fault_for(call.method_id(), Some(&user), &body);
    let mut drop_after = false;
    match fault {
        Some(Fault::Latency(d)) => tokio::time::sleep(d).await,
        Some(Fault::Status(code)) => {
            return pending.finish(Err(ApiError::for_status(code, call.is_write())))
        }
        Some(Fault::Drop) => return pending.drop_connection(),
        Some(Fault::DropAfterApply) => drop_after = true,
        Some(Fault::ApplyLater(d)) => {
            let late = Arc::clone(&sh);
            let rules = sh.rules;
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                let changed = {
                    let mut store = late.store();
                    matches!(
                        execute(&mut store, &call, &q, &body, &rules, &user),
                        Ok((_, true))
                    )
                };
                if changed {
                    late.mark_changed();
                }
            });
            return pending.drop_connection();
        }
        None => {}
    }
    // After auth and injected faults, before the request does anything: a refused request
    // is not counted and not applied.
    let taken = sh
        .control()
        .take_quota(&user, call.is_write(), Instant::now());
    if let Err(exceeded) = taken {
        return pending.finish(Err(ApiError::quota_exceeded(exceeded)));
    }
    if !sh.latency.is_zero() {
        tokio::time::sleep(sh.latency).await;
    }
    // A bad `fields` is refused before anything is applied.
    let selection = match q.one("fields").map(fields::Selection::parse).transpose() {
        Ok(s) => s,
        Err(e) => return pending.finish(Err(e)),
    };
    let result = match &call {
        Call::BatchUpdate(id) if sh.rules.deviates(Deviation::UnserialisedBatches) => {
            unserialised_batch(&sh, id, &body, &user).await
        }
        _ => {
            let mut store = sh.store();
            execute(&mut store, &call, &q, &body, &sh.rules, &user)
        }
    };
    let result = match result {
        Ok((mut reply, changed)) => {
            if changed {
                sh.mark_changed();
            }
            if let (Some(sel), Reply::Json(j)) = (&selection, &mut reply) {
                sel.apply(j);
            }
            Ok(reply)
        }
        Err(e) => Err(e),
    };
    if drop_after {
        return pending.drop_connection();
    }
    pending.finish_reply(result)
}

/// A `batchUpdate` under [`Deviation::UnserialisedBatches`]: applied to a copy taken on
/// arrival, stored a moment later over whatever happened meanwhile.
async fn unserialised_batch(
    sh: &Shared,
    id: &str,
    body: &[u8],
    user: &str,
) -> Result<(Reply, bool), ApiError> {
    let req = batch::parse(body)?;
    let mut copy = sh.store().get(id)?.clone();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reply = batch::run(&mut copy, &req, &sh.rules, user)?;
    sh.store().insert(copy);
    Ok((Reply::Json(reply), true))
}

async fn token(State(sh): State<Arc<Shared>>, body: Bytes) -> Response {
    let mut pending = Pending {
        shared: &sh,
        method: "oauth2.token".into(),
        spreadsheet: String::new(),
        ranges: Vec::new(),
        bytes_in: body.len(),
        user: String::new(),
        write: false,
    };
    let fault = sh.control().fault_for("oauth2.token", None, &body);
    match fault {
        Some(Fault::Latency(d)) => tokio::time::sleep(d).await,
        Some(Fault::Status(code)) => return pending.finish(Err(ApiError::for_status(code, false))),
        Some(Fault::Drop) | Some(Fault::DropAfterApply) | Some(Fault::ApplyLater(_)) => {
            return pending.drop_connection()
        }
        None => {}
    }
    let (status, reply) = match sh.auth.grant(&body) {
        Ok((reply, scopes)) => {
            pending.ranges = scopes;
            (200, reply)
        }
        Err(e) => (400, e.body()),
    };
    let (resp, len) = json_response(status, &reply);
    pending.log(status, len);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_google_sheets4_url_templates() {
        let id = "abc";
        let cases = [
            (Method::POST, "/v4/spreadsheets", Some(Call::Create)),
            (Method::GET, "/v4/spreadsheets/abc", Some(Call::Get(id.into()))),
            (Method::POST, "/v4/spreadsheets/abc:batchUpdate", Some(Call::BatchUpdate(id.into()))),
            (Method::GET, "/v4/spreadsheets/abc/values:batchGet", Some(Call::ValuesBatchGet(id.into()))),
            (
                Method::GET,
                "/v4/spreadsheets/abc/values/'_%E3%82%B8%E3%83%A7%E3%83%96%E3%82%AD%E3%83%A5%E3%83%BC'!A1:P",
                Some(Call::ValuesGet(id.into(), "'_ジョブキュー'!A1:P".into())),
            ),
            (
                Method::POST,
                "/v4/spreadsheets/abc/values/Sheet1!A:C:append",
                Some(Call::ValuesAppend(id.into(), "Sheet1!A:C".into())),
            ),
            (
                Method::POST,
                "/v4/spreadsheets/abc/values/'a%2Fb'!A1:clear",
                Some(Call::ValuesClear(id.into(), "'a/b'!A1".into())),
            ),
            (Method::PUT, "/v4/spreadsheets/abc/values/A1", Some(Call::ValuesUpdate(id.into(), "A1".into()))),
            (
                Method::POST,
                "/v4/spreadsheets/abc/values:batchGetByDataFilter",
                Some(Call::ValuesBatchGetByDataFilter(id.into())),
            ),
            (
                Method::POST,
                "/v4/spreadsheets/abc/values:batchUpdateByDataFilter",
                Some(Call::ValuesBatchUpdateByDataFilter(id.into())),
            ),
            (
                Method::POST,
                "/v4/spreadsheets/abc/values:batchClearByDataFilter",
                Some(Call::ValuesBatchClearByDataFilter(id.into())),
            ),
            (
                Method::GET,
                "/v4/spreadsheets/abc/developerMetadata/42",
                Some(Call::MetadataGet(id.into(), "42".into())),
            ),
            (
                Method::POST,
                "/v4/spreadsheets/abc/developerMetadata:search",
                Some(Call::MetadataSearch(id.into())),
            ),
            (Method::POST, "/v4/spreadsheets/abc/developerMetadata/42", None),
            (Method::DELETE, "/v4/spreadsheets/abc", None),
            (Method::GET, "/v3/spreadsheets/abc", None),
        ];
        for (m, path, want) in cases {
            assert_eq!(route(&m, path), want, "{m} {path}");
        }
    }

    #[test]
    fn reads_by_data_filter_and_metadata_lookups_count_as_reads() {
        let id = String::from("abc");
        let reads = [
            Call::ValuesBatchGetByDataFilter(id.clone()),
            Call::MetadataGet(id.clone(), "1".into()),
            Call::MetadataSearch(id.clone()),
        ];
        for c in reads {
            assert!(!c.is_write(), "{} must count as a read", c.method_id());
        }
        let writes = [
            Call::ValuesBatchUpdateByDataFilter(id.clone()),
            Call::ValuesBatchClearByDataFilter(id.clone()),
            Call::BatchUpdate(id),
        ];
        for c in writes {
            assert!(c.is_write(), "{} must count as a write", c.method_id());
        }
    }
}
