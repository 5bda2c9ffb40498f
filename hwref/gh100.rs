// SPDX-License-Identifier: GPL-2.0

//! Hopper (GH100): H100, H800, H200, and the Grace-attached GH200.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, NvLink, PeerMmio, SizeMask,
    P2P_PAGE_SIZE, PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_512M, SZ_64K,
};

/// GH100.
pub(super) static GH100: ArchTable = ArchTable {
    name: "GH100",
    // PMC_BOOT_42 architecture 0x18 (NV_PMC_BOOT_42_ARCHITECTURE_GH100); chip id 0x180.
    arch: Architecture::Hopper,
    // NVLink 4: 18 links per GPU ("NV18" in nvidia-smi topo -m), 25 GB/s per direction each
    // (900 GB/s bidirectional; nvidia-smi nvlink -s reports 26.562 GB/s including encoding),
    // anchors-and-testbed §1c.
    chipsets: &[Chipset {
        id: 0x180,
        name: "GH100",
        nvlink: Some(NvLink {
            version: 4,
            links: 18,
            link_mbps_per_direction: 25_000,
        }),
    }],
    device_ids: &[
        // pci.ids: H800 0x2322/0x2324, H100 SXM5 0x2330, H100 PCIe 0x2331, H200 0x2335
        // (tests/data/h200: 10de:2335).
        DeviceIds {
            first: 0x2300,
            last: 0x233f,
            chip: 0x180,
            coherent_c2c: false,
        },
        // Grace-attached GH100 (GH200): coherent over C2C, no BAR1 ("N/A" in nvidia-smi);
        // range from NVIDIA's open kernel modules (nv-p2p reference §4).
        DeviceIds {
            first: 0x2340,
            last: 0x237f,
            chip: 0x180,
            coherent_c2c: true,
        },
    ],
    // VER3: 6 levels, 57-bit VA (UVM hwref hopper/gh100 dev_mmu.h).
    mmu: MmuFormat::Ver3,
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M | SZ_512M),
    va_bits: 57,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // The H200 here links at Gen5 x16 (tests/data/h200).
    pcie_gen: 5,
    peer_mmio: PeerMmio::IommuMappable,
};
