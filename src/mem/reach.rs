// SPDX-License-Identifier: GPL-2.0

//! How the CPU and peers reach a GPU's memory.
//!
//! Two ways exist. The emulated GPUs' memory is one flat aperture: the chunk at framebuffer
//! offset `o` is at CPU physical (and bus) address `base + o`, always, and the CPU mappings,
//! dma-bufs, P2PDMA pages, scrubbing and compaction all use that address. An NVIDIA GPU (the
//! test-bed's GPU model: nvrs writes BAR1's page tables only there, [`crate::bar1`]) reaches
//! its memory through BAR1, a window smaller than the memory: nothing in it is reachable until
//! nvrs maps it, pins map their pages into it ([`crate::p2p::pin`]) and return BAR1 addresses,
//! CPU mappings map the whole allocation at a run of their own ([`crate::mem::cpu_map`]),
//! dma-bufs their range, and
//! scrubbing is done by the GPU's copy engine ([`crate::ce`]) or, without one, by the CPU
//! through a BAR1 slot of its own.
//!
//! dma-bufs map their exported range at a BAR1 run of their own for as long as they hold the
//! memory ([`crate::dmabuf`]), and P2PDMA allocations map themselves at one for their life, whose
//! struct pages they hand to the block layer ([`crate::mem::p2pdma`]). Compaction copies with
//! the copy engine ([`Reach::copy`]) and points the moved pages' entries of the allocation's CPU
//! run at their new place.

use kernel::{prelude::*, sync::Arc};

use crate::{
    bar1::Bar1Space,
    ce::{
        ModelCe,
        Target, //
    },
    helpers,
    hwref::P2P_PAGE_SIZE,
    mem::copy::CopyEngine,
};

/// How a GPU's memory is reached ([`crate::mem::fb::FbMemory::reach`]).
pub(crate) enum Reach {
    /// A flat aperture at CPU physical address `base`.
    Flat {
        /// The address of framebuffer offset 0.
        base: u64,
    },
    /// BAR1 through nvrs's page tables, and the copy engine if it passed its self-test.
    Bar1 {
        /// The GPU's BAR1.
        bar1: Arc<Bar1Space>,
        /// Scrubs and compaction go through it; without it the CPU scrubs
        /// through BAR1.
        ce: Option<Arc<ModelCe>>,
    },
}

impl Reach {
    /// The CPU physical address of framebuffer offset 0 of a flat aperture; `EOPNOTSUPP`
    /// through BAR1, where no address holds unless mapped.
    pub(crate) fn flat(&self) -> Result<u64> {
        match self {
            Reach::Flat { base } => Ok(*base),
            Reach::Bar1 { .. } => Err(EOPNOTSUPP),
        }
    }

    /// The GPU's BAR1, if its memory is reached through it.
    pub(crate) fn bar1(&self) -> Option<&Bar1Space> {
        match self {
            Reach::Flat { .. } => None,
            Reach::Bar1 { bar1, .. } => Some(bar1),
        }
    }

    /// The CPU physical range of `len` bytes from framebuffer offset `start`, as retired
    /// managers are compared ([`crate::mem::fb::retire`]): the aperture's addresses, or BAR1's
    /// window (which the same device keeps across a rebind).
    pub(crate) fn phys_range(&self, start: u64, len: u64) -> Result<(u64, u64)> {
        match self {
            Reach::Flat { base } => {
                let s = base.checked_add(start).ok_or(EINVAL)?;
                Ok((s, s.saturating_add(len)))
            }
            Reach::Bar1 { bar1: b, .. } => {
                Ok((b.phys(), b.phys().saturating_add(b.layout().size())))
            }
        }
    }

    /// Through BAR1, reserves a run of `pages` 64 KiB slots for a pin ([`Window`]); `None` on
    /// a flat aperture, where a pin needs none. `ENOMEM` when BAR1 has no room.
    pub(crate) fn reserve(&self, pages: usize) -> Result<Option<Window<'_>>> {
        match self {
            Reach::Flat { .. } => Ok(None),
            Reach::Bar1 { bar1: b, .. } => Ok(Some(Window {
                bar1: b,
                va: b.reserve(pages)?,
                pages,
            })),
        }
    }

    /// Unmaps a run [`Window::keep`] kept, and frees it; false if BAR1 may still reach the
    /// pages, which then must never go back to the memory manager. A failure is one line in
    /// the kernel log, and breaks the space ([`Bar1Space::is_broken`]).
    #[must_use]
    pub(crate) fn release(&self, va: u64, pages: usize) -> bool {
        self.bar1().is_none_or(|b| release_run(b, va, pages))
    }

    /// Zeroes `[fb, fb + len)` of the GPU's memory: through the aperture, with the copy engine,
    /// or through BAR1's scrub slot. Sleeps.
    ///
    /// # Safety
    ///
    /// The range must be GPU memory the caller owns and nobody else can reach: a chunk just
    /// allocated and not yet handed out, or one being returned after every mapping and pin of
    /// it ended.
    pub(crate) unsafe fn zero(&self, fb: u64, len: u64) -> Result {
        match self {
            // SAFETY: The caller owns the range (function safety requirement).
            Reach::Flat { base } => unsafe { helpers::zero_mmio(*base + fb, len) },
            // The engine writes only VRAM it is told to: the caller's.
            Reach::Bar1 { ce: Some(ce), .. } => ce.fill(fb, len, 0),
            // SAFETY: As above.
            Reach::Bar1 { bar1, ce: None } => unsafe { bar1.zero(fb, len) },
        }
    }

    /// Whether [`Self::copy`] can move memory: through a flat aperture, or with the copy
    /// engine; `EOPNOTSUPP` through BAR1 without one.
    pub(crate) fn can_copy(&self) -> Result {
        match self {
            Reach::Bar1 { ce: None, .. } => Err(EOPNOTSUPP),
            _ => Ok(()),
        }
    }

    /// Copies `len` bytes of the GPU's memory from framebuffer offset `from` to `to`: through
    /// the aperture with `copier`, or with the copy engine. Sleeps.
    ///
    /// # Safety
    ///
    /// Both ranges must be GPU memory the caller owns and nobody else can reach during the
    /// copy.
    pub(crate) unsafe fn copy(
        &self,
        copier: &dyn CopyEngine,
        to: u64,
        from: u64,
        len: u64,
    ) -> Result {
        match self {
            // SAFETY: The caller owns both ranges (function safety requirement).
            Reach::Flat { base } => unsafe { copier.copy(*base + to, *base + from, len) },
            // The engine touches only the VRAM it is told to: the caller's.
            Reach::Bar1 { ce: Some(ce), .. } => ce.copy(Target::Vram(to), Target::Vram(from), len),
            Reach::Bar1 { ce: None, .. } => Err(EOPNOTSUPP),
        }
    }

    /// The copy engine, if memory is reached through BAR1 and the GPU has one that works.
    pub(crate) fn ce(&self) -> Option<&ModelCe> {
        match self {
            Reach::Bar1 { ce: Some(ce), .. } => Some(ce),
            _ => None,
        }
    }
}

/// A run of BAR1 reserved for a pin: built into its page table before the allocation's lock is
/// taken, filled under it, and released when dropped unless the pin keeps it.
pub(crate) struct Window<'a> {
    bar1: &'a Bar1Space,
    va: u64,
    pages: usize,
}

impl Window<'_> {
    /// The bus address of page `i` of the run.
    pub(crate) fn addr(&self, i: u32) -> u64 {
        self.bar1.phys() + self.va + u64::from(i) * P2P_PAGE_SIZE
    }

    /// The run's BAR1 offset and length in pages, for [`Reach::release`].
    pub(crate) fn run(&self) -> (u64, usize) {
        (self.va, self.pages)
    }

    /// Maps the framebuffer pages `fb` (one per slot of the run) and invalidates the TLB.
    pub(crate) fn fill(&self, fb: &[u64]) -> Result {
        if fb.len() != self.pages {
            return Err(EINVAL);
        }
        self.bar1.fill(self.va, fb, false)
    }

    /// Hands the run to its pin, which releases it when it ends ([`Reach::release`]).
    pub(crate) fn keep(self) {
        core::mem::forget(self);
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        // Cleared whether or not it was filled. If that fails, the space is broken and the
        // GPU hands nothing out any more ([`crate::mem::fb::FbMemory::blocked`]).
        let _ = release_run(self.bar1, self.va, self.pages);
    }
}

/// [`Bar1Space::release`], with one kernel-log line if it fails; true if it worked.
fn release_run(bar1: &Bar1Space, va: u64, pages: usize) -> bool {
    bar1.release(va, pages)
        .inspect_err(|e| pr_err!("unmapping {pages} pages at BAR1 offset {va:#x}: {e:?}; the GPU's memory is not handed out any more\n"))
        .is_ok()
}
