// SPDX-License-Identifier: GPL-2.0

//! CPU mappings of allocations: `mmap` of `/dev/nvrs`, filled on demand.
//!
//! `mmap` does not map anything. It checks the request, records that the allocation is mapped
//! through this device inode (so release can remove the mappings), and hands the VMA a reference
//! on the allocation's [`CpuHandle`] ([`crate::helpers::vma_setup`]). Pages are inserted by the
//! fault handler, a 64 KiB piece at a time, under the allocation's lock and only while it is live.
//! On a GPU reached through BAR1 ([`crate::mem::reach`]), the first `mmap` maps the whole
//! allocation into BAR1 ([`Allocation::prepare_cpu`]) and the faults insert those BAR1 pages;
//! release removes the user mappings first and then the BAR1 run, before the memory goes back.
//!
//! The VMA holds the handle, not the [`Allocation`]: release detaches the allocation from its
//! handle, so a mapping that stays after `NVRS_IOCTL_FREE` (never unmapped) keeps only the
//! handle, a few bytes, and not the allocation's VAs or piece list. Otherwise a process that
//! maps and frees without unmapping would keep VAs of the one GPU VA space shared by all
//! processes reserved until it exits, and could exhaust it for everyone.
//!
//! That ordering is what makes a mapping unable to outlive its allocation: release marks the
//! allocation released under the same lock, then removes every user mapping of its range. A
//! fault either ran before (its pages are removed) or runs after and finds it released
//! (`SIGBUS`). A VMA whose `mmap` is still running when release happens is not yet in the
//! inode's mapping tree, but it has no pages either: its first fault sees the release. The VMA
//! names its allocation's handle, not a VA, and a detached handle names nothing, so a VA reused
//! for another allocation is never reached through an old mapping.
//!
//! The VMA callbacks below are the C side's entry points (`rust/helpers.c`).

use core::ffi::c_void;

use kernel::{
    bindings, new_mutex,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow,
        Mutex, //
    },
};

use crate::{
    helpers::Fault,
    hwref::P2P_PAGE_SIZE,
    mem::Allocation, //
};

/// `VM_FAULT_SIGBUS`.
const SIGBUS: u32 = bindings::vm_fault_reason_VM_FAULT_SIGBUS;

/// What the CPU mappings of one allocation refer to: the allocation while it is live, nothing
/// once it is released.
///
/// Each allocation has one, made with it (before any lock is taken); every VMA of the
/// allocation holds a reference on it. The allocation refers to the handle and the handle to
/// the allocation until release breaks that cycle ([`CpuHandle::detach`]); from then on the
/// allocation goes away (and its VAs are reused) once no pin or dma-buf holds it, whatever
/// VMAs are left.
#[pin_data]
pub(crate) struct CpuHandle {
    /// The allocation; `None` before it is attached and after release.
    #[pin]
    alloc: Mutex<Option<Arc<Allocation>>>,
}

impl CpuHandle {
    /// A handle that names nothing yet.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                alloc <- new_mutex!(None, "CpuHandle::alloc"),
            }),
            GFP_KERNEL,
        )
    }

    /// Points the handle at its allocation, once it exists.
    pub(crate) fn attach(&self, a: Arc<Allocation>) {
        let old = self.alloc.lock().replace(a);
        // Nothing was attached before; dropped with the lock released anyway.
        drop(old);
    }

    /// Forgets the allocation (release): later faults through the handle get `SIGBUS`.
    pub(crate) fn detach(&self) {
        let a = self.alloc.lock().take();
        // The caller holds a reference too, so this is never the last one.
        drop(a);
    }

    /// The allocation, while attached.
    fn get(&self) -> Option<Arc<Allocation>> {
        self.alloc.lock().clone()
    }
}

impl Allocation {
    /// Gets the allocation ready for CPU mappings (`mmap`): through BAR1, maps all of it
    /// there once, until release ([`crate::mem::reach`]). `ENOMEM` when BAR1 has no room,
    /// `ENOENT` once released. Nothing to do on a flat aperture.
    pub(crate) fn prepare_cpu(&self) -> Result {
        let Some(bar1) = self.mem().reach.bar1() else {
            return Ok(());
        };
        let n = usize::try_from(self.span.len() / P2P_PAGE_SIZE)?;
        // Allocated before the lock, which is on the pin path.
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL)?;
        let mut st = self.state.lock();
        if st.released || self.mem().is_gone() {
            return Err(ENOENT);
        }
        // A P2PDMA allocation is mapped in BAR1 for its whole life already.
        if st.cpu_window.is_some() || self.backing.p2p_window.is_some() {
            return Ok(());
        }
        st.cpu_window = Some(self.map_bar1_run(bar1, 0, n, &mut pages)?);
        Ok(())
    }

    /// Maps the 64 KiB piece holding file offset (GPU VA) `file_off` into the faulting VMA, if
    /// the allocation is live.
    fn fault(&self, fault: &Fault, file_off: u64) -> u32 {
        let st = self.state.lock();
        if st.released || self.mem().is_gone() {
            return SIGBUS;
        }
        let Some(off) = file_off.checked_sub(self.span.start()) else {
            return SIGBUS;
        };
        let piece = off - off % P2P_PAGE_SIZE;
        let reach = &self.mem().reach;
        let phys = match (
            reach.flat(),
            reach.bar1(),
            st.cpu_window.or(self.backing.p2p_window),
        ) {
            (Ok(base), _, _) => self.fb_offset_at(piece).map(|fb| base + fb),
            // The allocation's BAR1 run maps its pages in order.
            (Err(_), Some(b), Some((va, n)))
                if u64::try_from(n).is_ok_and(|n| piece / P2P_PAGE_SIZE < n) =>
            {
                Some(b.phys() + va + piece)
            }
            _ => None,
        };
        let Some(phys) = phys else {
            return SIGBUS;
        };
        // SAFETY: `[phys, phys + 64 KiB)` is this allocation's memory, live while `st` is held;
        // release removes the mapping after taking the lock.
        unsafe {
            fault.insert(
                self.span.start() + piece,
                phys,
                P2P_PAGE_SIZE,
                self.backing.p2pdma,
            )
        }
    }
}

/// `vm_ops->fault` of an allocation's VMA.
///
/// # Safety
///
/// `alloc` must be the VMA's private data set by [`crate::helpers::vma_setup`] (a counted
/// reference on a [`CpuHandle`]), and `vmf` the fault being handled on that VMA.
#[no_mangle]
unsafe extern "C" fn nvrs_alloc_fault(
    alloc: *mut c_void,
    vmf: *mut kernel::bindings::vm_fault,
    file_off: u64,
) -> u32 {
    // SAFETY: The VMA holds a reference on the handle for as long as it exists, and it exists
    // during its fault (function safety requirement).
    let h = unsafe { ArcBorrow::<CpuHandle>::from_raw(alloc.cast()) };
    // A released allocation is no longer attached: nothing to map. One that is released after
    // this finds `released` set under its lock in `fault`.
    let Some(a) = h.get() else {
        return SIGBUS;
    };
    // SAFETY: `vmf` is the fault being handled on a VMA set up by `vma_setup`.
    let fault = unsafe { Fault::from_raw(vmf) };
    a.fault(&fault, file_off)
}
crate::helpers::same_signature!(nvrs_alloc_fault);

/// `vm_ops->open`: a VMA was copied (split or moved); it takes a reference of its own.
///
/// # Safety
///
/// `alloc` must be the private data of a live VMA set up by [`crate::helpers::vma_setup`].
#[no_mangle]
unsafe extern "C" fn nvrs_alloc_vma_open(alloc: *mut c_void) {
    // SAFETY: The VMA being copied holds a reference, so the handle is alive.
    let h: Arc<CpuHandle> = unsafe { ArcBorrow::<CpuHandle>::from_raw(alloc.cast()) }.into();
    // The new VMA owns this reference until its `close`.
    let _ = Arc::into_raw(h);
}
crate::helpers::same_signature!(nvrs_alloc_vma_open);

/// `vm_ops->close`: a VMA goes away and drops its reference.
///
/// # Safety
///
/// `alloc` must be the private data of the VMA being closed, set up by
/// [`crate::helpers::vma_setup`] or copied by [`nvrs_alloc_vma_open`]; it is not used again.
#[no_mangle]
unsafe extern "C" fn nvrs_alloc_vma_close(alloc: *mut c_void) {
    // SAFETY: The VMA owned one reference, obtained from `Arc::into_raw`, which it gives up now.
    drop(unsafe { Arc::<CpuHandle>::from_raw(alloc.cast()) });
}
crate::helpers::same_signature!(nvrs_alloc_vma_close);
