//! Fuzz the policy parser and what consumes its output: any input must give
//! a policy or an error (never a panic), the same from the fast and the
//! checked parse, a policy's normalized form must
//! parse back to the same thing, and its syscall section must compile.
#![no_main]

use cordon_helper::{policy, seccomp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The fast path must give what the checked walk gives: the same policy
    // or the same error.
    match (policy::parse(data), policy::checked(data)) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "fast and checked parses differ"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("fast and checked parses disagree: {a:?} vs {b:?}"),
    }
    let Ok(p) = policy::parse(data) else { return };
    let normalized = p.to_json();
    let again = policy::from_value(&normalized).expect("normalized policy must parse");
    assert_eq!(again.to_json(), normalized, "normalization must be stable");
    if let Ok(spec) = seccomp::resolve(&p.syscalls, Some(9)) {
        let prog = seccomp::emit::build(&spec).expect("a resolved spec must compile");
        seccomp::interp::validate(&prog).expect("the kernel's checks must accept the program");
    }
});
