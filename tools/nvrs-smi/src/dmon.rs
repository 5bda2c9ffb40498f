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
//!
//! `--format csv` prints the same rows with commas; `--json` one JSON object per row.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use crate::model::{Gpu, Snapshot};

/// The groups `-s` knows, in the order their columns are printed.
pub const GROUPS: &str = "tmpc";

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
        _ => &[],
    }
}

/// The columns of `-s GROUPS`, or why it is not valid (the message for exit status 2).
fn parse_groups(s: &str) -> Result<Vec<&'static Column>, String> {
    let mut out = Vec::new();
    for g in GROUPS.chars().filter(|g| s.contains(*g)) {
        out.extend(columns(g));
    }
    match s.chars().find(|c| !GROUPS.contains(*c)) {
        None if !out.is_empty() => Ok(out),
        c => Err(format!(
            "-s \"{s}\": '{}' is not a metric group (groups: {GROUPS})",
            c.unwrap_or(' ')
        )),
    }
}

/// How rows are printed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// Checks `-s`; the error is the message for exit status 2.
pub fn check(groups: &str) -> Result<(), String> {
    parse_groups(groups).map(|_| ())
}

fn header(cols: &[&Column], format: Format) -> String {
    let mut out = String::new();
    match format {
        Format::Json => {}
        Format::Csv => {
            let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            let units: Vec<&str> = cols.iter().map(|c| c.unit).collect();
            let _ = writeln!(out, "#gpu, {}", names.join(", "));
            let _ = writeln!(out, "#Idx, {}", units.join(", "));
        }
        Format::Table => {
            let _ = write!(out, "# gpu");
            for c in cols {
                let _ = write!(out, " {:>7}", c.name);
            }
            let _ = write!(out, "\n# Idx");
            for c in cols {
                let _ = write!(out, " {:>7}", c.unit);
            }
            out.push('\n');
        }
    }
    out
}

fn cell(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
    }
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
        let vals: Vec<Option<f64>> = cols.iter().map(|c| (c.value)(g, p, dt)).collect();
        match format {
            Format::Table => {
                let _ = write!(out, " {:>4}", g.index);
                for v in &vals {
                    let _ = write!(out, " {:>7}", cell(*v));
                }
                out.push('\n');
            }
            Format::Csv => {
                let cells: Vec<String> = vals.iter().map(|v| cell(*v)).collect();
                let _ = writeln!(out, "{}, {}", g.index, cells.join(", "));
            }
            Format::Json => {
                let mut m = serde_json::Map::new();
                m.insert("gpu".into(), g.index.into());
                for (c, v) in cols.iter().zip(&vals) {
                    let unit = match c.unit {
                        "MB/s" => "mbps",
                        "MiB" => "mib",
                        _ => "count",
                    };
                    let key = format!("{}_{unit}", c.name);
                    let value = match v {
                        None => serde_json::Value::Null,
                        Some(x) if c.unit == "#" => serde_json::Value::from(*x as u64),
                        Some(x) => serde_json::Value::from(*x),
                    };
                    m.insert(key, value);
                }
                let _ = writeln!(out, "{}", serde_json::Value::Object(m));
            }
        }
    }
    any.then_some(out)
}

/// Why the monitor stopped: the exit status and a message.
pub type Stop = (u8, String);

/// Prints the header, then `count` samples (0: until killed) `delay` apart, reading a new
/// snapshot with `load` each time, for the GPUs whose bus ids are `ids`. Rows are flushed as
/// they are printed. Stops with status 6 once none of the GPUs is left, 9 when a snapshot
/// cannot be read, 1 when stdout fails (a closed pipe ends it quietly, status 0).
pub fn run(
    groups: &str,
    delay: Duration,
    count: u32,
    ids: &[String],
    format: Format,
    mut load: impl FnMut() -> Result<Snapshot, String>,
) -> Result<(), Stop> {
    let cols = parse_groups(groups).map_err(|e| (2, e))?;
    let mut out = std::io::stdout().lock();
    let mut put = |text: &str| -> Result<bool, Stop> {
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err((1, format!("writing the rows: {e}"))),
        }
    };
    if !put(&header(&cols, format))? {
        return Ok(());
    }
    let mut then = load().map_err(|e| (9, e))?;
    let mut at = Instant::now();
    let mut n = 0;
    while count == 0 || n < count {
        std::thread::sleep(delay);
        let now = load().map_err(|e| (9, e))?;
        let t = Instant::now();
        let dt = t.duration_since(at).as_secs_f64();
        let text = rows(&cols, &then, &now, ids, dt, format)
            .ok_or((6, "the selected GPUs are gone".to_string()))?;
        if !put(&text)? {
            return Ok(());
        }
        (then, at) = (now, t);
        n += 1;
    }
    Ok(())
}
