// SPDX-License-Identifier: GPL-2.0

//! The GPU MMU (GMMU): page-table entries in the chip's format, and BAR1's address space.
//!
//! A GPU reaches its memory through virtual addresses that its MMU translates with page tables
//! the driver writes into video memory. BAR1, the window peers and CPUs see, is one such
//! address space: `NV_PBUS_BAR1_BLOCK` points at an instance block whose page-directory base
//! starts the walk. [`format`] encodes the entries of MMU versions 2 (Pascal to Ada) and 3
//! (Hopper and later); [`bar1`] places BAR1's instance block and tables in a VRAM region and
//! says which entry maps which 64 KiB of BAR1.
//!
//! This module is pure (no `kernel::`): it computes entries and addresses, and the driver
//! writes them through the PRAMIN window (`crate::driver::bar1`). The host tests check the
//! result against an independent walker (`tests/vm/gmmu.py`).

pub(crate) mod bar1;
pub(crate) mod format;
pub(crate) mod slots;
