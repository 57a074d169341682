// The helper's bump allocator, shared by path rather than by crate (it is one
// file): musl's allocator returns freed memory to the kernel one munmap at a
// time, ≈ 0.4 ms per run. 4 MiB of address space; a long run that allocates
// more (output streaming) continues in musl's allocator.
#[path = "../../helper/src/arena.rs"]
mod arena;

#[global_allocator]
static ALLOC: arena::Arena<{ 4 * 1024 * 1024 }> = arena::Arena::new();

fn main() {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(cordon::cli::main(argv));
}
