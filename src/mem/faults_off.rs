// SPDX-License-Identifier: GPL-2.0

//! The fault hooks of a production build: no control exists, every call answers "no fault".
//!
//! The test builds' hooks (`--cfg nvrs_testing`) are `faults.rs`, beside this file; the call
//! sites are the same in both builds.

use kernel::prelude::*;

use crate::fault_op::Op;

/// No fault controls.
pub(crate) struct GpuFaults;

/// What the controls did: nothing, in this build.
#[derive(Clone, Copy, Default)]
pub(crate) struct FaultCounters {
    /// Calls a control made fail.
    pub(crate) injected: u64,
    /// Pins a control revoked.
    pub(crate) revoked: u64,
    /// The BAR1 budget in bytes (0: none).
    pub(crate) bar1_budget: u64,
}

impl GpuFaults {
    /// The hooks.
    pub(crate) fn new() -> impl PinInit<Self> {
        GpuFaults
    }

    /// Never fails a call.
    #[inline(always)]
    pub(crate) fn inject(&self, _op: Op) -> Result {
        Ok(())
    }

    /// No BAR1 budget.
    #[inline(always)]
    pub(crate) fn over_bar1_budget(&self, _len: u64, _pinned: impl FnOnce() -> u64) -> bool {
        false
    }

    /// Free callbacks are called at once, by the releasing thread.
    #[inline(always)]
    pub(crate) fn callback_faults(&self) -> (u32, bool) {
        (0, false)
    }

    /// Nothing is revoked at random.
    #[inline(always)]
    pub(crate) fn roll_revoke(&self) -> Option<u64> {
        None
    }

    /// Nothing to count (nothing revokes).
    #[inline(always)]
    pub(crate) fn count_revoked(&self, _n: u64) {}

    /// Zero.
    pub(crate) fn counters(&self) -> FaultCounters {
        FaultCounters::default()
    }
}
