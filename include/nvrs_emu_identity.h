/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * nvrs emulated-GPU identity block.
 *
 * nvrs can bind QEMU "ivshmem-plain" devices as emulated GPUs (module
 * parameter emulated=1). Such a device has no registers, so whoever creates
 * the shared-memory backend (tests/vm/run.py) writes this block at offset 0
 * of it. nvrs reads the block where it would read PMC_BOOT_0 / PMC_BOOT_42 on
 * real hardware and identifies the chip from those values exactly as it does
 * for a real GPU.
 *
 * Layout: little-endian, packed, 64 bytes, at offset 0 of BAR2. The region
 * [0, fb_offset) is never handed out as GPU memory; fb_offset must be a
 * multiple of the 2 MiB root chunk, and fb_offset + fb_size must not exceed
 * the BAR.
 */
#ifndef NVRS_EMU_IDENTITY_H
#define NVRS_EMU_IDENTITY_H

#include <linux/types.h>

#define NVRS_EMU_MAGIC		0x5352564e	/* "NVRS" as bytes in memory */
#define NVRS_EMU_VERSION	1
#define NVRS_EMU_BAR		2		/* ivshmem-plain shared memory */

struct nvrs_emu_identity {
	__le32 magic;		/* 0x00: NVRS_EMU_MAGIC */
	__le16 version;		/* 0x04: NVRS_EMU_VERSION */
	__le16 size;		/* 0x06: sizeof(struct nvrs_emu_identity) */
	__le32 pmc_boot_0;	/* 0x08: NV_PMC_BOOT_0 of the impersonated chip */
	__le32 pmc_boot_42;	/* 0x0c: NV_PMC_BOOT_42 of the impersonated chip */
	__le16 pci_device_id;	/* 0x10: NVIDIA PCI device id impersonated */
	__u8 gpu_index;		/* 0x12: index of this GPU in the VM, 0..31 */
	__u8 nvlinks_per_peer;	/* 0x13: NVLinks to each GPU in nvlink_peers */
	__le32 nvlink_peers;	/* 0x14: bit i set: NVLinks to emulated GPU i */
	__le64 fb_offset;	/* 0x18: start of GPU memory within the BAR */
	__le64 fb_size;		/* 0x20: bytes of GPU memory from fb_offset */
	__u8 uuid[16];		/* 0x28: GPU UUID, as nvidia_p2p gpu_uuid */
	__u8 reserved[8];	/* 0x38: zero */
};

#endif /* NVRS_EMU_IDENTITY_H */
