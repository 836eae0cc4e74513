//! sheetq runs the jobs of a Google Sheets "checkbox panel": it claims rows of the hidden
//! `_ジョブキュー` sheet under a local mutex plus a sheet-side lease cell, runs the command
//! configured for each, and writes the outcome back to the queue row and the panel row.
//!
//! # Layout
//!
//! One naming rule keeps what decides apart from what acts. A module named for a thing of
//! the spreadsheet (`queue`, `claim`, `binding`, `lease`, `workers`, `archive`, `panel`) is
//! pure: it decides from values it is given and does no I/O. What carries a decision out
//! against the spreadsheet bears the same name in one of two places: `daemon/` for the
//! daemon's steps (`daemon/archive.rs` applies `archive`, `daemon/panel.rs` applies `panel`;
//! `claim_pass` and `writeback` apply `claim` and `binding`), and `apply/` for what the
//! one-shot commands share with the daemon (`apply/panel.rs` applies `panel::sync`).
//!
//! Imports go one way, down: no module imports one that imports it back, directly or not,
//! and none imports a module above its own floor (as `farm-studio look` draws them). Text
//! rules every printer shares (`sheet_text`: showing and cutting sheet text), the queue's
//! own conventions (`queue`: states, the retry note, the continuation flag) and a
//! function's definition (`function`) sit low, so the rules above them (`cancel`,
//! `approval`, `claim`, `panel`, `commands`) reach them without reaching up: `claim` knows
//! nothing of approvals (its pass plan carries the daemon's `Turn`s as a type parameter).
//!
//! - [`a1`]: A1 notation, quoting titles and parsing ranges into grid coordinates.
//! - [`admin`]: one-shot operator commands: `init`, `check`, `status`, `enqueue`, `cancel`,
//!   `logs`, `schedules`.
//! - [`apply`]: carrying out a pure module's plan for the one-shot commands and the daemon:
//!   `apply::panel`, a panel sync (read, plan with `panel::sync` and `protection`, one
//!   batch).
//! - [`archive`]: the archive sheet `_ジョブ履歴`: which finished rows are past the retention,
//!   the atomic batch that moves them out of the queue, and the check of where they landed.
//! - [`bench`]: `sheetq bench`: saturation, press latency and idle-poll cost measured on the
//!   embedded spreadsheet under Google's quota, printed as a Markdown table; `fleet`, one
//!   daemon serving many spreadsheets (`--fleet`), and its start from cold (`cold`: `init`,
//!   then `run`, then presses); `schedule`, what a `[[schedules]]` entry costs
//!   (`--schedule-minutes`); `retry`, `inputs` and `rollout` (20 jobs pressed one by one
//!   against one rollout), each on a spreadsheet of its own; `figures` and `process`, what
//!   they share.
//! - [`binding`]: row bindings: the developer metadata that ties a claimed job to its queue
//!   row, its id from the claim token, and the pure decisions of where a result may go.
//! - [`cancel`]: stopping a job on request: the 中止要求 cell (who asked, when) and the
//!   メッセージ a cancelled job ends with.
//! - [`check`]: `sheetq check`: a deployment's problems with their fixes (credentials,
//!   sharing, protection, clock, budget, state directory, programs on the jobs' `PATH`), and
//!   the ones the daemon logs at start-up.
//! - [`claim`]: the claim rules (stale rows, candidate choice, duplicate guard, waiting
//!   counts) as pure functions over a queue snapshot.
//! - [`cli`]: the command line (clap) and its dispatch; the binary's edge.
//! - [`commands`]: the configured commands, the checks on a job's args, the rules a
//!   placeholder value passes to go into argv (`commands::argv`: never an option, never a
//!   control character), and running a job (built-ins, `exec` process groups, timeouts, the
//!   heavy gate) into an outcome.
//! - [`config`]: `sheetq.toml`, raw and validated, with `SHEETQ_*` overrides.
//! - [`daemon`]: one daemon per spreadsheet served, in rooms (docs/design.md §10):
//!   - the loop: `serve` (the spreadsheets of one process, started in turn), `start`
//!     (layout, protection, recovery), `pass` (one poll's steps and the pacing), `poll`
//!     (what one read covers), `claim_work` (whether a poll claims: each capability's
//!     answer, named and tested);
//!   - the claim commit: `claim_pass` (acquire, take in presses, commit, settle), `ledger`
//!     (the typed ledger: each section adds its entries and reads the reply back through the
//!     `Place` it got, via `ReadBack`), `effects` (what a settle asks for, and the one
//!     applier);
//!   - one room a capability, each with its entries, its pure settle returning effects, and
//!     its state: `stale` (timeouts), `claims` (who may start what, the claim's entry and log
//!     row, `settle_claims`), `cancels` (■ and 中止要求; `Stops`), `approvals`, `schedules`,
//!     `rollouts` (waves appended, stops, progress, the rollout row's start and end),
//!     `kept_lease` (pure `may_keep`/`may_commit_under`), `lease_calls` (acquire, release,
//!     fences; `Held`), `jobs` (spawn, stop, finish, drain; `Jobs`), `job_log` (`Logs`),
//!     `notices`, `fleet` (heartbeat, holds, the account's budget; `Fleet`), `archive`,
//!     `panel`, `guards`, `provenance`, `hold_off`;
//!   - writing: `writeback` (results placed and verified, recovery, continuation),
//!     `through` (writes through bindings, repairs, writes in doubt; `Pending`), `cells`
//!     (addresses);
//!   - `shared`: what the daemons of one process share (the slot pool, each account's
//!     budget split; [`daemon::run_spreadsheets`]).
//!
//!   `Daemon` holds what the process owns and the rooms' state structs; `Served` what it
//!   keeps of the spreadsheet. Each pass's read (`Poll`) and decisions (`Commit`, `Effect`)
//!   live for that pass.
//! - [`demo`]: `sheetq demo`, the whole flow on the embedded spreadsheet.
//! - [`emulator`]: the `sheetq-emulator` crate of this workspace (`emulator/`, its own
//!   README), re-exported: a Google Sheets API v4 + OAuth2 token emulator on loopback, for
//!   tests and local runs without Google (store, HTTP server, fault injection, request log,
//!   web view). It imports nothing of sheetq (its A1 reading is its own, held to sheetq's
//!   by `tests/it/two_readings.rs`). It, the demo and the bench are the default-on cargo
//!   feature `emulator`; a production build leaves them out (`--no-default-features`).
//!   Inside, imports go one way: `store` (the data, metadata entries included) at the
//!   bottom; `request`, `metadata`, `data_filter`, `lookup` and the operations (`batch`,
//!   `values`, `by_filter`, …) above it; `shared` below `admin`, `web` and `http`, which
//!   routes on top. Its `lib.rs` lists every module.
//! - [`pause`]: the note a daemon leaves in `state_dir` while it holds a spreadsheet off,
//!   which `sheetq status` on the same machine shows.
//! - [`function`]: one `[[functions]]` entry (what it runs, who may press, approve and stop
//!   it) and whom an `allow` entry names: data below both the catalog and the approval rule.
//! - [`inputs`]: a function's typed inputs (choice, text, number, bool, date): their
//!   definitions' problems, a job's values checked, typed and defaulted by them (a
//!   `choices_from` list as the daemon's read found it), and their panel cells' values and
//!   rules. The cells themselves are `panel::sync`'s, the press's capture `panel::intake`'s.
//! - [`joblog`]: what a job printed: the capture of an `exec` job's merged output, the hidden
//!   sheet `_ジョブログ` (its columns by name, the binding of a job's log row), the links to a
//!   log row that survive sorts, and the full output under `state_dir/logs`.
//! - [`journal`]: a durable local journal of keyed records (JSON lines, fsync'd appends,
//!   compaction on open), under the result outbox and the notification outbox.
//! - [`lease`]: the `_ワーカー!B1` lease cell: its value format and compare-and-swap requests.
//! - [`logging`]: log line formats beyond tracing-subscriber's: JSON with Cloud Logging's
//!   `severity`.
//! - [`metrics`]: the daemon's counters and gauges, their Prometheus text, the health verdict
//!   of the poll loop (liveness: it turns; readiness: polls succeed), and the `/metrics`,
//!   `/livez`, `/readyz` endpoint; with several spreadsheets, one part of each per
//!   spreadsheet (labelled samples, each loop judged on its own).
//! - [`notifications`]: webhook notifications of jobs' final outcomes (`[[notify]]`): which
//!   channel hears of what, the message of each format, and `notifications::sender`, the
//!   durable journal, the pace per URL and the task that sends with retries.
//! - [`notify`]: systemd readiness, watchdog, stopping and status notifications.
//! - [`outbox`]: the durable local outbox of finished results not yet on the sheet.
//! - [`panel`]: the panel sheets: discovery by the G1/G2 marker, function tables, status
//!   texts, result write-back cells, the waiting display and intake by polling, the index
//!   sheet, the functions and targets of the config and what a job may run by them
//!   (`catalog`: function args from the config, listed targets, `allow`) and the panel builder
//!   (`sync`), all pure. `panel::guard`: who may press, approve and stop, as Google
//!   enforces it (the ▶, 承認 and ■ cells of functions that name people, what `panels sync`
//!   protects for them, which of them a spreadsheet guards exactly; `daemon/guards.rs`
//!   applies it in the poll intake). `panel::protected`: the areas of the panels and the
//!   index that sheetq protects, placed by the layout.
//! - [`privacy`]: what sheetq writes on the VM is its user's alone (umask 077 for the
//!   process, the started-with umask back for jobs), and the check of an open `state_dir`.
//! - [`probe`]: `sheetq check --probe`: one probe per Google behaviour sheetq relies on, run
//!   through the `Sheets` port on a temporary sheet (against Google, or the emulator in tests).
//! - [`protection`]: what only sheetq may write (the hidden sheets whole; the panels' and
//!   the index's areas come from `panel::protected`), its editors (the service
//!   accounts serving the spreadsheet, never people), the requests that protect it, `check`'s
//!   verdicts, and whether the queue is protected enough to trust its 依頼者; pure.
//! - [`provenance`]: what only sheetq can have written (PROJECT-visible developer metadata
//!   of its own Cloud project): the mark of a continuation step, the digest of its row, and
//!   what the marks known make of a queue row; pure.
//! - [`queue`]: the `_ジョブキュー` sheet as data: header map, states, rows, ワーカー tags.
//! - [`rollout`]: one press over many targets, a few at a time (`[[rollouts]]`): a rollout's
//!   definition, its targets, each target's derived jobId and the claim pass's rule (next
//!   wave, stop, end, the counts); pure. `daemon/rollouts.rs` follows it.
//! - [`schedule`]: the `[[schedules]]` of the config: their cron patterns in the spreadsheet's
//!   time zone (daylight saving's rules), each occurrence's jobId, which one is due; pure.
//! - [`setup`]: the spreadsheet client and the command registry built from a config, for the
//!   command line, the demo and the bench.
//! - [`sheet_time`]: time in sheet cells: date serials and typed dates to instants in the
//!   spreadsheet's time zone, instants back to serials, and the short panel/log time texts.
//! - [`sheet_text`]: text in sheet cells against the config's: the one trim (spaces and
//!   tabs), "the same", and the look-alikes refused (invisible, control and format
//!   characters, fullwidth forms, case); the rule the Apps Script intake shares, pure.
//! - [`sheets`]: the port to a spreadsheet (`Sheets` trait), its value types and errors.
//!   - [`sheets::google`]: the Google implementation (`google-sheets4`): requests, replies,
//!     timeouts, error classification, retries; `google/convert.rs` the pure type mapping.
//!   - [`sheets::auth`]: credentials (key file, `GOOGLE_APPLICATION_CREDENTIALS`, metadata
//!     server), key validation, the spreadsheets-only token source.
//!   - [`sheets::retry`]: retry policy (exponential backoff, full jitter) and its loop.
//!   - [`sheets::budget`]: the client-side requests-per-minute budget (token bucket, callers
//!     served in turn), kept to the account's record when it has one.
//!   - [`sheets::turns`]: the order of the calls waiting for a budget: arrival, urgent ones
//!     (work behind them) a little ahead, pressing ones (several presses behind them) more.
//!   - [`sheets::ledger`]: the record every sheetq process on the machine keeps of the
//!     requests it sends as each account, so daemons and one-shot commands share the quota.
//!   - [`sheets::stats`]: request/retry/throttling counters for metrics.
//!   - [`sheets::dry_run`]: the `--dry-run` decorator: reads pass, writes are only logged.
//! - [`watch`]: what one daemon has watched: how long each heartbeat, the lease and each
//!   running row's claim stood still, in its own monotonic time while its reads succeed;
//!   every liveness and staleness decision rests on it, never on another machine's clock.
//! - [`workers`]: the `_ワーカー` heartbeat rows: columns, parsing, the jobs each daemon lists
//!   as running, the daemons of its account it knows of (word passed from heartbeat to
//!   heartbeat, for the budget split), and the one-process-per-`worker_id` check.

pub mod a1;
pub mod admin;
pub mod apply;
pub mod approval;
pub mod archive;
#[cfg(feature = "emulator")]
pub mod bench;
pub mod binding;
pub mod cancel;
pub mod check;
pub mod claim;
pub mod cli;
pub mod commands;
pub mod config;
pub mod daemon;
#[cfg(feature = "emulator")]
pub mod demo;
/// The Sheets API emulator (the `sheetq-emulator` crate of this workspace), under its old
/// name.
#[cfg(feature = "emulator")]
pub use sheetq_emulator as emulator;
pub mod function;
pub mod inputs;
pub mod joblog;
pub mod journal;
pub mod lease;
pub mod logging;
pub mod metrics;
pub mod notifications;
pub mod notify;
pub mod outbox;
pub mod panel;
pub mod pause;
pub mod privacy;
pub mod probe;
pub mod protection;
pub mod provenance;
pub mod queue;
pub mod rollout;
pub mod schedule;
pub mod setup;
pub mod sheet_text;
pub mod sheet_time;
pub mod sheets;
pub mod watch;
pub mod workers;
