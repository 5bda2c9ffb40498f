// SPDX-License-Identifier: GPL-2.0

//! The pure part of `src/vaspace/`.

#[path = "../../../src/vaspace/layout.rs"]
pub(crate) mod layout;
#[path = "../../../src/vaspace/range.rs"]
pub(crate) mod range;

use range::{RangeError, Span, SpanList};

/// The host's list of live VA ranges (the kernel uses a `KVVec`).
impl SpanList for Vec<Span> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn get(&self, i: usize) -> Option<Span> {
        <[Span]>::get(self, i).copied()
    }

    fn insert(&mut self, i: usize, s: Span) -> Result<(), RangeError> {
        Vec::insert(self, i, s);
        Ok(())
    }

    fn remove(&mut self, i: usize) -> Option<Span> {
        (i < Vec::len(self)).then(|| Vec::remove(self, i))
    }
}
