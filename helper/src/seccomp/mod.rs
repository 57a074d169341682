//! Seccomp: resolve the policy's `syscalls` section into a per-number spec for
//! the native architecture, emit it as a compact BPF program (emit.rs), and
//! install it with seccompiler.

pub mod emit;
pub mod groups;
pub mod interp;
#[cfg(target_arch = "x86_64")]
pub mod prebuilt;
pub mod tables;

use crate::error::{Error, Result};
use crate::policy::{Action, ArgCond, CondOp, Profile, Syscalls};
use seccompiler::BpfProgram;
use std::collections::BTreeMap;

/// What one syscall number does: its argument rules, tried in order, then its
/// base action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub base: Action,
    pub rules: Vec<(Vec<ArgCond>, Action)>,
}

/// The resolved filter for the native architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub default: Action,
    pub entries: BTreeMap<u32, Entry>,
}

const EPERM: Action = Action::Errno(libc::EPERM as u16);

/// Namespace-creating clone flags: refused by the default profile, so clone
/// (which libc uses for fork and threads) stays allowed without them.
pub const CLONE_NS_FLAGS: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64
    | 0x80; // CLONE_NEWTIME

const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
/// Exclusive mode: nobody else may open the terminal until it is undone,
/// which outlives the command (a password prompt on the caller's terminal
/// then fails with EBUSY).
const TIOCEXCL: u64 = 0x540C;
/// Stop (or start) the terminal's output: stopped, the caller's shell hangs
/// writing its prompt after the command is gone.
const TCXONC: u64 = 0x540A;
/// Replace the line discipline (also autoloads kernel modules): with N_NULL
/// the caller's terminal cannot even be reset.
const TIOCSETD: u64 = 0x5423;
const AF_ALG: u64 = 38;
const PRIO_USER: u64 = 2;
/// S_ISUID | S_ISGID.
const SETID_BITS: u64 = 0o6000;
/// O_CREAT | __O_TMPFILE (the same on x86_64 and aarch64): the flags with
/// which open and openat create a file and apply their mode argument.
const CREATING: u64 = 0o100 | 0o2000_0000;
const AF_VSOCK: u64 = 40;

fn eq32(arg: u8, value: u64) -> Vec<ArgCond> {
    vec![ArgCond {
        arg,
        op: CondOp::Eq,
        value,
        width: 32,
    }]
}

/// The default action for syscalls the policy does not list.
pub fn default_action(s: &Syscalls) -> Action {
    if let Some(a) = s.default_action {
        return a;
    }
    if s.default_deny {
        return Action::KillProcess;
    }
    if s.effective_profile().is_some() || !s.allow.is_empty() {
        return EPERM;
    }
    Action::Allow
}

/// Entries indexed by syscall number while resolving: O(1) updates for the
/// ~300 names of the default profile (a map here cost more than the rest).
struct Dense {
    default: Action,
    slots: Vec<Option<Entry>>,
}

impl Dense {
    fn new(default: Action) -> Self {
        Dense {
            default,
            slots: vec![None; tables::NATIVE_MAX_NR as usize + 1],
        }
    }

    fn entry(&mut self, nr: u32) -> &mut Entry {
        let default = self.default;
        self.slots[nr as usize].get_or_insert_with(|| Entry {
            base: default,
            rules: Vec::new(),
        })
    }

    fn set_base(&mut self, name: &str, action: Action) {
        if let Some(nr) = tables::native_nr(name) {
            self.entry(nr).base = action;
        }
    }

    fn add_rule(&mut self, name: &str, when: Vec<ArgCond>, action: Action) {
        if let Some(nr) = tables::native_nr(name) {
            self.entry(nr).rules.push((when, action));
        }
    }
}

/// The built-in default profile's argument rules.
fn default_rules(d: &mut Dense) {
    // No namespace creation through clone; clone3 hides its flags in memory
    // that BPF cannot read, so it reports ENOSYS and libc falls back to clone.
    d.add_rule(
        "clone",
        vec![ArgCond {
            arg: 0,
            op: CondOp::AnySet,
            value: CLONE_NS_FLAGS,
            width: 64,
        }],
        EPERM,
    );
    d.set_base("clone3", Action::Errno(libc::ENOSYS as u16));
    // Injecting input into, or reconfiguring, the controlling terminal.
    // The request is an unsigned int: compare 32 bits so high bits cannot
    // smuggle it past the rule.
    for req in [TIOCSTI, TIOCLINUX, TIOCEXCL, TCXONC, TIOCSETD] {
        d.add_rule("ioctl", eq32(1, req), EPERM);
    }
    // Kernel crypto and VM sockets: large attack surface, no use here.
    for dom in [AF_ALG, AF_VSOCK] {
        d.add_rule("socket", eq32(0, dom), EPERM);
    }
    // personality: only query and the plain Linux personalities; no
    // ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC.
    for p in [0u64, 8, 0xffff_ffff] {
        d.add_rule("personality", eq32(0, p), Action::Allow);
    }
    d.set_base("personality", EPERM);
    // Another process's resource limits: a low RLIMIT_CPU set on a process
    // of the same uid kills it, and Landlock's signal scope does not see
    // prlimit (with the helper alone, the other process may be outside the
    // sandbox). Its own limits (pid 0) may be set, anyone's read.
    d.add_rule("prlimit64", eq32(0, 0), Action::Allow);
    d.add_rule(
        "prlimit64",
        vec![ArgCond {
            arg: 2,
            op: CondOp::Eq,
            value: 0,
            width: 64,
        }],
        Action::Allow,
    );
    d.set_base("prlimit64", EPERM);
    // Every process of a uid at once: `setpriority(PRIO_USER, …)` reaches
    // each one the caller's pid namespace sees, so with the helper alone all
    // of the caller's host processes, and a lowered priority cannot be
    // raised back without CAP_SYS_NICE. One process (or group) at a time
    // stays allowed. (`ioprio_set(IOPRIO_WHO_USER, …)` the kernel refuses
    // itself here without CAP_SYS_NICE.)
    d.add_rule("setpriority", eq32(0, PRIO_USER), EPERM);
    setid_rules(d);
}

fn any_set32(arg: u8, value: u64) -> ArgCond {
    ArgCond {
        arg,
        op: CondOp::AnySet,
        value,
        width: 32,
    }
}

/// No new setuid or setgid files. Whatever the command writes outlives it on
/// the host, where the sandbox's NO_NEW_PRIVS does not reach: a setuid copy
/// of a shell in the workspace runs as its owner (the caller; root when the
/// helper alone ran a command as root) for anyone who can reach it. New bits come only from a mode
/// argument: chmod's, or the creating calls'. (Bits a file already has can
/// survive a shared-mmap write or an ACL rewrite: docs/seccomp.md, Limits.)
/// `mode_t` and the open flags are 32-bit, so only the low words are
/// compared.
fn setid_rules(d: &mut Dense) {
    for (name, mode_arg) in [
        ("chmod", 1),
        ("fchmod", 1),
        ("fchmodat", 2),
        ("fchmodat2", 2),
        ("creat", 1),
        ("mknod", 1),
        ("mknodat", 2),
    ] {
        d.add_rule(name, vec![any_set32(mode_arg, SETID_BITS)], EPERM);
    }
    // open and openat read the mode only when they create a file.
    for (name, flags_arg) in [("open", 1), ("openat", 2)] {
        d.add_rule(
            name,
            vec![
                any_set32(flags_arg, CREATING),
                any_set32(flags_arg + 1, SETID_BITS),
            ],
            EPERM,
        );
    }
    // openat2 keeps its flags and mode in memory BPF cannot read; like
    // clone3 it reports ENOSYS, and its callers fall back to openat.
    d.set_base("openat2", Action::Errno(libc::ENOSYS as u16));
}

/// Resolve the policy into a spec. `report_fd` is kept writable for the
/// report even when `write` is otherwise denied.
pub fn resolve(s: &Syscalls, report_fd: Option<i32>) -> Result<Spec> {
    let default = default_action(s);
    let mut d = Dense::new(default);
    if s.effective_profile() == Some(Profile::Default) {
        for g in groups::DEFAULT_ALLOW {
            for name in groups::group_calls(g) {
                d.set_base(name, Action::Allow);
            }
        }
        default_rules(&mut d);
    }
    for name in groups::expand(&s.allow) {
        d.set_base(name, Action::Allow);
    }
    // Policy rules go before the profile's so they can refine them.
    for r in s.rules.iter().rev() {
        if let Some(nr) = tables::native_nr(&r.syscall) {
            d.entry(nr).rules.insert(0, (r.when.clone(), r.action));
        }
    }
    let deny_action = s.deny_action.unwrap_or(EPERM);
    for name in groups::expand(&s.deny) {
        if name == "execve" || name == "exit_group" {
            return Err(Error::Policy(format!(
                "syscalls.deny: {name} cannot be denied: the helper needs it to start the command (deny it in the command's own sandbox instead)"
            )));
        }
        if let Some(nr) = tables::native_nr(name) {
            // Deny wins over allow and over any rule that would allow.
            d.slots[nr as usize] = Some(Entry {
                base: deny_action,
                rules: Vec::new(),
            });
        }
    }
    // What the helper itself needs after the filter is installed: execve to
    // start the command, exit_group to report an exec failure, write to fd 2
    // (the failure message) and the report fd.
    d.set_base("execve", Action::Allow);
    d.set_base("exit_group", Action::Allow);
    if let Some(nr) = tables::native_nr("write") {
        let e = d.entry(nr);
        if e.base != Action::Allow {
            let mut fds = vec![2];
            fds.extend(report_fd);
            for fd in fds.into_iter().rev() {
                e.rules.insert(0, (eq32(0, fd as u64), Action::Allow));
            }
        }
    }
    // Entries identical to the default add nothing but instructions.
    let adds = |e: &Entry| !(e.rules.is_empty() && e.base == default);
    // Collected into a Vec of the exact size first: BTreeMap::from_iter
    // gathers its input in a Vec anyway, and one grown by doubling left
    // ~28 KiB of stranded copies in the helper's bump arena (pages it must
    // fault in).
    let n = d.slots.iter().flatten().filter(|e| adds(e)).count();
    let mut sorted = Vec::with_capacity(n);
    sorted.extend(
        d.slots
            .into_iter()
            .enumerate()
            .filter_map(|(nr, e)| e.map(|e| (nr as u32, e)))
            .filter(|(_, e)| adds(e)),
    );
    Ok(Spec {
        default,
        entries: sorted.into_iter().collect(),
    })
}

/// A compiled filter, ready to install.
pub struct Compiled {
    pub spec: Spec,
    pub program: BpfProgram,
}

impl Compiled {
    pub fn rule_count(&self) -> usize {
        self.spec.entries.values().map(|e| 1 + e.rules.len()).sum()
    }
}

pub fn compile(s: &Syscalls, report_fd: Option<i32>) -> Result<Compiled> {
    let spec = resolve(s, report_fd)?;
    let program = emit::build(&spec).map_err(Error::Seccomp)?;
    Ok(Compiled { spec, program })
}

/// What a run installs: the program, and what the report says of it.
pub struct Filter {
    pub program: BpfProgram,
    pub default: Action,
    pub rules: usize,
}

/// The filter for a run. A policy without a `syscalls` section gets the
/// built-in default profile, whose program is the same on every run: on
/// x86_64 it is taken prebuilt (`prebuilt.rs`, checked against the emitter
/// by a unit test) instead of resolving ~300 names and emitting the tree each
/// time (≈ 40–80 µs and ≈ 50 KiB of memory in a fresh sandbox). Anything
/// else is compiled.
pub fn for_run(s: &Syscalls, report_fd: Option<i32>) -> Result<Filter> {
    #[cfg(target_arch = "x86_64")]
    if *s == Syscalls::default() {
        return Ok(prebuilt::filter());
    }
    let c = compile(s, report_fd)?;
    Ok(Filter {
        default: c.spec.default,
        rules: c.rule_count(),
        program: c.program,
    })
}

/// What the sandbox's init (`--init`) may still do once the command runs:
/// wait for it, close, exit, and `write` to the report fd only (the
/// command's status, see init.rs); anything else kills it, and with it the
/// whole pid namespace. It never execs: execve is not in the list.
pub const INIT_CALLS: [&str; 6] = [
    "wait4",
    "close",
    "exit",
    "exit_group",
    "rt_sigreturn",
    "restart_syscall",
];

/// The init's own filter (see `INIT_CALLS`); the command gets the policy's.
pub fn init_filter(report_fd: Option<i32>) -> Result<BpfProgram> {
    let mut entries = BTreeMap::new();
    if let (Some(fd), Some(nr)) = (report_fd, tables::native_nr("write")) {
        entries.insert(
            nr,
            Entry {
                base: Action::KillProcess,
                rules: vec![(eq32(0, fd as u64), Action::Allow)],
            },
        );
    }
    for name in INIT_CALLS {
        let nr = tables::native_nr(name)
            .ok_or_else(|| Error::Seccomp(format!("init filter: no syscall {name} here")))?;
        entries.insert(
            nr,
            Entry {
                base: Action::Allow,
                rules: Vec::new(),
            },
        );
    }
    emit::build(&Spec {
        default: Action::KillProcess,
        entries,
    })
    .map_err(Error::Seccomp)
}

/// Install the filter on the calling thread (the helper is single-threaded).
pub fn install(program: &BpfProgram) -> Result<()> {
    seccompiler::apply_filter(program).map_err(install_failed)
}

/// The error for a filter the kernel refused, here or in the command's
/// process (init.rs), worded the same.
pub fn install_failed(e: impl std::fmt::Display) -> Error {
    Error::Seccomp(format!("installing the seccomp filter failed: {e}"))
}

/// The return value the kernel sees for an action.
pub fn ret_value(a: Action) -> u32 {
    match a {
        Action::Allow => 0x7fff_0000,
        Action::KillProcess => 0x8000_0000,
        Action::KillThread => 0,
        Action::Trap => 0x0003_0000,
        Action::Log => 0x7ffc_0000,
        Action::Errno(n) => 0x0005_0000 | u32::from(n),
    }
}

#[cfg(test)]
mod tests;
