// SPDX-License-Identifier: GPL-2.0

//! The `dma_buf_ops` of nvrs's dma-bufs, as called by the dma-buf core through `rust/dmabuf.c`.
//!
//! `attach` runs without the reservation lock; `map`, `unmap`, `pin` and `unpin` run with it held
//! (the dma-buf core's locking convention), so a mapping and a revocation's
//! `dma_buf_invalidate_mappings()` never interleave. `release` runs once the last file
//! reference and the last attachment are gone; the CPU fault handler runs under `mmap_lock`.

use core::ffi::{
    c_int,
    c_void, //
};

use kernel::{
    bindings,
    prelude::*,
    sync::Arc, //
};

use super::{
    borrow,
    ffi::{
        self,
        DmaRun, //
    },
    Export, EXPORTS,
};
use crate::{
    fault_op::Op,
    gpu,
    helpers::{
        self,
        Fault,
        PeerRef, //
    },
    hwref::P2P_PAGE_SIZE,
    p2p::dma::PeerRuns,
    topology,
};

/// `VM_FAULT_SIGBUS`.
const SIGBUS: u32 = bindings::vm_fault_reason_VM_FAULT_SIGBUS;

/// One importer mapping: the runs mapped for its device, handed back at unmap.
struct ImporterMapping {
    _runs: PeerRuns,
    revocable: bool,
}

impl Export {
    fn attach(&self, importer: Option<PeerRef>, peer2peer: bool, revocable: bool) -> Result {
        if self.state.lock().revoked || self.mem().is_gone() {
            return Err(ENODEV);
        }
        self.mem().faults.inject(Op::DmabufAttach)?;
        // No struct page behind the memory: only peer-to-peer importers can use it.
        let importer = importer.filter(|_| peer2peer).ok_or(EOPNOTSUPP)?;
        // By choice of the administrator, only importers that can be told to stop (vfio-pci's
        // policy for its BAR exporter).
        if crate::dmabuf_revocable_only() && !revocable {
            return Err(EOPNOTSUPP);
        }
        let endpoint = helpers::peer_describe(&importer).map_err(|_| EOPNOTSUPP)?;
        let gpu = gpu::of_mem(self.mem()).ok_or(ENODEV)?;
        let (_, _, allowed) = topology::p2p_gate(&gpu, &endpoint);
        if !allowed {
            return Err(EOPNOTSUPP);
        }
        Ok(())
    }

    fn map(&self, importer: PeerRef, revocable: bool) -> Result<*mut bindings::sg_table> {
        self.mem().faults.inject(Op::DmabufMap)?;
        {
            let mut st = self.state.lock();
            if st.revoked || self.mem().is_gone() {
                return Err(ENODEV);
            }
            // Counted before mapping: a revocation waits for it (it cannot start its
            // invalidation before this returns, both run under the reservation lock).
            if revocable {
                st.revocable_maps += 1;
            } else {
                st.pinned_maps += 1;
            }
        }
        let built = self.build(importer, revocable);
        if built.is_err() {
            self.unmapped_one(revocable);
        }
        built
    }

    fn build(&self, importer: PeerRef, revocable: bool) -> Result<*mut bindings::sg_table> {
        // SAFETY: The runs are the export's memory, held until the export is released or
        // revoked with no mapping left; this mapping ends (unmap) before either.
        let runs = unsafe { PeerRuns::map(importer, self.phys_runs()?.into_iter()) }?;
        let mut list = KVVec::with_capacity(runs.count(), GFP_KERNEL)?;
        for (dma, len) in runs.iter() {
            // Capacity was reserved above.
            let _ = list.push_within_capacity(DmaRun { dma, len });
        }
        let mapping = KBox::new(
            ImporterMapping {
                _runs: runs,
                revocable,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(mapping);
        // SAFETY: `raw` is a live mapping; it was just created.
        let importer = unsafe { &(*raw)._runs }.peer();
        match ffi::sgt_build(importer, &list, raw.cast()) {
            Some(sgt) => Ok(sgt),
            None => {
                // SAFETY: Not handed out: `raw` is still ours.
                drop(unsafe { KBox::from_raw(raw) });
                Err(ENOMEM)
            }
        }
    }

    /// An importer's mapping ended (or failed to start). The last one to end after a revocation
    /// lets the memory go: nothing can map it again.
    fn unmapped_one(&self, revocable: bool) {
        let mut st = self.state.lock();
        if revocable {
            st.revocable_maps = st.revocable_maps.saturating_sub(1);
            self.unmapped.notify_all();
        } else {
            st.pinned_maps = st.pinned_maps.saturating_sub(1);
        }
        let last = st.revoked && st.revocable_maps == 0 && st.pinned_maps == 0;
        // A pinned importer that outlived its GPU's removal let go, or a revocable one that
        // the revocation gave up on; other revocable ones are waited for by `revoke`, which
        // lets the memory go itself. After an unsignalled fence, the dma-buf's release does.
        let lets_go = last && (!revocable || st.abandoned) && !st.until_release;
        drop(st);
        if lets_go {
            self.drop_hold();
        }
    }

    fn fault(&self, fault: &Fault, file_off: u64) -> u32 {
        let st = self.state.lock();
        if st.revoked || self.mem().is_gone() {
            return SIGBUS;
        }
        let piece = file_off - file_off % P2P_PAGE_SIZE;
        let Some(phys) = self.phys_at(&st, piece) else {
            return SIGBUS;
        };
        // SAFETY: `[phys, phys + 64 KiB)` is memory the export holds while `st` says so;
        // revocation removes the mapping after marking the export under this lock.
        unsafe { fault.insert(piece, phys, P2P_PAGE_SIZE, false) }
    }
}

/// `dma_buf_ops.attach`: refuses importers that cannot reach the memory peer-to-peer (and, with
/// `dmabuf_revocable_only`, importers without an `invalidate_mappings` op).
///
/// # Safety
///
/// `export` must be the `priv` of a live nvrs dma-buf, and `importer` null or a valid
/// `struct pci_dev` for the duration of the call.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_attach_rs(
    export: *mut c_void,
    importer: *mut bindings::pci_dev,
    peer2peer: bool,
    revocable: bool,
) -> c_int {
    // SAFETY: By the function's safety requirement.
    let e = unsafe { borrow(export) };
    // SAFETY: `importer` is null or a valid `struct pci_dev` (function safety requirement).
    let importer = unsafe { PeerRef::new(importer.cast()) };
    match e.attach(importer, peer2peer, revocable) {
        Ok(()) => 0,
        Err(err) => err.to_errno(),
    }
}
helpers::same_signature!(nvrs_dmabuf_attach_rs);

/// `dma_buf_ops.pin` (`pin` true) and `unpin`: counted only, since nvrs never moves exported
/// memory.
///
/// # Safety
///
/// `export` must be the `priv` of a live nvrs dma-buf.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_pin_rs(export: *mut c_void, pin: bool) -> c_int {
    // SAFETY: By the function's safety requirement.
    let e = unsafe { borrow(export) };
    let mut st = e.state.lock();
    if pin {
        if st.revoked {
            return ENODEV.to_errno();
        }
        st.pins += 1;
    } else {
        st.pins = st.pins.saturating_sub(1);
    }
    0
}
helpers::same_signature!(nvrs_dmabuf_pin_rs);

/// `dma_buf_ops.map_dma_buf`: DMA-maps the exported range for `importer` and returns the
/// sg_table in `*out`.
///
/// # Safety
///
/// `export` must be the `priv` of a live nvrs dma-buf, `importer` null or a valid
/// `struct pci_dev` for the duration of the call, and `out` writable. The dma-buf's
/// reservation lock is held.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_map_rs(
    export: *mut c_void,
    importer: *mut bindings::pci_dev,
    revocable: bool,
    out: *mut *mut bindings::sg_table,
) -> c_int {
    // SAFETY: By the function's safety requirement.
    let e = unsafe { borrow(export) };
    // SAFETY: `importer` is null or a valid `struct pci_dev` (function safety requirement).
    let Some(importer) = (unsafe { PeerRef::new(importer.cast()) }) else {
        return EOPNOTSUPP.to_errno();
    };
    match e.map(importer, revocable) {
        Ok(sgt) => {
            // SAFETY: `out` is writable (function safety requirement).
            unsafe { *out = sgt };
            0
        }
        Err(err) => err.to_errno(),
    }
}
helpers::same_signature!(nvrs_dmabuf_map_rs);

/// `dma_buf_ops.unmap_dma_buf`: undoes one [`nvrs_dmabuf_map_rs`] (the C side frees the table).
///
/// # Safety
///
/// `export` must be the `priv` of a live nvrs dma-buf and `mapping` the mapping recorded in a
/// table that map returned for it, not used again.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_unmap_rs(export: *mut c_void, mapping: *mut c_void) {
    // SAFETY: By the function's safety requirement.
    let e = unsafe { borrow(export) };
    // SAFETY: `mapping` came from `KBox::into_raw` in `build` and is given back once.
    let m = unsafe { KBox::<ImporterMapping>::from_raw(mapping.cast()) };
    let revocable = m.revocable;
    // Unmaps the runs.
    drop(m);
    e.unmapped_one(revocable);
}
helpers::same_signature!(nvrs_dmabuf_unmap_rs);

/// `dma_buf_ops.release`: the dma-buf is gone; so is the export's hold on the memory.
///
/// # Safety
///
/// `export` must be the `priv` of the dma-buf being released; it is not used again.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_release_rs(export: *mut c_void) {
    // SAFETY: The dma-buf owned this reference (from `Arc::into_raw`) and gives it up now.
    let e = unsafe { Arc::<Export>::from_raw(export.cast()) };
    let node = e.dmabuf.as_ref().and_then(|d| {
        EXPORTS
            .lock()
            .as_mut()
            .and_then(|t| t.remove_node(&d.addr()))
    });
    // The registry's reference and node go here, outside the lock.
    drop(node);
    e.drop_hold();
}
helpers::same_signature!(nvrs_dmabuf_release_rs);

/// `dma_buf_ops.mmap`: CPU mappings must be shared (a private one would get copy-on-write
/// semantics over device memory) and not executable; the C side sets the VMA up for faults.
///
/// # Safety
///
/// `export` must be the `priv` of a live nvrs dma-buf.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_mmap_rs(export: *mut c_void, shared: bool, exec: bool) -> c_int {
    // SAFETY: By the function's safety requirement.
    let e = unsafe { borrow(export) };
    if !shared {
        return EINVAL.to_errno();
    }
    if exec {
        return EPERM.to_errno();
    }
    if e.state.lock().revoked {
        return ENODEV.to_errno();
    }
    0
}
helpers::same_signature!(nvrs_dmabuf_mmap_rs);

/// `vm_ops->fault` of a dma-buf's VMA.
///
/// # Safety
///
/// `export` must be the VMA's private data (the `priv` of the dma-buf the VMA's file is, which
/// that file keeps alive), and `vmf` the fault being handled on that VMA.
#[no_mangle]
unsafe extern "C" fn nvrs_dmabuf_fault_rs(
    export: *mut c_void,
    vmf: *mut bindings::vm_fault,
    file_off: u64,
) -> u32 {
    // SAFETY: By the function's safety requirement.
    let e = unsafe { borrow(export) };
    // SAFETY: `vmf` is the fault being handled on a VMA set up by `nvrs_dmabuf_mmap`.
    let fault = unsafe { Fault::from_raw(vmf) };
    e.fault(&fault, file_off)
}
helpers::same_signature!(nvrs_dmabuf_fault_rs);
