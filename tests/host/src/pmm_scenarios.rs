// SPDX-License-Identifier: GPL-2.0

//! The kernel GPU buddy allocator's KUnit scenarios (`drivers/gpu/tests/gpu_buddy_test.c`),
//! restated for a 4K/64K/2M chunk manager, and allocation-failure injection.
//!
//! gpu_buddy is a binary buddy allocator with arbitrary orders; the manager here has three chunk
//! sizes and 2 MiB roots, so each scenario keeps the *intent* of its KUnit counterpart; each
//! test says which. Not restated: range-bias allocation (anywhere inside a window; the manager
//! only allocates one chunk at an exact offset), trimming, and the timing-only fragmentation
//! case (see the bench, `examples/pmm_bench.rs`).

use std::cell::Cell;
use std::ops::{Deref, DerefMut};

use crate::hwref::{PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K};
use crate::pmm::stats::Stats;
use crate::pmm::{
    AllocFlags, ChunkId, ChunkVec, FreeOutcome, MemType, OutOfMemory, Pmm, PmmError, State,
    Storage, Zero,
};
use crate::pmm_tests::{alloc1, pmm, P};

const K: MemType = MemType::Kernel;
const NONE: AllocFlags = AllocFlags {
    prefer_zeroed: false,
};

fn alloc_n(p: &mut P, size: u64, n: usize, flags: AllocFlags) -> Result<Vec<ChunkId>, PmmError> {
    let mut out = vec![ChunkId::new_for_tests(); n];
    p.alloc(size, K, flags, &mut out)?;
    p.check().unwrap();
    Ok(out)
}

fn free_all(p: &mut P, ids: &[ChunkId], zero: Zero) {
    for &id in ids {
        assert_eq!(p.free(id, zero), Ok(FreeOutcome::Freed));
    }
    p.check().unwrap();
}

/// Which sizes can be allocated right now (each probe is undone).
fn allocatable(p: &mut P) -> Vec<u64> {
    let sizes = p.chunk_sizes().to_vec();
    sizes
        .into_iter()
        .filter(|&s| match alloc1(p, s, K) {
            Ok(id) => {
                p.free(id, Zero::Dirty).unwrap();
                true
            }
            Err(e) => {
                assert_eq!(e, PmmError::NoSpace);
                false
            }
        })
        .collect()
}

/// `alloc_limit`: the largest manager is accepted and its whole memory is one allocation.
/// Here: 1 TiB (UVM's `UVM_GPU_MAX_PHYS_MEM`, 524288 roots) initialises, is allocated as one
/// contiguous run, then nothing more fits; above the id space (8 TiB) `new` refuses.
#[test]
fn limit() {
    let mut p = P::new(0, 1 << 40, PMM_CHUNKS_DEFAULT).unwrap();
    assert_eq!(p.root_count(), 524_288);
    let all = p.alloc_contiguous(1 << 40, K).unwrap();
    assert_eq!(p.size(all), Ok(1 << 40));
    assert_eq!(p.stats().free_bytes, 0);
    assert_eq!(alloc1(&mut p, SZ_4K, K), Err(PmmError::NoSpace));
    assert_eq!(p.free(all, Zero::Dirty), Ok(FreeOutcome::Freed));
    assert_eq!(p.stats().largest_free, 1 << 40);
    assert_eq!(
        P::new(0, (8 << 40) + SZ_2M, PMM_CHUNKS_DEFAULT).err(),
        Some(PmmError::TooLarge)
    );
}

/// `alloc_optimistic`: memory sized for exactly one block of each order; all of them fit and
/// the next request fails. Here: 2 roots hold exactly 1 × 2M + 31 × 64K + 16 × 4K (the smaller
/// chunks fill the second root through both split levels), then every size fails.
#[test]
fn optimistic() {
    let mut p = pmm(2);
    let big = alloc_n(&mut p, SZ_2M, 1, NONE).unwrap();
    let mid = alloc_n(&mut p, SZ_64K, 31, NONE).unwrap();
    let small = alloc_n(&mut p, SZ_4K, 16, NONE).unwrap();
    assert_eq!(p.stats().free_bytes, 0);
    assert!(allocatable(&mut p).is_empty());
    free_all(&mut p, &[big, mid, small].concat(), Zero::Dirty);
    assert_eq!(p.stats().largest_free, 2 * SZ_2M);
}

/// `alloc_pessimistic`: everything allocated in the smallest blocks, so every larger order
/// fails; freeing them re-enables each larger order in turn and ends with one whole block.
/// Here: 2 roots of 4K chunks; freeing one 64K's worth re-enables 64K (not 2M); freeing one
/// root's worth re-enables 2M; freeing all merges back to 2 free roots.
#[test]
fn pessimistic() {
    let mut p = pmm(2);
    let all = alloc_n(&mut p, SZ_4K, 1024, NONE).unwrap();
    assert!(allocatable(&mut p).is_empty());
    free_all(&mut p, &all[..15], Zero::Dirty);
    assert_eq!(allocatable(&mut p), vec![SZ_4K]);
    free_all(&mut p, &all[15..16], Zero::Dirty);
    assert_eq!(allocatable(&mut p), vec![SZ_4K, SZ_64K]);
    free_all(&mut p, &all[16..511], Zero::Dirty);
    assert_eq!(allocatable(&mut p), vec![SZ_4K, SZ_64K]);
    free_all(&mut p, &all[511..512], Zero::Dirty);
    assert_eq!(allocatable(&mut p), vec![SZ_4K, SZ_64K, SZ_2M]);
    free_all(&mut p, &all[512..], Zero::Dirty);
    let s = p.stats();
    assert_eq!(
        (s.largest_free, s.chunks[State::Free.index()][2]),
        (2 * SZ_2M, 2)
    );
}

/// `alloc_pathological`: fragment memory so half of it is free in holes; only the smallest
/// order stays allocatable. Here: one root of 4K chunks with every other one freed: 1 MiB
/// free, no 64K or 2M possible, fragmentation index 997 per mille; freeing the rest merges.
#[test]
fn pathological() {
    let mut p = pmm(1);
    let all = alloc_n(&mut p, SZ_4K, 512, NONE).unwrap();
    let (holes, rest): (Vec<_>, Vec<_>) = all.iter().enumerate().partition(|(i, _)| i % 2 == 0);
    let holes: Vec<ChunkId> = holes.into_iter().map(|(_, &id)| id).collect();
    let rest: Vec<ChunkId> = rest.into_iter().map(|(_, &id)| id).collect();
    free_all(&mut p, &holes, Zero::Dirty);
    let s = p.stats();
    assert_eq!((s.free_bytes, s.largest_free), (SZ_2M / 2, SZ_4K));
    assert_eq!(s.fragmentation_permille(), 997);
    assert_eq!(allocatable(&mut p), vec![SZ_4K]);
    free_all(&mut p, &rest, Zero::Dirty);
    assert_eq!(allocatable(&mut p), vec![SZ_4K, SZ_64K, SZ_2M]);
    assert_eq!(p.stats().fragmentation_permille(), 0);
}

/// `alloc_contiguous`: blocks striped over left/middle/right lists; a 3-block contiguous
/// request fails until all three are freed, and 2 blocks succeed once middle and right are
/// free. Here with roots: 6 roots striped L M R L M R.
#[test]
fn contiguous() {
    let mut p = pmm(6);
    let roots = alloc_n(&mut p, SZ_2M, 6, NONE).unwrap();
    let stripe = |k: usize| -> Vec<ChunkId> { roots.iter().skip(k).step_by(3).copied().collect() };
    let (left, middle, right) = (stripe(0), stripe(1), stripe(2));
    free_all(&mut p, &right, Zero::Dirty);
    assert_eq!(p.alloc_contiguous(2 * SZ_2M, K), Err(PmmError::NoSpace));
    free_all(&mut p, &middle, Zero::Dirty);
    assert_eq!(p.alloc_contiguous(3 * SZ_2M, K), Err(PmmError::NoSpace));
    let two = p.alloc_contiguous(2 * SZ_2M, K).unwrap();
    assert_eq!(p.addr(two), Ok(p.base() + SZ_2M));
    free_all(&mut p, &[two], Zero::Dirty);
    free_all(&mut p, &left, Zero::Dirty);
    let three = p.alloc_contiguous(3 * SZ_2M - SZ_4K, K).unwrap();
    assert_eq!(p.size(three), Ok(3 * SZ_2M));
    assert_eq!(p.stats().alloc_failures, 2);
}

/// `alloc_clear`: cleared and dirty blocks are handed out by request; asking for more cleared
/// memory than exists still succeeds with dirty memory; interleaved cleared/dirty frees still
/// merge (gpu_buddy needs a force-merge for that; this manager merges always, the result
/// being dirty).
#[test]
fn clear() {
    let mut p = pmm(2);
    let all = alloc_n(&mut p, SZ_64K, 64, NONE).unwrap();
    for (i, &id) in all.iter().enumerate() {
        let z = if i % 2 == 0 {
            Zero::Zeroed
        } else {
            Zero::Dirty
        };
        assert_eq!(p.free(id, z), Ok(FreeOutcome::Freed));
    }
    p.check().unwrap();
    let s = p.stats();
    assert_eq!(
        (s.free_bytes, s.zeroed_free_bytes),
        (2 * SZ_2M, 0),
        "merged and dirty"
    );
    // Build a mix again: 31 zeroed and 31 dirty free 64K chunks (one kept in each root so
    // neither root merges).
    let all = alloc_n(&mut p, SZ_64K, 64, NONE).unwrap();
    free_all(&mut p, &all[1..32], Zero::Zeroed);
    free_all(&mut p, &all[33..], Zero::Dirty);
    assert_eq!(p.stats().zeroed_free_bytes, 31 * SZ_64K);
    let zeroed = AllocFlags {
        prefer_zeroed: true,
    };
    let got = alloc_n(&mut p, SZ_64K, 40, zeroed).unwrap();
    let z: Vec<bool> = got.iter().map(|&id| p.is_zeroed(id).unwrap()).collect();
    assert!(z[..31].iter().all(|&z| z), "zeroed chunks first");
    assert!(z[31..].iter().all(|&z| !z), "then dirty ones");
    free_all(&mut p, &got[..31], Zero::Zeroed);
    free_all(&mut p, &got[31..], Zero::Dirty);
    let dirty = alloc_n(&mut p, SZ_64K, 1, NONE).unwrap();
    assert!(
        !p.is_zeroed(dirty[0]).unwrap(),
        "without the flag, dirty first"
    );
    free_all(&mut p, &[dirty[0], all[0], all[32]], Zero::Dirty);
    assert_eq!(p.stats().largest_free, 2 * SZ_2M);
}

/// `alloc_exceeds_max_order`: requests above the largest block size fail cleanly unless
/// contiguous. Here: a 4 MiB or 1 MiB chunk is not a chunk size (`BadSize`); a contiguous
/// 3 MiB request rounds up to 2 roots; a contiguous request larger than memory fails.
#[test]
fn exceeds_max_order() {
    let mut p = pmm(4);
    assert_eq!(alloc1(&mut p, 2 * SZ_2M, K), Err(PmmError::BadSize));
    assert_eq!(alloc1(&mut p, SZ_2M / 2, K), Err(PmmError::BadSize));
    let run = p.alloc_contiguous(3 << 20, K).unwrap();
    assert_eq!(p.size(run), Ok(2 * SZ_2M));
    assert_eq!(p.alloc_contiguous(5 * SZ_2M, K), Err(PmmError::NoSpace));
    assert_eq!(p.alloc_contiguous(u64::MAX, K), Err(PmmError::NoSpace));
    p.check().unwrap();
}

/// `offset_aligned_allocation`: blocks keep their exact size and natural alignment.
/// Here: a mix of sizes and types, each chunk aligned to its size.
#[test]
fn offset_aligned() {
    let mut p = pmm(8);
    let mut ids = vec![];
    for round in 0..40u64 {
        let size = [SZ_4K, SZ_64K, SZ_2M][(round % 3) as usize];
        let ty = if round % 5 == 0 { MemType::User } else { K };
        if let Ok(id) = alloc1(&mut p, size, ty) {
            assert_eq!(p.addr(id).unwrap() % size, 0);
            assert_eq!(p.size(id), Ok(size));
            ids.push(id);
        }
    }
    assert!(ids.len() > 30);
}

/// `addr_to_block`: the chunk holding an address is found; outside the manager is an error.
#[test]
fn addr_to_chunk() {
    let mut p = pmm(2);
    let a = alloc1(&mut p, SZ_64K, K).unwrap();
    let b = alloc1(&mut p, SZ_4K, K).unwrap();
    let base = p.base();
    assert_eq!(p.lookup(p.addr(a).unwrap()), Ok(a));
    assert_eq!(p.lookup(p.addr(a).unwrap() + SZ_64K - 1), Ok(a));
    assert_eq!(p.lookup(p.addr(b).unwrap() + 16), Ok(b));
    let free = p.lookup(base + SZ_2M + 16).unwrap();
    assert_eq!((p.state(free), p.size(free)), (Ok(State::Free), Ok(SZ_2M)));
    assert_eq!(p.lookup(base - SZ_4K), Err(PmmError::InvalidId));
    assert_eq!(p.lookup(base + 2 * SZ_2M), Err(PmmError::InvalidId));
}

/// `alloc_range` (exact ranges): ranges at the start, middle and end, per root of a
/// multi-root manager, random slices in random order, free and re-allocation, every size at its
/// natural alignment; and the negative cases: an occupied range, a range overlapping a smaller
/// allocation, misaligned offsets, offsets outside the manager. Here a range is one chunk at an
/// exact, size-aligned offset (`alloc_at`).
#[test]
fn range() {
    let mut p = pmm(3);
    let base = p.base();
    let end = base + 3 * SZ_2M;
    let first = p.alloc_at(base, SZ_4K, K).unwrap();
    let mid = p.alloc_at(base + SZ_2M + 16 * SZ_64K, SZ_64K, K).unwrap();
    let last = p.alloc_at(end - SZ_4K, SZ_4K, K).unwrap();
    p.check().unwrap();
    assert_eq!(p.addr(first), Ok(base));
    assert_eq!(p.addr(mid), Ok(base + SZ_2M + 16 * SZ_64K));
    assert_eq!((p.addr(last), p.size(last)), (Ok(end - SZ_4K), Ok(SZ_4K)));
    // Negative cases.
    assert_eq!(
        p.alloc_at(base, SZ_4K, K),
        Err(PmmError::NoSpace),
        "occupied"
    );
    assert_eq!(
        p.alloc_at(base, SZ_64K, K),
        Err(PmmError::NoSpace),
        "overlaps a 4K chunk"
    );
    assert_eq!(
        p.alloc_at(base + SZ_2M, SZ_2M, K),
        Err(PmmError::NoSpace),
        "root in use"
    );
    assert_eq!(
        p.alloc_at(base + SZ_4K, SZ_64K, K),
        Err(PmmError::Misaligned)
    );
    assert_eq!(p.alloc_at(end, SZ_4K, K), Err(PmmError::InvalidId));
    assert_eq!(p.alloc_at(base - SZ_2M, SZ_2M, K), Err(PmmError::InvalidId));
    assert_eq!(p.alloc_at(base, SZ_2M / 2, K), Err(PmmError::BadSize));
    assert_eq!(
        p.alloc_at(base + SZ_64K, SZ_64K, MemType::User),
        Err(PmmError::NoSpace),
        "kernel root"
    );
    assert_eq!(
        p.stats().alloc_failures,
        4,
        "NoSpace refusals count as failures"
    );
    p.check().unwrap();
    free_all(&mut p, &[first, mid, last], Zero::Dirty);
    assert_eq!(p.stats().largest_free, 3 * SZ_2M);
    // Every 64K of the middle root in a shuffled order, then free and re-allocate.
    let mut order: Vec<u64> = (0..32).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    for round in 0..2 {
        let ids: Vec<ChunkId> = order
            .iter()
            .map(|&k| p.alloc_at(base + SZ_2M + k * SZ_64K, SZ_64K, K).unwrap())
            .collect();
        p.check().unwrap();
        assert_eq!(p.stats().allocated_bytes, SZ_2M, "round {round}");
        assert_eq!(p.alloc_at(base + SZ_2M, SZ_4K, K), Err(PmmError::NoSpace));
        free_all(&mut p, &ids, Zero::Dirty);
    }
    // Each size at its natural alignment, per root.
    let a = p.alloc_at(base, SZ_2M, K).unwrap();
    let b = p
        .alloc_at(base + SZ_2M + SZ_2M - SZ_64K, SZ_64K, K)
        .unwrap();
    let c = p
        .alloc_at(base + 2 * SZ_2M + 5 * SZ_4K, SZ_4K, MemType::User)
        .unwrap();
    assert_eq!(p.state(c), Ok(State::TempPinned));
    p.check().unwrap();
    free_all(&mut p, &[a, b, c], Zero::Dirty);
    assert_eq!(p.stats().free_bytes, 3 * SZ_2M);
}

thread_local! {
    /// Metadata allocations still allowed (`None`: unlimited).
    static BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
}

/// A `Vec` whose growth fails once the thread's budget is spent.
struct FailVec<T>(Vec<T>);

impl<T> Deref for FailVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T> DerefMut for FailVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<T> ChunkVec<T> for FailVec<T> {
    fn new() -> Self {
        FailVec(Vec::new())
    }

    fn try_reserve(&mut self, additional: usize) -> Result<(), OutOfMemory> {
        if self.0.capacity() - self.0.len() >= additional {
            return Ok(());
        }
        BUDGET.with(|b| match b.get() {
            Some(0) => Err(OutOfMemory),
            Some(n) => {
                b.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        })?;
        self.0.try_reserve(additional).map_err(|_| OutOfMemory)
    }

    fn try_push(&mut self, value: T) -> Result<(), OutOfMemory> {
        ChunkVec::try_reserve(self, 1)?;
        self.0.push(value);
        Ok(())
    }

    fn pop(&mut self) -> Option<T> {
        self.0.pop()
    }
}

struct FailStorage;

impl Storage for FailStorage {
    type Vec<T> = FailVec<T>;
}

/// Every metadata allocation failure surfaces as `OutOfMemory` and leaves the manager as it
/// was: a workload of splits, frees and contiguous runs is replayed with the n-th metadata
/// allocation failing, for every n.
#[test]
fn allocation_failures_leave_state_unchanged() {
    // A new manager allocates no metadata at all (roots start untouched).
    BUDGET.with(|b| b.set(Some(0)));
    let p = Pmm::<FailStorage>::new(0, 4 * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    assert_eq!(p.metadata_bytes(), 0);
    let mut injected = 0;
    for budget in 0..24 {
        BUDGET.with(|b| b.set(None));
        let mut p = Pmm::<FailStorage>::new(0, 4 * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
        BUDGET.with(|b| b.set(Some(budget)));
        let mut live: Vec<ChunkId> = vec![];
        for step in 0..60usize {
            let before = p.stats();
            let untouched = p.untouched_roots();
            let size = [SZ_4K, SZ_64K, SZ_4K, SZ_2M][step % 4];
            let mut out = vec![ChunkId::new_for_tests(); 1 + step % 7];
            let r = match step % 5 {
                3 if !live.is_empty() => {
                    let id = live.remove(step % live.len());
                    p.free(id, Zero::Dirty).map(|_| ())
                }
                4 if !live.is_empty() => {
                    let id = live[step % live.len()];
                    p.split(id).map(|_| ())
                }
                _ => p
                    .alloc(size, K, NONE, &mut out)
                    .map(|()| live.extend_from_slice(&out)),
            };
            p.check().unwrap();
            if r == Err(PmmError::OutOfMemory) {
                injected += 1;
                let after = p.stats();
                // A page the failed allocation touched keeps its (free, unsplit) roots, and
                // the directory of pages its entry (one page here): nothing else grows.
                let grown = after.metadata_bytes - before.metadata_bytes;
                let touched = untouched - p.untouched_roots();
                let dir = if touched == 0 {
                    0
                } else {
                    Pmm::<FailStorage>::DIR_ENTRY_BYTES
                };
                let roots = touched * Pmm::<FailStorage>::ROOT_BYTES as u64;
                assert_eq!(grown, roots + dir as u64);
                assert_eq!(
                    Stats {
                        alloc_failures: before.alloc_failures,
                        metadata_bytes: before.metadata_bytes,
                        ..after
                    },
                    before
                );
            }
            // A split chunk is no longer freeable; keep only unsplit ones.
            live.retain(|&id| p.state(id) == Ok(State::Allocated));
        }
    }
    BUDGET.with(|b| b.set(None));
    assert!(injected > 10, "only {injected} failures injected");
}
