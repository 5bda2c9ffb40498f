// SPDX-License-Identifier: GPL-2.0

//! The text views that follow nvidia-smi: the default summary, `-q`, and `--query-gpu` CSV.

use std::fmt::Write;

use crate::model::{Gpu, Snapshot};

/// Bytes in whole MiB, as nvidia-smi counts them.
pub fn mib(b: u64) -> u64 {
    b >> 20
}

/// Bytes in the largest unit that keeps them whole-ish: `64 KiB`, `248 MiB`.
pub fn size(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

/// The default view: one box per GPU with its bus id, BAR1 and memory usage, then the processes
/// that hold GPU memory.
pub fn summary(s: &Snapshot, gpus: &[&Gpu]) -> String {
    let mut o = String::new();
    let rule = format!("+{}+", "-".repeat(87));
    let _ = writeln!(o, "{}", s.timestamp);
    let _ = writeln!(o, "{rule}");
    let _ = writeln!(
        o,
        "| {:<85} |",
        format!(
            "NVRS-SMI {}    Driver: {}",
            env!("CARGO_PKG_VERSION"),
            s.driver_version
        )
    );
    let _ = writeln!(
        o,
        "|{}+{}+{}|",
        "-".repeat(41),
        "-".repeat(24),
        "-".repeat(20)
    );
    let _ = writeln!(
        o,
        "| {:<39} | {:<22} | {:>18} |",
        "GPU  Name", "Bus-Id", "BAR1-Usage"
    );
    let _ = writeln!(o, "| {:<39} | {:<22} | {:>18} |", "", "", "Memory-Usage");
    let _ = writeln!(
        o,
        "|{}+{}+{}|",
        "=".repeat(41),
        "=".repeat(24),
        "=".repeat(20)
    );
    for g in gpus {
        let bar1 = format!("{}MiB / {}MiB", mib(g.bar1.used), mib(g.bar1.total));
        let fb = format!("{}MiB / {}MiB", mib(g.fb.used), mib(g.fb.total));
        let _ = writeln!(
            o,
            "| {:>3}  {:<34} | {:<22} | {:>18} |",
            g.index, g.name, g.bus_id, bar1
        );
        let _ = writeln!(o, "| {:<39} | {:<22} | {:>18} |", "", "", fb);
        let _ = writeln!(
            o,
            "+{}+{}+{}+",
            "-".repeat(41),
            "-".repeat(24),
            "-".repeat(20)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "{rule}");
    let _ = writeln!(o, "| {:<85} |", "Processes:");
    let _ = writeln!(
        o,
        "| {:<85} |",
        format!(
            "{:>4} {:>8}   {:<54}{:>12}",
            "GPU", "PID", "Process name", "GPU Memory"
        )
    );
    let _ = writeln!(o, "| {:<85} |", format!("{:>68}{:>12}", "", "Usage"));
    let _ = writeln!(o, "|{}|", "=".repeat(87));
    let procs: Vec<_> = s
        .processes
        .iter()
        .filter(|p| gpus.iter().any(|g| g.index == p.gpu))
        .collect();
    if procs.is_empty() {
        let _ = writeln!(o, "| {:<85} |", " No running processes found");
    }
    for p in procs {
        let _ = writeln!(
            o,
            "| {:<85} |",
            format!(
                "{:>4} {:>8}   {:<54}{:>9}MiB",
                p.gpu,
                p.pid,
                p.name,
                mib(p.bytes)
            )
        );
    }
    let _ = writeln!(o, "{rule}");
    o
}

/// One `label : value` line of `-q`, at `depth` (four spaces each), value column aligned.
fn kv(o: &mut String, depth: usize, label: &str, value: impl std::fmt::Display) {
    let pad = 4 * depth;
    let _ = writeln!(o, "{:pad$}{:<w$}: {value}", "", label, w = 42 - pad);
}

fn section(o: &mut String, depth: usize, name: &str) {
    let _ = writeln!(o, "{:pad$}{name}", "", pad = 4 * depth);
}

/// `-q`: the full report, with nvidia-smi's `FB Memory Usage` and `BAR1 Memory Usage` blocks,
/// then what nvrs adds (the memory manager, P2P and dma-buf state).
pub fn query(s: &Snapshot, gpus: &[&Gpu]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "==============NVRS-SMI LOG==============");
    let _ = writeln!(o);
    kv(&mut o, 0, "Timestamp", &s.timestamp);
    kv(&mut o, 0, "Driver Version", &s.driver_version);
    kv(&mut o, 0, "Attached GPUs", s.gpus.len());
    for g in gpus {
        let _ = writeln!(o, "GPU {}", g.bus_id);
        kv(&mut o, 1, "Product Name", &g.name);
        kv(&mut o, 1, "GPU UUID", &g.uuid);
        kv(&mut o, 1, "Minor Number", g.index);
        kv(&mut o, 1, "Chipset", format!("{:#x}", g.chipset));
        section(&mut o, 1, "FB Memory Usage");
        kv(&mut o, 2, "Total", format!("{} MiB", mib(g.fb.total)));
        kv(&mut o, 2, "Reserved", "0 MiB");
        kv(&mut o, 2, "Used", format!("{} MiB", mib(g.fb.used)));
        kv(&mut o, 2, "Free", format!("{} MiB", mib(g.fb.free)));
        section(&mut o, 1, "BAR1 Memory Usage");
        kv(&mut o, 2, "Total", format!("{} MiB", mib(g.bar1.total)));
        kv(&mut o, 2, "Used", format!("{} MiB", mib(g.bar1.used)));
        kv(&mut o, 2, "Free", format!("{} MiB", mib(g.bar1.free)));
        section(&mut o, 1, "Memory Manager");
        kv(
            &mut o,
            2,
            "Free and Zeroed",
            format!("{} MiB", mib(g.pmm.free_zeroed)),
        );
        kv(&mut o, 2, "Largest Free Block", size(g.pmm.largest_free));
        let f = g.pmm.fragmentation_permille;
        kv(
            &mut o,
            2,
            "Fragmentation",
            format!("{}.{} %", f / 10, f % 10),
        );
        kv(&mut o, 2, "Allocation Failures", g.pmm.alloc_failures);
        kv(&mut o, 2, "Compactions", g.pmm.compactions);
        kv(
            &mut o,
            2,
            "Compacted",
            format!("{} MiB", mib(g.pmm.compacted_bytes)),
        );
        for c in &g.pmm.chunks {
            kv(
                &mut o,
                2,
                &format!("Chunks {} KiB", c.size >> 10),
                format!(
                    "free {} allocated {} split {} temp_pinned {}",
                    c.free, c.allocated, c.split, c.temp_pinned
                ),
            );
        }
        section(&mut o, 1, "P2P");
        kv(&mut o, 2, "Pins", g.p2p.pins);
        kv(&mut o, 2, "DMA Mappings", g.p2p.dma_mappings);
        kv(&mut o, 2, "dma-bufs", g.p2p.dmabufs);
        kv(&mut o, 2, "dma-buf Mappings", g.p2p.dmabuf_mappings);
        section(&mut o, 1, "P2PDMA (storage)");
        kv(
            &mut o,
            2,
            "Provider",
            if g.p2p.p2pdma_provider { "Yes" } else { "No" },
        );
        kv(
            &mut o,
            2,
            "In Use",
            format!("{} MiB", mib(g.p2p.p2pdma_bytes)),
        );
        section(&mut o, 1, "Fault Controls");
        kv(
            &mut o,
            2,
            "BAR1 Budget",
            match g.p2p.bar1_budget {
                0 => "None".to_string(),
                b => format!("{} MiB", mib(b)),
            },
        );
        kv(&mut o, 2, "Injected Failures", g.p2p.faults_injected);
        kv(&mut o, 2, "Revoked Pins", g.p2p.faults_revoked);
        section(&mut o, 1, "Processes");
        for p in s.processes.iter().filter(|p| p.gpu == g.index) {
            kv(&mut o, 2, "Process ID", p.pid);
            kv(&mut o, 3, "Name", &p.name);
            kv(
                &mut o,
                3,
                "Used GPU Memory",
                format!("{} MiB", mib(p.bytes)),
            );
        }
    }
    o
}

/// The fields `--query-gpu` knows, with their CSV header and value.
pub const FIELDS: &[&str] = &[
    "index",
    "name",
    "pci.bus_id",
    "uuid",
    "memory.total",
    "memory.used",
    "memory.free",
    "bar1.total",
    "bar1.used",
    "pmm.largest_free",
    "pmm.fragmentation",
    "pmm.compactions",
    "p2p.pins",
    "p2p.dmabufs",
];

fn field(g: &Gpu, f: &str, units: bool) -> Option<(String, String)> {
    let m = |b: u64| {
        if units {
            format!("{} MiB", mib(b))
        } else {
            mib(b).to_string()
        }
    };
    let (h, v) = match f {
        "index" => ("index".into(), g.index.to_string()),
        "name" => ("name".into(), g.name.clone()),
        "pci.bus_id" => ("pci.bus_id".into(), g.bus_id.clone()),
        "uuid" => ("uuid".into(), g.uuid.clone()),
        "memory.total" => ("memory.total [MiB]".into(), m(g.fb.total)),
        "memory.used" => ("memory.used [MiB]".into(), m(g.fb.used)),
        "memory.free" => ("memory.free [MiB]".into(), m(g.fb.free)),
        "bar1.total" => ("bar1.total [MiB]".into(), m(g.bar1.total)),
        "bar1.used" => ("bar1.used [MiB]".into(), m(g.bar1.used)),
        "pmm.largest_free" => ("pmm.largest_free [MiB]".into(), m(g.pmm.largest_free)),
        "pmm.fragmentation" => {
            let f = g.pmm.fragmentation_permille;
            (
                "pmm.fragmentation [%]".into(),
                format!("{}.{}", f / 10, f % 10),
            )
        }
        "pmm.compactions" => ("pmm.compactions".into(), g.pmm.compactions.to_string()),
        "p2p.pins" => ("p2p.pins".into(), g.p2p.pins.to_string()),
        "p2p.dmabufs" => ("p2p.dmabufs".into(), g.p2p.dmabufs.to_string()),
        _ => return None,
    };
    Some((h, v))
}

/// Checks a `--query-gpu` list; the first unknown field is the error.
pub fn check_fields(list: &str) -> Result<Vec<String>, String> {
    let v: Vec<String> = list.split(',').map(|f| f.trim().to_string()).collect();
    match v.iter().find(|f| !FIELDS.contains(&f.as_str())) {
        Some(bad) => Err(format!("Field \"{bad}\" is not a valid field to query.")),
        None => Ok(v),
    }
}

/// `--query-gpu=... --format=csv[,noheader][,nounits]`.
pub fn csv(gpus: &[&Gpu], fields: &[String], header: bool, units: bool) -> String {
    let mut o = String::new();
    if header {
        let hs: Vec<String> = fields
            .iter()
            .filter_map(|f| gpus.first().and_then(|g| field(g, f, units)).map(|x| x.0))
            .collect();
        let _ = writeln!(o, "{}", hs.join(", "));
    }
    for g in gpus {
        let vs: Vec<String> = fields
            .iter()
            .filter_map(|f| field(g, f, units).map(|x| x.1))
            .collect();
        let _ = writeln!(o, "{}", vs.join(", "));
    }
    o
}
