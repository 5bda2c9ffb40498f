// SPDX-License-Identifier: GPL-2.0

//! Chunks: their identifiers, states, the state-transition table and the per-chunk metadata.
//!
//! # States
//!
//! - [`State::Free`]: on a free list, owned by the memory manager.
//! - [`State::TempPinned`]: handed out by a user allocation but not yet owned by its user (UVM:
//!   not yet attached to a VA block). It is never split, merged or reclaimed; its holder either
//!   confirms it ([`Event::Unpin`], becoming `Allocated`) or gives it back ([`Event::Free`]).
//! - [`State::Allocated`]: owned by a user. Only allocated chunks carry P2P pins.
//! - [`State::IsSplit`]: split into children of the next smaller chunk size; the children hold
//!   the memory and the chunk itself is only a tree node.
//!
//! No internal state is added: the memory manager is single-threaded, so a split or merge is
//! never observable half-way and needs no UVM-style "pinned while splitting" state.
//!
//! # Transitions ([`transition`], the only place that changes a state)
//!
//! | from \ event   | Claim       | ClaimOwned | Unpin     | Split   | Free | MergeFree | MergeAllocated | Migrate    |
//! |----------------|-------------|------------|-----------|---------|------|-----------|----------------|------------|
//! | `Free`         | TempPinned  | Allocated  | -         | IsSplit | -    | -         | -              | -          |
//! | `TempPinned`   | -           | -          | Allocated | -       | Free | -         | -              | -          |
//! | `Allocated`    | -           | -          | -         | IsSplit | Free | -         | -              | TempPinned |
//! | `IsSplit`      | -           | -          | -         | -       | -    | Free      | Allocated      | -          |
//!
//! `-` is an error ([`PmmError::IllegalTransition`]).
//! Splitting a free chunk gives free children (the allocator's lazy split); splitting an
//! allocated chunk (its owner asks) gives allocated children. `MergeFree` happens eagerly when the
//! last child of a split chunk becomes free; `MergeAllocated` when the owner merges children it
//! all owns back. `Migrate` starts moving an allocated chunk during compaction
//! ([`super::compact`]): temp-pinned while its bytes are copied, then freed (or, if the move is
//! abandoned, unpinned back to its owner).

use super::PmmError;

/// The state of a chunk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum State {
    /// On a free list.
    Free = 0,
    /// Owned by a user; may carry P2P pins.
    Allocated = 1,
    /// Split into children.
    IsSplit = 2,
    /// Handed out, not yet owned: never split, merged or reclaimed.
    TempPinned = 3,
}

/// Number of states.
pub(crate) const STATES: usize = 4;

impl State {
    /// Every state, in index order.
    pub(crate) const ALL: [State; STATES] = [
        State::Free,
        State::Allocated,
        State::IsSplit,
        State::TempPinned,
    ];

    /// Index of the state in [`State::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name, as shown in `pmm/stats`.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            State::Free => "free",
            State::Allocated => "allocated",
            State::IsSplit => "split",
            State::TempPinned => "temp_pinned",
        }
    }
}

/// What happens to a chunk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Event {
    /// A user allocation takes the chunk.
    Claim,
    /// A kernel allocation takes the chunk (owned at once).
    ClaimOwned,
    /// The holder of a temp-pinned chunk takes ownership.
    Unpin,
    /// The chunk is split into children.
    Split,
    /// The chunk is freed.
    Free,
    /// All children are free: they merge back into a free chunk.
    MergeFree,
    /// All children are allocated and the owner merges them back.
    MergeAllocated,
    /// Compaction starts moving the allocated chunk elsewhere.
    Migrate,
}

/// Number of events.
const EVENTS: usize = 8;

impl Event {
    /// Every event, in declaration order.
    pub(crate) const ALL: [Event; EVENTS] = [
        Event::Claim,
        Event::ClaimOwned,
        Event::Unpin,
        Event::Split,
        Event::Free,
        Event::MergeFree,
        Event::MergeAllocated,
        Event::Migrate,
    ];
}

// `Event::ALL[e]` is the event whose discriminant is `e` (the table is indexed by it).
const _: () = {
    let mut e = 0;
    while e < EVENTS {
        assert!(Event::ALL[e] as usize == e);
        e += 1;
    }
};

/// [`rule`] for every state and event, computed at compile time: [`transition`] looks the
/// answer up instead of branching through a `match` (an indirect jump, costly under
/// emulation, on every allocation and free).
const TABLE: [[Option<State>; EVENTS]; STATES] = {
    let mut t = [[None; EVENTS]; STATES];
    let mut s = 0;
    while s < STATES {
        let mut e = 0;
        while e < EVENTS {
            t[s][e] = rule(State::ALL[s], Event::ALL[e]);
            e += 1;
        }
        s += 1;
    }
    t
};

/// The state-transition table (see the module documentation): the new state, or an error.
pub(crate) fn transition(from: State, event: Event) -> Result<State, PmmError> {
    TABLE
        .get(from.index())
        .and_then(|row| row.get(event as usize))
        .copied()
        .flatten()
        .ok_or(PmmError::IllegalTransition { from, event })
}

/// The rules of the state-transition table: the new state, or `None`.
const fn rule(from: State, event: Event) -> Option<State> {
    match (from, event) {
        (State::Free, Event::Claim) => Some(State::TempPinned),
        (State::Free, Event::ClaimOwned) => Some(State::Allocated),
        (State::Free, Event::Split) => Some(State::IsSplit),
        (State::TempPinned, Event::Unpin) => Some(State::Allocated),
        (State::TempPinned, Event::Free) => Some(State::Free),
        (State::Allocated, Event::Split) => Some(State::IsSplit),
        (State::Allocated, Event::Free) => Some(State::Free),
        (State::IsSplit, Event::MergeFree) => Some(State::Free),
        (State::IsSplit, Event::MergeAllocated) => Some(State::Allocated),
        (State::Allocated, Event::Migrate) => Some(State::TempPinned),
        _ => None,
    }
}

/// Who a chunk is for; the two types never share a root (kernel chunks are never evicted).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MemType {
    /// User data: allocations come back [`State::TempPinned`].
    User,
    /// Internal memory: allocations come back [`State::Allocated`].
    Kernel,
}

/// Bits of a sub-chunk identifier.
pub(super) const SUB_BITS: u32 = 10;
/// Most roots a memory manager can hold (8 TiB).
pub(super) const MAX_ROOTS: u64 = 1 << (32 - SUB_BITS);

/// Identifies a chunk: its root and its slot in the root's sub-chunk table (0: the root).
///
/// Valid from the allocation (or split) that returned it until the chunk is freed (or merged).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub(crate) struct ChunkId(u32);

impl ChunkId {
    /// No chunk: ends a free list, and fills output arrays before an allocation; never valid.
    pub(crate) const NIL: ChunkId = ChunkId(u32::MAX);

    /// The identifier of sub-chunk `sub` of root `root` (`sub` 0 is the root itself).
    pub(super) const fn new(root: u32, sub: u16) -> Self {
        ChunkId((root << SUB_BITS) | (sub as u32 & ((1 << SUB_BITS) - 1)))
    }

    /// Index of the chunk's root.
    pub(crate) const fn root(self) -> u32 {
        self.0 >> SUB_BITS
    }

    /// Slot of the chunk in its root's table, plus one; 0 for a root.
    pub(crate) const fn sub(self) -> u16 {
        (self.0 & ((1 << SUB_BITS) - 1)) as u16
    }

    /// The packed value (stable for the chunk's lifetime, e.g. as a lookup key).
    pub(crate) const fn raw(self) -> u32 {
        self.0
    }

    /// The identifier whose packed value is `raw` (as [`ChunkId::raw`] returned it).
    pub(crate) const fn from_raw(raw: u32) -> Self {
        ChunkId(raw)
    }
}

impl Default for ChunkId {
    /// No chunk: a placeholder for the output array of [`super::Pmm::alloc`].
    fn default() -> Self {
        Self::NIL
    }
}

/// Node flag: the chunk's memory is known to be zero.
pub(super) const ZEROED: u8 = 1 << 0;
/// Node flag: the chunk belongs to a kernel root ([`MemType::Kernel`]).
pub(super) const KERNEL: u8 = 1 << 1;
/// Node flag: a free was refused because of P2P pins; no new pins until it is freed.
pub(super) const REVOKING: u8 = 1 << 2;
/// Node flag: a root inside a contiguous run, other than its first.
pub(super) const CONTIG_TAIL: u8 = 1 << 3;
/// Node flag: a sub-chunk slot that backs no chunk (a recycled group).
pub(super) const UNUSED: u8 = 1 << 4;

/// The metadata of one chunk (28 bytes).
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    /// Previous chunk on the free list, or [`ChunkId::NIL`]; not kept for the list's first
    /// chunk (see [`super::freelist`]).
    pub(super) prev: ChunkId,
    /// Next chunk on the free list, or [`ChunkId::NIL`]; in the first slot of a recycled group,
    /// the next recycled group of that size (slot plus one, 0 for none).
    pub(super) next: ChunkId,
    /// Live P2P pins (only while [`State::Allocated`]).
    pub(super) pins: u32,
    /// Offset of the chunk inside its root, in bytes.
    pub(super) offset: u32,
    /// Parent's slot plus one (0: the parent is the root); unused for a root.
    pub(super) parent: u16,
    /// First slot of the children's group while [`State::IsSplit`].
    pub(super) children: u16,
    /// Children in [`State::Free`] while [`State::IsSplit`].
    pub(super) free_children: u16,
    /// The state.
    pub(super) state: State,
    /// Index of the chunk's size among the manager's sizes (0: smallest).
    pub(super) level: u8,
    /// [`ZEROED`], [`KERNEL`], [`REVOKING`], [`CONTIG_TAIL`], [`UNUSED`].
    pub(super) flags: u8,
}

impl Node {
    /// A chunk with no links, pins or children.
    pub(super) const fn new(state: State, level: u8, offset: u32, parent: u16, flags: u8) -> Self {
        Node {
            prev: ChunkId::NIL,
            next: ChunkId::NIL,
            pins: 0,
            offset,
            parent,
            children: 0,
            free_children: 0,
            state,
            level,
            flags,
        }
    }

    /// Whether `flag` is set.
    pub(super) const fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

#[cfg(test)]
impl ChunkId {
    /// A placeholder identifier for output buffers (host tests).
    pub(crate) const fn new_for_tests() -> Self {
        ChunkId::NIL
    }

    /// The identifier of root `root` (host tests).
    pub(crate) const fn new_root_for_tests(root: u32) -> Self {
        ChunkId::new(root, 0)
    }
}
