// SPDX-License-Identifier: GPL-2.0

//! The PCI driver: binding, identification and the framebuffer aperture.
//!
//! nvrs matches every NVIDIA function of display class (VGA or 3D controller) but binds one only
//! when the administrator asks ([`crate::binding`]: the function's `driver_override`, or the
//! `bind_nvidia` parameter); installing nvrs never takes a GPU from another driver. With the
//! `emulated` parameter it also binds QEMU `ivshmem-plain` functions and treats each as a GPU
//! whose "registers" are the identity block at the start of its shared memory. A function nvrs
//! does not bind gets `-ENODEV` from probe, silently, and stays free for other drivers.
//!
//! Probe reads `PMC_BOOT_0` / `PMC_BOOT_42` (or the identity block), identifies the chip with
//! [`crate::hwref::ident`], finds the aperture with [`crate::aperture`], registers the GPU in
//! [`crate::gpu`] and creates `debugfs/nvrs/<pci name>/info`. Every failure is one `dev_err!`
//! line and an errno; nothing is left behind.
//!
//! # Removal
//!
//! [`NvrsDriver::unbind`] is the one place that tears a GPU down, top-down: mark its memory
//! gone (nothing new is allocated, pinned or mapped), release its allocations, walking the GPU's
//! own list of them and taking each out of its owner's VA space (CPU mappings removed;
//! [`crate::mem::allocation::release_gpu`]), then revoke and drain the pins left, in work items
//! (free callbacks never run in the unbinding thread; persistent pins lose their DMA mappings),
//! revoke the dma-buf exports, and retire the memory manager if persistent pins or pinned
//! importers still hold memory ([`crate::mem::fb`]). Only then are the driver data, the registry
//! entry and the mappings of the BARs dropped. Lower layers never reach up into this.
//!
//! Before the teardown, unbind stops the GPU's periodic revocation ([`faults`], the fault
//! control `revoke every`). A GPU that fell off the bus (a surprise removal, real or the fault
//! control `remove surprise`) is torn down the same way: its memory is gone already, and
//! nothing of it is written (memory goes back unscrubbed; a later probe of the function
//! scrubs it before any hand-out).

use kernel::{
    debugfs,
    device::Core,
    dma::{
        Device as _,
        DmaMask, //
    },
    io::Io,
    pci::{
        self,
        Class,
        ClassMask,
        Vendor, //
    },
    prelude::*,
    str::CString,
    sync::Arc,
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

#[cfg(nvrs_testing)]
mod faults;
#[cfg(not(nvrs_testing))]
#[path = "driver/faults_off.rs"]
mod faults;

use faults::FaultCtl;

use crate::{
    aperture::{
        self,
        NUM_BARS, //
    },
    bar1::{
        self,
        Bar1Space,
        BAR0_MIN, //
    },
    binding::{
        Kind,
        Policy, //
    },
    ce::ModelCe,
    emu_identity::{
        self,
        EmuError,
        EmuIdentity, //
    },
    gmmu::bar1::SelfTest,
    gpu::{
        self,
        Aperture,
        Backend,
        FbRange,
        GpuInfo,
        NvLinkPeers,
        Registered, //
    },
    hwref::{
        ident::{
            self,
            IdentError,
            Identity,
            PmcBoot0,
            PmcBoot42, //
        },
        ROOT_CHUNK_SIZE,
    },
    mem::{
        fb::{
            FbDebugfs,
            FbMemory, //
        },
        reach::Reach,
    },
    text::Size,
};

/// PCI device id of QEMU's ivshmem (vendor 0x1af4); `ivshmem-plain` and `ivshmem-doorbell` share
/// it.
const IVSHMEM_DEVICE_ID: u32 = 0x1110;

kernel::pci_device_table!(
    PCI_TABLE,
    <NvrsDriver as pci::Driver>::IdInfo,
    [
        // NVIDIA GPUs show up as VGA or 3D controllers.
        (
            pci::DeviceId::from_class_and_vendor(
                Class::DISPLAY_VGA,
                ClassMask::ClassSubclass,
                Vendor::NVIDIA
            ),
            Kind::Nvidia
        ),
        (
            pci::DeviceId::from_class_and_vendor(
                Class::DISPLAY_3D,
                ClassMask::ClassSubclass,
                Vendor::NVIDIA
            ),
            Kind::Nvidia
        ),
        (
            pci::DeviceId::from_id(Vendor::REDHAT_QUMRANET, IVSHMEM_DEVICE_ID),
            Kind::Ivshmem
        ),
    ]
);

/// The driver.
pub(crate) struct NvrsDriver;

/// The mapping nvrs keeps for a bound function: NVIDIA's BAR0 (registers) on hardware, the
/// shared-memory BAR on an emulated GPU. Holding it keeps the region requested for nvrs.
enum Regs<'bound> {
    /// Registers could not be mapped; identified by device id.
    None,
    /// NVIDIA BAR0.
    Hardware {
        /// Held for its `Drop`, which unmaps and releases the region.
        _bar0: pci::Bar<'bound, BAR0_MIN>,
    },
    /// ivshmem-plain shared memory: claimed (managed) but not mapped, so that the aperture
    /// can be write-combined.
    Emulated,
    /// The GPU model: BAR0 is the device-managed mapping of its [`Bar1Space`].
    Model,
}

/// Driver data of a bound GPU.
///
/// Fields drop in declaration order: the debugfs file (which shares `info`) goes first, then
/// the directory and the registry entry, and the register mapping last.
#[pin_data]
pub(crate) struct NvrsGpu<'bound> {
    #[pin]
    _info_file: debugfs::File<Arc<GpuInfo>>,
    #[pin]
    _compact_file: debugfs::File<Arc<GpuInfo>>,
    /// The fault controls (test builds only: `crate::faults`).
    #[pin]
    faults: FaultCtl,
    _pmm_files: Option<Pin<KBox<FbDebugfs>>>,
    _dir: debugfs::Dir,
    _registered: Registered,
    info: Arc<GpuInfo>,
    _regs: Regs<'bound>,
}

impl pci::Driver for NvrsDriver {
    type IdInfo = Kind;
    type Data<'bound> = NvrsGpu<'bound>;
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            let kind = *info.ok_or(ENODEV)?;
            let policy = Policy {
                bind_nvidia: crate::bind_nvidia(),
                emulated: crate::emulated(),
            };
            if !policy.binds(kind, crate::helpers::driver_override_is_nvrs(pdev)) {
                return Err(ENODEV);
            }
            // Managed: disabled again when probe fails or the device is unbound.
            crate::helpers::pcim_enable_device(pdev).map_err(|e| {
                dev_err!(pdev, "cannot enable the device: {e:?}\n");
                ENODEV
            })?;
            let aperture = find_aperture(pdev)?;
            let (probed, regs) = match kind {
                Kind::Nvidia => probe_hardware(pdev, aperture)?,
                Kind::Ivshmem => probe_emulated(pdev, aperture)?,
            };
            let name = CString::try_from(pdev.as_ref().name())?;
            let index = gpu::free_index();
            let mem = match (probed.backend, &probed.bar1) {
                (Backend::Emulated, _) => Some(emulated_memory(pdev, aperture, &probed, index)?),
                // The GPU model: its memory is reached through the BAR1 nvrs programs.
                (Backend::Hardware, Some(bar1)) => Some(model_memory(pdev, bar1, &probed, index)?),
                // The usable framebuffer of a real GPU comes from its firmware, which nvrs
                // does not boot yet: no memory is handed out.
                (Backend::Hardware, None) => None,
            };
            let info = Arc::new(
                GpuInfo {
                    name,
                    backend: probed.backend,
                    ident: probed.ident,
                    boot0: probed.boot0,
                    boot42: probed.boot42,
                    device_id: probed.device_id,
                    aperture,
                    fb: probed.fb,
                    uuid: probed.uuid,
                    emu_index: probed.emu_index,
                    nvlink: probed.nvlink,
                    bar1: probed.bar1,
                    // Informational only: an unknown position is classified as the farthest (SYS).
                    endpoint: crate::helpers::pci_describe(pdev)
                        .unwrap_or_else(|_| crate::topology::link::Endpoint::unknown(0)),
                    pdev: pdev.into(),
                    mem: mem.clone(),
                    index,
                },
                GFP_KERNEL,
            )?;
            let dir = gpu::debugfs_dir(pdev.as_ref().name())?;
            // Removal must be able to retire this GPU's memory without allocating.
            crate::mem::fb::reserve_retired(gpu::count() + 1)?;
            let (chip, chipset) = (info.ident.chipset.name, info.ident.chipset.id);
            let file_data = info.clone();
            let compact_data = info.clone();
            let faults_info = info.clone();
            let p2pdma_mem = mem.clone();
            let fb_range = probed.fb;
            let pmm_files = match &mem {
                Some(m) => Some(KBox::pin_init(FbDebugfs::new(&dir, m), GFP_KERNEL)?),
                None => None,
            };
            Ok(try_pin_init!(NvrsGpu {
                _info_file <- dir.read_callback_file(c"info", file_data, &render_info),
                _compact_file <- dir.write_callback_file(c"compact", compact_data, &write_compact),
                faults <- FaultCtl::new(faults_info, &dir),
                _pmm_files: pmm_files,
                _dir: dir,
                // Registered last of what can fail: once allocations can reach the GPU, probe
                // succeeds, and `unbind` tears it down.
                _registered: Registered::new(info.clone())?,
                info,
                _regs: regs,
                // Only once everything is in place: a failed probe prints no success line.
                _: {
                    // Last: the GPU's memory as struct pages for storage DMA.
                    if let Some(m) = &p2pdma_mem {
                        publish_p2pdma(pdev, aperture, fb_range, m);
                    }
                    dev_info!(
                        pdev,
                        "{} (chipset {:#x}), {} aperture\n",
                        chip,
                        chipset,
                        Size(aperture.len)
                    );
                },
            }))
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        // No periodic revocation from here on: the teardown below ends every pin itself.
        this.faults.stop();
        Self::teardown(pdev, &this.info);
    }
}

impl NvrsDriver {
    /// Tears the GPU's memory down; see the module documentation.
    fn teardown(pdev: &pci::Device<Core<'_>>, gpu: &GpuInfo) {
        let Some(mem) = &gpu.mem else {
            return;
        };
        if crate::helpers::pci_is_disconnected(pdev) {
            dev_warn!(
                pdev,
                "fell off the bus: revoking its pins; its memory goes back unscrubbed, to be scrubbed before any later hand-out\n"
            );
        }
        // Waits for allocations, releases and scrubbing in flight; none start afterwards.
        // Releases blocked in a consumer's free callback are waited for at most
        // `REMOVAL_WAIT` in all (see `FbMemory::wait_idle`).
        let since = Instant::<Monotonic>::now();
        mem.set_gone_and_wait(since);
        crate::testhook::delay(crate::testhook::Point::RemovalWalk);
        // The block layer's hold on the struct pages of every allocation released here is
        // waited for until one deadline, not one per allocation.
        let pages_until = since + Delta::from_millis(crate::mem::p2pdma::FREE_WAIT_MS.into());
        crate::mem::allocation::release_gpu(mem, pages_until);
        // Releases that started before the walk above (or that the walk found started) finish
        // first: until then their user mappings may still reach the aperture, and their
        // struct pages be read. Waited for even if the first wait gave up: a release that
        // started since then is not blocked on a consumer.
        mem.wait_idle(since);
        // The pins left: revoked in work items and waited for, within the same bound.
        let stuck = crate::p2p::pin::drain_gpu(mem, since);
        if let Some(stuck) = &stuck {
            crate::testhook::delay(crate::testhook::Point::RemovalReport);
            if let Some(h) = &stuck.first {
                dev_warn!(
                    pdev,
                    "gave up after {} ms on {} free callbacks, first of pin va {:#x} len {:#x} pid {}; its memory stays retired until the callback returns\n",
                    crate::mem::fb::REMOVAL_WAIT.as_millis(),
                    stuck.count,
                    h.va,
                    h.len,
                    h.pid
                );
            }
        }
        // The device keeps decoding BAR1 after the unbind: nothing may stay mapped there, not
        // even for the pins left (persistent ones lose BAR1 as they lost their DMA mappings).
        if let Some(b) = &gpu.bar1 {
            if let Err(e) = b.clear_all() {
                dev_err!(
                    pdev,
                    "cannot clear BAR1's page tables ({e:?}); BAR1 may reach this GPU's memory until it is bound again\n"
                );
            }
        }
        // Its DMA allocations go with the binding, though the memory manager may stay retired.
        if let Some(ce) = mem.reach.ce() {
            ce.shutdown();
        }
        let mappings = crate::dmabuf::revoke_gpu(mem);
        if mappings != 0 {
            dev_warn!(
                pdev,
                "{} dma-buf mappings of pinned importers cannot be revoked and stay; their memory is not handed out again until they are released\n",
                mappings
            );
        }
        let stuck_pins = stuck.map_or(0, |s| s.count);
        let pins = crate::p2p::pin::count_on(mem)
            .saturating_sub(usize::try_from(stuck_pins).unwrap_or(usize::MAX));
        if pins != 0 {
            dev_warn!(
                pdev,
                "{} persistent pins hold {} of GPU memory past removal; it is not handed out again until they are put\n",
                pins,
                Size(mem.held_bytes())
            );
        }
        // Memory held back behind I/O that never finished is free once the unbind returns: the
        // kernel frees the struct pages only after every one of them is (`p2pdma_unregister`).
        mem.sub_held(mem.p2pdma.stuck_bytes());
        if mem.held_bytes() != 0 {
            crate::mem::fb::retire(mem.clone());
        }
        if mem.p2pdma.is_published() {
            // A release still waiting for the block layer reads the pages until it is done
            // (within `mem::p2pdma::FREE_WAIT_MS`), even if the waits above gave up.
            mem.p2pdma.wait_drops();
            let (phys, len) = mem.p2pdma.range();
            // SAFETY: Every allocation was released above, and a release lets go of its struct
            // pages (`mem::p2pdma`), so nvrs holds none; the range is what `publish_p2pdma`
            // published.
            unsafe { crate::helpers::p2pdma_unregister(pdev, phys, len) };
        }
    }
}

/// The bytes of GPU memory given struct pages: what the memory manager manages, whole 2 MiB
/// roots.
fn p2pdma_len(fb: FbRange) -> u64 {
    fb.size - fb.size % ROOT_CHUNK_SIZE
}

/// Gives the GPU's memory struct pages in the kernel's P2PDMA, for `NVRS_ALLOC_P2PDMA`
/// allocations ([`crate::mem::p2pdma`]), unless the `p2pdma` parameter is off: the aperture's
/// memory on an emulated GPU, BAR1 on an NVIDIA GPU (an allocation maps itself at a run of BAR1
/// for its life, and its pages are that run's). A failure is one dmesg line; the GPU works
/// without them.
fn publish_p2pdma(pdev: &pci::Device<Core<'_>>, aperture: Aperture, fb: FbRange, mem: &FbMemory) {
    if !crate::p2pdma() {
        return;
    }
    // (BAR, offset in it, CPU physical address, bytes).
    let (bar, offset, phys, len) = match mem.reach.bar1() {
        // The model's aperture is its BAR1.
        Some(b) => (aperture.bar, 0, b.phys(), b.layout().size()),
        None => (
            aperture.bar,
            fb.offset,
            aperture.phys + fb.offset,
            p2pdma_len(fb),
        ),
    };
    // Struct pages exist in 2 MiB subsections; the memory manager uses whole 2 MiB roots.
    if phys % ROOT_CHUNK_SIZE != 0 || len == 0 {
        dev_warn!(
            pdev,
            "no P2PDMA provider: the range at {:#x} does not start on a 2 MiB boundary\n",
            phys
        );
        return;
    }
    // A user mapping of the pages is write-combined; the kernel's map of them must agree.
    if !mem.p2pdma.write_combined() {
        dev_warn!(
            pdev,
            "no P2PDMA provider: the aperture is not reserved write-combined\n"
        );
        return;
    }
    match crate::helpers::p2pdma_register(pdev, bar, offset, len) {
        Ok(()) => {
            mem.p2pdma.publish(phys, len);
            dev_info!(
                pdev,
                "P2PDMA provider: {} of {} as struct pages\n",
                Size(len),
                if mem.reach.bar1().is_some() {
                    "BAR1"
                } else {
                    "GPU memory"
                }
            );
        }
        Err(e) => dev_warn!(
            pdev,
            "no P2PDMA provider ({e:?}): NVRS_ALLOC_P2PDMA allocations fail with EOPNOTSUPP\n"
        ),
    }
}

/// The memory manager of a GPU being probed, reached as `reach` says, refusing allocations
/// while memory it overlaps is still held by pins from before an earlier removal (one line
/// says so). A failure is one line too.
fn new_memory(
    pdev: &pci::Device<Core<'_>>,
    probed: &Probed,
    index: u32,
    reach: Reach,
) -> Result<Arc<FbMemory>> {
    let (mem, held) = crate::mem::fb::new_blocked(
        probed.ident.table,
        reach,
        probed.fb.offset,
        probed.fb.size,
        index,
        probed.uuid,
    )
    .map_err(|e| {
        dev_err!(pdev, "cannot set up the memory manager: {e:?}\n");
        if e == ENOMEM {
            ENOMEM
        } else {
            ENODEV
        }
    })?;
    if held != 0 {
        dev_warn!(
            pdev,
            "{} of this GPU's memory is still pinned from before its removal; allocations fail with EBUSY until those pins are put\n",
            Size(held)
        );
    }
    Ok(mem)
}

/// Sets up the memory manager of the GPU model, over its VRAM below BAR1's tables, reached
/// through `bar1` ([`crate::mem::reach`]).
fn model_memory(
    pdev: &pci::Device<Core<'_>>,
    bar1: &Arc<Bar1Space>,
    probed: &Probed,
    index: u32,
) -> Result<Arc<FbMemory>> {
    // The copy engine DMAs its semaphore (and system-memory transfers) through the IOMMU.
    // SAFETY: No DMA mapping of the device exists yet (probe, before the engine is used).
    unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<47>()) }
        .inspect_err(|e| dev_err!(pdev, "GPU model: no 47-bit DMA mask: {e:?}\n"))?;
    pdev.set_master();
    // Without a working engine the CPU scrubs through BAR1 (one line said why).
    let ce = if crate::test_no_copy_engine() {
        None
    } else {
        ModelCe::new(pdev, bar1.clone()).ok()
    };
    let mem = new_memory(
        pdev,
        probed,
        index,
        Reach::Bar1 {
            bar1: bar1.clone(),
            ce,
        },
    )?;
    // CPU mappings go through BAR1; without it they fall back to uncached.
    if let Err(e) = crate::helpers::aperture_wc(pdev, bar1.phys(), bar1.layout().size()) {
        dev_warn!(
            pdev,
            "cannot reserve BAR1 write-combined ({e:?}); CPU mappings are uncached\n"
        );
    } else {
        // As for an emulated GPU's aperture (`publish_p2pdma`).
        mem.p2pdma.set_write_combined();
    }
    Ok(mem)
}

/// Sets up the memory manager of an emulated GPU, refusing allocations while memory it
/// overlaps is still held by pins from before an earlier removal, and reserves its aperture
/// write-combined.
fn emulated_memory(
    pdev: &pci::Device<Core<'_>>,
    aperture: Aperture,
    probed: &Probed,
    index: u32,
) -> Result<Arc<FbMemory>> {
    let phys = aperture.phys + probed.fb.offset;
    let mem = new_memory(
        pdev,
        probed,
        index,
        Reach::Flat {
            base: aperture.phys,
        },
    )?;
    // Without it, user mappings fall back to uncached; they still work.
    if let Err(e) = crate::helpers::aperture_wc(pdev, phys, probed.fb.size) {
        dev_warn!(
            pdev,
            "cannot reserve the aperture write-combined ({e:?}); CPU mappings are uncached\n"
        );
    } else {
        // The struct pages of P2PDMA take the aperture's memory type only if it is reserved
        // write-combined first (`publish_p2pdma`).
        mem.p2pdma.set_write_combined();
    }
    Ok(mem)
}

fn render_info(info: &Arc<GpuInfo>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    info.render(f)
}

/// debugfs `compact`: writing `N` compacts the GPU's memory until `N` adjacent 2 MiB roots are
/// free (as an allocation that failed for fragmentation does); the result goes to the kernel
/// log and `pmm/stats`. `-ENOMEM` if no plan exists, `-EINVAL` for anything but a number.
fn write_compact(info: &Arc<GpuInfo>, reader: &mut kernel::uaccess::UserSliceReader) -> Result {
    let mut buf = [0u8; 16];
    let text = crate::text::written_text(reader, &mut buf)?;
    let roots: u32 = text.parse().map_err(|_| EINVAL)?;
    if roots == 0 {
        return Err(EINVAL);
    }
    let mem = info.mem.as_ref().ok_or(ENODEV)?;
    let r = crate::mem::compact::compact(mem, crate::pmm::compact::Goal::Contiguous(roots))?;
    dev_info!(
        info.pdev.as_ref(),
        "compaction for {} free roots: moved {} of {} planned chunks, {}\n",
        roots,
        r.moved,
        r.planned,
        Size(r.bytes)
    );
    Ok(())
}

/// What the backend-specific part of probe found.
struct Probed {
    backend: Backend,
    ident: Identity,
    boot0: PmcBoot0,
    boot42: PmcBoot42,
    device_id: u16,
    fb: FbRange,
    uuid: [u8; 16],
    emu_index: Option<u8>,
    nvlink: NvLinkPeers,
    bar1: Option<Arc<Bar1Space>>,
}

/// Finds the framebuffer aperture: the second implemented memory BAR.
fn find_aperture(pdev: &pci::Device<Core<'_>>) -> Result<Aperture> {
    let config = pdev.config_space();
    let mut header = [0u8; aperture::BAR_OFFSET + 4 * NUM_BARS];
    for (i, dword) in header.chunks_exact_mut(4).enumerate() {
        dword.copy_from_slice(&config.try_read32(4 * i)?.to_le_bytes());
    }
    let regs = aperture::bar_regs(&header).ok_or(EINVAL)?;
    let mut lens = [0u64; NUM_BARS];
    for (i, len) in lens.iter_mut().enumerate() {
        *len = pdev.resource_len(u32::try_from(i)?)?;
    }
    let bar = aperture::framebuffer_bar(&aperture::decode_bars(&regs), &lens)
        .ok_or(ENODEV)
        .inspect_err(|_| dev_err!(pdev, "no framebuffer aperture among the BARs\n"))?;
    Ok(Aperture {
        bar,
        phys: pdev.resource_start(bar)?,
        len: pdev.resource_len(bar)?,
    })
}

fn ident_error(pdev: &pci::Device<Core<'_>>, e: IdentError) -> Error {
    match e {
        IdentError::OffTheBus => {
            dev_err!(pdev, "boot registers read all ones: GPU is off the bus\n")
        }
        IdentError::NoId => dev_err!(pdev, "boot registers read zero: cannot identify the GPU\n"),
        IdentError::UnknownArchitecture(a) => {
            dev_err!(pdev, "unsupported GPU architecture {a:#x}\n")
        }
        IdentError::UnknownChipset(c) => dev_err!(pdev, "unsupported GPU chipset {c:#x}\n"),
        IdentError::UnknownDeviceId(d) => dev_err!(pdev, "unsupported GPU device id {d:#06x}\n"),
    }
    ENODEV
}

/// Probes a real NVIDIA GPU: reads the boot registers from BAR0, falling back on the PCI device
/// id when BAR0 cannot be mapped.
fn probe_hardware<'bound>(
    pdev: &'bound pci::Device<Core<'_>>,
    aperture: Aperture,
) -> Result<(Probed, Regs<'bound>)> {
    let device_id = pdev.device_id();
    let (ident, boot0, boot42, bar1, regs) =
        match pdev.iomap_region_sized::<BAR0_MIN>(0, c"nvrs/bar0") {
            Ok(bar) => {
                let boot0 = PmcBoot0(bar.read32(PmcBoot0::OFFSET));
                let boot42 = PmcBoot42(bar.read32(PmcBoot42::OFFSET));
                let ident = ident::identify(boot0, boot42).map_err(|e| ident_error(pdev, e))?;
                // BAR1's page tables belong to the firmware on real GPUs; nvrs writes them only on
                // the test-bed's GPU model.
                if bar1::is_model(&bar) {
                    let space = model_bar1(pdev, bar, &ident, aperture.bar)?;
                    (ident, boot0, boot42, Some(space), Regs::Model)
                } else {
                    (ident, boot0, boot42, None, Regs::Hardware { _bar0: bar })
                }
            }
            Err(_) => {
                let (ident, coherent) =
                    ident::identify_by_device_id(device_id).map_err(|e| ident_error(pdev, e))?;
                if coherent {
                    dev_err!(pdev, "coherent (C2C) GPUs without BAR1 are not supported\n");
                    return Err(ENODEV);
                }
                (ident, PmcBoot0(0), PmcBoot42(0), None, Regs::None)
            }
        };
    let probed = Probed {
        backend: Backend::Hardware,
        ident,
        boot0,
        boot42,
        device_id,
        // The model's VRAM below BAR1's tables. TODO: on hardware the usable framebuffer
        // comes from the GPU's firmware once nvrs boots GSP; until then the whole aperture is
        // described and nothing hands it out.
        fb: FbRange {
            offset: 0,
            size: bar1.as_ref().map_or(aperture.len, |b| b.usable()),
        },
        uuid: [0; 16],
        emu_index: None,
        nvlink: NvLinkPeers::default(),
        bar1,
    };
    Ok((probed, regs))
}

/// Sets up the GPU model's BAR1 through page tables and self-tests it; a BAR1 that does not
/// translate as written is not used (one dmesg line).
fn model_bar1(
    pdev: &pci::Device<Core<'_>>,
    bar0: pci::Bar<'_, BAR0_MIN>,
    ident: &Identity,
    aperture: u32,
) -> Result<Arc<Bar1Space>> {
    let space = Bar1Space::new(pdev, bar0, ident, aperture).inspect_err(|e| {
        // The layout's refusals said why already.
        if *e != ENODEV {
            dev_err!(pdev, "GPU model: cannot set up BAR1: {e:?}\n");
        }
    })?;
    match bar1::self_test(pdev, &space, aperture)? {
        SelfTest::Passed => Ok(space),
        SelfTest::NotTranslated { got, want } => {
            dev_err!(
                pdev,
                "GPU model: BAR1 self-test read {got:#010x} through a page holding {want:#010x}\n"
            );
            Err(ENODEV)
        }
        SelfTest::StaleAfterUnmap { got } => {
            dev_err!(
                pdev,
                "GPU model: BAR1 self-test read {got:#010x} after the unmap and invalidate\n"
            );
            Err(ENODEV)
        }
    }
}

fn emu_error(pdev: &pci::Device<Core<'_>>, e: EmuError) -> Error {
    match e {
        EmuError::BadMagic(m) => {
            dev_err!(pdev, "no emulated-GPU identity block (magic {m:#010x})\n")
        }
        EmuError::BadVersion(v) => dev_err!(
            pdev,
            "emulated-GPU identity block version {v} unsupported\n"
        ),
        EmuError::BadSize(s) => {
            dev_err!(pdev, "emulated-GPU identity block too small ({s} bytes)\n")
        }
        EmuError::BadFbOffset(o) => dev_err!(pdev, "emulated-GPU fb_offset {o:#x} invalid\n"),
        EmuError::BadFbSize(s) => dev_err!(pdev, "emulated-GPU fb_size {s:#x} exceeds the BAR\n"),
        EmuError::BadIndex(i) => dev_err!(pdev, "emulated-GPU index {i} out of range\n"),
        EmuError::Reserved => dev_err!(pdev, "emulated-GPU identity block reserved bytes set\n"),
    }
    // Not a device nvrs can drive; -ENODEV keeps the driver core from adding a second line.
    ENODEV
}

/// Probes an emulated GPU: reads and validates the identity block, then identifies the chip from
/// the boot-register values it carries.
fn probe_emulated<'bound>(
    pdev: &'bound pci::Device<Core<'_>>,
    aperture: Aperture,
) -> Result<(Probed, Regs<'bound>)> {
    if aperture.bar != emu_identity::BAR {
        dev_err!(
            pdev,
            "ivshmem shared memory is not at BAR{}\n",
            emu_identity::BAR
        );
        return Err(ENODEV);
    }
    let mut block = [0u8; emu_identity::SIZE];
    {
        // Mapped (uncached) only while the block is read: a standing mapping of the whole BAR
        // would keep the aperture from being reserved write-combined.
        let bar = pdev
            .iomap_region_sized::<{ emu_identity::SIZE }>(aperture.bar, c"nvrs/aperture")
            .map_err(|e| {
                dev_err!(pdev, "cannot map the shared memory: {e:?}\n");
                ENODEV
            })?;
        for (i, chunk) in block.chunks_exact_mut(4).enumerate() {
            chunk.copy_from_slice(&bar.try_read32(4 * i)?.to_le_bytes());
        }
    }
    crate::helpers::pcim_request_region(pdev, aperture.bar, c"nvrs/aperture").map_err(|e| {
        dev_err!(pdev, "cannot claim the shared memory: {e:?}\n");
        ENODEV
    })?;
    let id = EmuIdentity::parse(&block, aperture.len).map_err(|e| emu_error(pdev, e))?;
    let ident = ident::identify(id.boot0, id.boot42).map_err(|e| ident_error(pdev, e))?;
    let probed = Probed {
        backend: Backend::Emulated,
        ident,
        boot0: id.boot0,
        boot42: id.boot42,
        device_id: id.pci_device_id,
        fb: FbRange {
            offset: id.fb_offset,
            size: id.fb_size,
        },
        uuid: id.uuid,
        emu_index: Some(id.gpu_index),
        nvlink: NvLinkPeers {
            peers: id.nvlink_peers,
            links_per_peer: id.nvlinks_per_peer,
        },
        bar1: None,
    };
    Ok((probed, Regs::Emulated))
}
