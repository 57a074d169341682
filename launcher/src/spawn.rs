//! Starting bwrap (or, with `--layers inner`, the helper; or the preflight
//! probe's sandboxes and their sibling process) with vfork semantics.
//!
//! `clone(CLONE_VM | CLONE_VFORK)` runs the child on a small stack inside our
//! address space until it execs, and suspends us meanwhile. Unlike fork, nothing
//! is copied and no page faults back in afterwards: fork plus the copy-on-write
//! faults on both sides cost ≈ 0.5 ms per run on the reference VM.
//!
//! The price is discipline in the child: it shares our memory, so it makes raw
//! system calls only: no allocation, no lock, and no libc wrapper that touches
//! process-wide state (musl's `set*id` wrappers signal every thread, so the id
//! switch uses `syscall` directly). Everything it needs (C strings, pointer
//! arrays, the fd table) is built before the clone. A failing step is written to
//! a shared word and the child exits; the parent, resumed, reaps it and reports
//! which step failed with its errno.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the child does before it execs `program`.
pub struct Spec {
    pub program: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub cwd: CString,
    /// `(target, source)`: dup2 each source onto its target. Every source must be
    /// numbered above every target (the caller duplicates them up first), so no
    /// dup2 can clobber a source still needed.
    pub fds: Vec<(RawFd, RawFd)>,
    /// Become this uid/gid (supplementary groups cleared) before exec.
    pub switch_to: Option<(u32, u32)>,
    /// Signals whose handlers the child resets to the default before it unblocks
    /// signals: a handler must never run in the child, on our memory.
    pub reset_signals: Vec<libc::c_int>,
}

/// The dispositions the launcher changes, reset in every child it starts:
/// it ignores SIGPIPE and SIGXFSZ (an ignored signal stays ignored across
/// exec), and
/// the launcher catches SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGTSTP.
pub const LAUNCHER_SIGNALS: [libc::c_int; 7] = [
    libc::SIGPIPE,
    libc::SIGXFSZ,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTSTP,
];

/// What a child must reset: SIGPIPE and SIGXFSZ always (the launcher's own
/// ignores), and
/// each of the others unless it is ignored — ignored when the
/// launcher started (`nohup`, a background job of a non-interactive shell),
/// it stays ignored for bwrap too, as the caller asked. A handler is never
/// left in place: it must not run in the child, on our memory.
pub fn signals_to_reset() -> Vec<libc::c_int> {
    LAUNCHER_SIGNALS
        .into_iter()
        .filter(|&s| s == libc::SIGPIPE || s == libc::SIGXFSZ || !crate::sys::signal_ignored(s))
        .collect()
}

/// The step of the child that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Signals,
    Dup2,
    CloseRange,
    Chdir,
    SetGroups,
    SetGid,
    SetUid,
    VerifyIds,
    DeathSignal,
    ParentGone,
    ProcessGroup,
    Exec,
}

const STEPS: [Step; 12] = [
    Step::Signals,
    Step::Dup2,
    Step::CloseRange,
    Step::Chdir,
    Step::SetGroups,
    Step::SetGid,
    Step::SetUid,
    Step::VerifyIds,
    Step::DeathSignal,
    Step::ParentGone,
    Step::ProcessGroup,
    Step::Exec,
];

#[derive(Debug)]
pub struct SpawnError {
    pub step: Step,
    pub err: io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.step {
            Step::Signals => "resetting signal handlers",
            Step::Dup2 => "passing fds",
            Step::CloseRange => "marking fds close-on-exec",
            Step::Chdir => "changing directory",
            Step::SetGroups => "clearing supplementary groups",
            Step::SetGid => "setting the gid",
            Step::SetUid => "setting the uid",
            Step::VerifyIds => "verifying the uid/gid switch",
            Step::DeathSignal => "setting the parent-death signal",
            Step::ParentGone => "checking the launcher is alive",
            Step::ProcessGroup => "creating a process group",
            Step::Exec => "exec",
        };
        write!(f, "{what}: {}", self.err)
    }
}

/// Start the child and return its pid once it has exec'd.
pub fn spawn(spec: &Spec) -> Result<libc::pid_t, SpawnError> {
    let fail = |step, err| SpawnError { step, err };
    let argv = ptrs(&spec.argv);
    let envp = ptrs(&spec.envp);
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let failed = AtomicU64::new(0);
    let mut stack = vec![0u8; 64 << 10];

    // Block every signal across the clone: the child inherits the mask, so no
    // handler can run in it before it has reset the handlers it must not run.
    // SAFETY: an all-zero sigset_t is a valid value for sigfillset to fill.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for the saved mask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigfillset writes into `all`; pthread_sigmask reads `all`, writes `old`.
    let r = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old)
    };
    if r != 0 {
        return Err(fail(Step::Signals, io::Error::from_raw_os_error(r)));
    }

    let cb = Box::new(|| -> isize {
        match child(spec, &argv, &envp, parent) {
            Ok(never) => match never {},
            Err((step, errno)) => {
                failed.store(
                    ((step as u64 + 1) << 32) | errno as u32 as u64,
                    Ordering::Relaxed,
                );
                127
            }
        }
    });
    use nix::sched::CloneFlags;
    // SAFETY: CLONE_VM | CLONE_VFORK: the child runs `cb` on `stack` (64 KiB; it
    // needs a few hundred bytes) in our memory while we are suspended, until it
    // execs or exits. `cb` makes raw system calls only (see `child`) and writes
    // nothing of ours but the atomic `failed`. `argv`, `envp`, `spec` and `stack`
    // outlive the call, which returns only after the child has left our memory.
    let res = unsafe {
        nix::sched::clone(
            cb,
            &mut stack,
            CloneFlags::CLONE_VM | CloneFlags::CLONE_VFORK,
            Some(libc::SIGCHLD),
        )
    };
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    let pid = res
        .map_err(|e| fail(Step::Exec, io::Error::from_raw_os_error(e as i32)))?
        .as_raw();
    let f = failed.load(Ordering::Relaxed);
    if f != 0 {
        let mut st = 0;
        // SAFETY: reaps the child that just exited; `st` is a valid int.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        let step = STEPS
            .get(((f >> 32) as usize).saturating_sub(1))
            .copied()
            .unwrap_or(Step::Exec);
        return Err(fail(step, io::Error::from_raw_os_error(f as u32 as i32)));
    }
    Ok(pid)
}

fn ptrs(v: &[CString]) -> Vec<*const libc::c_char> {
    v.iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

enum Never {}

/// The kernel's `struct sigaction` (not libc's): raw rt_sigaction needs no
/// wrapper, whose bookkeeping is process-wide state.
#[repr(C)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The child, between clone and exec. Raw system calls only (see the module doc).
fn child(
    spec: &Spec,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    parent: libc::pid_t,
) -> Result<Never, (Step, i32)> {
    let check = |step: Step, r: libc::c_long| if r < 0 { Err((step, errno())) } else { Ok(()) };
    for &sig in &spec.reset_signals {
        let dfl = KernelSigaction {
            handler: libc::SIG_DFL,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: rt_sigaction reads a kernel `struct sigaction` (the layout of
        // KernelSigaction on x86_64 and aarch64) and the 8-byte mask size.
        check(Step::Signals, unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &dfl as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        })?;
    }
    // Every fd from 3 up close-on-exec first, then the targets made by dup2
    // (which never sets the flag): only they cross exec. Marking only above
    // the highest target left the caller's leaked fds in the gaps between
    // targets open in bwrap, and so in the command.
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets fd flags.
    check(Step::CloseRange, unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    })?;
    for &(target, src) in &spec.fds {
        // SAFETY: dup2 on two fds; no memory involved.
        check(Step::Dup2, unsafe { libc::dup2(src, target) }
            as libc::c_long)?;
    }
    // SAFETY: `cwd` is a NUL-terminated string that outlives the child.
    check(Step::Chdir, unsafe { libc::chdir(spec.cwd.as_ptr()) }
        as libc::c_long)?;
    if let Some((uid, gid)) = spec.switch_to {
        // SAFETY: raw id syscalls: size 0 and a null list clear the groups.
        check(Step::SetGroups, unsafe {
            libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>())
        })?;
        // SAFETY: as above.
        check(Step::SetGid, unsafe {
            libc::syscall(libc::SYS_setresgid, gid, gid, gid)
        })?;
        // SAFETY: as above.
        check(Step::SetUid, unsafe {
            libc::syscall(libc::SYS_setresuid, uid, uid, uid)
        })?;
        // SAFETY: getters with no preconditions.
        let ok =
            unsafe { libc::getuid() == uid && libc::geteuid() == uid && libc::getgid() == gid };
        if !ok {
            return Err((Step::VerifyIds, libc::EPERM));
        }
    }
    // After the uid switch, which clears it: SIGKILL bwrap if the launcher dies.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number.
    check(Step::DeathSignal, unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong)
    } as libc::c_long)?;
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        return Err((Step::ParentGone, libc::ESRCH));
    }
    // Its own process group, so a timeout can kill bwrap and all it started.
    // SAFETY: setpgid(0, 0) on ourselves.
    check(Step::ProcessGroup, unsafe { libc::setpgid(0, 0) }
        as libc::c_long)?;
    // bwrap starts as from fork: no blocked signals.
    // SAFETY: an all-zero sigset_t is valid; sigemptyset and sigprocmask write/read it.
    let r = unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut())
    };
    if r != 0 {
        return Err((Step::Signals, r));
    }
    // SAFETY: `program` and every pointer in `argv`/`envp` point to NUL-terminated
    // strings that outlive the child; both arrays end with a null pointer.
    unsafe { libc::execve(spec.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    Err((Step::Exec, errno()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn wait(pid: libc::pid_t) -> i32 {
        let mut st = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        st
    }

    fn sh(script: &str, fds: Vec<(RawFd, RawFd)>) -> Spec {
        Spec {
            program: c("/bin/sh"),
            argv: vec![c("sh"), c("-c"), c(script)],
            envp: vec![c("A=b")],
            cwd: c("/"),
            fds,
            switch_to: None,
            reset_signals: vec![libc::SIGPIPE],
        }
    }

    /// Spawn `script` with its stdout on a pipe (a source above every target,
    /// as the runner passes them); its pid and output, once it exited 0.
    fn output_of(script: &str) -> (libc::pid_t, String) {
        use std::io::Read;
        let (r, w) = crate::sys::pipe().unwrap();
        let high = crate::sys::dup_above(w.as_raw_fd(), 10).unwrap();
        drop(w);
        let pid = spawn(&sh(script, vec![(1, high.as_raw_fd())])).unwrap();
        drop(high);
        let mut out = String::new();
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
        assert_eq!(wait(pid), 0);
        (pid, out)
    }

    #[test]
    fn runs_with_exact_env_cwd_and_fds() {
        let (_, out) =
            output_of(r#"printf '%s|%s|%s' "$A" "$(pwd)" "$(ls /proc/self/fd | wc -l)" >&1"#);
        // The env is exactly A=b, cwd is /, and only 0-2 plus ls's own fd are open
        // (fds 3+ were marked close-on-exec): 4 entries.
        assert_eq!(out, "b|/|4");
    }

    /// A leaked fd numbered between two targets does not cross exec.
    #[test]
    fn only_the_targets_cross_exec() {
        use std::io::Read;
        // Leaked fds at 3..=6 (not close-on-exec, as a careless caller's).
        let leaks: Vec<RawFd> = (0..4)
            .map(|_| {
                let f = std::fs::File::open("/etc/hostname").unwrap();
                let fd = crate::sys::dup_above(f.as_raw_fd(), 3).unwrap();
                let raw = fd.as_raw_fd();
                std::mem::forget(fd);
                // SAFETY: clearing FD_CLOEXEC on an fd we own.
                assert_eq!(unsafe { libc::fcntl(raw, libc::F_SETFD, 0) }, 0);
                raw
            })
            .collect();
        let (r, w) = crate::sys::pipe().unwrap();
        let high = crate::sys::dup_above(w.as_raw_fd(), 20).unwrap();
        let high2 = crate::sys::dup_above(w.as_raw_fd(), 20).unwrap();
        drop(w);
        // Targets 1 and 8: the leaks (below 8) lie in the gap.
        let pid = spawn(&sh(
            "ls /proc/self/fd | tr '\\n' ' ' >&8",
            vec![(1, high.as_raw_fd()), (8, high2.as_raw_fd())],
        ))
        .unwrap();
        drop((high, high2));
        let mut out = String::new();
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
        assert_eq!(wait(pid), 0);
        for fd in &leaks {
            // SAFETY: our own leaked fds, closed once.
            unsafe { libc::close(*fd) };
        }
        // 0-2, 8, and ls's own directory fd (the lowest free: 3).
        assert_eq!(out.trim(), "0 1 2 3 8", "leaks were {leaks:?}");
    }

    #[test]
    fn failures_name_the_step_and_errno() {
        let mut spec = sh("exit 0", vec![]);
        spec.program = c("/nonexistent/bwrap");
        let e = spawn(&spec).unwrap_err();
        assert_eq!(e.step, Step::Exec);
        assert_eq!(e.err.kind(), io::ErrorKind::NotFound);
        let mut spec = sh("exit 0", vec![]);
        spec.cwd = c("/nonexistent");
        let e = spawn(&spec).unwrap_err();
        assert_eq!(e.step, Step::Chdir);
        let spec = sh("exit 0", vec![(5, 9999)]);
        let e = spawn(&spec).unwrap_err();
        assert_eq!(e.step, Step::Dup2);
        assert_eq!(e.err.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn child_leads_its_own_group_with_no_blocked_signals() {
        let (pid, out) = output_of(
            "set -- $(cut -d' ' -f5 /proc/self/stat) $(grep SigBlk /proc/self/status); echo \"$1 $3\"",
        );
        // /proc/self/stat of `cut` shows the shell's group: the child's pid.
        assert_eq!(out.trim(), format!("{pid} 0000000000000000"));
    }
}
