//! Pure translation between the port's value types and `google-sheets4`'s: requests out,
//! replies and grid data back, and the encoding of the parts the client crate puts into the
//! URL unencoded. No I/O, so every rule here is unit-tested with plain values.

use google_sheets4::api;
use google_sheets4::FieldMask;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};

use crate::a1::A1Range;
use crate::sheets::{
    Area, Cell, Filter, FilterRead, FilterWrite, FilterWritten, GridRange, MetadataEntry,
    ProtectedRange, Reply, Request, SheetMeta, SpreadsheetMeta, ValueRange,
};

/// Everything but RFC 3986 unreserved characters. `google-sheets4` substitutes `{range}` and
/// `{spreadsheetId}` into the URL path verbatim, so a `#` would start a fragment, a `?` the
/// query, a `/` a new path segment and a `%` a bogus escape. Encoding `:` and `!` too keeps
/// the `:append` suffix unambiguous for any server.
const PATH_PARAM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes a value that the client crate will put into the URL path as is.
pub fn encode_path_param(value: &str) -> String {
    utf8_percent_encode(value, PATH_PARAM).to_string()
}

/// A cell as sent in `values.batchUpdate` / `values.append`.
///
/// The client crate strips every JSON `null` from the request body, array elements included,
/// which would shift the cells after an empty one to the left. An empty cell is therefore
/// sent as `""`, which Google stores as an empty cell (RAW input).
pub fn to_api_cell(cell: &Cell) -> Value {
    match cell {
        Value::Null => Value::String(String::new()),
        Value::Array(_) | Value::Object(_) => Value::String(cell.to_string()),
        other => other.clone(),
    }
}

pub fn to_api_rows(rows: &[Vec<Cell>]) -> Vec<Vec<Value>> {
    rows.iter()
        .map(|row| row.iter().map(to_api_cell).collect())
        .collect()
}

pub fn to_api_grid_range(g: &GridRange) -> api::GridRange {
    let idx = |v: u32| Some(i32::try_from(v).unwrap_or(i32::MAX));
    api::GridRange {
        sheet_id: Some(g.sheet_id),
        start_row_index: idx(g.start_row),
        end_row_index: idx(g.end_row),
        start_column_index: idx(g.start_col),
        end_column_index: idx(g.end_col),
    }
}

/// A cell as `userEnteredValue` of [`Request::WriteFormulas`]: a string starting with `=`
/// is a formula, anything else as [`to_extended_value`].
fn to_extended_formula(cell: &Cell) -> Option<api::ExtendedValue> {
    match cell {
        Value::String(s) if s.starts_with('=') => Some(api::ExtendedValue {
            formula_value: Some(s.clone()),
            ..Default::default()
        }),
        other => to_extended_value(other),
    }
}

/// An `updateCells` of `rows` from the top-left of `range`, each cell's value made by
/// `value`.
fn update_cells(
    range: &GridRange,
    rows: &[Vec<Cell>],
    value: fn(&Cell) -> Option<api::ExtendedValue>,
) -> api::UpdateCellsRequest {
    api::UpdateCellsRequest {
        range: Some(to_api_grid_range(range)),
        rows: Some(
            rows.iter()
                .map(|row| api::RowData {
                    values: Some(
                        row.iter()
                            .map(|cell| api::CellData {
                                user_entered_value: value(cell),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                })
                .collect(),
        ),
        fields: Some(FieldMask::new(&["userEnteredValue"])),
        ..Default::default()
    }
}

/// A cell as `userEnteredValue`: strings stay strings (never parsed, never a formula), a
/// `null` leaves no value, so with `fields: "userEnteredValue"` the cell is cleared.
fn to_extended_value(cell: &Cell) -> Option<api::ExtendedValue> {
    let mut v = api::ExtendedValue::default();
    match cell {
        Value::Null => return None,
        Value::Bool(b) => v.bool_value = Some(*b),
        Value::Number(n) => v.number_value = n.as_f64(),
        Value::String(s) => v.string_value = Some(s.clone()),
        other => v.string_value = Some(other.to_string()),
    }
    Some(v)
}

/// The API's form of `request`: one arm per kind of request, each naming the API request
/// it becomes; what each is built of is in the constructors below. Long for a reason: a
/// table of two dozen arms reads best whole, and splitting it would scatter the mapping.
pub fn to_api_request(request: &Request) -> api::Request {
    use Request as R;
    let mut out = api::Request::default();
    match request {
        R::CompareAndSwap {
            range,
            find,
            replacement,
        } => out.find_replace = Some(compare_and_swap(range, find, replacement)),
        R::UpdateCells { range, rows } => {
            out.update_cells = Some(update_cells(range, rows, to_extended_value));
        }
        R::AppendRows { sheet_id, rows } => {
            let cells = update_cells(&GridRange::cell(*sheet_id, 0, 0), rows, to_extended_value);
            out.append_cells = Some(api::AppendCellsRequest {
                sheet_id: Some(*sheet_id),
                rows: cells.rows,
                fields: cells.fields,
                ..Default::default()
            });
        }
        R::WriteFormulas { range, rows } => {
            out.update_cells = Some(update_cells(range, rows, to_extended_formula));
        }
        R::SetDateTimeFormat { range, pattern } => {
            out.repeat_cell = Some(date_time_format(range, pattern));
        }
        R::ClearCheckboxes { range } => out.set_data_validation = Some(checkboxes(range, false)),
        R::SetCheckboxes { range } => out.set_data_validation = Some(checkboxes(range, true)),
        R::SetValidation { range, rule } => {
            out.set_data_validation = Some(validation(range, rule));
        }
        R::AddSheetWithId {
            sheet_id,
            title,
            index,
            row_count,
            column_count,
            frozen_rows,
        } => {
            out.add_sheet = Some(api::AddSheetRequest {
                properties: Some(api::SheetProperties {
                    sheet_id: Some(*sheet_id),
                    title: Some(title.clone()),
                    index: index.and_then(|i| i32::try_from(i).ok()),
                    grid_properties: Some(grid(
                        int32(*row_count),
                        int32(*column_count),
                        int32(*frozen_rows),
                    )),
                    ..Default::default()
                }),
            });
        }
        R::AddSheet {
            title,
            hidden,
            row_count,
            column_count,
        } => {
            out.add_sheet = Some(api::AddSheetRequest {
                properties: Some(api::SheetProperties {
                    title: Some(title.clone()),
                    hidden: Some(*hidden),
                    grid_properties: Some(grid(Some(*row_count), Some(*column_count), None)),
                    ..Default::default()
                }),
            });
        }
        R::DuplicateSheet {
            source,
            sheet_id,
            title,
        } => out.duplicate_sheet = Some(duplicate_sheet(*source, *sheet_id, title)),
        R::DeleteSheet { sheet_id } => {
            out.delete_sheet = Some(api::DeleteSheetRequest {
                sheet_id: Some(*sheet_id),
            });
        }
        R::PlaceSheet {
            sheet_id,
            index,
            frozen_rows,
        } => {
            let properties = api::SheetProperties {
                index: i32::try_from(*index).ok(),
                grid_properties: Some(grid(None, None, int32(*frozen_rows))),
                ..Default::default()
            };
            let fields = ["index", "gridProperties.frozenRowCount"];
            out.update_sheet_properties = Some(sheet_properties(*sheet_id, properties, &fields));
        }
        R::SetRowCount { sheet_id, rows } => {
            let properties = api::SheetProperties {
                grid_properties: Some(grid(int32(*rows), None, None)),
                ..Default::default()
            };
            let fields = ["gridProperties.rowCount"];
            out.update_sheet_properties = Some(sheet_properties(*sheet_id, properties, &fields));
        }
        R::SetColumnCount { sheet_id, columns } => {
            let properties = api::SheetProperties {
                grid_properties: Some(grid(None, Some(*columns), None)),
                ..Default::default()
            };
            let fields = ["gridProperties.columnCount"];
            out.update_sheet_properties = Some(sheet_properties(*sheet_id, properties, &fields));
        }
        R::UpdateSheetHidden { sheet_id, hidden } => {
            let properties = api::SheetProperties {
                hidden: Some(*hidden),
                ..Default::default()
            };
            out.update_sheet_properties =
                Some(sheet_properties(*sheet_id, properties, &["hidden"]));
        }
        R::HideColumns {
            sheet_id,
            start,
            end,
        } => out.update_dimension_properties = Some(hide_columns(*sheet_id, *start, *end)),
        R::InsertRows {
            sheet_id,
            at,
            count,
        } => {
            out.insert_dimension = Some(api::InsertDimensionRequest {
                range: Some(rows_range(*sheet_id, *at, at + count)),
                inherit_from_before: Some(false),
            });
        }
        R::DeleteRows {
            sheet_id,
            start,
            end,
        } => {
            out.delete_dimension = Some(api::DeleteDimensionRequest {
                range: Some(rows_range(*sheet_id, *start, *end)),
            });
        }
        R::MoveRows {
            sheet_id,
            start,
            end,
            destination,
        } => {
            out.move_dimension = Some(api::MoveDimensionRequest {
                source: Some(rows_range(*sheet_id, *start, *end)),
                destination_index: i32::try_from(*destination).ok(),
            });
        }
        R::SortRows {
            range,
            column,
            ascending,
        } => out.sort_range = Some(sort_rows(range, *column, *ascending)),
        R::MoveCells {
            source,
            sheet_id,
            row,
            col,
        } => out.cut_paste = Some(move_cells(source, *sheet_id, *row, *col)),
        R::BindRow {
            sheet_id,
            row,
            id,
            key,
            value,
        } => out.create_developer_metadata = Some(bind_row(*sheet_id, *row, *id, key, value)),
        R::DeleteMetadata { id } => {
            out.delete_developer_metadata = Some(api::DeleteDeveloperMetadataRequest {
                data_filter: Some(to_api_filter(&Filter::Metadata(*id))),
            });
        }
        R::MoveMetadataToRow { id, sheet_id, row } => {
            out.update_developer_metadata = Some(api::UpdateDeveloperMetadataRequest {
                data_filters: Some(vec![to_api_filter(&Filter::Metadata(*id))]),
                developer_metadata: Some(api::DeveloperMetadata {
                    location: Some(api::DeveloperMetadataLocation {
                        dimension_range: Some(rows_range(*sheet_id, *row, row + 1)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                fields: Some(FieldMask::new(&["location"])),
            });
        }
        R::MarkSheet {
            sheet_id,
            id,
            key,
            value,
        } => {
            out.create_developer_metadata = Some(api::CreateDeveloperMetadataRequest {
                developer_metadata: Some(api::DeveloperMetadata {
                    metadata_id: Some(*id),
                    metadata_key: Some(key.clone()),
                    metadata_value: Some(value.clone()),
                    visibility: Some("PROJECT".into()),
                    location: Some(api::DeveloperMetadataLocation {
                        sheet_id: Some(*sheet_id),
                        ..Default::default()
                    }),
                }),
            });
        }

        R::AddProtectedRange {
            area,
            description,
            editors,
            groups,
        } => {
            out.add_protected_range = Some(api::AddProtectedRangeRequest {
                protected_range: Some(api::ProtectedRange {
                    range: Some(to_api_area(area)),
                    description: Some(description.clone()),
                    warning_only: Some(false),
                    editors: Some(only_editors(editors, groups)),
                    ..Default::default()
                }),
            });
        }
        R::UpdateProtectedRange {
            id,
            editors,
            groups,
            clear_unprotected,
        } => {
            out.update_protected_range =
                Some(fix_protection(*id, editors, groups, *clear_unprotected))
        }
        R::DeleteProtectedRange { id } => {
            out.delete_protected_range = Some(api::DeleteProtectedRangeRequest {
                protected_range_id: Some(*id),
            });
        }
    }
    out
}

/// An area as the API's `GridRange`: an open end is left out, which Google reads as the
/// sheet's edge.
pub fn to_api_area(area: &Area) -> api::GridRange {
    let idx = |v: u32| Some(i32::try_from(v).unwrap_or(i32::MAX));
    api::GridRange {
        sheet_id: Some(area.sheet_id),
        start_row_index: idx(area.start_row),
        end_row_index: area.end_row.and_then(idx),
        start_column_index: idx(area.start_col),
        end_column_index: area.end_col.and_then(idx),
    }
}

/// Exactly these users may edit: no group, not the whole domain (which Google may
/// otherwise let edit a range protected in a Workspace document).
fn only_editors(users: &[String], groups: &[String]) -> api::Editors {
    api::Editors {
        users: Some(users.to_vec()),
        groups: Some(groups.to_vec()),
        domain_users_can_edit: Some(false),
    }
}

/// Protected range `id` made a real protection for `editors` only. `warningOnly` and
/// `editors` go in one field mask: Google makes every editor of the file an editor of a
/// range whose `warningOnly` turns false without `editors` in the mask (the field's
/// reference, https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/sheets#protectedrange).
fn fix_protection(
    id: i32,
    editors: &[String],
    groups: &[String],
    clear_unprotected: bool,
) -> api::UpdateProtectedRangeRequest {
    let mut fields = vec!["warningOnly", "editors"];
    if clear_unprotected {
        fields.push("unprotectedRanges");
    }
    api::UpdateProtectedRangeRequest {
        protected_range: Some(api::ProtectedRange {
            protected_range_id: Some(id),
            warning_only: Some(false),
            editors: Some(only_editors(editors, groups)),
            unprotected_ranges: clear_unprotected.then(Vec::new),
            ..Default::default()
        }),
        fields: Some(FieldMask::new(&fields)),
    }
}

/// A compare-and-swap (docs/design.md §3): a `findReplace` of the whole cell, case and all,
/// no regex, formulas left out.
fn compare_and_swap(range: &GridRange, find: &str, replacement: &str) -> api::FindReplaceRequest {
    api::FindReplaceRequest {
        range: Some(to_api_grid_range(range)),
        find: Some(find.to_string()),
        replacement: Some(replacement.to_string()),
        match_case: Some(true),
        match_entire_cell: Some(true),
        search_by_regex: Some(false),
        include_formulas: Some(false),
        ..Default::default()
    }
}

/// The date-time number format `pattern` over `range`.
fn date_time_format(range: &GridRange, pattern: &str) -> api::RepeatCellRequest {
    api::RepeatCellRequest {
        range: Some(to_api_grid_range(range)),
        cell: Some(api::CellData {
            user_entered_format: Some(api::CellFormat {
                number_format: Some(api::NumberFormat {
                    type_: Some("DATE_TIME".into()),
                    pattern: Some(pattern.to_string()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        fields: Some(FieldMask::new(&["userEnteredFormat.numberFormat"])),
    }
}

/// Checkboxes over `range` (a strict BOOLEAN rule), or, `on` false, no rule at all.
fn checkboxes(range: &GridRange, on: bool) -> api::SetDataValidationRequest {
    api::SetDataValidationRequest {
        range: Some(to_api_grid_range(range)),
        rule: on.then(|| api::DataValidationRule {
            condition: Some(api::BooleanCondition {
                type_: Some("BOOLEAN".into()),
                values: None,
            }),
            strict: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An input cell's rule: strict, a dropdown for a list or a range
/// (https://developers.google.com/sheets/api/reference/rest/v4/other#ConditionType).
fn validation(
    range: &GridRange,
    rule: &crate::sheets::Validation,
) -> api::SetDataValidationRequest {
    use crate::sheets::Validation as V;
    let value = |v: String| api::ConditionValue {
        user_entered_value: Some(v),
        ..Default::default()
    };
    let (kind, values) = match rule {
        V::List(items) => ("ONE_OF_LIST", items.iter().cloned().map(value).collect()),
        V::Range(a1) => ("ONE_OF_RANGE", vec![value(format!("={a1}"))]),
        V::Date => ("DATE_IS_VALID", Vec::new()),
        V::Number { min, max } => (
            "NUMBER_BETWEEN",
            vec![value(min.to_string()), value(max.to_string())],
        ),
    };
    api::SetDataValidationRequest {
        range: Some(to_api_grid_range(range)),
        rule: Some(api::DataValidationRule {
            condition: Some(api::BooleanCondition {
                type_: Some(kind.into()),
                values: (!values.is_empty()).then_some(values),
            }),
            strict: Some(true),
            show_custom_ui: matches!(rule, V::List(_) | V::Range(_)).then_some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A sheet's grid size and frozen rows, each only when given.
fn grid(rows: Option<i32>, columns: Option<i32>, frozen_rows: Option<i32>) -> api::GridProperties {
    api::GridProperties {
        row_count: rows,
        column_count: columns,
        frozen_row_count: frozen_rows,
        ..Default::default()
    }
}

/// A count or index as the API's `int32` (`None` past its range, which no sheet reaches).
fn int32(n: u32) -> Option<i32> {
    i32::try_from(n).ok()
}

/// An `updateSheetProperties` of sheet `sheet_id` changing only `fields` of `properties`.
fn sheet_properties(
    sheet_id: i32,
    properties: api::SheetProperties,
    fields: &[&str],
) -> api::UpdateSheetPropertiesRequest {
    api::UpdateSheetPropertiesRequest {
        properties: Some(api::SheetProperties {
            sheet_id: Some(sheet_id),
            ..properties
        }),
        fields: Some(FieldMask::new(fields)),
    }
}

fn duplicate_sheet(source: i32, sheet_id: i32, title: &str) -> api::DuplicateSheetRequest {
    api::DuplicateSheetRequest {
        source_sheet_id: Some(source),
        new_sheet_id: Some(sheet_id),
        new_sheet_name: Some(title.to_string()),
        insert_sheet_index: None,
    }
}

/// Columns `start..end` (zero-based, half-open) of a sheet hidden by the user.
fn hide_columns(sheet_id: i32, start: u32, end: u32) -> api::UpdateDimensionPropertiesRequest {
    api::UpdateDimensionPropertiesRequest {
        range: Some(api::DimensionRange {
            sheet_id: Some(sheet_id),
            dimension: Some("COLUMNS".into()),
            start_index: i32::try_from(start).ok(),
            end_index: i32::try_from(end).ok(),
        }),
        properties: Some(api::DimensionProperties {
            hidden_by_user: Some(true),
            ..Default::default()
        }),
        fields: Some(FieldMask::new(&["hiddenByUser"])),
        ..Default::default()
    }
}

/// A sort of `range`'s rows by zero-based `column`.
fn sort_rows(range: &GridRange, column: u32, ascending: bool) -> api::SortRangeRequest {
    let order = if ascending { "ASCENDING" } else { "DESCENDING" };
    api::SortRangeRequest {
        range: Some(to_api_grid_range(range)),
        sort_specs: Some(vec![api::SortSpec {
            dimension_index: i32::try_from(column).ok(),
            sort_order: Some(order.into()),
            ..Default::default()
        }]),
    }
}

/// A cut-and-paste of `source` to a cell of sheet `sheet_id`.
fn move_cells(source: &GridRange, sheet_id: i32, row: u32, col: u32) -> api::CutPasteRequest {
    api::CutPasteRequest {
        source: Some(to_api_grid_range(source)),
        destination: Some(api::GridCoordinate {
            sheet_id: Some(sheet_id),
            row_index: i32::try_from(row).ok(),
            column_index: i32::try_from(col).ok(),
        }),
        paste_type: Some("PASTE_NORMAL".into()),
    }
}

/// Developer metadata with the explicit `id` on zero-based row `row` (a row binding, a
/// fence), visible to the whole document.
fn bind_row(
    sheet_id: i32,
    row: u32,
    id: i32,
    key: &str,
    value: &str,
) -> api::CreateDeveloperMetadataRequest {
    api::CreateDeveloperMetadataRequest {
        developer_metadata: Some(api::DeveloperMetadata {
            metadata_id: Some(id),
            metadata_key: Some(key.to_string()),
            metadata_value: Some(value.to_string()),
            visibility: Some("DOCUMENT".into()),
            location: Some(api::DeveloperMetadataLocation {
                dimension_range: Some(rows_range(sheet_id, row, row + 1)),
                ..Default::default()
            }),
        }),
    }
}

/// Rows `start..end` (zero-based, half-open) of a sheet as a `DimensionRange`.
fn rows_range(sheet_id: i32, start: u32, end: u32) -> api::DimensionRange {
    api::DimensionRange {
        sheet_id: Some(sheet_id),
        dimension: Some("ROWS".into()),
        start_index: i32::try_from(start).ok(),
        end_index: i32::try_from(end).ok(),
    }
}

/// A port filter as the API's `DataFilter`.
pub fn to_api_filter(filter: &Filter) -> api::DataFilter {
    match filter {
        Filter::Metadata(id) => api::DataFilter {
            developer_metadata_lookup: Some(api::DeveloperMetadataLookup {
                metadata_id: Some(*id),
                ..Default::default()
            }),
            ..Default::default()
        },
        Filter::A1(range) => api::DataFilter {
            a1_range: Some(range.clone()),
            ..Default::default()
        },
    }
}

/// A `DataFilter` as JSON, for the request bodies that are sent without the client's
/// null-stripping serialiser.
pub fn filter_json(filter: &Filter) -> Value {
    match filter {
        Filter::Metadata(id) => json!({"developerMetadataLookup": {"metadataId": id}}),
        Filter::A1(range) => json!({"a1Range": range}),
    }
}

/// Which of `asked` an echoed `DataFilter` is, skipping those already `used`: by metadata id,
/// or by the exact A1 text.
pub fn which_filter(asked: &[Filter], used: &[bool], echoed: &api::DataFilter) -> Option<usize> {
    let wanted = match (&echoed.developer_metadata_lookup, &echoed.a1_range) {
        (Some(l), _) => Filter::Metadata(l.metadata_id?),
        (None, Some(a1)) => Filter::A1(a1.clone()),
        _ => return None,
    };
    asked
        .iter()
        .enumerate()
        .position(|(i, f)| !used[i] && *f == wanted)
}

/// The body of a `values.batchUpdateByDataFilter`: RAW, the written values returned
/// unformatted, and `None` cells as JSON `null` so Google leaves those cells alone.
pub fn write_filtered_body(data: &[FilterWrite]) -> Value {
    let data: Vec<Value> = data
        .iter()
        .map(|w| {
            let rows: Vec<Value> = w
                .values
                .iter()
                .map(|row| {
                    Value::Array(
                        row.iter()
                            .map(|c| c.as_ref().map_or(Value::Null, to_api_cell))
                            .collect(),
                    )
                })
                .collect();
            json!({
                "dataFilter": filter_json(&w.filter),
                "majorDimension": "ROWS",
                "values": rows,
            })
        })
        .collect();
    json!({
        "data": data,
        "valueInputOption": "RAW",
        "includeValuesInResponse": true,
        "responseValueRenderOption": "UNFORMATTED_VALUE",
        "responseDateTimeRenderOption": "SERIAL_NUMBER",
    })
}

/// The replies of a `values.batchUpdateByDataFilter`, one per entry asked, in that order:
/// `None` for an entry whose filter matched nothing.
pub fn filtered_writes(
    asked: &[FilterWrite],
    reply: &api::BatchUpdateValuesByDataFilterResponse,
) -> Vec<Option<FilterWritten>> {
    let filters: Vec<Filter> = asked.iter().map(|w| w.filter.clone()).collect();
    let mut used = vec![false; asked.len()];
    let mut out = vec![None; asked.len()];
    for r in reply.responses.iter().flatten() {
        let Some(i) = r
            .data_filter
            .as_ref()
            .and_then(|f| which_filter(&filters, &used, f))
        else {
            continue;
        };
        used[i] = true;
        let data = r.updated_data.as_ref();
        out[i] = Some(FilterWritten {
            range: r
                .updated_range
                .clone()
                .or_else(|| data.and_then(|d| d.range.clone()))
                .unwrap_or_default(),
            values: normalise_rows(data.and_then(|d| d.values.clone()).unwrap_or_default()),
        });
    }
    out
}

/// The replies of a `values.batchGetByDataFilter`, one per filter asked, in that order.
pub fn filtered_reads(
    asked: &[Filter],
    reply: &api::BatchGetValuesByDataFilterResponse,
) -> Vec<FilterRead> {
    let mut out = vec![FilterRead::default(); asked.len()];
    let none_used = vec![false; asked.len()];
    for m in reply.value_ranges.iter().flatten() {
        let Some(vr) = &m.value_range else { continue };
        let range = ValueRange::new(
            vr.range.clone().unwrap_or_default(),
            vr.values.clone().unwrap_or_default(),
        );
        for f in m.data_filters.iter().flatten() {
            if let Some(i) = which_filter(asked, &none_used, f) {
                out[i].ranges.push(range.clone());
            }
        }
    }
    out
}

/// The entries of a `developerMetadata.search` reply.
pub fn metadata_entries(reply: &api::SearchDeveloperMetadataResponse) -> Vec<MetadataEntry> {
    reply
        .matched_developer_metadata
        .iter()
        .flatten()
        .filter_map(|m| m.developer_metadata.as_ref())
        .map(|d| {
            let range = d.location.as_ref().and_then(|l| l.dimension_range.as_ref());
            let rows = range.is_some_and(|r| r.dimension.as_deref() == Some("ROWS"));
            MetadataEntry {
                id: d.metadata_id.unwrap_or(0),
                key: d.metadata_key.clone().unwrap_or_default(),
                value: d.metadata_value.clone().unwrap_or_default(),
                // proto3 JSON omits zeros: a range without `sheetId` is on sheet 0, one
                // without `startIndex` starts at row 0.
                sheet_id: range.map(|r| r.sheet_id.unwrap_or(0)).or_else(|| {
                    d.location
                        .as_ref()
                        .filter(|l| l.location_type.as_deref() == Some("SHEET"))
                        .map(|l| l.sheet_id.unwrap_or(0))
                }),
                row: range
                    .filter(|_| rows)
                    .and_then(|r| u32::try_from(r.start_index.unwrap_or(0)).ok()),
                project_only: d.visibility.as_deref() == Some("PROJECT"),
            }
        })
        .collect()
}

pub fn sheet_meta(p: &api::SheetProperties) -> SheetMeta {
    let grid = p.grid_properties.as_ref();
    SheetMeta {
        sheet_id: p.sheet_id.unwrap_or(0),
        title: p.title.clone().unwrap_or_default(),
        index: p.index.unwrap_or(0),
        hidden: p.hidden.unwrap_or(false),
        row_count: grid.and_then(|g| g.row_count).unwrap_or(0),
        column_count: grid.and_then(|g| g.column_count).unwrap_or(0),
        protected_ranges: Vec::new(),
    }
}

/// A grid range as Google describes a protected area, on sheet `sheet_id` when it leaves the
/// id out (proto3 JSON omits a zero): a start left out is 0, an end left out is open.
pub fn area_of(g: &api::GridRange, sheet_id: i32) -> Area {
    let at = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok());
    Area {
        sheet_id: g.sheet_id.unwrap_or(sheet_id),
        start_row: at(g.start_row_index).unwrap_or(0),
        end_row: at(g.end_row_index),
        start_col: at(g.start_column_index).unwrap_or(0),
        end_col: at(g.end_column_index),
    }
}

/// A sheet's protected ranges as sheetq reads them: one without a `range` (backed by a
/// named range or a table) is left out.
pub fn protected_ranges(sheet_id: i32, ranges: &[api::ProtectedRange]) -> Vec<ProtectedRange> {
    ranges
        .iter()
        .filter_map(|p| {
            let editors = p.editors.as_ref();
            Some(ProtectedRange {
                id: p.protected_range_id.unwrap_or(0),
                area: area_of(p.range.as_ref()?, sheet_id),
                description: p.description.clone().unwrap_or_default(),
                warning_only: p.warning_only.unwrap_or(false),
                editors: editors.and_then(|e| e.users.clone()).unwrap_or_default(),
                groups: editors.and_then(|e| e.groups.clone()).unwrap_or_default(),
                domain_users_can_edit: editors
                    .and_then(|e| e.domain_users_can_edit)
                    .unwrap_or(false),
                unprotected: p
                    .unprotected_ranges
                    .iter()
                    .flatten()
                    .map(|g| area_of(g, sheet_id))
                    .collect(),
                requesting_user_can_edit: p.requesting_user_can_edit.unwrap_or(false),
            })
        })
        .collect()
}

pub fn spreadsheet_meta(spreadsheet_id: &str, s: &api::Spreadsheet) -> SpreadsheetMeta {
    SpreadsheetMeta {
        spreadsheet_id: s
            .spreadsheet_id
            .clone()
            .unwrap_or_else(|| spreadsheet_id.to_string()),
        time_zone: s
            .properties
            .as_ref()
            .and_then(|p| p.time_zone.clone())
            .unwrap_or_default(),
        sheets: s
            .sheets
            .iter()
            .flatten()
            .filter_map(|sh| {
                let mut meta = sheet_meta(sh.properties.as_ref()?);
                meta.protected_ranges =
                    protected_ranges(meta.sheet_id, sh.protected_ranges.as_deref().unwrap_or(&[]));
                Some(meta)
            })
            .collect(),
    }
}

/// The every sheet's properties out of a batch reply's `updatedSpreadsheet`.
pub fn sheets_of(s: &lean::Spreadsheet) -> Vec<SheetMeta> {
    s.sheets
        .iter()
        .flatten()
        .filter_map(|sh| sh.properties.as_ref())
        .map(sheet_meta)
        .collect()
}

/// The protected ranges of every sheet a batch reply's `updatedSpreadsheet` lists, by sheet
/// id.
pub fn protections_of(s: &lean::Spreadsheet) -> Vec<(i32, Vec<ProtectedRange>)> {
    s.sheets
        .iter()
        .flatten()
        .filter_map(|sh| {
            let id = sh.properties.as_ref()?.sheet_id?;
            Some((
                id,
                protected_ranges(id, sh.protected_ranges.as_deref().unwrap_or(&[])),
            ))
        })
        .collect()
}

/// The parts of a `spreadsheets.batchUpdate` reply sheetq reads, and nothing else. The
/// client crate's `Spreadsheet` type has a slot for every optional field of every cell, so a
/// read-back of a busy queue (thousands of cells) parsed into it costs tens of megabytes;
/// these types keep the one value of each cell.
pub mod lean {
    use google_sheets4::api;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct BatchReply {
        pub replies: Option<Vec<api::Response>>,
        pub updated_spreadsheet: Option<Spreadsheet>,
    }

    #[derive(Debug, Default, Deserialize)]
    pub struct Spreadsheet {
        pub sheets: Option<Vec<Sheet>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Sheet {
        pub properties: Option<api::SheetProperties>,
        pub protected_ranges: Option<Vec<api::ProtectedRange>>,
        pub data: Option<Vec<GridData>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct GridData {
        pub start_row: Option<i32>,
        pub start_column: Option<i32>,
        pub row_data: Option<Vec<RowData>>,
        pub row_metadata: Option<Vec<DimensionProperties>>,
    }

    #[derive(Debug, Default, Deserialize)]
    pub struct RowData {
        pub values: Option<Vec<CellData>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CellData {
        pub effective_value: Option<api::ExtendedValue>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DimensionProperties {
        pub developer_metadata: Option<Vec<Metadata>>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Metadata {
        pub metadata_id: Option<i32>,
    }
}

/// The replies of a `spreadsheets.batchUpdate`, one per request, in request order.
///
/// Google omits zero counts, so a compare-and-swap that matched nothing replies `{}`: that is
/// `changed: 0`. A reply missing altogether for a compare-and-swap is also read as 0, the
/// answer that makes a claim fail safely.
pub fn replies(requests: &[Request], replies: &[api::Response]) -> Result<Vec<Reply>, String> {
    requests
        .iter()
        .enumerate()
        .map(|(i, req)| {
            let reply = replies.get(i);
            Ok(match req {
                Request::CompareAndSwap { .. } => Reply::CompareAndSwap {
                    changed: reply
                        .and_then(|r| r.find_replace.as_ref())
                        .and_then(|f| f.occurrences_changed)
                        .map(|n| u32::try_from(n).unwrap_or(0))
                        .unwrap_or(0),
                },
                Request::AddSheet { title, .. } => Reply::AddSheet {
                    sheet: reply
                        .and_then(|r| r.add_sheet.as_ref())
                        .and_then(|a| a.properties.as_ref())
                        .map(sheet_meta)
                        .ok_or_else(|| {
                            format!("the reply to adding sheet '{title}' has no sheet properties")
                        })?,
                },
                Request::AddProtectedRange { description, .. } => Reply::AddProtectedRange {
                    id: reply
                        .and_then(|r| r.add_protected_range.as_ref())
                        .and_then(|a| a.protected_range.as_ref())
                        .and_then(|p| p.protected_range_id)
                        .ok_or_else(|| {
                            format!(
                                "the reply to adding the protected range {description:?} has no protectedRangeId"
                            )
                        })?,
                },
                _ => Reply::Empty,
            })
        })
        .collect()
}

/// Drops trailing empty cells of each row and trailing empty rows, and writes empty cells
/// before a value as `""`: what `values.batchGet` returns for the same cells.
pub fn normalise_rows(rows: Vec<Vec<Cell>>) -> Vec<Vec<Cell>> {
    let empty = |c: &Cell| c.is_null() || c.as_str() == Some("");
    let mut rows: Vec<Vec<Cell>> = rows
        .into_iter()
        .map(|mut row| {
            while row.last().is_some_and(empty) {
                row.pop();
            }
            for c in row.iter_mut() {
                if c.is_null() {
                    *c = Value::String(String::new());
                }
            }
            row
        })
        .collect();
    while rows.last().is_some_and(|r| r.is_empty()) {
        rows.pop();
    }
    rows
}

/// An `effectiveValue` as `values.batchGet` with `UNFORMATTED_VALUE` would render it.
fn effective_to_cell(v: &api::ExtendedValue) -> Cell {
    if let Some(s) = &v.string_value {
        return Value::String(s.clone());
    }
    if let Some(n) = v.number_value {
        return serde_json::Number::from_f64(n)
            .map(|n| {
                // Whole numbers come back from values.batchGet as integers (`3`, not `3.0`).
                if n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                {
                    Value::from(n.as_f64().map(|f| f as i64).unwrap_or_default())
                } else {
                    Value::Number(n)
                }
            })
            .unwrap_or(Value::Null);
    }
    if let Some(b) = v.bool_value {
        return Value::Bool(b);
    }
    if let Some(e) = &v.error_value {
        let code = match e.type_.as_deref() {
            Some("DIVIDE_BY_ZERO") => "#DIV/0!",
            Some("N_A") => "#N/A",
            Some("NAME") => "#NAME?",
            Some("NUM") => "#NUM!",
            Some("NULL_VALUE") => "#NULL!",
            Some("REF") => "#REF!",
            Some("VALUE") => "#VALUE!",
            Some("LOADING") => "Loading...",
            _ => "#ERROR!",
        };
        return Value::String(code.into());
    }
    Value::Null
}

fn grid_rows(data: &lean::GridData) -> Vec<Vec<Cell>> {
    let rows = data
        .row_data
        .iter()
        .flatten()
        .map(|row| {
            row.values
                .iter()
                .flatten()
                .map(|cell| {
                    cell.effective_value
                        .as_ref()
                        .map(effective_to_cell)
                        .unwrap_or(Value::Null)
                })
                .collect()
        })
        .collect();
    normalise_rows(rows)
}

/// Per row of a grid block, the ids of the developer metadata on it.
pub type RowMetadataIds = Vec<Vec<i32>>;

/// Per row of a grid block, the ids of the developer metadata on it.
fn row_metadata_ids(data: &lean::GridData) -> Vec<Vec<i32>> {
    data.row_metadata
        .iter()
        .flatten()
        .map(|p| {
            p.developer_metadata
                .iter()
                .flatten()
                .filter_map(|d| d.metadata_id)
                .collect()
        })
        .collect()
}

/// The values of `asked` (the `responseRanges` of a batch, in order) out of the
/// `updatedSpreadsheet` of its reply.
///
/// Google returns one `GridData` per range under the sheet it belongs to, identified only by
/// its start row and column; each asked range is matched to the first unused block of its
/// sheet (by title; a range without a title means the first sheet) with the same start.
pub fn response_ranges(
    asked: &[String],
    spreadsheet: Option<&lean::Spreadsheet>,
) -> Result<Vec<(ValueRange, RowMetadataIds)>, String> {
    if asked.is_empty() {
        return Ok(Vec::new());
    }
    let sheets = spreadsheet
        .and_then(|s| s.sheets.as_deref())
        .ok_or("the reply carries no updatedSpreadsheet for the response ranges")?;
    let mut used: Vec<Vec<bool>> = sheets
        .iter()
        .map(|s| vec![false; s.data.as_ref().map_or(0, Vec::len)])
        .collect();
    asked
        .iter()
        .map(|range| {
            let parsed = A1Range::parse(range).map_err(|e| e.to_string())?;
            let sheet_idx = match &parsed.sheet {
                Some(title) => sheets.iter().position(|s| {
                    s.properties.as_ref().and_then(|p| p.title.as_deref()) == Some(title.as_str())
                }),
                None => sheets
                    .iter()
                    .position(|s| s.properties.as_ref().and_then(|p| p.index).unwrap_or(0) == 0),
            }
            .ok_or_else(|| format!("the reply has no sheet for response range {range}"))?;
            let (row, col) = (parsed.start_row.unwrap_or(0), parsed.start_col.unwrap_or(0));
            let data = sheets[sheet_idx].data.as_deref().unwrap_or_default();
            let block = data
                .iter()
                .enumerate()
                .position(|(i, d)| {
                    !used[sheet_idx][i]
                        && d.start_row.unwrap_or(0) == i32::try_from(row).unwrap_or(-1)
                        && d.start_column.unwrap_or(0) == i32::try_from(col).unwrap_or(-1)
                })
                .ok_or_else(|| format!("the reply has no grid data for response range {range}"))?;
            used[sheet_idx][block] = true;
            Ok((
                ValueRange::new(range.clone(), grid_rows(&data[block])),
                row_metadata_ids(&data[block]),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn path_params_survive_every_special_character() {
        let range = crate::a1::range("it's #1?/100%_ジョブ キュー", "A1:B2");
        let enc = encode_path_param(&range);
        assert!(
            enc.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)),
            "{enc}"
        );
        let back = percent_encoding::percent_decode_str(&enc).decode_utf8_lossy();
        assert_eq!(back, range);
        // The URL the client crate builds keeps the whole range in one path segment.
        let url = format!("http://h/v4/spreadsheets/id/values/{enc}:append");
        let parsed = url.parse::<hyper::Uri>().map_err(|e| e.to_string());
        let parsed = parsed.as_ref().map(|u| (u.path().to_string(), u.query()));
        assert_eq!(
            parsed,
            Ok((format!("/v4/spreadsheets/id/values/{enc}:append"), None))
        );
    }

    #[test]
    fn empty_cells_are_sent_as_empty_strings_so_nothing_shifts() {
        let rows = vec![vec![json!("a"), Value::Null, json!(3), json!(true)]];
        assert_eq!(
            to_api_rows(&rows),
            vec![vec![json!("a"), json!(""), json!(3), json!(true)]]
        );
    }

    #[test]
    fn cas_is_an_exact_single_range_find_replace() {
        let req = to_api_request(&Request::CompareAndSwap {
            range: GridRange::cell(7, 0, 1),
            find: "free".into(),
            replacement: "lease|a|n|t".into(),
        });
        let v = wire(req);
        assert_eq!(
            v["findReplace"],
            json!({
                "range": {"sheetId": 7, "startRowIndex": 0, "endRowIndex": 1,
                          "startColumnIndex": 1, "endColumnIndex": 2},
                "find": "free", "replacement": "lease|a|n|t",
                "matchCase": true, "matchEntireCell": true,
                "searchByRegex": false, "includeFormulas": false
            })
        );
    }

    #[test]
    fn update_cells_writes_user_entered_values_only() {
        let req = to_api_request(&Request::UpdateCells {
            range: GridRange::cell(1, 4, 0),
            rows: vec![vec![json!("=1+1"), json!(2.5), json!(false), Value::Null]],
        });
        let v = wire(req);
        assert_eq!(v["updateCells"]["fields"], json!("userEnteredValue"));
        assert_eq!(
            v["updateCells"]["rows"][0]["values"],
            json!([
                {"userEnteredValue": {"stringValue": "=1+1"}},
                {"userEnteredValue": {"numberValue": 2.5}},
                {"userEnteredValue": {"boolValue": false}},
                {}
            ])
        );
    }

    #[test]
    fn sheet_requests() {
        let v = wire(to_api_request(&Request::UpdateSheetHidden {
            sheet_id: 3,
            hidden: true,
        }));
        assert_eq!(
            v["updateSheetProperties"],
            json!({"properties": {"sheetId": 3, "hidden": true}, "fields": "hidden"})
        );
        let v = wire(to_api_request(&Request::SetCheckboxes {
            range: GridRange::cell(3, 7, 0),
        }));
        assert_eq!(
            v["setDataValidation"]["rule"]["condition"]["type"],
            json!("BOOLEAN")
        );
        let v = wire(to_api_request(&Request::AddSheet {
            title: "_ワーカー".into(),
            hidden: true,
            row_count: 100,
            column_count: 8,
        }));
        assert_eq!(
            v["addSheet"]["properties"],
            json!({"title": "_ワーカー", "hidden": true,
                   "gridProperties": {"rowCount": 100, "columnCount": 8}})
        );
    }

    #[test]
    fn protection_requests_name_only_sheetqs_editors_and_their_field_mask() {
        let v = wire(to_api_request(&Request::AddProtectedRange {
            area: Area::sheet(7),
            description: "sheetq: queue".into(),
            editors: vec!["sa@p.iam.gserviceaccount.com".into()],
            groups: Vec::new(),
        }));
        assert_eq!(
            v["addProtectedRange"]["protectedRange"],
            json!({
                "range": {"sheetId": 7, "startRowIndex": 0, "startColumnIndex": 0},
                "description": "sheetq: queue",
                "warningOnly": false,
                "editors": {"users": ["sa@p.iam.gserviceaccount.com"], "groups": [],
                            "domainUsersCanEdit": false}
            }),
            "a whole sheet leaves its ends out"
        );
        let v = wire(to_api_request(&Request::AddProtectedRange {
            area: Area::columns(7, 7, 10),
            description: String::new(),
            editors: vec![],
            groups: Vec::new(),
        }));
        assert_eq!(
            v["addProtectedRange"]["protectedRange"]["range"],
            json!({"sheetId": 7, "startRowIndex": 0, "startColumnIndex": 7, "endColumnIndex": 10})
        );
        let v = wire(to_api_request(&Request::UpdateProtectedRange {
            id: 42,
            editors: vec!["sa@p".into()],
            groups: Vec::new(),
            clear_unprotected: false,
        }));
        assert_eq!(
            v["updateProtectedRange"],
            json!({
                "protectedRange": {"protectedRangeId": 42, "warningOnly": false,
                    "editors": {"users": ["sa@p"], "groups": [], "domainUsersCanEdit": false}},
                "fields": "warningOnly,editors"
            })
        );
        let v = wire(to_api_request(&Request::UpdateProtectedRange {
            id: 42,
            editors: vec![],
            groups: Vec::new(),
            clear_unprotected: true,
        }));
        assert_eq!(
            v["updateProtectedRange"]["fields"],
            json!("warningOnly,editors,unprotectedRanges")
        );
        assert_eq!(
            v["updateProtectedRange"]["protectedRange"]["unprotectedRanges"],
            json!([])
        );
        let v = wire(to_api_request(&Request::DeleteProtectedRange { id: 42 }));
        assert_eq!(v["deleteProtectedRange"], json!({"protectedRangeId": 42}));
    }

    #[test]
    fn protected_ranges_are_read_with_their_sheet_and_open_ends() {
        let s: api::Spreadsheet = from(json!({"sheets": [
            {"properties": {"title": "▶パネル"},
             "protectedRanges": [
                {"protectedRangeId": 1, "range": {"startColumnIndex": 6, "endColumnIndex": 7},
                 "description": "idx", "requestingUserCanEdit": true,
                 "editors": {"users": ["owner@example.com", "sa@p"]}}
             ]},
            {"properties": {"sheetId": 5, "title": "_ジョブキュー"},
             "protectedRanges": [
                {"protectedRangeId": 2, "range": {"sheetId": 5}, "warningOnly": true},
                {"protectedRangeId": 3, "namedRangeId": "n1"},
                {"protectedRangeId": 4, "range": {"sheetId": 5, "startRowIndex": 1, "endRowIndex": 3},
                 "editors": {"groups": ["g@example.com"], "domainUsersCanEdit": true},
                 "unprotectedRanges": [{"sheetId": 5, "startColumnIndex": 2, "endColumnIndex": 3}]}
             ]}
        ]}));
        let meta = spreadsheet_meta("id", &s);
        let index = &meta.sheets[0].protected_ranges;
        assert_eq!(
            index,
            &vec![ProtectedRange {
                id: 1,
                area: Area::columns(0, 6, 7),
                description: "idx".into(),
                editors: vec!["owner@example.com".into(), "sa@p".into()],
                requesting_user_can_edit: true,
                ..Default::default()
            }],
            "a range without sheetId is on sheet 0, whose id proto3 leaves out"
        );
        let queue = &meta.sheets[1].protected_ranges;
        assert_eq!(
            queue.len(),
            2,
            "the named-range one has no range: {queue:?}"
        );
        assert!(queue[0].area.is_sheet() && queue[0].area.sheet_id == 5);
        assert!(queue[0].warning_only && !queue[0].requesting_user_can_edit);
        assert_eq!(queue[1].area.start_row, 1);
        assert_eq!(queue[1].area.end_row, Some(3));
        assert_eq!(queue[1].area.end_col, None);
        assert_eq!(queue[1].groups, vec!["g@example.com".to_string()]);
        assert!(queue[1].domain_users_can_edit);
        assert_eq!(queue[1].unprotected, vec![Area::columns(5, 2, 3)]);
    }

    #[test]
    fn an_added_protection_replies_with_its_id() {
        let req = vec![Request::AddProtectedRange {
            area: Area::sheet(1),
            description: "q".into(),
            editors: vec![],
            groups: Vec::new(),
        }];
        let got = replies(
            &req,
            &[api_response(
                json!({"addProtectedRange": {"protectedRange": {"protectedRangeId": 99}}}),
            )],
        );
        assert_eq!(got, Ok(vec![Reply::AddProtectedRange { id: 99 }]));
        assert!(replies(&req, &[api_response(json!({}))]).is_err_and(|e| e.contains("\"q\"")));
    }

    /// The JSON the hub sends: it strips `null`s before sending.
    fn wire(req: api::Request) -> Value {
        let mut v = serde_json::to_value(&req).unwrap_or_default();
        google_sheets4::common::remove_json_null_values(&mut v);
        v
    }

    fn api_response(v: Value) -> api::Response {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn replies_read_zero_counts_from_empty_objects() {
        let reqs = vec![
            Request::CompareAndSwap {
                range: GridRange::cell(0, 0, 0),
                find: "a".into(),
                replacement: "b".into(),
            },
            Request::CompareAndSwap {
                range: GridRange::cell(0, 1, 0),
                find: "a".into(),
                replacement: "b".into(),
            },
            Request::UpdateCells {
                range: GridRange::cell(0, 0, 0),
                rows: vec![],
            },
            Request::AddSheet {
                title: "x".into(),
                hidden: false,
                row_count: 1,
                column_count: 1,
            },
        ];
        let got = replies(
            &reqs,
            &[
                api_response(json!({"findReplace": {"occurrencesChanged": 1, "valuesChanged": 1}})),
                api_response(json!({"findReplace": {}})),
                api_response(json!({})),
                api_response(
                    json!({"addSheet": {"properties": {"sheetId": 42, "title": "x", "index": 3}}}),
                ),
            ],
        );
        assert_eq!(
            got,
            Ok(vec![
                Reply::CompareAndSwap { changed: 1 },
                Reply::CompareAndSwap { changed: 0 },
                Reply::Empty,
                Reply::AddSheet {
                    sheet: SheetMeta {
                        sheet_id: 42,
                        title: "x".into(),
                        index: 3,
                        ..Default::default()
                    }
                },
            ])
        );
        // A missing CAS reply is "nothing changed"; a missing AddSheet reply is an error.
        assert_eq!(
            replies(&reqs[..1], &[]),
            Ok(vec![Reply::CompareAndSwap { changed: 0 }])
        );
        assert!(replies(&reqs[3..], &[]).is_err());
    }

    #[test]
    fn normalises_like_values_batch_get() {
        let rows = vec![
            vec![json!("a"), Value::Null, json!("c"), Value::Null],
            vec![Value::Null, Value::Null],
            vec![json!(1)],
            vec![],
            vec![Value::Null],
        ];
        assert_eq!(
            normalise_rows(rows),
            vec![
                vec![json!("a"), json!(""), json!("c")],
                vec![],
                vec![json!(1)]
            ]
        );
    }

    fn spreadsheet(v: Value) -> lean::Spreadsheet {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn grid_data_becomes_value_ranges_in_the_order_asked() {
        let s = spreadsheet(json!({
            "sheets": [
                {"properties": {"sheetId": 0, "title": "▶パネル", "index": 0},
                 "data": [{"rowData": [{"values": [{"effectiveValue": {"stringValue": "idx"}}]}]}]},
                {"properties": {"sheetId": 5, "title": "_ジョブキュー", "index": 1},
                 "data": [
                    {"rowData": [{"values": [
                        {"effectiveValue": {"stringValue": "jobId"}},
                        {"effectiveValue": {"numberValue": 46000.5}},
                        {},
                        {"effectiveValue": {"boolValue": true}},
                        {"effectiveValue": {"numberValue": 3.0}},
                        {}
                    ]}, {}, {"values": [{}]}]},
                    {"startRow": 1, "startColumn": 1,
                     "rowData": [{"values": [{"effectiveValue": {"errorValue": {"type": "N_A"}}}]}]}
                 ]}
            ]
        }));
        let asked = vec![
            "'_ジョブキュー'!B2".to_string(),
            "'_ジョブキュー'!A1:F".to_string(),
            "A1".to_string(),
        ];
        let got = response_ranges(&asked, Some(&s))
            .map(|r| r.into_iter().map(|(v, _)| v).collect::<Vec<_>>());
        assert_eq!(
            got,
            Ok(vec![
                ValueRange::new("'_ジョブキュー'!B2", vec![vec![json!("#N/A")]]),
                ValueRange::new(
                    "'_ジョブキュー'!A1:F",
                    vec![vec![
                        json!("jobId"),
                        json!(46000.5),
                        json!(""),
                        json!(true),
                        json!(3)
                    ]]
                ),
                ValueRange::new("A1", vec![vec![json!("idx")]]),
            ])
        );
    }

    #[test]
    fn response_ranges_report_the_metadata_on_each_row() {
        let s = spreadsheet(json!({"sheets": [{"properties": {"title": "Q"}, "data": [
            {"startRow": 4, "rowData": [{"values": [{"effectiveValue": {"stringValue": "j1"}}]}],
             "rowMetadata": [{"pixelSize": 21, "developerMetadata": [
                 {"metadataId": 77, "metadataKey": "sheetq.job"}]}]}
        ]}]}));
        let got = response_ranges(&["Q!A5:P5".to_string()], Some(&s)).unwrap_or_default();
        assert_eq!(got[0].1, vec![vec![77]], "the binding on row 5");
    }

    #[test]
    fn filtered_writes_keep_nulls_so_skipped_cells_stay_put() {
        let body = write_filtered_body(&[FilterWrite {
            filter: Filter::Metadata(9),
            values: vec![vec![None, None, Some(json!("完了")), Some(json!(""))]],
        }]);
        assert_eq!(
            body["data"][0],
            json!({
                "dataFilter": {"developerMetadataLookup": {"metadataId": 9}},
                "majorDimension": "ROWS",
                "values": [[null, null, "完了", ""]],
            })
        );
        assert_eq!(body["valueInputOption"], "RAW");
        assert_eq!(body["includeValuesInResponse"], true);
    }

    #[test]
    fn filtered_replies_are_matched_to_their_filters_not_their_order() {
        let asked = vec![
            FilterWrite {
                filter: Filter::Metadata(9),
                values: vec![vec![Some(json!("x"))]],
            },
            FilterWrite {
                filter: Filter::A1("P!C8".into()),
                values: vec![vec![Some(json!("y"))]],
            },
            FilterWrite {
                filter: Filter::Metadata(10),
                values: vec![vec![Some(json!("z"))]],
            },
        ];
        let reply: api::BatchUpdateValuesByDataFilterResponse = from(json!({"responses": [
            {"dataFilter": {"a1Range": "P!C8"}, "updatedRange": "P!C8",
             "updatedData": {"range": "P!C8", "values": [["y"]]}},
            {"dataFilter": {"developerMetadataLookup": {"metadataId": 9}},
             "updatedRange": "Q!A12:P12", "updatedData": {"values": [["j1", ""]]}}
        ]}));
        let got = filtered_writes(&asked, &reply);
        assert_eq!(got[0].as_ref().map(|w| w.range.as_str()), Some("Q!A12:P12"));
        assert_eq!(
            got[0].as_ref().map(|w| w.values.clone()),
            Some(vec![vec![json!("j1")]])
        );
        assert_eq!(got[1].as_ref().map(|w| w.range.as_str()), Some("P!C8"));
        assert_eq!(got[2], None, "metadata #10 matched nothing");

        let reads: api::BatchGetValuesByDataFilterResponse = from(json!({"valueRanges": [
            {"dataFilters": [{"developerMetadataLookup": {"metadataId": 10}}],
             "valueRange": {"range": "Q!A3:P3", "values": [["j3"]]}}
        ]}));
        let got = filtered_reads(&[Filter::Metadata(9), Filter::Metadata(10)], &reads);
        assert!(got[0].ranges.is_empty());
        assert_eq!(got[1].row().map(|(r, _)| r), Some("Q!A3:P3"));
    }

    fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("test reply does not parse: {e}"))
    }

    #[test]
    fn same_start_twice_takes_blocks_in_order_and_missing_data_is_an_error() {
        let s = spreadsheet(json!({"sheets": [{"properties": {"title": "Q"}, "data": [
            {"rowData": [{"values": [{"effectiveValue": {"stringValue": "first"}}]}]},
            {"rowData": [{"values": [{"effectiveValue": {"stringValue": "second"}}]}]}
        ]}]}));
        let asked = vec!["Q!A1:A1".to_string(), "Q!A1:B9".to_string()];
        let got = response_ranges(&asked, Some(&s)).unwrap_or_default();
        assert_eq!(got[0].0.values, vec![vec![json!("first")]]);
        assert_eq!(got[1].0.values, vec![vec![json!("second")]]);
        let err = response_ranges(&["Other!A1".to_string()], Some(&s));
        assert!(err.is_err_and(|e| e.contains("Other!A1")));
        assert!(response_ranges(&asked, None).is_err());
    }
}
