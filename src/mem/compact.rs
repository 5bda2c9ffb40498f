// SPDX-License-Identifier: GPL-2.0

//! Compaction of a GPU's memory: moving movable allocations so that a request that failed for
//! fragmentation alone fits.
//!
//! The memory manager plans ([`crate::pmm::compact`]): which chunks to move where. This file
//! moves them, one piece of one allocation at a time, under that allocation's lock:
//!
//! 1. The allocation must be live, and the piece unreachable by anyone but its owner's CPU
//!    mappings: `nvidia_p2p` pins and dma-buf holds count a memory-manager pin on every chunk
//!    they cover, under the allocation's lock, and a pinned chunk is never moved.
//! 2. The manager allocates the destination and marks the chunk [`State::TempPinned`]
//!    (`begin_move`): no pin can be taken on it, and nobody else can free or split it.
//! 3. The piece's CPU mappings are removed. The fault handler takes the same lock, so a CPU
//!    access from now on waits, and after the move maps the new location.
//! 4. The bytes are copied: through a flat aperture by the GPU's
//!    [`CopyEngine`](crate::mem::copy::CopyEngine), through BAR1 by the copy engine
//!    ([`crate::mem::reach::Reach::copy`]), whose allocation's CPU run then maps the copy.
//! 5. The piece points at the new chunk, the allocation's move counter is bumped (so a pin that
//!    built its page table before the move notices, see [`crate::p2p::pin`]), the old chunk is
//!    scrubbed and freed (`finish_move`).
//!
//! A move whose chunk or destination changed since the plan is skipped; the caller retries its
//! request either way and reports what it got.
//!
//! Owners are found by walking the GPU's own list of allocations (the memory manager keeps no
//! back pointers): a batch of allocations with planned moves at a time is taken under the
//! list's lock, with no allocation under it, and moved with the lock dropped. Each compaction
//! marks the allocations it looked at, so a batch starts where the last one ended however the
//! list changed meanwhile.
//!
//! [`State::TempPinned`]: crate::pmm::State::TempPinned

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Relaxed,
            Release, //
        },
        Arc, //
    },
};

use crate::{
    mem::{
        fb::{
            self,
            FbMemory, //
        },
        Allocation,
    },
    pmm::{
        compact::{
            sort_by_key,
            Goal,
            Move,
            PlanBuffers, //
        },
        Zero,
    },
};

/// Allocations taken from the GPU's list per visit.
const BATCH: usize = 16;

/// What a compaction did.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Report {
    /// Moves planned.
    pub(crate) planned: usize,
    /// Moves done.
    pub(crate) moved: usize,
    /// Bytes moved.
    pub(crate) bytes: u64,
}

impl Allocation {
    /// Moves piece `i` as `mv` plans; see the module documentation.
    fn move_piece(&self, i: usize, mv: &Move) -> Result {
        let mem = &self.backing.mem;
        mem.reach.can_copy()?;
        let st = self.state.lock();
        if st.released || mem.is_gone() {
            return Err(EBUSY);
        }
        let p = self.backing.pieces.get(i).ok_or(EINVAL)?;
        let len = self.backing.piece_len(i);
        if p.id() != mv.chunk || p.fb_offset() != mv.from || len != mv.size {
            return Err(EAGAIN);
        }
        // Refused if the chunk carries a pin: `nvidia_p2p` pins and dma-buf holds count one on
        // every chunk they cover, under `st`.
        let dst = mem
            .pmm
            .lock()
            .begin_move(mv.chunk, mv.to)
            .map_err(fb::errno)?;
        // From here until the piece points at its new chunk, a CPU access faults and waits for
        // `st`.
        let off = self.backing.layout.offset_of(u64::try_from(i)?);
        let va_len = len.min(self.span.len().saturating_sub(off));
        for inode in st.mapped.iter() {
            inode.zap(self.span.start() + off, va_len);
        }
        // SAFETY: The source is this allocation's piece, whose mappings were just removed and
        // which nobody else can reach (no pin on it, `st` held against faults and pins); the
        // destination was allocated for it and is not handed out yet.
        if let Err(e) = unsafe { mem.reach.copy(mem.copier, mv.to, mv.from, len) } {
            let _ = mem.pmm.lock().abort_move(mv.chunk, dst);
            return Err(e);
        }
        // Through BAR1, the allocation's CPU run maps its pages in order: the piece's entries
        // must point at the copy before the old chunk goes back. Only the run's own: a piece
        // may be longer than the allocation (a contiguous one rounded up to its root), and the
        // slots past the run are other owners'.
        if let (Some(bar1), Some(run)) = (mem.reach.bar1(), st.cpu_window) {
            if let Err(e) = bar1.remap(run, off, mv.to, len) {
                // BAR1 may reach either chunk now (the space is broken, and the GPU hands
                // nothing out any more): neither goes back, and the allocation's memory never
                // does ([`crate::mem::backing::Backing`]'s `stuck`).
                pr_err!(
                    "compaction: remapping BAR1 for the move of {:#x}: {e:?}; neither chunk goes back\n",
                    mv.from
                );
                self.keep_memory();
                return Err(e);
            }
        }
        p.relocate(dst, mv.to);
        // Orders the new location before the count: a reader that sees the count sees it.
        self.moves.fetch_add(1, Release);
        // SAFETY: The old chunk is unreachable (as above) and no longer the piece's.
        let zero = match unsafe { mem.reach.zero(mv.from, len) } {
            Ok(()) => Zero::Zeroed,
            Err(_) => Zero::Dirty,
        };
        let mut pmm = mem.pmm.lock();
        if let Err(e) = pmm.finish_move(mv.chunk, dst, zero) {
            // The piece lives at `dst` now; whatever failed, the old chunk must go back.
            pr_err!("compaction: finishing the move of {:#x}: {e:?}\n", mv.from);
            let _ = pmm.unpin_allocated(dst);
            let _ = pmm.free(mv.chunk, Zero::Dirty);
        }
        drop(pmm);
        drop(st);
        Ok(())
    }

    /// The plan's moves of this allocation's pieces (`plan` sorted by chunk).
    fn planned<'a>(&'a self, plan: &'a [Move]) -> impl Iterator<Item = (usize, &'a Move)> + 'a {
        self.backing
            .pieces
            .iter()
            .enumerate()
            .filter_map(move |(i, p)| {
                let id = p.id().raw();
                let j = plan.binary_search_by_key(&id, |m| m.chunk.raw()).ok()?;
                Some((i, plan.get(j)?))
            })
    }
}

/// Compacts `mem` until `goal` fits, as far as its movable memory allows.
pub(crate) fn compact(mem: &Arc<FbMemory>, goal: Goal) -> Result<Report> {
    // Compaction copies through a flat aperture; through BAR1 it needs the copy engine, and a
    // BAR1 that still works.
    mem.reach.can_copy()?;
    mem.blocked()?;
    let mut one = mem.compacting.lock();
    // This compaction's number: it marks the allocations it has looked at.
    *one += 1;
    let round = *one;
    // GPU removal waits for a compaction in flight.
    let _busy = mem.enter()?;
    // The plan's memory is allocated before the manager's lock is taken to plan.
    let sizing = mem.pmm.lock().plan_sizing();
    let mut bufs = PlanBuffers::new();
    bufs.reserve(sizing).map_err(fb::errno)?;
    let before = {
        let pmm = mem.pmm.lock();
        let s = pmm.stats();
        let before = (s.largest_free, s.fragmentation_permille());
        pmm.plan_compaction(goal, &mut bufs).map_err(fb::errno)?;
        before
    };
    sort_by_key(bufs.moves_mut(), |m| m.chunk.raw());
    let plan = bufs.moves();
    let mut report = Report {
        planned: plan.len(),
        ..Report::default()
    };
    loop {
        // The next allocations with planned moves that this compaction has not looked at,
        // without allocating under the list's lock.
        let mut batch: [Option<Arc<Allocation>>; BATCH] = Default::default();
        let mut n = 0;
        let mut more = false;
        for a in mem.allocs.lock().iter() {
            if a.compacted.load(Relaxed) == round {
                continue;
            }
            if n == BATCH {
                more = true;
                break;
            }
            a.compacted.store(round, Relaxed);
            if a.planned(plan).next().is_some() {
                if let Some(slot) = batch.get_mut(n) {
                    *slot = Some(a.into());
                    n += 1;
                }
            }
        }
        for a in batch.iter().flatten() {
            for (i, mv) in a.planned(plan) {
                // A move that broke BAR1 stops the compaction.
                if mem.blocked().is_err() {
                    break;
                }
                if a.move_piece(i, mv).is_ok() {
                    report.moved += 1;
                    report.bytes += mv.size;
                }
            }
        }
        if !more || report.moved >= report.planned {
            break;
        }
    }
    mem.pmm
        .lock()
        .record_compaction(u64::try_from(report.moved)?, report.bytes, before);
    Ok(report)
}
