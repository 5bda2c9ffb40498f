// SPDX-License-Identifier: GPL-2.0

//! dma-buf export of GPU memory: the upstream path by which RDMA drivers import it.
//!
//! # Why
//!
//! In-kernel RDMA drivers reach GPU memory two ways. The legacy one is NVIDIA's `nvidia_p2p_*`
//! pins ([`crate::p2p`]). The upstream one, which NCCL, UCX and libfabric use through
//! `ibv_reg_dmabuf_mr()`, is a *dma-buf*: the GPU driver turns a range of memory into a file
//! descriptor, user space passes it to the RDMA driver, and the kernel's RDMA core imports it
//! (`ib_umem_dmabuf_get*()` in `drivers/infiniband/core/umem_dmabuf.c`), asking the exporter
//! for an sg_table of DMA addresses for the NIC.
//!
//! # Objects and lifetime
//!
//! `NVRS_IOCTL_EXPORT_DMABUF` makes an [`Export`] of a 64 KiB-aligned range of one allocation
//! and a dma-buf whose `priv` it is. Like a GEM object, the export *holds* the allocation's memory
//! (`AllocState::dmabufs`): freeing the VA, or the owner exiting, releases the allocation (its
//! VA mappings fault, its `nvidia_p2p` pins are revoked) but the memory returns to the memory
//! manager only when no export holds it any more. The dma-buf file may be passed to other
//! processes (`SCM_RIGHTS`) and mapped by them: it is not tied to its creator's VA space.
//!
//! An export stops holding the memory when its dma-buf is released (the last file reference and
//! importer are gone) or when it is revoked and no importer maps it any more.
//!
//! # Importers
//!
//! The memory is MMIO with no `struct page`: a window of the GPU's flat aperture, or, on an
//! NVIDIA GPU ([`crate::mem::reach`]), a run of BAR1 that the export maps its range at when it
//! is made (`-ENOMEM` when BAR1 has no room) and unmaps when it stops holding the memory, before
//! the memory can go back; importers and CPU mappings get BAR1 addresses. `attach` refuses
//! importers that cannot do peer-to-peer DMA (`allow_peer2peer` unset: a static importer would
//! want pages) and importers the P2P gate refuses for this GPU ([`crate::topology::p2p_gate`],
//! the policy `nvidia_p2p_dma_map_pages()` applies), both with `-EOPNOTSUPP`. `map_dma_buf`
//! DMA-maps each physically contiguous run of the range once for the importer's device
//! (`dma_map_resource`: an IOVA behind an IOMMU, never the raw BAR address) and hands out an
//! sg_table of DMA addresses only, one entry per run split at the device's maximum segment size.
//! `pin`/`unpin` are counted: nvrs never moves exported memory, pinned or not.
//!
//! # Revocation
//!
//! When the GPU goes away, the driver's teardown revokes every export on it ([`revoke_gpu`]),
//! in the order vfio-pci uses for its BAR exporter: mark it revoked (new attaches and maps fail
//! with `-ENODEV`, CPU faults raise `SIGBUS`), remove its CPU mappings, call
//! `dma_buf_invalidate_mappings()` under the reservation lock and wait for every fence, then
//! wait until every *revocable* importer (one with an `invalidate_mappings` op) has unmapped.
//! Pinned importers without that op cannot be told to stop: like a persistent `nvidia_p2p` pin,
//! their mapping stays valid and the memory stays held until they release it; the GPU's memory
//! manager is retired meanwhile ([`crate::mem::fb::retire`]), so none of that memory is handed out
//! again, even to the GPU coming back.
//!
//! The waits for fences and unmaps are bounded: [`REVOKE_WAIT`] (10 s) for all the exports of
//! the GPU together. An export whose fence has not signalled or whose revocable importer has
//! not unmapped by then is *abandoned*: one kernel-log line names its dma-buf (inode number and
//! size) and the fence (driver and timeline) or the first importer still mapping it (its device
//! and how many do), and the removal goes on. The export stays revoked and keeps holding its
//! memory, so the manager stays retired, like a pinned importer's: until the last importer
//! unmaps (the unmap lets the memory go), or, after an unsignalled fence (work behind it may
//! still reach the memory), until the dma-buf is released.
//!
//! # Locking
//!
//! The dma-buf reservation lock is above `Export::state`, which is above nothing nvrs owns; see
//! [`crate::locking`].

pub(crate) mod ffi;
pub(crate) mod ops;

use core::ffi::c_void;

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::{
        Arc,
        CondVar,
        Mutex, //
    },
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

use crate::{
    hwref::P2P_PAGE_SIZE,
    mem::{
        fb::{
            self,
            FbMemory, //
        },
        Allocation,
    },
    vaspace::range::Span,
};

use ffi::{
    DmaBufPtr,
    DmaBufRef, //
};

/// Mutable state of an export.
struct ExportState {
    /// Revoked: no new attachments, mappings or CPU faults.
    revoked: bool,
    /// Live mappings by importers with an `invalidate_mappings` op (revocation waits for them).
    revocable_maps: usize,
    /// Live mappings by importers without one (pinned importers that cannot be revoked).
    pinned_maps: usize,
    /// `dma_buf_pin()` calls not yet undone.
    pins: usize,
    /// The export still holds the allocation's memory.
    holds: bool,
    /// The revocation gave up waiting for revocable importers to unmap ([`REVOKE_WAIT`]): the
    /// last mapping to end, revocable or not, lets the memory go.
    abandoned: bool,
    /// The revocation gave up waiting for a fence: importer work may still reach the memory,
    /// which the export holds until its dma-buf is released.
    until_release: bool,
    /// Through BAR1: the run that maps the exported range in order (BAR1 offset, pages), for
    /// as long as the export holds the memory.
    window: Option<(u64, usize)>,
}

/// A range of an allocation exported as a dma-buf; the dma-buf's `priv`.
#[pin_data]
pub(crate) struct Export {
    /// The allocation (kept alive by the export).
    alloc: Arc<Allocation>,
    /// Offset of the range in the allocation.
    off: u64,
    /// Length of the range (the dma-buf's size).
    len: u64,
    /// The dma-buf (set once it exists, before the export is registered).
    dmabuf: kernel::sync::SetOnce<DmaBufPtr>,
    #[pin]
    state: Mutex<ExportState>,
    /// Signalled when a revocable importer unmaps.
    #[pin]
    unmapped: CondVar,
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before `/dev/nvrs` is
    // registered and so before any export can exist.
    pub(crate) unsafe(uninit) static EXPORTS: Mutex<Option<RBTree<usize, Arc<Export>>>> = None;
}

/// Initialises the export registry. Called once, from module init.
pub(crate) fn init_registry() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { EXPORTS.init() };
    *EXPORTS.lock() = Some(RBTree::new());
}

/// Frees the registry at module exit (no export can exist then: each dma-buf holds the module).
pub(crate) fn fini_registry() {
    let tree = EXPORTS.lock().take();
    drop(tree);
}

/// Exports `[va, va + len)` of the allocation `find` finds for it (in the caller's VA space) as
/// a dma-buf; returns its descriptor.
pub(crate) fn export(
    va: u64,
    len: u64,
    find: impl FnOnce(&Span) -> Option<Arc<Allocation>>,
) -> Result<i32> {
    if len == 0 || va % P2P_PAGE_SIZE != 0 || len % P2P_PAGE_SIZE != 0 {
        return Err(EINVAL);
    }
    let want = Span::new(va, len).ok_or(EINVAL)?;
    let alloc = find(&want).ok_or(ENOENT)?;
    let off = va - alloc.span.start();
    let mem = alloc.mem().clone();
    // GPU removal waits until the export is registered, so its walk finds it.
    let _busy = mem.enter()?;
    let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
    let exported = alloc.clone();
    let export = Arc::pin_init(
        try_pin_init!(Export {
            alloc: exported,
            off,
            len,
            dmabuf: kernel::sync::SetOnce::new(),
            state <- new_mutex!(ExportState {
                revoked: false,
                revocable_maps: 0,
                pinned_maps: 0,
                pins: 0,
                holds: false,
                abandoned: false,
                until_release: false,
                window: None,
            }, "Export::state"),
            unmapped <- new_condvar!("Export::unmapped"),
        }),
        GFP_KERNEL,
    )?;
    let window = alloc.hold_for_dmabuf(off, len)?;
    {
        let mut st = export.state.lock();
        st.holds = true;
        st.window = window;
    }
    let raw = Arc::into_raw(export.clone());
    // SAFETY: `raw` is a reference from `Arc::into_raw`, handed to the dma-buf.
    let dmabuf = match unsafe { DmaBufPtr::export(raw.cast(), len) } {
        Ok(d) => d,
        Err(e) => {
            // SAFETY: Not handed over: the reference is still ours.
            drop(unsafe { Arc::from_raw(raw) });
            export.drop_hold();
            return Err(e);
        }
    };
    // SAFETY: Just exported; its creation reference is used only here.
    let dref = unsafe { DmaBufRef::from_new(dmabuf) };
    // Set once, here, before anyone else can see the export.
    let _ = export.dmabuf.populate(dmabuf);
    EXPORTS
        .lock()
        .as_mut()
        .ok_or(ENODEV)?
        .insert(node.into_node(dmabuf.addr(), export));
    // On failure this drops the last reference: the release op unregisters the export and
    // drops its hold.
    dref.into_fd()
}

impl Export {
    /// The export's GPU memory manager.
    fn mem(&self) -> &FbMemory {
        self.alloc.mem()
    }

    /// Stops holding the allocation's memory (once), which returns it if the allocation was
    /// released and nothing else holds it. Called with no nvrs lock held (the dma-buf's
    /// reservation lock may be, when the last pinned importer unmaps after a revocation; it is
    /// above every nvrs lock).
    fn drop_hold(&self) {
        let (held, window) = {
            let mut st = self.state.lock();
            (core::mem::replace(&mut st.holds, false), st.window.take())
        };
        if held {
            self.alloc.dmabuf_gone(window);
        }
    }

    /// The CPU physical (bus) address of byte `at` of the exported range, while the export
    /// holds the memory (`st`): in the flat aperture, or in the export's BAR1 run.
    fn phys_at(&self, st: &ExportState, at: u64) -> Option<u64> {
        if !st.holds || at >= self.len {
            return None;
        }
        let reach = &self.mem().reach;
        match (reach.flat(), reach.bar1(), st.window) {
            (Ok(base), _, _) => Some(base + self.alloc.fb_offset_at(self.off + at)?),
            (Err(_), Some(b), Some((va, _))) => Some(b.phys() + va + at),
            _ => None,
        }
    }

    /// The physically contiguous runs of the exported range, as `(CPU physical address,
    /// length)`, in order: the aperture's, or the one BAR1 run. `ENODEV` once the export no
    /// longer holds the memory.
    fn phys_runs(&self) -> Result<KVVec<(u64, u64)>> {
        let n = self.len / P2P_PAGE_SIZE;
        let mut pages = KVVec::with_capacity(usize::try_from(n)?, GFP_KERNEL)?;
        {
            let st = self.state.lock();
            for i in 0..n {
                let p = self.phys_at(&st, i * P2P_PAGE_SIZE).ok_or(ENODEV)?;
                pages.push_within_capacity(p).map_err(|_| ENOMEM)?;
            }
        }
        let mut out = KVVec::new();
        for (_, pages, first) in crate::p2p::coalesce::runs(pages.iter().copied()) {
            out.push((first, u64::try_from(pages)? * P2P_PAGE_SIZE), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// Revokes the export (its GPU is going away); see the module documentation. Waits for
    /// fences and revocable importers at most `bound`. Returns the number of mappings of pinned
    /// importers that stay (the last of them to go lets the memory go).
    fn revoke(&self, dmabuf: &DmaBufRef, bound: Delta) -> usize {
        let since = Instant::<Monotonic>::now();
        self.state.lock().revoked = true;
        // Faults from now on see the revocation; this removes what earlier ones inserted.
        dmabuf.zap();
        let fenced = dmabuf.invalidate(u32::try_from(bound.as_millis()).unwrap_or(u32::MAX));
        let mut st = self.state.lock();
        while st.revocable_maps != 0 {
            if since.elapsed() >= bound {
                // The importer that unmaps last lets the memory go (`unmapped_one`).
                st.abandoned = true;
                break;
            }
            st = fb::wait_slice(&self.unmapped, &self.state, st);
        }
        st.until_release = !fenced;
        let stuck = st.abandoned || st.until_release;
        let pinned = st.pinned_maps;
        let unmapped = st.revocable_maps == 0 && pinned == 0;
        drop(st);
        if stuck {
            let waited = u32::try_from(since.elapsed().as_millis()).unwrap_or(u32::MAX);
            dmabuf.report_stuck(self.alloc.mem().index, waited, !fenced);
        }
        if unmapped && fenced {
            self.drop_hold();
        }
        pinned
    }
}

/// How long GPU removal waits in all for the fences of the exports it revokes and for their
/// revocable importers to unmap (each export gets at least [`REVOKE_GRACE`]). Past it, the
/// removal prints one line per export it gave up on (naming its dma-buf and the fence or the
/// importer) and goes on: the export stays revoked and keeps holding its memory, so the GPU's
/// memory manager stays retired ([`crate::mem::fb::retire`]) until the last importer unmaps (or,
/// for a fence, until the dma-buf is released).
pub(crate) const REVOKE_WAIT: Delta = crate::mem::fb::REMOVAL_WAIT;

/// The least time an export's revocation waits, even once [`REVOKE_WAIT`] has passed.
const REVOKE_GRACE: Delta = Delta::from_millis(100);

/// Revokes every export of memory on `mem` (its GPU is going away). One at a time, without
/// allocating; returns the number of mappings of pinned importers that stay.
pub(crate) fn revoke_gpu(mem: &FbMemory) -> usize {
    let since = Instant::<Monotonic>::now();
    let mut pinned = 0;
    loop {
        let next = {
            let reg = EXPORTS.lock();
            let found = reg.iter().flat_map(|t| t.values()).find_map(|e| {
                if !core::ptr::eq(e.mem(), mem) || e.state.lock().revoked {
                    return None;
                }
                let d = e.dmabuf.as_ref()?;
                // SAFETY: A registered export's dma-buf has not finished its release (which
                // unregisters the export first).
                let r = unsafe { d.try_get() };
                Some((e.clone(), r))
            });
            found
        };
        match next {
            Some((e, Some(dmabuf))) => {
                let bound = (REVOKE_WAIT - since.elapsed()).max(REVOKE_GRACE);
                pinned += e.revoke(&dmabuf, bound);
            }
            // Being released: mark it so that the walk moves on; its release drops the hold.
            Some((e, None)) => e.state.lock().revoked = true,
            None => break,
        }
    }
    pinned
}

/// Live exports and importer mappings on `mem`: `(exports, mappings)`.
pub(crate) fn stats_on(mem: &FbMemory) -> (usize, usize) {
    let reg = EXPORTS.lock();
    let mut out = (0, 0);
    for e in reg
        .iter()
        .flat_map(|t| t.values())
        .filter(|e| core::ptr::eq(e.mem(), mem))
    {
        let st = e.state.lock();
        out.0 += 1;
        out.1 += st.revocable_maps + st.pinned_maps;
    }
    out
}

/// Renders the exports for `debugfs/nvrs/p2p`: their number, then one line per export.
pub(crate) fn render(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let reg = EXPORTS.lock();
    let all = || reg.iter().flat_map(|t| t.values());
    writeln!(f, "dmabufs: {}", all().count())?;
    for e in all() {
        let st = e.state.lock();
        writeln!(
            f,
            "dmabuf gpu {} va {:#x} len {:#x} pid {} revoked {} holds {} mappings {} pinned_mappings {} pins {}",
            e.alloc.mem().index,
            e.alloc.span.start() + e.off,
            e.len,
            e.alloc.tgid,
            u8::from(st.revoked),
            u8::from(st.holds),
            st.revocable_maps,
            st.pinned_maps,
            st.pins
        )?;
    }
    Ok(())
}

/// The export behind a dma-buf's `priv`.
///
/// # Safety
///
/// `export` must be the `priv` of a live nvrs dma-buf (a reference from `Arc::into_raw` that
/// the dma-buf owns until its `release`).
unsafe fn borrow<'a>(export: *mut c_void) -> kernel::sync::ArcBorrow<'a, Export> {
    // SAFETY: By the function's safety requirement.
    unsafe { kernel::sync::ArcBorrow::from_raw(export.cast()) }
}
