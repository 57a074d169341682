//! Loader and interpreter injection variables: names that make a loader,
//! shell or runtime run code (or read configuration) the command did not ask
//! for. One list for both layers: the helper removes them from the command's
//! environment, and the launcher (which includes this file by path) refuses
//! them in `--env` unless allowed by name, so a name is never accepted by one
//! layer and silently dropped by the other.

/// Prefixes: every loader variable (ld.so reads many more `LD_*` names than
/// any list keeps up with) and exported bash functions.
const PREFIXES: &[&str] = &["BASH_FUNC_", "LD_"];

/// Whole names, upper case, sorted by bytes (looked up by binary search).
const NAMES: &[&str] = &[
    "BASHOPTS",
    "BASH_ENV",
    "CLASSPATH",
    "DOTNET_STARTUP_HOOKS",
    "ENV",
    "GCONV_PATH",
    "GETCONF_DIR",
    "GIT_ASKPASS",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_PROXY_COMMAND",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_TEMPLATE_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "IFS",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "LESSCLOSE",
    "LESSOPEN",
    "LOCALDOMAIN",
    "LOCPATH",
    "LUA_INIT",
    "LUA_INIT_5_1",
    "LUA_INIT_5_2",
    "LUA_INIT_5_3",
    "LUA_INIT_5_4",
    "MALLOC_CONF",
    "MALLOC_TRACE",
    "NLSPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "NPM_CONFIG_SCRIPT_SHELL",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "PERL5DB",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
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
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "R_PROFILE",
    "R_PROFILE_USER",
    "SHELLOPTS",
    "SSH_ASKPASS",
    "TCLLIBPATH",
    "ZDOTDIR",
    "_JAVA_OPTIONS",
];

/// The longest name in NAMES (a test keeps this true).
const MAX_LEN: usize = 25;

/// Is `name` an injection variable? Case-insensitive: some runtimes are, and
/// an attacker picks whatever spelling slips through.
pub fn is_injection(name: &str) -> bool {
    let b = name.as_bytes();
    if PREFIXES
        .iter()
        .any(|p| b.len() >= p.len() && b[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
    {
        return true;
    }
    // Upper-cased on the stack: the helper checks every inherited variable
    // on every run.
    let mut buf = [0u8; MAX_LEN];
    let Some(up) = buf.get_mut(..b.len()) else {
        return false;
    };
    up.copy_from_slice(b);
    up.make_ascii_uppercase();
    NAMES.binary_search_by(|n| n.as_bytes().cmp(up)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_upper_case_and_fit_the_lookup() {
        assert!(NAMES.windows(2).all(|w| w[0] < w[1]), "sort NAMES");
        assert!(NAMES.iter().all(|n| *n == n.to_ascii_uppercase()));
        assert_eq!(NAMES.iter().map(|n| n.len()).max(), Some(MAX_LEN));
        // A prefix already covers these: keep the list to what it adds.
        assert!(!NAMES
            .iter()
            .any(|n| PREFIXES.iter().any(|p| n.starts_with(p))));
        for n in NAMES {
            assert!(is_injection(n), "{n}");
            assert!(is_injection(&n.to_ascii_lowercase()), "{n}");
        }
    }

    #[test]
    fn prefixes_and_near_misses() {
        for n in [
            "LD_PRELOAD",
            "ld_preload",
            "LD_LIBRARY_PATH",
            "Ld_Audit",
            "LD_ANYTHING_NEW",
            "BASH_FUNC_foo%%",
            "bash_func_x",
            "Node_Options",
        ] {
            assert!(is_injection(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "",
            "LD",
            "MY_LD_THING",
            "ENVX",
            "PYTHONPATHS",
            "NODE_REPL_EXTERNAL_MODULES",
            "A_NAME_LONGER_THAN_ANY_IN_THE_LIST",
        ] {
            assert!(!is_injection(n), "{n}");
        }
    }
}
