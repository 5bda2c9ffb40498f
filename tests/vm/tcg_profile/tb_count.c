// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin for profiling nvrs under emulation: how often each
 * translation block ran, with its instruction count and the memory accesses
 * its instructions made. TCG's cost is mostly instructions and, above all,
 * memory accesses (each goes through the softmmu TLB), so this is where the
 * time of emulated code goes, exactly and without sampling.
 *
 * Written at exit to the file named by the "out=" argument, one line per
 * block that ran: "<guest vaddr hex> <instructions> <executions> <accesses>".
 * tests/vm/tcg_profile/symbolize.py turns it into a per-function table.
 *
 * Debian 12 ships QEMU 7.2 with plugin support but no qemu-plugin.h: the
 * few entry points of plugin API version 1 used here are declared in
 * qemu_plugin_api.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "qemu_plugin_api.h"

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One translation block; the counters are bumped by inline TCG ops. */
struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t execs;
	uint64_t accesses;
	struct block *next;
};

static struct block *blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static char *out_path;

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = calloc(1, sizeof(*b));
	size_t i;

	if (!b)
		return;
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->insns = qemu_plugin_tb_n_insns(tb);
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &b->execs, 1);
	for (i = 0; i < b->insns; i++)
		qemu_plugin_register_vcpu_mem_inline(qemu_plugin_tb_get_insn(tb, i),
						     QEMU_PLUGIN_MEM_RW,
						     QEMU_PLUGIN_INLINE_ADD_U64,
						     &b->accesses, 1);
}

static void finished(qemu_plugin_id_t id, void *userdata)
{
	FILE *f = fopen(out_path, "w");
	struct block *b;

	if (!f) {
		perror(out_path);
		return;
	}
	for (b = blocks; b; b = b->next)
		if (b->execs)
			fprintf(f, "%llx %llu %llu %llu\n",
				(unsigned long long)b->vaddr,
				(unsigned long long)b->insns,
				(unsigned long long)b->execs,
				(unsigned long long)b->accesses);
	fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info,
			int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out_path = argv[i] + 4;
	if (!out_path) {
		fprintf(stderr, "tb_count: no out=FILE argument\n");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	qemu_plugin_register_atexit_cb(id, finished, NULL);
	return 0;
}
