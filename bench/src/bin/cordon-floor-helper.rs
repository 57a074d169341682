//! The helper's floor: the kernel work a standalone helper run does, and
//! nothing else: no policy parsed, no plan, no report, no answer of the
//! kernel checked. scripts/bench times it beside the helper ("helper-floor");
//! what the helper costs above it is its own work.
//!
//!   cordon-floor-helper POLICY RULE-PATH... -- CMD [ARGS...]
//!
//! The calls of `cordon-helper --policy-file POLICY -- CMD` with the
//! benchmark's policy (one rule per RULE-PATH, the default profile):
//! NO_NEW_PRIVS; the policy opened, fstat'ed and read; the status file opened
//! and read; a poll of the fd table; a Landlock ruleset handling every right
//! of ABI 7 with one rule per path (each opened O_PATH) and restrict_self;
//! close_range; with CAP_SETPCAP, securebits and a drop of each bounding-set
//! capability; the ambient set cleared and capset; the status file read
//! again; the default profile's filter (the very program); execve.
#![no_main]

use std::ffi::{c_char, CStr};

const ACCESS_FS_ALL: u64 = (1 << 16) - 1; // ABI 7
const ACCESS_NET_ALL: u64 = 3;
const SCOPE_ALL: u64 = 3;
const RULE_ACCESS: u64 = 1 | 4 | 8; // execute, read_file, read_dir

#[repr(C)]
struct RulesetAttr {
    fs: u64,
    net: u64,
    scoped: u64,
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;

#[repr(C, packed)]
struct PathBeneath {
    allowed: u64,
    parent_fd: i32,
}

/// The bounding set's mask from a status file's `CapBnd:` line.
fn bounding(status: &[u8]) -> u64 {
    let key = b"\nCapBnd:\t";
    status
        .windows(key.len())
        .position(|w| w == key)
        .and_then(|i| {
            let hex = &status[i + key.len()..];
            let end = hex.iter().position(|b| *b == b'\n').unwrap_or(hex.len());
            std::str::from_utf8(&hex[..end])
                .ok()
                .and_then(|s| u64::from_str_radix(s, 16).ok())
        })
        .unwrap_or(0)
}

/// openat(2) itself: musl's open() follows O_CLOEXEC with an fcntl.
unsafe fn open(path: *const c_char, flags: libc::c_int) -> libc::c_int {
    // SAFETY: the caller passes a NUL-terminated path.
    unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, flags, 0) as libc::c_int }
}

#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const c_char) -> libc::c_int {
    // No allocation anywhere (it would add calls the helper's arena does
    // not make).
    let argc = argc as usize;
    // SAFETY: argv holds argc valid NUL-terminated strings and a NULL, as the
    // C runtime passed them.
    let arg = |i: usize| unsafe { *argv.add(i) };
    // SAFETY: as above.
    let is_dash = |i: usize| unsafe { CStr::from_ptr(arg(i)) }.to_bytes() == b"--";
    let Some(dash) = (1..argc).find(|&i| is_dash(i)) else {
        return 64;
    };
    if dash < 2 || dash + 1 >= argc {
        return 64;
    }
    let mut buf = [0u8; 4096];
    let mut policy = [0u8; 4096];
    // SAFETY: each call below passes live buffers of the sizes given,
    // NUL-terminated paths and structs laid out as the kernel reads them; the
    // process is single-threaded and execs or exits at the end.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        let p = open(arg(1), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(p, &mut st);
        libc::read(p, policy.as_mut_ptr().cast(), policy.len());
        libc::close(p);

        let status = open(
            c"/proc/self/status".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        let n = libc::pread(status, buf.as_mut_ptr().cast(), buf.len(), 0);
        let bnd = bounding(&buf[..n.max(0) as usize]);
        let mut fds: [libc::pollfd; 61] = std::mem::zeroed();
        for (i, f) in fds.iter_mut().enumerate() {
            f.fd = i as i32 + 3;
        }
        libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0);

        let attr = RulesetAttr {
            fs: ACCESS_FS_ALL,
            net: ACCESS_NET_ALL,
            scoped: SCOPE_ALL,
        };
        let rs = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            std::mem::size_of::<RulesetAttr>(),
            0,
        ) as i32;
        for i in 2..dash {
            let fd = open(arg(i), libc::O_PATH | libc::O_CLOEXEC);
            let rule = PathBeneath {
                allowed: RULE_ACCESS,
                parent_fd: fd,
            };
            libc::syscall(
                libc::SYS_landlock_add_rule,
                rs,
                1,
                &rule as *const PathBeneath,
                0,
            );
            libc::close(fd);
        }
        libc::syscall(libc::SYS_landlock_restrict_self, rs, 0);
        libc::close(rs);
        libc::syscall(libc::SYS_close_range, status + 1, u32::MAX, 0);

        let mut head = CapHeader {
            version: CAP_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        libc::syscall(
            libc::SYS_capget,
            &mut head as *mut CapHeader,
            data.as_mut_ptr(),
        );
        if data[0].effective & (1 << CAP_SETPCAP) != 0 {
            libc::prctl(
                libc::PR_SET_SECUREBITS,
                cordon_helper::caps::LOCKED_SECUREBITS,
                0,
                0,
                0,
            );
            for cap in (0..64).filter(|c| bnd & (1 << c) != 0) {
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let empty = [CapData::default(); 2];
        libc::syscall(
            libc::SYS_capset,
            &mut head as *mut CapHeader,
            empty.as_ptr(),
        );
        libc::pread(status, buf.as_mut_ptr().cast(), buf.len(), 0);
        libc::close(status);

        const PROGRAM: [(u16, u8, u8, u32); cordon_helper::seccomp::prebuilt::PROGRAM.len()] =
            cordon_helper::seccomp::prebuilt::PROGRAM;
        let filter: [libc::sock_filter; PROGRAM.len()] = std::array::from_fn(|i| {
            let (code, jt, jf, k) = PROGRAM[i];
            libc::sock_filter { code, jt, jf, k }
        });
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr().cast_mut(),
        };
        libc::syscall(libc::SYS_seccomp, 1, 0, &prog as *const libc::sock_fprog);

        extern "C" {
            static environ: *const *const c_char;
        }
        libc::execve(arg(dash + 1), argv.add(dash + 1), environ);
    }
    74
}
