// SPDX-License-Identifier: GPL-2.0

//! The kernel's P2PDMA distance between a GPU and a peer, remembered until the PCI hierarchy
//! changes.
//!
//! `pci_p2pdma_distance()` looks the client up on the bus and walks both functions' bridges,
//! reading ACS capabilities from configuration space: microseconds per call, paid by every
//! `nvidia_p2p_dma_map_pages()` and dma-buf attach. The distance depends only on where the two
//! functions sit in the hierarchy, so it is kept for the last [`SLOTS`](cache::SLOTS) pairs,
//! keyed by both functions' routing ids (as the kernel keeps its own verdicts per provider and
//! client once a provider registers P2PDMA memory).
//!
//! A routing id names a place, not a function: after a hot-unplug, or a `remove` and `rescan`
//! that re-enumerates a switch, it may name another function or none, behind other bridges. So
//! a notifier on the PCI bus (`rust/helpers.c`, registered by [`watch_bus`] at module init)
//! empties the table whenever a PCI function is added or removed, and an answer the kernel gave
//! across such a change is not stored (the generation rule of [`cache`]).

use core::fmt;

use kernel::prelude::*;

use crate::helpers;

use super::{
    cache::{
        DistanceCache,
        Entry,
        Lookup,
        SLOTS, //
    },
    link::Bdf,
};

kernel::sync::global_lock! {
    // SAFETY: `init` is called from the module initialiser, before any P2P call.
    pub(crate) unsafe(uninit) static DISTANCES: SpinLock<DistanceCache> = DistanceCache::new();
}

/// Sets up the table. Called once, from module init, before [`watch_bus`].
pub(crate) fn init() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { DISTANCES.init() };
}

/// Starts emptying the table on PCI hotplug events; module init, after [`init`].
pub(crate) fn watch_bus() -> Result {
    helpers::pci_bus_watch()
}

/// Stops the hotplug notifier; module exit, after the PCI driver is unregistered. When it
/// returns, no notifier call is running or will run.
pub(crate) fn unwatch_bus() {
    helpers::pci_bus_unwatch()
}

/// Called by the PCI bus notifier (`rust/helpers.c`) when a PCI function was added, is being
/// removed, or was removed: every remembered distance may be stale now.
///
/// # Safety
///
/// Called only by the notifier `nvrs_pci_bus_watch()` registered, in process context, between
/// [`watch_bus`] and [`unwatch_bus`] (so after [`init`]); the bus notifier chain's rwsem is held
/// for reading, and no nvrs lock.
#[no_mangle]
unsafe extern "C" fn nvrs_topology_changed_rs() {
    DISTANCES.lock().invalidate();
}
crate::helpers::same_signature!(nvrs_topology_changed_rs);

/// The P2PDMA distance from the GPU `provider` (with routing id `provider_id`) to the function
/// with routing id `client`: remembered, or asked of the kernel (with no lock held) and
/// remembered unless the hierarchy changed meanwhile.
pub(crate) fn distance<Ctx: kernel::device::DeviceContext>(
    provider: &kernel::pci::Device<Ctx>,
    provider_id: u64,
    client: u64,
) -> i32 {
    let generation = match DISTANCES.lock().lookup(provider_id, client) {
        Lookup::Hit(d) => return d,
        Lookup::Miss(generation) => generation,
    };
    let d = helpers::p2pdma_distance(provider, client);
    // A client that is not there (yet) is not remembered.
    if d != ENODEV.to_errno() {
        DISTANCES.lock().store(
            generation,
            Entry {
                provider: provider_id,
                client,
                distance: d,
            },
        );
    }
    d
}

/// Renders the table's counters and pairs for `debugfs/nvrs/topology`.
pub(crate) fn render(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    // Copied out under the lock (no allocation), printed with it released.
    let (stats, entries) = {
        let t = DISTANCES.lock();
        let mut entries = [None; SLOTS];
        for (dst, src) in entries.iter_mut().zip(t.entries()) {
            *dst = Some(*src);
        }
        (t.stats(), entries)
    };
    writeln!(
        f,
        "distance cache: hits {} misses {} invalidations {} dropped {} generation {} entries {}",
        stats.hits,
        stats.misses,
        stats.invalidations,
        stats.dropped,
        stats.generation,
        stats.entries
    )?;
    for e in entries.iter().flatten() {
        writeln!(
            f,
            "  remembered: provider {} client {} distance {}",
            Bdf(e.provider),
            Bdf(e.client),
            e.distance
        )?;
    }
    Ok(())
}
