//! The fast path of `policy::parse`: `filesystem.allow` read straight into
//! rules, everything else into `Value`s for the checked walk.
//!
//! Why: `serde_json::Value` gives every rule object its own map (~0.6 KiB
//! each), so a 1 000-rule policy allocated ~1 MiB and spent ~1 ms parsing.
//! A rule read directly costs its path string.
//!
//! It only ever accepts. Whenever the document is not plainly well-formed —
//! not objects where objects belong, an unknown or repeated key (at any
//! depth), a null, a wrong type, an escaped access name, a bad path or
//! access — it returns None
//! and `parse` runs the checked walk over the whole document, which names the
//! offending field. Both paths agree on every policy they accept (the tests
//! compare them), and every error comes from the checked walk.

use super::strict::{At, Strict};
use super::{from_value, normal_abs_owned, Access, AllowRule, Policy};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Any error: the caller only learns "not on the fast path".
fn no<E: de::Error>() -> E {
    E::custom("not on the fast path")
}

/// The policy, or None: let the checked walk decide (and explain).
pub(super) fn parse(bytes: &[u8]) -> Option<Policy> {
    let Top { rest, allow } = serde_json::from_slice(bytes).ok()?;
    let mut p = from_value(&Value::Object(rest)).ok()?;
    p.allow = allow;
    Some(p)
}

/// The top-level object: `filesystem` read here, every other key kept as a
/// `Value` (unknown keys included: the checked walk refuses them).
struct Top {
    rest: Map<String, Value>,
    allow: Vec<AllowRule>,
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a policy object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Top, A::Error> {
        let mut rest = Map::new();
        let mut allow = Vec::new();
        while let Some(k) = a.next_key::<String>()? {
            if rest.contains_key(&k) {
                return Err(no());
            }
            if k == "filesystem" {
                let fs: Fs = a.next_value()?;
                allow = fs.allow;
                let mut f = Map::new();
                if let Some(d) = fs.deny {
                    f.insert("deny".into(), d);
                }
                // Marks the key as seen; the walk finds only the deny list.
                rest.insert(k, Value::Object(f));
            } else {
                // Repeated keys further down send the document to the walk.
                let v = a.next_value_seed(Strict {
                    at: At::Key(&At::Root("policy"), &k),
                })?;
                rest.insert(k, v);
            }
        }
        Ok(Top { rest, allow })
    }
}

/// `filesystem`: the allow rules read directly, the deny list as a `Value`.
struct Fs {
    allow: Vec<AllowRule>,
    deny: Option<Value>,
}

impl<'de> Deserialize<'de> for Fs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FsVisitor)
    }
}

struct FsVisitor;

impl<'de> Visitor<'de> for FsVisitor {
    type Value = Fs;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a filesystem object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Fs, A::Error> {
        let mut allow = None;
        let mut deny = None;
        while let Some(k) = a.next_key::<&str>()? {
            match k {
                "allow" if allow.is_none() => allow = Some(a.next_value::<Rules>()?.0),
                "deny" if deny.is_none() => {
                    let fs = At::Key(&At::Root("policy"), "filesystem");
                    deny = Some(a.next_value_seed(Strict {
                        at: At::Key(&fs, "deny"),
                    })?)
                }
                _ => return Err(no()),
            }
        }
        Ok(Fs {
            allow: allow.unwrap_or_default(),
            deny,
        })
    }
}

struct Rules(Vec<AllowRule>);

impl<'de> Deserialize<'de> for Rules {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(RulesVisitor)
    }
}

struct RulesVisitor;

impl<'de> Visitor<'de> for RulesVisitor {
    type Value = Rules;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of rules")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Rules, A::Error> {
        let mut out = Vec::with_capacity(a.size_hint().unwrap_or(0));
        while let Some(r) = a.next_element::<Rule>()? {
            out.push(r.0);
        }
        Ok(Rules(out))
    }
}

struct Rule(AllowRule);

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RuleVisitor)
    }
}

struct RuleVisitor;

impl<'de> Visitor<'de> for RuleVisitor {
    type Value = Rule;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a rule object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Rule, A::Error> {
        let mut path = None;
        let mut access = None;
        let mut optional = None;
        let mut identity = None;
        while let Some(k) = a.next_key::<&str>()? {
            match k {
                "path" if path.is_none() => {
                    let s: String = a.next_value()?;
                    path = Some(normal_abs_owned(s).map_err(|_| no::<A::Error>())?);
                }
                "access" if access.is_none() => {
                    let s: &str = a.next_value()?;
                    access = Some(Access::parse(s).ok_or_else(no::<A::Error>)?);
                }
                "optional" if optional.is_none() => optional = Some(a.next_value::<bool>()?),
                "identity" if identity.is_none() => {
                    identity = Some(a.next_value::<(u64, u64)>()?);
                }
                _ => return Err(no()),
            }
        }
        Ok(Rule(AllowRule {
            path: path.ok_or_else(no::<A::Error>)?,
            access: access.ok_or_else(no::<A::Error>)?,
            optional: optional.unwrap_or(false),
            identity,
        }))
    }
}
