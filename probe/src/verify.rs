//! Probes added for `cordon verify` (docs/verify.md): each still makes one
//! real attempt and follows the output contract of `main.rs`.
//!
//! Host safety: `leak` only reads; `nnp` only queries; `ro-detach` changes
//! only the mount view of the probe's own new (user, mount) namespace, made
//! private first so nothing propagates out, and appends one line to the file
//! it is given (a fixture); `with-ppid` runs another probe.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;

use crate::fs::WRITE_MARKER;
use crate::{arg, cstr, errno, Outcome, ProbeResult, Setup};

/// `leak PATH MARKER`: ALLOWED when PATH can be read and contains MARKER.
/// Unlike `read`, a successful read without the marker is a DENIED `-`
/// ("readable, no secret in it"), not a setup error: used on files such as
/// `/proc/1/environ` that exist but must not carry the secret.
pub(crate) fn leak(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let marker = arg(args, 1, "MARKER")?;
    if marker.is_empty() {
        return Err(Setup("MARKER must not be empty".into()));
    }
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return Ok(Outcome::from_io(&e, format!("open {path}"))),
    };
    let mut data = Vec::new();
    if let Err(e) = (&mut file).take(1 << 20).read_to_end(&mut data) {
        return Ok(Outcome::from_io(&e, format!("read {path}")));
    }
    let m = marker.as_bytes();
    if data.windows(m.len()).any(|w| w == m) {
        Ok(Outcome::Allowed(format!("read the marker from {path}")))
    } else {
        Ok(Outcome::denied(
            0,
            format!(
                "{path} readable ({} bytes) but the marker is absent",
                data.len()
            ),
        ))
    }
}

/// `nnp`: ALLOWED when NO_NEW_PRIVS is off, i.e. an exec of a setuid/setgid
/// or file-capability binary could still gain privilege.
pub(crate) fn nnp(_args: &[String]) -> ProbeResult {
    // SAFETY: PR_GET_NO_NEW_PRIVS only reads a flag of this thread.
    let r = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    match r {
        0 => Ok(Outcome::Allowed(
            "NO_NEW_PRIVS is off: exec can gain privilege".into(),
        )),
        1 => Ok(Outcome::denied(0, "NO_NEW_PRIVS is on")),
        _ => Ok(Outcome::denied_now("prctl(PR_GET_NO_NEW_PRIVS)")),
    }
}

fn write_proc(path: &str, text: &str) -> bool {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .is_ok()
}

/// `ro-detach PATH`: the "rewrite a read-only bind inside a writable parent"
/// chain. unshare(CLONE_NEWUSER|CLONE_NEWNS), map ourselves to root in the new
/// user namespace, make the mount tree private, then detach the bind at PATH
/// (umount2 MNT_DETACH) or, failing that, remount it read-write, and append
/// [`WRITE_MARKER`] to PATH. ALLOWED when PATH grew; DENIED with the errno of
/// the first step that failed (the detail names it).
pub(crate) fn ro_detach(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let c = cstr(path)?;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: plain flags; affects only this process.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return Ok(Outcome::denied_now(
            "step 1: unshare(CLONE_NEWUSER|CLONE_NEWNS)",
        ));
    }
    let mapped = write_proc("/proc/self/setgroups", "deny")
        && write_proc("/proc/self/uid_map", &format!("0 {uid} 1"))
        && write_proc("/proc/self/gid_map", &format!("0 {gid} 1"));
    let root = cstr("/")?;
    // SAFETY: valid NUL-terminated target; null source/fstype/data are allowed
    // for a propagation change. Our own mount namespace only.
    unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    let mut steps = format!(
        "unshare ok, uid map {}",
        if mapped { "ok" } else { "failed" }
    );
    // SAFETY: valid NUL-terminated path; only our private mount namespace changes.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        steps.push_str(", umount ok");
    } else {
        let e = errno();
        // SAFETY: as above; a bind remount without MS_RDONLY asks for read-write.
        let r = unsafe {
            libc::mount(
                std::ptr::null(),
                c.as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND,
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Ok(Outcome::denied(
                e,
                format!(
                    "{steps}; step 2: umount2({path}) and remount rw (errno {}) both failed",
                    errno()
                ),
            ));
        }
        steps.push_str(", remount rw ok");
    }
    let mut file = match OpenOptions::new().append(true).open(path) {
        Ok(f) => f,
        Err(e) => {
            return Ok(Outcome::from_io(
                &e,
                format!("{steps}; step 3: open {path} for writing"),
            ))
        }
    };
    let before = file.metadata().map(|m| m.size()).unwrap_or(0);
    if let Err(e) = file.write_all(WRITE_MARKER) {
        return Ok(Outcome::from_io(
            &e,
            format!("{steps}; step 3: write {path}"),
        ));
    }
    let after = file.metadata().map(|m| m.size()).unwrap_or(0);
    if after > before {
        Ok(Outcome::Allowed(format!("{steps}; appended to {path}")))
    } else {
        Err(Setup(format!(
            "write to {path} succeeded but size stayed {before}"
        )))
    }
}

/// `umount`: umount2 on a fresh empty directory (made under `$TMPDIR` or
/// /tmp, removed afterwards). The kernel checks the privilege first, then
/// answers EINVAL because the directory is not a mount point: EINVAL means
/// "reached the kernel with privilege" (ALLOWED), anything else is DENIED.
/// Nothing can be unmounted: the directory was made for this call.
pub(crate) fn umount(_args: &[String]) -> ProbeResult {
    let base = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let dir =
        std::path::Path::new(&base).join(format!("cordon-probe-umount-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| Setup(format!("mkdir {}: {e}", dir.display())))?;
    let c = cstr(&dir.to_string_lossy())?;
    // SAFETY: valid NUL-terminated path of a directory we just created.
    let r = unsafe { libc::umount2(c.as_ptr(), 0) };
    let e = errno();
    let _ = std::fs::remove_dir(&dir);
    if r == 0 {
        return Err(Setup(format!(
            "umount2 {} succeeded on a fresh directory",
            dir.display()
        )));
    }
    if e == libc::EINVAL {
        Ok(Outcome::Allowed(format!(
            "umount2({}) reached the kernel with privilege (EINVAL: not a mount point)",
            dir.display()
        )))
    } else {
        Ok(Outcome::denied(e, format!("umount2({})", dir.display())))
    }
}
