/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Just enough of the kernel for drivers/gpu/buddy.c (the kernel's own GPU
 * buddy allocator, gpu_buddy) to run in user space, as the anchor of the host
 * benchmark (tests/host/examples/pmm_bench.rs). Included before everything
 * (-include); the kernel tree's tools/include supplies lists, rbtrees and bit
 * helpers. Allocation is malloc, locking assertions are no-ops (the bench is
 * single-threaded), and a BUG is an abort.
 */
#ifndef NVRS_BUDDY_SHIM_H
#define NVRS_BUDDY_SHIM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kconfig.h>
#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/bitops.h>
#include <linux/log2.h>
#include <linux/err.h>
#include <linux/sizes.h>
#include <linux/overflow.h>

#ifndef GFP_KERNEL
#define GFP_KERNEL 0
#endif

#define kmalloc(n, f) malloc(n)
#define kzalloc(n, f) calloc(1, (n))
#define kcalloc(n, s, f) calloc((n), (s))
#define kfree(p) free((void *)(p))
#define kmalloc_objs(obj, n, ...) ((typeof(obj) *)malloc((n) * sizeof(obj)))
#define kzalloc_obj(obj, ...) ((typeof(obj) *)calloc(1, sizeof(obj)))

struct kmem_cache { size_t size; };
#define KMEM_CACHE(s, f) nvrs_kmem_cache_new(sizeof(struct s))
static inline struct kmem_cache *nvrs_kmem_cache_new(size_t size)
{
	struct kmem_cache *c = malloc(sizeof(*c));

	if (c)
		c->size = size;
	return c;
}
#define kmem_cache_zalloc(c, f) calloc(1, (c)->size)
#define kmem_cache_free(c, p) free(p)
#define kmem_cache_destroy(c) free(c)

#include <time.h>

typedef unsigned int vm_fault_t;

#ifndef IS_ALIGNED
#define IS_ALIGNED(x, a) (((x) & ((typeof(x))(a) - 1)) == 0)
#endif
#define range_overflows(start, size, max) ({ \
	typeof(start) s__ = (start); \
	typeof(size) z__ = (size); \
	typeof(max) m__ = (max); \
	s__ >= m__ || z__ > m__ - s__; })

static inline unsigned long __ffs64(u64 w)
{
	return __builtin_ctzll(w);
}

static inline u64 ktime_get_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (u64)t.tv_sec * 1000000000ull + t.tv_nsec;
}

#define kmemleak_update_trace(p) do { } while (0)
#define cond_resched() do { } while (0)
#define might_sleep() do { } while (0)
#define lockdep_assert(c) do { } while (0)
#define lock_is_held_type(l, r) 1
#define kunit_fail_current_test(...) do { } while (0)

#undef pr_info
#define pr_info(...) printf(__VA_ARGS__)
#undef pr_err
#define pr_err(...) fprintf(stderr, __VA_ARGS__)
#undef BUG_ON
#define BUG_ON(c) do { if (c) abort(); } while (0)
#undef WARN_ON
#define WARN_ON(c) ({ int __w = !!(c); if (__w) fprintf(stderr, "gpu_buddy: WARN_ON(%s)\n", #c); __w; })
#undef WARN
#define WARN(c, ...) ({ int __w = !!(c); if (__w) fprintf(stderr, __VA_ARGS__); __w; })

#define EXPORT_SYMBOL(s)
#define EXPORT_SYMBOL_GPL(s)
#define MODULE_LICENSE(s)
#define MODULE_DESCRIPTION(s)
#define module_init(f) int nvrs_buddy_module_init(void) { return f(); }
#define module_exit(f) void nvrs_buddy_module_exit(void) { f(); }
#define __init
#define __exit

#endif /* NVRS_BUDDY_SHIM_H */
