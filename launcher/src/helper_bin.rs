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

use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Open and verify the helper. `expected` is the caller's hash (used only when
/// none was recorded at build time).
pub fn verify(path: &Path, expected_caller: Option<&str>) -> Result<Helper> {
    let err = |m: String| Error::Helper(format!("{}: {m}", path.display()));
    let mut file = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
    let meta = file.metadata().map_err(|e| err(e.to_string()))?;
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
    // Every hash we know must match: the one recorded at build time and the
    // caller's. A caller's hash can narrow the choice, never widen it past
    // what this cordon was built with.
    let build = BUILD_SHA256.filter(|b| !b.is_empty());
    let caller = expected_caller.filter(|c| !c.is_empty());
    let source = match (build, caller) {
        (Some(_), _) => HashSource::Build,
        (None, Some(_)) => HashSource::Caller,
        (None, None) => {
            return Err(err(format!(
                "no expected SHA-256 is known (this cordon was built without CORDON_HELPER_SHA256); pass --helper-sha256 {sha} after checking it, or rebuild with CORDON_HELPER_SHA256 set"
            )))
        }
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
    Ok(Helper {
        path: path.to_path_buf(),
        file,
        sha256: sha,
        hash_source: source,
    })
}

#[cfg(test)]
mod tests {
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
}
