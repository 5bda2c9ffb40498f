// SPDX-License-Identifier: GPL-2.0

//! Client and workstation Blackwell (GB20x): RTX 50xx, RTX PRO 6000 Blackwell.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, PeerMmio, SizeMask, P2P_PAGE_SIZE,
    PMM_CHUNKS_DEFAULT, SZ_256G, SZ_2M, SZ_4K, SZ_512M, SZ_64K,
};

/// GB20x. No GB20x part has NVLink.
pub(super) static GB20X: ArchTable = ArchTable {
    name: "GB20x",
    // PMC_BOOT_42 architecture 0x1b (NV_PMC_BOOT_42_ARCHITECTURE_GB200).
    arch: Architecture::BlackwellGb20x,
    // Chip ids from nova-core's Chipset list.
    chipsets: &[
        Chipset {
            id: 0x1b2,
            name: "GB202",
            nvlink: None,
        },
        Chipset {
            id: 0x1b3,
            name: "GB203",
            nvlink: None,
        },
        Chipset {
            id: 0x1b5,
            name: "GB205",
            nvlink: None,
        },
        Chipset {
            id: 0x1b6,
            name: "GB206",
            nvlink: None,
        },
        Chipset {
            id: 0x1b7,
            name: "GB207",
            nvlink: None,
        },
    ],
    // pci.ids: GB202 0x2b80-0x2bff (RTX 5090 0x2b85), GB203 0x2c00-0x2c7f,
    // GB205 0x2f00-0x2f7f, GB206 0x2d00-0x2d7f, GB207 0x2d80-0x2dff.
    device_ids: &[
        DeviceIds {
            first: 0x2b80,
            last: 0x2bff,
            chip: 0x1b2,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2c00,
            last: 0x2c7f,
            chip: 0x1b3,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2d00,
            last: 0x2d7f,
            chip: 0x1b6,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2d80,
            last: 0x2dff,
            chip: 0x1b7,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2f00,
            last: 0x2f7f,
            chip: 0x1b5,
            coherent_c2c: false,
        },
    ],
    mmu: MmuFormat::Ver3,
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M | SZ_512M | SZ_256G),
    va_bits: 57,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // PCIe 5.0 x16 (RTX 5090 specifications).
    pcie_gen: 5,
    peer_mmio: PeerMmio::IommuMappable,
};
