// SPDX-License-Identifier: GPL-2.0

//! `/dev/nvrs`: GPU memory allocation for user space (`include/uapi/nvrs.h`).
//!
//! Every open file of a process shares that process's [`VaSpace`]. The ioctls list GPUs, give
//! their stable statistics (`NVRS_IOCTL_GPU_STATS`, for tools), allocate and free GPU memory; `mmap` with the allocation's VA as the offset maps (a 64 KiB
//! aligned part of) it for the CPU through the aperture, write-combined, filled on demand by the
//! fault handler ([`crate::vaspace::cpu_map`]).
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
    pmm::stats::RootKind,
    topology::Link,
    vaspace::{
        range::Span,
        Allocation,
        VaSpace, //
    },
};

const MAGIC: u32 = 0xE5;

/// `struct nvrs_gpu_info`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GpuInfoArg {
    index: u32,
    chipset: u32,
    fb_size: u64,
    fb_free: u64,
    uuid: [u8; 16],
    name: [u8; 32],
    chip: [u8; 16],
}

/// `struct nvrs_alloc`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AllocArg {
    gpu: u32,
    flags: u32,
    size: u64,
    va: u64,
}

/// `struct nvrs_gpu_stats` (`NVRS_GPU_STATS_VERSION` 2).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GpuStatsArg {
    index: u32,
    version: u32,
    fb_total: u64,
    fb_used: u64,
    fb_free: u64,
    fb_free_zeroed: u64,
    largest_free: u64,
    bar1_total: u64,
    bar1_pinned: u64,
    fragmentation_permille: u32,
    pins: u32,
    dma_mappings: u32,
    chunk_levels: u32,
    chunk_size: [u64; CHUNK_SIZES],
    chunks: [[u64; CHUNK_SIZES]; CHUNK_STATES],
    alloc_failures: u64,
    dmabufs: u32,
    dmabuf_mappings: u32,
    compactions: u64,
    compacted_bytes: u64,
    reserved: [u64; 5],
}

/// `NVRS_GPU_STATS_VERSION`.
const GPU_STATS_VERSION: u32 = 2;

/// `NVRS_CHUNK_SIZES`, `NVRS_CHUNK_STATES`.
const CHUNK_SIZES: usize = 4;
const CHUNK_STATES: usize = 4;
const _: () = assert!(CHUNK_SIZES == crate::pmm::MAX_SIZES);
const _: () = assert!(CHUNK_STATES == crate::pmm::STATES);

/// `struct nvrs_export_dmabuf`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ExportArg {
    va: u64,
    size: u64,
    flags: u32,
    fd: i32,
}

/// `struct nvrs_pmm_map`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PmmMapArg {
    gpu: u32,
    roots: u32,
    root_size: u64,
    map: u64,
}

/// `struct nvrs_process_usage`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessArg {
    pid: i32,
    gpu: u32,
    bytes: u64,
}

/// `struct nvrs_processes`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessesArg {
    count: u32,
    pad: u32,
    entries: u64,
}

/// Most entries of one `NVRS_IOCTL_PROCESSES`.
const MAX_PROCESSES: u32 = 4096;

/// `NVRS_TOPO_MAX`.
const TOPO_MAX: usize = 32;

/// `struct nvrs_topology_endpoint`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TopoEndpointArg {
    pci_id: u32,
    numa_node: i32,
    cpu_affinity: [u8; 56],
}

/// `struct nvrs_topology`.
#[repr(C)]
#[derive(Clone, Copy)]
struct TopologyArg {
    version: u32,
    gpus: u32,
    peers: u32,
    gate: u32,
    ep: [TopoEndpointArg; TOPO_MAX],
    link: [[u8; TOPO_MAX]; TOPO_MAX],
    p2p: [[u8; TOPO_MAX]; TOPO_MAX],
}

/// `struct nvrs_free`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FreeArg {
    va: u64,
}

// SAFETY: Plain integers and byte arrays, no padding (checked below), any bit pattern is valid.
unsafe impl FromBytes for GpuInfoArg {}
// SAFETY: As above.
unsafe impl AsBytes for GpuInfoArg {}
// SAFETY: As above.
unsafe impl FromBytes for GpuStatsArg {}
// SAFETY: As above.
unsafe impl AsBytes for GpuStatsArg {}
// SAFETY: As above.
unsafe impl FromBytes for AllocArg {}
// SAFETY: As above.
unsafe impl AsBytes for AllocArg {}
// SAFETY: As above.
unsafe impl FromBytes for ExportArg {}
// SAFETY: As above.
unsafe impl AsBytes for ExportArg {}
// SAFETY: As above.
unsafe impl FromBytes for PmmMapArg {}
// SAFETY: As above.
unsafe impl AsBytes for PmmMapArg {}
// SAFETY: As above.
unsafe impl FromBytes for ProcessesArg {}
// SAFETY: As above.
unsafe impl AsBytes for ProcessesArg {}
// SAFETY: As above.
unsafe impl AsBytes for ProcessArg {}
// SAFETY: As above.
unsafe impl AsBytes for TopologyArg {}
// SAFETY: As above.
unsafe impl FromBytes for FreeArg {}
// SAFETY: As above.
unsafe impl AsBytes for FreeArg {}

const _: () = assert!(core::mem::size_of::<GpuInfoArg>() == 88);
const _: () = assert!(core::mem::size_of::<AllocArg>() == 24);
const _: () = assert!(core::mem::size_of::<FreeArg>() == 8);
const _: () = assert!(core::mem::size_of::<ExportArg>() == 24);
const _: () = assert!(core::mem::size_of::<PmmMapArg>() == 24);
const _: () = assert!(core::mem::size_of::<ProcessArg>() == 16);
const _: () = assert!(core::mem::size_of::<ProcessesArg>() == 16);
const _: () =
    assert!(core::mem::size_of::<TopologyArg>() == 16 + 64 * TOPO_MAX + 2 * TOPO_MAX * TOPO_MAX);
const _: () = assert!(core::mem::size_of::<GpuStatsArg>() == 312);

const GPU_COUNT: u32 = _IOR::<u32>(MAGIC, 0);
const GPU_INFO: u32 = _IOWR::<GpuInfoArg>(MAGIC, 1);
const ALLOC: u32 = _IOWR::<AllocArg>(MAGIC, 2);
const FREE: u32 = _IOW::<FreeArg>(MAGIC, 3);
const GPU_STATS: u32 = _IOWR::<GpuStatsArg>(MAGIC, 4);
const EXPORT_DMABUF: u32 = _IOWR::<ExportArg>(MAGIC, 5);
const PMM_MAP: u32 = _IOWR::<PmmMapArg>(MAGIC, 6);
const PROCESSES: u32 = _IOWR::<ProcessesArg>(MAGIC, 7);
const TOPOLOGY: u32 = _IOR::<TopologyArg>(MAGIC, 8);

/// `NVRS_ALLOC_CONTIGUOUS`.
const ALLOC_CONTIGUOUS: u32 = 1 << 0;
/// `NVRS_ALLOC_ZERO`: accepted for compatibility; all memory is handed out zeroed.
const ALLOC_ZERO: u32 = 1 << 1;

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
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<GpuInfoArg>())
                .reader_writer();
        let mut a: GpuInfoArg = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let index = a.index;
        a = GpuInfoArg {
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

    fn gpu_stats(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<GpuStatsArg>())
                .reader_writer();
        let a: GpuStatsArg = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let mut out = GpuStatsArg {
            index: a.index,
            version: GPU_STATS_VERSION,
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
            out.bar1_pinned = bytes;
            out.dma_mappings = u32::try_from(maps).unwrap_or(u32::MAX);
            let (exports, importer_maps) = crate::dmabuf::stats_on(mem);
            out.dmabufs = u32::try_from(exports).unwrap_or(u32::MAX);
            out.dmabuf_mappings = u32::try_from(importer_maps).unwrap_or(u32::MAX);
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
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<AllocArg>())
                .reader_writer();
        let mut a: AllocArg = r.read()?;
        if a.flags & !(ALLOC_CONTIGUOUS | ALLOC_ZERO) != 0 || a.va != 0 {
            return Err(EINVAL);
        }
        let g = gpu::by_index(a.gpu).ok_or(ENODEV)?;
        let span = self.vs.alloc(g, a.size, a.flags & ALLOC_CONTIGUOUS != 0)?;
        a.va = span.start();
        if let Err(e) = w.write(&a) {
            // The caller cannot learn the VA: do not leak the memory.
            let _ = self.vs.free(span.start());
            return Err(e);
        }
        Ok(0)
    }

    fn pmm_map(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<PmmMapArg>())
                .reader_writer();
        let mut a: PmmMapArg = r.read()?;
        let g = gpu::by_index(a.gpu).ok_or(ENODEV)?;
        let mem = g.mem.as_ref().ok_or(ENODEV)?;
        // Rendered into kernel memory first: no user copy under the manager's lock.
        let roots = usize::try_from(mem.total_bytes() / crate::hwref::ROOT_CHUNK_SIZE)?;
        let n = roots.min(usize::try_from(a.roots)?);
        let mut bytes = KVVec::with_capacity(n, GFP_KERNEL)?;
        {
            let pmm = mem.pmm.lock();
            for i in 0..n {
                let b = pmm.root_summary(i).map_or(0, |s| {
                    let kind = match s.kind {
                        RootKind::Free => 0,
                        RootKind::Allocated => 1,
                        RootKind::Split => 2,
                        RootKind::Contiguous => 3,
                        RootKind::TempPinned => 4,
                    };
                    let used = (s.used * 16 / crate::hwref::ROOT_CHUNK_SIZE).min(15);
                    kind | if s.pinned { 0x8 } else { 0 } | (u8::try_from(used).unwrap_or(15) << 4)
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
            core::mem::size_of::<ProcessesArg>(),
        )
        .reader_writer();
        let mut a: ProcessesArg = r.read()?;
        if a.pad != 0 || a.count > MAX_PROCESSES {
            return Err(EINVAL);
        }
        let mut out = KVVec::new();
        out.resize(
            usize::try_from(a.count)?,
            crate::vaspace::Usage::default(),
            GFP_KERNEL,
        )?;
        let n = crate::vaspace::usage(&mut out);
        let mut uw = UserSlice::new(
            UserPtr::from_addr(usize::try_from(a.entries)?),
            n * core::mem::size_of::<ProcessArg>(),
        )
        .writer();
        for u in out.iter().take(n) {
            uw.write(&ProcessArg {
                pid: u.pid,
                gpu: u.gpu,
                bytes: u.bytes,
            })?;
        }
        a.count = u32::try_from(n)?;
        w.write(&a)?;
        Ok(0)
    }

    fn topology(&self, arg: usize) -> Result<isize> {
        let mut t = KBox::new(
            TopologyArg {
                version: 1,
                gpus: 0,
                peers: 0,
                gate: crate::p2p_topology(),
                ep: [TopoEndpointArg {
                    pci_id: 0,
                    numa_node: -1,
                    cpu_affinity: [0; 56],
                }; TOPO_MAX],
                link: [[0; TOPO_MAX]; TOPO_MAX],
                p2p: [[0; TOPO_MAX]; TOPO_MAX],
            },
            GFP_KERNEL,
        )?;
        let TopologyArg {
            ep: eps,
            link: links,
            p2p,
            ..
        } = &mut *t;
        let (gpus, peers) = crate::topology::snapshot(
            TOPO_MAX,
            |i, e, cpus| {
                if let Some(ep) = eps.get_mut(i) {
                    ep.pci_id = u32::try_from(e.id).unwrap_or(u32::MAX);
                    ep.numa_node = e.numa.map_or(-1, i32::from);
                    copy_str(&mut ep.cpu_affinity, cpus);
                }
            },
            |i, j, link, allowed| {
                let code = match link {
                    Link::Itself => 1,
                    Link::Pix => 2,
                    Link::Pxb => 3,
                    Link::Phb => 4,
                    Link::Node => 5,
                    Link::Sys => 6,
                    Link::Nv(n) => 0x80 | n.min(0x7f),
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
        UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<TopologyArg>())
            .writer()
            .write(&*t)?;
        Ok(0)
    }

    fn export_dmabuf(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<ExportArg>())
                .reader_writer();
        let mut a: ExportArg = r.read()?;
        if a.flags != 0 || a.fd != 0 {
            return Err(EINVAL);
        }
        let fd = crate::dmabuf::export(&self.vs, a.va, a.size)?;
        a.fd = fd;
        // The descriptor is already installed: on a fault writing it back, the caller cannot
        // learn it, but closing it is the process's own business (as for any fd-returning
        // ioctl that faults after `fd_install`).
        w.write(&a)?;
        Ok(0)
    }

    fn free(&self, arg: usize) -> Result<isize> {
        let a: FreeArg = UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<FreeArg>())
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
    if st.released || a.backing.mem.is_gone() {
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
            GPU_COUNT => {
                let n = u32::try_from(gpu::count()).unwrap_or(u32::MAX);
                UserSlice::new(UserPtr::from_addr(arg), 4)
                    .writer()
                    .write(&n)?;
                Ok(0)
            }
            GPU_INFO => me.gpu_info(arg),
            GPU_STATS => me.gpu_stats(arg),
            PMM_MAP => me.pmm_map(arg),
            PROCESSES => me.processes(arg),
            TOPOLOGY => me.topology(arg),
            ALLOC => me.check_writer(file).and_then(|()| me.alloc(arg)),
            FREE => me.check_writer(file).and_then(|()| me.free(arg)),
            EXPORT_DMABUF => me.check_writer(file).and_then(|()| me.export_dmabuf(arg)),
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
        record_mapping(&a, helpers::MappedInode::of(vma))?;
        vma.try_clear_mayexec()?;
        // SAFETY: `vma` is the shared VMA of this `mmap` call; the reference on the allocation's
        // handle from `into_raw` is handed to it and dropped by its `close`. Nothing can fail
        // after this.
        unsafe { helpers::vma_setup(vma, Arc::into_raw(a.cpu.clone()).cast()) };
        Ok(())
    }
}
