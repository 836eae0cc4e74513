//! Who may press, approve and stop, enforced by Google (docs/design.md §5.7), with the real
//! binary and the poll intake against the emulator: `panels sync` protects each function's
//! ▶ cell for its `allow`, one 承認 cell per approver and its ■ cell for who may stop it; a
//! person left out is refused by the emulator as by Google, a listed person's tick runs, an
//! approval names the approver whose cell it was, and a tick in a cell whose protection is
//! gone proves nothing and is refused where people see it.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use sheetq::emulator::{Emulator, Quota};
use sheetq::queue::State;

use crate::daemon::{protected_set_up, Binary};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// Fast enough to run quickly, still enforced per account as Google does.
const FAST: Quota = Quota::scaled(50);

const ALICE: &str = "alice@example.com";
const LEAD: &str = "lead@example.com";
const BOB: &str = "bob@example.com";
const MALLORY: &str = "mallory@example.com";

/// 本番反映 (row 8 of each panel): alice may press, lead and bob approve (one each), and
/// by default those three may stop. 確認 (row 9) is open to every editor.
fn catalog(dir: &Path) -> String {
    format!(
        r#"intake = "poll"

[commands.deploy]
exec = ["sh", "-c", "echo \"$SHEETQ_JOB_ID\" >> '{runs}'; echo deployed"]

[[functions]]
label = "本番反映"
command = "deploy"
allow = ["{ALICE}"]
approvers = ["{LEAD}", "{BOB}"]

[[functions]]
label = "確認"
command = "deploy"
"#,
        runs = dir.join("runs").display()
    )
}

/// Ticks `cell` of panel サーバーA as `who`: the emulator's answer (200, or Google's 400 for
/// a protected cell).
async fn tick(emu: &Emulator, who: &str, cell: &str) -> (u16, serde_json::Value) {
    person_writes(emu, who, &format!("'サーバーA'!{cell}"), json!([[true]])).await
}

/// The jobs of 本番反映 in the queue, oldest first.
fn deploys(emu: &Emulator) -> Vec<sheetq::queue::QueueRow> {
    queue_rows(emu)
        .into_iter()
        .filter(|r| r.function == "本番反映")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_listed_people_can_tick_and_each_tick_counts_as_exactly_theirs() {
    let emu = start_with_quota(FAST).await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (config, _, sheets) =
        protected_set_up(&emu, dir.path(), "vm-guards", &catalog(dir.path())).await;
    let log = dir.path().join("sheetq.log");
    let queue_and_log = queue_and_log(&emu, &log);
    let show = || {
        format!(
            "panel row 8: {:?}\n{}",
            panel_row(&emu, "サーバーA", 8),
            queue_and_log()
        )
    };
    let _daemon = Binary::start(&config, &log);

    // ▶: Google refuses everyone but alice (and the owner).
    let (status, reply) = tick(&emu, MALLORY, "A8").await;
    assert_eq!(
        status, 400,
        "mallory is not in allow, so the ▶ cell is closed to her: {reply}"
    );
    assert!(
        reply.to_string().contains("protected cell"),
        "Google's own refusal: {reply}"
    );
    // The same through the web view, with its person picker set to mallory.
    let panel_a = sheets
        .metadata()
        .await
        .ok()
        .and_then(|m| m.sheet("サーバーA").map(|s| s.sheet_id))
        .unwrap_or_else(|| panic!("the emulator's spreadsheet has panel サーバーA"));
    let web_tick = json!({ "requests": [{ "updateCells": {
        "range": { "sheetId": panel_a, "startRowIndex": 7, "endRowIndex": 8,
                   "startColumnIndex": 0, "endColumnIndex": 1 },
        "rows": [{ "values": [{ "userEnteredValue": { "boolValue": true } }] }],
        "fields": "userEnteredValue" } }] });
    let (status, reply) = raw(
        &emu,
        "POST",
        &format!("/_emulator/web/edit?as={MALLORY}"),
        Some(web_tick),
        None,
    )
    .await;
    assert_eq!(
        status, 400,
        "the web view refuses mallory's tick as Google's UI does: {reply}"
    );
    let (status, reply) = tick(&emu, ALICE, "A8").await;
    assert_eq!(status, 200, "alice may press: {reply}");
    let job = wait_for(
        "alice's press to wait for approval",
        WAIT,
        || {
            deploys(&emu)
                .into_iter()
                .find(|r| r.state.is(State::AwaitingApproval))
        },
        &show,
    )
    .await;
    assert_eq!(
        job.requester, "保護された▶: alice@example.com",
        "the row says who Google let press, and nothing it did not vouch for"
    );

    // 承認: lead's cell (K8) is lead's alone, bob's (L8) bob's alone.
    for (who, cell) in [(MALLORY, "K8"), (BOB, "K8"), (MALLORY, "L8"), (ALICE, "L8")] {
        let (status, reply) = tick(&emu, who, cell).await;
        assert_eq!(status, 400, "{who} may not tick {cell}: {reply}");
    }
    let (status, reply) = tick(&emu, BOB, "L8").await;
    assert_eq!(status, 200, "bob ticks his own cell: {reply}");
    let rows = wait_ended_with_messages(&emu, &[job.job_id.as_str()], WAIT, &show).await;
    let done = row_of(&rows, &job.job_id);
    assert!(
        done.state.is(State::Done) && done.message.contains("deployed"),
        "one approval of bob's ran it: {}",
        show()
    );
    let approvals: Vec<&str> = done.approvals.lines().collect();
    assert!(
        approvals.len() == 1
            && approvals[0].starts_with("bob@example.com ")
            && approvals[0].ends_with(&format!("#{}", job.job_id)),
        "the approval names bob, once: {:?}",
        done.approvals
    );
    assert_eq!(lines_in(&dir.path().join("runs")), 1, "it ran once");

    // ■: a non-permitted stop is refused by Google; one of the function's people stops it.
    let (status, _) = tick(&emu, ALICE, "A8").await;
    assert_eq!(status, 200);
    let second = wait_for(
        "a second press to wait for approval",
        WAIT,
        || {
            deploys(&emu)
                .into_iter()
                .find(|r| r.job_id != job.job_id && r.state.is(State::AwaitingApproval))
        },
        &show,
    )
    .await;
    let (status, reply) = tick(&emu, MALLORY, "F8").await;
    assert_eq!(status, 400, "mallory may not stop a deploy: {reply}");
    let (status, reply) = tick(&emu, LEAD, "F8").await;
    assert_eq!(status, 200, "an approver may: {reply}");
    let rows = wait_ended_with_messages(&emu, &[second.job_id.as_str()], WAIT, &show).await;
    assert!(
        row_of(&rows, &second.job_id).started_at.is_none()
            && !row_of(&rows, &second.job_id).state.is(State::Done),
        "the stopped job never ran: {}",
        show()
    );

    // The open function stays open to every editor.
    let (status, reply) = tick(&emu, MALLORY, "A9").await;
    assert_eq!(
        status, 200,
        "確認 names nobody, so anyone may press it: {reply}"
    );
    wait_for(
        "mallory's press of 確認 to run",
        WAIT,
        || {
            queue_rows(&emu)
                .into_iter()
                .find(|r| r.function == "確認" && r.state.is(State::Done))
        },
        &show,
    )
    .await;

    // A ▶ cell whose protection is gone proves nothing: the tick is refused on the panel.
    let meta = sheets
        .metadata()
        .await
        .unwrap_or_else(|e| panic!("metadata: {e}"));
    let a8 = meta
        .sheet("サーバーA")
        .and_then(|s| {
            s.protected_ranges.iter().find(|p| {
                p.area.start_row == 7 && p.area.start_col == 0 && p.area.end_col == Some(1)
            })
        })
        .map(|p| p.id)
        .unwrap_or_else(|| panic!("panels sync protected A8: {meta:#?}"));
    let (status, reply) = person_batch(
        &emu,
        &emu.owner(),
        json!([{ "deleteProtectedRange": { "protectedRangeId": a8 } }]),
    )
    .await;
    assert_eq!(status, 200, "the owner removes the protection: {reply}");
    let (status, _) = tick(&emu, MALLORY, "A8").await;
    assert_eq!(status, 200, "now anyone may tick A8");
    wait_for(
        "the unguarded press to be refused on the panel",
        WAIT,
        || {
            panel_row(&emu, "サーバーA", 8)
                .iter()
                .any(|c| c.contains("保護されていない"))
                .then_some(())
        },
        || format!("{:?}\n{}", panel_row(&emu, "サーバーA", 8), show()),
    )
    .await;
    assert_eq!(
        deploys(&emu).len(),
        2,
        "no row for mallory's press: {}",
        show()
    );
    assert!(
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("the cell is not protected for exactly them"),
        "the log says why: {}",
        show()
    );
    assert_eq!(
        lines_in(&dir.path().join("runs")),
        2,
        "the first deploy and 確認 ran, the refused press did not: {}",
        show()
    );
    assert_no_quota_refusals(&emu);
}
