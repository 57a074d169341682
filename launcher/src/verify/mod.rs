//! `cordon verify`: attack the configured sandbox on this host and print a
//! scorecard (docs/verify.md).
//!
//! - [`catalogue`]: the attacks as data, and what each profile expects (pure);
//! - [`fixtures`]: the host side (files, marker process, listeners, leaked fd);
//! - [`score`]: verdicts, the table and the JSON (pure).
//!
//! Every attack runs four times: bare (no sandbox, as the sandbox uid: the
//! control), `--layers outer`, `--layers inner` and both layers, each through
//! the same planner and runner as `cordon run` ([`cli::prepare`], [`runner::run`]).

pub mod catalogue;
pub mod fixtures;
pub mod score;

use crate::cli::{self, Args};
use crate::error::{exit, Error, Result};
use crate::plan::Layers;
use crate::policy::{Network, Profile, WorkspaceAccess};
use crate::runner::{self, Input, RunConfig};
use catalogue::{expectation, Judge, Traits};
use fixtures::Fixtures;
use score::{AttackResult, Columns, HostCheck, Outcome, Workload};
use serde_json::{json, Value};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const USAGE: &str = "usage: cordon verify [--profile P] [--config F] [--json] [--only PATTERN]
                     [--fixture-dir DIR] [--probe PATH] [--helper-sha256 HEX]
  attacks the sandbox of profile P on this host, layer by layer, and runs a
  workload battery; exit 0 when nothing escaped, 1 otherwise, 125 on a setup error";

/// A value of `LD_PRELOAD` set in the launcher's environment: it must not reach
/// the sandbox. It names nothing (only static binaries are started with it).
const LD_PRELOAD_VALUE: &str = "/nonexistent/cordon-verify-preload.so";
/// Per-run limit (a probe is bounded by itself; this only catches a hang).
const RUN_TIMEOUT: u64 = 60;

#[derive(Debug, Default)]
pub struct VerifyArgs {
    pub profile: Option<String>,
    pub config: Option<PathBuf>,
    pub json: bool,
    pub only: Option<String>,
    pub fixture_dir: Option<PathBuf>,
    pub probe: Option<PathBuf>,
    pub helper_sha256: Option<String>,
}

pub fn parse_args(argv: &[String]) -> Result<VerifyArgs> {
    let mut a = VerifyArgs::default();
    let mut i = 0;
    while i < argv.len() {
        let f = argv[i].as_str();
        if f == "--json" {
            a.json = true;
            i += 1;
            continue;
        }
        const WITH_VALUE: [&str; 6] = [
            "--profile",
            "--config",
            "--only",
            "--fixture-dir",
            "--probe",
            "--helper-sha256",
        ];
        if !WITH_VALUE.contains(&f) {
            return Err(Error::Usage(format!("verify: unknown option {f}\n{USAGE}")));
        }
        let v = argv
            .get(i + 1)
            .ok_or_else(|| Error::Usage(format!("verify: {f} needs a value")))?;
        match f {
            "--profile" => a.profile = Some(v.clone()),
            "--config" => a.config = Some(v.into()),
            "--only" => a.only = Some(v.clone()),
            "--fixture-dir" => a.fixture_dir = Some(v.into()),
            "--probe" => a.probe = Some(v.into()),
            "--helper-sha256" => a.helper_sha256 = Some(v.clone()),
            _ => return Err(Error::Usage(format!("verify: unknown option {f}\n{USAGE}"))),
        }
        i += 2;
    }
    Ok(a)
}

/// The attacker binary: --probe, $CORDON_PROBE, $CORDON_PROBE_BIN, beside the
/// `cordon` executable, /usr/libexec/cordon, then $PATH.
fn find_probe(a: &VerifyArgs) -> Result<PathBuf> {
    let mut tried: Vec<PathBuf> = Vec::new();
    if let Some(p) = &a.probe {
        tried.push(p.clone());
    } else {
        for var in ["CORDON_PROBE", "CORDON_PROBE_BIN"] {
            if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                tried.push(v.into());
            }
        }
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            tried.push(dir.join("cordon-probe"));
        }
        tried.push("/usr/libexec/cordon/cordon-probe".into());
        if let Some(path) = std::env::var_os("PATH") {
            tried.extend(std::env::split_paths(&path).map(|d| d.join("cordon-probe")));
        }
    }
    tried
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            Error::Usage(format!(
                "verify: cordon-probe not found (tried {}); build it with `cargo build --release -p cordon-probe --target x86_64-unknown-linux-musl` and pass --probe PATH or set CORDON_PROBE",
                tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ))
        })
}

fn limit_of(p: &Profile, key: &str) -> Option<u64> {
    let v = p.rlimits.get(key)?;
    let soft = v.get("soft").unwrap_or(v);
    soft.as_u64()
}

/// The profile properties that expectations depend on.
pub fn traits(p: &Profile) -> Traits {
    Traits {
        network_host: p.network == Network::Host,
        host_root_visible: p.ro.iter().any(|r| r == Path::new("/")),
        git_writable: p.git == crate::policy::GitAccess::Rw,
        nproc: limit_of(p, "nproc").or(p.default_nproc),
        as_bytes: limit_of(p, "as"),
    }
}

struct Session<'a> {
    va: &'a VerifyArgs,
    profile: Profile,
    fx: Fixtures,
    interrupted: bool,
}

impl Session<'_> {
    fn args(&self, layers: Layers, command: Vec<String>, cwd: Option<PathBuf>) -> Args {
        let fx = &self.fx;
        Args {
            profile: self.va.profile.clone(),
            config: self.va.config.clone(),
            workspace: Some(fx.ws.clone()),
            cwd,
            rw: vec![fx.scratch.clone(), fx.private.clone()],
            ro: vec![fx.bin.clone(), fx.ro_file.clone()],
            hide: vec![fx.hidden.clone()],
            layers: Some(layers),
            timeout: Some(RUN_TIMEOUT),
            helper_sha256: self.va.helper_sha256.clone(),
            json: true,
            command,
            ..Default::default()
        }
    }

    /// One run through the launcher's planner and runner.
    /// One sandboxed run through the same path as `cordon run --json`.
    fn run_captured(&self, args: &cli::Args) -> Result<runner::SandboxResult> {
        cli::prepare(args, &self.profile, true, None).and_then(|prep| {
            runner::run(
                &prep.plan,
                prep.helper.as_ref(),
                &RunConfig {
                    capture: true,
                    stdin: Input::Null,
                    cap_bytes: 256 << 10,
                },
            )
        })
    }

    fn sandboxed(
        &mut self,
        layers: Layers,
        command: Vec<String>,
        cwd: Option<PathBuf>,
    ) -> (Outcome, String) {
        let args = self.args(layers, command, cwd);
        let r = self.run_captured(&args);
        match r {
            Err(e) => (
                Outcome::Error {
                    detail: format!("sandbox did not run: {e}"),
                },
                String::new(),
            ),
            Ok(r) if r.interrupted.is_some() => {
                self.interrupted = true;
                (
                    Outcome::Error {
                        detail: "interrupted".into(),
                    },
                    String::new(),
                )
            }
            Ok(r) if r.timed_out => (
                Outcome::Error {
                    detail: format!("timed out after {RUN_TIMEOUT}s"),
                },
                String::new(),
            ),
            Ok(r) => (
                score::parse_probe(&r.stdout.data, &r.stderr.data, r.exit_code, r.signal),
                format!("{}\n{}", r.stdout.data, r.stderr.data),
            ),
        }
    }

    /// One both-layer run that must reach the probe.
    fn smoke(&self) -> Result<()> {
        let cmd = vec![self.fx.probe.to_string_lossy().into_owned(), "nnp".into()];
        let args = self.args(Layers::Both, cmd, None);
        let prep = cli::prepare(&args, &self.profile, true, None)?;
        let cfg = RunConfig {
            capture: true,
            stdin: Input::Null,
            cap_bytes: 64 << 10,
        };
        let r = runner::run(&prep.plan, prep.helper.as_ref(), &cfg)?;
        match score::parse_probe(&r.stdout.data, &r.stderr.data, r.exit_code, r.signal) {
            Outcome::Allowed { .. } | Outcome::Denied { .. } => Ok(()),
            o => Err(Error::io(
                "verify: the first sandboxed probe",
                std::io::Error::other(format!("{}: {}", o.cell(), o.detail())),
            )),
        }
    }

    /// The control: the probe with no sandbox at all, as the sandbox uid, with
    /// the launcher's environment and its leaked fd.
    fn bare(&self, args: &[String]) -> Outcome {
        let mut cmd = Command::new(&self.fx.probe);
        cmd.args(args)
            .current_dir(&self.fx.ws)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some((u, g)) = self.fx.owner {
            cmd.uid(u).gid(g);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Outcome::Error {
                    detail: format!("spawn probe: {e}"),
                }
            }
        };
        let deadline = Instant::now() + Duration::from_secs(RUN_TIMEOUT);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut s) = child.stdout.take() {
            let _ = s.read_to_string(&mut out);
        }
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        match status {
            None => Outcome::Error {
                detail: "timed out".into(),
            },
            Some(s) => {
                use std::os::unix::process::ExitStatusExt;
                score::parse_probe(&out, &err, s.code(), s.signal())
            }
        }
    }

    fn attack(&mut self, a: &catalogue::Attack, args: Vec<String>) -> Result<Columns> {
        let mut probe_cmd = vec![self.fx.probe.to_string_lossy().into_owned()];
        probe_cmd.extend(args.iter().cloned());
        let mut out: Vec<Outcome> = Vec::new();
        for mode in [
            None,
            Some(Layers::Outer),
            Some(Layers::Inner),
            Some(Layers::Both),
        ] {
            self.fx.reset()?;
            self.fx.udp_received();
            let mut o = match mode {
                None => self.bare(&args),
                Some(l) => self.sandboxed(l, probe_cmd.clone(), None).0,
            };
            if a.judge == Judge::UdpReceived && o.allowed() && self.fx.udp_received() == 0 {
                o = Outcome::Denied {
                    errno: "-".into(),
                    detail: "datagram sent, but the host listener received nothing".into(),
                };
            }
            let changes = self.fx.host_changes();
            if !changes.is_empty() && !o.allowed() {
                o = Outcome::Allowed {
                    detail: format!("the host changed: {}", changes.join("; ")),
                };
            }
            out.push(o);
            if self.interrupted {
                break;
            }
        }
        let skipped = || Outcome::Skipped {
            detail: "interrupted".into(),
        };
        let mut it = out.into_iter();
        Ok(Columns {
            bare: it.next().unwrap_or_else(skipped),
            outer: it.next().unwrap_or_else(skipped),
            inner: it.next().unwrap_or_else(skipped),
            both: it.next().unwrap_or_else(skipped),
        })
    }

    fn workloads(&mut self) -> Result<Vec<Workload>> {
        let workdir = if self.profile.workspace == WorkspaceAccess::Rw {
            self.fx.ws.clone()
        } else {
            self.fx.scratch.clone()
        };
        let mut v = Vec::new();
        for w in WORKLOADS {
            if !catalogue::matches_only(self.va.only.as_deref(), w.name, "workload") {
                continue;
            }
            let missing: Vec<&str> = w.tools.iter().copied().filter(|t| !on_host(t)).collect();
            if !missing.is_empty() {
                v.push(Workload {
                    name: w.name.into(),
                    status: "not-installed".into(),
                    detail: format!("not installed on this host: {}", missing.join(", ")),
                });
                continue;
            }
            self.fx.reset()?;
            let cmd: Vec<String> = w.argv.iter().map(|s| s.to_string()).collect();
            let args = self.args(Layers::Both, cmd, Some(workdir.clone()));
            let r = self.run_captured(&args);
            let (status, detail) = match r {
                Err(e) => ("failed", format!("sandbox did not run: {e}")),
                Ok(r) => {
                    if r.interrupted.is_some() {
                        self.interrupted = true;
                    }
                    let last = r
                        .stdout
                        .data
                        .lines()
                        .last()
                        .unwrap_or("")
                        .trim()
                        .to_string();
                    let good = r.exit_code == Some(0)
                        && !r.timed_out
                        && (w.expect.is_empty() || last == w.expect);
                    if good {
                        ("ok", format!("{} ms", r.duration_ms))
                    } else {
                        let err: Vec<&str> = r.stderr.data.lines().rev().take(3).collect();
                        (
                            "failed",
                            format!(
                                "exit {:?}{}, stdout {:?} (want {:?}), stderr: {}",
                                r.exit_code,
                                if r.timed_out { " (timed out)" } else { "" },
                                last,
                                w.expect,
                                err.into_iter().rev().collect::<Vec<_>>().join(" | ")
                            ),
                        )
                    }
                }
            };
            v.push(Workload {
                name: w.name.into(),
                status: status.into(),
                detail,
            });
            if self.interrupted {
                break;
            }
        }
        Ok(v)
    }
}

struct WorkloadDef {
    name: &'static str,
    /// Host tools it needs: absent ones make it "not-installed".
    tools: &'static [&'static str],
    argv: &'static [&'static str],
    /// The last line of stdout ("" = any, exit 0 is enough).
    expect: &'static str,
}

const WORKLOADS: &[WorkloadDef] = &[
    WorkloadDef {
        name: "bash",
        tools: &["bash", "tr", "diff", "wc"],
        argv: &[
            "bash",
            "-c",
            "set -euo pipefail; echo hello | tr a-z A-Z > out.txt; diff <(echo HELLO) out.txt; cat <(printf x) <(printf y) | wc -c",
        ],
        expect: "2",
    },
    WorkloadDef {
        name: "python3",
        tools: &["python3"],
        argv: &[
            "python3",
            "-c",
            "import subprocess, sys; r = subprocess.run([sys.executable, '-c', 'print(6*7)'], capture_output=True, text=True, check=True); print(r.stdout.strip())",
        ],
        expect: "42",
    },
    WorkloadDef {
        name: "git",
        tools: &["git", "sh"],
        argv: &[
            "sh",
            "-c",
            "git init -q repo && cd repo && echo hi > f && git add f && git -c user.name=verify -c user.email=verify@example.invalid commit -qm init && git rev-list --count HEAD",
        ],
        expect: "1",
    },
    WorkloadDef {
        name: "c",
        tools: &["gcc", "sh"],
        argv: &[
            "sh",
            "-c",
            "printf '#include <stdio.h>\\nint main(void) { puts(\"c-ok\"); return 0; }\\n' > t.c && gcc -O0 -o t t.c && ./t",
        ],
        expect: "c-ok",
    },
    WorkloadDef {
        name: "ps",
        tools: &["ps", "ls", "sh"],
        argv: &[
            "sh",
            "-c",
            "ps -e -o pid=,comm= > ps.txt && test -s ps.txt && ls /proc/self/fd > /dev/null && echo ps-ok",
        ],
        expect: "ps-ok",
    },
    WorkloadDef {
        name: "sort",
        tools: &["seq", "sort", "head", "sh"],
        argv: &["sh", "-c", "seq 100000 | sort -rn | head -n1"],
        expect: "100000",
    },
];

fn on_host(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_else(|| crate::policy::DEFAULT_PATH.into());
    std::env::split_paths(&path).any(|d| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(d.join(tool))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn error_json(e: &Error) -> Value {
    json!({"ok": false, "error": {"kind": e.kind(), "message": e.to_string()}, "exit_code": e.exit_code()})
}

pub fn main(argv: &[String]) -> i32 {
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        crate::outln!("{USAGE}");
        return 0;
    }
    let va = match parse_args(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cordon: error: {e}");
            return e.exit_code();
        }
    };
    match run(&va) {
        Ok(code) => code,
        Err(e) => {
            if va.json {
                crate::outln!("{}", error_json(&e));
            } else {
                eprintln!("cordon: error: verify: {e}");
            }
            if e.exit_code() == 0 {
                exit::SETUP
            } else {
                e.exit_code()
            }
        }
    }
}

fn run(va: &VerifyArgs) -> Result<i32> {
    let start = Instant::now();
    // The launcher's own secrets, set before any thread exists: they must not
    // reach the sandbox (its environment is built from an allowlist).
    let env_secret = format!("ENV-{}", fixtures::random_hex(8));
    std::env::set_var(fixtures::ENV_NAME, &env_secret);
    std::env::set_var("LD_PRELOAD", LD_PRELOAD_VALUE);
    runner::install_handlers()?;

    let base = Args {
        profile: va.profile.clone(),
        config: va.config.clone(),
        ..Default::default()
    };
    let profile = cli::load_profile(&base, None)?;
    let traits = traits(&profile);
    let probe = find_probe(va)?;
    let euid = nix::unistd::geteuid().as_raw();
    let parent = va
        .fixture_dir
        .clone()
        .unwrap_or_else(fixtures::default_parent);
    let mut fx = Fixtures::create(&parent, &probe, euid)?;
    fx.env_secret = env_secret;
    let (fork_n, mem_mib) = catalogue::resource_args(&traits);
    let vars = fx.vars(fork_n, mem_mib);

    let mut s = Session {
        va,
        profile,
        fx,
        interrupted: false,
    };
    // Fail early, with the launcher's own error and fix, when the sandbox
    // cannot start at all.
    s.smoke()?;

    let mut results: Vec<AttackResult> = Vec::new();
    for a in catalogue::catalogue() {
        if !catalogue::matches_only(
            va.only.as_deref(),
            a.name,
            &format!("{:?}", a.area).to_lowercase(),
        ) {
            continue;
        }
        let args = catalogue::expand(a.args, &vars)
            .map_err(|e| Error::Usage(format!("catalogue: {e}")))?;
        let cols = s.attack(&a, args.clone())?;
        results.push(AttackResult::new(&a, args, expectation(&a, &traits), cols));
        if s.interrupted {
            break;
        }
    }
    let workloads = if s.interrupted {
        vec![]
    } else {
        s.workloads()?
    };
    s.fx.reset()?;
    let mut checks: Vec<HostCheck> =
        s.fx.final_checks()
            .into_iter()
            .map(|(name, ok, detail)| HostCheck { name, ok, detail })
            .collect();
    if s.interrupted {
        checks.push(HostCheck {
            name: "completed".into(),
            ok: false,
            detail: "interrupted by a signal".into(),
        });
    }
    let summary = score::summarize(&results, &workloads, &checks);
    let host = json!({
        "euid": euid,
        "sandbox_uid": s.fx.sandbox_uid,
        "kernel": nix::sys::utsname::uname().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_default(),
        "fixture_root": s.fx.root,
        "probe": probe,
        "traits": traits,
    });
    let name = s.profile.name.clone();
    if va.json {
        let v = score::to_json(
            &name,
            host,
            &results,
            &workloads,
            &checks,
            &summary,
            start.elapsed().as_millis() as u64,
        );
        crate::outln!("{v}");
    } else {
        print!(
            "{}",
            score::table(&name, &results, &workloads, &checks, &summary)
        );
        crate::outln!(
            "({} attacks x 4 runs in {:.1}s)",
            results.len(),
            start.elapsed().as_secs_f64()
        );
    }
    Ok(if summary.ok { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = parse_args(&v(&["--profile", "public-bot", "--json", "--only", "net*"])).unwrap();
        assert_eq!(a.profile.as_deref(), Some("public-bot"));
        assert!(a.json);
        assert_eq!(a.only.as_deref(), Some("net*"));
        assert!(parse_args(&v(&["--bogus", "x"])).is_err());
        assert!(parse_args(&v(&["--only"])).is_err());
    }

    #[test]
    fn builtin_traits() {
        let t = traits(&crate::policy::builtin("trusted-maintenance").unwrap());
        assert!(t.network_host && t.host_root_visible);
        let t = traits(&crate::policy::builtin("default").unwrap());
        assert_eq!(
            t,
            Traits {
                nproc: Some(crate::policy::DEFAULT_NPROC),
                ..Traits::default()
            }
        );
        let mut p = crate::policy::builtin("default").unwrap();
        p.rlimits
            .insert("nproc".into(), json!({"soft": 64, "hard": 128}));
        p.rlimits.insert("as".into(), json!(1u64 << 30));
        let t = traits(&p);
        assert_eq!((t.nproc, t.as_bytes), (Some(64), Some(1 << 30)));
    }
}
