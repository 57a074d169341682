//! Capabilities, NO_NEW_PRIVS, seccomp status, inherited fds and the
//! environment, as seen from inside the sandbox.

use std::os::fd::AsRawFd;

use cordon_tests::*;

/// Parse the probe's `caps` line into (key, value) pairs.
fn fields(line: &str) -> std::collections::HashMap<String, String> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const ZERO: &str = "0000000000000000";

#[test]
fn caps_status_shows_nnp_seccomp_filter_and_empty_sets() {
    let fx = Fixture::new();
    let p = fx.policy(&fx.base_policy_proc_dev());
    let r = Spawn::sandboxed(&p, &["caps"]).run();
    assert!(
        r.code == Some(0) || r.code == Some(1),
        "caps probe failed:\n{r}"
    );
    let f = fields(r.line());
    assert_eq!(f.get("NoNewPrivs").map(String::as_str), Some("1"), "{r}");
    assert_eq!(f.get("Seccomp").map(String::as_str), Some("2"), "{r}");
    for key in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(
            f.get(key).map(String::as_str),
            Some(ZERO),
            "{key} not empty:\n{r}"
        );
    }
    if is_root() {
        // With CAP_SETPCAP the bounding set is cleared too: all five empty.
        assert_eq!(
            f.get("CapBnd").map(String::as_str),
            Some(ZERO),
            "bounding set not cleared:\n{r}"
        );
        r.assert_denied("-");
    } else {
        // Unprivileged outside a user namespace the bounding set cannot be
        // dropped; it must be what we had (NO_NEW_PRIVS keeps it inert).
        let ours = self_status_field("CapBnd");
        assert_eq!(f.get("CapBnd"), Some(&ours), "{r}");
    }

    // Control: directly, the probe sees our own state (no filter, no NNP).
    let direct = Spawn::probe(&["caps"]).run();
    let d = fields(direct.line());
    assert_eq!(
        d.get("Seccomp").map(String::as_str),
        Some(self_status_field("Seccomp").as_str()),
        "{direct}"
    );
    assert_eq!(
        d.get("CapEff"),
        Some(&self_status_field("CapEff")),
        "{direct}"
    );
    if is_root() {
        assert_ne!(
            d.get("CapEff").map(String::as_str),
            Some(ZERO),
            "root without caps?\n{direct}"
        );
    }
}

#[test]
fn caps_report_matches_uid() {
    let fx = Fixture::new();
    let p = fx.policy(&fx.base_policy());
    let mut report = report_file(&fx);
    let r = Spawn::sandboxed_opts(&p, &["--report-fd", "7"], &["env", "HOME"])
        .inherit_fd(report.as_raw_fd(), 7)
        .run();
    r.assert_no_crash();
    let v = read_report(&mut report);
    assert_eq!(v["caps"]["bounding_cleared"], json!(is_root()), "{v}");
    for set in ["effective", "permitted", "inheritable", "ambient"] {
        assert_eq!(v["caps"][set], json!([]), "{set} in {v}");
    }
    if is_root() {
        assert_eq!(v["caps"]["bounding"], json!([]), "{v}");
    }
}

/// As root, a policy `user` switch to this uid gives an unprivileged run.
const NOBODY: u32 = 65534;

#[test]
fn setuid_root_is_refused_inside() {
    let fx = Fixture::new();
    if is_root() {
        // Root inside stays root unless the policy switches user: switch to
        // nobody and try to get back.
        let mut pol = fx.base_policy();
        pol["user"] = json!({"uid": NOBODY, "gid": NOBODY});
        let p = fx.policy(&pol);
        Spawn::sandboxed(&p, &["setuid0"])
            .run()
            .assert_denied("EPERM");
        // Control: without the switch, root is root (setresuid(0,0,0) is a
        // no-op that needs no privilege).
        let c = fx.policy(&fx.base_policy());
        Spawn::sandboxed(&c, &["setuid0"]).run().assert_allowed();
    } else {
        let p = fx.policy(&fx.base_policy());
        Spawn::sandboxed(&p, &["setuid0"])
            .run()
            .assert_denied("EPERM");
    }
}

#[test]
fn user_switch_without_privilege_exits_73() {
    // docs/policy.md `user` and docs/helper.md: without CAP_SETUID/CAP_SETGID
    // the helper exits 73 (credentials) rather than run as the wrong user.
    if is_root() {
        return; // root holds CAP_SETUID: the switch succeeds (tested below).
    }
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["user"] = json!({"uid": NOBODY, "gid": NOBODY});
    Spawn::sandboxed(&fx.policy(&pol), &["setuid0"])
        .run()
        .assert_helper_error(exit::CAPS);
}

#[test]
fn user_switch_is_reported_and_effective() {
    let fx = Fixture::new();
    if !is_root() {
        // Unprivileged: see user_switch_without_privilege_exits_73.
        return;
    }
    let mut pol = fx.base_policy();
    pol["user"] = json!({"uid": NOBODY, "gid": NOBODY});
    let mut report = report_file(&fx);
    Spawn::sandboxed_opts(&fx.policy(&pol), &["--report-fd", "7"], &["env", "PATH"])
        .inherit_fd(report.as_raw_fd(), 7)
        .run()
        .assert_allowed();
    let v = read_report(&mut report);
    assert_eq!(v["uid"], json!(NOBODY), "{v}");
    assert_eq!(v["gid"], json!(NOBODY), "{v}");
    // Leaving uid 0 must not cost step 6 its CAP_SETPCAP: the bounding set
    // is still emptied and securebits locked.
    assert_eq!(v["caps"]["bounding"], json!([]), "{v}");
    assert_eq!(v["caps"]["securebits_locked"], json!(true), "{v}");
}

#[test]
fn inherited_fd_5_is_closed() {
    let fx = Fixture::new();
    let secret = open_ro(&fx.secret);
    let fd = secret.as_raw_fd();
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["read-fd", "5", &fx.secret_marker])
        .inherit_fd(fd, 5)
        .run()
        .assert_denied("EBADF");
    Spawn::sandboxed(&p, &["fds"])
        .inherit_fd(fd, 5)
        .run()
        .assert_denied("-");

    // Control: with keepFds [5] the fd survives, and it really leaks the
    // secret that Landlock denies by path.
    let mut keep = fx.base_policy();
    keep["keepFds"] = json!([5]);
    let k = fx.policy(&keep);
    Spawn::sandboxed(&k, &["read-fd", "5", &fx.secret_marker])
        .inherit_fd(fd, 5)
        .run()
        .assert_allowed();
    let listed = Spawn::sandboxed(&k, &["fds"]).inherit_fd(fd, 5).run();
    listed.assert_allowed();
    assert!(listed.line().contains(" 5="), "fd 5 not listed:\n{listed}");
    Spawn::sandboxed(
        &k,
        &["read", fx.secret.to_str().unwrap(), &fx.secret_marker],
    )
    .inherit_fd(fd, 5)
    .run()
    .assert_denied("EACCES");
}

#[test]
fn many_inherited_fds_are_all_closed() {
    let fx = Fixture::new();
    let secret = open_ro(&fx.secret);
    let fd = secret.as_raw_fd();
    let p = fx.policy(&fx.base_policy());
    let mut spawn = Spawn::sandboxed(&p, &["fds"]);
    for target in [3, 4, 9, 100, 1000] {
        spawn = spawn.inherit_fd(fd, target);
    }
    spawn.run().assert_denied("-");
    // Control: directly, they are all there.
    let mut direct = Spawn::probe(&["fds"]);
    for target in [3, 4, 9, 100, 1000] {
        direct = direct.inherit_fd(fd, target);
    }
    let d = direct.run();
    d.assert_allowed();
    for target in [3, 4, 9, 100, 1000] {
        assert!(
            d.line().contains(&format!(" {target}=")),
            "fd {target} missing in control:\n{d}"
        );
    }
}

#[test]
fn loader_injection_variables_are_removed() {
    let fx = Fixture::new();
    let p = fx.policy(&fx.base_policy());
    for var in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "BASH_ENV",
        "PYTHONPATH",
        "NODE_OPTIONS",
        // Any loader variable, not only the listed ones; and names the
        // launcher refused before the two layers shared one list.
        "LD_BIND_NOW",
        "MALLOC_CONF",
        "GLIBC_TUNABLES",
        // A red-team round's finds: GIT_CONFIG_COUNT turns on
        // GIT_CONFIG_KEY_n/VALUE_n (core.fsmonitor, core.pager…), the
        // others load code or configuration at start.
        "GIT_CONFIG_COUNT",
        "GIT_TEMPLATE_DIR",
        "LUA_INIT",
        "OPENSSL_CONF",
        "PHPRC",
    ] {
        Spawn::sandboxed(&p, &["env", var])
            .env(var, "/nonexistent/evil")
            .run()
            .assert_denied("-");
    }
    // Case-insensitive match.
    Spawn::sandboxed(&p, &["env", "ld_preload"])
        .env("ld_preload", "/x")
        .run()
        .assert_denied("-");
    // Control: an ordinary variable passes; allowInjection lets one through.
    Spawn::sandboxed(&p, &["env", "CORDON_TEST_VAR"])
        .env("CORDON_TEST_VAR", "1")
        .run()
        .assert_allowed();
    let mut allow = fx.base_policy();
    allow["env"] = json!({"allowInjection": ["LD_PRELOAD"]});
    let a = fx.policy(&allow);
    Spawn::sandboxed(&a, &["env", "LD_PRELOAD"])
        .env("LD_PRELOAD", "/nonexistent/evil")
        .run()
        .assert_allowed();
}

#[test]
fn env_clear_and_set() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["env"] = json!({"clear": true, "set": {"CORDON_SET": "yes"}});
    let p = fx.policy(&pol);
    Spawn::sandboxed(&p, &["env", "CORDON_TEST_VAR"])
        .env("CORDON_TEST_VAR", "1")
        .run()
        .assert_denied("-");
    let r = Spawn::sandboxed(&p, &["env", "CORDON_SET"]).run();
    r.assert_allowed();
    assert!(r.line().contains("CORDON_SET=yes"), "{r}");
    // Setting an injection variable without allowInjection is a policy error.
    let mut bad = fx.base_policy();
    bad["env"] = json!({"set": {"LD_PRELOAD": "/x.so"}});
    let b = fx.policy(&bad);
    Spawn::sandboxed(&b, &["env", "LD_PRELOAD"])
        .run()
        .assert_helper_error(exit::POLICY);
}

#[test]
fn rlimit_nproc_stops_a_fork_bomb() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    if is_root() {
        // The kernel exempts real root from RLIMIT_NPROC: switch to nobody
        // (whose task count is ~0) so the limit applies.
        pol["user"] = json!({"uid": NOBODY, "gid": NOBODY});
        pol["rlimits"] = json!({"nproc": 30});
    } else {
        // RLIMIT_NPROC counts every task of the real uid: leave room for
        // what this user already runs (tests run in parallel).
        pol["rlimits"] = json!({"nproc": own_tasks() + 40});
    }
    let p = fx.policy(&pol);
    Spawn::sandboxed(&p, &["fork-bomb", "3000"])
        .run()
        .assert_denied("EAGAIN");
    // Control: the same policy without the limit lets a bomb of 50 through.
    pol.as_object_mut().unwrap().remove("rlimits");
    let c = fx.policy(&pol);
    Spawn::sandboxed(&c, &["fork-bomb", "50"])
        .run()
        .assert_allowed();
}

#[test]
fn rlimit_as_stops_a_mem_bomb() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["rlimits"] = json!({"as": 256u64 << 20});
    let p = fx.policy(&pol);
    Spawn::sandboxed(&p, &["mem-bomb", "512"])
        .run()
        .assert_denied("ENOMEM");
    // Control: the same policy allows a small allocation; no limit allows 512.
    Spawn::sandboxed(&p, &["mem-bomb", "16"])
        .run()
        .assert_allowed();
    let c = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&c, &["mem-bomb", "512"])
        .run()
        .assert_allowed();
}

/// Step 1: a helper installed setuid root must refuse to run (exit 76)
/// before reading any policy. Root-only: an unprivileged user cannot make a
/// setuid-root file. Control: the same copy without the bit gets past step 1
/// and fails at step 2 on the missing policy (75).
#[test]
fn setuid_helper_refuses_to_run_76() {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("cordon-setuid-")
        .tempdir()
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.path().join("cordon-helper");
    copy_executable(&helper_bin(), &copy);
    let run = |mode: u32| {
        fs::set_permissions(&copy, fs::Permissions::from_mode(mode)).unwrap();
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&copy)
            .args([
                "--policy-file",
                "/nonexistent/policy.json",
                "--",
                "/bin/true",
            ])
            .output()
            .unwrap()
    };
    let control = run(0o755);
    assert_eq!(control.status.code(), Some(exit::PERMISSION), "{control:?}");
    let out = run(0o4755);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::SETUID), "{stderr}");
    assert!(
        stderr.starts_with("cordon-helper: error: refusing to run setuid"),
        "{stderr}"
    );
}

/// A helper given file capabilities (`setcap cap_setuid,cap_setgid+ep`)
/// would let any caller's policy switch to root (`"user": {"uid": 0}`) and
/// run the command as uid 0: it refuses to start (76). Before, `id -u`
/// printed 0 for uid 1001. Control: the same copy without the capabilities
/// cannot switch (73). Only root can set file capabilities.
#[test]
fn file_capabilities_helper_refuses_to_run_76() {
    use std::fs;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !is_root() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("cordon-filecaps-")
        .tempdir()
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let policy = dir.path().join("policy.json");
    fs::write(
        &policy,
        json!({
            "filesystem": {"allow": [
                {"path": "/usr", "access": "execute"},
                {"path": "/bin", "access": "execute", "optional": true},
                {"path": "/lib", "access": "execute", "optional": true},
                {"path": "/lib64", "access": "execute", "optional": true},
            ]},
            "user": {"uid": 0, "gid": 0},
        })
        .to_string(),
    )
    .unwrap();
    fs::set_permissions(&policy, fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&policy, Some(1001), Some(1001)).unwrap();
    let copy = dir.path().join("cordon-helper");
    let run = |file_caps: bool| {
        let _ = fs::remove_file(&copy);
        copy_executable(&helper_bin(), &copy);
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
        if file_caps {
            // struct vfs_cap_data, revision 2: effective flag, then the
            // permitted and inheritable words of each half.
            let setuid_setgid: u32 = (1 << 7) | (1 << 6); // CAP_SETUID, CAP_SETGID
            let mut v = Vec::new();
            for w in [0x0200_0001u32, setuid_setgid, 0, 0, 0] {
                v.extend_from_slice(&w.to_le_bytes());
            }
            let path = std::ffi::CString::new(copy.as_os_str().as_bytes()).unwrap();
            // SAFETY: path and value are valid for the call; the kernel copies them.
            let r = unsafe {
                libc::setxattr(
                    path.as_ptr(),
                    c"security.capability".as_ptr(),
                    v.as_ptr().cast(),
                    v.len(),
                    0,
                )
            };
            assert_eq!(r, 0, "setxattr: {}", std::io::Error::last_os_error());
        }
        std::process::Command::new(&copy)
            .arg("--policy-file")
            .arg(&policy)
            .args(["--", "/usr/bin/id", "-u"])
            .uid(1001)
            .gid(1001)
            .output()
            .unwrap()
    };
    let out = run(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit::SETUID), "{out:?}");
    assert!(
        stderr.starts_with(
            "cordon-helper: error: refusing to run with file capabilities (CAP_SETGID, CAP_SETUID)"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
    let control = run(false);
    assert_eq!(control.status.code(), Some(exit::CAPS), "{control:?}");
}
