// SPDX-License-Identifier: GPL-2.0

//! The `nvidia_p2p` peer-memory API.
//!
//! # GPUDirect RDMA
//!
//! GPUDirect RDMA lets a third-party PCIe device, typically an RDMA NIC, read and write GPU
//! memory directly, without bouncing through system memory. The GPU exposes its memory on the
//! bus through its framebuffer aperture (BAR1, or coherent memory on NVLink-C2C systems); the
//! peer DMAs to those bus addresses. NVIDIA's driver offers this to other kernel modules through
//! the `nvidia_p2p_*` functions declared in `nv-p2p.h`; nvrs provides the same functions with the
//! same ABI (`include/nv-p2p.h`, mirrored in [`abi`]).
//!
//! # Who calls it
//!
//! Kernel modules, never user space directly: NIC drivers and peer-memory bridges such as
//! nvidia-peermem (which plugs GPU memory into the InfiniBand core's peer-memory clients), and
//! GDRCopy's gdrdrv (which pins GPU memory and lets user space `mmap` it through BAR1 for
//! low-latency CPU copies). They act on behalf of a process that owns the GPU memory, and call
//! from that process's context; every call may sleep.
//!
//! # Objects
//!
//! * A *page table* ([`abi::PageTable`]) describes a pinned range of GPU memory: one entry per
//!   64 KiB (the P2P granularity on every architecture), each holding the CPU physical address of
//!   that piece of the aperture, plus the GPU's UUID. `nvidia_p2p_get_pages()` or
//!   `nvidia_p2p_get_pages_persistent()` create it; the range must be 64 KiB-aligned.
//! * A *DMA mapping* ([`abi::DmaMapping`]) is a page table mapped for one peer device
//!   (`nvidia_p2p_dma_map_pages()`): one DMA address per entry, valid on that peer only, through
//!   the IOMMU if there is one. A table may have several; each belongs to its table.
//!
//! Both are allocated, stamped with their version word and freed by nvrs only; consumers read
//! them and check the version with the `*_VERSION_COMPATIBLE()` helpers.
//!
//! # Persistent and non-persistent pins
//!
//! A *non-persistent* pin (`nvidia_p2p_get_pages()`) comes with a mandatory `free_callback`: if the
//! memory goes away while pinned (its owner frees it, or the GPU is removed), nvrs revokes the pin.
//! It calls `free_callback(data)` once, in process context, where it may sleep, holding no nvrs
//! lock; the consumer quiesces every DMA and CPU access before returning and may call
//! `nvidia_p2p_free_page_table()` (which ends the table's tombstone, below) and the no-op
//! `nvidia_p2p_free_dma_mapping()`. Then nvrs unmaps and frees every DMA mapping of the table and
//! frees the table. The consumer's pointers are stale from then on, and nvrs treats the pointers it
//! is later given (`nvidia_p2p_put_pages()`, `nvidia_p2p_dma_unmap_pages()`) purely as lookup keys:
//! a stale one is not found, and the call returns 0. Table and mapping memory is quarantined after
//! use ([`quarantine`]), so a stale pointer does not name a newer pin or mapping either: a revoked
//! pin's table stays reserved (a tombstone, up to [`quarantine::TOMBS_MAX`], the oldest ending
//! first) until its consumer puts it or frees the table, however many pins end meanwhile, and
//! `nvidia_p2p_dma_map_pages()` on it returns `-EINVAL`. A pointer used after the consumer's *own*
//! put (a double put) is only protected for [`quarantine::CAPACITY`] table ends.
//!
//! `p2p_token` and `va_space` (NVIDIA's CUDA-context handles for the pre-2.0 token interface)
//! are accepted and ignored: the VA space is always the calling process's.
//!
//! A *persistent* pin (`nvidia_p2p_get_pages_persistent()`) has no callback and is never revoked:
//! the memory and a reference to its GPU stay held until `nvidia_p2p_put_pages_persistent()`,
//! even if the owner frees the memory meanwhile.
//!
//! The legacy mailbox calls (`nvidia_p2p_init_mapping()` / `nvidia_p2p_destroy_mapping()`) and the
//! IBM NPU rsync calls exist for link compatibility only.

pub(crate) mod abi;
pub(crate) mod api;
pub(crate) mod coalesce;
pub(crate) mod dma;
pub(crate) mod pin;
pub(crate) mod profile;
pub(crate) mod quarantine;
pub(crate) mod table;
