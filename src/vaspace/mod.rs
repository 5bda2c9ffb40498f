// SPDX-License-Identifier: GPL-2.0

//! GPU VA spaces: each process's index from GPU VA to its allocations, the "cudaMalloc side" of
//! nvrs.
//!
//! Each process that opens `/dev/nvrs` gets one [`VaSpace`], bound to its address space (mm) as
//! UVM's are: shared by all the files that process opens, usable only from that process, and
//! torn down when the address space goes away (the process exits or execs; the allocations are
//! then released by a work item, not in the MMU notifier) or the last of its files is closed,
//! whichever comes first. A child that inherits the file does not keep the
//! parent's memory alive and cannot use it (`-EPERM`).
//!
//! The allocations themselves, their isolation and their lifetime are the memory layer's
//! ([`crate::mem`]); a VA space only finds them by VA and decides when its owner's go:
//! `NVRS_IOCTL_FREE`, the last close and the owner's exit take an allocation out of the index
//! and release it, which revokes its non-persistent pins. The
//! exported `nvidia_p2p_get_pages()` finds allocations by VA in the calling process's VA space
//! ([`lookup_current`]). GPU removal takes its GPU's allocations out of the VA spaces through
//! [`Index`].
//!
//! # Locking
//!
//! The lock order of all of nvrs is written down in [`crate::locking`].

pub(crate) mod layout;
pub(crate) mod range;

use core::ffi::c_void;

use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::{
        Arc,
        ArcBorrow,
        CondVar,
        Mutex, //
    },
    task::Pid,
    time::{
        Instant,
        Monotonic, //
    },
    workqueue::{
        Work,
        WorkItem, //
    },
};

use crate::{
    gpu::GpuInfo,
    helpers::{
        self,
        MmWatch, //
    },
    mem::{
        allocation::{
            AllocOptions,
            Index, //
        },
        fb,
        Allocation, //
    },
};

use range::Span;

/// Mutable state of a VA space.
pub(crate) struct VaInner {
    /// Live allocations by first VA. Nodes are allocated before the lock is taken (it is on
    /// the `nvidia_p2p_get_pages` path).
    allocs: RBTree<u64, Arc<Allocation>>,
    /// Open files of the process.
    opens: usize,
    /// The watch on the owner's address space (taken out and stopped at the last close).
    watch: Option<MmWatch>,
    /// The owner's address space is gone: no new allocations.
    dead: bool,
    /// Allocations the exit work ([`VaSpace::release_all`]) has taken out and not yet released;
    /// the last close waits for them ([`VaSpace::close`]).
    releasing: u32,
}

impl VaInner {
    /// Whether the caller runs in the address space that owns this VA space (and it is alive).
    fn is_current(&self) -> bool {
        !self.dead && self.watch.as_ref().is_some_and(MmWatch::is_current)
    }
}

/// The GPU VA space of one process.
#[pin_data]
pub(crate) struct VaSpace {
    /// The owning process, named to each reader in its own PID namespace
    /// (`NVRS_IOCTL_PROCESSES`).
    owner: helpers::Process,
    #[pin]
    inner: Mutex<VaInner>,
    /// Releases the allocations once the owner's address space is gone ([`VaSpace::owner_gone`]
    /// queues it on nvrs's work queue; GPU removal flushes it, module exit drains it).
    #[pin]
    exit_work: Work<VaSpace>,
    /// Signalled when [`VaInner::releasing`] drops to zero.
    #[pin]
    released: CondVar,
}

kernel::impl_has_work! {
    impl HasWork<VaSpace> for VaSpace { self.exit_work }
}

/// The teardown after the owner's exit, in a worker: free callbacks and scrubbing run there,
/// not in the MMU notifier's SRCU read section.
impl WorkItem for VaSpace {
    type Pointer = Arc<VaSpace>;

    fn run(this: Arc<VaSpace>) {
        this.release_all();
    }
}

/// GPU removal takes the GPU's allocations out of their owners' VA spaces through this
/// ([`crate::mem::allocation::release_gpu`]).
impl Index for VaSpace {
    fn take_out(&self, a: &Allocation) {
        let node = {
            let mut inner = self.inner.lock();
            let va = a.span.start();
            match inner.allocs.get(&va) {
                Some(x) if core::ptr::eq(&**x, a) => inner.allocs.remove_node(&va),
                // Already taken out by its owner (a FREE, the last close, the exit work).
                _ => None,
            }
        };
        // The node is freed here, outside the lock; never the allocation's last reference.
        drop(node);
    }
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before `/dev/nvrs` is
    // registered and so before any other use.
    pub(crate) unsafe(uninit) static VASPACES: Mutex<KVec<Arc<VaSpace>>> = KVec::new();
}

/// Frees the VA-space registry's memory at module exit (every file is closed by then).
pub(crate) fn fini_registry() {
    drop(core::mem::take(&mut *VASPACES.lock()));
}

/// Initialises the VA-space registry. Called once, from module init.
pub(crate) fn init_registry() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { VASPACES.init() };
}

/// Called by the MMU notifier when the owner's address space is torn down (exit or exec).
///
/// # Safety
///
/// `owner` must be the [`VaSpace`] that registered the watch; it stays valid while the watch
/// exists ([`VaSpace::close`] stops the watch before it can go away).
#[no_mangle]
unsafe extern "C" fn nvrs_va_space_exit(owner: *mut c_void) {
    // SAFETY: `owner` is `Arc::as_ptr` of the VA space (`VaSpace::open`), whose reference in the
    // registry or in the opener is not dropped before `close` has stopped the watch, which waits
    // for this call (function safety requirement).
    let vs = unsafe { ArcBorrow::<VaSpace>::from_raw(owner.cast()) };
    vs.owner_gone();
}
crate::helpers::same_signature!(nvrs_va_space_exit);

impl VaSpace {
    /// The calling process's VA space, created on its first open.
    pub(crate) fn open() -> Result<Arc<Self>> {
        if let Some(vs) = Self::current() {
            let mut inner = vs.inner.lock();
            if !inner.dead {
                inner.opens += 1;
                drop(inner);
                return Ok(vs);
            }
        }
        let vs = Arc::pin_init(
            try_pin_init!(Self {
                owner: helpers::Process::current(),
                inner <- new_mutex!(VaInner {
                    allocs: RBTree::new(),
                    opens: 1,
                    watch: None,
                    dead: false,
                    releasing: 0,
                }, "VaSpace::inner"),
                exit_work <- kernel::new_work!("VaSpace::exit_work"),
                released <- kernel::new_condvar!("VaSpace::released"),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `vs` outlives the watch: `close` stops it before the last reference can go.
        let watch = unsafe { MmWatch::current(Arc::as_ptr(&vs).cast()) }?;
        vs.inner.lock().watch = Some(watch);
        // `VASPACES` is taken by `nvidia_p2p_get_pages`: no allocation under it.
        let mut all = match crate::room::lock_with_room(|| VASPACES.lock(), |all| &mut **all) {
            Ok(all) => all,
            Err(e) => {
                vs.close();
                return Err(e);
            }
        };
        // Another thread of the process may have raced us: use its VA space instead.
        if let Some(other) = all.iter().find(|v| v.is_current()).cloned() {
            let mut inner = other.inner.lock();
            if !inner.dead {
                inner.opens += 1;
                drop(inner);
                drop(all);
                vs.close();
                return Ok(other);
            }
        }
        // Room was made above.
        let _ = all.push_within_capacity(vs.clone());
        Ok(vs)
    }

    /// The live VA space of the calling process, if it has one.
    fn current() -> Option<Arc<Self>> {
        VASPACES.lock().iter().find(|v| v.is_current()).cloned()
    }

    /// Whether the caller runs in the address space that owns this VA space (and it is alive).
    pub(crate) fn is_current(&self) -> bool {
        self.inner.lock().is_current()
    }

    /// The owner's address space went away (the MMU notifier's `release`, inside its SRCU read
    /// section): the VA space dies at once, later calls through the owner's files fail
    /// (`-EPERM`), and the allocations become unreachable (they are found only through a live
    /// VA space). Releasing them (free callbacks, scrubbing) is left to [`VaSpace::exit_work`];
    /// until it runs, GPU removal or the last close may release them instead.
    fn owner_gone(self: ArcBorrow<'_, Self>) {
        self.inner.lock().dead = true;
        let queued = match helpers::wq() {
            // Queued once: `owner_gone` runs once per address space.
            Some(q) => q.enqueue(Arc::from(self)).is_ok(),
            None => false,
        };
        if !queued {
            // Cannot happen (the queue exists while `/dev/nvrs` does); release here rather than
            // never.
            self.release_all();
        }
    }

    /// Releases the allocations the VA space still has, one at a time (each is taken out under
    /// the lock and released without it).
    fn release_all(&self) {
        loop {
            let node = {
                let mut inner = self.inner.lock();
                let va = inner.allocs.iter().next().map(|(va, _)| *va);
                let node = va.and_then(|va| inner.allocs.remove_node(&va));
                if node.is_some() {
                    inner.releasing = inner.releasing.saturating_add(1);
                }
                node
            };
            // The node is freed here, outside the lock.
            let Some(a) = node.map(|n| n.to_key_value().1) else {
                break;
            };
            crate::testhook::delay(crate::testhook::Point::ExitRelease);
            a.release_detached();
            let mut inner = self.inner.lock();
            inner.releasing = inner.releasing.saturating_sub(1);
            if inner.releasing == 0 {
                self.released.notify_all();
            }
        }
    }

    /// Waits until the exit work has no allocation in flight, for at most
    /// [`fb::REMOVAL_WAIT`]: the process's memory is back when its last file is closed (at
    /// exit, before its parent sees it end), as when the release ran in the exiting thread. A
    /// release held up longer (a consumer's free callback that does not return) is left to
    /// finish on its own, with one dmesg line.
    fn wait_released(&self) {
        let since: Instant<Monotonic> = Instant::now();
        let mut inner = self.inner.lock();
        while inner.releasing != 0 {
            if since.elapsed() >= fb::REMOVAL_WAIT {
                pr_warn!(
                    "process {}: its memory's release after exit still runs after {} ms; the memory comes back when it ends\n",
                    self.owner.id_for_current().unwrap_or(0),
                    fb::REMOVAL_WAIT.as_millis()
                );
                return;
            }
            inner = fb::wait_slice(&self.released, &self.inner, inner);
        }
    }

    /// Drops one open file; the last one tears the VA space down, releasing every allocation.
    pub(crate) fn close(self: &Arc<Self>) {
        let (doomed, watch) = {
            let mut all = VASPACES.lock();
            let mut inner = self.inner.lock();
            inner.opens = inner.opens.saturating_sub(1);
            if inner.opens != 0 {
                return;
            }
            all.retain(|v| !Arc::ptr_eq(v, self));
            inner.dead = true;
            (core::mem::take(&mut inner.allocs), inner.watch.take())
        };
        // Stopping the watch waits for a running `owner_gone`; none can start afterwards.
        drop(watch);
        // One release after the other, each counted as it starts: those not yet started are
        // still in their GPUs' lists, where GPU removal finds (and releases) them.
        for a in doomed.values() {
            a.release_detached();
        }
        self.wait_released();
    }

    /// Allocates `size` bytes on `gpu`, zeroed ([`Allocation::create`]), and indexes them.
    pub(crate) fn alloc(
        self: &Arc<Self>,
        gpu: &GpuInfo,
        size: u64,
        opts: AllocOptions,
    ) -> Result<Span> {
        let mem = gpu.mem.as_ref().ok_or(ENODEV)?;
        // Allocated before the lock is taken (it is on the `nvidia_p2p_get_pages` path).
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let index: Arc<dyn Index> = self.clone();
        Allocation::create(mem, size, opts, index, |a| {
            let mut inner = self.inner.lock();
            // Checked under `inner`, which owner teardown takes after setting it.
            if inner.dead {
                return Err(EPERM);
            }
            // VAs are unique among live allocations, so nothing is replaced.
            inner.allocs.insert(node.into_node(a.span.start(), a));
            Ok(())
        })
    }

    /// Frees the allocation starting at `va`: revokes its pins and removes its CPU mappings; its
    /// memory goes back unless a persistent pin holds it.
    pub(crate) fn free(&self, va: u64) -> Result {
        let node = self.inner.lock().allocs.remove_node(&va).ok_or(ENOENT)?;
        let (_, a) = node.to_key_value();
        crate::testhook::delay(crate::testhook::Point::FreeRelease);
        a.release_detached();
        Ok(())
    }

    /// The allocation holding `[va, va + len)`, if one does.
    pub(crate) fn find(&self, want: &Span) -> Option<Arc<Allocation>> {
        Self::find_in(&self.inner.lock(), want)
    }

    /// [`VaSpace::find`] with the lock held.
    fn find_in(inner: &VaInner, want: &Span) -> Option<Arc<Allocation>> {
        // The allocation starting at or below `want`: the first at or above it, or the one
        // before.
        let below = match inner.allocs.cursor_lower_bound(&want.start()) {
            Some(c) if *c.current().0 == want.start() => Some(c.current().1.clone()),
            Some(c) => c.peek_prev().map(|(_, a)| a.clone()),
            None => inner.allocs.cursor_back().map(|c| c.current().1.clone()),
        };
        below.filter(|a| a.span.contains(want))
    }
}

/// One process's live allocations on one GPU (`NVRS_IOCTL_PROCESSES`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Usage {
    /// The process.
    pub(crate) pid: Pid,
    /// The GPU's index.
    pub(crate) gpu: u32,
    /// Bytes allocated.
    pub(crate) bytes: u64,
    /// Live allocations.
    pub(crate) allocations: u32,
    /// Live `nvidia_p2p` pins on them.
    pub(crate) pins: u32,
    /// dma-buf exports of them that hold their memory.
    pub(crate) dmabufs: u32,
}

/// A count as `u32`, at most `u32::MAX`.
fn saturated(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Fills `out` with the memory each live VA space holds on each GPU (GPUs with none left out);
/// returns the entries written. Processes are named by their id in the caller's PID namespace,
/// and those the caller cannot see there are left out (a container sees its own processes
/// only). Nothing is allocated under the locks.
pub(crate) fn usage(out: &mut [Usage]) -> usize {
    let mut n = 0;
    let all = VASPACES.lock();
    for vs in all.iter() {
        let Some(pid) = vs.owner.id_for_current() else {
            continue;
        };
        let inner = vs.inner.lock();
        let start = n;
        for (_, a) in inner.allocs.iter() {
            let gpu = a.mem().index;
            let known = out
                .get(start..n)
                .and_then(|s| s.iter().position(|u| u.gpu == gpu));
            let i = match known {
                Some(i) => start + i,
                None => {
                    // No room left: the rest of this process's GPUs are left out.
                    let Some(u) = out.get_mut(n) else {
                        continue;
                    };
                    *u = Usage {
                        pid,
                        gpu,
                        ..Usage::default()
                    };
                    n += 1;
                    n - 1
                }
            };
            let Some(u) = out.get_mut(i) else {
                continue;
            };
            let st = a.state.lock();
            u.bytes += a.span.len();
            u.allocations = u.allocations.saturating_add(1);
            u.pins = u.pins.saturating_add(saturated(st.pins));
            u.dmabufs = u.dmabufs.saturating_add(saturated(st.dmabufs));
        }
    }
    n
}

/// The allocation of the calling process that holds `want`.
pub(crate) fn lookup_current(want: &Span) -> Option<Arc<Allocation>> {
    // One hold of each lock: the caller's VA space is searched where it is found, and the
    // search ends there, whether or not it holds `want` (as `VaSpace::current` then `find`).
    VASPACES
        .lock()
        .iter()
        .find_map(|vs| {
            let inner = vs.inner.lock();
            inner.is_current().then(|| VaSpace::find_in(&inner, want))
        })
        .flatten()
}
