// SPDX-License-Identifier: GPL-2.0
/*
 * A GPU's memory as a P2PDMA provider: struct pages for the framebuffer
 * aperture, so that user mappings of nvrs allocations made of them are
 * accepted by pin_user_pages(FOLL_PCI_P2PDMA), and O_DIRECT reads and writes
 * on a block device that supports P2PDMA (NVMe) DMA straight into GPU memory.
 *
 * The kernel's P2PDMA core hands its pages out from a pool of its own
 * (pci_alloc_p2pmem); nvrs's memory manager decides which memory an
 * allocation gets. So nvrs takes the whole pool at registration and never
 * gives a page back to it while the GPU is bound: no other user of the pool
 * (the p2pmem "allocate" file in sysfs, an nvmet target) can get a page nvrs
 * handed to a process. The pool's page-free operation, which would return a
 * page to the pool, is replaced by nvrs's: it drops the page's hold on the
 * page map and wakes whoever waits for the GPU's pages to become free (as
 * NVIDIA's UVM replaces it to learn when a page is free).
 *
 * A page of an allocation made for P2PDMA has one reference of nvrs's while
 * the allocation lives; user mappings and the block layer's pins add theirs.
 * When the allocation is released, nvrs removes the user mappings, drops its
 * own references and waits until every page is free (its refcount zero, the
 * page-free operation called) before the memory is scrubbed and reused: a
 * request in flight finishes in the old owner's memory.
 */

#include <linux/memremap.h>
#include <linux/mm.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/percpu-refcount.h>
#include <linux/sysfs.h>
#include <linux/wait.h>

#include "helpers.h"

/* Woken by the page-free operation: a page of some GPU became free. */
static DECLARE_WAIT_QUEUE_HEAD(nvrs_p2pdma_free_wait);

/* Pages nvrs gave out and that came back free, over all GPUs (statistics). */
static atomic64_t nvrs_p2pdma_nr_freed = ATOMIC64_INIT(0);

static void nvrs_p2pdma_folio_free(struct folio *folio)
{
	struct dev_pagemap *pgmap = folio->pgmap;

	atomic64_inc(&nvrs_p2pdma_nr_freed);
	/* Most pages are freed with nobody waiting: no lock taken then. */
	if (wq_has_sleeper(&nvrs_p2pdma_free_wait))
		wake_up_all(&nvrs_p2pdma_free_wait);
	/* Last: it may let the page map go (memunmap_pages waits for it). */
	percpu_ref_put(&pgmap->ref);
}

static const struct dev_pagemap_ops nvrs_p2pdma_ops = {
	.folio_free = nvrs_p2pdma_folio_free,
};

static struct page *nvrs_p2pdma_page(u64 phys)
{
	return pfn_to_page(PHYS_PFN(phys));
}

/* Stands for the p2pmem group's "allocate" file, which is removed by name. */
static const struct attribute nvrs_p2pmem_allocate = { .name = "allocate" };

/**
 * nvrs_p2pdma_register() - publish GPU memory to the kernel's P2PDMA
 * @pdev: the GPU, being probed
 * @bar: the aperture's BAR
 * @offset: where the memory starts in the BAR (2 MiB aligned)
 * @size: bytes of memory (a multiple of 2 MiB)
 *
 * pci_p2pdma_add_resource() creates the struct pages (device-managed: they
 * go after the driver's unbind, once every page is free). Then the pool's
 * sysfs "allocate" file goes, as the P2PDMA core removes it before it tears
 * the pool down, so that nobody maps pages from the pool through it; the
 * whole pool is taken for nvrs, and the page-free operation becomes nvrs's.
 *
 * Return: 0 or a negative errno; then everything it set up is undone and the
 * GPU works without P2PDMA.
 */
int nvrs_p2pdma_register(struct pci_dev *pdev, int bar, u64 offset, u64 size)
{
	u64 start = pci_resource_start(pdev, bar) + offset;
	struct dev_pagemap *pgmap;
	void *group, *kaddr;
	int ret;

	group = devres_open_group(&pdev->dev, NULL, GFP_KERNEL);
	if (!group)
		return -ENOMEM;
	ret = pci_p2pdma_add_resource(pdev, bar, size, offset);
	if (ret)
		goto undo;
	sysfs_remove_file_from_group(&pdev->dev.kobj, &nvrs_p2pmem_allocate,
				     "p2pmem");
	kaddr = pci_alloc_p2pmem(pdev, size);
	if (!kaddr) {
		ret = -ENOMEM;
		goto undo;
	}
	if (kaddr != phys_to_virt(start)) {
		/* Someone else took part of the pool first: not ours to use. */
		pci_free_p2pmem(pdev, kaddr, size);
		ret = -EBUSY;
		goto undo;
	}
	pgmap = page_pgmap(nvrs_p2pdma_page(start));
	pgmap->ops = &nvrs_p2pdma_ops;
	devres_remove_group(&pdev->dev, group);
	return 0;
undo:
	devres_release_group(&pdev->dev, group);
	return ret;
}

/**
 * nvrs_p2pdma_unregister() - give the pool back before the device goes
 * @pdev: the GPU, being unbound
 * @phys: CPU physical address of the memory nvrs_p2pdma_register() published
 * @size: its bytes
 *
 * Called once nvrs holds no page any more. Pages still referenced (a request
 * nvrs stopped waiting for) keep the page map until they are free: the
 * device-managed release waits for them after the unbind.
 */
void nvrs_p2pdma_unregister(struct pci_dev *pdev, u64 phys, u64 size)
{
	pci_free_p2pmem(pdev, phys_to_virt(phys), size);
}

/**
 * nvrs_p2pdma_get_pages() - take nvrs's reference on free pages
 * @phys: CPU physical address of memory published by nvrs_p2pdma_register()
 * @len: bytes, a multiple of PAGE_SIZE
 *
 * Return: 0, or -EBUSY if a page is not free (then nothing changed).
 */
int nvrs_p2pdma_get_pages(u64 phys, u64 len)
{
	u64 o;

	for (o = 0; o < len; o += PAGE_SIZE)
		if (page_ref_count(nvrs_p2pdma_page(phys + o)))
			return -EBUSY;
	for (o = 0; o < len; o += PAGE_SIZE) {
		struct page *page = nvrs_p2pdma_page(phys + o);

		set_page_count(page, 1);
		percpu_ref_get(&page_pgmap(page)->ref);
	}
	return 0;
}

/**
 * nvrs_p2pdma_put_pages() - drop nvrs's reference on pages
 * @phys: as nvrs_p2pdma_get_pages()
 * @len: as nvrs_p2pdma_get_pages()
 *
 * A page nobody else holds is free at once; one the block layer holds is
 * free when its request lets go of it.
 */
void nvrs_p2pdma_put_pages(u64 phys, u64 len)
{
	u64 o;

	for (o = 0; o < len; o += PAGE_SIZE)
		put_page(nvrs_p2pdma_page(phys + o));
}

/**
 * nvrs_p2pdma_busy() - pages of a range that are not free
 * @phys: as nvrs_p2pdma_get_pages()
 * @len: as nvrs_p2pdma_get_pages()
 *
 * Return: how many pages of the range have a reference.
 */
u64 nvrs_p2pdma_busy(u64 phys, u64 len)
{
	u64 o, n = 0;

	for (o = 0; o < len; o += PAGE_SIZE)
		n += page_ref_count(nvrs_p2pdma_page(phys + o)) != 0;
	return n;
}

/**
 * nvrs_p2pdma_wait_free() - wait until every page of a range is free
 * @phys: as nvrs_p2pdma_get_pages()
 * @len: as nvrs_p2pdma_get_pages()
 * @timeout_ms: how long to wait at most
 *
 * Return: the pages still not free (0: all are).
 */
u64 nvrs_p2pdma_wait_free(u64 phys, u64 len, u32 timeout_ms)
{
	wait_event_timeout(nvrs_p2pdma_free_wait, !nvrs_p2pdma_busy(phys, len),
			   msecs_to_jiffies(timeout_ms));
	return nvrs_p2pdma_busy(phys, len);
}

/**
 * nvrs_p2pdma_freed() - pages that came back free, over all GPUs
 *
 * Return: the count since the module was loaded.
 */
u64 nvrs_p2pdma_freed(void)
{
	return atomic64_read(&nvrs_p2pdma_nr_freed);
}
