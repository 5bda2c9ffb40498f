// SPDX-License-Identifier: GPL-2.0

//! The FFI edge to `rust/dmabuf.c`: the dma-buf, reservation and scatterlist calls the exporter
//! makes, behind safe types. The calls in the other direction (the `dma_buf_ops`) are in
//! [`super::ops`]. The prototypes are those of `rust/helpers.h`, generated at build time
//! ([`crate::helpers::ffi`]).

use core::ffi::c_void;

use kernel::{
    bindings,
    prelude::*, //
};

use crate::helpers::{
    ffi::{
        nvrs_dma_run,
        nvrs_dmabuf_export,
        nvrs_dmabuf_fd,
        nvrs_dmabuf_invalidate,
        nvrs_dmabuf_put,
        nvrs_dmabuf_report_stuck,
        nvrs_dmabuf_tryget,
        nvrs_dmabuf_zap,
        nvrs_sgt_build, //
    },
    PeerRef, //
};

/// `struct nvrs_dma_run`: one DMA-mapped run of an importer's mapping.
pub(crate) type DmaRun = nvrs_dma_run;

/// A `struct dma_buf` nvrs exported, named without a reference: valid until its `release` op
/// has run ([`super::ops`]), which is what the export it belongs to tracks.
#[derive(Clone, Copy)]
pub(crate) struct DmaBufPtr(*mut bindings::dma_buf);

// SAFETY: A dma-buf may be referenced and used from any thread.
unsafe impl Send for DmaBufPtr {}
// SAFETY: As above; the pointer itself is never written.
unsafe impl Sync for DmaBufPtr {}

/// A counted reference on a dma-buf (its file).
pub(crate) struct DmaBufRef(DmaBufPtr);

impl DmaBufPtr {
    /// Exports a dma-buf of `size` bytes whose `priv` is `export`, a reference obtained from
    /// `Arc::into_raw` that the dma-buf owns from then on (its `release` op drops it). On error
    /// the reference is still the caller's.
    ///
    /// # Safety
    ///
    /// `export` must be such a reference on a [`super::Export`].
    pub(crate) unsafe fn export(export: *const c_void, size: u64) -> Result<Self> {
        let mut out = core::ptr::null_mut();
        // SAFETY: `out` is writable; `export` is handed over on success (function safety
        // requirement).
        kernel::error::to_result(unsafe { nvrs_dmabuf_export(export.cast_mut(), size, &mut out) })?;
        Ok(Self(out))
    }

    /// The address, for comparison and display.
    pub(crate) fn addr(&self) -> usize {
        self.0 as usize
    }

    /// A reference on the dma-buf, unless it is being released.
    ///
    /// # Safety
    ///
    /// The dma-buf's `release` op must not have finished (its export is still registered).
    pub(crate) unsafe fn try_get(&self) -> Option<DmaBufRef> {
        // SAFETY: The dma-buf's memory is valid until its release finishes (function safety
        // requirement); `get_file_active` fails once its file is dying.
        unsafe { nvrs_dmabuf_tryget(self.0) }.then_some(DmaBufRef(*self))
    }
}

impl DmaBufRef {
    /// Takes over the reference of a just-exported dma-buf.
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`DmaBufPtr::export`], and its creation reference must not be used
    /// otherwise.
    pub(crate) unsafe fn from_new(ptr: DmaBufPtr) -> Self {
        Self(ptr)
    }

    /// Installs the dma-buf in a new descriptor of the calling process (`O_CLOEXEC`), which takes
    /// over this reference. On error the reference is dropped, which may release the dma-buf.
    pub(crate) fn into_fd(self) -> Result<i32> {
        // SAFETY: We hold a reference on the dma-buf (type invariant).
        let fd = unsafe { nvrs_dmabuf_fd((self.0).0) };
        if fd < 0 {
            // `self` drops the reference.
            return Err(Error::from_errno(fd));
        }
        core::mem::forget(self);
        Ok(fd)
    }

    /// Tells every importer to unmap (under the reservation lock) and waits for the fences,
    /// at most `timeout_ms`; false if one had not signalled by then.
    pub(crate) fn invalidate(&self, timeout_ms: u32) -> bool {
        // SAFETY: We hold a reference on the dma-buf (type invariant); no nvrs lock is held, so
        // taking the reservation lock respects the lock order.
        unsafe { nvrs_dmabuf_invalidate((self.0).0, timeout_ms) }
    }

    /// Prints the one kernel-log line of a revocation of GPU `gpu` that gave up after
    /// `waited_ms`: the dma-buf and the fence (`fence`) or the importer it waited for.
    pub(crate) fn report_stuck(&self, gpu: u32, waited_ms: u32, fence: bool) {
        // SAFETY: We hold a reference on the dma-buf (type invariant); no nvrs lock is held, so
        // taking the reservation lock respects the lock order.
        unsafe { nvrs_dmabuf_report_stuck((self.0).0, gpu, waited_ms, fence) };
    }

    /// Removes every CPU mapping of the dma-buf.
    pub(crate) fn zap(&self) {
        // SAFETY: We hold a reference on the dma-buf (type invariant).
        unsafe { nvrs_dmabuf_zap((self.0).0) };
    }
}

impl Drop for DmaBufRef {
    fn drop(&mut self) {
        // SAFETY: We hold a reference on the dma-buf (type invariant).
        unsafe { nvrs_dmabuf_put((self.0).0) };
    }
}

/// Builds the sg_table handed to `importer` for `runs`, recording `mapping` in it; `None` if it
/// could not be allocated.
pub(crate) fn sgt_build(
    importer: &PeerRef,
    runs: &[DmaRun],
    mapping: *mut c_void,
) -> Option<*mut bindings::sg_table> {
    let n = u32::try_from(runs.len()).ok()?;
    // SAFETY: `importer` is a referenced `struct pci_dev`; `runs` is valid for `n` entries for
    // the call.
    let sgt = unsafe { nvrs_sgt_build(importer.as_raw(), runs.as_ptr(), n, mapping) };
    (!sgt.is_null()).then_some(sgt)
}
