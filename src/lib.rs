//! sheetq runs the jobs of a Google Sheets "checkbox panel": it claims rows of the hidden
//! `_ジョブキュー` sheet under a local mutex plus a sheet-side lease cell, runs the command
//! configured for each, and writes the outcome back to the queue row and the panel row.
//!
//! # Layout
//! - [`a1`]: A1 notation, quoting titles and parsing ranges into grid coordinates.
//! - [`sheet_time`]: time in sheet cells: date serials and typed dates to instants in the
//!   spreadsheet's time zone, instants back to serials, and the short panel/log time texts.
//! - [`sheets`]: the port to a spreadsheet (`Sheets` trait), its value types and errors.

pub mod a1;
pub mod sheet_time;
pub mod sheets;
