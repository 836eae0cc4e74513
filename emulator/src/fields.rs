//! The `fields` system parameter (partial responses,
//! https://cloud.google.com/apis/docs/system-parameters and
//! https://developers.google.com/sheets/api/guides/field-masks): a reply is cut down to the
//! listed fields. Syntax: `a,b.c,d/e,f(g,h(i))`; `*` keeps everything at its level.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::error::ApiError;

/// A parsed selection: for each kept key, what to keep inside it (`None`: all of it).
#[derive(Debug, Default, PartialEq)]
pub struct Selection(BTreeMap<String, Option<Selection>>);

impl Selection {
    pub fn parse(mask: &str) -> Result<Self, ApiError> {
        let chars: Vec<char> = mask.chars().filter(|c| !c.is_whitespace()).collect();
        let mut pos = 0;
        let sel = parse_list(&chars, &mut pos)?;
        if pos != chars.len() {
            return Err(bad(mask));
        }
        Ok(sel)
    }

    /// Keeps only the selected fields of `v`; arrays apply the selection to each element.
    pub fn apply(&self, v: &mut Json) {
        match v {
            Json::Array(items) => items.iter_mut().for_each(|i| self.apply(i)),
            Json::Object(map) => {
                if self.0.contains_key("*") {
                    return;
                }
                map.retain(|k, _| self.0.contains_key(k));
                for (k, child) in map.iter_mut() {
                    if let Some(Some(sel)) = self.0.get(k) {
                        sel.apply(child);
                    }
                }
            }
            _ => {}
        }
    }

    fn insert(&mut self, path: &[String], sub: Option<Selection>) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if rest.is_empty() {
            match (self.0.get_mut(first), sub) {
                (Some(Some(existing)), Some(sub)) => existing.0.extend(sub.0),
                (Some(slot), None) => *slot = None,
                (Some(None), Some(_)) => {}
                (None, sub) => {
                    self.0.insert(first.clone(), sub);
                }
            }
            return;
        }
        let entry = self
            .0
            .entry(first.clone())
            .or_insert_with(|| Some(Selection::default()));
        if let Some(child) = entry {
            child.insert(rest, sub);
        }
    }
}

fn bad(mask: &str) -> ApiError {
    ApiError::invalid(format!("Invalid field selection {mask}"))
}

fn parse_list(chars: &[char], pos: &mut usize) -> Result<Selection, ApiError> {
    let text: String = chars.iter().collect();
    let mut sel = Selection::default();
    loop {
        let mut path = Vec::new();
        let mut name = String::new();
        while let Some(&c) = chars.get(*pos) {
            if c.is_alphanumeric() || c == '_' || c == '*' {
                name.push(c);
                *pos += 1;
            } else if c == '.' || c == '/' {
                if name.is_empty() {
                    return Err(bad(&text));
                }
                path.push(std::mem::take(&mut name));
                *pos += 1;
            } else {
                break;
            }
        }
        if name.is_empty() {
            return Err(bad(&text));
        }
        path.push(name);
        let sub = if chars.get(*pos) == Some(&'(') {
            *pos += 1;
            let inner = parse_list(chars, pos)?;
            if chars.get(*pos) != Some(&')') {
                return Err(bad(&text));
            }
            *pos += 1;
            Some(inner)
        } else {
            None
        };
        sel.insert(&path, sub);
        if chars.get(*pos) == Some(&',') {
            *pos += 1;
        } else {
            return Ok(sel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cut(mask: &str, mut v: Json) -> Json {
        Selection::parse(mask)
            .unwrap_or_else(|e| panic!("{mask}: {e}"))
            .apply(&mut v);
        v
    }

    #[test]
    fn keeps_only_selected_fields() {
        let v = json!({ "spreadsheetId": "x", "properties": { "title": "t", "timeZone": "Asia/Tokyo" },
            "sheets": [{ "properties": { "sheetId": 1, "title": "a", "index": 0 }, "data": [] }] });
        assert_eq!(
            cut(
                "sheets(properties(sheetId,title)),properties.timeZone",
                v.clone()
            ),
            json!({ "properties": { "timeZone": "Asia/Tokyo" },
                    "sheets": [{ "properties": { "sheetId": 1, "title": "a" } }] })
        );
        assert_eq!(
            cut("sheets/properties/title", v.clone())["sheets"][0],
            json!({ "properties": { "title": "a" } })
        );
        assert_eq!(cut("*", v.clone()), v);
        assert!(Selection::parse("a(b").is_err());
        assert!(Selection::parse("a,,b").is_err());
    }
}
