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
//! # Tombstones
//!
//! The ring alone bounds protection by pins ended, not by time: once [`CAPACITY`] tables were
//! parked after a revoked pin's, its address is the next pin's, and the consumer that kept it
//! (the protocol's normal stale use: free callback fired, `put_pages(va, table)` later) would
//! put or map another owner's pin. So a *revoked* pin's table is kept as a [`Tomb`] (block
//! cleared, plus the pin's VA) until its consumer ends it, and while the tomb exists no pin can
//! get that address. Either end of the protocol ends it ([`unbury`]; the block then goes to the
//! ring): `nvidia_p2p_put_pages(va, table)`, or `nvidia_p2p_free_page_table(table)`, which
//! NVIDIA's protocol has a consumer call from its free callback instead of a put, so that those
//! consumers' tombs go away too. Tombs are bounded by [`TOMBS_MAX`] (memory: under 250 bytes
//! each); beyond it the *oldest* tomb goes to the ring, so the most recent revocations, the
//! ones whose consumers are most likely still to call, stay protected longest. A revocation
//! whose tomb node cannot be allocated (allocated with no lock held) falls back to the ring,
//! and so does a consumer's put racing the revocation itself (it finds the live pin, the tomb
//! stays until the consumer frees the table or the cap evicts it).
//!
//! Residual: a consumer that uses a pointer after its *own* put (a double put, a protocol
//! violation) is only protected for [`CAPACITY`] table ends, as before.
//!
//! Tables and DMA-mapping headers have separate rings, so mapping tables for many peers does
//! not shorten the tables' quarantine.
//!
//! The ring also keeps a few [`Spare`]s: the pin object and registry node of ended pins, for the
//! next pins. Their addresses were never handed out, so they need no quarantine; they are kept
//! here so that a pin that ends returns its table block and its spare in one lock hold, and the
//! next pin takes both in one.

use kernel::{
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
    sync::atomic::{
        Acquire,
        Atomic,
        Release, //
    },
};

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

/// The most tombs kept (two nodes and a block, under 250 bytes each).
pub(crate) const TOMBS_MAX: usize = 65536;

/// A revoked pin's table, reserved until its consumer puts or frees it.
pub(crate) struct Tomb {
    /// The pin's VA: a put must name it too.
    va: u64,
    /// When it was made, in [`Tombs::seq`] order: its key in [`TombTrees::by_age`].
    seq: u64,
    /// The cleared block, once the revoked pin has let it go.
    block: Option<KBox<TableBlock>>,
}

// SAFETY: A tomb's block is cleared (its pointers null) before it is kept; it is only ever
// freed or parked, from any thread.
unsafe impl Send for Tomb {}

/// A tomb's registry nodes, allocated with no lock held.
pub(crate) struct TombNode {
    by_key: RBTreeNodeReservation<usize, Tomb>,
    by_age: RBTreeNodeReservation<u64, usize>,
}

/// A tomb taken out of the registry, with both its nodes: dropped (or its block parked) once
/// [`TOMBS`] is released.
type Unburied = (RBTreeNode<usize, Tomb>, Option<RBTreeNode<u64, usize>>);

/// The tombs, by table address and by age.
pub(crate) struct TombTrees {
    by_key: RBTree<usize, Tomb>,
    /// Table address by [`Tomb::seq`]: the first is the oldest, evicted when the set is full.
    by_age: RBTree<u64, usize>,
}

impl TombTrees {
    /// Takes the tomb at `key` out of both trees, if there is one and `take(tomb)` holds.
    fn remove_if(&mut self, key: usize, take: impl FnOnce(&Tomb) -> bool) -> Option<Unburied> {
        let seq = self.by_key.get(&key).filter(|t| take(t))?.seq;
        let node = self.by_key.remove_node(&key)?;
        Some((node, self.by_age.remove_node(&seq)))
    }

    /// Takes the oldest tomb out of both trees.
    fn remove_oldest(&mut self) -> Option<Unburied> {
        let key = *self.by_age.cursor_front()?.current().1;
        self.remove_if(key, |_| true)
    }
}

/// The tomb registry.
pub(crate) struct Tombs {
    /// `None` before module init and after module exit.
    trees: Option<TombTrees>,
    /// How many tombs the trees hold.
    count: usize,
    /// The next tomb's [`Tomb::seq`].
    seq: u64,
}

kernel::sync::global_lock! {
    // SAFETY: `init` calls `init` from the module initialiser, before any pin can exist.
    // A spinlock: nothing is freed or allocated under it (removed nodes are dropped after).
    pub(crate) unsafe(uninit) static TOMBS: SpinLock<Tombs> = Tombs {
        trees: None,
        count: 0,
        seq: 0,
    };
}

/// How many [`Spare`]s are kept: enough for the pins a few threads end and start again at
/// once (a spare is a few hundred bytes).
pub(crate) const SPARES: usize = 16;

/// The ring of parked objects, and the spares.
pub(crate) struct Ring {
    /// Parked tables.
    slots: KVec<Option<Parked>>,
    /// Parked DMA-mapping headers, a ring of their own.
    maps: KVec<Option<Parked>>,
    /// The slot of `maps` parked next.
    next_map: usize,
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
        maps: KVec::new(),
        next_map: 0,
        next: 0,
        spares: KVec::new(),
    };
}

/// Allocates the ring. Called once, from module init.
pub(crate) fn init() -> Result {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { RING.init() };
    // SAFETY: As above, for `TOMBS`.
    unsafe { TOMBS.init() };
    TOMBS.lock().trees = Some(TombTrees {
        by_key: RBTree::new(),
        by_age: RBTree::new(),
    });
    let mut slots = KVec::with_capacity(CAPACITY, GFP_KERNEL)?;
    let mut maps = KVec::with_capacity(CAPACITY, GFP_KERNEL)?;
    for _ in 0..CAPACITY {
        slots.push(None, GFP_KERNEL)?;
        maps.push(None, GFP_KERNEL)?;
    }
    let mut spares = KVec::with_capacity(SPARES, GFP_KERNEL)?;
    {
        let mut ring = RING.lock();
        core::mem::swap(&mut ring.slots, &mut slots);
        core::mem::swap(&mut ring.maps, &mut maps);
        core::mem::swap(&mut ring.spares, &mut spares);
    }
    // The empty vectors swapped out are dropped here, outside the lock.
    Ok(())
}

/// Frees every parked object and spare at module exit.
pub(crate) fn fini() {
    let tombs = TOMBS.lock().trees.take();
    drop(tombs);
    let (slots, maps, spares) = {
        let mut ring = RING.lock();
        (
            core::mem::take(&mut ring.slots),
            core::mem::take(&mut ring.maps),
            core::mem::take(&mut ring.spares),
        )
    };
    drop(slots);
    drop(maps);
    drop(spares);
}

/// How many tombs exist, written under [`TOMBS`] and read without it by [`to_tomb`]: every
/// ended pin's table passes there, and almost none has a tomb. A block's tomb, if any, was
/// buried by the revocation before the pin let the block go (in that thread, or in one that
/// saw the pin's state change), so a block that has one never reads zero here.
static TOMB_COUNT: Atomic<usize> = Atomic::new(0);

/// Nodes for [`bury`], allocated (with no lock held); `None` if that fails.
pub(crate) fn tomb_node() -> Option<TombNode> {
    Some(TombNode {
        by_key: RBTreeNodeReservation::new(GFP_KERNEL).ok()?,
        by_age: RBTreeNodeReservation::new(GFP_KERNEL).ok()?,
    })
}

/// Ends tombs taken out of the registry, with [`TOMBS`] released: their nodes are freed and
/// their blocks, if the revoked pins had let them go, go to the ring.
fn end_tombs(tombs: impl IntoIterator<Item = Option<Unburied>>) {
    for (node, age) in tombs.into_iter().flatten() {
        drop(age);
        let (_, tomb) = node.to_key_value();
        if let Some(b) = tomb.block {
            park(Parked::Table(b));
        }
    }
}

/// Reserves the table at `key` of a pin being revoked, with VA `va`, as a tomb: its block is
/// kept there when the pin lets it go. If [`crate::tombs_max`] tombs exist, the oldest ends.
/// Never allocates.
pub(crate) fn bury(node: TombNode, key: usize, va: u64) {
    let (evicted, replaced) = {
        let mut guard = TOMBS.lock();
        let tombs = &mut *guard;
        let Some(trees) = tombs.trees.as_mut() else {
            return;
        };
        // A live pin's table has no tomb; one left by an earlier revocation would be stale.
        let replaced = trees.remove_if(key, |_| true);
        let count = tombs.count - usize::from(replaced.is_some());
        let evicted = if count >= crate::tombs_max() {
            trees.remove_oldest()
        } else {
            None
        };
        let seq = tombs.seq;
        tombs.seq += 1;
        trees.by_age.insert(node.by_age.into_node(seq, key));
        trees.by_key.insert(node.by_key.into_node(
            key,
            Tomb {
                va,
                seq,
                block: None,
            },
        ));
        tombs.count = count + 1 - usize::from(evicted.is_some());
        TOMB_COUNT.store(tombs.count, Release);
        (evicted, replaced)
    };
    end_tombs([evicted, replaced]);
}

/// Ends the tomb at `key`, if there is one and, with `va` given, its VA is `va`: a consumer
/// put the revoked pin (`Some`) or freed its table (`None`). Its block goes to the ring.
/// Whether there was one.
pub(crate) fn unbury(key: usize, va: Option<u64>) -> bool {
    let tomb = {
        let mut tombs = TOMBS.lock();
        let tomb = tombs
            .trees
            .as_mut()
            .and_then(|t| t.remove_if(key, |t| va.is_none_or(|va| t.va == va)));
        if tomb.is_some() {
            tombs.count -= 1;
            TOMB_COUNT.store(tombs.count, Release);
        }
        tomb
    };
    let found = tomb.is_some();
    end_tombs([tomb]);
    found
}

/// How many tombs exist.
pub(crate) fn tomb_count() -> usize {
    TOMB_COUNT.load(Acquire)
}

/// Gives a cleared table block to its tomb, if it has one; otherwise hands it back.
fn to_tomb(p: Parked) -> Option<Parked> {
    let Parked::Table(b) = p else {
        return Some(p);
    };
    if TOMB_COUNT.load(Acquire) == 0 {
        return Some(Parked::Table(b));
    }
    let key = core::ptr::from_ref(&b.table) as usize;
    let mut tombs = TOMBS.lock();
    match tombs.trees.as_mut().and_then(|t| t.by_key.get_mut(&key)) {
        Some(t) if t.block.is_none() => {
            t.block = Some(b);
            None
        }
        _ => Some(Parked::Table(b)),
    }
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
        let (slots, next) = match p {
            Parked::Table(_) => (&mut self.slots, &mut self.next),
            Parked::Mapping(_) => (&mut self.maps, &mut self.next_map),
        };
        let i = *next;
        let Some(slot) = slots.get_mut(i) else {
            return Some(p);
        };
        let evicted = slot.replace(p);
        *next = if i + 1 < slots.len() { i + 1 } else { 0 };
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
    let Some(p) = to_tomb(p) else {
        return;
    };
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
    let table = table.and_then(to_tomb);
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
