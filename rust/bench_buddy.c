// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark anchor: the kernel's own GPU buddy allocator (gpu_buddy),
 * driven one naturally aligned block at a time, as src/bench/ drives nvrs's
 * memory manager. The kernel crate's wrapper allocates a list object per
 * allocation; calling the C API directly keeps that cost out of the anchor.
 */

#include <linux/gpu_buddy.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>

#include "helpers.h"

u64 nvrs_now_ns(void)
{
	return ktime_get_ns();
}

#if IS_ENABLED(CONFIG_GPU_BUDDY)

struct gpu_buddy *nvrs_buddy_new(u64 size, u64 chunk)
{
	struct gpu_buddy *mm = kzalloc(sizeof(*mm), GFP_KERNEL);

	if (mm && gpu_buddy_init(mm, size, chunk)) {
		kfree(mm);
		mm = NULL;
	}
	return mm;
}

void nvrs_buddy_destroy(struct gpu_buddy *mm)
{
	gpu_buddy_fini(mm);
	kfree(mm);
}

struct gpu_buddy_block *nvrs_buddy_alloc(struct gpu_buddy *mm, u64 size)
{
	struct gpu_buddy_block *block;
	LIST_HEAD(list);

	if (gpu_buddy_alloc_blocks(mm, 0, mm->size, size, size, &list, 0))
		return NULL;
	block = list_first_entry(&list, struct gpu_buddy_block, link);
	list_del(&block->link);
	return block;
}

void nvrs_buddy_free(struct gpu_buddy *mm, struct gpu_buddy_block *block)
{
	gpu_buddy_free_block(mm, block);
}

/* The block of @size at offset @start: gpu_buddy's range allocation. */
struct gpu_buddy_block *nvrs_buddy_alloc_at(struct gpu_buddy *mm, u64 start,
					    u64 size)
{
	struct gpu_buddy_block *block;
	LIST_HEAD(list);

	if (gpu_buddy_alloc_blocks(mm, start, start + size, size, size, &list,
				   GPU_BUDDY_RANGE_ALLOCATION))
		return NULL;
	block = list_first_entry(&list, struct gpu_buddy_block, link);
	list_del(&block->link);
	return block;
}

/*
 * @size of adjacent memory in blocks of at least 2 MiB (gpu_buddy rounds a
 * contiguous request up to a power of two, then tries harder with smaller
 * blocks). The blocks stay linked to each other in a ring without a list
 * head, so that the handle is the first block and nothing is allocated for
 * it; nvrs_buddy_free_contiguous() puts a head back.
 */
struct gpu_buddy_block *nvrs_buddy_alloc_contiguous(struct gpu_buddy *mm,
						    u64 size)
{
	struct gpu_buddy_block *block;
	LIST_HEAD(list);

	if (gpu_buddy_alloc_blocks(mm, 0, mm->size, size, SZ_2M, &list,
				   GPU_BUDDY_CONTIGUOUS_ALLOCATION))
		return NULL;
	block = list_first_entry(&list, struct gpu_buddy_block, link);
	list_del(&list);
	return block;
}

void nvrs_buddy_free_contiguous(struct gpu_buddy *mm,
				struct gpu_buddy_block *block)
{
	struct list_head list;

	list_add_tail(&list, &block->link);
	gpu_buddy_free_list(mm, &list, 0);
}

/*
 * A buffer of @size bytes in blocks of at least 64 KiB, adjacent or not: how
 * a driver backs a buffer object with gpu_buddy (xe and amdgpu keep such a
 * list of blocks in their resource). gpu_buddy searches for @size rounded
 * up to 64 KiB, then trims the last block back to @size (its default), so a
 * buffer can end in blocks smaller than 64 KiB. The list head is allocated
 * here, one per buffer, as the driver's resource is.
 */
struct list_head *nvrs_buddy_alloc_buffer(struct gpu_buddy *mm, u64 size)
{
	struct list_head *blocks = kmalloc(sizeof(*blocks), GFP_KERNEL);

	if (!blocks)
		return NULL;
	INIT_LIST_HEAD(blocks);
	if (gpu_buddy_alloc_blocks(mm, 0, mm->size, size, SZ_64K, blocks, 0)) {
		kfree(blocks);
		return NULL;
	}
	return blocks;
}

void nvrs_buddy_free_buffer(struct gpu_buddy *mm, struct list_head *blocks)
{
	gpu_buddy_free_list(mm, blocks, 0);
	kfree(blocks);
}

/* Bytes of the blocks that back a buffer. */
u64 nvrs_buddy_buffer_bytes(struct gpu_buddy *mm, struct list_head *blocks)
{
	struct gpu_buddy_block *block;
	u64 bytes = 0;

	list_for_each_entry(block, blocks, link)
		bytes += gpu_buddy_block_size(mm, block);
	return bytes;
}

u64 nvrs_buddy_largest_free(struct gpu_buddy *mm)
{
	int order;

	for (order = mm->max_order; order >= 0; order--)
		if (mm->free_scoreboard[order])
			return mm->chunk_size << order;
	return 0;
}

/*
 * Blocks in the tree under @block, @block included. Only a split block's
 * children are live: merging frees them without clearing the parent's links.
 */
static u64 nvrs_buddy_blocks(struct gpu_buddy_block *block)
{
	if ((block->header & GPU_BUDDY_HEADER_STATE) != GPU_BUDDY_SPLIT)
		return 1;
	return 1 + nvrs_buddy_blocks(block->left) +
	       nvrs_buddy_blocks(block->right);
}

/*
 * Bytes of metadata the manager holds: the manager, its arrays of roots,
 * free trees and scoreboards, and every block (split ones included), as
 * gpu_buddy_init() and the block cache size them (allocator overhead aside).
 */
u64 nvrs_buddy_metadata_bytes(struct gpu_buddy *mm)
{
	u64 orders = mm->max_order + 1;
	u64 bytes = sizeof(*mm);
	unsigned int i;

	bytes += mm->n_roots * sizeof(*mm->roots);
	bytes += GPU_BUDDY_MAX_FREE_TREES *
		 (sizeof(*mm->free_trees) + orders * sizeof(struct rb_root));
	bytes += 2 * orders * sizeof(u64);
	for (i = 0; i < mm->n_roots; i++)
		bytes += nvrs_buddy_blocks(mm->roots[i]) *
			 sizeof(struct gpu_buddy_block);
	return bytes;
}

#endif /* CONFIG_GPU_BUDDY */
