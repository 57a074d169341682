//! The `cordon` command line: run, explain, exec-json, doctor.

use crate::error::{exit, Error, Result};
use crate::helper_bin::{self, Helper};
use crate::plan::{self, EnvArg, Host, Layers, Options, Plan, ProcStrategy};
use crate::policy::{Config, GitAccess, Network, Profile, ProfileDef, TmpfsSize};
use crate::runner::{self, Input, RunConfig, SandboxResult};
use crate::{doctor, paths, probe, sys};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

pub const USAGE: &str = "usage:
  cordon run     [OPTIONS] -- CMD [ARGS...]   run CMD sandboxed; exit with its status
  cordon explain [OPTIONS] -- CMD [ARGS...]   print the bwrap argv and helper policy, run nothing
  cordon exec-json                            read a JSON request on stdin, write the JSON result
  cordon doctor [--json]                      check the host; each line PASS/FAIL with a fix
  cordon verify [--profile P] [--config F] [--json] [--only PATTERN]
                                              attack the sandbox on this host; print a scorecard
options:
  --profile P  --config FILE  --workspace DIR  --cwd DIR
  --rw PATH  --ro PATH  --hide PATH  (repeatable)
  --network none|host  --env NAME[=VALUE]  --allow-env-injection NAME
  --timeout SECS  --json  --layers both|outer|inner  --uid N
  --allow-degraded outer|inner  --helper-sha256 HEX  --cache-root DIR  --output-cap BYTES
  --git ro|rw  (a writable path's .git: read-only by default, as its hooks run on the host)
  --tmpfs-size SIZE|unlimited  (each of /tmp, HOME, /dev/shm; default an eighth of the RAM)
exit codes: the command's status; 128+N killed by signal N; 124 timeout;
  125 launcher/setup error; 126 not executable; 127 not found (docs/launcher.md)";

#[derive(Debug, Default)]
pub struct Args {
    pub profile: Option<String>,
    pub config: Option<PathBuf>,
    pub workspace: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub rw: Vec<PathBuf>,
    pub ro: Vec<PathBuf>,
    pub hide: Vec<PathBuf>,
    pub network: Option<Network>,
    pub env: Vec<EnvArg>,
    pub allow_injection: Vec<String>,
    pub timeout: Option<u64>,
    pub json: bool,
    pub layers: Option<Layers>,
    pub uid: Option<u32>,
    pub degrade_outer: bool,
    pub degrade_inner: bool,
    pub helper_sha256: Option<String>,
    pub cache_root: Option<PathBuf>,
    pub output_cap: Option<usize>,
    pub git: Option<GitAccess>,
    pub tmpfs_size: Option<TmpfsSize>,
    pub command: Vec<String>,
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T> {
    v.parse().map_err(|_| {
        let what = match !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
            true => "out of range",
            false => "not a number",
        };
        Error::Usage(format!("{flag}: {what}: {v:?}"))
    })
}

pub fn parse_args(argv: &[String]) -> Result<Args> {
    let mut a = Args::default();
    let mut i = 0;
    while i < argv.len() {
        let f = argv[i].as_str();
        if f == "--" {
            a.command = argv[i + 1..].to_vec();
            break;
        }
        let flag_only = matches!(f, "--json");
        if flag_only {
            a.json = true;
            i += 1;
            continue;
        }
        if !f.starts_with("--") {
            // No `--`: the command starts at the first non-option.
            a.command = argv[i..].to_vec();
            break;
        }
        let v = argv
            .get(i + 1)
            .ok_or_else(|| Error::Usage(format!("{f} needs a value")))?;
        match f {
            "--profile" => a.profile = Some(v.clone()),
            "--config" => a.config = Some(v.into()),
            "--workspace" => a.workspace = Some(v.into()),
            "--cwd" => a.cwd = Some(v.into()),
            "--rw" => a.rw.push(v.into()),
            "--ro" => a.ro.push(v.into()),
            "--hide" => a.hide.push(v.into()),
            "--network" => a.network = Some(v.parse()?),
            "--env" => a.env.push(EnvArg::parse(v)),
            "--allow-env-injection" => a.allow_injection.push(v.clone()),
            "--timeout" => a.timeout = Some(num(f, v)?),
            "--layers" => a.layers = Some(v.parse()?),
            "--uid" => a.uid = Some(num(f, v)?),
            "--allow-degraded" => match v.as_str() {
                "outer" => a.degrade_outer = true,
                "inner" => a.degrade_inner = true,
                _ => {
                    return Err(Error::Usage(
                        "--allow-degraded: expected outer|inner".into(),
                    ))
                }
            },
            "--helper-sha256" => a.helper_sha256 = Some(v.clone()),
            "--cache-root" => a.cache_root = Some(v.into()),
            "--output-cap" => a.output_cap = Some(num(f, v)?),
            "--git" => a.git = Some(v.parse()?),
            "--tmpfs-size" => a.tmpfs_size = Some(v.parse()?),
            _ => return Err(Error::Usage(format!("unknown option {f}"))),
        }
        i += 2;
    }
    Ok(a)
}

fn env_map() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// `p` made absolute against the current directory. An empty value is an
/// error, not the current directory: `--rw "$UNSET"` must not grant it.
fn absolute(flag: &str, p: &Path) -> Result<PathBuf> {
    if p.as_os_str().is_empty() {
        return Err(Error::Usage(format!("{flag}: empty path")));
    }
    // Said here: past these limits every lookup fails, and "does not exist"
    // would be the wrong reason.
    let (max_path, max_name) = (libc::PATH_MAX as usize, 255);
    if p.as_os_str().len() >= max_path {
        return Err(Error::Usage(format!(
            "{flag}: path longer than {max_path} bytes"
        )));
    }
    if p.iter().any(|c| c.len() > max_name) {
        return Err(Error::Usage(format!(
            "{flag}: a path component longer than {max_name} bytes"
        )));
    }
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(|e| Error::io("current directory", e))?;
    Ok(cwd.join(p))
}

/// The (gid, home) of `uid`: its first /etc/passwd entry, the file read once per
/// process (a plan asks up to three times); for a uid not listed there, musl's
/// lookup, which also asks nscd.
static PASSWD: std::sync::OnceLock<Vec<(u32, u32, PathBuf)>> = std::sync::OnceLock::new();

fn user(uid: u32) -> Option<(u32, PathBuf)> {
    let entries = PASSWD.get_or_init(|| {
        std::fs::read_to_string("/etc/passwd")
            .map(|s| parse_passwd(&s))
            .unwrap_or_default()
    });
    if let Some((_, gid, home)) = entries.iter().find(|e| e.0 == uid) {
        return Some((*gid, home.clone()));
    }
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| (u.gid.as_raw(), u.dir))
}

/// `name:password:uid:gid:gecos:home:shell` lines; malformed ones are skipped,
/// as libc does.
fn parse_passwd(s: &str) -> Vec<(u32, u32, PathBuf)> {
    s.lines()
        .filter_map(|l| {
            // Fields 2, 3 and 5, and exactly seven of them. Split as bytes:
            // str's char-pattern split costs ≈ 125 instructions a field.
            let mut f = l.as_bytes().split(|&b| b == b':');
            let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u32>().ok();
            let uid = num(f.nth(2)?)?;
            let gid = num(f.next()?)?;
            let home = f.nth(1)?;
            if f.next().is_none() || f.next().is_some() {
                return None;
            }
            Some((uid, gid, PathBuf::from(std::str::from_utf8(home).ok()?)))
        })
        .collect()
}

/// Every home directory /etc/passwd names (the file read once per process).
fn passwd_homes() -> Vec<PathBuf> {
    let _ = user(0);
    match PASSWD.get() {
        Some(e) => e.iter().map(|(_, _, h)| h.clone()).collect(),
        None => Vec::new(),
    }
}

fn gid_of(uid: u32) -> Option<u32> {
    user(uid).map(|u| u.0)
}

/// Home directories whose credential dirs are hidden: the caller's, the
/// launcher user's, root's, and every directory in /home.
/// The launcher is a static musl binary: user lookups read /etc/passwd only
/// (no NSS). An account known only to LDAP/sssd therefore needs HOME; with
/// neither, refuse rather than leave its credential dirs unhidden.
fn homes(env: &BTreeMap<String, String>, euid: u32, fs: &dyn paths::Fs) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = Vec::new();
    let home = env.get("HOME").filter(|h| h.starts_with('/'));
    if let Some(h) = home {
        v.push(h.into());
    }
    match user(euid) {
        Some((_, dir)) => v.push(dir),
        _ if home.is_none() => {
            return Err(Error::Env(format!(
                "HOME is not set and uid {euid} has no /etc/passwd entry, so its home directory is unknown and its credential dirs (~/.ssh, ~/.aws, ...) could not be hidden; set HOME to an absolute path"
            )))
        }
        _ => {}
    }
    v.push("/root".into());
    if let Ok(names) = sys::dir_names(Path::new("/home")) {
        for n in names {
            v.push(Path::new("/home").join(n));
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for h in v {
        if out.iter().any(|o| paths::same(o, &h)) {
            continue; // listed already, or the real path of one listed
        }
        // Hide under the real path too (a symlinked $HOME).
        let real = fs.canonicalize(&h).unwrap_or(h.clone());
        for p in [h, real] {
            if !out.iter().any(|o| paths::same(o, &p)) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// Everything resolved before running: the plan and the verified helper.
pub struct Prepared {
    pub plan: Plan,
    pub helper: Option<Helper>,
    pub degraded: Vec<String>,
    pub probe_cached: Option<bool>,
    /// bwrap, started early for this plan (`runner::run_launched` checks it).
    pub launched: Option<runner::Launched>,
}

/// Start bwrap before the plan is built: its startup (exec, dynamic loading:
/// ≈ 1 ms here) then overlaps the planning and the helper's verification.
/// Only when everything it needs at exec is already known: both layers, the
/// uid switch, and from the probe cache the /proc strategy and how many file
/// masks plans needed so far (one fd each: spare ones reach the helper, which
/// closes them). It waits for its options on a pipe; `runner::run_launched`
/// sends them only if the finished plan matches what it was started with,
/// else kills it and starts another. Returns the bwrap and the cached facts
/// it was started with (sandbox uid, /proc strategy, mask count); (None,
/// None) to start it after the plan, as before.
fn launch_early(
    opts: &Options,
    host: &Host,
    fs: &dyn paths::Fs,
    helper: &helper_bin::Opened,
    cfg: &RunConfig,
    cache_dir: Option<&Path>,
    allow_degraded_outer: bool,
) -> (Option<runner::Launched>, Option<(u32, ProcStrategy, usize)>) {
    use plan::{FdRole, EMPTY_FD_FIRST, HELPER_FD, INFO_FD, POLICY_FD, REPORT_FD};
    let Some(switch_to) = plan::early_switch(opts, host, fs) else {
        return (None, None);
    };
    let uid = switch_to.map(|s| s.0).unwrap_or(host.euid);
    let Some((proc_, file_masks)) =
        probe::cached_launch(&host.bwrap, uid, cache_dir, allow_degraded_outer)
    else {
        return (None, None);
    };
    let tail = plan::inner_argv(Layers::Both, proc_ != ProcStrategy::Tmpfs, &opts.command);
    let mut fds = vec![
        (REPORT_FD, FdRole::Report),
        (INFO_FD, FdRole::Info),
        (POLICY_FD, FdRole::Policy),
        (HELPER_FD, FdRole::Helper),
    ];
    fds.extend((0..file_masks as i32).map(|i| (EMPTY_FD_FIRST + i, FdRole::Empty)));
    let Some(program) = host.bwrap.to_str() else {
        return (None, None);
    };
    let spec = runner::LaunchSpec {
        layers: Layers::Both,
        program,
        tail: &tail,
        env: &[],
        cwd: Path::new("/"),
        fds: &fds,
        switch_to,
        policy: None,
    };
    let launched = runner::launch(&spec, Some(helper.fd()), cfg).ok();
    if launched.is_some() {
        if let Some(f) = crate::AFTER_EARLY_LAUNCH.get() {
            f();
        }
    }
    (launched, Some((uid, proc_, file_masks)))
}

pub fn load_profile(args: &Args, inline: Option<ProfileDef>) -> Result<Profile> {
    let mut cfg = match &args.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    let name = args.profile.clone().unwrap_or_else(|| "default".into());
    if let Some(def) = inline {
        let mut def = def;
        if def.extends.is_none() {
            def.extends = Some(name.clone());
        }
        cfg.profiles.insert("inline".into(), def);
        return cfg.resolve("inline");
    }
    cfg.resolve(&name)
}

/// `early`: start bwrap as soon as what it needs at exec is known, while the
/// plan is built (see `launch_early`); the result carries it in `launched`.
pub fn prepare(
    args: &Args,
    profile: &Profile,
    probe_it: bool,
    early: Option<&RunConfig>,
) -> Result<Prepared> {
    if args.command.is_empty() {
        return Err(Error::Usage(
            "no command given (cordon run [OPTIONS] -- CMD ...)".into(),
        ));
    }
    let env = env_map();
    let euid = sys::geteuid();
    let workspace = match &args.workspace {
        Some(w) => absolute("--workspace", w)?,
        None => std::env::current_dir().map_err(|e| Error::io("current directory", e))?,
    };
    let mut opts = Options::new(args.command.clone(), workspace);
    opts.workspace_implicit = args.workspace.is_none();
    opts.cwd = args
        .cwd
        .as_deref()
        .map(|p| absolute("--cwd", p))
        .transpose()?;
    opts.rw = args
        .rw
        .iter()
        .map(|p| absolute("--rw", p))
        .collect::<Result<_>>()?;
    opts.ro = args
        .ro
        .iter()
        .map(|p| absolute("--ro", p))
        .collect::<Result<_>>()?;
    opts.hide = args
        .hide
        .iter()
        .map(|p| absolute("--hide", p))
        .collect::<Result<_>>()?;
    opts.network = args.network;
    // A passed-through variable whose value is not UTF-8 cannot be carried
    // as text: refused, not silently left unset.
    for e in &args.env {
        if let EnvArg::Pass(n) = e {
            if !env.contains_key(n) && std::env::var_os(n).is_some() {
                return Err(Error::Env(format!(
                    "--env {n}: the caller's value is not valid UTF-8; pass it as --env {n}=VALUE"
                )));
            }
        }
    }
    opts.env = args.env.clone();
    opts.allow_injection = args.allow_injection.clone();
    opts.timeout = args.timeout;
    opts.layers = args.layers.unwrap_or(Layers::Both);
    // (uid_t)-1 means "leave unchanged" to setresuid: never a sandbox uid.
    if args.uid == Some(u32::MAX) {
        return Err(Error::Usage(format!(
            "--uid: {} is not a valid uid",
            u32::MAX
        )));
    }
    opts.uid = args.uid;
    opts.degrade_outer = args.degrade_outer;
    opts.degrade_inner = args.degrade_inner;
    opts.git = args.git;
    opts.tmpfs_size = args.tmpfs_size;
    opts.cache_root = args
        .cache_root
        .as_deref()
        .map(|p| absolute("--cache-root", p))
        .transpose()?;

    let mut degraded = Vec::new();
    let bwrap = if opts.layers == Layers::Inner {
        PathBuf::from("bwrap")
    } else {
        match probe::find_bwrap(
            env.get("CORDON_BWRAP").map(String::as_str),
            env.get("PATH").map(String::as_str),
        ) {
            Ok(b) => b,
            Err(e) if args.degrade_outer && opts.layers == Layers::Both => {
                degraded.push(format!("outer layer unavailable ({e}); running the helper alone (--allow-degraded outer)"));
                opts.layers = Layers::Inner;
                PathBuf::from("bwrap")
            }
            Err(e) => return Err(e),
        }
    };
    let helper = if opts.layers == Layers::Outer {
        None
    } else {
        let exe = std::env::current_exe().ok();
        let p = helper_bin::discover(
            env.get("CORDON_HELPER").map(String::as_str),
            exe.as_deref(),
            env.get("PATH").map(String::as_str),
        )?;
        // Open now, verified below: an early bwrap gets this fd but cannot
        // exec it before its options, which follow the verification.
        Some(helper_bin::open(&p)?)
    };
    let mut host = Host {
        euid,
        egid: sys::getegid(),
        env: env.clone(),
        homes: Vec::new(),
        passwd_homes: Vec::new(),
        bwrap: bwrap.clone(),
        proc: ProcStrategy::Fresh,
        gid_of,
        groups: nix::unistd::getgroups()
            .ok()
            .map(|g| g.iter().map(|g| g.as_raw()).collect()),
        mem_bytes: sys::mem_bytes(),
    };
    let fs = paths::CachedFs::new(&paths::RealFs);
    let probe_dir = probe::cache_dir(&env, euid);
    let (mut launched, cached) = match (early, &helper) {
        (Some(cfg), Some(h)) if probe_it && opts.layers == Layers::Both => launch_early(
            &opts,
            &host,
            &fs,
            h,
            cfg,
            probe_dir.as_deref(),
            args.degrade_outer,
        ),
        _ => (None, None),
    };
    let helper = match helper {
        Some(h) => {
            let want = args
                .helper_sha256
                .clone()
                .or_else(|| env.get("CORDON_HELPER_SHA256").cloned());
            let cache = helper_bin::cache_dir(&env, euid);
            Some(helper_bin::verify_opened(
                h,
                want.as_deref(),
                cache.as_deref(),
            )?)
        }
        None => None,
    };
    host.homes = homes(&env, euid, &fs)?;
    if opts.workspace_implicit {
        host.passwd_homes = passwd_homes();
    }
    let mut plan = plan::build(profile, &opts, &host, &fs)?;
    let mut probe_cached = None;
    if probe_it && plan.layers != Layers::Inner {
        let h = match &helper {
            Some(h) => h,
            // Outer-only still runs the preflight, with the helper if one is found.
            None => {
                return Ok(Prepared {
                    plan,
                    helper,
                    degraded,
                    probe_cached,
                    launched: launched.take(),
                })
            }
        };
        let outcome = probe::preflight(&probe::ProbeInput {
            bwrap: &bwrap,
            helper: h,
            uid: plan.uid,
            gid: plan.gid,
            switch: plan.switch_to,
            allow_degraded_outer: args.degrade_outer,
            cache_dir: probe::cache_dir(&env, euid),
            // Read from the cache a moment ago, if for the same uid.
            known: cached.filter(|c| c.0 == plan.uid).map(|c| c.1),
        });
        match outcome {
            Ok(o) => {
                probe_cached = Some(o.cached);
                if o.proc != ProcStrategy::Fresh {
                    host.proc = o.proc;
                    plan = plan::build(profile, &opts, &host, &fs)?;
                }
                // A read-only bind of the host /proc, proven safe by the
                // probe, is not a degradation; an empty /proc is.
                if o.proc == ProcStrategy::Tmpfs {
                    degraded.push("outer: fresh /proc refused; using an empty tmpfs /proc (--allow-degraded outer)".into());
                }
            }
            Err(e @ Error::UserNamespacesRefused { .. })
                if args.degrade_outer && plan.layers == Layers::Both =>
            {
                degraded.push(format!("outer layer unavailable ({e}); running the helper alone (--allow-degraded outer)"));
                opts.layers = Layers::Inner;
                plan = plan::build(profile, &opts, &host, &fs)?;
            }
            Err(e) => return Err(e),
        }
        let masks = plan
            .fds
            .iter()
            .filter(|f| f.1 == plan::FdRole::Empty)
            .count();
        if plan.layers == Layers::Both && cached.map_or(true, |c| c.0 != plan.uid || c.2 < masks) {
            probe::remember_file_masks(&bwrap, plan.uid, probe_dir.as_deref(), masks);
        }
    }
    Ok(Prepared {
        plan,
        helper,
        degraded,
        probe_cached,
        launched,
    })
}

/// Print one line on stdout; a closed stdout is not worth a panic.
fn out_line(s: &str) {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    crate::note_out(writeln!(o, "{s}").and_then(|()| o.flush()));
}

/// One line, always: a newline in a path or a message is shown as `\n`.
fn print_err(e: &Error) {
    eprintln!("cordon: error: {}", one_line(&e.to_string()));
}

pub(crate) fn one_line(s: &str) -> String {
    s.trim_end().replace('\r', "\\r").replace('\n', "\\n")
}

/// `--json` anywhere before the command: errors in parsing the rest of the
/// options are then reported as JSON too.
fn wants_json(argv: &[String]) -> bool {
    argv.iter()
        .take_while(|a| a.as_str() != "--")
        .any(|a| a == "--json")
}

fn wants_help(argv: &[String]) -> bool {
    matches!(argv.first().map(String::as_str), Some("--help" | "-h"))
}

fn result_json(r: &SandboxResult, p: &Prepared) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    v["ok"] = json!(true);
    v["layers"] = json!(p.plan.layers);
    v["profile"] = json!(p.plan.profile);
    if let Some(h) = &p.helper {
        v["helper"] = json!({"path": h.path, "sha256": h.sha256, "hash_source": h.hash_source, "verified": h.verified});
    }
    let mut deg: Vec<String> = p.degraded.clone();
    deg.extend(r.degraded.iter().cloned());
    v["degraded"] = json!(deg);
    v
}

fn error_json(e: &Error) -> Value {
    json!({"ok": false, "error": {"kind": e.kind(), "message": e.to_string()}, "exit_code": e.exit_code()})
}

/// The exit status the launcher returns for a finished sandbox.
pub fn exit_status(r: &SandboxResult) -> i32 {
    if r.timed_out {
        return exit::TIMEOUT;
    }
    if let Some(s) = r.interrupted {
        return 128 + s;
    }
    if let Some(c) = r.exit_code {
        return c;
    }
    128 + r.signal.unwrap_or(0)
}

fn cmd_run(argv: &[String]) -> i32 {
    if wants_help(argv) {
        crate::outln!("{USAGE}");
        return 0;
    }
    let args = match parse_args(argv) {
        Ok(a) => a,
        Err(e) => {
            if wants_json(argv) {
                out_line(&error_json(&e).to_string());
            } else {
                print_err(&e);
            }
            return e.exit_code();
        }
    };
    let json_out = args.json;
    let fail = |e: Error| {
        if json_out {
            out_line(&error_json(&e).to_string());
        } else {
            print_err(&e);
        }
        e.exit_code()
    };
    let profile = match load_profile(&args, None) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let cfg = RunConfig {
        capture: json_out,
        stdin: Input::Inherit,
        cap_bytes: args.output_cap.unwrap_or(runner::DEFAULT_CAP),
    };
    let mut prep = match prepare(&args, &profile, true, Some(&cfg)) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    if !json_out {
        for d in &prep.degraded {
            eprintln!("cordon: DEGRADED: {d}");
        }
        for n in prep.plan.notes.iter().filter(|n| {
            n.starts_with("workspace ") || n.contains(" is a symlink and stays writable")
        }) {
            eprintln!("cordon: note: {n}");
        }
        match prep.plan.layers {
            Layers::Outer => eprintln!("cordon: DIAGNOSTIC layers=outer: bwrap only, no helper (no Landlock/seccomp from cordon)"),
            Layers::Inner => eprintln!("cordon: DIAGNOSTIC layers=inner: helper only, no bwrap (no namespaces or mount isolation)"),
            Layers::Both => {}
        }
    }
    let early = prep.launched.take();
    let _tty = TtyGuard::save();
    match runner::run_launched(&prep.plan, prep.helper.as_ref(), &cfg, early) {
        Ok(r) => {
            if json_out {
                out_line(&result_json(&r, &prep).to_string());
            } else {
                for g in &r.git_created {
                    eprintln!("cordon: warning: {}", runner::git_created_note(g));
                }
            }
            if !json_out && r.timed_out {
                eprintln!(
                    "cordon: timed out after {}s; sandbox killed",
                    prep.plan.timeout.unwrap_or(0)
                );
            }
            let code = exit_status(&r);
            // The process ends now and its memory with it: dropping the plan
            // and the result would walk every map and string in them for
            // nothing (neither holds anything whose drop does more than free
            // memory or close an fd).
            std::mem::forget(r);
            std::mem::forget(prep);
            code
        }
        Err(e) => fail(e),
    }
}

/// The caller's terminal settings, put back when the run ends: a command
/// that turns echo off or goes raw and then dies (or is killed by the
/// timeout) must not leave the caller's terminal that way.
struct TtyGuard(Option<(usize, nix::sys::termios::Termios)>);

/// fd 0, 1 or 2, borrowed from std's handles.
fn std_fd(i: usize, f: impl FnOnce(std::os::fd::BorrowedFd<'_>)) {
    match i {
        0 => f(std::io::stdin().as_fd()),
        1 => f(std::io::stdout().as_fd()),
        _ => f(std::io::stderr().as_fd()),
    }
}

impl TtyGuard {
    fn save() -> TtyGuard {
        let mut saved = None;
        for i in 0..3 {
            if saved.is_none() {
                std_fd(i, |fd| {
                    saved = nix::sys::termios::tcgetattr(fd).ok().map(|t| (i, t));
                });
            }
        }
        TtyGuard(saved)
    }
}

impl Drop for TtyGuard {
    fn drop(&mut self) {
        if let Some((i, t)) = &self.0 {
            std_fd(*i, |fd| {
                // Run as a background job of this terminal, the launcher
                // would be stopped by SIGTTOU at the first tc* call (and the
                // settings belong to the foreground job by now): leave them.
                // A terminal that is not ours to control (ENOTTY) sends no
                // SIGTTOU, and the command may have changed it all the same.
                if nix::unistd::tcgetpgrp(fd).is_ok_and(|fg| fg != nix::unistd::getpgrp()) {
                    return;
                }
                let _ = nix::sys::termios::tcsetattr(fd, nix::sys::termios::SetArg::TCSANOW, t);
                // Output stopped by the command (a TCOOFF the filter missed,
                // or the helper alone) would hang the caller's next write.
                let _ = nix::sys::termios::tcflow(fd, nix::sys::termios::FlowArg::TCOON);
            });
        }
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:,+@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn cmd_explain(argv: &[String]) -> i32 {
    if wants_help(argv) {
        crate::outln!("{USAGE}");
        return 0;
    }
    let r = (|| -> Result<(Prepared, bool)> {
        let args = parse_args(argv)?;
        let profile = load_profile(&args, None)?;
        Ok((prepare(&args, &profile, false, None)?, args.json))
    })();
    let (prep, json_out) = match r {
        Ok(x) => x,
        Err(e) => {
            if wants_json(argv) {
                out_line(&error_json(&e).to_string());
            } else {
                print_err(&e);
            }
            return e.exit_code();
        }
    };
    let p = &prep.plan;
    let env_names: Vec<&str> = p.env.iter().map(|(k, _)| k.as_str()).collect();
    if json_out {
        let v = json!({
            "layers": p.layers, "profile": p.profile, "bwrap_argv": p.bwrap_argv,
            "inner_argv": p.inner_argv, "helper_policy": p.helper_policy,
            "env_names": env_names, "uid": p.uid, "gid": p.gid, "cwd": p.cwd,
            "timeout": p.timeout, "notes": p.notes,
            "fds": p.fds.iter().map(|(n, r)| json!({"fd": n, "role": format!("{r:?}").to_lowercase()})).collect::<Vec<_>>(),
        });
        crate::outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return 0;
    }
    crate::outln!(
        "# layers: {:?}   profile: {}   uid: {} gid: {}",
        p.layers,
        p.profile,
        p.uid,
        p.gid
    );
    crate::outln!("# environment (names only): {}", env_names.join(" "));
    for n in &p.notes {
        crate::outln!("# note: {n}");
    }
    let argv = p.exec_argv();
    let mut line = String::new();
    for a in argv {
        if a.starts_with("--") && !line.is_empty() {
            crate::outln!("{line} \\");
            line = format!("  {}", shell_quote(a));
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&shell_quote(a));
        }
    }
    crate::outln!("{line}");
    if let Some(pol) = &p.helper_policy {
        crate::outln!(
            "# helper policy (0600, handed to the helper on fd {}):",
            plan::POLICY_FD
        );
        crate::outln!("{}", serde_json::to_string_pretty(pol).unwrap_or_default());
    }
    0
}

/// exec-json: one JSON request on stdin, one JSON result on stdout.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    cwd: Option<PathBuf>,
    workspace: Option<PathBuf>,
    #[serde(default)]
    env: BTreeMap<String, Option<String>>,
    profile: Option<String>,
    policy: Option<ProfileDef>,
    config: Option<PathBuf>,
    timeout: Option<u64>,
    stdin: Option<String>,
    network: Option<Network>,
    layers: Option<Layers>,
    max_output: Option<usize>,
    #[serde(default)]
    rw: Vec<PathBuf>,
    #[serde(default)]
    ro: Vec<PathBuf>,
    #[serde(default)]
    hide: Vec<PathBuf>,
    uid: Option<u32>,
    helper_sha256: Option<String>,
}

fn cmd_exec_json() -> i32 {
    let r = (|| -> Result<(SandboxResult, Prepared)> {
        const MAX_REQUEST: u64 = 16 << 20;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().take(MAX_REQUEST + 1), &mut text)
            .map_err(|e| Error::io("read request", e))?;
        if text.len() as u64 > MAX_REQUEST {
            return Err(Error::Usage("exec-json request: larger than 16 MiB".into()));
        }
        crate::policy::no_repeated_keys(&text, "request")
            .map_err(|e| Error::Usage(format!("exec-json request: {e}")))?;
        let req: Request = serde_json::from_str(&text)
            .map_err(|e| Error::Usage(format!("exec-json request: {e}")))?;
        // A relative path would be taken from cordon's own working directory,
        // which a runtime rarely means (not the request's workspace or cwd).
        let named = [
            ("workspace", &req.workspace),
            ("cwd", &req.cwd),
            ("config", &req.config),
        ];
        let single = named
            .iter()
            .filter_map(|(k, p)| p.as_ref().map(|p| (k.to_string(), p)));
        let listed = [("rw", &req.rw), ("ro", &req.ro), ("hide", &req.hide)]
            .into_iter()
            .flat_map(|(k, v)| {
                v.iter()
                    .enumerate()
                    .map(move |(i, p)| (format!("{k}[{i}]"), p))
            });
        if let Some((k, p)) = single.chain(listed).find(|(_, p)| p.is_relative()) {
            return Err(Error::Usage(format!(
                "exec-json request: {k}: {} is relative; give an absolute path (it would be taken from cordon's working directory, not the request's workspace)",
                p.display()
            )));
        }
        let mut args = Args {
            profile: req.profile,
            config: req.config,
            workspace: req.workspace.or(req.cwd.clone()),
            cwd: req.cwd,
            rw: req.rw,
            ro: req.ro,
            hide: req.hide,
            network: req.network,
            timeout: req.timeout,
            layers: req.layers,
            uid: req.uid,
            helper_sha256: req.helper_sha256,
            json: true,
            ..Default::default()
        };
        for (k, v) in req.env {
            args.env.push(match v {
                Some(v) => EnvArg::Set(k, v),
                None => EnvArg::Pass(k),
            });
        }
        args.command = std::iter::once(req.command).chain(req.args).collect();
        let profile = load_profile(&args, req.policy)?;
        let cfg = RunConfig {
            capture: true,
            stdin: req
                .stdin
                .map(|s| Input::Data(s.into_bytes()))
                .unwrap_or(Input::Null),
            cap_bytes: req.max_output.unwrap_or(runner::DEFAULT_CAP),
        };
        let mut prep = prepare(&args, &profile, true, Some(&cfg))?;
        let early = prep.launched.take();
        Ok((
            runner::run_launched(&prep.plan, prep.helper.as_ref(), &cfg, early)?,
            prep,
        ))
    })();
    match r {
        Ok((res, prep)) => {
            out_line(&result_json(&res, &prep).to_string());
            0
        }
        Err(e) => {
            out_line(&error_json(&e).to_string());
            e.exit_code()
        }
    }
}

use std::io::Read as _;

pub fn main(argv: Vec<String>) -> i32 {
    let rest = argv.get(2..).unwrap_or(&[]);
    match argv.get(1).map(String::as_str) {
        Some("run") => cmd_run(rest),
        Some("explain") => cmd_explain(rest),
        Some("exec-json") => cmd_exec_json(),
        Some("doctor") => doctor::main(rest),
        Some("verify") => crate::verify::main(rest),
        Some("--version") => {
            crate::outln!("cordon {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("--help" | "-h" | "help") => {
            crate::outln!("{USAGE}");
            0
        }
        None => {
            eprintln!("cordon: error: no subcommand given (run, explain, exec-json, doctor or verify; cordon --help shows the options)");
            exit::SETUP
        }
        Some(other) => {
            eprintln!(
                "cordon: error: unknown subcommand {:?} (expected run, explain, exec-json, doctor or verify; cordon --help shows the options)",
                other
            );
            exit::SETUP
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_refuses_empty_and_overlong_paths() {
        assert!(absolute("--rw", Path::new("")).is_err());
        let long = format!("/{}", "a/".repeat(2100));
        assert!(absolute("--rw", Path::new(&long))
            .unwrap_err()
            .to_string()
            .contains("longer than"));
        let wide = format!("/tmp/{}", "b".repeat(256));
        assert!(absolute("--rw", Path::new(&wide)).is_err());
        // Control: at the limits it is accepted (whether it exists is the
        // planner's question).
        let ok = format!("/tmp/{}", "b".repeat(255));
        assert_eq!(absolute("--rw", Path::new(&ok)).unwrap(), PathBuf::from(ok));
    }

    #[test]
    fn passwd_lines_parse_like_libc() {
        let p = parse_passwd(
            "root:x:0:0:root:/root:/bin/bash\n\
             # a comment line is malformed\n\
             short:x:1:1\n\
             bad:x:notanumber:1::/x:/bin/sh\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
             dup:x:0:5::/elsewhere:/bin/sh\n",
        );
        assert_eq!(
            p,
            vec![
                (0, 0, PathBuf::from("/root")),
                (65534, 65534, PathBuf::from("/nonexistent")),
                (0, 5, PathBuf::from("/elsewhere")),
            ]
        );
        // The first entry for a uid wins, as with getpwuid.
        assert_eq!(user(0).map(|u| u.0), Some(0));
    }

    #[test]
    fn an_unknown_uid_without_home_is_refused() {
        // No passwd entry for this uid on any sane host.
        let unknown = 3_999_999_u32;
        let mut env = BTreeMap::new();
        let e = homes(&env, unknown, &paths::RealFs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("HOME is not set"), "{e}");
        env.insert("HOME".to_string(), "/nonexistent/alice".to_string());
        assert!(homes(&env, unknown, &paths::RealFs)
            .unwrap()
            .contains(&PathBuf::from("/nonexistent/alice")));
        // Root is in /etc/passwd: no HOME needed.
        assert!(homes(&BTreeMap::new(), 0, &paths::RealFs)
            .unwrap()
            .contains(&PathBuf::from("/root")));
    }

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parse() {
        let a = parse_args(&v(&[
            "--profile",
            "x",
            "--rw",
            "/a",
            "--rw",
            "/b",
            "--env",
            "A=1",
            "--env",
            "B",
            "--json",
            "--",
            "ls",
            "--json",
        ]))
        .unwrap();
        assert_eq!(a.profile.as_deref(), Some("x"));
        assert_eq!(a.rw.len(), 2);
        assert_eq!(
            a.env,
            vec![
                EnvArg::Set("A".into(), "1".into()),
                EnvArg::Pass("B".into())
            ]
        );
        assert!(a.json);
        assert_eq!(a.command, v(&["ls", "--json"]));
        assert!(parse_args(&v(&["--bogus", "x"])).is_err());
        assert!(parse_args(&v(&["--timeout", "abc"])).is_err());
        assert!(parse_args(&v(&["--layers", "sideways"])).is_err());
        assert!(parse_args(&v(&["--timeout"])).is_err());
    }

    #[test]
    fn statuses() {
        let mut r = SandboxResult {
            exit_code: Some(3),
            ..Default::default()
        };
        assert_eq!(exit_status(&r), 3);
        r.timed_out = true;
        assert_eq!(exit_status(&r), 124);
        let r = SandboxResult {
            exit_code: None,
            signal: Some(9),
            ..Default::default()
        };
        assert_eq!(exit_status(&r), 137);
    }
}
