// SPDX-License-Identifier: GPL-2.0

//! Host tests of the `nvidia_p2p` ABI (`src/p2p/abi.rs` against `include/nv-p2p.h`).
//!
//! Besides checking the constants and version helpers, these tests compile a small C program
//! with the host C compiler (`$CC`, default `gcc`; see `c_check.rs`) against `include/nv-p2p.h`
//! and compare what it reports (sizes, alignments and offsets of every structure and field,
//! every constant, the version macros evaluated on a grid of version words) with the Rust side.
//! The C program also checks at compile time that every exported prototype has exactly
//! NVIDIA's type.

use crate::c_check::{self, layout, Check};
use crate::p2p::abi::*;
use core::mem::size_of;
use std::path::PathBuf;
use std::sync::OnceLock;

#[test]
fn constants_have_nvidia_values() {
    assert_eq!(MAJOR_VERSION_MASK, 0xffff_0000);
    assert_eq!(MINOR_VERSION_MASK, 0x0000_ffff);
    assert_eq!(PARAMS_VERSION, 0x0001_0001);
    assert_eq!(PAGE_TABLE_VERSION, 0x0002_0000);
    assert_eq!(DMA_MAPPING_VERSION, 0x0002_0003);
    assert_eq!(RSYNC_DRIVER_VERSION, 0x0001_0001);
    assert_eq!(RSYNC_REG_INFO_VERSION, 0x0002_0001);
    assert_eq!((FLAGS_DEFAULT, FLAGS_FORCE_BAR1_MAPPING), (0, 1));
    assert_eq!(PAGE_TABLE_FLAGS_CPU_CACHEABLE, 1);
    assert_eq!(GPU_UUID_LEN, 16);
    assert_eq!(
        (ARCHITECTURE_TESLA, ARCHITECTURE_FERMI, ARCHITECTURE_CURRENT),
        (0, 1, 1)
    );
    assert_eq!(
        (
            PARAMS_ADDRESS_INDEX_GPU,
            PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE,
            PARAMS_ADDRESS_INDEX_MAX
        ),
        (0, 1, 1)
    );
    assert_eq!(
        (
            PAGE_SIZE_4KB,
            PAGE_SIZE_64KB,
            PAGE_SIZE_128KB,
            PAGE_SIZE_COUNT
        ),
        (0, 1, 2, 3)
    );
}

#[test]
fn page_size_types_in_bytes() {
    assert_eq!(page_size_bytes(PAGE_SIZE_4KB), Some(4096));
    assert_eq!(page_size_bytes(PAGE_SIZE_64KB), Some(65536));
    assert_eq!(page_size_bytes(PAGE_SIZE_128KB), Some(131072));
    assert_eq!(page_size_bytes(PAGE_SIZE_COUNT), None);
    assert_eq!(page_size_bytes(u32::MAX), None);
}

#[test]
fn version_words_split_into_major_and_minor() {
    assert_eq!(major_version(0x0002_0003), 2);
    assert_eq!(minor_version(0x0002_0003), 3);
    assert_eq!(major_version(0xffff_0000), 0xffff);
    assert_eq!(minor_version(0xffff_0000), 0);
    assert!(major_version_matches(0x0002_ffff, 0x0002_0000));
    assert!(!major_version_matches(0x0001_0002, 0x0002_0000));
}

#[test]
fn version_compatibility_rules() {
    // What nvrs stamps is compatible with what consumers built against this header expect.
    assert!(page_table_version_compatible(PAGE_TABLE_VERSION));
    assert!(dma_mapping_version_compatible(DMA_MAPPING_VERSION));
    assert!(rsync_driver_version_compatible(RSYNC_DRIVER_VERSION));
    assert!(rsync_reg_info_version_compatible(RSYNC_REG_INFO_VERSION));
    // A later minor version is a compatible addition.
    assert!(page_table_version_compatible(0x0002_0001));
    assert!(dma_mapping_version_compatible(0x0002_0004));
    // An earlier minor version lacks fields the consumer may use.
    assert!(!dma_mapping_version_compatible(0x0002_0002));
    assert!(!rsync_reg_info_version_compatible(0x0002_0000));
    // Another major version is a breaking change, either way: a 1.x table (no flags field) is
    // refused by a 2.x consumer, and a 2.x table by a 1.x consumer (gdrdrv's -EFAULT).
    assert!(!page_table_version_compatible(0x0001_0002));
    assert!(!page_table_version_compatible(0x0003_0000));
    assert!(!version_compatible(PAGE_TABLE_VERSION, 0x0001_0002));
    assert!(version_compatible(0x0001_0002, 0x0001_0002));
    assert!(!rsync_driver_version_compatible(0));
}

// --- C cross-checks -------------------------------------------------------------------------

fn layout_checks() -> Vec<Check> {
    let mut c = Vec::new();
    layout!(
        c,
        MailboxAddresses,
        "union nvidia_p2p_mailbox_addresses",
        [
            fermi,
            fermi.wmb_addr,
            fermi.wmb_data,
            fermi.rreq_addr,
            fermi.rcomp_addr,
            fermi.reserved,
        ]
    );
    layout!(
        c,
        Params,
        "nvidia_p2p_params_t",
        [version, architecture, addresses]
    );
    layout!(c, Params, "struct nvidia_p2p_params", [version]);
    layout!(
        c,
        RequestRegisters,
        "union nvidia_p2p_request_registers",
        [
            fermi,
            fermi.wreqmb_h,
            fermi.rreqmb_h,
            fermi.rreqmb_0,
            fermi.reserved,
        ]
    );
    layout!(
        c,
        Page,
        "nvidia_p2p_page_t",
        [
            physical_address,
            registers,
            registers.fermi.wreqmb_h,
            registers.fermi.rreqmb_h,
            registers.fermi.rreqmb_0,
            registers.fermi.reserved,
        ]
    );
    layout!(c, Page, "struct nvidia_p2p_page", [physical_address]);
    layout!(
        c,
        PageTable,
        "nvidia_p2p_page_table_t",
        [version, page_size, pages, entries, gpu_uuid, flags,]
    );
    layout!(c, PageTable, "struct nvidia_p2p_page_table", [flags]);
    layout!(
        c,
        DmaMapping,
        "nvidia_p2p_dma_mapping_t",
        [
            version,
            page_size_type,
            entries,
            dma_addresses,
            private,
            pci_dev,
        ]
    );
    layout!(c, DmaMapping, "struct nvidia_p2p_dma_mapping", [pci_dev]);
    layout!(
        c,
        RsyncDriver,
        "nvidia_p2p_rsync_driver_t",
        [
            version,
            get_relaxed_ordering_mode,
            put_relaxed_ordering_mode,
            wait_for_rsync,
        ]
    );
    layout!(
        c,
        RsyncReg,
        "nvidia_p2p_rsync_reg_t",
        [ptr, size, ibmnpu, gpu, cluster_id, socket_id,]
    );
    layout!(
        c,
        RsyncRegInfo,
        "nvidia_p2p_rsync_reg_info_t",
        [version, regs, entries]
    );
    c.push(Check {
        c_expr: "sizeof(enum nvidia_p2p_page_size_type)".into(),
        rust: size_of::<u32>() as u64,
    });
    c
}

fn constant_checks() -> Vec<Check> {
    let consts: &[(&str, u64)] = &[
        ("NVIDIA_P2P_MAJOR_VERSION_MASK", MAJOR_VERSION_MASK.into()),
        ("NVIDIA_P2P_MINOR_VERSION_MASK", MINOR_VERSION_MASK.into()),
        ("NVIDIA_P2P_PARAMS_VERSION", PARAMS_VERSION.into()),
        ("NVIDIA_P2P_PAGE_TABLE_VERSION", PAGE_TABLE_VERSION.into()),
        ("NVIDIA_P2P_DMA_MAPPING_VERSION", DMA_MAPPING_VERSION.into()),
        (
            "NVIDIA_P2P_RSYNC_DRIVER_VERSION",
            RSYNC_DRIVER_VERSION.into(),
        ),
        (
            "NVIDIA_P2P_RSYNC_REG_INFO_VERSION",
            RSYNC_REG_INFO_VERSION.into(),
        ),
        ("NVIDIA_P2P_FLAGS_DEFAULT", FLAGS_DEFAULT.into()),
        (
            "NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING",
            FLAGS_FORCE_BAR1_MAPPING.into(),
        ),
        (
            "NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE",
            PAGE_TABLE_FLAGS_CPU_CACHEABLE.into(),
        ),
        ("NVIDIA_P2P_GPU_UUID_LEN", GPU_UUID_LEN as u64),
        ("NVIDIA_P2P_ARCHITECTURE_TESLA", ARCHITECTURE_TESLA.into()),
        ("NVIDIA_P2P_ARCHITECTURE_FERMI", ARCHITECTURE_FERMI.into()),
        (
            "NVIDIA_P2P_ARCHITECTURE_CURRENT",
            ARCHITECTURE_CURRENT.into(),
        ),
        (
            "NVIDIA_P2P_PARAMS_ADDRESS_INDEX_GPU",
            PARAMS_ADDRESS_INDEX_GPU as u64,
        ),
        (
            "NVIDIA_P2P_PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE",
            PARAMS_ADDRESS_INDEX_THIRD_PARTY_DEVICE as u64,
        ),
        (
            "NVIDIA_P2P_PARAMS_ADDRESS_INDEX_MAX",
            PARAMS_ADDRESS_INDEX_MAX as u64,
        ),
        ("NVIDIA_P2P_PAGE_SIZE_4KB", PAGE_SIZE_4KB.into()),
        ("NVIDIA_P2P_PAGE_SIZE_64KB", PAGE_SIZE_64KB.into()),
        ("NVIDIA_P2P_PAGE_SIZE_128KB", PAGE_SIZE_128KB.into()),
        ("NVIDIA_P2P_PAGE_SIZE_COUNT", PAGE_SIZE_COUNT.into()),
    ];
    consts
        .iter()
        .map(|&(name, rust)| Check {
            c_expr: name.into(),
            rust,
        })
        .collect()
}

/// Version words to evaluate the C macros and the Rust helpers on.
const VERSION_GRID: &[u32] = &[
    0x0000_0000,
    0x0001_0000,
    0x0001_0001,
    0x0001_0002,
    0x0001_ffff,
    0x0002_0000,
    0x0002_0001,
    0x0002_0002,
    0x0002_0003,
    0x0002_0004,
    0x0002_ffff,
    0x0003_0000,
    0xffff_ffff,
];

/// A `*_version_compatible()` helper.
type VersionHelper = fn(u32) -> bool;

fn version_checks() -> Vec<Check> {
    let helpers: &[(&str, VersionHelper)] = &[
        (
            "NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE",
            page_table_version_compatible,
        ),
        (
            "NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE",
            dma_mapping_version_compatible,
        ),
        (
            "NVIDIA_P2P_RSYNC_DRIVER_VERSION_COMPATIBLE",
            rsync_driver_version_compatible,
        ),
        (
            "NVIDIA_P2P_RSYNC_REG_INFO_VERSION_COMPATIBLE",
            rsync_reg_info_version_compatible,
        ),
    ];
    let mut c = Vec::new();
    for &v in VERSION_GRID {
        let obj = format!("(&(struct v){{ {v:#x}u }})");
        c.push(Check {
            c_expr: format!("NVIDIA_P2P_MAJOR_VERSION({v:#x}u)"),
            rust: major_version(v).into(),
        });
        c.push(Check {
            c_expr: format!("NVIDIA_P2P_MINOR_VERSION({v:#x}u)"),
            rust: minor_version(v).into(),
        });
        for &(name, f) in helpers {
            c.push(Check {
                c_expr: format!("{name}({obj})"),
                rust: f(v).into(),
            });
        }
        for &w in VERSION_GRID {
            c.push(Check {
                c_expr: format!("NVIDIA_P2P_MAJOR_VERSION_MATCHES({obj}, {w:#x}u)"),
                rust: major_version_matches(v, w).into(),
            });
            c.push(Check {
                c_expr: format!("NVIDIA_P2P_VERSION_COMPATIBLE({obj}, {w:#x}u)"),
                rust: version_compatible(v, w).into(),
            });
        }
    }
    c
}

/// NVIDIA's exported prototypes, as the type each symbol must have.
const PROTOTYPES: &[(&str, &str)] = &[
    (
        "nvidia_p2p_init_mapping",
        "int (uint64_t, struct nvidia_p2p_params *, void (*)(void *), void *)",
    ),
    ("nvidia_p2p_destroy_mapping", "int (uint64_t)"),
    (
        "nvidia_p2p_get_pages",
        "int (uint64_t, uint32_t, uint64_t, uint64_t, struct nvidia_p2p_page_table **, \
         void (*)(void *), void *)",
    ),
    (
        "nvidia_p2p_get_pages_persistent",
        "int (uint64_t, uint64_t, struct nvidia_p2p_page_table **, uint32_t)",
    ),
    (
        "nvidia_p2p_dma_map_pages",
        "int (struct pci_dev *, struct nvidia_p2p_page_table *, struct nvidia_p2p_dma_mapping **)",
    ),
    (
        "nvidia_p2p_dma_unmap_pages",
        "int (struct pci_dev *, struct nvidia_p2p_page_table *, struct nvidia_p2p_dma_mapping *)",
    ),
    (
        "nvidia_p2p_put_pages",
        "int (uint64_t, uint32_t, uint64_t, struct nvidia_p2p_page_table *)",
    ),
    (
        "nvidia_p2p_put_pages_persistent",
        "int (uint64_t, struct nvidia_p2p_page_table *, uint32_t)",
    ),
    (
        "nvidia_p2p_free_page_table",
        "int (struct nvidia_p2p_page_table *)",
    ),
    (
        "nvidia_p2p_free_dma_mapping",
        "int (struct nvidia_p2p_dma_mapping *)",
    ),
    (
        "nvidia_p2p_register_rsync_driver",
        "int (nvidia_p2p_rsync_driver_t *, void *)",
    ),
    (
        "nvidia_p2p_unregister_rsync_driver",
        "void (nvidia_p2p_rsync_driver_t *, void *)",
    ),
    (
        "nvidia_p2p_get_rsync_registers",
        "int (nvidia_p2p_rsync_reg_info_t **)",
    ),
    (
        "nvidia_p2p_put_rsync_registers",
        "void (nvidia_p2p_rsync_reg_info_t *)",
    ),
    ("nvidia_p2p_cap_persistent_pages", "int"),
];

/// The stand-in for the kernel's `<linux/types.h>`, from the C library's types.
const STUB_LINUX_TYPES: &str = "\
#ifndef STUB_LINUX_TYPES_H
#define STUB_LINUX_TYPES_H
#include <stddef.h>
#include <stdint.h>
typedef uint8_t __u8;
typedef uint16_t __u16;
typedef uint32_t __u32;
typedef uint64_t __u64;
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
#endif
";

/// The C program's head: the header twice (include guard), then compile-time prototype checks.
fn c_head() -> String {
    let mut s = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <nv-p2p.h>\n\
         #include <nv-p2p.h> /* include guard */\n\n\
         #ifndef NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API\n#error no persistent API\n#endif\n\
         #ifndef NVIDIA_P2P_CAP_PERSISTENT_PAGES\n#error no persistent capability\n#endif\n\n\
         struct v { uint32_t version; };\n\n",
    );
    for (sym, ty) in PROTOTYPES {
        s += &format!(
            "_Static_assert(__builtin_types_compatible_p(__typeof__({sym}), {ty}), \"{sym}\");\n"
        );
    }
    s
}

/// Runs the C program once for all tests; returns the checks with the value C printed for each.
fn c_results() -> &'static [(Check, u64)] {
    static RESULTS: OnceLock<Vec<(Check, u64)>> = OnceLock::new();
    RESULTS.get_or_init(|| {
        let checks: Vec<Check> = layout_checks()
            .into_iter()
            .chain(constant_checks())
            .chain(version_checks())
            .collect();
        let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include");
        // -Wno-type-limits: *_VERSION_COMPATIBLE() compares an unsigned minor version with
        // `>= 0` when the expected minor is 0 (page tables), as NVIDIA's macros do; the kernel
        // enables that warning only with W=2.
        c_check::run(
            "p2p-abi",
            &c_head(),
            &include,
            &[("linux/types.h", STUB_LINUX_TYPES)],
            &["-Wno-type-limits"],
            checks,
        )
    })
}

/// Asserts that C and Rust agree on every check whose C expression satisfies `pick`.
fn assert_c_matches(pick: impl Fn(&str) -> bool) {
    c_check::assert_matches(c_results(), pick);
}

#[test]
fn c_header_layouts_match_rust() {
    assert_c_matches(|e| {
        e.starts_with("sizeof") || e.starts_with("_Alignof") || e.starts_with("offsetof")
    });
    // Every structure and field listed, and the numbers from NVIDIA's header (spot checks; the
    // rest is asserted at compile time in abi.rs).
    let r = c_results();
    assert_eq!(
        r.iter()
            .filter(|(k, _)| k.c_expr.starts_with("offsetof"))
            .count(),
        49
    );
    let get = |e: &str| r.iter().find(|(k, _)| k.c_expr == e).map(|(_, v)| *v);
    assert_eq!(get("offsetof(nvidia_p2p_page_table_t, flags)"), Some(32));
    assert_eq!(get("offsetof(nvidia_p2p_dma_mapping_t, pci_dev)"), Some(32));
    assert_eq!(get("sizeof(nvidia_p2p_params_t)"), Some(104));
}

#[test]
fn c_header_constants_match_rust() {
    assert_c_matches(|e| e.starts_with("NVIDIA_P2P_") && !e.contains('('));
}

#[test]
fn c_version_macros_match_rust_helpers() {
    assert_c_matches(|e| e.contains("VERSION("));
    assert_c_matches(|e| e.contains("_COMPATIBLE(") || e.contains("_MATCHES("));
}

#[test]
fn pages_coalesce_into_runs() {
    use crate::p2p::coalesce::runs;
    const K64: u64 = 64 << 10;
    let v = |p: &[u64]| runs(p.iter().copied()).collect::<Vec<_>>();
    assert_eq!(v(&[]), vec![]);
    assert_eq!(v(&[0x1000_0000]), vec![(0, 1, 0x1000_0000)]);
    // Two adjacent 2 MiB chunks and one elsewhere: two runs.
    let mut pages: Vec<u64> = (0..64).map(|i| 0x2000_0000 + i * K64).collect();
    pages.extend((0..32).map(|i| 0x4000_0000 + i * K64));
    assert_eq!(v(&pages), vec![(0, 64, 0x2000_0000), (64, 32, 0x4000_0000)]);
    // Backwards order never merges; equal addresses neither.
    assert_eq!(v(&[2 * K64, K64, K64]).len(), 3);
    // No overflow at the top of the address space.
    assert_eq!(v(&[u64::MAX - K64 + 1, 0]).len(), 2);
}
