// SPDX-License-Identifier: GPL-2.0

//! nvrs-smi: what an HPC administrator knows from `nvidia-smi`, for GPUs nvrs drives.
//!
//! It reads nvrs's stable interface, the `/dev/nvrs` ioctls of `include/uapi/nvrs.h`
//! (`NVRS_IOCTL_GPU_INFO`, `_GPU_STATS`, `_TOPOLOGY`, `_PROCESSES`, `_PMM_MAP`), into one
//! [`model::Snapshot`] and renders it the way nvidia-smi does: the summary table, `-q`,
//! `topo -m`, `nvlink -s`, `--query-gpu ... --format=csv`, and `--json` for each of them. `pmm`
//! adds what nvidia-smi cannot show: a picture of the memory manager's roots, in the terminal
//! or as an SVG file. `dmon` prints a row per GPU and interval, as `nvidia-smi dmon` does (PCIe
//! throughput from the GPU model's counters, `NVRS_IOCTL_GPU_PCIE`), `pmon` a row per process
//! and GPU (`NVRS_IOCTL_PROCESS_STATS`). `--snapshot FILE` renders a recorded `--json` instead of
//! the device (the tests' fixtures).
//!
//! Exit status: 0, 2 for bad arguments (one line on stderr), 6 if `-i` names no GPU, 9 if nvrs
//! cannot be reached (not loaded).

mod dmon;
mod model;
mod monitor;
mod pmm;
mod pmon;
mod render;
mod topo;
mod uapi;

#[allow(dead_code, unused_imports)]
#[path = "../../../hwref/mod.rs"]
mod hwref;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use model::{Gpu, Snapshot};

#[derive(Parser, Debug)]
#[command(
    name = "nvrs-smi",
    version,
    about = "nvidia-smi-style views of the GPUs nvrs drives"
)]
struct Cli {
    /// Only this GPU: an index, a PCI bus id (00000000:03:00.0 or 03:00.0) or a UUID.
    #[arg(short = 'i', long = "id", global = true)]
    id: Option<String>,
    /// Print the view as JSON.
    #[arg(long, global = true)]
    json: bool,
    /// The full report (FB and BAR1 memory usage, memory manager, P2P).
    #[arg(short = 'q', long = "query")]
    query: bool,
    /// Comma-separated fields for CSV output (see --help-query-gpu).
    #[arg(long = "query-gpu", value_name = "FIELDS")]
    query_gpu: Option<String>,
    /// Output format for --query-gpu: csv, with optional noheader and nounits.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// List the fields --query-gpu knows.
    #[arg(long = "help-query-gpu")]
    help_query_gpu: bool,
    /// The device node.
    #[arg(long, global = true, default_value = "/dev/nvrs", hide = true)]
    device: String,
    /// Render a recorded --json snapshot instead of reading the device.
    #[arg(long, global = true, value_name = "FILE")]
    snapshot: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Topology: the GPU x device matrix (-m).
    Topo {
        /// Print the matrix.
        #[arg(short = 'm', long = "matrix", required = true)]
        matrix: bool,
    },
    /// NVLink status (-s).
    Nvlink {
        /// Print each link's state and speed.
        #[arg(short = 's', long = "status", required = true)]
        status: bool,
    },
    /// The memory manager as a picture: one cell per 2 MiB root, and how free the roots are.
    Pmm {
        /// Also write the picture as an SVG file.
        #[arg(short = 'o', long = "output", value_name = "FILE.svg")]
        output: Option<String>,
        /// Plain characters instead of colours.
        #[arg(long = "no-color")]
        no_color: bool,
    },
    /// Device monitoring: one row per GPU every -d seconds (nvidia-smi dmon).
    Dmon {
        /// Seconds between rows.
        #[arg(short = 'd', long = "delay", default_value_t = 1)]
        delay: u64,
        /// Rows per GPU, then exit (0: until interrupted).
        #[arg(short = 'c', long = "count", default_value_t = 0)]
        count: u32,
        /// Metric groups: t PCIe throughput, m memory, p peer access, c compaction, e copy
        /// engine.
        #[arg(short = 's', long = "select", default_value = dmon::GROUPS)]
        select: String,
        /// csv for comma-separated rows.
        #[arg(long = "format", value_name = "FORMAT")]
        format: Option<String>,
    },
    /// Process monitoring: one row per process and GPU every -d seconds (nvidia-smi pmon).
    Pmon {
        /// Seconds between samples.
        #[arg(short = 'd', long = "delay", default_value_t = 1)]
        delay: u64,
        /// Samples, then exit (0: until interrupted).
        #[arg(short = 'c', long = "count", default_value_t = 0)]
        count: u32,
        /// Metric groups: m memory, p peer access.
        #[arg(short = 's', long = "select", default_value = pmon::GROUPS)]
        select: String,
        /// csv for comma-separated rows.
        #[arg(long = "format", value_name = "FORMAT")]
        format: Option<String>,
    },
}

/// The two monitors.
#[derive(Clone, Copy)]
enum Monitor {
    Dmon,
    Pmon,
}

/// A failure and its exit status.
struct Fail(u8, String);

/// The GPUs `-i` selects.
fn select<'a>(s: &'a Snapshot, id: Option<&str>) -> Result<Vec<&'a Gpu>, Fail> {
    let Some(id) = id else {
        return Ok(s.gpus.iter().collect());
    };
    let want = id.to_ascii_lowercase();
    let hit = s.gpus.iter().find(|g| {
        want.parse::<u32>().ok() == Some(g.index)
            || (pci_addr(&want).is_some() && pci_addr(&want) == pci_addr(&g.bus_id))
            || g.uuid.to_ascii_lowercase() == want
    });
    match hit {
        Some(g) => Ok(vec![g]),
        None => Err(Fail(6, format!("no GPU matches \"{id}\""))),
    }
}

/// A PCI address (`[domain:]bus:device.function`, any zero padding) as numbers.
fn pci_addr(s: &str) -> Option<(u32, u32, u32, u32)> {
    let (rest, func) = s.rsplit_once('.')?;
    let parts: Vec<&str> = rest.split(':').collect();
    let hex = |x: &str| u32::from_str_radix(x, 16).ok();
    let (domain, bus, dev) = match parts.as_slice() {
        [d, b, v] => (hex(d)?, hex(b)?, hex(v)?),
        [b, v] => (0, hex(b)?, hex(v)?),
        _ => return None,
    };
    Some((domain, bus, dev, hex(func)?))
}

fn load(cli: &Cli, roots: bool) -> Result<Snapshot, Fail> {
    if let Some(path) = &cli.snapshot {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Fail(2, format!("cannot read {path}: {e}")))?;
        return serde_json::from_str(&text).map_err(|e| Fail(2, format!("{path}: {e}")));
    }
    let dev = uapi::Device::open(&cli.device).map_err(|e| {
        Fail(
            9,
            format!(
                "cannot open {} ({e}): is the nvrs module loaded?",
                cli.device
            ),
        )
    })?;
    model::collect(&dev, roots).map_err(|e| Fail(9, format!("reading {}: {e}", cli.device)))
}

/// `nvrs-smi dmon` and `pmon`.
fn monitor(
    cli: &Cli,
    which: Monitor,
    delay: u64,
    count: u32,
    groups: &str,
    format: Option<&str>,
) -> Result<(), Fail> {
    let (name, checked) = match which {
        Monitor::Dmon => ("dmon", dmon::check(groups)),
        Monitor::Pmon => ("pmon", pmon::check(groups)),
    };
    checked.map_err(|e| Fail(2, e))?;
    if cli.query || cli.query_gpu.is_some() || cli.format.is_some() {
        return Err(Fail(
            2,
            format!("{name} takes its own --format, and neither -q nor --query-gpu"),
        ));
    }
    let format = monitor::format(format, cli.json).map_err(|e| Fail(2, e))?;
    // A recorded snapshot does not change; the device is not read in a busy loop.
    if delay == 0 && cli.snapshot.is_none() {
        return Err(Fail(2, "-d must be at least 1 second".into()));
    }
    let first = load(cli, false)?;
    let ids: Vec<String> = select(&first, cli.id.as_deref())?
        .iter()
        .map(|g| g.bus_id.clone())
        .collect();
    if ids.is_empty() {
        return Err(Fail(6, "no GPU to monitor".into()));
    }
    let delay = std::time::Duration::from_secs(delay);
    let load = || load(cli, false).map_err(|Fail(_, m)| m);
    let view = match which {
        Monitor::Dmon => dmon::view(groups, &ids, format),
        Monitor::Pmon => pmon::view(groups, &ids, format),
    }
    .map_err(|e| Fail(2, e))?;
    monitor::run(view, delay, count, load).map_err(|(code, m)| Fail(code, m))
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

fn run(cli: &Cli) -> Result<String, Fail> {
    if cli.help_query_gpu {
        return Ok(render::FIELDS.join("\n") + "\n");
    }
    let wants_map = matches!(cli.command, Some(Command::Pmm { .. }));
    let s = load(cli, wants_map)?;
    let gpus = select(&s, cli.id.as_deref())?;
    match &cli.command {
        Some(Command::Topo { .. }) => Ok(if cli.json {
            json(&s.topology)
        } else {
            topo::matrix(&s)
        }),
        Some(Command::Nvlink { .. }) => Ok(if cli.json {
            let v: Vec<_> = gpus
                .iter()
                .map(|g| serde_json::json!({"index": g.index, "uuid": g.uuid, "nvlink": g.nvlink}))
                .collect();
            json(&v)
        } else {
            topo::nvlink(&s, &gpus)
        }),
        Some(Command::Pmm { output, no_color }) => {
            let mut out = String::new();
            if cli.json {
                let v: Vec<_> = gpus
                    .iter()
                    .map(|g| serde_json::json!({"gpu": g, "histogram": pmm::histogram(g)}))
                    .collect();
                out = json(&v);
            } else {
                let colour = !no_color
                    && std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none();
                for g in &gpus {
                    out += &pmm::terminal(g, colour);
                }
            }
            if let Some(path) = output {
                let g = gpus.first().ok_or(Fail(6, "no GPU".into()))?;
                std::fs::write(path, pmm::svg(g))
                    .map_err(|e| Fail(1, format!("cannot write {path}: {e}")))?;
                if !cli.json {
                    out += &format!("wrote the memory map of GPU {} to {path}\n", g.index);
                }
            }
            Ok(out)
        }
        None if cli.query_gpu.is_some() => {
            let fields = render::check_fields(cli.query_gpu.as_deref().unwrap_or(""))
                .map_err(|e| Fail(2, e))?;
            let format = cli.format.as_deref().unwrap_or("csv");
            let opts: Vec<&str> = format.split(',').map(str::trim).collect();
            if opts.first() != Some(&"csv")
                || opts
                    .iter()
                    .skip(1)
                    .any(|o| !["noheader", "nounits"].contains(o))
            {
                return Err(Fail(
                    2,
                    format!("--format=\"{format}\" is not valid (csv[,noheader][,nounits])"),
                ));
            }
            if cli.json {
                let v: Vec<_> = gpus
                    .iter()
                    .map(|g| {
                        let csv = render::csv(&[g], &fields, false, false);
                        let vals: Vec<&str> = csv.trim_end().split(", ").collect();
                        fields
                            .iter()
                            .zip(vals)
                            .map(|(f, v)| (f.clone(), serde_json::Value::String(v.to_string())))
                            .collect::<serde_json::Map<_, _>>()
                    })
                    .collect();
                return Ok(json(&v));
            }
            Ok(render::csv(
                &gpus,
                &fields,
                !opts.contains(&"noheader"),
                !opts.contains(&"nounits"),
            ))
        }
        None if cli.format.is_some() => Err(Fail(2, "--format needs --query-gpu".into())),
        None if cli.json => {
            let mut s2 = s.clone();
            s2.gpus.retain(|g| gpus.iter().any(|x| x.index == g.index));
            Ok(json(&s2))
        }
        None if cli.query => Ok(render::query(&s, &gpus)),
        None => Ok(render::summary(&s, &gpus)),
        // main() runs the monitor itself: it prints as it goes.
        Some(Command::Dmon { .. } | Command::Pmon { .. }) => {
            Err(Fail(2, "a monitor is not a one-shot view".into()))
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            // One line, as scripts want it: clap's first line, without its usage block.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            eprintln!("nvrs-smi: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let monitored = match &cli.command {
        Some(Command::Dmon {
            delay,
            count,
            select,
            format,
        }) => Some((Monitor::Dmon, *delay, *count, select, format)),
        Some(Command::Pmon {
            delay,
            count,
            select,
            format,
        }) => Some((Monitor::Pmon, *delay, *count, select, format)),
        _ => None,
    };
    if let Some((which, delay, count, groups, format)) = monitored {
        return match monitor(&cli, which, delay, count, groups, format.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Fail(code, msg)) => {
                eprintln!("nvrs-smi: {msg}");
                ExitCode::from(code)
            }
        };
    }
    match run(&cli) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Fail(code, msg)) => {
            eprintln!("nvrs-smi: {msg}");
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests;
