//! Privilege probes: namespaces, mounts, root directory, uid, capabilities.
//!
//! Host safety: namespace probes change only the probe's own (short-lived)
//! process or a child that exits at once. `mount` mounts a 1 MiB tmpfs on a
//! fresh empty directory and detaches it again. `fsopen` only creates an
//! unconfigured filesystem context, `open-tree` a detached clone that vanishes
//! with its fd, `chroot` goes to `/` (no change). `move-mount` and
//! `pivot-root` use arguments the kernel rejects right after the privilege
//! check (invalid flags, nonexistent paths), so "reached the kernel with
//! privilege" (EINVAL / ENOENT) counts as ALLOWED, EPERM as DENIED.

use crate::{arg, cstr, errno, Outcome, ProbeResult, Setup};

/// fork() as a raw clone with extra `flags` (0 for a plain fork): Ok(0) in the
/// child, Ok(pid) in the parent, Err(errno) when refused.
pub(crate) fn fork_raw(flags: libc::c_ulong) -> Result<libc::pid_t, i32> {
    // SAFETY: a raw clone without CLONE_VM and with a null stack behaves like
    // fork(): the child gets a copy of our memory and only calls _exit.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags | libc::SIGCHLD as libc::c_ulong,
            0,
            0,
            0,
            0,
        )
    };
    if pid < 0 {
        Err(errno())
    } else {
        Ok(pid as libc::pid_t)
    }
}

/// Wait for `pid` and return its exit code; if it was killed by a signal, die
/// of the same signal (a SIGSYS from a seccomp filter must reach our caller as
/// a signal).
pub(crate) fn reap(pid: libc::pid_t) -> Result<i32, Setup> {
    let mut status = 0;
    loop {
        // SAFETY: status is a live, writable int.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if r == pid {
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            return Err(Setup(format!("waitpid {pid}: errno {}", errno())));
        }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restoring the default disposition and raising the child's
        // signal on ourselves is how a shell propagates a child's death.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return Err(Setup(format!("child died of signal {sig}")));
    }
    Ok(libc::WEXITSTATUS(status))
}

/// `unshare-user`: unshare(CLONE_NEWUSER) for this process.
pub(crate) fn unshare_user(_args: &[String]) -> ProbeResult {
    // SAFETY: unshare only changes this single-threaded process's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0 {
        Ok(Outcome::Allowed("entered a new user namespace".into()))
    } else {
        Ok(Outcome::denied_now("unshare(CLONE_NEWUSER)"))
    }
}

/// `unshare-mount`: unshare(CLONE_NEWNS) for this process.
pub(crate) fn unshare_mount(_args: &[String]) -> ProbeResult {
    // SAFETY: unshare only changes this single-threaded process's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } == 0 {
        Ok(Outcome::Allowed("entered a new mount namespace".into()))
    } else {
        Ok(Outcome::denied_now("unshare(CLONE_NEWNS)"))
    }
}

/// `clone-newuser`: clone(CLONE_NEWUSER|SIGCHLD); the child exits at once.
pub(crate) fn clone_newuser(_args: &[String]) -> ProbeResult {
    match fork_raw(libc::CLONE_NEWUSER as libc::c_ulong) {
        Ok(0) => {
            // SAFETY: in the child: leave immediately without running destructors.
            unsafe { libc::_exit(0) }
        }
        Ok(pid) => {
            reap(pid)?;
            Ok(Outcome::Allowed(format!(
                "clone(CLONE_NEWUSER) created child {pid}"
            )))
        }
        Err(e) => Ok(Outcome::denied(e, "clone(CLONE_NEWUSER)")),
    }
}

/// `struct clone_args` (CLONE_ARGS_SIZE_VER0 = 64 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

/// `clone3-newuser`: clone3({flags: CLONE_NEWUSER, exit_signal: SIGCHLD}); the
/// child exits at once. Filters are expected to answer ENOSYS (clone3's
/// arguments are in memory, which seccomp cannot inspect).
pub(crate) fn clone3_newuser(_args: &[String]) -> ProbeResult {
    let mut ca = CloneArgs {
        flags: libc::CLONE_NEWUSER as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..Default::default()
    };
    // SAFETY: ca is a live clone_args of the size passed; no CLONE_VM and no
    // stack, so the child runs on a copy of our memory and only calls _exit.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut ca as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    match pid {
        0 => {
            // SAFETY: in the child: leave immediately without running destructors.
            unsafe { libc::_exit(0) }
        }
        p if p > 0 => {
            reap(p as libc::pid_t)?;
            Ok(Outcome::Allowed(format!(
                "clone3(CLONE_NEWUSER) created child {p}"
            )))
        }
        _ => Ok(Outcome::denied_now("clone3(CLONE_NEWUSER)")),
    }
}

/// `setns PATH`: open a namespace file (e.g. /proc/1/ns/mnt) and join it.
/// Only this process moves.
pub(crate) fn setns(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let c = cstr(path)?;
    // SAFETY: c is a valid NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Ok(Outcome::denied_now(format!("open {path}")));
    }
    // SAFETY: fd is the namespace fd just opened; setns changes only this
    // single-threaded process.
    let r = unsafe { libc::setns(fd, 0) };
    let e = errno();
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
    if r == 0 {
        Ok(Outcome::Allowed(format!("joined namespace {path}")))
    } else {
        Ok(Outcome::denied(e, format!("setns {path}")))
    }
}

/// Make a fresh empty directory under $TMPDIR (or /tmp).
fn fresh_dir() -> Result<String, Setup> {
    let base = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let template = cstr(&format!("{base}/cordon-probe-mnt.XXXXXX"))?;
    let mut bytes = template.into_bytes_with_nul();
    // SAFETY: bytes is a writable NUL-terminated template ending in XXXXXX.
    let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(Setup(format!(
            "cannot create a fresh dir under {base}: errno {}",
            errno()
        )));
    }
    bytes.pop();
    String::from_utf8(bytes).map_err(|_| Setup("non-UTF-8 temp dir".into()))
}

/// `mount [FRESH_DIR]`: mount a 1 MiB nosuid,nodev,noexec tmpfs on FRESH_DIR
/// (which must be an empty directory made for the purpose) or on a directory
/// made with mkdtemp under $TMPDIR, then detach it and remove the directory
/// we made. ALLOWED when mount(2) returned 0.
pub(crate) fn mount(args: &[String]) -> ProbeResult {
    let (dir, made) = match args.first() {
        Some(d) => (d.clone(), false),
        None => (fresh_dir()?, true),
    };
    let target = cstr(&dir)?;
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: all strings are valid NUL-terminated literals or owned CStrings.
    let r = unsafe {
        libc::mount(
            c"cordon-probe".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            flags,
            c"size=1m".as_ptr().cast(),
        )
    };
    let e = errno();
    if r == 0 {
        // SAFETY: target is the mount point we just created.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
    if made {
        let _ = std::fs::remove_dir(&dir);
    }
    if r == 0 {
        Ok(Outcome::Allowed(format!(
            "mounted tmpfs on {dir} (unmounted)"
        )))
    } else {
        Ok(Outcome::denied(e, format!("mount tmpfs on {dir}")))
    }
}

/// `fsopen`: fsopen("tmpfs") creates an unconfigured filesystem context (the
/// new mount API's first step); it is closed without being used.
pub(crate) fn fsopen(_args: &[String]) -> ProbeResult {
    // SAFETY: a valid literal and a flag; the fd returned is closed below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_fsopen,
            c"tmpfs".as_ptr(),
            1, /* FSOPEN_CLOEXEC */
        )
    };
    if fd < 0 {
        return Ok(Outcome::denied_now("fsopen(\"tmpfs\")"));
    }
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd as i32) };
    Ok(Outcome::Allowed(
        "fsopen(\"tmpfs\") returned a filesystem context".into(),
    ))
}

/// `open-tree [PATH]`: open_tree(PATH, OPEN_TREE_CLONE) makes a detached copy
/// of the mount at PATH (default `/`), which disappears when its fd is closed.
pub(crate) fn open_tree(args: &[String]) -> ProbeResult {
    let path = args.first().map(String::as_str).unwrap_or("/");
    let c = cstr(path)?;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    // SAFETY: c is a valid path; the fd returned is closed below.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    if fd < 0 {
        return Ok(Outcome::denied_now(format!(
            "open_tree({path}, OPEN_TREE_CLONE)"
        )));
    }
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd as i32) };
    Ok(Outcome::Allowed(format!(
        "open_tree cloned the mount at {path} (detached, dropped)"
    )))
}

/// `move-mount`: move_mount with an invalid flag. The kernel checks
/// CAP_SYS_ADMIN (may_mount) first and the flags second, so EINVAL means the
/// call reached the kernel with mount privilege (ALLOWED); nothing moves.
pub(crate) fn move_mount(_args: &[String]) -> ProbeResult {
    // SAFETY: valid literals; the invalid flag guarantees the call is rejected.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            libc::AT_FDCWD,
            c"/nonexistent-cordon-probe-a".as_ptr(),
            libc::AT_FDCWD,
            c"/nonexistent-cordon-probe-b".as_ptr(),
            0x8000_0000u32,
        )
    };
    let e = errno();
    if r != 0 && e == libc::EINVAL {
        Ok(Outcome::Allowed(
            "move_mount reached the kernel with mount privilege (EINVAL for a bad flag)".into(),
        ))
    } else if r == 0 {
        Err(Setup("move_mount with an invalid flag succeeded?".into()))
    } else {
        Ok(Outcome::denied(e, "move_mount"))
    }
}

/// `pivot-root`: pivot_root on nonexistent paths. The kernel checks
/// CAP_SYS_ADMIN (may_mount) before looking the paths up, so ENOENT means
/// the call reached the kernel with privilege (ALLOWED); nothing changes.
pub(crate) fn pivot_root(_args: &[String]) -> ProbeResult {
    // SAFETY: valid literals naming paths that do not exist.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pivot_root,
            c"/nonexistent-cordon-probe-new".as_ptr(),
            c"/nonexistent-cordon-probe-old".as_ptr(),
        )
    };
    let e = errno();
    if r != 0 && e == libc::ENOENT {
        Ok(Outcome::Allowed(
            "pivot_root reached the kernel with privilege (ENOENT for missing paths)".into(),
        ))
    } else if r == 0 {
        Err(Setup("pivot_root on nonexistent paths succeeded?".into()))
    } else {
        Ok(Outcome::denied(e, "pivot_root"))
    }
}

/// `chroot`: chroot("/") (needs CAP_SYS_CHROOT; changes nothing).
pub(crate) fn chroot(_args: &[String]) -> ProbeResult {
    // SAFETY: valid literal; chroot to / only affects this process.
    if unsafe { libc::chroot(c"/".as_ptr()) } == 0 {
        Ok(Outcome::Allowed("chroot(\"/\") succeeded".into()))
    } else {
        Ok(Outcome::denied_now("chroot(\"/\")"))
    }
}

/// `setuid0`: setresuid(0, 0, 0). ALLOWED when it succeeded; the detail
/// says which uids we had before (a process already root succeeds without
/// any privilege).
pub(crate) fn setuid0(_args: &[String]) -> ProbeResult {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: three live, writable uid_t.
    unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    // Raw syscall: musl's wrapper would broadcast to threads (we have one).
    // SAFETY: plain integer arguments.
    if unsafe { libc::syscall(libc::SYS_setresuid, 0, 0, 0) } == 0 {
        Ok(Outcome::Allowed(format!(
            "setresuid(0,0,0) succeeded (before: {r},{e},{s})"
        )))
    } else {
        Ok(Outcome::denied_now(format!(
            "setresuid(0,0,0) (uids {r},{e},{s})"
        )))
    }
}

/// `caps`: print CapInh/CapPrm/CapEff/CapBnd/CapAmb, NoNewPrivs and Seccomp
/// from /proc/self/status. ALLOWED when any capability set is non-zero.
pub(crate) fn caps(_args: &[String]) -> ProbeResult {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| Setup(format!("read /proc/self/status: {e}")))?;
    let keys = [
        "CapInh",
        "CapPrm",
        "CapEff",
        "CapBnd",
        "CapAmb",
        "NoNewPrivs",
        "Seccomp",
    ];
    let mut fields = Vec::new();
    let mut any_cap = false;
    for key in keys {
        let value = status
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
            .map(str::trim)
            .ok_or_else(|| Setup(format!("{key} missing from /proc/self/status")))?;
        if key.starts_with("Cap") {
            let v = u64::from_str_radix(value, 16)
                .map_err(|_| Setup(format!("{key}: bad value {value:?}")))?;
            any_cap |= v != 0;
        }
        fields.push(format!("{key}={value}"));
    }
    let line = fields.join(" ");
    if any_cap {
        Ok(Outcome::Allowed(line))
    } else {
        Ok(Outcome::denied(0, line))
    }
}

/// `personality`: set ADDR_NO_RANDOMIZE (turns ASLR off for later execs of
/// this process; nothing else is affected). ALLOWED when the flag reads back.
pub(crate) fn personality(_args: &[String]) -> ProbeResult {
    const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;
    const QUERY: libc::c_ulong = 0xffff_ffff;
    // SAFETY: 0xffffffff only queries the persona.
    let cur = unsafe { libc::personality(QUERY) };
    if cur < 0 {
        return Ok(Outcome::denied_now("personality(query)"));
    }
    // SAFETY: changes only this process's execution domain flags.
    if unsafe { libc::personality(cur as libc::c_ulong | ADDR_NO_RANDOMIZE) } < 0 {
        return Ok(Outcome::denied_now("personality(ADDR_NO_RANDOMIZE)"));
    }
    // SAFETY: query again.
    let now = unsafe { libc::personality(QUERY) };
    if now >= 0 && (now as libc::c_ulong & ADDR_NO_RANDOMIZE) != 0 {
        Ok(Outcome::Allowed(format!(
            "persona {cur:#x} -> {now:#x} (ADDR_NO_RANDOMIZE set)"
        )))
    } else {
        Ok(Outcome::denied(
            errno(),
            format!("ADDR_NO_RANDOMIZE did not stick (persona {now:#x})"),
        ))
    }
}
