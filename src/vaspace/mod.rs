// SPDX-License-Identifier: GPL-2.0

//! GPU VA spaces: per-process GPU memory allocations, the "cudaMalloc side" of nvrs.
//!
//! Each process (thread group) that opens `/dev/nvrs` gets one [`VaSpace`], shared by all its
//! open files and torn down when the last one closes. An [`Allocation`] is GPU memory on one
//! GPU at a contiguous range of GPU VAs; physically it is a list of memory-manager chunks
//! (2 MiB roots for the bulk, 64 KiB chunks for the tail) or, on request, one physically
//! contiguous run of roots.
//!
//! `nvidia_p2p_get_pages()` finds allocations by VA in the calling process's VA space
//! ([`lookup_current`]) and pins them ([`crate::p2p`]).
//!
//! # Lifetime and revocation
//!
//! An allocation is *released* by `NVRS_IOCTL_FREE`, by the VA space's teardown (process exit),
//! or by its GPU going away (unbind, hot-unplug, rmmod). Release first makes it unreachable
//! (no new pins), then revokes every non-persistent pin through its free callback, then returns
//! the chunks to the memory manager. Chunks held by persistent pins stay allocated until the
//! last such pin is put.
//!
//! # Locking
//!
//! Lock order: [`VASPACES`] → [`VaSpace::inner`] → [`Allocation::state`] → the P2P pin registry
//! → the memory manager. Free callbacks run with none of them held.

pub(crate) mod layout;
pub(crate) mod range;

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
    task::Pid,
};

use crate::{
    fb::{
        self,
        FbMemory, //
    },
    gpu::GpuInfo,
    hwref::{
        P2P_PAGE_SIZE,
        ROOT_CHUNK_SIZE, //
    },
    p2p::pin::P2pPin,
    pmm::{
        AllocFlags,
        ChunkId,
        FreeOutcome,
        MemType,
        Zero, //
    },
};

use crate::helpers::{
    MappedInode,
    ProcessRef, //
};
use layout::Layout;
use range::{
    Span,
    VaAllocator, //
};

/// One piece of an allocation's physical backing.
#[derive(Clone, Copy)]
pub(crate) struct Piece {
    /// The memory-manager chunk (for a contiguous run, its first root).
    pub(crate) id: ChunkId,
    /// Framebuffer offset of the piece (its length follows from the [`Layout`]).
    pub(crate) fb_offset: u64,
    /// The memory manager knew the piece to be zero when it was allocated.
    pub(crate) zeroed: bool,
}

/// The physical backing of an allocation: chunks of one GPU's memory manager, in VA order.
///
/// Dropping it returns the chunks. It lives as long as its [`Allocation`], which the VA space
/// and every pin keep alive, so memory held by a persistent pin outlives its owner's free.
pub(crate) struct Backing {
    /// The GPU's memory manager.
    pub(crate) mem: Arc<FbMemory>,
    /// The chunks.
    pub(crate) pieces: KVVec<Piece>,
    /// Their shape.
    pub(crate) layout: Layout,
}

impl Drop for Backing {
    fn drop(&mut self) {
        let mut pmm = self.mem.pmm.lock();
        for p in self.pieces.iter() {
            match pmm.free(p.id, Zero::Dirty) {
                Ok(FreeOutcome::Freed) => {}
                // Cannot happen: every pin holds the allocation, hence this backing, alive.
                Ok(FreeOutcome::Revoke { pins }) => {
                    pr_err!(
                        "chunk at {:#x} freed with {pins} P2P pins; leaked\n",
                        p.fb_offset
                    )
                }
                Err(e) => pr_err!("freeing chunk at {:#x}: {e:?}\n", p.fb_offset),
            }
        }
    }
}

/// Mutable state of an allocation.
pub(crate) struct AllocState {
    /// Released: unreachable, no new pins.
    pub(crate) released: bool,
    /// Live pins (persistent and not). Each pin holds the allocation; the pin removes itself
    /// from here when it ends, which breaks the cycle.
    pub(crate) pins: KVec<Arc<P2pPin>>,
    /// The device inodes the allocation is mapped through for the CPU (usually one; a second
    /// device node is another inode), to remove the user mappings when it is released.
    pub(crate) mapped: KVec<MappedInode>,
}

/// GPU memory at a range of GPU VAs.
#[pin_data]
pub(crate) struct Allocation {
    /// The VAs.
    pub(crate) span: Span,
    /// Owning process.
    pub(crate) tgid: Pid,
    /// The GPU.
    pub(crate) gpu: Arc<GpuInfo>,
    /// Physical backing.
    pub(crate) backing: Backing,
    /// Lifetime and pins.
    #[pin]
    pub(crate) state: Mutex<AllocState>,
}

impl Allocation {
    /// The framebuffer offset backing the allocation-relative offset `off`.
    pub(crate) fn fb_offset_at(&self, off: u64) -> Option<u64> {
        let (i, within) = self.backing.layout.locate(off)?;
        let p = self.backing.pieces.get(usize::try_from(i).ok()?)?;
        Some(p.fb_offset + within)
    }

    /// The pieces that back `[off, off + len)` of the allocation.
    pub(crate) fn pieces_in(&self, off: u64, len: u64) -> &[Piece] {
        let r = self.backing.layout.pieces_in(off, len);
        let (Ok(s), Ok(e)) = (usize::try_from(r.start), usize::try_from(r.end)) else {
            return &[];
        };
        self.backing.pieces.get(s..e).unwrap_or(&[])
    }

    /// Releases the allocation: removes its user CPU mappings (later accesses fault), revokes
    /// non-persistent pins (their callbacks run here, with no nvrs lock held). The memory goes
    /// back when the last reference does: at once, or when the last persistent pin is put.
    pub(crate) fn release(&self) {
        let victims = {
            let mut st = self.state.lock();
            if st.released {
                return;
            }
            // From here `mmap` refuses the allocation, so the zap below catches every mapping.
            st.released = true;
            for inode in st.mapped.iter() {
                inode.zap(self.span.start(), self.span.len());
            }
            let mut v = KVec::new();
            for p in st.pins.iter().filter(|p| !p.persistent) {
                // On allocation failure the pin is revoked below, via `pins`, all the same.
                let _ = v.push(p.clone(), GFP_KERNEL);
            }
            v
        };
        for pin in victims.iter() {
            pin.revoke();
        }
        // Pins that could not be collected above (allocation failure) are revoked now.
        loop {
            let next = self
                .state
                .lock()
                .pins
                .iter()
                .find(|p| !p.persistent)
                .cloned();
            match next {
                Some(pin) => pin.revoke(),
                None => break,
            }
        }
    }

    /// Called by a pin when it ends: forgets it.
    pub(crate) fn pin_gone(&self, pin: &P2pPin) {
        self.state.lock().pins.retain(|p| !core::ptr::eq(&**p, pin));
    }
}

/// Allocates `size` bytes on `gpu`: 2 MiB chunks for the bulk and 64 KiB chunks for the rest,
/// or, with `contiguous`, one run of adjacent roots.
fn alloc_backing(mem: &Arc<FbMemory>, size: u64, contiguous: bool, zero: bool) -> Result<Backing> {
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
    };
    let mut pmm = mem.pmm.lock();
    if contiguous {
        let id = pmm
            .alloc_contiguous(size, MemType::User)
            .map_err(fb::errno)?;
        let piece = pmm
            .unpin_allocated(id)
            .and_then(|()| pmm.addr(id))
            .and_then(|fb_offset| {
                Ok(Piece {
                    id,
                    fb_offset,
                    zeroed: pmm.is_zeroed(id)?,
                })
            });
        return match piece {
            Ok(p) => {
                backing.pieces.push(p, GFP_KERNEL)?;
                drop(pmm);
                Ok(backing)
            }
            Err(e) => {
                let _ = pmm.free(id, Zero::Dirty);
                Err(fb::errno(e))
            }
        };
    }
    let big = size / ROOT_CHUNK_SIZE;
    let small = (size % ROOT_CHUNK_SIZE) / P2P_PAGE_SIZE;
    let flags = AllocFlags {
        prefer_zeroed: zero,
    };
    let mut ids = KVVec::new();
    ids.resize(
        usize::try_from(big + small)?,
        ChunkId::default(),
        GFP_KERNEL,
    )?;
    let (bulk, tail) = ids.split_at_mut(usize::try_from(big)?);
    pmm.alloc(ROOT_CHUNK_SIZE, MemType::User, flags, bulk)
        .map_err(fb::errno)?;
    if let Err(e) = pmm.alloc(P2P_PAGE_SIZE, MemType::User, flags, tail) {
        for id in bulk.iter() {
            let _ = pmm.free(*id, Zero::Dirty);
        }
        return Err(fb::errno(e));
    }
    for id in ids.iter() {
        let piece = pmm
            .unpin_allocated(*id)
            .and_then(|()| pmm.addr(*id))
            .and_then(|fb_offset| {
                Ok(Piece {
                    id: *id,
                    fb_offset,
                    zeroed: pmm.is_zeroed(*id)?,
                })
            });
        match piece.map(|p| backing.pieces.push_within_capacity(p)) {
            Ok(Ok(())) => {}
            _ => {
                for id in ids.iter().skip(backing.pieces.len()) {
                    let _ = pmm.free(*id, Zero::Dirty);
                }
                drop(pmm);
                // `backing` returns the chunks recorded so far.
                return Err(EIO);
            }
        }
    }
    drop(pmm);
    Ok(backing)
}

/// Mutable state of a VA space.
pub(crate) struct VaInner {
    /// Live allocations, sorted by VA (VAs only grow, so appending keeps the order).
    allocs: KVVec<Arc<Allocation>>,
    /// Open files of the process.
    opens: usize,
}

/// The GPU VA space of one process.
#[pin_data]
pub(crate) struct VaSpace {
    /// The owning process.
    process: ProcessRef,
    /// Its id, for display.
    pub(crate) tgid: Pid,
    #[pin]
    inner: Mutex<VaInner>,
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VASPACES: Mutex<KVec<Arc<VaSpace>>> = KVec::new();
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VA: Mutex<VaAllocator> = VaAllocator::new();
}

/// Frees the VA-space registry's memory at module exit (every file is closed by then).
pub(crate) fn fini_registry() {
    drop(core::mem::take(&mut *VASPACES.lock()));
}

/// Initialises the VA-space registry and the VA allocator. Called once, from module init.
pub(crate) fn init_registry() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { VASPACES.init() };
    // SAFETY: As above.
    unsafe { VA.init() };
}

fn current_tgid() -> Pid {
    crate::helpers::current_tgid()
}

impl VaSpace {
    /// The calling process's VA space, created on its first open.
    pub(crate) fn open() -> Result<Arc<Self>> {
        let tgid = current_tgid();
        let mut all = VASPACES.lock();
        if let Some(vs) = all.iter().find(|v| v.process.is_current()) {
            vs.inner.lock().opens += 1;
            return Ok(vs.clone());
        }
        let vs = Arc::pin_init(
            try_pin_init!(Self {
                process: ProcessRef::current(),
                tgid,
                inner <- new_mutex!(VaInner {
                    allocs: KVVec::new(),
                    opens: 1,
                }),
            }),
            GFP_KERNEL,
        )?;
        all.push(vs.clone(), GFP_KERNEL)?;
        Ok(vs)
    }

    /// Drops one open file; the last one tears the VA space down, releasing every allocation.
    pub(crate) fn close(self: &Arc<Self>) {
        let doomed = {
            let mut all = VASPACES.lock();
            let mut inner = self.inner.lock();
            inner.opens = inner.opens.saturating_sub(1);
            if inner.opens != 0 {
                return;
            }
            all.retain(|v| !Arc::ptr_eq(v, self));
            core::mem::take(&mut inner.allocs)
        };
        for a in doomed.iter() {
            a.release();
        }
    }

    /// Allocates `size` bytes on `gpu`.
    pub(crate) fn alloc(
        &self,
        gpu: Arc<GpuInfo>,
        size: u64,
        contiguous: bool,
        zero: bool,
    ) -> Result<Span> {
        if size == 0 || size % P2P_PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        let mem = gpu.mem.clone().ok_or(ENODEV)?;
        // More than the GPU has can never succeed; refusing it here also keeps absurd sizes
        // away from the metadata allocations below.
        if size > mem.total_bytes() {
            return Err(ENOMEM);
        }
        let mut inner = self.inner.lock();
        // Checked under `inner`, which `release_gpu` takes after setting it.
        if mem.is_gone() {
            return Err(ENODEV);
        }
        let backing = alloc_backing(&mem, size, contiguous, zero)?;
        let span = VA.lock().alloc(size).map_err(|_| ENOMEM)?;
        if zero {
            // `NVRS_ALLOC_ZERO` promises zero memory: clear what the manager does not know to be.
            let l = backing.layout;
            for (i, p) in backing.pieces.iter().enumerate() {
                if !p.zeroed {
                    let len = if u64::try_from(i)? < l.bulk {
                        l.bulk_len
                    } else {
                        P2P_PAGE_SIZE
                    };
                    crate::helpers::zero_mmio(mem.aperture_phys + p.fb_offset, len)?;
                }
            }
        }
        // On failure the initializer, and with it `backing`, is dropped: the chunks go back.
        let a = Arc::pin_init(
            try_pin_init!(Allocation {
                span,
                tgid: self.tgid,
                gpu,
                backing,
                state <- new_mutex!(AllocState { released: false, pins: KVec::new(), mapped: KVec::new() }),
            }),
            GFP_KERNEL,
        )?;
        if let Err(e) = inner.allocs.push(a.clone(), GFP_KERNEL) {
            drop(inner);
            a.release();
            return Err(e.into());
        }
        Ok(span)
    }

    /// Frees the allocation starting at `va`: revokes its pins and removes its CPU mappings; its
    /// memory goes back unless a persistent pin holds it.
    pub(crate) fn free(&self, va: u64) -> Result {
        let a = {
            let mut inner = self.inner.lock();
            let i = inner
                .allocs
                .binary_search_by_key(&va, |a| a.span.start())
                .map_err(|_| ENOENT)?;
            inner.allocs.remove(i).map_err(|_| ENOENT)?
        };
        a.release();
        Ok(())
    }

    /// The allocation holding `[va, va + len)`, if one does.
    pub(crate) fn find(&self, want: &Span) -> Option<Arc<Allocation>> {
        let inner = self.inner.lock();
        let i = match inner
            .allocs
            .binary_search_by_key(&want.start(), |a| a.span.start())
        {
            Ok(i) => i,
            Err(0) => return None,
            Err(i) => i - 1,
        };
        inner
            .allocs
            .get(i)
            .filter(|a| a.span.contains(want))
            .cloned()
    }
}

/// The allocation of the calling process that holds `want`.
pub(crate) fn lookup_current(want: &Span) -> Option<Arc<Allocation>> {
    let vs = VASPACES
        .lock()
        .iter()
        .find(|v| v.process.is_current())
        .cloned()?;
    vs.find(want)
}

/// Releases every allocation on `gpu` in every VA space (the GPU is going away).
pub(crate) fn release_gpu(gpu: &GpuInfo) {
    let spaces: KVec<Arc<VaSpace>> = {
        let all = VASPACES.lock();
        let mut v = KVec::new();
        for s in all.iter() {
            if v.push(s.clone(), GFP_KERNEL).is_err() {
                break;
            }
        }
        v
    };
    for vs in spaces.iter() {
        loop {
            let victim = {
                let mut inner = vs.inner.lock();
                let Some(i) = inner
                    .allocs
                    .iter()
                    .position(|a| core::ptr::eq(&*a.gpu, gpu))
                else {
                    break;
                };
                inner.allocs.remove(i).ok()
            };
            if let Some(a) = victim {
                a.release();
                // Persistent pins survive, but the aperture their mappings point at is going
                // away: unmap them (their tables stay valid until put).
                let st = a.state.lock();
                for p in st.pins.iter() {
                    p.unmap_all();
                }
            }
        }
    }
}
