// SPDX-License-Identifier: GPL-2.0

//! The ioctls of `/dev/nvrs` that nvrs-smi reads (`include/uapi/nvrs.h`), mirrored field for
//! field; the sizes are checked at compile time against the header's layout.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `NVRS_IOCTL_MAGIC`.
const MAGIC: u32 = 0xE5;

const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | (MAGIC << 8) | nr
}
const fn ior<T>(nr: u32) -> u32 {
    ioc(2, nr, std::mem::size_of::<T>())
}
const fn iowr<T>(nr: u32) -> u32 {
    ioc(3, nr, std::mem::size_of::<T>())
}

/// `struct nvrs_gpu_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GpuInfo {
    pub index: u32,
    pub chipset: u32,
    pub fb_size: u64,
    pub fb_free: u64,
    pub uuid: [u8; 16],
    pub name: [u8; 32],
    pub chip: [u8; 16],
}

/// `NVRS_CHUNK_SIZES`, `NVRS_CHUNK_STATES`.
pub const CHUNK_SIZES: usize = 4;
pub const CHUNK_STATES: usize = 4;

/// `struct nvrs_gpu_stats` (version 2).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GpuStats {
    pub index: u32,
    pub version: u32,
    pub fb_total: u64,
    pub fb_used: u64,
    pub fb_free: u64,
    pub fb_free_zeroed: u64,
    pub largest_free: u64,
    pub bar1_total: u64,
    pub bar1_pinned: u64,
    pub fragmentation_permille: u32,
    pub pins: u32,
    pub dma_mappings: u32,
    pub chunk_levels: u32,
    pub chunk_size: [u64; CHUNK_SIZES],
    pub chunks: [[u64; CHUNK_SIZES]; CHUNK_STATES],
    pub alloc_failures: u64,
    pub dmabufs: u32,
    pub dmabuf_mappings: u32,
    pub compactions: u64,
    pub compacted_bytes: u64,
    pub reserved: [u64; 5],
}

/// `struct nvrs_pmm_map`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PmmMap {
    pub gpu: u32,
    pub roots: u32,
    pub root_size: u64,
    pub map: u64,
}

/// `struct nvrs_process_usage`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ProcessUsage {
    pub pid: i32,
    pub gpu: u32,
    pub bytes: u64,
}

/// `struct nvrs_processes`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Processes {
    pub count: u32,
    pub pad: u32,
    pub entries: u64,
}

/// `NVRS_TOPO_MAX`.
pub const TOPO_MAX: usize = 32;

/// `struct nvrs_topology_endpoint`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TopoEndpoint {
    pub pci_id: u32,
    pub numa_node: i32,
    pub cpu_affinity: [u8; 56],
}

/// `struct nvrs_topology`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Topology {
    pub version: u32,
    pub gpus: u32,
    pub peers: u32,
    pub gate: u32,
    pub ep: [TopoEndpoint; TOPO_MAX],
    pub link: [[u8; TOPO_MAX]; TOPO_MAX],
    pub p2p: [[u8; TOPO_MAX]; TOPO_MAX],
}

const _: () = assert!(std::mem::size_of::<GpuInfo>() == 88);
const _: () = assert!(std::mem::size_of::<GpuStats>() == 312);
const _: () = assert!(std::mem::size_of::<PmmMap>() == 24);
const _: () = assert!(std::mem::size_of::<ProcessUsage>() == 16);
const _: () =
    assert!(std::mem::size_of::<Topology>() == 16 + 64 * TOPO_MAX + 2 * TOPO_MAX * TOPO_MAX);

const GPU_COUNT: u32 = ior::<u32>(0);
const GPU_INFO: u32 = iowr::<GpuInfo>(1);
const GPU_STATS: u32 = iowr::<GpuStats>(4);
const PMM_MAP: u32 = iowr::<PmmMap>(6);
const PROCESSES: u32 = iowr::<Processes>(7);
const TOPOLOGY: u32 = ior::<Topology>(8);

/// `NVRS_STATS_VERSION` this tool understands.
pub const STATS_VERSION: u32 = 2;

/// An open `/dev/nvrs`.
pub struct Device(File);

/// Zero-initialised plain data (every field is an integer or an array of them).
fn zeroed<T: Copy>() -> T {
    // SAFETY: Only used for the `repr(C)` integer structs above, for which all-zero is valid.
    unsafe { std::mem::zeroed() }
}

impl Device {
    /// Opens the device node (read-only: nvrs-smi changes nothing).
    pub fn open(path: &str) -> io::Result<Self> {
        File::open(path).map(Self)
    }

    fn ioctl<T>(&self, cmd: u32, arg: &mut T) -> io::Result<()> {
        // SAFETY: `arg` is a valid, writable `T` whose layout is the one `cmd` encodes.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), cmd as _, arg as *mut T) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    pub fn gpu_count(&self) -> io::Result<u32> {
        let mut n = 0u32;
        self.ioctl(GPU_COUNT, &mut n)?;
        Ok(n)
    }

    pub fn gpu_info(&self, index: u32) -> io::Result<GpuInfo> {
        let mut a: GpuInfo = zeroed();
        a.index = index;
        self.ioctl(GPU_INFO, &mut a)?;
        Ok(a)
    }

    pub fn gpu_stats(&self, index: u32) -> io::Result<GpuStats> {
        let mut a: GpuStats = zeroed();
        a.index = index;
        self.ioctl(GPU_STATS, &mut a)?;
        Ok(a)
    }

    /// The memory manager's roots, one byte each (`NVRS_ROOT_*`).
    pub fn pmm_map(&self, gpu: u32) -> io::Result<(Vec<u8>, u64)> {
        let mut buf = vec![0u8; 4096];
        loop {
            let mut a = PmmMap {
                gpu,
                roots: buf.len() as u32,
                root_size: 0,
                map: buf.as_mut_ptr() as u64,
            };
            self.ioctl(PMM_MAP, &mut a)?;
            let n = a.roots as usize;
            if n <= buf.len() {
                buf.truncate(n);
                return Ok((buf, a.root_size));
            }
            buf.resize(n, 0);
        }
    }

    pub fn processes(&self) -> io::Result<Vec<ProcessUsage>> {
        let mut v = vec![ProcessUsage::default(); 4096];
        let mut a = Processes {
            count: v.len() as u32,
            pad: 0,
            entries: v.as_mut_ptr() as u64,
        };
        self.ioctl(PROCESSES, &mut a)?;
        v.truncate(a.count as usize);
        Ok(v)
    }

    pub fn topology(&self) -> io::Result<Box<Topology>> {
        let mut t: Box<Topology> = Box::new(zeroed());
        self.ioctl(TOPOLOGY, &mut *t)?;
        Ok(t)
    }
}

/// A NUL-terminated byte array as a string.
pub fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
