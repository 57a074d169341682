//! Landlock network rules (ABI 4) and scoping of signals and abstract UNIX
//! sockets (ABI 6); ptrace confinement to the sandbox's own domain.
//!
//! Listeners and targets live in the test process (outside the sandbox).

use std::sync::atomic::Ordering;

use cordon_tests::*;

#[test]
fn tcp_connect_to_unlisted_loopback_port_is_eacces() {
    require_landlock_abi(4, "TCP connect rules");
    let fx = Fixture::new();
    let allowed = TcpBanner::start();
    let other = TcpBanner::start();
    let (a, b) = (allowed.port.to_string(), other.port.to_string());
    let p = fx.policy(&with(
        fx.base_policy(),
        "network",
        json!({"tcpConnect": [allowed.port]}),
    ));

    Spawn::sandboxed(&p, &["tcp-connect", "127.0.0.1", &b])
        .run()
        .assert_denied("EACCES");
    assert_eq!(
        other.accepted.load(Ordering::SeqCst),
        0,
        "the denied port saw a connection"
    );
    let ok = Spawn::sandboxed(&p, &["tcp-connect", "127.0.0.1", &a]).run();
    ok.assert_allowed();
    assert!(ok.line().contains(BANNER), "{ok}");

    // Control: listing the other port too makes the same connect succeed.
    let both = json!({"tcpConnect": [allowed.port, other.port]});
    let c = fx.policy(&with(fx.base_policy(), "network", both));
    Spawn::sandboxed(&c, &["tcp-connect", "127.0.0.1", &b])
        .run()
        .assert_allowed();
    assert_eq!(other.accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn tcp_connect_without_network_section_is_eacces() {
    require_landlock_abi(4, "TCP connect rules");
    let fx = Fixture::new();
    let l = TcpBanner::start();
    let port = l.port.to_string();
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["tcp-connect", "127.0.0.1", &port])
        .run()
        .assert_denied("EACCES");
    // Control: "any" leaves connect unrestricted.
    let c = fx.policy(&with(
        fx.base_policy(),
        "network",
        json!({"tcpConnect": "any"}),
    ));
    Spawn::sandboxed(&c, &["tcp-connect", "127.0.0.1", &port])
        .run()
        .assert_allowed();
    assert_eq!(l.accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn signal_to_process_outside_sandbox_is_eperm_with_scope() {
    require_landlock_abi(6, "signal scoping");
    let fx = Fixture::new();
    let mut target = Sleeper::start();
    let pid = target.pid().to_string();
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["kill", &pid, "TERM"])
        .run()
        .assert_denied("EPERM");
    assert!(
        target.ended_by_signal().is_none(),
        "the target outside the sandbox was killed"
    );

    // Control: scope.signal false lets the same signal through.
    let c = fx.policy(&with(fx.base_policy(), "scope", json!({"signal": false})));
    Spawn::sandboxed(&c, &["kill", &pid, "TERM"])
        .run()
        .assert_allowed();
    assert_eq!(
        target.ended_by_signal(),
        Some(libc::SIGTERM),
        "control signal did not land"
    );
}

#[test]
fn signal_zero_probe_to_outside_process_is_eperm() {
    require_landlock_abi(6, "signal scoping");
    let fx = Fixture::new();
    let mut target = Sleeper::start();
    let pid = target.pid().to_string();
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["kill", &pid])
        .run()
        .assert_denied("EPERM");
    assert!(target.alive());
    let c = fx.policy(&with(fx.base_policy(), "scope", json!({"signal": false})));
    Spawn::sandboxed(&c, &["kill", &pid]).run().assert_allowed();
}

#[test]
fn abstract_unix_connect_outside_sandbox_is_eperm_with_scope() {
    require_landlock_abi(6, "abstract UNIX socket scoping");
    let fx = Fixture::new();
    let l = AbstractBanner::start();
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["abstract-connect", &l.name])
        .run()
        .assert_denied("EPERM");
    // Control: abstractUnix false.
    let c = fx.policy(&with(
        fx.base_policy(),
        "scope",
        json!({"abstractUnix": false}),
    ));
    Spawn::sandboxed(&c, &["abstract-connect", &l.name])
        .run()
        .assert_allowed();
}

#[test]
fn ptrace_of_process_outside_sandbox_is_eperm_even_if_seccomp_allows() {
    let fx = Fixture::new();
    let target = Sleeper::start();
    let pid = target.pid().to_string();
    // Seccomp out of the way: Landlock alone confines ptrace to the domain.
    let p = fx.policy(&with(fx.base_policy(), "syscalls", permissive_syscalls()));
    Spawn::sandboxed(&p, &["ptrace", &pid])
        .run()
        .assert_denied("EPERM");
    // Same policy, a target inside the sandbox: allowed.
    Spawn::sandboxed(&p, &["ptrace", "child"])
        .run()
        .assert_allowed();
    // Control: directly, the same uid may trace it (no Yama here).
    Spawn::probe(&["ptrace", &pid]).run().assert_allowed();
}

#[test]
fn known_gap_pathname_unix_socket_outside_paths_is_reachable() {
    // KNOWN GAP, pinned so that a change is noticed: Landlock (ABI <= 7)
    // does not restrict connect(2) to a pathname UNIX socket, even one in a
    // directory no rule grants, and `scope.abstractUnix` covers abstract
    // sockets only. Keeping sockets such as docker.sock out of the sandbox
    // is the launcher's job (do not bind /run). The direct run is the
    // control that the listener works.
    let fx = Fixture::new();
    let path = fx.outside.join("agent.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        for mut s in l.incoming().flatten() {
            let _ = s.write_all(format!("{BANNER}\n").as_bytes());
        }
    });
    let sp = path.to_str().unwrap();
    Spawn::probe(&["unix-connect", sp]).run().assert_allowed();
    let p = fx.policy(&fx.base_policy());
    let r = Spawn::sandboxed(&p, &["unix-connect", sp]).run();
    // Landlock (ABI <= 7) does not restrict connect(2) on pathname sockets.
    r.assert_allowed();
}
