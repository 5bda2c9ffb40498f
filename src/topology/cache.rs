// SPDX-License-Identifier: GPL-2.0

//! The table of remembered P2PDMA distances, and the rule that keeps it honest across hotplug.
//!
//! A distance belongs to the PCI hierarchy as it was when the kernel computed it. When a function
//! is added or removed anywhere on the PCI bus (hot-unplug, `remove` and `rescan` in sysfs, a
//! switch re-enumerated with other bus numbers), every remembered pair is forgotten
//! ([`DistanceCache::invalidate`]): the routing id a pair is keyed by may now name another
//! function, or the same function behind other bridges, and a function that is gone must not keep
//! an answer.
//!
//! The kernel is asked with the table's lock released, so an invalidation can happen between a
//! miss and the store of its answer. Each miss therefore carries the table's generation
//! ([`Lookup::Miss`]), every invalidation advances it, and [`DistanceCache::store`] drops an answer
//! whose generation is no longer current: it may describe a hierarchy that has changed since.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

/// Pairs remembered.
pub(crate) const SLOTS: usize = 16;

/// One remembered pair.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Entry {
    /// The GPU's routing id.
    pub(crate) provider: u64,
    /// The peer's routing id.
    pub(crate) client: u64,
    /// The distance (negative: refused).
    pub(crate) distance: i32,
}

/// What a lookup found.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Lookup {
    /// The remembered distance.
    Hit(i32),
    /// Not remembered; an answer may be stored with this generation.
    Miss(u64),
}

/// How the table has been used, for `debugfs/nvrs/topology`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Stats {
    /// Lookups answered from the table.
    pub(crate) hits: u64,
    /// Lookups that asked the kernel.
    pub(crate) misses: u64,
    /// Times the table was emptied because the PCI hierarchy changed.
    pub(crate) invalidations: u64,
    /// Answers not stored because an invalidation happened while the kernel was asked.
    pub(crate) dropped: u64,
    /// The current generation (the number of invalidations, wrapping).
    pub(crate) generation: u64,
    /// Pairs remembered now.
    pub(crate) entries: usize,
}

/// The remembered pairs, replaced oldest first.
pub(crate) struct DistanceCache {
    entries: [Option<Entry>; SLOTS],
    next: usize,
    stats: Stats,
}

impl DistanceCache {
    /// An empty table, generation 0.
    pub(crate) const fn new() -> Self {
        Self {
            entries: [None; SLOTS],
            next: 0,
            stats: Stats {
                hits: 0,
                misses: 0,
                invalidations: 0,
                dropped: 0,
                generation: 0,
                entries: 0,
            },
        }
    }

    /// Looks the pair up, counting a hit or a miss.
    pub(crate) fn lookup(&mut self, provider: u64, client: u64) -> Lookup {
        let known = self
            .entries
            .iter()
            .flatten()
            .find(|e| e.provider == provider && e.client == client)
            .map(|e| e.distance);
        match known {
            Some(d) => {
                self.stats.hits = self.stats.hits.wrapping_add(1);
                Lookup::Hit(d)
            }
            None => {
                self.stats.misses = self.stats.misses.wrapping_add(1);
                Lookup::Miss(self.stats.generation)
            }
        }
    }

    /// Remembers the kernel's answer for a pair that missed with `generation`, unless the table
    /// was invalidated since (the answer is then dropped and counted). Returns whether it was
    /// stored.
    pub(crate) fn store(&mut self, generation: u64, entry: Entry) -> bool {
        if generation != self.stats.generation {
            self.stats.dropped = self.stats.dropped.wrapping_add(1);
            return false;
        }
        // Two lookups of one pair may both miss; the second answer replaces the first.
        let i = self
            .entries
            .iter()
            .position(|e| {
                e.is_some_and(|e| e.provider == entry.provider && e.client == entry.client)
            })
            .unwrap_or(self.next);
        if let Some(slot) = self.entries.get_mut(i) {
            *slot = Some(entry);
        }
        if i == self.next {
            self.next = (i + 1) % SLOTS;
        }
        true
    }

    /// Forgets every pair and advances the generation: the PCI hierarchy changed.
    pub(crate) fn invalidate(&mut self) {
        self.entries = [None; SLOTS];
        self.next = 0;
        self.stats.generation = self.stats.generation.wrapping_add(1);
        self.stats.invalidations = self.stats.invalidations.wrapping_add(1);
    }

    /// The counters and the number of pairs remembered.
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            entries: self.entries.iter().flatten().count(),
            ..self.stats
        }
    }

    /// The pairs remembered now.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().flatten()
    }
}
