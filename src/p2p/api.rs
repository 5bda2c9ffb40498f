// SPDX-License-Identifier: GPL-2.0

//! The exported `nvidia_p2p_*` functions.
//!
//! Each is `#[no_mangle] unsafe extern "C"` with the prototype of `include/nv-p2p.h` and is
//! exported with `EXPORT_SYMBOL_GPL` by `src/exports.c`. They validate every argument, return
//! only errnos NVIDIA's driver returns (`-EINVAL`, `-ENOMEM`, `-EBUSY`, `-EIO`, `-ENODEV`,
//! `-ENOTSUPP`; [`nv_errno`]), and treat the table and mapping pointers they are given purely as
//! lookup keys ([`crate::p2p::pin`]): those are never dereferenced unless they name a live
//! object. What remains `unsafe` is the consumer's side of the contract: out-parameters and
//! `struct pci_dev` pointers must be valid.
//!
//! The two that pin, `nvidia_p2p_get_pages()` and `nvidia_p2p_get_pages_persistent()`, look the
//! caller's VA up in its VA space, a layer above this one: their entry points are in
//! [`crate::exports`] and call [`get_pages`] here with the lookup.

use core::ffi::{
    c_int,
    c_void, //
};

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
    fault_op::Op,
    gpu,
    helpers::{
        self,
        PeerRef, //
    },
    mem::Allocation,
    p2p::{
        abi,
        dma::DmaMapping,
        pin::{
            self,
            PinEntry,
            PinRequest,
            PinState, //
        },
        profile::{
            Phase,
            Stopwatch, //
        },
        quarantine,
    },
    topology,
    vaspace::range::{
        check_p2p_range,
        Span, //
    },
};

/// Maps an internal error to one of the errnos NVIDIA's implementation returns (its NV_STATUS
/// conversion sends everything else to `-EIO`).
fn nv_errno(e: Error) -> Error {
    [EINVAL, ENOMEM, EBUSY, EIO, ENODEV, ENOTSUPP]
        .into_iter()
        .find(|k| k.to_errno() == e.to_errno())
        .unwrap_or(EIO)
}

/// Converts a result to the C return convention.
pub(crate) fn ret(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => nv_errno(e).to_errno(),
    }
}

/// Pins `[va, va + len)` of the calling process's GPU memory, which `lookup` finds by VA (in
/// the caller's VA space: the entry points are in [`crate::exports`], above the VA spaces).
pub(crate) fn get_pages(
    va: u64,
    len: u64,
    out: *mut *mut abi::PageTable,
    persistent: bool,
    callback: abi::FreeCallback,
    data: *mut c_void,
    lookup: impl FnOnce(&Span) -> Option<Arc<Allocation>>,
) -> Result {
    let span = check_p2p_range(va, len).map_err(|_| EINVAL)?;
    if out.is_null() || (!persistent && callback.is_none()) {
        return Err(EINVAL);
    }
    let mut sw = Stopwatch::start();
    let alloc = lookup(&span).ok_or(EINVAL)?;
    // The GPU's fault controls ([`crate::faults`]): an injected errno, or a BAR1 budget.
    let mem = alloc.mem();
    mem.faults.inject(if persistent {
        Op::GetPagesPersistent
    } else {
        Op::GetPages
    })?;
    if mem
        .faults
        .over_bar1_budget(span.len(), || pin::stats_on(mem).1)
    {
        return Err(ENOMEM);
    }
    if let Some(pick) = mem.faults.roll_revoke() {
        mem.faults.count_revoked(pin::revoke_one_on(mem, pick));
    }
    let offset = span.start() - alloc.span.start();
    sw.lap(Phase::Lookup);
    let req = PinRequest {
        va,
        offset,
        len: span.len(),
        persistent,
        callback,
        data,
    };
    PinEntry::create(alloc, &req, &mut sw, |table| {
        // SAFETY: `out` is non-null and, by the API contract, points to a writable
        // `nvidia_p2p_page_table_t *` of the caller.
        unsafe { out.write(table) }
    })
}

/// Ends the pin named by `(va, table)` after checking it is of the expected kind.
///
/// A pin is found by its table's address and its VA. A stale pointer (after a revocation or a
/// put) names no live pin: table memory is quarantined after use
/// ([`crate::p2p::quarantine`]), so the address is not another pin's for a long time, and the
/// VA must match too. For a non-persistent pin that is the normal end of a revoked pin and
/// returns 0, as in NVIDIA's driver; a persistent pin is never revoked, so an unknown one is a
/// consumer bug: `-EINVAL`. Any context may put a pin (a worker, another thread of the owner).
fn put(va: u64, table: *mut abi::PageTable, persistent: bool) -> Result {
    if table.is_null() {
        return Ok(());
    }
    let mut sw = Stopwatch::start();
    let not_found = || {
        if persistent {
            return Err(EINVAL);
        }
        // The normal end of a revoked pin: its tomb goes.
        quarantine::unbury(table as usize, Some(va));
        Ok(())
    };
    let Some(pin) = pin::lookup(table as usize) else {
        return not_found();
    };
    if pin.req.va != va {
        return not_found();
    }
    if pin.req.persistent != persistent {
        return Err(EINVAL);
    }
    if pin.state() == PinState::Revoking && pin.is_revoking_thread() {
        // Called from its own free callback, which the API forbids.
        return Err(EIO);
    }
    sw.lap(Phase::PutLookup);
    // Drops the last reference, unless a revocation is looking at the pin right now.
    pin.put(&mut sw);
    sw.lap(Phase::Free);
    Ok(())
}

/// `nvidia_p2p_put_pages()`.
///
/// # Safety
///
/// None beyond the ABI: `page_table` is only used as a lookup key.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_put_pages(
    _p2p_token: u64,
    _va_space: u32,
    virtual_address: u64,
    page_table: *mut abi::PageTable,
) -> c_int {
    ret(put(virtual_address, page_table, false))
}

/// `nvidia_p2p_put_pages_persistent()`.
///
/// # Safety
///
/// None beyond the ABI: `page_table` is only used as a lookup key.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_put_pages_persistent(
    virtual_address: u64,
    page_table: *mut abi::PageTable,
    flags: u32,
) -> c_int {
    if flags != 0 {
        return EINVAL.to_errno();
    }
    ret(put(virtual_address, page_table, true))
}

fn dma_map(
    peer: *mut abi::PciDev,
    table: *mut abi::PageTable,
    out: *mut *mut abi::DmaMapping,
) -> Result {
    if peer.is_null() || table.is_null() || out.is_null() {
        return Err(EINVAL);
    }
    // A stale table names no live pin: its memory is quarantined after use.
    let pin = pin::lookup(table as usize).ok_or(EINVAL)?;
    // Checked again under the pin's lock below; this keeps a departed aperture out of the IOMMU.
    if pin.alloc.mem().is_gone() {
        return Err(EINVAL);
    }
    pin.alloc.mem().faults.inject(Op::DmaMap)?;
    // SAFETY: `peer` is non-null and, by the API contract, a valid `struct pci_dev`.
    let peer = unsafe { PeerRef::new(peer) }.ok_or(EINVAL)?;
    // A peer nvrs cannot place in the PCI hierarchy is not a valid peer.
    let endpoint = helpers::peer_describe(&peer).map_err(|_| EINVAL)?;
    // Not bound any more: going away (checked above, again).
    let gpu = gpu::of_mem(pin.alloc.mem()).ok_or(EINVAL)?;
    let (_, _, allowed) = topology::p2p_gate(&gpu, &endpoint);
    if !allowed {
        return Err(ENOTSUPP);
    }
    let mapping = DmaMapping::new(&pin.table, peer, crate::p2p_coalesce())?;
    let ptr = mapping.as_ptr();
    // Nothing is allocated under `P2pPin::dma` (src/locking.rs): room for the mapping is
    // made with the lock released, and the vector swapped in under it, rechecked.
    let mut maps = loop {
        let want = {
            let maps = pin.dma.lock();
            (maps.len() >= maps.capacity()).then(|| maps.len() + 1)
        };
        let Some(want) = want else {
            let maps = pin.dma.lock();
            if maps.len() < maps.capacity() {
                break maps;
            }
            continue;
        };
        let mut grown = KVec::with_capacity(want.max(4), GFP_KERNEL)?;
        let old = {
            let mut maps = pin.dma.lock();
            if maps.len() < grown.capacity() {
                for m in maps.drain_all() {
                    // `grown` has room for every mapping `maps` holds.
                    let _ = grown.push_within_capacity(m);
                }
                Some(core::mem::replace(&mut *maps, grown))
            } else {
                None
            }
        };
        // The emptied vector (or the unused one) is freed with the lock released.
        drop(old);
    };
    // A revocation (or the GPU's removal) that started meanwhile would miss this mapping:
    // refuse instead. Both tear mappings down under this lock.
    if pin.state() != PinState::Live || pin.alloc.mem().is_gone() {
        return Err(EINVAL);
    }
    // Room was made above, under this lock hold.
    if let Err(m) = maps.push_within_capacity(mapping) {
        drop(maps);
        drop(m);
        return Err(ENOMEM);
    }
    // Handed out under the lock, before any teardown can free it.
    // SAFETY: `out` is non-null and, by the API contract, points to a writable
    // `nvidia_p2p_dma_mapping_t *` of the caller.
    unsafe { out.write(ptr) };
    Ok(())
}

/// `nvidia_p2p_dma_map_pages()`: maps a pinned table for `peer`.
///
/// # Safety
///
/// `peer` must be null or a valid `struct pci_dev`; `dma_mapping` null or valid for writing a
/// pointer.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_dma_map_pages(
    peer: *mut abi::PciDev,
    page_table: *mut abi::PageTable,
    dma_mapping: *mut *mut abi::DmaMapping,
) -> c_int {
    ret(dma_map(peer, page_table, dma_mapping))
}

fn dma_unmap(
    peer: *mut abi::PciDev,
    table: *mut abi::PageTable,
    mapping: *mut abi::DmaMapping,
) -> Result {
    if peer.is_null() || table.is_null() || mapping.is_null() {
        return Err(EINVAL);
    }
    // Stale pointers (after a revocation) name nothing: the mapping is already gone.
    let Some(pin) = pin::lookup(table as usize) else {
        return Ok(());
    };
    let victim = {
        let mut maps = pin.dma.lock();
        let Some(i) = maps.iter().position(|m| m.key() == mapping as usize) else {
            return Ok(());
        };
        maps.remove(i).map_err(|_| EINVAL)?
    };
    if victim.peer().as_abi() != peer {
        // NVIDIA's driver warns and unmaps for the device the mapping was made for; so does
        // nvrs, without a WARN splat.
        pr_warn!("nvidia_p2p_dma_unmap_pages: peer does not match the mapping's; unmapped for the mapping's peer\n");
    }
    drop(victim);
    Ok(())
}

/// `nvidia_p2p_dma_unmap_pages()`.
///
/// # Safety
///
/// None beyond the ABI: the pointers are only used as lookup keys and compared.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_dma_unmap_pages(
    peer: *mut abi::PciDev,
    page_table: *mut abi::PageTable,
    dma_mapping: *mut abi::DmaMapping,
) -> c_int {
    ret(dma_unmap(peer, page_table, dma_mapping))
}

/// `nvidia_p2p_free_page_table()`: a revoked pin's consumer is done with its table.
///
/// NVIDIA's protocol has the free callback free the table, and such a consumer never puts the
/// pin; so this ends the table's tomb ([`crate::p2p::quarantine`]), as a put of the revoked pin
/// would. nvrs frees the table itself, later, through the quarantine. A table that is not a
/// revoked pin's (a live pin's, a null or unknown pointer) is left as it is. Always 0, as in
/// NVIDIA's driver.
///
/// # Safety
///
/// None: the pointer is only compared with the tombs' keys, never read.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_free_page_table(
    page_table: *mut abi::PageTable,
) -> c_int {
    if !page_table.is_null() {
        quarantine::unbury(page_table as usize, None);
    }
    0
}

/// `nvidia_p2p_free_dma_mapping()`: nvrs frees mappings itself; a no-op.
///
/// # Safety
///
/// None: the pointer is not used.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_free_dma_mapping(
    _dma_mapping: *mut abi::DmaMapping,
) -> c_int {
    0
}

/// `nvidia_p2p_init_mapping()`: the pre-2.0 mailbox interface; not supported (as in NVIDIA's
/// current driver).
///
/// # Safety
///
/// None: the pointers are not used.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_init_mapping(
    _p2p_token: u64,
    _params: *mut abi::Params,
    _destroy_callback: abi::DestroyCallback,
    _data: *mut c_void,
) -> c_int {
    ENOTSUPP.to_errno()
}

/// `nvidia_p2p_destroy_mapping()`: not supported.
///
/// # Safety
///
/// None.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_destroy_mapping(_p2p_token: u64) -> c_int {
    ENOTSUPP.to_errno()
}

/// The registered rsync driver's address (0: none). nvrs never calls it: no IBM NPU systems.
static RSYNC_DRIVER: Atomic<usize> = Atomic::new(0);

/// `nvidia_p2p_register_rsync_driver()`: records one driver; there is nothing to sync.
///
/// # Safety
///
/// `driver` must be null or a valid `nvidia_p2p_rsync_driver_t`.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_register_rsync_driver(
    driver: *mut abi::RsyncDriver,
    _data: *mut c_void,
) -> c_int {
    if driver.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: `driver` is non-null and, by the function's safety requirement, valid.
    let d = unsafe { &*driver };
    if !abi::rsync_driver_version_compatible(d.version)
        || d.get_relaxed_ordering_mode.is_none()
        || d.put_relaxed_ordering_mode.is_none()
        || d.wait_for_rsync.is_none()
    {
        return EINVAL.to_errno();
    }
    if RSYNC_DRIVER.cmpxchg(0, driver as usize, Relaxed).is_err() {
        return EBUSY.to_errno();
    }
    0
}

/// `nvidia_p2p_unregister_rsync_driver()`: forgets the driver if it is the registered one.
///
/// # Safety
///
/// None: the pointer is only compared.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_unregister_rsync_driver(
    driver: *mut abi::RsyncDriver,
    _data: *mut c_void,
) {
    if driver.is_null() {
        return;
    }
    // Another driver's registration stays.
    let _ = RSYNC_DRIVER.cmpxchg(driver as usize, 0, Relaxed);
}

/// `nvidia_p2p_get_rsync_registers()`: there are none.
///
/// # Safety
///
/// None: the pointer is not used.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_get_rsync_registers(
    _reg_info: *mut *mut abi::RsyncRegInfo,
) -> c_int {
    ENODEV.to_errno()
}

/// `nvidia_p2p_put_rsync_registers()`: nothing to put.
///
/// # Safety
///
/// None: the pointer is not used.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_put_rsync_registers(_reg_info: *mut abi::RsyncRegInfo) {}
