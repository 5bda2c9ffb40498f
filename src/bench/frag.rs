// SPDX-License-Identifier: GPL-2.0

//! The fragmentation traces: what a user feels of fragmentation, with and without compaction.
//!
//! `checkerboard_then_2m_256M` times how fast an allocator refuses a request it cannot answer;
//! a user feels something else: after a long churn of small allocations, how many requests for
//! a whole 2 MiB root, or for 8 MiB of adjacent memory, are answered, and how long they take.
//! These traces measure that on three allocators, the same seeded trace on each:
//!
//! - nvrs's manager as `compact_on_alloc=1` uses it ([`Movable`] with compaction): user chunks,
//!   one in [`PIN_ONE_IN`] of them P2P-pinned (so it cannot move), and a request that fails
//!   although enough memory is free plans a compaction, moves chunks (`begin_move`, a copy,
//!   `finish_move`) and tries once more. The copy is modelled by a `memcpy` of the moved bytes
//!   in system memory (a real GPU copies with its copy engine, an emulated one through the
//!   aperture: the VM's `compact_checkerboard_64M` line measures that path);
//! - the same manager without compaction (`compact_on_alloc=0`);
//! - the anchor, the kernel's `gpu_buddy`, which cannot move memory ([`Fixed`]): a contiguous
//!   request is its `GPU_BUDDY_CONTIGUOUS_ALLOCATION` in blocks of at least 2 MiB, which tries
//!   harder than one naturally aligned block.
//!
//! The trace, a long-running GPU that was once full: fill 1 GiB with 4 KiB (30%) and 64 KiB
//! (70%) allocations until the first refusal, free a random fifth of them, churn at that level
//! (free a random one or allocate one), then, every [`GAP`] churn steps, one request timed on its
//! own, alternating a 2 MiB allocation and an 8 MiB contiguous one. A request that succeeds
//! is held for the next [`HOLD`] requests of its kind, so that later requests need new room. Each kind's line gives the mean time per request
//! (failures included), the slowest request, the requests answered and refused, and the bytes
//! compaction moved.
//!
//! Pure (no `kernel::`), like [`super::traces`].

use super::traces::{
    BenchAlloc,
    Clock,
    Line,
    Outcome,
    Rng,
    Rounds,
    Scale,
    Tally,
    ROUNDS,
    SEED,
    SZ_2M,
    SZ_4K,
    SZ_64K, //
};
use crate::pmm::{
    compact::{
        Goal,
        PlanBuffers, //
    },
    AllocFlags,
    ChunkId,
    ChunkVec,
    MemType,
    OutOfMemory,
    Pmm,
    Storage,
    Zero, //
};

/// The name `bench_pmm` selects the fragmentation traces by.
pub(crate) const NAME: &str = "frag_1G";

/// The lines the fragmentation traces print: per request kind, nvrs with and without compaction
/// against `gpu_buddy`.
pub(crate) const LINES: [[&str; 2]; 2] = [
    ["frag_2m_compact_1G", "frag_2m_nocompact_1G"],
    ["frag_contig8m_compact_1G", "frag_contig8m_nocompact_1G"],
];

/// The memory the traces run on.
const BYTES: u64 = 1 << 30;
/// Most live small allocations: more than fill [`BYTES`] at their mean size (46 KiB).
const LIVE: usize = 24_000;
/// Churn steps between two requests.
const GAP: usize = 32;
/// One small allocation in this many is P2P-pinned (about 1.5% of the memory in use).
const PIN_ONE_IN: usize = 64;
/// Answered requests of each kind held at once (the oldest is freed first).
const HOLD: usize = 8;
/// The contiguous request: 8 MiB (four roots).
const CONTIG: u64 = 4 * SZ_2M;

/// An allocator of the fragmentation traces.
pub(crate) trait FragAlloc {
    /// What an allocation returns.
    type Handle: Copy;
    /// Allocates `size` bytes, P2P-pinned if `pinned` (pinned memory cannot move).
    fn alloc(&mut self, size: u64, pinned: bool) -> Option<Self::Handle>;
    /// Frees what [`FragAlloc::alloc`] returned.
    fn free(&mut self, h: Self::Handle);
    /// Allocates `bytes` of adjacent memory.
    fn alloc_contiguous(&mut self, bytes: u64) -> Option<Self::Handle>;
    /// Frees what [`FragAlloc::alloc_contiguous`] returned.
    fn free_contiguous(&mut self, h: Self::Handle);
    /// Bytes moved so far.
    fn moved(&self) -> u64;
    /// The largest free contiguous block, in bytes.
    fn largest_free(&self) -> u64;
    /// Bytes of the allocator's bookkeeping.
    fn metadata_bytes(&self) -> u64;
}

/// An allocator that cannot move memory: a pin changes nothing for it.
pub(crate) struct Fixed<A>(pub(crate) A);

impl<A: BenchAlloc> FragAlloc for Fixed<A> {
    type Handle = A::Handle;

    fn alloc(&mut self, size: u64, _pinned: bool) -> Option<A::Handle> {
        self.0.alloc(size)
    }

    fn free(&mut self, h: A::Handle) {
        self.0.free(h)
    }

    fn alloc_contiguous(&mut self, bytes: u64) -> Option<A::Handle> {
        self.0.alloc_contiguous(bytes)
    }

    fn free_contiguous(&mut self, h: A::Handle) {
        self.0.free_contiguous(h)
    }

    fn moved(&self) -> u64 {
        0
    }

    fn largest_free(&self) -> u64 {
        self.0.largest_free()
    }

    fn metadata_bytes(&self) -> u64 {
        self.0.metadata_bytes()
    }
}

/// Slots of the owner table per root: more than the sub-chunks a root can have (545 with
/// 2 MiB → 64 KiB → 4 KiB).
const STRIDE: usize = 1024;

/// nvrs's manager holding user memory, as `/dev/nvrs` allocations do, with or without
/// compaction on a failed request. A handle is a slot of [`Movable::chunks`]; the owner table
/// finds the slot of a moved chunk in O(1), as an allocation's piece list does in the driver.
pub(crate) struct Movable<S: Storage> {
    /// The manager.
    pmm: Pmm<S>,
    /// Whether a failed request compacts and tries once more.
    compact: bool,
    /// The compaction plan's working memory.
    plan: PlanBuffers<S>,
    /// The chunk of each handle.
    chunks: S::Vec<ChunkId>,
    /// Whether each handle is P2P-pinned.
    pinned: S::Vec<bool>,
    /// Handles not in use.
    spare: S::Vec<u32>,
    /// The handle of each allocated chunk, by `root * STRIDE + sub`.
    owner: S::Vec<u32>,
    /// The copy's source and destination, 2 MiB each (compacting managers only).
    scratch: S::Vec<u8>,
    /// Bytes moved.
    moved: u64,
}

impl<S: Storage> Movable<S> {
    /// Wraps a fresh manager for at most `handles` live allocations.
    pub(crate) fn new(pmm: Pmm<S>, compact: bool, handles: usize) -> Result<Self, OutOfMemory> {
        let mut m = Movable {
            owner: S::Vec::new(),
            pmm,
            compact,
            plan: PlanBuffers::new(),
            chunks: S::Vec::new(),
            pinned: S::Vec::new(),
            spare: S::Vec::new(),
            scratch: S::Vec::new(),
            moved: 0,
        };
        let slots = m.pmm.root_count().checked_mul(STRIDE).ok_or(OutOfMemory)?;
        m.owner.try_reserve(slots)?;
        for _ in 0..slots {
            m.owner.try_push(0)?;
        }
        m.chunks.try_reserve(handles)?;
        m.pinned.try_reserve(handles)?;
        m.spare.try_reserve(handles)?;
        for h in (0..handles).rev() {
            m.chunks.try_push(ChunkId::default())?;
            m.pinned.try_push(false)?;
            m.spare
                .try_push(u32::try_from(h).map_err(|_| OutOfMemory)?)?;
        }
        if compact {
            let bytes = usize::try_from(2 * SZ_2M).map_err(|_| OutOfMemory)?;
            m.scratch.try_reserve(bytes)?;
            for _ in 0..bytes {
                m.scratch.try_push(0)?;
            }
        }
        Ok(m)
    }

    /// The owner-table index of `id`.
    fn key(id: ChunkId) -> Option<usize> {
        let sub = usize::from(id.sub());
        let root = usize::try_from(id.root()).ok()?;
        (sub < STRIDE).then(|| root.checked_mul(STRIDE)?.checked_add(sub))?
    }

    /// Gives the allocated `id` a handle; on failure frees it again.
    fn own(&mut self, id: ChunkId, pinned: bool) -> Option<u32> {
        let pinned = pinned && self.pmm.p2p_pin(id).is_ok();
        let h = self.spare.pop();
        let slot = h.and_then(|h| Some((h, usize::try_from(h).ok()?, Self::key(id)?)));
        let Some((h, i, key)) = slot else {
            // Out of handles or an unexpected id: give the memory back.
            if let Some(h) = h {
                let _ = self.spare.try_push(h);
            }
            if pinned {
                let _ = self.pmm.p2p_unpin(id);
            }
            let _ = self.pmm.free(id, Zero::Dirty);
            return None;
        };
        if let (Some(c), Some(p), Some(o)) = (
            self.chunks.get_mut(i),
            self.pinned.get_mut(i),
            self.owner.get_mut(key),
        ) {
            (*c, *p, *o) = (id, pinned, h);
        }
        Some(h)
    }

    /// Copies `size` bytes from the scratch source to the scratch destination.
    fn copy(&mut self, size: u64) {
        let half = usize::try_from(SZ_2M).unwrap_or(0);
        let n = usize::try_from(size).unwrap_or(half).min(half);
        if let Some((src, dst)) = self.scratch.split_at_mut_checked(half) {
            if let (Some(s), Some(d)) = (src.get(..n), dst.get_mut(..n)) {
                d.copy_from_slice(s);
            }
        }
    }

    /// Compacts for `goal` as the driver's compaction does: plan, then each move in turn
    /// (skipping a move whose chunk or destination changed). Whether a plan was found.
    fn make_room(&mut self, goal: Goal) -> bool {
        if self.plan.reserve(self.pmm.plan_sizing()).is_err()
            || self.pmm.plan_compaction(goal, &mut self.plan).is_err()
        {
            return false;
        }
        let mut i = 0;
        while let Some(&mv) = self.plan.moves().get(i) {
            i += 1;
            let Ok(dst) = self.pmm.begin_move(mv.chunk, mv.to) else {
                continue;
            };
            self.copy(mv.size);
            if self.pmm.finish_move(mv.chunk, dst, Zero::Dirty).is_err() {
                return false;
            }
            let h = Self::key(mv.chunk).and_then(|k| self.owner.get(k).copied());
            if let (Some(h), Some(k)) = (h, Self::key(dst)) {
                if let Some(o) = self.owner.get_mut(k) {
                    *o = h;
                }
                if let Some(c) = usize::try_from(h).ok().and_then(|i| self.chunks.get_mut(i)) {
                    *c = dst;
                }
            }
            self.moved += mv.size;
        }
        true
    }

    /// One allocation of `size`, with compaction and one more try if it fails.
    fn alloc_chunk(&mut self, size: u64) -> Option<ChunkId> {
        let mut id = [ChunkId::default()];
        let flags = AllocFlags::default();
        let mut r = self.pmm.alloc(size, MemType::User, flags, &mut id);
        if r.is_err() && self.compact && self.make_room(Goal::Roots(1)) {
            r = self.pmm.alloc(size, MemType::User, flags, &mut id);
        }
        r.ok()?;
        self.pmm.unpin_allocated(id[0]).ok()?;
        Some(id[0])
    }
}

impl<S: Storage> FragAlloc for Movable<S> {
    type Handle = u32;

    #[inline(never)]
    fn alloc(&mut self, size: u64, pinned: bool) -> Option<u32> {
        let id = self.alloc_chunk(size)?;
        self.own(id, pinned)
    }

    #[inline(never)]
    fn free(&mut self, h: u32) {
        let Some(i) = usize::try_from(h).ok() else {
            return;
        };
        let (Some(&id), Some(&pinned)) = (self.chunks.get(i), self.pinned.get(i)) else {
            return;
        };
        if pinned {
            let _ = self.pmm.p2p_unpin(id);
        }
        let _ = self.pmm.free(id, Zero::Dirty);
        // Room was reserved for every handle.
        let _ = self.spare.try_push(h);
    }

    #[inline(never)]
    fn alloc_contiguous(&mut self, bytes: u64) -> Option<u32> {
        let mut r = self.pmm.alloc_contiguous(bytes, MemType::User);
        if r.is_err() && self.compact {
            let roots = u32::try_from(bytes.div_ceil(SZ_2M)).ok()?;
            if self.make_room(Goal::Contiguous(roots)) {
                r = self.pmm.alloc_contiguous(bytes, MemType::User);
            }
        }
        let id = r.ok()?;
        self.pmm.unpin_allocated(id).ok()?;
        self.own(id, false)
    }

    fn free_contiguous(&mut self, h: u32) {
        // A run is freed through its first root, like any chunk.
        FragAlloc::free(self, h)
    }

    fn moved(&self) -> u64 {
        self.moved
    }

    fn largest_free(&self) -> u64 {
        self.pmm.largest_free()
    }

    fn metadata_bytes(&self) -> u64 {
        u64::try_from(self.pmm.metadata_bytes()).unwrap_or(u64::MAX)
    }
}

/// The sizes of the churn: 4 KiB 30%, 64 KiB 70%.
fn small(r: &mut Rng) -> u64 {
    if r.below(10) < 3 {
        SZ_4K
    } else {
        SZ_64K
    }
}

/// One churn step: frees a random live allocation (always at `cap`), or allocates one.
fn step<A: FragAlloc, S: Storage>(
    a: &mut A,
    live: &mut S::Vec<A::Handle>,
    rng: &mut Rng,
    cap: usize,
) -> Result<(), OutOfMemory> {
    if !live.is_empty() && (live.len() >= cap || rng.below(2) == 0) {
        let i = rng.below(live.len());
        let last = live.len() - 1;
        live.swap(i, last);
        if let Some(h) = live.pop() {
            a.free(h);
        }
    } else {
        let size = small(rng);
        let pinned = rng.below(PIN_ONE_IN) == 0;
        if let Some(h) = a.alloc(size, pinned) {
            live.try_push(h)?;
        }
    }
    Ok(())
}

/// Timing of one kind of request.
struct Kind<H> {
    /// The last [`HOLD`] requests' answers, by request number modulo [`HOLD`].
    held: [Option<H>; HOLD],
    /// Nanoseconds, all requests.
    ns: u64,
    /// The slowest request.
    worst: u64,
    /// Bytes moved to answer them.
    moved: u64,
    /// Answered and refused.
    tally: Tally,
}

impl<H: Copy> Default for Kind<H> {
    fn default() -> Self {
        Kind {
            held: [None; HOLD],
            ns: 0,
            worst: 0,
            moved: 0,
            tally: Tally::default(),
        }
    }
}

/// Runs the trace on `a`: the outcome of the 2 MiB requests, then of the contiguous ones.
pub(crate) fn frag<A: FragAlloc, S: Storage, C: Clock>(
    a: &mut A,
    clock: &C,
    warm: usize,
    requests: usize,
) -> Result<[Outcome; 2], OutOfMemory> {
    let mut rng = Rng(SEED ^ 0x6672_6167);
    let mut live = S::Vec::<A::Handle>::new();
    live.try_reserve(LIVE)?;
    // Fill until the first refusal, free a random fifth, then churn at that level.
    while live.len() < LIVE {
        let size = small(&mut rng);
        let pinned = rng.below(PIN_ONE_IN) == 0;
        match a.alloc(size, pinned) {
            Some(h) => live.try_push(h)?,
            None => break,
        }
    }
    let cap = live.len() / 5 * 4;
    while live.len() > cap {
        let i = rng.below(live.len());
        let last = live.len() - 1;
        live.swap(i, last);
        if let Some(h) = live.pop() {
            a.free(h);
        }
    }
    for _ in 0..warm {
        step::<A, S>(a, &mut live, &mut rng, cap)?;
    }
    let mut kinds: [Kind<A::Handle>; 2] = [Kind::default(), Kind::default()];
    for i in 0..2 * requests {
        for _ in 0..GAP {
            step::<A, S>(a, &mut live, &mut rng, cap)?;
        }
        let contiguous = i % 2 == 1;
        let Some(k) = kinds.get_mut(i % 2) else {
            break;
        };
        let Some(slot) = k.held.get_mut(i / 2 % HOLD) else {
            break;
        };
        if let Some(h) = slot.take() {
            if contiguous {
                a.free_contiguous(h);
            } else {
                a.free(h);
            }
        }
        let moved = a.moved();
        let t = clock.now_ns();
        let h = if contiguous {
            a.alloc_contiguous(CONTIG)
        } else {
            a.alloc(SZ_2M, false)
        };
        let ns = clock.now_ns().saturating_sub(t);
        *slot = k.tally.count(h);
        k.ns = k.ns.saturating_add(ns);
        k.worst = k.worst.max(ns);
        k.moved = k.moved.saturating_add(a.moved().saturating_sub(moved));
    }
    let per = u64::try_from(requests).unwrap_or(u64::MAX).max(1);
    let (largest_free, metadata) = (a.largest_free(), a.metadata_bytes());
    let outcome = |k: &Kind<A::Handle>| Outcome {
        deci_ns_per_op: k.ns.saturating_mul(10) / per,
        largest_free,
        metadata,
        ok: k.tally.ok,
        failed: k.tally.failed,
        worst_ns: k.worst,
        moved: k.moved,
        ..Outcome::default()
    };
    let [two, contig] = &kinds;
    let result = [outcome(two), outcome(contig)];
    let [two, contig] = kinds;
    for h in two.held.into_iter().flatten() {
        a.free(h);
    }
    for h in contig.held.into_iter().flatten() {
        a.free_contiguous(h);
    }
    while let Some(h) = live.pop() {
        a.free(h);
    }
    Ok(result)
}

/// The rounds of one request kind: nvrs with compaction, without, and the anchor.
pub(crate) type KindRounds = [Rounds; 3];

/// Runs the trace [`ROUNDS`] times on fresh allocators, rotating which of the three runs first;
/// per request kind, the rounds of nvrs with compaction, without, and of the anchor. `None` if
/// an allocator could not be built or ran out of memory for the trace's bookkeeping.
pub(crate) fn run<S, C, B>(
    clock: &C,
    scale: Scale,
    nvrs: &impl Fn(u64) -> Option<Pmm<S>>,
    anchor: &impl Fn(u64) -> Option<B>,
) -> Option<[KindRounds; 2]>
where
    S: Storage,
    C: Clock,
    B: BenchAlloc,
{
    let warm = 2 * LIVE;
    let requests = scale.frag_requests;
    let movable = |compact: bool| -> Option<[Outcome; 2]> {
        let mut m = Movable::new(nvrs(BYTES)?, compact, LIVE + 2).ok()?;
        frag::<_, S, _>(&mut m, clock, warm, requests).ok()
    };
    let fixed = || -> Option<[Outcome; 2]> {
        let mut b = Fixed(anchor(BYTES)?);
        frag::<_, S, _>(&mut b, clock, warm, requests).ok()
    };
    let mut out: [KindRounds; 2] = Default::default();
    for round in 0..ROUNDS {
        let mut got: [[Outcome; 2]; 3] = Default::default();
        for k in 0..3 {
            let side = (round + k) % 3;
            let r = match side {
                0 => movable(true)?,
                1 => movable(false)?,
                _ => fixed()?,
            };
            if let Some(slot) = got.get_mut(side) {
                *slot = r;
            }
        }
        for (kind, rounds) in out.iter_mut().enumerate() {
            for (side, r) in rounds.iter_mut().enumerate() {
                if let Some(o) = got.get(side).and_then(|g| g.get(kind)) {
                    r.push(*o);
                }
            }
        }
    }
    Some(out)
}

/// The four lines of the fragmentation traces, for `emit` (see [`super::traces::run_suite`]).
pub(crate) fn lines<'a>(
    r: Option<&'a [KindRounds; 2]>,
) -> impl Iterator<Item = (&'static str, Option<Line<'a>>)> {
    LINES.iter().enumerate().flat_map(move |(kind, names)| {
        names.iter().enumerate().map(move |(side, &name)| {
            let line = r.and_then(|r| r.get(kind)).and_then(|k| {
                Some(Line {
                    trace: name,
                    nvrs: k.get(side)?,
                    anchor: k.get(2)?,
                    expect_same_work: false,
                })
            });
            (name, line)
        })
    })
}
