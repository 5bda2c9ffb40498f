// SPDX-License-Identifier: GPL-2.0

//! Allocation: taking free chunks, lazy splitting, contiguous runs of roots, and the owner's
//! explicit split.
//!
//! An allocation of size `s` takes the first chunk of the smallest non-empty free list of size
//! `s` or larger (zeroed or dirty lists first, by [`AllocFlags::prefer_zeroed`]), and splits it
//! one size step at a time, each time keeping child 0 and leaving the siblings free. Before the
//! first split it reserves the sub-chunk slots every step needs, so a split never fails half-way:
//! a failed allocation leaves the manager as it was.

use super::chunk::{Node, CONTIG_TAIL, KERNEL, REVOKING, SUB_BITS, UNUSED, ZEROED};
use super::freelist::list_index;
use super::{transition, AllocFlags, ChunkId, ChunkVec, Event, MemType, Pmm, PmmError, State};
use super::{Storage, SubTree, MAX_SIZES};
use crate::hwref::ROOT_CHUNK_SIZE;

/// Highest sub-chunk slot plus one that a [`ChunkId`] can name.
const SLOT_LIMIT: usize = (1 << SUB_BITS) - 1;

impl<S: Storage> Pmm<S> {
    /// Allocates `out.len()` chunks of `size` for `ty`, writing their identifiers to `out`.
    ///
    /// User chunks come back [`State::TempPinned`] (confirm them with
    /// [`Pmm::unpin_allocated`]), kernel chunks [`State::Allocated`]. All or nothing: on error no
    /// chunk is allocated.
    pub(crate) fn alloc(
        &mut self,
        size: u64,
        ty: MemType,
        flags: AllocFlags,
        out: &mut [ChunkId],
    ) -> Result<(), PmmError> {
        let level = self.level_of(size).ok_or(PmmError::BadSize)?;
        let kernel = ty == MemType::Kernel;
        if let [slot] = out {
            // One chunk, the common allocation, is answered here, outside the general path and
            // its larger frame: below the root size from its size's preferred list (a chunk on
            // a list is in a touched root, so nothing is split or touched), and a root request
            // at once when no root is free (memory fragmented).
            let top = self.top();
            if level < top {
                if let Some(id) = self.first_free(list_index(kernel, level, flags.prefer_zeroed)) {
                    return match self.claim(id, kernel) {
                        Ok(id) => {
                            *slot = id;
                            Ok(())
                        }
                        Err(e) => Err(self.failed(e)),
                    };
                }
            } else if self.free_roots() == 0 {
                return Err(self.failed(PmmError::NoSpace));
            }
        }
        self.alloc_general(level, ty, flags, out)
    }

    /// Counts a failed allocation; returns its error.
    fn failed(&mut self, e: PmmError) -> PmmError {
        self.alloc_failures = self.alloc_failures.saturating_add(1);
        e
    }

    /// [`Pmm::alloc`] of any number of chunks of `level`, splitting as needed.
    #[inline(never)]
    fn alloc_general(
        &mut self,
        level: u8,
        ty: MemType,
        flags: AllocFlags,
        out: &mut [ChunkId],
    ) -> Result<(), PmmError> {
        for i in 0..out.len() {
            match self.alloc_one(level, ty, flags) {
                Ok(id) => {
                    if let Some(slot) = out.get_mut(i) {
                        *slot = id;
                    }
                }
                Err(e) => {
                    let e = self.failed(e);
                    for &id in out.get(..i).unwrap_or(&[]).iter().rev() {
                        let zeroed = self.node(id)?.has(ZEROED);
                        self.release(id, zeroed)?;
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Allocates one chunk of `level`.
    fn alloc_one(
        &mut self,
        level: u8,
        ty: MemType,
        flags: AllocFlags,
    ) -> Result<ChunkId, PmmError> {
        let kernel = ty == MemType::Kernel;
        let top = self.top();
        let (mut id, from) = self.search(level, kernel, flags).ok_or(PmmError::NoSpace)?;
        self.touch(id.root())?;
        if from > level {
            self.reserve(id, self.slots_for(from, level).ok_or(PmmError::Corrupt)?)?;
        }
        if from == top {
            let n = self.node_mut(id)?;
            n.flags = (n.flags & ZEROED) | if kernel { KERNEL } else { 0 };
        }
        for _ in level..from {
            id = self.split_node(id)?;
        }
        self.claim(id, kernel)
    }

    /// The free chunk an allocation of `level` takes or splits, and its level: the first chunk
    /// of the smallest non-empty list of `level` or larger, each size's preferred list (zeroed
    /// or dirty) first, and an untouched root after the dirty roots' list.
    fn search(&self, level: u8, kernel: bool, flags: AllocFlags) -> Option<(ChunkId, u8)> {
        let top = self.top();
        for l in level..=top {
            for z in [flags.prefer_zeroed, !flags.prefer_zeroed] {
                let untouched = || (l == top && !z).then(|| self.first_untouched()).flatten();
                let first = self.first_free(list_index(kernel && l != top, l, z));
                if let Some(id) = first.or_else(untouched) {
                    return Some((id, l));
                }
            }
        }
        None
    }

    /// Takes a free chunk off its list and hands it out: owned at once for the kernel,
    /// temp-pinned for a user.
    #[inline(always)]
    fn claim(&mut self, id: ChunkId, kernel: bool) -> Result<ChunkId, PmmError> {
        let event = if kernel {
            Event::ClaimOwned
        } else {
            Event::Claim
        };
        self.take_free(id, Some(event))?;
        Ok(id)
    }

    /// Allocates the chunk of `size` at framebuffer offset `addr` (which must be aligned to
    /// `size`), splitting the free chunk that holds it as needed; `NoSpace` if any part of it is
    /// in use or its root holds chunks of the other type.
    pub(crate) fn alloc_at(
        &mut self,
        addr: u64,
        size: u64,
        ty: MemType,
    ) -> Result<ChunkId, PmmError> {
        let level = self.level_of(size).ok_or(PmmError::BadSize)?;
        if addr.checked_rem(size) != Some(0) {
            return Err(PmmError::Misaligned);
        }
        let off = addr.checked_sub(self.base).ok_or(PmmError::InvalidId)?;
        let r = u32::try_from(off >> ROOT_CHUNK_SIZE.trailing_zeros())
            .map_err(|_| PmmError::InvalidId)?;
        let within = off & (ROOT_CHUNK_SIZE - 1);
        let kernel = ty == MemType::Kernel;
        let top = self.top();
        // Walk down to the chunk holding the range without changing anything.
        let mut id = ChunkId::new(r, 0);
        let mut n = *self.node(id)?;
        while n.state == State::IsSplit && n.level > level {
            id = self.child(id, self.child_index(&n, within)?)?;
            n = *self.node(id)?;
        }
        let type_ok = n.level == top || n.has(KERNEL) == kernel;
        if n.state != State::Free || !type_ok {
            self.alloc_failures = self.alloc_failures.saturating_add(1);
            return Err(PmmError::NoSpace);
        }
        if let Err(e) = self.touch(r) {
            self.alloc_failures = self.alloc_failures.saturating_add(1);
            return Err(e);
        }
        if n.level > level {
            let slots = self.slots_for(n.level, level).ok_or(PmmError::Corrupt)?;
            if let Err(e) = self.reserve(id, slots) {
                self.alloc_failures = self.alloc_failures.saturating_add(1);
                return Err(e);
            }
        }
        if n.level == top {
            let node = self.node_mut(id)?;
            node.flags = (node.flags & ZEROED) | if kernel { KERNEL } else { 0 };
        }
        while n.level > level {
            let k = self.child_index(&n, within)?;
            self.split_node(id)?;
            id = self.child(id, k)?;
            n = *self.node(id)?;
        }
        self.claim(id, kernel)
    }

    /// Allocates `bytes` (rounded up to whole roots) as adjacent roots, lowest address first;
    /// returns the first root, which stands for the whole run (free it, pin it, unpin it).
    pub(crate) fn alloc_contiguous(
        &mut self,
        bytes: u64,
        ty: MemType,
    ) -> Result<ChunkId, PmmError> {
        let n = bytes.div_ceil(ROOT_CHUNK_SIZE);
        if n == 0 {
            return Err(PmmError::BadSize);
        }
        let Some(first) = self.free_run(n) else {
            self.alloc_failures = self.alloc_failures.saturating_add(1);
            return Err(PmmError::NoSpace);
        };
        let run = u32::try_from(n).map_err(|_| PmmError::Corrupt)?;
        if let Err(e) = self.touch_range(first, first + (run - 1)) {
            self.alloc_failures = self.alloc_failures.saturating_add(1);
            return Err(e);
        }
        let kernel = ty == MemType::Kernel;
        for i in 0..run {
            let id = ChunkId::new(first + i, 0);
            self.claim(id, kernel)?;
            let node = self.node_mut(id)?;
            node.flags = (node.flags & ZEROED)
                | if kernel { KERNEL } else { 0 }
                | if i == 0 { 0 } else { CONTIG_TAIL };
        }
        self.root_mut(ChunkId::new(first, 0))?.run = run;
        Ok(ChunkId::new(first, 0))
    }

    /// The first of the lowest `n` adjacent free roots, if any: O(touched roots + pages), an
    /// untouched page counting as a whole.
    fn free_run(&self, n: u64) -> Option<u32> {
        let mut start = 0u32;
        let mut len = 0u64;
        for span in self.roots.spans() {
            let Some(roots) = span.roots else {
                if len == 0 {
                    start = span.first;
                }
                len += u64::from(span.len);
                if len >= n {
                    return Some(start);
                }
                continue;
            };
            for (i, r) in span.indices().zip(roots.iter()) {
                if r.node.state != State::Free {
                    len = 0;
                    continue;
                }
                if len == 0 {
                    start = i;
                }
                len += 1;
                if len == n {
                    return Some(start);
                }
            }
        }
        None
    }

    /// Confirms a user allocation: [`State::TempPinned`] → [`State::Allocated`] (for a contiguous
    /// run, every root of it).
    pub(crate) fn unpin_allocated(&mut self, id: ChunkId) -> Result<(), PmmError> {
        let run = self.run_of(id)?;
        transition(self.node(id)?.state, Event::Unpin)?;
        for i in 0..run {
            self.apply(ChunkId::new(id.root() + i, id.sub()), Event::Unpin)?;
        }
        Ok(())
    }

    /// Roots in the run `id` starts (1 for a sub-chunk); refuses the inside of a run.
    pub(super) fn run_of(&self, id: ChunkId) -> Result<u32, PmmError> {
        if self.node(id)?.has(CONTIG_TAIL) {
            return Err(PmmError::NotHead);
        }
        Ok(if id.sub() == 0 {
            self.root_ref(id)?.run
        } else {
            1
        })
    }

    /// The owner splits an allocated chunk into allocated children of the next smaller size;
    /// returns the first child (see [`Pmm::nth_child`]).
    pub(crate) fn split(&mut self, id: ChunkId) -> Result<ChunkId, PmmError> {
        let n = *self.node(id)?;
        if self.run_of(id)? != 1 {
            return Err(PmmError::BadSize);
        }
        transition(n.state, Event::Split)?;
        if n.state != State::Allocated {
            return Err(PmmError::NotAllocated);
        }
        if n.pins != 0 {
            return Err(PmmError::Pinned);
        }
        if n.has(REVOKING) {
            return Err(PmmError::Revoking);
        }
        let f = self.fanout(n.level).ok_or(PmmError::BadSize)?;
        self.reserve(id, usize::from(f))?;
        self.split_node(id)
    }

    /// Sub-chunk slots needed to split a chunk of level `from` down to level `to`.
    fn slots_for(&self, from: u8, to: u8) -> Option<usize> {
        (to + 1..=from).try_fold(0usize, |acc, l| {
            acc.checked_add(usize::from(self.fanout(l)?))
        })
    }

    /// Makes room for `slots` more sub-chunks in the root of `id`, creating its table if needed.
    fn reserve(&mut self, id: ChunkId, slots: usize) -> Result<(), PmmError> {
        let root = self.root_mut(id)?;
        match root.sub.as_mut() {
            Some(tree) => tree.nodes.try_reserve(slots)?,
            None => {
                let mut nodes = S::Vec::<Node>::new();
                nodes.try_reserve(slots)?;
                root.sub = Some(SubTree {
                    nodes,
                    free_groups: [0; MAX_SIZES - 2],
                });
            }
        }
        Ok(())
    }

    /// Splits a free or allocated chunk (room reserved); returns its first child.
    fn split_node(&mut self, id: ChunkId) -> Result<ChunkId, PmmError> {
        let n = *self.node(id)?;
        let child_level = n.level.checked_sub(1).ok_or(PmmError::BadSize)?;
        let f = self.fanout(n.level).ok_or(PmmError::Corrupt)?;
        transition(n.state, Event::Split)?;
        let child_state = if n.state == State::Free {
            State::Free
        } else {
            State::Allocated
        };
        let child_size =
            u32::try_from(self.size_of_level(child_level)).map_err(|_| PmmError::Corrupt)?;
        let template = Node::new(
            child_state,
            child_level,
            n.offset,
            id.sub(),
            n.flags & (ZEROED | KERNEL),
        );
        let start = self.take_group(id, f, child_size, template)?;
        if n.state == State::Free {
            self.unlink_free(id)?;
        }
        self.apply(id, Event::Split)?;
        let node = self.node_mut(id)?;
        node.children = start;
        node.free_children = if child_state == State::Free { f } else { 0 };
        if let Some(c) = self.count_mut(child_state, child_level) {
            *c = c.saturating_add(u64::from(f));
        }
        let first = ChunkId::new(id.root(), start + 1);
        if child_state == State::Free {
            self.push_group(id.root(), start + 1, f)?;
        }
        Ok(first)
    }

    /// Fills a group of `f` consecutive slots with the children of `parent` (recycled or
    /// appended; the parent of a root's children is always slot 0); returns the first slot.
    fn take_group(
        &mut self,
        parent: ChunkId,
        f: u16,
        child_size: u32,
        template: Node,
    ) -> Result<u16, PmmError> {
        let class = usize::from(template.level);
        let tree = self
            .root_mut(parent)?
            .sub
            .as_mut()
            .ok_or(PmmError::Corrupt)?;
        let recycled = if parent.sub() == 0 {
            0
        } else {
            tree.free_groups.get(class).copied().unwrap_or(0)
        };
        let child = |k: u16| Node {
            offset: template.offset + u32::from(k) * child_size,
            ..template
        };
        if recycled != 0 {
            let start = recycled - 1;
            let next = tree
                .nodes
                .get(usize::from(start))
                .ok_or(PmmError::Corrupt)?
                .next
                .sub();
            for k in 0..f {
                let slot = usize::from(start) + usize::from(k);
                let node = tree.nodes.get_mut(slot).ok_or(PmmError::Corrupt)?;
                if !node.has(UNUSED) {
                    return Err(PmmError::Corrupt);
                }
                *node = child(k);
            }
            if let Some(g) = tree.free_groups.get_mut(class) {
                *g = next;
            }
            return Ok(start);
        }
        let len = tree.nodes.len();
        if parent.sub() == 0 && len != 0 {
            return Err(PmmError::Corrupt);
        }
        if len + usize::from(f) > SLOT_LIMIT {
            return Err(PmmError::Corrupt);
        }
        for k in 0..f {
            if let Err(e) = tree.nodes.try_push(child(k)) {
                while tree.nodes.len() > len {
                    tree.nodes.pop();
                }
                return Err(e.into());
            }
        }
        u16::try_from(len).map_err(|_| PmmError::Corrupt)
    }
}
