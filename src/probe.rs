//! `sheetq check --probe`: one probe per behaviour of Google Sheets that sheetq's guarantees
//! rest on, run through the [`Sheets`] port against a temporary hidden sheet
//! `_sheetq_probe_<random>`, which is deleted afterwards (also after a failure or Ctrl-C).
//!
//! The same list runs in `cargo test` against the emulator, so the emulator and the probes
//! agree; a test switches the emulator to a deliberately different behaviour
//! (`emulator::Deviation`) for each probe and sees it report DIFFERS. Results saved from a
//! real spreadsheet (`--save`) are compared with the emulator's by a test
//! (`tests/fixtures/google/`).
//!
//! Every probe starts from a fresh copy of the sheet (the previous one is deleted in the same
//! batch), so none sees another's rows or metadata. What a probe observed is written in
//! words without ids or random names, so two runs (and Google and the emulator) compare.

use serde::{Deserialize, Serialize};

use crate::a1;
use crate::queue::cell_text;
use crate::sheets::{
    Area, BatchUpdate, BatchUpdateReply, Cell, ErrorKind, Filter, FilterWrite, GridRange,
    MetadataLookup, Reply, Request, Sheets, SheetsError,
};

/// The behaviours probed, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    ConcurrentCas,
    FindReplaceCas,
    BatchAllOrNothing,
    BatchInOrderReadBack,
    MetadataInsertAbove,
    MetadataDeleteAbove,
    MetadataFullWidthSort,
    MetadataNarrowSort,
    MetadataCutPaste,
    MetadataMoveRows,
    FilterWriteFollowsRow,
    FilterWriteMatchesNothing,
    DeleteMissingMetadata,
    CreateMetadataIdInUse,
    AppendAfterBlankRow,
    ProtectedOwnEditor,
    ProtectInsideClosed,
    MetadataOtherProject,
    ViewerWrite,
}

/// Where a behaviour comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Basis {
    /// Google documents it; the reference.
    Documented(&'static str),
    /// Measured or reported by users, or sheetq's reading of silence; the source.
    Believed(&'static str),
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Basis::Documented(r) => write!(f, "documented: {r}"),
            Basis::Believed(r) => write!(f, "believed: {r}"),
        }
    }
}

/// What a probe checks and what rests on it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ProbeInfo {
    /// What Google is expected to do, in one line.
    pub expects: &'static str,
    /// The section of docs/design.md it underpins.
    pub section: &'static str,
    pub basis: Basis,
    /// What sheetq would get wrong if Google did otherwise, and what covers it.
    pub if_differs: &'static str,
}

const BATCH_DOC: &str =
    "https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/batchUpdate";
const METADATA_DOC: &str =
    "https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.developerMetadata";
const USERS_SORT: &str =
    "users' measurements of sortRange/cutPaste with row metadata; docs/design.md §4";

impl Probe {
    /// Every probe, in the order they run: the concurrent one first, while the client's
    /// request budget still lets both of its calls go out at once.
    pub const ALL: [Probe; 19] = [
        Probe::ConcurrentCas,
        Probe::FindReplaceCas,
        Probe::BatchAllOrNothing,
        Probe::BatchInOrderReadBack,
        Probe::MetadataInsertAbove,
        Probe::MetadataDeleteAbove,
        Probe::MetadataFullWidthSort,
        Probe::MetadataNarrowSort,
        Probe::MetadataCutPaste,
        Probe::MetadataMoveRows,
        Probe::FilterWriteFollowsRow,
        Probe::FilterWriteMatchesNothing,
        Probe::DeleteMissingMetadata,
        Probe::CreateMetadataIdInUse,
        Probe::AppendAfterBlankRow,
        Probe::ProtectedOwnEditor,
        Probe::ProtectInsideClosed,
        Probe::MetadataOtherProject,
        Probe::ViewerWrite,
    ];

    /// The other account the probe acts as, if any: its `check` option and what it must be.
    pub fn needs(self) -> Option<(Role, &'static str)> {
        match self {
            Probe::ProtectInsideClosed | Probe::MetadataOtherProject => Some((
                Role::Editor,
                "--probe-editor FILE: the key of a service account of another Cloud project, shared on the spreadsheet as Editor",
            )),
            Probe::ViewerWrite => Some((
                Role::Viewer,
                "--probe-viewer FILE: the key of a service account shared on the spreadsheet as Viewer",
            )),
            _ => None,
        }
    }

    /// The probe's name, as `--json` and the saved results spell it.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    pub fn info(self) -> ProbeInfo {
        let (expects, section, basis, if_differs) = match self {
            Probe::FindReplaceCas => (
                "findReplace with matchEntireCell and matchCase changes only cells whose whole text equals, case and all, and counts them in occurrencesChanged",
                "§3",
                Basis::Documented("https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/request#findreplacerequest"),
                "the lease's compare-and-swap could take a lease another daemon holds: two claim passes at once, a job run twice. No setting covers it; do not run more than one daemon",
            ),
            Probe::BatchAllOrNothing => (
                "a batchUpdate with one invalid request fails whole and applies nothing",
                "§2",
                Basis::Documented(BATCH_DOC),
                "a claim commit whose fence or CAS failed could still write its claims: a job run twice. Nothing covers it",
            ),
            Probe::BatchInOrderReadBack => (
                "the requests of a batch apply in order, and responseRanges read the sheet after all of them",
                "§2",
                Basis::Documented(BATCH_DOC),
                "a commit's read-back would not prove what the commit did: claims judged lost or landed wrongly. Nothing covers it",
            ),
            Probe::MetadataInsertAbove => (
                "row metadata stays with its row when a row is inserted above it",
                "§4",
                Basis::Documented(METADATA_DOC),
                "results would be written to the row that took the job's place; the reply check catches it and repairs, at the cost of an incident per insert",
            ),
            Probe::MetadataDeleteAbove => (
                "row metadata stays with its row when a row above it is deleted",
                "§4",
                Basis::Documented(METADATA_DOC),
                "as for an insert: incidents and repairs after every deletion above a running job",
            ),
            Probe::MetadataFullWidthSort => (
                "a sortRange over every filled column moves row metadata with the rows",
                "§4",
                Basis::Believed(USERS_SORT),
                "after a person sorts the queue, results would go through the binding to another job's row; the reply check catches it and writes by jobId instead, with an incident per job",
            ),
            Probe::MetadataNarrowSort => (
                "a sortRange over fewer columns reorders values only; row metadata stays at its row index",
                "§4",
                Basis::Believed(USERS_SORT),
                "nothing is lost: the binding is checked against the jobId in every reply; sheetq only expects more incidents after narrow sorts than there will be",
            ),
            Probe::MetadataCutPaste => (
                "cutPaste moves the cells but leaves row metadata on the source row",
                "§4",
                Basis::Believed(USERS_SORT),
                "nothing is lost: a binding that moved with the cells still holds the jobId, which every write checks",
            ),
            Probe::MetadataMoveRows => (
                "moveDimension moves row metadata with the rows",
                "§4",
                Basis::Believed("sheetq's reading: a moved row is the same row object, as for insert and delete"),
                "after a person drags rows, writes through a binding find another job's row: incidents and repairs, nothing lost",
            ),
            Probe::FilterWriteFollowsRow => (
                "values.batchUpdateByDataFilter with a metadata lookup writes the row where it is when the request applies, and skips null cells",
                "§4",
                Basis::Documented("https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets.values/batchUpdateByDataFilter (DataFilterValueRange; null values are skipped: ValueRange.values)"),
                "results would overwrite people's cells in the row (null cleared), or land where the row was: a result on another job's row. Nothing covers it",
            ),
            Probe::FilterWriteMatchesNothing => (
                "values.batchUpdateByDataFilter fails whole (400) when a lookup matches nothing, and applies none of its entries",
                "§4",
                Basis::Believed("undocumented; the emulator's strict reading (docs/design.md §4)"),
                "none: sheetq treats a lookup that matched nothing the same whether Google fails the call or skips the entry (the result is placed afresh by jobId)",
            ),
            Probe::DeleteMissingMetadata => (
                "deleteDeveloperMetadata whose lookup matches nothing succeeds and changes nothing",
                "§4",
                Basis::Believed("undocumented; sheetq removes finished rows' bindings in batches that may repeat a removal"),
                "a batch removing a binding already gone would fail with the heartbeat and lease it carries: the daemon would stop renewing its lease. Nothing covers it",
            ),
            Probe::CreateMetadataIdInUse => (
                "createDeveloperMetadata with an id already in use fails the batch",
                "§2",
                Basis::Believed(METADATA_DOC),
                "a claim whose binding id collides would move the old binding instead of failing: the old job's result could follow it to the new row. The reply check limits it to an incident",
            ),
            Probe::AppendAfterBlankRow => (
                "values.append with a range starting below the last row with data writes there, not into a blank row inside the queue",
                "§1.1",
                Basis::Documented("https://developers.google.com/sheets/api/guides/values#append_values (the table is looked for within the range)"),
                "an enqueued job would fill a blank row a person left inside the queue instead of going after the last job; no job is lost",
            ),
            Probe::ProtectedOwnEditor => (
                "the service account protects a sheet with itself as the only editor; spreadsheets.get lists the protection as set, and the account still writes through it (values.batchUpdate and a compare-and-swap)",
                "§5.1",
                Basis::Documented("https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/sheets#protectedrange"),
                "`sheetq init` and `panels sync` could not protect what only sheetq may write (people could forge queue rows and 依頼者), or sheetq could not write its own sheets once protected; set protect = false until it is understood",
            ),
            Probe::ProtectInsideClosed => (
                "another editor of the file cannot add a protected range inside a range protected against it: the batchUpdate is refused",
                "§1.5",
                Basis::Believed("undocumented; Google lets those who can edit a range protect it (https://support.google.com/docs/answer/1218656), the stricter reading of cells closed to them"),
                "a person could protect cells inside sheetq's protected queue or panel columns: sheetq's next write there is refused. Covered: the daemon holds that spreadsheet off with backoff (queue) or leaves those cells out (panel, index), and `check` names the range",
            ),
            Probe::MetadataOtherProject => (
                "an account of another Cloud project sees DOCUMENT developer metadata but not this project's PROJECT metadata; its delete or move of a DOCUMENT entry on a sheet protected against it is refused, its delete of the PROJECT entry finds nothing, and both stay where they were",
                "§4",
                Basis::Believed("PROJECT visibility is documented (https://developers.google.com/sheets/api/guides/metadata#visibility); protection of metadata is undocumented, the stricter reading"),
                "if PROJECT entries were seen by others, provenance marks could be forged (sheetq would trust another project's continuation); if DOCUMENT entries on the protected queue could be deleted or moved by people, a running job's binding could go: its result is then placed by jobId with an incident, nothing lost",
            ),
            Probe::ViewerWrite => (
                "a viewer of the file reads it, and its write is refused with 403",
                "§5.1",
                Basis::Documented("https://support.google.com/docs/answer/2494822 (viewers cannot edit)"),
                "people shared as viewers could write queue rows or tick panels; keep protect = true, which protects what only sheetq may write from every account but its own",
            ),
            Probe::ConcurrentCas => (
                "two concurrent batchUpdates that compare-and-swap one cell: exactly one changes it",
                "§3",
                Basis::Believed("Google serialises writes to one spreadsheet; not documented"),
                "two daemons could both take the lease: a job run twice. No setting covers it; run one daemon per spreadsheet",
            ),
        };
        ProbeInfo {
            expects,
            section,
            basis,
            if_differs,
        }
    }

    /// Finds a probe by its name.
    pub fn parse(name: &str) -> Option<Probe> {
        Probe::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// An account besides sheetq's that a probe acts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Role {
    /// An editor of the file, of another Cloud project than sheetq's account.
    Editor,
    /// A viewer of the file.
    Viewer,
}

/// The accounts besides sheetq's that some probes act as ([`Probe::needs`]); a probe whose
/// account is not given is skipped and says what to give.
#[derive(Clone, Copy, Default)]
pub struct Others<'a> {
    pub editor: Option<&'a dyn Sheets>,
    pub viewer: Option<&'a dyn Sheets>,
}

impl<'a> Others<'a> {
    fn get(&self, role: Role) -> Option<&'a dyn Sheets> {
        match role {
            Role::Editor => self.editor,
            Role::Viewer => self.viewer,
        }
    }
}

/// What a probe concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Differs,
    Error,
    /// Not run: it needs an account that was not given.
    Skipped,
}

/// One probe's result: what it saw, and whether that is what sheetq relies on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    pub probe: Probe,
    pub verdict: Verdict,
    /// What the spreadsheet did, in words (no ids or random names): the same for two runs
    /// that saw the same behaviour.
    pub observed: String,
}

/// Every probe's result, and whether the temporary sheet is gone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub results: Vec<ProbeResult>,
    /// The temporary sheet's title.
    pub sheet: String,
    /// Why the temporary sheet may still be there (delete it by hand); `None` when it is gone.
    pub left_behind: Option<String>,
    /// Whether the run was stopped (Ctrl-C) before every probe ran.
    pub interrupted: bool,
}

impl Report {
    /// Every probe asked for ran (the run was not stopped) and passed, but those skipped for
    /// want of an account (the table says so), and the sheet is gone.
    pub fn all_pass(&self) -> bool {
        !self.interrupted
            && self.left_behind.is_none()
            && self
                .results
                .iter()
                .all(|r| matches!(r.verdict, Verdict::Pass | Verdict::Skipped))
    }

    /// The table `check --probe` prints.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for r in &self.results {
            let info = r.probe.info();
            let verdict = match r.verdict {
                Verdict::Pass => "PASS",
                Verdict::Differs => "DIFFERS",
                Verdict::Error => "ERROR",
                Verdict::Skipped => "SKIPPED",
            };
            out.push_str(&format!(
                "{verdict:<8} {:<30} {:<5} {}\n         expected: {}\n         observed: {}\n",
                r.probe.name(),
                info.section,
                info.basis,
                info.expects,
                r.observed
            ));
            if matches!(r.verdict, Verdict::Differs | Verdict::Error) {
                out.push_str(&format!(
                    "         if Google does otherwise: {}\n",
                    info.if_differs
                ));
            }
        }
        if self.interrupted {
            out.push_str("stopped before every probe ran\n");
        }
        match &self.left_behind {
            Some(why) => out.push_str(&format!(
                "the temporary sheet '{}' may still be there ({why}): delete it by hand\n",
                self.sheet
            )),
            None => out.push_str(&format!(
                "the temporary sheet '{}' is deleted\n",
                self.sheet
            )),
        }
        out
    }
}

/// Runs every probe of `only` (all when empty) on the spreadsheet, until done or until
/// `stop` fires, and deletes the temporary sheet whichever comes first.
pub async fn run(
    sheets: &dyn Sheets,
    others: Others<'_>,
    only: &[Probe],
    stop: impl std::future::Future<Output = ()>,
) -> Report {
    let tag = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let title = format!("_sheetq_probe_{tag}");
    let mut results = Vec::new();
    // The ids of the sheets the probes make, chosen before each is asked for: the clean-up
    // deletes by them, never by title (a person could give another sheet the probe's title).
    let made = std::sync::Mutex::new(Vec::new());
    let interrupted = {
        let mut lab = Lab::new(sheets, others, &title, &tag, &made);
        let probes: Vec<Probe> = if only.is_empty() {
            Probe::ALL.to_vec()
        } else {
            only.to_vec()
        };
        let all = async {
            for p in probes {
                if let Some((_, what)) = p.needs().filter(|(r, _)| others.get(*r).is_none()) {
                    results.push(ProbeResult {
                        probe: p,
                        verdict: Verdict::Skipped,
                        observed: format!("not run: give {what}"),
                    });
                    continue;
                }
                let result = match lab.probe(p).await {
                    Ok((pass, observed)) => ProbeResult {
                        probe: p,
                        verdict: if pass {
                            Verdict::Pass
                        } else {
                            Verdict::Differs
                        },
                        observed,
                    },
                    Err(e) => ProbeResult {
                        probe: p,
                        verdict: Verdict::Error,
                        observed: e.to_string(),
                    },
                };
                results.push(result);
            }
        };
        tokio::select! {
            () = all => false,
            () = stop => true,
        }
    };
    let made = made.into_inner().unwrap_or_else(|p| p.into_inner());
    let left_behind = clean_up(sheets, &made).await.err();
    Report {
        results,
        sheet: title,
        left_behind,
        interrupted,
    }
}

/// Deletes the probe sheets of `made` that are still there, found by the ids the probes
/// chose (so a reply lost on the way leaves nothing behind, and a sheet a person renamed to
/// the probe's title is never touched).
async fn clean_up(sheets: &dyn Sheets, made: &[i32]) -> Result<(), String> {
    let meta = sheets.metadata().await.map_err(|e| e.to_string())?;
    let requests: Vec<Request> = meta
        .sheets
        .iter()
        .filter(|s| made.contains(&s.sheet_id))
        .map(|s| Request::DeleteSheet {
            sheet_id: s.sheet_id,
        })
        .collect();
    if requests.is_empty() {
        return Ok(());
    }
    sheets
        .batch_update(&BatchUpdate {
            requests,
            ..Default::default()
        })
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Rows and columns of every fresh probe sheet.
const GRID_ROWS: u32 = 20;
const GRID_COLS: u32 = 4;

/// The temporary sheet and the ids the probes use.
struct Lab<'a> {
    sheets: &'a dyn Sheets,
    others: Others<'a>,
    /// Every sheet id a probe asked for, whether or not the reply came.
    made: &'a std::sync::Mutex<Vec<i32>>,
    title: String,
    /// The developer metadata key of every binding a probe makes.
    key: String,
    sheet: Option<i32>,
    next_id: i32,
}

type Observed = (bool, String);

fn text(s: &str) -> Cell {
    Cell::from(s)
}

fn grid(sheet_id: i32, rows: std::ops::Range<u32>, cols: std::ops::Range<u32>) -> GridRange {
    GridRange {
        sheet_id,
        start_row: rows.start,
        end_row: rows.end,
        start_col: cols.start,
        end_col: cols.end,
    }
}

fn changed(reply: &BatchUpdateReply, i: usize) -> u32 {
    match reply.replies.get(i) {
        Some(Reply::CompareAndSwap { changed }) => *changed,
        _ => 0,
    }
}

fn column(values: &[Vec<String>], col: usize) -> Vec<String> {
    values
        .iter()
        .map(|r| r.get(col).cloned().unwrap_or_default())
        .collect()
}

impl<'a> Lab<'a> {
    fn new(
        sheets: &'a dyn Sheets,
        others: Others<'a>,
        title: &str,
        tag: &str,
        made: &'a std::sync::Mutex<Vec<i32>>,
    ) -> Self {
        let seed = u32::from_str_radix(tag, 16).unwrap_or(1) & 0x3fff_ffff;
        Lab {
            sheets,
            others,
            made,
            title: title.to_string(),
            key: format!("sheetq.probe.{tag}"),
            sheet: None,
            next_id: i32::try_from(seed).unwrap_or(1).max(1),
        }
    }

    /// A positive id not used before in this run (sheet and metadata ids).
    fn fresh_id(&mut self) -> i32 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.next_id
    }

    fn a1(&self, cells: &str) -> String {
        a1::range(&self.title, cells)
    }

    fn id(&self) -> i32 {
        self.sheet.unwrap_or_default()
    }

    async fn batch(
        &self,
        requests: Vec<Request>,
        response_ranges: Vec<String>,
    ) -> Result<BatchUpdateReply, SheetsError> {
        self.sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges,
                ..Default::default()
            })
            .await
    }

    /// A fresh sheet holding `rows` from A1 (the previous one deleted in the same batch),
    /// with a binding on each of the zero-based `bound` rows; returns the bindings' ids.
    async fn fresh(&mut self, rows: &[&[&str]], bound: &[u32]) -> Result<Vec<i32>, SheetsError> {
        let id = self.fresh_id();
        if let Ok(mut made) = self.made.lock() {
            made.push(id);
        }
        let mut requests = Vec::new();
        if let Some(old) = self.sheet {
            requests.push(Request::DeleteSheet { sheet_id: old });
        }
        requests.push(Request::AddSheetWithId {
            sheet_id: id,
            title: self.title.clone(),
            index: None,
            row_count: GRID_ROWS,
            column_count: GRID_COLS,
            frozen_rows: 0,
        });
        requests.push(Request::UpdateSheetHidden {
            sheet_id: id,
            hidden: true,
        });
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(0) as u32;
        requests.push(Request::UpdateCells {
            range: grid(id, 0..rows.len() as u32, 0..width.max(1)),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|c| text(c)).collect())
                .collect(),
        });
        let mut ids = Vec::new();
        for row in bound {
            let m = self.fresh_id();
            ids.push(m);
            requests.push(Request::BindRow {
                sheet_id: id,
                row: *row,
                id: m,
                key: self.key.clone(),
                value: "probe".into(),
            });
        }
        self.batch(requests, Vec::new()).await?;
        self.sheet = Some(id);
        Ok(ids)
    }

    /// The values of `cells` of the probe sheet, as text.
    async fn cells(&self, cells: &str) -> Result<Vec<Vec<String>>, SheetsError> {
        let read = self.sheets.read(&[self.a1(cells)]).await?;
        Ok(read
            .first()
            .map(|v| {
                v.values
                    .iter()
                    .map(|r| r.iter().map(cell_text).collect())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The text of column A of `cells`, row by row (an empty row as "").
    async fn column_a(&self, cells: &str) -> Result<Vec<String>, SheetsError> {
        Ok(column(&self.cells(cells).await?, 0))
    }

    /// The zero-based row of binding `id`, if it is on a row of the probe sheet.
    async fn bound_row(&self, id: i32) -> Result<Option<u32>, SheetsError> {
        let found = self
            .sheets
            .search_metadata(&MetadataLookup::key(&self.key))
            .await?;
        Ok(found
            .into_iter()
            .find(|m| m.id == id && m.sheet_id == self.sheet)
            .and_then(|m| m.row))
    }

    async fn probe(&mut self, p: Probe) -> Result<Observed, SheetsError> {
        match p {
            Probe::FindReplaceCas => self.find_replace_cas().await,
            Probe::BatchAllOrNothing => self.batch_all_or_nothing().await,
            Probe::BatchInOrderReadBack => self.batch_in_order().await,
            Probe::MetadataInsertAbove => {
                self.metadata_after(|id| Request::InsertRows {
                    sheet_id: id,
                    at: 0,
                    count: 1,
                })
                .await
            }
            Probe::MetadataDeleteAbove => {
                self.metadata_after(|id| Request::DeleteRows {
                    sheet_id: id,
                    start: 0,
                    end: 1,
                })
                .await
            }
            Probe::MetadataFullWidthSort => self.metadata_sort(2, true).await,
            Probe::MetadataNarrowSort => self.metadata_sort(1, false).await,
            Probe::MetadataCutPaste => self.metadata_cut_paste().await,
            Probe::MetadataMoveRows => {
                self.metadata_after(|id| Request::MoveRows {
                    sheet_id: id,
                    start: 2,
                    end: 3,
                    destination: 0,
                })
                .await
            }
            Probe::FilterWriteFollowsRow => self.filter_write_follows_row().await,
            Probe::FilterWriteMatchesNothing => self.filter_write_matches_nothing().await,
            Probe::DeleteMissingMetadata => self.delete_missing_metadata().await,
            Probe::CreateMetadataIdInUse => self.create_id_in_use().await,
            Probe::AppendAfterBlankRow => self.append_after_blank_row().await,
            Probe::ConcurrentCas => self.concurrent_cas().await,
            Probe::ProtectedOwnEditor => self.protected_own_editor().await,
            Probe::ProtectInsideClosed => self.protect_inside_closed().await,
            Probe::MetadataOtherProject => self.metadata_other_project().await,
            Probe::ViewerWrite => self.viewer_write().await,
        }
    }

    /// The account of `role`, or the error that says it is missing.
    fn other(&self, role: Role) -> Result<&'a dyn Sheets, SheetsError> {
        self.others.get(role).ok_or_else(|| {
            SheetsError::new(
                ErrorKind::Fatal,
                "check --probe",
                "no such account was given",
            )
        })
    }

    /// sheetq's account, named as a protection's editor (a key file names it).
    fn own_account(&self) -> Result<String, SheetsError> {
        let account = self.sheets.account();
        if account.is_empty() {
            return Err(SheetsError::new(
                ErrorKind::Fatal,
                "check --probe",
                "the credentials do not name their service account (metadata server), so the probe cannot make it the protection's editor; run it with a key file",
            ));
        }
        Ok(account)
    }

    /// Protects rows `rows` of the probe sheet for sheetq's account alone; the protection's
    /// id.
    async fn protect_rows(&self, rows: std::ops::Range<u32>) -> Result<i32, SheetsError> {
        let account = self.own_account()?;
        let reply = self
            .batch(
                vec![Request::AddProtectedRange {
                    area: Area::cells(grid(self.id(), rows, 0..GRID_COLS)),
                    description: "sheetq check --probe".into(),
                    editors: vec![account],
                    groups: Vec::new(),
                }],
                Vec::new(),
            )
            .await?;
        match reply.replies.first() {
            Some(Reply::AddProtectedRange { id }) => Ok(*id),
            _ => Err(SheetsError::new(
                ErrorKind::Fatal,
                "check --probe",
                "the reply of addProtectedRange names no protected range",
            )),
        }
    }

    async fn protect_inside_closed(&mut self) -> Result<Observed, SheetsError> {
        let editor = self.other(Role::Editor)?;
        self.fresh(&[&["closed"], &["open"]], &[]).await?;
        self.protect_rows(0..1).await?;
        // First, that the account may edit the file at all: an open cell.
        editor
            .write(&[crate::sheets::ValueRange::new(
                self.a1("A2"),
                vec![vec![text("written by the other editor")]],
            )])
            .await
            .map_err(|e| not_an_editor(e, "--probe-editor"))?;
        let protect = |row: u32| -> Result<BatchUpdate, SheetsError> {
            Ok(BatchUpdate {
                requests: vec![Request::AddProtectedRange {
                    area: Area::cells(grid(self.id(), row..row + 1, 0..1)),
                    description: "sheetq check --probe: the other editor's".into(),
                    // sheetq's account among its editors, so that the probe sheet can still
                    // be deleted if it is applied.
                    editors: vec![editor.account(), self.own_account()?],
                    groups: Vec::new(),
                }],
                ..Default::default()
            })
        };
        // The control: the same request on an open cell goes through, so a refusal below
        // is the closed range's doing, not the request's.
        editor.batch_update(&protect(1)?).await.map_err(|e| {
            SheetsError::new(
                e.kind,
                "check --probe",
                format!("the other editor could not protect even an open cell ({}), so the probe cannot tell why it is refused", e.message),
            )
        })?;
        let tried = editor.batch_update(&protect(0)?).await;
        Ok(match tried {
            Err(e) if matches!(e.kind, ErrorKind::InvalidArgument | ErrorKind::Permission) => (
                true,
                format!(
                    "the other editor wrote and protected an open cell; its addProtectedRange inside the range protected against it was refused ({:?})",
                    e.kind
                ),
            ),
            Err(e) => return Err(e),
            Ok(_) => {
                (
                    false,
                    "the other editor wrote and protected an open cell; its addProtectedRange inside the range protected against it was applied".into(),
                )
            }
        })
    }

    async fn metadata_other_project(&mut self) -> Result<Observed, SheetsError> {
        let editor = self.other(Role::Editor)?;
        let (mine, theirs) = (self.own_account()?, editor.account());
        if project_of(&mine).is_some() && project_of(&mine) == project_of(&theirs) {
            return Err(SheetsError::new(
                ErrorKind::Fatal,
                "check --probe",
                format!(
                    "--probe-editor is {theirs}, of sheetq's own Cloud project; give a service account of another project"
                ),
            ));
        }
        // Rows 1–3 protected against the other editor, with an entry on row 2; another
        // entry on row 4, open, for the control.
        let bound = self
            .fresh(&[&["a"], &["b"], &["c"], &["d"], &["e"]], &[1, 3])
            .await?;
        let (document, open) = match bound[..] {
            [document, open] => (document, open),
            _ => {
                return Err(SheetsError::new(
                    ErrorKind::Fatal,
                    "check --probe",
                    "the probe sheet was made without its two bindings",
                ))
            }
        };
        let project = self.fresh_id();
        self.batch(
            vec![Request::MarkSheet {
                sheet_id: self.id(),
                id: project,
                key: self.key.clone(),
                value: "probe".into(),
            }],
            Vec::new(),
        )
        .await?;
        self.protect_rows(0..3).await?;
        let seen = editor
            .search_metadata(&MetadataLookup::key(&self.key))
            .await
            .map_err(|e| not_an_editor(e, "--probe-editor"))?;
        let saw = |id: i32| seen.iter().any(|m| m.id == id);
        let (saw_document, saw_project) = (saw(document), saw(project));
        let delete = |id| BatchUpdate {
            requests: vec![Request::DeleteMetadata { id }],
            ..Default::default()
        };
        let move_to = |id, row| BatchUpdate {
            requests: vec![Request::MoveMetadataToRow {
                id,
                sheet_id: self.id(),
                row,
            }],
            ..Default::default()
        };
        // The control: on an open row the same requests go through, so a refusal below is
        // the protection's doing, not the request's.
        let control = match editor.batch_update(&move_to(open, 4)).await {
            Ok(_) => editor.batch_update(&delete(open)).await.map(drop),
            Err(e) => Err(e),
        };
        control.map_err(|e| {
            SheetsError::new(
                e.kind,
                "check --probe",
                format!("the other editor could not move or delete developer metadata on an open row ({}), so the probe cannot tell why it is refused", e.message),
            )
        })?;
        let delete_document = match editor.batch_update(&delete(document)).await {
            Ok(_) => "applied".to_string(),
            Err(e) if matches!(e.kind, ErrorKind::InvalidArgument | ErrorKind::Permission) => {
                format!("refused ({:?})", e.kind)
            }
            Err(e) => return Err(e),
        };
        let move_document = match editor.batch_update(&move_to(document, 4)).await {
            Ok(_) => "applied".to_string(),
            Err(e) if matches!(e.kind, ErrorKind::InvalidArgument | ErrorKind::Permission) => {
                format!("refused ({:?})", e.kind)
            }
            Err(e) => return Err(e),
        };
        let delete_project = match editor.batch_update(&delete(project)).await {
            Ok(_) => "succeeded".to_string(),
            Err(e) if matches!(e.kind, ErrorKind::InvalidArgument | ErrorKind::Permission) => {
                format!("was refused ({:?})", e.kind)
            }
            Err(e) => return Err(e),
        };
        let after = self
            .sheets
            .search_metadata(&MetadataLookup::key(&self.key))
            .await?;
        let kept = |id: i32, row: Option<u32>| {
            after
                .iter()
                .any(|m| m.id == id && (row.is_none() || m.row == row))
        };
        let both_kept = kept(document, Some(1)) && kept(project, None);
        let yes = |b: bool| if b { "yes" } else { "no" };
        Ok((
            saw_document
                && !saw_project
                && delete_document.starts_with("refused")
                && move_document.starts_with("refused")
                && both_kept,
            format!(
                "the other project's account saw the DOCUMENT entry: {}, the PROJECT entry: {}; it moved and deleted an entry on an open row; its delete of the DOCUMENT entry on the protected rows was {delete_document}, its move of it to an open row {move_document}; its delete of the PROJECT entry {delete_project}; both still there, the DOCUMENT one on row 2: {}",
                yes(saw_document),
                yes(saw_project),
                yes(both_kept),
            ),
        ))
    }

    async fn viewer_write(&mut self) -> Result<Observed, SheetsError> {
        let viewer = self.other(Role::Viewer)?;
        self.fresh(&[&["as it was"]], &[]).await?;
        viewer.read(&[self.a1("A1")]).await.map_err(|e| {
            SheetsError::new(
                e.kind,
                "check --probe",
                format!("--probe-viewer cannot read the spreadsheet ({}); share it with that account as Viewer", e.message),
            )
        })?;
        let wrote = viewer
            .write(&[crate::sheets::ValueRange::new(
                self.a1("A1"),
                vec![vec![text("written by a viewer")]],
            )])
            .await;
        let after = self.column_a("A1").await?;
        Ok(match wrote {
            Err(e) if e.kind == ErrorKind::Permission => (
                after == ["as it was"],
                format!("the viewer read the sheet; its write was refused (Permission); A1 after: {after:?}"),
            ),
            Err(e) => (
                false,
                format!("the viewer read the sheet; its write failed otherwise ({:?}); A1 after: {after:?}", e.kind),
            ),
            Ok(()) => (
                false,
                format!("the viewer read the sheet; its write was applied; A1 after: {after:?}"),
            ),
        })
    }

    async fn find_replace_cas(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["free"], &["FREE"], &["free now"], &["free"]], &[])
            .await?;
        let reply = self
            .batch(
                vec![Request::CompareAndSwap {
                    range: grid(self.id(), 0..3, 0..1),
                    find: "free".into(),
                    replacement: "taken".into(),
                }],
                vec![self.a1("A1:A4")],
            )
            .await?;
        let n = changed(&reply, 0);
        let after: Vec<String> = reply
            .ranges
            .first()
            .map(|v| {
                v.values
                    .iter()
                    .map(|r| r.first().map(cell_text).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        let pass = n == 1 && after == ["taken", "FREE", "free now", "free"];
        Ok((
            pass,
            format!("occurrencesChanged {n}; A1:A4 after: {after:?}"),
        ))
    }

    async fn batch_all_or_nothing(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["before"]], &[]).await?;
        let missing = self.fresh_id();
        let sent = self
            .batch(
                vec![
                    Request::UpdateCells {
                        range: grid(self.id(), 0..1, 0..1),
                        rows: vec![vec![text("after")]],
                    },
                    Request::DeleteSheet { sheet_id: missing },
                ],
                Vec::new(),
            )
            .await;
        let a1 = self
            .column_a("A1")
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        Ok(match sent {
            Ok(_) => (false, format!("the batch was accepted; A1 is {a1:?}")),
            Err(e) if e.kind == ErrorKind::InvalidArgument => {
                (a1 == "before", format!("refused with 400; A1 is {a1:?}"))
            }
            Err(e) => return Err(e),
        })
    }

    async fn batch_in_order(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["old"]], &[]).await?;
        let reply = self
            .batch(
                vec![
                    Request::UpdateCells {
                        range: grid(self.id(), 0..1, 0..1),
                        rows: vec![vec![text("x")]],
                    },
                    Request::CompareAndSwap {
                        range: grid(self.id(), 0..1, 0..1),
                        find: "x".into(),
                        replacement: "y".into(),
                    },
                ],
                vec![self.a1("A1")],
            )
            .await?;
        let n = changed(&reply, 1);
        let shown = reply
            .ranges
            .first()
            .and_then(|v| v.values.first())
            .and_then(|r| r.first())
            .map(cell_text)
            .unwrap_or_default();
        Ok((
            n == 1 && shown == "y",
            format!("the second request changed {n} cell(s); responseRanges show A1 = {shown:?}"),
        ))
    }

    /// Binds row 3 of four ("c"), applies `edit`, and sees whether the binding is still on
    /// the row holding "c".
    async fn metadata_after(
        &mut self,
        edit: impl Fn(i32) -> Request,
    ) -> Result<Observed, SheetsError> {
        let ids = self.fresh(&[&["a"], &["b"], &["c"], &["d"]], &[2]).await?;
        self.batch(vec![edit(self.id())], Vec::new()).await?;
        let values = self.column_a("A1:A6").await?;
        let row_of_c = values.iter().position(|v| v == "c").map(|r| r as u32);
        let bound = self.bound_row(ids[0]).await?;
        Ok((
            bound.is_some() && bound == row_of_c,
            format!(
                "the binding is on row {}; \"c\" is on row {}",
                shown_row(bound),
                shown_row(row_of_c)
            ),
        ))
    }

    /// Sorts A1:?3 (`width` columns; the sheet has two filled) by column A and sees whether
    /// the binding on the row of 3 followed it.
    async fn metadata_sort(&mut self, width: u32, follows: bool) -> Result<Observed, SheetsError> {
        let ids = self
            .fresh(&[&["3", "c"], &["1", "a"], &["2", "b"]], &[0])
            .await?;
        self.batch(
            vec![Request::SortRows {
                range: grid(self.id(), 0..3, 0..width),
                column: 0,
                ascending: true,
            }],
            Vec::new(),
        )
        .await?;
        let values = self.column_a("A1:A3").await?;
        let row_of_3 = values.iter().position(|v| v == "3").map(|r| r as u32);
        let bound = self.bound_row(ids[0]).await?;
        let expected = if follows { row_of_3 } else { Some(0) };
        Ok((
            bound.is_some() && bound == expected,
            format!(
                "the binding is on row {}; the row it was on (\"3\") is now row {}",
                shown_row(bound),
                shown_row(row_of_3)
            ),
        ))
    }

    async fn metadata_cut_paste(&mut self) -> Result<Observed, SheetsError> {
        let ids = self.fresh(&[&["a", "x"], &["b", "y"]], &[0]).await?;
        self.batch(
            vec![Request::MoveCells {
                source: grid(self.id(), 0..1, 0..2),
                sheet_id: self.id(),
                row: 4,
                col: 0,
            }],
            Vec::new(),
        )
        .await?;
        let values = self.column_a("A1:A6").await?;
        let row_of_a = values.iter().position(|v| v == "a").map(|r| r as u32);
        let bound = self.bound_row(ids[0]).await?;
        Ok((
            bound == Some(0) && row_of_a == Some(4),
            format!(
                "the binding is on row {}; the cut cells are on row {}",
                shown_row(bound),
                shown_row(row_of_a)
            ),
        ))
    }

    async fn filter_write_follows_row(&mut self) -> Result<Observed, SheetsError> {
        let ids = self
            .fresh(&[&["a", "keep"], &["b", "keep"], &["c", "keep"]], &[2])
            .await?;
        self.batch(
            vec![Request::InsertRows {
                sheet_id: self.id(),
                at: 0,
                count: 1,
            }],
            Vec::new(),
        )
        .await?;
        let replies = self
            .sheets
            .write_filtered(&[FilterWrite {
                filter: Filter::Metadata(ids[0]),
                values: vec![vec![Some(text("new")), None]],
            }])
            .await?;
        let landed = replies
            .first()
            .and_then(Option::as_ref)
            .and_then(|w| a1::A1Range::parse(&w.range).ok())
            .and_then(|r| r.start_row);
        let rows = self.cells("A1:B4").await?;
        let row4: Vec<String> = rows.get(3).cloned().unwrap_or_default();
        Ok((
            landed == Some(3) && row4 == ["new", "keep"],
            format!(
                "the write landed on row {}; row 4 holds {row4:?}",
                shown_row(landed)
            ),
        ))
    }

    async fn filter_write_matches_nothing(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["a"]], &[]).await?;
        let gone = self.fresh_id();
        let sent = self
            .sheets
            .write_filtered(&[
                FilterWrite {
                    filter: Filter::A1(self.a1("A1")),
                    values: vec![vec![Some(text("x"))]],
                },
                FilterWrite {
                    filter: Filter::Metadata(gone),
                    values: vec![vec![Some(text("y"))]],
                },
            ])
            .await;
        let a1 = self
            .column_a("A1")
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        Ok(match sent {
            Err(e) if e.kind == ErrorKind::InvalidArgument => {
                (a1 == "a", format!("refused with 400; A1 is {a1:?}"))
            }
            Err(e) => return Err(e),
            Ok(replies) => (
                false,
                format!(
                    "accepted; the lookup's entry {}; A1 is {a1:?}",
                    if replies.get(1).is_some_and(Option::is_none) {
                        "was skipped"
                    } else {
                        "was answered"
                    }
                ),
            ),
        })
    }

    async fn delete_missing_metadata(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["a"]], &[]).await?;
        let gone = self.fresh_id();
        Ok(
            match self
                .batch(vec![Request::DeleteMetadata { id: gone }], Vec::new())
                .await
            {
                Ok(_) => (true, "accepted, nothing deleted".to_string()),
                Err(e) if e.kind == ErrorKind::InvalidArgument || e.kind == ErrorKind::NotFound => {
                    (false, format!("refused: {}", e.message))
                }
                Err(e) => return Err(e),
            },
        )
    }

    async fn create_id_in_use(&mut self) -> Result<Observed, SheetsError> {
        let ids = self.fresh(&[&["a"], &["b"]], &[0]).await?;
        let sent = self
            .batch(
                vec![Request::BindRow {
                    sheet_id: self.id(),
                    row: 1,
                    id: ids[0],
                    key: self.key.clone(),
                    value: "again".into(),
                }],
                Vec::new(),
            )
            .await;
        let bound = self.bound_row(ids[0]).await?;
        Ok(match sent {
            Err(e) if e.kind == ErrorKind::InvalidArgument => (
                bound == Some(0),
                format!("refused with 400; the id stays on row {}", shown_row(bound)),
            ),
            Err(e) => return Err(e),
            Ok(_) => (
                false,
                format!("accepted; the id is now on row {}", shown_row(bound)),
            ),
        })
    }

    async fn append_after_blank_row(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["h"], &["a"], &[], &["b"]], &[]).await?;
        let reply = self
            .sheets
            .append(&self.a1("A5:B5"), &[vec![text("new")]])
            .await?;
        let landed = a1::A1Range::parse(&reply.updated_range)
            .ok()
            .and_then(|r| r.start_row);
        let values = self.column_a("A1:A6").await?;
        Ok((
            landed == Some(4) && values == ["h", "a", "", "b", "new"],
            format!(
                "the row landed on row {}; A1:A6 is {values:?}",
                shown_row(landed)
            ),
        ))
    }

    async fn concurrent_cas(&mut self) -> Result<Observed, SheetsError> {
        self.fresh(&[&["free"]], &[]).await?;
        let cas = |mine: &str| Request::CompareAndSwap {
            range: grid(self.id(), 0..1, 0..1),
            find: "free".into(),
            replacement: mine.into(),
        };
        let (one, two) = tokio::join!(
            self.batch(vec![cas("one")], Vec::new()),
            self.batch(vec![cas("two")], Vec::new())
        );
        let (one, two) = (changed(&one?, 0), changed(&two?, 0));
        let a1 = self
            .column_a("A1")
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        let winner = match (one, two) {
            (1, 0) => "one",
            (0, 1) => "two",
            _ => "",
        };
        Ok((
            one + two == 1 && a1 == winner,
            format!(
                "{} of the two changed the cell; it holds the {} one's value",
                one + two,
                if a1 == winner { "winning" } else { "other" }
            ),
        ))
    }
}

impl Lab<'_> {
    /// Protects the whole probe sheet with this account as its only editor, finds the
    /// protection in `spreadsheets.get`, and writes through it twice, as the daemon does.
    async fn protected_own_editor(&mut self) -> Result<Observed, SheetsError> {
        let account = self.sheets.account();
        if account.is_empty() {
            return Err(SheetsError::new(
                ErrorKind::Fatal,
                "check --probe",
                "the credentials do not name their service account (metadata server), so the probe cannot make it the protection's editor; run it with a key file",
            ));
        }
        self.fresh(&[&["free"]], &[]).await?;
        let added = self
            .batch(
                vec![Request::AddProtectedRange {
                    area: Area::sheet(self.id()),
                    description: "sheetq check --probe".into(),
                    editors: vec![account.clone()],
                    groups: Vec::new(),
                }],
                Vec::new(),
            )
            .await?;
        let id = match added.replies.first() {
            Some(Reply::AddProtectedRange { id }) => *id,
            _ => return Ok((false, "the reply names no protected range".into())),
        };
        let meta = self.sheets.metadata().await?;
        let listed = meta
            .sheets
            .iter()
            .flat_map(|s| &s.protected_ranges)
            .find(|p| p.id == id)
            .cloned();
        let Some(listed) = listed else {
            return Ok((
                false,
                "spreadsheets.get does not list the protection".into(),
            ));
        };
        let mine = listed
            .editors
            .iter()
            .any(|e| e.eq_ignore_ascii_case(&account));
        let others = listed.editors.len() - usize::from(mine);
        let as_set = listed.area == Area::sheet(self.id())
            && !listed.warning_only
            && mine
            && listed.groups.is_empty()
            && !listed.domain_users_can_edit;
        self.sheets
            .write(&[crate::sheets::ValueRange::new(
                self.a1("A2"),
                vec![vec![text("written")]],
            )])
            .await?;
        let reply = self
            .batch(
                vec![Request::CompareAndSwap {
                    range: grid(self.id(), 0..1, 0..1),
                    find: "free".into(),
                    replacement: "taken".into(),
                }],
                vec![self.a1("A1:A2")],
            )
            .await?;
        let after: Vec<String> = reply
            .ranges
            .first()
            .map(|v| {
                v.values
                    .iter()
                    .map(|r| r.first().map(cell_text).unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        let wrote = changed(&reply, 0) == 1 && after == ["taken", "written"];
        Ok((
            as_set && wrote,
            format!(
                "listed {}: {}, {}, this account {} an editor, {others} other editor(s){}; A1:A2 after the writes: {after:?}",
                if as_set { "as set" } else { "otherwise" },
                if listed.area.is_sheet() { "the whole sheet" } else { "part of the sheet" },
                if listed.warning_only { "warning-only" } else { "not warning-only" },
                if mine { "is" } else { "is not" },
                if listed.groups.is_empty() && !listed.domain_users_can_edit {
                    ""
                } else {
                    ", groups or the domain too"
                },
            ),
        ))
    }
}

/// The Cloud project of a service account's address (`NAME@PROJECT.iam.gserviceaccount.com`).
fn project_of(account: &str) -> Option<&str> {
    account
        .rsplit_once('@')
        .and_then(|(_, domain)| domain.strip_suffix(".iam.gserviceaccount.com"))
}

/// `e`, from an account given as `option`, said as the sharing it lacks when Google refused
/// it.
fn not_an_editor(e: SheetsError, option: &str) -> SheetsError {
    if e.kind == ErrorKind::Permission {
        SheetsError::new(
            e.kind,
            "check --probe",
            format!(
                "{option} may not edit the spreadsheet ({}); share it with that account as Editor",
                e.message
            ),
        )
    } else {
        e
    }
}

/// A zero-based row as people count it (1-based), or "none".
fn shown_row(row: Option<u32>) -> String {
    row.map_or("none".to_string(), |r| (r + 1).to_string())
}

/// What `check --probe --save FILE` writes: the sheetq version, when, and every result.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    sheetq: String,
    saved_at: String,
    results: Vec<ProbeResult>,
}

/// A report as `--save` writes it (pretty JSON).
pub fn saved_json(report: &Report) -> String {
    let saved = Saved {
        sheetq: env!("CARGO_PKG_VERSION").to_string(),
        saved_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        results: report.results.clone(),
    };
    serde_json::to_string_pretty(&saved).unwrap_or_default()
}

/// The results of a file written by `--save`.
pub fn load_saved(text: &str) -> Result<Vec<ProbeResult>, serde_json::Error> {
    serde_json::from_str::<Saved>(text).map(|s| s.results)
}
