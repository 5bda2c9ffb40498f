// SPDX-License-Identifier: GPL-2.0

//! Ampere (GA100, GA10x): A100, A30, A10, A40, RTX 30xx, RTX A6000.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, NvLink, PeerMmio, SizeMask,
    P2P_PAGE_SIZE, PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_512M, SZ_64K,
};

/// GA10x (including the data-center GA100, which shares the architecture code).
pub(super) static GA10X: ArchTable = ArchTable {
    name: "GA10x",
    // PMC_BOOT_42 architecture 0x17 (NV_PMC_BOOT_42_ARCHITECTURE_GA100).
    arch: Architecture::Ampere,
    chipsets: &[
        // NVLink 3 on A100: 12 links at 25 GB/s per direction, 600 GB/s bidirectional
        // (anchors-and-testbed §1c).
        Chipset {
            id: 0x170,
            name: "GA100",
            nvlink: Some(NvLink {
                version: 3,
                links: 12,
                link_mbps_per_direction: 25_000,
            }),
        },
        // NVLink 3 on GA102: four x4 links, 14.0625 GB/s per direction each (GA102 whitepaper).
        Chipset {
            id: 0x172,
            name: "GA102",
            nvlink: Some(NvLink {
                version: 3,
                links: 4,
                link_mbps_per_direction: 14_062,
            }),
        },
        Chipset {
            id: 0x173,
            name: "GA103",
            nvlink: None,
        },
        Chipset {
            id: 0x174,
            name: "GA104",
            nvlink: None,
        },
        Chipset {
            id: 0x176,
            name: "GA106",
            nvlink: None,
        },
        Chipset {
            id: 0x177,
            name: "GA107",
            nvlink: None,
        },
    ],
    // pci.ids: GA100 0x2080-0x20ff (A100-SXM4-40GB 0x20b0), GA102 0x2200-0x223f (A10 0x2236),
    // GA104 0x2480-0x24ff, GA103 0x2400-0x243f, GA106 0x2500-0x257f, GA107 0x2580-0x25ff.
    device_ids: &[
        DeviceIds {
            first: 0x2080,
            last: 0x20ff,
            chip: 0x170,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2200,
            last: 0x223f,
            chip: 0x172,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2400,
            last: 0x243f,
            chip: 0x173,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2480,
            last: 0x24ff,
            chip: 0x174,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2500,
            last: 0x257f,
            chip: 0x176,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x2580,
            last: 0x25ff,
            chip: 0x177,
            coherent_c2c: false,
        },
    ],
    // VER2 (UVM hwref ampere/ga100).
    mmu: MmuFormat::Ver2,
    // Ampere adds the 512M page at PDE1 (nv-p2p reference §4).
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M | SZ_512M),
    va_bits: 49,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // PCIe 4.0 x16 (A100 PCIe product brief).
    pcie_gen: 4,
    peer_mmio: PeerMmio::IommuMappable,
};
