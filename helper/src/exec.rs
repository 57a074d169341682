//! Step 8: the command. Everything exec needs — the resolved path, argv and
//! envp arrays, the failure message — is built before the seccomp filter, so
//! after it only execve, write and exit_group are called.

use crate::env;
use crate::error::{Error, Result};
use crate::sys;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

pub struct Command {
    path: CString,
    // Owners of the strings the pointer arrays point into.
    _argv: Vec<CString>,
    _envp: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp_ptrs: Vec<*const libc::c_char>,
    search_path: Option<OsString>,
    name: OsString,
    msg_prefix: Vec<u8>,
    /// The report fd (close-on-exec, so a successful exec closes it) and the
    /// start of the line written to it when exec fails.
    report_fd: Option<i32>,
    report_prefix: Vec<u8>,
}

fn cstring(s: &OsStr, what: &str) -> Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| Error::Usage(format!("{what} contains a NUL byte")))
}

pub fn prepare(argv: &[OsString], env: env::Prepared) -> Result<Command> {
    let Some(name) = argv.first() else {
        return Err(Error::Usage("no command given after --".into()));
    };
    if name.is_empty() {
        return Err(Error::Usage("the command name is empty".into()));
    }
    let args: Vec<CString> = argv
        .iter()
        .enumerate()
        .map(|(i, a)| cstring(a, &format!("argument {i}")))
        .collect::<Result<_>>()?;
    let mut argv_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = env.envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    Ok(Command {
        path: args[0].clone(),
        _argv: args,
        _envp: env.envp,
        argv_ptrs,
        envp_ptrs,
        search_path: env.path,
        name: name.clone(),
        msg_prefix: Vec::new(),
        report_fd: None,
        report_prefix: Vec::new(),
    })
}

impl Command {
    /// Resolve a bare name through the command's PATH, as execvp would, and
    /// build the failure message. Run after Landlock so the search sees what
    /// the command will see.
    pub fn resolve(&mut self) -> Result<()> {
        let name = self.name.as_bytes();
        if !name.contains(&b'/') {
            let path = self
                .search_path
                .clone()
                .unwrap_or_else(|| DEFAULT_PATH.into());
            let candidates: Vec<CString> = path
                .as_bytes()
                .split(|b| *b == b':')
                .map(|dir| {
                    let dir = if dir.is_empty() { &b"."[..] } else { dir };
                    let mut p = dir.to_vec();
                    p.push(b'/');
                    p.extend_from_slice(name);
                    p
                })
                .filter_map(|p| CString::new(p).ok())
                .collect();
            match candidates.iter().find(|p| sys::executable(p)) {
                Some(p) => self.path = p.clone(),
                None => {
                    // As execvp: EACCES when a candidate exists but may not
                    // be run (not executable, or Landlock refuses it).
                    let errno = match candidates.iter().any(|p| sys::exists(p)) {
                        true => "EACCES: found in PATH but not executable",
                        false => "ENOENT: not found in PATH",
                    };
                    return Err(Error::Exec(format!(
                        "cannot execute {}: {errno} ({})",
                        self.name.to_string_lossy(),
                        path.to_string_lossy()
                    )));
                }
            }
        }
        let shown = String::from_utf8_lossy(self.path.as_bytes());
        self.msg_prefix = format!("cordon-helper: error: cannot execute {shown}: ").into_bytes();
        self.report_prefix = format!(
            "{{\"exec_failed\":{{\"path\":{},\"errno\":\"",
            serde_json::Value::from(shown.as_ref())
        )
        .into_bytes();
        Ok(())
    }

    /// After the report line, a failed exec adds `{"exec_failed": {"path",
    /// "errno"}}` on `fd`: the launcher tells a command that could not start
    /// (126/127) from one that exited 74.
    pub fn report_failure_to(&mut self, fd: Option<i32>) {
        self.report_fd = fd;
    }

    /// execve, or report the errno on stderr and exit 74 — without allocating.
    pub fn exec(&self) -> ! {
        let errno = self.try_exec();
        self.say_failure(errno);
        if let Some(fd) = self.report_fd {
            self.report_failure(fd, errno);
        }
        sys::exit_now(74)
    }

    /// execve; returns only on failure, with the errno (nothing written).
    pub fn try_exec(&self) -> i32 {
        sys::execve(&self.path, &self.argv_ptrs, &self.envp_ptrs)
    }

    /// The failed exec's message on stderr, without allocating.
    pub fn say_failure(&self, errno: i32) {
        let mut buf = [0u8; 12];
        let _ = sys::write_all(2, &self.msg_prefix);
        let _ = sys::write_all(2, errno_name(errno, &mut buf));
        let _ = sys::write_all(2, b"\n");
    }

    /// The failed exec's report line on `fd` (see `report_failure_to`),
    /// without allocating.
    pub fn report_failure(&self, fd: i32, errno: i32) {
        let mut buf = [0u8; 12];
        let _ = sys::write_all(fd, &self.report_prefix);
        let _ = sys::write_all(fd, errno_name(errno, &mut buf));
        let _ = sys::write_all(fd, b"\"}}\n");
    }
}

/// `E...` for a known errno, else its number.
fn errno_name(errno: i32, buf: &mut [u8; 12]) -> &[u8] {
    match crate::errno::name(errno as u16) {
        Some(n) => n.as_bytes(),
        None => itoa(errno, buf),
    }
}

/// `n` in decimal, without allocating (for paths that run under the filter).
pub(crate) fn itoa(mut n: i32, buf: &mut [u8; 12]) -> &[u8] {
    let neg = n < 0;
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10).unsigned_abs() as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    #[test]
    fn itoa_formats() {
        let mut b = [0u8; 12];
        assert_eq!(super::itoa(0, &mut b), b"0");
        assert_eq!(super::itoa(4095, &mut b), b"4095");
        assert_eq!(super::itoa(i32::MIN, &mut b), b"-2147483648");
    }
}
