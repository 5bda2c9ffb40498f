// SPDX-License-Identifier: GPL-2.0

//! An allocation's physical backing: its pieces (memory-manager chunks), how they are allocated
//! and scrubbed before anyone can reach them, and how they go back to the manager.

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

use crate::{
    hwref::{
        P2P_PAGE_SIZE,
        ROOT_CHUNK_SIZE, //
    },
    mem::fb::{
        self,
        FbMemory, //
    },
    pmm::{
        AllocFlags,
        ChunkId,
        FreeOutcome,
        MemType,
        Zero, //
    },
    vaspace::layout::Layout,
};

/// One piece of an allocation's physical backing.
///
/// Compaction may move a piece ([`compact`]): it changes the piece only while holding the
/// allocation's lock and only while nothing but that lock's holders can reach the memory (no
/// pin, no dma-buf, CPU mappings removed), so readers either hold the lock or read an
/// allocation that cannot move (pinned or exported). The fields are atomics so that the
/// readers that do not need the lock stay free of data races.
pub(crate) struct Piece {
    /// The memory-manager chunk (for a contiguous run, its first root), as [`ChunkId::raw`].
    id: Atomic<u32>,
    /// Framebuffer offset of the piece (its length follows from the [`Layout`]).
    fb_offset: Atomic<u64>,
    /// The piece's memory is known to be zero.
    zeroed: Atomic<bool>,
}

impl Piece {
    fn new(id: ChunkId, fb_offset: u64, zeroed: bool) -> Self {
        Self {
            id: Atomic::new(id.raw()),
            fb_offset: Atomic::new(fb_offset),
            zeroed: Atomic::new(zeroed),
        }
    }

    /// The memory-manager chunk.
    pub(crate) fn id(&self) -> ChunkId {
        ChunkId::from_raw(self.id.load(Relaxed))
    }

    /// The framebuffer offset.
    pub(crate) fn fb_offset(&self) -> u64 {
        self.fb_offset.load(Relaxed)
    }

    pub(super) fn zeroed(&self) -> bool {
        self.zeroed.load(Relaxed)
    }

    /// Points the piece at its new chunk (compaction, under the allocation's lock).
    pub(super) fn relocate(&self, id: ChunkId, fb_offset: u64) {
        self.id.store(id.raw(), Relaxed);
        self.fb_offset.store(fb_offset, Relaxed);
    }
}

/// The physical backing of an allocation: chunks of one GPU's memory manager, in VA order.
///
/// The chunks go back to the manager once ([`Backing::give_back`]): when the allocation is
/// released and no pin holds them, or, for a backing that never became reachable, when it is
/// dropped.
pub(crate) struct Backing {
    /// The GPU's memory manager.
    pub(crate) mem: Arc<FbMemory>,
    /// The chunks.
    pub(crate) pieces: KVVec<Piece>,
    /// Their shape.
    pub(crate) layout: Layout,
    /// One run of adjacent roots.
    contiguous: bool,
    /// The chunks went back.
    returned: Atomic<bool>,
    /// Made of struct pages, for P2PDMA ([`crate::mem::p2pdma`]).
    pub(crate) p2pdma: bool,
    /// nvrs holds a reference on each of those pages (from creation to release).
    pub(super) pages_held: Atomic<bool>,
    /// A request held some of them past the bound, or BAR1 could not unmap the memory: it is
    /// never handed out again.
    pub(super) stuck: Atomic<bool>,
    /// Through BAR1, struct pages of the run that maps every piece in order (BAR1 offset,
    /// pages; [`Backing::take_pages`]): from before the memory is reachable until the block
    /// layer let go of every page, in [`Backing::give_back`]. CPU mappings use it too.
    pub(crate) p2p_window: Option<(u64, usize)>,
}

impl Drop for Backing {
    fn drop(&mut self) {
        // Only a backing that never became reachable gets here unreturned; scrub anyway.
        self.give_back(true);
    }
}

impl Backing {
    /// Unmaps a BAR1 run (BAR1 offset, pages) that mapped some of the memory; false if BAR1 may
    /// still reach it, which then never goes back ([`Backing::stuck`]).
    pub(super) fn release_run(&self, (va, pages): (u64, usize)) -> bool {
        let released = self.mem.reach.release(va, pages);
        if !released {
            self.stuck.store(true, Relaxed);
        }
        released
    }

    /// Bytes of memory in piece `i`: for a contiguous run, all of its roots, although the VAs
    /// cover only the requested size (the rest of the last root is scrubbed and returned too).
    pub(super) fn piece_len(&self, i: usize) -> u64 {
        match u64::try_from(i) {
            Ok(_) if self.contiguous => self.layout.bulk_len.next_multiple_of(ROOT_CHUNK_SIZE),
            Ok(i) if i < self.layout.bulk => self.layout.bulk_len,
            _ => P2P_PAGE_SIZE,
        }
    }

    /// Zeroes every piece not known to be zero. Called before the memory becomes reachable, with
    /// no lock held.
    pub(super) fn scrub(&mut self) -> Result {
        for (i, p) in self.pieces.iter().enumerate() {
            let len = self.piece_len(i);
            if !p.zeroed() {
                // SAFETY: The piece was just allocated and is not reachable by anyone yet.
                unsafe { self.mem.reach.zero(p.fb_offset(), len) }?;
                p.zeroed.store(true, Relaxed);
            }
        }
        Ok(())
    }

    /// Returns the chunks to the memory manager. Memory that a mapping or a pin could have
    /// written (`touched`) is zeroed first, outside every lock; memory nobody could reach is
    /// still zero. Called once, after every mapping and pin of the memory ended, and after the
    /// block layer let go of its struct pages, if it is made of them ([`Backing::drop_pages`]).
    pub(super) fn give_back(&self, touched: bool) {
        if self.returned.xchg(true, Relaxed) {
            return;
        }
        // Struct pages (dropped at release, unless the backing never became reachable) that a
        // request still held past the bound, or a BAR1 run that could not be unmapped: the
        // memory stays allocated.
        if self.p2pdma {
            self.drop_pages();
        }
        if self.stuck.load(Relaxed) {
            return;
        }
        // The block layer let go of every page: BAR1 stops reaching them before they go back.
        if let Some(run) = self.p2p_window {
            if !self.release_run(run) {
                return;
            }
        }
        // Writing the aperture only while GPU removal waits for us; once the GPU is going away
        // its manager dies with it (or stays retired while pins from before the removal exist)
        // and the memory goes back as it is.
        let busy = self.mem.enter().ok();
        for (i, p) in self.pieces.iter().enumerate() {
            let len = self.piece_len(i);
            let zero = if !touched && p.zeroed() {
                Zero::Zeroed
            } else if busy.is_none() {
                Zero::Dirty
            } else {
                // SAFETY: Every user mapping of the piece was removed and every pin of it ended;
                // it is not yet back in the manager, so nobody else can reach it; GPU removal
                // waits for `busy`.
                match unsafe { self.mem.reach.zero(p.fb_offset(), len) } {
                    Ok(()) => Zero::Zeroed,
                    // Allocation zeroes it before it is handed out again.
                    Err(_) => Zero::Dirty,
                }
            };
            match self.mem.pmm.lock().free(p.id(), zero) {
                Ok(FreeOutcome::Freed) => {}
                // Cannot happen: the memory is given back only after every pin ended.
                Ok(FreeOutcome::Revoke { pins }) => {
                    pr_err!(
                        "chunk at {:#x} freed with {pins} P2P pins; kept\n",
                        p.fb_offset()
                    )
                }
                Err(e) => pr_err!("freeing chunk at {:#x}: {e:?}\n", p.fb_offset()),
            }
            self.mem.sub_held(len);
        }
    }
}

/// Allocates `size` bytes on `mem`: 2 MiB chunks for the bulk and 64 KiB chunks for the rest,
/// or, with `contiguous`, one run of adjacent roots. The chunks are not yet scrubbed.
pub(crate) fn alloc_backing(mem: &Arc<FbMemory>, size: u64, contiguous: bool) -> Result<Backing> {
    let layout = if contiguous {
        Layout {
            bulk: 1,
            bulk_len: size,
            tail: 0,
        }
    } else {
        Layout {
            bulk: size / ROOT_CHUNK_SIZE,
            bulk_len: ROOT_CHUNK_SIZE,
            tail: (size % ROOT_CHUNK_SIZE) / P2P_PAGE_SIZE,
        }
    };
    // Reserve first so that recording a chunk never fails once it is allocated.
    let count = usize::try_from(layout.pieces())?;
    let mut backing = Backing {
        mem: mem.clone(),
        pieces: KVVec::with_capacity(count, GFP_KERNEL)?,
        layout,
        contiguous,
        returned: Atomic::new(false),
        p2pdma: false,
        pages_held: Atomic::new(false),
        stuck: Atomic::new(false),
        p2p_window: None,
    };
    let mut ids = KVVec::new();
    ids.resize(count, ChunkId::default(), GFP_KERNEL)?;
    let mut pmm = mem.pmm.lock();
    let big = usize::try_from(layout.bulk)?;
    if contiguous {
        let id = pmm
            .alloc_contiguous(size, MemType::User)
            .map_err(fb::errno)?;
        if let Some(slot) = ids.get_mut(0) {
            *slot = id;
        }
    } else {
        let flags = AllocFlags {
            prefer_zeroed: true,
        };
        let (bulk, tail) = ids.split_at_mut(big);
        pmm.alloc(ROOT_CHUNK_SIZE, MemType::User, flags, bulk)
            .map_err(fb::errno)?;
        if let Err(e) = pmm.alloc(P2P_PAGE_SIZE, MemType::User, flags, tail) {
            for id in bulk.iter() {
                let _ = pmm.free(*id, Zero::Dirty);
            }
            return Err(fb::errno(e));
        }
        // In address order, so that physically adjacent chunks back adjacent VAs: a pin's DMA
        // mapping then coalesces them into one run (free lists hand chunks out newest first).
        pmm.sort_by_addr(bulk);
        pmm.sort_by_addr(tail);
    }
    for (i, id) in ids.iter().enumerate() {
        let piece = pmm
            .unpin_allocated(*id)
            .and_then(|()| pmm.addr(*id))
            .and_then(|fb_offset| Ok(Piece::new(*id, fb_offset, pmm.is_zeroed(*id)?)));
        match piece.map(|p| backing.pieces.push_within_capacity(p)) {
            Ok(Ok(())) => mem.add_held(backing.piece_len(i)),
            _ => {
                for id in ids.iter().skip(backing.pieces.len()) {
                    let _ = pmm.free(*id, Zero::Dirty);
                }
                drop(pmm);
                // The pieces recorded so far were never reachable: back as they were.
                backing.give_back(false);
                return Err(EIO);
            }
        }
    }
    Ok(backing)
}
