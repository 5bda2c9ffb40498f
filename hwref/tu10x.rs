// SPDX-License-Identifier: GPL-2.0

//! Turing (TU10x, TU11x): Tesla T4, RTX 20xx, GTX 16xx, Quadro RTX.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, NvLink, PeerMmio, SizeMask,
    P2P_PAGE_SIZE, PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K,
};

/// TU10x. The oldest family NVIDIA's open kernel modules (GSP firmware) support.
pub(super) static TU10X: ArchTable = ArchTable {
    name: "TU10x",
    // PMC_BOOT_42 architecture 0x16 (NV_PMC_BOOT_42_ARCHITECTURE_TU100).
    arch: Architecture::Turing,
    // Chip ids from nova-core's Chipset list (TU116 is implementation 8, not 6).
    chipsets: &[
        // TU102: NVLink 2, two x8 links at 25 GB/s per direction (RTX 2080 Ti NVLink bridge).
        Chipset {
            id: 0x162,
            name: "TU102",
            nvlink: Some(NvLink {
                version: 2,
                links: 2,
                link_mbps_per_direction: 25_000,
            }),
        },
        // TU104: one link (RTX 2080 / Quadro RTX 5000 NVLink bridge).
        Chipset {
            id: 0x164,
            name: "TU104",
            nvlink: Some(NvLink {
                version: 2,
                links: 1,
                link_mbps_per_direction: 25_000,
            }),
        },
        Chipset {
            id: 0x166,
            name: "TU106",
            nvlink: None,
        },
        Chipset {
            id: 0x167,
            name: "TU117",
            nvlink: None,
        },
        Chipset {
            id: 0x168,
            name: "TU116",
            nvlink: None,
        },
    ],
    // pci.ids: TU102 0x1e00-0x1e7f, TU104 0x1e80-0x1eff (T4 0x1eb8), TU106 0x1f00-0x1f7f,
    // TU117 0x1f80-0x1fff, TU116 0x2180-0x21ff.
    device_ids: &[
        DeviceIds {
            first: 0x1e00,
            last: 0x1e7f,
            chip: 0x162,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1e80,
            last: 0x1eff,
            chip: 0x164,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1f00,
            last: 0x1f7f,
            chip: 0x166,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1f80,
            last: 0x1fff,
            chip: 0x167,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2180,
            last: 0x21ff,
            chip: 0x168,
            coherent_c2c: false,
        },
    ],
    // VER2 (UVM hwref turing/tu102 dev_mmu.h).
    mmu: MmuFormat::Ver2,
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M),
    va_bits: 49,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // PCIe 3.0 x16 (Tesla T4 product brief).
    pcie_gen: 3,
    peer_mmio: PeerMmio::IommuMappable,
};
