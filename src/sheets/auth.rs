//! Credentials for the Google implementation of the port: which identity sheetq signs in as,
//! checked at startup, and the token source handed to the API hub.
//!
//! Resolution follows the order an operator expects: the key file named in the config; else
//! the file named by `GOOGLE_APPLICATION_CREDENTIALS`; else application-default credentials
//! (the metadata server of a cloud VM with an attached service account). A key file that
//! cannot be used is a startup error naming the file and the fault, never a 401 an hour later.
//!
//! Whatever scopes a call asks for, the token source requests only
//! [`SPREADSHEETS_SCOPE`]: the service account can touch spreadsheets and nothing else in
//! the owner's Drive, even if a call forgot to narrow its scope.

use std::error::Error as StdError;
use std::ffi::OsString;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use google_sheets4::common::GetToken;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use yup_oauth2::authenticator::ApplicationDefaultCredentialsTypes;
use yup_oauth2::{
    ApplicationDefaultCredentialsAuthenticator, ApplicationDefaultCredentialsFlowOpts,
    CustomHyperClientBuilder, ServiceAccountAuthenticator, ServiceAccountKey,
};

/// The only OAuth scope sheetq ever asks for.
pub const SPREADSHEETS_SCOPE: &str = "https://www.googleapis.com/auth/spreadsheets";

/// The environment variable Google's tools use to name a key file.
pub const CREDENTIALS_ENV: &str = "GOOGLE_APPLICATION_CREDENTIALS";

/// Google's token endpoint, used when a key file has no `token_uri`.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// Where the service account's identity comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A service-account key file: from the config, or from `GOOGLE_APPLICATION_CREDENTIALS`
    /// (`from_env`), which error messages mention so the operator knows where to look.
    KeyFile { path: PathBuf, from_env: bool },
    /// A service-account key held in memory (the embedded local mode gets one from the
    /// emulator).
    KeyJson(String),
    /// The metadata server of the VM sheetq runs on.
    ApplicationDefault,
}

impl fmt::Debug for Credentials {
    /// Never prints key material.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::KeyFile { path, from_env } => f
                .debug_struct("KeyFile")
                .field("path", path)
                .field("from_env", from_env)
                .finish(),
            Credentials::KeyJson(_) => f.write_str("KeyJson(..)"),
            Credentials::ApplicationDefault => f.write_str("ApplicationDefault"),
        }
    }
}

impl fmt::Display for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::KeyFile {
                path,
                from_env: false,
            } => write!(f, "key file {}", path.display()),
            Credentials::KeyFile {
                path,
                from_env: true,
            } => write!(f, "key file {} (from {CREDENTIALS_ENV})", path.display()),
            Credentials::KeyJson(_) => f.write_str("in-memory service-account key"),
            Credentials::ApplicationDefault => {
                f.write_str("application-default credentials (metadata server)")
            }
        }
    }
}

impl Credentials {
    /// The operator's order: `configured` key file, else `GOOGLE_APPLICATION_CREDENTIALS`,
    /// else application-default credentials.
    pub fn resolve(configured: Option<&Path>) -> Self {
        Self::resolve_from(configured, std::env::var_os(CREDENTIALS_ENV))
    }

    /// [`Credentials::resolve`] with the environment passed in, for tests. An empty variable
    /// counts as unset, as it does for Google's own tools.
    pub fn resolve_from(configured: Option<&Path>, env: Option<OsString>) -> Self {
        if let Some(path) = configured {
            return Credentials::KeyFile {
                path: path.to_path_buf(),
                from_env: false,
            };
        }
        match env {
            Some(value) if !value.is_empty() => Credentials::KeyFile {
                path: PathBuf::from(value),
                from_env: true,
            },
            _ => Credentials::ApplicationDefault,
        }
    }
}

/// Why the credentials cannot be used. Each message names the file (or source) and the fix.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read the service-account {source_desc}: {error}{hint}")]
    Read {
        source_desc: String,
        // Not a `#[source]`: the message shows it already, and a chain would print it twice.
        error: std::io::Error,
        hint: &'static str,
    },
    #[error("the service-account {source_desc} is not usable: {problems}")]
    Invalid {
        source_desc: String,
        problems: String,
    },
    #[error("cannot set up {source_desc}: {message}")]
    Setup {
        source_desc: String,
        message: String,
    },
}

/// A validated service-account key and the client e-mail it signs as.
#[derive(Clone)]
pub struct LoadedKey {
    pub key: ServiceAccountKey,
    pub client_email: String,
}

impl fmt::Debug for LoadedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedKey")
            .field("client_email", &self.client_email)
            .field("token_uri", &self.key.token_uri)
            .finish_non_exhaustive()
    }
}

/// Reads and validates the key of `credentials` (`None` for application-default
/// credentials). A key file readable by group or others is used, with a warning.
pub async fn load_key(credentials: &Credentials) -> Result<Option<LoadedKey>, CredentialsError> {
    match credentials {
        Credentials::ApplicationDefault => Ok(None),
        Credentials::KeyJson(json) => parse_key(json, &credentials.to_string()).map(Some),
        Credentials::KeyFile { path, .. } => {
            let source_desc = credentials.to_string();
            let text = tokio::fs::read_to_string(path).await.map_err(|error| {
                let hint = match error.kind() {
                    std::io::ErrorKind::NotFound => {
                        " (check the `credentials` setting or GOOGLE_APPLICATION_CREDENTIALS)"
                    }
                    std::io::ErrorKind::PermissionDenied => {
                        " (the file must be readable by the user sheetq runs as)"
                    }
                    _ => "",
                };
                CredentialsError::Read {
                    source_desc: source_desc.clone(),
                    error,
                    hint,
                }
            })?;
            warn_if_readable_by_others(path).await;
            parse_key(&text, &source_desc).map(Some)
        }
    }
}

/// True when a file mode lets group or others read (or write) the file.
pub fn mode_too_open(mode: u32) -> bool {
    mode & 0o077 != 0
}

#[cfg(unix)]
async fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = tokio::fs::metadata(path).await {
        let mode = meta.permissions().mode();
        if mode_too_open(mode) {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{:o}", mode & 0o777),
                "the service-account key is readable by group or others; run `chmod 600 {}`",
                path.display()
            );
        }
    }
}

#[cfg(not(unix))]
async fn warn_if_readable_by_others(_path: &Path) {}

/// Validates a service-account key, listing every problem at once.
pub fn parse_key(json: &str, source_desc: &str) -> Result<LoadedKey, CredentialsError> {
    let invalid = |problems: String| CredentialsError::Invalid {
        source_desc: source_desc.to_string(),
        problems,
    };
    let mut value: serde_json::Value = serde_json::from_str(json).map_err(|e| {
        invalid(format!(
            "it is not JSON ({e}); download a JSON key for the service account"
        ))
    })?;
    let Some(obj) = value.as_object_mut() else {
        return Err(invalid("it is JSON but not an object".into()));
    };
    let mut problems = Vec::new();
    match obj.get("type").and_then(|t| t.as_str()) {
        Some("service_account") => {}
        Some("authorized_user") => problems.push(
            "\"type\" is \"authorized_user\" (a person's login from `gcloud auth \
             application-default login`), expected \"service_account\": create a key for a \
             service account"
                .to_string(),
        ),
        Some(other) => problems.push(format!(
            "\"type\" is \"{other}\", expected \"service_account\""
        )),
        None => problems.push("\"type\" is missing, expected \"service_account\"".into()),
    }
    match obj.get("private_key").and_then(|k| k.as_str()) {
        None => problems.push("\"private_key\" is missing".into()),
        Some(k) if !k.contains("-----BEGIN") || !k.contains("PRIVATE KEY-----") => {
            problems.push("\"private_key\" is not a PEM private key".into())
        }
        Some(_) => {}
    }
    let client_email = obj
        .get("client_email")
        .and_then(|e| e.as_str())
        .filter(|e| !e.is_empty())
        .map(str::to_owned);
    if client_email.is_none() {
        problems.push("\"client_email\" is missing".into());
    }
    match obj.get("token_uri") {
        None | Some(serde_json::Value::Null) => {
            obj.insert("token_uri".into(), GOOGLE_TOKEN_URI.into());
        }
        Some(serde_json::Value::String(uri))
            if uri.starts_with("https://") || uri.starts_with("http://") => {}
        Some(other) => problems.push(format!("\"token_uri\" is not a URL: {other}")),
    }
    if !problems.is_empty() {
        return Err(invalid(problems.join("; ")));
    }
    let key: ServiceAccountKey =
        serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
    Ok(LoadedKey {
        client_email: client_email.unwrap_or_default(),
        key,
    })
}

/// The connector both the hub and the token client use.
pub(crate) type Connector = HttpsConnector<HttpConnector>;

/// Builds the token source for `credentials` (whose key, if any, `key` already holds).
pub(crate) async fn token_source(
    credentials: &Credentials,
    key: Option<&LoadedKey>,
    connector: Connector,
    timeout: Duration,
) -> Result<TokenSource, CredentialsError> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, String>(connector);
    let client = CustomHyperClientBuilder::from(client);
    let source_desc = credentials.to_string();
    let setup = |e: std::io::Error| CredentialsError::Setup {
        source_desc: source_desc.clone(),
        message: e.to_string(),
    };
    let authenticator = match key {
        Some(loaded) => ServiceAccountAuthenticator::with_client(loaded.key.clone(), client)
            .build()
            .await
            .map_err(|e| CredentialsError::Invalid {
                // The flow parses the PEM here: "Error reading key from PEM".
                source_desc: source_desc.clone(),
                problems: format!("\"private_key\" cannot be used: {e}"),
            })?,
        None => {
            // Off Google Cloud nothing answers there: say so now, rather than after the first
            // call's token fetch has been retried for half a minute.
            if let Err(why) = metadata_server_at(&metadata_addr(), METADATA_PROBE_TIMEOUT).await {
                return Err(CredentialsError::Setup {
                    source_desc: source_desc.clone(),
                    message: format!(
                        "no credentials found: the `credentials` setting (or SHEETQ_CREDENTIALS) is not set, {CREDENTIALS_ENV} is not set, and {why} (this is not a Google Cloud VM with a service account attached); set credentials = \"/path/to/key.json\" in the config"
                    ),
                });
            }
            let opts = ApplicationDefaultCredentialsFlowOpts::default();
            match ApplicationDefaultCredentialsAuthenticator::with_client(opts, client).await {
                ApplicationDefaultCredentialsTypes::InstanceMetadata(b) => {
                    b.build().await.map_err(setup)?
                }
                ApplicationDefaultCredentialsTypes::ServiceAccount(b) => {
                    b.build().await.map_err(setup)?
                }
            }
        }
    };
    Ok(TokenSource::new(
        Arc::new(authenticator),
        timeout,
        source_desc.clone(),
    ))
}

/// How long the metadata server may take to accept a connection before sheetq concludes
/// there is none (Google's own client libraries wait a few seconds at most too).
const METADATA_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the metadata server is: `GCE_METADATA_HOST` if set (as Google's libraries honour
/// it), else `metadata.google.internal:80`, the name the token flow itself asks (it resolves
/// only on Google Cloud).
fn metadata_addr() -> String {
    let host = std::env::var("GCE_METADATA_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "metadata.google.internal".to_string());
    if host.contains(':') {
        host
    } else {
        format!("{host}:80")
    }
}

/// Whether the metadata server at `addr` accepts a connection within `timeout`; if not, why.
async fn metadata_server_at(addr: &str, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("no metadata server at {addr} ({e})")),
        Err(_) => Err(format!(
            "no metadata server answered at {addr} within {timeout:?}"
        )),
    }
}

/// Why no access token could be had. Carried inside the hub's `MissingToken` error and
/// recognised again when the call's failure is classified.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("no access token from {source_desc} within {timeout:?}")]
    Timeout {
        source_desc: String,
        timeout: Duration,
    },
    #[error("no access token from {source_desc}: {message}")]
    Failed {
        source_desc: String,
        message: String,
        /// The token endpoint rejected the credentials themselves (`invalid_grant`,
        /// `invalid_client`, ...): retrying cannot help, the key must be fixed.
        rejected: bool,
    },
}

impl TokenError {
    pub fn is_permanent(&self) -> bool {
        matches!(self, TokenError::Failed { rejected: true, .. })
    }
}

/// Whether a token-endpoint error says the credentials themselves are bad.
fn credentials_rejected(error: &(dyn StdError + 'static)) -> bool {
    use yup_oauth2::error::AuthErrorCode as C;
    match error.downcast_ref::<yup_oauth2::Error>() {
        Some(yup_oauth2::Error::AuthError(auth)) => matches!(
            auth.error,
            C::InvalidGrant
                | C::InvalidClient
                | C::UnauthorizedClient
                | C::AccessDenied
                | C::InvalidScope
        ),
        Some(yup_oauth2::Error::UserError(_)) => true,
        _ => false,
    }
}

type TokenFuture<'a> = Pin<
    Box<dyn Future<Output = Result<Option<String>, Box<dyn StdError + Send + Sync>>> + Send + 'a>,
>;

/// Something that hands out access tokens: yup-oauth2's authenticator, or a test double.
pub trait FetchToken: Send + Sync {
    /// A token for `scopes`; with `force_refresh` a new one even if one is cached.
    fn fetch<'a>(&'a self, scopes: &'a [&'a str], force_refresh: bool) -> TokenFuture<'a>;
}

impl<C> FetchToken for yup_oauth2::authenticator::Authenticator<C>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    fn fetch<'a>(&'a self, scopes: &'a [&'a str], force_refresh: bool) -> TokenFuture<'a> {
        Box::pin(async move {
            let token = if force_refresh {
                self.force_refreshed_token(scopes).await
            } else {
                self.token(scopes).await
            };
            token
                .map(|t| t.token().map(str::to_owned))
                .map_err(|e| Box::new(e) as Box<dyn StdError + Send + Sync>)
        })
    }
}

/// The hub's token source: asks only for [`SPREADSHEETS_SCOPE`], bounds the fetch with its
/// own timeout (yup-oauth2 drops the one given to a custom client) and turns failures into
/// [`TokenError`]s that say where the token should have come from.
///
/// It also works around a trap in yup-oauth2 12: the service-account flow does not look at
/// the HTTP status of the token reply, so a 5xx whose JSON body is not an OAuth error is
/// cached as a token without an access token and without expiry, and every later call would
/// get "no token" until restart. A token without an access token is therefore fetched again
/// with `force_refresh`, which replaces the cache entry.
#[derive(Clone)]
pub struct TokenSource {
    inner: Arc<dyn FetchToken>,
    timeout: Duration,
    source_desc: Arc<str>,
    /// The scopes each fetch asked the inner source for, for tests and `check`.
    requested: Arc<Mutex<Vec<Vec<String>>>>,
    /// Set when the API refused the cached token (401): the next fetch gets a new one.
    stale: Arc<AtomicBool>,
}

impl TokenSource {
    pub fn new(inner: Arc<dyn FetchToken>, timeout: Duration, source_desc: String) -> Self {
        Self {
            inner,
            timeout,
            source_desc: source_desc.into(),
            requested: Arc::default(),
            stale: Arc::default(),
        }
    }

    /// The API answered 401 to the current token (revoked, or the key was rotated): fetch a
    /// new one next time instead of serving the cached one until it expires an hour later.
    pub fn invalidate(&self) {
        self.stale.store(true, Ordering::Relaxed);
    }

    /// Every scope list this source has asked for recently (at most the last 64).
    pub fn requested_scopes(&self) -> Vec<Vec<String>> {
        self.requested.lock().map(|r| r.clone()).unwrap_or_default()
    }

    async fn fetch_spreadsheets_token(&self) -> Result<String, TokenError> {
        const SCOPES: &[&str] = &[SPREADSHEETS_SCOPE];
        let source_desc = || self.source_desc.to_string();
        let fetch = async {
            let stale = self.stale.swap(false, Ordering::Relaxed);
            for force_refresh in [stale, true] {
                if let Ok(mut r) = self.requested.lock() {
                    if r.len() >= 64 {
                        r.remove(0);
                    }
                    r.push(vec![SPREADSHEETS_SCOPE.to_string()]);
                }
                match self.inner.fetch(SCOPES, force_refresh).await {
                    Ok(Some(token)) => return Ok(token),
                    Ok(None) => continue,
                    Err(e) => {
                        return Err(TokenError::Failed {
                            rejected: credentials_rejected(e.as_ref()),
                            message: e.to_string(),
                            source_desc: source_desc(),
                        })
                    }
                }
            }
            Err(TokenError::Failed {
                source_desc: source_desc(),
                message: "the reply carried no access token".into(),
                rejected: false,
            })
        };
        match tokio::time::timeout(self.timeout, fetch).await {
            Ok(result) => result,
            Err(_) => Err(TokenError::Timeout {
                source_desc: source_desc(),
                timeout: self.timeout,
            }),
        }
    }
}

impl GetToken for TokenSource {
    fn get_token<'a>(&'a self, scopes: &'a [&str]) -> TokenFuture<'a> {
        Box::pin(async move {
            if scopes != [SPREADSHEETS_SCOPE] {
                tracing::debug!(?scopes, "narrowing requested scopes to spreadsheets only");
            }
            self.fetch_spreadsheets_token()
                .await
                .map(Some)
                .map_err(|e| Box::new(e) as Box<dyn StdError + Send + Sync>)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

    fn key_json(fields: serde_json::Value) -> String {
        fields.to_string()
    }

    fn good() -> serde_json::Value {
        serde_json::json!({
            "type": "service_account",
            "private_key": PEM,
            "client_email": "sheetq@example.iam.gserviceaccount.com",
            "token_uri": "http://127.0.0.1:1/token",
        })
    }

    #[test]
    fn resolution_order_is_config_then_env_then_adc() {
        let cfg = Path::new("/etc/sheetq/key.json");
        assert_eq!(
            Credentials::resolve_from(Some(cfg), Some("/env/key.json".into())),
            Credentials::KeyFile {
                path: cfg.into(),
                from_env: false
            }
        );
        assert_eq!(
            Credentials::resolve_from(None, Some("/env/key.json".into())),
            Credentials::KeyFile {
                path: "/env/key.json".into(),
                from_env: true
            }
        );
        assert_eq!(
            Credentials::resolve_from(None, Some("".into())),
            Credentials::ApplicationDefault
        );
        assert_eq!(
            Credentials::resolve_from(None, None),
            Credentials::ApplicationDefault
        );
    }

    #[test]
    fn accepts_a_service_account_key_and_defaults_token_uri() {
        let mut v = good();
        v.as_object_mut().map(|o| o.remove("token_uri"));
        let loaded = parse_key(&key_json(v), "key file k.json").expect("valid key");
        assert_eq!(
            loaded.client_email,
            "sheetq@example.iam.gserviceaccount.com"
        );
        assert_eq!(loaded.key.token_uri, GOOGLE_TOKEN_URI);
    }

    fn problems(json: &str) -> String {
        match parse_key(json, "key file /etc/sheetq/key.json") {
            Ok(_) => panic!("accepted an invalid key: {json}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn names_the_file_and_every_problem() {
        let msg = problems("not json");
        assert!(msg.contains("/etc/sheetq/key.json"), "{msg}");
        assert!(msg.contains("not JSON"), "{msg}");

        let msg = problems(&key_json(serde_json::json!({"type": "authorized_user"})));
        assert!(msg.contains("\"authorized_user\""), "{msg}");
        assert!(msg.contains("\"private_key\" is missing"), "{msg}");
        assert!(msg.contains("\"client_email\" is missing"), "{msg}");

        let mut v = good();
        v["private_key"] = "abc".into();
        let msg = problems(&key_json(v));
        assert!(msg.contains("not a PEM private key"), "{msg}");
    }

    #[tokio::test]
    async fn a_metadata_server_that_is_not_there_is_told_at_once() {
        // A port nothing listens on: refused at once, as off Google Cloud.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.to_string())
            .unwrap_or_else(|e| panic!("{e}"));
        let why = metadata_server_at(&closed, Duration::from_secs(2))
            .await
            .err()
            .unwrap_or_else(|| panic!("nothing listens at {closed}"));
        assert!(
            why.contains(&closed),
            "the address it looked at is named: {why}"
        );
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = open.local_addr().map(|a| a.to_string()).unwrap_or_default();
        assert_eq!(
            metadata_server_at(&addr, Duration::from_secs(2)).await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn missing_file_is_named_with_the_fix() {
        let creds = Credentials::KeyFile {
            path: "/nonexistent/sheetq-key.json".into(),
            from_env: true,
        };
        let msg = load_key(&creds).await.err().map(|e| e.to_string());
        let msg = msg.unwrap_or_default();
        assert!(msg.contains("/nonexistent/sheetq-key.json"), "{msg}");
        assert!(msg.contains(CREDENTIALS_ENV), "{msg}");
    }

    /// Collects what tracing writes, for asserting on warnings.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut b) = self.0.lock() {
                b.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[cfg(unix)]
    #[tokio::test(flavor = "current_thread")]
    async fn a_key_readable_by_others_is_used_with_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let path = dir.path().join("key.json");
        std::fs::write(&path, key_json(good())).unwrap_or_else(|e| panic!("write: {e}"));
        let set_mode = |mode| {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("chmod: {e}"))
        };
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let creds = Credentials::KeyFile {
            path: path.clone(),
            from_env: false,
        };
        let text = || {
            String::from_utf8_lossy(&captured.0.lock().map(|b| b.clone()).unwrap_or_default())
                .into_owned()
        };

        set_mode(0o600);
        assert!(matches!(load_key(&creds).await, Ok(Some(_))));
        assert!(
            !text().contains("chmod 600"),
            "no warning for 0600: {}",
            text()
        );

        set_mode(0o644);
        assert!(
            matches!(load_key(&creds).await, Ok(Some(_))),
            "an open key still works"
        );
        let log = text();
        assert!(log.contains("WARN"), "{log}");
        assert!(
            log.contains(&format!("chmod 600 {}", path.display())),
            "{log}"
        );
    }

    #[test]
    fn group_or_other_bits_are_too_open() {
        assert!(!mode_too_open(0o100600));
        assert!(!mode_too_open(0o100400));
        assert!(mode_too_open(0o100640));
        assert!(mode_too_open(0o100604));
    }

    /// A token source that records the scopes it was asked for; the first `empty` fetches
    /// return no access token (yup-oauth2's cached 5xx reply).
    type Seen = Vec<(Vec<String>, bool)>;

    #[derive(Clone, Default)]
    struct Recording {
        seen: Arc<Mutex<Seen>>,
        empty: Arc<Mutex<u32>>,
    }

    impl FetchToken for Recording {
        fn fetch<'a>(&'a self, scopes: &'a [&'a str], force: bool) -> TokenFuture<'a> {
            if let Ok(mut s) = self.seen.lock() {
                s.push((scopes.iter().map(|s| s.to_string()).collect(), force));
            }
            let empty = self
                .empty
                .lock()
                .map(|mut n| {
                    let was = *n;
                    *n = n.saturating_sub(1);
                    was > 0
                })
                .unwrap_or(false);
            Box::pin(async move { Ok((!empty).then(|| "tok".to_string())) })
        }
    }

    #[tokio::test]
    async fn only_the_spreadsheets_scope_is_ever_requested() {
        let rec = Recording::default();
        let source = TokenSource::new(Arc::new(rec.clone()), Duration::from_secs(1), "t".into());
        let drive = "https://www.googleapis.com/auth/drive";
        let token = source.get_token(&[drive]).await.ok().flatten();
        assert_eq!(token.as_deref(), Some("tok"));
        let seen = rec.seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(seen, vec![(vec![SPREADSHEETS_SCOPE.to_string()], false)]);
        assert_eq!(
            source.requested_scopes(),
            vec![vec![SPREADSHEETS_SCOPE.to_string()]]
        );
    }

    #[tokio::test]
    async fn a_cached_token_without_access_token_is_refreshed() {
        let rec = Recording::default();
        if let Ok(mut n) = rec.empty.lock() {
            *n = 1;
        }
        let source = TokenSource::new(Arc::new(rec.clone()), Duration::from_secs(1), "t".into());
        let token = source.get_token(&[SPREADSHEETS_SCOPE]).await.ok().flatten();
        assert_eq!(token.as_deref(), Some("tok"));
        let forced: Vec<bool> = rec
            .seen
            .lock()
            .map(|s| s.iter().map(|(_, f)| *f).collect())
            .unwrap_or_default();
        assert_eq!(forced, vec![false, true]);

        source.invalidate();
        let token = source.get_token(&[SPREADSHEETS_SCOPE]).await.ok().flatten();
        assert_eq!(token.as_deref(), Some("tok"));
        let forced: Vec<bool> = rec
            .seen
            .lock()
            .map(|s| s.iter().map(|(_, f)| *f).collect())
            .unwrap_or_default();
        assert_eq!(
            forced,
            vec![false, true, true],
            "a refused token is replaced"
        );
    }

    struct Never;

    impl FetchToken for Never {
        fn fetch<'a>(&'a self, _scopes: &'a [&'a str], _force: bool) -> TokenFuture<'a> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_token_fetch_times_out() {
        let source = TokenSource::new(Arc::new(Never), Duration::from_secs(5), "metadata".into());
        let err = source
            .get_token(&[SPREADSHEETS_SCOPE])
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("within 5s"), "{err}");
    }
}
