// SPDX-License-Identifier: GPL-2.0

//! Delay points for the removal-race tests.
//!
//! Some races of GPU removal are a few instructions wide: a pin between entering the registry
//! and handing its table to the consumer, a FREE between taking its allocation out of the VA
//! space and releasing it. `tests/scenarios/removal.sh` widens them: with the module parameters
//! `test_delay_points` (a mask of [`Point`]s) and `test_delay_ms`, the thread reaching one of
//! the chosen points logs one line (`test delay: MS ms at NAME`) and sleeps, so the scenario can
//! unbind the GPU inside the window. Both parameters are 0 by default, and each point then costs
//! one read of a parameter.
//!
//! Test builds only (`--cfg nvrs_testing`): in a production build the parameters do not exist
//! and [`delay`] is empty.

#[cfg(nvrs_testing)]
use kernel::{
    prelude::*,
    time::{
        delay::fsleep,
        Delta, //
    },
};

/// The longest delay honoured, so that a typo cannot hang a test VM for good.
#[cfg(nvrs_testing)]
const MAX_DELAY_MS: u32 = 60_000;

/// A point where a test may make nvrs sleep.
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum Point {
    /// Pinning, after the pin entered the registry ([`crate::p2p::pin::PINS`]) and before its
    /// table is handed to the consumer (with the allocation's lock held).
    PinPublish = 1 << 0,
    /// `NVRS_IOCTL_FREE`, after the allocation was taken out of its VA space and before it is
    /// released.
    FreeRelease = 1 << 1,
    /// The release of an exited owner's allocation in the exit work, after it was taken out
    /// of its VA space and before it is released.
    ExitRelease = 1 << 2,
    /// GPU removal, after its first wait for the operations in flight and before it walks the
    /// GPU's allocations.
    RemovalWalk = 1 << 3,
    /// The release of an allocation made of struct pages, after its CPU mappings went and
    /// before it lets go of its pages ([`crate::mem::p2pdma`]).
    PageDrop = 1 << 4,
    /// An allocation made of struct pages being created, after its memory was scrubbed and
    /// before it takes its struct pages and becomes reachable.
    CreateScrub = 1 << 5,
    /// The release of an allocation made of struct pages, after it put its references on the
    /// pages and before it waits for them to be free.
    PagesPut = 1 << 6,
    /// A pin's revocation, after it claimed the pin and before it calls the consumer's free
    /// callback.
    RevokeClaimed = 1 << 7,
    /// GPU removal, after it gave up waiting for pins and before it reports them. Sleeps half
    /// of `test_delay_ms`, so that with [`Point::RevokeClaimed`] removal reports while a
    /// revocation it gave up on is inside that point's window.
    RemovalReport = 1 << 8,
}

impl Point {
    #[cfg(nvrs_testing)]
    fn name(self) -> &'static str {
        match self {
            Point::PinPublish => "pin-publish",
            Point::FreeRelease => "free-release",
            Point::ExitRelease => "exit-release",
            Point::RemovalWalk => "removal-walk",
            Point::PageDrop => "page-drop",
            Point::CreateScrub => "create-scrub",
            Point::PagesPut => "pages-put",
            Point::RevokeClaimed => "revoke-claimed",
            Point::RemovalReport => "removal-report",
        }
    }
}

/// Sleeps at `at` if the module parameters ask for it.
#[cfg(nvrs_testing)]
pub(crate) fn delay(at: Point) {
    let (points, ms) = crate::test_delay();
    if points & (at as u32) == 0 || ms == 0 {
        return;
    }
    let ms = match at {
        Point::RemovalReport => ms / 2,
        _ => ms,
    }
    .min(MAX_DELAY_MS);
    pr_info!("test delay: {} ms at {}\n", ms, at.name());
    fsleep(Delta::from_millis(i64::from(ms)));
}

/// No delay points in a production build.
#[cfg(not(nvrs_testing))]
#[inline(always)]
pub(crate) fn delay(_at: Point) {}
