// SPDX-License-Identifier: GPL-2.0

//! GPU VA spaces: per-process GPU memory allocations, the "cudaMalloc side" of nvrs.
//!
//! Each process that opens `/dev/nvrs` gets one [`VaSpace`], bound to its address space (mm) as
//! UVM's are: shared by all the files that process opens, usable only from that process, and
//! torn down when the address space goes away (the process exits or execs; the allocations are
//! then released by a work item, not in the MMU notifier) or the last of its files is closed,
//! whichever comes first. A child that inherits the file does not keep the
//! parent's memory alive and cannot use it (`-EPERM`).
//!
//! An [`Allocation`] is GPU memory on one GPU at a contiguous range of GPU VAs; physically it is
//! a list of memory-manager chunks (2 MiB roots for the bulk, 64 KiB chunks for the tail) or,
//! on request, one physically contiguous run of roots. `nvidia_p2p_get_pages()` finds
//! allocations by VA in the calling process's VA space ([`lookup_current`]) and pins them
//! ([`crate::p2p`]); `mmap` maps them for the CPU ([`cpu_map`]).
//!
//! # Isolation
//!
//! Memory never reaches anyone but its owner:
//!
//! * **Scrubbed.** Every chunk is zero when it is handed out: the memory manager tracks which
//!   free chunks are known to be zero, allocation zeroes the others before the allocation
//!   becomes reachable, and release zeroes memory that a CPU mapping or a pin could have
//!   written before it returns to the manager (memory nobody could reach is still zero).
//! * **No mapping outlives its allocation.** CPU mappings are filled on demand by the fault
//!   handler under the allocation's lock, after checking that it is live; release marks it
//!   released under that lock and then removes every user mapping of it, so a stale mapping
//!   faults (`SIGBUS`) and can never reach memory handed to someone else, however `mmap`, fault
//!   and release interleave.
//! * **No pin outlives the memory.** Release revokes every non-persistent pin (its free callback
//!   runs, then its DMA mappings are torn down) before the memory returns. Persistent pins and
//!   exported dma-bufs ([`crate::dmabuf`]) keep their chunks allocated until they are put or
//!   released.
//!
//! # Lifetime
//!
//! An allocation is *released* by `NVRS_IOCTL_FREE`, by its VA space's teardown, or by its GPU
//! going away. Release makes it unreachable (no new pins or mappings), removes its CPU mappings,
//! revokes its non-persistent pins and returns its memory once no pin holds it. The
//! [`Allocation`] object itself lives on while a pin or a dma-buf refers to it (both hold a
//! reference), which is what makes their stale accesses harmless; its VAs are reused only once
//! it is gone, and then as late as possible ([`range`]). A CPU mapping does not hold it: it
//! holds the allocation's [`cpu_map::CpuHandle`], which release empties, so a mapping left
//! behind after a free keeps no VAs reserved.
//!
//! # Locking
//!
//! The lock order of all of nvrs is written down in [`crate::locking`].

pub(crate) mod compact;
pub(crate) mod cpu_map;
pub(crate) mod layout;
pub(crate) mod range;

use core::{ffi::c_void, ops::Range};

use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        CondVar,
        Mutex, //
    },
    task::Pid,
    time::{
        Instant,
        Monotonic, //
    },
    workqueue::{
        Work,
        WorkItem, //
    },
};

use crate::{
    fb::{
        self,
        FbMemory, //
    },
    gpu::GpuInfo,
    helpers::{
        self,
        MappedInode,
        MmWatch, //
    },
    hwref::{
        P2P_PAGE_SIZE,
        ROOT_CHUNK_SIZE, //
    },
    pmm::{
        compact::{
            sort_by_key,
            Goal, //
        },
        AllocFlags,
        ChunkId,
        FreeOutcome,
        MemType,
        Zero, //
    },
};

use cpu_map::CpuHandle;
use layout::Layout;
use range::{
    RangeError,
    Span,
    SpanList,
    VaAllocator, //
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

    fn zeroed(&self) -> bool {
        self.zeroed.load(Relaxed)
    }

    /// Points the piece at its new chunk (compaction, under the allocation's lock).
    fn relocate(&self, id: ChunkId, fb_offset: u64) {
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
}

impl Drop for Backing {
    fn drop(&mut self) {
        // Only a backing that never became reachable gets here unreturned; scrub anyway.
        self.give_back(true);
    }
}

impl Backing {
    /// Bytes of memory in piece `i`: for a contiguous run, all of its roots, although the VAs
    /// cover only the requested size (the rest of the last root is scrubbed and returned too).
    fn piece_len(&self, i: usize) -> u64 {
        match u64::try_from(i) {
            Ok(_) if self.contiguous => self.layout.bulk_len.next_multiple_of(ROOT_CHUNK_SIZE),
            Ok(i) if i < self.layout.bulk => self.layout.bulk_len,
            _ => P2P_PAGE_SIZE,
        }
    }

    /// Zeroes every piece not known to be zero. Called before the memory becomes reachable, with
    /// no lock held.
    fn scrub(&mut self) -> Result {
        let base = self.mem.aperture_phys;
        for (i, p) in self.pieces.iter().enumerate() {
            let len = self.piece_len(i);
            if !p.zeroed() {
                // SAFETY: The piece was just allocated and is not reachable by anyone yet.
                unsafe { helpers::zero_mmio(base + p.fb_offset(), len) }?;
                p.zeroed.store(true, Relaxed);
            }
        }
        Ok(())
    }

    /// Returns the chunks to the memory manager. Memory that a mapping or a pin could have
    /// written (`touched`) is zeroed first, outside every lock; memory nobody could reach is
    /// still zero. Called once, after every mapping and pin of the memory ended.
    fn give_back(&self, touched: bool) {
        if self.returned.xchg(true, Relaxed) {
            return;
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
                match unsafe { helpers::zero_mmio(self.mem.aperture_phys + p.fb_offset(), len) } {
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

/// What an allocation's release does with the pins on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pins {
    /// Revokes them, one at a time (free callbacks in the releasing thread).
    Revoke,
    /// Leaves them to GPU removal ([`Allocation::release_removed`]).
    LeaveToRemoval,
}

/// Mutable state of an allocation.
pub(crate) struct AllocState {
    /// Released: unreachable, no new pins or mappings.
    pub(crate) released: bool,
    /// Live pins (persistent and not), counted; the pins themselves are in the pin registry
    /// ([`crate::p2p::pin::PINS`]). Each holds the allocation.
    pub(crate) pins: usize,
    /// dma-bufs exported from the allocation that still hold its memory
    /// ([`crate::dmabuf`]); like persistent pins, they keep it past release.
    pub(crate) dmabufs: usize,
    /// The device inodes the allocation is mapped through for the CPU (usually one; a second
    /// device node is another inode), to remove the user mappings when it is released.
    pub(crate) mapped: KVec<MappedInode>,
    /// A CPU mapping or a pin could have written the memory: it is scrubbed when given back.
    pub(crate) touched: bool,
}

impl AllocState {
    /// Whether the memory is released and nothing holds it any more: then `Some`, with whether
    /// it must be scrubbed ([`AllocState::touched`]) as it goes back.
    fn unused(&self) -> Option<bool> {
        (self.released && self.pins == 0 && self.dmabufs == 0).then_some(self.touched)
    }
}

/// GPU memory at a range of GPU VAs.
#[pin_data(PinnedDrop)]
pub(crate) struct Allocation {
    /// The VAs.
    pub(crate) span: Span,
    /// Owning process, for display.
    pub(crate) tgid: Pid,
    /// The GPU.
    pub(crate) gpu: Arc<GpuInfo>,
    /// Physical backing.
    pub(crate) backing: Backing,
    /// Lifetime, pins and mappings.
    #[pin]
    pub(crate) state: Mutex<AllocState>,
    /// Pieces moved by compaction so far (bumped under `state`): a reader that looked at the
    /// pieces without the lock checks it did not change before it relies on what it read.
    pub(crate) moves: Atomic<u64>,
    /// What its CPU mappings hold ([`cpu_map`]); detached at release.
    pub(crate) cpu: Arc<CpuHandle>,
}

impl Allocation {
    /// The framebuffer offset backing the allocation-relative offset `off`.
    pub(crate) fn fb_offset_at(&self, off: u64) -> Option<u64> {
        let (i, within) = self.backing.layout.locate(off)?;
        let p = self.backing.pieces.get(usize::try_from(i).ok()?)?;
        Some(p.fb_offset() + within)
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

    /// Releases the allocation: removes its user CPU mappings (later accesses fault), revokes
    /// its non-persistent pins (their callbacks run here, with no nvrs lock held), and returns
    /// the memory unless a persistent pin holds it. Never allocates.
    pub(crate) fn release(&self) {
        // GPU removal waits for a release in flight, callbacks included (unless it is the
        // removal releasing).
        self.release_in(self.backing.mem.enter().ok(), Pins::Revoke);
    }

    /// [`Allocation::release`] of an allocation taken out of its VA space, whose release was
    /// counted then ([`FbMemory::detach`]): GPU removal waits for it even if it got here after
    /// the GPU started going away.
    fn release_detached(&self) {
        self.release_in(Some(self.backing.mem.adopt()), Pins::Revoke);
    }

    /// [`Allocation::release_detached`] by GPU removal: the allocation's pins are left to
    /// [`crate::p2p::pin::drain_gpu`], which revokes them in work items, so that no free callback
    /// runs in the unbinding thread. The memory goes back when the last of them ends.
    fn release_removed(&self) {
        self.release_in(Some(self.backing.mem.adopt()), Pins::LeaveToRemoval);
    }

    fn release_in(&self, _busy: Option<fb::InFlight<'_>>, pins: Pins) {
        let mapped = {
            let mut st = self.state.lock();
            if st.released {
                return;
            }
            // From here `mmap`, the fault handler and pinning refuse the allocation, so the zap
            // below removes every mapping there will ever be.
            st.released = true;
            for inode in st.mapped.iter() {
                inode.zap(self.span.start(), self.span.len());
            }
            core::mem::take(&mut st.mapped)
        };
        // The inode references go now, not with the last pin or VMA.
        drop(mapped);
        // VMAs left behind keep only the handle: the allocation, its VAs and its pieces go once
        // no pin or dma-buf holds it.
        self.cpu.detach();
        // One pin at a time, without allocating: a revoked pin leaves the registry when it
        // ends, and one being put concurrently is waited for by `revoke`.
        while pins == Pins::Revoke && self.state.lock().pins != 0 {
            match crate::p2p::pin::next_revocable(self) {
                Some(pin) => pin.revoke(),
                None => break,
            }
        }
        self.give_back_if_unused();
    }

    /// Called by a pin when it ends: forgets it, and returns the memory if the allocation was
    /// released and this was its last pin.
    pub(crate) fn pin_gone(&self) {
        let unused = {
            let mut st = self.state.lock();
            st.pins = st.pins.saturating_sub(1);
            st.unused()
        };
        if let Some(touched) = unused {
            self.backing.give_back(touched);
        }
    }

    /// Holds the memory for a dma-buf export: counted, and pinned in the memory manager so that
    /// compaction leaves every piece where importers map it. `-ENOENT` once released.
    pub(crate) fn hold_for_dmabuf(&self) -> Result {
        let mut st = self.state.lock();
        if st.released || self.backing.mem.is_gone() {
            return Err(ENOENT);
        }
        self.pin_pieces(true)?;
        // Importers and CPU mappings of the dma-buf may write it.
        st.touched = true;
        st.dmabufs += 1;
        Ok(())
    }

    /// Called by a dma-buf export when it stops holding the memory: returns the memory if the
    /// allocation was released and nothing else holds it.
    pub(crate) fn dmabuf_gone(&self) {
        {
            let mut st = self.state.lock();
            st.dmabufs = st.dmabufs.saturating_sub(1);
            if self.pin_pieces(false).is_err() {
                pr_err!(
                    "dma-buf hold of VA {:#x} was not pinned\n",
                    self.span.start()
                );
            }
        }
        self.give_back_if_unused();
    }

    /// Adds (or drops) a memory-manager pin on every piece; all or nothing when adding.
    fn pin_pieces(&self, pin: bool) -> Result {
        let mut pmm = self.backing.mem.pmm.lock();
        for (done, p) in self.backing.pieces.iter().enumerate() {
            let r = if pin {
                pmm.p2p_pin(p.id())
            } else {
                pmm.p2p_unpin(p.id())
            };
            if let Err(e) = r {
                if pin {
                    for q in self.backing.pieces.iter().take(done) {
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
        if VA.lock().free(self.span.start()).is_err() {
            pr_err!("VA {:#x} was not allocated\n", self.span.start());
        }
    }
}

/// Allocates `size` bytes on `mem`: 2 MiB chunks for the bulk and 64 KiB chunks for the rest,
/// or, with `contiguous`, one run of adjacent roots. The chunks are not yet scrubbed.
fn alloc_backing(mem: &Arc<FbMemory>, size: u64, contiguous: bool) -> Result<Backing> {
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
        let addr = |id: &ChunkId| pmm.addr(*id).unwrap_or(u64::MAX);
        sort_by_key(bulk, addr);
        sort_by_key(tail, addr);
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

/// Mutable state of a VA space.
pub(crate) struct VaInner {
    /// Live allocations by first VA. Nodes are allocated before the lock is taken (it is on
    /// the `nvidia_p2p_get_pages` path).
    allocs: RBTree<u64, Arc<Allocation>>,
    /// Open files of the process.
    opens: usize,
    /// The watch on the owner's address space (taken out and stopped at the last close).
    watch: Option<MmWatch>,
    /// The owner's address space is gone: no new allocations.
    dead: bool,
    /// Allocations the exit work ([`VaSpace::release_all`]) has taken out and not yet released;
    /// the last close waits for them ([`VaSpace::close`]).
    releasing: u32,
}

impl VaInner {
    /// Whether the caller runs in the address space that owns this VA space (and it is alive).
    fn is_current(&self) -> bool {
        !self.dead && self.watch.as_ref().is_some_and(MmWatch::is_current)
    }
}

/// The GPU VA space of one process.
#[pin_data]
pub(crate) struct VaSpace {
    /// The owning process, named to each reader in its own PID namespace
    /// (`NVRS_IOCTL_PROCESSES`).
    owner: helpers::Process,
    #[pin]
    inner: Mutex<VaInner>,
    /// Releases the allocations once the owner's address space is gone ([`VaSpace::owner_gone`]
    /// queues it on nvrs's work queue; GPU removal flushes it, module exit drains it).
    #[pin]
    exit_work: Work<VaSpace>,
    /// Signalled when [`VaInner::releasing`] drops to zero.
    #[pin]
    released: CondVar,
}

kernel::impl_has_work! {
    impl HasWork<VaSpace> for VaSpace { self.exit_work }
}

/// The teardown after the owner's exit, in a worker: free callbacks and scrubbing run there,
/// not in the MMU notifier's SRCU read section.
impl WorkItem for VaSpace {
    type Pointer = Arc<VaSpace>;

    fn run(this: Arc<VaSpace>) {
        this.release_all();
    }
}

/// The live VA ranges, for the [`VaAllocator`].
impl SpanList for KVVec<Span> {
    fn len(&self) -> usize {
        KVVec::len(self)
    }

    fn get(&self, i: usize) -> Option<Span> {
        <[Span]>::get(self, i).copied()
    }

    fn insert(&mut self, i: usize, s: Span) -> Result<(), RangeError> {
        self.insert_within_capacity(i, s).or_else(|_| {
            self.reserve(1, GFP_KERNEL)
                .map_err(|_| RangeError::NoMemory)?;
            self.insert_within_capacity(i, s)
                .map_err(|_| RangeError::NoMemory)
        })
    }

    fn remove(&mut self, i: usize) -> Option<Span> {
        KVVec::remove(self, i).ok()
    }
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VASPACES: Mutex<KVec<Arc<VaSpace>>> = KVec::new();
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VA: Mutex<VaAllocator<KVVec<Span>>> =
        VaAllocator::new(KVVec::new());
}

/// Frees the VA-space registry's and the VA allocator's memory at module exit (every file is
/// closed and every allocation gone by then).
pub(crate) fn fini_registry() {
    drop(core::mem::take(&mut *VASPACES.lock()));
    let va = core::mem::replace(&mut *VA.lock(), VaAllocator::new(KVVec::new()));
    drop(va);
}

/// Initialises the VA-space registry and the VA allocator, whose space is shrunk to
/// `va_space_size` bytes if non-zero (the `va_space_mib` parameter, for tests). Called once, from
/// module init.
pub(crate) fn init_registry(va_space_size: u64) {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { VASPACES.init() };
    // SAFETY: As above.
    unsafe { VA.init() };
    VA.lock().set_size(va_space_size);
}

/// Renders the VA allocator's state for debugfs `p2p`.
pub(crate) fn render_va(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let va = VA.lock();
    writeln!(f, "va_ranges: {} wraps {}", va.live(), va.wraps())
}

/// Called by the MMU notifier when the owner's address space is torn down (exit or exec).
///
/// # Safety
///
/// `owner` must be the [`VaSpace`] that registered the watch; it stays valid while the watch
/// exists ([`VaSpace::close`] stops the watch before it can go away).
#[no_mangle]
unsafe extern "C" fn nvrs_va_space_exit(owner: *mut c_void) {
    // SAFETY: `owner` is `Arc::as_ptr` of the VA space (`VaSpace::open`), whose reference in the
    // registry or in the opener is not dropped before `close` has stopped the watch, which waits
    // for this call (function safety requirement).
    let vs = unsafe { ArcBorrow::<VaSpace>::from_raw(owner.cast()) };
    vs.owner_gone();
}
crate::helpers::same_signature!(nvrs_va_space_exit);

impl VaSpace {
    /// The calling process's VA space, created on its first open.
    pub(crate) fn open() -> Result<Arc<Self>> {
        if let Some(vs) = Self::current() {
            let mut inner = vs.inner.lock();
            if !inner.dead {
                inner.opens += 1;
                drop(inner);
                return Ok(vs);
            }
        }
        let vs = Arc::pin_init(
            try_pin_init!(Self {
                owner: helpers::Process::current(),
                inner <- new_mutex!(VaInner {
                    allocs: RBTree::new(),
                    opens: 1,
                    watch: None,
                    dead: false,
                    releasing: 0,
                }, "VaSpace::inner"),
                exit_work <- kernel::new_work!("VaSpace::exit_work"),
                released <- kernel::new_condvar!("VaSpace::released"),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `vs` outlives the watch: `close` stops it before the last reference can go.
        let watch = unsafe { MmWatch::current(Arc::as_ptr(&vs).cast()) }?;
        vs.inner.lock().watch = Some(watch);
        // `VASPACES` is taken by `nvidia_p2p_get_pages`: no allocation under it.
        let mut all = match crate::room::lock_with_room(|| VASPACES.lock(), |all| &mut **all) {
            Ok(all) => all,
            Err(e) => {
                vs.close();
                return Err(e);
            }
        };
        // Another thread of the process may have raced us: use its VA space instead.
        if let Some(other) = all.iter().find(|v| v.is_current()).cloned() {
            let mut inner = other.inner.lock();
            if !inner.dead {
                inner.opens += 1;
                drop(inner);
                drop(all);
                vs.close();
                return Ok(other);
            }
        }
        // Room was made above.
        let _ = all.push_within_capacity(vs.clone());
        Ok(vs)
    }

    /// The live VA space of the calling process, if it has one.
    fn current() -> Option<Arc<Self>> {
        VASPACES.lock().iter().find(|v| v.is_current()).cloned()
    }

    /// Whether the caller runs in the address space that owns this VA space (and it is alive).
    pub(crate) fn is_current(&self) -> bool {
        self.inner.lock().is_current()
    }

    /// The owner's address space went away (the MMU notifier's `release`, inside its SRCU read
    /// section): the VA space dies at once, later calls through the owner's files fail
    /// (`-EPERM`), and the allocations become unreachable (they are found only through a live
    /// VA space). Releasing them (free callbacks, scrubbing) is left to [`VaSpace::exit_work`];
    /// until it runs, GPU removal or the last close may release them instead.
    fn owner_gone(self: ArcBorrow<'_, Self>) {
        self.inner.lock().dead = true;
        let queued = match helpers::wq() {
            // Queued once: `owner_gone` runs once per address space.
            Some(q) => q.enqueue(Arc::from(self)).is_ok(),
            None => false,
        };
        if !queued {
            // Cannot happen (the queue exists while `/dev/nvrs` does); release here rather than
            // never.
            self.release_all();
        }
    }

    /// Releases the allocations the VA space still has, one at a time (each is taken out under
    /// the lock and released without it).
    fn release_all(&self) {
        loop {
            let node = {
                let mut inner = self.inner.lock();
                // Counted before it leaves the VA space ([`FbMemory::detach`]): GPU removal
                // cannot find it any more.
                let va = inner.allocs.iter().next().map(|(va, a)| {
                    a.backing.mem.detach();
                    *va
                });
                let node = va.and_then(|va| inner.allocs.remove_node(&va));
                if node.is_some() {
                    inner.releasing = inner.releasing.saturating_add(1);
                }
                node
            };
            // The node is freed here, outside the lock.
            let Some(a) = node.map(|n| n.to_key_value().1) else {
                break;
            };
            crate::testhook::delay(crate::testhook::Point::ExitRelease);
            a.release_detached();
            let mut inner = self.inner.lock();
            inner.releasing = inner.releasing.saturating_sub(1);
            if inner.releasing == 0 {
                self.released.notify_all();
            }
        }
    }

    /// Waits until the exit work has no allocation in flight, for at most
    /// [`fb::REMOVAL_WAIT`]: the process's memory is back when its last file is closed (at
    /// exit, before its parent sees it end), as when the release ran in the exiting thread. A
    /// release held up longer (a consumer's free callback that does not return) is left to
    /// finish on its own, with one dmesg line.
    fn wait_released(&self) {
        let since: Instant<Monotonic> = Instant::now();
        let mut inner = self.inner.lock();
        while inner.releasing != 0 {
            if since.elapsed() >= fb::REMOVAL_WAIT {
                pr_warn!(
                    "process {}: its memory's release after exit still runs after {} ms; the memory comes back when it ends\n",
                    self.owner.id_for_current().unwrap_or(0),
                    fb::REMOVAL_WAIT.as_millis()
                );
                return;
            }
            inner = fb::wait_slice(&self.released, &self.inner, inner);
        }
    }

    /// Drops one open file; the last one tears the VA space down, releasing every allocation.
    pub(crate) fn close(self: &Arc<Self>) {
        let (doomed, watch) = {
            let mut all = VASPACES.lock();
            let mut inner = self.inner.lock();
            inner.opens = inner.opens.saturating_sub(1);
            if inner.opens != 0 {
                return;
            }
            all.retain(|v| !Arc::ptr_eq(v, self));
            inner.dead = true;
            detach_all(&inner.allocs);
            (core::mem::take(&mut inner.allocs), inner.watch.take())
        };
        // Stopping the watch waits for a running `owner_gone`; none can start afterwards.
        drop(watch);
        for a in doomed.values() {
            a.release_detached();
        }
        self.wait_released();
    }

    /// Allocates `size` bytes on `gpu`, zeroed.
    pub(crate) fn alloc(&self, gpu: Arc<GpuInfo>, size: u64, contiguous: bool) -> Result<Span> {
        if size == 0 || size % P2P_PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let mem = gpu.mem.clone().ok_or(ENODEV)?;
        // More than the GPU has can never succeed; refusing it here also keeps absurd sizes
        // away from the metadata allocations below.
        if size > mem.total_bytes() {
            return Err(ENOMEM);
        }
        mem.blocked()?;
        // GPU removal waits until this allocation is in its VA space (or given back).
        let _busy = mem.enter()?;
        let mut backing = match alloc_backing(&mem, size, contiguous) {
            // Enough bytes are free, in the wrong places: compact, then try once more.
            Err(e) if e == ENOMEM && crate::compact_on_alloc() && mem.free_bytes() >= size => {
                let roots = u32::try_from(size.div_ceil(ROOT_CHUNK_SIZE))?;
                let goal = if contiguous {
                    Goal::Contiguous(roots)
                } else {
                    Goal::Roots(roots)
                };
                compact::compact(&mem, goal).map_err(|_| ENOMEM)?;
                alloc_backing(&mem, size, contiguous)?
            }
            r => r?,
        };
        // Scrub before the memory is reachable, with no lock held (this may be GiBs). On any
        // failure below, dropping `backing` returns the chunks.
        backing.scrub()?;
        let span = match VA.lock().alloc(size) {
            Ok(s) => s,
            Err(e) => {
                return Err(match e {
                    RangeError::NoMemory | RangeError::Exhausted => ENOMEM,
                    RangeError::Invalid => EINVAL,
                });
            }
        };
        let reserved =
            RBTreeNodeReservation::new(GFP_KERNEL).and_then(|node| Ok((node, CpuHandle::new()?)));
        let (node, cpu) = match reserved {
            Ok(r) => r,
            Err(e) => {
                let _ = VA.lock().free(span.start());
                return Err(e);
            }
        };
        // On failure the initialised fields are dropped: `backing` returns the chunks; the VAs
        // are freed below.
        let a = Arc::pin_init(
            try_pin_init!(Allocation {
                span,
                tgid: helpers::current_tgid(),
                gpu,
                backing,
                state <- new_mutex!(AllocState {
                    released: false,
                    pins: 0,
                    dmabufs: 0,
                    mapped: KVec::new(),
                    touched: false,
                }, "Allocation::state"),
                moves: Atomic::new(0),
                cpu,
            }),
            GFP_KERNEL,
        );
        let a = match a {
            Ok(a) => a,
            Err(e) => {
                let _ = VA.lock().free(span.start());
                return Err(e);
            }
        };
        // Every path below releases the allocation or makes it reachable (and so released
        // later), which detaches it again.
        a.cpu.attach(a.clone());
        let mut inner = self.inner.lock();
        // Checked under `inner`, which owner teardown takes after setting it.
        if inner.dead {
            drop(inner);
            a.release();
            return Err(EPERM);
        }
        // VAs are unique among live allocations, so nothing is replaced.
        inner.allocs.insert(node.into_node(span.start(), a));
        Ok(span)
    }

    /// Frees the allocation starting at `va`: revokes its pins and removes its CPU mappings; its
    /// memory goes back unless a persistent pin holds it.
    pub(crate) fn free(&self, va: u64) -> Result {
        let node = {
            let mut inner = self.inner.lock();
            // Counted before it leaves the VA space: GPU removal cannot find it any more.
            inner.allocs.get(&va).ok_or(ENOENT)?.backing.mem.detach();
            // Found above, under the same lock.
            inner.allocs.remove_node(&va).ok_or(ENOENT)?
        };
        let (_, a) = node.to_key_value();
        crate::testhook::delay(crate::testhook::Point::FreeRelease);
        a.release_detached();
        Ok(())
    }

    /// Calls `f` on the live allocations starting at or above `va`, in VA order, under the VA
    /// space's lock, until it returns false. `f` must not allocate or sleep long.
    pub(crate) fn for_each_from(&self, va: u64, mut f: impl FnMut(&Arc<Allocation>) -> bool) {
        let inner = self.inner.lock();
        for (_, a) in inner.allocs.iter().skip_while(|(k, _)| **k < va) {
            if !f(a) {
                break;
            }
        }
    }

    /// The allocation holding `[va, va + len)`, if one does.
    pub(crate) fn find(&self, want: &Span) -> Option<Arc<Allocation>> {
        Self::find_in(&self.inner.lock(), want)
    }

    /// [`VaSpace::find`] with the lock held.
    fn find_in(inner: &VaInner, want: &Span) -> Option<Arc<Allocation>> {
        // The allocation starting at or below `want`: the first at or above it, or the one
        // before.
        let below = match inner.allocs.cursor_lower_bound(&want.start()) {
            Some(c) if *c.current().0 == want.start() => Some(c.current().1.clone()),
            Some(c) => c.peek_prev().map(|(_, a)| a.clone()),
            None => inner.allocs.cursor_back().map(|c| c.current().1.clone()),
        };
        below.filter(|a| a.span.contains(want))
    }
}

/// One process's live allocations on one GPU (`NVRS_IOCTL_PROCESSES`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Usage {
    /// The process.
    pub(crate) pid: Pid,
    /// The GPU's index.
    pub(crate) gpu: u32,
    /// Bytes allocated.
    pub(crate) bytes: u64,
}

/// Fills `out` with the memory each live VA space holds on each GPU (GPUs with none left out);
/// returns the entries written. Processes are named by their id in the caller's PID namespace,
/// and those the caller cannot see there are left out (a container sees its own processes
/// only). Nothing is allocated under the locks.
pub(crate) fn usage(out: &mut [Usage]) -> usize {
    let mut n = 0;
    let all = VASPACES.lock();
    for vs in all.iter() {
        let Some(pid) = vs.owner.id_for_current() else {
            continue;
        };
        let inner = vs.inner.lock();
        let start = n;
        for (_, a) in inner.allocs.iter() {
            let gpu = a.gpu.index;
            let bytes = a.span.len();
            if let Some(u) = out
                .get_mut(start..n)
                .and_then(|s| s.iter_mut().find(|u| u.gpu == gpu))
            {
                u.bytes += bytes;
            } else if let Some(u) = out.get_mut(n) {
                *u = Usage { pid, gpu, bytes };
                n += 1;
            }
        }
    }
    n
}

/// The allocation of the calling process that holds `want`.
pub(crate) fn lookup_current(want: &Span) -> Option<Arc<Allocation>> {
    // One hold of each lock: the caller's VA space is searched where it is found, and the
    // search ends there, whether or not it holds `want` (as `VaSpace::current` then `find`).
    VASPACES
        .lock()
        .iter()
        .find_map(|vs| {
            let inner = vs.inner.lock();
            inner.is_current().then(|| VaSpace::find_in(&inner, want))
        })
        .flatten()
}

/// Counts the releases of every allocation of a VA space that is about to be emptied
/// ([`FbMemory::detach`]), under its lock.
fn detach_all(allocs: &RBTree<u64, Arc<Allocation>>) {
    for a in allocs.values() {
        a.backing.mem.detach();
    }
}

/// Releases every allocation on `gpu` in every VA space (the GPU is going away). One at a time,
/// without allocating: each is taken out of its VA space under the locks and released outside
/// them. Their user mappings are gone when this returns; their pins are left to
/// [`crate::p2p::pin::drain_gpu`], so that no free callback runs here. Releases that others took
/// out of a VA space before (a FREE, an owner's exit in [`VaSpace::exit_work`]) are counted in
/// the GPU's memory ([`FbMemory::detach`]) and waited for by the caller
/// ([`FbMemory::wait_idle`]), within its bound.
pub(crate) fn release_gpu(gpu: &GpuInfo) {
    loop {
        let victim = {
            let all = VASPACES.lock();
            all.iter().find_map(|vs| {
                let mut inner = vs.inner.lock();
                let (va, a) = inner
                    .allocs
                    .iter()
                    .find(|(_, a)| core::ptr::eq(&*a.gpu, gpu))?;
                a.backing.mem.detach();
                let va = *va;
                inner.allocs.remove_node(&va)
            })
        };
        // The node is freed here, outside the locks.
        match victim.map(|n| n.to_key_value().1) {
            Some(a) => a.release_removed(),
            None => break,
        }
    }
}
