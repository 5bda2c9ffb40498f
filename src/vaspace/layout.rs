// SPDX-License-Identifier: GPL-2.0

//! Where a byte of an allocation lives: the layout of its pieces.
//!
//! An allocation's backing is `bulk` pieces of `bulk_len` bytes each (2 MiB roots, or a single
//! contiguous run) followed by `tail` pieces of 64 KiB, in VA order. Finding the piece that
//! holds an offset is then arithmetic, O(1), however large the allocation: a 1 GiB pin of 16384
//! pages never walks the piece list.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

use core::ops::Range;

use crate::hwref::P2P_PAGE_SIZE;

/// The shape of an allocation's backing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Layout {
    /// Number of leading bulk pieces.
    pub(crate) bulk: u64,
    /// Bytes per bulk piece.
    pub(crate) bulk_len: u64,
    /// Number of trailing 64 KiB pieces.
    pub(crate) tail: u64,
}

impl Layout {
    /// Total bytes.
    pub(crate) fn len(&self) -> u64 {
        self.bulk * self.bulk_len + self.tail * P2P_PAGE_SIZE
    }

    /// Number of pieces.
    pub(crate) fn pieces(&self) -> u64 {
        self.bulk + self.tail
    }

    /// Offset of piece `i` in the allocation.
    pub(crate) fn offset_of(&self, i: u64) -> u64 {
        if i < self.bulk {
            i * self.bulk_len
        } else {
            self.bulk * self.bulk_len + (i - self.bulk) * P2P_PAGE_SIZE
        }
    }

    /// Length of piece `i` (0 past the last).
    pub(crate) fn piece_len(&self, i: u64) -> u64 {
        if i < self.bulk {
            self.bulk_len
        } else if i < self.pieces() {
            P2P_PAGE_SIZE
        } else {
            0
        }
    }

    /// The piece holding byte `off` and the offset within it.
    pub(crate) fn locate(&self, off: u64) -> Option<(u64, u64)> {
        if off >= self.len() {
            return None;
        }
        let bulk_bytes = self.bulk * self.bulk_len;
        if off < bulk_bytes {
            // Bulk pieces are 2 MiB roots (shift and mask, no division on the pin path) or one
            // contiguous run of any length.
            let len = self.bulk_len;
            if len.is_power_of_two() {
                Some((off >> len.trailing_zeros(), off & (len - 1)))
            } else {
                Some((off.checked_div(len)?, off.checked_rem(len)?))
            }
        } else {
            let t = off - bulk_bytes;
            Some((self.bulk + t / P2P_PAGE_SIZE, t % P2P_PAGE_SIZE))
        }
    }

    /// The pieces that hold any byte of `[off, off + len)` (empty if `len` is 0 or the range
    /// is outside).
    pub(crate) fn pieces_in(&self, off: u64, len: u64) -> Range<u64> {
        let last = off.checked_add(len).and_then(|e| e.checked_sub(1));
        match (len, self.locate(off), last.and_then(|l| self.locate(l))) {
            (1.., Some((first, _)), Some((end, _))) => first..end + 1,
            _ => 0..0,
        }
    }
}
