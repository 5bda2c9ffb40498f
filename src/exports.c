// SPDX-License-Identifier: GPL-2.0
/*
 * Symbol exports for nvrs.
 *
 * The functions are defined in Rust (src/exports.rs, src/p2p/api.rs) with C
 * linkage; the kernel crate cannot emit EXPORT_SYMBOL_GPL for an out-of-tree
 * module, so this file does it, against the prototypes consumers use
 * (include/nvrs.h, include/nv-p2p.h), which the compiler checks here.
 */

#include <linux/export.h>
#include <linux/module.h>

#include "../include/nvrs.h"
#include "../include/nv-p2p.h"

EXPORT_SYMBOL_GPL(nvrs_gpu_count);

/* nvrs supports persistent pins (nvidia_p2p_get_pages_persistent()). */
int nvidia_p2p_cap_persistent_pages = 1;
EXPORT_SYMBOL_GPL(nvidia_p2p_cap_persistent_pages);

EXPORT_SYMBOL_GPL(nvidia_p2p_init_mapping);
EXPORT_SYMBOL_GPL(nvidia_p2p_destroy_mapping);
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);
EXPORT_SYMBOL_GPL(nvidia_p2p_register_rsync_driver);
EXPORT_SYMBOL_GPL(nvidia_p2p_unregister_rsync_driver);
EXPORT_SYMBOL_GPL(nvidia_p2p_get_rsync_registers);
EXPORT_SYMBOL_GPL(nvidia_p2p_put_rsync_registers);
