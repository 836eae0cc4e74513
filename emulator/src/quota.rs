//! Google's per-minute request quotas as the emulator enforces them
//! (https://developers.google.com/sheets/api/limits): read and write requests counted
//! separately, per user (the service account a request's token was issued to) and per
//! project (one per emulator: every user together). A request over any of the four limits
//! is refused with 429 `RESOURCE_EXHAUSTED` and is not counted.
//!
//! Google says the quotas are "per minute" and refilled every minute, without saying whether
//! the minute is a fixed or a sliding one. The emulator counts over a sliding 60-second
//! window: it never lets more through in any 60 seconds than a fixed minute could at its
//! start, so a client that passes here is not refused by Google for bursting across a
//! minute boundary. The clock is a parameter ([`QuotaState::take`] takes `now`), so the
//! window is tested without waiting.
//!
//! The `--quota` syntax of `sheetq emulator` is parsed here too ([`QuotaSpec`]).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The window a per-minute limit is counted over.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Requests a minute, reads and writes counted separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub read: u32,
    pub write: u32,
}

impl Limits {
    pub const fn new(read: u32, write: u32) -> Self {
        Limits { read, write }
    }

    fn of(&self, kind: Kind) -> u32 {
        match kind {
            Kind::Read => self.read,
            Kind::Write => self.write,
        }
    }
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.read, self.write)
    }
}

/// What `READ/WRITE` limits must look like, for error messages.
const LIMITS_SYNTAX: &str = "READ/WRITE requests per minute, e.g. 600/600";

impl FromStr for Limits {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not {LIMITS_SYNTAX}");
        let (r, w) = s.trim().split_once('/').ok_or_else(bad)?;
        let read = r.trim().parse().map_err(|_| bad())?;
        let write = w.trim().parse().map_err(|_| bad())?;
        Ok(Limits { read, write })
    }
}

/// The per-minute limits the emulator enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quota {
    /// For each user (service account) of the project.
    pub per_user: Limits,
    /// For all users of the project together.
    pub per_project: Limits,
}

impl Quota {
    /// Google's published quota: 60 read and 60 write requests per minute per user, 300 and
    /// 300 per project.
    pub const fn google() -> Self {
        Quota {
            per_user: Limits::new(60, 60),
            per_project: Limits::new(300, 300),
        }
    }

    /// Google's quota times `factor`, for tests that run a minute's worth of polls in a few
    /// seconds (a daemon polling every 100 ms reads 600 times a minute).
    pub const fn scaled(factor: u32) -> Self {
        let g = Self::google();
        Quota {
            per_user: Limits::new(g.per_user.read * factor, g.per_user.write * factor),
            per_project: Limits::new(g.per_project.read * factor, g.per_project.write * factor),
        }
    }

    /// `read`/`write` per user, and per project Google's ratio of five users' worth.
    pub const fn per_user(read: u32, write: u32) -> Self {
        Quota {
            per_user: Limits::new(read, write),
            per_project: Limits::new(read.saturating_mul(5), write.saturating_mul(5)),
        }
    }
}

impl Default for Quota {
    fn default() -> Self {
        Self::google()
    }
}

/// The `--quota` option of `sheetq emulator`: `off`, `google`, or `USER` / `USER,PROJECT`
/// limits as `READ/WRITE` requests per minute (`600/600`, `600/600,3000/3000`). Without a
/// project part, the project gets five users' worth, as Google's 60 and 300.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaSpec(pub Option<Quota>);

/// The accepted `--quota` syntax, for help and error messages.
pub const QUOTA_SYNTAX: &str = "off, google (60/60 per user, 300/300 per project), \
     or per-user READ/WRITE requests per minute with an optional ,READ/WRITE per project \
     (600/600 or 600/600,3000/3000)";

impl FromStr for QuotaSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "off" | "none" => return Ok(QuotaSpec(None)),
            "google" | "on" => return Ok(QuotaSpec(Some(Quota::google()))),
            _ => {}
        }
        let bad = |why: String| format!("{why}; expected {QUOTA_SYNTAX}");
        let (user, project) = match t.split_once(',') {
            Some((u, p)) => (u, Some(p)),
            None => (t, None),
        };
        let user: Limits = user.parse().map_err(bad)?;
        let quota = match project {
            None => Quota::per_user(user.read, user.write),
            Some(p) => Quota {
                per_user: user,
                per_project: p.parse().map_err(bad)?,
            },
        };
        Ok(QuotaSpec(Some(quota)))
    }
}

/// Which quota a request counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    pub fn of(write: bool) -> Self {
        if write {
            Kind::Write
        } else {
            Kind::Read
        }
    }
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    Project,
}

/// A refusal: the limit that was spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded {
    pub kind: Kind,
    pub scope: Scope,
    /// The limit's value, requests per minute.
    pub limit: u32,
}

/// The request times inside the current window, per user and for the project.
#[derive(Debug, Default)]
pub struct QuotaState {
    users: BTreeMap<(String, Kind), VecDeque<Instant>>,
    project: BTreeMap<Kind, VecDeque<Instant>>,
}

impl QuotaState {
    /// Counts one request of `user` at `now` if it fits both the user's and the project's
    /// limit; otherwise counts nothing and says which limit it exceeded (the user's first,
    /// as Google checks the narrower one).
    pub fn take(
        &mut self,
        quota: &Quota,
        user: &str,
        kind: Kind,
        now: Instant,
    ) -> Result<(), Exceeded> {
        let mine = self.users.entry((user.to_string(), kind)).or_default();
        let user_limit = quota.per_user.of(kind);
        if used(mine, now) >= user_limit as usize {
            return Err(Exceeded {
                kind,
                scope: Scope::User,
                limit: user_limit,
            });
        }
        let all = self.project.entry(kind).or_default();
        let project_limit = quota.per_project.of(kind);
        if used(all, now) >= project_limit as usize {
            return Err(Exceeded {
                kind,
                scope: Scope::Project,
                limit: project_limit,
            });
        }
        all.push_back(now);
        mine.push_back(now);
        Ok(())
    }
}

/// Drops the times that left the window; returns how many are still in it.
fn used(times: &mut VecDeque<Instant>, now: Instant) -> usize {
    while times
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
    {
        times.pop_front();
    }
    times.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_of_each_user_are_counted_apart_and_the_project_adds_them_up() {
        let quota = Quota {
            per_user: Limits::new(2, 1),
            per_project: Limits::new(3, 5),
        };
        let mut s = QuotaState::default();
        let t = Instant::now();
        assert_eq!(s.take(&quota, "a", Kind::Read, t), Ok(()));
        assert_eq!(s.take(&quota, "a", Kind::Read, t), Ok(()));
        assert_eq!(s.take(&quota, "a", Kind::Write, t), Ok(()), "writes apart");
        let user = Exceeded {
            kind: Kind::Read,
            scope: Scope::User,
            limit: 2,
        };
        assert_eq!(s.take(&quota, "a", Kind::Read, t), Err(user));
        assert_eq!(s.take(&quota, "b", Kind::Read, t), Ok(()), "b has its own");
        let project = Exceeded {
            kind: Kind::Read,
            scope: Scope::Project,
            limit: 3,
        };
        assert_eq!(s.take(&quota, "b", Kind::Read, t), Err(project));
        // Refusals did not count: b still has one read left once the project has room.
        let later = t + WINDOW;
        assert_eq!(s.take(&quota, "b", Kind::Read, later), Ok(()));
        assert_eq!(s.take(&quota, "b", Kind::Read, later), Ok(()));
        assert_eq!(s.take(&quota, "b", Kind::Read, later).err(), Some(user));
    }

    #[test]
    fn the_window_slides_over_sixty_seconds() {
        let quota = Quota::per_user(2, 2);
        let mut s = QuotaState::default();
        let t0 = Instant::now();
        assert!(s.take(&quota, "a", Kind::Read, t0).is_ok());
        assert!(s
            .take(&quota, "a", Kind::Read, t0 + Duration::from_secs(30))
            .is_ok());
        assert!(s
            .take(&quota, "a", Kind::Read, t0 + Duration::from_secs(59))
            .is_err());
        assert!(s.take(&quota, "a", Kind::Read, t0 + WINDOW).is_ok());
        assert!(s
            .take(&quota, "a", Kind::Read, t0 + Duration::from_secs(61))
            .is_err());
        assert!(s
            .take(&quota, "a", Kind::Read, t0 + Duration::from_secs(90))
            .is_ok());
    }

    #[test]
    fn the_quota_option_reads_off_google_and_limits() {
        let p = |s: &str| s.parse::<QuotaSpec>().map(|q| q.0);
        assert_eq!(p("off"), Ok(None));
        assert_eq!(p("google"), Ok(Some(Quota::google())));
        assert_eq!(p("600/600"), Ok(Some(Quota::scaled(10))));
        assert_eq!(
            p("600/60,1000/100"),
            Ok(Some(Quota {
                per_user: Limits::new(600, 60),
                per_project: Limits::new(1000, 100),
            }))
        );
        for bad in ["600", "a/b", "600/600,", "60/60/60", "-1/5", ""] {
            let err = p(bad).err().unwrap_or_default();
            assert!(
                err.contains("expected off, google") && err.contains("READ/WRITE"),
                "{bad:?}: {err}"
            );
        }
    }
}
