/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * nvrs: the nvidia_p2p peer-memory API (GPUDirect RDMA).
 *
 * nvrs exports the nvidia_p2p_* functions with EXPORT_SYMBOL_GPL so that
 * in-kernel RDMA drivers (NIC drivers, GDRCopy's gdrdrv, peermem-style
 * bridges) can pin GPU memory, learn its physical pages and DMA-map them for
 * a peer device. Build consumers with KBUILD_EXTRA_SYMBOLS pointing at nvrs's
 * Module.symvers.
 *
 * This header is ABI-compatible with NVIDIA's nv-p2p.h 2.x: the same names,
 * values, structure layouts and prototypes, so a consumer written against
 * NVIDIA's header builds and runs unchanged against this one. nvrs and
 * nvidia.ko export the same symbol names and cannot be loaded together.
 *
 * Structure versioning: every structure that nvrs allocates and hands out
 * starts with a 32-bit version word; its upper 16 bits are the major
 * version, its lower 16 bits the minor version. A minor bump is a
 * compatible addition, a major bump a breaking change. A consumer checks the
 * structures it receives with the *_VERSION_COMPATIBLE() helpers: same major
 * version, and a minor version at least the one it was built against.
 *
 * All layouts are for 64-bit kernels (x86_64, arm64).
 */
#ifndef NV_P2P_H
#define NV_P2P_H

#include <linux/types.h>

struct pci_dev;

/* Versioning */

#define NVIDIA_P2P_MAJOR_VERSION_MASK	0xffff0000
#define NVIDIA_P2P_MINOR_VERSION_MASK	0x0000ffff

#define NVIDIA_P2P_MAJOR_VERSION(v) \
	(((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)

#define NVIDIA_P2P_MINOR_VERSION(v) \
	((v) & NVIDIA_P2P_MINOR_VERSION_MASK)

/* @p points to a structure whose first member is its u32 version word. */
#define NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION((p)->version) == NVIDIA_P2P_MAJOR_VERSION(v))

#define NVIDIA_P2P_VERSION_COMPATIBLE(p, v) \
	(NVIDIA_P2P_MAJOR_VERSION_MATCHES(p, v) && \
	 (NVIDIA_P2P_MINOR_VERSION((p)->version) >= NVIDIA_P2P_MINOR_VERSION(v)))

#define NVIDIA_P2P_PARAMS_VERSION		0x00010001
#define NVIDIA_P2P_PAGE_TABLE_VERSION		0x00020000
#define NVIDIA_P2P_DMA_MAPPING_VERSION		0x00020003
#define NVIDIA_P2P_RSYNC_DRIVER_VERSION		0x00010001
#define NVIDIA_P2P_RSYNC_REG_INFO_VERSION	0x00020001

#define NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_PAGE_TABLE_VERSION)

#define NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_DMA_MAPPING_VERSION)

#define NVIDIA_P2P_RSYNC_DRIVER_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_RSYNC_DRIVER_VERSION)

#define NVIDIA_P2P_RSYNC_REG_INFO_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_RSYNC_REG_INFO_VERSION)

/* Capabilities */

/*
 * Defined when nvidia_p2p_get_pages_persistent() and
 * nvidia_p2p_put_pages_persistent() exist.
 */
#define NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API

/*
 * Defined when nvidia_p2p_cap_persistent_pages exists. The variable is
 * non-zero when persistent pins are supported; nvrs sets it to 1.
 */
#define NVIDIA_P2P_CAP_PERSISTENT_PAGES
extern int nvidia_p2p_cap_persistent_pages;

/* Flags of nvidia_p2p_get_pages_persistent() */
#define NVIDIA_P2P_FLAGS_DEFAULT		0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING	1

/* Bits of nvidia_p2p_page_table.flags */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE	0x1

/* Bytes at nvidia_p2p_page_table.gpu_uuid */
#define NVIDIA_P2P_GPU_UUID_LEN		16

/* Legacy mailbox parameters (nvidia_p2p_init_mapping(), not supported) */

enum {
	NVIDIA_P2P_ARCHITECTURE_TESLA = 0,
	NVIDIA_P2P_ARCHITECTURE_FERMI = 1,
	NVIDIA_P2P_ARCHITECTURE_CURRENT = NVIDIA_P2P_ARCHITECTURE_FERMI,
};

enum {
	NVIDIA_P2P_PARAMS_ADDRESS_INDEX_GPU = 0,
	NVIDIA_P2P_PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE = 1,
	NVIDIA_P2P_PARAMS_ADDRESS_INDEX_MAX =
		NVIDIA_P2P_PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE,
};

/**
 * union nvidia_p2p_mailbox_addresses - legacy mailbox addresses of one side
 * @fermi: the Fermi-era layout
 * @fermi.wmb_addr: write mailbox address
 * @fermi.wmb_data: write mailbox data
 * @fermi.rreq_addr: read request address
 * @fermi.rcomp_addr: read completion address
 * @fermi.reserved: reserved
 */
union nvidia_p2p_mailbox_addresses {
	struct {
		uint64_t wmb_addr;
		uint64_t wmb_data;
		uint64_t rreq_addr;
		uint64_t rcomp_addr;
		uint64_t reserved[2];
	} fermi;
};

/**
 * struct nvidia_p2p_params - legacy mailbox parameters (104 bytes)
 * @version: NVIDIA_P2P_PARAMS_VERSION
 * @architecture: an NVIDIA_P2P_ARCHITECTURE_* value
 * @addresses: indexed by NVIDIA_P2P_PARAMS_ADDRESS_INDEX_*
 *
 * Only used by nvidia_p2p_init_mapping(), which nvrs does not support.
 */
typedef struct nvidia_p2p_params {
	uint32_t version;
	uint32_t architecture;
	union nvidia_p2p_mailbox_addresses
		addresses[NVIDIA_P2P_PARAMS_ADDRESS_INDEX_MAX + 1];
} nvidia_p2p_params_t;

/**
 * enum nvidia_p2p_page_size_type - size of one page-table entry
 * @NVIDIA_P2P_PAGE_SIZE_4KB: 4 KiB (never produced by nvrs)
 * @NVIDIA_P2P_PAGE_SIZE_64KB: 64 KiB, the only size nvrs produces
 * @NVIDIA_P2P_PAGE_SIZE_128KB: 128 KiB (never produced by nvrs)
 * @NVIDIA_P2P_PAGE_SIZE_COUNT: number of sizes
 */
enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT = 3,
};

/**
 * union nvidia_p2p_request_registers - legacy per-page mailbox registers
 * @fermi: the Fermi-era layout
 * @fermi.wreqmb_h: write request mailbox, high bits
 * @fermi.rreqmb_h: read request mailbox, high bits
 * @fermi.rreqmb_0: read request mailbox 0
 * @fermi.reserved: reserved
 *
 * nvrs always zeroes these.
 */
union nvidia_p2p_request_registers {
	struct {
		uint32_t wreqmb_h;
		uint32_t rreqmb_h;
		uint32_t rreqmb_0;
		uint32_t reserved[3];
	} fermi;
};

/**
 * struct nvidia_p2p_page - one page of pinned GPU memory (32 bytes)
 * @physical_address: CPU physical address of the page: inside the GPU's
 *	BAR1 for PCIe GPUs, inside coherent GPU memory for coherent GPUs.
 *	Not a DMA address: peers use nvidia_p2p_dma_map_pages().
 * @registers: legacy mailbox registers, zero
 */
typedef struct nvidia_p2p_page {
	uint64_t physical_address;
	union nvidia_p2p_request_registers registers;
} nvidia_p2p_page_t;

/**
 * struct nvidia_p2p_page_table - pinned GPU memory (40 bytes)
 * @version: NVIDIA_P2P_PAGE_TABLE_VERSION
 * @page_size: an enum nvidia_p2p_page_size_type value (not bytes); nvrs
 *	always sets NVIDIA_P2P_PAGE_SIZE_64KB
 * @pages: @entries pointers, one per 64 KiB of the pinned range, in order
 * @entries: number of pages
 * @gpu_uuid: NVIDIA_P2P_GPU_UUID_LEN raw bytes of the owning GPU's UUID
 * @flags: NVIDIA_P2P_PAGE_TABLE_FLAGS_* bits; CPU_CACHEABLE is set only for
 *	coherent mappings, never for BAR1
 *
 * Allocated and freed by nvrs only. Consumers read it and must not write it.
 */
typedef struct nvidia_p2p_page_table {
	uint32_t version;
	uint32_t page_size;
	struct nvidia_p2p_page **pages;
	uint32_t entries;
	uint8_t *gpu_uuid;
	uint32_t flags;
} nvidia_p2p_page_table_t;

/**
 * struct nvidia_p2p_dma_mapping - pinned GPU memory mapped for a peer (40 bytes)
 * @version: NVIDIA_P2P_DMA_MAPPING_VERSION
 * @page_size_type: the @page_size of the page table it maps
 * @entries: number of DMA addresses, equal to the page table's entries
 * @dma_addresses: one DMA address per page, valid on @pci_dev only
 * @private: nvrs's cookie; consumers must not touch it
 * @pci_dev: the peer the mapping was made for
 *
 * Allocated and freed by nvrs only. Consumers read it and must not write it.
 */
typedef struct nvidia_p2p_dma_mapping {
	uint32_t version;
	enum nvidia_p2p_page_size_type page_size_type;
	uint32_t entries;
	uint64_t *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
} nvidia_p2p_dma_mapping_t;

/**
 * struct nvidia_p2p_rsync_driver - an NVLink rsync (IBM NPU) driver (32 bytes)
 * @version: NVIDIA_P2P_RSYNC_DRIVER_VERSION
 * @get_relaxed_ordering_mode: take a reference to the relaxed-ordering mode
 * @put_relaxed_ordering_mode: drop a reference taken by the above
 * @wait_for_rsync: issue an RSYNC; must not sleep
 */
typedef struct nvidia_p2p_rsync_driver {
	uint32_t version;
	int (*get_relaxed_ordering_mode)(int *mode, void *data);
	void (*put_relaxed_ordering_mode)(int mode, void *data);
	void (*wait_for_rsync)(struct pci_dev *gpu, void *data);
} nvidia_p2p_rsync_driver_t;

/**
 * struct nvidia_p2p_rsync_reg - one rsync (GEN-ID) register (40 bytes)
 * @ptr: mapped register
 * @size: bytes at @ptr
 * @ibmnpu: the NPU device
 * @gpu: the GPU device
 * @cluster_id: cluster id
 * @socket_id: socket id
 */
typedef struct nvidia_p2p_rsync_reg {
	void *ptr;
	size_t size;
	struct pci_dev *ibmnpu;
	struct pci_dev *gpu;
	uint32_t cluster_id;
	uint32_t socket_id;
} nvidia_p2p_rsync_reg_t;

/**
 * struct nvidia_p2p_rsync_reg_info - rsync registers (24 bytes)
 * @version: NVIDIA_P2P_RSYNC_REG_INFO_VERSION
 * @regs: @entries registers
 * @entries: number of registers
 */
typedef struct nvidia_p2p_rsync_reg_info {
	uint32_t version;
	nvidia_p2p_rsync_reg_t *regs;
	size_t entries;
} nvidia_p2p_rsync_reg_info_t;

/**
 * nvidia_p2p_init_mapping() - legacy mailbox mapping (not supported)
 * @p2p_token: legacy token
 * @params: legacy mailbox parameters
 * @destroy_callback: legacy teardown callback
 * @data: argument of @destroy_callback
 *
 * Context: any context.
 * Return: -ENOTSUPP (524, the value NVIDIA's driver returns) always.
 */
int nvidia_p2p_init_mapping(uint64_t p2p_token,
			    struct nvidia_p2p_params *params,
			    void (*destroy_callback)(void *data),
			    void *data);

/**
 * nvidia_p2p_destroy_mapping() - legacy mailbox mapping (not supported)
 * @p2p_token: legacy token
 *
 * Context: any context.
 * Return: -ENOTSUPP always.
 */
int nvidia_p2p_destroy_mapping(uint64_t p2p_token);

/**
 * nvidia_p2p_get_pages() - pin GPU memory, revocable through a callback
 * @p2p_token: legacy addressing token; current consumers pass 0 (ignored)
 * @va_space: legacy address-space qualifier; current consumers pass 0
 *	(ignored: the range is looked up in the calling process's allocations)
 * @virtual_address: start of the GPU memory range, a multiple of 64 KiB
 * @length: bytes to pin, a non-zero multiple of 64 KiB
 * @page_table: where the new page table is stored
 * @free_callback: called when nvrs revokes the pin; must not be NULL
 * @data: passed unchanged to @free_callback
 *
 * Pins the range and returns a page table with one 64 KiB entry per 64 KiB of
 * @length (version NVIDIA_P2P_PAGE_TABLE_VERSION, page size
 * NVIDIA_P2P_PAGE_SIZE_64KB, the GPU's UUID). The pin lasts until
 * nvidia_p2p_put_pages() or until nvrs revokes it.
 *
 * Revocation (free-callback protocol): when the memory goes away while still
 * pinned (its owner frees it, or the GPU is removed), nvrs calls
 * @free_callback(@data) once, in process context, where it may sleep, and
 * with no nvrs lock held. The callback must stop all DMA and CPU access to
 * the pages before it returns; it may call nvidia_p2p_free_page_table()
 * (which ends the table's reservation, see there) and
 * nvidia_p2p_free_dma_mapping() (which does nothing). A portable consumer does
 * not call nvidia_p2p_put_pages() or nvidia_p2p_dma_unmap_pages() from the
 * callback (NVIDIA's driver fails them there). After the callback returns,
 * nvrs itself unmaps and frees every DMA mapping of the table and frees the
 * table: the consumer's pointers to them are stale from then on. Passing
 * such a stale pointer later to nvidia_p2p_put_pages() or
 * nvidia_p2p_dma_unmap_pages() is safe and returns 0: nvrs uses these
 * pointers only as lookup keys and never dereferences one it no longer
 * knows. nvrs does not reuse the memory of a released table or mapping for
 * the next ones (it is kept, emptied, until thousands more were released),
 * so a stale pointer does not name a newer pin or mapping either.
 *
 * Removal of the GPU revokes the pin the same way, and waits for a callback
 * already running for it before tearing its mappings down. When the owning
 * process exits or execs, the callback runs from its address space's
 * teardown (an MMU notifier's release): it must not register, unregister or
 * synchronize MMU notifiers itself.
 *
 * The callback is registered last, once the table is complete; if this call
 * fails the callback is never called.
 *
 * Context: process context; may sleep.
 * Return: 0 on success, with *@page_table set. On failure nothing remains
 * pinned and:
 * -EINVAL if @virtual_address or @length is not a multiple of 64 KiB, @length
 * is 0, @virtual_address + @length overflows, @page_table is NULL,
 * @free_callback is NULL, or the range is not GPU memory nvrs can pin;
 * -ENOMEM if memory or the GPU's BAR1 aperture is exhausted;
 * -ENOTSUPP if the GPU cannot export this memory;
 * -EIO on any other error.
 */
int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address, uint64_t length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);

/**
 * nvidia_p2p_get_pages_persistent() - pin GPU memory until explicitly released
 * @virtual_address: start of the GPU memory range, a multiple of 64 KiB
 * @length: bytes to pin, a non-zero multiple of 64 KiB
 * @page_table: where the new page table is stored
 * @flags: NVIDIA_P2P_FLAGS_DEFAULT or NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING
 *
 * Like nvidia_p2p_get_pages(), but without a callback: the pin is never
 * revoked. The pinned memory and a reference to its GPU are held until
 * nvidia_p2p_put_pages_persistent(), even if the memory's owner frees it in
 * the meantime. NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING asks for a BAR1 mapping
 * even on a coherent GPU; such a table is for CPU mappings only.
 *
 * Context: process context; may sleep.
 * Return: 0 on success, with *@page_table set; on failure nothing remains
 * pinned and the errors are those of nvidia_p2p_get_pages(), with -EINVAL
 * also for unknown @flags bits, -ENOTSUPP if FORCE_BAR1_MAPPING cannot be
 * honoured and -ENODEV while nvrs is being unloaded.
 */
int nvidia_p2p_get_pages_persistent(uint64_t virtual_address, uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags);

/**
 * nvidia_p2p_dma_map_pages() - map pinned GPU memory for a peer device
 * @peer: the device that will DMA to and from the memory
 * @page_table: a table from nvidia_p2p_get_pages() or
 *	nvidia_p2p_get_pages_persistent()
 * @dma_mapping: where the new mapping is stored
 *
 * Maps every 64 KiB page of @page_table for @peer (through the IOMMU, if
 * any) and returns a mapping with version NVIDIA_P2P_DMA_MAPPING_VERSION,
 * the table's page size, one DMA address per entry and pci_dev = @peer. The
 * mapping belongs to the table: it is released by nvidia_p2p_dma_unmap_pages(),
 * by putting the table, or by nvrs after a free callback.
 *
 * Context: process context; may sleep.
 * Return: 0 on success, with *@dma_mapping set; on failure nothing stays
 * mapped and:
 * -EINVAL if an argument is NULL, the table has no GPU UUID, or the table is
 * not one nvrs handed out;
 * -ENOTSUPP if the table was pinned with NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING
 * or @peer cannot reach the GPU peer-to-peer;
 * -ENOMEM if memory or DMA address space is exhausted;
 * -EIO on any other error.
 */
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);

/**
 * nvidia_p2p_dma_unmap_pages() - unmap memory mapped by nvidia_p2p_dma_map_pages()
 * @peer: the device passed to nvidia_p2p_dma_map_pages()
 * @page_table: the table passed to nvidia_p2p_dma_map_pages()
 * @dma_mapping: the mapping to release
 *
 * After this call neither @dma_mapping nor its addresses may be used. If
 * @peer is not the device the mapping was made for, nvrs unmaps it for that
 * device anyway and logs one warning, as NVIDIA's driver does.
 *
 * Context: process context; may sleep. Not from a free callback.
 * Return: 0 on success, and also if @dma_mapping is stale (nvrs already
 * released it after a free callback or with its table): the pointer is only
 * a lookup key; -EINVAL if an argument is NULL.
 */
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);

/**
 * nvidia_p2p_put_pages() - release a pin made by nvidia_p2p_get_pages()
 * @p2p_token: the value passed to nvidia_p2p_get_pages()
 * @va_space: the value passed to nvidia_p2p_get_pages()
 * @virtual_address: the value passed to nvidia_p2p_get_pages()
 * @page_table: the table to release
 *
 * Unmaps and frees the table's remaining DMA mappings, frees the table and
 * unpins the memory; the callback will not be called any more. If a free
 * callback for the table is running, waits for it to finish first.
 *
 * Context: process context; may sleep. Not from a free callback.
 * Return: 0 on success, and also if @page_table is NULL or stale (already
 * revoked through the free callback, or already put): the pointer is only a
 * lookup key; -EINVAL if @page_table is a persistent pin's; -EIO if called
 * from the table's own free callback.
 */
int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table);

/**
 * nvidia_p2p_put_pages_persistent() - release a persistent pin
 * @virtual_address: the value passed to nvidia_p2p_get_pages_persistent()
 * @page_table: the table to release
 * @flags: must be 0
 *
 * Unmaps and frees the table's remaining DMA mappings, frees the table,
 * unpins the memory and drops the GPU reference. A persistent pin survives
 * the removal of its GPU (its DMA mappings do not): until it is put, nvrs
 * hands out none of the memory it still reaches, even to the same GPU bound
 * again.
 *
 * Context: process context; may sleep.
 * Return: 0 on success or if @page_table is NULL; -EINVAL if @flags is not 0
 * or the arguments do not match a persistent pin.
 */
int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags);

/**
 * nvidia_p2p_free_page_table() - a revoked pin's consumer is done with its table
 * @page_table: the table of a pin whose free callback fired (NULL, a live
 *              pin's or an unknown pointer: nothing happens)
 *
 * NVIDIA's protocol has the free callback free the table, and such a
 * consumer never puts the pin: this ends the table's reservation (the
 * tombstone that keeps its address from any newer pin), as a put of the
 * revoked pin would. nvrs frees the table itself, later. The pointer is only
 * compared, never read.
 *
 * Context: process context (a free callback is); does not sleep.
 * Return: 0 always.
 */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);

/**
 * nvidia_p2p_free_dma_mapping() - does nothing
 * @dma_mapping: ignored
 *
 * Kept for free callbacks written for NVIDIA's driver; nvrs frees DMA
 * mappings itself.
 *
 * Context: any context, including a free callback.
 * Return: 0 always.
 */
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

/**
 * nvidia_p2p_register_rsync_driver() - register an NVLink rsync driver
 * @driver: the driver; version NVIDIA_P2P_RSYNC_DRIVER_VERSION compatible,
 *	every function pointer set
 * @data: passed to the driver's functions
 *
 * Rsync drivers serve IBM NPU (NVLink-attached POWER9) systems. nvrs
 * supports no such system and never calls a registered driver.
 *
 * Context: process context.
 * Return: 0 on success; -EINVAL if @driver is NULL, its version is
 * incompatible or a function pointer is NULL; -EBUSY if a driver is already
 * registered.
 */
int nvidia_p2p_register_rsync_driver(nvidia_p2p_rsync_driver_t *driver,
				     void *data);

/**
 * nvidia_p2p_unregister_rsync_driver() - unregister an NVLink rsync driver
 * @driver: the registered driver
 * @data: the value passed at registration
 *
 * Does nothing if @driver is not registered.
 *
 * Context: process context.
 */
void nvidia_p2p_unregister_rsync_driver(nvidia_p2p_rsync_driver_t *driver,
					void *data);

/**
 * nvidia_p2p_get_rsync_registers() - get NVLink rsync registers
 * @reg_info: where the register information would be stored
 *
 * nvrs supports no NPU system, so there are never registers to return.
 *
 * Context: any context.
 * Return: -ENODEV always; *@reg_info is not written.
 */
int nvidia_p2p_get_rsync_registers(nvidia_p2p_rsync_reg_info_t **reg_info);

/**
 * nvidia_p2p_put_rsync_registers() - release rsync register information
 * @reg_info: ignored
 *
 * Does nothing.
 *
 * Context: any context.
 */
void nvidia_p2p_put_rsync_registers(nvidia_p2p_rsync_reg_info_t *reg_info);

#endif /* NV_P2P_H */
