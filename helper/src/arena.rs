//! A bump allocator for a short-lived process: one mapping, small blocks
//! allocated from front to back and large ones ([`LARGE`]) from back to
//! front, never reused, released by exec or exit. The helper's global
//! allocator; the launcher shares this file (`#[path]` in launcher/src/main.rs)
//! with a smaller arena, for the same reason: musl's allocator returns freed
//! memory to the kernel one `munmap` at a time (≈ 0.4 ms per `cordon run`).
//!
//! Why: the helper allocates a few hundred KiB and then execs. musl's
//! allocator maps and unmaps small regions as it goes, and every fresh page
//! costs a page fault — in a VM several microseconds each, a large part of
//! the helper's startup (docs/benchmarks-history.md). The first PREFAULT bytes (about
//! what a run uses: 48 KiB for the helper; for the launcher 48 KiB at the
//! start and up to 160 KiB once bwrap is loading, see `populate`) are
//! populated in one batch each (`MADV_POPULATE_WRITE`); populating all of it cost
//! ~0.25 ms of zeroed pages nobody touched. The rest faults in on demand. When the arena is
//! exhausted, or before it could be mapped, allocations fall through to the
//! system allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Address space only (MAP_NORESERVE, faulted on touch): large policies
/// (1 000 path rules take ~1.5 MiB) stay out of the slower system allocator.
pub const DEFAULT_BYTES: usize = 8 * 1024 * 1024;
pub const PREFAULT_BYTES: usize = 160 * 1024;

/// Blocks this large come from the arena's far end, downwards. The big
/// buffers a run asks for (a 64 KiB read buffer, a child's stack) are
/// mostly never touched: kept apart from the small blocks, they stay out
/// of the populated range and cost only the pages actually written.
pub const LARGE: usize = 32 * 1024;

/// `BYTES`: the size of the mapping; what does not fit goes to `System`.
/// `PREFAULT`: how much of it is populated when it is mapped.
pub struct Arena<const BYTES: usize = DEFAULT_BYTES, const PREFAULT: usize = PREFAULT_BYTES> {
    /// Start of the mapping; 0 until mapped, usize::MAX if mapping failed.
    base: AtomicUsize,
    /// Both cursors in one word, so one compare-and-swap moves either:
    /// the low half is the bytes handed out from the start (small blocks),
    /// the high half those handed out from the end ([`LARGE`] blocks). Both
    /// only grow.
    state: AtomicU64,
}

/// (bytes from the start, bytes from the end) in one word.
fn pack(bottom: usize, top: usize) -> u64 {
    bottom as u64 | (top as u64) << 32
}

fn unpack(s: u64) -> (usize, usize) {
    (s as u32 as usize, (s >> 32) as usize)
}

impl<const BYTES: usize, const PREFAULT: usize> Arena<BYTES, PREFAULT> {
    pub const fn new() -> Self {
        // Each cursor must fit its half of `state`.
        assert!(BYTES < 1 << 32);
        Arena {
            base: AtomicUsize::new(0),
            state: AtomicU64::new(0),
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
                        BYTES,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                        -1,
                        0,
                    )
                };
                if p != libc::MAP_FAILED {
                    // SAFETY: both ranges lie inside the mapping just made.
                    // No transparent huge pages: a 2 MiB page would be zeroed
                    // on first touch. A kernel without MADV_POPULATE_WRITE
                    // (< 5.14) refuses it; the pages then fault in on demand.
                    unsafe {
                        libc::madvise(p, BYTES, libc::MADV_NOHUGEPAGE);
                        libc::madvise(p, PREFAULT.min(BYTES), libc::MADV_POPULATE_WRITE);
                    }
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

    /// Populate the arena's first `upto` bytes now, in one batch, so the
    /// allocations that follow find their pages ready. The launcher maps only
    /// what it uses before bwrap starts (`PREFAULT`) and calls this once bwrap
    /// is loading: the rest is then zeroed off the run's critical path.
    /// Best effort, like the first batch.
    #[allow(dead_code)] // the helper populates everything it needs at once
    pub fn populate(&self, upto: usize) {
        let Some(b) = self.base() else {
            return;
        };
        let from = PREFAULT.min(BYTES);
        let to = upto.min(BYTES);
        if to > from {
            // SAFETY: [b + from, b + to) lies inside the mapping; populating
            // faults in the pages not yet present, as a write would, and
            // leaves present pages (allocated already) as they are.
            unsafe {
                libc::madvise(
                    (b + from) as *mut libc::c_void,
                    to - from,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }

    fn owns(&self, p: *mut u8) -> bool {
        let b = self.base.load(Ordering::Acquire);
        b != 0 && b != usize::MAX && (p as usize) >= b && (p as usize) < b + BYTES
    }
}

impl<const BYTES: usize, const PREFAULT: usize> Default for Arena<BYTES, PREFAULT> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const BYTES: usize, const PREFAULT: usize> Arena<BYTES, PREFAULT> {
    /// A fresh block from the arena, or None when it is full or unmapped.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        let base = self.base()?;
        let align = layout.align();
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let (bottom, top) = unpack(cur);
            let (start, next) = if layout.size() >= LARGE {
                // Down from the free range's end, aligned down.
                let start = (BYTES - top)
                    .checked_sub(layout.size())
                    .map(|o| (base + o) & !(align - 1))?;
                if start < base + bottom {
                    return None;
                }
                (start, pack(bottom, BYTES - (start - base)))
            } else {
                let start = (base + bottom + align - 1) & !(align - 1);
                let end = start - base + layout.size();
                if end > BYTES - top {
                    return None;
                }
                (start, pack(end, top))
            };
            match self
                .state
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(start as *mut u8),
                Err(now) => cur = now,
            }
        }
    }
}

// SAFETY: `alloc` returns either a fresh, suitably aligned, never-reused
// region inside the arena (bounds checked against BYTES) or memory from
// `System`; `dealloc` forwards only pointers outside the arena to `System`, so
// each allocator only ever frees its own memory. Both cursors only grow, so
// every byte between them is still as the kernel mapped it: zero.
unsafe impl<const BYTES: usize, const PREFAULT: usize> GlobalAlloc for Arena<BYTES, PREFAULT> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(p) => p,
            // SAFETY: forwarded with the caller's valid layout.
            None => unsafe { System.alloc(layout) },
        }
    }

    /// Arena memory is handed out once from an anonymous mapping, so it is
    /// zero already: no memset, and pages nobody writes are never touched
    /// (a 64 KiB zeroed buffer of which a few bytes are used costs nothing).
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(p) => p,
            // SAFETY: forwarded with the caller's valid layout.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: not ours, so it came from System.alloc with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    /// Growing the most recent allocation extends it in place: parsing
    /// grows one Vec or String at a time, and a bump allocator would
    /// otherwise copy it at every doubling and strand the old copy.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.owns(ptr) {
            let base = self.base.load(Ordering::Acquire);
            let end = ptr as usize - base + layout.size();
            let new_end = ptr as usize - base + new_size;
            if new_size <= layout.size() {
                // Shrinking: keep the block. The cursors never go back, so
                // the bytes past it stay zero (see alloc_zeroed).
                return ptr;
            }
            // Only the last small block ends at the bottom cursor.
            let mut cur = self.state.load(Ordering::Relaxed);
            loop {
                let (bottom, top) = unpack(cur);
                if bottom != end || new_end > BYTES - top {
                    break;
                }
                match self.state.compare_exchange_weak(
                    cur,
                    pack(new_end, top),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return ptr,
                    Err(now) => cur = now,
                }
            }
        }
        // SAFETY: the default path: a new block with the caller's (valid)
        // alignment and size, the old contents copied, the old block freed.
        unsafe {
            let new = self.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realloc_extends_the_last_block_in_place_and_moves_others() {
        let a: Arena = Arena::new();
        let l = Layout::from_size_align(16, 8).unwrap();
        // SAFETY: valid layouts; each pointer is used only within its size.
        unsafe {
            let p = a.alloc(l);
            p.write_bytes(7, 16);
            let q = a.realloc(p, l, 4096);
            assert_eq!(p, q, "last block grows in place");
            let l2 = Layout::from_size_align(4096, 8).unwrap();
            let r = a.alloc(l);
            let q2 = a.realloc(q, l2, 8192);
            assert_ne!(q, q2, "not the last block: moved");
            assert!(a.owns(q2) && q2 as usize >= r as usize + 16);
            assert_eq!(std::slice::from_raw_parts(q2, 16), &[7u8; 16]);
            assert_eq!(
                a.realloc(q2, Layout::from_size_align(8192, 8).unwrap(), 8),
                q2
            );
        }
    }

    /// alloc_zeroed skips the memset: safe only because a cursor never goes
    /// back, not even when the last block shrinks.
    #[test]
    fn zeroed_blocks_are_zero_after_a_shrunk_last_block() {
        let a: Arena = Arena::new();
        let l = Layout::from_size_align(256, 8).unwrap();
        // SAFETY: valid layouts; each pointer is used only within its size.
        unsafe {
            let p = a.alloc(l);
            p.write_bytes(0xff, 256);
            assert_eq!(a.realloc(p, l, 8), p);
            let z = a.alloc_zeroed(l);
            assert!(
                z as usize >= p as usize + 256,
                "the shrunk block keeps its bytes"
            );
            assert!(std::slice::from_raw_parts(z, 256).iter().all(|b| *b == 0));
        }
    }

    /// The launcher populates past its first batch while blocks there are
    /// in use: their bytes stay, fresh blocks past them are still zero.
    #[test]
    fn populating_later_keeps_allocated_bytes() {
        let a: Arena<{ 1 << 20 }, 4096> = Arena::new();
        let l = Layout::from_size_align(3 * 4096, 8).unwrap();
        // SAFETY: valid layouts; each pointer is used only within its size.
        unsafe {
            let p = a.alloc(l);
            p.write_bytes(0x5a, 3 * 4096);
            a.populate(64 * 1024);
            // Beyond the mapping: clamped, not a fault.
            a.populate(4 << 20);
            assert!(std::slice::from_raw_parts(p, 3 * 4096)
                .iter()
                .all(|b| *b == 0x5a));
            let z = a.alloc_zeroed(l);
            assert!(a.owns(z));
            assert!(std::slice::from_raw_parts(z, 3 * 4096)
                .iter()
                .all(|b| *b == 0));
        }
    }

    #[test]
    fn aligned_disjoint_and_falls_back_when_full() {
        let a: Arena = Arena::new();
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
        let big = Layout::from_size_align(DEFAULT_BYTES, 8).unwrap();
        // SAFETY: a valid non-zero layout.
        let p = unsafe { a.alloc(big) };
        assert!(!p.is_null() && !a.owns(p));
        // SAFETY: p came from this allocator with layout `big`.
        unsafe { a.dealloc(p, big) };
    }

    /// Large blocks come down from the end, small ones up from the start:
    /// disjoint, each zero when new, and the two meet without overlapping.
    #[test]
    fn large_blocks_come_from_the_end_and_never_meet_small_ones() {
        let a: Arena<{ 256 * 1024 }, 4096> = Arena::new();
        let small = Layout::from_size_align(1000, 8).unwrap();
        let large = Layout::from_size_align(LARGE + 100, 4096).unwrap();
        // SAFETY: valid layouts; each pointer is used only within its size.
        unsafe {
            let s1 = a.alloc(small);
            let l1 = a.alloc_zeroed(large);
            let s2 = a.alloc(small);
            assert!(a.owns(s1) && a.owns(l1) && a.owns(s2));
            assert_eq!(l1 as usize % 4096, 0);
            assert!(
                l1 as usize > s2 as usize,
                "large blocks sit above small ones"
            );
            assert_eq!(s2 as usize, s1 as usize + 1000, "small blocks stay dense");
            assert!(std::slice::from_raw_parts(l1, LARGE + 100)
                .iter()
                .all(|b| *b == 0));
            l1.write_bytes(0xaa, LARGE + 100);
            // The last small block still grows in place, up to the large ones.
            assert_eq!(a.realloc(s2, small, 4000), s2);
            // Fill the gap: every block disjoint, until the arena says no
            // and the system allocator takes over.
            let mut blocks = vec![
                (s1 as usize, 1000),
                (s2 as usize, 4000),
                (l1 as usize, LARGE + 100),
            ];
            loop {
                let p = a.alloc(large);
                if !a.owns(p) {
                    a.dealloc(p, large);
                    break;
                }
                blocks.push((p as usize, LARGE + 100));
            }
            let q = a.alloc(small);
            if a.owns(q) {
                blocks.push((q as usize, 1000));
            }
            blocks.sort();
            for w in blocks.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "overlap: {w:?}");
            }
            assert!(std::slice::from_raw_parts(l1, LARGE + 100)
                .iter()
                .all(|b| *b == 0xaa));
        }
    }
}
