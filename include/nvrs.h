/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * nvrs: functions exported to other kernel modules (EXPORT_SYMBOL_GPL).
 *
 * Build a consumer against nvrs's Module.symvers (KBUILD_EXTRA_SYMBOLS).
 */
#ifndef NVRS_H
#define NVRS_H

#include <linux/types.h>

/**
 * nvrs_gpu_count() - number of GPUs bound by nvrs
 *
 * Context: any context that may sleep.
 * Return: how many GPUs (hardware or emulated) are currently bound.
 */
u32 nvrs_gpu_count(void);

#endif /* NVRS_H */
