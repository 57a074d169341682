//! See the binaries in src/bin: used by scripts/bench only.

use std::ffi::c_char;

/// Start `argv[0]` with `argv` and the current environment through
/// posix_spawn (musl: clone with CLONE_VM|CLONE_VFORK, as cordon starts bwrap
/// and the helper starts the command). None when it cannot be started.
///
/// # Safety
/// `argv` must point to valid NUL-terminated strings ending with a NULL.
pub unsafe fn spawn(argv: *const *const c_char) -> Option<libc::pid_t> {
    extern "C" {
        static environ: *const *mut c_char;
    }
    let mut pid = 0;
    // SAFETY: the caller vouches for argv; environ is the C runtime's.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            *argv,
            std::ptr::null(),
            std::ptr::null(),
            argv.cast(),
            environ,
        )
    };
    (rc == 0).then_some(pid)
}

/// Reap children until `pid` (pid 1 is handed orphans too); its exit status
/// as a shell gives it.
pub fn wait_exit(pid: libc::pid_t) -> libc::c_int {
    let mut st = 0;
    loop {
        // SAFETY: waitpid writes one int to a live local.
        let r = unsafe { libc::waitpid(-1, &mut st, 0) };
        if r == pid || r < 0 {
            break;
        }
    }
    if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else {
        128 + libc::WTERMSIG(st)
    }
}
