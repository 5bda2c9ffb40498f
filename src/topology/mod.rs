// SPDX-License-Identifier: GPL-2.0

//! Peer topology: how GPUs and peer devices reach each other, and whether P2P may use the path.
//!
//! [`link`] classifies a pair of endpoints the way `nvidia-smi topo -m` does (NV#, PIX, PXB,
//! PHB, NODE, SYS) from the PCI hierarchy, NUMA nodes and declared NVLinks, and decides the P2P
//! gate. This file gathers the live descriptions (through `rust/helpers.c`) and renders
//! `debugfs/nvrs/topology`: the matrix in nvidia-smi's layout, then one line per GPU and
//! device saying whether GPU memory may be DMA-mapped for that device, by which path, and last
//! the counters and pairs of the remembered P2PDMA distances ([`distance`]).
//!
//! Peer devices are network/InfiniBand controllers and the functions matching the
//! `peer_device` module parameter.

pub(crate) mod cache;
pub(crate) mod distance;
pub(crate) mod link;

use core::fmt;

use kernel::prelude::*;

use crate::{
    gpu::{
        self,
        GpuInfo, //
    },
    helpers::{
        self,
        RawEndpoint, //
    },
};

pub(crate) use link::Link;

use link::{
    classify,
    p2p_allowed,
    Bdf,
    Endpoint,
    GateOverride,
    Matrix,
    NvLinkEnd,
    P2pPath, //
};

/// Most peer devices listed.
const MAX_PEERS: usize = 32;

/// A GPU's endpoint with its declared NVLinks.
pub(crate) fn gpu_endpoint(g: &GpuInfo) -> Endpoint {
    let mut e = g.endpoint;
    if let Some(index) = g.emu_index {
        if g.nvlink.peers != 0 {
            e.nvlink = Some(NvLinkEnd {
                index,
                peers: g.nvlink.peers,
                links: g.nvlink.links_per_peer,
            });
        }
    }
    e
}

/// The P2P gate for GPU `g` exporting memory to the endpoint `peer`.
pub(crate) fn p2p_gate(g: &GpuInfo, peer: &Endpoint) -> (link::Link, i32, bool) {
    let l = classify(&gpu_endpoint(g), peer);
    let distance = distance::distance(&g.pdev, g.endpoint.id, peer.id);
    let gate = GateOverride::from_param(crate::p2p_topology());
    (l, distance, p2p_allowed(l, distance, gate))
}

/// The topology as tools read it (`NVRS_IOCTL_TOPOLOGY`): the GPUs, then up to
/// `max - gpus` peer devices; `endpoint(i, e, cpus)` for each, then `pair(i, j, link, allowed)`
/// for every pair, `allowed` being the P2P gate's verdict for GPU `i`'s memory and endpoint `j`
/// (`None` for rows that are not GPUs). Returns `(gpus, peers)`.
pub(crate) fn snapshot(
    max: usize,
    mut endpoint: impl FnMut(usize, &Endpoint, &str),
    mut pair: impl FnMut(usize, usize, Link, Option<bool>),
) -> Result<(usize, usize)> {
    let gpus = gpu::all()?;
    let mut eps = KVec::with_capacity(max, GFP_KERNEL)?;
    for g in gpus.iter().take(max) {
        eps.push(gpu_endpoint(g), GFP_KERNEL)?;
    }
    let ngpus = eps.len();
    let mut raw = KVec::with_capacity(MAX_PEERS, GFP_KERNEL)?;
    for _ in 0..MAX_PEERS {
        raw.push(RawEndpoint::default(), GFP_KERNEL)?;
    }
    let n = helpers::pci_peers(crate::peer_device(), &mut raw);
    for r in raw.iter().take(n) {
        if eps.len() == max {
            break;
        }
        if let Ok(e) = r.endpoint() {
            eps.push(e, GFP_KERNEL)?;
        }
    }
    let mut cpus = [0u8; 64];
    for (i, e) in eps.iter().enumerate() {
        let list = if i < ngpus {
            helpers::node_cpulist(e.numa, &mut cpus)
        } else {
            ""
        };
        endpoint(i, e, list);
    }
    for (i, a) in eps.iter().enumerate() {
        for (j, b) in eps.iter().enumerate() {
            let link = classify(a, b);
            let allowed =
                gpus.get(i).filter(|_| i < ngpus).map(
                    |g| {
                        if i == j {
                            true
                        } else {
                            p2p_gate(g, b).2
                        }
                    },
                );
            pair(i, j, link, allowed);
        }
    }
    Ok((ngpus, eps.len() - ngpus))
}

/// Renders `debugfs/nvrs/topology`.
pub(crate) fn render(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let gpus = gpu::all().map_err(|_| fmt::Error)?;
    let mut gpu_eps = KVec::with_capacity(gpus.len(), GFP_KERNEL).map_err(|_| fmt::Error)?;
    let mut cpus = KVec::with_capacity(gpus.len(), GFP_KERNEL).map_err(|_| fmt::Error)?;
    for g in gpus.iter() {
        let e = gpu_endpoint(g);
        gpu_eps.push(e, GFP_KERNEL).map_err(|_| fmt::Error)?;
        cpus.push([0u8; 64], GFP_KERNEL).map_err(|_| fmt::Error)?;
    }
    let mut raw = KVec::with_capacity(MAX_PEERS, GFP_KERNEL).map_err(|_| fmt::Error)?;
    for _ in 0..MAX_PEERS {
        raw.push(RawEndpoint::default(), GFP_KERNEL)
            .map_err(|_| fmt::Error)?;
    }
    let n = helpers::pci_peers(crate::peer_device(), &mut raw);
    let mut peers = KVec::with_capacity(n, GFP_KERNEL).map_err(|_| fmt::Error)?;
    for r in raw.iter().take(n) {
        if let Ok(e) = r.endpoint() {
            peers.push(e, GFP_KERNEL).map_err(|_| fmt::Error)?;
        }
    }
    let mut affinity: KVec<&str> =
        KVec::with_capacity(gpus.len(), GFP_KERNEL).map_err(|_| fmt::Error)?;
    for (buf, e) in cpus.iter_mut().zip(gpu_eps.iter()) {
        affinity
            .push(helpers::node_cpulist(e.numa, buf), GFP_KERNEL)
            .map_err(|_| fmt::Error)?;
    }
    write!(
        f,
        "{}",
        Matrix {
            gpus: &gpu_eps,
            peers: &peers,
            cpu_affinity: &affinity
        }
    )?;
    writeln!(f)?;
    writeln!(
        f,
        "P2P (GPU memory DMA-mapped for the device), gate {:?}:",
        GateOverride::from_param(crate::p2p_topology())
    )?;
    for (i, g) in gpus.iter().enumerate() {
        let gpu_peers = gpu_eps
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(j, e)| (true, j, e));
        let dev_peers = peers.iter().enumerate().map(|(j, e)| (false, j, e));
        let others = Iterator::chain(gpu_peers, dev_peers);
        for (is_gpu, j, e) in others {
            let (l, distance, allowed) = p2p_gate(g, e);
            let kind = if is_gpu { "GPU" } else { "NIC" };
            writeln!(
                f,
                "  GPU{i} -> {kind}{j} ({}): {l}, {}, kernel p2pdma distance {distance}: {}",
                Bdf(e.id),
                P2pPath::of(l).name(),
                if allowed { "allowed" } else { "refused" }
            )?;
        }
    }
    writeln!(f)?;
    distance::render(f)
}
