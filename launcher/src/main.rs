// `no_main`: Rust's runtime start-up costs ≈ 0.1 ms per exec here; the
// helper's startup.rs keeps the parts that matter (shared by path, as below).
#![no_main]

// The helper's bump allocator, shared by path rather than by crate (it is one
// file): musl's allocator returns freed memory to the kernel one munmap at a
// time, ≈ 0.4 ms per run. 4 MiB of address space; a long run that allocates
// more (output streaming) continues in musl's allocator.
#[path = "../../helper/src/arena.rs"]
mod arena;
#[path = "../../helper/src/startup.rs"]
mod startup;

#[global_allocator]
static ALLOC: arena::Arena<{ 4 * 1024 * 1024 }> = arena::Arena::new();

#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    startup::standard_fds();
    // As Rust's runtime did: a reader that goes away gives EPIPE, not death,
    // so the sandbox is still cleaned up (children get SIGPIPE back: spawn.rs).
    // SAFETY: installing SIG_IGN runs no code of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // SAFETY: argc and argv are what the C runtime passed to main.
    let argv: Vec<String> = unsafe { startup::args(argc, argv) }
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // exit, not return: it flushes stdout.
    std::process::exit(cordon::cli::main(argv));
}
