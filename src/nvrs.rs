// SPDX-License-Identifier: GPL-2.0

//! nvrs: an NVIDIA GPU kernel module for GPUDirect-RDMA-style peer access.
//!
//! nvrs binds NVIDIA GPUs, identifies each chip from its boot registers, finds its framebuffer
//! aperture (BAR1, the window through which peers and the CPU reach GPU memory) and, in later
//! layers, manages that memory and exports it to in-kernel RDMA drivers through the
//! `nvidia_p2p_*` API.
//!
//! For testing without an NVIDIA GPU, the `emulated` parameter makes nvrs also bind QEMU
//! `ivshmem-plain` devices whose shared memory carries an identity block
//! (`include/nvrs_emu_identity.h`); everything above the BAR then runs unchanged in a VM.
//!
//! Layout:
//! - [`driver`]: the PCI driver, probe and remove (the one orchestrator of a GPU's teardown);
//! - [`locking`]: the lock order of the whole module;
//! - [`gpu`]: what nvrs knows about one bound GPU, the registry of bound GPUs, debugfs;
//! - [`aperture`]: finding the framebuffer BAR among a function's BARs;
//! - [`binding`]: which functions nvrs binds (opt-in);
//! - [`emu_identity`]: the emulated GPU's identity block;
//! - [`topology`]: links between GPUs and peer devices, and the P2P gate;
//! - [`dmabuf`]: dma-buf export of GPU memory for RDMA drivers and other importers;
//! - [`copy`]: the copy engine hook compaction moves memory through;
//! - [`helpers`]: the FFI edge to `rust/helpers.c`;
//! - [`uapi`]: the structures and ioctl numbers of `/dev/nvrs` (`include/uapi/nvrs.h`);
//! - [`text`]: sizes and UUIDs as nvrs prints them, text written to debugfs files;
//! - `hwref` (top-level `hwref/`): per-architecture tables and chip identification.

use kernel::{
    debugfs,
    driver::Registration,
    miscdevice::{
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    pci,
    prelude::*,
    InPlaceModule, //
};

mod aperture;
mod bar1;
#[cfg(nvrs_bench)]
mod bench;
mod binding;
mod ce;
mod chardev;
mod dmabuf;
mod driver;
mod emu_identity;
mod exports;
mod fault_op;
#[cfg(nvrs_testing)]
mod faults;
mod gmmu;
mod gpu;
mod helpers;
#[path = "../hwref/mod.rs"]
mod hwref;
mod kstorage;
mod kunit;
mod locking;
mod mem;
mod p2p;
mod pmm;
mod room;
mod testhook;
mod text;
mod topology;
mod uapi;
mod vaspace;

/// The module's name, `nvrs`.
pub(crate) const MODULE_NAME: &CStr = <LocalModule as kernel::ModuleMetadata>::NAME;

/// The `module!` invocation, with the test builds' parameters (`$test`) after the others:
/// the parameters of the fault controls and the test delay points exist only in test builds
/// (`make NVRS_TESTING=1`, `--cfg nvrs_testing`; see `src/faults.rs`).
macro_rules! nvrs_module {
    ($($test:tt)*) => {
        module! {
            type: NvrsModule,
            name: "nvrs",
            authors: ["The nvrs developers"],
            description: "NVIDIA GPU driver with the nvidia_p2p peer-memory API (Rust)",
            license: "GPL",
            params: {
                emulated: bool {
                    default: false,
                    description: "Also bind QEMU ivshmem-plain devices as emulated GPUs (test-beds \
                        only)",
                },
                bind_nvidia: bool {
                    default: false,
                    description: "Bind every NVIDIA GPU. Off: nvrs binds a GPU only if its sysfs \
                        driver_override is nvrs, so installing nvrs never takes a GPU from \
                        nvidia.ko",
                },
                p2p_topology: u32 {
                    default: 0,
                    description: "P2P topology gate: 0 = by topology (NVLink and PCIe-switch paths \
                        allowed, host-bridge paths if the kernel's P2PDMA check allows them, paths \
                        between host bridges refused), 1 = allow every path, 2 = refuse every path",
                },
                dmabuf_revocable_only: bool {
                    default: false,
                    description: "Refuse dma-buf importers that cannot be revoked (pinned \
                        importers without invalidate_mappings: efa, bnxt_re, mana_ib, ionic), as \
                        vfio-pci does; otherwise their mappings outlive a GPU's removal like \
                        persistent pins",
                },
                p2pdma: bool {
                    default: true,
                    description: "Give each GPU's memory struct pages in the kernel's P2PDMA (64 \
                        bytes of system memory per 4 KiB), so that NVRS_ALLOC_P2PDMA allocations \
                        can be the target of O_DIRECT reads and writes (NVMe DMA straight into GPU \
                        memory)",
                },
                compact_on_alloc: bool {
                    default: true,
                    description: "When an allocation fails although enough memory is free, move \
                        movable allocations to make room (compaction) and try once more",
                },
                p2p_coalesce: bool {
                    default: true,
                    description: "Map physically contiguous runs of pinned pages with one \
                        dma_map_resource each (false: one per 64 KiB page, as NVIDIA's driver \
                        does)",
                },
                peer_device: u32 {
                    default: 0,
                    description: "vendor << 16 | device of PCI functions to list as DMA peers in \
                        debugfs topology besides network controllers (e.g. 0x123411e8: QEMU edu)",
                },
                va_space_mib: u32 {
                    default: 0,
                    description: "Size of the GPU VA space in MiB, 0 = the full 128 TiB (tests \
                        shrink it to exercise VA reuse)",
                },
                $($test)*
            },
        }
    };
}

#[cfg(not(nvrs_testing))]
nvrs_module! {}

#[cfg(nvrs_testing)]
nvrs_module! {
    test_delay_points: u32 {
        default: 0,
        description: "Tests only: a mask of points where nvrs sleeps test_delay_ms, to widen \
            removal races (1 = pin before its table is handed out, 2 = FREE before the release, \
            4 = an exited owner's release in the exit work, 8 = GPU removal before it walks the \
            allocations, 16 = a release before it drops its struct pages, 32 = a P2PDMA \
            allocation after its scrub, 64 = a release after it put its struct pages, before \
            it waits for them to be free, 128 = a pin's revocation before it calls the free \
            callback, 256 = GPU removal before it reports the pins it gave up on, for half the \
            time); 0 = none",
    },
    test_delay_ms: u32 {
        default: 0,
        description: "Tests only: how long to sleep at test_delay_points (at most 60000)",
    },
    test_skip_tlb_invalidate: bool {
        default: false,
        description: "Tests only: no TLB invalidate after BAR1 page-table changes on a GPU model \
            (the bind-time BAR1 self-test must then see a stale translation and refuse the GPU)",
    },
    test_no_copy_engine: bool {
        default: false,
        description: "Tests only: leave a GPU model's copy engine unused, so that the CPU \
            scrubs its memory through BAR1",
    },
    test_fail_bar1_unmap: u32 {
        default: 0,
        description: "Tests only: the n-th BAR1 unmap of each GPU model since its bind fails \
            (the bind's self-test makes the first), as a GPU that stopped answering would fail \
            it; 0 = none",
    },
    test_tombs_max: u32 {
        default: 0,
        description: "Tests only: the most tombstones of revoked pins' tables kept at once \
            (0 = the built-in 65536)",
    },
    fault_bar1_mib: u32 {
        default: 0,
        description: "Fault control set on every GPU at probe: a BAR1 budget in MiB, pins past it \
            fail with -ENOMEM (debugfs <gpu>/faults: bar1); 0 = none",
    },
    fault_callback_delay_us: u32 {
        default: 0,
        description: "Fault control set on every GPU at probe: free callbacks are called this many \
            microseconds late, at most 1000000 (debugfs <gpu>/faults: callback delay); 0 = at once",
    },
    fault_callback_workqueue: bool {
        default: false,
        description: "Fault control set on every GPU at probe: a release revokes its pins from \
            nvrs's workqueue, so free callbacks run in a worker (debugfs <gpu>/faults: callback \
            context workqueue)",
    },
    fault_revoke_every_ms: u32 {
        default: 0,
        description: "Fault control set on every GPU at probe: every live non-persistent pin is \
            revoked every this many milliseconds, at most 60000 (debugfs <gpu>/faults: revoke \
            every); 0 = never",
    },
}

/// The module: the PCI driver registration and the GPU registry.
///
/// Fields drop in declaration order: the driver is unregistered first (removing every GPU and
/// its debugfs files), then the registry releases the debugfs root.
#[pin_data]
struct NvrsModule {
    #[pin]
    _driver: Registration<pci::Adapter<driver::NvrsDriver>>,
    #[pin]
    _topology: debugfs::File<()>,
    #[pin]
    _p2p: debugfs::File<()>,
    #[pin]
    _bench: debugfs::File<()>,
    /// `debugfs/nvrs/p2p_profile`: where the time of a pin goes ([`p2p::profile`]).
    #[pin]
    _p2p_profile: debugfs::File<()>,
    #[pin]
    _dev: MiscDeviceRegistration<chardev::NvrsFile>,
    _registry: gpu::RegistryGuard,
    _state: ModuleState,
}

/// The module-lifetime state of the layers above the GPUs; dropping it at module exit (after
/// the driver unbound every GPU and `/dev/nvrs` is gone) frees the registries' buffers, which
/// statics never drop themselves.
struct ModuleState(());

impl ModuleState {
    fn init() -> Result<Self> {
        check_test_params()?;
        mem::fb::init_retired();
        let va_size = u64::from(module_parameters::va_space_mib.value()) << 20;
        mem::va::init(va_size);
        vaspace::init_registry();
        p2p::pin::init_registry();
        dmabuf::init_registry();
        p2p::quarantine::init()?;
        topology::distance::init();
        if let Err(e) = helpers::wq_init() {
            p2p::quarantine::fini();
            return Err(e);
        }
        if let Err(e) = topology::distance::watch_bus() {
            helpers::wq_fini();
            p2p::quarantine::fini();
            return Err(e);
        }
        Ok(Self(()))
    }
}

impl Drop for ModuleState {
    fn drop(&mut self) {
        // The driver is unregistered already (`NvrsModule` drops it first); once this returns,
        // no PCI bus notifier call runs into the module any more.
        topology::distance::unwatch_bus();
        // Queued VA-space teardowns finish first: they hold VA spaces and allocations.
        helpers::wq_fini();
        vaspace::fini_registry();
        mem::va::fini();
        p2p::pin::fini_registry();
        dmabuf::fini_registry();
        p2p::quarantine::fini();
        mem::fb::fini_retired();
    }
}

impl InPlaceModule for NvrsModule {
    fn init(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        let root = debugfs::Dir::new(MODULE_NAME);
        let registry = gpu::RegistryGuard::init(root.clone());
        let state = ModuleState::init();
        try_pin_init!(Self {
            _state: state?,
            _driver <- Registration::new(MODULE_NAME, module),
            _topology <- root.read_callback_file(c"topology", (), &render_topology),
            _p2p <- root.read_callback_file(c"p2p", (), &render_p2p),
            _bench <- root.read_write_callback_file(
                c"bench_pmm",
                (),
                &render_bench,
                &write_bench
            ),
            _p2p_profile <- root.read_write_callback_file(
                c"p2p_profile",
                (),
                &render_p2p_profile,
                &write_p2p_profile
            ),
            _dev <- MiscDeviceRegistration::register(MiscDeviceOptions { name: c"nvrs" }),
            _registry: registry,
        })
    }
}

/// Whether the `emulated` module parameter is set.
pub(crate) fn emulated() -> bool {
    module_parameters::emulated.value()
}

/// Whether the `bind_nvidia` module parameter is set.
pub(crate) fn bind_nvidia() -> bool {
    module_parameters::bind_nvidia.value()
}

/// The `p2p_topology` module parameter.
pub(crate) fn p2p_topology() -> u32 {
    module_parameters::p2p_topology.value()
}

/// Whether the test builds' `test_skip_tlb_invalidate` is set (never in production builds).
pub(crate) fn test_skip_tlb_invalidate() -> bool {
    #[cfg(nvrs_testing)]
    return module_parameters::test_skip_tlb_invalidate.value();
    #[cfg(not(nvrs_testing))]
    false
}

/// The `test_no_copy_engine` module parameter (test builds; false otherwise).
pub(crate) fn test_no_copy_engine() -> bool {
    #[cfg(nvrs_testing)]
    return module_parameters::test_no_copy_engine.value();
    #[cfg(not(nvrs_testing))]
    false
}

/// The `test_fail_bar1_unmap` module parameter (test builds; 0, none, otherwise).
pub(crate) fn test_fail_bar1_unmap() -> u32 {
    #[cfg(nvrs_testing)]
    return module_parameters::test_fail_bar1_unmap.value();
    #[cfg(not(nvrs_testing))]
    0
}

/// The `dmabuf_revocable_only` module parameter.
pub(crate) fn dmabuf_revocable_only() -> bool {
    module_parameters::dmabuf_revocable_only.value()
}

/// The fault controls the module parameters set on every GPU at probe ([`faults`]).
#[cfg(nvrs_testing)]
pub(crate) struct FaultParams {
    /// `fault_bar1_mib`: the BAR1 budget in MiB (0: none).
    pub(crate) bar1_mib: u32,
    /// `fault_callback_delay_us`: how late free callbacks are called.
    pub(crate) callback_delay_us: u32,
    /// `fault_callback_workqueue`: releases revoke their pins from the workqueue.
    pub(crate) callback_workqueue: bool,
    /// `fault_revoke_every_ms`: the period of revocations (0: none).
    pub(crate) revoke_every_ms: u32,
}

/// The `fault_*` module parameters.
#[cfg(nvrs_testing)]
pub(crate) fn fault_params() -> FaultParams {
    FaultParams {
        bar1_mib: module_parameters::fault_bar1_mib.value(),
        callback_delay_us: module_parameters::fault_callback_delay_us.value(),
        callback_workqueue: module_parameters::fault_callback_workqueue.value(),
        revoke_every_ms: module_parameters::fault_revoke_every_ms.value(),
    }
}

/// Refuses the test parameters with a bound that a value exceeds (the others take any value).
#[cfg(nvrs_testing)]
fn check_test_params() -> Result {
    let faults = fault_params();
    if faults.callback_delay_us > 1_000_000 {
        pr_err!("fault_callback_delay_us: at most 1000000\n");
        return Err(EINVAL);
    }
    if faults.revoke_every_ms > faults::MAX_REVOKE_EVERY_MS {
        pr_err!(
            "fault_revoke_every_ms: at most {}\n",
            faults::MAX_REVOKE_EVERY_MS
        );
        return Err(EINVAL);
    }
    Ok(())
}

/// A production build has no test parameters.
#[cfg(not(nvrs_testing))]
fn check_test_params() -> Result {
    Ok(())
}

/// The `p2pdma` module parameter.
pub(crate) fn p2pdma() -> bool {
    module_parameters::p2pdma.value()
}

/// The `compact_on_alloc` module parameter.
pub(crate) fn compact_on_alloc() -> bool {
    module_parameters::compact_on_alloc.value()
}

/// The `p2p_coalesce` module parameter.
pub(crate) fn p2p_coalesce() -> bool {
    module_parameters::p2p_coalesce.value()
}

/// The `test_delay_points` and `test_delay_ms` module parameters ([`testhook`]).
#[cfg(nvrs_testing)]
pub(crate) fn test_delay() -> (u32, u32) {
    (
        module_parameters::test_delay_points.value(),
        module_parameters::test_delay_ms.value(),
    )
}

/// The most tombstones kept ([`p2p::quarantine`]): the `test_tombs_max` module parameter in
/// test builds, if set.
pub(crate) fn tombs_max() -> usize {
    #[cfg(nvrs_testing)]
    if let Ok(n @ 1..) = usize::try_from(module_parameters::test_tombs_max.value()) {
        return n;
    }
    p2p::quarantine::TOMBS_MAX
}

/// The `peer_device` module parameter.
pub(crate) fn peer_device() -> u32 {
    module_parameters::peer_device.value()
}

fn render_bench(_: &(), f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    #[cfg(nvrs_bench)]
    return bench::render(f);
    #[cfg(not(nvrs_bench))]
    writeln!(
        f,
        "the benchmark is not built in: make NVRS_BENCH=1 (make bench does)"
    )
}

fn write_bench(_: &(), reader: &mut kernel::uaccess::UserSliceReader) -> Result {
    #[cfg(nvrs_bench)]
    return bench::write(reader);
    #[cfg(not(nvrs_bench))]
    {
        let _ = reader;
        Err(ENODEV)
    }
}

fn render_p2p(_: &(), f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    p2p::pin::render(f)?;
    dmabuf::render(f)?;
    mem::va::render(f)
}

fn render_p2p_profile(_: &(), f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    p2p::profile::render(f)
}

fn write_p2p_profile(_: &(), reader: &mut kernel::uaccess::UserSliceReader) -> Result {
    p2p::profile::write(reader)
}

fn render_topology(_: &(), f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    topology::render(f)
}
