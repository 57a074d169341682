//! Landlock: plan the path rules (opening every rule path and expanding
//! parents of denied paths) before anything is applied, then restrict self.

use crate::error::{Error, Result};
use crate::policy::{Access, AllowRule, Compat, Policy, Ports};
use crate::sys;
use landlock::{
    AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use serde_json::{json, Value};
use std::os::fd::{IntoRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// The ABI this helper was written and tested against. Rights are derived
/// from it, never from whatever the running kernel reports, so the same
/// policy means the same thing everywhere; newer kernels enforce exactly this.
pub const TARGET_ABI: ABI = ABI::V7;
pub const TARGET_ABI_NUM: u8 = 7;

const FILE_RIGHTS: [AccessFs; 5] = [
    AccessFs::Execute,
    AccessFs::WriteFile,
    AccessFs::ReadFile,
    AccessFs::Truncate,
    AccessFs::IoctlDev,
];

/// Rights for one access level (docs/policy.md has the table).
pub fn rights(access: Access, is_dir: bool) -> BitFlags<AccessFs> {
    let mut r = BitFlags::empty();
    if access.reads() {
        r |= AccessFs::ReadFile | AccessFs::ReadDir;
    }
    if access.writes() {
        r |= AccessFs::WriteFile
            | AccessFs::Truncate
            | AccessFs::IoctlDev
            | AccessFs::RemoveDir
            | AccessFs::RemoveFile
            | AccessFs::MakeDir
            | AccessFs::MakeReg
            | AccessFs::MakeSock
            | AccessFs::MakeFifo
            | AccessFs::MakeSym
            | AccessFs::Refer;
    }
    if access.executes() {
        r |= AccessFs::Execute | AccessFs::ReadFile | AccessFs::ReadDir;
    }
    if !is_dir {
        // The kernel rejects directory rights on a file.
        r &= FILE_RIGHTS.iter().fold(BitFlags::empty(), |a, f| a | *f);
    }
    r
}

pub fn fs_right_name(a: AccessFs) -> &'static str {
    match a {
        AccessFs::Execute => "execute",
        AccessFs::WriteFile => "write_file",
        AccessFs::ReadFile => "read_file",
        AccessFs::ReadDir => "read_dir",
        AccessFs::RemoveDir => "remove_dir",
        AccessFs::RemoveFile => "remove_file",
        AccessFs::MakeChar => "make_char",
        AccessFs::MakeDir => "make_dir",
        AccessFs::MakeReg => "make_reg",
        AccessFs::MakeSock => "make_sock",
        AccessFs::MakeFifo => "make_fifo",
        AccessFs::MakeBlock => "make_block",
        AccessFs::MakeSym => "make_sym",
        AccessFs::Refer => "refer",
        AccessFs::Truncate => "truncate",
        AccessFs::IoctlDev => "ioctl_dev",
        _ => "unknown",
    }
}

fn fs_names(f: BitFlags<AccessFs>) -> Vec<&'static str> {
    f.iter().map(fs_right_name).collect()
}

fn net_names(f: BitFlags<AccessNet>) -> Vec<&'static str> {
    f.iter().map(net_name).collect()
}

fn scope_names(f: BitFlags<Scope>) -> Vec<&'static str> {
    f.iter().map(scope_name).collect()
}

fn net_name(a: AccessNet) -> &'static str {
    match a {
        AccessNet::BindTcp => "bind_tcp",
        AccessNet::ConnectTcp => "connect_tcp",
        _ => "unknown",
    }
}

fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::AbstractUnixSocket => "abstract_unix_socket",
        Scope::Signal => "signal",
        _ => "unknown",
    }
}

/// One planned path rule, kept only for `--explain`.
pub struct PathRule {
    pub path: PathBuf,
    pub is_dir: bool,
    pub access: Access,
    pub rights: BitFlags<AccessFs>,
    /// Which policy entry produced it.
    pub origin: Origin,
}

/// Where a rule came from, named only when `--explain` asks (a name per rule
/// is ~1 µs, noticeable at 1 000 rules).
#[derive(Debug, Clone)]
pub enum Origin {
    /// `filesystem.allow[N]`.
    Allow(usize),
    /// A child of a directory expanded around a denied path; shared, since
    /// one expansion can yield hundreds of rules.
    Expanded(std::rc::Rc<str>),
}

impl Origin {
    pub fn name(&self) -> String {
        match self {
            Origin::Allow(i) => format!("filesystem.allow[{i}]"),
            Origin::Expanded(from) => format!("expanded from {from}"),
        }
    }
}

pub struct Plan {
    /// The rules, listed only for `--explain` ([`Mode::Explain`]).
    pub rules: Vec<PathRule>,
    /// How many path rules the plan holds (listed or added).
    pub path_rules: usize,
    pub skipped_optional: Vec<PathBuf>,
    pub handled_fs: BitFlags<AccessFs>,
    pub handled_net: BitFlags<AccessNet>,
    pub scopes: BitFlags<Scope>,
    pub bind_ports: Vec<u16>,
    pub connect_ports: Vec<u16>,
    pub compat: Compat,
    pub min_abi: Option<u8>,
    /// Each `filesystem.deny` path and what enforces it: "landlock" (carved
    /// out of its allowed parent) or "outer_mask" (a verified empty mount).
    pub denies: Vec<(PathBuf, &'static str)>,
    kernel_abi: i32,
    /// The ruleset the path rules were added to while planning
    /// ([`Mode::Enforce`]); an error creating it is reported by [`apply`],
    /// after the compatibility checks, as if it had been created there.
    ruleset: Option<Result<RulesetCreated>>,
}

/// What planning is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Add each rule to a ruleset as soon as its path is open and checked,
    /// then close the path with its batch (`CLOSE_BATCH`), so any number
    /// of rules fits under RLIMIT_NOFILE (a ruleset has no effect until
    /// `restrict_self`, so this is still before any side effect).
    Enforce,
    /// List the rules (`--explain`); nothing is created.
    Explain,
    /// Only check that planning succeeds (`--check`).
    Check,
}

/// Where planned rules go: the ruleset, the listing, or nowhere.
struct Sink {
    mode: Mode,
    /// A duplicate of the ruleset's fd (None: Landlock is unsupported and
    /// best effort leaves the ruleset empty, as the crate does).
    ruleset_fd: Option<OwnedFd>,
    /// The rights this kernel handles, to narrow each rule as the crate
    /// would (hard_requirement fails in `apply` if anything is missing).
    handled: BitFlags<AccessFs>,
    count: usize,
    listed: Vec<PathRule>,
    /// Rule fds already added, closed [`CLOSE_BATCH`] at a time.
    added: Vec<RawFd>,
}

/// Rule fds are closed this many at a time, a `close_range` per run of
/// consecutive numbers: a few system calls instead of 32 (≈ −0.3 ms at
/// 1 000 rules here). Few enough that the
/// fd table keeps its initial 64 slots, and an open that meets
/// RLIMIT_NOFILE first closes the batch and tries again.
const CLOSE_BATCH: usize = 32;

impl Drop for Sink {
    fn drop(&mut self) {
        self.close_added();
    }
}

impl Sink {
    fn close_added(&mut self) {
        // One close_range per run of consecutive numbers: new fds take the
        // lowest free numbers, so a batch is a few runs around the fds held
        // meanwhile (the ruleset's, a rule's directory).
        self.added.sort_unstable();
        let mut rest = &self.added[..];
        while let Some(&lo) = rest.first() {
            let n = rest
                .iter()
                .enumerate()
                .take_while(|(i, fd)| **fd == lo + *i as RawFd)
                .count();
            let hi = rest[n - 1];
            if sys::close_range(lo as u32, hi as u32).is_err() {
                rest[..n].iter().for_each(|fd| sys::close(*fd));
            }
            rest = &rest[n..];
        }
        self.added.clear();
    }

    /// `open`, once more after closing the batch if the fd limit was met.
    fn open(
        &mut self,
        mut open: impl FnMut() -> std::io::Result<OwnedFd>,
    ) -> std::io::Result<OwnedFd> {
        match open() {
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) && !self.added.is_empty() => {
                self.close_added();
                open()
            }
            r => r,
        }
    }

    /// `is_dir` may be unknown (`None`) only in [`Mode::Enforce`]: the rule
    /// is then added with the directory's rights and, if the kernel answers
    /// EINVAL, again with the file's. The kernel refuses directory rights on
    /// anything but a directory with EINVAL, and nothing else in this call
    /// can give EINVAL: the rights are masked to what the ruleset handles,
    /// the flags are 0 and an empty set is never sent (it gives ENOMSG).
    /// That saves an `fstat` per rule.
    fn push(
        &mut self,
        path: impl FnOnce() -> PathBuf,
        fd: OwnedFd,
        is_dir: Option<bool>,
        access: Access,
        origin: impl FnOnce() -> Origin,
    ) -> Result<()> {
        self.count += 1;
        match self.mode {
            Mode::Enforce => {
                let Some(rs) = &self.ruleset_fd else {
                    return Ok(());
                };
                let add = |rights: BitFlags<AccessFs>| {
                    let access = rights & self.handled;
                    if access.is_empty() {
                        return Ok(());
                    }
                    sys::landlock_add_path_rule(rs, &fd, access.bits())
                };
                let res = match is_dir {
                    Some(d) => add(rights(access, d)),
                    None => match add(rights(access, true)) {
                        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                            add(rights(access, false))
                        }
                        other => other,
                    },
                };
                res.map_err(|e| {
                    Error::Landlock(format!("landlock rule on {}: {e}", path().display()))
                })?;
                // The rule holds its own reference: the fd is closed with
                // its batch.
                self.added.push(fd.into_raw_fd());
                if self.added.len() >= CLOSE_BATCH {
                    self.close_added();
                }
                Ok(())
            }
            Mode::Explain => {
                let is_dir = is_dir.unwrap_or(false);
                self.listed.push(PathRule {
                    path: path(),
                    rights: rights(access, is_dir),
                    is_dir,
                    access,
                    origin: origin(),
                });
                Ok(())
            }
            Mode::Check => Ok(()),
        }
    }
}

/// Whether `path` is covered by an empty mount, as an outer layer's mask
/// leaves it: on another filesystem than its parent directory, and holding
/// nothing (an empty regular file, /dev/null, or an empty directory).
/// Anything else, errors included, says no: the deny is then carved out with
/// Landlock as for an unmasked entry. What the command could do to remove the
/// mask later (umount, a new mount namespace) needs CAP_SYS_ADMIN, which step
/// 6 drops for good; a mount inherited into a new user namespace is locked.
/// Returns the mask's (st_dev, st_ino) when it is in place.
fn mask_in_place(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let parent = path.parent()?;
    let m = std::fs::symlink_metadata(path).ok()?;
    if m.dev() == std::fs::metadata(parent).ok()?.dev() {
        return None;
    }
    let t = m.file_type();
    let empty = if t.is_file() {
        m.len() == 0
    } else if t.is_char_device() {
        m.rdev() == libc::makedev(1, 3)
    } else if t.is_dir() {
        std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
    } else {
        false
    };
    empty.then(|| (m.dev(), m.ino()))
}

/// A path made absolute and free of symlinks where it exists, so that allow
/// and deny paths compare by component on what the kernel will resolve.
fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(name)) => canonical(parent).join(name),
        _ => p.to_path_buf(),
    }
}

/// The canonical path of an open rule fd: one readlink of /proc/self/fd/N
/// instead of one per path component; the component walk when /proc is
/// missing (an empty root) or the path was unlinked.
fn canonical_of(fd: &OwnedFd, path: &Path) -> PathBuf {
    use std::os::fd::AsRawFd;
    match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        Ok(p) if p.is_absolute() && !p.to_string_lossy().ends_with(" (deleted)") => p,
        _ => canonical(path),
    }
}

/// Replace an allowed directory by its children minus the denied ones,
/// recursing towards each denied path (Landlock cannot subtract).
fn expand(
    dir: &Path,
    access: Access,
    denies: &[PathBuf],
    origin: &str,
    out: &mut Sink,
) -> Result<()> {
    let list_err = |e: std::io::Error| {
        Error::Policy(format!(
            "{origin}: cannot list {} to carve out a denied path: {e}",
            dir.display()
        ))
    };
    let dir_fd = sys::open_path(dir, true).map_err(list_err)?;
    let entries = std::fs::read_dir(dir).map_err(list_err)?;
    let expanded = Origin::Expanded(origin.into());
    for ent in entries {
        let ent = ent.map_err(list_err)?;
        let name = ent.file_name();
        let child = dir.join(&name);
        if denies.contains(&child) {
            continue;
        }
        // Never follow: a symlink in the expanded directory must not re-grant
        // the denied target. (A rule on a symlink's own inode grants nothing.)
        // Opened relative to the directory: one component to look up.
        let fd = match out.open(|| sys::open_path_at(&dir_fd, &name, false)) {
            Ok(fd) => fd,
            // Raced away between readdir and open: nothing to grant.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => {
                return Err(Error::Policy(format!(
                    "{origin}: cannot open {}: {e}",
                    child.display()
                )))
            }
        };
        // readdir's d_type saves an fstat per entry; stat only when unknown.
        let is_dir = match ent.file_type() {
            Ok(t) => t.is_dir(),
            Err(_) => sys::is_dir(&fd).map_err(|e| {
                Error::Policy(format!("{origin}: cannot stat {}: {e}", child.display()))
            })?,
        };
        if is_dir && denies.iter().any(|d| d.starts_with(&child)) {
            drop(fd);
            expand(&child, access, denies, origin, out)?;
            continue;
        }
        out.push(|| child, fd, Some(is_dir), access, || expanded.clone())?;
    }
    Ok(())
}

/// A denied file with other hard links cannot be carved out: Landlock's
/// rules attach to inodes, so a rule on another name for it (a sibling in an
/// expanded directory, or any allowed file) grants it under every name,
/// the denied one included — and the other names reach its content anyway.
fn refuse_linked(i: usize, path: &Path, canon: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(canon) {
        Ok(m) if !m.is_dir() && m.nlink() > 1 => Err(Error::Policy(format!(
            "filesystem.deny[{i}]: {} has {} hard links, and Landlock grants by inode: its other names would still reach it (deny their directory instead, or remove the other links)",
            path.display(),
            m.nlink()
        ))),
        _ => Ok(()),
    }
}

/// A path's parent and last component, as `Path::parent` and
/// `Path::file_name` give them, split at the last `/` when that is exact (no
/// `//`, no `.` component, no trailing `/`): std's component parsing is most
/// of the user-space time per rule at 1 000 rules. Byte equality of two
/// parents split this way then means the same directory name.
fn split_parent(path: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    use std::os::unix::ffi::OsStrExt;
    let b = path.as_os_str().as_bytes();
    // One pass: where the last `/` is, and whether a component is empty or `.`.
    let mut last = None;
    let mut odd = b.first() != Some(&b'/');
    for (i, &c) in b.iter().enumerate() {
        if c == b'/' {
            if let Some(l) = last {
                odd |= i == l + 1 || (i == l + 2 && b[l + 1] == b'.');
            }
            last = Some(i);
        }
    }
    let Some(i) = last else {
        return Some((path.parent()?, path.file_name()?));
    };
    odd |= i + 1 == b.len() || &b[i + 1..] == b".";
    if odd {
        return Some((path.parent()?, path.file_name()?));
    }
    let name = &b[i + 1..];
    if name == b".." {
        return None; // Path::file_name is None for `..`
    }
    let parent = if i == 0 { &b[..1] } else { &b[..i] };
    Some((
        Path::new(std::ffi::OsStr::from_bytes(parent)),
        std::ffi::OsStr::from_bytes(name),
    ))
}

/// Open an allow path (`O_PATH`, symlinks followed). Rules listed one after
/// another in the same directory (a generated policy of many files) are
/// opened relative to that directory, kept open in `dir`: one component to
/// look up instead of the whole path, ≈ 0.3 µs a rule here. A path whose
/// parent cannot be opened as a directory is opened whole, so every error is
/// the one the whole path gives.
fn open_rule<'a>(
    path: &'a Path,
    next: Option<&Path>,
    dir: &mut Option<(&'a Path, OwnedFd)>,
) -> std::io::Result<OwnedFd> {
    let Some((parent, name)) = split_parent(path) else {
        return sys::open_path(path, true);
    };
    let same = |a: &Path, b: &Path| a.as_os_str() == b.as_os_str();
    if !dir.as_ref().is_some_and(|(d, _)| same(d, parent)) {
        *dir = None;
        // Not for top-level entries: their whole path is one component.
        if parent != Path::new("/")
            && next
                .and_then(split_parent)
                .is_some_and(|(p, _)| same(p, parent))
        {
            *dir = sys::open_dir_path(parent).ok().map(|fd| (parent, fd));
        }
    }
    match dir {
        Some((_, fd)) => sys::open_path_at(fd, name, true),
        None => sys::open_path(path, true),
    }
}

pub fn plan(p: &Policy, mode: Mode) -> Result<Plan> {
    let mut handled_net = BitFlags::empty();
    let mut bind_ports = Vec::new();
    let mut connect_ports = Vec::new();
    if let Ports::List(l) = &p.tcp_bind {
        handled_net |= AccessNet::BindTcp;
        bind_ports = l.clone();
    }
    if let Ports::List(l) = &p.tcp_connect {
        handled_net |= AccessNet::ConnectTcp;
        connect_ports = l.clone();
    }
    let mut scopes = BitFlags::empty();
    if p.scope_abstract_unix {
        scopes |= Scope::AbstractUnixSocket;
    }
    if p.scope_signal {
        scopes |= Scope::Signal;
    }
    let handled_fs: BitFlags<AccessFs> = landlock::Access::from_all(TARGET_ABI);
    let kernel_abi = sys::landlock_abi();
    let mut ruleset = None;
    let mut ruleset_fd = None;
    if mode == Mode::Enforce {
        let created = create_ruleset(p.compat, handled_fs, handled_net, scopes);
        if let Ok(c) = &created {
            ruleset_fd = Option::<OwnedFd>::from(c.try_clone().map_err(ll_err)?);
        }
        ruleset = Some(created);
    }
    let known: BitFlags<AccessFs> = landlock::Access::from_all(ABI::from(kernel_abi));
    let mut sink = Sink {
        mode,
        ruleset_fd,
        handled: handled_fs & known,
        count: 0,
        listed: Vec::new(),
        added: Vec::with_capacity(if mode == Mode::Enforce {
            CLOSE_BATCH
        } else {
            0
        }),
    };
    // Every deny is checked against the allow rules; only those not verified
    // as masked are carved out with Landlock, and paths are resolved only
    // when something has to be carved out.
    let mut denies = Vec::new();
    let mut deny_how = Vec::new();
    let mut masks: Vec<((u64, u64), &Path)> = Vec::new();
    for (i, d) in p.deny.iter().enumerate() {
        if let Some(id) = d.masked.then(|| mask_in_place(&d.path)).flatten() {
            masks.push((id, &d.path));
            deny_how.push((d.path.clone(), "outer_mask"));
        } else {
            let canon = canonical(&d.path);
            refuse_linked(i, &d.path, &canon)?;
            denies.push(canon.clone());
            deny_how.push((canon, "landlock"));
        }
    }
    let all_denies: Vec<PathBuf> = if denies.is_empty() {
        Vec::new()
    } else {
        denies
            .iter()
            .cloned()
            .chain(masks.iter().map(|(_, m)| canonical(m)))
            .collect()
    };
    // Explaining lists each rule's type; masks and carved-out denies compare
    // identities and types.
    let need_stat = mode == Mode::Explain || !masks.is_empty() || !denies.is_empty();
    let mut skipped_optional = Vec::new();
    let mut dir = None;
    for (
        i,
        AllowRule {
            path,
            access,
            optional,
            identity,
        },
    ) in p.allow.iter().enumerate()
    {
        let what = || format!("filesystem.allow[{i}]");
        let next = p.allow.get(i + 1).map(|r| r.path.as_path());
        let (fd, is_dir, id) = match sink.open(|| open_rule(path, next, &mut dir)) {
            // Nothing below needs the file's type or identity: the sink
            // learns the type from the kernel (`Sink::push`).
            Ok(fd) if !need_stat && identity.is_none() => (fd, None, (0, 0)),
            Ok(fd) => {
                let st = sys::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd)).map_err(|e| {
                    Error::Policy(format!("{}: cannot stat {}: {e}", what(), path.display()))
                })?;
                let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
                // The path must still be what the policy's writer planned:
                // a directory swapped for a symlink between its check and
                // the mount would otherwise be granted in its place.
                if let Some((d, n)) = *identity {
                    if (st.st_dev, st.st_ino) != (d, n) {
                        return Err(Error::Landlock(format!(
                            "{}.path: {} is not the file the policy names (device:inode {}:{}, expected {d}:{n}); it was replaced after the policy was written",
                            what(),
                            path.display(),
                            st.st_dev,
                            st.st_ino
                        )));
                    }
                }
                (fd, Some(is_dir), (st.st_dev, st.st_ino))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && *optional => {
                skipped_optional.push(path.clone());
                continue;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                return Err(Error::Policy(format!(
                    "{}.path: {} does not exist (mark the rule \"optional\": true if that is expected)",
                    what(),
                    path.display()
                )))
            }
            Err(e) => {
                return Err(Error::Policy(format!(
                    "{}.path: cannot open {}: {e}",
                    what(),
                    path.display()
                )))
            }
        };
        // With only verified masks no path needs resolving: a mask holds
        // nothing (checked above, before any allow path was opened), so an
        // allow path at or beneath one can only be the mask itself.
        if denies.is_empty() {
            if let Some((_, m)) = masks.iter().find(|(mid, _)| *mid == id) {
                return Err(Error::Policy(format!(
                    "{}.path: {} is at or beneath the denied path {}",
                    what(),
                    path.display(),
                    m.display()
                )));
            }
        } else {
            let canon = canonical_of(&fd, path);
            if let Some(d) = all_denies.iter().find(|d| canon.starts_with(d)) {
                return Err(Error::Policy(format!(
                    "{}.path: {} is at or beneath the denied path {}",
                    what(),
                    path.display(),
                    d.display()
                )));
            }
            let under: Vec<PathBuf> = denies
                .iter()
                .filter(|d| d.starts_with(&canon))
                .cloned()
                .collect();
            if !under.is_empty() && is_dir == Some(true) {
                drop(fd);
                expand(&canon, *access, &under, &what(), &mut sink)?;
                continue;
            }
        }
        sink.push(|| path.clone(), fd, is_dir, *access, || Origin::Allow(i))?;
    }
    Ok(Plan {
        rules: std::mem::take(&mut sink.listed),
        path_rules: sink.count,
        skipped_optional,
        handled_fs,
        handled_net,
        scopes,
        bind_ports,
        connect_ports,
        compat: p.compat,
        min_abi: p.min_abi,
        denies: deny_how,
        kernel_abi,
        ruleset,
    })
}

/// The ruleset handling everything the plan handles, through the crate (which
/// knows what each ABI supports and applies the compatibility level).
fn create_ruleset(
    compat: Compat,
    fs: BitFlags<AccessFs>,
    net: BitFlags<AccessNet>,
    scopes: BitFlags<Scope>,
) -> Result<RulesetCreated> {
    let level = match compat {
        Compat::BestEffort => CompatLevel::BestEffort,
        Compat::HardRequirement => CompatLevel::HardRequirement,
    };
    let mut rs = Ruleset::default()
        .set_compatibility(level)
        .handle_access(fs)
        .map_err(ll_err)?;
    if !net.is_empty() {
        rs = rs.handle_access(net).map_err(ll_err)?;
    }
    if !scopes.is_empty() {
        rs = rs.scope(scopes).map_err(ll_err)?;
    }
    rs.create().map_err(ll_err)
}

fn denies_json(d: &[(PathBuf, &'static str)]) -> Value {
    d.iter()
        .map(|(p, how)| json!({"path": p, "enforced_by": how}))
        .collect()
}

/// What Landlock actually applied, for the report.
pub struct Applied {
    pub status: &'static str,
    pub path_rules: usize,
    pub kernel_abi: i32,
    pub unenforced: Vec<String>,
}

impl Plan {
    /// Names of what was requested but the running kernel (ABI `kabi`)
    /// cannot enforce.
    pub fn unenforced(&self, kabi: i32) -> Vec<String> {
        let k = ABI::from(kabi);
        let mut out = Vec::new();
        if kabi <= 0 {
            out.push("landlock (not supported by this kernel)".to_string());
            return out;
        }
        let kfs: BitFlags<AccessFs> = landlock::Access::from_all(k);
        for f in (self.handled_fs & !kfs).iter() {
            out.push(format!("fs.{}", fs_right_name(f)));
        }
        if kabi < 4 {
            for f in self.handled_net.iter() {
                out.push(format!("net.{}", net_name(f)));
            }
        }
        if kabi < 6 {
            for s in self.scopes.iter() {
                out.push(format!("scope.{}", scope_name(s)));
            }
        }
        out
    }

    pub fn explain(&self) -> Value {
        json!({
            "target_abi": TARGET_ABI_NUM,
            "kernel_abi": sys::landlock_abi(),
            "handled_fs": fs_names(self.handled_fs),
            "handled_net": net_names(self.handled_net),
            "scoped": scope_names(self.scopes),
            "compat": match self.compat { Compat::BestEffort => "best_effort", Compat::HardRequirement => "hard_requirement" },
            "min_abi": self.min_abi,
            "rules": self.rules.iter().map(|r| json!({
                "path": r.path,
                "kind": if r.is_dir { "dir" } else { "file" },
                "access": r.access.name(),
                "rights": fs_names(r.rights),
                "origin": r.origin.name(),
            })).collect::<Vec<_>>(),
            "skipped_optional": self.skipped_optional,
            "deny": denies_json(&self.denies),
            "tcp_bind": self.bind_ports,
            "tcp_connect": self.connect_ports,
        })
    }

    pub fn report_json(&self, a: &Applied) -> Value {
        json!({
            "status": a.status,
            "abi": TARGET_ABI_NUM.min(a.kernel_abi.max(0) as u8),
            "kernel_abi": a.kernel_abi,
            "compat": match self.compat { Compat::BestEffort => "best_effort", Compat::HardRequirement => "hard_requirement" },
            "handled_fs": fs_names(self.handled_fs),
            "handled_net": net_names(self.handled_net),
            "scoped": scope_names(self.scopes),
            "path_rules": a.path_rules,
            "net_rules": self.bind_ports.len() + self.connect_ports.len(),
            "skipped_optional": self.skipped_optional,
            "deny": denies_json(&self.denies),
            "unenforced": a.unenforced,
        })
    }
}

fn ll_err(e: impl std::fmt::Display) -> Error {
    Error::Landlock(format!("landlock: {e}"))
}

/// Restrict the calling thread with the ruleset planned in [`Mode::Enforce`].
pub fn apply(plan: &mut Plan) -> Result<Applied> {
    let kabi = plan.kernel_abi;
    if let Some(min) = plan.min_abi {
        if kabi < i32::from(min) {
            return Err(Error::Landlock(format!(
                "the kernel's Landlock ABI is {kabi}, below landlock.minAbi {min} (needs a newer kernel with Landlock enabled in the lsm= boot parameter)"
            )));
        }
    }
    let unenforced = plan.unenforced(kabi);
    if !unenforced.is_empty() {
        match plan.compat {
            Compat::HardRequirement => {
                return Err(Error::Landlock(format!(
                    "landlock.compat is hard_requirement but the kernel (Landlock ABI {kabi}) cannot enforce: {}",
                    unenforced.join(", ")
                )))
            }
            Compat::BestEffort => eprintln!(
                "cordon-helper: warning: Landlock ABI {kabi} cannot enforce: {} (landlock.compat is best_effort)",
                unenforced.join(", ")
            ),
        }
    }
    let Some(created) = plan.ruleset.take() else {
        return Err(Error::Landlock(
            "landlock: internal error: the plan holds no ruleset (planned for --explain or --check)".into(),
        ));
    };
    // The path rules were added while planning.
    let mut created = created?;
    for port in &plan.bind_ports {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::BindTcp))
            .map_err(ll_err)?;
    }
    for port in &plan.connect_ports {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(ll_err)?;
    }
    let status = created.restrict_self().map_err(ll_err)?;
    let path_rules = plan.path_rules;
    let status = match status.ruleset {
        RulesetStatus::FullyEnforced => "fully_enforced",
        RulesetStatus::PartiallyEnforced => "partially_enforced",
        RulesetStatus::NotEnforced => "not_enforced",
    };
    if plan.compat == Compat::HardRequirement && status != "fully_enforced" {
        return Err(Error::Landlock(format!(
            "landlock ruleset is {status} but landlock.compat is hard_requirement"
        )));
    }
    Ok(Applied {
        status,
        path_rules,
        kernel_abi: kabi,
        unenforced,
    })
}

/// Under `--init` (init.rs): the ruleset with which the command's process
/// restricts itself once more, between its clone and its exec: the plan's
/// scopes alone, so its domain is nested in the init's. Scoped signals and
/// abstract sockets then stop at the init as they stop at bwrap's init
/// without `--init`: the command cannot signal, ptrace or connect to its
/// parent. Created here, before the clone, because the child may make raw
/// system calls only (`landlock_restrict_self`). None when the plan scopes
/// nothing or the kernel (ABI < 6) cannot scope (the report says so already).
pub fn scope_ruleset(plan: &Plan) -> Result<Option<OwnedFd>> {
    if plan.scopes.is_empty() || plan.kernel_abi < 6 {
        return Ok(None);
    }
    // Hard requirement: created only if every scope is enforced.
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(plan.scopes)
        .and_then(|r| r.create())
        .map_err(|e| {
            Error::Landlock(format!("landlock: scoping the command below its init: {e}"))
        })?;
    Ok(Option::<OwnedFd>::from(created))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_rules_get_only_file_rights() {
        let r = rights(Access::ReadWriteExecute, false);
        assert!(r.contains(AccessFs::WriteFile | AccessFs::Execute | AccessFs::ReadFile));
        assert!(!r.contains(AccessFs::ReadDir));
        assert!(!r.contains(AccessFs::MakeReg));
        let d = rights(Access::Read, true);
        assert_eq!(d, AccessFs::ReadFile | AccessFs::ReadDir);
        assert!(!rights(Access::ReadWrite, true).contains(AccessFs::MakeChar));
        assert!(!rights(Access::ReadWrite, true).contains(AccessFs::MakeBlock));
    }

    #[test]
    fn deny_expands_parent_without_the_denied_child() {
        let t = tempfile_dir();
        std::fs::create_dir_all(t.join("a/secret")).unwrap();
        std::fs::create_dir_all(t.join("a/ok")).unwrap();
        std::fs::write(t.join("a/file"), b"x").unwrap();
        std::fs::create_dir_all(t.join("b")).unwrap();
        let pol = crate::policy::parse(
            format!(
                r#"{{"filesystem":{{"allow":[{{"path":"{0}","access":"read"}}],"deny":["{0}/a/secret"]}}}}"#,
                t.display()
            )
            .as_bytes(),
        )
        .unwrap();
        let plan = plan(&pol, Mode::Explain).unwrap();
        let mut paths: Vec<String> = plan
            .rules
            .iter()
            .map(|r| r.path.strip_prefix(&t).unwrap().display().to_string())
            .collect();
        paths.sort();
        assert_eq!(paths, vec!["a/file", "a/ok", "b"]);
        std::fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn allow_beneath_deny_is_an_error_and_missing_paths_are_named() {
        let pol = crate::policy::parse(
            br#"{"filesystem":{"allow":[{"path":"/usr/bin","access":"read"}],"deny":["/usr"]}}"#,
        )
        .unwrap();
        let e = plan(&pol, Mode::Check).err().unwrap();
        assert!(e.to_string().contains("beneath the denied path"), "{e}");
        let pol = crate::policy::parse(
            br#"{"filesystem":{"allow":[{"path":"/no/such/dir","access":"read"}]}}"#,
        )
        .unwrap();
        let e = plan(&pol, Mode::Check).err().unwrap();
        assert_eq!(e.exit_code(), 70);
        assert!(e.to_string().contains("/no/such/dir does not exist"), "{e}");
        let pol = crate::policy::parse(
            br#"{"filesystem":{"allow":[{"path":"/no/such/dir","access":"read","optional":true}]}}"#,
        )
        .unwrap();
        assert_eq!(plan(&pol, Mode::Check).unwrap().skipped_optional.len(), 1);
    }

    /// Opening relative to a shared parent gives what opening the whole path
    /// gives: the same inode, symlinks followed, the same errors.
    #[test]
    fn rules_in_one_directory_open_as_whole_paths_do() {
        use std::os::unix::fs::MetadataExt;
        let t = tempfile_dir();
        std::fs::write(t.join("a"), b"x").unwrap();
        std::fs::create_dir(t.join("d")).unwrap();
        std::os::unix::fs::symlink(t.join("d"), t.join("link")).unwrap();
        std::fs::write(t.join("f"), b"").unwrap();
        let id = |fd: &OwnedFd| {
            let st = sys::fstat(std::os::fd::AsRawFd::as_raw_fd(fd)).unwrap();
            (st.st_dev, st.st_ino)
        };
        let paths: Vec<PathBuf> = ["a", "d", "link", "missing", "f/under"]
            .iter()
            .map(|n| t.join(n))
            .collect();
        let mut dir = None;
        for (i, p) in paths.iter().enumerate() {
            let next = paths.get(i + 1).map(|n| n.as_path());
            let got = open_rule(p, next, &mut dir);
            let whole = sys::open_path(p, true);
            match (got, whole) {
                (Ok(a), Ok(b)) => assert_eq!(id(&a), id(&b), "{}", p.display()),
                (Err(a), Err(b)) => {
                    assert_eq!(a.raw_os_error(), b.raw_os_error(), "{}", p.display())
                }
                (a, b) => panic!("{}: {a:?} vs {b:?}", p.display()),
            }
            if i < 3 {
                // The shared parent was opened once and used.
                assert!(dir.is_some(), "{}", p.display());
            }
        }
        let link = open_rule(&t.join("link"), None, &mut None).unwrap();
        assert_eq!(id(&link).1, std::fs::metadata(t.join("d")).unwrap().ino());
        std::fs::remove_dir_all(&t).unwrap();
    }

    /// The byte split agrees with std's `parent` and `file_name`.
    #[test]
    fn split_parent_agrees_with_std() {
        for p in [
            "/", "/a", "/a/b", "/a/b/", "/a//b", "/a/./b", "/a/.", "/a/..", "/..", "/a/../b",
            "a/b", "a", "", ".", "/a/b.c", "/a/.b", "//a", "/a/b//",
        ] {
            let p = Path::new(p);
            let std = p.parent().zip(p.file_name());
            assert_eq!(split_parent(p), std, "{}", p.display());
        }
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "cordon-ll-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
