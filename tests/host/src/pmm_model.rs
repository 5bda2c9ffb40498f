// SPDX-License-Identifier: GPL-2.0

//! Property tests of the memory manager against a reference model.
//!
//! The model knows nothing of buddies or free lists: it keeps which 4 KiB page belongs to
//! which live allocation, and the allocations' type, state and pins. From that alone it predicts
//! whether each request can succeed: a request for `n` chunks of size `s` and type `t` succeeds
//! exactly when `n` disjoint `s`-aligned free regions exist in roots that are either wholly free
//! or already of type `t` (true of a buddy allocator that merges all free buddies eagerly), and a
//! contiguous request succeeds exactly when enough adjacent wholly free roots exist. After every
//! operation the test compares the manager with the model (addresses, sizes, states, pins, free
//! and used bytes, largest free block), checks no allocation overlaps another, and runs the
//! manager's own full consistency check (which includes "every free buddy group is merged").
//!
//! The model keeps pages only for roots that ever held something, so it also runs on managers
//! of up to 1 TiB whose exact-address allocations land in far-apart pages of the manager's root
//! table ([`far_apart_pages_match_the_model`]).

use std::collections::BTreeMap;
use std::ops::Range;

use proptest::prelude::*;
use proptest::sample::Index;

use crate::hwref::{SizeMask, PMM_CHUNKS_DEFAULT, SZ_128K, SZ_2M, SZ_4K};
use crate::pmm::{
    AllocFlags, ChunkId, FreeOutcome, MemType, Pmm, PmmError, State, Zero, PAGE_ROOTS,
};
use crate::std_storage::StdStorage;

const PAGES_PER_ROOT: usize = (SZ_2M / SZ_4K) as usize;
/// Roots per page of the manager's root table.
const PAGE: u64 = PAGE_ROOTS as u64;
const BASE: u64 = 1 << 30;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: Index,
        n: usize,
        kernel: bool,
        zero: bool,
    },
    Contig {
        roots: u64,
        kernel: bool,
    },
    AllocAt {
        size: Index,
        at: Index,
        kernel: bool,
    },
    Free {
        pick: Index,
        zeroed: bool,
    },
    Unpin {
        pick: Index,
    },
    Pin {
        pick: Index,
    },
    P2pUnpin {
        pick: Index,
    },
    Split {
        pick: Index,
    },
    Merge {
        pick: Index,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<Index>(), 1usize..24, any::<bool>(), any::<bool>())
            .prop_map(|(size, n, kernel, zero)| Op::Alloc { size, n, kernel, zero }),
        1 => (1u64..4, any::<bool>()).prop_map(|(roots, kernel)| Op::Contig { roots, kernel }),
        2 => (any::<Index>(), any::<Index>(), any::<bool>())
            .prop_map(|(size, at, kernel)| Op::AllocAt { size, at, kernel }),
        4 => (any::<Index>(), any::<bool>()).prop_map(|(pick, zeroed)| Op::Free { pick, zeroed }),
        2 => any::<Index>().prop_map(|pick| Op::Unpin { pick }),
        1 => any::<Index>().prop_map(|pick| Op::Pin { pick }),
        1 => any::<Index>().prop_map(|pick| Op::P2pUnpin { pick }),
        1 => any::<Index>().prop_map(|pick| Op::Split { pick }),
        1 => any::<Index>().prop_map(|pick| Op::Merge { pick }),
    ]
}

/// A live allocation in the model.
#[derive(Clone, Debug)]
struct MAlloc {
    id: ChunkId,
    addr: u64,
    size: u64,
    kernel: bool,
    state: State,
    pins: u32,
    revoking: bool,
    /// Key of the split record this chunk is a child of.
    parent: Option<u64>,
}

impl MAlloc {
    /// A chunk just handed out: owned at once for the kernel, temp-pinned for a user.
    fn fresh(id: ChunkId, addr: u64, size: u64, kernel: bool) -> Self {
        let state = if kernel {
            State::Allocated
        } else {
            State::TempPinned
        };
        MAlloc {
            id,
            addr,
            size,
            kernel,
            state,
            pins: 0,
            revoking: false,
            parent: None,
        }
    }
}

/// An owner-split chunk in the model.
#[derive(Clone, Debug)]
struct MSplit {
    whole: MAlloc,
    children: Vec<u64>,
}

/// The pages of a root that never held anything.
static FREE_ROOT: [u64; PAGES_PER_ROOT] = [0; PAGES_PER_ROOT];

struct Model {
    sizes: Vec<u64>,
    roots: usize,
    /// Owner key of each 4 KiB page (0: free), per root; roots not here are wholly free.
    pages: BTreeMap<usize, Vec<u64>>,
    allocs: BTreeMap<u64, MAlloc>,
    splits: BTreeMap<u64, MSplit>,
    next_key: u64,
}

impl Model {
    /// The root and page in it of `addr`.
    fn page(&self, addr: u64) -> (usize, usize) {
        let p = ((addr - BASE) / SZ_4K) as usize;
        (p / PAGES_PER_ROOT, p % PAGES_PER_ROOT)
    }

    fn root_pages(&self, r: usize) -> &[u64] {
        self.pages.get(&r).map_or(&FREE_ROOT[..], |v| &v[..])
    }

    /// The pages of `size` bytes at `addr` (within one root), to change.
    fn pages_mut(&mut self, addr: u64, size: u64) -> &mut [u64] {
        let (r, first) = self.page(addr);
        let n = (size / SZ_4K) as usize;
        let root = self
            .pages
            .entry(r)
            .or_insert_with(|| vec![0; PAGES_PER_ROOT]);
        &mut root[first..first + n]
    }

    /// Whether root `r` is wholly free.
    fn root_free(&self, r: usize) -> bool {
        self.root_pages(r).iter().all(|&p| p == 0)
    }

    /// The runs of wholly free roots, as (first root, length), in address order.
    fn free_runs(&self) -> Vec<(usize, usize)> {
        let mut runs = vec![];
        let mut start = 0;
        for (&r, pages) in &self.pages {
            if pages.iter().any(|&p| p != 0) {
                if r > start {
                    runs.push((start, r - start));
                }
                start = r + 1;
            }
        }
        if self.roots > start {
            runs.push((start, self.roots - start));
        }
        runs
    }

    /// Bytes in use.
    fn used(&self) -> u64 {
        let pages = self.pages.values().flatten().filter(|&&k| k != 0).count();
        pages as u64 * SZ_4K
    }

    /// Type of a root that holds something, from any of its pages' owners.
    fn root_kernel(&self, r: usize) -> Option<bool> {
        let key = *self.root_pages(r).iter().find(|&&k| k != 0)?;
        let a = self.allocs.get(&key).expect("page owner is live");
        Some(a.kernel)
    }

    /// Chunks of `size` and type `kernel` the manager can hand out now.
    fn available(&self, size: u64, kernel: bool) -> usize {
        let per = (size / SZ_4K) as usize;
        let never = self.roots - self.pages.len();
        let seen: usize = self
            .pages
            .keys()
            .map(|&r| match self.root_kernel(r) {
                None => PAGES_PER_ROOT / per,
                Some(k) if k == kernel && size < SZ_2M => self
                    .root_pages(r)
                    .chunks(per)
                    .filter(|c| c.iter().all(|&p| p == 0))
                    .count(),
                Some(_) => 0,
            })
            .sum();
        never * (PAGES_PER_ROOT / per) + seen
    }

    /// Whether the chunk of `size` at `addr` can be allocated for `kernel`.
    fn can_alloc_at(&self, addr: u64, size: u64, kernel: bool) -> bool {
        let (root, first) = self.page(addr);
        let free = self.root_pages(root)[first..first + (size / SZ_4K) as usize]
            .iter()
            .all(|&p| p == 0);
        free && match self.root_kernel(root) {
            None => true,
            Some(k) => k == kernel && size < SZ_2M,
        }
    }

    /// The first root of the lowest run of `n` wholly free roots.
    fn free_root_run(&self, n: usize) -> Option<usize> {
        self.free_runs()
            .into_iter()
            .find(|&(_, len)| len >= n)
            .map(|(r, _)| r)
    }

    fn largest_free(&self) -> u64 {
        let best = self.free_runs().iter().map(|r| r.1).max().unwrap_or(0);
        if best > 0 {
            return best as u64 * SZ_2M;
        }
        // No wholly free root: every root is in `pages`.
        for &s in self.sizes.iter().rev() {
            let per = (s / SZ_4K) as usize;
            let mut chunks = self.pages.values().flat_map(|v| v.chunks(per));
            if chunks.any(|c| c.iter().all(|&p| p == 0)) {
                return s;
            }
        }
        0
    }

    fn insert(&mut self, a: MAlloc) -> u64 {
        self.next_key += 1;
        let key = self.next_key;
        // A contiguous run covers whole roots.
        for at in (a.addr..a.addr + a.size).step_by(SZ_2M as usize) {
            let size = a.size.min(SZ_2M);
            for p in self.pages_mut(at, size) {
                assert_eq!(*p, 0, "overlapping allocation at {:#x}", a.addr);
                *p = key;
            }
        }
        self.allocs.insert(key, a);
        key
    }

    fn remove(&mut self, key: u64) -> MAlloc {
        let a = self.allocs.remove(&key).unwrap();
        for at in (a.addr..a.addr + a.size).step_by(SZ_2M as usize) {
            self.pages_mut(at, a.size.min(SZ_2M)).fill(0);
        }
        a
    }

    /// Forgets the split records above a chunk that left (their chunk ids may become stale).
    fn drop_ancestors(&mut self, mut parent: Option<u64>) {
        while let Some(k) = parent {
            parent = self.splits.remove(&k).and_then(|s| s.whole.parent);
        }
    }
}

fn pick<T: Copy>(keys: &[T], i: &Index) -> Option<T> {
    (!keys.is_empty()).then(|| keys[i.index(keys.len())])
}

fn compare(p: &Pmm<StdStorage>, m: &Model) {
    p.check().unwrap();
    for a in m.allocs.values() {
        assert_eq!(p.addr(a.id), Ok(a.addr));
        assert_eq!(p.size(a.id), Ok(a.size));
        assert_eq!(p.state(a.id), Ok(a.state));
        assert_eq!(p.pins(a.id), Ok(a.pins));
        assert_eq!((a.addr - BASE) % a.size.min(SZ_2M), 0, "natural alignment");
    }
    let used = m.used();
    let s = p.stats();
    assert_eq!(s.free_bytes, s.total_bytes - used);
    assert_eq!(s.allocated_bytes + s.temp_pinned_bytes, used);
    assert_eq!(
        s.free_bytes + s.allocated_bytes + s.temp_pinned_bytes,
        s.total_bytes
    );
    assert_eq!(s.largest_free, m.largest_free());
}

fn run(roots: u64, mask: SizeMask, ops: Vec<Op>) {
    run_in(roots, &[0..roots], 0, mask, ops);
}

/// The address of exact-address allocation `at` of `size` in the roots of `hot`.
fn hot_addr(hot: &[Range<u64>], size: u64, at: &Index) -> u64 {
    let per_root = SZ_2M / size;
    let slots: u64 = hot.iter().map(|h| (h.end - h.start) * per_root).sum();
    let mut k = at.index(slots as usize) as u64;
    for h in hot {
        let n = (h.end - h.start) * per_root;
        if k < n {
            return BASE + h.start * SZ_2M + k * size;
        }
        k -= n;
    }
    unreachable!("slot beyond the hot roots")
}

/// [`run`] with exact-address allocations only in the roots of `hot`, after `prefill` whole
/// roots are allocated (the lowest ones, for the kernel).
fn run_in(roots: u64, hot: &[Range<u64>], prefill: usize, mask: SizeMask, ops: Vec<Op>) {
    let mut p = Pmm::<StdStorage>::new(BASE, roots * SZ_2M, mask).unwrap();
    let mut m = Model {
        sizes: p.chunk_sizes().to_vec(),
        roots: roots as usize,
        pages: BTreeMap::new(),
        allocs: BTreeMap::new(),
        splits: BTreeMap::new(),
        next_key: 0,
    };
    let mut out = vec![ChunkId::new_for_tests(); prefill];
    p.alloc(SZ_2M, MemType::Kernel, AllocFlags::default(), &mut out)
        .unwrap();
    for (r, id) in out.into_iter().enumerate() {
        assert_eq!(p.addr(id), Ok(BASE + r as u64 * SZ_2M));
        m.insert(MAlloc::fresh(id, BASE + r as u64 * SZ_2M, SZ_2M, true));
    }
    compare(&p, &m);
    let mut failures = 0;
    for op in ops {
        let keys: Vec<u64> = m.allocs.keys().copied().collect();
        match op {
            Op::Alloc {
                size,
                n,
                kernel,
                zero,
            } => {
                let size = m.sizes[size.index(m.sizes.len())];
                let ty = if kernel {
                    MemType::Kernel
                } else {
                    MemType::User
                };
                let expect = m.available(size, kernel) >= n;
                let mut out = vec![ChunkId::new_for_tests(); n];
                let flags = AllocFlags {
                    prefer_zeroed: zero,
                };
                match p.alloc(size, ty, flags, &mut out) {
                    Ok(()) => {
                        assert!(expect, "alloc {n} x {size:#x} succeeded, model said no");
                        for id in out {
                            let addr = p.addr(id).unwrap();
                            let a = MAlloc::fresh(id, addr, size, kernel);
                            m.insert(a);
                        }
                    }
                    Err(e) => {
                        assert_eq!(e, PmmError::NoSpace);
                        assert!(!expect, "alloc {n} x {size:#x} failed, model said yes");
                        failures += 1;
                    }
                }
            }
            Op::Contig { roots: n, kernel } => {
                let ty = if kernel {
                    MemType::Kernel
                } else {
                    MemType::User
                };
                let expect = m.free_root_run(n as usize);
                match p.alloc_contiguous(n * SZ_2M, ty) {
                    Ok(id) => {
                        // The lowest run of free roots.
                        let addr = p.addr(id).unwrap();
                        assert_eq!(expect.map(|r| BASE + r as u64 * SZ_2M), Some(addr));
                        let a = MAlloc::fresh(id, addr, n * SZ_2M, kernel);
                        m.insert(a);
                    }
                    Err(e) => {
                        assert_eq!(e, PmmError::NoSpace);
                        assert_eq!(expect, None);
                        failures += 1;
                    }
                }
            }
            Op::AllocAt { size, at, kernel } => {
                let size = m.sizes[size.index(m.sizes.len())];
                let addr = hot_addr(hot, size, &at);
                let ty = if kernel {
                    MemType::Kernel
                } else {
                    MemType::User
                };
                let expect = m.can_alloc_at(addr, size, kernel);
                match p.alloc_at(addr, size, ty) {
                    Ok(id) => {
                        assert!(
                            expect,
                            "alloc_at {addr:#x} {size:#x} succeeded, model said no"
                        );
                        assert_eq!(p.addr(id), Ok(addr));
                        let a = MAlloc::fresh(id, addr, size, kernel);
                        m.insert(a);
                    }
                    Err(e) => {
                        assert_eq!(e, PmmError::NoSpace);
                        assert!(
                            !expect,
                            "alloc_at {addr:#x} {size:#x} failed, model said yes"
                        );
                        failures += 1;
                    }
                }
            }
            Op::Free { pick: i, zeroed } => {
                let Some(k) = pick(&keys, &i) else { continue };
                let a = m.allocs[&k].clone();
                let zero = if zeroed { Zero::Zeroed } else { Zero::Dirty };
                let got = p.free(a.id, zero).unwrap();
                if a.pins > 0 {
                    assert_eq!(got, FreeOutcome::Revoke { pins: a.pins });
                    m.allocs.get_mut(&k).unwrap().revoking = true;
                } else {
                    assert_eq!(got, FreeOutcome::Freed);
                    m.remove(k);
                    m.drop_ancestors(a.parent);
                }
            }
            Op::Unpin { pick: i } => {
                let Some(k) = pick(&keys, &i) else { continue };
                let a = m.allocs.get_mut(&k).unwrap();
                let r = p.unpin_allocated(a.id);
                if a.state == State::TempPinned {
                    assert_eq!(r, Ok(()));
                    a.state = State::Allocated;
                } else {
                    assert!(r.is_err());
                }
            }
            Op::Pin { pick: i } => {
                let Some(k) = pick(&keys, &i) else { continue };
                let a = m.allocs.get_mut(&k).unwrap();
                let r = p.p2p_pin(a.id);
                match (a.state, a.revoking) {
                    (State::Allocated, false) => {
                        a.pins += 1;
                        assert_eq!(r, Ok(a.pins));
                    }
                    (State::Allocated, true) => assert_eq!(r, Err(PmmError::Revoking)),
                    _ => assert_eq!(r, Err(PmmError::NotAllocated)),
                }
            }
            Op::P2pUnpin { pick: i } => {
                let Some(k) = pick(&keys, &i) else { continue };
                let a = m.allocs.get_mut(&k).unwrap();
                let r = p.p2p_unpin(a.id);
                if a.pins > 0 {
                    a.pins -= 1;
                    assert_eq!(r, Ok(a.pins));
                } else {
                    assert_eq!(r, Err(PmmError::NotPinned));
                }
            }
            Op::Split { pick: i } => {
                let Some(k) = pick(&keys, &i) else { continue };
                let a = m.allocs[&k].clone();
                let legal = a.state == State::Allocated
                    && a.pins == 0
                    && !a.revoking
                    && a.size != m.sizes[0]
                    && a.size <= SZ_2M;
                match p.split(a.id) {
                    Ok(_) => {
                        assert!(legal, "split of {a:?} succeeded");
                        m.remove(k);
                        let child = m.sizes[m.sizes.iter().position(|&s| s == a.size).unwrap() - 1];
                        let n = (a.size / child) as u16;
                        assert_eq!(p.children(a.id), Ok(n));
                        m.next_key += 1;
                        let sk = m.next_key;
                        let mut children = vec![];
                        for c in 0..n {
                            let id = p.nth_child(a.id, c).unwrap();
                            let addr = a.addr + u64::from(c) * child;
                            let ca = MAlloc {
                                id,
                                addr,
                                size: child,
                                parent: Some(sk),
                                ..a.clone()
                            };
                            children.push(m.insert(ca));
                        }
                        // The split chunk's key in the record above it becomes the record's.
                        if let Some(ps) = a.parent.and_then(|pk| m.splits.get_mut(&pk)) {
                            for c in &mut ps.children {
                                if *c == k {
                                    *c = sk;
                                }
                            }
                        }
                        m.splits.insert(sk, MSplit { whole: a, children });
                    }
                    Err(e) => assert!(!legal, "split of {a:?} failed: {e:?}"),
                }
            }
            Op::Merge { pick: i } => {
                let skeys: Vec<u64> = m.splits.keys().copied().collect();
                let Some(sk) = pick(&skeys, &i) else { continue };
                let s = m.splits[&sk].clone();
                let legal = s.children.iter().all(|c| {
                    m.allocs
                        .get(c)
                        .is_some_and(|a| a.state == State::Allocated && a.pins == 0 && !a.revoking)
                });
                match p.merge(s.whole.id) {
                    Ok(()) => {
                        assert!(legal);
                        for c in &s.children {
                            m.remove(*c);
                        }
                        m.splits.remove(&sk);
                        let whole = MAlloc {
                            state: State::Allocated,
                            ..s.whole
                        };
                        let parent = whole.parent;
                        let new = m.insert(whole);
                        // The merged chunk replaces its old key in the record above it.
                        if let Some(pk) = parent {
                            if let Some(ps) = m.splits.get_mut(&pk) {
                                for c in &mut ps.children {
                                    if *c == sk {
                                        *c = new;
                                    }
                                }
                            }
                        }
                    }
                    Err(e) => assert!(!legal, "merge failed: {e:?}"),
                }
            }
        }
        compare(&p, &m);
    }
    assert_eq!(p.stats().alloc_failures, failures);
    // Drop every pin and free everything: the manager must end fully merged.
    let keys: Vec<u64> = m.allocs.keys().copied().collect();
    for k in keys {
        let a = m.allocs[&k].clone();
        for _ in 0..a.pins {
            p.p2p_unpin(a.id).unwrap();
        }
        assert_eq!(p.free(a.id, Zero::Dirty), Ok(FreeOutcome::Freed));
        m.remove(k);
        m.drop_ancestors(a.parent);
        p.check().unwrap();
    }
    let s = p.stats();
    assert_eq!(s.free_bytes, s.total_bytes);
    assert_eq!(s.largest_free, s.total_bytes);
    assert_eq!(s.chunks[State::Free.index()][s.levels - 1], roots);
}

const MAXWELL: SizeMask = SizeMask::from_sizes(SZ_4K | SZ_128K | SZ_2M);

/// Cases per property: 192, or `PROPTEST_CASES` for longer runs.
pub(crate) fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(192)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn default_sizes_match_the_model(roots in 1u64..6, ops in prop::collection::vec(op(), 1..160)) {
        run(roots, PMM_CHUNKS_DEFAULT, ops);
    }

    #[test]
    fn maxwell_sizes_match_the_model(roots in 1u64..4, ops in prop::collection::vec(op(), 1..120)) {
        run(roots, MAXWELL, ops);
    }

    #[test]
    fn two_sizes_match_the_model(roots in 1u64..3, ops in prop::collection::vec(op(), 1..80)) {
        run(roots, SizeMask::from_sizes(SZ_4K | SZ_2M), ops);
    }

}

proptest! {
    // Every step checks thousands of touched roots: fewer cases.
    #![proptest_config(ProptestConfig { cases: cases().div_ceil(6), ..ProptestConfig::default() })]

    /// Managers of a few pages of the root table, a short last one included, with exact-address
    /// allocations anywhere: pages are touched in any order. The first page may start nearly
    /// full, so that allocations and runs cross into the next, touched or not.
    #[test]
    fn several_pages_match_the_model(
        roots in (PAGE + 1)..(3 * PAGE + 8),
        full in prop::bool::ANY,
        left in 0u64..6,
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let prefill = if full { PAGE - left } else { 0 };
        run_in(roots, &[0..roots], prefill as usize, PMM_CHUNKS_DEFAULT, ops);
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases().div_ceil(12), ..ProptestConfig::default() })]

    /// A 1 TiB manager (1024 pages) whose exact-address allocations land in far-apart pages:
    /// the first roots, both sides of the first page boundary, the middle, and the last roots.
    #[test]
    fn far_apart_pages_match_the_model(ops in prop::collection::vec(op(), 1..120)) {
        let roots = (1u64 << 40) / SZ_2M;
        let hot = [
            0..2,
            PAGE - 2..PAGE + 2,
            300 * PAGE + 100..300 * PAGE + 102,
            roots - PAGE - 1..roots - PAGE + 1,
            roots - 3..roots,
        ];
        run_in(roots, &hot, 0, PMM_CHUNKS_DEFAULT, ops);
    }
}
