//! The integration test binary: one binary, one module per area, sharing
//! [`support`] to start the emulator, run daemons against it and read the sheet back.

mod access;
mod admin;
mod approvals;
mod apps_script;
mod archive;
mod bench;
mod browser;
mod cancel;
mod check;
mod cli;
mod column_order;
mod commands;
mod continuation;
mod daemon;
mod emulator;
mod emulator_metadata;
mod emulator_protection;
mod emulator_rows;
mod guards;
mod hold_off;
mod inert;
mod joblog;
mod notifications;
mod outage;
mod panel_sync;
mod panels;
mod people;
mod probe;
mod provenance;
mod retries;
mod schedules;
mod secrets;
mod sheets_google;
mod spreadsheets;
mod support;
