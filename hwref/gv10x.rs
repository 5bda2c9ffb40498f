// SPDX-License-Identifier: GPL-2.0

//! Volta (GV100): Tesla V100, Titan V, Quadro GV100.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, NvLink, PeerMmio, SizeMask,
    P2P_PAGE_SIZE, PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K,
};

/// GV10x.
pub(super) static GV10X: ArchTable = ArchTable {
    name: "GV10x",
    // PMC_BOOT_42 architecture 0x14 (NV_PMC_BOOT_42_ARCHITECTURE_GV100).
    arch: Architecture::Volta,
    // NVLink 2 on V100: 6 links, 25 GB/s per direction each, 300 GB/s bidirectional in all
    // (anchors-and-testbed §1c, DGX-1 V100 whitepaper).
    chipsets: &[Chipset {
        id: 0x140,
        name: "GV100",
        nvlink: Some(NvLink {
            version: 2,
            links: 6,
            link_mbps_per_direction: 25_000,
        }),
    }],
    // pci.ids: GV100 0x1d80-0x1dbf (V100-SXM2 0x1db1, V100-PCIE-16GB 0x1db4).
    device_ids: &[DeviceIds {
        first: 0x1d80,
        last: 0x1dbf,
        chip: 0x140,
        coherent_c2c: false,
    }],
    mmu: MmuFormat::Ver2,
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M),
    va_bits: 49,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: PMM_CHUNKS_DEFAULT,
    // V100-PCIE-16GB is PCIe Gen3 (anchors-and-testbed §1b).
    pcie_gen: 3,
    peer_mmio: PeerMmio::IommuMappable,
};
