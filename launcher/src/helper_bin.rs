//! Finding `cordon-helper` and checking it before it is bound into a sandbox.
//!
//! Discovery order: `$CORDON_HELPER`, beside the launcher executable, the
//! prefix's `libexec/cordon/` (`<bin>/../libexec/cordon/`, where a non-root
//! `scripts/install` puts it), `/usr/libexec/cordon/cordon-helper`, then `$PATH`.
//!
//! Integrity: a regular file, not group/world-writable, not setuid/setgid, static
//! (no PT_INTERP: it must run in a sandbox root without a loader), and its SHA-256
//! equal to every expected hash: the one recorded at build time
//! (`CORDON_HELPER_SHA256` in the build environment) and the caller's
//! (`--helper-sha256` / `$CORDON_HELPER_SHA256`), whichever are known. With no
//! expected hash the helper is refused (fail closed). The checks run on an open
//! fd, and that same fd is what bwrap binds (`--ro-bind-fd`), so the file checked
//! is the file run.
//!
//! Repeated runs skip reading and hashing the file when a private record in the
//! user's cache directory vouches for this very, unchanged file (same device,
//! inode, size, mtime and ctime, to the nanosecond) and every expected hash
//! ([`verify_cached`]; why that is safe: the comment above `Identity`).
//! `CORDON_NO_HELPER_CACHE=1` turns the cache off.

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub const BUILD_SHA256: Option<&str> = option_env!("CORDON_HELPER_SHA256");
pub const INSTALLED: &str = "/usr/libexec/cordon/cordon-helper";
pub const NAME: &str = "cordon-helper";

/// Where the expected hash came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HashSource {
    Build,
    Caller,
}

#[derive(Debug)]
pub struct Helper {
    pub path: PathBuf,
    pub file: File,
    pub sha256: String,
    pub hash_source: HashSource,
    pub verified: Verified,
}

/// How the helper's hash was established on this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Verified {
    /// Read in full and hashed.
    #[serde(rename = "hashed")]
    Hashed,
    /// A verification record vouched for this very, unchanged file.
    #[serde(rename = "cache")]
    Cached,
}

/// Candidate paths in discovery order (the first that exists wins).
pub fn candidates(
    env_helper: Option<&str>,
    exe: Option<&Path>,
    path_var: Option<&str>,
) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(h) = env_helper.filter(|h| !h.is_empty()) {
        v.push(PathBuf::from(h));
        // An explicit choice is final: do not silently fall back to another helper.
        return v;
    }
    if let Some(dir) = exe.and_then(Path::parent) {
        v.push(dir.join(NAME));
        if let Some(prefix) = dir.parent() {
            v.push(prefix.join("libexec/cordon").join(NAME));
        }
    }
    v.push(PathBuf::from(INSTALLED));
    for d in path_var
        .unwrap_or("")
        .split(':')
        .filter(|d| d.starts_with('/'))
    {
        v.push(Path::new(d).join(NAME));
    }
    v
}

pub fn discover(
    env_helper: Option<&str>,
    exe: Option<&Path>,
    path_var: Option<&str>,
) -> Result<PathBuf> {
    let c = candidates(env_helper, exe, path_var);
    c.iter().find(|p| p.exists()).cloned().ok_or_else(|| {
        Error::Helper(format!(
            "cordon-helper not found (looked at: {}); fix: build it (cargo build --release -p cordon-helper --target x86_64-unknown-linux-musl) and set CORDON_HELPER",
            c.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// Is this ELF file dynamically linked (has a PT_INTERP program header)?
pub fn has_interp(elf: &[u8]) -> std::result::Result<bool, String> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if elf[4] != 2 || elf[5] != 1 {
        return Err("not a 64-bit little-endian ELF".into());
    }
    let u16at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[32..40].try_into().unwrap_or_default()) as usize;
    let phentsize = u16at(54);
    let phnum = u16at(56);
    if phentsize < 4 {
        return Err("bad program header size".into());
    }
    for i in 0..phnum {
        let o = phoff
            .checked_add(i.checked_mul(phentsize).ok_or("overflow")?)
            .ok_or("overflow")?;
        let Some(h) = elf.get(o..o + 4) else {
            return Err("truncated program headers".into());
        };
        const PT_INTERP: u32 = 3;
        if u32::from_le_bytes(h.try_into().unwrap_or_default()) == PT_INTERP {
            return Ok(true);
        }
    }
    Ok(false)
}

/// 128 bits of FNV-1a (two 64-bit lanes), hex: names for cache files. Not a
/// security boundary (a record is trusted only for what it contains, checked
/// against the file), so no SHA-256, whose first use costs CPU feature
/// detection (cpuid, which traps to the hypervisor in a VM) on every run.
pub fn cache_name_hash(data: &[u8]) -> String {
    let lane = |mut h: u64| {
        for b in data {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    format!(
        "{:016x}{:016x}",
        lane(0xcbf2_9ce4_8422_2325),
        lane(0x6c62_272e_07bb_0142)
    )
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Open and verify the helper, always hashing it in full (`cordon doctor`).
/// `expected_caller` is the caller's hash; it must match as well as the one
/// recorded at build time, if any.
pub fn verify(path: &Path, expected_caller: Option<&str>) -> Result<Helper> {
    verify_cached(path, expected_caller, None)
}

/// [`verify`], reusing a verification record in `cache_dir` (see [`cache_dir`])
/// when one vouches for this very file, and writing one after a full hash.
pub fn verify_cached(
    path: &Path,
    expected_caller: Option<&str>,
    cache_dir: Option<&Path>,
) -> Result<Helper> {
    verify_inner(
        path,
        BUILD_SHA256,
        expected_caller,
        cache_dir,
        MIN_CTIME_AGE,
    )
}

/// Where verification records live: the probe cache directory, unless
/// `CORDON_NO_HELPER_CACHE` is set (to anything but empty or `0`).
pub fn cache_dir(env: &BTreeMap<String, String>, euid: u32) -> Option<PathBuf> {
    if env
        .get("CORDON_NO_HELPER_CACHE")
        .is_some_and(|v| !v.is_empty() && v != "0")
    {
        return None;
    }
    crate::probe::cache_dir(env, euid)
}

/// A record is written only for a file whose ctime is at least this old.
const MIN_CTIME_AGE: Duration = Duration::from_secs(2);

// The verification cache. A record says: "the file with this identity (st_dev,
// st_ino, st_size, st_mtime, st_ctime to the nanosecond) was read in full, is
// static, and hashes to this SHA-256". Why trusting it does not weaken the check:
// - ctime cannot be set from userspace, and every change to the file (write,
//   truncate, chmod, chown, link, rename over it: a new inode) changes its inode
//   or its ctime. A record is written only when the ctime is at least
//   MIN_CTIME_AGE old, so even with coarse timestamps a later change gets a
//   different ctime; and a reused inode number belongs to a file created after
//   the old one was freed, which was after the record was written.
// - Records live in the user's private cache directory and are trusted only if
//   they are regular files owned by the user and private (0600). Whoever can
//   write them as the user can already replace the user's own `cordon` binary.
// - The launcher still binds/execs the helper through the very fd whose identity
//   was checked, so the file vouched for is the file run.
// A filesystem whose server reports attributes (FUSE, network) could lie about
// them, but it could equally serve other bytes at exec than at hash time: the
// hash never protected against that. Any doubt about a record means hashing.

/// The identity of an open file (its fstat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Option<Self> {
        let ns = |s: i64, n: i64| s.checked_mul(1_000_000_000)?.checked_add(n);
        Some(Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec())?,
            ctime_ns: ns(m.ctime(), m.ctime_nsec())?,
        })
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    sha256: String,
    #[serde(rename = "static")]
    is_static: bool,
}

/// `helper-<key>.json`, the key covering the path and the expected hashes.
fn record_path(dir: &Path, path: &Path, expected: &[&str]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut raw = b"v1|".to_vec();
    raw.extend_from_slice(path.as_os_str().as_bytes());
    raw.push(b'|');
    raw.extend_from_slice(expected.join(",").to_ascii_lowercase().as_bytes());
    dir.join(format!("helper-{}.json", cache_name_hash(&raw)))
}

/// The record at `p`, if it is a private regular file of ours (never following
/// a symlink) and parses.
fn record_read(p: &Path) -> Option<Record> {
    serde_json::from_slice(&crate::sys::read_private(p, 4096)?).ok()
}

/// Does the record vouch for this file and every expected hash?
fn record_vouches(r: &Record, id: &Identity, expected: &[&str]) -> bool {
    let rid = Identity {
        dev: r.dev,
        ino: r.ino,
        size: r.size,
        mtime_ns: r.mtime_ns,
        ctime_ns: r.ctime_ns,
    };
    r.is_static
        && rid == *id
        && r.sha256.len() == 64
        && r.sha256
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && !expected.is_empty()
        && expected.iter().all(|e| e.eq_ignore_ascii_case(&r.sha256))
}

/// Write a record atomically (0600 in a 0700 dir); failures are silent.
fn record_write(p: &Path, id: &Identity, sha: &str) {
    use std::io::Write;
    let Some(dir) = p.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let Ok(mut t) = tempfile::Builder::new().prefix(".helper-").tempfile_in(dir) else {
        return;
    };
    let r = Record {
        dev: id.dev,
        ino: id.ino,
        size: id.size,
        mtime_ns: id.mtime_ns,
        ctime_ns: id.ctime_ns,
        sha256: sha.to_string(),
        is_static: true,
    };
    let Ok(body) = serde_json::to_vec(&r) else {
        return;
    };
    if t.write_all(&body).is_ok() {
        let _ = t.persist(p);
    }
}

/// Is `ctime_ns` at least `min_age` before `now`?
fn old_enough(ctime_ns: i64, now: SystemTime, min_age: Duration) -> bool {
    let Ok(now) = now.duration_since(UNIX_EPOCH) else {
        return false;
    };
    let age = now.as_nanos() as i128 - ctime_ns as i128;
    age >= min_age.as_nanos() as i128
}

/// [`verify_cached`] with the build-time hash and the ctime age rule as
/// parameters (tests pass their own).
/// The helper file, open: what bwrap gets as fd 6 even before it is verified
/// (it cannot exec it before its options, which follow the verification).
pub struct Opened {
    path: PathBuf,
    file: File,
    /// Taken before the fstat: a change after the fstat gets a ctime >= now.
    now: SystemTime,
    meta: std::fs::Metadata,
}

impl Opened {
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.file)
    }
}

/// Open the helper for [`verify_opened`].
pub fn open(path: &Path) -> Result<Opened> {
    let err = |m: String| Error::Helper(format!("{}: {m}", path.display()));
    let file = crate::sys::open(path, libc::O_RDONLY)
        .map(File::from)
        .map_err(|e| err(format!("cannot open: {e}")))?;
    let now = SystemTime::now();
    let meta = file.metadata().map_err(|e| err(e.to_string()))?;
    Ok(Opened {
        path: path.to_path_buf(),
        file,
        now,
        meta,
    })
}

/// As [`verify_cached`], for a file opened with [`open`].
pub fn verify_opened(
    o: Opened,
    expected_caller: Option<&str>,
    cache_dir: Option<&Path>,
) -> Result<Helper> {
    verify_opened_inner(o, BUILD_SHA256, expected_caller, cache_dir, MIN_CTIME_AGE)
}

fn verify_inner(
    path: &Path,
    build: Option<&str>,
    expected_caller: Option<&str>,
    cache_dir: Option<&Path>,
    min_ctime_age: Duration,
) -> Result<Helper> {
    verify_opened_inner(
        open(path)?,
        build,
        expected_caller,
        cache_dir,
        min_ctime_age,
    )
}

fn verify_opened_inner(
    o: Opened,
    build: Option<&str>,
    expected_caller: Option<&str>,
    cache_dir: Option<&Path>,
    min_ctime_age: Duration,
) -> Result<Helper> {
    let Opened {
        path,
        mut file,
        now,
        meta,
    } = o;
    let path = path.as_path();
    let err = |m: String| Error::Helper(format!("{}: {m}", path.display()));
    if !meta.file_type().is_file() {
        return Err(err("not a regular file".into()));
    }
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(err(format!(
            "is group- or world-writable (mode {:o}); refused",
            mode & 0o7777
        )));
    }
    if mode & 0o6000 != 0 {
        return Err(err(format!(
            "is setuid/setgid (mode {:o}); refused",
            mode & 0o7777
        )));
    }
    if mode & 0o111 == 0 {
        return Err(err("is not executable".into()));
    }
    // Every hash we know must match: the one recorded at build time and the
    // caller's. A caller's hash can narrow the choice, never widen it past
    // what this cordon was built with.
    let build = build.filter(|b| !b.is_empty());
    let caller = expected_caller.filter(|c| !c.is_empty());
    let source = match (build, caller) {
        (Some(_), _) => Some(HashSource::Build),
        (None, Some(_)) => Some(HashSource::Caller),
        (None, None) => None,
    };
    let expected: Vec<&str> = build.into_iter().chain(caller).collect();
    let id = Identity::of(&meta);
    // With no expected hash there is nothing to cache: hash, and say what we found.
    let record = match (cache_dir, id, source.is_some()) {
        (Some(d), Some(id), true) => Some((record_path(d, path, &expected), id)),
        _ => None,
    };
    if let (Some((rp, id)), Some(source)) = (&record, &source) {
        if let Some(r) = record_read(rp).filter(|r| record_vouches(r, id, &expected)) {
            return Ok(Helper {
                path: path.to_path_buf(),
                file,
                sha256: r.sha256,
                hash_source: source.clone(),
                verified: Verified::Cached,
            });
        }
    }
    // Stream the file through a small buffer: hashing needs every byte once,
    // the static check only the headers. (Reading the whole ~700 KiB binary
    // into memory cost a page fault per 4 KiB on every run.)
    const HEAD: usize = 64 * 1024;
    let mut hasher = Sha256::new();
    let mut head: Vec<u8> = Vec::with_capacity(HEAD);
    let mut buf = vec![0u8; HEAD];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(format!("cannot read: {e}"))),
        };
        if head.len() < HEAD {
            let take = n.min(HEAD - head.len());
            head.extend_from_slice(&buf[..take]);
        }
        hasher.update(&buf[..n]);
    }
    if has_interp(&head).map_err(err)? {
        return Err(err(
            "is dynamically linked (has an ELF interpreter); the helper must be static (musl build)".into(),
        ));
    }
    let sha = hex(&hasher.finalize());
    let Some(source) = source else {
        return Err(err(format!(
            "no expected SHA-256 is known (this cordon was built without CORDON_HELPER_SHA256); pass --helper-sha256 {sha} after checking it, or rebuild with CORDON_HELPER_SHA256 set"
        )));
    };
    for (want, whose) in [
        (build, "recorded at build time"),
        (caller, "given by the caller"),
    ] {
        if let Some(want) = want {
            if !want.eq_ignore_ascii_case(&sha) {
                return Err(err(format!(
                    "SHA-256 mismatch: expected {want} ({whose}), found {sha}; refused"
                )));
            }
        }
    }
    if let Some((rp, id)) = &record {
        // Only for a file old enough, and unchanged while it was hashed.
        let unchanged = file.metadata().ok().as_ref().and_then(Identity::of) == Some(*id);
        if unchanged && old_enough(id.ctime_ns, now, min_ctime_age) {
            record_write(rp, id, &sha);
        }
    }
    Ok(Helper {
        path: path.to_path_buf(),
        file,
        sha256: sha,
        hash_source: source,
        verified: Verified::Hashed,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn cache_names_are_stable_and_distinct() {
        let a = cache_name_hash(b"v1|/usr/lib/cordon/cordon-helper|abc");
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a, cache_name_hash(b"v1|/usr/lib/cordon/cordon-helper|abc"));
        assert_ne!(a, cache_name_hash(b"v1|/usr/lib/cordon/cordon-helper|abd"));
        assert_ne!(cache_name_hash(b""), cache_name_hash(b"\0"));
    }

    use super::*;

    fn elf(phdrs: &[u32]) -> Vec<u8> {
        let mut v = vec![0u8; 64 + 56 * phdrs.len()];
        v[..4].copy_from_slice(b"\x7fELF");
        v[4] = 2;
        v[5] = 1;
        v[32..40].copy_from_slice(&64u64.to_le_bytes());
        v[54..56].copy_from_slice(&56u16.to_le_bytes());
        v[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for (i, t) in phdrs.iter().enumerate() {
            v[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
        }
        v
    }

    #[test]
    fn interp_detection() {
        assert_eq!(has_interp(&elf(&[1, 1, 4])), Ok(false));
        assert_eq!(has_interp(&elf(&[6, 3, 1])), Ok(true));
        assert!(has_interp(b"#!/bin/sh\n").is_err());
        let mut truncated = elf(&[1, 3]);
        truncated.truncate(100);
        assert!(has_interp(&truncated).is_err());
    }

    #[test]
    fn real_binaries() {
        // /usr/bin/bwrap is dynamically linked on Debian.
        let data = std::fs::read("/usr/bin/bwrap").unwrap();
        assert_eq!(has_interp(&data), Ok(true));
    }

    #[test]
    fn discovery_order() {
        let c = candidates(
            None,
            Some(Path::new("/opt/cordon/bin/cordon")),
            Some("/a:rel:/b"),
        );
        assert_eq!(
            c,
            vec![
                PathBuf::from("/opt/cordon/bin/cordon-helper"),
                PathBuf::from("/opt/cordon/libexec/cordon/cordon-helper"),
                PathBuf::from(INSTALLED),
                PathBuf::from("/a/cordon-helper"),
                PathBuf::from("/b/cordon-helper"),
            ]
        );
        assert_eq!(
            candidates(Some("/x/h"), None, Some("/a")),
            vec![PathBuf::from("/x/h")]
        );
    }

    #[test]
    fn verify_rules() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h");
        let mut f = File::create(&p).unwrap();
        let data = elf(&[1]);
        f.write_all(&data).unwrap();
        drop(f);
        let sha = sha256_hex(&data);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        if BUILD_SHA256.is_none() {
            assert!(verify(&p, None)
                .unwrap_err()
                .to_string()
                .contains("no expected SHA-256"));
            assert!(verify(&p, Some(&"0".repeat(64)))
                .unwrap_err()
                .to_string()
                .contains("mismatch"));
            assert_eq!(verify(&p, Some(&sha)).unwrap().sha256, sha);
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(verify(&p, Some(&sha))
            .unwrap_err()
            .to_string()
            .contains("writable"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
        assert!(verify(&p, Some(&sha))
            .unwrap_err()
            .to_string()
            .contains("setuid"));
        assert!(verify(dir.path(), Some(&sha))
            .unwrap_err()
            .to_string()
            .contains("regular"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(&p, elf(&[3])).unwrap();
        let sha2 = sha256_hex(&elf(&[3]));
        assert!(verify(&p, Some(&sha2))
            .unwrap_err()
            .to_string()
            .contains("static"));
    }

    /// A static ELF test file at `dir/name`, mode 0755; returns its hash.
    fn put(dir: &Path, name: &str, data: &[u8]) -> String {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        sha256_hex(data)
    }

    fn ctime_of(p: &Path) -> (u64, i64, i64) {
        let m = std::fs::metadata(p).unwrap();
        (m.ino(), m.ctime(), m.ctime_nsec())
    }

    /// Change the file at `p` with `f`, late enough that the kernel's coarse
    /// clock gives it a new ctime (the tests pass a ctime age of 0).
    fn change(p: &Path, f: impl FnOnce()) {
        let before = ctime_of(p);
        std::thread::sleep(Duration::from_millis(30));
        f();
        assert_ne!(
            ctime_of(p),
            before,
            "the change did not show in inode or ctime"
        );
    }

    /// verify_inner with no build-time hash, the caller's `want` and no age rule.
    fn check(p: &Path, want: Option<&str>, cache: Option<&Path>) -> Result<Helper> {
        verify_inner(p, None, want, cache, Duration::ZERO)
    }

    fn verified(p: &Path, want: &str, cache: &Path) -> Verified {
        let h = check(p, Some(want), Some(cache)).unwrap();
        assert_eq!(h.sha256, want);
        h.verified
    }

    fn records(cache: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(cache)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    #[test]
    fn cache_first_hashes_and_records_then_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let sha = put(dir.path(), "h", &elf(&[1]));
        let p = dir.path().join("h");
        // A file changed less than the age rule ago is hashed and not recorded.
        let h = verify_inner(
            &p,
            None,
            Some(&sha),
            Some(&cache),
            Duration::from_secs(3600),
        );
        assert_eq!(h.unwrap().verified, Verified::Hashed);
        assert!(records(&cache).is_empty());
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        let recs = records(&cache);
        assert_eq!(recs.len(), 1);
        let rp = &recs[0];
        assert_eq!(*rp, record_path(&cache, &p, &[&sha]));
        let name = rp.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("helper-") && name.ends_with(".json") && name.len() == 44);
        assert_eq!(std::fs::metadata(rp).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&cache).unwrap().mode() & 0o777, 0o700);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(rp).unwrap()).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(v["dev"], m.dev());
        assert_eq!(v["ino"], m.ino());
        assert_eq!(v["size"], m.size());
        assert_eq!(v["mtime_ns"], m.mtime() * 1_000_000_000 + m.mtime_nsec());
        assert_eq!(v["ctime_ns"], m.ctime() * 1_000_000_000 + m.ctime_nsec());
        assert_eq!(v["sha256"], sha);
        assert_eq!(v["static"], true);
        // The same, unchanged file: the record vouches for it, twice.
        assert_eq!(verified(&p, &sha, &cache), Verified::Cached);
        let h = check(&p, Some(&sha.to_uppercase()), Some(&cache)).unwrap();
        assert_eq!(h.verified, Verified::Cached);
        assert_eq!(h.hash_source, HashSource::Caller);
        // The fd handed back is the file itself.
        let mut data = Vec::new();
        h.file.try_clone().unwrap().read_to_end(&mut data).unwrap();
        assert_eq!(data, elf(&[1]));
        // Another expected hash is another record, and is checked by hashing.
        assert!(check(&p, Some(&"0".repeat(64)), Some(&cache))
            .unwrap_err()
            .to_string()
            .contains("mismatch"));
        // No expected hash at all: the record is not used, the error shows the real hash.
        let e = check(&p, None, Some(&cache)).unwrap_err().to_string();
        assert!(e.contains("no expected SHA-256") && e.contains(&sha), "{e}");
    }

    #[test]
    fn cache_changed_file_is_hashed_again() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let data = elf(&[1]);
        let sha = put(dir.path(), "h", &data);
        let p = dir.path().join("h");
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        assert_eq!(verified(&p, &sha, &cache), Verified::Cached);
        // Same size, changed in place: hashed, and refused against the old hash.
        let mut changed = data.clone();
        *changed.last_mut().unwrap() ^= 0xff;
        change(&p, || {
            let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.seek(SeekFrom::Start(data.len() as u64 - 1)).unwrap();
            f.write_all(&changed[data.len() - 1..]).unwrap();
        });
        assert_eq!(std::fs::read(&p).unwrap(), changed);
        assert!(check(&p, Some(&sha), Some(&cache))
            .unwrap_err()
            .to_string()
            .contains("mismatch"));
        let sha_changed = sha256_hex(&changed);
        assert_eq!(verified(&p, &sha_changed, &cache), Verified::Hashed);
        // chmod (same bytes) changes the ctime: hashed again.
        assert_eq!(verified(&p, &sha_changed, &cache), Verified::Cached);
        change(&p, || {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap()
        });
        assert_eq!(verified(&p, &sha_changed, &cache), Verified::Hashed);
        assert_eq!(verified(&p, &sha_changed, &cache), Verified::Cached);
        // Replaced by rename with another binary: a new inode, refused.
        put(dir.path(), "other", &elf(&[1, 1]));
        change(&p, || {
            std::fs::rename(dir.path().join("other"), &p).unwrap()
        });
        assert!(check(&p, Some(&sha_changed), Some(&cache))
            .unwrap_err()
            .to_string()
            .contains("mismatch"));
        // Replaced by rename with the same bytes: a new inode, hashed.
        put(dir.path(), "same", &changed);
        change(&p, || std::fs::rename(dir.path().join("same"), &p).unwrap());
        assert_eq!(verified(&p, &sha_changed, &cache), Verified::Hashed);
        assert_eq!(verified(&p, &sha_changed, &cache), Verified::Cached);
    }

    #[test]
    fn cache_record_must_be_private_regular_and_ours() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let sha = put(dir.path(), "h", &elf(&[1]));
        let p = dir.path().join("h");
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        let rp = record_path(&cache, &p, &[&sha]);
        let good = std::fs::read(&rp).unwrap();
        // Readable by others: ignored (and replaced by a private one).
        std::fs::set_permissions(&rp, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        assert_eq!(std::fs::metadata(&rp).unwrap().mode() & 0o777, 0o600);
        assert_eq!(verified(&p, &sha, &cache), Verified::Cached);
        // A symlink to a good, private record: not followed.
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::rename(&rp, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &rp).unwrap();
        assert_eq!(std::fs::read(&rp).unwrap(), good);
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        assert!(!std::fs::symlink_metadata(&rp)
            .unwrap()
            .file_type()
            .is_symlink());
        // A FIFO: neither blocks nor counts.
        std::fs::remove_file(&rp).unwrap();
        nix::unistd::mkfifo(&rp, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        // Garbage: ignored.
        std::fs::write(&rp, b"{\"dev\":").unwrap();
        std::fs::set_permissions(&rp, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        // Owned by another user (only root can arrange that): ignored.
        if crate::sys::geteuid() == 0 {
            assert_eq!(verified(&p, &sha, &cache), Verified::Cached);
            std::os::unix::fs::chown(&rp, Some(65534), None).unwrap();
            assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        }
    }

    /// A record with this file's identity and the given fields changed.
    fn forge(p: &Path, rp: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
        let m = std::fs::metadata(p).unwrap();
        let mut v = serde_json::json!({
            "dev": m.dev(), "ino": m.ino(), "size": m.size(),
            "mtime_ns": m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            "ctime_ns": m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            "sha256": sha256_hex(&std::fs::read(p).unwrap()), "static": true,
        });
        edit(&mut v);
        std::fs::create_dir_all(rp.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(rp);
        std::fs::write(rp, v.to_string()).unwrap();
        std::fs::set_permissions(rp, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn cache_record_must_match_identity_and_every_hash() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let sha = put(dir.path(), "h", &elf(&[1]));
        let p = dir.path().join("h");
        let rp = record_path(&cache, &p, &[&sha]);
        // The control: a well-formed record with this identity is used.
        forge(&p, &rp, |_| {});
        assert_eq!(verified(&p, &sha, &cache), Verified::Cached);
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 8] = [
            ("other sha256", |v| v["sha256"] = "0".repeat(64).into()),
            ("uppercase sha256", |v| {
                v["sha256"] = v["sha256"].as_str().unwrap().to_uppercase().into()
            }),
            ("not static", |v| v["static"] = false.into()),
            ("other size", |v| {
                v["size"] = (v["size"].as_u64().unwrap() + 1).into()
            }),
            ("other ino", |v| {
                v["ino"] = (v["ino"].as_u64().unwrap() + 1).into()
            }),
            ("other dev", |v| {
                v["dev"] = (v["dev"].as_u64().unwrap() + 1).into()
            }),
            ("other mtime", |v| {
                v["mtime_ns"] = (v["mtime_ns"].as_i64().unwrap() - 1).into()
            }),
            ("other ctime", |v| {
                v["ctime_ns"] = (v["ctime_ns"].as_i64().unwrap() - 1).into()
            }),
        ];
        for (what, edit) in edits {
            forge(&p, &rp, edit);
            let h = check(&p, Some(&sha), Some(&cache)).unwrap();
            assert_eq!(h.verified, Verified::Hashed, "{what}");
        }
        // Build-time and caller hashes both known: a record must match both.
        // Here it names the file's real hash (the build's), the caller wants another.
        let other = "1".repeat(64);
        let rp2 = record_path(&cache, &p, &[&sha, &other]);
        forge(&p, &rp2, |_| {});
        let e = verify_inner(&p, Some(&sha), Some(&other), Some(&cache), Duration::ZERO);
        assert!(e.unwrap_err().to_string().contains("given by the caller"));
        let h = verify_inner(&p, Some(&sha), Some(&sha), Some(&cache), Duration::ZERO).unwrap();
        assert_eq!(h.hash_source, HashSource::Build);
    }

    #[test]
    fn cache_opt_out() {
        let dir = tempfile::tempdir().unwrap();
        let sha = put(dir.path(), "h", &elf(&[1]));
        let p = dir.path().join("h");
        let mut env = BTreeMap::new();
        env.insert(
            "XDG_CACHE_HOME".to_string(),
            dir.path().display().to_string(),
        );
        let cache = cache_dir(&env, 4242).unwrap();
        assert_eq!(cache, dir.path().join("cordon"));
        assert_eq!(verified(&p, &sha, &cache), Verified::Hashed);
        assert_eq!(verified(&p, &sha, &cache), Verified::Cached);
        for (off, v) in [(true, "1"), (true, "yes"), (false, "0"), (false, "")] {
            env.insert("CORDON_NO_HELPER_CACHE".to_string(), v.to_string());
            let c = cache_dir(&env, 4242);
            assert_eq!(c.is_none(), off, "CORDON_NO_HELPER_CACHE={v:?}");
            let h = check(&p, Some(&sha), c.as_deref()).unwrap();
            let want = if off {
                Verified::Hashed
            } else {
                Verified::Cached
            };
            assert_eq!(h.verified, want, "CORDON_NO_HELPER_CACHE={v:?}");
        }
        // Off: nothing is written either.
        std::fs::remove_dir_all(&cache).unwrap();
        env.insert("CORDON_NO_HELPER_CACHE".to_string(), "1".to_string());
        let h = check(&p, Some(&sha), cache_dir(&env, 4242).as_deref()).unwrap();
        assert_eq!(h.verified, Verified::Hashed);
        assert!(!cache.exists());
    }

    #[test]
    fn ctime_age_rule() {
        let t = UNIX_EPOCH + Duration::from_secs(1000);
        let ns = |s: i64| s * 1_000_000_000;
        assert!(old_enough(ns(998), t, MIN_CTIME_AGE));
        assert!(!old_enough(ns(998) + 1, t, MIN_CTIME_AGE));
        assert!(!old_enough(ns(1001), t, MIN_CTIME_AGE)); // from the future
        assert!(old_enough(ns(1000), t, Duration::ZERO));
    }
}
