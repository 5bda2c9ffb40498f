// SPDX-License-Identifier: GPL-2.0

//! In-kernel benchmark of the memory manager against the kernel's `gpu_buddy`.
//!
//! Reading `debugfs/nvrs/bench_pmm` runs the [`traces`] on a fresh nvrs manager and on a fresh
//! `gpu_buddy` (through `rust/bench_buddy.c`) and returns one `bench:` line per trace. It is a
//! benchmark for `make bench`, not a test: it asserts nothing. It manages metadata only (no
//! GPU memory is touched), takes seconds under emulation, and is root-only like all of debugfs.

pub(crate) mod traces;

use core::{
    ffi::c_void,
    fmt, //
};

use kernel::prelude::*;

use crate::{hwref::PMM_CHUNKS_DEFAULT, kstorage::KernelStorage, pmm::Pmm};

use traces::{
    BenchAlloc,
    Clock,
    Line,
    Outcome, //
};

extern "C" {
    fn nvrs_now_ns() -> u64;
    fn nvrs_buddy_new(size: u64, chunk: u64) -> *mut c_void;
    fn nvrs_buddy_destroy(mm: *mut c_void);
    fn nvrs_buddy_alloc(mm: *mut c_void, size: u64) -> *mut c_void;
    fn nvrs_buddy_free(mm: *mut c_void, block: *mut c_void);
    fn nvrs_buddy_largest_free(mm: *mut c_void) -> u64;
}

/// `ktime_get_ns()`.
struct KernelClock;

impl Clock for KernelClock {
    fn now_ns(&self) -> u64 {
        // SAFETY: No preconditions.
        unsafe { nvrs_now_ns() }
    }
}

/// The kernel's `gpu_buddy`, 4 KiB chunks.
///
/// # Invariants
///
/// `mm` is a `struct gpu_buddy` initialised by `nvrs_buddy_new`, owned by this object.
struct BuddyAlloc {
    mm: *mut c_void,
}

impl BuddyAlloc {
    fn new(size: u64) -> Result<Self> {
        // SAFETY: No preconditions; returns NULL on failure.
        let mm = unsafe { nvrs_buddy_new(size, traces::SZ_4K) };
        if mm.is_null() {
            return Err(ENOMEM);
        }
        // INVARIANT: `mm` was just initialised.
        Ok(Self { mm })
    }
}

impl BenchAlloc for BuddyAlloc {
    type Handle = *mut c_void;

    fn alloc(&mut self, size: u64) -> Option<*mut c_void> {
        // SAFETY: `self.mm` is initialised (type invariant); access is exclusive (`&mut self`).
        let b = unsafe { nvrs_buddy_alloc(self.mm, size) };
        (!b.is_null()).then_some(b)
    }

    fn free(&mut self, h: *mut c_void) {
        // SAFETY: `h` is a block this allocator returned and that was not freed since (the
        // traces free each handle once).
        unsafe { nvrs_buddy_free(self.mm, h) }
    }

    fn largest_free(&self) -> u64 {
        // SAFETY: `self.mm` is initialised (type invariant).
        unsafe { nvrs_buddy_largest_free(self.mm) }
    }
}

impl Drop for BuddyAlloc {
    fn drop(&mut self) {
        // SAFETY: `self.mm` is initialised and owned (type invariant); every block was freed by
        // the traces.
        unsafe { nvrs_buddy_destroy(self.mm) }
    }
}

const GIB: u64 = 1 << 30;
const POOL: u64 = 256 << 20;
const OPS: usize = 100_000;

/// nvrs's manager under measurement (its `BenchAlloc` is in [`traces`], shared with the host).
type NvrsAlloc = Pmm<KernelStorage>;

fn nvrs(size: u64) -> Result<NvrsAlloc> {
    Pmm::new(0, size, PMM_CHUNKS_DEFAULT).map_err(crate::fb::errno)
}

type TraceFn<A> = fn(&mut A, &KernelClock) -> Result<Outcome, crate::pmm::OutOfMemory>;

fn run_pair(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    size: u64,
    tn: TraceFn<NvrsAlloc>,
    tb: TraceFn<BuddyAlloc>,
) -> fmt::Result {
    let clock = KernelClock;
    let n = nvrs(size).ok().and_then(|mut a| tn(&mut a, &clock).ok());
    let b = BuddyAlloc::new(size)
        .ok()
        .and_then(|mut a| tb(&mut a, &clock).ok());
    match (n, b) {
        (Some(nvrs), Some(anchor)) => write!(
            f,
            "{}",
            Line {
                trace: name,
                nvrs,
                anchor
            }
        ),
        _ => writeln!(f, "bench: {name} failed: out of memory"),
    }
}

/// Renders `debugfs/nvrs/bench_pmm`, running every trace.
pub(crate) fn render(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    run_pair(
        f,
        "uniform_64k_1G",
        GIB,
        |a, c| traces::churn::<_, KernelStorage, _>(a, c, OPS, 8192, traces::uniform_64k),
        |a, c| traces::churn::<_, KernelStorage, _>(a, c, OPS, 8192, traces::uniform_64k),
    )?;
    run_pair(
        f,
        "mixed_4k_64k_2m_1G",
        GIB,
        |a, c| traces::churn::<_, KernelStorage, _>(a, c, OPS, 4096, traces::mixed),
        |a, c| traces::churn::<_, KernelStorage, _>(a, c, OPS, 4096, traces::mixed),
    )?;
    run_pair(
        f,
        "fill_4k_free_random_256M",
        POOL,
        |a, c| traces::fill_free::<_, KernelStorage, _>(a, c, POOL),
        |a, c| traces::fill_free::<_, KernelStorage, _>(a, c, POOL),
    )?;
    run_pair(
        f,
        "checkerboard_then_2m_256M",
        POOL,
        |a, c| traces::checkerboard::<_, KernelStorage, _>(a, c, POOL, 20_000),
        |a, c| traces::checkerboard::<_, KernelStorage, _>(a, c, POOL, 20_000),
    )?;
    // Initialising a manager for 1 TiB (524288 roots); one operation is one initialisation.
    let clock = KernelClock;
    let t = clock.now_ns();
    let n = nvrs(1 << 40);
    let tn = clock.now_ns().saturating_sub(t);
    let t = clock.now_ns();
    let b = BuddyAlloc::new(1 << 40);
    let tb = clock.now_ns().saturating_sub(t);
    if let (Ok(n), Ok(b)) = (n, b) {
        let nvrs = Outcome {
            deci_ns_per_op: tn * 10,
            largest_free: n.largest_free(),
        };
        let anchor = Outcome {
            deci_ns_per_op: tb * 10,
            largest_free: b.largest_free(),
        };
        write!(
            f,
            "{}",
            Line {
                trace: "init_1T",
                nvrs,
                anchor
            }
        )?;
    }
    Ok(())
}
