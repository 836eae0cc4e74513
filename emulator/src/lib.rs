//! A Google Sheets API v4 emulator for the subset sheetq uses, plus the OAuth2 token
//! endpoint of the service-account flow, served over real HTTP on loopback so that the real
//! `google-sheets4` client and `yup-oauth2` talk to it (sheetq's docs/design.md §7–§8).
//! A crate of its own: it imports nothing of sheetq, and can stand in for Google for any
//! client of the Sheets API (see its README).
//!
//! Parts:
//! - [`a1`]: A1 notation, read as Google's guide describes it (its own reading, kept apart
//!   from any client's).
//! - [`store`]: spreadsheets, sheets, rows as objects (cells + metadata ids), protected
//!   ranges on their sheets, and the grid edits shared by API and tests.
//! - [`metadata`]: developer metadata: where each entry is, create and get, and who sees
//!   it (a `PROJECT` entry only the developer project that created it: a service account's
//!   project is the one in its address, a person's their own).
//! - [`lookup`]: the metadata requests that select by `DataFilter` (update, delete, search).
//! - [`data_filter`]: `DataFilter` resolution to metadata and to grid ranges.
//! - [`values`]: value input (`RAW`/`USER_ENTERED`) and rendering options.
//! - [`formula`]: effective values and the small formula evaluator.
//! - [`api`]: `spreadsheets.create` and `spreadsheets.values.*` (append's table detection).
//! - [`by_filter`]: the `spreadsheets.values.*ByDataFilter` methods.
//! - [`grid`]: spreadsheet JSON for `spreadsheets.get`: grid data, row/column metadata.
//! - [`batch`]: `spreadsheets.batchUpdate` (atomic, in order): dispatch, cell and sheet
//!   requests.
//! - [`dimension`]: insert/delete/move of rows and columns, `sortRange`.
//! - [`paste`]: `cutPaste`, `copyPaste`.
//! - [`find_replace`]: `findReplace`, the lease's compare-and-swap.
//! - [`protection`]: protected ranges: their requests and JSON, who may edit through one
//!   (the owner always), and the guard every write passes; [`footprint`], what each
//!   `batchUpdate` request would change, for that guard.
//! - [`request`]: the checked parts of a request every operation reads (fields, indexes,
//!   sheet ids, grid ranges, field masks).
//! - [`auth`]: test key pair, credentials JSON, `/token`, bearer tokens.
//! - [`people`]: the accounts that are not service accounts (the owner, a team): what makes
//!   an e-mail address a person's.
//! - [`quota`]: Google's per-minute quotas (per user, per project; reads and writes apart),
//!   their sliding window and the `--quota` syntax.
//! - [`control`]: fault plan, the quota's limits and windows, request log and counters.
//! - [`fields`]: the `fields` partial-response parameter.
//! - [`shared`]: the state every handler shares (store, tokens, faults and quota, rules,
//!   the replies' clock) and the JSON reply. Each spreadsheet's sharing is its own
//!   (`store::Sharing`).
//! - [`http`]: routing, accounting and the accept loop, on top of everything else.
//! - [`admin`]: the `/_emulator/...` endpoints (log, faults, quota, reset, credentials, a
//!   person's token).
//! - [`seed`]: the `demo` and `empty` starting spreadsheets.
//!
//! This file holds the [`Emulator`] handle that tests start and stop, state-file
//! persistence, and [`serve`] for the `sheetq emulator` command.

pub mod a1;
pub mod admin;
pub mod api;
pub mod auth;
pub mod batch;
pub mod by_filter;
pub mod control;
pub mod data_filter;
pub mod deviation;
pub mod dimension;
pub mod error;
pub mod fields;
pub mod find_replace;
pub mod footprint;
pub mod formula;
pub mod grid;
pub mod http;
pub mod lookup;
pub mod metadata;
pub mod paste;
pub mod people;
pub mod protection;
pub mod quota;
pub mod request;
pub mod seed;
pub mod shared;
pub mod store;
pub mod values;
mod web;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use control::{Fault, FaultRule, Refused, RequestCounters, RequestRecord};
pub use deviation::Deviation;
pub use dimension::SortMetadata;
pub use error::ApiError;
pub use quota::{Limits, Quota, QuotaSpec};
pub use seed::Seed;
pub use shared::Access;
pub use store::{Cell, Sheet, Spreadsheet, Store, Value, DEFAULT_OWNER};

use shared::Shared;

/// How to start an emulator.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    /// Where to listen; port 0 picks a free port. Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// Starting contents when no state file exists yet.
    pub seed: Seed,
    /// JSON file the store is loaded from at start and saved to (atomically) after changes.
    pub state: Option<PathBuf>,
    /// Added to every API request, to make a local run feel like the network.
    pub latency: Duration,
    /// Id of the seeded spreadsheet; random (Google-shaped) when `None`.
    pub spreadsheet_id: Option<String>,
    /// More spreadsheets to hold besides that one, each seeded like it (`seed`, `time_zone`)
    /// unless the state file already has it: a fleet to serve from one config.
    pub also: Vec<String>,
    /// Time zone of the seeded spreadsheet (`properties.timeZone`); the seed's (Asia/Tokyo)
    /// when `None`.
    pub time_zone: Option<String>,
    /// Whether `sortRange` moves row developer metadata with the rows. Google does not
    /// document it; the default is what users measured (only a sort spanning every filled
    /// column moves it).
    pub sort_metadata: SortMetadata,
    /// The per-minute request quota enforced, per user (service account) and per project;
    /// `None` turns it off. Default: Google's ([`Quota::google`]), so that whatever passes
    /// here passes at Google.
    pub quota: Option<Quota>,
    /// A behaviour gotten wrong on purpose ([`Deviation`]), for the test that shows a
    /// `check --probe` probe can fail. `None` (the default) in every other use.
    pub deviation: Option<Deviation>,
    /// The owner (a person's e-mail) of every spreadsheet the emulator holds: seeded ones
    /// get it, and those loaded from the state file are handed over to it. `None`: seeded
    /// ones are owned by [`DEFAULT_OWNER`], loaded ones keep the owner the state file names.
    pub owner: Option<String>,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            seed: Seed::Demo,
            state: None,
            latency: Duration::ZERO,
            spreadsheet_id: None,
            also: Vec::new(),
            time_zone: None,
            sort_metadata: SortMetadata::default(),
            quota: Some(Quota::google()),
            deviation: None,
            owner: None,
        }
    }
}

/// The `sheetq emulator` command line.
#[derive(Debug, Clone, clap::Args)]
pub struct EmulatorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// JSON file to keep the spreadsheet in across restarts.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Starting spreadsheet when there is no state yet.
    #[arg(long, value_enum, default_value_t = Seed::Demo)]
    pub seed: Seed,
    /// Latency added to every API request, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Fixed id for the seeded spreadsheet (default: random). Repeat it for several
    /// spreadsheets, each seeded alike; the web view opens the first and lists them all.
    #[arg(long)]
    pub spreadsheet_id: Vec<String>,
    /// IANA time zone of the seeded spreadsheet, e.g. America/New_York (default: the seed's,
    /// Asia/Tokyo): to try a zone with daylight saving.
    #[arg(long, value_parser = parse_zone_arg)]
    pub time_zone: Option<String>,
    /// Per-minute request quota: `off`, `google` (60 reads and 60 writes per user, 300 and
    /// 300 per project), or per-user READ/WRITE with an optional per-project READ/WRITE after
    /// a comma (`600/600`, `600/600,3000/3000`; without it the project gets 5 users' worth).
    #[arg(
        long,
        value_name = "off|google|READ/WRITE[,READ/WRITE]",
        default_value = "google"
    )]
    pub quota: QuotaSpec,
    /// The person who owns the spreadsheets (default owner@example.com; kept in --state).
    /// The owner can always edit, whatever the protected ranges say; sheetq's service
    /// account is an editor, never the owner.
    #[arg(long, value_name = "EMAIL", value_parser = parse_owner_arg)]
    pub owner: Option<String>,
    /// Listen on an address other machines can reach. The emulator has no real
    /// authentication (it hands out its key at /_emulator/credentials) and its web view
    /// edits the sheet without asking: only for a trusted network.
    #[arg(long)]
    pub allow_remote: bool,
}

impl From<EmulatorArgs> for EmulatorOptions {
    fn from(a: EmulatorArgs) -> Self {
        EmulatorOptions {
            listen: a.listen,
            seed: a.seed,
            state: a.state,
            latency: Duration::from_millis(a.latency_ms),
            spreadsheet_id: a.spreadsheet_id.first().cloned(),
            also: a.spreadsheet_id.into_iter().skip(1).collect(),
            time_zone: a.time_zone,
            sort_metadata: SortMetadata::default(),
            quota: a.quota.0,
            deviation: None,
            owner: a.owner,
        }
    }
}

/// `--time-zone`: an IANA zone name, as Google accepts in `properties.timeZone`.
fn parse_zone_arg(zone: &str) -> Result<String, String> {
    zone.trim()
        .parse::<chrono_tz::Tz>()
        .map(|_| zone.to_string())
        .map_err(|_| format!("{zone:?} is not an IANA time zone name (e.g. Asia/Tokyo)"))
}

/// `--owner`: a person's e-mail address (not a service account's).
fn parse_owner_arg(email: &str) -> Result<String, String> {
    people::person_email(email)
}

/// Why the emulator could not start or save.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error(
        "cannot listen on {addr}: {source} (is another emulator running? try --listen 127.0.0.1:0)"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read emulator state {}: {source}", path.display())]
    ReadState {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("emulator state {} is not valid JSON: {source} (move it away to start fresh)", path.display())]
    ParseState {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write emulator state {}: {source}", path.display())]
    WriteState {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "--listen {addr} is reachable from other machines, and the emulator is local only: anyone who reaches it can read and edit the sheet and fetch its key. Listen on 127.0.0.1 (the default), or add --allow-remote on a trusted network"
    )]
    NotLoopback { addr: SocketAddr },
}

/// A running emulator. Stops when dropped; [`Emulator::shutdown`] also waits for the last
/// state save.
pub struct Emulator {
    shared: Arc<Shared>,
    addr: SocketAddr,
    spreadsheet_id: String,
    state: Option<PathBuf>,
    cancel: CancellationToken,
    server: Option<JoinHandle<()>>,
    saver: Option<JoinHandle<()>>,
}

impl Emulator {
    /// Loads or seeds the store, binds, and starts serving in the background.
    pub async fn start(opts: EmulatorOptions) -> Result<Emulator, EmulatorError> {
        let loaded = match &opts.state {
            Some(path) => load_state(path)?,
            None => None,
        };
        let (mut store, spreadsheet_id, mut fresh) = match loaded {
            Some(mut store) => {
                // The handle names the spreadsheet asked for, seeded if the state file lacks
                // it, else the state file's first.
                let mut added = false;
                let id = match &opts.spreadsheet_id {
                    Some(id) => {
                        if !store.spreadsheets.contains_key(id) {
                            store.insert(seeded(&opts, id.clone()));
                            added = true;
                        }
                        id.clone()
                    }
                    None => store
                        .spreadsheets
                        .keys()
                        .next()
                        .cloned()
                        .unwrap_or_default(),
                };
                (store, id, added)
            }
            None => {
                let id = opts
                    .spreadsheet_id
                    .clone()
                    .unwrap_or_else(store::fresh_spreadsheet_id);
                let mut store = Store::default();
                store.insert(seeded(&opts, id.clone()));
                (store, id, true)
            }
        };
        for id in &opts.also {
            if !store.spreadsheets.contains_key(id) {
                store.insert(seeded(&opts, id.clone()));
                fresh = true;
            }
        }
        if let Some(owner) = &opts.owner {
            for ss in store.spreadsheets.values_mut() {
                if &ss.owner != owner {
                    ss.owner.clone_from(owner);
                    fresh = true;
                }
            }
        }
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .map_err(|source| EmulatorError::Bind {
                addr: opts.listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| EmulatorError::Bind {
                addr: opts.listen,
                source,
            })?;
        let rules = deviation::Rules {
            sort_metadata: opts.sort_metadata,
            deviation: opts.deviation,
        };
        let shared = Arc::new(Shared::new(store, opts.latency, rules, opts.quota));
        if let Ok(mut b) = shared.base_url.lock() {
            *b = format!("http://{addr}/");
        }
        if let Ok(mut h) = shared.home.lock() {
            h.clone_from(&spreadsheet_id);
        }
        let cancel = CancellationToken::new();
        let server = tokio::spawn(http::run(
            listener,
            http::router(shared.clone()),
            cancel.clone(),
        ));
        let saver = match &opts.state {
            Some(path) => {
                if fresh {
                    save_state(path, &shared.store().clone())?;
                }
                Some(tokio::spawn(save_loop(
                    shared.clone(),
                    path.clone(),
                    cancel.clone(),
                )))
            }
            None => None,
        };
        Ok(Emulator {
            shared,
            addr,
            spreadsheet_id,
            state: opts.state,
            cancel,
            server: Some(server),
            saver,
        })
    }

    /// `http://127.0.0.1:<port>/`, with the trailing `/` that `hub.base_url` needs.
    pub fn base_url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Adds a spreadsheet laid out as `seed` (with a fresh id, the seed's time zone, the
    /// handle's owner) to the store, as a person's other spreadsheet would be; returns its id.
    pub fn add_spreadsheet(&self, seed: Seed) -> String {
        let id = store::fresh_spreadsheet_id();
        let mut ss = seed::build(seed, id.clone());
        ss.owner = self.owner();
        // Shared as the handle's other spreadsheets were with [`Emulator::share`].
        if let Ok(shares) = self.shared.shares.lock() {
            ss.sharing.roles.extend(shares.clone());
        }
        self.with_store(|s| s.insert(ss));
        id
    }

    /// Id of the seeded (or first loaded) spreadsheet.
    pub fn spreadsheet_id(&self) -> &str {
        &self.spreadsheet_id
    }

    /// A service-account credentials JSON whose `token_uri` is this emulator's `/token`.
    pub fn credentials_json(&self) -> String {
        auth::credentials_json(&self.base_url())
    }

    /// Credentials of another service account of the emulator's project (the token endpoint
    /// learns it here): a second user, with its own per-user quota and a share of the
    /// project's. `name` becomes `<name>@sheetq-emulator.iam.gserviceaccount.com`.
    pub fn credentials_json_for(&self, name: &str) -> String {
        let email = Self::account(name);
        self.shared.auth.add_account(&email);
        auth::credentials_json_for(&self.base_url(), &email)
    }

    /// The e-mail of the service account [`Emulator::credentials_json_for`] makes for `name`:
    /// what the request log and per-user fault rules name it by.
    pub fn account(name: &str) -> String {
        format!("{name}@sheetq-emulator.iam.gserviceaccount.com")
    }

    /// The owner of the handle's spreadsheet: a person ([`DEFAULT_OWNER`] unless
    /// `EmulatorOptions::owner` or the state file says otherwise).
    pub fn owner(&self) -> String {
        self.shared
            .store()
            .get(&self.spreadsheet_id)
            .map(|ss| ss.owner.clone())
            .unwrap_or_else(|_| DEFAULT_OWNER.to_string())
    }

    /// A bearer token for the person `email`, as `POST /_emulator/people/token` issues one
    /// (but without checking the address): Sheets API calls made with it are that person's,
    /// with their own per-user quota, and protected ranges judge them as that person. The
    /// owner's address gives the owner's token.
    pub fn person_token(&self, email: &str) -> String {
        self.shared.auth.issue(&email.trim().to_ascii_lowercase())
    }

    /// Puts the clock of the emulator's replies (their `Date` header) `skew` ahead of this
    /// machine's (behind when negative).
    pub fn set_clock_skew(&self, skew: chrono::TimeDelta) {
        if let Ok(mut s) = self.shared.clock_skew.lock() {
            *s = skew;
        }
    }

    /// Shares every spreadsheet the emulator holds with the account `email` as `access`, and
    /// those [`Emulator::add_spreadsheet`] adds later (everyone is an editor of a seeded
    /// spreadsheet until told otherwise). The owner stays its owner.
    pub fn share(&self, email: &str, access: Access) {
        if let Ok(mut shares) = self.shared.shares.lock() {
            shares.insert(email.to_ascii_lowercase(), access);
        }
        self.with_store(|s| {
            for ss in s.spreadsheets.values_mut() {
                ss.sharing.roles.insert(email.to_ascii_lowercase(), access);
            }
        });
    }

    /// Shares the spreadsheet `id` alone with `email` as `access`; `false` when the
    /// emulator holds no such spreadsheet.
    pub fn share_one(&self, id: &str, email: &str, access: Access) -> bool {
        self.with_store(|s| {
            s.get_mut(id)
                .map(|ss| {
                    ss.sharing.roles.insert(email.to_ascii_lowercase(), access);
                })
                .is_ok()
        })
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.control().log.clone()
    }

    pub fn counters(&self) -> RequestCounters {
        self.shared.control().counters.clone()
    }

    /// How many requests of an API method id (`spreadsheets.batchUpdate`, ...) were seen.
    pub fn count(&self, method: &str) -> u64 {
        self.shared
            .control()
            .counters
            .by_method
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    /// Forgets the request log and counters, including quota refusals (not faults, nor the
    /// quota's limits and windows).
    pub fn clear_requests(&self) {
        let mut c = self.shared.control();
        c.log.clear();
        c.counters = RequestCounters::default();
    }

    pub fn add_fault(&self, rule: FaultRule) {
        self.shared.control().faults.push(rule);
    }

    /// Removes every rule equal to `rule` (a partition ends, the other faults stay).
    pub fn remove_fault(&self, rule: &FaultRule) {
        self.shared.control().faults.retain(|r| r != rule);
    }

    pub fn clear_faults(&self) {
        self.shared.control().faults.clear();
    }

    /// The fault rules still pending.
    pub fn faults(&self) -> Vec<FaultRule> {
        self.shared.control().faults.clone()
    }

    /// Changes the quota at run time (`None`: off). Counting starts afresh under the new
    /// limits.
    pub fn set_quota(&self, quota: Option<Quota>) {
        self.shared.control().set_quota(quota);
    }

    /// The quota enforced now.
    pub fn quota(&self) -> Option<Quota> {
        self.shared.control().quota()
    }

    /// Requests the quota refused with 429, by user (service account email); injected 429
    /// faults are not among them.
    pub fn quota_refused(&self) -> std::collections::BTreeMap<String, Refused> {
        self.shared.control().counters.quota_refused.clone()
    }

    /// Invalidates every issued access token, as if they had expired.
    pub fn revoke_tokens(&self) {
        self.shared.auth.revoke_all();
    }

    /// Direct access to the store, e.g. to simulate a person editing the sheet. Holds the
    /// same lock API requests take, so it is atomic with respect to them.
    pub fn with_store<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let out = {
            let mut store = self.shared.store();
            f(&mut store)
        };
        self.shared.mark_changed();
        out
    }

    /// Like [`Emulator::with_store`], on the handle's spreadsheet.
    pub fn with_spreadsheet<R>(
        &self,
        f: impl FnOnce(&mut Spreadsheet) -> R,
    ) -> Result<R, ApiError> {
        let id = self.spreadsheet_id.clone();
        self.with_store(|s| s.get_mut(&id).map(f))
    }

    /// Applies `spreadsheets.batchUpdate` requests (a JSON array of `Request`) to the
    /// handle's spreadsheet without HTTP, auth or accounting, as its owner: the same code
    /// path and rules (`sort_metadata`) the API uses, atomic like it, but not counted against
    /// the quota nor written to the request log. For tests playing a person who sorts,
    /// inserts, deletes, moves or cut-and-pastes rows (`sortRange`, `insertDimension`,
    /// `deleteDimension`, `moveDimension`, `cutPaste`, ...). Returns the batch's reply.
    pub fn batch_update(&self, requests: Json) -> Result<Json, ApiError> {
        let owner = self.owner();
        self.batch_update_as(&owner, requests)
    }

    /// Like [`Emulator::batch_update`], made by `user` (a person's or a service account's
    /// address): protected ranges refuse it as they refuse that account's API calls, with
    /// Google's 400 (`protection::REFUSED`), and nothing is applied.
    pub fn batch_update_as(&self, user: &str, requests: Json) -> Result<Json, ApiError> {
        let body = serde_json::to_vec(&serde_json::json!({ "requests": requests }))
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        let req = batch::parse(&body)?;
        let rules = self.shared.rules;
        let user = user.trim().to_ascii_lowercase();
        self.with_spreadsheet(|ss| batch::run(ss, &req, &rules, &user))?
    }

    /// Every developer metadata of the handle's spreadsheet as `DeveloperMetadata` JSON at
    /// its current location, in id order (no request is logged).
    pub fn developer_metadata(&self) -> Vec<Json> {
        let id = self.spreadsheet_id.clone();
        let store = self.shared.store();
        let Ok(ss) = store.get(&id) else {
            return Vec::new();
        };
        let located = metadata::locate(ss);
        ss.developer_metadata
            .iter()
            .filter_map(|(mid, md)| Some(metadata::metadata_json(ss, *mid, md, *located.get(mid)?)))
            .collect()
    }

    /// Where a row metadata is now: its sheet's title and 1-based row number; `None` when
    /// the metadata does not exist (any more) or is not on a row.
    pub fn metadata_row(&self, metadata_id: i32) -> Option<(String, u32)> {
        let id = self.spreadsheet_id.clone();
        let store = self.shared.store();
        let ss = store.get(&id).ok()?;
        match metadata::locate(ss).get(&metadata_id)? {
            metadata::Placed::Row(i, r) => Some((ss.sheets[*i].title.clone(), r + 1)),
            _ => None,
        }
    }

    /// Reads a range of the handle's spreadsheet as `UNFORMATTED_VALUE` rows.
    pub fn values(&self, range: &str) -> Result<Vec<Vec<Json>>, ApiError> {
        self.values_in(&self.spreadsheet_id, range)
    }

    /// Like [`Emulator::values`], of the spreadsheet `id`.
    pub fn values_in(&self, id: &str, range: &str) -> Result<Vec<Vec<Json>>, ApiError> {
        let render = values::Render {
            value: values::ValueRender::Unformatted,
            date: values::DateRender::Serial,
        };
        let reply = {
            let store = self.shared.store();
            api::read_range(store.get(id)?, range, render, api::Major::Rows)?
        };
        Ok(
            serde_json::from_value(reply.get("values").cloned().unwrap_or(Json::Array(vec![])))
                .unwrap_or_default(),
        )
    }

    /// Writes rows at a range of the handle's spreadsheet, as `values.update` with `RAW`
    /// (`user_entered = false`) or `USER_ENTERED`, by its owner.
    pub fn set_values(&self, range: &str, rows: Json, user_entered: bool) -> Result<(), ApiError> {
        let id = self.spreadsheet_id.clone();
        self.set_values_in(&id, range, rows, user_entered)
    }

    /// Like [`Emulator::set_values`], in the spreadsheet `id` (a person's edit there).
    pub fn set_values_in(
        &self,
        id: &str,
        range: &str,
        rows: Json,
        user_entered: bool,
    ) -> Result<(), ApiError> {
        let input = if user_entered {
            values::Input::UserEntered
        } else {
            values::Input::Raw
        };
        let body = serde_json::json!({ "values": rows });
        self.with_store(|store| {
            let ss = store.get_mut(id)?;
            let owner = ss.owner.clone();
            api::update(ss, range, &body, input, None, &owner).map(|_| ())
        })
    }

    /// Replaces the rows of sheet `title` from 1-based row `first` to the end with `rows`,
    /// taken as `RAW` values (text, numbers, booleans; `null` leaves a cell empty), without
    /// HTTP, auth or accounting, and far faster than a `values.update` of the same size: for
    /// seeding a large sheet (a queue of 100,000 finished rows) or many jobs at once. The
    /// rows dropped go with their developer metadata; the grid grows to hold the new rows.
    pub fn replace_rows(
        &self,
        title: &str,
        first: u32,
        rows: &[Vec<Json>],
    ) -> Result<(), ApiError> {
        self.with_spreadsheet(|ss| {
            let sheet = ss.sheet_by_title_mut(title).ok_or_else(|| {
                ApiError::invalid(format!("Unable to parse range: {title} (no such sheet)"))
            })?;
            let start = first.max(1) - 1;
            sheet.rows.resize_with(start as usize, store::Row::default);
            let mut width = 0;
            for r in rows {
                width = width.max(r.len() as u32);
                let cells = r
                    .iter()
                    .map(|v| Cell {
                        value: match v {
                            Json::String(s) => Some(Value::String(s.clone())),
                            Json::Number(n) => n.as_f64().map(Value::Number),
                            Json::Bool(b) => Some(Value::Bool(*b)),
                            _ => None,
                        },
                        ..Cell::default()
                    })
                    .collect();
                sheet.rows.push(store::Row::from_cells(cells));
            }
            sheet.grow_to(start + rows.len() as u32, width);
            metadata::prune(ss);
            Ok(())
        })?
    }

    /// Stops serving and, with a state file, writes the final state.
    pub async fn shutdown(mut self) -> Result<(), EmulatorError> {
        self.cancel.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        if let Some(saver) = self.saver.take() {
            let _ = saver.await;
        }
        self.flush()
    }

    fn flush(&self) -> Result<(), EmulatorError> {
        if let Some(path) = &self.state {
            if self.shared.dirty.swap(false, Ordering::SeqCst) {
                let snapshot = self.shared.store().clone();
                save_state(path, &snapshot)?;
            }
        }
        Ok(())
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.cancel.cancel();
        if let Err(e) = self.flush() {
            tracing::error!(error = %e, "emulator state not saved on drop");
        }
    }
}

/// Starts an emulator, prints its base URL and spreadsheet id, and serves until `shutdown`
/// is cancelled. For `sheetq emulator`.
pub async fn serve(
    opts: EmulatorOptions,
    shutdown: CancellationToken,
) -> Result<(), EmulatorError> {
    let emu = Emulator::start(opts).await?;
    println!(
        "sheetq emulator listening on {}{}",
        emu.base_url(),
        if emu.addr().ip().is_loopback() {
            " (this machine only)"
        } else {
            " (reachable from other machines: --allow-remote)"
        }
    );
    println!("web view:       {} (open it in a browser)", emu.base_url());
    let ids: Vec<String> = emu.shared.store().spreadsheets.keys().cloned().collect();
    println!("spreadsheet id: {}", emu.spreadsheet_id());
    for other in ids.iter().filter(|id| *id != emu.spreadsheet_id()) {
        println!("                {other}");
    }
    println!("credentials:    {}_emulator/credentials", emu.base_url());
    println!(
        "owner:          {} (a person; tokens for people: POST {}_emulator/people/token)",
        emu.owner(),
        emu.base_url()
    );
    match emu.quota() {
        Some(q) => println!(
            "quota:          {} read/write requests a minute per user, {} per project (--quota off to lift)",
            q.per_user, q.per_project
        ),
        None => println!("quota:          off"),
    }
    shutdown.cancelled().await;
    emu.shutdown().await
}

/// A spreadsheet of `opts.seed` with id `id`, in `opts.time_zone` and owned by `opts.owner`
/// when they are given.
fn seeded(opts: &EmulatorOptions, id: String) -> store::Spreadsheet {
    let mut ss = seed::build(opts.seed, id);
    if let Some(zone) = &opts.time_zone {
        ss.time_zone.clone_from(zone);
    }
    if let Some(owner) = &opts.owner {
        ss.owner.clone_from(owner);
    }
    ss
}

/// Saves the store shortly after each change (changes within 50 ms share one write), and
/// once more when cancelled.
async fn save_loop(shared: Arc<Shared>, path: PathBuf, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = shared.changed.notified() => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        if !shared.dirty.swap(false, Ordering::SeqCst) {
            continue;
        }
        let snapshot = shared.store().clone();
        let target = path.clone();
        let saved = tokio::task::spawn_blocking(move || save_state(&target, &snapshot)).await;
        match saved {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, "emulator state not saved");
                shared.dirty.store(true, Ordering::SeqCst);
            }
            Err(e) => tracing::error!(error = %e, "emulator state saver panicked"),
        }
    }
}

fn load_state(path: &Path) -> Result<Option<Store>, EmulatorError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(EmulatorError::ReadState {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let store = serde_json::from_slice(&bytes).map_err(|source| EmulatorError::ParseState {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Some(store))
}

/// Writes the state atomically: a temp file in the same directory, fsync, rename over the
/// target, fsync the directory. A crash leaves either the old or the new state, never half.
fn save_state(path: &Path, store: &Store) -> Result<(), EmulatorError> {
    let err = |source| EmulatorError::WriteState {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let bytes = serde_json::to_vec(store).map_err(|e| err(std::io::Error::other(e)))?;
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(&bytes).map_err(err)?;
    f.sync_all().map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(err)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_arguments_map_to_options() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: EmulatorArgs,
        }
        let cli = Cli::try_parse_from([
            "emulator",
            "--listen",
            "127.0.0.1:9999",
            "--seed",
            "empty",
            "--latency-ms",
            "5",
            "--state",
            "s.json",
            "--quota",
            "600/600",
        ])
        .unwrap_or_else(|e| panic!("parse: {e}"));
        let opts = EmulatorOptions::from(cli.args);
        assert_eq!(opts.listen, SocketAddr::from(([127, 0, 0, 1], 9999)));
        assert_eq!(opts.seed, Seed::Empty);
        assert_eq!(opts.latency, Duration::from_millis(5));
        assert_eq!(opts.state.as_deref(), Some(Path::new("s.json")));
        assert_eq!(opts.quota, Some(Quota::scaled(10)));
        let defaults = Cli::try_parse_from(["emulator"]).unwrap_or_else(|e| panic!("parse: {e}"));
        assert_eq!(
            defaults.args.listen,
            SocketAddr::from(([127, 0, 0, 1], 8787))
        );
        assert_eq!(defaults.args.seed, Seed::Demo);
        assert_eq!(defaults.args.quota, QuotaSpec(Some(Quota::google())));
        let off = Cli::try_parse_from(["emulator", "--quota", "off"])
            .unwrap_or_else(|e| panic!("parse: {e}"));
        assert_eq!(EmulatorOptions::from(off.args).quota, None);
        let bad = Cli::try_parse_from(["emulator", "--quota", "lots"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            bad.contains("--quota") && bad.contains("expected off, google"),
            "the error names the flag and the syntax: {bad}"
        );
        assert_eq!(
            EmulatorOptions::from(defaults.args).owner,
            None,
            "without --owner, seeded spreadsheets are owner@example.com's"
        );
        let owned = Cli::try_parse_from(["emulator", "--owner", "Carol@Example.com"])
            .unwrap_or_else(|e| panic!("parse: {e}"));
        assert_eq!(
            EmulatorOptions::from(owned.args).owner.as_deref(),
            Some("carol@example.com")
        );
        let robot = Cli::try_parse_from([
            "emulator",
            "--owner",
            "sheetq@project.iam.gserviceaccount.com",
        ])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            robot.contains("--owner") && robot.contains("is a service account"),
            "the owner is a person: {robot}"
        );
    }

    #[test]
    fn state_round_trips_through_an_atomic_write() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("state.json");
        let mut store = Store::default();
        let mut ss = seed::build(Seed::Demo, "sid".into());
        // A serial whose shortest decimal form only round-trips with `float_roundtrip`.
        ss.sheets[0].set_value(9, 0, Some(Value::Number(46356.577914733796)));
        store.insert(ss);
        save_state(&path, &store).unwrap_or_else(|e| panic!("save: {e}"));
        let back = load_state(&path).unwrap_or_else(|e| panic!("load: {e}"));
        // Exact equality: date serials must survive to the last bit (serde_json's
        // `float_roundtrip`), or a re-read value would differ from the one written.
        assert!(
            back == Some(store),
            "the store changed in a save/load round trip"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(
            leftovers,
            vec![std::ffi::OsString::from("state.json")],
            "no temp file left"
        );
    }
}
