#!/usr/bin/env bash
# Installs sheetq as a systemd service on this machine. Safe to run again: it only changes
# what differs, never overwrites an existing config, and says what it did.
#
#   sudo deploy/install.sh [--binary PATH] [--key PATH] [--start] [--dry-run]
#
# What it does:
#   1. installs the binary as /usr/local/bin/sheetq
#   2. creates the `sheetq` system user and group (no login, no home)
#   3. creates /etc/sheetq (root:sheetq 0750) and, if absent, /etc/sheetq/sheetq.toml from
#      sheetq.example.toml
#   4. with --key, installs the service account key as /etc/sheetq/key.json (root 0600: only
#      systemd reads it, and hands it to the service through LoadCredential=)
#   5. installs /etc/systemd/system/sheetq.service and enables it
#   6. with --start, (re)starts the service
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

binary="$root/target/release/sheetq"
key=""
start=0
dry_run=0

bin_dest=/usr/local/bin/sheetq
etc_dir=/etc/sheetq
config_dest=$etc_dir/sheetq.toml
key_dest=$etc_dir/key.json
unit_src="$here/sheetq.service"
unit_dest=/etc/systemd/system/sheetq.service
example="$root/sheetq.example.toml"

usage() {
    # The comment block at the top of this file, and nothing after it.
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
}

while [[ $# -gt 0 ]]; do
    case "$1" in
        --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
        --key) key="${2:?--key needs a path}"; shift 2 ;;
        --start) start=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

say() { printf '%s\n' "$*"; }

# Runs a command, or only shows it under --dry-run.
run() {
    if [[ $dry_run -eq 1 ]]; then
        say "  would run: $*"
    else
        say "  + $*"
        "$@"
    fi
}

fail() {
    printf 'install.sh: %s\n' "$*" >&2
    exit 1
}

# Installs $1 as $2 with mode $3 and owner $4, unless $2 already has that content.
install_file() {
    local src=$1 dest=$2 mode=$3 owner=$4
    if [[ -f $dest ]] && cmp -s "$src" "$dest"; then
        say "unchanged: $dest"
        run chmod "$mode" "$dest"
        run chown "$owner" "$dest"
        return 1
    fi
    say "installing $dest"
    run install -D -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$src" "$dest"
}

if [[ $dry_run -eq 0 && $EUID -ne 0 ]]; then
    fail "run as root (sudo $0 ...), or with --dry-run to see what it would do"
fi
[[ -f $binary ]] || fail "no binary at $binary: run 'make build' (or cargo build --release) first, or pass --binary PATH"
[[ -f $unit_src ]] || fail "missing $unit_src"
[[ -f $example ]] || fail "missing $example"
[[ -z $key || -f $key ]] || fail "no key file at $key"
[[ $dry_run -eq 1 ]] && say "dry run: nothing is changed"

# 1. The binary.
install_file "$binary" "$bin_dest" 0755 root:root || true

# 2. The user. No home and no shell: it only runs the daemon and its commands.
if getent passwd sheetq >/dev/null; then
    say "unchanged: user sheetq exists"
else
    say "creating system user sheetq"
    run useradd --system --user-group --home-dir /var/lib/sheetq --no-create-home \
        --shell /usr/sbin/nologin --comment "sheetq daemon" sheetq
fi

# 3. Config directory and config. An existing config is never touched.
if [[ -d $etc_dir ]]; then
    say "unchanged: $etc_dir exists"
else
    say "creating $etc_dir"
fi
run install -d -m 0750 -o root -g sheetq "$etc_dir"
if [[ -f $config_dest ]]; then
    say "unchanged: $config_dest exists (compare with $example for new settings)"
else
    say "creating $config_dest from $(basename "$example"): set spreadsheet_id and your commands"
    run install -m 0640 -o root -g sheetq "$example" "$config_dest"
fi

# 4. The key: root-only; systemd passes a copy to the service.
if [[ -n $key ]]; then
    install_file "$key" "$key_dest" 0600 root:root || true
elif [[ -f $key_dest ]]; then
    say "unchanged: $key_dest exists"
    run chmod 0600 "$key_dest"
    run chown root:root "$key_dest"
else
    say "note: no $key_dest yet; copy the service account key there (or rerun with --key PATH)"
fi

# 5. The unit.
unit_changed=0
if install_file "$unit_src" "$unit_dest" 0644 root:root; then
    unit_changed=1
fi
# systemd is running when /run/systemd/system exists (sd_booted(3)); `enable` also works
# without it (e.g. while building an image), reload and restart do not.
booted=0
[[ -d /run/systemd/system ]] && booted=1
if command -v systemctl >/dev/null; then
    if [[ $unit_changed -eq 1 && $booted -eq 1 ]]; then
        run systemctl daemon-reload
    fi
    if systemctl is-enabled --quiet sheetq.service 2>/dev/null; then
        say "unchanged: sheetq.service is enabled"
    else
        say "enabling sheetq.service (starts at boot)"
        run systemctl enable sheetq.service
    fi
    # 6. Start or restart, so a new binary or unit takes effect.
    if [[ $start -eq 1 && $booted -eq 1 ]]; then
        say "restarting sheetq.service"
        run systemctl restart sheetq.service
    elif [[ $start -eq 1 ]]; then
        say "note: systemd is not running here; not starting sheetq.service"
    fi
else
    say "note: systemctl not found; the unit is installed but not enabled"
fi

say ""
say "next steps:"
say "  edit $config_dest (spreadsheet_id, [commands])"
say "  sheetq check --config $config_dest"
if [[ $start -eq 0 ]]; then
    say "  systemctl start sheetq    (or rerun with --start)"
fi
say "  journalctl -u sheetq -f"
