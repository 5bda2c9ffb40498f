// SPDX-License-Identifier: GPL-2.0

//! The lock order of nvrs, in one place.
//!
//! Every lock is named (`new_mutex!(.., "Owner::field")`, or `global_lock!` statics, which
//! lockdep names after the static), so a lockdep report names it. A lock may be taken while
//! holding only locks *above* it in this list:
//!
//! 1. `FbMemory::compacting`: one compaction per GPU at a time ([`crate::mem::compact`]);
//!    taken with no other nvrs lock held (an allocation that compacts holds none).
//! 2. `mmap_lock` of a process (the kernel's: held around `mmap` and page faults), and the
//!    reservation lock (`dma_resv`) of an nvrs dma-buf (the dma-buf core holds it around
//!    `map_dma_buf`, `unmap_dma_buf`, `pin` and `unpin`; revocation takes it with no nvrs lock
//!    held). Neither is taken under the other by nvrs.
//! 3. [`EXPORTS`](crate::dmabuf::EXPORTS): the registry of dma-buf exports.
//! 4. `Export::state`: an export's revocation flag, importer mappings and hold on its memory.
//!    Faults on a dma-buf's CPU mapping hold it while inserting pages; revocation waits on
//!    `Export::unmapped` with it released, at most
//!    [`REVOKE_WAIT`](crate::dmabuf::REVOKE_WAIT). Nothing below is taken under it.
//! 5. [`VASPACES`](crate::vaspace::VASPACES): the registry of VA spaces.
//! 6. `VaSpace::inner`: one process's allocations, its open count and its address-space watch.
//! 7. `Allocation::state`: released flag, pins and the list of them, mapped inodes. Held
//!    while the fault handler inserts pages, while release removes user mappings (which takes
//!    the kernel's `i_mmap_rwsem` and page-table locks below it), and while compaction moves
//!    one of the allocation's pieces (removing its mappings, copying and scrubbing with it
//!    held).
//! 8. [`PINS`](crate::p2p::pin::PINS): the registry of live pins.
//! 9. `P2pPin::dma`: a pin's DMA mappings (`dma_map_resource` / `dma_unmap_resource` run
//!    under it); threads waiting for the pin to die sleep on `P2pPin::done` with it.
//! 10. `FbMemory::pmm`: a GPU's memory manager; nothing is taken under it.
//!
//! (A pin's life-cycle state, `P2pPin::state`, is an atomic, not a lock.)
//!
//! Leaf locks, taken with nothing of the above held or only briefly under one of them, and
//! taking nothing themselves: [`VA`](crate::mem::va::VA) (the GPU VA allocator; taken alone, or
//! under `mmap_lock` by a fault that drops the last reference on a just-released allocation),
//! `CpuHandle::alloc` (what a CPU mapping refers to; taken by faults under `mmap_lock` and by
//! release with no lock held), [`GPUS`](crate::gpu::GPUS) (the GPU registry),
//! [`RETIRED`](crate::mem::fb::RETIRED) (retired memory managers; their ranges are fixed at
//! creation and read without `FbMemory::pmm`), the quarantine ring
//! ([`RING`](crate::p2p::quarantine::RING)) and its tombstones
//! ([`TOMBS`](crate::p2p::quarantine::TOMBS); never held with `RING`), the remembered P2PDMA
//! distances
//! ([`DISTANCES`](crate::topology::distance::DISTANCES), a spinlock; the kernel is asked with it
//! released; the PCI bus notifier empties it in process context, with no nvrs lock held and
//! the kernel's locks of the hotplug above it: the bus notifier rwsem, the PCI rescan/remove lock)
//! `Bar1Space::state` (the GPU model's BAR1 slots and PRAMIN window, [`crate::bar1`]; taken
//! alone, under `Allocation::state` by a pin, a CPU mapping or a dma-buf export mapping pages
//! and by compaction pointing a moved piece's entries at its copy, under `Bar1Space::scrub` by
//! a scrub, by a pin's end with nothing held, and by a dma-buf export's end, which may run
//! under the dma-buf's reservation lock (its last importer unmapping after a revocation) and
//! then also scrubs (`ModelCe::launch` or `Bar1Space::scrub` under that lock, no nvrs lock); the register writes under it run in the RCU
//! read-side section that keeps the device-managed BAR0 mapped, and do not sleep),
//! `Bar1Space::scrub` (BAR1's scrub slot, held while a scrub writes through it; taken with
//! nothing held, `Bar1Space::state` under it),
//! `ModelCe::launch` (the GPU model's copy engine, one launch at a time, [`crate::ce`]; taken
//! with nothing held by a scrub, under `Allocation::state` (and `FbMemory::compacting`) by
//! compaction's copy and scrub of a piece, and held while the launch's semaphore is polled,
//! which sleeps; its BAR0 writes run in the RCU read-side section of the device-managed BAR0),
//! `FbMemory::faults` (a GPU's fault controls, [`crate::faults`]; taken alone, or under a
//! dma-buf's reservation lock by attach and map), `nvrs_ticker::lock` (C, `rust/faults.c`: the
//! period of `revoke every`; taken alone, by the debugfs write, the driver's unbind and the
//! timer's work item, which calls into nvrs with it released), `FbMemory::allocs` (a GPU's list of its
//! allocations; taken alone, or under
//! `FbMemory::compacting` by compaction's walk; dropping a list entry under it never drops an
//! allocation's last reference) and `FbMemory::busy` (operations in flight on a
//! GPU's memory; GPU removal sleeps on `FbMemory::idle` with it released).
//!
//! Rules that keep the order honest:
//!
//! * Free callbacks of consumers run with **no** nvrs lock held: they may sleep and take their
//!   own locks, and those locks may be held around calls into nvrs.
//! * Nothing heavy runs in the MMU notifier's `release` (inside its SRCU read section): the
//!   owner's exit only marks its VA space dead and queues `VaSpace::exit_work` on nvrs's exit
//!   queue, which releases the allocations (free callbacks, scrubbing). GPU removal never
//!   flushes the queue (those releases are counted in `FbMemory::busy`, see below); module exit
//!   drains it before freeing the registries.
//! * No free callback runs in the thread that unbinds a GPU: removal takes the allocations out
//!   and zaps their user mappings itself, and revokes the pins left in work items on a queue of
//!   their own, the revocation queue (`P2pPin::removal`, one per pin, so a callback that blocks
//!   holds up only its own pin, and blocked callbacks never hold up a process's exit work),
//!   queued under `PINS` (queueing neither sleeps nor allocates). A queue runs a bounded number
//!   of items at once, so a revocation queued behind blocked callbacks waits on the consumer as
//!   much as they do (`P2pPin::queued`). Removal waits for the pins to end by sleeping on
//!   `FbMemory::idle` with `FbMemory::busy` held only to check `FbMemory::pin_ends`, which
//!   every pin bumps once it ended while its GPU was going away.
//! * Nothing is allocated under the locks of the pin path (`nvidia_p2p_get_pages()` takes
//!   `VASPACES`, `VaSpace::inner`, `Allocation::state`, `PINS`, `FbMemory::pmm` — the manager's
//!   own metadata aside): registry nodes and pin objects are reserved before locking
//!   (allocated, or a spare an ended pin left in the quarantine ring), page tables come from
//!   the quarantine ring or are allocated with no lock held, an allocation lists its pins
//!   intrusively (their links are in the pin object, `mem::holder::Held`), and `mmap` grows
//!   its list of mapped inodes with the lock dropped; so a pin either fails before it changes
//!   anything or succeeds. Zeroing (which may cover GiBs) runs with no lock held.
//! * Three paths do allocate (`GFP_KERNEL`) under `Allocation::state`, because what they
//!   allocate must be made while the allocation cannot change: the fault handler (the page
//!   tables `vm_insert_page` / `vmf_insert_pfn_prot` may need), and compaction's move of a
//!   piece (the copy's 64 KiB bounce buffer and `ioremap` of both ranges, `rust/helpers.c`
//!   `nvrs_copy_mmio`, and the scrub's `ioremap_wc`). That is safe because memory reclaim
//!   never calls into nvrs, so it cannot wait for a lock its allocator holds: nvrs registers
//!   no shrinker; its only MMU notifier op is `release`, which runs at `exit_mmap` (not from
//!   reclaim or the OOM reaper, which call `invalidate_range_start`) and only queues work; its
//!   VMAs are `VM_PFNMAP` / `VM_MIXEDMAP` over device memory whose pages (frames, or ZONE_DEVICE
//!   P2PDMA pages) are never on an LRU, so reclaim neither writes back nor unmaps them; and a
//!   dma-buf importer's `move_notify` is not called by reclaim. An allocation that fails
//!   there fails the fault (`SIGBUS` / `VM_FAULT_OOM`) or the move (the piece stays where it
//!   was), never leaving state half-changed.
//! * Teardown walks (GPU removal, VA-space teardown, pin draining) take one object out under the
//!   locks, drop them, act on it, and start over: they never allocate and never call out while
//!   holding a lock.
//! * `FbMemory::gone` is set under `FbMemory::busy`, and GPU removal then waits until no
//!   allocation, release or scrubbing is in flight (`FbMemory::enter`) before it walks the
//!   allocations, pins and mappings. Pinning, mapping and faulting check `gone` under the lock
//!   the walk takes for their collection (`Allocation::state`, `P2pPin::dma`), so nothing is
//!   added behind the walk; an allocation being created joins its GPU's list only if the walk
//!   has not passed (`FbMemory::walked`, set and read under `FbMemory::allocs`), and fails with
//!   `-ENODEV` otherwise. Every release counts itself in `FbMemory::busy` as it starts
//!   (`FbMemory::begin_release`, never refused), however it found its allocation (its owner's
//!   FREE or VA-space teardown, or the walk), and only while it runs: a thread releasing many
//!   allocations one after the other counts the one it is at, the others are still in the
//!   GPU's list for the walk. Removal waits for those counts again after the walk, so a release
//!   the walk cannot see any more still finishes before the aperture goes. The one exception:
//!   a release that is revoking a pin, waiting for a consumer's free callback
//!   (`InFlight::revoking`, counted in `FbMemory::busy`), is waited for at most
//!   [`REMOVAL_WAIT`](crate::mem::fb::REMOVAL_WAIT), and only while every operation still in
//!   flight is such a release; a creation, a scrub, or a P2PDMA release waiting for the block
//!   layer to let go of its pages is always waited for, and callbacks that run for no
//!   operation of the GPU's (a fault control's revocation) do not count. What removal gives up
//!   on touches the aperture no more afterwards, and its memory stays retired.
