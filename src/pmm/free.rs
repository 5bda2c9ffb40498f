// SPDX-License-Identifier: GPL-2.0

//! Freeing, eager merging, the owner's explicit merge, and P2P pins.
//!
//! # P2P pins and revocation
//!
//! A peer (an RDMA NIC, through the `nvidia_p2p_*` layer) may pin an allocated chunk:
//! [`Pmm::p2p_pin`] counts the pin. A chunk with live pins never returns to a free list, since
//! a peer may still be writing it. The protocol when its owner frees it:
//!
//! 1. [`Pmm::free`] returns [`FreeOutcome::Revoke`] and changes nothing but marking the chunk
//!    *revoking*: from now on [`Pmm::p2p_pin`] refuses it ([`PmmError::Revoking`]), and it can
//!    be neither split nor merged.
//! 2. The caller runs the P2P layer's revocation hook for the chunk's range (outside the PMM's
//!    lock if the hook sleeps: NVIDIA's free callbacks do). Each revoked pin is dropped with
//!    [`Pmm::p2p_unpin`].
//! 3. The caller calls [`Pmm::free`] again, which now returns [`FreeOutcome::Freed`] (or
//!    `Revoke` again if pins remain).
//!
//! # Merging
//!
//! When the last child of a split chunk becomes free, the children leave their free lists, their
//! slots are released, and the parent becomes free (zeroed only if every child was), and so on
//! up to the root. A root that merges drops its sub-chunk table and becomes a typeless free root.
//! Merging does not require equal zeroed marks (unlike drm/gpu buddy), so free memory is always
//! fully merged.

use super::chunk::{CONTIG_TAIL, KERNEL, REVOKING, UNUSED, ZEROED};
use super::freelist::{link_front, list_key};
use super::{
    transition, ChunkId, ChunkVec, Event, FreeOutcome, Pmm, PmmError, State, Storage, Zero,
};

impl<S: Storage> Pmm<S> {
    /// Frees an allocated or temp-pinned chunk (for the first root of a contiguous run, the whole
    /// run), marking its memory zeroed or dirty; see the module documentation for
    /// [`FreeOutcome::Revoke`].
    ///
    /// Inlined: freeing a sub-chunk, the common case, costs its caller one call.
    #[inline(always)]
    pub(crate) fn free(&mut self, id: ChunkId, zero: Zero) -> Result<FreeOutcome, PmmError> {
        let zeroed = zero == Zero::Zeroed;
        if id.sub() != 0 {
            // A sub-chunk is never part of a run.
            return self.release(id, zeroed);
        }
        let n = self.node(id)?;
        if n.has(CONTIG_TAIL) {
            return Err(PmmError::NotHead);
        }
        transition(n.state, Event::Free)?;
        if n.pins != 0 {
            // The run's pins are counted on its first root.
            return self.release(id, zeroed);
        }
        let run = core::mem::replace(&mut self.root_mut(id)?.run, 1);
        for i in 0..run {
            self.release(ChunkId::new(id.root() + i, 0), zeroed)?;
        }
        Ok(FreeOutcome::Freed)
    }

    /// Returns an allocated or temp-pinned chunk to the front of its free list and merges
    /// upwards; one root lookup unless the list's first chunk or a merge is in another root.
    /// A chunk with P2P pins is only marked revoking (see the module documentation).
    #[inline(always)]
    pub(super) fn release(&mut self, id: ChunkId, zeroed: bool) -> Result<FreeOutcome, PmmError> {
        let top = self.top();
        let mut slots = Self::slots_in(&mut self.roots, id.root())?;
        let n = slots.get(id.sub())?;
        let from = n.state;
        transition(from, Event::Free)?;
        if n.pins != 0 {
            n.flags |= REVOKING;
            return Ok(FreeOutcome::Revoke { pins: n.pins });
        }
        n.state = State::Free;
        n.flags &= !(REVOKING | CONTIG_TAIL | ZEROED);
        if zeroed {
            n.flags |= ZEROED;
        }
        if id.sub() == 0 {
            n.flags &= !KERNEL;
        }
        let list = self
            .lists
            .get_mut(list_key(n, top))
            .ok_or(PmmError::Corrupt)?;
        let head = link_front(list, id, n);
        let (level, parent) = (n.level, n.parent);
        let mut full = false;
        if id.sub() != 0 {
            let p = slots.get(parent)?;
            p.free_children = p.free_children.checked_add(1).ok_or(PmmError::Corrupt)?;
            full = Some(p.free_children) == self.fanouts.get(usize::from(p.level)).copied();
        }
        if head != ChunkId::NIL {
            if head.root() == id.root() {
                slots.get(head.sub())?.prev = id;
            } else {
                Self::node_in(&mut self.roots, head)?.prev = id;
            }
        }
        self.count_move(from, State::Free, level, 1);
        if full {
            self.merge_up(id)?;
        }
        Ok(FreeOutcome::Freed)
    }

    /// Merges the ancestors of a chunk that just became free while all their children are free.
    fn merge_up(&mut self, mut id: ChunkId) -> Result<(), PmmError> {
        while let Some(parent) = self.parent(id)? {
            let p = *self.node(parent)?;
            let f = self.fanout(p.level).ok_or(PmmError::Corrupt)?;
            if p.free_children != f {
                return Ok(());
            }
            if p.state != State::IsSplit {
                return Err(PmmError::Corrupt);
            }
            let mut all_zeroed = true;
            for k in 0..f {
                // Child `k` (see `Pmm::child`), read once as it leaves its list.
                let slot = p.children.checked_add(k + 1).ok_or(PmmError::Corrupt)?;
                let flags = self.unlink_free(ChunkId::new(parent.root(), slot))?;
                all_zeroed &= flags & ZEROED != 0;
            }
            self.drop_children(parent, State::Free)?;
            self.apply(parent, Event::MergeFree)?;
            let root = parent.sub() == 0;
            let n = self.node_mut(parent)?;
            n.flags &= !ZEROED;
            if all_zeroed {
                n.flags |= ZEROED;
            }
            if root {
                n.flags &= !KERNEL;
            }
            self.push_free(parent)?;
            id = parent;
        }
        Ok(())
    }

    /// The owner merges the children of a split chunk, all allocated without pins, back into
    /// one allocated chunk.
    pub(crate) fn merge(&mut self, id: ChunkId) -> Result<(), PmmError> {
        let n = *self.node(id)?;
        transition(n.state, Event::MergeAllocated)?;
        let f = self.children(id)?;
        let mut all_zeroed = true;
        for k in 0..f {
            let c = self.node(self.child(id, k)?)?;
            if c.state != State::Allocated {
                return Err(PmmError::NotAllocated);
            }
            if c.pins != 0 {
                return Err(PmmError::Pinned);
            }
            if c.has(REVOKING) {
                return Err(PmmError::Revoking);
            }
            all_zeroed &= c.has(ZEROED);
        }
        self.drop_children(id, State::Allocated)?;
        self.apply(id, Event::MergeAllocated)?;
        let node = self.node_mut(id)?;
        node.flags &= !ZEROED;
        if all_zeroed {
            node.flags |= ZEROED;
        }
        Ok(())
    }

    /// Releases the slots of a split chunk's children, all in `state`.
    fn drop_children(&mut self, parent: ChunkId, state: State) -> Result<(), PmmError> {
        let p = *self.node(parent)?;
        let f = self.fanout(p.level).ok_or(PmmError::Corrupt)?;
        let child_level = p.level.checked_sub(1).ok_or(PmmError::Corrupt)?;
        if let Some(c) = self.count_mut(state, child_level) {
            *c = c.checked_sub(u64::from(f)).ok_or(PmmError::Corrupt)?;
        }
        self.node_mut(parent)?.free_children = 0;
        let root = self.root_mut(parent)?;
        if parent.sub() == 0 {
            root.sub = None;
            return Ok(());
        }
        let tree = root.sub.as_mut().ok_or(PmmError::Corrupt)?;
        let start = usize::from(p.children);
        let end = start + usize::from(f);
        for slot in start..end {
            let node = tree.nodes.get_mut(slot).ok_or(PmmError::Corrupt)?;
            node.flags = UNUSED;
            node.state = State::Free;
        }
        if end == tree.nodes.len() {
            while tree.nodes.len() > start {
                tree.nodes.pop();
            }
        } else {
            let class = usize::from(child_level);
            let g = tree.free_groups.get_mut(class).ok_or(PmmError::Corrupt)?;
            let next = ChunkId::new(0, *g);
            *g = p.children + 1;
            if let Some(first) = tree.nodes.get_mut(start) {
                first.next = next;
            }
        }
        Ok(())
    }

    /// Counts a P2P pin on an allocated chunk (for a contiguous run, on its first root).
    pub(crate) fn p2p_pin(&mut self, id: ChunkId) -> Result<u32, PmmError> {
        self.run_of(id)?;
        let n = self.node_mut(id)?;
        if n.state != State::Allocated {
            return Err(PmmError::NotAllocated);
        }
        if n.has(REVOKING) {
            return Err(PmmError::Revoking);
        }
        n.pins = n.pins.checked_add(1).ok_or(PmmError::PinOverflow)?;
        Ok(n.pins)
    }

    /// Drops a P2P pin; returns the pins left.
    pub(crate) fn p2p_unpin(&mut self, id: ChunkId) -> Result<u32, PmmError> {
        self.run_of(id)?;
        let n = self.node_mut(id)?;
        n.pins = n.pins.checked_sub(1).ok_or(PmmError::NotPinned)?;
        Ok(n.pins)
    }
}
