// SPDX-License-Identifier: GPL-2.0

//! Host tests of the pure logic.

use crate::aperture::{bar_regs, decode_bars, framebuffer_bar, BarKind};
use crate::emu_identity::{EmuError, EmuIdentity, MAGIC, SIZE};
use crate::hwref::ident::{
    boot0_for, boot42_for, identify, identify_by_device_id, IdentError, IdentSource, PmcBoot0,
    PmcBoot42, Revision,
};
use crate::hwref::{
    table_for_arch, Architecture, MmuFormat, P2P_PAGE_SIZE, ROOT_CHUNK_SIZE, SZ_128K, SZ_256G,
    SZ_4K, SZ_512M, SZ_64K, TABLES,
};

const A1: Revision = Revision {
    major: 0xa,
    minor: 1,
};
const H200_CONFIG: &[u8] = include_bytes!("../../data/h200/config-space.bin");

fn le16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

#[test]
fn every_table_entry_is_identified_from_both_registers() {
    let mut n = 0;
    for t in TABLES.iter() {
        for c in t.chipsets {
            let id = identify(PmcBoot0(0x1), boot42_for(c.id, A1)).unwrap();
            assert_eq!(id.chipset.id, c.id, "{}", c.name);
            assert!(std::ptr::eq(id.table, *t));
            assert_eq!(id.source, IdentSource::Boot42);
            let id0 = identify(boot0_for(c.id, A1), PmcBoot42(0)).unwrap();
            assert_eq!(id0.chipset.id, c.id, "{} via BOOT_0", c.name);
            assert_eq!(id0.source, IdentSource::Boot0);
            assert_eq!(id0.revision, Some(A1));
            n += 1;
        }
    }
    assert_eq!(n, 36, "chipsets in all tables");
}

#[test]
fn boot_register_fields_decode_as_documented() {
    // GH100 A1 as NVIDIA's driver reads it: architecture 0x18, implementation 0.
    let b42 = PmcBoot42(0x180a_1000);
    assert_eq!(b42.architecture(), 0x18);
    assert_eq!(b42.implementation(), 0);
    assert_eq!(b42.chip_id(), 0x180);
    assert_eq!((b42.major_revision(), b42.minor_revision()), (0xa, 1));
    assert_eq!(boot42_for(0x180, A1), b42);
    // BOOT_0 splits the architecture: bit 8 holds its sixth bit.
    let b0 = boot0_for(0x1b2, A1);
    assert_eq!(b0.architecture(), 0x1b);
    assert_eq!(b0.0 & (1 << 8), 0);
    assert_eq!(PmcBoot0(0x0100_0100).architecture(), 0x21);
    assert_eq!(
        Revision {
            major: 0xb,
            minor: 0
        }
        .to_string(),
        "B0"
    );
}

#[test]
fn malformed_register_values() {
    assert_eq!(
        identify(PmcBoot0(u32::MAX), PmcBoot42(u32::MAX)).err(),
        Some(IdentError::OffTheBus)
    );
    assert_eq!(
        identify(PmcBoot0(u32::MAX), PmcBoot42(0)).err(),
        Some(IdentError::OffTheBus)
    );
    assert_eq!(
        identify(PmcBoot0(0x1), PmcBoot42(u32::MAX)).err(),
        Some(IdentError::OffTheBus)
    );
    assert_eq!(
        identify(PmcBoot0(0), PmcBoot42(0)).err(),
        Some(IdentError::NoId)
    );
    // Kepler (0x0e/0x0f/0x10) and the AMODEL simulator (0x1f) have no table.
    for arch in [0x0eu16, 0x0f, 0x10, 0x15, 0x1f, 0x3f] {
        assert_eq!(
            identify(PmcBoot0(0), boot42_for(arch << 4, A1)).err(),
            Some(IdentError::UnknownArchitecture(arch as u8))
        );
    }
    // Known architecture, unknown implementation.
    assert_eq!(
        identify(PmcBoot0(0), boot42_for(0x181, A1)).err(),
        Some(IdentError::UnknownChipset(0x181))
    );
    assert_eq!(
        identify(PmcBoot0(0), PmcBoot42(0x1700_0000 | 0xfff))
            .unwrap()
            .chipset
            .name,
        "GA100"
    );
}

#[test]
fn device_id_fallback() {
    for (dev, chip, coherent) in [
        (0x2335u16, "GH100", false), // H200
        (0x2330, "GH100", false),    // H100 SXM5
        (0x2342, "GH100", true),     // GH200
        (0x20b0, "GA100", false),    // A100 SXM4
        (0x1db4, "GV100", false),    // V100 PCIe
        (0x1eb8, "TU104", false),    // T4
        (0x2684, "AD102", false),    // RTX 4090
        (0x2b85, "GB202", false),    // RTX 5090
        (0x2901, "GB100", false),    // B200
    ] {
        let (id, c) = identify_by_device_id(dev).unwrap();
        assert_eq!((id.chipset.name, c), (chip, coherent), "{dev:#x}");
        assert_eq!(id.source, IdentSource::DeviceId);
        assert_eq!(id.revision, None);
    }
    assert_eq!(
        identify_by_device_id(0x0000).err(),
        Some(IdentError::UnknownDeviceId(0))
    );
    assert_eq!(
        identify_by_device_id(0xffff).err(),
        Some(IdentError::UnknownDeviceId(0xffff))
    );
}

#[test]
fn device_id_ranges_do_not_overlap() {
    let mut all: Vec<_> = TABLES.iter().flat_map(|t| t.device_ids.iter()).collect();
    all.sort_by_key(|r| r.first);
    for w in all.windows(2) {
        assert!(w[0].last < w[1].first, "{:#x?} overlaps {:#x?}", w[0], w[1]);
    }
    for t in TABLES.iter() {
        for r in t.device_ids {
            assert!(r.first <= r.last);
            assert!(
                t.chipset(r.chip).is_some(),
                "{}: range names chip {:#x}",
                t.name,
                r.chip
            );
        }
    }
}

#[test]
fn tables_are_consistent() {
    let mut chip_ids = Vec::new();
    let mut prev_arch = 0;
    for t in TABLES.iter() {
        assert!(
            t.arch.code() > prev_arch,
            "tables sorted by architecture code"
        );
        prev_arch = t.arch.code();
        assert!(std::ptr::eq(table_for_arch(t.arch.code()).unwrap(), *t));
        // Sizes are powers of two by construction of the mask; check the contents.
        assert!(t.page_sizes.contains(SZ_4K));
        assert_eq!(t.pmm_chunk_sizes.largest(), Some(ROOT_CHUNK_SIZE));
        assert_eq!(t.pmm_chunk_sizes.smallest(), Some(SZ_4K));
        let sizes: Vec<u64> = t.pmm_chunk_sizes.iter().collect();
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        // Every chunk below the root is a page the GPU can map (the 2 MiB root is bookkeeping:
        // Maxwell has no 2 MiB page).
        for s in t.pmm_chunk_sizes.iter().filter(|&s| s < ROOT_CHUNK_SIZE) {
            assert!(s.is_power_of_two());
            assert!(
                t.page_sizes.contains(s),
                "{}: chunk {s:#x} is not a page size",
                t.name
            );
        }
        assert_eq!(t.p2p_granularity, P2P_PAGE_SIZE);
        assert_eq!(ROOT_CHUNK_SIZE % t.p2p_granularity, 0);
        assert!(matches!(t.va_bits, 40 | 49 | 57));
        assert!((3..=6).contains(&t.pcie_gen));
        assert!(!t.chipsets.is_empty());
        for c in t.chipsets {
            assert_eq!(c.arch_code(), t.arch.code(), "{}", c.name);
            assert!(!chip_ids.contains(&c.id), "chip {:#x} in two tables", c.id);
            chip_ids.push(c.id);
            if let Some(l) = c.nvlink {
                assert!((1..=5).contains(&l.version));
                assert!(l.links >= 1 && l.links <= 18);
            }
        }
    }
    assert_eq!(TABLES.len(), 10);
}

#[test]
fn page_sizes_per_generation() {
    let t = |a: Architecture| TABLES.iter().find(|t| t.arch == a).unwrap();
    assert!(t(Architecture::MaxwellGm20x).page_sizes.contains(SZ_128K));
    assert!(t(Architecture::MaxwellGm20x)
        .pmm_chunk_sizes
        .contains(SZ_128K));
    assert!(!t(Architecture::Pascal).page_sizes.contains(SZ_128K));
    assert!(!t(Architecture::Turing).page_sizes.contains(SZ_512M));
    assert!(t(Architecture::Ampere).page_sizes.contains(SZ_512M));
    assert!(t(Architecture::Hopper).pmm_chunk_sizes.contains(SZ_64K));
    assert!(t(Architecture::BlackwellGb10x).page_sizes.contains(SZ_256G));
    assert_eq!(t(Architecture::MaxwellGm10x).mmu, MmuFormat::Ver1);
    assert_eq!(t(Architecture::Hopper).mmu, MmuFormat::Ver3);
    assert_eq!(t(Architecture::Hopper).va_bits, 57);
}

#[test]
fn real_h200_config_space() {
    let c = H200_CONFIG;
    assert_eq!(c.len(), 4096);
    assert_eq!(le16(c, 0x00), 0x10de, "vendor");
    let device = le16(c, 0x02);
    assert_eq!(device, 0x2335);
    assert_eq!(c[0x08], 0xa1, "revision");
    assert_eq!(
        (c[0x0b], c[0x0a], c[0x09]),
        (0x03, 0x02, 0x00),
        "class 3D controller"
    );
    // BAR layout: three 64-bit prefetchable BARs at slots 0, 2 and 4.
    let kinds = decode_bars(&bar_regs(c).unwrap());
    let p = BarKind::Mem64 { prefetch: true };
    assert_eq!(
        kinds,
        [p, BarKind::Upper, p, BarKind::Upper, p, BarKind::Upper]
    );
    // Sizes as the host assigned them (tests/data/h200/README.md).
    let lens = [16 << 20, 0, 256 << 30, 0, 32 << 20, 0];
    assert_eq!(framebuffer_bar(&kinds, &lens), Some(2));
    let (id, coherent) = identify_by_device_id(device).unwrap();
    assert_eq!(id.chipset.name, "GH100");
    assert_eq!(id.table.arch, Architecture::Hopper);
    assert!(!coherent);
    // The table agrees with what the host reports: Gen5, NVLink 4 with 18 links.
    assert_eq!(id.table.pcie_gen, 5);
    assert_eq!(id.chipset.nvlink.unwrap().links, 18);
}

#[test]
fn aperture_rule_on_other_layouts() {
    // Older GPU: 32-bit register BAR0, 64-bit FB at 1, 64-bit IMEM at 3, I/O BAR at 5.
    let regs = [0x0000_0000, 0x0000_000c, 0, 0x0000_000c, 0, 0x0000_0001];
    let kinds = decode_bars(&regs);
    assert_eq!(kinds[0], BarKind::Unused);
    let regs = [0xfd00_0000, 0x0000_000c, 0, 0x0000_000c, 0, 0x0000_e001];
    let kinds = decode_bars(&regs);
    assert_eq!(kinds[0], BarKind::Mem32 { prefetch: false });
    assert_eq!(kinds[5], BarKind::Io);
    assert_eq!(
        framebuffer_bar(&kinds, &[16 << 20, 256 << 20, 0, 32 << 20, 0, 128]),
        Some(1)
    );
    // ivshmem-plain: 256-byte register BAR0, shared memory as 64-bit BAR2.
    let kinds = decode_bars(&[0xfe00_0000, 0, 0x0000_000c, 0, 0, 0]);
    assert_eq!(
        framebuffer_bar(&kinds, &[256, 0, 256 << 20, 0, 0, 0]),
        Some(2)
    );
    // A single memory BAR has no aperture.
    assert_eq!(framebuffer_bar(&kinds, &[256, 0, 0, 0, 0, 0]), None);
}

fn emu_block(fb_offset: u64, fb_size: u64) -> [u8; SIZE] {
    let mut b = [0u8; SIZE];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..6].copy_from_slice(&1u16.to_le_bytes());
    b[6..8].copy_from_slice(&64u16.to_le_bytes());
    b[0x08..0x0c].copy_from_slice(&0x1700_00a1u32.to_le_bytes());
    b[0x0c..0x10].copy_from_slice(&0x170a_1000u32.to_le_bytes());
    b[0x10..0x12].copy_from_slice(&0x20b0u16.to_le_bytes());
    b[0x12] = 1;
    b[0x13] = 12;
    b[0x14..0x18].copy_from_slice(&1u32.to_le_bytes());
    b[0x18..0x20].copy_from_slice(&fb_offset.to_le_bytes());
    b[0x20..0x28].copy_from_slice(&fb_size.to_le_bytes());
    b[0x28..0x38].copy_from_slice(&[7; 16]);
    b
}

#[test]
fn emu_identity_parses_and_identifies() {
    let m = 1u64 << 20;
    let id = EmuIdentity::parse(&emu_block(2 * m, 254 * m), 256 * m).unwrap();
    assert_eq!(id.pci_device_id, 0x20b0);
    assert_eq!(
        (id.gpu_index, id.nvlinks_per_peer, id.nvlink_peers),
        (1, 12, 1)
    );
    assert_eq!(id.uuid, [7; 16]);
    assert_eq!(identify(id.boot0, id.boot42).unwrap().chipset.name, "GA100");
}

#[test]
fn emu_identity_rejects_bad_blocks() {
    let m = 1u64 << 20;
    let good = emu_block(2 * m, 254 * m);
    let bar = 256 * m;
    let mut b = good;
    b[3] = 0;
    assert!(matches!(
        EmuIdentity::parse(&b, bar),
        Err(EmuError::BadMagic(_))
    ));
    let mut b = good;
    b[4] = 2;
    assert_eq!(
        EmuIdentity::parse(&b, bar).err(),
        Some(EmuError::BadVersion(2))
    );
    let mut b = good;
    b[6] = 32;
    assert_eq!(
        EmuIdentity::parse(&b, bar).err(),
        Some(EmuError::BadSize(32))
    );
    assert_eq!(
        EmuIdentity::parse(&emu_block(0, m), bar).err(),
        Some(EmuError::BadFbOffset(0))
    );
    assert_eq!(
        EmuIdentity::parse(&emu_block(m, m), bar).err(),
        Some(EmuError::BadFbOffset(m))
    );
    assert_eq!(
        EmuIdentity::parse(&emu_block(2 * m, 0), bar).err(),
        Some(EmuError::BadFbSize(0))
    );
    assert_eq!(
        EmuIdentity::parse(&emu_block(2 * m, 255 * m), bar).err(),
        Some(EmuError::BadFbSize(255 * m))
    );
    assert_eq!(
        EmuIdentity::parse(&emu_block(2 * m, u64::MAX - m), bar).err(),
        Some(EmuError::BadFbSize(u64::MAX - m))
    );
    let mut b = good;
    b[0x12] = 32;
    assert_eq!(
        EmuIdentity::parse(&b, bar).err(),
        Some(EmuError::BadIndex(32))
    );
    let mut b = good;
    b[0x3f] = 1;
    assert_eq!(EmuIdentity::parse(&b, bar).err(), Some(EmuError::Reserved));
}

/// Installing nvrs never takes a GPU: a real NVIDIA GPU is bound only through its
/// `driver_override` or the `bind_nvidia` parameter; ivshmem only with `emulated`.
#[test]
fn binding_is_opt_in() {
    use crate::binding::{Kind, Policy};
    let default = Policy::default();
    assert!(
        !default.binds(Kind::Nvidia, false),
        "a GPU bound by default"
    );
    assert!(
        default.binds(Kind::Nvidia, true),
        "driver_override=nvrs must bind"
    );
    assert!(!default.binds(Kind::Ivshmem, false));
    assert!(
        !default.binds(Kind::Ivshmem, true),
        "ivshmem needs emulated=1"
    );
    let all = Policy {
        bind_nvidia: true,
        emulated: false,
    };
    assert!(all.binds(Kind::Nvidia, false));
    assert!(!all.binds(Kind::Ivshmem, false));
    let emu = Policy {
        bind_nvidia: false,
        emulated: true,
    };
    assert!(emu.binds(Kind::Ivshmem, false));
    assert!(!emu.binds(Kind::Nvidia, false));
}
