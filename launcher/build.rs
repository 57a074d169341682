fn main() {
    // The helper's expected SHA-256 is recorded at build time from the
    // environment (see src/helper_bin.rs); rebuild when it changes.
    println!("cargo:rerun-if-env-changed=CORDON_HELPER_SHA256");
    // The functions a run executes, linked first and together (hot-text.ld,
    // written by scripts/hot-text; docs/helper.md, "Code layout"). Only for
    // the static musl binary, the one that ships; the script only orders
    // sections, so a stale list costs time, never behaviour.
    println!("cargo:rerun-if-changed=hot-text.ld");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "musl" {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        println!("cargo:rustc-link-arg-bin=cordon=-Wl,-T,{dir}/hot-text.ld");
    }
}
