//! Executes a [`Plan`]: writes the helper policy (0600, removed on every outcome),
//! spawns bwrap (or the helper) with an empty environment plus the plan's, only
//! the planned fds, as an unprivileged uid; drains output while it runs; enforces
//! the timeout; forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT as a teardown; reads the helper's
//! report and bwrap's info to fill [`Enforcement`].

use crate::error::{Error, Result};
use crate::helper_bin::Helper;
use crate::plan::{FdRole, Layers, Plan};
use crate::{spawn, sys};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

pub const DEFAULT_CAP: usize = 1 << 20;
/// Bytes of stderr kept to explain a setup failure when stderr is streamed.
const DIAG_CAP: usize = 16 << 10;
const REPORT_CAP: usize = 256 << 10;

#[derive(Debug, Clone)]
pub enum Input {
    Inherit,
    Null,
    Data(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Capture stdout/stderr (true) or stream them (stdout inherited, stderr forwarded).
    pub capture: bool,
    pub stdin: Input,
    pub cap_bytes: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Captured {
    pub data: String,
    pub truncated: bool,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Enforcement {
    pub layers: String,
    pub namespaces: Value,
    pub pivot_root: Value,
    pub bind_mounts: Value,
    pub no_new_privs: Value,
    pub landlock: Value,
    pub seccomp: Value,
    pub cap_drop: Value,
    /// The helper's whole report line, as received.
    pub helper_report: Value,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SandboxResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Captured,
    pub stderr: Captured,
    pub timed_out: bool,
    /// The launcher itself received this signal and tore the sandbox down.
    pub interrupted: Option<i32>,
    pub duration_ms: u64,
    pub uid: u32,
    pub enforcement: Enforcement,
    pub degraded: Vec<String>,
    pub notes: Vec<String>,
    /// `.git` entries the command created at the top of a writable path
    /// (`Plan::git_absent`): git run there on the host would take its hooks
    /// and config from them.
    pub git_created: Vec<PathBuf>,
    /// bwrap was started before the plan was finished (`cli::prepare`).
    pub early_launch: bool,
}

/// The git directories the command made where none was when it started:
/// a `.git`, or the directory itself turned into one (`HEAD` with
/// `objects/`, `refs/` or a `commondir` file: git takes it for a bare
/// repository). One or two `lstat`s for
/// each; one the command makes deeper down is not looked for: that would be
/// a scan of the workspace on every run.
fn git_created(plan: &Plan) -> Vec<PathBuf> {
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    plan.git_absent
        .iter()
        .filter_map(|g| {
            if exists(g) {
                return Some(g.clone());
            }
            // git also takes `objects/` and `refs/` from a `commondir` file.
            let dir = g.parent()?;
            (exists(&dir.join("HEAD"))
                && ["objects", "refs", "commondir"]
                    .iter()
                    .any(|n| exists(&dir.join(n))))
            .then(|| dir.to_path_buf())
        })
        .collect()
}

/// What the caller should know about a git directory the command created.
pub fn git_created_note(g: &Path) -> String {
    let what = if g.file_name().is_some_and(|n| n == ".git") {
        format!("the command created {}", g.display())
    } else {
        format!(
            "the command made {} a git directory (HEAD, objects/, refs/)",
            g.display()
        )
    };
    format!("{what}: git used there on the host runs its hooks and config (core.fsmonitor, core.pager, …) with your rights; inspect or delete it first")
}

// --- signals and cleanup -------------------------------------------------------------

static SIGNAL_W: AtomicI32 = AtomicI32::new(-1);
static SIGNAL_R: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_W.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = [sig as u8];
        // SAFETY: write(2) is async-signal-safe; `b` is a valid 1-byte buffer.
        unsafe { libc::write(fd, b.as_ptr().cast(), 1) };
    }
}

/// Route SIGINT/SIGTERM/SIGHUP/SIGQUIT to the runner, which tears the sandbox down,
/// SIGTSTP, which suspends it (see [`suspend`]), and SIGWINCH, which it passes
/// on (see [`signal_tree`]).
///
/// Installed when the first sandbox starts (`launch`), not before: until
/// then nothing needs tearing down, and a signal during setup (a slow config,
/// an exec-json request still arriving) ends the launcher at once. Once
/// installed, later calls do nothing. A signal ignored when the launcher
/// started stays ignored: `nohup cordon run …` must survive the hangup, and
/// a background job of a non-interactive shell ignores SIGINT on purpose.
pub fn install_handlers() -> Result<()> {
    if SIGNAL_R.load(Ordering::Relaxed) >= 0 {
        return Ok(());
    }
    let (r, w) = sys::pipe().map_err(|e| Error::io("signal pipe", e))?;
    sys::set_nonblocking(w.as_raw_fd()).map_err(|e| Error::io("signal pipe", e))?;
    SIGNAL_R.store(std::os::fd::IntoRawFd::into_raw_fd(r), Ordering::Relaxed);
    SIGNAL_W.store(std::os::fd::IntoRawFd::into_raw_fd(w), Ordering::Relaxed);
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGTSTP,
        libc::SIGWINCH,
    ] {
        if !sys::signal_ignored(sig) {
            set_handler(sig, true).map_err(|e| Error::io("sigaction", e))?;
        }
    }
    Ok(())
}

/// Our handler for `sig` (`on`), or its default disposition.
fn set_handler(sig: libc::c_int, on: bool) -> std::io::Result<()> {
    // SAFETY: sigaction struct zeroed then filled; the handler only calls write(2).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = if on {
            on_signal as *const () as usize
        } else {
            libc::SIG_DFL
        };
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The helper policy, in a sealed memfd: it lives in memory and never has a
/// name in any filesystem, mode 0600, owned by the uid the helper runs as,
/// and sealed against writes, growth and shrinking before it leaves the
/// launcher, so not even a process holding the fd can change it. The helper
/// reads it from an inherited fd (`--policy-fd 5`, through bwrap too: no
/// mount) and checks type, owner and mode on that fd. No outcome, not even
/// SIGKILL of the launcher, can leave anything behind. (It was an O_TMPFILE
/// before: that needed a writable `$TMPDIR` and cost a journaled inode
/// allocation and free on every run.)
struct PolicyFile {
    fd: Option<OwnedFd>,
}

impl PolicyFile {
    /// The memfd, mode 0600, owned by `owner`, still empty and writable through
    /// the returned writer; the read-only description is what bwrap gets.
    fn create_empty(owner: Option<(u32, u32)>) -> Result<(PolicyFile, std::fs::File)> {
        let tmp = sealable_memfd(c"cordon-policy", 0o600)
            .map_err(|e| Error::io("create policy file (memfd)", e))?;
        if let Some((uid, gid)) = owner {
            // The helper requires the file to be owned by its real uid: the
            // host uid the sandbox runs as (inside bwrap it maps to --uid).
            sys::fchown(tmp.as_raw_fd(), uid, gid)
                .map_err(|e| Error::io("chown policy file", e))?;
        }
        // A read-only description, at offset 0, is what leaves the launcher.
        let ro = sys::open(
            Path::new(&format!("/proc/self/fd/{}", tmp.as_raw_fd())),
            libc::O_RDONLY,
        )
        .map_err(|e| Error::io("reopen policy file", e))?;
        Ok((PolicyFile { fd: Some(ro) }, tmp))
    }

    /// Write the policy and seal it. Nothing reads it before this returns: the
    /// helper starts only after bwrap has its arguments, which follow.
    fn fill(mut w: std::fs::File, policy: &Value) -> Result<()> {
        let text = serde_json::to_vec(policy).map_err(|e| Error::io("policy json", e.into()))?;
        // The helper's own limit, said here in one line before it starts.
        if text.len() > HELPER_POLICY_MAX {
            return Err(Error::Usage(format!(
                "the helper policy would be {} bytes, over the helper's {HELPER_POLICY_MAX}-byte limit (long --env values or many paths)",
                text.len()
            )));
        }
        w.write_all(&text)
            .map_err(|e| Error::io("write policy file", e))?;
        seal(&w).map_err(|e| Error::io("seal policy file", e))
    }

    #[cfg(test)]
    fn create(policy: &Value, owner: Option<(u32, u32)>) -> Result<PolicyFile> {
        let (p, w) = Self::create_empty(owner)?;
        Self::fill(w, policy)?;
        Ok(p)
    }
}

/// cordon-helper refuses a larger policy (helper/src/policy.rs MAX_POLICY_BYTES).
const HELPER_POLICY_MAX: usize = 64 * 1024;

/// A memfd with `mode` (a memfd starts at 0777), close-on-exec, sealable.
fn sealable_memfd(name: &std::ffi::CStr, mode: u32) -> std::io::Result<std::fs::File> {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
    let f = std::fs::File::from(fd);
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    Ok(f)
}

/// No more writes, growth, shrinking or seal changes, by anyone.
fn seal(f: &std::fs::File) -> std::io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    fcntl(
        f,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    Ok(())
}

struct Sink {
    cap: usize,
    data: Vec<u8>,
    truncated: bool,
    bytes: u64,
    forward: Option<RawFd>,
}

impl Sink {
    fn new(cap: usize, forward: Option<RawFd>) -> Sink {
        Sink {
            cap,
            data: Vec::new(),
            truncated: false,
            bytes: 0,
            forward,
        }
    }
    fn push(&mut self, b: &[u8]) {
        self.bytes += b.len() as u64;
        if let Some(fd) = self.forward {
            let mut off = 0;
            while off < b.len() {
                match sys::write(fd, &b[off..]) {
                    Ok(n) if n > 0 => off += n,
                    _ => break,
                }
            }
        }
        let room = self.cap.saturating_sub(self.data.len());
        if b.len() > room {
            self.truncated = true;
        }
        self.data.extend_from_slice(&b[..b.len().min(room)]);
    }
    fn captured(&self) -> Captured {
        Captured {
            data: String::from_utf8_lossy(&self.data).into_owned(),
            truncated: self.truncated,
            bytes: self.bytes,
        }
    }
}

/// Our children other than `except` (orphans reparented to us as subreaper).
/// Read from the children file of our main thread, which is where the kernel
/// reparents orphans (to the first live thread of the subreaper: the leader
/// while it lives): one small read, not a scan of every process on the host.
fn orphans(except: libc::pid_t) -> Vec<libc::pid_t> {
    let me = sys::getpid();
    match sys::read_all(Path::new(&format!("/proc/self/task/{me}/children"))) {
        Ok(b) => String::from_utf8_lossy(&b)
            .split_whitespace()
            .filter_map(|p| p.parse::<libc::pid_t>().ok())
            .filter(|p| *p != except)
            .collect(),
        // Kernels without CONFIG_PROC_CHILDREN: fall back to the scan.
        Err(_) => orphans_by_scan(except),
    }
}

fn orphans_by_scan(except: libc::pid_t) -> Vec<libc::pid_t> {
    let me = sys::getpid();
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        if pid == except {
            continue;
        }
        if parent_and_state(pid).is_some_and(|(ppid, _)| ppid == me) {
            v.push(pid);
        }
    }
    v
}

/// Kill and reap every sandbox process that outlived bwrap. `init` is bwrap's
/// pid 1 (its --info-fd `child-pid`): once it has SIGKILL pending and no
/// child, nothing of the sandbox exists or can ever run again (every live
/// process in its pid namespace descends from it, and a task with a fatal
/// signal pending cannot fork), so we do not wait for its exit, which tears
/// down the sandbox's mounts and namespaces (≈ 0.1–0.4 ms here). It is reaped
/// here if already a zombie, else by whoever reaps the launcher's orphans
/// (a later run of this process, or init once the launcher exits).
///
/// True when the sandbox is known to be over: bwrap's init was the only
/// orphan, and is dead or dying without a child. Nothing can then write to
/// the output pipes any more, though the dying init still holds them open.
fn reap_orphans(except: libc::pid_t, init: Option<libc::pid_t>) -> bool {
    let mut dying: Vec<libc::pid_t> = Vec::new();
    for _ in 0..10 {
        let o: Vec<libc::pid_t> = orphans(except)
            .into_iter()
            .filter(|p| !dying.contains(p))
            .collect();
        if o.is_empty() {
            return false;
        }
        let mut others = false;
        for pid in o {
            let _ = sys::kill(pid, libc::SIGKILL);
            if Some(pid) == init {
                // Already a zombie (its namespace gone with it): reaped now.
                if sys::try_reap(pid) {
                    continue;
                }
                if childless_single_thread(pid) {
                    dying.push(pid);
                } else {
                    sys::waitpid(pid);
                }
                continue;
            }
            others = true;
            sys::waitpid(pid);
        }
        // Only bwrap's init was left: dead, or dying with no child, nothing of
        // its pid namespace can be reparented to us any more.
        if !others {
            return init.is_some();
        }
    }
    false
}

/// One thread, and no child in its children file (of our own child `pid`, so
/// the pid cannot have been reused). Any doubt: false.
fn childless_single_thread(pid: libc::pid_t) -> bool {
    let stat = match sys::read_all(Path::new(&format!("/proc/{pid}/stat"))) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => return false,
    };
    // "pid (comm) state ppid ... num_threads" (field 20): comm may hold spaces.
    let threads = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().nth(17))
        .and_then(|n| n.parse::<u32>().ok());
    if threads != Some(1) {
        return false;
    }
    matches!(
        sys::read_all(Path::new(&format!("/proc/{pid}/task/{pid}/children"))),
        Ok(b) if b.iter().all(u8::is_ascii_whitespace)
    )
}

/// Ctrl-Z: stop every process of the sandbox, then ourselves; once we are
/// continued (`fg`, `bg`), continue them. bwrap runs in a process group of
/// its own and the command in a session of its own, so the terminal's
/// SIGTSTP reaches only the launcher: without this the command ran on while
/// the run looked suspended, reading the terminal the shell had taken back
/// (the next password typed at a prompt, say). Returns how long we were
/// stopped.
fn suspend() -> Duration {
    let stopped = stop_tree(sys::getpid());
    let t = Instant::now();
    // Stop ourselves the way the default action would: raising SIGTSTP with
    // its default disposition lets the kernel discard it when our process
    // group is orphaned (no shell left to continue us), as it would have
    // without our handler. The sandbox is then continued at once.
    let _ = set_handler(libc::SIGTSTP, false);
    let _ = sys::kill(sys::getpid(), libc::SIGTSTP);
    let _ = set_handler(libc::SIGTSTP, true);
    let away = t.elapsed();
    for fd in stopped.iter().rev() {
        let _ = sys::pidfd_send_signal(fd, libc::SIGCONT);
    }
    away
}

/// SIGSTOP every descendant of `top` (bwrap and what runs under it, and any
/// process reparented to us as subreaper, as with `--layers inner`), each
/// through a pidfd checked to be the child of the process it was listed
/// under (a pid reused meanwhile is left alone). Walked again until a round
/// finds nothing new: a process may have forked before its stop took
/// effect. Returns the pidfds of the processes this stopped; one that was
/// already stopped (by the command itself) is left stopped afterwards.
fn stop_tree(top: libc::pid_t) -> Vec<OwnedFd> {
    let mut seen: Vec<libc::pid_t> = Vec::new();
    let mut stopped: Vec<OwnedFd> = Vec::new();
    for _round in 0..16 {
        let new = each_descendant(top, &mut seen, |fd, state| {
            if state == 'T' {
                return; // stopped on purpose: stays stopped
            }
            let _ = sys::pidfd_send_signal(&fd, libc::SIGSTOP);
            stopped.push(fd);
        });
        if !new {
            break;
        }
    }
    stopped
}

/// A terminal resize: pass SIGWINCH to every process of the sandbox. The
/// command runs in a session of its own, so the kernel sends the terminal's
/// SIGWINCH only to our process group; without this a full-screen program
/// kept drawing at its old size. (The kernel's own delivery goes to the
/// foreground process group only; the sandbox has no terminal of its own to
/// say which that is, and a process that does not handle SIGWINCH ignores
/// it.)
fn signal_tree(top: libc::pid_t, sig: libc::c_int) {
    each_descendant(top, &mut Vec::new(), |fd, _| {
        let _ = sys::pidfd_send_signal(&fd, sig);
    });
}

/// Call `f` with a pidfd and the state of every descendant of `top` not in
/// `seen` (bwrap and what runs under it, and any process reparented to us as
/// subreaper, as with `--layers inner`), each checked through its pidfd to
/// be the child of the process it was listed under (a pid reused meanwhile
/// is left alone), and add it to `seen`. Returns whether it found any.
fn each_descendant(
    top: libc::pid_t,
    seen: &mut Vec<libc::pid_t>,
    mut f: impl FnMut(OwnedFd, char),
) -> bool {
    let mut new = false;
    let mut stack = vec![top];
    let mut walked = Vec::new();
    while let Some(parent) = stack.pop() {
        if walked.contains(&parent) {
            continue;
        }
        walked.push(parent);
        for child in children(parent) {
            stack.push(child);
            if seen.contains(&child) {
                continue;
            }
            let Ok(fd) = sys::pidfd_open(child) else {
                continue;
            };
            let Some((ppid, state)) = parent_and_state(child) else {
                continue;
            };
            if ppid != parent {
                continue;
            }
            seen.push(child);
            new = true;
            f(fd, state);
        }
    }
    new
}

/// The children of every thread of `pid`.
fn children(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let mut v = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return v;
    };
    for t in tasks.flatten() {
        let mut p = t.path();
        p.push("children");
        if let Ok(b) = sys::read_all(&p) {
            v.extend(
                String::from_utf8_lossy(&b)
                    .split_whitespace()
                    .filter_map(|c| c.parse::<libc::pid_t>().ok()),
            );
        }
    }
    v
}

/// The parent of `pid` and its state letter, from /proc/PID/stat.
fn parent_and_state(pid: libc::pid_t) -> Option<(libc::pid_t, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may contain spaces and parentheses.
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((rest.next()?.parse().ok()?, state))
}

fn kill_sandbox(pid: libc::pid_t) {
    // The child leads its own process group. Killing bwrap ends the sandbox:
    // --die-with-parent kills its pid-namespace init, and with it every process in it.
    let _ = sys::kill(-pid, libc::SIGKILL);
    let _ = sys::kill(pid, libc::SIGKILL);
}

/// Run the plan. `helper` is required unless the plan is outer-only.
/// What bwrap (or, with `--layers inner`, the helper) is started with. For
/// bwrap, only what must exist at exec: the program, the argv after `--`, the
/// fds and the uid. Its options and environment follow later through a pipe
/// (`--args`), so bwrap can start before the plan is complete.
pub struct LaunchSpec<'a> {
    pub layers: Layers,
    pub program: &'a str,
    /// bwrap: the argv after its `--`; inner: the helper's whole argv.
    pub tail: &'a [String],
    /// Inner only (bwrap starts with an empty environment).
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    pub fds: &'a [(i32, FdRole)],
    pub switch_to: Option<(u32, u32)>,
    /// Filled and sealed before the spawn when known; else `finish` fills it.
    pub policy: Option<&'a Value>,
}

impl<'a> LaunchSpec<'a> {
    pub fn of(plan: &'a Plan) -> LaunchSpec<'a> {
        let inner = plan.layers == Layers::Inner;
        LaunchSpec {
            layers: plan.layers,
            program: &plan.exec_argv()[0],
            tail: if inner {
                &plan.inner_argv
            } else {
                bwrap_tail(&plan.bwrap_argv)
            },
            env: &plan.env,
            cwd: if inner { &plan.cwd } else { Path::new("/") },
            fds: &plan.fds,
            switch_to: plan.switch_to,
            policy: plan.helper_policy.as_ref(),
        }
    }
}

/// bwrap's argv after its own `--` (the first one: the helper's argv has one too).
fn bwrap_tail(argv: &[String]) -> &[String] {
    match argv.iter().position(|a| a == "--") {
        Some(i) => &argv[i + 1..],
        None => &[],
    }
}

/// bwrap's options (the argv between the program and `--`) and the sandbox
/// environment as `--setenv` pairs, NUL-separated, for `--args`: never in any
/// argv or /proc/PID/environ of bwrap.
fn bwrap_args_data(plan: &Plan) -> Vec<u8> {
    let opts = match plan.bwrap_argv.iter().position(|a| a == "--") {
        Some(i) => &plan.bwrap_argv[1..i],
        None => &plan.bwrap_argv[1..],
    };
    let mut v = Vec::new();
    let mut push = |s: &str| {
        v.extend_from_slice(s.as_bytes());
        v.push(0);
    };
    for a in opts {
        push(a);
    }
    for (k, val) in &plan.env {
        push("--setenv");
        push(k);
        push(val);
    }
    v
}

/// A started bwrap (or helper). bwrap waits for its options on the args pipe,
/// and the policy memfd may still be empty: `supervise` fills both, policy
/// first, so the helper can never read an unfinished policy. Dropped unused,
/// it is killed and reaped.
pub struct Launched {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    ours: OurNamespaces,
    start: Instant,
    report_r: Option<OwnedFd>,
    info_r: Option<OwnedFd>,
    err_r: Option<OwnedFd>,
    out_r: Option<OwnedFd>,
    in_w: Option<OwnedFd>,
    /// Our stdin is a file, copied into `in_w` (see [`Stdio`]).
    stdin_file: bool,
    /// Our stdout is a file, copied from `out_r`.
    stdout_file: bool,
    args_w: Option<OwnedFd>,
    policy_w: Option<std::fs::File>,
    layers: Layers,
    program: String,
    tail: Vec<String>,
    fds: Vec<(i32, FdRole)>,
    switch_to: Option<(u32, u32)>,
    live: bool,
}

impl Launched {
    /// Was this started exactly as `plan` needs? Extra fds may only be unused
    /// empty ones (the helper closes them).
    fn matches(&self, plan: &Plan) -> bool {
        let spec = LaunchSpec::of(plan);
        self.layers == plan.layers
            && plan.layers == Layers::Both
            && self.program == spec.program
            && self.tail == spec.tail
            && self.switch_to == plan.switch_to
            && plan.fds.iter().all(|f| self.fds.contains(f))
            && self
                .fds
                .iter()
                .all(|f| plan.fds.contains(f) || f.1 == FdRole::Empty)
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if self.live {
            kill_sandbox(self.pid);
            let _ = sys::wait_exit(self.pid);
        }
    }
}

/// Free fds bwrap needs of its own (its root, /proc, a mask's temp file)
/// while it holds the ones passed to it.
const BWRAP_OWN_FDS: u64 = 8;

/// Refuse a plan whose fds cannot all be passed, before any is duplicated:
/// each one sits at its target number in the child (a file mask is one fd),
/// its source first sits above the highest target in ours, and bwrap then
/// needs a few more. Without this, a few hundred `--hide`s of files failed
/// with a bare EMFILE or EINVAL from `fcntl`.
fn check_fd_room(fds: &[(RawFd, FdRole)], max_target: RawFd) -> Result<()> {
    let masks = fds.iter().filter(|f| f.1 == FdRole::Empty).count();
    // One source per role passed, one shared by every mask, up to 4 for stdio
    // and the options pipe.
    let sources = (fds.len() - masks) as u64 + u64::from(masks > 0) + 4;
    let needed = u64::try_from(max_target).unwrap_or(0) + 1 + sources.max(BWRAP_OWN_FDS);
    if needed > sys::nofile_soft_limit() {
        return Err(too_few_fds(masks, Some(needed)));
    }
    Ok(())
}

/// The one-line refusal when the fds a run needs do not fit under the soft
/// RLIMIT_NOFILE (`needed` when it is known).
fn too_few_fds(masks: usize, needed: Option<u64>) -> Error {
    let soft = sys::nofile_soft_limit();
    let needs = match needed {
        Some(n) => format!("the sandbox needs {n}"),
        None => "the sandbox needs more".into(),
    };
    Error::io(
        "file descriptors",
        std::io::Error::other(format!(
            "{needs} ({masks} for hidden files, one each), above the soft RLIMIT_NOFILE of {soft}; raise it (ulimit -n), or hide the files' directory instead"
        )),
    )
}

/// An fd-creating call's error; running out of fds (EMFILE, or EINVAL from
/// `F_DUPFD` above the limit) is the refusal above, not a bare errno.
fn fd_error(what: &str, masks: usize, e: std::io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EMFILE) | Some(libc::EINVAL) => too_few_fds(masks, None),
        _ => Error::io(what, e),
    }
}

/// Start bwrap (or the helper) per `spec`; see [`Launched`].
/// `helper`: the helper file's fd, when the spec passes it.
/// How the caller's stdin or stdout reaches the command. A file or a
/// directory handed over as is would let the command reopen it through
/// `/proc/self/fd/N` with the sandbox's rights, not the redirection's: write
/// to a file given as input, open any file below a directory. So a file is
/// passed through a pipe (the launcher copies), and a directory is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stdio {
    Inherit,
    File((u64, u64)),
}

/// Puts an fd's status flags back when dropped (however the run ends).
struct RestoreFlags(RawFd, libc::c_int);

impl Drop for RestoreFlags {
    fn drop(&mut self) {
        let _ = sys::set_status_flags(self.0, self.1);
    }
}

fn stdio_kind(fd: RawFd) -> Result<Stdio> {
    let name = if fd == 0 { "stdin" } else { "stdout" };
    match sys::fd_type(fd) {
        Ok((libc::S_IFREG, id)) => Ok(Stdio::File(id)),
        Ok((libc::S_IFDIR, _)) => Err(Error::Usage(format!(
            "{name} is a directory: the command could open the files below it through /proc/self/fd/{fd}; redirect {name} to a file, a pipe or /dev/null"
        ))),
        // Pipes, sockets, terminals, devices; a closed fd was plugged with
        // /dev/null at start.
        _ => Ok(Stdio::Inherit),
    }
}

pub fn launch(spec: &LaunchSpec, helper: Option<RawFd>, cfg: &RunConfig) -> Result<Launched> {
    let stdin = match cfg.stdin {
        Input::Inherit => stdio_kind(0)?,
        _ => Stdio::Inherit,
    };
    let stdout = if cfg.capture {
        Stdio::Inherit
    } else {
        stdio_kind(1)?
    };
    if let (Stdio::File(a), Stdio::File(b)) = (stdin, stdout) {
        if a == b {
            // The copy would feed the output back as input without end
            // (`cat` notices this case itself; through the pipes it cannot).
            return Err(Error::Usage(
                "stdin and stdout are the same file: the command's output would be fed back to it as input; redirect one of them elsewhere".into(),
            ));
        }
    }
    let stdin_file = matches!(stdin, Stdio::File(_));
    let stdout_file = matches!(stdout, Stdio::File(_));
    install_handlers()?;
    let start = Instant::now();
    sys::set_child_subreaper().map_err(|e| Error::io("PR_SET_CHILD_SUBREAPER", e))?;
    let (policy, policy_w) = if spec.fds.iter().any(|f| f.1 == FdRole::Policy) {
        let (file, w) = PolicyFile::create_empty(spec.switch_to)?;
        match spec.policy {
            Some(p) => {
                PolicyFile::fill(w, p)?;
                (Some(file), None)
            }
            // Without bwrap nothing would wait for the policy.
            None if spec.layers == Layers::Inner => {
                return Err(Error::io("policy", std::io::Error::other("no policy")))
            }
            None => (Some(file), Some(w)),
        }
    } else {
        (None, None)
    };
    let bwrap = spec.layers != Layers::Inner;

    let masks = spec.fds.iter().filter(|f| f.1 == FdRole::Empty).count();
    let fd_err = |what: &'static str| move |e| fd_error(what, masks, e);
    let (report_r, report_w) = sys::pipe().map_err(fd_err("pipe"))?;
    let (info_r, info_w) = sys::pipe().map_err(fd_err("pipe"))?;
    let (err_r, err_w) = sys::pipe().map_err(fd_err("pipe"))?;
    let out_pipe = if cfg.capture || stdout_file {
        Some(sys::pipe().map_err(fd_err("pipe"))?)
    } else {
        None
    };
    let in_pipe = match cfg.stdin {
        Input::Data(_) => Some(sys::pipe().map_err(fd_err("pipe"))?),
        Input::Inherit if stdin_file => Some(sys::pipe().map_err(fd_err("pipe"))?),
        _ => None,
    };
    // A file copied through a pipe: 1 MiB of room (the usual unprivileged
    // maximum) instead of 64 KiB means a sixteenth of the wakeups on both
    // sides. Best effort: a smaller pipe still works.
    if stdout_file {
        if let Some((r, _)) = &out_pipe {
            let _ = sys::set_pipe_size(r.as_raw_fd(), 1 << 20);
        }
    }
    if stdin_file {
        if let Some((r, _)) = &in_pipe {
            let _ = sys::set_pipe_size(r.as_raw_fd(), 1 << 20);
        }
    }
    let args_pipe = if bwrap {
        Some(sys::pipe().map_err(fd_err("pipe"))?)
    } else {
        None
    };

    // Every fd passed on purpose is first duplicated above the highest target
    // number, so the dup2 calls in the child can never clobber one another.
    let mut max_target = spec.fds.iter().map(|f| f.0).max().unwrap_or(2);
    let args_fd = max_target + 1;
    if bwrap {
        max_target = args_fd;
    }
    check_fd_room(spec.fds, max_target)?;
    // `(target, source)`; the sources are owned by `held`. Every file mask
    // (an empty fd each) shares one source.
    let mut sources: Vec<(RawFd, RawFd)> = Vec::new();
    let mut held: Vec<OwnedFd> = Vec::new();
    let mut null_high: Option<RawFd> = None;
    for (target, role) in spec.fds {
        if *role == FdRole::Empty {
            let src = match null_high {
                Some(fd) => fd,
                None => {
                    let null = sys::open(Path::new("/dev/null"), libc::O_RDONLY)
                        .map_err(fd_err("/dev/null"))?;
                    let high =
                        sys::dup_above(null.as_raw_fd(), max_target + 1).map_err(fd_err("dup"))?;
                    let fd = high.as_raw_fd();
                    held.push(high);
                    *null_high.insert(fd)
                }
            };
            sources.push((*target, src));
            continue;
        }
        let src: RawFd = match role {
            FdRole::Report => Some(report_w.as_raw_fd()),
            FdRole::Info => Some(info_w.as_raw_fd()),
            FdRole::Policy => policy
                .as_ref()
                .and_then(|p| p.fd.as_ref())
                .map(|f| f.as_raw_fd()),
            FdRole::Helper => helper,
            FdRole::Empty => None,
        }
        .ok_or_else(|| {
            Error::io(
                "prepare fds",
                std::io::Error::other(format!("no fd for {role:?}")),
            )
        })?;
        let high = sys::dup_above(src, max_target + 1).map_err(fd_err("dup"))?;
        sources.push((*target, high.as_raw_fd()));
        held.push(high);
    }
    drop(report_w);
    drop(info_w);

    // Stdio joins the fds passed on purpose, duplicated up the same way.
    let stdin_null = match (&cfg.stdin, &in_pipe) {
        (Input::Data(_), Some(_)) | (Input::Inherit, _) => None,
        _ => Some(sys::open(Path::new("/dev/null"), libc::O_RDONLY).map_err(fd_err("/dev/null"))?),
    };
    let mut stdio: Vec<(RawFd, RawFd)> = vec![(2, err_w.as_raw_fd())];
    if let Some((_, w)) = &out_pipe {
        stdio.push((1, w.as_raw_fd()));
    }
    if let Some((r, _)) = &in_pipe {
        stdio.push((0, r.as_raw_fd()));
    }
    if let Some(n) = &stdin_null {
        stdio.push((0, n.as_raw_fd()));
    }
    if let Some((r, _)) = &args_pipe {
        stdio.push((args_fd, r.as_raw_fd()));
    }
    for (target, src) in stdio {
        let high = sys::dup_above(src, max_target + 1).map_err(fd_err("dup"))?;
        sources.push((target, high.as_raw_fd()));
        held.push(high);
    }
    drop(err_w);
    drop(stdin_null);
    let cstr = |s: &str| {
        std::ffi::CString::new(s).map_err(|_| {
            Error::Usage(format!(
                "argument or environment contains a NUL byte: {s:?}"
            ))
        })
    };
    let mut argv: Vec<&str> = vec![spec.program];
    let args_fd_s = args_fd.to_string();
    if bwrap {
        argv.extend(["--args", &args_fd_s, "--"]);
        argv.extend(spec.tail.iter().map(String::as_str));
    } else {
        argv.extend(spec.tail.iter().skip(1).map(String::as_str));
    }
    let spawn_spec = spawn::Spec {
        program: cstr(spec.program)?,
        argv: argv.iter().map(|a| cstr(a)).collect::<Result<_>>()?,
        // bwrap starts with an empty environment: the sandbox's arrives with
        // its options (`--setenv`), so bwrap's pid 1 has nothing in
        // /proc/1/environ. The helper alone gets it directly.
        envp: if bwrap {
            Vec::new()
        } else {
            spec.env
                .iter()
                .map(|(k, v)| cstr(&format!("{k}={v}")))
                .collect::<Result<_>>()?
        },
        cwd: cstr(&spec.cwd.to_string_lossy())?,
        fds: sources,
        switch_to: spec.switch_to,
        reset_signals: spawn::signals_to_reset(),
    };
    let pid = spawn::spawn(&spawn_spec).map_err(|e| match e.err.kind() {
        std::io::ErrorKind::NotFound if bwrap && e.step == spawn::Step::Exec => {
            Error::BwrapMissing(format!("{}: {}", spec.program, e.err))
        }
        _ => Error::io(
            format!("spawn {}", spec.program),
            std::io::Error::other(e.to_string()),
        ),
    })?;
    drop(spawn_spec);
    drop(held); // the parent's copies of every fd passed
    let launched = |pidfd| Launched {
        pid,
        pidfd: Some(pidfd),
        ours: OurNamespaces::read(),
        start,
        report_r: Some(report_r),
        info_r: Some(info_r),
        err_r: Some(err_r),
        out_r: out_pipe.map(|(r, _w)| r),
        in_w: in_pipe.map(|(_r, w)| w),
        stdin_file,
        stdout_file,
        args_w: args_pipe.map(|(_r, w)| w),
        policy_w,
        layers: spec.layers,
        program: spec.program.to_string(),
        tail: spec.tail.to_vec(),
        fds: spec.fds.to_vec(),
        switch_to: spec.switch_to,
        live: true,
    };
    match sys::pidfd_open(pid) {
        Ok(fd) => Ok(launched(fd)),
        Err(e) => {
            kill_sandbox(pid);
            let _ = sys::wait_exit(pid);
            Err(Error::io("pidfd_open", e))
        }
    }
}

/// Run the plan. `helper` is required unless the plan is outer-only.
pub fn run(plan: &Plan, helper: Option<&Helper>, cfg: &RunConfig) -> Result<SandboxResult> {
    run_launched(plan, helper, cfg, None)
}

/// Run the plan with bwrap already started for it (see `cli::prepare`), or
/// start it now when it was not, or was not started as this plan needs.
pub fn run_launched(
    plan: &Plan,
    helper: Option<&Helper>,
    cfg: &RunConfig,
    early: Option<Launched>,
) -> Result<SandboxResult> {
    let (l, early_launch) = match early {
        Some(l) if l.matches(plan) => (l, true),
        other => {
            drop(other); // killed and reaped
            let fd = helper.map(|h| h.file.as_raw_fd());
            (launch(&LaunchSpec::of(plan), fd, cfg)?, false)
        }
    };
    let mut r = supervise(plan, l, cfg)?;
    r.early_launch = early_launch;
    Ok(r)
}

fn supervise(plan: &Plan, mut l: Launched, cfg: &RunConfig) -> Result<SandboxResult> {
    // The policy first, sealed; then bwrap's options. The helper runs only
    // after bwrap has read them, so it never sees an unfinished policy.
    if let Some(w) = l.policy_w.take() {
        let p = plan
            .helper_policy
            .as_ref()
            .ok_or_else(|| Error::io("policy", std::io::Error::other("no policy")))?;
        PolicyFile::fill(w, p)?;
    }
    if let Some(w) = l.args_w.take() {
        // A write error means bwrap is gone; its exit status tells why.
        let _ = sys::write_all(w.as_raw_fd(), &bwrap_args_data(plan));
    }
    let pid = l.pid;
    let start = l.start;
    let ours = std::mem::replace(&mut l.ours, OurNamespaces([None; 7]));
    let missing = || Error::io("launch", std::io::Error::other("fd already taken"));
    let pidfd = l.pidfd.take().ok_or_else(missing)?;
    let err_r = l.err_r.take().ok_or_else(missing)?;
    let report_r = l.report_r.take().ok_or_else(missing)?;
    let info_r = l.info_r.take().ok_or_else(missing)?;
    let out_r = l.out_r.take();
    let mut in_w = l.in_w.take();
    let mut stdin_src = l.stdin_file.then_some(0);
    let stdout_file = l.stdout_file;
    l.live = false; // from here the loop below kills and reaps
    drop(l);

    let mut stdout = if stdout_file {
        Sink::new(0, Some(1))
    } else {
        Sink::new(cfg.cap_bytes, None)
    };
    let mut stderr = Sink::new(
        if cfg.capture { cfg.cap_bytes } else { DIAG_CAP },
        (!cfg.capture).then_some(2),
    );
    let mut report = Sink::new(REPORT_CAP, None);
    let mut info = Sink::new(REPORT_CAP, None);
    let mut stdin_data: Vec<u8> = match &cfg.stdin {
        Input::Data(d) => d.clone(),
        _ => vec![],
    };
    let mut stdin_off = 0usize;
    if let Some(w) = &in_w {
        let _ = sys::set_nonblocking(w.as_raw_fd());
    }
    // A file on stdin read without blocking, so that one whose reads wait
    // (/proc/kmsg) cannot stall the timeout; its flags are the caller's
    // too (a shared file description), so they are put back after the run.
    let _stdin_flags = stdin_src.and_then(|fd| {
        let fl = sys::status_flags(fd).ok()?;
        sys::set_status_flags(fd, fl | libc::O_NONBLOCK).ok()?;
        Some(RestoreFlags(fd, fl))
    });

    // A timeout too large to add to a clock reading never expires.
    let mut deadline = plan
        .timeout
        .and_then(|t| start.checked_add(Duration::from_secs(t)));
    let mut timed_out = false;
    let mut interrupted = None;
    let mut exited: Option<std::process::ExitStatus> = None;
    let mut drain_deadline: Option<Instant> = None;
    let mut open = [Some(err_r), out_r, Some(report_r), Some(info_r)];
    let sig_r = SIGNAL_R.load(Ordering::Relaxed);
    let mut buf = vec![0u8; 64 << 10];
    let mut user_ns: Option<bool> = None;
    let mut sandbox_init: Option<libc::pid_t> = None;
    // The report and bwrap's info, parsed as each completes (the report at
    // the helper's exec), and what they say about enforcement once both are
    // in: work done while the command runs, not after it exits.
    let mut report_v: Option<Option<Value>> = None;
    let mut info_v: Option<Option<Value>> = None;
    let mut enforced: Option<Enforcement> = None;
    // The command's end as its init (the helper as pid 1) reported it.
    let mut init_exit: Option<i32> = None;
    let mut reaped = false;
    let mut over = false;

    loop {
        if exited.is_some() && open.iter().all(Option::is_none) {
            break;
        }
        if let Some(d) = drain_deadline {
            if Instant::now() >= d {
                break; // a stray descendant outside any pid namespace holds a pipe
            }
        }
        let mut pfds: Vec<libc::pollfd> = Vec::new();
        let mut which: Vec<usize> = Vec::new();
        for (i, f) in open.iter().enumerate() {
            if let Some(f) = f {
                pfds.push(libc::pollfd {
                    fd: f.as_raw_fd(),
                    // The report and bwrap's info are read once their writers
                    // are done (poll reports the hangup without asking): bwrap
                    // writes its info in ten small writes, and each woke us.
                    // Both are a few hundred bytes, far below a pipe's 64 KiB,
                    // so no writer can block on us meanwhile.
                    events: if i >= 2 { 0 } else { libc::POLLIN },
                    revents: 0,
                });
                which.push(i);
            }
        }
        let pid_idx = pfds.len();
        if exited.is_none() {
            pfds.push(libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let sig_idx = pfds.len();
        if sig_r >= 0 && interrupted.is_none() {
            pfds.push(libc::pollfd {
                fd: sig_r,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let in_idx = pfds.len();
        if let Some(w) = &in_w {
            // Waiting for the file's data while none is buffered, else for
            // room in the pipe.
            let refill = stdin_off >= stdin_data.len();
            pfds.push(match stdin_src {
                Some(src) if refill => libc::pollfd {
                    fd: src,
                    events: libc::POLLIN,
                    revents: 0,
                },
                _ => libc::pollfd {
                    fd: w.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                },
            });
        }
        let now = Instant::now();
        let mut wait_ms: i64 = if over { 0 } else { 1000 };
        if let (Some(d), false) = (deadline, timed_out) {
            wait_ms = wait_ms.min(d.saturating_duration_since(now).as_millis() as i64);
        }
        if let Some(d) = drain_deadline {
            wait_ms = wait_ms.min(d.saturating_duration_since(now).as_millis() as i64);
        }
        match sys::poll(&mut pfds, wait_ms as i32) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                kill_sandbox(pid);
                let _ = sys::wait_exit(pid);
                return Err(Error::io("poll", e));
            }
        }
        for (k, i) in which.iter().enumerate() {
            if pfds[k].revents == 0 && !over {
                continue;
            }
            let fd = open[*i].as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
            match sys::read(fd, &mut buf) {
                Ok(0) => {
                    open[*i] = None;
                    if *i == 3 {
                        // bwrap's info is complete while the sandbox's init is
                        // alive: observe its user namespace now.
                        let v = info_json(&info.data);
                        user_ns = observe_user_ns(v.as_ref(), &ours);
                        sandbox_init = v
                            .as_ref()
                            .and_then(|v| v.get("child-pid")?.as_i64())
                            .and_then(|p| libc::pid_t::try_from(p).ok());
                        info_v = Some(v);
                    }
                    if *i == 2 {
                        init_exit = (plan.layers == Layers::Both)
                            .then(|| init_exit_code(&report.data))
                            .flatten();
                        if init_exit.is_some() && exited.is_none() {
                            // The command has ended and its init is exiting
                            // (docs/helper.md, "--init"): bwrap now only
                            // waits for the kernel to tear the namespaces
                            // down. Stopped here, the dying init is left as
                            // `reap_orphans` leaves bwrap's own init. First,
                            // before the report is parsed: the run's end
                            // waits on this.
                            kill_sandbox(pid);
                        }
                        report_v = Some(report_json(&report.data));
                    }
                    if let (Some(r), Some(inf), None) = (&report_v, &info_v, &enforced) {
                        enforced =
                            Some(enforcement(plan, &ours, r.as_ref(), inf.as_ref(), user_ns));
                    }
                }
                Ok(n) => {
                    let chunk = &buf[..n];
                    match i {
                        0 => stderr.push(chunk),
                        1 => stdout.push(chunk),
                        2 => {
                            report.push(chunk);
                        }
                        _ => info.push(chunk),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Empty, and no writer is left (see `over`): done.
                Err(_) => open[*i] = None,
            }
        }
        if exited.is_none() && pfds.get(pid_idx).is_some_and(|p| p.revents != 0) {
            exited = Some(sys::wait_exit(pid).map_err(|e| Error::io("wait", e))?);
            // Nothing of the sandbox may outlive bwrap (see set_child_subreaper).
            // After the init's status line its zombie, if bwrap left it to us,
            // is all there can be: bwrap had no other child, and the init
            // became a zombie only once every process of its pid namespace
            // was gone. Reaped by its pid (no /proc lookup, no signal); if it
            // is not ours or not yet a zombie, the full search runs.
            over = match (init_exit, sandbox_init) {
                (Some(_), Some(init)) if sys::try_reap(init) => true,
                _ => reap_orphans(pid, sandbox_init),
            };
            reaped = true;
            if over {
                // Read what is buffered, then stop: do not wait for the
                // dying init to close its copies of the pipes.
                for f in open.iter().flatten() {
                    let _ = sys::set_nonblocking(f.as_raw_fd());
                }
            }
            drain_deadline = Some(Instant::now() + Duration::from_secs(2));
        }
        if sig_r >= 0
            && pfds
                .get(sig_idx)
                .is_some_and(|p| p.fd == sig_r && p.revents != 0)
        {
            let mut b = [0u8; 1];
            match sys::read(sig_r, &mut b) {
                Ok(1) if b[0] as i32 == libc::SIGTSTP && exited.is_none() => {
                    // Time spent stopped does not count against --timeout.
                    let away = suspend();
                    deadline = deadline.and_then(|d| d.checked_add(away));
                }
                Ok(1) if b[0] as i32 == libc::SIGTSTP => {}
                Ok(1) if b[0] as i32 == libc::SIGWINCH && exited.is_none() => {
                    signal_tree(sys::getpid(), libc::SIGWINCH);
                }
                Ok(1) if b[0] as i32 == libc::SIGWINCH => {}
                Ok(1) => {
                    interrupted = Some(b[0] as i32);
                    kill_sandbox(pid);
                }
                _ => {}
            }
        }
        if let Some(w) = &in_w {
            if pfds.get(in_idx).is_some_and(|p| p.revents != 0) {
                // A file on our stdin is copied a buffer at a time.
                if let (Some(src), true) = (stdin_src, stdin_off >= stdin_data.len()) {
                    stdin_data.resize(buf.len(), 0);
                    stdin_off = 0;
                    match sys::read(src, &mut stdin_data) {
                        Ok(n) if n > 0 => stdin_data.truncate(n),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => stdin_data.clear(),
                        _ => {
                            stdin_data.clear();
                            stdin_src = None;
                        }
                    }
                }
                match sys::write(w.as_raw_fd(), &stdin_data[stdin_off..]) {
                    Ok(n) => stdin_off += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => {
                        stdin_off = stdin_data.len();
                        stdin_src = None;
                    }
                }
            }
            if stdin_off >= stdin_data.len() && stdin_src.is_none() {
                in_w = None; // EOF for the command
            }
        }
        if let (Some(d), false, None) = (deadline, timed_out, exited) {
            if Instant::now() >= d {
                timed_out = true;
                kill_sandbox(pid);
            }
        }
    }
    let status = match exited {
        Some(s) => s,
        None => sys::wait_exit(pid).map_err(|e| Error::io("wait", e))?,
    };
    // Again only without a pid namespace: a process of the sandbox may have
    // been reparented to us while the pipes drained.
    if !reaped || plan.layers == Layers::Inner {
        let _ = reap_orphans(pid, sandbox_init);
    }

    use std::os::unix::process::ExitStatusExt;
    // After the init's report bwrap was stopped by us: its status says
    // nothing; the init's is what bwrap would have exited with.
    let (exit_code, signal) = match init_exit {
        Some(c) if !timed_out && interrupted.is_none() => (Some(c), None),
        _ => (status.code(), status.signal()),
    };
    let mut result = SandboxResult {
        exit_code,
        signal,
        stdout: stdout.captured(),
        stderr: stderr.captured(),
        timed_out,
        interrupted,
        duration_ms: start.elapsed().as_millis() as u64,
        uid: plan.uid,
        notes: plan.notes.clone(),
        git_created: git_created(plan),
        ..Default::default()
    };
    for g in &result.git_created {
        result.notes.push(git_created_note(g));
    }
    // Parsed here only if a pipe was left unfinished (a drain cut short).
    let report_v = report_v.unwrap_or_else(|| report_json(&report.data));
    let info_v = info_v.unwrap_or_else(|| info_json(&info.data));
    if !timed_out && interrupted.is_none() {
        classify_setup_failure(
            plan,
            &result,
            report_v.as_ref(),
            info_v.as_ref(),
            &stderr.data,
            &report.data,
        )?;
    }
    // bwrap reports a command killed by a signal as 128 + signal.
    if plan.layers != Layers::Inner && report_v.is_some() || plan.layers == Layers::Outer {
        if let Some(c) = result.exit_code.filter(|c| *c > 128 && *c < 128 + 65) {
            result.signal = Some(c - 128);
        }
    }
    result.enforcement = match enforced {
        Some(e) => e,
        None => enforcement(plan, &ours, report_v.as_ref(), info_v.as_ref(), user_ns),
    };
    if plan.proc == crate::plan::ProcStrategy::Tmpfs {
        result
            .degraded
            .push("outer: /proc is an empty tmpfs".into());
    }
    if plan.best_effort_inner {
        result
            .degraded
            .push("inner: Landlock best_effort (--allow-degraded inner)".into());
    }
    match plan.layers {
        Layers::Outer => result.degraded.push(
            "layers=outer: no helper (no Landlock, seccomp, NO_NEW_PRIVS from cordon)".into(),
        ),
        Layers::Inner => result
            .degraded
            .push("layers=inner: no bwrap (no namespaces, no mount isolation)".into()),
        Layers::Both => {}
    }
    Ok(result)
}

// Each is parsed as what its writer sends, so that no parse fails on the
// way: serde_json's error path locates the error with memchr, whose first
// call detects the CPU's features, and CPUID traps to the hypervisor in a
// VM (≈ 60 µs per run here, when the report was first tried as a whole).

/// bwrap's `--info-fd`: one pretty-printed object.
fn info_json(data: &[u8]) -> Option<Value> {
    let t = data.trim_ascii();
    if t.is_empty() {
        return None;
    }
    serde_json::from_slice(t).ok()
}

/// The helper's report: its first line (docs/helper.md lists the lines that
/// may follow it).
fn report_json(data: &[u8]) -> Option<Value> {
    let line = data.split(|b| *b == b'\n').next()?.trim_ascii();
    if line.is_empty() {
        return None;
    }
    serde_json::from_slice(line).ok()
}

/// The command's exit code as the helper, the sandbox's init, reported it:
/// the last line of the report pipe, `{"init_exit":N}` (docs/helper.md).
fn init_exit_code(report: &[u8]) -> Option<i32> {
    let text = String::from_utf8_lossy(report);
    let last = text.lines().last()?;
    let v: Value = serde_json::from_str(last).ok()?;
    let c = v.get("init_exit")?.as_i64()?;
    i32::try_from(c).ok().filter(|c| (0..=255).contains(c))
}

/// The helper's line after its report when the command's exec failed
/// (docs/helper.md): the error the launcher reports instead of a plain 74.
fn exec_failure(report: &[u8]) -> Option<Error> {
    let text = String::from_utf8_lossy(report);
    let v: Value = text.lines().skip(1).find_map(|l| {
        serde_json::from_str::<Value>(l)
            .ok()?
            .get("exec_failed")
            .cloned()
    })?;
    let path = v.get("path")?.as_str()?;
    let errno = v.get("errno")?.as_str()?;
    let what = format!("{path} ({errno}, when the helper exec'd it)");
    Some(match errno {
        "ENOENT" => Error::CommandNotFound(what),
        _ => Error::CommandNotExecutable(what),
    })
}

/// Turn a sandbox that never reached the command into a launcher error.
fn classify_setup_failure(
    plan: &Plan,
    r: &SandboxResult,
    report: Option<&Value>,
    info: Option<&Value>,
    stderr: &[u8],
    report_data: &[u8],
) -> Result<()> {
    let code = r.exit_code.unwrap_or(-1);
    let err = String::from_utf8_lossy(stderr).into_owned();
    if plan.layers != Layers::Inner && info.is_none() && code != 0 {
        // bwrap said nothing (a wrapper, or a bwrap that died): its status.
        if err.trim().is_empty() {
            let how = match r.signal {
                Some(s) if r.exit_code.is_none() => format!("killed by signal {s}"),
                _ => format!("exit status {code}"),
            };
            return Err(Error::BwrapFailed {
                stderr: format!("{how} before the sandbox started, with no message"),
            });
        }
        return Err(crate::probe::classify_bwrap_error(&err));
    }
    if plan.layers != Layers::Outer && report.is_none() && (64..=76).contains(&code) {
        return Err(Error::HelperFailed { code, stderr: err });
    }
    // Only an exit 74 can be the helper's failed exec: look no further otherwise.
    if plan.layers != Layers::Outer && code == 74 {
        if let Some(e) = exec_failure(report_data) {
            return Err(e);
        }
    }
    Ok(())
}

/// Is bwrap's child (the sandbox's init) in another user namespace than ours?
fn observe_user_ns(info: Option<&Value>, ours: &OurNamespaces) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let pid = info?.get("child-pid")?.as_u64()?;
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/user"))
        .ok()?
        .ino();
    Some(theirs != ours.get("user")?)
}

const NAMESPACES: [&str; 7] = ["mnt", "pid", "net", "ipc", "uts", "cgroup", "user"];

/// The launcher's own namespace ids, read while bwrap starts (off the path
/// from the command's exit to ours), compared with the sandbox's afterwards.
struct OurNamespaces([Option<u64>; 7]);

impl OurNamespaces {
    fn read() -> Self {
        // Relative to one open /proc/self/ns: one lookup of /proc/self, not seven.
        let Ok(dir) = sys::open(Path::new("/proc/self/ns"), libc::O_PATH | libc::O_DIRECTORY)
        else {
            return OurNamespaces([None; 7]);
        };
        OurNamespaces(NAMESPACES.map(|n| {
            nix::sys::stat::fstatat(&dir, n, nix::fcntl::AtFlags::empty())
                .ok()
                .map(|m| m.st_ino)
        }))
    }
    fn get(&self, name: &str) -> Option<u64> {
        let i = NAMESPACES.iter().position(|n| *n == name)?;
        self.0[i]
    }
}

fn enforcement(
    plan: &Plan,
    ours: &OurNamespaces,
    report: Option<&Value>,
    info: Option<&Value>,
    user_ns: Option<bool>,
) -> Enforcement {
    let mut e = Enforcement {
        layers: format!("{:?}", plan.layers).to_lowercase(),
        ..Default::default()
    };
    let not_run = |why: &str| json!({"applied": false, "reason": why});
    if plan.layers == Layers::Inner {
        e.namespaces = not_run("layers=inner: no bwrap");
        e.pivot_root = not_run("layers=inner: no bwrap");
        e.bind_mounts = not_run("layers=inner: no bwrap");
    } else if let Some(info) = info {
        let mut ns = serde_json::Map::new();
        for name in ["mnt", "pid", "net", "ipc", "uts", "cgroup"] {
            let theirs = info
                .get(format!("{name}-namespace"))
                .and_then(Value::as_u64);
            let ours = ours.get(name);
            ns.insert(
                name.into(),
                match (theirs, ours) {
                    (Some(t), Some(o)) => json!(t != o),
                    _ => json!(null),
                },
            );
        }
        // bwrap's info has no user namespace id: the child's, read while it ran.
        let user = user_ns
            .map(Value::Bool)
            .unwrap_or(json!("requested (--unshare-user); not observable"));
        ns.insert("user".into(), user);
        ns.insert(
            "source".into(),
            json!("bwrap --info-fd namespace ids compared with the launcher's"),
        );
        e.namespaces = Value::Object(ns);
        e.pivot_root = json!({"applied": true, "source": "bwrap reached the command (it pivots into a fresh tmpfs root or aborts)"});
        e.bind_mounts = json!({"applied": true, "count": plan.mounts, "proc": plan.proc, "source": "bwrap argv; bwrap aborts on any failed mount"});
    } else {
        e.namespaces = not_run("bwrap reported nothing (setup did not complete)");
        e.pivot_root = e.namespaces.clone();
        e.bind_mounts = e.namespaces.clone();
    }
    match (&plan.layers, report) {
        (Layers::Outer, _) => {
            let r = "layers=outer: no helper";
            e.no_new_privs = json!({"applied": "by bwrap (not verified)", "reason": r});
            e.landlock = not_run(r);
            e.seccomp = not_run(r);
            e.cap_drop = json!({"applied": "bwrap --cap-drop ALL (not verified)"});
        }
        (_, Some(r)) => {
            e.no_new_privs = r.get("no_new_privs").cloned().unwrap_or(Value::Null);
            e.landlock = r.get("landlock").cloned().unwrap_or(Value::Null);
            e.seccomp = r.get("seccomp").cloned().unwrap_or(Value::Null);
            e.cap_drop = r.get("caps").cloned().unwrap_or(Value::Null);
            e.helper_report = r.clone();
        }
        (_, None) => {
            let r = "the helper wrote no report (it did not reach exec)";
            e.no_new_privs = not_run(r);
            e.landlock = not_run(r);
            e.seccomp = not_run(r);
            e.cap_drop = not_run(r);
        }
    }
    e
}

#[cfg(test)]
mod tests {

    #[test]
    fn report_and_info_parse_as_their_writers_send_them() {
        let report = b"{\"helper\":{\"ok\":true}}\n{\"init_exit\":3}\n";
        assert_eq!(report_json(report).unwrap()["helper"]["ok"], true);
        assert_eq!(init_exit_code(report), Some(3));
        let info = b"{\n    \"child-pid\": 42,\n    \"cgroup-namespace\": 1\n}\n";
        assert_eq!(info_json(info).unwrap()["child-pid"], 42);
        assert!(report_json(b"").is_none() && info_json(b" \n").is_none());
        assert!(report_json(b"{\"cut").is_none());
    }
    use super::*;
    use std::io::{Read, Seek};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn policy_file_is_a_private_sealed_read_only_memfd() {
        let policy = serde_json::json!({"version": 1, "filesystem": {"allow": []}});
        let pf = PolicyFile::create(&policy, None).unwrap();
        let fd = pf.fd.as_ref().unwrap();
        let mut f = std::fs::File::from(fd.try_clone().unwrap());
        let m = f.metadata().unwrap();
        assert!(m.is_file());
        assert_eq!(m.mode() & 0o7777, 0o600);
        assert_eq!(m.uid(), sys::geteuid());
        let mut text = String::new();
        f.rewind().unwrap();
        f.read_to_string(&mut text).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), policy);
        // Not a name anywhere: the magic link points at a memfd.
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert!(
            link.to_string_lossy().starts_with("/memfd:cordon-policy"),
            "{link:?}"
        );
        // Sealed: even a writable reopen cannot change or grow it.
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .unwrap();
        let e = w.write_all(b"{}").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        assert!(w.set_len(0).is_err());
        let seals = nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_GET_SEALS).unwrap();
        let want = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
        assert_eq!(seals & want, want);
    }
}
