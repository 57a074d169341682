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

// A run's small blocks reach ≈ 150 KiB into the arena (with --json; its
// big buffers, mostly untouched, come from the arena's far end: arena.rs,
// LARGE), ≈ 40 of them before bwrap is started: only those are populated
// at the start; the rest once bwrap is loading (AFTER_EARLY_LAUNCH), where
// zeroing them costs no wall time. Left to fault one page at a time, they
// came due after the command's end (13 faults per run, traced).
#[global_allocator]
static ALLOC: arena::Arena<{ 4 * 1024 * 1024 }, { 48 * 1024 }> = arena::Arena::new();
const POPULATED: usize = 176 * 1024;

#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    startup::standard_fds();
    // As Rust's runtime did: a reader that goes away gives EPIPE, not death,
    // so the sandbox is still cleaned up (children get SIGPIPE back: spawn.rs).
    // SAFETY: installing SIG_IGN runs no code of ours.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // Copying the command's output into a file on our stdout past the
    // caller's RLIMIT_FSIZE gives EFBIG, not death with no result (the
    // command's own writes get the default back: spawn.rs).
    // SAFETY: installing SIG_IGN runs no code of ours.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    // A caller that ignores SIGCHLD would have our children reaped by the
    // kernel: no status to wait for, and bwrap, inheriting it, hangs waiting
    // for its own. The launcher needs the default.
    // SAFETY: installing SIG_DFL runs no code of ours.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_DFL) };
    // Installed setuid or setgid, the launcher would plan with one user's
    // powers for another: a caller could choose `--uid 0` and root's files.
    // AT_SECURE (free to read) is set by any such exec; the ids decide.
    // SAFETY: getauxval reads the auxiliary vector; the id calls only return.
    let (uid, euid, gid, egid) = unsafe {
        if libc::getauxval(libc::AT_SECURE) != 0 {
            (
                libc::getuid(),
                libc::geteuid(),
                libc::getgid(),
                libc::getegid(),
            )
        } else {
            (0, 0, 0, 0)
        }
    };
    if uid != euid || gid != egid {
        eprintln!(
            "cordon: error: refusing to run setuid or setgid (uid {uid} euid {euid}, gid {gid} egid {egid}); install cordon as a plain executable (mode 0755): it needs no privilege"
        );
        std::process::exit(cordon::error::exit::SETUP);
    }
    // Not dumpable: killed by a signal that dumps core (or crashing), the
    // launcher would write its memory, the caller's whole environment in it
    // (the secrets cordon keeps from the command), to a core file in the
    // current directory: often the workspace the next command reads. exec
    // makes bwrap and the command dumpable again.
    // SAFETY: prctl(PR_SET_DUMPABLE, 0) only sets a process attribute.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong) };
    let _ = cordon::AFTER_EARLY_LAUNCH.set(|| ALLOC.populate(POPULATED));
    // SAFETY: argc and argv are what the C runtime passed to main.
    let raw = unsafe { startup::args(argc, argv) };
    // Arguments are text: bytes that are not UTF-8 would have to be changed
    // (a path or an argument that names something else), so they are refused.
    let mut argv: Vec<String> = Vec::with_capacity(raw.len());
    for (i, a) in raw.into_iter().enumerate() {
        match a.into_string() {
            Ok(s) => argv.push(s),
            Err(a) => {
                eprintln!(
                    "cordon: error: argument {i} is not valid UTF-8 ({}); cordon passes arguments as text only",
                    a.to_string_lossy()
                );
                std::process::exit(cordon::error::exit::SETUP);
            }
        }
    }
    let code = cordon::cli::main(argv);
    if let Some(e) = cordon::out_failed() {
        eprintln!("cordon: error: cannot write to stdout: {e}; the output is lost");
        std::process::exit(cordon::error::exit::SETUP);
    }
    // exit, not return: it flushes stdout.
    std::process::exit(code);
}
