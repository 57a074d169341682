//! Step 6: drop every capability, lock root out of regaining them, and read
//! everything back.

use crate::error::{Error, Result};
use crate::sys;
use caps::{CapSet, Capability, CapsHashSet};
use serde_json::{json, Value};

// securebits (linux/securebits.h): root gets no capabilities through exec or
// setuid, KEEP_CAPS stays off, no ambient raise — each with its lock bit.
const SECBIT_NOROOT: u32 = 1 << 0;
const SECBIT_NOROOT_LOCKED: u32 = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: u32 = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: u32 = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: u32 = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: u32 = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: u32 = 1 << 7;
pub const LOCKED_SECUREBITS: u32 = SECBIT_NOROOT
    | SECBIT_NOROOT_LOCKED
    | SECBIT_NO_SETUID_FIXUP
    | SECBIT_NO_SETUID_FIXUP_LOCKED
    | SECBIT_KEEP_CAPS_LOCKED
    | SECBIT_NO_CAP_AMBIENT_RAISE
    | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

#[derive(Debug, Clone)]
pub struct Report {
    pub effective: Vec<String>,
    pub permitted: Vec<String>,
    pub inheritable: Vec<String>,
    pub ambient: Vec<String>,
    pub bounding: Vec<String>,
    pub bounding_cleared: bool,
    pub securebits_locked: bool,
}

fn sorted(s: CapsHashSet) -> Vec<String> {
    let mut v: Vec<String> = s.into_iter().map(|c| c.to_string()).collect();
    v.sort();
    v
}

fn fail(step: &str, e: impl std::fmt::Display) -> Error {
    Error::Caps(format!("capabilities: {step}: {e}"))
}

/// Read the five sets of the calling thread.
pub fn read_sets() -> Result<[Vec<String>; 5]> {
    read_sets_with(sys::open_thread_status().as_ref())
}

/// As [`read_sets`], with the thread's status file already open (see
/// `sys::open_thread_status`), or None to ask the kernel set by set.
fn read_sets_with(status: Option<&std::os::fd::OwnedFd>) -> Result<[Vec<String>; 5]> {
    // One read of the status file has all five sets as masks, including bits
    // newer than the caps crate. The crate would take three capget calls and
    // ≈ 120 prctl calls (the bounding and ambient sets one capability at a
    // time, ≈ 50 µs), each set collected into a hash set.
    if let Some(m) = status
        .and_then(sys::read_status)
        .and_then(|s| status_masks(&s))
    {
        return Ok([
            names(m.eff),
            names(m.prm),
            names(m.inh),
            names(m.amb),
            names(m.bnd),
        ]);
    }
    let r = |s| {
        caps::read(None, s)
            .map(sorted)
            .map_err(|e| fail("reading", e))
    };
    Ok([
        r(CapSet::Effective)?,
        r(CapSet::Permitted)?,
        r(CapSet::Inheritable)?,
        r(CapSet::Ambient)?,
        r(CapSet::Bounding)?,
    ])
}

/// The five capability masks of a status file.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Masks {
    inh: u64,
    prm: u64,
    eff: u64,
    bnd: u64,
    amb: u64,
}

/// The `Cap*` lines of a status file, in one pass from the first of them;
/// None unless all five are there and well-formed.
fn status_masks(status: &str) -> Option<Masks> {
    // At a line start: the first line, `Name:`, holds the command's name.
    let start = status.find("\nCapInh:")? + 1;
    let mut m = Masks::default();
    let mut seen = 0u8;
    for line in status[start..].lines() {
        let Some((key, value)) = line.split_once(':') else {
            break;
        };
        let (slot, bit) = match key {
            "CapInh" => (&mut m.inh, 1),
            "CapPrm" => (&mut m.prm, 2),
            "CapEff" => (&mut m.eff, 4),
            "CapBnd" => (&mut m.bnd, 8),
            "CapAmb" => (&mut m.amb, 16),
            _ => break,
        };
        *slot = u64::from_str_radix(value.trim(), 16).ok()?;
        seen |= bit;
    }
    (seen == 31).then_some(m)
}

/// The capability names of a mask, sorted; a bit the caps crate does not know
/// is still reported, as `cap_<bit>`.
fn names(mask: u64) -> Vec<String> {
    if mask == 0 {
        // The usual case after the drop: no table of names needed.
        return Vec::new();
    }
    let known = caps::all();
    let mut v: Vec<String> = (0..64u8)
        .filter(|b| mask & (1u64 << b) != 0)
        .map(|b| {
            known
                .iter()
                .find(|c| c.index() == b)
                .map(|c| c.to_string())
                .unwrap_or_else(|| format!("cap_{b}"))
        })
        .collect();
    v.sort();
    v
}

/// `status`: this thread's status file, opened before Landlock (which may hide
/// /proc by now), read back after the drop; None makes the crate ask
/// capability by capability. `before`: its text as read earlier in this run,
/// for the bounding set to drop: that set only ever shrinks, and nothing
/// between the two reads (rlimits, the uid switch, Landlock) touches it, so
/// the status file need not be generated once more for it.
pub fn drop_all(status: Option<&std::os::fd::OwnedFd>, before: Option<&str>) -> Result<Report> {
    let setpcap = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)
        .map_err(|e| fail("reading CAP_SETPCAP", e))?;
    let mut securebits_locked = false;
    if setpcap {
        // While CAP_SETPCAP is still held: lock securebits, then empty the
        // bounding set (each drop needs CAP_SETPCAP).
        sys::set_securebits(LOCKED_SECUREBITS).map_err(|e| fail("locking securebits", e))?;
        securebits_locked = true;
        let fresh;
        let text = match before {
            Some(t) => Some(t),
            None => {
                fresh = status.and_then(sys::read_status);
                fresh.as_deref()
            }
        };
        match text.and_then(status_masks) {
            // Drop exactly the bits the kernel shows, known to the crate or not.
            Some(Masks { bnd, .. }) => {
                for b in (0..64u8).filter(|b| bnd & (1u64 << b) != 0) {
                    sys::capbset_drop(b)
                        .map_err(|e| fail(&format!("dropping cap {b} from the bounding set"), e))?;
                }
            }
            None => {
                let bounding =
                    caps::read(None, CapSet::Bounding).map_err(|e| fail("reading bounding", e))?;
                for c in bounding {
                    caps::drop(None, CapSet::Bounding, c)
                        .map_err(|e| fail(&format!("dropping {c} from the bounding set"), e))?;
                }
            }
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| fail("clearing ambient", e))?;
    // Effective, permitted and inheritable in one capset (the crate makes a
    // capget and a capset per set); read back and verified below.
    sys::capset_empty().map_err(|e| fail("clearing effective/permitted/inheritable", e))?;

    let [effective, permitted, inheritable, ambient, bounding] = read_sets_with(status)?;
    for (name, set) in [
        ("effective", &effective),
        ("permitted", &permitted),
        ("inheritable", &inheritable),
        ("ambient", &ambient),
    ] {
        if !set.is_empty() {
            return Err(fail(
                "verification",
                format!("{name} set still holds {}", set.join(",")),
            ));
        }
    }
    if setpcap && !bounding.is_empty() {
        return Err(fail(
            "verification",
            format!("bounding set still holds {}", bounding.join(",")),
        ));
    }
    if securebits_locked {
        let bits = sys::securebits().map_err(|e| fail("reading securebits", e))?;
        if bits & LOCKED_SECUREBITS != LOCKED_SECUREBITS {
            return Err(fail(
                "verification",
                format!("securebits are {bits:#x}, expected {LOCKED_SECUREBITS:#x} set"),
            ));
        }
    }
    Ok(Report {
        bounding_cleared: bounding.is_empty(),
        effective,
        permitted,
        inheritable,
        ambient,
        bounding,
        securebits_locked,
    })
}

impl Report {
    pub fn to_json(&self) -> Value {
        json!({
            "effective": self.effective,
            "permitted": self.permitted,
            "inheritable": self.inheritable,
            "ambient": self.ambient,
            "bounding": self.bounding,
            "bounding_cleared": self.bounding_cleared,
            "securebits_locked": self.securebits_locked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_masks_and_names() {
        let st = "Name:\tx\nUmask:\t0022\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000001\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000021\nNoNewPrivs:\t1\n";
        let m = status_masks(st).unwrap();
        assert_eq!((m.inh, m.prm, m.eff), (0, 1, 0));
        assert_eq!(names(m.amb), vec!["CAP_CHOWN", "CAP_KILL"]);
        assert_eq!(names(m.bnd).len(), 41);
        assert_eq!(names(1 << 63), vec!["cap_63"]);
        assert!(names(0).is_empty());
        // All five or nothing; a damaged value is no mask.
        assert!(status_masks("CapBnd:\t0\n").is_none());
        assert!(status_masks(&st.replace("CapAmb", "CapXyz")).is_none());
        assert!(status_masks(&st.replace("0000000000000021", "00zz")).is_none());
        // A process named like a field is not read as one.
        let named = st.replace("Name:\tx", "Name:\tCapInh:\tffff");
        assert_eq!(status_masks(&named), Some(m));
    }

    /// One short read is the whole status file: its last line is there.
    #[test]
    fn status_is_read_whole() {
        let f = sys::open_thread_status().expect("/proc is mounted in tests");
        let st = sys::read_status(&f).unwrap();
        assert!(st.ends_with('\n'), "{st}");
        let last = st.lines().last().unwrap();
        assert!(last.starts_with("nonvoluntary_ctxt_switches:"), "{last}");
        // Read again from the start: the same fd serves every step.
        assert!(sys::read_status(&f).unwrap().contains("CapBnd:"));
    }

    /// The status file and the caps crate agree on this thread's sets.
    #[test]
    fn status_file_agrees_with_the_crate() {
        let f = sys::open_thread_status().expect("/proc is mounted in tests");
        let st = sys::read_status(&f).unwrap();
        let m = status_masks(&st).unwrap();
        for (mask, set) in [
            (m.eff, CapSet::Effective),
            (m.prm, CapSet::Permitted),
            (m.inh, CapSet::Inheritable),
            (m.amb, CapSet::Ambient),
        ] {
            assert_eq!(names(mask), sorted(caps::read(None, set).unwrap()));
        }
        let crate_bnd = sorted(caps::read(None, CapSet::Bounding).unwrap());
        let ours = names(m.bnd);
        // The crate only lists the capabilities it knows.
        assert!(crate_bnd.iter().all(|c| ours.contains(c)));
        assert!(ours
            .iter()
            .all(|c| crate_bnd.contains(c) || c.starts_with("cap_")));
    }
}
