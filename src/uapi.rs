// SPDX-License-Identifier: GPL-2.0

//! The user API of `/dev/nvrs`, once for Rust: the `#[repr(C)]` structures, constants and ioctl
//! numbers of `include/uapi/nvrs.h`.
//!
//! The header is what C programs build against; this module is the same API for nvrs's Rust
//! users, the module ([`crate::chardev`]) and nvrs-smi (`tools/nvrs-smi/src/uapi.rs` includes
//! this file by path), so there is one Rust definition and one C definition. The host tests
//! (`tests/host/src/uapi_tests.rs`) compile a C program against the header and compare every
//! structure's size and alignment, every field's offset and size, every constant, every macro
//! and every ioctl number with this file, and fail when the header has a field, structure or
//! `NVRS_` macro this file does not describe. The module also checks the ioctl numbers against
//! the kernel's own `_IOC` encoding at compile time.
//!
//! Every structure is plain integers and arrays of them, laid out without padding (the host
//! tests check that too), so any bit pattern is a valid value and all of a value's bytes are
//! initialised. Layouts are those of 64-bit Linux (x86_64, arm64), the only targets of nvrs.
//!
//! This module is pure (`core` only).

// The mirror keeps every item of `include/uapi/nvrs.h`, whether or not the module or nvrs-smi
// uses it, so that the host tests can check all of them against the header.
#![allow(dead_code)]

use core::mem::size_of;

/// `NVRS_IOCTL_MAGIC`: the ioctl type of every nvrs command.
pub(crate) const IOCTL_MAGIC: u32 = 0xE5;

/// `NVRS_ALLOC_ALIGN`: granularity of allocations and of `nvidia_p2p` pins, 64 KiB.
pub(crate) const ALLOC_ALIGN: u64 = 1 << 16;

// The `_IOC` encoding of `<asm-generic/ioctl.h>` (x86 and arm64): command number in bits 7:0,
// type in 15:8, argument size in 29:16, direction in 31:30.
const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_TYPESHIFT: u32 = IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
/// `_IOC_WRITE`: user space writes the argument (the kernel reads it).
const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: user space reads the argument (the kernel writes it).
const IOC_READ: u32 = 2;

/// `_IOC(dir, NVRS_IOCTL_MAGIC, nr, size)`. Evaluated at compile time only: a number or size
/// that does not fit its field stops the build.
const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    assert!(nr < 1 << IOC_NRBITS);
    assert!(size < 1 << IOC_SIZEBITS);
    // Lossless: `size` is below 2^14 (asserted above), and `From` is not `const`.
    let size = size as u32;
    (dir << IOC_DIRSHIFT) | (size << IOC_SIZESHIFT) | (IOCTL_MAGIC << IOC_TYPESHIFT) | nr
}

/// `_IOR(NVRS_IOCTL_MAGIC, nr, T)`.
const fn ior<T>(nr: u32) -> u32 {
    ioc(IOC_READ, nr, size_of::<T>())
}

/// `_IOW(NVRS_IOCTL_MAGIC, nr, T)`.
const fn iow<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, nr, size_of::<T>())
}

/// `_IOWR(NVRS_IOCTL_MAGIC, nr, T)`.
const fn iowr<T>(nr: u32) -> u32 {
    ioc(IOC_READ | IOC_WRITE, nr, size_of::<T>())
}

/// `struct nvrs_gpu_info`: `NVRS_IOCTL_GPU_INFO`, one GPU's identity.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct GpuInfo {
    /// In: GPU index, 0 .. number of GPUs - 1.
    pub(crate) index: u32,
    /// Out: chip id, e.g. 0x180 for GH100.
    pub(crate) chipset: u32,
    /// Out: bytes of GPU memory nvrs manages.
    pub(crate) fb_size: u64,
    /// Out: bytes of it currently free.
    pub(crate) fb_free: u64,
    /// Out: GPU UUID (as `nvidia_p2p_page_table.gpu_uuid`).
    pub(crate) uuid: [u8; 16],
    /// Out: PCI name, NUL-terminated (`0000:03:00.0`).
    pub(crate) name: [u8; 32],
    /// Out: chip name, NUL-terminated (`GH100`).
    pub(crate) chip: [u8; 16],
}

/// `struct nvrs_alloc`: `NVRS_IOCTL_ALLOC`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Alloc {
    /// In: GPU index.
    pub(crate) gpu: u32,
    /// In: `ALLOC_*` flags.
    pub(crate) flags: u32,
    /// In: bytes, a non-zero multiple of [`ALLOC_ALIGN`].
    pub(crate) size: u64,
    /// Out: GPU virtual address of the allocation (in: zero).
    pub(crate) va: u64,
}

/// `NVRS_ALLOC_CONTIGUOUS`: physically contiguous memory.
pub(crate) const ALLOC_CONTIGUOUS: u32 = 1 << 0;
/// `NVRS_ALLOC_ZERO`: memory that reads as zero on first use; accepted, all memory does.
pub(crate) const ALLOC_ZERO: u32 = 1 << 1;
/// `NVRS_ALLOC_P2PDMA`: memory mapped for the CPU with struct pages the kernel's P2PDMA knows,
/// so that `O_DIRECT` I/O can DMA into it.
pub(crate) const ALLOC_P2PDMA: u32 = 1 << 2;
/// `NVRS_ALLOC_FLAGS`: every flag [`Alloc::flags`] may have.
pub(crate) const ALLOC_FLAGS: u32 = ALLOC_CONTIGUOUS | ALLOC_ZERO | ALLOC_P2PDMA;

/// `struct nvrs_free`: `NVRS_IOCTL_FREE`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Free {
    /// In: VA returned by `NVRS_IOCTL_ALLOC`.
    pub(crate) va: u64,
}

/// `NVRS_GPU_STATS_VERSION`: version of [`GpuStats`] described here.
pub(crate) const GPU_STATS_VERSION: u32 = 4;
/// `NVRS_CHUNK_SIZES`: entries of [`GpuStats::chunk_size`] and of each row of
/// [`GpuStats::chunks`].
pub(crate) const CHUNK_SIZES: usize = 4;
/// `NVRS_CHUNK_FREE`: row of [`GpuStats::chunks`] counting free chunks.
pub(crate) const CHUNK_FREE: usize = 0;
/// `NVRS_CHUNK_ALLOCATED`: row counting allocated chunks.
pub(crate) const CHUNK_ALLOCATED: usize = 1;
/// `NVRS_CHUNK_IS_SPLIT`: row counting chunks split into smaller ones.
pub(crate) const CHUNK_IS_SPLIT: usize = 2;
/// `NVRS_CHUNK_TEMP_PINNED`: row counting chunks being allocated or moved.
pub(crate) const CHUNK_TEMP_PINNED: usize = 3;
/// `NVRS_CHUNK_STATES`: rows of [`GpuStats::chunks`].
pub(crate) const CHUNK_STATES: usize = 4;
/// `NVRS_P2PDMA_NONE`: [`GpuStats::p2pdma_state`] of a GPU without struct pages.
pub(crate) const P2PDMA_NONE: u32 = 0;
/// `NVRS_P2PDMA_PROVIDER`: [`GpuStats::p2pdma_state`] of a GPU whose memory has struct pages.
pub(crate) const P2PDMA_PROVIDER: u32 = 1;

/// `struct nvrs_gpu_stats`: `NVRS_IOCTL_GPU_STATS`, the stable statistics of one GPU
/// (version [`GPU_STATS_VERSION`]; later versions only add fields in place of reserved ones).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct GpuStats {
    /// In: GPU index.
    pub(crate) index: u32,
    /// Out: [`GPU_STATS_VERSION`].
    pub(crate) version: u32,
    /// Out: bytes of GPU memory nvrs manages (0 if it manages none).
    pub(crate) fb_total: u64,
    /// Out: bytes allocated (including chunks being allocated).
    pub(crate) fb_used: u64,
    /// Out: bytes free.
    pub(crate) fb_free: u64,
    /// Out: bytes free and known to be zero.
    pub(crate) fb_free_zeroed: u64,
    /// Out: the largest free extent in bytes.
    pub(crate) largest_free: u64,
    /// Out: bytes of the framebuffer aperture (BAR1).
    pub(crate) bar1_total: u64,
    /// Out: bytes of live `nvidia_p2p` pins.
    pub(crate) bar1_pinned: u64,
    /// Out: 1000 * (1 - largest_free / fb_free), 0 when nothing is free.
    pub(crate) fragmentation_permille: u32,
    /// Out: live `nvidia_p2p` pins.
    pub(crate) pins: u32,
    /// Out: live `nvidia_p2p` DMA mappings.
    pub(crate) dma_mappings: u32,
    /// Out: valid entries of `chunk_size`.
    pub(crate) chunk_levels: u32,
    /// Out: the memory manager's chunk sizes, smallest first.
    pub(crate) chunk_size: [u64; CHUNK_SIZES],
    /// Out: chunks per state (`CHUNK_*` rows) and size (as `chunk_size`).
    pub(crate) chunks: [[u64; CHUNK_SIZES]; CHUNK_STATES],
    /// Out: allocations the memory manager refused.
    pub(crate) alloc_failures: u64,
    /// Out: live dma-bufs exported from the GPU's memory (version 2).
    pub(crate) dmabufs: u32,
    /// Out: importer mappings of them (version 2).
    pub(crate) dmabuf_mappings: u32,
    /// Out: compactions run on the GPU's memory (version 2).
    pub(crate) compactions: u64,
    /// Out: bytes they moved (version 2).
    pub(crate) compacted_bytes: u64,
    /// Out: calls the GPU's fault controls made fail (version 3).
    pub(crate) faults_injected: u64,
    /// Out: pins the fault control `revoke now` revoked (version 3).
    pub(crate) faults_revoked: u64,
    /// Out: the BAR1 budget a fault control set, 0 if none (version 3).
    pub(crate) bar1_budget: u64,
    /// Out: `P2PDMA_*` (version 4).
    pub(crate) p2pdma_state: u32,
    /// Zero.
    pub(crate) reserved32: u32,
    /// Out: bytes of live `NVRS_ALLOC_P2PDMA` allocations (version 4).
    pub(crate) p2pdma_bytes: u64,
}

/// `struct nvrs_export_dmabuf`: `NVRS_IOCTL_EXPORT_DMABUF`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ExportDmabuf {
    /// In: first byte, inside one of the caller's allocations, a multiple of [`ALLOC_ALIGN`].
    pub(crate) va: u64,
    /// In: bytes, a non-zero multiple of [`ALLOC_ALIGN`], within the same allocation.
    pub(crate) size: u64,
    /// In: zero.
    pub(crate) flags: u32,
    /// Out: the dma-buf (in: zero).
    pub(crate) fd: i32,
}

/// `NVRS_ROOT_FREE`: a free 2 MiB root (bytes of [`PmmMap::map`], kind bits).
pub(crate) const ROOT_FREE: u8 = 0;
/// `NVRS_ROOT_ALLOCATED`: one allocated 2 MiB chunk.
pub(crate) const ROOT_ALLOCATED: u8 = 1;
/// `NVRS_ROOT_SPLIT`: split into 64 KiB / 4 KiB chunks.
pub(crate) const ROOT_SPLIT: u8 = 2;
/// `NVRS_ROOT_CONTIG`: part of a contiguous run of roots.
pub(crate) const ROOT_CONTIG: u8 = 3;
/// `NVRS_ROOT_TEMP`: being allocated or moved.
pub(crate) const ROOT_TEMP: u8 = 4;
/// `NVRS_ROOT_PINNED`: holds P2P-pinned or dma-buf-exported memory.
pub(crate) const ROOT_PINNED: u8 = 0x8;
/// The kind bits of a root byte (`NVRS_ROOT_KIND`).
const ROOT_KIND_MASK: u8 = 0x7;
/// Where a root byte's sixteenths in use start (`NVRS_ROOT_USED`).
const ROOT_USED_SHIFT: u32 = 4;
/// The most sixteenths a root byte can say: 15/16 or more.
pub(crate) const ROOT_USED_MAX: u8 = 15;

/// `NVRS_ROOT_KIND(b)`: the `ROOT_*` kind of a root byte.
pub(crate) const fn root_kind(b: u8) -> u8 {
    b & ROOT_KIND_MASK
}

/// `NVRS_ROOT_USED(b)`: the sixteenths of a root in use.
pub(crate) const fn root_used(b: u8) -> u8 {
    b >> ROOT_USED_SHIFT
}

/// The root byte of a root of `kind` (`ROOT_*`), `pinned` or not, with `sixteenths` of it in
/// use (more than [`ROOT_USED_MAX`] says [`ROOT_USED_MAX`]).
pub(crate) const fn root_byte(kind: u8, pinned: bool, sixteenths: u8) -> u8 {
    let used = if sixteenths > ROOT_USED_MAX {
        ROOT_USED_MAX
    } else {
        sixteenths
    };
    let pin = if pinned { ROOT_PINNED } else { 0 };
    (kind & ROOT_KIND_MASK) | pin | (used << ROOT_USED_SHIFT)
}

/// `struct nvrs_pmm_map`: `NVRS_IOCTL_PMM_MAP`, the memory manager's roots, one byte each.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct PmmMap {
    /// In: GPU index.
    pub(crate) gpu: u32,
    /// In: bytes available at `map`; out: roots the GPU has.
    pub(crate) roots: u32,
    /// Out: bytes per root (2 MiB).
    pub(crate) root_size: u64,
    /// In: user pointer to the bytes (`ROOT_*`, see [`root_byte`]).
    pub(crate) map: u64,
}

/// `struct nvrs_process_usage`: one process's memory on one GPU.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ProcessUsage {
    /// Process id (in the caller's PID namespace).
    pub(crate) pid: i32,
    /// GPU index.
    pub(crate) gpu: u32,
    /// Bytes of live allocations.
    pub(crate) bytes: u64,
}

/// Most entries of one `NVRS_IOCTL_PROCESSES` ("at most 4096" in the header).
pub(crate) const PROCESSES_MAX: u32 = 4096;

/// `struct nvrs_processes`: `NVRS_IOCTL_PROCESSES`, processes with GPU memory.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Processes {
    /// In: entries available at `entries` (at most [`PROCESSES_MAX`]); out: entries written.
    pub(crate) count: u32,
    /// Zero.
    pub(crate) pad: u32,
    /// In: user pointer to [`ProcessUsage`]`[count]`.
    pub(crate) entries: u64,
}

/// `NVRS_CE_IN_USE`: nvrs scrubs and compacts with the GPU's copy engine.
pub(crate) const CE_IN_USE: u32 = 0x1;

/// `struct nvrs_gpu_copy_engine`: `NVRS_IOCTL_GPU_COPY_ENGINE`, a GPU's copy engine.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct GpuCopyEngine {
    /// In: GPU index.
    pub(crate) index: u32,
    /// Out: `CE_*`.
    pub(crate) flags: u32,
    /// Out: transfers carried out since the GPU's reset.
    pub(crate) launches: u64,
    /// Out: bytes copied or filled since then.
    pub(crate) bytes: u64,
}

/// `NVRS_PROCESS_STATS_VERSION`: the version of [`ProcessStats`]'s entries.
pub(crate) const PROCESS_STATS_VERSION: u32 = 1;
/// The smallest `entry_size` of [`ProcessStats`]: the fields of [`ProcessUsage`].
pub(crate) const PROCESS_ENTRY_MIN: u32 = 16;
/// The largest `entry_size` of [`ProcessStats`].
pub(crate) const PROCESS_ENTRY_MAX: u32 = 4096;

/// `struct nvrs_process_entry`: one process's use of one GPU (version 1).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ProcessEntry {
    /// Process id (in the caller's PID namespace).
    pub(crate) pid: i32,
    /// GPU index.
    pub(crate) gpu: u32,
    /// Bytes of live allocations.
    pub(crate) bytes: u64,
    /// Live allocations.
    pub(crate) allocations: u32,
    /// Live `nvidia_p2p` pins on them.
    pub(crate) pins: u32,
    /// dma-buf exports of them that hold their memory.
    pub(crate) dmabufs: u32,
    /// Zero.
    pub(crate) reserved: u32,
}

/// `struct nvrs_process_stats`: `NVRS_IOCTL_PROCESS_STATS`, what each process holds on each
/// GPU.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ProcessStats {
    /// Out: [`PROCESS_STATS_VERSION`].
    pub(crate) version: u32,
    /// In: entries available at `entries` (at most [`PROCESSES_MAX`]); out: entries written.
    pub(crate) count: u32,
    /// In: bytes per entry at `entries`; out: bytes of each entry filled.
    pub(crate) entry_size: u32,
    /// Zero.
    pub(crate) pad: u32,
    /// In: user pointer to `count` entries of `entry_size` bytes.
    pub(crate) entries: u64,
}

/// `NVRS_TOPO_MAX`: most endpoints (GPUs, then peer devices) [`Topology`] describes.
pub(crate) const TOPO_MAX: usize = 32;
/// The version of [`Topology`] (`@version: out: 1` in the header).
pub(crate) const TOPOLOGY_VERSION: u32 = 1;
/// `NVRS_LINK_SELF`: `X`, an endpoint and itself.
pub(crate) const LINK_SELF: u8 = 1;
/// `NVRS_LINK_PIX`: at most one PCIe bridge.
pub(crate) const LINK_PIX: u8 = 2;
/// `NVRS_LINK_PXB`: several PCIe bridges, no host bridge.
pub(crate) const LINK_PXB: u8 = 3;
/// `NVRS_LINK_PHB`: through a PCIe host bridge.
pub(crate) const LINK_PHB: u8 = 4;
/// `NVRS_LINK_NODE`: between host bridges of a NUMA node.
pub(crate) const LINK_NODE: u8 = 5;
/// `NVRS_LINK_SYS`: between NUMA nodes.
pub(crate) const LINK_SYS: u8 = 6;
/// The bit that marks `NVRS_LINK_NV(n)`.
const LINK_NV_BIT: u8 = 0x80;
/// The most NVLinks `NVRS_LINK_NV(n)` can count.
pub(crate) const LINK_NV_MAX: u8 = 0x7f;

/// `NVRS_LINK_NV(n)`: a bonded set of `n` NVLinks (more than [`LINK_NV_MAX`] says
/// [`LINK_NV_MAX`]).
pub(crate) const fn link_nv(n: u8) -> u8 {
    LINK_NV_BIT | if n > LINK_NV_MAX { LINK_NV_MAX } else { n }
}

/// The NVLinks of a link code, if it is an `NVRS_LINK_NV(n)`.
pub(crate) const fn link_nvlinks(code: u8) -> Option<u8> {
    if code & LINK_NV_BIT != 0 {
        Some(code & LINK_NV_MAX)
    } else {
        None
    }
}

/// `struct nvrs_topology_endpoint`: a GPU or peer device in [`Topology`].
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct TopologyEndpoint {
    /// `domain << 16 | bus << 8 | devfn`.
    pub(crate) pci_id: u32,
    /// NUMA node, -1 if unknown.
    pub(crate) numa_node: i32,
    /// CPUs near it as a cpulist (`0-15`), NUL-terminated.
    pub(crate) cpu_affinity: [u8; 56],
}

impl TopologyEndpoint {
    /// An endpoint of no PCI function and no NUMA node.
    pub(crate) const EMPTY: Self = Self {
        pci_id: 0,
        numa_node: -1,
        cpu_affinity: [0; 56],
    };
}

/// `struct nvrs_topology`: `NVRS_IOCTL_TOPOLOGY`, how GPUs and peers reach each other.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Topology {
    /// Out: [`TOPOLOGY_VERSION`].
    pub(crate) version: u32,
    /// Out: GPUs, the first entries of `ep`.
    pub(crate) gpus: u32,
    /// Out: peer devices, after the GPUs.
    pub(crate) peers: u32,
    /// Out: the `p2p_topology` parameter (0 by topology, 1 allow, 2 deny).
    pub(crate) gate: u32,
    /// Out: the endpoints.
    pub(crate) ep: [TopologyEndpoint; TOPO_MAX],
    /// Out: `LINK_*` between endpoints i and j.
    pub(crate) link: [[u8; TOPO_MAX]; TOPO_MAX],
    /// Out: 1 if GPU i's memory may be DMA-mapped for endpoint j.
    pub(crate) p2p: [[u8; TOPO_MAX]; TOPO_MAX],
}

impl Topology {
    /// No endpoints, no links.
    pub(crate) const EMPTY: Self = Self {
        version: 0,
        gpus: 0,
        peers: 0,
        gate: 0,
        ep: [TopologyEndpoint::EMPTY; TOPO_MAX],
        link: [[0; TOPO_MAX]; TOPO_MAX],
        p2p: [[0; TOPO_MAX]; TOPO_MAX],
    };
}

/// `NVRS_PCIE_COUNTERS`: the GPU has BAR1 traffic counters (the GPU model).
pub(crate) const PCIE_COUNTERS: u32 = 0x1;
/// `NVRS_PCIE_BAR1_VIRTUAL`: nvrs maps BAR1 through page tables it wrote.
pub(crate) const PCIE_BAR1_VIRTUAL: u32 = 0x2;

/// `struct nvrs_gpu_pcie`: `NVRS_IOCTL_GPU_PCIE`, a GPU's PCIe traffic counters.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct GpuPcie {
    /// In: GPU index.
    pub(crate) index: u32,
    /// Out: `PCIE_*`.
    pub(crate) flags: u32,
    /// Out: bytes written into BAR1 since the GPU's reset.
    pub(crate) bar1_rx_bytes: u64,
    /// Out: bytes read from BAR1.
    pub(crate) bar1_tx_bytes: u64,
    /// Out: bytes of BAR1 mapped now.
    pub(crate) bar1_mapped: u64,
    /// Out: BAR1 accesses that did not translate.
    pub(crate) bar1_faults: u32,
    /// Out: TLB invalidates the GPU carried out.
    pub(crate) tlb_invalidates: u32,
}

/// `NVRS_IOCTL_GPU_COUNT`: the number of bound GPUs, a `__u32`.
pub(crate) const IOCTL_GPU_COUNT: u32 = ior::<u32>(0);
/// `NVRS_IOCTL_GPU_INFO`.
pub(crate) const IOCTL_GPU_INFO: u32 = iowr::<GpuInfo>(1);
/// `NVRS_IOCTL_ALLOC`.
pub(crate) const IOCTL_ALLOC: u32 = iowr::<Alloc>(2);
/// `NVRS_IOCTL_FREE`.
pub(crate) const IOCTL_FREE: u32 = iow::<Free>(3);
/// `NVRS_IOCTL_GPU_STATS`.
pub(crate) const IOCTL_GPU_STATS: u32 = iowr::<GpuStats>(4);
/// `NVRS_IOCTL_EXPORT_DMABUF`.
pub(crate) const IOCTL_EXPORT_DMABUF: u32 = iowr::<ExportDmabuf>(5);
/// `NVRS_IOCTL_PMM_MAP`.
pub(crate) const IOCTL_PMM_MAP: u32 = iowr::<PmmMap>(6);
/// `NVRS_IOCTL_PROCESSES`.
pub(crate) const IOCTL_PROCESSES: u32 = iowr::<Processes>(7);
/// `NVRS_IOCTL_TOPOLOGY`.
pub(crate) const IOCTL_TOPOLOGY: u32 = ior::<Topology>(8);
/// `NVRS_IOCTL_GPU_PCIE`.
pub(crate) const IOCTL_GPU_PCIE: u32 = iowr::<GpuPcie>(9);
/// `NVRS_IOCTL_PROCESS_STATS`.
pub(crate) const IOCTL_PROCESS_STATS: u32 = iowr::<ProcessStats>(10);
/// `NVRS_IOCTL_GPU_COPY_ENGINE`.
pub(crate) const IOCTL_GPU_COPY_ENGINE: u32 = iowr::<GpuCopyEngine>(11);

// The sizes the header's layout gives (the host tests check every offset too).
const _: () = assert!(size_of::<GpuInfo>() == 88);
const _: () = assert!(size_of::<Alloc>() == 24);
const _: () = assert!(size_of::<Free>() == 8);
const _: () = assert!(size_of::<GpuStats>() == 312);
const _: () = assert!(size_of::<ExportDmabuf>() == 24);
const _: () = assert!(size_of::<PmmMap>() == 24);
const _: () = assert!(size_of::<ProcessUsage>() == 16);
const _: () = assert!(size_of::<Processes>() == 16);
const _: () = assert!(size_of::<ProcessEntry>() == 32);
const _: () = assert!(size_of::<ProcessStats>() == 24);
const _: () = assert!(size_of::<GpuCopyEngine>() == 24);
const _: () = assert!(size_of::<TopologyEndpoint>() == 64);
const _: () = assert!(size_of::<GpuPcie>() == 40);
const _: () = assert!(size_of::<Topology>() == 16 + 64 * TOPO_MAX + 2 * TOPO_MAX * TOPO_MAX);
