use super::*;
use crate::paths::fake::FakeFs;
use crate::policy::builtin;

fn gid_of(uid: u32) -> Option<u32> {
    Some(uid)
}

fn host(euid: u32) -> Host {
    let mut env = BTreeMap::new();
    env.insert("PATH".into(), "/usr/bin:/bin".into());
    env.insert("HOME".into(), "/home/alice".into());
    env.insert("LANG".into(), "C.UTF-8".into());
    env.insert("SECRET_TOKEN".into(), "hunter2".into());
    env.insert("LD_PRELOAD".into(), "/evil.so".into());
    Host {
        euid,
        egid: euid,
        env,
        homes: vec!["/home/alice".into(), "/root".into()],
        passwd_homes: Vec::new(),
        bwrap: "/usr/bin/bwrap".into(),
        proc: ProcStrategy::Fresh,
        gid_of,
        groups: Some(vec![]),
        mem_bytes: 16 << 30,
    }
}

fn opts(cmd: &[&str]) -> Options {
    Options::new(
        cmd.iter().map(|s| s.to_string()).collect(),
        "/work/ws".into(),
    )
}

fn plan_with(fs: &FakeFs, o: &Options, euid: u32) -> Result<Plan> {
    build(&builtin("default").unwrap(), o, &host(euid), fs)
}

fn plan(o: &Options) -> Plan {
    plan_with(&FakeFs::host(), o, 1000).unwrap()
}

fn pos(argv: &[String], seq: &[&str]) -> Option<usize> {
    argv.windows(seq.len())
        .position(|w| w.iter().zip(seq).all(|(a, b)| a == b))
}

/// The exact argv of the default profile, documented in docs/profiles.md.
#[test]
fn default_profile_exact_argv() {
    let p = plan(&opts(&["true"]));
    let expected: Vec<&str> = vec![
        "/usr/bin/bwrap",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--as-pid-1",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--info-fd",
        "4",
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/etc",
        "/etc",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--dev",
        "/dev",
        "--size",
        "2147483648", // an eighth of the host's 16 GiB
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--proc",
        "/proc",
        "--size",
        "2147483648",
        "--tmpfs",
        "/tmp",
        "--size",
        "2147483648",
        "--tmpfs",
        "/home/sandbox",
        "--ro-bind-data",
        "7",
        "/etc/shadow",
        "--ro-bind-data",
        "8",
        "/etc/gshadow",
        "--bind",
        "/work/ws",
        "/work/ws",
        "--remount-ro",
        "/",
        "--chdir",
        "/work/ws",
        "--",
        "/proc/self/fd/6",
        "--init",
        "--policy-fd",
        "5",
        "--report-fd",
        "3",
        "--",
        "true",
    ];
    assert_eq!(p.bwrap_argv, expected);
    assert_eq!(
        p.fds,
        vec![
            (3, FdRole::Report),
            (4, FdRole::Info),
            (5, FdRole::Policy),
            (6, FdRole::Helper),
            (7, FdRole::Empty),
            (8, FdRole::Empty)
        ]
    );
    assert_eq!(p.switch_to, None);
}

/// Invariants that hold for every profile and option combination.
fn check_invariants(p: &Plan) {
    let a = &p.bwrap_argv;
    if p.layers == Layers::Inner {
        assert!(a.is_empty());
        return;
    }
    for f in [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
    ] {
        assert_eq!(a.iter().filter(|x| *x == f).count(), 1, "{f} in {a:?}");
    }
    assert!(pos(a, &["--cap-drop", "ALL"]).is_some());
    // --share-net only after --unshare-all, and only for host networking.
    match p.network {
        Network::Host => {
            assert!(pos(a, &["--share-net"]).unwrap() > pos(a, &["--unshare-all"]).unwrap())
        }
        Network::None => assert!(!a.iter().any(|x| x == "--share-net")),
    }
    assert!(
        !a.iter().any(|x| x == "--clearenv"),
        "environment is cleared by spawning, not by bwrap"
    );
    // Options come before the first mount; `--` precedes the command.
    let dd = a.iter().position(|x| x == "--").unwrap();
    assert_eq!(&a[dd + 1..], &p.inner_argv[..]);
    // Mount order: no read-only root after the first mask; no mask or ro root
    // between writable binds unless nested in one.
    let ops: Vec<(usize, &str, &str)> = a[..dd]
        .iter()
        .enumerate()
        .filter(|(_, x)| {
            x.starts_with("--")
                && !matches!(
                    x.as_str(),
                    "--uid" | "--gid" | "--info-fd" | "--chdir" | "--cap-drop"
                )
        })
        .filter_map(|(i, x)| a.get(i + 1).map(|n| (i, x.as_str(), n.as_str())))
        .collect();
    let binds: Vec<&str> = ops
        .iter()
        .filter(|o| o.1 == "--bind")
        .map(|o| o.2)
        .collect();
    let first_bind = ops.iter().position(|o| o.1 == "--bind");
    if let Some(fb) = first_bind {
        for o in &ops[fb..] {
            let dest = match o.1 {
                "--ro-bind" | "--ro-bind-try" => o.2,
                "--ro-bind-data" => a[o.0 + 2].as_str(),
                "--tmpfs" => o.2,
                _ => continue,
            };
            // cordon's own files (policy, helper) go last on purpose, under
            // /.cordon, which no host path can be.
            if dest.starts_with("/.cordon/") {
                continue;
            }
            assert!(
                binds.iter().any(|b| Path::new(dest).starts_with(b)),
                "{} {dest} after a writable bind but not nested in one",
                o.1
            );
        }
    }
    // Every masked path is masked after any writable bind that contains it.
    for (i, o) in ops.iter().enumerate() {
        if o.1 == "--bind" {
            for later in &ops[..i] {
                let dest = if later.1 == "--ro-bind-data" {
                    a[later.0 + 2].as_str()
                } else {
                    later.2
                };
                let is_mask = later.1 == "--ro-bind-data"
                    || (later.1 == "--tmpfs"
                        && !["/tmp", "/home/sandbox", "/home", "/proc"].contains(&dest));
                if is_mask && Path::new(dest).starts_with(o.2) {
                    assert!(
                        ops[i..]
                            .iter()
                            .any(|m| (m.1 == "--ro-bind-data" && a[m.0 + 2] == dest)
                                || (m.1 == "--tmpfs" && m.2 == dest)),
                        "mask {dest} re-exposed by writable bind {}",
                        o.2
                    );
                }
            }
        }
    }
    // Writable binds are never sensitive.
    for b in &binds {
        assert!(
            paths::never_writable(Path::new(b), &["/home/alice".into(), "/root".into()]).is_none(),
            "{b}"
        );
    }
    // No caller secret in argv.
    assert!(!a.iter().any(|x| x.contains("hunter2")));
    if p.layers == Layers::Both {
        let helper = if a.iter().any(|x| x == "/.cordon/cordon-helper") {
            "/.cordon/cordon-helper"
        } else {
            "/proc/self/fd/6"
        };
        assert_eq!(
            &p.inner_argv[..7],
            &[
                helper,
                "--init",
                "--policy-fd",
                "5",
                "--report-fd",
                "3",
                "--"
            ]
        );
        // The helper is the sandbox's init: bwrap starts no init of its own.
        assert!(a.iter().any(|x| x == "--as-pid-1"));
    } else {
        // Without the helper, bwrap's init keeps the command off pid 1.
        assert!(!a.iter().any(|x| x == "--as-pid-1"));
    }
}

#[test]
fn invariants_across_profiles_and_options() {
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/.git");
    fs.file("/work/ws/.env", 1);
    fs.dir("/opt");
    fs.dir("/nix");
    fs.dir("/nix/store");
    for prof in crate::policy::BUILTIN_NAMES {
        for layers in [Layers::Both, Layers::Outer, Layers::Inner] {
            for net in [None, Some(Network::Host), Some(Network::None)] {
                for euid in [0, 1000] {
                    let mut o = opts(&["sh", "-c", "x"]);
                    o.layers = layers;
                    o.network = net;
                    o.ro.push("/work/ws/.git".into());
                    o.hide.push("/work/ws/.env".into());
                    o.env.push(EnvArg::Set("TOKEN".into(), "hunter2".into()));
                    let p = build(&builtin(prof).unwrap(), &o, &host(euid), &fs)
                        .unwrap_or_else(|e| panic!("{prof} {layers:?} {euid}: {e}"));
                    check_invariants(&p);
                    if euid == 0 {
                        assert_ne!(p.uid, 0);
                        assert_ne!(p.gid, 0);
                        if layers != Layers::Inner {
                            assert_eq!(p.switch_to, Some((p.uid, p.gid)));
                        } else {
                            assert_eq!(p.helper_policy.as_ref().unwrap()["user"]["uid"], p.uid);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn share_net_only_for_host_network() {
    let mut o = opts(&["true"]);
    assert!(!plan(&o).bwrap_argv.contains(&"--share-net".to_string()));
    o.network = Some(Network::Host);
    let p = plan(&o);
    assert!(pos(&p.bwrap_argv, &["--unshare-all", "--share-net"]).is_some());
    let pol = p.helper_policy.unwrap();
    assert_eq!(pol["network"]["tcpConnect"], "any");
}

#[test]
fn env_allowlist_and_secrets() {
    let mut o = opts(&["true"]);
    o.env.push(EnvArg::Set("API_KEY".into(), "s3cr3t".into()));
    o.env.push(EnvArg::Pass("NOT_SET_ANYWHERE".into()));
    let p = plan(&o);
    let names: Vec<&str> = p.env.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["HOME", "LANG", "PATH"]);
    assert!(p.env.contains(&("HOME".into(), "/home/sandbox".into())));
    assert!(!p.bwrap_argv.iter().any(|a| a.contains("s3cr3t")));
    assert!(!p
        .env
        .iter()
        .any(|(_, v)| v.contains("s3cr3t") || v.contains("hunter2")));
    assert_eq!(p.helper_policy.unwrap()["env"]["set"]["API_KEY"], "s3cr3t");

    // Passing a present variable by name.
    let mut o = opts(&["true"]);
    o.env.push(EnvArg::Pass("SECRET_TOKEN".into()));
    assert!(plan(&o)
        .env
        .contains(&("SECRET_TOKEN".into(), "hunter2".into())));

    // Outer only: values go to bwrap's environment, still not argv.
    let mut o = opts(&["true"]);
    o.layers = Layers::Outer;
    o.env.push(EnvArg::Set("API_KEY".into(), "s3cr3t".into()));
    let p = plan(&o);
    assert!(p.env.contains(&("API_KEY".into(), "s3cr3t".into())));
    assert!(!p.bwrap_argv.iter().any(|a| a.contains("s3cr3t")));
}

#[test]
fn injection_refused_unless_allowed() {
    for e in [
        EnvArg::Pass("LD_PRELOAD".into()),
        EnvArg::Set("ld_preload".into(), "x".into()),
        EnvArg::Set("NODE_OPTIONS".into(), "--require x".into()),
        EnvArg::Set("BASH_ENV".into(), "x".into()),
    ] {
        let mut o = opts(&["true"]);
        o.env.push(e.clone());
        let err = plan_with(&FakeFs::host(), &o, 1000).unwrap_err();
        assert!(matches!(err, Error::Env(_)), "{e:?}: {err}");
        o.allow_injection.push(match &e {
            EnvArg::Pass(n) | EnvArg::Set(n, _) => n.to_uppercase(),
        });
        let p = plan_with(&FakeFs::host(), &o, 1000).unwrap();
        assert!(!p.helper_policy.unwrap()["env"]["allowInjection"]
            .as_array()
            .unwrap()
            .is_empty());
    }
    let mut o = opts(&["true"]);
    o.env.push(EnvArg::Set("BAD-NAME".into(), "x".into()));
    assert!(matches!(
        plan_with(&FakeFs::host(), &o, 1000),
        Err(Error::Env(_))
    ));
}

#[test]
fn root_runs_as_workspace_owner_or_nobody() {
    let mut fs = FakeFs::host();
    let p = plan_with(&fs, &opts(&["true"]), 0).unwrap();
    assert_eq!(
        (p.uid, p.gid, p.switch_to),
        (1000, 1000, Some((1000, 1000)))
    );
    assert!(pos(&p.bwrap_argv, &["--uid", "1000", "--gid", "1000"]).is_some());

    fs.owner("/work/ws", 0);
    // Workspace owned by root: nobody cannot write it (mode 0755) → clear error.
    let e = plan_with(&fs, &opts(&["true"]), 0).unwrap_err();
    assert!(matches!(e, Error::Uid(_)), "{e}");
    assert!(e.to_string().contains("uid 65534"), "{e}");

    let mut o = opts(&["true"]);
    o.uid = Some(0);
    assert!(matches!(
        plan_with(&FakeFs::host(), &o, 0),
        Err(Error::Uid(_))
    ));
    o.uid = Some(1000);
    assert!(plan_with(&FakeFs::host(), &o, 0).is_ok());
    // Unprivileged callers cannot pick another uid.
    o.uid = Some(1234);
    assert!(matches!(
        plan_with(&FakeFs::host(), &o, 1000),
        Err(Error::Uid(_))
    ));
}

#[test]
fn workspace_symlinks_refused() {
    let mut fs = FakeFs::host();
    fs.link("/work/abs", "/work/ws");
    fs.link("/work/rel", "ws");
    for ws in ["/work/abs", "/work/rel"] {
        let o = Options::new(vec!["true".into()], ws.into());
        let e = plan_with(&fs, &o, 1000).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
    }
    let o = Options::new(vec!["true".into()], "/tmpfoo".into());
    assert!(plan_with(&fs, &o, 1000).is_err());
}

#[test]
fn credential_dirs_never_writable_and_hidden() {
    let fs = FakeFs::host();
    for p in [
        "/home/alice/.ssh",
        "/root/.ssh",
        "/proc",
        "/",
        "/run",
        "/dev",
        "/sys",
    ] {
        let mut o = opts(&["true"]);
        o.rw.push(p.into());
        let e = plan_with(&fs, &o, 1000).unwrap_err();
        assert!(e.to_string().contains("never writable"), "{p}: {e}");
    }
    // A writable home gets its credential dirs masked after the bind.
    let mut o = opts(&["true"]);
    o.rw.push("/home/alice".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    let b = pos(&p.bwrap_argv, &["--bind", "/home/alice", "/home/alice"]).unwrap();
    let m = pos(&p.bwrap_argv, &["--tmpfs", "/home/alice/.ssh"]).unwrap();
    assert!(m > b);
    assert!(pos(&p.bwrap_argv, &["--tmpfs", "/home/alice/.aws"]).unwrap() > b);
    let pol = p.helper_policy.unwrap();
    assert!(pol["filesystem"]["deny"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({"path": "/home/alice/.ssh", "masked": true})));
    // Read-only exposure of a credential dir needs `show`.
    let mut o = opts(&["true"]);
    o.ro.push("/home/alice/.ssh".into());
    assert!(plan_with(&fs, &o, 1000).is_err());
}

#[test]
fn hide_rules() {
    let mut fs = FakeFs::host();
    fs.file("/etc/hl", 2);
    let mut o = opts(&["true"]);
    o.hide.push("/etc/hl".into());
    let e = plan_with(&fs, &o, 1000).unwrap_err();
    assert!(e.to_string().contains("hard links"), "{e}");

    // Absent under a read-only parent: skipped (bwrap would fail to create it).
    let mut o = opts(&["true"]);
    o.hide.push("/usr/absent".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    assert!(!p.bwrap_argv.iter().any(|a| a == "/usr/absent"));
    assert!(p.notes.iter().any(|n| n.contains("/usr/absent")));

    // A writable path inside a hidden dir is refused (it would re-expose it).
    fs.dir("/work/secret");
    fs.dir("/work/secret/sub");
    let mut o = opts(&["true"]);
    o.ro.push("/work".into());
    o.hide.push("/work/secret".into());
    o.rw.push("/work/secret/sub".into());
    let e = plan_with(&fs, &o, 1000).unwrap_err();
    assert!(e.to_string().contains("re-expose"), "{e}");
}

#[test]
fn nested_ro_under_workspace_comes_after_bind() {
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/.git");
    let mut o = opts(&["true"]);
    o.ro.push("/work/ws/.git".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    let b = pos(&p.bwrap_argv, &["--bind", "/work/ws", "/work/ws"]).unwrap();
    let r = pos(
        &p.bwrap_argv,
        &["--ro-bind", "/work/ws/.git", "/work/ws/.git"],
    )
    .unwrap();
    assert!(r > b);
}

/// Git runs a checkout's hooks and config on the host: the `.git` at the top
/// of every writable path is mounted read-only after it.
#[test]
fn git_dirs_of_writable_paths_are_read_only() {
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/.git");
    fs.dir("/work/wt");
    fs.file("/work/wt/.git", 1); // a worktree's or submodule's `gitdir:` file
    fs.dir("/work/plain");
    let mut o = opts(&["true"]);
    o.rw.push("/work/wt".into());
    o.rw.push("/work/plain".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    let a = &p.bwrap_argv;
    for w in ["/work/ws", "/work/wt"] {
        let git = format!("{w}/.git");
        let b = pos(a, &["--bind", w, w]).unwrap();
        let r = pos(a, &["--ro-bind-try", &git, &git]).unwrap_or_else(|| panic!("{git}: {a:?}"));
        assert!(r > b, "{git} before its writable bind");
        assert_eq!(
            a.iter().filter(|x| **x == git).count(),
            2,
            "{git} once: {a:?}"
        );
    }
    assert!(!a.iter().any(|x| x == "/work/plain/.git"), "{a:?}");
    // Where there is none, the runner looks for one the command made.
    assert_eq!(p.git_absent, [PathBuf::from("/work/plain/.git")]);
    // Said in the result's notes (and `explain`), for a runtime to pass on.
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(
        p.notes[0].starts_with("/work/ws/.git is read-only: git runs its hooks"),
        "{:?}",
        p.notes
    );

    // `--git rw`, or a profile's `git = "rw"`: left writable.
    let mut rw = o.clone();
    rw.git = Some(GitAccess::Rw);
    let p = plan_with(&fs, &rw, 1000).unwrap();
    assert!(
        !p.bwrap_argv.iter().any(|x| x.ends_with("/.git")),
        "{:?}",
        p.bwrap_argv
    );
    assert!(p.git_absent.is_empty(), "{:?}", p.git_absent);
    let mut prof = builtin("default").unwrap();
    prof.git = GitAccess::Rw;
    let p = build(&prof, &o, &host(1000), &fs).unwrap();
    assert!(!p.bwrap_argv.iter().any(|x| x.ends_with("/.git")));
    // ... and `--git ro` wins over the profile.
    let mut ro = o.clone();
    ro.git = Some(GitAccess::Ro);
    let p = build(&prof, &ro, &host(1000), &fs).unwrap();
    assert!(pos(
        &p.bwrap_argv,
        &["--ro-bind-try", "/work/ws/.git", "/work/ws/.git"]
    )
    .is_some());

    // Named writable: the caller's choice.
    let mut named = opts(&["true"]);
    named.rw.push("/work/ws/.git".into());
    let p = plan_with(&fs, &named, 1000).unwrap();
    assert!(pos(&p.bwrap_argv, &["--bind", "/work/ws/.git", "/work/ws/.git"]).is_some());
    assert!(
        !p.bwrap_argv.iter().any(|x| x == "--ro-bind-try"),
        "{:?}",
        p.bwrap_argv
    );

    // Named read-only: one mount, the caller's.
    let mut named = opts(&["true"]);
    named.ro.push("/work/ws/.git".into());
    let p = plan_with(&fs, &named, 1000).unwrap();
    assert_eq!(
        p.bwrap_argv
            .iter()
            .filter(|x| *x == "/work/ws/.git")
            .count(),
        2
    );
    assert!(pos(
        &p.bwrap_argv,
        &["--ro-bind", "/work/ws/.git", "/work/ws/.git"]
    )
    .is_some());

    // The repository `--cwd` starts in, nested in the workspace, and the
    // ones between it and the workspace; not its siblings (no scan).
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/a");
    fs.dir("/work/ws/a/b");
    fs.dir("/work/ws/a/.git");
    fs.dir("/work/ws/a/b/.git");
    fs.dir("/work/ws/a/b/c");
    fs.dir("/work/ws/sibling/.git");
    let mut o = opts(&["true"]);
    o.cwd = Some("/work/ws/a/b/c".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    for g in ["/work/ws/a/.git", "/work/ws/a/b/.git"] {
        assert!(
            pos(&p.bwrap_argv, &["--ro-bind-try", g, g]).is_some(),
            "{g}: {:?}",
            p.bwrap_argv
        );
    }
    assert!(!p.bwrap_argv.iter().any(|x| x.contains("sibling")));

    // A symlinked `.git` cannot be held: said, not silently left.
    let mut fs = FakeFs::host();
    fs.dir("/srv/repo.git");
    fs.link("/work/ws/.git", "/srv/repo.git");
    let p = plan_with(&fs, &opts(&["true"]), 1000).unwrap();
    assert!(!p.bwrap_argv.iter().any(|x| x == "/work/ws/.git"));
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("/work/ws/.git is a symlink and stays writable")),
        "{:?}",
        p.notes
    );

    // A read-only workspace has nothing to protect.
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/.git");
    let p = build(
        &builtin("public-bot").unwrap(),
        &opts(&["true"]),
        &host(1000),
        &fs,
    )
    .unwrap();
    assert!(pos(&p.bwrap_argv, &["--ro-bind", "/work/ws", "/work/ws"]).is_some());
    assert!(
        !p.bwrap_argv.iter().any(|x| x == "/work/ws/.git"),
        "{:?}",
        p.bwrap_argv
    );
}

/// A linked worktree's `.git` file names its git directory in the main
/// repository: mounted read-only (with the common directory) when that names
/// the worktree back, so git works there; never on the file's word alone.
#[test]
fn git_dirs_named_by_a_git_file() {
    let worktree = |back: &str| {
        let mut fs = FakeFs::host();
        fs.text("/work/ws/.git", "gitdir: /srv/main/.git/worktrees/ws\n");
        for d in [
            "/srv",
            "/srv/main",
            "/srv/main/.git",
            "/srv/main/.git/worktrees",
            "/srv/main/.git/worktrees/ws",
        ] {
            fs.dir(d);
        }
        fs.text("/srv/main/.git/worktrees/ws/commondir", "../..\n");
        fs.text("/srv/main/.git/worktrees/ws/gitdir", back);
        fs
    };
    // A worktree whose repository no mount shows: the `.git` file is held,
    // and nothing it names is mounted, whether or not the git directory names
    // the file back (a command may have written both, in runs with other
    // workspaces, to be shown any directory here). The note says how to
    // show it.
    for back in ["/work/ws/.git\n", "/work/elsewhere/.git\n"] {
        let fs = worktree(back);
        let p = plan_with(&fs, &opts(&["true"]), 1000).unwrap();
        let a = &p.bwrap_argv;
        assert!(
            pos(a, &["--ro-bind-try", "/work/ws/.git", "/work/ws/.git"]).is_some(),
            "{a:?}"
        );
        assert!(!a.iter().any(|x| x.starts_with("/srv")), "{a:?}");
        let pol = p.helper_policy.as_ref().unwrap();
        assert!(!pol.to_string().contains("/srv"), "{pol}");
        assert!(
            p.notes.iter().any(|n| n
                == "/work/ws/.git names /srv/main/.git, which is not mounted, so git will not find the repository: if this is your worktree, pass --ro /srv/main/.git (and --git rw --rw /srv/main/.git to commit)"),
            "{:?}",
            p.notes
        );
    }
    // Named by the caller: shown read-only (one mount; the git directory is
    // inside it), or writable with `--rw`.
    let fs = worktree("/work/ws/.git\n");
    let mut o = opts(&["true"]);
    o.ro.push("/srv/main/.git".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    let a = &p.bwrap_argv;
    assert_eq!(
        a.iter().filter(|x| *x == "/srv/main/.git").count(),
        2,
        "{a:?}"
    );
    assert!(
        !a.iter().any(|x| x == "/srv/main/.git/worktrees/ws"),
        "{a:?}"
    );
    let mut o = opts(&["true"]);
    o.git = Some(GitAccess::Rw);
    o.rw.push("/srv/main/.git".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    assert!(
        pos(
            &p.bwrap_argv,
            &["--bind", "/srv/main/.git", "/srv/main/.git"]
        )
        .is_some(),
        "{:?}",
        p.bwrap_argv
    );
    assert_eq!(
        p.bwrap_argv
            .iter()
            .filter(|x| *x == "/srv/main/.git")
            .count(),
        2,
        "{:?}",
        p.bwrap_argv
    );
    // `--git rw`: the worktree's own `.git` file stays writable.
    assert!(
        !p.bwrap_argv.iter().any(|x| x == "/work/ws/.git"),
        "{:?}",
        p.bwrap_argv
    );

    // A git directory inside the workspace is held like `.git`, and the
    // common directory it names outside is not shown on its word.
    let mut fs = FakeFs::host();
    fs.text("/work/ws/.git", "gitdir: store/wt\n");
    fs.dir("/work/ws/store");
    fs.dir("/work/ws/store/wt");
    fs.dir("/srv");
    fs.text("/work/ws/store/wt/commondir", "/srv\n");
    fs.text("/work/ws/store/wt/gitdir", "/work/ws/.git\n");
    let p = plan_with(&fs, &opts(&["true"]), 1000).unwrap();
    let a = &p.bwrap_argv;
    let b = pos(a, &["--bind", "/work/ws", "/work/ws"]).unwrap();
    let r = pos(
        a,
        &["--ro-bind-try", "/work/ws/store/wt", "/work/ws/store/wt"],
    )
    .unwrap();
    assert!(r > b, "{a:?}");
    assert!(!a.iter().any(|x| x == "/srv"), "{a:?}");

    // Reached through a symlink in the workspace: the real directory is
    // held, but the link could be re-pointed, which a note says (on the
    // terminal too: cli.rs picks notes by " is a symlink and stays writable").
    let mut fs = FakeFs::host();
    fs.text("/work/ws/.git", "gitdir: .store/repo\n");
    fs.link("/work/ws/.store", ".store-real");
    fs.dir("/work/ws/.store-real");
    fs.dir("/work/ws/.store-real/repo");
    let p = plan_with(&fs, &opts(&["true"]), 1000).unwrap();
    assert!(pos(
        &p.bwrap_argv,
        &[
            "--ro-bind-try",
            "/work/ws/.store-real/repo",
            "/work/ws/.store-real/repo"
        ]
    )
    .is_some());
    assert!(
        p.notes.iter().any(|n| n.starts_with(
            "/work/ws/.git reaches its git directory through /work/ws/.store, which is a symlink and stays writable"
        )),
        "{:?}",
        p.notes
    );
    // A link outside every writable path is the host's: followed, no note.
    let mut fs = FakeFs::host();
    fs.text("/work/ws/.git", "gitdir: /srv/link/wt\n");
    fs.dir("/srv");
    fs.link("/srv/link", "/work/ws/store");
    fs.dir("/work/ws/store");
    fs.dir("/work/ws/store/wt");
    let p = plan_with(&fs, &opts(&["true"]), 1000).unwrap();
    assert!(pos(
        &p.bwrap_argv,
        &["--ro-bind-try", "/work/ws/store/wt", "/work/ws/store/wt"]
    )
    .is_some());
    assert!(
        !p.notes.iter().any(|n| n.contains("symlink")),
        "{:?}",
        p.notes
    );
}

/// `git status` recurses into each checked-out submodule through the `.git`
/// in its working tree, so those are held too: found from the git
/// directories in `.git/modules` (read-only, so the command cannot hide one),
/// nested ones and names with a `/` included. A submodule not checked out is
/// looked for after the run; one reached through a symlink gets a note.
#[test]
fn submodule_git_files_are_read_only() {
    let mut fs = FakeFs::host();
    for d in [
        "/work/ws/.git",
        "/work/ws/.git/modules",
        "/work/ws/.git/modules/lib",
        "/work/ws/.git/modules/lib/modules",
        "/work/ws/.git/modules/lib/modules/deep",
        "/work/ws/.git/modules/vendor",
        "/work/ws/.git/modules/vendor/x",
        "/work/ws/.git/modules/linked",
        "/work/ws/lib",
        "/work/ws/lib/deep",
        "/work/ws/vendor",
        "/work/ws/vendor/x",
        "/work/ws/real",
    ] {
        fs.dir(d);
    }
    fs.text(
        "/work/ws/.git/modules/lib/config",
        "[core]\n\tbare = false\n\tworktree = ../../../lib\n",
    );
    fs.text(
        "/work/ws/.git/modules/lib/modules/deep/config",
        "[core]\n\tworktree = ../../../../../lib/deep\n",
    );
    fs.text(
        "/work/ws/.git/modules/vendor/x/config",
        "[remote \"origin\"]\n\tworktree = nope\n[Core]\n\tWorktree = \"../../../../vendor/x\"\n",
    );
    fs.text(
        "/work/ws/.git/modules/linked/config",
        "[core]\n\tworktree = ../../../lnk\n",
    );
    fs.link("/work/ws/lnk", "real");
    fs.text("/work/ws/lib/.git", "gitdir: ../.git/modules/lib\n");
    fs.dir("/work/ws/lib/deep/.git"); // an embedded one
                                      // `.gitmodules` names one not checked out (no git directory yet), an
                                      // embedded one, one already found, and paths outside the checkout.
    fs.dir("/work/ws/uninit");
    fs.dir("/work/ws/emb");
    fs.dir("/work/ws/emb/.git");
    fs.text(
        "/work/ws/.gitmodules",
        "[submodule \"u\"]\n\tpath = uninit\n\turl = x\n[submodule \"e\"]\n\tpath = emb\n[submodule \"lib\"]\n\tpath = lib\n[submodule \"bad\"]\n\tpath = ../../etc\n\tpath = /etc\n[core]\n\tpath = nope\n",
    );
    let p = plan_with(&fs, &opts(&["true"]), 1000).unwrap();
    let a = &p.bwrap_argv;
    for g in [
        "/work/ws/.git",
        "/work/ws/lib/.git",
        "/work/ws/lib/deep/.git",
        "/work/ws/emb/.git",
    ] {
        assert!(pos(a, &["--ro-bind-try", g, g]).is_some(), "{g}: {a:?}");
    }
    assert_eq!(
        a.iter().filter(|x| *x == "/work/ws/lib/.git").count(),
        2,
        "once: {a:?}"
    );
    // The submodule's git directory is inside `.git`: no mount of its own.
    assert!(!a.iter().any(|x| x == "/work/ws/.git/modules/lib"), "{a:?}");
    assert!(
        !a.iter()
            .any(|x| x.starts_with("/etc/.git") || x.contains("nope")),
        "{a:?}"
    );
    assert_eq!(
        p.git_absent,
        [
            PathBuf::from("/work/ws/vendor/x/.git"),
            PathBuf::from("/work/ws/uninit/.git")
        ]
    );
    assert!(
        p.notes.iter().any(|n| n.starts_with(
            "/work/ws/lnk/.git (a submodule of /work/ws/.git) is reached through /work/ws/lnk, which is a symlink and stays writable"
        )),
        "{:?}",
        p.notes
    );
    assert!(!a.iter().any(|x| x.contains("real")), "{a:?}");
    // `--git rw`: none of it.
    let mut o = opts(&["true"]);
    o.git = Some(GitAccess::Rw);
    let p = plan_with(&fs, &o, 1000).unwrap();
    assert!(!p.bwrap_argv.iter().any(|x| x.ends_with("/.git")));
    assert!(p.git_absent.is_empty());
    // No `modules`: one lstat, nothing more.
    assert!(submodule_trees(&FakeFs::host(), Path::new("/work/ws/.git")).is_empty());
    assert_eq!(
        core_worktree(b"[core]\nworktree=/abs/x\n").as_deref(),
        Some("/abs/x")
    );
}

/// bwrap mounts by path, following symlinks: a path some sandbox can
/// rename on the way (a concurrent run in the same workspace) is listed for
/// the helper to check (a mount root there, holding the planned file);
/// paths below root-owned directories only root may write are not.
#[test]
fn mounts_a_sandbox_could_redirect_are_checked() {
    let mut fs = FakeFs::host();
    for d in ["/", "/usr", "/etc", "/work"] {
        fs.nodes
            .insert(d.into(), (crate::paths::fake::Node::Dir, 0, 0));
    }
    fs.nodes.insert(
        "/etc/shadow".into(),
        (crate::paths::fake::Node::File { nlink: 1 }, 0, 0),
    );
    fs.dir("/work/ws/.git");
    fs.dir("/work/ws/sub");
    fs.dir("/work/ws/docs");
    let mut o = opts(&["true"]);
    o.rw.push("/work/ws/sub".into());
    o.ro.push("/work/ws/docs".into());
    o.hide.push("/work/ws/secret".into());
    fs.dir("/work/ws/secret");
    let p = plan_with(&fs, &o, 1000).unwrap();
    let pol = p.helper_policy.as_ref().unwrap();
    let listed: Vec<(String, bool)> = pol["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_string(),
                m.get("identity").is_some(),
            )
        })
        .collect();
    let id = |fs: &FakeFs, p: &str| {
        let m = fs.lstat(Path::new(p)).unwrap().id;
        serde_json::json!([m.0, m.1])
    };
    // `/work` is root's: nothing can rename the workspace itself.
    assert!(!listed.iter().any(|(p, _)| p == "/work/ws"), "{listed:?}");
    for (path, with_id) in [
        ("/work/ws/sub", true),
        ("/work/ws/docs", true),
        ("/work/ws/.git", true),
        ("/work/ws/secret", false),
    ] {
        assert!(
            listed.contains(&(path.to_string(), with_id)),
            "{path}: {listed:?}"
        );
        if with_id {
            let m = pol["mounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["path"] == path)
                .unwrap();
            assert_eq!(m["identity"], id(&fs, path), "{path}");
        }
    }
    for held in ["/usr", "/etc", "/etc/shadow"] {
        assert!(!listed.iter().any(|(p, _)| p == held), "{held}: {listed:?}");
    }
    // A workspace in a directory a sandbox could write: listed too.
    fs.dir("/work");
    let p = plan_with(&fs, &o, 1000).unwrap();
    let pol = p.helper_policy.as_ref().unwrap();
    assert!(
        pol["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["path"] == "/work/ws" && m["identity"] == id(&fs, "/work/ws")),
        "{pol}"
    );
    // Without bwrap there are no mounts to check; without the helper no one.
    for layers in [Layers::Inner, Layers::Outer] {
        let mut o = o.clone();
        o.layers = layers;
        let p = plan_with(&fs, &o, 1000).unwrap();
        assert!(p
            .helper_policy
            .as_ref()
            .is_none_or(|pol| pol.get("mounts").is_none()));
    }
}

/// Read-only roots are mounted parents first: `--ro WS/x` with a read-only
/// workspace (public-bot) was mounted before the workspace, which covered
/// it — harmless then, but the helper's mount check (rightly) found it
/// missing and refused every `cordon verify --profile public-bot` run.
#[test]
fn read_only_roots_parents_first() {
    let mut fs = FakeFs::host();
    fs.file("/work/ws/ro.txt", 1);
    let mut o = opts(&["true"]);
    o.ro.push("/work/ws/ro.txt".into());
    let prof = builtin("public-bot").unwrap();
    let p = build(&prof, &o, &host(1000), &fs).unwrap();
    let a = &p.bwrap_argv;
    let ws = pos(a, &["--ro-bind", "/work/ws", "/work/ws"]).expect("read-only workspace");
    let f = pos(a, &["--ro-bind", "/work/ws/ro.txt", "/work/ws/ro.txt"]).unwrap();
    assert!(ws < f, "{a:?}");
}

/// Red-team round 3's false positives of the mount check: a path both
/// `--ro` and `--hide` is checked as the mask that ends up on top (no
/// identity, read-only); a writable path inside a read-only one inside the
/// workspace is mounted after it (before, the read-only parent covered it
/// and `m/n` was silently read-only).
#[test]
fn mount_checks_follow_what_ends_on_top() {
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/x");
    fs.dir("/work/ws/m");
    fs.dir("/work/ws/m/n");
    let mut o = opts(&["true"]);
    o.ro.push("/work/ws/x".into());
    o.hide.push("/work/ws/x".into());
    o.ro.push("/work/ws/m".into());
    o.rw.push("/work/ws/m/n".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    let pol = p.helper_policy.as_ref().unwrap();
    let checks: Vec<&serde_json::Value> = pol["mounts"].as_array().unwrap().iter().collect();
    let x: Vec<_> = checks
        .iter()
        .filter(|m| m["path"] == "/work/ws/x")
        .collect();
    assert_eq!(x.len(), 1, "{checks:?}");
    assert!(
        x[0].get("identity").is_none() && x[0]["ro"] == true,
        "{x:?}"
    );
    let a = &p.bwrap_argv;
    let m = pos(a, &["--ro-bind", "/work/ws/m", "/work/ws/m"]).unwrap();
    let n = pos(a, &["--bind", "/work/ws/m/n", "/work/ws/m/n"]).unwrap();
    assert!(m < n, "{a:?}");
    let nc = checks.iter().find(|c| c["path"] == "/work/ws/m/n").unwrap();
    assert_eq!(nc["ro"], false);
}

/// Scratch tmpfs are sized (their pages are host memory the OOM killer does
/// not charge to the writer); masks are empty and read-only.
#[test]
fn scratch_tmpfs_sizes() {
    assert_eq!(default_tmpfs_size(16 << 30), 2 << 30);
    assert_eq!(default_tmpfs_size(256 << 20), 64 << 20, "at least 64 MiB");
    assert_eq!(default_tmpfs_size(0), 1 << 30, "RAM unknown");
    let sizes = |p: &Plan| -> Vec<(String, String)> {
        p.bwrap_argv
            .windows(4)
            .filter(|w| w[0] == "--size" && w[2] == "--tmpfs")
            .map(|w| (w[3].clone(), w[1].clone()))
            .collect()
    };
    let mut prof = builtin("default").unwrap();
    prof.tmpfs.push("/var/tmp".into());
    let mut o = opts(&["true"]);
    o.tmpfs_size = Some(TmpfsSize::Bytes(8 << 20));
    let p = build(&prof, &o, &host(1000), &FakeFs::host()).unwrap();
    let want: Vec<(String, String)> = ["/dev/shm", "/tmp", "/var/tmp", "/home/sandbox"]
        .iter()
        .map(|d| (d.to_string(), (8u64 << 20).to_string()))
        .collect();
    assert_eq!(sizes(&p), want);
    // The profile's size, and the option over it.
    prof.tmpfs_size = Some(TmpfsSize::Bytes(1 << 30));
    let p = build(&prof, &opts(&["true"]), &host(1000), &FakeFs::host()).unwrap();
    assert!(
        sizes(&p).iter().all(|(_, b)| b == "1073741824"),
        "{:?}",
        p.bwrap_argv
    );
    o.tmpfs_size = Some(TmpfsSize::Unlimited);
    let p = build(&prof, &o, &host(1000), &FakeFs::host()).unwrap();
    assert!(
        !p.bwrap_argv.iter().any(|a| a == "--size"),
        "{:?}",
        p.bwrap_argv
    );
    assert!(pos(&p.bwrap_argv, &["--tmpfs", "/tmp"]).is_some());

    // A masked directory: an empty tmpfs, then read-only.
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/secret");
    let mut o = opts(&["true"]);
    o.hide.push("/work/ws/secret".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    assert!(
        pos(
            &p.bwrap_argv,
            &[
                "--tmpfs",
                "/work/ws/secret",
                "--remount-ro",
                "/work/ws/secret"
            ]
        )
        .is_some(),
        "{:?}",
        p.bwrap_argv
    );
}

#[test]
fn tmpfs_size_parsing() {
    let ok = |s: &str| TmpfsSize::parse(s).unwrap();
    assert_eq!(ok("512M"), TmpfsSize::Bytes(512 << 20));
    assert_eq!(ok("4g"), TmpfsSize::Bytes(4 << 30));
    assert_eq!(ok("1048576"), TmpfsSize::Bytes(1 << 20));
    assert_eq!(ok("unlimited"), TmpfsSize::Unlimited);
    for bad in [
        "",
        "M",
        "1.5G",
        "-1",
        "4GB",
        "lots",
        "99999999999999999999",
        "99999999999T",
    ] {
        assert!(TmpfsSize::parse(bad).is_err(), "{bad:?}");
    }
    assert!(TmpfsSize::parse("0").unwrap_err().contains("say unlimited"));
    let e = "--tmpfs-size".to_string();
    let err = "4GB".parse::<TmpfsSize>().unwrap_err().to_string();
    assert!(
        err.contains(&e) && err.contains("expected a size like 512M"),
        "{err}"
    );
    // In a profile: a number of bytes or a string.
    let cfg = crate::policy::Config::parse(
        Path::new("c.toml"),
        "[profiles.a]\ntmpfs_size = \"2G\"\n[profiles.b]\ntmpfs_size = 1048576\n",
    )
    .unwrap();
    assert_eq!(
        cfg.profiles["a"].tmpfs_size,
        Some(TmpfsSize::Bytes(2 << 30))
    );
    assert_eq!(
        cfg.profiles["b"].tmpfs_size,
        Some(TmpfsSize::Bytes(1 << 20))
    );
    let e = crate::policy::Config::parse(Path::new("c.toml"), "[profiles.a]\ntmpfs_size = \"0\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("say unlimited"), "{e}");
}

/// Built-in profiles cap the sandbox's tasks (a fork bomb would take every
/// pid of the host) where the count is the sandbox's own: under bwrap.
#[test]
fn default_nproc_limit() {
    let nproc = |p: &Plan| {
        p.helper_policy
            .as_ref()
            .map(|v| v["rlimits"]["nproc"].clone())
    };
    let p = plan(&opts(&["true"]));
    assert_eq!(
        nproc(&p),
        Some(serde_json::json!(crate::policy::DEFAULT_NPROC))
    );
    // The profile's own value wins, "unlimited" included.
    let mut prof = builtin("default").unwrap();
    prof.rlimits
        .insert("nproc".into(), serde_json::json!("unlimited"));
    let p = build(&prof, &opts(&["true"]), &host(1000), &FakeFs::host()).unwrap();
    assert_eq!(nproc(&p), Some(serde_json::json!("unlimited")));
    // The helper alone would count the uid's host processes: left out, said.
    let mut o = opts(&["true"]);
    o.layers = Layers::Inner;
    let p = plan(&o);
    assert_eq!(nproc(&p), Some(serde_json::Value::Null));
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("no nproc limit (4096 by default)")),
        "{:?}",
        p.notes
    );
}

#[test]
fn cwd_must_be_visible() {
    let fs = FakeFs::host();
    let mut o = opts(&["true"]);
    o.cwd = Some("/home/alice".into());
    let e = plan_with(&fs, &o, 1000).unwrap_err();
    assert!(e.to_string().contains("not visible"), "{e}");
    o.cwd = Some("/tmp".into());
    assert!(plan_with(&fs, &o, 1000).is_ok());
    o.cwd = Some("/usr/bin".into());
    assert!(plan_with(&fs, &o, 1000).is_ok());
}

#[test]
fn command_resolution() {
    let mut fs = FakeFs::host();
    assert!(matches!(
        plan_with(&fs, &opts(&["nope"]), 1000),
        Err(Error::CommandNotFound(_))
    ));
    assert!(plan_with(&fs, &opts(&["/usr/bin/true"]), 1000).is_ok());
    assert!(plan_with(&fs, &opts(&["/bin/true"]), 1000).is_ok());
    // Present on the host but not visible inside.
    fs.file("/home/alice/tool", 1);
    assert!(matches!(
        plan_with(&fs, &opts(&["/home/alice/tool"]), 1000),
        Err(Error::CommandNotFound(_))
    ));
}

#[test]
fn trusted_maintenance_host_root() {
    let mut fs = FakeFs::host();
    fs.dir("/opt");
    let prof = builtin("trusted-maintenance").unwrap();
    let mut o = opts(&["true"]);
    o.cache_root = Some("/var".into());
    let p = build(&prof, &o, &host(1000), &fs).unwrap();
    let a = &p.bwrap_argv;
    assert!(pos(a, &["--ro-bind-try", "/opt", "/opt"]).is_some());
    assert!(pos(a, &["--ro-bind-try", "/root", "/root"]).is_some());
    assert!(pos(a, &["--tmpfs", "/root/.ssh"]).is_some(), "{a:?}");
    assert!(pos(a, &["--tmpfs", "/home"]).is_some());
    for hidden in ["/sys", "/run", "/proc"] {
        assert!(pos(a, &["--ro-bind-try", hidden, hidden]).is_none());
    }
    assert!(pos(a, &["--ro-bind-data", "7", "/etc/shadow"]).is_some());
    assert!(pos(a, &["--bind", "/var", "/var"]).is_some());
    let pol = p.helper_policy.unwrap();
    assert_eq!(pol["env"]["set"]["XDG_CACHE_HOME"], "/var/cache");
    assert!(a.contains(&"--share-net".to_string()));
    // Read-only roots carry their identity, except one a later mount covers
    // (the tmpfs over /home): the helper would meet the tmpfs there.
    let rule = |path: &str| {
        pol["filesystem"]["allow"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .cloned()
            .unwrap_or_else(|| panic!("{path}: {pol}"))
    };
    assert!(rule("/opt")["identity"].is_array(), "{pol}");
    assert!(rule("/usr")["identity"].is_array(), "{pol}");
    assert!(rule("/home").get("identity").is_none(), "{pol}");
}

#[test]
fn public_bot_no_etc_ro_workspace() {
    let mut fs = FakeFs::host();
    fs.dir("/nix");
    fs.dir("/nix/store");
    let p = build(
        &builtin("public-bot").unwrap(),
        &opts(&["true"]),
        &host(1000),
        &fs,
    )
    .unwrap();
    let a = &p.bwrap_argv;
    assert!(!a.iter().any(|x| x == "/etc"));
    assert!(pos(a, &["--ro-bind", "/work/ws", "/work/ws"]).is_some());
    assert!(!a.iter().any(|x| x == "--bind"));
    assert!(pos(a, &["--ro-bind-try", "/nix/store", "/nix/store"]).is_some());
}

#[test]
fn layers_inner_and_outer() {
    let mut o = opts(&["true"]);
    o.layers = Layers::Inner;
    let p = plan(&o);
    assert!(p.bwrap_argv.is_empty());
    assert_eq!(
        p.inner_argv[..5],
        ["/proc/self/fd/6", "--policy-fd", "5", "--report-fd", "3"]
    );
    assert!(p.helper_policy.is_some());
    o.layers = Layers::Outer;
    let p = plan(&o);
    assert!(p.helper_policy.is_none());
    let dd = p.bwrap_argv.iter().position(|x| x == "--").unwrap();
    assert_eq!(p.bwrap_argv[dd + 1..], ["true"]);
    assert!(!p.bwrap_argv.iter().any(|x| x.contains(".cordon")));
}

#[test]
fn helper_policy_mirrors_mounts() {
    let p = plan(&opts(&["true"]));
    let pol = p.helper_policy.unwrap();
    let allow = pol["filesystem"]["allow"].as_array().unwrap();
    let has = |path: &str, access: &str| {
        allow
            .iter()
            .any(|r| r["path"] == path && r["access"] == access)
    };
    assert!(has("/usr", "execute"));
    assert!(has("/etc", "execute"));
    assert!(has("/work/ws", "readwriteexecute"));
    assert!(has("/tmp", "readwriteexecute"));
    assert!(has("/dev", "readwrite"));
    assert!(has("/home/sandbox", "readwriteexecute"));
    assert!(pol.get("network").is_none());
    assert!(pol.get("syscalls").is_none(), "default syscall profile");
    assert_eq!(pol["landlock"]["compat"], "hard_requirement");
    // Both layers: bwrap masks each denied path; the helper verifies the
    // mask instead of carving it out of /etc (docs/policy.md).
    assert_eq!(
        pol["filesystem"]["deny"],
        serde_json::json!([
            {"path": "/etc/shadow", "masked": true},
            {"path": "/etc/gshadow", "masked": true}
        ])
    );
    assert_eq!(pol["rlimits"]["core"], 0);
}

#[test]
fn proc_strategies() {
    let fs = FakeFs::host();
    for (s, want) in [
        (ProcStrategy::Fresh, vec!["--proc", "/proc"]),
        (ProcStrategy::BindRo, vec!["--ro-bind", "/proc", "/proc"]),
        (ProcStrategy::Tmpfs, vec!["--tmpfs", "/proc"]),
    ] {
        let mut h = host(1000);
        h.proc = s;
        let p = build(&builtin("default").unwrap(), &opts(&["true"]), &h, &fs).unwrap();
        assert!(pos(&p.bwrap_argv, &want).is_some(), "{s:?}");
        // The helper runs from its fd through /proc/self/fd, except when the
        // sandbox's /proc is empty: then bwrap binds that fd under /.cordon.
        let bound = pos(
            &p.bwrap_argv,
            &["--ro-bind-fd", "6", "/.cordon/cordon-helper"],
        );
        let argv0 = &p.inner_argv[0];
        if s == ProcStrategy::Tmpfs {
            assert!(bound.is_some(), "{s:?}");
            assert_eq!(argv0, "/.cordon/cordon-helper");
        } else {
            assert!(bound.is_none(), "{s:?}");
            assert_eq!(argv0, "/proc/self/fd/6");
        }
        assert!(
            !p.bwrap_argv
                .iter()
                .any(|x| x.contains("policy.json") || x == "--perms"),
            "{s:?}"
        );
    }
}

#[test]
fn ro_root_under_tmp_is_mounted_after_the_tmpfs() {
    let mut fs = FakeFs::host();
    fs.dir("/tmp/data");
    let mut o = opts(&["true"]);
    o.ro.push("/tmp/data".into());
    let p = plan_with(&fs, &o, 1000).unwrap();
    let t = pos(&p.bwrap_argv, &["--tmpfs", "/tmp"]).unwrap();
    let r = pos(&p.bwrap_argv, &["--ro-bind", "/tmp/data", "/tmp/data"]).unwrap();
    assert!(r > t);
    // ...but the host /home stays covered by trusted-maintenance's tmpfs.
    let p = build(
        &builtin("trusted-maintenance").unwrap(),
        &opts(&["true"]),
        &host(1000),
        &fs,
    )
    .unwrap();
    let b = pos(&p.bwrap_argv, &["--ro-bind-try", "/home", "/home"]).unwrap();
    let t = pos(&p.bwrap_argv, &["--tmpfs", "/home"]).unwrap();
    assert!(t > b);
}

#[test]
fn implicit_workspace_the_sandbox_uid_cannot_write_is_mounted_read_only() {
    // Root, cwd owned by root (0755): nobody cannot write it. Named with
    // --workspace that is an error (see above); as the implicit cwd it is
    // mounted read-only with a note, and nothing becomes writable.
    let mut fs = FakeFs::host();
    fs.owner("/work/ws", 0);
    let mut o = opts(&["true"]);
    o.workspace_implicit = true;
    let p = plan_with(&fs, &o, 0).unwrap();
    assert!(pos(&p.bwrap_argv, &["--ro-bind", "/work/ws", "/work/ws"]).is_some());
    assert!(pos(&p.bwrap_argv, &["--bind", "/work/ws", "/work/ws"]).is_none());
    assert!(
        p.notes.iter().any(|n| n.contains("read-only")),
        "{:?}",
        p.notes
    );
    o.workspace_implicit = false;
    assert!(matches!(plan_with(&fs, &o, 0), Err(Error::Uid(_))));
}

/// The memoizing Fs the launcher plans with gives exactly the plan (and the
/// errors) the plain one gives.
#[test]
fn cached_fs_plans_identically() {
    let fs = FakeFs::host();
    for cmd in [
        &["true"][..],
        &["sh", "-c", "x"],
        &["/nonexistent"],
        &["rel/x"],
    ] {
        for euid in [0, 1000] {
            let o = opts(cmd);
            let plain = plan_with(&fs, &o, euid);
            let cached = build(
                &builtin("default").unwrap(),
                &o,
                &host(euid),
                &crate::paths::CachedFs::new(&fs),
            );
            match (plain, cached) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.bwrap_argv, b.bwrap_argv);
                    assert_eq!(a.helper_policy, b.helper_policy);
                    assert_eq!(a.env, b.env);
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{cmd:?}: {:?} vs {:?}", a.is_ok(), b.is_ok()),
            }
        }
    }
}

/// The shadow backups are masked exactly where the sandbox's uid and groups
/// could read them; elsewhere a note says the file mode keeps them out.
#[test]
fn shadow_backups_masked_only_where_readable() {
    let run = |mode: u32, acl: bool, euid: u32, groups: Vec<u32>| {
        let mut fs = FakeFs::host();
        fs.file("/etc/shadow-", 1);
        fs.perms("/etc/shadow-", 0, 42, mode);
        if acl {
            fs.acls.insert("/etc/shadow-".into());
        }
        let mut h = host(euid);
        h.groups = Some(groups);
        let p = build(&builtin("default").unwrap(), &opts(&["true"]), &h, &fs).unwrap();
        let masked = pos(&p.bwrap_argv, &["/etc/shadow-"]).is_some();
        let deny = &p.helper_policy.as_ref().unwrap()["filesystem"]["deny"];
        let denied = deny
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"path": "/etc/shadow-", "masked": true}));
        assert_eq!(masked, denied, "argv and policy agree");
        let noted = p
            .notes
            .iter()
            .any(|n| n.starts_with("hide /etc/shadow-: not masked"));
        assert_ne!(masked, noted, "{:?}", p.notes);
        masked
    };
    // 0640 root:shadow, as Debian leaves it: uid 1000 outside the group.
    assert!(!run(0o640, false, 1000, vec![]));
    // The same path twice is one mask.
    let mut o = opts(&["true"]);
    o.hide.push("/etc/passwd".into());
    o.hide.push("/etc/passwd".into());
    let p = build(
        &builtin("default").unwrap(),
        &o,
        &host(1000),
        &FakeFs::host(),
    )
    .unwrap();
    assert_eq!(
        p.bwrap_argv.iter().filter(|a| *a == "/etc/passwd").count(),
        1,
        "{:?}",
        p.bwrap_argv
    );
    // Named by --hide (or a profile's hide): masked, and no note says otherwise.
    let mut fs = FakeFs::host();
    fs.file("/etc/shadow-", 1);
    fs.perms("/etc/shadow-", 0, 42, 0o640);
    let mut o = opts(&["true"]);
    o.hide.push("/etc/shadow-".into());
    let p = build(&builtin("default").unwrap(), &o, &host(1000), &fs).unwrap();
    assert!(pos(&p.bwrap_argv, &["/etc/shadow-"]).is_some());
    assert!(
        !p.notes.iter().any(|n| n.contains("not masked")),
        "{:?}",
        p.notes
    );
    // The caller is in group shadow (42), which the sandbox keeps.
    assert!(run(0o640, false, 1000, vec![42]));
    // As root the launcher switches uid and clears the groups.
    assert!(!run(0o640, false, 0, vec![0, 42]));
    // World-readable, or an ACL that may grant more than the mode.
    assert!(run(0o644, false, 1000, vec![]));
    assert!(run(0o640, true, 1000, vec![]));
    // Groups unknown: assume the worst.
    let mut fs = FakeFs::host();
    fs.file("/etc/shadow-", 1);
    fs.perms("/etc/shadow-", 0, 42, 0o640);
    let mut h = host(1000);
    h.groups = None;
    let p = build(&builtin("default").unwrap(), &opts(&["true"]), &h, &fs).unwrap();
    assert!(pos(&p.bwrap_argv, &["/etc/shadow-"]).is_some());
    // A directory counts as readable when its class may read or search it:
    // the TLS key directory (0710 root:ssl-cert) only for a caller in the group.
    let tls = |groups: Vec<u32>| {
        let mut fs = FakeFs::host();
        fs.dir("/etc/ssl");
        fs.dir("/etc/ssl/private");
        fs.perms("/etc/ssl/private", 0, 103, 0o710);
        let mut h = host(1000);
        h.groups = Some(groups);
        let p = build(&builtin("default").unwrap(), &opts(&["true"]), &h, &fs).unwrap();
        pos(&p.bwrap_argv, &["--tmpfs", "/etc/ssl/private"]).is_some()
    };
    assert!(!tls(vec![]));
    assert!(tls(vec![103]));
    // Absent backups are neither masked nor noted.
    let p = plan(&opts(&["true"]));
    assert!(
        !p.notes.iter().any(|n| n.contains("shadow-")),
        "{:?}",
        p.notes
    );
}

/// A writable path the sandbox uid cannot write is refused, file or
/// directory (a file used to pass, and the write then failed inside); a cache
/// root must be a directory.
#[test]
fn writable_paths_must_be_writable_by_the_sandbox_uid() {
    let mut fs = FakeFs::host();
    fs.file("/work/notes.txt", 1);
    fs.perms("/work/notes.txt", 0, 0, 0o644);
    let mut o = opts(&["true"]);
    o.rw.push("/work/notes.txt".into());
    assert!(matches!(
        build(&builtin("default").unwrap(), &o, &host(1000), &fs),
        Err(Error::Uid(_))
    ));
    // Control: group-writable for the sandbox's gid, or its own file.
    fs.perms("/work/notes.txt", 0, 1000, 0o664);
    assert!(build(&builtin("default").unwrap(), &o, &host(1000), &fs).is_ok());
    fs.perms("/work/notes.txt", 1000, 1000, 0o644);
    assert!(build(&builtin("default").unwrap(), &o, &host(1000), &fs).is_ok());

    let mut o = opts(&["true"]);
    o.cache_root = Some("/work/notes.txt".into());
    let e = build(&builtin("default").unwrap(), &o, &host(1000), &fs).unwrap_err();
    assert!(e.to_string().contains("must be a directory"), "{e}");
}

/// `--hide` of a path under a filesystem of the sandbox's own (a fresh /proc,
/// /dev, /tmp) says so rather than "not visible".
#[test]
fn hide_under_a_sandbox_filesystem_says_so() {
    let fs = FakeFs::host();
    let mut o = opts(&["true"]);
    o.hide.push("/proc".into());
    let p = build(&builtin("default").unwrap(), &o, &host(1000), &fs).unwrap();
    assert!(
        p.notes
            .iter()
            .any(|n| n == "hide /proc: the sandbox has its own filesystem there, not the host's"),
        "{:?}",
        p.notes
    );
}

/// Directories between a writable bind and a nested mask or read-only bind
/// are bound onto themselves, parents first, so that the command cannot
/// rename the protection away.
#[test]
fn nested_protections_are_pinned() {
    let mut fs = FakeFs::host();
    fs.dir("/work/ws/config");
    fs.dir("/work/ws/config/deep");
    fs.file("/work/ws/config/deep/key.env", 1);
    fs.dir("/work/ws/cfg");
    fs.file("/work/ws/cfg/policy.txt", 1);
    let mut o = opts(&["true"]);
    o.hide.push("/work/ws/config/deep/key.env".into());
    o.ro.push("/work/ws/cfg/policy.txt".into());
    let p = build(&builtin("default").unwrap(), &o, &host(1000), &fs).unwrap();
    let a = &p.bwrap_argv;
    let ws = pos(a, &["--bind", "/work/ws", "/work/ws"]).unwrap();
    let config = pos(a, &["--bind", "/work/ws/config", "/work/ws/config"]).unwrap();
    let deep = pos(
        a,
        &["--bind", "/work/ws/config/deep", "/work/ws/config/deep"],
    )
    .unwrap();
    let cfg = pos(a, &["--bind", "/work/ws/cfg", "/work/ws/cfg"]).unwrap();
    let mask = a
        .iter()
        .position(|x| x == "/work/ws/config/deep/key.env")
        .unwrap();
    let ro = pos(
        a,
        &[
            "--ro-bind",
            "/work/ws/cfg/policy.txt",
            "/work/ws/cfg/policy.txt",
        ],
    )
    .unwrap();
    assert!(ws < config && config < deep && deep < mask, "{a:?}");
    assert!(ws < cfg && cfg < ro, "{a:?}");
    // Each pin's rule carries its identity, checked by the helper.
    let allow = p.helper_policy.as_ref().unwrap()["filesystem"]["allow"].clone();
    for pin in ["/work/ws/config", "/work/ws/config/deep", "/work/ws/cfg"] {
        let r = allow
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == pin)
            .unwrap_or_else(|| panic!("{pin}: {allow}"));
        assert!(r["identity"].is_array(), "{r}");
    }
    // Nothing is pinned without a nested protection.
    let p = build(
        &builtin("default").unwrap(),
        &opts(&["true"]),
        &host(1000),
        &fs,
    )
    .unwrap();
    assert!(pos(
        &p.bwrap_argv,
        &["--bind", "/work/ws/config", "/work/ws/config"]
    )
    .is_none());
}

/// The current directory as the implicit workspace is mounted read-only
/// when it is, or holds, a home directory; named with --workspace it is
/// writable as asked.
#[test]
fn implicit_workspace_at_a_home_is_read_only() {
    let fs = FakeFs::host();
    let mut h = host(1000);
    h.homes = vec!["/home/alice".into()];
    for cwd in ["/home/alice", "/home"] {
        let mut o = opts(&["true"]);
        o.workspace = cwd.into();
        o.workspace_implicit = true;
        let p = build(&builtin("default").unwrap(), &o, &h, &fs).unwrap();
        assert!(pos(&p.bwrap_argv, &["--bind", cwd, cwd]).is_none(), "{cwd}");
        assert!(
            p.notes.iter().any(|n| n.contains("home directory")),
            "{:?}",
            p.notes
        );
        o.workspace_implicit = false;
        let p = build(&builtin("default").unwrap(), &o, &h, &fs).unwrap();
        assert!(pos(&p.bwrap_argv, &["--bind", cwd, cwd]).is_some(), "{cwd}");
    }
    // Control: a project directory below the home stays writable.
    let mut fs = FakeFs::host();
    fs.dir("/home/alice/proj");
    let mut o = opts(&["true"]);
    o.workspace = "/home/alice/proj".into();
    o.workspace_implicit = true;
    let p = build(&builtin("default").unwrap(), &o, &h, &fs).unwrap();
    assert!(pos(
        &p.bwrap_argv,
        &["--bind", "/home/alice/proj", "/home/alice/proj"]
    )
    .is_some());
}

/// A home outside /home (a service account's, from /etc/passwd) counts as
/// a home for the implicit workspace too.
#[test]
fn implicit_workspace_at_a_passwd_home_is_read_only() {
    let mut fs = FakeFs::host();
    fs.dir("/var/lib");
    fs.dir("/var/lib/postgresql");
    let mut h = host(1000);
    h.passwd_homes = vec![
        "/var/lib/postgresql".into(),
        "/nonexistent".into(),
        "/".into(),
    ];
    let mut o = opts(&["true"]);
    o.workspace = "/var/lib/postgresql".into();
    o.workspace_implicit = true;
    let p = build(&builtin("default").unwrap(), &o, &h, &fs).unwrap();
    let ws = "/var/lib/postgresql";
    assert!(
        pos(&p.bwrap_argv, &["--bind", ws, ws]).is_none(),
        "{:?}",
        p.bwrap_argv
    );
    assert!(
        p.notes
            .iter()
            .any(|n| n.contains("home directory /var/lib/postgresql")),
        "{:?}",
        p.notes
    );
    // Control: an unrelated directory stays writable ("/" as a home holds nothing).
    o.workspace = "/work/ws".into();
    let p = build(&builtin("default").unwrap(), &o, &h, &fs).unwrap();
    assert!(pos(&p.bwrap_argv, &["--bind", "/work/ws", "/work/ws"]).is_some());
}

/// A setgid writable directory gets a note under the default syscall
/// profile (chmod keeping a directory's setgid bit fails there); not with
/// the outer layer alone, and not for an ordinary workspace.
#[test]
fn setgid_workspace_is_noted() {
    let setgid = |fs: &FakeFs, o: &Options| {
        plan_with(fs, o, 1000)
            .unwrap()
            .notes
            .iter()
            .any(|n| n.contains("/work/ws is setgid"))
    };
    let mut fs = FakeFs::host();
    let o = opts(&["true"]);
    assert!(!setgid(&fs, &o), "ordinary workspace");
    fs.perms("/work/ws", 1000, 1000, 0o2775);
    assert!(setgid(&fs, &o));
    let mut outer = opts(&["true"]);
    outer.layers = Layers::Outer;
    assert!(!setgid(&fs, &outer), "no helper, no filter");
}
