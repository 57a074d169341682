#[path = "../helper/hot_text_link.rs"]
mod hot_text_link;

fn main() {
    // The helper's expected SHA-256 is recorded at build time from the
    // environment (see src/helper_bin.rs); rebuild when it changes.
    println!("cargo:rerun-if-env-changed=CORDON_HELPER_SHA256");
    hot_text_link::link("cordon");
}
