//! The emitted programs are checked three ways over every syscall number and a
//! set of argument cases: the binary tree (`emit::build`), a naive linear
//! layout (`emit::build_linear`), and a direct evaluation of the spec in Rust.

use super::interp::{run, SeccompData};
use super::*;
use crate::policy::{parse, ArgCond, CondOp};

const ARCH: u32 = emit::NATIVE_AUDIT_ARCH;
const I386: u32 = 0x4000_0003;

/// What the spec says, without BPF.
fn model(spec: &Spec, d: &SeccompData) -> u32 {
    if d.arch != ARCH {
        return ret_value(Action::KillProcess);
    }
    let nr = d.nr as u32;
    if cfg!(target_arch = "x86_64") && nr >= 0x4000_0000 {
        return ret_value(Action::KillProcess);
    }
    let Some(e) = spec.entries.get(&nr) else {
        return ret_value(spec.default);
    };
    for (conds, action) in &e.rules {
        if conds.iter().all(|c| holds(c, d.args[c.arg as usize])) {
            return ret_value(*action);
        }
    }
    ret_value(e.base)
}

fn holds(c: &ArgCond, arg: u64) -> bool {
    let (a, v) = if c.width == 32 {
        (arg & 0xffff_ffff, c.value & 0xffff_ffff)
    } else {
        (arg, c.value)
    };
    match c.op {
        CondOp::Eq => a == v,
        CondOp::Ne => a != v,
        CondOp::AnySet => a & v != 0,
        CondOp::MaskedEq { mask } => {
            let m = if c.width == 32 {
                mask & 0xffff_ffff
            } else {
                mask
            };
            a & m == v
        }
    }
}

fn arg_cases() -> Vec<[u64; 6]> {
    let interesting = [
        0u64,
        1,
        2,
        8,
        38,
        40,
        0x5412,
        0x541C,
        0x5412 | (1 << 32),
        0x1_0000_0000,
        0xffff_ffff,
        u64::MAX,
        CLONE_NS_FLAGS,
        libc::CLONE_NEWUSER as u64,
        0x80,
        libc::CLONE_VM as u64 | libc::SIGCHLD as u64,
        0xdead_beef_0000_0010,
        // Modes and open flags of the setuid/setgid rules.
        0o4755,
        0o2755,
        0o755,
        0o101,
        0o20200001,
        0o4000 | (1 << 32),
    ];
    let mut out = Vec::new();
    for (i, a) in interesting.iter().enumerate() {
        let b = interesting[(i * 7 + 3) % interesting.len()];
        out.push([*a, *a, b, *a, b, *a]);
        out.push([b, *a, *a, b, *a, b]);
    }
    out
}

fn check_spec(spec: &Spec) {
    let tree = emit::build(spec).unwrap();
    let linear = emit::build_linear(spec).unwrap();
    super::interp::validate(&tree).unwrap();
    super::interp::validate(&linear).unwrap();
    let mut nrs: Vec<i32> = (0..=600).collect();
    nrs.extend([0x4000_0000 | 39, 0x4000_0000, -1, i32::MAX, 1 << 20]);
    for arch in [ARCH, I386] {
        for nr in &nrs {
            // Argument cases matter only where a rule looks at arguments.
            let has_rules = spec
                .entries
                .get(&(*nr as u32))
                .is_some_and(|e| !e.rules.is_empty());
            let cases = arg_cases();
            for args in cases
                .iter()
                .take(if has_rules { cases.len() } else { 2 })
                .copied()
            {
                let d = SeccompData {
                    nr: *nr,
                    arch,
                    instruction_pointer: 0,
                    args,
                };
                let want = model(spec, &d);
                assert_eq!(
                    run(&tree, &d).unwrap(),
                    want,
                    "tree: nr {nr} arch {arch:#x} args {args:x?}"
                );
                assert_eq!(
                    run(&linear, &d).unwrap(),
                    want,
                    "linear: nr {nr} args {args:x?}"
                );
            }
        }
    }
}

fn spec_of(json: &str) -> Spec {
    resolve(&parse(json.as_bytes()).unwrap().syscalls, Some(9)).unwrap()
}

#[test]
fn default_profile_matches_model() {
    let spec = spec_of("{}");
    check_spec(&spec);
    let prog = emit::build(&spec).unwrap();
    // Compactness is part of the contract (BENCHMARKS.md): a linear chain of
    // ~300 calls would be ~1 500 instructions.
    assert!(
        prog.len() < 256,
        "default program has {} instructions",
        prog.len()
    );
    // The shared-`ret` layout (emit::Shared): one comparison per run boundary.
    assert!(prog.len() <= 150, "{} instructions", prog.len());
    assert!(emit::worst_case_path(&prog) < 30);
    let (allowed, denied) = emit::worst_case_by_verdict(&prog);
    assert!(allowed > 0 && denied > 0);
    assert_eq!(allowed.max(denied), emit::worst_case_path(&prog));
}

#[test]
fn worst_cases_are_counted_per_verdict() {
    use seccompiler::sock_filter;
    let ld = |k| sock_filter {
        code: 0x20,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k, jt, jf| sock_filter {
        code: 0x15,
        jt,
        jf,
        k,
    };
    let ret = |k| sock_filter {
        code: 0x06,
        jt: 0,
        jf: 0,
        k,
    };
    let (allow, log, eperm, kill) = (0x7fff_0000, 0x7ffc_0000, 0x0005_0001, 0x8000_0000);
    // nr 1 allowed after 3 instructions; nr 2 logged after 4; else EPERM
    // after 4; the kill is never reached.
    let prog = [
        ld(0),
        jeq(1, 0, 1),
        ret(allow),
        jeq(2, 0, 1),
        ret(log),
        ret(eperm),
        ret(kill),
    ];
    // The verdicts are as the comment says.
    let on = |nr| {
        run(
            &prog,
            &SeccompData {
                nr,
                arch: 0xc000_003e,
                ..Default::default()
            },
        )
        .unwrap()
    };
    assert_eq!((on(1), on(2), on(3)), (allow, log, eperm));
    assert_eq!(emit::worst_case_by_verdict(&prog), (4, 4));
    assert_eq!(emit::worst_case_by_verdict(&prog[..3]), (3, 0));
    // Refusals found deeper than the only allow.
    let deep = [
        ld(0),
        jeq(1, 0, 1),
        ret(allow),
        ld(0),
        jeq(2, 0, 1),
        ret(eperm),
        ret(kill),
    ];
    assert_eq!(emit::worst_case_by_verdict(&deep), (3, 5));
}

#[test]
fn default_profile_decisions() {
    let spec = spec_of("{}");
    let prog = emit::build(&spec).unwrap();
    let call = |name: &str, args: [u64; 6]| {
        let nr = tables::native_nr(name).unwrap() as i32;
        run(
            &prog,
            &SeccompData {
                nr,
                arch: ARCH,
                instruction_pointer: 0,
                args,
            },
        )
        .unwrap()
    };
    let allow = ret_value(Action::Allow);
    let eperm = ret_value(Action::Errno(libc::EPERM as u16));
    assert_eq!(call("read", [0; 6]), allow);
    assert_eq!(call("ptrace", [0; 6]), eperm);
    assert_eq!(call("mount", [0; 6]), eperm);
    assert_eq!(call("unshare", [0; 6]), eperm);
    assert_eq!(call("bpf", [0; 6]), eperm);
    assert_eq!(call("io_uring_setup", [0; 6]), eperm);
    assert_eq!(
        call("clone3", [0; 6]),
        ret_value(Action::Errno(libc::ENOSYS as u16))
    );
    assert_eq!(call("clone", [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]), allow);
    assert_eq!(
        call("clone", [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0]),
        eperm
    );
    assert_eq!(call("ioctl", [1, 0x5412, 0, 0, 0, 0]), eperm);
    // High bits must not smuggle TIOCSTI past the 32-bit comparison.
    assert_eq!(call("ioctl", [1, 0x5412 | (1 << 32), 0, 0, 0, 0]), eperm);
    assert_eq!(call("ioctl", [1, 0x5401, 0, 0, 0, 0]), allow);
    assert_eq!(call("socket", [38, 5, 0, 0, 0, 0]), eperm);
    assert_eq!(call("socket", [2, 1, 0, 0, 0, 0]), allow);
    assert_eq!(call("personality", [0xffff_ffff, 0, 0, 0, 0, 0]), allow);
    assert_eq!(call("personality", [0x0040000, 0, 0, 0, 0, 0]), eperm);
    // No setuid/setgid bits from a mode argument; other modes pass.
    let enosys = ret_value(Action::Errno(libc::ENOSYS as u16));
    for m in [0o4755u64, 0o2755, 0o6000, 0o4000 | (1 << 32)] {
        assert_eq!(call("chmod", [0, m, 0, 0, 0, 0]), eperm, "{m:o}");
        assert_eq!(call("fchmod", [3, m, 0, 0, 0, 0]), eperm, "{m:o}");
        assert_eq!(call("fchmodat", [3, 0, m, 0, 0, 0]), eperm, "{m:o}");
        assert_eq!(call("fchmodat2", [3, 0, m, 0, 0, 0]), eperm, "{m:o}");
        assert_eq!(call("creat", [0, m, 0, 0, 0, 0]), eperm, "{m:o}");
        assert_eq!(call("mknodat", [3, 0, m | 0o100000, 0, 0, 0]), eperm);
        assert_eq!(call("openat", [3, 0, 0o100 | 1, m, 0, 0]), eperm);
        assert_eq!(call("openat", [3, 0, 0o20200000 | 1, m, 0, 0]), eperm);
        assert_eq!(call("open", [0, 0o101 | (1 << 40), m, 0, 0, 0]), eperm);
        // Without O_CREAT or O_TMPFILE the mode is ignored by the kernel.
        assert_eq!(call("openat", [3, 0, 0, m, 0, 0]), allow);
    }
    for m in [0o755u64, 0o1777, 0o644] {
        assert_eq!(call("chmod", [0, m, 0, 0, 0, 0]), allow);
        assert_eq!(call("fchmodat", [3, 0, m, 0, 0, 0]), allow);
        assert_eq!(call("openat", [3, 0, 0o100 | 1, m, 0, 0]), allow);
        assert_eq!(call("creat", [0, m, 0, 0, 0, 0]), allow);
    }
    assert_eq!(call("openat2", [3, 0, 0, 24, 0, 0]), enosys);
    // Every process of a uid at once: refused; one process or group: allowed.
    assert_eq!(call("setpriority", [2, 0, 19, 0, 0, 0]), eperm);
    assert_eq!(call("setpriority", [2 | (1 << 32), 0, 19, 0, 0, 0]), eperm);
    assert_eq!(call("setpriority", [0, 0, 19, 0, 0, 0]), allow);
    assert_eq!(call("setpriority", [1, 0, 19, 0, 0, 0]), allow);
}

#[test]
fn safeclaw_allowlist_kills_and_keeps_exec_path() {
    let spec = spec_of(r#"{"syscalls":{"allow":["read","exit"],"defaultDeny":true}}"#);
    check_spec(&spec);
    let prog = emit::build(&spec).unwrap();
    let kill = ret_value(Action::KillProcess);
    let allow = ret_value(Action::Allow);
    let call = |name: &str, a0: u64| {
        let nr = tables::native_nr(name).unwrap() as i32;
        run(
            &prog,
            &SeccompData {
                nr,
                arch: ARCH,
                instruction_pointer: 0,
                args: [a0, 0, 0, 0, 0, 0],
            },
        )
        .unwrap()
    };
    assert_eq!(call("getpid", 0), kill);
    assert_eq!(call("execve", 0), allow);
    assert_eq!(call("exit_group", 0), allow);
    assert_eq!(call("write", 2), allow);
    assert_eq!(call("write", 9), allow, "the report fd stays writable");
    assert_eq!(call("write", 1), kill);
}

#[test]
fn deny_list_filter_still_kills_foreign_arch_and_x32() {
    let spec = spec_of(r#"{"syscalls":{"deny":["ptrace","@mount"]}}"#);
    assert_eq!(spec.default, Action::Allow);
    check_spec(&spec);
    let prog = emit::build(&spec).unwrap();
    let d = |nr: i32, arch: u32| SeccompData {
        nr,
        arch,
        instruction_pointer: 0,
        args: [0; 6],
    };
    assert_eq!(
        run(&prog, &d(20, I386)).unwrap(),
        ret_value(Action::KillProcess)
    );
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            run(&prog, &d(0x4000_0027, ARCH)).unwrap(),
            ret_value(Action::KillProcess)
        );
    }
}

#[test]
fn all_condition_ops_and_widths() {
    let spec = spec_of(
        r#"{"syscalls":{"profile":"default","denyAction":"trap","deny":["chroot"],
            "rules":[
              {"syscall":"getpid","action":"errno:EACCES","when":[{"arg":0,"op":"ne","value":8}]},
              {"syscall":"getppid","action":"trap","when":[{"arg":2,"op":"maskedEq","mask":18446744069414584335,"value":4294967297}]},
              {"syscall":"getuid","action":"log","when":[{"arg":1,"op":"anySet","value":18446744069414584320}]},
              {"syscall":"getgid","action":"kill_thread","when":[{"arg":3,"op":"eq","value":2,"width":32},{"arg":0,"op":"anySet","value":1}]},
              {"syscall":"getegid","action":"errno:ENOSYS","when":[{"arg":5,"op":"ne","value":1,"width":32}]}
            ]}}"#,
    );
    check_spec(&spec);
}

#[test]
fn deny_wins_over_allow_and_rules() {
    let spec = spec_of(
        r#"{"syscalls":{"profile":"default","deny":["personality","read"],"allow":["read"]}}"#,
    );
    let nr = tables::native_nr("personality").unwrap();
    // Denied with the default's action: no entry at all, so no allow rule.
    assert!(!spec.entries.contains_key(&nr));
    assert_eq!(spec.default, Action::Errno(1));
    let e = resolve(
        &parse(br#"{"syscalls":{"deny":["execve"]}}"#)
            .unwrap()
            .syscalls,
        None,
    )
    .unwrap_err();
    assert_eq!(e.exit_code(), 70);
}

#[test]
fn long_programs_use_unconditional_hops() {
    // Alternate actions on every number: hundreds of runs, so left subtrees
    // exceed a conditional jump's 255-instruction reach.
    let mut entries = BTreeMap::new();
    for nr in 0..450u32 {
        let base = if nr % 2 == 0 {
            Action::Allow
        } else {
            Action::Errno((nr % 200 + 1) as u16)
        };
        entries.insert(
            nr,
            Entry {
                base,
                rules: vec![],
            },
        );
    }
    let spec = Spec {
        default: Action::Trap,
        entries,
    };
    let prog = emit::build(&spec).unwrap();
    assert!(prog.len() > 512);
    check_spec(&spec);
}

#[test]
fn shared_rets_up_to_the_jump_limit_then_the_plain_tree() {
    // Alternating actions on 0..n: n+1 runs, so the shared layout needs n
    // comparisons and 3 rets. At 256 it is the last size every jump reaches.
    let spec = |n: u32| {
        let mut entries = BTreeMap::new();
        for nr in 0..n {
            let base = if nr % 2 == 0 {
                Action::Allow
            } else {
                Action::Errno(1)
            };
            entries.insert(
                nr,
                Entry {
                    base,
                    rules: vec![],
                },
            );
        }
        Spec {
            default: Action::KillProcess,
            entries,
        }
    };
    let pre = if cfg!(target_arch = "x86_64") { 6 } else { 4 };
    // n = 1: no Errno run, two rets.
    assert_eq!(emit::build(&spec(1)).unwrap().len(), pre + 1 + 2);
    check_spec(&spec(1));
    for n in [2, 3, 252, 253] {
        let prog = emit::build(&spec(n)).unwrap();
        assert_eq!(prog.len(), pre + n as usize + 3, "n {n}: shared layout");
        check_spec(&spec(n));
    }
    for n in [254, 255] {
        let prog = emit::build(&spec(n)).unwrap();
        assert!(prog.len() > pre + 2 * n as usize, "n {n}: plain tree");
        check_spec(&spec(n));
    }
}

/// The generated `prebuilt.rs` for the program `compile` emits for a policy
/// without a `syscalls` section.
#[cfg(target_arch = "x86_64")]
fn prebuilt_source() -> String {
    let c = compile(&Syscalls::default(), None).unwrap();
    let mut rows = String::new();
    for chunk in c.program.chunks(4) {
        rows.push_str("   ");
        for f in chunk {
            rows.push_str(&format!(
                " ({:#x}, {}, {}, {:#x}),",
                f.code, f.jt, f.jf, f.k
            ));
        }
        rows.push('\n');
    }
    format!(
        r#"//! The built-in default profile's seccomp program for x86_64, exactly as
//! `compile` emits it for a policy without a `syscalls` section (the program
//! does not depend on the report fd: `write` is allowed outright). Generated,
//! do not edit: `cargo test -p cordon-helper --lib regenerate_prebuilt --
//! --ignored` rewrites it, and `prebuilt_default_matches_the_emitter` fails
//! while it is stale.

use super::Filter;
use crate::policy::Action;
use seccompiler::sock_filter;

pub const DEFAULT: Action = Action::{default:?};
pub const RULES: usize = {rules};
#[rustfmt::skip]
pub const PROGRAM: [(u16, u8, u8, u32); {len}] = [
{rows}];

pub fn filter() -> Filter {{
    Filter {{
        program: PROGRAM
            .iter()
            .map(|&(code, jt, jf, k)| sock_filter {{ code, jt, jf, k }})
            .collect(),
        default: DEFAULT,
        rules: RULES,
    }}
}}
"#,
        default = c.spec.default,
        rules = c.rule_count(),
        len = c.program.len(),
    )
}

/// Rewrites prebuilt.rs from the emitter (run after changing the default
/// profile, the syscall tables or the emitter).
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore]
fn regenerate_prebuilt() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/seccomp/prebuilt.rs");
    std::fs::write(p, prebuilt_source()).unwrap();
}

/// The prebuilt default program is what the emitter builds today, for any
/// report fd, and runs use it only for a policy without a `syscalls` section.
#[cfg(target_arch = "x86_64")]
#[test]
fn prebuilt_default_matches_the_emitter() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/seccomp/prebuilt.rs");
    assert_eq!(
        std::fs::read_to_string(p).unwrap(),
        prebuilt_source(),
        "prebuilt.rs is stale: run cargo test -p cordon-helper --lib regenerate_prebuilt -- --ignored"
    );
    for fd in [None, Some(3), Some(9)] {
        let c = compile(&Syscalls::default(), fd).unwrap();
        let f = for_run(&Syscalls::default(), fd).unwrap();
        assert_eq!(f.program, c.program, "report fd {fd:?}");
        assert_eq!(f.default, c.spec.default);
        assert_eq!(f.rules, c.rule_count());
    }
    // A policy without the section is exactly Syscalls::default().
    assert_eq!(parse(b"{}").unwrap().syscalls, Syscalls::default());
    // Any syscalls section is compiled, even one naming the default profile.
    for doc in [
        r#"{"syscalls":{"profile":"default","deny":["chmod"]}}"#,
        r#"{"syscalls":{"defaultDeny":true,"allow":["read","write","exit_group","execve"]}}"#,
    ] {
        let s = parse(doc.as_bytes()).unwrap().syscalls;
        assert_eq!(
            for_run(&s, Some(3)).unwrap().program,
            compile(&s, Some(3)).unwrap().program,
            "{doc}"
        );
        assert_ne!(
            for_run(&s, Some(3)).unwrap().program,
            prebuilt::filter().program,
            "{doc}"
        );
    }
}

/// Argument blocks in the shared layout: identical blocks emitted once, a
/// rule without conditions (the block returns at once), and blocks that
/// push the program past the jump limit (then the plain tree). Every
/// layout is checked against the model by the interpreter.
#[test]
fn shared_blocks_dedupe_and_fall_back_past_the_jump_limit() {
    use crate::policy::{ArgCond, CondOp};
    let rule = |arg: u8, value: u64| {
        vec![ArgCond {
            arg,
            op: CondOp::AnySet,
            value,
            width: 32,
        }]
    };
    let spec = |n: u32, distinct: bool| {
        let mut entries = BTreeMap::new();
        for nr in 0..n {
            let value = if distinct { u64::from(nr) + 1 } else { 0o6000 };
            entries.insert(
                2 * nr,
                Entry {
                    base: Action::Allow,
                    rules: vec![(rule(1, value), Action::Errno(1))],
                },
            );
        }
        // A rule without conditions: its block returns at once.
        entries.insert(
            2 * n + 1,
            Entry {
                base: Action::Allow,
                rules: vec![(vec![], Action::Errno(13))],
            },
        );
        Spec {
            default: Action::KillProcess,
            entries,
        }
    };
    let pre = if cfg!(target_arch = "x86_64") { 6 } else { 4 };
    // 20 identical blocks: one copy (2 instructions) after the tree.
    let same = emit::build(&spec(20, true)).unwrap().len();
    let dedup = emit::build(&spec(20, false)).unwrap().len();
    assert_eq!(same - dedup, 19 * 2, "identical blocks emitted once");
    check_spec(&spec(20, false));
    check_spec(&spec(20, true));
    // Distinct blocks: 2n of them plus comparisons fit up to the limit...
    let fits = emit::build(&spec(60, true)).unwrap();
    assert!(fits.len() - pre <= 256, "{}", fits.len());
    check_spec(&spec(60, true));
    // ...and past it the plain tree (a `ret` per rule) takes over.
    let over = emit::build(&spec(100, true)).unwrap();
    assert!(over.len() - pre > 256);
    check_spec(&spec(100, true));
}

/// The init's filter (`--init`): its six calls pass, `write` only to the
/// report fd, anything else kills — execve, a fork — and so do foreign
/// architectures.
#[test]
fn init_filter_allows_only_waiting_and_exiting() {
    let prog = init_filter(Some(3)).unwrap();
    let d = |name: &str, arch: u32, a0: u64| SeccompData {
        nr: tables::native_nr(name).unwrap() as i32,
        arch,
        instruction_pointer: 0,
        args: [a0, 0, 0, 0, 0, 0],
    };
    let allow = ret_value(Action::Allow);
    let kill = ret_value(Action::KillProcess);
    for name in INIT_CALLS {
        assert_eq!(run(&prog, &d(name, ARCH, 0)).unwrap(), allow, "{name}");
        assert_eq!(
            run(&prog, &d(name, I386, 0)).unwrap(),
            kill,
            "{name} (i386)"
        );
    }
    // write: to the report fd only (compared as an int, as the kernel does).
    for (fd, want) in [
        (3, allow),
        (3 | 1 << 32, allow),
        (0, kill),
        (1, kill),
        (2, kill),
        (4, kill),
    ] {
        assert_eq!(
            run(&prog, &d("write", ARCH, fd)).unwrap(),
            want,
            "write to {fd:#x}"
        );
    }
    let write = tables::native_nr("write");
    let mut denied = 0;
    for nr in (0..512u32).filter(|nr| Some(*nr) != write) {
        let known = INIT_CALLS.iter().any(|n| tables::native_nr(n) == Some(nr));
        let data = SeccompData {
            nr: nr as i32,
            arch: ARCH,
            instruction_pointer: 0,
            args: [0; 6],
        };
        let want = if known { allow } else { kill };
        assert_eq!(run(&prog, &data).unwrap(), want, "nr {nr}");
        denied += usize::from(!known);
    }
    assert!(denied > 400);
    for name in ["execve", "clone", "kill", "ptrace", "openat"] {
        assert_eq!(run(&prog, &d(name, ARCH, 0)).unwrap(), kill, "{name}");
    }
    // Without a report fd, no write at all.
    let bare = init_filter(None).unwrap();
    assert_eq!(run(&bare, &d("write", ARCH, 3)).unwrap(), kill);
}
