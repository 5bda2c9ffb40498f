// SPDX-License-Identifier: GPL-2.0

//! GPU virtual addresses: one allocator for the VAs of every process's allocations, so that a VA
//! names one allocation at a time across all of nvrs. An allocation's VAs are freed when the
//! [`Allocation`](super::Allocation) object goes (no pin, dma-buf or CPU mapping refers to it
//! any more), and reused as late as possible ([`crate::vaspace::range`]).
//!
//! The live ranges are a red-black tree keyed by start, so GPU removal or a process's exit that
//! frees n allocations costs O(n log n). A range's tree node is allocated before [`VA`] is taken
//! ([`alloc`]) and freed after it is dropped ([`free`]).

use kernel::{
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
};

use crate::vaspace::range::{
    RangeError,
    Span,
    SpanSet,
    VaAllocator, //
};

/// The live VA ranges: start → length. `None` until the first range (`RBTree::new` is not
/// `const`, and [`VA`]'s initial value must be).
pub(crate) struct LiveSpans(Option<RBTree<u64, u64>>);

/// The tree's node for one range.
type Node = RBTreeNodeReservation<u64, u64>;

impl LiveSpans {
    /// No ranges.
    const fn new() -> Self {
        Self(None)
    }
}

/// A tree entry as a [`Span`] (every entry was one when it was inserted).
fn span((start, len): (&u64, &u64)) -> Option<Span> {
    Span::new(*start, *len)
}

impl SpanSet for LiveSpans {
    type Slot = Node;

    fn first_from(&self, at: u64) -> Option<Span> {
        span(self.0.as_ref()?.cursor_lower_bound(&at)?.current())
    }

    fn last_below(&self, at: u64) -> Option<Span> {
        let tree = self.0.as_ref()?;
        match tree.cursor_lower_bound(&at) {
            Some(c) => span(c.peek_prev()?),
            // Every range starts below `at`.
            None => span(tree.cursor_back()?.current()),
        }
    }

    fn insert(&mut self, slot: Node, s: Span) {
        let tree = self.0.get_or_insert_with(RBTree::new);
        // No range starts at `s.start()` (ranges do not overlap), so nothing is replaced.
        drop(tree.insert(slot.into_node(s.start(), s.len())));
    }

    fn remove(&mut self, start: u64) -> Option<Node> {
        Some(self.0.as_mut()?.remove_node(&start)?.into_reservation())
    }
}

/// The errno of a refused range.
impl From<RangeError> for Error {
    fn from(e: RangeError) -> Self {
        match e {
            RangeError::Exhausted => ENOMEM,
            RangeError::Invalid => EINVAL,
        }
    }
}

kernel::sync::global_lock! {
    // SAFETY: `init` is called from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VA: Mutex<VaAllocator<LiveSpans>> =
        VaAllocator::new(LiveSpans::new());
}

/// Initialises the VA allocator, whose space is shrunk to `va_space_size` bytes if non-zero (the
/// `va_space_mib` parameter, for tests). Called once, from module init.
pub(crate) fn init(va_space_size: u64) {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { VA.init() };
    VA.lock().set_size(va_space_size);
}

/// Reserves `len` bytes of GPU VA (a non-zero multiple of 64 KiB); the tree node is allocated
/// before the lock is taken.
pub(crate) fn alloc(len: u64) -> Result<Span> {
    let node = Node::new(GFP_KERNEL)?;
    Ok(VA.lock().alloc(len, node)?)
}

/// Returns the range starting at `start` for reuse; its node is freed after the lock.
pub(crate) fn free(start: u64) -> Result {
    let node = VA.lock().free(start)?;
    drop(node);
    Ok(())
}

/// Frees the VA allocator's memory at module exit (every allocation is gone by then).
pub(crate) fn fini() {
    let va = core::mem::replace(&mut *VA.lock(), VaAllocator::new(LiveSpans::new()));
    drop(va);
}

/// Renders the VA allocator's state for debugfs `p2p`.
pub(crate) fn render(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let va = VA.lock();
    writeln!(f, "va_ranges: {} wraps {}", va.live(), va.wraps())
}
