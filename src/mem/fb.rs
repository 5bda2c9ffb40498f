// SPDX-License-Identifier: GPL-2.0

//! A GPU's framebuffer memory: the physical memory manager behind a lock, and its debugfs view.
//!
//! The manager ([`crate::pmm`]) tracks framebuffer offsets: a chunk at offset `o` is reached
//! by the CPU and by peers at `aperture.phys + o` on a flat aperture, or through BAR1 once
//! mapped there ([`Reach`]). Its chunk sizes come from the GPU's hwref table.
//!
//! # Removal with pins outstanding
//!
//! When a GPU is unbound, its allocations are released and its non-persistent pins revoked, but
//! a persistent pin keeps its chunks (NVIDIA's driver likewise keeps the memory of a persistent
//! pin until it is put). The departing manager is then *retired* ([`retire`]): a GPU probed
//! later whose memory overlaps it (the same GPU after a rescan, or another function at the same
//! aperture) refuses allocations with `-EBUSY` ([`FbMemory::blocked`]) until every such pin is
//! put, on every retired manager it overlaps, so no byte an old pin still reaches is handed out
//! again.
//!
//! # Locking
//!
//! `pmm` is a mutex (metadata allocation sleeps). It is the innermost nvrs lock: nothing else is
//! taken while it is held. [`RETIRED`] is a leaf lock: a manager's range is fixed at creation
//! and read without `pmm`. See [`crate::locking`].

use core::fmt;

use kernel::{
    debugfs,
    list::List,
    new_condvar, new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Release, //
        },
        Arc,
        CondVar,
        CondVarTimeoutResult,
        Mutex,
        MutexGuard, //
    },
    time::{
        delay::fsleep,
        msecs_to_jiffies,
        Delta,
        Instant,
        Monotonic, //
    },
};

use crate::{
    hwref::ArchTable,
    kstorage::KernelStorage,
    mem::{
        copy::CopyEngine,
        faults::GpuFaults,
        p2pdma::P2pdma,
        reach::Reach,
        Allocation, //
    },
    pmm::{
        Pmm,
        PmmError, //
    },
    text::Size,
};

/// The memory manager of one GPU.
#[pin_data]
pub(crate) struct FbMemory {
    /// The manager.
    #[pin]
    pub(crate) pmm: Mutex<Pmm<KernelStorage>>,
    /// How the CPU and peers reach the memory: a flat aperture, or BAR1.
    pub(crate) reach: Reach,
    /// The GPU is going away: no new allocations, pins or DMA mappings. Set under `busy`, before
    /// the teardown walks the VA spaces, pins and mappings; every path that adds to those checks
    /// it under the lock the walk takes (see [`crate::locking`]). Read lock-free.
    gone: Atomic<bool>,
    /// Operations in flight that write the memory or hand it out (allocation, release,
    /// scrubbing), and how many of them wait on a consumer: GPU removal waits until there are
    /// none before it tears anything down.
    #[pin]
    busy: Mutex<Busy>,
    /// Signalled when no operation is in flight any more, and when a pin on the memory ends while the GPU is
    /// going away ([`Self::pin_ended`]).
    #[pin]
    idle: CondVar,
    /// Pins on the memory that ended while the GPU was going away: GPU removal, waiting for the
    /// pins it revoked, sleeps only if this did not change since it last looked
    /// ([`Self::wait_for_pin_end`]).
    pin_ends: Atomic<u32>,
    /// Bytes handed out and not yet returned.
    held: Atomic<u64>,
    /// The retired managers whose memory overlaps this one's, found at probe: allocations are
    /// refused while pins made before their GPUs' removal still hold memory of any of them.
    blocked_by: KVec<Arc<FbMemory>>,
    /// The CPU physical range of the managed memory, fixed at creation (read without `pmm`).
    phys_range: (u64, u64),
    /// The GPU's index (`NVRS_IOCTL_GPUS`), for display.
    pub(crate) index: u32,
    /// The GPU's UUID (all zero if unknown): a GPU coming back after a rescan is the same GPU
    /// even if its aperture moved.
    pub(crate) uuid: [u8; 16],
    /// How compaction copies this GPU's memory.
    pub(crate) copier: &'static dyn CopyEngine,
    /// Serialises compactions of this GPU (each plans from the state it finds), and counts
    /// them.
    #[pin]
    pub(crate) compacting: Mutex<u64>,
    /// The allocations made of this memory and not yet released, in creation order: GPU
    /// removal releases them ([`crate::mem::allocation::release_gpu`]) and compaction finds
    /// the owners of the chunks it moves here, without looking at anything but this GPU's own.
    #[pin]
    pub(crate) allocs: Mutex<List<Allocation>>,
    /// GPU removal has walked `allocs` (set under its lock): nothing is added to it any more
    /// ([`Self::walked`]).
    walked: Atomic<bool>,
    /// The GPU's fault controls (test builds; [`crate::mem::faults`]).
    #[pin]
    pub(crate) faults: GpuFaults,
    /// The GPU's memory as struct pages for the kernel's P2PDMA ([`crate::mem::p2pdma`]).
    pub(crate) p2pdma: P2pdma,
}

/// The operations in flight on a GPU's memory ([`FbMemory::busy`]).
#[derive(Default)]
struct Busy {
    /// Operations in flight ([`FbMemory::enter`], [`FbMemory::begin_release`]).
    ops: u32,
    /// Of those, the releases revoking a pin right now ([`InFlight::revoking`]): waiting for a
    /// consumer's free callback, in their own thread or in a worker.
    revoking: u32,
}

/// An operation in flight on a GPU's memory ([`FbMemory::enter`]).
pub(crate) struct InFlight<'a>(&'a FbMemory);

impl InFlight<'_> {
    /// Marks the operation, a release, as waiting for a consumer while it revokes a pin, until
    /// the returned guard is dropped: GPU removal gives up on an operation only while it waits
    /// so ([`FbMemory::wait_idle`]).
    pub(crate) fn revoking(&self) -> Revoking<'_> {
        self.0.busy.lock().revoking += 1;
        Revoking(self.0)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock();
        busy.ops -= 1;
        if busy.ops == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// A release revoking a pin ([`InFlight::revoking`]).
pub(crate) struct Revoking<'a>(&'a FbMemory);

impl Drop for Revoking<'_> {
    fn drop(&mut self) {
        self.0.busy.lock().revoking -= 1;
    }
}

/// Maps a memory-manager error to an errno.
pub(crate) fn errno(e: PmmError) -> Error {
    match e {
        PmmError::NoSpace | PmmError::OutOfMemory => ENOMEM,
        PmmError::Pinned | PmmError::Revoking | PmmError::PinOverflow => EBUSY,
        PmmError::InvalidId
        | PmmError::NotHead
        | PmmError::NotAllocated
        | PmmError::NotPinned
        | PmmError::NotSplit => ENOENT,
        PmmError::Misaligned
        | PmmError::Empty
        | PmmError::TooLarge
        | PmmError::BadSizes
        | PmmError::BadSize => EINVAL,
        PmmError::IllegalTransition { .. } | PmmError::Corrupt => EIO,
    }
}

kernel::sync::global_lock! {
    // SAFETY: `init_retired` calls `init` from the module initialiser, before the driver is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static RETIRED: Mutex<KVec<Arc<FbMemory>>> = KVec::new();
}

/// Initialises the list of retired managers. Called once, from module init.
pub(crate) fn init_retired() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { RETIRED.init() };
}

/// Frees the list at module exit (no pin can exist then: each persistent pin holds the module).
pub(crate) fn fini_retired() {
    drop(core::mem::take(&mut *RETIRED.lock()));
}

/// How long GPU removal waits for releases blocked in consumers' free callbacks before it gives
/// up on them ([`FbMemory::wait_idle`]): it then names the pin in the kernel log, leaves
/// the memory retired, and the unbind returns; the release completes when the callback returns.
pub(crate) const REMOVAL_WAIT: Delta = Delta::from_secs(10);

/// One slice of a bounded removal wait: sleeps on `cv` for at most 100 ms with `guard`'s lock
/// released, and returns the guard again. Interruptible, as the unbind's writer may be
/// signalled; with a signal pending the wait returns at once, so it sleeps the slice with the
/// lock dropped instead. The caller checks its condition and its deadline between slices.
pub(crate) fn wait_slice<'a, T>(
    cv: &CondVar,
    lock: &'a Mutex<T>,
    mut guard: MutexGuard<'a, T>,
) -> MutexGuard<'a, T> {
    if let CondVarTimeoutResult::Signal { .. } =
        cv.wait_interruptible_timeout(&mut guard, msecs_to_jiffies(100))
    {
        drop(guard);
        fsleep(Delta::from_millis(100));
        guard = lock.lock();
    }
    guard
}

/// Bytes that retired managers still hold (`debugfs/nvrs/p2p`'s `retired:` line).
pub(crate) fn retired_bytes() -> u64 {
    RETIRED.lock().iter().map(|m| m.held_bytes()).sum()
}

/// Makes room to retire every bound GPU's manager later without allocating (GPU removal must
/// not fail). Called at probe.
pub(crate) fn reserve_retired(bound: usize) -> Result {
    let mut r = RETIRED.lock();
    let want = r.len() + bound;
    let more = want.saturating_sub(r.len());
    r.reserve(more, GFP_KERNEL)?;
    Ok(())
}

/// Keeps a departing GPU's manager while pins made before the removal hold its memory.
pub(crate) fn retire(mem: Arc<FbMemory>) {
    let mut r = RETIRED.lock();
    r.retain(|m| m.held_bytes() != 0);
    if r.push_within_capacity(mem).is_err() {
        // `reserve_retired` made room at probe; this is a bug, and the memory stays blocked
        // only for as long as this manager is referenced by its pins.
        pr_err!("no room to retire a GPU memory manager\n");
    }
}

/// Every retired manager still holding memory of the GPU with `uuid` (if known) or overlapping
/// `[phys, phys + len)`. The list is allocated with `RETIRED` released (it is counted first, and
/// counted again if more managers match by the time it is filled).
pub(crate) fn retired_overlapping(
    phys: u64,
    len: u64,
    uuid: &[u8; 16],
) -> Result<KVec<Arc<FbMemory>>> {
    let end = phys.saturating_add(len);
    let hit = |m: &Arc<FbMemory>| {
        let (s, e) = m.range();
        m.held_bytes() != 0 && ((s < end && phys < e) || (*uuid != [0; 16] && m.uuid == *uuid))
    };
    loop {
        let want = {
            let mut r = RETIRED.lock();
            r.retain(|m| m.held_bytes() != 0);
            r.iter().filter(|m| hit(m)).count()
        };
        let mut out = KVec::with_capacity(want, GFP_KERNEL)?;
        let r = RETIRED.lock();
        let fits = r
            .iter()
            .filter(|m| hit(m))
            .all(|m| out.push_within_capacity(m.clone()).is_ok());
        drop(r);
        if fits {
            return Ok(out);
        }
    }
}

/// A manager for a GPU being probed ([`FbMemory::new`]) that refuses allocations while retired
/// managers overlapping it ([`retired_overlapping`]) hold memory; and the bytes they hold.
pub(crate) fn new_blocked(
    table: &ArchTable,
    reach: Reach,
    fb_offset: u64,
    fb_size: u64,
    index: u32,
    uuid: [u8; 16],
) -> Result<(Arc<FbMemory>, u64)> {
    let (phys, end) = reach.phys_range(fb_offset, fb_size)?;
    let blocked_by = retired_overlapping(phys, end - phys, &uuid)?;
    let held = blocked_by.iter().map(|m| m.held_bytes()).sum();
    let mem = FbMemory::new(table, reach, fb_offset, fb_size, index, uuid, blocked_by)?;
    Ok((mem, held))
}

impl FbMemory {
    /// A manager for `[fb_offset, fb_offset + fb_size)` of the GPU's memory, reached as
    /// `reach` says. Allocations are refused while any of `blocked_by` holds memory.
    pub(crate) fn new(
        table: &ArchTable,
        reach: Reach,
        fb_offset: u64,
        fb_size: u64,
        index: u32,
        uuid: [u8; 16],
        blocked_by: KVec<Arc<FbMemory>>,
    ) -> Result<Arc<Self>> {
        let pmm = Pmm::new(fb_offset, fb_size, table.pmm_chunk_sizes).map_err(errno)?;
        let phys_range = reach.phys_range(pmm.base(), pmm.total_bytes())?;
        Arc::pin_init(
            try_pin_init!(Self {
                pmm <- new_mutex!(pmm, "FbMemory::pmm"),
                reach,
                gone: Atomic::new(false),
                busy <- new_mutex!(Busy::default(), "FbMemory::busy"),
                walked: Atomic::new(false),
                idle <- new_condvar!("FbMemory::idle"),
                pin_ends: Atomic::new(0),
                held: Atomic::new(0),
                blocked_by,
                phys_range,
                index,
                uuid,
                copier: &crate::mem::copy::APERTURE_COPY,
                compacting <- new_mutex!(0, "FbMemory::compacting"),
                allocs <- new_mutex!(List::new(), "FbMemory::allocs"),
                faults <- GpuFaults::new(),
                p2pdma: P2pdma::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Marks the GPU as going away and waits until no operation is in flight ([`Self::enter`]):
    /// from then on none can start, so the teardown's walks see everything there is. Gives up
    /// as [`Self::wait_idle`] does.
    pub(crate) fn set_gone_and_wait(&self, since: Instant<Monotonic>) {
        {
            let _busy = self.busy.lock();
            self.gone.store(true, Release);
        }
        self.wait_idle(since)
    }

    /// Waits until no operation is in flight: GPU removal, after it walked the GPU's
    /// allocations, for the releases of allocations others took out of their VA spaces
    /// ([`Self::begin_release`]). Gives up once [`REMOVAL_WAIT`] has passed
    /// since `since` and every operation still in flight is a release revoking a pin, waiting
    /// for a consumer's free callback ([`InFlight::revoking`]). Such a release touches the
    /// aperture no more once it goes on ([`Self::enter`] refuses it, so its memory goes back
    /// unscrubbed), and the memory its pin holds keeps the manager retired; any other operation
    /// (allocating, scrubbing, a release that has not reached its pins or is waiting for the
    /// block layer to let go of its struct pages) is always waited for. Callbacks that run for
    /// no operation of the GPU's (a fault control's revocation) do not count. Sleeps with the
    /// lock released (the wait is not interruptible). What it gave up on is reported by the
    /// pins' drain ([`crate::p2p::pin::drain_gpu`]): each release given up on is in the free
    /// callback of one of their pins.
    pub(crate) fn wait_idle(&self, since: Instant<Monotonic>) {
        let mut busy = self.busy.lock();
        loop {
            if busy.ops == 0 || (since.elapsed() >= REMOVAL_WAIT && busy.revoking >= busy.ops) {
                return;
            }
            busy = wait_slice(&self.idle, &self.busy, busy);
        }
    }

    /// Called by a pin on this memory when it has ended: wakes GPU removal if it is waiting for
    /// pins to end ([`Self::wait_for_pin_end`]). Nothing to do before the GPU is going away.
    pub(crate) fn pin_ended(&self) {
        if !self.is_gone() {
            return;
        }
        self.pin_ends.fetch_add(1, Release);
        // A waiter reads the count again under `busy` before it sleeps: once the lock was free
        // after the count changed, it either sleeps (and is woken here) or has seen the change.
        drop(self.busy.lock());
        self.idle.notify_all();
    }

    /// How many pins ended since the GPU started going away; read before looking at the pins,
    /// and handed to [`Self::wait_for_pin_end`].
    pub(crate) fn pin_ends(&self) -> u32 {
        self.pin_ends.load(Acquire)
    }

    /// Sleeps (one slice of at most 100 ms, see [`wait_slice`]) unless a pin ended since
    /// [`Self::pin_ends`] returned `seen`.
    pub(crate) fn wait_for_pin_end(&self, seen: u32) {
        let busy = self.busy.lock();
        if self.pin_ends.load(Acquire) == seen {
            drop(wait_slice(&self.idle, &self.busy, busy));
        }
    }

    /// Starts the release of an allocation, however it was found (its owner took it out of its
    /// VA space, or GPU removal's walk popped it). Never refused: removal may have walked the
    /// allocations already, and then waits for this release instead ([`Self::wait_idle`]),
    /// even if the GPU is already going away. Each release counts itself as it starts, not as
    /// its allocation leaves an index, so a thread releasing several allocations one after
    /// the other counts only the one it is at: the others are still in the GPU's list, where
    /// removal finds them.
    pub(crate) fn begin_release(&self) -> InFlight<'_> {
        self.busy.lock().ops += 1;
        InFlight(self)
    }

    /// Whether GPU removal has walked the GPU's allocations; called under [`Self::allocs`]'s
    /// lock, where removal sets it, by an allocation about to join the list.
    pub(crate) fn walked(&self) -> bool {
        self.walked.load(Acquire)
    }

    /// Records that GPU removal walked the allocations (under [`Self::allocs`]'s lock).
    pub(crate) fn set_walked(&self) {
        self.walked.store(true, Release);
    }

    /// Starts an operation that writes the memory or hands it out; `-ENODEV` once the GPU is
    /// going away. GPU removal waits for the returned guard to be dropped.
    pub(crate) fn enter(&self) -> Result<InFlight<'_>> {
        let mut busy = self.busy.lock();
        if self.is_gone() {
            return Err(ENODEV);
        }
        busy.ops += 1;
        Ok(InFlight(self))
    }

    /// Whether new allocations are refused: pins made before an earlier removal still hold
    /// memory that overlaps this GPU's (`-EBUSY`), or BAR1 failed to unmap memory (`-EIO`).
    pub(crate) fn blocked(&self) -> Result {
        if self.blocked_by.iter().any(|old| old.held_bytes() != 0) {
            return Err(EBUSY);
        }
        // BAR1 failed to unmap, or a copy-engine launch never completed: either may still
        // reach memory that went back.
        if self.reach.bar1().is_some_and(|b| b.is_broken())
            || self.reach.ce().is_some_and(|c| c.is_wedged())
        {
            return Err(EIO);
        }
        Ok(())
    }

    /// The CPU physical range of the managed memory (no lock: [`RETIRED`] is a leaf lock).
    fn range(&self) -> (u64, u64) {
        self.phys_range
    }

    /// Bytes handed out and not yet returned.
    pub(crate) fn held_bytes(&self) -> u64 {
        self.held.load(Acquire)
    }

    /// Counts `n` bytes handed out.
    pub(crate) fn add_held(&self, n: u64) {
        self.held.fetch_add(n, Release);
    }

    /// Counts `n` bytes returned.
    pub(crate) fn sub_held(&self, n: u64) {
        self.held.fetch_sub(n, Release);
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
    let copier = if mem.reach.ce().is_some() {
        "model-ce (scrub)"
    } else {
        mem.copier.name()
    };
    writeln!(f, "copy_engine: {copier}")?;
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
