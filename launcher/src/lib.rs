//! cordon's outer layer: plans a bubblewrap invocation with `cordon-helper`
//! inside it, runs it, and reports what was actually enforced.
//!
//! - [`plan`]: the pure planner (argv, helper policy, environment);
//! - [`policy`]: profiles, config files, the helper policy JSON;
//! - [`paths`]: path validation against injectable filesystem facts;
//! - [`runner`]: spawn, fds, timeouts, signals, capture;
//! - [`probe`]: the preflight sandbox and its cache;
//! - [`helper_bin`]: helper discovery and integrity checks;
//! - [`verify`]: `cordon verify`, the adversarial self-test;
//! - [`doctor`], [`cli`]: the `cordon` command.

pub mod error;
pub mod paths;
pub mod plan;
pub mod policy;

pub use error::{Error, Result};
pub mod cli;
pub mod doctor;
pub mod helper_bin;
pub mod probe;
pub mod runner;
mod spawn;
mod sys;
pub mod verify;

/// Called right after bwrap was started ahead of the plan (`cli`'s
/// `launch_early`). The binary sets it to populate the memory the rest of the
/// run will allocate: zeroing those pages then overlaps bwrap's loading
/// instead of delaying bwrap's start.
pub static AFTER_EARLY_LAUNCH: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// `println!` that cannot panic: with Rust's SIGPIPE disposition a closed
/// stdout (`cordon doctor | head -1`) makes `println!` panic. A reader that
/// went away (EPIPE) chose to stop: the line is dropped. Any other failure
/// (a full disk, a closed stdout) loses output the caller wanted: it is
/// remembered, and the launcher exits 125 saying so (`out_failed`).
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        $crate::note_out(writeln!(std::io::stdout().lock(), $($t)*));
    }};
}

static OUT_ERRNO: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Record a failed write to stdout (see `outln!`).
pub fn note_out(r: std::io::Result<()>) {
    if let Err(e) = r {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let n = e.raw_os_error().unwrap_or(libc::EIO);
            OUT_ERRNO.store(n, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The first failed write to stdout other than EPIPE, if any.
pub fn out_failed() -> Option<std::io::Error> {
    match OUT_ERRNO.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        n => Some(std::io::Error::from_raw_os_error(n)),
    }
}
