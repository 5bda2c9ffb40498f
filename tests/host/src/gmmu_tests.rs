// SPDX-License-Identifier: GPL-2.0

//! BAR1's page tables (`src/gmmu/`): the entries against the fields of NVIDIA's `dev_mmu.h`,
//! the layout's bounds, and the tables read back by the runner's independent walker
//! (`tests/vm/gmmu.py`), which shares no code with the encoder.

use crate::gmmu::bar1::{Bar1Layout, LayoutError, MAX_SIZE, MIN_SIZE};
use crate::gmmu::format::{bar1_block, page_dir_base, Format, BIG_PAGE};
use crate::hwref::MmuFormat;
use std::collections::HashSet;
use std::process::Command;

const MIB: u64 = 1 << 20;

fn v2() -> Format {
    Format::new(MmuFormat::Ver2).unwrap()
}

fn v3() -> Format {
    Format::new(MmuFormat::Ver3).unwrap()
}

#[test]
fn entries_hold_the_dev_mmu_fields() {
    assert_eq!(Format::new(MmuFormat::Ver1), None);
    // Ver2: aperture 1 at 2:1, table >> 12 at 32:8; big half: table >> 8 at 32:4.
    assert_eq!(v2().pde(0x2000), 0x202);
    assert_eq!(v2().dual_big(0x10_8100), 0x1_0812);
    // PTE: VALID, aperture 0 (video memory), page >> 12 at 32:8, read-only bit 6.
    assert_eq!(v2().pte(0x40_0000, false), 0x4_0001);
    assert_eq!(v2().pte(0x40_0000, true), 0x4_0041);
    // Ver3: addresses in place (51:12, big half 51:8); PCF 0x8 RW, 0xc RO at 7:3.
    assert_eq!(v3().pde(0x2000), 0x2002);
    assert_eq!(v3().dual_big(0x10_8100), 0x10_8102);
    assert_eq!(v3().pte(0x40_0000, false), 0x40_0041);
    assert_eq!(v3().pte(0x40_0000, true), 0x40_0061);
    // Instance block: target 0, volatile, Ver2 format, 64 KiB big pages, base >> 12 at 31:12.
    assert_eq!(page_dir_base(0x1_2345_6000), (0x2345_6c04, 1));
    assert_eq!(bar1_block(0x3ff0_0000), 0x8003_ff00);
}

#[test]
fn layouts_refuse_what_they_cannot_hold() {
    let need = Bar1Layout::bytes(v3(), 256 * MIB);
    assert_eq!(
        Bar1Layout::new(v3(), 96 * MIB, 0, 1 << 30),
        Err(LayoutError::BadSize(96 * MIB))
    );
    assert_eq!(
        Bar1Layout::new(v3(), MIN_SIZE / 2, 0, 1 << 30),
        Err(LayoutError::BadSize(MIN_SIZE / 2))
    );
    assert_eq!(
        Bar1Layout::new(v3(), MAX_SIZE * 2, 0, 1 << 30),
        Err(LayoutError::BadSize(MAX_SIZE * 2))
    );
    assert_eq!(
        Bar1Layout::new(v3(), 256 * MIB, 0x800, 1 << 30),
        Err(LayoutError::Misaligned(0x800))
    );
    assert_eq!(
        Bar1Layout::new(v3(), 256 * MIB, 0, need - 1),
        Err(LayoutError::TooSmall { need })
    );
    // The largest BAR's tables fit in one 2 MiB root chunk.
    for f in [v2(), v3()] {
        assert!(Bar1Layout::bytes(f, MAX_SIZE) <= 2 * MIB, "{f:?}");
    }
}

#[test]
fn every_entry_has_its_own_word_inside_the_region() {
    for (f, size) in [
        (v2(), MIN_SIZE),
        (v2(), 128 * MIB),
        (v3(), 1 << 30),
        (v3(), MAX_SIZE),
    ] {
        let base = 64 * MIB;
        let l = Bar1Layout::new(f, size, base, Bar1Layout::bytes(f, size)).unwrap();
        let mut words = HashSet::new();
        l.setup(|addr, v| {
            assert!(addr % 8 == 0 && addr >= base && addr + 8 <= base + l.span());
            assert_ne!(v, 0);
            assert!(words.insert(addr), "{addr:#x} written twice");
        });
        let mut va = 0;
        while va < size {
            let a = l.pte_addr(va).unwrap();
            assert!(a >= base && a + 8 <= base + l.span(), "{f:?} {va:#x}");
            assert!(words.insert(a), "{f:?}: PTE of {va:#x} at {a:#x} is taken");
            va += BIG_PAGE;
        }
        assert_eq!(l.pte_addr(size), None);
        assert_eq!(l.pte_addr(BIG_PAGE / 2), None);
    }
}

/// Writes an address space into a VRAM image, maps `pages` (VA, PA, read-only), and returns
/// what `tests/vm/gmmu.py` reads back as (VA, PA, size, read-only).
fn walked(f: Format, size: u64, pages: &[(u64, u64, bool)]) -> Vec<(u64, u64, u64, bool)> {
    let vram = 64 * MIB;
    let base = vram - 2 * MIB;
    let l = Bar1Layout::new(f, size, base, 2 * MIB).unwrap();
    let mut image = vec![0u8; vram as usize];
    let mut put = |addr: u64, v: u64| {
        let a = addr as usize;
        image[a..a + 8].copy_from_slice(&v.to_le_bytes());
    };
    l.setup(&mut put);
    for &(va, pa, ro) in pages {
        put(l.pte_addr(va).unwrap(), l.pte(pa, ro));
    }
    let dir = std::env::temp_dir().join(format!("nvrs-gmmu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("vram-v{}-{size}", f.version()));
    std::fs::write(&file, &image).unwrap();
    let walker = concat!(env!("CARGO_MANIFEST_DIR"), "/../vm/gmmu.py");
    let out = Command::new("python3")
        .arg(walker)
        .arg(&file)
        .arg(format!("{:#x}", l.instance_block()))
        .arg(f.version().to_string())
        .output()
        .expect("python3 runs the walker");
    std::fs::remove_file(&file).unwrap();
    assert!(
        out.status.success(),
        "walker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|ln| {
            let w: Vec<&str> = ln.split(' ').collect();
            (hex(w[0]), hex(w[1]), hex(w[2]), w[3] == "ro")
        })
        .collect()
}

#[test]
fn the_independent_walker_reads_what_was_mapped_and_nothing_else() {
    for (f, size) in [
        (v2(), 128 * MIB),
        (v3(), 256 * MIB),
        (v2(), 2 << 30),
        (v3(), MAX_SIZE),
    ] {
        // An empty space maps nothing.
        assert_eq!(walked(f, size, &[]), vec![], "{f:?} {size:#x}");
        let mut pages = vec![
            (0, 0x10_0000, false),
            (BIG_PAGE, 0x30_0000, true),
            (size - BIG_PAGE, 0x20_0000, false),
            (size / 2 + 3 * BIG_PAGE, 0x2_0000, false),
        ];
        if size > 512 * MIB {
            // Either side of a PDE1 boundary: two dual tables.
            pages.push((512 * MIB - BIG_PAGE, 0x40_0000, false));
            pages.push((512 * MIB, 0x41_0000, false));
        }
        let mut want: Vec<_> = pages
            .iter()
            .map(|&(va, pa, ro)| (va, pa, BIG_PAGE, ro))
            .collect();
        want.sort();
        assert_eq!(walked(f, size, &pages), want, "{f:?} {size:#x}");
    }
}

#[test]
fn slots_find_first_fit_runs_and_refuse_double_marks() {
    use crate::gmmu::slots::{find_free, mark, used, used_in, words};
    // A 256 MiB BAR1: 4096 slots of 64 KiB.
    let n = 4096;
    let mut map = vec![0u64; words(n)];
    assert_eq!(find_free(&map, n, 0, 0), None);
    assert_eq!(find_free(&map, n, n + 1, 0), None);
    assert_eq!(find_free(&map, n, 3, 0), Some(0));
    assert!(mark(&mut map, n, 0, 3, true));
    // Marking a mapped slot again, or clearing a free one, changes nothing.
    assert!(!mark(&mut map, n, 2, 2, true));
    assert!(!mark(&mut map, n, 3, 1, false));
    assert!(!mark(&mut map, n, n - 1, 2, true));
    assert!(!mark(&mut map, n, usize::MAX, 2, true));
    assert_eq!(used(&map, n), 3);
    assert_eq!(used_in(&map, 1, 4), 2);
    // Runs that cross word boundaries, and a hole too small for the request.
    assert!(mark(&mut map, n, 4, 120, true));
    assert_eq!(find_free(&map, n, 1, 0), Some(3));
    assert_eq!(find_free(&map, n, 2, 0), Some(124));
    assert!(mark(&mut map, n, 124, n - 124, true));
    // Full but for slot 3: one slot fits, two do not (BAR1 is exhausted: ENOMEM).
    assert_eq!(used(&map, n), n - 1);
    assert_eq!(find_free(&map, n, 1, 0), Some(3));
    assert_eq!(find_free(&map, n, 2, 0), None);
    assert!(mark(&mut map, n, 3, 1, true));
    assert_eq!(find_free(&map, n, 1, 0), None);
    assert!(mark(&mut map, n, 0, n, false));
    assert_eq!(used(&map, n), 0);
    assert_eq!(find_free(&map, n, n, 0), Some(0));
}

#[test]
fn slots_are_reused_only_once_bar1_went_round() {
    use crate::gmmu::slots::{find_free, mark, words};
    let n = 64;
    let mut map = vec![0u64; words(n)];
    // Take a run of 4, release it: the next search starts past it.
    let a = find_free(&map, n, 4, 0).unwrap();
    assert!(mark(&mut map, n, a, 4, true));
    assert!(mark(&mut map, n, a, 4, false));
    let b = find_free(&map, n, 4, a + 4).unwrap();
    assert_eq!(b, 4, "not the run just released");
    assert!(mark(&mut map, n, b, 4, true));
    // Past the end, or where no run fits after the cursor, it goes round to the first fit.
    assert_eq!(find_free(&map, n, 4, n), Some(0));
    assert!(mark(&mut map, n, 8, n - 8, true));
    assert_eq!(find_free(&map, n, 4, 8), Some(0));
    assert_eq!(find_free(&map, n, 5, 8), None);
    // Free: 0..4 and 8..10. From 9 nothing fits after the cursor; the first-fit search
    // finds room before it.
    assert!(mark(&mut map, n, 8, n - 8, false));
    assert!(mark(&mut map, n, 10, n - 10, true));
    assert_eq!(find_free(&map, n, 2, 8), Some(8));
    assert_eq!(find_free(&map, n, 2, 9), Some(0));
    assert_eq!(find_free(&map, n, 4, 9), Some(0));
    assert_eq!(find_free(&map, n, 6, 9), None);
}
