//! Verdicts and the scorecard (table and JSON). Pure: no I/O.

use super::catalogue::{Area, Attack, Expectation, Severity};
use serde::Serialize;
use serde_json::{json, Value};

/// What one run of one probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum Outcome {
    /// The action happened.
    Allowed { detail: String },
    /// It failed; `errno` is the probe's symbolic errno (`-` for none).
    Denied { errno: String, detail: String },
    /// The probe was killed by a signal (a seccomp kill: SIGSYS).
    Signal { signal: i32, detail: String },
    /// Nothing could be concluded: the probe could not stage the attempt, the
    /// sandbox did not start, or the run timed out.
    Error { detail: String },
    /// Not run (e.g. the layer mode is unavailable).
    Skipped { detail: String },
}

impl Outcome {
    pub fn allowed(&self) -> bool {
        matches!(self, Outcome::Allowed { .. })
    }
    pub fn blocked(&self) -> bool {
        matches!(self, Outcome::Denied { .. } | Outcome::Signal { .. })
    }
    /// Short cell for the table.
    pub fn cell(&self) -> String {
        match self {
            Outcome::Allowed { .. } => "ALLOWED".into(),
            Outcome::Denied { errno, .. } if errno == "-" => "denied".into(),
            Outcome::Denied { errno, .. } => format!("denied {errno}"),
            Outcome::Signal { signal, .. } => format!("killed {}", signal_name(*signal)),
            Outcome::Error { .. } => "error".into(),
            Outcome::Skipped { .. } => "skipped".into(),
        }
    }
    pub fn detail(&self) -> &str {
        match self {
            Outcome::Allowed { detail }
            | Outcome::Denied { detail, .. }
            | Outcome::Signal { detail, .. }
            | Outcome::Error { detail }
            | Outcome::Skipped { detail } => detail,
        }
    }
}

pub fn signal_name(s: i32) -> String {
    match s {
        libc::SIGSYS => "SIGSYS".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        _ => format!("signal {s}"),
    }
}

/// Parse the probe's stdout/stderr/exit into an [`Outcome`].
pub fn parse_probe(stdout: &str, stderr: &str, exit: Option<i32>, signal: Option<i32>) -> Outcome {
    let line = stdout.lines().next().unwrap_or("").trim();
    if let Some(rest) = line.strip_prefix("ALLOWED") {
        return Outcome::Allowed {
            detail: rest.trim().to_string(),
        };
    }
    if let Some(rest) = line.strip_prefix("DENIED ") {
        let (errno, detail) = rest.split_once(' ').unwrap_or((rest, ""));
        return Outcome::Denied {
            errno: errno.to_string(),
            detail: detail.to_string(),
        };
    }
    if let Some(s) = signal {
        return Outcome::Signal {
            signal: s,
            detail: format!("probe killed by {}", signal_name(s)),
        };
    }
    let err = stderr.lines().last().unwrap_or("").trim();
    Outcome::Error {
        detail: format!(
            "exit {}: {}",
            exit.map(|c| c.to_string()).unwrap_or_else(|| "?".into()),
            err
        ),
    }
}

/// The four runs of one attack.
#[derive(Debug, Clone, Serialize)]
pub struct Columns {
    /// No sandbox at all, as the sandbox uid (the control: is the attack real here?).
    pub bare: Outcome,
    pub outer: Outcome,
    pub inner: Outcome,
    pub both: Outcome,
}

/// The scorecard verdict of one attack (judged on the `both` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Blocked,
    Escape,
    AllowedByPolicy,
    UnboundedByPolicy,
    Error,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Blocked => "blocked",
            Verdict::Escape => "ESCAPE",
            Verdict::AllowedByPolicy => "allowed-by-policy",
            Verdict::UnboundedByPolicy => "unbounded-by-policy",
            Verdict::Error => "error",
        }
    }
}

pub fn verdict(expect: &Expectation, both: &Outcome) -> Verdict {
    match (both, expect) {
        (o, _) if o.blocked() => Verdict::Blocked,
        (Outcome::Allowed { .. }, Expectation::MustBlock) => Verdict::Escape,
        (Outcome::Allowed { .. }, Expectation::AllowedByPolicy) => Verdict::AllowedByPolicy,
        (Outcome::Allowed { .. }, Expectation::UnboundedByPolicy) => Verdict::UnboundedByPolicy,
        _ => Verdict::Error,
    }
}

/// Which layer stops the attack on its own.
pub fn stopped_by(c: &Columns) -> &'static str {
    match (c.outer.blocked(), c.inner.blocked(), c.both.blocked()) {
        (true, true, _) => "each layer",
        (true, false, _) => "outer only",
        (false, true, _) => "inner only",
        (false, false, true) => "combined only",
        (false, false, false) => "none",
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AttackResult {
    pub name: String,
    pub area: Area,
    pub severity: Severity,
    pub why: String,
    pub args: Vec<String>,
    pub expectation: Expectation,
    pub columns: Columns,
    pub verdict: Verdict,
    pub stopped_by: &'static str,
}

impl AttackResult {
    pub fn new(a: &Attack, args: Vec<String>, expectation: Expectation, columns: Columns) -> Self {
        let verdict = verdict(&expectation, &columns.both);
        let stopped_by = stopped_by(&columns);
        AttackResult {
            name: a.name.into(),
            area: a.area,
            severity: a.severity,
            why: a.why.into(),
            args,
            expectation,
            columns,
            verdict,
            stopped_by,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub name: String,
    /// `ok`, `failed` or `not-installed`.
    pub status: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostCheck {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub attacks: usize,
    /// Attacks the profile must block.
    pub must_block: usize,
    /// ... of which were blocked with both layers.
    pub blocked: usize,
    /// ... of which each layer blocks on its own.
    pub blocked_by_each_layer: usize,
    pub escapes: usize,
    pub allowed_by_policy: usize,
    pub unbounded_by_policy: usize,
    pub errors: usize,
    pub workloads_ok: usize,
    pub workloads_failed: usize,
    pub workloads_not_installed: usize,
    pub host_checks_failed: usize,
    pub ok: bool,
}

pub fn summarize(
    attacks: &[AttackResult],
    workloads: &[Workload],
    checks: &[HostCheck],
) -> Summary {
    let must: Vec<&AttackResult> = attacks
        .iter()
        .filter(|a| a.expectation == Expectation::MustBlock)
        .collect();
    let mut s = Summary {
        attacks: attacks.len(),
        must_block: must.len(),
        blocked: must
            .iter()
            .filter(|a| a.verdict == Verdict::Blocked)
            .count(),
        blocked_by_each_layer: must
            .iter()
            .filter(|a| a.verdict == Verdict::Blocked && a.stopped_by == "each layer")
            .count(),
        escapes: attacks
            .iter()
            .filter(|a| a.verdict == Verdict::Escape)
            .count(),
        allowed_by_policy: attacks
            .iter()
            .filter(|a| a.verdict == Verdict::AllowedByPolicy)
            .count(),
        unbounded_by_policy: attacks
            .iter()
            .filter(|a| a.verdict == Verdict::UnboundedByPolicy)
            .count(),
        errors: attacks
            .iter()
            .filter(|a| a.verdict == Verdict::Error)
            .count(),
        workloads_ok: workloads.iter().filter(|w| w.status == "ok").count(),
        workloads_failed: workloads.iter().filter(|w| w.status == "failed").count(),
        workloads_not_installed: workloads
            .iter()
            .filter(|w| w.status == "not-installed")
            .count(),
        host_checks_failed: checks.iter().filter(|c| !c.ok).count(),
        ok: false,
    };
    s.ok = s.escapes == 0 && s.errors == 0 && s.workloads_failed == 0 && s.host_checks_failed == 0;
    s
}

pub fn summary_line(s: &Summary) -> String {
    format!(
        "escapes blocked: {}/{} (both layers: {})",
        s.blocked, s.must_block, s.blocked_by_each_layer
    )
}

/// The human scorecard.
pub fn table(
    profile: &str,
    attacks: &[AttackResult],
    workloads: &[Workload],
    checks: &[HostCheck],
    s: &Summary,
) -> String {
    let mut rows: Vec<[String; 8]> = vec![[
        "attack".into(),
        "severity".into(),
        "bare".into(),
        "outer".into(),
        "inner".into(),
        "both".into(),
        "verdict".into(),
        "stopped by".into(),
    ]];
    for a in attacks {
        rows.push([
            a.name.clone(),
            a.severity.as_str().into(),
            a.columns.bare.cell(),
            a.columns.outer.cell(),
            a.columns.inner.cell(),
            a.columns.both.cell(),
            a.verdict.as_str().into(),
            a.stopped_by.into(),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("cordon verify: profile {profile}\n\n");
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    let notable: Vec<&AttackResult> = attacks
        .iter()
        .filter(|a| a.verdict != Verdict::Blocked)
        .collect();
    if !notable.is_empty() {
        out.push('\n');
        for a in notable {
            out.push_str(&format!(
                "{} {}: {}\n",
                a.verdict.as_str(),
                a.name,
                a.columns.both.detail()
            ));
        }
    }
    if !workloads.is_empty() {
        out.push_str("\nworkloads (both layers):\n");
        for w in workloads {
            out.push_str(&format!("  {:<10} {:<13} {}\n", w.name, w.status, w.detail));
        }
    }
    out.push_str("\nhost checks:\n");
    for c in checks {
        out.push_str(&format!(
            "  {} {}: {}\n",
            if c.ok { "PASS" } else { "FAIL" },
            c.name,
            c.detail
        ));
    }
    out.push_str(&format!(
        "\n{}; escapes: {}; allowed by policy: {}; unbounded by policy: {}; errors: {}; workloads: {} ok, {} failed, {} not installed\n",
        summary_line(s),
        s.escapes,
        s.allowed_by_policy,
        s.unbounded_by_policy,
        s.errors,
        s.workloads_ok,
        s.workloads_failed,
        s.workloads_not_installed
    ));
    out.push_str(if s.ok {
        "result: PASS\n"
    } else {
        "result: FAIL\n"
    });
    out
}

pub fn to_json(
    profile: &str,
    host: Value,
    attacks: &[AttackResult],
    workloads: &[Workload],
    checks: &[HostCheck],
    s: &Summary,
    duration_ms: u64,
) -> Value {
    json!({
        "profile": profile,
        "host": host,
        "summary": s,
        "summary_line": summary_line(s),
        "attacks": attacks,
        "workloads": workloads,
        "host_checks": checks,
        "duration_ms": duration_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::super::catalogue::{catalogue, expectation, Traits};
    use super::*;

    fn allowed() -> Outcome {
        Outcome::Allowed { detail: "x".into() }
    }
    fn denied() -> Outcome {
        Outcome::Denied {
            errno: "EPERM".into(),
            detail: "x".into(),
        }
    }
    fn cols(o: Outcome, i: Outcome, b: Outcome) -> Columns {
        Columns {
            bare: allowed(),
            outer: o,
            inner: i,
            both: b,
        }
    }

    #[test]
    fn parse_probe_lines() {
        assert_eq!(
            parse_probe("ALLOWED read marker\n", "", Some(0), None),
            Outcome::Allowed {
                detail: "read marker".into()
            }
        );
        assert_eq!(
            parse_probe("DENIED EACCES open /x\n", "", Some(1), None),
            Outcome::Denied {
                errno: "EACCES".into(),
                detail: "open /x".into()
            }
        );
        assert_eq!(
            parse_probe("DENIED - no fd\n", "", Some(1), None).cell(),
            "denied"
        );
        assert!(matches!(
            parse_probe("", "", None, Some(libc::SIGSYS)),
            Outcome::Signal { signal, .. } if signal == libc::SIGSYS
        ));
        assert!(matches!(
            parse_probe("", "cordon-probe: x: setup error: y\n", Some(2), None),
            Outcome::Error { detail } if detail.contains("setup error")
        ));
    }

    #[test]
    fn verdicts_and_layers() {
        assert_eq!(
            verdict(&Expectation::MustBlock, &denied()),
            Verdict::Blocked
        );
        assert_eq!(
            verdict(&Expectation::MustBlock, &allowed()),
            Verdict::Escape
        );
        assert_eq!(
            verdict(&Expectation::AllowedByPolicy, &allowed()),
            Verdict::AllowedByPolicy
        );
        assert_eq!(
            verdict(&Expectation::UnboundedByPolicy, &allowed()),
            Verdict::UnboundedByPolicy
        );
        assert_eq!(
            verdict(
                &Expectation::MustBlock,
                &Outcome::Error { detail: "e".into() }
            ),
            Verdict::Error
        );
        assert_eq!(
            stopped_by(&cols(denied(), denied(), denied())),
            "each layer"
        );
        assert_eq!(
            stopped_by(&cols(denied(), allowed(), denied())),
            "outer only"
        );
        assert_eq!(
            stopped_by(&cols(allowed(), denied(), denied())),
            "inner only"
        );
        assert_eq!(
            stopped_by(&cols(allowed(), allowed(), denied())),
            "combined only"
        );
        assert_eq!(stopped_by(&cols(allowed(), allowed(), allowed())), "none");
    }

    #[test]
    fn summary_and_table() {
        let c = catalogue();
        let t = Traits {
            network_host: true,
            ..Default::default()
        };
        let find = |n: &str| c.iter().find(|a| a.name == n).unwrap();
        let r = vec![
            AttackResult::new(
                find("bpf"),
                vec![],
                expectation(find("bpf"), &t),
                cols(denied(), denied(), denied()),
            ),
            AttackResult::new(
                find("write-ro-file"),
                vec![],
                expectation(find("write-ro-file"), &t),
                cols(denied(), allowed(), denied()),
            ),
            AttackResult::new(
                find("tcp-loopback"),
                vec![],
                expectation(find("tcp-loopback"), &t),
                cols(allowed(), allowed(), allowed()),
            ),
            AttackResult::new(
                find("fork-bomb"),
                vec![],
                expectation(find("fork-bomb"), &t),
                cols(allowed(), allowed(), allowed()),
            ),
            AttackResult::new(
                find("mknod"),
                vec![],
                expectation(find("mknod"), &t),
                cols(allowed(), allowed(), allowed()),
            ),
        ];
        let w = vec![Workload {
            name: "bash".into(),
            status: "ok".into(),
            detail: String::new(),
        }];
        let s = summarize(&r, &w, &[]);
        assert_eq!(s.attacks, 5);
        assert_eq!(s.must_block, 3);
        assert_eq!(s.blocked, 2);
        assert_eq!(s.blocked_by_each_layer, 1);
        assert_eq!(s.escapes, 1);
        assert_eq!(s.allowed_by_policy, 1);
        assert_eq!(s.unbounded_by_policy, 1);
        assert!(!s.ok);
        assert_eq!(summary_line(&s), "escapes blocked: 2/3 (both layers: 1)");
        let text = table("p", &r, &w, &[], &s);
        assert!(text.contains("ESCAPE mknod"), "{text}");
        assert!(text.contains("result: FAIL"));
        let j = to_json("p", json!({}), &r, &w, &[], &s, 1);
        assert_eq!(j["attacks"][1]["stopped_by"], "outer only");
        assert_eq!(j["attacks"][2]["verdict"], "allowed-by-policy");
        assert_eq!(j["attacks"][0]["columns"]["both"]["result"], "denied");
        assert_eq!(j["attacks"][0]["expectation"], "must-block");
        assert_eq!(j["summary"]["escapes"], 1);
    }
}
