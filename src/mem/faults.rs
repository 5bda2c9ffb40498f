// SPDX-License-Identifier: GPL-2.0

//! A GPU's fault controls as its memory keeps them (test builds: `--cfg nvrs_testing`).
//!
//! The calls that may fail on purpose ask [`GpuFaults`] whether they must; while no control is
//! set that costs one atomic read. The controls themselves, their parsing and their decisions,
//! are [`crate::faults`]; the debugfs file that sets them and the timer of `revoke every` are
//! the driver's (`src/driver/faults.rs`). A production build has the same hooks with nothing
//! behind them (`faults_off.rs`).

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Mutex,
    },
};

use crate::{
    fault_op::Op,
    faults::{
        Action,
        FaultError,
        Faults, //
    },
};

/// One GPU's fault controls.
#[pin_data]
pub(crate) struct GpuFaults {
    #[pin]
    faults: Mutex<Faults>,
    /// Whether any control is set (written under `faults`).
    set: Atomic<bool>,
}

/// What the controls did, for `NVRS_IOCTL_GPU_STATS`.
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
    /// No control set.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            faults <- new_mutex!(Faults::default(), "GpuFaults::faults"),
            set: Atomic::new(false),
        })
    }

    /// The verdict on a call of `op`: the errno it must fail with, if a control says so.
    pub(crate) fn inject(&self, op: Op) -> Result {
        if !self.set.load(Relaxed) {
            return Ok(());
        }
        match self.faults.lock().check(op) {
            Some(errno) => Err(Error::from_errno(-errno)),
            None => Ok(()),
        }
    }

    /// Whether the BAR1 budget refuses a pin of `len` bytes while `pinned()` bytes are pinned
    /// on the GPU (`pinned` is asked only when a budget is set, with no lock held).
    pub(crate) fn over_bar1_budget(&self, len: u64, pinned: impl FnOnce() -> u64) -> bool {
        if !self.set.load(Relaxed) || self.faults.lock().bar1_budget == 0 {
            return false;
        }
        let pinned = pinned();
        self.faults.lock().over_budget(pinned, len)
    }

    /// How many microseconds late each free callback is called, and whether a release revokes
    /// its pins from the workqueue.
    pub(crate) fn callback_faults(&self) -> (u32, bool) {
        if !self.set.load(Relaxed) {
            return (0, false);
        }
        let f = self.faults.lock();
        (f.callback_delay_us, f.callback_in_worker)
    }

    /// `revoke permille`, at a pinning call: a random number to pick the pin to revoke with, if
    /// one is revoked now.
    pub(crate) fn roll_revoke(&self) -> Option<u64> {
        if !self.set.load(Relaxed) {
            return None;
        }
        self.faults.lock().roll_revoke()
    }

    /// Counts pins a control revoked.
    pub(crate) fn count_revoked(&self, n: u64) {
        let mut f = self.faults.lock();
        f.revoked = f.revoked.saturating_add(n);
    }

    /// What the controls did so far.
    pub(crate) fn counters(&self) -> FaultCounters {
        let f = self.faults.lock();
        FaultCounters {
            injected: f.injected,
            revoked: f.revoked,
            bar1_budget: f.bar1_budget,
        }
    }

    /// Applies a command; the controls are unchanged on error.
    pub(crate) fn apply(&self, text: &str) -> Result<Action, FaultError> {
        let mut f = self.faults.lock();
        let action = f.apply(text)?;
        self.set.store(f.any(), Relaxed);
        Ok(action)
    }

    /// The controls as the debugfs file `faults` reads.
    pub(crate) fn render(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", *self.faults.lock())
    }
}
