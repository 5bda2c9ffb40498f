// SPDX-License-Identifier: GPL-2.0

//! Functions nvrs exports to other kernel modules.
//!
//! Rust items are not exported by themselves: each function here is `#[no_mangle] extern "C"`
//! and `src/exports.c`, compiled into the same module, applies `EXPORT_SYMBOL_GPL` to it. The
//! C prototypes consumers build against are in `include/nvrs.h` and `include/nv-p2p.h`.
//!
//! The `nvidia_p2p_*` functions are in [`crate::p2p::api`], except the two that look the
//! caller's VA up in its VA space ([`crate::vaspace::lookup_current`]): only this, the top
//! layer, may reach both the VA spaces and the pins.

use core::ffi::{
    c_int,
    c_void, //
};

use kernel::prelude::*;

use crate::{
    gpu,
    p2p::{
        abi,
        api, //
    },
    vaspace,
};

/// Returns the number of GPUs nvrs has bound (`nvrs_gpu_count()` in `include/nvrs.h`).
#[no_mangle]
pub(crate) extern "C" fn nvrs_gpu_count() -> u32 {
    u32::try_from(gpu::count()).unwrap_or(u32::MAX)
}

/// `nvidia_p2p_get_pages()`: a non-persistent pin; `free_callback` is mandatory.
///
/// # Safety
///
/// `page_table` must be null or valid for writing a pointer; `free_callback` and `data` must
/// stay valid until the pin is put or the callback has returned.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_get_pages(
    _p2p_token: u64,
    _va_space: u32,
    virtual_address: u64,
    length: u64,
    page_table: *mut *mut abi::PageTable,
    free_callback: abi::FreeCallback,
    data: *mut c_void,
) -> c_int {
    api::ret(api::get_pages(
        virtual_address,
        length,
        page_table,
        false,
        free_callback,
        data,
        vaspace::lookup_current,
    ))
}

/// `nvidia_p2p_get_pages_persistent()`: a pin that no free revokes.
///
/// # Safety
///
/// `page_table` must be null or valid for writing a pointer.
#[no_mangle]
pub(crate) unsafe extern "C" fn nvidia_p2p_get_pages_persistent(
    virtual_address: u64,
    length: u64,
    page_table: *mut *mut abi::PageTable,
    flags: u32,
) -> c_int {
    if flags & !abi::FLAGS_FORCE_BAR1_MAPPING != 0 {
        return EINVAL.to_errno();
    }
    // FORCE_BAR1_MAPPING selects BAR1 over coherent memory on C2C platforms; on the PCIe GPUs
    // nvrs drives it is not supported, as in NVIDIA's driver.
    if flags & abi::FLAGS_FORCE_BAR1_MAPPING != 0 {
        return ENOTSUPP.to_errno();
    }
    api::ret(api::get_pages(
        virtual_address,
        length,
        page_table,
        true,
        None,
        core::ptr::null_mut(),
        vaspace::lookup_current,
    ))
}
