//! Filesystem probes: reads, writes and namespace-changing file operations.
//!
//! Host safety: `write` only appends a marker line to the file it is given
//! (creating it if needed); `truncate`/`rename`/`link` act on the paths given
//! (tests point them at fixtures); `mknod` creates a `/dev/null`-equivalent
//! character device (1:3) and removes it at once; `open-write` opens for
//! writing and closes without writing a byte, so it is safe on
//! `/proc/sys/kernel/core_pattern` and `/proc/sysrq-trigger`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use crate::{arg, cstr, errno, parse_i64, Outcome, ProbeResult, Setup};

/// The line `write` appends.
pub(crate) const WRITE_MARKER: &[u8] = b"cordon-probe-write\n";

/// At most this many bytes are read when looking for a marker.
const READ_LIMIT: u64 = 1 << 20;

/// Judge bytes read from a file against an optional marker.
fn judge_read(data: &[u8], marker: Option<&String>, what: &str) -> ProbeResult {
    match marker {
        None => Ok(Outcome::Allowed(format!(
            "read {} bytes from {what}",
            data.len()
        ))),
        Some(m) if contains(data, m.as_bytes()) => {
            Ok(Outcome::Allowed(format!("read marker {m:?} from {what}")))
        }
        // Read succeeded but returned something else: not a denial, and not the
        // attack succeeding either. The caller's fixture is wrong.
        Some(m) => Err(Setup(format!(
            "read {} bytes from {what} but the marker {m:?} is not in them",
            data.len()
        ))),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// `read PATH [MARKER]`: open read-only and read. ALLOWED when the read
/// succeeds (and returns MARKER when one is given).
pub(crate) fn read(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return Ok(Outcome::from_io(&e, format!("open {path}"))),
    };
    let mut data = Vec::new();
    if let Err(e) = (&mut file).take(READ_LIMIT).read_to_end(&mut data) {
        return Ok(Outcome::from_io(&e, format!("read {path}")));
    }
    judge_read(&data, args.get(1), path)
}

/// `unmask-read PATH MARKER`: detach whatever is mounted over PATH
/// (umount2 MNT_DETACH, in the current mount namespace) and read what lies
/// beneath. ALLOWED when that read returns MARKER; DENIED with umount2's errno
/// (or the open's) otherwise. Only the calling sandbox's mount table changes.
pub(crate) fn unmask_read(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    arg(args, 1, "MARKER")?;
    let c = cstr(path)?;
    // SAFETY: valid NUL-terminated path; affects only our mount namespace.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Ok(Outcome::denied_now(format!("umount2({path})")));
    }
    read(args)
}

/// `read-fd FD [MARKER]`: read an inherited descriptor from offset 0 with
/// `pread` (falling back to `read` for pipes). ALLOWED when it returns data
/// (containing MARKER when given).
pub(crate) fn read_fd(args: &[String]) -> ProbeResult {
    let fd = parse_i64(arg(args, 0, "FD")?)? as i32;
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: buf is a live, writable allocation of buf.len() bytes; an
    // invalid fd only makes the call fail with EBADF.
    let mut n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 && errno() == libc::ESPIPE {
        // SAFETY: as above.
        n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    }
    if n < 0 {
        return Ok(Outcome::denied_now(format!("read fd {fd}")));
    }
    buf.truncate(n as usize);
    judge_read(&buf, args.get(1), &format!("fd {fd}"))
}

/// `write PATH`: open O_WRONLY|O_CREAT|O_APPEND (0644) and append
/// [`WRITE_MARKER`]. ALLOWED when the file grew by the marker's length
/// (checked with `fstat` on the same fd, so it needs no read right).
pub(crate) fn write(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let mut file = match OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => return Ok(Outcome::from_io(&e, format!("open {path} for writing"))),
    };
    let before = file.metadata().map(|m| m.size()).unwrap_or(0);
    if let Err(e) = file.write_all(WRITE_MARKER) {
        return Ok(Outcome::from_io(&e, format!("write {path}")));
    }
    let after = file
        .metadata()
        .map_err(|e| Setup(format!("fstat {path}: {e}")))?
        .size();
    if after >= before + WRITE_MARKER.len() as u64 {
        Ok(Outcome::Allowed(format!(
            "appended {} bytes to {path}",
            WRITE_MARKER.len()
        )))
    } else {
        Err(Setup(format!(
            "write to {path} returned success but size went {before} -> {after}"
        )))
    }
}

/// `truncate PATH`: truncate(2) to length 0. ALLOWED when the call succeeded
/// and `stat` then reports size 0.
pub(crate) fn truncate(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let c = cstr(path)?;
    // SAFETY: c is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::truncate(c.as_ptr(), 0) } != 0 {
        return Ok(Outcome::denied_now(format!("truncate {path}")));
    }
    match std::fs::metadata(path) {
        Ok(m) if m.len() == 0 => Ok(Outcome::Allowed(format!("truncated {path} to 0 bytes"))),
        Ok(m) => Err(Setup(format!(
            "truncate succeeded but {path} has {} bytes",
            m.len()
        ))),
        Err(e) => Err(Setup(format!("stat {path} after truncate: {e}"))),
    }
}

/// `rename FROM TO`: rename(2). ALLOWED when it succeeded and TO now exists.
pub(crate) fn rename(args: &[String]) -> ProbeResult {
    let (from, to) = (arg(args, 0, "FROM")?, arg(args, 1, "TO")?);
    if let Err(e) = std::fs::rename(from, to) {
        return Ok(Outcome::from_io(&e, format!("rename {from} -> {to}")));
    }
    match std::fs::symlink_metadata(to) {
        Ok(_) => Ok(Outcome::Allowed(format!("renamed {from} -> {to}"))),
        Err(e) => Err(Setup(format!("rename succeeded but lstat {to}: {e}"))),
    }
}

/// `link FROM TO`: hard link. ALLOWED when it succeeded and TO has the same
/// inode as FROM.
pub(crate) fn link(args: &[String]) -> ProbeResult {
    let (from, to) = (arg(args, 0, "FROM")?, arg(args, 1, "TO")?);
    if let Err(e) = std::fs::hard_link(from, to) {
        return Ok(Outcome::from_io(&e, format!("link {from} -> {to}")));
    }
    let same = match (
        std::fs::symlink_metadata(from),
        std::fs::symlink_metadata(to),
    ) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    };
    if same {
        Ok(Outcome::Allowed(format!("hard-linked {from} as {to}")))
    } else {
        Err(Setup(format!(
            "link succeeded but {to} is not the same inode as {from}"
        )))
    }
}

/// `symlink-read LINK TARGET [MARKER]`: create LINK -> TARGET, then open LINK
/// and read through it. ALLOWED when the read through the link succeeds
/// (returning MARKER when given). The link is left in place for the caller to
/// inspect (it is created where the caller said, normally a fixture dir).
pub(crate) fn symlink_read(args: &[String]) -> ProbeResult {
    let (link, target) = (arg(args, 0, "LINK")?, arg(args, 1, "TARGET")?);
    if let Err(e) = std::os::unix::fs::symlink(target, link) {
        return Ok(Outcome::from_io(&e, format!("symlink {link} -> {target}")));
    }
    let mut file = match File::open(link) {
        Ok(f) => f,
        Err(e) => return Ok(Outcome::from_io(&e, format!("open {link} (-> {target})"))),
    };
    let mut data = Vec::new();
    if let Err(e) = (&mut file).take(READ_LIMIT).read_to_end(&mut data) {
        return Ok(Outcome::from_io(&e, format!("read {link} (-> {target})")));
    }
    judge_read(&data, args.get(2), &format!("{link} -> {target}"))
}

/// `mknod PATH`: create a character device 1:3 (the `/dev/null` device, so
/// harmless even if it lands) and unlink it at once. ALLOWED when mknod(2)
/// succeeded.
pub(crate) fn mknod(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let c = cstr(path)?;
    let dev = libc::makedev(1, 3);
    // SAFETY: c is a valid NUL-terminated path; mode and dev are plain values.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, dev) } != 0 {
        return Ok(Outcome::denied_now(format!("mknod {path} c 1 3")));
    }
    let _ = std::fs::remove_file(path);
    Ok(Outcome::Allowed(format!(
        "created character device 1:3 at {path} (removed)"
    )))
}

/// `struct file_handle` with room for any handle the kernel returns.
#[repr(C)]
struct FileHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; 128],
}

/// `open-by-handle PATH [MARKER]`: name_to_handle_at(PATH) then
/// open_by_handle_at (needs CAP_DAC_READ_SEARCH: it bypasses every path
/// check, the "shocker" container escape). ALLOWED when the handle opens and
/// reads (returning MARKER when given).
pub(crate) fn open_by_handle(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    let c = cstr(path)?;
    let mut handle = FileHandle {
        handle_bytes: 128,
        handle_type: 0,
        f_handle: [0; 128],
    };
    let mut mount_id: libc::c_int = 0;
    // SAFETY: c is a valid path; handle and mount_id are live, writable and
    // handle_bytes says how much room f_handle has.
    let r = unsafe {
        libc::syscall(
            libc::SYS_name_to_handle_at,
            libc::AT_FDCWD,
            c.as_ptr(),
            &mut handle as *mut FileHandle,
            &mut mount_id as *mut libc::c_int,
            0,
        )
    };
    if r != 0 {
        return Ok(Outcome::denied_now(format!("name_to_handle_at {path}")));
    }
    // mount_fd only selects the mount; the kernel refuses O_PATH fds there,
    // and opening PATH for reading would defeat the point. AT_FDCWD means the
    // cwd's mount, so move into PATH's directory (chdir needs no Landlock
    // right, only search permission).
    let dir = std::path::Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        std::env::set_current_dir(dir)
            .map_err(|e| Setup(format!("chdir {}: {e}", dir.display())))?;
    }
    // SAFETY: handle was filled by the kernel above and outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_by_handle_at,
            libc::AT_FDCWD,
            &mut handle as *mut FileHandle,
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Ok(Outcome::denied_now(format!("open_by_handle_at {path}")));
    }
    // SAFETY: fd was just returned by open_by_handle_at and is owned by nobody else.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    let mut data = Vec::new();
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Ok(Outcome::Allowed(format!(
            "opened directory {path} by handle"
        )));
    }
    if let Err(e) = (&mut file).take(READ_LIMIT).read_to_end(&mut data) {
        return Ok(Outcome::from_io(
            &e,
            format!("read {path} opened by handle"),
        ));
    }
    judge_read(&data, args.get(1), &format!("{path} (by handle)"))
}

/// `open-write PATH`: open O_WRONLY (no O_CREAT, no O_TRUNC) and close without
/// writing anything. ALLOWED when the open succeeded. Safe on
/// `/proc/sys/kernel/core_pattern` and `/proc/sysrq-trigger`: only a write
/// would act.
pub(crate) fn open_write(args: &[String]) -> ProbeResult {
    let path = arg(args, 0, "PATH")?;
    match OpenOptions::new().write(true).open(path) {
        Ok(_f) => Ok(Outcome::Allowed(format!(
            "opened {path} for writing (nothing written)"
        ))),
        Err(e) => Ok(Outcome::from_io(&e, format!("open {path} O_WRONLY"))),
    }
}

/// `fds`: list open descriptors above 2 (found with fcntl(F_GETFD), so it
/// needs no /proc), each with its /proc/self/fd target when readable.
/// ALLOWED when any is open.
pub(crate) fn fds(_args: &[String]) -> ProbeResult {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a live, writable rlimit.
    let limit = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0 {
        rl.rlim_cur.min(65536) as i32
    } else {
        1024
    };
    let mut open = Vec::new();
    for fd in 3..limit {
        // SAFETY: F_GETFD only reads the descriptor flags; EBADF for closed fds.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
            let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "?".into());
            open.push(format!("{fd}={target}"));
        }
    }
    if open.is_empty() {
        Ok(Outcome::denied(0, "no fd above 2 is open"))
    } else {
        Ok(Outcome::Allowed(format!("open fds: {}", open.join(" "))))
    }
}

/// `setid-file HOW PATH [MODE]`: give PATH the setuid/setgid bits of MODE
/// (octal, default 4755) by one route: `chmod`, `fchmod`, `fchmodat`,
/// `fchmodat2` (on a file first created 0644), or by creating it with MODE:
/// `open`, `openat`, `creat`, `mknod`, `mknodat`, `openat2`, `tmpfile`
/// (`O_TMPFILE` in PATH's directory, then linked to PATH where the kernel
/// lets it). umask is 0. ALLOWED when the file really carries the bits
/// (checked with fstat); a call that succeeded but whose bits the kernel
/// cleared is DENIED `-`. The file is left for the caller to inspect; it is
/// empty, so even with the bits it runs nothing.
pub(crate) fn setid_file(args: &[String]) -> ProbeResult {
    let how = arg(args, 0, "HOW")?;
    let path = arg(args, 1, "PATH")?;
    let mode = match args.get(2) {
        Some(m) => u32::from_str_radix(m, 8).map_err(|_| Setup(format!("bad octal MODE {m:?}")))?,
        None => 0o4755,
    };
    let c = cstr(path)?;
    // SAFETY: umask only changes this process's creation mask.
    unsafe { libc::umask(0) };
    let create_plain = || -> Result<OwnedFd, Setup> {
        // SAFETY: c is a valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            )
        };
        if fd < 0 {
            return Err(Setup(format!("cannot create {path}: errno {}", errno())));
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    let m = mode as libc::mode_t;
    // Each arm returns the syscall's result: an fd (or 0) on success, -1 with
    // errno. Returned fds are wrapped below.
    let rc: i64 = match how {
        "chmod" => {
            drop(create_plain()?);
            // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
            unsafe { libc::chmod(c.as_ptr(), m) as i64 }
        }
        "fchmod" => {
            let fd = create_plain()?;
            // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
            let r = unsafe { libc::fchmod(std::os::fd::AsRawFd::as_raw_fd(&fd), m) as i64 };
            drop(fd);
            r
        }
        "fchmodat" => {
            drop(create_plain()?);
            // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
            unsafe { libc::fchmodat(libc::AT_FDCWD, c.as_ptr(), m, 0) as i64 }
        }
        "fchmodat2" => {
            drop(create_plain()?);
            // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
            unsafe { libc::syscall(452, libc::AT_FDCWD, c.as_ptr(), mode as libc::c_long, 0) }
        }
        // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
        "open" => unsafe {
            libc::syscall(
                libc::SYS_open,
                c.as_ptr(),
                (libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC) as libc::c_long,
                mode as libc::c_long,
            )
        },
        // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
        "openat" => unsafe {
            libc::openat(
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                m,
            ) as i64
        },
        // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
        "creat" => unsafe { libc::creat(c.as_ptr(), m) as i64 },
        // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
        "mknod" => unsafe { libc::mknod(c.as_ptr(), libc::S_IFREG | m, 0) as i64 },
        // SAFETY: c is a valid NUL-terminated path; the other arguments are plain values.
        "mknodat" => unsafe {
            libc::mknodat(libc::AT_FDCWD, c.as_ptr(), libc::S_IFREG | m, 0) as i64
        },
        "openat2" => {
            #[repr(C)]
            struct OpenHow {
                flags: u64,
                mode: u64,
                resolve: u64,
            }
            let how = OpenHow {
                flags: (libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC) as u64,
                mode: u64::from(mode),
                resolve: 0,
            };
            // SAFETY: c is a valid NUL-terminated path, `how` a live open_how
            // of the size passed.
            unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    &how as *const OpenHow,
                    std::mem::size_of::<OpenHow>(),
                )
            }
        }
        "tmpfile" => {
            let dir = std::path::Path::new(path)
                .parent()
                .ok_or_else(|| Setup(format!("{path} has no parent directory")))?;
            let d = cstr(dir.to_str().unwrap_or("."))?;
            // SAFETY: d is a valid NUL-terminated path; the other arguments are plain values.
            unsafe {
                libc::open(
                    d.as_ptr(),
                    libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC,
                    m,
                ) as i64
            }
        }
        _ => return Err(Setup(format!("unknown HOW {how:?}"))),
    };
    if rc < 0 {
        return Ok(Outcome::denied_now(format!("{how} {path} mode {mode:o}")));
    }
    let opened = matches!(how, "open" | "openat" | "creat" | "openat2" | "tmpfile");
    // SAFETY: for these routes rc is the fd the call just returned.
    let fd = opened.then(|| unsafe { OwnedFd::from_raw_fd(rc as i32) });
    let mut linked = "";
    if how == "tmpfile" {
        let fd = fd
            .as_ref()
            .map(std::os::fd::AsRawFd::as_raw_fd)
            .unwrap_or(-1);
        let proc = cstr(&format!("/proc/self/fd/{fd}"))?;
        // SAFETY: valid paths and fds; failure is reported, not fatal.
        let ok = unsafe {
            libc::linkat(
                fd,
                c"".as_ptr(),
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::AT_EMPTY_PATH,
            ) == 0
                || libc::linkat(
                    libc::AT_FDCWD,
                    proc.as_ptr(),
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                ) == 0
        };
        linked = if ok { ", linked" } else { ", not linked" };
    }
    let st = match &fd {
        Some(fd) => File::from(fd.try_clone().map_err(|e| Setup(e.to_string()))?).metadata(),
        None => std::fs::metadata(path),
    }
    .map_err(|e| Setup(format!("cannot stat {path} after {how}: {e}")))?;
    let got = st.mode() & 0o7777;
    if got & 0o6000 == mode & 0o6000 {
        Ok(Outcome::Allowed(format!(
            "{how}: {path} has mode {got:o}{linked}"
        )))
    } else {
        Ok(Outcome::denied(
            0,
            format!("{how} succeeded but {path} has mode {got:o}, not {mode:o}"),
        ))
    }
}
