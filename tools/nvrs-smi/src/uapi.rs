// SPDX-License-Identifier: GPL-2.0

//! The ioctls of `/dev/nvrs` that nvrs-smi reads (`include/uapi/nvrs.h`).
//!
//! The structures, constants and ioctl numbers are the module's own, `src/uapi.rs`, compiled in
//! here by path: the module and nvrs-smi cannot disagree, and the host tests check that file
//! field for field against the C header.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

#[path = "../../../src/uapi.rs"]
mod abi;

pub(crate) use abi::{
    link_nvlinks, root_kind, root_used, GpuCopyEngine, GpuInfo, GpuPcie, GpuStats, PmmMap,
    ProcessEntry, ProcessStats, ProcessUsage, Processes, Topology, CE_IN_USE, CHUNK_SIZES,
    GPU_STATS_VERSION as STATS_VERSION, LINK_NODE, LINK_PHB, LINK_PIX, LINK_PXB, LINK_SELF,
    LINK_SYS, P2PDMA_PROVIDER, PCIE_COUNTERS, ROOT_ALLOCATED, ROOT_CONTIG, ROOT_FREE, ROOT_PINNED,
    ROOT_SPLIT, ROOT_TEMP,
};
use abi::{
    IOCTL_GPU_COPY_ENGINE, IOCTL_GPU_COUNT, IOCTL_GPU_INFO, IOCTL_GPU_PCIE, IOCTL_GPU_STATS,
    IOCTL_PMM_MAP, IOCTL_PROCESSES, IOCTL_PROCESS_STATS, IOCTL_TOPOLOGY,
};

/// An open `/dev/nvrs`.
pub struct Device(File);

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
        self.ioctl(IOCTL_GPU_COUNT, &mut n)?;
        Ok(n)
    }

    pub fn gpu_info(&self, index: u32) -> io::Result<GpuInfo> {
        let mut a = GpuInfo {
            index,
            ..Default::default()
        };
        self.ioctl(IOCTL_GPU_INFO, &mut a)?;
        Ok(a)
    }

    pub fn gpu_stats(&self, index: u32) -> io::Result<GpuStats> {
        let mut a = GpuStats {
            index,
            ..Default::default()
        };
        self.ioctl(IOCTL_GPU_STATS, &mut a)?;
        Ok(a)
    }

    /// The GPU's PCIe traffic counters (`NVRS_IOCTL_GPU_PCIE`).
    pub fn gpu_pcie(&self, index: u32) -> io::Result<GpuPcie> {
        let mut a = GpuPcie {
            index,
            ..Default::default()
        };
        self.ioctl(IOCTL_GPU_PCIE, &mut a)?;
        Ok(a)
    }

    /// The counters of the GPU's copy engine (`NVRS_IOCTL_GPU_COPY_ENGINE`).
    pub fn gpu_copy_engine(&self, index: u32) -> io::Result<GpuCopyEngine> {
        let mut a = GpuCopyEngine {
            index,
            ..Default::default()
        };
        self.ioctl(IOCTL_GPU_COPY_ENGINE, &mut a)?;
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
            self.ioctl(IOCTL_PMM_MAP, &mut a)?;
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
        self.ioctl(IOCTL_PROCESSES, &mut a)?;
        v.truncate(a.count as usize);
        Ok(v)
    }

    /// What each process holds on each GPU (`NVRS_IOCTL_PROCESS_STATS`), in entries of the
    /// size this tool knows (every module that has the ioctl fills all of version 1's fields).
    pub fn process_stats(&self) -> io::Result<Vec<ProcessEntry>> {
        let mut v = vec![ProcessEntry::default(); 4096];
        let mut a = ProcessStats {
            count: v.len() as u32,
            entry_size: std::mem::size_of::<ProcessEntry>() as u32,
            entries: v.as_mut_ptr() as u64,
            ..Default::default()
        };
        self.ioctl(IOCTL_PROCESS_STATS, &mut a)?;
        v.truncate(a.count as usize);
        Ok(v)
    }

    pub fn topology(&self) -> io::Result<Box<Topology>> {
        let mut t = Box::new(Topology::EMPTY);
        self.ioctl(IOCTL_TOPOLOGY, &mut *t)?;
        Ok(t)
    }
}

/// A NUL-terminated byte array as a string.
pub fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
