// SPDX-License-Identifier: GPL-2.0

//! Host build of nvrs's pure logic.
//!
//! The module's files that do not use `kernel::` are compiled here unchanged, under the same
//! module paths as in `nvrs.ko`, so `cargo test` exercises exactly the code the kernel runs.

#![allow(dead_code)]

#[path = "../../../src/aperture.rs"]
pub(crate) mod aperture;
#[path = "../../../src/binding.rs"]
pub(crate) mod binding;
#[path = "../../../src/emu_identity.rs"]
pub(crate) mod emu_identity;
#[path = "../../../src/fault_op.rs"]
pub(crate) mod fault_op;
#[path = "../../../src/faults.rs"]
pub(crate) mod faults;
#[path = "../../../src/gmmu/mod.rs"]
pub(crate) mod gmmu;
#[path = "../../../hwref/mod.rs"]
pub(crate) mod hwref;
pub(crate) mod p2p;
#[path = "../../../src/pmm/mod.rs"]
pub(crate) mod pmm;
pub(crate) mod std_storage;
pub(crate) mod topology;
#[path = "../../../src/uapi.rs"]
pub(crate) mod uapi;
pub(crate) mod vaspace;

/// The benchmark traces (`src/bench/`), pure like the memory manager they drive; tested here
/// (their allocator models), timed by `examples/pmm_bench.rs`.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../src/bench/frag.rs"]
mod frag;
#[cfg(test)]
#[allow(dead_code)]
#[path = "../../../src/bench/traces.rs"]
mod traces;

#[cfg(test)]
mod bench_tests;
#[cfg(test)]
mod c_check;
#[cfg(test)]
mod compact_tests;
#[cfg(test)]
mod faults_tests;
#[cfg(test)]
mod gmmu_tests;
#[cfg(test)]
mod p2p_abi_tests;
#[cfg(test)]
mod pin_model;
#[cfg(test)]
mod pmm_model;
#[cfg(test)]
mod pmm_roots_tests;
#[cfg(test)]
mod pmm_scenarios;
#[cfg(test)]
mod pmm_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod topology_tests;
#[cfg(test)]
mod uapi_tests;
#[cfg(test)]
mod vaspace_tests;
