// The helper's expected SHA-256 is recorded at build time from the environment
// (see src/helper_bin.rs); rebuild when it changes.
fn main() {
    println!("cargo:rerun-if-env-changed=CORDON_HELPER_SHA256");
}
