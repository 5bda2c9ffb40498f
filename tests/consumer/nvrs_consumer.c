// SPDX-License-Identifier: GPL-2.0
/*
 * nvrs_consumer: a test module that uses nvrs the way an in-kernel RDMA
 * driver would, through nvrs's exported symbols and public headers only.
 *
 * At load it reports how many GPUs nvrs has bound; the VM scenarios compare
 * that with the devices bound in sysfs. Later stages grow it into an
 * edu-driving peer that pins and DMA-maps GPU memory.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/printk.h>

#include <nvrs.h>

static int __init nvrs_consumer_init(void)
{
	pr_info("nvrs reports %u GPUs\n", nvrs_gpu_count());
	return 0;
}
module_init(nvrs_consumer_init);

static void __exit nvrs_consumer_exit(void)
{
}
module_exit(nvrs_consumer_exit);

MODULE_DESCRIPTION("nvrs test consumer (RDMA-driver stand-in)");
MODULE_LICENSE("GPL");
