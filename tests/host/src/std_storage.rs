// SPDX-License-Identifier: GPL-2.0

//! The memory manager's [`Storage`] on the host: `std::vec::Vec`.
//!
//! Also used by the bench (`examples/pmm_bench.rs`), which includes this file by path.

use crate::pmm::{ChunkVec, OutOfMemory, Storage};

/// `std::vec::Vec` as the manager's metadata storage.
pub(crate) struct StdStorage;

impl<T> ChunkVec<T> for Vec<T> {
    fn new() -> Self {
        Vec::new()
    }

    fn try_reserve(&mut self, additional: usize) -> Result<(), OutOfMemory> {
        Vec::try_reserve(self, additional).map_err(|_| OutOfMemory)
    }

    fn try_push(&mut self, value: T) -> Result<(), OutOfMemory> {
        if self.len() == self.capacity() {
            Vec::try_reserve(self, 1).map_err(|_| OutOfMemory)?;
        }
        self.push(value);
        Ok(())
    }

    fn pop(&mut self) -> Option<T> {
        Vec::pop(self)
    }
}

impl Storage for StdStorage {
    type Vec<T> = Vec<T>;
}
