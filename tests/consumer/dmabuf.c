// SPDX-License-Identifier: GPL-2.0
/*
 * The consumer's dma-buf importer: imports nvrs dma-bufs the way RDMA
 * drivers do in ibv_reg_dmabuf_mr(), through the kernel's own RDMA core
 * (drivers/infiniband/core/umem_dmabuf.c), with edu as the DMA device, and
 * has edu DMA into the returned addresses.
 *
 * No RDMA hardware or soft-RDMA driver that imports dma-bufs exists in the
 * VM (rxe and siw cannot), so the ib_device is an unregistered one
 * (ib_alloc_device(), as a driver has before ib_register_device()) whose
 * dma_device is edu: the RDMA core uses nothing else of it on these paths.
 *
 * Commands (debugfs ctl, in the writer's process, which owns the fd):
 *
 *   dbget S FD OFF LEN MODE  import [OFF, OFF + LEN) of dma-buf FD into
 *                            import slot S (0..7); MODE is
 *                              pinned     ib_umem_dmabuf_get_pinned_with_dma_device()
 *                                         (efa, bnxt_re, mana_ib, ionic)
 *                              revocable  ib_umem_dmabuf_get_pinned_revocable_and_lock()
 *                                         (irdma)
 *                              dynamic    ib_umem_dmabuf_get() with an
 *                                         invalidate_mappings op that unmaps
 *                                         (mlx5 with on-demand paging)
 *                              lazy       like dynamic, but its
 *                                         invalidate_mappings only counts:
 *                                         it unmaps at dbunmap (an importer
 *                                         stuck before it unmaps)
 *   dbunmap S                unmap a lazy import (under the reservation lock)
 *   dbfence FD               add an unsignalled fence (write usage) to the
 *                            reservation object of dma-buf FD
 *   dbsignal                 signal that fence and drop the consumer's
 *                            reference on it
 *   dbmulti FD N             N (1..16) pinned imports of all of dma-buf FD
 *                            for edu at once (N attachments of one peer
 *                            mapping the same pages), then release them
 *   dbdma S OFF PATTERN      edu writes 2 KiB of PATTERN at OFF of the import
 *                            through its DMA address (a dynamic import maps
 *                            again first if it was invalidated, as mlx5 does
 *                            on a page fault), reads it back by DMA and
 *                            through the CPU at the physical address the
 *                            IOMMU translates it to, and compares
 *   dbstatus S               live, invalidations, whether it is mapped, and
 *                            whether the IOMMU still translates the first
 *                            DMA address it was given (-1 without an IOMMU)
 *   dbput S                  ib_umem_release()
 *   dbbad FD                 the bad-input matrix: importers nvrs must refuse
 *   dbbench FD VA LEN N      N x (ib_umem_dmabuf_get_pinned_with_dma_device()
 *                            of LEN bytes of FD + ib_umem_release()), then N x
 *                            (nvidia_p2p_get_pages() of [VA, VA + LEN) +
 *                            dma_map_pages() for edu + unmap + put): the
 *                            dma-buf import against the nvidia_p2p anchor
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-fence.h>
#include <linux/dma-resv.h>
#include <linux/iommu.h>
#include <linux/ktime.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <net/net_namespace.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

#include <nv-p2p.h>

#include "consumer.h"

MODULE_IMPORT_NS("DMA_BUF");

#define NIMPORTS	8

enum import_mode { PINNED, REVOCABLE, DYNAMIC, LAZY };

struct import {
	struct ib_umem_dmabuf *umem;
	enum import_mode mode;
	u64 len;
	u64 first_iova;		/* the first DMA address handed out */
	atomic_t invalidations;
};

static struct ib_device *ibdev;
static struct import imports[NIMPORTS];

/* The revocable import's revoke callback: stop using the memory. */
static void import_revoked(void *priv)
{
	struct import *im = priv;

	atomic_inc(&im->invalidations);
}

/* A dynamic importer's invalidate: unmap now, map again before the next DMA. */
static void import_invalidate(struct dma_buf_attachment *attach)
{
	struct ib_umem_dmabuf *umem = attach->importer_priv;
	struct import *im = umem->private;

	/* NULL until dbget has taken the reservation lock: nothing is mapped yet. */
	if (im)
		atomic_inc(&im->invalidations);
	ib_umem_dmabuf_unmap_pages(umem);
}

static const struct dma_buf_attach_ops dynamic_ops = {
	.allow_peer2peer = true,
	.invalidate_mappings = import_invalidate,
};

/* A lazy importer's invalidate: counted only; dbunmap unmaps. */
static void import_invalidate_lazy(struct dma_buf_attachment *attach)
{
	struct ib_umem_dmabuf *umem = attach->importer_priv;
	struct import *im = umem->private;

	if (im)
		atomic_inc(&im->invalidations);
}

static const struct dma_buf_attach_ops lazy_ops = {
	.allow_peer2peer = true,
	.invalidate_mappings = import_invalidate_lazy,
};

static const struct dma_buf_attach_ops no_p2p_ops = {
	.allow_peer2peer = false,
	.invalidate_mappings = import_invalidate,
};

static const int access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			  IB_ACCESS_REMOTE_READ;

static int cmd_get(struct import *im, int fd, u64 off, u64 len,
		   const char *mode)
{
	struct ib_umem_dmabuf *umem;
	int ret = 0;

	if (im->umem)
		return -EBUSY;
	atomic_set(&im->invalidations, 0);
	if (!strcmp(mode, "pinned")) {
		im->mode = PINNED;
		umem = ib_umem_dmabuf_get_pinned_with_dma_device(ibdev,
				&consumer_edu()->dev, off, len, fd, access);
	} else if (!strcmp(mode, "revocable")) {
		im->mode = REVOCABLE;
		umem = ib_umem_dmabuf_get_pinned_revocable_and_lock(ibdev, off,
				len, fd, access);
		if (!IS_ERR(umem)) {
			ib_umem_dmabuf_set_revoke_locked(umem, import_revoked, im);
			dma_resv_unlock(umem->attach->dmabuf->resv);
		}
	} else if (!strcmp(mode, "dynamic") || !strcmp(mode, "lazy")) {
		im->mode = strcmp(mode, "lazy") ? DYNAMIC : LAZY;
		umem = ib_umem_dmabuf_get(ibdev, off, len, fd, access,
					  im->mode == LAZY ? &lazy_ops :
							     &dynamic_ops);
		if (!IS_ERR(umem)) {
			dma_resv_lock(umem->attach->dmabuf->resv, NULL);
			umem->private = im;
			ret = ib_umem_dmabuf_map_pages(umem);
			dma_resv_unlock(umem->attach->dmabuf->resv);
			if (ret) {
				ib_umem_release(&umem->umem);
				return ret;
			}
		}
	} else {
		return -EINVAL;
	}
	if (IS_ERR(umem))
		return PTR_ERR(umem);
	im->umem = umem;
	im->len = len;
	im->first_iova = sg_dma_address(umem->umem.sgt_append.sgt.sgl);
	reply("dbget %s entries %u first 0x%llx\n", mode,
	      umem->umem.sgt_append.sgt.nents,
	      (u64)sg_dma_address(umem->umem.sgt_append.sgt.sgl));
	return 0;
}

/* The DMA address of byte @off of the import, from the RDMA core's sg list. */
static int import_dma_addr(struct ib_umem_dmabuf *umem, u64 off, u64 *dma)
{
	struct scatterlist *sg;
	u64 cur = 0;
	int i;

	if (!umem->sgt)
		return -ENODEV;
	for_each_sgtable_dma_sg(&umem->umem.sgt_append.sgt, sg, i) {
		if (off < cur + sg_dma_len(sg)) {
			*dma = sg_dma_address(sg) + (off - cur);
			/* edu's 2 KiB must not cross into the next entry. */
			return off + EDU_BUF_SIZE <= cur + sg_dma_len(sg) ? 0 : -EINVAL;
		}
		cur += sg_dma_len(sg);
	}
	return -EINVAL;
}

static int cmd_dma(struct import *im, u64 off, u32 pattern)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(&consumer_edu()->dev);
	struct ib_umem_dmabuf *umem = im->umem;
	struct dma_resv *resv;
	u64 iova = 0, phys;
	int ret;

	if (!umem)
		return -ENOENT;
	if (off % EDU_BUF_SIZE || off >= im->len)
		return -EINVAL;
	resv = umem->attach->dmabuf->resv;
	/* Held across the DMA: a revocation waits until it is done. */
	dma_resv_lock(resv, NULL);
	ret = im->mode == DYNAMIC ? ib_umem_dmabuf_map_pages(umem) : 0;
	if (!ret && umem->revoked)
		ret = -ENODEV;
	if (!ret)
		ret = import_dma_addr(umem, off, &iova);
	if (ret)
		goto out;
	phys = iova;
	if (dom && (dom->type & __IOMMU_DOMAIN_PAGING)) {
		phys = iommu_iova_to_phys(dom, iova);
		if (!phys) {
			reply("iova 0x%llx is not mapped for edu\n", iova);
			ret = -EFAULT;
			goto out;
		}
	}
	ret = edu_roundtrip(iova, phys, pattern);
	if (!ret)
		reply("dbdma ok phys 0x%llx iova 0x%llx translated %d\n", phys,
		      iova, phys != iova);
out:
	dma_resv_unlock(resv);
	return ret;
}

/* Whether edu's IOMMU domain translates @iova: 1, 0, or -1 without one. */
static int iova_translated(u64 iova)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(&consumer_edu()->dev);

	if (!dom || !(dom->type & __IOMMU_DOMAIN_PAGING))
		return -1;
	return iommu_iova_to_phys(dom, iova) != 0;
}

static int cmd_unmap(struct import *im)
{
	struct dma_resv *resv;

	if (!im->umem || im->mode != LAZY)
		return -ENOENT;
	resv = im->umem->attach->dmabuf->resv;
	dma_resv_lock(resv, NULL);
	ib_umem_dmabuf_unmap_pages(im->umem);
	dma_resv_unlock(resv);
	return 0;
}

/* dbfence: one fence at a time, signalled by dbsignal (or at unload). */
static DEFINE_SPINLOCK(fence_lock);
static struct dma_fence *test_fence;

static const char *fence_driver_name(struct dma_fence *f)
{
	return KBUILD_MODNAME;
}

static const char *fence_timeline_name(struct dma_fence *f)
{
	return "dbfence";
}

static const struct dma_fence_ops test_fence_ops = {
	.get_driver_name = fence_driver_name,
	.get_timeline_name = fence_timeline_name,
};

static int cmd_fence(int fd)
{
	struct dma_buf *dmabuf;
	struct dma_fence *f;
	int ret;

	if (test_fence)
		return -EBUSY;
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	f = kzalloc_obj(*f, GFP_KERNEL);
	if (!f) {
		dma_buf_put(dmabuf);
		return -ENOMEM;
	}
	dma_fence_init(f, &test_fence_ops, &fence_lock,
		       dma_fence_context_alloc(1), 1);
	dma_resv_lock(dmabuf->resv, NULL);
	ret = dma_resv_reserve_fences(dmabuf->resv, 1);
	if (!ret)
		dma_resv_add_fence(dmabuf->resv, f, DMA_RESV_USAGE_WRITE);
	dma_resv_unlock(dmabuf->resv);
	dma_buf_put(dmabuf);
	if (ret) {
		dma_fence_put(f);
		return ret;
	}
	test_fence = f;
	return 0;
}

static void cmd_signal(void)
{
	if (!test_fence)
		return;
	dma_fence_signal(test_fence);
	dma_fence_put(test_fence);
	test_fence = NULL;
}

static int cmd_multi(int fd, u64 n)
{
	struct ib_umem_dmabuf *umem[16];
	struct dma_buf *dmabuf;
	int ret = 0;
	u64 i, done;

	if (!n || n > ARRAY_SIZE(umem))
		return -EINVAL;
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	for (done = 0; done < n; done++) {
		umem[done] = ib_umem_dmabuf_get_pinned_with_dma_device(ibdev,
				&consumer_edu()->dev, 0, dmabuf->size, fd,
				access);
		if (IS_ERR(umem[done])) {
			ret = PTR_ERR(umem[done]);
			break;
		}
	}
	if (!ret)
		reply("dbmulti %llu imports first 0x%llx\n", n,
		      (u64)sg_dma_address(umem[0]->umem.sgt_append.sgt.sgl));
	for (i = 0; i < done; i++)
		ib_umem_release(&umem[i]->umem);
	dma_buf_put(dmabuf);
	return ret;
}

static void cmd_put(struct import *im)
{
	if (im->umem)
		ib_umem_release(&im->umem->umem);
	im->umem = NULL;
}

/* One line of the bad-input matrix. */
static int expect_attach(const char *what, struct dma_buf *dmabuf,
			 struct device *dev,
			 const struct dma_buf_attach_ops *ops, int want)
{
	struct dma_buf_attachment *a;
	int got;

	a = ops ? dma_buf_dynamic_attach(dmabuf, dev, ops, NULL) :
		  dma_buf_attach(dmabuf, dev);
	got = IS_ERR(a) ? PTR_ERR(a) : 0;
	if (!IS_ERR(a))
		dma_buf_detach(dmabuf, a);
	reply("%s %s: got %d want %d\n", got == want ? "ok" : "FAIL", what,
	      got, want);
	return got == want ? 0 : -EIO;
}

static int cmd_bad(int fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);
	struct ib_umem_dmabuf *umem;
	int ret = 0;

	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret |= expect_attach("static importer (no peer2peer)", dmabuf,
			     &consumer_edu()->dev, NULL, -EOPNOTSUPP);
	ret |= expect_attach("dynamic importer without allow_peer2peer", dmabuf,
			     &consumer_edu()->dev, &no_p2p_ops, -EOPNOTSUPP);
	ret |= expect_attach("importer that is not a PCI device", dmabuf,
			     &ibdev->dev, &dynamic_ops, -EOPNOTSUPP);
	umem = ib_umem_dmabuf_get_pinned_with_dma_device(ibdev,
			&consumer_edu()->dev, dmabuf->size, GPU_PAGE, fd, access);
	reply("%s range past the dma-buf: got %d want %d\n",
	      PTR_ERR_OR_ZERO(umem) == -EINVAL ? "ok" : "FAIL",
	      PTR_ERR_OR_ZERO(umem), -EINVAL);
	if (PTR_ERR_OR_ZERO(umem) != -EINVAL)
		ret = -EIO;
	if (!IS_ERR(umem))
		ib_umem_release(&umem->umem);
	dma_buf_put(dmabuf);
	return ret ? -EIO : 0;
}

static void bench_cb(void *data)
{
}

static int cmd_bench(int fd, u64 va, u64 len, u64 n)
{
	struct nvidia_p2p_dma_mapping *map;
	struct nvidia_p2p_page_table *pt;
	struct ib_umem_dmabuf *umem;
	u64 i, t0, t_import, t_p2p;
	int ret;

	if (!n)
		return -EINVAL;
	t0 = ktime_get_ns();
	for (i = 0; i < n; i++) {
		umem = ib_umem_dmabuf_get_pinned_with_dma_device(ibdev,
				&consumer_edu()->dev, 0, len, fd, access);
		if (IS_ERR(umem))
			return PTR_ERR(umem);
		ib_umem_release(&umem->umem);
	}
	t_import = (ktime_get_ns() - t0) / n;
	t0 = ktime_get_ns();
	for (i = 0; i < n; i++) {
		ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, bench_cb, NULL);
		if (ret)
			return ret;
		ret = nvidia_p2p_dma_map_pages(consumer_edu(), pt, &map);
		if (!ret)
			nvidia_p2p_dma_unmap_pages(consumer_edu(), pt, map);
		nvidia_p2p_put_pages(0, 0, va, pt);
		if (ret)
			return ret;
	}
	t_p2p = (ktime_get_ns() - t0) / n;
	reply("dbbench len %llu import_ns %llu p2p_ns %llu\n", len, t_import, t_p2p);
	return 0;
}

int dmabuf_cmd(unsigned int argc, char **argv)
{
	u64 a = 0, b = 0, c = 0, d = 0;
	struct import *im;

	if (argc > 1 && kstrtou64(argv[1], 0, &a))
		return -EINVAL;
	if (argc > 2 && kstrtou64(argv[2], 0, &b))
		return -EINVAL;
	if (argc > 3 && kstrtou64(argv[3], 0, &c))
		return -EINVAL;
	if (argc > 4 && kstrtou64(argv[4], 0, &d))
		return -EINVAL;
	if (!strcmp(argv[0], "dbbad") && argc == 2)
		return cmd_bad(a);
	if (!strcmp(argv[0], "dbbench") && argc == 5)
		return cmd_bench(a, b, c, d);
	if (!strcmp(argv[0], "dbfence") && argc == 2)
		return cmd_fence(a);
	if (!strcmp(argv[0], "dbsignal") && argc == 1) {
		cmd_signal();
		return 0;
	}
	if (!strcmp(argv[0], "dbmulti") && argc == 3)
		return cmd_multi(a, b);
	im = a < NIMPORTS ? &imports[a] : NULL;
	if (!im)
		return -EINVAL;
	if (!strcmp(argv[0], "dbget") && argc == 6)
		return cmd_get(im, b, c, d, argv[5]);
	if (!strcmp(argv[0], "dbdma") && argc == 4)
		return cmd_dma(im, b, c);
	if (!strcmp(argv[0], "dbunmap") && argc == 2)
		return cmd_unmap(im);
	if (!strcmp(argv[0], "dbput") && argc == 2) {
		cmd_put(im);
		return 0;
	}
	if (!strcmp(argv[0], "dbstatus") && argc == 2) {
		reply("import %llu live %d invalidations %d mapped %d iova_translated %d\n",
		      a, im->umem != NULL, atomic_read(&im->invalidations),
		      im->umem && im->umem->sgt, iova_translated(im->first_iova));
		return 0;
	}
	return -EINVAL;
}

int dmabuf_init(struct pci_dev *edu)
{
	ibdev = _ib_alloc_device(sizeof(*ibdev), &init_net);
	if (!ibdev)
		return -ENOMEM;
	ibdev->dma_device = &edu->dev;
	return 0;
}

void dmabuf_fini(void)
{
	unsigned int i;

	for (i = 0; i < NIMPORTS; i++)
		cmd_put(&imports[i]);
	cmd_signal();
	ib_dealloc_device(ibdev);
	ibdev = NULL;
}
