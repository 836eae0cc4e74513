//! Fault injection and accounting: the programmable fault plan, the per-minute request
//! budget that answers 429 like Google's quota, and the request log with its counters.
//! Tests reach it through the `Emulator` handle, people through `/_emulator/...`.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// What an injected fault does to a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Answer with this status and Google's body for it (429 `RESOURCE_EXHAUSTED` with the
    /// quota message, 500 `INTERNAL`, 503 `UNAVAILABLE`, ...); the request is not applied.
    Status(u16),
    /// Close the connection without a reply; the request is not applied.
    Drop,
    /// Apply the request, then close the connection without a reply: the client cannot tell
    /// whether its write happened (the case a retrying writer must survive).
    DropAfterApply,
    /// Delay the request, then handle it normally. JSON: `{"latency": 250}` (milliseconds).
    #[serde(with = "millis")]
    Latency(Duration),
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// One rule of the fault plan. Rules are tried in order; the first that fires decides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRule {
    /// API method id it applies to (`spreadsheets.batchUpdate`,
    /// `spreadsheets.values.batchGet`, `oauth2.token`, ...). `None` matches every Sheets
    /// API method but not the token endpoint.
    #[serde(default)]
    pub method: Option<String>,
    pub fault: Fault,
    /// Fire for this many matching requests, then the rule is removed. `None`: forever.
    #[serde(default)]
    pub remaining: Option<u32>,
    /// Fire for this fraction of matching requests (0.0–1.0). `None`: always.
    #[serde(default)]
    pub probability: Option<f64>,
}

impl FaultRule {
    /// A rule firing for the next `n` requests of `method` (`None`: any API method).
    pub fn next(method: Option<&str>, fault: Fault, n: u32) -> Self {
        FaultRule {
            method: method.map(str::to_string),
            fault,
            remaining: Some(n),
            probability: None,
        }
    }
}

/// One request as the emulator saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// API method id, e.g. `spreadsheets.values.batchGet`, `spreadsheets.batchUpdate`,
    /// `spreadsheets.values.append`, `spreadsheets.get`, `oauth2.token`.
    pub method: String,
    /// The A1 ranges the request named (path range, `ranges` parameters, `data[].range`,
    /// `responseRanges`); the scopes asked for, for `oauth2.token`.
    pub ranges: Vec<String>,
    /// HTTP status answered; 0 when the connection was dropped without a reply.
    pub status: u16,
    pub bytes_in: usize,
    pub bytes_out: usize,
    pub at: DateTime<Utc>,
}

/// Totals over the request log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestCounters {
    pub total: u64,
    pub by_method: BTreeMap<String, u64>,
    /// Requests answered with a status ≥ 400 or dropped.
    pub errors: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// The mutable control state, behind one lock in the server.
#[derive(Debug, Default)]
pub struct Control {
    pub faults: Vec<FaultRule>,
    pub log: Vec<RequestRecord>,
    pub counters: RequestCounters,
    pub budget_per_minute: Option<u32>,
    window: VecDeque<Instant>,
}

impl Control {
    /// The fault that fires for this request, if any, consuming one use of its rule.
    pub fn fault_for(&mut self, method: &str) -> Option<Fault> {
        let mut rng = rand::thread_rng();
        for i in 0..self.faults.len() {
            let rule = &mut self.faults[i];
            let matches = match &rule.method {
                Some(m) => m == method,
                None => method != "oauth2.token",
            };
            if !matches {
                continue;
            }
            if let Some(p) = rule.probability {
                if rng.gen::<f64>() >= p {
                    continue;
                }
            }
            let fault = rule.fault.clone();
            if let Some(n) = rule.remaining.as_mut() {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.faults.remove(i);
                }
            }
            return Some(fault);
        }
        None
    }

    /// Whether one more API request fits the per-minute budget; if it does, it is counted.
    /// The window slides over the last 60 seconds; refused requests do not count.
    pub fn take_budget(&mut self, now: Instant) -> bool {
        let Some(limit) = self.budget_per_minute else {
            return true;
        };
        while self
            .window
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            self.window.pop_front();
        }
        if self.window.len() as u64 >= u64::from(limit) {
            return false;
        }
        self.window.push_back(now);
        true
    }

    pub fn set_budget(&mut self, per_minute: Option<u32>) {
        self.budget_per_minute = per_minute;
        self.window.clear();
    }

    pub fn record(&mut self, r: RequestRecord) {
        let c = &mut self.counters;
        c.total += 1;
        *c.by_method.entry(r.method.clone()).or_default() += 1;
        if r.status == 0 || r.status >= 400 {
            c.errors += 1;
        }
        c.bytes_in += r.bytes_in as u64;
        c.bytes_out += r.bytes_out as u64;
        self.log.push(r);
    }

    /// Clears the log, counters, faults and budget.
    pub fn reset(&mut self) {
        *self = Control::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_rules_expire_and_methods_filter() {
        let mut c = Control::default();
        c.faults.push(FaultRule::next(
            Some("spreadsheets.batchUpdate"),
            Fault::Status(503),
            2,
        ));
        assert_eq!(c.fault_for("spreadsheets.get"), None);
        assert_eq!(
            c.fault_for("spreadsheets.batchUpdate"),
            Some(Fault::Status(503))
        );
        assert_eq!(
            c.fault_for("spreadsheets.batchUpdate"),
            Some(Fault::Status(503))
        );
        assert_eq!(
            c.fault_for("spreadsheets.batchUpdate"),
            None,
            "rule must expire after 2"
        );
        c.faults.push(FaultRule::next(None, Fault::Drop, 1));
        assert_eq!(
            c.fault_for("oauth2.token"),
            None,
            "None must not match the token endpoint"
        );
    }

    #[test]
    fn budget_slides_over_a_minute() {
        let mut c = Control::default();
        c.set_budget(Some(2));
        let t0 = Instant::now();
        assert!(c.take_budget(t0));
        assert!(c.take_budget(t0));
        assert!(!c.take_budget(t0 + Duration::from_secs(59)));
        assert!(c.take_budget(t0 + Duration::from_secs(60)));
    }

    #[test]
    fn fault_json_shape() {
        let rule: FaultRule = serde_json::from_str(
            r#"{"method":"spreadsheets.values.batchGet","fault":{"latency":250},"remaining":1}"#,
        )
        .unwrap_or_else(|e| panic!("parse: {e}"));
        assert_eq!(rule.fault, Fault::Latency(Duration::from_millis(250)));
        let drop: Fault = serde_json::from_str(r#""drop""#).unwrap_or(Fault::Status(0));
        assert_eq!(drop, Fault::Drop);
    }
}
