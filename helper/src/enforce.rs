//! The enforcement order, in one place. docs/helper.md explains each step;
//! the comments here say why a step sits where it does.

use crate::error::{Error, Result};
use crate::policy_source::Source;
use crate::{
    caps, env, exec, fds, landlock, mounts, policy, policy_source, report, rlimits, seccomp, sys,
};
use serde_json::json;
use std::ffi::OsString;

pub struct Options {
    pub source: Source,
    pub report_fd: Option<i32>,
    pub command: Vec<OsString>,
    /// Stay as the command's init (init.rs): the launcher's bwrap execs the
    /// helper as the sandbox's pid 1.
    pub init: bool,
}

/// Step 1a: a setuid/setgid helper, or one with file capabilities, would
/// hand the caller's policy powers the caller lacks; refuse before reading
/// anything.
pub fn refuse_setuid() -> Result<()> {
    use nix::unistd::{getegid, geteuid, getgid, getuid};
    if getuid() != geteuid() || getgid() != getegid() {
        return Err(Error::Setuid(format!(
            "refusing to run setuid/setgid (uid {} euid {}, gid {} egid {}); install cordon-helper without the setuid/setgid bits",
            getuid(),
            geteuid(),
            getgid(),
            getegid()
        )));
    }
    // File capabilities hand a caller powers its uid does not have: with
    // CAP_SETUID a policy's `user` could switch to root. Only an exec that
    // changed something sets AT_SECURE (free to read); then capabilities
    // held beyond the ambient set, by a caller that is not root, came from
    // the file (an LSM transition sets AT_SECURE too, and passes here).
    // SAFETY: getauxval reads the auxiliary vector; no memory of ours.
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 && !geteuid().is_root() {
        use ::caps::CapSet;
        let read = |set| ::caps::read(None, set).unwrap_or_default();
        let ambient = read(CapSet::Ambient);
        let mut from_file: Vec<String> = read(CapSet::Permitted)
            .difference(&ambient)
            .map(|c| c.to_string())
            .collect();
        if !from_file.is_empty() {
            from_file.sort();
            return Err(Error::Setuid(format!(
                "refusing to run with file capabilities ({}); remove them (setcap -r cordon-helper): the helper needs no privilege",
                from_file.join(", ")
            )));
        }
    }
    Ok(())
}

/// Step 1b: nothing after this point, including exec, can gain privileges.
pub fn no_new_privs() -> Result<()> {
    sys::set_no_new_privs()
        .map_err(|e| Error::Permission(format!("PR_SET_NO_NEW_PRIVS failed: {e}")))?;
    match sys::no_new_privs() {
        Ok(true) => Ok(()),
        other => Err(Error::Permission(format!(
            "NO_NEW_PRIVS did not stick (read back {other:?})"
        ))),
    }
}

/// Apply the policy and exec the command. Returns only on failure.
pub fn run(opts: Options) -> Error {
    match try_run(opts) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn try_run(opts: Options) -> Result<std::convert::Infallible> {
    // 1. No setuid; NO_NEW_PRIVS first of all.
    refuse_setuid()?;
    no_new_privs()?;

    // 2. Read the policy, then compile everything that can fail — the
    //    Landlock ruleset with its path rules (inert until restrict_self),
    //    the BPF program, argv/envp — before any side effect.
    let bytes = policy_source::read(&opts.source)?;
    // Opened now for step 6, which reads its capability masks: Landlock may
    // hide /proc by then. Kept open through step 5, closed after 6.
    // The process's: the helper has one thread (sys.rs).
    let status = sys::open_process_status();
    // Read once here for the fd table size and the bounding set (the kernel
    // generates the whole file on every read); read back after step 6.
    let status_text = status.as_ref().and_then(sys::read_status);
    // Listed now, for the same reason, before the ruleset's fd exists.
    let inherited_fds = fds::inherited(status_text.as_deref());
    let pol = policy::parse(&bytes)?;
    // Before any rule path is opened: a mount bwrap put elsewhere would
    // give those opens the wrong files.
    let mounts_verified = mounts::verify(&pol.mounts)?;
    let mut ll = landlock::plan(&pol, landlock::Mode::Enforce)?;
    let filter = seccomp::for_run(&pol.syscalls, opts.report_fd)?;
    let envp = env::prepare(&pol.env, std::env::vars_os().collect());
    let env_removed = envp.removed.clone();
    let mut cmd = exec::prepare(&opts.command, envp)?;
    if let Some(fd) = opts.report_fd {
        // Close-on-exec: the command never sees the report channel.
        sys::set_cloexec(fd).map_err(|e| Error::Usage(format!("--report-fd {fd}: {e}")))?;
    }

    // 3. rlimits, then the uid switch (setuid needs the caps dropped in 6).
    rlimits::apply(&pol.rlimits)?;
    if let Some((uid, gid)) = pol.user {
        rlimits::switch_user(uid, gid)?;
    }

    // 4. Landlock: restrict_self with the ruleset built in 2.
    let applied = landlock::apply(&mut ll)?;
    let mut warnings = Vec::new();
    if !applied.unenforced.is_empty() {
        warnings.push(format!(
            "landlock: not enforced by this kernel: {}",
            applied.unenforced.join(", ")
        ));
    }

    // 5. Close inherited fds (after Landlock, which needed its own fds).
    let mut keep = pol.keep_fds.clone();
    keep.extend(opts.report_fd);
    keep.extend(status.as_ref().map(std::os::fd::AsRawFd::as_raw_fd));
    let fds_closed = fds::close_inherited(&keep, inherited_fds)?;

    // 6. Drop capabilities (after the uid switch and rlimits, which need them).
    let caps = caps::drop_all(status.as_ref(), status_text.as_deref())?;
    drop(status);

    // The PATH search runs under Landlock, seeing what the command will see.
    cmd.resolve()?;
    // Built only when someone reads it (≈ 30 µs of JSON); under `--init`
    // by the init, while the command starts.
    let report = || {
        report::build(report::Facts {
            landlock: ll.report_json(&applied),
            seccomp: json!({
                "installed": true,
                "instructions": filter.program.len(),
                "rules": filter.rules,
                "default_action": filter.default.name(),
                "profile": match pol.syscalls.effective_profile() { Some(_) => "default", None => "none" },
            }),
            caps: caps.to_json(),
            fds_closed,
            mounts_verified,
            rlimits: report::rlimits(&pol.rlimits),
            env_removed,
            warnings,
        })
    };
    sys::default_sigpipe().map_err(|e| Error::Exec(format!("resetting SIGPIPE: {e}")))?;

    // 6b. As the sandbox's init: the command is a child, which goes on
    //     with 7 and its exec as the helper alone would; this process
    //     writes the report (8) and stays as its init under a filter of
    //     its own (init.rs).
    if opts.init {
        // The command's own Landlock domain, nested in the init's.
        let scope = landlock::scope_ruleset(&ll)?;
        let (child, exec_errno) = crate::init::spawn(&crate::init::Start {
            scope: scope.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
            filter: &filter.program,
            command: &cmd,
        })?;
        drop(scope);
        if let Some(fd) = opts.report_fd {
            // The report, then a failed exec's line after it, as the
            // helper alone writes them. A reader gone (SIGPIPE) ends the
            // init, and its pid namespace with it.
            let _ = sys::write_all(fd, report().as_bytes());
            if let Some(e) = exec_errno {
                cmd.report_failure(fd, e);
            }
        }
        crate::init::run(child, opts.report_fd, &keep);
    }
    cmd.report_failure_to(opts.report_fd);
    let report = opts.report_fd.map(|_| report());

    // 7. seccomp last: the steps above make calls it may deny.
    seccomp::install(&filter.program)?;

    // 8. Report what was applied, then exec. Only write/execve/exit_group
    //    happen from here on.
    if let (Some(fd), Some(report)) = (opts.report_fd, &report) {
        // If the reader is gone, SIGPIPE (default again) ends the helper
        // here: no report means no command, which is the fail-closed side.
        let _ = sys::write_all(fd, report.as_bytes());
    }
    cmd.exec()
}
