// SPDX-License-Identifier: GPL-2.0

//! `nvrs-smi pmon`: one row per process and GPU every `-d` seconds, as `nvidia-smi pmon` prints
//! them (a GPU no process uses gets one row of `-`).
//!
//! The processes are those `NVRS_IOCTL_PROCESS_STATS` lists: each process with live
//! allocations on a GPU, as the reader's PID namespace names it. The metric groups of `-s`:
//!
//! * `m`: memory, `fb` (MiB of the process's allocations, nvidia-smi's "MB") and `allocs`
//!   (how many).
//! * `p`: peer access, `pins` (live `nvidia_p2p` pins on its allocations) and `dmabuf` (its
//!   dma-buf exports that hold memory).
//!
//! nvidia-smi's utilisation group (`u`: SM, memory, encoder and decoder busy) has no source in
//! nvrs, which runs no work on the GPU, and is not offered. A module older than
//! `NVRS_IOCTL_PROCESS_STATS` gives only the memory; the other columns print `-`.

use crate::model::{Process, Snapshot};
use crate::monitor::{self, Cell, Col, Format, View};

/// The groups `-s` knows, in the order their columns are printed.
pub const GROUPS: &str = "mp";

const MIB: f64 = 1024.0 * 1024.0;

/// A measured column: its name, unit and value for one process.
struct Column {
    name: &'static str,
    unit: &'static str,
    value: fn(&Process) -> Option<f64>,
}

fn columns(group: char) -> &'static [Column] {
    match group {
        'm' => &[
            Column {
                name: "fb",
                unit: "MB",
                value: |p| Some(p.bytes as f64 / MIB),
            },
            Column {
                name: "allocs",
                unit: "#",
                value: |p| p.allocations.map(f64::from),
            },
        ],
        'p' => &[
            Column {
                name: "pins",
                unit: "#",
                value: |p| p.pins.map(f64::from),
            },
            Column {
                name: "dmabuf",
                unit: "#",
                value: |p| p.dmabufs.map(f64::from),
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

/// The table's columns: GPU, process id and type, those of the groups, then the command.
fn table(cols: &[&Column]) -> Vec<Col> {
    let lead = [
        Col {
            name: "gpu",
            unit: "Idx",
            width: 4,
        },
        Col {
            name: "pid",
            unit: "#",
            width: 8,
        },
        Col {
            name: "type",
            unit: "C/G",
            width: 4,
        },
    ];
    let command = Col {
        name: "command",
        unit: "name",
        width: 0,
    };
    lead.into_iter()
        .chain(cols.iter().map(|c| Col {
            name: c.name,
            unit: c.unit,
            width: 7,
        }))
        .chain(std::iter::once(command))
        .collect()
}

/// The rows of `now` for the GPUs whose bus ids are `ids`: each process on each, by pid, or
/// one row of `-` for a GPU no process uses; `None` when none of the GPUs is left.
fn rows(cols: &[&Column], now: &Snapshot, ids: &[String], format: Format) -> Option<String> {
    let table = table(cols);
    let mut out = String::new();
    let mut any = false;
    for g in now.gpus.iter().filter(|g| ids.contains(&g.bus_id)) {
        any = true;
        let mut procs: Vec<&Process> = now.processes.iter().filter(|p| p.gpu == g.index).collect();
        procs.sort_by_key(|p| p.pid);
        let gpu = Cell::Id(Some(g.index.into()));
        if procs.is_empty() {
            let cells: Vec<Cell> = [gpu, Cell::Id(None), Cell::Text("-".into())]
                .into_iter()
                .chain(cols.iter().map(|_| Cell::Num(None)))
                .chain(std::iter::once(Cell::Text("-".into())))
                .collect();
            out += &monitor::row(&table, &cells, format);
        }
        for p in procs {
            let cells: Vec<Cell> = [
                Cell::Id(Some(g.index.into())),
                Cell::Id(Some(p.pid.into())),
                Cell::Text("C".into()),
            ]
            .into_iter()
            .chain(cols.iter().map(|c| Cell::Num((c.value)(p))))
            .chain(std::iter::once(Cell::Text(p.name.clone())))
            .collect();
            out += &monitor::row(&table, &cells, format);
        }
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
        rows: Box::new(move |_, now, _| rows(&cols, now, &ids, format)),
    })
}

/// The rows of all groups for `now` (the unit tests' view of [`rows`]).
#[cfg(test)]
pub fn rows_for_test(now: &Snapshot, ids: &[String], format: Format) -> String {
    let cols = parse_groups(GROUPS).unwrap_or_default();
    rows(&cols, now, ids, format).unwrap_or_default()
}
