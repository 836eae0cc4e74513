//! `[[schedules]]` end to end (docs/design.md §5.4): the real binary and the emulator under
//! libfaketime, their wall clocks set a few seconds before an occurrence, so that it falls
//! due while the test watches: two daemons racing on one occurrence queue one row; the night
//! daylight saving falls back runs a repeated wall time once; a daemon restarted inside
//! `catch_up` runs the missed occurrence once. Needs libfaketime, so `cargo test` leaves them
//! out and `.ci/run` runs them (`cargo test --test it schedules:: -- --ignored`).

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};

use crate::support::*;

const FUNCTION: &str = "動作確認 (2秒)";
const ZONE: &str = "America/New_York";
const ID: &str = "scheduled-sheet";

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .single()
        .unwrap_or_else(|| panic!("a UTC instant"))
}

/// The processes of one test: every clock `offset` seconds ahead, as if now were the
/// instant the test names.
struct Night {
    lib: PathBuf,
    offset: i64,
    port: u16,
    key: PathBuf,
    dir: tempfile::TempDir,
    _emulator: Child,
}

impl Night {
    /// The emulator with its clock set so that it is `at` now.
    async fn at(at: DateTime<Utc>) -> Night {
        let Some(lib) = faketime_library() else {
            panic!("libfaketime is not installed: apt-get install libfaketime (.ci/run does)");
        };
        let offset = (at - Utc::now()).num_seconds();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (emulator, port) = start_faked_emulator(&lib, offset, ID, ZONE, dir.path()).await;
        let key = emulator_key(port, "daemons", dir.path()).await;
        Night {
            lib,
            offset,
            port,
            key,
            dir,
            _emulator: emulator,
        }
    }

    fn runs(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    /// A daemon `worker` whose clock reads `shift` seconds after the others', with a
    /// schedule at `cron` (and `extra` in its entry).
    fn daemon(&self, worker: &str, shift: i64, cron: &str, extra: &str) -> Child {
        let config = self.dir.path().join(format!("{worker}.toml"));
        let text = format!(
            "spreadsheet_id = \"{ID}\"\napi_base_url = \"http://127.0.0.1:{port}/\"\n\
             credentials = \"{key}\"\nworker_id = \"{worker}\"\nstate_dir = \"{state}\"\n\
             poll_interval = \"3s\"\nidle_poll_interval = \"3s\"\nheartbeat_interval = \"3s\"\n\
             dead_after = \"20s\"\nlease_ttl = \"10s\"\n\
             [commands.record]\nexec = [\"/bin/sh\", \"-c\", \"echo \\\"$1\\\" >> {runs}\", \"sh\", \"{{job_id}}\"]\n\
             [[functions]]\nlabel = \"{FUNCTION}\"\ncommand = \"record\"\n\
             [[schedules]]\nname = \"nightly\"\ncron = \"{cron}\"\ntarget = \"サーバーA\"\n\
             function = \"{FUNCTION}\"\n{extra}\n",
            port = self.port,
            key = self.key.display(),
            state = self.dir.path().join(worker).display(),
            runs = self.runs().display(),
        );
        std::fs::write(&config, text).unwrap_or_else(|e| panic!("{e}"));
        let out = std::fs::File::create(self.dir.path().join(format!("{worker}.log")))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sheetq"));
        cmd.arg("run").arg("--config").arg(&config);
        fake_clock(&mut cmd, &self.lib, self.offset + shift, ZONE);
        Child(
            cmd.stdout(out.try_clone().unwrap_or_else(|e| panic!("{e}")))
                .stderr(out)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start sheetq: {e}")),
        )
    }

    /// A sheet's rows as text, as the emulator's web view shows them.
    async fn sheet(&self, title: &str) -> Vec<Vec<String>> {
        let port = self.port;
        let view = |sheet: Option<i64>| async move {
            let sheet = sheet.map(|s| format!("&sheet={s}")).unwrap_or_default();
            body_of(
                port,
                &format!("/_emulator/web/view?spreadsheet={ID}{sheet}"),
            )
            .await
        };
        let tabs: serde_json::Value = serde_json::from_str(&view(None).await).unwrap_or_default();
        let Some(id) = tabs["tabs"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["title"] == title))
            .and_then(|t| t["id"].as_i64())
        else {
            return Vec::new();
        };
        let body: serde_json::Value =
            serde_json::from_str(&view(Some(id)).await).unwrap_or_default();
        let text = |cell: &serde_json::Value| cell["t"].as_str().unwrap_or_default().to_string();
        body["sheet"]["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| {
                        r.as_array()
                            .map(|c| c.iter().map(text).collect())
                            .unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The queue's rows (jobId, 依頼者, 状態).
    async fn queue(&self) -> Vec<Row> {
        let rows = self.sheet("_ジョブキュー").await;
        let Some((header, rows)) = rows.split_first() else {
            return Vec::new();
        };
        let at = |name: &str| header.iter().position(|h| h == name);
        let (Some(job), Some(who), Some(state)) = (at("jobId"), at("依頼者"), at("状態"))
        else {
            return Vec::new();
        };
        let cell = |r: &Vec<String>, i: usize| r.get(i).cloned().unwrap_or_default();
        rows.iter()
            .filter(|r| !cell(r, job).is_empty())
            .map(|r| Row {
                job_id: cell(r, job),
                requester: cell(r, who),
                state: cell(r, state),
            })
            .collect()
    }

    /// The 状態 the panel of サーバーA shows on the row of [`FUNCTION`].
    async fn panel_status(&self) -> String {
        self.sheet("サーバーA")
            .await
            .into_iter()
            .find(|r| r.get(1).map(String::as_str) == Some(FUNCTION))
            .and_then(|r| r.get(2).cloned())
            .unwrap_or_default()
    }

    fn describe(&self, rows: &[Row]) -> String {
        let logs: String = ["a", "b", "again"]
            .iter()
            .map(|w| {
                format!(
                    "--- {w}:\n{}\n",
                    std::fs::read_to_string(self.dir.path().join(format!("{w}.log")))
                        .unwrap_or_default()
                )
            })
            .collect();
        format!(
            "{rows:#?}\nruns: {:?}\n{logs}",
            std::fs::read_to_string(self.runs()).unwrap_or_default()
        )
    }

    /// Waits until the scheduled job has run, and `settle` longer; returns the rows of
    /// scheduled jobs and the runs.
    async fn after_runs(&self, settle: Duration) -> (Vec<Row>, Vec<String>) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let rows = self.queue().await;
            let done = rows
                .iter()
                .any(|r| r.requester == "schedule:nightly" && is_final(&r.state));
            if done {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the scheduled job did not run:\n{}",
                self.describe(&rows)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(settle).await;
        let rows: Vec<Row> = self
            .queue()
            .await
            .into_iter()
            .filter(|r| r.requester.starts_with("schedule:"))
            .collect();
        let runs = std::fs::read_to_string(self.runs())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        (rows, runs)
    }
}

/// A queue row as the test reads it.
#[derive(Debug, Clone)]
struct Row {
    job_id: String,
    requester: String,
    state: String,
}

fn is_final(state: &str) -> bool {
    ["完了", "エラー", "タイムアウト", "キャンセル"].contains(&state)
}

fn assert_once(night: &Night, rows: &[Row], runs: &[String], at: DateTime<Utc>) {
    let job = sheetq::schedule::occurrence_job_id(ID, "nightly", at);
    assert_eq!(
        rows.iter().map(|r| r.job_id.as_str()).collect::<Vec<_>>(),
        [job.as_str()],
        "one row, the occurrence's own jobId:\n{}",
        night.describe(rows)
    );
    assert_eq!(rows[0].state, "完了", "{}", night.describe(rows));
    assert_eq!(runs, [job], "one run:\n{}", night.describe(rows));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime; .ci/run installs it and runs this"]
async fn two_daemons_racing_on_one_occurrence_queue_one_row_and_run_it_once() {
    // 01:30 in New York on an ordinary night; the second daemon's clock is 2 s ahead.
    let at = utc(2026, 12, 5, 6, 30, 0);
    let night = Night::at(at - chrono::TimeDelta::seconds(8)).await;
    let _a = night.daemon("a", 0, "30 1 * * *", "");
    let _b = night.daemon("b", 2, "30 1 * * *", "");
    let (rows, runs) = night.after_runs(Duration::from_secs(4)).await;
    assert_once(&night, &rows, &runs, at);
    let status = night.panel_status().await;
    assert!(
        status.starts_with("✅ 完了 12/05 01:30") && status.ends_with(" · 次回 12/06 01:30"),
        "the panel shows the result and the next run: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime; .ci/run installs it and runs this"]
async fn the_wall_time_repeated_when_daylight_saving_falls_back_runs_once() {
    // 2026-11-01 in New York: 01:30 EDT is 05:30Z, and 01:30 EST (06:30Z) repeats it.
    let first = utc(2026, 11, 1, 5, 30, 0);
    let night = Night::at(first - chrono::TimeDelta::seconds(8)).await;
    let a = night.daemon("a", 0, "30 1 * * *", "");
    let (rows, runs) = night.after_runs(Duration::ZERO).await;
    assert_once(&night, &rows, &runs, first);
    drop(a);
    // An hour later, a daemon (catching up two hours, so it looks back at 05:30Z too) sees
    // 01:30 come round again on the wall clock: it queues nothing.
    let again = night.daemon("again", 3600 - 2, "30 1 * * *", "catch_up = \"2h\"");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (rows, runs) = night.after_runs(Duration::ZERO).await;
    drop(again);
    assert_once(&night, &rows, &runs, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime; .ci/run installs it and runs this"]
async fn a_daemon_restarted_inside_catch_up_runs_the_missed_occurrence_once() {
    // No daemon ran at 01:30; one starts at 01:31 with catch_up = "1h", is killed once the
    // job ran, and starts again.
    let at = utc(2026, 12, 5, 6, 30, 0);
    let night = Night::at(at + chrono::TimeDelta::seconds(60)).await;
    let a = night.daemon("a", 0, "30 1 * * *", "catch_up = \"1h\"");
    let (rows, runs) = night.after_runs(Duration::ZERO).await;
    assert_once(&night, &rows, &runs, at);
    drop(a);
    let _again = night.daemon("again", 0, "30 1 * * *", "catch_up = \"1h\"");
    let (rows, runs) = night.after_runs(Duration::from_secs(5)).await;
    assert_once(&night, &rows, &runs, at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime; .ci/run installs it and runs this"]
async fn without_catch_up_a_daemon_started_after_an_occurrence_does_not_queue_it() {
    // The daemon starts at 01:30:40: 01:30 fell due while none ran.
    let at = utc(2026, 12, 5, 6, 30, 0);
    let night = Night::at(at + chrono::TimeDelta::seconds(40)).await;
    let _a = night.daemon("a", 0, "30 1 * * *", "");
    // Long enough for several polls and a claim pass, were it to queue the occurrence.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let rows = night.queue().await;
    assert!(
        rows.iter().all(|r| !r.requester.starts_with("schedule:")),
        "nothing queued:\n{}",
        night.describe(&rows)
    );
}
