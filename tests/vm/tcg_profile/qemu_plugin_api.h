/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The entry points of QEMU's TCG plugin API (version 1, QEMU 7.2) that
 * tb_count.c uses, declared from QEMU's documentation: Debian 12 ships
 * QEMU with plugin support but not its qemu-plugin.h.
 */
#ifndef NVRS_QEMU_PLUGIN_API_H
#define NVRS_QEMU_PLUGIN_API_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
struct qemu_info_t;

enum { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };
enum { QEMU_PLUGIN_MEM_RW = 3 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
	void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
	void (*cb)(qemu_plugin_id_t id, void *userdata), void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, int op,
					      void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_mem_inline(struct qemu_plugin_insn *insn, int rw,
					  int op, void *ptr, uint64_t imm);

#endif
