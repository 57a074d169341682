//! Links the functions a run executes first and together (hot-text.ld,
//! written by scripts/hot-text; docs/helper.md, "Code layout"): a run then
//! faults in a few windows of code instead of pages spread over the whole
//! binary. Only for the static musl binary, the one that ships; the script
//! only orders sections, so a stale list costs time, never behaviour.

fn main() {
    println!("cargo:rerun-if-changed=hot-text.ld");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "musl" {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        println!("cargo:rustc-link-arg-bin=cordon-helper=-Wl,-T,{dir}/hot-text.ld");
    }
}
