//! The setup scripts on a machine that still lacks packages.
//!
//! `scripts/install` evals what `scripts/build` prints on stdout, and the
//! build runs `scripts/setup` first. On a fresh machine setup runs apt-get,
//! whose progress lines once reached that stdout and broke the README's first
//! command. These tests run the real scripts against stand-ins for the
//! package tools (a directory put first on PATH), so they need no network and
//! change nothing on the machine.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use cordon_tests::workspace_root;

fn script(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Stand-ins for every tool setup would use to change the machine. The
/// package query reports nothing installed; apt-get prints what the real one
/// prints on stdout and logs its arguments.
fn fake_tools(dir: &Path, log: &Path) {
    let log = log.display();
    script(dir, "dpkg-query", "exit 1");
    script(
        dir,
        "apt-get",
        &format!(
            "echo \"apt-get $*\" >> {log}\n\
             echo 'Reading package lists...'\n\
             echo 'Fetched 4175 kB in 0s (102 MB/s)'"
        ),
    );
    script(dir, "sudo", "[ \"$1\" = -n ] && shift; exec \"$@\"");
    script(dir, "cargo", "exit 0");
    script(
        dir,
        "rustup",
        "case \"$*\" in\n\
         'component list --installed') printf 'rustfmt-x86_64\\nclippy-x86_64\\n' ;;\n\
         'target list --installed') echo x86_64-unknown-linux-musl ;;\n\
         esac",
    );
    script(dir, "useradd", &format!("echo \"useradd $*\" >> {log}"));
}

fn run(cmd: &mut Command, fake: &Path, home: &Path) -> Output {
    cmd.env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", fake.display()))
        .env("HOME", home)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the script")
}

#[test]
fn setup_prints_nothing_on_stdout_even_when_it_installs_packages() {
    let t = tempfile::tempdir().unwrap();
    let fake = t.path().join("bin");
    fs::create_dir(&fake).unwrap();
    let log = t.path().join("log");
    fake_tools(&fake, &log);

    let out = run(
        Command::new("bash").arg(workspace_root().join("scripts/setup")),
        &fake,
        t.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "setup failed: {stderr}");
    // The stand-in did run: this is the path that prints.
    let logged = fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains("apt-get -q -y"),
        "apt-get install not run: {logged:?} {stderr}"
    );
    assert!(
        stderr.contains("Reading package lists..."),
        "apt-get's output went missing: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "setup printed on stdout, which scripts/build's callers eval: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// scripts/install beside a stand-in for scripts/build: what the build
/// prints (and its exit status) decide whether install goes on.
fn install_with_build(build_body: &str) -> Output {
    let t = tempfile::tempdir().unwrap();
    let scripts = t.path().join("scripts");
    fs::create_dir(&scripts).unwrap();
    fs::copy(
        workspace_root().join("scripts/install"),
        scripts.join("install"),
    )
    .unwrap();
    script(&scripts, "build", build_body);
    let fake = t.path().join("bin");
    fs::create_dir(&fake).unwrap();
    run(
        Command::new("bash").arg(scripts.join("install")),
        &fake,
        t.path(),
    )
}

#[test]
fn install_stops_on_stray_build_output() {
    // Before the fix the eval ran "Reading" as a command and went on.
    let out = install_with_build(
        "echo 'Reading package lists...'; echo 'export CORDON_BIN=/nonexistent'",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "install: error: unexpected output from scripts/build: Reading package lists..."
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("command not found"),
        "the stray line was run: {stderr}"
    );
}

#[test]
fn install_stops_when_the_build_fails() {
    let out = install_with_build("echo 'build: error: boom' >&2; exit 3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        !stderr.contains("unbound variable"),
        "went on past the failed build: {stderr}"
    );
}
