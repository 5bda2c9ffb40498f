// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the physical memory manager (`src/pmm`).

use crate::hwref::{SizeMask, PMM_CHUNKS_DEFAULT, ROOT_CHUNK_SIZE, SZ_128K, SZ_2M, SZ_4K, SZ_64K};
use crate::pmm::stats::Stats;
use crate::pmm::{
    transition, AllocFlags, ChunkId, Event, FreeOutcome, MemType, Pmm, PmmError, State, Zero,
    PAGE_ROOTS,
};
use crate::std_storage::StdStorage;

pub(crate) type P = Pmm<StdStorage>;

const MAXWELL: SizeMask = SizeMask::from_sizes(SZ_4K | SZ_128K | SZ_2M);
const NONE: AllocFlags = AllocFlags {
    prefer_zeroed: false,
};
const ZEROED: AllocFlags = AllocFlags {
    prefer_zeroed: true,
};

/// A checked manager of `roots` roots at 64 MiB.
pub(crate) fn pmm(roots: u64) -> P {
    let p = P::new(64 << 20, roots * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    p.check().unwrap();
    p
}

pub(crate) fn alloc1(p: &mut P, size: u64, ty: MemType) -> Result<ChunkId, PmmError> {
    let mut out = [ChunkId::new_for_tests(); 1];
    p.alloc(size, ty, NONE, &mut out)?;
    p.check().unwrap();
    Ok(out[0])
}

fn free(p: &mut P, id: ChunkId) {
    assert_eq!(p.free(id, Zero::Dirty), Ok(FreeOutcome::Freed));
    p.check().unwrap();
}

fn count(s: &Stats, state: State, size: u64) -> u64 {
    let l = s.sizes.iter().position(|&x| x == size).unwrap();
    s.chunks[state.index()][l]
}

#[test]
fn new_validates_geometry() {
    let m = PMM_CHUNKS_DEFAULT;
    assert_eq!(
        P::new(SZ_64K, 4 * SZ_2M, m).err(),
        Some(PmmError::Misaligned)
    );
    assert_eq!(P::new(0, SZ_2M - 1, m).err(), Some(PmmError::Empty));
    assert_eq!(P::new(0, u64::MAX, m).err(), Some(PmmError::TooLarge));
    assert_eq!(
        P::new(u64::MAX - SZ_2M * 2 + 1, SZ_2M * 4, m).err(),
        Some(PmmError::TooLarge)
    );
    assert_eq!(P::new(1 << 63, 1 << 63, m).err(), Some(PmmError::TooLarge));
    assert_eq!(
        P::new(0, SZ_2M, SizeMask::from_sizes(0)).err(),
        Some(PmmError::BadSizes)
    );
    let no_root = SizeMask::from_sizes(SZ_4K | SZ_64K);
    assert_eq!(P::new(0, SZ_2M, no_root).err(), Some(PmmError::BadSizes));
    let tiny = SizeMask::from_sizes(1024 | SZ_64K | SZ_2M);
    assert_eq!(P::new(0, SZ_2M, tiny).err(), Some(PmmError::BadSizes));
    let huge = SizeMask::from_sizes(SZ_4K | SZ_2M | (SZ_2M << 1));
    assert_eq!(P::new(0, SZ_2M, huge).err(), Some(PmmError::BadSizes));
    let five = SizeMask::from_sizes(SZ_4K | (SZ_4K << 1) | SZ_64K | SZ_128K | SZ_2M);
    assert_eq!(P::new(0, SZ_2M, five).err(), Some(PmmError::BadSizes));
    // Rounded down to whole roots.
    let p = P::new(SZ_2M * 3, SZ_2M * 5 + SZ_64K, m).unwrap();
    assert_eq!(p.root_count(), 5);
    assert_eq!(p.total_bytes(), 5 * SZ_2M);
    assert_eq!(p.stats().free_bytes, 5 * SZ_2M);
    assert_eq!(p.chunk_sizes(), &[SZ_4K, SZ_64K, SZ_2M]);
}

#[test]
fn transition_table_is_exactly_the_documented_one() {
    use Event as E;
    use State as S;
    let legal = [
        (S::Free, E::Claim, S::TempPinned),
        (S::Free, E::ClaimOwned, S::Allocated),
        (S::Free, E::Split, S::IsSplit),
        (S::TempPinned, E::Unpin, S::Allocated),
        (S::TempPinned, E::Free, S::Free),
        (S::Allocated, E::Split, S::IsSplit),
        (S::Allocated, E::Free, S::Free),
        (S::IsSplit, E::MergeFree, S::Free),
        (S::IsSplit, E::MergeAllocated, S::Allocated),
        (S::Allocated, E::Migrate, S::TempPinned),
    ];
    let mut ok = 0;
    for from in State::ALL {
        for ev in Event::ALL {
            match legal.iter().find(|(f, e, _)| *f == from && *e == ev) {
                Some((_, _, to)) => {
                    assert_eq!(transition(from, ev), Ok(*to));
                    ok += 1;
                }
                None => assert_eq!(
                    transition(from, ev),
                    Err(PmmError::IllegalTransition { from, event: ev })
                ),
            }
        }
    }
    assert_eq!(ok, legal.len());
}

#[test]
fn lazy_split_one_step_at_a_time_and_eager_merge() {
    let mut p = pmm(2);
    let meta0 = p.metadata_bytes();
    let a = alloc1(&mut p, SZ_4K, MemType::User).unwrap();
    assert_eq!(p.state(a), Ok(State::TempPinned));
    assert_eq!(p.addr(a), Ok(64 << 20));
    assert_eq!(p.size(a), Ok(SZ_4K));
    let s = p.stats();
    assert_eq!(count(&s, State::IsSplit, SZ_2M), 1);
    assert_eq!(count(&s, State::Free, SZ_2M), 1);
    assert_eq!(count(&s, State::IsSplit, SZ_64K), 1);
    assert_eq!(count(&s, State::Free, SZ_64K), 31);
    assert_eq!(count(&s, State::Free, SZ_4K), 15);
    assert_eq!(count(&s, State::TempPinned, SZ_4K), 1);
    assert_eq!(s.free_bytes, 2 * SZ_2M - SZ_4K);
    assert!(p.metadata_bytes() > meta0);
    // The next 4K comes from the same 64K parent, no new split.
    let b = alloc1(&mut p, SZ_4K, MemType::User).unwrap();
    assert_eq!(p.addr(b), Ok((64 << 20) + SZ_4K));
    assert_eq!(count(&p.stats(), State::IsSplit, SZ_64K), 1);
    free(&mut p, a);
    free(&mut p, b);
    let s = p.stats();
    assert_eq!(count(&s, State::Free, SZ_2M), 2);
    assert_eq!(count(&s, State::IsSplit, SZ_2M), 0);
    assert_eq!(s.free_bytes, 2 * SZ_2M);
    assert_eq!(
        p.metadata_bytes(),
        meta0 + 2 * P::ROOT_BYTES + P::DIR_ENTRY_BYTES,
        "sub-chunk table freed on merge; the touched page (both roots) keeps its metadata"
    );
    assert_eq!(p.state(a), Err(PmmError::InvalidId), "stale id after merge");
}

#[test]
fn maxwell_sizes_split_through_128k() {
    let mut p = P::new(0, SZ_2M, MAXWELL).unwrap();
    let a = alloc1(&mut p, SZ_4K, MemType::Kernel).unwrap();
    let s = p.stats();
    assert_eq!(count(&s, State::Free, SZ_128K), 15);
    assert_eq!(count(&s, State::Free, SZ_4K), 31);
    assert_eq!(
        alloc1(&mut p, SZ_64K, MemType::Kernel),
        Err(PmmError::BadSize)
    );
    free(&mut p, a);
    assert_eq!(p.stats().free_bytes, SZ_2M);
}

#[test]
fn user_and_kernel_states_and_unpin() {
    let mut p = pmm(4);
    let u = alloc1(&mut p, SZ_64K, MemType::User).unwrap();
    let k = alloc1(&mut p, SZ_64K, MemType::Kernel).unwrap();
    assert_eq!(p.state(u), Ok(State::TempPinned));
    assert_eq!(p.state(k), Ok(State::Allocated));
    assert_ne!(
        u.root(),
        k.root(),
        "user and kernel chunks never share a root"
    );
    assert_eq!(
        p.p2p_pin(u),
        Err(PmmError::NotAllocated),
        "temp-pinned is not owned"
    );
    assert_eq!(
        p.split(u).err(),
        Some(PmmError::IllegalTransition {
            from: State::TempPinned,
            event: Event::Split
        })
    );
    p.unpin_allocated(u).unwrap();
    assert_eq!(p.state(u), Ok(State::Allocated));
    assert_eq!(
        p.unpin_allocated(u),
        Err(PmmError::IllegalTransition {
            from: State::Allocated,
            event: Event::Unpin
        })
    );
    let k2 = alloc1(&mut p, SZ_4K, MemType::Kernel).unwrap();
    assert_eq!(k2.root(), k.root(), "kernel 4K comes from the kernel root");
    p.check().unwrap();
}

#[test]
fn illegal_frees_are_errors_and_change_nothing() {
    let mut p = pmm(2);
    let a = alloc1(&mut p, SZ_4K, MemType::Kernel).unwrap();
    let before = p.stats();
    let root = p.lookup(p.addr(a).unwrap() & !(SZ_2M - 1)).unwrap();
    assert_eq!(root, a, "lookup finds the unsplit chunk holding an address");
    let parent_2m = ChunkId::new_root_for_tests(a.root());
    assert_eq!(
        p.free(parent_2m, Zero::Dirty),
        Err(PmmError::IllegalTransition {
            from: State::IsSplit,
            event: Event::Free
        })
    );
    let free_root = ChunkId::new_root_for_tests(a.root() + 1);
    assert_eq!(
        p.free(free_root, Zero::Dirty),
        Err(PmmError::IllegalTransition {
            from: State::Free,
            event: Event::Free
        })
    );
    assert_eq!(
        p.free(ChunkId::new_root_for_tests(99), Zero::Dirty),
        Err(PmmError::InvalidId)
    );
    assert_eq!(p.stats(), before);
    p.check().unwrap();
    free(&mut p, a);
    assert_eq!(
        p.free(a, Zero::Dirty),
        Err(PmmError::InvalidId),
        "double free"
    );
}

#[test]
fn zeroed_preference_and_merge_keeps_zero_only_if_all_children_zero() {
    let mut p = pmm(2);
    let a = alloc1(&mut p, SZ_2M, MemType::Kernel).unwrap();
    assert!(!p.is_zeroed(a).unwrap());
    assert_eq!(p.free(a, Zero::Zeroed), Ok(FreeOutcome::Freed));
    assert_eq!(p.stats().zeroed_free_bytes, SZ_2M);
    // Without the flag, the dirty root is used first, keeping the zeroed one.
    let d = alloc1(&mut p, SZ_2M, MemType::Kernel).unwrap();
    assert!(!p.is_zeroed(d).unwrap());
    free(&mut p, d);
    let mut out = [ChunkId::new_for_tests(); 1];
    p.alloc(SZ_2M, MemType::Kernel, ZEROED, &mut out).unwrap();
    assert!(p.is_zeroed(out[0]).unwrap());
    // Split of a zeroed root gives zeroed children; freeing one dirty makes the merge dirty.
    let c = p.split(out[0]).unwrap();
    assert!(p.is_zeroed(c).unwrap());
    for k in 0..p
        .children(ChunkId::new_root_for_tests(out[0].root()))
        .unwrap()
    {
        let child = p
            .nth_child(ChunkId::new_root_for_tests(out[0].root()), k)
            .unwrap();
        let z = if k == 7 { Zero::Dirty } else { Zero::Zeroed };
        assert_eq!(p.free(child, z), Ok(FreeOutcome::Freed));
    }
    p.check().unwrap();
    assert_eq!(p.stats().zeroed_free_bytes, 0);
    assert_eq!(p.stats().free_bytes, 2 * SZ_2M);
}

#[test]
fn n_chunks_all_or_nothing() {
    let mut p = pmm(2);
    let keep = alloc1(&mut p, SZ_64K, MemType::User).unwrap();
    let before = p.stats();
    let meta = p.metadata_bytes();
    let mut out = [ChunkId::new_for_tests(); 33];
    assert_eq!(
        p.alloc(SZ_64K, MemType::Kernel, NONE, &mut out),
        Err(PmmError::NoSpace)
    );
    p.check().unwrap();
    let after = p.stats();
    assert_eq!(after.alloc_failures, 1);
    // The second root was touched with the first (one page holds both): the failed
    // allocation adds no metadata.
    assert_eq!(
        Stats {
            alloc_failures: 0,
            ..after
        },
        before
    );
    assert_eq!(p.metadata_bytes(), meta);
    let mut out = [ChunkId::new_for_tests(); 32];
    p.alloc(SZ_64K, MemType::Kernel, NONE, &mut out).unwrap();
    p.check().unwrap();
    assert_eq!(p.stats().free_bytes, SZ_2M - SZ_64K);
    let mut two = [ChunkId::new_for_tests(); 2];
    assert_eq!(
        p.alloc(SZ_4K, MemType::Kernel, NONE, &mut two),
        Err(PmmError::NoSpace)
    );
    assert_eq!(
        p.alloc(SZ_128K, MemType::Kernel, NONE, &mut two),
        Err(PmmError::BadSize)
    );
    p.free(keep, Zero::Dirty).unwrap();
    p.check().unwrap();
}

#[test]
fn contiguous_runs_of_roots() {
    let mut p = pmm(8);
    let a = alloc1(&mut p, SZ_4K, MemType::User).unwrap();
    assert_eq!(a.root(), 0);
    let run = p.alloc_contiguous(5 * SZ_2M - 1, MemType::User).unwrap();
    p.check().unwrap();
    assert_eq!(run.root(), 1);
    assert_eq!(p.size(run), Ok(5 * SZ_2M));
    assert_eq!(p.addr(run), Ok((64 << 20) + SZ_2M));
    assert_eq!(
        p.lookup(p.addr(run).unwrap() + 3 * SZ_2M + 5),
        Ok(run),
        "inside the run"
    );
    let s = p.stats();
    assert_eq!(s.temp_pinned_bytes, 5 * SZ_2M + SZ_4K);
    assert_eq!(s.largest_free, 2 * SZ_2M);
    assert_eq!(
        p.alloc_contiguous(3 * SZ_2M, MemType::User),
        Err(PmmError::NoSpace)
    );
    assert_eq!(p.alloc_contiguous(0, MemType::User), Err(PmmError::BadSize));
    let tail = ChunkId::new_root_for_tests(3);
    assert_eq!(p.free(tail, Zero::Dirty), Err(PmmError::NotHead));
    assert_eq!(p.unpin_allocated(tail), Err(PmmError::NotHead));
    assert_eq!(p.split(run).err(), Some(PmmError::BadSize));
    p.unpin_allocated(run).unwrap();
    p.check().unwrap();
    assert_eq!(p.stats().allocated_bytes, 5 * SZ_2M);
    assert_eq!(p.p2p_pin(run), Ok(1));
    assert_eq!(
        p.free(run, Zero::Dirty),
        Ok(FreeOutcome::Revoke { pins: 1 })
    );
    assert_eq!(p.p2p_unpin(run), Ok(0));
    free(&mut p, run);
    assert_eq!(p.stats().largest_free, 7 * SZ_2M);
    free(&mut p, a);
    assert_eq!(p.stats().largest_free, 8 * SZ_2M);
}

#[test]
fn p2p_pins_block_the_free_until_revoked() {
    let mut p = pmm(1);
    let a = alloc1(&mut p, SZ_64K, MemType::Kernel).unwrap();
    assert_eq!(p.p2p_unpin(a), Err(PmmError::NotPinned));
    assert_eq!(p.p2p_pin(a), Ok(1));
    assert_eq!(p.p2p_pin(a), Ok(2));
    assert_eq!(p.split(a).err(), Some(PmmError::Pinned));
    let before = p.stats();
    // 1. The free is refused; the caller must run the revocation hook.
    assert_eq!(p.free(a, Zero::Dirty), Ok(FreeOutcome::Revoke { pins: 2 }));
    assert_eq!(p.stats(), before, "nothing returned to a free list");
    assert_eq!(p.state(a), Ok(State::Allocated));
    p.check().unwrap();
    // 2. No new pins while revoking; the hook drops the existing ones.
    assert_eq!(p.p2p_pin(a), Err(PmmError::Revoking));
    assert_eq!(p.split(a).err(), Some(PmmError::Pinned));
    assert_eq!(p.p2p_unpin(a), Ok(1));
    assert_eq!(p.free(a, Zero::Dirty), Ok(FreeOutcome::Revoke { pins: 1 }));
    assert_eq!(p.p2p_unpin(a), Ok(0));
    assert_eq!(p.split(a).err(), Some(PmmError::Revoking));
    // 3. The free completes.
    free(&mut p, a);
    assert_eq!(p.stats().free_bytes, SZ_2M);
    let b = alloc1(&mut p, SZ_64K, MemType::Kernel).unwrap();
    assert_eq!(p.p2p_pin(b), Ok(1), "a reused chunk is not revoking");
}

#[test]
fn owner_split_and_merge() {
    let mut p = pmm(1);
    let r = alloc1(&mut p, SZ_2M, MemType::Kernel).unwrap();
    let first = p.split(r).unwrap();
    p.check().unwrap();
    assert_eq!(p.children(r), Ok(32));
    assert_eq!(p.state(first), Ok(State::Allocated));
    assert_eq!(count(&p.stats(), State::Allocated, SZ_64K), 32);
    let c5 = p.nth_child(r, 5).unwrap();
    assert_eq!(p.addr(c5), Ok((64 << 20) + 5 * SZ_64K));
    assert_eq!(p.nth_child(r, 32), Err(PmmError::InvalidId));
    let g = p.split(c5).unwrap();
    p.check().unwrap();
    assert_eq!(
        p.merge(r),
        Err(PmmError::NotAllocated),
        "a grandchild level is split"
    );
    p.merge(c5).unwrap();
    p.check().unwrap();
    assert_eq!(p.state(g), Err(PmmError::InvalidId));
    p.p2p_pin(c5).unwrap();
    assert_eq!(p.merge(r), Err(PmmError::Pinned));
    p.p2p_unpin(c5).unwrap();
    p.merge(r).unwrap();
    p.check().unwrap();
    assert_eq!(p.state(r), Ok(State::Allocated));
    assert_eq!(
        p.merge(r),
        Err(PmmError::IllegalTransition {
            from: State::Allocated,
            event: Event::MergeAllocated
        })
    );
    // Children freed one by one merge back into a free root.
    p.split(r).unwrap();
    for k in 0..32 {
        let c = p.nth_child(r, k).unwrap();
        free(&mut p, c);
    }
    assert_eq!(p.state(r), Ok(State::Free));
    assert_eq!(p.stats().free_bytes, SZ_2M);
    assert_eq!(p.split(r).err(), Some(PmmError::NotAllocated));
}

#[test]
fn recycled_child_groups() {
    // Split several 64K chunks to 4K, free them in another order, and split again: the slots
    // of merged groups are reused and the table does not grow.
    let mut p = pmm(1);
    let mut out = vec![ChunkId::new_for_tests(); 16 * 4];
    p.alloc(SZ_4K, MemType::Kernel, NONE, &mut out).unwrap();
    let big = p.metadata_bytes();
    for &id in out[16..32].iter() {
        free(&mut p, id);
    }
    let mut again = vec![ChunkId::new_for_tests(); 16];
    p.alloc(SZ_4K, MemType::Kernel, NONE, &mut again).unwrap();
    p.check().unwrap();
    assert_eq!(p.metadata_bytes(), big);
    for &id in out[..16].iter().chain(out[32..].iter()).chain(again.iter()) {
        free(&mut p, id);
    }
    assert_eq!(p.stats().free_bytes, SZ_2M);
}

#[test]
fn stats_and_map_rendering() {
    let mut p = pmm(70);
    let a = alloc1(&mut p, SZ_2M, MemType::Kernel).unwrap();
    let _b = alloc1(&mut p, SZ_2M, MemType::User).unwrap();
    let c = alloc1(&mut p, SZ_4K, MemType::User).unwrap();
    p.p2p_pin(a).unwrap();
    let _run = p.alloc_contiguous(2 * SZ_2M, MemType::Kernel).unwrap();
    let s = p.stats();
    let text = s.to_string();
    assert!(text.contains("roots: 70 (146800640 bytes)"), "{text}");
    assert!(
        text.contains(&format!("free_bytes: {}", 65 * SZ_2M + SZ_2M - SZ_4K)),
        "{text}"
    );
    assert!(text.contains("largest_free: 136314880"), "{text}");
    assert!(text.contains("fragmentation: 1.6%"), "{text}");
    assert!(
        text.contains("    2M           65            3            1            1"),
        "{text}"
    );
    let map = p.map().to_string();
    let lines: Vec<&str> = map.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], format!("0x000004000000 XPSCC{}", ".".repeat(59)));
    assert_eq!(lines[1], format!("0x00000c000000 {}", ".".repeat(6)));
    free(&mut p, c);
    assert_eq!(s.fragmentation_permille(), 16);
}

#[test]
fn fragmentation_index_definition() {
    let mut p = pmm(1);
    assert_eq!(p.stats().fragmentation_permille(), 0);
    let mut all = vec![ChunkId::new_for_tests(); 512];
    p.alloc(SZ_4K, MemType::Kernel, NONE, &mut all).unwrap();
    let s = p.stats();
    assert_eq!(
        (s.free_bytes, s.largest_free, s.fragmentation_permille()),
        (0, 0, 0)
    );
    for &id in all.iter().step_by(2) {
        free(&mut p, id);
    }
    let s = p.stats();
    assert_eq!(s.free_bytes, SZ_2M / 2);
    assert_eq!(s.largest_free, SZ_4K);
    assert_eq!(
        s.fragmentation_permille(),
        1000 - (SZ_4K * 1000 / (SZ_2M / 2))
    );
}

#[test]
fn root_metadata_budget() {
    // One unsplit root costs at most 64 bytes (also a compile-time assertion in the core).
    const { assert!(P::ROOT_BYTES <= 64) };
    // Metadata is lazy: a new manager has none, and a root gets its 64 bytes when first
    // touched, with the other roots of its page (and the directory of pages, the first time).
    let page = PAGE_ROOTS as usize;
    let mut p = pmm(1024);
    assert_eq!(p.metadata_bytes(), 0);
    let a = alloc1(&mut p, SZ_2M, MemType::User).unwrap();
    let dir = 2 * P::DIR_ENTRY_BYTES;
    assert_eq!(p.metadata_bytes(), dir + page * P::ROOT_BYTES);
    let base = p.addr(a).unwrap();
    let near = p.alloc_at(base + 99 * SZ_2M, SZ_2M, MemType::User).unwrap();
    assert_eq!(p.metadata_bytes(), dir + page * P::ROOT_BYTES);
    let far = p
        .alloc_at(base + 600 * SZ_2M, SZ_2M, MemType::User)
        .unwrap();
    assert_eq!(p.metadata_bytes(), dir + 2 * page * P::ROOT_BYTES);
    p.check().unwrap();
    free(&mut p, far);
    free(&mut p, near);
    free(&mut p, a);
    assert_eq!(p.metadata_bytes(), dir + 2 * page * P::ROOT_BYTES);
    assert_eq!(p.largest_free(), 1024 * SZ_2M);
    p.check().unwrap();
    assert_eq!(ROOT_CHUNK_SIZE, SZ_2M);
}

/// A contiguous run is zero only if every root of it is: a dirty root in the middle must not
/// hide behind a zeroed first root (memory would reach its next owner unscrubbed).
#[test]
fn contiguous_run_is_zeroed_only_if_every_root_is() {
    let mut p = pmm(4);
    let a = alloc1(&mut p, SZ_2M, MemType::User).unwrap();
    let b = alloc1(&mut p, SZ_2M, MemType::User).unwrap();
    let c = alloc1(&mut p, SZ_2M, MemType::User).unwrap();
    p.unpin_allocated(a).unwrap();
    p.unpin_allocated(b).unwrap();
    p.unpin_allocated(c).unwrap();
    assert_eq!(p.free(a, Zero::Zeroed), Ok(FreeOutcome::Freed));
    assert_eq!(p.free(b, Zero::Dirty), Ok(FreeOutcome::Freed));
    assert_eq!(p.free(c, Zero::Zeroed), Ok(FreeOutcome::Freed));
    let run = p.alloc_contiguous(3 * SZ_2M, MemType::User).unwrap();
    assert_eq!(p.addr(run).unwrap(), p.addr(a).unwrap());
    assert_eq!(p.is_zeroed(run), Ok(false));
    p.unpin_allocated(run).unwrap();
    assert_eq!(p.free(run, Zero::Zeroed), Ok(FreeOutcome::Freed));
    let run = p.alloc_contiguous(3 * SZ_2M, MemType::User).unwrap();
    assert_eq!(p.is_zeroed(run), Ok(true));
    p.check().unwrap();
}

/// `sort_by_addr` puts roots, a buffer's tail of 64 KiB chunks (keyed once each, up to 32) and
/// longer or mixed lists (keyed at each comparison) into address order, whatever order the free
/// lists handed them out in; an identifier of no chunk goes last.
#[test]
fn sort_by_addr_orders_roots_tails_and_mixed_lists() {
    let mut p = pmm(64);
    // Churn first, so that the free lists no longer hand chunks out in address order.
    let mut ids = Vec::new();
    for i in 0..200u64 {
        let size = if i % 5 == 0 { SZ_2M } else { SZ_64K };
        ids.push(alloc1(&mut p, size, MemType::Kernel).unwrap());
    }
    for id in ids.iter().skip(1).step_by(3) {
        free(&mut p, *id);
    }
    let mut left: Vec<ChunkId> = ids
        .iter()
        .copied()
        .enumerate()
        .filter(|(i, _)| i % 3 != 1)
        .map(|(_, id)| id)
        .collect();
    let sorted = |p: &P, v: &[ChunkId]| {
        v.windows(2)
            .all(|w| p.addr(w[0]).unwrap() < p.addr(w[1]).unwrap())
    };
    let roots: Vec<ChunkId> = left
        .iter()
        .copied()
        .filter(|id| p.size(*id) == Ok(SZ_2M))
        .collect();
    let subs: Vec<ChunkId> = left
        .iter()
        .copied()
        .filter(|id| p.size(*id) == Ok(SZ_64K))
        .collect();
    for mut v in [
        roots.iter().rev().copied().collect::<Vec<_>>(),
        subs.iter().take(31).rev().copied().collect(),
        subs.iter().take(32).rev().copied().collect(),
        subs.iter().take(33).rev().copied().collect(),
    ] {
        assert!(v.len() > 1 && !sorted(&p, &v));
        p.sort_by_addr(&mut v);
        assert!(sorted(&p, &v), "{v:?}");
    }
    left.reverse();
    p.sort_by_addr(&mut left);
    assert!(sorted(&p, &left));
    let mut with_nil = vec![ChunkId::NIL, subs[1], subs[0]];
    p.sort_by_addr(&mut with_nil);
    assert_eq!(with_nil[2], ChunkId::NIL);
    assert!(sorted(&p, &with_nil[..2]));
}
