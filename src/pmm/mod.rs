// SPDX-License-Identifier: GPL-2.0

//! The physical memory manager (PMM): a UVM-style buddy allocator of framebuffer memory.
//!
//! # Domain
//!
//! GPU memory (the framebuffer) is handed out in *chunks*. The unit of tracking is the 2 MiB
//! *root chunk* ([`ROOT_CHUNK_SIZE`]); a root can be split, lazily and one size step at a time,
//! into chunks of the next smaller allowed size (by default 2 MiB → 64 KiB → 4 KiB; Maxwell
//! 2 MiB → 128 KiB → 4 KiB), and children that all become free merge back eagerly. The allowed
//! sizes come from the architecture's [`SizeMask`]. Unlike a binary buddy allocator, a split
//! makes `parent / child` children at once (UVM's design), so "buddies" are the children of one
//! parent; they merge when all are free.
//!
//! The manager covers the framebuffer offsets `[base, base + size)`: `base` must be 2 MiB
//! aligned and `size` is rounded down to whole roots.
//!
//! Chunks have a state ([`chunk`] holds the table of legal transitions), a type
//! ([`MemType`]: user and kernel chunks never share a root, as in UVM) and a zeroed/dirty mark.
//! Free chunks sit on intrusive doubly-linked free lists, one per (type, size, zeroed/dirty);
//! free roots are typeless (they are UVM's "returned to PMA" roots) and sit on the two lists of
//! the root size. Finding a free chunk, taking it off its list, and merging children are all O(1)
//! (a merge touches the fixed number of children of one parent); nothing walks a list.
//!
//! Allocated chunks can carry *P2P pins* ([`Pmm::p2p_pin`]): while a chunk is pinned for a peer,
//! it cannot return to a free list. See [`Pmm::free`] for the revocation protocol.
//!
//! # Concurrency
//!
//! The core is single-threaded: every mutation takes `&mut self`. The kernel glue wraps a
//! [`Pmm`] in a `Mutex` (metadata allocation may sleep, so not a spinlock).
//!
//! # Memory
//!
//! An unsplit root costs 64 bytes (checked at compile time). A split root owns a table of its
//! sub-chunks (28 bytes each), allocated when the root splits and freed when it merges back;
//! groups of children freed by a merge below the root are recycled within that table.
//! All metadata allocation goes through [`Storage`]; every failure is returned as
//! [`PmmError::OutOfMemory`] with the manager unchanged.
//!
//! This module is pure: it uses `core` only, so it builds into `nvrs.ko` and into `tests/host`.

mod alloc;
mod check;
mod chunk;
pub(crate) mod compact;
mod error;
mod free;
mod freelist;
mod query;
pub(crate) mod stats;
pub(crate) mod storage;

pub(crate) use chunk::{transition, ChunkId, Event, MemType, State, STATES};
pub(crate) use compact::CompactStats;
pub(crate) use error::PmmError;
pub(crate) use storage::{ChunkVec, OutOfMemory, Storage};

use crate::hwref::{SizeMask, ROOT_CHUNK_SIZE, SZ_4K};
use chunk::{Node, MAX_ROOTS, UNUSED};
use freelist::{ListHead, LISTS};

/// Most chunk sizes per manager, the root included (UVM's `UVM_MAX_CHUNK_SIZES`).
pub(crate) const MAX_SIZES: usize = 4;

/// Options of an allocation.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct AllocFlags {
    /// Among free chunks of the same size, take zeroed ones before dirty ones (otherwise dirty
    /// first, keeping zeroed chunks for those who ask). The size comes first, as in UVM: a
    /// dirty chunk of the requested size is taken before a zeroed larger chunk is split.
    pub(crate) prefer_zeroed: bool,
}

/// What the caller knows of a chunk's content when freeing it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Zero {
    /// The memory is all zero.
    Zeroed,
    /// Unknown content.
    Dirty,
}

/// Result of [`Pmm::free`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FreeOutcome {
    /// The chunk is back on a free list (possibly merged into a larger one).
    Freed,
    /// The chunk has live P2P pins and was not freed: run the P2P revocation hook, which drops
    /// every pin ([`Pmm::p2p_unpin`]), then call [`Pmm::free`] again.
    Revoke {
        /// Pins still held.
        pins: u32,
    },
}

/// The sub-chunks of a split root.
struct SubTree<S: Storage> {
    /// Sub-chunk slots; a group of children is consecutive.
    nodes: S::Vec<Node>,
    /// Per child size below the root's children: first slot plus one of a recycled group.
    free_groups: [u16; MAX_SIZES - 2],
}

/// A root chunk.
struct Root<S: Storage> {
    /// The root's own chunk metadata.
    node: Node,
    /// Roots in the contiguous run this root starts (1 for an ordinary root).
    run: u32,
    /// Present while the root is split.
    sub: Option<SubTree<S>>,
}

/// The physical memory manager of one GPU's framebuffer.
pub(crate) struct Pmm<S: Storage> {
    /// Framebuffer offset of root 0.
    base: u64,
    /// The roots, by address.
    roots: S::Vec<Root<S>>,
    /// The chunk sizes, smallest first; `sizes[levels - 1]` is the root.
    sizes: [u64; MAX_SIZES],
    /// Number of sizes.
    levels: usize,
    /// The free lists.
    lists: [ListHead; LISTS],
    /// Chunks per state and size.
    counts: [[u64; MAX_SIZES]; STATES],
    /// Allocations that failed.
    alloc_failures: u64,
    /// Compaction counters.
    compaction: CompactStats,
}

impl<S: Storage> Pmm<S> {
    /// Bytes of metadata of one unsplit root.
    pub(crate) const ROOT_BYTES: usize = core::mem::size_of::<Root<S>>();

    /// Compile-time check of the memory budget of an unsplit root (evaluated by [`Pmm::new`]).
    const ROOT_FITS: () = assert!(Self::ROOT_BYTES <= 64);

    /// A manager of `[base, base + size)` with chunk sizes `sizes`; every root starts free and
    /// dirty.
    pub(crate) fn new(base: u64, size: u64, sizes: SizeMask) -> Result<Self, PmmError> {
        let () = Self::ROOT_FITS;
        if base % ROOT_CHUNK_SIZE != 0 {
            return Err(PmmError::Misaligned);
        }
        let n = size / ROOT_CHUNK_SIZE;
        if n == 0 {
            return Err(PmmError::Empty);
        }
        if n > MAX_ROOTS {
            return Err(PmmError::TooLarge);
        }
        n.checked_mul(ROOT_CHUNK_SIZE)
            .and_then(|s| base.checked_add(s))
            .ok_or(PmmError::TooLarge)?;
        let mut table = [0u64; MAX_SIZES];
        let mut levels = 0usize;
        for s in sizes.iter() {
            if !(SZ_4K..=ROOT_CHUNK_SIZE).contains(&s) {
                return Err(PmmError::BadSizes);
            }
            *table.get_mut(levels).ok_or(PmmError::BadSizes)? = s;
            levels += 1;
        }
        if !sizes.contains(ROOT_CHUNK_SIZE) {
            return Err(PmmError::BadSizes);
        }
        let top = levels.checked_sub(1).and_then(|t| u8::try_from(t).ok());
        let top = top.ok_or(PmmError::BadSizes)?;
        let count = usize::try_from(n).map_err(|_| PmmError::TooLarge)?;
        let mut roots = S::Vec::<Root<S>>::new();
        roots.try_reserve(count)?;
        // Every root starts on the dirty root list, linked here in address order (lowest
        // first), as `push_free` would link them one by one, without a second pass.
        let last = u32::try_from(n - 1).map_err(|_| PmmError::TooLarge)?;
        for r in 0..=last {
            let mut node = Node::new(State::Free, top, 0, 0, 0);
            node.prev = if r == 0 {
                ChunkId::NIL
            } else {
                ChunkId::new(r - 1, 0)
            };
            node.next = if r == last {
                ChunkId::NIL
            } else {
                ChunkId::new(r + 1, 0)
            };
            roots.try_push(Root {
                node,
                run: 1,
                sub: None,
            })?;
        }
        let mut counts = [[0u64; MAX_SIZES]; STATES];
        if let Some(c) = counts
            .get_mut(State::Free.index())
            .and_then(|c| c.get_mut(usize::from(top)))
        {
            *c = n;
        }
        let mut lists = [ListHead::EMPTY; LISTS];
        let list = lists
            .get_mut(freelist::list_index(false, top, false))
            .ok_or(PmmError::BadSizes)?;
        *list = ListHead {
            first: ChunkId::new(0, 0),
            len: n,
        };
        let pmm = Pmm {
            base,
            roots,
            sizes: table,
            levels,
            lists,
            counts,
            alloc_failures: 0,
            compaction: CompactStats::default(),
        };
        Ok(pmm)
    }

    /// Framebuffer offset of the first root.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// Number of roots.
    pub(crate) fn root_count(&self) -> usize {
        self.roots.len()
    }

    /// Bytes managed.
    pub(crate) fn total_bytes(&self) -> u64 {
        u64::try_from(self.roots.len()).map_or(0, |n| n.saturating_mul(ROOT_CHUNK_SIZE))
    }

    /// Bytes of metadata in use: the roots, and the sub-chunk tables of split roots.
    pub(crate) fn metadata_bytes(&self) -> usize {
        let roots = self
            .roots
            .len()
            .saturating_mul(core::mem::size_of::<Root<S>>());
        self.roots.iter().fold(roots, |acc, r| {
            let subs = r.sub.as_ref().map_or(0, |t| t.nodes.len());
            acc.saturating_add(subs.saturating_mul(core::mem::size_of::<Node>()))
        })
    }

    /// The chunk sizes, smallest first.
    pub(crate) fn chunk_sizes(&self) -> &[u64] {
        self.sizes.get(..self.levels).unwrap_or(&[])
    }

    /// Index of the root level.
    fn top(&self) -> u8 {
        u8::try_from(self.levels.saturating_sub(1)).unwrap_or(0)
    }

    /// Size in bytes of the chunks of `level`.
    fn size_of_level(&self, level: u8) -> u64 {
        self.sizes.get(usize::from(level)).copied().unwrap_or(0)
    }

    /// Level of `size`, if it is one of the manager's sizes.
    fn level_of(&self, size: u64) -> Option<u8> {
        let i = self.chunk_sizes().iter().position(|&s| s == size)?;
        u8::try_from(i).ok()
    }

    /// Children of a chunk at `level` (> 0).
    fn fanout(&self, level: u8) -> Option<u16> {
        let child = self.sizes.get(usize::from(level).checked_sub(1)?)?;
        let n = self.size_of_level(level).checked_div(*child)?;
        u16::try_from(n).ok()
    }

    /// The root of `id`.
    fn root_ref(&self, id: ChunkId) -> Result<&Root<S>, PmmError> {
        let i = usize::try_from(id.root()).map_err(|_| PmmError::InvalidId)?;
        self.roots.get(i).ok_or(PmmError::InvalidId)
    }

    /// The root of `id`, mutably.
    fn root_mut(&mut self, id: ChunkId) -> Result<&mut Root<S>, PmmError> {
        let i = usize::try_from(id.root()).map_err(|_| PmmError::InvalidId)?;
        self.roots.get_mut(i).ok_or(PmmError::InvalidId)
    }

    /// The metadata of a live chunk.
    fn node(&self, id: ChunkId) -> Result<&Node, PmmError> {
        let root = self.root_ref(id)?;
        match id.sub() {
            0 => Ok(&root.node),
            s => root
                .sub
                .as_ref()
                .and_then(|t| t.nodes.get(usize::from(s - 1)))
                .filter(|n| !n.has(UNUSED))
                .ok_or(PmmError::InvalidId),
        }
    }

    /// The metadata of a live chunk, mutably.
    fn node_mut(&mut self, id: ChunkId) -> Result<&mut Node, PmmError> {
        Self::node_in(&mut self.roots, id)
    }

    /// The metadata of a live chunk in `roots`, mutably: borrows the roots alone, so the free
    /// lists can be updated alongside.
    fn node_in(roots: &mut [Root<S>], id: ChunkId) -> Result<&mut Node, PmmError> {
        let i = usize::try_from(id.root()).map_err(|_| PmmError::InvalidId)?;
        let root = roots.get_mut(i).ok_or(PmmError::InvalidId)?;
        match id.sub() {
            0 => Ok(&mut root.node),
            s => root
                .sub
                .as_mut()
                .and_then(|t| t.nodes.get_mut(usize::from(s - 1)))
                .filter(|n| !n.has(UNUSED))
                .ok_or(PmmError::InvalidId),
        }
    }

    /// The parent of a sub-chunk (`None` for a root).
    fn parent(&self, id: ChunkId) -> Result<Option<ChunkId>, PmmError> {
        if id.sub() == 0 {
            return Ok(None);
        }
        Ok(Some(ChunkId::new(id.root(), self.node(id)?.parent)))
    }

    /// Child `k` of a split chunk.
    fn child(&self, id: ChunkId, k: u16) -> Result<ChunkId, PmmError> {
        let n = self.node(id)?;
        if n.state != State::IsSplit {
            return Err(PmmError::Corrupt);
        }
        let slot = n.children.checked_add(k).and_then(|s| s.checked_add(1));
        slot.map(|s| ChunkId::new(id.root(), s))
            .ok_or(PmmError::Corrupt)
    }

    /// Moves a chunk through `event` (the only state change), keeping the per-state counts and
    /// the parent's free-children count.
    fn apply(&mut self, id: ChunkId, event: Event) -> Result<State, PmmError> {
        // One lookup for the chunk: its state, level and parent (for a sub-chunk).
        let (from, to, level, parent) = {
            let n = self.node_mut(id)?;
            let from = n.state;
            let to = transition(from, event)?;
            n.state = to;
            (
                from,
                to,
                n.level,
                (id.sub() != 0).then(|| ChunkId::new(id.root(), n.parent)),
            )
        };
        if let Some(c) = self.count_mut(from, level) {
            *c = c.saturating_sub(1);
        }
        if let Some(c) = self.count_mut(to, level) {
            *c = c.saturating_add(1);
        }
        if let Some(p) = parent {
            let p = self.node_mut(p)?;
            if from == State::Free && to != State::Free {
                p.free_children = p.free_children.checked_sub(1).ok_or(PmmError::Corrupt)?;
            } else if from != State::Free && to == State::Free {
                p.free_children = p.free_children.checked_add(1).ok_or(PmmError::Corrupt)?;
            }
        }
        Ok(to)
    }

    /// The chunk counter of `(state, level)`.
    fn count_mut(&mut self, state: State, level: u8) -> Option<&mut u64> {
        self.counts
            .get_mut(state.index())?
            .get_mut(usize::from(level))
    }
}
