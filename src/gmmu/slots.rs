// SPDX-License-Identifier: GPL-2.0

//! BAR1's 64 KiB slots: one bit each, set while the slot is mapped, and next-fit room for a
//! run of them.
//!
//! The bits live in a slice the caller allocated when BAR1 was set up, so that mapping and
//! unmapping never allocate (they run under the BAR1 lock).

/// Bits per word.
const BITS: usize = 64;

/// Words a map of `slots` slots needs.
pub(crate) fn words(slots: usize) -> usize {
    slots.div_ceil(BITS)
}

fn is_set(map: &[u64], i: usize) -> bool {
    map[i / BITS] & (1 << (i % BITS)) != 0
}

/// The first run of `n` clear slots that starts at or after `from` among the first `slots`,
/// or, if there is none, the first run anywhere (next fit; `n` > 0). The caller moves `from`
/// past each run it takes, so that a run just released is reused only once BAR1 has gone
/// round: a peer that still holds an address of an ended pin most likely finds it unmapped
/// (reading all-ones) rather than mapping someone else's memory.
pub(crate) fn find_free(map: &[u64], slots: usize, n: usize, from: usize) -> Option<usize> {
    if n == 0 || n > slots || map.len() < words(slots) {
        return None;
    }
    let from = if from < slots { from } else { 0 };
    find_in(map, from, slots, n).or_else(|| find_in(map, 0, slots, n))
}

/// The first run of `n` clear slots inside `lo..hi`.
fn find_in(map: &[u64], lo: usize, hi: usize, n: usize) -> Option<usize> {
    let (mut start, mut i) = (lo, lo);
    while i < hi {
        // Whole words at a time where they are full.
        if i % BITS == 0 && map[i / BITS] == u64::MAX {
            i += BITS;
            start = i;
            continue;
        }
        if is_set(map, i) {
            start = i + 1;
        } else if i + 1 - start == n {
            return Some(start);
        }
        i += 1;
    }
    None
}

/// Sets (`mapped`) or clears slots `start..start + n`. Returns false, changing nothing, if the
/// range is not inside the map or a slot is not in the opposite state.
pub(crate) fn mark(map: &mut [u64], slots: usize, start: usize, n: usize, mapped: bool) -> bool {
    let Some(end) = start.checked_add(n) else {
        return false;
    };
    if end > slots || map.len() < words(slots) || (start..end).any(|i| is_set(map, i) == mapped) {
        return false;
    }
    for i in start..end {
        map[i / BITS] ^= 1 << (i % BITS);
    }
    true
}

/// Slots set among `start..start + n` (the range must lie inside the map).
pub(crate) fn used_in(map: &[u64], start: usize, n: usize) -> usize {
    (start..start + n).filter(|&i| is_set(map, i)).count()
}

/// Slots set among the first `slots` ([`mark`] never sets one past them).
pub(crate) fn used(map: &[u64], slots: usize) -> usize {
    map.iter()
        .take(words(slots))
        .map(|w| w.count_ones() as usize)
        .sum()
}
