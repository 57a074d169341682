//! The launcher's cache of helper verifications (docs/launcher.md, "Skipping
//! the hash on repeated runs"), end to end: the real `cordon` and a copy of
//! the real helper. A first run hashes the helper and records it, a second
//! reuses the record, `CORDON_NO_HELPER_CACHE=1` hashes, and a helper changed
//! in place after being recorded is refused.

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cordon_tests::*;

fn sha256_file(p: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(p)
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "sha256sum {}", p.display());
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

/// `cordon run --json` with this helper, expected hash and cache; (exit, result).
fn run(helper: &Path, sha: &str, cache: &Path, ws: &Path, no_cache: bool) -> (i32, Value) {
    let mut c = Command::new(cordon_bin());
    c.args(["run", "--json", "--workspace"])
        .arg(ws)
        .args(["--", "true"])
        .env("CORDON_HELPER", helper)
        .env("CORDON_HELPER_SHA256", sha)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("CORDON_NO_HELPER_CACHE")
        .env_remove("CORDON_BWRAP");
    if no_cache {
        c.env("CORDON_NO_HELPER_CACHE", "1");
    }
    let out = c.output().expect("run cordon");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn records(cache: &Path) -> Vec<fs::Metadata> {
    fs::read_dir(cache.join("cordon"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("helper-"))
                .map(|e| fs::symlink_metadata(e.path()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn helper_verification_is_cached_and_a_changed_helper_refused() {
    let dir = tempfile::Builder::new()
        .prefix("cordon-helper-cache-")
        .tempdir()
        .unwrap();
    let helper = dir.path().join("cordon-helper");
    copy_executable(&helper_bin(), &helper);
    fs::set_permissions(&helper, fs::Permissions::from_mode(0o755)).unwrap();
    let sha = sha256_file(&helper);
    let cache = dir.path().join("cache");
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    if is_root() {
        // As root the sandbox runs as the workspace's owner.
        std::os::unix::fs::chown(&ws, Some(65534), Some(65534)).unwrap();
    }

    // A helper changed less than 2 s ago is hashed and not recorded.
    let (code, v) = run(&helper, &sha, &cache, &ws, false);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["helper"]["verified"], "hashed", "{v}");
    assert_eq!(v["helper"]["sha256"], sha.as_str());
    assert!(records(&cache).is_empty(), "a fresh helper was recorded");

    // Let the helper's ctime age past the 2-second rule.
    let ctime = fs::metadata(&helper).unwrap().ctime();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let wait = (ctime + 3 - now).clamp(0, 3) as u64;
    std::thread::sleep(Duration::from_secs(wait));

    let (code, v) = run(&helper, &sha, &cache, &ws, false);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["helper"]["verified"], "hashed", "{v}");
    let recs = records(&cache);
    assert_eq!(recs.len(), 1, "no verification record was written");
    assert!(recs[0].is_file());
    assert_eq!(recs[0].mode() & 0o777, 0o600);

    let (code, v) = run(&helper, &sha, &cache, &ws, false);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["helper"]["verified"], "cache", "{v}");
    assert_eq!(v["helper"]["sha256"], sha.as_str());

    let (code, v) = run(&helper, &sha, &cache, &ws, true);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["helper"]["verified"], "hashed", "{v}");

    // Changed in place, same size: hashed again and refused.
    let len = fs::metadata(&helper).unwrap().len();
    let mut f = fs::OpenOptions::new().write(true).open(&helper).unwrap();
    f.seek(SeekFrom::Start(len - 1)).unwrap();
    f.write_all(b"\x5a").unwrap();
    drop(f);
    assert_ne!(
        sha256_file(&helper),
        sha,
        "the change did not change the hash"
    );
    assert_eq!(fs::metadata(&helper).unwrap().len(), len);
    let (code, v) = run(&helper, &sha, &cache, &ws, false);
    assert_eq!(code, 125, "a changed helper ran: {v}");
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["kind"], "helper");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("mismatch"), "{msg}");
}
