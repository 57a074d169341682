//! Shared by helper/build.rs and launcher/build.rs (by path): hand the
//! linker the crate's hot-text.ld, which puts the functions a run executes
//! first and together (written by scripts/hot-text; docs/helper.md, "Code
//! layout"). Only for the static musl binaries, the ones that ship; the
//! script only orders sections, so a stale list costs time, never behaviour.

pub fn link(bin: &str) {
    println!("cargo:rerun-if-changed=hot-text.ld");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "musl" {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        println!("cargo:rustc-link-arg-bin={bin}=-Wl,-T,{dir}/hot-text.ld");
    }
}
