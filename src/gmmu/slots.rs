// SPDX-License-Identifier: GPL-2.0

//! BAR1's 64 KiB slots: one bit each, set while the slot is mapped, and first-fit room for a
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

/// The first run of `n` clear slots among the first `slots`, if any (`n` > 0).
pub(crate) fn find_free(map: &[u64], slots: usize, n: usize) -> Option<usize> {
    if n == 0 || n > slots || map.len() < words(slots) {
        return None;
    }
    let (mut start, mut i) = (0, 0);
    while i < slots {
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
