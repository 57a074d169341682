//! `--init`: the helper as the sandbox's pid 1 (bwrap `--as-pid-1`).
//!
//! Why: without it bwrap forks an init of its own, a copy of the bwrap
//! process, which then forks the helper: ≈ 0.6 ms of CPU per run here
//! (BENCHMARKS.md). With `--init` bwrap execs the helper as pid 1; once
//! every step up to the filter has been applied, the helper forks. The
//! child installs the command's filter, writes the report and execs the
//! command, as without `--init`. This process stays as the command's init:
//! it closes every fd it holds, makes itself undumpable, installs a filter
//! of its own (`seccomp::INIT_CALLS`: wait, close, exit), reaps whatever
//! ends, and exits with the command's status once the command ends (128 +
//! the signal when a signal killed it, as bwrap's init does). Its exit ends
//! the pid namespace: the kernel kills whatever the command left behind.
//!
//! The command cannot reach the init: it is pid 1 of the namespace, so
//! signals from inside it are dropped (it handles none); ptrace and its
//! memory need it dumpable; and it holds no fd.

use crate::sys;
use seccompiler::BpfProgram;

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

/// The init's side after the fork. `command`: the child's pid; `held`: the
/// fds above 2 step 5 left open (the report's, the kept ones), closed one by
/// one should close_range be missing (kernels before 5.9).
pub fn run(command: libc::pid_t, program: &BpfProgram, held: &[i32]) -> ! {
    // The report pipe, the command's stdio and any kept fd: the launcher
    // sees each end when the command's last copy closes, not ours.
    if sys::close_range(0, u32::MAX).is_err() {
        for fd in (0..=2).chain(held.iter().copied()) {
            sys::close(fd);
        }
    }
    // Defence in depth: the init runs our code only; if it cannot be
    // confined as planned, the command does not run on under it.
    if sys::set_not_dumpable().is_err() || crate::seccomp::install(program).is_err() {
        sys::kill_now(command);
        sys::exit_now(72);
    }
    loop {
        match sys::wait_any() {
            Ok((pid, status)) if pid == command => sys::exit_now(exit_code(status)),
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
    fn exit_codes_follow_bwrap() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(libc::SIGKILL), 128 + 9);
        assert_eq!(exit_code(libc::SIGSEGV | 0x80), 128 + 11); // core dumped
    }
}
