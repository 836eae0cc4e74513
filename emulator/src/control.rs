//! Fault injection and accounting: the programmable fault plan, the per-minute quota (its
//! limits and windows; the counting rules are in `quota.rs`), and the request log with its
//! counters, including the requests the quota refused.
//! Tests reach it through the `Emulator` handle, people through `/_emulator/...`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::quota::{Exceeded, Kind, Quota, QuotaState};

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
    /// Close the connection without a reply at once, and apply the request this much later
    /// (Google may apply a request for up to its 180 s limit after the client gave up on
    /// it): a reply that never came proves nothing. JSON: `{"apply_later": 3000}`.
    #[serde(with = "millis")]
    ApplyLater(Duration),
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
    /// Fire only for requests of this user (a service account's e-mail): a network
    /// partition that cuts one daemon off while the others go on. `None`: any user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Fire only for requests whose body contains this text (e.g. a claim commit's
    /// `"replacement":"実行中"`, to catch that one batch among a daemon's). `None`: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_contains: Option<String>,
}

impl FaultRule {
    /// Whether the rule cuts the network for everyone: a dropped connection, whoever asks.
    fn is_network(&self) -> bool {
        self.user.is_none() && self.fault == Fault::Drop
    }

    /// A rule firing for the next `n` requests of `method` (`None`: any API method).
    pub fn next(method: Option<&str>, fault: Fault, n: u32) -> Self {
        FaultRule {
            method: method.map(str::to_string),
            fault,
            remaining: Some(n),
            probability: None,
            user: None,
            body_contains: None,
        }
    }

    /// A rule firing for every API request until it is removed: Google is down for everyone.
    pub fn always(fault: Fault) -> Self {
        FaultRule {
            method: None,
            fault,
            remaining: None,
            probability: None,
            user: None,
            body_contains: None,
        }
    }

    /// A rule firing for every request of `user` (a service account's e-mail) until it is
    /// removed: that user is cut off from the API.
    pub fn cut_off(user: &str, fault: Fault) -> Self {
        FaultRule {
            method: None,
            fault,
            remaining: None,
            probability: None,
            user: Some(user.to_string()),
            body_contains: None,
        }
    }
}

/// One request as the emulator saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// API method id, e.g. `spreadsheets.values.batchGet`, `spreadsheets.batchUpdate`,
    /// `spreadsheets.values.append`, `spreadsheets.get`, `oauth2.token`.
    pub method: String,
    /// The spreadsheet the request was about (empty for `spreadsheets.create`, a token, or
    /// an edit in the web view).
    #[serde(default)]
    pub spreadsheet: String,
    /// The A1 ranges the request named (path range, `ranges` parameters, `data[].range`,
    /// `responseRanges`); the scopes asked for, for `oauth2.token`.
    pub ranges: Vec<String>,
    /// The user (service account email) the request was made as; empty when it carried no
    /// valid token, and for `oauth2.token`.
    #[serde(default)]
    pub user: String,
    /// Whether Google counts it against the write quota (a `spreadsheets.batchUpdate` is a
    /// write even when it only reads back).
    #[serde(default)]
    pub write: bool,
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
    /// Requests the quota refused with 429, by user (service account). Injected 429 faults
    /// are not counted here.
    #[serde(default)]
    pub quota_refused: BTreeMap<String, Refused>,
}

impl RequestCounters {
    /// Every request the quota refused, all users, reads and writes.
    pub fn quota_refused_total(&self) -> u64 {
        self.quota_refused.values().map(|r| r.read + r.write).sum()
    }
}

/// Requests of one user refused by the quota.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub read: u64,
    pub write: u64,
}

/// How many requests the log keeps (it drops the oldest half once it holds twice as many).
pub const LOG_KEEP: usize = 100_000;

/// The mutable control state, behind one lock in the server.
#[derive(Debug, Default)]
pub struct Control {
    pub faults: Vec<FaultRule>,
    pub log: Vec<RequestRecord>,
    pub counters: RequestCounters,
    /// The enforced quota; `None`: no limits.
    quota: Option<Quota>,
    windows: QuotaState,
}

impl Control {
    /// The fault that fires for this request, if any, consuming one use of its rule.
    pub fn fault_for(&mut self, method: &str, user: Option<&str>, body: &[u8]) -> Option<Fault> {
        self.fire(method, user, body, |rule| !rule.is_network())
    }

    /// The fault of a rule that cuts the network for everyone (a [`Fault::Drop`] without a
    /// user): it fires before the request is looked at, its token included, as a server
    /// that is down or restarting answers no one.
    pub fn network_fault_for(&mut self, method: &str, body: &[u8]) -> Option<Fault> {
        self.fire(method, None, body, FaultRule::is_network)
    }

    fn fire(
        &mut self,
        method: &str,
        user: Option<&str>,
        body: &[u8],
        stage: impl Fn(&FaultRule) -> bool,
    ) -> Option<Fault> {
        let mut rng = rand::thread_rng();
        for i in 0..self.faults.len() {
            let rule = &mut self.faults[i];
            let matches = stage(rule)
                && match &rule.method {
                    Some(m) => m == method,
                    None => method != "oauth2.token",
                }
                && rule.user.as_deref().is_none_or(|u| Some(u) == user)
                && rule
                    .body_contains
                    .as_deref()
                    .is_none_or(|text| String::from_utf8_lossy(body).contains(text));
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

    /// A control state enforcing `quota`.
    pub fn with_quota(quota: Option<Quota>) -> Self {
        Control {
            quota,
            ..Control::default()
        }
    }

    /// Counts one Sheets API request of `user` against the quota at `now`, or refuses it
    /// (counting the refusal, not the request) with the limit it exceeded.
    pub fn take_quota(&mut self, user: &str, write: bool, now: Instant) -> Result<(), Exceeded> {
        let Some(quota) = self.quota else {
            return Ok(());
        };
        let kind = Kind::of(write);
        self.windows.take(&quota, user, kind, now).inspect_err(|_| {
            let r = self
                .counters
                .quota_refused
                .entry(user.to_string())
                .or_default();
            match kind {
                Kind::Read => r.read += 1,
                Kind::Write => r.write += 1,
            }
        })
    }

    pub fn quota(&self) -> Option<Quota> {
        self.quota
    }

    /// Sets the limits (`None`: off). The windows start empty: what was counted under the
    /// old limits is forgotten.
    pub fn set_quota(&mut self, quota: Option<Quota>) {
        self.quota = quota;
        self.windows = QuotaState::default();
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
        // A long-running emulator (`demo --keep`, a web view left open) keeps the newest
        // requests only; the counters keep counting all of them.
        if self.log.len() > 2 * LOG_KEEP {
            self.log.drain(..self.log.len() - LOG_KEEP);
        }
    }

    /// Clears the log, counters, faults and the quota's windows; the limits stay.
    pub fn reset(&mut self) {
        *self = Control::with_quota(self.quota);
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
        assert_eq!(c.fault_for("spreadsheets.get", None, b""), None);
        assert_eq!(
            c.fault_for("spreadsheets.batchUpdate", None, b""),
            Some(Fault::Status(503))
        );
        assert_eq!(
            c.fault_for("spreadsheets.batchUpdate", None, b""),
            Some(Fault::Status(503))
        );
        assert_eq!(
            c.fault_for("spreadsheets.batchUpdate", None, b""),
            None,
            "rule must expire after 2"
        );
        c.faults.push(FaultRule::next(None, Fault::Drop, 1));
        assert_eq!(
            c.fault_for("oauth2.token", None, b""),
            None,
            "None must not match the token endpoint"
        );
    }

    #[test]
    fn a_rule_for_one_user_cuts_off_that_user_only() {
        let mut c = Control::default();
        c.faults
            .push(FaultRule::cut_off("a1@example.com", Fault::Status(503)));
        let get = "spreadsheets.values.batchGet";
        assert_eq!(c.fault_for(get, Some("a2@example.com"), b""), None);
        assert_eq!(
            c.fault_for(get, Some("a1@example.com"), b""),
            Some(Fault::Status(503))
        );
        assert_eq!(
            c.fault_for(get, Some("a1@example.com"), b""),
            Some(Fault::Status(503)),
            "until the rule is removed"
        );
    }

    #[test]
    fn refusals_are_counted_per_user_and_kind_and_quota_off_refuses_nothing() {
        let mut c = Control::with_quota(Some(Quota::per_user(1, 1)));
        let t = Instant::now();
        assert!(c.take_quota("a", false, t).is_ok());
        assert!(c.take_quota("a", false, t).is_err());
        assert!(c.take_quota("a", false, t).is_err());
        assert!(c.take_quota("a", true, t).is_ok());
        assert!(c.take_quota("a", true, t).is_err());
        assert_eq!(
            c.counters.quota_refused.get("a"),
            Some(&Refused { read: 2, write: 1 })
        );
        assert_eq!(c.counters.quota_refused_total(), 3);
        c.reset();
        assert_eq!(c.quota(), Some(Quota::per_user(1, 1)), "reset keeps limits");
        assert!(c.take_quota("a", false, t).is_ok(), "reset empties windows");
        c.set_quota(None);
        for _ in 0..1000 {
            assert!(c.take_quota("a", false, t).is_ok());
        }
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
