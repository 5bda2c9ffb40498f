// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `nvrs_ident`: identification and table consistency inside the kernel.

use kernel::prelude::*;

#[kunit_tests(nvrs_ident)]
mod tests {
    use kernel::prelude::*;

    use crate::hwref::{
        ident::{
            boot0_for, boot42_for, identify, identify_by_device_id, IdentError, IdentSource,
            PmcBoot0, PmcBoot42, Revision,
        },
        Architecture,
        P2P_PAGE_SIZE,
        ROOT_CHUNK_SIZE,
        SZ_4K,
        TABLES, //
    };

    const A1: Revision = Revision {
        major: 0xa,
        minor: 1,
    };

    #[test]
    fn gh100_from_boot42() -> Result {
        let id = identify(boot0_for(0x180, A1), boot42_for(0x180, A1)).map_err(|_| EINVAL)?;
        assert_eq!(id.chipset.name, "GH100");
        assert_eq!(id.table.arch, Architecture::Hopper);
        assert_eq!(id.source, IdentSource::Boot42);
        assert_eq!(id.revision, Some(A1));
        let b42 = PmcBoot42(0x180a_1000);
        assert_eq!(
            (b42.architecture(), b42.implementation(), b42.chip_id()),
            (0x18, 0, 0x180)
        );
        Ok(())
    }

    #[test]
    fn every_chipset_round_trips() {
        for t in TABLES.iter() {
            for c in t.chipsets {
                let by42 = identify(PmcBoot0(0x1), boot42_for(c.id, A1));
                assert!(matches!(by42, Ok(i) if i.chipset.id == c.id));
                let by0 = identify(boot0_for(c.id, A1), PmcBoot42(0));
                assert!(
                    matches!(by0, Ok(i) if i.chipset.id == c.id && i.source == IdentSource::Boot0)
                );
            }
        }
    }

    #[test]
    fn malformed_registers_are_refused() {
        assert_eq!(
            identify(PmcBoot0(u32::MAX), PmcBoot42(0x1800_0000)).err(),
            Some(IdentError::OffTheBus)
        );
        assert_eq!(
            identify(PmcBoot0(0), PmcBoot42(u32::MAX)).err(),
            Some(IdentError::OffTheBus)
        );
        assert_eq!(
            identify(PmcBoot0(0), PmcBoot42(0)).err(),
            Some(IdentError::NoId)
        );
        // Kepler (0x0e... in BOOT_42 terms 0x10) is older than any table.
        assert_eq!(
            identify(PmcBoot0(0), boot42_for(0x0f0, A1)).err(),
            Some(IdentError::UnknownArchitecture(0x0f))
        );
        assert_eq!(
            identify(PmcBoot0(0), boot42_for(0x17f, A1)).err(),
            Some(IdentError::UnknownChipset(0x17f))
        );
    }

    #[test]
    fn h200_device_id_fallback() -> Result {
        let (id, coherent) = identify_by_device_id(0x2335).map_err(|_| EINVAL)?;
        assert_eq!(id.chipset.name, "GH100");
        assert!(!coherent);
        let (_, gh200) = identify_by_device_id(0x2342).map_err(|_| EINVAL)?;
        assert!(gh200);
        assert_eq!(
            identify_by_device_id(0x0001).err(),
            Some(IdentError::UnknownDeviceId(1))
        );
        Ok(())
    }

    #[test]
    fn tables_are_consistent() {
        for t in TABLES.iter() {
            assert!(t.pmm_chunk_sizes.contains(ROOT_CHUNK_SIZE));
            assert_eq!(t.pmm_chunk_sizes.largest(), Some(ROOT_CHUNK_SIZE));
            assert_eq!(t.pmm_chunk_sizes.smallest(), Some(SZ_4K));
            assert_eq!(ROOT_CHUNK_SIZE % t.p2p_granularity, 0);
            assert_eq!(t.p2p_granularity, P2P_PAGE_SIZE);
            for c in t.chipsets {
                assert_eq!(c.arch_code(), t.arch.code());
            }
        }
    }
}
