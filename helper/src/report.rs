//! The `--report-fd` record: what was actually applied, read back where the
//! kernel lets us, never assumed from the policy.

use serde_json::{json, Map, Value};

pub struct Facts {
    pub landlock: Value,
    pub seccomp: Value,
    pub caps: Value,
    pub fds_closed: Option<usize>,
    pub mounts_verified: usize,
    pub rlimits: Value,
    pub env_removed: Vec<String>,
    pub warnings: Vec<String>,
}

pub fn build(f: Facts) -> String {
    let nnp = crate::sys::no_new_privs().unwrap_or(false);
    let mut m = Map::new();
    m.insert("helper".into(), json!(env!("CARGO_PKG_VERSION")));
    m.insert("no_new_privs".into(), json!(nnp));
    m.insert("landlock".into(), f.landlock);
    m.insert("seccomp".into(), f.seccomp);
    m.insert("caps".into(), f.caps);
    m.insert("fds_closed".into(), json!(f.fds_closed));
    m.insert("mounts_verified".into(), json!(f.mounts_verified));
    m.insert("rlimits".into(), f.rlimits);
    m.insert("uid".into(), json!(nix::unistd::getuid().as_raw()));
    m.insert("gid".into(), json!(nix::unistd::getgid().as_raw()));
    m.insert("env_removed".into(), json!(f.env_removed));
    m.insert("warnings".into(), json!(f.warnings));
    let mut s = Value::Object(m).to_string();
    s.push('\n');
    s
}

/// The limits in force, read back with getrlimit.
pub fn rlimits(limits: &[crate::policy::Limit]) -> Value {
    use nix::sys::resource::{getrlimit, RLIM_INFINITY};
    let mut m = Map::new();
    for l in limits {
        let r = crate::rlimits::resource(l.resource);
        let show = |n: u64| {
            if n == RLIM_INFINITY {
                json!("unlimited")
            } else {
                json!(n)
            }
        };
        if let Ok((soft, hard)) = getrlimit(r) {
            m.insert(l.resource.name().into(), json!([show(soft), show(hard)]));
        }
    }
    Value::Object(m)
}
