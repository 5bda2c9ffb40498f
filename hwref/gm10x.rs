// SPDX-License-Identifier: GPL-2.0

//! First-generation Maxwell (GM107, GM108): GeForce GTX 750, Quadro K620/K1200, Tesla M10.

use super::{
    ArchTable, Architecture, Chipset, DeviceIds, MmuFormat, PeerMmio, SizeMask, P2P_PAGE_SIZE,
    SZ_128K, SZ_2M, SZ_4K, SZ_64K,
};

/// GM10x.
pub(super) static GM10X: ArchTable = ArchTable {
    name: "GM10x",
    // PMC_BOOT_42 architecture 0x11 (NV_PMC_BOOT_42_ARCHITECTURE_GM100, NVIDIA open-gpu-kernel-modules).
    arch: Architecture::MaxwellGm10x,
    // Chip id = arch << 4 | implementation, implementation = last digit of the chip name
    // (nv-p2p reference §4).
    chipsets: &[
        Chipset {
            id: 0x117,
            name: "GM107",
            nvlink: None,
        },
        Chipset {
            id: 0x118,
            name: "GM108",
            nvlink: None,
        },
    ],
    // pci.ids (The PCI ID Repository), vendor 10de: GM107 0x1380-0x13bf, GM108 0x1340-0x137f.
    device_ids: &[
        DeviceIds {
            first: 0x1340,
            last: 0x137f,
            chip: 0x118,
            coherent_c2c: false,
        },
        DeviceIds {
            first: 0x1380,
            last: 0x13bf,
            chip: 0x117,
            coherent_c2c: false,
        },
    ],
    // Maxwell MMU format VER1: two levels, 8-byte PDEs with big/small halves
    // (UVM hwref maxwell/gm107 dev_mmu.h, in trees up to 590).
    mmu: MmuFormat::Ver1,
    // 4K plus one big page size per VA space, 64K or 128K (uvm_mmu maxwell; nv-p2p reference §4).
    page_sizes: SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_128K),
    // VER1 page tables cover a 40-bit VA (UVM uvm_maxwell_mmu.c: 1 TiB address space).
    va_bits: 40,
    p2p_granularity: P2P_PAGE_SIZE,
    // UVM uses the 128K big page on Maxwell for user chunks; the root stays 2 MiB.
    pmm_chunk_sizes: SizeMask::from_sizes(SZ_4K | SZ_128K | SZ_2M),
    // GM107/GM108 are PCIe 3.0 x16 parts (NVIDIA GTX 750 Ti specifications).
    pcie_gen: 3,
    peer_mmio: PeerMmio::IommuMappable,
};
