//! The figures both benchmarks take and print: a process's peak RSS, the busiest minute of
//! a request log, percentiles, and how durations and sizes are written in the tables.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// A process's peak resident set size (`VmHWM`) in KiB; 0 where unknown.
pub fn rss_of(pid: u32) -> u64 {
    vm_hwm(&format!("/proc/{pid}/status"))
}

/// `VmHWM` in KiB from a `/proc/*/status` file; 0 where unknown.
pub fn vm_hwm(status: &str) -> u64 {
    std::fs::read_to_string(status)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The most times in any window of 60 s (`times` in log order, which is time order).
pub fn peak_per_minute(times: &[DateTime<Utc>]) -> usize {
    let window = chrono::Duration::seconds(60);
    let mut best = 0;
    let mut start = 0;
    for (end, t) in times.iter().enumerate() {
        while *t - times[start] >= window {
            start += 1;
        }
        best = best.max(end + 1 - start);
    }
    best
}

/// `user`'s busiest minute in `log`: its reads or writes (`write`) in any 60 s, the ones
/// the quota refused left out.
pub fn peak_of(log: &[crate::emulator::RequestRecord], user: &str, write: bool) -> usize {
    let times: Vec<_> = (log.iter())
        .filter(|r| r.user == user && r.write == write && r.status != 429)
        .map(|r| r.at)
        .collect();
    peak_per_minute(&times)
}

/// The nearest-rank percentile `p` (0–100) of `values`.
pub fn percentile(values: &[Duration], p: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// A latency cell of the tables: `p50 / p95 (how many)`.
pub fn p50_p95(values: &[Duration]) -> String {
    format!(
        "{} / {} ({})",
        secs(percentile(values, 50.0)),
        secs(percentile(values, 95.0)),
        values.len()
    )
}

pub fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub fn mib(kib: u64) -> String {
    format!("{:.0} MiB", kib as f64 / 1024.0)
}
