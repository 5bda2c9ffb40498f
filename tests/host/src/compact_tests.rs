// SPDX-License-Identifier: GPL-2.0

//! Tests of compaction planning ([`crate::pmm::compact`]) against a page-level model.
//!
//! The model is what the test itself handed out: every live chunk with its address, size and
//! kind (a movable user chunk, a pinned user chunk, a kernel chunk, a chunk of a contiguous run,
//! or a temp-pinned chunk never confirmed), as 4 KiB pages. For a random fragmented manager and
//! a random goal, a plan must
//!
//! - move only movable chunks, each to a free, aligned range outside the roots it empties, no
//!   two destinations overlapping;
//! - for a contiguous goal, move exactly the allocated bytes of the cheapest window of roots
//!   holding only movable or free memory whose chunks fit outside it (no plan can move less);
//! - refuse only if no such window exists;
//! - once executed move by move ([`Pmm::begin_move`], [`Pmm::finish_move`]), satisfy the goal
//!   (the contiguous allocation succeeds, or enough roots are free), leave every unmoved chunk
//!   where it was, and pass the manager's own consistency check.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::hwref::{PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K};
use crate::pmm::compact::{Goal, Move, PlanBuffers};
use crate::pmm::{AllocFlags, ChunkId, MemType, Pmm, PmmError, State, Zero};
use crate::std_storage::StdStorage;

const BASE: u64 = 1 << 32;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Movable,
    Pinned,
    Kernel,
    Contig,
    Temp,
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    id: ChunkId,
    size: u64,
    kind: Kind,
}

/// The live chunks by address.
type Model = BTreeMap<u64, Chunk>;

fn root_of(addr: u64) -> u64 {
    (addr - BASE) / SZ_2M
}

/// One step of building a fragmented manager.
#[derive(Clone, Debug)]
enum Op {
    User { size64k: bool, n: usize },
    Kernel,
    Contig { roots: u64 },
    Temp,
    Free { pick: prop::sample::Index },
    Pin { pick: prop::sample::Index },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), 1usize..40).prop_map(|(size64k, n)| Op::User { size64k, n }),
        1 => Just(Op::Kernel),
        1 => (1u64..3).prop_map(|roots| Op::Contig { roots }),
        1 => Just(Op::Temp),
        6 => any::<prop::sample::Index>().prop_map(|pick| Op::Free { pick }),
        1 => any::<prop::sample::Index>().prop_map(|pick| Op::Pin { pick }),
    ]
}

fn build(roots: u64, ops: &[Op]) -> (Pmm<StdStorage>, Model) {
    let mut p = Pmm::<StdStorage>::new(BASE, roots * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let mut m = Model::new();
    for op in ops {
        match op {
            Op::User { size64k, n } => {
                let size = if *size64k { SZ_64K } else { SZ_2M };
                let mut out = vec![ChunkId::default(); *n];
                if p.alloc(size, MemType::User, AllocFlags::default(), &mut out)
                    .is_ok()
                {
                    for id in out {
                        p.unpin_allocated(id).unwrap();
                        let kind = Kind::Movable;
                        m.insert(p.addr(id).unwrap(), Chunk { id, size, kind });
                    }
                }
            }
            Op::Kernel => {
                let mut out = [ChunkId::default()];
                if p.alloc(SZ_4K, MemType::Kernel, AllocFlags::default(), &mut out)
                    .is_ok()
                {
                    let kind = Kind::Kernel;
                    m.insert(
                        p.addr(out[0]).unwrap(),
                        Chunk {
                            id: out[0],
                            size: SZ_4K,
                            kind,
                        },
                    );
                }
            }
            Op::Contig { roots } => {
                if let Ok(id) = p.alloc_contiguous(roots * SZ_2M, MemType::User) {
                    p.unpin_allocated(id).unwrap();
                    // A run of one root is an ordinary root: contiguous wherever it goes.
                    let kind = if *roots == 1 {
                        Kind::Movable
                    } else {
                        Kind::Contig
                    };
                    let size = roots * SZ_2M;
                    m.insert(p.addr(id).unwrap(), Chunk { id, size, kind });
                }
            }
            Op::Temp => {
                let mut out = [ChunkId::default()];
                if p.alloc(SZ_64K, MemType::User, AllocFlags::default(), &mut out)
                    .is_ok()
                {
                    let kind = Kind::Temp;
                    m.insert(
                        p.addr(out[0]).unwrap(),
                        Chunk {
                            id: out[0],
                            size: SZ_64K,
                            kind,
                        },
                    );
                }
            }
            Op::Free { pick } => {
                let keys: Vec<u64> = m
                    .iter()
                    .filter(|(_, c)| matches!(c.kind, Kind::Movable | Kind::Kernel | Kind::Contig))
                    .map(|(a, _)| *a)
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let a = keys[pick.index(keys.len())];
                let c = m.remove(&a).unwrap();
                p.free(c.id, Zero::Dirty).unwrap();
            }
            Op::Pin { pick } => {
                let keys: Vec<u64> = m
                    .iter()
                    .filter(|(_, c)| c.kind == Kind::Movable)
                    .map(|(a, _)| *a)
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let a = keys[pick.index(keys.len())];
                let c = m.get_mut(&a).unwrap();
                p.p2p_pin(c.id).unwrap();
                c.kind = Kind::Pinned;
            }
        }
    }
    (p, m)
}

/// Per root, the bytes that must move to empty it, or `None` if something in it may not move.
fn model_costs(roots: u64, m: &Model) -> Vec<Option<u64>> {
    let mut costs = vec![Some(0u64); roots as usize];
    for (&a, c) in m {
        let first = root_of(a);
        let last = root_of(a + c.size - 1);
        for r in first..=last {
            let slot = &mut costs[r as usize];
            *slot = match (c.kind, *slot) {
                (Kind::Movable, Some(x)) => Some(x + c.size),
                _ => None,
            };
        }
    }
    costs
}

fn check_plan(p: &Pmm<StdStorage>, m: &Model, roots: u64, goal: Goal, plan: &[Move]) {
    let emptied: std::collections::BTreeSet<u64> = plan.iter().map(|mv| root_of(mv.from)).collect();
    let mut dests: Vec<(u64, u64)> = Vec::new();
    for mv in plan {
        let c = m
            .get(&mv.from)
            .unwrap_or_else(|| panic!("move of an unknown chunk {mv:?}"));
        assert_eq!(c.kind, Kind::Movable, "{mv:?} moves a {:?} chunk", c.kind);
        assert_eq!(c.id, mv.chunk);
        assert_eq!(c.size, mv.size);
        assert_eq!(mv.to % mv.size, 0, "{mv:?}: unaligned destination");
        assert!(
            !emptied.contains(&root_of(mv.to)),
            "{mv:?}: destination in an emptied root"
        );
        // Free in the model: no live chunk overlaps it.
        let overlaps = m
            .iter()
            .any(|(&a, c)| a < mv.to + mv.size && mv.to < a + c.size);
        assert!(!overlaps, "{mv:?}: destination is in use");
        // Typed roots: never into a root holding kernel chunks.
        let kernel_root = m
            .iter()
            .any(|(&a, c)| c.kind == Kind::Kernel && root_of(a) == root_of(mv.to));
        assert!(!kernel_root, "{mv:?}: destination root holds kernel chunks");
        dests.push((mv.to, mv.size));
    }
    dests.sort_unstable();
    for w in dests.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "overlapping destinations {w:?}");
    }
    if let Goal::Contiguous(n) = goal {
        // No window whose chunks fit elsewhere holds fewer bytes.
        let n = n as usize;
        let costs = model_costs(roots, m);
        let best = (0..=roots as usize - n)
            .filter(|&start| {
                let chosen: Vec<bool> = (0..roots as usize)
                    .map(|r| (start..start + n).contains(&r))
                    .collect();
                feasible(m, roots, &chosen, true)
            })
            .filter_map(|start| {
                costs[start..start + n]
                    .iter()
                    .try_fold(0u64, |a, c| c.map(|c| a + c))
            })
            .min()
            .expect("a plan without a feasible window");
        let moved: u64 = plan.iter().map(|mv| mv.size).sum();
        assert_eq!(
            moved, best,
            "the plan moves more than the cheapest feasible window holds"
        );
    }
    assert!(p.check().is_ok());
}

/// Executes `plan`, updating the model; panics if a move fails.
fn execute(p: &mut Pmm<StdStorage>, m: &mut Model, plan: &[Move]) {
    for mv in plan {
        let dst = p
            .begin_move(mv.chunk, mv.to)
            .unwrap_or_else(|e| panic!("{mv:?}: {e:?}"));
        assert_eq!(p.state(mv.chunk).unwrap(), State::TempPinned);
        assert_eq!(p.addr(dst).unwrap(), mv.to);
        p.finish_move(mv.chunk, dst, Zero::Zeroed).unwrap();
        let c = m.remove(&mv.from).unwrap();
        m.insert(mv.to, Chunk { id: dst, ..c });
    }
    p.check().unwrap();
    for (&a, c) in m.iter() {
        assert_eq!(
            p.addr(c.id).unwrap(),
            a,
            "{c:?} is not where the model has it"
        );
    }
}

/// Whether the movable chunks of the `chosen` roots fit in the free memory of the others (whole
/// free roots only if `use_free_roots`), by counting: sizes divide each other, so filling the
/// largest first is optimal.
fn feasible(m: &Model, roots: u64, chosen: &[bool], use_free_roots: bool) -> bool {
    let per64 = (SZ_64K / SZ_4K) as usize;
    let mut used = vec![false; roots as usize * (SZ_2M / SZ_4K) as usize];
    let mut kernel_root = vec![false; roots as usize];
    let (mut d2, mut d64, mut d4) = (0u64, 0u64, 0u64);
    for (&a, c) in m {
        let first = ((a - BASE) / SZ_4K) as usize;
        for u in &mut used[first..first + (c.size / SZ_4K) as usize] {
            *u = true;
        }
        if c.kind == Kind::Kernel {
            kernel_root[root_of(a) as usize] = true;
        }
        let spans = root_of(a)..=root_of(a + c.size - 1);
        if spans.clone().any(|r| chosen[r as usize]) {
            if c.kind != Kind::Movable {
                return false;
            }
            match c.size {
                SZ_2M => d2 += 1,
                SZ_64K => d64 += 1,
                _ => d4 += 1,
            }
        }
    }
    let (mut f2, mut f64, mut f4) = (0u64, 0u64, 0u64);
    for r in 0..roots as usize {
        if chosen[r] || kernel_root[r] {
            continue;
        }
        let pages = &used[r * 512..(r + 1) * 512];
        if pages.iter().all(|u| !u) {
            if use_free_roots {
                f2 += 1;
            }
            continue;
        }
        for block in pages.chunks(per64) {
            if block.iter().all(|u| !u) {
                f64 += 1;
            } else {
                f4 += block.iter().filter(|u| !**u).count() as u64;
            }
        }
    }
    if d2 > f2 {
        return false;
    }
    let room64 = f64 + 32 * (f2 - d2);
    if d64 > room64 {
        return false;
    }
    d4 <= f4 + 16 * (room64 - d64)
}

fn run(roots: u64, ops: &[Op], goal: Goal) {
    let (mut p, mut m) = build(roots, ops);
    let mut bufs = PlanBuffers::new();
    bufs.reserve(p.plan_sizing()).unwrap();
    let r = p.plan_compaction(goal, &mut bufs);
    let plan = bufs.moves().to_vec();
    match r {
        Ok(bytes) => {
            assert_eq!(bytes, plan.iter().map(|mv| mv.size).sum::<u64>());
            check_plan(&p, &m, roots, goal, &plan);
            execute(&mut p, &mut m, &plan);
            match goal {
                Goal::Contiguous(n) => {
                    let id = p.alloc_contiguous(u64::from(n) * SZ_2M, MemType::User);
                    assert!(id.is_ok(), "contiguous {n} roots still fail after {plan:?}");
                }
                Goal::Roots(k) => {
                    let mut out = vec![ChunkId::default(); k as usize];
                    let r = p.alloc(SZ_2M, MemType::User, AllocFlags::default(), &mut out);
                    assert!(r.is_ok(), "{k} roots still fail after {plan:?}");
                }
            }
            p.check().unwrap();
        }
        Err(PmmError::NoSpace) => {
            // A refusal is right only if no window of movable memory could be emptied into the
            // free memory outside it.
            if let Goal::Contiguous(n) = goal {
                let n = n as usize;
                for start in 0..(roots as usize).saturating_sub(n - 1) {
                    let chosen: Vec<bool> = (0..roots as usize)
                        .map(|r| (start..start + n).contains(&r))
                        .collect();
                    assert!(
                        !feasible(&m, roots, &chosen, true),
                        "refused although roots {start}..{} could be emptied\ncosts {:?}\nmodel {:?}\nmap\n{}",
                        start + n,
                        model_costs(roots, &m),
                        m,
                        p.map()
                    );
                }
            }
        }
        Err(e) => panic!("plan failed: {e:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::pmm_model::cases()))]

    #[test]
    fn contiguous_plans_are_sound_minimal_and_work(
        roots in 2u64..24,
        ops in prop::collection::vec(op(), 1..80),
        n in 1u32..6,
    ) {
        run(roots, &ops, Goal::Contiguous(n));
    }

    #[test]
    fn root_plans_are_sound_and_work(
        roots in 2u64..24,
        ops in prop::collection::vec(op(), 1..80),
        k in 1u32..6,
    ) {
        run(roots, &ops, Goal::Roots(k));
    }
}

/// The VM test's picture: a checkerboard of 64 KiB allocations over every root, half freed,
/// some of the rest pinned for a peer. A 64 MiB contiguous request fails; the plan avoids every
/// root holding a pin, and once executed the request succeeds.
#[test]
fn checkerboard_with_pins_compacts_around_them() {
    let roots = 128u64;
    let mut p = Pmm::<StdStorage>::new(BASE, roots * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let per_root = (SZ_2M / SZ_64K) as usize;
    let mut out = vec![ChunkId::default(); roots as usize * per_root];
    p.alloc(SZ_64K, MemType::User, AllocFlags::default(), &mut out)
        .unwrap();
    let mut m = Model::new();
    for (i, id) in out.iter().enumerate() {
        p.unpin_allocated(*id).unwrap();
        if i % 2 == 1 {
            p.free(*id, Zero::Dirty).unwrap();
        } else {
            let kind = if i % 2002 == 0 {
                p.p2p_pin(*id).unwrap();
                Kind::Pinned
            } else {
                Kind::Movable
            };
            m.insert(
                p.addr(*id).unwrap(),
                Chunk {
                    id: *id,
                    size: SZ_64K,
                    kind,
                },
            );
        }
    }
    assert_eq!(p.largest_free(), SZ_64K);
    assert_eq!(
        p.alloc_contiguous(32 * SZ_2M, MemType::User),
        Err(PmmError::NoSpace)
    );
    let mut bufs = PlanBuffers::new();
    let bytes = p.plan_compaction(Goal::Contiguous(32), &mut bufs).unwrap();
    let plan = bufs.moves().to_vec();
    assert_eq!(
        bytes,
        32 * SZ_2M / 2,
        "exactly the half of the window that is in use moves"
    );
    check_plan(&p, &m, roots, Goal::Contiguous(32), &plan);
    let pinned_roots: Vec<u64> = m
        .iter()
        .filter(|(_, c)| c.kind == Kind::Pinned)
        .map(|(a, _)| root_of(*a))
        .collect();
    for mv in &plan {
        assert!(
            !pinned_roots.contains(&root_of(mv.from)),
            "{mv:?} empties a pinned root"
        );
    }
    let pins_before: Vec<(u64, ChunkId)> = m
        .iter()
        .filter(|(_, c)| c.kind == Kind::Pinned)
        .map(|(a, c)| (*a, c.id))
        .collect();
    execute(&mut p, &mut m, &plan);
    for (a, id) in pins_before {
        assert_eq!(p.addr(id).unwrap(), a, "a pinned chunk moved");
        assert_eq!(p.pins(id).unwrap(), 1);
    }
    assert!(p.alloc_contiguous(32 * SZ_2M, MemType::User).is_ok());
    p.check().unwrap();
}

/// A pinned chunk in every root: no root can be emptied, and the plan says so; once one pin
/// goes, its root can.
#[test]
fn pinned_everywhere_means_no_plan() {
    let mut p = Pmm::<StdStorage>::new(BASE, 4 * SZ_2M, PMM_CHUNKS_DEFAULT).unwrap();
    let mut ids = Vec::new();
    for r in 0..4 {
        let id = p
            .alloc_at(BASE + r * SZ_2M + SZ_64K, SZ_64K, MemType::User)
            .unwrap();
        p.unpin_allocated(id).unwrap();
        p.p2p_pin(id).unwrap();
        ids.push(id);
    }
    let mut plan = PlanBuffers::new();
    assert_eq!(
        p.plan_compaction(Goal::Contiguous(1), &mut plan),
        Err(PmmError::NoSpace)
    );
    assert_eq!(
        p.plan_compaction(Goal::Roots(1), &mut plan),
        Err(PmmError::NoSpace)
    );
    p.p2p_unpin(ids[2]).unwrap();
    assert_eq!(
        p.plan_compaction(Goal::Contiguous(1), &mut plan),
        Ok(SZ_64K)
    );
    let moves = plan.moves();
    assert_eq!(moves.len(), 1);
    assert_eq!(root_of(moves[0].from), 2);
    assert_ne!(root_of(moves[0].to), 2);
    // Without whole free roots to use, the chunk goes into a hole of another root.
    assert_eq!(p.plan_compaction(Goal::Roots(1), &mut plan), Ok(SZ_64K));
}

/// The planner's own sort agrees with `core`'s on random input.
#[test]
fn heapsort_sorts() {
    let mut seed = 0x1234_5678u64;
    for n in 0..200 {
        let mut v: Vec<(u64, u32)> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) % 17, (seed >> 20) as u32)
            })
            .collect();
        let mut w = v.clone();
        crate::pmm::compact::sort_by_key(&mut v, |x| *x);
        w.sort_unstable();
        assert_eq!(v, w);
    }
}
