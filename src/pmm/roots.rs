// SPDX-License-Identifier: GPL-2.0

//! The root table: the metadata of the 2 MiB root chunks, created region by region.
//!
//! # Why two levels
//!
//! A manager covers up to 8 TiB ([`MAX_ROOTS`] roots of 2 MiB), but a new one allocates nothing
//! per root, and the first allocation placed high in the framebuffer (an exact-address
//! allocation near the top, a contiguous run that lands high) must not pay for every root below
//! it. So the roots are kept in *pages* of [`PAGE_ROOTS`] consecutive roots (1 GiB of GPU memory
//! each), reached through a directory with one entry per page: root `r` is entry `r %
//! PAGE_ROOTS` of page `r / PAGE_ROOTS`, one indexed load more than a flat array. A page is
//! allocated when a root in it is first *touched* (needs metadata to change); its roots start
//! free, dirty, typeless and unsplit, and go on the dirty root free list in one splice, lowest
//! address first, so that roots are handed out in address order as before. Pages are never
//! freed: a touched root that becomes free again stays on the root free lists, and allocation
//! takes those before untouched roots, so touched memory grows only as the memory in use does.
//!
//! # Page size
//!
//! [`PAGE_ROOTS`] is 512: a page's metadata is 512 × 64 bytes = 32 KiB, an order-3 allocation
//! (`PAGE_ALLOC_COSTLY_ORDER`, the largest the page allocator still counts as cheap), which
//! `KVVec` takes from kmalloc when it can and from vmalloc otherwise; and touching a page is one
//! pass over 512 roots, a bounded and small amount of work under the manager's lock. The directory costs one vector
//! header (24 bytes) per page: 24 KiB for 1 TiB (1024 pages), 192 KiB for 8 TiB. The first touch
//! of a root far from the others thus costs at most the directory plus one page, `24 N / P +
//! 64 P` bytes for `N` roots in pages of `P`, which is smallest for `P` near 443 at 1 TiB and 1254
//! at 8 TiB: with 512, 56 KiB for 1 TiB (a flat array up to the top root took 32 MiB). Smaller
//! pages make the directory dominate on large framebuffers, larger ones cost more per first touch
//! on small GPUs (an 80 GiB GPU has 80 pages).
//!
//! # Growth
//!
//! The directory is allocated, with every entry empty (an empty vector allocates nothing), when
//! the first page is; the last page holds only the roots that exist. Adding a page is all or
//! nothing: the page is built completely before the directory is created or changed, so an
//! allocation failure leaves the table as it was. The lowest page not yet allocated is kept as a
//! cursor (pages are never freed, so it only moves up), so finding the first untouched root is
//! O(1) and advancing it costs O(pages) over the manager's life.

use super::chunk::{ChunkId, Node, MAX_ROOTS};
use super::freelist::list_index;
use super::{ChunkVec, Pmm, PmmError, Storage, SubTree};

/// log2 of [`PAGE_ROOTS`].
const PAGE_SHIFT: u32 = 9;

/// Roots per page of the root table (1 GiB of GPU memory).
pub(crate) const PAGE_ROOTS: u32 = 1 << PAGE_SHIFT;

/// The page holding root `r`, and `r`'s index in it.
#[inline(always)]
fn locate(r: u32) -> Option<(usize, usize)> {
    let page = usize::try_from(r >> PAGE_SHIFT).ok()?;
    let slot = usize::try_from(r & (PAGE_ROOTS - 1)).ok()?;
    Some((page, slot))
}

/// A page index as a `usize` (lossless: pages fit in 13 bits).
fn idx(p: u32) -> usize {
    usize::try_from(p).unwrap_or(usize::MAX)
}

/// A root chunk.
pub(super) struct Root<S: Storage> {
    /// The root's own chunk metadata.
    pub(super) node: Node,
    /// Roots in the contiguous run this root starts (1 for an ordinary root).
    pub(super) run: u32,
    /// Present while the root is split.
    pub(super) sub: Option<SubTree<S>>,
}

/// Consecutive roots in address order, as [`RootTable::spans`] gives them.
pub(super) struct Span<'a, S: Storage> {
    /// The first root.
    pub(super) first: u32,
    /// Number of roots.
    pub(super) len: u32,
    /// Their metadata, or `None` if they are untouched.
    pub(super) roots: Option<&'a [Root<S>]>,
}

impl<S: Storage> Span<'_, S> {
    /// The indices of the span's roots.
    pub(super) fn indices(&self) -> core::ops::Range<u32> {
        self.first..self.first.saturating_add(self.len)
    }
}

/// The metadata of a manager's roots (see the module documentation).
pub(super) struct RootTable<S: Storage> {
    /// One entry per page, empty until a root in it is touched; itself empty until then.
    pages: S::Vec<S::Vec<Root<S>>>,
    /// Roots managed.
    total: u32,
    /// Roots with metadata: the roots of the allocated pages.
    touched: u32,
    /// The lowest page not allocated, or the number of pages if all are.
    cursor: u32,
}

impl<S: Storage> RootTable<S> {
    /// Bytes of one directory entry.
    pub(super) const ENTRY_BYTES: usize = core::mem::size_of::<S::Vec<Root<S>>>();

    /// The table of `total` roots, all untouched (no allocation).
    pub(super) fn new(total: u32) -> Self {
        RootTable {
            pages: S::Vec::new(),
            total,
            touched: 0,
            cursor: 0,
        }
    }

    /// Roots managed.
    pub(super) fn total(&self) -> u32 {
        self.total
    }

    /// Roots with metadata.
    pub(super) fn touched(&self) -> u32 {
        self.touched
    }

    /// Number of pages.
    fn page_count(&self) -> u32 {
        self.total.div_ceil(PAGE_ROOTS)
    }

    /// The first root and the number of roots of page `p`.
    fn page_span(&self, p: u32) -> (u32, u32) {
        let first = p.saturating_mul(PAGE_ROOTS);
        (first, self.total.saturating_sub(first).min(PAGE_ROOTS))
    }

    /// Touched root `r`.
    #[inline(always)]
    pub(super) fn get(&self, r: u32) -> Option<&Root<S>> {
        let (page, slot) = locate(r)?;
        self.pages.get(page)?.get(slot)
    }

    /// Touched root `r`, mutably.
    #[inline(always)]
    pub(super) fn get_mut(&mut self, r: u32) -> Option<&mut Root<S>> {
        let (page, slot) = locate(r)?;
        self.pages.get_mut(page)?.get_mut(slot)
    }

    /// The first untouched root, if any.
    pub(super) fn first_untouched(&self) -> Option<u32> {
        (self.cursor < self.page_count()).then(|| self.page_span(self.cursor).0)
    }

    /// Gives the untouched page of root `r < total` its metadata, `root(i)` for each root `i`
    /// of it. All or nothing.
    pub(super) fn add_page(
        &mut self,
        r: u32,
        mut root: impl FnMut(u32) -> Root<S>,
    ) -> Result<(), PmmError> {
        if r >= self.total {
            return Err(PmmError::InvalidId);
        }
        let p = r >> PAGE_SHIFT;
        let (first, len) = self.page_span(p);
        let mut page = S::Vec::<Root<S>>::new();
        page.try_reserve(idx(len))?;
        for i in first..first + len {
            page.try_push(root(i))?;
        }
        if self.pages.is_empty() {
            let n = self.page_count();
            let mut dir = S::Vec::<S::Vec<Root<S>>>::new();
            dir.try_reserve(idx(n))?;
            for _ in 0..n {
                dir.try_push(S::Vec::new())?;
            }
            self.pages = dir;
        }
        let slot = self.pages.get_mut(idx(p)).ok_or(PmmError::Corrupt)?;
        if !slot.is_empty() {
            return Err(PmmError::Corrupt);
        }
        *slot = page;
        self.touched = self.touched.saturating_add(len);
        while self.cursor < self.page_count()
            && self
                .pages
                .get(idx(self.cursor))
                .is_some_and(|p| !p.is_empty())
        {
            self.cursor += 1;
        }
        Ok(())
    }

    /// The touched roots in address order, with their indices.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &Root<S>)> {
        self.spans()
            .filter_map(|s| s.roots.map(|r| (s.indices(), r)))
            .flat_map(|(indices, roots)| indices.zip(roots.iter()))
    }

    /// Every root in address order, a page at a time: touched pages with their metadata,
    /// untouched ones as a count (O(pages)).
    pub(super) fn spans(&self) -> impl Iterator<Item = Span<'_, S>> {
        (0..self.page_count()).map(|p| {
            let (first, len) = self.page_span(p);
            let roots = self
                .pages
                .get(idx(p))
                .filter(|v| !v.is_empty())
                .map(|v| &v[..]);
            Span { first, len, roots }
        })
    }

    /// Bytes of the directory and the pages (not the roots' sub-chunk tables).
    pub(super) fn bytes(&self) -> usize {
        let roots = usize::try_from(self.touched).unwrap_or(usize::MAX);
        self.pages
            .len()
            .saturating_mul(Self::ENTRY_BYTES)
            .saturating_add(roots.saturating_mul(core::mem::size_of::<Root<S>>()))
    }

    /// Checks the table's own invariants: the directory's size, each page's, the touched count
    /// and the cursor.
    pub(super) fn check(&self) -> Result<(), &'static str> {
        if u64::from(self.total) > MAX_ROOTS {
            return Err("too many roots");
        }
        if !self.pages.is_empty() && self.pages.len() != idx(self.page_count()) {
            return Err("root directory size");
        }
        let mut touched = 0u32;
        let mut cursor = None;
        for s in self.spans() {
            match s.roots {
                Some(roots) if roots.len() != idx(s.len) => return Err("root page size"),
                Some(_) => touched = touched.saturating_add(s.len),
                None => {
                    cursor.get_or_insert(s.first >> PAGE_SHIFT);
                }
            }
        }
        if touched != self.touched {
            return Err("touched root count");
        }
        if cursor.unwrap_or(self.page_count()) != self.cursor {
            return Err("first untouched page");
        }
        Ok(())
    }
}

impl<S: Storage> Pmm<S> {
    /// Number of untouched roots.
    pub(super) fn untouched_count(&self) -> u64 {
        u64::from(self.roots.total().saturating_sub(self.roots.touched()))
    }

    /// Root `r`: its metadata if touched, the untouched root's otherwise.
    #[inline(always)]
    pub(super) fn root_at(&self, r: u32) -> Option<&Root<S>> {
        match self.roots.get(r) {
            Some(root) => Some(root),
            None if r < self.roots.total() => Some(&self.untouched),
            None => None,
        }
    }

    /// Gives root `r` its metadata (with the rest of its page, the new roots going to the front
    /// of the dirty root list), so that `r` can be changed. All or nothing.
    #[inline(always)]
    pub(super) fn touch(&mut self, r: u32) -> Result<(), PmmError> {
        // Every allocation asks: an inlined test, and a call only when a page is added.
        match self.roots.get(r) {
            Some(_) => Ok(()),
            None => self.touch_more(r),
        }
    }

    /// Touches roots `first..=last`, a page at a time: on failure, the pages already added stay
    /// (their roots free, as untouched roots are).
    pub(super) fn touch_range(&mut self, first: u32, last: u32) -> Result<(), PmmError> {
        let mut r = first;
        while r <= last {
            self.touch(r)?;
            match (r | (PAGE_ROOTS - 1)).checked_add(1) {
                Some(next) => r = next,
                None => break,
            }
        }
        Ok(())
    }

    /// [`Pmm::touch`] for a root not touched yet: adds its page, whose roots go on the dirty
    /// root list in one splice, lowest first, in front of the roots already there.
    #[inline(never)]
    fn touch_more(&mut self, r: u32) -> Result<(), PmmError> {
        if self.roots.get(r).is_some() {
            return Ok(());
        }
        let key = list_index(false, self.top(), false);
        let old = self.lists.get(key).ok_or(PmmError::Corrupt)?.first;
        let (first, len) = self.roots.page_span(r >> PAGE_SHIFT);
        let last = first.saturating_add(len).saturating_sub(1);
        let template = self.untouched.node;
        self.roots.add_page(r, |i| {
            let mut node = template;
            // The list's first chunk keeps no `prev` (see `freelist`).
            node.prev = if i == first {
                ChunkId::NIL
            } else {
                ChunkId::new(i - 1, 0)
            };
            node.next = if i == last {
                old
            } else {
                ChunkId::new(i + 1, 0)
            };
            Root {
                node,
                run: 1,
                sub: None,
            }
        })?;
        if old != ChunkId::NIL {
            Self::node_in(&mut self.roots, old)?.prev = ChunkId::new(last, 0);
        }
        let list = self.lists.get_mut(key).ok_or(PmmError::Corrupt)?;
        list.first = ChunkId::new(first, 0);
        list.len = list.len.saturating_add(u64::from(len));
        Ok(())
    }

    /// The first untouched root, if any.
    pub(super) fn first_untouched(&self) -> Option<ChunkId> {
        self.roots.first_untouched().map(|r| ChunkId::new(r, 0))
    }
}

#[cfg(test)]
impl<S: Storage> Pmm<S> {
    /// Bytes of one entry of the root table's directory (host tests).
    pub(crate) const DIR_ENTRY_BYTES: usize = RootTable::<S>::ENTRY_BYTES;

    /// Number of untouched roots (host tests).
    pub(crate) fn untouched_roots(&self) -> u64 {
        self.untouched_count()
    }
}
