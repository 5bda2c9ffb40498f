// SPDX-License-Identifier: GPL-2.0
/*
 * edu_peer: a minimal peer-memory consumer of nvrs, the worked example of
 * `make consumer` (README, "Bring your own consumer").
 *
 * It drives QEMU's edu device as if it were a NIC: binds it, and on request
 * pins GPU memory with nvidia_p2p_get_pages(), maps it for edu with
 * nvidia_p2p_dma_map_pages() and has edu DMA the first bytes of the GPU
 * memory into a buffer in system memory, which it checks against a pattern.
 * It is built only against nvrs's include/ and Module.symvers, as an RDMA
 * driver would be.
 *
 * debugfs/edu_peer/ctl, written by the process that owns the GPU memory
 * (nvidia_p2p_get_pages() looks the VA up in the calling process):
 *   read VA LEN PATTERN   pin [VA, VA + LEN), DMA its first 2 KiB to system
 *                         memory through edu, count the 32-bit words equal
 *                         to PATTERN, unmap and put
 *   hold VA LEN           pin [VA, VA + LEN) and keep the pin
 *   release               put the held pin (0 if nvrs revoked it meanwhile)
 * and read back: the reply of the last command, for example
 * "read words 512 match 512 first 0x5eed0000".
 */

#include <linux/debugfs.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/iopoll.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include <nv-p2p.h>

#define EDU_VENDOR	0x1234
#define EDU_DEVICE	0x11e8
#define EDU_DMA_SRC	0x80
#define EDU_DMA_DST	0x88
#define EDU_DMA_COUNT	0x90
#define EDU_DMA_CMD	0x98
#define EDU_DMA_RUN	BIT(0)
#define EDU_DMA_TO_RAM	BIT(1)
#define EDU_BUF		0x40000	/* edu's DMA buffer, in edu's address space */
#define EDU_BUF_SIZE	2048

static struct {
	struct pci_dev *pdev;
	void __iomem *regs;
	u32 *buf;		/* coherent system memory edu DMAs into */
	dma_addr_t buf_dma;
	struct dentry *dir;
	struct mutex lock;	/* the commands; never taken by the callback */
	char reply[128];
	/* The held pin: the callback and release race for it with xchg(). */
	struct nvidia_p2p_page_table *held;
	u64 held_va;
	atomic_t revoked;
} ep;

/* One edu transfer of @count bytes; @to_ram: from edu's buffer to the bus. */
static int edu_dma(u64 src, u64 dst, u32 count, bool to_ram)
{
	u32 cmd;

	writeq(src, ep.regs + EDU_DMA_SRC);
	writeq(dst, ep.regs + EDU_DMA_DST);
	writeq(count, ep.regs + EDU_DMA_COUNT);
	writeq(EDU_DMA_RUN | (to_ram ? EDU_DMA_TO_RAM : 0), ep.regs + EDU_DMA_CMD);
	return readl_poll_timeout(ep.regs + EDU_DMA_CMD, cmd, !(cmd & EDU_DMA_RUN),
				  1000, 5 * USEC_PER_SEC);
}

/*
 * nvrs revokes a pin (the GPU memory was freed, or the GPU is going away):
 * stop using it. nvrs unmaps and frees the table once this returns.
 */
static void edu_peer_free_callback(void *data)
{
	struct nvidia_p2p_page_table *pt = xchg(&ep.held, NULL);

	atomic_inc(&ep.revoked);
	/* Pairs with cmd_hold(): it sees the count, or we see its table. */
	smp_mb__after_atomic();
	/* Kept for NVIDIA's driver, where the callback frees the table. */
	if (pt)
		nvidia_p2p_free_page_table(pt);
}

static void read_callback(void *data)
{
	/* The read command ends its pin itself; a revocation meanwhile is harmless. */
	atomic_inc(&ep.revoked);
}

static int cmd_read(u64 va, u64 len, u32 pattern)
{
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map;
	unsigned int i, match = 0;
	int ret;

	ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, read_callback, NULL);
	if (ret)
		return ret;
	ret = nvidia_p2p_dma_map_pages(ep.pdev, pt, &map);
	if (ret)
		goto put;
	memset(ep.buf, 0, EDU_BUF_SIZE);
	/* GPU memory -> edu's buffer -> system memory, both by edu's DMA engine. */
	ret = edu_dma(map->dma_addresses[0], EDU_BUF, EDU_BUF_SIZE, false);
	if (!ret)
		ret = edu_dma(EDU_BUF, ep.buf_dma, EDU_BUF_SIZE, true);
	nvidia_p2p_dma_unmap_pages(ep.pdev, pt, map);
	if (!ret) {
		for (i = 0; i < EDU_BUF_SIZE / 4; i++)
			match += ep.buf[i] == pattern;
		snprintf(ep.reply, sizeof(ep.reply),
			 "read words %u match %u first 0x%08x\n",
			 EDU_BUF_SIZE / 4, match, ep.buf[0]);
	}
put:
	nvidia_p2p_put_pages(0, 0, va, pt);
	return ret;
}

static int cmd_hold(u64 va, u64 len)
{
	struct nvidia_p2p_page_table *pt;
	int ret;

	int seen = atomic_read(&ep.revoked);

	if (READ_ONCE(ep.held))
		return -EBUSY;
	ep.held_va = va;
	ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, edu_peer_free_callback,
				   NULL);
	if (ret)
		return ret;
	/*
	 * The callback may run as soon as get_pages() has the pin, before the
	 * table is published here: then it found nothing to take, and the pin
	 * is put at once (a put of a revoked pin returns 0).
	 */
	WRITE_ONCE(ep.held, pt);
	/* Pairs with the callback: it sees the table, or we see its count. */
	smp_mb();
	if (atomic_read(&ep.revoked) != seen && xchg(&ep.held, NULL))
		nvidia_p2p_put_pages(0, 0, va, pt);
	snprintf(ep.reply, sizeof(ep.reply), "hold entries %u revoked %d\n",
		 pt->entries, atomic_read(&ep.revoked));
	return 0;
}

static int cmd_release(void)
{
	struct nvidia_p2p_page_table *pt = xchg(&ep.held, NULL);

	snprintf(ep.reply, sizeof(ep.reply), "release %s revoked %d\n",
		 pt ? "put" : "none", atomic_read(&ep.revoked));
	return pt ? nvidia_p2p_put_pages(0, 0, ep.held_va, pt) : 0;
}

static ssize_t ctl_write(struct file *f, const char __user *ubuf, size_t n,
			 loff_t *pos)
{
	char text[96], cmd[16];
	u64 va = 0, len = 0;
	u32 pattern = 0;
	int args, ret;

	if (n >= sizeof(text))
		return -EINVAL;
	if (copy_from_user(text, ubuf, n))
		return -EFAULT;
	text[n] = 0;
	args = sscanf(text, "%15s %llx %llx %x", cmd, &va, &len, &pattern);
	mutex_lock(&ep.lock);
	ep.reply[0] = 0;
	if (args == 4 && !strcmp(cmd, "read"))
		ret = cmd_read(va, len, pattern);
	else if (args == 3 && !strcmp(cmd, "hold"))
		ret = cmd_hold(va, len);
	else if (args == 1 && !strcmp(cmd, "release"))
		ret = cmd_release();
	else
		ret = -EINVAL;
	mutex_unlock(&ep.lock);
	return ret ? ret : n;
}

static ssize_t ctl_read(struct file *f, char __user *ubuf, size_t n,
			loff_t *pos)
{
	ssize_t ret;

	mutex_lock(&ep.lock);
	ret = simple_read_from_buffer(ubuf, n, pos, ep.reply, strlen(ep.reply));
	mutex_unlock(&ep.lock);
	return ret;
}

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.write = ctl_write,
	.read = ctl_read,
	.llseek = default_llseek,
};

static int edu_peer_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	int ret;

	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	ep.regs = pcim_iomap_region(pdev, 0, KBUILD_MODNAME);
	if (IS_ERR(ep.regs))
		return PTR_ERR(ep.regs);
	ep.buf = dmam_alloc_coherent(&pdev->dev, EDU_BUF_SIZE, &ep.buf_dma,
				     GFP_KERNEL);
	if (!ep.buf)
		return -ENOMEM;
	ep.pdev = pdev;
	ep.dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("ctl", 0600, ep.dir, NULL, &ctl_fops);
	pci_info(pdev, "edu_peer: bound\n");
	return 0;
}

static void edu_peer_remove(struct pci_dev *pdev)
{
	debugfs_remove_recursive(ep.dir);
	mutex_lock(&ep.lock);
	cmd_release();
	mutex_unlock(&ep.lock);
	ep.pdev = NULL;
}

static const struct pci_device_id edu_peer_ids[] = {
	{ PCI_DEVICE(EDU_VENDOR, EDU_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, edu_peer_ids);

static struct pci_driver edu_peer_driver = {
	.name = KBUILD_MODNAME,
	.id_table = edu_peer_ids,
	.probe = edu_peer_probe,
	.remove = edu_peer_remove,
};

static int __init edu_peer_init(void)
{
	mutex_init(&ep.lock);
	return pci_register_driver(&edu_peer_driver);
}
module_init(edu_peer_init);

static void __exit edu_peer_exit(void)
{
	pci_unregister_driver(&edu_peer_driver);
}
module_exit(edu_peer_exit);

MODULE_DESCRIPTION("edu_peer: the worked example of an nvrs peer-memory consumer");
MODULE_LICENSE("GPL");
