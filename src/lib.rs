//! sheetq runs the jobs of a Google Sheets "checkbox panel": it claims rows of the hidden
//! `_ジョブキュー` sheet under a local mutex plus a sheet-side lease cell, runs the command
//! configured for each, and writes the outcome back to the queue row and the panel row.
//!
//! # Layout
//! - [`a1`]: A1 notation, quoting titles and parsing ranges into grid coordinates.
//! - [`emulator`]: a Google Sheets API v4 + OAuth2 token emulator on loopback, for tests and
//!   local runs without Google (store, HTTP server, fault injection, request log).
//! - [`sheets`]: the port to a spreadsheet (`Sheets` trait), its value types and errors.

pub mod a1;
pub mod emulator;
pub mod sheets;
