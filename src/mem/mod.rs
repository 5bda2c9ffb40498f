// SPDX-License-Identifier: GPL-2.0

//! GPU memory: each GPU's framebuffer memory ([`FbMemory`](fb::FbMemory)) and the allocations
//! made of it.
//!
//! The layer the users of GPU memory stand on: the per-process VA index ([`crate::vaspace`]),
//! the peer-memory pins ([`crate::p2p`]) and the dma-buf exports ([`crate::dmabuf`]) all use
//! it, and it uses none of them.
//!
//! An [`Allocation`] is GPU memory on one GPU at a contiguous range of GPU VAs; physically it is
//! a list of memory-manager chunks (2 MiB roots for the bulk, 64 KiB chunks for the tail) or,
//! on request, one physically contiguous run of roots. Processes find their allocations by VA
//! in their VA space ([`crate::vaspace`]); `nvidia_p2p_get_pages()` pins them ([`crate::p2p`]),
//! `mmap` maps them for the CPU ([`cpu_map`]), dma-buf exports hold them ([`crate::dmabuf`]),
//! and compaction moves their pieces ([`compact`]). Each GPU's memory lists its allocations
//! ([`FbMemory::allocs`](fb::FbMemory::allocs)), so that GPU removal and compaction look at that
//! GPU's allocations only.
//!
//! # Isolation
//!
//! Memory never reaches anyone but its owner:
//!
//! * **Scrubbed.** Every chunk is zero when it is handed out: the memory manager tracks which
//!   free chunks are known to be zero, allocation zeroes the others before the allocation
//!   becomes reachable, and release zeroes memory that a CPU mapping or a pin could have
//!   written before it returns to the manager (memory nobody could reach is still zero).
//! * **No mapping outlives its allocation.** CPU mappings are filled on demand by the fault
//!   handler under the allocation's lock, after checking that it is live; release marks it
//!   released under that lock and then removes every user mapping of it, so a stale mapping
//!   faults (`SIGBUS`) and can never reach memory handed to someone else, however `mmap`, fault
//!   and release interleave.
//! * **No pin outlives the memory.** Release revokes every non-persistent pin (its free callback
//!   runs, then its DMA mappings are torn down) before the memory returns. Persistent pins and
//!   exported dma-bufs ([`crate::dmabuf`]) keep their chunks allocated until they are put or
//!   released.
//! * **No request outlives the memory.** An allocation made of struct pages for P2PDMA is given
//!   back only once the block layer let go of every page ([`p2pdma`]).
//!
//! # Lifetime
//!
//! An allocation is *released* by `NVRS_IOCTL_FREE`, by its VA space's teardown, or by its GPU
//! going away. Release makes it unreachable (no new pins or mappings), removes its CPU mappings,
//! revokes its non-persistent pins and returns its memory once no pin holds it. The
//! [`Allocation`] object itself lives on while a pin or a dma-buf refers to it (both hold a
//! reference), which is what makes their stale accesses harmless; its VAs are reused only once
//! it is gone, and then as late as possible ([`va`]). A CPU mapping does not hold it: it
//! holds the allocation's [`cpu_map::CpuHandle`], which release empties, so a mapping left
//! behind after a free keeps no VAs reserved.
//!
//! # Files
//!
//! * [`fb`]: a GPU's memory manager, its removal bookkeeping and retired managers;
//! * [`reach`]: how the CPU and peers reach the memory (a flat aperture, or BAR1);
//! * [`backing`]: an allocation's pieces, allocated, scrubbed and given back;
//! * [`allocation`]: the allocation object and its release;
//! * [`holder`]: what holds an allocation's memory, as the allocation sees it;
//! * [`va`]: the GPU VA allocator all allocations share;
//! * [`cpu_map`]: CPU mappings by fault;
//! * [`p2pdma`]: allocations made of struct pages, for storage DMA straight into GPU memory;
//! * [`compact`]: compaction's mover, and [`copy`], the copy engine hook it moves bytes with;
//! * [`faults`]: the fault controls' hooks (controls exist in test builds only).
//!
//! # Locking
//!
//! The lock order of all of nvrs is written down in [`crate::locking`].

pub(crate) mod allocation;
pub(crate) mod backing;
pub(crate) mod compact;
pub(crate) mod copy;
pub(crate) mod cpu_map;
#[cfg(nvrs_testing)]
pub(crate) mod faults;
#[cfg(not(nvrs_testing))]
#[path = "faults_off.rs"]
pub(crate) mod faults;
pub(crate) mod fb;
pub(crate) mod holder;
pub(crate) mod p2pdma;
pub(crate) mod reach;
pub(crate) mod va;

pub(crate) use allocation::Allocation;
