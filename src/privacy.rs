//! What sheetq writes on the VM is its own user's alone: from the start of the process its
//! umask is 077, so `state_dir` is made 0700 and every file in it (the outbox, the
//! notifications' journal, the jobs' output files, the record of failed starts) 0600,
//! whatever umask it was started with (outside the shipped unit, often 022). The jobs it runs
//! get the umask it was started with back, so what a command writes keeps the modes its
//! owner expects. Also the check of an existing `state_dir` open to others.

use std::path::Path;
use std::sync::OnceLock;

use nix::sys::stat::Mode;

/// The umask sheetq was started with, for its jobs.
static STARTED_WITH: OnceLock<Mode> = OnceLock::new();

/// Makes everything this process creates from now on private to its user; call once, first
/// thing. Calling it again keeps the first umask for the jobs.
pub fn keep_files_private() {
    let before = nix::sys::stat::umask(Mode::from_bits_truncate(0o077));
    let _ = STARTED_WITH.set(before);
}

/// The umask a job runs with: the one sheetq was started with (022 when unknown, the usual
/// default, for a library user that never called [`keep_files_private`]).
pub fn job_umask() -> Mode {
    STARTED_WITH
        .get()
        .copied()
        .unwrap_or_else(|| Mode::from_bits_truncate(0o022))
}

/// Why `dir` is open to other local users (its group or others may read, write or enter it),
/// with the fix; `None` when it is not, or does not exist yet.
pub fn open_to_others(dir: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "state_dir {} is open to other users of this machine (mode {mode:o}): they can read finished results, jobs' output and the notifications' journal; run `chmod 700 {}` (sheetq makes it 0700 itself when it creates it)",
            dir.display(),
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_directory_others_may_enter_is_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let why = open_to_others(dir.path()).expect("0755 is open");
        assert!(
            why.contains("mode 755") && why.contains("chmod 700"),
            "{why}"
        );
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(open_to_others(dir.path()), None);
        assert_eq!(open_to_others(&dir.path().join("not-yet")), None);
    }
}
