//! The architecture floor's stand-in for the launcher: give bwrap the fds
//! cordon's bwrap command line names, start it, drain its info fd, wait,
//! exit with its status. No parsing, planning, probing or
//! report: what `cordon run` would cost if the launcher's own work were free
//! (scripts/bench, "floor").
//!
//!   cordon-floor-launch INIT BWRAP [ARGS...]
//!
//! fd 4 is a pipe for `--info-fd 4`, fd 6 is INIT opened for
//! `/proc/self/fd/6`, fds 7 to 15 are /dev/null for `--ro-bind-data N`
//! (cordon's empty file masks).
#![no_main]

/// perror, not eprintln: std's formatting would be most of this binary.
fn fail(what: &std::ffi::CStr) -> libc::c_int {
    // SAFETY: `what` is a NUL-terminated string.
    unsafe { libc::perror(what.as_ptr()) };
    70
}

#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    if argc < 3 {
        let usage = b"usage: cordon-floor-launch INIT BWRAP [ARGS...]\n";
        // SAFETY: writes a live buffer of its own length.
        unsafe { libc::write(2, usage.as_ptr().cast(), usage.len()) };
        return 64;
    }
    // SAFETY: argv holds argc valid pointers and a NULL, as the C runtime
    // passed them; the fd calls take plain integers and owned buffers.
    unsafe {
        let init = libc::open(*argv.add(1), libc::O_RDONLY);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        let mut p = [0; 2];
        if init < 0 || null < 0 || libc::pipe(p.as_mut_ptr()) != 0 {
            return fail(c"cordon-floor-launch: setup");
        }
        // Out of the way of the fixed numbers first, then onto them.
        let (init, null) = (
            libc::fcntl(init, libc::F_DUPFD, 20),
            libc::fcntl(null, libc::F_DUPFD, 20),
        );
        let (r, w) = (
            libc::fcntl(p[0], libc::F_DUPFD_CLOEXEC, 20),
            libc::fcntl(p[1], libc::F_DUPFD, 20),
        );
        (3..20).for_each(|fd| {
            libc::close(fd);
        });
        libc::dup2(w, 4);
        libc::dup2(init, 6);
        for fd in 7..=15 {
            libc::dup2(null, fd);
        }
        [init, null, w].iter().for_each(|fd| {
            libc::close(*fd);
        });
        let Some(pid) = cordon_bench::spawn(argv.add(2)) else {
            return 127;
        };
        (4..16).for_each(|fd| {
            libc::close(fd);
        });
        let mut buf = [0u8; 4096];
        while libc::read(r, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
        cordon_bench::wait_exit(pid)
    }
}
