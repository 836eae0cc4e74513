//! One-shot commands beside a running daemon, with the real binaries: a command that must
//! wait for the account's request budget says so after two seconds (the account, Google's
//! quota, the expected wait), and the daemon's idle polls hold back while it waits, so the
//! command's requests go out first once the minute has room.

use crate::daemon::Binary;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_command_that_waits_for_the_budget_says_so_and_goes_before_idle_polls() {
    let emu = start_emulator().await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // A daemon at the production settings (polls every 2 s, 50 requests a minute), the one
    // client of the account.
    let key = place_key(&emu, dir.path());
    let config = dir.path().join("sheetq.toml");
    std::fs::write(
        &config,
        format!(
            "spreadsheet_id = \"{}\"\napi_base_url = \"{}\"\ncredentials = \"{}\"\nworker_id = \"vm-1\"\nstate_dir = \"{}\"\n",
            emu.spreadsheet_id(),
            emu.base_url(),
            key.display(),
            dir.path().join("state").display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("sheetq.log");
    let _daemon = Binary::start(&config, &log);
    wait_polls(&emu, 3).await;
    let account: serde_json::Value = serde_json::from_str(&emu.credentials_json())
        .unwrap_or_else(|e| panic!("credentials: {e}"));
    let account = account["client_email"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // Another live process of the machine (this test) spent the account's minute of reads
    // 52 s ago: they count for 62 s, so for 10 s more nobody may read.
    let record = dir.path().join("state").join("quota").join(&account);
    std::fs::create_dir_all(&record).unwrap_or_else(|e| panic!("{e}"));
    let spent_at = sheetq::sheets::ledger::now_ms() - 52_000;
    let lines: String = (0..60).map(|_| format!("{spent_at} r\n")).collect();
    std::fs::write(
        record.join(format!("{}.oneshot", std::process::id())),
        lines,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let frees_at = chrono::DateTime::from_timestamp_millis(
        i64::try_from(spent_at).unwrap_or_default() + 62_000,
    )
    .unwrap_or_default();

    // At the log level a person gets (no SHEETQ_LOG, no -q).
    let status = tokio::task::spawn_blocking({
        let config = config.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"))
                .args(["status", "--config"])
                .arg(&config)
                .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
                .env_remove("SHEETQ_LOG")
                .env_remove("RUST_LOG")
                .output()
                .unwrap_or_else(|e| panic!("run sheetq status: {e}"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&status.stderr).to_string();
    assert!(
        status.status.success(),
        "status: {stderr}\ndaemon log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("waiting for"))
        .collect();
    assert_eq!(said.len(), 1, "one line says what it waits for: {stderr}");
    for part in [
        account.as_str(),
        "request budget",
        "60 reads a minute",
        "daemons included",
        "goes out in about",
    ] {
        assert!(
            said[0].contains(part),
            "the line names {part:?}: {}",
            said[0]
        );
    }
    // Once the minute had room, the daemon (polling as fast as its budget lets it) held its
    // polls back while the command waited: none in the two seconds after, and the command's
    // requests went out.
    let polls: Vec<_> = emu
        .requests()
        .into_iter()
        .filter(|r| r.method == POLL_METHOD)
        .map(|r| r.at)
        .filter(|at| *at >= frees_at && *at < frees_at + chrono::Duration::seconds(2))
        .collect();
    assert!(
        polls.is_empty(),
        "the daemon polled at {polls:?}, right after {frees_at}, while the command waited for that moment"
    );
    assert!(
        emu.counters().quota_refused.is_empty(),
        "nobody went over Google's quota: {:?}",
        emu.counters().quota_refused
    );
}
