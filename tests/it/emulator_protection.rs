//! Who may edit what in the emulator, as at Google: the spreadsheet's owner (a person),
//! other people with tokens of their own, sheetq's service account; and the protected
//! ranges that stop everyone but their editors and the owner.

use google_sheets4::api::{
    AddProtectedRangeRequest, BatchUpdateSpreadsheetRequest, Editors, GridRange, ProtectedRange,
    Request, ValueRange,
};
use serde_json::{json, Value as Json};
use sheetq::emulator::auth::CLIENT_EMAIL;
use sheetq::emulator::protection::REFUSED;
use sheetq::emulator::seed::{QUEUE_SHEET_ID, QUEUE_TITLE};
use sheetq::emulator::{Access, Emulator, EmulatorOptions, DEFAULT_OWNER};

use crate::support::{self, from_json, hub, ok, Hub, SCOPE};

const ALICE: &str = "alice@example.com";
/// The first panel of the demo seed, サーバーA.
const PANEL: i32 = 1001;

/// A token for `email` from `POST /_emulator/people/token`, as a person's script would get
/// one; panics (with the reply) unless it is issued.
async fn token_for(emu: &Emulator, email: &str) -> String {
    let (status, reply) = support::raw(
        emu,
        "POST",
        "/_emulator/people/token",
        Some(json!({ "email": email })),
        None,
    )
    .await;
    assert_eq!(status, 200, "a token for {email}: {reply}");
    reply["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no access_token in {reply}"))
        .to_string()
}

/// `values.get` of `range` with `token`: status and body.
async fn read_as(emu: &Emulator, token: &str, range: &str) -> (u16, Json) {
    let path = format!(
        "v4/spreadsheets/{}/values/{}",
        emu.spreadsheet_id(),
        utf8(range)
    );
    support::raw(emu, "GET", &path, None, Some(token)).await
}

/// A range as it goes into a URL path.
fn utf8(range: &str) -> String {
    percent_encoding::utf8_percent_encode(range, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn a_person_gets_a_token_of_their_own_and_the_api_knows_them_by_it() {
    let emu = support::start_emulator().await;
    let (status, reply) = support::raw(
        &emu,
        "POST",
        "/_emulator/people/token",
        Some(json!({ "email": "Alice@Example.com" })),
        None,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["token_type"], "Bearer", "{reply}");
    assert_eq!(reply["expires_in"], 3600, "{reply}");
    let token = reply["access_token"].as_str().unwrap_or_default();
    let (status, body) = read_as(&emu, token, "'_ワーカー'!B1").await;
    assert_eq!(
        status, 200,
        "a person's token authenticates API calls: {body}"
    );
    assert_eq!(body["values"], json!([["free"]]));
    let call = emu
        .requests()
        .into_iter()
        .find(|r| r.method == "spreadsheets.values.get")
        .unwrap_or_else(|| panic!("the read is not in the request log"));
    assert_eq!(
        call.user, ALICE,
        "the call is logged (and its quota counted) as the person, by their address"
    );

    // The handle issues the same kind of token without HTTP.
    let bob = emu.person_token("bob@example.com");
    let (status, body) = read_as(&emu, &bob, "'_ワーカー'!B1").await;
    assert_eq!(status, 200, "{body}");
    let users: Vec<String> = emu.requests().into_iter().map(|r| r.user).collect();
    assert!(
        users.iter().any(|u| u == "bob@example.com"),
        "bob's read is his: {users:?}"
    );

    for (body, why) in [
        (json!({ "email": "alice" }), "an address without '@'"),
        (
            json!({ "email": "alice@example" }),
            "a domain without a dot",
        ),
        (json!({ "mail": ALICE }), "no email key"),
        (
            json!({ "email": Emulator::account("robot") }),
            "a service account's address",
        ),
    ] {
        let (status, reply) =
            support::raw(&emu, "POST", "/_emulator/people/token", Some(body), None).await;
        assert_eq!(status, 400, "{why} must be refused: {reply}");
        assert_eq!(
            reply["error"]["status"], "INVALID_ARGUMENT",
            "{why}: {reply}"
        );
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("alice@example.com") || message.contains("credentials"),
            "{why}: the message says what to send instead: {message}"
        );
    }

    // Sharing applies to people as to service accounts.
    emu.share(ALICE, Access::None);
    let (status, body) = read_as(&emu, token, "'_ワーカー'!B1").await;
    assert_eq!(status, 403, "a person the file is not shared with: {body}");
    assert_eq!(body["error"]["status"], "PERMISSION_DENIED", "{body}");
}

/// `values.update` of one cell of spreadsheet `id` with `token`: status and body.
async fn write_in(emu: &Emulator, id: &str, token: &str, range: &str) -> (u16, Json) {
    let path = format!(
        "v4/spreadsheets/{id}/values/{}?valueInputOption=RAW",
        utf8(range)
    );
    support::raw(
        emu,
        "PUT",
        &path,
        Some(json!({ "values": [["x"]] })),
        Some(token),
    )
    .await
}

#[tokio::test]
async fn sharing_is_per_file_and_a_protected_ranges_editor_edits_only_if_the_file_is_shared_so() {
    let emu = support::start_emulator().await;
    let first = emu.spreadsheet_id().to_string();
    let second = emu.add_spreadsheet(sheetq::emulator::Seed::Demo);
    let alice = token_for(&emu, ALICE).await;
    assert!(emu.share_one(&first, ALICE, Access::Reader));
    let (status, body) = write_in(&emu, &first, &alice, "'サーバーA'!K8").await;
    assert_eq!(
        status, 403,
        "a viewer of the first file may not write it: {body}"
    );
    let (status, body) = write_in(&emu, &second, &alice, "'サーバーA'!K8").await;
    assert_eq!(
        status, 200,
        "the second file is shared with her as editor: {body}"
    );
    assert!(emu.share_one(&first, ALICE, Access::Commenter));
    let (status, body) = write_in(&emu, &first, &alice, "'サーバーA'!K8").await;
    assert_eq!(
        status, 403,
        "to the Sheets API a commenter is a viewer: {body}"
    );

    // The owner protects K8 for alice; being listed does not share the file with her.
    let owner = token_for(&emu, &emu.owner()).await;
    let path = format!("v4/spreadsheets/{first}:batchUpdate");
    let (status, body) = support::raw(
        &emu,
        "POST",
        &path,
        Some(
            json!({ "requests": [{ "addProtectedRange": { "protectedRange": {
            "range": { "sheetId": PANEL, "startRowIndex": 7, "endRowIndex": 8,
                       "startColumnIndex": 10, "endColumnIndex": 11 },
            "editors": { "users": [ALICE] } } } }] }),
        ),
        Some(&owner),
    )
    .await;
    assert_eq!(
        status, 200,
        "the owner may list a viewer as a range's editor: {body}"
    );
    let (status, body) = write_in(&emu, &first, &alice, "'サーバーA'!K8").await;
    assert_eq!(status, 403, "a listed viewer still may not write: {body}");
    let closed = || {
        emu.with_store(|s| {
            s.get(&first)
                .ok()
                .and_then(|ss| {
                    let i = ss.sheets.iter().position(|sh| sh.id == PANEL)?;
                    Some(sheetq::emulator::protection::closed_areas(ss, i, ALICE).len())
                })
                .unwrap_or(0)
        })
    };
    let as_viewer = closed();
    assert!(emu.share_one(&first, ALICE, Access::Writer));
    assert!(
        closed() < as_viewer,
        "K8 is closed to her while she only views the file, open once she edits it"
    );
    let (status, body) = write_in(&emu, &first, &alice, "'サーバーA'!K8").await;
    assert_eq!(
        status, 200,
        "once an editor of the file, the range lets her in: {body}"
    );

    // A file made through the API is its creator's alone.
    let hub = hub(&emu).await;
    let made = ok(
        "spreadsheets.create",
        hub.spreadsheets()
            .create(Default::default())
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let made = made.spreadsheet_id.unwrap_or_default();
    let path = format!("v4/spreadsheets/{made}/values/A1");
    let (status, body) = support::raw(&emu, "GET", &path, None, Some(&alice)).await;
    assert_eq!(status, 403, "a new file is shared with no one: {body}");
}

#[tokio::test]
async fn the_owner_is_a_person_who_always_has_the_file() {
    let emu = support::start_emulator().await;
    assert_eq!(emu.owner(), DEFAULT_OWNER);
    assert!(
        !emu.owner().ends_with(".gserviceaccount.com"),
        "the seeded spreadsheet is a person's, shared with the service account"
    );
    let owner = token_for(&emu, &emu.owner()).await;
    emu.share(&emu.owner(), Access::Reader);
    let path = format!(
        "v4/spreadsheets/{}/values/{}?valueInputOption=RAW",
        emu.spreadsheet_id(),
        utf8("'サーバーA'!K8")
    );
    let (status, body) = support::raw(
        &emu,
        "PUT",
        &path,
        Some(json!({ "values": [["by the owner"]] })),
        Some(&owner),
    )
    .await;
    assert_eq!(
        status, 200,
        "sharing cannot take the file from its owner: {body}"
    );

    // A spreadsheet made through the API belongs to the account that made it.
    let hub = hub(&emu).await;
    let made = ok(
        "spreadsheets.create",
        hub.spreadsheets()
            .create(Default::default())
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let id = made.spreadsheet_id.unwrap_or_default();
    let owner_of_made = emu.with_store(|s| s.get(&id).map(|ss| ss.owner.clone()));
    assert_eq!(
        owner_of_made.ok().as_deref(),
        Some("sheetq-emulator@sheetq-emulator.iam.gserviceaccount.com")
    );
}

#[tokio::test]
async fn the_owner_given_at_start_is_kept_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let state = dir.path().join("state.json");
    let first = support::start_with(EmulatorOptions {
        state: Some(state.clone()),
        owner: Some("carol@example.com".into()),
        ..EmulatorOptions::default()
    })
    .await;
    assert_eq!(first.owner(), "carol@example.com");
    first
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
    let again = support::start_with(EmulatorOptions {
        state: Some(state),
        ..EmulatorOptions::default()
    })
    .await;
    assert_eq!(
        again.owner(),
        "carol@example.com",
        "a restart without --owner keeps the owner the state file names"
    );
}

/// Google's whole reply to a write that touches a protected cell its author may not edit.
fn refusal() -> Json {
    json!({ "error": { "code": 400, "message": REFUSED, "status": "INVALID_ARGUMENT" } })
}

/// The service account protects the whole queue sheet with itself as the only editor it
/// names, through google-sheets4's own request types; returns the new range's id.
async fn protect_queue(hub: &Hub, id: &str) -> i32 {
    let req = BatchUpdateSpreadsheetRequest {
        requests: Some(vec![Request {
            add_protected_range: Some(AddProtectedRangeRequest {
                protected_range: Some(ProtectedRange {
                    range: Some(GridRange {
                        sheet_id: Some(QUEUE_SHEET_ID),
                        ..GridRange::default()
                    }),
                    description: Some("only sheetq writes the queue".into()),
                    warning_only: Some(false),
                    editors: Some(Editors {
                        users: Some(vec![CLIENT_EMAIL.to_string()]),
                        ..Editors::default()
                    }),
                    ..ProtectedRange::default()
                }),
            }),
            ..Request::default()
        }]),
        ..BatchUpdateSpreadsheetRequest::default()
    };
    let reply = ok(
        "addProtectedRange",
        hub.spreadsheets()
            .batch_update(req, id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let added = reply
        .replies
        .unwrap_or_default()
        .into_iter()
        .next()
        .and_then(|r| r.add_protected_range)
        .and_then(|a| a.protected_range)
        .unwrap_or_else(|| panic!("the reply carries no protectedRange"));
    assert_eq!(
        added.requesting_user_can_edit,
        Some(true),
        "the service account set it, so it can edit through it"
    );
    added
        .protected_range_id
        .unwrap_or_else(|| panic!("the reply carries no protectedRangeId"))
}

/// A raw call with `token`: `method` on `v4/spreadsheets/{id}{rest}` with `body`.
async fn call_as(
    emu: &Emulator,
    token: &str,
    method: &str,
    rest: &str,
    body: Option<Json>,
) -> (u16, Json) {
    let path = format!("v4/spreadsheets/{}{rest}", emu.spreadsheet_id());
    support::raw(emu, method, &path, body, Some(token)).await
}

async fn batch_as(emu: &Emulator, token: &str, requests: Json) -> (u16, Json) {
    let body = json!({ "requests": requests });
    call_as(emu, token, "POST", ":batchUpdate", Some(body)).await
}

async fn put_as(emu: &Emulator, token: &str, range: &str, rows: Json) -> (u16, Json) {
    let rest = format!("/values/{}?valueInputOption=RAW", utf8(range));
    call_as(emu, token, "PUT", &rest, Some(json!({ "values": rows }))).await
}

async fn append_as(emu: &Emulator, token: &str, range: &str, rows: Json) -> (u16, Json) {
    let rest = format!(
        "/values/{}:append?valueInputOption=RAW&insertDataOption=INSERT_ROWS",
        utf8(range)
    );
    call_as(emu, token, "POST", &rest, Some(json!({ "values": rows }))).await
}

/// The `protectedRanges` of sheet `sheet_id` as `token`'s account reads them.
async fn protected_as(emu: &Emulator, token: &str, sheet_id: i32) -> Json {
    let (status, body) = call_as(
        emu,
        token,
        "GET",
        "?fields=sheets(properties.sheetId,protectedRanges)",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["sheets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["properties"]["sheetId"] == sheet_id)
        .map(|s| s["protectedRanges"].clone())
        .unwrap_or(Json::Null)
}

fn tick(sheet: i32, row: u32, col: u32, value: bool) -> Json {
    json!({ "updateCells": {
        "range": { "sheetId": sheet, "startRowIndex": row, "endRowIndex": row + 1,
                   "startColumnIndex": col, "endColumnIndex": col + 1 },
        "rows": [{ "values": [{ "userEnteredValue": { "boolValue": value } }] }],
        "fields": "userEnteredValue" } })
}

#[tokio::test]
async fn the_service_account_protects_the_queue_for_itself_and_still_writes_and_appends() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let range_id = protect_queue(&hub, &id).await;

    let row: ValueRange = from_json(json!({ "values": [["job-1", "", "", "", "", "サーバーA"]] }));
    let appended = ok(
        "values.append by the service account",
        hub.spreadsheets()
            .values_append(row, &id, &utf8("'_ジョブキュー'!A:P"))
            .value_input_option("RAW")
            .insert_data_option("INSERT_ROWS")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert!(
        appended.updates.and_then(|u| u.updated_range).as_deref() == Some("'_ジョブキュー'!A2:F2"),
        "the service account writes through its own protection"
    );

    let got = ok(
        "spreadsheets.get",
        hub.spreadsheets()
            .get(&id)
            .param(
                "fields",
                "sheets(properties(sheetId,title),protectedRanges)",
            )
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let queue = got
        .sheets
        .unwrap_or_default()
        .into_iter()
        .find(|s| s.properties.as_ref().and_then(|p| p.title.as_deref()) == Some(QUEUE_TITLE))
        .unwrap_or_else(|| panic!("no queue sheet in spreadsheets.get"));
    let listed = queue.protected_ranges.unwrap_or_default();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let p = &listed[0];
    assert_eq!(p.protected_range_id, Some(range_id));
    assert_eq!(
        p.range.as_ref().and_then(|r| r.sheet_id),
        Some(QUEUE_SHEET_ID)
    );
    assert!(
        p.range.as_ref().is_some_and(|r| r.start_row_index.is_none()
            && r.end_row_index.is_none()
            && r.start_column_index.is_none()),
        "a whole sheet is a range with only its sheetId: {p:?}"
    );
    assert_eq!(
        p.editors.as_ref().and_then(|e| e.users.clone()),
        Some(vec![DEFAULT_OWNER.to_string(), CLIENT_EMAIL.to_string()]),
        "the owner is always an editor, beside the service account that set it"
    );
    assert_eq!(p.requesting_user_can_edit, Some(true));
    assert_eq!(
        p.description.as_deref(),
        Some("only sheetq writes the queue")
    );
}

#[tokio::test]
async fn a_person_is_refused_by_the_protected_queue_with_googles_body_and_nothing_changes() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    protect_queue(&hub, emu.spreadsheet_id()).await;
    let alice = token_for(&emu, ALICE).await;
    let before = support::sheet_values(&emu, QUEUE_TITLE);

    let (status, body) = put_as(&emu, &alice, "'_ジョブキュー'!A2", json!([["forged"]])).await;
    assert_eq!((status, &body), (400, &refusal()), "values.update");
    let (status, body) = append_as(
        &emu,
        &alice,
        "'_ジョブキュー'!A:P",
        json!([["forged", "", "", "", "", "-oProxyCommand=sh"]]),
    )
    .await;
    assert_eq!(
        (status, &body),
        (400, &refusal()),
        "values.append: the new row below the table is in the protected sheet too"
    );
    let path = format!("/values/{}:clear", utf8("'_ジョブキュー'!A1:P1"));
    let (status, body) = call_as(&emu, &alice, "POST", &path, None).await;
    assert_eq!((status, &body), (400, &refusal()), "values.clear");
    let (status, body) = call_as(
        &emu,
        &alice,
        "POST",
        "/values:batchUpdate",
        Some(json!({ "valueInputOption": "RAW", "data": [
            { "range": "'サーバーA'!K8", "values": [["fine on its own"]] },
            { "range": "'_ジョブキュー'!K1", "values": [["forged"]] } ] })),
    )
    .await;
    assert_eq!((status, &body), (400, &refusal()), "values.batchUpdate");
    for (what, request) in [
        ("updateCells", tick(QUEUE_SHEET_ID, 0, 0, true)),
        (
            "insertDimension",
            json!({ "insertDimension": { "range": { "sheetId": QUEUE_SHEET_ID,
                "dimension": "ROWS", "startIndex": 1, "endIndex": 2 } } }),
        ),
        (
            "sortRange",
            json!({ "sortRange": { "range": { "sheetId": QUEUE_SHEET_ID, "startRowIndex": 1 },
                "sortSpecs": [{ "dimensionIndex": 0 }] } }),
        ),
        (
            "deleteSheet",
            json!({ "deleteSheet": { "sheetId": QUEUE_SHEET_ID } }),
        ),
        (
            "updateSheetProperties",
            json!({ "updateSheetProperties": { "properties": { "sheetId": QUEUE_SHEET_ID,
                "title": "renamed" }, "fields": "title" } }),
        ),
        (
            "findReplace",
            json!({ "findReplace": { "find": "jobId", "replacement": "x", "allSheets": true } }),
        ),
    ] {
        // The first request alone would pass: the batch is refused whole.
        let (status, body) =
            batch_as(&emu, &alice, json!([tick(PANEL, 7, 0, true), request])).await;
        assert_eq!((status, &body), (400, &refusal()), "{what}");
    }
    assert_eq!(
        support::sheet_values(&emu, QUEUE_TITLE),
        before,
        "no refused write changed the queue"
    );
    assert_eq!(
        emu.values("'サーバーA'!A8").unwrap_or_default(),
        vec![vec![json!(false)]],
        "the tick of a refused batch was not applied"
    );
    assert!(
        emu.values("'サーバーA'!K8").unwrap_or_default().is_empty(),
        "the free half of a refused values.batchUpdate was not written"
    );

    // The handle's edits made as a person meet the same protection.
    let refused = emu
        .batch_update_as(ALICE, json!([tick(QUEUE_SHEET_ID, 0, 0, true)]))
        .err()
        .map(|e| e.body());
    assert_eq!(refused, Some(refusal()), "Emulator::batch_update_as");

    // Outside the protection the person writes as before.
    let (status, body) = batch_as(&emu, &alice, json!([tick(PANEL, 7, 0, true)])).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn the_owner_writes_through_any_protection() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    protect_queue(&hub, emu.spreadsheet_id()).await;
    let owner = token_for(&emu, &emu.owner()).await;
    let (status, body) = put_as(&emu, &owner, "'_ジョブキュー'!P1", json!([["ワーカー"]])).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        append_as(&emu, &owner, "'_ジョブキュー'!A:P", json!([["by-owner"]])).await;
    assert_eq!(status, 200, "{body}");
    let listed = protected_as(&emu, &owner, QUEUE_SHEET_ID).await;
    assert_eq!(listed[0]["requestingUserCanEdit"], true, "{listed}");
}

#[tokio::test]
async fn warning_only_protection_lets_api_writes_through_and_takes_no_editors() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let hidden_columns = json!({ "sheetId": PANEL, "startColumnIndex": 7, "endColumnIndex": 10 });
    let with_editors = crate::emulator_metadata::batch(
        &hub,
        &id,
        json!([{ "addProtectedRange": { "protectedRange": { "range": hidden_columns,
            "warningOnly": true, "editors": { "users": [ALICE] } } } }]),
    )
    .await;
    let err = support::api_error("warningOnly with editors", with_editors);
    assert_eq!(
        err["error"]["message"],
        "Invalid requests[0].addProtectedRange: ProtectedRange is warningOnly. Editors cannot be set on it."
    );
    let added = crate::emulator_metadata::batch(
        &hub,
        &id,
        json!([{ "addProtectedRange": { "protectedRange": { "range": hidden_columns,
            "warningOnly": true } } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("warning-only range: {e:?}"));
    assert_eq!(
        added["replies"][0]["addProtectedRange"]["protectedRange"]["warningOnly"], true,
        "{added}"
    );
    let alice = token_for(&emu, ALICE).await;
    let (status, body) = put_as(&emu, &alice, "'サーバーA'!H8", json!([["sleep"]])).await;
    assert_eq!(
        status, 200,
        "the API does not stop at a warning-only range: {body}"
    );
}

#[tokio::test]
async fn protected_ranges_are_changed_and_removed_by_their_editors_only_and_follow_their_rows() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let markers = json!({ "sheetId": PANEL, "startRowIndex": 0, "endRowIndex": 5,
                          "startColumnIndex": 6, "endColumnIndex": 7 });
    let added = crate::emulator_metadata::batch(
        &hub,
        &id,
        json!([{ "addProtectedRange": { "protectedRange": { "range": markers,
            "description": "panel markers" } } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("add: {e:?}"));
    let range_id = added["replies"][0]["addProtectedRange"]["protectedRange"]["protectedRangeId"]
        .as_i64()
        .unwrap_or_else(|| panic!("{added}"));
    let alice = token_for(&emu, ALICE).await;

    // A person may neither widen their rights nor remove the protection.
    let let_me_in = json!([{ "updateProtectedRange": {
        "protectedRange": { "protectedRangeId": range_id, "editors": { "users": [ALICE] } },
        "fields": "editors.users" } }]);
    let (status, body) = batch_as(&emu, &alice, let_me_in.clone()).await;
    assert_eq!((status, &body), (400, &refusal()), "updateProtectedRange");
    let remove = json!([{ "deleteProtectedRange": { "protectedRangeId": range_id } }]);
    let (status, body) = batch_as(&emu, &alice, remove.clone()).await;
    assert_eq!((status, &body), (400, &refusal()), "deleteProtectedRange");
    let seen = protected_as(&emu, &alice, PANEL).await;
    assert!(
        seen[0].get("editors").is_none() && seen[0].get("requestingUserCanEdit").is_none(),
        "a person who may not edit the range does not see its editors: {seen}"
    );
    let (status, _) = put_as(&emu, &alice, "'サーバーA'!G2", json!([["forged"]])).await;
    assert_eq!(status, 400);

    // Its editor lets her in; she may then edit the markers (and the range).
    crate::emulator_metadata::batch(&hub, &id, let_me_in)
        .await
        .unwrap_or_else(|e| panic!("update by its editor: {e:?}"));
    let (status, body) = put_as(&emu, &alice, "'サーバーA'!G2", json!([["サーバーA"]])).await;
    assert_eq!(status, 200, "{body}");
    let seen = protected_as(&emu, &alice, PANEL).await;
    assert_eq!(
        seen[0]["editors"]["users"],
        json!([DEFAULT_OWNER, CLIENT_EMAIL, ALICE]),
        "the update kept the owner and the service account that made it: {seen}"
    );

    // Two rows inserted above the markers move the range down with them.
    crate::emulator_metadata::batch(
        &hub,
        &id,
        json!([{ "insertDimension": { "range": { "sheetId": PANEL, "dimension": "ROWS",
            "startIndex": 0, "endIndex": 2 } } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("insert rows: {e:?}"));
    let seen = protected_as(&emu, &alice, PANEL).await;
    assert_eq!(
        seen[0]["range"],
        json!({ "sheetId": PANEL, "startRowIndex": 2, "endRowIndex": 7,
                "startColumnIndex": 6, "endColumnIndex": 7 }),
        "{seen}"
    );

    crate::emulator_metadata::batch(&hub, &id, remove.clone())
        .await
        .unwrap_or_else(|e| panic!("delete by its editor: {e:?}"));
    assert!(
        protected_as(&emu, &alice, PANEL).await.is_null(),
        "a sheet without protection lists none"
    );
    let again = crate::emulator_metadata::batch(&hub, &id, remove).await;
    let err = support::api_error("deleting it twice", again);
    assert_eq!(
        err["error"]["message"],
        format!("Invalid requests[0].deleteProtectedRange: No protected range with id: {range_id}")
    );
}

#[tokio::test]
async fn a_persons_edit_in_the_web_view_is_refused_by_protection_and_the_owners_is_not() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    crate::emulator_metadata::batch(
        &hub,
        &id,
        json!([{ "addProtectedRange": { "protectedRange": { "range": { "sheetId": PANEL,
            "startRowIndex": 7, "endRowIndex": 8, "startColumnIndex": 0, "endColumnIndex": 1 } } } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("protect A8: {e:?}"));

    let as_alice = format!("/_emulator/web/edit?as={ALICE}");
    let (status, reply) = support::raw(
        &emu,
        "POST",
        &as_alice,
        Some(json!({ "requests": [tick(PANEL, 7, 0, true)] })),
        None,
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    assert_eq!(reply["error"], REFUSED, "the page shows Google's words");
    let typed = json!({ "sheet": PANEL, "row": 7, "col": 0, "text": "TRUE" });
    let (status, reply) = support::raw(
        &emu,
        "POST",
        &format!("/_emulator/web/type?as={ALICE}"),
        Some(typed),
        None,
    )
    .await;
    assert_eq!((status, &reply["error"]), (400, &json!(REFUSED)), "{reply}");
    assert_eq!(
        emu.values("'サーバーA'!A8").unwrap_or_default(),
        vec![vec![json!(false)]],
        "the refused tick changed nothing"
    );
    let refused = emu
        .requests()
        .into_iter()
        .find(|r| r.method == "person.edit")
        .unwrap_or_else(|| panic!("the refused edit is not in the request log"));
    assert_eq!((refused.user.as_str(), refused.status), (ALICE, 400));

    let (_, view) = support::raw(
        &emu,
        "GET",
        &format!("/_emulator/web/view?sheet={PANEL}&as={ALICE}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        view["sheet"]["locked"],
        json!([[7, 8, 0, 1]]),
        "the page marks what alice may not edit"
    );
    let (_, owners) = support::raw(
        &emu,
        "GET",
        &format!("/_emulator/web/view?sheet={PANEL}"),
        None,
        None,
    )
    .await;
    assert_eq!(
        owners["sheet"]["locked"],
        json!([]),
        "the owner may edit all"
    );

    let (status, reply) = support::raw(
        &emu,
        "POST",
        "/_emulator/web/edit",
        Some(json!({ "requests": [tick(PANEL, 7, 0, true)] })),
        None,
    )
    .await;
    assert_eq!(status, 200, "the owner ticks the protected box: {reply}");
    assert_eq!(
        emu.values("'サーバーA'!A8").unwrap_or_default(),
        vec![vec![json!(true)]]
    );
}

#[tokio::test]
async fn protected_ranges_are_kept_in_the_state_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let state = dir.path().join("state.json");
    let opts = || EmulatorOptions {
        state: Some(state.clone()),
        ..EmulatorOptions::default()
    };
    let first = support::start_with(opts()).await;
    let range_id = protect_queue(&hub(&first).await, first.spreadsheet_id()).await;
    first
        .shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
    let again = support::start_with(opts()).await;
    let alice = again.person_token(ALICE);
    let listed = protected_as(&again, &alice, QUEUE_SHEET_ID).await;
    assert_eq!(listed[0]["protectedRangeId"], range_id, "{listed}");
    let (status, body) = put_as(&again, &alice, "'_ジョブキュー'!A2", json!([["forged"]])).await;
    assert_eq!(
        (status, &body),
        (400, &refusal()),
        "the protection still holds"
    );
}

const MALLORY: &str = "mallory@example.com";

/// `addProtectedRange` of `range` (a GridRange) with `users` as its editors.
fn protect(range: Json, users: &[&str]) -> Json {
    json!({ "addProtectedRange": { "protectedRange": {
        "range": range, "description": "mine", "editors": { "users": users } } } })
}

/// The id of the range an `addProtectedRange` reply added.
fn added_id(reply: &Json) -> i64 {
    reply["replies"][0]["addProtectedRange"]["protectedRange"]["protectedRangeId"]
        .as_i64()
        .unwrap_or_else(|| panic!("the reply names no protectedRangeId: {reply}"))
}

/// Every protected range of the handle's spreadsheet, as the owner reads them.
async fn every_protection(emu: &Emulator, owner: &str) -> Json {
    let (status, body) = call_as(
        emu,
        owner,
        "GET",
        "?fields=sheets(properties.sheetId,protectedRanges)",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

// Google's help gives protecting to those who can edit
// (https://support.google.com/docs/answer/1218656); the emulator reads that strictly: only
// cells the caller may edit, every one of them.
#[tokio::test]
async fn a_person_may_protect_only_cells_she_may_edit_and_the_owner_anywhere() {
    let emu = support::start_emulator().await;
    let hub = hub(&emu).await;
    protect_queue(&hub, emu.spreadsheet_id()).await;
    let mallory = token_for(&emu, MALLORY).await;
    let owner = token_for(&emu, &emu.owner()).await;
    let before = every_protection(&emu, &owner).await;
    let queue_values = support::sheet_values(&emu, QUEUE_TITLE);

    let in_queue = json!({ "sheetId": QUEUE_SHEET_ID, "startRowIndex": 1, "endRowIndex": 2 });
    for (what, range) in [
        ("a row of the queue", in_queue.clone()),
        (
            "a cell of the queue",
            json!({ "sheetId": QUEUE_SHEET_ID, "startRowIndex": 0, "endRowIndex": 1,
                    "startColumnIndex": 0, "endColumnIndex": 1 }),
        ),
        (
            "columns of the queue, every row",
            json!({ "sheetId": QUEUE_SHEET_ID, "startColumnIndex": 0, "endColumnIndex": 2 }),
        ),
    ] {
        // The first request alone would pass: the batch is refused whole.
        let (status, body) = batch_as(
            &emu,
            &mallory,
            json!([tick(PANEL, 7, 0, true), protect(range, &[MALLORY])]),
        )
        .await;
        assert_eq!((status, &body), (400, &refusal()), "{what}");
    }
    assert_eq!(
        every_protection(&emu, &owner).await,
        before,
        "no refused request added a protection"
    );
    assert_eq!(
        support::sheet_values(&emu, QUEUE_TITLE),
        queue_values,
        "the queue is as it was"
    );
    assert_eq!(
        emu.values("'サーバーA'!A8").unwrap_or_default(),
        vec![vec![json!(false)]],
        "the tick of a refused batch was not applied"
    );

    // A cell of a panel no one protected is hers to protect, for herself.
    let k8 = json!({ "sheetId": PANEL, "startRowIndex": 7, "endRowIndex": 8,
                     "startColumnIndex": 10, "endColumnIndex": 11 });
    let (status, reply) = batch_as(&emu, &mallory, json!([protect(k8, &[MALLORY])])).await;
    assert_eq!(status, 200, "{reply}");
    let hers = added_id(&reply);
    let alice = token_for(&emu, ALICE).await;
    let (status, _) = put_as(&emu, &alice, "'サーバーA'!K8", json!([["alice"]])).await;
    assert_eq!(status, 400, "her protection holds against alice");
    let (status, body) = put_as(&emu, &mallory, "'サーバーA'!K8", json!([["mine"]])).await;
    assert_eq!(status, 200, "{body}");

    // She may not move her range into the queue, though she is one of its editors.
    let (status, body) = batch_as(
        &emu,
        &mallory,
        json!([{ "updateProtectedRange": {
            "protectedRange": { "protectedRangeId": hers, "range": in_queue },
            "fields": "range" } }]),
    )
    .await;
    assert_eq!((status, &body), (400, &refusal()), "moved into the queue");

    // The owner protects inside the queue, and over her cell, for themselves.
    let (status, reply) = batch_as(
        &emu,
        &owner,
        json!([
            protect(in_queue, &[]),
            protect(
                json!({ "sheetId": PANEL, "startRowIndex": 7, "endRowIndex": 9,
                    "startColumnIndex": 10, "endColumnIndex": 12 }),
                &[]
            )
        ]),
    )
    .await;
    assert_eq!(status, 200, "the owner may protect anywhere: {reply}");

    // Her range now covers a cell closed to her: she may change its description, but not
    // whom it lets in, nor remove it.
    let (status, body) = batch_as(
        &emu,
        &mallory,
        json!([{ "updateProtectedRange": {
            "protectedRange": { "protectedRangeId": hers, "description": "still mine" },
            "fields": "description" } }]),
    )
    .await;
    assert_eq!(status, 200, "a description changes no one's rights: {body}");
    for (what, request) in [
        (
            "updateProtectedRange of its editors",
            json!({ "updateProtectedRange": {
                "protectedRange": { "protectedRangeId": hers,
                                    "editors": { "users": [MALLORY, ALICE] } },
                "fields": "editors.users" } }),
        ),
        (
            "updateProtectedRange to a warning",
            json!({ "updateProtectedRange": {
                "protectedRange": { "protectedRangeId": hers, "warningOnly": true },
                "fields": "warningOnly" } }),
        ),
        (
            "deleteProtectedRange",
            json!({ "deleteProtectedRange": { "protectedRangeId": hers } }),
        ),
    ] {
        let (status, body) = batch_as(&emu, &mallory, json!([request])).await;
        assert_eq!((status, &body), (400, &refusal()), "{what}");
    }
    let listed = protected_as(&emu, &owner, PANEL).await;
    let kept = listed
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["protectedRangeId"] == hers)
        .unwrap_or_else(|| panic!("her range is gone: {listed}"));
    assert_eq!(
        (&kept["description"], &kept["editors"]["users"]),
        (&json!("still mine"), &json!([DEFAULT_OWNER, MALLORY])),
        "{kept}"
    );
    let (status, body) = batch_as(
        &emu,
        &owner,
        json!([{ "deleteProtectedRange": { "protectedRangeId": hers } }]),
    )
    .await;
    assert_eq!(status, 200, "the owner removes it: {body}");
}
