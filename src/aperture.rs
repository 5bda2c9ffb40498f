// SPDX-License-Identifier: GPL-2.0

//! Finding the framebuffer aperture among a PCI function's BARs.
//!
//! An NVIDIA GPU exposes three memory BARs: registers (NVIDIA's BAR0), the framebuffer aperture
//! (BAR1) and instance memory (BAR2/3). A 64-bit BAR occupies two of the six base-address
//! registers, so Linux's resource index of the aperture depends on the width of the BAR before
//! it: a 32-bit register BAR puts the aperture at resource 1 (older GPUs), a 64-bit one at
//! resource 2 (the H200 in `tests/data/h200`). The rule that holds for both, and for the
//! ivshmem-plain devices used as emulated GPUs (256-byte register BAR0, shared memory at BAR2),
//! is: the aperture is the second implemented memory BAR.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

/// What one base-address register slot holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BarKind {
    /// Not implemented (reads zero).
    Unused,
    /// An I/O-space BAR.
    Io,
    /// A 32-bit memory BAR.
    Mem32 {
        /// Prefetchable.
        prefetch: bool,
    },
    /// The low half of a 64-bit memory BAR.
    Mem64 {
        /// Prefetchable.
        prefetch: bool,
    },
    /// The high half of the 64-bit BAR in the slot before.
    Upper,
}

/// Number of base-address registers in a type-0 configuration header.
pub(crate) const NUM_BARS: usize = 6;
/// Configuration-space offset of the first base-address register.
pub(crate) const BAR_OFFSET: usize = 0x10;

/// Decodes the six base-address registers of a type-0 header.
pub(crate) fn decode_bars(regs: &[u32; NUM_BARS]) -> [BarKind; NUM_BARS] {
    let mut kinds = [BarKind::Unused; NUM_BARS];
    let mut i = 0;
    while i < NUM_BARS {
        let r = regs[i];
        kinds[i] = if r & 1 == 1 {
            BarKind::Io
        } else if r == 0 {
            BarKind::Unused
        } else {
            let prefetch = r & 0x8 != 0;
            // Bits 2:1: 0b00 32-bit, 0b10 64-bit.
            if (r >> 1) & 0x3 == 0x2 && i + 1 < NUM_BARS {
                kinds[i + 1] = BarKind::Upper;
                kinds[i] = BarKind::Mem64 { prefetch };
                i += 2;
                continue;
            }
            BarKind::Mem32 { prefetch }
        };
        i += 1;
    }
    kinds
}

/// Reads the base-address registers out of configuration-space bytes.
pub(crate) fn bar_regs(config: &[u8]) -> Option<[u32; NUM_BARS]> {
    let mut regs = [0u32; NUM_BARS];
    for (i, reg) in regs.iter_mut().enumerate() {
        let off = BAR_OFFSET + 4 * i;
        let b = config.get(off..off + 4)?;
        *reg = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    Some(regs)
}

/// The resource index of the framebuffer aperture: the second memory BAR whose length is
/// non-zero. `lens[i]` is the length Linux assigned to resource `i`.
pub(crate) fn framebuffer_bar(kinds: &[BarKind; NUM_BARS], lens: &[u64; NUM_BARS]) -> Option<u32> {
    (0..NUM_BARS)
        .filter(|&i| matches!(kinds[i], BarKind::Mem32 { .. } | BarKind::Mem64 { .. }))
        .filter(|&i| lens[i] != 0)
        .nth(1)
        .and_then(|i| u32::try_from(i).ok())
}
