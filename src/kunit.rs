// SPDX-License-Identifier: GPL-2.0

//! KUnit suites of nvrs.
//!
//! They run when the module is loaded into a kernel built with `CONFIG_KUNIT=y` (the test kernel
//! of `make check`); other kernels compile them out. Suites over pure logic live next to the
//! suites over live state so a reader finds every in-kernel test here:
//!
//! - `nvrs_ident`: chip identification and the hwref tables, as compiled into the module;
//! - `nvrs_emu_identity`: the emulated GPU's identity block;
//! - `nvrs_topology`: link classification and the P2P gate;
//! - `nvrs_pmm`: the physical memory manager with kernel storage, live and private;
//! - `nvrs_gpus`: the GPUs this module instance bound in the running kernel;
//! - `nvrs_task`: the `kernel` crate's task accessors, against C.

mod emu_identity;
mod gpus;
mod ident;
mod pmm;
mod task;
mod topology;
