//! Step 2: read the policy without races: open with O_NOFOLLOW, then check
//! the *open* fd (type, owner, mode, size) — never stat-then-open.

use crate::error::{Error, Result};
use crate::policy::MAX_POLICY_BYTES;
use crate::sys;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    Fd(i32),
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::File(p) => format!("policy file {}", p.display()),
            Source::Fd(n) => format!("policy fd {n}"),
        }
    }
}

fn file_type(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFLNK => "a symlink",
        _ => "of unknown type",
    }
}

/// Read and return the policy bytes (not yet parsed).
pub fn read(src: &Source) -> Result<Vec<u8>> {
    let what = src.describe();
    let fd: OwnedFd = match src {
        Source::File(p) => sys::open_policy(p).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                Error::Permission(format!("{what} is a symlink; refusing to follow it"))
            } else {
                Error::Permission(format!("cannot open {what}: {e}"))
            }
        })?,
        Source::Fd(n) => sys::adopt_fd(*n).map_err(|e| {
            Error::Permission(format!(
                "cannot read {what}: {e} (pass --policy-file PATH or --policy-fd N)"
            ))
        })?,
    };
    let st = sys::fstat(fd.as_raw_fd())
        .map_err(|e| Error::Permission(format!("cannot stat {what}: {e}")))?;
    let uid = nix::unistd::getuid().as_raw();
    let ty = st.st_mode & libc::S_IFMT;
    let is_file = ty == libc::S_IFREG;
    let is_stream = matches!(src, Source::Fd(_)) && (ty == libc::S_IFIFO || ty == libc::S_IFSOCK);
    if !is_file && !is_stream {
        return Err(Error::Permission(format!(
            "{what} is {}, not a regular file",
            file_type(st.st_mode)
        )));
    }
    if st.st_uid != uid {
        return Err(Error::Permission(format!(
            "{what} is owned by uid {}, not by the real uid {uid}",
            st.st_uid
        )));
    }
    if is_file && st.st_mode & 0o7777 != 0o600 {
        return Err(Error::Permission(format!(
            "{what} has mode {:04o}; it must be exactly 0600",
            st.st_mode & 0o7777
        )));
    }
    if is_file && st.st_size as u64 > MAX_POLICY_BYTES as u64 {
        return Err(Error::Policy(format!(
            "{what} is {} bytes, larger than the {MAX_POLICY_BYTES}-byte limit",
            st.st_size
        )));
    }
    let mut buf = Vec::with_capacity(if is_file { st.st_size as usize } else { 4096 });
    std::fs::File::from(fd)
        .take(MAX_POLICY_BYTES as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::Permission(format!("cannot read {what}: {e}")))?;
    if buf.len() > MAX_POLICY_BYTES {
        return Err(Error::Policy(format!(
            "{what} is larger than the {MAX_POLICY_BYTES}-byte limit"
        )));
    }
    Ok(buf)
}
