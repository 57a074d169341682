//! Raw system calls the crates we use do not wrap, each in a tiny function
//! returning `io::Result`. Every `unsafe` in the helper lives here.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn open_raw(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstr(path)?;
    // The raw syscall: musl's open() follows O_CLOEXEC with a redundant
    // fcntl(F_SETFD), one extra syscall per Landlock rule.
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c.as_ptr(), flags, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = fd as RawFd;
    // SAFETY: `fd` was just returned by open(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `O_PATH` fd for a Landlock rule. Opened by hand: with musl, std's
/// custom-flags path strips O_PATH and would really open (and block on) FIFOs
/// and devices (field notes).
pub fn open_path(path: &Path, follow: bool) -> io::Result<OwnedFd> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    open_raw(path, libc::O_PATH | libc::O_CLOEXEC | nofollow)
}

/// An `O_PATH` fd for a directory (symlinks followed), to open entries in it.
pub fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    open_raw(path, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
}

/// An `O_PATH` fd for `name` inside the directory `dir`: a one-component
/// lookup instead of walking the whole path from `/`. `follow`: whether a
/// symlink `name` is followed (as `open_path` does) or opened itself.
pub fn open_path_at(dir: &OwnedFd, name: &std::ffi::OsStr, follow: bool) -> io::Result<OwnedFd> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let c = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains a NUL byte"))?;
    // SAFETY: `c` is NUL-terminated and outlives the call; `dir` is an open fd.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | nofollow,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// An `O_PATH` fd for `path`, refused (ELOOP) if any component on the way
/// is a symlink; a symlink as the last component is opened itself.
/// `openat2` with `RESOLVE_NO_SYMLINKS`; one component at a time before 5.6.
pub fn open_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    let c = cstr(path)?;
    // SAFETY: open_how is plain data; all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `c` is NUL-terminated and `how` a valid open_how of the size
    // given; the kernel only reads both.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            c.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        // SAFETY: `fd` was just returned by openat2(2) and is owned by nobody else.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ENOSYS) {
        return Err(e);
    }
    open_walk_no_symlinks(path)
}

/// `open_no_symlinks` for kernels without `openat2`: one `O_PATH|O_NOFOLLOW`
/// open per component, each checked not to be a symlink before the next.
pub fn open_walk_no_symlinks(path: &Path) -> io::Result<OwnedFd> {
    let mut comps = path.components();
    if comps.next() != Some(std::path::Component::RootDir) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut at = open_dir_path(Path::new("/"))?;
    let mut names = comps.peekable();
    while let Some(name) = names.next() {
        let next = open_path_at(&at, name.as_os_str(), false)?;
        let link = fstat(next.as_raw_fd())?.st_mode & libc::S_IFMT == libc::S_IFLNK;
        if link && names.peek().is_some() {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        at = next;
    }
    Ok(at)
}

/// `statx` of an open fd (`AT_EMPTY_PATH`): type, inode and attributes such
/// as `STATX_ATTR_MOUNT_ROOT`.
pub fn statx_fd(fd: &OwnedFd) -> io::Result<libc::statx> {
    const STATX_TYPE: u32 = 0x1;
    const STATX_INO: u32 = 0x100;
    // SAFETY: statx is plain data; all zeroes is a valid value.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the empty path is NUL-terminated, `st` is writable and has the
    // kernel's struct statx layout; the kernel writes only into it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            STATX_TYPE | STATX_INO,
            &mut st as *mut libc::statx,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Is the mount an open fd (`O_PATH` will do) lies on read-only?
pub fn on_read_only_mount(fd: &OwnedFd) -> io::Result<bool> {
    // SAFETY: statvfs is plain data; all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable statvfs struct for the call.
    check(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) })?;
    Ok(st.f_flag & libc::ST_RDONLY != 0)
}

/// Open the policy file: never follow a symlink, never block on a FIFO.
pub fn open_policy(path: &Path) -> io::Result<OwnedFd> {
    open_raw(
        path,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
    )
}

/// This thread's status file, open, if /proc is a real procfs (checked with
/// fstatfs on the open fd, so a look-alike file is never believed). Each read
/// from offset 0 shows the thread's state at that moment; opened before
/// Landlock, it stays readable after.
pub fn open_thread_status() -> Option<OwnedFd> {
    open_status_file(Path::new("/proc/thread-self/status"))
}

/// The process's status file, as [`open_thread_status`]. For a process of
/// one thread, as the helper is, its fields are that thread's (the
/// capability sets are the leader's), and it is fewer lookups away: in the
/// sandbox's fresh procfs `/proc/thread-self/status` cost ≈ 0.1 ms more
/// per run (`<pid>/task/<tid>` created, then flushed at exit).
pub fn open_process_status() -> Option<OwnedFd> {
    open_status_file(Path::new("/proc/self/status"))
}

fn open_status_file(path: &Path) -> Option<OwnedFd> {
    let fd = open_raw(path, libc::O_RDONLY | libc::O_CLOEXEC).ok()?;
    // SAFETY: an all-zero statfs is a valid value for fstatfs to overwrite.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `sf` is a valid statfs to write into.
    // f_type is i64 on glibc and u64 on musl: the cast is needed on one only.
    #[allow(clippy::unnecessary_cast)]
    let ok = unsafe { libc::fstatfs(fd.as_raw_fd(), &mut sf) } == 0
        && sf.f_type as i64 == libc::PROC_SUPER_MAGIC as i64;
    ok.then_some(fd)
}

/// The status file's current content, read from offset 0.
///
/// A read that returns less than it was offered ends it: the status file is
/// generated whole by one `show` call into the kernel's buffer, so a short
/// read has copied all of it. Reading on to get 0 would have the kernel
/// generate the whole text again (≈ 15 µs here, twice per run).
pub fn read_status(fd: &OwnedFd) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(n * 2, 0);
        }
        // SAFETY: reads into the unused tail of `buf`, within its length.
        let r = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                buf[n..].as_mut_ptr().cast(),
                buf.len() - n,
                n as libc::off_t,
            )
        };
        match r {
            0 => break,
            r if r > 0 => {
                let offered = buf.len() - n;
                n += r as usize;
                if (r as usize) < offered {
                    break;
                }
            }
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    buf.truncate(n);
    String::from_utf8(buf).ok()
}

/// poll(2) with a zero timeout: fills each entry's `revents`.
pub fn poll_now(fds: &mut [libc::pollfd]) -> io::Result<()> {
    // SAFETY: `fds` is a valid, writable array of `fds.len()` pollfd entries.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `stat`; a bad fd yields EBADF.
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

pub fn is_dir(fd: &OwnedFd) -> io::Result<bool> {
    Ok(fstat(fd.as_raw_fd())?.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

/// Take ownership of an inherited fd after checking that it is open.
pub fn adopt_fd(fd: RawFd) -> io::Result<OwnedFd> {
    fd_flags(fd)?;
    // SAFETY: the fd is open (F_GETFD succeeded) and the caller hands its
    // ownership to us: nothing else in the helper uses this number.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn fd_flags(fd: RawFd) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFD only reads the fd's flags; a bad fd yields EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_GETFD) })
}

pub fn set_cloexec(fd: RawFd) -> io::Result<()> {
    let flags = fd_flags(fd)?;
    // SAFETY: F_SETFD with valid flags on an fd we checked is open.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) })?;
    Ok(())
}

/// `landlock_add_rule(2)` for one path-beneath rule. The landlock crate's
/// `add_rule` fstats every rule fd to strip directory rights from files; the
/// planner has already done that with its own fstat, and at 1 000 rules the
/// second one costs ~0.8 ms here.
pub fn landlock_add_path_rule(ruleset: &OwnedFd, parent: &OwnedFd, access: u64) -> io::Result<()> {
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_uint = 1;
    // The kernel's struct landlock_path_beneath_attr: packed, 12 bytes.
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a valid landlock_path_beneath_attr that outlives the
    // call; the kernel only reads it. Both fds are open (borrowed).
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    } as libc::c_int)?;
    Ok(())
}

/// Landlock ABI version of the running kernel; 0 or less when unavailable.
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attr and size 0 this call only reports the ABI.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

fn prctl(op: libc::c_int, a: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: the prctl options used here take integer arguments only.
    check(unsafe {
        libc::prctl(
            op,
            a,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    })
}

pub fn set_no_new_privs() -> io::Result<()> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1)?;
    Ok(())
}

pub fn no_new_privs() -> io::Result<bool> {
    Ok(prctl(libc::PR_GET_NO_NEW_PRIVS, 0)? == 1)
}

pub fn seccomp_mode() -> io::Result<i32> {
    prctl(libc::PR_GET_SECCOMP, 0)
}

pub fn securebits() -> io::Result<u32> {
    Ok(prctl(libc::PR_GET_SECUREBITS, 0)? as u32)
}

pub fn set_securebits(bits: u32) -> io::Result<()> {
    prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong)?;
    Ok(())
}

/// Whether the kernel supports a seccomp return action.
pub fn seccomp_action_available(action: u32) -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    // SAFETY: the kernel reads one u32 from a pointer to a live local.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_uint,
            &action as *const u32,
        ) == 0
    }
}

/// close_range(2); `Err` with ENOSYS/EINVAL on kernels before 5.9.
pub fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: closing fds has no memory-safety impact; the caller made sure
    // no live OwnedFd in this process refers to the range.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn close(fd: RawFd) {
    // SAFETY: as for close_range: the fd is not owned by any live object.
    unsafe { libc::close(fd) };
}

/// write(2) the whole buffer without allocating (usable under the filter).
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid readable slice for its whole length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// execve(2). Returns only on failure, with the errno.
pub fn execve(path: &CStr, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> i32 {
    debug_assert!(argv.last().is_some_and(|p| p.is_null()));
    debug_assert!(envp.last().is_some_and(|p| p.is_null()));
    // SAFETY: `path` is NUL-terminated; `argv` and `envp` are NULL-terminated
    // arrays of pointers to NUL-terminated strings owned by the caller, alive
    // for the duration of the call.
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// access(path, X_OK) for the PATH search.
pub fn executable(path: &CStr) -> bool {
    // SAFETY: `path` is a valid NUL-terminated string.
    unsafe { libc::access(path.as_ptr(), libc::X_OK) == 0 }
}

pub fn exists(path: &CStr) -> bool {
    // SAFETY: `path` is a valid NUL-terminated string.
    unsafe { libc::access(path.as_ptr(), libc::F_OK) == 0 }
}

/// Leave immediately, without running destructors or atexit handlers
/// (which could need syscalls the filter denies).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and takes any int.
    unsafe { libc::_exit(code) }
}

/// `clone(CLONE_VM | CLONE_VFORK)`: run `cb` in a child process on `stack`,
/// in our memory, and return its pid once it has exec'd or exited (we are
/// suspended until then).
///
/// # Safety
/// Until it execs or exits, `cb` runs in our address space on our thread's
/// TLS: it must make system calls only (no allocation, no lock, nothing
/// that leaves our state changed but what it writes on purpose, such as an
/// atomic failure word), and everything it reads must outlive this call.
pub unsafe fn clone_vfork(
    cb: Box<dyn FnMut() -> isize + '_>,
    stack: &mut [u8],
) -> io::Result<libc::pid_t> {
    use nix::sched::CloneFlags;
    // SAFETY: the caller upholds the child's discipline (above); `stack` is
    // ours for the call, which returns only after the child has left it.
    unsafe {
        nix::sched::clone(
            cb,
            stack,
            CloneFlags::CLONE_VM | CloneFlags::CLONE_VFORK,
            Some(libc::SIGCHLD),
        )
    }
    .map(|p| p.as_raw())
    .map_err(|e| io::Error::from_raw_os_error(e as i32))
}

/// landlock_restrict_self(2) with a ruleset fd, as a raw system call (for the
/// command's process between clone and exec, see [`clone_vfork`]).
pub fn landlock_restrict_self(ruleset: RawFd) -> io::Result<()> {
    // SAFETY: takes an fd and flags 0; reads no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// waitpid(pid) for a child known to have exited; its status is dropped.
pub fn reap(pid: libc::pid_t) {
    let mut st = 0;
    // SAFETY: waitpid writes the status into `st`, a valid int.
    unsafe { libc::waitpid(pid, &mut st, 0) };
}

/// wait4(-1): the next child to end, as (pid, status); EINTR is retried.
pub fn wait_any() -> io::Result<(libc::pid_t, libc::c_int)> {
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: wait4 writes the status into `st`; a null rusage is allowed.
        let r = unsafe { libc::wait4(-1, &mut st, 0, std::ptr::null_mut()) };
        if r >= 0 {
            return Ok((r, st));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// SIGKILL `pid`; errors ignored (it may be gone already).
pub fn kill_now(pid: libc::pid_t) {
    // SAFETY: kill takes any pid and signal number.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Not dumpable: another process of our uid can then neither ptrace us nor
/// read our memory through /proc.
pub fn set_not_dumpable() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) only sets a process attribute.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Restore SIGPIPE's default disposition. Rust's runtime ignores SIGPIPE,
/// and an ignored disposition survives execve: `yes | head` inside would
/// otherwise spin on EPIPE instead of dying as it does everywhere else.
pub fn default_sigpipe() -> io::Result<()> {
    // SAFETY: installing SIG_DFL for SIGPIPE runs no code of ours.
    if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process is in a user namespace other than the initial one.
pub fn in_user_namespace() -> Option<bool> {
    let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
    let first: Vec<&str> = map.split_whitespace().take(3).collect();
    Some(first != ["0", "0", "4294967295"])
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;

/// Clear the effective, permitted and inheritable sets in one capset(2).
pub fn capset_empty() -> io::Result<()> {
    let hdr = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: `hdr` and the two-element `data` array (v3 layout) are valid
    // for the kernel to read; capset does not write through them.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &hdr as *const CapHeader, data.as_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Drop one capability from the bounding set. EINVAL means the kernel does
/// not know that capability, which is as good as dropped.
pub fn capbset_drop(cap: u8) -> io::Result<()> {
    match prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap)) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        Err(e) => Err(e),
    }
}
