// SPDX-License-Identifier: GPL-2.0

//! Intrusive doubly-linked free lists.
//!
//! One list per (type, size, zeroed/dirty); free roots are typeless and use the user slot of the
//! root size. The links live in the chunks' own metadata ([`Node::prev`](super::chunk::Node),
//! `next`) as [`ChunkId`]s, so pushing, taking the first chunk and removing any chunk are O(1):
//! freeing or merging never searches a list (the sorted-insert walk of the old drm/gpu buddy
//! free lists is what caused its multi-second soft lockups).
//!
//! The first chunk of a list is the one its head names; its `prev` is not kept, so taking it
//! (every allocation) writes no other chunk's metadata, often in another root. Pushing sets the
//! old first chunk's `prev`, as it stops being first.

use super::chunk::{transition, ChunkId, Event, Node, State, KERNEL, ZEROED};
use super::{Pmm, PmmError, Storage, MAX_SIZES};

/// Number of free lists: 2 types × [`MAX_SIZES`] × zeroed/dirty.
pub(super) const LISTS: usize = 2 * MAX_SIZES * 2;

/// The head of one free list.
#[derive(Clone, Copy, Debug)]
pub(super) struct ListHead {
    /// First chunk, or [`ChunkId::NIL`].
    pub(super) first: ChunkId,
    /// Chunks on the list.
    pub(super) len: u64,
}

impl ListHead {
    /// An empty list.
    pub(super) const EMPTY: ListHead = ListHead {
        first: ChunkId::NIL,
        len: 0,
    };
}

/// Index of the list of (kernel?, level, zeroed?).
pub(super) const fn list_index(kernel: bool, level: u8, zeroed: bool) -> usize {
    ((kernel as usize * MAX_SIZES) + level as usize) * 2 + zeroed as usize
}

/// The level of the chunks on list `key` (see [`list_index`]).
pub(super) const fn level_of_list(key: usize) -> usize {
    (key / 2) % MAX_SIZES
}

/// The list a free chunk belongs on: kernel chunks below the root size have their own lists
/// (free roots are typeless); `top` is the root's level.
pub(super) fn list_key(n: &Node, top: u8) -> usize {
    list_index(n.has(KERNEL) && n.level != top, n.level, n.has(ZEROED))
}

impl<S: Storage> Pmm<S> {
    /// The list a free chunk belongs on, from its metadata.
    pub(super) fn list_of(&self, id: ChunkId) -> Result<usize, PmmError> {
        Ok(list_key(self.node(id)?, self.top()))
    }

    /// Puts a free chunk at the front of its list.
    pub(super) fn push_free(&mut self, id: ChunkId) -> Result<(), PmmError> {
        let top = self.top();
        let n = Self::node_in(&mut self.roots, id)?;
        if n.state != State::Free {
            return Err(PmmError::Corrupt);
        }
        let list = self
            .lists
            .get_mut(list_key(n, top))
            .ok_or(PmmError::Corrupt)?;
        let old = link_front(list, id, n);
        if old != ChunkId::NIL {
            Self::node_in(&mut self.roots, old)?.prev = id;
        }
        Ok(())
    }

    /// Puts the free chunks of slots `first..first + n` of root `r`, consecutive and all
    /// belonging on one list, at the front of that list, `first` first: what `n` pushes from the
    /// last slot down would do, with one root lookup for the group (a split's children).
    pub(super) fn push_group(&mut self, r: u32, first: u16, n: u16) -> Result<(), PmmError> {
        let top = self.top();
        let end = first.checked_add(n).ok_or(PmmError::Corrupt)?;
        let mut slots = Self::slots_in(&mut self.roots, r)?;
        let key = list_key(slots.get(first)?, top);
        let list = self.lists.get_mut(key).ok_or(PmmError::Corrupt)?;
        let old = list.first;
        for s in first..end {
            let node = slots.get(s)?;
            if node.state != State::Free || list_key(node, top) != key {
                return Err(PmmError::Corrupt);
            }
            // The list's first chunk keeps no `prev`.
            node.prev = if s == first {
                ChunkId::NIL
            } else {
                ChunkId::new(r, s - 1)
            };
            node.next = if s + 1 == end {
                old
            } else {
                ChunkId::new(r, s + 1)
            };
        }
        if end == first {
            return Ok(());
        }
        list.first = ChunkId::new(r, first);
        list.len = list.len.saturating_add(u64::from(n));
        if old != ChunkId::NIL {
            Self::node_in(&mut self.roots, old)?.prev = ChunkId::new(r, end - 1);
        }
        Ok(())
    }

    /// Takes a free chunk off its list; returns its flags.
    pub(super) fn unlink_free(&mut self, id: ChunkId) -> Result<u8, PmmError> {
        self.take_free(id, None)
    }

    /// Takes a free chunk off its list and, with `event`, moves it out of [`State::Free`] as
    /// [`Pmm::apply`] would (the allocation fast path): one root lookup for the first chunk of
    /// a list. Nothing changes if `event` is illegal. Returns the chunk's flags.
    #[inline(always)]
    pub(super) fn take_free(&mut self, id: ChunkId, event: Option<Event>) -> Result<u8, PmmError> {
        let top = self.top();
        let mut slots = Self::slots_in(&mut self.roots, id.root())?;
        let n = slots.get(id.sub())?;
        let to = match event {
            Some(e) => transition(n.state, e)?,
            None => n.state,
        };
        let list = self
            .lists
            .get_mut(list_key(n, top))
            .ok_or(PmmError::Corrupt)?;
        let (prev, next) = (n.prev, n.next);
        let first = list.first == id;
        if n.state != State::Free || (!first && prev == ChunkId::NIL) {
            return Err(PmmError::Corrupt);
        }
        list.len = list.len.checked_sub(1).ok_or(PmmError::Corrupt)?;
        if first {
            // The next chunk becomes first: its `prev` is not kept.
            list.first = next;
        }
        n.prev = ChunkId::NIL;
        n.next = ChunkId::NIL;
        n.state = to;
        let (level, parent, flags) = (n.level, n.parent, n.flags);
        if to != State::Free && id.sub() != 0 {
            let p = slots.get(parent)?;
            p.free_children = p.free_children.checked_sub(1).ok_or(PmmError::Corrupt)?;
        }
        if to != State::Free {
            self.count_move(State::Free, to, level, 1);
        }
        if !first {
            self.link_neighbours(prev, next)?;
        }
        Ok(flags)
    }

    /// Links `prev` and `next`, the neighbours of a chunk taken from the middle of a list (a
    /// merge, a split, an allocation at an address): out of line, so that taking the first
    /// chunk, the common case, stays small.
    #[inline(never)]
    fn link_neighbours(&mut self, prev: ChunkId, next: ChunkId) -> Result<(), PmmError> {
        Self::node_in(&mut self.roots, prev)?.next = next;
        if next != ChunkId::NIL {
            Self::node_in(&mut self.roots, next)?.prev = prev;
        }
        Ok(())
    }

    /// The first chunk of list `key`, if any.
    pub(super) fn first_free(&self, key: usize) -> Option<ChunkId> {
        self.lists
            .get(key)
            .map(|l| l.first)
            .filter(|&f| f != ChunkId::NIL)
    }
}

/// Links free chunk `id` (whose metadata is `n`) at the front of `list`; returns the chunk that
/// was first, whose `prev` the caller sets to `id`.
pub(super) fn link_front(list: &mut ListHead, id: ChunkId, n: &mut Node) -> ChunkId {
    let old = list.first;
    n.prev = ChunkId::NIL;
    n.next = old;
    list.first = id;
    list.len = list.len.saturating_add(1);
    old
}
