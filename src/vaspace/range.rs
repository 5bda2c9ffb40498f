// SPDX-License-Identifier: GPL-2.0

//! GPU virtual-address ranges: handing out VAs and checking ranges against allocations.
//!
//! GPU VAs span [`VA_BASE`, `VA_LIMIT`). Allocations get VAs from one bump allocator shared by
//! every process: VAs are unique across processes and never reused while nvrs is loaded, so a
//! stale VA (say, in an RDMA driver's cache after the memory was freed) can never name a newer
//! allocation, and a (VA, page table) pair names at most one pin. Allocations of 2 MiB or more
//! are aligned to the 2 MiB root chunk, smaller ones to 64 KiB. The space holds 2^47 bytes:
//! two billion 64 KiB allocations.
//!
//! `nvidia_p2p_get_pages()` takes a VA and a length from a foreign driver; [`check_p2p_range`]
//! and [`Span::contains`] decide whether they describe 64 KiB pages inside one allocation.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

use crate::hwref::{
    P2P_PAGE_SIZE,
    ROOT_CHUNK_SIZE, //
};

/// Lowest GPU VA handed out (leaves the first 4 GiB unused so 0 and small integers are never
/// valid VAs).
pub(crate) const VA_BASE: u64 = 1 << 32;
/// One past the highest GPU VA handed out.
pub(crate) const VA_LIMIT: u64 = 1 << 47;

/// Why a range was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RangeError {
    /// Zero length, misaligned start or length, or an overflowing end.
    Invalid,
    /// The VA space is exhausted.
    Exhausted,
}

/// A range of GPU VAs: `[start, start + len)`, never empty, never overflowing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Span {
    start: u64,
    len: u64,
}

impl Span {
    /// A range, if it is non-empty and does not overflow.
    pub(crate) fn new(start: u64, len: u64) -> Option<Self> {
        if len == 0 {
            return None;
        }
        start.checked_add(len)?;
        Some(Self { start, len })
    }

    /// First VA.
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// One past the last VA (cannot overflow, by construction).
    pub(crate) fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }

    /// Whether `other` lies entirely inside `self`.
    pub(crate) fn contains(&self, other: &Span) -> bool {
        other.start >= self.start && other.end() <= self.end()
    }
}

/// Validates an `nvidia_p2p_get_pages()` range: a non-zero length, both the address and the
/// length multiples of 64 KiB, no overflow.
pub(crate) fn check_p2p_range(va: u64, len: u64) -> Result<Span, RangeError> {
    if va % P2P_PAGE_SIZE != 0 || len % P2P_PAGE_SIZE != 0 {
        return Err(RangeError::Invalid);
    }
    Span::new(va, len).ok_or(RangeError::Invalid)
}

/// Hands out VAs for one VA space.
#[derive(Debug)]
pub(crate) struct VaAllocator {
    next: u64,
}

impl Default for VaAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl VaAllocator {
    /// An allocator starting at [`VA_BASE`].
    pub(crate) const fn new() -> Self {
        Self { next: VA_BASE }
    }

    /// Reserves `len` bytes (a non-zero multiple of 64 KiB): at a 2 MiB-aligned VA from 2 MiB
    /// on, at a 64 KiB-aligned one below.
    pub(crate) fn alloc(&mut self, len: u64) -> Result<Span, RangeError> {
        if len == 0 || len % P2P_PAGE_SIZE != 0 {
            return Err(RangeError::Invalid);
        }
        let align = if len >= ROOT_CHUNK_SIZE {
            ROOT_CHUNK_SIZE
        } else {
            P2P_PAGE_SIZE
        };
        let start = self
            .next
            .checked_next_multiple_of(align)
            .ok_or(RangeError::Exhausted)?;
        let span = Span::new(start, len).ok_or(RangeError::Exhausted)?;
        if span.end() > VA_LIMIT {
            return Err(RangeError::Exhausted);
        }
        self.next = span.end();
        Ok(span)
    }
}
