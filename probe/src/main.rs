//! `cordon-probe`: a static attack binary for cordon's end-to-end tests.
//!
//! Every subcommand makes ONE real attempt at something a sandbox should
//! prevent and prints exactly one line on stdout:
//!
//! - `ALLOWED <detail>` (exit 0) only when the action really succeeded: a read
//!   returned the planted marker, a write landed, a connect received the
//!   listener's banner, a signal or ptrace reached its target;
//! - `DENIED <ERRNO> <detail>` (exit 1) otherwise. `<ERRNO>` is the symbolic
//!   errno name (`EPERM`, `EACCES`, …), or `-` for a denial that has no errno
//!   (no capability left, no fd inherited, variable unset).
//!
//! Exit 2 (message on stderr, nothing on stdout) is a usage or setup error: the
//! probe could not even stage the attempt, so the result says nothing about
//! the sandbox. A probe killed by a seccomp filter dies by SIGSYS, which the
//! caller sees as a signal. A few probes cannot be made to succeed safely on a
//! host; they use a "reached the kernel with privilege" rule documented at the
//! probe and in `docs/probe.md` (e.g. `reboot` with a bad magic number:
//! `EINVAL` means the privilege check passed).
//!
//! Every probe is safe for the host even when allowed. See `docs/probe.md`.

mod fs;
mod kernel;
mod net;
mod priv_;
mod proc;
mod verify;

use std::ffi::CString;
use std::process::ExitCode;

/// What one attempt found.
pub(crate) enum Outcome {
    /// The action really happened.
    Allowed(String),
    /// The action failed; `errno` 0 means "no errno" (printed as `-`).
    Denied { errno: i32, detail: String },
}

impl Outcome {
    /// A denial carrying the calling thread's current `errno`.
    pub(crate) fn denied_now(detail: impl Into<String>) -> Self {
        Outcome::Denied {
            errno: errno(),
            detail: detail.into(),
        }
    }

    /// A denial with an explicit errno.
    pub(crate) fn denied(errno: i32, detail: impl Into<String>) -> Self {
        Outcome::Denied {
            errno,
            detail: detail.into(),
        }
    }

    /// A denial from an `io::Error` (std-based probes).
    pub(crate) fn from_io(err: &std::io::Error, detail: impl Into<String>) -> Self {
        Outcome::Denied {
            errno: err.raw_os_error().unwrap_or(0),
            detail: detail.into(),
        }
    }
}

/// The probe could not stage its attempt (exit 2).
pub(crate) struct Setup(pub String);

pub(crate) type ProbeResult = Result<Outcome, Setup>;

type ProbeFn = fn(&[String]) -> ProbeResult;

/// Name, argument synopsis, implementation. Kept sorted by area.
const PROBES: &[(&str, &str, ProbeFn)] = &[
    // fs.rs
    ("read", "PATH [MARKER]", fs::read),
    ("read-fd", "FD [MARKER]", fs::read_fd),
    ("unmask-read", "PATH MARKER", fs::unmask_read),
    ("write", "PATH", fs::write),
    ("truncate", "PATH", fs::truncate),
    ("rename", "FROM TO", fs::rename),
    ("link", "FROM TO", fs::link),
    ("symlink-read", "LINK TARGET [MARKER]", fs::symlink_read),
    ("mknod", "PATH", fs::mknod),
    ("setid-file", "HOW PATH [MODE]", fs::setid_file),
    ("open-by-handle", "PATH [MARKER]", fs::open_by_handle),
    ("open-write", "PATH", fs::open_write),
    ("fds", "", fs::fds),
    // priv_.rs
    ("unshare-user", "", priv_::unshare_user),
    ("unshare-mount", "", priv_::unshare_mount),
    ("clone-newuser", "", priv_::clone_newuser),
    ("clone3-newuser", "", priv_::clone3_newuser),
    ("setns", "PATH", priv_::setns),
    ("mount", "[FRESH_DIR]", priv_::mount),
    ("fsopen", "", priv_::fsopen),
    ("open-tree", "[PATH]", priv_::open_tree),
    ("move-mount", "", priv_::move_mount),
    ("pivot-root", "", priv_::pivot_root),
    ("chroot", "", priv_::chroot),
    ("setuid0", "", priv_::setuid0),
    ("caps", "", priv_::caps),
    ("personality", "", priv_::personality),
    // proc.rs
    ("ptrace", "PID|child", proc::ptrace),
    (
        "process-vm-readv",
        "PID|child [ADDR]",
        proc::process_vm_readv,
    ),
    ("kill", "PID [SIG]", proc::kill),
    ("prlimit-cpu", "PID", proc::prlimit_cpu),
    ("renice-user", "NICE", proc::renice_user),
    ("env", "NAME", proc::env),
    ("fork-bomb", "N", proc::fork_bomb),
    ("mem-bomb", "MIB", proc::mem_bomb),
    // kernel.rs
    ("bpf", "", kernel::bpf),
    ("perf-event-open", "", kernel::perf_event_open),
    ("userfaultfd", "", kernel::userfaultfd),
    ("io-uring-setup", "", kernel::io_uring_setup),
    ("keyctl", "", kernel::keyctl),
    ("add-key", "", kernel::add_key),
    ("kexec-load", "", kernel::kexec_load),
    ("init-module", "", kernel::init_module),
    ("reboot", "", kernel::reboot),
    ("swapon", "", kernel::swapon),
    ("acct", "", kernel::acct),
    ("syslog", "", kernel::syslog),
    ("quotactl", "", kernel::quotactl),
    ("clock-settime", "", kernel::clock_settime),
    ("sethostname", "", kernel::sethostname),
    ("tiocsti", "", kernel::tiocsti),
    ("tioclinux", "", kernel::tioclinux),
    ("int80", "", kernel::int80),
    ("x32", "", kernel::x32),
    ("raw-syscall", "NR [ARGS...]", kernel::raw_syscall),
    // net.rs
    ("tcp-connect", "HOST PORT", net::tcp_connect),
    ("udp-send", "HOST PORT", net::udp_send),
    ("unix-connect", "PATH", net::unix_connect),
    ("abstract-connect", "NAME", net::abstract_connect),
    // verify.rs (added for `cordon verify`)
    ("leak", "PATH MARKER", verify::leak),
    ("nnp", "", verify::nnp),
    ("ro-detach", "PATH", verify::ro_detach),
    ("umount", "", verify::umount),
    ("with-ppid", "SUBCOMMAND [ARGS...]", with_ppid),
];

/// `with-ppid SUBCOMMAND [ARGS...]`: run another probe with every argument
/// `PPID` replaced by our parent's pid (the sandbox's init, or the launcher
/// when there is no pid namespace), which the caller cannot know in advance,
/// and `PPID_ADDR` by the start of the parent's first mapping (from
/// /proc/PPID/maps; `0x10000` when that is unreadable: then ptrace access is
/// refused anyway and the address is never used).
fn with_ppid(args: &[String]) -> ProbeResult {
    let sub = arg(args, 0, "SUBCOMMAND")?;
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() }.to_string();
    let addr = std::fs::read_to_string(format!("/proc/{ppid}/maps"))
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split('-').next())
                .map(|a| format!("0x{a}"))
        })
        .unwrap_or_else(|| "0x10000".into());
    let rest: Vec<String> = args[1..]
        .iter()
        .map(|a| match a.as_str() {
            "PPID" => ppid.clone(),
            "PPID_ADDR" => addr.clone(),
            _ => a.clone(),
        })
        .collect();
    match PROBES.iter().find(|(name, _, _)| *name == sub) {
        Some((name, _, _)) if *name == "with-ppid" => Err(Setup("with-ppid cannot nest".into())),
        Some((_, _, probe)) => probe(&rest),
        None => Err(Setup(format!("unknown subcommand {sub:?}"))),
    }
}

fn usage() -> String {
    let mut s = String::from("usage: cordon-probe SUBCOMMAND [ARGS...]\n\nsubcommands:\n");
    for (name, args, _) in PROBES {
        s.push_str(&format!("  {name} {args}\n"));
    }
    s
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let Some(sub) = argv.get(1) else {
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    if sub == "--help" || sub == "-h" {
        print!("{}", usage());
        return ExitCode::SUCCESS;
    }
    let Some((_, _, probe)) = PROBES.iter().find(|(name, _, _)| name == sub) else {
        eprintln!("cordon-probe: unknown subcommand {sub:?}");
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    match probe(&argv[2..]) {
        Ok(Outcome::Allowed(detail)) => {
            println!("ALLOWED {detail}");
            ExitCode::SUCCESS
        }
        Ok(Outcome::Denied { errno, detail }) => {
            println!("DENIED {} {detail}", errno_name(errno));
            ExitCode::from(1)
        }
        Err(Setup(msg)) => {
            eprintln!("cordon-probe: {sub}: setup error: {msg}");
            ExitCode::from(2)
        }
    }
}

// ---------------------------------------------------------------------------
// Small shared helpers.

/// The calling thread's errno.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Required positional argument `i`.
pub(crate) fn arg<'a>(args: &'a [String], i: usize, name: &str) -> Result<&'a str, Setup> {
    args.get(i)
        .map(String::as_str)
        .ok_or_else(|| Setup(format!("missing argument {name}")))
}

/// A C string for a path or name; interior NULs are a usage error.
pub(crate) fn cstr(s: &str) -> Result<CString, Setup> {
    CString::new(s).map_err(|_| Setup(format!("{s:?} contains a NUL byte")))
}

/// Parse a signed integer, decimal or `0x` hexadecimal (`-` allowed for decimal).
pub(crate) fn parse_i64(s: &str) -> Result<i64, Setup> {
    let parsed = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).map(|v| v as i64).ok()
    } else {
        s.parse::<i64>()
            .ok()
            .or_else(|| s.parse::<u64>().ok().map(|v| v as i64))
    };
    parsed.ok_or_else(|| Setup(format!("not a number: {s:?}")))
}

/// Symbolic name of an errno value (`E<n>` for unknown ones, `-` for 0).
pub(crate) fn errno_name(e: i32) -> String {
    let name = match e {
        0 => "-",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::ENOEXEC => "ENOEXEC",
        libc::EBADF => "EBADF",
        libc::ECHILD => "ECHILD",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENOTBLK => "ENOTBLK",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENFILE => "ENFILE",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ETXTBSY => "ETXTBSY",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::EPIPE => "EPIPE",
        libc::EDOM => "EDOM",
        libc::ERANGE => "ERANGE",
        libc::EDEADLK => "EDEADLK",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOLCK => "ENOLCK",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENOMSG => "ENOMSG",
        libc::ENODATA => "ENODATA",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EBADFD => "EBADFD",
        libc::ENOTSOCK => "ENOTSOCK",
        libc::EDESTADDRREQ => "EDESTADDRREQ",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::EPROTOTYPE => "EPROTOTYPE",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EPFNOSUPPORT => "EPFNOSUPPORT",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETDOWN => "ENETDOWN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ENOBUFS => "ENOBUFS",
        libc::EISCONN => "EISCONN",
        libc::ENOTCONN => "ENOTCONN",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::EALREADY => "EALREADY",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::ESTALE => "ESTALE",
        libc::EDQUOT => "EDQUOT",
        libc::ECANCELED => "ECANCELED",
        libc::ENOKEY => "ENOKEY",
        libc::EKEYEXPIRED => "EKEYEXPIRED",
        libc::EKEYREVOKED => "EKEYREVOKED",
        libc::EKEYREJECTED => "EKEYREJECTED",
        libc::EOWNERDEAD => "EOWNERDEAD",
        libc::ENOTRECOVERABLE => "ENOTRECOVERABLE",
        libc::ERFKILL => "ERFKILL",
        libc::EHWPOISON => "EHWPOISON",
        _ => return format!("E{e}"),
    };
    name.to_string()
}
