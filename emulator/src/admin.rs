//! The `/_emulator/...` admin endpoints: the request log and counters, the fault plan, the
//! quota, a reset, the credentials file of this emulator, and a person's token. For people
//! and scripts; tests use the `Emulator` handle instead.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value as Json};

use super::auth::token_reply;
use super::control::FaultRule;
use super::error::ApiError;
use super::people;
use super::quota::Quota;
use super::shared::{json_response, Shared};

pub async fn requests(State(sh): State<Arc<Shared>>) -> Response {
    let c = sh.control();
    json_response(200, &json!({ "requests": c.log, "counters": c.counters })).0
}

pub async fn faults(State(sh): State<Arc<Shared>>) -> Response {
    json_response(200, &json!({ "faults": sh.control().faults })).0
}

/// POST a rule or an array of rules; they are appended to the plan.
pub async fn add_faults(State(sh): State<Arc<Shared>>, body: Bytes) -> Response {
    let rules: Result<Vec<FaultRule>, _> = serde_json::from_slice::<Vec<FaultRule>>(&body)
        .or_else(|_| serde_json::from_slice::<FaultRule>(&body).map(|r| vec![r]));
    match rules {
        Ok(rules) => {
            let mut c = sh.control();
            c.faults.extend(rules);
            json_response(200, &json!({ "faults": c.faults })).0
        }
        Err(e) => {
            json_response(
                400,
                &ApiError::invalid(format!("bad fault rule: {e}")).body(),
            )
            .0
        }
    }
}

pub async fn clear_faults(State(sh): State<Arc<Shared>>) -> Response {
    sh.control().faults.clear();
    json_response(200, &json!({ "faults": [] })).0
}

/// The enforced quota: `{"quota": {"perUser": {"read": 60, "write": 60}, "perProject":
/// {...}}}`, `{"quota": null}` when off.
pub async fn quota(State(sh): State<Arc<Shared>>) -> Response {
    json_response(200, &json!({ "quota": sh.control().quota() })).0
}

/// POST `{"quota": {"perUser": {"read": 600, "write": 600}, "perProject": {"read": 3000,
/// "write": 3000}}}` to set the limits, `{"quota": null}` to turn them off. The windows start
/// empty.
pub async fn set_quota(State(sh): State<Arc<Shared>>, body: Bytes) -> Response {
    let parsed = serde_json::from_slice::<Json>(&body)
        .map_err(|e| e.to_string())
        .and_then(|v| match v.get("quota") {
            None => Err("the \"quota\" key is missing".to_string()),
            Some(q) => {
                serde_json::from_value::<Option<Quota>>(q.clone()).map_err(|e| e.to_string())
            }
        });
    match parsed {
        Ok(quota) => {
            sh.control().set_quota(quota);
            json_response(200, &json!({ "quota": quota })).0
        }
        Err(e) => {
            let msg = format!(
                "bad quota: {e}; expected {{\"quota\": {{\"perUser\": {{\"read\": 60, \"write\": 60}}, \"perProject\": {{\"read\": 300, \"write\": 300}}}}}} or {{\"quota\": null}}"
            );
            json_response(400, &ApiError::invalid(msg).body()).0
        }
    }
}

/// Clears the request log, counters, fault plan and the quota's windows (not the limits, nor
/// the spreadsheets).
pub async fn reset(State(sh): State<Arc<Shared>>) -> Response {
    sh.control().reset();
    json_response(200, &json!({})).0
}

/// `?account=NAME` (or a whole service-account address) of `/_emulator/credentials`.
#[derive(Debug, serde::Deserialize)]
pub struct CredentialsQuery {
    account: Option<String>,
}

/// The service-account credentials file for this emulator, to save and point sheetq at;
/// `?account=NAME` gives another service account of its project (`NAME@…`), with a quota of
/// its own, as `Emulator::credentials_json_for` does; `?account=NAME@PROJECT.iam.gserviceaccount.com`
/// a service account of another developer project (which does not see the `PROJECT`
/// developer metadata of this one: `metadata::Seer`). 400 for an address that is not a
/// service account's.
pub async fn credentials(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<CredentialsQuery>,
) -> Response {
    let base = sh.base_url.lock().map(|b| b.clone()).unwrap_or_default();
    let creds = match q
        .account
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        Some(email) if email.contains('@') => {
            if !people::is_service_account(email) {
                let why = format!(
                    "{email} is not a service account's address \
                     (NAME@PROJECT.iam.gserviceaccount.com): a person signs in with a \
                     person's token (POST /_emulator/people/token)"
                );
                return json_response(400, &ApiError::invalid(why).body()).0;
            }
            let email = email.to_ascii_lowercase();
            sh.auth.add_account(&email);
            super::auth::credentials_json_for(&base, &email)
        }
        Some(name) => {
            let email = super::Emulator::account(name);
            sh.auth.add_account(&email);
            super::auth::credentials_json_for(&base, &email)
        }
        None => super::auth::credentials_json(&base),
    };
    ([(header::CONTENT_TYPE, "application/json")], creds).into_response()
}

/// `POST /_emulator/people/token` with `{"email": "alice@example.com"}`: a bearer token for
/// that person, in the token endpoint's reply shape (`access_token`, `token_type`,
/// `expires_in`). Sheets API calls with it are the person's own: their quota, their
/// standing before protected ranges. 400 for a body without a person's address.
pub async fn person_token(State(sh): State<Arc<Shared>>, body: Bytes) -> Response {
    let email = serde_json::from_slice::<Json>(&body)
        .map_err(|e| {
            format!("the body is not JSON ({e}); send {{\"email\": \"alice@example.com\"}}")
        })
        .and_then(|v| match v.get("email") {
            Some(Json::String(e)) => people::person_email(e),
            _ => Err(
                "the body has no \"email\" string; send {\"email\": \"alice@example.com\"}".into(),
            ),
        });
    match email {
        Ok(email) => json_response(200, &token_reply(&sh.auth.issue(&email))).0,
        Err(e) => json_response(400, &ApiError::invalid(e).body()).0,
    }
}
