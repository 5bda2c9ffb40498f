// SPDX-License-Identifier: GPL-2.0

//! A GPU's framebuffer memory: the physical memory manager behind a lock, and its debugfs view.
//!
//! The manager ([`crate::pmm`]) tracks framebuffer offsets, i.e. offsets into the aperture:
//! a chunk at offset `o` is reached by the CPU and by peers at `aperture.phys + o`. Its chunk
//! sizes come from the GPU's hwref table.
//!
//! # Locking
//!
//! `pmm` is a mutex (metadata allocation sleeps). It is the innermost nvrs lock: nothing else is
//! taken while it is held.

use core::fmt;

use kernel::{
    debugfs, new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Release, //
        },
        Arc,
        Mutex, //
    },
};

use crate::{
    gpu::Size,
    hwref::ArchTable,
    kstorage::KernelStorage,
    pmm::{
        Pmm,
        PmmError, //
    },
};

/// The memory manager of one GPU.
#[pin_data]
pub(crate) struct FbMemory {
    /// The manager.
    #[pin]
    pub(crate) pmm: Mutex<Pmm<KernelStorage>>,
    /// CPU physical address of the aperture (offset 0 of the manager's address space).
    pub(crate) aperture_phys: u64,
    /// The GPU is going away: no new allocations, pins or DMA mappings.
    gone: Atomic<bool>,
}

/// Maps a memory-manager error to an errno.
pub(crate) fn errno(e: PmmError) -> Error {
    match e {
        PmmError::NoSpace => ENOMEM,
        PmmError::OutOfMemory => ENOMEM,
        PmmError::Pinned | PmmError::Revoking => EBUSY,
        PmmError::InvalidId | PmmError::NotHead | PmmError::NotAllocated => ENOENT,
        PmmError::Corrupt => EIO,
        _ => EINVAL,
    }
}

impl FbMemory {
    /// A manager for `[fb_offset, fb_offset + fb_size)` of the aperture at `aperture_phys`.
    pub(crate) fn new(
        table: &ArchTable,
        aperture_phys: u64,
        fb_offset: u64,
        fb_size: u64,
    ) -> Result<Arc<Self>> {
        let pmm = Pmm::new(fb_offset, fb_size, table.pmm_chunk_sizes).map_err(errno)?;
        Arc::pin_init(
            try_pin_init!(Self {
                pmm <- new_mutex!(pmm),
                aperture_phys,
                gone: Atomic::new(false),
            }),
            GFP_KERNEL,
        )
    }

    /// Marks the GPU as going away.
    pub(crate) fn set_gone(&self) {
        self.gone.store(true, Release);
    }

    /// Whether the GPU is going away.
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Acquire)
    }

    /// Free bytes.
    pub(crate) fn free_bytes(&self) -> u64 {
        self.pmm.lock().stats().free_bytes
    }

    /// Total bytes managed.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.pmm.lock().total_bytes()
    }
}

fn render_stats(mem: &Arc<FbMemory>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = mem.pmm.lock().stats();
    writeln!(
        f,
        "total_bytes: {} ({})",
        s.total_bytes,
        Size(s.total_bytes)
    )?;
    write!(f, "{s}")
}

fn render_map(mem: &Arc<FbMemory>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let pmm = mem.pmm.lock();
    write!(f, "{}", pmm.map())
}

/// The debugfs files of a GPU's memory manager: `pmm/stats` and `pmm/map`.
#[pin_data]
pub(crate) struct FbDebugfs {
    #[pin]
    _stats: debugfs::File<Arc<FbMemory>>,
    #[pin]
    _map: debugfs::File<Arc<FbMemory>>,
    _dir: debugfs::Dir,
}

impl FbDebugfs {
    /// Creates `pmm/` under `gpu_dir`.
    pub(crate) fn new(gpu_dir: &debugfs::Dir, mem: &Arc<FbMemory>) -> impl PinInit<Self, Error> {
        let dir = gpu_dir.subdir(c"pmm");
        let (a, b) = (mem.clone(), mem.clone());
        try_pin_init!(Self {
            _stats <- dir.read_callback_file(c"stats", a, &render_stats),
            _map <- dir.read_callback_file(c"map", b, &render_map),
            _dir: dir,
        })
    }
}
