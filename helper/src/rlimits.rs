//! Step 3: resource limits and the optional uid/gid switch.

use crate::error::{Error, Result};
use crate::policy::{Limit, Resource};
use nix::sys::resource::{setrlimit, Resource as R, RLIM_INFINITY};
use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};

pub fn resource(r: Resource) -> R {
    match r {
        Resource::Nofile => R::RLIMIT_NOFILE,
        Resource::Nproc => R::RLIMIT_NPROC,
        Resource::As => R::RLIMIT_AS,
        Resource::Cpu => R::RLIMIT_CPU,
        Resource::Fsize => R::RLIMIT_FSIZE,
        Resource::Core => R::RLIMIT_CORE,
        Resource::Stack => R::RLIMIT_STACK,
    }
}

fn raw(n: u64) -> u64 {
    if n == u64::MAX {
        RLIM_INFINITY
    } else {
        n
    }
}

pub fn apply(limits: &[Limit]) -> Result<()> {
    for l in limits {
        setrlimit(resource(l.resource), raw(l.soft), raw(l.hard)).map_err(|e| {
            Error::Permission(format!(
                "rlimits.{}: setrlimit(soft {}, hard {}) failed: {e} (raising a hard limit needs CAP_SYS_RESOURCE)",
                l.resource.name(),
                l.soft,
                l.hard
            ))
        })?;
    }
    Ok(())
}

/// Switch to `uid`/`gid` with no supplementary groups. Fails closed: running
/// as the wrong user is not an option.
pub fn switch_user(uid: u32, gid: u32) -> Result<()> {
    let fail = |step: &str, e: nix::Error| {
        Error::Caps(format!(
            "user: {step} to {uid}:{gid} failed: {e} (needs CAP_SETUID and CAP_SETGID)"
        ))
    };
    let (g, u) = (Gid::from_raw(gid), Uid::from_raw(uid));
    // Leaving uid 0 empties the permitted set, and with it the CAP_SETPCAP
    // that step 6 needs to lock securebits and clear the bounding set. Keep
    // the permitted set across the switch and raise CAP_SETPCAP again; step 6
    // then drops everything (and locks KEEP_CAPS off) as it always does.
    let setpcap = caps::has_cap(None, caps::CapSet::Permitted, caps::Capability::CAP_SETPCAP)
        .unwrap_or(false);
    if setpcap {
        caps::securebits::set_keepcaps(true)
            .map_err(|e| Error::Caps(format!("user: PR_SET_KEEPCAPS failed: {e}")))?;
    }
    setgroups(&[]).map_err(|e| fail("clearing supplementary groups", e))?;
    setresgid(g, g, g).map_err(|e| fail("setresgid", e))?;
    setresuid(u, u, u).map_err(|e| fail("setresuid", e))?;
    if setpcap {
        caps::securebits::set_keepcaps(false)
            .map_err(|e| Error::Caps(format!("user: PR_SET_KEEPCAPS failed: {e}")))?;
        caps::raise(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP)
            .map_err(|e| Error::Caps(format!("user: raising CAP_SETPCAP for step 6: {e}")))?;
    }
    Ok(())
}
