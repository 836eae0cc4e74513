//! Rows as objects in the emulator: row developer metadata follows its row through a
//! person's inserts, deletes, moves and full-width sorts (and stays put on narrow sorts and
//! cut-and-paste), and `values.*ByDataFilter` reads and writes the row wherever it is when
//! the request is applied. Also `values.append`'s table detection and how the data-filter
//! methods are logged and counted for quota.

use google_sheets4::api::{
    BatchGetValuesByDataFilterRequest, BatchUpdateValuesByDataFilterRequest,
};
use serde_json::{json, Value as Json};
use sheetq::emulator::{Emulator, EmulatorOptions, Quota, Seed, SortMetadata};

use crate::emulator_metadata::{batch, row_tag};
use crate::support::{self, api_error, from_json, hub, ok, Hub, SCOPE};

fn lookup(metadata_id: i32) -> Json {
    json!({ "developerMetadataLookup": { "metadataId": metadata_id } })
}

/// Column A of `Sheet1` rows 1..=n as text ("" for empty).
fn column_a(emu: &Emulator, n: usize) -> Vec<String> {
    let rows = emu
        .values(&format!("Sheet1!A1:A{n}"))
        .unwrap_or_else(|e| panic!("read column A: {e:?}"));
    (0..n)
        .map(|i| {
            rows.get(i)
                .and_then(|r| r.first())
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Sheet1 with a header and rows `a`..`e` (A: name, B: n, C: state), metadata 101 on `c`.
async fn queue_with_tagged_row(opts: EmulatorOptions) -> (Emulator, Hub, String) {
    let emu = support::start_with(EmulatorOptions {
        seed: Seed::Empty,
        ..opts
    })
    .await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    emu.set_values(
        "Sheet1!A1",
        json!([
            ["name", "n", "state"],
            ["e", 5, "待機"],
            ["d", 4, "待機"],
            ["c", 3, "実行中"],
            ["b", 2, "待機"],
            ["a", 1, "待機"]
        ]),
        false,
    )
    .unwrap_or_else(|e| panic!("seed: {e:?}"));
    batch(
        &hub,
        &id,
        json!([row_tag(Some(101), "sheetq.claim", "c", 3)]),
    )
    .await
    .unwrap_or_else(|e| panic!("tag row c: {e:?}"));
    (emu, hub, id)
}

async fn read_by_filter(hub: &Hub, id: &str, filters: Json) -> Json {
    let req: BatchGetValuesByDataFilterRequest = from_json(json!({
        "dataFilters": filters, "valueRenderOption": "UNFORMATTED_VALUE" }));
    support::to_json(&ok(
        "values.batchGetByDataFilter",
        hub.spreadsheets()
            .values_batch_get_by_data_filter(req, id)
            .add_scope(SCOPE)
            .doit()
            .await,
    ))
}

/// The first matched row's values, as read by metadata id.
async fn row_by_metadata(hub: &Hub, id: &str, metadata_id: i32) -> Json {
    let reply = read_by_filter(hub, id, json!([lookup(metadata_id)])).await;
    reply["valueRanges"][0]["valueRange"]["values"][0].clone()
}

async fn token(emu: &Emulator) -> String {
    let key = yup_oauth2::parse_service_account_key(emu.credentials_json())
        .unwrap_or_else(|e| panic!("credentials: {e}"));
    let auth = yup_oauth2::ServiceAccountAuthenticator::builder(key)
        .build()
        .await
        .unwrap_or_else(|e| panic!("authenticator: {e}"));
    let t = auth
        .token(&["https://www.googleapis.com/auth/spreadsheets"])
        .await
        .unwrap_or_else(|e| panic!("token: {e}"));
    t.token().unwrap_or_default().to_string()
}

/// POSTs raw JSON (nulls kept, unlike google-sheets4) to `v4/spreadsheets/{id}{suffix}`.
async fn post_raw(emu: &Emulator, suffix: &str, body: Json) -> (u16, Json) {
    let path = format!("v4/spreadsheets/{}{suffix}", emu.spreadsheet_id());
    let t = token(emu).await;
    support::raw(emu, "POST", &path, Some(body), Some(&t)).await
}

#[tokio::test]
async fn row_metadata_follows_its_row_through_a_persons_edits() {
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    let person = |requests: Json| {
        emu.batch_update(requests)
            .unwrap_or_else(|e| panic!("a person's edit failed: {e:?}"))
    };
    emu.clear_requests();
    person(json!([{ "insertDimension": { "range": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": 1, "endIndex": 3 } } }]));
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 6)),
        "two rows inserted above"
    );
    person(json!([{ "deleteDimension": { "range": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": 1, "endIndex": 4 } } }]));
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 3)),
        "three rows deleted above"
    );
    // Move row c (index 2) to the bottom: before index 5 as counted before the move.
    person(
        json!([{ "moveDimension": { "destinationIndex": 5, "source": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": 2, "endIndex": 3 } } }]),
    );
    assert_eq!(column_a(&emu, 5), vec!["name", "d", "b", "a", "c"]);
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 5)),
        "moved with its row"
    );
    assert!(
        emu.requests().is_empty() && emu.counters().total == 0,
        "a person's edits through the handle are neither logged nor counted: {:?}",
        emu.requests()
    );
    let row = row_by_metadata(&hub, &id, 101).await;
    assert_eq!(
        row,
        json!(["c", 3, "実行中"]),
        "the lookup reads the row where it is now"
    );
    person(json!([{ "deleteDimension": { "range": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": 4, "endIndex": 5 } } }]));
    assert_eq!(
        emu.metadata_row(101),
        None,
        "deleting the row deletes its metadata"
    );
    assert!(emu.developer_metadata().is_empty());
}

#[tokio::test]
async fn a_filter_matching_nothing_is_left_out_of_reads_and_fails_writes() {
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    let read = read_by_filter(
        &hub,
        &id,
        json!([lookup(999), { "a1Range": "Sheet1!A1:C1" }]),
    )
    .await;
    assert_eq!(
        read["valueRanges"],
        json!([{ "valueRange": { "range": "Sheet1!A1:C1", "majorDimension": "ROWS",
                                 "values": [["name", "n", "state"]] },
                 "dataFilters": [{ "a1Range": "Sheet1!A1:C1" }] }]),
        "only the matching filter has a MatchedValueRange"
    );
    let before = emu.values("Sheet1!A1:C6").unwrap_or_default();
    let (status, body) = post_raw(
        &emu,
        "/values:batchUpdateByDataFilter",
        json!({ "valueInputOption": "RAW", "data": [
            { "dataFilter": { "a1Range": "Sheet1!A1" }, "values": [["changed"]] },
            { "dataFilter": lookup(999), "values": [["x"]] }] }),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid dataFilterValueRange[1]: the data filter matched no ranges in the spreadsheet."
    );
    assert_eq!(
        emu.values("Sheet1!A1:C6").unwrap_or_default(),
        before,
        "nothing of a failed write is applied"
    );
    let (status, body) = post_raw(
        &emu,
        "/values:batchClearByDataFilter",
        json!({ "dataFilters": [lookup(999)] }),
    )
    .await;
    assert_eq!(status, 400, "a clear matching nothing fails too: {body}");
}

#[tokio::test]
async fn write_by_metadata_lands_on_the_row_after_a_sort_with_nulls_skipped() {
    let (emu, _hub, _id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    // A person sorts rows 2.. by n, over every filled column (A:C): the row moves, and so
    // does its metadata.
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": 0, "startRowIndex": 1, "startColumnIndex": 0, "endColumnIndex": 3 },
        "sortSpecs": [{ "dimensionIndex": 1, "sortOrder": "ASCENDING" }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e:?}"));
    assert_eq!(column_a(&emu, 6), vec!["name", "a", "b", "c", "d", "e"]);
    assert_eq!(emu.metadata_row(101), Some(("Sheet1".into(), 4)));
    let (status, body) = post_raw(
        &emu,
        "/values:batchUpdateByDataFilter",
        json!({ "valueInputOption": "RAW", "includeValuesInResponse": true,
                "responseValueRenderOption": "UNFORMATTED_VALUE",
                "data": [{ "dataFilter": lookup(101), "values": [[null, "", "完了"]] }] }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        emu.values("Sheet1!A4:C4").unwrap_or_default(),
        vec![vec![json!("c"), json!(""), json!("完了")]],
        "null leaves A alone, \"\" clears B, C is written"
    );
    assert_eq!(
        body,
        json!({ "spreadsheetId": emu.spreadsheet_id(),
            "totalUpdatedRows": 1, "totalUpdatedColumns": 2, "totalUpdatedCells": 2,
            "totalUpdatedSheets": 1,
            "responses": [{ "updatedRange": "Sheet1!A4:C4", "updatedRows": 1,
                "updatedColumns": 2, "updatedCells": 2, "dataFilter": lookup(101),
                "updatedData": { "range": "Sheet1!A4:C4", "majorDimension": "ROWS",
                                 "values": [["c", "", "完了"]] } }] }),
        "reply as Google's UpdateValuesByDataFilterResponse"
    );
}

#[tokio::test]
async fn the_google_client_drops_nulls_so_a_null_padded_row_shifts_left() {
    // google-apis-common's remove_json_null_values strips nulls inside arrays from every
    // request body: [null, null, "完了"] reaches the server as ["完了"]. A writer that relies
    // on null padding must send its own JSON.
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    let req: BatchUpdateValuesByDataFilterRequest = from_json(json!({
        "valueInputOption": "RAW",
        "data": [{ "dataFilter": lookup(101), "values": [[null, null, "完了"]] }] }));
    ok(
        "values.batchUpdateByDataFilter through google-sheets4",
        hub.spreadsheets()
            .values_batch_update_by_data_filter(req, &id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(
        emu.values("Sheet1!A4:C4").unwrap_or_default(),
        vec![vec![json!("完了"), json!(3), json!("実行中")]],
        "the client sent [\"完了\"]: it landed in column A"
    );
}

#[tokio::test]
async fn values_larger_than_the_matched_row_fail() {
    let (emu, _hub, _id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    let wide: Vec<Json> = (0..27).map(|i| json!(i)).collect();
    let (status, body) = post_raw(
        &emu,
        "/values:batchUpdateByDataFilter",
        json!({ "valueInputOption": "RAW",
                "data": [{ "dataFilter": lookup(101), "values": [wide] }] }),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid dataFilterValueRange[0]: dataFilterValueRange.dataFilter matched range \
         Sheet1!$A$4:$Z$4 whose columns cannot fit the data described in data.values[0]",
        "a row lookup is the whole row, A to the last grid column (Z)"
    );
    let (status, body) = post_raw(
        &emu,
        "/values:batchUpdateByDataFilter",
        json!({ "valueInputOption": "RAW",
                "data": [{ "dataFilter": lookup(101), "values": [["x"], ["y"]] }] }),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Invalid dataFilterValueRange[0]: dataFilterValueRange.dataFilter matched range \
         Sheet1!$A$4:$Z$4 whose rows cannot fit the data described in data.values"
    );
}

/// Sorts rows 2.. of Sheet1 by column B over columns [0, `end_col`).
fn sort_by_n(emu: &Emulator, end_col: u32) {
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": 0, "startRowIndex": 1, "startColumnIndex": 0, "endColumnIndex": end_col },
        "sortSpecs": [{ "dimensionIndex": 1, "sortOrder": "ASCENDING" }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e:?}"));
}

#[tokio::test]
async fn a_narrow_sort_reorders_values_but_leaves_metadata_at_its_index() {
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    batch(
        &hub,
        &id,
        json!([row_tag(Some(102), "sheetq.claim", "d", 2)]),
    )
    .await
    .unwrap_or_else(|e| panic!("tag row d: {e:?}"));
    sort_by_n(&emu, 2); // A:B only, while C holds data
    assert_eq!(column_a(&emu, 6), vec!["name", "a", "b", "c", "d", "e"]);
    assert_eq!(
        emu.metadata_row(102),
        Some(("Sheet1".into(), 3)),
        "row 3 held d before; the metadata stays on row 3 although d went to row 5"
    );
    let row = row_by_metadata(&hub, &id, 102).await;
    assert_eq!(
        row,
        json!(["b", 2, "待機"]),
        "A:B moved, C did not: the row under the metadata now shows b's A:B"
    );

    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    batch(
        &hub,
        &id,
        json!([row_tag(Some(102), "sheetq.claim", "d", 2)]),
    )
    .await
    .unwrap_or_else(|e| panic!("tag row d: {e:?}"));
    sort_by_n(&emu, 3); // A:C: every filled column
    assert_eq!(
        emu.metadata_row(102),
        Some(("Sheet1".into(), 5)),
        "a sort over every filled column moves the metadata with d to row 5"
    );
    assert_eq!(
        row_by_metadata(&hub, &id, 102).await,
        json!(["d", 4, "待機"])
    );
}

#[tokio::test]
async fn a_full_width_sort_moves_metadata_unless_the_rule_says_never() {
    let (emu, _hub, _id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    // Row c (now row 4, index 3) has n = 3 and lands on row 4 again in ascending order, so
    // sort descending to move it.
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": 0, "startRowIndex": 1 },
        "sortSpecs": [{ "dimensionIndex": 1, "sortOrder": "DESCENDING" }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e:?}"));
    assert_eq!(column_a(&emu, 6), vec!["name", "e", "d", "c", "b", "a"]);
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 4)),
        "c is on row 4 again"
    );
    sort_by_n(&emu, 3);
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 4)),
        "ascending puts c on row 4 too; the metadata followed it both times"
    );
    emu.batch_update(
        json!([{ "moveDimension": { "destinationIndex": 1, "source": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": 3, "endIndex": 4 } } }]),
    )
    .unwrap_or_else(|e| panic!("move: {e:?}"));
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 2)),
        "c moved to row 2"
    );
    sort_by_n(&emu, 3);
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 4)),
        "a full-width sort (A:C) carries the metadata back with c"
    );

    let never = EmulatorOptions {
        sort_metadata: SortMetadata::Never,
        ..EmulatorOptions::default()
    };
    let (emu, _hub, _id) = queue_with_tagged_row(never).await;
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": 0, "startRowIndex": 1 },
        "sortSpecs": [{ "dimensionIndex": 0, "sortOrder": "DESCENDING" }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e:?}"));
    assert_eq!(column_a(&emu, 6), vec!["name", "e", "d", "c", "b", "a"]);
    emu.batch_update(json!([{ "sortRange": {
        "range": { "sheetId": 0, "startRowIndex": 1 },
        "sortSpecs": [{ "dimensionIndex": 0, "sortOrder": "ASCENDING" }] } }]))
        .unwrap_or_else(|e| panic!("sort: {e:?}"));
    assert_eq!(column_a(&emu, 6), vec!["name", "a", "b", "c", "d", "e"]);
    emu.batch_update(
        json!([{ "moveDimension": { "destinationIndex": 6, "source": {
        "sheetId": 0, "dimension": "ROWS", "startIndex": 3, "endIndex": 4 } } }]),
    )
    .unwrap_or_else(|e| panic!("move: {e:?}"));
    assert_eq!(emu.metadata_row(101), Some(("Sheet1".into(), 6)));
    sort_by_n(&emu, 26);
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 6)),
        "SortMetadata::Never: a full-width sort leaves the metadata at its index"
    );
}

#[tokio::test]
async fn cut_paste_moves_values_but_leaves_metadata_where_it_was() {
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    batch(
        &hub,
        &id,
        json!([{ "cutPaste": {
            "source": { "sheetId": 0, "startRowIndex": 3, "endRowIndex": 4,
                        "startColumnIndex": 0, "endColumnIndex": 3 },
            "destination": { "sheetId": 0, "rowIndex": 9, "columnIndex": 0 },
            "pasteType": "PASTE_NORMAL" } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("cutPaste: {e:?}"));
    assert_eq!(
        emu.values("Sheet1!A10:C10").unwrap_or_default(),
        vec![vec![json!("c"), json!(3), json!("実行中")]],
        "the values moved to row 10"
    );
    assert_eq!(
        emu.values("Sheet1!A4:C4").unwrap_or_default(),
        Vec::<Vec<Json>>::new(),
        "the source is cut"
    );
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 4)),
        "metadata stays"
    );
    batch(
        &hub,
        &id,
        json!([{ "copyPaste": {
            "source": { "sheetId": 0, "startRowIndex": 9, "endRowIndex": 10,
                        "startColumnIndex": 0, "endColumnIndex": 1 },
            "destination": { "sheetId": 0, "startRowIndex": 11, "endRowIndex": 13,
                             "startColumnIndex": 0, "endColumnIndex": 1 },
            "pasteType": "PASTE_VALUES" } }]),
    )
    .await
    .unwrap_or_else(|e| panic!("copyPaste: {e:?}"));
    assert_eq!(
        emu.values("Sheet1!A12:A13").unwrap_or_default(),
        vec![vec![json!("c")], vec![json!("c")]],
        "a destination twice the source's height repeats it"
    );
}

#[tokio::test]
async fn moving_columns_carries_column_metadata_through_the_client() {
    let emu = support::start_empty().await;
    let hub = hub(&emu).await;
    let id = emu.spreadsheet_id().to_string();
    emu.set_values("Sheet1!A1", json!([["a", "b", "c"]]), false)
        .unwrap_or_else(|e| panic!("seed: {e:?}"));
    batch(
        &hub,
        &id,
        json!([
            { "createDeveloperMetadata": { "developerMetadata": {
                "metadataId": 5, "metadataKey": "col", "visibility": "DOCUMENT",
                "location": { "dimensionRange": { "sheetId": 0, "dimension": "COLUMNS", "startIndex": 0, "endIndex": 1 } } } } },
            { "moveDimension": { "destinationIndex": 3, "source": {
                "sheetId": 0, "dimension": "COLUMNS", "startIndex": 0, "endIndex": 1 } } },
        ]),
    )
    .await
    .unwrap_or_else(|e| panic!("create and move: {e:?}"));
    assert_eq!(
        emu.values("Sheet1!A1:C1").unwrap_or_default(),
        vec![vec![json!("b"), json!("c"), json!("a")]]
    );
    let md = emu.developer_metadata();
    assert_eq!(
        md[0]["location"],
        json!({ "locationType": "COLUMN",
                "dimensionRange": { "dimension": "COLUMNS", "startIndex": 2, "endIndex": 3 } }),
        "the column metadata went with column a"
    );
}

#[tokio::test]
async fn append_to_a1_goes_after_the_table_without_disturbing_row_metadata() {
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    emu.set_values("Sheet1!A9", json!([["note"]]), false)
        .unwrap_or_else(|e| panic!("note: {e:?}"));
    let reply = ok(
        "values.append",
        hub.spreadsheets()
            .values_append(
                from_json(json!({ "values": [["f", 6, "待機"]] })),
                &id,
                "Sheet1!A1",
            )
            .value_input_option("RAW")
            .insert_data_option("INSERT_ROWS")
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert_eq!(reply.table_range.as_deref(), Some("Sheet1!A1:C6"));
    assert_eq!(
        reply.updates.and_then(|u| u.updated_range).as_deref(),
        Some("Sheet1!A7:C7"),
        "range=A1 on a 6-row table appends at row 7"
    );
    assert_eq!(
        column_a(&emu, 10),
        vec!["name", "e", "d", "c", "b", "a", "f", "", "", "note"],
        "the new row is inserted after the table; the note below moves down"
    );
    assert_eq!(
        emu.metadata_row(101),
        Some(("Sheet1".into(), 4)),
        "row c keeps its metadata"
    );

    // appendCells: a row that only carries a number format is not data.
    batch(
        &hub,
        &id,
        json!([
            { "repeatCell": { "range": { "sheetId": 0, "startRowIndex": 20, "endRowIndex": 21,
                                          "startColumnIndex": 0, "endColumnIndex": 3 },
                "cell": { "userEnteredFormat": { "numberFormat": { "type": "DATE_TIME" } } },
                "fields": "userEnteredFormat.numberFormat" } },
            { "appendCells": { "sheetId": 0, "fields": "userEnteredValue",
                "rows": [{ "values": [{ "userEnteredValue": { "stringValue": "g" } }] }] } },
        ]),
    )
    .await
    .unwrap_or_else(|e| panic!("appendCells: {e:?}"));
    assert_eq!(
        emu.values("Sheet1!A11").unwrap_or_default(),
        vec![vec![json!("g")]],
        "appended after the last row with a value (the note, row 10), not after row 21"
    );
}

#[tokio::test]
async fn data_filter_methods_are_logged_and_counted_as_reads_or_writes() {
    let (emu, hub, id) = queue_with_tagged_row(EmulatorOptions::default()).await;
    emu.clear_requests();
    read_by_filter(&hub, &id, json!([lookup(101), { "a1Range": "Sheet1!A1" }])).await;
    let (status, _) = post_raw(
        &emu,
        "/values:batchUpdateByDataFilter",
        json!({ "valueInputOption": "RAW",
                "data": [{ "dataFilter": lookup(101), "values": [["c"]] }] }),
    )
    .await;
    assert_eq!(status, 200);
    let log: Vec<(String, Vec<String>)> = emu
        .requests()
        .into_iter()
        .filter(|r| r.method != "oauth2.token")
        .map(|r| (r.method, r.ranges))
        .collect();
    let described = vec![r#"developerMetadataLookup:{"metadataId":101}"#.to_string()];
    assert_eq!(
        log,
        vec![
            (
                "spreadsheets.values.batchGetByDataFilter".to_string(),
                vec![described[0].clone(), "Sheet1!A1".to_string()]
            ),
            (
                "spreadsheets.values.batchUpdateByDataFilter".to_string(),
                described
            ),
        ]
    );
    emu.set_quota(Some(Quota::per_user(0, 0)));
    let req: BatchGetValuesByDataFilterRequest = from_json(json!({ "dataFilters": [lookup(101)] }));
    let read = api_error(
        "batchGetByDataFilter over quota",
        hub.spreadsheets()
            .values_batch_get_by_data_filter(req, &id)
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert!(
        read["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'Read requests'"),
        "batchGetByDataFilter is a POST but a read: {read}"
    );
    let write = api_error(
        "batchUpdateByDataFilter over quota",
        hub.spreadsheets()
            .values_batch_update_by_data_filter(
                from_json(json!({ "valueInputOption": "RAW",
                    "data": [{ "dataFilter": lookup(101), "values": [["c"]] }] })),
                &id,
            )
            .add_scope(SCOPE)
            .doit()
            .await,
    );
    assert!(
        write["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'Write requests'"),
        "{write}"
    );
}

#[tokio::test]
async fn replace_rows_seeds_a_large_sheet_without_requests_and_the_log_names_user_and_kind() {
    let emu = support::start_empty().await;
    let id = emu.spreadsheet_id().to_string();
    let rows: Vec<Vec<Json>> = (0..5000)
        .map(|i| vec![json!(format!("job-{i}")), json!(i), json!(true), Json::Null])
        .collect();
    emu.replace_rows("Sheet1", 2, &rows)
        .unwrap_or_else(|e| panic!("replace_rows: {e:?}"));
    assert!(emu.requests().is_empty(), "seeding is not an API request");
    let hub = support::hub_for(&emu, "seeder").await;
    let read = get_values_raw(&hub, &id, "Sheet1!A5001:D5001").await;
    assert_eq!(
        read,
        vec![vec![json!("job-4999"), json!(4999), json!(true)]]
    );
    // Replacing from a row drops every row below it.
    emu.replace_rows("Sheet1", 3, &[vec![json!("last")]])
        .unwrap_or_else(|e| panic!("replace_rows: {e:?}"));
    assert_eq!(column_a(&emu, 4), ["", "job-0", "last", ""]);
    assert!(emu.replace_rows("no such sheet", 1, &[]).is_err());
    let rename = json!([{ "updateSheetProperties": {
        "properties": { "sheetId": 0, "title": "Sheet1" }, "fields": "title" } }]);
    let _ = batch(&hub, &id, rename).await;
    let log = emu.requests();
    let get = log
        .iter()
        .find(|r| r.method == "spreadsheets.values.get")
        .unwrap_or_else(|| panic!("no values.get in {log:?}"));
    assert_eq!(get.user, "seeder@sheetq-emulator.iam.gserviceaccount.com");
    assert!(!get.write);
    let update = log
        .iter()
        .find(|r| r.method == "spreadsheets.batchUpdate")
        .unwrap_or_else(|| panic!("no batchUpdate in {log:?}"));
    assert!(update.write, "a batchUpdate is a write for the quota");
    assert!(log
        .iter()
        .filter(|r| r.method == "oauth2.token")
        .all(|r| r.user.is_empty() && !r.write));
}

async fn get_values_raw(hub: &Hub, id: &str, range: &str) -> Vec<Vec<Json>> {
    ok(
        "values.get",
        hub.spreadsheets()
            .values_get(id, range)
            .value_render_option("UNFORMATTED_VALUE")
            .add_scope(SCOPE)
            .doit()
            .await,
    )
    .values
    .unwrap_or_default()
}
