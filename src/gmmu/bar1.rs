// SPDX-License-Identifier: GPL-2.0

//! BAR1's address space: its instance block and page tables in a VRAM region, and which entry
//! maps which 64 KiB of BAR1.
//!
//! BAR1 addresses are the address space's virtual addresses, from 0 to the BAR's size (a power
//! of two up to 4 GiB). Every table is made once, when the space is set up, for the whole BAR:
//! one table per directory level above PDE1 (BAR1 needs entry 0 of each), one PDE1 table with
//! an entry per 512 MiB, a dual PDE0 table per 512 MiB whose big-page halves point at one
//! big-page table per 2 MiB, and no small-page tables (BAR1 maps 64 KiB pages only). Mapping
//! or unmapping a page is then one PTE write and never allocates: the big-page table entry of
//! its BAR1 address. Region layout, from its base: the instance block (4 KiB), the directory
//! tables (4 KiB each, top first), the dual tables, the big-page tables (256 bytes each).

use super::format::{
    page_dir_base, Format, BIG_PAGE, BIG_PT_BYTES, PDE0_SPAN, PDE1_SPAN, RAMIN_PAGE_DIR_BASE,
    TABLE_BYTES,
};

/// Smallest BAR1 nvrs sets up.
pub(crate) const MIN_SIZE: u64 = 16 * 1024 * 1024;
/// Largest BAR1 nvrs sets up (page-table memory grows with it: 2 KiB per 2 MiB of BAR1).
pub(crate) const MAX_SIZE: u64 = 4 * 1024 * 1024 * 1024;

/// Why a BAR1 layout cannot be made.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LayoutError {
    /// The BAR size is not a power of two within [`MIN_SIZE`]..=[`MAX_SIZE`].
    BadSize(u64),
    /// The region base is not 4 KiB aligned.
    Misaligned(u64),
    /// The region is smaller than the tables need.
    TooSmall {
        /// Bytes needed.
        need: u64,
    },
}

/// Where BAR1's tables are, for a BAR of one size.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Bar1Layout {
    format: Format,
    size: u64,
    base: u64,
}

impl Bar1Layout {
    /// Bytes of VRAM the tables of a `size`-byte BAR1 take in `format`.
    pub(crate) fn bytes(format: Format, size: u64) -> u64 {
        let levels = format.levels().len() as u64;
        let duals = size.div_ceil(PDE1_SPAN);
        let big_pts = size / PDE0_SPAN;
        TABLE_BYTES * (1 + levels + duals) + BIG_PT_BYTES * big_pts
    }

    /// The layout of a `size`-byte BAR1 in the `len` bytes of VRAM at `base`.
    pub(crate) fn new(format: Format, size: u64, base: u64, len: u64) -> Result<Self, LayoutError> {
        if !size.is_power_of_two() || !(MIN_SIZE..=MAX_SIZE).contains(&size) {
            return Err(LayoutError::BadSize(size));
        }
        if base % TABLE_BYTES != 0 {
            return Err(LayoutError::Misaligned(base));
        }
        let need = Self::bytes(format, size);
        if len < need {
            return Err(LayoutError::TooSmall { need });
        }
        Ok(Self { format, size, base })
    }

    /// The BAR's size.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The format of the tables.
    pub(crate) fn format(&self) -> Format {
        self.format
    }

    /// The instance block (what `NV_PBUS_BAR1_BLOCK` points at).
    pub(crate) fn instance_block(&self) -> u64 {
        self.base
    }

    /// The top directory table: the page-directory base a TLB invalidate names.
    pub(crate) fn pdb(&self) -> u64 {
        self.directory(0)
    }

    /// Bytes the tables span from the instance block.
    pub(crate) fn span(&self) -> u64 {
        Self::bytes(self.format, self.size)
    }

    fn directory(&self, level: usize) -> u64 {
        self.base + TABLE_BYTES * (1 + level as u64)
    }

    fn dual(&self, i: u64) -> u64 {
        self.directory(self.format.levels().len()) + TABLE_BYTES * i
    }

    fn big_pt(&self, i: u64) -> u64 {
        self.dual(self.size.div_ceil(PDE1_SPAN)) + BIG_PT_BYTES * i
    }

    /// Every non-zero 64-bit word of an empty address space (nothing mapped), as (VRAM
    /// address, value); every other word of the region must be zero.
    pub(crate) fn setup(&self, mut write: impl FnMut(u64, u64)) {
        let (lo, hi) = page_dir_base(self.pdb());
        write(
            self.base + RAMIN_PAGE_DIR_BASE,
            u64::from(lo) | (u64::from(hi) << 32),
        );
        let levels = self.format.levels().len();
        // Entry 0 of every level but the last leads down; BAR1 is below 512 MiB * 8.
        for level in 0..levels - 1 {
            write(
                self.directory(level),
                self.format.pde(self.directory(level + 1)),
            );
        }
        for d in 0..self.size.div_ceil(PDE1_SPAN) {
            write(
                self.directory(levels - 1) + 8 * d,
                self.format.pde(self.dual(d)),
            );
        }
        for b in 0..self.size / PDE0_SPAN {
            let dual = self.dual(b / (PDE1_SPAN / PDE0_SPAN)) + 16 * (b % (PDE1_SPAN / PDE0_SPAN));
            write(dual, self.format.dual_big(self.big_pt(b)));
        }
    }

    /// The VRAM address of the PTE that maps the 64 KiB of BAR1 at `va`, if `va` is a 64 KiB
    /// boundary inside the BAR.
    pub(crate) fn pte_addr(&self, va: u64) -> Option<u64> {
        if va % BIG_PAGE != 0 || va >= self.size {
            return None;
        }
        Some(self.big_pt(va / PDE0_SPAN) + 8 * ((va % PDE0_SPAN) / BIG_PAGE))
    }

    /// The PTE that maps a 64 KiB page of VRAM at `page`.
    pub(crate) fn pte(&self, page: u64, read_only: bool) -> u64 {
        self.format.pte(page, read_only)
    }
}

/// What the bind-time self-test of BAR1's translation saw.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum SelfTest {
    /// A mapped page read what VRAM holds, and all-ones once unmapped and invalidated.
    Passed,
    /// The mapped page did not read what VRAM holds.
    NotTranslated {
        /// What BAR1 read.
        got: u32,
        /// What VRAM holds.
        want: u32,
    },
    /// After the unmap and the invalidate, BAR1 still reached the page.
    StaleAfterUnmap {
        /// What BAR1 read (all-ones would be right).
        got: u32,
    },
}

/// The VRAM size `NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE` gives: `LOWER_MAG` (9:4) <<
/// (`LOWER_SCALE` (3:0) + 20).
pub(crate) fn local_memory_size(range: u32) -> u64 {
    u64::from((range >> 4) & 0x3f) << ((range & 0xf) + 20)
}
