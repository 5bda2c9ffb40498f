// SPDX-License-Identifier: GPL-2.0

//! `nvrs-smi dmon`: one row per GPU and interval, as `nvidia-smi dmon` prints them.
//!
//! Each row is the change between two snapshots `-d` seconds apart (`-c` rows per GPU, 0 for
//! ever). The metric groups of `-s`, each one letter:
//!
//! * `t`: PCIe throughput, `rxpci` and `txpci` in MB/s: bytes written into and read from BAR1,
//!   from the GPU's own counters (`NVRS_IOCTL_GPU_PCIE`; the test-bed's GPU model has them,
//!   others print `-`).
//! * `m`: memory, `fb` (GPU memory allocated) and `bar1` (BAR1 pinned, or mapped through nvrs's
//!   page tables) in MiB.
//! * `p`: peer access now: `pins` (live `nvidia_p2p` pins), `maps` (their DMA mappings),
//!   `dmabuf` (exports) and `p2pdma` (MiB of storage-DMA allocations).
//! * `c`: compaction in the interval: `cmpct` (runs) and `moved` (MiB moved).
//! * `e`: the copy engine in the interval (`NVRS_IOCTL_GPU_COPY_ENGINE`; GPUs nvrs uses none
//!   of print `-`): `ce` (transfers) and `cemov` (MiB copied or filled: scrubs, compaction).
//!
//! `--format csv` prints the same rows with commas; `--json` one JSON object per row
//! ([`crate::monitor`]).

use crate::model::{Gpu, Snapshot};
use crate::monitor::{self, Cell, Col, Format, View};

/// The groups `-s` knows, in the order their columns are printed.
pub const GROUPS: &str = "tmpce";

const MIB: f64 = 1024.0 * 1024.0;

/// One column: its name, its unit, and its value for a GPU between two snapshots `dt` seconds
/// apart (`None` prints as `-`).
struct Column {
    name: &'static str,
    unit: &'static str,
    value: fn(&Gpu, &Gpu, f64) -> Option<f64>,
}

/// MB/s between two readings of a byte counter; `None` if it went back (the GPU was reset).
fn rate(now: u64, then: u64, dt: f64) -> Option<f64> {
    let bytes = now.checked_sub(then)?;
    Some(if dt > 0.0 {
        bytes as f64 / dt / 1e6
    } else {
        0.0
    })
}

/// The growth of a count; `None` if it went back.
fn grew(now: u64, then: u64) -> Option<f64> {
    now.checked_sub(then).map(|d| d as f64)
}

fn columns(group: char) -> &'static [Column] {
    match group {
        't' => &[
            Column {
                name: "rxpci",
                unit: "MB/s",
                value: |g, p, dt| rate(g.pcie?.bar1_rx, p.pcie?.bar1_rx, dt),
            },
            Column {
                name: "txpci",
                unit: "MB/s",
                value: |g, p, dt| rate(g.pcie?.bar1_tx, p.pcie?.bar1_tx, dt),
            },
        ],
        'm' => &[
            Column {
                name: "fb",
                unit: "MiB",
                value: |g, _, _| Some(g.fb.used as f64 / MIB),
            },
            Column {
                name: "bar1",
                unit: "MiB",
                value: |g, _, _| {
                    let mapped = g.pcie.map_or(0, |c| c.bar1_mapped);
                    Some(g.bar1.used.max(mapped) as f64 / MIB)
                },
            },
        ],
        'p' => &[
            Column {
                name: "pins",
                unit: "#",
                value: |g, _, _| Some(f64::from(g.p2p.pins)),
            },
            Column {
                name: "maps",
                unit: "#",
                value: |g, _, _| Some(f64::from(g.p2p.dma_mappings)),
            },
            Column {
                name: "dmabuf",
                unit: "#",
                value: |g, _, _| Some(f64::from(g.p2p.dmabufs)),
            },
            Column {
                name: "p2pdma",
                unit: "MiB",
                value: |g, _, _| Some(g.p2p.p2pdma_bytes as f64 / MIB),
            },
        ],
        'c' => &[
            Column {
                name: "cmpct",
                unit: "#",
                value: |g, p, _| grew(g.pmm.compactions, p.pmm.compactions),
            },
            Column {
                name: "moved",
                unit: "MiB",
                value: |g, p, _| Some(grew(g.pmm.compacted_bytes, p.pmm.compacted_bytes)? / MIB),
            },
        ],
        'e' => &[
            Column {
                name: "ce",
                unit: "#",
                value: |g, p, _| grew(g.ce?.launches, p.ce?.launches),
            },
            Column {
                name: "cemov",
                unit: "MiB",
                value: |g, p, _| Some(grew(g.ce?.bytes, p.ce?.bytes)? / MIB),
            },
        ],
        _ => &[],
    }
}

/// The columns of `-s GROUPS`, or why it is not valid (the message for exit status 2).
fn parse_groups(s: &str) -> Result<Vec<&'static Column>, String> {
    monitor::parse_groups(s, GROUPS, columns)
}

/// Checks `-s`; the error is the message for exit status 2.
pub fn check(groups: &str) -> Result<(), String> {
    parse_groups(groups).map(|_| ())
}

/// The table's columns: the GPU index, then those of the groups.
fn table(cols: &[&Column]) -> Vec<Col> {
    let gpu = Col {
        name: "gpu",
        unit: "Idx",
        width: 4,
    };
    std::iter::once(gpu)
        .chain(cols.iter().map(|c| Col {
            name: c.name,
            unit: c.unit,
            width: 7,
        }))
        .collect()
}

/// One row per GPU of `now` that `ids` selects (by PCI bus id: an index is reused once its GPU
/// is unbound), against the same GPU in `then`; `None` when none of them is left.
fn rows(
    cols: &[&Column],
    then: &Snapshot,
    now: &Snapshot,
    ids: &[String],
    dt: f64,
    format: Format,
) -> Option<String> {
    let table = table(cols);
    let mut out = String::new();
    let mut any = false;
    for g in now.gpus.iter().filter(|g| ids.contains(&g.bus_id)) {
        any = true;
        let Some(p) = then
            .gpus
            .iter()
            .find(|p| p.bus_id == g.bus_id && p.uuid == g.uuid)
        else {
            continue;
        };
        let cells: Vec<Cell> = std::iter::once(Cell::Id(Some(g.index.into())))
            .chain(cols.iter().map(|c| Cell::Num((c.value)(g, p, dt))))
            .collect();
        out += &monitor::row(&table, &cells, format);
    }
    any.then_some(out)
}

/// The monitor of `-s groups` for the GPUs whose bus ids are `ids` ([`monitor::run`]), or why
/// `groups` is not valid (the message for exit status 2).
pub fn view(groups: &str, ids: &[String], format: Format) -> Result<View, String> {
    let cols = parse_groups(groups)?;
    let header = monitor::header(&table(&cols), format);
    let ids = ids.to_vec();
    Ok(View {
        header,
        rows: Box::new(move |then, now, dt| rows(&cols, then, now, &ids, dt, format)),
    })
}
