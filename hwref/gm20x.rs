// SPDX-License-Identifier: GPL-2.0

//! Second-generation Maxwell (GM200, GM204, GM206): GTX 9xx, Titan X, Tesla M40/M60.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, PeerMmio, SizeMask, P2P_PAGE_SIZE,
    SZ_128K, SZ_2M, SZ_4K, SZ_64K,
};

/// GM20x.
pub(super) static GM20X: ArchTable = ArchTable {
    name: "GM20x",
    // PMC_BOOT_42 architecture 0x12 (NV_PMC_BOOT_42_ARCHITECTURE_GM200).
    arch: Architecture::MaxwellGm20x,
    chipsets: &[
        Chipset {
            id: 0x120,
            name: "GM200",
            nvlink: None,
        },
        Chipset {
            id: 0x124,
            name: "GM204",
            nvlink: None,
        },
        Chipset {
            id: 0x126,
            name: "GM206",
            nvlink: None,
        },
    ],
    // pci.ids: GM204 0x13c0-0x13ff, GM206 0x1400-0x143f, GM200 0x17c0-0x17ff.
    device_ids: &[
        DeviceIds {
            first: 0x13c0,
            last: 0x13ff,
            chip: 0x124,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1400,
            last: 0x143f,
            chip: 0x126,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x17c0,
            last: 0x17ff,
            chip: 0x120,
            coherent_c2c: false,
        },
    ],
    // Same MMU as GM10x (UVM treats all Maxwell alike: uvm_maxwell_mmu.c).
    mmu: MmuFormat::Ver1,
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_128K),
    va_bits: 40,
    p2p_granularity: P2P_PAGE_SIZE,
    pmm_chunk_sizes: SizeMask::from_sizes(SZ_4K | SZ_128K | SZ_2M),
    // PCIe 3.0 x16 (NVIDIA Tesla M40 / M60 product briefs).
    pcie_gen: 3,
    peer_mmio: PeerMmio::IommuMappable,
};
