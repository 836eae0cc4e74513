//! The emulator, driven through `google-sheets4` over HTTP with real service-account auth.
//! Each test pins one behaviour sheetq relies on.

use std::time::{Duration, Instant};

use google_sheets4::api::{BatchUpdateSpreadsheetRequest, ValueRange};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::{json, Value as Json};
use sheetq::emulator::seed::{QUEUE_SHEET_ID, QUEUE_TITLE, WORKER_SHEET_ID, WORKER_TITLE};
use sheetq::emulator::{EmulatorOptions, Fault, FaultRule, Limits, Quota, Refused};

use crate::support::{self, api_error, from_json, hub, ok, Hub, SCOPE};

const LEASE: &str = "'_ワーカー'!B1";

/// What sheetq percent-encodes in a range before google-sheets4 puts it in the URL path
/// (docs/design.md §8): everything that would end or alter the path. Ranges in the query string
/// (`ranges=`) are encoded by the client itself and must be passed as they are.
const RANGE_SET: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}');

fn enc(range: &str) -> String {
    utf8_percent_encode(range, RANGE_SET).to_string()
}

async fn get_values(hub: &Hub, id: &str, range: &str, render: &str) -> Vec<Vec<Json>> {
    let vr = ok(
        &format!("values.get {range}"),
        hub.spreadsheets()
            .values_get(id, &enc(range))
            .value_render_option(render)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    vr.values.unwrap_or_default()
}

async fn put(hub: &Hub, id: &str, range: &str, rows: Json, input: &str) -> Json {
    let body: ValueRange = from_json(json!({ "values": rows }));
    let reply = ok(
        &format!("values.update {range}"),
        hub.spreadsheets()
            .values_update(body, id, &enc(range))
            .value_input_option(input)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    support::to_json(&reply)
}

async fn batch(hub: &Hub, id: &str, req: Json) -> google_sheets4::Result<Json> {
    let req: BatchUpdateSpreadsheetRequest = from_json(req);
    hub.spreadsheets()
        .batch_update(req, id)
        .add_scope(SCOPE)
        .doit()
        .await
        .map(|(_, r)| support::to_json(&r))
}

fn lease_cas(from: &str, to: &str) -> Json {
    json!({ "findReplace": {
        "find": from, "replacement": to,
        "matchCase": true, "matchEntireCell": true, "searchByRegex": false, "includeFormulas": false,
        "range": { "sheetId": WORKER_SHEET_ID, "startRowIndex": 0, "endRowIndex": 1,
                   "startColumnIndex": 1, "endColumnIndex": 2 } } })
}

#[tokio::test]
async fn api_calls_need_a_token_from_the_service_account_flow() {
    let emu = support::start_emulator().await;
    let id = emu.spreadsheet_id().to_string();
    let path = format!("v4/spreadsheets/{id}/values/A1");
    let (status, body) = support::raw(&emu, "GET", &path, None, None).await;
    assert_eq!(status, 401, "no token must be refused: {body}");
    assert_eq!(body["error"]["status"], "UNAUTHENTICATED", "{body}");
    assert_eq!(body["error"]["code"], 401);
    let (status, _) = support::raw(&emu, "GET", &path, None, Some("ya29.forged")).await;
    assert_eq!(
        status, 401,
        "a token the emulator did not issue must be refused"
    );

    let hub = hub(&emu).await;
    let rows = get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    assert_eq!(rows, vec![vec![json!("free")]]);
    let token_calls: Vec<_> = emu
        .requests()
        .into_iter()
        .filter(|r| r.method == "oauth2.token")
        .collect();
    assert_eq!(token_calls.len(), 1, "one token fetch expected");
    assert_eq!(
        token_calls[0].ranges,
        vec!["https://www.googleapis.com/auth/spreadsheets".to_string()],
        "the token must be asked for the spreadsheets scope only"
    );
}

#[tokio::test]
async fn revoked_token_is_refused_until_the_client_fetches_a_new_one() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    get_values(&hub, &id, LEASE, "FORMATTED_VALUE").await;
    emu.revoke_tokens();
    let err = api_error(
        "values.get with a revoked token",
        hub.spreadsheets()
            .values_get(&id, "A1")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(err["error"]["code"], 401, "{err}");
}

#[tokio::test]
async fn find_replace_is_a_compare_and_swap_with_exact_counts() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();

    let won = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("free", "lease|a|n1|2030-01-01T00:00:00Z")] }),
    )
    .await
    .unwrap_or_else(|e| panic!("first CAS: {e:?}"));
    assert_eq!(
        won["replies"][0]["findReplace"],
        json!({ "valuesChanged": 1, "rowsChanged": 1, "sheetsChanged": 1, "occurrencesChanged": 1 }),
        "the first CAS must change exactly the lease cell"
    );
    let lost = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("free", "lease|b|n2|2030-01-01T00:00:00Z")] }),
    )
    .await
    .unwrap_or_else(|e| panic!("second CAS: {e:?}"));
    assert_eq!(
        lost["replies"][0]["findReplace"],
        json!({}),
        "a CAS from a stale value must change nothing (zero counts are omitted)"
    );
    let case = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("LEASE|A|N1|2030-01-01T00:00:00Z", "free")] }),
    )
    .await
    .unwrap_or_else(|e| panic!("case CAS: {e:?}"));
    assert_eq!(
        case["replies"][0]["findReplace"],
        json!({}),
        "matchCase must be honoured"
    );
    let partial = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("lease", "free")] }),
    )
    .await
    .unwrap_or_else(|e| panic!("partial CAS: {e:?}"));
    assert_eq!(
        partial["replies"][0]["findReplace"],
        json!({}),
        "matchEntireCell must be honoured"
    );
    let rows = get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    assert_eq!(rows, vec![vec![json!("lease|a|n1|2030-01-01T00:00:00Z")]]);
}

#[tokio::test]
async fn find_replace_scope_regex_and_formulas() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    put(
        &hub,
        &id,
        "Sheet1!A1",
        json!([["job-1", "job-2 job-3"], ["=\"job\"&1", "x"], ["JOB-9"]]),
        "USER_ENTERED",
    )
    .await;
    let reply = batch(
        &hub,
        &id,
        json!({ "requests": [{ "findReplace": {
            "find": "job-(\\d)", "replacement": "task-$1", "searchByRegex": true, "matchCase": true,
            "includeFormulas": true, "sheetId": 0 } }] }),
    )
    .await
    .unwrap_or_else(|e| panic!("regex findReplace: {e:?}"));
    assert_eq!(
        reply["replies"][0]["findReplace"],
        json!({ "valuesChanged": 2, "rowsChanged": 1, "sheetsChanged": 1, "occurrencesChanged": 3 }),
        "the formula text has no `job-<digit>`; JOB-9 differs in case"
    );
    let reply = batch(
        &hub,
        &id,
        json!({ "requests": [{ "findReplace": { "find": "\"job\"", "replacement": "\"work\"",
            "includeFormulas": true, "allSheets": true } }] }),
    )
    .await
    .unwrap_or_else(|e| panic!("formula findReplace: {e:?}"));
    assert_eq!(
        reply["replies"][0]["findReplace"],
        json!({ "formulasChanged": 1, "rowsChanged": 1, "sheetsChanged": 1, "occurrencesChanged": 1 })
    );
    let rows = get_values(&hub, &id, "Sheet1!A1:B3", "UNFORMATTED_VALUE").await;
    assert_eq!(
        rows,
        vec![
            vec![json!("task-1"), json!("task-2 task-3")],
            vec![json!("work1"), json!("x")],
            vec![json!("JOB-9")]
        ]
    );
    let skip = batch(
        &hub,
        &id,
        json!({ "requests": [{ "findReplace": { "find": "work", "replacement": "w", "allSheets": true } }] }),
    )
    .await
    .unwrap_or_else(|e| panic!("findReplace without formulas: {e:?}"));
    assert_eq!(
        skip["replies"][0]["findReplace"],
        json!({}),
        "formula cells are skipped without includeFormulas"
    );
}

#[tokio::test]
async fn an_invalid_request_in_a_batch_applies_nothing() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let err = api_error(
        "batch with a bad second request",
        batch(
            &hub,
            &id,
            json!({ "requests": [lease_cas("free", "taken"), { "deleteSheet": { "sheetId": 999 } }] }),
        )
        .await,
    );
    assert_eq!(err["error"]["code"], 400, "{err}");
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(
        err["error"]["message"],
        "Invalid requests[1].deleteSheet: No grid with id: 999"
    );
    let rows = get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    assert_eq!(
        rows,
        vec![vec![json!("free")]],
        "the first request must not have been applied"
    );
}

#[tokio::test]
async fn requests_apply_in_order_within_a_batch() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    // Acquire, then release in the same batch: in order, the lease ends free; the second CAS
    // only matches because the first already ran.
    let reply = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("free", "mine"), lease_cas("mine", "free"),
                             { "addSheet": { "properties": { "sheetId": 77, "title": "new" } } },
                             { "updateCells": { "start": { "sheetId": 77 }, "fields": "userEnteredValue",
                               "rows": [{ "values": [{ "userEnteredValue": { "stringValue": "=not a formula" } }] }] } }] }),
    )
    .await
    .unwrap_or_else(|e| panic!("ordered batch: {e:?}"));
    assert_eq!(
        reply["replies"][1]["findReplace"]["occurrencesChanged"], 1,
        "{reply}"
    );
    assert_eq!(
        reply["replies"][2]["addSheet"]["properties"]["title"],
        "new"
    );
    assert_eq!(
        get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await,
        vec![vec![json!("free")]]
    );
    assert_eq!(
        get_values(&hub, &id, "new!A1", "FORMULA").await,
        vec![vec![json!("=not a formula")]],
        "stringValue is text, never a formula"
    );
}

#[tokio::test]
async fn raw_keeps_text_and_user_entered_parses() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    put(
        &hub,
        &id,
        "Sheet1!A1",
        json!([["=1+1", "123", "TRUE", "2026/11/30 12:34:56"]]),
        "RAW",
    )
    .await;
    put(
        &hub,
        &id,
        "Sheet1!A2",
        json!([["=1+1", "123", "TRUE", "2026/11/30 12:34:56"]]),
        "USER_ENTERED",
    )
    .await;
    let unformatted = get_values(&hub, &id, "Sheet1!A1:D2", "UNFORMATTED_VALUE").await;
    let serial = 46356.0 + 45296.0 / 86400.0;
    assert_eq!(
        unformatted[0],
        vec![
            json!("=1+1"),
            json!("123"),
            json!("TRUE"),
            json!("2026/11/30 12:34:56")
        ],
        "RAW stores text as-is"
    );
    assert_eq!(
        &unformatted[1][..3],
        &[json!(2), json!(123), json!(true)],
        "USER_ENTERED parses"
    );
    let got = unformatted[1][3]
        .as_f64()
        .unwrap_or_else(|| panic!("date must be a serial: {:?}", unformatted[1][3]));
    assert!((got - serial).abs() < 1e-9, "serial {got} != {serial}");
    let formula = get_values(&hub, &id, "Sheet1!A1:D2", "FORMULA").await;
    assert_eq!(formula[1][0], json!("=1+1"));
    let formatted = get_values(&hub, &id, "Sheet1!A1:D2", "FORMATTED_VALUE").await;
    assert_eq!(
        formatted[1],
        vec![
            json!("2"),
            json!("123"),
            json!("TRUE"),
            json!("2026/11/30 12:34:56")
        ]
    );
    let vr = ok(
        "values.get FORMATTED_STRING",
        hub.spreadsheets()
            .values_get(&id, "Sheet1!D2")
            .value_render_option("UNFORMATTED_VALUE")
            .date_time_render_option("FORMATTED_STRING")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(vr.values, Some(vec![vec![json!("2026/11/30 12:34:56")]]));
    let err = api_error(
        "values.update without valueInputOption",
        hub.spreadsheets()
            .values_update(from_json(json!({ "values": [["x"]] })), &id, "Sheet1!A1")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        err["error"]["message"],
        "'valueInputOption' is required but not specified"
    );
}

#[tokio::test]
async fn append_with_insert_rows_goes_after_the_table_and_pushes_rows_down() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let queue_range = "'_ジョブキュー'!A1:Q";
    // A person left a note further down, separated by empty rows.
    emu.set_values("'_ジョブキュー'!A10", json!([["note"]]), false)
        .unwrap_or_else(|e| panic!("seed note: {e}"));
    let rows_before = emu
        .with_spreadsheet(|ss| ss.sheet_by_title(QUEUE_TITLE).map(|s| s.row_count))
        .ok()
        .flatten();
    let body: ValueRange = from_json(json!({ "values": [["job-1", 46356.5, "", "サーバーA"]] }));
    let reply = ok(
        "values.append",
        hub.spreadsheets()
            .values_append(body, &id, &enc(queue_range))
            .value_input_option("RAW")
            .insert_data_option("INSERT_ROWS")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(reply.table_range.as_deref(), Some("'_ジョブキュー'!A1:S1"));
    let updates = reply.updates.unwrap_or_default();
    assert_eq!(
        updates.updated_range.as_deref(),
        Some("'_ジョブキュー'!A2:D2")
    );
    assert_eq!(updates.updated_cells, Some(4));
    let body: ValueRange = from_json(json!({ "values": [["job-2"]] }));
    let reply = ok(
        "second values.append",
        hub.spreadsheets()
            .values_append(body, &id, &enc(queue_range))
            .value_input_option("RAW")
            .insert_data_option("INSERT_ROWS")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(reply.table_range.as_deref(), Some("'_ジョブキュー'!A1:S2"));
    assert_eq!(
        reply.updates.and_then(|u| u.updated_range).as_deref(),
        Some("'_ジョブキュー'!A3")
    );
    let col_a = get_values(&hub, &id, "'_ジョブキュー'!A1:A", "UNFORMATTED_VALUE").await;
    assert_eq!(
        col_a.len(),
        12,
        "two rows inserted above the note: {col_a:?}"
    );
    assert_eq!(col_a[11], vec![json!("note")]);
    let rows_after = emu
        .with_spreadsheet(|ss| ss.sheet_by_title(QUEUE_TITLE).map(|s| s.row_count))
        .ok()
        .flatten();
    assert_eq!(
        rows_after,
        rows_before.map(|n| n + 2),
        "INSERT_ROWS grows the grid"
    );
}

#[tokio::test]
async fn append_overwrite_writes_into_the_gap_below_the_table() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    put(
        &hub,
        &id,
        "Sheet1!A1",
        json!([["h"], ["a"], [], ["kept"]]),
        "RAW",
    )
    .await;
    let reply = ok(
        "values.append OVERWRITE",
        hub.spreadsheets()
            .values_append(
                from_json(json!({ "values": [["b"], ["c"]] })),
                &id,
                "Sheet1!A:A",
            )
            .value_input_option("RAW")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        reply.updates.and_then(|u| u.updated_range).as_deref(),
        Some("Sheet1!A3:A4")
    );
    let col = get_values(&hub, &id, "Sheet1!A:A", "UNFORMATTED_VALUE").await;
    assert_eq!(
        col,
        vec![
            vec![json!("h")],
            vec![json!("a")],
            vec![json!("b")],
            vec![json!("c")]
        ],
        "OVERWRITE clobbers the row below"
    );
}

#[tokio::test]
async fn batch_get_renders_ranges_like_google() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    put(
        &hub,
        &id,
        "'_ジョブキュー'!A2",
        json!([["j1", "", "", "", "", "", "", "", "", "", "待機"]]),
        "RAW",
    )
    .await;
    let reply = ok(
        "values.batchGet",
        hub.spreadsheets()
            .values_batch_get(&id)
            .add_ranges("'_ジョブキュー'!A1:P")
            .add_ranges("'_ワーカー'!B1")
            .add_ranges("'_ジョブキュー'!A1:B")
            .value_render_option("UNFORMATTED_VALUE")
            .date_time_render_option("SERIAL_NUMBER")
            .major_dimension("COLUMNS")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let vrs = reply.value_ranges.unwrap_or_default();
    assert_eq!(vrs.len(), 3);
    assert_eq!(
        vrs[0].range.as_deref(),
        Some("'_ジョブキュー'!A1:P1000"),
        "open range is clamped to the grid"
    );
    assert_eq!(vrs[1].range.as_deref(), Some("'_ワーカー'!B1"));
    let cols = vrs[0].values.clone().unwrap_or_default();
    assert_eq!(cols.len(), 16, "COLUMNS: one line per column");
    assert_eq!(cols[0], vec![json!("jobId"), json!("j1")]);
    assert_eq!(
        cols[1],
        vec![json!("受付日時")],
        "trailing empty cells are omitted"
    );
    assert_eq!(cols[10], vec![json!("状態"), json!("待機")]);
    assert_eq!(vrs[2].major_dimension.as_deref(), Some("COLUMNS"));
}

#[tokio::test]
async fn quoted_titles_with_quotes_spaces_and_non_ascii_work_end_to_end() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let title = "Bob's #1 / 予定 100%";
    batch(
        &hub,
        &id,
        json!({ "requests": [{ "addSheet": { "properties": { "title": title } } }] }),
    )
    .await
    .unwrap_or_else(|e| panic!("addSheet: {e:?}"));
    let range = format!("{}!A2:B", sheetq::a1::quote_title(title));
    let reply = put(&hub, &id, &range, json!([["x", "y"]]), "RAW").await;
    assert_eq!(reply["updatedRange"], "'Bob''s #1 / 予定 100%'!A2:B2");
    let rows = get_values(&hub, &id, &range, "FORMATTED_VALUE").await;
    assert_eq!(rows, vec![vec![json!("x"), json!("y")]]);
}

#[tokio::test]
async fn errors_have_googles_shape() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let err = api_error(
        "values.get of an unknown spreadsheet",
        hub.spreadsheets()
            .values_get("nope", "A1")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        err,
        json!({ "error": { "code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND" } })
    );
    let err = api_error(
        "values.get of an unknown sheet",
        hub.spreadsheets()
            .values_get(&id, "Nope!A1")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        err,
        json!({ "error": { "code": 400, "message": "Unable to parse range: Nope!A1", "status": "INVALID_ARGUMENT" } })
    );
    let err = api_error(
        "values.get beyond the grid",
        hub.spreadsheets()
            .values_get(&id, &enc("'_ワーカー'!A5000"))
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        err["error"]["message"],
        "Range ('_ワーカー'!A5000) exceeds grid limits. Max rows: 1000, max columns: 26"
    );
}

/// Without percent-encoding, non-ASCII and spaces still arrive intact (the client's URL
/// parser encodes them); the error echoes the decoded range.
#[tokio::test]
async fn unencoded_non_ascii_title_reaches_the_emulator_intact() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let err = api_error(
        "values.get of a missing non-ASCII sheet",
        hub.spreadsheets()
            .values_get(&id, "'_x シート'!A1")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        err["error"]["message"], "Unable to parse range: '_x シート'!A1",
        "the title must arrive decoded"
    );
}

#[tokio::test]
async fn spreadsheet_metadata_and_grid_data() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let ss = ok(
        "spreadsheets.get",
        hub.spreadsheets().get(&id).add_scope(SCOPE).doit().await,
    );
    let ss = support::to_json(&ss);
    assert_eq!(ss["properties"]["timeZone"], "Asia/Tokyo");
    let sheets = ss["sheets"].as_array().cloned().unwrap_or_default();
    assert_eq!(sheets[0]["properties"]["title"], "▶パネル");
    let queue = sheets
        .iter()
        .find(|s| s["properties"]["title"] == QUEUE_TITLE)
        .unwrap_or_else(|| panic!("no queue sheet in {ss}"));
    assert_eq!(queue["properties"]["sheetId"], QUEUE_SHEET_ID);
    assert_eq!(queue["properties"]["hidden"], true);
    assert_eq!(queue["properties"]["gridProperties"]["rowCount"], 1000);
    assert!(queue.get("data").is_none(), "no grid data unless asked");

    let slim = ok(
        "spreadsheets.get with fields",
        hub.spreadsheets()
            .get(&id)
            .param(
                "fields",
                "properties.timeZone,sheets.properties(sheetId,title)",
            )
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let slim = support::to_json(&slim);
    assert_eq!(
        slim["properties"],
        json!({ "timeZone": "Asia/Tokyo" }),
        "fields must cut the reply"
    );
    assert_eq!(
        slim["sheets"][0],
        json!({ "properties": { "sheetId": 0, "title": "▶パネル" } })
    );
    assert!(slim.get("spreadsheetId").is_none());

    let panel = sheets[1]["properties"]["title"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ss = ok(
        "spreadsheets.get with grid data",
        hub.spreadsheets()
            .get(&id)
            .add_ranges(&format!("'{panel}'!A8:B9"))
            .include_grid_data(true)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let ss = support::to_json(&ss);
    assert_eq!(
        ss["sheets"].as_array().map(Vec::len),
        Some(1),
        "only the sheets of the ranges"
    );
    let data = &ss["sheets"][0]["data"][0];
    assert_eq!(data["startRow"], 7);
    assert!(
        data.get("startColumn").is_none(),
        "zero start column is omitted: {data}"
    );
    let cell = &data["rowData"][0]["values"][0];
    assert_eq!(
        cell["dataValidation"]["condition"]["type"], "BOOLEAN",
        "a real checkbox: {cell}"
    );
    assert_eq!(cell["effectiveValue"]["boolValue"], false);
    assert_eq!(cell["formattedValue"], "FALSE");
}

#[tokio::test]
async fn batch_update_can_return_the_updated_ranges() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    emu.set_values(
        "'_ジョブキュー'!A2:K2",
        json!([["j1", 46356.5, "", "", "", "", "", "", "", "", "待機"]]),
        false,
    )
    .unwrap_or_else(|e| panic!("seed row: {e}"));
    let reply = batch(
        &hub,
        &id,
        json!({
            "requests": [lease_cas("free", "mine")],
            "includeSpreadsheetInResponse": true,
            "responseRanges": ["'_ジョブキュー'!A2:P", LEASE],
            "responseIncludeGridData": true,
        }),
    )
    .await
    .unwrap_or_else(|e| panic!("batch with response ranges: {e:?}"));
    let sheets = reply["updatedSpreadsheet"]["sheets"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(sheets.len(), 2, "{reply}");
    let queue = sheets
        .iter()
        .find(|s| s["properties"]["sheetId"] == QUEUE_SHEET_ID)
        .cloned()
        .unwrap_or_default();
    let data = &queue["data"][0];
    assert_eq!(data["startRow"], 1);
    assert_eq!(
        data["rowData"][0]["values"][0]["effectiveValue"]["stringValue"],
        "j1"
    );
    assert_eq!(
        data["rowData"][0]["values"][1]["userEnteredValue"]["numberValue"],
        46356.5
    );
    assert_eq!(data["rowData"][0]["values"][10]["formattedValue"], "待機");
    let worker = sheets
        .iter()
        .find(|s| s["properties"]["title"] == WORKER_TITLE)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        worker["data"][0]["rowData"][0]["values"][0]["effectiveValue"]["stringValue"], "mine",
        "the response shows the state after the batch"
    );
}

#[tokio::test]
async fn a_person_deleting_and_sorting_rows_is_seen_by_the_client() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    emu.set_values("'_ジョブキュー'!A2", json!([["c"], ["a"], ["b"]]), false)
        .unwrap_or_else(|e| panic!("seed: {e}"));
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": QUEUE_SHEET_ID, "startRowIndex": 1 },
        "sortSpecs": [{ "dimensionIndex": 0, "sortOrder": "ASCENDING" }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e}"));
    emu.batch_update(json!([{ "deleteDimension": { "range": {
        "sheetId": QUEUE_SHEET_ID, "dimension": "ROWS", "startIndex": 1, "endIndex": 2 } } }]))
        .unwrap_or_else(|e| panic!("delete: {e}"));
    let col = get_values(&hub, &id, "'_ジョブキュー'!A2:A", "UNFORMATTED_VALUE").await;
    assert_eq!(col, vec![vec![json!("b")], vec![json!("c")]]);
    assert!(
        emu.requests()
            .iter()
            .all(|r| r.method != "spreadsheets.batchUpdate"),
        "direct edits are not API requests"
    );
}

#[tokio::test]
async fn structural_requests_through_the_client() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    put(
        &hub,
        &id,
        "Sheet1!A1",
        json!([["a", "b"], ["c", "d"]]),
        "RAW",
    )
    .await;
    let reply = batch(
        &hub,
        &id,
        json!({ "requests": [
            { "insertDimension": { "range": { "sheetId": 0, "dimension": "ROWS", "startIndex": 0, "endIndex": 1 } } },
            { "insertDimension": { "range": { "sheetId": 0, "dimension": "COLUMNS", "startIndex": 1, "endIndex": 2 } } },
            { "setDataValidation": { "range": { "sheetId": 0, "startRowIndex": 0, "endRowIndex": 1, "startColumnIndex": 0, "endColumnIndex": 1 },
                "rule": { "condition": { "type": "BOOLEAN" } } } },
            { "repeatCell": { "range": { "sheetId": 0, "startRowIndex": 0, "endRowIndex": 1, "startColumnIndex": 0, "endColumnIndex": 1 },
                "cell": { "userEnteredValue": { "boolValue": false } }, "fields": "userEnteredValue" } },
            { "appendCells": { "sheetId": 0, "fields": "userEnteredValue",
                "rows": [{ "values": [{ "userEnteredValue": { "stringValue": "e" } }] }] } },
            { "duplicateSheet": { "sourceSheetId": 0, "newSheetName": "copy" } },
            { "updateSheetProperties": { "properties": { "sheetId": 0, "title": "renamed", "hidden": false }, "fields": "title" } },
        ] }),
    )
    .await
    .unwrap_or_else(|e| panic!("structural batch: {e:?}"));
    assert_eq!(
        reply["replies"][5]["duplicateSheet"]["properties"]["title"],
        "copy"
    );
    let rows = get_values(&hub, &id, "renamed!A1:C4", "UNFORMATTED_VALUE").await;
    assert_eq!(
        rows,
        vec![
            vec![json!(false)],
            vec![json!("a"), json!(""), json!("b")],
            vec![json!("c"), json!(""), json!("d")],
            vec![json!("e")]
        ]
    );
    let copy = get_values(&hub, &id, "copy!A1:A4", "UNFORMATTED_VALUE").await;
    assert_eq!(
        copy.len(),
        4,
        "duplicateSheet ran after appendCells: {copy:?}"
    );
    let del = batch(
        &hub,
        &id,
        json!({ "requests": [{ "deleteSheet": { "sheetId": 0 } }] }),
    )
    .await;
    assert!(del.is_ok(), "deleteSheet: {del:?}");
    let cleared = ok(
        "values.clear",
        hub.spreadsheets()
            .values_clear(from_json(json!({})), &id, "copy!A1:A2")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(cleared.cleared_range.as_deref(), Some("copy!A1:A2"));
    let after = get_values(&hub, &id, "copy!A1:A4", "UNFORMATTED_VALUE").await;
    assert_eq!(
        after,
        vec![vec![], vec![], vec![json!("c")], vec![json!("e")]]
    );
}

#[tokio::test]
async fn create_makes_a_new_spreadsheet() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let created = ok(
        "spreadsheets.create",
        hub.spreadsheets()
            .create(from_json(
                json!({ "properties": { "title": "t", "timeZone": "Europe/Paris" },
                                      "sheets": [{ "properties": { "title": "only" } }] }),
            ))
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let new_id = created.spreadsheet_id.unwrap_or_default();
    assert_ne!(new_id, emu.spreadsheet_id());
    let got = ok(
        "spreadsheets.get new",
        hub.spreadsheets()
            .get(&new_id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let got = support::to_json(&got);
    assert_eq!(got["properties"]["timeZone"], "Europe/Paris");
    assert_eq!(got["sheets"][0]["properties"]["title"], "only");
}

#[tokio::test]
async fn values_batch_update_is_checked_whole() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let req = from_json(json!({ "valueInputOption": "RAW", "data": [
        { "range": "Sheet1!A1", "values": [["ok"]] },
        { "range": "Missing!A1", "values": [["no"]] } ] }));
    let err = api_error(
        "values.batchUpdate with a bad range",
        hub.spreadsheets()
            .values_batch_update(req, &id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(err["error"]["message"], "Unable to parse range: Missing!A1");
    assert!(
        get_values(&hub, &id, "Sheet1!A1", "UNFORMATTED_VALUE")
            .await
            .is_empty(),
        "nothing written"
    );
    let req = from_json(json!({ "valueInputOption": "RAW", "data": [
        { "range": "Sheet1!A1", "values": [["a", "b"]] },
        { "range": "Sheet1!C3:D3", "values": [["c"]] } ] }));
    let reply = ok(
        "values.batchUpdate",
        hub.spreadsheets()
            .values_batch_update(req, &id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(reply.total_updated_cells, Some(3));
    assert_eq!(reply.total_updated_rows, Some(2));
    assert_eq!(reply.total_updated_sheets, Some(1));
}

#[tokio::test]
async fn status_faults_answer_like_google_and_apply_nothing() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.values.batchGet"),
        Fault::Status(429),
        1,
    ));
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.batchUpdate"),
        Fault::Status(503),
        1,
    ));
    let err = api_error(
        "batchGet under a 429 fault",
        hub.spreadsheets()
            .values_batch_get(&id)
            .add_ranges("A1")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(err["error"]["code"], 429);
    assert_eq!(err["error"]["status"], "RESOURCE_EXHAUSTED");
    let msg = err["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("Quota exceeded for quota metric 'Read requests'"),
        "{msg}"
    );
    let ok_now = hub
        .spreadsheets()
        .values_batch_get(&id)
        .add_ranges("A1")
        .add_scope(SCOPE)
        .doit()
        .await;
    assert!(
        ok_now.is_ok(),
        "the fault was for one request only: {ok_now:?}"
    );
    let err = api_error(
        "batchUpdate under a 503 fault",
        batch(&hub, &id, json!({ "requests": [lease_cas("free", "x")] })).await,
    );
    assert_eq!(err["error"]["status"], "UNAVAILABLE");
    assert_eq!(
        get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await,
        vec![vec![json!("free")]]
    );
    emu.add_fault(FaultRule::next(None, Fault::Status(500), 1));
    let err = api_error(
        "get under a 500 fault",
        hub.spreadsheets().get(&id).add_scope(SCOPE).doit().await,
    );
    assert_eq!(err["error"]["status"], "INTERNAL");
    assert!(emu.faults().is_empty(), "used-up rules are removed");
}

#[tokio::test]
async fn dropped_connections_before_and_after_apply() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.batchUpdate"),
        Fault::Drop,
        1,
    ));
    let r = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("free", "lost")] }),
    )
    .await;
    assert!(
        matches!(r, Err(google_sheets4::Error::HttpError(_))),
        "a dropped connection is a transport error: {r:?}"
    );
    assert_eq!(
        get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await,
        vec![vec![json!("free")]],
        "Drop applies nothing"
    );
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.batchUpdate"),
        Fault::DropAfterApply,
        1,
    ));
    let r = batch(
        &hub,
        &id,
        json!({ "requests": [lease_cas("free", "applied")] }),
    )
    .await;
    assert!(
        matches!(r, Err(google_sheets4::Error::HttpError(_))),
        "{r:?}"
    );
    assert_eq!(
        get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await,
        vec![vec![json!("applied")]],
        "DropAfterApply applies"
    );
    let dropped = emu.requests().iter().filter(|r| r.status == 0).count();
    assert_eq!(dropped, 2, "dropped requests are logged with status 0");
}

#[tokio::test]
async fn latency_and_probability_faults() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    emu.add_fault(FaultRule::next(
        Some("spreadsheets.values.get"),
        Fault::Latency(Duration::from_millis(300)),
        1,
    ));
    let t = Instant::now();
    get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "latency fault not applied: {:?}",
        t.elapsed()
    );
    emu.add_fault(FaultRule {
        method: Some("spreadsheets.values.get".into()),
        fault: Fault::Status(500),
        remaining: None,
        probability: Some(0.0),
        user: None,
        body_contains: None,
    });
    get_values(&hub, &id, LEASE, "UNFORMATTED_VALUE").await;
    assert_eq!(emu.faults().len(), 1, "a rule that did not fire stays");
}

/// A read of the lease cell; `Err` with the API error JSON when it was refused.
async fn read_lease(hub: &Hub, id: &str) -> Result<(), Json> {
    match hub
        .spreadsheets()
        .values_batch_get(id)
        .add_ranges(LEASE)
        .add_scope(SCOPE)
        .doit()
        .await
    {
        Ok(_) => Ok(()),
        Err(google_sheets4::Error::BadRequest(json)) => Err(json),
        Err(other) => panic!("batchGet: expected a reply, got {other:?}"),
    }
}

/// The `(quota_limit, quota_limit_value)` of a 429 body after checking it is Google's shape.
fn quota_limit_of(err: &Json, message_limit: &str) -> (String, String) {
    assert_eq!(err["error"]["code"], 429, "{err}");
    assert_eq!(err["error"]["status"], "RESOURCE_EXHAUSTED", "{err}");
    let msg = err["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "and limit '{message_limit}' of service 'sheets.googleapis.com'"
        )),
        "the message names the limit {message_limit:?}: {msg}"
    );
    let meta = &err["error"]["details"][0]["metadata"];
    assert_eq!(
        err["error"]["details"][0]["reason"], "RATE_LIMIT_EXCEEDED",
        "{err}"
    );
    (
        meta["quota_limit"].as_str().unwrap_or_default().to_string(),
        meta["quota_limit_value"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[tokio::test]
async fn the_quota_counts_reads_and_writes_per_user_and_per_project() {
    let emu = support::start_emulator().await;
    let id = emu.spreadsheet_id().to_string();
    emu.set_quota(Some(Quota {
        per_user: Limits::new(2, 1),
        per_project: Limits::new(3, 10),
    }));
    let first = hub(&emu).await;
    let second = support::hub_for(&emu, "second").await;
    read_lease(&first, &id)
        .await
        .unwrap_or_else(|e| panic!("1st read: {e}"));
    read_lease(&first, &id)
        .await
        .unwrap_or_else(|e| panic!("2nd read: {e}"));
    for _ in 0..3 {
        let err = read_lease(&first, &id).await.err().unwrap_or_default();
        let limit = quota_limit_of(&err, "Read requests per minute per user");
        assert_eq!(limit, ("ReadRequestsPerMinutePerUser".into(), "2".into()));
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Quota exceeded for quota metric 'Read requests'"),
            "{err}"
        );
    }
    // Writes have their own quota: the spent reads leave the first user its one write.
    batch(&first, &id, json!({ "requests": [] }))
        .await
        .unwrap_or_else(|e| panic!("a write after the reads are spent: {e:?}"));
    let err = api_error(
        "2nd write",
        batch(&first, &id, json!({ "requests": [] })).await,
    );
    let limit = quota_limit_of(&err, "Write requests per minute per user");
    assert_eq!(limit, ("WriteRequestsPerMinutePerUser".into(), "1".into()));
    // The second service account has its own per-user quota but shares the project's: its
    // first read is the project's third (the three refused reads did not count), its second
    // is over the project's limit.
    read_lease(&second, &id)
        .await
        .unwrap_or_else(|e| panic!("the second user's 1st read: {e}"));
    let err = read_lease(&second, &id).await.err().unwrap_or_default();
    let limit = quota_limit_of(&err, "Read requests per minute");
    assert_eq!(
        limit,
        ("ReadRequestsPerMinutePerProject".into(), "3".into())
    );
    let refused = emu.quota_refused();
    let user = |name: &str| format!("{name}@sheetq-emulator.iam.gserviceaccount.com");
    assert_eq!(
        refused.get(&user("sheetq-emulator")),
        Some(&Refused { read: 3, write: 1 }),
        "{refused:?}"
    );
    assert_eq!(
        refused.get(&user("second")),
        Some(&Refused { read: 1, write: 0 }),
        "{refused:?}"
    );
    assert_eq!(emu.counters().quota_refused_total(), 5);
    let statuses: Vec<u16> = emu
        .requests()
        .iter()
        .filter(|r| r.method != "oauth2.token")
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![200, 200, 429, 429, 429, 200, 429, 200, 429]);
}

#[tokio::test]
async fn the_default_quota_is_googles_and_it_can_be_turned_off() {
    let emu = support::start_emulator().await;
    assert_eq!(
        emu.quota(),
        Some(Quota::google()),
        "quotas are on by default"
    );
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    for n in 1..=60 {
        read_lease(&hub, &id)
            .await
            .unwrap_or_else(|e| panic!("read {n} of Google's 60: {e}"));
    }
    let err = read_lease(&hub, &id).await.err().unwrap_or_default();
    let limit = quota_limit_of(&err, "Read requests per minute per user");
    assert_eq!(limit, ("ReadRequestsPerMinutePerUser".into(), "60".into()));
    emu.set_quota(None);
    for n in 1..=30 {
        read_lease(&hub, &id)
            .await
            .unwrap_or_else(|e| panic!("read {n} with quotas off: {e}"));
    }
    // Off from the start, as `sheetq emulator --quota off`.
    let off = support::start_with(EmulatorOptions {
        quota: None,
        ..EmulatorOptions::default()
    })
    .await;
    let hub = support::hub(&off).await;
    let id = off.spreadsheet_id().to_string();
    for n in 1..=70 {
        read_lease(&hub, &id)
            .await
            .unwrap_or_else(|e| panic!("read {n} with quotas off: {e}"));
    }
    assert_eq!(off.counters().quota_refused_total(), 0);
}

#[tokio::test]
async fn only_sheets_api_calls_count_and_the_admin_endpoint_sets_the_quota() {
    let emu = support::start_emulator().await;
    let id = emu.spreadsheet_id().to_string();
    emu.set_quota(Some(Quota::per_user(0, 0)));
    // The token fetch the first call makes is not a Sheets API request: it is granted, and
    // the call itself is refused by the quota.
    let hub = hub(&emu).await;
    let err = read_lease(&hub, &id).await.err().unwrap_or_default();
    quota_limit_of(&err, "Read requests per minute per user");
    assert_eq!(emu.count("oauth2.token"), 1);
    let (status, body) = support::raw(&emu, "GET", "_emulator/quota", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["quota"],
        json!({ "perUser": { "read": 0, "write": 0 }, "perProject": { "read": 0, "write": 0 } })
    );
    let set = json!({ "quota": { "perUser": { "read": 1, "write": 1 },
                                 "perProject": { "read": 5, "write": 5 } } });
    let (status, _) = support::raw(&emu, "POST", "_emulator/quota", Some(set), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        emu.quota(),
        Some(Quota {
            per_user: Limits::new(1, 1),
            per_project: Limits::new(5, 5)
        })
    );
    read_lease(&hub, &id)
        .await
        .unwrap_or_else(|e| panic!("a read under the new limits: {e}"));
    let (status, body) = support::raw(
        &emu,
        "POST",
        "_emulator/quota",
        Some(json!({ "perMinute": 60 })),
        None,
    )
    .await;
    assert_eq!(status, 400);
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("\"quota\" key is missing") && msg.contains("perUser"),
        "{msg}"
    );
    let (status, _) = support::raw(
        &emu,
        "POST",
        "_emulator/quota",
        Some(json!({ "quota": null })),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(emu.quota(), None);
    for _ in 0..5 {
        read_lease(&hub, &id)
            .await
            .unwrap_or_else(|e| panic!("a read with quotas off: {e}"));
    }
}

#[tokio::test]
async fn the_request_log_is_readable_from_the_handle_and_the_admin_endpoint() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    ok(
        "batchGet",
        hub.spreadsheets()
            .values_batch_get(&id)
            .add_ranges("'_ジョブキュー'!A1:P")
            .add_ranges(LEASE)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    batch(&hub, &id, json!({ "requests": [lease_cas("free", "x")] }))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let log = emu.requests();
    let methods: Vec<&str> = log.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(
        methods,
        vec![
            "oauth2.token",
            "spreadsheets.values.batchGet",
            "spreadsheets.batchUpdate"
        ]
    );
    assert_eq!(
        log[1].ranges,
        vec!["'_ジョブキュー'!A1:P".to_string(), LEASE.to_string()]
    );
    assert_eq!(log[1].status, 200);
    assert!(
        log[1].bytes_out > 0 && log[2].bytes_in > 0,
        "bytes are counted: {log:?}"
    );
    assert_eq!(emu.count("spreadsheets.batchUpdate"), 1);

    let (status, body) = support::raw(&emu, "GET", "_emulator/requests", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(body["counters"]["total"], 3, "{body}");
    assert_eq!(
        body["requests"][1]["method"],
        "spreadsheets.values.batchGet"
    );
    let rule = json!({ "method": "spreadsheets.get", "fault": { "status": 503 }, "remaining": 1 });
    let (status, body) = support::raw(&emu, "POST", "_emulator/faults", Some(rule), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(emu.faults().len(), 1);
    let err = api_error(
        "get after admin fault",
        hub.spreadsheets().get(&id).add_scope(SCOPE).doit().await,
    );
    assert_eq!(err["error"]["code"], 503);
    let (status, _) = support::raw(&emu, "POST", "_emulator/reset", Some(json!({})), None).await;
    assert_eq!(status, 200);
    assert!(emu.requests().is_empty(), "reset clears the log");
}

#[tokio::test]
async fn concurrent_compare_and_swaps_have_exactly_one_winner() {
    let emu = support::start_emulator().await;
    let id = emu.spreadsheet_id().to_string();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let hub = hub(&emu).await;
        let id = id.clone();
        tasks.spawn(async move {
            let r = batch(
                &hub,
                &id,
                json!({ "requests": [lease_cas("free", &format!("lease|{i}"))] }),
            )
            .await;
            r.map(|v| v["replies"][0]["findReplace"]["occurrencesChanged"] == 1)
        });
    }
    let mut winners = 0;
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(true)) => winners += 1,
            Ok(Ok(false)) => {}
            other => panic!("CAS task failed: {other:?}"),
        }
    }
    assert_eq!(winners, 1, "exactly one concurrent CAS may win");
}

#[tokio::test]
async fn state_file_persists_across_restarts() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let state = dir.path().join("emulator.json");
    let opts = EmulatorOptions {
        state: Some(state.clone()),
        ..EmulatorOptions::default()
    };
    let emu = support::start_with(opts.clone()).await;
    let id = emu.spreadsheet_id().to_string();
    let first = hub(&emu).await;
    put(
        &first,
        &id,
        "'_ジョブキュー'!A2",
        json!([["persisted"]]),
        "RAW",
    )
    .await;
    emu.shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
    let again = support::start_with(opts).await;
    assert_eq!(
        again.spreadsheet_id(),
        id,
        "the spreadsheet id survives a restart"
    );
    let hub = hub(&again).await;
    let rows = get_values(&hub, &id, "'_ジョブキュー'!A2", "UNFORMATTED_VALUE").await;
    assert_eq!(rows, vec![vec![json!("persisted")]]);
}

#[tokio::test]
async fn spreadsheet_ids_named_after_the_first_are_seeded_alike_and_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let opts = EmulatorOptions {
        state: Some(dir.path().join("emulator.json")),
        spreadsheet_id: Some("run-panel".into()),
        also: vec!["approvals".into()],
        ..EmulatorOptions::default()
    };
    let emu = support::start_with(opts.clone()).await;
    assert_eq!(emu.spreadsheet_id(), "run-panel");
    let hub = hub(&emu).await;
    put(
        &hub,
        "approvals",
        "'_ジョブキュー'!A2",
        json!([["kept"]]),
        "RAW",
    )
    .await;
    emu.shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));

    // A restart naming one more adds it, seeded, and keeps what the others hold.
    let again = support::start_with(EmulatorOptions {
        also: vec!["approvals".into(), "billing".into()],
        ..opts
    })
    .await;
    let hub = support::hub(&again).await;
    let kept = get_values(&hub, "approvals", "'_ジョブキュー'!A2", "UNFORMATTED_VALUE").await;
    assert_eq!(kept, vec![vec![json!("kept")]], "approvals kept its rows");
    let header = get_values(&hub, "billing", "'_ジョブキュー'!A1", "UNFORMATTED_VALUE").await;
    assert_eq!(
        header,
        vec![vec![json!("jobId")]],
        "billing is seeded like the first"
    );
    again
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));

    // A first id the state file lacks is seeded too, and is the one the emulator opens.
    let third = support::start_with(EmulatorOptions {
        spreadsheet_id: Some("new-first".into()),
        also: Vec::new(),
        state: Some(dir.path().join("emulator.json")),
        ..EmulatorOptions::default()
    })
    .await;
    assert_eq!(third.spreadsheet_id(), "new-first");
    let hub = support::hub(&third).await;
    let header = get_values(&hub, "new-first", "'_ジョブキュー'!A1", "UNFORMATTED_VALUE").await;
    assert_eq!(header, vec![vec![json!("jobId")]], "new-first is seeded");
    let kept = get_values(&hub, "approvals", "'_ジョブキュー'!A2", "UNFORMATTED_VALUE").await;
    assert_eq!(kept, vec![vec![json!("kept")]], "and the others stay");
}

/// An access token from the emulator's `/token`, obtained through yup-oauth2.
async fn emu_token(emu: &sheetq::emulator::Emulator) -> String {
    let key = yup_oauth2::parse_service_account_key(emu.credentials_json())
        .unwrap_or_else(|e| panic!("credentials: {e}"));
    let auth = yup_oauth2::ServiceAccountAuthenticator::builder(key)
        .build()
        .await
        .unwrap_or_else(|e| panic!("authenticator: {e}"));
    let token = auth
        .token(&["https://www.googleapis.com/auth/spreadsheets"])
        .await
        .unwrap_or_else(|e| panic!("token: {e}"));
    token.token().unwrap_or_default().to_string()
}

/// Benchmark: a full-sheet `values.batchGet` of a 100,000-row × 16-column queue, through
/// google-sheets4 over HTTP. Run with
/// `cargo test --release --test it emulator::full_queue_batch_get_100k_rows -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run in release mode"]
async fn full_queue_batch_get_100k_rows() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let rows: Vec<Json> = (0..100_000)
        .map(|i| {
            json!([
                format!("{:08x}-0000-4000-8000-{:012x}", i, i),
                46356.0 + i as f64 / 1440.0,
                format!("user{}@example.com", i % 50),
                "サーバーA",
                8 + i % 4,
                "サーバーA",
                "動作確認 (2秒)",
                "sleep",
                "{\"seconds\":2}",
                "",
                "完了",
                46356.5,
                46356.6,
                "https://example.com/r",
                "ok",
                "vm-1/0 token"
            ])
        })
        .collect();
    emu.with_spreadsheet(|ss| {
        if let Some(q) = ss.sheet_by_title_mut(QUEUE_TITLE) {
            q.grow_to(100_001, 26);
        }
    })
    .unwrap_or_else(|e| panic!("grow: {e}"));
    emu.set_values("'_ジョブキュー'!A2", Json::Array(rows), false)
        .unwrap_or_else(|e| panic!("fill: {e}"));
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let reply = ok(
            "100k batchGet",
            hub.spreadsheets()
                .values_batch_get(&id)
                .add_ranges("'_ジョブキュー'!A1:P")
                .value_render_option("UNFORMATTED_VALUE")
                .date_time_render_option("SERIAL_NUMBER")
                .add_scope(SCOPE)
                .doit()
                .await,
        );
        let elapsed = t.elapsed();
        let n = reply
            .value_ranges
            .and_then(|v| v.into_iter().next())
            .and_then(|v| v.values)
            .map_or(0, |v| v.len());
        assert_eq!(n, 100_001);
        best = best.min(elapsed);
    }
    let bytes = emu.requests().last().map_or(0, |r| r.bytes_out);
    println!(
        "full-sheet batchGet of 100,000 x 16 through google-sheets4: best of 3 = {best:?} ({} MB reply)",
        bytes / 1_000_000
    );
    // The same read over raw HTTP, without the client's JSON parsing: the emulator's share.
    let token = emu_token(&emu).await;
    let path = format!(
        "v4/spreadsheets/{id}/values:batchGet?ranges={}&valueRenderOption=UNFORMATTED_VALUE",
        utf8_percent_encode("'_ジョブキュー'!A1:P", RANGE_SET)
    );
    let t = Instant::now();
    let (status, body) = support::raw_bytes(&emu, "GET", &path, None, Some(&token)).await;
    assert_eq!(status, 200);
    println!(
        "  of which the emulator and HTTP (raw fetch of {} MB, no client parsing): {:?}",
        body.len() / 1_000_000,
        t.elapsed()
    );
    assert!(best < Duration::from_secs(1), "too slow: {best:?}");
}

#[tokio::test]
async fn the_web_view_follows_a_change_and_a_persons_edit_is_logged_as_theirs() {
    let emu = support::start_emulator().await;
    let (status, page) = support::raw_bytes(&emu, "GET", "/", None, None).await;
    assert_eq!(status, 200);
    assert!(
        String::from_utf8_lossy(&page).contains("/_emulator/web/app.js"),
        "the page and its assets are served from the binary"
    );
    let (_, before) = support::raw(&emu, "GET", "/_emulator/web/view?sheet=1001", None, None).await;
    let version = before["version"]
        .as_u64()
        .unwrap_or_else(|| panic!("{before}"));
    assert_eq!(
        before["sheet"]["rows"][7][0]["b"], false,
        "A8 is an unticked checkbox"
    );

    // The page's long poll answers with the change a person's tick makes.
    let tick = json!({ "requests": [{ "updateCells": {
        "range": { "sheetId": 1001, "startRowIndex": 7, "endRowIndex": 8,
                   "startColumnIndex": 0, "endColumnIndex": 1 },
        "rows": [{ "values": [{ "userEnteredValue": { "boolValue": true } }] }],
        "fields": "userEnteredValue" } }] });
    let path = format!("/_emulator/web/view?sheet=1001&after={version}");
    let ((_, after), (status, _)) = tokio::join!(
        support::raw(&emu, "GET", &path, None, None),
        support::raw(&emu, "POST", "/_emulator/web/edit", Some(tick), None),
    );
    assert_eq!(status, 200);
    assert!(after["version"].as_u64() > Some(version), "{after}");
    assert_eq!(after["sheet"]["rows"][7][0]["b"], true);
    let log = emu.requests();
    let edit = log
        .iter()
        .find(|r| r.method == "person.edit")
        .unwrap_or_else(|| panic!("the edit is not in the request log: {log:?}"));
    assert_eq!(
        edit.user,
        emu.owner(),
        "an edit made without picking a person is the owner's"
    );
    assert!(edit.write);
    assert_eq!(
        emu.quota_refused().len(),
        0,
        "a person's edit is not an account's request"
    );

    // A bad edit is refused whole, with the API's message, and changes nothing.
    let bad = json!({ "requests": [
        { "updateCells": { "range": { "sheetId": 1001, "startRowIndex": 8, "endRowIndex": 9,
            "startColumnIndex": 0, "endColumnIndex": 1 },
            "rows": [{ "values": [{ "userEnteredValue": { "boolValue": true } }] }],
            "fields": "userEnteredValue" } },
        { "deleteDimension": { "range": { "sheetId": 424242, "dimension": "ROWS",
            "startIndex": 0, "endIndex": 1 } } }
    ] });
    let (status, reply) = support::raw(&emu, "POST", "/_emulator/web/edit", Some(bad), None).await;
    assert_eq!(status, 400, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .is_some_and(|e| e.contains("requests[1]")),
        "{reply}"
    );
    // Only the page's own JSON is taken: not a cross-site form, not another origin.
    let untick = r#"{"sheet":1001,"row":7,"col":0,"text":"FALSE"}"#;
    for headers in [
        vec![("content-type", "text/plain")],
        vec![
            ("content-type", "application/json"),
            ("origin", "http://evil.example"),
        ],
    ] {
        let status =
            support::post_with_headers(&emu, "/_emulator/web/type", untick, &headers).await;
        assert_eq!(status, 403, "{headers:?}");
    }
    // Typing is parsed as Sheets parses it: 50% is the number 0.5, shown as a percentage.
    let typed = json!({ "sheet": 1001, "row": 7, "col": 5, "text": "50%" });
    let (status, reply) =
        support::raw(&emu, "POST", "/_emulator/web/type", Some(typed), None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        emu.values("'サーバーA'!F8").unwrap_or_default(),
        vec![vec![json!(0.5)]]
    );
    let (_, now) = support::raw(&emu, "GET", "/_emulator/web/view?sheet=1001", None, None).await;
    assert_eq!(now["sheet"]["rows"][7][5]["t"], "50%");
    assert_eq!(
        now["sheet"]["rows"][7][0]["b"], true,
        "the refused untick changed nothing"
    );
    // A long poll that sees no change answers after a second with the tabs, the log and the
    // rates, and without the grid: the page keeps the one it has.
    let quiet = format!("/_emulator/web/view?sheet=1001&after={}", now["version"]);
    let (_, idle) = support::raw(&emu, "GET", &quiet, None, None).await;
    assert!(idle["sheet"].is_null(), "{idle}");
    assert!(
        idle["tabs"].as_array().is_some_and(|t| !t.is_empty()),
        "{idle}"
    );
    assert_eq!(idle["version"], now["version"]);
    assert_eq!(
        now["sheet"]["rows"][8][0]["b"], false,
        "the first request was not applied"
    );
}

#[tokio::test]
async fn a_value_longer_than_a_cell_holds_is_refused_whole_as_at_google() {
    let emu = support::start_emulator().await;
    let token = emu.person_token(&emu.owner());
    let long = "x".repeat(50_001);
    let path = format!(
        "v4/spreadsheets/{}/values/{}?valueInputOption=RAW",
        emu.spreadsheet_id(),
        percent_encoding::utf8_percent_encode(
            "'サーバーA'!K8:L8",
            percent_encoding::NON_ALPHANUMERIC
        )
    );
    let (status, body) = support::raw(
        &emu,
        "PUT",
        &path,
        Some(json!({ "values": [["fits", long]] })),
        Some(&token),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().is_some_and(
            |m| m.contains("more than the maximum of 50000 characters in a single cell")
        ),
        "{body}"
    );
    let k8 = emu.values("'サーバーA'!K8").unwrap_or_default();
    assert!(k8.is_empty(), "nothing of the request applied: {k8:?}");
    let path = format!("v4/spreadsheets/{}:batchUpdate", emu.spreadsheet_id());
    let (status, body) = support::raw(
        &emu,
        "POST",
        &path,
        Some(json!({ "requests": [{ "updateCells": {
            "start": { "sheetId": 1001, "rowIndex": 7, "columnIndex": 10 },
            "rows": [{ "values": [{ "userEnteredValue": { "stringValue": "x".repeat(50_001) } }] }],
            "fields": "userEnteredValue" } }] })),
        Some(&token),
    )
    .await;
    assert_eq!(status, 400, "updateCells too: {body}");
}
