//! sheetq runs the jobs of a Google Sheets "checkbox panel": it claims rows of the hidden
//! `_ジョブキュー` sheet under a local mutex plus a sheet-side lease cell, runs the command
//! configured for each, and writes the outcome back to the queue row and the panel row.
//!
//! # Layout
//! - [`a1`]: A1 notation, quoting titles and parsing ranges into grid coordinates.
//! - [`claim`]: the claim rules (stale rows, candidate choice, duplicate guard, waiting
//!   counts) as pure functions over a queue snapshot.
//! - [`config`]: `sheetq.toml`, raw and validated, with `SHEETQ_*` overrides.
//! - [`metrics`]: the daemon's counters and gauges, their Prometheus text, the health verdict
//!   of the poll loop, and the `/metrics` + `/healthz` endpoint.
//! - [`notify`]: systemd readiness, watchdog, stopping and status notifications.
//! - [`queue`]: the `_ジョブキュー` sheet as data: header map, states, rows, ワーカー tags.
//! - [`sheet_time`]: time in sheet cells: date serials and typed dates to instants in the
//!   spreadsheet's time zone, instants back to serials, and the short panel/log time texts.
//! - [`sheets`]: the port to a spreadsheet (`Sheets` trait), its value types and errors.

pub mod a1;
pub mod claim;
pub mod config;
pub mod metrics;
pub mod notify;
pub mod queue;
pub mod sheet_time;
pub mod sheets;
