// SPDX-License-Identifier: GPL-2.0

//! Allocation traces for benchmarking a buddy allocator, identical for every allocator measured.
//!
//! The same traces run on the nvrs memory manager and on an anchor — in the kernel, the kernel's
//! own `gpu_buddy`; on the host, a sorted-list buddy — with the same seeded PRNG, so their
//! numbers are comparable within a run. They time whole traces and report nanoseconds per
//! operation; nothing here asserts anything about time.
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
    /// The largest free contiguous block, in bytes.
    fn largest_free(&self) -> u64;
    /// Bytes of bookkeeping the allocator holds now.
    fn metadata_bytes(&self) -> u64;
}

/// nvrs's manager under measurement: kernel-type chunks, owned at once (as `gpu_buddy` blocks
/// are), freed as dirty.
impl<S: Storage> BenchAlloc for Pmm<S> {
    type Handle = ChunkId;

    fn alloc(&mut self, size: u64) -> Option<ChunkId> {
        let mut id = [ChunkId::default()];
        Pmm::alloc(self, size, MemType::Kernel, AllocFlags::default(), &mut id).ok()?;
        Some(id[0])
    }

    fn free(&mut self, h: ChunkId) {
        // Every handle comes from `alloc` and is freed once: this cannot fail.
        let _ = Pmm::free(self, h, Zero::Dirty);
    }

    fn largest_free(&self) -> u64 {
        Pmm::largest_free(self)
    }

    fn metadata_bytes(&self) -> u64 {
        u64::try_from(Pmm::metadata_bytes(self)).unwrap_or(u64::MAX)
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

/// The seed every trace uses.
pub(crate) const SEED: u64 = 0x6e76_7273;

/// The result of one trace on one allocator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outcome {
    /// Tenths of a nanosecond per operation.
    pub(crate) deci_ns_per_op: u64,
    /// Largest free block after the trace.
    pub(crate) largest_free: u64,
    /// Bytes of bookkeeping after the trace.
    pub(crate) metadata: u64,
}

fn outcome<A: BenchAlloc>(a: &A, ns: u64, ops: u64) -> Outcome {
    Outcome {
        deci_ns_per_op: ns.saturating_mul(10) / ops.max(1),
        largest_free: a.largest_free(),
        metadata: a.metadata_bytes(),
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
    let t = clock.now_ns();
    for _ in 0..ops {
        if !live.is_empty() && (live.len() >= cap || rng.below(2) == 0) {
            let i = rng.below(live.len());
            let last = live.len() - 1;
            live.swap(i, last);
            if let Some(h) = live.pop() {
                a.free(h);
            }
        } else if let Some(h) = a.alloc(size_of(&mut rng)) {
            live.try_push(h)?;
        }
    }
    let ns = clock.now_ns().saturating_sub(t);
    // The largest free block while the trace's live set is still allocated.
    let result = outcome(a, ns, u64::try_from(ops).unwrap_or(u64::MAX));
    while let Some(h) = live.pop() {
        a.free(h);
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
    let t = clock.now_ns();
    for _ in 0..n {
        match a.alloc(SZ_4K) {
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
    Ok(outcome(a, ns, 2 * done))
}

/// Fills `bytes` with 4 KiB blocks, frees every other one (a 50% checkerboard), then times
/// `requests` 2 MiB requests (all of which fail: no 2 MiB extent is free). Frees the rest after.
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
    let t = clock.now_ns();
    for _ in 0..requests {
        if let Some(h) = a.alloc(SZ_2M) {
            a.free(h);
        }
    }
    let ns = clock.now_ns().saturating_sub(t);
    let result = outcome(a, ns, u64::try_from(requests).unwrap_or(u64::MAX));
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

/// One `bench:` line, the format `make bench` prints and compares run to run.
pub(crate) struct Line<'a> {
    /// Trace name.
    pub(crate) trace: &'a str,
    /// nvrs's result.
    pub(crate) nvrs: Outcome,
    /// The anchor's result.
    pub(crate) anchor: Outcome,
}

impl core::fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let ratio =
            self.anchor.deci_ns_per_op.saturating_mul(100) / self.nvrs.deci_ns_per_op.max(1);
        writeln!(
            f,
            "bench: {} nvrs={}ns anchor={}ns ratio={}.{:02} largest_free_nvrs={} largest_free_anchor={} metadata_nvrs={} metadata_anchor={}",
            self.trace,
            Deci(self.nvrs.deci_ns_per_op),
            Deci(self.anchor.deci_ns_per_op),
            ratio / 100,
            ratio % 100,
            self.nvrs.largest_free,
            self.anchor.largest_free,
            self.nvrs.metadata,
            self.anchor.metadata
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
}

const GIB: u64 = 1 << 30;
const POOL: u64 = 256 << 20;

const UNIFORM: &str = "uniform_64k_1G";
const MIXED: &str = "mixed_4k_64k_2m_1G";
const FILL: &str = "fill_4k_free_random_256M";
const CHECKERBOARD: &str = "checkerboard_then_2m_256M";
const INIT: &str = "init_1T";

/// The traces of [`run_suite`], by name, in the order it runs them.
pub(crate) const TRACES: [&str; 5] = [UNIFORM, MIXED, FILL, CHECKERBOARD, INIT];

/// Runs every trace (or only the one named `only`, one of [`TRACES`]) on a fresh nvrs
/// allocator (`nvrs(bytes)`) and a fresh anchor (`anchor(bytes)`) and hands each result to
/// `emit`: `None` if an allocator could not be built or a trace ran out of memory for its
/// bookkeeping. The one list of traces, for the host and the kernel benchmarks alike.
pub(crate) fn run_suite<S, C, N, B, E>(
    clock: &C,
    scale: Scale,
    only: Option<&str>,
    nvrs: impl Fn(u64) -> Option<N>,
    anchor: impl Fn(u64) -> Option<B>,
    mut emit: impl FnMut(&str, Option<(Outcome, Outcome)>) -> Result<(), E>,
) -> Result<(), E>
where
    S: Storage,
    C: Clock,
    N: BenchAlloc,
    B: BenchAlloc,
{
    let run = |name: &str| only.is_none_or(|o| o == name);
    // The same trace on both allocators (a macro: the two have different types).
    macro_rules! pair {
        ($name:expr, $bytes:expr, |$a:ident| $trace:expr) => {{
            if run($name) {
                let n = nvrs($bytes).and_then(|mut $a| $trace.ok());
                let b = anchor($bytes).and_then(|mut $a| $trace.ok());
                emit($name, n.zip(b))?;
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
    pair!(FILL, POOL, |a| fill_free::<_, S, _>(&mut a, clock, POOL));
    pair!(CHECKERBOARD, POOL, |a| {
        checkerboard::<_, S, _>(&mut a, clock, POOL, scale.requests)
    });
    // Initialising a manager for 1 TiB (524288 roots); one operation is one initialisation (the
    // mean of INITS after a first, untimed one, which also pays for translating the code under
    // emulation).
    if !run(INIT) {
        return Ok(());
    }
    let n = init(clock, || nvrs(1 << 40));
    let b = init(clock, || anchor(1 << 40));
    emit(INIT, n.zip(b))
}

/// Initialisations timed by the `init_1T` line.
const INITS: u64 = 8;

/// Times `new` (see `init_1T` in [`run_suite`]): the managers live until the clock stops, so
/// that their teardown is not timed, and the clock is read twice (it is slow under emulation).
fn init<A: BenchAlloc, C: Clock>(clock: &C, new: impl Fn() -> Option<A>) -> Option<Outcome> {
    new()?;
    let mut live: [Option<A>; INITS as usize] = core::array::from_fn(|_| None);
    let t = clock.now_ns();
    for slot in live.iter_mut() {
        *slot = Some(new()?);
    }
    let ns = clock.now_ns().saturating_sub(t);
    let last = live.iter().flatten().last()?;
    Some(Outcome {
        deci_ns_per_op: ns.saturating_mul(10) / INITS,
        largest_free: last.largest_free(),
        metadata: last.metadata_bytes(),
    })
}
