//! Raw system calls, each in a tiny wrapper returning `io::Result`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A close-on-exec pipe: (read, write).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Duplicate `fd` to a close-on-exec fd numbered at least `min`.
pub fn dup_above(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    // Raw: musl's fcntl follows F_DUPFD_CLOEXEC with a redundant F_SETFD.
    // SAFETY: F_DUPFD_CLOEXEC takes an int argument and creates a new fd.
    let n = cvt(
        unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, min) } as libc::c_int,
    )?;
    // SAFETY: `n` was just created and is owned by us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Is `sig`'s disposition SIG_IGN?
pub fn signal_ignored(sig: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only writes the old one into
    // a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The soft RLIMIT_NOFILE (infinity as `u64::MAX`).
pub fn nofile_soft_limit() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one struct rlimit we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return u64::MAX;
    }
    rl.rlim_cur
}

/// Ask for a pipe of `bytes` capacity (`F_SETPIPE_SZ`).
pub fn set_pipe_size(fd: RawFd, bytes: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETPIPE_SZ on an open pipe fd; no pointers involved.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, bytes) })?;
    Ok(())
}

/// The fd's file status flags (`F_GETFL`).
pub fn status_flags(fd: RawFd) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL on an open fd; no pointers involved.
    cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })
}

/// Set the fd's file status flags (`F_SETFL`).
pub fn set_status_flags(fd: RawFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETFL on an open fd; no pointers involved.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) })?;
    Ok(())
}

pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on an fd we own; no pointers involved.
    let fl = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) })?;
    Ok(())
}

/// A pidfd for `pid` (readable when it exits).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, returns a new fd or -1.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `pidfd_send_signal(2)`: signal the very process the pidfd names, never a
/// process that reused its pid.
pub fn pidfd_send_signal(pidfd: &OwnedFd, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: a pidfd we own, a signal number, no siginfo, no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            std::os::fd::AsRawFd::as_raw_fd(pidfd),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    cvt(unsafe { libc::kill(pid, sig) }).map(|_| ())
}

pub fn fchown(fd: RawFd, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: fchown on an fd we own; no pointers.
    cvt(unsafe { libc::fchown(fd, uid, gid) }).map(|_| ())
}

pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid writable memory of `buf.len()` bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid readable memory of `buf.len()` bytes.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: `fds` is a valid slice of pollfd structs of the given length.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Become a subreaper: a sandbox process orphaned by bwrap's death (e.g. its
/// pid-namespace init, if bwrap is killed before that child armed
/// --die-with-parent) is reparented to us instead of init, so we can kill it.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) only sets a process attribute.
    cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) }).map(|_| ())
}

/// Reap `pid` without blocking forever: it has been SIGKILLed.
pub fn waitpid(pid: libc::pid_t) {
    let mut st = 0;
    // SAFETY: waitpid on a pid; `st` is a valid int to write the status into.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// open(2) with O_CLOEXEC, as one raw openat: musl's open() follows every
/// O_CLOEXEC open with a redundant fcntl(F_SETFD) for kernels older than 2.6.23.
pub fn open(p: &std::path::Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is NUL-terminated and outlives the call; openat returns a new fd or -1.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags | libc::O_CLOEXEC,
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// The whole content of a (small, usually /proc) file: raw open, reads until EOF.
/// The entry names of directory `p` ("." and ".." left out), unsorted.
/// getdents64 into a buffer of ours: musl's `opendir` mallocs its buffer
/// outside Rust's allocator and unmaps it on close, and an unmap after bwrap
/// has been started (which shared our memory until its exec) costs a TLB
/// shootdown on the other CPU.
pub fn dir_names(p: &std::path::Path) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let d = open(p, libc::O_RDONLY | libc::O_DIRECTORY)?;
    // u64 elements: linux_dirent64 records are 8-byte aligned.
    let mut buf = [0u64; 512];
    let mut names = Vec::new();
    loop {
        // SAFETY: buf is writable for its whole size in bytes; d is an open directory.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                d.as_raw_fd(),
                buf.as_mut_ptr(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(names);
        }
        // SAFETY: the first n bytes of buf were written by the kernel; u64 to u8 is a valid view.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
        let mut off = 0;
        // Each record: d_ino u64, d_off i64, d_reclen u16, d_type u8, then the
        // NUL-terminated name, padded to d_reclen.
        while off + 19 <= bytes.len() {
            let reclen = u16::from_ne_bytes([bytes[off + 16], bytes[off + 17]]) as usize;
            if reclen < 19 || off + reclen > bytes.len() {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let name = &bytes[off + 19..off + reclen];
            let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
            if name != b"." && name != b".." {
                names.push(std::ffi::OsStr::from_bytes(name).to_owned());
            }
            off += reclen;
        }
    }
}

pub fn read_all(p: &std::path::Path) -> io::Result<Vec<u8>> {
    read_fd(
        &mut std::fs::File::from(open(p, libc::O_RDONLY)?),
        4096,
        usize::MAX,
    )
}

/// Read `f` to its end, starting with a `cap`-byte buffer (one read for the
/// content and one for EOF when `cap` is right; std's read_to_end probes with
/// small reads first), and at most `limit` bytes.
fn read_fd(f: &mut std::fs::File, cap: usize, limit: usize) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut v = vec![0u8; cap.max(1)];
    let mut n = 0;
    loop {
        if n == v.len() {
            if n >= limit {
                break;
            }
            v.resize(n.saturating_mul(2).min(limit), 0);
        }
        match f.read(&mut v[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    v.truncate(n);
    Ok(v)
}

/// The content of a private file of ours: a regular file (never through a
/// symlink, never blocking on a FIFO) owned by the effective uid, with no group
/// or other permission bits, of at most `max` bytes. None otherwise.
pub fn read_private(p: &std::path::Path, max: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let f =
        std::fs::File::from(open(p, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK).ok()?);
    let m = f.metadata().ok()?;
    if !m.is_file() || m.uid() != geteuid() || m.mode() & 0o077 != 0 || m.size() > max {
        return None;
    }
    let size = m.size() as usize;
    let mut f = f;
    let buf = read_fd(&mut f, size + 1, size + 1).ok()?;
    if buf.len() > size {
        return None; // grew while we read: not the file we checked
    }
    Some(buf)
}

/// Write all of `buf` to `fd`, retrying on EINTR and short writes.
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match write(fd, buf) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reap our child `pid` if it is a zombie already; true if it was reaped.
pub fn try_reap(pid: libc::pid_t) -> bool {
    let mut st = 0;
    // SAFETY: waitpid with WNOHANG on our own child; `st` is a valid int.
    unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) == pid }
}

/// Wait for our child `pid` to exit and reap it.
pub fn wait_exit(pid: libc::pid_t) -> io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    loop {
        let mut st = 0;
        // SAFETY: waitpid on our own child; `st` is a valid int to write into.
        if unsafe { libc::waitpid(pid, &mut st, 0) } >= 0 {
            return Ok(std::process::ExitStatus::from_raw(st));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub fn getpid() -> libc::pid_t {
    // SAFETY: no preconditions.
    unsafe { libc::getpid() }
}

pub fn uname_release() -> String {
    // SAFETY: utsname is plain data; zeroed is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname for uname to fill.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates `release`.
    unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

pub fn geteuid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

pub fn getegid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::getegid() }
}

/// The file type bits (`st_mode & S_IFMT`) of an open fd, and which file
/// it is (`st_dev`, `st_ino`).
pub fn fd_type(fd: RawFd) -> io::Result<(libc::mode_t, (u64, u64))> {
    // SAFETY: fstat writes only the struct it is given, which is plain data
    // and may start zeroed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat struct for the call.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.st_mode & libc::S_IFMT, (st.st_dev, st.st_ino)))
}

/// Total RAM in bytes; 0 when it cannot be read.
pub fn mem_bytes() -> u64 {
    // SAFETY: sysinfo only writes the struct it is given, which is plain
    // data and may start zeroed.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: `si` is a valid, writable sysinfo struct for the call.
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return 0;
    }
    (si.totalram as u64).saturating_mul(u64::from(si.mem_unit.max(1)))
}

#[cfg(test)]
mod read_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn read_all_and_read_private() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        std::fs::write(&p, &data).unwrap();
        assert_eq!(read_all(&p).unwrap(), data);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_private(&p, 1 << 20).unwrap(), data);
        assert!(read_private(&p, 100).is_none(), "larger than max");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_private(&p, 1 << 20).is_none(), "not private");
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&p, &l).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_private(&l, 1 << 20).is_none(), "through a symlink");
        std::fs::write(&p, b"").unwrap();
        assert_eq!(read_private(&p, 10).unwrap(), b"");
    }

    #[test]
    fn dir_names_lists_what_read_dir_lists() {
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        // Enough long names to take several getdents64 calls, and a name
        // that is not UTF-8.
        for i in 0..300 {
            std::fs::write(d.path().join(format!("{i:0>60}")), "").unwrap();
        }
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let odd = std::ffi::OsStr::from_bytes(b"x\xff");
        std::fs::write(d.path().join(odd), "").unwrap();
        let mut got = dir_names(d.path()).unwrap();
        got.sort();
        let mut want: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        want.sort();
        assert_eq!(got.len(), 302);
        assert_eq!(got, want);
        assert!(dir_names(&d.path().join("sub")).unwrap().is_empty());
        let e = dir_names(&d.path().join(odd)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));
        let e = dir_names(&d.path().join("missing")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    }
}
