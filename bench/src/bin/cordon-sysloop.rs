//! Loop on one syscall and print the mean cost per call in nanoseconds.
//!
//!   cordon-sysloop [--allow-all-filter] getppid|ioctl|openat|denied COUNT
//!
//! `getppid` is allowed without argument checks (the kernel's per-number cache
//! skips the filter); `ioctl` (FIONREAD on a pipe) runs the default profile's
//! argument rules; `openat` opens `/dev/null` and closes it (the default
//! profile checks openat's flags and mode; close is cached); `denied` is
//! `syslog(SIZE_BUFFER)`, refused by the default profile and harmless when
//! allowed. `--allow-all-filter` first installs a
//! one-instruction `return ALLOW` filter, the cheapest filter possible.

use std::time::Instant;

fn allow_all() {
    let prog = vec![seccompiler::sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0x7fff_0000,
    }];
    seccompiler::apply_filter(&prog).expect("installing the allow-all filter");
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--allow-all-filter") {
        allow_all();
        args.remove(0);
    }
    let (Some(mode), Some(count)) = (
        args.first(),
        args.get(1).and_then(|c| c.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: cordon-sysloop [--allow-all-filter] getppid|ioctl|openat|denied COUNT");
        std::process::exit(2);
    };
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid two-int array for pipe(2) to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        eprintln!("pipe failed");
        std::process::exit(2);
    }
    let call: Box<dyn Fn() -> libc::c_long> = match mode.as_str() {
        // SAFETY: getppid takes no arguments and cannot fail.
        "getppid" => Box::new(|| unsafe { libc::syscall(libc::SYS_getppid) }),
        "ioctl" => {
            let fd = fds[0];
            Box::new(move || {
                let mut n: libc::c_int = 0;
                // SAFETY: FIONREAD writes one int to a live local.
                unsafe {
                    libc::syscall(
                        libc::SYS_ioctl,
                        fd,
                        libc::FIONREAD,
                        &mut n as *mut libc::c_int,
                    )
                }
            })
        }
        "openat" => Box::new(|| {
            // SAFETY: a NUL-terminated literal path; the fd is closed at once.
            unsafe {
                let fd = libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    c"/dev/null".as_ptr(),
                    libc::O_RDONLY | libc::O_CLOEXEC,
                    0,
                );
                libc::close(fd as i32)
            }
            .into()
        }),
        // SAFETY: SYSLOG_ACTION_SIZE_BUFFER (10) only reads the buffer size.
        "denied" => Box::new(|| unsafe { libc::syscall(libc::SYS_syslog, 10, 0usize, 0) }),
        other => {
            eprintln!("unknown mode {other}");
            std::process::exit(2);
        }
    };
    let start = Instant::now();
    for _ in 0..count {
        std::hint::black_box(call());
    }
    let ns = start.elapsed().as_nanos() as f64 / count as f64;
    println!("{mode} {ns:.1} ns/call");
}
