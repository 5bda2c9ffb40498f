// SPDX-License-Identifier: GPL-2.0

//! What nvrs-smi knows of the GPUs: one snapshot, read from `/dev/nvrs` ([`collect`]) or from a
//! recorded JSON file (the tests' fixtures). Every view renders from it, and `--json` prints it.

use serde::{Deserialize, Serialize};

use crate::hwref;
use crate::uapi::{self, Device};

/// Everything the views show.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// When it was read, as nvidia-smi prints it (`Thu Dec  3 03:04:15 2026`).
    pub timestamp: String,
    /// The driver ("nvrs") and this tool's version.
    pub driver_version: String,
    pub gpus: Vec<Gpu>,
    pub topology: Topology,
    pub processes: Vec<Process>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Gpu {
    pub index: u32,
    /// `00000000:03:00.0`, nvidia-smi's form.
    pub bus_id: String,
    /// The chip, e.g. `GH100`.
    pub name: String,
    pub chipset: u32,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    pub uuid: String,
    pub fb: Memory,
    pub bar1: Memory,
    pub pmm: Pmm,
    pub p2p: P2p,
    /// NVLink of the chip (hwref), if it has it: `(links, GB/s per link and direction)`.
    pub nvlink: Option<(u8, f64)>,
    /// BAR1 traffic counters (`NVRS_IOCTL_GPU_PCIE`), on GPUs that have them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<Pcie>,
    /// The copy engine nvrs scrubs and compacts with (`NVRS_IOCTL_GPU_COPY_ENGINE`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce: Option<CopyEngine>,
    /// One byte per 2 MiB root (`NVRS_ROOT_*`), only when a view needs the map.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<u8>,
}

/// A GPU's copy-engine counters, since its reset.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct CopyEngine {
    /// Transfers carried out.
    pub launches: u64,
    /// Bytes copied or filled.
    pub bytes: u64,
}

/// A GPU's BAR1 traffic counters, since its reset.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Pcie {
    /// Bytes written into BAR1 (what the GPU received).
    pub bar1_rx: u64,
    /// Bytes read from BAR1 (what it sent).
    pub bar1_tx: u64,
    /// Bytes of BAR1 mapped through nvrs's page tables.
    pub bar1_mapped: u64,
    /// BAR1 accesses that did not translate.
    pub bar1_faults: u32,
    /// TLB invalidates.
    pub tlb_invalidates: u32,
}

/// Bytes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Memory {
    pub total: u64,
    pub used: u64,
    pub free: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Pmm {
    pub free_zeroed: u64,
    pub largest_free: u64,
    pub fragmentation_permille: u32,
    pub alloc_failures: u64,
    pub compactions: u64,
    pub compacted_bytes: u64,
    /// Chunk sizes, smallest first, with their counts per state.
    pub chunks: Vec<ChunkCount>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct ChunkCount {
    pub size: u64,
    pub free: u64,
    pub allocated: u64,
    pub split: u64,
    pub temp_pinned: u64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct P2p {
    pub pins: u32,
    pub dma_mappings: u32,
    pub dmabufs: u32,
    pub dmabuf_mappings: u32,
    /// The GPU's fault controls (nvrs's `faults` debugfs file): calls made to fail, pins
    /// revoked, and the BAR1 budget (0: none).
    #[serde(default)]
    pub faults_injected: u64,
    #[serde(default)]
    pub faults_revoked: u64,
    #[serde(default)]
    pub bar1_budget: u64,
    /// The GPU's memory as a P2PDMA provider (struct pages for storage DMA), and the bytes of
    /// allocations made of them.
    #[serde(default)]
    pub p2pdma_provider: bool,
    #[serde(default)]
    pub p2pdma_bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Topology {
    /// The GPUs come first among the endpoints.
    pub gpus: usize,
    pub endpoints: Vec<Endpoint>,
    /// `link[i][j]` as nvidia-smi names it: `X`, `NV4`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`.
    pub link: Vec<Vec<String>>,
    /// Whether GPU `i`'s memory may be DMA-mapped for endpoint `j` (rows of GPUs only).
    pub p2p: Vec<Vec<bool>>,
    /// The `p2p_topology` parameter: 0 by topology, 1 allow, 2 deny.
    pub gate: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Endpoint {
    /// `GPU0`, `NIC0`, ...
    pub label: String,
    /// `0000:03:00.0`.
    pub pci: String,
    pub numa_node: Option<u32>,
    /// For GPUs: the CPUs near it, as a cpulist.
    pub cpu_affinity: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Process {
    pub gpu: u32,
    pub pid: i32,
    pub name: String,
    pub bytes: u64,
    /// Live allocations, pins on them and their dma-buf exports (`NVRS_IOCTL_PROCESS_STATS`;
    /// absent from a module older than it, and from older recordings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dmabufs: Option<u32>,
}

/// The link code of `NVRS_LINK_*` as nvidia-smi names it.
fn link_name(code: u8) -> String {
    if let Some(n) = uapi::link_nvlinks(code) {
        return format!("NV{n}");
    }
    match code {
        uapi::LINK_SELF => "X".into(),
        uapi::LINK_PIX => "PIX".into(),
        uapi::LINK_PXB => "PXB".into(),
        uapi::LINK_PHB => "PHB".into(),
        uapi::LINK_NODE => "NODE".into(),
        uapi::LINK_SYS => "SYS".into(),
        _ => "?".into(),
    }
}

fn bdf(id: u32) -> String {
    let (domain, bus, devfn) = (id >> 16, (id >> 8) & 0xff, id & 0xff);
    format!("{domain:04x}:{bus:02x}:{:02x}.{}", devfn >> 3, devfn & 7)
}

fn uuid(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn timestamp() -> String {
    // SAFETY: `time(NULL)` and `localtime_r` into a local `tm`; `strftime` writes at most
    // `buf.len()` bytes.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        let mut buf = [0u8; 64];
        let n = libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            c"%a %b %e %H:%M:%S %Y".as_ptr(),
            &tm,
        );
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// The name of process `pid` (`/proc/PID/comm`), or `-`.
fn process_name(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "-".into())
}

/// The highest GPU index `collect` looks at, plus one.
const MAX_INDEX: u32 = 256;

/// Reads a snapshot from `dev`; with `roots`, the memory maps too.
pub fn collect(dev: &Device, roots: bool) -> std::io::Result<Snapshot> {
    let mut gpus = Vec::new();
    // Indices are not dense: an unbound GPU leaves its index free (ENODEV) until a new one
    // takes it. nvrs binds at most 32 emulated GPUs and a machine has no more real ones.
    let count = dev.gpu_count()? as usize;
    for i in 0..MAX_INDEX {
        if gpus.len() == count {
            break;
        }
        let info = match dev.gpu_info(i) {
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => continue,
            r => r?,
        };
        let st = dev.gpu_stats(i)?;
        // Later versions only add fields in place of reserved ones.
        if st.version < uapi::STATS_VERSION {
            return Err(std::io::Error::other(format!(
                "nvrs reports statistics version {}, nvrs-smi needs {}",
                st.version,
                uapi::STATS_VERSION
            )));
        }
        let chip = uapi::c_str(&info.chip);
        let nvlink = hwref::table_for_arch((info.chipset >> 4) as u8)
            .and_then(|t| t.chipset(info.chipset as u16))
            .and_then(|c| c.nvlink)
            .map(|n| (n.links, f64::from(n.link_mbps_per_direction) / 1000.0));
        let levels = (st.chunk_levels as usize).min(uapi::CHUNK_SIZES);
        let chunks = (0..levels)
            .map(|l| ChunkCount {
                size: st.chunk_size[l],
                free: st.chunks[0][l],
                allocated: st.chunks[1][l],
                split: st.chunks[2][l],
                temp_pinned: st.chunks[3][l],
            })
            .collect();
        let name = uapi::c_str(&info.name);
        let bar1_total = match st.bar1_budget {
            0 => st.bar1_total,
            b => b.min(st.bar1_total),
        };
        gpus.push(Gpu {
            index: i,
            bus_id: format!("0000{}", name.to_uppercase()),
            name: chip,
            chipset: info.chipset,
            uuid: uuid(&info.uuid),
            fb: Memory {
                total: st.fb_total,
                used: st.fb_used,
                free: st.fb_free,
            },
            // A BAR1 budget (a fault control) is the BAR1 a consumer can use.
            bar1: Memory {
                total: bar1_total,
                used: st.bar1_pinned,
                free: bar1_total.saturating_sub(st.bar1_pinned),
            },
            pmm: Pmm {
                free_zeroed: st.fb_free_zeroed,
                largest_free: st.largest_free,
                fragmentation_permille: st.fragmentation_permille,
                alloc_failures: st.alloc_failures,
                compactions: st.compactions,
                compacted_bytes: st.compacted_bytes,
                chunks,
            },
            p2p: P2p {
                pins: st.pins,
                dma_mappings: st.dma_mappings,
                dmabufs: st.dmabufs,
                dmabuf_mappings: st.dmabuf_mappings,
                faults_injected: st.faults_injected,
                faults_revoked: st.faults_revoked,
                bar1_budget: st.bar1_budget,
                p2pdma_provider: st.p2pdma_state == uapi::P2PDMA_PROVIDER,
                p2pdma_bytes: st.p2pdma_bytes,
            },
            nvlink,
            // An nvrs without the ioctl (ENOTTY) has no counters either.
            pcie: dev
                .gpu_pcie(i)
                .ok()
                .filter(|c| c.flags & uapi::PCIE_COUNTERS != 0)
                .map(|c| Pcie {
                    bar1_rx: c.bar1_rx_bytes,
                    bar1_tx: c.bar1_tx_bytes,
                    bar1_mapped: c.bar1_mapped,
                    bar1_faults: c.bar1_faults,
                    tlb_invalidates: c.tlb_invalidates,
                }),
            ce: dev
                .gpu_copy_engine(i)
                .ok()
                .filter(|c| c.flags & uapi::CE_IN_USE != 0)
                .map(|c| CopyEngine {
                    launches: c.launches,
                    bytes: c.bytes,
                }),
            roots: if roots && st.fb_total != 0 {
                dev.pmm_map(i)?.0
            } else {
                Vec::new()
            },
        });
    }
    let t = dev.topology()?;
    let n = (t.gpus + t.peers) as usize;
    let endpoints = (0..n)
        .map(|i| {
            let e = &t.ep[i];
            let gpu = i < t.gpus as usize;
            Endpoint {
                label: if gpu {
                    format!("GPU{i}")
                } else {
                    format!("NIC{}", i - t.gpus as usize)
                },
                pci: bdf(e.pci_id),
                numa_node: u32::try_from(e.numa_node).ok(),
                cpu_affinity: uapi::c_str(&e.cpu_affinity),
            }
        })
        .collect();
    let topology = Topology {
        gpus: t.gpus as usize,
        endpoints,
        link: (0..n)
            .map(|i| (0..n).map(|j| link_name(t.link[i][j])).collect())
            .collect(),
        p2p: (0..t.gpus as usize)
            .map(|i| (0..n).map(|j| t.p2p[i][j] != 0).collect())
            .collect(),
        gate: t.gate,
    };
    let processes = match dev.process_stats() {
        Ok(v) => v
            .into_iter()
            .map(|p| Process {
                gpu: p.gpu,
                pid: p.pid,
                name: process_name(p.pid),
                bytes: p.bytes,
                allocations: Some(p.allocations),
                pins: Some(p.pins),
                dmabufs: Some(p.dmabufs),
            })
            .collect(),
        // A module older than NVRS_IOCTL_PROCESS_STATS: the memory only.
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => dev
            .processes()?
            .into_iter()
            .map(|p| Process {
                gpu: p.gpu,
                pid: p.pid,
                name: process_name(p.pid),
                bytes: p.bytes,
                allocations: None,
                pins: None,
                dmabufs: None,
            })
            .collect(),
        Err(e) => return Err(e),
    };
    Ok(Snapshot {
        timestamp: timestamp(),
        driver_version: format!("nvrs (nvrs-smi {})", env!("CARGO_PKG_VERSION")),
        gpus,
        topology,
        processes,
    })
}
