// SPDX-License-Identifier: GPL-2.0
/*
 * nvrs-model-test: checks the GPU model (tests/model/nvrs-gpu.c) from inside
 * the test VM, the way a driver would use the hardware, before nvrs is asked
 * to: it maps BAR0 and BAR1 through sysfs, writes GMMU page tables into VRAM
 * through the PRAMIN window and reads and writes through BAR1.
 *
 * Its page-table encoder is written from NVIDIA's dev_mmu.h field layouts,
 * apart from the model's walker; the runner's walker (tests/vm/gmmu.py) is a
 * third reading of the same layouts and checks, after the VM, what this tool
 * says it mapped ("nvrs-hostcheck: gmmu-*" lines on stdout).
 *
 * Usage: nvrs-model-test BDF CHECK [ARGS]
 *   ident BOOT0 BOOT42 VRAM_MIB BAR1_MIB   boot registers and sizes
 *   physical                               BAR1 in physical mode
 *   walk INDEX                             page tables: 64K, 4K, 2M, unmapped
 *   tlb                                    a stale translation until invalidate
 *   readonly                               a write to a read-only page
 *   counters                               BAR1 rx/tx bytes
 *   ce                                     the copy engine: a memset and a copy
 *                                          in VRAM, its interrupt, refusals
 *   unmapped VA                            BAR1 at VA reads all-ones, one fault
 *                                          (touches no register: for a bound GPU)
 * Exit status 0 when the check holds, 1 when it does not (one line on
 * stderr says why), 2 on bad usage or a setup failure.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NV_PMC_BOOT_0 0x000000
#define NV_PMC_BOOT_42 0x000a00
#define NV_PBUS_BAR0_WINDOW 0x001700
#define NV_PBUS_BAR1_BLOCK 0x001704
#define NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE 0x100ce0
#define NV_XAL_EP_BAR0_WINDOW 0x10fd40
#define NV_PRAMIN 0x700000
#define NV_TLB_FLUSH_PDB_LO 0xb830a0
#define NV_TLB_FLUSH_PDB_HI 0xb830a4
#define NV_TLB_FLUSH_CTRL 0xb830b0
#define TLB_ALL_VA (1u << 0)
#define TLB_ALL_PDB (1u << 1)
#define TLB_TRIGGER (1u << 31)

#define MODEL 0xff0000
#define MODEL_FAULTS (MODEL + 0x08)
#define MODEL_FAULT_REASON (MODEL + 0x0c)
#define MODEL_FAULT_VA_LO (MODEL + 0x10)
#define MODEL_TLB_INVALIDATES (MODEL + 0x18)
#define MODEL_RX_LO (MODEL + 0x20)
#define MODEL_RX_HI (MODEL + 0x24)
#define MODEL_TX_LO (MODEL + 0x28)
#define MODEL_TX_HI (MODEL + 0x2c)
#define MODEL_MMU (MODEL + 0x30)
#define MODEL_CE_LAUNCHES (MODEL + 0x34)
#define MODEL_CE_BYTES_LO (MODEL + 0x38)
#define MODEL_CE_BYTES_HI (MODEL + 0x3c)
#define MODEL_CE_ERROR (MODEL + 0x40)
#define MODEL_INTR (MODEL + 0x44)
/* The copy engine's methods (NVC1B5_*), at BAR0 + 0xff1000. */
#define CE(m) (0xff1000 + (m))
#define CE_SET_SRC_PHYS_MODE 0x260
#define CE_SET_DST_PHYS_MODE 0x264
#define CE_LAUNCH_DMA 0x300
#define CE_OFFSET_IN_UPPER 0x400
#define CE_OFFSET_IN_LOWER 0x404
#define CE_OFFSET_OUT_UPPER 0x408
#define CE_OFFSET_OUT_LOWER 0x40c
#define CE_LINE_LENGTH_IN 0x418
#define CE_SET_REMAP_CONST_A 0x700
#define CE_SET_REMAP_COMPONENTS 0x708
/* LAUNCH_DMA: non-pipelined, pitch, physical; REMAP; non-blocking interrupt. */
#define LAUNCH_COPY ((2u << 0) | (1u << 7) | (1u << 8) | (1u << 12) | (1u << 13))
#define LAUNCH_REMAP (1u << 10)
#define LAUNCH_INTR (2u << 5)
#define REMAP_MEMSET32 ((4u << 0) | (3u << 16))
#define CE_ERR_VIRTUAL 1
#define CE_ERR_RANGE 4
#define FAULT_PDE_INVALID 4
#define FAULT_READ_ONLY 8

#define KIB 1024ull
#define MIB (1024 * KIB)

/* Where the tables and pages live in VRAM (the first 16 MiB). */
#define INST 0x100000ull
#define TABLE(level) (0x101000ull + 0x1000ull * (level)) /* up to 4 levels */
#define DUAL 0x106000ull
#define SMALL_PT 0x107000ull
#define BIG_PT 0x108000ull /* 256 bytes: 32 entries of 64 KiB */
#define PAGE64_A 0x400000ull
#define PAGE64_B 0x410000ull
#define PAGE64_C 0x420000ull
#define PAGE4K 0x500000ull
#define PAGE2M 0x600000ull

/* BAR1 addresses of the mappings "walk" makes. */
#define VA_64K 0x0ull       /* PAGE64_A */
#define VA_64K_RO 0x10000ull /* PAGE64_B, read-only */
#define VA_4K 0x20000ull    /* PAGE4K, through the small table */
#define VA_2M 0x200000ull   /* PAGE2M, a 2 MiB PTE in the dual PDE */
#define VA_NONE 0x400000ull /* nothing */

static volatile uint8_t *bar0;
static volatile uint8_t *bar1;
static size_t bar1_len;
static unsigned int mmu;
static uint64_t window = ~0ull;

static uint32_t rd32(uint32_t off)
{
	return *(volatile uint32_t *)(bar0 + off);
}

static void wr32(uint32_t off, uint32_t v)
{
	*(volatile uint32_t *)(bar0 + off) = v;
}

static uint32_t b1rd32(uint64_t va)
{
	return *(volatile uint32_t *)(bar1 + va);
}

static void b1wr32(uint64_t va, uint32_t v)
{
	*(volatile uint32_t *)(bar1 + va) = v;
}

/* Positions PRAMIN over addr; returns the BAR0 offset addr is at. */
static uint32_t pramin(uint64_t addr)
{
	uint64_t base = addr & ~0xffffull;

	if (window == ~0ull || addr < window || addr >= window + MIB) {
		if (mmu == 3)
			wr32(NV_XAL_EP_BAR0_WINDOW, base >> 16);
		else
			wr32(NV_PBUS_BAR0_WINDOW, base >> 16); /* target 0: VRAM */
		window = base;
	}
	return NV_PRAMIN + (addr - window);
}

static void vram_wr32(uint64_t addr, uint32_t v)
{
	wr32(pramin(addr), v);
}

static uint32_t vram_rd32(uint64_t addr)
{
	return rd32(pramin(addr));
}

static void vram_wr64(uint64_t addr, uint64_t v)
{
	vram_wr32(addr, v);
	vram_wr32(addr + 4, v >> 32);
}

/* Fills one 4 KiB VRAM page with the words seed, seed + 1, ... */
static void vram_fill(uint64_t addr, uint32_t seed, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 4)
		vram_wr32(addr + i, seed + i / 4);
}

/* GMMU entries (dev_mmu.h, pascal/gp100 for Ver2, hopper/gh100 for Ver3). */
static uint64_t pde(uint64_t table)
{
	/* IS_PTE 0, APERTURE 1 (video memory), address >> 12 at bit 8 or 12. */
	return (1ull << 1) | (mmu == 3 ? table : (table >> 12) << 8);
}

static uint64_t pde_big(uint64_t table)
{
	/* The big half addresses its table in 256-byte units (shift 8). */
	return (1ull << 1) | (mmu == 3 ? table : (table >> 8) << 4);
}

static uint64_t pte(uint64_t page, bool ro)
{
	if (mmu == 3) {
		/* PCF REGULAR_RW_NO_ATOMIC (0x8) or REGULAR_RO_NO_ATOMIC (0xc). */
		uint64_t pcf = ro ? 0xc : 0x8;

		return 1 | (pcf << 3) | page;
	}
	return 1 | (ro ? 1ull << 6 : 0) | ((page >> 12) << 8);
}

static unsigned int levels(void)
{
	return mmu == 3 ? 4 : 3;
}

static void invalidate(uint64_t pdb, uint32_t flags)
{
	wr32(NV_TLB_FLUSH_PDB_LO, pdb >> 8);
	wr32(NV_TLB_FLUSH_PDB_HI, pdb >> 40);
	wr32(NV_TLB_FLUSH_CTRL, flags | TLB_TRIGGER);
	for (int i = 0; i < 1000 && (rd32(NV_TLB_FLUSH_CTRL) & TLB_TRIGGER); i++)
		usleep(100);
}

/* Builds BAR1's page tables from scratch and binds them in virtual mode. */
static void build_tables(void)
{
	/* Clear every table: a stale entry from an earlier check must not count. */
	for (uint64_t a = INST; a < BIG_PT + 0x1000; a += 4)
		vram_wr32(a, 0);
	/* Instance block: PDB in VRAM, volatile, Ver2 format, 64 KiB big pages. */
	vram_wr32(INST + 0x200, (uint32_t)TABLE(0) | (1u << 2) | (1u << 10) | (1u << 11));
	vram_wr32(INST + 0x204, TABLE(0) >> 32);
	/* Every VA below 512 MiB uses entry 0 of each directory level. */
	for (unsigned int l = 0; l + 1 < levels(); l++)
		vram_wr64(TABLE(l), pde(TABLE(l + 1)));
	vram_wr64(TABLE(levels() - 1), pde(DUAL));
	/* PDE0 entry 0 (VA 0-2 MiB): both a big and a small table. */
	vram_wr64(DUAL, pde_big(BIG_PT));
	vram_wr64(DUAL + 8, pde(SMALL_PT));
	vram_wr64(BIG_PT + 8 * (VA_64K >> 16), pte(PAGE64_A, false));
	vram_wr64(BIG_PT + 8 * (VA_64K_RO >> 16), pte(PAGE64_B, true));
	vram_wr64(SMALL_PT + 8 * (VA_4K >> 12), pte(PAGE4K, false));
	/* PDE0 entry 1 (VA 2-4 MiB): a 2 MiB page. */
	vram_wr64(DUAL + 16, pte(PAGE2M, false));
	wr32(NV_PBUS_BAR1_BLOCK, (uint32_t)(INST >> 12) | (1u << 31));
	invalidate(TABLE(0), TLB_ALL_VA);
}

static int fail(const char *fmt, uint64_t a, uint64_t b)
{
	fprintf(stderr, "nvrs-model-test: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 1;
}

static void *map_resource(const char *bdf, int n, size_t *len)
{
	char path[128];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource%d", bdf, n);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "nvrs-model-test: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "nvrs-model-test: mmap %s: %s\n", path, strerror(errno));
		exit(2);
	}
	close(fd);
	*len = st.st_size;
	return p;
}

static uint64_t counter(uint32_t lo, uint32_t hi)
{
	uint32_t l = rd32(lo);

	return ((uint64_t)rd32(hi) << 32) | l;
}

static int check_ident(char **argv)
{
	uint32_t boot0 = strtoul(argv[0], NULL, 0), boot42 = strtoul(argv[1], NULL, 0);
	uint64_t vram = strtoull(argv[2], NULL, 0) * MIB, bar1 = strtoull(argv[3], NULL, 0) * MIB;
	uint32_t range = rd32(NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE);
	uint64_t size = (uint64_t)((range >> 4) & 0x3f) << ((range & 0xf) + 20);

	if (rd32(NV_PMC_BOOT_0) != boot0)
		return fail("PMC_BOOT_0 %#" PRIx64 ", expected %#" PRIx64, rd32(NV_PMC_BOOT_0), boot0);
	if (rd32(NV_PMC_BOOT_42) != boot42)
		return fail("PMC_BOOT_42 %#" PRIx64 ", expected %#" PRIx64, rd32(NV_PMC_BOOT_42),
			    boot42);
	if (size != vram)
		return fail("LOCAL_MEMORY_RANGE says %#" PRIx64 " bytes, expected %#" PRIx64, size,
			    vram);
	if (bar1_len != bar1)
		return fail("BAR1 is %#" PRIx64 " bytes, expected %#" PRIx64, bar1_len, bar1);
	if (bar1 >= vram)
		return fail("BAR1 (%#" PRIx64 ") is not smaller than VRAM (%#" PRIx64 ")", bar1, vram);
	return 0;
}

static int check_physical(void)
{
	wr32(NV_PBUS_BAR1_BLOCK, 0);
	vram_fill(PAGE4K, 0x9a000000, 4 * KIB);
	for (uint64_t i = 0; i < 4 * KIB; i += 4) {
		uint32_t got = b1rd32(PAGE4K + i), want = 0x9a000000 + i / 4;

		if (got != want)
			return fail("physical BAR1 %#" PRIx64 " reads %#" PRIx64, PAGE4K + i, got);
	}
	b1wr32(PAGE4K + 8, 0x5eed);
	if (vram_rd32(PAGE4K + 8) != 0x5eed)
		return fail("a physical BAR1 write at %#" PRIx64 " left %#" PRIx64, PAGE4K + 8,
			    vram_rd32(PAGE4K + 8));
	return 0;
}

/* Every word of len bytes at va reads seed, seed + 1, ... */
static int same(uint64_t va, uint32_t seed, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 4) {
		uint32_t got = b1rd32(va + i);

		if (got != seed + i / 4)
			return fail("BAR1 %#" PRIx64 " reads %#" PRIx64, va + i, got);
	}
	return 0;
}

static int check_walk(int index)
{
	uint32_t faults, got;
	int r;

	vram_fill(PAGE64_A, 0x64a00000, 64 * KIB);
	vram_fill(PAGE64_B, 0x64b00000, 64 * KIB);
	vram_fill(PAGE4K, 0x04c00000, 4 * KIB);
	vram_fill(PAGE2M, 0x2d000000, 2 * MIB);
	build_tables();
	r = same(VA_64K, 0x64a00000, 64 * KIB) ?:
	    same(VA_64K_RO, 0x64b00000, 64 * KIB) ?:
	    same(VA_4K, 0x04c00000, 4 * KIB) ?:
	    same(VA_2M, 0x2d000000, 2 * MIB);
	if (r)
		return r;
	/* PDE0 entry 2 (VA 4-6 MiB) is empty. */
	faults = rd32(MODEL_FAULTS);
	got = b1rd32(VA_NONE);
	if (got != 0xffffffff)
		return fail("unmapped BAR1 %#" PRIx64 " reads %#" PRIx64, VA_NONE, got);
	if (rd32(MODEL_FAULTS) != faults + 1 || rd32(MODEL_FAULT_REASON) != FAULT_PDE_INVALID ||
	    rd32(MODEL_FAULT_VA_LO) != VA_NONE)
		return fail("unmapped read: %" PRIu64 " faults counted, reason %" PRIu64,
			    rd32(MODEL_FAULTS) - faults, rd32(MODEL_FAULT_REASON));
	b1wr32(VA_64K + 16, 0xfeedf00d);
	if (vram_rd32(PAGE64_A + 16) != 0xfeedf00d)
		return fail("a BAR1 write at %#" PRIx64 " left %#" PRIx64 " in VRAM", VA_64K + 16,
			    vram_rd32(PAGE64_A + 16));
	vram_wr32(PAGE64_A + 16, 0x64a00000 + 4);
	/* What the runner's walker must find in VRAM, and nothing else. */
	printf("nvrs-hostcheck: gmmu %d 0x%llx %u\n", index, INST, mmu);
	printf("nvrs-hostcheck: gmmu-map %d 0x%llx 0x%llx 0x%llx rw\n", index, VA_64K, PAGE64_A,
	       64 * KIB);
	printf("nvrs-hostcheck: gmmu-map %d 0x%llx 0x%llx 0x%llx ro\n", index, VA_64K_RO, PAGE64_B,
	       64 * KIB);
	printf("nvrs-hostcheck: gmmu-map %d 0x%llx 0x%llx 0x%llx rw\n", index, VA_4K, PAGE4K, 4 * KIB);
	printf("nvrs-hostcheck: gmmu-map %d 0x%llx 0x%llx 0x%llx rw\n", index, VA_2M, PAGE2M, 2 * MIB);
	return 0;
}

static int check_tlb(void)
{
	uint32_t inv;

	vram_fill(PAGE64_C, 0x64c00000, 64 * KIB);
	build_tables();
	if (b1rd32(VA_64K) != 0x64a00000)
		return fail("BAR1 %#" PRIx64 " reads %#" PRIx64 " before the remap", VA_64K,
			    b1rd32(VA_64K));
	/* Point the PTE elsewhere without an invalidate: the TLB keeps the old page. */
	vram_wr64(BIG_PT + 8 * (VA_64K >> 16), pte(PAGE64_C, false));
	if (b1rd32(VA_64K) != 0x64a00000)
		return fail("BAR1 %#" PRIx64 " reads %#" PRIx64 " after a remap with no invalidate",
			    VA_64K, b1rd32(VA_64K));
	/* An invalidate of another address space leaves it too. */
	invalidate(TABLE(0) + 0x10000, TLB_ALL_VA);
	if (b1rd32(VA_64K) != 0x64a00000)
		return fail("an invalidate of PDB %#" PRIx64 " changed BAR1 %#" PRIx64,
			    TABLE(0) + 0x10000, VA_64K);
	inv = rd32(MODEL_TLB_INVALIDATES);
	invalidate(TABLE(0), TLB_ALL_VA);
	if (rd32(MODEL_TLB_INVALIDATES) != inv + 1)
		return fail("the invalidate of BAR1's PDB was not counted (%" PRIu64 " -> %" PRIu64 ")",
			    inv, rd32(MODEL_TLB_INVALIDATES));
	if (b1rd32(VA_64K) != 0x64c00000)
		return fail("BAR1 %#" PRIx64 " reads %#" PRIx64 " after the invalidate", VA_64K,
			    b1rd32(VA_64K));
	/* Unmapping is the same: the page stays reachable until the invalidate. */
	vram_wr64(BIG_PT + 8 * (VA_64K >> 16), 0);
	if (b1rd32(VA_64K) != 0x64c00000)
		return fail("BAR1 %#" PRIx64 " reads %#" PRIx64 " after an unmap with no invalidate",
			    VA_64K, b1rd32(VA_64K));
	invalidate(0, TLB_ALL_PDB);
	if (b1rd32(VA_64K) != 0xffffffff)
		return fail("BAR1 %#" PRIx64 " reads %#" PRIx64 " after unmap and invalidate", VA_64K,
			    b1rd32(VA_64K));
	return 0;
}

static int check_readonly(void)
{
	uint32_t faults;

	build_tables();
	faults = rd32(MODEL_FAULTS);
	b1wr32(VA_64K_RO, 0xbad);
	if (vram_rd32(PAGE64_B) == 0xbad)
		return fail("a write to read-only BAR1 %#" PRIx64 " reached VRAM %#" PRIx64,
			    VA_64K_RO, PAGE64_B);
	if (rd32(MODEL_FAULTS) != faults + 1 || rd32(MODEL_FAULT_REASON) != FAULT_READ_ONLY)
		return fail("read-only write: %" PRIu64 " faults, reason %" PRIu64,
			    rd32(MODEL_FAULTS) - faults, rd32(MODEL_FAULT_REASON));
	return 0;
}

static int check_counters(void)
{
	uint64_t rx, tx;

	build_tables();
	rx = counter(MODEL_RX_LO, MODEL_RX_HI);
	tx = counter(MODEL_TX_LO, MODEL_TX_HI);
	for (int i = 0; i < 16; i++)
		(void)b1rd32(VA_64K + 4 * i);
	for (int i = 0; i < 8; i++)
		b1wr32(VA_64K + 4 * i, 0x64a00000 + i);
	if (counter(MODEL_TX_LO, MODEL_TX_HI) - tx != 64)
		return fail("BAR1 tx grew by %" PRIu64 " bytes for %" PRIu64 " read",
			    counter(MODEL_TX_LO, MODEL_TX_HI) - tx, 64);
	if (counter(MODEL_RX_LO, MODEL_RX_HI) - rx != 32)
		return fail("BAR1 rx grew by %" PRIu64 " bytes for %" PRIu64 " written",
			    counter(MODEL_RX_LO, MODEL_RX_HI) - rx, 32);
	return 0;
}

/* One launch of the copy engine from VRAM src (or a memset of value) to dst. */
static uint32_t ce_launch(uint64_t dst, uint64_t src, uint32_t len, uint32_t launch,
			  uint32_t value)
{
	wr32(CE(CE_SET_SRC_PHYS_MODE), 0);
	wr32(CE(CE_SET_DST_PHYS_MODE), 0);
	wr32(CE(CE_OFFSET_IN_UPPER), src >> 32);
	wr32(CE(CE_OFFSET_IN_LOWER), src);
	wr32(CE(CE_OFFSET_OUT_UPPER), dst >> 32);
	wr32(CE(CE_OFFSET_OUT_LOWER), dst);
	wr32(CE(CE_LINE_LENGTH_IN), len);
	wr32(CE(CE_SET_REMAP_CONST_A), value);
	wr32(CE(CE_SET_REMAP_COMPONENTS), REMAP_MEMSET32);
	wr32(CE(CE_LAUNCH_DMA), launch);
	return rd32(MODEL_CE_ERROR);
}

static int check_ce(void)
{
	uint64_t bytes = counter(MODEL_CE_BYTES_LO, MODEL_CE_BYTES_HI);
	uint32_t launches = rd32(MODEL_CE_LAUNCHES), err;

	vram_fill(PAGE64_A, 0xce000000, 64 * KIB);
	vram_wr32(PAGE64_C, 0x0dd0dd00);
	/* A memset of 64 KiB, then a copy of it over a filled page. */
	/* With the remap, LINE_LENGTH_IN counts 4-byte components. */
	err = ce_launch(PAGE64_B, 0, 16 * KIB, LAUNCH_COPY | LAUNCH_REMAP, 0xc0ffee00);
	if (err)
		return fail("a memset was refused with %" PRIu64 " (%" PRIu64 ")", err, 0);
	for (uint64_t o = 0; o < 64 * KIB; o += 4 * KIB)
		if (vram_rd32(PAGE64_B + o) != 0xc0ffee00)
			return fail("after the memset VRAM %#" PRIx64 " holds %#" PRIx64,
				    PAGE64_B + o, vram_rd32(PAGE64_B + o));
	if (vram_rd32(PAGE64_C) != 0x0dd0dd00)
		return fail("the memset of %" PRIu64 " components wrote past them: %#" PRIx64,
			    16 * KIB, vram_rd32(PAGE64_C));
	err = ce_launch(PAGE64_B, PAGE64_A, 64 * KIB, LAUNCH_COPY | LAUNCH_INTR, 0);
	if (err)
		return fail("a copy was refused with %" PRIu64 " (%" PRIu64 ")", err, 0);
	for (uint64_t o = 0; o < 64 * KIB; o += 4 * KIB)
		if (vram_rd32(PAGE64_B + o) != 0xce000000 + o / 4)
			return fail("after the copy VRAM %#" PRIx64 " holds %#" PRIx64,
				    PAGE64_B + o, vram_rd32(PAGE64_B + o));
	/* The copy asked for an interrupt; it stays pending until cleared. */
	if (rd32(MODEL_INTR) != 1)
		return fail("interrupt status %#" PRIx64 " after the copy (%" PRIu64 ")",
			    rd32(MODEL_INTR), 1);
	wr32(MODEL_INTR, 1);
	if (rd32(MODEL_INTR) != 0)
		return fail("interrupt status %#" PRIx64 " after clearing (%" PRIu64 ")",
			    rd32(MODEL_INTR), 0);
	/* Refused: a virtual destination, a copy past VRAM, an overlapping copy. */
	err = ce_launch(PAGE64_B, PAGE64_A, 64 * KIB, LAUNCH_COPY & ~(1u << 13), 0);
	if (err != CE_ERR_VIRTUAL)
		return fail("a virtual destination gave error %" PRIu64 ", not %" PRIu64,
			    err, CE_ERR_VIRTUAL);
	err = ce_launch(~0ull >> 16, PAGE64_A, 64 * KIB, LAUNCH_COPY, 0);
	if (err != CE_ERR_RANGE)
		return fail("a copy past VRAM gave error %" PRIu64 ", not %" PRIu64,
			    err, CE_ERR_RANGE);
	err = ce_launch(PAGE64_A + 4 * KIB, PAGE64_A, 64 * KIB, LAUNCH_COPY, 0);
	if (err != CE_ERR_RANGE)
		return fail("an overlapping copy gave error %" PRIu64 ", not %" PRIu64,
			    err, CE_ERR_RANGE);
	if (rd32(MODEL_CE_LAUNCHES) - launches != 5)
		return fail("%" PRIu64 " launches counted for %" PRIu64,
			    rd32(MODEL_CE_LAUNCHES) - launches, 4);
	if (counter(MODEL_CE_BYTES_LO, MODEL_CE_BYTES_HI) - bytes != 128 * KIB)
		return fail("the copy engine counted %" PRIu64 " bytes for %" PRIu64,
			    counter(MODEL_CE_BYTES_LO, MODEL_CE_BYTES_HI) - bytes, 128 * KIB);
	return 0;
}

static int check_unmapped(uint64_t va)
{
	uint32_t faults = rd32(MODEL_FAULTS), got = b1rd32(va);

	if (got != 0xffffffff)
		return fail("BAR1 %#" PRIx64 " reads %#" PRIx64, va, got);
	if (rd32(MODEL_FAULTS) != faults + 1)
		return fail("BAR1 %#" PRIx64 ": %" PRIu64 " faults counted", va,
			    rd32(MODEL_FAULTS) - faults);
	return 0;
}

int main(int argc, char **argv)
{
	size_t bar0_len;
	const char *what;

	if (argc < 3) {
		fprintf(stderr, "usage: nvrs-model-test BDF ident|physical|walk|tlb|readonly|counters\n");
		return 2;
	}
	what = argv[2];
	bar0 = map_resource(argv[1], 0, &bar0_len);
	bar1 = map_resource(argv[1], 1, &bar1_len);
	if (bar0_len < 16 * MIB) {
		fprintf(stderr, "nvrs-model-test: BAR0 is %zu bytes, not 16 MiB\n", bar0_len);
		return 2;
	}
	if (!strcmp(what, "unmapped") && argc == 4)
		return check_unmapped(strtoull(argv[3], NULL, 0));
	mmu = rd32(MODEL_MMU);
	if (mmu != 2 && mmu != 3) {
		fprintf(stderr, "nvrs-model-test: the model reports MMU version %u\n", mmu);
		return 2;
	}
	if (!strcmp(what, "ident") && argc == 7)
		return check_ident(argv + 3);
	if (!strcmp(what, "physical"))
		return check_physical();
	if (!strcmp(what, "walk") && argc == 4)
		return check_walk(atoi(argv[3]));
	if (!strcmp(what, "tlb"))
		return check_tlb();
	if (!strcmp(what, "readonly"))
		return check_readonly();
	if (!strcmp(what, "counters"))
		return check_counters();
	if (!strcmp(what, "ce"))
		return check_ce();
	fprintf(stderr, "nvrs-model-test: unknown check '%s' or wrong arguments\n", what);
	return 2;
}
