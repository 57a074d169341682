//! `--init`: the helper as the sandbox's pid 1 (bwrap `--as-pid-1`).
//!
//! Why: without it bwrap forks an init of its own, a copy of the bwrap
//! process, which then forks the helper: ≈ 0.6 ms of CPU per run here
//! (docs/benchmarks-history.md). With `--init` bwrap execs the helper as pid 1; once
//! every step up to the filter has been applied, the helper starts the
//! command's process ([`spawn`]). It nests a scope-only Landlock domain,
//! installs the command's filter, writes the report and execs the command,
//! as without `--init`. This process stays as the command's init:
//! it closes every fd it holds, makes itself undumpable, installs a filter
//! of its own (`seccomp::INIT_CALLS`: wait, close, exit), reaps whatever
//! ends, and exits with the command's status once the command ends (128 +
//! the signal when a signal killed it, as bwrap's init does). Its exit ends
//! the pid namespace: the kernel kills whatever the command left behind.
//!
//! When the command ends, the init writes `{"init_exit":N}` on the report
//! fd (which it alone still holds) before it exits: the launcher then knows
//! the outcome without waiting for bwrap, which waits for the kernel's
//! teardown of the namespaces.
//!
//! The command cannot reach the init: it is pid 1 of the namespace, so
//! signals from inside it are dropped (it handles none); ptrace and its
//! memory need it dumpable; and it holds no fd but the report's.

use crate::error::{Error, Result};
use crate::sys;
use seccompiler::BpfProgram;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the command's process does between its clone and its exec, each
/// input built before the clone ([`spawn`]).
pub struct Start<'a> {
    /// The scope-only ruleset it restricts itself with (landlock.rs).
    pub scope: Option<RawFd>,
    /// The command's filter (step 7).
    pub filter: &'a BpfProgram,
    pub command: &'a crate::exec::Command,
}

/// Start the command's process with vfork semantics: step 7 and the exec
/// in it. Returns its pid, and the errno of its exec if that failed (it
/// has then said so on stderr and exited 74; the report's line for it is
/// the caller's to write, after the report).
///
/// Why not fork: `clone(CLONE_VM | CLONE_VFORK)` copies nothing (fork took
/// ≈ 80 µs here, and copy-on-write faults followed on both sides), and it
/// suspends us until the child execs, so the child runs at once on the CPU
/// we leave instead of waiting for the other one to wake (≈ 95 µs from
/// fork to the child's first instruction, traced). The price is the
/// child's discipline: it runs in our memory, so it makes system calls only
/// (`landlock_restrict_self`, `seccomp`, `execve`, `write` to stderr,
/// `exit`), reads what was built before, and writes nothing of ours but the
/// `failed` word. A step that fails there is reported here, as the same
/// step would be without `--init`: 71 for the scope, 72 for the filter.
pub fn spawn(s: &Start) -> Result<(libc::pid_t, Option<i32>)> {
    const SCOPE: u64 = 1;
    const FILTER: u64 = 2;
    const EXEC: u64 = 3;
    let failed = AtomicU64::new(0);
    // The child needs well under a page; the rest is never touched.
    let mut stack = vec![0u8; 64 << 10];
    let cb = Box::new(|| -> isize {
        let fail = |step: u64, e: Option<i32>| {
            failed.store(step << 32 | e.unwrap_or(0) as u32 as u64, Ordering::Relaxed);
        };
        if let Some(fd) = s.scope {
            if let Err(e) = sys::landlock_restrict_self(fd) {
                fail(SCOPE, e.raw_os_error());
                return 71;
            }
        }
        if let Err(e) = seccompiler::apply_filter(s.filter) {
            fail(
                FILTER,
                match e {
                    seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => {
                        e.raw_os_error()
                    }
                    _ => None,
                },
            );
            return 72;
        }
        let errno = s.command.try_exec();
        s.command.say_failure(errno);
        fail(EXEC, Some(errno));
        74
    });
    // SAFETY: the child above makes system calls only and writes nothing of
    // ours but `failed`; `s`, `failed` and `stack` outlive the call.
    let pid = unsafe { sys::clone_vfork(cb, &mut stack) }
        .map_err(|e| Error::Exec(format!("starting the command: {e}")))?;
    let f = failed.load(Ordering::Relaxed);
    let errno = f as u32 as i32;
    match f >> 32 {
        0 => return Ok((pid, None)),
        // Exited 74: the init reaps it and reports that code.
        EXEC => return Ok((pid, Some(errno))),
        _ => {}
    }
    sys::reap(pid);
    let e = match errno {
        0 => "failed".to_string(),
        n => std::io::Error::from_raw_os_error(n).to_string(),
    };
    Err(match f >> 32 {
        SCOPE => Error::Landlock(format!("landlock: scoping the command below its init: {e}")),
        _ => crate::seccomp::install_failed(e),
    })
}

/// The exit code that carries `status` (a wait status) to bwrap.
pub fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        255
    }
}

/// The line the init writes on the report fd when the command has ended:
/// `{"init_exit":N}`, N the code it exits with. The launcher need not wait
/// for bwrap, which now waits only for the kernel to tear the namespaces
/// down (≈ 0.3–0.8 ms here): the init has no child left to wait for but
/// leftovers, which its exit kills.
pub fn status_line(code: i32, buf: &mut [u8; 32]) -> &[u8] {
    const HEAD: &[u8] = b"{\"init_exit\":";
    let mut digits = [0u8; 12];
    let n = crate::exec::itoa(code, &mut digits);
    let end = HEAD.len() + n.len() + 2;
    buf[..HEAD.len()].copy_from_slice(HEAD);
    buf[HEAD.len()..end - 2].copy_from_slice(n);
    buf[end - 2..end].copy_from_slice(b"}\n");
    &buf[..end]
}

/// The init's side after the clone. `command`: the child's pid; `report`:
/// the report fd, kept for the status line; `held`: the fds above 2 step 5
/// left open (the report's, the kept ones), closed one by one should
/// close_range be missing (kernels before 5.9).
pub fn run(command: libc::pid_t, report: Option<i32>, held: &[i32]) -> ! {
    // Built here, while the command starts: nothing of it depends on the
    // policy, and failing now stops the command as below.
    let program = crate::seccomp::init_filter(report);
    // The command's stdio and any kept fd: the launcher sees each end when
    // the command's last copy closes, not ours. The report fd stays, for
    // the status line (the command closed its copy at exec).
    let kept = report.map_or(-1, |r| r as i64);
    let closed = match report {
        Some(r) if r > 0 => {
            sys::close_range(0, r as u32 - 1).is_ok()
                && sys::close_range(r as u32 + 1, u32::MAX).is_ok()
        }
        _ => sys::close_range(0, u32::MAX).is_ok(),
    };
    if !closed {
        for fd in (0..=2).chain(held.iter().copied()) {
            if i64::from(fd) != kept {
                sys::close(fd);
            }
        }
    }
    // Defence in depth: the init runs our code only; if it cannot be
    // confined as planned, the command does not run on under it.
    // Not dumpable first: the filter then refuses prctl.
    if sys::set_not_dumpable().is_err()
        || !program.is_ok_and(|p| crate::seccomp::install(&p).is_ok())
    {
        sys::kill_now(command);
        sys::exit_now(72);
    }
    loop {
        match sys::wait_any() {
            Ok((pid, status)) if pid == command => {
                let code = exit_code(status);
                if let Some(fd) = report {
                    let mut buf = [0u8; 32];
                    let _ = sys::write_all(fd, status_line(code, &mut buf));
                    sys::close(fd);
                }
                sys::exit_now(code)
            }
            // An orphan of the command, reparented to pid 1: reaped.
            Ok(_) => {}
            // No child left (cannot happen while the command lives).
            Err(_) => sys::exit_now(255),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::exit_code;

    #[test]
    fn status_lines() {
        let mut b = [0u8; 32];
        assert_eq!(super::status_line(0, &mut b), b"{\"init_exit\":0}\n");
        assert_eq!(super::status_line(143, &mut b), b"{\"init_exit\":143}\n");
        assert_eq!(super::status_line(-7, &mut b), b"{\"init_exit\":-7}\n");
    }

    #[test]
    fn exit_codes_follow_bwrap() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(libc::SIGKILL), 128 + 9);
        assert_eq!(exit_code(libc::SIGSEGV | 0x80), 128 + 11); // core dumped
    }
}
