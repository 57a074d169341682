//! Process start-up for cordon's two binaries, which are `#![no_main]`.
//!
//! Why: Rust's runtime start-up (`lang_start`) costs ≈ 0.1 ms per exec on
//! the benchmark VM (a static musl program that only execs: +0.11 ms with
//! std's `main`, +0.02 ms with `#![no_main]`; docs/benchmarks-history.md), and every
//! `cordon run` starts two Rust programs. Most of it is the main thread's
//! stack-overflow handler (a signal stack mapped and guarded) and signal
//! set-up that cordon does not need. What it did that matters is kept
//! here: fds 0–2 are made valid, and the argument vector is read from `main`'s
//! own arguments (on musl, std only records it in `lang_start`, so
//! `std::env::args_os()` is empty in a `no_main` program). SIGPIPE is left
//! to each binary: the launcher ignores it, as std did; the helper resets it
//! for the command anyway (`sys::default_sigpipe`). `std::process::exit`
//! still flushes stdout.

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;

/// The argument vector, program name first.
///
/// # Safety
/// `argv` must be the `argv` passed to the C `main`: `argc` valid,
/// NUL-terminated strings that live for the whole process.
pub unsafe fn args(argc: libc::c_int, argv: *const *const libc::c_char) -> Vec<OsString> {
    let n = usize::try_from(argc).unwrap_or(0);
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the caller passes main's argc/argv; i < argc, so the slot
        // holds a valid NUL-terminated string (null only at argv[argc]).
        let p = unsafe { *argv.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: p is one of argv's strings (see above).
        let s = unsafe { CStr::from_ptr(p) };
        v.push(OsString::from_vec(s.to_bytes().to_vec()));
    }
    v
}

/// Make fds 0, 1 and 2 valid, as Rust's runtime did: a closed one is opened
/// on `/dev/null`, so that no file this process opens later lands on a
/// standard stream and receives the command's output. One `poll` when all
/// three are open (the usual case). When `/dev/null` cannot be opened either,
/// the process aborts (std's behaviour too): nothing sensible can be
/// reported without a stderr.
pub fn standard_fds() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: fds is a valid array of 3 pollfds; timeout 0 never blocks.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
    if r == 0 {
        return;
    }
    for p in fds {
        // r < 0 (poll itself failed: unexpected) checks each fd with fcntl.
        let closed = if r > 0 {
            p.revents & libc::POLLNVAL != 0
        } else {
            // SAFETY: F_GETFD on any fd number only reads the fd table.
            (unsafe { libc::fcntl(p.fd, libc::F_GETFD) }) == -1
        };
        if closed {
            // SAFETY: a constant NUL-terminated path; the fd returned is the
            // lowest free one, which is p.fd because lower ones are open.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if fd != p.fd {
                std::process::abort();
            }
        }
    }
}
