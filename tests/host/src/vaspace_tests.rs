// SPDX-License-Identifier: GPL-2.0

//! Host tests of GPU VA ranges.

use crate::vaspace::range::{check_p2p_range, RangeError, Span, VaAllocator, VA_BASE, VA_LIMIT};

const K64: u64 = 64 << 10;
const M2: u64 = 2 << 20;

#[test]
fn p2p_ranges() {
    assert_eq!(check_p2p_range(VA_BASE, K64).unwrap().len(), K64);
    assert_eq!(
        check_p2p_range(VA_BASE, 0),
        Err(RangeError::Invalid),
        "length 0"
    );
    assert_eq!(
        check_p2p_range(VA_BASE + 4096, K64),
        Err(RangeError::Invalid),
        "unaligned VA"
    );
    assert_eq!(
        check_p2p_range(VA_BASE, K64 + 4096),
        Err(RangeError::Invalid),
        "unaligned length"
    );
    let top = u64::MAX - (K64 - 1); // 64 KiB aligned
    assert_eq!(
        check_p2p_range(top, 2 * K64),
        Err(RangeError::Invalid),
        "overflow"
    );
    assert_eq!(
        check_p2p_range(top, K64),
        Err(RangeError::Invalid),
        "end not representable"
    );
    assert_eq!(check_p2p_range(top - K64, K64).unwrap().end(), top);
}

#[test]
fn spans_contain() {
    let a = Span::new(VA_BASE, 4 * K64).unwrap();
    assert!(a.contains(&Span::new(VA_BASE + K64, 2 * K64).unwrap()));
    assert!(a.contains(&a));
    assert!(
        !a.contains(&Span::new(VA_BASE + 3 * K64, 2 * K64).unwrap()),
        "runs past the end"
    );
    assert!(
        !a.contains(&Span::new(VA_BASE - K64, 2 * K64).unwrap()),
        "starts before"
    );
    assert!(Span::new(1, 0).is_none());
    assert!(Span::new(u64::MAX, 2).is_none());
}

#[test]
fn va_allocator_never_reuses_and_aligns() {
    let mut va = VaAllocator::default();
    let a = va.alloc(K64).unwrap();
    let b = va.alloc(3 * M2 + K64).unwrap();
    let c = va.alloc(K64).unwrap();
    let d = va.alloc(K64).unwrap();
    assert_eq!(a.start(), VA_BASE);
    assert_eq!(b.start(), VA_BASE + M2, "2 MiB and larger: 2 MiB aligned");
    assert_eq!(
        c.start(),
        VA_BASE + 4 * M2 + K64,
        "smaller: packed at 64 KiB"
    );
    assert_eq!(d.start(), c.end());
    assert!(a.end() <= b.start() && b.end() <= c.start());
    assert_eq!(va.alloc(0), Err(RangeError::Invalid));
    assert_eq!(va.alloc(4096), Err(RangeError::Invalid));
    assert_eq!(va.alloc(VA_LIMIT), Err(RangeError::Exhausted));
    // The failed requests consumed nothing.
    assert_eq!(va.alloc(K64).unwrap().start(), d.end());
}

#[test]
fn layout_locates_in_constant_time() {
    use crate::vaspace::layout::Layout;
    // 1 GiB + 192 KiB: 512 roots and three 64 KiB pieces.
    let l = Layout {
        bulk: 512,
        bulk_len: M2,
        tail: 3,
    };
    assert_eq!(l.len(), (1 << 30) + 3 * K64);
    assert_eq!(l.pieces(), 515);
    assert_eq!(l.locate(0), Some((0, 0)));
    assert_eq!(l.locate(M2 + 5), Some((1, 5)));
    assert_eq!(l.locate(1 << 30), Some((512, 0)));
    assert_eq!(l.locate((1 << 30) + 2 * K64 + 7), Some((514, 7)));
    assert_eq!(l.locate(l.len()), None);
    assert_eq!(l.pieces_in(M2 - K64, 2 * K64), 0..2);
    assert_eq!(l.pieces_in(0, 0), 0..0);
    assert_eq!(l.pieces_in(l.len() - K64, K64), 514..515);
    assert_eq!(
        l.pieces_in(l.len() - K64, 2 * K64),
        0..0,
        "runs past the end"
    );
    assert_eq!(l.pieces_in(u64::MAX, 2), 0..0, "overflow");
    // A contiguous run is one piece.
    let c = Layout {
        bulk: 1,
        bulk_len: 8 * M2,
        tail: 0,
    };
    assert_eq!(c.locate(8 * M2 - 1), Some((0, 8 * M2 - 1)));
    assert_eq!(c.pieces_in(M2, 4 * M2), 0..1);
}
