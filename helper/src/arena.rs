//! A bump allocator for the helper's short life: one mapping, allocated from
//! front to back, never reused, released by exec.
//!
//! Why: the helper allocates a few hundred KiB and then execs. musl's
//! allocator maps and unmaps small regions as it goes, and every fresh page
//! costs a page fault — in a VM several microseconds each, a large part of
//! the helper's startup (BENCHMARKS.md). The first PREFAULT_BYTES (what a
//! run with the default profile uses, ~130 KiB) are populated in one batch
//! (`MADV_POPULATE_WRITE`); populating all of it cost ~0.25 ms of zeroed pages
//! nobody touched. The rest faults in on demand. When the arena is
//! exhausted, or before it could be mapped, allocations fall through to the
//! system allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

// Under 2 MiB: no transparent huge page (a 2 MiB page zeroed on first touch).
const ARENA_BYTES: usize = 1024 * 1024;
const PREFAULT_BYTES: usize = 160 * 1024;

pub struct Arena {
    /// Start of the mapping; 0 until mapped, usize::MAX if mapping failed.
    base: AtomicUsize,
    /// Bytes handed out so far.
    used: AtomicUsize,
}

impl Arena {
    pub const fn new() -> Self {
        Arena {
            base: AtomicUsize::new(0),
            used: AtomicUsize::new(0),
        }
    }

    fn base(&self) -> Option<usize> {
        match self.base.load(Ordering::Acquire) {
            0 => {
                // SAFETY: an anonymous private mapping with no address hint
                // affects no existing memory.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        ARENA_BYTES,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                        -1,
                        0,
                    )
                };
                if p != libc::MAP_FAILED {
                    // SAFETY: the range lies inside the mapping just made.
                    // A kernel without MADV_POPULATE_WRITE (< 5.14) refuses
                    // it and the pages fault in on demand instead.
                    unsafe { libc::madvise(p, PREFAULT_BYTES, libc::MADV_POPULATE_WRITE) };
                }
                let b = if p == libc::MAP_FAILED {
                    usize::MAX
                } else {
                    p as usize
                };
                // The helper is single-threaded; should two threads race, the
                // loser's mapping is simply unused.
                match self
                    .base
                    .compare_exchange(0, b, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => (b != usize::MAX).then_some(b),
                    Err(won) => (won != usize::MAX).then_some(won),
                }
            }
            usize::MAX => None,
            b => Some(b),
        }
    }

    fn owns(&self, p: *mut u8) -> bool {
        let b = self.base.load(Ordering::Acquire);
        b != 0 && b != usize::MAX && (p as usize) >= b && (p as usize) < b + ARENA_BYTES
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `alloc` returns either a fresh, suitably aligned, never-reused
// region inside the arena (bounds checked against ARENA_BYTES) or memory from
// `System`; `dealloc` forwards only pointers outside the arena to `System`, so
// each allocator only ever frees its own memory.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let Some(base) = self.base() {
            let mut cur = self.used.load(Ordering::Relaxed);
            loop {
                let start = (base + cur + layout.align() - 1) & !(layout.align() - 1);
                let end = start - base + layout.size();
                if end > ARENA_BYTES {
                    break;
                }
                match self.used.compare_exchange_weak(
                    cur,
                    end,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return start as *mut u8,
                    Err(now) => cur = now,
                }
            }
        }
        // SAFETY: forwarded with the caller's valid layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: not ours, so it came from System.alloc with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_disjoint_and_falls_back_when_full() {
        let a = Arena::new();
        let mut last_end = 0usize;
        for (size, align) in [(1, 1), (3, 8), (24, 8), (100, 64), (7, 4096), (1, 2)] {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a valid non-zero layout.
            let p = unsafe { a.alloc(l) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "alignment {align}");
            assert!(a.owns(p));
            assert!(p as usize >= last_end, "overlap");
            last_end = p as usize + size;
            // SAFETY: p came from this allocator with layout l.
            unsafe { a.dealloc(p, l) };
        }
        // Larger than what is left: served by the system allocator, freed there.
        let big = Layout::from_size_align(ARENA_BYTES, 8).unwrap();
        // SAFETY: a valid non-zero layout.
        let p = unsafe { a.alloc(big) };
        assert!(!p.is_null() && !a.owns(p));
        // SAFETY: p came from this allocator with layout `big`.
        unsafe { a.dealloc(p, big) };
    }
}
