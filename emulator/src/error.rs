//! Errors the emulator answers with, in Google's JSON error shape
//! (https://cloud.google.com/apis/design/errors#http_mapping):
//! `{"error":{"code":400,"message":"...","status":"INVALID_ARGUMENT"}}`.

use serde_json::json;

use super::quota::{Exceeded, Kind, Quota, Scope};

/// An API error: HTTP status, canonical status name and message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {status}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub status: &'static str,
    pub message: String,
    /// Extra `error.details` entries (quota errors carry an `ErrorInfo`).
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        ApiError {
            code,
            status: status_name(code),
            message: message.into(),
            details: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    pub fn not_found() -> Self {
        Self::new(404, "Requested entity was not found.")
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            401,
            "Request is missing required authentication credential. Expected OAuth 2 access \
             token, login cookie or other valid authentication credential. See \
             https://developers.google.com/identity/sign-in/web/devconsole-project.",
        )
    }

    /// The body Google sends with 429 when a per-minute quota is spent, naming the metric
    /// (`Read requests` / `Write requests`) and the limit that was exceeded: per user
    /// (`... per minute per user`) or per project (`... per minute`). Shape from observed
    /// replies; the message text is Google's.
    pub fn quota_exceeded(e: Exceeded) -> Self {
        let (metric, qm) = match e.kind {
            Kind::Read => ("Read", "read_requests"),
            Kind::Write => ("Write", "write_requests"),
        };
        let (limit, limit_id, unit) = match e.scope {
            Scope::User => (
                format!("{metric} requests per minute per user"),
                format!("{metric}RequestsPerMinutePerUser"),
                "1/min/{project}/{user}",
            ),
            Scope::Project => (
                format!("{metric} requests per minute"),
                format!("{metric}RequestsPerMinutePerProject"),
                "1/min/{project}",
            ),
        };
        let mut err = Self::new(
            429,
            format!(
                "Quota exceeded for quota metric '{metric} requests' and limit '{limit}' of \
                 service 'sheets.googleapis.com' for consumer 'project_number:000000000000'."
            ),
        );
        err.details = Some(json!([{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "RATE_LIMIT_EXCEEDED",
            "domain": "googleapis.com",
            "metadata": {
                "quota_metric": format!("sheets.googleapis.com/{qm}"),
                "quota_limit": limit_id,
                "quota_limit_value": e.limit.to_string(),
                "quota_location": "global",
                "quota_unit": unit,
                "consumer": "projects/000000000000",
                "service": "sheets.googleapis.com",
            }
        }]));
        err
    }

    /// A 429 for the per-user limit at Google's value (60), as a fault injects it. `write`
    /// picks the write-requests metric.
    pub fn quota(write: bool) -> Self {
        Self::quota_exceeded(Exceeded {
            kind: Kind::of(write),
            scope: Scope::User,
            limit: if write {
                Quota::google().per_user.write
            } else {
                Quota::google().per_user.read
            },
        })
    }

    /// A fault-injected status with the body Google sends for it.
    pub fn for_status(code: u16, write: bool) -> Self {
        match code {
            429 => Self::quota(write),
            500 => Self::new(500, "Internal error encountered."),
            503 => Self::new(503, "The service is currently unavailable."),
            504 => Self::new(504, "The service is currently unavailable."),
            401 => Self::unauthenticated(),
            404 => Self::not_found(),
            403 => Self::new(403, "The caller does not have permission"),
            other => Self::new(other, "Injected fault."),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        let mut error = json!({
            "code": self.code,
            "message": self.message,
            "status": self.status,
        });
        if let Some(details) = &self.details {
            error["details"] = details.clone();
        }
        json!({ "error": error })
    }
}

/// Canonical status names for HTTP codes (google.rpc.Code mapping).
pub fn status_name(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        500 => "INTERNAL",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "UNKNOWN",
    }
}
