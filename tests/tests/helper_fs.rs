//! Filesystem confinement by the helper's Landlock layer.
//!
//! Each attack runs the probe through the helper with a policy that does not
//! grant the target, and asserts the exact errno and that the host file is
//! unchanged; each has a CONTROL run with a policy that grants the target,
//! proving the same probe action succeeds when only that grant differs.

use std::fs;
use std::os::unix::fs::MetadataExt;

use cordon_tests::*;

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// `n` files in the workspace's `dir`, each holding `marker-<i>` and
/// granted `read` by its own rule (after the probe's `execute`), and one
/// more file left without a rule: (the files, that one, the policy).
fn file_rules(
    fx: &Fixture,
    dir: &str,
    n: usize,
) -> (
    Vec<std::path::PathBuf>,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let mut pol = json!({"filesystem": {"allow": [
        {"path": probe_bin(), "access": "execute"},
    ]}});
    let files: Vec<_> = (0..n)
        .map(|i| fx.ws_file(&format!("{dir}/f{i}"), &format!("marker-{i}\n")))
        .collect();
    for f in &files {
        add_allow(&mut pol, f, "read");
    }
    let unlisted = fx.ws_file(&format!("{dir}/unlisted"), "unlisted-marker\n");
    (files, unlisted, fx.policy(&pol))
}

#[test]
fn fs_read_outside_allowed_paths_is_eacces() {
    let fx = Fixture::new();
    let attack = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&attack, &["read", s(&fx.secret), &fx.secret_marker])
        .run()
        .assert_denied("EACCES");

    // Control: the same probe with a policy granting the directory.
    let mut granted = fx.base_policy();
    add_allow(&mut granted, &fx.outside, "read");
    let control = fx.policy(&granted);
    Spawn::sandboxed(&control, &["read", s(&fx.secret), &fx.secret_marker])
        .run()
        .assert_allowed();
}

#[test]
fn fs_read_inside_workspace_is_allowed_but_listing_outside_is_eacces() {
    let fx = Fixture::new();
    let inside = fx.ws_file("notes.txt", "workspace-marker\n");
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["read", s(&inside), "workspace-marker"])
        .run()
        .assert_allowed();
    // A directory outside cannot be opened for listing either.
    Spawn::sandboxed(&p, &["read", s(&fx.outside)])
        .run()
        .assert_denied("EACCES");
}

#[test]
fn fs_write_outside_is_eacces_and_host_file_unchanged() {
    let fx = Fixture::new();
    let before = fs::read(&fx.secret).unwrap();
    let newfile = fx.outside.join("planted.txt");
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["write", s(&fx.secret)])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["write", s(&newfile)])
        .run()
        .assert_denied("EACCES");
    assert_eq!(fs::read(&fx.secret).unwrap(), before, "secret changed");
    assert!(!newfile.exists(), "a file was created outside the sandbox");

    // Control: granting the directory readwrite lets the same write land.
    let mut granted = fx.base_policy();
    add_allow(&mut granted, &fx.outside, "readwrite");
    let c = fx.policy(&granted);
    Spawn::sandboxed(&c, &["write", s(&newfile)])
        .run()
        .assert_allowed();
    assert_eq!(
        fs::read_to_string(&newfile).unwrap(),
        "cordon-probe-write\n"
    );
}

#[test]
fn fs_write_in_workspace_lands() {
    let fx = Fixture::new();
    let f = fx.workspace.join("out.txt");
    let p = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&p, &["write", s(&f)])
        .run()
        .assert_allowed();
    assert_eq!(fs::read_to_string(&f).unwrap(), "cordon-probe-write\n");
}

#[test]
fn fs_truncate_outside_is_eacces_and_size_unchanged() {
    let fx = Fixture::new();
    require_landlock_abi(3, "truncate(2) confinement (LANDLOCK_ACCESS_FS_TRUNCATE)");
    let size = fs::metadata(&fx.secret).unwrap().len();
    assert!(size > 0);
    // Even a write grant on the *file's content* is absent here: read only.
    let mut read_only = fx.base_policy();
    add_allow(&mut read_only, &fx.outside, "read");
    let p = fx.policy(&read_only);
    Spawn::sandboxed(&p, &["truncate", s(&fx.secret)])
        .run()
        .assert_denied("EACCES");
    assert_eq!(
        fs::metadata(&fx.secret).unwrap().len(),
        size,
        "secret was truncated"
    );

    // Control: readwrite on the directory allows the truncation.
    let mut granted = fx.base_policy();
    add_allow(&mut granted, &fx.outside, "readwrite");
    let c = fx.policy(&granted);
    Spawn::sandboxed(&c, &["truncate", s(&fx.secret)])
        .run()
        .assert_allowed();
    assert_eq!(fs::metadata(&fx.secret).unwrap().len(), 0);
}

#[test]
fn fs_rename_across_the_sandbox_boundary_is_eacces() {
    let fx = Fixture::new();
    let ws_file = fx.ws_file("move-me.txt", "x\n");
    let stolen = fx.workspace.join("stolen.txt");
    let dropped = fx.outside.join("dropped.txt");
    let p = fx.policy(&fx.base_policy());
    // Out of the sandbox (no MAKE_REG outside) and into it (no REMOVE_FILE outside).
    Spawn::sandboxed(&p, &["rename", s(&ws_file), s(&dropped)])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["rename", s(&fx.secret), s(&stolen)])
        .run()
        .assert_denied("EACCES");
    assert!(ws_file.exists() && fx.secret.exists() && !stolen.exists() && !dropped.exists());

    // Control: with the outside directory readwrite too, both renames work.
    let mut granted = fx.base_policy();
    add_allow(&mut granted, &fx.outside, "readwrite");
    let c = fx.policy(&granted);
    Spawn::sandboxed(&c, &["rename", s(&ws_file), s(&dropped)])
        .run()
        .assert_allowed();
    Spawn::sandboxed(&c, &["rename", s(&fx.secret), s(&stolen)])
        .run()
        .assert_allowed();
}

#[test]
fn fs_hard_link_of_outside_file_into_workspace_is_exdev() {
    let fx = Fixture::new();
    let link = fx.workspace.join("secret-link.txt");
    let ws_file = fx.ws_file("mine.txt", "x\n");
    let out_link = fx.outside.join("planted-link.txt");
    let p = fx.policy(&fx.base_policy());
    // Linking a file the sandbox cannot reach into a place it can would widen
    // access: Landlock refuses reparenting with EXDEV.
    Spawn::sandboxed(&p, &["link", s(&fx.secret), s(&link)])
        .run()
        .assert_denied("EXDEV");
    // Linking out of the sandbox needs MAKE_REG outside: EACCES.
    Spawn::sandboxed(&p, &["link", s(&ws_file), s(&out_link)])
        .run()
        .assert_denied("EACCES");
    assert!(!link.exists() && !out_link.exists());
    assert_eq!(fs::metadata(&fx.secret).unwrap().nlink(), 1);

    // Control: both hierarchies readwrite (same rights): the link is made.
    let mut granted = fx.base_policy();
    add_allow(&mut granted, &fx.outside, "readwrite");
    let c = fx.policy(&granted);
    Spawn::sandboxed(&c, &["link", s(&fx.secret), s(&link)])
        .run()
        .assert_allowed();
    assert_eq!(fs::metadata(&fx.secret).unwrap().nlink(), 2);
}

#[test]
fn fs_symlink_in_workspace_does_not_reach_outside() {
    let fx = Fixture::new();
    let link = fx.workspace.join("innocent");
    let p = fx.policy(&fx.base_policy());
    // The link can be created in the workspace, but the open is checked on
    // the target: EACCES.
    Spawn::sandboxed(
        &p,
        &["symlink-read", s(&link), s(&fx.secret), &fx.secret_marker],
    )
    .run()
    .assert_denied("EACCES");
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    // Control: granting the target's directory makes the same read succeed.
    let mut granted = fx.base_policy();
    add_allow(&mut granted, &fx.outside, "read");
    let c = fx.policy(&granted);
    let link2 = fx.workspace.join("innocent2");
    Spawn::sandboxed(
        &c,
        &["symlink-read", s(&link2), s(&fx.secret), &fx.secret_marker],
    )
    .run()
    .assert_allowed();
}

#[test]
fn fs_denied_path_under_allowed_dir_is_eacces_siblings_stay_readable() {
    let fx = Fixture::new();
    let key = fx.ws_file("private/key.txt", "private-marker\n");
    let deep = fx.ws_file("private/sub/deep.txt", "deep-marker\n");
    let sibling = fx.ws_file("sibling.txt", "sibling-marker\n");
    let nested_sibling = fx.ws_file("src/lib/code.txt", "code-marker\n");
    let private_neighbour = fx.ws_file("privately.txt", "neighbour-marker\n");
    let mut pol = fx.base_policy();
    pol["filesystem"]["deny"] = json!([fx.workspace.join("private")]);
    let p = fx.policy(&pol);

    Spawn::sandboxed(&p, &["read", s(&key), "private-marker"])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["read", s(&deep), "deep-marker"])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["write", s(&fx.workspace.join("private/new.txt"))])
        .run()
        .assert_denied("EACCES");
    assert!(!fx.workspace.join("private/new.txt").exists());
    // Renaming the denied directory away (to read it under another name) fails too.
    Spawn::sandboxed(
        &p,
        &[
            "rename",
            s(&fx.workspace.join("private")),
            s(&fx.workspace.join("public")),
        ],
    )
    .run()
    .assert_denied("EACCES");
    assert!(key.exists());

    Spawn::sandboxed(&p, &["read", s(&sibling), "sibling-marker"])
        .run()
        .assert_allowed();
    Spawn::sandboxed(&p, &["read", s(&nested_sibling), "code-marker"])
        .run()
        .assert_allowed();
    Spawn::sandboxed(&p, &["read", s(&private_neighbour), "neighbour-marker"])
        .run()
        .assert_allowed();
    Spawn::sandboxed(&p, &["write", s(&sibling)])
        .run()
        .assert_allowed();

    // Control: without the deny entry the same file is readable.
    let c = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&c, &["read", s(&key), "private-marker"])
        .run()
        .assert_allowed();
}

#[test]
fn fs_denied_file_under_allowed_dir_is_eacces() {
    let fx = Fixture::new();
    let env_file = fx.ws_file(".env", "env-marker\n");
    let other = fx.ws_file("main.rs", "main-marker\n");
    let mut pol = fx.base_policy();
    pol["filesystem"]["deny"] = json!([env_file]);
    let p = fx.policy(&pol);
    Spawn::sandboxed(&p, &["read", s(&env_file), "env-marker"])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["read", s(&other), "main-marker"])
        .run()
        .assert_allowed();
    // Control.
    let c = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&c, &["read", s(&env_file), "env-marker"])
        .run()
        .assert_allowed();
}

#[test]
fn fs_mknod_in_writable_workspace_is_eacces() {
    let fx = Fixture::new();
    let node = fx.workspace.join("null");
    let p = fx.policy(&fx.base_policy());
    // MAKE_CHAR is never granted: Landlock's EACCES comes before the kernel's
    // own CAP_MKNOD check (EPERM).
    Spawn::sandboxed(&p, &["mknod", s(&node)])
        .run()
        .assert_denied("EACCES");
    assert!(!node.exists());
    // Control: directly, root creates it and an unprivileged user gets EPERM
    // from the capability check (a different errno: the EACCES above is
    // Landlock's).
    let direct = Spawn::probe(&["mknod", s(&node)]).run();
    if is_root() {
        direct.assert_allowed();
    } else {
        direct.assert_denied("EPERM");
    }
}

#[test]
fn fs_core_pattern_cannot_be_opened_for_writing() {
    let fx = Fixture::new();
    let mut pol = fx.base_policy();
    add_allow(&mut pol, "/proc", "read");
    let p = fx.policy(&pol);
    Spawn::sandboxed(&p, &["open-write", "/proc/sys/kernel/core_pattern"])
        .run()
        .assert_denied("EACCES");
    // Control: root can open it directly (a host-root code-execution
    // primitive); others are refused by file permissions, so for them this
    // test only shows the sandbox adds no access (the Landlock write denial
    // itself is covered for every uid by fs_write_outside_*).
    let direct = Spawn::probe(&["open-write", "/proc/sys/kernel/core_pattern"]).run();
    if is_root() {
        direct.assert_allowed();
    } else {
        direct.assert_denied("EACCES");
    }
}

#[test]
fn fs_open_by_handle_is_denied() {
    let fx = Fixture::new();
    let p = fx.policy(&fx.base_policy());
    // The "shocker" escape: open_by_handle_at bypasses path checks. It needs
    // CAP_DAC_READ_SEARCH (dropped by the helper), and the default profile
    // denies already the first step, name_to_handle_at, which needs no
    // privilege at all: the probe's detail tells which step failed.
    let r = Spawn::sandboxed(&p, &["open-by-handle", s(&fx.secret), &fx.secret_marker]).run();
    r.assert_denied("EPERM");
    assert!(
        r.line().contains("name_to_handle_at"),
        "not stopped at name_to_handle_at:\n{r}"
    );
    // Control: directly, root opens the secret by handle; an unprivileged
    // user gets a handle and fails only at open_by_handle_at.
    let direct = Spawn::probe(&["open-by-handle", s(&fx.secret), &fx.secret_marker]).run();
    if is_root() {
        direct.assert_allowed();
    } else {
        direct.assert_denied("EPERM");
        assert!(direct.line().contains("open_by_handle_at"), "{direct}");
    }
}

/// More path rules than RLIMIT_NOFILE allows open fds: each rule's path is
/// closed once it is in the ruleset, so the count is not limited by the fd
/// table (before, a run failed with EMFILE once the rules outnumbered it).
#[test]
fn fs_more_rules_than_the_fd_limit_are_all_enforced() {
    let fx = Fixture::new();
    let (files, unlisted, p) = file_rules(&fx, "many", 300);
    Spawn::sandboxed(&p, &["read", s(&files[299]), "marker-299"])
        .nofile(64)
        .run()
        .assert_allowed();
    Spawn::sandboxed(&p, &["read", s(&files[0]), "marker-0"])
        .nofile(64)
        .run()
        .assert_allowed();
    // Only the listed files: a neighbour without a rule stays unreadable.
    Spawn::sandboxed(&p, &["read", s(&unlisted), "unlisted-marker"])
        .nofile(64)
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["write", s(&files[7])])
        .nofile(64)
        .run()
        .assert_denied("EACCES");
    assert_eq!(fs::read_to_string(&files[7]).unwrap(), "marker-7\n");
    // Control: the same read works without the sandbox and the same limit.
    Spawn::probe(&["read", s(&unlisted), "unlisted-marker"])
        .nofile(64)
        .run()
        .assert_allowed();
}

/// A deny inside a directory with more entries than RLIMIT_NOFILE allows
/// open fds: the expansion of the parent holds one child open at a time.
#[test]
fn fs_deny_in_a_directory_larger_than_the_fd_limit_is_enforced() {
    let fx = Fixture::new();
    for i in 0..300 {
        fx.ws_file(&format!("big/f{i}"), "x\n");
    }
    let secret = fx.ws_file("big/secret", "big-secret-marker\n");
    let sibling = fx.ws_file("big/sibling", "big-sibling-marker\n");
    let mut pol = fx.base_policy();
    pol["filesystem"]["deny"] = json!([secret]);
    let p = fx.policy(&pol);
    Spawn::sandboxed(&p, &["read", s(&secret), "big-secret-marker"])
        .nofile(64)
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["read", s(&sibling), "big-sibling-marker"])
        .nofile(64)
        .run()
        .assert_allowed();
    // Control: without the deny the secret is readable under the same limit.
    let c = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&c, &["read", s(&secret), "big-secret-marker"])
        .nofile(64)
        .run()
        .assert_allowed();
}

/// A denied file with a second hard link is refused: Landlock's rules are on
/// inodes, so the rule for the sibling name (from expanding the parent) also
/// opened the denied name (before, the read below was ALLOWED).
#[test]
fn fs_deny_of_a_hard_linked_file_is_refused() {
    let fx = Fixture::new();
    let secret = fx.ws_file("creds/token", "linked-secret-marker\n");
    let alias = fx.workspace.join("creds/alias");
    fs::hard_link(&secret, &alias).unwrap();
    let mut pol = fx.base_policy();
    pol["filesystem"]["deny"] = json!([secret]);
    let p = fx.policy(&pol);
    let r = Spawn::sandboxed(&p, &["read", s(&secret), "linked-secret-marker"]).run();
    r.assert_helper_error(70);
    assert!(r.stderr.contains("filesystem.deny[0]"), "{r}");
    assert!(r.stderr.contains("has 2 hard links"), "{r}");
    Spawn::helper_check(&p).run().assert_helper_error(70);
    // Control: with the other name gone, the same policy runs and denies.
    fs::remove_file(&alias).unwrap();
    Spawn::sandboxed(&p, &["read", s(&secret), "linked-secret-marker"])
        .run()
        .assert_denied("EACCES");
}

/// The helper adds a rule without stat'ing its path: with the directory's
/// rights first, and with the file's when the kernel answers EINVAL (not a
/// directory). Each kind must still get all it grants: a rule on a directory
/// lets it be opened for listing (READ_DIR), a rule on a file lets it be
/// written, and neither reaches further.
#[test]
fn fs_rules_get_their_directory_or_file_rights_without_a_stat() {
    let fx = Fixture::new();
    let listed = fx.outside.join("listed");
    fs::create_dir_all(&listed).unwrap();
    let file = fx.outside.join("granted.txt");
    fs::write(&file, "granted-marker\n").unwrap();
    let before = fs::read(&fx.secret).unwrap();
    let mut pol = fx.base_policy();
    add_allow(&mut pol, &listed, "read");
    add_allow(&mut pol, &file, "readwrite");
    let p = fx.policy(&pol);
    // The directory opens: Landlock passed it, and read(2) on it is EISDIR.
    Spawn::sandboxed(&p, &["read", s(&listed)])
        .run()
        .assert_denied("EISDIR");
    Spawn::sandboxed(&p, &["write", s(&file)])
        .run()
        .assert_allowed();
    assert!(fs::read_to_string(&file).unwrap().len() > "granted-marker\n".len());
    // Neither rule reaches its parent or a sibling.
    Spawn::sandboxed(&p, &["read", s(&fx.outside)])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&p, &["write", s(&fx.secret)])
        .run()
        .assert_denied("EACCES");
    assert_eq!(fs::read(&fx.secret).unwrap(), before, "secret changed");
    // Control: without the two rules both are refused.
    let bare = fx.policy(&fx.base_policy());
    Spawn::sandboxed(&bare, &["read", s(&listed)])
        .run()
        .assert_denied("EACCES");
    Spawn::sandboxed(&bare, &["write", s(&file)])
        .run()
        .assert_denied("EACCES");
}

/// Rule fds are closed in batches; under a limit lower than a batch, an open
/// that meets RLIMIT_NOFILE closes the batch and goes on: every rule still
/// lands, and nothing else is granted.
#[test]
fn fs_rules_under_a_tiny_fd_limit_are_all_enforced() {
    let fx = Fixture::new();
    let (files, unlisted, p) = file_rules(&fx, "few", 100);
    for i in [0, 31, 32, 63, 99] {
        Spawn::sandboxed(&p, &["read", s(&files[i]), &format!("marker-{i}")])
            .nofile(16)
            .run()
            .assert_allowed();
    }
    Spawn::sandboxed(&p, &["read", s(&unlisted), "unlisted-marker"])
        .nofile(16)
        .run()
        .assert_denied("EACCES");
    // Control: the same read works without the sandbox and the same limit.
    Spawn::probe(&["read", s(&unlisted), "unlisted-marker"])
        .nofile(16)
        .run()
        .assert_allowed();
}
