//! The host side of `cordon verify`: a fresh fixture tree, a marker process,
//! listeners, a leaked fd; reset between runs; host checks afterwards.
//!
//! Layout (ROOT = a fresh `cordon-verify-*` directory, mode 0755):
//!
//! ```text
//! ROOT/ws/            the workspace (--workspace)
//! ROOT/ws/ro.txt      --ro inside the writable workspace
//! ROOT/scratch/       --rw: a writable place to plant links (also for profiles
//!                     whose workspace is read-only)
//! ROOT/private/       --rw, holding hidden.env (--hide)
//! ROOT/outside/       not mounted: secret.txt, target.txt, victim.txt
//! ROOT/bin/           --ro: a copy of cordon-probe
//! ROOT/sock/l.sock    a pathname UNIX listener (not mounted)
//! ```
//!
//! As root, everything the sandbox touches is chowned to the sandbox uid
//! (65534), so that only the sandbox, never file permissions, stops an attack.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The sandbox uid when verify runs as root.
pub const ROOT_SANDBOX_UID: u32 = crate::plan::NOBODY;
/// The launcher's own secret variable, checked absent inside.
pub const ENV_NAME: &str = "CORDON_VERIFY_SECRET";
/// First fd number tried for the leaked fd.
const LEAK_FD_MIN: RawFd = 100;

pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (t >> ((i % 16) * 8)) as u8 ^ (std::process::id() as u8).wrapping_mul(i as u8);
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub struct Marker {
    pub pid: i32,
    pub secret: String,
    pub addr: String,
}

pub struct Fixtures {
    pub root: PathBuf,
    pub ws: PathBuf,
    pub scratch: PathBuf,
    pub private: PathBuf,
    pub outside: PathBuf,
    pub bin: PathBuf,
    pub probe: PathBuf,
    pub secret: PathBuf,
    pub hidden: PathBuf,
    pub ro_file: PathBuf,
    pub unix_sock: PathBuf,
    pub secret_marker: String,
    pub hidden_marker: String,
    pub ro_marker: String,
    pub abstract_name: String,
    pub env_secret: String,
    pub tcp_port: u16,
    pub udp: UdpSocket,
    pub udp_port: u16,
    pub marker: Marker,
    pub leak_fd: RawFd,
    /// chown target for everything the sandbox touches (root only).
    pub owner: Option<(u32, u32)>,
    pub sandbox_uid: u32,
    baseline: Snapshot,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let w = what.into();
    move |e| Error::io(w, e)
}

// The directories below ROOT belong to the sandbox uid, so a process of
// that uid on the host may swap an entry for a symlink at any moment: as
// root, nothing here may follow one. Entries are created exclusively and
// without following a link, then changed through the open fd only.

/// chmod and chown through the fd, never by path.
fn own_fd(f: &std::fs::File, p: &Path, mode: u32, owner: Option<(u32, u32)>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io(format!("chmod {}", p.display())))?;
    if let Some((u, g)) = owner {
        std::os::unix::fs::fchown(f, Some(u), Some(g))
            .map_err(io(format!("chown {}", p.display())))?;
    }
    Ok(())
}

fn mkdir(p: &Path, owner: Option<(u32, u32)>) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(p)
        .map_err(io(format!("mkdir {}", p.display())))?;
    let d = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(p)
        .map_err(io(format!("open {}", p.display())))?;
    own_fd(&d, p, 0o755, owner)
}

fn put(p: &Path, content: &str, owner: Option<(u32, u32)>) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let _ = std::fs::remove_file(p);
    // create_new: O_CREAT|O_EXCL, which never follows a symlink either.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .map_err(io(format!("create {}", p.display())))?;
    f.write_all(content.as_bytes())
        .map_err(io(format!("write {}", p.display())))?;
    own_fd(&f, p, 0o644, owner)
}

/// Remove every entry of `dir` except `keep`.
fn clear_dir(dir: &Path, keep: &[&str]) -> Result<()> {
    let rd = std::fs::read_dir(dir).map_err(io(format!("list {}", dir.display())))?;
    for e in rd.flatten() {
        if keep.iter().any(|k| e.file_name() == *k) {
            continue;
        }
        let p = e.path();
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let r = if is_dir {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        r.map_err(io(format!("remove {}", p.display())))?;
    }
    Ok(())
}

fn spawn_banner<S, F>(mut accept: F, banner: &'static [u8])
where
    F: FnMut() -> std::io::Result<S> + Send + 'static,
    S: Write,
{
    std::thread::spawn(move || loop {
        match accept() {
            Ok(mut s) => {
                let _ = s.write_all(banner);
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    });
}

/// The parent directory for fixtures: /var/tmp when usable (it is neither the
/// sandbox's scratch /tmp nor a path the helper grants), else $TMPDIR.
pub fn default_parent() -> PathBuf {
    let vt = Path::new("/var/tmp");
    let usable = nix::unistd::access(
        vt,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .is_ok();
    if usable {
        vt.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

impl Fixtures {
    pub fn create(parent: &Path, probe_src: &Path, euid: u32) -> Result<Fixtures> {
        let owner = (euid == 0).then_some((ROOT_SANDBOX_UID, ROOT_SANDBOX_UID));
        let sandbox_uid = owner.map(|o| o.0).unwrap_or(euid);
        let parent = std::fs::canonicalize(parent)
            .map_err(io(format!("fixture dir {}", parent.display())))?;
        let root = parent.join(format!("cordon-verify-{}", random_hex(6)));
        mkdir(&root, None)?;
        // From here on, a failure removes ROOT (Drop) once the struct exists;
        // before that, remove it by hand.
        let built = Self::build(root.clone(), probe_src, owner, sandbox_uid);
        if built.is_err() {
            let _ = std::fs::remove_dir_all(&root);
        }
        built
    }

    fn build(
        root: PathBuf,
        probe_src: &Path,
        owner: Option<(u32, u32)>,
        sandbox_uid: u32,
    ) -> Result<Fixtures> {
        let ws = root.join("ws");
        let scratch = root.join("scratch");
        let private = root.join("private");
        let outside = root.join("outside");
        let bin = root.join("bin");
        let sock = root.join("sock");
        for d in [&ws, &scratch, &private, &outside, &sock] {
            mkdir(d, owner)?;
        }
        mkdir(&bin, None)?;
        let probe = bin.join("cordon-probe");
        std::fs::copy(probe_src, &probe).map_err(io(format!("copy {}", probe_src.display())))?;
        std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755))
            .map_err(io("chmod probe"))?;

        // The marker first: it must inherit neither the leaked fd nor listeners.
        let marker = spawn_marker(owner)?;

        let tcp = TcpListener::bind("127.0.0.1:0").map_err(io("tcp listener"))?;
        let tcp_port = tcp.local_addr().map_err(io("tcp listener"))?.port();
        spawn_banner(
            move || tcp.accept().map(|c| c.0),
            b"cordon-verify tcp banner\n",
        );
        let udp = UdpSocket::bind("127.0.0.1:0").map_err(io("udp listener"))?;
        udp.set_nonblocking(true).map_err(io("udp listener"))?;
        let udp_port = udp.local_addr().map_err(io("udp listener"))?.port();
        let abstract_name = format!("cordon-verify-{}", random_hex(6));
        {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .map_err(io("abstract listener"))?;
            let l = UnixListener::bind_addr(&addr).map_err(io("abstract listener"))?;
            spawn_banner(
                move || l.accept().map(|c| c.0),
                b"cordon-verify abstract banner\n",
            );
        }
        let unix_sock = sock.join("l.sock");
        let l = UnixListener::bind(&unix_sock).map_err(io("unix listener"))?;
        std::fs::set_permissions(&unix_sock, std::fs::Permissions::from_mode(0o777))
            .map_err(io("chmod unix listener"))?;
        spawn_banner(
            move || l.accept().map(|c| c.0),
            b"cordon-verify unix banner\n",
        );

        let mut f = Fixtures {
            secret: outside.join("secret.txt"),
            hidden: private.join("hidden.env"),
            ro_file: ws.join("ro.txt"),
            root,
            ws,
            scratch,
            private,
            outside,
            bin,
            probe,
            unix_sock,
            secret_marker: format!("SECRET-{}", random_hex(8)),
            hidden_marker: format!("HIDDEN-{}", random_hex(8)),
            ro_marker: format!("RO-{}", random_hex(8)),
            abstract_name,
            env_secret: format!("ENV-{}", random_hex(8)),
            tcp_port,
            udp,
            udp_port,
            marker,
            leak_fd: -1,
            owner,
            sandbox_uid,
            baseline: Snapshot::default(),
        };
        f.reset()?;
        // An fd on the secret, not close-on-exec, as a careless caller leaks it.
        let file = std::fs::File::open(&f.secret).map_err(io("open secret"))?;
        // SAFETY: F_DUPFD duplicates a valid fd to the lowest free number >= 100,
        // without FD_CLOEXEC; the duplicate is owned by `f` and closed in Drop.
        let fd = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD, LEAK_FD_MIN) };
        if fd < 0 {
            return Err(Error::io("leak fd", std::io::Error::last_os_error()));
        }
        f.leak_fd = fd;
        f.baseline = f.snapshot();
        Ok(f)
    }

    /// Put every fixture back as created (single-layer runs may have changed them).
    pub fn reset(&mut self) -> Result<()> {
        let o = self.owner;
        clear_dir(&self.ws, &[])?;
        put(&self.ro_file, &format!("{}\n", self.ro_marker), o)?;
        // A repository's git directory, for the hook attack.
        let git = self.ws.join(".git");
        mkdir(&git, o)?;
        mkdir(&git.join("hooks"), o)?;
        put(
            &git.join("config"),
            "[core]\n\trepositoryformatversion = 0\n",
            o,
        )?;
        clear_dir(&self.scratch, &[])?;
        clear_dir(&self.private, &[])?;
        put(&self.hidden, &format!("TOKEN={}\n", self.hidden_marker), o)?;
        clear_dir(&self.outside, &[])?;
        put(&self.secret, &format!("{}\n", self.secret_marker), o)?;
        put(&self.outside.join("target.txt"), "host data\n", o)?;
        put(&self.outside.join("victim.txt"), "host data\n", o)?;
        if self.leak_fd >= 0 {
            // Keep the leaked fd pointing at the current secret inode.
            let file = std::fs::File::open(&self.secret).map_err(io("open secret"))?;
            // SAFETY: dup2 onto our own leaked fd number; both fds are valid.
            if unsafe { libc::dup2(file.as_raw_fd(), self.leak_fd) } < 0 {
                return Err(Error::io("leak fd", std::io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// The placeholders of the catalogue.
    pub fn vars(&self, fork_n: u64, mem_mib: u64) -> BTreeMap<&'static str, String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mut v = BTreeMap::new();
        v.insert("secret", s(&self.secret));
        v.insert("secret_marker", self.secret_marker.clone());
        v.insert("outside", s(&self.outside));
        v.insert("scratch", s(&self.scratch));
        v.insert("hidden", s(&self.hidden));
        v.insert("hidden_marker", self.hidden_marker.clone());
        v.insert("ro_file", s(&self.ro_file));
        v.insert("ws_git", s(&self.ws.join(".git")));
        v.insert("ro_marker", self.ro_marker.clone());
        v.insert("marker_pid", self.marker.pid.to_string());
        v.insert("marker_addr", self.marker.addr.clone());
        v.insert("marker_secret", self.marker.secret.clone());
        v.insert("env_secret", self.env_secret.clone());
        v.insert("env_name", ENV_NAME.to_string());
        v.insert("leak_fd", self.leak_fd.to_string());
        v.insert("tcp_port", self.tcp_port.to_string());
        v.insert("udp_port", self.udp_port.to_string());
        v.insert("abstract_name", self.abstract_name.clone());
        v.insert("unix_sock", s(&self.unix_sock));
        v.insert("fork_n", fork_n.to_string());
        v.insert("mem_mib", mem_mib.to_string());
        v
    }

    /// Datagrams received by the UDP listener since the last call.
    pub fn udp_received(&self) -> usize {
        let mut n = 0;
        let mut buf = [0u8; 256];
        while self.udp.recv_from(&mut buf).is_ok() {
            n += 1;
        }
        n
    }

    /// What changed on the host side of the fixtures since they were created.
    pub fn host_changes(&self) -> Vec<String> {
        self.baseline.diff(&self.snapshot())
    }

    fn snapshot(&self) -> Snapshot {
        let mut m = BTreeMap::new();
        let mut add = |p: &Path| {
            let v = match std::fs::symlink_metadata(p) {
                // Directory sizes and link counts move with their entries.
                Ok(md) if md.is_dir() => format!("dir mode={:o} uid={}", md.mode(), md.uid()),
                Ok(md) => format!(
                    "size={} nlink={} mode={:o} uid={} content={:x}",
                    md.len(),
                    md.nlink(),
                    md.mode(),
                    md.uid(),
                    std::fs::read(p).map(|d| fnv(&d)).unwrap_or(0)
                ),
                Err(_) => "absent".into(),
            };
            m.insert(p.to_path_buf(), v);
        };
        for dir in [
            &self.root,
            &self.outside,
            &self.bin,
            &self.root.join("sock"),
        ] {
            add(dir);
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten() {
                    add(&e.path());
                }
            }
        }
        add(&self.ro_file);
        add(&self.hidden);
        Snapshot(m)
    }

    /// The end-of-run host checks: (name, ok, detail).
    pub fn final_checks(&self) -> Vec<(String, bool, String)> {
        let mut out = Vec::new();
        let secret = std::fs::read_to_string(&self.secret).unwrap_or_default();
        out.push((
            "secret unchanged".into(),
            secret == format!("{}\n", self.secret_marker),
            self.secret.display().to_string(),
        ));
        let changes = self.host_changes();
        out.push((
            "nothing created or changed outside the writable paths".into(),
            changes.is_empty(),
            if changes.is_empty() {
                "fixture tree as created".into()
            } else {
                changes.join("; ")
            },
        ));
        let (ok, detail) = self.marker_state();
        out.push(("marker process alive and unsignalled".into(), ok, detail));
        out
    }

    fn marker_state(&self) -> (bool, String) {
        let pid = self.marker.pid;
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return (false, format!("pid {pid} is gone"));
        };
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
                .unwrap_or_default()
        };
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let ours = contains(&env, self.marker.secret.as_bytes());
        let state = field("State:");
        let pending = [field("SigPnd:"), field("ShdPnd:")];
        let unsignalled = pending.iter().all(|p| p.trim_start_matches('0').is_empty());
        let alive = !state.starts_with('Z') && !state.starts_with('T') && !state.starts_with('X');
        (
            ours && alive && unsignalled,
            format!(
                "pid {pid}: state {state}, pending {}/{}, marker env {}",
                pending[0],
                pending[1],
                if ours { "present" } else { "MISSING" }
            ),
        )
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        let pid = self.marker.pid;
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if pid > 1 && contains(&env, self.marker.secret.as_bytes()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if self.leak_fd >= 0 {
            // SAFETY: closing the fd this struct owns.
            unsafe { libc::close(self.leak_fd) };
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn fnv(d: &[u8]) -> u64 {
    d.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100000001b3)
    })
}

#[derive(Default, Debug, Clone)]
struct Snapshot(BTreeMap<PathBuf, String>);

impl Snapshot {
    fn diff(&self, now: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        for (p, v) in &now.0 {
            match self.0.get(p) {
                None => out.push(format!("created {}", p.display())),
                Some(old) if old != v => {
                    out.push(format!("changed {} ({old} -> {v})", p.display()))
                }
                _ => {}
            }
        }
        for p in self.0.keys() {
            if !now.0.contains_key(p) {
                out.push(format!("removed {}", p.display()));
            }
        }
        out
    }
}

/// A `sleep` with a secret in its environment, detached from us (so the
/// runner's orphan reaping, which kills our children, leaves it alone), as the
/// sandbox uid. Its pid and the address of its first mapping are the targets.
fn spawn_marker(owner: Option<(u32, u32)>) -> Result<Marker> {
    let secret = format!("MARKER-{}", random_hex(8));
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "sleep 900 </dev/null >/dev/null 2>&1 & echo $!"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("CORDON_MARKER", &secret)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .current_dir("/");
    if let Some((u, g)) = owner {
        cmd.uid(u).gid(g);
    }
    let out = cmd.output().map_err(io("spawn marker (/bin/sh)"))?;
    let pid: i32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| Error::io("spawn marker", std::io::Error::other("no pid printed")))?;
    // Wait until it runs `sleep` (its own mappings), then take its first mapping.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "sleep" || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let addr = maps
        .lines()
        .next()
        .and_then(|l| l.split('-').next())
        .map(|a| format!("0x{a}"))
        .unwrap_or_else(|| "0x400000".into());
    Ok(Marker { pid, secret, addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symlink planted where a fixture goes is replaced, never followed:
    /// its target keeps its content and mode (verify runs as root among
    /// directories the sandbox uid owns).
    #[test]
    fn put_and_mkdir_never_follow_a_planted_symlink() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::write(&target, "host data\n").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let p = d.path().join("fixture.txt");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        put(&p, "fixture\n", None).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "host data\n");
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.is_file() && m.mode() & 0o777 == 0o644);
        // A link where a directory goes is an error, not a chmod of its target.
        let dir_link = d.path().join("dir");
        std::os::unix::fs::symlink(d.path(), &dir_link).unwrap();
        assert!(mkdir(&dir_link, None).is_err());
        assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o600);
    }
}
