//! Kernel attack-surface probes: syscalls a sandboxed program should not reach.
//!
//! Host safety, per probe (also in docs/probe.md):
//! - `bpf` creates a 1-entry array map (no program) and closes it;
//!   `perf-event-open` opens a disabled software counter on itself;
//!   `userfaultfd` (user-mode only) and `io-uring-setup` (1 entry) create an
//!   fd and close it; `keyctl`/`add-key` use the process keyring, which dies
//!   with the probe.
//! - "Reached the kernel with privilege" rule: for calls that must not really
//!   run, the probe passes an argument the kernel rejects only **after** its
//!   privilege check, and counts that rejection as ALLOWED: `reboot` with a bad
//!   magic2 (EINVAL), `kexec-load` with an undefined flag (EINVAL),
//!   `init-module` with an empty image (ENOEXEC), `swapon` and `acct` on a
//!   nonexistent path (ENOENT). EPERM (or any other errno) is DENIED.
//! - `syslog` only asks for the buffer size; `quotactl` is Q_SYNC (flush
//!   quota files, which any user may request); `clock-settime` sets
//!   CLOCK_REALTIME to the value read just before; `sethostname` sets the
//!   current name again.
//! - `tiocsti` injects one byte into a pty it has just created (made its
//!   controlling tty in a child session) and reads it back; `tioclinux` asks
//!   the same kind of fresh pty for the shift state (read-only), and counts the
//!   tty layer's answer for a non-VT (ENOTTY/EINVAL) as ALLOWED.
//! - `int80` and `x32` call getpid through the i386 and x32 entry points.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::priv_::{fork_raw, reap};
use crate::{arg, errno, errno_name, parse_i64, Outcome, ProbeResult, Setup};

/// Close an fd the kernel just handed us and report ALLOWED.
fn allowed_fd(fd: libc::c_long, what: &str) -> ProbeResult {
    // SAFETY: fd was just returned by the kernel and is owned by nobody else.
    drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    Ok(Outcome::Allowed(format!("{what} returned fd {fd}")))
}

/// The "reached the kernel with privilege" rule.
fn reached(r: libc::c_long, e: i32, expected: i32, what: &str) -> ProbeResult {
    if r < 0 && e == expected {
        Ok(Outcome::Allowed(format!(
            "{what} reached the kernel past its privilege check ({} for the bad argument)",
            errno_name(e)
        )))
    } else if r >= 0 {
        Err(Setup(format!(
            "{what} with a deliberately invalid argument returned {r}"
        )))
    } else {
        Ok(Outcome::denied(e, what.to_string()))
    }
}

/// `bpf`: BPF_MAP_CREATE of an array map (key 4, value 4, 1 entry).
pub(crate) fn bpf(_args: &[String]) -> ProbeResult {
    let mut attr = [0u32; 32]; // 128 bytes, the leading map_create fields set
    attr[0] = 2; // BPF_MAP_TYPE_ARRAY
    attr[1] = 4; // key_size
    attr[2] = 4; // value_size
    attr[3] = 1; // max_entries
                 // SAFETY: attr is a live 128-byte buffer whose size is passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0, /* BPF_MAP_CREATE */
            attr.as_mut_ptr(),
            128,
        )
    };
    if fd < 0 {
        return Ok(Outcome::denied_now("bpf(BPF_MAP_CREATE)"));
    }
    allowed_fd(fd, "bpf(BPF_MAP_CREATE)")
}

/// `perf-event-open`: a disabled software CPU-clock counter on ourselves,
/// excluding kernel and hypervisor (allowed at perf_event_paranoid <= 2).
pub(crate) fn perf_event_open(_args: &[String]) -> ProbeResult {
    let mut attr = [0u64; 16]; // struct perf_event_attr, 128 bytes
    attr[0] = 1 | (128u64 << 32); // type PERF_TYPE_SOFTWARE, size 128
    attr[1] = 0; // config PERF_COUNT_SW_CPU_CLOCK
    attr[5] = 1 | (1 << 5) | (1 << 6); // disabled, exclude_kernel, exclude_hv
                                       // SAFETY: attr is a live 128-byte perf_event_attr whose size field says so.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_mut_ptr(),
            0,
            -1,
            -1,
            8, /* FD_CLOEXEC */
        )
    };
    if fd < 0 {
        return Ok(Outcome::denied_now(
            "perf_event_open(software cpu-clock, self)",
        ));
    }
    allowed_fd(fd, "perf_event_open")
}

/// `userfaultfd`: userfaultfd(O_CLOEXEC | UFFD_USER_MODE_ONLY).
pub(crate) fn userfaultfd(_args: &[String]) -> ProbeResult {
    // SAFETY: plain flags.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | 1) };
    if fd < 0 {
        return Ok(Outcome::denied_now("userfaultfd(UFFD_USER_MODE_ONLY)"));
    }
    allowed_fd(fd, "userfaultfd")
}

/// `io-uring-setup`: io_uring_setup(1 entry, zeroed params).
pub(crate) fn io_uring_setup(_args: &[String]) -> ProbeResult {
    let mut params = [0u8; 120]; // struct io_uring_params
                                 // SAFETY: params is a live, writable 120-byte io_uring_params.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()) };
    if fd < 0 {
        return Ok(Outcome::denied_now("io_uring_setup(1)"));
    }
    allowed_fd(fd, "io_uring_setup")
}

const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
const KEY_SPEC_PROCESS_KEYRING: libc::c_long = -2;

/// `keyctl`: KEYCTL_GET_KEYRING_ID of the process keyring, creating it (it
/// dies with the probe).
pub(crate) fn keyctl(_args: &[String]) -> ProbeResult {
    // SAFETY: plain integer arguments.
    let id = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            KEY_SPEC_PROCESS_KEYRING,
            1,
        )
    };
    if id < 0 {
        return Ok(Outcome::denied_now(
            "keyctl(KEYCTL_GET_KEYRING_ID, process keyring)",
        ));
    }
    Ok(Outcome::Allowed(format!("process keyring id {id}")))
}

/// `add-key`: add a "user" key to the process keyring (dies with the probe).
pub(crate) fn add_key(_args: &[String]) -> ProbeResult {
    let payload = b"x";
    // SAFETY: valid literals and a live 1-byte payload whose length is passed.
    let id = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            c"cordon-probe".as_ptr(),
            payload.as_ptr(),
            payload.len(),
            KEY_SPEC_PROCESS_KEYRING,
        )
    };
    if id < 0 {
        return Ok(Outcome::denied_now("add_key(user, process keyring)"));
    }
    Ok(Outcome::Allowed(format!(
        "added key {id} to the process keyring"
    )))
}

/// `kexec-load`: kexec_load with no segments and an undefined flag (0x100):
/// EINVAL after the CAP_SYS_BOOT check means reached (ALLOWED). Never
/// flags 0 with 0 segments: that would unload a loaded crash kernel.
pub(crate) fn kexec_load(_args: &[String]) -> ProbeResult {
    // SAFETY: no segments, null pointer never dereferenced (rejected first).
    let r = unsafe { libc::syscall(libc::SYS_kexec_load, 0, 0, std::ptr::null::<u8>(), 0x100) };
    reached(r, errno(), libc::EINVAL, "kexec_load")
}

/// `init-module`: init_module on an empty image: ENOEXEC after the
/// CAP_SYS_MODULE check means reached (ALLOWED); nothing can load.
pub(crate) fn init_module(_args: &[String]) -> ProbeResult {
    let image = [0u8; 0];
    // SAFETY: a zero-length image and a valid empty parameter string.
    let r = unsafe { libc::syscall(libc::SYS_init_module, image.as_ptr(), 0, c"".as_ptr()) };
    reached(r, errno(), libc::ENOEXEC, "init_module")
}

/// `reboot`: reboot with LINUX_REBOOT_MAGIC1 and a wrong magic2: the kernel
/// checks CAP_SYS_BOOT first (EPERM: DENIED) and the magic second (EINVAL:
/// reached, ALLOWED). Nothing reboots.
pub(crate) fn reboot(_args: &[String]) -> ProbeResult {
    // SAFETY: the wrong magic2 makes the kernel refuse before acting.
    let r = unsafe {
        libc::syscall(
            libc::SYS_reboot,
            0xfee1_deadu32,
            0,
            0,
            std::ptr::null::<u8>(),
        )
    };
    reached(r, errno(), libc::EINVAL, "reboot(bad magic)")
}

/// `swapon`: swapon on a nonexistent path: ENOENT after the CAP_SYS_ADMIN
/// check means reached (ALLOWED).
pub(crate) fn swapon(_args: &[String]) -> ProbeResult {
    // SAFETY: valid literal naming a path that does not exist.
    let r = unsafe {
        libc::syscall(
            libc::SYS_swapon,
            c"/nonexistent-cordon-probe-swap".as_ptr(),
            0,
        )
    };
    reached(r, errno(), libc::ENOENT, "swapon(missing path)")
}

/// `acct`: acct on a nonexistent path: ENOENT after the CAP_SYS_PACCT check
/// means reached (ALLOWED). Never acct(NULL): that turns accounting off.
pub(crate) fn acct(_args: &[String]) -> ProbeResult {
    // SAFETY: valid literal naming a path that does not exist.
    let r = unsafe { libc::syscall(libc::SYS_acct, c"/nonexistent-cordon-probe-acct".as_ptr()) };
    reached(r, errno(), libc::ENOENT, "acct(missing path)")
}

/// `syslog`: SYSLOG_ACTION_SIZE_BUFFER (read-only; gated by dmesg_restrict).
pub(crate) fn syslog(_args: &[String]) -> ProbeResult {
    // SAFETY: action 10 takes no buffer.
    let r = unsafe { libc::syscall(libc::SYS_syslog, 10, std::ptr::null_mut::<u8>(), 0) };
    if r < 0 {
        return Ok(Outcome::denied_now("syslog(SIZE_BUFFER)"));
    }
    Ok(Outcome::Allowed(format!("kernel log buffer is {r} bytes")))
}

/// `quotactl`: Q_SYNC for user quotas on all filesystems (special = NULL).
pub(crate) fn quotactl(_args: &[String]) -> ProbeResult {
    const Q_SYNC: libc::c_long = 0x80_0001;
    let cmd = Q_SYNC << 8; // QCMD(Q_SYNC, USRQUOTA)
                           // SAFETY: Q_SYNC with a null special and no address argument.
    let r = unsafe {
        libc::syscall(
            libc::SYS_quotactl,
            cmd,
            std::ptr::null::<u8>(),
            0,
            std::ptr::null_mut::<u8>(),
        )
    };
    if r < 0 {
        return Ok(Outcome::denied_now("quotactl(Q_SYNC)"));
    }
    Ok(Outcome::Allowed("quotactl(Q_SYNC) succeeded".into()))
}

/// `clock-settime`: set CLOCK_REALTIME to the value read just before (the
/// clock steps back by the few microseconds in between).
pub(crate) fn clock_settime(_args: &[String]) -> ProbeResult {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a live, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) } != 0 {
        return Err(Setup(format!("clock_gettime: errno {}", errno())));
    }
    // SAFETY: ts holds the time just read.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &ts) } != 0 {
        return Ok(Outcome::denied_now("clock_settime(CLOCK_REALTIME)"));
    }
    Ok(Outcome::Allowed(format!(
        "set CLOCK_REALTIME to {}.{:09}",
        ts.tv_sec, ts.tv_nsec
    )))
}

/// `sethostname`: set the hostname to its current value.
pub(crate) fn sethostname(_args: &[String]) -> ProbeResult {
    // SAFETY: utsname is plain data; all-zero is a valid value.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uts is a live, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return Err(Setup(format!("uname: errno {}", errno())));
    }
    let name: Vec<u8> = uts
        .nodename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    // SAFETY: name is a live buffer of name.len() bytes.
    if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } != 0 {
        return Ok(Outcome::denied_now("sethostname(current name)"));
    }
    Ok(Outcome::Allowed(format!(
        "sethostname({:?}) succeeded",
        String::from_utf8_lossy(&name)
    )))
}

/// Open a fresh pty pair: (master, slave). The slave comes from TIOCGPTPEER,
/// so no /dev/pts path lookup is needed (and a /dev/ptmx that belongs to
/// another devpts instance than /dev/pts still works).
fn fresh_pty() -> Result<(OwnedFd, OwnedFd), Setup> {
    // SAFETY: plain flags.
    let m = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if m < 0 {
        return Err(Setup(format!("posix_openpt: errno {}", errno())));
    }
    // SAFETY: m was just returned and is owned by nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(m) };
    // SAFETY: master is a pty master; unlockpt only clears its lock.
    if unsafe { libc::unlockpt(m) } != 0 {
        return Err(Setup(format!("unlockpt: errno {}", errno())));
    }
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: TIOCGPTPEER on a pty master takes open flags and returns a new fd.
    let s = unsafe { libc::ioctl(m, libc::TIOCGPTPEER, flags) };
    if s < 0 {
        return Err(Setup(format!("TIOCGPTPEER: errno {}", errno())));
    }
    // SAFETY: s was just returned and is owned by nobody else.
    Ok((master, unsafe { OwnedFd::from_raw_fd(s) }))
}

/// Child exit codes for the pty probes.
const CHILD_SETUP: i32 = 200;
const CHILD_NOT_RECEIVED: i32 = 201;

/// `tiocsti`: in a child (its own session, the fresh pty as controlling
/// tty, non-canonical), TIOCSTI one byte into the pty's input queue and read
/// it back. ALLOWED when the byte is read back.
pub(crate) fn tiocsti(_args: &[String]) -> ProbeResult {
    let (master, slave) = fresh_pty()?;
    match fork_raw(0) {
        Ok(0) => {
            let s = slave.as_raw_fd();
            // SAFETY: in the child, only async-signal-safe calls, then _exit.
            unsafe {
                // A new session, then the pty as its controlling tty: TIOCSTI
                // requires that without CAP_SYS_ADMIN.
                if libc::setsid() < 0 || libc::ioctl(s, libc::TIOCSCTTY, 0) != 0 {
                    libc::_exit(CHILD_SETUP);
                }
                let mut t: libc::termios = std::mem::zeroed();
                if libc::tcgetattr(s, &mut t) == 0 {
                    t.c_lflag &= !(libc::ICANON | libc::ECHO);
                    t.c_cc[libc::VMIN] = 0;
                    t.c_cc[libc::VTIME] = 5;
                    libc::tcsetattr(s, libc::TCSANOW, &t);
                }
                let byte: libc::c_char = b'Z' as libc::c_char;
                if libc::ioctl(s, libc::TIOCSTI, &byte) != 0 {
                    let e = errno();
                    libc::_exit(if e > 0 && e < CHILD_SETUP {
                        e
                    } else {
                        CHILD_SETUP
                    });
                }
                let mut got = 0u8;
                let n = libc::read(s, (&mut got as *mut u8).cast(), 1);
                libc::_exit(if n == 1 && got == b'Z' {
                    0
                } else {
                    CHILD_NOT_RECEIVED
                })
            }
        }
        Ok(pid) => {
            // The master stays open until the child is done: closing the
            // last master fd hangs the slave up (EIO).
            let status = reap(pid)?;
            drop((master, slave));
            match status {
                0 => Ok(Outcome::Allowed(
                    "TIOCSTI injected a byte into a fresh pty, read back".into(),
                )),
                CHILD_SETUP => Err(Setup(
                    "could not make the fresh pty the controlling tty".into(),
                )),
                CHILD_NOT_RECEIVED => Err(Setup(
                    "TIOCSTI returned 0 but the byte was not read back".into(),
                )),
                e => Ok(Outcome::denied(e, "ioctl(fresh pty, TIOCSTI)")),
            }
        }
        Err(e) => Err(Setup(format!("fork: errno {e}"))),
    }
}

/// `tioclinux`: ioctl(TIOCLINUX, TIOCL_GETSHIFTSTATE) on a fresh pty. A pty
/// is not a virtual console, so the tty layer answers ENOTTY/EINVAL: that
/// counts as ALLOWED (the ioctl reached the tty layer); EPERM/other: DENIED.
pub(crate) fn tioclinux(_args: &[String]) -> ProbeResult {
    let (_master, slave) = fresh_pty()?;
    let mut sub = [6u8, 0, 0, 0]; // TIOCL_GETSHIFTSTATE (read-only)
                                  // SAFETY: sub is a live, writable buffer big enough for the subcode's reply.
    let r = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCLINUX, sub.as_mut_ptr()) };
    let e = errno();
    if r == 0 {
        Ok(Outcome::Allowed(format!(
            "TIOCLINUX answered shift state {}",
            sub[0]
        )))
    } else if e == libc::ENOTTY || e == libc::EINVAL {
        Ok(Outcome::Allowed(format!(
            "TIOCLINUX reached the tty layer ({} on a pty, not a VT)",
            errno_name(e)
        )))
    } else {
        Ok(Outcome::denied(e, "ioctl(fresh pty, TIOCLINUX)"))
    }
}

/// `int80`: getpid through the i386 `int 0x80` entry (i386 __NR_getpid = 20).
/// ALLOWED when it returns our pid.
pub(crate) fn int80(_args: &[String]) -> ProbeResult {
    let ret: i64;
    // SAFETY: int 0x80 with eax = 20 is the i386 getpid: no memory is
    // touched; the compat entry may clobber r8-r11, declared as outputs.
    unsafe {
        std::arch::asm!(
            "int 0x80",
            inlateout("rax") 20i64 => ret,
            lateout("r8") _, lateout("r9") _, lateout("r10") _, lateout("r11") _,
            options(nostack)
        );
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as i64;
    if ret == pid {
        Ok(Outcome::Allowed(format!("int 0x80 getpid returned {ret}")))
    } else if ret < 0 && ret > -4096 {
        Ok(Outcome::denied((-ret) as i32, "int 0x80 getpid"))
    } else {
        Err(Setup(format!(
            "int 0x80 getpid returned {ret}, our pid is {pid}"
        )))
    }
}

/// `x32`: getpid with the x32 bit (39 | 0x40000000). ALLOWED when it returns
/// our pid (x32 compiled in and not filtered). Kernels without x32 answer
/// ENOSYS.
pub(crate) fn x32(_args: &[String]) -> ProbeResult {
    const X32_SYSCALL_BIT: libc::c_long = 0x4000_0000;
    // SAFETY: getpid through the x32 number: no arguments, no memory.
    let r = unsafe { libc::syscall(libc::SYS_getpid | X32_SYSCALL_BIT) };
    if r < 0 {
        return Ok(Outcome::denied_now("x32 getpid (39|0x40000000)"));
    }
    Ok(Outcome::Allowed(format!("x32 getpid returned {r}")))
}

/// `raw-syscall NR [ARGS...]`: syscall(NR, args...) with up to six integer
/// arguments (decimal, negative or 0x-hex). Prints `ALLOWED ret=<n>` or
/// `DENIED <ERRNO> nr=<NR>`. Meant for filter tests: the caller picks
/// arguments that are harmless (usually invalid ones, so that "reached the
/// kernel" shows as a distinct errno such as EFAULT or EBADF).
pub(crate) fn raw_syscall(args: &[String]) -> ProbeResult {
    let nr = parse_i64(arg(args, 0, "NR")?)?;
    if args.len() > 7 {
        return Err(Setup("at most six syscall arguments".into()));
    }
    let mut a = [0i64; 6];
    for (slot, s) in a.iter_mut().zip(&args[1..]) {
        *slot = parse_i64(s)?;
    }
    // SAFETY: the caller chose the call and its integer arguments; this is a
    // test tool and is documented as such. No Rust memory is handed over.
    let r = unsafe { libc::syscall(nr as libc::c_long, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        return Ok(Outcome::denied_now(format!("nr={nr}")));
    }
    Ok(Outcome::Allowed(format!("ret={r}")))
}
