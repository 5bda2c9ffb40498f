// SPDX-License-Identifier: GPL-2.0

//! `topo -m` (the GPU × device matrix in nvidia-smi's layout and legend, as
//! `/sys/kernel/debug/nvrs/topology` prints it) and `nvlink -s`.

use std::fmt::Write;

use crate::model::{Gpu, Snapshot};

const COL: usize = 8;

/// `topo -m`.
pub fn matrix(s: &Snapshot) -> String {
    let t = &s.topology;
    let mut o = String::new();
    let _ = write!(o, "{:COL$}", "");
    for e in &t.endpoints {
        let _ = write!(o, "{:<COL$}", e.label);
    }
    let _ = writeln!(
        o,
        "{:<16}{:<16}GPU NUMA ID",
        "CPU Affinity", "NUMA Affinity"
    );
    for (i, e) in t.endpoints.iter().enumerate() {
        let _ = write!(o, "{:<COL$}", e.label);
        for cell in t.link.get(i).into_iter().flatten() {
            let _ = write!(o, "{cell:<COL$}");
        }
        if i < t.gpus {
            let cpus = if e.cpu_affinity.is_empty() {
                "N/A"
            } else {
                &e.cpu_affinity
            };
            let numa = e.numa_node.map_or("N/A".to_string(), |n| n.to_string());
            let _ = write!(o, "{cpus:<16}{numa:<16}N/A");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Legend:");
    let _ = writeln!(o);
    for l in [
        "  X    = Self",
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes",
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "  NV#  = Connection traversing a bonded set of # NVLinks",
    ] {
        let _ = writeln!(o, "{l}");
    }
    let nics: Vec<_> = t.endpoints.iter().skip(t.gpus).collect();
    if !nics.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "NIC Legend:");
        let _ = writeln!(o);
        for e in nics {
            let _ = writeln!(o, "  {}: {}", e.label, e.pci);
        }
    }
    o
}

/// `nvlink -s`: per GPU, each of its links: active (to which GPU) with the chip's per-link
/// bandwidth, or inactive.
pub fn nvlink(s: &Snapshot, gpus: &[&Gpu]) -> String {
    let t = &s.topology;
    let mut o = String::new();
    for g in gpus {
        let _ = writeln!(o, "GPU {}: {} (UUID: {})", g.index, g.name, g.uuid);
        let Some((links, gbps)) = g.nvlink else {
            let _ = writeln!(o, "\t NVLink is not supported");
            continue;
        };
        // Active links, peer by peer, in order.
        let row = t.link.get(g.index as usize);
        let mut active = Vec::new();
        for (j, cell) in row.into_iter().flatten().enumerate() {
            if let Some(n) = cell.strip_prefix("NV").and_then(|n| n.parse::<u8>().ok()) {
                active.extend(std::iter::repeat_n(j, usize::from(n)));
            }
        }
        for l in 0..usize::from(links) {
            match active.get(l) {
                Some(&peer) => {
                    let _ = writeln!(o, "\t Link {l}: {gbps:.3} GB/s (to GPU{peer})");
                }
                None => {
                    let _ = writeln!(o, "\t Link {l}: <inactive>");
                }
            }
        }
    }
    o
}
