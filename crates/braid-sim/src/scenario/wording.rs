//! The deserializer's refusals in the scenario's terms: a key path that names the culprit and a
//! message that says what was expected and what was found, with no Rust type names.
//!
//! Most messages are braid's own: the unit parsers', `tagged_enum!`'s, the middleware registry's,
//! and the either-or values' (`#[serde(untagged, expecting = "...")]` beside each type). What is
//! left are serde's generic forms, turned here into the user's:
//!
//! * `invalid type: integer `-1`, expected u32` becomes `expected a whole number from 0 to
//!   4294967295, got -1` (serde's `invalid type`/`invalid value` form, with its names of the
//!   primitive types and of what it found);
//! * an either-or value's `expected ...` gets `, got <the value>`;
//! * serde_json's ` at line 1 column 9` is dropped: the document is the front end's JSON, not
//!   the user's file;
//! * where a refusal is reported at a table (an unknown key is refused before its path is
//!   entered; a message quoting the bad value may come from a table that was read whole), the
//!   path is extended to the key itself when the table holds exactly one match.
//!
//! The tests below pin each form against serde's own text, so a serde upgrade that changes one
//! fails here rather than in front of a user.

use crate::api::ScenarioError;
use serde_json::Value;

/// `e`, raised on the scenario document `json` (parsing, validating or building it), as the user
/// should read it ([`refine`]). The document is parsed again only on this error path.
pub(crate) fn in_document(json: &str, e: ScenarioError) -> ScenarioError {
    let doc = serde_json::from_str::<Value>(json).ok();
    let (path, message) = refine(doc.as_ref(), &e.path, &e.message);
    ScenarioError { path, message }
}

/// One step of a key path: a table key or an array index.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `a.b[0].c` (serde_path_to_error's form) as steps.
fn split_path(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = part.split_once('[').unwrap_or((part, ""));
        if !key.is_empty() {
            out.push(Step::Key(key.to_string()));
        }
        while let Some((idx, after)) = rest.split_once(']') {
            match idx.parse() {
                Ok(i) => out.push(Step::Index(i)),
                Err(_) => out.push(Step::Key(idx.to_string())),
            }
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    out
}

/// Steps as a key path: bare keys dotted, other keys quoted, indices in brackets.
fn fmt_path(steps: &[Step]) -> String {
    let mut out = String::new();
    for s in steps {
        match s {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                let bare = !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if bare {
                    out.push_str(k);
                } else {
                    out.push_str(&Value::String(k.clone()).to_string());
                }
            }
        }
    }
    out
}

fn lookup<'a>(doc: &'a Value, steps: &[Step]) -> Option<&'a Value> {
    let mut cur = doc;
    for s in steps {
        cur = match (s, cur) {
            (Step::Key(k), Value::Object(m)) => m.get(k)?,
            (Step::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// The paths of the scalar values under `v` equal to `bad`.
fn leaves_equal(v: &Value, at: &mut Vec<Step>, bad: &Value, hits: &mut Vec<Vec<Step>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(Step::Key(k.clone()));
                leaves_equal(x, at, bad, hits);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Step::Index(i));
                leaves_equal(x, at, bad, hits);
                at.pop();
            }
        }
        x if x == bad => hits.push(at.clone()),
        _ => {}
    }
}

/// serde_json's position suffix (` at line 1 column 9`), if the message ends with one.
fn strip_position(message: &str) -> &str {
    let Some(i) = message.rfind(" at line ") else {
        return message;
    };
    let tail: Vec<&str> = message[i + " at line ".len()..].split(' ').collect();
    let numeric = |s: &&str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match tail.as_slice() {
        [l, "column", c] if numeric(l) && numeric(c) => &message[..i],
        _ => message,
    }
}

/// What serde expected, in the scenario's terms.
fn expected_in_user_terms(exp: &str) -> String {
    let max = match exp {
        "u8" => Some(u8::MAX as u64),
        "u16" => Some(u16::MAX as u64),
        "u32" => Some(u32::MAX as u64),
        _ => None,
    };
    if let Some(max) = max {
        return format!("expected a whole number from 0 to {max}");
    }
    match exp {
        "u64" | "usize" => "expected a whole number >= 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "expected a whole number".into(),
        "f32" | "f64" => "expected a number".into(),
        "a sequence" => "expected a list (e.g. [1, 2])".into(),
        "a map" => "expected a table (e.g. { key = value })".into(),
        _ if exp.starts_with("struct ") => "expected a table (e.g. { key = value })".into(),
        "a boolean" => "expected true or false".into(),
        _ => format!("expected {exp}"),
    }
}

/// What serde found (its `Unexpected` forms), as the user wrote it.
fn found_in_user_terms(what: &str) -> String {
    let quoted = |prefix: &str| {
        what.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('`'))
            .and_then(|r| r.strip_suffix('`'))
            .map(str::to_string)
    };
    if let Some(v) = quoted("integer ")
        .or_else(|| quoted("floating point "))
        .or_else(|| quoted("boolean "))
    {
        return v;
    }
    if let Some(s) = what.strip_prefix("string ") {
        return s.to_string();
    }
    match what {
        "map" => "a table".into(),
        "sequence" => "a list".into(),
        _ => what.to_string(),
    }
}

/// serde's `invalid type: X, expected Y` (and `invalid value`) in the scenario's terms;
/// an either-or value's `expected ...` with the value found.
fn user_terms(message: &str, value: Option<&Value>) -> String {
    let serde_form = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "));
    if let Some((found, exp)) = serde_form.and_then(|r| r.split_once(", expected ")) {
        return format!(
            "{}, got {}",
            expected_in_user_terms(exp.trim()),
            found_in_user_terms(found)
        );
    }
    // The either-or values' own `expecting` text says what was expected, not what was found.
    if let Some(v) = value {
        if message.starts_with("expected ") && found_at(message).is_none() {
            return format!("{message}, got {v}");
        }
    }
    message.to_string()
}

/// A deserialisation refusal at `path` of `doc` (the document being read, when at hand), as the
/// user should read it: the path extended to the culprit key where the reported table holds it,
/// the message in the scenario's terms.
pub(crate) fn refine(doc: Option<&Value>, path: &str, message: &str) -> (String, String) {
    let message = strip_position(message);
    let steps = split_path(path);
    let node = doc.and_then(|d| lookup(d, &steps));
    if let Some(node @ (Value::Object(_) | Value::Array(_))) = node {
        if let (Some(key), Value::Object(m)) = (unknown_field(message), node) {
            if m.contains_key(key) {
                let mut at = steps.clone();
                at.push(Step::Key(key.to_string()));
                return (fmt_path(&at), message.to_string());
            }
        }
        if let Some(i) = found_at(message) {
            let shown = &message[i..];
            let bad =
                serde_json::from_str(shown).unwrap_or_else(|_| Value::String(shown.to_string()));
            let mut hits = Vec::new();
            leaves_equal(node, &mut steps.clone(), &bad, &mut hits);
            if let [only] = hits.as_slice() {
                return (fmt_path(only), message.to_string());
            }
        }
    }
    let value = node.filter(|_| !path.is_empty());
    (path.to_string(), user_terms(message, value))
}

/// Where the value a message quotes starts: after its word `got `.
fn found_at(message: &str) -> Option<usize> {
    message
        .match_indices("got ")
        .find(|(i, _)| {
            message[..*i]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric())
        })
        .map(|(i, _)| i + "got ".len())
}

/// serde's ``unknown field `x`, expected ...``: the field.
fn unknown_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("unknown field `")?
        .split_once('`')
        .map(|(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// serde's own message for reading `v` as a `T`.
    fn serde_says<T: for<'de> Deserialize<'de> + std::fmt::Debug>(v: Value) -> String {
        serde_json::from_value::<T>(v).unwrap_err().to_string()
    }

    #[test]
    fn serde_forms_in_user_terms() {
        let m = serde_says::<u32>(json!(-1));
        assert_eq!(
            m, "invalid value: integer `-1`, expected u32",
            "serde's form changed"
        );
        assert_eq!(
            user_terms(&m, None),
            "expected a whole number from 0 to 4294967295, got -1"
        );
        let m = serde_says::<u8>(json!(300));
        assert_eq!(
            user_terms(&m, None),
            "expected a whole number from 0 to 255, got 300"
        );
        let m = serde_says::<u64>(json!("x"));
        assert_eq!(
            user_terms(&m, None),
            "expected a whole number >= 0, got \"x\""
        );
        let m = serde_says::<f64>(json!(true));
        assert_eq!(user_terms(&m, None), "expected a number, got true");
        let m = serde_says::<bool>(json!(1.5));
        assert_eq!(user_terms(&m, None), "expected true or false, got 1.5");
        let m = serde_says::<Vec<u32>>(json!(3));
        assert_eq!(user_terms(&m, None), "expected a list (e.g. [1, 2]), got 3");
        let m = serde_says::<std::collections::BTreeMap<String, u32>>(json!([1]));
        assert_eq!(
            user_terms(&m, None),
            "expected a table (e.g. { key = value }), got a list"
        );
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Link {
            rate: u32,
        }
        let m = serde_says::<Link>(json!(3));
        assert!(m.contains("expected struct Link"), "{m}");
        assert_eq!(
            user_terms(&m, None),
            "expected a table (e.g. { key = value }), got 3"
        );
        for m in [
            user_terms(&serde_says::<u16>(json!(-3)), None),
            user_terms(&serde_says::<Link>(json!("x")), None),
        ] {
            for rust in ["u16", "struct", "sequence", "integer `"] {
                assert!(!m.contains(rust), "{m}");
            }
        }
    }

    #[test]
    fn either_or_values_say_what_was_found() {
        #[derive(Debug, Deserialize)]
        #[serde(untagged, expecting = "expected a count (e.g. 8) or a list")]
        #[allow(dead_code)]
        enum Senders {
            Count(u32),
            List(Vec<u32>),
        }
        let m = serde_says::<Senders>(json!("x"));
        assert_eq!(m, "expected a count (e.g. 8) or a list");
        let doc = json!({"traffic": [{"senders": "x"}]});
        assert_eq!(
            refine(Some(&doc), "traffic[0].senders", &m),
            (
                "traffic[0].senders".into(),
                "expected a count (e.g. 8) or a list, got \"x\"".into()
            )
        );
        // A message that says what it found already is left alone.
        let m = "expected a rate like \"40Gbps\", got \"4\"";
        assert_eq!(refine(Some(&doc), "traffic[0].senders", m).1, m);
    }

    #[test]
    fn paths_are_extended_to_the_culprit() {
        let d = json!({
            "topology": {"kind": "leaf-spine", "host_link": {"rate": "40Gbs"}},
            "traffic": [{"pattern": "incast", "sizes": 3}],
        });
        let r = refine(
            Some(&d),
            "topology",
            "expected a rate like \"40Gbps\", got \"40Gbs\" at line 1 column 9",
        );
        assert_eq!(
            r,
            (
                "topology.host_link.rate".into(),
                "expected a rate like \"40Gbps\", got \"40Gbs\"".into()
            )
        );
        let r = refine(Some(&d), "topology", "unknown field `spines`, expected ...");
        assert_eq!(r.0, "topology");
        let d2 = json!({"topology": {"spines": 4}});
        let r = refine(
            Some(&d2),
            "topology",
            "unknown field `spines`, expected ...",
        );
        assert_eq!(r.0, "topology.spines");
        let r = refine(
            Some(&d),
            "traffic[0]",
            "unknown field `sizes`, expected `size`",
        );
        assert_eq!(r.0, "traffic[0].sizes");
        // A missing key has no culprit below the table; an unmatched path is kept.
        assert_eq!(
            refine(Some(&d), "topology", "missing field `paths`").0,
            "topology"
        );
        assert_eq!(refine(Some(&d), "nic.mtu", "bad").0, "nic.mtu");
        assert_eq!(refine(None, "", "bad at line 3 column 1").1, "bad");
    }

    #[test]
    fn paths_round_trip() {
        for p in [
            "a.b[0].c",
            "middleware.per_host.\"3 x\"",
            "traffic[12]",
            "x[0][1]",
        ] {
            let steps = split_path(p);
            assert!(!steps.is_empty());
            if !p.contains('"') {
                assert_eq!(fmt_path(&steps), p);
            }
        }
    }
}
