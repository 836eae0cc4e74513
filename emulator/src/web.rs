//! The emulator's web view: a page at `/` that shows the spreadsheet the way Google Sheets
//! displays it (tabs, a grid with column letters and row numbers, checkboxes, formatted
//! dates and numbers, frozen rows), follows changes live, and lets a person tick boxes, edit
//! cells, sort, insert and delete rows, beside the request log and each account's requests
//! per minute against the quota.
//!
//! - `GET /`, `/_emulator/web/app.js`, `/_emulator/web/app.css`: the page, served from the
//!   binary (no build step, no framework).
//! - `GET /_emulator/web/view?spreadsheet=ID&sheet=ID&after=V&as=EMAIL`: the view of one
//!   sheet of one spreadsheet (the first one the emulator made when absent or unknown) as
//!   JSON, with the list of every spreadsheet it holds and the blocks protected against the
//!   person `as` names (the owner, who may edit everything, when absent). With `after`, it answers when the store's version
//!   passes `V`, or after a second anyway (so the request log and rates stay current too): a
//!   long poll, the page's live channel.
//! - `POST /_emulator/web/edit?spreadsheet=ID` with `{"requests": [...]}`: a person's edit
//!   (tick, sort, insert, delete), as `spreadsheets.batchUpdate` requests applied through the
//!   same atomic path as the API (`batch::run`).
//! - `POST /_emulator/web/type?spreadsheet=ID` with `{"sheet": ID, "row": R, "col": C,
//!   "text": "..."}`: a person typing into a cell, parsed as the Sheets UI parses typing
//!   (`values.update` with `USER_ENTERED`: formulas, numbers, percentages, dates, a leading
//!   `'` for text).
//!
//! Both take `&as=EMAIL`, the person making the edit (the page lets one pick: the owner, or
//! another person); without it, the spreadsheet's owner. The spreadsheet's sharing applies
//! to them as to an API call (403 for a person it is not shared with, or a viewer). Both are
//! recorded in the request log as `person.edit` by that person's address and count against
//! no account's quota, as at Google. They accept only JSON sent by the page itself
//! (`Content-Type: application/json`, and an `Origin`, when sent, of the emulator's own
//! address), so another web page open in the same browser cannot edit the sheet.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use super::api;
use super::batch;
use super::control::RequestRecord;
use super::error::ApiError;
use super::people;
use super::protection;
use super::shared::Shared;
use super::store::Spreadsheet;
use super::values::{self, DateRender, Input, Render, ValueRender};

/// The method a person's edits are logged as.
pub const PERSON_EDIT: &str = "person.edit";
/// Rows of one sheet the view sends at most.
const MAX_ROWS: u32 = 1000;
/// Requests of the log the view sends (the newest).
const LOG_TAIL: usize = 40;
/// How long a long poll waits for a change before it answers anyway.
const LONG_POLL: Duration = Duration::from_secs(1);

pub async fn page() -> Response {
    asset("text/html; charset=utf-8", include_str!("web/index.html"))
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", include_str!("web/app.js"))
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("web/app.css"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
pub struct ViewQuery {
    /// Spreadsheet id; the first one the emulator made when absent or gone.
    spreadsheet: Option<String>,
    /// Sheet id; the first visible sheet when absent or gone.
    sheet: Option<i32>,
    /// Answer when the version passes this one (or after a second).
    after: Option<u64>,
    /// The person looking: the blocks protected against them are marked.
    #[serde(rename = "as")]
    person: Option<String>,
    /// Leave out of the request log what changes nothing: reads that succeeded (a daemon's
    /// idle polls) and token fetches, so that a person's edit and the writes stay in view.
    #[serde(default)]
    quiet: bool,
}

/// One cell as the grid shows it.
#[derive(Debug, Serialize, PartialEq)]
struct ViewCell {
    /// The displayed text (Google's formatted value).
    t: String,
    /// A checkbox, ticked or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    b: Option<bool>,
    /// Numbers and dates are right-aligned, as in Sheets.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    n: bool,
    /// What the cell editor starts with when it differs from `t`: a formula's text.
    #[serde(skip_serializing_if = "Option::is_none")]
    e: Option<String>,
    /// The sheet a `=HYPERLINK("#gid=…", …)` cell links to: clicking it opens that tab.
    #[serde(skip_serializing_if = "Option::is_none")]
    g: Option<i32>,
    /// The web address another `HYPERLINK` cell leads to (http or https only), as Sheets
    /// makes the cell a link to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    u: Option<String>,
    /// A dropdown's choices (a `ONE_OF_LIST` or `ONE_OF_RANGE` rule shown as a list, as
    /// Sheets draws a chip with an arrow): picking one types it into the cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    o: Option<Vec<String>>,
}

/// The choices of a cell's dropdown: the values of a `ONE_OF_LIST` rule, or the shown values
/// of a `ONE_OF_RANGE` rule's range (blank ones left out, at most 500); `None` for any other
/// rule, or a range that does not resolve.
fn dropdown(ss: &Spreadsheet, rule: &Json) -> Option<Vec<String>> {
    if rule.pointer("/showCustomUi").and_then(Json::as_bool) != Some(true) {
        return None;
    }
    let values: Vec<&str> = rule
        .pointer("/condition/values")
        .and_then(Json::as_array)
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.get("userEnteredValue").and_then(Json::as_str))
                .collect()
        })
        .unwrap_or_default();
    match rule.pointer("/condition/type").and_then(Json::as_str)? {
        "ONE_OF_LIST" => Some(values.into_iter().map(str::to_string).collect()),
        "ONE_OF_RANGE" => {
            let range = values.first()?.strip_prefix('=')?;
            let b = ss.resolve_read(range).ok()?;
            let render = Render {
                value: ValueRender::Formatted,
                date: DateRender::FormattedString,
            };
            Some(
                (b.r0..b.r1)
                    .flat_map(|r| (b.c0..b.c1).map(move |c| (r, c)))
                    .filter_map(|(r, c)| values::render(ss, b.sheet, r, c, render))
                    .map(|v| match v {
                        Json::String(s) => s,
                        other => other.to_string(),
                    })
                    .filter(|t| !t.trim().is_empty())
                    .take(500)
                    .collect(),
            )
        }
        _ => None,
    }
}

/// Whether a logged request may have changed something, or failed: a write, a person's
/// edit, or any request not answered 200. A read that succeeded and a token fetch change
/// nothing, and a daemon sends one every poll.
fn changes_something(r: &RequestRecord) -> bool {
    r.write || r.status != 200 || r.method == "person.edit"
}

/// The sheet id of a `=HYPERLINK("#gid=<id>"…)` formula, as the index's links are written.
fn gid_link(formula: &str) -> Option<i32> {
    let rest = formula
        .trim_start()
        .strip_prefix('=')?
        .trim_start()
        .get(..10)
        .filter(|f| f.eq_ignore_ascii_case("HYPERLINK("))
        .and_then(|_| formula.split_once("#gid="))?
        .1;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

pub async fn view(State(sh): State<Arc<Shared>>, Query(q): Query<ViewQuery>) -> Response {
    if let Some(after) = q.after {
        let mut rx = sh.version.subscribe();
        let passed = |v: &u64| *v > after;
        // Either the store changed, or a second passed: answer both ways.
        let _ = tokio::time::timeout(LONG_POLL, rx.wait_for(passed)).await;
    }
    let version = *sh.version.borrow();
    // A long poll that saw no change answers without the grid: the page keeps the one it
    // has, and the store is not rendered under its lock once a second for nothing.
    let grid = q.after.is_none_or(|after| version > after);
    let (body, shown) = {
        let store = sh.store();
        let home = sh.home_id();
        let shown = q
            .spreadsheet
            .filter(|id| store.spreadsheets.contains_key(id))
            .unwrap_or(home.clone());
        let mut body = match store.get(&shown) {
            Ok(ss) => {
                let viewer = q
                    .person
                    .as_deref()
                    .and_then(|p| people::person_email(p).ok())
                    .unwrap_or_else(|| ss.owner.clone());
                sheet_view(ss, q.sheet, grid, &viewer)
            }
            Err(_) => json!({ "error": "the emulator holds no spreadsheet" }),
        };
        body["spreadsheets"] = spreadsheets(&store, &home);
        (body, shown)
    };
    let tz: chrono_tz::Tz = body["spreadsheet"]["timeZone"]
        .as_str()
        .and_then(|z| z.parse().ok())
        .unwrap_or(chrono_tz::UTC);
    let (log, rates, quota) = {
        let c = sh.control();
        // The log of the spreadsheet shown (and the token fetches, of none); the rates are
        // each account's, over every spreadsheet, as Google counts its quota.
        let tail: Vec<Json> = c
            .log
            .iter()
            .rev()
            .filter(|r| r.spreadsheet == shown || r.spreadsheet.is_empty())
            .filter(|r| !q.quiet || changes_something(r))
            .take(LOG_TAIL)
            .map(|r| {
                json!({
                    "at": r.at.with_timezone(&tz).format("%H:%M:%S").to_string(),
                    "method": r.method,
                    "user": r.user,
                    "status": r.status,
                    "write": r.write,
                    "ranges": r.ranges,
                })
            })
            .collect();
        (tail, rates(&c.log, chrono::Utc::now()), c.quota())
    };
    let mut body = body;
    body["version"] = json!(version);
    body["log"] = json!(log);
    body["rates"] = json!(rates);
    body["quota"] = match quota {
        Some(q) => json!({
            "perUser": { "read": q.per_user.read, "write": q.per_user.write },
            "perProject": { "read": q.per_project.read, "write": q.per_project.write },
        }),
        None => Json::Null,
    };
    axum::Json(body).into_response()
}

/// Requests per account over the last 60 seconds, reads and writes apart (token fetches and
/// a person's edits are not API quota).
fn rates(log: &[RequestRecord], now: chrono::DateTime<chrono::Utc>) -> Vec<Json> {
    let since = now - chrono::Duration::seconds(60);
    let mut by_user: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    for r in log.iter().rev().take_while(|r| r.at > since) {
        if r.method == "oauth2.token" || r.method == PERSON_EDIT || r.user.is_empty() {
            continue;
        }
        let e = by_user.entry(r.user.as_str()).or_default();
        if r.write {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }
    by_user
        .into_iter()
        .map(|(user, (reads, writes))| json!({ "user": user, "reads": reads, "writes": writes }))
        .collect()
}

/// Every spreadsheet the emulator holds, `home` (the one it was started with) first, then by
/// title: what the page's spreadsheet picker lists.
fn spreadsheets(store: &super::store::Store, home: &str) -> Json {
    let mut all: Vec<&Spreadsheet> = store.spreadsheets.values().collect();
    all.sort_by(|a, b| (a.id != home, &a.title, &a.id).cmp(&(b.id != home, &b.title, &b.id)));
    all.iter()
        .map(|ss| json!({ "id": ss.id, "title": ss.title }))
        .collect()
}

/// The tabs, and (with `grid`) the grid of the sheet asked for, with the blocks of it that
/// `viewer` may not edit (`locked`: `[r0, r1, c0, c1]`, half open, `null` for an open end).
fn sheet_view(ss: &Spreadsheet, wanted: Option<i32>, grid: bool, viewer: &str) -> Json {
    let tabs: Vec<Json> = ss
        .sheets
        .iter()
        .map(|s| json!({ "id": s.id, "title": s.title, "hidden": s.hidden }))
        .collect();
    let index = wanted
        .and_then(|id| ss.sheets.iter().position(|s| s.id == id))
        .or_else(|| ss.sheets.iter().position(|s| !s.hidden))
        .unwrap_or(0);
    let mut out = json!({
        "spreadsheet": { "id": ss.id, "title": ss.title, "timeZone": ss.time_zone, "owner": ss.owner },
        "tabs": tabs,
    });
    let Some(sheet) = ss.sheets.get(index).filter(|_| grid) else {
        return out;
    };
    let render = Render {
        value: ValueRender::Formatted,
        date: DateRender::FormattedString,
    };
    let height = (sheet.rows.len() as u32).min(MAX_ROWS);
    let width = sheet
        .rows
        .iter()
        .take(height as usize)
        .map(|r| r.len() as u32)
        .max()
        .unwrap_or(0);
    let rows: Vec<Vec<Option<ViewCell>>> = (0..height)
        .map(|r| {
            (0..width)
                .map(|c| {
                    let cell = sheet.cell(r, c)?;
                    let checkbox = cell
                        .validation
                        .as_ref()
                        .and_then(|v| v.pointer("/condition/type"))
                        .and_then(Json::as_str)
                        == Some("BOOLEAN");
                    let text = values::render(ss, index, r, c, render)
                        .map(|v| match v {
                            Json::String(s) => s,
                            other => other.to_string(),
                        })
                        .unwrap_or_default();
                    let numeric = matches!(cell.value, Some(super::store::Value::Number(_)))
                        || matches!(cell.value, Some(super::store::Value::Formula(_)))
                            && text.parse::<f64>().is_ok();
                    let ticked = matches!(cell.value, Some(super::store::Value::Bool(true)));
                    let o = cell.validation.as_deref().and_then(|v| dropdown(ss, v));
                    if text.is_empty() && !checkbox && o.is_none() {
                        return None;
                    }
                    let formula = match &cell.value {
                        Some(super::store::Value::Formula(f)) => Some(f.clone()),
                        _ => None,
                    };
                    let g = formula.as_deref().and_then(gid_link);
                    let u = cell
                        .value
                        .as_ref()
                        .filter(|_| g.is_none())
                        .and_then(|v| super::formula::link(ss, index, v))
                        .filter(|url| {
                            let l = url.to_ascii_lowercase();
                            l.starts_with("https://") || l.starts_with("http://")
                        });
                    Some(ViewCell {
                        t: text,
                        b: checkbox.then_some(ticked),
                        n: numeric,
                        g,
                        u,
                        e: formula,
                        o,
                    })
                })
                .collect()
        })
        .collect();
    out["sheet"] = json!({
        "id": sheet.id,
        "title": sheet.title,
        "hidden": sheet.hidden,
        "frozenRows": sheet.frozen_row_count,
        "rowCount": sheet.row_count,
        "columnCount": sheet.column_count,
        "hiddenColumns": sheet.hidden_columns,
        "rows": rows,
        "truncated": sheet.rows.len() as u32 > MAX_ROWS,
        "locked": locked(ss, index, viewer),
    });
    out
}

/// The blocks of sheet index `sheet` protected against `viewer`, as `[r0, r1, c0, c1]`
/// (half open; `null` for a side open to the grid's edge).
fn locked(ss: &Spreadsheet, sheet: usize, viewer: &str) -> Json {
    let side = |v: u32| if v == u32::MAX { Json::Null } else { json!(v) };
    protection::closed_areas(ss, sheet, viewer)
        .iter()
        .map(|b| json!([b.r0, side(b.r1), b.c0, side(b.c1)]))
        .collect()
}

/// Which spreadsheet a person edits (`?spreadsheet=ID`, else the first one) and who they
/// are (`&as=EMAIL`, else the spreadsheet's owner).
#[derive(Debug, Deserialize)]
pub struct EditQuery {
    spreadsheet: Option<String>,
    #[serde(rename = "as")]
    person: Option<String>,
}

/// A person's edit: `spreadsheets.batchUpdate` requests, applied atomically like the API's.
pub async fn edit(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<EditQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    person_edit(&sh, q, &headers, &body, |ss, person| {
        let req = batch::parse(&body)?;
        batch::run(ss, &req, &sh.rules, person).map(|_| describe(&req))
    })
}

#[derive(Debug, Deserialize)]
struct Typed {
    sheet: i32,
    row: u32,
    col: u32,
    text: String,
}

/// A person typing into one cell: `values.update` of that cell with `USER_ENTERED`.
pub async fn type_in(
    State(sh): State<Arc<Shared>>,
    Query(q): Query<EditQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    person_edit(&sh, q, &headers, &body, |ss, person| {
        let typed: Typed = serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid(format!("Invalid JSON payload: {e}")))?;
        let title = ss
            .sheets
            .iter()
            .find(|s| s.id == typed.sheet)
            .map(|s| s.title.clone())
            .ok_or_else(|| ApiError::invalid(format!("No grid with id: {}", typed.sheet)))?;
        let cell = format!("{}{}", crate::a1::column_letters(typed.col), typed.row + 1);
        let range = crate::a1::range(&title, &cell);
        api::update(
            ss,
            &range,
            &json!({ "values": [[typed.text]] }),
            Input::UserEntered,
            None,
            person,
        )?;
        Ok(vec![format!("typed into {range}")])
    })
}

/// Applies the edit of the person `q` names to the spreadsheet it names under the store's
/// lock, marks the store changed and logs the edit; refuses a request that is not the
/// page's own JSON, and a person the spreadsheet is not shared with for editing.
fn person_edit(
    sh: &Shared,
    q: EditQuery,
    headers: &HeaderMap,
    body: &[u8],
    apply: impl FnOnce(&mut Spreadsheet, &str) -> Result<Vec<String>, ApiError>,
) -> Response {
    let started = chrono::Utc::now();
    let target = q.spreadsheet.unwrap_or_else(|| sh.home_id());
    let mut person = String::new();
    let result = same_origin(sh, headers).and_then(|()| {
        let mut store = sh.store();
        let ss = store.get_mut(&target).map_err(|_| {
            ApiError::new(404, format!("the emulator holds no spreadsheet {target:?}"))
        })?;
        person = match &q.person {
            Some(p) => people::person_email(p).map_err(ApiError::invalid)?,
            None => ss.owner.clone(),
        };
        // As for an API call: the file must be shared with the person for editing.
        if !ss.may_edit_file(&person) {
            return Err(ApiError::for_status(403, true));
        }
        apply(ss, &person)
    });
    let (status, reply, ranges) = match result {
        Ok(what) => (StatusCode::OK, json!({ "ok": true }), what),
        Err(e) => (
            StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_REQUEST),
            json!({ "error": e.message }),
            Vec::new(),
        ),
    };
    if status == StatusCode::OK {
        sh.mark_changed();
    }
    sh.control().record(RequestRecord {
        method: PERSON_EDIT.into(),
        spreadsheet: target,
        ranges,
        user: person,
        write: true,
        status: status.as_u16(),
        bytes_in: body.len(),
        bytes_out: 0,
        at: started,
    });
    (status, axum::Json(reply)).into_response()
}

/// Only the page itself may edit: JSON (a cross-site form or `text/plain` POST cannot send
/// it without a preflight the emulator never answers), and an `Origin`, when the browser
/// sends one, naming the emulator's own address.
fn same_origin(sh: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(ApiError::new(
            403,
            "a person's edit must be sent by the web view as application/json",
        ));
    }
    let own = sh
        .base_url
        .lock()
        .map(|b| b.trim_end_matches('/').to_string())
        .unwrap_or_default();
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(origin) if origin.trim_end_matches('/') != own => Err(ApiError::new(
            403,
            format!("edits come only from the emulator's own page ({own}), not from {origin}"),
        )),
        _ => Ok(()),
    }
}

/// The kinds of requests of an edit, for the log (`sortRange`, `updateCells`, ...).
fn describe(req: &google_sheets4::api::BatchUpdateSpreadsheetRequest) -> Vec<String> {
    req.requests
        .iter()
        .flatten()
        .filter_map(|r| {
            let mut v = serde_json::to_value(r).ok()?;
            google_sheets4::common::remove_json_null_values(&mut v);
            v.as_object()?.keys().next().cloned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed::{self, Seed};

    #[test]
    fn the_view_shows_checkboxes_formatted_dates_and_frozen_rows() {
        let ss = seed::build(Seed::Demo, "x".into());
        let panel = json!(sheet_view(&ss, Some(1001), true, &ss.owner));
        assert_eq!(panel["sheet"]["title"], "サーバーA");
        assert_eq!(panel["sheet"]["frozenRows"], 7);
        let tick = &panel["sheet"]["rows"][7][0];
        assert_eq!(tick["b"], false, "a ▶ cell is a checkbox: {tick}");
        assert_eq!(panel["sheet"]["rows"][7][1]["t"], "動作確認 (2秒)");
        let generated = panel["sheet"]["rows"][4][6]["t"]
            .as_str()
            .unwrap_or_default();
        assert!(
            generated.len() == 19 && generated.as_bytes()[4] == b'/',
            "G5 shows as yyyy/MM/dd HH:mm:ss, not a serial: {generated}"
        );
        let tabs = panel["tabs"].as_array().cloned().unwrap_or_default();
        assert!(
            tabs.iter()
                .any(|t| t["title"] == "_ジョブキュー" && t["hidden"] == true),
            "hidden sheets are listed as hidden: {tabs:?}"
        );
        let index = json!(sheet_view(&ss, Some(0), true, &ss.owner));
        assert_eq!(
            index["sheet"]["rows"][1][3]["g"], 1001,
            "the index's link opens サーバーA's tab: {}",
            index["sheet"]["rows"][1][3]
        );
        assert_eq!(gid_link("=hyperlink(\"#gid=42\", \"x\")"), Some(42));
        assert_eq!(gid_link("=LEN(\"#gid=42\")"), None);
        let first = json!(sheet_view(&ss, Some(424242), true, &ss.owner));
        assert_eq!(
            first["sheet"]["title"], "▶パネル",
            "an unknown id shows the first sheet"
        );
    }

    #[test]
    fn rates_count_each_accounts_reads_and_writes_of_the_last_minute() {
        let now = chrono::Utc::now();
        let rec = |user: &str, method: &str, write: bool, secs_ago: i64| RequestRecord {
            spreadsheet: String::new(),
            method: method.into(),
            ranges: vec![],
            user: user.into(),
            write,
            status: 200,
            bytes_in: 0,
            bytes_out: 0,
            at: now - chrono::Duration::seconds(secs_ago),
        };
        let log = [
            rec("a", "spreadsheets.values.batchGet", false, 90),
            rec("a", "spreadsheets.values.batchGet", false, 30),
            rec("a", "spreadsheets.batchUpdate", true, 20),
            rec("b", "spreadsheets.values.batchGet", false, 10),
            rec("alice@example.com", PERSON_EDIT, true, 5),
            rec("", "oauth2.token", false, 1),
        ];
        assert_eq!(
            rates(&log, now),
            [
                json!({ "user": "a", "reads": 1, "writes": 1 }),
                json!({ "user": "b", "reads": 1, "writes": 0 }),
            ]
        );
    }
}
