// SPDX-License-Identifier: GPL-2.0

//! Tests of the memory manager's root table (`src/pmm/roots.rs`): metadata is created for the
//! region touched, a page of roots at a time, not for every root below it.

use crate::hwref::{PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K};
use crate::pmm::{AllocFlags, ChunkId, FreeOutcome, MemType, PmmError, State, Zero, PAGE_ROOTS};
use crate::pmm_tests::P;

const TIB: u64 = 1 << 40;
/// Roots of a 1 TiB manager.
const TIB_ROOTS: u64 = TIB / SZ_2M;
const PAGE: u64 = PAGE_ROOTS as u64;
/// Metadata of one page of roots.
const PAGE_BYTES: usize = PAGE_ROOTS as usize * P::ROOT_BYTES;
/// The root level of the default sizes (4K, 64K, 2M).
const TOP: usize = 2;

fn free(p: &mut P, id: ChunkId) {
    assert_eq!(p.free(id, Zero::Dirty), Ok(FreeOutcome::Freed));
    p.check().unwrap();
}

/// Free roots, and roots in `state`, as the manager counts them.
fn roots_in(p: &P, state: State) -> u64 {
    p.counts()[state.index()][TOP]
}

fn alloc(p: &mut P, size: u64, ty: MemType, n: usize) -> Result<Vec<ChunkId>, PmmError> {
    let mut out = vec![ChunkId::new_for_tests(); n];
    p.alloc(size, ty, AllocFlags::default(), &mut out)?;
    p.check().unwrap();
    Ok(out)
}

#[test]
fn top_alloc_at_of_1tib_touches_one_page() {
    let mut p = P::new(0, TIB, PMM_CHUNKS_DEFAULT).unwrap();
    assert_eq!(p.metadata_bytes(), 0);
    assert_eq!(p.untouched_roots(), TIB_ROOTS);
    let top = p.alloc_at(TIB - SZ_2M, SZ_2M, MemType::User).unwrap();
    // One page of 512 roots and the directory (one entry per page), not 524288 roots.
    let dir = (TIB_ROOTS / PAGE) as usize * P::DIR_ENTRY_BYTES;
    assert_eq!(p.metadata_bytes(), dir + PAGE_BYTES);
    assert!(p.metadata_bytes() < 128 << 10, "{}", p.metadata_bytes());
    assert_eq!(p.untouched_roots(), TIB_ROOTS - PAGE);
    assert_eq!(roots_in(&p, State::Free), TIB_ROOTS - 1);
    assert_eq!(roots_in(&p, State::TempPinned), 1);
    let s = p.stats();
    assert_eq!(s.free_bytes, TIB - SZ_2M);
    assert_eq!(s.largest_free, TIB - SZ_2M);
    p.check().unwrap();
    // Touched free roots come before untouched ones, lowest first: the top page's first root.
    let next = alloc(&mut p, SZ_2M, MemType::User, 1).unwrap()[0];
    assert_eq!(p.addr(next), Ok(TIB - PAGE * SZ_2M));
    assert_eq!(p.untouched_roots(), TIB_ROOTS - PAGE);
    free(&mut p, next);
    free(&mut p, top);
    // Pages are never freed.
    assert_eq!(p.metadata_bytes(), dir + PAGE_BYTES);
    assert_eq!(roots_in(&p, State::Free), TIB_ROOTS);
    assert_eq!(p.stats().largest_free, TIB);
    p.check().unwrap();
}

#[test]
fn far_apart_pages_alloc_and_free() {
    let mut p = P::new(0, TIB, PMM_CHUNKS_DEFAULT).unwrap();
    // The first and last roots of far-apart pages, and roots inside them; sizes and types mixed.
    let places: [(u64, u64, MemType); 9] = [
        (1023 * PAGE + PAGE - 1, SZ_4K, MemType::Kernel),
        (0, SZ_64K, MemType::User),
        (PAGE - 1, SZ_2M, MemType::Kernel),
        (PAGE, SZ_2M, MemType::User),
        (300 * PAGE + 17, SZ_4K, MemType::User),
        (511 * PAGE + PAGE - 1, SZ_64K, MemType::Kernel),
        (512 * PAGE, SZ_4K, MemType::Kernel),
        (1023 * PAGE, SZ_2M, MemType::User),
        (300 * PAGE + 17, SZ_64K, MemType::User),
    ];
    let mut live = vec![];
    let mut pages = std::collections::BTreeSet::new();
    for (i, &(root, size, ty)) in places.iter().enumerate() {
        // A different offset in the root for each, aligned to the size.
        let within = (i as u64 * 3 * SZ_64K) % SZ_2M / size * size;
        let addr = root * SZ_2M + if size == SZ_2M { 0 } else { within };
        let id = p.alloc_at(addr, size, ty).unwrap();
        assert_eq!(p.addr(id), Ok(addr));
        assert_eq!(p.size(id), Ok(size));
        live.push(id);
        pages.insert(root / PAGE);
        p.check().unwrap();
        let touched = pages.len() as u64;
        assert_eq!(p.untouched_roots(), TIB_ROOTS - touched * PAGE);
        let dir = (TIB_ROOTS / PAGE) as usize * P::DIR_ENTRY_BYTES;
        assert!(p.metadata_bytes() >= dir + touched as usize * PAGE_BYTES);
        assert!(p.metadata_bytes() < dir + touched as usize * (PAGE_BYTES + (64 << 10)));
    }
    assert_eq!(pages.len(), 6);
    // The same place twice is refused; the other type is refused in a split root.
    assert_eq!(
        p.alloc_at(PAGE * SZ_2M, SZ_2M, MemType::User),
        Err(PmmError::NoSpace)
    );
    assert_eq!(
        p.alloc_at(
            300 * PAGE * SZ_2M + 17 * SZ_2M + SZ_64K * 31,
            SZ_64K,
            MemType::Kernel
        ),
        Err(PmmError::NoSpace)
    );
    // General allocations take touched free roots before any untouched one.
    let untouched = p.untouched_roots();
    let more = alloc(&mut p, SZ_2M, MemType::Kernel, 4).unwrap();
    assert_eq!(p.untouched_roots(), untouched);
    for &id in &more {
        let r = p.addr(id).unwrap() / SZ_2M;
        assert!(
            pages.contains(&(r / PAGE)),
            "root {r} outside the touched pages"
        );
    }
    live.extend(more);
    for &id in live.iter().rev() {
        free(&mut p, id);
    }
    assert_eq!(roots_in(&p, State::Free), TIB_ROOTS);
    assert_eq!(p.stats().free_bytes, TIB);
    assert_eq!(p.stats().largest_free, TIB);
    assert_eq!(p.untouched_roots(), TIB_ROOTS - 6 * PAGE);
}

#[test]
fn contiguous_runs_touch_the_pages_they_span() {
    // Two whole pages and a last one of 6 roots.
    let total = 2 * PAGE + 6;
    let mut p = P::new(0, total * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let dir = 3 * P::DIR_ENTRY_BYTES;
    // Roots 0..510, then a run of 4 over the boundary of pages 0 and 1.
    let low = alloc(&mut p, SZ_2M, MemType::User, PAGE as usize - 2).unwrap();
    assert_eq!(p.untouched_roots(), total - PAGE);
    let run = p.alloc_contiguous(4 * SZ_2M, MemType::Kernel).unwrap();
    assert_eq!(p.addr(run), Ok((PAGE - 2) * SZ_2M));
    assert_eq!(p.size(run), Ok(4 * SZ_2M));
    assert_eq!(p.untouched_roots(), total - 2 * PAGE);
    assert_eq!(p.metadata_bytes(), dir + 2 * PAGE_BYTES);
    p.check().unwrap();
    // The last root, in the short last page: that page holds only the roots that exist.
    let last = p
        .alloc_at((total - 1) * SZ_2M, SZ_2M, MemType::User)
        .unwrap();
    assert_eq!(p.untouched_roots(), 0);
    assert_eq!(p.metadata_bytes(), dir + total as usize * P::ROOT_BYTES);
    p.check().unwrap();
    // No room for a run of more than the 510 free roots of page 1 and the 5 of page 2.
    let free_run = PAGE - 2 + 5;
    assert_eq!(
        p.alloc_contiguous((free_run + 1) * SZ_2M, MemType::User),
        Err(PmmError::NoSpace)
    );
    let big = p.alloc_contiguous(free_run * SZ_2M, MemType::User).unwrap();
    assert_eq!(p.addr(big), Ok((PAGE + 2) * SZ_2M));
    p.check().unwrap();
    free(&mut p, big);
    free(&mut p, last);
    free(&mut p, run);
    for id in low {
        free(&mut p, id);
    }
    assert_eq!(p.stats().largest_free, total * SZ_2M);
}

#[test]
fn contiguous_run_over_untouched_pages() {
    let total = 2 * PAGE + 6;
    let mut p = P::new(0, total * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let first = p.alloc_at(0, SZ_64K, MemType::User).unwrap();
    assert_eq!(p.untouched_roots(), total - PAGE);
    // Roots 1.. of page 0, and every root of the two untouched pages.
    let run = p
        .alloc_contiguous((total - 1) * SZ_2M, MemType::User)
        .unwrap();
    assert_eq!(p.addr(run), Ok(SZ_2M));
    assert_eq!(p.untouched_roots(), 0);
    assert_eq!(p.stats().free_bytes, SZ_2M - SZ_64K);
    p.check().unwrap();
    free(&mut p, run);
    free(&mut p, first);
    assert_eq!(p.stats().largest_free, total * SZ_2M);
}

#[test]
fn contiguous_run_starting_in_an_untouched_page() {
    let total = 2 * PAGE + 6;
    let mut p = P::new(0, total * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    // Page 0 full: the lowest run of 2 is the first two roots of page 1, untouched.
    let low = alloc(&mut p, SZ_2M, MemType::Kernel, PAGE as usize).unwrap();
    assert_eq!(p.untouched_roots(), total - PAGE);
    let run = p.alloc_contiguous(2 * SZ_2M, MemType::User).unwrap();
    assert_eq!(p.addr(run), Ok(PAGE * SZ_2M));
    assert_eq!(p.untouched_roots(), total - 2 * PAGE);
    p.check().unwrap();
    // Root 511 freed: its neighbour 512 is taken, so the lowest run of 2 is 514 and 515, in
    // page 1, touched now, and a run of 1 takes 511.
    free(&mut p, low[PAGE as usize - 1]);
    let next = p.alloc_contiguous(2 * SZ_2M, MemType::User).unwrap();
    assert_eq!(p.addr(next), Ok((PAGE + 2) * SZ_2M));
    let one = p.alloc_contiguous(SZ_2M, MemType::User).unwrap();
    assert_eq!(p.addr(one), Ok((PAGE - 1) * SZ_2M));
    p.check().unwrap();
}

#[test]
fn touching_a_page_keeps_address_order() {
    // Allocation hands roots out lowest address first, page after page, as a flat table did.
    let total = 2 * PAGE + 6;
    let mut p = P::new(0, total * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let all = alloc(&mut p, SZ_2M, MemType::User, total as usize).unwrap();
    for (i, &id) in all.iter().enumerate() {
        assert_eq!(p.addr(id), Ok(i as u64 * SZ_2M));
    }
    assert_eq!(roots_in(&p, State::Free), 0);
    assert_eq!(
        alloc(&mut p, SZ_4K, MemType::User, 1),
        Err(PmmError::NoSpace)
    );
    for id in all {
        free(&mut p, id);
    }
    // 4 KiB chunks too: root 0's, then root 1's.
    let mut p = P::new(0, total * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let small = alloc(&mut p, SZ_4K, MemType::Kernel, 513).unwrap();
    assert_eq!(p.addr(small[0]), Ok(0));
    assert_eq!(p.addr(small[512]), Ok(SZ_2M));
    for id in small {
        free(&mut p, id);
    }
}
