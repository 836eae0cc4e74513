//! sheetq runs the jobs of a Google Sheets "checkbox panel": it claims rows of the hidden
//! `_ジョブキュー` sheet under a local mutex plus a sheet-side lease cell, runs the command
//! configured for each, and writes the outcome back to the queue row and the panel row.
//!
//! # Layout
//! - [`a1`]: A1 notation, quoting titles and parsing ranges into grid coordinates.
//! - [`commands`]: the configured commands, the checks on a job's args, and running a job
//!   (built-ins, `exec` process groups, timeouts, the heavy gate) into an outcome.
//! - [`sheets`]: the port to a spreadsheet (`Sheets` trait), its value types and errors.

pub mod a1;
pub mod commands;
pub mod sheets;
