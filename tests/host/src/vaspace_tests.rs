// SPDX-License-Identifier: GPL-2.0

//! Host tests of GPU VA ranges.

use crate::vaspace::range::{check_p2p_range, RangeError, Span, VaAllocator, VA_BASE, VA_LIMIT};
use crate::vaspace::LiveSpans;

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

fn new_va() -> VaAllocator<LiveSpans> {
    VaAllocator::new(LiveSpans::default())
}

#[test]
fn va_allocator_aligns_and_packs() {
    let mut va = new_va();
    let a = va.alloc(K64, ()).unwrap();
    let b = va.alloc(3 * M2 + K64, ()).unwrap();
    let c = va.alloc(K64, ()).unwrap();
    let d = va.alloc(K64, ()).unwrap();
    assert_eq!(a.start(), VA_BASE);
    assert_eq!(b.start(), VA_BASE + M2, "2 MiB and larger: 2 MiB aligned");
    assert_eq!(
        c.start(),
        VA_BASE + 4 * M2 + K64,
        "smaller: packed at 64 KiB"
    );
    assert_eq!(d.start(), c.end());
    assert!(a.end() <= b.start() && b.end() <= c.start());
    assert_eq!(va.alloc(0, ()), Err(RangeError::Invalid));
    assert_eq!(va.alloc(4096, ()), Err(RangeError::Invalid));
    assert_eq!(va.alloc(VA_LIMIT, ()), Err(RangeError::Exhausted));
    // The failed requests consumed nothing.
    assert_eq!(va.alloc(K64, ()).unwrap().start(), d.end());
}

#[test]
fn va_allocator_reuses_next_fit() {
    let mut va = new_va();
    va.set_size(8 * M2);
    let a = va.alloc(M2, ()).unwrap();
    let b = va.alloc(M2, ()).unwrap();
    va.free(a.start()).unwrap();
    assert_eq!(va.free(a.start()), Err(RangeError::Invalid), "double free");
    // Next-fit: the freed range is not handed out again before the space wraps.
    let c = va.alloc(M2, ()).unwrap();
    assert_eq!(c.start(), b.end());
    let rest: Vec<_> = (0..5).map(|_| va.alloc(M2, ()).unwrap()).collect();
    assert_eq!(rest.last().unwrap().end(), VA_BASE + 8 * M2);
    assert_eq!(va.wraps(), 0);
    // Now it wraps to the only free range.
    assert_eq!(va.alloc(M2, ()).unwrap().start(), a.start());
    assert_eq!(va.wraps(), 1);
    assert_eq!(va.alloc(K64, ()), Err(RangeError::Exhausted));
}

/// GPU removal and a process's exit free allocations in creation order (lowest VA first); GPU
/// removal may also go from the newest. Either way every range goes, and the whole space is
/// one gap again.
#[test]
fn va_allocator_frees_in_creation_and_reverse_order() {
    for reverse in [false, true] {
        let mut va = new_va();
        va.set_size(10_000 * K64);
        let mut spans: Vec<Span> = (0..10_000).map(|_| va.alloc(K64, ()).unwrap()).collect();
        assert_eq!(va.alloc(K64, ()), Err(RangeError::Exhausted), "full");
        if reverse {
            spans.reverse();
        }
        for (i, s) in spans.iter().enumerate() {
            va.free(s.start()).unwrap();
            assert_eq!(va.live(), spans.len() - i - 1);
        }
        assert_eq!(va.free(spans[0].start()), Err(RangeError::Invalid));
        let all = va.alloc(10_000 * K64, ()).unwrap();
        assert_eq!(all.start(), VA_BASE, "reverse {reverse}: one gap again");
    }
}

/// The defect this allocator fixes: a bump allocator over 2^47 bytes ran out after about 930
/// ALLOC/FREE cycles of a whole H200 (141 GiB), for every process, until nvrs was reloaded.
#[test]
fn va_allocator_alloc_free_loop_of_an_h200_never_runs_out() {
    const H200: u64 = 141 << 30;
    let mut va = new_va();
    let keep = va.alloc(K64, ()).unwrap();
    for i in 0..10_000 {
        let s = va
            .alloc(H200, ())
            .unwrap_or_else(|e| panic!("iteration {i}: {e:?}"));
        assert!(s.start() >= keep.end() || s.end() <= keep.start());
        va.free(s.start()).unwrap();
    }
    assert!(va.wraps() > 0);
    assert_eq!(va.live(), 1);
}

/// Live ranges never overlap, however allocations and frees interleave, and the space is
/// usable to the last aligned gap.
#[test]
fn va_allocator_random_never_overlaps() {
    let mut va = new_va();
    va.set_size(64 * M2);
    let mut live: Vec<Span> = Vec::new();
    let mut seed = 0x1234_5678u64;
    for _ in 0..20_000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = seed >> 33;
        if r % 3 == 0 && !live.is_empty() {
            let s = live.swap_remove((r as usize / 3) % live.len());
            va.free(s.start()).unwrap();
            continue;
        }
        let len = if r % 2 == 0 {
            (1 + r % 4) * M2
        } else {
            (1 + r % 16) * K64
        };
        match va.alloc(len, ()) {
            Ok(s) => {
                assert!(s.end() <= VA_BASE + 64 * M2);
                assert!(live
                    .iter()
                    .all(|o| s.end() <= o.start() || o.end() <= s.start()));
                live.push(s);
            }
            Err(RangeError::Exhausted) => {
                // Then no aligned gap of that size exists anywhere.
                let mut sorted = live.clone();
                sorted.sort_by_key(|s| s.start());
                let align = if len >= M2 { M2 } else { K64 };
                let mut at = VA_BASE;
                for s in sorted
                    .iter()
                    .chain(std::iter::once(&Span::new(VA_BASE + 64 * M2, 1).unwrap()))
                {
                    let start = at.next_multiple_of(align);
                    assert!(
                        start + len > s.start(),
                        "a gap of {len:#x} at {start:#x} was missed"
                    );
                    at = s.end();
                }
            }
            Err(e) => panic!("{e:?}"),
        }
    }
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
    // Every piece starts where `locate` says it does, and ends where the next starts.
    for i in [0, 1, 511, 512, 514] {
        assert_eq!(l.locate(l.offset_of(i)), Some((i, 0)));
        assert_eq!(l.offset_of(i) + l.piece_len(i), l.offset_of(i + 1));
    }
    assert_eq!(l.piece_len(0), M2);
    assert_eq!(l.piece_len(512), K64);
    assert_eq!(l.piece_len(515), 0, "past the last piece");
    // A contiguous run is one piece.
    let c = Layout {
        bulk: 1,
        bulk_len: 8 * M2,
        tail: 0,
    };
    assert_eq!(c.locate(8 * M2 - 1), Some((0, 8 * M2 - 1)));
    assert_eq!(c.pieces_in(M2, 4 * M2), 0..1);
}
