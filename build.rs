//! Stamps the binary's `--version` with the commit it was built from and its cargo features:
//! `sheetq 0.1.0 (commit 1a2b3c4d5e6f; features: emulator)`. The commit comes from
//! `SHEETQ_COMMIT` when set (the Docker build, whose context has no `.git`), else from git,
//! else it is `unknown` (a source archive).

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SHEETQ_COMMIT");
    let commit = std::env::var("SHEETQ_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .filter(|c| !c.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_string());
    // Cargo sets CARGO_FEATURE_<NAME> for each enabled feature of this package.
    let features: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_").map(str::to_lowercase))
        .filter(|f| f != "default")
        .collect();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(", ")
    };
    println!(
        "cargo:rustc-env=SHEETQ_LONG_VERSION={} (commit {commit}; features: {features})",
        env!("CARGO_PKG_VERSION")
    );
    // A new commit or checkout changes one of these. Only paths that exist are watched:
    // cargo runs a build script again on every build while a watched path is missing (a
    // fresh clone has no `.git/packed-refs` until git packs its refs).
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
