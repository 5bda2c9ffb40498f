// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `nvrs_emu_identity`: parsing of the emulated GPU's identity block.

use kernel::prelude::*;

#[kunit_tests(nvrs_emu_identity)]
mod tests {
    use kernel::prelude::*;

    use crate::emu_identity::{
        EmuError,
        EmuIdentity,
        MAGIC,
        SIZE, //
    };

    const MIB: u64 = 1 << 20;

    fn block(fb_offset: u64, fb_size: u64) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        b[6..8].copy_from_slice(&(SIZE as u16).to_le_bytes());
        b[0x0c..0x10].copy_from_slice(&0x180a_1000u32.to_le_bytes());
        b[0x10..0x12].copy_from_slice(&0x2335u16.to_le_bytes());
        b[0x18..0x20].copy_from_slice(&fb_offset.to_le_bytes());
        b[0x20..0x28].copy_from_slice(&fb_size.to_le_bytes());
        b
    }

    #[test]
    fn valid_block() -> Result {
        let id = EmuIdentity::parse(&block(2 * MIB, 254 * MIB), 256 * MIB).map_err(|_| EINVAL)?;
        assert_eq!(id.boot42.0, 0x180a_1000);
        assert_eq!(id.pci_device_id, 0x2335);
        assert_eq!(id.fb_offset, 2 * MIB);
        Ok(())
    }

    #[test]
    fn bad_blocks() {
        let mut b = block(2 * MIB, 254 * MIB);
        b[0] ^= 1;
        assert!(matches!(
            EmuIdentity::parse(&b, 256 * MIB),
            Err(EmuError::BadMagic(_))
        ));
        assert_eq!(
            EmuIdentity::parse(&block(MIB, 2 * MIB), 256 * MIB).err(),
            Some(EmuError::BadFbOffset(MIB))
        );
        assert_eq!(
            EmuIdentity::parse(&block(2 * MIB, 255 * MIB), 256 * MIB).err(),
            Some(EmuError::BadFbSize(255 * MIB))
        );
        assert_eq!(
            EmuIdentity::parse(&block(2 * MIB, u64::MAX), 256 * MIB).err(),
            Some(EmuError::BadFbSize(u64::MAX))
        );
    }
}
