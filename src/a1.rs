//! A1 notation: quoting sheet titles for ranges sheetq sends, and parsing the ranges that come
//! back (or that the emulator receives) into zero-based, half-open grid coordinates.
//!
//! Google's rules (https://developers.google.com/sheets/api/guides/concepts#cell): a title
//! that is not a plain identifier is wrapped in single quotes, an embedded `'` is doubled;
//! `A1:B2` is a block, `A:C` whole columns, `2:5` whole rows, `A2:P` open-ended down, and a
//! bare title the whole sheet.

use std::fmt;

/// Quotes a sheet title for use in A1 notation: always wrapped in `'`, inner `'` doubled.
///
/// Quoting every title (not only the ones that need it) is accepted by Google and removes a
/// class of bugs around titles such as `_ジョブキュー`, `▶パネル` or `A1`.
pub fn quote_title(title: &str) -> String {
    format!("'{}'", title.replace('\'', "''"))
}

/// `'<title>'!<cells>`, e.g. `range("_ジョブキュー", "A2:P")`.
pub fn range(title: &str, cells: &str) -> String {
    format!("{}!{}", quote_title(title), cells)
}

/// Column letters for a zero-based column index: 0 → `A`, 25 → `Z`, 26 → `AA`.
pub fn column_letters(index: u32) -> String {
    let mut n = index + 1;
    let mut out = Vec::new();
    while n > 0 {
        let rem = (n - 1) % 26;
        out.push(b'A' + rem as u8);
        n = (n - 1) / 26;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// Zero-based column index for letters (`A` → 0, `AA` → 26); `None` if not letters.
pub fn column_index(letters: &str) -> Option<u32> {
    if letters.is_empty() || letters.len() > 3 {
        return None;
    }
    let mut n: u32 = 0;
    for b in letters.bytes() {
        let b = b.to_ascii_uppercase();
        if !b.is_ascii_uppercase() {
            return None;
        }
        n = n * 26 + u32::from(b - b'A' + 1);
    }
    Some(n - 1)
}

/// A parsed A1 range. Coordinates are zero-based and half-open (`end_*` exclusive), as in
/// the API's `GridRange`; `None` means unbounded on that side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A1Range {
    /// The sheet title, unquoted; `None` when the range had no `Title!` part.
    pub sheet: Option<String>,
    pub start_row: Option<u32>,
    pub end_row: Option<u32>,
    pub start_col: Option<u32>,
    pub end_col: Option<u32>,
}

/// Why an A1 string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse range: {0}")]
pub struct A1Error(pub String);

impl A1Range {
    /// Parses `Sheet!A1:B2`, `'My ''Sheet'''!A:C`, `Sheet`, `A2:P`, `2:5`, `B3`.
    ///
    /// A string without `!` is first read as cells; if that fails it is a bare sheet title,
    /// as Google does (`Sheet1` is the whole sheet, `A1` is a cell).
    pub fn parse(input: &str) -> Result<Self, A1Error> {
        let err = || A1Error(input.to_string());
        let s = input.trim();
        if s.is_empty() {
            return Err(err());
        }
        let (sheet, cells) = if let Some(rest) = s.strip_prefix('\'') {
            // Quoted title: find the closing quote that is not doubled.
            let mut title = String::new();
            let mut chars = rest.char_indices().peekable();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                if c == '\'' {
                    if matches!(chars.peek(), Some((_, '\''))) {
                        chars.next();
                        title.push('\'');
                    } else {
                        end = Some(i + 1);
                        break;
                    }
                } else {
                    title.push(c);
                }
            }
            let end = end.ok_or_else(err)?;
            let after = &rest[end..];
            if after.is_empty() {
                (Some(title), None)
            } else if let Some(cells) = after.strip_prefix('!') {
                (Some(title), Some(cells))
            } else {
                return Err(err());
            }
        } else if let Some((title, cells)) = s.rsplit_once('!') {
            (Some(title.to_string()), Some(cells))
        } else if let Ok(r) = Self::parse_cells(s) {
            return Ok(r);
        } else {
            (Some(s.to_string()), None)
        };
        match cells {
            None => Ok(A1Range {
                sheet,
                start_row: None,
                end_row: None,
                start_col: None,
                end_col: None,
            }),
            Some(cells) => {
                let mut r = Self::parse_cells(cells).map_err(|_| err())?;
                r.sheet = sheet;
                Ok(r)
            }
        }
    }

    fn parse_cells(cells: &str) -> Result<Self, A1Error> {
        let err = || A1Error(cells.to_string());
        let (a, b) = match cells.split_once(':') {
            Some((a, b)) => (a, Some(b)),
            None => (cells, None),
        };
        let (ac, ar) = split_cell(a).ok_or_else(err)?;
        if ac.is_none() && ar.is_none() {
            return Err(err());
        }
        match b {
            None => {
                // A single cell needs both parts.
                let (c, r) = (ac.ok_or_else(err)?, ar.ok_or_else(err)?);
                Ok(A1Range {
                    sheet: None,
                    start_row: Some(r),
                    end_row: Some(r + 1),
                    start_col: Some(c),
                    end_col: Some(c + 1),
                })
            }
            Some(b) => {
                let (bc, br) = split_cell(b).ok_or_else(err)?;
                if bc.is_none() && br.is_none() {
                    return Err(err());
                }
                // `A:C` (columns only) and `2:5` (rows only) must be consistent.
                if (ac.is_none() && bc.is_some() && br.is_none())
                    || (ar.is_none() && br.is_some() && bc.is_none())
                {
                    return Err(err());
                }
                let (sc, ec) = order(ac, bc);
                let (sr, er) = order(ar, br);
                Ok(A1Range {
                    sheet: None,
                    start_row: sr,
                    end_row: er.map(|r| r + 1),
                    start_col: sc,
                    end_col: ec.map(|c| c + 1),
                })
            }
        }
    }

    /// Number of rows when bounded on both sides.
    pub fn row_count(&self) -> Option<u32> {
        Some(self.end_row? - self.start_row.unwrap_or(0))
    }
}

fn order(a: Option<u32>, b: Option<u32>) -> (Option<u32>, Option<u32>) {
    match (a, b) {
        (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
        other => other,
    }
}

/// Splits `AB12` into (column index, row index), both zero-based; either part may be absent.
fn split_cell(cell: &str) -> Option<(Option<u32>, Option<u32>)> {
    let cell = cell.trim().replace('$', "");
    let split = cell
        .find(|c: char| c.is_ascii_digit())
        .unwrap_or(cell.len());
    let (letters, digits) = cell.split_at(split);
    let col = if letters.is_empty() {
        None
    } else {
        Some(column_index(letters)?)
    };
    let row = if digits.is_empty() {
        None
    } else {
        let n: u32 = digits.parse().ok()?;
        if n == 0 {
            return None;
        }
        Some(n - 1)
    };
    Some((col, row))
}

impl fmt::Display for A1Range {
    /// Formats back to A1; unbounded sides are left open (`A2:P`, `A:C`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(sheet) = &self.sheet {
            write!(f, "{}", quote_title(sheet))?;
            if self.start_row.is_none()
                && self.end_row.is_none()
                && self.start_col.is_none()
                && self.end_col.is_none()
            {
                return Ok(());
            }
            write!(f, "!")?;
        }
        let sc = self.start_col.unwrap_or(0);
        let sr = self.start_row.unwrap_or(0);
        let start_col = column_letters(sc);
        let single = self.end_col == Some(sc + 1) && self.end_row == Some(sr + 1);
        if single {
            return write!(f, "{start_col}{}", sr + 1);
        }
        let start_row = if self.start_row.is_some() || self.end_row.is_none() {
            if self.start_col.is_none() && self.end_col.is_none() {
                // Rows only: `2:5`.
                return write!(
                    f,
                    "{}:{}",
                    sr + 1,
                    self.end_row.map(|r| r.to_string()).unwrap_or_default()
                );
            }
            if self.start_row.is_some() {
                (sr + 1).to_string()
            } else {
                String::new()
            }
        } else {
            "1".to_string()
        };
        let end_col = self
            .end_col
            .map(|c| column_letters(c.saturating_sub(1)))
            .unwrap_or_else(|| "ZZZ".to_string());
        let end_row = self.end_row.map(|r| r.to_string()).unwrap_or_default();
        write!(f, "{start_col}{start_row}:{end_col}{end_row}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> A1Range {
        A1Range::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn quotes_titles_and_doubles_single_quotes() {
        assert_eq!(quote_title("_ジョブキュー"), "'_ジョブキュー'");
        assert_eq!(quote_title("Bob's #1"), "'Bob''s #1'");
        assert_eq!(range("▶パネル", "A1:D"), "'▶パネル'!A1:D");
    }

    #[test]
    fn column_letters_round_trip() {
        for (i, s) in [
            (0, "A"),
            (25, "Z"),
            (26, "AA"),
            (51, "AZ"),
            (701, "ZZ"),
            (702, "AAA"),
        ] {
            assert_eq!(column_letters(i), s);
            assert_eq!(column_index(s), Some(i));
        }
        assert_eq!(column_index("a"), Some(0));
        assert_eq!(column_index("1"), None);
    }

    #[test]
    fn parses_quoted_non_ascii_title_with_open_ended_rows() {
        let r = p("'_ジョブキュー'!A2:P");
        assert_eq!(r.sheet.as_deref(), Some("_ジョブキュー"));
        assert_eq!((r.start_row, r.end_row), (Some(1), None));
        assert_eq!((r.start_col, r.end_col), (Some(0), Some(16)));
    }

    #[test]
    fn parses_doubled_quote_and_whole_sheet() {
        let r = p("'Bob''s sheet'");
        assert_eq!(r.sheet.as_deref(), Some("Bob's sheet"));
        assert_eq!(r.start_row, None);
        assert_eq!(r.end_col, None);
        let r = p("Sheet1");
        assert_eq!(r.sheet.as_deref(), Some("Sheet1"));
        assert_eq!(r.end_row, None);
    }

    #[test]
    fn parses_whole_columns_rows_and_single_cells() {
        let r = p("Data!A:C");
        assert_eq!(
            (r.start_col, r.end_col, r.start_row, r.end_row),
            (Some(0), Some(3), None, None)
        );
        let r = p("2:5");
        assert_eq!(
            (r.start_row, r.end_row, r.start_col),
            (Some(1), Some(5), None)
        );
        let r = p("'_ワーカー'!B1");
        assert_eq!(
            (r.start_row, r.end_row, r.start_col, r.end_col),
            (Some(0), Some(1), Some(1), Some(2))
        );
        let r = p("B3:A1");
        assert_eq!(
            (r.start_row, r.end_row, r.start_col, r.end_col),
            (Some(0), Some(3), Some(0), Some(2))
        );
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "'unclosed!A1", "Sheet!A0", "Sheet!:", "Sheet!A1:B2:C3"] {
            assert!(A1Range::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn formats_back() {
        for s in [
            "'_ジョブキュー'!A2:P",
            "'S'!A:C",
            "'S'!B1",
            "'S'!A1:D10",
            "'S'",
        ] {
            assert_eq!(p(s).to_string(), s);
        }
    }
}
