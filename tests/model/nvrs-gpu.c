/*
 * nvrs-gpu: a model of an NVIDIA GPU's memory path, for the nvrs test-bed.
 *
 * The device presents itself as an NVIDIA GPU (vendor 0x10de, the device id
 * and PMC_BOOT_0 / PMC_BOOT_42 values of a real chip) and models what a
 * driver needs to reach GPU memory the way the hardware offers it:
 *
 *  - BAR0, the register space: the boot registers, the memory size
 *    (NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE), the PRAMIN window (a 1 MiB view of
 *    VRAM at BAR0 + 0x700000, positioned by NV_PBUS_BAR0_WINDOW, or on
 *    Hopper and later NV_XAL_EP_BAR0_WINDOW), NV_PBUS_BAR1_BLOCK, the FB
 *    flush and the MMU's TLB-invalidate registers;
 *  - VRAM, backed by a memory backend (a host file, so that the test-bed's
 *    host-side checks can read it);
 *  - BAR1, a window smaller than VRAM. In physical mode (BAR1_BLOCK mode 0)
 *    BAR1 offset X is VRAM address X. In virtual mode every access, by a CPU
 *    or by a peer device's DMA, is translated through the GMMU page tables
 *    the driver wrote into VRAM, in the format of the chip's MMU version
 *    (Ver2: Pascal to Ada, 5 levels; Ver3: Hopper and later, 6 levels);
 *  - a TLB: a translation, once walked, is used until the driver writes the
 *    invalidate register, so a missing invalidate is visible;
 *  - faults: an access that does not translate (or writes a read-only page)
 *    reads all-ones, is dropped if a write, and is counted;
 *  - PCIe traffic counters for BAR1 (bytes received and sent);
 *  - a copy engine: the methods of NVIDIA's DMA copy class (clc1b5.h; the
 *    later classes keep these offsets) written straight to a window of BAR0
 *    instead of through a channel, for physical copies and memsets within
 *    VRAM and between VRAM and system memory (DMA through the IOMMU), with a
 *    semaphore release to system memory and an interrupt on completion.
 *
 * Field layouts follow NVIDIA's published dev_mmu.h / dev_ram.h hwref headers
 * (open-gpu-kernel-modules, src/common/inc/swref/published/{pascal/gp100,
 * hopper/gh100}), as nouveau's gp100/gh100 VMM code and nova-core's mm series
 * encode them. What the model leaves out is listed in tests/model/README.md.
 *
 * Every callback runs under the big QEMU lock (memory regions default to it),
 * which serialises the registers, the TLB and the counters.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"
#include "qemu/module.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/qdev-properties.h"
#include "sysemu/hostmem.h"
#include "qom/object.h"

#define TYPE_NVRS_GPU "nvrs-gpu"
OBJECT_DECLARE_SIMPLE_TYPE(NvrsGpuState, NVRS_GPU)

#define PCI_VENDOR_ID_NV 0x10de

#define BAR0_SIZE (16 * MiB)
#define BAR3_SIZE (32 * MiB)

/* BAR0 registers (offsets as the hwref headers give them). */
#define NV_PMC_BOOT_0 0x000000
#define NV_PMC_BOOT_42 0x000a00
#define NV_PBUS_BAR0_WINDOW 0x001700
#define NV_PBUS_BAR1_BLOCK 0x001704
#define NV_UFLUSH_FB_FLUSH 0x070000
#define NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE 0x100ce0
#define NV_XAL_EP_BAR0_WINDOW 0x10fd40
#define NV_PRAMIN 0x700000
#define NV_PRAMIN_SIZE (1 * MiB)
#define NV_TLB_FLUSH_PDB_LO 0xb830a0
#define NV_TLB_FLUSH_PDB_HI 0xb830a4
#define NV_TLB_FLUSH_CTRL 0xb830b0
#define NV_PRAMIN_BAR1_STATUS 0xb80f50

#define TLB_FLUSH_ALL_VA (1u << 0)
#define TLB_FLUSH_ALL_PDB (1u << 1)
#define TLB_FLUSH_TRIGGER (1u << 31)

#define BAR1_BLOCK_PTR_MASK 0x0fffffffu
#define BAR1_BLOCK_TARGET(v) (((v) >> 28) & 3)
#define BAR1_BLOCK_MODE_VIRTUAL (1u << 31)

/*
 * The model's own registers, at the top of BAR0 where no NVIDIA register
 * lives: its counters. Real GPUs report PCIe throughput through firmware,
 * not through a register a model could copy.
 */
#define NVRS_MODEL_BASE 0xff0000
#define NVRS_MODEL_ID 0x00 /* "NVGM" */
#define NVRS_MODEL_VERSION 0x04
#define NVRS_MODEL_FAULTS 0x08
#define NVRS_MODEL_FAULT_REASON 0x0c
#define NVRS_MODEL_FAULT_VA_LO 0x10
#define NVRS_MODEL_FAULT_VA_HI 0x14
#define NVRS_MODEL_TLB_INVALIDATES 0x18
#define NVRS_MODEL_TLB_WALKS 0x1c
#define NVRS_MODEL_BAR1_RX_LO 0x20
#define NVRS_MODEL_BAR1_RX_HI 0x24
#define NVRS_MODEL_BAR1_TX_LO 0x28
#define NVRS_MODEL_BAR1_TX_HI 0x2c
#define NVRS_MODEL_MMU_VERSION 0x30
#define NVRS_MODEL_CE_LAUNCHES 0x34
#define NVRS_MODEL_CE_BYTES_LO 0x38
#define NVRS_MODEL_CE_BYTES_HI 0x3c
#define NVRS_MODEL_CE_ERROR 0x40 /* the last launch's, CE_ERR_*; 0 if done */
#define NVRS_MODEL_INTR 0x44     /* 1: CE interrupt pending; write 1 clears */
#define NVRS_MODEL_ID_VALUE 0x4d47564eu
#define NVRS_MODEL_VERSION_VALUE 2

/*
 * The copy engine's method window, BAR0 + 0xff1000: a write at offset M is
 * method M of the DMA copy class (NVC1B5_*).
 */
#define NVRS_MODEL_CE_BASE 0xff1000
#define NVRS_MODEL_CE_SIZE 0x1000
#define CE_SET_SEMAPHORE_A 0x240       /* 16:0 address 48:32 */
#define CE_SET_SEMAPHORE_B 0x244       /* 31:0 address 31:0 */
#define CE_SET_SEMAPHORE_PAYLOAD 0x248
#define CE_SET_SRC_PHYS_MODE 0x260     /* 1:0 target */
#define CE_SET_DST_PHYS_MODE 0x264
#define CE_LAUNCH_DMA 0x300
#define CE_OFFSET_IN_UPPER 0x400       /* 16:0 */
#define CE_OFFSET_IN_LOWER 0x404
#define CE_OFFSET_OUT_UPPER 0x408
#define CE_OFFSET_OUT_LOWER 0x40c
#define CE_LINE_LENGTH_IN 0x418
#define CE_LINE_COUNT 0x41c
#define CE_SET_REMAP_CONST_A 0x700
#define CE_SET_REMAP_CONST_B 0x704
#define CE_SET_REMAP_COMPONENTS 0x708

/* SET_*_PHYS_MODE targets. */
#define CE_TARGET_LOCAL_FB 0
#define CE_TARGET_COHERENT_SYSMEM 1
#define CE_TARGET_NONCOHERENT_SYSMEM 2

/* LAUNCH_DMA fields. */
#define CE_LAUNCH_TRANSFER(v) ((v) & 3)            /* 1:0; 0 = none */
#define CE_LAUNCH_SEMAPHORE(v) (((v) >> 3) & 3)    /* 4:3; 1 = one word */
#define CE_LAUNCH_INTERRUPT(v) (((v) >> 5) & 3)    /* 6:5; 0 = none */
#define CE_LAUNCH_SRC_PITCH (1u << 7)
#define CE_LAUNCH_DST_PITCH (1u << 8)
#define CE_LAUNCH_MULTI_LINE (1u << 9)
#define CE_LAUNCH_REMAP (1u << 10)
#define CE_LAUNCH_SRC_PHYSICAL (1u << 12)
#define CE_LAUNCH_DST_PHYSICAL (1u << 13)

/*
 * SET_REMAP_COMPONENTS: DST_X 2:0 (4 = CONST_A), COMPONENT_SIZE 17:16 (3 =
 * four bytes), NUM_DST_COMPONENTS 25:24 (0 = one).
 */
#define CE_REMAP_MEMSET32 ((4u << 0) | (3u << 16) | (0u << 24))

/* Why the last launch was refused (NVRS_MODEL_CE_ERROR). */
enum {
    CE_ERR_NONE = 0,
    CE_ERR_VIRTUAL = 1,   /* a virtual source or destination: not modelled */
    CE_ERR_LAYOUT = 2,    /* block-linear or multi-line: not modelled */
    CE_ERR_REMAP = 3,     /* a remap other than a 32-bit memset */
    CE_ERR_RANGE = 4,     /* past VRAM, or a failed system-memory DMA */
    CE_ERR_TARGET = 5,    /* a physical target other than VRAM or sysmem */
};

/* Why the last BAR1 access faulted (NVRS_MODEL_FAULT_REASON). */
enum {
    FAULT_NONE = 0,
    FAULT_OUT_OF_VRAM = 1,    /* physical mode, or a PTE, past VRAM */
    FAULT_BLOCK_TARGET = 2,   /* instance block not in VRAM */
    FAULT_PDB_TARGET = 3,     /* page directory not in VRAM */
    FAULT_PDE_INVALID = 4,    /* a directory entry with aperture INVALID */
    FAULT_PDE_APERTURE = 5,   /* a directory in system memory (not modelled) */
    FAULT_PTE_INVALID = 6,    /* PTE valid bit clear */
    FAULT_PTE_APERTURE = 7,   /* a page outside VRAM (peer, system memory) */
    FAULT_READ_ONLY = 8,      /* a write to a read-only page */
    FAULT_HUGE_LEVEL = 9,     /* IS_PTE at a level with no page size */
    FAULT_PAST_BAR1 = 10,     /* not reachable: BAR1 is the VA space */
};

/* GMMU entry fields shared by both formats. */
#define ENTRY_VALID (1ull << 0)         /* PTE VALID; PDE IS_PTE */
#define ENTRY_APERTURE(e) (((e) >> 1) & 3)
#define PDE_APERTURE_INVALID 0
#define PDE_APERTURE_VIDEO 1
#define PTE_APERTURE_VIDEO 0

/* Ver2 (dev_mmu.h, pascal/gp100). */
#define V2_ADDR_VID(e) ((((e) >> 8) & ((1ull << 25) - 1)) << 12) /* 32:8 */
#define V2_BIG_ADDR_VID(e) ((((e) >> 4) & ((1ull << 29) - 1)) << 8) /* 32:4 */
#define V2_PTE_READ_ONLY (1ull << 6)

/* Ver3 (dev_mmu.h, hopper/gh100). */
#define V3_ADDR(e) ((((e) >> 12) & ((1ull << 40) - 1)) << 12) /* 51:12 */
#define V3_BIG_ADDR(e) ((((e) >> 8) & ((1ull << 44) - 1)) << 8) /* 51:8 */
#define V3_PTE_PCF(e) (((e) >> 3) & 0x1f)
#define V3_PCF_READ_ONLY 0x4 /* the _RO_ encodings of NV_MMU_VER3_PTE_PCF */

/* The instance block (dev_ram.h): the page directory base word. */
#define RAMIN_PAGE_DIR_BASE_LO 0x200
#define RAMIN_PAGE_DIR_BASE_HI 0x204
#define RAMIN_PDB_TARGET(w) ((w) & 3)
#define RAMIN_BIG_PAGE_64K (1u << 11)

/* A TLB entry: the 4 KiB frame a BAR1 page translates to, and flags. */
#define TLBE_VALID (1ull << 0)
#define TLBE_READ_ONLY (1ull << 1)
#define TLBE_FRAME_MASK (~0xfffull)

struct NvrsGpuState {
    PCIDevice parent_obj;

    /* Properties. */
    HostMemoryBackend *vram_backend;
    uint32_t boot0;
    uint32_t boot42;
    uint16_t device_id;
    uint8_t mmu_version;
    uint64_t bar1_size;

    MemoryRegion bar0;
    MemoryRegion pramin;
    MemoryRegion bar1;
    MemoryRegion bar3;
    MemoryRegion *vram;
    uint8_t *vram_ptr;
    uint64_t vram_size;

    uint32_t bar0_window;
    uint32_t bar1_block;
    uint32_t tlb_pdb_lo;
    uint32_t tlb_pdb_hi;

    /* One entry per 4 KiB page of BAR1: it never evicts on its own. */
    uint64_t *tlb;

    uint32_t faults;
    uint32_t fault_reason;
    uint64_t fault_va;
    uint32_t tlb_invalidates;
    uint32_t tlb_walks;
    uint64_t bar1_rx;
    uint64_t bar1_tx;
    uint32_t rx_hi_latch;
    uint32_t tx_hi_latch;

    /* The copy engine's method state, and what it did. */
    uint32_t ce_method[NVRS_MODEL_CE_SIZE / 4];
    uint32_t ce_launches;
    uint64_t ce_bytes;
    uint32_t ce_bytes_hi_latch;
    uint32_t ce_error;
    uint32_t intr;
};

static uint64_t vram_rd64(NvrsGpuState *s, uint64_t addr, bool *ok)
{
    if (addr > s->vram_size - 8 || (addr & 7)) {
        *ok = false;
        return 0;
    }
    return ldq_le_p(s->vram_ptr + addr);
}

static uint32_t vram_rd32(NvrsGpuState *s, uint64_t addr, bool *ok)
{
    if (addr > s->vram_size - 4 || (addr & 3)) {
        *ok = false;
        return 0;
    }
    return ldl_le_p(s->vram_ptr + addr);
}

/* The page directory base of BAR1's instance block, or a fault reason. */
static uint32_t pdb_of(NvrsGpuState *s, uint64_t *pdb, bool *big64k)
{
    uint64_t inst = (uint64_t)(s->bar1_block & BAR1_BLOCK_PTR_MASK) << 12;
    bool ok = true;
    uint32_t lo, hi;

    if (BAR1_BLOCK_TARGET(s->bar1_block) != 0) {
        return FAULT_BLOCK_TARGET;
    }
    lo = vram_rd32(s, inst + RAMIN_PAGE_DIR_BASE_LO, &ok);
    hi = vram_rd32(s, inst + RAMIN_PAGE_DIR_BASE_HI, &ok);
    if (!ok) {
        return FAULT_OUT_OF_VRAM;
    }
    if (RAMIN_PDB_TARGET(lo) != 0) {
        return FAULT_PDB_TARGET;
    }
    *pdb = ((uint64_t)hi << 32) | (lo & 0xfffff000u);
    *big64k = lo & RAMIN_BIG_PAGE_64K;
    return FAULT_NONE;
}

/*
 * Walks the page tables for one BAR1 virtual address. On success stores the
 * VRAM address va translates to and whether the page is read-only.
 */
static uint32_t gmmu_walk(NvrsGpuState *s, uint64_t va, uint64_t *pa,
                          bool *ro)
{
    /* Directory levels above the dual PDE: first bit and width of each. */
    static const uint8_t v2_shift[] = { 47, 38, 29 };
    static const uint8_t v2_bits[] = { 2, 9, 9 };
    static const uint8_t v3_shift[] = { 56, 47, 38, 29 };
    static const uint8_t v3_bits[] = { 1, 9, 9, 9 };
    bool v3 = s->mmu_version == 3;
    const uint8_t *shift = v3 ? v3_shift : v2_shift;
    const uint8_t *bits = v3 ? v3_bits : v2_bits;
    unsigned levels = v3 ? ARRAY_SIZE(v3_shift) : ARRAY_SIZE(v2_shift);
    uint64_t table, e, lo, hi, pte, page;
    bool big64k, ok = true;
    uint32_t r;
    unsigned i;

    r = pdb_of(s, &table, &big64k);
    if (r != FAULT_NONE) {
        return r;
    }
    for (i = 0; i < levels; i++) {
        uint64_t idx = (va >> shift[i]) & ((1ull << bits[i]) - 1);

        e = vram_rd64(s, table + idx * 8, &ok);
        if (!ok) {
            return FAULT_OUT_OF_VRAM;
        }
        if (e & ENTRY_VALID) {
            /* IS_PTE: a 512 MiB page at PDE1 (the level of bit 29). */
            if (shift[i] != 29) {
                return FAULT_HUGE_LEVEL;
            }
            pte = e;
            page = 1ull << 29;
            goto leaf;
        }
        if (ENTRY_APERTURE(e) == PDE_APERTURE_INVALID) {
            return FAULT_PDE_INVALID;
        }
        if (ENTRY_APERTURE(e) != PDE_APERTURE_VIDEO) {
            return FAULT_PDE_APERTURE;
        }
        table = v3 ? V3_ADDR(e) : V2_ADDR_VID(e);
    }

    /* PDE0: the dual entry, 16 bytes, covering 2 MiB. */
    lo = vram_rd64(s, table + ((va >> 21) & 0xff) * 16, &ok);
    hi = vram_rd64(s, table + ((va >> 21) & 0xff) * 16 + 8, &ok);
    if (!ok) {
        return FAULT_OUT_OF_VRAM;
    }
    if (lo & ENTRY_VALID) {
        pte = lo;
        page = 2 * MiB;
        goto leaf;
    }
    /* The small page table first, then the big one. */
    r = FAULT_PDE_INVALID;
    if (ENTRY_APERTURE(hi) == PDE_APERTURE_VIDEO) {
        uint64_t pt = v3 ? V3_ADDR(hi) : V2_ADDR_VID(hi);

        pte = vram_rd64(s, pt + ((va >> 12) & 0x1ff) * 8, &ok);
        if (!ok) {
            return FAULT_OUT_OF_VRAM;
        }
        page = 4 * KiB;
        if (pte & ENTRY_VALID) {
            goto leaf;
        }
        r = FAULT_PTE_INVALID;
    } else if (ENTRY_APERTURE(hi) != PDE_APERTURE_INVALID) {
        return FAULT_PDE_APERTURE;
    }
    if (ENTRY_APERTURE(lo) == PDE_APERTURE_VIDEO) {
        uint64_t pt = v3 ? V3_BIG_ADDR(lo) : V2_BIG_ADDR_VID(lo);
        unsigned big_shift = big64k ? 16 : 17;
        uint64_t idx = (va & (2 * MiB - 1)) >> big_shift;

        pte = vram_rd64(s, pt + idx * 8, &ok);
        if (!ok) {
            return FAULT_OUT_OF_VRAM;
        }
        page = 1ull << big_shift;
        if (pte & ENTRY_VALID) {
            goto leaf;
        }
        return FAULT_PTE_INVALID;
    } else if (ENTRY_APERTURE(lo) != PDE_APERTURE_INVALID) {
        return FAULT_PDE_APERTURE;
    }
    return r;

leaf:
    if (ENTRY_APERTURE(pte) != PTE_APERTURE_VIDEO) {
        return FAULT_PTE_APERTURE;
    }
    *pa = ((v3 ? V3_ADDR(pte) : V2_ADDR_VID(pte)) & ~(page - 1)) |
          (va & (page - 1));
    *ro = v3 ? (V3_PTE_PCF(pte) & V3_PCF_READ_ONLY) : (pte & V2_PTE_READ_ONLY);
    if (*pa >= s->vram_size) {
        return FAULT_OUT_OF_VRAM;
    }
    return FAULT_NONE;
}

static void bar1_fault(NvrsGpuState *s, uint64_t va, uint32_t reason)
{
    s->faults++;
    s->fault_reason = reason;
    s->fault_va = va;
}

/*
 * Translates one BAR1 address to a host pointer into VRAM, through the TLB.
 * Returns NULL (and counts the fault) when the access must not reach VRAM.
 */
static uint8_t *bar1_translate(NvrsGpuState *s, uint64_t va, bool write)
{
    uint64_t *e = &s->tlb[va >> 12];
    uint64_t pa;
    bool ro = false;
    uint32_t r;

    if (!(s->bar1_block & BAR1_BLOCK_MODE_VIRTUAL)) {
        if (va >= s->vram_size) {
            bar1_fault(s, va, FAULT_OUT_OF_VRAM);
            return NULL;
        }
        return s->vram_ptr + va;
    }
    if (!(*e & TLBE_VALID)) {
        s->tlb_walks++;
        r = gmmu_walk(s, va & ~0xfffull, &pa, &ro);
        if (r != FAULT_NONE) {
            /* Faults are not cached: the next access walks again. */
            bar1_fault(s, va, r);
            return NULL;
        }
        *e = (pa & TLBE_FRAME_MASK) | TLBE_VALID | (ro ? TLBE_READ_ONLY : 0);
    }
    if (write && (*e & TLBE_READ_ONLY)) {
        bar1_fault(s, va, FAULT_READ_ONLY);
        return NULL;
    }
    return s->vram_ptr + (*e & TLBE_FRAME_MASK) + (va & 0xfff);
}

static void tlb_invalidate(NvrsGpuState *s)
{
    memset(s->tlb, 0, (s->bar1_size >> 12) * sizeof(*s->tlb));
    s->tlb_invalidates++;
}

static uint64_t nvrs_gpu_bar1_read(void *opaque, hwaddr addr, unsigned size)
{
    NvrsGpuState *s = opaque;
    uint64_t val = 0;
    uint8_t *p;
    unsigned i;

    s->bar1_tx += size;
    if ((addr & 0xfff) + size <= 0x1000) {
        p = bar1_translate(s, addr, false);
        return p ? ldn_le_p(p, size) : ~0ull >> (64 - 8 * size);
    }
    /* An unaligned access across two pages: byte by byte. */
    for (i = 0; i < size; i++) {
        p = bar1_translate(s, addr + i, false);
        if (!p) {
            return ~0ull >> (64 - 8 * size);
        }
        val |= (uint64_t)*p << (8 * i);
    }
    return val;
}

static void nvrs_gpu_bar1_write(void *opaque, hwaddr addr, uint64_t val,
                                unsigned size)
{
    NvrsGpuState *s = opaque;
    uint8_t *p;
    unsigned i;

    s->bar1_rx += size;
    if ((addr & 0xfff) + size <= 0x1000) {
        p = bar1_translate(s, addr, true);
        if (p) {
            stn_le_p(p, size, val);
        }
        return;
    }
    /* Across two pages: every byte is checked before any is written. */
    for (i = 0; i < size; i++) {
        if (!bar1_translate(s, addr + i, true)) {
            return;
        }
    }
    for (i = 0; i < size; i++) {
        *bar1_translate(s, addr + i, true) = val >> (8 * i);
    }
}

static const MemoryRegionOps nvrs_gpu_bar1_ops = {
    .read = nvrs_gpu_bar1_read,
    .write = nvrs_gpu_bar1_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
    .impl = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
};

/* Moves the PRAMIN window to the 64 KiB-aligned VRAM address base. */
static void pramin_place(NvrsGpuState *s, uint64_t base, bool vram)
{
    memory_region_transaction_begin();
    if (vram && base < s->vram_size) {
        memory_region_set_size(&s->pramin,
                               MIN(NV_PRAMIN_SIZE, s->vram_size - base));
        memory_region_set_alias_offset(&s->pramin, base);
        memory_region_set_enabled(&s->pramin, true);
    } else {
        /* System memory through PRAMIN is not modelled: reads all-ones. */
        memory_region_set_enabled(&s->pramin, false);
    }
    memory_region_transaction_commit();
}

static uint32_t model_reg_read(NvrsGpuState *s, hwaddr off)
{
    switch (off) {
    case NVRS_MODEL_ID:
        return NVRS_MODEL_ID_VALUE;
    case NVRS_MODEL_VERSION:
        return NVRS_MODEL_VERSION_VALUE;
    case NVRS_MODEL_FAULTS:
        return s->faults;
    case NVRS_MODEL_FAULT_REASON:
        return s->fault_reason;
    case NVRS_MODEL_FAULT_VA_LO:
        return s->fault_va;
    case NVRS_MODEL_FAULT_VA_HI:
        return s->fault_va >> 32;
    case NVRS_MODEL_TLB_INVALIDATES:
        return s->tlb_invalidates;
    case NVRS_MODEL_TLB_WALKS:
        return s->tlb_walks;
    case NVRS_MODEL_BAR1_RX_LO:
        s->rx_hi_latch = s->bar1_rx >> 32;
        return s->bar1_rx;
    case NVRS_MODEL_BAR1_RX_HI:
        return s->rx_hi_latch;
    case NVRS_MODEL_BAR1_TX_LO:
        s->tx_hi_latch = s->bar1_tx >> 32;
        return s->bar1_tx;
    case NVRS_MODEL_BAR1_TX_HI:
        return s->tx_hi_latch;
    case NVRS_MODEL_MMU_VERSION:
        return s->mmu_version;
    case NVRS_MODEL_CE_LAUNCHES:
        return s->ce_launches;
    case NVRS_MODEL_CE_BYTES_LO:
        s->ce_bytes_hi_latch = s->ce_bytes >> 32;
        return s->ce_bytes;
    case NVRS_MODEL_CE_BYTES_HI:
        return s->ce_bytes_hi_latch;
    case NVRS_MODEL_CE_ERROR:
        return s->ce_error;
    case NVRS_MODEL_INTR:
        return s->intr;
    default:
        return ~0u;
    }
}

static uint32_t ce_reg(NvrsGpuState *s, hwaddr method)
{
    return s->ce_method[method / 4];
}

static uint64_t ce_addr(NvrsGpuState *s, hwaddr upper, hwaddr lower)
{
    return ((uint64_t)(ce_reg(s, upper) & 0x1ffff) << 32) | ce_reg(s, lower);
}

/* The bytes [addr, addr + len) of VRAM, or NULL if they are not all VRAM. */
static uint8_t *ce_vram(NvrsGpuState *s, uint64_t addr, uint64_t len)
{
    if (addr > s->vram_size || len > s->vram_size - addr) {
        return NULL;
    }
    return s->vram_ptr + addr;
}

static bool ce_sysmem(uint32_t target)
{
    return target == CE_TARGET_COHERENT_SYSMEM ||
           target == CE_TARGET_NONCOHERENT_SYSMEM;
}

/*
 * Moves one line; CE_ERR_*. Nothing is written if VRAM is out of range; a
 * failed system-memory DMA stops the transfer where it failed.
 */
static uint32_t ce_transfer(NvrsGpuState *s, uint32_t launch)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    uint32_t src_t = ce_reg(s, CE_SET_SRC_PHYS_MODE) & 3;
    uint32_t dst_t = ce_reg(s, CE_SET_DST_PHYS_MODE) & 3;
    uint64_t src = ce_addr(s, CE_OFFSET_IN_UPPER, CE_OFFSET_IN_LOWER);
    uint64_t dst = ce_addr(s, CE_OFFSET_OUT_UPPER, CE_OFFSET_OUT_LOWER);
    bool memset = launch & CE_LAUNCH_REMAP;
    /* With the remap, the line counts components (4 bytes each here). */
    uint64_t len = (uint64_t)ce_reg(s, CE_LINE_LENGTH_IN) * (memset ? 4 : 1);
    uint8_t buf[4096];
    uint64_t done;

    if (!(launch & CE_LAUNCH_DST_PHYSICAL) ||
        (!memset && !(launch & CE_LAUNCH_SRC_PHYSICAL))) {
        return CE_ERR_VIRTUAL;
    }
    if (!(launch & CE_LAUNCH_DST_PITCH) || (launch & CE_LAUNCH_MULTI_LINE) ||
        (!memset && !(launch & CE_LAUNCH_SRC_PITCH))) {
        return CE_ERR_LAYOUT;
    }
    if ((dst_t != CE_TARGET_LOCAL_FB && !ce_sysmem(dst_t)) ||
        (!memset && src_t != CE_TARGET_LOCAL_FB && !ce_sysmem(src_t))) {
        return CE_ERR_TARGET;
    }
    if (memset && (ce_reg(s, CE_SET_REMAP_COMPONENTS) != CE_REMAP_MEMSET32 ||
                   (dst & 3))) {
        return CE_ERR_REMAP;
    }
    if ((dst_t == CE_TARGET_LOCAL_FB && !ce_vram(s, dst, len)) ||
        (!memset && src_t == CE_TARGET_LOCAL_FB && !ce_vram(s, src, len))) {
        return CE_ERR_RANGE;
    }
    /*
     * Overlapping copies within VRAM are not modelled (a forward copy would
     * read what it already wrote).
     */
    if (!memset && src_t == CE_TARGET_LOCAL_FB && dst_t == CE_TARGET_LOCAL_FB &&
        src < dst + len && dst < src + len) {
        return CE_ERR_RANGE;
    }
    if (memset) {
        uint32_t v = ce_reg(s, CE_SET_REMAP_CONST_A);
        unsigned i;

        for (i = 0; i < sizeof(buf) / 4; i++) {
            stl_le_p(buf + 4 * i, v);
        }
    }
    /*
     * In 4 KiB steps, so that system memory goes through the IOMMU page by
     * page as a device's DMA does.
     */
    for (done = 0; done < len; done += sizeof(buf)) {
        uint64_t n = MIN(sizeof(buf), len - done);
        uint8_t *from = buf;

        if (!memset) {
            if (src_t == CE_TARGET_LOCAL_FB) {
                from = ce_vram(s, src + done, n);
            } else if (pci_dma_read(pdev, src + done, buf, n) != MEMTX_OK) {
                return CE_ERR_RANGE;
            }
        }
        if (dst_t == CE_TARGET_LOCAL_FB) {
            memmove(ce_vram(s, dst + done, n), from, n);
        } else if (pci_dma_write(pdev, dst + done, from, n) != MEMTX_OK) {
            return CE_ERR_RANGE;
        }
        s->ce_bytes += n;
    }
    return CE_ERR_NONE;
}

/*
 * LAUNCH_DMA: the transfer, then (if it worked) the semaphore release and
 * the interrupt. The copy completes before the write returns.
 */
static void ce_launch(NvrsGpuState *s, uint32_t launch)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    uint32_t err = CE_ERR_NONE;

    s->ce_launches++;
    if (CE_LAUNCH_TRANSFER(launch)) {
        err = ce_transfer(s, launch);
    }
    s->ce_error = err;
    if (err) {
        return;
    }
    if (CE_LAUNCH_SEMAPHORE(launch) == 1) {
        uint64_t sem = ce_addr(s, CE_SET_SEMAPHORE_A, CE_SET_SEMAPHORE_B);
        uint8_t payload[4];

        stl_le_p(payload, ce_reg(s, CE_SET_SEMAPHORE_PAYLOAD));
        if (pci_dma_write(pdev, sem, payload, 4) != MEMTX_OK) {
            s->ce_error = CE_ERR_RANGE;
            return;
        }
    }
    if (CE_LAUNCH_INTERRUPT(launch)) {
        s->intr |= 1;
        pci_set_irq(pdev, 1);
    }
}

static void ce_method_write(NvrsGpuState *s, hwaddr method, uint32_t val)
{
    s->ce_method[method / 4] = val;
    if (method == CE_LAUNCH_DMA) {
        ce_launch(s, val);
    }
}

/* NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE: size = LOWER_MAG << (LOWER_SCALE + 20). */
static uint32_t local_memory_range(NvrsGpuState *s)
{
    uint64_t mib = s->vram_size >> 20;
    unsigned scale = 0;

    while (mib > 63 && !(mib & 1)) {
        mib >>= 1;
        scale++;
    }
    return (uint32_t)(mib << 4) | scale;
}

static uint64_t nvrs_gpu_bar0_read(void *opaque, hwaddr addr, unsigned size)
{
    NvrsGpuState *s = opaque;
    uint32_t window = s->mmu_version == 3 ? NV_XAL_EP_BAR0_WINDOW
                                          : NV_PBUS_BAR0_WINDOW;

    if (addr >= NVRS_MODEL_CE_BASE &&
        addr < NVRS_MODEL_CE_BASE + NVRS_MODEL_CE_SIZE) {
        return ce_reg(s, addr - NVRS_MODEL_CE_BASE);
    }
    if (addr >= NVRS_MODEL_BASE) {
        return model_reg_read(s, addr - NVRS_MODEL_BASE);
    }
    if (addr == window) {
        return s->bar0_window;
    }
    switch (addr) {
    case NV_PMC_BOOT_0:
        return s->boot0;
    case NV_PMC_BOOT_42:
        return s->boot42;
    case NV_PBUS_BAR1_BLOCK:
        return s->bar1_block;
    case NV_UFLUSH_FB_FLUSH:
    case NV_PRAMIN_BAR1_STATUS:
        return 0; /* never busy: writes land at once */
    case NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE:
        return local_memory_range(s);
    case NV_TLB_FLUSH_PDB_LO:
        return s->tlb_pdb_lo;
    case NV_TLB_FLUSH_PDB_HI:
        return s->tlb_pdb_hi;
    case NV_TLB_FLUSH_CTRL:
        return 0; /* the trigger bit reads 0: the flush is done */
    default:
        /* Unmodelled registers read as a bus error reads on hardware. */
        return ~0u;
    }
}

static void tlb_flush_write(NvrsGpuState *s, uint32_t val)
{
    uint64_t pdb, flush_pdb;
    bool big64k;

    if (!(val & TLB_FLUSH_TRIGGER)) {
        return;
    }
    flush_pdb = ((uint64_t)(s->tlb_pdb_hi & 0xff) << 40) |
                ((uint64_t)s->tlb_pdb_lo << 8);
    /* BAR1 is the model's one address space: flush it if it is named. */
    if ((val & TLB_FLUSH_ALL_PDB) ||
        (pdb_of(s, &pdb, &big64k) == FAULT_NONE && pdb == flush_pdb) ||
        !(s->bar1_block & BAR1_BLOCK_MODE_VIRTUAL)) {
        tlb_invalidate(s);
    }
}

static void nvrs_gpu_bar0_write(void *opaque, hwaddr addr, uint64_t val,
                                unsigned size)
{
    NvrsGpuState *s = opaque;
    uint32_t window = s->mmu_version == 3 ? NV_XAL_EP_BAR0_WINDOW
                                          : NV_PBUS_BAR0_WINDOW;

    if (addr == window) {
        s->bar0_window = val;
        if (s->mmu_version == 3) {
            /* Hopper: bits 21:0 are the base >> 16, always video memory. */
            pramin_place(s, (val & 0x3fffffull) << 16, true);
        } else {
            /* 23:0 base >> 16, 25:24 target (0 = video memory). */
            pramin_place(s, (val & 0xffffffull) << 16,
                         ((val >> 24) & 3) == 0);
        }
        return;
    }
    if (addr >= NVRS_MODEL_CE_BASE &&
        addr < NVRS_MODEL_CE_BASE + NVRS_MODEL_CE_SIZE) {
        ce_method_write(s, addr - NVRS_MODEL_CE_BASE, val);
        return;
    }
    if (addr == NVRS_MODEL_BASE + NVRS_MODEL_INTR) {
        s->intr &= ~(uint32_t)val;
        pci_set_irq(PCI_DEVICE(s), s->intr != 0);
        return;
    }
    switch (addr) {
    case NV_PBUS_BAR1_BLOCK:
        /* Binding a new block does not flush: the driver invalidates. */
        s->bar1_block = val;
        break;
    case NV_TLB_FLUSH_PDB_LO:
        s->tlb_pdb_lo = val;
        break;
    case NV_TLB_FLUSH_PDB_HI:
        s->tlb_pdb_hi = val;
        break;
    case NV_TLB_FLUSH_CTRL:
        tlb_flush_write(s, val);
        break;
    default:
        /* Read-only or unmodelled: the write is dropped. */
        break;
    }
}

static const MemoryRegionOps nvrs_gpu_bar0_ops = {
    .read = nvrs_gpu_bar0_read,
    .write = nvrs_gpu_bar0_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
    .impl = { .min_access_size = 4, .max_access_size = 4 },
};

static uint64_t nvrs_gpu_bar3_read(void *opaque, hwaddr addr, unsigned size)
{
    return ~0ull >> (64 - 8 * size);
}

static void nvrs_gpu_bar3_write(void *opaque, hwaddr addr, uint64_t val,
                                unsigned size)
{
}

/* BAR3 (NVIDIA's BAR2, the instance-memory window) is not modelled. */
static const MemoryRegionOps nvrs_gpu_bar3_ops = {
    .read = nvrs_gpu_bar3_read,
    .write = nvrs_gpu_bar3_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
};

static void nvrs_gpu_realize(PCIDevice *pdev, Error **errp)
{
    NvrsGpuState *s = NVRS_GPU(pdev);
    uint32_t range;

    if (!s->vram_backend) {
        error_setg(errp, "nvrs-gpu: 'memdev' (the VRAM backend) is required");
        return;
    }
    if (host_memory_backend_is_mapped(s->vram_backend)) {
        error_setg(errp, "nvrs-gpu: memdev is in use by another device");
        return;
    }
    if (s->mmu_version != 2 && s->mmu_version != 3) {
        error_setg(errp, "nvrs-gpu: mmu must be 2 or 3");
        return;
    }
    s->vram = host_memory_backend_get_memory(s->vram_backend);
    s->vram_size = memory_region_size(s->vram);
    range = local_memory_range(s);
    if (s->vram_size < 16 * MiB || (s->vram_size & (MiB - 1)) ||
        ((uint64_t)((range >> 4) & 0x3f) << ((range & 0xf) + 20)) !=
        s->vram_size) {
        /* LOCAL_MEMORY_RANGE says mag << (scale + 20) with a 6-bit mag. */
        error_setg(errp, "nvrs-gpu: VRAM must be at least 16 MiB, and M MiB "
                   "times a power of two with M < 64");
        return;
    }
    if (!is_power_of_2(s->bar1_size) || s->bar1_size < 16 * MiB ||
        s->bar1_size > 4 * GiB) {
        error_setg(errp, "nvrs-gpu: bar1-size must be a power of two, "
                   "16 MiB to 4 GiB");
        return;
    }
    host_memory_backend_set_mapped(s->vram_backend, true);
    s->vram_ptr = memory_region_get_ram_ptr(s->vram);
    s->tlb = g_new0(uint64_t, s->bar1_size >> 12);

    pci_config_set_vendor_id(pdev->config, PCI_VENDOR_ID_NV);
    pci_config_set_device_id(pdev->config, s->device_id);
    pci_set_word(pdev->config + PCI_SUBSYSTEM_VENDOR_ID, PCI_VENDOR_ID_NV);
    pci_set_word(pdev->config + PCI_SUBSYSTEM_ID, s->device_id);
    pci_config_set_interrupt_pin(pdev->config, 1);

    memory_region_init_io(&s->bar0, OBJECT(s), &nvrs_gpu_bar0_ops, s,
                          "nvrs-gpu-bar0", BAR0_SIZE);
    memory_region_init_alias(&s->pramin, OBJECT(s), "nvrs-gpu-pramin",
                             s->vram, 0, NV_PRAMIN_SIZE);
    memory_region_add_subregion_overlap(&s->bar0, NV_PRAMIN, &s->pramin, 1);
    memory_region_init_io(&s->bar1, OBJECT(s), &nvrs_gpu_bar1_ops, s,
                          "nvrs-gpu-bar1", s->bar1_size);
    memory_region_init_io(&s->bar3, OBJECT(s), &nvrs_gpu_bar3_ops, s,
                          "nvrs-gpu-bar3", BAR3_SIZE);

    pci_register_bar(pdev, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &s->bar0);
    pci_register_bar(pdev, 1, PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->bar1);
    pci_register_bar(pdev, 3, PCI_BASE_ADDRESS_SPACE_MEMORY |
                     PCI_BASE_ADDRESS_MEM_TYPE_64 |
                     PCI_BASE_ADDRESS_MEM_PREFETCH, &s->bar3);

    if (pcie_endpoint_cap_init(pdev, 0x80) < 0) {
        error_setg(errp, "nvrs-gpu: cannot add the PCIe capability");
        g_free(s->tlb);
        s->tlb = NULL;
        host_memory_backend_set_mapped(s->vram_backend, false);
        return;
    }
}

static void nvrs_gpu_exit(PCIDevice *pdev)
{
    NvrsGpuState *s = NVRS_GPU(pdev);

    pcie_cap_exit(pdev);
    g_free(s->tlb);
    host_memory_backend_set_mapped(s->vram_backend, false);
}

static void nvrs_gpu_reset(DeviceState *dev)
{
    NvrsGpuState *s = NVRS_GPU(dev);

    s->bar0_window = 0;
    s->bar1_block = 0;
    s->tlb_pdb_lo = 0;
    s->tlb_pdb_hi = 0;
    memset(s->tlb, 0, (s->bar1_size >> 12) * sizeof(*s->tlb));
    s->faults = 0;
    s->fault_reason = FAULT_NONE;
    s->fault_va = 0;
    s->tlb_invalidates = 0;
    s->tlb_walks = 0;
    s->bar1_rx = 0;
    s->bar1_tx = 0;
    s->rx_hi_latch = 0;
    s->tx_hi_latch = 0;
    memset(s->ce_method, 0, sizeof(s->ce_method));
    s->ce_launches = 0;
    s->ce_bytes = 0;
    s->ce_bytes_hi_latch = 0;
    s->ce_error = CE_ERR_NONE;
    s->intr = 0;
    pci_set_irq(PCI_DEVICE(s), 0);
    pramin_place(s, 0, true);
}

static Property nvrs_gpu_properties[] = {
    DEFINE_PROP_LINK("memdev", NvrsGpuState, vram_backend,
                     TYPE_MEMORY_BACKEND, HostMemoryBackend *),
    DEFINE_PROP_UINT32("boot0", NvrsGpuState, boot0, 0),
    DEFINE_PROP_UINT32("boot42", NvrsGpuState, boot42, 0),
    DEFINE_PROP_UINT16("device-id", NvrsGpuState, device_id, 0x2335),
    DEFINE_PROP_UINT8("mmu", NvrsGpuState, mmu_version, 3),
    DEFINE_PROP_SIZE("bar1-size", NvrsGpuState, bar1_size, 256 * MiB),
    DEFINE_PROP_END_OF_LIST(),
};

static void nvrs_gpu_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = nvrs_gpu_realize;
    k->exit = nvrs_gpu_exit;
    k->vendor_id = PCI_VENDOR_ID_NV;
    k->device_id = 0x2335;
    k->revision = 0xa1;
    k->class_id = 0x0302; /* 3D controller, as NVIDIA's data-centre GPUs */
    dc->reset = nvrs_gpu_reset;
    dc->desc = "NVIDIA GPU memory-path model (nvrs test-bed)";
    device_class_set_props(dc, nvrs_gpu_properties);
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

static const TypeInfo nvrs_gpu_info = {
    .name = TYPE_NVRS_GPU,
    .parent = TYPE_PCI_DEVICE,
    .instance_size = sizeof(NvrsGpuState),
    .class_init = nvrs_gpu_class_init,
    .interfaces = (InterfaceInfo[]) {
        { INTERFACE_PCIE_DEVICE },
        { }
    },
};

static void nvrs_gpu_register_types(void)
{
    type_register_static(&nvrs_gpu_info);
}

type_init(nvrs_gpu_register_types)
