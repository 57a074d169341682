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

pub fn drop_all() -> Result<Report> {
    let setpcap = caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)
        .map_err(|e| fail("reading CAP_SETPCAP", e))?;
    let mut securebits_locked = false;
    if setpcap {
        // While CAP_SETPCAP is still held: lock securebits, then empty the
        // bounding set (each drop needs CAP_SETPCAP).
        sys::set_securebits(LOCKED_SECUREBITS).map_err(|e| fail("locking securebits", e))?;
        securebits_locked = true;
        let bounding =
            caps::read(None, CapSet::Bounding).map_err(|e| fail("reading bounding", e))?;
        for c in bounding {
            caps::drop(None, CapSet::Bounding, c)
                .map_err(|e| fail(&format!("dropping {c} from the bounding set"), e))?;
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(|e| fail("clearing ambient", e))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| fail("clearing inheritable", e))?;
    caps::clear(None, CapSet::Effective).map_err(|e| fail("clearing effective", e))?;
    caps::clear(None, CapSet::Permitted).map_err(|e| fail("clearing permitted", e))?;

    let [effective, permitted, inheritable, ambient, bounding] = read_sets()?;
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
