// SPDX-License-Identifier: GPL-2.0

//! Link classification between two PCI endpoints, as `nvidia-smi topo -m` names it.
//!
//! Every endpoint (a GPU or a peer device such as a NIC) is described by where it sits: its host
//! bridge (PCI domain and root bus), its NUMA node, the chain of bridges from the root port down
//! to it, and, for GPUs, the NVLinks it declares. From two such descriptions follows the path
//! traffic between them takes:
//!
//! | name  | path                                                                   |
//! |-------|------------------------------------------------------------------------|
//! | `X`   | the device itself                                                      |
//! | `NV#` | `#` NVLinks that both ends declare to each other                       |
//! | `PIX` | at most one PCIe switch (or bridge)                                     |
//! | `PXB` | several PCIe switches, without the host bridge                         |
//! | `PHB` | PCIe and the host bridge (the CPU's root complex)                      |
//! | `NODE`| PCIe and the interconnect between host bridges within a NUMA node      |
//! | `SYS` | PCIe and the SMP interconnect between NUMA nodes (QPI/UPI, Infinity)   |
//!
//! and whether peer-to-peer DMA is allowed on that path ([`P2pPath`]): NVLink and switch paths
//! are; a path through the host bridge only where the platform's root complex forwards
//! peer-to-peer traffic (the kernel's P2PDMA allow-list decides at run time); paths between host
//! bridges are not, like NVIDIA's own topology check.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

use core::fmt;

/// Deepest bridge chain nvrs records for an endpoint.
pub(crate) const MAX_HOPS: usize = 8;

/// What kind of bridge a hop is (from the PCIe capability's device/port type).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortKind {
    /// A root port of the root complex.
    RootPort,
    /// The upstream port of a PCIe switch.
    SwitchUpstream,
    /// A downstream port of a PCIe switch.
    SwitchDownstream,
    /// Any other bridge (PCIe-to-PCI, conventional PCI-to-PCI).
    Bridge,
}

/// One bridge on the way from the root complex to an endpoint.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Hop {
    /// The bridge's routing id: `domain << 16 | bus << 8 | devfn`.
    pub(crate) id: u64,
    /// What kind of bridge it is.
    pub(crate) kind: PortKind,
}

/// NVLinks an endpoint declares.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct NvLinkEnd {
    /// The GPU's index among the NVLink-connected GPUs.
    pub(crate) index: u8,
    /// Bit `i`: links to the GPU with index `i`.
    pub(crate) peers: u32,
    /// Links to each peer.
    pub(crate) links: u8,
}

/// Where an endpoint sits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Endpoint {
    /// The endpoint's routing id: `domain << 16 | bus << 8 | devfn`.
    pub(crate) id: u64,
    /// The host bridge: `domain << 8 | root bus number`.
    pub(crate) host_bridge: u32,
    /// NUMA node of the host bridge, if the platform reports one.
    pub(crate) numa: Option<u16>,
    /// Bridges from the root complex down to the endpoint, root first.
    hops: [Hop; MAX_HOPS],
    /// Number of valid entries in `hops`.
    n_hops: u8,
    /// Declared NVLinks, for GPUs.
    pub(crate) nvlink: Option<NvLinkEnd>,
}

/// A bridge chain longer than [`MAX_HOPS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TooDeep;

impl Endpoint {
    /// Describes an endpoint; `hops` lists its upstream bridges, root first.
    pub(crate) fn new(
        id: u64,
        host_bridge: u32,
        numa: Option<u16>,
        hops: &[Hop],
    ) -> Result<Self, TooDeep> {
        if hops.len() > MAX_HOPS {
            return Err(TooDeep);
        }
        let mut h = [Hop {
            id: 0,
            kind: PortKind::Bridge,
        }; MAX_HOPS];
        for (dst, src) in h.iter_mut().zip(hops) {
            *dst = *src;
        }
        let n_hops = u8::try_from(hops.len()).map_err(|_| TooDeep)?;
        Ok(Self {
            id,
            host_bridge,
            numa,
            hops: h,
            n_hops,
            nvlink: None,
        })
    }

    /// An endpoint whose position could not be read: its own host bridge and no NUMA node, so
    /// it is `SYS` from everything else.
    pub(crate) fn unknown(id: u64) -> Self {
        Self {
            id,
            host_bridge: u32::MAX,
            numa: None,
            hops: [Hop {
                id: 0,
                kind: PortKind::Bridge,
            }; MAX_HOPS],
            n_hops: 0,
            nvlink: None,
        }
    }

    /// The bridges from the root complex down to the endpoint.
    pub(crate) fn hops(&self) -> &[Hop] {
        self.hops.get(..usize::from(self.n_hops)).unwrap_or(&[])
    }
}

/// The link between two endpoints.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Link {
    /// The same endpoint.
    Itself,
    /// NVLinks, with their count.
    Nv(u8),
    /// At most one PCIe switch.
    Pix,
    /// Several PCIe switches, no host bridge.
    Pxb,
    /// Through the host bridge.
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Between NUMA nodes.
    Sys,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Itself => f.write_str("X"),
            Self::Nv(n) => write!(f, "NV{n}"),
            Self::Pix => f.write_str("PIX"),
            Self::Pxb => f.write_str("PXB"),
            Self::Phb => f.write_str("PHB"),
            Self::Node => f.write_str("NODE"),
            Self::Sys => f.write_str("SYS"),
        }
    }
}

/// Whether, and how, peer-to-peer DMA may use a link.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum P2pPath {
    /// Over NVLink.
    NvLink,
    /// Through PCIe switches, without touching the root complex.
    PcieSwitch,
    /// Through the root complex: only where the platform forwards peer traffic there.
    HostBridge,
    /// Not supported on this path.
    Unsupported,
}

impl P2pPath {
    /// The P2P path a link offers.
    pub(crate) fn of(link: Link) -> Self {
        match link {
            Link::Itself | Link::Pix | Link::Pxb => Self::PcieSwitch,
            Link::Nv(_) => Self::NvLink,
            Link::Phb => Self::HostBridge,
            Link::Node | Link::Sys => Self::Unsupported,
        }
    }

    /// A short name for the path.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::NvLink => "NVLink",
            Self::PcieSwitch => "PCIe switch",
            Self::HostBridge => "host bridge",
            Self::Unsupported => "none",
        }
    }
}

/// How the P2P topology gate is overridden (module parameter `p2p_topology`), like NVIDIA's
/// `NVreg_GrdmaPciTopoCheckOverride`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum GateOverride {
    /// Decide from the topology (the default).
    Auto,
    /// Allow peer-to-peer DMA on every path.
    AllowAll,
    /// Refuse peer-to-peer DMA on every path.
    DenyAll,
}

impl GateOverride {
    /// From the parameter value: 0 auto, 1 allow, 2 deny; anything else is auto.
    pub(crate) fn from_param(v: u32) -> Self {
        match v {
            1 => Self::AllowAll,
            2 => Self::DenyAll,
            _ => Self::Auto,
        }
    }
}

/// The P2P gate: whether memory of one endpoint may be DMA-mapped for another.
///
/// `kernel_distance` is the kernel's P2PDMA verdict for the pair (`pci_p2pdma_distance`;
/// negative means refused), consulted for paths through the host bridge, where only the
/// platform knows whether the root complex forwards peer traffic.
pub(crate) fn p2p_allowed(link: Link, kernel_distance: i32, gate: GateOverride) -> bool {
    match gate {
        GateOverride::AllowAll => true,
        GateOverride::DenyAll => false,
        GateOverride::Auto => match P2pPath::of(link) {
            P2pPath::NvLink | P2pPath::PcieSwitch => true,
            P2pPath::HostBridge => kernel_distance >= 0,
            P2pPath::Unsupported => false,
        },
    }
}

/// Number of switches (or other bridges that are not root ports) in `hops`.
fn switches(hops: &[Hop]) -> usize {
    hops.iter()
        .filter(|h| matches!(h.kind, PortKind::SwitchUpstream | PortKind::Bridge))
        .count()
}

/// Classifies the link between `a` and `b`.
pub(crate) fn classify(a: &Endpoint, b: &Endpoint) -> Link {
    if a.id == b.id {
        return Link::Itself;
    }
    if let (Some(x), Some(y)) = (a.nvlink, b.nvlink) {
        let x_to_y = 1u32
            .checked_shl(u32::from(y.index))
            .is_some_and(|bit| x.peers & bit != 0);
        let y_to_x = 1u32
            .checked_shl(u32::from(x.index))
            .is_some_and(|bit| y.peers & bit != 0);
        if x_to_y && y_to_x && x.links != 0 && y.links != 0 {
            return Link::Nv(x.links.min(y.links));
        }
    }
    if a.host_bridge != b.host_bridge {
        return if a.numa == b.numa {
            Link::Node
        } else {
            Link::Sys
        };
    }
    let (ha, hb) = (a.hops(), b.hops());
    let common = ha
        .iter()
        .zip(hb.iter())
        .take_while(|(x, y)| x.id == y.id)
        .count();
    if common == 0 {
        // Different root ports (or both on the root bus): the root complex forwards.
        return Link::Phb;
    }
    // The lowest common bridge is a switch port when the paths meet inside a switch.
    let meet_in_switch = ha
        .get(common - 1)
        .is_some_and(|h| h.kind != PortKind::RootPort);
    let below =
        switches(ha.get(common..).unwrap_or(&[])) + switches(hb.get(common..).unwrap_or(&[]));
    if below + usize::from(meet_in_switch) <= 1 {
        Link::Pix
    } else {
        Link::Pxb
    }
}

/// The GPU × device matrix of `nvidia-smi topo -m`: a row and a column per GPU, then per peer
/// device, followed by each GPU's CPU and NUMA affinity and the legend.
pub(crate) struct Matrix<'a> {
    /// The GPUs, labelled `GPU0`, `GPU1`, ...
    pub(crate) gpus: &'a [Endpoint],
    /// Peer devices (NICs and other DMA peers), labelled `NIC0`, `NIC1`, ...
    pub(crate) peers: &'a [Endpoint],
    /// Each GPU's CPU affinity (a cpulist such as `0-15`), in `gpus` order.
    pub(crate) cpu_affinity: &'a [&'a str],
}

const COL: usize = 8;

struct Label(bool, usize);

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.0 { "GPU" } else { "NIC" };
        let mut b = LabelBuf::default();
        fmt::write(&mut b, format_args!("{kind}{}", self.1))?;
        f.pad(b.as_str())
    }
}

/// A tiny stack buffer for one matrix label.
#[derive(Default)]
struct LabelBuf {
    buf: [u8; 16],
    len: usize,
}

impl LabelBuf {
    fn as_str(&self) -> &str {
        core::str::from_utf8(self.buf.get(..self.len).unwrap_or(&[])).unwrap_or("?")
    }
}

impl fmt::Write for LabelBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Matrix<'_> {
    fn endpoint(&self, i: usize) -> Option<(Label, &Endpoint)> {
        let n = self.gpus.len();
        match self.gpus.get(i) {
            Some(e) => Some((Label(true, i), e)),
            None => {
                let k = i.checked_sub(n)?;
                self.peers.get(k).map(|e| (Label(false, k), e))
            }
        }
    }
}

impl fmt::Display for Matrix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.gpus.len() + self.peers.len();
        write!(f, "{:COL$}", "")?;
        for i in 0..n {
            if let Some((label, _)) = self.endpoint(i) {
                write!(f, "{label:<COL$}")?;
            }
        }
        writeln!(
            f,
            "{:<16}{:<16}GPU NUMA ID",
            "CPU Affinity", "NUMA Affinity"
        )?;
        for i in 0..n {
            let Some((label, a)) = self.endpoint(i) else {
                continue;
            };
            write!(f, "{label:<COL$}")?;
            for j in 0..n {
                if let Some((_, b)) = self.endpoint(j) {
                    let cell = LinkCell(classify(a, b));
                    write!(f, "{cell:<COL$}")?;
                }
            }
            if i < self.gpus.len() {
                let cpus = self.cpu_affinity.get(i).copied().unwrap_or("N/A");
                let cpus = if cpus.is_empty() { "N/A" } else { cpus };
                match a.numa {
                    Some(node) => write!(f, "{cpus:<16}{node:<16}N/A")?,
                    None => write!(f, "{cpus:<16}{:<16}N/A", "N/A")?,
                }
            }
            writeln!(f)?;
        }
        writeln!(f)?;
        writeln!(f, "Legend:")?;
        writeln!(f)?;
        writeln!(f, "  X    = Self")?;
        writeln!(f, "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes")?;
        writeln!(f, "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node")?;
        writeln!(
            f,
            "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"
        )?;
        writeln!(f, "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)")?;
        writeln!(
            f,
            "  PIX  = Connection traversing at most a single PCIe bridge"
        )?;
        writeln!(
            f,
            "  NV#  = Connection traversing a bonded set of # NVLinks"
        )?;
        if !self.peers.is_empty() {
            writeln!(f)?;
            writeln!(f, "NIC Legend:")?;
            writeln!(f)?;
            for (i, p) in self.peers.iter().enumerate() {
                writeln!(f, "  NIC{i}: {}", Bdf(p.id))?;
            }
        }
        Ok(())
    }
}

/// A link as a padded matrix cell.
struct LinkCell(Link);

impl fmt::Display for LinkCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut b = LabelBuf::default();
        fmt::write(&mut b, format_args!("{}", self.0))?;
        f.pad(b.as_str())
    }
}

/// A routing id printed as a PCI address, `dddd:bb:dd.f`.
pub(crate) struct Bdf(pub(crate) u64);

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (domain, bus, devfn) = (self.0 >> 16, (self.0 >> 8) & 0xff, self.0 & 0xff);
        write!(f, "{domain:04x}:{bus:02x}:{:02x}.{}", devfn >> 3, devfn & 7)
    }
}
