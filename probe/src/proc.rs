//! Process probes: ptrace, cross-process memory reads, signals, environment,
//! bounded resource exhaustion.
//!
//! Host safety: `ptrace` uses PTRACE_SEIZE, which does not stop the target,
//! and the tracee is detached automatically when the probe exits. The `child`
//! target is a child of the probe that sleeps for at most 10 s (alarm) and is
//! killed before the probe exits. `kill` sends signal 0 (a permission check
//! only) unless a signal is named. `fork-bomb N` forks at most N children
//! (capped at 10 000) that each exit by themselves after 2 s and are killed
//! and reaped before the probe exits; `mem-bomb MIB` maps and touches at most
//! MIB MiB (capped at 64 GiB) and unmaps it.

use crate::priv_::fork_raw;
use crate::{arg, errno, parse_i64, Outcome, ProbeResult, Setup};

/// Bytes a `child` target holds for `process-vm-readv`.
static VM_MARKER: [u8; 24] = *b"cordon-probe-vm-marker!\n";

/// Fork a child that sleeps until killed (at most 10 s).
fn spawn_sleeper() -> Result<libc::pid_t, Setup> {
    match fork_raw(0) {
        Ok(0) => {
            // SAFETY: in the child: arm a 10 s alarm (default action: exit)
            // and pause; only async-signal-safe calls.
            unsafe {
                libc::alarm(10);
                loop {
                    libc::pause();
                }
            }
        }
        Ok(pid) => Ok(pid),
        Err(e) => Err(Setup(format!("fork for a child target: errno {e}"))),
    }
}

fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: pid is our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let mut status = 0;
    // SAFETY: status is a live, writable int.
    unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
}

/// A target: `child` (forked here) or a PID.
enum Target {
    Child(libc::pid_t),
    Pid(libc::pid_t),
}

impl Target {
    fn parse(s: &str) -> Result<Self, Setup> {
        if s == "child" {
            Ok(Target::Child(spawn_sleeper()?))
        } else {
            Ok(Target::Pid(parse_i64(s)? as libc::pid_t))
        }
    }
    fn pid(&self) -> libc::pid_t {
        match self {
            Target::Child(p) | Target::Pid(p) => *p,
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Target::Child(pid) = self {
            kill_and_reap(*pid);
        }
    }
}

/// `ptrace PID|child`: PTRACE_SEIZE the target (does not stop it; detached
/// when we exit). `child` is a sleeping child of the probe, i.e. inside the
/// same sandbox; a PID is normally a process outside it.
pub(crate) fn ptrace(args: &[String]) -> ProbeResult {
    let target = Target::parse(arg(args, 0, "PID|child")?)?;
    let pid = target.pid();
    // SAFETY: PTRACE_SEIZE with no options; the tracee is not stopped and is
    // detached when this process exits (or the child is killed by Target's drop).
    let r = unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, 0) };
    if r == 0 {
        Ok(Outcome::Allowed(format!("PTRACE_SEIZE attached to {pid}")))
    } else {
        Ok(Outcome::denied_now(format!("PTRACE_SEIZE {pid}")))
    }
}

/// `process-vm-readv PID|child [ADDR]`: read the target's memory. For `child`
/// the address of a static marker (same in the forked child) is read and must
/// match; for a PID, ADDR (hex) or the start of the first mapping listed in
/// /proc/PID/maps. ALLOWED when bytes come back.
pub(crate) fn process_vm_readv(args: &[String]) -> ProbeResult {
    let target = Target::parse(arg(args, 0, "PID|child")?)?;
    let pid = target.pid();
    let (addr, want_marker) = match (&target, args.get(1)) {
        (_, Some(a)) => (parse_i64(a)? as usize, false),
        (Target::Child(_), None) => (VM_MARKER.as_ptr() as usize, true),
        (Target::Pid(_), None) => (first_mapping(pid)?, false),
    };
    let mut buf = [0u8; 24];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: local describes our live, writable buf; the remote iovec is only
    // dereferenced by the kernel in the target's address space.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Ok(Outcome::denied_now(format!(
            "process_vm_readv pid {pid} addr {addr:#x}"
        )));
    }
    if want_marker && buf[..n as usize] != VM_MARKER[..n as usize] {
        return Err(Setup(format!(
            "read {n} bytes from child {pid} but not the marker"
        )));
    }
    Ok(Outcome::Allowed(format!(
        "read {n} bytes of pid {pid} at {addr:#x}"
    )))
}

fn first_mapping(pid: libc::pid_t) -> Result<usize, Setup> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| Setup(format!("read /proc/{pid}/maps (pass ADDR instead): {e}")))?;
    maps.lines()
        .find(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|p| p.starts_with('r'))
        })
        .and_then(|l| l.split('-').next())
        .and_then(|a| usize::from_str_radix(a, 16).ok())
        .ok_or_else(|| Setup(format!("no readable mapping in /proc/{pid}/maps")))
}

fn parse_signal(s: &str) -> Result<i32, Setup> {
    let name = s.trim_start_matches("SIG");
    Ok(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        _ => parse_i64(s)? as i32,
    })
}

/// `kill PID [SIG]`: kill(PID, SIG). SIG defaults to 0 (permission check
/// only, nothing delivered); name or number accepted.
pub(crate) fn kill(args: &[String]) -> ProbeResult {
    let pid = parse_i64(arg(args, 0, "PID")?)? as libc::pid_t;
    let sig = match args.get(1) {
        Some(s) => parse_signal(s)?,
        None => 0,
    };
    // SAFETY: plain integer arguments.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(Outcome::Allowed(format!("signal {sig} delivered to {pid}")))
    } else {
        Ok(Outcome::denied_now(format!("kill({pid}, {sig})")))
    }
}

/// `prlimit-cpu PID`: set PID's RLIMIT_CPU to the value it already has
/// (harmless, yet the same permission check as lowering it to 1 s, which
/// kills it). ALLOWED when the kernel accepted the change.
pub(crate) fn prlimit_cpu(args: &[String]) -> ProbeResult {
    let pid = parse_i64(arg(args, 0, "PID")?)? as libc::pid_t;
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads PID's limit into a live rlimit.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_CPU, std::ptr::null(), &mut cur) } != 0 {
        return Err(Setup(format!(
            "cannot read the limit of {pid}: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: passes a live rlimit as the new value; no old value wanted.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_CPU, &cur, std::ptr::null_mut()) } == 0 {
        Ok(Outcome::Allowed(format!("RLIMIT_CPU of {pid} set")))
    } else {
        Ok(Outcome::denied_now(format!("prlimit({pid}, RLIMIT_CPU)")))
    }
}

/// `env NAME`: ALLOWED when NAME is set in our environment.
pub(crate) fn env(args: &[String]) -> ProbeResult {
    let name = arg(args, 0, "NAME")?;
    match std::env::var_os(name) {
        Some(v) => Ok(Outcome::Allowed(format!("{name}={}", v.to_string_lossy()))),
        None => Ok(Outcome::denied(0, format!("{name} is not set"))),
    }
}

/// `fork-bomb N`: fork up to N children (capped at 10 000), each sleeping 2 s
/// before exiting by itself; then kill and reap them all. ALLOWED when all N
/// forks succeeded, DENIED with the errno of the first failed fork otherwise.
pub(crate) fn fork_bomb(args: &[String]) -> ProbeResult {
    let n = parse_i64(arg(args, 0, "N")?)?.clamp(0, 10_000) as usize;
    let mut children = Vec::with_capacity(n);
    let mut failure = None;
    for _ in 0..n {
        match fork_raw(0) {
            Ok(0) => {
                let ts = libc::timespec {
                    tv_sec: 2,
                    tv_nsec: 0,
                };
                // SAFETY: in the child: sleep then leave; async-signal-safe only.
                unsafe {
                    libc::nanosleep(&ts, std::ptr::null_mut());
                    libc::_exit(0)
                }
            }
            Ok(pid) => children.push(pid),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let forked = children.len();
    for pid in children {
        kill_and_reap(pid);
    }
    match failure {
        None => Ok(Outcome::Allowed(format!("forked {forked} children"))),
        Some(e) => Ok(Outcome::denied(
            e,
            format!("fork failed after {forked} of {n} children"),
        )),
    }
}

/// `mem-bomb MIB`: mmap MIB MiB (capped at 65 536) of private anonymous
/// memory and touch every page, then unmap. ALLOWED when all of it was
/// mapped and touched; DENIED ENOMEM when the mapping was refused (an
/// RLIMIT_AS hit). The OOM killer would show as SIGKILL.
pub(crate) fn mem_bomb(args: &[String]) -> ProbeResult {
    let mib = parse_i64(arg(args, 0, "MIB")?)?.clamp(0, 65_536) as usize;
    let len = mib << 20;
    if len == 0 {
        return Err(Setup("MIB must be at least 1".into()));
    }
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Ok(Outcome::denied(errno(), format!("mmap {mib} MiB")));
    }
    let base = p.cast::<u8>();
    for off in (0..len).step_by(4096) {
        // SAFETY: off < len, inside the mapping just created, which is writable.
        unsafe { base.add(off).write_volatile(1) };
    }
    // SAFETY: p/len is exactly the mapping created above.
    unsafe { libc::munmap(p, len) };
    Ok(Outcome::Allowed(format!("mapped and touched {mib} MiB")))
}

/// `renice-user NICE`: `setpriority(PRIO_USER, 0, NICE)`, every process of
/// our uid at once. ALLOWED when the call succeeded. Safe only under a uid
/// of its own (tests run it as one): it lowers the priority of them all.
pub(crate) fn renice_user(args: &[String]) -> ProbeResult {
    let nice = parse_i64(arg(args, 0, "NICE")?)? as libc::c_int;
    // SAFETY: plain integer arguments.
    if unsafe { libc::setpriority(libc::PRIO_USER, 0, nice) } == 0 {
        Ok(Outcome::Allowed(format!(
            "every process of our uid now at nice {nice}"
        )))
    } else {
        Ok(Outcome::denied_now(format!(
            "setpriority(PRIO_USER, 0, {nice})"
        )))
    }
}
