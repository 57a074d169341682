//! Step 2 inside bwrap: every mount the launcher planned is where it planned
//! it (`mounts` in the policy; docs/policy.md).
//!
//! bwrap resolves each mount's source and destination by path, following
//! symlinks, while it builds the sandbox. A path through a directory that
//! another process can write (a concurrent run in the same workspace) can be
//! a symlink at that instant: the mount then lands elsewhere — a host
//! directory bound over the sandbox's own tmpfs — and the path looks as
//! planned again by the time anything opens it. The mount table cannot be
//! put back that way: each planned path must be the root of a mount, reached
//! without any symlink, showing the planned file.

use crate::error::{Error, Result};
use crate::policy::MountCheck;
use crate::sys;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

// Not in the libc crate for every target.
const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;

/// Check every planned mount; the number checked.
pub fn verify(checks: &[MountCheck]) -> Result<usize> {
    // Read only on kernels whose statx cannot say "mount root" (before 5.8).
    let mut mount_points: Option<Vec<PathBuf>> = None;
    for (i, m) in checks.iter().enumerate() {
        let fail = |why: String| {
            Error::Landlock(format!(
                "mounts[{i}]: {} is not the mount the launcher planned ({why}): a path on the way changed while the sandbox was built (a concurrent process renaming in a writable directory?); nothing was run",
                m.path.display()
            ))
        };
        let fd = sys::open_no_symlinks(&m.path).map_err(|e| fail(format!("open: {e}")))?;
        let st = sys::statx_fd(&fd).map_err(|e| fail(format!("statx: {e}")))?;
        let root = if st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT != 0 {
            st.stx_attributes & STATX_ATTR_MOUNT_ROOT != 0
        } else {
            let points = match &mount_points {
                Some(p) => p,
                None => mount_points
                    .insert(read_mount_points().map_err(|e| fail(format!("mountinfo: {e}")))?),
            };
            points.iter().any(|p| p == &m.path)
        };
        if !root {
            return Err(fail("no mount there".into()));
        }
        if m.ro && !sys::on_read_only_mount(&fd).map_err(|e| fail(format!("fstatfs: {e}")))? {
            return Err(fail("it is writable, planned read-only".into()));
        }
        if let Some((dev, ino)) = m.identity {
            let got = (
                libc::makedev(st.stx_dev_major, st.stx_dev_minor),
                st.stx_ino,
            );
            if got != (dev, ino) {
                return Err(fail(format!(
                    "it shows [{}, {}], planned [{dev}, {ino}]",
                    got.0, got.1
                )));
            }
        }
    }
    Ok(checks.len())
}

/// The mount points of this mount namespace (field 5 of mountinfo, with
/// its octal escapes undone).
fn read_mount_points() -> std::io::Result<Vec<PathBuf>> {
    let text = std::fs::read("/proc/self/mountinfo")?;
    Ok(text
        .split(|&b| b == b'\n')
        .filter_map(|l| l.split(|&b| b == b' ').nth(4))
        .map(|f| PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(f))))
        .collect())
}

fn unescape(f: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(f.len());
    let mut i = 0;
    while i < f.len() {
        let oct = f
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (f[i], oct) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(br"/a\040b\134c"), b"/a b\\c");
        assert_eq!(unescape(br"/x\04"), br"/x\04");
    }

    /// Against this host's own mount table: `/proc` is a mount root, a
    /// directory below it is not, a path through a symlink is refused, and a
    /// wrong identity is named.
    #[test]
    fn checks_against_the_real_mount_table() {
        let ok = |p: &str, id: Option<(u64, u64)>| {
            verify(&[MountCheck {
                path: p.into(),
                identity: id,
                ro: false,
            }])
        };
        assert_eq!(ok("/proc", None).unwrap(), 1);
        // `/proc` is mounted read-write here: planned read-only, refused.
        let e = verify(&[MountCheck {
            path: "/proc".into(),
            identity: None,
            ro: true,
        }])
        .unwrap_err()
        .to_string();
        assert!(e.contains("writable, planned read-only"), "{e}");
        let e = ok("/proc/self/fd", None).unwrap_err().to_string();
        assert!(e.contains("not the mount the launcher planned"), "{e}");
        let link = std::env::temp_dir().join(format!("cordon-mounts-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/", &link).unwrap();
        // Through a symlink (`LINK/proc` is `/proc`): refused on the way.
        let through = ok(&format!("{}/proc", link.display()), None);
        // A symlink as the last component is no mount root.
        let last = ok(link.to_str().unwrap(), None);
        // The walk used before openat2 (5.6) agrees.
        let walk = |p: &str| {
            sys::open_walk_no_symlinks(Path::new(p)).map(|fd| sys::statx_fd(&fd).unwrap().stx_ino)
        };
        let walked = (
            walk("/proc"),
            walk(&format!("{}/proc", link.display())),
            walk(link.to_str().unwrap()),
        );
        std::fs::remove_file(&link).unwrap();
        let e = through.unwrap_err().to_string();
        assert!(e.contains("open:"), "{e}");
        assert!(last.unwrap_err().to_string().contains("no mount there"));
        assert_eq!(walked.0.unwrap(), std::fs::metadata("/proc").unwrap().ino());
        assert_eq!(walked.1.unwrap_err().raw_os_error(), Some(libc::ELOOP));
        assert!(
            walked.2.is_ok(),
            "a symlink as the last component is opened itself"
        );
        let e = ok("/proc", Some((1, 1))).unwrap_err().to_string();
        assert!(e.contains("planned [1, 1]"), "{e}");
        // Without statx's answer, the mount table says the same.
        let points = read_mount_points().unwrap();
        assert!(points.iter().any(|p| p == Path::new("/proc")));
    }
}
