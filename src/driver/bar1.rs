// SPDX-License-Identifier: GPL-2.0

//! BAR1 of a GPU model, set up through BAR0: page tables written into VRAM through the PRAMIN
//! window, `NV_PBUS_BAR1_BLOCK` pointed at them, and the TLB invalidated after each change.
//!
//! On real GPUs the firmware (GSP) owns BAR1's page tables, and nvrs boots no firmware, so nvrs
//! programs BAR1 only on the test-bed's GPU model (`tests/model/nvrs-gpu.c`), which it tells
//! from hardware by the model's id register. What is computed (entries, where the tables go) is
//! [`crate::gmmu`]; this file only writes registers.
//!
//! Probe sets up an empty address space over BAR1 in the last 2 MiB of VRAM (BAR1's tables
//! for up to 4 GiB fit) and runs a self-test of the translation: it maps BAR1's first 64 KiB
//! to the page that holds the tables, reads a known word back through BAR1, unmaps it and
//! invalidates, and must then read all-ones (the model's fault). BAR1 is left with nothing
//! mapped. The test builds' `test_skip_tlb_invalidate` leaves the invalidates out, and the
//! self-test must then see the stale translation.

use kernel::{io::poll::read_poll_timeout, io::Io, pci, prelude::*, time::Delta};

use crate::{
    gmmu::{
        bar1::{local_memory_size, Bar1Layout, Bar1Status, LayoutError, SelfTest},
        format::{bar1_block, Format, RAMIN_PAGE_DIR_BASE},
    },
    hwref::ident::Identity,
};

/// `NV_PBUS_BAR0_WINDOW` (pre-Hopper): 23:0 base >> 16, 25:24 target (0: video memory).
const NV_PBUS_BAR0_WINDOW: usize = 0x1700;
/// `NV_XAL_EP_BAR0_WINDOW` (Hopper and later): 21:0 base >> 16.
const NV_XAL_EP_BAR0_WINDOW: usize = 0x10_fd40;
/// `NV_PBUS_BAR1_BLOCK`.
const NV_PBUS_BAR1_BLOCK: usize = 0x1704;
/// `NV_UFLUSH_FB_FLUSH`: write 1 to flush BAR writes to memory; reads non-zero while busy.
const NV_UFLUSH_FB_FLUSH: usize = 0x7_0000;
/// `NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE`: the VRAM size.
const NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE: usize = 0x10_0ce0;
/// `NV_PRAMIN`: the 1 MiB window into VRAM.
const NV_PRAMIN: usize = 0x70_0000;
const PRAMIN_LEN: u64 = 1 << 20;
/// `NV_TLB_FLUSH_PDB_LO` (PDB 39:8), `_HI` (PDB 47:40), `_CTRL` (0 all VA, 31 trigger).
const NV_TLB_FLUSH_PDB_LO: usize = 0xb8_30a0;
const NV_TLB_FLUSH_PDB_HI: usize = 0xb8_30a4;
const NV_TLB_FLUSH_CTRL: usize = 0xb8_30b0;
const TLB_FLUSH_ALL_VA: u32 = 1 << 0;
const TLB_FLUSH_TRIGGER: u32 = 1 << 31;
/// The GPU model's id register (`tests/model/README.md`) and its value, "NVGM".
const MODEL_ID: usize = 0xff_0000;
const MODEL_ID_VALUE: u32 = 0x4d47_564e;
/// BAR0 of every NVIDIA GPU since Fermi is 16 MiB.
const BAR0_LEN: usize = 16 << 20;
/// The VRAM at its end that BAR1's tables may use.
const TABLES_LEN: u64 = 2 << 20;

type Bar0<'a> = pci::Bar<'a, { super::BAR0_MIN }>;

/// Whether the function is the test-bed's GPU model: a full BAR0 whose model id register
/// reads "NVGM" (a register offset no NVIDIA chip implements).
pub(super) fn is_model(bar0: &Bar0<'_>) -> bool {
    bar0.try_read32(BAR0_LEN - 4).is_ok() && bar0.try_read32(MODEL_ID).ok() == Some(MODEL_ID_VALUE)
}

/// Writes VRAM through the PRAMIN window, moving the window as needed.
struct Pramin<'a, 'b> {
    bar0: &'a Bar0<'b>,
    ver3: bool,
    base: Option<u64>,
}

impl Pramin<'_, '_> {
    fn offset(&mut self, addr: u64) -> Result<usize> {
        let inside = self
            .base
            .is_some_and(|b| addr >= b && addr + 4 <= b + PRAMIN_LEN);
        if !inside {
            let base = addr & !0xffff;
            let field = u32::try_from(base >> 16)?;
            let reg = if self.ver3 {
                NV_XAL_EP_BAR0_WINDOW
            } else {
                NV_PBUS_BAR0_WINDOW
            };
            // Target 0 (video memory) in both layouts.
            self.bar0.try_write32(field, reg)?;
            self.base = Some(base);
        }
        let b = self.base.ok_or(EINVAL)?;
        Ok(NV_PRAMIN + usize::try_from(addr - b)?)
    }

    fn write64(&mut self, addr: u64, v: u64) -> Result {
        // Low word first: an entry's valid and aperture bits are in it, but nothing walks
        // the tables before the invalidate that follows every change.
        let lo = self.offset(addr)?;
        self.bar0.try_write32(u32::try_from(v & 0xffff_ffff)?, lo)?;
        let hi = self.offset(addr + 4)?;
        self.bar0.try_write32(u32::try_from(v >> 32)?, hi)
    }

    fn read32(&mut self, addr: u64) -> Result<u32> {
        let off = self.offset(addr)?;
        self.bar0.try_read32(off)
    }
}

/// Flushes BAR writes to memory and invalidates the TLB for BAR1's address space, polling each
/// for at most a second.
fn flush_and_invalidate(bar0: &Bar0<'_>, pdb: u64) -> Result {
    bar0.try_write32(1, NV_UFLUSH_FB_FLUSH)?;
    read_poll_timeout(
        || bar0.try_read32(NV_UFLUSH_FB_FLUSH),
        |v| *v == 0,
        Delta::from_micros(10),
        Delta::from_secs(1),
    )?;
    if crate::test_skip_tlb_invalidate() {
        return Ok(());
    }
    bar0.try_write32(
        u32::try_from((pdb >> 8) & 0xffff_ffff)?,
        NV_TLB_FLUSH_PDB_LO,
    )?;
    bar0.try_write32(u32::try_from((pdb >> 40) & 0xff)?, NV_TLB_FLUSH_PDB_HI)?;
    bar0.try_write32(TLB_FLUSH_ALL_VA | TLB_FLUSH_TRIGGER, NV_TLB_FLUSH_CTRL)?;
    read_poll_timeout(
        || bar0.try_read32(NV_TLB_FLUSH_CTRL),
        |v| v & TLB_FLUSH_TRIGGER == 0,
        Delta::from_micros(10),
        Delta::from_secs(1),
    )?;
    Ok(())
}

/// Sets up BAR1 of a GPU model in virtual mode with nothing mapped, and self-tests it.
///
/// `aperture` is BAR1's resource index. Every failure is one `dev_err!` line.
pub(super) fn setup(
    pdev: &pci::Device<kernel::device::Core<'_>>,
    bar0: &Bar0<'_>,
    ident: &Identity,
    aperture: u32,
) -> Result<Bar1Status> {
    let Some(format) = Format::new(ident.table.mmu) else {
        dev_err!(pdev, "GPU model: no BAR1 page tables for MMU format Ver1\n");
        return Err(ENODEV);
    };
    let vram = local_memory_size(bar0.try_read32(NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE)?);
    let size = pdev.resource_len(aperture)?;
    let base = vram.checked_sub(TABLES_LEN).ok_or(ENODEV)?;
    let layout = Bar1Layout::new(format, size, base, TABLES_LEN).map_err(|e| {
        match e {
            LayoutError::BadSize(s) => dev_err!(pdev, "GPU model: BAR1 of {s:#x} bytes\n"),
            LayoutError::Misaligned(b) => dev_err!(pdev, "GPU model: VRAM of {b:#x} bytes\n"),
            LayoutError::TooSmall { need } => {
                dev_err!(pdev, "GPU model: BAR1's tables need {need:#x} bytes\n")
            }
        }
        ENODEV
    })?;
    let mut pramin = Pramin {
        bar0,
        ver3: format.version() == 3,
        base: None,
    };
    let mut addr = layout.instance_block();
    while addr < layout.instance_block() + layout.span() {
        pramin.write64(addr, 0)?;
        addr += 8;
    }
    let mut written = Ok(());
    layout.setup(|a, v| {
        if written.is_ok() {
            written = pramin.write64(a, v);
        }
    });
    written?;
    bar0.try_write32(bar1_block(layout.instance_block()), NV_PBUS_BAR1_BLOCK)?;
    flush_and_invalidate(bar0, layout.pdb())?;
    // A BAR1 that does not translate as written is not used.
    let selftest = self_test(pdev, bar0, &mut pramin, &layout, aperture)?;
    match selftest {
        SelfTest::Passed => {}
        SelfTest::NotTranslated { got, want } => {
            dev_err!(
                pdev,
                "GPU model: BAR1 self-test read {got:#010x} through a page holding {want:#010x}\n"
            );
            return Err(ENODEV);
        }
        SelfTest::StaleAfterUnmap { got } => {
            dev_err!(
                pdev,
                "GPU model: BAR1 self-test read {got:#010x} after the unmap and invalidate\n"
            );
            return Err(ENODEV);
        }
    }
    Ok(Bar1Status {
        layout,
        vram,
        selftest,
    })
}

/// Maps BAR1's first 64 KiB to the page of the instance block, reads the page-directory base
/// word through BAR1, unmaps, invalidates, and reads again.
fn self_test(
    pdev: &pci::Device<kernel::device::Core<'_>>,
    bar0: &Bar0<'_>,
    pramin: &mut Pramin<'_, '_>,
    layout: &Bar1Layout,
    aperture: u32,
) -> Result<SelfTest> {
    let pte_addr = layout.pte_addr(0).ok_or(EINVAL)?;
    let word = usize::try_from(RAMIN_PAGE_DIR_BASE)?;
    let want = pramin.read32(layout.instance_block() + RAMIN_PAGE_DIR_BASE)?;
    let bar1 = pdev.iomap_region_sized::<0x1000>(aperture, c"nvrs/bar1-selftest")?;
    pramin.write64(pte_addr, layout.pte(layout.instance_block(), true))?;
    flush_and_invalidate(bar0, layout.pdb())?;
    let got = bar1.read32(word);
    pramin.write64(pte_addr, 0)?;
    flush_and_invalidate(bar0, layout.pdb())?;
    let after = bar1.read32(word);
    Ok(if got != want {
        SelfTest::NotTranslated { got, want }
    } else if after != u32::MAX {
        SelfTest::StaleAfterUnmap { got: after }
    } else {
        SelfTest::Passed
    })
}
