//! Effective values, including a small formula evaluator.
//!
//! The emulator is not a spreadsheet engine. It evaluates what a panel or a test is likely to
//! hold: number and string literals, `TRUE`/`FALSE`, `+ - * / &`, comparisons, parentheses,
//! references to single cells (`B2`, `'Other sheet'!$B$2`) and the functions `HYPERLINK`,
//! `CONCATENATE`, `IF`, `IFERROR`, `LEN`, `LEFT`, `UPPER`, `LOWER`, and `MATCH(value,
//! range, 0)` and `INDEX(range, n)` over one column or row (`'_ジョブキュー'!$A:$A`), which
//! sheetq's links to a job's rows use. Any other formula evaluates to `#NAME?`, an
//! assumption that keeps unknown formulas visible instead of silently wrong.

use super::store::{Spreadsheet, Value};
use crate::a1::A1Range;

/// An effective (computed) value.
#[derive(Debug, Clone, PartialEq)]
pub enum Eff {
    Number(f64),
    String(String),
    Bool(bool),
    /// Error text such as `#NAME?`, `#DIV/0!`, `#REF!`, `#VALUE!`.
    Error(String),
}

/// The effective value of a cell value on `sheet`.
pub fn effective(ss: &Spreadsheet, sheet: usize, v: &Value) -> Eff {
    eval_value(ss, sheet, v, 0, false)
}

/// The address a cell's `HYPERLINK` leads to (what the API gives as the cell's `hyperlink`):
/// the formula evaluated with `HYPERLINK` standing for its URL instead of its label. `None`
/// for a cell without one, or whose link evaluates to nothing or an error.
pub fn link(ss: &Spreadsheet, sheet: usize, v: &Value) -> Option<String> {
    let Value::Formula(f) = v else {
        return None;
    };
    if !f.to_ascii_uppercase().contains("HYPERLINK(") {
        return None;
    }
    match eval_value(ss, sheet, v, 0, true) {
        Eff::String(url) if !url.trim().is_empty() => Some(url),
        _ => None,
    }
}

fn eval_value(ss: &Spreadsheet, sheet: usize, v: &Value, depth: u32, links: bool) -> Eff {
    match v {
        Value::Number(n) => Eff::Number(*n),
        Value::String(s) => Eff::String(s.clone()),
        Value::Bool(b) => Eff::Bool(*b),
        Value::Formula(f) => {
            if depth > 32 {
                return Eff::Error("#REF!".into());
            }
            let src = f.strip_prefix('=').unwrap_or(f);
            let mut p = Parser {
                toks: match tokenize(src) {
                    Some(t) => t,
                    None => return Eff::Error("#ERROR!".into()),
                },
                pos: 0,
                ss,
                sheet,
                depth,
                links,
            };
            let out = p.expr();
            if p.pos != p.toks.len() {
                return Eff::Error("#ERROR!".into());
            }
            out
        }
    }
}

/// A token of formula text.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    /// A name: function, `TRUE`/`FALSE`, or a cell reference (possibly `Sheet!A1`).
    Name(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' => i += 1,
            '(' => {
                out.push(Tok::LParen);
                i += 1
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1
            }
            '"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return None,
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            s.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            s.push(*ch);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(s));
            }
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                out.push(Tok::Num(text.parse().ok()?));
            }
            '<' | '>' => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                let op = match two.as_str() {
                    "<=" => "<=",
                    ">=" => ">=",
                    "<>" => "<>",
                    _ if c == '<' => "<",
                    _ => ">",
                };
                i += op.len();
                out.push(Tok::Op(op));
            }
            '+' | '-' | '*' | '/' | '&' | '=' => {
                out.push(Tok::Op(match c {
                    '+' => "+",
                    '-' => "-",
                    '*' => "*",
                    '/' => "/",
                    '&' => "&",
                    _ => "=",
                }));
                i += 1;
            }
            '\'' => {
                // Quoted sheet name of a reference: '...'!A1
                let start = i;
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return None,
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => i += 2,
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                while i < chars.len() && (chars[i].is_alphanumeric() || "!$:".contains(chars[i])) {
                    i += 1;
                }
                out.push(Tok::Name(chars[start..i].iter().collect()));
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || "_$!.:".contains(chars[i]))
                {
                    i += 1;
                }
                out.push(Tok::Name(chars[start..i].iter().collect()));
            }
            _ => return None,
        }
    }
    Some(out)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    ss: &'a Spreadsheet,
    sheet: usize,
    depth: u32,
    /// `HYPERLINK` gives its URL, not its label ([`link`]).
    links: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn eat_op(&mut self, ops: &[&str]) -> Option<&'static str> {
        match self.peek() {
            Some(Tok::Op(o)) if ops.contains(o) => {
                let o = *o;
                self.pos += 1;
                Some(o)
            }
            _ => None,
        }
    }

    fn expr(&mut self) -> Eff {
        let mut left = self.concat();
        while let Some(op) = self.eat_op(&["=", "<>", "<", ">", "<=", ">="]) {
            let right = self.concat();
            left = compare(&left, &right, op);
        }
        left
    }

    fn concat(&mut self) -> Eff {
        let mut left = self.additive();
        while self.eat_op(&["&"]).is_some() {
            let right = self.additive();
            left = match (&left, &right) {
                (Eff::Error(_), _) => left,
                (_, Eff::Error(_)) => right,
                _ => Eff::String(text(&left) + &text(&right)),
            };
        }
        left
    }

    fn additive(&mut self) -> Eff {
        let mut left = self.term();
        while let Some(op) = self.eat_op(&["+", "-"]) {
            let right = self.term();
            left = arith(&left, &right, op);
        }
        left
    }

    fn term(&mut self) -> Eff {
        let mut left = self.unary();
        while let Some(op) = self.eat_op(&["*", "/"]) {
            let right = self.unary();
            left = arith(&left, &right, op);
        }
        left
    }

    fn unary(&mut self) -> Eff {
        if let Some(op) = self.eat_op(&["-", "+"]) {
            let v = self.unary();
            return arith(&Eff::Number(0.0), &v, op);
        }
        self.primary()
    }

    fn primary(&mut self) -> Eff {
        let Some(tok) = self.toks.get(self.pos).cloned() else {
            return Eff::Error("#ERROR!".into());
        };
        self.pos += 1;
        match tok {
            Tok::Num(n) => Eff::Number(n),
            Tok::Str(s) => Eff::String(s),
            Tok::LParen => {
                let v = self.expr();
                if self.peek() == Some(&Tok::RParen) {
                    self.pos += 1;
                    v
                } else {
                    Eff::Error("#ERROR!".into())
                }
            }
            Tok::Name(name) => {
                if self.peek() == Some(&Tok::LParen) {
                    self.pos += 1;
                    let mut args = Vec::new();
                    let mut ranges = Vec::new();
                    if self.peek() == Some(&Tok::RParen) {
                        self.pos += 1;
                    } else {
                        loop {
                            // A multi-cell range stands alone as an argument (MATCH, INDEX).
                            let range = match (self.peek(), self.toks.get(self.pos + 1)) {
                                (Some(Tok::Name(n)), Some(Tok::Comma | Tok::RParen))
                                    if n.contains(':') =>
                                {
                                    Some(n.clone())
                                }
                                _ => None,
                            };
                            match range {
                                Some(n) => {
                                    self.pos += 1;
                                    ranges.push((args.len(), self.range(&n)));
                                    args.push(Eff::String(String::new()));
                                }
                                None => args.push(self.expr()),
                            }
                            match self.peek() {
                                Some(Tok::Comma) => self.pos += 1,
                                Some(Tok::RParen) => {
                                    self.pos += 1;
                                    break;
                                }
                                _ => return Eff::Error("#ERROR!".into()),
                            }
                        }
                    }
                    return call(&name, args, ranges, self.links);
                }
                match name.to_ascii_uppercase().as_str() {
                    "TRUE" => Eff::Bool(true),
                    "FALSE" => Eff::Bool(false),
                    _ => self.reference(&name),
                }
            }
            _ => Eff::Error("#ERROR!".into()),
        }
    }

    /// The values of a one-column or one-row range (`$A:$A`, `'Sheet'!B2:B9`), top to
    /// bottom; an error for anything wider.
    fn range(&self, name: &str) -> Result<Vec<Eff>, Eff> {
        let Ok(r) = A1Range::parse(&name.replace('$', "")) else {
            return Err(Eff::Error("#NAME?".into()));
        };
        let sheet = match &r.sheet {
            None => self.sheet,
            Some(t) => match self.ss.sheets.iter().position(|s| &s.title == t) {
                Some(i) => i,
                None => return Err(Eff::Error("#REF!".into())),
            },
        };
        let s = &self.ss.sheets[sheet];
        let (r0, r1) = (
            r.start_row.unwrap_or(0),
            r.end_row.unwrap_or(s.row_count).min(s.row_count),
        );
        let (c0, c1) = (
            r.start_col.unwrap_or(0),
            r.end_col.unwrap_or(s.column_count),
        );
        let cell = |row: u32, col: u32| match s.value(row, col) {
            None => Eff::String(String::new()),
            Some(v) => eval_value(self.ss, sheet, v, self.depth + 1, false),
        };
        if c1 == c0 + 1 {
            Ok((r0..r1).map(|row| cell(row, c0)).collect())
        } else if r1 == r0 + 1 {
            Ok((c0..c1).map(|col| cell(r0, col)).collect())
        } else {
            Err(Eff::Error("#VALUE!".into()))
        }
    }

    fn reference(&self, name: &str) -> Eff {
        let Ok(r) = A1Range::parse(&name.replace('$', "")) else {
            return Eff::Error("#NAME?".into());
        };
        let (Some(row), Some(col)) = (r.start_row, r.start_col) else {
            return Eff::Error("#NAME?".into());
        };
        if r.row_count() != Some(1) || r.end_col != Some(col + 1) {
            return Eff::Error("#VALUE!".into());
        }
        let sheet = match &r.sheet {
            None => self.sheet,
            Some(t) => match self.ss.sheets.iter().position(|s| &s.title == t) {
                Some(i) => i,
                None => return Eff::Error("#REF!".into()),
            },
        };
        match self.ss.sheets[sheet].value(row, col) {
            None => Eff::Number(0.0),
            Some(v) => eval_value(self.ss, sheet, v, self.depth + 1, false),
        }
    }
}

/// Google's automatic format, as the emulator assumes it: integers plainly, others with up
/// to 10 decimals and trailing zeros removed. Here rather than in `values` (which formats
/// cells and uses this module for formulas), so the two modules do not import each other.
pub fn automatic(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1.0e15 {
        return format!("{}", n as i64);
    }
    let s = format!("{n:.10}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn text(v: &Eff) -> String {
    match v {
        Eff::Number(n) => automatic(*n),
        Eff::String(s) => s.clone(),
        Eff::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        Eff::Error(e) => e.clone(),
    }
}

fn is_blank(v: &Eff) -> bool {
    matches!(v, Eff::String(s) if s.is_empty())
}

fn number(v: &Eff) -> Result<f64, Eff> {
    match v {
        Eff::Number(n) => Ok(*n),
        Eff::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Eff::String(s) if s.is_empty() => Ok(0.0),
        Eff::String(s) => s.trim().parse().map_err(|_| Eff::Error("#VALUE!".into())),
        Eff::Error(_) => Err(v.clone()),
    }
}

fn arith(a: &Eff, b: &Eff, op: &str) -> Eff {
    let (x, y) = match (number(a), number(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match op {
        "+" => Eff::Number(x + y),
        "-" => Eff::Number(x - y),
        "*" => Eff::Number(x * y),
        _ if y == 0.0 => Eff::Error("#DIV/0!".into()),
        _ => Eff::Number(x / y),
    }
}

fn compare(a: &Eff, b: &Eff, op: &str) -> Eff {
    let ord = match (a, b) {
        (Eff::Error(_), _) => return a.clone(),
        (_, Eff::Error(_)) => return b.clone(),
        (Eff::Number(x), Eff::Number(y)) => x.partial_cmp(y),
        _ => Some(text(a).to_lowercase().cmp(&text(b).to_lowercase())),
    };
    let Some(ord) = ord else {
        return Eff::Error("#VALUE!".into());
    };
    use std::cmp::Ordering::*;
    Eff::Bool(match op {
        "=" => ord == Equal,
        "<>" => ord != Equal,
        "<" => ord == Less,
        ">" => ord == Greater,
        "<=" => ord != Greater,
        _ => ord != Less,
    })
}

/// A function's value; `ranges` are the arguments (by position) that were ranges, whose
/// place in `args` holds an empty string.
fn call(
    name: &str,
    args: Vec<Eff>,
    ranges: Vec<(usize, Result<Vec<Eff>, Eff>)>,
    links: bool,
) -> Eff {
    let name = name.to_ascii_uppercase();
    if let ("IFERROR", [v, rest @ ..]) = (name.as_str(), args.as_slice()) {
        return match (v, rest.first()) {
            (Eff::Error(_), alt) => alt.cloned().unwrap_or(Eff::String(String::new())),
            (v, _) => v.clone(),
        };
    }
    if let Some(e) = args.iter().find(|a| matches!(a, Eff::Error(_))) {
        return e.clone();
    }
    let range_at = |i: usize| -> Result<Vec<Eff>, Eff> {
        match ranges.iter().position(|(at, _)| *at == i) {
            Some(k) => ranges[k].1.clone(),
            // A single cell given where a range is expected: a range of one.
            None => Ok(vec![args
                .get(i)
                .cloned()
                .unwrap_or(Eff::String(String::new()))]),
        }
    };
    match (name.as_str(), args.len()) {
        ("MATCH", 2 | 3) => {
            if args.get(2).is_some_and(|t| number(t) != Ok(0.0)) {
                // Only exact matching is modelled.
                return Eff::Error("#N/A".into());
            }
            let cells = match range_at(1) {
                Ok(c) => c,
                Err(e) => return e,
            };
            let wanted = &args[0];
            return cells
                .iter()
                .position(|c| compare(c, wanted, "=") == Eff::Bool(true) && !is_blank(c))
                .map_or(Eff::Error("#N/A".into()), |i| Eff::Number(i as f64 + 1.0));
        }
        ("INDEX", 2) => {
            let cells = match range_at(0) {
                Ok(c) => c,
                Err(e) => return e,
            };
            return match number(&args[1]) {
                Ok(n) if n >= 1.0 && (n as usize) <= cells.len() => cells[n as usize - 1].clone(),
                Ok(_) => Eff::Error("#REF!".into()),
                Err(e) => e,
            };
        }
        _ => {}
    }
    if !ranges.is_empty() {
        return Eff::Error("#VALUE!".into());
    }
    match (name.as_str(), args.as_slice()) {
        ("HYPERLINK", [url, ..]) if links => Eff::String(text(url)),
        ("HYPERLINK", [url]) => Eff::String(text(url)),
        ("HYPERLINK", [_, label]) => label.clone(),
        ("CONCATENATE", parts) => Eff::String(parts.iter().map(text).collect()),
        ("IF", [c, t, rest @ ..]) if rest.len() <= 1 => {
            let truthy = match c {
                Eff::Bool(b) => *b,
                other => number(other).map(|n| n != 0.0).unwrap_or(false),
            };
            if truthy {
                t.clone()
            } else {
                rest.first().cloned().unwrap_or(Eff::Bool(false))
            }
        }
        ("LEN", [s]) => Eff::Number(text(s).chars().count() as f64),
        ("LEFT", [s, n]) => match number(n) {
            Ok(n) if n >= 0.0 => Eff::String(text(s).chars().take(n as usize).collect()),
            Ok(_) => Eff::Error("#VALUE!".into()),
            Err(e) => e,
        },
        ("UPPER", [s]) => Eff::String(text(s).to_uppercase()),
        ("LOWER", [s]) => Eff::String(text(s).to_lowercase()),
        _ => Eff::Error("#NAME?".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Sheet;

    fn eval(ss: &Spreadsheet, f: &str) -> Eff {
        effective(ss, 0, &Value::Formula(f.into()))
    }

    #[test]
    fn evaluates_arithmetic_references_and_functions() {
        let mut ss = Spreadsheet::new("x", "t");
        let mut s = Sheet::new(0, "S");
        s.set_value(0, 0, Some(Value::Number(3.0)));
        s.set_value(0, 1, Some(Value::Formula("=A1*2".into())));
        ss.sheets.push(s);
        ss.sheets.push(Sheet::new(1, "Other sheet"));
        assert_eq!(eval(&ss, "=1+1"), Eff::Number(2.0));
        assert_eq!(eval(&ss, "=(1+2)*3-4/2"), Eff::Number(7.0));
        assert_eq!(eval(&ss, "=B1+1"), Eff::Number(7.0));
        assert_eq!(eval(&ss, "=\"a\"&\"b\""), Eff::String("ab".into()));
        assert_eq!(
            eval(&ss, "=HYPERLINK(\"#gid=1\",\"panel\")"),
            Eff::String("panel".into())
        );
        assert_eq!(eval(&ss, "='Other sheet'!A1+1"), Eff::Number(1.0));
        assert_eq!(eval(&ss, "=1/0"), Eff::Error("#DIV/0!".into()));
        assert_eq!(eval(&ss, "=NOSUCH(1)"), Eff::Error("#NAME?".into()));
        assert_eq!(
            eval(&ss, "=IF(A1>2,\"big\",\"small\")"),
            Eff::String("big".into())
        );
    }

    #[test]
    fn match_and_index_find_a_row_by_its_value_wherever_it_is() {
        let mut ss = Spreadsheet::new("x", "t");
        ss.sheets.push(Sheet::new(0, "S"));
        let mut log = Sheet::new(1, "_ジョブログ");
        for (r, (id, out)) in [("jobId", "出力"), ("j-2", "two"), ("j-1", "one")]
            .into_iter()
            .enumerate()
        {
            log.set_value(r as u32, 0, Some(Value::String(id.into())));
            log.set_value(r as u32, 1, Some(Value::String(out.into())));
        }
        ss.sheets.push(log);
        assert_eq!(
            eval(&ss, "=MATCH(\"j-1\",'_ジョブログ'!$A:$A,0)"),
            Eff::Number(3.0)
        );
        assert_eq!(
            eval(
                &ss,
                "=INDEX('_ジョブログ'!$B:$B,MATCH(\"J-2\",'_ジョブログ'!$A:$A,0))"
            ),
            Eff::String("two".into()),
            "MATCH compares text without case, as Google's does"
        );
        assert_eq!(
            eval(&ss, "=MATCH(\"gone\",'_ジョブログ'!$A:$A,0)"),
            Eff::Error("#N/A".into())
        );
        assert_eq!(
            eval(
                &ss,
                "=IFERROR(HYPERLINK(\"#gid=1&range=A\"&MATCH(\"gone\",'_ジョブログ'!$A:$A,0)),\"\")"
            ),
            Eff::String(String::new()),
            "IFERROR takes the error of a row that is gone"
        );
        assert_eq!(eval(&ss, "=LEFT(\"abcdef\",3)"), Eff::String("abc".into()));
        assert_eq!(
            eval(&ss, "=MATCH(\"x\",'No sheet'!$A:$A,0)"),
            Eff::Error("#REF!".into())
        );
    }

    #[test]
    fn self_reference_is_an_error_not_a_hang() {
        let mut ss = Spreadsheet::new("x", "t");
        let mut s = Sheet::new(0, "S");
        s.set_value(0, 0, Some(Value::Formula("=A1+1".into())));
        ss.sheets.push(s);
        assert_eq!(eval(&ss, "=A1"), Eff::Error("#REF!".into()));
    }
}
