//! The sheet-side lease (docs/design.md §3): the `_ワーカー!B1` cell, its value format, and the
//! compare-and-swap requests that take and release it.
//!
//! The Sheets API has no conditional write, but a `spreadsheets.batchUpdate` is applied
//! atomically and a `findReplace` limited to one cell with `matchEntireCell` and `matchCase`
//! changes it only if it still holds exactly the expected text; its reply says whether it
//! did. That is a compare-and-swap, and this module only builds such requests and reads the
//! cell. Taking the lease, deciding and committing happen in the daemon's claim pass.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::sheets::{GridRange, Request};

/// Title of the hidden coordination sheet.
pub const WORKER_SHEET: &str = "_ワーカー";
/// The lease cell, A1 notation within [`WORKER_SHEET`].
pub const LEASE_CELL: &str = "B1";
/// The value of a lease nobody holds.
pub const FREE: &str = "free";

/// What the lease cell says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    Free,
    Held(Lease),
    /// Empty or unreadable text: not a lease sheetq wrote. `sheetq init` (or the daemon, with
    /// a warning) resets it to `free`.
    Invalid(String),
}

/// A held lease: `lease|<daemon-id>|<nonce>|<expires RFC 3339 UTC>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub daemon_id: String,
    pub nonce: String,
    pub expires: DateTime<Utc>,
}

impl Lease {
    pub fn new(daemon_id: &str, expires: DateTime<Utc>) -> Self {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Self {
            daemon_id: daemon_id.to_string(),
            nonce: nonce[..12].to_string(),
            expires,
        }
    }
}

impl fmt::Display for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "lease|{}|{}|{}",
            self.daemon_id,
            self.nonce,
            self.expires.to_rfc3339_opts(SecondsFormat::Millis, true)
        )
    }
}

impl LeaseState {
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        if text == FREE {
            return LeaseState::Free;
        }
        let parts: Vec<&str> = text.split('|').collect();
        if let ["lease", daemon_id, nonce, expires] = parts[..] {
            if let Ok(expires) = DateTime::parse_from_rfc3339(expires) {
                if !daemon_id.is_empty() && !nonce.is_empty() {
                    return LeaseState::Held(Lease {
                        daemon_id: daemon_id.to_string(),
                        nonce: nonce.to_string(),
                        expires: expires.with_timezone(&Utc),
                    });
                }
            }
        }
        LeaseState::Invalid(text.to_string())
    }

    /// The text to compare against when daemon `me` takes the lease: `Some` when it is
    /// free, when this observer has watched this very value stand still for longer than
    /// `ttl` (`quiet`, its own time: the holder's written expiry is another machine's clock
    /// and is not compared, docs/design.md §3.1), or when it is `me`'s own (a lease whose
    /// acquire reply was lost, or left by this daemon's previous process: one daemon runs
    /// one claim pass at a time, so it cannot be in use); `None` while another daemon
    /// holds it.
    pub fn takeable(
        &self,
        me: &str,
        quiet: std::time::Duration,
        ttl: std::time::Duration,
    ) -> Option<String> {
        match self {
            LeaseState::Free => Some(FREE.to_string()),
            LeaseState::Held(lease) if quiet > ttl || lease.daemon_id == me => {
                Some(lease.to_string())
            }
            LeaseState::Held(_) | LeaseState::Invalid(_) => None,
        }
    }
}

/// The developer-metadata key of a fence.
pub const FENCE_KEY: &str = "sheetq.fence";

/// The id of the fence of lease value `lease` (a held lease's cell text): a positive int32
/// derived from the text (FNV-1a), the same in every daemon.
pub fn fence_id(lease: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in lease.as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    // 1..=i32::MAX: explicit developer-metadata ids are positive.
    i32::try_from(h % (i32::MAX as u32)).unwrap_or(0) + 1
}

/// The fence of lease value `lease` (docs/design.md §3.1): developer metadata with the id
/// [`fence_id`] on row 1 of the worker sheet. Google documents that creating developer
/// metadata with an id that exists fails, and that a `spreadsheets.batchUpdate` with one
/// failing request applies none of its requests. So a daemon that takes a lease over from
/// `lease` creates its fence in the same batch, and every commit made under `lease` creates
/// it too: whichever comes second fails whole. A commit whose reply was lost can then not
/// take effect after its lease was taken over, however late Google applies it.
pub fn fence(worker_sheet_id: i32, lease: &str) -> Request {
    Request::BindRow {
        sheet_id: worker_sheet_id,
        row: 0,
        id: fence_id(lease),
        key: FENCE_KEY.to_string(),
        value: lease.to_string(),
    }
}

/// Whether a refused batch was refused for the fence of `lease`: another request created it
/// first (the lease was taken over, or its commit applied).
pub fn is_fenced(error_message: &str, lease: &str) -> bool {
    let id = fence_id(lease).to_string();
    error_message.contains("already exists")
        && error_message
            .split(|c: char| !c.is_ascii_digit())
            .any(|n| n == id)
}

/// The compare-and-swap of the lease cell (B1 of the worker sheet) from `from` to `to`.
pub fn swap(worker_sheet_id: i32, from: &str, to: &str) -> Request {
    Request::CompareAndSwap {
        range: GridRange::cell(worker_sheet_id, 0, 1),
        find: from.to_string(),
        replacement: to.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn at(s: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 3, 0, 0)
            .single()
            .unwrap()
            + Duration::seconds(s)
    }

    #[test]
    fn a_fence_is_one_id_per_lease_value_and_recognised_in_the_refusal() {
        let a = Lease::new("vm-1", at(30)).to_string();
        let b = Lease::new("vm-1", at(30)).to_string();
        assert_eq!(
            fence_id(&a),
            fence_id(&a.clone()),
            "every daemon derives the same id"
        );
        assert_ne!(fence_id(&a), fence_id(&b), "a new nonce, a new fence");
        assert!(fence_id(&a) > 0);
        let refusal = format!(
            "Invalid requests[0].createDeveloperMetadata: Developer metadata with id {} already exists.",
            fence_id(&a)
        );
        assert!(is_fenced(&refusal, &a));
        assert!(!is_fenced(&refusal, &b));
        assert!(!is_fenced("Invalid requests[0]: something else", &a));
    }

    #[test]
    fn a_held_lease_round_trips_through_its_cell_text() {
        let lease = Lease::new("vm-1", at(30));
        let text = lease.to_string();
        assert!(text.starts_with("lease|vm-1|"), "{text}");
        assert!(text.ends_with("|2026-11-30T03:00:30.000Z"), "{text}");
        assert_eq!(LeaseState::parse(&text), LeaseState::Held(lease));
    }

    #[test]
    fn only_a_free_abandoned_or_own_lease_can_be_taken() {
        let secs = std::time::Duration::from_secs;
        let ttl = secs(30);
        // Written with an expiry long past by its holder's clock: not read for the decision.
        let lease = Lease::new("vm-2", at(-3600));
        let held = LeaseState::Held(lease.clone());
        assert_eq!(
            LeaseState::parse(" free ").takeable("vm-1", secs(0), ttl),
            Some("free".into())
        );
        assert_eq!(
            held.takeable("vm-1", secs(30), ttl),
            None,
            "watched standing still for exactly its TTL, the lease still holds"
        );
        assert_eq!(
            held.takeable("vm-1", secs(31), ttl),
            Some(lease.to_string()),
            "abandoned: CAS from its exact text"
        );
        assert_eq!(LeaseState::parse("").takeable("vm-1", secs(99), ttl), None);
        assert_eq!(
            held.takeable("vm-2", secs(0), ttl),
            Some(lease.to_string()),
            "a daemon may take back its own lease (a lost acquire reply)"
        );
        assert_eq!(
            LeaseState::parse("lease|x|y|not-a-date"),
            LeaseState::Invalid("lease|x|y|not-a-date".into())
        );
    }

    #[test]
    fn swap_targets_exactly_the_lease_cell() {
        let Request::CompareAndSwap {
            range,
            find,
            replacement,
        } = swap(7, "free", "lease|a|b|c")
        else {
            panic!("swap must be a compare-and-swap");
        };
        assert_eq!(range, GridRange::cell(7, 0, 1), "B1 is row 0, column 1");
        assert_eq!(
            (find.as_str(), replacement.as_str()),
            ("free", "lease|a|b|c")
        );
    }
}
