// SPDX-License-Identifier: GPL-2.0

//! Host tests of GPU VA ranges.

use crate::vaspace::range::{check_p2p_range, RangeError, Span, VaAllocator, VA_BASE, VA_LIMIT};

const K64: u64 = 64 << 10;
const M2: u64 = 2 << 20;

#[test]
fn p2p_ranges() {
    assert_eq!(check_p2p_range(VA_BASE, K64).unwrap().len(), K64);
    assert_eq!(check_p2p_range(VA_BASE, 0), Err(RangeError::Invalid), "length 0");
    assert_eq!(check_p2p_range(VA_BASE + 4096, K64), Err(RangeError::Invalid), "unaligned VA");
    assert_eq!(check_p2p_range(VA_BASE, K64 + 4096), Err(RangeError::Invalid), "unaligned length");
    let top = u64::MAX - (K64 - 1); // 64 KiB aligned
    assert_eq!(check_p2p_range(top, 2 * K64), Err(RangeError::Invalid), "overflow");
    assert_eq!(check_p2p_range(top, K64), Err(RangeError::Invalid), "end not representable");
    assert_eq!(check_p2p_range(top - K64, K64).unwrap().end(), top);
}

#[test]
fn spans_contain() {
    let a = Span::new(VA_BASE, 4 * K64).unwrap();
    assert!(a.contains(&Span::new(VA_BASE + K64, 2 * K64).unwrap()));
    assert!(a.contains(&a));
    assert!(!a.contains(&Span::new(VA_BASE + 3 * K64, 2 * K64).unwrap()), "runs past the end");
    assert!(!a.contains(&Span::new(VA_BASE - K64, 2 * K64).unwrap()), "starts before");
    assert!(Span::new(1, 0).is_none());
    assert!(Span::new(u64::MAX, 2).is_none());
}

#[test]
fn va_allocator_never_reuses_and_aligns() {
    let mut va = VaAllocator::default();
    let a = va.alloc(K64).unwrap();
    let b = va.alloc(3 * M2 + K64).unwrap();
    let c = va.alloc(K64).unwrap();
    assert_eq!(a.start(), VA_BASE);
    assert_eq!(b.start(), VA_BASE + M2);
    assert_eq!(c.start(), VA_BASE + 5 * M2);
    assert!(a.end() <= b.start() && b.end() <= c.start());
    assert_eq!(va.alloc(0), Err(RangeError::Invalid));
    assert_eq!(va.alloc(4096), Err(RangeError::Invalid));
    assert_eq!(va.alloc(VA_LIMIT), Err(RangeError::Exhausted));
    // The failed requests consumed nothing.
    assert_eq!(va.alloc(K64).unwrap().start(), VA_BASE + 6 * M2);
}
