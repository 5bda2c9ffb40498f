// SPDX-License-Identifier: GPL-2.0

//! `/dev/nvrs`: GPU memory allocation for user space (`include/uapi/nvrs.h`).
//!
//! Every open file of a process shares that process's [`VaSpace`]. The ioctls list GPUs,
//! allocate and free GPU memory; `mmap` with the allocation's VA as the offset maps (a 64 KiB
//! aligned part of) it for the CPU through the aperture, write-combined.
//!
//! Releasing an allocation (free, process exit, GPU removal) removes its user mappings first:
//! later accesses through them fault with `SIGBUS`, so memory is never handed to someone else
//! while a stale CPU mapping can still reach it. `mmap` offsets are GPU VAs, unique across
//! processes, so removing the offsets of one allocation touches no other mapping.
//!
//! The node is created mode 0600 (root only); see the UAPI header for the access policy.

use kernel::{
    fs::File,
    ioctl::{
        _IOR,
        _IOW,
        _IOWR, //
    },
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    mm::virt::VmaNew,
    prelude::*,
    sync::Arc,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use crate::{
    gpu, helpers,
    hwref::P2P_PAGE_SIZE,
    vaspace::{
        range::Span,
        VaSpace, //
    },
};

const MAGIC: u32 = 0xE5;

/// `struct nvrs_gpu_info`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GpuInfoArg {
    index: u32,
    chipset: u32,
    fb_size: u64,
    fb_free: u64,
    uuid: [u8; 16],
    name: [u8; 32],
    chip: [u8; 16],
}

/// `struct nvrs_alloc`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AllocArg {
    gpu: u32,
    flags: u32,
    size: u64,
    va: u64,
}

/// `struct nvrs_free`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FreeArg {
    va: u64,
}

// SAFETY: Plain integers and byte arrays, no padding (checked below), any bit pattern is valid.
unsafe impl FromBytes for GpuInfoArg {}
// SAFETY: As above.
unsafe impl AsBytes for GpuInfoArg {}
// SAFETY: As above.
unsafe impl FromBytes for AllocArg {}
// SAFETY: As above.
unsafe impl AsBytes for AllocArg {}
// SAFETY: As above.
unsafe impl FromBytes for FreeArg {}
// SAFETY: As above.
unsafe impl AsBytes for FreeArg {}

const _: () = assert!(core::mem::size_of::<GpuInfoArg>() == 88);
const _: () = assert!(core::mem::size_of::<AllocArg>() == 24);
const _: () = assert!(core::mem::size_of::<FreeArg>() == 8);

const GPU_COUNT: u32 = _IOR::<u32>(MAGIC, 0);
const GPU_INFO: u32 = _IOWR::<GpuInfoArg>(MAGIC, 1);
const ALLOC: u32 = _IOWR::<AllocArg>(MAGIC, 2);
const FREE: u32 = _IOW::<FreeArg>(MAGIC, 3);

/// `NVRS_ALLOC_CONTIGUOUS`.
const ALLOC_CONTIGUOUS: u32 = 1 << 0;
/// `NVRS_ALLOC_ZERO`.
const ALLOC_ZERO: u32 = 1 << 1;

/// An open `/dev/nvrs`.
pub(crate) struct NvrsFile {
    vs: Arc<VaSpace>,
}

fn copy_str(dst: &mut [u8], src: &str) {
    let room = dst.len().saturating_sub(1);
    for (d, s) in dst.iter_mut().zip(src.bytes().take(room)) {
        *d = s;
    }
}

impl NvrsFile {
    fn gpu_info(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<GpuInfoArg>())
                .reader_writer();
        let mut a: GpuInfoArg = r.read()?;
        let g = gpu::by_index(a.index).ok_or(ENODEV)?;
        let index = a.index;
        a = GpuInfoArg {
            index,
            chipset: g.ident.chipset.id.into(),
            ..Default::default()
        };
        if let Some(mem) = &g.mem {
            a.fb_size = mem.total_bytes();
            a.fb_free = mem.free_bytes();
        }
        a.uuid = g.uuid;
        copy_str(&mut a.name, g.name.to_str().unwrap_or(""));
        copy_str(&mut a.chip, g.ident.chipset.name);
        w.write(&a)?;
        Ok(0)
    }

    fn alloc(&self, arg: usize) -> Result<isize> {
        let (mut r, mut w) =
            UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<AllocArg>())
                .reader_writer();
        let mut a: AllocArg = r.read()?;
        if a.flags & !(ALLOC_CONTIGUOUS | ALLOC_ZERO) != 0 || a.va != 0 {
            return Err(EINVAL);
        }
        let g = gpu::by_index(a.gpu).ok_or(ENODEV)?;
        let span = self.vs.alloc(
            g,
            a.size,
            a.flags & ALLOC_CONTIGUOUS != 0,
            a.flags & ALLOC_ZERO != 0,
        )?;
        a.va = span.start();
        if let Err(e) = w.write(&a) {
            // The caller cannot learn the VA: do not leak the memory.
            let _ = self.vs.free(span.start());
            return Err(e);
        }
        Ok(0)
    }

    fn free(&self, arg: usize) -> Result<isize> {
        let a: FreeArg = UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<FreeArg>())
            .reader()
            .read()?;
        self.vs.free(a.va)?;
        Ok(0)
    }
}

#[vtable]
impl MiscDevice for NvrsFile {
    type Ptr = KBox<Self>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        let vs = VaSpace::open()?;
        KBox::new(Self { vs }, GFP_KERNEL).map_err(Into::into)
    }

    fn release(device: KBox<Self>, _file: &File) {
        device.vs.close();
    }

    fn ioctl(me: &NvrsFile, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        match cmd {
            GPU_COUNT => {
                let n = u32::try_from(gpu::count()).unwrap_or(u32::MAX);
                UserSlice::new(UserPtr::from_addr(arg), 4)
                    .writer()
                    .write(&n)?;
                Ok(0)
            }
            GPU_INFO => me.gpu_info(arg),
            ALLOC => me.alloc(arg),
            FREE => me.free(arg),
            _ => Err(ENOTTY),
        }
    }

    fn mmap(me: &NvrsFile, _file: &File, vma: &VmaNew) -> Result {
        let va = helpers::vma_offset(vma);
        let len = u64::try_from(vma.end() - vma.start())?;
        if va % P2P_PAGE_SIZE != 0 || len % P2P_PAGE_SIZE != 0 {
            return Err(EINVAL);
        }
        // A private mapping would get copy-on-write semantics over device memory.
        if vma.flags() & kernel::mm::virt::flags::SHARED == 0 {
            return Err(EINVAL);
        }
        let want = Span::new(va, len).ok_or(EINVAL)?;
        let a = me.vs.find(&want).ok_or(ENOENT)?;
        // Held while mapping: a release waits for it, then removes what was mapped, or this
        // sees the release and refuses.
        let mut st = a.state.lock();
        if st.released || a.backing.mem.is_gone() {
            return Err(ENOENT);
        }
        let inode = helpers::MappedInode::of(vma);
        if !st.mapped.iter().any(|m| m.same(&inode)) {
            st.mapped.push(inode, GFP_KERNEL)?;
        }
        vma.set_io();
        vma.set_dontexpand();
        vma.set_dontcopy();
        let phys = a.gpu.aperture.phys;
        let offset = va - a.span.start();
        let mut done = 0u64;
        while done < len {
            let fb = a.fb_offset_at(offset + done).ok_or(EINVAL)?;
            let user = vma.start() + usize::try_from(done)?;
            helpers::io_remap_wc(vma, user, phys + fb, usize::try_from(P2P_PAGE_SIZE)?)?;
            done += P2P_PAGE_SIZE;
        }
        Ok(())
    }
}
