// SPDX-License-Identifier: GPL-2.0

//! Tests of the benchmark traces' allocator models (`src/bench/`): a model that does the wrong
//! work makes its anchor's line wrong.

use crate::frag::{Evicting, FragAlloc};
use crate::hwref::{PMM_CHUNKS_DEFAULT, SZ_2M, SZ_64K};
use crate::pmm::Pmm;
use crate::std_storage::StdStorage;

/// The LRU-evicting anchor evicts movable allocations oldest first until a request fits, never
/// a pinned one, and keeps its LRU whole when an allocation that is not on it (pinned) is
/// freed.
#[test]
fn lru_eviction_skips_pinned_and_survives_their_free() {
    let pmm = Pmm::<StdStorage>::new(0, 8 * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let mut e = Evicting::<_, StdStorage>::new(pmm, 300).unwrap();
    // Memory full of 64 KiB allocations; in the first root every fourth one is pinned.
    let per_root = usize::try_from(SZ_2M / SZ_64K).unwrap();
    let mut handles = Vec::new();
    for i in 0..8 * per_root {
        let pinned = i < per_root && i % 4 == 0;
        handles.push(e.alloc(SZ_64K, pinned).unwrap());
    }
    assert_eq!(e.largest_free(), 0);
    let pinned: Vec<u32> = (0..per_root).step_by(4).map(|i| handles[i]).collect();
    // Freeing allocations that are not on the LRU must leave the LRU as it was.
    for h in &pinned {
        e.free(*h);
    }
    // 4 MiB of adjacent memory: the oldest movable allocations go first, those of root 0 (24
    // left) and root 1 (32), and then the request fits.
    let run = e.alloc_contiguous(2 * SZ_2M);
    assert!(
        run.is_some(),
        "the LRU was cut short: {} evicted",
        e.moves()
    );
    assert_eq!(e.moves(), 24 + 32);
    assert_eq!(e.moved(), (24 + 32) * SZ_64K);
    // Freeing evicted allocations (in system memory now) and the rest gives all memory back.
    e.free_contiguous(run.unwrap());
    for (i, h) in handles.iter().enumerate() {
        if !(i < per_root && i % 4 == 0) {
            e.free(*h);
        }
    }
    assert_eq!(e.largest_free(), 8 * SZ_2M);
}

/// Pinned allocations are never evicted: a request that only their eviction could answer fails.
#[test]
fn lru_eviction_never_takes_a_pinned_allocation() {
    let pmm = Pmm::<StdStorage>::new(0, 2 * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let mut e = Evicting::<_, StdStorage>::new(pmm, 100).unwrap();
    let per_root = usize::try_from(SZ_2M / SZ_64K).unwrap();
    // One pinned allocation in each root.
    let handles: Vec<u32> = (0..2 * per_root)
        .map(|i| e.alloc(SZ_64K, i % per_root == 5).unwrap())
        .collect();
    assert!(e.alloc(SZ_2M, false).is_none());
    assert_eq!(e.moves(), 2 * u64::try_from(per_root).unwrap() - 2);
    for h in handles {
        e.free(h);
    }
    assert_eq!(e.largest_free(), 2 * SZ_2M);
}
