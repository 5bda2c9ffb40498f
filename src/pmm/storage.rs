// SPDX-License-Identifier: GPL-2.0

//! The allocation abstraction of the memory manager's metadata.
//!
//! The kernel has no `alloc::vec::Vec`; it has `kernel::alloc::KVVec<T>`, whose growth is
//! fallible and takes GFP flags. The host has `std::vec::Vec`. The memory manager is generic over
//! a [`Storage`] that names the growable array type to use, so the same code runs in both.
//!
//! The contract is small on purpose (the kernel implementation is a few lines over `KVVec`):
//! - growth is fallible and reports [`OutOfMemory`]; the memory manager then leaves its state
//!   unchanged and returns an error;
//! - after a successful [`ChunkVec::try_reserve`]`(n)`, the next `n` calls of
//!   [`ChunkVec::try_push`] must succeed without allocating (the memory manager reserves before
//!   it starts a split, so that a split never fails half-way);
//! - dropping the vector frees its memory (used when a split root merges back).

use core::ops::DerefMut;

/// A metadata allocation failed (the kernel's `AllocError`, `ENOMEM`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct OutOfMemory;

/// A growable array with fallible growth, seen as a slice once built.
pub(crate) trait ChunkVec<T>: DerefMut<Target = [T]> + Sized {
    /// An empty vector; must not allocate.
    fn new() -> Self;

    /// Makes room for `additional` more elements beyond the current length.
    fn try_reserve(&mut self, additional: usize) -> Result<(), OutOfMemory>;

    /// Appends `value`; fails only if memory must be allocated and cannot be.
    fn try_push(&mut self, value: T) -> Result<(), OutOfMemory>;

    /// Removes and returns the last element.
    fn pop(&mut self) -> Option<T>;
}

/// Names the vector type the memory manager keeps its metadata in.
pub(crate) trait Storage {
    /// The vector of `T`.
    type Vec<T>: ChunkVec<T>;
}
