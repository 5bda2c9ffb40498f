// SPDX-License-Identifier: GPL-2.0

//! Hardware reference tables, one per GPU architecture family (Maxwell to Blackwell).
//!
//! Everything nvrs needs to know about a GPU generation lives here as data, each figure with its
//! source in a comment: which chips belong to the family, the GPU MMU's page-table format and the
//! page sizes it can map, the virtual address width, the granularity at which memory is exported
//! to peers (`nvidia_p2p_*` always uses 64 KiB), the chunk sizes the physical memory manager
//! splits its 2 MiB root chunks into, the PCIe generation, NVLink per chip, and how a peer device
//! may reach the framebuffer aperture (BAR1) through an IOMMU.
//!
//! Identification ([`ident`]) turns the `PMC_BOOT_0` / `PMC_BOOT_42` registers (or, where they
//! cannot be read, the PCI device id) into a [`Chipset`] and the [`ArchTable`] that holds it.
//!
//! This module is pure: it uses `core` only, so the same files build into `nvrs.ko` and into the
//! host test crate (`tests/host`).

pub(crate) mod ident;

mod ad10x;
mod ga10x;
mod gb10x;
mod gb20x;
mod gh100;
mod gm10x;
mod gm20x;
mod gp10x;
mod gv10x;
mod tu10x;

/// 4 KiB, the GPU MMU's small page.
pub(crate) const SZ_4K: u64 = 1 << 12;
/// 64 KiB, the big page on Pascal and later (and one of Maxwell's two big-page choices).
pub(crate) const SZ_64K: u64 = 1 << 16;
/// 128 KiB, Maxwell's other big-page size.
pub(crate) const SZ_128K: u64 = 1 << 17;
/// 2 MiB, the PDE0-level "huge" page and the physical memory manager's root chunk.
pub(crate) const SZ_2M: u64 = 1 << 21;
/// 512 MiB, the PDE1-level page on Ampere and later.
pub(crate) const SZ_512M: u64 = 1 << 29;
/// 256 GiB, the PDE2-level page on Blackwell data-center parts.
pub(crate) const SZ_256G: u64 = 1 << 38;

/// The root chunk of the physical memory manager: the unit in which framebuffer memory is
/// tracked, and the largest chunk a single allocation hands out (UVM's `UVM_CHUNK_SIZE_MAX`).
pub(crate) const ROOT_CHUNK_SIZE: u64 = SZ_2M;

/// The granularity of `nvidia_p2p_get_pages`: addresses and lengths are multiples of it and each
/// page-table entry describes one such page (`NVIDIA_P2P_PAGE_SIZE_64KB`, on every architecture;
/// nv-p2p.c in NVIDIA's open kernel modules).
pub(crate) const P2P_PAGE_SIZE: u64 = SZ_64K;

/// A set of power-of-two sizes, one bit per size (bit `n` set means `1 << n` is in the set).
///
/// Used both for the page sizes an MMU can map and for the chunk sizes the memory manager uses,
/// like UVM's `uvm_chunk_sizes_mask_t`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct SizeMask(u64);

impl SizeMask {
    /// Builds a mask from an OR of power-of-two sizes.
    pub(crate) const fn from_sizes(sizes: u64) -> Self {
        Self(sizes)
    }

    /// Whether `size` is in the set.
    pub(crate) const fn contains(self, size: u64) -> bool {
        size.is_power_of_two() && self.0 & size != 0
    }

    /// The largest size in the set, if any.
    pub(crate) const fn largest(self) -> Option<u64> {
        if self.0 == 0 {
            None
        } else {
            Some(1 << (63 - self.0.leading_zeros()))
        }
    }

    /// The smallest size in the set, if any.
    pub(crate) const fn smallest(self) -> Option<u64> {
        if self.0 == 0 {
            None
        } else {
            Some(1 << self.0.trailing_zeros())
        }
    }

    /// Iterates over the sizes, smallest first.
    pub(crate) fn iter(self) -> impl Iterator<Item = u64> {
        (0..64u32)
            .map(|b| 1u64 << b)
            .filter(move |s| self.0 & s != 0)
    }
}

/// GPU architecture families, by the `ARCHITECTURE` field of `NV_PMC_BOOT_42` (bits 29:24).
///
/// Codes from NVIDIA's open kernel modules (`nv_arch.h`: `NV2080_CTRL_MC_ARCH_INFO_ARCHITECTURE_*`
/// is this value shifted left by 4) and nova-core's `Architecture`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum Architecture {
    /// First-generation Maxwell (GM10x).
    MaxwellGm10x = 0x11,
    /// Second-generation Maxwell (GM20x).
    MaxwellGm20x = 0x12,
    /// Pascal (GP10x).
    Pascal = 0x13,
    /// Volta (GV100).
    Volta = 0x14,
    /// Turing (TU10x, TU11x).
    Turing = 0x16,
    /// Ampere (GA100 and GA10x).
    Ampere = 0x17,
    /// Hopper (GH100).
    Hopper = 0x18,
    /// Ada Lovelace (AD10x).
    Ada = 0x19,
    /// Data-center Blackwell (GB10x).
    BlackwellGb10x = 0x1a,
    /// Client / workstation Blackwell (GB20x).
    BlackwellGb20x = 0x1b,
}

impl Architecture {
    /// The marketing name of the family.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::MaxwellGm10x | Self::MaxwellGm20x => "Maxwell",
            Self::Pascal => "Pascal",
            Self::Volta => "Volta",
            Self::Turing => "Turing",
            Self::Ampere => "Ampere",
            Self::Hopper => "Hopper",
            Self::Ada => "Ada",
            Self::BlackwellGb10x | Self::BlackwellGb20x => "Blackwell",
        }
    }

    /// The `PMC_BOOT_42` architecture code.
    pub(crate) const fn code(self) -> u8 {
        self as u8
    }
}

/// The GPU MMU page-table format a family uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MmuFormat {
    /// Maxwell: two levels, 8-byte PDEs with big and small halves, 40-bit VA.
    Ver1,
    /// Pascal to Ada: five levels, 16-byte dual PDEs, 49-bit VA.
    Ver2,
    /// Hopper and later: six levels, 57-bit VA, PCF fields in PTEs and PDEs.
    Ver3,
}

/// How a peer device may reach this family's framebuffer aperture.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PeerMmio {
    /// The aperture can be mapped into a peer's IOMMU domain with `dma_map_resource`, as NVIDIA's
    /// driver does for PCIe GPUs when `NVreg_DmaRemapPeerMmio=1` (its default; the H200 host in
    /// `tests/data/h200` runs with it).
    IommuMappable,
}

/// One NVLink configuration of a chip.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct NvLink {
    /// NVLink generation (1 to 5).
    pub(crate) version: u8,
    /// Links per GPU.
    pub(crate) links: u8,
    /// Bandwidth of one link in one direction, in MB/s.
    pub(crate) link_mbps_per_direction: u32,
}

/// One chip of a family.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Chipset {
    /// `(architecture << 4) | implementation`, the `CHIP_ID` field of `PMC_BOOT_42` (29:20).
    pub(crate) id: u16,
    /// The chip's name, e.g. `GH100`.
    pub(crate) name: &'static str,
    /// NVLink, on chips that have it.
    pub(crate) nvlink: Option<NvLink>,
}

impl Chipset {
    /// The architecture code held in the chip id.
    pub(crate) const fn arch_code(&self) -> u8 {
        (self.id >> 4) as u8
    }
}

/// An inclusive range of PCI device ids (vendor 0x10de) that belong to one chip.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DeviceIds {
    /// First device id of the range.
    pub(crate) first: u16,
    /// Last device id of the range.
    pub(crate) last: u16,
    /// Chip id of the devices in the range.
    pub(crate) chip: u16,
    /// Whether these parts are cache-coherent with the CPU over C2C (Grace-attached) and expose
    /// no BAR1 aperture.
    pub(crate) coherent_c2c: bool,
}

/// The reference data of one architecture family.
#[derive(Debug)]
pub(crate) struct ArchTable {
    /// Table name, e.g. `GH100` or `GA10x`.
    pub(crate) name: &'static str,
    /// The family.
    pub(crate) arch: Architecture,
    /// The chips of the family.
    pub(crate) chipsets: &'static [Chipset],
    /// PCI device-id ranges, for identification where registers cannot be read.
    pub(crate) device_ids: &'static [DeviceIds],
    /// GPU MMU page-table format.
    pub(crate) mmu: MmuFormat,
    /// Page sizes the GPU MMU can map.
    pub(crate) page_sizes: SizeMask,
    /// Width of a GPU virtual address, in bits.
    pub(crate) va_bits: u8,
    /// Granularity of P2P export (see [`P2P_PAGE_SIZE`]).
    pub(crate) p2p_granularity: u64,
    /// Chunk sizes the physical memory manager uses for this family (always includes the root).
    pub(crate) pmm_chunk_sizes: SizeMask,
    /// Highest PCIe generation of the family's parts.
    pub(crate) pcie_gen: u8,
    /// How peers may reach the aperture.
    pub(crate) peer_mmio: PeerMmio,
}

impl ArchTable {
    /// Looks up a chip of this family by chip id.
    pub(crate) fn chipset(&self, id: u16) -> Option<&'static Chipset> {
        self.chipsets.iter().find(|c| c.id == id)
    }
}

/// Every family nvrs knows, by ascending architecture code.
pub(crate) static TABLES: [&ArchTable; 10] = [
    &gm10x::GM10X,
    &gm20x::GM20X,
    &gp10x::GP10X,
    &gv10x::GV10X,
    &tu10x::TU10X,
    &ga10x::GA10X,
    &gh100::GH100,
    &ad10x::AD10X,
    &gb10x::GB10X,
    &gb20x::GB20X,
];

/// The table of an architecture code, if nvrs knows the family.
pub(crate) fn table_for_arch(code: u8) -> Option<&'static ArchTable> {
    TABLES.iter().copied().find(|t| t.arch.code() == code)
}

/// The standard chunk sizes of the memory manager: 4 KiB, 64 KiB and the 2 MiB root (UVM's user
/// chunk sizes on Pascal and later: GPU page sizes clipped to [PAGE_SIZE, 2 MiB]).
pub(crate) const PMM_CHUNKS_DEFAULT: SizeMask = SizeMask::from_sizes(SZ_4K | SZ_64K | SZ_2M);
