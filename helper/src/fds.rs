//! Step 5: close every inherited fd above 2 except the ones the policy keeps
//! (and the report fd), so nothing the caller leaked reaches the command.

use crate::error::{Error, Result};
use crate::sys;

/// Highest fd number close_range accepts as "to the end".
const FD_MAX: u32 = u32::MAX;

/// Open fds above 2, from /proc/self/fd when it is readable. Called before
/// Landlock, which may hide /proc.
pub fn inherited() -> Option<Vec<i32>> {
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
