// SPDX-License-Identifier: GPL-2.0

//! A bound GPU's fault controls in a production build: there are none, so there is no debugfs
//! file `faults` and no periodic revocation to stop. Test builds (`--cfg nvrs_testing`) have
//! `faults.rs`, beside this file, with the same two calls.

use kernel::{
    debugfs,
    prelude::*,
    sync::Arc, //
};

use crate::gpu::GpuInfo;

/// No fault controls.
pub(crate) struct FaultCtl;

impl FaultCtl {
    /// Nothing to set up.
    pub(crate) fn new(_info: Arc<GpuInfo>, _dir: &debugfs::Dir) -> impl PinInit<Self, Error> {
        Ok::<Self, Error>(FaultCtl)
    }

    /// Nothing runs.
    pub(crate) fn stop(&self) {}
}
