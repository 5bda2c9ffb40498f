// SPDX-License-Identifier: GPL-2.0

//! The FFI edge to `rust/helpers.c`: C helpers for kernel APIs the `kernel` crate does not wrap.
//!
//! Every `unsafe` call into those helpers lives here, behind safe functions; the rest of nvrs
//! never sees a raw pointer.

use core::ffi::{
    c_char,
    c_int,
    c_void, //
};

use kernel::{
    bindings,
    pci,
    prelude::*, //
};

use crate::topology::link::{
    Endpoint,
    Hop,
    PortKind, //
};

/// `NVRS_PCI_MAX_HOPS`.
const MAX_HOPS: usize = 8;

/// `struct nvrs_pci_hop`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawHop {
    id: u32,
    kind: u32,
}

/// `struct nvrs_pci_endpoint`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawEndpoint {
    id: u32,
    host_bridge: u32,
    numa_node: i32,
    vendor_device: u32,
    class: u32,
    n_hops: u32,
    hops: [RawHop; MAX_HOPS],
}

const _: () = assert!(core::mem::size_of::<RawEndpoint>() == 24 + 8 * MAX_HOPS);
const _: () = assert!(MAX_HOPS == crate::topology::link::MAX_HOPS);

extern "C" {
    fn nvrs_pci_describe(pdev: *mut c_void, ep: *mut RawEndpoint) -> c_int;
    fn nvrs_pci_peers(extra_vendor_device: u32, eps: *mut RawEndpoint, max: u32) -> c_int;
    fn nvrs_p2pdma_distance(provider: *mut c_void, client_id: u32) -> c_int;
    fn nvrs_node_cpulist(node: c_int, buf: *mut c_char, len: u32) -> c_int;
}

/// The `struct pci_dev` behind a PCI device, as the untyped pointer the helpers take (the
/// bindgen type of `struct pci_dev` is not FFI-safe by Rust's rules).
fn raw_pci_dev<Ctx: kernel::device::DeviceContext>(pdev: &pci::Device<Ctx>) -> *mut c_void {
    // `pci::Device` is a `#[repr(transparent)]` wrapper of `Opaque<bindings::pci_dev>`, which is
    // itself transparent over the C structure, so the reference is a pointer to the C object.
    core::ptr::from_ref(pdev).cast::<bindings::pci_dev>().cast_mut().cast()
}

impl RawEndpoint {
    /// The NUMA node, if the platform reports one.
    pub(crate) fn numa(&self) -> Option<u16> {
        u16::try_from(self.numa_node).ok()
    }

    /// Converts to the topology module's description.
    pub(crate) fn endpoint(&self) -> Result<Endpoint> {
        let n = usize::try_from(self.n_hops)?;
        let mut hops = [Hop { id: 0, kind: PortKind::Bridge }; MAX_HOPS];
        for (out, raw) in hops.iter_mut().zip(self.hops.get(..n).ok_or(EINVAL)?) {
            let kind = match raw.kind {
                0 => PortKind::RootPort,
                1 => PortKind::SwitchUpstream,
                2 => PortKind::SwitchDownstream,
                _ => PortKind::Bridge,
            };
            *out = Hop { id: raw.id, kind };
        }
        Endpoint::new(self.id, self.host_bridge, self.numa(), hops.get(..n).ok_or(EINVAL)?)
            .map_err(|_| E2BIG)
    }
}

/// Describes where `pdev` sits in the PCI hierarchy.
pub(crate) fn pci_describe<Ctx: kernel::device::DeviceContext>(
    pdev: &pci::Device<Ctx>,
) -> Result<Endpoint> {
    let mut raw = RawEndpoint::default();
    // SAFETY: `raw_pci_dev` returns the valid `struct pci_dev` behind `pdev`, which the reference
    // keeps alive for the call; `raw` is a valid, writable `struct nvrs_pci_endpoint`.
    kernel::error::to_result(unsafe { nvrs_pci_describe(raw_pci_dev(pdev), &mut raw) })?;
    raw.endpoint()
}

/// Describes the candidate DMA peers (network controllers and `extra` vendor:device) into `out`;
/// returns how many were found.
pub(crate) fn pci_peers(extra: u32, out: &mut [RawEndpoint]) -> usize {
    let max = u32::try_from(out.len()).unwrap_or(u32::MAX);
    // SAFETY: `out` is a valid, writable array of at least `max` endpoints.
    let n = unsafe { nvrs_pci_peers(extra, out.as_mut_ptr(), max) };
    usize::try_from(n).unwrap_or(0).min(out.len())
}

/// The kernel's P2PDMA distance from `provider` to the function with routing id `client_id`
/// (negative: refused).
pub(crate) fn p2pdma_distance<Ctx: kernel::device::DeviceContext>(
    provider: &pci::Device<Ctx>,
    client_id: u32,
) -> i32 {
    // SAFETY: `raw_pci_dev` returns the valid `struct pci_dev` behind `provider`, kept alive by
    // the reference for the call.
    unsafe { nvrs_p2pdma_distance(raw_pci_dev(provider), client_id) }
}

/// Writes the CPU list of NUMA node `node` (all online CPUs if `None`) into `buf`; returns it.
pub(crate) fn node_cpulist(node: Option<u16>, buf: &mut [u8; 64]) -> &str {
    let node = node.map_or(-1, c_int::from);
    // SAFETY: `buf` is valid for writes of its full length, which is passed as the bound.
    let n = unsafe { nvrs_node_cpulist(node, buf.as_mut_ptr().cast(), 64) };
    let n = usize::try_from(n).unwrap_or(0).min(buf.len());
    core::str::from_utf8(buf.get(..n).unwrap_or(&[])).unwrap_or("")
}
