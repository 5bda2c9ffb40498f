// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line parts of the user-space shim for the kernel's gpu_buddy (see
 * include/nvrs_buddy_shim.h).
 */

/* tools/include's hweight64() calls the kernel's software fallback. */
unsigned long __sw_hweight64(__u64 w)
{
	return __builtin_popcountll(w);
}
