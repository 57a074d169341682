//! Named syscall groups (`@file-system`, …) and the built-in default profile.
//! docs/seccomp.md documents each group; keep the two in step.
//!
//! Names cover x86_64 and aarch64; a name the native table lacks is skipped
//! when the filter is built (e.g. `open` on aarch64).

pub struct Group {
    pub name: &'static str,
    pub doc: &'static str,
    pub calls: &'static [&'static str],
}

pub const GROUPS: &[Group] = &[
    Group {
        name: "basic-io",
        doc: "read/write on open fds, seeking, closing, duplicating, in-kernel copies",
        calls: &[
            "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
            "preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3",
            "sendfile", "splice", "tee", "vmsplice", "copy_file_range",
        ],
    },
    Group {
        name: "file-system",
        doc: "opening, creating, inspecting and changing files and directories (access itself is Landlock's job)",
        calls: &[
            "open", "openat", "openat2", "creat", "stat", "fstat", "lstat", "newfstatat", "statx",
            "access", "faccessat", "faccessat2", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
            "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
            "readlink", "readlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
            "fchown", "lchown", "fchownat", "truncate", "ftruncate", "fallocate", "getdents",
            "getdents64", "getcwd", "chdir", "fchdir", "utime", "utimes", "utimensat",
            "futimesat", "statfs", "fstatfs", "mknod", "mknodat", "umask", "fadvise64",
            "readahead", "sync", "fsync", "fdatasync", "syncfs", "sync_file_range", "flock",
            "fcntl", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
            "getxattr", "lgetxattr", "fgetxattr", "getxattrat", "listxattr", "llistxattr",
            "flistxattr", "listxattrat", "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
            "removexattr", "lremovexattr", "fremovexattr", "removexattrat", "memfd_create",
            "cachestat", "file_getattr", "file_setattr",
        ],
    },
    Group {
        name: "process",
        doc: "creating, running, waiting for and signalling processes; scheduling; resource limits",
        calls: &[
            "fork", "vfork", "clone", "clone3", "execve", "execveat", "exit", "exit_group",
            "wait4", "waitid", "kill", "tkill", "tgkill", "getpid", "gettid", "getppid",
            "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "set_tid_address",
            "set_robust_list", "get_robust_list", "rseq", "prctl", "arch_prctl", "pidfd_open",
            "pidfd_send_signal", "sched_yield", "sched_getaffinity", "sched_setaffinity",
            "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
            "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
            "sched_getattr", "sched_setattr", "getpriority", "setpriority", "ioprio_get",
            "ioprio_set", "getrlimit", "setrlimit", "prlimit64", "getrusage", "times",
            "capget", "capset", "personality",
        ],
    },
    Group {
        name: "memory",
        doc: "mapping and managing the process's own memory",
        calls: &[
            "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mincore", "mlock",
            "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "pkey_alloc",
            "pkey_free", "pkey_mprotect", "get_mempolicy", "set_mempolicy", "mbind",
            "set_mempolicy_home_node", "map_shadow_stack", "mseal",
        ],
    },
    Group {
        name: "signal",
        doc: "signal handlers, masks and waiting for signals",
        calls: &[
            "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
            "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
            "signalfd", "signalfd4", "pause", "alarm",
            // The kernel resumes a sleep interrupted by a stop and continue
            // (Ctrl-Z, fg) through it: without it `sleep` fails with EPERM.
            "restart_syscall",
        ],
    },
    Group {
        name: "time",
        doc: "reading clocks, sleeping and timers (not setting the clock: see @clock)",
        calls: &[
            "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
            "time", "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime",
            "timer_getoverrun", "timer_delete", "timerfd_create", "timerfd_settime",
            "timerfd_gettime",
        ],
    },
    Group {
        name: "ipc",
        doc: "pipes, event and poll fds, futexes, SysV and POSIX IPC (scoped by the IPC namespace)",
        calls: &[
            "pipe", "pipe2", "eventfd", "eventfd2", "epoll_create", "epoll_create1", "epoll_ctl",
            "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6",
            "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "shmget",
            "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
            "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
            "mq_timedreceive", "mq_notify", "mq_getsetattr", "io_setup", "io_destroy",
            "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
        ],
    },
    Group {
        name: "network-io",
        doc: "sockets: creating, connecting, listening, sending, receiving",
        calls: &[
            "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect",
            "getsockname", "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg",
            "sendmmsg", "recvmmsg", "shutdown", "setsockopt", "getsockopt",
        ],
    },
    Group {
        name: "credentials",
        doc: "reading and changing the process's own ids (gaining ids still needs capabilities)",
        calls: &[
            "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
            "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
            "setfsuid", "setfsgid",
        ],
    },
    Group {
        name: "system-info",
        doc: "kernel and machine information, randomness",
        calls: &["uname", "sysinfo", "getcpu", "getrandom"],
    },
    Group {
        name: "ioctl",
        doc: "ioctl (the default profile refuses TIOCSTI, TIOCLINUX, TIOCEXCL, TCXONC and TIOCSETD)",
        calls: &["ioctl"],
    },
    Group {
        name: "sandbox",
        doc: "restricting oneself further: Landlock and seccomp (they can only remove access)",
        calls: &["landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp"],
    },
    // Groups below are never allowed by the default profile; they exist so that
    // deny lists can name them.
    Group {
        name: "mount",
        doc: "mounting, the new mount API, pivot_root, chroot",
        calls: &[
            "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
            "fspick", "open_tree", "open_tree_attr", "move_mount", "mount_setattr", "statmount",
            "listmount",
        ],
    },
    Group {
        name: "namespaces",
        doc: "creating or joining namespaces (clone's namespace flags are refused by a rule)",
        calls: &["unshare", "setns"],
    },
    Group {
        name: "debug",
        doc: "inspecting other processes: ptrace, cross-process memory and fds, perf",
        calls: &[
            "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
            "perf_event_open", "lookup_dcookie", "process_madvise",
        ],
    },
    Group {
        name: "kernel",
        doc: "large or privileged kernel surfaces: bpf, io_uring, keyrings, userfaultfd, modules, kexec, reboot, swap, accounting, quotas, the kernel log",
        calls: &[
            "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
            "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module",
            "finit_module", "delete_module", "create_module", "get_kernel_syms", "query_module",
            "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
            "open_by_handle_at", "name_to_handle_at", "nfsservctl", "uselib", "ustat", "sysfs",
            "_sysctl", "vhangup", "iopl", "ioperm", "modify_ldt", "fanotify_init",
            "fanotify_mark", "lsm_set_self_attr", "uretprobe",
        ],
    },
    Group {
        name: "clock",
        doc: "setting the system clock",
        calls: &["clock_settime", "clock_adjtime", "settimeofday", "adjtimex"],
    },
];

/// Groups the built-in default profile allows (with the argument rules of
/// [`crate::seccomp::default_rules`]).
pub const DEFAULT_ALLOW: &[&str] = &[
    "basic-io",
    "file-system",
    "process",
    "memory",
    "signal",
    "time",
    "ipc",
    "network-io",
    "credentials",
    "system-info",
    "ioctl",
    "sandbox",
];

/// Pseudo-group: everything the default profile refuses on purpose.
const PRIVILEGED: &[&str] = &["mount", "namespaces", "debug", "kernel", "clock"];

/// The calls of one plain group (not `@privileged`/`@default`); empty if unknown.
pub fn group_calls(name: &str) -> &'static [&'static str] {
    GROUPS
        .iter()
        .find(|g| g.name == name)
        .map(|g| g.calls)
        .unwrap_or(&[])
}

pub fn group(name: &str) -> Option<Vec<&'static str>> {
    if name == "privileged" {
        return Some(PRIVILEGED.iter().flat_map(|g| group(g).unwrap()).collect());
    }
    if name == "default" {
        return Some(
            DEFAULT_ALLOW
                .iter()
                .flat_map(|g| group(g).unwrap())
                .collect(),
        );
    }
    GROUPS
        .iter()
        .find(|g| g.name == name)
        .map(|g| g.calls.to_vec())
}

pub fn group_names() -> Vec<String> {
    GROUPS
        .iter()
        .map(|g| format!("@{}", g.name))
        .chain(["@privileged".to_string(), "@default".to_string()])
        .collect()
}

/// Expand names and `@groups` into syscall names.
pub fn expand(items: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    for it in items {
        match it.strip_prefix('@') {
            // Validated at parse time; an unknown group cannot reach here.
            Some(g) => out.extend(group(g).unwrap_or_default()),
            None => out.push(it.as_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::tables;

    #[test]
    fn every_group_member_is_a_known_syscall() {
        for g in GROUPS {
            for c in g.calls {
                assert!(tables::is_known(c), "@{} lists unknown syscall {c}", g.name);
            }
        }
    }

    #[test]
    fn default_allow_and_privileged_are_disjoint() {
        let allow = group("default").unwrap();
        for c in group("privileged").unwrap() {
            assert!(!allow.contains(&c), "{c} is both allowed and privileged");
        }
    }
}

#[cfg(test)]
mod doc_tests {
    /// docs/seccomp.md must list every group and every call in it.
    #[test]
    fn seccomp_doc_lists_every_group_member() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/seccomp.md"))
                .expect("docs/seccomp.md");
        for g in super::GROUPS {
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `@{}` |", g.name)))
                .unwrap_or_else(|| panic!("docs/seccomp.md lacks a row for @{}", g.name));
            for c in g.calls {
                assert!(
                    row.contains(&format!("`{c}`")),
                    "docs/seccomp.md: @{} lacks {c}",
                    g.name
                );
            }
        }
    }
}
