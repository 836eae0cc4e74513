//! A1 notation as the Sheets API reads it, written from Google's description
//! (https://developers.google.com/sheets/api/guides/concepts#cell):
//!
//! - `Sheet1!A1:B2` a block, `Sheet1!A:A` whole columns, `Sheet1!1:2` whole rows,
//!   `Sheet1!A5:A` a column from row 5 down, `A1:B2` cells of the first visible sheet,
//!   `Sheet1` every cell of a sheet;
//! - a title with spaces or special characters is wrapped in single quotes, and a quote
//!   inside it is doubled (`'My ''Sheet'''!A:A`);
//! - `$` (absolute references) may precede letters or digits and means nothing here.
//!
//! The emulator keeps this reading apart from sheetq's own (`sheetq::a1`), so that a wrong
//! reading on one side cannot agree with itself; a test of sheetq holds the two to the same
//! answers. Coordinates are zero-based and half-open, as a `GridRange`'s; `None` is an open
//! side.

use std::fmt;

/// The most columns a sheet may have (column `ZZZ`).
const MAX_LETTERS: usize = 3;

/// A range in A1 notation, resolved to grid coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A1Range {
    /// The sheet's title, unquoted; `None` without a `Title!` part.
    pub sheet: Option<String>,
    pub start_row: Option<u32>,
    pub end_row: Option<u32>,
    pub start_col: Option<u32>,
    pub end_col: Option<u32>,
}

/// A string that is not A1 notation: Google's words for it ("Unable to parse range").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A1Error(pub String);

impl fmt::Display for A1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unable to parse range: {}", self.0)
    }
}

impl std::error::Error for A1Error {}

/// One end of a range: its column and its row, either of which may be absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct End {
    col: Option<u32>,
    row: Option<u32>,
}

impl A1Range {
    /// Reads `input`. Without a `!`, the text is a range of cells if it reads as one, and a
    /// sheet's title otherwise (so `A1` is a cell and `Sheet1` a whole sheet).
    pub fn parse(input: &str) -> Result<Self, A1Error> {
        let bad = || A1Error(input.to_string());
        let text = input.trim();
        if text.is_empty() {
            return Err(bad());
        }
        let (sheet, cells) = split_title(text).ok_or_else(bad)?;
        let Some(cells) = cells else {
            return Ok(A1Range::whole(sheet));
        };
        match (cells_of(cells), sheet) {
            (Some(mut range), sheet @ Some(_)) => {
                range.sheet = sheet;
                Ok(range)
            }
            (Some(range), None) => Ok(range),
            // `Title!junk` is an error; a bare word that is no range is a title.
            (None, Some(_)) => Err(bad()),
            (None, None) => Ok(A1Range::whole(Some(cells.to_string()))),
        }
    }

    /// How many rows the range spans, when it is closed below (from row 1 when open above).
    pub fn row_count(&self) -> Option<u32> {
        Some(self.end_row? - self.start_row.unwrap_or(0))
    }

    fn whole(sheet: Option<String>) -> Self {
        A1Range {
            sheet,
            start_row: None,
            end_row: None,
            start_col: None,
            end_col: None,
        }
    }
}

/// Splits `Title!cells` into the title and the cells. A quoted title ends at its first
/// quote that is not doubled; an unquoted one at the last `!`. `None` for an unclosed
/// quote or text after a closing quote that is not `!`. A string with no title gives
/// `(None, Some(text))`.
fn split_title(text: &str) -> Option<(Option<String>, Option<&str>)> {
    if let Some(quoted) = text.strip_prefix('\'') {
        let mut title = String::new();
        let mut rest = quoted;
        loop {
            let at = rest.find('\'')?;
            title.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            match rest.strip_prefix('\'') {
                Some(after) => {
                    title.push('\'');
                    rest = after;
                }
                None => break,
            }
        }
        return match rest {
            "" => Some((Some(title), None)),
            _ => rest
                .strip_prefix('!')
                .map(|cells| (Some(title), Some(cells))),
        };
    }
    Some(match text.rfind('!') {
        Some(at) => (Some(text[..at].to_string()), Some(&text[at + 1..])),
        None => (None, Some(text)),
    })
}

/// `A1`, `A1:B2`, `A:C`, `2:5`, `A5:A`: the block the cells name, or `None`.
fn cells_of(cells: &str) -> Option<A1Range> {
    let mut ends = cells.split(':');
    let first = end_of(ends.next()?)?;
    let second = match ends.next() {
        Some(text) => Some(end_of(text)?),
        None => None,
    };
    if ends.next().is_some() {
        return None;
    }
    let Some(second) = second else {
        // One cell: it needs a column and a row.
        let (col, row) = (first.col?, first.row?);
        return Some(A1Range {
            sheet: None,
            start_row: Some(row),
            end_row: Some(row + 1),
            start_col: Some(col),
            end_col: Some(col + 1),
        });
    };
    // `A:3` or `3:A` mix a column range with a row range.
    let mixed = (first.col.is_none() && second.row.is_none() && second.col.is_some())
        || (first.row.is_none() && second.col.is_none() && second.row.is_some());
    if mixed {
        return None;
    }
    let (start_col, end_col) = span(first.col, second.col);
    let (start_row, end_row) = span(first.row, second.row);
    Some(A1Range {
        sheet: None,
        start_row,
        end_row,
        start_col,
        end_col,
    })
}

/// The half-open span between two inclusive ends, lower first; an absent end stays open.
fn span(a: Option<u32>, b: Option<u32>) -> (Option<u32>, Option<u32>) {
    match (a, b) {
        (Some(a), Some(b)) => (Some(a.min(b)), Some(a.max(b) + 1)),
        (a, b) => (a, b.map(|b| b + 1)),
    }
}

/// One end, `$AB$12`, `AB`, `12`: letters then digits, each optional but not both absent.
fn end_of(text: &str) -> Option<End> {
    let text: String = text.trim().chars().filter(|c| *c != '$').collect();
    let digits_at = text
        .char_indices()
        .find(|(_, c)| c.is_ascii_digit())
        .map_or(text.len(), |(i, _)| i);
    let (letters, digits) = text.split_at(digits_at);
    let col = match letters {
        "" => None,
        l => Some(column_of(l)?),
    };
    let row = match digits {
        "" => None,
        d if d.bytes().all(|b| b.is_ascii_digit()) => {
            let n: u32 = d.parse().ok()?;
            Some(n.checked_sub(1)?)
        }
        _ => return None,
    };
    (col.is_some() || row.is_some()).then_some(End { col, row })
}

/// The zero-based column of letters in base 26 with no zero digit (`A` 0, `Z` 25, `AA` 26).
fn column_of(letters: &str) -> Option<u32> {
    if letters.len() > MAX_LETTERS {
        return None;
    }
    letters
        .chars()
        .try_fold(0u32, |n, c| {
            let c = c.to_ascii_uppercase();
            c.is_ascii_uppercase()
                .then(|| n * 26 + (c as u32 - 'A' as u32 + 1))
        })?
        .checked_sub(1)
}

/// The letters of zero-based column `index`.
pub fn column_letters(index: u32) -> String {
    let mut letters = Vec::new();
    let mut n = index + 1;
    while n > 0 {
        let digit = (n - 1) % 26;
        letters.insert(0, char::from(b'A' + digit as u8));
        n = (n - 1) / 26;
    }
    letters.into_iter().collect()
}

/// A title quoted for A1 notation (always quoted, inner quotes doubled).
pub fn quote_title(title: &str) -> String {
    format!("'{}'", title.replace('\'', "''"))
}

/// `'<title>'!<cells>`.
pub fn range(title: &str, cells: &str) -> String {
    format!("{}!{cells}", quote_title(title))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(
        sr: u32,
        er: u32,
        sc: u32,
        ec: u32,
    ) -> (Option<u32>, Option<u32>, Option<u32>, Option<u32>) {
        (Some(sr), Some(er), Some(sc), Some(ec))
    }

    fn coords(r: &A1Range) -> (Option<u32>, Option<u32>, Option<u32>, Option<u32>) {
        (r.start_row, r.end_row, r.start_col, r.end_col)
    }

    #[test]
    fn the_examples_of_googles_guide_read_as_it_says() {
        let read = |s: &str| A1Range::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        let r = read("Sheet1!A1:B2");
        assert_eq!(
            (r.sheet.as_deref(), coords(&r)),
            (Some("Sheet1"), block(0, 2, 0, 2))
        );
        let r = read("Sheet1!A:A");
        assert_eq!(coords(&r), (None, None, Some(0), Some(1)));
        let r = read("Sheet1!1:2");
        assert_eq!(coords(&r), (Some(0), Some(2), None, None));
        let r = read("Sheet1!A5:A");
        assert_eq!(coords(&r), (Some(4), None, Some(0), Some(1)));
        let r = read("A1:B2");
        assert_eq!((r.sheet.as_deref(), coords(&r)), (None, block(0, 2, 0, 2)));
        let r = read("Sheet1");
        assert_eq!(
            (r.sheet.as_deref(), coords(&r)),
            (Some("Sheet1"), (None, None, None, None))
        );
        let r = read("'My Custom Sheet'!A:A");
        assert_eq!(r.sheet.as_deref(), Some("My Custom Sheet"));
        let r = read("'It''s'");
        assert_eq!(
            (r.sheet.as_deref(), coords(&r)),
            (Some("It's"), (None, None, None, None))
        );
        assert_eq!(coords(&read("$B$3")), block(2, 3, 1, 2));
        assert_eq!(
            coords(&read("B3:A1")),
            block(0, 3, 0, 2),
            "ends in either order"
        );
    }

    #[test]
    fn what_is_not_a1_is_refused() {
        for bad in [
            "",
            "'open",
            "'t'x",
            "Sheet1!A0",
            "Sheet1!A1:B2:C3",
            "Sheet1!AAAA1",
            "Sheet1!1A",
        ] {
            assert!(A1Range::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn columns_are_letters_in_base_26_without_zero() {
        for (i, l) in [(0, "A"), (25, "Z"), (26, "AA"), (701, "ZZ"), (702, "AAA")] {
            assert_eq!(column_letters(i), l);
            assert_eq!(column_of(l), Some(i));
        }
    }
}
