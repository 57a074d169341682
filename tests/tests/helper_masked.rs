//! `filesystem.deny` entries marked `"masked": true` (what `cordon run` writes
//! for the paths bwrap masks): the helper verifies the outer layer's empty
//! mount over the path instead of carving the path out of its parent, and
//! carves it out with Landlock whenever the mask is not what it should be.
//! The real helper runs inside real bwrap; each denial has a control run.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use cordon_tests::*;
use serde_json::{json, Value};

const COVER_FD: i32 = 9;
const REPORT_FD: i32 = 8;

/// What bwrap mounts over the secret.
enum Cover {
    /// Nothing: the outer layer "forgot" the mask.
    Nothing,
    /// An empty file (`--ro-bind-data` of an empty fd), as cordon masks files.
    EmptyMask,
    /// A non-empty file on another filesystem: not a mask.
    Decoy,
}

struct Sandbox<'a> {
    fx: &'a Fixture,
    secret: PathBuf,
    cover: Cover,
    /// Keep CAP_SYS_ADMIN in bwrap's namespace (a hole in the outer layer).
    caps: bool,
}

impl Sandbox<'_> {
    /// Run the probe in bwrap, through the helper when `policy` is given.
    /// Returns the run and the helper's report.
    fn run(&self, policy: Option<&Path>, probe_args: &[&str]) -> (Run, Option<Value>) {
        self.run_opts(policy, true, probe_args)
    }

    /// [`Sandbox::run`]; without `report_wanted` the helper gets no
    /// `--report-fd` (for a policy it must refuse: no report is written).
    fn run_opts(
        &self,
        policy: Option<&Path>,
        report_wanted: bool,
        probe_args: &[&str],
    ) -> (Run, Option<Value>) {
        let cover_file = self.fx.root.join("cover");
        let content: &[u8] = match self.cover {
            Cover::Decoy => b"decoy-content\n",
            _ => b"",
        };
        fs::write(&cover_file, content).unwrap();
        let cover = fs::File::open(&cover_file).unwrap();
        let mut report = report_file(self.fx);
        let secret = self.secret.to_str().unwrap();
        let mut a: Vec<String> = [
            "--unshare-user",
            "--unshare-pid",
            "--bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        .map(String::from)
        .to_vec();
        if self.caps {
            a.extend(["--uid", "0", "--cap-add", "CAP_SYS_ADMIN"].map(String::from));
        }
        if !matches!(self.cover, Cover::Nothing) {
            a.extend([
                "--ro-bind-data".into(),
                COVER_FD.to_string(),
                secret.to_string(),
            ]);
        }
        a.push("--".into());
        if let Some(p) = policy {
            a.extend([
                helper_bin().to_string_lossy().into_owned(),
                "--policy-file".into(),
                p.to_string_lossy().into_owned(),
            ]);
            if report_wanted {
                a.extend(["--report-fd".into(), REPORT_FD.to_string()]);
            }
            a.push("--".into());
        }
        a.push(probe_bin().to_string_lossy().into_owned());
        a.extend(probe_args.iter().map(|x| x.to_string()));
        let r = Spawn::new("bwrap", &a)
            .inherit_fd(cover.as_raw_fd(), COVER_FD)
            .inherit_fd(report.as_raw_fd(), REPORT_FD)
            .run();
        let rep = (policy.is_some() && report_wanted).then(|| read_report(&mut report));
        (r, rep)
    }
}

struct Case {
    fx: Fixture,
    secret: PathBuf,
    marker: &'static str,
    sibling: PathBuf,
}

fn case() -> Case {
    let fx = Fixture::new();
    let marker = "masked-secret-marker";
    let secret = fx.ws_file(".env", &format!("{marker}\n"));
    let sibling = fx.ws_file("main.rs", "sibling-marker\n");
    fx.ws_file("src/lib.rs", "");
    Case {
        fx,
        secret,
        marker,
        sibling,
    }
}

impl Case {
    fn policy(&self, deny: Value) -> PathBuf {
        let mut p = self.fx.base_policy();
        p["filesystem"]["deny"] = json!([deny]);
        self.fx.policy(&p)
    }
    fn masked(&self) -> PathBuf {
        self.policy(json!({"path": self.secret, "masked": true}))
    }
    fn sandbox(&self, cover: Cover, caps: bool) -> Sandbox<'_> {
        Sandbox {
            fx: &self.fx,
            secret: self.secret.clone(),
            cover,
            caps,
        }
    }
}

fn enforced_by(rep: &Option<Value>) -> String {
    let r = rep.as_ref().expect("a report");
    r["landlock"]["deny"][0]["enforced_by"]
        .as_str()
        .unwrap_or_else(|| panic!("no landlock.deny in {r}"))
        .to_string()
}

fn path_rules(rep: &Option<Value>) -> u64 {
    rep.as_ref().unwrap()["landlock"]["path_rules"]
        .as_u64()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn masked_deny_with_the_mask_in_place_is_verified_not_carved() {
    let c = case();
    let sb = c.sandbox(Cover::EmptyMask, false);
    let (r, rep) = sb.run(Some(&c.masked()), &["read", s(&c.secret)]);
    r.assert_allowed();
    assert!(
        r.stdout.contains("read 0 bytes"),
        "the mask, not the secret:\n{r}"
    );
    assert_eq!(enforced_by(&rep), "outer_mask");
    // The workspace stays one rule (plus the probe's): nothing was expanded.
    assert_eq!(path_rules(&rep), 2, "{rep:?}");
    let (r, _) = sb.run(
        Some(&c.masked()),
        &["read", s(&c.sibling), "sibling-marker"],
    );
    r.assert_allowed();

    // The same deny without "masked" is carved out even under the mask.
    let plain = c.policy(json!(c.secret));
    let (r, rep) = sb.run(Some(&plain), &["read", s(&c.secret)]);
    r.assert_denied("EACCES");
    assert_eq!(enforced_by(&rep), "landlock");
    assert!(path_rules(&rep) > 2, "{rep:?}");
}

#[test]
fn masked_deny_without_the_mask_is_carved_out_by_landlock() {
    // A hole in the outer layer: the mask is missing. The helper notices and
    // denies the real file itself.
    let c = case();
    let sb = c.sandbox(Cover::Nothing, false);
    let (r, rep) = sb.run(Some(&c.masked()), &["read", s(&c.secret), c.marker]);
    r.assert_denied("EACCES");
    assert_eq!(enforced_by(&rep), "landlock");
    let (r, _) = sb.run(
        Some(&c.masked()),
        &["read", s(&c.sibling), "sibling-marker"],
    );
    r.assert_allowed();
    // Control: without the deny entry the secret is readable in this sandbox.
    let none = c.fx.policy(&c.fx.base_policy());
    let (r, _) = sb.run(Some(&none), &["read", s(&c.secret), c.marker]);
    r.assert_allowed();
}

#[test]
fn masked_deny_over_a_non_empty_cover_is_carved_out() {
    let c = case();
    let sb = c.sandbox(Cover::Decoy, false);
    let (r, rep) = sb.run(Some(&c.masked()), &["read", s(&c.secret)]);
    r.assert_denied("EACCES");
    assert_eq!(enforced_by(&rep), "landlock");
    // Control: the cover itself is readable without the deny.
    let none = c.fx.policy(&c.fx.base_policy());
    let (r, _) = sb.run(Some(&none), &["read", s(&c.secret), "decoy-content"]);
    r.assert_allowed();
}

#[test]
fn verified_mask_cannot_be_unmounted_even_when_bwrap_leaves_cap_sys_admin() {
    // A second hole in the outer layer: the sandbox keeps CAP_SYS_ADMIN in
    // its namespace. The helper drops it (and seccomp denies umount2), so the
    // mask it relied on stays in place.
    let c = case();
    let sb = c.sandbox(Cover::EmptyMask, true);
    let (r, rep) = sb.run(Some(&c.masked()), &["unmask-read", s(&c.secret), c.marker]);
    r.assert_denied("EPERM");
    assert_eq!(enforced_by(&rep), "outer_mask");
    assert_eq!(
        fs::read_to_string(&c.secret).unwrap(),
        format!("{}\n", c.marker)
    );
    // Control without the helper: as root, bwrap's namespace owns the mask
    // and the kept capability removes it, revealing the secret. Unprivileged,
    // bwrap runs the sandbox in a nested user namespace whose copy of the
    // mount is locked: bwrap alone already refuses.
    let (r, _) = sb.run(None, &["unmask-read", s(&c.secret), c.marker]);
    if is_root() {
        r.assert_allowed();
    } else {
        r.assert_denied("EPERM");
    }
}

#[test]
fn allowing_the_masked_path_itself_is_a_policy_error_mask_or_not() {
    // Deny wins, and a contradiction is a bug in the policy: with the mask
    // verified (no path resolution) exactly as with the Landlock carve-out.
    let c = case();
    let mut p = c.fx.base_policy();
    add_allow(&mut p, &c.secret, "read");
    p["filesystem"]["deny"] = json!([{"path": c.secret, "masked": true}]);
    let pol = c.fx.policy(&p);
    for cover in [Cover::EmptyMask, Cover::Nothing] {
        let (r, _) = c
            .sandbox(cover, false)
            .run_opts(Some(&pol), false, &["read", s(&c.secret)]);
        r.assert_helper_error(70);
        assert!(r.stderr.contains("is at or beneath the denied path"), "{r}");
    }
}
