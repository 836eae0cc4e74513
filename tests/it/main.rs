//! The integration test binary: one binary, one module per area (STYLE.md), sharing
//! [`support`] to start the emulator and talk to it through the real client crates.

mod cli;
mod commands;
mod continuation;
mod emulator;
mod sheets_google;
mod support;
