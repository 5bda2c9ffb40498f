// SPDX-License-Identifier: GPL-2.0

//! GPU memory as struct pages for the kernel's P2PDMA: how NVMe reads and writes land in an
//! allocation without a bounce through system RAM (GPUDirect-Storage style, on upstream
//! interfaces only).
//!
//! The driver publishes each GPU's memory with `pci_p2pdma_add_resource()` at the end of probe
//! (`rust/p2pdma.c`; [`P2pdma::publish`]). That gives every page of the aperture a struct page
//! of the ZONE_DEVICE kind `MEMORY_DEVICE_PCI_P2PDMA`. An NVIDIA GPU (the GPU model) publishes
//! BAR1 instead, whose pages reach memory only where nvrs mapped them: a P2PDMA allocation
//! maps all of itself at a BAR1 run before it is reachable, uses that run's struct pages, and
//! unmaps it only after the block layer let go of every page ([`Backing::p2p_window`]). An allocation made with
//! `NVRS_ALLOC_P2PDMA` is mapped for the CPU with those pages instead of bare page frames
//! ([`crate::mem::cpu_map`]), and the block layer's `pin_user_pages(FOLL_PCI_P2PDMA)` accepts
//! such a mapping: an `O_DIRECT` read into it (or an io_uring read) has the NVMe controller DMA
//! straight into the GPU's BAR, and a write DMAs out of it.
//!
//! The rules of the memory path hold for these pages as for any memory:
//!
//! * **Scrubbed on hand-out.** As any allocation ([`crate::mem::backing`]).
//! * **Nothing is reused while a request holds it.** nvrs holds one reference on each page of
//!   the allocation while it lives ([`Backing::take_pages`]); user mappings and the block
//!   layer's pins add theirs. Release removes the user mappings, drops nvrs's references and
//!   waits until every page is free, which the page-free operation signals
//!   ([`Backing::drop_pages`]): a `FREE` racing an `O_DIRECT` read returns once the read has let
//!   go of the memory, and only then can it be scrubbed and handed out again. A page the block layer
//!   does not let go of within [`FREE_WAIT_MS`] is never handed out again (its chunks stay
//!   allocated; counted in [`P2pdma::stuck_bytes`] and logged).
//! * **Compaction never moves them.** Their chunks are pinned in the memory manager for as
//!   long as nvrs holds the pages.
//! * **The unbind waits for them.** GPU removal releases every allocation (the same wait), and
//!   the kernel frees the struct pages after the unbind only once every page is free.
//! * **No other user of the pool.** The kernel's P2PDMA pool of the GPU is all nvrs's
//!   (`rust/p2pdma.c`), so no other path (the sysfs `p2pmem/allocate` file, an NVMe target)
//!   gets a page nvrs handed to a process.
//!
//! Whether a device may reach the pages is the kernel's decision (`pci_p2pdma_map_type()`):
//! under one PCIe switch the path is allowed; across root ports of a host bridge that is not on
//! the kernel's list the block layer fails the request (`EREMOTEIO`), and the reader falls back
//! to a bounce through system memory.

use kernel::{
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Relaxed,
        Release, //
    },
    time::{
        delay::fsleep,
        Delta,
        Instant,
        Monotonic, //
    },
};

use crate::{
    helpers,
    hwref::P2P_PAGE_SIZE,
    mem::{
        backing::Backing,
        fb, //
    },
    text::Size,
};

/// How long a release waits for the block layer to let go of an allocation's pages: longer
/// than the NVMe driver's I/O timeout (30 s), after which a request is aborted.
pub(crate) const FREE_WAIT_MS: u32 = 60_000;

/// One GPU's P2PDMA state.
pub(crate) struct P2pdma {
    /// The driver published the GPU's memory (struct pages exist for all of it).
    published: Atomic<bool>,
    /// The range it published ([`Self::publish`]).
    range_phys: Atomic<u64>,
    range_len: Atomic<u64>,
    /// The aperture is reserved write-combined (a condition for publishing).
    write_combined: Atomic<bool>,
    /// Bytes of live allocations made with struct pages.
    bytes: Atomic<u64>,
    /// Bytes whose pages the block layer did not let go of within [`FREE_WAIT_MS`]: never
    /// handed out again.
    stuck: Atomic<u64>,
    /// Releases letting go of struct pages right now ([`Backing::begin_drop`] to
    /// [`Backing::finish_drop`]): they read the pages until they are done, so the pages must
    /// stay until then ([`P2pdma::wait_drops`]).
    dropping: Atomic<u32>,
}

impl P2pdma {
    pub(crate) fn new() -> Self {
        Self {
            published: Atomic::new(false),
            range_phys: Atomic::new(0),
            range_len: Atomic::new(0),
            write_combined: Atomic::new(false),
            bytes: Atomic::new(0),
            stuck: Atomic::new(0),
            dropping: Atomic::new(0),
        }
    }

    /// Waits until no release is letting go of struct pages (each does within
    /// [`FREE_WAIT_MS`], and the releases of GPU removal itself within one such deadline in
    /// all): GPU removal, before the pages go. Bounded, and independent of the removal's wait
    /// for free callbacks, which may give up earlier while a release still reads the pages.
    pub(crate) fn wait_drops(&self) {
        while self.dropping.load(Acquire) != 0 {
            fsleep(Delta::from_millis(10));
        }
    }

    /// Records that the aperture is reserved write-combined (probe).
    pub(crate) fn set_write_combined(&self) {
        self.write_combined.store(true, Relaxed);
    }

    /// Whether the aperture is reserved write-combined.
    pub(crate) fn write_combined(&self) -> bool {
        self.write_combined.load(Relaxed)
    }

    /// Records that `[phys, phys + len)` has struct pages: the GPU's memory, or its BAR1 (the
    /// end of probe, once).
    pub(crate) fn publish(&self, phys: u64, len: u64) {
        self.range_phys.store(phys, Relaxed);
        self.range_len.store(len, Relaxed);
        self.published.store(true, Release);
    }

    /// What [`Self::publish`] recorded: `(phys, len)`, for the unbind.
    pub(crate) fn range(&self) -> (u64, u64) {
        (self.range_phys.load(Relaxed), self.range_len.load(Relaxed))
    }

    /// Whether allocations can be made of struct pages.
    pub(crate) fn is_published(&self) -> bool {
        self.published.load(Acquire)
    }

    /// Bytes of live allocations made of struct pages.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }

    /// Bytes held back because a request never let go of them.
    pub(crate) fn stuck_bytes(&self) -> u64 {
        self.stuck.load(Relaxed)
    }

    pub(super) fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Relaxed);
    }

    pub(super) fn sub(&self, n: u64) {
        self.bytes.fetch_sub(n, Relaxed);
    }

    pub(super) fn add_stuck(&self, n: u64) {
        self.stuck.fetch_add(n, Relaxed);
    }
}

impl Backing {
    /// Makes the backing struct pages nvrs holds (an allocation made with
    /// `NVRS_ALLOC_P2PDMA`): each piece pinned in the memory manager, so that compaction
    /// leaves it where the block layer may be DMAing, and each page given nvrs's reference.
    /// Through BAR1 the pages are those of a BAR1 run that maps every piece in order, for the
    /// backing's life ([`Backing::p2p_window`]; `ENOMEM` when BAR1 has no room), released only
    /// once the block layer let go of every page ([`Backing::give_back`]). Called once the
    /// memory is scrubbed and before it is reachable. All or nothing: `-EOPNOTSUPP` if the GPU
    /// has no struct pages.
    pub(super) fn take_pages(&mut self) -> Result {
        if !self.mem.p2pdma.is_published() {
            return Err(EOPNOTSUPP);
        }
        if let Some(bar1) = self.mem.reach.bar1() {
            let mut pages = KVVec::new();
            for (i, p) in self.pieces.iter().enumerate() {
                for k in 0..self.piece_len(i) / P2P_PAGE_SIZE {
                    pages.push(p.fb_offset() + k * P2P_PAGE_SIZE, GFP_KERNEL)?;
                }
            }
            // Nothing stays mapped on failure ([`crate::bar1::Bar1Space::map`]).
            self.p2p_window = Some((bar1.map(&pages, false)?, pages.len()));
        }
        for (i, p) in self.pieces.iter().enumerate() {
            let len = self.piece_len(i);
            let pinned = self.mem.pmm.lock().p2p_pin(p.id()).map_err(fb::errno);
            let taken = pinned.and_then(|_| {
                let phys = self.pages_phys(i)?;
                // SAFETY: The piece's pages have struct pages (`is_published`, set only once
                // the driver published them, and the GPU stays bound while the backing holds
                // memory), not yet reachable by anyone.
                unsafe { helpers::p2pdma_get_pages(phys, len) }
            });
            if let Err(e) = taken {
                if pinned.is_ok() {
                    let _ = self.mem.pmm.lock().p2p_unpin(p.id());
                }
                self.undo_pages(i);
                if let Some(run) = self.p2p_window.take() {
                    // Nobody could reach the pages; if BAR1 still maps them, they stay.
                    self.release_run(run);
                }
                return Err(e);
            }
        }
        self.p2pdma = true;
        self.pages_held.store(true, Relaxed);
        self.mem.p2pdma.add(self.bytes());
        Ok(())
    }

    /// The CPU physical address of the struct pages of piece `i`: in the flat aperture, or in
    /// the backing's BAR1 run.
    pub(super) fn pages_phys(&self, i: usize) -> Result<u64> {
        let reach = &self.mem.reach;
        let p = self.pieces.get(i).ok_or(EINVAL)?;
        match (reach.flat(), reach.bar1(), self.p2p_window) {
            (Ok(base), _, _) => Ok(base + p.fb_offset()),
            (Err(_), Some(b), Some((va, _))) => {
                Ok(b.phys() + va + self.layout.offset_of(u64::try_from(i)?))
            }
            _ => Err(EOPNOTSUPP),
        }
    }

    /// Undoes [`Backing::take_pages`] for the first `n` pieces (their pages are still free:
    /// nobody could reach them).
    fn undo_pages(&self, n: usize) {
        for (i, p) in self.pieces.iter().enumerate().take(n) {
            if let Ok(phys) = self.pages_phys(i) {
                // SAFETY: `take_pages` took the references on this piece a moment ago.
                unsafe { helpers::p2pdma_put_pages(phys, self.piece_len(i)) };
            }
            let _ = self.mem.pmm.lock().p2p_unpin(p.id());
        }
    }

    /// Drops nvrs's page references, once, and waits, at most [`FREE_WAIT_MS`] in all, until
    /// every page is free ([`Backing::finish_drop`]); for the give-back of a backing that
    /// never became reachable. No lock held.
    pub(crate) fn drop_pages(&self) {
        if self.begin_drop() {
            self.finish_drop(Instant::now() + Delta::from_millis(FREE_WAIT_MS.into()));
        }
    }

    /// Starts letting go of the pages, once: true if this caller is the one to
    /// [`Backing::finish_drop`]. Counted in [`P2pdma::wait_drops`] from here, so that GPU
    /// removal keeps the struct pages until the drop is over; the release calls it under the
    /// allocation's lock, where it marks the allocation released.
    pub(crate) fn begin_drop(&self) -> bool {
        if !self.p2pdma || !self.pages_held.xchg(false, Relaxed) {
            return false;
        }
        self.mem.p2pdma.dropping.fetch_add(1, Relaxed);
        true
    }

    /// Drops nvrs's page references and waits, until `until` at the latest, until every page
    /// is free: the block layer has let go of it. Then the pieces are unpinned in the memory
    /// manager; otherwise the memory must never be handed out again (marked stuck, counted and
    /// logged). Called by the release once every user mapping is removed (nothing can map the
    /// pages again), after [`Backing::begin_drop`] returned true; no lock held. Pins and
    /// dma-buf exports do not use the struct pages, so the GPU's pages can go with its unbind
    /// even while those hold the memory.
    pub(crate) fn finish_drop(&self, until: Instant<Monotonic>) {
        self.put_and_wait(until);
        self.mem.p2pdma.dropping.fetch_sub(1, Release);
    }

    /// The body of [`Backing::finish_drop`], counted in [`P2pdma::wait_drops`].
    fn put_and_wait(&self, until: Instant<Monotonic>) {
        // Pages were taken ([`Backing::take_pages`]), so every piece has their address.
        for i in 0..self.pieces.len() {
            if let Ok(phys) = self.pages_phys(i) {
                // SAFETY: `take_pages` took these references, and only the one caller of
                // `begin_drop` that cleared `pages_held` gets here.
                unsafe { helpers::p2pdma_put_pages(phys, self.piece_len(i)) };
            }
        }
        crate::testhook::delay(crate::testhook::Point::PagesPut);
        let mut busy = 0u64;
        for i in 0..self.pieces.len() {
            let Ok(phys) = self.pages_phys(i) else {
                continue;
            };
            let left =
                u32::try_from((until - Instant::now()).as_millis().max(0)).unwrap_or(u32::MAX);
            // SAFETY: The GPU's struct pages stay until after its unbind, which waits until no
            // drop is in progress (`P2pdma::wait_drops`) before it gives them up.
            busy += unsafe { helpers::p2pdma_wait_free(phys, self.piece_len(i), left) };
        }
        self.mem.p2pdma.sub(self.bytes());
        if busy != 0 {
            self.stuck.store(true, Relaxed);
            self.mem.p2pdma.add_stuck(self.bytes());
            pr_err!(
                "GPU {}: {} pages of an allocation are still held by I/O after {} ms; its {} are never handed out again\n",
                self.mem.index,
                busy,
                FREE_WAIT_MS,
                Size(self.bytes())
            );
            return;
        }
        let mut pmm = self.mem.pmm.lock();
        for p in self.pieces.iter() {
            let _ = pmm.p2p_unpin(p.id());
        }
    }

    /// Bytes of memory in the backing's pieces.
    fn bytes(&self) -> u64 {
        (0..self.pieces.len()).map(|i| self.piece_len(i)).sum()
    }
}
