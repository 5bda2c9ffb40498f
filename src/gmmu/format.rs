// SPDX-License-Identifier: GPL-2.0

//! GMMU entries of MMU versions 2 and 3.
//!
//! Field layouts from NVIDIA's published `dev_mmu.h` (open-gpu-kernel-modules,
//! `src/common/inc/swref/published/pascal/gp100/dev_mmu.h` for Ver2,
//! `.../hopper/gh100/dev_mmu.h` for Ver3) and `dev_ram.h` for the instance block:
//!
//! * Every entry: bit 0 is `VALID` in a PTE and `IS_PTE` in a PDE; bits 2:1 the aperture
//!   (PDE: 0 invalid, 1 video memory; PTE: 0 video memory).
//! * Ver2 addresses in video memory: bits 32:8 hold the address >> 12; the big-page half of a
//!   dual PDE (`NV_MMU_VER2_DUAL_PDE_ADDRESS_BIG_VID`, 32:4) the address >> 8. Read-only: PTE
//!   bit 6.
//! * Ver3 addresses: bits 51:12 hold the address >> 12 (the address itself, 4 KiB aligned); the
//!   big half, 51:8, the address >> 8. The PTE's PCF (7:3) encodes privilege, read-only, atomics
//!   and caching in one value: `REGULAR_RW_NO_ATOMIC_CACHED_ACE` is 0x8, `REGULAR_RO_...` 0xc.
//! * Directory levels above the dual PDE0 (VA bits 28:21): Ver2 at bits 48:47, 46:38, 37:29;
//!   Ver3 adds bit 56 on top and widens the next to 55:47.
//! * Instance block: `NV_RAMIN_PAGE_DIR_BASE_LO` at 0x200 (1:0 target, 0 video memory; 2
//!   volatile; 10 `USE_VER2_PT_FORMAT`; 11 `BIG_PAGE_SIZE`, 1 = 64 KiB; 31:12 base >> 12),
//!   `_HI` at 0x204 (base >> 32). `NV_PBUS_BAR1_BLOCK`: 27:0 instance block >> 12, 29:28
//!   target, 31 mode (1 virtual).

use crate::hwref::MmuFormat;

/// The big page size nvrs uses for BAR1: the P2P granularity.
pub(crate) const BIG_PAGE: u64 = 64 * 1024;
/// The span of one dual PDE0 entry.
pub(crate) const PDE0_SPAN: u64 = 2 * 1024 * 1024;
/// The span of one PDE1 entry.
pub(crate) const PDE1_SPAN: u64 = 512 * 1024 * 1024;
/// Bytes of one directory table above PDE0 and of one dual PDE0 table.
pub(crate) const TABLE_BYTES: u64 = 4096;
/// Bytes of one big-page table (32 entries of 64 KiB cover a dual PDE0 entry).
pub(crate) const BIG_PT_BYTES: u64 = (PDE0_SPAN / BIG_PAGE) * 8;
/// Offset of `NV_RAMIN_PAGE_DIR_BASE_LO` in an instance block.
pub(crate) const RAMIN_PAGE_DIR_BASE: u64 = 0x200;

const APERTURE_VIDEO_PDE: u64 = 1 << 1;
const PDB_VOLATILE: u32 = 1 << 2;
const PDB_USE_VER2_PT_FORMAT: u32 = 1 << 10;
const PDB_BIG_PAGE_64K: u32 = 1 << 11;
const BAR1_BLOCK_VIRTUAL: u32 = 1 << 31;
const V2_PTE_READ_ONLY: u64 = 1 << 6;
const V3_PCF_RW: u64 = 0x8;
const V3_PCF_RO: u64 = 0xc;

/// A page-table format nvrs can write.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Format {
    ver3: bool,
}

impl Format {
    /// The format of a family's MMU; `None` for Maxwell's Ver1, which nvrs does not write.
    pub(crate) fn new(mmu: MmuFormat) -> Option<Self> {
        match mmu {
            MmuFormat::Ver1 => None,
            MmuFormat::Ver2 => Some(Self { ver3: false }),
            MmuFormat::Ver3 => Some(Self { ver3: true }),
        }
    }

    /// The MMU version number (2 or 3).
    pub(crate) fn version(self) -> u8 {
        if self.ver3 {
            3
        } else {
            2
        }
    }

    /// The directory levels above PDE0, top first: (lowest VA bit, index bits).
    pub(crate) fn levels(self) -> &'static [(u8, u8)] {
        if self.ver3 {
            &[(56, 1), (47, 9), (38, 9), (29, 9)]
        } else {
            &[(47, 2), (38, 9), (29, 9)]
        }
    }

    /// A PDE pointing at a 4 KiB-aligned table in video memory.
    pub(crate) fn pde(self, table: u64) -> u64 {
        let addr = if self.ver3 {
            table & !0xfff
        } else {
            (table >> 12) << 8
        };
        APERTURE_VIDEO_PDE | addr
    }

    /// The low (big-page) half of a dual PDE, pointing at a 256-byte-aligned table.
    pub(crate) fn dual_big(self, table: u64) -> u64 {
        let addr = if self.ver3 {
            table & !0xff
        } else {
            (table >> 8) << 4
        };
        APERTURE_VIDEO_PDE | addr
    }

    /// A valid PTE of a page in video memory.
    pub(crate) fn pte(self, page: u64, read_only: bool) -> u64 {
        if self.ver3 {
            let pcf = if read_only { V3_PCF_RO } else { V3_PCF_RW };
            1 | (pcf << 3) | (page & !0xfff)
        } else {
            1 | (if read_only { V2_PTE_READ_ONLY } else { 0 }) | ((page >> 12) << 8)
        }
    }
}

/// The instance block's page-directory base words (`_LO`, `_HI`) for a page directory at
/// `pdb` in video memory, with 64 KiB big pages.
pub(crate) fn page_dir_base(pdb: u64) -> (u32, u32) {
    // The masks keep the bits the fields hold; both fit their words.
    let lo = (pdb & 0xffff_f000) as u32 | PDB_VOLATILE | PDB_USE_VER2_PT_FORMAT | PDB_BIG_PAGE_64K;
    (lo, (pdb >> 32) as u32)
}

/// `NV_PBUS_BAR1_BLOCK` for an instance block at `inst` in video memory, virtual mode.
pub(crate) fn bar1_block(inst: u64) -> u32 {
    ((inst >> 12) & 0x0fff_ffff) as u32 | BAR1_BLOCK_VIRTUAL
}
