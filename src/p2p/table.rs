// SPDX-License-Identifier: GPL-2.0

//! The memory behind a page table handed to a consumer.
//!
//! `nvidia_p2p_page_table` is read by C code through raw pointers: the table itself, an array
//! of `entries` pointers to pages, the pages, and 16 bytes of GPU UUID. [`TableMemory`] owns
//! that memory, fills it once, and gives it up when the pin ends; its addresses never change in
//! between, and the table's address is the pin's name ([`TableMemory::key`]).
//!
//! The table, the UUID and the pages of a small table ([`INLINE_PAGES`] or fewer, the common
//! small registration) share one allocation, a [`TableBlock`]; larger tables keep their pages
//! and pointers in two more. A block is not freed when its pin ends but quarantined
//! ([`crate::p2p::quarantine`]), so its address does not name another pin soon after, and the
//! oldest quarantined block is reused for the next table instead of being freed and allocated
//! again.

use kernel::{
    alloc::KVVec,
    prelude::*, //
};

use crate::{
    hwref::P2P_PAGE_SIZE,
    p2p::{abi, quarantine}, //
};

/// Pages a [`TableBlock`] holds in place: one, the smallest registration (64 KiB).
pub(crate) const INLINE_PAGES: usize = 1;

/// An unused page entry.
const ZERO_PAGE: abi::Page = abi::Page {
    physical_address: 0,
    registers: abi::RequestRegisters {
        fermi: abi::FermiRegisters {
            wreqmb_h: 0,
            rreqmb_h: 0,
            rreqmb_0: 0,
            reserved: [0; 3],
        },
    },
};

/// One allocation: the table header the consumer holds, its UUID, and a small table's pages.
#[repr(C)]
pub(crate) struct TableBlock {
    /// First, so that the block's address is the table's.
    pub(crate) table: abi::PageTable,
    /// The GPU's UUID (`table.gpu_uuid`).
    uuid: [u8; abi::GPU_UUID_LEN],
    /// `table.pages` of a small table.
    ptrs: [*mut abi::Page; INLINE_PAGES],
    /// The pages of a small table.
    pages: [abi::Page; INLINE_PAGES],
}

impl TableBlock {
    /// An empty block, as a stale reader of a quarantined one finds it: version and entries
    /// zero, every pointer null.
    const EMPTY: TableBlock = TableBlock {
        table: abi::PageTable {
            version: 0,
            page_size: 0,
            pages: core::ptr::null_mut(),
            entries: 0,
            gpu_uuid: core::ptr::null_mut(),
            flags: 0,
        },
        uuid: [0; abi::GPU_UUID_LEN],
        ptrs: [core::ptr::null_mut(); INLINE_PAGES],
        pages: [ZERO_PAGE; INLINE_PAGES],
    };

    /// Empties the block (see [`TableBlock::EMPTY`]).
    pub(crate) fn clear(&mut self) {
        *self = Self::EMPTY;
    }
}

/// The pages of a table larger than [`INLINE_PAGES`].
struct Spilled {
    ptrs: KVVec<*mut abi::Page>,
    pages: KVVec<abi::Page>,
}

/// The memory of one page table.
pub(crate) struct TableMemory {
    /// `Some` while the table is a pin's.
    block: Option<KBox<TableBlock>>,
    /// The pages, if they do not fit in the block.
    spilled: Option<Spilled>,
}

// SAFETY: The raw pointers point into allocations owned by the same `TableMemory`; after `new`
// nothing writes through them, and they stay valid until it is dropped.
unsafe impl Send for TableMemory {}
// SAFETY: As above: shared access only reads.
unsafe impl Sync for TableMemory {}

impl TableMemory {
    /// No table: what a pin kept for reuse holds ([`TableMemory::take_block`]).
    pub(crate) const NONE: TableMemory = TableMemory {
        block: None,
        spilled: None,
    };

    /// Builds a table of `entries` 64 KiB pages, whose physical addresses `runs` gives as runs
    /// of contiguous pages (first address, pages) in order, in `block` (one the quarantine gave
    /// back for reuse) or in a new block. `-EINVAL` unless the runs hold exactly `entries`
    /// pages.
    pub(crate) fn new(
        block: Option<KBox<TableBlock>>,
        entries: u32,
        uuid: &[u8; abi::GPU_UUID_LEN],
        mut runs: impl Iterator<Item = (u64, u64)>,
    ) -> Result<Self> {
        let n = usize::try_from(entries)?;
        let page = |physical_address: u64| abi::Page {
            physical_address,
            ..ZERO_PAGE
        };
        let spilled = if n > INLINE_PAGES {
            // Both allocated at their size first: the loops only write.
            let mut pages = KVVec::with_capacity(n, GFP_KERNEL)?;
            for (first, count) in runs.by_ref() {
                for k in 0..count {
                    pages
                        .push_within_capacity(page(first + k * P2P_PAGE_SIZE))
                        .map_err(|_| EINVAL)?;
                }
            }
            if pages.len() != n {
                return Err(EINVAL);
            }
            let mut ptrs = KVVec::with_capacity(n, GFP_KERNEL)?;
            let base = pages.as_mut_ptr();
            for i in 0..n {
                ptrs.push_within_capacity(base.wrapping_add(i))
                    .map_err(|_| ENOMEM)?;
            }
            Some(Spilled { ptrs, pages })
        } else {
            None
        };
        let mut block = match block {
            Some(b) => b,
            None => KBox::new(TableBlock::EMPTY, GFP_KERNEL)?,
        };
        let b = &mut *block;
        b.uuid = *uuid;
        let pages = match spilled.as_ref() {
            Some(s) => s.ptrs.as_ptr().cast_mut(),
            None => {
                let mut slots = b.pages.iter_mut().zip(&mut b.ptrs);
                let mut filled = 0;
                for (first, count) in runs {
                    for k in 0..count {
                        let (slot, ptr) = slots.next().ok_or(EINVAL)?;
                        *slot = page(first + k * P2P_PAGE_SIZE);
                        *ptr = core::ptr::from_mut(slot);
                        filled += 1;
                    }
                }
                if filled != n {
                    return Err(EINVAL);
                }
                b.ptrs.as_mut_ptr()
            }
        };
        b.table = abi::PageTable {
            version: abi::PAGE_TABLE_VERSION,
            page_size: abi::PAGE_SIZE_64KB,
            pages,
            entries,
            gpu_uuid: b.uuid.as_mut_ptr(),
            flags: 0,
        };
        Ok(Self {
            block: Some(block),
            spilled,
        })
    }

    /// Gives up the table, leaving [`TableMemory::NONE`]: returns its block, for
    /// [`quarantine::park_pin`], and the rest (the pages of a large table), to be dropped only
    /// after the block is parked, so that a stale reader of the block never finds freed pages
    /// (the order `Drop` keeps too).
    pub(crate) fn take_block(&mut self) -> (Option<KBox<TableBlock>>, TableMemory) {
        let mut rest = core::mem::replace(self, Self::NONE);
        (rest.block.take(), rest)
    }

    /// The table's address: what the consumer holds, and the pin's key.
    pub(crate) fn key(&self) -> usize {
        self.block
            .as_deref()
            .map_or(0, |b| core::ptr::from_ref(&b.table) as usize)
    }

    /// Number of pages.
    pub(crate) fn entries(&self) -> u32 {
        self.block.as_deref().map_or(0, |b| b.table.entries)
    }

    /// Physical address of page `i`.
    pub(crate) fn phys(&self, i: usize) -> Option<u64> {
        let page = match self.spilled.as_ref() {
            Some(s) => s.pages.get(i),
            None => self
                .block
                .as_deref()
                .filter(|b| i < usize::try_from(b.table.entries).unwrap_or(0))
                .and_then(|b| b.pages.get(i)),
        };
        page.map(|p| p.physical_address)
    }
}

impl Drop for TableMemory {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            quarantine::park(quarantine::Parked::Table(b));
        }
    }
}
