// SPDX-License-Identifier: GPL-2.0

//! Host tests of the `/dev/nvrs` UAPI: `src/uapi.rs` (the module's and nvrs-smi's definition)
//! against `include/uapi/nvrs.h` (the C one).
//!
//! A C program built against the header, with the host's `<linux/ioctl.h>` and
//! `<linux/types.h>` (so the ioctl numbers come from the real `_IOC` macros), prints every
//! structure's size and alignment, every field's offset and size, the size and signedness of
//! every integer field's elements, every `NVRS_` constant and ioctl number, and the
//! function-like macros on all their inputs (`c_check.rs`); the tests compare each with Rust.
//! They also read the header's text: a structure, field or `NVRS_` macro that the header has
//! and the checks below do not list fails them, and the listed Rust fields must fill their
//! structures exactly (no padding, no Rust field left out).

use crate::c_check::{self, layout, Check};
use crate::uapi::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Integers and (nested) arrays of them, as the header's fields are.
trait Int {
    /// Size of the innermost integer.
    const ELEM: usize;
    /// Array dimensions around it.
    const DEPTH: usize;
    const SIGNED: bool;
}

macro_rules! int {
    ($($t:ty: $signed:literal),*) => {
        $(impl Int for $t {
            const ELEM: usize = core::mem::size_of::<$t>();
            const DEPTH: usize = 0;
            const SIGNED: bool = $signed;
        })*
    };
}
int!(u8: false, u32: false, u64: false, i32: true);

impl<T: Int, const N: usize> Int for [T; N] {
    const ELEM: usize = T::ELEM;
    const DEPTH: usize = T::DEPTH + 1;
    const SIGNED: bool = T::SIGNED;
}

fn elem_size<T, F: Int>(_f: fn(&T) -> &F) -> (usize, usize, bool) {
    (F::ELEM, F::DEPTH, F::SIGNED)
}

/// The element size and signedness of integer fields (the fields' sizes alone do not tell
/// `__u64 x[4]` from `__u32 x[8]`, nor `__s32` from `__u32`). C `char` arrays are Rust `u8`
/// arrays whatever the signedness of `char`: list them under `bytes`, which checks size only.
macro_rules! ints {
    ($checks:ident, $rust:ty, $c:literal, [$($f:ident),* $(,)?]) => {
        $(
            let (size, depth, signed) = elem_size::<$rust, _>(|s| &s.$f);
            let elem = format!("((({} *)0)->{}{})", $c, stringify!($f), "[0]".repeat(depth));
            $checks.push(Check { c_expr: format!("sizeof({elem})"), rust: size as u64 });
            $checks.push(Check {
                c_expr: format!("((__typeof__({elem}))-1 < 0) /* signed */"),
                rust: signed.into(),
            });
        )*
    };
    ($checks:ident, $rust:ty, $c:literal, [$($f:ident),* $(,)?], bytes: [$($b:ident),*]) => {
        ints!($checks, $rust, $c, [$($f),*]);
        $(
            let (size, _, _) = elem_size::<$rust, _>(|s| &s.$b);
            $checks.push(Check {
                c_expr: format!("sizeof((({} *)0)->{}[0])", $c, stringify!($b)),
                rust: size as u64,
            });
        )*
    };
}

fn layout_checks() -> Vec<Check> {
    let mut c = Vec::new();
    layout!(
        c,
        GpuInfo,
        "struct nvrs_gpu_info",
        [index, chipset, fb_size, fb_free, uuid, name, chip]
    );
    ints!(
        c,
        GpuInfo,
        "struct nvrs_gpu_info",
        [index, chipset, fb_size, fb_free, uuid],
        bytes: [name, chip]
    );
    layout!(c, Alloc, "struct nvrs_alloc", [gpu, flags, size, va]);
    ints!(c, Alloc, "struct nvrs_alloc", [gpu, flags, size, va]);
    layout!(c, Free, "struct nvrs_free", [va]);
    ints!(c, Free, "struct nvrs_free", [va]);
    layout!(
        c,
        GpuStats,
        "struct nvrs_gpu_stats",
        [
            index,
            version,
            fb_total,
            fb_used,
            fb_free,
            fb_free_zeroed,
            largest_free,
            bar1_total,
            bar1_pinned,
            fragmentation_permille,
            pins,
            dma_mappings,
            chunk_levels,
            chunk_size,
            chunks,
            alloc_failures,
            dmabufs,
            dmabuf_mappings,
            compactions,
            compacted_bytes,
            faults_injected,
            faults_revoked,
            bar1_budget,
            p2pdma_state,
            reserved32,
            p2pdma_bytes,
        ]
    );
    ints!(
        c,
        GpuStats,
        "struct nvrs_gpu_stats",
        [
            index,
            version,
            fb_total,
            fb_used,
            fb_free,
            fb_free_zeroed,
            largest_free,
            bar1_total,
            bar1_pinned,
            fragmentation_permille,
            pins,
            dma_mappings,
            chunk_levels,
            chunk_size,
            chunks,
            alloc_failures,
            dmabufs,
            dmabuf_mappings,
            compactions,
            compacted_bytes,
            faults_injected,
            faults_revoked,
            bar1_budget,
            p2pdma_state,
            reserved32,
            p2pdma_bytes,
        ]
    );
    layout!(
        c,
        ExportDmabuf,
        "struct nvrs_export_dmabuf",
        [va, size, flags, fd]
    );
    ints!(
        c,
        ExportDmabuf,
        "struct nvrs_export_dmabuf",
        [va, size, flags, fd]
    );
    layout!(
        c,
        PmmMap,
        "struct nvrs_pmm_map",
        [gpu, roots, root_size, map]
    );
    ints!(
        c,
        PmmMap,
        "struct nvrs_pmm_map",
        [gpu, roots, root_size, map]
    );
    layout!(
        c,
        ProcessUsage,
        "struct nvrs_process_usage",
        [pid, gpu, bytes]
    );
    ints!(
        c,
        ProcessUsage,
        "struct nvrs_process_usage",
        [pid, gpu, bytes]
    );
    layout!(c, Processes, "struct nvrs_processes", [count, pad, entries]);
    ints!(c, Processes, "struct nvrs_processes", [count, pad, entries]);
    layout!(
        c,
        ProcessEntry,
        "struct nvrs_process_entry",
        [pid, gpu, bytes, allocations, pins, dmabufs, reserved]
    );
    ints!(
        c,
        ProcessEntry,
        "struct nvrs_process_entry",
        [pid, gpu, bytes, allocations, pins, dmabufs, reserved]
    );
    layout!(
        c,
        GpuCopyEngine,
        "struct nvrs_gpu_copy_engine",
        [index, flags, launches, bytes]
    );
    ints!(
        c,
        GpuCopyEngine,
        "struct nvrs_gpu_copy_engine",
        [index, flags, launches, bytes]
    );
    layout!(
        c,
        ProcessStats,
        "struct nvrs_process_stats",
        [version, count, entry_size, pad, entries]
    );
    ints!(
        c,
        ProcessStats,
        "struct nvrs_process_stats",
        [version, count, entry_size, pad, entries]
    );
    layout!(
        c,
        TopologyEndpoint,
        "struct nvrs_topology_endpoint",
        [pci_id, numa_node, cpu_affinity]
    );
    ints!(
        c,
        TopologyEndpoint,
        "struct nvrs_topology_endpoint",
        [pci_id, numa_node],
        bytes: [cpu_affinity]
    );
    layout!(
        c,
        Topology,
        "struct nvrs_topology",
        [version, gpus, peers, gate, ep, link, p2p]
    );
    ints!(
        c,
        Topology,
        "struct nvrs_topology",
        [version, gpus, peers, gate, link, p2p]
    );
    layout!(
        c,
        GpuPcie,
        "struct nvrs_gpu_pcie",
        [
            index,
            flags,
            bar1_rx_bytes,
            bar1_tx_bytes,
            bar1_mapped,
            bar1_faults,
            tlb_invalidates
        ]
    );
    ints!(
        c,
        GpuPcie,
        "struct nvrs_gpu_pcie",
        [
            index,
            flags,
            bar1_rx_bytes,
            bar1_tx_bytes,
            bar1_mapped,
            bar1_faults,
            tlb_invalidates
        ]
    );
    c.push(Check {
        c_expr: "sizeof(((struct nvrs_topology *)0)->ep[0])".into(),
        rust: core::mem::size_of::<TopologyEndpoint>() as u64,
    });
    c
}

/// Every object-like `NVRS_` macro of the header and its Rust value.
fn constants() -> Vec<(&'static str, u64)> {
    vec![
        ("NVRS_IOCTL_MAGIC", IOCTL_MAGIC.into()),
        ("NVRS_ALLOC_ALIGN", ALLOC_ALIGN),
        ("NVRS_ALLOC_CONTIGUOUS", ALLOC_CONTIGUOUS.into()),
        ("NVRS_ALLOC_ZERO", ALLOC_ZERO.into()),
        ("NVRS_ALLOC_P2PDMA", ALLOC_P2PDMA.into()),
        ("NVRS_ALLOC_FLAGS", ALLOC_FLAGS.into()),
        ("NVRS_GPU_STATS_VERSION", GPU_STATS_VERSION.into()),
        ("NVRS_P2PDMA_NONE", P2PDMA_NONE.into()),
        ("NVRS_P2PDMA_PROVIDER", P2PDMA_PROVIDER.into()),
        ("NVRS_CHUNK_SIZES", CHUNK_SIZES as u64),
        ("NVRS_CHUNK_FREE", CHUNK_FREE as u64),
        ("NVRS_CHUNK_ALLOCATED", CHUNK_ALLOCATED as u64),
        ("NVRS_CHUNK_IS_SPLIT", CHUNK_IS_SPLIT as u64),
        ("NVRS_CHUNK_TEMP_PINNED", CHUNK_TEMP_PINNED as u64),
        ("NVRS_CHUNK_STATES", CHUNK_STATES as u64),
        ("NVRS_ROOT_FREE", ROOT_FREE.into()),
        ("NVRS_ROOT_ALLOCATED", ROOT_ALLOCATED.into()),
        ("NVRS_ROOT_SPLIT", ROOT_SPLIT.into()),
        ("NVRS_ROOT_CONTIG", ROOT_CONTIG.into()),
        ("NVRS_ROOT_TEMP", ROOT_TEMP.into()),
        ("NVRS_ROOT_PINNED", ROOT_PINNED.into()),
        ("NVRS_TOPO_MAX", TOPO_MAX as u64),
        ("NVRS_LINK_SELF", LINK_SELF.into()),
        ("NVRS_LINK_PIX", LINK_PIX.into()),
        ("NVRS_LINK_PXB", LINK_PXB.into()),
        ("NVRS_LINK_PHB", LINK_PHB.into()),
        ("NVRS_LINK_NODE", LINK_NODE.into()),
        ("NVRS_LINK_SYS", LINK_SYS.into()),
        ("NVRS_IOCTL_GPU_COUNT", IOCTL_GPU_COUNT.into()),
        ("NVRS_IOCTL_GPU_INFO", IOCTL_GPU_INFO.into()),
        ("NVRS_IOCTL_ALLOC", IOCTL_ALLOC.into()),
        ("NVRS_IOCTL_FREE", IOCTL_FREE.into()),
        ("NVRS_IOCTL_GPU_STATS", IOCTL_GPU_STATS.into()),
        ("NVRS_IOCTL_EXPORT_DMABUF", IOCTL_EXPORT_DMABUF.into()),
        ("NVRS_IOCTL_PMM_MAP", IOCTL_PMM_MAP.into()),
        ("NVRS_IOCTL_PROCESSES", IOCTL_PROCESSES.into()),
        ("NVRS_IOCTL_TOPOLOGY", IOCTL_TOPOLOGY.into()),
        ("NVRS_IOCTL_GPU_PCIE", IOCTL_GPU_PCIE.into()),
        ("NVRS_IOCTL_PROCESS_STATS", IOCTL_PROCESS_STATS.into()),
        ("NVRS_IOCTL_GPU_COPY_ENGINE", IOCTL_GPU_COPY_ENGINE.into()),
        ("NVRS_CE_IN_USE", CE_IN_USE.into()),
        ("NVRS_PROCESS_STATS_VERSION", PROCESS_STATS_VERSION.into()),
        ("NVRS_PCIE_COUNTERS", PCIE_COUNTERS.into()),
        ("NVRS_PCIE_BAR1_VIRTUAL", PCIE_BAR1_VIRTUAL.into()),
    ]
}

/// The function-like `NVRS_` macros, evaluated on every input they take.
const MACROS: &[&str] = &["NVRS_ROOT_KIND", "NVRS_ROOT_USED", "NVRS_LINK_NV"];

fn macro_checks() -> Vec<Check> {
    let mut c = Vec::new();
    for b in 0..=u8::MAX {
        c.push(Check {
            c_expr: format!("NVRS_ROOT_KIND({b}u)"),
            rust: root_kind(b).into(),
        });
        c.push(Check {
            c_expr: format!("NVRS_ROOT_USED({b}u)"),
            rust: root_used(b).into(),
        });
        c.push(Check {
            c_expr: format!("({b}u & NVRS_ROOT_PINNED) != 0 /* pinned */"),
            rust: (b & ROOT_PINNED != 0).into(),
        });
    }
    for n in 0..=LINK_NV_MAX {
        c.push(Check {
            c_expr: format!("NVRS_LINK_NV({n})"),
            rust: link_nv(n).into(),
        });
    }
    c
}

fn header_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/uapi/nvrs.h")
}

/// Runs the C program once for all tests; returns the checks with the value C printed for each.
fn c_results() -> &'static [(Check, u64)] {
    static RESULTS: OnceLock<Vec<(Check, u64)>> = OnceLock::new();
    RESULTS.get_or_init(|| {
        let checks: Vec<Check> = layout_checks()
            .into_iter()
            .chain(constants().into_iter().map(|(name, rust)| Check {
                c_expr: name.into(),
                rust,
            }))
            .chain(macro_checks())
            .collect();
        let head = "#include <stddef.h>\n#include <stdio.h>\n#include <nvrs.h>\n\
                    #include <nvrs.h> /* include guard */\n";
        // -Wno-type-limits: the signedness checks compare unsigned values with 0.
        c_check::run(
            "uapi",
            head,
            header_path().parent().unwrap(),
            &[],
            &["-Wno-type-limits"],
            checks,
        )
    })
}

/// The structures of the header and their fields in order, from its text.
fn header_structs() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(header_path()).unwrap();
    let mut structs = BTreeMap::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        if let Some(name) = line
            .strip_prefix("struct ")
            .and_then(|l| l.strip_suffix(" {"))
        {
            current = Some((format!("struct {name}"), Vec::new()));
        } else if line == "};" {
            let (name, fields) = current.take().expect("}; outside a structure");
            structs.insert(name, fields);
        } else if let Some((_, fields)) = &mut current {
            let decl = line.trim().strip_suffix(';').expect("one field per line");
            let last = decl.split_whitespace().last().unwrap();
            fields.push(last.split('[').next().unwrap().to_string());
        }
    }
    assert!(current.is_none(), "unterminated structure");
    structs
}

/// The `NVRS_` macros of the header, object-like and function-like.
fn header_macros() -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(header_path()).unwrap();
    let (mut objects, mut functions) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("#define NVRS_") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if rest[name.len()..].starts_with('(') {
            functions.push(format!("NVRS_{name}"));
        } else {
            objects.push(format!("NVRS_{name}"));
        }
    }
    (objects, functions)
}

/// The structures the checks list, with their fields in order and the Rust sizes of both.
fn checked_structs() -> BTreeMap<String, (u64, Vec<(String, u64)>)> {
    let mut out: BTreeMap<String, (u64, Vec<(String, u64)>)> = BTreeMap::new();
    for c in layout_checks() {
        let e = &c.c_expr;
        if let Some(s) = e.strip_prefix("sizeof(struct ") {
            out.entry(format!("struct {}", s.strip_suffix(')').unwrap()))
                .or_default()
                .0 = c.rust;
        } else if let Some(rest) = e.strip_prefix("offsetof(") {
            let (s, f) = rest.strip_suffix(')').unwrap().split_once(", ").unwrap();
            out.entry(s.into()).or_default().1.push((f.into(), 0));
        } else if let Some(rest) = e.strip_prefix("sizeof(((") {
            if let Some((s, f)) = rest.split_once(" *)0)->") {
                if let Some(f) = f.strip_suffix(')') {
                    if let Some(field) = out.get_mut(s).and_then(|v| v.1.last_mut()) {
                        if field.0 == f {
                            field.1 = c.rust;
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn c_header_layouts_match_rust() {
    c_check::assert_matches(c_results(), |e| {
        e.starts_with("sizeof") || e.starts_with("_Alignof") || e.starts_with("offsetof")
    });
    c_check::assert_matches(c_results(), |e| e.ends_with("/* signed */"));
    let get = |e: &str| {
        c_results()
            .iter()
            .find(|(k, _)| k.c_expr == e)
            .map(|(_, v)| *v)
    };
    // Numbers the header's layout gives (spot checks of the C side itself).
    assert_eq!(get("sizeof(struct nvrs_gpu_stats)"), Some(312));
    assert_eq!(get("offsetof(struct nvrs_gpu_stats, chunks)"), Some(112));
    assert_eq!(get("offsetof(struct nvrs_topology, link)"), Some(2064));
}

#[test]
fn every_header_structure_and_field_is_checked_in_order() {
    let header = header_structs();
    let checked = checked_structs();
    assert!(header.len() >= 10, "structures found: {header:?}");
    let header_fields: BTreeMap<_, _> = header.iter().collect();
    let checked_fields: BTreeMap<_, Vec<_>> = checked
        .iter()
        .map(|(s, (_, f))| (s, f.iter().map(|(n, _)| n.clone()).collect()))
        .collect();
    assert_eq!(
        header_fields.keys().collect::<Vec<_>>(),
        checked_fields.keys().collect::<Vec<_>>(),
        "structures of include/uapi/nvrs.h vs. those checked"
    );
    for (s, fields) in &header {
        assert_eq!(&checked_fields[s], fields, "fields of {s}");
    }
}

#[test]
fn listed_fields_fill_each_rust_structure() {
    // No padding and no Rust field left out of the lists: the listed fields' sizes add up to
    // the structure's.
    let checked = checked_structs();
    assert!(checked.len() >= 10);
    for (s, (size, fields)) in &checked {
        let sum: u64 = fields.iter().map(|(_, n)| n).sum();
        assert!(fields.iter().all(|(_, n)| *n > 0), "{s}: {fields:?}");
        assert_eq!(sum, *size, "{s}: fields {fields:?}");
    }
}

#[test]
fn c_header_constants_and_ioctls_match_rust() {
    c_check::assert_matches(c_results(), |e| e.starts_with("NVRS_") && !e.contains('('));
    c_check::assert_matches(c_results(), |e| e.starts_with("NVRS_IOCTL_"));
    let (objects, functions) = header_macros();
    let mut listed: Vec<String> = constants().iter().map(|(n, _)| n.to_string()).collect();
    let mut objects_sorted = objects.clone();
    listed.sort();
    objects_sorted.sort();
    assert_eq!(
        objects_sorted, listed,
        "object-like NVRS_ macros vs. constants checked"
    );
    assert!(objects.len() >= 30, "{objects:?}");
    assert_eq!(
        functions, MACROS,
        "function-like NVRS_ macros vs. those checked"
    );
}

#[test]
fn c_header_macros_match_rust_helpers() {
    for m in MACROS {
        c_check::assert_matches(c_results(), |e| e.starts_with(&format!("{m}(")));
    }
    c_check::assert_matches(c_results(), |e| e.ends_with("/* pinned */"));
}

#[test]
fn root_bytes_and_link_codes_round_trip() {
    for kind in [
        ROOT_FREE,
        ROOT_ALLOCATED,
        ROOT_SPLIT,
        ROOT_CONTIG,
        ROOT_TEMP,
    ] {
        for pinned in [false, true] {
            for used in 0..=u8::MAX {
                let b = root_byte(kind, pinned, used);
                assert_eq!(root_kind(b), kind);
                assert_eq!(b & ROOT_PINNED != 0, pinned);
                assert_eq!(root_used(b), used.min(ROOT_USED_MAX));
            }
        }
    }
    for n in 0..=u8::MAX {
        assert_eq!(link_nvlinks(link_nv(n)), Some(n.min(LINK_NV_MAX)));
    }
    for code in [LINK_SELF, LINK_PIX, LINK_PXB, LINK_PHB, LINK_NODE, LINK_SYS] {
        assert_eq!(link_nvlinks(code), None);
    }
}
