// SPDX-License-Identifier: GPL-2.0

//! A full consistency check of the manager (O(chunks)), for tests and debugging.
//!
//! It verifies: the per-state counters; that every split chunk's children are live, of the next
//! smaller size, at the right offsets and point back to it; its free-children count; that no
//! split chunk has only free children (free memory is fully merged); that a root has a sub-chunk
//! table exactly while split; the types of sub-chunks; that pins and the revoking mark sit on
//! allocated chunks only; contiguous runs; every free list's links, length and membership; the
//! root table's own bookkeeping (its directory, pages, touched count and first untouched page);
//! and that the chunks not split cover every byte exactly once.

use super::chunk::{ChunkId, Node, State, CONTIG_TAIL, KERNEL, REVOKING, STATES, UNUSED};
use super::{Pmm, Storage, MAX_SIZES};
use crate::hwref::ROOT_CHUNK_SIZE;

impl<S: Storage> Pmm<S> {
    /// Checks every invariant; the error names the first one broken.
    pub(crate) fn check(&self) -> Result<(), &'static str> {
        let mut counts = [[0u64; MAX_SIZES]; STATES];
        let mut leaf_bytes = 0u64;
        let mut run_left = 0u32;
        let mut run_state = State::Free;
        let mut next = 0u32;
        self.roots.check()?;
        for (r, root) in self.roots.iter() {
            // A run is touched whole: untouched roots (skipped here) never end one.
            if r != next && run_left > 0 {
                return Err("contiguous run over untouched roots");
            }
            next = r.saturating_add(1);
            let n = &root.node;
            if n.level != self.top() || n.offset != 0 {
                return Err("root level or offset");
            }
            if root.sub.is_some() != (n.state == State::IsSplit) {
                return Err("root table present iff split");
            }
            if run_left > 0 {
                if !n.has(CONTIG_TAIL) || n.state != run_state || root.run != 1 {
                    return Err("contiguous run tail");
                }
                run_left -= 1;
            } else if n.has(CONTIG_TAIL) {
                return Err("tail outside a run");
            }
            if root.run == 0 {
                return Err("zero run");
            }
            if root.run > 1 {
                if !matches!(n.state, State::Allocated | State::TempPinned) {
                    return Err("run head state");
                }
                run_left = root.run - 1;
                run_state = n.state;
            }
            self.check_node(ChunkId::new(r, 0), n, &mut counts, &mut leaf_bytes)?;
            if let Some(tree) = root.sub.as_ref() {
                self.check_free_groups(&tree.free_groups, &tree.nodes)?;
                for (slot, c) in tree.nodes.iter().enumerate() {
                    if c.has(UNUSED) {
                        continue;
                    }
                    let sub = u16::try_from(slot + 1).map_err(|_| "slot")?;
                    let id = ChunkId::new(r, sub);
                    let p = self
                        .node(ChunkId::new(r, c.parent))
                        .map_err(|_| "dangling parent")?;
                    if p.state != State::IsSplit || c.level.checked_add(1) != Some(p.level) {
                        return Err("parent not split or wrong level");
                    }
                    let k = u32::from(sub - 1).checked_sub(u32::from(p.children));
                    let f = self.fanout(p.level).map(u32::from);
                    if !matches!((k, f), (Some(k), Some(f)) if k < f) {
                        return Err("child outside its parent's group");
                    }
                    let size = u32::try_from(self.size_of_level(c.level)).map_err(|_| "size")?;
                    if Some(c.offset) != k.map(|k| p.offset + k * size) {
                        return Err("child offset");
                    }
                    if c.has(KERNEL) != n.has(KERNEL) || c.has(CONTIG_TAIL) {
                        return Err("child flags");
                    }
                    self.check_node(id, c, &mut counts, &mut leaf_bytes)?;
                }
            }
        }
        if run_left != 0 {
            return Err("run past the end");
        }
        // Untouched roots: free, unsplit, on no list (the lists hold touched chunks only: see
        // `check_lists`).
        let untouched = self.untouched_count();
        if let Some(c) = counts
            .get_mut(State::Free.index())
            .and_then(|c| c.get_mut(usize::from(self.top())))
        {
            *c += untouched;
        }
        leaf_bytes += untouched * ROOT_CHUNK_SIZE;
        if counts != self.counts() {
            return Err("state counters");
        }
        if leaf_bytes != self.total_bytes() {
            return Err("chunks do not cover the range");
        }
        self.check_lists()
    }

    /// Checks one live chunk.
    fn check_node(
        &self,
        id: ChunkId,
        n: &Node,
        counts: &mut [[u64; MAX_SIZES]; STATES],
        leaf_bytes: &mut u64,
    ) -> Result<(), &'static str> {
        if let Some(c) = counts
            .get_mut(n.state.index())
            .and_then(|c| c.get_mut(usize::from(n.level)))
        {
            *c += 1;
        }
        if (n.pins != 0 || n.has(REVOKING)) && n.state != State::Allocated {
            return Err("pins or revoking on a chunk not allocated");
        }
        if n.state != State::IsSplit {
            *leaf_bytes += self.size_of_level(n.level);
            return Ok(());
        }
        let f = self
            .fanout(n.level)
            .ok_or("split chunk of the smallest size")?;
        let mut free = 0u16;
        for k in 0..f {
            let c = self
                .child(id, k)
                .and_then(|c| self.node(c))
                .map_err(|_| "missing child")?;
            if c.parent != id.sub() {
                return Err("child's parent");
            }
            if c.state == State::Free {
                free += 1;
            }
        }
        if free != n.free_children {
            return Err("free-children count");
        }
        if free == f {
            return Err("free children not merged");
        }
        Ok(())
    }

    /// Checks a root's recycled child groups: each stack ends, holds only unused slots of the
    /// right group size, and together they hold every unused slot (none leaks).
    fn check_free_groups(
        &self,
        heads: &[u16; MAX_SIZES - 2],
        nodes: &[Node],
    ) -> Result<(), &'static str> {
        let mut stacked = 0usize;
        for (class, &head) in heads.iter().enumerate() {
            let level = u8::try_from(class + 1).map_err(|_| "class")?;
            let f = usize::from(self.fanout(level).unwrap_or(0));
            let mut g = head;
            while g != 0 {
                let start = usize::from(g - 1);
                let group = nodes
                    .get(start..start + f)
                    .ok_or("recycled group out of range")?;
                if f == 0 || !group.iter().all(|n| n.has(UNUSED)) {
                    return Err("recycled group in use");
                }
                stacked += f;
                if stacked > nodes.len() {
                    return Err("recycled-group cycle");
                }
                g = group.first().map_or(0, |n| n.next.sub());
            }
        }
        if stacked != nodes.iter().filter(|n| n.has(UNUSED)).count() {
            return Err("unused slots not recycled");
        }
        Ok(())
    }

    /// Checks the free lists.
    fn check_lists(&self) -> Result<(), &'static str> {
        for (key, list) in self.lists.iter().enumerate() {
            let mut prev = ChunkId::NIL;
            let mut id = list.first;
            let mut len = 0u64;
            while id != ChunkId::NIL {
                if self.roots.get(id.root()).is_none() {
                    return Err("untouched root on a free list");
                }
                let n = self.node(id).map_err(|_| "dead chunk on a free list")?;
                // The first chunk's `prev` is not kept.
                if n.state != State::Free || (prev != ChunkId::NIL && n.prev != prev) {
                    return Err("free-list chunk state or back link");
                }
                if self.list_of(id) != Ok(key) {
                    return Err("chunk on the wrong free list");
                }
                len += 1;
                if len > list.len {
                    return Err("free list longer than its count");
                }
                prev = id;
                id = n.next;
            }
            if len != list.len {
                return Err("free-list length");
            }
        }
        // That every free chunk is on a list: the state counters compare the free chunks found
        // in the trees with the lists' lengths, which the walks here confirm.
        Ok(())
    }
}
