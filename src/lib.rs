//! sheetq runs the jobs of a Google Sheets "checkbox panel": it claims rows of the hidden
//! `_ジョブキュー` sheet under a local mutex plus a sheet-side lease cell, runs the command
//! configured for each, and writes the outcome back to the queue row and the panel row.
//!
//! # Layout
//! - [`a1`]: A1 notation, quoting titles and parsing ranges into grid coordinates.
//! - [`emulator`]: a Google Sheets API v4 + OAuth2 token emulator on loopback, for tests and
//!   local runs without Google (store, HTTP server, fault injection, request log).
//! - [`sheets`]: the port to a spreadsheet (`Sheets` trait), its value types and errors.
//!   - [`sheets::google`]: the Google implementation (`google-sheets4`): requests, replies,
//!     timeouts, error classification, retries; `google/convert.rs` the pure type mapping.
//!   - [`sheets::auth`]: credentials (key file, `GOOGLE_APPLICATION_CREDENTIALS`, metadata
//!     server), key validation, the spreadsheets-only token source.
//!   - [`sheets::retry`]: retry policy (exponential backoff, full jitter) and its loop.
//!   - [`sheets::budget`]: the client-side requests-per-minute budget (token bucket).
//!   - [`sheets::stats`]: request/retry/throttling counters for metrics.
//!   - [`sheets::dry_run`]: the `--dry-run` decorator: reads pass, writes are only logged.

pub mod a1;
pub mod emulator;
pub mod sheets;
