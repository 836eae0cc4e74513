//! `DataFilter` resolution: which developer metadata a filter selects (for
//! `developerMetadata.search`, `updateDeveloperMetadata`, `deleteDeveloperMetadata`) and
//! which grid ranges it stands for (for the `values.*ByDataFilter` methods), resolved against
//! the spreadsheet as it is when the request is applied.
//!
//! Reference: https://developers.google.com/sheets/api/reference/rest/v4/DataFilter and
//! https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata#DeveloperMetadataLookup
//!
//! Rules taken from the `DeveloperMetadataLookup` documentation:
//! - every field given must match (intersection);
//! - `locationMatchingStrategy` defaults to INTERSECTING ("If left unspecified, this field
//!   assumes a default value of INTERSECTING"), and needs a `metadataLocation`;
//! - `locationType` must be unset with EXACT, and cannot be SPREADSHEET with INTERSECTING or
//!   with a non-spreadsheet `metadataLocation`.
//!
//! Decisions where Google is silent (the emulator's, stricter where it had to choose):
//! - a lookup with no field at all is refused rather than selecting every metadata;
//! - spreadsheet-level metadata intersects only the spreadsheet location; a sheet location
//!   intersects the sheet's own, row and column metadata; a row intersects the sheet's
//!   metadata and every column of the sheet (and a column every row);
//! - an `a1Range`/`gridRange` filter selects the row and column metadata inside the range;
//! - as a range, a row metadata is its whole row (column A to the sheet's last grid column),
//!   a column metadata its whole column, a sheet metadata the whole sheet; spreadsheet-level
//!   metadata has no range and resolves to nothing.
//!
//! Every resolution is a caller's: it runs against the metadata that caller sees
//! (`metadata::Seen`, from `metadata::locate_as`), so a `PROJECT` entry of another developer
//! project is never matched, by a lookup of its id, key or location nor by a range.

use google_sheets4::api::{DataFilter, DeveloperMetadataLookup};
use serde_json::Value as Json;

use super::error::ApiError;
use super::metadata::{self, Placed, Seen, Visibility};
use super::request;
use super::store::{Bounds, Spreadsheet};

/// Parses a request's list of `DataFilter`s, keeping each one's JSON (nulls removed) to echo
/// back in replies. A missing or empty list is refused.
pub fn parse_filters(v: Option<&Json>, name: &str) -> Result<Vec<(Json, DataFilter)>, ApiError> {
    let items = match v {
        Some(Json::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(ApiError::invalid(format!(
                "At least one data filter must be specified in '{name}'."
            )))
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            parse_one(raw).map_err(|m| ApiError::invalid(format!("Invalid {name}[{i}]: {m}")))
        })
        .collect()
}

/// One filter from JSON, with its JSON echo.
pub fn parse_one(raw: &Json) -> Result<(Json, DataFilter), String> {
    let mut echo = raw.clone();
    google_sheets4::common::remove_json_null_values(&mut echo);
    let f: DataFilter = serde_json::from_str(&echo.to_string())
        .map_err(|e| format!("Invalid JSON payload received. {e}"))?;
    Ok((echo, f))
}

/// A short text of a filter for the request log: the A1 range itself, or the kind and its
/// JSON (`developerMetadataLookup:{"metadataId":7}`).
pub fn describe(raw: &Json) -> String {
    if let Some(a1) = raw.get("a1Range").and_then(Json::as_str) {
        return a1.to_string();
    }
    for kind in ["developerMetadataLookup", "gridRange"] {
        if let Some(v) = raw.get(kind) {
            let mut v = v.clone();
            google_sheets4::common::remove_json_null_values(&mut v);
            return format!("{kind}:{v}");
        }
    }
    raw.to_string()
}

enum Kind<'a> {
    A1(&'a str),
    Grid(&'a google_sheets4::api::GridRange),
    Lookup(&'a DeveloperMetadataLookup),
}

fn kind(f: &DataFilter) -> Result<Kind<'_>, String> {
    match (&f.a1_range, &f.grid_range, &f.developer_metadata_lookup) {
        (Some(a1), None, None) => Ok(Kind::A1(a1)),
        (None, Some(g), None) => Ok(Kind::Grid(g)),
        (None, None, Some(l)) => Ok(Kind::Lookup(l)),
        _ => Err(
            "A data filter must set exactly one of a1Range, gridRange or \
             developerMetadataLookup."
                .into(),
        ),
    }
}

fn range_bounds(ss: &Spreadsheet, k: &Kind<'_>) -> Result<Option<Bounds>, String> {
    Ok(match k {
        Kind::A1(a1) => Some(ss.resolve_read(a1).map_err(|e| e.message)?),
        Kind::Grid(g) => Some(request::grid_range(ss, g)?),
        Kind::Lookup(_) => None,
    })
}

/// The ids of the metadata a filter selects among those `seen`, in id order.
pub fn matching_metadata(
    ss: &Spreadsheet,
    f: &DataFilter,
    seen: &Seen,
) -> Result<Vec<i32>, String> {
    let k = kind(f)?;
    let mut ids: Vec<i32> = match (&k, range_bounds(ss, &k)?) {
        (Kind::Lookup(l), _) => {
            let m = Matcher::new(ss, l)?;
            ss.developer_metadata
                .iter()
                .filter_map(|(id, md)| {
                    let placed = seen.get(*id)?;
                    m.matches(*id, md, placed).then_some(*id)
                })
                .collect()
        }
        (_, Some(b)) => seen
            .iter()
            .filter(|(_, p)| match *p {
                Placed::Row(s, r) => s == b.sheet && (b.r0..b.r1).contains(&r),
                Placed::Column(s, c) => s == b.sheet && (b.c0..b.c1).contains(&c),
                Placed::Spreadsheet | Placed::Sheet(_) => false,
            })
            .map(|(id, _)| id)
            .collect(),
        (_, None) => Vec::new(),
    };
    ids.sort_unstable();
    Ok(ids)
}

/// The grid ranges a filter stands for, in sheet, row, column order, without duplicates; a
/// metadata lookup stands for the places of the metadata `seen` it selects. An empty result
/// means the filter matched nothing.
pub fn ranges(ss: &Spreadsheet, f: &DataFilter, seen: &Seen) -> Result<Vec<Bounds>, String> {
    let k = kind(f)?;
    if let Some(b) = range_bounds(ss, &k)? {
        return Ok(vec![b]);
    }
    let mut places: Vec<Placed> = matching_metadata(ss, f, seen)?
        .iter()
        .filter_map(|id| seen.get(*id))
        .collect();
    places.sort_unstable_by_key(|p| match *p {
        Placed::Spreadsheet => (0, 0, 0, 0),
        Placed::Sheet(i) => (1, i, 0, 0),
        Placed::Row(i, r) => (1, i, r + 1, 0),
        Placed::Column(i, c) => (1, i, 0, c + 1),
    });
    let mut out: Vec<Bounds> = Vec::new();
    for p in places {
        let b = match p {
            Placed::Spreadsheet => continue,
            Placed::Sheet(i) => ss.whole_sheet(i),
            Placed::Row(i, r) => Bounds {
                r0: r,
                r1: r + 1,
                ..ss.whole_sheet(i)
            },
            Placed::Column(i, c) => Bounds {
                c0: c,
                c1: c + 1,
                ..ss.whole_sheet(i)
            },
        };
        if !out.contains(&b) {
            out.push(b);
        }
    }
    Ok(out)
}

/// A validated `DeveloperMetadataLookup`.
struct Matcher<'a> {
    lookup: &'a DeveloperMetadataLookup,
    visibility: Option<Visibility>,
    location_type: Option<&'static str>,
    location: Option<(Placed, bool)>,
}

impl<'a> Matcher<'a> {
    fn new(ss: &Spreadsheet, l: &'a DeveloperMetadataLookup) -> Result<Self, String> {
        let empty = l.metadata_id.is_none()
            && l.metadata_key.is_none()
            && l.metadata_value.is_none()
            && l.visibility.is_none()
            && l.location_type.is_none()
            && l.metadata_location.is_none()
            && l.location_matching_strategy.is_none();
        if empty {
            return Err("A developerMetadataLookup must specify at least one field.".into());
        }
        let visibility = match l.visibility.as_deref() {
            None | Some("DEVELOPER_METADATA_VISIBILITY_UNSPECIFIED") => None,
            v => Some(Visibility::parse(v)?),
        };
        let location_type = match l.location_type.as_deref() {
            None | Some("DEVELOPER_METADATA_LOCATION_TYPE_UNSPECIFIED") => None,
            Some("SPREADSHEET") => Some("SPREADSHEET"),
            Some("SHEET") => Some("SHEET"),
            Some("ROW") => Some("ROW"),
            Some("COLUMN") => Some("COLUMN"),
            Some(other) => {
                return Err(format!(
                    "Invalid value at 'location_type' (type.googleapis.com/google.apps.sheets.v4.DeveloperMetadata.DeveloperMetadataLocationType), \"{other}\""
                ))
            }
        };
        let exact = match l.location_matching_strategy.as_deref() {
            None | Some("DEVELOPER_METADATA_LOCATION_MATCHING_STRATEGY_UNSPECIFIED") => None,
            Some("EXACT_LOCATION") => Some(true),
            Some("INTERSECTING_LOCATION") => Some(false),
            Some(other) => {
                return Err(format!(
                    "Invalid value at 'location_matching_strategy' (type.googleapis.com/google.apps.sheets.v4.DeveloperMetadataLookup.DeveloperMetadataLocationMatchingStrategy), \"{other}\""
                ))
            }
        };
        if exact.is_some() && l.metadata_location.is_none() {
            return Err(
                "A metadataLocation must be specified when locationMatchingStrategy is specified."
                    .into(),
            );
        }
        let location = match &l.metadata_location {
            Some(loc) => Some((metadata::parse_location(ss, loc)?, exact.unwrap_or(false))),
            None => None,
        };
        if exact == Some(true) && location_type.is_some() {
            return Err(
                "locationType must be left unspecified when locationMatchingStrategy is \
                 EXACT_LOCATION."
                    .into(),
            );
        }
        if location_type == Some("SPREADSHEET") {
            if let Some((p, exact)) = location {
                if !exact || p != Placed::Spreadsheet {
                    return Err(
                        "locationType cannot be SPREADSHEET when locationMatchingStrategy is \
                         INTERSECTING_LOCATION or the metadataLocation is not the spreadsheet."
                            .into(),
                    );
                }
            }
        }
        Ok(Matcher {
            lookup: l,
            visibility,
            location_type,
            location,
        })
    }

    fn matches(&self, id: i32, md: &metadata::Metadata, placed: Placed) -> bool {
        let l = self.lookup;
        l.metadata_id.is_none_or(|x| x == id)
            && l.metadata_key.as_ref().is_none_or(|k| *k == md.key)
            && l.metadata_value
                .as_ref()
                .is_none_or(|v| Some(v) == md.value.as_ref())
            && self.visibility.is_none_or(|v| v == md.visibility)
            && self.location_type.is_none_or(|t| t == placed.type_name())
            && self
                .location
                .is_none_or(|(at, exact)| located_at(placed, at, exact))
    }
}

/// Whether metadata at `placed` is selected by a lookup location `at`.
fn located_at(placed: Placed, at: Placed, exact: bool) -> bool {
    if exact || placed == at {
        return placed == at;
    }
    use Placed::*;
    match (at, placed) {
        (Spreadsheet, _) | (_, Spreadsheet) => false,
        (Sheet(s), Sheet(t)) | (Sheet(s), Row(t, _)) | (Sheet(s), Column(t, _)) => s == t,
        (Row(s, _), Sheet(t)) | (Column(s, _), Sheet(t)) => s == t,
        (Row(s, _), Column(t, _)) | (Column(s, _), Row(t, _)) => s == t,
        (Row(..), Row(..)) | (Column(..), Column(..)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersecting_locations_follow_the_grid() {
        use Placed::*;
        assert!(located_at(Row(0, 4), Row(0, 4), true));
        assert!(!located_at(Row(0, 5), Row(0, 4), true));
        assert!(
            !located_at(Sheet(0), Row(0, 4), true),
            "EXACT: only the same location"
        );
        assert!(
            located_at(Sheet(0), Row(0, 4), false),
            "a row intersects its sheet"
        );
        assert!(
            located_at(Column(0, 2), Row(0, 4), false),
            "a row crosses every column"
        );
        assert!(
            !located_at(Row(0, 5), Row(0, 4), false),
            "rows do not intersect rows"
        );
        assert!(!located_at(Row(1, 4), Sheet(0), false), "other sheet");
        assert!(
            !located_at(Spreadsheet, Sheet(0), false),
            "spreadsheet intersects nothing"
        );
    }

    #[test]
    fn filter_descriptions_name_the_filter() {
        assert_eq!(
            describe(&serde_json::json!({ "a1Range": "Sheet1!A1:B2" })),
            "Sheet1!A1:B2"
        );
        assert_eq!(
            describe(&serde_json::json!({ "developerMetadataLookup": { "metadataId": 7 } })),
            r#"developerMetadataLookup:{"metadataId":7}"#
        );
    }
}
