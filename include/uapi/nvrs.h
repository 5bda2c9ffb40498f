/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note OR MIT */
/*
 * nvrs user API: /dev/nvrs, the "cudaMalloc side" of nvrs.
 *
 * A process opens /dev/nvrs, allocates GPU memory on a chosen GPU and gets
 * a GPU virtual address (VA) for it. VAs are per process: every open file of
 * one process shares its VA space, which belongs to the process's address
 * space. The allocations die when the process exits or execs, or when the
 * last of its files is closed, whichever comes first; a child that inherited
 * the file neither keeps them alive nor may use it (-EPERM). In that
 * process's context, in-kernel RDMA drivers find the memory by VA with
 * nvidia_p2p_get_pages() (include/nv-p2p.h).
 *
 * mmap(fd, offset = VA, MAP_SHARED) maps an allocation, or a 64 KiB-aligned
 * part of it, for CPU access through the GPU's framebuffer aperture,
 * write-combined; read-only mappings are allowed, private (-EINVAL) and
 * executable (-EPERM) ones are not. Pages are mapped on first access. Once
 * the allocation is freed (or its process exits, or its GPU goes away) every
 * access through such a mapping raises SIGBUS: a mapping never reaches memory
 * handed to someone else.
 *
 * Isolation: all memory is zero when handed out (memory a mapping or a pin
 * could have written is scrubbed when it is freed). VAs are unique among
 * live allocations of all processes and reused only after the VA space has
 * been cycled through (freed VAs are handed out again as late as possible).
 *
 * Access policy: the device node is created mode 0600, owned by root; who
 * may allocate GPU memory is decided by whoever changes that (for example a
 * udev rule giving a group access). Every ioctl validates its argument:
 * unknown commands give -ENOTTY, bad sizes, flags or reserved fields -EINVAL,
 * unknown GPUs (or one being removed) -ENODEV, unknown VAs -ENOENT, exhausted
 * memory -ENOMEM; ALLOC and FREE need a file opened for writing (-EBADF) and
 * the process that opened it (-EPERM); ALLOC on a GPU whose memory is still
 * pinned from before it was last removed gives -EBUSY until those pins are
 * put, and -EIO on a GPU model whose BAR1 failed to unmap memory. On a GPU
 * model, mmap maps the allocation through BAR1 and NVRS_IOCTL_EXPORT_DMABUF
 * maps the exported range there (both -ENOMEM when BAR1 is full).
 *
 * dma-buf: NVRS_IOCTL_EXPORT_DMABUF turns a 64 KiB-aligned range of an
 * allocation into a dma-buf file descriptor, the form in which RDMA drivers
 * (ibv_reg_dmabuf_mr()) and other devices import memory. The dma-buf holds
 * its memory: freeing the VA, or the process exiting, does not free memory a
 * dma-buf still references; the memory returns once the allocation is freed
 * and the last reference to each of its dma-bufs is gone. Importers must be
 * able to do peer-to-peer DMA (allow_peer2peer) on a path the P2P topology
 * gate allows (-EOPNOTSUPP otherwise). When the GPU goes away, importers are
 * told to unmap (dma_buf_invalidate_mappings()) and new mappings or attaches
 * fail with -ENODEV; CPU mappings of the dma-buf then raise SIGBUS. Pinned
 * importers that cannot be revoked keep their mapping, and the memory stays
 * held (and is not handed out again) until they release it, as for a
 * persistent nvidia_p2p pin.
 */
#ifndef _UAPI_NVRS_H
#define _UAPI_NVRS_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define NVRS_IOCTL_MAGIC	0xE5

/* Granularity of allocations and of nvidia_p2p pins: 64 KiB. */
#define NVRS_ALLOC_ALIGN	(1ULL << 16)

/**
 * struct nvrs_gpu_info - NVRS_IOCTL_GPU_INFO
 * @index: in: GPU index, 0 .. number of GPUs - 1
 * @chipset: out: chip id, e.g. 0x180 for GH100
 * @fb_size: out: bytes of GPU memory nvrs manages
 * @fb_free: out: bytes of it currently free
 * @uuid: out: GPU UUID (as nvidia_p2p_page_table.gpu_uuid)
 * @name: out: PCI name, NUL-terminated ("0000:03:00.0")
 * @chip: out: chip name, NUL-terminated ("GH100")
 */
struct nvrs_gpu_info {
	__u32 index;
	__u32 chipset;
	__u64 fb_size;
	__u64 fb_free;
	__u8 uuid[16];
	char name[32];
	char chip[16];
};

/**
 * struct nvrs_alloc - NVRS_IOCTL_ALLOC
 * @gpu: in: GPU index
 * @flags: in: NVRS_ALLOC_* flags
 * @size: in: bytes, a non-zero multiple of NVRS_ALLOC_ALIGN
 * @va: out: GPU virtual address of the allocation
 */
struct nvrs_alloc {
	__u32 gpu;
	__u32 flags;
	__u64 size;
	__u64 va;
};

/* Physically contiguous memory (big P2P regions, coalesced DMA mappings). */
#define NVRS_ALLOC_CONTIGUOUS	(1U << 0)
/* Memory that reads as zero on first use: accepted; all memory does. */
#define NVRS_ALLOC_ZERO		(1U << 1)
/*
 * Storage DMA straight into GPU memory: the allocation's CPU mapping (mmap of
 * /dev/nvrs) is made of the struct pages the kernel's P2PDMA keeps for the
 * GPU's memory, so O_DIRECT reads and writes (read/write, io_uring) on a block
 * device that supports P2PDMA (NVMe) DMA between the device and the GPU with
 * no bounce through system memory. The memory is pinned where it is
 * (compaction never moves it), and a free waits until the block layer has let
 * go of every page. Whether a device may reach the GPU is the kernel's
 * decision: a path it refuses fails the request (EREMOTEIO). -EOPNOTSUPP if
 * the GPU's memory has no struct pages (nvrs.ko p2pdma=0, or registration
 * failed: dmesg says why; nvrs-smi -q shows the state). On a GPU model the
 * struct pages are BAR1's: the allocation takes a BAR1 run of its size for
 * its life (-ENOMEM when BAR1 has no room).
 */
#define NVRS_ALLOC_P2PDMA	(1U << 2)
#define NVRS_ALLOC_FLAGS	(NVRS_ALLOC_CONTIGUOUS | NVRS_ALLOC_ZERO | \
				 NVRS_ALLOC_P2PDMA)

/**
 * struct nvrs_free - NVRS_IOCTL_FREE
 * @va: in: VA returned by NVRS_IOCTL_ALLOC
 *
 * Non-persistent nvidia_p2p pins of the allocation are revoked through their
 * free callbacks first; persistent pins keep the memory until they are put.
 */
struct nvrs_free {
	__u64 va;
};

/* Version of struct nvrs_gpu_stats this header describes. */
#define NVRS_GPU_STATS_VERSION	4
/* Entries of nvrs_gpu_stats.chunk_size[] and of each row of chunks[][]. */
#define NVRS_CHUNK_SIZES	4
/* Rows of nvrs_gpu_stats.chunks[][]: the memory manager's chunk states. */
#define NVRS_CHUNK_FREE		0
#define NVRS_CHUNK_ALLOCATED	1
#define NVRS_CHUNK_IS_SPLIT	2
#define NVRS_CHUNK_TEMP_PINNED	3
#define NVRS_CHUNK_STATES	4
/* nvrs_gpu_stats.p2pdma_state: the GPU's memory as a P2PDMA provider. */
#define NVRS_P2PDMA_NONE	0	/* no struct pages: NVRS_ALLOC_P2PDMA fails */
#define NVRS_P2PDMA_PROVIDER	1	/* struct pages for all of its memory */

/**
 * struct nvrs_gpu_stats - NVRS_IOCTL_GPU_STATS: the stable statistics of one GPU
 * @index: in: GPU index
 * @version: out: NVRS_GPU_STATS_VERSION; later versions only add fields in
 *	place of reserved ones
 * @fb_total: out: bytes of GPU memory nvrs manages (0 if it manages none)
 * @fb_used: out: bytes allocated (including chunks being allocated)
 * @fb_free: out: bytes free
 * @fb_free_zeroed: out: bytes free and known to be zero
 * @largest_free: out: the largest free extent in bytes (adjacent free 2 MiB
 *	chunks count as one)
 * @bar1_total: out: bytes of the framebuffer aperture (BAR1)
 * @bar1_pinned: out: bytes of live nvidia_p2p pins
 * @fragmentation_permille: out: 1000 * (1 - largest_free / fb_free), 0 when
 *	nothing is free
 * @pins: out: live nvidia_p2p pins
 * @dma_mappings: out: live nvidia_p2p DMA mappings
 * @chunk_levels: out: valid entries of @chunk_size
 * @chunk_size: out: the memory manager's chunk sizes, smallest first
 * @chunks: out: chunks per state (NVRS_CHUNK_*) and size (as @chunk_size)
 * @alloc_failures: out: allocations the memory manager refused
 * @dmabufs: out: live dma-bufs exported from the GPU's memory (version 2)
 * @dmabuf_mappings: out: importer mappings of them (version 2)
 * @compactions: out: compactions run on the GPU's memory (version 2)
 * @compacted_bytes: out: bytes they moved (version 2)
 * @faults_injected: out: calls the GPU's fault controls (debugfs faults) made
 *	fail (version 3)
 * @faults_revoked: out: pins the fault control "revoke now" revoked (version 3)
 * @bar1_budget: out: the BAR1 budget a fault control set, 0 if none
 *	(version 3)
 * @p2pdma_state: out: NVRS_P2PDMA_* (version 4)
 * @reserved32: zero (the last room in the structure: a version that needs
 *	more comes with a new ioctl number)
 * @p2pdma_bytes: out: bytes of live NVRS_ALLOC_P2PDMA allocations (version 4)
 *
 * debugfs keeps the detailed dumps; this is what tools such as nvidia-smi
 * read, and it keeps its layout.
 */
struct nvrs_gpu_stats {
	__u32 index;
	__u32 version;
	__u64 fb_total;
	__u64 fb_used;
	__u64 fb_free;
	__u64 fb_free_zeroed;
	__u64 largest_free;
	__u64 bar1_total;
	__u64 bar1_pinned;
	__u32 fragmentation_permille;
	__u32 pins;
	__u32 dma_mappings;
	__u32 chunk_levels;
	__u64 chunk_size[NVRS_CHUNK_SIZES];
	__u64 chunks[NVRS_CHUNK_STATES][NVRS_CHUNK_SIZES];
	__u64 alloc_failures;
	__u32 dmabufs;
	__u32 dmabuf_mappings;
	__u64 compactions;
	__u64 compacted_bytes;
	__u64 faults_injected;
	__u64 faults_revoked;
	__u64 bar1_budget;
	__u32 p2pdma_state;
	__u32 reserved32;
	__u64 p2pdma_bytes;
};

/**
 * struct nvrs_export_dmabuf - NVRS_IOCTL_EXPORT_DMABUF
 * @va: in: first byte, inside one of the caller's allocations, a multiple of
 *	NVRS_ALLOC_ALIGN
 * @size: in: bytes, a non-zero multiple of NVRS_ALLOC_ALIGN, within the
 *	same allocation
 * @flags: in: zero (no flags are defined yet)
 * @fd: out: the dma-buf, opened read-write with O_CLOEXEC
 *
 * Needs a file opened for writing (-EBADF) by the owning process (-EPERM).
 * Errors: -EINVAL for a zero, unaligned or overflowing range or non-zero
 * flags or @fd; -ENOENT if [@va, @va + @size) is not inside one live
 * allocation of the caller; -ENODEV if its GPU is going away; -ENOMEM when a
 * GPU model's BAR1 has no room for the range; -EMFILE if the process has no
 * free descriptor.
 */
struct nvrs_export_dmabuf {
	__u64 va;
	__u64 size;
	__u32 flags;
	__s32 fd;
};

/* Bytes of struct nvrs_pmm_map's map: one per 2 MiB root. */
#define NVRS_ROOT_FREE		0	/* free */
#define NVRS_ROOT_ALLOCATED	1	/* one allocated 2 MiB chunk */
#define NVRS_ROOT_SPLIT		2	/* split into 64 KiB / 4 KiB chunks */
#define NVRS_ROOT_CONTIG	3	/* part of a contiguous run of roots */
#define NVRS_ROOT_TEMP		4	/* being allocated or moved */
#define NVRS_ROOT_KIND(b)	((b) & 0x7)
#define NVRS_ROOT_PINNED	0x8	/* holds P2P-pinned or dma-buf-exported memory */
#define NVRS_ROOT_USED(b)	((b) >> 4)	/* sixteenths in use, 15: 15/16 or more */

/**
 * struct nvrs_pmm_map - NVRS_IOCTL_PMM_MAP: the memory manager's roots, one byte each
 * @gpu: in: GPU index
 * @roots: in: bytes available at @map; out: roots the GPU has (at most that many
 *	bytes were written; call again with more room if it is larger)
 * @root_size: out: bytes per root (2 MiB)
 * @map: in: user pointer to the bytes (NVRS_ROOT_*)
 */
struct nvrs_pmm_map {
	__u32 gpu;
	__u32 roots;
	__u64 root_size;
	__u64 map;
};

/**
 * struct nvrs_process_usage - one process's memory on one GPU
 * @pid: process id (in the caller's PID namespace view of the owner's)
 * @gpu: GPU index
 * @bytes: bytes of live allocations
 */
struct nvrs_process_usage {
	__s32 pid;
	__u32 gpu;
	__u64 bytes;
};

/**
 * struct nvrs_processes - NVRS_IOCTL_PROCESSES: processes with GPU memory
 * @count: in: entries available at @entries (at most 4096); out: entries
 *	written
 * @pad: zero
 * @entries: in: user pointer to struct nvrs_process_usage[@count]
 */
struct nvrs_processes {
	__u32 count;
	__u32 pad;
	__u64 entries;
};

/* The version of struct nvrs_process_stats (its entries' fields). */
#define NVRS_PROCESS_STATS_VERSION	1

/**
 * struct nvrs_process_entry - one process's use of one GPU (version 1)
 * @pid: process id, as in struct nvrs_process_usage
 * @gpu: GPU index
 * @bytes: bytes of live allocations
 * @allocations: live allocations
 * @pins: live nvidia_p2p pins on those allocations (persistent or not)
 * @dmabufs: dma-buf exports of those allocations that hold their memory
 * @reserved: zero
 *
 * Later versions only add fields at the end.
 */
struct nvrs_process_entry {
	__s32 pid;
	__u32 gpu;
	__u64 bytes;
	__u32 allocations;
	__u32 pins;
	__u32 dmabufs;
	__u32 reserved;
};

/**
 * struct nvrs_process_stats - NVRS_IOCTL_PROCESS_STATS: what each process
 *	holds on each GPU, for nvrs-smi pmon
 * @version: out: NVRS_PROCESS_STATS_VERSION
 * @count: in: entries available at @entries (at most 4096); out: entries
 *	written
 * @entry_size: in: bytes per entry at @entries, a multiple of 8 from 16
 *	(the fields of struct nvrs_process_usage) to 4096; out: bytes of each
 *	entry the kernel filled, the smaller of @entry_size and its own
 *	sizeof(struct nvrs_process_entry); the rest of each entry is zeroed
 * @pad: zero
 * @entries: in: user pointer to @count entries of @entry_size bytes
 *
 * A program built against an older header passes its smaller entry size and
 * gets the fields it knows. Processes are listed as NVRS_IOCTL_PROCESSES lists
 * them (the caller's PID namespace). Errors: -EINVAL for a bad @count,
 * @entry_size or @pad; -EFAULT for a bad pointer.
 */
struct nvrs_process_stats {
	__u32 version;
	__u32 count;
	__u32 entry_size;
	__u32 pad;
	__u64 entries;
};

/* Most endpoints (GPUs, then peer devices) struct nvrs_topology describes. */
#define NVRS_TOPO_MAX		32
/* Links in struct nvrs_topology.link (as nvidia-smi topo -m names them). */
#define NVRS_LINK_SELF		1	/* X */
#define NVRS_LINK_PIX		2	/* at most one PCIe bridge */
#define NVRS_LINK_PXB		3	/* several PCIe bridges, no host bridge */
#define NVRS_LINK_PHB		4	/* through a PCIe host bridge */
#define NVRS_LINK_NODE		5	/* between host bridges of a NUMA node */
#define NVRS_LINK_SYS		6	/* between NUMA nodes */
#define NVRS_LINK_NV(n)		(0x80 | (n))	/* a bonded set of n NVLinks */

/**
 * struct nvrs_topology_endpoint - a GPU or peer device in struct nvrs_topology
 * @pci_id: domain << 16 | bus << 8 | devfn
 * @numa_node: NUMA node, -1 if unknown
 * @cpu_affinity: CPUs near it as a cpulist ("0-15"), NUL-terminated
 */
struct nvrs_topology_endpoint {
	__u32 pci_id;
	__s32 numa_node;
	char cpu_affinity[56];
};

/**
 * struct nvrs_topology - NVRS_IOCTL_TOPOLOGY: how GPUs and peers reach each other
 * @version: out: 1
 * @gpus: out: GPUs, the first entries of @ep
 * @peers: out: peer devices (network controllers and the peer_device
 *	parameter's), after the GPUs
 * @gate: out: the p2p_topology parameter (0 by topology, 1 allow, 2 deny)
 * @ep: out: the endpoints
 * @link: out: NVRS_LINK_* between endpoints i and j
 * @p2p: out: 1 if GPU i's memory may be DMA-mapped for endpoint j (the P2P
 *	gate of nvidia_p2p_dma_map_pages() and dma-buf attach), rows of GPUs only
 */
struct nvrs_topology {
	__u32 version;
	__u32 gpus;
	__u32 peers;
	__u32 gate;
	struct nvrs_topology_endpoint ep[NVRS_TOPO_MAX];
	__u8 link[NVRS_TOPO_MAX][NVRS_TOPO_MAX];
	__u8 p2p[NVRS_TOPO_MAX][NVRS_TOPO_MAX];
};

/* nvrs_gpu_pcie.flags: the GPU has BAR1 traffic counters (the GPU model). */
#define NVRS_PCIE_COUNTERS	0x1
/* nvrs_gpu_pcie.flags: nvrs maps BAR1 through page tables it wrote. */
#define NVRS_PCIE_BAR1_VIRTUAL	0x2

/**
 * struct nvrs_gpu_pcie - NVRS_IOCTL_GPU_PCIE: a GPU's PCIe traffic counters
 * @index: in: GPU index
 * @flags: out: NVRS_PCIE_*; without NVRS_PCIE_COUNTERS the counters are zero
 * @bar1_rx_bytes: out: bytes written into BAR1 by CPUs and peers since the
 *	GPU's reset (what the GPU received)
 * @bar1_tx_bytes: out: bytes read from BAR1 (what the GPU sent)
 * @bar1_mapped: out: bytes of BAR1 mapped now, with NVRS_PCIE_BAR1_VIRTUAL
 * @bar1_faults: out: BAR1 accesses that did not translate (read all-ones,
 *	writes dropped)
 * @tlb_invalidates: out: TLB invalidates the GPU carried out
 *
 * Counters wrap at their width. nvrs-smi dmon prints their rates. Errors:
 * -ENODEV for an unknown GPU, or a GPU model being removed; -EFAULT for a bad
 * pointer.
 */
struct nvrs_gpu_pcie {
	__u32 index;
	__u32 flags;
	__u64 bar1_rx_bytes;
	__u64 bar1_tx_bytes;
	__u64 bar1_mapped;
	__u32 bar1_faults;
	__u32 tlb_invalidates;
};

/* nvrs_gpu_copy_engine.flags: nvrs scrubs and compacts with the GPU's copy engine. */
#define NVRS_CE_IN_USE		0x1

/**
 * struct nvrs_gpu_copy_engine - NVRS_IOCTL_GPU_COPY_ENGINE: a GPU's copy engine
 * @index: in: GPU index
 * @flags: out: NVRS_CE_*; without NVRS_CE_IN_USE the counters are zero (the
 *	CPU scrubs and compacts, as on the emulated GPUs, or the engine stopped
 *	answering and nvrs no longer uses it)
 * @launches: out: transfers the engine carried out since the GPU's reset
 *	(the GPU model counts 32 bits, which wrap)
 * @bytes: out: bytes it copied or filled since then
 *
 * nvrs-smi dmon prints their growth. Errors: -ENODEV for an unknown GPU, or a
 * GPU model being removed; -EFAULT for a bad pointer.
 */
struct nvrs_gpu_copy_engine {
	__u32 index;
	__u32 flags;
	__u64 launches;
	__u64 bytes;
};

#define NVRS_IOCTL_GPU_COUNT	_IOR(NVRS_IOCTL_MAGIC, 0, __u32)
#define NVRS_IOCTL_GPU_INFO	_IOWR(NVRS_IOCTL_MAGIC, 1, struct nvrs_gpu_info)
#define NVRS_IOCTL_ALLOC	_IOWR(NVRS_IOCTL_MAGIC, 2, struct nvrs_alloc)
#define NVRS_IOCTL_FREE		_IOW(NVRS_IOCTL_MAGIC, 3, struct nvrs_free)
#define NVRS_IOCTL_GPU_STATS	_IOWR(NVRS_IOCTL_MAGIC, 4, struct nvrs_gpu_stats)
#define NVRS_IOCTL_EXPORT_DMABUF _IOWR(NVRS_IOCTL_MAGIC, 5, struct nvrs_export_dmabuf)
#define NVRS_IOCTL_PMM_MAP	_IOWR(NVRS_IOCTL_MAGIC, 6, struct nvrs_pmm_map)
#define NVRS_IOCTL_PROCESSES	_IOWR(NVRS_IOCTL_MAGIC, 7, struct nvrs_processes)
#define NVRS_IOCTL_TOPOLOGY	_IOR(NVRS_IOCTL_MAGIC, 8, struct nvrs_topology)
#define NVRS_IOCTL_GPU_PCIE	_IOWR(NVRS_IOCTL_MAGIC, 9, struct nvrs_gpu_pcie)
#define NVRS_IOCTL_PROCESS_STATS _IOWR(NVRS_IOCTL_MAGIC, 10, struct nvrs_process_stats)
#define NVRS_IOCTL_GPU_COPY_ENGINE _IOWR(NVRS_IOCTL_MAGIC, 11, struct nvrs_gpu_copy_engine)

#endif /* _UAPI_NVRS_H */
