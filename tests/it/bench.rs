//! `sheetq bench` run programmatically on a tiny set-up: the report must be complete and
//! add up. No wall-clock assertions: only counts and the relations between figures.

use std::time::Duration;

use sheetq::bench::{self, Accounts, Params, Sizes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_bench_reports_every_figure_and_they_add_up() {
    // One account per daemon, each within its own budget: the quota must refuse nothing.
    let params = Params {
        daemons: 2,
        slots: 2,
        log_chars: sheetq::joblog::DEFAULT_CHARS,
        accounts: Accounts::Each,
        jobs: 6,
        targets: 3,
        presses: 2,
        sizes: Sizes(vec![0, 50]),
        idle_polls: 3,
        poll_interval: Duration::from_millis(300),
        requests_per_minute: 40,
        press_every: Duration::ZERO,
        press_rest: Duration::ZERO,
        deadline_secs: 120,
        daemon_exe: Some(env!("CARGO_BIN_EXE_sheetq").into()),
    };
    let mut out = Vec::new();
    let report = bench::measure(params.clone(), &mut out)
        .await
        .unwrap_or_else(|e| panic!("the bench failed: {e:#}"));
    let s = &report.saturation;
    assert_eq!(
        (s.jobs, s.done, s.failed),
        (6, 6, 0),
        "every job counted once"
    );
    let retry = report.retry;
    assert_eq!(
        (retry.reads_per_retry(), retry.writes_per_retry()),
        (1.0, 0.0),
        "a retry costs the one read of its stop check and nothing else: {retry:?}"
    );
    let inputs = report.inputs;
    assert_eq!(
        (inputs.without.presses, inputs.with.presses),
        (bench::inputs::PRESSES, bench::inputs::PRESSES),
        "{inputs:?}"
    );
    assert!(
        inputs.without.polls > 0 && inputs.with.polls > 0,
        "presses are found by polls: {inputs:?}"
    );
    assert!(
        inputs.with.bytes_per_poll() > inputs.without.bytes_per_poll(),
        "the input cells ride every poll's read, as bytes: {inputs:?}"
    );
    let rollout = report.rollout;
    assert_eq!(
        (rollout.singles.jobs, rollout.rollout.jobs),
        (bench::rollout::TARGETS, bench::rollout::TARGETS),
        "every target's job ran once either way: {rollout:?}"
    );
    assert!(
        rollout.rollout.wall >= bench::rollout::RolloutCost::ideal()
            && rollout.singles.wall >= bench::rollout::RolloutCost::ideal(),
        "nothing beats ceil(20/5) job times with five at once: {rollout:?}"
    );
    assert_eq!(
        report.daemon_jobs_finished, 8,
        "the daemons ran the 6 jobs and the 2 presses, nothing twice"
    );
    assert!(s.reads_per_job() > 0.0 && s.writes_per_job() > 0.0, "{s:?}");
    assert_eq!(
        s.accounts.len(),
        2,
        "one line per account: {:?}",
        s.accounts
    );
    for a in &s.accounts {
        assert_eq!((a.refused_reads, a.refused_writes), (0, 0), "{a:?}");
        assert!(
            a.peak_reads_per_min >= 1 && a.peak_reads_per_min <= a.reads,
            "{a:?}"
        );
        // A daemon may finish none of the few jobs (the other one took them all) and write
        // nothing in the measured window: its peak is then 0, never more than its total.
        assert!(
            a.peak_writes_per_min <= a.writes && (a.writes == 0) == (a.peak_writes_per_min == 0),
            "{a:?}"
        );
    }
    assert!(
        s.accounts.iter().any(|a| a.peak_writes_per_min >= 1),
        "someone wrote the results: {:?}",
        s.accounts
    );
    assert_eq!(s.reads, s.accounts.iter().map(|a| a.reads).sum::<usize>());
    assert_eq!(s.writes, s.accounts.iter().map(|a| a.writes).sum::<usize>());
    let by_method: usize = s.methods.iter().map(|m| m.count).sum();
    assert_eq!(by_method, s.reads + s.writes, "{:?}", s.methods);
    assert!(
        s.methods
            .iter()
            .any(|m| m.method == "spreadsheets.batchUpdate" && m.write),
        "a batchUpdate counts as a write: {:?}",
        s.methods
    );
    assert!(
        report.press_refused.is_empty(),
        "{:?}",
        report.press_refused
    );
    assert_eq!(report.presses.len(), 2);
    for p in &report.presses {
        assert!(p.to_row <= p.to_running, "{p:?}");
    }
    assert_eq!(
        report.idle.iter().map(|i| i.rows).collect::<Vec<_>>(),
        [0, 50]
    );
    for i in &report.idle {
        assert_eq!(i.polls, 3, "{i:?}");
        assert!(i.requests >= i.polls, "at least one read a poll: {i:?}");
        assert!(i.bytes > 0 && i.first_bytes > 0, "{i:?}");
        // The whole process's figure sums its live threads: one that ends between two
        // samples takes its time with it, so it is not compared with the daemon's here.
        assert!(i.daemon_cpu > Duration::ZERO, "{i:?}");
        assert_eq!(i.refused, 0, "{i:?}");
        assert!(
            i.alone_rss_kib > 0,
            "the daemon run as a process of its own has a peak RSS: {i:?}"
        );
    }
    assert!(
        report.idle[1].first_bytes > report.idle[0].first_bytes,
        "start-up reads the 状態 column of the whole queue, so 50 finished rows cost bytes: {:?}",
        report.idle
    );
    assert!(s.peak_rss_kib > 0);
    assert!(
        report.busy_alone_rss_kib > 0,
        "the daemon run as a process of its own through the jobs has a peak RSS"
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains(&params.command_line()), "{text}");
    for heading in [
        "| jobs/min",
        "| reads / writes per job",
        "| tick → queue row",
        "| tick → 実行中",
        "| peak RSS (VmHWM) after the 50-row idle run",
        "| peak RSS of a daemon process alone (start-up and idle polls), 50 finished rows",
        "| peak RSS of a daemon process alone through 6 jobs (2 slots)",
        "| 50 | ",
    ] {
        assert!(text.contains(heading), "{heading:?} missing from:\n{text}");
    }
}

/// The fleet run on three spreadsheets under two accounts, briefly: every press starts,
/// each account stays within Google's 60 a minute, the quota refuses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_fleet_run_keeps_each_account_within_its_quota() {
    let params = bench::fleet::FleetParams {
        accounts: vec![2],
        quiet_every: Duration::from_secs(8),
        ..bench::fleet::FleetParams::new(
            3,
            Duration::from_secs(20),
            4,
            env!("CARGO_BIN_EXE_sheetq").into(),
        )
    };
    let mut out = Vec::new();
    let runs = bench::fleet::measure(&params, &mut out)
        .await
        .unwrap_or_else(|e| panic!("the fleet run failed: {e:#}"));
    let [run] = &runs[..] else {
        panic!("one run asked, {} made", runs.len());
    };
    assert_eq!(run.refused, 0, "{run:?}");
    assert_eq!(run.peaks.len(), 2, "two accounts made requests: {run:?}");
    for (account, reads, writes) in &run.peaks {
        assert!(
            *reads <= 60 && *writes <= 60,
            "{account}: {reads} reads and {writes} writes in its peak minute"
        );
    }
    assert!(!run.busy.is_empty() && !run.quiet.is_empty(), "{run:?}");
    assert!(
        run.jobs >= run.busy.len() + run.quiet.len(),
        "every press started a job that finished: {run:?}"
    );
    let table = bench::fleet::table(&runs);
    assert!(table.contains("| 3 × 2 |"), "{table}");
}

/// The start from cold on two spreadsheets (one busy, one quiet): `init` and `run` as
/// processes, every tick's job starts, both spreadsheets are served, Google's quota refuses
/// nothing, and the table has the run's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_of_two_spreadsheets_serves_both_and_meets_no_429() {
    let params = bench::cold::ColdParams {
        spreadsheets: 2,
        slots: 4,
        exe: env!("CARGO_BIN_EXE_sheetq").into(),
    };
    let mut out = Vec::new();
    let run = bench::cold::measure(&params, &mut out)
        .await
        .unwrap_or_else(|e| panic!("the cold run failed: {e:#}"));
    assert_eq!(run.serving.len(), 2, "both spreadsheets served: {run:?}");
    assert_eq!(
        (run.busy.len(), run.quiet.len()),
        (6, 1),
        "six ticks on the busy spreadsheet, one on the quiet one: {run:?}"
    );
    assert_eq!(run.refused_in_init + run.refused_after_start, 0, "{run:?}");
    assert!(run.peak_reads <= 60 && run.peak_writes <= 60, "{run:?}");
    let table = bench::cold::table(&run);
    assert!(table.contains("| 2 × 1, cold |"), "{table}");
}
