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
    prelude::*,
    task::Pid, //
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
    id: u64,
    kind: u32,
    pad: u32,
}

/// `struct nvrs_pci_endpoint`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RawEndpoint {
    id: u64,
    host_bridge: u32,
    numa_node: i32,
    vendor_device: u32,
    class: u32,
    n_hops: u32,
    pad: u32,
    hops: [RawHop; MAX_HOPS],
}

const _: () = assert!(core::mem::size_of::<RawEndpoint>() == 32 + 16 * MAX_HOPS);
const _: () = assert!(MAX_HOPS == crate::topology::link::MAX_HOPS);

extern "C" {
    fn nvrs_pcim_enable_device(pdev: *mut c_void) -> c_int;
    fn nvrs_driver_override_is_nvrs(pdev: *mut c_void) -> bool;
    fn nvrs_pcim_request_region(
        pdev: *mut c_void,
        bar: c_int,
        name: *const kernel::ffi::c_char,
    ) -> c_int;
    fn nvrs_pci_describe(pdev: *mut c_void, ep: *mut RawEndpoint) -> c_int;
    fn nvrs_pci_peers(extra_vendor_device: u32, eps: *mut RawEndpoint, max: u32) -> c_int;
    fn nvrs_p2pdma_distance(provider: *mut c_void, client_id: u64) -> c_int;
    fn nvrs_node_cpulist(node: c_int, buf: *mut c_char, len: u32) -> c_int;
    fn nvrs_dma_map_mmio(peer: *mut c_void, phys: u64, size: u64, dma: *mut u64) -> c_int;
    fn nvrs_dma_unmap_mmio(peer: *mut c_void, dma: u64, size: u64);
    fn nvrs_vma_setup(vma: *mut c_void, alloc: *const c_void);
    fn nvrs_vmf_insert(vmf: *mut c_void, file_off: u64, phys: u64, len: u64) -> u32;
    fn nvrs_vma_may_share(vma: *mut c_void) -> bool;
    fn nvrs_aperture_wc(pdev: *mut c_void, phys: u64, len: u64) -> c_int;
    fn nvrs_mm_watch_current(owner: *const c_void) -> *mut c_void;
    fn nvrs_mm_watch_is_current(watch: *mut c_void) -> bool;
    fn nvrs_mm_watch_stop(watch: *mut c_void);
    fn nvrs_vma_pgoff(vma: *mut c_void) -> usize;
    fn nvrs_vma_inode_get(vma: *mut c_void) -> *mut c_void;
    fn nvrs_inode_put(inode: *mut c_void);
    fn nvrs_zap_user_mappings(inode: *mut c_void, start: u64, len: u64);
    fn nvrs_pci_dev_get(pdev: *mut c_void) -> *mut c_void;
    fn nvrs_pci_dev_put(pdev: *mut c_void);
    fn nvrs_current_tgid() -> c_int;
    fn nvrs_current_process_get() -> *mut c_void;
    fn nvrs_process_put(pid: *mut c_void);
    fn nvrs_process_nr(pid: *mut c_void) -> c_int;
    fn nvrs_zero_mmio(phys: u64, len: u64) -> c_int;
    fn nvrs_copy_mmio(dst: u64, src: u64, len: u64) -> c_int;
    fn nvrs_module_get() -> bool;
    fn nvrs_module_put();
    fn nvrs_wq_init() -> *mut kernel::bindings::workqueue_struct;
    fn nvrs_wq_get() -> *mut kernel::bindings::workqueue_struct;
    fn nvrs_wq_flush();
    fn nvrs_wq_fini();
}

/// Creates nvrs's work queue (VA-space teardown after exit); module init, once.
pub(crate) fn wq_init() -> Result {
    // SAFETY: Called once from module init, before anything uses the queue.
    if unsafe { nvrs_wq_init() }.is_null() {
        return Err(ENOMEM);
    }
    Ok(())
}

/// nvrs's work queue, once module init made it.
pub(crate) fn wq() -> Option<&'static kernel::workqueue::Queue> {
    // SAFETY: Reads the pointer module init wrote before `/dev/nvrs` existed.
    let q = unsafe { nvrs_wq_get() };
    // SAFETY: The queue lives until `wq_fini` at module exit, after everything that enqueues.
    (!q.is_null()).then(|| unsafe { kernel::workqueue::Queue::from_raw(q) })
}

/// Waits for every work item queued on nvrs's work queue so far.
pub(crate) fn wq_flush() {
    // SAFETY: The queue is valid from module init to module exit (or NULL, which is ignored).
    unsafe { nvrs_wq_flush() }
}

/// Drains and destroys nvrs's work queue; module exit, after the last user.
pub(crate) fn wq_fini() {
    // SAFETY: Module exit: nothing enqueues any more (every file is closed, every GPU gone).
    unsafe { nvrs_wq_fini() }
}

/// The `struct pci_dev` behind a PCI device, as the untyped pointer the helpers take (the
/// bindgen type of `struct pci_dev` is not FFI-safe by Rust's rules).
fn raw_pci_dev<Ctx: kernel::device::DeviceContext>(pdev: &pci::Device<Ctx>) -> *mut c_void {
    // `pci::Device` is a `#[repr(transparent)]` wrapper of `Opaque<bindings::pci_dev>`, which is
    // itself transparent over the C structure, so the reference is a pointer to the C object.
    core::ptr::from_ref(pdev)
        .cast::<bindings::pci_dev>()
        .cast_mut()
        .cast()
}

impl RawEndpoint {
    /// The NUMA node, if the platform reports one.
    pub(crate) fn numa(&self) -> Option<u16> {
        u16::try_from(self.numa_node).ok()
    }

    /// Converts to the topology module's description.
    pub(crate) fn endpoint(&self) -> Result<Endpoint> {
        let n = usize::try_from(self.n_hops)?;
        let mut hops = [Hop {
            id: 0,
            kind: PortKind::Bridge,
        }; MAX_HOPS];
        for (out, raw) in hops.iter_mut().zip(self.hops.get(..n).ok_or(EINVAL)?) {
            let kind = match raw.kind {
                0 => PortKind::RootPort,
                1 => PortKind::SwitchUpstream,
                2 => PortKind::SwitchDownstream,
                _ => PortKind::Bridge,
            };
            *out = Hop { id: raw.id, kind };
        }
        Endpoint::new(
            self.id,
            self.host_bridge,
            self.numa(),
            hops.get(..n).ok_or(EINVAL)?,
        )
        .map_err(|_| E2BIG)
    }
}

/// Enables `pdev` (memory and I/O decoding), managed: undone when probe fails or the device is
/// unbound.
pub(crate) fn pcim_enable_device(pdev: &pci::Device<kernel::device::Core<'_>>) -> Result {
    // SAFETY: `raw_pci_dev` returns the valid `struct pci_dev` being probed (the `Core` context
    // guarantees we are in probe with the device lock held).
    kernel::error::to_result(unsafe { nvrs_pcim_enable_device(raw_pci_dev(pdev)) })
}

/// Whether the administrator handed `pdev` to nvrs through its sysfs `driver_override`.
pub(crate) fn driver_override_is_nvrs(pdev: &pci::Device<kernel::device::Core<'_>>) -> bool {
    // SAFETY: `raw_pci_dev` returns the valid `struct pci_dev` being probed, with the device
    // lock held, so its `driver_override` cannot change under us.
    unsafe { nvrs_driver_override_is_nvrs(raw_pci_dev(pdev)) }
}

/// Claims BAR `bar` of `pdev` for nvrs without mapping it, managed: released when probe fails
/// or the device is unbound.
pub(crate) fn pcim_request_region(
    pdev: &pci::Device<kernel::device::Core<'_>>,
    bar: u32,
    name: &'static CStr,
) -> Result {
    let bar = c_int::try_from(bar)?;
    // SAFETY: `raw_pci_dev` returns the valid `struct pci_dev` being probed; `name` is a static
    // NUL-terminated string, as the resource keeps a pointer to it.
    kernel::error::to_result(unsafe {
        nvrs_pcim_request_region(raw_pci_dev(pdev), bar, name.as_char_ptr())
    })
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

/// Describes where a consumer's peer device sits in the PCI hierarchy.
pub(crate) fn peer_describe(peer: &PeerRef) -> Result<Endpoint> {
    let mut raw = RawEndpoint::default();
    // SAFETY: `peer.ptr` is a valid `struct pci_dev` (type invariant); `raw` is writable.
    kernel::error::to_result(unsafe { nvrs_pci_describe(peer.ptr, &mut raw) })?;
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
    client_id: u64,
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

/// A counted reference on a peer's `struct pci_dev`, as consumers pass it to
/// `nvidia_p2p_dma_map_pages()`.
///
/// # Invariants
///
/// `ptr` is a valid `struct pci_dev` on which this object holds a reference.
pub(crate) struct PeerRef {
    ptr: *mut c_void,
}

// SAFETY: A `struct pci_dev` reference may be held and dropped from any thread.
unsafe impl Send for PeerRef {}
// SAFETY: Shared access only reads the pointer.
unsafe impl Sync for PeerRef {}

impl PeerRef {
    /// Takes a reference on the consumer's `peer`.
    ///
    /// # Safety
    ///
    /// `peer` must be a valid `struct pci_dev` for the duration of the call (the consumer's
    /// promise when it calls `nvidia_p2p_dma_map_pages()`).
    pub(crate) unsafe fn new(peer: *mut crate::p2p::abi::PciDev) -> Option<Self> {
        if peer.is_null() {
            return None;
        }
        // SAFETY: `peer` is a valid `struct pci_dev` by the caller's guarantee.
        let ptr = unsafe { nvrs_pci_dev_get(peer.cast()) };
        // INVARIANT: `ptr` is `peer`, now with a reference held.
        Some(Self { ptr })
    }

    /// The peer as the ABI's opaque pointer.
    pub(crate) fn as_abi(&self) -> *mut crate::p2p::abi::PciDev {
        self.ptr.cast()
    }
}

impl Drop for PeerRef {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference on `ptr`.
        unsafe { nvrs_pci_dev_put(self.ptr) };
    }
}

/// Maps `[phys, phys + size)` of a GPU aperture for DMA by `peer`.
///
/// # Safety
///
/// The range must be GPU memory held by a live pin, which unmaps the result with
/// [`dma_unmap_mmio`] before the pin ends: the peer may reach it until then.
pub(crate) unsafe fn dma_map_mmio(peer: &PeerRef, phys: u64, size: u64) -> Result<u64> {
    let mut dma = 0u64;
    // SAFETY: `peer.ptr` is a valid `struct pci_dev` (type invariant); `dma` is writable; the
    // range is pinned GPU memory (function safety requirement).
    kernel::error::to_result(unsafe { nvrs_dma_map_mmio(peer.ptr, phys, size, &mut dma) })?;
    Ok(dma)
}

/// Undoes [`dma_map_mmio`].
///
/// # Safety
///
/// `dma` and `size` must be a mapping [`dma_map_mmio`] made for `peer` and not yet unmapped.
pub(crate) unsafe fn dma_unmap_mmio(peer: &PeerRef, dma: u64, size: u64) {
    // SAFETY: `peer.ptr` is a valid `struct pci_dev` (type invariant); `dma`/`size` came from
    // `dma_map_mmio` on the same peer.
    unsafe { nvrs_dma_unmap_mmio(peer.ptr, dma, size) }
}

/// Makes `vma` a fault-mapped, write-combined window on the allocation at `alloc`, never
/// copied on fork, expanded, dumped or executable. The VMA takes over the reference `alloc`
/// stands for (an `Arc::into_raw`); the VMA callbacks in [`crate::vaspace::cpu_map`] count it.
///
/// # Safety
///
/// `vma` must be the shared VMA of the current `mmap` call, and `alloc` a pointer obtained from
/// `Arc::<Allocation>::into_raw` whose reference is handed to the VMA.
pub(crate) unsafe fn vma_setup(vma: &kernel::mm::virt::VmaNew, alloc: *const c_void) {
    // SAFETY: `vma` is being set up by the current `mmap` call (the caller's guarantee), so its
    // flags, protection, operations and private data are ours to set.
    unsafe { nvrs_vma_setup(vma.as_ptr().cast(), alloc) }
}

/// Whether `vma` is a shared mapping (`MAP_SHARED`, writable or not).
pub(crate) fn vma_may_share(vma: &kernel::mm::virt::VmaNew) -> bool {
    // SAFETY: `vma.as_ptr()` is the valid VMA of the current `mmap` call; only its flags are read.
    unsafe { nvrs_vma_may_share(vma.as_ptr().cast()) }
}

/// A page fault being handled by nvrs's VMA operations.
///
/// # Invariants
///
/// `vmf` is a valid `struct vm_fault` of a VMA set up by [`vma_setup`], for the duration of the
/// fault handler that lent it.
pub(crate) struct Fault {
    vmf: *mut c_void,
}

impl Fault {
    /// Wraps the fault the C handler passed in.
    ///
    /// # Safety
    ///
    /// `vmf` must be the `struct vm_fault` being handled, valid until the returned value is
    /// dropped, on a VMA set up by [`vma_setup`] or by the dma-buf `mmap` (`rust/dmabuf.c`).
    pub(crate) unsafe fn from_raw(vmf: *mut c_void) -> Self {
        // INVARIANT: By the caller's guarantee.
        Self { vmf }
    }

    /// Inserts the pages of the aperture piece at `phys` (`len` bytes), which backs the file
    /// offsets from `file_off`, into the faulting VMA; returns the `vm_fault_t`.
    ///
    /// # Safety
    ///
    /// `[phys, phys + len)` must be GPU memory of a live allocation that this VMA maps at
    /// `file_off`, and stay so until the allocation's release removes the mappings (the caller
    /// holds the allocation's lock).
    pub(crate) unsafe fn insert(&self, file_off: u64, phys: u64, len: u64) -> u32 {
        // SAFETY: `vmf` is the fault being handled (type invariant); the range is the caller's
        // allocation (function safety requirement).
        unsafe { nvrs_vmf_insert(self.vmf, file_off, phys, len) }
    }
}

/// Reserves `[phys, phys + len)` of `pdev`'s aperture write-combined (PAT memory type, and an
/// MTRR where the CPU has no PAT); undone automatically when the GPU is unbound.
pub(crate) fn aperture_wc(
    pdev: &pci::Device<kernel::device::Core<'_>>,
    phys: u64,
    len: u64,
) -> Result {
    // SAFETY: `raw_pci_dev` returns the valid `struct pci_dev` being probed; the reservation is
    // device-managed, so it cannot outlive the binding.
    kernel::error::to_result(unsafe { nvrs_aperture_wc(raw_pci_dev(pdev), phys, len) })
}

/// A watch on the calling process's address space: [`crate::vaspace::VaSpace`] learns through
/// it when the process exits or execs (`nvrs_va_space_exit`).
///
/// # Invariants
///
/// `watch` is a registered `struct nvrs_mm_watch`, owned by this object.
pub(crate) struct MmWatch {
    watch: *mut c_void,
}

// SAFETY: The watch may be queried and stopped from any thread.
unsafe impl Send for MmWatch {}
// SAFETY: Shared access only compares the watched mm with `current->mm`.
unsafe impl Sync for MmWatch {}

impl MmWatch {
    /// Watches the calling process's address space on behalf of `owner`.
    ///
    /// # Safety
    ///
    /// `owner` must stay valid for `nvrs_va_space_exit` until the watch is dropped.
    pub(crate) unsafe fn current(owner: *const c_void) -> Result<Self> {
        // SAFETY: No preconditions beyond the caller's on `owner`.
        let watch = unsafe { nvrs_mm_watch_current(owner) };
        // INVARIANT: A non-error pointer is a registered watch.
        kernel::error::from_err_ptr(watch).map(|watch| Self { watch })
    }

    /// Whether the caller runs in the watched address space.
    pub(crate) fn is_current(&self) -> bool {
        // SAFETY: `watch` is registered (type invariant).
        unsafe { nvrs_mm_watch_is_current(self.watch) }
    }
}

impl Drop for MmWatch {
    fn drop(&mut self) {
        // SAFETY: `watch` is registered and ours (type invariant); it is not used again.
        unsafe { nvrs_mm_watch_stop(self.watch) }
    }
}

/// The file offset, in bytes, that `vma` maps.
pub(crate) fn vma_offset(vma: &kernel::mm::virt::VmaNew) -> u64 {
    // SAFETY: `vma.as_ptr()` is the valid VMA being set up by the current `mmap` call.
    let pgoff = unsafe { nvrs_vma_pgoff(vma.as_ptr().cast()) };
    u64::try_from(pgoff)
        .unwrap_or(u64::MAX)
        .saturating_mul(u64::from(kernel::page::PAGE_SIZE as u32))
}

/// Zeroes `[phys, phys + len)` of a GPU aperture through a write-combined CPU mapping.
///
/// # Safety
///
/// The range must be GPU memory the caller owns and nobody else can reach: a chunk just
/// allocated and not yet handed out, or one being returned after every mapping and pin of it
/// ended.
pub(crate) unsafe fn zero_mmio(phys: u64, len: u64) -> Result {
    // SAFETY: The helper maps and unmaps the range itself; the caller owns the memory (function
    // safety requirement).
    kernel::error::to_result(unsafe { nvrs_zero_mmio(phys, len) })
}

/// Copies `[src, src + len)` of a GPU aperture to `[dst, dst + len)` through the CPU.
///
/// # Safety
///
/// Both ranges must be GPU memory the caller owns and nobody else can reach while it copies: a
/// chunk being moved by compaction (its mappings removed, its owner's lock held) and its
/// destination, allocated for it and not yet handed out.
pub(crate) unsafe fn copy_mmio(dst: u64, src: u64, len: u64) -> Result {
    // SAFETY: The helper maps and unmaps the ranges itself; the caller owns both (function
    // safety requirement).
    kernel::error::to_result(unsafe { nvrs_copy_mmio(dst, src, len) })
}

/// The calling process's id (its thread-group id).
///
/// Read in C: the `kernel` crate's `Task::tgid()` read -1 on this kernel.
pub(crate) fn current_tgid() -> i32 {
    // SAFETY: No preconditions; reads `current`.
    unsafe { nvrs_current_tgid() }
}

/// A process, held by a reference on its `struct pid` (its thread-group id), to name it to
/// readers in their own PID namespace.
///
/// A process has one id in each PID namespace from the one it was created in up to the root;
/// the id that `NVRS_IOCTL_PROCESSES` reports is the one of the reader's namespace, and a
/// process outside it (in a sibling container, or the host seen from a container) is not
/// reported at all. The reference keeps the `struct pid` from being freed; it does not keep
/// the process alive.
///
/// # Invariants
///
/// `pid` is null or a `struct pid` on which this object holds a reference.
pub(crate) struct Process {
    pid: *mut c_void,
}

// SAFETY: A `struct pid` reference may be held and dropped from any thread.
unsafe impl Send for Process {}
// SAFETY: Shared access only reads the pid's ids, which never change.
unsafe impl Sync for Process {}

impl Process {
    /// The calling process.
    pub(crate) fn current() -> Self {
        // SAFETY: No preconditions; takes a reference on current's thread-group pid.
        let pid = unsafe { nvrs_current_process_get() };
        // INVARIANT: The helper took a reference.
        Self { pid }
    }

    /// The process's id in the calling task's PID namespace, or `None` if it is not visible
    /// there.
    pub(crate) fn id_for_current(&self) -> Option<Pid> {
        // SAFETY: `pid` is null or referenced (type invariant); the helper handles null.
        let nr = unsafe { nvrs_process_nr(self.pid) };
        (nr > 0).then_some(nr)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference on `pid` (`put_pid` takes null).
        unsafe { nvrs_process_put(self.pid) }
    }
}

/// The device inode behind `/dev/nvrs` mappings, held by a reference, to remove those
/// mappings later.
///
/// # Invariants
///
/// `inode` is an inode on which this object holds a reference.
pub(crate) struct MappedInode {
    inode: *mut c_void,
}

// SAFETY: An inode reference may be held and dropped from any thread.
unsafe impl Send for MappedInode {}
// SAFETY: Shared access only passes the pointer to `unmap_mapping_range`, which is thread-safe.
unsafe impl Sync for MappedInode {}

impl MappedInode {
    /// The inode `vma` maps.
    pub(crate) fn of(vma: &kernel::mm::virt::VmaNew) -> Self {
        // SAFETY: `vma` is the valid VMA of the current `mmap` call, which maps a file.
        let inode = unsafe { nvrs_vma_inode_get(vma.as_ptr().cast()) };
        // INVARIANT: The helper took a reference.
        Self { inode }
    }

    /// Whether both hold the same inode.
    pub(crate) fn same(&self, other: &MappedInode) -> bool {
        self.inode == other.inode
    }

    /// Removes every user mapping of file offsets `[start, start + len)`.
    pub(crate) fn zap(&self, start: u64, len: u64) {
        // SAFETY: `inode` is valid, as we hold a reference (type invariant).
        unsafe { nvrs_zap_user_mappings(self.inode, start, len) }
    }
}

impl Drop for MappedInode {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold a reference on `inode`.
        unsafe { nvrs_inode_put(self.inode) }
    }
}

/// Takes a reference on nvrs itself (false while it is being unloaded).
pub(crate) fn module_get() -> bool {
    // SAFETY: No preconditions.
    unsafe { nvrs_module_get() }
}

/// Drops a reference taken by [`module_get`].
pub(crate) fn module_put() {
    // SAFETY: Only called to balance a successful `module_get`.
    unsafe { nvrs_module_put() }
}
