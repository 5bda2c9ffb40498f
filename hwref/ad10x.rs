// SPDX-License-Identifier: GPL-2.0

//! Ada Lovelace (AD10x): L4, L40, L40S, RTX 40xx, RTX 6000 Ada.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, PeerMmio, SizeMask, P2P_PAGE_SIZE,
    PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_512M, SZ_64K,
};

/// AD10x. No Ada part has NVLink.
pub(super) static AD10X: ArchTable = ArchTable {
    name: "AD10x",
    // PMC_BOOT_42 architecture 0x19 (NV_PMC_BOOT_42_ARCHITECTURE_AD100).
    arch: Architecture::Ada,
    // Chip ids from nova-core's Chipset list; AD102 = 0x192 (nv-p2p reference §4).
    chipsets: &[
        Chipset {
            id: 0x192,
            name: "AD102",
            nvlink: None,
        },
        Chipset {
            id: 0x193,
            name: "AD103",
            nvlink: None,
        },
        Chipset {
            id: 0x194,
            name: "AD104",
            nvlink: None,
        },
        Chipset {
            id: 0x196,
            name: "AD106",
            nvlink: None,
        },
        Chipset {
            id: 0x197,
            name: "AD107",
            nvlink: None,
        },
    ],
    // pci.ids: AD102 0x2680-0x26ff (RTX 4090 0x2684, L40 0x26b5), AD103 0x2700-0x277f,
    // AD104 0x2780-0x27ff, AD106 0x2800-0x287f, AD107 0x2880-0x28ff.
    device_ids: &[
        DeviceIds {
            first: 0x2680,
            last: 0x26ff,
            chip: 0x192,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2700,
            last: 0x277f,
            chip: 0x193,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2780,
            last: 0x27ff,
            chip: 0x194,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2800,
            last: 0x287f,
            chip: 0x196,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2880,
            last: 0x28ff,
            chip: 0x197,
            coherent_c2c: false,
        },
    ],
    mmu: MmuFormat::Ver2,
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M | SZ_512M),
    va_bits: 49,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // PCIe 4.0 x16 (RTX 4090 "size=32G" BAR on a Gen4 link; L40 product brief).
    pcie_gen: 4,
    peer_mmio: PeerMmio::IommuMappable,
};
