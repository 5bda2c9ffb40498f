// SPDX-License-Identifier: GPL-2.0

//! Pins: GPU memory pinned for a peer, and the page tables and DMA mappings handed out for them.
//!
//! A [`P2pPin`] owns the C-visible `nvidia_p2p_page_table` (and its page entries and UUID), the
//! DMA mappings made of it, and a P2P pin count on every memory-manager chunk it covers. Pins
//! are registered by the address of their page table, which is how consumers name them in
//! later calls; [`PINS`] maps that address to the pin. A pointer a consumer passes in is only
//! ever used as a key into [`PINS`]: nvrs never dereferences it unless it found a live pin
//! there, so stale pointers after a revocation are harmless (the call returns 0).
//!
//! # Ending a pin
//!
//! A pin ends exactly once, either by its consumer ([`PinEntry::put`]: `put_pages`) or by
//! revocation ([`PinEntry::revoke`]: the allocation was freed, the process exited, or the GPU
//! went away). [`PinState`] arbitrates: whoever moves it out of `Live` does the work. A `put` that
//! finds a revocation in flight waits for it to finish and returns 0, as NVIDIA's driver does.
//! Revocation calls the consumer's free callback with no nvrs lock held, then tears down the DMA
//! mappings and frees the table. So a consumer must not hold a lock its callback takes while it
//! calls `put_pages` on the same memory (gdrdrv drops its lock first): the put would wait for a
//! callback that waits for the lock. A put from the callback itself is refused with `-EIO`.
//!
//! # Reuse
//!
//! A pin object holds no reference to the memory it pins: the registry binds it to its
//! allocation ([`PinEntry`]). So when the last reference to an ended pin goes, the pin object
//! and its registry node are kept as a [`Spare`] for the next pin (its table block goes to the
//! quarantine), and a 64 KiB pin allocates nothing once a few pins have ended.

use core::{ffi::c_void, ops::Range};

use kernel::{
    alloc::KVVec,
    list::{
        AtomicTracker,
        ListArc,
        TryNewListArc, //
    },
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        Arc,
        CondVar,
        Mutex,
        UniqueArc, //
    },
    time::{
        Instant,
        Monotonic, //
    },
    workqueue::{
        HasWork,
        Work,
        WorkItem, //
    },
};

use crate::{
    hwref::P2P_PAGE_SIZE,
    mem::{
        fb::{
            FbMemory,
            REMOVAL_WAIT, //
        },
        holder::{
            Held,
            Holder, //
        },
        Allocation,
    },
    p2p::{
        abi,
        dma::DmaMapping,
        profile::{
            Phase,
            Stopwatch, //
        },
        quarantine,
        table::TableMemory, //
    },
};

/// Where a pin is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum PinState {
    /// Handed out and usable.
    Live = 0,
    /// The free callback is running or the mappings are being torn down.
    Revoking = 1,
    /// Being put by its consumer.
    Putting = 2,
    /// Over; the pin is out of [`PINS`].
    Dead = 3,
}

impl PinState {
    /// The state whose value is `v` (only values of [`PinState`] are ever stored).
    fn from_u32(v: u32) -> Self {
        match v {
            0 => PinState::Live,
            1 => PinState::Revoking,
            2 => PinState::Putting,
            _ => PinState::Dead,
        }
    }
}

/// What a consumer asked to pin.
#[derive(Clone, Copy)]
pub(crate) struct PinRequest {
    /// VA the consumer pinned (checked again at put).
    pub(crate) va: u64,
    /// Offset of the pinned range in the allocation.
    pub(crate) offset: u64,
    /// Length of the pinned range.
    pub(crate) len: u64,
    /// `get_pages_persistent`: never revoked by a free.
    pub(crate) persistent: bool,
    /// The consumer's free callback and its argument (non-persistent pins).
    pub(crate) callback: abi::FreeCallback,
    pub(crate) data: *mut c_void,
}

impl PinRequest {
    /// Nothing asked (a pin object kept for reuse).
    const NONE: PinRequest = PinRequest {
        va: 0,
        offset: 0,
        len: 0,
        persistent: false,
        callback: None,
        data: core::ptr::null_mut(),
    };
}

/// A pin. The allocation it pins is not here but beside it in its [`PinEntry`], so that an
/// ended pin can be kept for reuse ([`Spare`]) without keeping its allocation alive.
#[pin_data]
pub(crate) struct P2pPin {
    /// The page table and its entries, as handed to the consumer.
    pub(crate) table: TableMemory,
    /// What the consumer asked.
    pub(crate) req: PinRequest,
    /// The allocation's pieces that back the pinned range ([`Allocation::piece_range`]).
    pieces: Range<usize>,
    /// Life cycle ([`PinState`]); see the module documentation. Moves out of `Live` once, by
    /// compare-and-exchange.
    state: Atomic<u32>,
    /// The task running the free callback during a revocation (0 otherwise).
    revoker: Atomic<usize>,
    /// Threads waiting for the pin to die ([`P2pPin::wait_dead`]); the thread that ends it
    /// wakes them only if there are any.
    waiters: Atomic<u32>,
    /// Signalled, under `dma`, when the pin is dead.
    #[pin]
    done: CondVar,
    /// DMA mappings made of the table.
    #[pin]
    pub(crate) dma: Mutex<KVec<DmaMapping>>,
    /// Queues the pin's revocation by GPU removal ([`drain_gpu`]).
    #[pin]
    removal: Work<Held<P2pPin>>,
    /// Whether its allocation lists it among its holders ([`crate::mem::holder`]).
    #[pin]
    listed: AtomicTracker,
    /// A fault control asked for its revocation ([`revoke_on`], [`revoke_one_on`]): asked
    /// once, counted once.
    fault_revoke: Atomic<bool>,
    /// Its revocation is queued and no worker has started it yet ([`P2pPin::queue_revocation`]).
    queued: Atomic<bool>,
    /// Through BAR1 ([`crate::mem::reach`]): the run its pages are mapped at (BAR1 offset,
    /// pages), unmapped when the pin ends.
    bar1: Option<(u64, usize)>,
}

kernel::list::impl_list_arc_safe! {
    impl ListArcSafe<0> for P2pPin { tracked_by listed: AtomicTracker; }
}

/// What the pinned allocation sees of the pin: its release revokes a non-persistent pin.
impl Holder for P2pPin {
    fn is_persistent(&self) -> bool {
        self.req.persistent
    }

    fn revoke(&self) {
        // Still registered, unless it is ending already (being put or revoked elsewhere): then
        // wait for that, so that the memory is unpinned when the release goes on. The caller's
        // reference keeps the pin from being reused meanwhile, and so its table's key.
        let Some(entry) = lookup(self.table.key()).filter(|e| core::ptr::eq(&e.pin.holder, self))
        else {
            self.wait_dead();
            return;
        };
        // The fault control `callback context workqueue` ([`crate::faults`]): a worker revokes
        // it (queued now, or already by someone else), and the release waits for that.
        if entry.alloc.mem().faults.callback_faults().1 && entry.queue_revocation() {
            drop(entry);
            self.wait_dead();
            return;
        }
        entry.revoke();
    }
}

// SAFETY: `req.data` is the consumer's opaque cookie, only ever passed back to its callback, and
// the callback is an `extern "C"` function pointer; both may be used from any thread. The other
// fields are `Send + Sync`.
unsafe impl Send for P2pPin {}
// SAFETY: See above; shared access never mutates `req`.
unsafe impl Sync for P2pPin {}

/// A pin and the allocation it pins, as the registry holds them and lookups return them.
#[derive(Clone)]
pub(crate) struct PinEntry {
    /// The pin (with its links in the allocation's list of holders).
    pub(crate) pin: Arc<Held<P2pPin>>,
    /// The pinned allocation (kept alive by the pin).
    pub(crate) alloc: Arc<Allocation>,
}

impl core::ops::Deref for PinEntry {
    type Target = P2pPin;

    fn deref(&self) -> &P2pPin {
        &self.pin
    }
}

/// A registry node, allocated before the registry's lock is taken.
type Node = RBTreeNodeReservation<usize, PinEntry>;

/// What an ended pin leaves for the next: its pin object, with no table and its DMA mappings
/// gone, and its registry node. Kept by the quarantine ring ([`quarantine::park_pin`]).
pub(crate) struct Spare {
    pin: Pin<UniqueArc<Held<P2pPin>>>,
    node: Node,
}

/// The registry of live pins, keyed by page-table address. Its nodes are allocated before the
/// lock is taken, so pinning never allocates under a lock.
pub(crate) struct PinRegistry {
    /// `None` before module init and after module exit.
    pins: Option<RBTree<usize, PinEntry>>,
}

kernel::sync::global_lock! {
    // SAFETY: `init_registry` calls `init` from the module initialiser, before any pin can exist.
    pub(crate) unsafe(uninit) static PINS: Mutex<PinRegistry> = PinRegistry { pins: None };
}

/// Free callbacks nvrs has called since it was loaded (debugfs `p2p`: `revoked: N`); a
/// consumer counting its callbacks must arrive at the same number.
static REVOKED: Atomic<u64> = Atomic::new(0);

/// Initialises the pin registry. Called once, from module init.
pub(crate) fn init_registry() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { PINS.init() };
    PINS.lock().pins = Some(RBTree::new());
}

impl PinRegistry {
    /// Every live pin, in key order.
    fn all(&self) -> impl Iterator<Item = &PinEntry> {
        self.pins.iter().flat_map(|t| t.values())
    }
}

/// Frees the pin registry at module exit (no pin can exist then: each persistent pin holds the
/// module, and unbinding the GPUs revoked the others).
pub(crate) fn fini_registry() {
    let tree = PINS.lock().pins.take();
    drop(tree);
}

/// The live pin whose page table is at `key`.
pub(crate) fn lookup(key: usize) -> Option<PinEntry> {
    PINS.lock().pins.as_ref()?.get(&key).cloned()
}

/// Ends or disarms every pin on the memory of `mem`, whose GPU is going away, and waits for
/// them; never allocates. Returns what it gave up waiting for (see below), `None` if nothing.
///
/// Called by GPU removal after it released the GPU's allocations
/// ([`crate::mem::allocation::release_gpu`] leaves their pins here). A persistent pin loses its DMA mappings (the aperture is going away)
/// and keeps its table and memory until it is put. A live non-persistent pin is revoked in a
/// work item on nvrs's revocation queue ([`P2pPin::removal`]), never in the unbinding thread: a
/// consumer whose free callback blocks holds up its own pin only. Then this waits until no pin
/// on the memory is being revoked, put or created — except that once [`REMOVAL_WAIT`] has
/// passed since `since` it gives up if every pin still in flight waits on a consumer: a free
/// callback that has not returned, or a revocation queued behind such callbacks (the queue runs
/// a bounded number of work items at once, [`P2pPin::waits_on_consumer`]). Those pins end when
/// the callbacks return; until then their memory keeps the manager retired (the caller names
/// them). What it gave up on is counted in the same look that decided to give up: a pin's
/// revocation may leave the queue for its callback at any time, so a second look could miss
/// it.
pub(crate) fn drain_gpu(mem: &FbMemory, since: Instant<Monotonic>) -> Option<StuckPins> {
    loop {
        let next = PINS
            .lock()
            .all()
            .find(|p| {
                p.on(mem)
                    && p.req.persistent
                    && p.state() == PinState::Live
                    && !p.dma.lock().is_empty()
            })
            .cloned();
        match next {
            Some(pin) => pin.unmap_all(),
            None => break,
        }
    }
    loop {
        // Read before looking at the pins: a pin ending after the look changes it.
        let seen = mem.pin_ends();
        let mut pending = 0u32;
        let mut stuck = StuckPins {
            count: 0,
            first: None,
        };
        let mut unqueued = None;
        {
            let reg = PINS.lock();
            for p in reg.all().filter(|p| p.on(mem)) {
                match p.state() {
                    PinState::Live if p.req.persistent => continue,
                    PinState::Live if unqueued.is_none() && !p.is_queued() => {
                        if !p.queue_revocation() {
                            unqueued = Some(p.clone());
                        }
                    }
                    _ => {}
                }
                pending = pending.saturating_add(1);
                if p.waits_on_consumer() {
                    stuck.count = stuck.count.saturating_add(1);
                    stuck.first.get_or_insert(StuckPin {
                        va: p.req.va,
                        len: p.req.len,
                        pid: p.alloc.tgid,
                    });
                }
            }
        }
        if let Some(pin) = unqueued {
            // Cannot happen (the queue exists while GPUs are bound); revoke here rather than
            // never.
            pin.revoke_created();
            continue;
        }
        if pending == 0 {
            return None;
        }
        if since.elapsed() >= REMOVAL_WAIT && stuck.count >= pending {
            return Some(stuck);
        }
        mem.wait_for_pin_end(seen);
    }
}

// SAFETY: Both functions go through the same field, `holder.removal`, so they are inverses; the
// field has the type `Work<Held<P2pPin>>`.
unsafe impl HasWork<Held<P2pPin>> for Held<P2pPin> {
    unsafe fn raw_get_work(ptr: *mut Self) -> *mut Work<Held<P2pPin>> {
        // SAFETY: The caller promises that `ptr` points to a valid `Held<P2pPin>`.
        unsafe { &raw mut (*ptr).holder.removal }
    }

    unsafe fn work_container_of(ptr: *mut Work<Held<P2pPin>>) -> *mut Self {
        // SAFETY: The caller promises that `ptr` points to the `holder.removal` field of a
        // `Held<P2pPin>`.
        unsafe { kernel::container_of!(ptr, Self, holder.removal) }
    }
}

/// The revocation of a pin by GPU removal ([`drain_gpu`]), run on nvrs's work queue.
impl WorkItem for Held<P2pPin> {
    type Pointer = Arc<Held<P2pPin>>;

    fn run(this: Arc<Held<P2pPin>>) {
        this.queued.store(false, Relaxed);
        // The registry still holds the pin unless it ended meanwhile (put, or revoked by a
        // release); its table, and so its key, is this pin's as long as `this` holds it.
        let Some(entry) = lookup(this.table.key()).filter(|e| Arc::ptr_eq(&e.pin, &this)) else {
            return;
        };
        // Not ours any more: the last reference lets the ended pin be kept for reuse.
        drop(this);
        entry.revoke_created();
    }
}

/// Revokes every live non-persistent pin on the memory of `mem` (the fault control
/// `revoke now`, [`crate::faults`]), in work items on nvrs's queue as GPU removal does, so that
/// no free callback runs in the writer's thread; returns how many were queued. Never allocates.
/// Test builds only.
#[cfg(nvrs_testing)]
pub(crate) fn revoke_on(mem: &FbMemory) -> u64 {
    let reg = PINS.lock();
    let mut n = 0u64;
    for p in reg.all().filter(|p| p.on(mem) && !p.req.persistent) {
        // Asked once per pin: a pin whose revocation is starting may still look live.
        if p.state() == PinState::Live
            && !p.fault_revoke.xchg(true, Relaxed)
            && p.queue_revocation()
        {
            n += 1;
        }
    }
    n
}

/// Revokes one live non-persistent pin on the memory of `mem`, the `pick`th modulo their
/// number (the fault control `revoke permille`), in a work item; returns how many were queued
/// (0 or 1). Never allocates.
pub(crate) fn revoke_one_on(mem: &FbMemory, pick: u64) -> u64 {
    let reg = PINS.lock();
    let live = |p: &&PinEntry| {
        p.on(mem)
            && !p.req.persistent
            && p.state() == PinState::Live
            && !p.fault_revoke.load(Relaxed)
    };
    let n = reg.all().filter(live).count();
    let Some(k) = u64::try_from(n)
        .ok()
        .filter(|n| *n != 0)
        .and_then(|n| usize::try_from(pick % n).ok())
    else {
        return 0;
    };
    let asked = match reg.all().filter(live).nth(k) {
        Some(p) if !p.fault_revoke.xchg(true, Relaxed) => p.queue_revocation(),
        _ => false,
    };
    u64::from(asked)
}

/// A pin whose free callback is running, as GPU removal names it when it gives up waiting.
pub(crate) struct StuckPin {
    /// The pinned VA, length and the pinning process.
    pub(crate) va: u64,
    pub(crate) len: u64,
    pub(crate) pid: kernel::task::Pid,
}

/// The pins GPU removal gave up on ([`drain_gpu`]): how many, and the first of them.
pub(crate) struct StuckPins {
    pub(crate) count: u32,
    pub(crate) first: Option<StuckPin>,
}

/// Pins on the memory of `mem`, the bytes they pin and their DMA mappings.
pub(crate) fn stats_on(mem: &FbMemory) -> (usize, u64, usize) {
    let reg = PINS.lock();
    let mut out = (0, 0, 0);
    for p in reg.all().filter(|p| p.on(mem)) {
        out.0 += 1;
        out.1 += p.req.len;
        out.2 += p.dma.lock().len();
    }
    out
}

/// Number of pins on the memory of `mem`.
pub(crate) fn count_on(mem: &FbMemory) -> usize {
    PINS.lock().all().filter(|p| p.on(mem)).count()
}

/// Renders `debugfs/nvrs/p2p`: the number of live pins, then one line per pin.
pub(crate) fn render(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    // `RETIRED` is a leaf lock: read before `PINS` is taken.
    let retired = crate::mem::fb::retired_bytes();
    let reg = PINS.lock();
    writeln!(f, "pins: {}", reg.all().count())?;
    writeln!(f, "revoked: {}", REVOKED.load(Relaxed))?;
    writeln!(f, "retired: {retired:#x}")?;
    writeln!(f, "tombs: {}", crate::p2p::quarantine::tomb_count())?;
    for p in reg.all() {
        let maps = p.dma.lock();
        let runs: usize = maps.iter().map(|m| m.run_count()).sum();
        writeln!(
            f,
            "gpu {} va {:#x} len {:#x} entries {} {} pid {} state {:?} mappings {} runs {}",
            p.alloc.mem().index,
            p.req.va,
            p.req.len,
            p.table.entries(),
            if p.req.persistent {
                "persistent"
            } else {
                "callback"
            },
            p.alloc.tgid,
            p.state(),
            maps.len(),
            runs
        )?;
    }
    Ok(())
}

impl P2pPin {
    /// A pin object with no table, as a [`Spare`] holds it.
    fn empty() -> impl PinInit<Self> {
        pin_init!(P2pPin {
            table: TableMemory::NONE,
            req: PinRequest::NONE,
            pieces: 0..0,
            state: Atomic::new(PinState::Dead as u32),
            revoker: Atomic::new(0),
            waiters: Atomic::new(0),
            done <- kernel::new_condvar!("P2pPin::done"),
            dma <- kernel::new_mutex!(KVec::new(), "P2pPin::dma"),
            removal <- kernel::new_work!("P2pPin::removal"),
            listed <- AtomicTracker::new(),
            fault_revoke: Atomic::new(false),
            queued: Atomic::new(false),
            bar1: None,
        })
    }

    /// Makes an unshared pin object a live pin of `table` for `req`, on the allocation's
    /// `pieces`, mapped at the BAR1 run `bar1` if any.
    fn fill(
        self: Pin<&mut Self>,
        table: TableMemory,
        req: &PinRequest,
        pieces: Range<usize>,
        bar1: Option<(u64, usize)>,
    ) {
        let this = self.project();
        *this.table = table;
        *this.req = *req;
        *this.pieces = pieces;
        *this.bar1 = bar1;
        this.fault_revoke.store(false, Relaxed);
        this.queued.store(false, Relaxed);
        this.state.store(PinState::Live as u32, Relaxed);
    }

    /// Moves the pin out of `Live` into `to`; false if someone else got there first.
    fn claim(&self, to: PinState) -> bool {
        self.state
            .cmpxchg(PinState::Live as u32, to as u32, Full)
            .is_ok()
    }

    /// Takes the pin's DMA mappings, to be unmapped (dropped) with the lock released; `None` if
    /// there are none (an empty vector is not even freed then).
    fn take_mappings(&self) -> Option<KVec<DmaMapping>> {
        let mut maps = self.dma.lock();
        (!maps.is_empty()).then(|| core::mem::take(&mut *maps))
    }

    /// Unmaps every DMA mapping of the pin (its GPU is going away).
    pub(crate) fn unmap_all(&self) {
        drop(self.take_mappings());
    }

    /// Waits until the pin is dead (put or revoked by someone else).
    fn wait_dead(&self) {
        // Full: either the thread ending the pin sees this waiter, or this waiter sees the pin
        // dead (the ending thread sets `Dead` with a full barrier, then reads `waiters`).
        self.waiters.fetch_add(1, Full);
        let mut guard = self.dma.lock();
        while self.state() != PinState::Dead {
            self.done.wait(&mut guard);
        }
        drop(guard);
        self.waiters.fetch_sub(1, Relaxed);
    }

    /// Marks the pin dead and wakes the threads waiting for that.
    fn die(&self) {
        self.state.xchg(PinState::Dead as u32, Full);
        if self.waiters.load(Relaxed) != 0 {
            // A waiter checks the state and goes to sleep under `dma`: once the lock was free
            // after the state changed, every waiter either sleeps or has seen it.
            drop(self.dma.lock());
            self.done.notify_all();
        }
    }

    /// Whether the calling thread is running this pin's free callback.
    pub(crate) fn is_revoking_thread(&self) -> bool {
        self.revoker.load(Relaxed) == kernel::task::Task::current_raw() as usize
    }

    /// Whether the pin's free callback is running (on any thread).
    pub(crate) fn in_callback(&self) -> bool {
        self.state() == PinState::Revoking && self.revoker.load(Relaxed) != 0
    }

    /// Whether its revocation is queued and not yet started.
    fn is_queued(&self) -> bool {
        self.queued.load(Acquire)
    }

    /// Whether the pin's end waits on a consumer: its free callback is running, or its
    /// revocation is queued behind work items that are (the revocation queue runs a bounded
    /// number at once). GPU removal gives up on such pins after its bound.
    fn waits_on_consumer(&self) -> bool {
        self.in_callback() || (self.state() == PinState::Live && self.is_queued())
    }

    /// Current state.
    pub(crate) fn state(&self) -> PinState {
        PinState::from_u32(self.state.load(Acquire))
    }
}

impl PinEntry {
    /// Queues the pin's revocation on nvrs's revocation queue ([`P2pPin::removal`]); true if it
    /// is queued now or was already. Never allocates or sleeps. False only without a queue
    /// (before module init), when the caller revokes it itself.
    fn queue_revocation(&self) -> bool {
        let Some(q) = crate::helpers::revoke_wq() else {
            return false;
        };
        // Marked first: the worker clears the mark as it starts, so a mark set after the
        // enqueue could outlive the work. A pin already queued keeps its mark, and the
        // reference comes back (never the last: the caller holds one).
        self.queued.store(true, Release);
        drop(q.enqueue(self.pin.clone()));
        true
    }

    /// Pins `req.len` bytes at `req.offset` of `alloc` (both multiples of 64 KiB, inside it):
    /// counts a P2P pin on every chunk, builds the page table, registers the pin, and hands the
    /// table to `publish` — all under the allocation's lock, so that no revocation can run, and
    /// no free callback fire, before the consumer holds the table (the race of NVIDIA's PR
    /// #557). Nothing can fail after the pin becomes visible.
    pub(crate) fn create(
        alloc: Arc<Allocation>,
        req: &PinRequest,
        sw: &mut Stopwatch,
        publish: impl FnOnce(*mut abi::PageTable),
    ) -> Result {
        let entries = u32::try_from(req.len / P2P_PAGE_SIZE).map_err(|_| EINVAL)?;
        let mem = alloc.mem();
        // Through BAR1 the pin gets a run of its own, reserved (and the list of its pages
        // allocated) before any lock is taken: its table holds BAR1 addresses, mapped under the
        // allocation's lock below. On a flat aperture it holds aperture addresses.
        let window = mem.reach.reserve(usize::try_from(entries)?)?;
        let mut fb_pages = KVVec::new();
        if window.is_some() {
            fb_pages.reserve(usize::try_from(entries)?, GFP_KERNEL)?;
        }
        let flat = mem.reach.flat().ok();
        let (entry, node, mut st) = loop {
            // Acquire: the pieces read below are at least as new as this count.
            let moves = alloc.moves.load(Acquire);
            // Everything a pin needs, allocated (or reused) before any lock below is taken.
            let (block, spare) = quarantine::reuse_pin();
            // Through BAR1 the table is the window, one run; on a flat aperture, the pieces
            // (one page, the most common pin, is one lookup).
            let table = match (&window, flat) {
                (Some(w), _) => TableMemory::new(
                    block,
                    entries,
                    &mem.uuid,
                    [(w.addr(0), u64::from(entries))].into_iter(),
                ),
                (None, Some(base)) if entries == 1 => TableMemory::new(
                    block,
                    entries,
                    &mem.uuid,
                    alloc
                        .fb_offset_at(req.offset)
                        .map(|fb| (base + fb, 1))
                        .into_iter(),
                ),
                (None, Some(base)) => TableMemory::new(
                    block,
                    entries,
                    &mem.uuid,
                    alloc
                        .fb_runs(req.offset, req.len)
                        .map(|(fb, n)| (base + fb, n)),
                ),
                (None, None) => Err(EINVAL),
            }?;
            let (mut pin, node) = match spare {
                Some(s) => (s.pin, s.node),
                None => (
                    UniqueArc::pin_init(Held::new(P2pPin::empty()), GFP_KERNEL)?,
                    Node::new(GFP_KERNEL)?,
                ),
            };
            pin.as_mut().holder_mut().fill(
                table,
                req,
                alloc.piece_range(req.offset, req.len),
                window.as_ref().map(|w| w.run()),
            );
            let entry = PinEntry {
                pin: pin.into(),
                alloc: alloc.clone(),
            };
            sw.lap(Phase::Table);
            let st = alloc.state.lock();
            // Compaction moves pieces only under this lock and only while nothing is pinned: if
            // none moved while the table was built, its addresses hold until the pin is counted.
            if alloc.moves.load(Acquire) == moves {
                break (entry, node, st);
            }
            drop(st);
            entry.recycle(Some(node));
        };
        // Declared again after `st`, so that on every failure below the window is unmapped
        // before the allocation's lock is released (locals drop in reverse order): no BAR1
        // mapping of its pages outlives the lock that keeps them the allocation's.
        let window = window;
        let key = entry.table.key();
        // A concurrent release either finds `released` set first and refuses us, or waits for
        // this lock and then sees (and revokes) a pin its consumer already holds.
        if st.released || alloc.mem().is_gone() {
            return Err(EINVAL);
        }
        // BAR1 maps the pages from here (the allocation's lock keeps them where they are) until
        // the pin ends ([`Self::finish`]), or the window is dropped on failure below.
        if let Some(w) = &window {
            alloc.list_fb_pages(req.offset, usize::try_from(entries)?, &mut fb_pages)?;
            w.fill(&fb_pages)?;
        }
        // The peer may write the memory from now on: scrub it when it goes back.
        st.touched = true;
        // The allocation lists the pin among its holders; made here so that nothing fails once
        // the pin is registered.
        let Ok(listed) = ListArc::try_from_arc(entry.pin.clone()) else {
            // Cannot happen: an ended pin's list reference went when it ended.
            return Err(EINVAL);
        };
        // A persistent pin holds nvrs itself; taken first so that nothing fails once published.
        if req.persistent && !crate::helpers::module_get() {
            // nvrs is being unloaded.
            return Err(ENODEV);
        }
        let undo_module = |()| {
            if req.persistent {
                crate::helpers::module_put();
            }
        };
        if let Err(e) = entry.count_chunks(true) {
            undo_module(());
            return Err(e);
        }
        sw.lap(Phase::PmmPin);
        let mut reg = PINS.lock();
        let refused = match reg.pins.as_mut() {
            // A live table's address is unique. The registry takes `entry`; the caller's
            // reference to the allocation keeps `st` valid.
            Some(tree) if tree.get(&key).is_none() => {
                tree.insert(node.into_node(key, entry));
                None
            }
            Some(_) => Some((EEXIST, entry)),
            None => Some((ENODEV, entry)),
        };
        drop(reg);
        if let Some((e, entry)) = refused {
            let _ = entry.count_chunks(false);
            undo_module(());
            return Err(e);
        }
        st.add_holder(listed);
        // The pin releases its run when it ends.
        if let Some(w) = window {
            w.keep();
        }
        crate::testhook::delay(crate::testhook::Point::PinPublish);
        publish(key as *mut abi::PageTable);
        sw.lap(Phase::Publish);
        Ok(())
    }

    /// Adds (or drops) one P2P pin on every chunk the pin covers.
    fn count_chunks(&self, add: bool) -> Result {
        self.alloc.pin_pieces(self.pieces.clone(), add)
    }

    /// Tears down what the pin holds: DMA mappings, the registry entry, the chunk pins, the
    /// allocation's record of it. Then the pin is dead. Returns the registry node.
    fn finish(&self, sw: &mut Stopwatch) -> Option<Node> {
        drop(self.take_mappings());
        // No peer reaches the pages through BAR1 once this returns (before the memory can go
        // back, below). If BAR1 may still reach them, the chunks keep this pin's count and never
        // go back to the memory manager.
        let unmapped = self
            .bar1
            .is_none_or(|(va, pages)| self.alloc.mem().reach.release(va, pages));
        let node = PINS
            .lock()
            .pins
            .as_mut()
            .and_then(|t| t.remove_node(&self.table.key()))
            // Drops the registry's references to the pin and the allocation: never the last
            // ones (the caller holds others), so nothing is freed under the lock.
            .map(|n| n.into_reservation());
        sw.lap(Phase::Teardown);
        if unmapped {
            if let Err(e) = self.count_chunks(false) {
                pr_err!("dropping P2P pins: {e:?}\n");
            }
        } else {
            self.alloc.keep_memory();
        }
        sw.lap(Phase::PmmUnpin);
        // Forget the pin before waking waiters, so a revocation woken here does not find it
        // again; drop the module reference last.
        let held: &Held<dyn Holder> = &*self.pin;
        self.alloc.pin_gone(held);
        self.die();
        self.alloc.mem().pin_ended();
        if self.req.persistent {
            crate::helpers::module_put();
        }
        node
    }

    /// Drops this reference to an ended pin. If it was the last one, the pin object and `node`
    /// are kept for the next pin and the table goes to the quarantine; otherwise the other
    /// holder's drop frees them.
    fn recycle(self, node: Option<Node>) {
        let PinEntry { pin, alloc } = self;
        drop(alloc);
        let (Some(mut pin), Some(node)) = (Arc::into_unique_or_drop(pin), node) else {
            return;
        };
        let (block, rest) = pin.as_mut().holder_mut().project().table.take_block();
        quarantine::park_pin(block, Spare { pin, node });
        drop(rest);
    }

    /// Ends the pin at its consumer's request (`put_pages`). If a revocation is in flight, waits
    /// for it to finish instead.
    pub(crate) fn put(self, sw: &mut Stopwatch) {
        if self.claim(PinState::Putting) {
            let node = self.finish(sw);
            self.recycle(node);
        } else {
            self.wait_dead();
        }
    }

    /// Whether the pin is on the memory of `mem`.
    fn on(&self, mem: &FbMemory) -> bool {
        core::ptr::eq(&**self.alloc.mem(), mem)
    }

    /// [`Self::revoke`] of a pin found in the registry without its allocation's lock held. A
    /// pin being created holds that lock from before it enters the registry until its table is
    /// handed out: taking the lock once waits for that, so no free callback fires before the
    /// consumer holds the table (NVIDIA's PR #557 race).
    fn revoke_created(self) {
        drop(self.alloc.state.lock());
        self.revoke();
    }

    /// Revokes the pin: calls the consumer's free callback (with no nvrs lock held), then tears
    /// everything down. Persistent pins are never revoked by a free.
    pub(crate) fn revoke(self) {
        if !self.claim(PinState::Revoking) {
            // Being put concurrently: wait until that is over, so the memory is unpinned when
            // the caller goes on.
            self.wait_dead();
            return;
        }
        crate::testhook::delay(crate::testhook::Point::RevokeClaimed);
        // The consumer keeps the table after its callback and puts it later: its address stays
        // reserved until then (allocated here, with no lock held).
        if let Some(node) = quarantine::tomb_node() {
            quarantine::bury(node, self.table.key(), self.req.va);
        }
        self.revoker
            .store(kernel::task::Task::current_raw() as usize, Relaxed);
        if let Some(cb) = self.req.callback {
            // The fault control `callback delay` ([`crate::faults`]): called late, counted as
            // in the callback meanwhile.
            let (delay_us, _) = self.alloc.mem().faults.callback_faults();
            if delay_us != 0 {
                kernel::time::delay::fsleep(kernel::time::Delta::from_micros(delay_us.into()));
            }
            REVOKED.fetch_add(1, Relaxed);
            // SAFETY: The consumer registered `cb` with `data` in `nvidia_p2p_get_pages` and
            // promised they stay valid until the pin ends; it has not ended (we own the
            // revocation). No nvrs lock is held here.
            unsafe { cb(self.req.data) };
        }
        self.revoker.store(0, Relaxed);
        let node = self.finish(&mut Stopwatch::off());
        self.recycle(node);
    }
}
