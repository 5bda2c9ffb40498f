// SPDX-License-Identifier: GPL-2.0

//! Functions nvrs exports to other kernel modules.
//!
//! Rust items are not exported by themselves: each function here is `#[no_mangle] extern "C"`
//! and `src/exports.c`, compiled into the same module, applies `EXPORT_SYMBOL_GPL` to it. The
//! C prototypes consumers build against are in `include/nvrs.h`.

use crate::gpu;

/// Returns the number of GPUs nvrs has bound (`nvrs_gpu_count()` in `include/nvrs.h`).
#[no_mangle]
pub(crate) extern "C" fn nvrs_gpu_count() -> u32 {
    u32::try_from(gpu::count()).unwrap_or(u32::MAX)
}
