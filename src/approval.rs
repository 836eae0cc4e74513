//! Approvals (docs/design.md §5.5): a job of a function with `approvers` waits as 承認待ち
//! until enough listed people other than its requester have approved it, ends 却下 when a
//! listed approver stops it, and 期限切れ when it waits longer than `approval_expires`.
//!
//! The 承認 cell of the queue row holds one approval per line, `<who> yyyy/MM/dd HH:mm:ss
//! #<jobId>` (as 中止要求 does, [`crate::cancel::Request`]): the installable trigger and
//! `sheetq approve` write it, on a protected queue that nobody else can write. What a line
//! says is still data: an approval counts only when its `#jobId` names the row's job, its
//! person matches the function's `approvers`, is not the requester and has not been counted
//! already. Pure: a row and the config in, a verdict out.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::cancel::{self, Request};
use crate::function::{allow_matches, FunctionDef};
use crate::queue::{QueueRow, State};

/// How long a request waits for its approvals when the function does not say.
pub const DEFAULT_EXPIRES: Duration = Duration::from_secs(24 * 3600);

/// What a function asks before its jobs run (`approvers`, `approvals`, `approval_expires`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule<'a> {
    pub function: &'a str,
    /// Addresses or `*` patterns, matched without regard to case.
    pub approvers: &'a [String],
    /// How many distinct approvers must approve.
    pub needed: usize,
    /// How long a job may wait for them, on Google's clock from its 受付日時.
    pub expires: Duration,
}

impl<'a> Rule<'a> {
    /// The rule of `function`, when it has `approvers`. Its other keys were checked when
    /// the config was loaded ([`problems`]); a value that would not parse falls back to
    /// its default here.
    pub fn of(function: &'a FunctionDef) -> Option<Self> {
        let approvers = function.approvers.as_deref()?;
        Some(Self {
            function: &function.label,
            approvers,
            needed: function.approvals.unwrap_or(1).max(1) as usize,
            expires: function
                .approval_expires
                .as_deref()
                .and_then(|t| humantime::parse_duration(t.trim()).ok())
                .unwrap_or(DEFAULT_EXPIRES),
        })
    }

    /// Whether `who` may approve a job of `requester`: an address (so that no look-alike or
    /// hidden character can make one person two, or someone else), the job's requester known
    /// and not `who`, and `who` listed.
    pub fn refusal(&self, who: &str, requester: &str) -> Option<Refusal> {
        let who = who.trim();
        let requester = requester.trim();
        if !is_address(who) {
            Some(Refusal::Unknown)
        } else if requester.is_empty() {
            Some(Refusal::RequesterUnknown)
        } else if same_person(who, requester) || vouched_only(requester, who) {
            Some(Refusal::Requester)
        } else if !self.approvers.iter().any(|a| allow_matches(a, who)) {
            Some(Refusal::NotListed)
        } else {
            None
        }
    }
}

pub use crate::protection::is_address;

/// Whether `requester` is a press vouched for by a ▶ cell that only `who` (and the owner)
/// may tick (`crate::panel::guard`): then `who` pressed it, and may not approve it too.
fn vouched_only(requester: &str, who: &str) -> bool {
    requester
        .strip_prefix(crate::protection::VOUCHED_PREFIX)
        .is_some_and(|people| same_person(people, who))
}

/// Whether two names are one person's: the same address, letters in any case.
pub fn same_person(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Problems of a function's approval keys, each naming the function and the fix.
pub fn problems(at: &str, f: &FunctionDef) -> Vec<String> {
    let mut out = Vec::new();
    let Some(approvers) = &f.approvers else {
        if f.approvals.is_some() || f.approval_expires.is_some() {
            out.push(format!(
                "{at}: approvals and approval_expires need approvers = [...] (who may approve)"
            ));
        }
        return out;
    };
    if approvers.is_empty() {
        out.push(format!(
            "{at}: approvers = [] lets nobody approve, so its jobs could never run; list who may approve, or remove approvers"
        ));
    }
    out.extend(
        approvers
            .iter()
            .filter_map(|who| crate::protection::entry_problem(at, "approvers", who)),
    );
    let mut seen = std::collections::HashSet::new();
    for who in approvers {
        if !seen.insert(who.trim().to_lowercase()) {
            out.push(format!(
                "{at}: approvers lists {who:?} twice (letters in any case are one address); list each approver once"
            ));
        }
    }
    if f.approvals.is_some_and(|n| n >= 2) {
        if let Some(group) = approvers
            .iter()
            .find(|a| a.starts_with(crate::protection::GROUP_PREFIX))
        {
            out.push(format!(
                "{at}: approvals = {} with the group {group:?} among the approvers: a group's 承認 cell cannot say which member ticked it, so one person could count as the group and as themselves; \
                 list the approvers one by one, or set approvals = 1",
                f.approvals.unwrap_or(2)
            ));
        }
    }
    if f.approvals == Some(0) {
        out.push(format!(
            "{at}: approvals = 0 would need no approval; remove approvers instead, or set approvals = 1 or more"
        ));
    }
    if let Some(n) = f.approvals {
        if n as usize > approvers.len() {
            out.push(format!(
                "{at}: approvals = {n} but approvers lists {} entr(ies), each of which counts once, so its jobs could never run; list more approvers or lower approvals",
                approvers.len()
            ));
        }
    }
    if let Some(text) = &f.approval_expires {
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d >= Duration::from_secs(1) => {}
            _ => out.push(format!(
                "{at}: approval_expires = {text:?} is not a duration of a second or more; write it as in \"24h\" or \"3d\""
            )),
        }
    }
    out
}

/// Why an approval does not count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody can tell who approved (an empty name): a tick the poll intake saw, or an
    /// address Google did not give.
    Unknown,
    /// The requester approved their own job.
    Requester,
    /// Nobody knows who asked for the job (an empty 依頼者: the poll intake), so nobody can
    /// be told apart from the requester.
    RequesterUnknown,
    /// The person is not among the function's `approvers`.
    NotListed,
}

impl Refusal {
    /// Label value of `sheetq_approvals_total{outcome}` for a refused approval.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Unknown => "refused_unknown",
            Refusal::Requester => "refused_requester",
            Refusal::RequesterUnknown => "refused_requester_unknown",
            Refusal::NotListed => "refused_not_listed",
        }
    }

    /// Why, in the words of the panel and the CLI.
    pub fn words(self) -> &'static str {
        match self {
            Refusal::Unknown => "誰の承認か分かりません",
            Refusal::Requester => "依頼者本人は承認できません",
            Refusal::RequesterUnknown => "依頼者が分からないため承認できません",
            Refusal::NotListed => "承認者ではありません",
        }
    }
}

/// The approvals a row's 承認 cell holds, judged against a rule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tally {
    /// Who approved, in the order written, each person once.
    pub approved_by: Vec<String>,
    /// Lines that name this job but do not count, with why.
    pub refused: Vec<(String, Refusal)>,
    /// How many approvals the rule needs.
    pub needed: usize,
}

impl Tally {
    /// Whether enough distinct approvers approved.
    pub fn enough(&self) -> bool {
        self.approved_by.len() >= self.needed
    }

    /// `1/2`: approvals counted of those needed.
    pub fn count_text(&self) -> String {
        format!(
            "{}/{}",
            self.approved_by.len().min(self.needed),
            self.needed
        )
    }
}

/// The approvals of the 承認 text `text`, one per line: only the lines that name this job
/// (`#<jobId>`). A line naming another job (a write that a sort put on this row) or none
/// (copied along from a row a sort moved) never counts.
pub fn entries(text: &str, job_id: &str, tz: Tz) -> Vec<Request> {
    text.lines()
        .filter_map(|line| Request::parse(line, tz))
        .filter(|r| r.job.as_deref() == Some(job_id))
        .collect()
}

/// The line `sheetq approve` and the installable trigger add for `who` approving `job` at
/// `at`, and the cell with it: the lines before kept.
pub fn with_approval(cell: &str, who: &str, at: DateTime<Utc>, job: &str, tz: Tz) -> String {
    let line = Request::new(who, at, job).cell_text(tz);
    let cell = cell.trim_end();
    if cell.is_empty() {
        line
    } else {
        format!("{cell}\n{line}")
    }
}

/// Counts the approvals of `row` under `rule`.
pub fn tally(rule: &Rule<'_>, row: &QueueRow, tz: Tz) -> Tally {
    let mut out = Tally {
        needed: rule.needed,
        ..Tally::default()
    };
    for entry in entries(&row.approvals, &row.job_id, tz) {
        let who = entry.who;
        if out.approved_by.iter().any(|a| same_person(a, &who)) {
            continue;
        }
        match rule.refusal(&who, &row.requester) {
            None => out.approved_by.push(who),
            Some(why) => {
                if !out.refused.iter().any(|(w, _)| same_person(w, &who)) {
                    out.refused.push((who, why));
                }
            }
        }
    }
    out
}

/// What becomes of a job waiting for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Enough approvals: it becomes 待機 and follows the claim rules.
    Approved(Tally),
    /// A listed approver (not the requester) asked to stop it: 却下, final.
    Rejected(Request),
    /// Someone else asked to stop it (the requester withdrawing it, anyone): キャンセル.
    Withdrawn(Request),
    /// Not approved within `approval_expires`: 期限切れ, final.
    Expired(Tally),
    /// Still waiting.
    Waiting(Tally),
}

/// Judges `row`, a job of a function with `rule`, at `google_now` (Google's clock, the
/// `Date` of the API's replies; `None` before any reply: nothing expires). A stop request
/// wins over approvals, and approvals over the expiry: a request approved in time runs
/// even if the daemon looks only after its deadline. Its 受付日時, a wall-clock time in the
/// spreadsheet's zone, is taken at its later reading where daylight saving repeats an
/// hour, so that a request never expires early; a row without a readable one never expires
/// (the queue's problems name it).
pub fn judge(
    rule: &Rule<'_>,
    row: &QueueRow,
    tz: Tz,
    google_now: Option<DateTime<Utc>>,
) -> Verdict {
    if let Some(stop) = cancel::asked_of(row, tz, google_now.unwrap_or_else(Utc::now)) {
        return if rule.refusal(&stop.who, &row.requester).is_none() {
            Verdict::Rejected(stop)
        } else {
            Verdict::Withdrawn(stop)
        };
    }
    let tally = tally(rule, row, tz);
    if tally.enough() {
        return Verdict::Approved(tally);
    }
    match (row.received_at, google_now) {
        (Some(received), Some(now)) => {
            let received = crate::sheet_time::latest_reading(received, tz);
            let waited = (now - received).to_std().unwrap_or_default();
            if waited >= rule.expires {
                Verdict::Expired(tally)
            } else {
                Verdict::Waiting(tally)
            }
        }
        _ => Verdict::Waiting(tally),
    }
}

/// What a claim commit does to a row of a function with `approvers` (docs/design.md §5.5),
/// each a compare-and-swap on 状態 checked by the commit's read-back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// 待機 without enough approvals (an intake that does not know the function needs them,
    /// a schedule): 承認待ち, never claimed as it stands.
    Await(Tally),
    /// 承認待ち with enough approvals: 待機.
    Approve(Tally),
    /// 承認待ち stopped by an approver: 却下.
    Reject(Request),
    /// 承認待ち stopped by someone else: キャンセル.
    Withdraw(Request),
    /// 承認待ち past its `approval_expires`: 期限切れ.
    Expire(Tally),
    /// 承認待ち of a function that has no `approvers` any more (a reload dropped them, or
    /// the function): 待機, admitted or refused as any job.
    Release,
}

impl Turn {
    /// The state the swap expects, and the one it writes.
    pub fn swap(&self) -> (State, State) {
        match self {
            Turn::Await(_) => (State::Waiting, State::AwaitingApproval),
            Turn::Approve(_) => (State::AwaitingApproval, State::Waiting),
            Turn::Reject(_) => (State::AwaitingApproval, State::Rejected),
            Turn::Withdraw(_) => (State::AwaitingApproval, State::Cancelled),
            Turn::Expire(_) => (State::AwaitingApproval, State::Expired),
            Turn::Release => (State::AwaitingApproval, State::Waiting),
        }
    }

    /// Label value of `sheetq_approvals_total{outcome}`.
    pub fn label(&self) -> &'static str {
        match self {
            Turn::Await(_) => "requested",
            Turn::Approve(_) => "approved",
            Turn::Reject(_) => "rejected",
            Turn::Withdraw(_) => "withdrawn",
            Turn::Expire(_) => "expired",
            Turn::Release => "released",
        }
    }
}

/// The turns of `rows` this pass, in row order: `rule_of` gives a function's rule, `may`
/// says whether a row is free to turn (its jobId on one row only, listed running by no
/// daemon; and a press, not a continuation step, which goes on with work already approved:
/// only sheetq's mark tells one, `provenance`, never its システムフラグ). A 待機 row asked to stop is left to the cancel of the claim rules. On a queue
/// that is not `protected`, approvals cannot be trusted, and rows of functions with
/// approvers are left as they are.
pub fn turns<'a>(
    rows: &[QueueRow],
    rule_of: impl Fn(&str) -> Option<Rule<'a>>,
    may: impl Fn(&QueueRow) -> bool,
    protected: bool,
    tz: Tz,
    google_now: Option<DateTime<Utc>>,
) -> Vec<(usize, Turn)> {
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if !may(row) {
            continue;
        }
        let Some(rule) = rule_of(&row.function) else {
            if row.state.is(State::AwaitingApproval) {
                out.push((i, Turn::Release));
            }
            continue;
        };
        if !protected {
            continue;
        }
        let turn = if row.state.is(State::Waiting) {
            if crate::cancel::asked(row) {
                continue;
            }
            let tally = tally(&rule, row, tz);
            if tally.enough() {
                continue;
            }
            Turn::Await(tally)
        } else if row.state.is(State::AwaitingApproval) {
            match judge(&rule, row, tz, google_now) {
                Verdict::Approved(t) => Turn::Approve(t),
                Verdict::Rejected(r) => Turn::Reject(r),
                Verdict::Withdrawn(r) => Turn::Withdraw(r),
                Verdict::Expired(t) => Turn::Expire(t),
                Verdict::Waiting(_) => continue,
            }
        } else {
            continue;
        };
        out.push((i, turn));
    }
    out
}

/// Whether `row` may be claimed as far as approvals go, its function's rule being `rule`:
/// it needs none, or its 承認 cell holds enough. (A continuation step, which needs none,
/// is the caller's to tell: by sheetq's mark, `provenance`.)
pub fn cleared(row: &QueueRow, rule: Option<&Rule<'_>>) -> bool {
    match rule {
        Some(rule) => tally(rule, row, chrono_tz::UTC).enough(),
        _ => true,
    }
}

/// メッセージ of a rejected job: 「却下: <who> HH:mm」.
pub fn rejected_message(stop: &Request, seen: DateTime<Utc>, tz: Tz) -> String {
    format!(
        "却下: {} {}",
        stop.who,
        crate::sheet_time::format_hhmm(stop.at.unwrap_or(seen), tz)
    )
}

/// メッセージ of an expired job: how long it waited for what.
pub fn expired_message(rule: &Rule<'_>, tally: &Tally) -> String {
    format!(
        "期限切れ: {} 以内に承認されませんでした (承認 {})",
        crate::sheet_text::duration_ja(rule.expires),
        tally.count_text()
    )
}

/// Added to the panel's 状態 of a job waiting for approval when the daemon takes presses by
/// polling: each approver ticks the 承認 cell only they may edit (`crate::panel::guard`).
pub const POLL_HINT: &str = "承認は承認者それぞれの承認欄のチェックか sheetq approve で";

/// The panel's 状態 of a job waiting for approval: 「承認待ち (依頼: alice@…) 0/1」, and the
/// approvals that did not count with why.
pub fn waiting_text(row: &QueueRow, tally: &Tally) -> String {
    let requester = match row.requester.trim() {
        "" => crate::function::NO_REQUESTER.to_string(),
        r => cancel::Request::new(r, Utc::now(), "").who,
    };
    let mut text = format!("承認待ち (依頼: {requester}) {}", tally.count_text());
    for (who, why) in &tally.refused {
        text.push_str(&format!(" · {who}: {}", why.words()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::RowState;
    use chrono::TimeZone;

    const TZ: Tz = chrono_tz::Asia::Tokyo;

    fn function(approvers: &[&str], approvals: Option<u32>) -> FunctionDef {
        FunctionDef {
            label: "再起動".into(),
            command: "echo".into(),
            args: toml::Table::new(),
            flags: Vec::new(),
            allow: None,
            args_from_sheet: Vec::new(),
            inputs: Vec::new(),
            reset_inputs: false,
            approvers: Some(approvers.iter().map(|a| a.to_string()).collect()),
            approvals,
            approval_expires: Some("1h".into()),
            output: None,
            cancel: None,
        }
    }

    fn row(approvals: &str) -> QueueRow {
        let mut r = QueueRow::blank(2);
        r.job_id = "job-1".into();
        r.requester = "alice@example.com".into();
        r.state = RowState::Known(State::AwaitingApproval);
        r.received_at = Some(Utc.with_ymd_and_hms(2026, 12, 4, 1, 0, 0).unwrap());
        r.approvals = approvals.into();
        r
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 4, h, m, 0).unwrap()
    }

    #[test]
    fn an_approval_counts_only_from_a_listed_person_other_than_the_requester_for_this_job() {
        let f = function(&["bob@sre.example.com", "lead@example.com"], Some(2));
        let rule = Rule::of(&f).unwrap();
        let cell = [
            "alice@example.com 2026/12/04 10:01:00 #job-1",
            "carol@example.com 2026/12/04 10:02:00 #job-1",
            "bob@sre.example.com 2026/12/04 10:03:00 #job-2",
            "BOB@sre.example.com 2026/12/04 10:04:00 #job-1",
            "bob@sre.example.com 2026/12/04 10:05:00 #job-1",
        ]
        .join("\n");
        let t = tally(&rule, &row(&cell), TZ);
        assert_eq!(
            t.approved_by,
            vec!["BOB@sre.example.com"],
            "one count per person, this job's lines only"
        );
        assert_eq!(
            t.refused,
            vec![
                ("alice@example.com".to_string(), Refusal::Requester),
                ("carol@example.com".to_string(), Refusal::NotListed)
            ]
        );
        assert!(!t.enough(), "two are needed");
        let cell = format!("{cell}\nlead@example.com 2026/12/04 10:06:00 #job-1");
        assert!(tally(&rule, &row(&cell), TZ).enough());
    }

    #[test]
    fn only_an_address_other_than_a_known_requester_can_count() {
        let f = function(&["bob@sre.example.com"], None);
        let rule = Rule::of(&f).unwrap();
        for forged in [
            "x #job-2 bob@sre.example.com",
            "bob@sre.example.com\u{200b}",
            "bob@@sre.example.com",
            "@sre.example.com",
            "不明",
            "",
        ] {
            assert_eq!(
                rule.refusal(forged, "alice@example.com"),
                Some(Refusal::Unknown),
                "{forged:?} is no address, so no approval"
            );
        }
        assert_eq!(
            rule.refusal("bob@sre.example.com", ""),
            Some(Refusal::RequesterUnknown),
            "with 依頼者 unknown nobody can be told apart from the requester"
        );
        assert_eq!(
            rule.refusal("bob@sre.example.com", "alice@example.com"),
            None
        );
        assert_eq!(
            rule.refusal("bob@sre.example.com", "保護された▶: bob@sre.example.com"),
            Some(Refusal::Requester),
            "a press from a ▶ cell only bob may tick is bob's: he may not approve it too"
        );
        assert_eq!(
            rule.refusal(
                "bob@sre.example.com",
                "保護された▶: alice@example.com, bob@sre.example.com"
            ),
            None,
            "with several who may press, polling cannot tell who did"
        );
        let no_job = row("bob@sre.example.com 2026/12/04 10:05:00");
        assert!(
            tally(&rule, &no_job, TZ).approved_by.is_empty(),
            "a line naming no job (copied along by a sort) never counts"
        );
    }

    #[test]
    fn a_waiting_row_without_approvals_awaits_them_and_one_whose_function_lost_its_approvers_is_released(
    ) {
        let f = function(&["lead@example.com"], None);
        let mut waiting = row("");
        waiting.state = RowState::Known(State::Waiting);
        let awaiting = row("");
        let mut approved = row("lead@example.com 2026/12/04 10:05:00 #job-1");
        approved.state = RowState::Known(State::Waiting);
        let rows = [waiting, awaiting.clone(), approved];
        let with = turns(&rows, |_| Rule::of(&f), |_| true, true, TZ, Some(at(1, 30)));
        assert_eq!(
            with.iter()
                .map(|(i, t)| (*i, t.label()))
                .collect::<Vec<_>>(),
            [(0, "requested")],
            "an approved 待機 row stays, a 承認待ち one within its time waits: {with:?}"
        );
        let open = turns(
            &rows,
            |_| Rule::of(&f),
            |_| true,
            false,
            TZ,
            Some(at(1, 30)),
        );
        assert!(open.is_empty(), "nothing turns on an open queue: {open:?}");
        let dropped = turns(&[awaiting], |_| None, |_| true, true, TZ, Some(at(1, 30)));
        assert_eq!(dropped, [(0, Turn::Release)]);
        assert!(!cleared(&rows[0], Rule::of(&f).as_ref()));
        assert!(cleared(&rows[2], Rule::of(&f).as_ref()));
    }

    #[test]
    fn a_stop_by_an_approver_rejects_and_anyone_elses_withdraws() {
        let f = function(&["lead@example.com"], None);
        let rule = Rule::of(&f).unwrap();
        let mut r = row("");
        r.cancel_request = "lead@example.com 2026/12/04 10:30:00 #job-1".into();
        match judge(&rule, &r, TZ, Some(at(1, 31))) {
            Verdict::Rejected(stop) => {
                assert_eq!(
                    rejected_message(&stop, at(1, 31), TZ),
                    "却下: lead@example.com 10:30"
                )
            }
            v => panic!("an approver's stop rejects: {v:?}"),
        }
        r.cancel_request = "alice@example.com 2026/12/04 10:30:00 #job-1".into();
        assert!(matches!(
            judge(&rule, &r, TZ, Some(at(1, 31))),
            Verdict::Withdrawn(_)
        ));
        r.cancel_request = "lead@example.com 2026/12/04 10:30:00 #job-9".into();
        assert!(
            matches!(judge(&rule, &r, TZ, Some(at(1, 31))), Verdict::Waiting(_)),
            "a stop naming another job does not apply"
        );
    }

    #[test]
    fn a_request_expires_by_googles_clock_unless_approved_first() {
        let f = function(&["lead@example.com"], None);
        let rule = Rule::of(&f).unwrap();
        let r = row("");
        assert!(matches!(
            judge(&rule, &r, TZ, Some(at(1, 59))),
            Verdict::Waiting(_)
        ));
        assert!(matches!(
            judge(&rule, &r, TZ, Some(at(2, 0))),
            Verdict::Expired(_)
        ));
        assert!(
            matches!(judge(&rule, &r, TZ, None), Verdict::Waiting(_)),
            "without a reading of Google's clock nothing expires"
        );
        let approved = row("lead@example.com 2026/12/04 10:10:00 #job-1");
        assert!(matches!(
            judge(&rule, &approved, TZ, Some(at(3, 0))),
            Verdict::Approved(_)
        ));
    }

    #[test]
    fn an_approval_line_is_added_below_the_ones_before() {
        let t = at(1, 5);
        let one = with_approval("", "bob@example.com", t, "job-1", TZ);
        assert_eq!(one, "bob@example.com 2026/12/04 10:05:00 #job-1");
        let two = with_approval(&one, "lead@example.com", t, "job-1", TZ);
        assert_eq!(entries(&two, "job-1", TZ).len(), 2);
    }

    #[test]
    fn the_waiting_text_names_the_requester_the_count_and_what_did_not_count() {
        let f = function(&["lead@example.com"], None);
        let rule = Rule::of(&f).unwrap();
        let r = row("carol@example.com 2026/12/04 10:02:00 #job-1");
        assert_eq!(
            waiting_text(&r, &tally(&rule, &r, TZ)),
            "承認待ち (依頼: alice@example.com) 0/1 · carol@example.com: 承認者ではありません"
        );
    }

    #[test]
    fn approval_keys_are_checked_with_their_fix() {
        let mut f = function(&[], Some(0));
        f.approval_expires = Some("soon".into());
        let p = problems("[[functions]] entry 1 (\"再起動\")", &f).join("\n");
        assert!(p.contains("approvers = [] lets nobody approve"), "{p}");
        assert!(p.contains("approvals = 0"), "{p}");
        assert!(p.contains("approval_expires = \"soon\""), "{p}");
        let f = function(&["a@example.com"], Some(2));
        assert!(
            problems("f", &f).join("\n").contains("lists 1 entr(ies)"),
            "two approvals from one listed person can never come"
        );
        let f = function(&["*@sre.example.com"], None);
        assert!(
            problems("f", &f).join("\n").contains("is a pattern"),
            "a pattern is refused, never widened"
        );
        let f = function(&["lead@example.com", "Lead@Example.com"], Some(2));
        assert!(
            problems("f", &f).join("\n").contains("twice"),
            "one person listed twice could never make two approvals"
        );
        let f = function(&["lead@example.com", "group:leads@example.com"], Some(2));
        assert!(
            problems("f", &f)
                .join("\n")
                .contains("cannot say which member"),
            "lead could count as himself and as the group"
        );
        assert!(problems("f", &function(&["group:leads@example.com"], None)).is_empty());
        let mut f = function(&["a@example.com"], None);
        f.approvers = None;
        assert!(problems("f", &f)[0].contains("need approvers"));
    }
}
