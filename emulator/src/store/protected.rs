//! The data of a protected range, kept on the sheet it protects: its area (each side open or
//! bounded, as the `GridRange` it was given), settings and editors, and how the area follows
//! the rows and columns a request inserts, deletes or moves, as Google moves a protected range
//! with its cells. Who may edit through one, and the requests that manage them, are
//! `protection.rs`.

use serde::{Deserialize, Serialize};

/// One side-pair of an area along rows or columns: zero-based, half open; `None` is an open
/// side (the range runs to the grid's edge, and stays open when the grid grows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u32>,
}

impl Span {
    /// The span as numbers, an open end as `u32::MAX` (past every row the grid may grow to).
    pub fn bounds(&self) -> (u32, u32) {
        (self.start.unwrap_or(0), self.end.unwrap_or(u32::MAX))
    }

    /// Whether `n` lines inserted before line `at` land inside the span (and so would join
    /// it): after its start and before its end; an open side reaches the grid's edge, so an
    /// insertion at the very top (or bottom) of an open span is inside it.
    pub fn takes_insert_at(&self, at: u32) -> bool {
        self.start.is_none_or(|s| s < at) && self.end.is_none_or(|e| at < e)
    }

    /// Follows `n` lines inserted before line `at`: lines at or below `at` move down, and a
    /// span the insertion falls inside grows.
    fn insert(&mut self, at: u32, n: u32) {
        if let Some(s) = self.start.as_mut() {
            if *s >= at {
                *s += n;
            }
        }
        if let Some(e) = self.end.as_mut() {
            if *e > at {
                *e += n;
            }
        }
    }

    /// Follows the deletion of lines `[from, to)`; returns `false` when every line of a
    /// bounded span went with them.
    fn delete(&mut self, from: u32, to: u32) -> bool {
        let n = to - from;
        let shift = |i: u32| {
            if i >= to {
                i - n
            } else if i > from {
                from
            } else {
                i
            }
        };
        self.start = self.start.map(shift);
        self.end = self.end.map(shift);
        !matches!((self.start, self.end), (Some(s), Some(e)) if s >= e)
    }

    /// Follows lines `[from, to)` moved before line `dest` (counted before the move): the
    /// span becomes the smallest one holding where its lines went.
    fn relocate(&mut self, from: u32, to: u32, dest: u32) {
        if dest >= from && dest <= to {
            return;
        }
        let len = to - from;
        let at = if dest < from { dest } else { dest - len };
        let new_index = |i: u32| -> u32 {
            if (from..to).contains(&i) {
                at + (i - from)
            } else {
                let without = if i >= to { i - len } else { i };
                if without >= at {
                    without + len
                } else {
                    without
                }
            }
        };
        if let (Some(s), Some(e)) = (self.start, self.end) {
            if s < e {
                let moved: Vec<u32> = (s..e).map(new_index).collect();
                let lo = moved.iter().copied().min().unwrap_or(s);
                let hi = moved.iter().copied().max().map_or(e, |m| m + 1);
                self.start = Some(lo);
                self.end = Some(hi);
            }
            return;
        }
        // A side open towards the grid's edge stays open; the bounded side follows its line.
        self.start = self.start.map(new_index);
        self.end = self
            .end
            .map(|e| if e == 0 { 0 } else { new_index(e - 1) + 1 });
    }
}

/// A block of the sheet a protected range names: rows and columns, each maybe open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Area {
    #[serde(default)]
    pub rows: Span,
    #[serde(default)]
    pub cols: Span,
}

impl Area {
    /// Every side open: the area is the whole sheet ("a protected sheet").
    pub fn is_whole_sheet(&self) -> bool {
        *self == Area::default()
    }

    fn span(&mut self, rows: bool) -> &mut Span {
        if rows {
            &mut self.rows
        } else {
            &mut self.cols
        }
    }
}

/// `Editors` of a protected range: people and service accounts by address, groups by
/// address, and whether everyone of the owner's domain may edit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Editors {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub domain_users_can_edit: bool,
}

/// A protected range of the sheet that holds it
/// (https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/sheets#ProtectedRange).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protected {
    /// Unique in the spreadsheet.
    pub id: i32,
    pub area: Area,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Every user may edit, after a warning (in the Sheets UI; the API does not warn).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warning_only: bool,
    pub editors: Editors,
    /// Blocks left editable inside a protected sheet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprotected: Vec<Area>,
}

impl Protected {
    fn areas(&mut self) -> impl Iterator<Item = &mut Area> {
        std::iter::once(&mut self.area).chain(self.unprotected.iter_mut())
    }

    /// Follows `n` rows (or columns) inserted before `at`.
    pub(crate) fn insert(&mut self, rows: bool, at: u32, n: u32) {
        for a in self.areas() {
            a.span(rows).insert(at, n);
        }
    }

    /// Follows the deletion of rows (or columns) `[from, to)`; returns `false` when the
    /// protected area itself is gone. Unprotected blocks that are gone are dropped.
    pub(crate) fn delete(&mut self, rows: bool, from: u32, to: u32) -> bool {
        self.unprotected
            .retain_mut(|a| a.span(rows).delete(from, to));
        self.area.span(rows).delete(from, to)
    }

    /// Follows rows (or columns) `[from, to)` moved before `dest`.
    pub(crate) fn relocate(&mut self, rows: bool, from: u32, to: u32, dest: u32) {
        for a in self.areas() {
            a.span(rows).relocate(from, to, dest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: Option<u32>, end: Option<u32>) -> Span {
        Span { start, end }
    }

    #[test]
    fn a_span_moves_down_for_rows_inserted_above_and_grows_for_rows_inserted_inside() {
        let mut s = span(Some(2), Some(5));
        s.insert(0, 1);
        assert_eq!(s, span(Some(3), Some(6)), "inserted above: moves down");
        s.insert(4, 2);
        assert_eq!(s, span(Some(3), Some(8)), "inserted inside: grows");
        s.insert(8, 3);
        assert_eq!(s, span(Some(3), Some(8)), "inserted right below: unchanged");
        assert!(s.takes_insert_at(5) && !s.takes_insert_at(3) && !s.takes_insert_at(8));
        let whole = span(None, None);
        assert!(
            whole.takes_insert_at(0) && whole.takes_insert_at(1000),
            "an open span reaches both edges of the grid"
        );
    }

    #[test]
    fn a_span_shrinks_with_deleted_rows_and_goes_when_all_of_them_go() {
        let mut s = span(Some(2), Some(5));
        assert!(s.delete(0, 1));
        assert_eq!(s, span(Some(1), Some(4)));
        assert!(s.delete(2, 3));
        assert_eq!(s, span(Some(1), Some(3)));
        assert!(!s.delete(0, 10), "every row of the span deleted");
        let mut open = span(Some(3), None);
        assert!(open.delete(0, 10), "an open end keeps the span");
        assert_eq!(open, span(Some(0), None));
    }

    #[test]
    fn a_span_follows_its_rows_when_they_move() {
        let mut s = span(Some(2), Some(4));
        s.relocate(2, 4, 10);
        assert_eq!(s, span(Some(8), Some(10)), "the span's own rows moved down");
        let mut below = span(Some(5), Some(6));
        below.relocate(0, 1, 9);
        assert_eq!(below, span(Some(4), Some(5)), "a row moved from above it");
        let mut p = Protected {
            id: 1,
            area: Area {
                rows: span(Some(0), Some(1)),
                cols: Span::default(),
            },
            description: None,
            warning_only: false,
            editors: Editors::default(),
            unprotected: vec![],
        };
        p.insert(true, 0, 2);
        assert_eq!(p.area.rows, span(Some(2), Some(3)));
        p.insert(false, 0, 2);
        assert_eq!(p.area.cols, Span::default(), "open columns stay open");
    }
}
