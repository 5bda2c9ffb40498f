// SPDX-License-Identifier: GPL-2.0

//! `/dev/nvrs`: GPU memory allocation for user space (`include/uapi/nvrs.h`).
//!
//! Every open file of a process shares that process's [`VaSpace`]. The ioctls list GPUs, give
//! their stable statistics (`NVRS_IOCTL_GPU_STATS`, for tools), allocate and free GPU memory; `mmap` with the allocation's VA as the offset maps (a 64 KiB
//! aligned part of) it for the CPU through the aperture, write-combined, filled on demand by the
//! fault handler ([`crate::mem::cpu_map`]).
//!
//! Only the process that opened the file may allocate, free or map through it (`-EPERM` for a
//! child that inherited it), and allocating or freeing needs a file opened for writing
//! (`-EBADF`). Releasing an allocation (free, process exit, GPU removal) removes its user
//! mappings: later accesses through them fault with `SIGBUS`.
//!
//! `NVRS_IOCTL_EXPORT_DMABUF` exports part of an allocation as a dma-buf ([`crate::dmabuf`]).
//!
//! The node is created mode 0600 (root only); see the UAPI header for the access policy.

use kernel::{
    fs::{
        file::flags,
        File, //
    },
    ioctl::{
        _IOR,
        _IOW,
        _IOWR, //
    },
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    mm::virt::VmaNew,
    prelude::*,
    sync::Arc,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    gpu, helpers,
    hwref::P2P_PAGE_SIZE,
    mem::{
        allocation::AllocOptions,
        Allocation, //
    },
    pmm::stats::RootKind,
    topology::Link,
    uapi,
    vaspace::{
        range::Span,
        VaSpace, //
    },
};

/// Lets the `uapi` structures be copied from and to user space as they are.
macro_rules! plain_data {
    ($($t:ident),* $(,)?) => {
        $(
            // SAFETY: `uapi::$t` is `#[repr(C)]`, integers and arrays of them without padding
            // (the host tests check every field against the header): any bit pattern is a valid
            // value and every byte of a value is initialised.
            unsafe impl FromBytes for uapi::$t {}
            // SAFETY: As for `FromBytes` above.
            unsafe impl AsBytes for uapi::$t {}
        )*
    };
}
plain_data!(
    GpuInfo,
    Alloc,
    Free,
    GpuStats,
    ExportDmabuf,
    PmmMap,
    ProcessUsage,
    Processes,
    ProcessEntry,
    ProcessStats,
    GpuCopyEngine,
    TopologyEndpoint,
    Topology,
    GpuPcie,
);

const _: () = assert!(uapi::CHUNK_SIZES == crate::pmm::MAX_SIZES);
const _: () = assert!(uapi::CHUNK_STATES == crate::pmm::STATES);

// The numbers `uapi` computes are those the kernel's own `_IOC` encoding gives.
const _: () = assert!(uapi::IOCTL_GPU_COUNT == _IOR::<u32>(uapi::IOCTL_MAGIC, 0));
const _: () = assert!(uapi::IOCTL_GPU_INFO == _IOWR::<uapi::GpuInfo>(uapi::IOCTL_MAGIC, 1));
const _: () = assert!(uapi::IOCTL_ALLOC == _IOWR::<uapi::Alloc>(uapi::IOCTL_MAGIC, 2));
const _: () = assert!(uapi::IOCTL_FREE == _IOW::<uapi::Free>(uapi::IOCTL_MAGIC, 3));
const _: () = assert!(uapi::IOCTL_GPU_STATS == _IOWR::<uapi::GpuStats>(uapi::IOCTL_MAGIC, 4));
const _: () =
    assert!(uapi::IOCTL_EXPORT_DMABUF == _IOWR::<uapi::ExportDmabuf>(uapi::IOCTL_MAGIC, 5));
const _: () = assert!(uapi::IOCTL_PMM_MAP == _IOWR::<uapi::PmmMap>(uapi::IOCTL_MAGIC, 6));
const _: () = assert!(uapi::IOCTL_PROCESSES == _IOWR::<uapi::Processes>(uapi::IOCTL_MAGIC, 7));
const _: () = assert!(uapi::IOCTL_TOPOLOGY == _IOR::<uapi::Topology>(uapi::IOCTL_MAGIC, 8));
const _: () = assert!(uapi::IOCTL_GPU_PCIE == _IOWR::<uapi::GpuPcie>(uapi::IOCTL_MAGIC, 9));
const _: () =
    assert!(uapi::IOCTL_PROCESS_STATS == _IOWR::<uapi::ProcessStats>(uapi::IOCTL_MAGIC, 10));
const _: () =
    assert!(uapi::IOCTL_GPU_COPY_ENGINE == _IOWR::<uapi::GpuCopyEngine>(uapi::IOCTL_MAGIC, 11));

/// An open `/dev/nvrs`.
pub(crate) struct NvrsFile {
    vs: Arc<VaSpace>,
}

fn copy_str(dst: &mut [u8], src: &str) {
    let room = dst.len().saturating_sub(1);
    for (d, s) in dst.iter_mut().zip(src.bytes().take(room)) {
        *d = s;
    }
}

impl NvrsFile {
    fn gpu_info(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::GpuInfo>(),
        )
        .reader_writer();
        let mut a: uapi::GpuInfo = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let index = a.index;
        a = uapi::GpuInfo {
            index,
            chipset: g.ident.chipset.id.into(),
            ..Default::default()
        };
        if let Some(mem) = &g.mem {
            a.fb_size = mem.total_bytes();
            a.fb_free = mem.free_bytes();
        }
        a.uuid = g.uuid;
        copy_str(&mut a.name, g.name.to_str().unwrap_or(""));
        copy_str(&mut a.chip, g.ident.chipset.name);
        w.write(&a)?;
        Ok(0)
    }

    /// `NVRS_IOCTL_GPU_PCIE`: the BAR1 counters of a GPU model, zero (no flags) elsewhere.
    fn gpu_pcie(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::GpuPcie>(),
        )
        .reader_writer();
        let a: uapi::GpuPcie = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let mut out = uapi::GpuPcie {
            index: a.index,
            ..Default::default()
        };
        if let Some(b) = &g.bar1 {
            let c = b.counters()?;
            out.flags = uapi::PCIE_COUNTERS | uapi::PCIE_BAR1_VIRTUAL;
            out.bar1_rx_bytes = c.rx;
            out.bar1_tx_bytes = c.tx;
            out.bar1_faults = c.faults;
            out.tlb_invalidates = c.tlb_invalidates;
            out.bar1_mapped = b.mapped();
        }
        w.write(&out)?;
        Ok(0)
    }

    /// `NVRS_IOCTL_GPU_COPY_ENGINE`: the counters of the copy engine nvrs uses, zero (no
    /// flags) where it uses none.
    fn gpu_copy_engine(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::GpuCopyEngine>(),
        )
        .reader_writer();
        let a: uapi::GpuCopyEngine = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let mut out = uapi::GpuCopyEngine {
            index: a.index,
            ..Default::default()
        };
        if let Some(ce) = g
            .mem
            .as_ref()
            .and_then(|m| m.reach.ce())
            .filter(|ce| !ce.is_wedged())
        {
            let (launches, bytes) = ce.counters()?;
            out.flags = uapi::CE_IN_USE;
            out.launches = launches.into();
            out.bytes = bytes;
        }
        w.write(&out)?;
        Ok(0)
    }

    fn gpu_stats(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::GpuStats>(),
        )
        .reader_writer();
        let a: uapi::GpuStats = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let mut out = uapi::GpuStats {
            index: a.index,
            version: uapi::GPU_STATS_VERSION,
            bar1_total: g.aperture.len,
            ..Default::default()
        };
        if let Some(mem) = &g.mem {
            let s = mem.pmm.lock().stats();
            out.fb_total = s.total_bytes;
            out.fb_used = s.allocated_bytes + s.temp_pinned_bytes;
            out.fb_free = s.free_bytes;
            out.fb_free_zeroed = s.zeroed_free_bytes;
            out.largest_free = s.largest_free;
            out.fragmentation_permille = u32::try_from(s.fragmentation_permille())?;
            out.chunk_levels = u32::try_from(s.levels)?;
            out.chunk_size = s.sizes;
            out.chunks = s.chunks;
            out.alloc_failures = s.alloc_failures;
            out.compactions = s.compaction.runs;
            out.compacted_bytes = s.compaction.moved_bytes;
            let (pins, bytes, maps) = crate::p2p::pin::stats_on(mem);
            out.pins = u32::try_from(pins).unwrap_or(u32::MAX);
            // Through BAR1, what is mapped there (the pins' runs); elsewhere what pins hold.
            out.bar1_pinned = g.bar1.as_ref().map_or(bytes, |b| b.mapped());
            out.dma_mappings = u32::try_from(maps).unwrap_or(u32::MAX);
            let (exports, importer_maps) = crate::dmabuf::stats_on(mem);
            out.dmabufs = u32::try_from(exports).unwrap_or(u32::MAX);
            out.dmabuf_mappings = u32::try_from(importer_maps).unwrap_or(u32::MAX);
            let f = mem.faults.counters();
            out.faults_injected = f.injected;
            out.faults_revoked = f.revoked;
            out.bar1_budget = f.bar1_budget;
            out.p2pdma_state = if mem.p2pdma.is_published() {
                uapi::P2PDMA_PROVIDER
            } else {
                uapi::P2PDMA_NONE
            };
            out.p2pdma_bytes = mem.p2pdma.bytes();
        }
        w.write(&out)?;
        Ok(0)
    }

    /// Allocating and freeing: only the owning process, through a file open for writing.
    fn check_writer(&self, file: &File) -> Result {
        if !self.vs.is_current() {
            return Err(EPERM);
        }
        if file.flags() & flags::O_ACCMODE == flags::O_RDONLY {
            return Err(EBADF);
        }
        Ok(())
    }

    fn alloc(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<uapi::Alloc>())
                .reader_writer();
        let mut a: uapi::Alloc = r.read()?;
        if a.flags & !uapi::ALLOC_FLAGS != 0 || a.va != 0 {
            return Err(EINVAL);
        }
        let g = gpu::by_index(a.gpu).ok_or(ENODEV)?;
        let opts = AllocOptions {
            contiguous: a.flags & uapi::ALLOC_CONTIGUOUS != 0,
            p2pdma: a.flags & uapi::ALLOC_P2PDMA != 0,
        };
        let span = self.vs.alloc(&g, a.size, opts)?;
        a.va = span.start();
        if let Err(e) = w.write(&a) {
            // The caller cannot learn the VA: do not leak the memory.
            let _ = self.vs.free(span.start());
            return Err(e);
        }
        Ok(0)
    }

    fn pmm_map(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::PmmMap>(),
        )
        .reader_writer();
        let mut a: uapi::PmmMap = r.read()?;
        let g = gpu::by_index(a.gpu).ok_or(ENODEV)?;
        let mem = g.mem.as_ref().ok_or(ENODEV)?;
        // Rendered into kernel memory first: no user copy under the manager's lock.
        let roots = usize::try_from(mem.total_bytes() / crate::hwref::ROOT_CHUNK_SIZE)?;
        let n = roots.min(usize::try_from(a.roots)?);
        let mut bytes = KVVec::with_capacity(n, GFP_KERNEL)?;
        {
            let pmm = mem.pmm.lock();
            for i in 0..n {
                let b = pmm.root_summary(i).map_or(uapi::ROOT_FREE, |s| {
                    let kind = match s.kind {
                        RootKind::Free => uapi::ROOT_FREE,
                        RootKind::Allocated => uapi::ROOT_ALLOCATED,
                        RootKind::Split => uapi::ROOT_SPLIT,
                        RootKind::Contiguous => uapi::ROOT_CONTIG,
                        RootKind::TempPinned => uapi::ROOT_TEMP,
                    };
                    let used = s.used * 16 / crate::hwref::ROOT_CHUNK_SIZE;
                    uapi::root_byte(kind, s.pinned, u8::try_from(used).unwrap_or(u8::MAX))
                });
                // Capacity was reserved for `n` bytes.
                let _ = bytes.push_within_capacity(b);
            }
        }
        UserSlice::new(UserPtr::from_addr(usize::try_from(a.map)?), n)
            .writer()
            .write_slice(&bytes)?;
        a.roots = u32::try_from(roots)?;
        a.root_size = crate::hwref::ROOT_CHUNK_SIZE;
        w.write(&a)?;
        Ok(0)
    }

    fn processes(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::Processes>(),
        )
        .reader_writer();
        let mut a: uapi::Processes = r.read()?;
        if a.pad != 0 {
            return Err(EINVAL);
        }
        let usage = Self::usage(a.count)?;
        let mut uw = UserSlice::new(
            UserPtr::from_addr(usize::try_from(a.entries)?),
            usage.len() * core::mem::size_of::<uapi::ProcessUsage>(),
        )
        .writer();
        for u in usage.iter() {
            uw.write(&uapi::ProcessUsage {
                pid: u.pid,
                gpu: u.gpu,
                bytes: u.bytes,
            })?;
        }
        a.count = u32::try_from(usage.len())?;
        w.write(&a)?;
        Ok(0)
    }

    /// What each process holds on each GPU, at most `count` entries (`-EINVAL` past
    /// [`uapi::PROCESSES_MAX`]).
    fn usage(count: u32) -> Result<KVVec<crate::vaspace::Usage>> {
        if count > uapi::PROCESSES_MAX {
            return Err(EINVAL);
        }
        let mut out = KVVec::new();
        out.resize(
            usize::try_from(count)?,
            crate::vaspace::Usage::default(),
            GFP_KERNEL,
        )?;
        let n = crate::vaspace::usage(&mut out);
        out.truncate(n);
        Ok(out)
    }

    /// `NVRS_IOCTL_PROCESS_STATS`: [`uapi::ProcessEntry`]s of the size the caller knows.
    fn process_stats(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::ProcessStats>(),
        )
        .reader_writer();
        let mut a: uapi::ProcessStats = r.read()?;
        let size = a.entry_size;
        if a.pad != 0
            || !(uapi::PROCESS_ENTRY_MIN..=uapi::PROCESS_ENTRY_MAX).contains(&size)
            || size % 8 != 0
        {
            return Err(EINVAL);
        }
        let usage = Self::usage(a.count)?;
        let stride = usize::try_from(size)?;
        let filled = stride.min(core::mem::size_of::<uapi::ProcessEntry>());
        // Zeroes for the part of each entry the kernel does not know (a newer caller's fields).
        let zeroes = [0u8; 64];
        let mut uw = UserSlice::new(
            UserPtr::from_addr(usize::try_from(a.entries)?),
            usage.len() * stride,
        )
        .writer();
        for u in usage.iter() {
            let e = uapi::ProcessEntry {
                pid: u.pid,
                gpu: u.gpu,
                bytes: u.bytes,
                allocations: u.allocations,
                pins: u.pins,
                dmabufs: u.dmabufs,
                reserved: 0,
            };
            uw.write_slice(e.as_bytes().get(..filled).ok_or(EINVAL)?)?;
            let mut rest = stride - filled;
            while rest > 0 {
                let n = rest.min(zeroes.len());
                uw.write_slice(zeroes.get(..n).ok_or(EINVAL)?)?;
                rest -= n;
            }
        }
        a.version = uapi::PROCESS_STATS_VERSION;
        a.count = u32::try_from(usage.len())?;
        a.entry_size = u32::try_from(filled)?;
        w.write(&a)?;
        Ok(0)
    }

    fn topology(&self, arg: usize) -> Result<isize> {
        let mut t = KBox::new(
            uapi::Topology {
                version: uapi::TOPOLOGY_VERSION,
                gate: crate::p2p_topology(),
                ..uapi::Topology::EMPTY
            },
            GFP_KERNEL,
        )?;
        let uapi::Topology {
            ep: eps,
            link: links,
            p2p,
            ..
        } = &mut *t;
        let (gpus, peers) = crate::topology::snapshot(
            uapi::TOPO_MAX,
            |i, e, cpus| {
                if let Some(ep) = eps.get_mut(i) {
                    ep.pci_id = u32::try_from(e.id).unwrap_or(u32::MAX);
                    ep.numa_node = e.numa.map_or(-1, i32::from);
                    copy_str(&mut ep.cpu_affinity, cpus);
                }
            },
            |i, j, link, allowed| {
                let code = match link {
                    Link::Itself => uapi::LINK_SELF,
                    Link::Pix => uapi::LINK_PIX,
                    Link::Pxb => uapi::LINK_PXB,
                    Link::Phb => uapi::LINK_PHB,
                    Link::Node => uapi::LINK_NODE,
                    Link::Sys => uapi::LINK_SYS,
                    Link::Nv(n) => uapi::link_nv(n),
                };
                if let Some(l) = links.get_mut(i).and_then(|row| row.get_mut(j)) {
                    *l = code;
                }
                if let Some(p) = p2p.get_mut(i).and_then(|row| row.get_mut(j)) {
                    *p = u8::from(allowed == Some(true));
                }
            },
        )?;
        t.gpus = u32::try_from(gpus)?;
        t.peers = u32::try_from(peers)?;
        UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::Topology>(),
        )
        .writer()
        .write(&*t)?;
        Ok(0)
    }

    fn export_dmabuf(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) = UserSlice::new(
            UserPtr::from_addr(arg),
            core::mem::size_of::<uapi::ExportDmabuf>(),
        )
        .reader_writer();
        let mut a: uapi::ExportDmabuf = r.read()?;
        if a.flags != 0 || a.fd != 0 {
            return Err(EINVAL);
        }
        let fd = crate::dmabuf::export(a.va, a.size, |want| self.vs.find(want))?;
        a.fd = fd;
        // The descriptor is already installed: on a fault writing it back, the caller cannot
        // learn it, but closing it is the process's own business (as for any fd-returning
        // ioctl that faults after `fd_install`).
        w.write(&a)?;
        Ok(0)
    }

    fn free(&self, arg: usize) -> Result<isize> {
        let a: uapi::Free =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<uapi::Free>())
                .reader()
                .read()?;
        self.vs.free(a.va)?;
        Ok(0)
    }
}

/// Records that `a` is mapped through `inode` (so its release removes those mappings) and that
/// the CPU may write it. A release that ran before refuses the mapping (`-ENOENT`); one that
/// runs after finds the inode recorded, and the VMA's faults find the allocation released.
fn record_mapping(a: &Allocation, inode: helpers::MappedInode) -> Result {
    // The allocation's lock is on the `nvidia_p2p_get_pages` path: no allocation under it.
    let mut st = crate::room::lock_with_room(|| a.state.lock(), |st| &mut st.mapped)?;
    if st.released || a.mem().is_gone() {
        return Err(ENOENT);
    }
    st.touched = true;
    if !st.mapped.iter().any(|m| m.same(&inode)) {
        // `lock_with_room` made room.
        let _ = st.mapped.push_within_capacity(inode);
    }
    Ok(())
}

#[vtable]
impl MiscDevice for NvrsFile {
    type Ptr = KBox<Self>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        let vs = VaSpace::open()?;
        KBox::new(Self { vs: vs.clone() }, GFP_KERNEL).map_err(|e| {
            vs.close();
            e.into()
        })
    }

    fn release(device: KBox<Self>, _file: &File) {
        device.vs.close();
    }

    fn ioctl(me: &NvrsFile, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            uapi::IOCTL_GPU_COUNT => {
                let n = u32::try_from(gpu::count()).unwrap_or(u32::MAX);
                UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<u32>())
                    .writer()
                    .write(&n)?;
                Ok(0)
            }
            uapi::IOCTL_GPU_INFO => me.gpu_info(arg),
            uapi::IOCTL_GPU_STATS => me.gpu_stats(arg),
            uapi::IOCTL_PMM_MAP => me.pmm_map(arg),
            uapi::IOCTL_PROCESSES => me.processes(arg),
            uapi::IOCTL_PROCESS_STATS => me.process_stats(arg),
            uapi::IOCTL_GPU_COPY_ENGINE => me.gpu_copy_engine(arg),
            uapi::IOCTL_TOPOLOGY => me.topology(arg),
            uapi::IOCTL_GPU_PCIE => me.gpu_pcie(arg),
            uapi::IOCTL_ALLOC => me.check_writer(file).and_then(|()| me.alloc(arg)),
            uapi::IOCTL_FREE => me.check_writer(file).and_then(|()| me.free(arg)),
            uapi::IOCTL_EXPORT_DMABUF => me.check_writer(file).and_then(|()| me.export_dmabuf(arg)),
            _ => Err(ENOTTY),
        }
    }

    fn mmap(me: &NvrsFile, _file: &File, vma: &VmaNew) -> Result {
        if !me.vs.is_current() {
            return Err(EPERM);
        }
        let va = helpers::vma_offset(vma);
        let len = u64::try_from(vma.end() - vma.start())?;
        if va % P2P_PAGE_SIZE != 0 || len % P2P_PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        // A private mapping would get copy-on-write semantics over device memory. Read-only
        // shared mappings are fine (VM_MAYSHARE without VM_SHARED).
        if !helpers::vma_may_share(vma) {
            return Err(EINVAL);
        }
        // GPU memory is data, never code.
        if vma.executable() {
            return Err(EPERM);
        }
        let want = Span::new(va, len).ok_or(EINVAL)?;
        let a = me.vs.find(&want).ok_or(ENOENT)?;
        a.prepare_cpu()?;
        record_mapping(&a, helpers::MappedInode::of(vma))?;
        vma.try_clear_mayexec()?;
        // SAFETY: `vma` is the shared VMA of this `mmap` call; the reference on the allocation's
        // handle from `into_raw` is handed to it and dropped by its `close`. Nothing can fail
        // after this.
        unsafe { helpers::vma_setup(vma, Arc::into_raw(a.cpu.clone()).cast(), a.backing.p2pdma) };
        Ok(())
    }
}
