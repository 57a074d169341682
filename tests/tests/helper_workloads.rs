//! Real programs under the default profile with a writable workspace: the
//! sandbox must not break ordinary development work.
//!
//! Policy: /usr, /etc, /bin, /lib, /lib64 execute (read + execute), /dev
//! readwrite, /proc read, the workspace and a tmp dir readwrite; no
//! `syscalls` section (the built-in default profile).

use std::path::Path;
use std::time::Duration;

use cordon_tests::*;

fn workload_policy(fx: &Fixture) -> std::path::PathBuf {
    workload_policy_ws(fx, "readwrite")
}

fn workload_policy_ws(fx: &Fixture, ws_access: &str) -> std::path::PathBuf {
    let mut allow = Vec::new();
    for sys in ["/usr", "/etc", "/bin", "/lib", "/lib64"] {
        if Path::new(sys).exists() {
            allow.push(json!({"path": sys, "access": "execute"}));
        }
    }
    allow.push(json!({"path": "/dev", "access": "readwrite"}));
    allow.push(json!({"path": "/proc", "access": "read"}));
    allow.push(json!({"path": fx.workspace, "access": ws_access}));
    allow.push(json!({"path": fx.tmp, "access": "readwrite"}));
    fx.policy(&json!({"filesystem": {"allow": allow}}))
}

fn run_in_sandbox(fx: &Fixture, cmd: &[&str]) -> Run {
    run_with_policy(fx, &workload_policy(fx), cmd)
}

fn run_with_policy(fx: &Fixture, policy: &Path, cmd: &[&str]) -> Run {
    Spawn::helper(policy, cmd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &fx.workspace)
        .env("TMPDIR", &fx.tmp)
        .env("LANG", "C")
        .current_dir(&fx.workspace)
        .timeout(Duration::from_secs(120))
        .run()
}

fn assert_ok(r: &Run, expected_stdout: &str) {
    r.assert_exit(0);
    assert_eq!(r.stdout, expected_stdout, "unexpected output:\n{r}");
}

#[test]
fn workload_bash_pipes_and_process_substitution() {
    let fx = Fixture::new();
    let script = r#"set -euo pipefail
echo hello | tr a-z A-Z > out.txt
diff <(echo HELLO) out.txt
printf 'b\na\n' | sort | head -n1
cat <(printf x) <(printf y) | wc -c
n=$( (for i in 1 2 3; do echo "$i"; done) | wc -l); echo "lines=$n"
exec 3>fd3.txt; echo via-fd3 >&3; exec 3>&-; cat fd3.txt
"#;
    let r = run_in_sandbox(&fx, &["/bin/bash", "-c", script]);
    assert_ok(&r, "a\n2\nlines=3\nvia-fd3\n");
}

#[test]
fn workload_python3_subprocess() {
    let fx = Fixture::new();
    let code = r#"
import subprocess, sys, tempfile, os
r = subprocess.run(["echo", "hi"], capture_output=True, text=True, check=True)
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    f.write("tmp")
p = subprocess.Popen([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
out, _ = p.communicate("piped")
print(r.stdout.strip(), out.strip(), os.path.dirname(f.name) == os.environ["TMPDIR"])
"#;
    let r = run_in_sandbox(&fx, &["/usr/bin/python3", "-c", code]);
    assert_ok(&r, "hi PIPED True\n");
}

#[test]
fn workload_git_init_and_commit() {
    let fx = Fixture::new();
    let script = r#"set -euo pipefail
git init -q repo
cd repo
echo content > file.txt
git add file.txt
git -c user.name=Cordon -c user.email=cordon@example.invalid commit -q -m first
echo more >> file.txt
git -c user.name=Cordon -c user.email=cordon@example.invalid commit -q -am second
git log --format=%s | tr '\n' ' '
echo
git status --porcelain | wc -l
"#;
    let r = run_in_sandbox(&fx, &["/bin/bash", "-c", script]);
    assert_ok(&r, "second first \n0\n");
    assert!(fx.workspace.join("repo/.git/HEAD").is_file());
}

const HELLO_C: &str = "#include <stdio.h>\n#include <unistd.h>\nint main(void){printf(\"hello from %s\\n\", \"gcc\");return getppid() > 0 ? 0 : 1;}\n";

#[test]
fn workload_gcc_compile_and_run() {
    // Running what was just built needs `execute` on the workspace:
    // `readwrite` alone does not include it (docs/policy.md access table).
    let fx = Fixture::new();
    fx.ws_file("hello.c", HELLO_C);
    let script = "set -euo pipefail\ngcc -O1 -o hello hello.c\n./hello\n";
    let p = workload_policy_ws(&fx, "readwriteexecute");
    let r = run_with_policy(&fx, &p, &["/bin/bash", "-c", script]);
    assert_ok(&r, "hello from gcc\n");
}

#[test]
fn workload_gcc_compiles_in_readwrite_workspace_but_cannot_exec_output() {
    let fx = Fixture::new();
    fx.ws_file("hello.c", HELLO_C);
    let r = run_in_sandbox(
        &fx,
        &["/bin/bash", "-c", "gcc -O1 -o hello hello.c && ./hello"],
    );
    // bash: "./hello: Permission denied", status 126.
    r.assert_exit(126);
    assert!(r.stderr.contains("Permission denied"), "{r}");
    assert!(
        fx.workspace.join("hello").is_file(),
        "gcc did not produce the binary:\n{r}"
    );
}

#[test]
fn known_gap_loader_runs_code_from_non_executable_workspace() {
    // KNOWN GAP (Landlock), pinned so that a change is noticed: the EXECUTE
    // right is checked on execve only. Handing a binary from the readwrite
    // (non-execute) workspace to the dynamic loader, which merely mmaps it
    // PROT_EXEC, runs it anyway. `execute` is not a W^X guarantee.
    let fx = Fixture::new();
    fx.ws_file("hello.c", HELLO_C);
    let loader = "/lib64/ld-linux-x86-64.so.2";
    assert!(Path::new(loader).exists(), "no {loader} on this system");
    let script = format!("set -euo pipefail\ngcc -O1 -o hello hello.c\n{loader} ./hello\n");
    let r = run_in_sandbox(&fx, &["/bin/bash", "-c", &script]);
    assert_ok(&r, "hello from gcc\n");
}

#[test]
fn workload_cannot_touch_outside_secret() {
    // The same workload policy still confines: cat on the secret fails.
    let fx = Fixture::new();
    let secret = fx.secret.to_str().unwrap();
    let r = run_in_sandbox(&fx, &["/bin/cat", secret]);
    r.assert_exit(1);
    assert!(r.stderr.contains("Permission denied"), "{r}");
    // Control: the workspace copy is readable by the same command.
    std::fs::copy(&fx.secret, fx.workspace.join("copy.txt")).unwrap();
    let c = run_in_sandbox(&fx, &["/bin/cat", "copy.txt"]);
    assert_ok(&c, &format!("{}\n", fx.secret_marker));
}

/// Run `cmd` (through the helper with the workload policy when `policy` is
/// given) with fds 0 and 2 closed; what it prints on stdout.
fn with_stdin_stderr_closed(policy: Option<&Path>, cmd: &[&str]) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let mut c = match policy {
        Some(p) => {
            let mut c = std::process::Command::new(helper_bin());
            c.arg("--policy-file").arg(p).arg("--").args(cmd);
            c
        }
        None => {
            let mut c = std::process::Command::new(cmd[0]);
            c.args(&cmd[1..]);
            c
        }
    };
    c.env_clear().env("PATH", "/usr/bin:/bin");
    // SAFETY: close(2) is async-signal-safe; the closure touches nothing else.
    unsafe {
        c.pre_exec(|| {
            libc::close(0);
            libc::close(2);
            Ok(())
        });
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn closed_standard_fds_reach_the_command_as_dev_null() {
    // The helper plugs a closed fd 0-2 with /dev/null before opening anything
    // (helper/src/startup.rs), so no file of its own lands on a standard
    // stream and the command starts with all three valid.
    let fx = Fixture::new();
    let p = workload_policy(&fx);
    let script = "readlink /proc/self/fd/0; readlink /proc/self/fd/2";
    let (code, out) = with_stdin_stderr_closed(Some(&p), &["/bin/sh", "-c", script]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out, "/dev/null\n/dev/null\n");
    // Control: started directly, the same command sees them closed.
    let (code, out) = with_stdin_stderr_closed(None, &["/bin/sh", "-c", script]);
    assert_ne!(code, Some(0), "{out}");
    assert_eq!(out, "");
}

/// A sleep stopped and continued (what Ctrl-Z and `fg` do) finishes: the
/// kernel resumes the interrupted `nanosleep` through `restart_syscall`,
/// which the default profile refused (EPERM: "sleep: cannot read realtime
/// clock"). Control: the same sequence on a bare `sleep`.
#[test]
fn workload_sleep_survives_stop_and_continue() {
    let fx = Fixture::new();
    let stop_continue = |sandboxed: bool| {
        let cmd = ["/bin/sleep", "0.6"];
        let s = if sandboxed {
            Spawn::helper(&workload_policy(&fx), &cmd)
        } else {
            Spawn::new(cmd[0], &cmd[1..])
        };
        let running = s.spawn();
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: signals to our own child (the helper has exec'd sleep).
        unsafe { libc::kill(running.pid(), libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: as above.
        unsafe { libc::kill(running.pid(), libc::SIGCONT) };
        running.wait()
    };
    let r = stop_continue(true);
    assert_eq!(r.code, Some(0), "{r}");
    let control = stop_continue(false);
    assert_eq!(control.code, Some(0), "{control}");
}
