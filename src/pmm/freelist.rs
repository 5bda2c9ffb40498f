// SPDX-License-Identifier: GPL-2.0

//! Intrusive doubly-linked free lists.
//!
//! One list per (type, size, zeroed/dirty); free roots are typeless and use the user slot of the
//! root size. The links live in the chunks' own metadata ([`Node::prev`](super::chunk::Node),
//! `next`) as [`ChunkId`]s, so pushing, taking the first chunk and removing any chunk are O(1):
//! freeing or merging never searches a list (the sorted-insert walk of the old drm/gpu buddy
//! free lists is what caused its multi-second soft lockups).

use super::chunk::{ChunkId, Node, State, KERNEL, ZEROED};
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

/// The list a free chunk belongs on: kernel chunks below the root size have their own lists
/// (free roots are typeless); `top` is the root's level.
fn list_key(n: &Node, top: u8) -> usize {
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
        // One lookup of the chunk: its list, its state check and its links, with the list head
        // updated alongside (the roots and the lists are separate fields).
        let n = Self::node_in(&mut self.roots, id)?;
        if n.state != State::Free {
            return Err(PmmError::Corrupt);
        }
        let key = list_key(n, top);
        let list = self.lists.get_mut(key).ok_or(PmmError::Corrupt)?;
        let head = list.first;
        n.prev = ChunkId::NIL;
        n.next = head;
        list.first = id;
        list.len = list.len.saturating_add(1);
        if head != ChunkId::NIL {
            Self::node_in(&mut self.roots, head)?.prev = id;
        }
        Ok(())
    }

    /// Takes a free chunk off its list.
    pub(super) fn unlink_free(&mut self, id: ChunkId) -> Result<(), PmmError> {
        let top = self.top();
        let (key, prev, next) = {
            let n = Self::node_in(&mut self.roots, id)?;
            let links = (list_key(n, top), n.prev, n.next);
            n.prev = ChunkId::NIL;
            n.next = ChunkId::NIL;
            links
        };
        if prev == ChunkId::NIL {
            let list = self.lists.get_mut(key).ok_or(PmmError::Corrupt)?;
            if list.first != id {
                return Err(PmmError::Corrupt);
            }
            list.first = next;
        } else {
            self.node_mut(prev)?.next = next;
        }
        if next != ChunkId::NIL {
            self.node_mut(next)?.prev = prev;
        }
        let list = self.lists.get_mut(key).ok_or(PmmError::Corrupt)?;
        list.len = list.len.checked_sub(1).ok_or(PmmError::Corrupt)?;
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
