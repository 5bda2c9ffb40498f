/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers nvrs's Rust code calls for kernel APIs the kernel crate does not
 * wrap (inline functions, macros, and data-structure walks), and the Rust
 * functions the C side calls back.
 *
 * This header is the one definition of the C edge: the build runs bindgen on
 * it (Kbuild, rust/helpers_generated.rs) and src/helpers.rs includes what it
 * writes, so every nvrs_* prototype, structure and constant declared here is
 * what Rust calls, with the kernel's own struct types (struct pci_dev * is
 * *mut bindings::pci_dev). Kernel objects are passed by their struct type;
 * void * is left only for what C never looks into (Rust objects handed
 * through as private data).
 */
#ifndef NVRS_RUST_HELPERS_H
#define NVRS_RUST_HELPERS_H

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/mm_types.h>

struct device;
struct gpu_buddy;
struct gpu_buddy_block;
struct inode;
struct workqueue_struct;
struct dma_buf;
struct pci_dev;
struct sg_table;
struct vm_area_struct;
struct vm_fault;
struct nvrs_mm_watch;
struct nvrs_ticker;

#define NVRS_PCI_MAX_HOPS	8

/* enum nvrs_port_kind: what a bridge on the way up is. */
#define NVRS_PORT_ROOT		0
#define NVRS_PORT_SWITCH_UP	1
#define NVRS_PORT_SWITCH_DOWN	2
#define NVRS_PORT_BRIDGE	3

struct nvrs_pci_hop {
	u64 id;			/* domain << 16 | bus << 8 | devfn */
	u32 kind;		/* NVRS_PORT_* */
	u32 pad;
};

struct nvrs_pci_endpoint {
	u64 id;			/* domain << 16 | bus << 8 | devfn */
	u32 host_bridge;	/* domain << 8 | root bus number */
	s32 numa_node;		/* NUMA_NO_NODE (-1) if unknown */
	u32 vendor_device;	/* vendor << 16 | device */
	u32 class;		/* class << 8 | prog-if */
	u32 n_hops;		/* valid entries in hops[], root first */
	u32 pad;
	struct nvrs_pci_hop hops[NVRS_PCI_MAX_HOPS];
};

int nvrs_pcim_enable_device(struct pci_dev *pdev);
bool nvrs_driver_override_is_nvrs(struct pci_dev *pdev);
int nvrs_pcim_request_region(struct pci_dev *pdev, int bar, const char *name);
bool nvrs_pci_is_disconnected(struct pci_dev *pdev);
int nvrs_pci_describe(struct pci_dev *pdev, struct nvrs_pci_endpoint *ep);
int nvrs_pci_peers(u32 extra_vendor_device, struct nvrs_pci_endpoint *eps,
		   u32 max);
int nvrs_p2pdma_distance(struct pci_dev *provider, u64 client_id);
int nvrs_pci_bus_watch(void);
void nvrs_pci_bus_unwatch(void);
int nvrs_node_cpulist(int node, char *buf, u32 len);

int nvrs_dma_map_mmio(struct pci_dev *peer, u64 phys, u64 size, u64 *dma);
void nvrs_dma_unmap_mmio(struct pci_dev *peer, u64 dma, u64 size);
void nvrs_vma_setup(struct vm_area_struct *vma, void *alloc, bool pages);
vm_fault_t nvrs_vmf_insert(struct vm_fault *vmf, u64 file_off, u64 phys,
			   u64 len, bool pages);
int nvrs_aperture_wc(struct pci_dev *pdev, u64 phys, u64 len);
struct nvrs_mm_watch *nvrs_mm_watch_current(void *owner);
bool nvrs_mm_watch_is_current(struct nvrs_mm_watch *watch);
void nvrs_mm_watch_stop(struct nvrs_mm_watch *watch);
int nvrs_wq_init(void);
struct workqueue_struct *nvrs_wq_get(void);
struct workqueue_struct *nvrs_revoke_wq_get(void);
void nvrs_wq_fini(void);
unsigned long nvrs_vma_pgoff(struct vm_area_struct *vma);
struct inode *nvrs_vma_inode_get(struct vm_area_struct *vma);
void nvrs_inode_put(struct inode *inode);
void nvrs_zap_user_mappings(struct inode *inode, u64 start, u64 len);
int nvrs_current_tgid(void);
void *nvrs_current_process_get(void);
void nvrs_process_put(void *pid);
int nvrs_process_nr(void *pid);
int nvrs_zero_mmio(u64 phys, u64 len);
int nvrs_copy_mmio(u64 dst, u64 src, u64 len);
bool nvrs_module_get(void);
void nvrs_module_put(void);

/* rust/faults.c (test builds only): the timer and the surprise removal of the
 * fault controls.
 */
struct nvrs_ticker *nvrs_ticker_new(void *owner);
void nvrs_ticker_set(struct nvrs_ticker *t, u32 period_ms);
void nvrs_ticker_stop(struct nvrs_ticker *t);
void nvrs_ticker_free(struct nvrs_ticker *t);
int nvrs_pci_surprise_remove(struct pci_dev *pdev);

/* rust/p2pdma.c: GPU memory as a P2PDMA provider. */
int nvrs_p2pdma_register(struct pci_dev *pdev, int bar, u64 offset, u64 size);
void nvrs_p2pdma_unregister(struct pci_dev *pdev, u64 phys, u64 size);
int nvrs_p2pdma_get_pages(u64 phys, u64 len);
void nvrs_p2pdma_put_pages(u64 phys, u64 len);
u64 nvrs_p2pdma_busy(u64 phys, u64 len);
u64 nvrs_p2pdma_wait_free(u64 phys, u64 len, u32 timeout_ms);
u64 nvrs_p2pdma_freed(void);

/* Implemented in Rust (src/driver/faults.rs). */
void nvrs_ticker_fire_rs(void *owner);

/* rust/dmabuf.c: the dma-buf exporter. */
struct nvrs_dma_run {
	u64 dma;		/* DMA address of a physically contiguous run */
	u64 len;		/* bytes */
};

int nvrs_dmabuf_export(void *export, u64 size, struct dma_buf **out);
int nvrs_dmabuf_fd(struct dma_buf *dmabuf);
bool nvrs_dmabuf_tryget(struct dma_buf *dmabuf);
void nvrs_dmabuf_put(struct dma_buf *dmabuf);
bool nvrs_dmabuf_invalidate(struct dma_buf *dmabuf, u32 timeout_ms);
void nvrs_dmabuf_report_stuck(struct dma_buf *dmabuf, u32 gpu, u32 waited_ms,
			      bool fence);
void nvrs_dmabuf_zap(struct dma_buf *dmabuf);
struct sg_table *nvrs_sgt_build(struct pci_dev *dev,
				const struct nvrs_dma_run *runs, u32 n,
				void *mapping);

/* Implemented in Rust (src/dmabuf/ops.rs). */
int nvrs_dmabuf_attach_rs(void *export, struct pci_dev *importer,
			  bool peer2peer, bool revocable);
int nvrs_dmabuf_pin_rs(void *export, bool pin);
int nvrs_dmabuf_map_rs(void *export, struct pci_dev *importer, bool revocable,
		       struct sg_table **out);
void nvrs_dmabuf_unmap_rs(void *export, void *mapping);
void nvrs_dmabuf_release_rs(void *export);
int nvrs_dmabuf_mmap_rs(void *export, bool shared, bool exec);
vm_fault_t nvrs_dmabuf_fault_rs(void *export, struct vm_fault *vmf,
				 u64 file_off);

/* Implemented in Rust (src/topology/distance.rs). */
void nvrs_topology_changed_rs(void);

/* Implemented in Rust (src/mem/cpu_map.rs, src/vaspace/mod.rs). */
vm_fault_t nvrs_alloc_fault(void *alloc, struct vm_fault *vmf, u64 file_off);
void nvrs_alloc_vma_open(void *alloc);
void nvrs_alloc_vma_close(void *alloc);
void nvrs_va_space_exit(void *owner);

/* rust/bench_buddy.c: the gpu_buddy benchmark anchor. */
u64 nvrs_now_ns(void);
struct gpu_buddy *nvrs_buddy_new(u64 size, u64 chunk);
void nvrs_buddy_destroy(struct gpu_buddy *mm);
struct gpu_buddy_block *nvrs_buddy_alloc(struct gpu_buddy *mm, u64 size);
void nvrs_buddy_free(struct gpu_buddy *mm, struct gpu_buddy_block *block);
struct gpu_buddy_block *nvrs_buddy_alloc_at(struct gpu_buddy *mm, u64 start,
					    u64 size);
struct gpu_buddy_block *nvrs_buddy_alloc_contiguous(struct gpu_buddy *mm,
						    u64 size);
void nvrs_buddy_free_contiguous(struct gpu_buddy *mm,
				struct gpu_buddy_block *block);
struct list_head *nvrs_buddy_alloc_buffer(struct gpu_buddy *mm, u64 size);
void nvrs_buddy_free_buffer(struct gpu_buddy *mm, struct list_head *blocks);
u64 nvrs_buddy_buffer_bytes(struct gpu_buddy *mm, struct list_head *blocks);
u64 nvrs_buddy_largest_free(struct gpu_buddy *mm);
u64 nvrs_buddy_metadata_bytes(struct gpu_buddy *mm);

#endif /* NVRS_RUST_HELPERS_H */
