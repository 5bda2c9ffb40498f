// SPDX-License-Identifier: GPL-2.0

//! DMA mappings of a page table for a peer device.
//!
//! A table's pages are 64 KiB pieces of the GPU aperture. Mapping them for a peer means making
//! each reachable from that peer: with an IOMMU, an IOVA in the peer's domain; without one, the
//! bus address. nvrs maps each *run* of physically contiguous pages once with
//! `dma_map_resource` (so a 1 GiB pin of 2 MiB chunks is 512 calls, or one for a contiguous
//! allocation, instead of 16384) and hands out one DMA address per 64 KiB entry.

use kernel::{
    alloc::KVVec,
    prelude::*, //
};

use crate::{
    helpers::{
        self,
        PeerRef, //
    },
    hwref::P2P_PAGE_SIZE,
    p2p::{
        abi,
        coalesce::runs,
        table::TableMemory, //
    },
};

/// One `dma_map_resource` mapping.
struct Run {
    dma: u64,
    len: u64,
}

/// Physically contiguous runs of GPU aperture DMA-mapped for one peer, one `dma_map_resource`
/// each. Dropping it unmaps them. Shared by `nvidia_p2p` mappings and dma-buf mappings
/// ([`crate::dmabuf`]).
pub(crate) struct PeerRuns {
    runs: KVVec<Run>,
    peer: PeerRef,
}

impl PeerRuns {
    /// Maps each `(physical address, length)` of `runs` for `peer`; on failure, what was mapped
    /// is unmapped again.
    ///
    /// # Safety
    ///
    /// Every run must be GPU memory that stays allocated until the result is dropped.
    pub(crate) unsafe fn map(
        peer: PeerRef,
        runs: impl Iterator<Item = (u64, u64)>,
    ) -> Result<Self> {
        let mut this = Self {
            runs: KVVec::new(),
            peer,
        };
        for (phys, len) in runs {
            this.runs.reserve(1, GFP_KERNEL)?;
            // SAFETY: The run stays allocated until `this` is dropped (function safety
            // requirement), and `this` unmaps it then.
            let dma = unsafe { helpers::dma_map_mmio(&this.peer, phys, len) }?;
            // Room was reserved above.
            let _ = this.runs.push_within_capacity(Run { dma, len });
        }
        Ok(this)
    }

    /// The runs as `(DMA address, length)`, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.iter().map(|r| (r.dma, r.len))
    }

    /// Number of `dma_map_resource` mappings.
    pub(crate) fn count(&self) -> usize {
        self.runs.len()
    }

    /// The peer the runs are mapped for.
    pub(crate) fn peer(&self) -> &PeerRef {
        &self.peer
    }
}

impl Drop for PeerRuns {
    fn drop(&mut self) {
        for r in self.runs.iter() {
            // SAFETY: Every run was mapped for `self.peer` in `map` and is unmapped only here.
            unsafe { helpers::dma_unmap_mmio(&self.peer, r.dma, r.len) };
        }
    }
}

/// A DMA mapping of a table for one peer: the C-visible `nvidia_p2p_dma_mapping`, its address
/// array, and the runs to unmap. Dropping it unmaps.
///
/// The `nvidia_p2p_dma_mapping` itself is quarantined rather than freed
/// ([`crate::p2p::quarantine`]), so a stale pointer to it does not name another mapping soon.
pub(crate) struct DmaMapping {
    /// Always `Some` until dropped.
    mapping: Option<KBox<abi::DmaMapping>>,
    _addrs: KVVec<u64>,
    runs: PeerRuns,
}

// SAFETY: The raw pointers inside `mapping` point into `_addrs` and at the peer, which `runs`
// holds a reference on; nothing writes through them after construction.
unsafe impl Send for DmaMapping {}
// SAFETY: As above: shared access only reads.
unsafe impl Sync for DmaMapping {}

impl DmaMapping {
    /// Maps every page of `table` for `peer`. With `coalesce` false, maps each 64 KiB page on
    /// its own (the per-entry scheme of NVIDIA's driver, kept as the benchmark anchor).
    pub(crate) fn new(table: &TableMemory, peer: PeerRef, coalesce: bool) -> Result<Self> {
        let n = usize::try_from(table.entries())?;
        let mut addrs = KVVec::with_capacity(n, GFP_KERNEL)?;
        let phys = (0..n).map(|i| table.phys(i).unwrap_or(0));
        let groups: KVVec<(usize, usize, u64)> = {
            let mut g = KVVec::new();
            if coalesce {
                for r in runs(phys) {
                    g.push(r, GFP_KERNEL)?;
                }
            } else {
                for (i, p) in phys.enumerate() {
                    g.push((i, 1, p), GFP_KERNEL)?;
                }
            }
            g
        };
        let lens = groups.iter().map(|&(_, count, first)| {
            // At most `n` pages: no overflow.
            (first, u64::try_from(count).unwrap_or(0) * P2P_PAGE_SIZE)
        });
        // SAFETY: The table's pages are GPU memory its pin holds; the pin drops this mapping
        // (unmapping it) before it ends.
        let mapped = unsafe { PeerRuns::map(peer, lens) }?;
        for (dma, len) in mapped.iter() {
            for k in 0..len / P2P_PAGE_SIZE {
                // Capacity was reserved for every entry.
                let _ = addrs.push_within_capacity(dma + k * P2P_PAGE_SIZE);
            }
        }
        let mapping = KBox::new(
            abi::DmaMapping {
                version: abi::DMA_MAPPING_VERSION,
                page_size_type: abi::PAGE_SIZE_64KB,
                entries: table.entries(),
                dma_addresses: addrs.as_mut_ptr(),
                private: core::ptr::null_mut(),
                pci_dev: mapped.peer().as_abi(),
            },
            GFP_KERNEL,
        )?;
        Ok(Self {
            mapping: Some(mapping),
            _addrs: addrs,
            runs: mapped,
        })
    }

    /// The mapping's address, as handed to the consumer (its name in later calls).
    pub(crate) fn key(&self) -> usize {
        self.mapping
            .as_deref()
            .map_or(0, |m| core::ptr::from_ref(m) as usize)
    }

    /// The C-visible mapping, for handing out.
    pub(crate) fn as_ptr(&self) -> *mut abi::DmaMapping {
        self.key() as *mut abi::DmaMapping
    }

    /// The peer the mapping is for.
    pub(crate) fn peer(&self) -> &PeerRef {
        self.runs.peer()
    }

    /// Number of `dma_map_resource` mappings.
    pub(crate) fn run_count(&self) -> usize {
        self.runs.count()
    }
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        // `runs` unmaps when it is dropped, after this.
        if let Some(m) = self.mapping.take() {
            crate::p2p::quarantine::park(crate::p2p::quarantine::Parked::Mapping(m));
        }
    }
}
