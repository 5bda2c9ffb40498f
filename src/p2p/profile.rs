// SPDX-License-Identifier: GPL-2.0

//! Where the time of `nvidia_p2p_get_pages()` and `nvidia_p2p_put_pages()` goes.
//!
//! `make bench` compares a pin with `pin_user_pages()`; this says which part of a pin to make
//! cheaper next. Off by default: then each phase boundary costs one relaxed atomic load and
//! nothing is recorded. Writing `1` to `debugfs/nvrs/p2p_profile` clears the totals and starts
//! recording, `0` stops; reading it gives the mean of every phase over the calls recorded.
//! Phases that a failed call did not reach are not counted.

use core::{
    fmt,
    sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
};

use kernel::{
    prelude::*,
    time::{Instant, Monotonic}, //
};

/// A phase of a pin or an unpin.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Phase {
    /// `get_pages`: finding the allocation behind the VA.
    Lookup,
    /// `get_pages`: the page table, the pin object and the registry node (reused from the
    /// quarantine ring, or allocated).
    Table,
    /// `get_pages`: the memory manager's pins on the chunks.
    PmmPin,
    /// `get_pages`: registering the pin and handing the table out.
    Publish,
    /// `put_pages`: finding the pin behind the table.
    PutLookup,
    /// `put_pages`: DMA mappings, the registry entry, the pin's state and waiters.
    Teardown,
    /// `put_pages`: dropping the memory manager's pins.
    PmmUnpin,
    /// `put_pages`: freeing the pin object and quarantining the table.
    Free,
}

/// Number of phases.
const PHASES: usize = 8;

/// Names, in [`Phase`] order.
const NAMES: [&str; PHASES] = [
    "get_lookup",
    "get_table",
    "get_pmm_pin",
    "get_publish",
    "put_lookup",
    "put_teardown",
    "put_pmm_unpin",
    "put_free",
];

static ENABLED: AtomicBool = AtomicBool::new(false);
static NS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];
static CALLS: [AtomicU64; PHASES] = [const { AtomicU64::new(0) }; PHASES];

/// Times consecutive phases of one call; inert while recording is off.
pub(crate) struct Stopwatch {
    /// When the current phase started; `None` when not recording.
    last: Option<Instant<Monotonic>>,
}

impl Stopwatch {
    /// Starts timing a call's first phase.
    pub(crate) fn start() -> Self {
        Self {
            last: ENABLED.load(Relaxed).then(Instant::now),
        }
    }

    /// A stopwatch that records nothing (revocations, which are not measured).
    pub(crate) fn off() -> Self {
        Self { last: None }
    }

    /// Ends `phase`, which started at the previous boundary, and starts the next.
    pub(crate) fn lap(&mut self, phase: Phase) {
        let Some(last) = self.last else {
            return;
        };
        let t = Instant::now();
        let i = phase as usize;
        if let (Some(ns), Some(calls)) = (NS.get(i), CALLS.get(i)) {
            ns.fetch_add(u64::try_from((t - last).as_nanos()).unwrap_or(0), Relaxed);
            calls.fetch_add(1, Relaxed);
        }
        self.last = Some(t);
    }
}

/// Reading `p2p_profile`: `<phase> calls <n> mean_ns <ns>`, one line per phase.
pub(crate) fn render(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "enabled {}", u8::from(ENABLED.load(Relaxed)))?;
    for ((name, ns), calls) in NAMES.iter().zip(&NS).zip(&CALLS) {
        let n = calls.load(Relaxed);
        let mean = ns.load(Relaxed).checked_div(n).unwrap_or(0);
        writeln!(f, "{name} calls {n} mean_ns {mean}")?;
    }
    Ok(())
}

/// Writing `p2p_profile`: `1` clears the totals and records, `0` stops; `-EINVAL` otherwise.
pub(crate) fn write(reader: &mut kernel::uaccess::UserSliceReader) -> Result {
    let mut buf = [0u8; 4];
    match crate::text::written_text(reader, &mut buf)? {
        "1" => {
            for (ns, calls) in NS.iter().zip(&CALLS) {
                ns.store(0, Relaxed);
                calls.store(0, Relaxed);
            }
            ENABLED.store(true, Relaxed);
        }
        "0" => ENABLED.store(false, Relaxed),
        _ => return Err(EINVAL),
    }
    Ok(())
}
