//! Developer metadata in the emulator, through `google-sheets4` over HTTP: creating,
//! reading, searching, updating and deleting it, its validation and storage limit, and how it
//! shows in `spreadsheets.get` and in the state file.

use google_sheets4::api::{BatchUpdateSpreadsheetRequest, SearchDeveloperMetadataRequest};
use serde_json::{json, Value as Json};
use sheetq::emulator::EmulatorOptions;

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
