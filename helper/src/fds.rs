//! Step 5: close every inherited fd above 2 except the ones the policy keeps
//! (and the report fd), so nothing the caller leaked reaches the command.

use crate::error::{Error, Result};
use crate::sys;

/// Highest fd number close_range accepts as "to the end".
const FD_MAX: u32 = u32::MAX;

/// Open fds above 2. With this thread's status file (`status`): one `poll`
/// over every number below its `FDSize` (the size of the fd table, so no open
/// fd is above it), which answers POLLNVAL for the closed ones. Listing
/// /proc/self/fd costs ≈ 75 µs in a fresh sandbox, whose procfs has no cached
/// entry yet. Otherwise, or when the table is large, that listing; None when
/// neither is possible. Called before Landlock, which may hide /proc.
pub fn inherited(status: Option<&str>) -> Option<Vec<i32>> {
    let size = status.and_then(fd_table_size);
    if let Some(v) = size.and_then(open_below) {
        return Some(v);
    }
    listed()
}

/// `FDSize:` of a status file.
fn fd_table_size(status: &str) -> Option<usize> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The open fds in 3..size, by one poll (None: too many to ask, or poll refused).
fn open_below(size: usize) -> Option<Vec<i32>> {
    const MAX: usize = 4096;
    if size > MAX {
        return None;
    }
    let mut p: Vec<libc::pollfd> = (3..size as i32)
        .map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        })
        .collect();
    sys::poll_now(&mut p).ok()?;
    Some(
        p.iter()
            .filter(|x| x.revents & libc::POLLNVAL == 0)
            .map(|x| x.fd)
            .collect(),
    )
}

/// From /proc/self/fd.
fn listed() -> Option<Vec<i32>> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    let mut fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    // The directory's own fd was listed too and is closed by now.
    fds.retain(|fd| sys::fd_flags(*fd).is_ok());
    Some(fds)
}

/// Close all fds above 2 but `keep`. `before` is [`inherited`]'s list, taken
/// earlier. Returns how many fds were closed, when that could be counted.
pub fn close_inherited(keep: &[i32], before: Option<Vec<i32>>) -> Result<Option<usize>> {
    let mut keep: Vec<u32> = keep.iter().filter(|f| **f > 2).map(|f| *f as u32).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut lo = 3u32;
    let mut ranges = Vec::new();
    for k in &keep {
        if *k > lo {
            ranges.push((lo, k - 1));
        }
        lo = k + 1;
    }
    ranges.push((lo, FD_MAX));
    for (a, b) in &ranges {
        if let Err(e) = sys::close_range(*a, *b) {
            // Kernels before 5.9: close what /proc lists, else every number
            // up to the fd limit.
            if !matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) {
                return Err(Error::Permission(format!("close_range failed: {e}")));
            }
            let max = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .map(|(soft, _)| soft.min(1 << 20) as u32)
                .unwrap_or(1024);
            let candidates: Vec<i32> = match &before {
                Some(l) => l.clone(),
                None => (3..max as i32).collect(),
            };
            for fd in candidates {
                let f = fd as u32;
                if f >= *a && f <= *b {
                    sys::close(fd);
                }
            }
        }
    }
    Ok(before.map(|l| l.iter().filter(|fd| !keep.contains(&(**fd as u32))).count()))
}

#[cfg(test)]
mod inherited_tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn fd_table_size_is_read_from_status() {
        assert_eq!(fd_table_size("Name:\tx\nFDSize:\t64\nPid:\t1\n"), Some(64));
        assert_eq!(fd_table_size("Name:\tx\n"), None);
    }

    /// Both ways of listing see an fd opened high up, and not a closed one.
    #[test]
    fn poll_over_the_table_agrees_with_proc() {
        let f = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: dup2 onto a number this test owns; closed below.
        assert_eq!(unsafe { libc::dup2(f.as_raw_fd(), 200) }, 200);
        let status = sys::open_thread_status().expect("/proc is mounted in tests");
        let text = sys::read_status(&status).unwrap();
        let polled = inherited(Some(&text)).unwrap();
        let proc_ = listed().unwrap();
        // SAFETY: closes the fd dup'ed above.
        unsafe { libc::close(200) };
        assert!(polled.contains(&200) && proc_.contains(&200));
        assert!(polled.contains(&status.as_raw_fd()));
        assert!(!polled.contains(&201) && !proc_.contains(&201));
    }
}
