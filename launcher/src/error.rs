//! The launcher's one error type, and the one place it becomes an exit code.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Exit codes, documented in docs/launcher.md. Anything else is the command's own
/// status (or 128 + signal when the command was killed).
pub mod exit {
    /// The command ran past `--timeout`; the whole sandbox was killed.
    pub const TIMEOUT: i32 = 124;
    /// The launcher (or the sandbox setup) failed before the command could run.
    pub const SETUP: i32 = 125;
    /// The command exists but cannot be executed.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The command was not found in the sandbox's view.
    pub const NOT_FOUND: i32 = 127;
}

#[derive(Debug)]
pub enum Error {
    /// Bad command line or request.
    Usage(String),
    /// A config file could not be read or parsed.
    Config { path: PathBuf, reason: String },
    /// A path given in a policy/profile/option was refused.
    Path { path: PathBuf, reason: String },
    /// An environment variable name or value was refused.
    Env(String),
    /// bwrap is not installed / not found.
    BwrapMissing(String),
    /// bwrap exists, but the kernel (or a LSM) refuses it user namespaces.
    UserNamespacesRefused { stderr: String },
    /// Everything works except mounting a fresh /proc.
    ProcRefused { stderr: String },
    /// Any other bwrap setup failure (its stderr).
    BwrapFailed { stderr: String },
    /// The helper could not be found, or failed an integrity check.
    Helper(String),
    /// The helper refused its policy or failed to enforce it (its exit code and stderr).
    HelperFailed { code: i32, stderr: String },
    /// A required enforcement layer is unavailable (fail closed).
    LayerUnavailable(String),
    /// The uid chosen to run the sandbox cannot be used (e.g. cannot write the workspace).
    Uid(String),
    /// The command does not exist in the sandbox's view.
    CommandNotFound(String),
    /// The command exists but is not executable.
    CommandNotExecutable(String),
    /// A system call failed in the launcher itself.
    Io { what: String, source: io::Error },
}

impl Error {
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    pub fn path(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Path {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// The single mapping from errors to exit codes.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::CommandNotFound(_) => exit::NOT_FOUND,
            Error::CommandNotExecutable(_) => exit::NOT_EXECUTABLE,
            _ => exit::SETUP,
        }
    }

    /// A short machine-readable kind, used in JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Usage(_) => "usage",
            Error::Config { .. } => "config",
            Error::Path { .. } => "path",
            Error::Env(_) => "env",
            Error::BwrapMissing(_) => "bwrap_missing",
            Error::UserNamespacesRefused { .. } => "userns_refused",
            Error::ProcRefused { .. } => "proc_refused",
            Error::BwrapFailed { .. } => "bwrap_failed",
            Error::Helper(_) => "helper",
            Error::HelperFailed { .. } => "helper_failed",
            Error::LayerUnavailable(_) => "layer_unavailable",
            Error::Uid(_) => "uid",
            Error::CommandNotFound(_) => "command_not_found",
            Error::CommandNotExecutable(_) => "command_not_executable",
            Error::Io { .. } => "io",
        }
    }
}

fn one_line(s: &str) -> String {
    let t = s.trim();
    t.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) => write!(f, "usage: {m}"),
            Error::Config { path, reason } => write!(f, "config {}: {reason}", path.display()),
            Error::Path { path, reason } => write!(f, "path {}: {reason}", path.display()),
            Error::Env(m) => write!(f, "environment: {m}"),
            Error::BwrapMissing(m) => write!(
                f,
                "bwrap not found ({m}); fix: install bubblewrap (apt install bubblewrap) or set CORDON_BWRAP"
            ),
            Error::UserNamespacesRefused { stderr } => write!(
                f,
                "bwrap is present but user namespaces are refused: {}; fix: allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns=0, or run outside a container that blocks them)",
                one_line(stderr)
            ),
            Error::ProcRefused { stderr } => write!(
                f,
                "bwrap works but mounting a fresh /proc is refused: {}; fix: run where procfs may be mounted (e.g. a container without masked /proc), or pass --allow-degraded outer to use a tmpfs /proc",
                one_line(stderr)
            ),
            Error::BwrapFailed { stderr } => write!(f, "bwrap failed: {}", one_line(stderr)),
            Error::Helper(m) => write!(f, "helper: {m}"),
            Error::HelperFailed { code, stderr } => {
                write!(f, "helper failed (exit {code}): {}", one_line(stderr))
            }
            Error::LayerUnavailable(m) => write!(f, "{m}"),
            Error::Uid(m) => write!(f, "uid: {m}"),
            Error::CommandNotFound(m) => write!(f, "command not found: {m}"),
            Error::CommandNotExecutable(m) => write!(f, "command not executable: {m}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
