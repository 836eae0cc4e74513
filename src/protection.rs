//! Which parts of the spreadsheet only sheetq may write, and who "sheetq" is there: the
//! rules of docs/design.md §5.1, pure. What must be protected ([`hidden_sheets`]; the
//! panels' and the index's areas are placed by their layout in `panel::protected`), by whom ([`Editors`]: the service accounts that serve the
//! spreadsheet, never people), the requests that make the spreadsheet so ([`plan`]), what
//! `sheetq check` says of it ([`verdicts`]), and whether the queue can be trusted to hold
//! only what sheetq's accounts wrote ([`queue_protected`]).
//!
//! A protected range restricts who may *edit* cells; it changes none, so protecting an
//! existing spreadsheet loses nothing. Protections stack: a cell inside two protected ranges
//! may be edited only by someone who may edit both (a protected sheet outranks an
//! unprotected range inside it: https://codingbestpractice.com/howto/how-to-set-permissions-for-selected-cells-per-user-in-google-sheets),
//! so a protection sheetq did not make can only narrow who writes an area, never widen it:
//! sheetq judges its own (the one whose area is exactly the area it wants) and leaves the
//! others alone.
//!
//! The spreadsheet's owner may always edit, whatever a protection lists, and Google lists
//! the owner among the editors of every protected range (Apps Script's `removeEditors`:
//! "the owner of the spreadsheet and the current user cannot be removed",
//! https://developers.google.com/apps-script/reference/spreadsheet/protection#removeeditorsemailaddresses).
//! The Sheets API does not say who the owner is (Drive does, with a scope sheetq does not
//! ask for), so a user listed on *every* protected range of the spreadsheet, two or more, is
//! taken for the owner ([`presumed_owner`]); anyone else not sheetq's is a person who should
//! not be there.

use std::collections::BTreeSet;
use std::fmt;

use crate::a1;
use crate::sheets::{Area, ProtectedRange, Request, SpreadsheetMeta};

/// A protected range sheetq may not write through: made by someone else, its editors leaving
/// sheetq's account out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Barred {
    /// The sheet's title, for messages.
    pub title: String,
    pub area: Area,
    pub description: String,
}

impl fmt::Display for Barred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.area;
        let cols = match a.end_col {
            Some(end) => format!(
                "{}:{}",
                a1::column_letters(a.start_col),
                a1::column_letters(end.saturating_sub(1).max(a.start_col))
            ),
            None => format!("{}:", a1::column_letters(a.start_col)),
        };
        let rows = match a.end_row {
            Some(end) => format!("rows {}–{}", a.start_row + 1, end.max(a.start_row + 1)),
            None => format!("rows {}–", a.start_row + 1),
        };
        // A sheet's title and a protection's description are anyone's text: shown escaped
        // and cut, never raw in a log line or an operator's terminal.
        let shown = crate::sheet_text::shown;
        write!(f, "sheet {} columns {cols} {rows}", shown(&self.title))?;
        if !self.description.is_empty() {
            write!(f, " ({})", shown(&self.description))?;
        }
        Ok(())
    }
}

/// The areas of the sheets people use (panels, the index, their own sheets: every sheet
/// but those in `own`, sheetq's hidden ones) that the account which read `meta` may not
/// edit: protected ranges whose editors leave it out (Google's `requestingUserCanEdit`
/// false; a warning-only range bars no script). sheetq leaves their cells out of its writes,
/// so a person's protection costs the cells it covers, never the claim commit or the
/// results around them (docs/design.md §1.5). sheetq's own sheets are not among them: a
/// refusal there holds the whole spreadsheet off, since nothing can be written without them.
pub fn barred(meta: &SpreadsheetMeta, own: &[&str]) -> Vec<Barred> {
    meta.sheets
        .iter()
        .filter(|s| !own.contains(&s.title.as_str()))
        .flat_map(|s| {
            s.protected_ranges
                .iter()
                .filter(|p| !p.requesting_user_can_edit && !p.warning_only)
                .map(|p| Barred {
                    title: s.title.clone(),
                    area: p.area,
                    description: p.description.clone(),
                })
        })
        .collect()
}

/// How a vouched 依頼者 begins ([`People::vouched_requester`]).
pub const VOUCHED_PREFIX: &str = "保護された▶: ";

/// How a config entry names a Google Group: `group:team@example.com`.
pub const GROUP_PREFIX: &str = "group:";

/// People a protected range can let in: addresses and Google Groups, lower-cased.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct People {
    pub users: BTreeSet<String>,
    pub groups: BTreeSet<String>,
}

impl People {
    /// The people of config entries already checked by [`entry_problem`].
    pub fn of<'a>(entries: impl IntoIterator<Item = &'a String>) -> Self {
        let mut out = Self::default();
        for e in entries {
            let e = e.trim().to_lowercase();
            match e.strip_prefix(GROUP_PREFIX) {
                Some(group) => out.groups.insert(group.to_string()),
                None => out.users.insert(e),
            };
        }
        out
    }

    /// Both lists together.
    pub fn and(mut self, other: &People) -> Self {
        self.users.extend(other.users.iter().cloned());
        self.groups.extend(other.groups.iter().cloned());
        self
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// The 依頼者 the poll intake writes for a press in a ▶ cell guarded for these people
    /// (`crate::panel::guard`): not an address, since polling cannot tell which of them ticked,
    /// but what Google vouched for. Only sheetq writes it, into a queue only sheetq's
    /// accounts may write, and a function's `allow` admits it when it names these people.
    pub fn vouched_requester(&self) -> String {
        format!("{VOUCHED_PREFIX}{self}")
    }

    /// Whether `user` is one of the listed addresses (groups aside: their members are
    /// Google's to know).
    pub fn lists_user(&self, user: &str) -> bool {
        self.users
            .iter()
            .any(|u| u.eq_ignore_ascii_case(user.trim()))
    }
}

impl fmt::Display for People {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = self
            .users
            .iter()
            .cloned()
            .chain(self.groups.iter().map(|g| format!("{GROUP_PREFIX}{g}")))
            .collect();
        if all.is_empty() {
            f.write_str("nobody but the owner")
        } else {
            f.write_str(&all.join(", "))
        }
    }
}

/// Whether `who` is written as an e-mail address: printable ASCII without spaces or `#`, one
/// `@` with something on each side. The names Google gives the trigger are; `--as` and hand
/// edits must be too.
pub fn is_address(who: &str) -> bool {
    let plain = who.chars().all(|c| c.is_ascii_graphic() && c != '#');
    let mut parts = who.split('@');
    plain
        && matches!(
            (parts.next(), parts.next(), parts.next()),
            (Some(local), Some(domain), None) if !local.is_empty() && !domain.is_empty()
        )
}

/// What is wrong with one `key` entry (`allow`, `approvers`, `cancel`) of the function at
/// `at`, naming the fix: it must be an address or `group:` and a group's address, which a
/// protected range can list as they are. A pattern (`*@ops.example.com`) is refused, never
/// widened into something Google would enforce differently.
pub fn entry_problem(at: &str, key: &str, who: &str) -> Option<String> {
    let address = who.strip_prefix(GROUP_PREFIX).unwrap_or(who);
    if who.contains('*') {
        Some(format!(
            "{at}: {key} entry {who:?} is a pattern, which a protected range cannot express (its editors are addresses and Google Groups, and sheetq lets Google enforce who may tick): \
             list the addresses, or a Google Group as \"group:ops@example.com\""
        ))
    } else if !is_address(address) || address.contains(':') {
        Some(format!(
            "{at}: {key} entry {who:?} must be an e-mail address (\"alice@example.com\") or a Google Group written \"group:ops@example.com\" (no spaces)"
        ))
    } else {
        None
    }
}

/// The one-shot command that puts an area right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    /// `sheetq init`: the hidden sheets.
    Init,
    /// `sheetq panels sync`: the panels and the index.
    PanelsSync,
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fix::Init => "run `sheetq init --config FILE`",
            Fix::PanelsSync => "run `sheetq panels sync --config FILE`",
        })
    }
}

/// An area sheetq keeps protected, what it is in words, and what protects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub area: Area,
    /// What it is, for people: `sheet '_ジョブキュー'`, `the markers G1:G3 of panel 'web-1'`.
    pub what: String,
    pub fix: Fix,
    /// Who may edit it besides sheetq's accounts and the owner: the people a function names
    /// for its ▶, 承認 and ■ cells ([`crate::panel::guard`]); nobody for everything else.
    pub people: People,
}

impl Wanted {
    /// The description the protection carries, which people see under Data → Protected
    /// sheets and ranges.
    pub fn description(&self) -> String {
        if self.people.is_empty() {
            format!(
                "sheetq: {} (only sheetq's service accounts write it)",
                self.what
            )
        } else {
            format!(
                "sheetq: {} (only {} may tick it, as sheetq.toml says)",
                self.what, self.people
            )
        }
    }

    /// Its editors as a protected range lists them: sheetq's accounts, then the people's
    /// addresses.
    fn users(&self, editors: &Editors) -> Vec<String> {
        let mut out = editors.accounts().to_vec();
        out.extend(
            self.people
                .users
                .iter()
                .filter(|u| !editors.has(u))
                .cloned(),
        );
        out
    }

    fn groups(&self) -> Vec<String> {
        self.people.groups.iter().cloned().collect()
    }
}

/// The whole of each of `titles` the spreadsheet has (sheetq's hidden sheets: the queue,
/// `_ワーカー`, the archive), each with its sheet id.
pub fn hidden_sheets(sheets: &[(i32, &str)]) -> Vec<Wanted> {
    sheets
        .iter()
        .map(|(id, title)| whole_sheet(*id, title))
        .collect()
}

fn whole_sheet(sheet_id: i32, title: &str) -> Wanted {
    Wanted {
        area: Area::sheet(sheet_id),
        what: format!("sheet {}", a1::quote_title(title)),
        fix: Fix::Init,
        people: People::default(),
    }
}

/// The accounts that may write what sheetq protects: the service account this sheetq calls
/// as, and those of the other daemons that serve the spreadsheet (`protect_editors`).
/// Never people: the owner may always edit, so needs no place here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Editors {
    accounts: Vec<String>,
}

impl Editors {
    /// This sheetq's `account` (empty when its credentials do not name it) and
    /// `protect_editors`; an error naming the fix when that leaves no account at all.
    pub fn new(account: &str, protect_editors: &[String]) -> Result<Self, String> {
        let mut accounts: Vec<String> = Vec::new();
        for a in std::iter::once(account).chain(protect_editors.iter().map(String::as_str)) {
            let a = a.trim().to_lowercase();
            if !a.is_empty() && !accounts.contains(&a) {
                accounts.push(a);
            }
        }
        if accounts.is_empty() {
            return Err("sheetq cannot tell which service account it calls as (credentials from the metadata server do not say), so it cannot make that account the only editor of what it protects; \
                 list the account in protect_editors (its e-mail, as in \"sheetq@project.iam.gserviceaccount.com\"), or set protect = false to leave the hidden sheets open".to_string());
        }
        Ok(Self { accounts })
    }

    /// Who may write what sheetq protects when it calls as `account`, with the config's
    /// `protect` and `protect_editors`: `None` when protection is off (`protect = false`).
    pub fn of(
        protect: bool,
        protect_editors: &[String],
        account: &str,
    ) -> Result<Option<Self>, String> {
        if !protect {
            return Ok(None);
        }
        Self::new(account, protect_editors).map(Some)
    }

    /// The accounts, lower-cased, this sheetq's first.
    pub fn accounts(&self) -> &[String] {
        &self.accounts
    }

    fn has(&self, user: &str) -> bool {
        self.accounts.iter().any(|a| a.eq_ignore_ascii_case(user))
    }
}

/// The users listed on every protected range of the spreadsheet whose editors this account
/// may see (two or more; warning-only ones list none): Google lists the owner on each, and
/// the Sheets API names the owner nowhere else. Lower-cased.
pub fn presumed_owner(meta: &SpreadsheetMeta) -> BTreeSet<String> {
    let lists: Vec<BTreeSet<String>> = all_protections(meta)
        .filter(|p| !p.warning_only && visible(p))
        .map(|p| p.editors.iter().map(|u| u.to_lowercase()).collect())
        .collect();
    if lists.len() < 2 {
        return BTreeSet::new();
    }
    lists.iter().skip(1).fold(lists[0].clone(), |common, l| {
        common.intersection(l).cloned().collect()
    })
}

fn all_protections(meta: &SpreadsheetMeta) -> impl Iterator<Item = &ProtectedRange> {
    meta.sheets.iter().flat_map(|s| s.protected_ranges.iter())
}

/// Whether this account sees who may edit `p`: Google shows a protection's editors only to
/// those who may edit it.
fn visible(p: &ProtectedRange) -> bool {
    p.requesting_user_can_edit || !p.editors.is_empty()
}

/// How one wanted area stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Standing<'m> {
    /// Protected for exactly sheetq's accounts (and the owner).
    Right,
    /// No protection of exactly this area.
    Missing,
    /// Protected so that this account may neither edit the cells nor the protection: sheetq
    /// cannot write there, and cannot change that.
    Blocked(&'m ProtectedRange),
    /// Protected, but wrongly, in the ways listed; sheetq can put it right.
    Wrong(&'m ProtectedRange, Vec<String>),
}

/// How `wanted` stands among `meta`'s protected ranges.
fn standing<'m>(
    meta: &'m SpreadsheetMeta,
    wanted: &Wanted,
    editors: &Editors,
    owner: &BTreeSet<String>,
) -> Standing<'m> {
    let own: Vec<&ProtectedRange> = all_protections(meta)
        .filter(|p| p.area == wanted.area)
        .collect();
    if own.is_empty() {
        return Standing::Missing;
    }
    let judged: Vec<(&ProtectedRange, Vec<String>)> = own
        .iter()
        .map(|p| (*p, faults(p, wanted, editors, owner)))
        .collect();
    if judged.iter().any(|(_, f)| f.is_empty()) {
        return Standing::Right;
    }
    // One sheetq may change, else one that shuts it out.
    match judged.iter().find(|(p, _)| p.warning_only || visible(p)) {
        Some((p, f)) => Standing::Wrong(p, f.clone()),
        None => Standing::Blocked(own[0]),
    }
}

/// What is wrong with protection `p` of an area sheetq wants: empty when nothing is.
fn faults(
    p: &ProtectedRange,
    wanted: &Wanted,
    editors: &Editors,
    owner: &BTreeSet<String>,
) -> Vec<String> {
    if p.warning_only {
        return vec!["it only warns, and anyone may click through the warning".to_string()];
    }
    if !visible(p) {
        return vec!["this account may not edit it".to_string()];
    }
    let mut out = Vec::new();
    let others: Vec<&str> = p
        .editors
        .iter()
        .filter(|u| {
            !editors.has(u) && !owner.contains(&u.to_lowercase()) && !wanted.people.lists_user(u)
        })
        .map(String::as_str)
        .collect();
    let should = if wanted.people.is_empty() {
        "only sheetq's service accounts should".to_string()
    } else {
        format!(
            "only {} and sheetq's service accounts should",
            wanted.people
        )
    };
    if !others.is_empty() {
        out.push(format!(
            "{} may edit it too, and {should}",
            others.join(", ")
        ));
    }
    let other_groups: Vec<&str> = p
        .groups
        .iter()
        .filter(|g| !wanted.people.groups.contains(&g.to_lowercase()))
        .map(String::as_str)
        .collect();
    if !other_groups.is_empty() {
        out.push(format!(
            "the group(s) {} may edit it, and {should}",
            other_groups.join(", ")
        ));
    }
    let left_out: Vec<String> = wanted
        .people
        .users
        .iter()
        .filter(|u| !p.editors.iter().any(|e| e.eq_ignore_ascii_case(u)))
        .cloned()
        .chain(
            wanted
                .people
                .groups
                .iter()
                .filter(|g| !p.groups.iter().any(|e| e.eq_ignore_ascii_case(g)))
                .map(|g| format!("{}{g}", GROUP_PREFIX)),
        )
        .collect();
    if !left_out.is_empty() {
        out.push(format!(
            "{} may not edit it, and sheetq.toml says they may",
            left_out.join(", ")
        ));
    }
    if p.domain_users_can_edit {
        out.push("everyone in the domain may edit it".to_string());
    }
    let missing: Vec<&str> = editors
        .accounts()
        .iter()
        .filter(|a| !p.editors.iter().any(|u| u.eq_ignore_ascii_case(a)))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "{} may not write it, and should (a daemon on that account fails there)",
            missing.join(", ")
        ));
    }
    if !p.unprotected.is_empty() {
        out.push(format!(
            "{} range(s) inside it are left unprotected",
            p.unprotected.len()
        ));
    }
    out
}

/// What [`plan`] decided: the requests (for the batch sent anyway), what they do, and what
/// sheetq cannot put right itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Planned {
    pub requests: Vec<Request>,
    /// One line per protection added or put right.
    pub done: Vec<String>,
    /// One line per area protected so that this account may not change it, with the fix
    /// (the owner's).
    pub blocked: Vec<String>,
}

/// Whether `wanted` is protected exactly as it should be: only sheetq's accounts, its
/// people and the owner (`owner`, [`presumed_owner`] of `meta`, worked out once per read by
/// the caller) may edit it, and it does not merely warn.
pub fn is_exact(
    meta: &SpreadsheetMeta,
    owner: &BTreeSet<String>,
    wanted: &Wanted,
    editors: &Editors,
) -> bool {
    standing(meta, wanted, editors, owner) == Standing::Right
}

/// The requests that make each of `wanted` protected for `editors` alone, given the
/// protections `meta` lists: a missing one added, a wrong one (warning-only, other editors,
/// one of `editors` missing, holes) put right in place, a right one left alone. Protection
/// changes no cell. One this account may not change is left out (it would fail the whole
/// batch) and reported in [`Planned::blocked`].
pub fn plan(meta: &SpreadsheetMeta, wanted: &[Wanted], editors: &Editors) -> Planned {
    let owner = presumed_owner(meta);
    let mut out = Planned::default();
    let list = |w: &Wanted| {
        let mut all = w.users(editors);
        all.extend(w.groups().iter().map(|g| format!("{}{g}", GROUP_PREFIX)));
        all.join(", ")
    };
    for w in wanted {
        match standing(meta, w, editors, &owner) {
            Standing::Right => {}
            Standing::Missing => {
                out.requests.push(Request::AddProtectedRange {
                    area: w.area,
                    description: w.description(),
                    editors: w.users(editors),
                    groups: w.groups(),
                });
                out.done
                    .push(format!("protected {} (editors: {})", w.what, list(w)));
            }
            Standing::Wrong(p, faults) => {
                out.requests.push(Request::UpdateProtectedRange {
                    id: p.id,
                    editors: w.users(editors),
                    groups: w.groups(),
                    clear_unprotected: !p.unprotected.is_empty(),
                });
                out.done.push(format!(
                    "put the protection of {} right ({}); editors now: {}",
                    w.what,
                    faults.join("; "),
                    list(w)
                ));
            }
            Standing::Blocked(p) => out.blocked.push(blocked_text(w, p, editors)),
        }
    }
    out
}

/// Protections other than sheetq's own of `w` that cover part of it and that this account
/// may not edit: sheetq's writes there fail, whatever its own protection says.
fn shutting_out(meta: &SpreadsheetMeta, w: &Wanted, editors: &Editors) -> Vec<String> {
    let me = editors.accounts().first().map_or("", String::as_str);
    all_protections(meta)
        .filter(|p| p.area != w.area && p.area.overlaps(&w.area))
        .filter(|p| !p.warning_only && !visible(p))
        .map(|p| {
            format!(
                "part of {} is also protected by {:?}, which {me} may not edit: sheetq's writes there fail; the spreadsheet's owner adds {me} as an editor of that protection or removes it",
                w.what, p.description
            )
        })
        .collect()
}

fn blocked_text(w: &Wanted, p: &ProtectedRange, editors: &Editors) -> String {
    let me = editors.accounts().first().map_or("", String::as_str);
    format!(
        "{} is protected ({:?}) so that {me} may not write it nor change who may: the spreadsheet's owner adds {me} as an editor of that protection (Data → Protected sheets and ranges) or removes it, then {}",
        w.what, p.description, w.fix
    )
}

/// `sheetq check`'s problems with protection: each of `wanted` unprotected, warning-only or
/// with other editors (named), each with its fix; and each account in `live_accounts` (the
/// daemons `_ワーカー` shows live) that is not one of `editors`.
pub fn verdicts(
    meta: &SpreadsheetMeta,
    wanted: &[Wanted],
    editors: &Editors,
    live_accounts: &[(String, String)],
) -> Vec<String> {
    let owner = presumed_owner(meta);
    let mut out = Vec::new();
    for w in wanted {
        match standing(meta, w, editors, &owner) {
            Standing::Right => {}
            Standing::Missing => out.push(format!(
                "{}: not protected, so anyone who may edit the spreadsheet may change it; {}",
                w.what, w.fix
            )),
            Standing::Wrong(_, faults) => out.push(format!(
                "{}: protected wrongly: {}; {}",
                w.what,
                faults.join("; "),
                w.fix
            )),
            Standing::Blocked(p) => out.push(blocked_text(w, p, editors)),
        }
        out.extend(shutting_out(meta, w, editors));
    }
    let mut named: BTreeSet<&str> = BTreeSet::new();
    for (worker, account) in live_accounts {
        if account.is_empty() || editors.has(account) || !named.insert(account.as_str()) {
            continue;
        }
        out.push(format!(
            "the daemon {worker} calls as {account}, which may not write what sheetq protects: its writes to the queue fail; \
             add it to protect_editors, then run `sheetq init --config FILE` and `sheetq panels sync --config FILE`"
        ));
    }
    out
}

/// Whether the queue `queue_title` holds only what `accounts` (sheetq's service accounts)
/// wrote: the whole sheet protected, not warning-only, without holes, with no editor but
/// `accounts` and the owner. `Err` says why not, with the fix. The daemon honours `allow`
/// (who may press) only when this is `Ok`: on an open queue anyone may write any 依頼者.
pub fn queue_protected(
    meta: &SpreadsheetMeta,
    queue_title: &str,
    accounts: &[String],
) -> Result<(), String> {
    let fix = "run `sheetq init --config FILE` (with protect = true, the default)";
    let Some(sheet) = meta.sheet(queue_title) else {
        return Err(format!(
            "the spreadsheet has no sheet {}; {fix}",
            a1::quote_title(queue_title)
        ));
    };
    let editors = Editors::new("", accounts)?;
    let wanted = &whole_sheet(sheet.sheet_id, queue_title);
    let owner = presumed_owner(meta);
    // Any protection of the whole sheet that keeps people out will do: protections stack.
    let whole: Vec<&ProtectedRange> = all_protections(meta)
        .filter(|p| p.area == wanted.area)
        .collect();
    let keeps_out = |p: &ProtectedRange| {
        !p.warning_only
            && visible(p)
            && p.unprotected.is_empty()
            && p.groups.is_empty()
            && !p.domain_users_can_edit
            && p.editors
                .iter()
                .all(|u| editors.has(u) || owner.contains(&u.to_lowercase()))
    };
    if whole.iter().any(|p| keeps_out(p)) {
        return Ok(());
    }
    match standing(meta, wanted, &editors, &owner) {
        Standing::Right => Ok(()),
        Standing::Missing => Err(format!(
            "{} is not protected, so anyone who may edit the spreadsheet may write any 依頼者 into it; {fix}",
            wanted.what
        )),
        Standing::Wrong(_, faults) => Err(format!(
            "{} is not protected against people: {}; {fix}",
            wanted.what,
            faults.join("; ")
        )),
        Standing::Blocked(_) => Err(format!(
            "{} is protected so that this daemon's account may not see who may edit it; the spreadsheet's owner makes {} an editor of that protection, then {fix}",
            wanted.what,
            accounts.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sheets::SheetMeta;

    const SA: &str = "sheetq@p.iam.gserviceaccount.com";
    const OTHER_SA: &str = "second@p.iam.gserviceaccount.com";
    const OWNER: &str = "owner@example.com";
    const PERSON: &str = "mallory@example.com";

    fn editors() -> Editors {
        Editors::new(SA, &[]).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The queue (2001), `_ワーカー` (3001), the archive (4001) and a panel (5001).
    fn meta(protections: Vec<ProtectedRange>) -> SpreadsheetMeta {
        let sheet = |id: i32, title: &str| SheetMeta {
            sheet_id: id,
            title: title.into(),
            protected_ranges: protections
                .iter()
                .filter(|p| p.area.sheet_id == id)
                .cloned()
                .collect(),
            ..Default::default()
        };
        SpreadsheetMeta {
            spreadsheet_id: "s".into(),
            time_zone: "Asia/Tokyo".into(),
            sheets: vec![
                sheet(2001, "_ジョブキュー"),
                sheet(3001, "_ワーカー"),
                sheet(4001, "_ジョブ履歴"),
                sheet(5001, "web-1"),
            ],
        }
    }

    #[test]
    fn only_peoples_sheets_areas_that_the_account_may_not_edit_are_barred() {
        let mine = protected(1, Area::columns(5001, 7, 10), &[SA]);
        let mut theirs = protected(2, Area::columns(5001, 2, 5), &[PERSON]);
        theirs.requesting_user_can_edit = false;
        theirs.description = "mine".into();
        let mut warning = theirs.clone();
        warning.id = 3;
        warning.warning_only = true;
        let mut in_queue = protected(4, Area::sheet(2001), &[OWNER]);
        in_queue.requesting_user_can_edit = false;
        let m = meta(vec![mine, theirs, warning, in_queue]);
        let barred = barred(&m, &["_ジョブキュー", "_ワーカー", "_ジョブ履歴"]);
        assert_eq!(
            barred,
            [Barred {
                title: "web-1".into(),
                area: Area::columns(5001, 2, 5),
                description: "mine".into(),
            }],
            "ours and warning-only ones bar nothing; sheetq's own sheets are not barred but held off"
        );
        assert_eq!(
            barred[0].to_string(),
            "sheet \"web-1\" columns C:E rows 1– (\"mine\")"
        );
        let hostile = Barred {
            title: "\u{1b}]0;OWNED\u{7}".into(),
            description: "x".repeat(50_000),
            ..barred[0].clone()
        };
        let text = hostile.to_string();
        assert!(
            !text.contains('\u{1b}') && text.len() < 200,
            "a person's title and description are shown escaped and cut: {text}"
        );
    }

    fn hidden() -> Vec<Wanted> {
        hidden_sheets(&[
            (2001, "_ジョブキュー"),
            (3001, "_ワーカー"),
            (4001, "_ジョブ履歴"),
        ])
    }

    /// A protection of `area` editable by `users`, as Google lists it to an editor.
    fn protected(id: i32, area: Area, users: &[&str]) -> ProtectedRange {
        ProtectedRange {
            id,
            area,
            editors: users.iter().map(|u| u.to_string()).collect(),
            requesting_user_can_edit: true,
            ..Default::default()
        }
    }

    /// The three hidden sheets protected as `init` leaves them, Google listing the owner.
    fn initialised() -> Vec<ProtectedRange> {
        [2001, 3001, 4001]
            .iter()
            .map(|id| protected(*id, Area::sheet(*id), &[OWNER, SA]))
            .collect()
    }

    #[test]
    fn editors_are_the_account_and_protect_editors_never_nobody() {
        let e = Editors::new(
            " SheetQ@p.iam.gserviceaccount.com",
            &[OTHER_SA.into(), SA.into()],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.accounts(), [SA, OTHER_SA]);
        let none = Editors::new("", &[]);
        assert!(
            none.as_ref()
                .is_err_and(|e| e.contains("protect_editors") && e.contains("protect = false")),
            "{none:?}"
        );
        let listed = Editors::new("", &[OTHER_SA.into()]).map(|e| e.accounts().to_vec());
        assert_eq!(listed, Ok(vec![OTHER_SA.to_string()]));
    }

    #[test]
    fn an_unprotected_spreadsheet_gets_every_protection_added() {
        let planned = plan(&meta(Vec::new()), &hidden(), &editors());
        assert_eq!(planned.requests.len(), 3, "{planned:?}");
        assert_eq!(
            planned.requests[0],
            Request::AddProtectedRange {
                area: Area::sheet(2001),
                description:
                    "sheetq: sheet '_ジョブキュー' (only sheetq's service accounts write it)".into(),
                editors: vec![SA.into()],
                groups: Vec::new(),
            }
        );
        assert_eq!(
            planned.done[0],
            format!("protected sheet '_ジョブキュー' (editors: {SA})")
        );
        assert!(planned.blocked.is_empty());
    }

    #[test]
    fn what_is_right_is_left_alone_even_with_the_owner_listed() {
        let planned = plan(&meta(initialised()), &hidden(), &editors());
        assert_eq!(planned, Planned::default(), "nothing to do twice");
        assert!(verdicts(&meta(initialised()), &hidden(), &editors(), &[]).is_empty());
    }

    #[test]
    fn a_person_as_extra_editor_is_removed_and_reported() {
        let mut protections = initialised();
        protections[0].editors.push(PERSON.into());
        let m = meta(protections);
        let planned = plan(&m, &hidden(), &editors());
        assert_eq!(
            planned.requests,
            vec![Request::UpdateProtectedRange {
                id: 2001,
                editors: vec![SA.into()],
                groups: Vec::new(),
                clear_unprotected: false,
            }],
            "only the queue's protection changes"
        );
        let v = verdicts(&m, &hidden(), &editors(), &[]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("sheet '_ジョブキュー': protected wrongly")
                && v[0].contains(PERSON)
                && !v[0].contains(OWNER)
                && v[0].contains("sheetq init"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn warning_only_groups_domain_and_holes_are_each_put_right() {
        let mut p = initialised();
        p[0].warning_only = true;
        p[0].editors.clear();
        p[1].groups = vec!["ops@example.com".into()];
        p[2].domain_users_can_edit = true;
        p[2].unprotected = vec![Area::columns(4001, 0, 1)];
        let m = meta(p);
        let planned = plan(&m, &hidden(), &editors());
        assert_eq!(planned.requests.len(), 3, "{planned:?}");
        assert_eq!(
            planned.requests[2],
            Request::UpdateProtectedRange {
                id: 4001,
                editors: vec![SA.into()],
                groups: Vec::new(),
                clear_unprotected: true,
            }
        );
        let v = verdicts(&m, &hidden(), &editors(), &[]).join("\n");
        for expected in [
            "only warns",
            "the group(s) ops@example.com may edit it",
            "everyone in the domain may edit it",
            "1 range(s) inside it are left unprotected",
        ] {
            assert!(v.contains(expected), "{expected:?} missing from:\n{v}");
        }
    }

    #[test]
    fn a_second_daemons_account_is_added_where_it_is_missing() {
        let e = Editors::new(SA, &[OTHER_SA.into()]).unwrap_or_else(|e| panic!("{e}"));
        let m = meta(initialised());
        let planned = plan(&m, &hidden(), &e);
        assert_eq!(
            planned.requests.len(),
            3,
            "each protection gains the account"
        );
        let v = verdicts(&m, &hidden(), &e, &[]);
        assert!(
            v.iter()
                .all(|l| l.contains(&format!("{OTHER_SA} may not write it"))),
            "{v:?}"
        );
    }

    #[test]
    fn a_live_daemon_on_an_account_that_is_no_editor_is_named() {
        let m = meta(initialised());
        let live = [
            ("vm-1".to_string(), SA.to_string()),
            ("vm-2".to_string(), OTHER_SA.to_string()),
            ("vm-3".to_string(), OTHER_SA.to_string()),
            ("vm-4".to_string(), String::new()),
        ];
        let v = verdicts(&m, &hidden(), &editors(), &live);
        assert_eq!(v.len(), 1, "one line per account: {v:?}");
        assert!(
            v[0].contains("vm-2") && v[0].contains(OTHER_SA) && v[0].contains("protect_editors"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn a_protection_this_account_may_not_change_is_left_out_of_the_batch() {
        let mut p = initialised();
        // Someone else's protection of the whole queue: its editors are hidden from us.
        p[0] = ProtectedRange {
            id: 77,
            area: Area::sheet(2001),
            description: "mine".into(),
            ..Default::default()
        };
        let m = meta(p);
        let planned = plan(&m, &hidden(), &editors());
        assert!(planned.requests.is_empty(), "{planned:?}");
        assert_eq!(planned.blocked.len(), 1);
        assert!(
            planned.blocked[0].contains("the spreadsheet's owner adds")
                && planned.blocked[0].contains(SA),
            "{}",
            planned.blocked[0]
        );
    }

    #[test]
    fn another_protection_of_part_of_an_area_neither_counts_nor_is_touched() {
        let mut p = initialised();
        p[0].area = Area::columns(2001, 0, 1);
        let m = meta(p);
        let planned = plan(&m, &hidden(), &editors());
        assert_eq!(
            planned.requests,
            vec![Request::AddProtectedRange {
                area: Area::sheet(2001),
                description: hidden()[0].description(),
                editors: vec![SA.into()],
                groups: Vec::new(),
            }],
            "the whole queue is protected anew; the column's protection stays"
        );
    }

    #[test]
    fn someone_elses_protection_over_part_of_an_area_that_shuts_sheetq_out_is_reported() {
        let mut p = initialised();
        p.push(ProtectedRange {
            id: 60,
            area: Area::columns(2001, 0, 1),
            description: "jobIds".into(),
            ..Default::default()
        });
        let v = verdicts(&meta(p), &hidden(), &editors(), &[]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("part of sheet '_ジョブキュー'")
                && v[0].contains("\"jobIds\"")
                && v[0].contains("writes there fail"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn the_owner_is_presumed_only_from_two_or_more_protections() {
        let one = meta(vec![protected(1, Area::sheet(2001), &[OWNER, SA])]);
        assert!(presumed_owner(&one).is_empty());
        let mut p = initialised();
        p.push(protected(9, Area::columns(5001, 0, 1), &[PERSON, OWNER]));
        assert_eq!(
            presumed_owner(&meta(p)),
            [OWNER.to_string()].into(),
            "a person's own protection lists the owner too"
        );
    }

    #[test]
    fn the_queue_is_trusted_only_when_people_cannot_write_it() {
        let accounts = vec![SA.to_string()];
        assert_eq!(
            queue_protected(&meta(initialised()), "_ジョブキュー", &accounts),
            Ok(())
        );
        let open = queue_protected(&meta(Vec::new()), "_ジョブキュー", &accounts);
        assert!(
            open.as_ref()
                .is_err_and(|e| e.contains("is not protected") && e.contains("sheetq init")),
            "{open:?}"
        );
        let mut p = initialised();
        p[0].editors.push(PERSON.into());
        let person = queue_protected(&meta(p), "_ジョブキュー", &accounts);
        assert!(
            person.as_ref().is_err_and(|e| e.contains(PERSON)),
            "{person:?}"
        );
        let mut p = initialised();
        p[0].warning_only = true;
        assert!(queue_protected(&meta(p), "_ジョブキュー", &accounts).is_err());
        let mut p = initialised();
        p[0].editors = vec![OWNER.into()];
        p[0].requesting_user_can_edit = true;
        assert_eq!(
            queue_protected(&meta(p), "_ジョブキュー", &accounts),
            Ok(()),
            "a queue only the owner may write keeps people out (the daemon's writes are its own problem)"
        );
        let missing = queue_protected(&meta(Vec::new()), "_ジョブ", &accounts);
        assert!(
            missing
                .as_ref()
                .is_err_and(|e| e.contains("no sheet '_ジョブ'")),
            "{missing:?}"
        );
    }

    #[test]
    fn a_narrower_protection_beside_a_right_one_still_counts_as_protected() {
        let mut p = initialised();
        p.push(protected(50, Area::sheet(2001), &[OWNER]));
        let m = meta(p);
        assert!(plan(&m, &hidden(), &editors()).requests.is_empty());
        assert_eq!(
            queue_protected(&m, "_ジョブキュー", &[SA.to_string()]),
            Ok(())
        );
    }

    #[test]
    fn entries_are_addresses_or_groups_and_a_pattern_is_refused_naming_what_to_write() {
        let at = "[[functions]] entry 1 (\"deploy\")";
        assert_eq!(entry_problem(at, "allow", "alice@example.com"), None);
        assert_eq!(entry_problem(at, "allow", "group:ops@example.com"), None);
        let pattern = entry_problem(at, "allow", "*@ops.example.com")
            .unwrap_or_else(|| panic!("a pattern must be refused"));
        assert!(
            pattern.contains("\"*@ops.example.com\"") && pattern.contains("group:ops@example.com"),
            "the refusal names the entry and what to write: {pattern}"
        );
        for bad in [
            "alice",
            "al ice@example.com",
            "group:ops",
            "x:y@example.com",
        ] {
            assert!(
                entry_problem(at, "approvers", bad).is_some(),
                "{bad:?} must be refused"
            );
        }
    }

    #[test]
    fn people_split_addresses_from_groups_without_regard_to_case() {
        let p = People::of(&[
            "Alice@Example.com".to_string(),
            "group:OPS@example.com".to_string(),
        ]);
        assert_eq!(p.users, BTreeSet::from(["alice@example.com".to_string()]));
        assert_eq!(p.groups, BTreeSet::from(["ops@example.com".to_string()]));
        assert_eq!(p.to_string(), "alice@example.com, group:ops@example.com");
        assert!(p.lists_user("ALICE@example.com"));
    }
}
