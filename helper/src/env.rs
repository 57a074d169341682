//! The command's environment: inherited or cleared, minus loader and
//! interpreter injection variables, plus the policy's `env.set`.

use crate::policy::EnvPolicy;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

// The list is shared with the launcher (helper/src/injection.rs).
pub use crate::injection::is_injection;

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn validate_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return Err(format!("invalid variable name \"{name}\"")),
    }
    if chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(format!("invalid variable name \"{name}\""))
    }
}

pub struct Prepared {
    pub envp: Vec<CString>,
    /// Value of PATH in the final environment, for the command search.
    pub path: Option<OsString>,
    /// Names removed because they are injection variables.
    pub removed: Vec<String>,
}

/// Build the command's environment from `inherited` (the helper's own).
pub fn prepare(policy: &EnvPolicy, inherited: Vec<(OsString, OsString)>) -> Prepared {
    let allowed = |name: &str| {
        policy
            .allow_injection
            .iter()
            .any(|a| a.eq_ignore_ascii_case(name))
    };
    let mut vars: Vec<(OsString, OsString)> = Vec::new();
    let mut removed = Vec::new();
    if !policy.clear {
        for (k, v) in inherited {
            let ks = k.to_string_lossy();
            if is_injection(&ks) && !allowed(&ks) {
                removed.push(ks.into_owned());
                continue;
            }
            vars.push((k, v));
        }
    }
    for (k, v) in &policy.set {
        vars.retain(|(ek, _)| ek.as_bytes() != k.as_bytes());
        vars.push((k.into(), v.into()));
    }
    let path = vars
        .iter()
        .find(|(k, _)| k.as_bytes() == b"PATH")
        .map(|(_, v)| v.clone());
    let envp = vars
        .into_iter()
        .filter_map(|(k, v)| {
            let mut b = k.as_bytes().to_vec();
            b.push(b'=');
            b.extend_from_slice(v.as_bytes());
            // Names or values with NUL cannot come from a real environment.
            CString::new(b).ok()
        })
        .collect();
    Prepared {
        envp,
        path,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_removes_injection_and_applies_set() {
        let inherited = vec![
            ("PATH".into(), "/bin".into()),
            ("LD_PRELOAD".into(), "/evil.so".into()),
            ("PYTHONPATH".into(), "/w".into()),
            ("HOME".into(), "/root".into()),
        ];
        let pol = EnvPolicy {
            clear: false,
            set: vec![("HOME".into(), "/home/s".into())],
            allow_injection: vec!["pythonpath".into()],
        };
        let p = prepare(&pol, inherited);
        let env: Vec<String> = p
            .envp
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        assert_eq!(env, vec!["PATH=/bin", "PYTHONPATH=/w", "HOME=/home/s"]);
        assert_eq!(p.removed, vec!["LD_PRELOAD"]);
        assert_eq!(p.path.as_deref(), Some(std::ffi::OsStr::new("/bin")));
    }

    #[test]
    fn clear_starts_empty() {
        let pol = EnvPolicy {
            clear: true,
            set: vec![("A".into(), "1".into())],
            allow_injection: vec![],
        };
        let p = prepare(&pol, vec![("SECRET".into(), "x".into())]);
        assert_eq!(p.envp.len(), 1);
        assert!(p.removed.is_empty());
        assert!(validate_name("9A").is_err() && validate_name("A=B").is_err());
        assert!(validate_name("_A9").is_ok());
    }
}
