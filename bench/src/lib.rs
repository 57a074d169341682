//! See the binaries in src/bin: used by scripts/bench only.
