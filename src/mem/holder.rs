// SPDX-License-Identifier: GPL-2.0

//! What holds an allocation's memory besides its owner, as the allocation sees it.
//!
//! The holders live in layers above this one (`nvidia_p2p` pins, [`crate::p2p::pin`]), so the
//! allocation knows them only through [`Holder`]: whether its release leaves one alone
//! (persistent pins keep the memory until they are put) and how to revoke one that it does not.
//! Each allocation lists its live holders ([`AllocState`](super::allocation::AllocState)),
//! intrusively and so without allocating, as Rust binder's process lists the work it delivers
//! (`dyn DeliverToRead`): a holder is allocated as a [`Held`], which carries the list links
//! beside it. Revocable holders are kept at the front of the list and persistent ones at the
//! back, so release finds the next one to revoke in constant time.

use core::ops::Deref;

use kernel::{
    list::{
        ListArcSafe,
        ListLinksSelfPtr,
        TryNewListArc, //
    },
    prelude::*,
};

/// A holder of an allocation's memory.
pub(crate) trait Holder: ListArcSafe + Send + Sync {
    /// Whether the allocation's release leaves it (and the memory it holds) alone.
    fn is_persistent(&self) -> bool;

    /// Ends it because its allocation is released: runs in the releasing thread with no nvrs
    /// lock held (a consumer's free callback may run here) and returns once it has ended, or
    /// once another thread that is ending it has finished. Never allocates.
    fn revoke(&self);
}

/// A holder with the links of its allocation's list of holders.
#[pin_data]
pub(crate) struct Held<T: ?Sized> {
    #[pin]
    links: ListLinksSelfPtr<Held<dyn Holder>>,
    /// The holder (for the layer that defines it, which places fields of it by offset).
    #[pin]
    pub(crate) holder: T,
}

kernel::list::impl_list_arc_safe! {
    impl{T: ListArcSafe + ?Sized} ListArcSafe<0> for Held<T> {
        tracked_by holder: T;
    }
}

kernel::list::impl_list_item! {
    impl ListItem<0> for Held<dyn Holder> {
        using ListLinksSelfPtr { self.links };
    }
}

impl<T: ?Sized> Deref for Held<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.holder
    }
}

impl<T> Held<T> {
    /// A holder, not in any list yet.
    pub(crate) fn new(holder: impl PinInit<T>) -> impl PinInit<Self> {
        pin_init!(Self {
            links <- ListLinksSelfPtr::new(),
            holder <- holder,
        })
    }

    /// The holder, pinned, of an unshared [`Held`].
    pub(crate) fn holder_mut(self: Pin<&mut Self>) -> Pin<&mut T> {
        self.project().holder
    }
}
