//! `--check`, `--explain` and `--probe`: read-only views of the policy, the
//! plan and the kernel. Nothing here restricts the process.

use crate::error::Result;
use crate::policy_source::Source;
use crate::{caps, env, landlock, policy, policy_source, seccomp, sys};
use serde_json::{json, Value};

pub fn check(src: &Source) -> Result<Value> {
    let pol = policy::parse(&policy_source::read(src)?)?;
    // Everything a run would refuse before applying anything, refused here
    // too (on this machine's paths): a missing path, an allow beneath a
    // deny, a syscall that cannot be denied. Nothing is applied.
    landlock::plan(&pol, landlock::Mode::Check)?;
    seccomp::compile(&pol.syscalls, None)?;
    Ok(pol.to_json())
}

pub fn explain(src: &Source, report_fd: Option<i32>) -> Result<Value> {
    let pol = policy::parse(&policy_source::read(src)?)?;
    let ll = landlock::plan(&pol, landlock::Mode::Explain)?;
    let filter = seccomp::compile(&pol.syscalls, report_fd)?;
    let envp = env::prepare(&pol.env, std::env::vars_os().collect());
    let [e, p, i, a, b] = caps::read_sets()?;
    Ok(json!({
        "order": ["no_new_privs", "read_policy", "compile", "rlimits", "user", "landlock",
                  "close_fds", "drop_caps", "seccomp", "report", "exec"],
        "landlock": ll.explain(),
        "seccomp": {
            "profile": match pol.syscalls.effective_profile() { Some(_) => "default", None => "none" },
            "default_action": filter.spec.default.name(),
            "rules": filter.rule_count(),
            "syscalls_listed": filter.spec.entries.len(),
            "instructions": filter.program.len(),
            "worst_case_instructions": seccomp::emit::worst_case_path(&filter.program),
            "foreign_arch": "kill_process",
            "x32": if cfg!(target_arch = "x86_64") { "kill_process" } else { "n/a" },
            "entries": filter.spec.entries.iter().map(|(nr, e)| json!({
                "nr": nr,
                "name": seccomp::tables::native_name(*nr),
                "action": e.base.name(),
                "rules": e.rules.len(),
            })).collect::<Vec<_>>(),
        },
        "caps_to_drop": {"effective": e, "permitted": p, "inheritable": i, "ambient": a, "bounding": b},
        "fds": {"close": "all above 2", "keep": pol.keep_fds, "report_fd": report_fd},
        "rlimits": pol.to_json()["rlimits"],
        "user": pol.to_json().get("user").cloned(),
        "env": {"removed": envp.removed, "set": pol.env.set.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "clear": pol.env.clear},
    }))
}

pub fn probe() -> Value {
    let actions = [
        ("kill_process", 0x8000_0000u32),
        ("kill_thread", 0),
        ("trap", 0x0003_0000),
        ("errno", 0x0005_0000),
        ("user_notif", 0x7fc0_0000),
        ("trace", 0x7ff0_0000),
        ("log", 0x7ffc_0000),
        ("allow", 0x7fff_0000),
    ];
    let available: Vec<&str> = actions
        .iter()
        .filter(|(_, a)| sys::seccomp_action_available(*a))
        .map(|(n, _)| *n)
        .collect();
    let sets = caps::read_sets().ok();
    let max_userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    json!({
        "helper": env!("CARGO_PKG_VERSION"),
        "arch": std::env::consts::ARCH,
        "landlock_abi": sys::landlock_abi(),
        "landlock_target_abi": landlock::TARGET_ABI_NUM,
        "seccomp": {
            "mode": sys::seccomp_mode().ok(),
            "filter_available": available.contains(&"allow"),
            "actions": available,
        },
        "user_namespaces": {"max_user_namespaces": max_userns},
        "in_user_namespace": sys::in_user_namespace(),
        "no_new_privs": sys::no_new_privs().ok(),
        "securebits": sys::securebits().ok(),
        "uid": nix::unistd::getuid().as_raw(),
        "euid": nix::unistd::geteuid().as_raw(),
        "caps": sets.map(|[e, p, i, a, b]| json!({
            "effective": e, "permitted": p, "inheritable": i, "ambient": a, "bounding": b
        })),
    })
}
