// SPDX-License-Identifier: GPL-2.0

//! GPU virtual addresses: one allocator for the VAs of every process's allocations, so that a VA
//! names one allocation at a time across all of nvrs. An allocation's VAs are freed when the
//! [`Allocation`](super::Allocation) object goes (no pin, dma-buf or CPU mapping refers to it
//! any more), and reused as late as possible ([`crate::vaspace::range`]).

use kernel::prelude::*;

use crate::vaspace::range::{
    RangeError,
    Span,
    SpanList,
    VaAllocator, //
};

/// The live VA ranges, for the [`VaAllocator`].
impl SpanList for KVVec<Span> {
    fn len(&self) -> usize {
        KVVec::len(self)
    }

    fn get(&self, i: usize) -> Option<Span> {
        <[Span]>::get(self, i).copied()
    }

    fn insert(&mut self, i: usize, s: Span) -> Result<(), RangeError> {
        self.insert_within_capacity(i, s).or_else(|_| {
            self.reserve(1, GFP_KERNEL)
                .map_err(|_| RangeError::NoMemory)?;
            self.insert_within_capacity(i, s)
                .map_err(|_| RangeError::NoMemory)
        })
    }

    fn remove(&mut self, i: usize) -> Option<Span> {
        KVVec::remove(self, i).ok()
    }
}

kernel::sync::global_lock! {
    // SAFETY: `init` is called from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VA: Mutex<VaAllocator<KVVec<Span>>> =
        VaAllocator::new(KVVec::new());
}

/// Initialises the VA allocator, whose space is shrunk to `va_space_size` bytes if non-zero (the
/// `va_space_mib` parameter, for tests). Called once, from module init.
pub(crate) fn init(va_space_size: u64) {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { VA.init() };
    VA.lock().set_size(va_space_size);
}

/// Frees the VA allocator's memory at module exit (every allocation is gone by then).
pub(crate) fn fini() {
    let va = core::mem::replace(&mut *VA.lock(), VaAllocator::new(KVVec::new()));
    drop(va);
}

/// Renders the VA allocator's state for debugfs `p2p`.
pub(crate) fn render(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let va = VA.lock();
    writeln!(f, "va_ranges: {} wraps {}", va.live(), va.wraps())
}
