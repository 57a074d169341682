//! The architecture floor's stand-in for the helper as the sandbox's pid 1:
//! start the command, wait for it, exit with its status. No policy, no
//! Landlock, no capabilities, no filter: what `cordon run` would cost if the
//! helper's own work were free (scripts/bench, "floor").
//!
//!   cordon-floor-init CMD [ARGS...]
#![no_main]

#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    if argc < 2 {
        return 64;
    }
    // SAFETY: argv holds argc valid pointers and a NULL, as the C runtime
    // passed them.
    match unsafe { cordon_bench::spawn(argv.add(1)) } {
        Some(pid) => cordon_bench::wait_exit(pid),
        None => 127,
    }
}
