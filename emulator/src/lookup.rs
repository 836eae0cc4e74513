//! The developer-metadata requests that select entries by `DataFilter`:
//! `updateDeveloperMetadata` and `deleteDeveloperMetadata` (in a `batchUpdate`) and
//! `developerMetadata.search`. Above `metadata` (the entries, where they are, create and get)
//! and `data_filter` (what a filter matches), which do not import it.
//!
//! Each request selects among the entries its caller sees (`metadata::Seer`): a `PROJECT`
//! entry of another developer project is neither found, updated (its key, value, visibility
//! or location) nor deleted. An update or delete of an entry lying where its caller may not
//! edit (a protected row, column or sheet) is refused by the protection guard before it is
//! applied: [`update_places`] and [`delete_places`] tell it where the request lands.
//!
//! Reference:
//! https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata.

use std::collections::BTreeSet;

use google_sheets4::api::{
    DataFilter, DeleteDeveloperMetadataRequest, DeveloperMetadata, UpdateDeveloperMetadataRequest,
};
use serde_json::{json, Map, Value as Json};

use super::data_filter;
use super::error::ApiError;
use super::metadata::{
    attach, check_storage, detach, locate, locate_as, metadata_json, parse_location, Placed, Seer,
    Visibility,
};
use super::store::Spreadsheet;

/// The ids of metadata `seer` sees that any of `filters` selects, in id order.
fn select(ss: &Spreadsheet, filters: &[DataFilter], seer: &Seer) -> Result<BTreeSet<i32>, String> {
    let seen = locate_as(ss, seer);
    let mut ids = BTreeSet::new();
    for (i, f) in filters.iter().enumerate() {
        let found = data_filter::matching_metadata(ss, f, &seen)
            .map_err(|m| format!("dataFilters[{i}]: {m}"))?;
        ids.extend(found);
    }
    Ok(ids)
}

/// What an `updateDeveloperMetadata` does, checked as [`update`] checks it: the entry to
/// copy from, the field mask, the ids selected and the place they move to (when the mask
/// names `location`).
struct UpdatePlan<'a> {
    src: &'a DeveloperMetadata,
    mask: Vec<String>,
    ids: BTreeSet<i32>,
    new_place: Option<Placed>,
}

fn plan_update<'a>(
    ss: &Spreadsheet,
    req: &'a UpdateDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<UpdatePlan<'a>, String> {
    let filters = req.data_filters.as_deref().unwrap_or_default();
    if filters.is_empty() {
        return Err("At least one data filter must be specified in 'dataFilters'.".into());
    }
    let src = req
        .developer_metadata
        .as_ref()
        .ok_or("developerMetadata is required.")?;
    let mask = super::request::fields(req.fields.as_ref())?;
    for f in &mask {
        if !matches!(
            f.as_str(),
            "*" | "metadataId" | "metadataKey" | "metadataValue" | "visibility" | "location"
        ) {
            return Err(format!(
                "Invalid field mask: '{f}' is not a DeveloperMetadata field."
            ));
        }
    }
    let ids = select(ss, filters, seer)?;
    let new_place = if mask.iter().any(|m| m == "*" || m == "location") {
        let loc = src
            .location
            .as_ref()
            .ok_or("Developer metadata must always have a location specified.")?;
        Some(parse_location(ss, loc)?)
    } else {
        None
    };
    Ok(UpdatePlan {
        src,
        mask,
        ids,
        new_place,
    })
}

/// Where an `updateDeveloperMetadata` by `seer` changes metadata, for the protection guard
/// (`footprint.rs`): the place of every entry it selects, and the place it moves them to.
/// Nothing when it selects nothing.
pub(super) fn update_places(
    ss: &Spreadsheet,
    req: &UpdateDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<Vec<Placed>, String> {
    let plan = plan_update(ss, req, seer)?;
    let seen = locate_as(ss, seer);
    let mut places: Vec<Placed> = plan.ids.iter().filter_map(|id| seen.get(*id)).collect();
    if !places.is_empty() {
        places.extend(plan.new_place);
    }
    Ok(places)
}

/// `updateDeveloperMetadata` by `seer`: every metadata it sees that the filters select gets
/// the masked fields of `developerMetadata`. Allowed fields: `metadataKey`, `metadataValue`,
/// `visibility`, `location` (moves it), or `*`; `metadataId` cannot change, nor can the
/// project that created the entry: made `PROJECT`, an entry is that project's alone. The
/// reply lists every entry updated, as it now is, even one the update just hid from `seer`.
pub fn update(
    ss: &mut Spreadsheet,
    req: &UpdateDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<Json, String> {
    let UpdatePlan {
        src,
        mask,
        ids,
        new_place,
    } = plan_update(ss, req, seer)?;
    let has = |f: &str| mask.iter().any(|m| m == "*" || m == f);
    let located = locate_as(ss, seer);
    for id in &ids {
        if has("metadataId") && src.metadata_id.is_some_and(|n| n != *id) {
            return Err(format!(
                "metadataId cannot be updated (metadata {id} was asked to become {}).",
                src.metadata_id.unwrap_or_default()
            ));
        }
        let Some(md) = ss.developer_metadata.get_mut(id) else {
            continue;
        };
        if has("metadataKey") {
            md.key = src
                .metadata_key
                .clone()
                .filter(|k| !k.is_empty())
                .ok_or("Developer metadata must always have a key specified.")?;
        }
        if has("metadataValue") {
            md.value = src.metadata_value.clone().filter(|v| !v.is_empty());
        }
        if has("visibility") {
            md.visibility = Visibility::parse(src.visibility.as_deref())?;
        }
        if let (Some(to), Some(from)) = (new_place, located.get(*id)) {
            let anchor = to.anchor(ss);
            if let Some(md) = ss.developer_metadata.get_mut(id) {
                md.anchor = anchor;
            }
            detach(ss, *id, from);
            attach(ss, *id, to);
        }
    }
    check_storage(ss)?;
    let located = locate(ss);
    let updated: Vec<Json> = ids
        .iter()
        .filter_map(|id| {
            let md = ss.developer_metadata.get(id)?;
            Some(metadata_json(ss, *id, md, *located.get(id)?))
        })
        .collect();
    let mut reply = Map::new();
    if !updated.is_empty() {
        reply.insert("developerMetadata".into(), Json::Array(updated));
    }
    Ok(json!({ "updateDeveloperMetadata": reply }))
}

/// `deleteDeveloperMetadata` by `seer`: deletes what the filter selects among the entries
/// `seer` sees; a filter selecting nothing deletes nothing and replies with an empty list
/// (omitted, as proto3 JSON does).
pub fn delete(
    ss: &mut Spreadsheet,
    req: &DeleteDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<Json, String> {
    let ids = delete_targets(ss, req, seer)?;
    let located = locate_as(ss, seer);
    let mut deleted = Vec::new();
    for id in ids {
        let Some(placed) = located.get(id) else {
            continue;
        };
        if let Some(md) = ss.developer_metadata.get(&id) {
            deleted.push(metadata_json(ss, id, md, placed));
        }
        detach(ss, id, placed);
        ss.developer_metadata.remove(&id);
    }
    let mut reply = Map::new();
    if !deleted.is_empty() {
        reply.insert("deletedDeveloperMetadata".into(), Json::Array(deleted));
    }
    Ok(json!({ "deleteDeveloperMetadata": reply }))
}

/// The ids a `deleteDeveloperMetadata` by `seer` selects, checked as [`delete`] checks it.
fn delete_targets(
    ss: &Spreadsheet,
    req: &DeleteDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<BTreeSet<i32>, String> {
    let filter = req.data_filter.as_ref().ok_or("dataFilter is required.")?;
    select(ss, std::slice::from_ref(filter), seer)
}

/// Where a `deleteDeveloperMetadata` by `seer` deletes metadata, for the protection guard
/// (`footprint.rs`): the place of every entry it selects.
pub(super) fn delete_places(
    ss: &Spreadsheet,
    req: &DeleteDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<Vec<Placed>, String> {
    let ids = delete_targets(ss, req, seer)?;
    let seen = locate_as(ss, seer);
    Ok(ids.iter().filter_map(|id| seen.get(*id)).collect())
}

/// `developerMetadata.search` by `seer`: `{"matchedDeveloperMetadata": [{"developerMetadata",
/// "dataFilters"}]}`, one entry per metadata `seer` sees with every filter that selected it,
/// in id order; `{}` when nothing matches.
pub fn search(ss: &Spreadsheet, body: &Json, seer: &Seer) -> Result<Json, ApiError> {
    let filters = data_filter::parse_filters(body.get("dataFilters"), "dataFilters")?;
    let seen = locate_as(ss, seer);
    let mut matched: std::collections::BTreeMap<i32, Vec<Json>> = Default::default();
    for (i, (raw, f)) in filters.iter().enumerate() {
        let ids = data_filter::matching_metadata(ss, f, &seen)
            .map_err(|m| ApiError::invalid(format!("Invalid dataFilters[{i}]: {m}")))?;
        for id in ids {
            matched.entry(id).or_default().push(raw.clone());
        }
    }
    let entries: Vec<Json> = matched
        .into_iter()
        .filter_map(|(id, filters)| {
            let md = ss.developer_metadata.get(&id)?;
            let placed = seen.get(id)?;
            Some(json!({
                "developerMetadata": metadata_json(ss, id, md, placed),
                "dataFilters": filters,
            }))
        })
        .collect();
    if entries.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({ "matchedDeveloperMetadata": entries }))
}
