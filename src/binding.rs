// SPDX-License-Identifier: GPL-2.0

//! Which functions nvrs binds: opt-in, so that installing nvrs never takes a GPU.
//!
//! nvrs's PCI table matches every NVIDIA display function, so that the administrator can hand
//! any GPU to it; but on a host where `nvidia.ko` (or nouveau) drives the GPUs, merely
//! installing nvrs (a distribution package, DKMS) must not change which driver binds a GPU at
//! boot. So nvrs binds a real NVIDIA GPU only when asked:
//!
//! * per GPU, by the administrator writing `nvrs` to the function's `driver_override` in sysfs
//!   (then `bind`), the kernel's own mechanism for this, or
//! * for all GPUs, with the `bind_nvidia` module parameter (shipped off).
//!
//! QEMU ivshmem devices are bound as emulated GPUs only with the `emulated` parameter.
//!
//! This module is pure (no `kernel::`), so it is also tested on the host.

/// What kind of function an id-table entry matched.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// An NVIDIA GPU.
    Nvidia,
    /// A QEMU ivshmem-plain device, bound only with `emulated=1`.
    Ivshmem,
}

/// What the administrator asked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Policy {
    /// The `bind_nvidia` module parameter.
    pub(crate) bind_nvidia: bool,
    /// The `emulated` module parameter.
    pub(crate) emulated: bool,
}

impl Policy {
    /// Whether to bind a function of `kind`, given whether its `driver_override` names nvrs.
    pub(crate) fn binds(&self, kind: Kind, override_names_nvrs: bool) -> bool {
        match kind {
            Kind::Nvidia => self.bind_nvidia || override_names_nvrs,
            Kind::Ivshmem => self.emulated,
        }
    }
}
