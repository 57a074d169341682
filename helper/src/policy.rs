//! The policy schema (docs/policy.md): parsing, validation and normalization.
//!
//! The JSON is walked by hand rather than derived so that every error names the
//! exact field (`filesystem.allow[3].access: …`) and unknown fields are refused:
//! a misspelt key must never silently drop a protection.

use crate::error::{Error, Result};
use serde_json::{json, Map, Value};
use std::path::{Component, Path, PathBuf};

mod fast;
mod strict;

/// Largest policy accepted, in bytes.
pub const MAX_POLICY_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
    Execute,
    ReadWriteExecute,
}

impl Access {
    pub const NAMES: &'static str = "read|write|readwrite|execute|readwriteexecute";

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "read" => Access::Read,
            "write" => Access::Write,
            "readwrite" => Access::ReadWrite,
            "execute" => Access::Execute,
            "readwriteexecute" => Access::ReadWriteExecute,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "readwrite",
            Access::Execute => "execute",
            Access::ReadWriteExecute => "readwriteexecute",
        }
    }

    pub fn reads(self) -> bool {
        !matches!(self, Access::Write)
    }
    pub fn writes(self) -> bool {
        matches!(
            self,
            Access::Write | Access::ReadWrite | Access::ReadWriteExecute
        )
    }
    pub fn executes(self) -> bool {
        matches!(self, Access::Execute | Access::ReadWriteExecute)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    pub path: PathBuf,
    pub access: Access,
    pub optional: bool,
    /// `[st_dev, st_ino]` the path must have when the helper opens it: the
    /// launcher's check of what it planned against what bwrap mounted.
    pub identity: Option<(u64, u64)>,
}

/// A mount the launcher planned, to be found where it planned it
/// (`mounts`, checked by `mounts::verify`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountCheck {
    pub path: PathBuf,
    /// `[st_dev, st_ino]` of what is mounted there (a bind of a host path);
    /// None for an empty tmpfs or a file mask.
    pub identity: Option<(u64, u64)>,
    /// The mount must be read-only.
    pub ro: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ports {
    Any,
    List(Vec<u16>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compat {
    BestEffort,
    HardRequirement,
}

/// What the filter does with a syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Allow,
    KillProcess,
    KillThread,
    Trap,
    Log,
    Errno(u16),
}

impl Action {
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "allow" => Action::Allow,
            "kill_process" | "kill" => Action::KillProcess,
            "kill_thread" => Action::KillThread,
            "trap" => Action::Trap,
            "log" => Action::Log,
            _ => {
                let Some(e) = s.strip_prefix("errno:") else {
                    return Err(format!(
                        "unknown action \"{s}\" (expected allow|kill_process|kill_thread|trap|log|errno:NAME)"
                    ));
                };
                let n = match e.parse::<u16>() {
                    Ok(n) => n,
                    Err(_) => {
                        crate::errno::number(e).ok_or_else(|| format!("unknown errno \"{e}\""))?
                    }
                };
                if n == 0 || n > 4095 {
                    return Err(format!("errno {n} out of range 1..4095"));
                }
                Action::Errno(n)
            }
        })
    }

    pub fn name(self) -> String {
        match self {
            Action::Allow => "allow".into(),
            Action::KillProcess => "kill_process".into(),
            Action::KillThread => "kill_thread".into(),
            Action::Trap => "trap".into(),
            Action::Log => "log".into(),
            Action::Errno(n) => match crate::errno::name(n) {
                Some(name) => format!("errno:{name}"),
                None => format!("errno:{n}"),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CondOp {
    Eq,
    Ne,
    AnySet,
    MaskedEq { mask: u64 },
}

/// One argument comparison. `width` 32 compares only the low word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArgCond {
    pub arg: u8,
    pub op: CondOp,
    pub value: u64,
    pub width: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgRule {
    pub syscall: String,
    pub action: Action,
    pub when: Vec<ArgCond>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Default,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Syscalls {
    /// `None` with `present == false`: the section was absent (built-in default).
    pub present: bool,
    pub profile: Option<Profile>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub default_deny: bool,
    pub default_action: Option<Action>,
    pub deny_action: Option<Action>,
    pub rules: Vec<ArgRule>,
}

impl Syscalls {
    /// The profile in force: the built-in default when the section is absent.
    pub fn effective_profile(&self) -> Option<Profile> {
        if self.present {
            self.profile
        } else {
            Some(Profile::Default)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    Nofile,
    Nproc,
    As,
    Cpu,
    Fsize,
    Core,
    Stack,
}

impl Resource {
    const ALL: [(&'static str, Resource); 7] = [
        ("nofile", Resource::Nofile),
        ("nproc", Resource::Nproc),
        ("as", Resource::As),
        ("cpu", Resource::Cpu),
        ("fsize", Resource::Fsize),
        ("core", Resource::Core),
        ("stack", Resource::Stack),
    ];
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, r)| *r == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }
}

/// `u64::MAX` stands for unlimited (RLIM_INFINITY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub resource: Resource,
    pub soft: u64,
    pub hard: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvPolicy {
    pub clear: bool,
    pub set: Vec<(String, String)>,
    pub allow_injection: Vec<String>,
}

/// A `filesystem.deny` entry. `masked`: the caller covered the path with an
/// empty mount in an outer layer; Landlock expansion is skipped only while
/// that mask is verified in place (docs/policy.md, "Masked denies").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyRule {
    pub path: PathBuf,
    pub masked: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub allow: Vec<AllowRule>,
    pub deny: Vec<DenyRule>,
    pub tcp_bind: Ports,
    pub tcp_connect: Ports,
    pub scope_signal: bool,
    pub scope_abstract_unix: bool,
    pub compat: Compat,
    pub min_abi: Option<u8>,
    pub syscalls: Syscalls,
    pub rlimits: Vec<Limit>,
    pub keep_fds: Vec<i32>,
    pub env: EnvPolicy,
    pub user: Option<(u32, u32)>,
    pub mounts: Vec<MountCheck>,
}

fn err(path: &str, msg: impl std::fmt::Display) -> Error {
    Error::Policy(format!("{path}: {msg}"))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object<'a>(v: &'a Value, path: &str, allowed: &[&str]) -> Result<&'a Map<String, Value>> {
    let m = v
        .as_object()
        .ok_or_else(|| err(path, format!("expected an object, got {}", kind(v))))?;
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                path,
                format!(
                    "unknown field \"{k}\" (expected one of {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    Ok(m)
}

fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| err(path, format!("expected an array, got {}", kind(v))))
}

fn string<'a>(v: &'a Value, path: &str) -> Result<&'a str> {
    v.as_str()
        .ok_or_else(|| err(path, format!("expected a string, got {}", kind(v))))
}

fn boolean(v: &Value, path: &str) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| err(path, format!("expected a boolean, got {}", kind(v))))
}

fn unsigned(v: &Value, path: &str, max: u64) -> Result<u64> {
    let n = v.as_u64().ok_or_else(|| {
        err(
            path,
            format!("expected a non-negative integer, got {}", kind(v)),
        )
    })?;
    if n > max {
        return Err(err(path, format!("{n} is larger than {max}")));
    }
    Ok(n)
}

/// An absolute path without `.`/`..` components or NUL bytes.
fn abs_path(v: &Value, path: &str) -> Result<PathBuf> {
    let s = string(v, path)?;
    normal_abs(s).map_err(|why| err(path, why))
}

/// `normal_abs` for an owned string: one that is normal already (the usual
/// case) becomes the path without a copy.
fn normal_abs_owned(s: String) -> std::result::Result<PathBuf, String> {
    let normal = s == "/"
        || (s.starts_with('/')
            && !s.contains('\0')
            && s[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."));
    if normal {
        Ok(PathBuf::from(s))
    } else {
        normal_abs(&s)
    }
}

/// An absolute path without NUL, `.` or `..`, duplicate and trailing slashes
/// removed; else why not.
fn normal_abs(s: &str) -> std::result::Result<PathBuf, String> {
    if s.contains('\0') {
        return Err("path contains a NUL byte".into());
    }
    let p = Path::new(s);
    if !p.is_absolute() {
        return Err(format!("\"{s}\" is not an absolute path"));
    }
    if p.components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(format!("\"{s}\" contains . or .. components"));
    }
    Ok(p.components().collect())
}

fn ports(v: &Value, path: &str) -> Result<Ports> {
    if v.as_str() == Some("any") {
        return Ok(Ports::Any);
    }
    let mut out = Vec::new();
    for (i, p) in array(v, path)
        .map_err(|_| err(path, "expected an array of ports or \"any\""))?
        .iter()
        .enumerate()
    {
        out.push(unsigned(p, &format!("{path}[{i}]"), 65535)? as u16);
    }
    out.sort_unstable();
    out.dedup();
    Ok(Ports::List(out))
}

fn syscall_name(v: &Value, path: &str) -> Result<String> {
    let s = string(v, path)?;
    if let Some(group) = s.strip_prefix('@') {
        if crate::seccomp::groups::group(group).is_none() {
            return Err(err(
                path,
                format!(
                    "unknown syscall group \"{s}\" (expected one of {})",
                    crate::seccomp::groups::group_names().join(", ")
                ),
            ));
        }
    } else if !crate::seccomp::tables::is_known(s) {
        return Err(err(
            path,
            format!("unknown syscall \"{s}\" (not in the x86_64 or aarch64 tables)"),
        ));
    }
    Ok(s.to_string())
}

fn action(v: &Value, path: &str) -> Result<Action> {
    Action::parse(string(v, path)?).map_err(|e| err(path, e))
}

fn cond(v: &Value, path: &str) -> Result<ArgCond> {
    let m = object(v, path, &["arg", "op", "value", "mask", "width"])?;
    let get = |k: &str| {
        m.get(k)
            .ok_or_else(|| err(path, format!("missing field \"{k}\"")))
    };
    let arg = unsigned(get("arg")?, &format!("{path}.arg"), 5)? as u8;
    let width = match m.get("width") {
        None => 64,
        Some(w) => match w.as_u64() {
            Some(32) => 32,
            Some(64) => 64,
            _ => return Err(err(&format!("{path}.width"), "expected 32 or 64")),
        },
    };
    let max = if width == 32 {
        u32::MAX as u64
    } else {
        u64::MAX
    };
    let value = unsigned(get("value")?, &format!("{path}.value"), max)?;
    let op_s = string(get("op")?, &format!("{path}.op"))?;
    let op = match op_s {
        "eq" => CondOp::Eq,
        "ne" => CondOp::Ne,
        "anySet" => CondOp::AnySet,
        "maskedEq" => CondOp::MaskedEq {
            mask: unsigned(get("mask")?, &format!("{path}.mask"), max)?,
        },
        other => {
            return Err(err(
                &format!("{path}.op"),
                format!("unknown op \"{other}\" (expected eq|ne|anySet|maskedEq)"),
            ))
        }
    };
    if op_s != "maskedEq" && m.contains_key("mask") {
        return Err(err(&format!("{path}.mask"), "only valid with op maskedEq"));
    }
    Ok(ArgCond {
        arg,
        op,
        value,
        width,
    })
}

fn parse_syscalls(v: &Value) -> Result<Syscalls> {
    let p = "syscalls";
    let m = object(
        v,
        p,
        &[
            "profile",
            "allow",
            "deny",
            "defaultDeny",
            "defaultAction",
            "denyAction",
            "rules",
        ],
    )?;
    let mut s = Syscalls {
        present: true,
        ..Default::default()
    };
    if let Some(v) = m.get("profile") {
        s.profile = match string(v, "syscalls.profile")? {
            "default" => Some(Profile::Default),
            "none" => None,
            o => {
                return Err(err(
                    "syscalls.profile",
                    format!("unknown profile \"{o}\" (expected default|none)"),
                ))
            }
        };
    }
    for (key, out) in [("allow", &mut s.allow), ("deny", &mut s.deny)] {
        if let Some(v) = m.get(key) {
            for (i, n) in array(v, &format!("syscalls.{key}"))?.iter().enumerate() {
                out.push(syscall_name(n, &format!("syscalls.{key}[{i}]"))?);
            }
        }
    }
    if let Some(v) = m.get("defaultDeny") {
        s.default_deny = boolean(v, "syscalls.defaultDeny")?;
    }
    if let Some(v) = m.get("defaultAction") {
        s.default_action = Some(action(v, "syscalls.defaultAction")?);
    }
    if let Some(v) = m.get("denyAction") {
        s.deny_action = Some(action(v, "syscalls.denyAction")?);
    }
    if let Some(v) = m.get("rules") {
        for (i, r) in array(v, "syscalls.rules")?.iter().enumerate() {
            let rp = format!("syscalls.rules[{i}]");
            let rm = object(r, &rp, &["syscall", "action", "when"])?;
            let name = rm
                .get("syscall")
                .ok_or_else(|| err(&rp, "missing field \"syscall\""))?;
            let name = syscall_name(name, &format!("{rp}.syscall"))?;
            if name.starts_with('@') {
                return Err(err(
                    &format!("{rp}.syscall"),
                    "argument rules take a single syscall, not a group",
                ));
            }
            let act = action(
                rm.get("action")
                    .ok_or_else(|| err(&rp, "missing field \"action\""))?,
                &format!("{rp}.action"),
            )?;
            let mut when = Vec::new();
            if let Some(w) = rm.get("when") {
                for (j, c) in array(w, &format!("{rp}.when"))?.iter().enumerate() {
                    when.push(cond(c, &format!("{rp}.when[{j}]"))?);
                }
            }
            if when.is_empty() {
                return Err(err(
                    &format!("{rp}.when"),
                    "a rule needs at least one condition (use allow/deny for unconditional ones)",
                ));
            }
            s.rules.push(ArgRule {
                syscall: name,
                action: act,
                when,
            });
        }
    }
    Ok(s)
}

fn parse_limit(v: &Value, path: &str) -> Result<u64> {
    if v.as_str() == Some("unlimited") {
        return Ok(u64::MAX);
    }
    unsigned(v, path, u64::MAX - 1)
        .map_err(|_| err(path, "expected a non-negative integer or \"unlimited\""))
}

/// `[st_dev, st_ino]`.
fn identity(v: &Value, ip: &str) -> Result<(u64, u64)> {
    match array(v, ip)?.as_slice() {
        [d, i] => Ok((
            unsigned(d, &format!("{ip}[0]"), u64::MAX)?,
            unsigned(i, &format!("{ip}[1]"), u64::MAX)?,
        )),
        _ => Err(err(ip, "expected [st_dev, st_ino]")),
    }
}

/// Parse a policy document. Never panics; every error names its field.
pub fn parse(bytes: &[u8]) -> Result<Policy> {
    if bytes.len() > MAX_POLICY_BYTES {
        return Err(Error::Policy(format!(
            "policy is {} bytes, larger than the {MAX_POLICY_BYTES}-byte limit",
            bytes.len()
        )));
    }
    // serde_json refuses nesting deeper than 128 levels, so a hostile
    // document cannot exhaust the stack.
    if let Some(p) = fast::parse(bytes) {
        return Ok(p);
    }
    checked(bytes)
}

/// The reference parse: the whole document as a `Value`, walked by hand so
/// that an error names its field. `parse` gives the same result, faster for
/// well-formed documents (the fuzz target checks that they agree).
pub fn checked(bytes: &[u8]) -> Result<Policy> {
    let v = strict::parse(bytes, "policy").map_err(|e| {
        if e.is_data() {
            Error::Policy(e.to_string()) // a repeated key, named
        } else {
            Error::Policy(format!("policy is not valid JSON: {e}"))
        }
    })?;
    from_value(&v)
}

pub fn from_value(v: &Value) -> Result<Policy> {
    let top = object(
        v,
        "policy",
        &[
            "version",
            "filesystem",
            "network",
            "scope",
            "landlock",
            "syscalls",
            "rlimits",
            "keepFds",
            "env",
            "user",
            "mounts",
        ],
    )?;
    let mut p = Policy {
        allow: Vec::new(),
        deny: Vec::new(),
        tcp_bind: Ports::List(Vec::new()),
        tcp_connect: Ports::List(Vec::new()),
        scope_signal: true,
        scope_abstract_unix: true,
        compat: Compat::BestEffort,
        min_abi: None,
        syscalls: Syscalls::default(),
        rlimits: Vec::new(),
        keep_fds: Vec::new(),
        env: EnvPolicy::default(),
        user: None,
        mounts: Vec::new(),
    };
    if let Some(v) = top.get("version") {
        if v.as_u64() != Some(1) {
            return Err(err("version", "only version 1 is supported"));
        }
    }
    if let Some(fs) = top.get("filesystem") {
        let m = object(fs, "filesystem", &["allow", "deny"])?;
        if let Some(a) = m.get("allow") {
            for (i, r) in array(a, "filesystem.allow")?.iter().enumerate() {
                let rp = format!("filesystem.allow[{i}]");
                let rm = object(r, &rp, &["path", "access", "optional", "identity"])?;
                let path = abs_path(
                    rm.get("path")
                        .ok_or_else(|| err(&rp, "missing field \"path\""))?,
                    &format!("{rp}.path"),
                )?;
                let acc_s = string(
                    rm.get("access")
                        .ok_or_else(|| err(&rp, "missing field \"access\""))?,
                    &format!("{rp}.access"),
                )?;
                let access = Access::parse(acc_s).ok_or_else(|| {
                    err(
                        &format!("{rp}.access"),
                        format!("unknown access \"{acc_s}\" (expected {})", Access::NAMES),
                    )
                })?;
                let optional = match rm.get("optional") {
                    Some(o) => boolean(o, &format!("{rp}.optional"))?,
                    None => false,
                };
                let identity = match rm.get("identity") {
                    Some(v) => Some(identity(v, &format!("{rp}.identity"))?),
                    None => None,
                };
                p.allow.push(AllowRule {
                    path,
                    access,
                    optional,
                    identity,
                });
            }
        }
        if let Some(d) = m.get("deny") {
            for (i, e) in array(d, "filesystem.deny")?.iter().enumerate() {
                let dp = format!("filesystem.deny[{i}]");
                // A bare string (SafeClaw's form) or {"path", "masked"}.
                let rule = if e.is_object() {
                    let dm = object(e, &dp, &["path", "masked"])?;
                    DenyRule {
                        path: abs_path(
                            dm.get("path")
                                .ok_or_else(|| err(&dp, "missing field \"path\""))?,
                            &format!("{dp}.path"),
                        )?,
                        masked: match dm.get("masked") {
                            Some(m) => boolean(m, &format!("{dp}.masked"))?,
                            None => false,
                        },
                    }
                } else {
                    DenyRule {
                        path: abs_path(e, &dp)?,
                        masked: false,
                    }
                };
                p.deny.push(rule);
            }
        }
    }
    if let Some(n) = top.get("network") {
        let m = object(n, "network", &["tcpBind", "tcpConnect"])?;
        if let Some(v) = m.get("tcpBind") {
            p.tcp_bind = ports(v, "network.tcpBind")?;
        }
        if let Some(v) = m.get("tcpConnect") {
            p.tcp_connect = ports(v, "network.tcpConnect")?;
        }
    }
    if let Some(s) = top.get("scope") {
        let m = object(s, "scope", &["signal", "abstractUnix"])?;
        if let Some(v) = m.get("signal") {
            p.scope_signal = boolean(v, "scope.signal")?;
        }
        if let Some(v) = m.get("abstractUnix") {
            p.scope_abstract_unix = boolean(v, "scope.abstractUnix")?;
        }
    }
    if let Some(l) = top.get("landlock") {
        let m = object(l, "landlock", &["compat", "minAbi"])?;
        if let Some(v) = m.get("compat") {
            p.compat = match string(v, "landlock.compat")? {
                "best_effort" => Compat::BestEffort,
                "hard_requirement" => Compat::HardRequirement,
                o => {
                    return Err(err(
                        "landlock.compat",
                        format!("unknown mode \"{o}\" (expected best_effort|hard_requirement)"),
                    ))
                }
            };
        }
        if let Some(v) = m.get("minAbi") {
            let n = unsigned(v, "landlock.minAbi", crate::landlock::TARGET_ABI_NUM as u64)?;
            if n == 0 {
                return Err(err("landlock.minAbi", "must be at least 1"));
            }
            p.min_abi = Some(n as u8);
        }
    }
    if let Some(s) = top.get("syscalls") {
        p.syscalls = parse_syscalls(s)?;
    }
    if let Some(r) = top.get("rlimits") {
        let names: Vec<&str> = Resource::ALL.iter().map(|(n, _)| *n).collect();
        let m = object(r, "rlimits", &names)?;
        for (name, res) in Resource::ALL {
            let Some(v) = m.get(name) else { continue };
            let rp = format!("rlimits.{name}");
            let (soft, hard) = if v.is_object() {
                let o = object(v, &rp, &["soft", "hard"])?;
                let soft = o
                    .get("soft")
                    .ok_or_else(|| err(&rp, "missing field \"soft\""))?;
                let hard = o
                    .get("hard")
                    .ok_or_else(|| err(&rp, "missing field \"hard\""))?;
                (
                    parse_limit(soft, &format!("{rp}.soft"))?,
                    parse_limit(hard, &format!("{rp}.hard"))?,
                )
            } else {
                let n = parse_limit(v, &rp)?;
                (n, n)
            };
            if soft > hard {
                return Err(err(&rp, "soft limit is above the hard limit"));
            }
            p.rlimits.push(Limit {
                resource: res,
                soft,
                hard,
            });
        }
    }
    if let Some(k) = top.get("keepFds") {
        for (i, f) in array(k, "keepFds")?.iter().enumerate() {
            let fp = format!("keepFds[{i}]");
            let n = unsigned(f, &fp, i32::MAX as u64)? as i32;
            if n <= 2 {
                return Err(err(
                    &fp,
                    "fds 0, 1 and 2 are always kept; list only fds above 2",
                ));
            }
            p.keep_fds.push(n);
        }
        p.keep_fds.sort_unstable();
        p.keep_fds.dedup();
    }
    if let Some(e) = top.get("env") {
        let m = object(e, "env", &["clear", "set", "allowInjection"])?;
        if let Some(v) = m.get("clear") {
            p.env.clear = boolean(v, "env.clear")?;
        }
        if let Some(v) = m.get("allowInjection") {
            for (i, n) in array(v, "env.allowInjection")?.iter().enumerate() {
                p.env
                    .allow_injection
                    .push(string(n, &format!("env.allowInjection[{i}]"))?.to_string());
            }
        }
        if let Some(v) = m.get("set") {
            let sm = v
                .as_object()
                .ok_or_else(|| err("env.set", format!("expected an object, got {}", kind(v))))?;
            for (k, val) in sm {
                let vp = format!("env.set.{k}");
                crate::env::validate_name(k).map_err(|e| err(&vp, e))?;
                let val = string(val, &vp)?;
                if val.contains('\0') {
                    return Err(err(&vp, "value contains a NUL byte"));
                }
                if crate::env::is_injection(k)
                    && !p
                        .env
                        .allow_injection
                        .iter()
                        .any(|a| a.eq_ignore_ascii_case(k))
                {
                    return Err(err(
                        &vp,
                        format!("{k} is a loader/interpreter injection variable; name it in env.allowInjection to pass it on purpose"),
                    ));
                }
                p.env.set.push((k.clone(), val.to_string()));
            }
        }
    }
    if let Some(ms) = top.get("mounts") {
        for (i, m) in array(ms, "mounts")?.iter().enumerate() {
            let mp = format!("mounts[{i}]");
            let mo = object(m, &mp, &["path", "identity", "ro"])?;
            let path = match mo.get("path") {
                Some(Value::String(s)) => {
                    normal_abs_owned(s.clone()).map_err(|e| err(&format!("{mp}.path"), e))?
                }
                Some(other) => {
                    return Err(err(
                        &format!("{mp}.path"),
                        format!("expected a string, got {}", kind(other)),
                    ))
                }
                None => return Err(err(&mp, "missing field \"path\"")),
            };
            let identity = match mo.get("identity") {
                Some(v) => Some(identity(v, &format!("{mp}.identity"))?),
                None => None,
            };
            let ro = match mo.get("ro") {
                Some(v) => boolean(v, &format!("{mp}.ro"))?,
                None => false,
            };
            p.mounts.push(MountCheck { path, identity, ro });
        }
    }
    if let Some(u) = top.get("user") {
        let m = object(u, "user", &["uid", "gid"])?;
        let uid = unsigned(
            m.get("uid")
                .ok_or_else(|| err("user", "missing field \"uid\""))?,
            "user.uid",
            u32::MAX as u64 - 1,
        )? as u32;
        let gid = unsigned(
            m.get("gid")
                .ok_or_else(|| err("user", "missing field \"gid\""))?,
            "user.gid",
            u32::MAX as u64 - 1,
        )? as u32;
        p.user = Some((uid, gid));
    }
    Ok(p)
}

fn ports_json(p: &Ports) -> Value {
    match p {
        Ports::Any => json!("any"),
        Ports::List(l) => json!(l),
    }
}

fn limit_json(n: u64) -> Value {
    if n == u64::MAX {
        json!("unlimited")
    } else {
        json!(n)
    }
}

fn cond_json(c: &ArgCond) -> Value {
    let mut m = Map::new();
    m.insert("arg".into(), json!(c.arg));
    let op = match c.op {
        CondOp::Eq => "eq",
        CondOp::Ne => "ne",
        CondOp::AnySet => "anySet",
        CondOp::MaskedEq { mask } => {
            m.insert("mask".into(), json!(mask));
            "maskedEq"
        }
    };
    m.insert("op".into(), json!(op));
    m.insert("value".into(), json!(c.value));
    m.insert("width".into(), json!(c.width));
    Value::Object(m)
}

impl Policy {
    /// The normalized form printed by `--check`: every default made explicit.
    pub fn to_json(&self) -> Value {
        let s = &self.syscalls;
        let syscalls = if s.present {
            json!({
                "profile": match s.profile { Some(Profile::Default) => "default", None => "none" },
                "allow": s.allow,
                "deny": s.deny,
                "defaultAction": crate::seccomp::default_action(s).name(),
                "denyAction": s.deny_action.unwrap_or(Action::Errno(libc::EPERM as u16)).name(),
                "rules": s.rules.iter().map(|r| json!({
                    "syscall": r.syscall,
                    "action": r.action.name(),
                    "when": r.when.iter().map(cond_json).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        } else {
            json!({"profile": "default", "allow": [], "deny": [], "defaultAction": "errno:EPERM",
                   "denyAction": "errno:EPERM", "rules": []})
        };
        let mut rl = Map::new();
        for l in &self.rlimits {
            rl.insert(
                l.resource.name().into(),
                json!({"soft": limit_json(l.soft), "hard": limit_json(l.hard)}),
            );
        }
        let mut env_set = Map::new();
        for (k, v) in &self.env.set {
            env_set.insert(k.clone(), json!(v));
        }
        let mut out = json!({
            "version": 1,
            "filesystem": {
                "allow": self.allow.iter().map(|r| {
                    let mut o = json!({"path": r.path, "access": r.access.name(), "optional": r.optional});
                    if let Some((d, i)) = r.identity {
                        o["identity"] = json!([d, i]);
                    }
                    o
                }).collect::<Vec<_>>(),
                "deny": self.deny.iter().map(|d| if d.masked {
                    json!({"path": d.path, "masked": true})
                } else {
                    json!(d.path)
                }).collect::<Vec<_>>(),
            },
            "network": {"tcpBind": ports_json(&self.tcp_bind), "tcpConnect": ports_json(&self.tcp_connect)},
            "scope": {"signal": self.scope_signal, "abstractUnix": self.scope_abstract_unix},
            "landlock": {
                "compat": match self.compat { Compat::BestEffort => "best_effort", Compat::HardRequirement => "hard_requirement" },
            },
            "syscalls": syscalls,
            "rlimits": rl,
            "keepFds": self.keep_fds,
            "env": {"clear": self.env.clear, "set": env_set, "allowInjection": self.env.allow_injection},
        });
        if let Some(abi) = self.min_abi {
            out["landlock"]["minAbi"] = json!(abi);
        }
        if let Some((uid, gid)) = self.user {
            out["user"] = json!({"uid": uid, "gid": gid});
        }
        if !self.mounts.is_empty() {
            out["mounts"] = self
                .mounts
                .iter()
                .map(|m| {
                    let mut o = json!({"path": m.path, "ro": m.ro});
                    if let Some((d, i)) = m.identity {
                        o["identity"] = json!([d, i]);
                    }
                    o
                })
                .collect();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parse` (fast path first) and `checked` must agree on every input:
    /// the same policy, or the same error.
    fn same_as_checked(doc: &[u8]) {
        match (parse(doc), checked(doc)) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{}", String::from_utf8_lossy(doc)),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!(
                "fast and checked parses disagree on {}: {a:?} vs {b:?}",
                String::from_utf8_lossy(doc)
            ),
        }
    }

    #[test]
    fn the_fast_parse_agrees_with_the_checked_one() {
        let cases: &[&str] = &[
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read"},{"path":"/tmp//x/","access":"write","optional":true}],"deny":["/usr/x"]},"syscalls":{"defaultDeny":true,"allow":["read"]}}"#,
            r#"{"filesystem":{"allow":[]}}"#,
            r#"{"filesystem":{}}"#,
            r#"{}"#,
            r#"{"filesystem":{"allow":[{"path":"/","access":"execute"}]},"version":1}"#,
            r#"{"filesystem":{"allow":[{"path":"/a","access":"re\u0061d"}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/\u0061","access":"read"}]}}"#,
            // Refused by the checked walk; the fast path must not accept them.
            r#"[]"#,
            r#"{"filesystem":[]}"#,
            r#"{"filesystem":null}"#,
            r#"{"filesystem":{"allow":null}}"#,
            r#"{"filesystem":{"allow":[["/usr","read"]]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","optional":null}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"rw"}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"usr","access":"read"}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr/../etc","access":"read"}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","extra":1}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr"}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","path":"/etc","access":"read"}]}}"#,
            r#"{"filesystem":{"allow":[],"allow":[{"path":"/usr","access":"read"}]}}"#,
            r#"{"filesystem":{"allow":[]},"filesystem":{"allow":[{"path":"/usr","access":"read"}]}}"#,
            r#"{"filesystem":{"allow":[],"other":1}}"#,
            r#"{"filesystem":{"allow":[]},"bogus":1}"#,
            r#"{"filesystem":{"allow":[]},"syscalls":null}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr\u0000x","access":"read"}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read"}]"#,
            // identity: [st_dev, st_ino], both unsigned (well-formed ones below).
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":[1]}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":[1,2,3]}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":[-1,2]}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":{"dev":1,"ino":2}}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":null}]}}"#,
        ];
        for c in cases {
            same_as_checked(c.as_bytes());
        }
        // The well-formed ones really take the fast path, the rest do not.
        let fast_ones: Vec<bool> = cases
            .iter()
            .map(|c| fast::parse(c.as_bytes()).is_some())
            .collect();
        assert_eq!(fast_ones[..5], [true; 5]);
        assert!(fast_ones[7..].iter().all(|f| !f), "{fast_ones:?}");
        for c in [
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":[2049,131073]}]}}"#,
            r#"{"filesystem":{"allow":[{"path":"/usr","access":"read","identity":[18446744073709551615,0]}]}}"#,
        ] {
            same_as_checked(c.as_bytes());
            let p = fast::parse(c.as_bytes()).expect("identity takes the fast path");
            assert!(p.allow[0].identity.is_some());
        }
        // The fuzzer's seeds (tracked), and from each of them every prefix and
        // every one-byte deletion at a stride: hundreds of documents, most of
        // them broken somewhere, each parsed both ways. (The fuzz target
        // checks the same over its whole corpus.)
        let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
        let mut n = 0;
        let mut accepted = 0;
        for e in std::fs::read_dir(&seeds).unwrap() {
            let doc = std::fs::read(e.unwrap().path()).unwrap();
            accepted += usize::from(fast::parse(&doc).is_some());
            let mut variants = vec![doc.clone()];
            for cut in (0..doc.len()).step_by(3) {
                variants.push(doc[..cut].to_vec());
                let mut d = doc.clone();
                d.remove(cut);
                variants.push(d);
            }
            for v in variants {
                same_as_checked(&v);
                n += 1;
            }
        }
        assert!(accepted >= 2, "the seeds should take the fast path");
        assert!(n > 300, "only {n} documents from {}", seeds.display());
    }

    #[test]
    fn normal_paths_are_taken_as_they_are() {
        for s in ["/", "/usr", "/usr/bin", "/a b/c.d", "/x/.y/..z"] {
            assert_eq!(normal_abs_owned(s.into()).unwrap(), normal_abs(s).unwrap());
        }
        for s in [
            "//usr",
            "/usr/",
            "/usr//bin",
            "/usr/./bin",
            "/usr/..",
            "usr",
            "",
        ] {
            assert_eq!(normal_abs_owned(s.into()), normal_abs(s), "{s}");
        }
    }

    fn perr(s: &str) -> String {
        match parse(s.as_bytes()) {
            Err(Error::Policy(m)) => m,
            other => panic!("expected a policy error for {s}, got {other:?}"),
        }
    }

    #[test]
    fn safeclaw_policy_is_accepted_verbatim() {
        let p = parse(
            br#"{"filesystem":{"allow":[{"path":"/usr","access":"execute"},{"path":"/tmp/w","access":"readwrite"}],
                 "deny":["/home/x/.ssh"]},"syscalls":{"allow":["read","write","execve","exit_group"],"defaultDeny":true}}"#,
        )
        .unwrap();
        assert_eq!(p.allow.len(), 2);
        assert_eq!(p.allow[0].access, Access::Execute);
        assert_eq!(
            p.deny,
            vec![DenyRule {
                path: PathBuf::from("/home/x/.ssh"),
                masked: false
            }]
        );
        assert!(p.syscalls.default_deny);
        assert_eq!(
            crate::seccomp::default_action(&p.syscalls),
            Action::KillProcess
        );
    }

    #[test]
    fn errors_name_the_field() {
        let m = perr(
            r#"{"filesystem":{"allow":[{"path":"/a","access":"read"},{"path":"/b","access":"read"},
               {"path":"/c","access":"read"},{"path":"/d","access":"rw"}]}}"#,
        );
        assert_eq!(
            m,
            "filesystem.allow[3].access: unknown access \"rw\" (expected read|write|readwrite|execute|readwriteexecute)"
        );
        assert!(
            perr(r#"{"filesystem":{"alow":[]}}"#).starts_with("filesystem: unknown field \"alow\"")
        );
        assert!(perr(r#"{"syscalls":{"allow":["nosuchcall"]}}"#)
            .starts_with("syscalls.allow[0]: unknown syscall \"nosuchcall\""));
        assert!(perr(r#"{"syscalls":{"deny":["@nogroup"]}}"#)
            .starts_with("syscalls.deny[0]: unknown syscall group"));
        assert!(
            perr(r#"{"filesystem":{"allow":[{"path":"rel","access":"read"}]}}"#)
                .contains("not an absolute path")
        );
        assert!(perr(r#"{"filesystem":{"deny":["/a/../b"]}}"#).contains(".. components"));
        assert!(perr(r#"{"network":{"tcpConnect":[70000]}}"#).starts_with("network.tcpConnect[0]"));
        assert!(perr(r#"{"keepFds":[2]}"#).starts_with("keepFds[0]"));
        assert!(perr(r#"{"env":{"set":{"LD_PRELOAD":"/x.so"}}}"#).starts_with("env.set.LD_PRELOAD"));
        assert!(perr(r#"{"env":{"set":{"ld_preload":"/x.so"}}}"#).contains("injection"));
        assert!(perr(r#"{"syscalls":{"defaultAction":"errno:EWHAT"}}"#).contains("unknown errno"));
        assert!(perr(r#"{"rlimits":{"nofile":{"soft":10,"hard":5}}}"#).contains("soft limit"));
        assert!(perr(r#"{"version":2}"#).starts_with("version"));
        assert!(perr("[]").starts_with("policy: expected an object"));
    }

    #[test]
    fn bad_json_and_deep_nesting_are_errors_not_panics() {
        assert!(perr("").contains("not valid JSON"));
        assert!(perr("{} x").contains("not valid JSON"));
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(perr(&deep).contains("not valid JSON"));
        let big = format!(
            "{{\"env\":{{\"set\":{{\"A\":\"{}\"}}}}}}",
            "x".repeat(MAX_POLICY_BYTES)
        );
        assert!(perr(&big).contains("larger than"));
    }

    #[test]
    fn injection_allowed_on_purpose() {
        let p = parse(br#"{"env":{"set":{"PYTHONPATH":"/w"},"allowInjection":["PYTHONPATH"]}}"#)
            .unwrap();
        assert_eq!(p.env.set, vec![("PYTHONPATH".into(), "/w".into())]);
    }

    #[test]
    fn conditions_parse_and_width_bounds_values() {
        let p = parse(
            br#"{"syscalls":{"profile":"default","rules":[{"syscall":"ioctl","action":"errno:EPERM",
                "when":[{"arg":1,"op":"eq","value":21522,"width":32}]}]}}"#,
        )
        .unwrap();
        assert_eq!(p.syscalls.rules[0].when[0].width, 32);
        assert!(perr(
            r#"{"syscalls":{"rules":[{"syscall":"ioctl","action":"allow","when":[{"arg":1,"op":"eq","value":4294967296,"width":32}]}]}}"#
        )
        .contains("larger than"));
        assert!(perr(
            r#"{"syscalls":{"rules":[{"syscall":"ioctl","action":"allow","when":[{"arg":6,"op":"eq","value":1}]}]}}"#
        )
        .starts_with("syscalls.rules[0].when[0].arg"));
    }

    #[test]
    fn fast_allow_path_agrees_with_the_checked_one() {
        for e in [
            r#"{"path":"/usr","access":"read"}"#,
            r#"{"path":"/usr//lib/","access":"execute","optional":true}"#,
            r#"{"path":"/x","access":"readwriteexecute","optional":false}"#,
            r#"{"path":"usr","access":"read"}"#,
            r#"{"path":"/a/../b","access":"read"}"#,
            r#"{"path":"/a/./b","access":"read"}"#,
            r#"{"path":"/a\u0000b","access":"read"}"#,
            r#"{"path":"/a","access":"rw"}"#,
            r#"{"path":"/a"}"#,
            r#"{"access":"read"}"#,
            r#"{"path":"/a","access":"read","optional":1}"#,
            r#"{"path":"/a","access":"read","extra":1}"#,
            r#"{"path":7,"access":"read"}"#,
            r#""/a""#,
        ] {
            same_as_checked(format!(r#"{{"filesystem":{{"allow":[{e}]}}}}"#).as_bytes());
        }
    }

    #[test]
    fn masked_deny_entries_parse_and_round_trip() {
        let p = parse(
            br#"{"filesystem":{"deny":["/a",{"path":"/etc/shadow","masked":true},{"path":"/b"}]}}"#,
        )
        .unwrap();
        let want = |path: &str, masked| DenyRule {
            path: path.into(),
            masked,
        };
        assert_eq!(
            p.deny,
            vec![
                want("/a", false),
                want("/etc/shadow", true),
                want("/b", false)
            ]
        );
        assert_eq!(from_value(&p.to_json()).unwrap().deny, p.deny);
        assert!(perr(r#"{"filesystem":{"deny":[{"masked":true}]}}"#)
            .starts_with("filesystem.deny[0]: missing field \"path\""));
        assert!(
            perr(r#"{"filesystem":{"deny":[{"path":"/a","masked":1}]}}"#)
                .starts_with("filesystem.deny[0].masked:")
        );
        assert!(
            perr(r#"{"filesystem":{"deny":[{"path":"/a","mask":true}]}}"#)
                .contains("unknown field \"mask\"")
        );
    }

    #[test]
    fn normalized_output_round_trips() {
        let src = br#"{"filesystem":{"allow":[{"path":"/usr//","access":"read"}]},"rlimits":{"nofile":64,"core":"unlimited"},
                       "syscalls":{"profile":"default","deny":["ptrace"]}}"#;
        let p = parse(src).unwrap();
        assert_eq!(p.allow[0].path, PathBuf::from("/usr"));
        let again = from_value(&p.to_json()).unwrap();
        assert_eq!(again.allow, p.allow);
        assert_eq!(again.rlimits, p.rlimits);
        assert_eq!(again.syscalls.deny, p.syscalls.deny);
    }
}
