// SPDX-License-Identifier: GPL-2.0

//! In-kernel benchmark of the memory manager against the kernel's `gpu_buddy`.
//!
//! Reading `debugfs/nvrs/bench_pmm` runs the [`traces`] on a fresh nvrs manager and on a fresh
//! `gpu_buddy` (through `rust/bench_buddy.c`) and returns one `bench:` line per trace. Writing
//! a trace's name (one of [`traces::TRACES`]) makes later reads run only that trace, for a
//! profile (`tests/tcg-profile.sh`); writing `all` runs them all again. It is a
//! benchmark for `make bench`, not a test: it asserts nothing. It manages metadata only (no
//! GPU memory is touched), takes seconds under emulation, and is root-only like all of debugfs.

pub(crate) mod frag;
pub(crate) mod traces;

use core::fmt;

use kernel::{
    bindings::{
        gpu_buddy,
        gpu_buddy_block,
        list_head, //
    },
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

use crate::{
    helpers::ffi::{
        nvrs_buddy_alloc,
        nvrs_buddy_alloc_at,
        nvrs_buddy_alloc_buffer,
        nvrs_buddy_alloc_contiguous,
        nvrs_buddy_buffer_bytes,
        nvrs_buddy_destroy,
        nvrs_buddy_free,
        nvrs_buddy_free_buffer,
        nvrs_buddy_free_contiguous,
        nvrs_buddy_largest_free,
        nvrs_buddy_metadata_bytes,
        nvrs_buddy_new,
        nvrs_now_ns, //
    },
    hwref::PMM_CHUNKS_DEFAULT,
    kstorage::KernelStorage,
    pmm::Pmm,
};

use traces::{
    BenchAlloc,
    Clock, //
};

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
    mm: *mut gpu_buddy,
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
    type Handle = *mut gpu_buddy_block;

    fn alloc(&mut self, size: u64) -> Option<*mut gpu_buddy_block> {
        // SAFETY: `self.mm` is initialised (type invariant); access is exclusive (`&mut self`).
        let b = unsafe { nvrs_buddy_alloc(self.mm, size) };
        (!b.is_null()).then_some(b)
    }

    fn free(&mut self, h: *mut gpu_buddy_block) {
        // SAFETY: `h` is a block this allocator returned and that was not freed since (the
        // traces free each handle once).
        unsafe { nvrs_buddy_free(self.mm, h) }
    }

    fn alloc_at(&mut self, addr: u64, size: u64) -> Option<*mut gpu_buddy_block> {
        // SAFETY: `self.mm` is initialised (type invariant); access is exclusive (`&mut self`).
        let b = unsafe { nvrs_buddy_alloc_at(self.mm, addr, size) };
        (!b.is_null()).then_some(b)
    }

    fn alloc_contiguous(&mut self, bytes: u64) -> Option<*mut gpu_buddy_block> {
        // SAFETY: `self.mm` is initialised (type invariant); access is exclusive (`&mut self`).
        let b = unsafe { nvrs_buddy_alloc_contiguous(self.mm, bytes) };
        (!b.is_null()).then_some(b)
    }

    fn free_contiguous(&mut self, h: *mut gpu_buddy_block) {
        // SAFETY: `h` is the first block of a contiguous allocation of this allocator, not
        // freed since (the traces free each handle once).
        unsafe { nvrs_buddy_free_contiguous(self.mm, h) }
    }

    fn largest_free(&self) -> u64 {
        // SAFETY: `self.mm` is initialised (type invariant).
        unsafe { nvrs_buddy_largest_free(self.mm) }
    }

    fn metadata_bytes(&self) -> u64 {
        // SAFETY: `self.mm` is initialised (type invariant).
        unsafe { nvrs_buddy_metadata_bytes(self.mm) }
    }

    /// The list of a buffer's blocks, allocated by the helper.
    type Buffer = *mut list_head;

    fn alloc_buffer(&mut self, bytes: u64) -> Option<*mut list_head> {
        // SAFETY: `self.mm` is initialised (type invariant); access is exclusive (`&mut self`).
        let b = unsafe { nvrs_buddy_alloc_buffer(self.mm, bytes) };
        (!b.is_null()).then_some(b)
    }

    fn free_buffer(&mut self, b: *mut list_head) {
        // SAFETY: `b` is a buffer this allocator returned and that was not freed since (the
        // traces free each buffer once).
        unsafe { nvrs_buddy_free_buffer(self.mm, b) }
    }

    fn buffer_bytes(&self, b: &*mut list_head) -> u64 {
        // SAFETY: `*b` is a live buffer of this allocator (the traces measure live buffers).
        unsafe { nvrs_buddy_buffer_bytes(self.mm, *b) }
    }

    fn holder_bytes(_: &*mut list_head) -> u64 {
        // The list head `nvrs_buddy_alloc_buffer` allocates.
        u64::try_from(core::mem::size_of::<list_head>()).unwrap_or(u64::MAX)
    }
}

impl Drop for BuddyAlloc {
    fn drop(&mut self) {
        // SAFETY: `self.mm` is initialised and owned (type invariant); every block was freed by
        // the traces.
        unsafe { nvrs_buddy_destroy(self.mm) }
    }
}

/// nvrs's manager under measurement (its `BenchAlloc` is in [`traces`], shared with the host).
type NvrsAlloc = Pmm<KernelStorage>;

/// The trace reads of `bench_pmm` run: its index in [`traces::TRACES`] plus one, 0 for all.
static ONLY: Atomic<usize> = Atomic::new(0);

/// Selects the trace later reads run (a write to `bench_pmm`): a name of [`traces::TRACES`],
/// or `all`.
pub(crate) fn write(reader: &mut kernel::uaccess::UserSliceReader) -> Result {
    let mut buf = [0u8; 32];
    let name = crate::text::written_text(reader, &mut buf)?;
    let only = match traces::TRACES.iter().position(|&t| t == name) {
        Some(i) => i + 1,
        None if name == "all" => 0,
        None => return Err(EINVAL),
    };
    ONLY.store(only, Relaxed);
    Ok(())
}

/// Renders `debugfs/nvrs/bench_pmm`, running the traces of [`traces::run_suite`] (all, or the
/// one selected by [`write`]).
pub(crate) fn render(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let only = ONLY
        .load(Relaxed)
        .checked_sub(1)
        .and_then(|i| traces::TRACES.get(i).copied());
    let scale = traces::Scale {
        ops: 400_000,
        requests: 20_000,
        frag_requests: 100,
    };
    traces::run_suite::<KernelStorage, _, _, _>(
        &KernelClock,
        scale,
        only,
        |bytes| NvrsAlloc::new(0, bytes, PMM_CHUNKS_DEFAULT).ok(),
        |bytes| BuddyAlloc::new(bytes).ok(),
        |trace, line| match line {
            Some(line) => write!(f, "{line}"),
            None => writeln!(f, "bench: {trace} failed: out of memory"),
        },
    )
}
