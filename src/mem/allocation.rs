// SPDX-License-Identifier: GPL-2.0

//! The allocation object: GPU memory on one GPU at a range of GPU VAs, what holds it, and its
//! release.
//!
//! An allocation is reachable from two places, neither of which it knows the type of: its
//! process's VA index ([`Index`], [`crate::vaspace`]), by which its owner and
//! `nvidia_p2p_get_pages()` find it, and its GPU's list of allocations ([`FbMemory::allocs`]),
//! by which GPU removal and compaction find it in time proportional to the GPU's own
//! allocations. The `nvidia_p2p` pins on it are listed in its [`AllocState`] as [`Holder`]s,
//! which its release revokes one at a time (or leaves, if persistent), so that this layer never
//! names the layers built on it; dma-buf exports, which keep the memory past release, are
//! counted there.

use core::ops::Range;

use kernel::{
    list::{
        AtomicTracker,
        List,
        ListArc,
        ListLinks,
        TryNewListArc, //
    },
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        Mutex, //
    },
    task::Pid,
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

use crate::{
    bar1::Bar1Space,
    helpers::{
        self,
        MappedInode, //
    },
    hwref::{
        P2P_PAGE_SIZE,
        ROOT_CHUNK_SIZE, //
    },
    mem::{
        backing::{
            alloc_backing,
            Backing,
            Piece, //
        },
        compact,
        cpu_map::CpuHandle,
        fb::{
            self,
            FbMemory, //
        },
        holder::{
            Held,
            Holder, //
        },
        p2pdma::FREE_WAIT_MS,
        va, //
    },
    pmm::compact::Goal,
    vaspace::range::Span,
};

/// The index an allocation is reachable from by VA: its process's VA space
/// ([`crate::vaspace`]), in a layer above this one.
pub(crate) trait Index: Send + Sync {
    /// Takes `a` out of the index if it is still there, so that its owner cannot find it any
    /// more (GPU removal, which has already started its release, [`FbMemory::begin_release`]).
    fn take_out(&self, a: &Allocation);
}

/// What an allocation is made of, as its owner asked (`NVRS_ALLOC_*`).
#[derive(Clone, Copy, Default)]
pub(crate) struct AllocOptions {
    /// One physically contiguous run of roots.
    pub(crate) contiguous: bool,
    /// Struct pages for the kernel's P2PDMA ([`crate::mem::p2pdma`]).
    pub(crate) p2pdma: bool,
}

/// Mutable state of an allocation.
pub(crate) struct AllocState {
    /// Released: unreachable, no new pins or mappings.
    pub(crate) released: bool,
    /// Live pins (persistent and not), counted until each has ended; each holds the allocation.
    pub(crate) pins: usize,
    /// The live pins not yet taken by a release: revocable ones at the front, persistent ones
    /// at the back ([`crate::mem::holder`]).
    holders: List<Held<dyn Holder>>,
    /// dma-bufs exported from the allocation that still hold its memory
    /// ([`crate::dmabuf`]); like persistent pins, they keep it past release.
    pub(crate) dmabufs: usize,
    /// The device inodes the allocation is mapped through for the CPU (usually one; a second
    /// device node is another inode), to remove the user mappings when it is released.
    pub(crate) mapped: KVec<MappedInode>,
    /// A CPU mapping or a pin could have written the memory: it is scrubbed when given back.
    pub(crate) touched: bool,
    /// The release is letting go of the allocation's struct pages and waiting for the block
    /// layer to do the same ([`crate::mem::p2pdma`]): the memory must not go back before.
    dropping: bool,
    /// Through BAR1 ([`crate::mem::reach`]): the run that maps the whole allocation for CPU
    /// mappings (BAR1 offset, pages), from the first `mmap` until release.
    pub(crate) cpu_window: Option<(u64, usize)>,
}

impl AllocState {
    /// Records a new pin, made under the allocation's lock, once nothing can fail any more.
    pub(crate) fn add_holder(&mut self, h: ListArc<Held<dyn Holder>>) {
        if h.is_persistent() {
            self.holders.push_back(h);
        } else {
            self.holders.push_front(h);
        }
        self.pins += 1;
    }

    /// Whether the memory is released and nothing holds it any more: then `Some`, with whether
    /// it must be scrubbed ([`AllocState::touched`]) as it goes back.
    fn unused(&self) -> Option<bool> {
        (self.released && !self.dropping && self.pins == 0 && self.dmabufs == 0)
            .then_some(self.touched)
    }
}

/// A range of an allocation's 64 KiB pages as runs of pages contiguous in GPU memory, one per
/// piece, in order ([`Allocation::fb_runs`]): each piece is looked up once, not each page (a
/// 2 MiB pin's 32 pages are one root, one run). Items are (framebuffer offset, pages). Ends
/// early if the range leaves the allocation, so callers check the count.
pub(crate) struct FbRuns<'a> {
    alloc: &'a Allocation,
    /// The next page's offset in the allocation, and the end of the range.
    off: u64,
    end: u64,
}

impl Iterator for FbRuns<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if self.off >= self.end {
            return None;
        }
        let layout = &self.alloc.backing.layout;
        let (i, within) = layout.locate(self.off)?;
        let piece = self.alloc.backing.pieces.get(usize::try_from(i).ok()?)?;
        let to = (self.off - within + layout.piece_len(i)).min(self.end);
        let pages = (to - self.off) / P2P_PAGE_SIZE;
        if pages == 0 {
            return None;
        }
        self.off += pages * P2P_PAGE_SIZE;
        Some((piece.fb_offset() + within, pages))
    }
}

/// GPU memory at a range of GPU VAs.
#[pin_data(PinnedDrop)]
pub(crate) struct Allocation {
    /// The VAs.
    pub(crate) span: Span,
    /// Owning process, for display.
    pub(crate) tgid: Pid,
    /// Physical backing.
    pub(crate) backing: Backing,
    /// Lifetime, pins and mappings.
    #[pin]
    pub(crate) state: Mutex<AllocState>,
    /// Pieces moved by compaction so far (bumped under `state`): a reader that looked at the
    /// pieces without the lock checks it did not change before it relies on what it read.
    pub(crate) moves: Atomic<u64>,
    /// What its CPU mappings hold ([`crate::mem::cpu_map`]); detached at release.
    pub(crate) cpu: Arc<CpuHandle>,
    /// The index its owner finds it in.
    index: Arc<dyn Index>,
    /// Its place in its GPU's list of allocations ([`FbMemory::allocs`]), from creation to
    /// release.
    #[pin]
    links: ListLinks,
    /// Whether that list holds it (it holds it once, as a [`ListArc`]).
    #[pin]
    listed: AtomicTracker,
    /// The last compaction of its GPU that looked at it ([`crate::mem::compact`]).
    pub(super) compacted: Atomic<u64>,
}

kernel::list::impl_list_arc_safe! {
    impl ListArcSafe<0> for Allocation { tracked_by listed: AtomicTracker; }
}

kernel::list::impl_list_item! {
    impl ListItem<0> for Allocation { using ListLinks { self.links }; }
}

impl Allocation {
    /// Allocates `size` bytes of `mem`, zeroed, at fresh VAs, and makes the allocation
    /// reachable: `insert` puts it into `index` (with no lock of this layer held). GPU removal
    /// waits until that is done. If `insert` fails the allocation is released again.
    pub(crate) fn create(
        mem: &Arc<FbMemory>,
        size: u64,
        opts: AllocOptions,
        index: Arc<dyn Index>,
        insert: impl FnOnce(Arc<Allocation>) -> Result,
    ) -> Result<Span> {
        if size == 0 || size % P2P_PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        // More than the GPU has can never succeed; refusing it here also keeps absurd sizes
        // away from the metadata allocations below.
        if size > mem.total_bytes() {
            return Err(ENOMEM);
        }
        mem.blocked()?;
        // GPU removal waits until this allocation is in its GPU's list and its index (or given
        // back).
        let _busy = mem.enter()?;
        if opts.p2pdma && !mem.p2pdma.is_published() {
            return Err(EOPNOTSUPP);
        }
        let contiguous = opts.contiguous;
        let mut backing = match alloc_backing(mem, size, contiguous) {
            // Enough bytes are free, in the wrong places: compact, then try once more.
            Err(e) if e == ENOMEM && crate::compact_on_alloc() && mem.free_bytes() >= size => {
                let roots = u32::try_from(size.div_ceil(ROOT_CHUNK_SIZE))?;
                let goal = if contiguous {
                    Goal::Contiguous(roots)
                } else {
                    Goal::Roots(roots)
                };
                compact::compact(mem, goal).map_err(|_| ENOMEM)?;
                alloc_backing(mem, size, contiguous)?
            }
            r => r?,
        };
        // Scrub before the memory is reachable, with no lock held (this may be GiBs). On any
        // failure below, dropping `backing` returns the chunks.
        backing.scrub()?;
        if opts.p2pdma {
            crate::testhook::delay(crate::testhook::Point::CreateScrub);
            backing.take_pages()?;
        }
        let span = va::alloc(size)?;
        let cpu = match CpuHandle::new() {
            Ok(cpu) => cpu,
            Err(e) => {
                let _ = va::free(span.start());
                return Err(e);
            }
        };
        // On failure the initialised fields are dropped: `backing` returns the chunks; the VAs
        // are freed below.
        let a = Arc::pin_init(
            try_pin_init!(Allocation {
                span,
                tgid: helpers::current_tgid(),
                backing,
                state <- new_mutex!(AllocState {
                    released: false,
                    pins: 0,
                    holders: List::new(),
                    dmabufs: 0,
                    mapped: KVec::new(),
                    touched: false,
                    dropping: false,
                    cpu_window: None,
                }, "Allocation::state"),
                moves: Atomic::new(0),
                cpu,
                index,
                links <- ListLinks::new(),
                listed <- AtomicTracker::new(),
                compacted: Atomic::new(0),
            }),
            GFP_KERNEL,
        );
        let a = match a {
            Ok(a) => a,
            Err(e) => {
                let _ = va::free(span.start());
                return Err(e);
            }
        };
        // Every path below releases the allocation or makes it reachable (and so released
        // later), which detaches it again.
        a.cpu.attach(a.clone());
        let listed = match ListArc::try_from_arc(a.clone()) {
            Ok(listed) => listed,
            // Cannot happen: nothing else made a `ListArc` of the new allocation.
            Err(_) => {
                a.release();
                return Err(EINVAL);
            }
        };
        {
            let mut allocs = mem.allocs.lock();
            // GPU removal waits for `_busy` before it walks the list, so it cannot have walked
            // it; should it have, the allocation never becomes reachable on a GPU that is gone.
            if mem.walked() {
                drop(allocs);
                drop(listed);
                a.release();
                return Err(ENODEV);
            }
            allocs.push_back(listed);
        }
        insert(a.clone()).inspect_err(|_| a.release())?;
        Ok(span)
    }

    /// The memory of the allocation's GPU.
    pub(crate) fn mem(&self) -> &Arc<FbMemory> {
        &self.backing.mem
    }

    /// The framebuffer offset backing the allocation-relative offset `off`.
    pub(crate) fn fb_offset_at(&self, off: u64) -> Option<u64> {
        let (i, within) = self.backing.layout.locate(off)?;
        let p = self.backing.pieces.get(usize::try_from(i).ok()?)?;
        Some(p.fb_offset() + within)
    }

    /// The 64 KiB pages of `[off, off + len)` (64 KiB aligned), as runs contiguous in GPU
    /// memory ([`FbRuns`]).
    pub(crate) fn fb_runs(&self, off: u64, len: u64) -> FbRuns<'_> {
        FbRuns {
            alloc: self,
            off,
            end: off.saturating_add(len),
        }
    }

    /// Appends the framebuffer offsets of the `n` 64 KiB pages at `off` to `pages`, which has
    /// room for them (what a BAR1 run maps); `-EINVAL` unless all `n` are in the allocation.
    pub(crate) fn list_fb_pages(&self, off: u64, n: usize, pages: &mut KVVec<u64>) -> Result {
        let start = pages.len();
        let len = u64::try_from(n)? * P2P_PAGE_SIZE;
        for (fb, count) in self.fb_runs(off, len) {
            for k in 0..count {
                pages
                    .push_within_capacity(fb + k * P2P_PAGE_SIZE)
                    .map_err(|_| EINVAL)?;
            }
        }
        if pages.len() - start != n {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The indexes of the pieces that back `[off, off + len)` of the allocation (empty if the
    /// range is empty or outside). They never change: compaction moves what a piece holds,
    /// not which piece holds an offset.
    pub(crate) fn piece_range(&self, off: u64, len: u64) -> Range<usize> {
        let r = self.backing.layout.pieces_in(off, len);
        match (usize::try_from(r.start), usize::try_from(r.end)) {
            (Ok(s), Ok(e)) => s..e,
            _ => 0..0,
        }
    }

    /// The pieces at the indexes `r` (empty if outside).
    pub(crate) fn pieces_at(&self, r: Range<usize>) -> &[Piece] {
        self.backing.pieces.get(r).unwrap_or(&[])
    }

    /// Releases an allocation that never became reachable (it could not be inserted): as
    /// [`Allocation::release_detached`]. It has no pins yet.
    fn release(&self) {
        self.release_detached();
    }

    /// Releases an allocation its owner took out of its index (`NVRS_IOCTL_FREE`, the VA
    /// space's teardown): removes its user CPU mappings (later accesses fault), revokes its
    /// non-persistent pins (their callbacks run here, with no nvrs lock held), and returns the
    /// memory unless a persistent pin or a dma-buf holds it. GPU removal waits for it even if
    /// it got here after the GPU started going away ([`FbMemory::begin_release`]). Never
    /// allocates.
    pub(crate) fn release_detached(&self) {
        let busy = self.backing.mem.begin_release();
        let pages_until = Instant::<Monotonic>::now() + Delta::from_millis(FREE_WAIT_MS.into());
        self.release_in(busy, true, pages_until);
    }

    /// [`Allocation::release_detached`] by GPU removal, which started the release: the
    /// allocation's pins are left to [`crate::p2p::pin::drain_gpu`], which revokes them in
    /// work items, so that no free callback runs in the unbinding thread. The memory goes back
    /// when the last of them ends. The block layer's hold on its struct pages is waited for
    /// until `pages_until`, one deadline for all of the GPU's allocations.
    fn release_removed(&self, busy: fb::InFlight<'_>, pages_until: Instant<Monotonic>) {
        self.release_in(busy, false, pages_until);
    }

    fn release_in(&self, busy: fb::InFlight<'_>, revoke: bool, pages_until: Instant<Monotonic>) {
        let (mapped, dropping) = {
            let mut st = self.state.lock();
            if st.released {
                return;
            }
            // From here `mmap`, the fault handler and pinning refuse the allocation, so the zap
            // below removes every mapping there will ever be.
            st.released = true;
            // A pin or dma-buf that ends meanwhile must not give the memory back while the
            // block layer may still be writing it. Counted for GPU removal under this lock, in
            // the same hold that makes the allocation released, so a removal that finds it
            // released also finds its pages in use
            // ([`P2pdma::wait_drops`](crate::mem::p2pdma::P2pdma::wait_drops)).
            st.dropping = self.backing.begin_drop();
            for inode in st.mapped.iter() {
                inode.zap(self.span.start(), self.span.len());
            }
            // With no user mapping left, BAR1 lets go of the memory too; if it cannot, the
            // memory never goes back ([`fb::FbMemory::blocked`] refuses new allocations too).
            self.release_window(st.cpu_window.take());
            (core::mem::take(&mut st.mapped), st.dropping)
        };
        // The inode references go now, not with the last pin or VMA.
        drop(mapped);
        // Out of the GPU's list (GPU removal may have taken it out already). Never the last
        // reference: the caller holds one.
        // SAFETY: An allocation is only ever put into its own GPU's list (`create`).
        let listed = unsafe { self.backing.mem.allocs.lock().remove(self) };
        drop(listed);
        // VMAs left behind keep only the handle: the allocation, its VAs and its pieces go once
        // no pin or dma-buf holds it.
        self.cpu.detach();
        // Struct pages: nvrs lets go of them and waits for the block layer to do the same (no
        // user mapping is left to take them again).
        if dropping {
            crate::testhook::delay(crate::testhook::Point::PageDrop);
            self.backing.finish_drop(pages_until);
            self.state.lock().dropping = false;
        }
        // One pin at a time, without allocating: each is taken off the list under the lock and
        // revoked without it; one being put concurrently is waited for. Pins created from now
        // on are refused (`released`). While it revokes, the release waits for a consumer.
        while let Some(h) = revoke.then(|| self.next_revocable()).flatten() {
            let _revoking = busy.revoking();
            h.revoke();
        }
        self.give_back_if_unused();
    }

    /// Takes the next non-persistent pin off the list of holders, if one is left.
    fn next_revocable(&self) -> Option<Arc<Held<dyn Holder>>> {
        let mut st = self.state.lock();
        let h = st.holders.pop_front()?;
        if h.is_persistent() {
            // Only persistent ones are left (they are kept at the back).
            st.holders.push_front(h);
            return None;
        }
        Some(h.into_arc())
    }

    /// Called by a pin when it ends: forgets it, and returns the memory if the allocation was
    /// released and this was its last pin.
    pub(crate) fn pin_gone(&self, pin: &Held<dyn Holder>) {
        let (listed, unused) = {
            let mut st = self.state.lock();
            // SAFETY: A pin is only ever listed as a holder of its own allocation
            // (`AllocState::add_holder`); a release may have taken it off already.
            let listed = unsafe { st.holders.remove(pin) };
            st.pins = st.pins.saturating_sub(1);
            (listed, st.unused())
        };
        // Never the last reference to the pin: the caller holds one.
        drop(listed);
        if let Some(touched) = unused {
            self.backing.give_back(touched);
        }
    }

    /// Holds the memory for a dma-buf export of `[off, off + len)`: counted, and pinned in the
    /// memory manager so that compaction leaves every piece where importers map it. Through
    /// BAR1 the range is mapped at a run of its own, in order, which is returned (BAR1 offset,
    /// pages) and must be handed back to [`Self::dmabuf_gone`]. `-ENOENT` once released,
    /// `-ENOMEM` when BAR1 has no room.
    pub(crate) fn hold_for_dmabuf(&self, off: u64, len: u64) -> Result<Option<(u64, usize)>> {
        let bar1 = self.mem().reach.bar1();
        let n = usize::try_from(len / P2P_PAGE_SIZE)?;
        // Allocated before the lock, which is on the pin path.
        let mut pages = KVVec::with_capacity(if bar1.is_some() { n } else { 0 }, GFP_KERNEL)?;
        let mut st = self.state.lock();
        if st.released || self.backing.mem.is_gone() {
            return Err(ENOENT);
        }
        let window = match bar1 {
            None => None,
            Some(b) => Some(self.map_bar1_run(b, off, n, &mut pages)?),
        };
        if let Err(e) = self.pin_pieces(self.piece_range(0, self.span.len()), true) {
            self.release_window(window);
            return Err(e);
        }
        // Importers and CPU mappings of the dma-buf may write it.
        st.touched = true;
        st.dmabufs += 1;
        Ok(window)
    }

    /// Called by a dma-buf export when it stops holding the memory (no importer maps it and no
    /// CPU mapping of it is left), with the BAR1 run [`Self::hold_for_dmabuf`] gave it: unmaps
    /// that, then returns the memory if the allocation was released and nothing else holds it.
    pub(crate) fn dmabuf_gone(&self, window: Option<(u64, usize)>) {
        self.release_window(window);
        {
            let mut st = self.state.lock();
            st.dmabufs = st.dmabufs.saturating_sub(1);
            if self
                .pin_pieces(self.piece_range(0, self.span.len()), false)
                .is_err()
            {
                pr_err!(
                    "dma-buf hold of VA {:#x} was not pinned\n",
                    self.span.start()
                );
            }
        }
        self.give_back_if_unused();
    }

    /// Maps `n` pages of the allocation from byte `off`, in order, at a new BAR1 run and
    /// returns it (BAR1 offset, pages). `pages` has room for `n`, allocated before the caller
    /// took the allocation's lock, which it holds (no piece moves meanwhile). Nothing stays
    /// mapped on failure ([`Bar1Space::map`]).
    pub(super) fn map_bar1_run(
        &self,
        bar1: &Bar1Space,
        off: u64,
        n: usize,
        pages: &mut KVVec<u64>,
    ) -> Result<(u64, usize)> {
        self.list_fb_pages(off, n, pages)?;
        Ok((bar1.map(pages, false)?, n))
    }

    /// Unmaps a BAR1 run that mapped some of the allocation's pages; if BAR1 may still reach
    /// them, the memory never goes back ([`Backing::release_run`]).
    fn release_window(&self, window: Option<(u64, usize)>) {
        if let Some(run) = window {
            self.backing.release_run(run);
        }
    }

    /// Something may still reach the memory (BAR1 could not unmap it): it never goes back to
    /// the memory manager, whoever lets go of it last.
    pub(crate) fn keep_memory(&self) {
        self.backing.stuck.store(true, Relaxed);
    }

    /// Adds (or drops) a memory-manager pin on each of the pieces at `r`; all or nothing when
    /// adding. A pinned chunk is never moved by compaction.
    pub(crate) fn pin_pieces(&self, r: Range<usize>, pin: bool) -> Result {
        let pieces = self.pieces_at(r);
        let mut pmm = self.backing.mem.pmm.lock();
        for (done, p) in pieces.iter().enumerate() {
            let r = if pin {
                pmm.p2p_pin(p.id())
            } else {
                pmm.p2p_unpin(p.id())
            };
            if let Err(e) = r {
                if pin {
                    for q in pieces.iter().take(done) {
                        let _ = pmm.p2p_unpin(q.id());
                    }
                }
                return Err(fb::errno(e));
            }
        }
        Ok(())
    }

    /// Returns the memory (once) if the allocation is released, unpinned and not held by a
    /// dma-buf.
    fn give_back_if_unused(&self) {
        let unused = self.state.lock().unused();
        if let Some(touched) = unused {
            self.backing.give_back(touched);
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Allocation {
    fn drop(self: Pin<&mut Self>) {
        // The memory went back at release (or goes back with `backing`, for an allocation that
        // never became reachable). The VAs are reused only now that no pin, dma-buf or live
        // CPU mapping refers to the allocation.
        if va::free(self.span.start()).is_err() {
            pr_err!("VA {:#x} was not allocated\n", self.span.start());
        }
    }
}

/// Releases every allocation on the GPU of `mem` (it is going away), in time proportional to
/// their number: each is taken out of the GPU's list, then out of its owner's index, and
/// released, one at a time and without allocating. Their user mappings are gone when this
/// returns; their pins are left to [`crate::p2p::pin::drain_gpu`], so that no free callback
/// runs here; the block layer's hold on struct pages is waited for until `pages_until` in all.
/// Releases that others started before (a FREE, an owner's exit or last close) are counted in
/// the GPU's memory ([`FbMemory::begin_release`]) and waited for by the caller
/// ([`FbMemory::wait_idle`]), within its bound. Once the list is empty no allocation joins it
/// any more ([`FbMemory::walked`]).
pub(crate) fn release_gpu(mem: &FbMemory, pages_until: Instant<Monotonic>) {
    loop {
        let next = {
            let mut allocs = mem.allocs.lock();
            let next = allocs.pop_front();
            if next.is_none() {
                mem.set_walked();
            }
            next
        };
        let Some(a) = next.map(ListArc::into_arc) else {
            break;
        };
        // Started before it leaves the index, as any release of an allocation taken out of it.
        let busy = mem.begin_release();
        a.index.take_out(&a);
        a.release_removed(busy, pages_until);
    }
}
