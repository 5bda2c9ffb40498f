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
//! next table: [`reuse_pin`]) only once [`CAPACITY`] more have been parked after them. A stale
//! pointer therefore names no live object until that many pins or mappings have ended after it,
//! and even then the put and unmap paths check the VA and the table the object belongs to.
//!
//! The ring also keeps a few [`Spare`]s: the pin object and registry node of ended pins, for the
//! next pins. Their addresses were never handed out, so they need no quarantine; they are kept
//! here so that a pin that ends returns its table block and its spare in one lock hold, and the
//! next pin takes both in one.

use kernel::prelude::*;

use crate::p2p::{abi, pin::Spare, table::TableBlock};

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

/// How many [`Spare`]s are kept: enough for the pins a few threads end and start again at
/// once (a spare is a few hundred bytes).
pub(crate) const SPARES: usize = 16;

/// The ring of parked objects, and the spares.
pub(crate) struct Ring {
    slots: KVec<Option<Parked>>,
    /// The slot parked next: the oldest parked object's, once the ring is full. Below
    /// `slots.len()` once initialised.
    next: usize,
    /// Never grows beyond the capacity allocated at init.
    spares: KVec<Spare>,
}

kernel::sync::global_lock! {
    // SAFETY: `init` calls `init` from the module initialiser, before any pin can exist.
    // A spinlock: nothing is freed, allocated or waited for under it.
    pub(crate) unsafe(uninit) static RING: SpinLock<Ring> = Ring {
        slots: KVec::new(),
        next: 0,
        spares: KVec::new(),
    };
}

/// Allocates the ring. Called once, from module init.
pub(crate) fn init() -> Result {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { RING.init() };
    let mut slots = KVec::with_capacity(CAPACITY, GFP_KERNEL)?;
    for _ in 0..CAPACITY {
        slots.push(None, GFP_KERNEL)?;
    }
    let mut spares = KVec::with_capacity(SPARES, GFP_KERNEL)?;
    {
        let mut ring = RING.lock();
        core::mem::swap(&mut ring.slots, &mut slots);
        core::mem::swap(&mut ring.spares, &mut spares);
    }
    // The empty vectors swapped out are dropped here, outside the lock.
    Ok(())
}

/// Frees every parked object and spare at module exit.
pub(crate) fn fini() {
    let (slots, spares) = {
        let mut ring = RING.lock();
        (
            core::mem::take(&mut ring.slots),
            core::mem::take(&mut ring.spares),
        )
    };
    drop(slots);
    drop(spares);
}

/// Clears `p`.
fn clear(p: &mut Parked) {
    match p {
        Parked::Table(t) => t.clear(),
        Parked::Mapping(m) => {
            m.version = 0;
            m.entries = 0;
            m.dma_addresses = core::ptr::null_mut();
            m.pci_dev = core::ptr::null_mut();
        }
    }
}

impl Ring {
    /// Parks `p` (cleared) in the next slot; returns the oldest parked object it evicts.
    /// `p` itself comes back if there are no slots (before module init).
    fn park(&mut self, p: Parked) -> Option<Parked> {
        let i = self.next;
        let Some(slot) = self.slots.get_mut(i) else {
            return Some(p);
        };
        let evicted = slot.replace(p);
        self.next = if i + 1 < self.slots.len() { i + 1 } else { 0 };
        evicted
    }

    /// The oldest parked table, taken out for reuse once the ring is full: it has then been
    /// parked as long as if it had been freed and handed back by the allocator, and reusing it
    /// saves both. Its slot is the next one [`Ring::park`] fills, so the order holds.
    fn reuse_table(&mut self) -> Option<KBox<TableBlock>> {
        let slot = self.slots.get_mut(self.next)?;
        if !matches!(slot, Some(Parked::Table(_))) {
            return None;
        }
        match slot.take() {
            Some(Parked::Table(t)) => Some(t),
            _ => None,
        }
    }
}

/// Clears `p` and parks it; frees the oldest parked object if the ring is full. Never
/// allocates.
pub(crate) fn park(mut p: Parked) {
    clear(&mut p);
    let evicted = RING.lock().park(p);
    // Freed outside the lock (or `p` itself, before module init).
    drop(evicted);
}

/// What an ended pin leaves for the next ones: its table block, parked as [`park`] does, and
/// its spare, kept if there is room. One lock hold; never allocates.
pub(crate) fn park_pin(table: Option<KBox<TableBlock>>, spare: Spare) {
    let mut table = table.map(Parked::Table);
    if let Some(t) = table.as_mut() {
        clear(t);
    }
    let (evicted, unkept) = {
        let mut ring = RING.lock();
        let evicted = table.and_then(|t| ring.park(t));
        (evicted, ring.spares.push_within_capacity(spare).err())
    };
    // Freed outside the lock.
    drop(evicted);
    drop(unkept);
}

/// What a new pin reuses: the oldest parked table block once the ring is full, and a spare if
/// one is kept. One lock hold.
pub(crate) fn reuse_pin() -> (Option<KBox<TableBlock>>, Option<Spare>) {
    let mut ring = RING.lock();
    (ring.reuse_table(), ring.spares.pop())
}
