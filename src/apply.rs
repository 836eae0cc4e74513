//! Carrying out a pure module's plan against the spreadsheet, for the one-shot commands and
//! the daemon's panel jobs alike: each submodule reads what the plan needs, asks the pure
//! module named like it for the plan, and sends it (docs: `src/lib.rs`, Layout, the naming
//! rule).
//!
//! - [`panel`]: a panel sync (`sheetq panels sync|migrate`, a tick on the index): planned by
//!   [`crate::panel::sync`].

pub mod panel;
