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

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::Index;

use crate::hwref::{SizeMask, PMM_CHUNKS_DEFAULT, SZ_128K, SZ_2M, SZ_4K};
use crate::pmm::{AllocFlags, ChunkId, FreeOutcome, MemType, Pmm, PmmError, State, Zero};
use crate::std_storage::StdStorage;

const PAGES_PER_ROOT: usize = (SZ_2M / SZ_4K) as usize;
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

struct Model {
    sizes: Vec<u64>,
    roots: usize,
    /// Owner key of each 4 KiB page (0: free).
    pages: Vec<u64>,
    allocs: BTreeMap<u64, MAlloc>,
    splits: BTreeMap<u64, MSplit>,
    next_key: u64,
}

impl Model {
    fn page(&self, addr: u64) -> usize {
        ((addr - BASE) / SZ_4K) as usize
    }

    fn root_pages(&self, r: usize) -> &[u64] {
        &self.pages[r * PAGES_PER_ROOT..(r + 1) * PAGES_PER_ROOT]
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
        (0..self.roots)
            .map(|r| match self.root_kernel(r) {
                None => PAGES_PER_ROOT / per,
                Some(k) if k == kernel && size < SZ_2M => self
                    .root_pages(r)
                    .chunks(per)
                    .filter(|c| c.iter().all(|&p| p == 0))
                    .count(),
                Some(_) => 0,
            })
            .sum()
    }

    /// Whether the chunk of `size` at `addr` can be allocated for `kernel`.
    fn can_alloc_at(&self, addr: u64, size: u64, kernel: bool) -> bool {
        let first = self.page(addr);
        let free = self.pages[first..first + (size / SZ_4K) as usize]
            .iter()
            .all(|&p| p == 0);
        let root = first / PAGES_PER_ROOT;
        free && match self.root_kernel(root) {
            None => true,
            Some(k) => k == kernel && size < SZ_2M,
        }
    }

    fn free_root_run(&self, n: usize) -> bool {
        let mut run = 0;
        for r in 0..self.roots {
            run = if self.root_pages(r).iter().all(|&p| p == 0) {
                run + 1
            } else {
                0
            };
            if run >= n {
                return true;
            }
        }
        false
    }

    fn largest_free(&self) -> u64 {
        let (mut best, mut run) = (0u64, 0u64);
        for r in 0..self.roots {
            run = if self.root_pages(r).iter().all(|&p| p == 0) {
                run + 1
            } else {
                0
            };
            best = best.max(run);
        }
        if best > 0 {
            return best * SZ_2M;
        }
        for &s in self.sizes.iter().rev() {
            let per = (s / SZ_4K) as usize;
            if self.pages.chunks(per).any(|c| c.iter().all(|&p| p == 0)) {
                return s;
            }
        }
        0
    }

    fn insert(&mut self, a: MAlloc) -> u64 {
        self.next_key += 1;
        let key = self.next_key;
        let first = self.page(a.addr);
        for p in &mut self.pages[first..first + (a.size / SZ_4K) as usize] {
            assert_eq!(*p, 0, "overlapping allocation at {:#x}", a.addr);
            *p = key;
        }
        self.allocs.insert(key, a);
        key
    }

    fn remove(&mut self, key: u64) -> MAlloc {
        let a = self.allocs.remove(&key).unwrap();
        let first = self.page(a.addr);
        for p in &mut self.pages[first..first + (a.size / SZ_4K) as usize] {
            *p = 0;
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
    let used = m.pages.iter().filter(|&&k| k != 0).count() as u64 * SZ_4K;
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
    let mut p = Pmm::<StdStorage>::new(BASE, roots * SZ_2M, mask).unwrap();
    let mut m = Model {
        sizes: p.chunk_sizes().to_vec(),
        roots: roots as usize,
        pages: vec![0; roots as usize * PAGES_PER_ROOT],
        allocs: BTreeMap::new(),
        splits: BTreeMap::new(),
        next_key: 0,
    };
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
                        assert!(expect);
                        let addr = p.addr(id).unwrap();
                        let a = MAlloc::fresh(id, addr, n * SZ_2M, kernel);
                        m.insert(a);
                    }
                    Err(e) => {
                        assert_eq!(e, PmmError::NoSpace);
                        assert!(!expect);
                        failures += 1;
                    }
                }
            }
            Op::AllocAt { size, at, kernel } => {
                let size = m.sizes[size.index(m.sizes.len())];
                let slots = m.roots as u64 * SZ_2M / size;
                let addr = BASE + at.index(slots as usize) as u64 * size;
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
