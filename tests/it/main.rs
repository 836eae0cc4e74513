//! The integration test binary: one binary, one module per area (STYLE.md), sharing
//! [`support`] to start the emulator and talk to it through the real client crates.

mod commands;
mod daemon;
mod emulator;
mod panels;
mod sheets_google;
mod support;
