//! Preflight: find bwrap, run a real no-op sandbox (the helper's `--version`
//! inside the same namespaces, /proc and uid as a real run), classify failures,
//! and cache conclusive results per bwrap identity, kernel and uid.

use crate::error::{Error, Result};
use crate::helper_bin::Helper;
use crate::plan::ProcStrategy;
use crate::sys;
use serde_json::json;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `$CORDON_BWRAP`, else `bwrap` in `$PATH`.
pub fn find_bwrap(env_bwrap: Option<&str>, path_var: Option<&str>) -> Result<PathBuf> {
    if let Some(b) = env_bwrap.filter(|b| !b.is_empty()) {
        let p = PathBuf::from(b);
        return match std::fs::metadata(&p) {
            Ok(m) if m.is_file() => Ok(p),
            Ok(_) => Err(Error::BwrapMissing(format!(
                "CORDON_BWRAP={b} is not a regular file"
            ))),
            Err(e) => Err(Error::BwrapMissing(format!("CORDON_BWRAP={b}: {e}"))),
        };
    }
    for d in path_var
        .unwrap_or("/usr/bin:/bin")
        .split(':')
        .filter(|d| d.starts_with('/'))
    {
        let p = Path::new(d).join("bwrap");
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::BwrapMissing("no bwrap in PATH".into()))
}

/// Classify bwrap's stderr.
pub fn classify_bwrap_error(stderr: &str) -> Error {
    let s = stderr.to_ascii_lowercase();
    let userns = [
        "no permissions to creat",
        "setting up uid map",
        "creating new namespace failed",
        "user namespace",
        "unshare failed",
    ];
    if userns.iter().any(|m| s.contains(m)) {
        return Error::UserNamespacesRefused {
            stderr: stderr.trim().into(),
        };
    }
    if s.contains("proc")
        && (s.contains("operation not permitted") || s.contains("permission denied"))
    {
        return Error::ProcRefused {
            stderr: stderr.trim().into(),
        };
    }
    Error::BwrapFailed {
        stderr: stderr.trim().into(),
    }
}

/// Transient failures worth retrying (never cached).
fn inconclusive(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    s.contains("resource temporarily unavailable")
        || s.contains("cannot allocate memory")
        || s.contains("timed out")
}

/// The no-op sandbox's argv (fd 3 = the verified helper).
pub fn probe_argv(bwrap: &Path, uid: u32, gid: u32, proc_: ProcStrategy) -> Vec<String> {
    let mut a: Vec<String> = vec![bwrap.to_string_lossy().into_owned(), "--unshare-all".into()];
    a.extend(crate::plan::ALWAYS_FLAGS.iter().map(|f| f.to_string()));
    a.extend([
        "--uid".into(),
        uid.to_string(),
        "--gid".into(),
        gid.to_string(),
    ]);
    a.extend(["--dev".into(), "/dev".into()]);
    match proc_ {
        ProcStrategy::Fresh => a.extend(["--proc".into(), "/proc".into()]),
        ProcStrategy::BindRo => a.extend(["--ro-bind".into(), "/proc".into(), "/proc".into()]),
        ProcStrategy::Tmpfs => a.extend(["--tmpfs".into(), "/proc".into()]),
    }
    a.extend([
        "--ro-bind-fd".into(),
        "3".into(),
        crate::plan::HELPER_PATH.into(),
    ]);
    a.extend([
        "--".into(),
        crate::plan::HELPER_PATH.into(),
        "--version".into(),
    ]);
    a
}

/// Run the no-op sandbox once: Ok(()) or what bwrap printed.
fn attempt(
    argv: &[String],
    helper: &OwnedFd,
    switch: Option<(u32, u32)>,
) -> std::result::Result<(), String> {
    let (ok, text) = run_sandbox(argv, helper, switch)?;
    if ok {
        Ok(())
    } else {
        Err(text)
    }
}

/// Start `argv` as the sandbox itself is started (`spawn.rs`: exact fds, the
/// uid switch, the parent-death signal, its own process group) with only
/// `env` in its environment: stdin /dev/null, fd 3 = `fd3` when given,
/// stdout and stderr into one pipe when `capture`, else /dev/null.
fn start(
    argv: &[String],
    env: &[String],
    fd3: Option<&OwnedFd>,
    switch: Option<(u32, u32)>,
    capture: bool,
) -> std::result::Result<(libc::pid_t, Option<OwnedFd>), String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    let cstr = |s: &str| CString::new(s).map_err(|_| format!("NUL byte in {s:?}"));
    let null = sys::open(Path::new("/dev/null"), libc::O_RDWR).map_err(|e| io("/dev/null", e))?;
    let (out_r, out_w) = if capture {
        let (r, w) = sys::pipe().map_err(|e| io("pipe", e))?;
        (Some(r), w)
    } else {
        (None, null.try_clone().map_err(|e| io("dup", e))?)
    };
    let mut targets: Vec<(i32, &OwnedFd)> = vec![(0, &null), (1, &out_w), (2, &out_w)];
    targets.extend(fd3.map(|f| (3, f)));
    // Every source above every target, so no dup2 in the child clobbers one.
    let first_free = targets.len() as i32;
    let sources = targets
        .iter()
        .map(|(t, f)| Ok((*t, sys::dup_above(f.as_raw_fd(), first_free)?)))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| io("dup", e))?;
    let spec = crate::spawn::Spec {
        program: cstr(&argv[0])?,
        argv: argv
            .iter()
            .map(|a| cstr(a))
            .collect::<std::result::Result<_, _>>()?,
        envp: env
            .iter()
            .map(|e| cstr(e))
            .collect::<std::result::Result<_, _>>()?,
        cwd: cstr("/")?,
        fds: sources.iter().map(|(t, s)| (*t, s.as_raw_fd())).collect(),
        switch_to: switch,
        reset_signals: crate::spawn::signals_to_reset(),
    };
    let pid = crate::spawn::spawn(&spec).map_err(|e| format!("spawn {}: {e}", argv[0]))?;
    Ok((pid, out_r))
}

/// Run a probe sandbox (fd 3 = the verified helper) as the sandbox uid:
/// whether it exited 0, and what it printed (stdout and stderr together).
fn run_sandbox(
    argv: &[String],
    helper: &OwnedFd,
    switch: Option<(u32, u32)>,
) -> std::result::Result<(bool, String), String> {
    let (pid, out) = start(argv, &[], Some(helper), switch, true)?;
    let mut text = Vec::new();
    if let Some(out) = out {
        // Read to EOF before waiting: a full pipe would block the child.
        let _ = std::io::Read::read_to_end(&mut std::fs::File::from(out), &mut text);
    }
    let status = sys::wait_exit(pid).map_err(|e| format!("wait: {e}"))?;
    let mut text = String::from_utf8_lossy(&text).into_owned();
    if !status.success() && text.trim().is_empty() {
        // Nothing said (not bwrap, or killed): at least how it ended.
        text = format!("{} ended with {status} and no message", argv[0]);
    }
    Ok((status.success(), text))
}

/// What the shell inside the /proc check runs: $1 = the sibling's pid, $2 =
/// its secret. Prints what leaked and exits 1, or exits 0.
pub const BIND_RO_CHECK: &str = r#"s=0
if tr '\0' '\n' < /proc/"$1"/environ 2>/dev/null | grep -qF "$2"; then echo "the sibling's environment is readable"; s=1; fi
if kill -0 "$1" 2>/dev/null; then echo "the sibling can be signalled"; s=1; fi
ls /proc/self/fd >/dev/null 2>&1 || { echo "/proc/self/fd is not readable"; s=1; }
head -c 1 /proc/self/maps >/dev/null 2>&1 || { echo "/proc/self/maps is not readable"; s=1; }
exit $s"#;

/// Is a read-only bind of the host's /proc safe here? A sibling process of
/// the sandbox's uid holds a random secret in its environment; from inside a
/// sandbox with `--ro-bind /proc /proc` the secret must be unreadable and the
/// sibling unsignalable, while /proc/self/{fd,maps} stay readable. Needs the
/// system's /usr for the shell. Err(why) when unsafe or undecided.
fn bind_ro_is_safe(i: &ProbeInput, helper: &OwnedFd) -> std::result::Result<(), String> {
    let mut secret = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut secret))
        .map_err(|e| format!("no randomness for the planted secret: {e}"))?;
    let secret = crate::helper_bin::sha256_hex(&secret)[..32].to_string();
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .ok_or("no sleep(1) for the sibling process")?;
    // spawn returns once the exec has happened, so the secret is in place.
    let (sibling, _) = start(
        &[sleep.into(), "30".into()],
        &[format!("CORDON_PROBE_SECRET={secret}")],
        None,
        i.switch,
        false,
    )
    .map_err(|e| format!("sibling: {e}"))?;
    let pid = sibling.to_string();
    let mut a = probe_argv(i.bwrap, i.uid, i.gid, ProcStrategy::BindRo);
    a.truncate(a.iter().position(|x| x == "--").unwrap_or(a.len()));
    a.extend(["--ro-bind".into(), "/usr".into(), "/usr".into()]);
    for d in ["/bin", "/sbin", "/lib", "/lib64"] {
        match std::fs::read_link(d) {
            Ok(t) => a.extend([
                "--symlink".into(),
                t.to_string_lossy().into_owned(),
                d.into(),
            ]),
            Err(_) if Path::new(d).is_dir() => a.extend(["--ro-bind".into(), d.into(), d.into()]),
            Err(_) => {}
        }
    }
    a.extend([
        "--".into(),
        "/bin/sh".into(),
        "-c".into(),
        BIND_RO_CHECK.into(),
    ]);
    a.extend(["sh".into(), pid, secret]);
    let out = run_sandbox(&a, helper, i.switch);
    // SAFETY: kill(2) on our own child, not reaped before the wait below.
    unsafe { libc::kill(sibling, libc::SIGKILL) };
    let _ = sys::wait_exit(sibling);
    let (ok, said) = out?;
    if ok {
        Ok(())
    } else {
        Err(said.trim().replace('\n', "; "))
    }
}

const PROBE_ATTEMPTS: u32 = 4;

fn attempt_retrying(
    argv: &[String],
    helper: &OwnedFd,
    switch: Option<(u32, u32)>,
) -> std::result::Result<(), (String, bool)> {
    retrying(|| attempt(argv, helper, switch), std::thread::sleep)
}

/// Four attempts, 50, 150 and 450 ms apart (no wait after the last one).
/// Err((message, conclusive)).
fn retrying(
    mut attempt: impl FnMut() -> std::result::Result<(), String>,
    mut sleep: impl FnMut(Duration),
) -> std::result::Result<(), (String, bool)> {
    let mut delay = Duration::from_millis(50);
    let mut last = String::new();
    for n in 0..PROBE_ATTEMPTS {
        if n > 0 {
            sleep(delay);
            delay *= 3;
        }
        match attempt() {
            Ok(()) => return Ok(()),
            Err(e) if inconclusive(&e) => last = e,
            Err(e) => return Err((e, true)),
        }
    }
    Err((last, false))
}

/// Cache key: bwrap path and identity, kernel release, uid.
pub fn cache_key(bwrap: &Path, uid: u32) -> Option<String> {
    let m = std::fs::metadata(bwrap).ok()?;
    let raw = format!(
        "v1|{}|{}:{}|{}|{}|{}|uid{uid}",
        bwrap.display(),
        m.dev(),
        m.ino(),
        m.mtime(),
        m.size(),
        sys::uname_release()
    );
    Some(crate::helper_bin::cache_name_hash(raw.as_bytes()))
}

pub fn cache_dir(env: &std::collections::BTreeMap<String, String>, euid: u32) -> Option<PathBuf> {
    if let Some(x) = env.get("XDG_CACHE_HOME").filter(|x| x.starts_with('/')) {
        return Some(Path::new(x).join("cordon"));
    }
    if let Some(h) = env.get("HOME").filter(|x| x.starts_with('/')) {
        return Some(Path::new(h).join(".cache/cordon"));
    }
    let run = PathBuf::from(format!("/run/user/{euid}"));
    run.is_dir().then(|| run.join("cordon"))
}

fn cache_read(dir: &Path, key: &str) -> Option<ProcStrategy> {
    let v = cache_read_value(dir, key)?;
    serde_json::from_value(v.get("proc")?.clone()).ok()
}

fn cache_read_value(dir: &Path, key: &str) -> Option<serde_json::Value> {
    let p = dir.join(format!("probe-{key}.json"));
    // Only trust a cache file that is ours and private.
    serde_json::from_slice(&sys::read_private(&p, 64 << 10)?).ok()
}

fn cache_write(dir: &Path, key: &str, proc_: ProcStrategy) {
    cache_write_value(
        dir,
        key,
        &json!({"proc": proc_, "kernel": sys::uname_release()}),
    );
}

fn cache_write_value(dir: &Path, key: &str, body: &serde_json::Value) {
    use std::io::Write;
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let _ = std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let Ok(mut t) = tempfile::Builder::new().prefix(".probe-").tempfile_in(dir) else {
        return;
    };
    if t.write_all(body.to_string().as_bytes()).is_ok() {
        let _ = t.persist(dir.join(format!("probe-{key}.json")));
    }
}

/// Most file masks the sandbox may need; more are not started early.
const MAX_EARLY_FILE_MASKS: u64 = 64;

/// What an early start of bwrap needs from the cache (see `cli::prepare`):
/// the /proc strategy `preflight` would return, and how many file masks the
/// plans so far needed at most (each takes an fd at bwrap's exec). None when
/// the cache does not know both.
pub fn cached_launch(
    bwrap: &Path,
    uid: u32,
    cache_dir: Option<&Path>,
    allow_degraded_outer: bool,
) -> Option<(ProcStrategy, usize)> {
    let v = cache_read_value(cache_dir?, &cache_key(bwrap, uid)?)?;
    let p: ProcStrategy = serde_json::from_value(v.get("proc")?.clone()).ok()?;
    let masks = v
        .get("file_masks")?
        .as_u64()
        .filter(|m| *m <= MAX_EARLY_FILE_MASKS)?;
    (p == ProcStrategy::Fresh || allow_degraded_outer).then_some((p, masks as usize))
}

/// Record that a plan needed `masks` file masks, if that is more than the
/// cache knew (a plain rewrite of the probe's record; nothing when there is
/// none yet).
pub fn remember_file_masks(bwrap: &Path, uid: u32, cache_dir: Option<&Path>, masks: usize) {
    let (Some(dir), Some(key)) = (cache_dir, cache_key(bwrap, uid)) else {
        return;
    };
    let Some(mut v) = cache_read_value(dir, &key) else {
        return;
    };
    // A plan with more masks than an early start allows never starts early:
    // recording it would only stop every later run from doing so. A record
    // above the limit (written before this check) is replaced.
    if masks as u64 > MAX_EARLY_FILE_MASKS {
        return;
    }
    let known = v.get("file_masks").and_then(|m| m.as_u64());
    if known.is_some_and(|k| k >= masks as u64 && k <= MAX_EARLY_FILE_MASKS) {
        return;
    }
    v["file_masks"] = json!(masks);
    cache_write_value(dir, &key, &v);
}

pub struct ProbeInput<'a> {
    pub bwrap: &'a Path,
    pub helper: &'a Helper,
    pub uid: u32,
    pub gid: u32,
    pub switch: Option<(u32, u32)>,
    pub allow_degraded_outer: bool,
    pub cache_dir: Option<PathBuf>,
    /// What `cached_launch` already read from the cache for this bwrap and uid
    /// on this run: not read again.
    pub known: Option<ProcStrategy>,
}

#[derive(Debug, Clone)]
pub struct ProbeOutcome {
    pub proc: ProcStrategy,
    pub cached: bool,
}

/// Decide the /proc strategy by running real no-op sandboxes; fail closed.
pub fn preflight(i: &ProbeInput) -> Result<ProbeOutcome> {
    if let Some(p) = i.known {
        return Ok(ProbeOutcome {
            proc: p,
            cached: true,
        });
    }
    let key = cache_key(i.bwrap, i.uid);
    if let (Some(d), Some(k)) = (&i.cache_dir, &key) {
        if let Some(p) = cache_read(d, k) {
            if p == ProcStrategy::Fresh || i.allow_degraded_outer {
                return Ok(ProbeOutcome {
                    proc: p,
                    cached: true,
                });
            }
        }
    }
    let fd: OwnedFd = i
        .helper
        .file
        .try_clone()
        .map_err(|e| Error::io("dup helper", e))?
        .into();
    let fresh = probe_argv(i.bwrap, i.uid, i.gid, ProcStrategy::Fresh);
    let result = match attempt_retrying(&fresh, &fd, i.switch) {
        Ok(()) => ProcStrategy::Fresh,
        Err((e, true)) => {
            let err = classify_bwrap_error(&e);
            if !matches!(err, Error::ProcRefused { .. } | Error::BwrapFailed { .. }) {
                return Err(err); // user namespaces refused: no fallback
            }
            // The host's /proc, read-only, is as good when the kernel keeps
            // other processes out of reach (it does with a user namespace).
            match bind_ro_is_safe(i, &fd) {
                Ok(()) => ProcStrategy::BindRo,
                Err(why) => {
                    // Does everything but /proc work?
                    let tmpfs = probe_argv(i.bwrap, i.uid, i.gid, ProcStrategy::Tmpfs);
                    match attempt_retrying(&tmpfs, &fd, i.switch) {
                        Ok(()) if i.allow_degraded_outer => ProcStrategy::Tmpfs,
                        Ok(()) => {
                            return Err(Error::ProcRefused {
                                stderr: format!(
                                    "{}; a read-only bind of the host /proc is not safe here either: {why}",
                                    e.trim()
                                ),
                            })
                        }
                        Err((e2, _)) => return Err(classify_bwrap_error(&e2)),
                    }
                }
            }
        }
        Err((e, false)) => {
            return Err(Error::BwrapFailed {
                stderr: format!("preflight inconclusive after retries: {e}"),
            })
        }
    };
    if let (Some(d), Some(k)) = (&i.cache_dir, &key) {
        cache_write(d, k, result);
    }
    Ok(ProbeOutcome {
        proc: result,
        cached: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan too large to start early is not recorded, and a record above
    /// the limit (once written by such a plan) no longer blocks early starts.
    #[test]
    fn file_mask_records_stay_within_the_early_limit() {
        let dir = tempfile::tempdir().unwrap();
        let bwrap = Path::new("/bin/sh");
        let key = cache_key(bwrap, 4242).unwrap();
        let masks = || {
            cache_read_value(dir.path(), &key).unwrap()["file_masks"]
                .as_u64()
                .unwrap()
        };
        cache_write_value(
            dir.path(),
            &key,
            &json!({"proc": "fresh", "file_masks": 3002}),
        );
        assert!(cached_launch(bwrap, 4242, Some(dir.path()), false).is_none());
        remember_file_masks(bwrap, 4242, Some(dir.path()), 2);
        assert_eq!(masks(), 2);
        assert!(cached_launch(bwrap, 4242, Some(dir.path()), false).is_some());
        remember_file_masks(bwrap, 4242, Some(dir.path()), 3002);
        assert_eq!(masks(), 2);
        remember_file_masks(bwrap, 4242, Some(dir.path()), 1);
        assert_eq!(masks(), 2, "never lowered within the limit");
        remember_file_masks(bwrap, 4242, Some(dir.path()), 5);
        assert_eq!(masks(), 5);
    }

    #[test]
    fn transient_failures_are_retried_four_times_without_a_last_wait() {
        let (mut tries, mut slept) = (0, Vec::new());
        let r = retrying(
            || {
                tries += 1;
                Err("bwrap: fork: Resource temporarily unavailable".into())
            },
            |d| slept.push(d.as_millis()),
        );
        assert_eq!(
            r,
            Err((
                "bwrap: fork: Resource temporarily unavailable".into(),
                false
            ))
        );
        assert_eq!(tries, 4);
        assert_eq!(slept, [50, 150, 450]);
        // A conclusive failure stops at once; a success after a retry is one.
        let (mut tries, mut slept) = (0, 0);
        let r = retrying(
            || {
                tries += 1;
                Err("bwrap: Creating new namespace failed: Operation not permitted".into())
            },
            |_| slept += 1,
        );
        assert!(matches!(r, Err((_, true))));
        assert_eq!((tries, slept), (1, 0));
        let mut tries = 0;
        let r = retrying(
            || {
                tries += 1;
                if tries < 2 {
                    Err("Cannot allocate memory".into())
                } else {
                    Ok(())
                }
            },
            |_| {},
        );
        assert_eq!((r, tries), (Ok(()), 2));
    }

    #[test]
    fn classification() {
        assert!(matches!(
            classify_bwrap_error("bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces."),
            Error::UserNamespacesRefused { .. }
        ));
        assert!(matches!(
            classify_bwrap_error("bwrap: setting up uid map: Permission denied"),
            Error::UserNamespacesRefused { .. }
        ));
        assert!(matches!(
            classify_bwrap_error(
                "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
            ),
            Error::ProcRefused { .. }
        ));
        assert!(matches!(
            classify_bwrap_error("bwrap: Can't find source path /x"),
            Error::BwrapFailed { .. }
        ));
        assert!(inconclusive(
            "bwrap: clone: Resource temporarily unavailable"
        ));
        assert!(!inconclusive(
            "bwrap: No permissions to creating new namespace"
        ));
    }

    #[test]
    fn probe_argv_shape() {
        let a = probe_argv(Path::new("/usr/bin/bwrap"), 1000, 1000, ProcStrategy::Fresh);
        assert!(a.windows(2).any(|w| w == ["--proc", "/proc"]));
        assert!(a.contains(&"--disable-userns".to_string()));
        assert_eq!(a.last().unwrap(), "--version");
    }

    #[test]
    fn cache_roundtrip() {
        let d = tempfile::tempdir().unwrap();
        cache_write(d.path(), "k", ProcStrategy::Fresh);
        assert_eq!(cache_read(d.path(), "k"), Some(ProcStrategy::Fresh));
        assert_eq!(cache_read(d.path(), "other"), None);
        let f = d.path().join("probe-k.json");
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        assert_eq!(
            cache_read(d.path(), "k"),
            None,
            "a readable-by-others cache is not trusted"
        );
    }

    #[test]
    fn key_changes_with_uid() {
        let a = cache_key(Path::new("/bin/sh"), 1).unwrap();
        let b = cache_key(Path::new("/bin/sh"), 2).unwrap();
        assert_ne!(a, b);
        assert!(cache_key(Path::new("/nonexistent"), 1).is_none());
    }
}
