// SPDX-License-Identifier: GPL-2.0

//! What nvrs knows about one bound GPU, and the registry of bound GPUs.
//!
//! A [`GpuInfo`] is built once at probe time and never changes; it is shared (`Arc`) between the
//! driver data, the GPU's debugfs `info` file and the registry. The registry lets code that is
//! not handed a PCI device (exported functions, KUnit suites) find the bound GPUs.
//!
//! # Locking
//!
//! [`GPUS`] is a mutex around a short vector; it is taken only at probe, remove and lookup, never
//! while another nvrs lock is held. This module knows nothing of the VA spaces and pins built on
//! top of a GPU: the driver's `unbind` tears those down ([`crate::driver`]).

use core::fmt;

use kernel::{
    debugfs, pci,
    prelude::*,
    str::CString,
    sync::{
        aref::ARef,
        Arc, //
    },
};

use crate::{
    bar1::Bar1Space,
    mem::fb::FbMemory,
    text::{
        Size,
        Uuid, //
    },
    topology::link::Endpoint,
};

use crate::hwref::{
    ident::{
        IdentSource,
        Identity,
        PmcBoot0,
        PmcBoot42, //
    },
    MmuFormat,
    PeerMmio,
    SizeMask, //
};

/// Where a GPU's identity and memory come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Backend {
    /// A real NVIDIA GPU: registers in BAR0, framebuffer aperture in BAR1.
    Hardware,
    /// A QEMU ivshmem-plain device with an identity block (`emulated=1`).
    Emulated,
}

/// The framebuffer aperture: the BAR through which peers and the CPU reach GPU memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Aperture {
    /// Linux resource index of the BAR.
    pub(crate) bar: u32,
    /// CPU physical address of the BAR.
    pub(crate) phys: u64,
    /// Length of the BAR in bytes.
    pub(crate) len: u64,
}

/// The part of the aperture that is GPU memory nvrs may hand out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FbRange {
    /// Offset of GPU memory within the aperture.
    pub(crate) offset: u64,
    /// Bytes of GPU memory.
    pub(crate) size: u64,
}

/// NVLink connectivity declared for a GPU.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NvLinkPeers {
    /// Bit `i`: links to emulated GPU `i`.
    pub(crate) peers: u32,
    /// Links to each peer.
    pub(crate) links_per_peer: u8,
}

/// Everything nvrs learned about a GPU at probe time.
pub(crate) struct GpuInfo {
    /// PCI name, e.g. `0000:03:00.0`.
    pub(crate) name: CString,
    /// Hardware or emulated.
    pub(crate) backend: Backend,
    /// The chip and its family table.
    pub(crate) ident: Identity,
    /// Raw `PMC_BOOT_0` (zero when identified by device id).
    pub(crate) boot0: PmcBoot0,
    /// Raw `PMC_BOOT_42` (zero when identified by device id).
    pub(crate) boot42: PmcBoot42,
    /// NVIDIA PCI device id (impersonated, for an emulated GPU).
    pub(crate) device_id: u16,
    /// The framebuffer aperture.
    pub(crate) aperture: Aperture,
    /// GPU memory within the aperture.
    pub(crate) fb: FbRange,
    /// GPU UUID (all zero until read from the GPU's firmware, on hardware).
    pub(crate) uuid: [u8; 16],
    /// Emulated GPU index, if emulated.
    pub(crate) emu_index: Option<u8>,
    /// Declared NVLink peers.
    pub(crate) nvlink: NvLinkPeers,
    /// BAR1 as nvrs set it up through page tables (the GPU model only; it passed its
    /// self-test).
    pub(crate) bar1: Option<Arc<Bar1Space>>,
    /// Where the GPU sits in the PCI hierarchy.
    pub(crate) endpoint: Endpoint,
    /// The PCI device (a reference, so the registry can outlive a racing unbind safely).
    pub(crate) pdev: ARef<pci::Device>,
    /// The memory manager, for GPUs whose memory nvrs manages (emulated ones, for now).
    pub(crate) mem: Option<Arc<FbMemory>>,
    /// Index among the bound GPUs (`NVRS_IOCTL_GPU_INFO`), stable while bound.
    pub(crate) index: u32,
}

struct Sizes(SizeMask);

impl fmt::Display for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}", Size(s))?;
        }
        Ok(())
    }
}

impl GpuInfo {
    /// Writes the contents of the debugfs `info` file: one `key: value` pair per line.
    pub(crate) fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.ident.table;
        let c = self.ident.chipset;
        writeln!(f, "device: {}", self.name.to_str().unwrap_or("?"))?;
        let backend = match self.backend {
            Backend::Hardware => "hardware",
            Backend::Emulated => "emulated (ivshmem-plain)",
        };
        writeln!(f, "backend: {backend}")?;
        if let Some(i) = self.emu_index {
            writeln!(f, "emulated_index: {i}")?;
        }
        writeln!(f, "chip: {}", c.name)?;
        writeln!(f, "chipset: {:#x}", c.id)?;
        writeln!(
            f,
            "architecture: {} ({:#x}, table {})",
            t.arch.name(),
            t.arch.code(),
            t.name
        )?;
        match self.ident.revision {
            Some(r) => writeln!(f, "revision: {r}")?,
            None => writeln!(f, "revision: unknown")?,
        }
        let source = match self.ident.source {
            IdentSource::Boot42 => "PMC_BOOT_42",
            IdentSource::Boot0 => "PMC_BOOT_0",
            IdentSource::DeviceId => "PCI device id",
        };
        writeln!(f, "identified_by: {source}")?;
        writeln!(f, "pmc_boot_0: {:#010x}", self.boot0.0)?;
        writeln!(f, "pmc_boot_42: {:#010x}", self.boot42.0)?;
        writeln!(f, "pci_device_id: 10de:{:04x}", self.device_id)?;
        writeln!(f, "uuid: {}", Uuid(&self.uuid))?;
        writeln!(
            f,
            "aperture: BAR resource {} at {:#x}, {}",
            self.aperture.bar,
            self.aperture.phys,
            Size(self.aperture.len)
        )?;
        writeln!(
            f,
            "fb: offset {:#x}, {}",
            self.fb.offset,
            Size(self.fb.size)
        )?;
        let mmu = match t.mmu {
            MmuFormat::Ver1 => "VER1",
            MmuFormat::Ver2 => "VER2",
            MmuFormat::Ver3 => "VER3",
        };
        writeln!(f, "mmu_format: {mmu}, {}-bit VA", t.va_bits)?;
        match &self.bar1 {
            Some(b) => {
                let l = b.layout();
                writeln!(
                    f,
                    "bar1_mode: virtual, page tables MMU Ver{}",
                    l.format().version()
                )?;
                writeln!(f, "bar1_instance_block: {:#x}", l.instance_block())?;
                writeln!(f, "bar1_page_tables: {}", Size(l.span()))?;
                writeln!(f, "bar1_mapped: {}", Size(b.mapped()))?;
                writeln!(f, "bar1_exhausted: {}", b.exhausted())?;
                match self.mem.as_ref().and_then(|m| m.reach.ce()) {
                    Some(ce) => match ce.counters() {
                        Ok((launches, bytes)) => writeln!(
                            f,
                            "copy_engine: model, {launches} launches, {} moved",
                            Size(bytes)
                        )?,
                        Err(_) => writeln!(f, "copy_engine: model, gone")?,
                    },
                    None => writeln!(f, "copy_engine: none, the CPU scrubs through BAR1")?,
                }
                writeln!(f, "vram: {}", Size(b.vram()))?;
                writeln!(f, "bar1_selftest: passed")?;
            }
            None => writeln!(f, "bar1_mode: as the firmware left it")?,
        }
        writeln!(f, "page_sizes: {}", Sizes(t.page_sizes))?;
        writeln!(f, "pmm_chunk_sizes: {}", Sizes(t.pmm_chunk_sizes))?;
        writeln!(f, "p2p_page_size: {}", Size(t.p2p_granularity))?;
        writeln!(f, "pcie_gen: {}", t.pcie_gen)?;
        let peer_mmio = match t.peer_mmio {
            PeerMmio::IommuMappable => "IOMMU-mappable (dma_map_resource)",
        };
        writeln!(f, "peer_mmio: {peer_mmio}")?;
        match c.nvlink {
            Some(l) => writeln!(
                f,
                "nvlink: version {}, {} links, {} MB/s per link per direction",
                l.version, l.links, l.link_mbps_per_direction
            )?,
            None => writeln!(f, "nvlink: none")?,
        }
        writeln!(
            f,
            "nvlink_peers: {:#x} ({} links each)",
            self.nvlink.peers, self.nvlink.links_per_peer
        )?;
        match &self.mem {
            Some(m) if m.p2pdma.is_published() => writeln!(
                f,
                "p2pdma: provider, {} in allocations, {} stuck behind I/O; {} pages came back free (all GPUs)",
                Size(m.p2pdma.bytes()),
                Size(m.p2pdma.stuck_bytes()),
                crate::helpers::p2pdma_freed()
            ),
            _ => writeln!(f, "p2pdma: none"),
        }
    }
}

/// The registry of bound GPUs and the debugfs root their directories live in.
pub(crate) struct Registry {
    gpus: KVec<Arc<GpuInfo>>,
    debugfs: Option<debugfs::Dir>,
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before the driver is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static GPUS: Mutex<Registry> = Registry {
        gpus: KVec::new(),
        debugfs: None,
    };
}

/// Owner of the registry's module-lifetime state; dropping it at module exit releases the
/// debugfs root (the registry itself is static and outlives every GPU).
pub(crate) struct RegistryGuard(());

impl RegistryGuard {
    /// Initialises the registry with the module's debugfs root. Called once, from module init.
    pub(crate) fn init(root: debugfs::Dir) -> Self {
        // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
        unsafe { GPUS.init() };
        GPUS.lock().debugfs = Some(root);
        Self(())
    }
}

impl Drop for RegistryGuard {
    fn drop(&mut self) {
        // Statics outlive the module's code but not its unload: free the registry's buffer (a
        // static's own `Drop` never runs).
        let mut reg = GPUS.lock();
        reg.debugfs = None;
        drop(core::mem::take(&mut reg.gpus));
    }
}

/// Creates the debugfs directory for a GPU, `nvrs/<pci name>/`.
pub(crate) fn debugfs_dir(name: &CStr) -> Result<debugfs::Dir> {
    GPUS.lock()
        .debugfs
        .as_ref()
        .map(|root| root.subdir(name))
        .ok_or(ENOENT)
}

/// The smallest GPU index no bound GPU uses.
pub(crate) fn free_index() -> u32 {
    let reg = GPUS.lock();
    (0u32..)
        .find(|i| reg.gpus.iter().all(|g| g.index != *i))
        .unwrap_or(u32::MAX)
}

/// A GPU's entry in the registry; dropping it removes the GPU. The driver's `unbind` has torn
/// the GPU's memory down by then.
pub(crate) struct Registered(Arc<GpuInfo>);

impl Registered {
    /// Adds `gpu` to the registry.
    pub(crate) fn new(gpu: Arc<GpuInfo>) -> Result<Self> {
        let mut reg = GPUS.lock();
        if reg.gpus.iter().any(|g| g.index == gpu.index) {
            return Err(EBUSY);
        }
        reg.gpus.push(gpu.clone(), GFP_KERNEL)?;
        Ok(Self(gpu))
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        GPUS.lock().gpus.retain(|g| !Arc::ptr_eq(g, &self.0));
    }
}

/// The bound GPU with index `index`.
pub(crate) fn by_index(index: u32) -> Option<Arc<GpuInfo>> {
    GPUS.lock().gpus.iter().find(|g| g.index == index).cloned()
}

/// The bound GPU whose memory `mem` is (none once it is unbound).
pub(crate) fn of_mem(mem: &FbMemory) -> Option<Arc<GpuInfo>> {
    GPUS.lock()
        .gpus
        .iter()
        .find(|g| g.mem.as_deref().is_some_and(|m| core::ptr::eq(m, mem)))
        .cloned()
}

/// Number of bound GPUs.
pub(crate) fn count() -> usize {
    GPUS.lock().gpus.len()
}

/// A snapshot of the bound GPUs.
pub(crate) fn all() -> Result<KVec<Arc<GpuInfo>>> {
    let reg = GPUS.lock();
    let mut out = KVec::with_capacity(reg.gpus.len(), GFP_KERNEL)?;
    for g in reg.gpus.iter() {
        out.push(g.clone(), GFP_KERNEL)?;
    }
    Ok(out)
}
