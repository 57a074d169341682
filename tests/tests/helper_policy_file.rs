//! The policy file contract (docs/policy.md, docs/helper.md): how the file is
//! opened and checked, parse/schema errors, the enforcement order, the
//! report, the exec-failure path, and a bounded randomized parser test.
//!
//! Every failure case asserts the documented exit code, exactly one
//! `cordon-helper: error: …` line on stderr, no panic and no signal.

use std::ffi::OsString;
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cordon_tests::*;

/// Run the probe under `policy` (any outcome of the probe is fine for a
/// valid policy; failures are about the helper's exit code).
fn run_with(policy: &Path) -> Run {
    Spawn::sandboxed(policy, &["env", "PATH"])
        .timeout(Duration::from_secs(10))
        .run()
}

fn valid_policy(fx: &Fixture) -> PathBuf {
    fx.policy(&fx.base_policy())
}

/// Control shared by the file-check tests: a correct 0600 file runs.
fn assert_valid_policy_runs(fx: &Fixture) {
    let r = run_with(&valid_policy(fx));
    r.assert_no_crash();
    assert!(
        r.code == Some(0) || r.code == Some(1),
        "valid policy did not run the probe:\n{r}"
    );
    assert!(
        r.line().starts_with("ALLOWED ") || r.line().starts_with("DENIED "),
        "{r}"
    );
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

// --- File type, owner, mode: exit 75 -----------------------------------------

#[test]
fn policy_file_mode_0644_is_refused_75() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    chmod(&p, 0o644);
    run_with(&p).assert_helper_error(exit::PERMISSION);
    assert_valid_policy_runs(&fx);
}

#[test]
fn policy_file_mode_0640_is_refused_75() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    chmod(&p, 0o640);
    run_with(&p).assert_helper_error(exit::PERMISSION);
    assert_valid_policy_runs(&fx);
}

#[test]
fn policy_file_mode_0400_is_refused_75() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    chmod(&p, 0o400);
    run_with(&p).assert_helper_error(exit::PERMISSION);
}

#[test]
fn policy_file_owned_by_another_uid_is_refused_75() {
    let fx = Fixture::new();
    if is_root() {
        // Root can read a file owned by anyone: only the owner check stops it.
        let p = valid_policy(&fx);
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        run_with(&p).assert_helper_error(exit::PERMISSION);
    } else {
        // Unprivileged: a root-owned readable file (owner and mode wrong) …
        let readable = Path::new("/etc/hostname");
        assert!(readable.is_file(), "fixture /etc/hostname missing");
        run_with(readable).assert_helper_error(exit::PERMISSION);
        // … and a root-owned 0600 file the caller cannot even open.
        let unreadable = Path::new("/etc/.pwd.lock");
        if unreadable.is_file() {
            run_with(unreadable).assert_helper_error(exit::PERMISSION);
        }
    }
    assert_valid_policy_runs(&fx);
}

#[test]
fn policy_file_symlink_is_refused_75() {
    let fx = Fixture::new();
    let target = valid_policy(&fx);
    let link = fx.root.join("policies/link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    run_with(&link).assert_helper_error(exit::PERMISSION);
    // Control: the target itself is fine.
    run_with(&target).assert_no_crash().assert_exit(0);
}

#[test]
fn policy_file_fifo_is_refused_75_without_hanging() {
    let fx = Fixture::new();
    let fifo = fx.root.join("policies/fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let r = Spawn::sandboxed(&fifo, &["env", "PATH"])
        .timeout(Duration::from_secs(5))
        .run();
    assert!(!r.timed_out, "helper hung on a FIFO policy:\n{r}");
    r.assert_helper_error(exit::PERMISSION);
}

#[test]
fn policy_file_directory_is_refused_75() {
    let fx = Fixture::new();
    let dir = fx.root.join("policies/dir.json");
    fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o600);
    let r = run_with(&dir);
    chmod(&dir, 0o700);
    r.assert_helper_error(exit::PERMISSION);
}

#[test]
fn policy_file_missing_is_an_error_not_a_crash() {
    let fx = Fixture::new();
    let r = run_with(&fx.root.join("policies/none.json"));
    r.assert_no_crash();
    assert!(
        r.code == Some(exit::PERMISSION) || r.code == Some(exit::USAGE),
        "{r}"
    );
    assert!(r.stderr.starts_with("cordon-helper: error: "), "{r}");
}

// --- Size and syntax: exit 70 ------------------------------------------------

fn padded(text: &str, size: usize) -> String {
    assert!(text.len() <= size);
    format!("{text}{}", " ".repeat(size - text.len()))
}

#[test]
fn policy_file_64k_plus_1_is_refused_70() {
    let fx = Fixture::new();
    let body = fx.base_policy().to_string();
    let big = fx.policy_text(&padded(&body, 64 * 1024 + 1));
    run_with(&big).assert_helper_error(exit::POLICY);
    // Control: exactly 64 KiB is accepted.
    let max = fx.policy_text(&padded(&body, 64 * 1024));
    run_with(&max).assert_no_crash().assert_exit(0);
}

#[test]
fn policy_file_much_larger_is_refused_70() {
    let fx = Fixture::new();
    let p = fx.policy_text(&format!("{{\"x\": \"{}\"}}", "a".repeat(4 << 20)));
    run_with(&p).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_empty_file_is_70() {
    let fx = Fixture::new();
    run_with(&fx.policy_text("")).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_invalid_json_is_70() {
    let fx = Fixture::new();
    for text in [
        "{",
        "{\"version\": 1,",
        "[1, 2",
        "nul",
        "{'version': 1}",
        "\u{feff}{}",
        "{\"a\"\0:1}",
    ] {
        run_with(&fx.policy_text(text)).assert_helper_error(exit::POLICY);
    }
}

#[test]
fn policy_trailing_garbage_is_70() {
    let fx = Fixture::new();
    for text in ["{} x", "{}{}", "{}\n]", "{} // comment"] {
        run_with(&fx.policy_text(text)).assert_helper_error(exit::POLICY);
    }
    // Control: trailing whitespace is fine.
    run_with(&fx.policy_text(&format!("{}\n\n  \t\n", fx.base_policy()))).assert_exit(0);
}

/// JSON keeps the last of two equal keys; a policy must not: a second,
/// empty `deny` would silently switch the first one off.
#[test]
fn policy_repeated_key_is_70_and_names_where() {
    let fx = Fixture::new();
    let key = fx.ws_file("private/key.txt", "private-marker\n");
    let mut pol = fx.base_policy();
    pol["filesystem"]["deny"] = json!([fx.workspace.join("private")]);
    // Control: the deny alone is enforced.
    Spawn::sandboxed(
        &fx.policy(&pol),
        &["read", key.to_str().unwrap(), "private-marker"],
    )
    .run()
    .assert_denied("EACCES");
    // The same policy with `"deny": []` appended to `filesystem`.
    let text = pol.to_string();
    let fs = text.find("\"filesystem\":{").unwrap() + "\"filesystem\":{".len();
    let repeated = format!("{}\"deny\":[],{}", &text[..fs], &text[fs..]);
    let r = Spawn::sandboxed(
        &fx.policy_text(&repeated),
        &["read", key.to_str().unwrap(), "private-marker"],
    )
    .run();
    r.assert_helper_error(exit::POLICY);
    assert!(
        r.stderr.contains("filesystem: key \"deny\" appears twice"),
        "{r}"
    );
    // At the top and inside a rule too.
    for text in [
        r#"{"version": 1, "version": 1}"#.to_string(),
        text.replacen("\"access\":", "\"access\":\"read\",\"access\":", 1),
    ] {
        run_with(&fx.policy_text(&text)).assert_helper_error(exit::POLICY);
    }
}

#[test]
fn policy_not_an_object_is_70() {
    let fx = Fixture::new();
    for text in ["[]", "1", "\"policy\"", "null", "true"] {
        run_with(&fx.policy_text(text)).assert_helper_error(exit::POLICY);
    }
}

#[test]
fn policy_unknown_access_is_70_and_names_the_field() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["filesystem"]["allow"][1]["access"] = json!("rw");
    let r = run_with(&fx.policy(&pol));
    r.assert_helper_error(exit::POLICY);
    assert!(
        r.stderr.contains("filesystem.allow[1].access"),
        "field not named:\n{r}"
    );
    assert!(r.stderr.contains("\"rw\""), "value not named:\n{r}");
}

#[test]
fn policy_unknown_syscall_is_70_and_names_it() {
    let fx = Fixture::new();
    let pol = with(
        fx.base_policy(),
        "syscalls",
        json!({"deny": ["getppid", "not_a_syscall"]}),
    );
    let r = run_with(&fx.policy(&pol));
    r.assert_helper_error(exit::POLICY);
    assert!(r.stderr.contains("not_a_syscall"), "{r}");
    // Control: a name that exists only on aarch64-or-x86_64 is fine; one on
    // both is fine.
    let ok = with(fx.base_policy(), "syscalls", json!({"deny": ["getppid"]}));
    run_with(&fx.policy(&ok)).assert_exit(0);
}

#[test]
fn policy_unknown_field_is_70() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["filesystem"]["dney"] = json!(["/tmp"]);
    let r = run_with(&fx.policy(&pol));
    r.assert_helper_error(exit::POLICY);
    assert!(r.stderr.contains("dney"), "{r}");
    run_with(&fx.policy(&with(fx.base_policy(), "colour", json!("red"))))
        .assert_helper_error(exit::POLICY);
}

#[test]
fn policy_wrong_version_is_70() {
    let fx = Fixture::new();
    run_with(&fx.policy(&with(fx.base_policy(), "version", json!(2))))
        .assert_helper_error(exit::POLICY);
    run_with(&fx.policy(&with(fx.base_policy(), "version", json!(1)))).assert_exit(0);
}

#[test]
fn policy_nested_10000_levels_is_70_without_stack_overflow() {
    let fx = Fixture::new();
    let depth = 10_000;
    let arrays = format!(
        "{{\"keepFds\": {}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    run_with(&fx.policy_text(&arrays)).assert_helper_error(exit::POLICY);
    let mut objects = String::new();
    for _ in 0..depth {
        objects.push_str("{\"a\":");
    }
    objects.push('1');
    objects.push_str(&"}".repeat(depth));
    run_with(&fx.policy_text(&objects)).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_relative_allow_path_is_70() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    add_allow(&mut pol, "relative/dir", "read");
    run_with(&fx.policy(&pol)).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_allow_beneath_denied_path_is_70() {
    let fx = Fixture::new();
    fx.ws_file("private/x.txt", "x");
    let mut pol = fx.base_policy();
    pol["filesystem"]["deny"] = json!([fx.workspace.join("private")]);
    add_allow(&mut pol, fx.workspace.join("private/x.txt"), "read");
    run_with(&fx.policy(&pol)).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_denying_execve_is_70() {
    let fx = Fixture::new();
    let pol = with(fx.base_policy(), "syscalls", json!({"deny": ["execve"]}));
    run_with(&fx.policy(&pol)).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_setting_injection_variable_is_70() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["env"] = json!({"set": {"BASH_FUNC_evil%%": "() { id; }"}});
    run_with(&fx.policy(&pol)).assert_helper_error(exit::POLICY);
}

#[test]
fn policy_missing_allow_path_is_an_error_unless_optional() {
    let fx = Fixture::new();
    let missing = fx.root.join("does-not-exist");
    let mut pol = fx.base_policy();
    add_allow(&mut pol, &missing, "read");
    let r = run_with(&fx.policy(&pol));
    // docs/policy.md: "an error naming it"; the code is not spelled out
    // (70: policy, 71: Landlock): accept either, demand the name.
    r.assert_no_crash();
    assert!(
        r.code == Some(exit::POLICY) || r.code == Some(exit::LANDLOCK),
        "{r}"
    );
    assert!(r.stderr.contains("does-not-exist"), "path not named:\n{r}");
    // Control: optional.
    pol["filesystem"]["allow"][2]["optional"] = json!(true);
    run_with(&fx.policy(&pol)).assert_exit(0);
}

#[test]
fn policy_via_default_fd_3() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    // A fresh open per run: the helper reads from the fd's offset, which a
    // previous run (sharing the open file description) leaves at EOF.
    let f = open_ro(&p);
    let r = Spawn::new(
        helper_bin(),
        &os(&["--", probe_bin().to_str().unwrap(), "env", "PATH"]),
    )
    .inherit_fd(f.as_raw_fd(), 3)
    .run();
    r.assert_exit(0);
    // The policy fd itself is not left open for the command.
    let f = open_ro(&p);
    let r = Spawn::new(
        helper_bin(),
        &os(&["--", probe_bin().to_str().unwrap(), "fds"]),
    )
    .inherit_fd(f.as_raw_fd(), 3)
    .run();
    r.assert_denied("-");
    // Control: no fd 3 at all is an error, not a hang or a crash.
    let r = Spawn::new(
        helper_bin(),
        &os(&["--", probe_bin().to_str().unwrap(), "fds"]),
    )
    .run();
    r.assert_no_crash();
    assert!(r.code.is_some_and(|c| c >= 64), "{r}");
}

#[test]
fn policy_doc_example_is_accepted_by_check() {
    // The example in docs/policy.md, verbatim apart from the paths.
    let fx = Fixture::new();
    let text = json!({
      "version": 1,
      "filesystem": {
        "allow": [
          {"path": "/usr", "access": "execute"},
          {"path": fx.workspace, "access": "readwrite"},
          {"path": "/opt/maybe", "access": "read", "optional": true}
        ],
        "deny": [fx.workspace.join(".git/hooks")]
      },
      "network": {"tcpBind": [], "tcpConnect": [443]},
      "scope": {"signal": true, "abstractUnix": true},
      "landlock": {"compat": "best_effort", "minAbi": 1},
      "syscalls": {"profile": "default", "deny": ["@network-io"]},
      "rlimits": {"nofile": 1024, "core": 0, "nproc": {"soft": 512, "hard": 512}},
      "keepFds": [],
      "env": {"clear": false, "set": {"LANG": "C.UTF-8"}, "allowInjection": []},
      "user": {"uid": 65534, "gid": 65534}
    });
    let p = fx.policy(&text);
    let r = Spawn::helper_check(&p).run();
    r.assert_no_crash().assert_exit(0);
    // The normalized policy is JSON and is itself a valid policy that
    // normalizes to the same text.
    let norm: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("--check output is not JSON ({e}):\n{r}"));
    let p2 = fx.policy(&norm);
    let r2 = Spawn::helper_check(&p2).run();
    r2.assert_exit(0);
    assert_eq!(r.stdout, r2.stdout, "normalization is not idempotent");
}

/// `--check` refuses what a run would refuse before applying anything, not
/// only what the schema refuses.
#[test]
fn check_refuses_what_a_run_refuses() {
    let fx = Fixture::new();
    let missing = fx.workspace.join("no-such-dir");
    let mut absent = fx.base_policy();
    add_allow(&mut absent, &missing, "read");
    let mut beneath = fx.base_policy();
    beneath["filesystem"]["deny"] = json!([fx.workspace.join("private")]);
    add_allow(&mut beneath, fx.ws_file("private/x", "x"), "read");
    let undeniable = with(
        fx.base_policy(),
        "syscalls",
        json!({"profile": "default", "deny": ["execve"]}),
    );
    for (pol, what) in [
        (&absent, "does not exist"),
        (&beneath, "beneath the denied path"),
        (&undeniable, "execve"),
    ] {
        let p = fx.policy(pol);
        let r = Spawn::helper_check(&p).run();
        r.assert_helper_error(exit::POLICY);
        assert!(r.stderr.contains(what), "{what}: {r}");
        // A run refuses it the same way.
        run_with(&p).assert_helper_error(exit::POLICY);
    }
    // Control: the missing path marked optional passes both.
    let n = absent["filesystem"]["allow"].as_array().unwrap().len();
    absent["filesystem"]["allow"][n - 1]["optional"] = json!(true);
    let p = fx.policy(&absent);
    Spawn::helper_check(&p).run().assert_exit(0);
    assert_valid_policy_runs(&fx);
}

// --- Enforcement order ---------------------------------------------------------

/// An rlimit that fails at step 3 for every uid: a hard NOFILE above
/// fs.nr_open (1 << 30 > the 1 048 576 default) is refused even to root.
fn failing_rlimit() -> Value {
    json!({"nofile": {"soft": 1u64 << 30, "hard": 1u64 << 30}})
}

#[test]
fn order_invalid_seccomp_rule_fails_70_before_rlimits_and_exec() {
    let fx = Fixture::new();
    let marker = fx.workspace.join("ran.txt");
    let bad_rule = json!({"rules": [{"syscall": "getpriority", "action": "errno:EPERM",
                                     "when": [{"arg": 6, "op": "eq", "value": 1}]}]});
    let mut pol = with(fx.base_policy(), "syscalls", bad_rule);
    pol["rlimits"] = failing_rlimit();
    let report = report_file(&fx);
    let r = Spawn::sandboxed_opts(
        &fx.policy(&pol),
        &["--report-fd", "7"],
        &["write", marker.to_str().unwrap()],
    )
    .inherit_fd(report.as_raw_fd(), 7)
    .run();
    // 70 (compile, step 2), not 75 (rlimits, step 3): compiled first.
    r.assert_helper_error(exit::POLICY);
    assert!(
        r.stderr.contains("syscalls.rules[0]"),
        "rule not named:\n{r}"
    );
    assert!(!marker.exists(), "the command ran");
    assert_eq!(
        report.metadata().unwrap().len(),
        0,
        "report written despite the error"
    );

    // Control: the same policy with a valid rule fails at the rlimit step.
    let ok_rule = json!({"rules": [{"syscall": "getpriority", "action": "errno:EPERM",
                                    "when": [{"arg": 0, "op": "eq", "value": 1}]}]});
    let mut pol2 = with(fx.base_policy(), "syscalls", ok_rule);
    pol2["rlimits"] = failing_rlimit();
    Spawn::sandboxed(&fx.policy(&pol2), &["write", marker.to_str().unwrap()])
        .run()
        .assert_helper_error(exit::PERMISSION);
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn order_invalid_action_and_masked_eq_without_mask_are_70() {
    let fx = Fixture::new();
    for sc in [
        json!({"deny": ["getppid"], "denyAction": "errno:NOTANERRNO"}),
        json!({"defaultAction": "explode"}),
        json!({"rules": [{"syscall": "ioctl", "action": "errno:EPERM",
                          "when": [{"arg": 1, "op": "maskedEq", "value": 1}]}]}),
        json!({"rules": [{"syscall": "ioctl", "action": "errno:EPERM",
                          "when": [{"arg": 1, "op": "eq", "value": 1, "width": 16}]}]}),
    ] {
        let mut pol = with(fx.base_policy(), "syscalls", sc);
        pol["rlimits"] = failing_rlimit();
        run_with(&fx.policy(&pol)).assert_helper_error(exit::POLICY);
    }
}

#[test]
fn report_fd_is_one_json_line_reflecting_what_was_applied() {
    require_landlock_abi(6, "the full report (net rules, scoping)");
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    pol["network"] = json!({"tcpConnect": [1234]});
    pol["rlimits"] = json!({"nofile": 512});
    let opt = fx.root.join("optional-missing");
    pol["filesystem"]["allow"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": opt, "access": "read", "optional": true}));
    let mut report = report_file(&fx);
    let leak = open_ro(&fx.secret);
    let r = Spawn::sandboxed_opts(&fx.policy(&pol), &["--report-fd", "7"], &["fds"])
        .inherit_fd(report.as_raw_fd(), 7)
        .inherit_fd(leak.as_raw_fd(), 5)
        .inherit_fd(leak.as_raw_fd(), 6)
        .env("LD_PRELOAD", "/nonexistent/evil.so")
        .run();
    // The report fd is close-on-exec and fds 5, 6 were closed.
    r.assert_denied("-");
    let v = read_report(&mut report);
    assert_eq!(v["no_new_privs"], json!(true), "{v}");
    let ll = &v["landlock"];
    let abi = landlock_abi();
    assert_eq!(ll["kernel_abi"], json!(abi), "{v}");
    assert_eq!(ll["status"], json!("fully_enforced"), "{v}");
    assert_eq!(ll["compat"], json!("best_effort"), "{v}");
    assert_eq!(
        ll["path_rules"],
        json!(2),
        "two rules applied (optional skipped): {v}"
    );
    assert_eq!(ll["net_rules"], json!(1), "{v}");
    let skipped = ll["skipped_optional"].to_string();
    assert!(
        skipped.contains("optional-missing"),
        "optional rule not reported: {v}"
    );
    for n in ["bind_tcp", "connect_tcp"] {
        assert!(
            ll["handled_net"].as_array().unwrap().contains(&json!(n)),
            "{n}: {v}"
        );
    }
    for s in ["abstract_unix_socket", "signal"] {
        assert!(
            ll["scoped"].as_array().unwrap().contains(&json!(s)),
            "{s}: {v}"
        );
    }
    assert_eq!(ll["unenforced"], json!([]), "{v}");
    let sc = &v["seccomp"];
    assert_eq!(sc["installed"], json!(true), "{v}");
    assert_eq!(sc["profile"], json!("default"), "{v}");
    assert_eq!(sc["default_action"], json!("errno:EPERM"), "{v}");
    assert!(sc["instructions"].as_u64().unwrap_or(0) > 0, "{v}");
    assert!(
        v["fds_closed"].as_u64().unwrap_or(0) >= 2,
        "fds 5 and 6 closed: {v}"
    );
    assert_eq!(v["rlimits"]["nofile"], json!([512, 512]), "{v}");
    assert_eq!(v["uid"], json!(uid()), "{v}");
    assert_eq!(v["gid"], json!(gid()), "{v}");
    assert!(
        v["env_removed"]
            .as_array()
            .unwrap()
            .contains(&json!("LD_PRELOAD")),
        "{v}"
    );
    assert_eq!(v["caps"]["bounding_cleared"], json!(is_root()), "{v}");
    assert_eq!(v["caps"]["effective"], json!([]), "{v}");
}

#[test]
fn report_reflects_a_custom_filter() {
    let fx = Fixture::new();
    let pol = with(
        fx.base_policy(),
        "syscalls",
        json!({"deny": ["getppid"], "denyAction": "errno:ENOSYS"}),
    );
    let mut report = report_file(&fx);
    Spawn::sandboxed_opts(
        &fx.policy(&pol),
        &["--report-fd", "7"],
        &["raw-syscall", "110"],
    )
    .inherit_fd(report.as_raw_fd(), 7)
    .run()
    .assert_denied("ENOSYS");
    let v = read_report(&mut report);
    assert_eq!(v["seccomp"]["installed"], json!(true), "{v}");
    assert_eq!(
        v["seccomp"]["default_action"],
        json!("allow"),
        "deny-list filter: {v}"
    );
    assert_ne!(v["seccomp"]["profile"], json!("default"), "{v}");
}

#[test]
fn exec_failure_exits_74_even_under_strict_allowlist() {
    let fx = Fixture::new();
    let strict = fx.policy(&json!({"syscalls": {"allow": ["exit_group"], "defaultDeny": true}}));
    let r = Spawn::helper(&strict, &["/nonexistent/cordon-command"]).run();
    r.assert_helper_error(exit::EXEC);
    assert!(
        r.stderr.contains("/nonexistent/cordon-command"),
        "command not named:\n{r}"
    );
    // Control 1: the filter really is strict: an existing command is killed
    // at its first syscall after execve.
    let mut strict_probe = fx.base_policy();
    strict_probe["syscalls"] = json!({"allow": ["exit_group"], "defaultDeny": true});
    Spawn::sandboxed(&fx.policy(&strict_probe), &["env", "PATH"])
        .run()
        .assert_signal(libc::SIGSYS);
    // Control 2: the same message and code under the default profile.
    Spawn::helper(&valid_policy(&fx), &["/nonexistent/cordon-command"])
        .run()
        .assert_helper_error(exit::EXEC);
}

#[test]
fn exec_denied_by_landlock_exits_74() {
    let fx = Fixture::new();
    // A file in the workspace is readwrite, not execute.
    let script = fx.ws_file("run.sh", "#!/bin/sh\necho ran\n");
    chmod(&script, 0o755);
    let r = Spawn::helper(&valid_policy(&fx), &[&script]).run();
    r.assert_helper_error(exit::EXEC);
    // Control: directly it runs.
    Spawn::new(&script, &[] as &[&str]).run().assert_exit(0);
}

/// A bare name that the PATH search cannot run names the errno, as an
/// absolute path does: ENOENT when no candidate exists, EACCES when one
/// does but may not be executed.
#[test]
fn exec_failure_by_path_search_names_the_errno() {
    let fx = Fixture::new();
    let r = Spawn::helper(&valid_policy(&fx), &["cordon-no-such-command"])
        .env("PATH", &fx.workspace)
        .run();
    r.assert_helper_error(exit::EXEC);
    assert!(r.stderr.contains("ENOENT"), "{r}");
    let script = fx.ws_file("cordon-script", "#!/bin/sh\necho ran\n");
    chmod(&script, 0o644);
    let r = Spawn::helper(&valid_policy(&fx), &["cordon-script"])
        .env("PATH", &fx.workspace)
        .run();
    r.assert_helper_error(exit::EXEC);
    assert!(r.stderr.contains("EACCES"), "{r}");
    // Control: made executable, found and run (outside the sandbox, where
    // the workspace may execute).
    chmod(&script, 0o755);
    Spawn::new("/bin/sh", &["-c", "cordon-script"])
        .env("PATH", &fx.workspace)
        .run()
        .assert_exit(0);
}

#[test]
fn command_exit_status_is_passed_through() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    Spawn::sandboxed(&p, &["env", "CORDON_UNSET_VAR"])
        .run()
        .assert_exit(1);
    Spawn::sandboxed(&p, &["no-such-subcommand"])
        .run()
        .assert_exit(2);
}

#[test]
fn usage_errors_exit_64() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    let ps = p.to_str().unwrap();
    for args in [
        vec!["--bogus-flag"],
        vec!["--policy-file"],
        vec!["--policy-file", ps, "--policy-fd", "3", "--", "/bin/true"],
        vec!["--check", "--explain", "--policy-file", ps],
        vec!["--report-fd", "x", "--policy-file", ps, "--", "/bin/true"],
    ] {
        let r = Spawn::helper_args(&args).run();
        r.assert_no_crash();
        r.assert_exit(exit::USAGE);
        assert!(
            r.stderr.starts_with("cordon-helper: error: ") || r.stderr.contains("usage"),
            "{r}"
        );
    }
}

// --- Randomized parser test ------------------------------------------------------

const KEYS: &[&str] = &[
    "version",
    "filesystem",
    "network",
    "scope",
    "landlock",
    "syscalls",
    "rlimits",
    "keepFds",
    "env",
    "user",
    "allow",
    "deny",
    "path",
    "access",
    "optional",
    "tcpBind",
    "tcpConnect",
    "signal",
    "abstractUnix",
    "compat",
    "minAbi",
    "profile",
    "defaultDeny",
    "defaultAction",
    "denyAction",
    "rules",
    "syscall",
    "action",
    "when",
    "arg",
    "op",
    "value",
    "width",
    "mask",
    "nofile",
    "nproc",
    "as",
    "cpu",
    "fsize",
    "core",
    "stack",
    "soft",
    "hard",
    "clear",
    "set",
    "allowInjection",
    "uid",
    "gid",
    "bogus",
];
const STRINGS: &[&str] = &[
    "read",
    "write",
    "readwrite",
    "execute",
    "readwriteexecute",
    "rw",
    "default",
    "any",
    "best_effort",
    "hard_requirement",
    "allow",
    "kill",
    "kill_process",
    "kill_thread",
    "trap",
    "log",
    "errno:EPERM",
    "errno:ENOSYS",
    "errno:1",
    "errno:99999",
    "errno:",
    "getppid",
    "execve",
    "@network-io",
    "@default",
    "@nope",
    "ioctl",
    "clone3",
    "not_a_syscall",
    "eq",
    "ne",
    "anySet",
    "maskedEq",
    "unlimited",
    "/usr",
    "/nonexistent/x",
    "relative",
    "",
    "/",
    "LD_PRELOAD",
    "LANG",
    "\u{0}",
    "\u{fffd}",
    "é",
    "\\",
    "\"",
];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "6",
    "7",
    "8",
    "32",
    "64",
    "443",
    "65535",
    "65536",
    "-1",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e3",
    "1.5",
    "-0",
    "1e400",
    "0x10",
    "007",
];

fn pick_str(rng: &mut Rng, items: &[&'static str]) -> &'static str {
    items[rng.below(items.len())]
}

fn gen_value(rng: &mut Rng, depth: usize, out: &mut String) {
    let choice = if depth > 6 {
        rng.below(4)
    } else {
        rng.below(8)
    };
    match choice {
        0 => out.push_str(pick_str(rng, NUMBERS)),
        1 => {
            out.push('"');
            out.push_str(&rng.pick(STRINGS).replace('\\', "\\\\").replace('"', "\\\""));
            out.push('"');
        }
        2 => out.push_str(pick_str(rng, &["true", "false", "null"])),
        3 => out.push_str(pick_str(
            rng,
            &["\"\\ud800\"", "\"\\u0000\"", "\"a\\nb\"", "\"\\uZZZZ\""],
        )),
        4..=6 => {
            out.push('{');
            for i in 0..rng.below(5) {
                if i > 0 {
                    out.push(',');
                }
                out.push('"');
                out.push_str(pick_str(rng, KEYS));
                out.push_str("\":");
                gen_value(rng, depth + 1, out);
            }
            out.push('}');
        }
        _ => {
            out.push('[');
            for i in 0..rng.below(5) {
                if i > 0 {
                    out.push(',');
                }
                gen_value(rng, depth + 1, out);
            }
            out.push(']');
        }
    }
}

fn mutate(rng: &mut Rng, text: &str) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            b.push(b'{');
        }
        let i = rng.below(b.len());
        match rng.below(7) {
            0 => {
                b.remove(i);
            }
            1 => b.insert(
                i,
                *rng.pick(b"{}[]\",:0123456789-+eE.\\ \n\t\x00\xff\xc3tfn"),
            ),
            2 => {
                let j = (i + rng.below(16)).min(b.len());
                let chunk = b[i..j].to_vec();
                b.splice(i..i, chunk);
            }
            3 => b.truncate(i),
            4 => b[i] = rng.next_u64() as u8,
            5 => {
                let j = rng.below(b.len());
                b.swap(i, j);
            }
            _ => {
                let n = rng.pick(NUMBERS).as_bytes().to_vec();
                b.splice(i..i, n);
            }
        }
    }
    b
}

/// Valid policies to mutate (all accepted by --check; asserted below).
fn corpus(fx: &Fixture) -> Vec<String> {
    vec![
        "{}".into(),
        fx.base_policy().to_string(),
        json!({"version": 1, "filesystem": {"allow": [{"path": "/usr", "access": "execute"}],
               "deny": ["/usr/share/doc"]},
               "network": {"tcpBind": "any", "tcpConnect": [443, 80]},
               "scope": {"signal": false, "abstractUnix": true},
               "landlock": {"compat": "best_effort", "minAbi": 1}})
        .to_string(),
        json!({"syscalls": {"profile": "default", "deny": ["@network-io", "getppid"],
               "denyAction": "errno:ENOSYS",
               "rules": [{"syscall": "ioctl", "action": "errno:EPERM",
                          "when": [{"arg": 1, "op": "maskedEq", "mask": 65535, "value": 21522, "width": 32}]}]},
               "rlimits": {"nofile": 1024, "core": 0, "nproc": {"soft": 512, "hard": "unlimited"}}})
        .to_string(),
        json!({"syscalls": {"allow": ["read", "write", "exit_group"], "defaultDeny": true},
               "keepFds": [5, 7], "env": {"clear": true, "set": {"LANG": "C"}, "allowInjection": ["LD_PRELOAD"]},
               "user": {"uid": 65534, "gid": 65534}})
        .to_string(),
    ]
}

#[test]
fn randomized_parser_never_crashes() {
    let fx = Fixture::new();
    let check = |bytes: &[u8]| -> Run {
        let p = fx.policy_text(&String::from_utf8_lossy(bytes));
        // policy_text needs UTF-8; write raw bytes over it to keep them exact.
        fs::write(&p, bytes).unwrap();
        let r = Spawn::helper_check(&p)
            .timeout(Duration::from_secs(10))
            .run();
        let _ = fs::remove_file(&p);
        r
    };
    // Control: the corpus is valid.
    for text in corpus(&fx) {
        let r = check(text.as_bytes());
        assert_eq!(r.code, Some(0), "corpus policy rejected: {text}\n{r}");
    }
    // Control: known-bad inputs are rejected (a helper that accepts
    // everything must fail this test).
    for bad in ["{", "[]", "{} x", "{\"bogus\": 1}", "{\"version\": 2}"] {
        let r = check(bad.as_bytes());
        assert_eq!(r.code, Some(exit::POLICY), "{bad:?} accepted:\n{r}");
    }
    let seed = std::env::var("CORDON_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00c0_4d0e);
    let mut rng = Rng::new(seed);
    let corpus = corpus(&fx);
    let start = Instant::now();
    let (mut n, mut accepted) = (0, 0);
    while n < 3000 && start.elapsed() < Duration::from_secs(15) {
        let input: Vec<u8> = match rng.below(10) {
            0..=3 => {
                let mut s = String::new();
                gen_value(&mut rng, 0, &mut s);
                if rng.chance(80) && !s.starts_with('{') {
                    s = format!("{{\"{}\":{s}}}", rng.pick(KEYS));
                }
                s.into_bytes()
            }
            4..=8 => {
                let base = rng.pick(&corpus).clone();
                mutate(&mut rng, &base)
            }
            _ => {
                let depth = 1 + rng.below(3000);
                let open = rng.pick(&["[", "{\"a\":"]).to_string();
                open.repeat(depth).into_bytes()
            }
        };
        let r = check(&input);
        let shown = String::from_utf8_lossy(&input)
            .chars()
            .take(400)
            .collect::<String>();
        assert!(
            !r.timed_out,
            "seed {seed:#x} case {n}: timeout on {shown:?}\n{r}"
        );
        assert_eq!(
            r.signal, None,
            "seed {seed:#x} case {n}: signal on {shown:?}\n{r}"
        );
        assert!(
            !r.stderr.contains("panicked"),
            "seed {seed:#x} case {n}: panic on {shown:?}\n{r}"
        );
        match r.code {
            Some(0) => accepted += 1,
            Some(70) => {
                let lines: Vec<&str> = r.stderr.lines().collect();
                assert!(
                    lines.len() == 1 && lines[0].starts_with("cordon-helper: error: "),
                    "seed {seed:#x} case {n}: not one error line for {shown:?}\n{r}"
                );
            }
            _ => panic!(
                "seed {seed:#x} case {n}: exit {:?} (want 0 or 70) for {shown:?}\n{r}",
                r.code
            ),
        }
        n += 1;
    }
    assert!(n >= 200, "only {n} cases ran in the time budget");
    assert!(
        accepted > 0 && accepted < n,
        "{accepted} of {n} accepted: the generator is broken"
    );
    eprintln!("randomized parser: {n} cases, {accepted} accepted, seed {seed:#x}");
}

/// An allow rule may name the `[st_dev, st_ino]` its path must have: a
/// launcher's check of what it planned against what was mounted. A path
/// swapped in between (a symlink raced into place) is refused with 71, and
/// the command never runs.
#[test]
fn allow_rule_identity_must_match() {
    use std::os::unix::fs::MetadataExt;
    let fx = Fixture::new();
    let marker = fx.workspace.join("ran.txt");
    let m = fs::metadata(&fx.workspace).unwrap();
    let other = fs::metadata("/usr").unwrap();
    let with_identity = |dev: u64, ino: u64| {
        let mut pol = fx.base_policy();
        let rules = pol["filesystem"]["allow"].as_array_mut().unwrap();
        let ws = rules
            .iter_mut()
            .find(|r| r["path"] == json!(fx.workspace))
            .expect("the base policy allows the workspace");
        ws["identity"] = json!([dev, ino]);
        fx.policy(&pol)
    };
    let ms = marker.to_str().unwrap();
    let r = Spawn::sandboxed(&with_identity(other.dev(), other.ino()), &["write", ms]).run();
    r.assert_helper_error(exit::LANDLOCK);
    assert!(r.stderr.contains("is not the file the policy names"), "{r}");
    assert!(!marker.exists());
    // Control: the right identity runs the command, which writes there.
    Spawn::sandboxed(&with_identity(m.dev(), m.ino()), &["write", ms])
        .run()
        .assert_allowed();
    assert!(marker.exists());
}

/// `--policy-fd 0` for a run is refused (64): the policy's fd is closed
/// once read, so the command started with its stdin closed, and its next
/// open took fd 0. Before, the probe below ran and wrote. `--check` may
/// still read a policy from stdin, and fd 3 runs the command.
#[test]
fn policy_fd_on_stdio_is_refused_for_a_run() {
    let fx = Fixture::new();
    let text = fx.base_policy().to_string();
    let target = fx.workspace.join("ran");
    let t = target.to_str().unwrap();
    let probe = probe_bin();
    let p = probe.to_str().unwrap();
    Spawn::helper_args(&["--policy-fd", "0", "--", p, "write", t])
        .stdin_bytes(text.as_bytes())
        .run()
        .assert_exit(exit::USAGE);
    assert!(!target.exists(), "the command ran");
    Spawn::helper_args(&["--check", "--policy-fd", "0"])
        .stdin_bytes(text.as_bytes())
        .run()
        .assert_exit(0);
    // Control: the same policy on fd 3 runs the command.
    let file = fx.policy_text(&text);
    let f = fs::File::open(&file).unwrap();
    Spawn::helper_args(&["--policy-fd", "3", "--", p, "write", t])
        .inherit_fd(f.as_raw_fd(), 3)
        .run()
        .assert_allowed();
    assert!(target.exists());
}

/// `--init` is for the pid 1 of a pid namespace only (bwrap --as-pid-1, as
/// `cordon run` starts it): anywhere else the command's leftovers would
/// outlive the init. Refused before anything is read or applied (64), with
/// `--check` too. Control: the same run without `--init` runs the command.
#[test]
fn init_outside_a_pid_namespace_is_refused_64() {
    let fx = Fixture::new();
    let p = valid_policy(&fx);
    let target = fx.workspace.join("ran");
    let t = target.to_str().unwrap();
    let probe = probe_bin();
    let pr = probe.to_str().unwrap();
    let r = Spawn::helper_opts(&p, &["--init"], &[pr, "write", t]).run();
    r.assert_no_crash().assert_exit(exit::USAGE);
    assert!(
        r.stderr.starts_with("cordon-helper: error: --init ") && r.stderr.contains("--as-pid-1"),
        "{r}"
    );
    assert!(!target.exists(), "the command ran");
    Spawn::helper_args(&["--check", "--init", "--policy-file", p.to_str().unwrap()])
        .run()
        .assert_exit(exit::USAGE);
    // Control: without --init the same run runs the command.
    Spawn::helper(&p, &[pr, "write", t]).run().assert_no_crash();
    assert!(target.exists(), "control: the command did not run");
}
