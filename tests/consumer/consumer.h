/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the parts of nvrs_consumer share: edu, the stand-in NIC, and the
 * reply buffer of the debugfs ctl file.
 */
#ifndef NVRS_CONSUMER_H
#define NVRS_CONSUMER_H

#include <linux/pci.h>
#include <linux/types.h>

/* edu's DMA buffer, in its BAR0 address space. */
#define EDU_BUF			0x40000
/*
 * edu's DMA buffer is 4 KiB, but QEMU 7.2 aborts the whole VM on a transfer
 * that reaches its last byte (an off-by-one in its range check), so each
 * transfer moves at most half of it.
 */
#define EDU_BUF_SIZE		2048
#define GPU_PAGE		(64 * 1024)

struct pci_dev *consumer_edu(void);
__printf(1, 2) void reply(const char *fmt, ...);
int edu_dma(u64 src, u64 dst, u32 count, bool to_ram);
int edu_roundtrip(u64 iova, u64 phys, u32 pattern);

/* dmabuf.c: the dma-buf importer, through the kernel's RDMA core. */
int dmabuf_init(struct pci_dev *edu);
void dmabuf_fini(void);
int dmabuf_cmd(unsigned int argc, char **argv);

#endif /* NVRS_CONSUMER_H */
