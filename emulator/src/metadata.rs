//! Developer metadata: the key/value entries attached to the spreadsheet, a sheet, a row or
//! a column (their types live in `store`), where each is now, and the requests that name one
//! by id or place (`createDeveloperMetadata`, `developerMetadata.get`). The requests that
//! select entries by `DataFilter` are in `lookup`, above `data_filter`.
//!
//! Reference:
//! https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata
//! and https://developers.google.com/sheets/api/guides/metadata.
//!
//! Row and column metadata is not stored with an index: the row object (or column slot)
//! carries the metadata's id (`store::Row::meta`, `Sheet::column_meta`), so it "remains
//! associated at those locations as they move around and the spreadsheet is edited", and
//! "if the associated object is deleted its metadata is deleted too" ([`prune`]). Where a
//! metadata is right now is found by [`locate`]. A dimension location is always a single row
//! or column: Google documents that the `DimensionRange` "must represent a single row or
//! column; it cannot be unbounded or span multiple rows or columns", and the emulator refuses
//! anything else, so no multi-row location ever has to grow or shrink.
//!
//! # Who sees an entry
//!
//! Every request is made through a developer project ([`project_of`] its caller), and sees
//! the entries [`Seer::sees`] allows: all `DOCUMENT` ones, and the `PROJECT` ones that
//! project created. An entry hidden from the caller does not exist for it anywhere: it is
//! absent from [`locate_as`] (hence from every `DataFilter` and lookup resolved against it),
//! from [`at`] (the grid's `developerMetadata`) and from [`get`] (404, as a missing id).
//! What stays global: [`locate`] itself (the emulator's own view), [`prune`] (an entry goes
//! with its row, sheet or column whoever deletes it), [`check_storage`] (the limit counts
//! every entry) and the refusal of an explicit `metadataId` another entry already uses.
//!
//! # Who may change an entry
//!
//! Google documents nothing about developer metadata and protected ranges. The stricter
//! reading: creating, updating (key, value, visibility, location) or deleting an entry is an
//! edit of where it lies (a row or column: its cells; a sheet: all its cells; the
//! spreadsheet itself: the file, which the caller must be an editor of). The protection
//! guard refuses it, whole batch, with Google's refusal for a protected cell, for a caller
//! who may not edit there (`footprint.rs`); [`create_place`], `lookup::update_places` and
//! `lookup::delete_places` say where each request lands, with the checks the requests
//! themselves make.

use std::collections::HashMap;

use google_sheets4::api::{
    CreateDeveloperMetadataRequest, DeveloperMetadata, DeveloperMetadataLocation,
};
use rand::Rng;

use serde_json::{json, Map, Value as Json};

use super::error::ApiError;
use super::people;
use super::store::Spreadsheet;

/// Characters of metadata keys and values allowed per sheet (its own, its rows' and its
/// columns' metadata together) and for the spreadsheet-level metadata. The emulator counts
/// Unicode characters of `metadataKey` + `metadataValue`
/// (https://developers.google.com/sheets/api/guides/metadata, "storage limits").
pub const STORAGE_LIMIT: usize = 30_000;

pub use super::store::{Anchor, Metadata, Visibility};

/// The developer project a request of `user` (the e-mail its bearer token was issued to) is
/// made through, as a name [`Seer`] compares.
///
/// Google: "Project-visible metadata is only visible to and accessible by the developer
/// project that created the metadata", and "Document-visible metadata is accessible from any
/// developer project with access to the document"
/// (https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata#DeveloperMetadata.DeveloperMetadataVisibility).
///
/// - A service account `NAME@PROJECT.iam.gserviceaccount.com` calls through `PROJECT`
///   (an App Engine default account `PROJECT@appspot.gserviceaccount.com` too).
/// - Any other service account (`N-compute@developer.gserviceaccount.com`, ...) names no
///   project id the emulator could compare: it is a project of its own,
///   `service-account:<email>`.
/// - A person (a people token) calls through some OAuth client of their own (the Sheets UI,
///   an Apps Script project run as them), never a service account's project: a project of
///   their own, `person:<email>`.
///
/// Addresses and project ids are compared without regard to case.
pub fn project_of(user: &str) -> String {
    let user = user.trim().to_ascii_lowercase();
    if !people::is_service_account(&user) {
        return format!("person:{user}");
    }
    let (local, domain) = user.split_once('@').unwrap_or(("", user.as_str()));
    if let Some(project) = domain
        .strip_suffix(".iam.gserviceaccount.com")
        .filter(|p| !p.is_empty() && !p.contains('.'))
    {
        return project.to_string();
    }
    if domain == "appspot.gserviceaccount.com" && !local.is_empty() {
        return local.to_string();
    }
    format!("service-account:{user}")
}

/// Who is looking at the developer metadata: the developer project of a request's caller, or
/// the emulator itself (its test handle, `prune`, the storage limit), which sees every entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seer {
    /// A request made through this developer project ([`project_of`]).
    Project(String),
    /// The emulator's own view: every entry.
    Emulator,
}

impl Seer {
    /// The seer of a request made by `user` (a service account or a person).
    pub fn caller(user: &str) -> Self {
        Seer::Project(project_of(user))
    }

    /// The project a new entry is recorded as created by (none for the emulator's own).
    pub fn project(&self) -> Option<&str> {
        match self {
            Seer::Project(p) => Some(p),
            Seer::Emulator => None,
        }
    }

    /// Whether this seer sees `md`, and so may locate, select, read, update or delete it:
    /// every `DOCUMENT` entry; a `PROJECT` entry only when it created it. The strict reading
    /// for an entry of no recorded project (saved before the emulator recorded one): a
    /// `DOCUMENT` one is seen by all, a `PROJECT` one by no caller at all (only the
    /// emulator's own view), since no caller can be shown to be the project that created it.
    pub fn sees(&self, md: &Metadata) -> bool {
        match (self, md.visibility) {
            (Seer::Emulator, _) | (_, Visibility::Document) => true,
            (Seer::Project(p), Visibility::Project) => md.project.as_deref() == Some(p.as_str()),
        }
    }
}

/// Where the metadata one [`Seer`] sees is now, by id: what [`locate_as`] answers. Data
/// filters and lookups resolve against it, so an entry hidden from the caller can never be
/// selected.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    places: HashMap<i32, Placed>,
}

impl Seen {
    /// Where metadata `id` is, if the seer sees it.
    pub fn get(&self, id: i32) -> Option<Placed> {
        self.places.get(&id).copied()
    }

    /// Every metadata seen, with its place, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (i32, Placed)> + '_ {
        self.places.iter().map(|(id, p)| (*id, *p))
    }
}

/// Where a metadata is at this moment: sheet indexes into `Spreadsheet::sheets`, zero-based
/// row and column indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placed {
    Spreadsheet,
    Sheet(usize),
    Row(usize, u32),
    Column(usize, u32),
}

impl Placed {
    /// `DeveloperMetadataLocationType` name.
    pub fn type_name(self) -> &'static str {
        match self {
            Placed::Spreadsheet => "SPREADSHEET",
            Placed::Sheet(_) => "SHEET",
            Placed::Row(..) => "ROW",
            Placed::Column(..) => "COLUMN",
        }
    }

    pub(super) fn anchor(self, ss: &Spreadsheet) -> Anchor {
        match self {
            Placed::Spreadsheet => Anchor::Spreadsheet,
            Placed::Sheet(i) => Anchor::Sheet {
                sheet_id: ss.sheets[i].id,
            },
            Placed::Row(..) => Anchor::Row,
            Placed::Column(..) => Anchor::Column,
        }
    }

    /// The storage bucket a metadata counts against: `None` for the spreadsheet's own,
    /// else the sheet's index.
    fn bucket(self) -> Option<usize> {
        match self {
            Placed::Spreadsheet => None,
            Placed::Sheet(i) | Placed::Row(i, _) | Placed::Column(i, _) => Some(i),
        }
    }
}

/// Where every metadata of the spreadsheet is now, whoever created it: the emulator's own
/// view (for [`prune`], [`check_storage`], the test handle), never a caller's; a request
/// resolves against [`locate_as`]. Metadata whose sheet, row or column is gone is absent
/// (and dropped by [`prune`]).
pub fn locate(ss: &Spreadsheet) -> HashMap<i32, Placed> {
    locate_as(ss, &Seer::Emulator).places
}

/// Where the metadata `seer` sees ([`Seer::sees`]) is now; the others are absent, as if
/// they did not exist.
pub fn locate_as(ss: &Spreadsheet, seer: &Seer) -> Seen {
    let everything = *seer == Seer::Emulator;
    let shown = |id: &i32| {
        everything
            || ss
                .developer_metadata
                .get(id)
                .is_some_and(|md| seer.sees(md))
    };
    let mut out = HashMap::with_capacity(ss.developer_metadata.len());
    let mut dimensions = false;
    for (id, md) in &ss.developer_metadata {
        if !seer.sees(md) {
            continue;
        }
        match md.anchor {
            Anchor::Spreadsheet => {
                out.insert(*id, Placed::Spreadsheet);
            }
            Anchor::Sheet { sheet_id } => {
                if let Some(i) = ss.sheet_index(sheet_id) {
                    out.insert(*id, Placed::Sheet(i));
                }
            }
            Anchor::Row | Anchor::Column => dimensions = true,
        }
    }
    if dimensions {
        for (i, s) in ss.sheets.iter().enumerate() {
            for (r, row) in s.rows.iter().enumerate() {
                for id in row.meta.iter().filter(|id| shown(id)) {
                    out.insert(*id, Placed::Row(i, r as u32));
                }
            }
            for (c, ids) in s.column_meta.iter().enumerate() {
                for id in ids.iter().filter(|id| shown(id)) {
                    out.insert(*id, Placed::Column(i, c as u32));
                }
            }
        }
    }
    Seen { places: out }
}

/// Drops metadata whose location no longer exists (a deleted sheet, row or column), and ids
/// on rows or columns that no longer name a metadata.
pub fn prune(ss: &mut Spreadsheet) {
    if ss.developer_metadata.is_empty() {
        return;
    }
    let located = locate(ss);
    ss.developer_metadata
        .retain(|id, _| located.contains_key(id));
}

/// Attaches metadata `id` to the row or column of `placed` (sheet and spreadsheet locations
/// need nothing beyond the anchor).
pub(super) fn attach(ss: &mut Spreadsheet, id: i32, placed: Placed) {
    match placed {
        Placed::Row(i, r) => ss.sheets[i].row_mut(r).meta.push(id),
        Placed::Column(i, c) => ss.sheets[i].column_meta_mut(c).push(id),
        Placed::Spreadsheet | Placed::Sheet(_) => {}
    }
}

pub(super) fn detach(ss: &mut Spreadsheet, id: i32, placed: Placed) {
    match placed {
        Placed::Row(i, r) => {
            let s = &mut ss.sheets[i];
            if let Some(row) = s.rows.get_mut(r as usize) {
                row.meta.retain(|m| *m != id);
            }
            s.trim();
        }
        Placed::Column(i, c) => {
            let s = &mut ss.sheets[i];
            if let Some(ids) = s.column_meta.get_mut(c as usize) {
                ids.retain(|m| *m != id);
            }
            while s.column_meta.last().is_some_and(Vec::is_empty) {
                s.column_meta.pop();
            }
        }
        Placed::Spreadsheet | Placed::Sheet(_) => {}
    }
}

/// Reads a `DeveloperMetadataLocation`: exactly one of `spreadsheet`, `sheetId`,
/// `dimensionRange`, the last a single bounded row or column of an existing sheet.
/// `locationType` is read-only and ignored, as output-only fields are.
pub fn parse_location(ss: &Spreadsheet, loc: &DeveloperMetadataLocation) -> Result<Placed, String> {
    let set = [
        loc.spreadsheet == Some(true),
        loc.sheet_id.is_some(),
        loc.dimension_range.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err(
            "A developer metadata location must set exactly one of spreadsheet, sheetId or \
             dimensionRange."
                .into(),
        );
    }
    if loc.spreadsheet == Some(true) {
        return Ok(Placed::Spreadsheet);
    }
    if let Some(id) = loc.sheet_id {
        return ss
            .sheet_index(id)
            .map(Placed::Sheet)
            .ok_or_else(|| format!("No grid with id: {id}"));
    }
    let d = loc.dimension_range.clone().unwrap_or_default();
    let sheet_id = d.sheet_id.unwrap_or(0);
    let i = ss
        .sheet_index(sheet_id)
        .ok_or_else(|| format!("No grid with id: {sheet_id}"))?;
    let s = &ss.sheets[i];
    let (Some(start), Some(end)) = (d.start_index, d.end_index) else {
        return Err(
            "The dimensionRange of a developer metadata location must be bounded: it must \
             represent a single row or column."
                .into(),
        );
    };
    if start < 0 || end != start + 1 {
        return Err(format!(
            "The dimensionRange of a developer metadata location must represent a single row \
             or column (got startIndex {start}, endIndex {end})."
        ));
    }
    let start = start as u32;
    match d.dimension.as_deref() {
        Some("ROWS") if start < s.row_count => Ok(Placed::Row(i, start)),
        Some("COLUMNS") if start < s.column_count => Ok(Placed::Column(i, start)),
        Some("ROWS") | Some("COLUMNS") => Err(format!(
            "The dimensionRange startIndex {start} is beyond the sheet '{}' ({} rows, {} \
             columns).",
            s.title, s.row_count, s.column_count
        )),
        other => Err(format!(
            "The dimensionRange dimension must be ROWS or COLUMNS, got {}.",
            other.unwrap_or("nothing")
        )),
    }
}

/// `DeveloperMetadataLocation` JSON. Zero `sheetId`/`startIndex` inside a `DimensionRange`
/// are omitted, as proto3 JSON omits default scalars; the `sheetId` of a SHEET location is a
/// oneof member and always present.
pub fn location_json(ss: &Spreadsheet, placed: Placed) -> Json {
    let dim = |i: usize, dimension: &str, index: u32| {
        let mut m = Map::new();
        let id = ss.sheets[i].id;
        if id != 0 {
            m.insert("sheetId".into(), json!(id));
        }
        m.insert("dimension".into(), json!(dimension));
        if index > 0 {
            m.insert("startIndex".into(), json!(index));
        }
        m.insert("endIndex".into(), json!(index + 1));
        Json::Object(m)
    };
    match placed {
        Placed::Spreadsheet => json!({ "locationType": "SPREADSHEET", "spreadsheet": true }),
        Placed::Sheet(i) => json!({ "locationType": "SHEET", "sheetId": ss.sheets[i].id }),
        Placed::Row(i, r) => json!({ "locationType": "ROW", "dimensionRange": dim(i, "ROWS", r) }),
        Placed::Column(i, c) => {
            json!({ "locationType": "COLUMN", "dimensionRange": dim(i, "COLUMNS", c) })
        }
    }
}

/// `DeveloperMetadata` JSON of one entry at its current location.
pub fn metadata_json(ss: &Spreadsheet, id: i32, md: &Metadata, placed: Placed) -> Json {
    let mut m = Map::new();
    m.insert("metadataId".into(), json!(id));
    m.insert("metadataKey".into(), json!(md.key));
    if let Some(v) = md.value.as_deref().filter(|v| !v.is_empty()) {
        m.insert("metadataValue".into(), json!(v));
    }
    m.insert("location".into(), location_json(ss, placed));
    m.insert("visibility".into(), json!(md.visibility.name()));
    Json::Object(m)
}

/// The metadata `seer` sees located exactly at `placed`, as JSON, in id order (for grid
/// data's `rowMetadata`, `columnMetadata` and `sheets[].developerMetadata`).
pub fn at(ss: &Spreadsheet, placed: Placed, seer: &Seer) -> Vec<Json> {
    let ids: Vec<i32> = match placed {
        Placed::Row(i, r) => ss.sheets[i]
            .rows
            .get(r as usize)
            .map(|row| row.meta.clone())
            .unwrap_or_default(),
        Placed::Column(i, c) => ss.sheets[i]
            .column_meta
            .get(c as usize)
            .cloned()
            .unwrap_or_default(),
        Placed::Sheet(i) => {
            let id = ss.sheets[i].id;
            ss.developer_metadata
                .iter()
                .filter(|(_, md)| md.anchor == Anchor::Sheet { sheet_id: id })
                .map(|(k, _)| *k)
                .collect()
        }
        Placed::Spreadsheet => ss
            .developer_metadata
            .iter()
            .filter(|(_, md)| md.anchor == Anchor::Spreadsheet)
            .map(|(k, _)| *k)
            .collect(),
    };
    let mut ids = ids;
    ids.sort_unstable();
    ids.iter()
        .filter_map(|id| {
            let md = ss.developer_metadata.get(id).filter(|md| seer.sees(md))?;
            Some(metadata_json(ss, *id, md, placed))
        })
        .collect()
}

/// Refuses a state where the metadata of a sheet, or of the spreadsheet itself, holds more
/// than [`STORAGE_LIMIT`] characters of keys and values. The wording is the emulator's.
pub(super) fn check_storage(ss: &Spreadsheet) -> Result<(), String> {
    let located = locate(ss);
    let mut used: HashMap<Option<usize>, usize> = HashMap::new();
    for (id, md) in &ss.developer_metadata {
        let Some(placed) = located.get(id) else {
            continue;
        };
        let n = md.key.chars().count() + md.value.as_deref().map_or(0, |v| v.chars().count());
        *used.entry(placed.bucket()).or_default() += n;
    }
    for (bucket, n) in used {
        if n > STORAGE_LIMIT {
            let whom = match bucket {
                None => "the spreadsheet".to_string(),
                Some(i) => format!("sheet '{}'", ss.sheets[i].title),
            };
            return Err(format!(
                "Developer metadata storage limit exceeded: the metadata of {whom} would hold \
                 {n} characters of keys and values, more than the limit of {STORAGE_LIMIT}."
            ));
        }
    }
    Ok(())
}

fn fresh_id(ss: &Spreadsheet) -> i32 {
    let mut rng = rand::thread_rng();
    loop {
        let id = rng.gen_range(1..=i32::MAX);
        if !ss.developer_metadata.contains_key(&id) {
            return id;
        }
    }
}

/// A `createDeveloperMetadata` request's entry, key, visibility and place, checked as
/// [`create`] checks them (the same errors, in the same order).
fn checked<'a>(
    ss: &Spreadsheet,
    req: &'a CreateDeveloperMetadataRequest,
) -> Result<(&'a DeveloperMetadata, String, Visibility, Placed), String> {
    let md = req
        .developer_metadata
        .as_ref()
        .ok_or("developerMetadata is required.")?;
    let key = md
        .metadata_key
        .clone()
        .filter(|k| !k.is_empty())
        .ok_or("Developer metadata must always have a key specified.")?;
    let visibility = Visibility::parse(md.visibility.as_deref())?;
    let loc = md
        .location
        .as_ref()
        .ok_or("Developer metadata must always have a location specified.")?;
    let placed = parse_location(ss, loc)?;
    Ok((md, key, visibility, placed))
}

/// Where a `createDeveloperMetadata` request would put its entry: what the protection guard
/// judges (`footprint.rs`).
pub(super) fn create_place(
    ss: &Spreadsheet,
    req: &CreateDeveloperMetadataRequest,
) -> Result<Placed, String> {
    checked(ss, req).map(|(_, _, _, placed)| placed)
}

/// `createDeveloperMetadata` by `seer`, recorded as created by its project. An explicit
/// `metadataId` must be positive and unused by any entry, seen by `seer` or not (the
/// stricter reading: ids are unique in the spreadsheet); without one, a random positive id
/// is assigned, as Google does.
pub fn create(
    ss: &mut Spreadsheet,
    req: &CreateDeveloperMetadataRequest,
    seer: &Seer,
) -> Result<Json, String> {
    let (md, key, visibility, placed) = checked(ss, req)?;
    let id = match md.metadata_id {
        Some(id) if id <= 0 => {
            return Err(format!("metadataId must be positive, got {id}."));
        }
        Some(id) if ss.developer_metadata.contains_key(&id) => {
            return Err(format!("Developer metadata with id {id} already exists."));
        }
        Some(id) => id,
        None => fresh_id(ss),
    };
    let entry = Metadata {
        key,
        value: md.metadata_value.clone().filter(|v| !v.is_empty()),
        visibility,
        anchor: placed.anchor(ss),
        project: seer.project().map(str::to_string),
    };
    let reply = metadata_json(ss, id, &entry, placed);
    ss.developer_metadata.insert(id, entry);
    attach(ss, id, placed);
    check_storage(ss)?;
    Ok(json!({ "createDeveloperMetadata": { "developerMetadata": reply } }))
}

/// `developerMetadata.get` by `seer`: 404 `NOT_FOUND` for an id that does not exist (any
/// more), and the same for one `seer` does not see.
pub fn get(ss: &Spreadsheet, id: i32, seer: &Seer) -> Result<Json, ApiError> {
    let seen = locate_as(ss, seer);
    match (ss.developer_metadata.get(&id), seen.get(id)) {
        (Some(md), Some(placed)) => Ok(metadata_json(ss, id, md, placed)),
        _ => Err(ApiError::new(
            404,
            format!("No developer metadata with id {id} exists in the spreadsheet."),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch;
    use crate::deviation::Rules;
    use crate::store::Sheet;

    fn ss() -> Spreadsheet {
        let mut ss = Spreadsheet::new("id", "t");
        ss.sheets.push(Sheet::new(0, "A"));
        ss.sheets.push(Sheet::new(5, "B"));
        ss
    }

    fn run(ss: &mut Spreadsheet, requests: Json) -> Result<Json, ApiError> {
        run_as(ss, crate::DEFAULT_OWNER, requests)
    }

    fn run_as(ss: &mut Spreadsheet, user: &str, requests: Json) -> Result<Json, ApiError> {
        let body = serde_json::to_vec(&json!({ "requests": requests })).unwrap_or_default();
        batch::run(ss, &batch::parse(&body)?, &Rules::default(), user)
    }

    const SA_A: &str = "a@proj-a.iam.gserviceaccount.com";
    const SA_A2: &str = "other@proj-a.iam.gserviceaccount.com";
    const SA_B: &str = "b@proj-b.iam.gserviceaccount.com";
    const PERSON: &str = "alice@example.com";

    fn tagged(id: i32, visibility: &str, location: Json) -> Json {
        json!({ "createDeveloperMetadata": { "developerMetadata": {
            "metadataId": id, "metadataKey": "k", "visibility": visibility,
            "location": location } } })
    }

    fn seen_ids(ss: &Spreadsheet, user: &str) -> Vec<i32> {
        let mut ids: Vec<i32> = locate_as(ss, &Seer::caller(user))
            .iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    fn create(id: i32, location: Json) -> Json {
        json!({ "createDeveloperMetadata": { "developerMetadata": {
            "metadataId": id, "metadataKey": "k", "visibility": "DOCUMENT", "location": location } } })
    }

    fn row(sheet_id: i32, index: i32) -> Json {
        json!({ "dimensionRange": { "sheetId": sheet_id, "dimension": "ROWS",
                                    "startIndex": index, "endIndex": index + 1 } })
    }

    fn ids(ss: &Spreadsheet) -> Vec<i32> {
        ss.developer_metadata.keys().copied().collect()
    }

    #[test]
    fn deleting_a_sheet_deletes_its_sheet_row_and_column_metadata() {
        let mut s = ss();
        run(
            &mut s,
            json!([
                create(1, json!({ "sheetId": 5 })),
                create(2, row(5, 3)),
                create(3, row(0, 3)),
                create(4, json!({ "spreadsheet": true }))
            ]),
        )
        .unwrap_or_else(|e| panic!("create: {e}"));
        run(&mut s, json!([{ "deleteSheet": { "sheetId": 5 } }]))
            .unwrap_or_else(|e| panic!("deleteSheet: {e}"));
        assert_eq!(
            ids(&s),
            vec![3, 4],
            "only sheet A's and the spreadsheet's remain"
        );
    }

    #[test]
    fn shrinking_the_grid_deletes_metadata_of_the_rows_cut_off() {
        let mut s = ss();
        run(
            &mut s,
            json!([create(1, row(0, 10)), create(2, row(0, 900))]),
        )
        .unwrap_or_else(|e| panic!("create: {e}"));
        run(
            &mut s,
            json!([{ "updateSheetProperties": {
                "properties": { "sheetId": 0, "gridProperties": { "rowCount": 100 } },
                "fields": "gridProperties.rowCount" } }]),
        )
        .unwrap_or_else(|e| panic!("shrink: {e}"));
        assert_eq!(ids(&s), vec![1]);
        assert_eq!(locate(&s).get(&1), Some(&Placed::Row(0, 10)));
    }

    #[test]
    fn a_duplicated_sheet_does_not_copy_metadata_ids() {
        let mut s = ss();
        run(&mut s, json!([create(1, row(0, 2))])).unwrap_or_else(|e| panic!("create: {e}"));
        run(
            &mut s,
            json!([{ "duplicateSheet": { "sourceSheetId": 0, "newSheetName": "copy" } }]),
        )
        .unwrap_or_else(|e| panic!("duplicate: {e}"));
        assert_eq!(
            locate(&s).get(&1),
            Some(&Placed::Row(0, 2)),
            "still on the original"
        );
        let copy = s.sheets.iter().find(|x| x.title == "copy");
        assert!(
            copy.is_some_and(|c| c.rows.iter().all(|r| r.meta.is_empty())),
            "the copy must not carry the same id twice"
        );
    }

    #[test]
    fn a_failed_create_later_in_the_batch_leaves_no_metadata() {
        let mut s = ss();
        let err = run(&mut s, json!([create(1, row(0, 2)), create(1, row(0, 3))]))
            .err()
            .map(|e| e.message);
        assert_eq!(
            err.as_deref(),
            Some("Invalid requests[1].createDeveloperMetadata: Developer metadata with id 1 already exists.")
        );
        assert!(s.developer_metadata.is_empty(), "the whole batch failed");
        assert!(s.sheets[0].rows.is_empty(), "no row keeps a stray id");
    }

    #[test]
    fn the_project_of_a_caller_is_its_service_accounts_project_or_a_persons_own() {
        let cases = [
            ("sheetq@proj-a.iam.gserviceaccount.com", "proj-a"),
            ("Other@Proj-A.iam.gserviceaccount.com", "proj-a"),
            ("proj-c@appspot.gserviceaccount.com", "proj-c"),
            (
                "123-compute@developer.gserviceaccount.com",
                "service-account:123-compute@developer.gserviceaccount.com",
            ),
            ("Alice@Example.com", "person:alice@example.com"),
            // A person is never a service account's project, whatever their address says.
            ("proj-a@example.com", "person:proj-a@example.com"),
        ];
        for (user, want) in cases {
            assert_eq!(project_of(user), want, "the project of {user}");
        }
    }

    #[test]
    fn a_project_entry_is_seen_by_its_project_alone_and_a_document_entry_by_all() {
        let mut s = ss();
        run_as(
            &mut s,
            SA_A,
            json!([
                tagged(1, "PROJECT", row(0, 1)),
                tagged(2, "DOCUMENT", row(0, 1)),
                tagged(3, "PROJECT", json!({ "spreadsheet": true })),
            ]),
        )
        .unwrap_or_else(|e| panic!("create as A: {e}"));
        run_as(&mut s, PERSON, json!([tagged(4, "PROJECT", row(0, 2))]))
            .unwrap_or_else(|e| panic!("create as a person: {e}"));
        assert_eq!(
            s.developer_metadata
                .get(&1)
                .and_then(|m| m.project.as_deref()),
            Some("proj-a"),
            "the creating project is recorded"
        );
        assert_eq!(
            seen_ids(&s, SA_A),
            vec![1, 2, 3],
            "A sees its own and DOCUMENT"
        );
        assert_eq!(
            seen_ids(&s, SA_A2),
            vec![1, 2, 3],
            "another account of proj-a is the same project"
        );
        assert_eq!(seen_ids(&s, SA_B), vec![2], "proj-b sees DOCUMENT only");
        assert_eq!(
            seen_ids(&s, PERSON),
            vec![2, 4],
            "the person sees DOCUMENT and their own PROJECT entry"
        );
        let mut all: Vec<i32> = locate(&s).keys().copied().collect();
        all.sort_unstable();
        assert_eq!(
            all,
            vec![1, 2, 3, 4],
            "the emulator's own view sees everything"
        );
        let at_row = |user: &str| -> Vec<Json> {
            at(&s, Placed::Row(0, 1), &Seer::caller(user))
                .iter()
                .map(|m| m["metadataId"].clone())
                .collect()
        };
        assert_eq!(at_row(SA_A), vec![json!(1), json!(2)]);
        assert_eq!(
            at_row(PERSON),
            vec![json!(2)],
            "row 2 shows only DOCUMENT to a person"
        );
        let hidden = get(&s, 1, &Seer::caller(SA_B))
            .err()
            .map(|e| (e.code, e.message));
        let missing = get(&s, 99, &Seer::caller(SA_B))
            .err()
            .map(|e| (e.code, e.message));
        assert_eq!(
            hidden,
            Some((
                404,
                "No developer metadata with id 1 exists in the spreadsheet.".to_string()
            )),
            "another project's entry answers as a missing one"
        );
        assert_eq!(missing.map(|m| m.0), Some(404));
        assert!(get(&s, 1, &Seer::caller(SA_A2)).is_ok(), "proj-a gets it");
    }

    #[test]
    fn entries_of_no_recorded_project_are_document_for_all_and_project_for_none() {
        // A state file written before the creating project was recorded.
        let old = json!({ "key": "k", "visibility": "PROJECT", "anchor": "spreadsheet" });
        let md: Metadata =
            serde_json::from_value(old).unwrap_or_else(|e| panic!("an old entry loads: {e}"));
        assert_eq!(md.project, None);
        let document = Metadata {
            visibility: Visibility::Document,
            ..md.clone()
        };
        for user in [SA_A, PERSON] {
            assert!(!Seer::caller(user).sees(&md), "{user} must not see it");
            assert!(Seer::caller(user).sees(&document), "{user} sees DOCUMENT");
        }
        assert!(Seer::Emulator.sees(&md), "the emulator's own view sees it");
    }

    #[test]
    fn metadata_where_the_caller_may_not_edit_is_refused_whole_and_elsewhere_passes() {
        let mut s = ss();
        run_as(
            &mut s,
            SA_A,
            json!([
                { "addProtectedRange": { "protectedRange": { "range": { "sheetId": 5 } } } },
                tagged(1, "DOCUMENT", row(5, 2)),
            ]),
        )
        .unwrap_or_else(|e| panic!("the protection's editor tags its sheet: {e}"));
        let refused = |requests: Json, s: &mut Spreadsheet| {
            run_as(s, PERSON, requests).err().map(|e| e.message)
        };
        let by_id = json!({ "developerMetadataLookup": { "metadataId": 1 } });
        for requests in [
            json!([
                tagged(2, "PROJECT", row(0, 1)),
                tagged(3, "PROJECT", row(5, 2))
            ]),
            json!([tagged(3, "DOCUMENT", json!({ "sheetId": 5 }))]),
            json!([{ "updateDeveloperMetadata": { "dataFilters": [by_id],
                "developerMetadata": { "metadataValue": "x" }, "fields": "metadataValue" } }]),
            json!([{ "deleteDeveloperMetadata": { "dataFilter": by_id } }]),
        ] {
            assert_eq!(
                refused(requests.clone(), &mut s).as_deref(),
                Some(crate::protection::REFUSED),
                "{requests}"
            );
        }
        assert_eq!(ids(&s), vec![1], "nothing was created or deleted");
        run_as(
            &mut s,
            PERSON,
            json!([
                tagged(2, "PROJECT", row(0, 1)),
                tagged(3, "DOCUMENT", json!({ "sheetId": 0 })),
                tagged(4, "DOCUMENT", json!({ "spreadsheet": true })),
            ]),
        )
        .unwrap_or_else(|e| panic!("an open sheet and the file: {e}"));
    }

    #[test]
    fn another_projects_entry_is_neither_updated_nor_deleted_but_goes_with_its_row() {
        let mut s = ss();
        run_as(&mut s, SA_A, json!([tagged(1, "PROJECT", row(0, 3))]))
            .unwrap_or_else(|e| panic!("create as A: {e}"));
        let by_key = json!({ "developerMetadataLookup": { "metadataKey": "k" } });
        let reply = run_as(
            &mut s,
            SA_B,
            json!([
                { "updateDeveloperMetadata": { "dataFilters": [by_key],
                    "developerMetadata": { "metadataValue": "stolen", "visibility": "DOCUMENT" },
                    "fields": "metadataValue,visibility" } },
                { "deleteDeveloperMetadata": { "dataFilter": by_key } },
            ]),
        )
        .unwrap_or_else(|e| panic!("B's update and delete succeed, selecting nothing: {e}"));
        assert_eq!(
            reply["replies"],
            json!([{ "updateDeveloperMetadata": {} }, { "deleteDeveloperMetadata": {} }]),
            "nothing selected"
        );
        let md = s.developer_metadata.get(&1).cloned();
        assert_eq!(
            md.map(|m| (m.value, m.visibility)),
            Some((None, Visibility::Project)),
            "A's entry is untouched"
        );
        let err = run_as(&mut s, SA_B, json!([tagged(1, "DOCUMENT", row(0, 4))]))
            .err()
            .map(|e| e.message);
        assert_eq!(
            err.as_deref(),
            Some("Invalid requests[0].createDeveloperMetadata: Developer metadata with id 1 already exists."),
            "an id in use is refused whoever uses it"
        );
        run_as(
            &mut s,
            SA_B,
            json!([{ "deleteDimension": { "range": {
                "sheetId": 0, "dimension": "ROWS", "startIndex": 3, "endIndex": 4 } } }]),
        )
        .unwrap_or_else(|e| panic!("B deletes the row: {e}"));
        assert!(
            s.developer_metadata.is_empty(),
            "the entry went with its row: {:?}",
            s.developer_metadata
        );
    }
}
