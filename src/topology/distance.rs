// SPDX-License-Identifier: GPL-2.0

//! The kernel's P2PDMA distance between a GPU and a peer, remembered.
//!
//! `pci_p2pdma_distance()` looks the client up on the bus and walks both functions' bridges,
//! reading ACS capabilities from configuration space: microseconds per call, paid by every
//! `nvidia_p2p_dma_map_pages()` and dma-buf attach. The distance depends only on where the two
//! functions sit in the hierarchy, so it is kept for the last [`SLOTS`] pairs, keyed by both
//! functions' routing ids (as the kernel keeps its own verdicts per provider and client once a
//! provider registers P2PDMA memory). A function that disappears and comes back at the same
//! address sits behind the same bridges.

use kernel::prelude::*;

use crate::helpers;

/// Pairs remembered.
const SLOTS: usize = 16;

/// One remembered pair.
#[derive(Clone, Copy)]
struct Entry {
    /// The GPU's routing id.
    provider: u64,
    /// The peer's routing id.
    client: u64,
    /// The distance (negative: refused).
    distance: i32,
}

/// The remembered pairs, replaced oldest first.
pub(crate) struct Distances {
    entries: [Option<Entry>; SLOTS],
    next: usize,
}

kernel::sync::global_lock! {
    // SAFETY: `init` is called from the module initialiser, before any P2P call.
    pub(crate) unsafe(uninit) static DISTANCES: SpinLock<Distances> = Distances {
        entries: [None; SLOTS],
        next: 0,
    };
}

/// Sets up the table. Called once, from module init.
pub(crate) fn init() {
    // SAFETY: Module init runs once, so `init` is called exactly once, before any other use.
    unsafe { DISTANCES.init() };
}

/// The P2PDMA distance from the GPU `provider` (with routing id `provider_id`) to the function
/// with routing id `client`: remembered, or asked of the kernel (with no lock held) and
/// remembered.
pub(crate) fn distance<Ctx: kernel::device::DeviceContext>(
    provider: &kernel::pci::Device<Ctx>,
    provider_id: u64,
    client: u64,
) -> i32 {
    let known = DISTANCES
        .lock()
        .entries
        .iter()
        .flatten()
        .find(|e| e.provider == provider_id && e.client == client)
        .map(|e| e.distance);
    if let Some(d) = known {
        return d;
    }
    let d = helpers::p2pdma_distance(provider, client);
    // A client that is not there (yet) is not remembered.
    if d != ENODEV.to_errno() {
        let mut t = DISTANCES.lock();
        let i = t.next;
        if let Some(slot) = t.entries.get_mut(i) {
            *slot = Some(Entry {
                provider: provider_id,
                client,
                distance: d,
            });
        }
        t.next = (i + 1) % SLOTS;
    }
    d
}
