//! One error type for the helper; each variant is named after the step that
//! failed and maps to exactly one documented exit code (docs/helper.md).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bad command line.
    Usage(String),
    /// The policy could not be parsed or violates the schema.
    Policy(String),
    /// Landlock could not be enforced as the policy requires.
    Landlock(String),
    /// The seccomp filter could not be built or installed.
    Seccomp(String),
    /// Capabilities could not be dropped or verified; uid switch failed.
    Caps(String),
    /// The command could not be executed.
    Exec(String),
    /// Policy file type/owner/mode, NO_NEW_PRIVS, rlimits.
    Permission(String),
    /// Running setuid or setgid.
    Setuid(String),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 64,
            Error::Policy(_) => 70,
            Error::Landlock(_) => 71,
            Error::Seccomp(_) => 72,
            Error::Caps(_) => 73,
            Error::Exec(_) => 74,
            Error::Permission(_) => 75,
            Error::Setuid(_) => 76,
        }
    }

    fn message(&self) -> &str {
        match self {
            Error::Usage(m)
            | Error::Policy(m)
            | Error::Landlock(m)
            | Error::Seccomp(m)
            | Error::Caps(m)
            | Error::Exec(m)
            | Error::Permission(m)
            | Error::Setuid(m) => m,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, always: newlines in causes would break log parsers.
        f.write_str(&self.message().replace('\n', " "))
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
