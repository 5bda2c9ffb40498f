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
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pci-p2pdma.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
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
 * nvrs_driver_override_is_nvrs() - whether the administrator handed a device to nvrs
 * @pdev: the device being probed
 *
 * Return: true if the device's driver_override names this driver.
 */
bool nvrs_driver_override_is_nvrs(struct pci_dev *pdev)
{
	return pdev->dev.driver &&
	       device_match_driver_override(&pdev->dev, pdev->dev.driver) > 0;
}

/**
 * nvrs_pcim_request_region() - claim a BAR for nvrs without mapping it
 * @pdev: the device being probed
 * @bar: the BAR
 * @name: the owner shown in /proc/iomem
 *
 * The emulated GPU's aperture is claimed this way once its identity block has
 * been read: a kernel mapping of the whole BAR (uncached) would keep the PAT
 * from giving the aperture the write-combined type. Released at unbind.
 *
 * Return: 0 or a negative errno.
 */
int nvrs_pcim_request_region(struct pci_dev *pdev, int bar, const char *name)
{
	return pcim_request_region(pdev, bar, name);
}

/**
 * nvrs_pci_is_disconnected() - whether a function fell off the bus
 * @pdev: the function
 *
 * Return: pci_dev_is_disconnected().
 */
bool nvrs_pci_is_disconnected(struct pci_dev *pdev)
{
	return pci_dev_is_disconnected(pdev);
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

/*
 * The remembered P2PDMA distances (src/topology/distance.rs) are keyed by
 * routing ids, which name places in the hierarchy: a function added or
 * removed anywhere may change what an id names or which bridges lie above
 * it. The bus notifier chain is a blocking chain (an rwsem), so the call runs
 * in process context, and bus_unregister_notifier() waits for a running one.
 */
static int nvrs_pci_bus_event(struct notifier_block *nb, unsigned long action,
			      void *data)
{
	switch (action) {
	case BUS_NOTIFY_ADD_DEVICE:
	case BUS_NOTIFY_DEL_DEVICE:
	case BUS_NOTIFY_REMOVED_DEVICE:
		nvrs_topology_changed_rs();
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block nvrs_pci_bus_nb = {
	.notifier_call = nvrs_pci_bus_event,
};

/**
 * nvrs_pci_bus_watch() - forget remembered P2PDMA distances on PCI hotplug
 *
 * Called once at module init, after the table is set up.
 *
 * Return: 0 or a negative errno.
 */
int nvrs_pci_bus_watch(void)
{
	return bus_register_notifier(&pci_bus_type, &nvrs_pci_bus_nb);
}

/**
 * nvrs_pci_bus_unwatch() - stop the notifier (module exit)
 *
 * When it returns, no notifier call is running and none will start.
 */
void nvrs_pci_bus_unwatch(void)
{
	bus_unregister_notifier(&pci_bus_type, &nvrs_pci_bus_nb);
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

/*
 * GPU aperture is MMIO: no CPU cache holds it, so DMA-API debug's count of
 * overlapping mappings per cacheline (which warns past 7, e.g. one table
 * mapped eight times for one peer, or dma-buf attachments of the same memory)
 * guards nothing here. The attribute only affects that debug check.
 */
#define NVRS_MMIO_ATTRS DMA_ATTR_DEBUGGING_IGNORE_CACHELINES

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

	addr = dma_map_resource(&peer->dev, phys, size, DMA_BIDIRECTIONAL,
				NVRS_MMIO_ATTRS);
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
	dma_unmap_resource(&peer->dev, dma, size, DMA_BIDIRECTIONAL,
			   NVRS_MMIO_ATTRS);
}

/**
 * nvrs_vma_pgoff() - the file offset, in pages, a VMA maps
 * @vma: the struct vm_area_struct
 *
 * Return: @vma->vm_pgoff.
 */
unsigned long nvrs_vma_pgoff(struct vm_area_struct *vma)
{
	return vma->vm_pgoff;
}

/**
 * nvrs_vma_inode_get() - a reference on the inode a VMA maps
 * @vma: the struct vm_area_struct of a /dev/nvrs mapping
 *
 * Return: the inode of the mapped file, with a reference held.
 */
struct inode *nvrs_vma_inode_get(struct vm_area_struct *vma)
{
	struct inode *inode = file_inode(vma->vm_file);

	ihold(inode);
	return inode;
}

/**
 * nvrs_inode_put() - drop a reference taken by nvrs_vma_inode_get()
 * @inode: the inode
 */
void nvrs_inode_put(struct inode *inode)
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
void nvrs_zap_user_mappings(struct inode *inode, u64 start, u64 len)
{
	unmap_mapping_range(inode->i_mapping, start, len, 1);
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
		/* The zeros reach the device before the caller remaps the range. */
		wmb();
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
 * nvrs_process_nr() - a process's id as the calling task sees it
 * @pid: a struct pid from nvrs_current_process_get()
 *
 * A process in a PID namespace has one id per level of namespace it belongs
 * to; a reader sees the id of its own active namespace, and nothing of a
 * process outside that namespace and those below it (as kill(2) and /proc).
 *
 * Return: the id of @pid in the active PID namespace of current, or 0 if the
 * process is not visible there.
 */
int nvrs_process_nr(void *pid)
{
	return pid_nr_ns(pid, task_active_pid_ns(current));
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

/*
 * CPU mappings of allocations. mmap only records which allocation a VMA maps
 * (vm_private_data, a reference counted by open/close); pages are inserted
 * by the fault handler, which asks the allocation under its lock whether it
 * is still live. A released allocation faults with SIGBUS, however its VMA
 * was created, split or moved.
 */

static vm_fault_t nvrs_vm_fault(struct vm_fault *vmf)
{
	return nvrs_alloc_fault(vmf->vma->vm_private_data, vmf,
				(u64)vmf->pgoff << PAGE_SHIFT);
}

static void nvrs_vm_open(struct vm_area_struct *vma)
{
	nvrs_alloc_vma_open(vma->vm_private_data);
}

static void nvrs_vm_close(struct vm_area_struct *vma)
{
	nvrs_alloc_vma_close(vma->vm_private_data);
}

static const struct vm_operations_struct nvrs_vm_ops = {
	.open = nvrs_vm_open,
	.close = nvrs_vm_close,
	.fault = nvrs_vm_fault,
};

/**
 * nvrs_vma_setup() - make a VMA a fault-mapped, write-combined aperture window
 * @vma: the struct vm_area_struct being set up by mmap (shared, checked by
 *       the caller)
 * @alloc: the allocation it maps; the VMA owns one reference, dropped by
 *         nvrs_alloc_vma_close()
 * @pages: map the allocation's struct pages (P2PDMA pages, rust/p2pdma.c)
 *         instead of bare page frames
 *
 * The caller has already made the VMA one that is never copied on fork,
 * expanded or dumped (VM_DONTCOPY, VM_DONTEXPAND, VM_DONTDUMP, and VM_IO for
 * frames, through the kernel crate's VmaNew setters); this adds VM_PFNMAP for
 * frames or VM_MIXEDMAP for pages, which the kernel crate has no setters for,
 * and the write-combined protection (for pages, the memory type the aperture
 * is reserved with, so the user mapping agrees with the kernel's).
 */
void nvrs_vma_setup(struct vm_area_struct *vma, void *alloc, bool pages)
{
	vm_flags_set(vma, pages ? VM_MIXEDMAP : VM_PFNMAP);
	vma->vm_page_prot =
		pgprot_writecombine(vm_get_page_prot(vma->vm_flags));
	vma->vm_private_data = alloc;
	vma->vm_ops = &nvrs_vm_ops;
}

/**
 * nvrs_vmf_insert() - insert the pages of one piece of aperture on a fault
 * @vmf: the fault being handled
 * @file_off: the file offset (GPU VA) the piece starts at
 * @phys: CPU physical address of the piece
 * @len: bytes in the piece
 * @pages: insert the struct pages (a VMA set up for pages: P2PDMA pages nvrs
 *         holds a reference on) rather than their frame numbers, so that
 *         get_user_pages() and the block layer can take them
 *
 * Inserts every page of the piece that lies inside the faulting VMA, so a
 * 64 KiB piece costs one fault. Called with the allocation's lock held.
 *
 * Return: VM_FAULT_NOPAGE, or the error of the faulting page's insertion.
 */
vm_fault_t nvrs_vmf_insert(struct vm_fault *vmf, u64 file_off, u64 phys,
			   u64 len, bool pages)
{
	struct vm_area_struct *v = vmf->vma;
	u64 vma_off = (u64)v->vm_pgoff << PAGE_SHIFT;
	u64 o;

	for (o = 0; o < len; o += PAGE_SIZE) {
		unsigned long addr;
		vm_fault_t ret;
		int err;

		if (file_off + o < vma_off)
			continue;
		addr = v->vm_start + (unsigned long)(file_off + o - vma_off);
		if (addr >= v->vm_end)
			break;
		if (pages) {
			err = vm_insert_page(v, addr,
					     pfn_to_page(PHYS_PFN(phys + o)));
			ret = !err || err == -EBUSY ? VM_FAULT_NOPAGE :
			      err == -ENOMEM ? VM_FAULT_OOM : VM_FAULT_SIGBUS;
		} else {
			ret = vmf_insert_pfn_prot(v, addr, PHYS_PFN(phys + o),
						  v->vm_page_prot);
		}
		if (ret != VM_FAULT_NOPAGE && addr == (vmf->address & PAGE_MASK))
			return ret;
	}
	return VM_FAULT_NOPAGE;
}

/**
 * nvrs_aperture_wc() - reserve a range of aperture write-combined
 * @pdev: the GPU, being probed (the reservation is undone at unbind)
 * @phys: CPU physical address of GPU memory in the aperture
 * @len: bytes
 *
 * With PAT, user mappings then get the write-combined memory type; without a
 * reservation, a mapping of more than one insertion falls back to UC-. The
 * MTRR entry helps CPUs without PAT.
 *
 * Return: 0 or a negative errno.
 */
int nvrs_aperture_wc(struct pci_dev *pdev, u64 phys, u64 len)
{
	int ret;

	ret = devm_arch_io_reserve_memtype_wc(&pdev->dev, phys, len);
	if (ret)
		return ret;
	ret = devm_arch_phys_wc_add(&pdev->dev, phys, len);
	return ret < 0 ? ret : 0;
}

/*
 * A VA space lives as long as its process's address space (mm), as UVM's
 * does: an MMU notifier on the mm tells nvrs when it is torn down (the
 * process exited or exec'd), even if a child still holds the file.
 */
struct nvrs_mm_watch {
	struct mmu_notifier mn;
	void *owner;
};

/*
 * The work queues that run consumer free callbacks, both unbound (items run
 * concurrently); module exit destroys them (which drains them), the exit
 * queue first, whose items may wait for revocations.
 *
 * nvrs_exit: the teardown of the VA spaces of exited processes (the MMU
 * notifier's release runs inside its SRCU read section, so it only queues the
 * teardown, callbacks and scrubbing, here), the fault controls' timer and
 * surprise removal.
 *
 * nvrs_revoke: the revocation of pins by GPU removal and by the fault
 * controls, one work item per pin, so a callback that blocks holds up its own
 * pin only. A queue runs a bounded number of items at once (max_active), and
 * blocked callbacks keep their workers: on a queue of their own they can hold
 * up only other revocations, never a process's exit.
 */
static struct workqueue_struct *nvrs_wq, *nvrs_revoke_wq;

/**
 * nvrs_wq_init() - create the work queues (module init)
 *
 * Return: 0, or -ENOMEM (then neither exists).
 */
int nvrs_wq_init(void)
{
	nvrs_wq = alloc_workqueue("nvrs_exit", WQ_UNBOUND, 0);
	nvrs_revoke_wq = alloc_workqueue("nvrs_revoke", WQ_UNBOUND, 0);
	if (nvrs_wq && nvrs_revoke_wq)
		return 0;
	nvrs_wq_fini();
	return -ENOMEM;
}

/**
 * nvrs_wq_get() - the exit work queue
 *
 * Return: the queue (NULL before module init made it).
 */
struct workqueue_struct *nvrs_wq_get(void)
{
	return nvrs_wq;
}

/**
 * nvrs_revoke_wq_get() - the revocation work queue
 *
 * Return: the queue (NULL before module init made it).
 */
struct workqueue_struct *nvrs_revoke_wq_get(void)
{
	return nvrs_revoke_wq;
}

/**
 * nvrs_wq_fini() - drain and destroy the work queues (module exit)
 */
void nvrs_wq_fini(void)
{
	if (nvrs_wq)
		destroy_workqueue(nvrs_wq);
	nvrs_wq = NULL;
	if (nvrs_revoke_wq)
		destroy_workqueue(nvrs_revoke_wq);
	nvrs_revoke_wq = NULL;
}

static void nvrs_mm_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	nvrs_va_space_exit(container_of(mn, struct nvrs_mm_watch, mn)->owner);
}

static const struct mmu_notifier_ops nvrs_mm_ops = {
	.release = nvrs_mm_release,
};

/**
 * nvrs_mm_watch_current() - watch the calling process's address space
 * @owner: passed to nvrs_va_space_exit() when the address space goes away
 *
 * Return: the watch, or an ERR_PTR() (-EINVAL for a kernel thread).
 */
struct nvrs_mm_watch *nvrs_mm_watch_current(void *owner)
{
	struct nvrs_mm_watch *w;
	int ret;

	if (!current->mm)
		return ERR_PTR(-EINVAL);
	w = kzalloc_obj(*w);
	if (!w)
		return ERR_PTR(-ENOMEM);
	w->owner = owner;
	w->mn.ops = &nvrs_mm_ops;
	ret = mmu_notifier_register(&w->mn, current->mm);
	if (ret) {
		kfree(w);
		return ERR_PTR(ret);
	}
	return w;
}

/**
 * nvrs_mm_watch_is_current() - whether a watch is on the caller's address space
 * @watch: from nvrs_mm_watch_current()
 *
 * The watch holds the mm_struct (mmgrab), so its address is not reused.
 *
 * Return: true if current runs in the watched address space.
 */
bool nvrs_mm_watch_is_current(struct nvrs_mm_watch *watch)
{
	return watch->mn.mm == current->mm;
}

/**
 * nvrs_mm_watch_stop() - stop watching and free the watch
 * @watch: from nvrs_mm_watch_current()
 *
 * Runs the release callback first if the address space is still alive, and
 * waits for one that is running. Sleeps.
 */
void nvrs_mm_watch_stop(struct nvrs_mm_watch *watch)
{
	mmu_notifier_unregister(&watch->mn, watch->mn.mm);
	kfree(watch);
}

/**
 * nvrs_copy_mmio() - copy a range of GPU aperture to another through the CPU
 * @dst: CPU physical address of the destination (page aligned)
 * @src: CPU physical address of the source (page aligned)
 * @len: bytes (page aligned)
 *
 * What a GPU without a usable copy engine does (the emulated GPUs): maps both
 * ranges 64 KiB at a time, the source uncached and the destination
 * write-combined, and copies through a bounce buffer. Sleeps.
 *
 * Return: 0, or -ENOMEM if a window or the buffer could not be had.
 */
int nvrs_copy_mmio(u64 dst, u64 src, u64 len)
{
	void *buf = kmalloc(SZ_64K, GFP_KERNEL);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (len) {
		u64 n = min_t(u64, len, SZ_64K);
		void __iomem *s = ioremap(src, n);
		void __iomem *d = ioremap_wc(dst, n);

		if (!s || !d)
			ret = -ENOMEM;
		if (!ret) {
			memcpy_fromio(buf, s, n);
			memcpy_toio(d, buf, n);
		}
		if (s)
			iounmap(s);
		if (d)
			iounmap(d);
		if (ret)
			break;
		dst += n;
		src += n;
		len -= n;
		cond_resched();
	}
	kfree(buf);
	return ret;
}
