//! The emulator's web view in a real browser: headless Chromium driven through
//! ChromeDriver (Debian's `chromium` and `chromium-driver`, which `.ci/run` installs). A
//! person ticks a ▶ box in the page, watches the panel row go to 実行中 and ✅ 完了 there,
//! and sorts the queue in the page while jobs run; a daemon does the work meanwhile.
//!
//! Ignored by a plain `cargo test` (it needs the browser); `.ci/run` runs it with
//! `cargo test --test it browser -- --ignored`. `SHEETQ_SCREENSHOT=FILE` keeps a screenshot
//! of the page (the README's comes from here).

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use sheetq::emulator::Quota;
use sheetq::queue::State;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(40);

/// ChromeDriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    /// Stops ChromeDriver and the browser it started (its process group), also when the
    /// test failed before closing the session.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.wait();
    }
}

async fn start_driver() -> Driver {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"));
    let program = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
    let child = Command::new(&program)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {program} ({e}): install Debian's chromium and chromium-driver (.ci/run does)")
        });
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return driver;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{program} did not listen on port {port} within 10 s");
}

async fn browser(driver: &Driver) -> Client {
    let binary = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": binary,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1500,900", "--lang=ja"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("cannot start headless Chromium through ChromeDriver: {e}"))
}

/// The text of the page's cell at zero-based (`r`, `c`) of the sheet shown.
async fn cell_text(page: &Client, r: u32, c: u32) -> String {
    text_of(page, &format!("#grid td[data-r=\"{r}\"][data-c=\"{c}\"]")).await
}

/// The text of the element `css` finds, or "" when there is none (yet).
async fn text_of(page: &Client, css: &str) -> String {
    match page.find(Locator::Css(css)).await {
        Ok(el) => el.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits until the page's cell (`r`, `c`) shows what `ok` accepts; returns the text.
async fn wait_cell(page: &Client, r: u32, c: u32, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let css = format!("#grid td[data-r=\"{r}\"][data-c=\"{c}\"]");
    let what = format!("row {} column {c} showing {what}", r + 1);
    wait_text(page, &css, &what, ok).await
}

/// Waits until the element `css` finds shows what `ok` accepts; returns the text. The page
/// redraws as the sheet changes, so each try finds the element afresh.
async fn wait_text(page: &Client, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        last = text_of(page, css).await;
        if ok(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the page never showed {what} ({css}); last it showed {last:?}");
}

/// Clicks the element `css` finds. The page redraws the grid on every change, so an element
/// found a moment ago may be gone: find it afresh and try again.
async fn click(page: &Client, css: &str) {
    let mut last = String::new();
    for _ in 0..20 {
        match page
            .wait()
            .at_most(Duration::from_secs(5))
            .for_element(Locator::Css(css))
            .await
        {
            Ok(el) => match el.click().await {
                Ok(()) => return,
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot click {css}: {last}");
}

/// A double click on the element `css` finds (as a `dblclick` event, which is what the
/// page listens for).
async fn double_click(page: &Client, css: &str) {
    page.wait()
        .at_most(Duration::from_secs(5))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} in the page: {e}"));
    page.execute(
        "document.querySelector(arguments[0]).dispatchEvent(new MouseEvent('dblclick', { bubbles: true }))",
        vec![json!(css)],
    )
    .await
    .unwrap_or_else(|e| panic!("cannot double-click {css}: {e}"));
}

async fn open_tab(page: &Client, sheet_id: i32) {
    click(page, &format!("#tabs button[data-id=\"{sheet_id}\"]")).await;
    let css = format!("#tabs button.active[data-id=\"{sheet_id}\"]");
    page.wait()
        .for_element(Locator::Css(&css))
        .await
        .unwrap_or_else(|e| panic!("tab {sheet_id} did not become active: {e}"));
}

#[tokio::test]
#[ignore = "needs Debian's chromium and chromium-driver; .ci/run runs it with --ignored"]
async fn a_person_ticks_a_box_in_the_page_and_watches_the_job_run_while_sorting_the_queue() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    // Three seconds each, so the page has time to show 実行中.
    for row in [8, 9] {
        emu.set_values(
            &format!("'サーバーA'!I{row}"),
            json!([["{\"seconds\":3}"]]),
            false,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    }
    emu.set_values("'サーバーB'!I8", json!([["{\"seconds\":3}"]]), false)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let fleet = Fleet::start(&emu, &["d1"], &[("intake", "\"poll\"")], "").await;
    let driver = start_driver().await;
    let page = browser(&driver).await;
    page.goto(&emu.base_url())
        .await
        .unwrap_or_else(|e| panic!("cannot open the web view: {e}"));
    // The index comes first; the hidden sheets are listed as hidden.
    page.wait()
        .for_element(Locator::Css("#tabs button.active[data-id=\"0\"]"))
        .await
        .unwrap_or_else(|e| panic!("the index is not the first tab shown: {e}"));
    wait_text(
        &page,
        "#tabs button.hidden[data-id=\"2001\"]",
        "the hidden queue sheet's tab marked (hidden)",
        |t| t.contains("(hidden)"),
    )
    .await;

    // Tick 再起動 on サーバーB, then 動作確認 and 再起動 on サーバーA, in the page.
    open_tab(&page, 1002).await;
    click(
        &page,
        "#grid td[data-r=\"8\"][data-c=\"0\"] input[type=checkbox]",
    )
    .await;
    open_tab(&page, 1001).await;
    assert_eq!(cell_text(&page, 7, 1).await, "動作確認 (2秒)");
    click(
        &page,
        "#grid td[data-r=\"7\"][data-c=\"0\"] input[type=checkbox]",
    )
    .await;
    click(
        &page,
        "#grid td[data-r=\"8\"][data-c=\"0\"] input[type=checkbox]",
    )
    .await;
    let running = wait_cell(&page, 7, 2, "実行中 or 順番待ち", |t| {
        t.contains("実行中") || t.contains("順番待ち")
    })
    .await;
    assert!(!running.is_empty());

    // Mid-run, a person sorts the queue by 受付日時, newest first.
    open_tab(&page, 2001).await;
    click(&page, "#grid td[data-r=\"1\"][data-c=\"1\"]").await;
    click(&page, "#sort-desc").await;
    wait_cell(&page, 0, 0, "the header still on top", |t| t == "jobId").await;
    // 受付日時 in the column's date format, not as a serial.
    let received = wait_cell(&page, 1, 1, "a date-time", |t| !t.is_empty()).await;
    assert!(
        regex::Regex::new(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}$")
            .is_ok_and(|re| re.is_match(&received)),
        "受付日時 shows as yyyy/mm/dd hh:mm:ss, not a serial: {received:?}"
    );

    open_tab(&page, 1001).await;
    let done = wait_cell(&page, 7, 2, "✅ 完了", |t| t.starts_with("✅")).await;
    assert!(done.contains("完了"), "{done}");
    wait_cell(&page, 8, 2, "✅ 完了", |t| t.starts_with("✅")).await;

    // As Sheets shows the panel: its hidden columns (G:J) left out until asked for, and 結果
    // a link to the job's log row.
    assert!(
        page.find(Locator::Css("#grid td[data-c=\"7\"]"))
            .await
            .is_err(),
        "hidden column H is not drawn"
    );
    let link = page
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#grid td[data-r=\"7\"][data-c=\"3\"] a.link"))
        .await
        .unwrap_or_else(|e| panic!("結果 is no link: {e}"));
    let href = link.attr("href").await.ok().flatten().unwrap_or_default();
    assert!(
        href.starts_with("https://docs.google.com/spreadsheets/d/") && href.contains("range=A"),
        "結果 links to the job's log row: {href:?}"
    );
    click(&page, "#show-hidden").await;
    wait_cell(
        &page,
        7,
        7,
        "the hidden command column, shown on request",
        |t| t == "sleep",
    )
    .await;
    click(&page, "#show-hidden").await;
    wait_text(&page, "#grid thead", "hidden columns left out again", |t| {
        !t.contains('H')
    })
    .await;

    // A person types into a cell of their own (K: right of the panel's columns), inserts a
    // row above it and deletes it again.
    open_tab(&page, 1003).await;
    let memo = "#grid td[data-r=\"7\"][data-c=\"10\"]";
    double_click(&page, memo).await;
    let input = page
        .wait()
        .at_most(Duration::from_secs(5))
        .for_element(Locator::Css("#grid td input.edit"))
        .await
        .unwrap_or_else(|e| panic!("no cell editor: {e}"));
    input
        .send_keys("50%\u{E007}")
        .await
        .unwrap_or_else(|e| panic!("cannot type: {e}"));
    wait_cell(&page, 7, 10, "the typed percentage", |t| {
        t == "50.00%" || t == "50%"
    })
    .await;
    assert_eq!(
        emu.values("'サーバーC'!K8").unwrap_or_default(),
        vec![vec![json!(0.5)]],
        "typing 50% enters the number 0.5 shown as a percentage, as in Sheets"
    );
    click(&page, memo).await;
    click(&page, "#insert-row").await;
    wait_cell(&page, 8, 10, "the row moved down", |t| t.starts_with("50")).await;
    click(&page, "#grid td[data-r=\"7\"][data-c=\"10\"]").await;
    click(&page, "#delete-row").await;
    wait_cell(&page, 7, 10, "the row back in place", |t| {
        t.starts_with("50")
    })
    .await;
    // An input cell as `panels sync` makes it for a choice (a strict list rule with a
    // dropdown): drawn as a dropdown, and a pick there is typed into the cell.
    emu.batch_update(json!([{ "setDataValidation": {
        "range": { "sheetId": 1003, "startRowIndex": 8, "endRowIndex": 9, "startColumnIndex": 12, "endColumnIndex": 13 },
        "rule": { "condition": { "type": "ONE_OF_LIST", "values": [
            { "userEnteredValue": "1.2.3" }, { "userEnteredValue": "1.2.4" } ] },
            "strict": true, "showCustomUi": true }
    } }]))
    .unwrap_or_else(|e| panic!("{e:?}"));
    open_tab(&page, 0).await;
    open_tab(&page, 1003).await;
    // A click on the option picks it, as WebDriver's select does (found afresh after each
    // redraw, as every click here is).
    click(
        &page,
        "#grid td[data-r=\"8\"][data-c=\"12\"] select option[value=\"1.2.4\"]",
    )
    .await;
    wait_for(
        "the picked version in the cell",
        WAIT,
        || {
            (emu.values("'サーバーC'!M9").unwrap_or_default() == vec![vec![json!("1.2.4")]])
                .then_some(())
        },
        || format!("{:?}", emu.values("'サーバーC'!M9")),
    )
    .await;

    // Opening the editor on a formula and leaving it unchanged keeps the formula.
    open_tab(&page, 0).await;
    double_click(&page, "#grid td[data-r=\"1\"][data-c=\"3\"]").await;
    click(&page, "#grid td[data-r=\"1\"][data-c=\"1\"]").await;
    let formula = emu
        .with_spreadsheet(|ss| ss.sheets[0].cell(1, 3).and_then(|c| c.value.clone()))
        .ok()
        .flatten();
    assert!(
        matches!(formula, Some(sheetq::emulator::Value::Formula(_))),
        "the link is still a formula: {formula:?}"
    );

    // The index's links open their panel's tab, as in Sheets.
    click(&page, "#grid td[data-r=\"2\"][data-c=\"3\"] a").await;
    page.wait()
        .at_most(Duration::from_secs(5))
        .for_element(Locator::Css("#tabs button.active[data-id=\"1002\"]"))
        .await
        .unwrap_or_else(|e| panic!("the index's link did not open サーバーB: {e}"));

    open_tab(&page, 1001).await;
    if let Ok(path) = std::env::var("SHEETQ_SCREENSHOT") {
        let png = page
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("screenshot: {e}"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
    // The side panel: each account's requests against the quota, and the request log.
    let side = page
        .find(Locator::Css("#side"))
        .await
        .unwrap_or_else(|e| panic!("no side panel: {e}"))
        .text()
        .await
        .unwrap_or_default();
    assert!(
        side.contains("reads: ") && side.contains("a minute") && side.contains("person.edit"),
        "{side}"
    );
    // The log leaves the idle polls out until asked for them.
    assert!(
        !text_of(&page, "#log")
            .await
            .contains("batchGetByDataFilter"),
        "idle polls are hidden by default: {side}"
    );
    click(&page, "#quiet").await;
    wait_text(&page, "#log", "the polls, once asked for", |t| {
        t.contains("batchGetByDataFilter")
    })
    .await;
    let _ = page.close().await;

    let rows = wait_queue_finished(&emu, 3, "every job to finish", WAIT).await;
    fleet.stop(&emu).await;
    assert_eq!(rows.len(), 3, "one row per tick: {}", describe_queue(&rows));
    assert!(
        rows.iter().all(|r| r.state.is(State::Done)),
        "every job ran once, whatever the sort did: {}",
        describe_queue(&rows)
    );
    let person_edits = emu
        .requests()
        .iter()
        .filter(|r| r.method == "person.edit")
        .count();
    assert_eq!(
        person_edits, 8,
        "three ticks, a sort, typing, an insert, a delete and a pick from a dropdown; leaving a formula unchanged is no edit"
    );
}

/// Waits until the page's request log shows a person's edit (`edited`) or shows none.
async fn wait_log(page: &Client, edited: bool, why: &str) {
    let mut log = String::new();
    for _ in 0..50 {
        log = text_of(page, "#log").await;
        if log.contains("person.edit") == edited {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{why}; the log shows:\n{log}");
}

/// Waits until the page's address names spreadsheet `id` (`?spreadsheet=ID`); `why` says
/// what that shows.
async fn wait_address(page: &Client, id: &str, why: &str) {
    let wanted = format!("spreadsheet={id}");
    let mut last = String::new();
    for _ in 0..50 {
        last = page
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default();
        if last.contains(&wanted) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{why}: the address never named {id}; it is {last}");
}

#[tokio::test]
#[ignore = "needs Debian's chromium and chromium-driver; .ci/run runs it with --ignored"]
async fn a_person_picks_another_spreadsheet_in_the_page_and_ticks_a_box_there() {
    let emu = start_with_quota(Quota::scaled(50)).await;
    let home = emu.spreadsheet_id().to_string();
    let second = emu.add_spreadsheet(sheetq::emulator::Seed::Demo);
    let driver = start_driver().await;
    let page = browser(&driver).await;
    // An address naming a spreadsheet the emulator does not hold (it was restarted with
    // others) opens its first one, and says so.
    page.goto(&format!("{}?spreadsheet=gone", emu.base_url()))
        .await
        .unwrap_or_else(|e| panic!("cannot open the web view: {e}"));
    wait_address(&page, &home, "the address follows to the first spreadsheet").await;
    let picker = page
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#spreadsheet:not([hidden])"))
        .await
        .unwrap_or_else(|e| panic!("no spreadsheet picker for two spreadsheets: {e}"));
    let options = picker
        .find_all(Locator::Css("option"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(options.len(), 2, "one option per spreadsheet");
    assert_eq!(
        picker.prop("value").await.ok().flatten().as_deref(),
        Some(home.as_str()),
        "the page opens the emulator's first spreadsheet"
    );
    picker
        .select_by_value(&second)
        .await
        .unwrap_or_else(|e| panic!("cannot pick the second spreadsheet: {e}"));
    wait_address(
        &page,
        &second,
        "the address names the spreadsheet shown, so a reload keeps it",
    )
    .await;

    // A tick on サーバーA's first ▶ lands in the spreadsheet picked, not the first one.
    open_tab(&page, 1001).await;
    click(
        &page,
        "#grid td[data-r=\"7\"][data-c=\"0\"] input[type=checkbox]",
    )
    .await;
    let ticked = |id: &str| {
        emu.values_in(id, "'サーバーA'!A8")
            .unwrap_or_else(|e| panic!("{e:?}"))
    };
    for _ in 0..50 {
        if ticked(&second) == vec![vec![json!(true)]] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        ticked(&second),
        vec![vec![json!(true)]],
        "the tick went to the picked spreadsheet"
    );
    assert_ne!(
        ticked(&home),
        vec![vec![json!(true)]],
        "the first spreadsheet is untouched"
    );
    let edits: Vec<String> = emu
        .requests()
        .iter()
        .filter(|r| r.method == "person.edit")
        .map(|r| r.spreadsheet.clone())
        .collect();
    assert_eq!(
        edits,
        vec![second.clone()],
        "the edit is logged against the picked spreadsheet"
    );

    // The request log beside it is the picked spreadsheet's, with its times shown.
    wait_log(&page, true, "the edit is in the picked spreadsheet's log").await;
    let first_time = page
        .find(Locator::Css("#log time"))
        .await
        .unwrap_or_else(|e| panic!("no time in the log: {e}"))
        .text()
        .await
        .unwrap_or_default();
    assert!(
        first_time.len() == 8 && first_time.as_bytes()[2] == b':',
        "each log line shows its time as HH:MM:SS: {first_time:?}"
    );
    page.find(Locator::Css("#spreadsheet"))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .select_by_value(&home)
        .await
        .unwrap_or_else(|e| panic!("cannot pick the first spreadsheet again: {e}"));
    wait_log(
        &page,
        false,
        "the first spreadsheet's log does not show the other's edit",
    )
    .await;
    let _ = page.close().await;
}
