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
//!
//! The kernel side is expected to be this small (checked to build against Linux 7.3's
//! `kernel::alloc`, where it gives `Pmm::<KernelStorage>::ROOT_BYTES == 64`):
//!
//! ```text
//! impl<T> ChunkVec<T> for KVVec<T> {
//!     fn new() -> Self { KVVec::new() }
//!     fn try_reserve(&mut self, n: usize) -> Result<(), OutOfMemory> {
//!         self.reserve(n, GFP_KERNEL).map_err(|_| OutOfMemory)
//!     }
//!     fn try_push(&mut self, v: T) -> Result<(), OutOfMemory> {
//!         self.push(v, GFP_KERNEL).map_err(|_| OutOfMemory)
//!     }
//!     fn pop(&mut self) -> Option<T> { KVVec::pop(self) }
//! }
//! struct KernelStorage;
//! impl Storage for KernelStorage { type Vec<T> = KVVec<T>; }
//! ```

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
