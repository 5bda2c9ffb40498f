// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for nvrs's Rust code: PCI hierarchy walks, the P2PDMA distance
 * check and NUMA CPU lists, which the kernel crate has no wrappers for.
 */

#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/io.h>
#include <linux/sizes.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/topology.h>

#include "helpers.h"

/* The routing id: domain << 16 | bus << 8 | devfn, wide enough for any domain. */
static u64 nvrs_pci_id(struct pci_dev *pdev)
{
	return (u64)(u32)pci_domain_nr(pdev->bus) << 16 |
	       (u64)pdev->bus->number << 8 | pdev->devfn;
}

static u32 nvrs_port_kind(struct pci_dev *bridge)
{
	if (!pci_is_pcie(bridge))
		return NVRS_PORT_BRIDGE;
	switch (pci_pcie_type(bridge)) {
	case PCI_EXP_TYPE_ROOT_PORT:
		return NVRS_PORT_ROOT;
	case PCI_EXP_TYPE_UPSTREAM:
		return NVRS_PORT_SWITCH_UP;
	case PCI_EXP_TYPE_DOWNSTREAM:
		return NVRS_PORT_SWITCH_DOWN;
	default:
		return NVRS_PORT_BRIDGE;
	}
}

/**
 * nvrs_pcim_enable_device() - enable a device, disabled again automatically
 * @pdev: the device being probed
 *
 * The managed variant undoes the enable when probe fails or the device is
 * unbound, so repeated bind/unbind cycles stay balanced.
 *
 * Return: 0 or a negative errno.
 */
int nvrs_pcim_enable_device(struct pci_dev *pdev)
{
	return pcim_enable_device(pdev);
}

/**
 * nvrs_pci_describe() - where a PCI function sits
 * @pdev: the function
 * @ep: filled with its id, host bridge, NUMA node and upstream bridges
 *
 * Return: 0, or -E2BIG if more than NVRS_PCI_MAX_HOPS bridges lie above it.
 */
int nvrs_pci_describe(struct pci_dev *pdev, struct nvrs_pci_endpoint *ep)
{
	struct pci_dev *up;
	struct pci_bus *root = pdev->bus;
	u32 n = 0, i;

	while (root->parent)
		root = root->parent;

	ep->id = nvrs_pci_id(pdev);
	ep->host_bridge = (u32)pci_domain_nr(pdev->bus) << 8 | root->number;
	ep->numa_node = dev_to_node(&pdev->dev);
	ep->vendor_device = (u32)pdev->vendor << 16 | pdev->device;
	ep->class = pdev->class;

	/* Collect the bridges bottom-up, then reverse to root-first. */
	for (up = pci_upstream_bridge(pdev); up; up = pci_upstream_bridge(up)) {
		if (n == NVRS_PCI_MAX_HOPS)
			return -E2BIG;
		ep->hops[n].id = nvrs_pci_id(up);
		ep->hops[n].kind = nvrs_port_kind(up);
		n++;
	}
	for (i = 0; i < n / 2; i++)
		swap(ep->hops[i], ep->hops[n - 1 - i]);
	ep->n_hops = n;
	return 0;
}

/**
 * nvrs_pci_peers() - describe the functions that are candidate DMA peers
 * @extra_vendor_device: vendor << 16 | device of one more kind of peer, or 0
 * @eps: array of @max endpoints to fill
 * @max: size of @eps
 *
 * Peers are network and InfiniBand controllers (PCI class 0x02) and functions
 * matching @extra_vendor_device. Functions whose bridge chain is too deep are
 * skipped.
 *
 * Return: the number of peers found (at most @max).
 */
int nvrs_pci_peers(u32 extra_vendor_device, struct nvrs_pci_endpoint *eps,
		   u32 max)
{
	struct pci_dev *pdev = NULL;
	u32 n = 0;

	while (n < max && (pdev = pci_get_device(PCI_ANY_ID, PCI_ANY_ID, pdev))) {
		u32 vd = (u32)pdev->vendor << 16 | pdev->device;

		if ((pdev->class >> 16) != PCI_BASE_CLASS_NETWORK &&
		    (!extra_vendor_device || vd != extra_vendor_device))
			continue;
		if (!nvrs_pci_describe(pdev, &eps[n]))
			n++;
	}
	pci_dev_put(pdev);
	return n;
}

/**
 * nvrs_p2pdma_distance() - the kernel's P2PDMA verdict for one client
 * @provider: the device whose memory is exported
 * @client_id: the client function, domain << 16 | bus << 8 | devfn
 *
 * Return: the P2PDMA distance, -ENODEV if the client does not exist, or
 * another negative value if the kernel refuses peer-to-peer DMA between the
 * two (for example through a host bridge that is not on its allow-list).
 */
int nvrs_p2pdma_distance(struct pci_dev *provider, u64 client_id)
{
	struct pci_dev *client;
	int dist;

	client = pci_get_domain_bus_and_slot(client_id >> 16,
					     (client_id >> 8) & 0xff,
					     client_id & 0xff);
	if (!client)
		return -ENODEV;
	dist = pci_p2pdma_distance(provider, &client->dev, false);
	pci_dev_put(client);
	return dist;
}

/**
 * nvrs_node_cpulist() - the CPUs of a NUMA node as a cpulist ("0-15")
 * @node: the node, or NUMA_NO_NODE for all online CPUs
 * @buf: output buffer, NUL-terminated
 * @len: size of @buf
 *
 * Return: the length of the string written.
 */
int nvrs_node_cpulist(int node, char *buf, u32 len)
{
	const struct cpumask *mask;

	if (node == NUMA_NO_NODE)
		mask = cpu_online_mask;
	else
		mask = cpumask_of_node(node);
	return scnprintf(buf, len, "%*pbl", cpumask_pr_args(mask));
}

/**
 * nvrs_dma_map_mmio() - map a range of GPU aperture for DMA by a peer
 * @peer: the device that will access the range
 * @phys: CPU physical address of the range (inside a GPU BAR)
 * @size: bytes
 * @dma: the address @peer must use (an IOVA behind an IOMMU)
 *
 * Return: 0, or -EIO if the mapping failed.
 */
int nvrs_dma_map_mmio(struct pci_dev *peer, u64 phys, u64 size, u64 *dma)
{
	dma_addr_t addr;

	addr = dma_map_resource(&peer->dev, phys, size, DMA_BIDIRECTIONAL, 0);
	if (dma_mapping_error(&peer->dev, addr))
		return -EIO;
	*dma = addr;
	return 0;
}

/**
 * nvrs_dma_unmap_mmio() - undo nvrs_dma_map_mmio()
 * @peer: the device the range was mapped for
 * @dma: the address nvrs_dma_map_mmio() returned
 * @size: bytes, as mapped
 */
void nvrs_dma_unmap_mmio(struct pci_dev *peer, u64 dma, u64 size)
{
	dma_unmap_resource(&peer->dev, dma, size, DMA_BIDIRECTIONAL, 0);
}

/**
 * nvrs_io_remap_wc() - map GPU aperture into a user VMA, write-combined
 * @vma: the struct vm_area_struct being set up by mmap
 * @addr: user address to map at
 * @phys: CPU physical address (page aligned)
 * @size: bytes (page aligned)
 *
 * Return: 0 or a negative errno from io_remap_pfn_range().
 */
int nvrs_io_remap_wc(void *vma, unsigned long addr, u64 phys, unsigned long size)
{
	struct vm_area_struct *v = vma;

	return io_remap_pfn_range(v, addr, phys >> PAGE_SHIFT, size,
				  pgprot_writecombine(v->vm_page_prot));
}

/**
 * nvrs_vma_pgoff() - the file offset, in pages, a VMA maps
 * @vma: the struct vm_area_struct
 *
 * Return: @vma->vm_pgoff.
 */
unsigned long nvrs_vma_pgoff(void *vma)
{
	return ((struct vm_area_struct *)vma)->vm_pgoff;
}

/**
 * nvrs_vma_inode_get() - a reference on the inode a VMA maps
 * @vma: the struct vm_area_struct of a /dev/nvrs mapping
 *
 * Return: the inode of the mapped file, with a reference held.
 */
void *nvrs_vma_inode_get(void *vma)
{
	struct inode *inode = file_inode(((struct vm_area_struct *)vma)->vm_file);

	ihold(inode);
	return inode;
}

/**
 * nvrs_inode_put() - drop a reference taken by nvrs_vma_inode_get()
 * @inode: the inode
 */
void nvrs_inode_put(void *inode)
{
	iput(inode);
}

/**
 * nvrs_zap_user_mappings() - remove every user mapping of a range of /dev/nvrs
 * @inode: the device inode
 * @start: first file offset (a GPU VA: mmap offsets are VAs, unique across
 *         processes, so the range names one allocation's mappings only)
 * @len: bytes
 *
 * Later accesses through those mappings fault (SIGBUS): the memory behind
 * them can be handed to someone else.
 */
void nvrs_zap_user_mappings(void *inode, u64 start, u64 len)
{
	unmap_mapping_range(((struct inode *)inode)->i_mapping, start, len, 1);
}

/**
 * nvrs_pci_dev_get() - take a reference on a PCI device
 * @pdev: a struct pci_dev, from a consumer
 *
 * Return: @pdev.
 */
void *nvrs_pci_dev_get(void *pdev)
{
	return pci_dev_get(pdev);
}

/**
 * nvrs_pci_dev_put() - drop a reference taken by nvrs_pci_dev_get()
 * @pdev: the device
 */
void nvrs_pci_dev_put(void *pdev)
{
	pci_dev_put(pdev);
}

/**
 * nvrs_zero_mmio() - zero a range of GPU aperture through the CPU
 * @phys: CPU physical address (page aligned)
 * @len: bytes (page aligned)
 *
 * Maps the range write-combined, 2 MiB at a time, and clears it.
 *
 * Return: 0, or -ENOMEM if a window could not be mapped.
 */
int nvrs_zero_mmio(u64 phys, u64 len)
{
	while (len) {
		u64 n = min_t(u64, len, SZ_2M);
		void __iomem *p = ioremap_wc(phys, n);

		if (!p)
			return -ENOMEM;
		memset_io(p, 0, n);
		iounmap(p);
		phys += n;
		len -= n;
		cond_resched();
	}
	return 0;
}

/**
 * nvrs_current_tgid() - the calling process's id (thread-group id)
 *
 * Return: task_tgid_nr(current).
 */
int nvrs_current_tgid(void)
{
	return task_tgid_nr(current);
}

/**
 * nvrs_current_process() - the calling process's struct pid, for comparison
 *
 * Return: task_tgid(current), without a reference.
 */
void *nvrs_current_process(void)
{
	return task_tgid(current);
}

/**
 * nvrs_current_process_get() - the calling process's struct pid, referenced
 *
 * Holding the reference keeps the struct pid from being freed and reused by a
 * later process, so comparing pointers identifies a process for good.
 *
 * Return: get_pid(task_tgid(current)).
 */
void *nvrs_current_process_get(void)
{
	return get_pid(task_tgid(current));
}

/**
 * nvrs_process_put() - drop a reference taken by nvrs_current_process_get()
 * @pid: the struct pid
 */
void nvrs_process_put(void *pid)
{
	put_pid(pid);
}

/**
 * nvrs_module_get() - take a reference on nvrs itself
 *
 * Held by each persistent pin, so that nvrs cannot be unloaded while a
 * consumer still holds one.
 *
 * Return: true if the reference was taken (false while unloading).
 */
bool nvrs_module_get(void)
{
	return try_module_get(THIS_MODULE);
}

/**
 * nvrs_module_put() - drop a reference taken by nvrs_module_get()
 */
void nvrs_module_put(void)
{
	module_put(THIS_MODULE);
}
