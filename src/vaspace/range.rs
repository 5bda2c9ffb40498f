// SPDX-License-Identifier: GPL-2.0

//! GPU virtual-address ranges: handing out VAs and checking ranges against allocations.
//!
//! GPU VAs span [`VA_BASE`, `VA_LIMIT`) (a smaller limit can be set for tests). One
//! [`VaAllocator`] serves every process, so VAs are unique across processes while allocated.
//! Freed ranges are reused, next-fit: the search for a free range starts where the previous
//! allocation ended and wraps around to the bottom only at the limit, so a freed VA is handed out
//! again as late as possible (after the whole space has been cycled through) and an ALLOC/FREE
//! loop never exhausts the space. A stale VA in an RDMA driver's cache therefore names nothing
//! for a long time, and never memory of the wrong owner: pins and CPU mappings hold their
//! allocation itself, not its VA. Allocations of 2 MiB or more are aligned to the 2 MiB root
//! chunk, smaller ones to 64 KiB.
//!
//! `nvidia_p2p_get_pages()` takes a VA and a length from a foreign driver; [`check_p2p_range`]
//! and [`Span::contains`] decide whether they describe 64 KiB pages inside one allocation.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host; the live ranges are a
//! [`SpanSet`] (an `RBTree` in the kernel, a `BTreeMap` on the host).

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

/// The live ranges of a [`VaAllocator`], ordered by start, in a balanced tree (the kernel's
/// `RBTree`, the host's `BTreeMap`): each operation is O(log n), so releasing n allocations in
/// any order (GPU removal, a process's exit) costs O(n log n). The tree's memory for a range
/// comes as a [`SpanSet::Slot`], taken before the allocator's lock and given back after it.
pub(crate) trait SpanSet {
    /// Memory for one range.
    type Slot;
    /// The range with the lowest start at or above `at`.
    fn first_from(&self, at: u64) -> Option<Span>;
    /// The range with the highest start below `at`.
    fn last_below(&self, at: u64) -> Option<Span>;
    /// Adds `s`, which overlaps no range, in the memory of `slot`.
    fn insert(&mut self, slot: Self::Slot, s: Span);
    /// Removes the range that starts at `start`, giving back its memory.
    fn remove(&mut self, start: u64) -> Option<Self::Slot>;
}

/// Hands out GPU VAs, next-fit over the gaps between live ranges.
#[derive(Debug)]
pub(crate) struct VaAllocator<L> {
    live: L,
    /// Number of live ranges.
    count: usize,
    /// Where the next search starts: the end of the last allocation.
    cursor: u64,
    /// One past the highest VA handed out.
    limit: u64,
    /// Times the search wrapped around to [`VA_BASE`].
    wraps: u64,
}

impl<L: SpanSet> VaAllocator<L> {
    /// An allocator over `[VA_BASE, VA_LIMIT)` whose live ranges are kept in `live` (empty).
    pub(crate) const fn new(live: L) -> Self {
        Self {
            live,
            count: 0,
            cursor: VA_BASE,
            limit: VA_LIMIT,
            wraps: 0,
        }
    }

    /// Shrinks the space to `[VA_BASE, VA_BASE + size)` (tests exercise reuse with it); only
    /// before the first allocation. Sizes outside `(0, VA_LIMIT - VA_BASE]` are ignored.
    pub(crate) fn set_size(&mut self, size: u64) {
        if self.count == 0 && size > 0 && size <= VA_LIMIT - VA_BASE {
            self.limit = VA_BASE + size;
        }
    }

    /// Number of live ranges.
    pub(crate) fn live(&self) -> usize {
        self.count
    }

    /// Times the search wrapped around.
    pub(crate) fn wraps(&self) -> u64 {
        self.wraps
    }

    /// The first aligned gap of `len` bytes in `[from, to)`; O(log n) per live range it passes.
    fn find_gap(&self, from: u64, to: u64, len: u64, align: u64) -> Option<u64> {
        let mut at = from;
        // A range that starts below `from` may still cover it.
        if let Some(s) = self.live.last_below(at).filter(|s| s.end() > at) {
            at = s.end();
        }
        while at < to {
            let next = self.live.first_from(at);
            let gap_end = next.map_or(to, |s| s.start().min(to));
            let start = at.checked_next_multiple_of(align)?;
            if start.checked_add(len)? <= gap_end {
                return Some(start);
            }
            at = next?.end();
        }
        None
    }

    /// Reserves `len` bytes (a non-zero multiple of 64 KiB), kept in the memory of `slot`: at a
    /// 2 MiB-aligned VA from 2 MiB on, at a 64 KiB-aligned one below.
    pub(crate) fn alloc(&mut self, len: u64, slot: L::Slot) -> Result<Span, RangeError> {
        if len == 0 || len % P2P_PAGE_SIZE != 0 {
            return Err(RangeError::Invalid);
        }
        let align = if len >= ROOT_CHUNK_SIZE {
            ROOT_CHUNK_SIZE
        } else {
            P2P_PAGE_SIZE
        };
        let found = match self.find_gap(self.cursor, self.limit, len, align) {
            Some(f) => Some(f),
            None => {
                let f = self.find_gap(VA_BASE, self.limit, len, align);
                if f.is_some() {
                    self.wraps += 1;
                }
                f
            }
        };
        let start = found.ok_or(RangeError::Exhausted)?;
        let span = Span::new(start, len).ok_or(RangeError::Exhausted)?;
        self.live.insert(slot, span);
        self.count += 1;
        self.cursor = span.end();
        Ok(span)
    }

    /// Returns the range starting at `start` for reuse, and the memory it was kept in.
    pub(crate) fn free(&mut self, start: u64) -> Result<L::Slot, RangeError> {
        let slot = self.live.remove(start).ok_or(RangeError::Invalid)?;
        self.count -= 1;
        Ok(slot)
    }
}
