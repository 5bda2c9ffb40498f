// SPDX-License-Identifier: GPL-2.0

//! A quarantine for the addresses consumers hold: page tables and DMA mappings.
//!
//! The `nvidia_p2p` ABI names a pin by its page table's address and a mapping by its
//! `nvidia_p2p_dma_mapping`'s address; a consumer that calls with a stale one (a double put, an
//! unmap after a revocation) passes nothing else nvrs could check. If the allocator handed the
//! same address to the next table or mapping, as slab allocators do at once, the stale call
//! would release somebody else's pin or unmap somebody else's live mapping, and that peer's DMA
//! would then fault in the IOMMU or, without one, reach memory reused by another owner.
//!
//! So the structures whose addresses are handed out are not freed when their pin or mapping
//! ends: they are cleared (version and entries zero, pointers null, so a stale reader finds an
//! empty object, never freed memory) and parked here, and freed (or, for a table, reused by the
//! next table: [`reuse_table`]) only once [`CAPACITY`] more have been parked after them. A stale
//! pointer therefore names no live object until that many pins or mappings have ended after it,
//! and even then the put and unmap paths check the VA and the table the object belongs to.

use kernel::prelude::*;

use crate::p2p::{abi, table::TableBlock};

/// How many ended tables and mappings are kept before the oldest is freed or reused (under
/// 100 bytes each).
pub(crate) const CAPACITY: usize = 8192;

/// An object whose address a consumer held.
pub(crate) enum Parked {
    /// A page table and what shares its allocation.
    Table(KBox<TableBlock>),
    /// A DMA mapping header.
    Mapping(KBox<abi::DmaMapping>),
}

// SAFETY: A parked object's pointers are cleared before it is parked; it is only ever freed,
// from any thread.
unsafe impl Send for Parked {}

/// The ring of parked objects.
pub(crate) struct Ring {
    slots: KVec<Option<Parked>>,
    next: usize,
}

kernel::sync::global_lock! {
    // SAFETY: `init` calls `init` from the module initialiser, before any pin can exist.
    pub(crate) unsafe(uninit) static RING: Mutex<Ring> = Ring { slots: KVec::new(), next: 0 };
}

/// Allocates the ring. Called once, from module init.
pub(crate) fn init() -> Result {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { RING.init() };
    let mut slots = KVec::with_capacity(CAPACITY, GFP_KERNEL)?;
    for _ in 0..CAPACITY {
        slots.push(None, GFP_KERNEL)?;
    }
    RING.lock().slots = slots;
    Ok(())
}

/// Frees every parked object at module exit.
pub(crate) fn fini() {
    let slots = core::mem::take(&mut RING.lock().slots);
    drop(slots);
}

/// Clears `p` and parks it; frees the oldest parked object if the ring is full. Never
/// allocates.
pub(crate) fn park(mut p: Parked) {
    match &mut p {
        Parked::Table(t) => t.clear(),
        Parked::Mapping(m) => {
            m.version = 0;
            m.entries = 0;
            m.dma_addresses = core::ptr::null_mut();
            m.pci_dev = core::ptr::null_mut();
        }
    }
    let evicted = {
        let mut ring = RING.lock();
        let n = ring.slots.len();
        if n == 0 {
            // Not initialised (cannot happen after module init): free at once.
            return;
        }
        let i = ring.next % n;
        ring.next = (i + 1) % n;
        ring.slots.get_mut(i).and_then(|s| s.replace(p))
    };
    // Freed outside the lock.
    drop(evicted);
}

/// The oldest parked table, taken out of the ring for reuse once the ring is full: it has
/// then been parked as long as if it had been freed and handed back by the allocator, and
/// reusing it saves both. Its slot is the next one [`park`] fills, so the order holds.
pub(crate) fn reuse_table() -> Option<KBox<TableBlock>> {
    let mut ring = RING.lock();
    let n = ring.slots.len();
    let i = ring.next.checked_rem(n)?;
    let slot = ring.slots.get_mut(i)?;
    if !matches!(slot, Some(Parked::Table(_))) {
        return None;
    }
    match slot.take() {
        Some(Parked::Table(t)) => Some(t),
        _ => None,
    }
}
