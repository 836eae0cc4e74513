//! Developer metadata in the emulator, through `google-sheets4` over HTTP: creating,
//! reading, searching, updating and deleting it, its validation and storage limit, how it
//! shows in `spreadsheets.get` and in the state file, and who sees it: a `PROJECT` entry only
//! the developer project that created it, a `DOCUMENT` entry every caller.

use google_sheets4::api::{BatchUpdateSpreadsheetRequest, SearchDeveloperMetadataRequest};
use serde_json::{json, Value as Json};
use sheetq::emulator::{Emulator, EmulatorOptions};

use crate::support::{self, api_error, from_json, hub, ok, Hub, SCOPE};

pub async fn batch(hub: &Hub, id: &str, requests: Json) -> google_sheets4::Result<Json> {
    let req: BatchUpdateSpreadsheetRequest = from_json(json!({ "requests": requests }));
    hub.spreadsheets()
        .batch_update(req, id)
        .add_scope(SCOPE)
        .doit()
        .await
        .map(|(_, r)| support::to_json(&r))
}

/// A `createDeveloperMetadata` request for one row of sheet 0 (zero-based `row`).
pub fn row_tag(metadata_id: Option<i32>, key: &str, value: &str, row: i32) -> Json {
    let mut md = json!({
        "metadataKey": key, "metadataValue": value, "visibility": "PROJECT",
        "location": { "dimensionRange": {
            "sheetId": 0, "dimension": "ROWS", "startIndex": row, "endIndex": row + 1 } } });
    if let Some(id) = metadata_id {
        md["metadataId"] = json!(id);
    }
    json!({ "createDeveloperMetadata": { "developerMetadata": md } })
}

async fn get_metadata(hub: &Hub, id: &str, metadata_id: i32) -> google_sheets4::Result<Json> {
    hub.spreadsheets()
        .developer_metadata_get(id, metadata_id)
        .add_scope(SCOPE)
        .doit()
        .await
        .map(|(_, r)| support::to_json(&r))
}

async fn search(hub: &Hub, id: &str, filters: Json) -> Json {
    let req: SearchDeveloperMetadataRequest = from_json(json!({ "dataFilters": filters }));
    let reply = ok(
        "developerMetadata.search",
        hub.spreadsheets()
            .developer_metadata_search(req, id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    support::to_json(&reply)
}

fn message(err: &Json) -> String {
    err["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn created_row_metadata_is_returned_by_get_with_its_location() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let reply = batch(
        &hub,
        &id,
        json!([row_tag(Some(1234), "sheetq.job", "job-1", 4)]),
    )
    .await
    .unwrap_or_else(|e| panic!("create: {e:?}"));
    let want = json!({
        "metadataId": 1234, "metadataKey": "sheetq.job", "metadataValue": "job-1",
        "visibility": "PROJECT",
        "location": { "locationType": "ROW",
                      "dimensionRange": { "dimension": "ROWS", "startIndex": 4, "endIndex": 5 } } });
    assert_eq!(
        reply["replies"][0],
        json!({ "createDeveloperMetadata": { "developerMetadata": want } }),
        "the reply echoes the created metadata with its location"
    );
    let got = get_metadata(&hub, &id, 1234)
        .await
        .unwrap_or_else(|e| panic!("get: {e:?}"));
    assert_eq!(got, want);
    let missing = api_error("get of an unknown id", get_metadata(&hub, &id, 99).await);
    assert_eq!(missing["error"]["code"], 404, "{missing}");
    assert_eq!(missing["error"]["status"], "NOT_FOUND");
}

#[tokio::test]
async fn a_server_assigned_id_is_positive_and_unique() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let reply = batch(
        &hub,
        &id,
        json!([row_tag(None, "k", "a", 1), row_tag(None, "k", "b", 2)]),
    )
    .await
    .unwrap_or_else(|e| panic!("create: {e:?}"));
    let ids: Vec<i64> = (0..2)
        .map(|i| {
            reply["replies"][i]["createDeveloperMetadata"]["developerMetadata"]["metadataId"]
                .as_i64()
                .unwrap_or(0)
        })
        .collect();
    assert!(ids.iter().all(|n| *n > 0), "ids must be positive: {ids:?}");
    assert_ne!(ids[0], ids[1], "two creates must not share an id");
}

#[tokio::test]
async fn an_existing_explicit_id_fails_the_whole_batch() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    batch(&hub, &id, json!([row_tag(Some(7), "claim", "first", 1)]))
        .await
        .unwrap_or_else(|e| panic!("first create: {e:?}"));
    let before = emu.values("Sheet1!A1:B3").unwrap_or_default();
    let err = api_error(
        "create with an id in use",
        batch(
            &hub,
            &id,
            json!([
                { "updateCells": { "start": { "sheetId": 0, "rowIndex": 0, "columnIndex": 0 },
                    "rows": [{ "values": [{ "userEnteredValue": { "stringValue": "written" } }] }],
                    "fields": "userEnteredValue" } },
                row_tag(Some(7), "claim", "second", 2),
            ]),
        )
        .await,
    );
    assert_eq!(err["error"]["code"], 400, "{err}");
    assert_eq!(err["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(
        message(&err),
        "Invalid requests[1].createDeveloperMetadata: Developer metadata with id 7 already exists."
    );
    assert_eq!(
        emu.values("Sheet1!A1:B3").unwrap_or_default(),
        before,
        "the cell write before the failing create must not be applied"
    );
    let kept = get_metadata(&hub, &id, 7)
        .await
        .unwrap_or_else(|e| panic!("get: {e:?}"));
    assert_eq!(
        kept["metadataValue"], "first",
        "the first metadata is untouched"
    );
}

#[tokio::test]
async fn creates_are_validated_as_google_documents() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let loc = json!({ "dimensionRange": { "sheetId": 0, "dimension": "ROWS", "startIndex": 1, "endIndex": 2 } });
    let cases = [
        (
            json!({ "visibility": "DOCUMENT", "location": loc }),
            "Developer metadata must always have a key specified.",
        ),
        (
            json!({ "metadataKey": "k", "location": loc }),
            "Developer metadata must always have a visibility specified.",
        ),
        (
            json!({ "metadataKey": "k", "visibility": "DOCUMENT" }),
            "Developer metadata must always have a location specified.",
        ),
        (
            json!({ "metadataId": -3, "metadataKey": "k", "visibility": "DOCUMENT", "location": loc }),
            "metadataId must be positive, got -3.",
        ),
        (
            json!({ "metadataKey": "k", "visibility": "DOCUMENT",
                    "location": { "dimensionRange": { "sheetId": 0, "dimension": "ROWS", "startIndex": 1, "endIndex": 3 } } }),
            "The dimensionRange of a developer metadata location must represent a single row or column (got startIndex 1, endIndex 3).",
        ),
        (
            json!({ "metadataKey": "k", "visibility": "DOCUMENT",
                    "location": { "dimensionRange": { "sheetId": 0, "dimension": "ROWS", "startIndex": 1 } } }),
            "The dimensionRange of a developer metadata location must be bounded: it must represent a single row or column.",
        ),
        (
            json!({ "metadataKey": "k", "visibility": "DOCUMENT", "location": { "sheetId": 42 } }),
            "No grid with id: 42",
        ),
        (
            json!({ "metadataKey": "k", "visibility": "DOCUMENT",
                    "location": { "spreadsheet": true, "sheetId": 0 } }),
            "A developer metadata location must set exactly one of spreadsheet, sheetId or dimensionRange.",
        ),
    ];
    for (md, want) in cases {
        let err = api_error(
            &format!("create {md}"),
            batch(
                &hub,
                &id,
                json!([{ "createDeveloperMetadata": { "developerMetadata": md } }]),
            )
            .await,
        );
        assert_eq!(
            message(&err),
            format!("Invalid requests[0].createDeveloperMetadata: {want}"),
            "for {md}"
        );
    }
    assert!(
        emu.developer_metadata().is_empty(),
        "no invalid create may leave metadata behind"
    );
}

#[tokio::test]
async fn the_storage_limit_of_30000_characters_per_sheet_fails_the_batch() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    let big = "v".repeat(29_990);
    batch(&hub, &id, json!([row_tag(Some(1), "key", &big, 1)]))
        .await
        .unwrap_or_else(|e| panic!("29,993 characters fit: {e:?}"));
    let err = api_error(
        "a create over the limit",
        batch(&hub, &id, json!([row_tag(Some(2), "key", "0123456789", 2)])).await,
    );
    assert_eq!(
        message(&err),
        "Invalid requests[0].createDeveloperMetadata: Developer metadata storage limit \
         exceeded: the metadata of sheet 'Sheet1' would hold 30006 characters of keys and \
         values, more than the limit of 30000."
    );
    let spreadsheet_level = json!({ "createDeveloperMetadata": { "developerMetadata": {
        "metadataId": 3, "metadataKey": "key", "metadataValue": "0123456789",
        "visibility": "DOCUMENT", "location": { "spreadsheet": true } } } });
    batch(&hub, &id, json!([spreadsheet_level]))
        .await
        .unwrap_or_else(|e| panic!("the spreadsheet has its own budget: {e:?}"));
    let ids: Vec<Json> = emu
        .developer_metadata()
        .iter()
        .map(|m| m["metadataId"].clone())
        .collect();
    assert_eq!(ids, vec![json!(1), json!(3)]);
}

#[tokio::test]
async fn search_selects_by_key_value_and_intersecting_location() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    batch(
        &hub,
        &id,
        json!([
            row_tag(Some(1), "job", "a", 1),
            row_tag(Some(2), "job", "b", 2),
            row_tag(Some(3), "other", "a", 3),
            { "createDeveloperMetadata": { "developerMetadata": {
                "metadataId": 4, "metadataKey": "panel", "visibility": "DOCUMENT",
                "location": { "sheetId": 0 } } } },
        ]),
    )
    .await
    .unwrap_or_else(|e| panic!("create: {e:?}"));
    let ids = |reply: &Json| -> Vec<i64> {
        reply["matchedDeveloperMetadata"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m["developerMetadata"]["metadataId"].as_i64())
                    .collect()
            })
            .unwrap_or_default()
    };
    let by_key = search(
        &hub,
        &id,
        json!([{ "developerMetadataLookup": { "metadataKey": "job" } }]),
    )
    .await;
    assert_eq!(ids(&by_key), vec![1, 2]);
    assert_eq!(
        by_key["matchedDeveloperMetadata"][0]["dataFilters"],
        json!([{ "developerMetadataLookup": { "metadataKey": "job" } }]),
        "each match lists the filters that selected it"
    );
    let by_value = search(
        &hub,
        &id,
        json!([{ "developerMetadataLookup": { "metadataValue": "a", "locationType": "ROW" } }]),
    )
    .await;
    assert_eq!(ids(&by_value), vec![1, 3]);
    let row2 = json!({ "dimensionRange": { "sheetId": 0, "dimension": "ROWS", "startIndex": 2, "endIndex": 3 } });
    let exact = search(
        &hub,
        &id,
        json!([{ "developerMetadataLookup": {
            "metadataLocation": row2, "locationMatchingStrategy": "EXACT_LOCATION" } }]),
    )
    .await;
    assert_eq!(ids(&exact), vec![2], "EXACT: only the row itself");
    let intersecting = search(
        &hub,
        &id,
        json!([{ "developerMetadataLookup": { "metadataLocation": row2 } }]),
    )
    .await;
    assert_eq!(
        ids(&intersecting),
        vec![2, 4],
        "INTERSECTING (the documented default) also finds the sheet's metadata"
    );
    let by_range = search(&hub, &id, json!([{ "a1Range": "Sheet1!A2:C3" }])).await;
    assert_eq!(
        ids(&by_range),
        vec![1, 2],
        "a range selects the rows inside it"
    );
    let none = search(
        &hub,
        &id,
        json!([{ "developerMetadataLookup": { "metadataKey": "nope" } }]),
    )
    .await;
    assert_eq!(none, json!({}), "nothing matched: an empty reply");
    let req: SearchDeveloperMetadataRequest = from_json(json!({ "dataFilters": [
        { "developerMetadataLookup": { "locationType": "ROW",
            "metadataLocation": row2, "locationMatchingStrategy": "EXACT_LOCATION" } }] }));
    let err = api_error(
        "EXACT with a locationType",
        hub.spreadsheets()
            .developer_metadata_search(req, &id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        message(&err),
        "Invalid dataFilters[0]: locationType must be left unspecified when \
         locationMatchingStrategy is EXACT_LOCATION."
    );
}

#[tokio::test]
async fn update_and_delete_select_metadata_by_data_filter() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    batch(
        &hub,
        &id,
        json!([
            row_tag(Some(1), "job", "a", 1),
            row_tag(Some(2), "job", "b", 2)
        ]),
    )
    .await
    .unwrap_or_else(|e| panic!("create: {e:?}"));
    let reply = batch(
        &hub,
        &id,
        json!([{ "updateDeveloperMetadata": {
            "dataFilters": [{ "developerMetadataLookup": { "metadataId": 2 } }],
            "developerMetadata": { "metadataValue": "done",
                "location": { "dimensionRange": { "sheetId": 0, "dimension": "ROWS", "startIndex": 9, "endIndex": 10 } } },
            "fields": "metadataValue,location" } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("update: {e:?}"));
    let updated = &reply["replies"][0]["updateDeveloperMetadata"]["developerMetadata"];
    assert_eq!(updated[0]["metadataValue"], "done", "{reply}");
    assert_eq!(
        updated[0]["location"]["dimensionRange"]["startIndex"], 9,
        "a location update moves the metadata: {reply}"
    );
    assert_eq!(emu.metadata_row(2), Some(("Sheet1".to_string(), 10)));
    let deleted = batch(
        &hub,
        &id,
        json!([{ "deleteDeveloperMetadata": {
            "dataFilter": { "developerMetadataLookup": { "metadataKey": "job" } } } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("delete: {e:?}"));
    let gone: Vec<Json> = deleted["replies"][0]["deleteDeveloperMetadata"]
        ["deletedDeveloperMetadata"]
        .as_array()
        .map(|a| a.iter().map(|m| m["metadataId"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(gone, vec![json!(1), json!(2)]);
    assert!(emu.developer_metadata().is_empty());
    let again = batch(
        &hub,
        &id,
        json!([{ "deleteDeveloperMetadata": {
            "dataFilter": { "developerMetadataLookup": { "metadataKey": "job" } } } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("deleting nothing succeeds: {e:?}"));
    assert_eq!(
        again["replies"][0],
        json!({ "deleteDeveloperMetadata": {} })
    );
    let bad_mask = api_error(
        "update without fields",
        batch(
            &hub,
            &id,
            json!([{ "updateDeveloperMetadata": {
                "dataFilters": [{ "developerMetadataLookup": { "metadataKey": "x" } }],
                "developerMetadata": { "metadataValue": "v" } } }]),
        )
        .await,
    );
    assert_eq!(
        message(&bad_mask),
        "Invalid requests[0].updateDeveloperMetadata: At least one field must be specified in 'fields'."
    );
}

#[tokio::test]
async fn grid_data_lists_row_column_sheet_and_spreadsheet_metadata() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    batch(
        &hub,
        &id,
        json!([
            row_tag(Some(11), "row", "r", 1),
            { "createDeveloperMetadata": { "developerMetadata": {
                "metadataId": 12, "metadataKey": "col", "visibility": "DOCUMENT",
                "location": { "dimensionRange": { "sheetId": 0, "dimension": "COLUMNS", "startIndex": 0, "endIndex": 1 } } } } },
            { "createDeveloperMetadata": { "developerMetadata": {
                "metadataId": 13, "metadataKey": "sheet", "visibility": "DOCUMENT",
                "location": { "sheetId": 0 } } } },
            { "createDeveloperMetadata": { "developerMetadata": {
                "metadataId": 14, "metadataKey": "book", "visibility": "DOCUMENT",
                "location": { "spreadsheet": true } } } },
        ]),
    )
    .await
    .unwrap_or_else(|e| panic!("create: {e:?}"));
    let got = ok(
        "spreadsheets.get",
        hub.spreadsheets()
            .get(&id)
            .add_ranges("Sheet1!A1:B3")
            .include_grid_data(true)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    let got = support::to_json(&got);
    let data = &got["sheets"][0]["data"][0];
    let ids = |v: &Json| -> Vec<Json> {
        v["developerMetadata"]
            .as_array()
            .map(|a| a.iter().map(|m| m["metadataId"].clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        data["rowMetadata"].as_array().map(Vec::len),
        Some(3),
        "one entry per row: {data}"
    );
    assert_eq!(data["rowMetadata"][0], json!({ "pixelSize": 21 }));
    assert_eq!(ids(&data["rowMetadata"][1]), vec![json!(11)]);
    assert_eq!(data["rowMetadata"][1]["pixelSize"], 21);
    assert_eq!(ids(&data["columnMetadata"][0]), vec![json!(12)]);
    assert_eq!(data["columnMetadata"][1], json!({ "pixelSize": 100 }));
    assert_eq!(ids(&got["sheets"][0]), vec![json!(13)]);
    assert_eq!(ids(&got), vec![json!(14)]);
}

#[tokio::test]
async fn row_metadata_survives_a_restart_through_the_state_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let opts = EmulatorOptions {
        state: Some(dir.path().join("emulator.json")),
        seed: sheetq::emulator::Seed::Empty,
        ..EmulatorOptions::default()
    };
    let emu = support::start_with(opts.clone()).await;
    let id = emu.spreadsheet_id().to_string();
    batch(
        &hub(&emu).await,
        &id,
        json!([row_tag(Some(5), "k", "v", 3)]),
    )
    .await
    .unwrap_or_else(|e| panic!("create: {e:?}"));
    emu.shutdown()
        .await
        .unwrap_or_else(|e| panic!("shutdown: {e}"));
    let again = support::start_with(opts).await;
    assert_eq!(again.metadata_row(5), Some(("Sheet1".to_string(), 4)));
    let got = get_metadata(&hub(&again).await, &id, 5)
        .await
        .unwrap_or_else(|e| panic!("get after restart: {e:?}"));
    assert_eq!(got["metadataValue"], "v");
}

// ---------------------------------------------------------------------------------------
// Visibility per developer project: "Project-visible metadata is only visible to and
// accessible by the developer project that created the metadata"; "Document-visible
// metadata is accessible from any developer project with access to the document"
// (spreadsheets.developerMetadata#DeveloperMetadata.DeveloperMetadataVisibility).

/// A caller of the Sheets API: its address (for failure messages) and a bearer token.
struct Caller {
    name: String,
    token: String,
}

/// A service account of its own developer project (`NAME@PROJECT.iam.gserviceaccount.com`),
/// signing in as sheetq does: credentials from `/_emulator/credentials?account=EMAIL`, a
/// JWT grant at the emulator's `/token`.
async fn service_account(emu: &Emulator, email: &str) -> Caller {
    let path = format!("_emulator/credentials?account={email}");
    let (status, body) = support::raw_bytes(emu, "GET", &path, None, None).await;
    let body = String::from_utf8_lossy(&body).to_string();
    assert_eq!(status, 200, "credentials of {email}: {body}");
    let key = yup_oauth2::parse_service_account_key(body)
        .unwrap_or_else(|e| panic!("credentials of {email} do not parse: {e}"));
    let auth = yup_oauth2::ServiceAccountAuthenticator::builder(key)
        .build()
        .await
        .unwrap_or_else(|e| panic!("authenticator of {email}: {e}"));
    let token = auth
        .token(&["https://www.googleapis.com/auth/spreadsheets"])
        .await
        .unwrap_or_else(|e| panic!("token of {email}: {e}"));
    Caller {
        name: email.to_string(),
        token: token.token().unwrap_or_default().to_string(),
    }
}

/// A person with a people token (their own OAuth client, never a service account's project).
fn person(emu: &Emulator, email: &str) -> Caller {
    Caller {
        name: email.to_string(),
        token: emu.person_token(email),
    }
}

fn row_location(row: i32) -> Json {
    json!({ "dimensionRange": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": row, "endIndex": row + 1 } })
}

fn create(id: i32, key: &str, value: &str, visibility: &str, row: i32) -> Json {
    json!({ "createDeveloperMetadata": { "developerMetadata": {
        "metadataId": id, "metadataKey": key, "metadataValue": value,
        "visibility": visibility, "location": row_location(row) } } })
}

fn by_key(key: &str) -> Json {
    json!({ "developerMetadataLookup": { "metadataKey": key } })
}

fn by_id(id: i32) -> Json {
    json!({ "developerMetadataLookup": { "metadataId": id } })
}

fn metadata_ids(list: &Json) -> Vec<i64> {
    list.as_array()
        .map(|a| a.iter().filter_map(|m| m["metadataId"].as_i64()).collect())
        .unwrap_or_default()
}

impl Caller {
    /// A raw call to `v4/spreadsheets/{id}{suffix}` with this caller's token.
    async fn call(
        &self,
        emu: &Emulator,
        method: &str,
        suffix: &str,
        body: Option<Json>,
    ) -> (u16, Json) {
        let path = format!("v4/spreadsheets/{}{suffix}", emu.spreadsheet_id());
        support::raw(emu, method, &path, body, Some(&self.token)).await
    }

    /// A call that must succeed.
    async fn ok(&self, emu: &Emulator, method: &str, suffix: &str, body: Json) -> Json {
        let (status, reply) = self.call(emu, method, suffix, Some(body.clone())).await;
        assert_eq!(
            status, 200,
            "{method} {suffix} by {} failed: {reply}\nrequest: {body}",
            self.name
        );
        reply
    }

    async fn batch(&self, emu: &Emulator, requests: Json) -> Json {
        self.ok(emu, "POST", ":batchUpdate", json!({ "requests": requests }))
            .await
    }

    /// The ids `developerMetadata.search` finds with `filters`.
    async fn search(&self, emu: &Emulator, filters: Json) -> Vec<i64> {
        let reply = self
            .ok(
                emu,
                "POST",
                "/developerMetadata:search",
                json!({ "dataFilters": filters }),
            )
            .await;
        reply["matchedDeveloperMetadata"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m["developerMetadata"]["metadataId"].as_i64())
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn get(&self, emu: &Emulator, metadata_id: i32) -> (u16, Json) {
        self.call(
            emu,
            "GET",
            &format!("/developerMetadata/{metadata_id}"),
            None,
        )
        .await
    }

    /// The metadata ids `spreadsheets.get` with grid data lists on each row of Sheet1!A1:B6,
    /// and on the spreadsheet and the sheet themselves.
    async fn grid_metadata(&self, emu: &Emulator) -> (Vec<Vec<i64>>, Vec<i64>) {
        let (status, got) = self
            .call(
                emu,
                "GET",
                "?ranges=Sheet1%21A1%3AB6&includeGridData=true",
                None,
            )
            .await;
        assert_eq!(status, 200, "spreadsheets.get by {}: {got}", self.name);
        let rows = got["sheets"][0]["data"][0]["rowMetadata"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| metadata_ids(&r["developerMetadata"]))
                    .collect()
            })
            .unwrap_or_default();
        let mut others = metadata_ids(&got["developerMetadata"]);
        others.extend(metadata_ids(&got["sheets"][0]["developerMetadata"]));
        (rows, others)
    }
}

const A: &str = "sheetq@proj-a.iam.gserviceaccount.com";
const A2: &str = "reporter@proj-a.iam.gserviceaccount.com";
const B: &str = "sheetq@proj-b.iam.gserviceaccount.com";
const ALICE: &str = "alice@example.com";

/// An empty spreadsheet with text on rows 1..=6 of column A.
async fn sheet_with_rows() -> Emulator {
    let emu = support::start_empty().await;
    emu.set_values(
        "Sheet1!A1",
        json!([["r1"], ["r2"], ["r3"], ["r4"], ["r5"], ["r6"]]),
        false,
    )
    .unwrap_or_else(|e| panic!("seed: {e:?}"));
    emu
}

#[tokio::test]
async fn a_project_entry_is_seen_by_its_project_alone_and_a_document_entry_by_everyone() {
    let emu = sheet_with_rows().await;
    let a = service_account(&emu, A).await;
    let a2 = service_account(&emu, A2).await;
    let b = service_account(&emu, B).await;
    let alice = person(&emu, ALICE);
    a.batch(
        &emu,
        json!([
            create(101, "a.private", "mine", "PROJECT", 2),
            create(102, "shared", "ours", "DOCUMENT", 3),
            { "createDeveloperMetadata": { "developerMetadata": {
                "metadataId": 103, "metadataKey": "a.private", "visibility": "PROJECT",
                "location": { "spreadsheet": true } } } },
        ]),
    )
    .await;

    for owner in [&a, &a2] {
        assert_eq!(
            owner.search(&emu, json!([by_key("a.private")])).await,
            vec![101, 103],
            "{} (proj-a) must find proj-a's PROJECT entries",
            owner.name
        );
        let (status, got) = owner.get(&emu, 101).await;
        assert_eq!(
            (status, got["metadataValue"].clone()),
            (200, json!("mine")),
            "{} (proj-a) must get proj-a's PROJECT entry: {got}",
            owner.name
        );
        let (rows, others) = owner.grid_metadata(&emu).await;
        assert_eq!(
            rows[2],
            vec![101],
            "{}: row 3 must list proj-a's entry in rowMetadata",
            owner.name
        );
        assert_eq!(
            others,
            vec![103],
            "{}: the spreadsheet's own entry",
            owner.name
        );
    }

    let (_, missing) = a.get(&emu, 999).await;
    let not_found = message(&missing).replace("999", "101");
    for other in [&alice, &b] {
        let who = &other.name;
        assert_eq!(
            other.search(&emu, json!([by_key("a.private")])).await,
            Vec::<i64>::new(),
            "{who} must not find proj-a's PROJECT entries by key"
        );
        assert_eq!(
            other.search(&emu, json!([by_id(101)])).await,
            Vec::<i64>::new(),
            "{who} must not find proj-a's PROJECT entry by id"
        );
        assert_eq!(
            other
                .search(&emu, json!([{ "a1Range": "Sheet1!A1:B6" }]))
                .await,
            vec![102],
            "{who}: a range must select only the DOCUMENT entry among the rows"
        );
        let (status, got) = other.get(&emu, 101).await;
        assert_eq!(
            (status, got["error"]["status"].clone(), message(&got)),
            (404, json!("NOT_FOUND"), not_found.clone()),
            "{who}: get of proj-a's PROJECT entry must answer as for a missing id: {got}"
        );
        let (rows, others) = other.grid_metadata(&emu).await;
        assert_eq!(
            rows[2],
            Vec::<i64>::new(),
            "{who}: row 3 must show no rowMetadata entry of proj-a"
        );
        assert_eq!(rows[3], vec![102], "{who}: row 4 shows the DOCUMENT entry");
        assert!(
            others.is_empty(),
            "{who}: the spreadsheet's PROJECT entry of proj-a must not show: {others:?}"
        );
        let (status, read) = other
            .call(
                &emu,
                "POST",
                "/values:batchGetByDataFilter",
                Some(json!({ "dataFilters": [by_id(101)] })),
            )
            .await;
        assert_eq!(
            (status, read.get("valueRanges")),
            (200, None),
            "{who}: a read by proj-a's entry must match no range: {read}"
        );
        let (status, wrote) = other
            .call(
                &emu,
                "POST",
                "/values:batchUpdateByDataFilter",
                Some(json!({ "valueInputOption": "RAW",
                    "data": [{ "dataFilter": by_id(101), "values": [["overwritten"]] }] })),
            )
            .await;
        assert_eq!(
            status, 400,
            "{who}: a write by proj-a's entry must match nothing: {wrote}"
        );
        let (status, cleared) = other
            .call(
                &emu,
                "POST",
                "/values:batchClearByDataFilter",
                Some(json!({ "dataFilters": [by_id(101)] })),
            )
            .await;
        assert_eq!(
            status, 400,
            "{who}: a clear by proj-a's entry must match nothing: {cleared}"
        );
        let reply = other
            .batch(
                &emu,
                json!([
                    { "updateDeveloperMetadata": {
                        "dataFilters": [by_key("a.private")],
                        "developerMetadata": { "metadataValue": "taken", "visibility": "DOCUMENT",
                            "location": row_location(5) },
                        "fields": "metadataValue,visibility,location" } },
                    { "deleteDeveloperMetadata": { "dataFilter": by_key("a.private") } },
                ]),
            )
            .await;
        assert_eq!(
            reply["replies"],
            json!([{ "updateDeveloperMetadata": {} }, { "deleteDeveloperMetadata": {} }]),
            "{who}: an update and a delete by key must select nothing of proj-a"
        );
        let (status, kept) = a.get(&emu, 101).await;
        assert_eq!(
            (
                status,
                kept["metadataValue"].clone(),
                kept["visibility"].clone(),
                kept["location"]["dimensionRange"]["startIndex"].clone()
            ),
            (200, json!("mine"), json!("PROJECT"), json!(2)),
            "after {who}'s update and delete, proj-a's entry must be unchanged: {kept}"
        );
        assert_eq!(
            emu.values("Sheet1!A3").unwrap_or_default(),
            vec![vec![json!("r3")]],
            "{who}'s write and clear by proj-a's entry must leave row 3 alone"
        );
    }

    for caller in [&a, &b, &alice] {
        let who = &caller.name;
        assert_eq!(
            caller.search(&emu, json!([by_key("shared")])).await,
            vec![102],
            "{who} must find the DOCUMENT entry"
        );
        let (status, got) = caller.get(&emu, 102).await;
        assert_eq!(
            (status, got["metadataValue"].clone()),
            (200, json!("ours")),
            "{who} must get the DOCUMENT entry: {got}"
        );
        let (status, read) = caller
            .call(
                &emu,
                "POST",
                "/values:batchGetByDataFilter",
                Some(json!({ "dataFilters": [by_id(102)] })),
            )
            .await;
        assert_eq!(
            (
                status,
                read["valueRanges"][0]["valueRange"]["values"].clone()
            ),
            (200, json!([["r4"]])),
            "{who} must read row 4 by the DOCUMENT entry: {read}"
        );
    }
    let every: Vec<Json> = emu
        .developer_metadata()
        .iter()
        .map(|m| m["metadataId"].clone())
        .collect();
    assert_eq!(
        every,
        vec![json!(101), json!(102), json!(103)],
        "the emulator's test handle sees every entry"
    );
}

#[tokio::test]
async fn a_persons_project_entry_is_invisible_to_the_service_account() {
    let emu = sheet_with_rows().await;
    let alice = person(&emu, ALICE);
    let bob = person(&emu, "bob@example.com");
    let sa = service_account(&emu, A).await;
    let reply = alice
        .batch(&emu, json!([create(7, "alice.note", "hers", "PROJECT", 1)]))
        .await;
    assert_eq!(
        reply["replies"][0]["createDeveloperMetadata"]["developerMetadata"]["visibility"],
        "PROJECT",
        "a person may create PROJECT metadata: {reply}"
    );
    assert_eq!(
        alice.search(&emu, json!([by_key("alice.note")])).await,
        vec![7],
        "the person must find their own PROJECT entry"
    );
    let (status, got) = alice.get(&emu, 7).await;
    assert_eq!(status, 200, "the person must get their own entry: {got}");
    for other in [&sa, &bob] {
        let who = &other.name;
        assert_eq!(
            other.search(&emu, json!([by_key("alice.note")])).await,
            Vec::<i64>::new(),
            "{who} must not find the person's PROJECT entry"
        );
        let (status, got) = other.get(&emu, 7).await;
        assert_eq!(
            status, 404,
            "{who}: get of the person's PROJECT entry must be 404: {got}"
        );
        let (rows, _) = other.grid_metadata(&emu).await;
        assert!(
            rows.iter().all(Vec::is_empty),
            "{who}: no rowMetadata may show the person's entry: {rows:?}"
        );
    }
    let (status, err) = sa
        .call(
            &emu,
            "POST",
            ":batchUpdate",
            Some(json!({ "requests": [create(7, "sa.note", "its", "DOCUMENT", 2)] })),
        )
        .await;
    assert_eq!(
        (status, message(&err)),
        (
            400,
            "Invalid requests[0].createDeveloperMetadata: Developer metadata with id 7 already \
             exists."
                .to_string()
        ),
        "an id in use stays refused even when its entry is hidden from the caller: {err}"
    );
}

#[tokio::test]
async fn a_project_entry_goes_with_its_row_whoever_deletes_the_row() {
    let emu = sheet_with_rows().await;
    let a = service_account(&emu, A).await;
    let b = service_account(&emu, B).await;
    let alice = person(&emu, ALICE);
    a.batch(
        &emu,
        json!([
            create(1, "a.private", "first", "PROJECT", 1),
            create(2, "a.private", "second", "PROJECT", 2),
        ]),
    )
    .await;
    let delete_row = |index: i32| {
        json!([{ "deleteDimension": { "range": {
            "sheetId": 0, "dimension": "ROWS", "startIndex": index, "endIndex": index + 1 } } }])
    };
    alice.batch(&emu, delete_row(1)).await;
    let (status, got) = a.get(&emu, 1).await;
    assert_eq!(
        status, 404,
        "entry 1 must go with row 2, deleted by a person who could not see it: {got}"
    );
    let (status, got) = a.get(&emu, 2).await;
    assert_eq!(
        (
            status,
            got["location"]["dimensionRange"]["startIndex"].clone()
        ),
        (200, json!(1)),
        "entry 2 must have moved up with its row: {got}"
    );
    b.batch(&emu, delete_row(1)).await;
    assert_eq!(
        a.search(&emu, json!([by_key("a.private")])).await,
        Vec::<i64>::new(),
        "entry 2 must go with its row, deleted by another project"
    );
    assert!(
        emu.developer_metadata().is_empty(),
        "no entry may outlive its row: {:?}",
        emu.developer_metadata()
    );
}

// Google documents nothing about developer metadata on protected cells; the emulator takes
// the stricter reading: an entry on a row, column or sheet is changed only by someone who
// may edit there (a row or column: its cells; a sheet: all of it).

const MALLORY: &str = "mallory@example.com";

/// Google's whole reply to a write that touches a protected cell its author may not edit.
fn refusal() -> Json {
    json!({ "error": { "code": 400, "message": sheetq::emulator::protection::REFUSED,
                       "status": "INVALID_ARGUMENT" } })
}

/// A `createDeveloperMetadata` of `id` at `location`.
fn create_at(id: i32, visibility: &str, location: Json) -> Json {
    json!({ "createDeveloperMetadata": { "developerMetadata": {
        "metadataId": id, "metadataKey": "k", "metadataValue": "v",
        "visibility": visibility, "location": location } } })
}

fn queue_row(sheet_id: i32, row: i32) -> Json {
    json!({ "dimensionRange": {
        "sheetId": sheet_id, "dimension": "ROWS", "startIndex": row, "endIndex": row + 1 } })
}

/// `sheetq init` on `emu` as an operator runs it, protecting sheetq's hidden sheets (the
/// queue among them) for the service account, or (`protect: false`) leaving them open, as a
/// spreadsheet made before protection was. Returns the queue's sheet id and its number of
/// protections.
async fn init(emu: &Emulator, protect: bool) -> (i32, usize) {
    let state = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mut overrides = vec![("requests_per_minute", "50")];
    if !protect {
        overrides.push(("protect", "false"));
    }
    let config = support::daemon_config(emu, "init-md", state.path(), &overrides, "");
    let sheets = support::client(emu, &config).await;
    sheetq::admin::init(sheets.as_ref(), &config)
        .await
        .unwrap_or_else(|e| panic!("sheetq init: {e}"));
    let id = emu.spreadsheet_id().to_string();
    let queue = emu.with_store(|s| {
        s.get(&id).ok().and_then(|ss| {
            ss.sheets
                .iter()
                .find(|sh| sh.title == sheetq::emulator::seed::QUEUE_TITLE)
                .map(|sh| (sh.id, sh.protected.len()))
        })
    });
    queue.unwrap_or_else(|| panic!("init made no queue"))
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_where_a_person_may_not_edit_is_neither_created_updated_nor_deleted_by_them() {
    let emu = sheet_with_rows().await;
    let (queue, protections) = init(&emu, false).await;
    assert_eq!(protections, 0, "protect = false leaves the queue open");
    let sa = service_account(&emu, sheetq::emulator::auth::CLIENT_EMAIL).await;
    let mallory = person(&emu, MALLORY);
    let on_sheet = json!({ "sheetId": queue });
    let on_column = json!({ "dimensionRange": {
        "sheetId": queue, "dimension": "COLUMNS", "startIndex": 0, "endIndex": 1 } });

    // While the queue is open, mallory tags it with entries only her project sees.
    mallory
        .batch(
            &emu,
            json!([
                create_at(401, "PROJECT", queue_row(queue, 0)),
                create_at(402, "PROJECT", on_sheet.clone()),
            ]),
        )
        .await;
    let (again, protections) = init(&emu, true).await;
    assert_eq!(
        (again, protections),
        (queue, 1),
        "init protects the queue now"
    );

    // The service account init made an editor of the queue tags its rows and the sheet.
    sa.batch(
        &emu,
        json!([
            create_at(501, "DOCUMENT", queue_row(queue, 0)),
            create_at(502, "DOCUMENT", on_sheet.clone()),
            create_at(503, "PROJECT", queue_row(queue, 0)),
            create_at(504, "PROJECT", on_sheet.clone()),
            create_at(505, "DOCUMENT", on_column.clone()),
        ]),
    )
    .await;
    // Mallory's own entry on Sheet1, open to her.
    mallory
        .batch(&emu, json!([create_at(601, "DOCUMENT", row_location(1))]))
        .await;
    let before = emu.developer_metadata();

    let update = |filter: Json, md: Json, fields: &str| {
        json!({ "updateDeveloperMetadata": {
            "dataFilters": [filter], "developerMetadata": md, "fields": fields } })
    };
    let delete = |filter: Json| json!({ "deleteDeveloperMetadata": { "dataFilter": filter } });
    let cases = [
        (
            "create DOCUMENT on a queue row",
            create_at(701, "DOCUMENT", queue_row(queue, 0)),
        ),
        (
            "create PROJECT on a queue row",
            create_at(702, "PROJECT", queue_row(queue, 0)),
        ),
        (
            "create DOCUMENT on the queue sheet",
            create_at(703, "DOCUMENT", on_sheet.clone()),
        ),
        (
            "create PROJECT on the queue sheet",
            create_at(704, "PROJECT", on_sheet.clone()),
        ),
        (
            "create on a queue column",
            create_at(705, "DOCUMENT", on_column.clone()),
        ),
        (
            "update the value of a queue row's entry",
            update(
                by_id(501),
                json!({ "metadataValue": "forged" }),
                "metadataValue",
            ),
        ),
        (
            "update the key of the queue sheet's entry",
            update(
                by_id(502),
                json!({ "metadataKey": "forged" }),
                "metadataKey",
            ),
        ),
        (
            "make a queue row's entry PROJECT",
            update(by_id(501), json!({ "visibility": "PROJECT" }), "visibility"),
        ),
        (
            "move a queue row's entry to Sheet1",
            update(
                by_id(501),
                json!({ "location": row_location(2) }),
                "location",
            ),
        ),
        (
            "move her own entry onto a queue row",
            update(
                by_id(601),
                json!({ "location": queue_row(queue, 0) }),
                "location",
            ),
        ),
        (
            "move her own entry onto the queue sheet",
            update(
                by_id(601),
                json!({ "location": on_sheet.clone() }),
                "location",
            ),
        ),
        (
            "update by key, selecting a queue entry among others",
            update(
                by_key("k"),
                json!({ "metadataValue": "forged" }),
                "metadataValue",
            ),
        ),
        (
            "update her PROJECT entry on a queue row",
            update(
                by_id(401),
                json!({ "metadataValue": "forged" }),
                "metadataValue",
            ),
        ),
        (
            "make her PROJECT entry on the queue sheet DOCUMENT",
            update(
                by_id(402),
                json!({ "visibility": "DOCUMENT" }),
                "visibility",
            ),
        ),
        (
            "delete her PROJECT entry on a queue row",
            delete(by_id(401)),
        ),
        (
            "delete her PROJECT entry on the queue sheet",
            delete(by_id(402)),
        ),
        ("delete a queue row's entry", delete(by_id(501))),
        ("delete the queue sheet's entry", delete(by_id(502))),
        ("delete a queue column's entry", delete(by_id(505))),
        ("delete by key", delete(by_key("k"))),
    ];
    for (what, request) in cases {
        // The first request alone would pass: the batch is refused whole.
        let (status, body) = mallory
            .call(
                &emu,
                "POST",
                ":batchUpdate",
                Some(json!({ "requests": [
                    create_at(801, "DOCUMENT", row_location(3)), request] })),
            )
            .await;
        assert_eq!((status, &body), (400, &refusal()), "{what}");
    }
    assert_eq!(
        emu.developer_metadata(),
        before,
        "no refused request changed, added or removed an entry"
    );

    // On Sheet1, open to her, she does all of it; and on the spreadsheet, whose editor she is.
    mallory
        .batch(
            &emu,
            json!([
                create_at(901, "DOCUMENT", row_location(4)),
                create_at(902, "PROJECT", json!({ "sheetId": 0 })),
                create_at(903, "PROJECT", json!({ "spreadsheet": true })),
                update(
                    by_id(601),
                    json!({ "metadataValue": "moved", "location": row_location(5) }),
                    "metadataValue,location"
                ),
                update(
                    by_id(902),
                    json!({ "visibility": "DOCUMENT" }),
                    "visibility"
                ),
                delete(by_id(901)),
                delete(by_id(903)),
            ]),
        )
        .await;
    let (status, moved) = mallory.get(&emu, 601).await;
    assert_eq!(
        (status, &moved["location"]["dimensionRange"]["startIndex"]),
        (200, &json!(5)),
        "{moved}"
    );

    // The service account, an editor of the queue's protection, changes its own entries.
    sa.batch(
        &emu,
        json!([
            update(
                by_id(501),
                json!({ "metadataValue": "next" }),
                "metadataValue"
            ),
            update(
                by_id(504),
                json!({ "location": queue_row(queue, 0) }),
                "location"
            ),
            delete(by_id(502)),
            delete(by_id(505)),
        ]),
    )
    .await;
    let (status, got) = sa.get(&emu, 501).await;
    assert_eq!(
        (status, &got["metadataValue"]),
        (200, &json!("next")),
        "{got}"
    );
    let (status, got) = sa.get(&emu, 502).await;
    assert_eq!(status, 404, "deleted by the service account: {got}");
}
