// SPDX-License-Identifier: GPL-2.0

//! BAR1 of a GPU model through GMMU page tables: written into VRAM through the PRAMIN window,
//! pointed at by `NV_PBUS_BAR1_BLOCK`, and the TLB invalidated after each change.
//!
//! On real GPUs the firmware (GSP) owns BAR1's page tables, and nvrs boots no firmware, so nvrs
//! programs BAR1 only on the test-bed's GPU model (`tests/model/nvrs-gpu.c`), which it tells
//! from hardware by the model's id register. What is computed (entries, where the tables go,
//! which slots are free) is [`crate::gmmu`]; this file writes registers.
//!
//! [`Bar1Space::new`] sets up an empty address space over all of BAR1 in the last 2 MiB of
//! VRAM and keeps BAR0 as a device-managed mapping, revoked when the device is unbound (every
//! operation after that fails with `ENODEV`). BAR1 is handed out in runs of 64 KiB slots:
//! [`Bar1Space::reserve`] finds and marks a free run, next fit (`ENOMEM` when BAR1 has no room,
//! as NVIDIA's driver answers; counted), [`Bar1Space::fill`] writes a reserved run's entries,
//! and [`Bar1Space::release`] clears them and frees the run; [`Bar1Space::map`] and
//! [`Bar1Space::unmap`] do both at once. Every change invalidates the TLB before it returns,
//! so that no translation outlives its unmap, and nothing allocates: the slot map is made with
//! the space. A pin reserves its run before it takes its allocation's lock (to build its page
//! table of BAR1 addresses) and fills it under that lock ([`crate::p2p::pin`]).
//!
//! BAR1's last slot is nvrs's own: [`Bar1Space::zero`] maps each page it scrubs there, one at
//! a time, so scrubbing never competes with pins for BAR1 (NVIDIA's driver likewise keeps part
//! of BAR1 for itself). [`self_test`] is the check probe runs before a GPU is used. The test
//! builds' `test_skip_tlb_invalidate` leaves the invalidates out, and the self-test must then
//! see the stale translation.

use kernel::{
    io::{poll::read_poll_timeout_atomic, Io},
    new_mutex, pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    time::Delta,
};

use crate::{
    gmmu::{
        bar1::{local_memory_size, Bar1Layout, LayoutError, SelfTest},
        format::{bar1_block, Format, BIG_PAGE},
        slots,
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
/// The GPU model's id register (`tests/model/README.md`) and its value, "NVGM"; its counters
/// after it (each 64-bit one low half first: reading it latches the high half).
const MODEL_ID: usize = 0xff_0000;
const MODEL_FAULTS: usize = MODEL_ID + 0x08;
const MODEL_TLB_INVALIDATES: usize = MODEL_ID + 0x18;
const MODEL_BAR1_RX: usize = MODEL_ID + 0x20;
const MODEL_BAR1_TX: usize = MODEL_ID + 0x28;
const MODEL_ID_VALUE: u32 = 0x4d47_564e;
/// BAR0 of every NVIDIA GPU since Fermi is 16 MiB.
const BAR0_LEN: usize = 16 << 20;
/// How many times a flush or an invalidate is polled, a microsecond apart.
const POLL_TRIES: usize = 10_000;
/// The VRAM at its end that BAR1's tables may use.
const TABLES_LEN: u64 = 2 << 20;

/// The part of NVIDIA's BAR0 nvrs maps at least: up to and including `PMC_BOOT_42` at 0xa00.
pub(crate) const BAR0_MIN: usize = 0x1000;

pub(crate) type Bar0<'a> = pci::Bar<'a, BAR0_MIN>;

/// Whether the function is the test-bed's GPU model: a full BAR0 whose model id register
/// reads "NVGM" (an offset no NVIDIA chip implements).
pub(crate) fn is_model(bar0: &Bar0<'_>) -> bool {
    bar0.try_read32(BAR0_LEN - 4).is_ok() && bar0.try_read32(MODEL_ID).ok() == Some(MODEL_ID_VALUE)
}

/// The GPU model's BAR1 traffic counters.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    /// Bytes written into BAR1.
    pub(crate) rx: u64,
    /// Bytes read from BAR1.
    pub(crate) tx: u64,
    /// Accesses that did not translate.
    pub(crate) faults: u32,
    /// TLB invalidates carried out.
    pub(crate) tlb_invalidates: u32,
}

/// What `Bar1Space::state` guards: where the PRAMIN window is, which slots are mapped, where
/// the next reservation starts looking ([`slots::find_free`]: next fit), and whether GPU
/// removal cleared every entry ([`Bar1Space::clear_all`]).
struct State {
    window: Option<u64>,
    slots: KVec<u64>,
    next: usize,
    cleared: bool,
}

/// BAR1 of a GPU model, in virtual mode through nvrs's page tables.
#[pin_data]
pub(crate) struct Bar1Space {
    layout: Bar1Layout,
    vram: u64,
    /// BAR1's CPU physical (and bus) address.
    phys: u64,
    bar0: pci::DevresBar<BAR0_MIN>,
    #[pin]
    state: Mutex<State>,
    /// Held while the scrub slot maps a page ([`Self::zero`]); taken before `state`.
    #[pin]
    scrub: Mutex<()>,
    /// Reservations refused for want of room ([`Self::reserve`]).
    exhausted: Atomic<u64>,
    /// An unmap failed: BAR1 may still translate memory nvrs gave up ([`Self::is_broken`]).
    broken: Atomic<bool>,
    /// Runs released so far (test builds: `test_fail_bar1_unmap` fails one of them).
    releases: Atomic<u32>,
}

/// One register write or read at a time through a borrowed BAR0, with the window in `State`.
struct Regs<'a, 'b> {
    bar0: &'a Bar0<'b>,
    ver3: bool,
}

impl Regs<'_, '_> {
    /// The BAR0 offset of VRAM address `addr`, moving the PRAMIN window over it if needed.
    fn pramin(&self, st: &mut State, addr: u64) -> Result<usize> {
        let base = match st.window {
            Some(b) if addr >= b && addr + 4 <= b + PRAMIN_LEN => b,
            _ => {
                let b = addr & !0xffff;
                // The window's base field: 24 bits (pre-Hopper), 22 (Hopper and later).
                let bits = if self.ver3 { 22 } else { 24 };
                if b >> 16 >= 1 << bits {
                    return Err(EINVAL);
                }
                let reg = if self.ver3 {
                    NV_XAL_EP_BAR0_WINDOW
                } else {
                    NV_PBUS_BAR0_WINDOW
                };
                // Target 0 (video memory) in both layouts.
                self.bar0.try_write32(u32::try_from(b >> 16)?, reg)?;
                st.window = Some(b);
                b
            }
        };
        Ok(NV_PRAMIN + usize::try_from(addr - base)?)
    }

    /// Writes an entry high word first: the valid and aperture bits are in the low word, so a
    /// write that fails half-way never leaves a valid entry behind.
    fn write64(&self, st: &mut State, addr: u64, v: u64) -> Result {
        self.write32(st, addr + 4, u32::try_from(v >> 32)?)?;
        self.write32(st, addr, u32::try_from(v & 0xffff_ffff)?)
    }

    fn write32(&self, st: &mut State, addr: u64, v: u32) -> Result {
        let off = self.pramin(st, addr)?;
        self.bar0.try_write32(v, off)
    }

    fn read32(&self, st: &mut State, addr: u64) -> Result<u32> {
        let off = self.pramin(st, addr)?;
        self.bar0.try_read32(off)
    }

    /// Flushes BAR writes to memory and invalidates the TLB for the address space at `pdb`,
    /// polling each for at most [`POLL_TRIES`] microseconds. It does not sleep: the device-managed
    /// BAR0 is only reachable inside an RCU read-side section.
    fn flush_and_invalidate(&self, pdb: u64) -> Result {
        let bar0 = self.bar0;
        bar0.try_write32(1, NV_UFLUSH_FB_FLUSH)?;
        read_poll_timeout_atomic(
            || bar0.try_read32(NV_UFLUSH_FB_FLUSH),
            |v| *v == 0,
            Delta::from_micros(1),
            POLL_TRIES,
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
        read_poll_timeout_atomic(
            || bar0.try_read32(NV_TLB_FLUSH_CTRL),
            |v| v & TLB_FLUSH_TRIGGER == 0,
            Delta::from_micros(1),
            POLL_TRIES,
        )?;
        Ok(())
    }
}

impl Bar1Space {
    /// Sets up BAR1 of a GPU model in virtual mode with nothing mapped; `bar1` is BAR1's
    /// resource index. Takes over BAR0's mapping. Every failure is one `dev_err!` line.
    pub(crate) fn new(
        pdev: &pci::Device<kernel::device::Core<'_>>,
        bar0: Bar0<'_>,
        ident: &Identity,
        bar1: u32,
    ) -> Result<Arc<Self>> {
        let Some(format) = Format::new(ident.table.mmu) else {
            dev_err!(pdev, "GPU model: no BAR1 page tables for MMU format Ver1\n");
            return Err(ENODEV);
        };
        let vram = local_memory_size(bar0.try_read32(NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE)?);
        let size = pdev.resource_len(bar1)?;
        let base = vram.checked_sub(TABLES_LEN).ok_or(ENODEV)?;
        let layout = Bar1Layout::new(format, size, base, TABLES_LEN).map_err(|e| {
            match e {
                LayoutError::BadSize(s) => dev_err!(pdev, "GPU model: BAR1 of {s:#x} bytes\n"),
                LayoutError::Misaligned(b) => {
                    dev_err!(pdev, "GPU model: BAR1 tables at {b:#x}\n")
                }
                LayoutError::TooSmall { need } => {
                    dev_err!(pdev, "GPU model: BAR1's tables need {need:#x} bytes\n")
                }
            }
            ENODEV
        })?;
        let nslots = usize::try_from(size / BIG_PAGE)?;
        let mut map = KVec::with_capacity(slots::words(nslots), GFP_KERNEL)?;
        map.resize(slots::words(nslots), 0, GFP_KERNEL)?;
        // The scrub slot, never handed out.
        if !slots::mark(&mut map, nslots, nslots - 1, 1, true) {
            return Err(ENODEV);
        }
        let phys = pdev.resource_start(bar1)?;
        let mut st = State {
            window: None,
            slots: map,
            next: 0,
            cleared: false,
        };
        let regs = Regs {
            bar0: &bar0,
            ver3: format.version() == 3,
        };
        let mut addr = layout.instance_block();
        while addr < layout.instance_block() + layout.span() {
            regs.write64(&mut st, addr, 0)?;
            addr += 8;
        }
        let mut written = Ok(());
        layout.setup(|a, v| {
            if written.is_ok() {
                written = regs.write64(&mut st, a, v);
            }
        });
        written?;
        bar0.try_write32(bar1_block(layout.instance_block()), NV_PBUS_BAR1_BLOCK)?;
        regs.flush_and_invalidate(layout.pdb())?;
        let bar0 = bar0.into_devres()?;
        Arc::pin_init(
            pin_init!(Self {
                layout,
                vram,
                phys,
                bar0,
                state <- new_mutex!(st, "Bar1Space::state"),
                scrub <- new_mutex!((), "Bar1Space::scrub"),
                exhausted: Atomic::new(0),
                broken: Atomic::new(false),
                releases: Atomic::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// Where the tables are.
    pub(crate) fn layout(&self) -> &Bar1Layout {
        &self.layout
    }

    /// Bytes of VRAM.
    pub(crate) fn vram(&self) -> u64 {
        self.vram
    }

    /// Bytes of VRAM below BAR1's tables, whole 2 MiB: what the memory manager may hand out.
    pub(crate) fn usable(&self) -> u64 {
        self.layout.instance_block() & !(TABLES_LEN - 1)
    }

    /// BAR1's CPU physical (and bus) address.
    pub(crate) fn phys(&self) -> u64 {
        self.phys
    }

    /// Bytes of BAR1 handed out now (reserved or mapped), nvrs's own scrub slot not counted.
    pub(crate) fn mapped(&self) -> u64 {
        let st = self.state.lock();
        let n = slots::used(&st.slots, self.slots()).saturating_sub(1);
        BIG_PAGE * n as u64
    }

    /// Reservations refused because BAR1 had no room.
    pub(crate) fn exhausted(&self) -> u64 {
        self.exhausted.load(Relaxed)
    }

    /// Whether clearing entries or invalidating the TLB ever failed: BAR1 may then still reach
    /// memory that went back, so the GPU's memory must not be handed out any more
    /// ([`crate::mem::fb::FbMemory::blocked`]).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Relaxed)
    }

    /// Runs `f` with BAR0 (not under the lock: for the copy engine, [`crate::ce`]); `ENODEV`
    /// once the device is unbound. `f` runs in an RCU read-side section and must not sleep.
    pub(crate) fn with_bar0<R>(&self, f: impl FnOnce(&Bar0<'_>) -> Result<R>) -> Result<R> {
        let guard = self.bar0.try_access().ok_or(ENODEV)?;
        f(&guard)
    }

    /// Runs `f` with the registers, under the lock; `ENODEV` once the device is unbound. `f`
    /// runs inside the RCU read-side section that keeps BAR0 mapped, and must not sleep.
    fn with_regs<R>(&self, f: impl FnOnce(&Regs<'_, '_>, &mut State) -> Result<R>) -> Result<R> {
        let mut st = self.state.lock();
        let guard = self.bar0.try_access().ok_or(ENODEV)?;
        let regs = Regs {
            bar0: &guard,
            ver3: self.layout.format().version() == 3,
        };
        f(&regs, &mut st)
    }

    /// Reserves a free run of `n` slots of BAR1 (next fit, [`slots::find_free`]) and returns
    /// its BAR1 offset; nothing
    /// is mapped there until [`Self::fill`]. `ENOMEM` (and counted) if BAR1 has no such run,
    /// `EINVAL` for `n` = 0.
    pub(crate) fn reserve(&self, n: usize) -> Result<u64> {
        if n == 0 {
            return Err(EINVAL);
        }
        let nslots = self.slots();
        let mut st = self.state.lock();
        if st.cleared {
            return Err(ENODEV);
        }
        let Some(start) = slots::find_free(&st.slots, nslots, n, st.next) else {
            self.exhausted.fetch_add(1, Relaxed);
            return Err(ENOMEM);
        };
        if !slots::mark(&mut st.slots, nslots, start, n, true) {
            return Err(EINVAL);
        }
        st.next = start + n;
        Ok(BIG_PAGE * u64::try_from(start)?)
    }

    /// Maps the 64 KiB pages of VRAM at `pages` (64 KiB aligned), in order, at the run
    /// reserved at BAR1 offset `va`, and invalidates the TLB. `EINVAL` for a run that is not
    /// reserved whole, or a page that is not a page of VRAM outside BAR1's tables. On failure
    /// some entries may be written: the caller releases the run ([`Self::release`]).
    pub(crate) fn fill(&self, va: u64, pages: &[u64], read_only: bool) -> Result {
        let tables = self.layout.instance_block();
        let outside = |p: u64| p.checked_add(BIG_PAGE).is_none_or(|end| end > tables);
        if va % BIG_PAGE != 0
            || pages.is_empty()
            || pages.iter().any(|&p| p % BIG_PAGE != 0 || outside(p))
        {
            return Err(EINVAL);
        }
        let start = usize::try_from(va / BIG_PAGE)?;
        let nslots = self.slots();
        self.with_regs(|regs, st| {
            if st.cleared {
                return Err(ENODEV);
            }
            let end = start.checked_add(pages.len()).ok_or(EINVAL)?;
            // Never the scrub slot: it is always marked, but no reservation includes it.
            if end >= nslots || slots::used_in(&st.slots, start, pages.len()) != pages.len() {
                return Err(EINVAL);
            }
            for (i, &page) in (0u64..).zip(pages) {
                let pte = self.layout.pte_addr(va + BIG_PAGE * i).ok_or(EINVAL)?;
                regs.write64(st, pte, self.layout.pte(page, read_only))?;
            }
            regs.flush_and_invalidate(self.layout.pdb())
        })
    }

    /// Points the entries of the filled run `run` (BAR1 offset, pages) from `off` bytes into it
    /// at `len` bytes of VRAM from `fb` (compaction moved the pages there), never past the
    /// run's end, a batch of entries at a time, without allocating; the TLB is invalidated
    /// after each batch. A failure breaks the space ([`Self::is_broken`]): BAR1 may reach the
    /// old pages or the new ones.
    pub(crate) fn remap(&self, run: (u64, usize), off: u64, fb: u64, len: u64) -> Result {
        const BATCH: usize = 32;
        let (start, n) = run;
        let run_len = u64::try_from(n)? * BIG_PAGE;
        if len % BIG_PAGE != 0 || off % BIG_PAGE != 0 {
            return Err(EINVAL);
        }
        // The part of the moved bytes the run maps.
        let len = len.min(run_len.saturating_sub(off));
        let va = start + off;
        let mut pages = [0u64; BATCH];
        let mut done = 0;
        while done < len {
            let n = usize::try_from(((len - done) / BIG_PAGE).min(BATCH as u64))?;
            let batch = pages.get_mut(..n).ok_or(EINVAL)?;
            for (k, p) in (0u64..).zip(batch.iter_mut()) {
                *p = fb + done + k * BIG_PAGE;
            }
            if let Err(e) = self.fill(va + done, batch, false) {
                self.broken.store(true, Relaxed);
                return Err(e);
            }
            done += u64::try_from(n)? * BIG_PAGE;
        }
        Ok(())
    }

    /// Clears the `n` entries of the run at BAR1 offset `va` (a run [`Self::reserve`]
    /// returned, filled or not), invalidates the TLB, and frees the run; nothing to do once GPU
    /// removal cleared every entry. `EINVAL` if the run is not reserved whole. If clearing or
    /// the invalidate fails, the slots stay marked and the space is broken
    /// ([`Self::is_broken`]): BAR1 may still reach the pages.
    pub(crate) fn release(&self, va: u64, n: usize) -> Result {
        if va % BIG_PAGE != 0 {
            return Err(EINVAL);
        }
        let start = usize::try_from(va / BIG_PAGE)?;
        let nslots = self.slots();
        if self.state.lock().cleared {
            return Ok(());
        }
        self.with_regs(|regs, st| {
            if st.cleared {
                return Ok(());
            }
            let end = start.checked_add(n).ok_or(EINVAL)?;
            if n == 0 || end >= nslots || slots::used_in(&st.slots, start, n) != n {
                return Err(EINVAL);
            }
            // Test builds: an entry write or invalidate that fails, as a GPU that stopped
            // answering would make them (the run stays marked, the space breaks).
            let nth = self.releases.fetch_add(1, Relaxed).wrapping_add(1);
            if nth == crate::test_fail_bar1_unmap() && nth != 0 {
                self.broken.store(true, Relaxed);
                return Err(EIO);
            }
            self.clear(regs, st, va, n)?;
            if slots::mark(&mut st.slots, nslots, start, n, false) {
                Ok(())
            } else {
                Err(EINVAL)
            }
        })
    }

    /// Maps `pages` at a free run of BAR1 ([`Self::reserve`], [`Self::fill`]) and
    /// returns its BAR1 offset; on failure nothing stays mapped.
    pub(crate) fn map(&self, pages: &[u64], read_only: bool) -> Result<u64> {
        let va = self.reserve(pages.len())?;
        self.fill(va, pages, read_only).inspect_err(|_| {
            // A run that cannot be cleared stays marked ([`Self::release`]).
            let _ = self.release(va, pages.len());
        })?;
        Ok(va)
    }

    /// Unmaps the `n` pages [`Self::map`] mapped at BAR1 offset `va`.
    pub(crate) fn unmap(&self, va: u64, n: usize) -> Result {
        self.release(va, n)
    }

    /// Zeroes `[fb, fb + len)` of VRAM (4 KiB aligned, below BAR1's tables) through BAR1: each
    /// 64 KiB page in turn is mapped at the scrub slot, written through a CPU mapping of it,
    /// and unmapped again (TLB invalidated each time). Sleeps.
    ///
    /// # Safety
    ///
    /// The range must be GPU memory the caller owns and nobody else can reach (as for
    /// [`crate::helpers::zero_mmio`]).
    pub(crate) unsafe fn zero(&self, fb: u64, len: u64) -> Result {
        let end = fb.checked_add(len).ok_or(EINVAL)?;
        if fb % 4096 != 0 || len % 4096 != 0 || end > self.layout.instance_block() {
            return Err(EINVAL);
        }
        let slot = self.layout.size() - BIG_PAGE;
        let _scrub = self.scrub.lock();
        let mut at = fb;
        while at < end {
            let page = at & !(BIG_PAGE - 1);
            let n = (page + BIG_PAGE).min(end) - at;
            let mapped = self.with_regs(|regs, st| {
                if st.cleared {
                    return Err(ENODEV);
                }
                let pte = self.layout.pte_addr(slot).ok_or(EINVAL)?;
                regs.write64(st, pte, self.layout.pte(page, false))?;
                regs.flush_and_invalidate(self.layout.pdb())
            });
            let zeroed = mapped.and_then(|()| {
                // SAFETY: The scrub slot maps `page`, which holds `[at, at + n)`: memory the
                // caller owns (function safety requirement); nobody else knows the slot.
                unsafe { crate::helpers::zero_mmio(self.phys + slot + (at - page), n) }
            });
            // Cleared whatever happened: the entry may have been written.
            let cleared = self.with_regs(|regs, st| {
                if st.cleared {
                    return Ok(());
                }
                self.clear(regs, st, slot, 1)
            });
            if cleared.is_err() {
                self.broken.store(true, Relaxed);
            }
            zeroed.and(cleared)?;
            at += n;
        }
        Ok(())
    }

    /// Clears the entries of `n` pages from BAR1 offset `va` and invalidates the TLB; a
    /// failure breaks the space ([`Self::is_broken`]).
    fn clear(&self, regs: &Regs<'_, '_>, st: &mut State, va: u64, n: usize) -> Result {
        let cleared = (|| -> Result {
            for i in 0..u64::try_from(n)? {
                let pte = self.layout.pte_addr(va + BIG_PAGE * i).ok_or(EINVAL)?;
                regs.write64(st, pte, 0)?;
            }
            regs.flush_and_invalidate(self.layout.pdb())
        })();
        if cleared.is_err() {
            self.broken.store(true, Relaxed);
        }
        cleared
    }

    /// Clears every entry of BAR1 and invalidates the TLB: GPU removal, before BAR0's mapping
    /// goes (the device keeps decoding BAR1 after the unbind). Runs still held (persistent pins,
    /// pins whose callbacks removal gave up on) lose their BAR1 mapping here, as they lose
    /// their DMA mappings; releasing them later has nothing to do, and nothing is reserved or
    /// mapped any more. A failure breaks the space.
    pub(crate) fn clear_all(&self) -> Result {
        let n = self.slots();
        let done = self.with_regs(|regs, st| {
            self.clear(regs, st, 0, n)?;
            st.cleared = true;
            Ok(())
        });
        if done.is_err() {
            self.broken.store(true, Relaxed);
        }
        done
    }

    /// The model's counters; `ENODEV` once the device is unbound.
    pub(crate) fn counters(&self) -> Result<Counters> {
        self.with_regs(|regs, _| {
            let b = regs.bar0;
            // A GPU that fell off the bus reads all-ones until the mapping is revoked.
            if b.try_read32(MODEL_ID)? != MODEL_ID_VALUE {
                return Err(ENODEV);
            }
            let wide = |lo: usize| -> Result<u64> {
                let l = b.try_read32(lo)?;
                Ok(u64::from(l) | (u64::from(b.try_read32(lo + 4)?) << 32))
            };
            Ok(Counters {
                rx: wide(MODEL_BAR1_RX)?,
                tx: wide(MODEL_BAR1_TX)?,
                faults: b.try_read32(MODEL_FAULTS)?,
                tlb_invalidates: b.try_read32(MODEL_TLB_INVALIDATES)?,
            })
        })
    }

    /// A 32-bit word of VRAM, read through PRAMIN.
    fn read_vram(&self, addr: u64) -> Result<u32> {
        self.with_regs(|regs, st| regs.read32(st, addr))
    }

    /// Writes a 32-bit word of VRAM through PRAMIN.
    fn write_vram(&self, addr: u64, v: u32) -> Result {
        self.with_regs(|regs, st| regs.write32(st, addr, v))
    }

    /// BAR1's 64 KiB slots.
    fn slots(&self) -> usize {
        // BAR1 is at most 4 GiB: 65536 slots.
        (self.layout.size() / BIG_PAGE) as usize
    }
}

/// A word the self-test writes: not all-ones (what an unmapped read gives) nor zero (what
/// fresh memory holds).
const SELF_TEST_WORD: u32 = 0x5e1f_7e57;

/// Maps one page of VRAM into BAR1 through [`Bar1Space::map`] (the last page below the tables,
/// its first word set through PRAMIN and put back after), reads it back through BAR1, unmaps
/// it, and reads again; `bar1` is BAR1's resource index. Runs before the GPU is registered,
/// when no memory of it belongs to anyone.
pub(crate) fn self_test(
    pdev: &pci::Device<kernel::device::Core<'_>>,
    space: &Bar1Space,
    bar1: u32,
) -> Result<SelfTest> {
    let page = space
        .layout()
        .instance_block()
        .checked_sub(BIG_PAGE)
        .ok_or(ENODEV)?;
    let io = pdev.iomap_region_sized::<0x1000>(bar1, c"nvrs/bar1-selftest")?;
    let old = space.read_vram(page)?;
    space.write_vram(page, SELF_TEST_WORD)?;
    let seen = (|| -> Result<(u32, u32)> {
        let va = space.map(&[page], true)?;
        let off = usize::try_from(va)?;
        let got = io.try_read32(off);
        space.unmap(va, 1)?;
        Ok((got?, io.try_read32(off)?))
    })();
    space.write_vram(page, old)?;
    let ((got, after), want) = (seen?, SELF_TEST_WORD);
    Ok(if got != want {
        SelfTest::NotTranslated { got, want }
    } else if after != u32::MAX {
        SelfTest::StaleAfterUnmap { got: after }
    } else {
        SelfTest::Passed
    })
}
