//! Shared harness for the end-to-end tests: run the real `cordon-helper`
//! against the real kernel, with `cordon-probe` as the attacker.
//!
//! Binaries come from `CORDON_HELPER_BIN`, `CORDON_PROBE_BIN` and `CORDON_BIN`
//! (exported by `scripts/test`), else from `$CARGO_TARGET_DIR` or the
//! workspace's `target/` (`x86_64-unknown-linux-musl/release/…`). A missing
//! binary is a test FAILURE naming the fix (never a silent skip).
//!
//! Everything that changes kernel state happens in a child process (the helper
//! or the probe), never in the multi-threaded test process. Every spawned
//! command gets `RLIMIT_CORE = 0` (a SIGSYS must not leave core files) and a
//! timeout.
//!
//! The same test executables run twice under `scripts/test`: as root and as
//! the unprivileged `cordon-test` (with `TMPDIR` owned by it). Use
//! [`is_root`] where the expected result depends on the uid.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use serde_json::{json, Value};

/// Exit codes of `cordon-helper` (docs/helper.md).
pub mod exit {
    pub const USAGE: i32 = 64;
    pub const POLICY: i32 = 70;
    pub const LANDLOCK: i32 = 71;
    pub const SECCOMP: i32 = 72;
    pub const CAPS: i32 = 73;
    pub const EXEC: i32 = 74;
    pub const PERMISSION: i32 = 75;
    pub const SETUID: i32 = 76;
}

/// Default time limit for one spawned command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

const MUSL: &str = "x86_64-unknown-linux-musl";

// ---------------------------------------------------------------------------
// Binaries.

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn find_bin(var: &str, rel: &str) -> PathBuf {
    if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        assert!(
            p.is_file(),
            "{var}={} does not exist: build the binaries with scripts/build and run the tests with scripts/test",
            p.display()
        );
        return p;
    }
    let mut tried = Vec::new();
    let mut dirs = Vec::new();
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        dirs.push(PathBuf::from(t));
    }
    dirs.push(workspace_root().join("target"));
    for d in dirs {
        let p = d.join(rel);
        if p.is_file() {
            return p;
        }
        tried.push(p.display().to_string());
    }
    panic!(
        "{var} is not set and no binary at {}: run scripts/test (it builds the release binaries \
         with scripts/build and exports {var}); these tests never skip",
        tried.join(" or ")
    );
}

/// `cordon-helper` (static, musl).
pub fn helper_bin() -> PathBuf {
    find_bin(
        "CORDON_HELPER_BIN",
        &format!("{MUSL}/release/cordon-helper"),
    )
}

/// `cordon-probe` (static, musl).
pub fn probe_bin() -> PathBuf {
    find_bin("CORDON_PROBE_BIN", &format!("{MUSL}/release/cordon-probe"))
}

/// `cordon` (the launcher, host target).
pub fn cordon_bin() -> PathBuf {
    find_bin("CORDON_BIN", &format!("{MUSL}/release/cordon"))
}

// ---------------------------------------------------------------------------
// Identity and kernel facts.

/// Effective uid is 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Real uid.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

/// Real gid.
pub fn gid() -> u32 {
    // SAFETY: getgid has no preconditions.
    unsafe { libc::getgid() }
}

/// The running kernel's Landlock ABI (0 when Landlock is unavailable).
/// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only
/// queries: it creates nothing.
pub fn landlock_abi() -> i64 {
    // SAFETY: a null attr with size 0 and the VERSION flag only returns the ABI.
    let r = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32) };
    r.max(0)
}

/// Fail (never skip) when the kernel's Landlock ABI is below `min`.
pub fn require_landlock_abi(min: i64, what: &str) {
    let abi = landlock_abi();
    assert!(
        abi >= min,
        "{what} needs Landlock ABI {min}, this kernel has {abi}: run these tests on a newer kernel"
    );
}

/// A `Cap*:` or other field of this process's /proc/self/status.
pub fn self_status_field(key: &str) -> String {
    let s = fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("{key} not in /proc/self/status"))
}

// ---------------------------------------------------------------------------
// Fixtures.

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A private temp tree (under `$TMPDIR`):
///
/// ```text
/// <root>/workspace/           the sandbox's writable workspace
/// <root>/tmp/                 a writable scratch dir (TMPDIR for workloads)
/// <root>/outside/secret.txt   contains `secret_marker`, never granted
/// <root>/policies/            0700, policy files (0600)
/// ```
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub outside: PathBuf,
    pub secret: PathBuf,
    pub secret_marker: String,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cordon-e2e-")
            .tempdir()
            .expect("tempdir in $TMPDIR");
        let root = fs::canonicalize(dir.path()).expect("canonicalize tempdir");
        let workspace = root.join("workspace");
        let tmp = root.join("tmp");
        let outside = root.join("outside");
        for d in [&workspace, &tmp, &outside] {
            fs::create_dir(d).expect("mkdir fixture");
        }
        fs::create_dir(root.join("policies")).expect("mkdir policies");
        fs::set_permissions(root.join("policies"), fs::Permissions::from_mode(0o700)).unwrap();
        let secret_marker = format!(
            "cordon-secret-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let secret = outside.join("secret.txt");
        fs::write(&secret, format!("{secret_marker}\n")).expect("write secret");
        Fixture {
            _dir: dir,
            root,
            workspace,
            tmp,
            outside,
            secret,
            secret_marker,
        }
    }

    /// Write `text` as a fresh 0600 policy file owned by us; return its path.
    pub fn policy_text(&self, text: &str) -> PathBuf {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let p = self.root.join("policies").join(format!("policy-{n}.json"));
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
            .expect("create policy file");
        f.write_all(text.as_bytes()).expect("write policy");
        // Mode is exactly 0600 whatever the umask.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    /// Write a JSON policy (see [`Fixture::policy_text`]).
    pub fn policy(&self, v: &Value) -> PathBuf {
        self.policy_text(&v.to_string())
    }

    /// The minimal policy for probe runs: the probe may be executed, the
    /// workspace is readwrite, nothing else.
    pub fn base_policy(&self) -> Value {
        json!({
            "filesystem": {
                "allow": [
                    {"path": probe_bin(), "access": "execute"},
                    {"path": self.workspace, "access": "readwrite"},
                ]
            }
        })
    }

    /// [`Fixture::base_policy`] plus `/proc` read and `/dev` readwrite (for
    /// probes that read /proc/self/status or open /dev/ptmx).
    pub fn base_policy_proc_dev(&self) -> Value {
        let mut p = self.base_policy();
        add_allow(&mut p, "/proc", "read");
        add_allow(&mut p, "/dev", "readwrite");
        p
    }

    /// Create `rel` under the workspace with `content`; return its path.
    pub fn ws_file(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.workspace.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, content).unwrap();
        p
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

/// Append `{"path", "access"}` to `filesystem.allow`.
pub fn add_allow(policy: &mut Value, path: impl AsRef<Path>, access: &str) {
    let fsys = policy
        .as_object_mut()
        .expect("policy object")
        .entry("filesystem")
        .or_insert_with(|| json!({}));
    let allow = fsys
        .as_object_mut()
        .unwrap()
        .entry("allow")
        .or_insert_with(|| json!([]));
    allow
        .as_array_mut()
        .unwrap()
        .push(json!({"path": path.as_ref(), "access": access}));
}

/// Set a top-level section of a policy.
pub fn with(mut policy: Value, key: &str, section: Value) -> Value {
    policy
        .as_object_mut()
        .expect("policy object")
        .insert(key.to_string(), section);
    policy
}

/// A `syscalls` section that leaves every syscall allowed (a deny-list filter
/// denying only `acct`): the control for "the seccomp layer blocks it".
pub fn permissive_syscalls() -> Value {
    json!({"deny": ["acct"]})
}

// ---------------------------------------------------------------------------
// Running things.

/// What a finished (or timed-out) command did.
pub struct Run {
    pub desc: String,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub elapsed: Duration,
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "command: {}\n  exit code: {:?}  signal: {:?}{}  ({:?})\n  stdout: {:?}\n  stderr: {:?}",
            self.desc,
            self.code,
            self.signal.map(signal_name),
            if self.timed_out { "  TIMED OUT (killed)" } else { "" },
            self.elapsed,
            self.stdout,
            self.stderr
        )
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `SIGSYS` etc. for messages.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGSYS => "SIGSYS".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGTRAP => "SIGTRAP".into(),
        s => format!("signal {s}"),
    }
}

impl Run {
    /// The probe's result line (first stdout line).
    pub fn line(&self) -> &str {
        self.stdout.lines().next().unwrap_or("")
    }

    fn no_timeout(&self) {
        assert!(!self.timed_out, "timed out:\n{self}");
    }

    /// The probe reported ALLOWED (exit 0, `ALLOWED …`).
    pub fn assert_allowed(&self) -> &Self {
        self.no_timeout();
        assert!(
            self.code == Some(0) && self.line().starts_with("ALLOWED "),
            "expected the probe to report ALLOWED (exit 0):\n{self}"
        );
        self
    }

    /// The probe reported `DENIED <errno>` (exit 1). `errno` is a symbolic
    /// name (`EACCES`) or `-` for a denial without errno.
    pub fn assert_denied(&self, errno: &str) -> &Self {
        self.no_timeout();
        let want = format!("DENIED {errno} ");
        assert!(
            self.code == Some(1) && self.line().starts_with(&want),
            "expected the probe to report `DENIED {errno}` (exit 1):\n{self}"
        );
        self
    }

    /// The command was killed by `sig`.
    pub fn assert_signal(&self, sig: i32) -> &Self {
        self.no_timeout();
        assert_eq!(
            self.signal,
            Some(sig),
            "expected death by {}:\n{self}",
            signal_name(sig)
        );
        self
    }

    /// Exited normally with `code`.
    pub fn assert_exit(&self, code: i32) -> &Self {
        self.no_timeout();
        assert_eq!(self.code, Some(code), "expected exit code {code}:\n{self}");
        self
    }

    /// The helper itself failed with `code`: exactly one stderr line
    /// `cordon-helper: error: …`, no panic, no signal, nothing on stdout.
    pub fn assert_helper_error(&self, code: i32) -> &Self {
        self.no_timeout();
        assert_eq!(self.signal, None, "helper died of a signal:\n{self}");
        assert!(
            !self.stderr.contains("panicked"),
            "helper panicked:\n{self}"
        );
        assert_eq!(
            self.code,
            Some(code),
            "expected helper exit code {code}:\n{self}"
        );
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert!(
            lines.len() == 1 && lines[0].starts_with("cordon-helper: error: "),
            "expected exactly one stderr line `cordon-helper: error: …`:\n{self}"
        );
        assert!(
            self.stdout.is_empty(),
            "expected nothing on stdout:\n{self}"
        );
        self
    }

    /// stderr has no panic message and no signal ended the process.
    pub fn assert_no_crash(&self) -> &Self {
        self.no_timeout();
        assert_eq!(self.signal, None, "died of a signal:\n{self}");
        assert!(!self.stderr.contains("panicked"), "panicked:\n{self}");
        self
    }
}

/// A command to run, with extra inherited fds, env and a timeout.
pub struct Spawn {
    cmd: Command,
    desc: String,
    timeout: Duration,
    fds: Vec<(RawFd, RawFd)>,
    stdin: Option<Vec<u8>>,
    nofile: Option<u64>,
}

impl Spawn {
    /// Any program.
    pub fn new(program: impl AsRef<Path>, args: &[impl AsRef<std::ffi::OsStr>]) -> Self {
        let mut cmd = Command::new(program.as_ref());
        cmd.args(args);
        let mut desc = program.as_ref().display().to_string();
        for a in args {
            desc.push(' ');
            desc.push_str(&a.as_ref().to_string_lossy());
        }
        Spawn {
            cmd,
            desc,
            timeout: DEFAULT_TIMEOUT,
            fds: Vec::new(),
            stdin: None,
            nofile: None,
        }
    }

    /// The probe, directly (no sandbox): the usual control run.
    pub fn probe(args: &[&str]) -> Self {
        Self::new(probe_bin(), args)
    }

    /// `cordon-helper --policy-file POLICY -- CMD...`.
    pub fn helper(policy: &Path, cmd: &[impl AsRef<std::ffi::OsStr>]) -> Self {
        Self::helper_opts(policy, &[], cmd)
    }

    /// `cordon-helper --policy-file POLICY OPTS... -- CMD...`.
    pub fn helper_opts(policy: &Path, opts: &[&str], cmd: &[impl AsRef<std::ffi::OsStr>]) -> Self {
        let mut args: Vec<OsString> = vec!["--policy-file".into(), policy.into()];
        args.extend(opts.iter().map(OsString::from));
        args.push("--".into());
        args.extend(cmd.iter().map(|a| a.as_ref().to_os_string()));
        Self::new(helper_bin(), &args)
    }

    /// `cordon-helper --check --policy-file POLICY`.
    pub fn helper_check(policy: &Path) -> Self {
        let args: Vec<OsString> = vec!["--check".into(), "--policy-file".into(), policy.into()];
        Self::new(helper_bin(), &args)
    }

    /// `cordon-helper` with raw arguments.
    pub fn helper_args(args: &[impl AsRef<std::ffi::OsStr>]) -> Self {
        Self::new(helper_bin(), args)
    }

    /// The probe run by the helper with `policy`.
    pub fn sandboxed(policy: &Path, probe_args: &[&str]) -> Self {
        Self::sandboxed_opts(policy, &[], probe_args)
    }

    /// The probe run by the helper with `policy` and extra helper options.
    pub fn sandboxed_opts(policy: &Path, opts: &[&str], probe_args: &[&str]) -> Self {
        let mut cmd: Vec<OsString> = vec![probe_bin().into()];
        cmd.extend(probe_args.iter().map(OsString::from));
        Self::helper_opts(policy, opts, &cmd)
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Self {
        self.cmd.env(k, v);
        self
    }

    pub fn env_clear(mut self) -> Self {
        self.cmd.env_clear();
        self
    }

    pub fn current_dir(mut self, d: &Path) -> Self {
        self.cmd.current_dir(d);
        self
    }

    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    pub fn stdin_bytes(mut self, b: &[u8]) -> Self {
        self.stdin = Some(b.to_vec());
        self
    }

    /// Start with RLIMIT_NOFILE (soft and hard) at `n`.
    pub fn nofile(mut self, n: u64) -> Self {
        self.nofile = Some(n);
        self.desc.push_str(&format!("  [nofile {n}]"));
        self
    }

    /// Make our fd `src` appear as `dst` (>= 3, inheritable) in the child.
    pub fn inherit_fd(mut self, src: RawFd, dst: RawFd) -> Self {
        assert!(dst >= 3, "only fds above 2");
        self.fds.push((src, dst));
        self.desc.push_str(&format!("  [fd {dst} inherited]"));
        self
    }

    /// Start without waiting.
    pub fn spawn(mut self) -> Running {
        self.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        // Each source first copied above every target (close-on-exec), so a
        // dup2 to one target can never clobber a source still to be used —
        // a report tempfile that happened to be fd 9 used to be replaced by
        // the cover fd bound for 9 before reaching 8 (a rare flake).
        let above = self.fds.iter().map(|f| f.1).max().unwrap_or(2) + 1;
        let high: Vec<std::os::fd::OwnedFd> = self
            .fds
            .iter()
            .map(|&(src, _)| {
                // SAFETY: F_DUPFD_CLOEXEC on an fd the caller keeps open.
                let fd = unsafe { libc::fcntl(src, libc::F_DUPFD_CLOEXEC, above) };
                assert!(
                    fd >= 0,
                    "dup of fd {src}: {}",
                    std::io::Error::last_os_error()
                );
                // SAFETY: a fresh fd owned by nobody else.
                unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }
            })
            .collect();
        let fds: Vec<(RawFd, RawFd)> = high
            .iter()
            .zip(&self.fds)
            .map(|(h, &(_, dst))| (std::os::fd::AsRawFd::as_raw_fd(h), dst))
            .collect();
        let nofile = self.nofile;
        // SAFETY: the closure runs between fork and exec and calls only
        // async-signal-safe functions (setrlimit, dup2, fcntl) on plain data
        // copied into it.
        unsafe {
            self.cmd.pre_exec(move || {
                let rl = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &rl);
                if let Some(n) = nofile {
                    let rl = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // Sources lie above every target: each dup2 is a real copy
                // (never src == dst), which clears close-on-exec.
                for &(src, dst) in &fds {
                    if libc::dup2(src, dst) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let start = Instant::now();
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.desc));
        drop(high);
        if let Some(input) = self.stdin.take() {
            let mut sin = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                let _ = sin.write_all(&input);
            });
        }
        let out = reader(child.stdout.take().unwrap());
        let err = reader(child.stderr.take().unwrap());
        Running {
            child,
            out,
            err,
            desc: self.desc,
            timeout: self.timeout,
            start,
        }
    }

    /// Run to completion (or timeout) and collect everything.
    pub fn run(self) -> Run {
        self.spawn().wait()
    }
}

fn reader(mut r: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// A started command.
pub struct Running {
    pub child: Child,
    out: JoinHandle<Vec<u8>>,
    err: JoinHandle<Vec<u8>>,
    desc: String,
    timeout: Duration,
    start: Instant,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Wait (killing the process on timeout) and collect the outcome.
    pub fn wait(mut self) -> Run {
        let deadline = self.start + self.timeout;
        let mut timed_out = false;
        let status = loop {
            match self.child.try_wait().expect("try_wait") {
                Some(s) => break s,
                None if Instant::now() >= deadline => {
                    timed_out = true;
                    let _ = self.child.kill();
                    break self.child.wait().expect("wait after kill");
                }
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        let elapsed = self.start.elapsed();
        // A grandchild may keep the pipes open after a timeout kill: don't
        // block forever on them.
        let join = |h: JoinHandle<Vec<u8>>| {
            let until = Instant::now() + Duration::from_secs(5);
            while !h.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if h.is_finished() {
                String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned()
            } else {
                "<output still open after 5 s>".into()
            }
        };
        Run {
            desc: self.desc,
            code: status.code(),
            signal: status.signal(),
            stdout: join(self.out),
            stderr: join(self.err),
            timed_out,
            elapsed,
        }
    }
}

// ---------------------------------------------------------------------------
// Targets and listeners living outside the sandbox.

/// A `sleep` process outside the sandbox (killed on drop).
pub struct Sleeper {
    pub child: Child,
}

impl Sleeper {
    pub fn start() -> Self {
        let child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sleep");
        Sleeper { child }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// None while running; the signal that ended it otherwise (waits up to 2 s
    /// for a pending signal to land).
    pub fn ended_by_signal(&mut self) -> Option<i32> {
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait sleep") {
                return Some(s.signal().unwrap_or(-1));
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Still running right now (no waiting).
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait sleep").is_none()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The banner every test listener sends.
pub const BANNER: &str = "cordon-test-banner";

/// A TCP listener on 127.0.0.1 (ephemeral port) that greets every connection
/// with [`BANNER`] and counts them, in a background thread.
pub struct TcpBanner {
    pub port: u16,
    pub accepted: std::sync::Arc<AtomicUsize>,
}

impl TcpBanner {
    pub fn start() -> Self {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let _ = s.write_all(format!("{BANNER}\n").as_bytes());
            }
        });
        TcpBanner { port, accepted }
    }
}

/// An abstract UNIX stream listener `@name` greeting with [`BANNER`].
pub struct AbstractBanner {
    pub name: String,
}

impl AbstractBanner {
    pub fn start() -> Self {
        use std::os::linux::net::SocketAddrExt;
        let name = format!(
            "cordon-test-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind abstract");
        std::thread::spawn(move || {
            for mut s in l.incoming().flatten() {
                let _ = s.write_all(format!("{BANNER}\n").as_bytes());
            }
        });
        AbstractBanner { name }
    }
}

// ---------------------------------------------------------------------------
// Small utilities.

/// An anonymous temp file for `--report-fd`; read it back with [`read_report`].
pub fn report_file(fx: &Fixture) -> fs::File {
    tempfile::tempfile_in(&fx.root).expect("report tempfile")
}

/// Everything written to a report file, parsed as ONE JSON line.
pub fn read_report(f: &mut fs::File) -> Value {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut text = String::new();
    f.read_to_string(&mut text).unwrap();
    assert!(
        text.ends_with('\n') && text.trim_end().lines().count() == 1,
        "report is not exactly one line: {text:?}"
    );
    serde_json::from_str(text.trim_end())
        .unwrap_or_else(|e| panic!("report is not JSON ({e}): {text:?}"))
}

/// Threads currently owned by our real uid (RLIMIT_NPROC counts them).
pub fn own_tasks() -> u64 {
    let me = uid();
    let mut n = 0;
    for e in fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(st) = fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let field = |k: &str| {
            st.lines()
                .find_map(|l| l.strip_prefix(k))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(u64::from(me)) {
            n += field("Threads:").unwrap_or(1);
        }
    }
    n
}

/// Open `path` read-only without O_CLOEXEC games: std opens with CLOEXEC,
/// which [`Spawn::inherit_fd`] clears in the child only.
pub fn open_ro(path: &Path) -> fs::File {
    fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// A small deterministic PRNG (xorshift64*), for bounded randomized tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Copy a binary the test will execute. The copy is made by `cp`, in a
/// process of its own: a file this process held open for writing could leak
/// into a child another test thread forks at that moment, and until that
/// child execs, executing the copy fails with ETXTBSY ("Text file busy").
pub fn copy_executable(from: &Path, to: &Path) {
    let st = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .status()
        .expect("run cp");
    assert!(st.success(), "cp {} {}: {st}", from.display(), to.display());
}
