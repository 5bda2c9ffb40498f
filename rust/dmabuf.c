// SPDX-License-Identifier: GPL-2.0
/*
 * The C side of nvrs's dma-buf exporter (src/dmabuf/): the dma_buf_ops the
 * dma-buf core calls, each forwarded to Rust, and the dma-buf, reservation
 * and scatterlist calls the Rust side makes.
 *
 * The exported memory is a window of a GPU aperture (MMIO) with no struct
 * page behind it, so the sg_tables handed to importers carry DMA addresses
 * only: page links are empty, orig_nents is 0 ("no CPU list", as the dma-buf
 * core's own MMIO helper marks it), and nents DMA segments follow.
 *
 * Each attachment counts its live mappings in attach->priv (map and unmap
 * run under the reservation lock), so that a revocation that gives up
 * waiting can name the importer that still maps the memory.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "helpers.h"

MODULE_IMPORT_NS("DMA_BUF");

/* An sg_table handed to an importer and the Rust mapping it describes. */
struct nvrs_sgt {
	struct sg_table sgt;
	void *mapping;
};

static struct pci_dev *importer_pci(struct dma_buf_attachment *attach)
{
	return dev_is_pci(attach->dev) ? to_pci_dev(attach->dev) : NULL;
}

static int nvrs_dmabuf_attach(struct dma_buf *dmabuf,
			      struct dma_buf_attachment *attach)
{
	return nvrs_dmabuf_attach_rs(dmabuf->priv, importer_pci(attach),
				     attach->peer2peer,
				     dma_buf_attach_revocable(attach));
}

static int nvrs_dmabuf_pin(struct dma_buf_attachment *attach)
{
	return nvrs_dmabuf_pin_rs(attach->dmabuf->priv, true);
}

static void nvrs_dmabuf_unpin(struct dma_buf_attachment *attach)
{
	nvrs_dmabuf_pin_rs(attach->dmabuf->priv, false);
}

static struct sg_table *nvrs_dmabuf_map(struct dma_buf_attachment *attach,
					enum dma_data_direction dir)
{
	struct sg_table *sgt = NULL;
	int ret;

	dma_resv_assert_held(attach->dmabuf->resv);
	ret = nvrs_dmabuf_map_rs(attach->dmabuf->priv, importer_pci(attach),
				 dma_buf_attach_revocable(attach), &sgt);
	if (ret)
		return ERR_PTR(ret);
	attach->priv = (void *)((uintptr_t)attach->priv + 1);
	return sgt;
}

static void nvrs_dmabuf_unmap(struct dma_buf_attachment *attach,
			      struct sg_table *sgt,
			      enum dma_data_direction dir)
{
	struct nvrs_sgt *s = container_of(sgt, struct nvrs_sgt, sgt);

	dma_resv_assert_held(attach->dmabuf->resv);
	attach->priv = (void *)((uintptr_t)attach->priv - 1);
	nvrs_dmabuf_unmap_rs(attach->dmabuf->priv, s->mapping);
	s->sgt.orig_nents = s->sgt.nents;
	sg_free_table(&s->sgt);
	kfree(s);
}

static void nvrs_dmabuf_release(struct dma_buf *dmabuf)
{
	nvrs_dmabuf_release_rs(dmabuf->priv);
}

static vm_fault_t nvrs_dmabuf_vm_fault(struct vm_fault *vmf)
{
	return nvrs_dmabuf_fault_rs(vmf->vma->vm_private_data, vmf,
				    (u64)vmf->pgoff << PAGE_SHIFT);
}

/*
 * The VMA's file is the dma-buf's, which holds the dma-buf and so its export
 * for as long as the VMA exists: vm_private_data needs no reference of its
 * own, and the VMA no open or close.
 */
static const struct vm_operations_struct nvrs_dmabuf_vm_ops = {
	.fault = nvrs_dmabuf_vm_fault,
};

static int nvrs_dmabuf_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	int ret;

	ret = nvrs_dmabuf_mmap_rs(dmabuf->priv, vma->vm_flags & VM_MAYSHARE,
				  vma->vm_flags & VM_EXEC);
	if (ret)
		return ret;
	vm_flags_mod(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP |
			  VM_DONTCOPY, VM_MAYEXEC);
	vma->vm_page_prot = pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	vma->vm_private_data = dmabuf->priv;
	vma->vm_ops = &nvrs_dmabuf_vm_ops;
	return 0;
}

static const struct dma_buf_ops nvrs_dmabuf_ops = {
	.attach = nvrs_dmabuf_attach,
	.pin = nvrs_dmabuf_pin,
	.unpin = nvrs_dmabuf_unpin,
	.map_dma_buf = nvrs_dmabuf_map,
	.unmap_dma_buf = nvrs_dmabuf_unmap,
	.release = nvrs_dmabuf_release,
	.mmap = nvrs_dmabuf_mmap,
};

/**
 * nvrs_dmabuf_export() - create a dma-buf for an export
 * @export: the Rust export; the dma-buf owns the reference passed in once
 *          this succeeds (released by nvrs_dmabuf_release_rs())
 * @size: bytes
 * @out: the dma-buf
 *
 * Return: 0, or a negative errno (the reference is then still the caller's).
 */
int nvrs_dmabuf_export(void *export, u64 size, struct dma_buf **out)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct dma_buf *dmabuf;

	info.ops = &nvrs_dmabuf_ops;
	info.size = size;
	info.flags = O_RDWR | O_CLOEXEC;
	info.priv = export;
	dmabuf = dma_buf_export(&info);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	*out = dmabuf;
	return 0;
}

/**
 * nvrs_dmabuf_fd() - install a dma-buf in a new descriptor of the caller
 * @dmabuf: the dma-buf; on success the descriptor owns its reference
 *
 * Return: the descriptor (O_CLOEXEC), or a negative errno.
 */
int nvrs_dmabuf_fd(struct dma_buf *dmabuf)
{
	return dma_buf_fd(dmabuf, O_CLOEXEC);
}

/**
 * nvrs_dmabuf_tryget() - take a reference on a dma-buf unless it is dying
 * @dmabuf: a dma-buf whose memory is still valid (its release has not
 *          finished; its file may already be gone)
 *
 * Return: true if a reference was taken (drop it with nvrs_dmabuf_put()).
 */
bool nvrs_dmabuf_tryget(struct dma_buf *dmabuf)
{
	struct file *file = get_file_active(&dmabuf->file);

	if (!file)
		return false;
	/*
	 * The file is freed before the dma-buf is released: a slot reused by an
	 * unrelated file must not pass for this dma-buf's.
	 */
	if (file->private_data != dmabuf) {
		fput(file);
		return false;
	}
	return true;
}

/**
 * nvrs_dmabuf_put() - drop a reference on a dma-buf
 * @dmabuf: the dma-buf
 */
void nvrs_dmabuf_put(struct dma_buf *dmabuf)
{
	dma_buf_put(dmabuf);
}

/**
 * nvrs_dmabuf_invalidate() - tell every importer to unmap, and wait for fences
 * @dmabuf: the dma-buf being revoked (the caller holds a reference)
 * @timeout_ms: how long to wait for the fences at most
 *
 * Under the reservation lock, as dma_buf_invalidate_mappings() requires;
 * then waits for every fence, bookkeeping ones included, so no importer work
 * queued before the revocation is still running. Importers with an
 * invalidate_mappings op unmap from it or soon after; the caller waits for
 * those unmaps.
 *
 * Return: true if every fence signalled within @timeout_ms.
 */
bool nvrs_dmabuf_invalidate(struct dma_buf *dmabuf, u32 timeout_ms)
{
	ktime_t end = ktime_add_ms(ktime_get(), timeout_ms);
	long left;

	dma_resv_lock(dmabuf->resv, NULL);
	dma_buf_invalidate_mappings(dmabuf);
	/*
	 * In slices of 100 ms against the monotonic clock, the clock the
	 * caller's bound is measured on (a long timer may fire late).
	 */
	do {
		left = dma_resv_wait_timeout(dmabuf->resv,
					     DMA_RESV_USAGE_BOOKKEEP, false,
					     msecs_to_jiffies(100));
	} while (!left && ktime_before(ktime_get(), end));
	dma_resv_unlock(dmabuf->resv);
	return left > 0;
}

/**
 * nvrs_dmabuf_report_stuck() - name what a revocation gave up waiting for
 * @dmabuf: the revoked dma-buf (the caller holds a reference)
 * @gpu: index of the GPU going away
 * @waited_ms: how long the revocation waited
 * @fence: a fence did not signal (else an importer did not unmap)
 *
 * Prints one line: the dma-buf (its inode number, as in fdinfo, and size)
 * and the first unsignalled fence's driver and timeline, or the first
 * importer that still maps it and how many importers do.
 */
void nvrs_dmabuf_report_stuck(struct dma_buf *dmabuf, u32 gpu, u32 waited_ms,
			      bool fence)
{
	unsigned long ino = file_inode(dmabuf->file)->i_ino;
	struct dma_buf_attachment *a, *first = NULL;
	struct dma_resv_iter cursor;
	struct dma_fence *f;
	unsigned int n = 0;

	dma_resv_lock(dmabuf->resv, NULL);
	if (fence) {
		dma_resv_for_each_fence(&cursor, dmabuf->resv,
					DMA_RESV_USAGE_BOOKKEEP, f) {
			if (dma_fence_is_signaled(f))
				continue;
			rcu_read_lock();
			pr_warn("GPU %u: gave up after %u ms on dma-buf ino %lu size %#zx: fence %s:%s unsignalled; its memory stays retired until the dma-buf is released\n",
				gpu, waited_ms, ino, dmabuf->size,
				dma_fence_driver_name(f),
				dma_fence_timeline_name(f));
			rcu_read_unlock();
			dma_resv_unlock(dmabuf->resv);
			return;
		}
	}
	list_for_each_entry(a, &dmabuf->attachments, node) {
		if (!a->priv || !dma_buf_attach_revocable(a))
			continue;
		n++;
		if (!first)
			first = a;
	}
	if (fence)
		pr_warn("GPU %u: gave up after %u ms on dma-buf ino %lu size %#zx: a fence was unsignalled; its memory stays retired until the dma-buf is released\n",
			gpu, waited_ms, ino, dmabuf->size);
	else
		pr_warn("GPU %u: gave up after %u ms on dma-buf ino %lu size %#zx: importer %s still maps it (%u importers); its memory stays retired until they unmap\n",
			gpu, waited_ms, ino, dmabuf->size,
			first ? dev_name(first->dev) : "(gone)", n);
	dma_resv_unlock(dmabuf->resv);
}

/**
 * nvrs_dmabuf_zap() - remove every CPU mapping of a dma-buf
 * @dmabuf: the dma-buf (the caller holds a reference)
 *
 * Later accesses fault and find the export revoked (SIGBUS).
 */
void nvrs_dmabuf_zap(struct dma_buf *dmabuf)
{
	unmap_mapping_range(dmabuf->file->f_mapping, 0, 0, 1);
}

/**
 * nvrs_sgt_build() - an sg_table of DMA addresses for an importer
 * @dev: the importer's device (its maximum segment size splits the runs)
 * @runs: the DMA-mapped runs, in buffer order
 * @n: number of runs
 * @mapping: the Rust mapping behind them, handed back at unmap
 *
 * One entry per run, split at the device's maximum segment size (and below
 * 4 GiB, as sg_dma_len is 32-bit); no pages.
 *
 * Return: the table, or NULL if it could not be allocated.
 */
struct sg_table *nvrs_sgt_build(struct pci_dev *dev,
				const struct nvrs_dma_run *runs, u32 n,
				void *mapping)
{
	u64 seg = min_t(u64, dma_get_max_seg_size(&dev->dev),
			ALIGN_DOWN(UINT_MAX, PAGE_SIZE));
	struct scatterlist *sg;
	struct nvrs_sgt *s;
	u64 nents = 0;
	u32 i;

	seg = max_t(u64, ALIGN_DOWN(seg, PAGE_SIZE), PAGE_SIZE);
	for (i = 0; i < n; i++)
		nents += DIV_ROUND_UP(runs[i].len, seg);
	if (!nents || nents > UINT_MAX)
		return NULL;
	s = kzalloc_obj(*s, GFP_KERNEL);
	if (!s)
		return NULL;
	if (sg_alloc_table(&s->sgt, nents, GFP_KERNEL)) {
		kfree(s);
		return NULL;
	}
	sg = s->sgt.sgl;
	for (i = 0; i < n; i++) {
		u64 off;

		for (off = 0; off < runs[i].len; off += seg) {
			sg_dma_address(sg) = runs[i].dma + off;
			sg_dma_len(sg) = min_t(u64, seg, runs[i].len - off);
			sg = sg_next(sg);
		}
	}
	s->sgt.orig_nents = 0;
	s->mapping = mapping;
	return &s->sgt;
}
