// SPDX-License-Identifier: GPL-2.0

//! Coalescing a page table's 64 KiB pages into physically contiguous runs.
//!
//! A pin's pages come from memory-manager chunks: 2 MiB roots, 64 KiB chunks, or one contiguous
//! run of roots, often physically adjacent to each other. Mapping each run once instead of each
//! page is what makes `nvidia_p2p_dma_map_pages()` cost per run rather than per page.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

use crate::hwref::P2P_PAGE_SIZE;

/// Groups consecutive pages whose physical addresses follow each other into runs, yielding
/// `(first page, pages, first physical address)`.
pub(crate) fn runs(phys: impl Iterator<Item = u64>) -> impl Iterator<Item = (usize, usize, u64)> {
    let mut it = phys.enumerate().peekable();
    core::iter::from_fn(move || {
        let (start, first) = it.next()?;
        let mut n = 1usize;
        let mut next = first.checked_add(P2P_PAGE_SIZE);
        while let Some(&(_, p)) = it.peek() {
            if Some(p) != next {
                break;
            }
            it.next();
            n += 1;
            next = p.checked_add(P2P_PAGE_SIZE);
        }
        Some((start, n, first))
    })
}
