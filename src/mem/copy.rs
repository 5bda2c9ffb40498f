// SPDX-License-Identifier: GPL-2.0

//! Copying GPU memory: the hook compaction moves bytes through.
//!
//! A real GPU moves memory with a copy engine (CE): the driver pushes a copy into a channel and
//! waits on a semaphore, and the CPU never touches the bytes. nvrs boots no GSP and runs no
//! channels; compaction's only backend copies through the CPU and a flat aperture, which is
//! what a GPU without a usable copy engine falls back to, and all the emulated GPUs have. The
//! GPU model has an engine ([`crate::ce`]), which scrubs and compacts its memory (which has no
//! flat aperture) instead ([`crate::mem::reach::Reach::copy`]).

use kernel::prelude::*;

use crate::helpers;

/// Moves bytes between two ranges of one GPU's memory.
pub(crate) trait CopyEngine: Send + Sync {
    /// Copies `len` bytes from CPU physical address `src` to `dst` (both in the GPU's
    /// aperture, page aligned) and returns once the copy is complete and visible.
    ///
    /// # Safety
    ///
    /// Both ranges must be memory the caller owns and nobody else can reach during the copy.
    unsafe fn copy(&self, dst: u64, src: u64, len: u64) -> Result;

    /// The backend's name, for `pmm/stats`.
    fn name(&self) -> &'static str;
}

/// Copies through CPU mappings of the aperture.
pub(crate) struct ApertureCopy;

impl CopyEngine for ApertureCopy {
    unsafe fn copy(&self, dst: u64, src: u64, len: u64) -> Result {
        // SAFETY: The caller owns both ranges (function safety requirement).
        unsafe { helpers::copy_mmio(dst, src, len) }
    }

    fn name(&self) -> &'static str {
        "cpu-aperture"
    }
}

/// The backend every GPU nvrs manages memory of uses today.
pub(crate) static APERTURE_COPY: ApertureCopy = ApertureCopy;
