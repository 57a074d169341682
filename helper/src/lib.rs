//! cordon-helper: the inner layer. Hardens the calling process in a fixed
//! order (see [`enforce::run`] and docs/helper.md) and execs one command.
//!
//! Modules mirror mechanisms: `policy` is the schema, `landlock`, `fds`,
//! `caps`, `seccomp`, `rlimits`, `env` and `exec` are one step each, `mounts`
//! checks bwrap's work against the launcher's plan, `sys`
//! holds every raw syscall.

pub mod arena;
pub mod caps;
pub mod enforce;
pub mod env;
pub mod errno;
pub mod error;
pub mod exec;
pub mod fds;
pub mod init;
pub mod injection;
pub mod inspect;
pub mod landlock;
pub mod mounts;
pub mod policy;
pub mod policy_source;
pub mod report;
pub mod rlimits;
pub mod seccomp;
pub mod startup;
pub mod sys;
