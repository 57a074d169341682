//! The helper's seccomp layer: configured actions, foreign-architecture
//! kills, argument rules, and the built-in default profile.
//!
//! `getppid` (x86_64 nr 110) is the guinea pig for action tests: harmless,
//! argument-free, and used neither by the helper's exec path nor by the
//! probe's runtime. Each attack is paired with a CONTROL that differs only
//! in the seccomp layer (a deny-list filter denying `acct` only), or with a
//! direct run when a kernel answer differs by uid.

use cordon_tests::*;

const NR_GETPPID: &str = "110";
const NR_GETPRIORITY: &str = "140";
const NR_MOUNT: &str = "165";
const NR_BPF: &str = "321";

fn deny_getppid(action: &str) -> Value {
    json!({"deny": ["getppid"], "denyAction": action})
}

fn run_getppid(fx: &Fixture, syscalls: Value) -> Run {
    let p = fx.policy(&with(fx.base_policy(), "syscalls", syscalls));
    Spawn::sandboxed(&p, &["raw-syscall", NR_GETPPID]).run()
}

fn control_getppid(fx: &Fixture) {
    run_getppid(fx, permissive_syscalls()).assert_allowed();
}

#[test]
fn seccomp_deny_action_errno_eperm() {
    let fx = Fixture::new();
    run_getppid(&fx, deny_getppid("errno:EPERM")).assert_denied("EPERM");
    control_getppid(&fx);
}

#[test]
fn seccomp_deny_action_defaults_to_eperm() {
    let fx = Fixture::new();
    run_getppid(&fx, json!({"deny": ["getppid"]})).assert_denied("EPERM");
    control_getppid(&fx);
}

#[test]
fn seccomp_deny_action_errno_enosys() {
    let fx = Fixture::new();
    run_getppid(&fx, deny_getppid("errno:ENOSYS")).assert_denied("ENOSYS");
    control_getppid(&fx);
}

#[test]
fn seccomp_deny_action_numeric_errno() {
    let fx = Fixture::new();
    run_getppid(&fx, deny_getppid("errno:13")).assert_denied("EACCES");
    control_getppid(&fx);
}

#[test]
fn seccomp_deny_action_trap_is_sigsys() {
    let fx = Fixture::new();
    run_getppid(&fx, deny_getppid("trap")).assert_signal(libc::SIGSYS);
    control_getppid(&fx);
}

#[test]
fn seccomp_deny_action_kill_process_is_sigsys() {
    let fx = Fixture::new();
    run_getppid(&fx, deny_getppid("kill_process")).assert_signal(libc::SIGSYS);
    run_getppid(&fx, deny_getppid("kill")).assert_signal(libc::SIGSYS);
    control_getppid(&fx);
}

#[test]
fn seccomp_deny_group_on_top_of_default_profile() {
    let fx = Fixture::new();
    let sc = json!({"profile": "default", "deny": ["getppid"], "denyAction": "errno:ENOSYS"});
    run_getppid(&fx, sc).assert_denied("ENOSYS");
    // Control: the default profile alone allows getppid.
    run_getppid(&fx, json!({"profile": "default"})).assert_allowed();
}

#[test]
fn seccomp_argument_rule_matches_low_32_bits() {
    let fx = Fixture::new();
    // getpriority(which, who): deny which == PRIO_USER (2), compared on 32 bits.
    let sc = json!({
        "deny": ["acct"],
        "rules": [{"syscall": "getpriority", "action": "errno:EACCES",
                   "when": [{"arg": 0, "op": "eq", "value": 2, "width": 32}]}]
    });
    let p = fx.policy(&with(fx.base_policy(), "syscalls", sc));
    Spawn::sandboxed(&p, &["raw-syscall", NR_GETPRIORITY, "2", "0"])
        .run()
        .assert_denied("EACCES");
    // High bits set: the kernel still sees `int which = 2`; a 32-bit rule
    // must still match (a 64-bit comparison would be bypassed).
    Spawn::sandboxed(&p, &["raw-syscall", NR_GETPRIORITY, "0x100000002", "0"])
        .run()
        .assert_denied("EACCES");
    // The rule's condition does not hold: the base action (allow) applies.
    Spawn::sandboxed(&p, &["raw-syscall", NR_GETPRIORITY, "0", "0"])
        .run()
        .assert_allowed();
    // Control: same policy without the rule allows which = 2.
    let c = fx.policy(&with(fx.base_policy(), "syscalls", permissive_syscalls()));
    Spawn::sandboxed(&c, &["raw-syscall", NR_GETPRIORITY, "2", "0"])
        .run()
        .assert_allowed();
}

/// Every filter mode the policy can select.
fn all_modes() -> Vec<(&'static str, Option<Value>)> {
    vec![
        ("default profile (no syscalls section)", None),
        (
            "explicit default profile",
            Some(json!({"profile": "default"})),
        ),
        ("deny-list filter", Some(json!({"deny": ["acct"]}))),
        ("empty syscalls section", Some(json!({}))),
        (
            "defaultAction allow",
            Some(json!({"defaultAction": "allow"})),
        ),
        (
            "default profile + defaultAction allow",
            Some(json!({"profile": "default", "defaultAction": "allow"})),
        ),
        (
            "default profile + trap default",
            Some(json!({"profile": "default", "defaultAction": "trap"})),
        ),
    ]
}

#[test]
fn seccomp_int80_is_killed_in_every_mode() {
    let fx = Fixture::new();
    // Control: the i386 entry works on this kernel without the helper.
    Spawn::probe(&["int80"]).run().assert_allowed();
    for (mode, sc) in all_modes() {
        let pol = match sc {
            Some(sc) => with(fx.base_policy(), "syscalls", sc),
            None => fx.base_policy(),
        };
        let p = fx.policy(&pol);
        let r = Spawn::sandboxed(&p, &["int80"]).run();
        assert_eq!(
            r.signal,
            Some(libc::SIGSYS),
            "int 0x80 not killed under {mode}:\n{r}"
        );
    }
}

#[test]
fn seccomp_x32_syscall_numbers_are_killed_in_every_mode() {
    let fx = Fixture::new();
    // Control: without a filter this kernel answers ENOSYS (x32 not compiled
    // in) — an errno, not a signal, so the SIGSYS below is the filter's.
    let direct = Spawn::probe(&["x32"]).run();
    assert!(
        direct.signal.is_none()
            && (direct.code == Some(0) || direct.line().starts_with("DENIED ENOSYS ")),
        "unexpected direct x32 result:\n{direct}"
    );
    for (mode, sc) in all_modes() {
        let pol = match sc {
            Some(sc) => with(fx.base_policy(), "syscalls", sc),
            None => fx.base_policy(),
        };
        let p = fx.policy(&pol);
        let r = Spawn::sandboxed(&p, &["x32"]).run();
        assert_eq!(
            r.signal,
            Some(libc::SIGSYS),
            "x32 getpid not killed under {mode}:\n{r}"
        );
    }
}

/// What the static probe needs to start, run `raw-syscall` and exit
/// (measured with strace), plus what the helper needs to exec it.
const PROBE_RUNTIME: &[&str] = &[
    "execve",
    "arch_prctl",
    "set_tid_address",
    "brk",
    "mmap",
    "munmap",
    "mprotect",
    "poll",
    "rt_sigaction",
    "rt_sigprocmask",
    "sigaltstack",
    "write",
    "exit_group",
    "exit",
];

#[test]
fn seccomp_allowlist_default_deny_kills_unlisted() {
    let fx = Fixture::new();
    // SafeClaw semantics: no profile, `defaultDeny: true` makes every
    // unlisted syscall kill_process.
    let allow: Vec<&str> = PROBE_RUNTIME.to_vec();
    run_getppid(&fx, json!({"allow": allow, "defaultDeny": true})).assert_signal(libc::SIGSYS);
    // Control: the same allowlist plus getppid.
    let mut allow_more = allow.clone();
    allow_more.push("getppid");
    run_getppid(&fx, json!({"allow": allow_more, "defaultDeny": true})).assert_allowed();
}

#[test]
fn seccomp_allowlist_without_default_deny_answers_eperm() {
    let fx = Fixture::new();
    // `allow` non-empty, no defaultDeny: default action errno:EPERM.
    let allow: Vec<&str> = PROBE_RUNTIME.to_vec();
    run_getppid(&fx, json!({"allow": allow})).assert_denied("EPERM");
    let mut allow_more = allow.clone();
    allow_more.push("getppid");
    run_getppid(&fx, json!({"allow": allow_more})).assert_allowed();
}

// --- The built-in default profile (no `syscalls` section) -------------------

/// Attack policy: default profile; /proc read, /dev readwrite (for /dev/ptmx).
fn default_profile(fx: &Fixture) -> std::path::PathBuf {
    fx.policy(&fx.base_policy_proc_dev())
}

/// Control policy: the same, but a seccomp filter that allows everything.
fn no_seccomp(fx: &Fixture) -> std::path::PathBuf {
    fx.policy(&with(
        fx.base_policy_proc_dev(),
        "syscalls",
        permissive_syscalls(),
    ))
}

/// `args` gets EPERM from the default profile, and `reached` (the kernel's
/// own answer) with the filter allowing everything: only the filter can have
/// refused it.
fn filtered_not_kernel(fx: &Fixture, args: &[&str], reached: &str) {
    Spawn::sandboxed(&default_profile(fx), args)
        .run()
        .assert_denied("EPERM");
    Spawn::sandboxed(&no_seccomp(fx), args)
        .run()
        .assert_denied(reached);
}

fn default_profile_denies(probe: &[&str], errno: &str) {
    let fx = Fixture::new();
    Spawn::sandboxed(&default_profile(&fx), probe)
        .run()
        .assert_denied(errno);
    Spawn::sandboxed(&no_seccomp(&fx), probe)
        .run()
        .assert_allowed();
}

#[test]
fn default_profile_denies_unshare_newuser() {
    default_profile_denies(&["unshare-user"], "EPERM");
}

#[test]
fn default_profile_denies_unshare_newns() {
    let fx = Fixture::new();
    Spawn::sandboxed(&default_profile(&fx), &["unshare-mount"])
        .run()
        .assert_denied("EPERM");
    // Control: root (caps kept) can, directly.
    if is_root() {
        Spawn::probe(&["unshare-mount"]).run().assert_allowed();
    }
}

#[test]
fn default_profile_denies_clone_newuser() {
    default_profile_denies(&["clone-newuser"], "EPERM");
}

#[test]
fn default_profile_clone3_is_enosys() {
    default_profile_denies(&["clone3-newuser"], "ENOSYS");
}

#[test]
fn default_profile_denies_mount() {
    let fx = Fixture::new();
    let dir = fx.workspace.join("mnt");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap();
    Spawn::sandboxed(&default_profile(&fx), &["mount", d])
        .run()
        .assert_denied("EPERM");
    // Discriminating control for every uid: mount(2) with a bad `type` pointer
    // fails with EFAULT once it reaches the kernel (before any privilege
    // check); under the default profile it must not reach it.
    let bad_type = ["raw-syscall", NR_MOUNT, "0", "0", "1", "0", "0"];
    filtered_not_kernel(&fx, &bad_type, "EFAULT");
    // And as root, directly, the real mount succeeds (unmounted at once).
    if is_root() {
        Spawn::probe(&["mount", d]).run().assert_allowed();
    }
}

#[test]
fn default_profile_denies_new_mount_api() {
    let fx = Fixture::new();
    for probe in ["fsopen", "open-tree", "move-mount", "pivot-root"] {
        Spawn::sandboxed(&default_profile(&fx), &[probe])
            .run()
            .assert_denied("EPERM");
        if is_root() {
            Spawn::probe(&[probe]).run().assert_allowed();
        }
    }
}

#[test]
fn default_profile_denies_ptrace() {
    default_profile_denies(&["ptrace", "child"], "EPERM");
}

#[test]
fn default_profile_denies_process_vm_readv() {
    default_profile_denies(&["process-vm-readv", "child"], "EPERM");
}

#[test]
fn default_profile_denies_io_uring_setup() {
    default_profile_denies(&["io-uring-setup"], "EPERM");
}

#[test]
fn default_profile_denies_bpf() {
    let fx = Fixture::new();
    Spawn::sandboxed(&default_profile(&fx), &["bpf"])
        .run()
        .assert_denied("EPERM");
    // bpf(BPF_MAP_CREATE, attr = (void *)1, 64) faults (EFAULT) when it
    // reaches the kernel, for every uid.
    let raw = ["raw-syscall", NR_BPF, "0", "1", "64"];
    filtered_not_kernel(&fx, &raw, "EFAULT");
    if is_root() {
        Spawn::probe(&["bpf"]).run().assert_allowed();
    }
}

#[test]
fn default_profile_denies_keyctl() {
    default_profile_denies(&["keyctl"], "EPERM");
}

#[test]
fn default_profile_denies_add_key() {
    default_profile_denies(&["add-key"], "EPERM");
}

#[test]
fn default_profile_denies_tiocsti() {
    default_profile_denies(&["tiocsti"], "EPERM");
}

#[test]
fn default_profile_denies_userfaultfd() {
    default_profile_denies(&["userfaultfd"], "EPERM");
}

#[test]
fn default_profile_denies_perf_event_open() {
    default_profile_denies(&["perf-event-open"], "EPERM");
}

#[test]
fn default_profile_denies_privileged_kernel_calls() {
    // Calls gated by a capability the helper drops anyway; the filter must
    // stop them first. As root the direct run proves the probe reaches the
    // kernel past the privilege check (see docs/probe.md).
    let fx = Fixture::new();
    for probe in [
        "reboot",
        "swapon",
        "acct",
        "syslog",
        "clock-settime",
        "sethostname",
        "chroot",
    ] {
        Spawn::sandboxed(&default_profile(&fx), &[probe])
            .run()
            .assert_denied("EPERM");
        if is_root() {
            Spawn::probe(&[probe]).run().assert_allowed();
        }
    }
}

#[test]
fn default_profile_allows_ordinary_process_work() {
    // The default profile must not break what every program does: fork,
    // signals to itself, pipes — the fork bomb probe forks 20 children.
    let fx = Fixture::new();
    Spawn::sandboxed(&default_profile(&fx), &["fork-bomb", "20"])
        .run()
        .assert_allowed();
    Spawn::sandboxed(&default_profile(&fx), &["mem-bomb", "16"])
        .run()
        .assert_allowed();
}

#[test]
fn default_profile_denies_tioclinux() {
    default_profile_denies(&["tioclinux"], "EPERM");
}

#[test]
fn default_profile_denies_personality_addr_no_randomize() {
    default_profile_denies(&["personality"], "EPERM");
}

#[test]
fn default_profile_tiocsti_rule_ignores_high_bits() {
    // ioctl(0 = /dev/null, TIOCSTI [+ high bits], NULL): reaching the kernel
    // gives ENOTTY; the rule compares the low 32 bits, so setting bit 32 (the
    // kernel ignores it: `unsigned int cmd`) must not slip past it.
    let fx = Fixture::new();
    for req in ["0x5412", "0x100005412", "0xffffffff00005412"] {
        filtered_not_kernel(&fx, &["raw-syscall", "16", "0", req, "0"], "ENOTTY");
    }
}

/// TIOCEXCL on the caller's terminal would lock it against every other
/// open after the command ends. On /dev/null the kernel answers ENOTTY, so
/// EPERM can only come from the filter.
#[test]
fn default_profile_denies_tiocexcl() {
    let fx = Fixture::new();
    // And TCXONC (tcflow) and TIOCSETD, which leave it stopped or unusable.
    for req in ["0x540c", "0x540a", "0x5423"] {
        filtered_not_kernel(&fx, &["raw-syscall", "16", "0", req, "0"], "ENOTTY");
    }
}

#[test]
fn default_profile_denies_af_alg_and_af_vsock_sockets() {
    let fx = Fixture::new();
    // socket(AF_ALG = 38 / AF_VSOCK = 40, SOCK_SEQPACKET/STREAM, 0).
    for (domain, ty) in [("38", "5"), ("40", "1"), ("0x100000026", "5")] {
        let args = ["raw-syscall", "41", domain, ty, "0"];
        Spawn::sandboxed(&default_profile(&fx), &args)
            .run()
            .assert_denied("EPERM");
        // Control: without the filter the kernel answers (a socket, or
        // EAFNOSUPPORT when the family is not built) — never EPERM.
        let c = Spawn::sandboxed(&no_seccomp(&fx), &args).run();
        assert!(
            c.code == Some(0) || c.line().starts_with("DENIED EAFNOSUPPORT "),
            "{c}"
        );
    }
    // And ordinary sockets stay allowed.
    Spawn::sandboxed(&default_profile(&fx), &["raw-syscall", "41", "2", "1", "0"])
        .run()
        .assert_allowed();
}

#[test]
fn default_profile_blocks_before_the_kernel_for_every_uid() {
    // Each call gets an argument the kernel rejects with a distinctive errno
    // *before* any privilege check. So even for an unprivileged user (who
    // would get EPERM from the capability check anyway) "EPERM under the
    // default profile" vs "the distinctive errno without the filter" shows
    // that the filter, not the kernel, stopped it.
    let fx = Fixture::new();
    let cases: &[(&str, &[&str], &str)] = &[
        ("unshare(invalid flag 0x1)", &["272", "1"], "EINVAL"),
        ("setns(-1, 0)", &["308", "-1", "0"], "EBADF"),
        (
            "open_tree(AT_FDCWD, NULL, invalid flag)",
            &["428", "-100", "0", "0x80000000"],
            "EINVAL",
        ),
        (
            "clock_settime(REALTIME, NULL)",
            &["227", "0", "0"],
            "EFAULT",
        ),
        ("chroot(NULL)", &["161", "0"], "EFAULT"),
        (
            "perf_event_open(NULL, ...)",
            &["298", "0", "0", "-1", "-1", "0"],
            "EFAULT",
        ),
        (
            "process_vm_readv(flags = 1)",
            &["310", "0", "0", "0", "0", "0", "1"],
            "EINVAL",
        ),
        ("keyctl(unknown op)", &["250", "9999"], "EOPNOTSUPP"),
    ];
    for (what, args, reached) in cases {
        let mut argv = vec!["raw-syscall"];
        argv.extend_from_slice(args);
        let attack = Spawn::sandboxed(&default_profile(&fx), &argv).run();
        assert!(
            attack.line().starts_with("DENIED EPERM "),
            "{what}: not blocked by the default profile:\n{attack}"
        );
        let control = Spawn::sandboxed(&no_seccomp(&fx), &argv).run();
        assert!(
            control.line().starts_with(&format!("DENIED {reached} ")),
            "{what}: control should reach the kernel ({reached}):\n{control}"
        );
    }
}

/// The default profile refuses changing another process's resource limits:
/// a low RLIMIT_CPU kills a process of the same uid, and Landlock's signal
/// scope does not see prlimit. With the helper alone the victim is outside
/// the sandbox.
#[test]
fn default_profile_refuses_prlimit_on_another_process() {
    let fx = Fixture::new();
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = victim.id().to_string();
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["prlimit-cpu", &pid])
        .run()
        .assert_denied("EPERM");
    // Its own limits stay settable.
    Spawn::sandboxed(&p, &["prlimit-cpu", "0"])
        .run()
        .assert_allowed();
    // Control: without the helper the same call is allowed (same uid).
    Spawn::probe(&["prlimit-cpu", &pid]).run().assert_allowed();
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// The setuid/setgid bits of the file at `path`, if it exists.
fn setid_bits(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| m.mode() & 0o6000)
}

/// The default profile refuses setuid and setgid bits on files, by every
/// route that sets a mode: a file the command leaves in a writable path
/// outlives it on the host, where NO_NEW_PRIVS does not reach, and a
/// setuid copy of a shell there runs as the caller for anyone who can reach
/// it. The control (a filter allowing everything) lands each bit on the
/// host.
#[test]
fn default_profile_refuses_setuid_and_setgid_files() {
    let fx = Fixture::new();
    let hows = [
        "chmod",
        "fchmod",
        "fchmodat",
        "fchmodat2",
        "open",
        "openat",
        "creat",
        "mknod",
        "mknodat",
        "tmpfile",
    ];
    for how in hows {
        for mode in ["4755", "2755", "6755"] {
            let attack = fx.workspace.join(format!("{how}-{mode}"));
            let a = attack.to_str().unwrap();
            Spawn::sandboxed(&default_profile(&fx), &["setid-file", how, a, mode])
                .run()
                .assert_denied("EPERM");
            // On the host: no such file (a creating route), or one without
            // the bits (chmod routes create it 0644 first).
            assert_eq!(setid_bits(&attack).unwrap_or(0), 0, "{how} {mode}");

            let control = fx.workspace.join(format!("{how}-{mode}-control"));
            let c = control.to_str().unwrap();
            Spawn::sandboxed(&no_seccomp(&fx), &["setid-file", how, c, mode])
                .run()
                .assert_allowed();
            // tmpfile's inode carries the bits (the probe checked it) but
            // may not be linkable without /proc; the others are on disk.
            if how != "tmpfile" || control.exists() {
                let want = u32::from_str_radix(mode, 8).unwrap() & 0o6000;
                assert_eq!(setid_bits(&control), Some(want), "control {how} {mode}");
            }
        }
    }
    // openat2 hides its mode in memory BPF cannot read: ENOSYS, so callers
    // fall back to openat.
    let o = fx.workspace.join("openat2");
    let o = o.to_str().unwrap();
    Spawn::sandboxed(&default_profile(&fx), &["setid-file", "openat2", o, "4755"])
        .run()
        .assert_denied("ENOSYS");
    let oc = fx.workspace.join("openat2-control");
    Spawn::sandboxed(
        &no_seccomp(&fx),
        &["setid-file", "openat2", oc.to_str().unwrap(), "4755"],
    )
    .run()
    .assert_allowed();
}

/// Ordinary modes, sticky bit included, still go through every route.
#[test]
fn default_profile_allows_ordinary_modes() {
    let fx = Fixture::new();
    for how in ["chmod", "fchmodat", "openat", "creat", "mknod", "tmpfile"] {
        for mode in ["0755", "1777", "0600"] {
            let p = fx.workspace.join(format!("{how}-{mode}"));
            let out = Spawn::sandboxed(
                &default_profile(&fx),
                &["setid-file", how, p.to_str().unwrap(), mode],
            )
            .run();
            out.assert_allowed();
            let want = format!("has mode {:o}", u32::from_str_radix(mode, 8).unwrap());
            assert!(out.line().contains(&want), "{how} {mode}: {}", out.line());
        }
    }
}

/// The nice value of `pid` (field 19 of /proc/PID/stat).
fn nice_of(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(16).unwrap().parse().unwrap()
}

/// The default profile refuses changing the priority of every process of a
/// uid at once (`setpriority(PRIO_USER)`): with the helper alone that reaches all of the caller's host processes,
/// and a lowered priority cannot be raised back without CAP_SYS_NICE. The
/// victim and the sandboxed command run as a uid of their own (65533), so
/// the control, which does lower the victim's priority, touches nothing
/// else; making them needs root, so the cordon-test pass skips it.
#[test]
fn default_profile_refuses_lowering_every_process_of_a_uid() {
    use std::os::unix::process::CommandExt;
    if !is_root() {
        eprintln!("default_profile_refuses_lowering_every_process_of_a_uid: needs root to run as a uid of its own; covered by the root pass");
        return;
    }
    let fx = Fixture::new();
    let as_own_uid = |mut p: Value| {
        p["user"] = json!({"uid": 65533, "gid": 65533});
        p
    };
    let probe = &["renice-user", "19"];
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .uid(65533)
        .gid(65533)
        .spawn()
        .unwrap();
    let before = nice_of(victim.id());
    Spawn::sandboxed(&fx.policy(&as_own_uid(fx.base_policy())), probe)
        .run()
        .assert_denied("EPERM");
    assert_eq!(nice_of(victim.id()), before, "the victim was reniced");
    // Control: the same call without the filter reaches the victim.
    let open = as_own_uid(with(fx.base_policy(), "syscalls", permissive_syscalls()));
    Spawn::sandboxed(&fx.policy(&open), probe)
        .run()
        .assert_allowed();
    assert_eq!(nice_of(victim.id()), 19, "control");
    victim.kill().unwrap();
    victim.wait().unwrap();
}
