//! The integration test binary: one binary, one module per area (STYLE.md).

mod sheets_google;
