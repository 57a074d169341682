//! Time the helper's seccomp filter: building it from a policy, and attaching
//! it in the kernel (in a forked child, so this process stays unfiltered).
//!
//!   cordon-filterbench POLICY.json [ITERATIONS]
//!
//! Prints one JSON object: instructions, worst-case evaluated instructions
//! (overall, for an allowed and for a denied call), median build and attach
//! times in microseconds.

use cordon_helper::{policy, seccomp};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: cordon-filterbench POLICY.json [ITERATIONS]");
        std::process::exit(2);
    };
    let iters: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
    let bytes = std::fs::read(path).expect("reading the policy");
    let pol = policy::parse(&bytes).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut build = Vec::new();
    let mut resolve = Vec::new();
    let mut compiled = None;
    for _ in 0..iters {
        let t = Instant::now();
        let spec = seccomp::resolve(&pol.syscalls, Some(9)).expect("resolving");
        resolve.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(seccomp::emit::build(&spec).expect("emitting"));
        let t = Instant::now();
        let c = seccomp::compile(&pol.syscalls, Some(9)).expect("compiling");
        build.push(t.elapsed().as_secs_f64() * 1e6);
        compiled = Some(c);
    }
    let compiled = compiled.expect("at least one iteration");
    let mut attach = Vec::new();
    for _ in 0..iters.min(200) {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a valid two-int array for pipe(2) to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only installs the filter, writes to a pipe and
        // _exits; it touches no locks held by other threads (there are none).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let t = Instant::now();
            let ok = seccomp::install(&compiled.program).is_ok();
            let us = t.elapsed().as_secs_f64() * 1e6;
            let v = if ok { us } else { -1.0 };
            // SAFETY: writes 8 bytes from a live local to our pipe, then exits.
            unsafe {
                libc::write(fds[1], (&v as *const f64).cast(), 8);
                libc::_exit(0);
            }
        }
        let mut v = 0f64;
        // SAFETY: reads 8 bytes into a live local; waits for our own child.
        unsafe {
            libc::read(fds[0], (&mut v as *mut f64).cast(), 8);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        if v >= 0.0 {
            attach.push(v);
        }
    }
    let (allowed, denied) = seccomp::emit::worst_case_by_verdict(&compiled.program);
    println!(
        "{{\"instructions\":{},\"worst_case_instructions\":{},\"worst_case_allowed\":{allowed},\"worst_case_denied\":{denied},\"rules\":{},\"build_us\":{:.1},\"resolve_us\":{:.1},\"attach_us\":{:.1}}}",
        compiled.program.len(),
        seccomp::emit::worst_case_path(&compiled.program),
        compiled.rule_count(),
        median(build),
        median(resolve),
        if attach.is_empty() { f64::NAN } else { median(attach) }
    );
}
