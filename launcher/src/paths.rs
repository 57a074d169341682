//! Path validation. Every filesystem fact the planner needs goes through [`Fs`],
//! so the rules are unit-tested against a fake tree without privileges.

use crate::error::{Error, Result};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    /// `(st_dev, st_ino)`: which file this was when the plan looked.
    pub id: (u64, u64),
}

/// Filesystem facts (never follows the last symlink in `lstat`).
pub trait Fs {
    fn lstat(&self, p: &Path) -> Option<Meta>;
    /// As `lstat`, with the errno of a failure (ENOENT by default: the
    /// fake trees of the tests know no other).
    fn lstat_errno(&self, p: &Path) -> std::result::Result<Meta, i32> {
        self.lstat(p).ok_or(libc::ENOENT)
    }
    fn canonicalize(&self, p: &Path) -> io::Result<PathBuf>;
    fn read_link(&self, p: &Path) -> io::Result<PathBuf>;
    /// Entry names of a directory, sorted.
    fn read_dir(&self, p: &Path) -> io::Result<Vec<String>>;
    /// Does `p` carry a POSIX access ACL (which can grant more than its mode
    /// says)? True when that cannot be told.
    fn has_acl(&self, p: &Path) -> bool;
    /// At most `max` bytes from the start of the regular file `p`: never
    /// through a final symlink, never a FIFO or a device.
    fn read_head(&self, p: &Path, max: u64) -> io::Result<Vec<u8>>;
    /// May `uid` (with primary group `gid`) create files in directory `p`? Only
    /// the mode bits are considered (the sandbox has no capabilities).
    /// By the mode bits of its class: a directory needs write and search, a
    /// file write.
    fn writable_by(&self, p: &Path, uid: u32, gid: u32) -> bool {
        let Some(m) = self.lstat(p) else {
            return false;
        };
        let need = if m.kind == Kind::Dir { 0o3 } else { 0o2 };
        let class = if uid == m.uid {
            m.mode >> 6
        } else if gid == m.gid {
            m.mode >> 3
        } else {
            m.mode
        };
        class & need == need
    }
}

/// The real filesystem.
pub struct RealFs;

impl Fs for RealFs {
    fn lstat(&self, p: &Path) -> Option<Meta> {
        self.lstat_errno(p).ok()
    }
    fn lstat_errno(&self, p: &Path) -> std::result::Result<Meta, i32> {
        let m = std::fs::symlink_metadata(p).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let ft = m.file_type();
        let kind = if ft.is_symlink() {
            Kind::Symlink
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        Ok(Meta {
            kind,
            nlink: m.nlink(),
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode() & 0o7777,
            id: (m.dev(), m.ino()),
        })
    }
    fn canonicalize(&self, p: &Path) -> io::Result<PathBuf> {
        real_path(p)
    }
    fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(p)
    }
    fn read_head(&self, p: &Path, max: u64) -> io::Result<Vec<u8>> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        // O_NONBLOCK: opening a FIFO put in place after the lstat returns at
        // once, and the fstat below refuses it.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(p)?;
        if !f.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let mut v = Vec::new();
        f.take(max).read_to_end(&mut v)?;
        Ok(v)
    }
    fn read_dir(&self, p: &Path) -> io::Result<Vec<String>> {
        let mut v: Vec<String> = crate::sys::dir_names(p)?
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        v.sort();
        Ok(v)
    }
    fn has_acl(&self, p: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
            return true;
        };
        // SAFETY: both strings are NUL-terminated and outlive the call; a null
        // buffer of size 0 asks only for the attribute's size.
        let r = unsafe {
            libc::getxattr(
                c.as_ptr(),
                c"system.posix_acl_access".as_ptr(),
                std::ptr::null_mut(),
                0,
            )
        };
        if r >= 0 {
            return true;
        }
        // No such attribute, or no ACLs on this filesystem: the mode is all.
        !matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::ENODATA) | Some(libc::EOPNOTSUPP)
        )
    }
}

/// Could a process with `uid`, primary group `gid` and supplementary `groups`
/// (None: not known) and no capabilities read what `m` describes: a file's
/// content, or anything in a directory (read or search permission; a file
/// inside may be readable by name)? Errs towards yes: an ACL, or a group it
/// may be in, counts as readable.
pub fn maybe_readable(m: &Meta, acl: bool, uid: u32, gid: u32, groups: Option<&[u32]>) -> bool {
    let bits = if m.kind == Kind::Dir { 0o5 } else { 0o4 };
    if acl || m.mode & bits != 0 {
        return true;
    }
    if m.uid == uid {
        // The owner class applies alone, even when it grants less.
        return m.mode & (bits << 6) != 0;
    }
    let in_group = m.gid == gid
        || match groups {
            None => true,
            Some(g) => g.contains(&m.gid),
        };
    in_group && m.mode & (bits << 3) != 0
}

/// Memoizes another [`Fs`] while one plan is built: the planner asks about the
/// same paths many times (the workspace alone ten times), each answer a system
/// call. One consistent snapshot is also easier to reason about than answers
/// that could change between two questions.
pub struct CachedFs<'a> {
    inner: &'a dyn Fs,
    lstat: std::cell::RefCell<
        std::collections::HashMap<std::ffi::OsString, std::result::Result<Meta, i32>>,
    >,
    links: std::cell::RefCell<std::collections::HashMap<std::ffi::OsString, PathBuf>>,
    #[allow(clippy::type_complexity)]
    canon: std::cell::RefCell<
        std::collections::HashMap<
            std::ffi::OsString,
            std::result::Result<PathBuf, (Option<i32>, io::ErrorKind)>,
        >,
    >,
}

impl<'a> CachedFs<'a> {
    pub fn new(inner: &'a dyn Fs) -> Self {
        CachedFs {
            inner,
            // Sized for a plan's few dozen paths: no rehashing while planning.
            lstat: std::cell::RefCell::new(std::collections::HashMap::with_capacity(64)),
            links: std::cell::RefCell::new(std::collections::HashMap::with_capacity(16)),
            canon: std::cell::RefCell::new(std::collections::HashMap::with_capacity(32)),
        }
    }

    /// `p` resolved by walking its components through the cached `lstat` and
    /// `read_link`, as the kernel resolves a path: most components are
    /// already in the cache (the planner `lstat`s the same roots), so this
    /// costs a few `lstat`s where [`real_path`] costs an open, a readlink in
    /// /proc and a close per path, and in /proc a dentry per fd that
    /// lingers until the launcher exits. `Missing` when a component does not
    /// exist (its `lstat` said ENOENT: the kernel's lookup of the whole path
    /// stops there with ENOENT too, and asking it again cost an open per
    /// absent home on every run). `Ask` for anything else but a plain success
    /// (an unreadable component, a non-directory before the end, more than
    /// 40 links, a link in /proc, whose "magic" links are not paths): the
    /// kernel's answer, through `inner`, is then the one used, so every error
    /// is the kernel's.
    fn walk(&self, p: &Path) -> std::result::Result<PathBuf, Stop> {
        let bytes = p.as_os_str().as_encoded_bytes();
        // A trailing slash asks for a directory, which `components` forgets.
        if !p.is_absolute() || (bytes.len() > 1 && bytes.ends_with(b"/")) {
            return Err(Stop::Ask);
        }
        let mut out = PathBuf::from("/");
        // Components still to resolve, the next one last.
        let mut todo: Vec<std::ffi::OsString> = Vec::new();
        let push = |todo: &mut Vec<std::ffi::OsString>, q: &Path| {
            let at = todo.len();
            for c in q.components() {
                match c {
                    Component::Normal(n) => todo.insert(at, n.to_owned()),
                    Component::ParentDir => todo.insert(at, "..".into()),
                    Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                }
            }
        };
        push(&mut todo, p);
        let mut links = 0;
        while let Some(c) = todo.pop() {
            if c == ".." {
                // `out` has no symlink left in it: its parent is the physical one.
                out.pop();
                continue;
            }
            let next = out.join(&c);
            let kind = match self.lstat_errno(&next) {
                Ok(m) => m.kind,
                Err(libc::ENOENT) => return Err(Stop::Missing),
                Err(_) => return Err(Stop::Ask),
            };
            match kind {
                Kind::Dir => out = next,
                Kind::Symlink => {
                    links += 1;
                    if links > 40 || next.starts_with("/proc") {
                        return Err(Stop::Ask);
                    }
                    let target = self.read_link(&next).map_err(|_| Stop::Ask)?;
                    if target.is_absolute() {
                        out = PathBuf::from("/");
                    }
                    push(&mut todo, &target);
                }
                // Not a directory: only the last component may be one.
                Kind::File | Kind::Other if todo.is_empty() => out = next,
                Kind::File | Kind::Other => return Err(Stop::Ask),
            }
        }
        Ok(out)
    }
}

/// Why [`CachedFs`]'s walk stopped short of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// A component does not exist: ENOENT.
    Missing,
    /// Anything else: the kernel is asked.
    Ask,
}

impl Fs for CachedFs<'_> {
    fn lstat(&self, p: &Path) -> Option<Meta> {
        self.lstat_errno(p).ok()
    }
    fn lstat_errno(&self, p: &Path) -> std::result::Result<Meta, i32> {
        if let Some(m) = self.lstat.borrow().get(p.as_os_str()) {
            return *m;
        }
        let m = self.inner.lstat_errno(p);
        self.lstat.borrow_mut().insert(p.as_os_str().to_owned(), m);
        m
    }
    fn canonicalize(&self, p: &Path) -> io::Result<PathBuf> {
        let hit = self.canon.borrow().get(p.as_os_str()).cloned();
        let r = match hit {
            Some(r) => r,
            None => {
                let r = match self.walk(p) {
                    Ok(r) => Ok(r),
                    Err(Stop::Missing) => Err((Some(libc::ENOENT), io::ErrorKind::NotFound)),
                    Err(Stop::Ask) => self
                        .inner
                        .canonicalize(p)
                        .map_err(|e| (e.raw_os_error(), e.kind())),
                };
                self.canon
                    .borrow_mut()
                    .insert(p.as_os_str().to_owned(), r.clone());
                r
            }
        };
        r.map_err(|(errno, kind)| match errno {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::from(kind),
        })
    }
    fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
        if let Some(t) = self.links.borrow().get(p.as_os_str()) {
            return Ok(t.clone());
        }
        let t = self.inner.read_link(p)?;
        self.links
            .borrow_mut()
            .insert(p.as_os_str().to_owned(), t.clone());
        Ok(t)
    }
    fn read_dir(&self, p: &Path) -> io::Result<Vec<String>> {
        self.inner.read_dir(p)
    }
    fn has_acl(&self, p: &Path) -> bool {
        self.inner.has_acl(p)
    }
    fn read_head(&self, p: &Path, max: u64) -> io::Result<Vec<u8>> {
        self.inner.read_head(p, max)
    }
}

/// `p` with every symlink resolved, like `std::fs::canonicalize`, in three
/// system calls: open with O_PATH, read the fd's link in /proc, close. musl's
/// realpath instead reads the link of every prefix (a dozen calls for a PATH
/// entry, on every run) and allocates; it stays the fallback when /proc is
/// missing or the kernel's name is not a plain absolute path.
pub fn real_path(p: &Path) -> io::Result<PathBuf> {
    // Not OpenOptions: std masks O_PATH out of custom flags on musl (whose
    // O_ACCMODE includes it), which would open for reading: a FIFO would block.
    let f = crate::sys::open(p, libc::O_PATH)?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    match std::fs::read_link(format!("/proc/self/fd/{fd}")) {
        Ok(r) if r.is_absolute() && !r.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") => {
            Ok(r)
        }
        _ => std::fs::canonicalize(p),
    }
}

/// Is `p` equal to or beneath `root`? Compared by component: `/tmpfoo` is not under `/tmp`.
pub fn is_under(p: &Path, root: &Path) -> bool {
    // The plan asks this a few hundred times per run; std's component-wise
    // `starts_with` parses both paths each time (≈ 450 instructions a call).
    let (a, r) = (bytes(p), bytes(root));
    if differ_early(a, r) {
        return false;
    }
    if plain(a) && plain(r) {
        return r == b"/" || (a.starts_with(r) && matches!(a.get(r.len()), None | Some(b'/')));
    }
    p.starts_with(root)
}

/// The same path, compared by component as `==` on paths does (`/a//b` is
/// `/a/b`), with a byte comparison where that gives the same answer.
pub fn same(a: &Path, b: &Path) -> bool {
    let (x, y) = (bytes(a), bytes(b));
    if x == y {
        return true;
    }
    if differ_early(x, y) || (plain(x) && plain(y)) {
        return false;
    }
    a == b
}

fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_encoded_bytes()
}

/// Do two paths differ in a component before either ends, so that neither is
/// the other or beneath it? Decided from the first differing byte when
/// neither is `/` or `.`: then each lies in a real component (not empty, not
/// `.`), at the same place in both paths, because everything before it is
/// the same bytes, parsed the same way. False means "not decided here".
fn differ_early(a: &[u8], b: &[u8]) -> bool {
    let k = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    k < a.len().min(b.len()) && !matches!(a[k], b'/' | b'.') && !matches!(b[k], b'/' | b'.')
}

/// An absolute path that std's component iterator would not rewrite: no
/// empty (`//`, a trailing `/`) or `.` components. For two such paths,
/// comparing components is comparing bytes at `/` boundaries. (`..` is
/// kept as a component by std too, so it needs no special case.)
fn plain(b: &[u8]) -> bool {
    let n = b.len();
    if n == 0 || b[0] != b'/' {
        return false;
    }
    if n == 1 {
        return true;
    }
    if b[n - 1] == b'/' {
        return false;
    }
    for i in 0..n - 1 {
        if b[i] == b'/' {
            let c = b[i + 1];
            if c == b'/' || (c == b'.' && (i + 2 == n || b[i + 2] == b'/')) {
                return false;
            }
        }
    }
    true
}

/// Absolute, with no `.`/`..` components and no trailing oddities.
pub fn require_absolute_normal(p: &Path) -> Result<()> {
    if !p.is_absolute() {
        return Err(Error::path(p, "must be absolute"));
    }
    // In an absolute path std's components are never `.` (skipped), so this
    // is "no `..` component", checked on the bytes.
    if bytes(p).split(|&c| c == b'/').any(|c| c == b"..") {
        return Err(Error::path(p, "must not contain . or .. components"));
    }
    if p.to_str().is_none() {
        return Err(Error::path(p, "must be valid UTF-8"));
    }
    Ok(())
}

/// Paths that are never writable, and are hidden unless a profile shows them.
/// '/' matches only itself; the others match themselves and everything beneath.
pub const SYSTEM_SENSITIVE: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// Credential directories and files, relative to a home directory.
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".netrc",
];

/// Every credential path under each of `homes`.
pub fn credential_paths(homes: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for h in homes {
        for c in CREDENTIALS {
            let p = h.join(c);
            if !out.iter().any(|o| same(o, &p)) {
                out.push(p);
            }
        }
    }
    out
}

/// Is `p` a path that may never be writable?
/// `creds` is `credential_paths(homes)`, computed once per plan.
pub fn never_writable(p: &Path, creds: &[PathBuf]) -> Option<String> {
    if p == Path::new("/") {
        return Some("'/' is never writable".into());
    }
    for s in SYSTEM_SENSITIVE {
        if is_under(p, Path::new(s)) {
            return Some(format!("{s} is never writable"));
        }
    }
    for c in creds {
        if is_under(p, c) {
            return Some(format!("credential path {} is never writable", c.display()));
        }
    }
    if is_under(p, Path::new(crate::plan::CORDON_DIR)) {
        return Some(format!(
            "{} is reserved for cordon",
            crate::plan::CORDON_DIR
        ));
    }
    None
}

/// Validate a path to be bound read-write (or a zone root): absolute, canonical,
/// existing, not a symlink, real path not elsewhere, never a sensitive path.
pub fn validate_writable(fs: &dyn Fs, p: &Path, creds: &[PathBuf]) -> Result<PathBuf> {
    require_absolute_normal(p)?;
    let meta = fs
        .lstat(p)
        .ok_or_else(|| Error::path(p, "does not exist"))?;
    if meta.kind == Kind::Symlink {
        let target = fs
            .read_link(p)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        return Err(Error::path(
            p,
            format!("is a symlink (to {target}); a writable path must be its real path"),
        ));
    }
    let real = fs
        .canonicalize(p)
        .map_err(|e| Error::path(p, format!("cannot resolve: {e}")))?;
    if real != p {
        return Err(Error::path(
            p,
            format!(
                "resolves to {} through a symlink; pass the real path",
                real.display()
            ),
        ));
    }
    if meta.kind != Kind::Dir && meta.kind != Kind::File {
        return Err(Error::path(p, "must be a directory or a regular file"));
    }
    if meta.kind == Kind::File && meta.nlink > 1 {
        return Err(Error::path(p, "is a file with more than one hard link"));
    }
    if let Some(why) = never_writable(p, creds) {
        return Err(Error::path(p, why));
    }
    Ok(real)
}

/// Validate a read-only root: absolute; its real path is what gets bound.
/// Returns None when it does not exist (optional roots are skipped).
pub fn resolve_readonly(fs: &dyn Fs, p: &Path) -> Result<Option<PathBuf>> {
    require_absolute_normal(p)?;
    if fs.lstat(p).is_none() {
        return Ok(None);
    }
    let real = fs
        .canonicalize(p)
        .map_err(|e| Error::path(p, format!("cannot resolve: {e}")))?;
    Ok(Some(real))
}

/// What to do about a path to hide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mask {
    /// A directory: cover with an empty tmpfs.
    Dir(PathBuf),
    /// A file (or other non-directory): cover with an empty read-only file.
    File(PathBuf),
    /// Absent: nothing to hide (and bwrap could not create a mount point under a
    /// read-only parent anyway).
    Absent(PathBuf),
}

/// Validate a path to hide. A file with several hard links is refused: its
/// content stays reachable through the other names.
pub fn validate_mask(fs: &dyn Fs, p: &Path) -> Result<Mask> {
    require_absolute_normal(p)?;
    let Some(meta) = fs.lstat(p) else {
        return Ok(Mask::Absent(p.to_path_buf()));
    };
    // Hide what the name leads to: masking a symlink itself would leave the
    // target visible under its real name.
    let (real, meta) = if meta.kind == Kind::Symlink {
        match fs.canonicalize(p) {
            Ok(r) => {
                let m = fs
                    .lstat(&r)
                    .ok_or_else(|| Error::path(p, "target vanished"))?;
                (r, m)
            }
            // Dangling symlink: nothing behind it to hide.
            Err(_) => return Ok(Mask::Absent(p.to_path_buf())),
        }
    } else {
        let r = fs
            .canonicalize(p)
            .map_err(|e| Error::path(p, format!("cannot resolve: {e}")))?;
        (r, meta)
    };
    match meta.kind {
        Kind::Dir => Ok(Mask::Dir(real)),
        _ if meta.nlink > 1 => Err(Error::path(
            p,
            format!(
                "cannot be hidden: it has {} hard links, so its content stays reachable through another name",
                meta.nlink
            ),
        )),
        _ => Ok(Mask::File(real)),
    }
}

/// Test double: an in-memory tree.
#[cfg(test)]
pub mod fake {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    pub enum Node {
        Dir,
        File { nlink: u64 },
        Link(PathBuf),
    }

    #[derive(Default)]
    pub struct FakeFs {
        pub nodes: BTreeMap<PathBuf, (Node, u32, u32)>,
        /// Modes other than 0755, and paths with an ACL.
        pub modes: BTreeMap<PathBuf, u32>,
        pub acls: std::collections::BTreeSet<PathBuf>,
        /// What `read_head` returns for a file.
        pub contents: BTreeMap<PathBuf, Vec<u8>>,
    }

    impl FakeFs {
        /// A tree resembling a usr-merged Debian host.
        pub fn host() -> Self {
            let mut f = FakeFs::default();
            for d in [
                "/",
                "/usr",
                "/usr/bin",
                "/usr/lib",
                "/usr/lib64",
                "/usr/sbin",
                "/etc",
                "/tmp",
                "/home",
                "/home/alice",
                "/home/alice/.ssh",
                "/home/alice/.aws",
                "/work",
                "/work/ws",
                "/proc",
                "/sys",
                "/dev",
                "/run",
                "/root",
                "/root/.ssh",
                "/var",
            ] {
                f.dir(d);
            }
            f.link("/bin", "usr/bin");
            f.link("/lib", "usr/lib");
            f.link("/lib64", "usr/lib64");
            f.link("/sbin", "usr/sbin");
            f.file("/etc/shadow", 1);
            f.file("/etc/gshadow", 1);
            f.file("/etc/passwd", 1);
            f.file("/usr/bin/sh", 1);
            f.file("/usr/bin/true", 1);
            f
        }
        pub fn dir(&mut self, p: &str) {
            self.nodes.insert(p.into(), (Node::Dir, 1000, 1000));
        }
        pub fn file(&mut self, p: &str, nlink: u64) {
            self.nodes
                .insert(p.into(), (Node::File { nlink }, 1000, 1000));
        }
        /// A regular file with this content.
        pub fn text(&mut self, p: &str, content: &str) {
            self.file(p, 1);
            self.contents.insert(p.into(), content.as_bytes().to_vec());
        }
        pub fn link(&mut self, p: &str, to: &str) {
            self.nodes.insert(p.into(), (Node::Link(to.into()), 0, 0));
        }
        pub fn owner(&mut self, p: &str, uid: u32) {
            self.nodes.get_mut(Path::new(p)).unwrap().1 = uid;
        }
        /// Owner, group and mode of an existing node.
        pub fn perms(&mut self, p: &str, uid: u32, gid: u32, mode: u32) {
            let n = self.nodes.get_mut(Path::new(p)).unwrap();
            n.1 = uid;
            n.2 = gid;
            self.modes.insert(p.into(), mode);
        }
    }

    impl Fs for FakeFs {
        fn lstat(&self, p: &Path) -> Option<Meta> {
            // Resolve the parent (symlinks in it are followed), not the last component.
            let p = match (p.parent(), p.file_name()) {
                (Some(parent), Some(name)) => self.canonicalize(parent).ok()?.join(name),
                _ => p.to_path_buf(),
            };
            let (n, uid, gid) = self.nodes.get(&p)?;
            let (kind, nlink) = match n {
                Node::Dir => (Kind::Dir, 2),
                Node::File { nlink } => (Kind::File, *nlink),
                Node::Link(_) => (Kind::Symlink, 1),
            };
            // A stable made-up identity: the node's place in the tree.
            let ino = self.nodes.keys().position(|k| *k == p).unwrap_or(0) as u64 + 1;
            Some(Meta {
                kind,
                nlink,
                uid: *uid,
                gid: *gid,
                mode: self.modes.get(&p).copied().unwrap_or(0o755),
                id: (1, ino),
            })
        }
        fn has_acl(&self, p: &Path) -> bool {
            self.acls.contains(p)
        }
        fn canonicalize(&self, p: &Path) -> io::Result<PathBuf> {
            let mut out = PathBuf::from("/");
            let mut todo: Vec<PathBuf> = p
                .components()
                .skip(1)
                .map(|c| PathBuf::from(c.as_os_str()))
                .collect();
            todo.reverse();
            let mut hops = 0;
            while let Some(c) = todo.pop() {
                if c.as_os_str() == ".." {
                    out.pop();
                    continue;
                }
                let next = out.join(&c);
                match self.nodes.get(&next) {
                    None => return Err(io::Error::from(io::ErrorKind::NotFound)),
                    Some((Node::Link(t), _, _)) => {
                        hops += 1;
                        if hops > 40 {
                            return Err(io::Error::other("loop"));
                        }
                        if t.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        let mut parts: Vec<PathBuf> = t
                            .components()
                            .filter(|c| !matches!(c, Component::RootDir))
                            .map(|c| PathBuf::from(c.as_os_str()))
                            .collect();
                        parts.reverse();
                        todo.extend(parts);
                    }
                    Some(_) => out = next,
                }
            }
            Ok(out)
        }
        fn read_head(&self, p: &Path, max: u64) -> io::Result<Vec<u8>> {
            let mut v = self
                .contents
                .get(p)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            v.truncate(max as usize);
            Ok(v)
        }
        fn read_link(&self, p: &Path) -> io::Result<PathBuf> {
            match self.nodes.get(p) {
                Some((Node::Link(t), _, _)) => Ok(t.clone()),
                _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
            }
        }
        fn read_dir(&self, p: &Path) -> io::Result<Vec<String>> {
            Ok(self
                .nodes
                .keys()
                .filter(|k| k.parent() == Some(p))
                .map(|k| k.file_name().unwrap().to_string_lossy().into_owned())
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeFs;
    use super::*;

    fn homes() -> Vec<PathBuf> {
        vec![PathBuf::from("/home/alice"), PathBuf::from("/root")]
    }

    #[test]
    fn real_path_matches_canonicalize_and_never_opens_content() {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::os::unix::fs::symlink("a/b", base.join("l1")).unwrap();
        std::os::unix::fs::symlink(base.join("l1"), base.join("l2")).unwrap();
        for p in ["a", "a/b", "l1", "l2", "l2/../b"] {
            let p = base.join(p);
            assert_eq!(
                real_path(&p).ok(),
                std::fs::canonicalize(&p).ok(),
                "{}",
                p.display()
            );
        }
        assert_eq!(real_path(&base.join("l2")).unwrap(), base.join("a/b"));
        // A FIFO with no writer: opening it for reading would block forever.
        let fifo = base.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(real_path(&fifo).unwrap(), fifo);
        let e = real_path(&base.join("missing")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        std::os::unix::fs::symlink("missing", base.join("dangling")).unwrap();
        assert!(real_path(&base.join("dangling")).is_err());
    }

    #[test]
    fn cached_walk_resolves_as_the_kernel_does() {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b/c")).unwrap();
        std::fs::write(base.join("a/b/f"), "").unwrap();
        let link = |t: &str, l: &str| std::os::unix::fs::symlink(t, base.join(l)).unwrap();
        link("a/b", "rel");
        link(base.join("rel").to_str().unwrap(), "abs");
        link("../../b/c", "a/b/c/up");
        link("../../..", "a/b/c/top");
        link("f", "a/b/tofile");
        link("missing", "dangling");
        link("loop2", "loop1");
        link("loop1", "loop2");
        let clean = [
            "a",
            "a/b/c",
            "a/b/f",
            "rel",
            "abs",
            "abs/c",
            "rel/c/up",
            "rel/c/up/up",
            "a/b/c/top",
            "a/b/c/top/a/b",
            "a/b/tofile",
            "abs/../b/f",
        ];
        // Stop at a missing component: ENOENT without asking the kernel.
        let missing = [
            "missing",
            "dangling",
            "abs/../rel",
            "a/nothere/c",
            "rel/c/up/nothere",
        ];
        let odd = ["loop1", "a/b/f/x", "a/b/tofile/x", "rel/", "a/b/f/"];
        for (cases, walks) in [
            (&clean[..], Ok(())),
            (&missing[..], Err(Stop::Missing)),
            (&odd[..], Err(Stop::Ask)),
        ] {
            for c in cases {
                let p = PathBuf::from(format!("{}/{c}", base.display()));
                let fs = CachedFs::new(&RealFs);
                // Each case must end where its group says, or this test
                // proves nothing about that way.
                assert_eq!(fs.walk(&p).map(|_| ()), walks, "{c}");
                let got = fs.canonicalize(&p);
                let want = std::fs::canonicalize(&p);
                assert_eq!(got.as_ref().ok(), want.as_ref().ok(), "{c}");
                assert_eq!(
                    got.err().map(|e| e.raw_os_error()),
                    want.err().map(|e| e.raw_os_error()),
                    "{c}"
                );
            }
        }
        // /proc links are the kernel's to resolve.
        assert_eq!(
            CachedFs::new(&RealFs).walk(Path::new("/proc/self/exe")),
            Err(Stop::Ask)
        );
        // Relative paths are not walked.
        assert_eq!(CachedFs::new(&RealFs).walk(Path::new("a")), Err(Stop::Ask));
    }

    #[test]
    fn under_compares_components() {
        assert!(!is_under(Path::new("/tmpfoo"), Path::new("/tmp")));
        assert!(is_under(Path::new("/tmp"), Path::new("/")));
        assert!(is_under(Path::new("/tmp/foo"), Path::new("/tmp")));
        assert!(is_under(Path::new("/tmp"), Path::new("/tmp")));
        assert!(!is_under(Path::new("/tm"), Path::new("/tmp")));
    }

    /// The byte check for `..` decides as the component-wise one did.
    #[test]
    fn absolute_normal_is_checked_on_bytes_as_by_components() {
        let reference = |p: &Path| {
            p.is_absolute()
                && !p
                    .components()
                    .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
        };
        for p in [
            "/", "/a", "/a/b", "/a//b", "/a/./b", "/a/b/", "/a/b/.", "/..", "/a/..", "/a/../b",
            "/a/..b", "/a/b..", "/...", "a", "./a", "../a", "", "/.a/.",
        ] {
            let p = Path::new(p);
            assert_eq!(require_absolute_normal(p).is_ok(), reference(p), "{p:?}");
        }
        let non_utf8 = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"/a/\xff");
        assert!(require_absolute_normal(Path::new(non_utf8)).is_err());
    }

    /// The byte-level shortcuts answer exactly as std's component-wise
    /// comparisons, on every pair of a set of awkward paths.
    #[test]
    fn shortcuts_agree_with_components() {
        // Separated by `|` (one of them is the empty path).
        let all = concat!(
            "/|//|/tmp|/tmp/|/tmp//x|/tmp/x|/tmp/./x|/tmp/x/.|/tmp/.x|/tmp/..|",
            "/tmp/../x|/tmpx|/tm|/root/.ssh|/root/.ssh/id|/root/.sshx|/a/b/c|/a/b|",
            "/a/...|/a/..b|/.|/./tmp|tmp|tmp/x|./tmp||.|..|/a/b/|/.x|/.y|/./x|/./y|",
            "/a/.b|/a/./b|/a/.|/a//b|/a//c|//a|/a/b/.|/a/b/./c|/a/b//c|/usr|/u|",
            "/x/.|/x/./|/x/.a|/x/..|/x/..a|tmp/y|/tmp/y|/tmp/./y",
        );
        let paths: Vec<&str> = all.split('|').collect();
        let (mut plain_pairs, mut early) = (0, 0);
        for &a in &paths {
            for &b in &paths {
                let (pa, pb) = (Path::new(a), Path::new(b));
                assert_eq!(is_under(pa, pb), pa.starts_with(pb), "{a:?} under {b:?}");
                assert_eq!(same(pa, pb), pa == pb, "{a:?} same as {b:?}");
                plain_pairs += usize::from(plain(bytes(pa)) && plain(bytes(pb)));
                early += usize::from(differ_early(bytes(pa), bytes(pb)));
            }
        }
        // The shortcut is taken for most of them.
        assert!(plain_pairs > 500 && early > 800, "{plain_pairs} {early}");
    }

    #[test]
    fn writable_ok() {
        let fs = FakeFs::host();
        assert_eq!(
            validate_writable(&fs, Path::new("/work/ws"), &credential_paths(&homes())).unwrap(),
            Path::new("/work/ws")
        );
    }

    #[test]
    fn writable_refuses_relative_and_dotdot_and_missing() {
        let fs = FakeFs::host();
        assert!(validate_writable(&fs, Path::new("work/ws"), &credential_paths(&homes())).is_err());
        assert!(validate_writable(
            &fs,
            Path::new("/work/ws/../ws"),
            &credential_paths(&homes())
        )
        .is_err());
        assert!(
            validate_writable(&fs, Path::new("/work/nope"), &credential_paths(&homes())).is_err()
        );
    }

    #[test]
    fn writable_refuses_absolute_symlink() {
        let mut fs = FakeFs::host();
        fs.link("/work/link", "/etc");
        let e = validate_writable(&fs, Path::new("/work/link"), &credential_paths(&homes()))
            .unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
    }

    #[test]
    fn writable_refuses_relative_symlink() {
        let mut fs = FakeFs::host();
        fs.link("/work/rel", "../etc");
        let e = validate_writable(&fs, Path::new("/work/rel"), &credential_paths(&homes()))
            .unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
    }

    #[test]
    fn writable_refuses_symlinked_parent_escape() {
        let mut fs = FakeFs::host();
        fs.link("/work/sub", "/home/alice");
        fs.dir("/home/alice/proj");
        let e = validate_writable(
            &fs,
            Path::new("/work/sub/proj"),
            &credential_paths(&homes()),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("resolves to /home/alice/proj"),
            "{e}"
        );
    }

    #[test]
    fn writable_refuses_hardlinked_file() {
        let mut fs = FakeFs::host();
        fs.file("/work/ws/f", 2);
        assert!(
            validate_writable(&fs, Path::new("/work/ws/f"), &credential_paths(&homes())).is_err()
        );
    }

    #[test]
    fn sensitive_never_writable() {
        let fs = FakeFs::host();
        for p in [
            "/",
            "/proc",
            "/sys",
            "/dev",
            "/run",
            "/home/alice/.ssh",
            "/root/.ssh",
            "/home/alice/.aws",
        ] {
            let e = validate_writable(&fs, Path::new(p), &credential_paths(&homes())).unwrap_err();
            assert!(e.to_string().contains("never writable"), "{p}: {e}");
        }
        assert!(never_writable(Path::new("/proc/self"), &credential_paths(&homes())).is_some());
        assert!(never_writable(
            Path::new("/home/alice/.config/gcloud/x"),
            &credential_paths(&homes())
        )
        .is_some());
        assert!(
            never_writable(Path::new("/home/alice/.netrc"), &credential_paths(&homes())).is_some()
        );
        assert!(never_writable(
            Path::new("/home/alice/.sshfoo"),
            &credential_paths(&homes())
        )
        .is_none());
        assert!(never_writable(Path::new("/.cordon/x"), &credential_paths(&homes())).is_some());
        assert!(never_writable(Path::new("/work"), &credential_paths(&homes())).is_none());
    }

    #[test]
    fn mask_kinds() {
        let mut fs = FakeFs::host();
        assert_eq!(
            validate_mask(&fs, Path::new("/etc/shadow")).unwrap(),
            Mask::File("/etc/shadow".into())
        );
        assert_eq!(
            validate_mask(&fs, Path::new("/home/alice/.ssh")).unwrap(),
            Mask::Dir("/home/alice/.ssh".into())
        );
        // Absent under a read-only parent: skipped, not a bwrap crash.
        assert_eq!(
            validate_mask(&fs, Path::new("/usr/nothing")).unwrap(),
            Mask::Absent("/usr/nothing".into())
        );
        fs.file("/etc/linked", 2);
        let e = validate_mask(&fs, Path::new("/etc/linked")).unwrap_err();
        assert!(e.to_string().contains("hard links"), "{e}");
        // A symlink is hidden at its target.
        fs.link("/etc/sh", "shadow");
        assert_eq!(
            validate_mask(&fs, Path::new("/etc/sh")).unwrap(),
            Mask::File("/etc/shadow".into())
        );
        fs.link("/etc/dangling", "nowhere");
        assert_eq!(
            validate_mask(&fs, Path::new("/etc/dangling")).unwrap(),
            Mask::Absent("/etc/dangling".into())
        );
    }

    #[test]
    fn readonly_resolves_links() {
        let fs = FakeFs::host();
        assert_eq!(
            resolve_readonly(&fs, Path::new("/bin")).unwrap(),
            Some("/usr/bin".into())
        );
        assert_eq!(resolve_readonly(&fs, Path::new("/lib32")).unwrap(), None);
    }
}
