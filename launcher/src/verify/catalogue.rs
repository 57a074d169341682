//! The attack catalogue, as data: one row per attack with its severity, the
//! `cordon-probe` arguments (with `{placeholders}` filled from the fixtures)
//! and what the profile is expected to do about it. Pure: no I/O.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    High,
    Medium,
    Low,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Low => "low",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Area {
    Filesystem,
    Privilege,
    Kernel,
    Leak,
    Network,
    Resource,
}

/// A property of a profile that deliberately allows some attacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trait {
    /// `network = "host"`: loopback and the host's interfaces are reachable.
    NetworkHost,
    /// The profile shows the host root read-only (`ro = ["/"]`): host files
    /// outside the hidden paths are readable, and a read-only bind does not stop
    /// `connect()` to a UNIX socket in it.
    HostRootVisible,
    /// `git = "rw"`: a writable path's `.git` is writable (docs/profiles.md).
    GitWritable,
}

/// A resource limit an attack is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Nproc,
    As,
}

impl Limit {
    pub fn key(self) -> &'static str {
        match self {
            Limit::Nproc => "nproc",
            Limit::As => "as",
        }
    }
}

/// What the profile is expected to do, whatever the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Must fail with both layers on.
    Blocked,
    /// Blocked unless the profile has this trait; then success is policy.
    BlockedUnless(Trait),
    /// Blocked by the profile's limit; without one, "unbounded by policy".
    Bounded(Limit),
}

/// How success is judged besides the probe's own verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judge {
    /// The probe's ALLOWED/DENIED line.
    Probe,
    /// ALLOWED only if the host's UDP listener received the datagram.
    UdpReceived,
}

#[derive(Debug, Clone)]
pub struct Attack {
    pub name: &'static str,
    pub area: Area,
    pub severity: Severity,
    /// `cordon-probe` arguments; `{name}` is replaced from the fixture variables.
    pub args: &'static [&'static str],
    pub expect: Expect,
    pub judge: Judge,
    /// One line: what it tries and why it matters.
    pub why: &'static str,
}

const fn a(
    name: &'static str,
    area: Area,
    severity: Severity,
    args: &'static [&'static str],
    expect: Expect,
    why: &'static str,
) -> Attack {
    Attack {
        name,
        area,
        severity,
        args,
        expect,
        judge: Judge::Probe,
        why,
    }
}

use Area::*;
use Expect::*;
use Severity::*;

/// Every attack, in scorecard order.
pub fn catalogue() -> Vec<Attack> {
    let mut v = vec![
        // --- filesystem -------------------------------------------------------------------
        a("read-outside", Filesystem, Critical, &["read", "{secret}", "{secret_marker}"], BlockedUnless(Trait::HostRootVisible),
          "read a secret file outside the workspace"),
        a("write-outside", Filesystem, Critical, &["write", "{outside}/target.txt"], Blocked,
          "append to a host file outside the workspace"),
        a("create-outside", Filesystem, High, &["write", "{outside}/created.txt"], Blocked,
          "create a new file outside the workspace"),
        a("truncate-outside", Filesystem, High, &["truncate", "{outside}/target.txt"], Blocked,
          "truncate a host file outside the workspace"),
        a("rename-outside", Filesystem, High, &["rename", "{outside}/victim.txt", "{scratch}/victim.txt"], Blocked,
          "move a host file out of its directory into a writable one"),
        a("link-outside", Filesystem, High, &["link", "{secret}", "{scratch}/secret-link"], Blocked,
          "hard-link a host secret into a writable directory"),
        a("symlink-to-secret", Filesystem, Critical, &["symlink-read", "{scratch}/secret-symlink", "{secret}", "{secret_marker}"], BlockedUnless(Trait::HostRootVisible),
          "plant a symlink to a secret in the workspace and read through it"),
        a("read-masked", Filesystem, Critical, &["leak", "{hidden}", "{hidden_marker}"], Blocked,
          "read a file hidden with --hide"),
        a("hardlink-masked", Filesystem, High, &["link", "{hidden}", "{scratch}/hidden-link"], Blocked,
          "hard-link a hidden file to a visible name (a second link bypasses a mask)"),
        a("open-by-handle", Filesystem, Critical, &["open-by-handle", "{ro_file}", "{ro_marker}"], Blocked,
          "open_by_handle_at (the \"shocker\" container escape; needs CAP_DAC_READ_SEARCH)"),
        a("mknod", Filesystem, High, &["mknod", "{scratch}/probe-null"], Blocked,
          "create a device node (a device node is raw access to a disk or memory)"),
        a("read-shadow", Filesystem, Critical, &["leak", "/etc/shadow", "root:"], Blocked,
          "read password hashes from /etc/shadow"),
        a("core-pattern", Filesystem, Critical, &["open-write", "/proc/sys/kernel/core_pattern"], Blocked,
          "open /proc/sys/kernel/core_pattern for writing (host-root code execution)"),
        a("sysrq-trigger", Filesystem, High, &["open-write", "/proc/sysrq-trigger"], Blocked,
          "open /proc/sysrq-trigger for writing (reboot/crash the host)"),
        a("write-ro-file", Filesystem, High, &["write", "{ro_file}"], Blocked,
          "append to a --ro file inside the writable workspace"),
        a("git-hook", Filesystem, High, &["write", "{ws_git}/hooks/post-checkout"], BlockedUnless(Trait::GitWritable),
          "plant a hook in the workspace's .git (git runs it on the host, outside the sandbox)"),
        a("ro-file-detach", Filesystem, High, &["ro-detach", "{ro_file}"], Blocked,
          "unshare user+mount namespaces, detach the read-only bind, rewrite the file"),
        // --- privilege -------------------------------------------------------------------
        a("no-new-privs", Privilege, High, &["nnp"], Blocked,
          "NO_NEW_PRIVS off: a setuid binary could raise privilege"),
        a("capabilities", Privilege, Critical, &["caps"], Blocked,
          "any capability in the inheritable, permitted, effective, bounding or ambient set"),
        a("setuid-root", Privilege, Critical, &["setuid0"], Blocked,
          "setresuid(0,0,0)"),
        a("setuid-file", Privilege, High, &["setid-file", "chmod", "{scratch}/setuid-file", "4755"], Blocked,
          "chmod 4755 a file in a writable directory (on the host it runs as its owner, outside NO_NEW_PRIVS)"),
        a("setuid-create", Privilege, High, &["setid-file", "openat", "{scratch}/setuid-created", "6755"], Blocked,
          "create a setuid+setgid file with open(O_CREAT, 06755)"),
        a("unshare-user", Privilege, High, &["unshare-user"], Blocked,
          "a nested user namespace (first step of most kernel escapes)"),
        a("clone-newuser", Privilege, High, &["clone-newuser"], Blocked,
          "a nested user namespace through clone(CLONE_NEWUSER)"),
        a("clone3-newuser", Privilege, High, &["clone3-newuser"], Blocked,
          "a nested user namespace through clone3"),
        a("setns", Privilege, High, &["setns", "/proc/{marker_pid}/ns/mnt"], Blocked,
          "join the mount namespace of a host process"),
        a("mount", Privilege, High, &["mount"], Blocked,
          "mount a tmpfs"),
        a("umount", Privilege, High, &["umount"], Blocked,
          "umount2 reaching the kernel's privilege check"),
        a("pivot-root", Privilege, High, &["pivot-root"], Blocked,
          "pivot_root reaching the kernel's privilege check"),
        a("chroot", Privilege, High, &["chroot"], Blocked,
          "chroot (with a held directory fd, the classic chroot escape)"),
        a("fsopen", Privilege, High, &["fsopen"], Blocked,
          "new mount API: fsopen"),
        a("open-tree", Privilege, High, &["open-tree"], Blocked,
          "new mount API: open_tree(OPEN_TREE_CLONE)"),
        a("move-mount", Privilege, High, &["move-mount"], Blocked,
          "new mount API: move_mount reaching the privilege check"),
        a("ptrace-parent", Privilege, High, &["with-ppid", "ptrace", "PPID"], Blocked,
          "ptrace the sandbox's parent (the launcher without a pid namespace)"),
        a("ptrace-marker", Privilege, Critical, &["ptrace", "{marker_pid}"], Blocked,
          "ptrace a host process of the same uid"),
        a("vm-read-parent", Privilege, High, &["with-ppid", "process-vm-readv", "PPID", "PPID_ADDR"], Blocked,
          "read the parent's memory with process_vm_readv"),
        a("vm-read-marker", Privilege, Critical, &["process-vm-readv", "{marker_pid}", "{marker_addr}"], Blocked,
          "read a host process's memory with process_vm_readv"),
        a("environ-pid1", Privilege, High, &["leak", "/proc/1/environ", "{env_secret}"], Blocked,
          "find the launcher's secret in /proc/1/environ"),
        a("environ-marker", Privilege, Critical, &["leak", "/proc/{marker_pid}/environ", "{marker_secret}"], Blocked,
          "read a host process's environment (its secrets)"),
        a("kill-parent", Privilege, Medium, &["with-ppid", "kill", "PPID"], Blocked,
          "signal the sandbox's parent (signal 0: the permission check)"),
        a("kill-marker", Privilege, High, &["kill", "{marker_pid}"], Blocked,
          "signal a host process of the same uid (signal 0: the permission check)"),
        // --- kernel surface --------------------------------------------------------------
        a("bpf", Kernel, High, &["bpf"], Blocked, "bpf(BPF_MAP_CREATE): the eBPF attack surface"),
        a("perf-event-open", Kernel, Medium, &["perf-event-open"], Blocked, "perf_event_open: side channels, kernel bugs"),
        a("userfaultfd", Kernel, Medium, &["userfaultfd"], Blocked, "userfaultfd: widens kernel race windows for exploits"),
        a("io-uring", Kernel, High, &["io-uring-setup"], Blocked, "io_uring_setup: a large, often exploited surface that bypasses syscall filters"),
        a("keyctl", Kernel, Medium, &["keyctl"], Blocked, "keyctl: kernel keyrings are not namespaced"),
        a("add-key", Kernel, Medium, &["add-key"], Blocked, "add_key into a kernel keyring"),
        a("kexec-load", Kernel, Critical, &["kexec-load"], Blocked, "kexec_load reaching the privilege check (replace the kernel)"),
        a("init-module", Kernel, Critical, &["init-module"], Blocked, "init_module reaching the privilege check (load kernel code)"),
        a("reboot", Kernel, High, &["reboot"], Blocked, "reboot reaching the privilege check"),
        a("swapon", Kernel, High, &["swapon"], Blocked, "swapon reaching the privilege check"),
        a("acct", Kernel, Medium, &["acct"], Blocked, "acct reaching the privilege check"),
        a("syslog", Kernel, Low, &["syslog"], Blocked, "syslog: read the kernel log (addresses, other tenants' messages)"),
        a("quotactl", Kernel, Low, &["quotactl"], Blocked, "quotactl"),
        a("clock-settime", Kernel, Medium, &["clock-settime"], Blocked, "set the host clock"),
        a("sethostname", Kernel, Low, &["sethostname"], Blocked, "set the hostname"),
        a("personality", Kernel, Low, &["personality"], Blocked, "personality(ADDR_NO_RANDOMIZE): switch ASLR off"),
        a("tiocsti", Kernel, High, &["tiocsti"], Blocked, "TIOCSTI: push input into a terminal (runs commands in the caller's shell)"),
        a("tioclinux", Kernel, Medium, &["tioclinux"], Blocked, "TIOCLINUX: console selection and input injection"),
        a("int80", Kernel, Medium, &["int80"], Blocked, "i386 syscalls through int 0x80 (bypass an x86_64-only filter)"),
        a("x32", Kernel, Medium, &["x32"], Blocked, "x32 syscall numbers (bypass a filter that ignores bit 30)"),
        // --- leaks ------------------------------------------------------------------------
        a("leaked-fd", Leak, Critical, &["read-fd", "{leak_fd}", "{secret_marker}"], Blocked,
          "read a secret through an fd the caller leaked (not close-on-exec)"),
        a("fds-above-2", Leak, Medium, &["fds"], Blocked, "any open fd above 2"),
        a("launcher-env", Leak, High, &["env", "{env_name}"], Blocked, "the launcher's own secret environment variable"),
        a("ld-preload", Leak, High, &["env", "LD_PRELOAD"], Blocked, "the caller's LD_PRELOAD (code injection into every program)"),
        // --- network ----------------------------------------------------------------------
        a("tcp-loopback", Network, High, &["tcp-connect", "127.0.0.1", "{tcp_port}"], BlockedUnless(Trait::NetworkHost),
          "connect to a host service on loopback"),
        Attack {
            judge: Judge::UdpReceived,
            ..a("udp-loopback", Network, Medium, &["udp-send", "127.0.0.1", "{udp_port}"], BlockedUnless(Trait::NetworkHost),
                "send a UDP datagram to a host service on loopback (judged by the listener's receipt)")
        },
        a("abstract-unix", Network, High, &["abstract-connect", "{abstract_name}"], Blocked,
          "connect to a host abstract UNIX socket (D-Bus, X11, agents)"),
        a("unix-socket", Network, High, &["unix-connect", "{unix_sock}"], BlockedUnless(Trait::HostRootVisible),
          "connect to a host UNIX socket by path (docker.sock-like)"),
        // --- resources --------------------------------------------------------------------
        a("fork-bomb", Resource, Medium, &["fork-bomb", "{fork_n}"], Bounded(Limit::Nproc),
          "fork more processes than the profile's nproc limit"),
        a("mem-bomb", Resource, Medium, &["mem-bomb", "{mem_mib}"], Bounded(Limit::As),
          "map more memory than the profile's address-space limit"),
    ];
    v.shrink_to_fit();
    v
}

/// The profile properties expectations depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Traits {
    pub network_host: bool,
    pub host_root_visible: bool,
    pub git_writable: bool,
    /// The profile's RLIMIT_NPROC (soft), if any.
    pub nproc: Option<u64>,
    /// The profile's RLIMIT_AS (soft, bytes), if any.
    pub as_bytes: Option<u64>,
}

impl Traits {
    pub fn has(&self, t: Trait) -> bool {
        match t {
            Trait::NetworkHost => self.network_host,
            Trait::HostRootVisible => self.host_root_visible,
            Trait::GitWritable => self.git_writable,
        }
    }
    pub fn limit(&self, l: Limit) -> Option<u64> {
        match l {
            Limit::Nproc => self.nproc,
            Limit::As => self.as_bytes,
        }
    }
}

/// What this profile expects of one attack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// Success with both layers is an escape.
    MustBlock,
    /// The profile deliberately allows it; success is reported, not counted.
    AllowedByPolicy,
    /// A resource the profile does not limit.
    UnboundedByPolicy,
}

pub fn expectation(attack: &Attack, t: &Traits) -> Expectation {
    match attack.expect {
        Expect::Blocked => Expectation::MustBlock,
        Expect::BlockedUnless(tr) if t.has(tr) => Expectation::AllowedByPolicy,
        Expect::BlockedUnless(_) => Expectation::MustBlock,
        Expect::Bounded(l) if t.limit(l).is_some() => Expectation::MustBlock,
        Expect::Bounded(_) => Expectation::UnboundedByPolicy,
    }
}

/// Probe sizes for the resource attacks: above the limit when there is one,
/// a small bounded run otherwise (it shows the resource is not limited).
pub fn resource_args(t: &Traits) -> (u64, u64) {
    let fork_n = t.nproc.map(|n| (n + 32).min(10_000)).unwrap_or(64);
    let mem_mib = t
        .as_bytes
        .map(|b| (b >> 20) + 64)
        .unwrap_or(128)
        .min(65_536);
    (fork_n, mem_mib)
}

/// Replace every `{name}` in `args` from `vars`. An unknown name is an error
/// (a catalogue bug), never passed through.
pub fn expand(args: &[&str], vars: &BTreeMap<&str, String>) -> Result<Vec<String>, String> {
    args.iter()
        .map(|arg| {
            let mut out = String::new();
            let mut rest = *arg;
            while let Some(i) = rest.find('{') {
                out.push_str(&rest[..i]);
                let end = rest[i..]
                    .find('}')
                    .ok_or_else(|| format!("unclosed placeholder in {arg:?}"))?;
                let key = &rest[i + 1..i + end];
                let val = vars
                    .get(key)
                    .ok_or_else(|| format!("unknown placeholder {{{key}}} in {arg:?}"))?;
                out.push_str(val);
                rest = &rest[i + end + 1..];
            }
            out.push_str(rest);
            Ok(out)
        })
        .collect()
}

/// `--only`: comma-separated patterns, each a substring of the name or the
/// area, or a glob with `*`.
pub fn matches_only(pattern: Option<&str>, name: &str, area: &str) -> bool {
    let Some(p) = pattern else { return true };
    p.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .any(|pat| glob(pat, name) || glob(pat, area) || (!pat.contains('*') && name.contains(pat)))
}

fn glob(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            if !s.starts_with(head) {
                return false;
            }
            let rest = &s[head.len()..];
            (0..=rest.len()).any(|i| rest.is_char_boundary(i) && glob(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<&'static str, String> {
        let mut v = BTreeMap::new();
        for k in [
            "secret",
            "secret_marker",
            "outside",
            "scratch",
            "hidden",
            "hidden_marker",
            "ro_file",
            "ws_git",
            "ro_marker",
            "marker_pid",
            "marker_addr",
            "env_secret",
            "marker_secret",
            "leak_fd",
            "env_name",
            "tcp_port",
            "udp_port",
            "abstract_name",
            "unix_sock",
            "fork_n",
            "mem_mib",
        ] {
            v.insert(k, format!("<{k}>"));
        }
        v
    }

    #[test]
    fn catalogue_is_complete_and_expandable() {
        let c = catalogue();
        assert!(c.len() >= 60, "{} attacks", c.len());
        let mut names: Vec<&str> = c.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), c.len(), "duplicate attack names");
        let v = vars();
        for a in &c {
            let args = expand(a.args, &v).unwrap_or_else(|e| panic!("{}: {e}", a.name));
            assert!(!args.is_empty() && !args[0].contains('{'), "{}", a.name);
        }
        for area in [
            "filesystem",
            "privilege",
            "kernel",
            "leak",
            "network",
            "resource",
        ] {
            let n = c
                .iter()
                .filter(|a| serde_json::to_value(a.area).unwrap() == area)
                .count();
            assert!(n > 0, "no attack in {area}");
        }
    }

    #[test]
    fn expand_fills_and_rejects() {
        let mut v = BTreeMap::new();
        v.insert("a", "1".to_string());
        v.insert("b", "two".to_string());
        assert_eq!(
            expand(&["x{a}y", "{b}", "/p/{a}/{b}", "plain"], &v).unwrap(),
            vec!["x1y", "two", "/p/1/two", "plain"]
        );
        assert!(expand(&["{nope}"], &v).is_err());
        assert!(expand(&["{a"], &v).is_err());
    }

    #[test]
    fn expectations_follow_traits() {
        let c = catalogue();
        let get = |n: &str| c.iter().find(|a| a.name == n).unwrap().clone();
        let none = Traits::default();
        let maint = Traits {
            network_host: true,
            host_root_visible: true,
            ..Default::default()
        };
        let limited = Traits {
            nproc: Some(100),
            as_bytes: Some(1 << 30),
            ..Default::default()
        };
        assert_eq!(
            expectation(&get("tcp-loopback"), &none),
            Expectation::MustBlock
        );
        assert_eq!(expectation(&get("git-hook"), &none), Expectation::MustBlock);
        let git_rw = Traits {
            git_writable: true,
            ..Default::default()
        };
        assert_eq!(
            expectation(&get("git-hook"), &git_rw),
            Expectation::AllowedByPolicy
        );
        assert_eq!(
            expectation(&get("tcp-loopback"), &maint),
            Expectation::AllowedByPolicy
        );
        assert_eq!(
            expectation(&get("abstract-unix"), &maint),
            Expectation::MustBlock
        );
        assert_eq!(
            expectation(&get("kill-marker"), &maint),
            Expectation::MustBlock
        );
        assert_eq!(
            expectation(&get("read-outside"), &maint),
            Expectation::AllowedByPolicy
        );
        assert_eq!(
            expectation(&get("read-masked"), &maint),
            Expectation::MustBlock
        );
        assert_eq!(
            expectation(&get("fork-bomb"), &none),
            Expectation::UnboundedByPolicy
        );
        assert_eq!(
            expectation(&get("fork-bomb"), &limited),
            Expectation::MustBlock
        );
        assert_eq!(
            expectation(&get("mem-bomb"), &limited),
            Expectation::MustBlock
        );
        assert_eq!(resource_args(&limited), (132, 1024 + 64));
        assert_eq!(resource_args(&none), (64, 128));
    }

    #[test]
    fn only_patterns() {
        assert!(matches_only(None, "bpf", "kernel"));
        assert!(matches_only(Some("kernel"), "bpf", "kernel"));
        assert!(matches_only(Some("read"), "read-outside", "filesystem"));
        assert!(matches_only(
            Some("x,*-marker"),
            "ptrace-marker",
            "privilege"
        ));
        assert!(!matches_only(Some("net*"), "bpf", "kernel"));
        assert!(matches_only(Some("net*"), "tcp-loopback", "network"));
    }
}
