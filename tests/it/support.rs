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
use sheetq::emulator::{Emulator, EmulatorOptions, Seed};

/// The hub type the tests use.
pub type Hub = Sheets<hyper_rustls::HttpsConnector<HttpConnector>>;

/// The scope every call asks for (DESIGN §8: never the broad drive scopes).
pub const SCOPE: Scope = Scope::Spreadsheet;

/// Starts an emulator seeded with the demo spreadsheet. Stops when dropped.
pub async fn start_emulator() -> Emulator {
    start_with(EmulatorOptions::default()).await
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

/// A `google-sheets4` hub pointed at `emu` (`base_url`/`root_url`), authenticated with the
/// emulator's service-account credentials through `yup-oauth2`.
pub async fn hub(emu: &Emulator) -> Hub {
    let key = yup_oauth2::parse_service_account_key(emu.credentials_json()).unwrap_or_else(|e| {
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
