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
//! Metadata is created lazily, as `gpu_buddy` does: a new manager allocates nothing, whatever
//! its size. Roots never touched since then are *untouched*: free, dirty, typeless and unsplit,
//! implicitly at the end of the dirty root list. Root metadata lives in a two-level table
//! ([`roots`]): a directory of pages of 512 roots (1 GiB of GPU memory each), a page allocated
//! when one of its roots is first touched ([`Pmm::touch`]), its roots then put on the dirty root
//! list lowest first, so metadata follows the regions in use, not the highest address ever used:
//! an exact-address allocation at the top of 1 TiB costs one 32 KiB page and a 24 KiB directory.
//! Pages are never freed; allocation takes touched free roots before untouched ones (the lowest
//! untouched page next), so pages are added only as the memory in use grows. Reaching a root is
//! one indexed load more than a flat array. A touched unsplit root costs 64 bytes (checked at
//! compile time). A split root owns a table of its sub-chunks (28 bytes each), allocated when the
//! root splits and freed when it merges back; groups of children freed by a merge below the root
//! are recycled within that table. All metadata allocation goes through [`Storage`]; every
//! failure is returned as [`PmmError::OutOfMemory`] with the manager unchanged (a page added
//! before the failure stays, its roots free as untouched ones are).
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
mod roots;
pub(crate) mod stats;
pub(crate) mod storage;

pub(crate) use chunk::{transition, ChunkId, Event, MemType, State, STATES};
pub(crate) use compact::CompactStats;
pub(crate) use error::PmmError;
#[cfg(test)]
pub(crate) use roots::PAGE_ROOTS;
pub(crate) use storage::{ChunkVec, OutOfMemory, Storage};

use crate::hwref::{SizeMask, ROOT_CHUNK_SIZE, SZ_4K};
use chunk::{Node, MAX_ROOTS, UNUSED};
use freelist::{ListHead, LISTS};
use roots::{Root, RootTable};

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

/// The chunks of one root, mutably: the root's own node and its sub-chunk slots are separate
/// borrows, so a chunk and its parent (always in the same root) take one root lookup.
struct Slots<'a> {
    /// The root's node (slot 0).
    root: &'a mut Node,
    /// The sub-chunk slots (slot `s` is `subs[s - 1]`); empty while the root is not split.
    subs: &'a mut [Node],
}

impl<'a> Slots<'a> {
    /// The live chunk of slot `sub`.
    fn get(&mut self, sub: u16) -> Result<&mut Node, PmmError> {
        Slots {
            root: &mut *self.root,
            subs: &mut *self.subs,
        }
        .into_node(sub)
    }

    /// The live chunk of slot `sub`, for as long as the root is borrowed.
    fn into_node(self, sub: u16) -> Result<&'a mut Node, PmmError> {
        match sub {
            0 => Ok(self.root),
            s => self
                .subs
                .get_mut(usize::from(s - 1))
                .filter(|n| !n.has(UNUSED))
                .ok_or(PmmError::InvalidId),
        }
    }
}

/// The physical memory manager of one GPU's framebuffer.
pub(crate) struct Pmm<S: Storage> {
    /// Framebuffer offset of root 0.
    base: u64,
    /// The roots' metadata, for the touched ones.
    roots: RootTable<S>,
    /// What an untouched root is (read-only queries see it for every untouched root).
    untouched: Root<S>,
    /// The chunk sizes, smallest first; `sizes[levels - 1]` is the root.
    sizes: [u64; MAX_SIZES],
    /// Number of sizes.
    levels: usize,
    /// Children of a chunk, per level (0 for the smallest size).
    fanouts: [u16; MAX_SIZES],
    /// The free lists.
    lists: [ListHead; LISTS],
    /// Chunks per state and size, except free ones, which the free lists count
    /// ([`Pmm::counts`]); the row of [`State::Free`] stays zero.
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

    /// A manager of `[base, base + size)` with chunk sizes `sizes`; every root starts free,
    /// dirty and untouched (no metadata is allocated).
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
        let total = u32::try_from(n).map_err(|_| PmmError::TooLarge)?;
        let mut fanouts = [0u16; MAX_SIZES];
        for l in 1..levels {
            let (Some(&parent), Some(&child)) = (table.get(l), table.get(l - 1)) else {
                return Err(PmmError::BadSizes);
            };
            let f = parent
                .checked_div(child)
                .and_then(|f| u16::try_from(f).ok());
            *fanouts.get_mut(l).ok_or(PmmError::BadSizes)? = f.ok_or(PmmError::BadSizes)?;
        }
        let pmm = Pmm {
            base,
            roots: RootTable::new(total),
            untouched: Root {
                node: Node::new(State::Free, top, 0, 0, 0),
                run: 1,
                sub: None,
            },
            sizes: table,
            levels,
            fanouts,
            lists: [ListHead::EMPTY; LISTS],
            counts: [[0u64; MAX_SIZES]; STATES],
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
        usize::try_from(self.roots.total()).unwrap_or(usize::MAX)
    }

    /// Number of free roots: on the root lists, or untouched.
    fn free_roots(&self) -> u64 {
        let top = self.top();
        [false, true]
            .iter()
            .filter_map(|&z| self.lists.get(freelist::list_index(false, top, z)))
            .fold(self.untouched_count(), |n, l| n.saturating_add(l.len))
    }

    /// Bytes managed.
    pub(crate) fn total_bytes(&self) -> u64 {
        u64::from(self.roots.total()).saturating_mul(ROOT_CHUNK_SIZE)
    }

    /// Bytes of metadata in use: the root table (its directory and pages, see [`roots`]), and
    /// the sub-chunk tables of split roots.
    pub(crate) fn metadata_bytes(&self) -> usize {
        self.roots.iter().fold(self.roots.bytes(), |acc, (_, r)| {
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
        self.fanouts
            .get(usize::from(level))
            .copied()
            .filter(|&f| f != 0)
    }

    /// The root of `id`.
    fn root_ref(&self, id: ChunkId) -> Result<&Root<S>, PmmError> {
        self.root_at(id.root()).ok_or(PmmError::InvalidId)
    }

    /// The root of `id`, mutably (touched roots only: see [`Pmm::touch`]).
    fn root_mut(&mut self, id: ChunkId) -> Result<&mut Root<S>, PmmError> {
        self.roots.get_mut(id.root()).ok_or(PmmError::InvalidId)
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

    /// The metadata of a live chunk, mutably (touched roots only: see [`Pmm::touch`]).
    fn node_mut(&mut self, id: ChunkId) -> Result<&mut Node, PmmError> {
        Self::node_in(&mut self.roots, id)
    }

    /// The metadata of a live chunk in `roots`, mutably: borrows the roots alone, so the free
    /// lists can be updated alongside.
    #[inline(always)]
    fn node_in(roots: &mut RootTable<S>, id: ChunkId) -> Result<&mut Node, PmmError> {
        Self::slots_in(roots, id.root())?.into_node(id.sub())
    }

    /// The chunks of touched root `r` in `roots`, mutably (see [`Slots`]).
    fn slots_in(roots: &mut RootTable<S>, r: u32) -> Result<Slots<'_>, PmmError> {
        let root = roots.get_mut(r).ok_or(PmmError::InvalidId)?;
        let subs = match root.sub.as_mut() {
            Some(tree) => &mut tree.nodes[..],
            None => &mut [],
        };
        Ok(Slots {
            root: &mut root.node,
            subs,
        })
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
        // One root lookup for the chunk and its parent (a sub-chunk's parent is in its root).
        let mut slots = Self::slots_in(&mut self.roots, id.root())?;
        let n = slots.get(id.sub())?;
        let from = n.state;
        let to = transition(from, event)?;
        n.state = to;
        let (level, parent) = (n.level, n.parent);
        if id.sub() != 0 && (from == State::Free) != (to == State::Free) {
            let p = slots.get(parent)?;
            p.free_children = if to == State::Free {
                p.free_children.checked_add(1)
            } else {
                p.free_children.checked_sub(1)
            }
            .ok_or(PmmError::Corrupt)?;
        }
        self.count_move(from, to, level, 1);
        Ok(to)
    }

    /// Moves `n` chunks of `level` from the counter of state `from` to that of `to`.
    fn count_move(&mut self, from: State, to: State, level: u8, n: u64) {
        if let Some(c) = self.count_mut(from, level) {
            *c = c.saturating_sub(n);
        }
        if let Some(c) = self.count_mut(to, level) {
            *c = c.saturating_add(n);
        }
    }

    /// The chunk counter of `(state, level)`; `None` for free chunks, which the free lists
    /// count.
    fn count_mut(&mut self, state: State, level: u8) -> Option<&mut u64> {
        if state == State::Free {
            return None;
        }
        self.counts
            .get_mut(state.index())?
            .get_mut(usize::from(level))
    }

    /// Chunks per state and size.
    pub(crate) fn counts(&self) -> [[u64; MAX_SIZES]; STATES] {
        let mut counts = self.counts;
        if let Some(free) = counts.get_mut(State::Free.index()) {
            for (key, list) in self.lists.iter().enumerate() {
                if let Some(c) = free.get_mut(freelist::level_of_list(key)) {
                    *c += list.len;
                }
            }
            if let Some(c) = free.get_mut(usize::from(self.top())) {
                *c += self.untouched_count();
            }
        }
        counts
    }
}
