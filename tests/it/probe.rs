//! `check --probe` against the emulator: every probe passes on the emulator's reading of
//! Google, within one minute's quota, and leaves no sheet behind; each probe reports DIFFERS
//! when the spreadsheet behaves otherwise (the emulator switched to a behaviour that differs
//! from it, or a reply changed on the way); results saved from a real spreadsheet
//! (`tests/fixtures/google/`) agree with the emulator's.

use std::path::Path;
use std::sync::Arc;

use sheetq::emulator::{Access, Deviation, Emulator, EmulatorOptions, SortMetadata};
use sheetq::probe::{self, Others, Probe, ProbeResult, Report, Verdict};
use sheetq::sheets::auth::Credentials;
use sheetq::sheets::{
    AppendReply, BatchUpdate, BatchUpdateReply, Cell, Filter, FilterRead, FilterWrite,
    FilterWritten, MetadataEntry, MetadataLookup, Sheets, SheetsError, SpreadsheetMeta, ValueRange,
};

use crate::support::{body_of, client, client_as, daemon_config, start_with};

/// The service account of another developer project that the probes use as the file's
/// other editor (`--probe-editor`).
const OTHER_EDITOR: &str = "other@proj-b.iam.gserviceaccount.com";

/// The accounts besides sheetq's the probes act as: [`OTHER_EDITOR`], and a service account
/// of the emulator's project that the spreadsheet is shared with as a viewer.
struct Accounts {
    editor: Arc<dyn Sheets>,
    viewer: Arc<dyn Sheets>,
}

impl Accounts {
    async fn of(emu: &Emulator, config: &sheetq::config::Config) -> Accounts {
        let key = body_of(
            emu.addr().port(),
            &format!("/_emulator/credentials?account={OTHER_EDITOR}"),
        )
        .await;
        let editor = sheetq::setup::connect(config, Some(Credentials::KeyJson(key)), false)
            .await
            .unwrap_or_else(|e| panic!("the other editor connects: {e:#}"));
        emu.share(&Emulator::account("viewer"), Access::Reader);
        let viewer = client_as(emu, config, "viewer").await;
        Accounts { editor, viewer }
    }

    fn others(&self) -> Others<'_> {
        Others {
            editor: Some(self.editor.as_ref()),
            viewer: Some(self.viewer.as_ref()),
        }
    }
}

/// Runs the probes through the real Google client with a generous client-side budget: the
/// emulator's own quota (Google's: 60 reads and 60 writes a minute) is what limits them, so
/// a run that needed more than a minute's quota shows as 429s in the log.
async fn run_probes(emu: &Emulator, only: &[Probe]) -> Report {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = daemon_config(
        emu,
        "probe",
        dir.path(),
        &[("requests_per_minute", "600")],
        "",
    );
    let sheets = client(emu, &config).await;
    let accounts = Accounts::of(emu, &config).await;
    probe::run(
        sheets.as_ref(),
        accounts.others(),
        only,
        std::future::pending(),
    )
    .await
}

fn probe_sheets_left(emu: &Emulator) -> Vec<String> {
    emu.with_spreadsheet(|ss| {
        ss.sheets
            .iter()
            .map(|s| s.title.clone())
            .filter(|t| t.starts_with("_sheetq_probe_"))
            .collect()
    })
    .expect("the emulator's spreadsheet")
}

#[tokio::test]
async fn every_probe_passes_on_the_emulator_within_one_minutes_quota_and_leaves_no_sheet() {
    let emu = start_with(EmulatorOptions::default()).await;
    emu.clear_requests();
    let report = run_probes(&emu, &[]).await;
    assert!(
        report.all_pass(),
        "every probe must pass on the emulator:\n{}",
        report.table()
    );
    assert_eq!(report.results.len(), Probe::ALL.len());
    assert_eq!(
        probe_sheets_left(&emu),
        Vec::<String>::new(),
        "the probe sheet must be deleted"
    );
    let log = emu.requests();
    let writes = log.iter().filter(|r| r.write).count();
    let reads = log.len() - writes;
    eprintln!("check --probe: {reads} reads, {writes} writes");
    assert!(
        reads <= 60 && writes <= 60,
        "check --probe must fit one minute of Google's per-user quota (60 reads, 60 writes): it made {reads} reads and {writes} writes"
    );
    let viewer = Emulator::account("viewer");
    assert!(
        log.iter()
            .all(|r| r.status == 200 || r.status == 400 || (r.status == 403 && r.user == viewer)),
        "only the probes' deliberately invalid requests (and the viewer's write) may fail: {:?}",
        log.iter()
            .filter(|r| r.status != 200)
            .map(|r| (&r.method, r.status))
            .collect::<Vec<_>>()
    );
}

/// A spreadsheet whose `spreadsheets.get` leaves the protected ranges out, as a reply
/// without `sheets.protectedRanges` would: everything else is the emulator's, through the
/// real client.
struct ProtectionsUnlisted(Arc<dyn Sheets>);

#[async_trait::async_trait]
impl Sheets for ProtectionsUnlisted {
    async fn metadata(&self) -> Result<SpreadsheetMeta, SheetsError> {
        let mut meta = self.0.metadata().await?;
        for sheet in &mut meta.sheets {
            sheet.protected_ranges.clear();
        }
        Ok(meta)
    }
    async fn read(&self, ranges: &[String]) -> Result<Vec<ValueRange>, SheetsError> {
        self.0.read(ranges).await
    }
    async fn write(&self, data: &[ValueRange]) -> Result<(), SheetsError> {
        self.0.write(data).await
    }
    async fn batch_update(&self, batch: &BatchUpdate) -> Result<BatchUpdateReply, SheetsError> {
        self.0.batch_update(batch).await
    }
    async fn append(&self, range: &str, rows: &[Vec<Cell>]) -> Result<AppendReply, SheetsError> {
        self.0.append(range, rows).await
    }
    async fn read_filtered(&self, filters: &[Filter]) -> Result<Vec<FilterRead>, SheetsError> {
        self.0.read_filtered(filters).await
    }
    async fn write_filtered(
        &self,
        data: &[FilterWrite],
    ) -> Result<Vec<Option<FilterWritten>>, SheetsError> {
        self.0.write_filtered(data).await
    }
    async fn search_metadata(
        &self,
        lookup: &MetadataLookup,
    ) -> Result<Vec<MetadataEntry>, SheetsError> {
        self.0.search_metadata(lookup).await
    }
    fn account(&self) -> String {
        self.0.account()
    }
}

/// How a probe meets a spreadsheet that behaves otherwise than it checks.
enum Otherwise {
    /// The emulator switched to a behaviour of its own.
    Emulator(EmulatorOptions),
    /// The emulator as it is, its protected ranges left out of `spreadsheets.get` on the
    /// way ([`ProtectionsUnlisted`]).
    ProtectionsUnlisted,
}

/// A spreadsheet that differs from what `probe` checks.
fn deviating(probe: Probe) -> Otherwise {
    let deviation = |d| {
        Otherwise::Emulator(EmulatorOptions {
            deviation: Some(d),
            ..EmulatorOptions::default()
        })
    };
    match probe {
        Probe::FindReplaceCas => deviation(Deviation::LooseFindReplace),
        Probe::BatchAllOrNothing => deviation(Deviation::PartialBatch),
        Probe::BatchInOrderReadBack => deviation(Deviation::ReadBackBeforeRequests),
        Probe::MetadataInsertAbove | Probe::MetadataDeleteAbove | Probe::MetadataMoveRows => {
            deviation(Deviation::RowMetadataKeepsIndex)
        }
        Probe::MetadataFullWidthSort => Otherwise::Emulator(EmulatorOptions {
            sort_metadata: SortMetadata::Never,
            ..EmulatorOptions::default()
        }),
        Probe::MetadataNarrowSort => Otherwise::Emulator(EmulatorOptions {
            sort_metadata: SortMetadata::Always,
            ..EmulatorOptions::default()
        }),
        Probe::MetadataCutPaste => deviation(Deviation::CutPasteMovesMetadata),
        Probe::FilterWriteFollowsRow => deviation(Deviation::FilterWriteNullClears),
        Probe::FilterWriteMatchesNothing => deviation(Deviation::FilterMissSkipped),
        Probe::DeleteMissingMetadata => deviation(Deviation::DeleteMissingMetadataFails),
        Probe::CreateMetadataIdInUse => deviation(Deviation::DuplicateMetadataIdReplaces),
        Probe::AppendAfterBlankRow => deviation(Deviation::AppendFromTop),
        Probe::ConcurrentCas => deviation(Deviation::UnserialisedBatches),
        Probe::ProtectedOwnEditor => Otherwise::ProtectionsUnlisted,
        Probe::ProtectInsideClosed => deviation(Deviation::ProtectAnywhere),
        Probe::MetadataOtherProject => deviation(Deviation::MetadataIgnoresProtection),
        Probe::ViewerWrite => deviation(Deviation::ViewersWrite),
    }
}

#[tokio::test]
async fn each_probe_reports_differs_when_the_spreadsheet_behaves_otherwise() {
    let mut wrong = Vec::new();
    for p in Probe::ALL {
        let (emu, report) = match deviating(p) {
            Otherwise::Emulator(options) => {
                let emu = start_with(options).await;
                let report = run_probes(&emu, &[p]).await;
                (emu, report)
            }
            Otherwise::ProtectionsUnlisted => {
                let emu = start_with(EmulatorOptions::default()).await;
                let dir = tempfile::tempdir().expect("temp dir");
                let config = daemon_config(&emu, "probe", dir.path(), &[], "");
                let sheets = ProtectionsUnlisted(client(&emu, &config).await);
                let report =
                    probe::run(&sheets, Others::default(), &[p], std::future::pending()).await;
                (emu, report)
            }
        };
        let result = report.results.first();
        if result.map(|r| r.verdict) != Some(Verdict::Differs) {
            wrong.push(format!("{}: {:?}", p.name(), result));
        }
        assert_eq!(
            probe_sheets_left(&emu),
            Vec::<String>::new(),
            "{}: sheet left\n{}",
            p.name(),
            report.table()
        );
    }
    assert!(
        wrong.is_empty(),
        "these probes did not notice the emulator behaving otherwise:\n{}",
        wrong.join("\n")
    );
}

#[tokio::test]
async fn a_stopped_probe_run_still_deletes_its_sheet() {
    let emu = start_with(EmulatorOptions::default()).await;
    emu.clear_requests();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = daemon_config(
        &emu,
        "probe",
        dir.path(),
        &[("requests_per_minute", "600")],
        "",
    );
    let sheets = client(&emu, &config).await;
    let accounts = Accounts::of(&emu, &config).await;
    // Stopped (as by Ctrl-C) once the third probe has made its sheet.
    let stop = async {
        while emu.count("spreadsheets.batchUpdate") < 5 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    let report = probe::run(sheets.as_ref(), accounts.others(), &[], stop).await;
    assert!(report.interrupted, "the run must say it was stopped");
    assert!(
        report.results.len() < Probe::ALL.len(),
        "stopped early, yet {} probes ran",
        report.results.len()
    );
    assert_eq!(report.left_behind, None);
    assert_eq!(
        probe_sheets_left(&emu),
        Vec::<String>::new(),
        "the probe sheet must be deleted"
    );
    assert!(!report.all_pass(), "a stopped run is not a pass");
}

/// Results a maintainer saved with `sheetq check --probe --save` against Google.
fn saved_google_results() -> Vec<(String, Vec<ProbeResult>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/google");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut saved = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).expect("read saved probe results");
            let results = probe::load_saved(&text)
                .unwrap_or_else(|e| panic!("{} is not a saved probe run: {e}", path.display()));
            saved.push((path.display().to_string(), results));
        }
    }
    saved
}

/// Where a saved run disagrees with the emulator's: probe by probe, what each observed.
fn disagreements(emulator: &[ProbeResult], saved: &[ProbeResult]) -> Vec<String> {
    saved
        .iter()
        .filter_map(|s| {
            let e = emulator.iter().find(|e| e.probe == s.probe)?;
            // A probe not run for want of an account says nothing of either side.
            if s.verdict == Verdict::Skipped || e.verdict == Verdict::Skipped {
                return None;
            }
            (e.observed != s.observed || e.verdict != s.verdict).then(|| {
                format!(
                    "{}: Google observed {:?} ({:?}), the emulator {:?} ({:?})",
                    s.probe.name(),
                    s.observed,
                    s.verdict,
                    e.observed,
                    e.verdict
                )
            })
        })
        .collect()
}

#[tokio::test]
async fn the_emulator_agrees_with_every_probe_run_saved_from_google() {
    let emu = start_with(EmulatorOptions::default()).await;
    let report = run_probes(&emu, &[]).await;
    // The saved format round-trips, and a run agrees with itself: the comparison below can
    // only fail on a real difference.
    let text = probe::saved_json(&report);
    let again = probe::load_saved(&text).expect("a saved run loads");
    assert_eq!(disagreements(&report.results, &again), Vec::<String>::new());
    let mut altered = again.clone();
    altered[0].observed.push_str(" (altered)");
    assert_eq!(
        disagreements(&report.results, &altered).len(),
        1,
        "a changed observation must show as a disagreement"
    );
    for (file, saved) in saved_google_results() {
        let found = disagreements(&report.results, &saved);
        assert!(
            found.is_empty(),
            "{file}: Google and the emulator disagree; fix the emulator (and the design) to Google's behaviour:\n{}",
            found.join("\n")
        );
    }
}

#[tokio::test]
async fn probes_that_need_another_account_are_skipped_without_one_and_say_what_to_give() {
    let emu = start_with(EmulatorOptions::default()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = daemon_config(&emu, "probe", dir.path(), &[], "");
    let sheets = client(&emu, &config).await;
    let needing: Vec<Probe> = Probe::ALL
        .into_iter()
        .filter(|p| p.needs().is_some())
        .collect();
    assert_eq!(needing.len(), 3, "{needing:?}");
    let report = probe::run(
        sheets.as_ref(),
        Others::default(),
        &needing,
        std::future::pending(),
    )
    .await;
    assert!(
        report.results.iter().all(|r| r.verdict == Verdict::Skipped),
        "{}",
        report.table()
    );
    let table = report.table();
    for option in ["--probe-editor FILE", "--probe-viewer FILE"] {
        assert!(
            table.contains(option),
            "the table says to give {option}:\n{table}"
        );
    }
    assert!(
        report.all_pass(),
        "a skipped probe is not a failure; the table says it was skipped"
    );
}
