// SPDX-License-Identifier: GPL-2.0

//! The `nvidia_p2p` ABI: constants, version helpers and `#[repr(C)]` structures.
//!
//! Everything here mirrors `include/nv-p2p.h`, which is ABI-compatible with NVIDIA's `nv-p2p.h`
//! 2.x. Consumers are C modules built against that header, so names, values, field order and
//! layout must match it exactly: the `const` assertions below check every size and field offset
//! at compile time, and the host tests compare them with what `gcc` computes from the header.
//!
//! Pointers are raw pointers because the structures cross the C boundary as they are; owning
//! them is the business of the code that allocates them. Layouts are those of 64-bit kernels
//! (x86_64, arm64), the only ones nvrs builds for.
//!
//! This module is pure (`core` only), so it is also tested on the host.

// The mirror keeps every item of `include/nv-p2p.h`, used or not, so that the host tests can
// check all of them against the C header.
#![allow(dead_code)]

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};

// Versioning.

/// `NVIDIA_P2P_MAJOR_VERSION_MASK`: the major version, bits 31:16 of a version word.
pub(crate) const MAJOR_VERSION_MASK: u32 = 0xffff_0000;
/// `NVIDIA_P2P_MINOR_VERSION_MASK`: the minor version, bits 15:0 of a version word.
pub(crate) const MINOR_VERSION_MASK: u32 = 0x0000_ffff;

/// `NVIDIA_P2P_PARAMS_VERSION`: version of [`Params`].
pub(crate) const PARAMS_VERSION: u32 = 0x0001_0001;
/// `NVIDIA_P2P_PAGE_TABLE_VERSION`: version nvrs stamps into every [`PageTable`] (2.0, with
/// `flags`). Consumers built against a 1.x header reject it, as they reject NVIDIA's own.
pub(crate) const PAGE_TABLE_VERSION: u32 = 0x0002_0000;
/// `NVIDIA_P2P_DMA_MAPPING_VERSION`: version nvrs stamps into every [`DmaMapping`].
pub(crate) const DMA_MAPPING_VERSION: u32 = 0x0002_0003;
/// `NVIDIA_P2P_RSYNC_DRIVER_VERSION`: version of [`RsyncDriver`].
pub(crate) const RSYNC_DRIVER_VERSION: u32 = 0x0001_0001;
/// `NVIDIA_P2P_RSYNC_REG_INFO_VERSION`: version of [`RsyncRegInfo`].
pub(crate) const RSYNC_REG_INFO_VERSION: u32 = 0x0002_0001;

/// `NVIDIA_P2P_MAJOR_VERSION(v)`.
pub(crate) const fn major_version(v: u32) -> u32 {
    (v & MAJOR_VERSION_MASK) >> 16
}

/// `NVIDIA_P2P_MINOR_VERSION(v)`.
pub(crate) const fn minor_version(v: u32) -> u32 {
    v & MINOR_VERSION_MASK
}

/// `NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v)`, with `found` the version word of `*p` and
/// `expected` the compiled-in `v`.
pub(crate) const fn major_version_matches(found: u32, expected: u32) -> bool {
    major_version(found) == major_version(expected)
}

/// `NVIDIA_P2P_VERSION_COMPATIBLE(p, v)`: same major version, and a minor version of `found` at
/// least that of `expected`.
pub(crate) const fn version_compatible(found: u32, expected: u32) -> bool {
    major_version_matches(found, expected) && minor_version(found) >= minor_version(expected)
}

/// `NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p)`, with `found` the version word of `*p`.
pub(crate) const fn page_table_version_compatible(found: u32) -> bool {
    version_compatible(found, PAGE_TABLE_VERSION)
}

/// `NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p)`, with `found` the version word of `*p`.
pub(crate) const fn dma_mapping_version_compatible(found: u32) -> bool {
    version_compatible(found, DMA_MAPPING_VERSION)
}

/// `NVIDIA_P2P_RSYNC_DRIVER_VERSION_COMPATIBLE(p)`, with `found` the version word of `*p`.
pub(crate) const fn rsync_driver_version_compatible(found: u32) -> bool {
    version_compatible(found, RSYNC_DRIVER_VERSION)
}

/// `NVIDIA_P2P_RSYNC_REG_INFO_VERSION_COMPATIBLE(p)`, with `found` the version word of `*p`.
pub(crate) const fn rsync_reg_info_version_compatible(found: u32) -> bool {
    version_compatible(found, RSYNC_REG_INFO_VERSION)
}

// Flags and sizes.

/// `NVIDIA_P2P_FLAGS_DEFAULT`: no flag for `nvidia_p2p_get_pages_persistent()`.
pub(crate) const FLAGS_DEFAULT: u32 = 0;
/// `NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING`: map through BAR1 even on a coherent GPU.
pub(crate) const FLAGS_FORCE_BAR1_MAPPING: u32 = 1;
/// `NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE`: in [`PageTable::flags`], the CPU may map the
/// pages cacheable (coherent mappings only, never BAR1).
pub(crate) const PAGE_TABLE_FLAGS_CPU_CACHEABLE: u32 = 0x1;
/// `NVIDIA_P2P_GPU_UUID_LEN`: bytes at [`PageTable::gpu_uuid`].
pub(crate) const GPU_UUID_LEN: usize = 16;

// Legacy mailbox parameters.

/// `NVIDIA_P2P_ARCHITECTURE_TESLA`.
pub(crate) const ARCHITECTURE_TESLA: u32 = 0;
/// `NVIDIA_P2P_ARCHITECTURE_FERMI`.
pub(crate) const ARCHITECTURE_FERMI: u32 = 1;
/// `NVIDIA_P2P_ARCHITECTURE_CURRENT`.
pub(crate) const ARCHITECTURE_CURRENT: u32 = ARCHITECTURE_FERMI;
/// `NVIDIA_P2P_PARAMS_ADDRESS_INDEX_GPU`.
pub(crate) const PARAMS_ADDRESS_INDEX_GPU: usize = 0;
/// `NVIDIA_P2P_PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE`.
pub(crate) const PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE: usize = 1;
/// `NVIDIA_P2P_PARAMS_ADDRESS_INDEX_MAX`.
pub(crate) const PARAMS_ADDRESS_INDEX_MAX: usize = PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE;

// `enum nvidia_p2p_page_size_type`, a 4-byte C enum.

/// `NVIDIA_P2P_PAGE_SIZE_4KB`: never produced by nvrs.
pub(crate) const PAGE_SIZE_4KB: u32 = 0;
/// `NVIDIA_P2P_PAGE_SIZE_64KB`: the page size of every table nvrs hands out.
pub(crate) const PAGE_SIZE_64KB: u32 = 1;
/// `NVIDIA_P2P_PAGE_SIZE_128KB`: never produced by nvrs.
pub(crate) const PAGE_SIZE_128KB: u32 = 2;
/// `NVIDIA_P2P_PAGE_SIZE_COUNT`: number of page-size values.
pub(crate) const PAGE_SIZE_COUNT: u32 = 3;

/// Bytes of a page of page-size type `t`, or `None` for a value outside the enum.
pub(crate) const fn page_size_bytes(t: u32) -> Option<u64> {
    match t {
        PAGE_SIZE_4KB => Some(4 << 10),
        PAGE_SIZE_64KB => Some(64 << 10),
        PAGE_SIZE_128KB => Some(128 << 10),
        _ => None,
    }
}

// Callbacks.

/// The `free_callback` of `nvidia_p2p_get_pages()`, called with its `data`.
pub(crate) type FreeCallback = Option<unsafe extern "C" fn(data: *mut c_void)>;
/// The `destroy_callback` of `nvidia_p2p_init_mapping()` (not supported).
pub(crate) type DestroyCallback = Option<unsafe extern "C" fn(data: *mut c_void)>;

/// `struct pci_dev`, opaque here: the kernel side casts to `bindings::pci_dev`.
#[repr(C)]
pub(crate) struct PciDev {
    _opaque: [u8; 0],
}

// Structures.

/// The Fermi member of `union nvidia_p2p_mailbox_addresses`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct FermiMailbox {
    /// Write mailbox address.
    pub(crate) wmb_addr: u64,
    /// Write mailbox data.
    pub(crate) wmb_data: u64,
    /// Read request address.
    pub(crate) rreq_addr: u64,
    /// Read completion address.
    pub(crate) rcomp_addr: u64,
    /// Reserved.
    pub(crate) reserved: [u64; 2],
}

/// `union nvidia_p2p_mailbox_addresses`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union MailboxAddresses {
    /// The only layout.
    pub(crate) fermi: FermiMailbox,
}

/// `struct nvidia_p2p_params` (`nvidia_p2p_params_t`): legacy mailbox parameters of
/// `nvidia_p2p_init_mapping()`, which nvrs does not support.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Params {
    /// [`PARAMS_VERSION`].
    pub(crate) version: u32,
    /// An `ARCHITECTURE_*` value.
    pub(crate) architecture: u32,
    /// Indexed by `PARAMS_ADDRESS_INDEX_*`.
    pub(crate) addresses: [MailboxAddresses; PARAMS_ADDRESS_INDEX_MAX + 1],
}

/// The Fermi member of `union nvidia_p2p_request_registers`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct FermiRegisters {
    /// Write request mailbox, high bits.
    pub(crate) wreqmb_h: u32,
    /// Read request mailbox, high bits.
    pub(crate) rreqmb_h: u32,
    /// Read request mailbox 0.
    pub(crate) rreqmb_0: u32,
    /// Reserved.
    pub(crate) reserved: [u32; 3],
}

/// `union nvidia_p2p_request_registers`: legacy per-page registers, always zero in nvrs.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union RequestRegisters {
    /// The only layout.
    pub(crate) fermi: FermiRegisters,
}

/// `struct nvidia_p2p_page` (`nvidia_p2p_page_t`): one 64 KiB page of pinned GPU memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Page {
    /// CPU physical address of the page (in BAR1, or in coherent GPU memory); not a DMA address.
    pub(crate) physical_address: u64,
    /// Legacy registers, zero.
    pub(crate) registers: RequestRegisters,
}

/// `struct nvidia_p2p_page_table` (`nvidia_p2p_page_table_t`): pinned GPU memory as handed to a
/// consumer by `nvidia_p2p_get_pages()` / `nvidia_p2p_get_pages_persistent()`.
#[repr(C)]
pub(crate) struct PageTable {
    /// [`PAGE_TABLE_VERSION`].
    pub(crate) version: u32,
    /// A `PAGE_SIZE_*` value (not bytes); nvrs always sets [`PAGE_SIZE_64KB`].
    pub(crate) page_size: u32,
    /// `entries` pointers to the pages, in address order.
    pub(crate) pages: *mut *mut Page,
    /// Number of pages.
    pub(crate) entries: u32,
    /// [`GPU_UUID_LEN`] raw bytes of the owning GPU's UUID.
    pub(crate) gpu_uuid: *mut u8,
    /// `PAGE_TABLE_FLAGS_*` bits.
    pub(crate) flags: u32,
}

/// `struct nvidia_p2p_dma_mapping` (`nvidia_p2p_dma_mapping_t`): a page table mapped for one peer
/// device by `nvidia_p2p_dma_map_pages()`.
#[repr(C)]
pub(crate) struct DmaMapping {
    /// [`DMA_MAPPING_VERSION`].
    pub(crate) version: u32,
    /// The page table's `page_size` (`enum nvidia_p2p_page_size_type`).
    pub(crate) page_size_type: u32,
    /// Number of DMA addresses, equal to the page table's `entries`.
    pub(crate) entries: u32,
    /// One DMA address per page, valid on `pci_dev` only.
    pub(crate) dma_addresses: *mut u64,
    /// nvrs's cookie, opaque to consumers.
    pub(crate) private: *mut c_void,
    /// The peer the mapping was made for.
    pub(crate) pci_dev: *mut PciDev,
}

/// `struct nvidia_p2p_rsync_driver` (`nvidia_p2p_rsync_driver_t`): an NVLink rsync (IBM NPU)
/// driver, registered by a consumer.
#[repr(C)]
pub(crate) struct RsyncDriver {
    /// [`RSYNC_DRIVER_VERSION`].
    pub(crate) version: u32,
    /// Takes a reference to the relaxed-ordering mode.
    pub(crate) get_relaxed_ordering_mode:
        Option<unsafe extern "C" fn(mode: *mut c_int, data: *mut c_void) -> c_int>,
    /// Drops a reference taken by `get_relaxed_ordering_mode`.
    pub(crate) put_relaxed_ordering_mode:
        Option<unsafe extern "C" fn(mode: c_int, data: *mut c_void)>,
    /// Issues an RSYNC; must not sleep.
    pub(crate) wait_for_rsync: Option<unsafe extern "C" fn(gpu: *mut PciDev, data: *mut c_void)>,
}

/// `struct nvidia_p2p_rsync_reg` (`nvidia_p2p_rsync_reg_t`): one rsync register.
#[repr(C)]
pub(crate) struct RsyncReg {
    /// Mapped register.
    pub(crate) ptr: *mut c_void,
    /// Bytes at `ptr`.
    pub(crate) size: usize,
    /// The NPU device.
    pub(crate) ibmnpu: *mut PciDev,
    /// The GPU device.
    pub(crate) gpu: *mut PciDev,
    /// Cluster id.
    pub(crate) cluster_id: u32,
    /// Socket id.
    pub(crate) socket_id: u32,
}

/// `struct nvidia_p2p_rsync_reg_info` (`nvidia_p2p_rsync_reg_info_t`).
#[repr(C)]
pub(crate) struct RsyncRegInfo {
    /// [`RSYNC_REG_INFO_VERSION`].
    pub(crate) version: u32,
    /// `entries` registers.
    pub(crate) regs: *mut RsyncReg,
    /// Number of registers.
    pub(crate) entries: usize,
}

// Layout checks: the sizes and offsets of NVIDIA's header on 64-bit kernels.

const _: () = assert!(size_of::<usize>() == 8, "the nvidia_p2p ABI is 64-bit only");

const _: () = assert!(size_of::<FermiMailbox>() == 48);
const _: () = assert!(size_of::<MailboxAddresses>() == 48);
const _: () = assert!(offset_of!(FermiMailbox, wmb_addr) == 0);
const _: () = assert!(offset_of!(FermiMailbox, wmb_data) == 8);
const _: () = assert!(offset_of!(FermiMailbox, rreq_addr) == 16);
const _: () = assert!(offset_of!(FermiMailbox, rcomp_addr) == 24);
const _: () = assert!(offset_of!(FermiMailbox, reserved) == 32);

const _: () = assert!(size_of::<Params>() == 104);
const _: () = assert!(offset_of!(Params, version) == 0);
const _: () = assert!(offset_of!(Params, architecture) == 4);
const _: () = assert!(offset_of!(Params, addresses) == 8);

const _: () = assert!(size_of::<FermiRegisters>() == 24);
const _: () = assert!(size_of::<RequestRegisters>() == 24);
const _: () = assert!(offset_of!(FermiRegisters, wreqmb_h) == 0);
const _: () = assert!(offset_of!(FermiRegisters, rreqmb_h) == 4);
const _: () = assert!(offset_of!(FermiRegisters, rreqmb_0) == 8);
const _: () = assert!(offset_of!(FermiRegisters, reserved) == 12);

const _: () = assert!(size_of::<Page>() == 32);
const _: () = assert!(offset_of!(Page, physical_address) == 0);
const _: () = assert!(offset_of!(Page, registers) == 8);

const _: () = assert!(size_of::<PageTable>() == 40);
const _: () = assert!(offset_of!(PageTable, version) == 0);
const _: () = assert!(offset_of!(PageTable, page_size) == 4);
const _: () = assert!(offset_of!(PageTable, pages) == 8);
const _: () = assert!(offset_of!(PageTable, entries) == 16);
const _: () = assert!(offset_of!(PageTable, gpu_uuid) == 24);
const _: () = assert!(offset_of!(PageTable, flags) == 32);

const _: () = assert!(size_of::<DmaMapping>() == 40);
const _: () = assert!(offset_of!(DmaMapping, version) == 0);
const _: () = assert!(offset_of!(DmaMapping, page_size_type) == 4);
const _: () = assert!(offset_of!(DmaMapping, entries) == 8);
const _: () = assert!(offset_of!(DmaMapping, dma_addresses) == 16);
const _: () = assert!(offset_of!(DmaMapping, private) == 24);
const _: () = assert!(offset_of!(DmaMapping, pci_dev) == 32);

const _: () = assert!(size_of::<RsyncDriver>() == 32);
const _: () = assert!(offset_of!(RsyncDriver, version) == 0);
const _: () = assert!(offset_of!(RsyncDriver, get_relaxed_ordering_mode) == 8);
const _: () = assert!(offset_of!(RsyncDriver, put_relaxed_ordering_mode) == 16);
const _: () = assert!(offset_of!(RsyncDriver, wait_for_rsync) == 24);

const _: () = assert!(size_of::<RsyncReg>() == 40);
const _: () = assert!(offset_of!(RsyncReg, ptr) == 0);
const _: () = assert!(offset_of!(RsyncReg, size) == 8);
const _: () = assert!(offset_of!(RsyncReg, ibmnpu) == 16);
const _: () = assert!(offset_of!(RsyncReg, gpu) == 24);
const _: () = assert!(offset_of!(RsyncReg, cluster_id) == 32);
const _: () = assert!(offset_of!(RsyncReg, socket_id) == 36);

const _: () = assert!(size_of::<RsyncRegInfo>() == 24);
const _: () = assert!(offset_of!(RsyncRegInfo, version) == 0);
const _: () = assert!(offset_of!(RsyncRegInfo, regs) == 8);
const _: () = assert!(offset_of!(RsyncRegInfo, entries) == 16);

// A callback is one nullable function pointer, as in C.
const _: () = assert!(size_of::<FreeCallback>() == size_of::<*mut c_void>());
