// SPDX-License-Identifier: GPL-2.0

//! The identity block of an emulated GPU.
//!
//! An emulated GPU is a QEMU `ivshmem-plain` device: a PCI function whose BAR2 is a shared-memory
//! object the host can also read. It has no registers, so the test-bed writes a 64-byte identity
//! block at offset 0 of that memory, holding the `PMC_BOOT_0` / `PMC_BOOT_42` values of the chip
//! it impersonates, the NVIDIA PCI device id, where GPU memory starts and how large it is, its
//! NVLink peers and a UUID. nvrs identifies the chip from those register values exactly as for
//! real hardware.
//!
//! The format is specified in `include/nvrs_emu_identity.h`; the offsets below follow it.
//! This module is pure (no `kernel::`), so it is also tested on the host.

use crate::hwref::{
    ident::{PmcBoot0, PmcBoot42},
    ROOT_CHUNK_SIZE,
};

/// `NVRS_EMU_MAGIC`: the bytes "NVRS" read as a little-endian `u32`.
pub(crate) const MAGIC: u32 = 0x5352_564e;
/// `NVRS_EMU_VERSION`.
pub(crate) const VERSION: u16 = 1;
/// `sizeof(struct nvrs_emu_identity)`.
pub(crate) const SIZE: usize = 64;
/// `NVRS_EMU_BAR`: the ivshmem-plain BAR holding the shared memory.
pub(crate) const BAR: u32 = 2;
/// Most emulated GPUs one VM can describe (`nvlink_peers` is a 32-bit mask).
pub(crate) const MAX_GPUS: u8 = 32;

/// Why an identity block was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum EmuError {
    /// The magic is wrong: the memory holds no identity block.
    BadMagic(u32),
    /// A version this build does not understand.
    BadVersion(u16),
    /// The declared size is smaller than the block.
    BadSize(u16),
    /// `fb_offset` is not a multiple of the root chunk, or lies inside the block.
    BadFbOffset(u64),
    /// `fb_offset + fb_size` is zero-sized or runs past the BAR.
    BadFbSize(u64),
    /// `gpu_index` is not below [`MAX_GPUS`].
    BadIndex(u8),
    /// Reserved bytes are not zero.
    Reserved,
}

/// A validated identity block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct EmuIdentity {
    /// The impersonated chip's `PMC_BOOT_0`.
    pub(crate) boot0: PmcBoot0,
    /// The impersonated chip's `PMC_BOOT_42`.
    pub(crate) boot42: PmcBoot42,
    /// The impersonated NVIDIA PCI device id.
    pub(crate) pci_device_id: u16,
    /// Index of this GPU among the VM's emulated GPUs.
    pub(crate) gpu_index: u8,
    /// NVLinks to each peer in `nvlink_peers`.
    pub(crate) nvlinks_per_peer: u8,
    /// Bit `i`: NVLinks to emulated GPU `i`.
    pub(crate) nvlink_peers: u32,
    /// Start of GPU memory within the BAR.
    pub(crate) fb_offset: u64,
    /// Bytes of GPU memory from `fb_offset`.
    pub(crate) fb_size: u64,
    /// The GPU UUID.
    pub(crate) uuid: [u8; 16],
}

fn le16(b: &[u8; SIZE], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn le32(b: &[u8; SIZE], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn le64(b: &[u8; SIZE], off: usize) -> u64 {
    u64::from(le32(b, off)) | (u64::from(le32(b, off + 4)) << 32)
}

impl EmuIdentity {
    /// Parses and validates the block read from the first [`SIZE`] bytes of a BAR of `bar_len`
    /// bytes.
    pub(crate) fn parse(b: &[u8; SIZE], bar_len: u64) -> Result<Self, EmuError> {
        let magic = le32(b, 0x00);
        if magic != MAGIC {
            return Err(EmuError::BadMagic(magic));
        }
        let version = le16(b, 0x04);
        if version != VERSION {
            return Err(EmuError::BadVersion(version));
        }
        let size = le16(b, 0x06);
        if usize::from(size) < SIZE {
            return Err(EmuError::BadSize(size));
        }
        let fb_offset = le64(b, 0x18);
        if fb_offset == 0 || fb_offset % ROOT_CHUNK_SIZE != 0 {
            return Err(EmuError::BadFbOffset(fb_offset));
        }
        let fb_size = le64(b, 0x20);
        match fb_offset.checked_add(fb_size) {
            Some(end) if fb_size != 0 && end <= bar_len => {}
            _ => return Err(EmuError::BadFbSize(fb_size)),
        }
        let gpu_index = b[0x12];
        if gpu_index >= MAX_GPUS {
            return Err(EmuError::BadIndex(gpu_index));
        }
        if b[0x38..SIZE].iter().any(|&x| x != 0) {
            return Err(EmuError::Reserved);
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[0x28..0x38]);
        Ok(Self {
            boot0: PmcBoot0(le32(b, 0x08)),
            boot42: PmcBoot42(le32(b, 0x0c)),
            pci_device_id: le16(b, 0x10),
            gpu_index,
            nvlinks_per_peer: b[0x13],
            nvlink_peers: le32(b, 0x14),
            fb_offset,
            fb_size,
            uuid,
        })
    }
}
