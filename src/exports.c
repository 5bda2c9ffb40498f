// SPDX-License-Identifier: GPL-2.0
/*
 * Symbol exports for nvrs.
 *
 * The functions are defined in Rust (src/exports.rs) with C linkage; the
 * kernel crate cannot emit EXPORT_SYMBOL_GPL for an out-of-tree module, so
 * this file does it against the prototypes consumers use.
 */

#include <linux/export.h>
#include <linux/module.h>

#include "../include/nvrs.h"

EXPORT_SYMBOL_GPL(nvrs_gpu_count);
