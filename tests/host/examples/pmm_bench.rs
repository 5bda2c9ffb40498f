// SPDX-License-Identifier: GPL-2.0

//! Host benchmark of the physical memory manager (`src/pmm`), not a test: it asserts nothing
//! about time.
//!
//! `cargo run --release --example pmm_bench` runs each trace on the nvrs manager and on an
//! anchor, with the same PRNG seed, several rounds with the order alternated, and prints one
//! line per trace (`src/bench/traces.rs`, `Line`):
//!
//! `bench: <trace> nvrs=<median ns/op>ns anchor=<median ns/op>ns ratio=<anchor/nvrs> rounds=<n>
//! nvrs_min=.. nvrs_max=.. anchor_min=.. anchor_max=.. ok_nvrs=.. failed_nvrs=.. ok_anchor=..
//! failed_anchor=.. [same_work=yes|no] largest_free_nvrs=.. largest_free_anchor=..
//! metadata_nvrs=.. metadata_anchor=..`
//!
//! The anchor is the kernel's own gpu_buddy, compiled for user space from the kernel source the
//! bootstrap fetches (`build.rs`, `NVRS_KSRC`), running the same traces natively in the same
//! process. Both sides are built as the kernel builds them: C at `-O2` (`build.rs`), Rust at
//! opt-level 2 with overflow checks (the release profile of `Cargo.toml`, as
//! `CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE` and `CONFIG_RUST_OVERFLOW_CHECKS` build the module), and
//! each is entered through one call per operation that is not inlined into the trace.

#![allow(dead_code)]

/// The fragmentation traces (`src/bench/frag.rs`).
#[path = "../../../src/bench/frag.rs"]
mod frag;
#[path = "../../../hwref/mod.rs"]
mod hwref;
#[path = "../../../src/pmm/mod.rs"]
mod pmm;
#[path = "../src/std_storage.rs"]
mod std_storage;
/// The traces, shared with the in-kernel bench (`src/bench/`).
#[path = "../../../src/bench/traces.rs"]
mod traces;

use std::time::Instant;

use hwref::PMM_CHUNKS_DEFAULT;
#[cfg(gpu_buddy)]
use hwref::SZ_4K;
use pmm::Pmm;
use std_storage::StdStorage;
#[cfg(gpu_buddy)]
use traces::BenchAlloc as Allocator;
use traces::Clock;

/// `std::time::Instant` as the traces' clock.
struct HostClock(Instant);

impl Clock for HostClock {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// The nvrs manager (its `BenchAlloc` implementation is shared with the kernel bench).
struct Nvrs;

impl Nvrs {
    #[allow(clippy::new_ret_no_self)]
    fn new(bytes: u64) -> Pmm<StdStorage> {
        Pmm::new(0, bytes, PMM_CHUNKS_DEFAULT).expect("pmm")
    }
}

/// The anchor: the kernel's own `gpu_buddy` (`drivers/gpu/buddy.c`, built by `build.rs` from the
/// kernel source with a small user-space shim), driven through the same C functions as in the
/// VM (`rust/bench_buddy.c`): one naturally aligned block per allocation.
#[cfg(gpu_buddy)]
struct KernelBuddy(*mut core::ffi::c_void);

// The library crate carries the gpu_buddy objects `build.rs` compiled.
#[cfg(gpu_buddy)]
use nvrs_host as _;

#[cfg(gpu_buddy)]
extern "C" {
    fn nvrs_buddy_module_init() -> core::ffi::c_int;
    fn nvrs_buddy_new(size: u64, chunk: u64) -> *mut core::ffi::c_void;
    fn nvrs_buddy_destroy(mm: *mut core::ffi::c_void);
    fn nvrs_buddy_alloc(mm: *mut core::ffi::c_void, size: u64) -> *mut core::ffi::c_void;
    fn nvrs_buddy_free(mm: *mut core::ffi::c_void, block: *mut core::ffi::c_void);
    fn nvrs_buddy_alloc_at(
        mm: *mut core::ffi::c_void,
        start: u64,
        size: u64,
    ) -> *mut core::ffi::c_void;
    fn nvrs_buddy_alloc_contiguous(mm: *mut core::ffi::c_void, size: u64)
        -> *mut core::ffi::c_void;
    fn nvrs_buddy_free_contiguous(mm: *mut core::ffi::c_void, block: *mut core::ffi::c_void);
    fn nvrs_buddy_alloc_buffer(mm: *mut core::ffi::c_void, size: u64) -> *mut core::ffi::c_void;
    fn nvrs_buddy_free_buffer(mm: *mut core::ffi::c_void, blocks: *mut core::ffi::c_void);
    fn nvrs_buddy_buffer_bytes(mm: *mut core::ffi::c_void, blocks: *mut core::ffi::c_void) -> u64;
    fn nvrs_buddy_largest_free(mm: *mut core::ffi::c_void) -> u64;
    fn nvrs_buddy_metadata_bytes(mm: *mut core::ffi::c_void) -> u64;
}

#[cfg(gpu_buddy)]
impl KernelBuddy {
    fn new(bytes: u64) -> Option<Self> {
        // SAFETY: Creates a manager of `bytes` with 4 KiB chunks; NULL on failure.
        let mm = unsafe { nvrs_buddy_new(bytes, SZ_4K) };
        (!mm.is_null()).then_some(Self(mm))
    }
}

#[cfg(gpu_buddy)]
impl Drop for KernelBuddy {
    fn drop(&mut self) {
        // SAFETY: `self.0` is a live manager, destroyed once.
        unsafe { nvrs_buddy_destroy(self.0) };
    }
}

#[cfg(gpu_buddy)]
impl Allocator for KernelBuddy {
    type Handle = *mut core::ffi::c_void;

    fn alloc(&mut self, size: u64) -> Option<Self::Handle> {
        // SAFETY: `self.0` is a live manager.
        let b = unsafe { nvrs_buddy_alloc(self.0, size) };
        (!b.is_null()).then_some(b)
    }

    fn free(&mut self, h: Self::Handle) {
        // SAFETY: `h` is a block of this manager, freed once.
        unsafe { nvrs_buddy_free(self.0, h) };
    }

    fn alloc_at(&mut self, addr: u64, size: u64) -> Option<Self::Handle> {
        // SAFETY: `self.0` is a live manager.
        let b = unsafe { nvrs_buddy_alloc_at(self.0, addr, size) };
        (!b.is_null()).then_some(b)
    }

    fn alloc_contiguous(&mut self, bytes: u64) -> Option<Self::Handle> {
        // SAFETY: `self.0` is a live manager.
        let b = unsafe { nvrs_buddy_alloc_contiguous(self.0, bytes) };
        (!b.is_null()).then_some(b)
    }

    fn free_contiguous(&mut self, h: Self::Handle) {
        // SAFETY: `h` is the first block of a contiguous allocation of this manager, freed once.
        unsafe { nvrs_buddy_free_contiguous(self.0, h) };
    }

    fn largest_free(&self) -> u64 {
        // SAFETY: `self.0` is a live manager.
        unsafe { nvrs_buddy_largest_free(self.0) }
    }

    fn metadata_bytes(&self) -> u64 {
        // SAFETY: `self.0` is a live manager.
        unsafe { nvrs_buddy_metadata_bytes(self.0) }
    }

    /// The list of a buffer's blocks (a `struct list_head` the helper allocates).
    type Buffer = *mut core::ffi::c_void;

    fn alloc_buffer(&mut self, bytes: u64) -> Option<Self::Buffer> {
        // SAFETY: `self.0` is a live manager.
        let b = unsafe { nvrs_buddy_alloc_buffer(self.0, bytes) };
        (!b.is_null()).then_some(b)
    }

    fn free_buffer(&mut self, b: Self::Buffer) {
        // SAFETY: `b` is a buffer of this manager, freed once.
        unsafe { nvrs_buddy_free_buffer(self.0, b) };
    }

    fn buffer_bytes(&self, b: &Self::Buffer) -> u64 {
        // SAFETY: `*b` is a live buffer of this manager.
        unsafe { nvrs_buddy_buffer_bytes(self.0, *b) }
    }

    fn holder_bytes(_: &Self::Buffer) -> u64 {
        // A `struct list_head`: two pointers.
        2 * core::mem::size_of::<usize>() as u64
    }
}

#[cfg(not(gpu_buddy))]
fn main() {
    println!("bench: host anchor unavailable: build with NVRS_KSRC set to a kernel source tree");
}

#[cfg(gpu_buddy)]
fn main() {
    // SAFETY: The gpu_buddy "module" (its block cache) is set up once, before any manager.
    unsafe { nvrs_buddy_module_init() };
    let scale = traces::Scale {
        ops: 400_000,
        requests: 100_000,
        frag_requests: 500,
    };
    let _ = traces::run_suite::<StdStorage, _, _, ()>(
        &HostClock(Instant::now()),
        scale,
        None,
        |bytes| Some(Nvrs::new(bytes)),
        KernelBuddy::new,
        |trace, line| {
            match line {
                Some(line) => print!("{line}"),
                None => println!("bench: {trace} failed: out of memory"),
            }
            Ok(())
        },
    );
}
