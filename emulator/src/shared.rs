//! What every handler of the emulator shares, below the HTTP routing (`http`) and the
//! endpoints beside the API (`admin`, `web`): the store, the token issuer, the fault plan and
//! quota, the rules a test chose and the clock of the replies; and the JSON reply
//! they all send.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value as Json;

use super::auth::Auth;
use super::control::Control;
use super::deviation::Rules;
use super::quota::Quota;
use super::store::Store;

/// State shared by every request.
pub struct Shared {
    pub store: Mutex<Store>,
    pub auth: Auth,
    pub control: Mutex<Control>,
    /// Added to every API request (the `--latency-ms` option).
    pub latency: Duration,
    /// Set when the store changed since the last save; the saver waits on `changed`.
    pub dirty: AtomicBool,
    pub changed: tokio::sync::Notify,
    pub base_url: Mutex<String>,
    /// The spreadsheet the handle names (the seeded one): what the web view shows.
    pub home: Mutex<String>,
    /// Counts changes to the store; the web view's long poll waits on it.
    pub version: tokio::sync::watch::Sender<u64>,
    /// Choices for behaviour Google does not document (`EmulatorOptions`).
    pub rules: Rules,
    /// Added to the time the `Date` header of every API reply says: a test's way to put
    /// Google's clock (or ours) off.
    pub clock_skew: Mutex<chrono::TimeDelta>,
    /// What `Emulator::share` gave each account, for spreadsheets added after it.
    pub shares: Mutex<std::collections::BTreeMap<String, Access>>,
}

pub use super::store::Access;

impl Shared {
    pub fn new(store: Store, latency: Duration, rules: Rules, quota: Option<Quota>) -> Self {
        Shared {
            store: Mutex::new(store),
            auth: Auth::new(),
            control: Mutex::new(Control::with_quota(quota)),
            latency,
            dirty: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
            base_url: Mutex::new(String::new()),
            home: Mutex::new(String::new()),
            version: tokio::sync::watch::Sender::new(0),
            rules,
            clock_skew: Mutex::new(chrono::TimeDelta::zero()),
            shares: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// The `Date` header value of a reply sent now: IMF-fixdate in GMT.
    pub fn date_header(&self) -> String {
        let skew = self.clock_skew.lock().map(|s| *s).unwrap_or_default();
        (chrono::Utc::now() + skew)
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string()
    }

    /// How the spreadsheet `id` is shared with `user` ([`Spreadsheet::access`]); an editor
    /// for a spreadsheet the emulator does not hold (the call then fails as not found).
    ///
    /// [`Spreadsheet::access`]: super::store::Spreadsheet::access
    pub fn access_to(&self, id: &str, user: &str) -> Access {
        self.store()
            .get(id)
            .map_or(Access::Writer, |ss| ss.access(user))
    }

    pub fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn control(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn mark_changed(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        self.changed.notify_one();
        self.version.send_modify(|v| *v += 1);
    }

    /// The id of the spreadsheet the handle names.
    pub fn home_id(&self) -> String {
        self.home.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

pub(super) fn json_response(status: u16, body: &Json) -> (Response, usize) {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let len = bytes.len();
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let resp = (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        Body::from(bytes),
    )
        .into_response();
    (resp, len)
}
