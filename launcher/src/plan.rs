//! The pure planner: (profile, options, host facts) → [`Plan`]. No I/O besides the
//! injected [`Fs`]; tests assert the exact argv and its invariants.
//!
//! Mount order (each stage can only cover the ones before it):
//! 1. read-only roots (symlinks recreated as symlinks), then /dev, /proc and the
//!    scratch tmpfs (/tmp, HOME, profile tmpfs);
//! 2. masks over hidden paths that live in read-only roots;
//! 3. writable binds (workspace, --rw, cache root);
//! 4. read-only binds nested in a writable bind (e.g. `--ro WS/.git`), then masks
//!    nested in writable binds — so a writable bind never re-exposes a hidden path;
//! 5. the helper at /.cordon/cordon-helper, only when /proc is an empty tmpfs
//!    (otherwise it runs as /proc/self/fd/6, no mount at all). Its policy is
//!    never a file in the sandbox: the helper reads it from fd 5.

use crate::error::{Error, Result};
use crate::paths::{self, Fs, Kind, Mask};
use crate::policy::{self, GitAccess, Network, Profile, Rule, TmpfsSize, WorkspaceAccess};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const CORDON_DIR: &str = "/.cordon";

/// bwrap flags every sandbox gets, the preflight probe's included (after
/// `--unshare-all`). bwrap 0.8 needs an explicit --unshare-user for
/// --disable-userns.
pub const ALWAYS_FLAGS: [&str; 6] = [
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
];
pub const HELPER_PATH: &str = "/.cordon/cordon-helper";

/// Fds handed to bwrap (or the helper) on purpose. Everything else is closed.
pub const REPORT_FD: i32 = 3;
pub const INFO_FD: i32 = 4;
pub const POLICY_FD: i32 = 5;
pub const HELPER_FD: i32 = 6;
/// The file masks' /dev/null fds (one each: bwrap's `--ro-bind-data` closes it).
pub const EMPTY_FD_FIRST: i32 = 7;

/// Unprivileged fallback uid when the launcher is root and the workspace is root's.
pub const NOBODY: u32 = 65534;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layers {
    Both,
    Outer,
    Inner,
}

impl std::str::FromStr for Layers {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "both" => Ok(Layers::Both),
            "outer" => Ok(Layers::Outer),
            "inner" => Ok(Layers::Inner),
            _ => Err(Error::Usage(format!(
                "--layers: expected both|outer|inner, got {s:?}"
            ))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcStrategy {
    /// A fresh procfs for the new pid namespace (preferred).
    Fresh,
    /// A read-only bind of the host /proc (only after the sibling probe passed).
    BindRo,
    /// An empty tmpfs (degraded: tools needing /proc break).
    Tmpfs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdRole {
    /// Write end of the pipe for the helper's report.
    Report,
    /// Write end of the pipe for bwrap's `--info-fd`.
    Info,
    /// The policy file, opened read-only (bound with `--ro-bind-fd`).
    Policy,
    /// The verified helper binary, opened read-only (bound with `--ro-bind-fd`).
    Helper,
    /// An empty file (/dev/null) for `--ro-bind-data` masks.
    Empty,
}

/// One `--env` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvArg {
    /// Pass the caller's value by name, when present.
    Pass(String),
    /// Set a value (travels in the 0600 policy file, never in argv).
    Set(String, String),
}

impl EnvArg {
    pub fn parse(s: &str) -> EnvArg {
        match s.split_once('=') {
            Some((n, v)) => EnvArg::Set(n.into(), v.into()),
            None => EnvArg::Pass(s.into()),
        }
    }
}

/// What the caller asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub command: Vec<String>,
    pub workspace: PathBuf,
    pub cwd: Option<PathBuf>,
    pub rw: Vec<PathBuf>,
    pub ro: Vec<PathBuf>,
    pub hide: Vec<PathBuf>,
    pub network: Option<Network>,
    pub env: Vec<EnvArg>,
    pub allow_injection: Vec<String>,
    pub timeout: Option<u64>,
    pub layers: Layers,
    pub uid: Option<u32>,
    pub degrade_outer: bool,
    pub degrade_inner: bool,
    pub cache_root: Option<PathBuf>,
    /// The workspace is the current directory, not a `--workspace` the
    /// caller named: when the sandbox uid cannot write it, it is mounted
    /// read-only (with a note) instead of refusing to run.
    pub workspace_implicit: bool,
    /// `--git ro|rw`: overrides the profile's `git`.
    pub git: Option<GitAccess>,
    /// `--tmpfs-size`: overrides the profile's `tmpfs_size`.
    pub tmpfs_size: Option<TmpfsSize>,
}

impl Options {
    pub fn new(command: Vec<String>, workspace: PathBuf) -> Options {
        Options {
            command,
            workspace,
            cwd: None,
            rw: vec![],
            ro: vec![],
            hide: vec![],
            network: None,
            env: vec![],
            allow_injection: vec![],
            timeout: None,
            layers: Layers::Both,
            uid: None,
            degrade_outer: false,
            degrade_inner: false,
            cache_root: None,
            workspace_implicit: false,
            git: None,
            tmpfs_size: None,
        }
    }
}

/// Facts about the host the planner depends on (injected for tests).
pub struct Host {
    pub euid: u32,
    pub egid: u32,
    /// The caller's environment.
    pub env: BTreeMap<String, String>,
    /// Home directories whose credential dirs are hidden.
    pub homes: Vec<PathBuf>,
    /// Every home in /etc/passwd (filled only when the workspace is the
    /// implicit current directory, which must not be, or hold, a home).
    pub passwd_homes: Vec<PathBuf>,
    pub bwrap: PathBuf,
    pub proc: ProcStrategy,
    /// Primary gid of a uid, if it has a passwd entry.
    pub gid_of: fn(u32) -> Option<u32>,
    /// The caller's supplementary groups (the sandbox keeps them unless the
    /// launcher switches uid); None when they could not be read.
    pub groups: Option<Vec<u32>>,
    /// Total RAM in bytes (0: unknown), for the default tmpfs size.
    pub mem_bytes: u64,
}

/// Each scratch tmpfs may use an eighth of the RAM by default (at least
/// 64 MiB; 1 GiB when the RAM is unknown): the default profile's three then
/// hold at most 3/8 of it, where the kernel's default is half the RAM each.
pub fn default_tmpfs_size(mem_bytes: u64) -> u64 {
    match mem_bytes {
        0 => 1 << 30,
        m => (m / 8).max(64 << 20),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    RoBind { path: PathBuf, try_: bool },
    Symlink { target: PathBuf, link: PathBuf },
    Dev,
    Proc(ProcStrategy),
    Tmpfs(PathBuf),
    MaskDir(PathBuf),
    MaskFile(PathBuf),
    Bind(PathBuf),
    RoBindFd { fd: i32, dest: &'static str },
}

impl Op {
    fn dest(&self) -> &Path {
        match self {
            Op::RoBind { path, .. } | Op::Tmpfs(path) | Op::MaskDir(path) => path,
            Op::MaskFile(p) | Op::Bind(p) => p,
            Op::Symlink { link, .. } => link,
            Op::Dev => Path::new("/dev"),
            Op::Proc(_) => Path::new("/proc"),
            Op::RoBindFd { dest, .. } => Path::new(dest),
        }
    }
    /// Does this mount show host content (as opposed to an empty/synthetic fs)?
    fn host_content(&self) -> bool {
        matches!(self, Op::RoBind { .. } | Op::Bind(_)) || *self == Op::Proc(ProcStrategy::BindRo)
    }
}

/// A mount moves with its directory: renaming an ordinary directory above a
/// mask or a read-only bind nested in a writable bind carries the protection
/// away, and the host path then holds whatever the command puts there (or a
/// later run finds the hidden path "absent"). So every directory between the
/// writable bind and such a nested mount is bound onto itself, with the
/// access it already has: a mount point cannot be renamed or removed
/// (EBUSY). Nothing is pinned inside a masked directory (it is empty).
fn pins_for(writable: &[PathBuf], nested: &[Op]) -> Vec<Op> {
    let masked = |p: &Path| {
        nested
            .iter()
            .any(|o| matches!(o, Op::MaskDir(_) | Op::MaskFile(_)) && paths::is_under(p, o.dest()))
    };
    let mut pins: Vec<Op> = Vec::new();
    for n in nested {
        let dest = n.dest();
        let Some(w) = writable
            .iter()
            .filter(|w| paths::is_under(dest, w) && !paths::same(w, dest))
            .max_by_key(|w| w.as_os_str().len())
        else {
            continue;
        };
        let mut d = dest.parent();
        while let Some(p) = d {
            if !paths::is_under(p, w) || paths::same(p, w) || masked(p) {
                break;
            }
            // Read-only when a nested read-only bind below `w` covers it.
            let ro = nested.iter().any(|o| {
                matches!(o, Op::RoBind { .. })
                    && paths::is_under(p, o.dest())
                    && !paths::same(o.dest(), w)
            });
            let pin = match ro {
                true => Op::RoBind {
                    path: p.to_path_buf(),
                    try_: false,
                },
                false => Op::Bind(p.to_path_buf()),
            };
            if !nested.iter().any(|o| paths::same(o.dest(), p)) && !pins.contains(&pin) {
                pins.push(pin);
            }
            d = p.parent();
        }
    }
    pins
}

/// A home directory that is `ws` or lies beneath it, compared by device and
/// inode along each home's real path: a home outside /home
/// (/var/lib/postgresql) or reached through a bind mount counts too.
fn home_at_or_below(host: &Host, fs: &dyn Fs, ws: &Path) -> Option<PathBuf> {
    let ws_id = fs.lstat(ws)?.id;
    host.homes.iter().chain(&host.passwd_homes).find_map(|h| {
        if paths::is_under(h, ws) {
            return Some(h.clone());
        }
        let real = fs.canonicalize(h).ok()?;
        real.ancestors()
            .any(|a| fs.lstat(a).is_some_and(|m| m.id == ws_id))
            .then(|| h.clone())
    })
}

/// The op that provides `p` inside the sandbox: the last one mounted at or above it.
fn provider<'a>(ops: &'a [Op], p: &Path) -> Option<&'a Op> {
    ops.iter()
        .rev()
        .find(|o| paths::is_under(p, o.dest()) && !matches!(o, Op::Symlink { .. }))
}

/// Everything needed to run one sandboxed command.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layers: Layers,
    /// bwrap's full command line, argv[0] = bwrap's path (empty for `--layers inner`).
    pub bwrap_argv: Vec<String>,
    /// The command line run inside bwrap; for `--layers inner`, what is executed.
    pub inner_argv: Vec<String>,
    /// The helper policy (None for `--layers outer`).
    pub helper_policy: Option<Value>,
    /// The complete environment bwrap (or the helper) is started with.
    pub env: Vec<(String, String)>,
    /// Fds passed on purpose, by number.
    pub fds: Vec<(i32, FdRole)>,
    /// The uid/gid the sandbox runs as (host ids).
    pub uid: u32,
    pub gid: u32,
    /// Switch to this uid/gid before exec (launcher running as root).
    pub switch_to: Option<(u32, u32)>,
    /// Working directory inside.
    pub cwd: PathBuf,
    pub timeout: Option<u64>,
    pub network: Network,
    pub proc: ProcStrategy,
    pub profile: String,
    /// Number of mount operations bwrap performs.
    pub mounts: usize,
    pub best_effort_inner: bool,
    /// Skipped masks and other non-fatal decisions.
    pub notes: Vec<String>,
    /// `.git` paths the read-only protection would cover but that did not
    /// exist when the run started: the runner reports any the command made.
    pub git_absent: Vec<PathBuf>,
}

impl Plan {
    /// The program and argv actually executed by the launcher.
    pub fn exec_argv(&self) -> &[String] {
        if self.layers == Layers::Inner {
            &self.inner_argv
        } else {
            &self.bwrap_argv
        }
    }
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Does the profile show `p`? Showing "/" shows the root's entries, not every
/// sensitive path beneath it.
fn shown(p: &Path, show: &[PathBuf]) -> bool {
    show.iter().any(|s| {
        if s == Path::new("/") {
            p == s
        } else {
            paths::is_under(p, s)
        }
    })
}

/// Is a read-only root sensitive (hidden unless shown)?
fn sensitive(p: &Path, creds: &[PathBuf]) -> bool {
    p == Path::new("/")
        || paths::SYSTEM_SENSITIVE
            .iter()
            .any(|s| paths::is_under(p, Path::new(s)))
        || creds.iter().any(|c| paths::is_under(p, c))
}

struct RoRoot {
    path: PathBuf,
    try_: bool,
}

/// What bwrap execs (or, `--layers inner`, what runs): the helper with its
/// fds, then the command. The helper runs from the very fd that was hashed.
pub fn inner_argv(layers: Layers, helper_via_proc: bool, command: &[String]) -> Vec<String> {
    let mut inner: Vec<String> = Vec::new();
    if layers != Layers::Outer {
        if layers == Layers::Both && !helper_via_proc {
            inner.push(HELPER_PATH.into());
        } else {
            inner.push(format!("/proc/self/fd/{HELPER_FD}"));
        }
        if layers == Layers::Both {
            // The helper is the sandbox's pid 1 (bwrap --as-pid-1, below).
            inner.push("--init".into());
        }
        inner.extend([
            "--policy-fd".to_string(),
            POLICY_FD.to_string(),
            "--report-fd".to_string(),
            REPORT_FD.to_string(),
            "--".into(),
        ]);
    }
    inner.extend(command.iter().cloned());
    inner
}

/// The uid switch bwrap must be started with before the plan exists (see
/// `cli::prepare`), as `build` will choose it; `host.homes` is not needed.
/// None when anything is unclear: the plan, built next, reports the error.
pub fn early_switch(opts: &Options, host: &Host, fs: &dyn Fs) -> Option<Option<UidGid>> {
    let ws = fs.canonicalize(&opts.workspace).ok()?;
    choose_uid(opts, host, fs, &ws).ok().map(|(_, _, s)| s)
}

/// What a `.git` file (`gitdir: PATH`, relative to its directory) leads to,
/// read as git reads it; real paths, directories only.
struct LinkedGit {
    /// The git directory it names.
    gitdir: PathBuf,
    /// The common directory that one names in its `commondir` file (a
    /// linked worktree's main `.git`).
    common: Option<PathBuf>,
    /// A symlink in a writable path on the way to either: the command can
    /// re-point it, and git on the host would follow it.
    link: Option<PathBuf>,
}

fn linked_git(fs: &dyn Fs, file: &Path, writable: &[PathBuf]) -> Option<LinkedGit> {
    let first_line = |p: &Path| -> Option<String> {
        let t = fs.read_head(p, 4096).ok()?;
        let line = std::str::from_utf8(&t).ok()?.lines().next()?.trim_end();
        (!line.is_empty()).then(|| line.to_string())
    };
    let mut link = None;
    let mut dir = |base: &Path, rel: &str| -> Option<PathBuf> {
        let named = base.join(rel);
        link = link
            .take()
            .or_else(|| redirectable_link(fs, &named, writable));
        let real = fs.canonicalize(&named).ok()?;
        (fs.lstat(&real)?.kind == Kind::Dir).then_some(real)
    };
    let base = file.parent()?;
    let gitdir = dir(base, first_line(file)?.strip_prefix("gitdir: ")?)?;
    let common = first_line(&gitdir.join("commondir")).and_then(|c| dir(&gitdir, &c));
    Some(LinkedGit {
        gitdir,
        common,
        link,
    })
}

/// The working trees of the submodules whose git directories are kept in
/// `gitdir/modules` (as `git submodule` keeps them), from the
/// `core.worktree` of each one's config, nested ones included. Bounded
/// (depth 6, 256 directories), and one `lstat` when there are none.
fn submodule_trees(fs: &dyn Fs, gitdir: &Path) -> Vec<PathBuf> {
    let mut trees = Vec::new();
    let mut stack = vec![(gitdir.join("modules"), 0)];
    let mut seen = 0;
    while let Some((dir, depth)) = stack.pop() {
        if depth > 6 || seen >= 256 || fs.lstat(&dir).map(|m| m.kind) != Some(Kind::Dir) {
            continue;
        }
        seen += 1;
        let config = fs.read_head(&dir.join("config"), 64 << 10).ok();
        match config.as_deref().and_then(core_worktree) {
            // A submodule's git directory: its tree, and its own submodules.
            Some(w) => {
                trees.push(lexical(&dir.join(w)));
                stack.push((dir.join("modules"), depth + 1));
            }
            // A directory of names with a `/` (`modules/lib/foo`).
            None if config.is_none() => {
                for name in fs.read_dir(&dir).unwrap_or_default() {
                    stack.push((dir.join(name), depth + 1));
                }
            }
            None => {}
        }
    }
    trees
}

/// The working trees `.gitmodules` in `top` names (`path = …` in each
/// `[submodule]` section), relative paths inside `top` only.
fn gitmodules_paths(fs: &dyn Fs, top: &Path) -> Vec<PathBuf> {
    let Ok(text) = fs.read_head(&top.join(".gitmodules"), 256 << 10) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut in_sub = false;
    for line in String::from_utf8_lossy(&text).lines() {
        let line = line.trim();
        if let Some(section) = line.strip_prefix('[') {
            in_sub = section
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("submodule");
        } else if let (true, Some((k, v))) = (in_sub, line.split_once('=')) {
            let v = v.trim().trim_matches('"');
            let rel = Path::new(v);
            let inside = !v.is_empty()
                && rel.is_relative()
                && rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if k.trim().eq_ignore_ascii_case("path") && inside {
                out.push(top.join(rel));
            }
        }
    }
    out
}

/// `p` with `.` and `..` taken off by name: right for a path whose
/// directories before each `..` are real (here, inside a git directory).
fn lexical(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut q = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                q.pop();
            }
            Component::CurDir => {}
            c => q.push(c),
        }
    }
    q
}

/// `core.worktree` of a git config file, as git writes it for a submodule.
fn core_worktree(config: &[u8]) -> Option<String> {
    let mut in_core = false;
    for line in std::str::from_utf8(config).ok()?.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line.eq_ignore_ascii_case("[core]");
        } else if in_core {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim().eq_ignore_ascii_case("worktree") {
                    let v = v.trim();
                    return Some(
                        v.strip_prefix('"')
                            .and_then(|v| v.strip_suffix('"'))
                            .unwrap_or(v)
                            .to_string(),
                    );
                }
            }
        }
    }
    None
}

/// Is every directory above `p` owned by root and writable by root alone?
/// Then no sandbox (never uid 0 on the host) can rename anything on the way.
fn root_held(fs: &dyn Fs, p: &Path) -> bool {
    p.ancestors().skip(1).all(|a| {
        fs.lstat(a)
            .is_some_and(|m| m.uid == 0 && m.mode & 0o022 == 0)
    })
}

/// The first symlink `p` passes through that lies in a writable path, where
/// the command could point it elsewhere: what a later run protects or shows
/// under that name would no longer be what it was (pins hold directories in
/// place, not links). Links outside writable paths are followed (the command
/// cannot change them), so `..` after one is taken from where it leads, as
/// the kernel does. Each `lstat` is one the planner's cache mostly has.
fn redirectable_link(fs: &dyn Fs, p: &Path, writable: &[PathBuf]) -> Option<PathBuf> {
    use std::path::Component;
    let mut q = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                q.pop();
            }
            Component::Normal(n) => {
                q.push(n);
                if fs.lstat(&q)?.kind == Kind::Symlink {
                    if writable.iter().any(|w| paths::is_under(&q, w)) {
                        return Some(q);
                    }
                    q = fs.canonicalize(&q).ok()?;
                }
            }
            _ => {}
        }
    }
    None
}

/// Build the plan.
pub fn build(profile: &Profile, opts: &Options, host: &Host, fs: &dyn Fs) -> Result<Plan> {
    if opts.command.is_empty() {
        return Err(Error::Usage("no command given".into()));
    }
    // Every home's credential paths, computed once: they are checked against
    // every path the plan touches.
    let all_creds = paths::credential_paths(&host.homes);
    let mut notes = Vec::new();

    // --- writable paths -------------------------------------------------------
    let ws = paths::validate_writable(fs, &opts.workspace, &all_creds)?;
    if fs.lstat(&ws).map(|m| m.kind) != Some(Kind::Dir) {
        return Err(Error::path(&ws, "workspace must be a directory"));
    }
    let mut ws_access = profile.workspace;
    if ws_access == WorkspaceAccess::Rw && opts.workspace_implicit {
        let (uid, gid, _) = choose_uid(opts, host, fs, &ws)?;
        // A home directory (or one holding homes) is writable only when
        // named: run from ~, a command could otherwise rewrite ~/.bashrc,
        // ~/.profile or the hooks of every repository below, all of which
        // run later outside the sandbox.
        if let Some(h) = home_at_or_below(host, fs, &ws) {
            ws_access = WorkspaceAccess::Ro;
            notes.push(format!(
                "workspace {} is read-only: it is, or holds, the home directory {} (pass --workspace DIR to make a directory writable)",
                ws.display(),
                h.display()
            ));
        } else if !fs.writable_by(&ws, uid, gid) {
            // Stricter than asked, never weaker: the command still runs, and
            // can write only /tmp and HOME.
            ws_access = WorkspaceAccess::Ro;
            notes.push(format!(
                "workspace {} is read-only: the sandbox uid {uid} cannot write it (pass --workspace DIR writable by that uid, or --uid)",
                ws.display()
            ));
        }
    }
    let mut writable: Vec<PathBuf> = Vec::new();
    if ws_access == WorkspaceAccess::Rw {
        writable.push(ws.clone());
    }
    for p in profile.rw.iter().chain(&opts.rw) {
        writable.push(paths::validate_writable(fs, p, &all_creds)?);
    }
    // The default syscall profile refuses setgid bits (docs/seccomp.md), and
    // chmod keeps a directory's: in a setgid directory `chmod 755 sub` or
    // `cp -a` fails with EPERM. Said up front rather than left a puzzle.
    if opts.layers != Layers::Outer && profile.syscalls.is_none() {
        for w in &writable {
            if fs.lstat(w).is_some_and(|m| m.mode & 0o2000 != 0) {
                notes.push(format!(
                    "{} is setgid: new directories inherit the bit, and the default syscall profile refuses setgid bits, so chmod that keeps a directory's (chmod 755 DIR, cp -a) fails with EPERM there; chmod g-s it, or see docs/seccomp.md",
                    w.display()
                ));
            }
        }
    }
    let cache_root = opts.cache_root.as_ref().or(profile.cache_root.as_ref());
    if let Some(c) = cache_root {
        if fs.lstat(c).is_some_and(|m| m.kind != Kind::Dir) {
            return Err(Error::path(c, "cache root must be a directory"));
        }
        writable.push(paths::validate_writable(fs, c, &all_creds)?);
    }
    dedup(&mut writable);

    // --- read-only roots ----------------------------------------------------------
    let mut roots: Vec<RoRoot> = Vec::new();
    let push_root = |p: &Path, try_: bool, roots: &mut Vec<RoRoot>| -> Result<()> {
        paths::require_absolute_normal(p)?;
        if sensitive(p, &all_creds) && !shown(p, &profile.show) {
            return Err(Error::path(
                p,
                "is hidden unless a profile shows it (profile `show`)",
            ));
        }
        if p == Path::new("/") {
            // The host root, entry by entry: the sandbox root stays bwrap's tmpfs so
            // /.cordon can be created, and /proc, /sys, /dev, /run, /tmp are never
            // bound from the host (replaced or hidden).
            let entries = fs
                .read_dir(p)
                .map_err(|e| Error::path(p, format!("cannot list: {e}")))?;
            for e in entries {
                let child = Path::new("/").join(&e);
                if ["/proc", "/sys", "/dev", "/run", "/tmp", CORDON_DIR]
                    .iter()
                    .any(|x| child == Path::new(x))
                    && !profile.show.iter().any(|s| paths::same(s, &child))
                {
                    continue;
                }
                if all_creds.iter().any(|c| paths::same(c, &child)) {
                    continue;
                }
                roots.push(RoRoot {
                    path: child,
                    try_: true,
                });
            }
            return Ok(());
        }
        roots.push(RoRoot {
            path: p.to_path_buf(),
            try_,
        });
        Ok(())
    };
    for p in &profile.ro {
        push_root(p, false, &mut roots)?;
    }
    for p in &profile.ro_try {
        push_root(p, true, &mut roots)?;
    }
    for p in &opts.ro {
        push_root(p, false, &mut roots)?;
    }
    // A repository's `.git` at the top of a writable path is read-only unless
    // asked otherwise: git runs its hooks and config on the host
    // (policy::GitAccess). bwrap enforces it alone: Landlock rights reach the
    // whole tree below a rule and cannot be taken back for one child.
    let git_ro = opts.git.unwrap_or(profile.git) == GitAccess::Ro;
    let mut git_absent = Vec::new();
    {
        let mut candidates: Vec<PathBuf> = writable.iter().map(|w| w.join(".git")).collect();
        // The repository the command starts in, when `--cwd` is nested in a
        // writable path: a few lstats up to that path, not a scan.
        if let Some(c) = opts.cwd.as_deref() {
            let top = writable
                .iter()
                .filter(|w| paths::is_under(c, w))
                .max_by_key(|w| w.as_os_str().len());
            if let Some(w) = top {
                if paths::require_absolute_normal(c).is_ok()
                    && redirectable_link(fs, c, &writable).is_none()
                {
                    let mut d = Some(c);
                    while let Some(dir) = d.filter(|d| !paths::same(d, w)) {
                        candidates.push(dir.join(".git"));
                        d = dir.parent();
                    }
                }
            }
        }
        let mut linked: Vec<(LinkedGit, PathBuf)> = Vec::new();
        let mut next = 0;
        while let Some(git) = candidates.get(next).cloned() {
            next += 1;
            // `--rw WS/.git` (or a path in it): the caller asked for it writable.
            // Already read-only by name (`--ro WS/.git`): mounted once.
            if writable.iter().any(|o| paths::is_under(o, &git))
                || roots.iter().any(|r| paths::same(&r.path, &git))
            {
                continue;
            }
            match fs.lstat(&git).map(|m| m.kind) {
                // A `.git` file (worktree, submodule) names the git directory:
                // rewritten, it could name one the command made.
                Some(k @ (Kind::Dir | Kind::File)) => {
                    if k == Kind::File {
                        if let Some(l) = linked_git(fs, &git, &writable) {
                            linked.push((l, git.clone()));
                        }
                    }
                    if !git_ro {
                        continue;
                    }
                    // `git status` here recurses into each checked-out
                    // submodule, through the `.git` in its working tree.
                    {
                        // Checked out ones from `.git/modules` (read-only);
                        // those not checked out yet from `.gitmodules`, as
                        // git status recurses into one once it has a `.git`.
                        let mut trees = if k == Kind::Dir {
                            submodule_trees(fs, &git)
                        } else {
                            Vec::new()
                        };
                        if let Some(top) = git.parent() {
                            trees.extend(gitmodules_paths(fs, top));
                        }
                        for tree in trees {
                            let sub = tree.join(".git");
                            if !writable.iter().any(|w| paths::is_under(&sub, w))
                                || candidates.contains(&sub)
                            {
                                continue;
                            }
                            match redirectable_link(fs, &sub, &writable) {
                                Some(link) => notes.push(format!(
                                    "{} (a submodule of {}) is reached through {}, which is a symlink and stays writable: the command could point it at a git directory of its own, which git status on the host would use",
                                    sub.display(),
                                    git.display(),
                                    link.display()
                                )),
                                None => candidates.push(sub),
                            }
                        }
                    }
                    notes.push(format!(
                        "{} is read-only: git runs its hooks and config on the host; git commands that write it (commit, add, checkout) fail with EROFS; --git rw makes it writable",
                        git.display()
                    ));
                    roots.push(RoRoot {
                        path: git,
                        try_: true,
                    })
                }
                // Nothing to mount over: a repository the command makes here
                // would be the host's problem after the run, so it is looked
                // for then (runner::git_created).
                None if git_ro => match git.parent() {
                    // Already a git directory (a bare repository): nothing
                    // of it can be held apart from the rest.
                    Some(dir)
                        if fs.lstat(&dir.join("HEAD")).is_some()
                            && fs.lstat(&dir.join("objects")).is_some() =>
                    {
                        notes.push(format!(
                        "{} is a git directory (HEAD, objects/): its hooks and config stay writable, and git used there on the host runs them",
                        dir.display()
                    ))
                    }
                    _ => git_absent.push(git),
                },
                Some(Kind::Symlink) if git_ro => notes.push(format!(
                    "{} is a symlink and stays writable: the command could point it at a git directory of its own, whose hooks and config would run when git is used here on the host; replace the link with a `.git` file holding `gitdir: TARGET`, which is mounted read-only",
                    git.display()
                )),
                _ => {}
            }
        }
        // The git directory a `.git` file names (a linked worktree's, a
        // submodule's) and the common one it shares are read-only too: in a
        // writable path they would be as open as `.git` itself. One that no
        // mount shows stays unmounted: the `.git` file and whatever it names
        // may have been written by a command in an earlier run (with another
        // workspace), so they never widen what a run sees; the caller can
        // name it with `--ro`.
        for (l, file) in linked {
            if let Some(link) = &l.link {
                if git_ro {
                    notes.push(format!(
                        "{} reaches its git directory through {}, which is a symlink and stays writable: the command could point it at a git directory of its own, whose hooks and config would run when git is used here on the host; write the real path into {}",
                        file.display(),
                        link.display(),
                        file.display()
                    ));
                }
            }
            for d in l.common.into_iter().chain([l.gitdir]) {
                let in_writable = writable.iter().any(|w| paths::is_under(&d, w));
                // Named writable by the caller (`--rw MAIN/.git`): theirs.
                if roots.iter().any(|r| paths::is_under(&d, &r.path))
                    || writable.iter().any(|w| paths::is_under(w, &d))
                    || (in_writable && !git_ro)
                {
                    continue;
                }
                if !in_writable {
                    notes.push(format!(
                        "{} names {}, which is not mounted, so git will not find the repository: if this is your worktree, pass --ro {} (and --git rw --rw {} to commit)",
                        file.display(),
                        d.display(),
                        d.display(),
                        d.display()
                    ));
                    continue;
                }
                notes.push(format!(
                    "{} (named by {}) is read-only: git runs its hooks and config on the host",
                    d.display(),
                    file.display()
                ));
                roots.push(RoRoot {
                    path: d,
                    try_: true,
                });
            }
        }
    }
    if ws_access == WorkspaceAccess::Ro {
        roots.push(RoRoot {
            path: ws.clone(),
            try_: false,
        });
    }

    let mut ro_ops: Vec<Op> = Vec::new(); // stage 1
    let mut ro_nested: Vec<Op> = Vec::new(); // stage 4a
    let mut rules: Vec<Rule> = Vec::new();
    for r in &roots {
        let Some(meta) = fs.lstat(&r.path) else {
            if r.try_ {
                continue;
            }
            return Err(Error::path(&r.path, "read-only path does not exist"));
        };
        let top_level = r.path.parent() == Some(Path::new("/"));
        let op = if meta.kind == Kind::Symlink && top_level {
            // usr-merge links (/bin -> usr/bin): recreate the link, do not bind
            // the target a second time.
            let target = fs
                .read_link(&r.path)
                .map_err(|e| Error::path(&r.path, e.to_string()))?;
            Op::Symlink {
                target,
                link: r.path.clone(),
            }
        } else {
            let real = paths::resolve_readonly(fs, &r.path)?
                .ok_or_else(|| Error::path(&r.path, "does not exist"))?;
            if let Some(link) = redirectable_link(fs, &r.path, &writable) {
                return Err(Error::path(
                    &r.path,
                    format!(
                        "is reached through the symlink {}, inside a writable path: the command could point it elsewhere; name the real path {}",
                        link.display(),
                        real.display()
                    ),
                ));
            }
            if sensitive(&real, &all_creds) && !shown(&real, &profile.show) {
                return Err(Error::path(
                    &r.path,
                    format!("resolves to hidden path {}", real.display()),
                ));
            }
            Op::RoBind {
                path: real,
                try_: r.try_,
            }
        };
        if ro_ops.contains(&op) || ro_nested.contains(&op) {
            continue;
        }
        if let Op::RoBind { path, try_ } = &op {
            // execute implies read: running a program means reading it.
            // (Its identity is set once the mounts are final, below.)
            rules.push(Rule {
                path: path.clone(),
                access: "execute",
                optional: *try_,
                identity: None,
            });
            if writable
                .iter()
                .any(|w| paths::is_under(path, w) && !paths::same(w, path))
            {
                ro_nested.push(op);
                continue;
            }
        }
        ro_ops.push(op);
    }

    // Scratch and synthetic filesystems. Read-only roots beneath one of them
    // (e.g. `--ro /tmp/x`) must be mounted after it, or the tmpfs would cover them.
    let mut scratch_dirs: Vec<PathBuf> = vec!["/tmp".into(), profile.home.clone()];
    scratch_dirs.extend(profile.tmpfs.iter().cloned());
    let (under_scratch, plain): (Vec<Op>, Vec<Op>) = ro_ops.into_iter().partition(|o| {
        matches!(o, Op::RoBind { .. })
            && scratch_dirs
                .iter()
                .any(|d| !paths::same(o.dest(), d) && paths::is_under(o.dest(), d))
    });
    // Parents before children (a stable sort): a read-only root inside
    // another one named later (`--ro WS/x` with a read-only workspace) would
    // be covered by it, and found missing by the helper's mount check.
    let mut ro_ops = plain;
    ro_ops.sort_by_key(|o| o.dest().components().count());
    let mut under_scratch = under_scratch;
    under_scratch.sort_by_key(|o| o.dest().components().count());
    ro_ops.push(Op::Dev);
    ro_ops.push(Op::Proc(host.proc));
    ro_ops.push(Op::Tmpfs("/tmp".into()));
    for t in &profile.tmpfs {
        paths::require_absolute_normal(t)?;
        if let Some(why) = paths::never_writable(t, &all_creds) {
            return Err(Error::path(t, why));
        }
        ro_ops.push(Op::Tmpfs(t.clone()));
    }
    paths::require_absolute_normal(&profile.home)?;
    if let Some(why) = paths::never_writable(&profile.home, &all_creds) {
        return Err(Error::path(&profile.home, why));
    }
    ro_ops.push(Op::Tmpfs(profile.home.clone()));
    ro_ops.extend(under_scratch);

    // --- uid ----------------------------------------------------------------------
    let (uid, gid, switch_to) = choose_uid(opts, host, fs, &ws)?;

    // --- masks --------------------------------------------------------------------
    // Files hidden only where the sandbox could read them: with the uid switch
    // the groups are cleared, else the caller's carry over.
    let groups: Option<&[u32]> = match switch_to {
        Some(_) => Some(&[]),
        None => host.groups.as_deref(),
    };
    let mut if_readable: Vec<PathBuf> = Vec::new();
    for p in &profile.hide_if_readable {
        // Hidden anyway when the profile or --hide names it: no note then.
        if profile
            .hide
            .iter()
            .chain(&opts.hide)
            .any(|h| paths::same(h, p))
        {
            continue;
        }
        // Two calls for a plain file or directory; anything else (a symlink)
        // is hidden like any other path, which resolves it.
        match fs.lstat(p) {
            None => {}
            Some(m)
                if matches!(m.kind, Kind::File | Kind::Dir)
                    && !paths::maybe_readable(&m, fs.has_acl(p), uid, gid, groups) =>
            {
                notes.push(format!(
                    "hide {}: not masked: uid {uid} (gid {gid}) cannot read it (mode {:o}, owner {}:{})",
                    p.display(),
                    m.mode,
                    m.uid,
                    m.gid
                ))
            }
            Some(_) => if_readable.push(p.clone()),
        }
    }
    // Each path once: `--hide X --hide X` is one mask.
    let mut explicit: Vec<&PathBuf> = Vec::new();
    for h in profile.hide.iter().chain(&opts.hide).chain(&if_readable) {
        if !explicit.iter().any(|e| paths::same(e, h)) {
            explicit.push(h);
        }
    }
    let creds: Vec<PathBuf> = all_creds
        .iter()
        .filter(|c| !shown(c, &profile.show))
        .cloned()
        .collect();
    let mut all_ops_for_view: Vec<Op> = ro_ops.clone();
    all_ops_for_view.extend(writable.iter().cloned().map(Op::Bind));
    all_ops_for_view.extend(ro_nested.iter().cloned());
    let mut masks_ro: Vec<Op> = Vec::new();
    let mut masks_rw: Vec<Op> = Vec::new();
    let mut deny: Vec<PathBuf> = Vec::new();
    for (h, is_explicit) in explicit
        .iter()
        .map(|p| (*p, true))
        .chain(creds.iter().map(|p| (p, false)))
    {
        let mask = paths::validate_mask(fs, h)?;
        if let Some(link) = redirectable_link(fs, h, &writable) {
            return Err(Error::path(
                h,
                format!(
                    "is reached through the symlink {}, inside a writable path: the command could point it elsewhere, and a later run would hide that instead; hide the real path by name, or keep the link out of writable paths",
                    link.display()
                ),
            ));
        }
        let (real, op) = match mask {
            Mask::Absent(p) => {
                if is_explicit {
                    notes.push(format!("hide {}: absent, nothing to hide", p.display()));
                }
                continue;
            }
            Mask::Dir(p) => (p.clone(), Op::MaskDir(p)),
            Mask::File(p) => (p.clone(), Op::MaskFile(p)),
        };
        for w in &writable {
            if paths::is_under(w, &real) {
                return Err(Error::path(
                    w,
                    format!(
                        "is inside hidden path {}; a writable bind would re-expose it",
                        real.display()
                    ),
                ));
            }
        }
        match provider(&all_ops_for_view, &real) {
            Some(p) if p.host_content() => {
                let nested = writable.iter().any(|w| paths::is_under(&real, w))
                    || ro_nested.iter().any(|n| paths::is_under(&real, n.dest()));
                deny.push(real.clone());
                if nested {
                    masks_rw.push(op);
                } else {
                    masks_ro.push(op);
                }
            }
            other => {
                if is_explicit {
                    // Under a fresh /proc, /dev, /tmp or HOME the path names
                    // the sandbox's own file, not the host's.
                    let why = match other {
                        Some(_) => "the sandbox has its own filesystem there, not the host's",
                        None => "not visible in the sandbox anyway",
                    };
                    notes.push(format!("hide {}: {why}", real.display()));
                }
            }
        }
    }
    dedup(&mut deny);

    for w in &writable {
        if matches!(fs.lstat(w).map(|m| m.kind), Some(Kind::Dir | Kind::File))
            && !fs.writable_by(w, uid, gid)
        {
            return Err(Error::Uid(format!(
                "the sandbox runs as uid {uid} (gid {gid}), which cannot write {}; chown it, or choose another uid with --uid",
                w.display()
            )));
        }
    }

    // --- assemble ops ---------------------------------------------------------------
    let mut ops = ro_ops;
    ops.extend(masks_ro);
    let mut nested = ro_nested;
    nested.extend(masks_rw);
    let pins = pins_for(&writable, &nested);
    // Writable binds sort with what is nested in them: one inside a
    // read-only path nested in another writable one (`--ro WS/m --rw
    // WS/m/n`) must come after it, or it is covered. First in the list, so
    // that a tie keeps them before what is nested at the same depth.
    nested.splice(0..0, writable.iter().cloned().map(Op::Bind));
    // Each pin is resolved again when bwrap mounts it: its rule carries the
    // identity seen here, so a directory swapped in meanwhile is refused by
    // the helper, as for the workspace.
    let pin_rules: Vec<Rule> = pins
        .iter()
        .map(|op| Rule {
            path: op.dest().to_path_buf(),
            access: match op {
                Op::Bind(_) => "readwriteexecute",
                _ => "execute",
            },
            optional: false,
            identity: fs.lstat(op.dest()).map(|m| m.id),
        })
        .collect();
    nested.extend(pins);
    // Parents before children (a stable sort: ties keep their order).
    nested.sort_by_key(|o| o.dest().components().count());
    ops.extend(nested);
    // The helper runs from the very fd that was hashed: through
    // /proc/self/fd when the sandbox has a /proc, else bound under /.cordon.
    // Its policy is read from an inherited fd either way (no mount needed).
    let helper_via_proc = host.proc != ProcStrategy::Tmpfs;
    if opts.layers == Layers::Both && !helper_via_proc {
        ops.push(Op::RoBindFd {
            fd: HELPER_FD,
            dest: HELPER_PATH,
        });
    }

    // --- cwd and command ------------------------------------------------------------------
    let cwd = match &opts.cwd {
        Some(c) => c.clone(),
        None => ws.clone(),
    };
    paths::require_absolute_normal(&cwd)?;
    check_visible_dir(&ops, fs, &cwd)?;

    // --- environment -------------------------------------------------------------------------
    let mut allow_inj: Vec<String> = profile.allow_injection.clone();
    allow_inj.extend(opts.allow_injection.iter().cloned());
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert(
        "PATH".into(),
        host.env
            .get("PATH")
            .cloned()
            .unwrap_or_else(|| policy::DEFAULT_PATH.into()),
    );
    env.insert("HOME".into(), s(&profile.home));
    let mut pass: Vec<&str> = policy::DEFAULT_ENV.to_vec();
    pass.extend(profile.env.iter().map(String::as_str));
    let mut env_set: BTreeMap<String, String> = profile.env_set.clone();
    for e in &opts.env {
        match e {
            EnvArg::Pass(n) => pass.push(n),
            EnvArg::Set(n, v) => {
                env_set.insert(n.clone(), v.clone());
            }
        }
    }
    for n in pass {
        policy::validate_env_name(n)?;
        policy::check_injection(n, &allow_inj)?;
        if n == "HOME" {
            continue; // always the synthetic HOME
        }
        if let Some(v) = host.env.get(n) {
            env.insert(n.into(), v.clone());
        }
    }
    if let Some(c) = cache_root {
        env_set.insert("XDG_CACHE_HOME".into(), s(&c.join("cache")));
        env_set.insert("XDG_STATE_HOME".into(), s(&c.join("state")));
    }
    for (n, v) in &env_set {
        policy::validate_env_name(n)?;
        policy::check_injection(n, &allow_inj)?;
        if v.contains('\0') {
            return Err(Error::Env(format!("{n}: value contains NUL")));
        }
    }
    if opts.layers == Layers::Outer {
        // No helper to carry them: values go into bwrap's environment, still never argv.
        env.extend(env_set.clone());
        env_set.clear();
    }
    let search_path = env_set
        .get("PATH")
        .or(env.get("PATH"))
        .cloned()
        .unwrap_or_default();
    resolve_command(&ops, fs, &opts.command[0], &cwd, &search_path)?;

    // --- helper policy ------------------------------------------------------------------------
    for op in &ops {
        match op {
            Op::Dev => rules.push(Rule {
                path: "/dev".into(),
                access: "readwrite",
                optional: false,
                identity: None,
            }),
            Op::Proc(_) => rules.push(Rule {
                path: "/proc".into(),
                access: "read",
                optional: false,
                identity: None,
            }),
            // Writable places are also executable: agents and CI jobs run
            // what they build (docs/policy.md: `execute` is no no-exec
            // guarantee anyway, the loader can run any readable file).
            Op::Tmpfs(p) => rules.push(Rule {
                path: p.clone(),
                access: "readwriteexecute",
                // The synthetic dirs exist only inside bwrap.
                optional: opts.layers == Layers::Inner,
                identity: None,
            }),
            // Writable roots only (pins lie beneath one). With the identity
            // planned here the helper refuses a path swapped between this
            // check and bwrap's mount (a symlink raced into its place).
            Op::Bind(p) if writable.iter().any(|w| paths::same(w, p)) => rules.push(Rule {
                path: p.clone(),
                access: "readwriteexecute",
                optional: false,
                identity: fs.lstat(p).map(|m| m.id),
            }),
            _ => {}
        }
    }
    rules.extend(pin_rules);
    // bwrap resolves each read-only root again when it mounts it: with the
    // identity seen here the helper refuses whatever a concurrent process
    // swapped in meanwhile (a symlink to a directory the caller can read but
    // the plan would have hidden). Not for a root that a later mount covers
    // (a tmpfs over /home, say): the rule then meets that mount.
    for r in rules.iter_mut().filter(|r| r.identity.is_none()) {
        let Some(i) = ops
            .iter()
            .position(|o| matches!(o, Op::RoBind { path, .. } if paths::same(path, &r.path)))
        else {
            continue;
        };
        if !ops[i + 1..]
            .iter()
            .any(|o| paths::is_under(&r.path, o.dest()))
        {
            r.identity = fs.lstat(&r.path).map(|m| m.id);
        }
    }
    let best_effort = opts.degrade_inner;
    let helper_user = if opts.layers == Layers::Inner && host.euid == 0 {
        Some((uid, gid))
    } else {
        None
    };
    // The default process limit only where it counts the sandbox alone:
    // with the helper alone it would count every process of the uid.
    let default_nproc = match profile.default_nproc {
        Some(n) if !profile.rlimits.contains_key("nproc") => match opts.layers {
            Layers::Both => Some(n),
            Layers::Inner => {
                notes.push(format!(
                    "no nproc limit ({n} by default): with the helper alone it would count every process of uid {uid}, not only the sandbox's"
                ));
                None
            }
            Layers::Outer => None,
        },
        _ => None,
    };
    // The mounts bwrap makes by a path some sandbox could rename on the way:
    // the helper checks each is a mount root holding what was planned
    // (helper/src/mounts.rs). A path below root-owned directories that only
    // root may write (/usr, /etc/shadow) cannot be swapped by any sandbox.
    // Only the last mount at each path is what the sandbox sees (a mask
    // over a `--ro` of the same path).
    let mounts: Vec<policy::MountCheck> = if opts.layers == Layers::Both {
        let last = |i: usize, d: &Path| !ops[i + 1..].iter().any(|o| o.dest() == d);
        ops.iter()
            .enumerate()
            .filter(|(i, op)| last(*i, op.dest()) && !root_held(fs, op.dest()))
            .filter_map(|(_, op)| {
                let (path, identity, ro) = match op {
                    Op::Bind(p) => (p, Some(fs.lstat(p)?.id), false),
                    Op::RoBind { path, .. } => (path, Some(fs.lstat(path)?.id), true),
                    Op::MaskDir(p) | Op::MaskFile(p) => (p, None, true),
                    _ => return None,
                };
                Some(policy::MountCheck {
                    path: path.clone(),
                    identity,
                    ro,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let helper_policy = (opts.layers != Layers::Outer).then(|| {
        policy::helper_policy(&policy::HelperPolicyInput {
            mounts,
            rules,
            deny,
            // Every deny path has a mask among the ops when bwrap runs.
            deny_masked: opts.layers == Layers::Both,
            network: opts.network.unwrap_or(profile.network),
            best_effort,
            profile,
            env_set: env_set.clone(),
            allow_injection: allow_inj.clone(),
            user: helper_user,
            default_nproc,
        })
    });

    // --- argv -------------------------------------------------------------------------------
    let network = opts.network.unwrap_or(profile.network);
    let mut fds: Vec<(i32, FdRole)> = Vec::new();
    let inner = inner_argv(opts.layers, helper_via_proc, &opts.command);
    if opts.layers != Layers::Outer {
        fds.extend([
            (REPORT_FD, FdRole::Report),
            (POLICY_FD, FdRole::Policy),
            (HELPER_FD, FdRole::Helper),
        ]);
    }

    let mut bwrap_argv: Vec<String> = Vec::new();
    let mut mounts = 0;
    if opts.layers != Layers::Inner {
        fds.push((INFO_FD, FdRole::Info));
        let a = &mut bwrap_argv;
        a.push(s(&host.bwrap));
        a.push("--unshare-all".into());
        if network == Network::Host {
            a.push("--share-net".into());
        }
        for f in ALWAYS_FLAGS {
            a.push(f.into());
        }
        if opts.layers == Layers::Both {
            // No init of bwrap's own (a fork of bwrap, ≈ 0.6 ms of CPU):
            // the helper is pid 1 and the command's init (`--init`).
            a.push("--as-pid-1".into());
        }
        a.extend([
            "--uid".into(),
            uid.to_string(),
            "--gid".into(),
            gid.to_string(),
        ]);
        a.extend(["--info-fd".into(), INFO_FD.to_string()]);
        let tmpfs_bytes = match opts.tmpfs_size.or(profile.tmpfs_size) {
            Some(TmpfsSize::Bytes(b)) => Some(b),
            Some(TmpfsSize::Unlimited) => None,
            None => Some(default_tmpfs_size(host.mem_bytes)),
        };
        let sized = |a: &mut Vec<String>, p: &Path| {
            if let Some(b) = tmpfs_bytes {
                a.extend(["--size".into(), b.to_string()]);
            }
            a.extend(["--tmpfs".into(), s(p)]);
        };
        let mut next_empty = EMPTY_FD_FIRST;
        for op in &ops {
            mounts += 1;
            match op {
                Op::RoBind { path, try_ } => {
                    a.push(if *try_ { "--ro-bind-try" } else { "--ro-bind" }.into());
                    a.push(s(path));
                    a.push(s(path));
                }
                Op::Symlink { target, link } => {
                    a.extend(["--symlink".into(), s(target), s(link)]);
                }
                // bwrap's /dev is a tmpfs that cannot be sized: read-only,
                // with a sized tmpfs for the one place programs write there.
                Op::Dev => {
                    a.extend(["--dev".into(), "/dev".into()]);
                    sized(a, Path::new("/dev/shm"));
                    a.extend(["--remount-ro".into(), "/dev".into()]);
                    mounts += 2;
                }
                Op::Proc(ProcStrategy::Fresh) => a.extend(["--proc".into(), "/proc".into()]),
                Op::Proc(ProcStrategy::BindRo) => {
                    a.extend(["--ro-bind".into(), "/proc".into(), "/proc".into()])
                }
                Op::Proc(ProcStrategy::Tmpfs) => a.extend(["--tmpfs".into(), "/proc".into()]),
                Op::Tmpfs(p) => sized(a, p),
                // Empty and read-only: a mask holds nothing and takes nothing.
                Op::MaskDir(p) => {
                    a.extend(["--tmpfs".into(), s(p), "--remount-ro".into(), s(p)]);
                    mounts += 1;
                }
                Op::MaskFile(p) => {
                    a.extend(["--ro-bind-data".into(), next_empty.to_string(), s(p)]);
                    fds.push((next_empty, FdRole::Empty));
                    next_empty += 1;
                }
                Op::Bind(p) => a.extend(["--bind".into(), s(p), s(p)]),
                Op::RoBindFd { fd, dest } => {
                    a.extend(["--ro-bind-fd".into(), fd.to_string(), (*dest).into()])
                }
            }
        }
        // The sandbox's root is bwrap's tmpfs, owned by the sandbox uid:
        // read-only once every mount point in it exists.
        a.extend(["--remount-ro".into(), "/".into()]);
        mounts += 1;
        a.extend(["--chdir".into(), s(&cwd), "--".into()]);
        a.extend(inner.iter().cloned());
    }
    fds.sort_by_key(|f| f.0);

    let mut degraded = Vec::new();
    if host.proc == ProcStrategy::Tmpfs {
        degraded.push("/proc is an empty tmpfs".to_string());
    }
    notes.extend(degraded);

    Ok(Plan {
        layers: opts.layers,
        bwrap_argv,
        inner_argv: inner,
        helper_policy,
        env: env.into_iter().collect(),
        fds,
        uid,
        gid,
        switch_to,
        cwd,
        timeout: opts.timeout.or(profile.timeout),
        network,
        proc: host.proc,
        profile: profile.name.clone(),
        mounts,
        best_effort_inner: best_effort,
        notes,
        git_absent,
    })
}

fn dedup(v: &mut Vec<PathBuf>) {
    let mut seen = Vec::new();
    v.retain(|p| {
        if seen.contains(p) {
            false
        } else {
            seen.push(p.clone());
            true
        }
    });
}

pub type UidGid = (u32, u32);

/// uid/gid for the sandbox, and whether the launcher must switch to it first.
fn choose_uid(
    opts: &Options,
    host: &Host,
    fs: &dyn Fs,
    ws: &Path,
) -> Result<(u32, u32, Option<UidGid>)> {
    if host.euid != 0 {
        // Unprivileged: bwrap maps only our own uid, so the sandbox runs as us.
        if let Some(u) = opts.uid {
            if u != host.euid {
                return Err(Error::Uid(format!(
                    "--uid {u} needs the launcher to run as root (running as uid {})",
                    host.euid
                )));
            }
        }
        return Ok((host.euid, host.egid, None));
    }
    // Root: never run the command as host uid 0 (uid 0 without capabilities can
    // still write root-owned files such as /proc/sys/kernel/core_pattern).
    let uid = match opts.uid {
        Some(0) => {
            return Err(Error::Uid(
                "--uid 0 refused: the sandbox never runs as host root".into(),
            ))
        }
        Some(u) => u,
        None => match fs.lstat(ws) {
            Some(m) if m.uid != 0 => m.uid,
            _ => NOBODY,
        },
    };
    let gid = (host.gid_of)(uid).unwrap_or(uid);
    if gid == 0 {
        return Err(Error::Uid(format!("uid {uid} has primary gid 0; refused")));
    }
    if opts.layers == Layers::Inner {
        // The helper switches users itself (it needs CAP_SETUID, which root has).
        return Ok((uid, gid, None));
    }
    Ok((uid, gid, Some((uid, gid))))
}

/// The directory must be visible inside: provided by a mount, not hidden.
fn check_visible_dir(ops: &[Op], fs: &dyn Fs, d: &Path) -> Result<()> {
    let visible = match provider(ops, d) {
        None => false,
        Some(Op::MaskDir(_) | Op::MaskFile(_)) => false,
        Some(op) if op.host_content() => {
            fs.canonicalize(d).ok().as_deref() == Some(d)
                && fs.lstat(d).map(|m| m.kind) == Some(Kind::Dir)
        }
        // Synthetic filesystems are empty: only their root exists.
        Some(op) => op.dest() == d,
    };
    if visible {
        Ok(())
    } else {
        Err(Error::path(
            d,
            "working directory is not visible in the sandbox (not under the workspace or any mounted path, or hidden); use --cwd inside the workspace or add it with --ro/--rw",
        ))
    }
}

/// The mode of what `p` names in the sandbox, if it is there (0: a
/// directory, which exists but cannot be executed).
fn visible_file(ops: &[Op], fs: &dyn Fs, p: &Path) -> Option<u32> {
    let real = fs.canonicalize(p).ok()?;
    match provider(ops, &real) {
        Some(op) if op.host_content() => {}
        _ => return None,
    }
    let m = fs.lstat(&real)?;
    Some(if m.kind == Kind::Dir { 0 } else { m.mode })
}

/// Find the command the way the helper will (PATH search for names without '/'),
/// so "not found" / "not executable" are reported as 127 / 126 before anything runs.
fn resolve_command(ops: &[Op], fs: &dyn Fs, cmd: &str, cwd: &Path, path: &str) -> Result<()> {
    let check = |p: &Path| -> Option<Result<()>> {
        let mode = visible_file(ops, fs, p)?;
        Some(if mode & 0o111 != 0 {
            Ok(())
        } else {
            Err(Error::CommandNotExecutable(p.display().to_string()))
        })
    };
    if cmd.contains('/') {
        let p = cwd.join(cmd);
        return check(&p).unwrap_or_else(|| {
            Err(Error::CommandNotFound(format!(
                "{cmd} (not present in the sandbox)"
            )))
        });
    }
    let mut first_err = None;
    for dir in path.split(':').filter(|d| d.starts_with('/')) {
        match check(&Path::new(dir).join(cmd)) {
            Some(Ok(())) => return Ok(()),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    Err(first_err.unwrap_or_else(|| {
        Error::CommandNotFound(format!("{cmd} (not in the sandbox's PATH={path})"))
    }))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
