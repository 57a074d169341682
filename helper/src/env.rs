//! The command's environment: inherited or cleared, minus loader and
//! interpreter injection variables, plus the policy's `env.set`.

use crate::policy::EnvPolicy;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

/// Variables that make a loader or interpreter run code the command did not
/// ask for. Matched case-insensitively (some runtimes are case-insensitive and
/// an attacker picks whatever spelling slips through). Sorted: `is_injection`
/// looks names up by binary search.
const INJECTION: &[&str] = &[
    "BASHOPTS",
    "BASH_ENV",
    "CLASSPATH",
    "ENV",
    "GCONV_PATH",
    "GETCONF_DIR",
    "GIT_ASKPASS",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "HOSTALIASES",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "LD_AUDIT",
    "LD_DEBUG",
    "LD_DEBUG_OUTPUT",
    "LD_DYNAMIC_WEAK",
    "LD_LIBRARY_PATH",
    "LD_ORIGIN_PATH",
    "LD_PRELOAD",
    "LD_PROFILE",
    "LD_SHOW_AUXV",
    "LESSCLOSE",
    "LESSOPEN",
    "LOCALDOMAIN",
    "MALLOC_TRACE",
    "NLSPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "PERL5DB",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "PROMPT_COMMAND",
    "PS4",
    "PYTHONBREAKPOINT",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "RES_OPTIONS",
    "RUBYLIB",
    "RUBYOPT",
    "SHELLOPTS",
    "SSH_ASKPASS",
    "_JAVA_OPTIONS",
];

/// Prefixes of injection variables (exported bash functions).
const INJECTION_PREFIXES: &[&str] = &["BASH_FUNC_"];

pub fn is_injection(name: &str) -> bool {
    let b = name.as_bytes();
    if INJECTION_PREFIXES
        .iter()
        .any(|p| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
    {
        return true;
    }
    // Upper-cased on the stack and looked up in the sorted list: every
    // inherited variable is checked on every run.
    let mut buf = [0u8; INJECTION_MAX_LEN];
    let Some(up) = buf.get_mut(..b.len()) else {
        return false;
    };
    up.copy_from_slice(b);
    up.make_ascii_uppercase();
    INJECTION.binary_search_by(|n| n.as_bytes().cmp(up)).is_ok()
}

/// The longest name in INJECTION (a test keeps this true).
const INJECTION_MAX_LEN: usize = 25;

pub fn injection_names() -> &'static [&'static str] {
    INJECTION
}

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
    fn injection_list_is_sorted_and_fits_the_lookup() {
        assert!(INJECTION.windows(2).all(|w| w[0] < w[1]), "sort INJECTION");
        assert!(INJECTION.iter().all(|n| *n == n.to_ascii_uppercase()));
        assert_eq!(
            INJECTION.iter().map(|n| n.len()).max(),
            Some(INJECTION_MAX_LEN)
        );
        for n in INJECTION {
            assert!(
                is_injection(n) && is_injection(&n.to_ascii_lowercase()),
                "{n}"
            );
        }
    }

    #[test]
    fn injection_names_are_matched_case_insensitively() {
        assert!(is_injection("LD_PRELOAD"));
        assert!(is_injection("ld_preload"));
        assert!(is_injection("BASH_FUNC_foo%%"));
        assert!(is_injection("bash_func_x"));
        assert!(!is_injection("PATH"));
        assert!(!is_injection("LD_PRELOADX"));
    }

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
