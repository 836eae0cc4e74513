//! The OAuth2 side of the service-account flow: the test-only key pair, the credentials JSON
//! that points `token_uri` at the emulator, the token endpoint's JWT-bearer grant
//! (https://developers.google.com/identity/protocols/oauth2/service-account#httprest) and the
//! bearer tokens it issues, to service accounts and to people (`people.rs`).
//!
//! The key pair in `test-key.pem` / `test-key.pub.pem` exists only for the emulator. It is
//! public by design and must never be trusted anywhere else.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
use serde_json::{json, Value as Json};

/// The test-only private key (PKCS#8 PEM), as a credentials file carries it.
pub const TEST_PRIVATE_KEY: &str = include_str!("test-key.pem");
/// The public half, against which the token endpoint verifies signatures.
pub const TEST_PUBLIC_KEY: &str = include_str!("test-key.pub.pem");
/// The same public key as DER `RSAPublicKey` (PKCS#1), the form `ring` verifies with:
/// `openssl rsa -pubin -in test-key.pub.pem -RSAPublicKey_out -outform DER`.
const TEST_PUBLIC_KEY_DER: &[u8] = include_bytes!("test-key.pub.der");
/// The service account the credentials name.
pub const CLIENT_EMAIL: &str = "sheetq-emulator@sheetq-emulator.iam.gserviceaccount.com";
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// Lifetime of an issued access token, as Google's (`expires_in: 3599`–`3600`).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// Renders a service-account credentials JSON whose `token_uri` is `<base_url>token`.
/// `base_url` must end with `/`.
pub fn credentials_json(base_url: &str) -> String {
    credentials_json_for(base_url, CLIENT_EMAIL)
}

/// Like [`credentials_json`], for another service account of the emulator's project (same
/// test key); the account must be known to the token endpoint ([`Auth::add_account`]).
pub fn credentials_json_for(base_url: &str, client_email: &str) -> String {
    let v = json!({
        "type": "service_account",
        "project_id": "sheetq-emulator",
        "private_key_id": "0000000000000000000000000000000000emulator",
        "private_key": TEST_PRIVATE_KEY,
        "client_email": client_email,
        "client_id": "100000000000000000000",
        "auth_uri": format!("{base_url}auth"),
        "token_uri": format!("{base_url}token"),
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/sheetq-emulator",
        "universe_domain": "googleapis.com",
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// The token endpoint's reply for an issued token, as Google's:
/// `{"access_token": "...", "token_type": "Bearer", "expires_in": 3600}`.
pub fn token_reply(token: &str) -> Json {
    json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": TOKEN_LIFETIME.as_secs(),
    })
}

/// Why a token request was refused: OAuth2's `{"error", "error_description"}` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantError {
    pub error: &'static str,
    pub description: String,
}

impl GrantError {
    fn grant(d: impl Into<String>) -> Self {
        GrantError {
            error: "invalid_grant",
            description: d.into(),
        }
    }

    pub fn body(&self) -> Json {
        json!({ "error": self.error, "error_description": self.description })
    }
}

/// An issued access token: until when it is good and the account it was issued to (a
/// service account or a person: the "user" Google counts quota for).
struct Issued {
    expires: Instant,
    user: String,
}

/// Issued tokens, the service accounts that may ask for them, and the key that verifies
/// grants.
pub struct Auth {
    key: UnparsedPublicKey<&'static [u8]>,
    /// Known service accounts; [`CLIENT_EMAIL`] from the start. Every account signs with the
    /// test key: the emulator tells them apart by `iss`, as Google does by key id.
    accounts: Mutex<HashSet<String>>,
    tokens: Mutex<HashMap<String, Issued>>,
}

impl Default for Auth {
    fn default() -> Self {
        Self::new()
    }
}

impl Auth {
    pub fn new() -> Self {
        Auth {
            key: UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, TEST_PUBLIC_KEY_DER),
            accounts: Mutex::new(HashSet::from([CLIENT_EMAIL.to_string()])),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Lets the token endpoint issue tokens to another service account of the project.
    pub fn add_account(&self, client_email: &str) {
        if let Ok(mut a) = self.accounts.lock() {
            a.insert(client_email.to_string());
        }
    }

    /// Handles a form-encoded token request body. On success returns the token reply and
    /// the scopes the JWT asked for.
    pub fn grant(&self, form: &[u8]) -> Result<(Json, Vec<String>), GrantError> {
        let mut grant_type = None;
        let mut assertion = None;
        for (k, v) in form_urlencoded::parse(form) {
            match k.as_ref() {
                "grant_type" => grant_type = Some(v.into_owned()),
                "assertion" => assertion = Some(v.into_owned()),
                _ => {}
            }
        }
        if grant_type.as_deref() != Some(GRANT_TYPE) {
            return Err(GrantError {
                error: "unsupported_grant_type",
                description: format!("Invalid grant_type: {}", grant_type.unwrap_or_default()),
            });
        }
        let jwt = assertion.ok_or_else(|| GrantError::grant("Missing assertion."))?;
        let claims = self.verify(&jwt)?;
        let scopes: Vec<String> = claims
            .get("scope")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if scopes.is_empty() {
            return Err(GrantError::grant("Missing scope."));
        }
        let user = claims.get("iss").and_then(Json::as_str).unwrap_or_default();
        Ok((token_reply(&self.issue(user)), scopes))
    }

    /// Issues a bearer token to `user` (a service account whose grant was verified, or a
    /// person by e-mail) for [`TOKEN_LIFETIME`]; returns the token.
    pub fn issue(&self, user: &str) -> String {
        let token = format!("ya29.emulator-{}", uuid::Uuid::new_v4().simple());
        let now = Instant::now();
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.retain(|_, t| t.expires > now);
            tokens.insert(
                token.clone(),
                Issued {
                    expires: now + TOKEN_LIFETIME,
                    user: user.to_string(),
                },
            );
        }
        token
    }

    /// Verifies the RS256 signature and the claims Google checks (`iss`, `aud`, `exp`, `iat`).
    /// yup-oauth2 encodes JWT parts as padded base64url, which Google accepts, so padding is
    /// tolerated here too.
    fn verify(&self, jwt: &str) -> Result<Json, GrantError> {
        let parts: Vec<&str> = jwt.split('.').collect();
        let [head, payload, sig] = parts.as_slice() else {
            return Err(GrantError::grant("Invalid JWT: expected three parts."));
        };
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let decode = |s: &str| -> Result<Json, GrantError> {
            let bytes = b64
                .decode(s.trim_end_matches('='))
                .map_err(|_| GrantError::grant("Invalid JWT: bad base64."))?;
            serde_json::from_slice(&bytes).map_err(|_| GrantError::grant("Invalid JWT: bad JSON."))
        };
        let header = decode(head)?;
        if header.get("alg").and_then(Json::as_str) != Some("RS256") {
            return Err(GrantError::grant("Invalid JWT: alg must be RS256."));
        }
        let message = format!("{head}.{payload}");
        let signature = b64
            .decode(sig.trim_end_matches('='))
            .map_err(|_| GrantError::grant("Invalid JWT: bad base64."))?;
        if self.key.verify(message.as_bytes(), &signature).is_err() {
            return Err(GrantError::grant("Invalid JWT Signature."));
        }
        let claims = decode(payload)?;
        let iss = claims.get("iss").and_then(Json::as_str).unwrap_or_default();
        let known = self
            .accounts
            .lock()
            .map(|a| a.contains(iss))
            .unwrap_or(false);
        if !known {
            return Err(GrantError::grant("Invalid JWT: unknown issuer."));
        }
        let aud = claims.get("aud").and_then(Json::as_str).unwrap_or_default();
        if !aud.ends_with("/token") {
            return Err(GrantError::grant(format!(
                "Invalid JWT: audience {aud:?} is not a token URI."
            )));
        }
        let now = chrono::Utc::now().timestamp();
        let exp = claims.get("exp").and_then(Json::as_i64).unwrap_or(0);
        let iat = claims.get("iat").and_then(Json::as_i64).unwrap_or(0);
        if exp < now - 60 || iat > now + 300 || exp - iat > 3600 {
            return Err(GrantError::grant(
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.",
            ));
        }
        Ok(claims)
    }

    /// The account (service account or person) of the live token an `Authorization` header
    /// value carries; `None` when it carries none we issued (or it expired).
    pub fn user(&self, header: Option<&str>) -> Option<String> {
        let token = header.and_then(|h| h.strip_prefix("Bearer "))?;
        let now = Instant::now();
        let tokens = self.tokens.lock().ok()?;
        tokens
            .get(token.trim())
            .filter(|t| t.expires > now)
            .map(|t| t.user.clone())
    }

    /// Whether an `Authorization` header value carries a live token we issued.
    pub fn check(&self, header: Option<&str>) -> bool {
        self.user(header).is_some()
    }

    /// Forgets every issued token, as if they had expired: the next call gets 401 and the
    /// client must fetch a new one.
    pub fn revoke_all(&self) {
        if let Ok(mut t) = self.tokens.lock() {
            t.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    /// An RS256 JWT of `claims`, signed with the PKCS#8 PEM `key`, as yup-oauth2 makes one.
    fn jwt(claims: Json, key: &str) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap_or_else(|e| panic!("key: {e}"));
        let pair =
            ring::signature::RsaKeyPair::from_pkcs8(&der).unwrap_or_else(|e| panic!("key: {e}"));
        let head = b64.encode(json!({ "alg": "RS256", "typ": "JWT" }).to_string());
        let payload = b64.encode(claims.to_string());
        let message = format!("{head}.{payload}");
        let mut sig = vec![0u8; pair.public().modulus_len()];
        pair.sign(
            &ring::signature::RSA_PKCS1_SHA256,
            &ring::rand::SystemRandom::new(),
            message.as_bytes(),
            &mut sig,
        )
        .unwrap_or_else(|e| panic!("sign: {e}"));
        format!("{message}.{}", b64.encode(sig))
    }

    fn form(assertion: &str) -> Vec<u8> {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", GRANT_TYPE)
            .append_pair("assertion", assertion)
            .finish()
            .into_bytes()
    }

    fn claims() -> Json {
        let now = chrono::Utc::now().timestamp();
        json!({ "iss": CLIENT_EMAIL, "aud": "http://127.0.0.1:1/token", "iat": now, "exp": now + 3600,
                "scope": "https://www.googleapis.com/auth/spreadsheets" })
    }

    #[test]
    fn signed_grant_yields_a_token_that_checks() {
        let auth = Auth::new();
        let (reply, scopes) = auth
            .grant(&form(&jwt(claims(), TEST_PRIVATE_KEY)))
            .unwrap_or_else(|e| panic!("grant refused: {e:?}"));
        assert_eq!(scopes, vec!["https://www.googleapis.com/auth/spreadsheets"]);
        let token = reply["access_token"].as_str().unwrap_or_default();
        assert!(auth.check(Some(&format!("Bearer {token}"))));
        assert_eq!(
            auth.user(Some(&format!("Bearer {token}"))).as_deref(),
            Some(CLIENT_EMAIL)
        );
        assert!(!auth.check(Some("Bearer nope")));
        assert!(!auth.check(None));
        auth.revoke_all();
        assert!(!auth.check(Some(&format!("Bearer {token}"))));
    }

    #[test]
    fn another_service_account_gets_tokens_once_known_and_they_name_it() {
        let auth = Auth::new();
        let other = "second@sheetq-emulator.iam.gserviceaccount.com";
        let mut c = claims();
        c["iss"] = json!(other);
        let refused = auth.grant(&form(&jwt(c.clone(), TEST_PRIVATE_KEY))).err();
        assert_eq!(
            refused.map(|e| e.description).as_deref(),
            Some("Invalid JWT: unknown issuer.")
        );
        auth.add_account(other);
        let (reply, _) = auth
            .grant(&form(&jwt(c, TEST_PRIVATE_KEY)))
            .unwrap_or_else(|e| panic!("grant refused: {e:?}"));
        let token = reply["access_token"].as_str().unwrap_or_default();
        assert_eq!(
            auth.user(Some(&format!("Bearer {token}"))).as_deref(),
            Some(other)
        );
    }

    #[test]
    fn tampered_or_foreign_jwt_is_refused() {
        let auth = Auth::new();
        let good = jwt(claims(), TEST_PRIVATE_KEY);
        let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
        let mut evil = claims();
        evil["iss"] = json!("someone@else.iam.gserviceaccount.com");
        parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(&evil).unwrap_or_default());
        let err = auth.grant(&form(&parts.join("."))).err();
        assert_eq!(
            err.map(|e| e.description).as_deref(),
            Some("Invalid JWT Signature.")
        );
    }
}
