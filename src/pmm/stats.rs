// SPDX-License-Identifier: GPL-2.0

//! Statistics (`pmm/stats`) and the per-root map (`pmm/map`).
//!
//! Definitions:
//! - *free bytes*: the bytes of every free chunk;
//! - *largest free block*: the largest free extent, counting adjacent free roots as one extent
//!   (what a contiguous allocation could get); below one root, the largest free chunk (two free
//!   chunks that touch across a root boundary are not joined);
//! - *fragmentation index*: `1 - largest_free / free_bytes`, in thousandths (0 when nothing is
//!   free): 0 means all free memory is one extent, values near 1000 mean it is scattered in
//!   small pieces. Integer arithmetic only (the kernel has no floating point).
//!
//! Counts are kept as chunks change state; the largest free block scans the touched roots and
//! counts untouched pages whole (O(touched roots + pages)).

use core::fmt;

use super::chunk::{State, CONTIG_TAIL, STATES};
use super::{Pmm, Storage, MAX_SIZES};
use crate::hwref::ROOT_CHUNK_SIZE;

/// A snapshot of the manager's statistics.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Stats {
    /// Chunk sizes, smallest first (`levels` of them).
    pub(crate) sizes: [u64; MAX_SIZES],
    /// Number of sizes.
    pub(crate) levels: usize,
    /// Chunks per state (index [`State::index`]) and size.
    pub(crate) chunks: [[u64; MAX_SIZES]; STATES],
    /// Roots.
    pub(crate) roots: u64,
    /// Bytes managed.
    pub(crate) total_bytes: u64,
    /// Bytes in free chunks.
    pub(crate) free_bytes: u64,
    /// Bytes in free chunks known to be zero.
    pub(crate) zeroed_free_bytes: u64,
    /// Bytes in allocated chunks.
    pub(crate) allocated_bytes: u64,
    /// Bytes in temp-pinned chunks.
    pub(crate) temp_pinned_bytes: u64,
    /// The largest free extent, in bytes.
    pub(crate) largest_free: u64,
    /// Allocations that failed.
    pub(crate) alloc_failures: u64,
    /// Bytes of metadata in use.
    pub(crate) metadata_bytes: u64,
    /// Compactions and what they moved.
    pub(crate) compaction: super::CompactStats,
}

impl Stats {
    /// The fragmentation index, in thousandths.
    pub(crate) fn fragmentation_permille(&self) -> u64 {
        if self.free_bytes == 0 {
            return 0;
        }
        // Framebuffers are far below 2^54 bytes, so the product cannot saturate in practice;
        // no 128-bit division (the kernel has no `__udivti3`).
        let ratio = self.largest_free.saturating_mul(1000) / self.free_bytes;
        1000u64.saturating_sub(ratio)
    }

    /// Bytes in chunks of `state`.
    fn bytes_in(&self, state: State) -> u64 {
        let counts = self.chunks.get(state.index()).copied().unwrap_or_default();
        counts
            .iter()
            .zip(self.sizes.iter())
            .take(self.levels)
            .fold(0u64, |acc, (&n, &s)| {
                acc.saturating_add(n.saturating_mul(s))
            })
    }
}

/// A size as a number and a unit: `(4, "K")`, `(2, "M")`.
fn size_name(size: u64) -> (u64, &'static str) {
    if size >= 1 << 20 && size % (1 << 20) == 0 {
        (size >> 20, "M")
    } else if size % (1 << 10) == 0 {
        (size >> 10, "K")
    } else {
        (size, "")
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let frag = self.fragmentation_permille();
        writeln!(f, "roots: {} ({} bytes)", self.roots, self.total_bytes)?;
        writeln!(f, "free_bytes: {}", self.free_bytes)?;
        writeln!(f, "zeroed_free_bytes: {}", self.zeroed_free_bytes)?;
        writeln!(f, "allocated_bytes: {}", self.allocated_bytes)?;
        writeln!(f, "temp_pinned_bytes: {}", self.temp_pinned_bytes)?;
        writeln!(f, "largest_free: {}", self.largest_free)?;
        writeln!(f, "fragmentation: {}.{}%", frag / 10, frag % 10)?;
        writeln!(f, "alloc_failures: {}", self.alloc_failures)?;
        writeln!(f, "metadata_bytes: {}", self.metadata_bytes)?;
        let c = &self.compaction;
        writeln!(
            f,
            "compactions: {} moved_chunks: {} moved_bytes: {}",
            c.runs, c.moved_chunks, c.moved_bytes
        )?;
        writeln!(
            f,
            "last_compaction: largest_free {} -> {}, fragmentation {}.{}% -> {}.{}%",
            c.last_largest_before,
            c.last_largest_after,
            c.last_frag_before / 10,
            c.last_frag_before % 10,
            c.last_frag_after / 10,
            c.last_frag_after % 10
        )?;
        write!(f, "{:>6}", "size")?;
        for s in State::ALL {
            write!(f, " {:>12}", s.name())?;
        }
        writeln!(f)?;
        for (l, size) in self.sizes.iter().enumerate().take(self.levels) {
            let (n, unit) = size_name(*size);
            write!(f, "{n:>5}{unit}")?;
            for s in State::ALL {
                let n = self.chunks.get(s.index()).and_then(|c| c.get(l)).copied();
                write!(f, " {:>12}", n.unwrap_or(0))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

impl<S: Storage> Pmm<S> {
    /// A snapshot of the statistics.
    pub(crate) fn stats(&self) -> Stats {
        let mut s = Stats {
            sizes: self.sizes,
            levels: self.levels,
            chunks: self.counts(),
            roots: u64::from(self.roots.total()),
            total_bytes: self.total_bytes(),
            free_bytes: 0,
            zeroed_free_bytes: 0,
            allocated_bytes: 0,
            temp_pinned_bytes: 0,
            largest_free: self.largest_free(),
            alloc_failures: self.alloc_failures,
            metadata_bytes: u64::try_from(self.metadata_bytes()).unwrap_or(u64::MAX),
            compaction: self.compaction,
        };
        s.free_bytes = s.bytes_in(State::Free);
        s.allocated_bytes = s.bytes_in(State::Allocated);
        s.temp_pinned_bytes = s.bytes_in(State::TempPinned);
        for (i, list) in self.lists.iter().enumerate() {
            if i % 2 == 1 {
                let level = u8::try_from((i / 2) % MAX_SIZES).unwrap_or(0);
                let bytes = list.len.saturating_mul(self.size_of_level(level));
                s.zeroed_free_bytes = s.zeroed_free_bytes.saturating_add(bytes);
            }
        }
        s
    }

    /// The largest free extent in bytes (see the module documentation).
    pub(crate) fn largest_free(&self) -> u64 {
        let mut best = 0u64;
        let mut run = 0u64;
        for span in self.roots.spans() {
            let Some(roots) = span.roots else {
                // Untouched roots are free.
                run += u64::from(span.len);
                best = best.max(run);
                continue;
            };
            for r in roots {
                if r.node.state == State::Free {
                    run += 1;
                    best = best.max(run);
                } else {
                    run = 0;
                }
            }
        }
        if best != 0 {
            return best.saturating_mul(ROOT_CHUNK_SIZE);
        }
        let counts = self.counts();
        let free = counts.get(State::Free.index());
        (0..self.levels)
            .rev()
            .find(|&l| free.and_then(|c| c.get(l)).is_some_and(|&n| n != 0))
            .and_then(|l| self.sizes.get(l).copied())
            .unwrap_or(0)
    }

    /// The per-root map, for `pmm/map`.
    pub(crate) fn map(&self) -> MapView<'_, S> {
        MapView { pmm: self }
    }

    /// What root `r` holds, for maps of the memory (`pmm/map`, `NVRS_IOCTL_PMM_MAP`).
    pub(crate) fn root_summary(&self, r: usize) -> Option<RootSummary> {
        let root = self.root_at(u32::try_from(r).ok()?)?;
        let n = &root.node;
        let kind = match n.state {
            State::Free => RootKind::Free,
            _ if n.has(CONTIG_TAIL) || root.run > 1 => RootKind::Contiguous,
            State::IsSplit => RootKind::Split,
            State::TempPinned => RootKind::TempPinned,
            State::Allocated => RootKind::Allocated,
        };
        let mut used = 0u64;
        let mut pinned = false;
        let id = super::ChunkId::new(u32::try_from(r).ok()?, 0);
        self.walk(id, &mut |_, c| {
            if c.state != State::Free {
                used += self.size_of_level(c.level);
            }
            pinned |= c.pins != 0;
            true
        });
        Some(RootSummary {
            kind,
            pinned,
            used: used.min(ROOT_CHUNK_SIZE),
        })
    }
}

/// What a root is, as a whole.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RootKind {
    /// Free.
    Free,
    /// One allocated 2 MiB chunk.
    Allocated,
    /// Split into smaller chunks.
    Split,
    /// Part of a contiguous run of roots.
    Contiguous,
    /// Being allocated or moved.
    TempPinned,
}

/// A root's summary ([`Pmm::root_summary`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RootSummary {
    /// What it is.
    pub(crate) kind: RootKind,
    /// It holds a chunk with P2P pins (or held by a dma-buf export).
    pub(crate) pinned: bool,
    /// Bytes in use (not free) in it.
    pub(crate) used: u64,
}

/// Roots per line of the map.
const MAP_WIDTH: usize = 64;

/// The per-root map: one character per root, [`MAP_WIDTH`] roots per line, each line starting
/// with the framebuffer offset of its first root.
///
/// `.` free, `A` allocated, `P` temp-pinned, `S` split, `X` allocated with P2P pins,
/// `C` allocated or temp-pinned as part of a contiguous run.
pub(crate) struct MapView<'a, S: Storage> {
    /// The manager.
    pmm: &'a Pmm<S>,
}

impl<S: Storage> fmt::Display for MapView<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut addr = self.pmm.base;
        for i in 0..self.pmm.root_count() {
            if i % MAP_WIDTH == 0 {
                if i != 0 {
                    writeln!(f)?;
                }
                write!(f, "{addr:#014x} ")?;
            }
            let c = match self.pmm.root_summary(i).map(|s| (s.kind, s.pinned)) {
                Some((RootKind::Free, _)) => '.',
                Some((RootKind::Split, _)) => 'S',
                Some((RootKind::Contiguous, _)) => 'C',
                Some((RootKind::TempPinned, _)) => 'P',
                Some((RootKind::Allocated, true)) => 'X',
                Some((RootKind::Allocated, false)) => 'A',
                None => '?',
            };
            write!(f, "{c}")?;
            addr = addr.saturating_add(ROOT_CHUNK_SIZE);
        }
        writeln!(f)
    }
}
