// SPDX-License-Identifier: GPL-2.0

//! The memory behind a page table handed to a consumer.
//!
//! `nvidia_p2p_page_table` is read by C code through raw pointers: the table itself, an array
//! of `entries` pointers to pages, the pages, and 16 bytes of GPU UUID. [`TableMemory`] owns all
//! four allocations, fills them once, and frees them when the pin ends; their addresses never
//! change in between, and the table's address is the pin's name ([`TableMemory::key`]). The
//! table itself is not freed but quarantined ([`crate::p2p::quarantine`]), so its address does
//! not name another pin soon after.

use kernel::{
    alloc::KVVec,
    prelude::*, //
};

use crate::p2p::abi;

/// The allocations of one page table.
pub(crate) struct TableMemory {
    /// Always `Some` until dropped.
    table: Option<KBox<abi::PageTable>>,
    _ptrs: KVVec<*mut abi::Page>,
    _pages: KVVec<abi::Page>,
    _uuid: KBox<[u8; abi::GPU_UUID_LEN]>,
}

// SAFETY: The raw pointers point into allocations owned by the same `TableMemory`; after `new`
// nothing writes through them, and they stay valid until it is dropped.
unsafe impl Send for TableMemory {}
// SAFETY: As above: shared access only reads.
unsafe impl Sync for TableMemory {}

impl TableMemory {
    /// Builds a table of `entries` 64 KiB pages whose physical addresses `phys(i)` gives.
    pub(crate) fn new(
        entries: u32,
        uuid: &[u8; abi::GPU_UUID_LEN],
        phys: impl Fn(u32) -> Option<u64>,
    ) -> Result<Self> {
        let n = usize::try_from(entries)?;
        let zero = abi::Page {
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
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..entries {
            let mut p = zero;
            p.physical_address = phys(i).ok_or(EINVAL)?;
            pages.push(p, GFP_KERNEL)?;
        }
        let mut ptrs = KVVec::with_capacity(n, GFP_KERNEL)?;
        let base = pages.as_mut_ptr();
        for i in 0..n {
            ptrs.push(base.wrapping_add(i), GFP_KERNEL)?;
        }
        let mut uuid = KBox::new(*uuid, GFP_KERNEL)?;
        let table = KBox::new(
            abi::PageTable {
                version: abi::PAGE_TABLE_VERSION,
                page_size: abi::PAGE_SIZE_64KB,
                pages: ptrs.as_mut_ptr(),
                entries,
                gpu_uuid: uuid.as_mut_ptr(),
                flags: 0,
            },
            GFP_KERNEL,
        )?;
        Ok(Self {
            table: Some(table),
            _ptrs: ptrs,
            _pages: pages,
            _uuid: uuid,
        })
    }

    /// The table's address: what the consumer holds, and the pin's key.
    pub(crate) fn key(&self) -> usize {
        self.table
            .as_deref()
            .map_or(0, |t| core::ptr::from_ref(t) as usize)
    }

    /// Number of pages.
    pub(crate) fn entries(&self) -> u32 {
        self.table.as_deref().map_or(0, |t| t.entries)
    }

    /// Physical address of page `i`.
    pub(crate) fn phys(&self, i: usize) -> Option<u64> {
        self._pages.get(i).map(|p| p.physical_address)
    }
}

impl Drop for TableMemory {
    fn drop(&mut self) {
        if let Some(t) = self.table.take() {
            crate::p2p::quarantine::park(crate::p2p::quarantine::Parked::Table(t));
        }
    }
}
