//! `cordon-helper` command line. Exit codes: docs/helper.md.
//!
//! `no_main`: Rust's runtime start-up costs ≈ 0.1 ms per exec here;
//! startup.rs keeps the parts that matter.
#![no_main]

use cordon_helper::enforce::{self, Options};
use cordon_helper::error::Error;
use cordon_helper::inspect;
use cordon_helper::policy_source::Source;
use cordon_helper::startup;
use std::ffi::OsString;
use std::path::PathBuf;

// A bump arena instead of musl's allocator: fewer page faults and no
// map/unmap churn in a process that lives for a millisecond (arena.rs).
// 48 KiB prefaulted: a run with the default profile allocates 34 KiB, 40 KiB
// with a report (zeroed buffers are not touched until written). 48 measured
// faster than 96 (−0.04 ms standalone, −0.05 with a report, −0.05 to −0.30 ms
// in `cordon run`, interleaved) and than none (−0.02 ms): every page
// populated and not used costs zeroing, a memcg charge and its unmapping at exec.
#[global_allocator]
static ALLOC: cordon_helper::arena::Arena<{ cordon_helper::arena::DEFAULT_BYTES }, { 48 * 1024 }> =
    cordon_helper::arena::Arena::new();

const USAGE: &str =
    "usage: cordon-helper [--policy-file PATH | --policy-fd N] [--report-fd N] [--init] -- CMD [ARGS...]
       cordon-helper --check   [--policy-file PATH | --policy-fd N]
       cordon-helper --explain [--policy-file PATH | --policy-fd N]
       cordon-helper --probe | --version | --help
Without --policy-file or --policy-fd the policy is read from fd 3.
--init: as pid 1 of a pid namespace, run the command as a child and stay
as its init (bwrap --as-pid-1).
Exit codes: 64 usage, 70 policy, 71 landlock, 72 seccomp, 73 capabilities,
74 exec, 75 permission, 76 setuid; otherwise the command's own status.";

#[derive(PartialEq)]
enum Mode {
    Run,
    Check,
    Explain,
    Probe,
}

struct Args {
    mode: Mode,
    source: Option<Source>,
    report_fd: Option<i32>,
    command: Vec<OsString>,
    init: bool,
}

fn fd_arg(v: Option<OsString>, flag: &str) -> Result<i32, Error> {
    let v = v.ok_or_else(|| Error::Usage(format!("{flag} needs a value")))?;
    v.to_str()
        .and_then(|s| s.parse::<i32>().ok())
        .filter(|n| *n >= 0)
        .ok_or_else(|| {
            Error::Usage(format!(
                "{flag}: \"{}\" is not an fd number",
                v.to_string_lossy()
            ))
        })
}

fn parse_args(mut it: impl Iterator<Item = OsString>) -> Result<Option<Args>, Error> {
    let mut a = Args {
        mode: Mode::Run,
        source: None,
        report_fd: None,
        command: Vec::new(),
        init: false,
    };
    let set_mode = |a: &mut Args, m: Mode| {
        if a.mode != Mode::Run {
            return Err(Error::Usage(
                "choose one of --check, --explain, --probe".into(),
            ));
        }
        a.mode = m;
        Ok(())
    };
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("--") => {
                a.command = it.collect();
                break;
            }
            Some("--help") | Some("-h") => {
                println!("{USAGE}");
                return Ok(None);
            }
            Some("--version") => {
                println!("cordon-helper {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            Some("--check") => set_mode(&mut a, Mode::Check)?,
            Some("--explain") => set_mode(&mut a, Mode::Explain)?,
            Some("--probe") => set_mode(&mut a, Mode::Probe)?,
            Some("--policy-file") => {
                let p = it
                    .next()
                    .ok_or_else(|| Error::Usage("--policy-file needs a path".into()))?;
                if a.source.is_some() {
                    return Err(Error::Usage(
                        "give --policy-file or --policy-fd once".into(),
                    ));
                }
                a.source = Some(Source::File(PathBuf::from(p)));
            }
            Some("--policy-fd") => {
                if a.source.is_some() {
                    return Err(Error::Usage(
                        "give --policy-file or --policy-fd once".into(),
                    ));
                }
                a.source = Some(Source::Fd(fd_arg(it.next(), "--policy-fd")?));
            }
            Some("--init") => a.init = true,
            Some("--report-fd") => {
                let fd = fd_arg(it.next(), "--report-fd")?;
                if fd <= 2 {
                    return Err(Error::Usage("--report-fd must be above 2".into()));
                }
                a.report_fd = Some(fd);
            }
            _ => {
                return Err(Error::Usage(format!(
                    "unexpected argument \"{}\" (put the command after --)",
                    arg.to_string_lossy()
                )))
            }
        }
    }
    if let (Mode::Run, Some(Source::Fd(fd @ 0..=2))) = (&a.mode, &a.source) {
        // The policy's fd is closed once read: the command would start with
        // its stdin (or stdout, stderr) closed, and its next open would take
        // that number.
        return Err(Error::Usage(format!(
            "--policy-fd {fd} is the command's stdio, closed once the policy is read; pass the policy on fd 3 or above (--policy-fd 3 -- CMD 3< policy.json)"
        )));
    }
    if a.mode == Mode::Run && a.command.is_empty() {
        return Err(Error::Usage(
            "no command given (cordon-helper [options] -- CMD [ARGS...])".into(),
        ));
    }
    if a.init && a.mode != Mode::Run {
        return Err(Error::Usage("--init is for a run only".into()));
    }
    if a.init && std::process::id() != 1 {
        // Anywhere else the command's leftovers would outlive the init.
        return Err(Error::Usage(format!(
            "--init makes the helper the pid 1 of a pid namespace (bwrap --unshare-pid --as-pid-1); it is pid {} here",
            std::process::id()
        )));
    }
    if a.mode != Mode::Run && !a.command.is_empty() {
        return Err(Error::Usage(
            "--check, --explain and --probe take no command".into(),
        ));
    }
    if let (Some(Source::Fd(p)), Some(r)) = (&a.source, a.report_fd) {
        if *p == r {
            return Err(Error::Usage(
                "--policy-fd and --report-fd must differ".into(),
            ));
        }
    }
    Ok(Some(a))
}

fn print_json(v: &serde_json::Value) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("cordon-helper: error: {e}"),
    }
}

#[no_mangle]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    startup::standard_fds();
    // SAFETY: argc and argv are what the C runtime passed to main.
    let args = unsafe { startup::args(argc, argv) };
    // exit, not return: it flushes stdout.
    std::process::exit(run(args.into_iter().skip(1)))
}

fn run(args: impl Iterator<Item = OsString>) -> libc::c_int {
    let err = match parse_args(args) {
        Ok(None) => return 0,
        Ok(Some(a)) => {
            let source = a.source.unwrap_or(Source::Fd(3));
            match a.mode {
                Mode::Probe => {
                    print_json(&inspect::probe());
                    return 0;
                }
                Mode::Check => match inspect::check(&source) {
                    Ok(v) => {
                        print_json(&v);
                        return 0;
                    }
                    Err(e) => e,
                },
                Mode::Explain => match inspect::explain(&source, a.report_fd) {
                    Ok(v) => {
                        print_json(&v);
                        return 0;
                    }
                    Err(e) => e,
                },
                Mode::Run => enforce::run(Options {
                    source,
                    report_fd: a.report_fd,
                    command: a.command,
                    init: a.init,
                }),
            }
        }
        Err(e) => e,
    };
    eprintln!("cordon-helper: error: {err}");
    if matches!(err, Error::Usage(_)) {
        eprintln!("{USAGE}");
    }
    err.exit_code()
}
