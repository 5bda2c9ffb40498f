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
//!   harder than one naturally aligned block;
//! - the anchor with the policy amdgpu and xe put over it, TTM's ([`Evicting`]): a request that
//!   fails evicts the least recently allocated movable allocation to system memory (a `memcpy`
//!   of its bytes, as nvrs's moves are modelled) and tries again, until it succeeds or nothing
//!   is left to evict. Pinned allocations are not on the LRU. Only the timed requests evict:
//!   the churn's own allocations fail only at the fill's end, which sets the memory's level.
//!   An evicted allocation stays live in system memory until the trace frees it; its bytes are
//!   no longer in GPU memory, which the line counts (`moved_anchor`, `moves_anchor`).
//!
//! The trace, a long-running GPU that was once full: fill 1 GiB with 4 KiB (30%) and 64 KiB
//! (70%) allocations until the first refusal, free a random fifth of them, churn at that level
//! (free a random one or allocate one), then, every [`GAP`] churn steps, one request timed on its
//! own, alternating a 2 MiB allocation and an 8 MiB contiguous one. A request that succeeds
//! is held for the next [`HOLD`] requests of its kind, so that later requests need new room.
//! Each kind's line gives the mean time per request (failures included), the slowest request,
//! the requests answered and refused, and the bytes and allocations compaction moved (or
//! eviction evicted). Each move or eviction also costs a real driver a remap and a TLB
//! invalidate, which no side here pays: the move counts say how many each side would.
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
/// The first two against `gpu_buddy` as it is, the third nvrs with compaction against
/// `gpu_buddy` with LRU eviction.
pub(crate) const LINES: [[&str; 3]; 2] = [
    [
        "frag_2m_compact_1G",
        "frag_2m_nocompact_1G",
        "frag_2m_compact_vs_lru_evict_1G",
    ],
    [
        "frag_contig8m_compact_1G",
        "frag_contig8m_nocompact_1G",
        "frag_contig8m_compact_vs_lru_evict_1G",
    ],
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
    /// Bytes moved (or evicted) so far.
    fn moved(&self) -> u64;
    /// Allocations moved (or evicted) so far.
    fn moves(&self) -> u64;
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

    fn moves(&self) -> u64 {
        0
    }

    fn largest_free(&self) -> u64 {
        self.0.largest_free()
    }

    fn metadata_bytes(&self) -> u64 {
        self.0.metadata_bytes()
    }
}

/// The modelled copy of moved or evicted memory: `size` bytes (at most 2 MiB at a time) from
/// the first half of `scratch` to its second half.
fn copy_scratch(scratch: &mut [u8], size: u64) {
    let half = usize::try_from(SZ_2M).unwrap_or(0);
    let mut left = size;
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(half).min(half);
        if let Some((src, dst)) = scratch.split_at_mut_checked(half) {
            if let (Some(s), Some(d)) = (src.get(..n), dst.get_mut(..n)) {
                d.copy_from_slice(s);
            }
        }
        left = left.saturating_sub(u64::try_from(n.max(1)).unwrap_or(u64::MAX));
    }
}

/// No slot: ends the LRU list.
const NIL: u32 = u32::MAX;

/// One allocation of [`Evicting`].
#[derive(Clone, Copy)]
struct Slot<H> {
    /// The block in GPU memory; `None` once evicted (or while the slot is spare).
    block: Option<H>,
    /// Its size.
    size: u64,
    /// Pinned: never on the LRU.
    pinned: bool,
    /// Contiguous (freed with [`BenchAlloc::free_contiguous`]).
    contiguous: bool,
    /// On the LRU.
    listed: bool,
    /// The LRU neighbours (toward the oldest, toward the newest).
    prev: u32,
    next: u32,
}

/// `gpu_buddy` with TTM's policy over it (see the module documentation): a failed timed request
/// evicts the least recently allocated movable allocation to system memory and tries again.
/// A handle is a slot; the LRU is a list through the slots, oldest first.
pub(crate) struct Evicting<A: BenchAlloc, S: Storage> {
    /// The allocator.
    a: A,
    /// The allocations, by handle.
    slots: S::Vec<Slot<A::Handle>>,
    /// Handles not in use.
    spare: S::Vec<u32>,
    /// The LRU's oldest and newest slot.
    head: u32,
    tail: u32,
    /// The copy's source and destination, 2 MiB each.
    scratch: S::Vec<u8>,
    /// Bytes and allocations evicted.
    moved: u64,
    moves: u64,
}

impl<A: BenchAlloc, S: Storage> Evicting<A, S> {
    /// Wraps a fresh allocator for at most `handles` live allocations.
    pub(crate) fn new(a: A, handles: usize) -> Result<Self, OutOfMemory> {
        let mut e: Self = Evicting {
            a,
            slots: S::Vec::new(),
            spare: S::Vec::new(),
            head: NIL,
            tail: NIL,
            scratch: S::Vec::new(),
            moved: 0,
            moves: 0,
        };
        e.slots.try_reserve(handles)?;
        e.spare.try_reserve(handles)?;
        for h in (0..handles).rev() {
            e.slots.try_push(Slot {
                block: None,
                size: 0,
                pinned: false,
                contiguous: false,
                listed: false,
                prev: NIL,
                next: NIL,
            })?;
            e.spare
                .try_push(u32::try_from(h).map_err(|_| OutOfMemory)?)?;
        }
        let bytes = usize::try_from(2 * SZ_2M).map_err(|_| OutOfMemory)?;
        e.scratch.try_reserve(bytes)?;
        for _ in 0..bytes {
            e.scratch.try_push(0)?;
        }
        Ok(e)
    }

    fn slot(&mut self, h: u32) -> Option<&mut Slot<A::Handle>> {
        self.slots.get_mut(usize::try_from(h).ok()?)
    }

    /// Appends `h` to the LRU (the newest).
    fn lru_push(&mut self, h: u32) {
        let tail = self.tail;
        if let Some(s) = self.slot(h) {
            (s.prev, s.next, s.listed) = (tail, NIL, true);
        }
        match self.slot(tail) {
            Some(t) => t.next = h,
            None => self.head = h,
        }
        self.tail = h;
    }

    /// Takes `h` off the LRU, if it is on it.
    fn lru_remove(&mut self, h: u32) {
        let Some(s) = self.slot(h) else {
            return;
        };
        if !s.listed {
            return;
        }
        let (prev, next) = (s.prev, s.next);
        (s.prev, s.next, s.listed) = (NIL, NIL, false);
        match self.slot(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.slot(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    /// Evicts the oldest movable allocation; whether there was one.
    fn evict_one(&mut self) -> bool {
        let h = self.head;
        self.lru_remove(h);
        let Some(s) = self.slot(h) else {
            return false;
        };
        let (block, size, contiguous) = (s.block.take(), s.size, s.contiguous);
        let Some(block) = block else {
            return false;
        };
        copy_scratch(&mut self.scratch, size);
        if contiguous {
            self.a.free_contiguous(block);
        } else {
            self.a.free(block);
        }
        self.moved += size;
        self.moves += 1;
        true
    }

    /// Gives `block` a handle (on the LRU unless pinned); on failure frees it again.
    fn own(&mut self, block: A::Handle, size: u64, pinned: bool, contiguous: bool) -> Option<u32> {
        let Some(h) = self.spare.pop() else {
            if contiguous {
                self.a.free_contiguous(block);
            } else {
                self.a.free(block);
            }
            return None;
        };
        if let Some(s) = self.slot(h) {
            (s.block, s.size, s.pinned, s.contiguous) = (Some(block), size, pinned, contiguous);
        }
        if !pinned {
            self.lru_push(h);
        }
        Some(h)
    }

    /// Frees handle `h`, in GPU memory or (evicted) in system memory.
    fn release(&mut self, h: u32) {
        self.lru_remove(h);
        let Some(s) = self.slot(h) else {
            return;
        };
        let (block, contiguous) = (s.block.take(), s.contiguous);
        match block {
            Some(b) if contiguous => self.a.free_contiguous(b),
            Some(b) => self.a.free(b),
            None => {}
        }
        // Room was reserved for every handle.
        let _ = self.spare.try_push(h);
    }
}

impl<A: BenchAlloc, S: Storage> FragAlloc for Evicting<A, S> {
    type Handle = u32;

    #[inline(never)]
    fn alloc(&mut self, size: u64, pinned: bool) -> Option<u32> {
        let mut b = self.a.alloc(size);
        // Only the timed requests (2 MiB) evict; see the module documentation.
        while b.is_none() && size >= SZ_2M && self.evict_one() {
            b = self.a.alloc(size);
        }
        self.own(b?, size, pinned, false)
    }

    fn free(&mut self, h: u32) {
        self.release(h)
    }

    #[inline(never)]
    fn alloc_contiguous(&mut self, bytes: u64) -> Option<u32> {
        let mut b = self.a.alloc_contiguous(bytes);
        while b.is_none() && self.evict_one() {
            b = self.a.alloc_contiguous(bytes);
        }
        self.own(b?, bytes, false, true)
    }

    fn free_contiguous(&mut self, h: u32) {
        self.release(h)
    }

    fn moved(&self) -> u64 {
        self.moved
    }

    fn moves(&self) -> u64 {
        self.moves
    }

    fn largest_free(&self) -> u64 {
        self.a.largest_free()
    }

    fn metadata_bytes(&self) -> u64 {
        self.a.metadata_bytes()
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
    /// Chunks moved.
    moves: u64,
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
            moves: 0,
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
        copy_scratch(&mut self.scratch, size);
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
            self.moves += 1;
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

    fn moves(&self) -> u64 {
        self.moves
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
    if rng.frees(live.len(), cap) {
        if let Some(h) = rng.take(live) {
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
    /// Allocations moved to answer them.
    moves: u64,
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
            moves: 0,
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
        if let Some(h) = rng.take(&mut live) {
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
        let (moved, moves) = (a.moved(), a.moves());
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
        k.moves = k.moves.saturating_add(a.moves().saturating_sub(moves));
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
        moves: k.moves,
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

/// The rounds of one request kind: nvrs with compaction, without, the anchor, and the anchor
/// with LRU eviction.
pub(crate) type KindRounds = [Rounds; SIDES];

/// The sides of the fragmentation traces.
const SIDES: usize = 4;

/// Runs the trace [`ROUNDS`] times on fresh allocators, rotating which of the four runs first;
/// per request kind, the rounds of nvrs with compaction, without, of the anchor, and of the
/// anchor with LRU eviction. `None` if an allocator could not be built or ran out of memory for
/// the trace's bookkeeping.
pub(crate) fn run<S, C, B>(
    clock: &C,
    scale: Scale,
    nvrs: &impl Fn(u64) -> Option<Pmm<S>>,
    anchor: &impl Fn(u64) -> Option<B>,
) -> Option<S::Vec<KindRounds>>
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
    let evicting = || -> Option<[Outcome; 2]> {
        let mut b = Evicting::<B, S>::new(anchor(BYTES)?, LIVE + 2 * HOLD + 2).ok()?;
        frag::<_, S, _>(&mut b, clock, warm, requests).ok()
    };
    // The rounds live on the heap: this runs deep in a kernel stack (see `traces::run_suite`).
    let mut out = S::Vec::<KindRounds>::new();
    out.try_reserve(LINES.len()).ok()?;
    for _ in LINES {
        out.try_push(KindRounds::default()).ok()?;
    }
    for round in 0..ROUNDS {
        let mut got: [[Outcome; 2]; SIDES] = Default::default();
        for k in 0..SIDES {
            let side = (round + k) % SIDES;
            let r = match side {
                0 => movable(true)?,
                1 => movable(false)?,
                2 => fixed()?,
                _ => evicting()?,
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

/// The six lines of the fragmentation traces, for `emit` (see [`super::traces::run_suite`]).
pub(crate) fn lines<'a>(
    r: Option<&'a [KindRounds]>,
) -> impl Iterator<Item = (&'static str, Option<Line<'a>>)> {
    // (nvrs side, anchor side) of each line of a kind.
    const PAIRS: [(usize, usize); 3] = [(0, 2), (1, 2), (0, 3)];
    LINES.iter().enumerate().flat_map(move |(kind, names)| {
        names.iter().zip(PAIRS).map(move |(&name, (n, a))| {
            let line = r.and_then(|r| r.get(kind)).and_then(|k| {
                Some(Line {
                    trace: name,
                    nvrs: k.get(n)?,
                    anchor: k.get(a)?,
                    expect_same_work: false,
                })
            });
            (name, line)
        })
    })
}
