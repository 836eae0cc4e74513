//! Stamps the binary's `--version` with the commit it was built from (`unknown` outside a
//! git checkout, e.g. from a source archive).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!(
        "cargo:rustc-env=SHEETQ_LONG_VERSION={} (commit {commit})",
        env!("CARGO_PKG_VERSION")
    );
    // A new commit or checkout changes one of these.
    for path in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
