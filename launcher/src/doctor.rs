//! `cordon doctor`: one line per check, PASS/FAIL/WARN, each failure with its fix.

use crate::helper_bin;
use crate::plan::ProcStrategy;
use crate::{probe, sys};
use serde_json::{json, Value};

struct Check {
    name: &'static str,
    ok: Option<bool>, // None = warning
    detail: String,
    fix: String,
}

/// What the helper itself sees (`cordon-helper --probe`), run through the fd
/// that was verified, so the bytes probed are the bytes checked.
fn helper_probe(h: &helper_bin::Helper) -> Check {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}", h.file.as_raw_fd());
    let out = std::process::Command::new(&path).arg("--probe").output();
    let v: Option<Value> = out
        .as_ref()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice(&o.stdout).ok());
    match v {
        Some(v) => {
            let abi = v["landlock_abi"].as_i64().unwrap_or(0);
            let filter = v["seccomp"]["filter_available"].as_bool().unwrap_or(false);
            Check {
                name: "helper probe",
                ok: Some(abi >= 1 && filter),
                detail: format!(
                    "Landlock ABI {abi} (helper targets {}), seccomp filter {}, actions {}, in a user namespace: {}",
                    v["landlock_target_abi"],
                    if filter { "available" } else { "unavailable" },
                    v["seccomp"]["actions"],
                    v["in_user_namespace"]
                ),
                fix: "the inner layer needs Landlock (boot with lsm=...,landlock) and seccomp filters (CONFIG_SECCOMP_FILTER)".into(),
            }
        }
        None => Check {
            name: "helper probe",
            ok: Some(false),
            detail: match out {
                Ok(o) => format!(
                    "cordon-helper --probe failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                Err(e) => format!("cannot run cordon-helper --probe: {e}"),
            },
            fix: "reinstall the helper (scripts/install)".into(),
        },
    }
}

fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attr, size 0 and the VERSION flag the kernel only
    // returns the ABI number (or -1); no memory is read or written.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    }
}

/// The supplementary groups a sandbox started by this user keeps: a non-root
/// caller's stay in force inside (no unprivileged process can drop them), so
/// whatever they can read under the shown mounts is readable there.
fn groups_check() -> Check {
    use nix::unistd::{getegid, geteuid, getgroups};
    let name = "supplementary groups";
    if geteuid().is_root() {
        return Check {
            name,
            ok: Some(true),
            detail: "cleared: as root, cordon runs the sandbox as another uid with no groups"
                .into(),
            fix: String::new(),
        };
    }
    let primary = getegid().as_raw();
    let extra: Vec<u32> = match getgroups() {
        Ok(g) => g
            .iter()
            .map(|g| g.as_raw())
            .filter(|&g| g != primary)
            .collect(),
        Err(e) => {
            return Check {
                name,
                ok: None,
                detail: format!("cannot be read ({e}); the shadow backups are masked to be safe"),
                fix: "none needed".into(),
            }
        }
    };
    if extra.is_empty() {
        return Check {
            name,
            ok: Some(true),
            detail: "none besides the primary group".into(),
            fix: String::new(),
        };
    }
    let names = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let label = |gid: u32| {
        names
            .lines()
            .find_map(|l| {
                let mut f = l.split(':');
                let n = f.next()?;
                (f.nth(1)? == gid.to_string()).then(|| format!("{n} ({gid})"))
            })
            .unwrap_or_else(|| gid.to_string())
    };
    Check {
        name,
        ok: None,
        detail: format!(
            "{} stay in force inside the sandbox: files these groups can read are readable by the command (the built-in profiles mask the shadow backups and /etc/ssl/private for this)",
            extra.iter().map(|&g| label(g)).collect::<Vec<_>>().join(", ")
        ),
        fix: "run cordon as a user without these groups, or as root (it clears them); --hide what they expose".into(),
    }
}

fn status_field(name: &str) -> Option<String> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
}

pub fn main(args: &[String]) -> i32 {
    let json_out = args.iter().any(|a| a == "--json");
    if let Some(a) = args.iter().find(|a| *a != "--json") {
        let e = crate::error::Error::Usage(format!(
            "doctor: unknown argument {a:?} (cordon doctor [--json])"
        ));
        eprintln!("cordon: error: {e}");
        return e.exit_code();
    }
    // Variables that are not UTF-8 are left out (as `run` does), not a panic.
    let env: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let mut checks: Vec<Check> = Vec::new();
    checks.push(Check {
        name: "kernel",
        ok: Some(true),
        detail: sys::uname_release(),
        fix: String::new(),
    });
    let abi = landlock_abi();
    checks.push(Check {
        name: "landlock",
        ok: Some(abi >= 1),
        detail: if abi >= 1 { format!("ABI {abi}") } else { format!("unavailable ({})", std::io::Error::last_os_error()) },
        fix: "boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK=y), or run with --allow-degraded inner".into(),
    });
    let sec = status_field("Seccomp:");
    checks.push(Check {
        name: "seccomp",
        ok: Some(sec.is_some()),
        detail: sec
            .map(|s| format!("supported (current mode {s})"))
            .unwrap_or_else(|| "not in /proc/self/status".into()),
        fix: "a kernel with CONFIG_SECCOMP_FILTER".into(),
    });
    let userns = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    let n: u64 = userns.trim().parse().unwrap_or(0);
    checks.push(Check {
        name: "user namespaces",
        ok: Some(n > 0),
        detail: format!("user.max_user_namespaces = {}", userns.trim()),
        fix: "sysctl -w user.max_user_namespaces=15000 (and kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu)".into(),
    });
    checks.push(groups_check());
    let bwrap = probe::find_bwrap(
        env.get("CORDON_BWRAP").map(String::as_str),
        env.get("PATH").map(String::as_str),
    );
    match &bwrap {
        Ok(b) => {
            let ver = std::process::Command::new(b)
                .arg("--version")
                .env_clear()
                .output();
            let help = std::process::Command::new(b)
                .arg("--help")
                .env_clear()
                .output();
            let ver = ver
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            let help = help
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let needed = [
                "--disable-userns",
                "--ro-bind-fd",
                "--info-fd",
                "--cap-drop",
                "--die-with-parent",
                "--ro-bind-data",
                "--new-session",
            ];
            let missing: Vec<&str> = needed
                .iter()
                .copied()
                .filter(|f| !help.contains(f))
                .collect();
            checks.push(Check {
                name: "bwrap",
                ok: Some(missing.is_empty()),
                detail: format!(
                    "{} ({ver}); missing flags: {}",
                    b.display(),
                    if missing.is_empty() {
                        "none".into()
                    } else {
                        missing.join(" ")
                    }
                ),
                fix: "install bubblewrap >= 0.8.0".into(),
            });
        }
        // The error already names its fix.
        Err(e) => checks.push(Check {
            name: "bwrap",
            ok: Some(false),
            detail: e.to_string(),
            fix: String::new(),
        }),
    }
    let exe = std::env::current_exe().ok();
    let helper = helper_bin::discover(
        env.get("CORDON_HELPER").map(String::as_str),
        exe.as_deref(),
        env.get("PATH").map(String::as_str),
    )
    .and_then(|p| helper_bin::verify(&p, env.get("CORDON_HELPER_SHA256").map(String::as_str)));
    match &helper {
        Ok(h) => checks.push(Check {
            name: "helper",
            ok: Some(true),
            detail: format!("{} sha256 {} (expected hash from {:?}, verified: {:?}); static", h.path.display(), h.sha256, h.hash_source, h.verified),
            fix: String::new(),
        }),
        Err(e) => checks.push(Check {
            name: "helper",
            ok: Some(false),
            detail: e.to_string(),
            fix: "build the static helper and set CORDON_HELPER / CORDON_HELPER_SHA256 (docs/launcher.md)".into(),
        }),
    }
    if let Ok(h) = &helper {
        checks.push(helper_probe(h));
    }
    if let (Ok(b), Ok(h)) = (&bwrap, &helper) {
        let euid = sys::geteuid();
        let (uid, switch) = if euid == 0 {
            (
                crate::plan::NOBODY,
                Some((crate::plan::NOBODY, crate::plan::NOBODY)),
            )
        } else {
            (euid, None)
        };
        let r = probe::preflight(&probe::ProbeInput {
            bwrap: b,
            helper: h,
            uid,
            gid: if euid == 0 {
                crate::plan::NOBODY
            } else {
                sys::getegid()
            },
            switch,
            allow_degraded_outer: true,
            cache_dir: None,
            known: None,
        });
        match r {
            Ok(o) => checks.push(Check {
                name: "/proc strategy",
                // A read-only bind of the host /proc passed the isolation probe.
                ok: if o.proc == ProcStrategy::Tmpfs { None } else { Some(true) },
                detail: format!("{:?} (no-op sandbox as uid {uid})", o.proc),
                fix: "fresh /proc refused: run where procfs can be mounted; tmpfs /proc needs --allow-degraded outer".into(),
            }),
            Err(e) => checks.push(Check { name: "sandbox preflight", ok: Some(false), detail: e.to_string(), fix: "see the message".into() }),
        }
    }
    let failed = checks.iter().any(|c| c.ok == Some(false));
    if json_out {
        let v: Vec<Value> = checks
            .iter()
            .map(|c| json!({"check": c.name, "status": match c.ok { Some(true) => "pass", Some(false) => "fail", None => "warn" }, "detail": c.detail, "fix": c.fix}))
            .collect();
        crate::outln!("{}", json!({"ok": !failed, "checks": v}));
    } else {
        for c in &checks {
            let st = match c.ok {
                Some(true) => "PASS",
                Some(false) => "FAIL",
                None => "WARN",
            };
            if c.ok == Some(true) {
                crate::outln!("{st} {}: {}", c.name, c.detail);
            } else {
                if c.fix.is_empty() {
                    crate::outln!("{st} {}: {}", c.name, c.detail);
                } else {
                    crate::outln!("{st} {}: {} — fix: {}", c.name, c.detail, c.fix);
                }
            }
        }
    }
    if failed {
        crate::error::exit::SETUP
    } else {
        0
    }
}
