//! Where sheetq and its emulator must agree without sharing code: each reads A1 notation
//! its own way (`sheetq::a1`, `sheetq_emulator::a1`), so that a wrong reading on one side
//! shows here instead of agreeing with itself; and the emulator's demo spreadsheet is laid
//! out as sheetq lays one out.

use proptest::prelude::*;
use sheetq::emulator::a1 as theirs;
use sheetq::emulator::seed;

/// What a reading gives: the sheet and the half-open coordinates, or that it refused.
type Read = Option<(
    Option<String>,
    Option<u32>,
    Option<u32>,
    Option<u32>,
    Option<u32>,
)>;

fn ours(text: &str) -> Read {
    sheetq::a1::A1Range::parse(text)
        .ok()
        .map(|r| (r.sheet, r.start_row, r.end_row, r.start_col, r.end_col))
}

fn emulators(text: &str) -> Read {
    theirs::A1Range::parse(text)
        .ok()
        .map(|r| (r.sheet, r.start_row, r.end_row, r.start_col, r.end_col))
}

#[test]
fn both_readings_agree_on_the_ranges_sheetq_sends_and_on_odd_ones() {
    for text in [
        "'_ジョブキュー'!A2:R",
        "'_ワーカー'!A1:K",
        "'▶パネル'!G2",
        "'サーバーA'!A8:J20",
        "'It''s'!B:D",
        "'It''s'",
        "Sheet1",
        "A1",
        "A1:B2",
        "B2:A1",
        "$A$1:$C$3",
        "A:C",
        "2:5",
        "5:2",
        "A5:A",
        "A:B5",
        "3:A",
        "A:3",
        "A0",
        "ZZZ1",
        "AAAA1",
        "Sheet1!",
        "'open",
        "'t'x",
        "x!y!A1",
        "",
        "  A1  ",
        "a1:b2",
        "1A",
        "A1:B2:C3",
    ] {
        assert_eq!(ours(text), emulators(text), "the two readings of {text:?}");
    }
}

proptest! {
    #[test]
    fn both_readings_agree_on_any_a1_like_text(text in "('[A-Za-z ']{0,4}'!|[A-Za-z]{1,3}!)?\\$?[A-Z]{0,4}\\$?[0-9]{0,3}(:\\$?[A-Z]{0,4}\\$?[0-9]{0,3})?") {
        prop_assert_eq!(ours(&text), emulators(&text), "the two readings of {:?}", text);
    }

    #[test]
    fn column_letters_agree(index in 0u32..18_278) {
        prop_assert_eq!(sheetq::a1::column_letters(index), theirs::column_letters(index));
    }
}

#[test]
fn the_demo_spreadsheet_is_laid_out_as_sheetq_lays_one_out() {
    assert_eq!(seed::QUEUE_TITLE, sheetq::queue::QUEUE_SHEET);
    assert_eq!(seed::WORKER_TITLE, sheetq::lease::WORKER_SHEET);
    assert_eq!(seed::LOG_TITLE, sheetq::joblog::LOG_SHEET);
    assert_eq!(seed::LOG_HEADER, sheetq::joblog::HEADER);
    assert_eq!(seed::CANCEL_HEADER, sheetq::panel::sync::CANCEL_HEADER);
}
