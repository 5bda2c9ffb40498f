// SPDX-License-Identifier: GPL-2.0

//! Compaction: planning which movable chunks to move where so that a request fits, and the
//! memory manager's side of moving one chunk.
//!
//! # Why
//!
//! Memory fragments: 64 KiB chunks of many owners end up spread over many 2 MiB roots, and a
//! request for a whole root, or for a run of adjacent roots, fails although enough bytes are
//! free. The manager's owner can *move* user memory it controls (copy it, point its users at the
//! copy, free the original); the manager plans those moves.
//!
//! # What may move
//!
//! A chunk is *movable* if it is an allocated user chunk with no P2P pin (the owner counts every
//! pin, dma-buf hold and in-flight DMA as a pin), not being revoked, and not part of a contiguous
//! run (runs are handed out whole and move whole or not at all; they do not move). Free chunks
//! need no move. Everything else (kernel chunks, temp-pinned chunks, pinned chunks) pins its
//! root in place. A root is *clearable* if everything allocated in it is movable.
//!
//! # The plan
//!
//! - [`Goal::Contiguous`]`(n)`: the window of `n` adjacent clearable roots whose allocated bytes
//!   are fewest (every byte in the window must move, so no plan moves fewer bytes), whose chunks
//!   fit in the free space outside it.
//! - [`Goal::Roots`]`(k)`: `k` free roots anywhere: the cheapest clearable roots are emptied into
//!   the holes of the others (never into free roots, which must stay free).
//!
//! Destinations are free chunks outside the emptied roots, best fit: largest moves first, each
//! into the smallest free extent that holds it (holes in partly used roots before whole free
//! roots), so the plan itself fragments nothing. Every destination is a free, correctly aligned
//! range of a root that holds no kernel chunk, so [`Pmm::begin_move`] can allocate it exactly.
//!
//! The plan is computed on a snapshot; the owner executes it one move at a time
//! ([`Pmm::begin_move`], copy, [`Pmm::finish_move`]), and a move whose chunk or destination
//! changed meanwhile is skipped.

use super::chunk::{Node, CONTIG_TAIL, KERNEL, REVOKING};
use super::{ChunkId, ChunkVec, Event, MemType, Pmm, PmmError, State, Storage, Zero};

/// What a compaction makes room for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Goal {
    /// This many adjacent free roots.
    Contiguous(u32),
    /// This many free roots, anywhere.
    Roots(u32),
}

/// One planned move: the chunk `chunk` at framebuffer offset `from` goes to the free range at
/// `to` (`size` bytes each).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Move {
    /// The chunk to move.
    pub(crate) chunk: ChunkId,
    /// Its framebuffer offset.
    pub(crate) from: u64,
    /// The destination's framebuffer offset.
    pub(crate) to: u64,
    /// Bytes.
    pub(crate) size: u64,
}

/// A free range a move may go to.
#[derive(Clone, Copy)]
struct Extent {
    addr: u64,
    len: u64,
}

/// How much room a plan may need, read from the manager ([`Pmm::plan_sizing`]) so that the
/// buffers can be allocated before its lock is taken again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanSizing {
    roots: usize,
    free_chunks: usize,
    used_chunks: usize,
}

/// The working memory of a plan and the plan itself ([`PlanBuffers::moves`]). Reserved from a
/// [`PlanSizing`] outside the manager's lock; planning grows it only if the manager changed in
/// between.
pub(crate) struct PlanBuffers<S: Storage> {
    costs: S::Vec<Option<u64>>,
    chosen: S::Vec<bool>,
    windows: S::Vec<(u64, usize)>,
    extents: S::Vec<Extent>,
    moves: S::Vec<Move>,
}

impl<S: Storage> PlanBuffers<S> {
    /// Empty buffers (no allocation).
    pub(crate) fn new() -> Self {
        Self {
            costs: S::Vec::new(),
            chosen: S::Vec::new(),
            windows: S::Vec::new(),
            extents: S::Vec::new(),
            moves: S::Vec::new(),
        }
    }

    /// Makes room for a plan of a manager sized as `s`.
    pub(crate) fn reserve(&mut self, s: PlanSizing) -> Result<(), PmmError> {
        self.costs.try_reserve(s.roots)?;
        self.chosen.try_reserve(s.roots)?;
        self.windows.try_reserve(s.roots)?;
        self.extents.try_reserve(s.free_chunks)?;
        self.moves.try_reserve(s.used_chunks)?;
        Ok(())
    }

    /// The planned moves, largest first.
    pub(crate) fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// The planned moves, to reorder.
    pub(crate) fn moves_mut(&mut self) -> &mut [Move] {
        &mut self.moves
    }
}

/// Empties a vector without freeing its room.
fn clear<T, V: ChunkVec<T>>(v: &mut V) {
    while v.pop().is_some() {}
}

/// Compaction counters, for `pmm/stats`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct CompactStats {
    /// Compactions run.
    pub(crate) runs: u64,
    /// Chunks moved.
    pub(crate) moved_chunks: u64,
    /// Bytes moved.
    pub(crate) moved_bytes: u64,
    /// Largest free block before and after the last compaction.
    pub(crate) last_largest_before: u64,
    pub(crate) last_largest_after: u64,
    /// Fragmentation index (thousandths) before and after the last compaction.
    pub(crate) last_frag_before: u64,
    pub(crate) last_frag_after: u64,
}

impl<S: Storage> Pmm<S> {
    /// Whether the allocated chunk `id` may move (see the module documentation).
    fn movable_node(&self, id: ChunkId, n: &Node) -> bool {
        n.state == State::Allocated
            && n.pins == 0
            && !n.has(REVOKING)
            && !n.has(KERNEL)
            && !n.has(CONTIG_TAIL)
            && (id.sub() != 0 || self.root_ref(id).is_ok_and(|r| r.run == 1))
    }

    /// Calls `f(id, node)` for every unsplit chunk of the subtree at `id`, in address order;
    /// stops at the first `false`.
    pub(super) fn walk(&self, id: ChunkId, f: &mut impl FnMut(ChunkId, &Node) -> bool) -> bool {
        let Ok(n) = self.node(id) else {
            return false;
        };
        if n.state != State::IsSplit {
            return f(id, n);
        }
        let kids = self.fanout(n.level).unwrap_or(0);
        (0..kids).all(|k| self.child(id, k).is_ok_and(|c| self.walk(c, f)))
    }

    /// Bytes that must move to empty root `r`, or `None` if it cannot be emptied.
    fn root_cost(&self, r: u32) -> Option<u64> {
        let root = ChunkId::new(r, 0);
        if self.node(root).ok()?.has(KERNEL) {
            return None;
        }
        let mut cost = 0u64;
        let ok = self.walk(root, &mut |id, n| match n.state {
            State::Free => true,
            State::Allocated if self.movable_node(id, n) => {
                cost += self.size_of_level(n.level);
                true
            }
            _ => false,
        });
        ok.then_some(cost)
    }

    /// The room a plan may need ([`PlanBuffers::reserve`]).
    pub(crate) fn plan_sizing(&self) -> PlanSizing {
        let count = |st: State| -> usize {
            let n: u64 = self.counts().get(st.index()).map_or(0, |c| c.iter().sum());
            usize::try_from(n).unwrap_or(usize::MAX)
        };
        PlanSizing {
            roots: self.root_count(),
            free_chunks: count(State::Free),
            used_chunks: count(State::Allocated),
        }
    }

    /// Plans the moves that make room for `goal` into `b` ([`PlanBuffers::moves`]); returns the
    /// bytes they move. `NoSpace` if no plan exists (not enough free memory, or too much of it
    /// pinned in place).
    pub(crate) fn plan_compaction(
        &self,
        goal: Goal,
        b: &mut PlanBuffers<S>,
    ) -> Result<u64, PmmError> {
        let roots = self.roots.total();
        clear(&mut b.costs);
        clear(&mut b.chosen);
        clear(&mut b.windows);
        for r in 0..roots {
            b.costs.try_push(self.root_cost(r))?;
            b.chosen.try_push(false)?;
        }
        match goal {
            Goal::Contiguous(n) => {
                // The cheapest windows first; a cheap window whose chunks do not fit outside it
                // (a 2 MiB chunk and no free root left, say) gives way to the next.
                windows_by_cost(&b.costs, n, &mut b.windows)?;
                for k in 0..b.windows.len().min(WINDOWS_TRIED) {
                    let start = b.windows.get(k).map_or(0, |w| w.1);
                    for (i, c) in b.chosen.iter_mut().enumerate() {
                        *c = (start..start + idx(n)).contains(&i);
                    }
                    match self.assign(&b.chosen, true, &mut b.extents, &mut b.moves) {
                        Err(PmmError::NoSpace) => continue,
                        r => return r,
                    }
                }
                Err(PmmError::NoSpace)
            }
            Goal::Roots(k) => {
                let free = b.costs.iter().filter(|c| **c == Some(0)).count();
                let need = idx(k).saturating_sub(free);
                // The cheapest clearable roots that are not free, emptied into the holes of the
                // others.
                for (i, c) in b.costs.iter().enumerate() {
                    if let Some(c @ 1..) = c {
                        b.windows.try_push((*c, i))?;
                    }
                }
                sort_by_key(&mut b.windows, |w| *w);
                if b.windows.len() < need {
                    return Err(PmmError::NoSpace);
                }
                for &(_, i) in b.windows.iter().take(need) {
                    if let Some(c) = b.chosen.get_mut(i) {
                        *c = true;
                    }
                }
                self.assign(&b.chosen, false, &mut b.extents, &mut b.moves)
            }
        }
    }

    /// Plans the moves that empty the `chosen` roots into free chunks of the others (whole free
    /// roots too if `use_free_roots`), into `out`; returns the bytes moved.
    fn assign(
        &self,
        chosen: &[bool],
        use_free_roots: bool,
        extents: &mut S::Vec<Extent>,
        out: &mut S::Vec<Move>,
    ) -> Result<u64, PmmError> {
        clear(out);
        clear(extents);
        let roots = self.roots.total();
        // Free extents outside the chosen roots, in roots that may take user chunks.
        for r in 0..roots {
            if chosen.get(idx(r)).copied().unwrap_or(true) {
                continue;
            }
            let root = ChunkId::new(r, 0);
            let rn = self.node(root)?;
            if (rn.state == State::Free && !use_free_roots) || rn.has(KERNEL) {
                continue;
            }
            let mut err = None;
            self.walk(root, &mut |id, n| {
                if n.state == State::Free {
                    let addr = self.addr(id).unwrap_or(0);
                    let len = self.size_of_level(n.level);
                    if let Err(e) = extents.try_push(Extent { addr, len }) {
                        err = Some(e);
                        return false;
                    }
                }
                true
            });
            if let Some(e) = err {
                return Err(e.into());
            }
        }
        // The chunks to move, largest first.
        for r in 0..roots {
            if !chosen.get(idx(r)).copied().unwrap_or(false) {
                continue;
            }
            let mut err = None;
            self.walk(ChunkId::new(r, 0), &mut |id, n| {
                if n.state == State::Allocated {
                    let m = Move {
                        chunk: id,
                        from: self.addr(id).unwrap_or(0),
                        to: 0,
                        size: self.size_of_level(n.level),
                    };
                    if let Err(e) = out.try_push(m) {
                        err = Some(e);
                        return false;
                    }
                }
                true
            });
            if let Some(e) = err {
                return Err(e.into());
            }
        }
        sort_by_key(out, |m| (core::cmp::Reverse(m.size), m.from));
        let mut bytes = 0u64;
        for m in out.iter_mut() {
            // Best fit: the smallest extent that holds the move. Sizes divide each other and
            // extents start aligned to their size, so carving from the front stays aligned.
            let slot = extents
                .iter_mut()
                .filter(|e| e.len >= m.size)
                .min_by_key(|e| e.len)
                .ok_or(PmmError::NoSpace)?;
            m.to = slot.addr;
            slot.addr += m.size;
            slot.len -= m.size;
            bytes += m.size;
        }
        Ok(bytes)
    }

    /// Starts a planned move: allocates the destination at `to` and marks the chunk
    /// [`State::TempPinned`] (no pin, split or free can touch it until the move ends). Returns the
    /// destination, also temp-pinned. Fails, changing nothing, if the chunk is no longer movable
    /// or the destination no longer free.
    pub(crate) fn begin_move(&mut self, id: ChunkId, to: u64) -> Result<ChunkId, PmmError> {
        let n = *self.node(id)?;
        if !self.movable_node(id, &n) {
            return Err(if n.pins != 0 {
                PmmError::Pinned
            } else {
                PmmError::NotAllocated
            });
        }
        let dst = self.alloc_at(to, self.size_of_level(n.level), MemType::User)?;
        if let Err(e) = self.apply(id, Event::Migrate) {
            let _ = self.release(dst, false);
            return Err(e);
        }
        Ok(dst)
    }

    /// Ends a move whose bytes were copied: the destination becomes the owner's
    /// ([`State::Allocated`]) and the source goes back to the free lists as `zero` says.
    pub(crate) fn finish_move(
        &mut self,
        from: ChunkId,
        to: ChunkId,
        zero: Zero,
    ) -> Result<(), PmmError> {
        self.unpin_allocated(to)?;
        self.free(from, zero).map(|_| ())
    }

    /// Abandons a move: the source is the owner's again and the destination is freed (dirty: a
    /// copy may have started).
    pub(crate) fn abort_move(&mut self, from: ChunkId, to: ChunkId) -> Result<(), PmmError> {
        self.apply(from, Event::Unpin)?;
        self.free(to, Zero::Dirty).map(|_| ())
    }

    /// Records a finished compaction in the statistics.
    pub(crate) fn record_compaction(&mut self, chunks: u64, bytes: u64, before: (u64, u64)) {
        let after = self.stats();
        let c = &mut self.compaction;
        c.runs += 1;
        c.moved_chunks += chunks;
        c.moved_bytes += bytes;
        (c.last_largest_before, c.last_frag_before) = before;
        c.last_largest_after = after.largest_free;
        c.last_frag_after = after.fragmentation_permille();
    }
}

/// Windows of contiguous goals tried, cheapest first.
const WINDOWS_TRIED: usize = 32;

/// Every window of `n` adjacent clearable roots as `(bytes to move, first root)`, cheapest first
/// (lowest address among equals).
fn windows_by_cost<V: ChunkVec<(u64, usize)>>(
    costs: &[Option<u64>],
    n: u32,
    out: &mut V,
) -> Result<(), PmmError> {
    clear(out);
    let n = idx(n);
    if n == 0 {
        return Err(PmmError::BadSize);
    }
    let mut run = 0usize;
    let mut sum = 0u64;
    for (i, c) in costs.iter().enumerate() {
        match c {
            Some(c) => {
                run += 1;
                sum += c;
                if run > n {
                    sum -= costs.get(i - n).copied().flatten().unwrap_or(0);
                }
                if run >= n {
                    out.try_push((sum, i + 1 - n))?;
                }
            }
            None => {
                run = 0;
                sum = 0;
            }
        }
    }
    sort_by_key(out, |w| *w);
    Ok(())
}

/// Sorts `v` by `key`, ascending (heapsort: in place, O(n log n), no allocation).
///
/// `core`'s slice sorts end in panic paths (`panic_on_ord_violation`) that the kernel's objtool
/// does not know as `noreturn`, so the kernel build of this file uses its own.
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let n = v.len();
    let less = |v: &[T], a: usize, b: usize| match (v.get(a), v.get(b)) {
        (Some(x), Some(y)) => key(x) < key(y),
        _ => false,
    };
    let sift = |v: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            break;
        }
        if child + 1 < end && less(v, child, child + 1) {
            child += 1;
        }
        if !less(v, root, child) {
            break;
        }
        v.swap(root, child);
        root = child;
    };
    for i in (0..n / 2).rev() {
        sift(v, i, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

/// A root index or count as a `usize` (lossless: roots fit in 22 bits).
fn idx(r: u32) -> usize {
    usize::try_from(r).unwrap_or(usize::MAX)
}
