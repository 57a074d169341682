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

/// `println!` that cannot panic: with Rust's SIGPIPE disposition a closed
/// stdout (`cordon doctor | head -1`) makes `println!` panic; the reader is
/// gone, so the line is simply dropped.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}
