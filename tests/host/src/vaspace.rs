// SPDX-License-Identifier: GPL-2.0

//! The pure part of `src/vaspace/`.

#[path = "../../../src/vaspace/layout.rs"]
pub(crate) mod layout;
#[path = "../../../src/vaspace/range.rs"]
pub(crate) mod range;

use std::collections::BTreeMap;

use range::{Span, SpanSet};

/// The host's tree of live VA ranges, start → length (the kernel uses an `RBTree`). A range
/// needs no memory set aside: a slot is `()`.
#[derive(Debug, Default)]
pub(crate) struct LiveSpans(BTreeMap<u64, u64>);

impl SpanSet for LiveSpans {
    type Slot = ();

    fn first_from(&self, at: u64) -> Option<Span> {
        let (s, l) = self.0.range(at..).next()?;
        Span::new(*s, *l)
    }

    fn last_below(&self, at: u64) -> Option<Span> {
        let (s, l) = self.0.range(..at).next_back()?;
        Span::new(*s, *l)
    }

    fn insert(&mut self, _slot: (), s: Span) {
        let old = self.0.insert(s.start(), s.len());
        assert!(old.is_none(), "range {s:?} inserted twice");
    }

    fn remove(&mut self, start: u64) -> Option<()> {
        self.0.remove(&start).map(|_| ())
    }
}
