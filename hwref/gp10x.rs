// SPDX-License-Identifier: GPL-2.0

//! Pascal (GP100, GP10x): Tesla P100/P40/P4, GTX 10xx.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, NvLink, PeerMmio, SizeMask,
    P2P_PAGE_SIZE, PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K,
};

/// GP10x.
pub(super) static GP10X: ArchTable = ArchTable {
    name: "GP10x",
    // PMC_BOOT_42 architecture 0x13 (NV_PMC_BOOT_42_ARCHITECTURE_GP100).
    arch: Architecture::Pascal,
    chipsets: &[
        // NVLink 1 on GP100 (SXM2 P100): 4 links, 20 GB/s per direction each, 160 GB/s
        // bidirectional in all (anchors-and-testbed §1c).
        Chipset {
            id: 0x130,
            name: "GP100",
            nvlink: Some(NvLink {
                version: 1,
                links: 4,
                link_mbps_per_direction: 20_000,
            }),
        },
        Chipset {
            id: 0x132,
            name: "GP102",
            nvlink: None,
        },
        Chipset {
            id: 0x134,
            name: "GP104",
            nvlink: None,
        },
        Chipset {
            id: 0x136,
            name: "GP106",
            nvlink: None,
        },
        Chipset {
            id: 0x137,
            name: "GP107",
            nvlink: None,
        },
        Chipset {
            id: 0x138,
            name: "GP108",
            nvlink: None,
        },
    ],
    // pci.ids: GP100 0x15f0-0x15ff, GP102 0x1b00-0x1b3f, GP104 0x1b80-0x1bbf,
    // GP106 0x1c00-0x1c3f, GP107 0x1c80-0x1cbf, GP108 0x1d00-0x1d3f.
    device_ids: &[
        DeviceIds {
            first: 0x15f0,
            last: 0x15ff,
            chip: 0x130,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1b00,
            last: 0x1b3f,
            chip: 0x132,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1b80,
            last: 0x1bbf,
            chip: 0x134,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1c00,
            last: 0x1c3f,
            chip: 0x136,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1c80,
            last: 0x1cbf,
            chip: 0x137,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1d00,
            last: 0x1d3f,
            chip: 0x138,
            coherent_c2c: false,
        },
    ],
    // VER2: 5 levels, 16-byte dual PDEs (UVM hwref pascal/gp100 dev_mmu.h).
    mmu: MmuFormat::Ver2,
    // 4K/64K/2M; the 128K big page is refused from Pascal on (nv-p2p reference §4).
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M),
    // 49-bit VA, 5 levels (nv-p2p reference §4).
    va_bits: 49,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // PCIe 3.0 x16 (Tesla P100 PCIe product brief).
    pcie_gen: 3,
    peer_mmio: PeerMmio::IommuMappable,
};
