//! Protected ranges, as the Sheets API v4 has them: the `addProtectedRange`,
//! `updateProtectedRange` and `deleteProtectedRange` requests, their JSON in
//! `spreadsheets.get`, who may edit through one, and the guard every write passes: a write
//! that touches a protected cell, by an account that is neither an editor of that range nor
//! the owner, is refused whole with Google's 400.
//!
//! What Google documents, and what the emulator does with it:
//! - The owner can always edit: "The spreadsheet owner is always able to edit protected
//!   ranges and sheets"
//!   (https://developers.google.com/apps-script/reference/spreadsheet/protection#canedit).
//! - Neither the owner nor the user setting a protection can be taken off its editors:
//!   "Neither the owner of the spreadsheet nor the current user can be removed"
//!   (https://developers.google.com/apps-script/reference/spreadsheet/protection#removeeditoremailaddress).
//!   So a new range's editors are the owner, the requesting user and the users given; an
//!   update of the editors keeps the owner and the requester too. A recorded exchange with
//!   Google shows a range added with empty editors listing the requester (there also the
//!   owner) in `spreadsheets.get`, while the `addProtectedRange` reply echoes the editors
//!   as sent (`"editors": {}`), and shows `startRowIndex: 0` kept while `sheetId: 0` is
//!   omitted (gspread's recordings, tests/cassettes/WorksheetTest.test_add_protected_range_normal.json
//!   and ..._warning.json, https://github.com/burnash/gspread). The emulator does the same.
//! - `warningOnly`: "Warning-based protection means that every user can edit data in the
//!   protected range, except editing will prompt a warning asking the user to confirm the
//!   edit" (https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/sheets#ProtectedRange).
//!   The API has no prompt, so its writes pass. Editors "are not supported with warning_only
//!   protection": Google answers "ProtectedRange is warningOnly. Editors cannot be set on
//!   it." when some are sent (https://github.com/burnash/gspread/issues/1437); an empty
//!   `editors` passes. "If this field is changed from true to false and the editors field is
//!   not set (nor included in the field mask), then the editors will be set to all the
//!   editors in the document": the emulator cannot list everyone who may edit a file it
//!   shares with every account by default, so it sets the owner and the requester instead,
//!   the stricter of the two.
//! - `editors` "is only visible to users with edit access to the protected range": it is
//!   left out of `spreadsheets.get` for anyone else, and `requestingUserCanEdit` is false
//!   (omitted, as proto3 omits false) for them.
//! - Google's refusal, from the API as from the Sheets UI, is HTTP 400 `INVALID_ARGUMENT`
//!   "You are trying to edit a protected cell or object. Please contact the spreadsheet
//!   owner to remove protection if you need to edit." (quoted from an API reply in
//!   https://github.com/theoephraim/node-google-spreadsheet/pull/20; gspread users report it
//!   as `APIError: [400]: You are trying to edit a protected cell or object`, without the
//!   `Invalid requests[i]` prefix of a malformed request).
//! - Other messages quoted from Google: `Sheet "Domains" already has sheet protection.` and
//!   `No protected range with id: 2092627652`
//!   (https://github.com/googleapis/google-api-python-client/issues/1064).
//!
//! - Who may protect: Google's help on protecting ranges and sheets
//!   (https://support.google.com/docs/answer/1218656) gives it to people who can edit: "you
//!   can protect a range or sheet ... if you can edit". It does not say what happens when
//!   some of the cells are closed to the caller by a protection they are not an editor of.
//!   The stricter reading, here and in `footprint.rs`: adding a protected range, changing
//!   what one protects or who it lets in (its range, editors, `warningOnly`, unprotected
//!   blocks), and deleting one, each count as an edit of every cell of its area (the new
//!   area too, when the range moves), so the guard refuses them, with [`REFUSED`], for a
//!   caller who may not edit one of those cells. The owner always may. The wording for
//!   protected-range requests is Google's for a protected cell; Google's own for this case
//!   is not known.
//!
//! Where Google is silent the emulator takes the stricter reading, each said where it is
//! decided: an editor of the file may add a protected range over cells they may edit (see
//! above), but only an editor of a range (or the owner) may update or delete it, with the
//! same refusal as a write; a write is
//! refused for the whole block it targets, even cells it would leave as they are; rows or
//! columns inserted inside a protected range's span, and any edit of a protected sheet's
//! properties or of a sheet holding protection one may not edit, are refused; groups are
//! kept but no one is a member of one; `domainUsersCanEdit` lets in the addresses of the
//! owner's domain; `namedRangeId` and `tableId` are refused, as the emulator has no named
//! ranges or tables.

use google_sheets4::api::{
    AddProtectedRangeRequest, DeleteProtectedRangeRequest, GridRange, ProtectedRange,
    UpdateProtectedRangeRequest,
};
use serde_json::{json, Map, Value as Json};

use super::error::ApiError;
use super::request::{fields, grid_range, need};
use super::store::{Area, Bounds, Editors, Protected, Span, Spreadsheet};

/// Google's message for a write that touches a protected cell its author may not edit.
pub const REFUSED: &str = "You are trying to edit a protected cell or object. Please contact \
                           the spreadsheet owner to remove protection if you need to edit.";

/// Google's refusal: 400 `INVALID_ARGUMENT` with [`REFUSED`].
pub fn refused() -> ApiError {
    ApiError::invalid(REFUSED)
}

/// Something a write changes, as the guard judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// The cells of a block (values, formats or rules). `r1`/`c1` may be `u32::MAX`: to the
    /// end of the sheet, however far it grows.
    Cells(Bounds),
    /// Rows (or columns) inserted before index `at` of sheet index `sheet`.
    Insert { sheet: usize, rows: bool, at: u32 },
    /// The sheet itself: deleted (`whole_only: false`: any protection on it counts), or its
    /// properties changed (`whole_only: true`: a protection of the whole sheet counts).
    Sheet { sheet: usize, whole_only: bool },
    /// A protected range's own settings, by id (updated or deleted).
    Range(i32),
}

/// The block of whole rows `[r0, r1)` (or whole columns, `rows: false`) of sheet index
/// `sheet`: what deleting, moving or resizing them touches.
pub fn lines(sheet: usize, rows: bool, from: u32, to: u32) -> Bounds {
    if rows {
        Bounds {
            sheet,
            r0: from,
            r1: to,
            c0: 0,
            c1: u32::MAX,
        }
    } else {
        Bounds {
            sheet,
            r0: 0,
            r1: u32::MAX,
            c0: from,
            c1: to,
        }
    }
}

/// Every cell of `area` on sheet index `sheet` (an open side to `u32::MAX`): what adding,
/// changing or deleting a protection of that area touches.
pub fn area_cells(sheet: usize, area: &Area) -> Touch {
    let (r0, r1, c0, c1) = rect_of(area);
    Touch::Cells(Bounds {
        sheet,
        r0,
        r1,
        c0,
        c1,
    })
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn domain(email: &str) -> Option<&str> {
    email.rsplit_once('@').map(|(_, d)| d)
}

/// Whether `user` may edit the cells `p` protects: the owner always, anyone through a
/// warning-only range, a listed user, and with `domainUsersCanEdit` an address of the
/// owner's domain. Group membership is not modelled: a group lets no one in.
pub fn may_edit(ss: &Spreadsheet, p: &Protected, user: &str) -> bool {
    if !ss.may_edit_file(user) {
        return false;
    }
    same(user, &ss.owner)
        || p.warning_only
        || p.editors.users.iter().any(|u| same(u, user))
        || (p.editors.domain_users_can_edit
            && domain(user).is_some_and(|d| domain(&ss.owner).is_some_and(|o| same(d, o))))
}

/// A half-open block of rows × columns; `u32::MAX` is an open end.
type Rect = (u32, u32, u32, u32);

fn rect_of(a: &Area) -> Rect {
    let (r0, r1) = a.rows.bounds();
    let (c0, c1) = a.cols.bounds();
    (r0, r1, c0, c1)
}

fn intersect(a: Rect, b: Rect) -> Option<Rect> {
    let r = (a.0.max(b.0), a.1.min(b.1), a.2.max(b.2), a.3.min(b.3));
    (r.0 < r.1 && r.2 < r.3).then_some(r)
}

/// `a` without `b`, as up to four blocks.
fn subtract(a: Rect, b: Rect) -> Vec<Rect> {
    let Some(i) = intersect(a, b) else {
        return vec![a];
    };
    let mut out = Vec::with_capacity(4);
    if a.0 < i.0 {
        out.push((a.0, i.0, a.2, a.3));
    }
    if i.1 < a.1 {
        out.push((i.1, a.1, a.2, a.3));
    }
    if a.2 < i.2 {
        out.push((i.0, i.1, a.2, i.2));
    }
    if i.3 < a.3 {
        out.push((i.0, i.1, i.3, a.3));
    }
    out
}

/// Whether `b` holds a cell `p` protects (inside its area, outside its unprotected blocks).
fn covers(p: &Protected, b: &Bounds) -> bool {
    let Some(hit) = intersect(rect_of(&p.area), (b.r0, b.r1, b.c0, b.c1)) else {
        return false;
    };
    let mut left = vec![hit];
    for u in &p.unprotected {
        left = left
            .into_iter()
            .flat_map(|r| subtract(r, rect_of(u)))
            .collect();
    }
    !left.is_empty()
}

/// Refuses (with Google's 400) a write by `user` that touches what a protected range they
/// may not edit protects; passes everything else.
pub fn guard(ss: &Spreadsheet, user: &str, touches: &[Touch]) -> Result<(), ApiError> {
    let closed = |sheet: usize| {
        ss.sheets
            .get(sheet)
            .into_iter()
            .flat_map(|s| s.protected.iter())
            .filter(|p| !may_edit(ss, p, user))
    };
    for t in touches {
        let hit = match *t {
            Touch::Cells(b) => closed(b.sheet).any(|p| covers(p, &b)),
            Touch::Insert { sheet, rows, at } => closed(sheet).any(|p| {
                if rows {
                    p.area.rows.takes_insert_at(at)
                } else {
                    p.area.cols.takes_insert_at(at)
                }
            }),
            Touch::Sheet { sheet, whole_only } => {
                closed(sheet).any(|p| !whole_only || p.area.is_whole_sheet())
            }
            Touch::Range(id) => ss
                .protected_range(id)
                .is_some_and(|(i, j)| !may_edit(ss, &ss.sheets[i].protected[j], user)),
        };
        if hit {
            return Err(refused());
        }
    }
    Ok(())
}

/// A `GridRange` as the area of a protected range: its sheet's index and its sides as
/// given (an unset side stays open). The range must lie within the grid.
fn area_of(ss: &Spreadsheet, g: &GridRange) -> Result<(usize, Area), String> {
    let b = grid_range(ss, g)?;
    let side = |v: Option<i32>| v.map(|n| n.max(0) as u32);
    Ok((
        b.sheet,
        Area {
            rows: Span {
                start: side(g.start_row_index),
                end: side(g.end_row_index),
            },
            cols: Span {
                start: side(g.start_column_index),
                end: side(g.end_column_index),
            },
        },
    ))
}

/// The editors of a range set by `user` with `given` users: the owner and `user` first
/// (neither can be left out), then the others, each once, in lower case.
fn with_keepers(ss: &Spreadsheet, user: &str, given: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in [ss.owner.as_str(), user]
        .into_iter()
        .chain(given.iter().map(String::as_str))
    {
        let e = e.trim().to_ascii_lowercase();
        if !e.is_empty() && !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// The editors a request sends, as sent.
fn sent_editors(pr: &ProtectedRange) -> Editors {
    let e = pr.editors.clone().unwrap_or_default();
    Editors {
        users: e.users.unwrap_or_default(),
        groups: e.groups.unwrap_or_default(),
        domain_users_can_edit: e.domain_users_can_edit == Some(true),
    }
}

fn has_any(e: &Editors) -> bool {
    !e.users.is_empty() || !e.groups.is_empty() || e.domain_users_can_edit
}

const WARNING_ONLY_EDITORS: &str = "ProtectedRange is warningOnly. Editors cannot be set on it.";

/// The named range or table a protected range may be backed by: the emulator has neither,
/// so any id names nothing (the wording is assumed, Google's is not documented).
fn refuse_backing(pr: &ProtectedRange) -> Result<(), String> {
    if let Some(id) = &pr.named_range_id {
        return Err(format!(
            "No named range with id: {id} (the emulator does not model named ranges; protect a range instead)"
        ));
    }
    if let Some(id) = &pr.table_id {
        return Err(format!(
            "No table with id: {id} (the emulator does not model tables; protect a range instead)"
        ));
    }
    Ok(())
}

/// Refuses a second protection of a whole sheet: Google's `Sheet "<title>" already has
/// sheet protection.`
fn check_sheet_protection(
    ss: &Spreadsheet,
    sheet: usize,
    area: &Area,
    except: Option<i32>,
) -> Result<(), String> {
    let s = &ss.sheets[sheet];
    if area.is_whole_sheet()
        && s.protected
            .iter()
            .any(|p| p.area.is_whole_sheet() && Some(p.id) != except)
    {
        return Err(format!(
            "Sheet \"{}\" already has sheet protection.",
            s.title
        ));
    }
    Ok(())
}

/// The unprotected blocks of a protection: only a protected sheet may have them (the
/// reference: "Unprotected ranges are only supported on protected sheets"), and they lie on
/// that sheet (assumed).
fn unprotected_of(
    ss: &Spreadsheet,
    sheet: usize,
    area: &Area,
    given: &[GridRange],
) -> Result<Vec<Area>, String> {
    if given.is_empty() {
        return Ok(Vec::new());
    }
    if !area.is_whole_sheet() {
        return Err("Unprotected ranges are only supported on protected sheets.".into());
    }
    given
        .iter()
        .map(|g| {
            let (on, a) = area_of(ss, g)?;
            if on != sheet {
                return Err(format!(
                    "An unprotected range must be on the protected sheet \"{}\".",
                    ss.sheets[sheet].title
                ));
            }
            Ok(a)
        })
        .collect()
}

const NEEDS_RANGE: &str =
    "A protected range needs a range (or a namedRangeId, which the emulator does not model).";

/// The sheet index and area an `addProtectedRange` would protect, checked as [`add`] checks
/// them (the same errors, in the same order).
fn add_target(ss: &Spreadsheet, req: &AddProtectedRangeRequest) -> Result<(usize, Area), String> {
    let pr = need(&req.protected_range)?;
    refuse_backing(pr)?;
    let g = pr.range.as_ref().ok_or(NEEDS_RANGE)?;
    area_of(ss, g)
}

/// What `addProtectedRange` touches, for the guard: every cell it would protect. A caller
/// may protect only cells they may edit (the module's notes).
pub fn add_touches(ss: &Spreadsheet, req: &AddProtectedRangeRequest) -> Result<Vec<Touch>, String> {
    let (sheet, area) = add_target(ss, req)?;
    Ok(vec![area_cells(sheet, &area)])
}

/// Whether field mask `mask` names field `f` (or one of its subfields), `*` naming all.
fn masks(mask: &[String], f: &str) -> bool {
    mask.iter()
        .any(|m| m == "*" || m == f || m.starts_with(&format!("{f}.")))
}

/// The fields of a `ProtectedRange` that change which cells it protects or who may edit
/// them: an update of any of them counts as an edit of every cell of its area.
const SETTLES_WHO_EDITS: [&str; 6] = [
    "range",
    "editors",
    "warningOnly",
    "unprotectedRanges",
    "namedRangeId",
    "tableId",
];

/// What `updateProtectedRange` touches, for the guard: the range's own settings (only its
/// editors and the owner may change them), and, when the mask changes what it protects or
/// who it lets in ([`SETTLES_WHO_EDITS`]), every cell of its area and of the area it moves
/// to. A new range the update itself would refuse adds nothing here: the update fails
/// anyway, with its own error.
pub fn update_touches(
    ss: &Spreadsheet,
    req: &UpdateProtectedRangeRequest,
) -> Result<Vec<Touch>, String> {
    let pr = need(&req.protected_range)?;
    let id = pr.protected_range_id.unwrap_or(0);
    let mut touches = vec![Touch::Range(id)];
    let mask = fields(req.fields.as_ref())?;
    let Some((sheet, at)) = ss.protected_range(id) else {
        return Ok(touches);
    };
    if SETTLES_WHO_EDITS.iter().any(|f| masks(&mask, f)) {
        touches.push(area_cells(sheet, &ss.sheets[sheet].protected[at].area));
        if masks(&mask, "range") {
            if let Some(Ok((to, area))) = pr.range.as_ref().map(|g| area_of(ss, g)) {
                touches.push(area_cells(to, &area));
            }
        }
    }
    Ok(touches)
}

/// What `deleteProtectedRange` touches, for the guard: the range's own settings and every
/// cell of its area.
pub fn delete_touches(ss: &Spreadsheet, req: &DeleteProtectedRangeRequest) -> Vec<Touch> {
    let id = req.protected_range_id.unwrap_or(0);
    let mut touches = vec![Touch::Range(id)];
    if let Some((sheet, at)) = ss.protected_range(id) {
        touches.push(area_cells(sheet, &ss.sheets[sheet].protected[at].area));
    }
    touches
}

/// `addProtectedRange` by `user`: an editor of the file may protect cells they may edit
/// (the guard has already refused the others). Replies with the range as added: its new
/// `protectedRangeId`, the range as sent, `requestingUserCanEdit` and the editors as sent.
pub fn add(
    ss: &mut Spreadsheet,
    req: &AddProtectedRangeRequest,
    user: &str,
) -> Result<Json, String> {
    let (sheet, area) = add_target(ss, req)?;
    let pr = need(&req.protected_range)?;
    let id = match pr.protected_range_id {
        Some(id) if ss.protected_range(id).is_some() => {
            return Err(format!("Protected range with id {id} already exists."))
        }
        Some(id) if id < 0 => return Err(format!("Invalid protected range id {id}.")),
        Some(id) => id,
        None => ss.fresh_protected_id(),
    };
    check_sheet_protection(ss, sheet, &area, None)?;
    let warning_only = pr.warning_only == Some(true);
    let sent = sent_editors(pr);
    if warning_only && has_any(&sent) {
        return Err(WARNING_ONLY_EDITORS.into());
    }
    let unprotected = unprotected_of(
        ss,
        sheet,
        &area,
        pr.unprotected_ranges.as_deref().unwrap_or_default(),
    )?;
    let p = Protected {
        id,
        area,
        description: pr.description.clone(),
        warning_only,
        editors: Editors {
            users: with_keepers(ss, user, &sent.users),
            ..sent.clone()
        },
        unprotected,
    };
    let sheet_id = ss.sheets[sheet].id;
    let mut reply = protected_json(sheet_id, &p);
    reply["requestingUserCanEdit"] = json!(true);
    reply["editors"] = editors_json(&sent);
    ss.sheets[sheet].protected.push(p);
    Ok(json!({ "addProtectedRange": { "protectedRange": reply } }))
}

/// `updateProtectedRange` by `user`, of the fields its mask lists (`*`: all). The guard has
/// already refused a user who may not edit the range, or, for a change of what it protects
/// or who it lets in, a cell of its old or new area ([`update_touches`]).
pub fn update(
    ss: &mut Spreadsheet,
    req: &UpdateProtectedRangeRequest,
    user: &str,
) -> Result<Json, String> {
    let pr = need(&req.protected_range)?;
    let mask = fields(req.fields.as_ref())?;
    let id = pr.protected_range_id.unwrap_or(0);
    let (from, at) = ss
        .protected_range(id)
        .ok_or_else(|| format!("No protected range with id: {id}"))?;
    let mut sheet = from;
    let mut p = ss.sheets[from].protected[at].clone();
    let has = |f: &str| masks(&mask, f);
    for m in &mask {
        let top = m.split('.').next().unwrap_or_default();
        let known = [
            "*",
            "range",
            "namedRangeId",
            "tableId",
            "description",
            "warningOnly",
            "editors",
            "unprotectedRanges",
            "requestingUserCanEdit",
            "protectedRangeId",
        ];
        if !known.contains(&top) {
            return Err(format!(
                "'{m}' is not a field of ProtectedRange (fields: range, description, warningOnly, editors, unprotectedRanges)"
            ));
        }
    }
    if has("namedRangeId") || has("tableId") {
        refuse_backing(pr)?;
    }
    if has("range") {
        let g = pr.range.as_ref().ok_or(NEEDS_RANGE)?;
        let (to, area) = area_of(ss, g)?;
        check_sheet_protection(ss, to, &area, Some(id))?;
        sheet = to;
        p.area = area;
    }
    if has("description") {
        p.description.clone_from(&pr.description);
    }
    let was_warning = p.warning_only;
    if has("warningOnly") {
        p.warning_only = pr.warning_only == Some(true);
    }
    let sent = sent_editors(pr);
    if has("editors") {
        if p.warning_only && has_any(&sent) {
            return Err(WARNING_ONLY_EDITORS.into());
        }
        let whole = mask.iter().any(|m| m == "*" || m == "editors");
        if whole || has("editors.users") {
            p.editors.users = with_keepers(ss, user, &sent.users);
        }
        if whole || has("editors.groups") {
            p.editors.groups = sent.groups;
        }
        if whole || has("editors.domainUsersCanEdit") {
            p.editors.domain_users_can_edit = sent.domain_users_can_edit;
        }
    } else if was_warning && !p.warning_only {
        // Google sets every editor of the document; see the module's notes for why the
        // emulator sets the owner and the requester.
        p.editors = Editors {
            users: with_keepers(ss, user, &[]),
            ..Editors::default()
        };
    }
    if has("unprotectedRanges") {
        p.unprotected = unprotected_of(
            ss,
            sheet,
            &p.area,
            pr.unprotected_ranges.as_deref().unwrap_or_default(),
        )?;
    } else if !p.unprotected.is_empty() && !p.area.is_whole_sheet() {
        return Err("Unprotected ranges are only supported on protected sheets.".into());
    }
    if sheet == from {
        ss.sheets[from].protected[at] = p;
    } else {
        ss.sheets[from].protected.remove(at);
        ss.sheets[sheet].protected.push(p);
    }
    Ok(json!({}))
}

/// `deleteProtectedRange`. The guard has already refused a user who may not edit the range
/// or a cell of its area ([`delete_touches`]).
pub fn delete(ss: &mut Spreadsheet, req: &DeleteProtectedRangeRequest) -> Result<Json, String> {
    let id = req.protected_range_id.unwrap_or(0);
    let (sheet, at) = ss
        .protected_range(id)
        .ok_or_else(|| format!("No protected range with id: {id}"))?;
    ss.sheets[sheet].protected.remove(at);
    Ok(json!({}))
}

/// A protected range's area as the `GridRange` JSON Google sends: `sheetId` left out when
/// 0 (proto3's default), each side present when it was given (even 0).
fn range_json(sheet_id: i32, a: &Area) -> Json {
    let mut m = Map::new();
    if sheet_id != 0 {
        m.insert("sheetId".into(), json!(sheet_id));
    }
    for (key, side) in [
        ("startRowIndex", a.rows.start),
        ("endRowIndex", a.rows.end),
        ("startColumnIndex", a.cols.start),
        ("endColumnIndex", a.cols.end),
    ] {
        if let Some(v) = side {
            m.insert(key.into(), json!(v));
        }
    }
    Json::Object(m)
}

fn editors_json(e: &Editors) -> Json {
    let mut m = Map::new();
    if !e.users.is_empty() {
        m.insert("users".into(), json!(e.users));
    }
    if !e.groups.is_empty() {
        m.insert("groups".into(), json!(e.groups));
    }
    if e.domain_users_can_edit {
        m.insert("domainUsersCanEdit".into(), json!(true));
    }
    Json::Object(m)
}

/// The fields of a protected range every reader sees.
fn protected_json(sheet_id: i32, p: &Protected) -> Json {
    let mut m = Map::new();
    m.insert("protectedRangeId".into(), json!(p.id));
    m.insert("range".into(), range_json(sheet_id, &p.area));
    if let Some(d) = &p.description {
        m.insert("description".into(), json!(d));
    }
    if p.warning_only {
        m.insert("warningOnly".into(), json!(true));
    }
    if !p.unprotected.is_empty() {
        let blocks: Vec<Json> = p
            .unprotected
            .iter()
            .map(|a| range_json(sheet_id, a))
            .collect();
        m.insert("unprotectedRanges".into(), Json::Array(blocks));
    }
    Json::Object(m)
}

/// `sheets[].protectedRanges` of sheet index `sheet` as `viewer` reads them: the editors
/// only for one who may edit the range, `requestingUserCanEdit` true for them. `None` when
/// the sheet has none.
pub fn sheet_json(ss: &Spreadsheet, sheet: usize, viewer: &str) -> Option<Json> {
    let s = ss.sheets.get(sheet)?;
    if s.protected.is_empty() {
        return None;
    }
    let all = s
        .protected
        .iter()
        .map(|p| {
            let mut j = protected_json(s.id, p);
            if may_edit(ss, p, viewer) {
                j["requestingUserCanEdit"] = json!(true);
                j["editors"] = editors_json(&p.editors);
            }
            j
        })
        .collect();
    Some(Json::Array(all))
}

/// The blocks of sheet index `sheet` that `viewer` may not edit, as half-open bounds (an
/// open end as `u32::MAX`), without their unprotected holes: for the web view to mark.
pub fn closed_areas(ss: &Spreadsheet, sheet: usize, viewer: &str) -> Vec<Bounds> {
    let Some(s) = ss.sheets.get(sheet) else {
        return Vec::new();
    };
    s.protected
        .iter()
        .filter(|p| !may_edit(ss, p, viewer))
        .flat_map(|p| {
            let mut left = vec![rect_of(&p.area)];
            for u in &p.unprotected {
                left = left
                    .into_iter()
                    .flat_map(|r| subtract(r, rect_of(u)))
                    .collect();
            }
            left
        })
        .map(|(r0, r1, c0, c1)| Bounds {
            sheet,
            r0,
            r1,
            c0,
            c1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Sheet;

    const SA: &str = "sheetq@project.iam.gserviceaccount.com";

    fn ss() -> Spreadsheet {
        let mut ss = Spreadsheet::new("id", "t");
        ss.sheets.push(Sheet::new(0, "Sheet1"));
        ss.sheets.push(Sheet::new(7, "Queue"));
        ss
    }

    fn add_json(ss: &mut Spreadsheet, user: &str, pr: Json) -> Result<Json, String> {
        let req: AddProtectedRangeRequest =
            serde_json::from_value(json!({ "protectedRange": pr })).map_err(|e| e.to_string())?;
        add(ss, &req, user)
    }

    fn cells(sheet: usize, r0: u32, r1: u32, c0: u32, c1: u32) -> Touch {
        Touch::Cells(Bounds {
            sheet,
            r0,
            r1,
            c0,
            c1,
        })
    }

    #[test]
    fn a_new_range_keeps_the_owner_and_its_author_as_editors_and_replies_as_sent() {
        let mut s = ss();
        let reply = add_json(
            &mut s,
            SA,
            json!({ "range": { "sheetId": 0, "startRowIndex": 0, "endRowIndex": 2 },
                    "editors": { "users": [], "groups": [] } }),
        )
        .unwrap_or_else(|e| panic!("add: {e}"));
        let added = &reply["addProtectedRange"]["protectedRange"];
        assert!(added["protectedRangeId"].as_i64().is_some_and(|id| id > 0));
        assert_eq!(
            added["range"],
            json!({ "startRowIndex": 0, "endRowIndex": 2 }),
            "sheetId 0 is left out, a side sent as 0 is kept"
        );
        assert_eq!(added["requestingUserCanEdit"], true);
        assert_eq!(added["editors"], json!({}), "the editors as sent");
        assert_eq!(
            s.sheets[0].protected[0].editors.users,
            vec![s.owner.clone(), SA.to_string()]
        );
        let listed = sheet_json(&s, 0, SA).unwrap_or_default();
        assert_eq!(
            listed[0]["editors"]["users"],
            json!([s.owner, SA]),
            "{listed}"
        );
        let by_alice = sheet_json(&s, 0, "alice@example.com").unwrap_or_default();
        assert!(
            by_alice[0].get("editors").is_none()
                && by_alice[0].get("requestingUserCanEdit").is_none(),
            "editors are visible only to editors of the range: {by_alice}"
        );
    }

    #[test]
    fn a_protected_cell_refuses_everyone_but_its_editors_and_the_owner() {
        let mut s = ss();
        add_json(
            &mut s,
            SA,
            json!({ "range": { "sheetId": 0, "startRowIndex": 0, "endRowIndex": 1 } }),
        )
        .unwrap_or_else(|e| panic!("add: {e}"));
        let header = [cells(0, 0, 1, 0, 3)];
        let below = [cells(0, 1, 5, 0, 3)];
        let owner = s.owner.clone();
        assert_eq!(guard(&s, SA, &header), Ok(()), "its author is an editor");
        assert_eq!(guard(&s, &owner, &header), Ok(()), "the owner always can");
        assert_eq!(
            guard(&s, "alice@example.com", &header)
                .err()
                .map(|e| e.message),
            Some(REFUSED.to_string())
        );
        assert_eq!(guard(&s, "alice@example.com", &below), Ok(()));
        let insert_above = [Touch::Insert {
            sheet: 0,
            rows: true,
            at: 0,
        }];
        assert_eq!(
            guard(&s, "alice@example.com", &insert_above),
            Ok(()),
            "rows inserted above a range move it down"
        );
    }

    #[test]
    fn protecting_changing_or_removing_a_range_needs_every_cell_of_it_open_to_the_caller() {
        let mut s = ss();
        add_json(&mut s, SA, json!({ "range": { "sheetId": 7 } }))
            .unwrap_or_else(|e| panic!("add: {e}"));
        let alice = "alice@example.com";
        let owner = s.owner.clone();
        let adding = |range: Json| -> AddProtectedRangeRequest {
            serde_json::from_value(json!({ "protectedRange": { "range": range } }))
                .unwrap_or_else(|e| panic!("request: {e}"))
        };
        let in_queue = adding(json!({ "sheetId": 7, "startRowIndex": 1, "endRowIndex": 2 }));
        let touches = add_touches(&s, &in_queue).unwrap_or_default();
        assert_eq!(guard(&s, alice, &touches), Err(refused()));
        assert_eq!(guard(&s, SA, &touches), Ok(()), "an editor of the queue");
        assert_eq!(guard(&s, &owner, &touches), Ok(()), "the owner always may");
        let open = adding(json!({ "sheetId": 0, "startRowIndex": 1, "endRowIndex": 2 }));
        let touches = add_touches(&s, &open).unwrap_or_default();
        assert_eq!(guard(&s, alice, &touches), Ok(()), "cells open to her");

        let reply = add(&mut s, &open, alice).unwrap_or_else(|e| panic!("add: {e}"));
        let hers = reply["addProtectedRange"]["protectedRange"]["protectedRangeId"]
            .as_i64()
            .unwrap_or_default() as i32;
        let updating = |pr: Json, fields: &str| -> UpdateProtectedRangeRequest {
            serde_json::from_str(&json!({ "protectedRange": pr, "fields": fields }).to_string())
                .unwrap_or_else(|e| panic!("request: {e}"))
        };
        let moved = updating(
            json!({ "protectedRangeId": hers, "range": { "sheetId": 7, "startRowIndex": 3 } }),
            "range",
        );
        let touches = update_touches(&s, &moved).unwrap_or_default();
        assert_eq!(guard(&s, alice, &touches), Err(refused()), "into the queue");
        let described = updating(
            json!({ "protectedRangeId": hers, "description": "d" }),
            "description",
        );
        let touches = update_touches(&s, &described).unwrap_or_default();
        assert_eq!(
            touches,
            vec![Touch::Range(hers)],
            "a description touches no cell"
        );
        let removing: DeleteProtectedRangeRequest =
            serde_json::from_value(json!({ "protectedRangeId": hers }))
                .unwrap_or_else(|e| panic!("request: {e}"));
        assert_eq!(guard(&s, alice, &delete_touches(&s, &removing)), Ok(()));
    }

    #[test]
    fn a_protected_sheet_covers_rows_it_grows_and_spares_its_unprotected_blocks() {
        let mut s = ss();
        add_json(
            &mut s,
            SA,
            json!({ "range": { "sheetId": 7 },
                    "unprotectedRanges": [{ "sheetId": 7, "startColumnIndex": 0, "endColumnIndex": 1 }] }),
        )
        .unwrap_or_else(|e| panic!("add: {e}"));
        let alice = "alice@example.com";
        let appended = [cells(1, 5000, 5001, 1, 4)];
        assert!(
            guard(&s, alice, &appended).is_err(),
            "a row past the grid is in the protected sheet"
        );
        assert_eq!(
            guard(&s, alice, &[cells(1, 3, 9, 0, 1)]),
            Ok(()),
            "column A is left open"
        );
        assert!(guard(&s, alice, &[cells(1, 3, 9, 0, 2)]).is_err());
        for t in [
            Touch::Insert {
                sheet: 1,
                rows: true,
                at: 0,
            },
            Touch::Sheet {
                sheet: 1,
                whole_only: true,
            },
        ] {
            assert!(guard(&s, alice, &[t]).is_err(), "{t:?}");
        }
        let again = add_json(&mut s, SA, json!({ "range": { "sheetId": 7 } })).err();
        assert_eq!(
            again.as_deref(),
            Some("Sheet \"Queue\" already has sheet protection.")
        );
    }

    #[test]
    fn warning_only_refuses_no_one_and_takes_no_editors() {
        let mut s = ss();
        let with_editors = add_json(
            &mut s,
            SA,
            json!({ "range": { "sheetId": 0 }, "warningOnly": true,
                    "editors": { "users": ["bob@example.com"] } }),
        )
        .err();
        assert_eq!(with_editors.as_deref(), Some(WARNING_ONLY_EDITORS));
        add_json(
            &mut s,
            SA,
            json!({ "range": { "sheetId": 0 }, "warningOnly": true, "editors": {} }),
        )
        .unwrap_or_else(|e| panic!("add: {e}"));
        assert_eq!(
            guard(&s, "alice@example.com", &[cells(0, 0, 9, 0, 9)]),
            Ok(())
        );
    }

    #[test]
    fn updates_keep_the_owner_and_the_author_and_deletes_name_a_missing_id() {
        let mut s = ss();
        let reply = add_json(
            &mut s,
            SA,
            json!({ "range": { "sheetId": 0, "startRowIndex": 0, "endRowIndex": 1 } }),
        )
        .unwrap_or_else(|e| panic!("add: {e}"));
        let id = reply["addProtectedRange"]["protectedRange"]["protectedRangeId"]
            .as_i64()
            .unwrap_or_default() as i32;
        let req: UpdateProtectedRangeRequest = serde_json::from_str(
            &json!({ "protectedRange": { "protectedRangeId": id, "description": "header",
                         "editors": { "users": ["bob@example.com"] } },
                     "fields": "description,editors.users" })
            .to_string(),
        )
        .unwrap_or_else(|e| panic!("request: {e}"));
        update(&mut s, &req, SA).unwrap_or_else(|e| panic!("update: {e}"));
        let p = &s.sheets[0].protected[0];
        assert_eq!(p.description.as_deref(), Some("header"));
        assert_eq!(
            p.editors.users,
            vec![
                s.owner.clone(),
                SA.to_string(),
                "bob@example.com".to_string()
            ]
        );
        assert_eq!(
            guard(&s, "alice@example.com", &[Touch::Range(id)]),
            Err(refused()),
            "only an editor of the range may change it"
        );
        let gone: DeleteProtectedRangeRequest =
            serde_json::from_value(json!({ "protectedRangeId": 12345 }))
                .unwrap_or_else(|e| panic!("request: {e}"));
        assert_eq!(
            delete(&mut s, &gone).err().as_deref(),
            Some("No protected range with id: 12345")
        );
        let this: DeleteProtectedRangeRequest =
            serde_json::from_value(json!({ "protectedRangeId": id }))
                .unwrap_or_else(|e| panic!("request: {e}"));
        delete(&mut s, &this).unwrap_or_else(|e| panic!("delete: {e}"));
        assert!(s.sheets[0].protected.is_empty());
    }
}
