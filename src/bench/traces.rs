// SPDX-License-Identifier: GPL-2.0

//! Allocation traces for benchmarking a buddy allocator, identical for every allocator measured.
//!
//! The same traces run on the nvrs memory manager and on its anchor, the kernel's own
//! `gpu_buddy` (in the kernel, and on the host built from the kernel source for user space),
//! with the same seeded PRNG, so their numbers are comparable within a run. They time whole
//! traces and report nanoseconds per operation; nothing here asserts anything about time.
//!
//! Fairness: each side is entered through one call per operation that is not inlined into the
//! trace (`gpu_buddy` through C, nvrs through `#[inline(never)]` methods), each trace runs
//! [`ROUNDS`] times on fresh allocators with the order alternated (nvrs first in even rounds,
//! the anchor first in odd ones), and the line gives the median and the spread of each side,
//! with the number of allocations each side answered and refused: if those differ, the two
//! sides did not do the same work, and the line says so (`same_work=no`).
//!
//! This module is pure (no `kernel::`): the allocator, the clock and the storage for live
//! handles are parameters.

use crate::pmm::{
    AllocFlags,
    ChunkId,
    ChunkVec,
    MemType,
    OutOfMemory,
    Pmm,
    Storage,
    Zero, //
};

/// 4 KiB.
pub(crate) const SZ_4K: u64 = 1 << 12;
/// 64 KiB.
pub(crate) const SZ_64K: u64 = 1 << 16;
/// 2 MiB.
pub(crate) const SZ_2M: u64 = 1 << 21;

/// An allocator under measurement.
pub(crate) trait BenchAlloc {
    /// What an allocation returns.
    type Handle: Copy;
    /// Allocates one naturally aligned block of `size` bytes.
    fn alloc(&mut self, size: u64) -> Option<Self::Handle>;
    /// Frees a block.
    fn free(&mut self, h: Self::Handle);
    /// Allocates the block of `size` bytes at offset `addr` (aligned to `size`).
    fn alloc_at(&mut self, addr: u64, size: u64) -> Option<Self::Handle>;
    /// Allocates `bytes` (a multiple of 2 MiB) of adjacent memory, in blocks of at least 2 MiB.
    fn alloc_contiguous(&mut self, bytes: u64) -> Option<Self::Handle>;
    /// Frees what [`BenchAlloc::alloc_contiguous`] returned.
    fn free_contiguous(&mut self, h: Self::Handle);
    /// The largest free contiguous block, in bytes.
    fn largest_free(&self) -> u64;
    /// Bytes of bookkeeping the allocator holds now.
    fn metadata_bytes(&self) -> u64;
    /// The blocks that back one buffer (see [`BenchAlloc::alloc_buffer`]).
    type Buffer;
    /// Backs a buffer of `bytes` (a multiple of 4 KiB) as the driver does: in blocks of at least
    /// 64 KiB, adjacent or not, `bytes` rounded up to 64 KiB.
    fn alloc_buffer(&mut self, bytes: u64) -> Option<Self::Buffer>;
    /// Frees a buffer's blocks and what held them.
    fn free_buffer(&mut self, b: Self::Buffer);
    /// Bytes of the blocks that back `b`.
    fn buffer_bytes(&self, b: &Self::Buffer) -> u64;
    /// Bytes the buffer's owner holds to keep `b` (its vector or list of blocks; the blocks' own
    /// bookkeeping is in [`BenchAlloc::metadata_bytes`]).
    fn holder_bytes(b: &Self::Buffer) -> u64;
}

/// nvrs's manager under measurement: kernel-type chunks, owned at once (as `gpu_buddy` blocks
/// are), freed as dirty. Allocation and free are not inlined into the traces, as the anchor's C
/// functions cannot be: each side pays one call per operation.
impl<S: Storage> BenchAlloc for Pmm<S> {
    type Handle = ChunkId;

    #[inline(never)]
    fn alloc(&mut self, size: u64) -> Option<ChunkId> {
        let mut id = [ChunkId::default()];
        Pmm::alloc(self, size, MemType::Kernel, AllocFlags::default(), &mut id).ok()?;
        Some(id[0])
    }

    #[inline(never)]
    fn free(&mut self, h: ChunkId) {
        // Every handle comes from `alloc` and is freed once: this cannot fail.
        let _ = Pmm::free(self, h, Zero::Dirty);
    }

    #[inline(never)]
    fn alloc_at(&mut self, addr: u64, size: u64) -> Option<ChunkId> {
        Pmm::alloc_at(self, self.base().checked_add(addr)?, size, MemType::Kernel).ok()
    }

    #[inline(never)]
    fn alloc_contiguous(&mut self, bytes: u64) -> Option<ChunkId> {
        Pmm::alloc_contiguous(self, bytes, MemType::Kernel).ok()
    }

    fn free_contiguous(&mut self, h: ChunkId) {
        // A run is freed through its first root.
        let _ = Pmm::free(self, h, Zero::Dirty);
    }

    fn largest_free(&self) -> u64 {
        Pmm::largest_free(self)
    }

    fn metadata_bytes(&self) -> u64 {
        u64::try_from(Pmm::metadata_bytes(self)).unwrap_or(u64::MAX)
    }

    /// The chunks of a buffer, in address order.
    type Buffer = S::Vec<ChunkId>;

    /// As `mem::backing::alloc_backing` backs a buffer: as many 2 MiB roots as fit, the rest in
    /// 64 KiB chunks, one vector of identifiers sorted by address (so that a pin's DMA mapping
    /// coalesces adjacent chunks).
    #[inline(never)]
    fn alloc_buffer(&mut self, bytes: u64) -> Option<S::Vec<ChunkId>> {
        let bytes = bytes.checked_next_multiple_of(SZ_64K)?;
        let bulk = usize::try_from(bytes / SZ_2M).ok()?;
        let tail = usize::try_from((bytes % SZ_2M) / SZ_64K).ok()?;
        let mut ids = S::Vec::<ChunkId>::new();
        ids.try_reserve(bulk + tail).ok()?;
        for _ in 0..bulk + tail {
            ids.try_push(ChunkId::NIL).ok()?;
        }
        let (big, small) = ids.split_at_mut(bulk);
        if !big.is_empty() {
            Pmm::alloc(self, SZ_2M, MemType::Kernel, AllocFlags::default(), big).ok()?;
        }
        if !small.is_empty()
            && Pmm::alloc(self, SZ_64K, MemType::Kernel, AllocFlags::default(), small).is_err()
        {
            for id in big.iter() {
                let _ = Pmm::free(self, *id, Zero::Dirty);
            }
            return None;
        }
        self.sort_by_addr(big);
        self.sort_by_addr(small);
        Some(ids)
    }

    #[inline(never)]
    fn free_buffer(&mut self, b: S::Vec<ChunkId>) {
        for id in b.iter() {
            // Every chunk comes from `alloc_buffer` and is freed once: this cannot fail.
            let _ = Pmm::free(self, *id, Zero::Dirty);
        }
    }

    fn buffer_bytes(&self, b: &S::Vec<ChunkId>) -> u64 {
        b.iter()
            .map(|id| Pmm::size(self, *id).unwrap_or(0))
            .fold(0, u64::saturating_add)
    }

    fn holder_bytes(b: &S::Vec<ChunkId>) -> u64 {
        let bytes = core::mem::size_of::<S::Vec<ChunkId>>()
            .saturating_add(core::mem::size_of_val::<[ChunkId]>(b));
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
}

/// A monotonic clock in nanoseconds.
pub(crate) trait Clock {
    /// Now.
    fn now_ns(&self) -> u64;
}

/// splitmix64, a small seeded PRNG.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0), by multiplying rather than dividing (Lemire), so that the
    /// traces' own cost, which both allocators pay, stays small next to theirs.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let n = u128::from(u64::try_from(n).unwrap_or(u64::MAX));
        usize::try_from((u128::from(self.next()) * n) >> 64).unwrap_or(0)
    }
}

impl Rng {
    /// Whether a churn step with `live` of at most `cap` live allocations frees one (always at
    /// `cap`, never with none, else at random).
    pub(crate) fn frees(&mut self, live: usize, cap: usize) -> bool {
        live != 0 && (live >= cap || self.below(2) == 0)
    }

    /// Takes a random element out of `live` (the last one takes its place).
    pub(crate) fn take<T, V: ChunkVec<T>>(&mut self, live: &mut V) -> Option<T> {
        let i = self.below(live.len());
        let last = live.len().checked_sub(1)?;
        live.swap(i, last);
        live.pop()
    }
}

/// The seed every trace uses.
pub(crate) const SEED: u64 = 0x6e76_7273;

/// The result of one trace on one allocator.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Outcome {
    /// Tenths of a nanosecond per operation.
    pub(crate) deci_ns_per_op: u64,
    /// Largest free block after the trace.
    pub(crate) largest_free: u64,
    /// Bytes of bookkeeping after the trace.
    pub(crate) metadata: u64,
    /// Allocations answered.
    pub(crate) ok: u64,
    /// Allocations refused.
    pub(crate) failed: u64,
    /// The slowest timed operation, in nanoseconds (0 where operations are not timed one by
    /// one).
    pub(crate) worst_ns: u64,
    /// Bytes the allocator moved to answer (compaction, or eviction to system memory; 0 for an
    /// allocator that cannot move).
    pub(crate) moved: u64,
    /// Allocations it moved (or evicted) to answer: each costs a driver a remap and a TLB
    /// invalidate.
    pub(crate) moves: u64,
    /// Bytes the owners of live buffers hold to keep them ([`BenchAlloc::holder_bytes`]; 0 in
    /// traces of single blocks).
    pub(crate) held: u64,
    /// Bytes of live buffers beyond what was asked for (0 in traces of single blocks).
    pub(crate) waste: u64,
}

/// Allocations answered and refused, counted by the traces.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    /// Answered.
    pub(crate) ok: u64,
    /// Refused.
    pub(crate) failed: u64,
}

impl Tally {
    /// Counts one allocation's answer and passes it on.
    pub(crate) fn count<H>(&mut self, h: Option<H>) -> Option<H> {
        if h.is_some() {
            self.ok += 1;
        } else {
            self.failed += 1;
        }
        h
    }
}

fn outcome<A: BenchAlloc>(a: &A, ns: u64, ops: u64, tally: Tally) -> Outcome {
    Outcome {
        deci_ns_per_op: ns.saturating_mul(10) / ops.max(1),
        largest_free: a.largest_free(),
        metadata: a.metadata_bytes(),
        ok: tally.ok,
        failed: tally.failed,
        worst_ns: 0,
        moved: 0,
        moves: 0,
        held: 0,
        waste: 0,
    }
}

/// The uniform 64 KiB trace's sizes.
pub(crate) fn uniform_64k(_: &mut Rng) -> u64 {
    SZ_64K
}

/// The mixed trace's sizes: 4 KiB 60%, 64 KiB 30%, 2 MiB 10%.
pub(crate) fn mixed(r: &mut Rng) -> u64 {
    match r.below(10) {
        0..=5 => SZ_4K,
        6..=8 => SZ_64K,
        _ => SZ_2M,
    }
}

/// `ops` random steps with at most `cap` live blocks: each step frees a random live block or
/// allocates one of `size_of` bytes.
pub(crate) fn churn<A: BenchAlloc, S: Storage, C: Clock>(
    a: &mut A,
    clock: &C,
    ops: usize,
    cap: usize,
    size_of: fn(&mut Rng) -> u64,
) -> Result<Outcome, OutOfMemory> {
    let mut rng = Rng(SEED);
    let mut live = S::Vec::<A::Handle>::new();
    live.try_reserve(cap)?;
    let mut tally = Tally::default();
    let t = clock.now_ns();
    for _ in 0..ops {
        if rng.frees(live.len(), cap) {
            if let Some(h) = rng.take(&mut live) {
                a.free(h);
            }
        } else if let Some(h) = tally.count(a.alloc(size_of(&mut rng))) {
            live.try_push(h)?;
        }
    }
    let ns = clock.now_ns().saturating_sub(t);
    // The largest free block while the trace's live set is still allocated.
    let result = outcome(a, ns, u64::try_from(ops).unwrap_or(u64::MAX), tally);
    while let Some(h) = live.pop() {
        a.free(h);
    }
    Ok(result)
}

/// The buffer trace's sizes, of the kind frameworks ask a GPU driver for: 128 KiB 40%, 1 MiB
/// 30%, 6 MiB 20%, 100 MiB 10%; half of them up to 60 KiB short of the round size (an object
/// of arbitrary length, rounded to 4 KiB pages), so that rounding up to 64 KiB wastes some.
pub(crate) fn buffer_size(r: &mut Rng) -> u64 {
    let size = match r.below(10) {
        0..=3 => 128 << 10,
        4..=6 => 1 << 20,
        7..=8 => 6 << 20,
        _ => 100 << 20,
    };
    let short = if r.below(2) == 0 { r.below(16) } else { 0 };
    size - SZ_4K * u64::try_from(short).unwrap_or(0)
}

/// `ops` random steps with at most `cap` live buffers: each step frees a random live buffer or
/// allocates one of [`buffer_size`] bytes. Reports, while the live set is still allocated, the
/// bytes its owners hold for it and the bytes allocated beyond what was asked.
pub(crate) fn buffers<A: BenchAlloc, S: Storage, C: Clock>(
    a: &mut A,
    clock: &C,
    ops: usize,
    cap: usize,
) -> Result<Outcome, OutOfMemory> {
    let mut rng = Rng(SEED);
    let mut live = S::Vec::<(A::Buffer, u64)>::new();
    live.try_reserve(cap)?;
    let mut tally = Tally::default();
    let t = clock.now_ns();
    for _ in 0..ops {
        if rng.frees(live.len(), cap) {
            if let Some((b, _)) = rng.take(&mut live) {
                a.free_buffer(b);
            }
        } else {
            let size = buffer_size(&mut rng);
            if let Some(b) = tally.count(a.alloc_buffer(size)) {
                live.try_push((b, size))?;
            }
        }
    }
    let ns = clock.now_ns().saturating_sub(t);
    let mut result = outcome(a, ns, u64::try_from(ops).unwrap_or(u64::MAX), tally);
    for (b, size) in live.iter() {
        result.held = result.held.saturating_add(A::holder_bytes(b));
        result.waste = result
            .waste
            .saturating_add(a.buffer_bytes(b).saturating_sub(*size));
    }
    while let Some((b, _)) = live.pop() {
        a.free_buffer(b);
    }
    Ok(result)
}

/// Fills `bytes` with 4 KiB blocks, then frees them all in random order.
pub(crate) fn fill_free<A: BenchAlloc, S: Storage, C: Clock>(
    a: &mut A,
    clock: &C,
    bytes: u64,
) -> Result<Outcome, OutOfMemory> {
    let mut rng = Rng(SEED);
    let n = usize::try_from(bytes / SZ_4K).map_err(|_| OutOfMemory)?;
    let mut live = S::Vec::<A::Handle>::new();
    live.try_reserve(n)?;
    let mut tally = Tally::default();
    let t = clock.now_ns();
    for _ in 0..n {
        match tally.count(a.alloc(SZ_4K)) {
            Some(h) => live.try_push(h)?,
            None => break,
        }
    }
    for i in (1..live.len()).rev() {
        live.swap(i, rng.below(i + 1));
    }
    let done = u64::try_from(live.len()).unwrap_or(0);
    while let Some(h) = live.pop() {
        a.free(h);
    }
    let ns = clock.now_ns().saturating_sub(t);
    Ok(outcome(a, ns, 2 * done, tally))
}

/// Fills `bytes` with 4 KiB blocks, frees every other one (a 50% checkerboard), then times
/// `requests` 2 MiB requests (all of which fail: no 2 MiB extent is free). Frees the rest after.
/// This times how fast an allocator says no; what a user feels of fragmentation is in
/// [`super::frag`].
pub(crate) fn checkerboard<A: BenchAlloc, S: Storage, C: Clock>(
    a: &mut A,
    clock: &C,
    bytes: u64,
    requests: usize,
) -> Result<Outcome, OutOfMemory> {
    let n = usize::try_from(bytes / SZ_4K).map_err(|_| OutOfMemory)?;
    let mut live = S::Vec::<A::Handle>::new();
    live.try_reserve(n)?;
    for _ in 0..n {
        match a.alloc(SZ_4K) {
            Some(h) => live.try_push(h)?,
            None => break,
        }
    }
    for h in live.iter().step_by(2) {
        a.free(*h);
    }
    let mut tally = Tally::default();
    let t = clock.now_ns();
    for _ in 0..requests {
        if let Some(h) = tally.count(a.alloc(SZ_2M)) {
            a.free(h);
        }
    }
    let ns = clock.now_ns().saturating_sub(t);
    let result = outcome(a, ns, u64::try_from(requests).unwrap_or(u64::MAX), tally);
    for h in live.iter().skip(1).step_by(2) {
        a.free(*h);
    }
    Ok(result)
}

/// Formats tenths as `12.3`.
pub(crate) struct Deci(pub(crate) u64);

impl core::fmt::Display for Deci {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.0 / 10, self.0 % 10)
    }
}

/// Rounds of every trace (odd, so that the median is one of them).
pub(crate) const ROUNDS: usize = 5;

/// The results of one trace on one allocator, a round each.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rounds {
    /// One outcome per round.
    outcomes: [Outcome; ROUNDS],
    /// Rounds recorded.
    n: usize,
}

impl Rounds {
    /// Records one round.
    pub(crate) fn push(&mut self, o: Outcome) {
        if let Some(slot) = self.outcomes.get_mut(self.n) {
            *slot = o;
            self.n += 1;
        }
    }

    /// The rounds recorded.
    fn all(&self) -> &[Outcome] {
        self.outcomes.get(..self.n).unwrap_or(&[])
    }

    /// The round of median time; its counts stand for the trace (they are the same every round
    /// unless [`Rounds::same_work`] says otherwise).
    pub(crate) fn median(&self) -> Outcome {
        let mut t = [0u64; ROUNDS];
        for (slot, o) in t.iter_mut().zip(self.all()) {
            *slot = o.deci_ns_per_op;
        }
        let t = t.get_mut(..self.n).unwrap_or(&mut []);
        crate::pmm::compact::sort_by_key(t, |v| *v);
        let m = t.get(self.n / 2).copied().unwrap_or(0);
        self.all()
            .iter()
            .find(|o| o.deci_ns_per_op == m)
            .copied()
            .unwrap_or_default()
    }

    /// The fastest and the slowest round.
    pub(crate) fn spread(&self) -> (u64, u64) {
        self.all().iter().fold((u64::MAX, 0), |(lo, hi), o| {
            (lo.min(o.deci_ns_per_op), hi.max(o.deci_ns_per_op))
        })
    }

    /// Whether every round answered and refused the same allocations.
    fn steady(&self) -> bool {
        let first = self.all().first().copied().unwrap_or_default();
        self.all()
            .iter()
            .all(|o| (o.ok, o.failed) == (first.ok, first.failed))
    }
}

/// Whether two sides did the same work in every round: the same allocations answered and
/// refused.
pub(crate) fn same_work(a: &Rounds, b: &Rounds) -> bool {
    let (x, y) = (a.median(), b.median());
    a.steady() && b.steady() && (x.ok, x.failed) == (y.ok, y.failed)
}

/// One `bench:` line, the format `make bench` prints and compares run to run.
pub(crate) struct Line<'a> {
    /// Trace name.
    pub(crate) trace: &'a str,
    /// nvrs's rounds.
    pub(crate) nvrs: &'a Rounds,
    /// The anchor's rounds.
    pub(crate) anchor: &'a Rounds,
    /// Whether the two sides are meant to answer the same allocations (not so where one side
    /// can compact and the other cannot).
    pub(crate) expect_same_work: bool,
}

impl core::fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (n, a) = (self.nvrs.median(), self.anchor.median());
        let ((n_lo, n_hi), (a_lo, a_hi)) = (self.nvrs.spread(), self.anchor.spread());
        let ratio = a.deci_ns_per_op.saturating_mul(100) / n.deci_ns_per_op.max(1);
        write!(
            f,
            "bench: {} nvrs={}ns anchor={}ns ratio={}.{:02} rounds={} nvrs_min={}ns nvrs_max={}ns anchor_min={}ns anchor_max={}ns ok_nvrs={} failed_nvrs={} ok_anchor={} failed_anchor={}",
            self.trace,
            Deci(n.deci_ns_per_op),
            Deci(a.deci_ns_per_op),
            ratio / 100,
            ratio % 100,
            self.nvrs.n.min(self.anchor.n),
            Deci(n_lo),
            Deci(n_hi),
            Deci(a_lo),
            Deci(a_hi),
            n.ok,
            n.failed,
            a.ok,
            a.failed,
        )?;
        if self.expect_same_work {
            let same = same_work(self.nvrs, self.anchor);
            write!(f, " same_work={}", if same { "yes" } else { "no" })?;
        }
        if n.worst_ns != 0 || a.worst_ns != 0 {
            write!(
                f,
                " worst_nvrs={}ns worst_anchor={}ns moved_nvrs={} moved_anchor={} moves_nvrs={} moves_anchor={}",
                n.worst_ns, a.worst_ns, n.moved, a.moved, n.moves, a.moves
            )?;
        }
        if n.held != 0 || a.held != 0 {
            write!(
                f,
                " held_nvrs={} held_anchor={} waste_nvrs={} waste_anchor={}",
                n.held, a.held, n.waste, a.waste
            )?;
        }
        writeln!(
            f,
            " largest_free_nvrs={} largest_free_anchor={} metadata_nvrs={} metadata_anchor={}",
            n.largest_free, a.largest_free, n.metadata, a.metadata
        )
    }
}

/// How much work the suite does: the host runs more than the emulated kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scale {
    /// Steps of each churn trace.
    pub(crate) ops: usize,
    /// 2 MiB requests of the checkerboard trace.
    pub(crate) requests: usize,
    /// Requests of each kind in the fragmentation traces ([`super::frag`]).
    pub(crate) frag_requests: usize,
}

const GIB: u64 = 1 << 30;
const POOL: u64 = 256 << 20;
/// 1 TiB: 524288 roots.
const TIB: u64 = 1 << 40;

const UNIFORM: &str = "uniform_64k_1G";
const MIXED: &str = "mixed_4k_64k_2m_1G";
const BUFFERS: &str = "buffers_128k_1m_6m_100m_1G";
const FILL: &str = "fill_4k_free_random_256M";
const CHECKERBOARD: &str = "checkerboard_then_2m_256M";
const INIT: &str = "init_1T";
const TOP: &str = "first_alloc_at_top_1T";

/// The traces of [`run_suite`], by name, in the order it runs them (the fragmentation trace
/// prints the six lines of [`super::frag::LINES`]).
pub(crate) const TRACES: [&str; 8] = [
    UNIFORM,
    MIXED,
    BUFFERS,
    FILL,
    CHECKERBOARD,
    INIT,
    TOP,
    super::frag::NAME,
];

/// Runs `trace` on fresh allocators [`ROUNDS`] times, nvrs first in even rounds and the anchor
/// first in odd ones; `None` if an allocator could not be built or a trace ran out of memory
/// for its bookkeeping.
pub(crate) fn alternate(
    mut nvrs: impl FnMut() -> Option<Outcome>,
    mut anchor: impl FnMut() -> Option<Outcome>,
) -> Option<(Rounds, Rounds)> {
    let (mut n, mut b) = (Rounds::default(), Rounds::default());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            n.push(nvrs()?);
            b.push(anchor()?);
        } else {
            b.push(anchor()?);
            n.push(nvrs()?);
        }
    }
    Some((n, b))
}

/// Runs every trace (or only the one named `only`, one of [`TRACES`]) on fresh nvrs managers
/// (`nvrs(bytes)`) and fresh anchors (`anchor(bytes)`), and hands each line to `emit`: `None` if an allocator could not be built
/// or a trace ran out of memory for its bookkeeping. The one list of traces, for the host and
/// the kernel benchmarks alike.
pub(crate) fn run_suite<S, C, B, E>(
    clock: &C,
    scale: Scale,
    only: Option<&str>,
    nvrs: impl Fn(u64) -> Option<Pmm<S>>,
    anchor: impl Fn(u64) -> Option<B>,
    mut emit: impl FnMut(&str, Option<Line<'_>>) -> Result<(), E>,
) -> Result<(), E>
where
    S: Storage,
    C: Clock,
    B: BenchAlloc,
{
    let run = |name: &str| only.is_none_or(|o| o == name);
    // The same trace on both allocators (a macro: the two have different types). Each trace
    // runs in a frame of its own ([`alternate`], [`init`] and [`top`] are not inlined): this
    // runs inside a debugfs read's formatting, deep in a 16 KiB kernel stack, and one frame
    // holding every trace's rounds once overflowed it.
    macro_rules! pair {
        ($name:expr, $bytes:expr, |$a:ident| $trace:expr) => {{
            if run($name) {
                run_pair(
                    &mut emit,
                    $name,
                    || nvrs($bytes).and_then(|mut $a| $trace.ok()),
                    || anchor($bytes).and_then(|mut $a| $trace.ok()),
                )?;
            }
        }};
    }
    pair!(UNIFORM, GIB, |a| churn::<_, S, _>(
        &mut a,
        clock,
        scale.ops,
        8192,
        uniform_64k
    ));
    pair!(MIXED, GIB, |a| churn::<_, S, _>(
        &mut a, clock, scale.ops, 4096, mixed
    ));
    // Buffers of 1 GiB at most: 64 live ones average ~740 MiB, so that some requests find too
    // little free memory (an allocation either side refuses counts in the line).
    pair!(BUFFERS, GIB, |a| buffers::<_, S, _>(
        &mut a,
        clock,
        scale.ops / 8,
        64
    ));
    pair!(FILL, POOL, |a| fill_free::<_, S, _>(&mut a, clock, POOL));
    pair!(CHECKERBOARD, POOL, |a| {
        checkerboard::<_, S, _>(&mut a, clock, POOL, scale.requests)
    });
    // Initialising a manager for 1 TiB (524288 roots); one operation is one initialisation (the
    // mean of INITS after a first, untimed one, which also pays for translating the code under
    // emulation).
    if run(INIT) {
        run_pair(
            &mut emit,
            INIT,
            || init::<_, S, _>(clock, || nvrs(TIB)),
            || init::<_, S, _>(clock, || anchor(TIB)),
        )?;
    }
    // The first allocation at the top of a fresh 1 TiB manager: the cost that lazily created
    // metadata defers to it.
    if run(TOP) {
        run_pair(
            &mut emit,
            TOP,
            || top::<_, S, _>(clock, || nvrs(TIB)),
            || top::<_, S, _>(clock, || anchor(TIB)),
        )?;
    }
    if run(super::frag::NAME) {
        run_frag(clock, scale, &nvrs, &anchor, &mut emit)?;
    }
    Ok(())
}

/// Runs a trace on both sides ([`alternate`]) and hands `emit` its line, in a frame of its own
/// (see [`run_suite`]).
#[inline(never)]
fn run_pair<E>(
    emit: &mut impl FnMut(&str, Option<Line<'_>>) -> Result<(), E>,
    name: &str,
    nvrs: impl FnMut() -> Option<Outcome>,
    anchor: impl FnMut() -> Option<Outcome>,
) -> Result<(), E> {
    let r = alternate(nvrs, anchor);
    emit_pair(emit, name, r.as_ref())
}

/// Runs the fragmentation traces and hands `emit` their lines, in a frame of its own (see
/// [`run_suite`]).
#[inline(never)]
fn run_frag<S, C, B, E>(
    clock: &C,
    scale: Scale,
    nvrs: &impl Fn(u64) -> Option<Pmm<S>>,
    anchor: &impl Fn(u64) -> Option<B>,
    emit: &mut impl FnMut(&str, Option<Line<'_>>) -> Result<(), E>,
) -> Result<(), E>
where
    S: Storage,
    C: Clock,
    B: BenchAlloc,
{
    let r = super::frag::run(clock, scale, nvrs, anchor);
    for (name, line) in super::frag::lines(r.as_deref()) {
        emit(name, line)?;
    }
    Ok(())
}

/// Hands `emit` the line of a trace both sides ran alike (`None`: it could not run).
fn emit_pair<E>(
    emit: &mut impl FnMut(&str, Option<Line<'_>>) -> Result<(), E>,
    name: &str,
    rounds: Option<&(Rounds, Rounds)>,
) -> Result<(), E> {
    let line = rounds.map(|(n, b)| Line {
        trace: name,
        nvrs: n,
        anchor: b,
        expect_same_work: true,
    });
    emit(name, line)
}

/// Initialisations timed by the `init_1T` line, and managers by `first_alloc_at_top_1T`.
const INITS: u64 = 8;

/// Times `new` (see `init_1T` in [`run_suite`]): the managers live until the clock stops, so
/// that their teardown is not timed, and the clock is read twice (it is slow under emulation).
/// They live in a vector, not on the stack (see [`run_suite`]).
#[inline(never)]
fn init<A: BenchAlloc, S: Storage, C: Clock>(
    clock: &C,
    new: impl Fn() -> Option<A>,
) -> Option<Outcome> {
    new()?;
    let mut live = S::Vec::<A>::new();
    live.try_reserve(usize::try_from(INITS).ok()?).ok()?;
    let t = clock.now_ns();
    for _ in 0..INITS {
        live.try_push(new()?).ok()?;
    }
    let ns = clock.now_ns().saturating_sub(t);
    let last = live.last()?;
    Some(Outcome {
        deci_ns_per_op: ns.saturating_mul(10) / INITS,
        largest_free: last.largest_free(),
        metadata: last.metadata_bytes(),
        ok: INITS,
        ..Outcome::default()
    })
}

/// Times the first allocation of each of [`INITS`] fresh managers (built untimed): the 2 MiB
/// block at the top of the manager, at its offset (`alloc_at`; `gpu_buddy`'s range allocation).
/// The allocations are freed and the managers dropped after the clock stops. The managers live
/// in a vector, not on the stack (see [`run_suite`]).
#[inline(never)]
fn top<A: BenchAlloc, S: Storage, C: Clock>(
    clock: &C,
    new: impl Fn() -> Option<A>,
) -> Option<Outcome> {
    let mut live = S::Vec::<A>::new();
    live.try_reserve(usize::try_from(INITS).ok()?).ok()?;
    for _ in 0..INITS {
        live.try_push(new()?).ok()?;
    }
    let mut got: [Option<A::Handle>; INITS as usize] = [None; INITS as usize];
    let mut tally = Tally::default();
    let t = clock.now_ns();
    for (a, h) in live.iter_mut().zip(got.iter_mut()) {
        *h = tally.count(a.alloc_at(TIB - SZ_2M, SZ_2M));
    }
    let ns = clock.now_ns().saturating_sub(t);
    let last = live.last()?;
    let result = Outcome {
        deci_ns_per_op: ns.saturating_mul(10) / INITS,
        largest_free: last.largest_free(),
        metadata: last.metadata_bytes(),
        ok: tally.ok,
        failed: tally.failed,
        ..Outcome::default()
    };
    for (a, h) in live.iter_mut().zip(got) {
        if let Some(h) = h {
            a.free(h);
        }
    }
    Some(result)
}
