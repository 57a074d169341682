//! Profiles (built-in and from config files), the environment allowlist, and the
//! helper policy JSON (docs/policy.md) that mirrors the mounts as a second layer.

use crate::error::{Error, Result};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    None,
    Host,
}

impl std::str::FromStr for Network {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" => Ok(Network::None),
            "host" => Ok(Network::Host),
            _ => Err(Error::Usage(format!(
                "--network: expected none|host, got {s:?}"
            ))),
        }
    }
}

/// How the workspace is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceAccess {
    /// Read-write bind (the default).
    Rw,
    /// Read-only bind.
    Ro,
    /// Not mounted at all.
    None,
}

/// What the sandbox may do to a repository's `.git` at the top of a writable
/// path. Git runs code named there (hooks; `core.fsmonitor`, `core.pager`
/// and other config) on the host, the next time anyone runs git in that
/// checkout: a command that could write it would run code outside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GitAccess {
    /// Mounted read-only (the default): the checkout stays writable, git
    /// commands that only read work, and commits fail with EROFS.
    Ro,
    /// Writable like the rest of the path.
    Rw,
}

impl std::str::FromStr for GitAccess {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ro" => Ok(GitAccess::Ro),
            "rw" => Ok(GitAccess::Rw),
            _ => Err(Error::Usage(format!("--git: expected ro|rw, got {s:?}"))),
        }
    }
}

/// How large each scratch tmpfs (/tmp, HOME, a profile's `tmpfs`, /dev/shm)
/// may grow. Their pages are memory the host cannot reclaim and the OOM
/// killer does not charge to the writer: unbounded (the kernel's default is
/// half the RAM each), one sandbox could exhaust the host's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmpfsSize {
    Bytes(u64),
    Unlimited,
}

impl TmpfsSize {
    /// `unlimited`, or bytes with an optional binary suffix K, M, G or T.
    pub fn parse(s: &str) -> std::result::Result<TmpfsSize, String> {
        if s == "unlimited" {
            return Ok(TmpfsSize::Unlimited);
        }
        let expected = || format!("expected a size like 512M, 4G or unlimited, got {s:?}");
        let (digits, shift) = match s.as_bytes().last() {
            Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
            Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
            Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
            Some(b'T' | b't') => (&s[..s.len() - 1], 40),
            _ => (s, 0),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(expected());
        }
        let n: u64 = digits.parse().map_err(|_| format!("{s:?} is too large"))?;
        let bytes = n
            .checked_mul(1 << shift)
            .ok_or_else(|| format!("{s:?} is too large"))?;
        match bytes {
            // The kernel reads size=0 as "no limit": never by accident.
            0 => Err("0 would mean no limit to the kernel; say unlimited".into()),
            b => Ok(TmpfsSize::Bytes(b)),
        }
    }
}

impl std::str::FromStr for TmpfsSize {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        TmpfsSize::parse(s).map_err(|e| Error::Usage(format!("--tmpfs-size: {e}")))
    }
}

impl<'de> Deserialize<'de> for TmpfsSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => TmpfsSize::parse(&n.to_string()),
            Raw::S(s) => TmpfsSize::parse(&s),
        }
        .map_err(serde::de::Error::custom)
    }
}

/// A profile as written in a config file. Lists are appended to the profile it
/// `extends`; scalars replace.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileDef {
    pub extends: Option<String>,
    pub description: Option<String>,
    /// Read-only roots that must exist. "/" means every top-level entry of the host
    /// root except /proc, /sys, /dev, /run, /tmp (which are replaced or hidden).
    #[serde(default)]
    pub ro: Vec<PathBuf>,
    /// Read-only roots bound only when present (symlinks become symlinks).
    #[serde(default)]
    pub ro_try: Vec<PathBuf>,
    /// Paths hidden: an empty tmpfs over directories, an empty file over files.
    #[serde(default)]
    pub hide: Vec<PathBuf>,
    /// Extra read-write paths.
    #[serde(default)]
    pub rw: Vec<PathBuf>,
    /// Empty tmpfs directories (nothing persists).
    #[serde(default)]
    pub tmpfs: Vec<PathBuf>,
    /// Sensitive paths this profile deliberately shows (e.g. "/" for a host view).
    #[serde(default)]
    pub show: Vec<PathBuf>,
    /// Environment variables passed through by name when present.
    #[serde(default)]
    pub env: Vec<String>,
    /// Environment variables set to a value (travel in the 0600 policy file).
    #[serde(default)]
    pub env_set: BTreeMap<String, String>,
    /// Injection variables (LD_PRELOAD, ...) deliberately allowed.
    #[serde(default)]
    pub allow_injection: Vec<String>,
    pub network: Option<Network>,
    /// Helper rlimits, as in docs/policy.md.
    pub rlimits: Option<Map<String, Value>>,
    /// Helper syscall policy, as in docs/policy.md (absent: the default profile).
    pub syscalls: Option<Value>,
    /// Default timeout in seconds.
    pub timeout: Option<u64>,
    /// HOME inside the sandbox (an empty tmpfs).
    pub home: Option<PathBuf>,
    pub workspace: Option<WorkspaceAccess>,
    /// A persistent, writable cache root: XDG_CACHE_HOME=<root>/cache, XDG_STATE_HOME=<root>/state.
    pub cache_root: Option<PathBuf>,
    /// `.git` at the top of writable paths: "ro" (default) or "rw".
    pub git: Option<GitAccess>,
    /// Size of each scratch tmpfs: bytes, "512M", "4G" or "unlimited".
    pub tmpfs_size: Option<TmpfsSize>,
}

/// A fully resolved profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub ro: Vec<PathBuf>,
    pub ro_try: Vec<PathBuf>,
    pub hide: Vec<PathBuf>,
    /// Hidden only where the sandbox's uid and groups could read them by their
    /// mode (or an ACL): elsewhere the file mode alone keeps them out, and a
    /// mask would cost bwrap ≈ 0.2 ms each. Built-in profiles only.
    pub hide_if_readable: Vec<PathBuf>,
    pub rw: Vec<PathBuf>,
    pub tmpfs: Vec<PathBuf>,
    pub show: Vec<PathBuf>,
    pub env: Vec<String>,
    pub env_set: BTreeMap<String, String>,
    pub allow_injection: Vec<String>,
    pub network: Network,
    pub rlimits: Map<String, Value>,
    pub syscalls: Option<Value>,
    pub timeout: Option<u64>,
    pub home: PathBuf,
    pub workspace: WorkspaceAccess,
    pub cache_root: Option<PathBuf>,
    pub git: GitAccess,
    /// None: an eighth of the host's RAM (plan::default_tmpfs_size).
    pub tmpfs_size: Option<TmpfsSize>,
    /// The helper's `nproc` rlimit when `rlimits` names none (built-in
    /// profiles: [`DEFAULT_NPROC`]). Applied only under bwrap, where it counts
    /// the sandbox's own processes and threads.
    pub default_nproc: Option<u64>,
}

/// Processes and threads one sandbox may have at once, unless its profile's
/// `rlimits` says otherwise. Without a limit a fork bomb takes every pid of
/// the host (`kernel.pid_max` is 32 768 on many machines) until the run is
/// killed. Inside bwrap's user namespace the kernel counts `RLIMIT_NPROC`
/// per namespace, so this counts the sandbox's tasks only, not the uid's
/// processes elsewhere.
pub const DEFAULT_NPROC: u64 = 4096;

/// The usr-merge roots: bound when present, recreated as symlinks when they are links.
pub const SYSTEM_LIBS: &[&str] = &["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];

pub const DEFAULT_HOME: &str = "/home/sandbox";

fn paths(v: &[&str]) -> Vec<PathBuf> {
    v.iter().map(PathBuf::from).collect()
}

fn base(name: &str) -> Profile {
    let mut rlimits = Map::new();
    // No core dumps: a crashing command must not write its memory (and any secret
    // in it) into the workspace.
    rlimits.insert("core".into(), json!(0));
    Profile {
        name: name.into(),
        ro: paths(&["/usr"]),
        ro_try: paths(SYSTEM_LIBS),
        hide: vec![],
        hide_if_readable: vec![],
        rw: vec![],
        tmpfs: vec![],
        show: vec![],
        env: vec![],
        env_set: BTreeMap::new(),
        allow_injection: vec![],
        network: Network::None,
        rlimits,
        syscalls: None,
        timeout: None,
        home: PathBuf::from(DEFAULT_HOME),
        workspace: WorkspaceAccess::Rw,
        cache_root: None,
        git: GitAccess::Ro,
        tmpfs_size: None,
        default_nproc: Some(DEFAULT_NPROC),
    }
}

pub const BUILTIN_NAMES: &[&str] = &["default", "public-bot", "trusted-maintenance"];

/// The password and group-password hashes: always masked where `/etc` is shown.
const SHADOW: [&str; 2] = ["/etc/shadow", "/etc/gshadow"];
/// Secrets kept from most users by their mode and group, masked when the
/// sandbox could read them (a caller in their group passes it on): the
/// backups `passwd`, `useradd` and friends leave beside the hashes (same
/// content, usually 0640 root:shadow), and TLS private keys (Debian's
/// 0710 root:ssl-cert directory).
const GROUP_SECRETS: [&str; 3] = ["/etc/shadow-", "/etc/gshadow-", "/etc/ssl/private"];

/// The built-in profiles (mount tables in docs/profiles.md).
pub fn builtin(name: &str) -> Option<Profile> {
    match name {
        "default" => {
            let mut p = base(name);
            p.ro.push("/etc".into());
            p.hide = paths(&SHADOW);
            p.hide_if_readable = paths(&GROUP_SECRETS);
            Some(p)
        }
        "public-bot" => {
            let mut p = base(name);
            // Runtimes installed by Nix live in /nix/store; nothing from /etc.
            p.ro_try.push("/nix/store".into());
            p.workspace = WorkspaceAccess::Ro;
            Some(p)
        }
        "trusted-maintenance" => {
            let mut p = base(name);
            p.ro = paths(&["/"]);
            p.ro_try = vec![];
            p.show = paths(&["/"]);
            p.tmpfs = paths(&["/home"]);
            p.hide = paths(&SHADOW);
            p.hide_if_readable = paths(&GROUP_SECRETS);
            p.network = Network::Host;
            Some(p)
        }
        _ => None,
    }
}

/// A config file: `[profiles.NAME]` tables (TOML) or `{"profiles": {...}}` (JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileDef>,
}

/// toml's message is a multi-line caret diagram; errors are one line.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(r) => {
            let before = &text[..r.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

impl Config {
    pub fn parse(path: &Path, text: &str) -> Result<Config> {
        let is_json = path.extension().is_some_and(|e| e == "json");
        let cfg = if is_json {
            no_repeated_keys(text, "config")
                .and_then(|()| serde_json::from_str(text).map_err(|e| e.to_string()))
        } else {
            toml::from_str(text).map_err(|e: toml::de::Error| toml_error(text, &e))
        };
        cfg.map_err(|reason| Error::Config {
            path: path.into(),
            reason,
        })
    }

    /// A regular file of at most 1 MiB: a FIFO or a device (`--config
    /// /dev/zero`) would block or fill memory before any error is shown.
    pub fn load(path: &Path) -> Result<Config> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        const MAX_CONFIG: u64 = 1 << 20;
        let fail = |reason: String| Error::Config {
            path: path.into(),
            reason,
        };
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| fail(e.to_string()))?;
        let meta = f.metadata().map_err(|e| fail(e.to_string()))?;
        if !meta.is_file() {
            return Err(fail("not a regular file".into()));
        }
        let mut text = String::new();
        f.take(MAX_CONFIG + 1)
            .read_to_string(&mut text)
            .map_err(|e| fail(e.to_string()))?;
        if text.len() as u64 > MAX_CONFIG {
            return Err(fail("larger than 1 MiB".into()));
        }
        Config::parse(path, &text)
    }

    /// Resolve a profile by name: config first, then built-ins.
    pub fn resolve(&self, name: &str) -> Result<Profile> {
        self.resolve_depth(name, 0)
    }

    fn resolve_depth(&self, name: &str, depth: usize) -> Result<Profile> {
        if depth > 16 {
            return Err(Error::Usage(format!(
                "profile {name}: extends chain too deep"
            )));
        }
        let Some(def) = self.profiles.get(name) else {
            return builtin(name).ok_or_else(|| {
                Error::Usage(format!(
                    "unknown profile {name:?} (built-in: {})",
                    BUILTIN_NAMES.join(", ")
                ))
            });
        };
        let parent = def.extends.as_deref().unwrap_or("default");
        let mut p = if parent == name {
            builtin(name).ok_or_else(|| Error::Usage(format!("profile {name} extends itself")))?
        } else {
            self.resolve_depth(parent, depth + 1)?
        };
        p.name = name.into();
        apply(&mut p, def.clone());
        Ok(p)
    }
}

fn apply(p: &mut Profile, d: ProfileDef) {
    p.ro.extend(d.ro);
    p.ro_try.extend(d.ro_try);
    p.hide.extend(d.hide);
    p.rw.extend(d.rw);
    p.tmpfs.extend(d.tmpfs);
    p.show.extend(d.show);
    p.env.extend(d.env);
    p.env_set.extend(d.env_set);
    p.allow_injection.extend(d.allow_injection);
    if let Some(n) = d.network {
        p.network = n;
    }
    if let Some(r) = d.rlimits {
        p.rlimits.extend(r);
    }
    if d.syscalls.is_some() {
        p.syscalls = d.syscalls;
    }
    if d.timeout.is_some() {
        p.timeout = d.timeout;
    }
    if let Some(h) = d.home {
        p.home = h;
    }
    if let Some(w) = d.workspace {
        p.workspace = w;
    }
    if d.cache_root.is_some() {
        p.cache_root = d.cache_root;
    }
    if let Some(g) = d.git {
        p.git = g;
    }
    if d.tmpfs_size.is_some() {
        p.tmpfs_size = d.tmpfs_size;
    }
}

// The helper's strict JSON reading: a key repeated in one object is an
// error, not "the last one wins" (configs and exec-json requests).
#[path = "../../helper/src/policy/strict.rs"]
mod strict;

/// Refuse a JSON document with a key repeated in one object, naming it.
pub fn no_repeated_keys(text: &str, root: &str) -> std::result::Result<(), String> {
    match strict::parse(text.as_bytes(), root) {
        Err(e) if e.is_data() => Err(e.to_string()),
        // Syntax errors are left to the typed parse, which reports them.
        _ => Ok(()),
    }
}

// One list for both layers, so a name the launcher lets through is never
// dropped by the helper without a word (and the reverse).
#[path = "../../helper/src/injection.rs"]
mod injection;
pub use injection::is_injection;

/// Environment names: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn validate_env_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::Env(format!("invalid variable name {name:?}")))
    }
}

/// Refuse injection variables unless explicitly allowed.
pub fn check_injection(name: &str, allowed: &[String]) -> Result<()> {
    if is_injection(name) && !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
        return Err(Error::Env(format!(
            "{name} is a loader/interpreter injection variable; refused (allow it explicitly with --allow-env-injection {name})"
        )));
    }
    Ok(())
}

/// The default allowlist, passed by name only when present in the caller's environment.
pub const DEFAULT_ENV: &[&str] = &["PATH", "LANG", "TERM"];
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// One Landlock rule for the helper policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub path: PathBuf,
    pub access: &'static str,
    pub optional: bool,
    /// `(st_dev, st_ino)` the helper must find at `path` (docs/policy.md).
    pub identity: Option<(u64, u64)>,
}

/// A mount the helper checks is where the plan put it (docs/policy.md,
/// `mounts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountCheck {
    pub path: PathBuf,
    /// `(st_dev, st_ino)` of the source; None for a mask.
    pub identity: Option<(u64, u64)>,
    /// Mounted read-only.
    pub ro: bool,
}

/// Inputs for the helper policy, computed by the planner from the mount table.
#[derive(Debug, Clone)]
pub struct HelperPolicyInput<'a> {
    pub rules: Vec<Rule>,
    /// Mount points the helper checks.
    pub mounts: Vec<MountCheck>,
    pub deny: Vec<PathBuf>,
    /// The deny paths are masked by bwrap (both layers): the helper may
    /// verify the mask instead of carving the path out of its parent.
    pub deny_masked: bool,
    pub network: Network,
    pub best_effort: bool,
    pub profile: &'a Profile,
    pub env_set: BTreeMap<String, String>,
    pub allow_injection: Vec<String>,
    pub user: Option<(u32, u32)>,
    /// An `nproc` rlimit to add when the profile's `rlimits` has none.
    pub default_nproc: Option<u64>,
}

/// The helper policy JSON (docs/policy.md).
pub fn helper_policy(i: &HelperPolicyInput) -> Value {
    let allow: Vec<Value> = i
        .rules
        .iter()
        .map(|r| {
            let mut o = json!({"path": r.path.to_string_lossy(), "access": r.access});
            if r.optional {
                o["optional"] = json!(true);
            }
            if let Some((dev, ino)) = r.identity {
                o["identity"] = json!([dev, ino]);
            }
            o
        })
        .collect();
    let mut p = json!({
        "version": 1,
        "filesystem": {
            "allow": allow,
            "deny": i.deny.iter().map(|d| if i.deny_masked {
                json!({"path": d.to_string_lossy(), "masked": true})
            } else {
                json!(d.to_string_lossy())
            }).collect::<Vec<_>>(),
        },
        "scope": {"signal": true, "abstractUnix": true},
        "landlock": {"compat": if i.best_effort { "best_effort" } else { "hard_requirement" }},
        "env": {
            "clear": false,
            "set": i.env_set,
            "allowInjection": i.allow_injection,
        },
    });
    // Without host networking the network namespace already has no route; Landlock
    // denies TCP as well (absent section = no port). With host networking, leave
    // TCP unrestricted by Landlock.
    if i.network == Network::Host {
        p["network"] = json!({"tcpBind": "any", "tcpConnect": "any"});
    }
    let mut rlimits = i.profile.rlimits.clone();
    if let Some(n) = i.default_nproc {
        rlimits.entry("nproc").or_insert(json!(n));
    }
    if !rlimits.is_empty() {
        p["rlimits"] = Value::Object(rlimits);
    }
    if let Some(s) = &i.profile.syscalls {
        p["syscalls"] = s.clone();
    }
    if let Some((uid, gid)) = i.user {
        p["user"] = json!({"uid": uid, "gid": gid});
    }
    if !i.mounts.is_empty() {
        p["mounts"] = i
            .mounts
            .iter()
            .map(|m| {
                let mut o = json!({"path": m.path.to_string_lossy(), "ro": m.ro});
                if let Some((d, n)) = m.identity {
                    o["identity"] = json!([d, n]);
                }
                o
            })
            .collect();
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_exist() {
        for n in BUILTIN_NAMES {
            assert!(builtin(n).is_some(), "{n}");
        }
        assert!(builtin("nope").is_none());
        let d = builtin("default").unwrap();
        assert_eq!(d.network, Network::None);
        assert!(d.hide.contains(&PathBuf::from("/etc/shadow")));
        let t = builtin("trusted-maintenance").unwrap();
        assert_eq!(t.network, Network::Host);
        let b = builtin("public-bot").unwrap();
        assert!(!b.ro.iter().any(|p| p == Path::new("/etc")));
    }

    #[test]
    fn injection_case_insensitive() {
        for n in [
            "LD_PRELOAD",
            "ld_preload",
            "Node_Options",
            "BASH_ENV",
            "BASH_FUNC_x%%",
            "LD_FOO",
            "PYTHONPATH",
        ] {
            assert!(is_injection(n), "{n}");
            assert!(check_injection(n, &[]).is_err(), "{n}");
        }
        assert!(check_injection("LD_PRELOAD", &["ld_preload".into()]).is_ok());
        for n in ["PATH", "HOME", "LANG", "MY_LD_THING"] {
            assert!(!is_injection(n), "{n}");
        }
    }

    #[test]
    fn env_names() {
        for ok in ["A", "_x", "PATH", "a1_B"] {
            assert!(validate_env_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1A", "A-B", "A=B", "A B", "é"] {
            assert!(validate_env_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_toml_and_json() {
        let t = r#"
[profiles.bot]
extends = "public-bot"
ro = ["/opt/tool"]
network = "host"
timeout = 30
env = ["FOO"]
rlimits = { nofile = 256 }
"#;
        let c = Config::parse(Path::new("c.toml"), t).unwrap();
        let p = c.resolve("bot").unwrap();
        assert_eq!(p.name, "bot");
        assert!(p.ro.contains(&PathBuf::from("/opt/tool")));
        assert!(p.ro_try.contains(&PathBuf::from("/nix/store")));
        assert_eq!(p.network, Network::Host);
        assert_eq!(p.timeout, Some(30));
        assert_eq!(p.rlimits["nofile"], json!(256));
        assert_eq!(p.rlimits["core"], json!(0));
        assert_eq!(p.workspace, WorkspaceAccess::Ro);

        let j = r#"{"profiles": {"x": {"hide": ["/etc/passwd"]}}}"#;
        let c = Config::parse(Path::new("c.json"), j).unwrap();
        let p = c.resolve("x").unwrap();
        assert!(p.ro.contains(&PathBuf::from("/etc")));
        assert!(p.hide.contains(&PathBuf::from("/etc/passwd")));

        let bad = "[profiles.x]\nhidee = []\n";
        assert!(Config::parse(Path::new("c.toml"), bad).is_err());
        assert!(c.resolve("nope").is_err());

        // A repeated key is refused in JSON as TOML refuses it: a second
        // profile of the same name must not silently replace the first.
        let twice = r#"{"profiles": {"x": {"hide": ["/etc/passwd"]}, "x": {}}}"#;
        let e = Config::parse(Path::new("c.json"), twice)
            .unwrap_err()
            .to_string();
        assert!(e.contains("profiles: key \"x\" appears twice"), "{e}");
        let twice = "[profiles.x]\nhide = [\"/etc/passwd\"]\n[profiles.x]\n";
        assert!(Config::parse(Path::new("c.toml"), twice).is_err());
        assert!(
            no_repeated_keys(r#"{"env": {"A": "1", "A": "2"}}"#, "request")
                .unwrap_err()
                .starts_with("env: key \"A\" appears twice")
        );
        assert!(no_repeated_keys(r#"{"env": {"A": "1", "B": "2"}}"#, "request").is_ok());
    }

    #[test]
    fn helper_policy_network() {
        let prof = builtin("default").unwrap();
        let mut i = HelperPolicyInput {
            rules: vec![Rule {
                path: "/usr".into(),
                access: "execute",
                optional: false,
                identity: None,
            }],
            deny: vec!["/etc/shadow".into()],
            deny_masked: false,
            network: Network::None,
            best_effort: false,
            profile: &prof,
            env_set: BTreeMap::new(),
            allow_injection: vec![],
            user: None,
            default_nproc: None,
            mounts: vec![],
        };
        let p = helper_policy(&i);
        assert!(p.get("network").is_none());
        assert_eq!(p["landlock"]["compat"], "hard_requirement");
        assert_eq!(p["filesystem"]["deny"][0], "/etc/shadow");
        i.deny_masked = true;
        let p = helper_policy(&i);
        assert_eq!(
            p["filesystem"]["deny"][0],
            json!({"path": "/etc/shadow", "masked": true})
        );
        i.network = Network::Host;
        let p = helper_policy(&i);
        assert_eq!(p["network"]["tcpConnect"], "any");
        assert_eq!(p["network"]["tcpBind"], "any");
    }
}
