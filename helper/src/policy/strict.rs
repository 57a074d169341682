//! JSON into `serde_json::Value`, refusing a key repeated in one object.
//!
//! Why: `Value` keeps the last of two equal keys, so
//! `{"filesystem": {"deny": ["/secret"], "deny": []}}` would parse as no deny
//! at all. JSON leaves repeated keys undefined; a policy must mean one thing,
//! so a repeated key is an error naming where it is. The launcher includes
//! this file by path for its own JSON inputs (configs, exec-json requests).

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Where a value sits, built into a name (`filesystem.deny[2]`) only for an
/// error: the helper parses its policy on every run.
#[derive(Clone, Copy)]
pub(super) enum At<'a> {
    /// The document itself, by its name ("policy", "config", "request").
    Root(&'a str),
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn name(&self) -> String {
        match self {
            At::Root(r) => r.to_string(),
            At::Key(At::Root(_), k) => k.to_string(),
            At::Key(p, k) => format!("{}.{k}", p.name()),
            At::Index(p, i) => format!("{}[{i}]", p.name()),
        }
    }
}

/// Deserializes one value; `at` names it in errors.
pub(super) struct Strict<'a> {
    pub at: At<'a>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let at = At::Index(&self.at, out.len());
            match a.next_element_seed(Strict { at })? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = a.next_key::<String>()? {
            if out.contains_key(&k) {
                return Err(de::Error::custom(format!(
                    "{}: key \"{k}\" appears twice (JSON does not say which one counts)",
                    self.at.name()
                )));
            }
            let v = a.next_value_seed(Strict {
                at: At::Key(&self.at, &k),
            })?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// The whole document, named `root` in errors; a repeated key is an error
/// like any schema error.
pub(super) fn parse(bytes: &[u8], root: &str) -> Result<Value, serde_json::Error> {
    let mut d = serde_json::Deserializer::from_slice(bytes);
    let v = Strict { at: At::Root(root) }.deserialize(&mut d)?;
    d.end()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_value_as_serde_json_without_repeats() {
        let doc = br#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": {"d": [[]]}}"#;
        let ours = parse(doc, "policy").unwrap();
        let theirs: Value = serde_json::from_slice(doc).unwrap();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn repeated_keys_are_named_at_any_depth() {
        for (doc, want) in [
            (r#"{"version": 1, "version": 1}"#, "policy: key \"version\""),
            (
                r#"{"filesystem": {"deny": ["/s"], "deny": []}}"#,
                "filesystem: key \"deny\"",
            ),
            (
                r#"{"filesystem": {"allow": [{"path": "/a", "path": "/b"}]}}"#,
                "filesystem.allow[0]: key \"path\"",
            ),
            (
                r#"{"env": {"set": {"A": "1", "A": "2"}}}"#,
                "env.set: key \"A\"",
            ),
        ] {
            let e = parse(doc.as_bytes(), "policy").unwrap_err().to_string();
            assert!(e.starts_with(want), "{doc}: {e}");
        }
    }

    #[test]
    fn trailing_garbage_and_depth_are_still_refused() {
        assert!(parse(br#"{} x"#, "policy").is_err());
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(parse(deep.as_bytes(), "policy").is_err());
    }
}
