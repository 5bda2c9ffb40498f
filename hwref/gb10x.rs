// SPDX-License-Identifier: GPL-2.0

//! Data-center Blackwell (GB100, GB102): B100, B200, and the Grace-attached GB200.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, NvLink, PeerMmio, SizeMask,
    P2P_PAGE_SIZE, PMM_CHUNKS_DEFAULT, SZ_256G, SZ_2M, SZ_4K, SZ_512M, SZ_64K,
};

/// NVLink 5: 18 links at 50 GB/s per direction, 1.8 TB/s bidirectional per GPU
/// (anchors-and-testbed §1c).
const NVLINK5: NvLink = NvLink {
    version: 5,
    links: 18,
    link_mbps_per_direction: 50_000,
};

/// GB10x.
pub(super) static GB10X: ArchTable = ArchTable {
    name: "GB10x",
    // PMC_BOOT_42 architecture 0x1a (NV_PMC_BOOT_42_ARCHITECTURE_GB100).
    arch: Architecture::BlackwellGb10x,
    chipsets: &[
        Chipset {
            id: 0x1a0,
            name: "GB100",
            nvlink: Some(NVLINK5),
        },
        Chipset {
            id: 0x1a2,
            name: "GB102",
            nvlink: Some(NVLINK5),
        },
    ],
    device_ids: &[
        // pci.ids: B200 0x2901.
        DeviceIds {
            first: 0x2900,
            last: 0x293f,
            chip: 0x1a0,
            coherent_c2c: false,
        },
        // Grace-attached GB100 (GB200): coherent, no BAR1 (nv-p2p reference §4).
        DeviceIds {
            first: 0x2940,
            last: 0x297f,
            chip: 0x1a0,
            coherent_c2c: true,
        },
    ],
    // VER3, as Hopper (UVM hwref blackwell/gb100 reuses the Hopper MMU format).
    mmu: MmuFormat::Ver3,
    // Blackwell data-center parts add the 256G page at PDE2 (nv-p2p reference §4).
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M | SZ_512M | SZ_256G),
    va_bits: 57,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // PCIe 5.0 x16 host interface (HGX B200 platform specification).
    pcie_gen: 5,
    peer_mmio: PeerMmio::IommuMappable,
};
