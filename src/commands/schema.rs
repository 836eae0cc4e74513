//! Checks on a job's `argsJSON` before it runs: `args_required` (keys that must be present)
//! and `args_schema`, a small, strict subset of JSON Schema.
//!
//! Why a subset and not a full validator: the checks guard a panel button, so they are short
//! (a few keys, their types, maybe an enum or a pattern), and a full JSON Schema engine would
//! bring remote `$ref` resolution and a large dependency tree into a daemon that needs none
//! of it. The subset is strict in the other direction: a keyword it does not implement is a
//! startup error, so an operator never believes a check applies when it does not.
//!
//! Supported: `type` (a name or a list of names), `properties`, `required`,
//! `additionalProperties` (boolean), `enum`, `const`, `minimum`, `maximum`,
//! `exclusiveMinimum`, `exclusiveMaximum` (numbers), `minLength`, `maxLength`, `pattern`
//! (Rust `regex` syntax, unanchored as in JSON Schema), `items` (one schema), `minItems`,
//! `maxItems`; annotations (`$schema`, `$id`, `title`, `description`, `default`, `examples`,
//! `$comment`) are accepted and ignored.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

/// The checks configured for one command, compiled at startup.
#[derive(Debug, Clone, Default)]
pub struct ArgsChecks {
    pub(crate) required: Vec<String>,
    pub(crate) schema: Option<Schema>,
}

impl ArgsChecks {
    /// Every problem with `args`, as text fit for the sheet (`args.month is required`).
    pub fn check(&self, args: &Map<String, Value>) -> Vec<String> {
        let mut problems = Vec::new();
        for key in &self.required {
            if !args.contains_key(key) {
                problems.push(format!("{} is required", path_of("args", key)));
            }
        }
        if let Some(schema) = &self.schema {
            let value = Value::Object(args.clone());
            let mut found = Vec::new();
            schema.check(&value, "args", &mut found);
            for p in found {
                if !problems.contains(&p) {
                    problems.push(p);
                }
            }
        }
        problems
    }

    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.schema.is_none()
    }
}

/// One compiled schema node.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    types: Option<Vec<JsonType>>,
    properties: BTreeMap<String, Schema>,
    required: Vec<String>,
    additional_properties: Option<bool>,
    enumeration: Option<Vec<Value>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<Regex>,
    items: Option<Box<Schema>>,
    min_items: Option<u64>,
    max_items: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonType {
    String,
    Number,
    Integer,
    Boolean,
    Object,
    Array,
    Null,
}

impl JsonType {
    const NAMES: &'static str = "string, number, integer, boolean, object, array, null";

    fn parse(name: &str) -> Option<JsonType> {
        Some(match name {
            "string" => JsonType::String,
            "number" => JsonType::Number,
            "integer" => JsonType::Integer,
            "boolean" => JsonType::Boolean,
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "null" => JsonType::Null,
            _ => return None,
        })
    }

    fn with_article(self) -> &'static str {
        match self {
            JsonType::String => "a string",
            JsonType::Number => "a number",
            JsonType::Integer => "an integer",
            JsonType::Boolean => "a boolean",
            JsonType::Object => "an object",
            JsonType::Array => "an array",
            JsonType::Null => "null",
        }
    }

    fn matches(self, v: &Value) -> bool {
        match self {
            JsonType::String => v.is_string(),
            JsonType::Number => v.is_number(),
            JsonType::Integer => {
                v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            JsonType::Boolean => v.is_boolean(),
            JsonType::Object => v.is_object(),
            JsonType::Array => v.is_array(),
            JsonType::Null => v.is_null(),
        }
    }
}

const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
];

impl Schema {
    /// Compiles `v`; problems are pushed to `errors` prefixed with `at` (the config path).
    pub fn compile(v: &Value, at: &str, errors: &mut Vec<String>) -> Schema {
        let mut s = Schema::default();
        let Some(obj) = v.as_object() else {
            errors.push(format!(
                "{at} must be a schema object, found {}",
                describe_type(v)
            ));
            return s;
        };
        for (key, val) in obj {
            let here = format!("{at}.{key}");
            match key.as_str() {
                "type" => s.types = compile_types(val, &here, errors),
                "properties" => match val.as_object() {
                    Some(props) => {
                        for (name, sub) in props {
                            let sub = Schema::compile(sub, &format!("{here}.{name}"), errors);
                            s.properties.insert(name.clone(), sub);
                        }
                    }
                    None => errors.push(format!("{here} must be an object of schemas")),
                },
                "required" => match string_list(val) {
                    Some(list) => s.required = list,
                    None => errors.push(format!("{here} must be a list of key names")),
                },
                "additionalProperties" => match val.as_bool() {
                    Some(b) => s.additional_properties = Some(b),
                    None => errors.push(format!(
                        "{here} must be true or false (schemas here are not supported)"
                    )),
                },
                "enum" => match val.as_array() {
                    Some(list) if !list.is_empty() => s.enumeration = Some(list.clone()),
                    _ => errors.push(format!("{here} must be a non-empty list of values")),
                },
                "const" => s.enumeration = Some(vec![val.clone()]),
                "minimum" => s.minimum = number(val, &here, errors),
                "maximum" => s.maximum = number(val, &here, errors),
                "exclusiveMinimum" => s.exclusive_minimum = number(val, &here, errors),
                "exclusiveMaximum" => s.exclusive_maximum = number(val, &here, errors),
                "minLength" => s.min_length = count(val, &here, errors),
                "maxLength" => s.max_length = count(val, &here, errors),
                "minItems" => s.min_items = count(val, &here, errors),
                "maxItems" => s.max_items = count(val, &here, errors),
                "pattern" => match val.as_str().map(Regex::new) {
                    Some(Ok(re)) => s.pattern = Some(re),
                    Some(Err(e)) => errors.push(format!("{here} is not a valid regex: {e}")),
                    None => errors.push(format!("{here} must be a string")),
                },
                "items" => s.items = Some(Box::new(Schema::compile(val, &here, errors))),
                k if ANNOTATIONS.contains(&k) => {}
                other => errors.push(format!(
                    "{at}: keyword \"{other}\" is not supported by sheetq's args checks \
                     (supported: type, properties, required, additionalProperties, enum, const, \
                     minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, \
                     pattern, items, minItems, maxItems); remove it or express the check with \
                     these"
                )),
            }
        }
        s
    }

    /// Pushes every way `v` (found at `at`, e.g. `args.month`) fails this schema.
    pub fn check(&self, v: &Value, at: &str, problems: &mut Vec<String>) {
        if let Some(types) = &self.types {
            if !types.iter().any(|t| t.matches(v)) {
                let names: Vec<&str> = types.iter().map(|t| t.with_article()).collect();
                problems.push(format!(
                    "{at} must be {}, found {}",
                    names.join(" or "),
                    describe_value(v)
                ));
                return;
            }
        }
        if let Some(allowed) = &self.enumeration {
            if !allowed.contains(v) {
                let list: Vec<String> = allowed.iter().map(compact).collect();
                problems.push(format!(
                    "{at} must be one of {}, found {}",
                    list.join(", "),
                    describe_value(v)
                ));
            }
        }
        match v {
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if let Some(min) = self.minimum.filter(|m| x < *m) {
                    problems.push(format!("{at} must be at least {min}, found {x}"));
                }
                if let Some(max) = self.maximum.filter(|m| x > *m) {
                    problems.push(format!("{at} must be at most {max}, found {x}"));
                }
                if let Some(min) = self.exclusive_minimum.filter(|m| x <= *m) {
                    problems.push(format!("{at} must be greater than {min}, found {x}"));
                }
                if let Some(max) = self.exclusive_maximum.filter(|m| x >= *m) {
                    problems.push(format!("{at} must be less than {max}, found {x}"));
                }
            }
            Value::String(text) => {
                let len = text.chars().count() as u64;
                if let Some(min) = self.min_length.filter(|m| len < *m) {
                    problems.push(format!("{at} must have at least {min} characters"));
                }
                if let Some(max) = self.max_length.filter(|m| len > *m) {
                    problems.push(format!("{at} must have at most {max} characters"));
                }
                if let Some(re) = self.pattern.as_ref().filter(|re| !re.is_match(text)) {
                    problems.push(format!("{at} must match the pattern {}", re.as_str()));
                }
            }
            Value::Array(list) => {
                let len = list.len() as u64;
                if let Some(min) = self.min_items.filter(|m| len < *m) {
                    problems.push(format!("{at} must have at least {min} items"));
                }
                if let Some(max) = self.max_items.filter(|m| len > *m) {
                    problems.push(format!("{at} must have at most {max} items"));
                }
                if let Some(items) = &self.items {
                    for (i, item) in list.iter().enumerate() {
                        items.check(item, &format!("{at}[{i}]"), problems);
                    }
                }
            }
            Value::Object(map) => {
                for key in &self.required {
                    if !map.contains_key(key) {
                        problems.push(format!("{} is required", path_of(at, key)));
                    }
                }
                for (key, val) in map {
                    match self.properties.get(key) {
                        Some(sub) => sub.check(val, &path_of(at, key), problems),
                        None if self.additional_properties == Some(false) => {
                            let known: Vec<&str> =
                                self.properties.keys().map(String::as_str).collect();
                            problems.push(format!(
                                "{} is not an accepted key (accepted: {})",
                                path_of(at, key),
                                known.join(", ")
                            ));
                        }
                        None => {}
                    }
                }
            }
            Value::Bool(_) | Value::Null => {}
        }
    }
}

fn compile_types(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<Vec<JsonType>> {
    let names: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(list) if !list.is_empty() => match list.iter().map(Value::as_str).collect() {
            Some(names) => names,
            None => {
                errors.push(format!("{at} must be a type name or a list of type names"));
                return None;
            }
        },
        _ => {
            errors.push(format!("{at} must be a type name or a list of type names"));
            return None;
        }
    };
    let mut types = Vec::new();
    for name in names {
        match JsonType::parse(name) {
            Some(t) => types.push(t),
            None => errors.push(format!(
                "{at}: \"{name}\" is not a JSON Schema type (types: {})",
                JsonType::NAMES
            )),
        }
    }
    Some(types)
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn number(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<f64> {
    let n = v.as_f64();
    if n.is_none() {
        errors.push(format!("{at} must be a number"));
    }
    n
}

fn count(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<u64> {
    let n = v.as_u64();
    if n.is_none() {
        errors.push(format!("{at} must be a whole number, 0 or more"));
    }
    n
}

/// `args.month`, or `args["a b"]` for a key that is not a plain identifier.
fn path_of(at: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("{at}.{key}")
    } else {
        format!("{at}[{}]", compact(&Value::String(key.to_string())))
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// "a string", "an array", ... for messages about the shape of a value.
pub fn describe_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The value itself when short (`"3"`, `12`), else its kind; for messages.
pub fn describe_value(v: &Value) -> String {
    let text = compact(v);
    if text.chars().count() <= 40 {
        text
    } else {
        describe_type(v).to_string()
    }
}

/// Converts a TOML value (an inline `args_schema` table) to JSON. Dates have no JSON form.
pub fn toml_to_json(v: &toml::Value) -> Result<Value, String> {
    Ok(match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("{f} has no JSON form"))?,
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => return Err(format!("date {d} has no JSON form; quote it")),
        toml::Value::Array(list) => {
            Value::Array(list.iter().map(toml_to_json).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| Ok((k.clone(), toml_to_json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(v: Value) -> (Schema, Vec<String>) {
        let mut errors = Vec::new();
        let s = Schema::compile(&v, "commands.x.args_schema", &mut errors);
        (s, errors)
    }

    fn problems(schema: &Schema, v: Value) -> Vec<String> {
        let mut p = Vec::new();
        schema.check(&v, "args", &mut p);
        p
    }

    #[test]
    fn types_required_and_properties() {
        let (s, errors) = compile(json!({
            "type": "object",
            "required": ["month"],
            "properties": {
                "month": {"type": "string", "pattern": "^\\d{4}-\\d{2}$"},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"enum": ["fast", "full"]}
            },
            "additionalProperties": false
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(problems(&s, json!({"month": "2026-11", "count": 3.0})).is_empty());
        assert_eq!(
            problems(&s, json!({"count": "3", "mode": "slow", "x y": 1})),
            vec![
                "args.month is required",
                "args.count must be an integer, found \"3\"",
                "args.mode must be one of \"fast\", \"full\", found \"slow\"",
                "args[\"x y\"] is not an accepted key (accepted: count, mode, month)",
            ]
        );
        assert_eq!(
            problems(&s, json!({"month": "Nov", "count": 11})),
            vec![
                "args.count must be at most 10, found 11",
                "args.month must match the pattern ^\\d{4}-\\d{2}$",
            ]
        );
    }

    #[test]
    fn arrays_and_lengths() {
        let (s, errors) = compile(json!({
            "properties": {"ids": {"type": "array", "maxItems": 2,
                                   "items": {"type": "string", "minLength": 1}}}
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            problems(&s, json!({"ids": ["", "a", 3]})),
            vec![
                "args.ids must have at most 2 items",
                "args.ids[0] must have at least 1 characters",
                "args.ids[2] must be a string, found 3",
            ]
        );
    }

    #[test]
    fn unsupported_keywords_and_bad_values_are_startup_errors() {
        let (_, errors) = compile(json!({
            "type": "objekt",
            "oneOf": [],
            "properties": {"a": {"pattern": "("}},
            "additionalProperties": {"type": "string"}
        }));
        assert_eq!(errors.len(), 4, "{errors:#?}");
        assert!(errors
            .iter()
            .any(|e| e.contains("\"oneOf\" is not supported")));
        assert!(errors
            .iter()
            .any(|e| e.contains("\"objekt\" is not a JSON Schema type")));
        assert!(errors
            .iter()
            .any(|e| e.contains("properties.a.pattern is not a valid regex")));
        assert!(errors
            .iter()
            .any(|e| e.contains("additionalProperties must be true or false")));
    }

    #[test]
    fn required_list_is_checked_without_a_schema() {
        let checks = ArgsChecks {
            required: vec!["a".into(), "b".into()],
            schema: None,
        };
        let args = json!({"a": 1});
        assert_eq!(
            checks.check(args.as_object().unwrap()),
            vec!["args.b is required"]
        );
    }

    #[test]
    fn toml_tables_convert_to_json() {
        let t: toml::Table = "type = \"object\"\nrequired = [\"a\"]\nx = 1.5"
            .parse()
            .unwrap();
        assert_eq!(
            toml_to_json(&toml::Value::Table(t)).unwrap(),
            json!({"type": "object", "required": ["a"], "x": 1.5})
        );
    }
}
