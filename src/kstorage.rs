// SPDX-License-Identifier: GPL-2.0

//! The memory manager's metadata storage in the kernel: [`KVVec`], which falls back from
//! `kmalloc` to `vmalloc` for large arrays (a 1 TiB framebuffer has 524288 roots).

use kernel::{
    alloc::KVVec,
    prelude::*, //
};

use crate::pmm::{
    ChunkVec,
    OutOfMemory,
    Storage, //
};

/// [`Storage`] backed by [`KVVec`] with `GFP_KERNEL` (callers hold a mutex, never a spinlock).
pub(crate) struct KernelStorage;

impl Storage for KernelStorage {
    type Vec<T> = KVVec<T>;
}

impl<T> ChunkVec<T> for KVVec<T> {
    fn new() -> Self {
        KVVec::new()
    }

    fn try_reserve(&mut self, additional: usize) -> Result<(), OutOfMemory> {
        self.reserve(additional, GFP_KERNEL)
            .map_err(|_| OutOfMemory)
    }

    fn try_push(&mut self, value: T) -> Result<(), OutOfMemory> {
        self.push(value, GFP_KERNEL).map_err(|_| OutOfMemory)
    }

    fn pop(&mut self) -> Option<T> {
        KVVec::pop(self)
    }
}
