// SPDX-License-Identifier: GPL-2.0

//! Chip identification from the boot registers, with a PCI device-id fallback.
//!
//! Every NVIDIA GPU since NV04 has `NV_PMC_BOOT_0` at BAR0 offset 0; Fermi and later also have
//! `NV_PMC_BOOT_42` at 0xa00, which is what NVIDIA's current driver and nova-core decode. A read
//! of all ones means the device no longer answers on the bus (surprise removal, a hung link, or a
//! BAR that is not mapped).
//!
//! `BOOT_42` is authoritative; `BOOT_0` is only decoded when `BOOT_42` reads zero (parts and
//! emulations that do not implement it). Its architecture field is split: bits 28:24 hold the
//! low five bits and bit 8 the sixth.

use super::{table_for_arch, ArchTable, Chipset, TABLES};

/// `NV_PMC_BOOT_0`, BAR0 offset 0x0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PmcBoot0(pub(crate) u32);

impl PmcBoot0 {
    /// BAR0 offset of the register.
    pub(crate) const OFFSET: usize = 0x0;

    /// `MINOR_REVISION`, bits 3:0.
    pub(crate) const fn minor_revision(self) -> u8 {
        (self.0 & 0xf) as u8
    }

    /// `MAJOR_REVISION`, bits 7:4.
    pub(crate) const fn major_revision(self) -> u8 {
        ((self.0 >> 4) & 0xf) as u8
    }

    /// `IMPLEMENTATION`, bits 23:20.
    pub(crate) const fn implementation(self) -> u8 {
        ((self.0 >> 20) & 0xf) as u8
    }

    /// The architecture: `ARCHITECTURE_1` (bit 8) above `ARCHITECTURE_0` (bits 28:24).
    pub(crate) const fn architecture(self) -> u8 {
        ((((self.0 >> 8) & 1) << 5) | ((self.0 >> 24) & 0x1f)) as u8
    }
}

/// `NV_PMC_BOOT_42`, BAR0 offset 0xa00.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct PmcBoot42(pub(crate) u32);

impl PmcBoot42 {
    /// BAR0 offset of the register.
    pub(crate) const OFFSET: usize = 0xa00;

    /// `MINOR_REVISION`, bits 15:12.
    pub(crate) const fn minor_revision(self) -> u8 {
        ((self.0 >> 12) & 0xf) as u8
    }

    /// `MAJOR_REVISION`, bits 19:16.
    pub(crate) const fn major_revision(self) -> u8 {
        ((self.0 >> 16) & 0xf) as u8
    }

    /// `IMPLEMENTATION`, bits 23:20.
    pub(crate) const fn implementation(self) -> u8 {
        ((self.0 >> 20) & 0xf) as u8
    }

    /// `ARCHITECTURE`, bits 29:24.
    pub(crate) const fn architecture(self) -> u8 {
        ((self.0 >> 24) & 0x3f) as u8
    }

    /// `CHIP_ID`, bits 29:20: `(architecture << 4) | implementation`.
    pub(crate) const fn chip_id(self) -> u16 {
        ((self.0 >> 20) & 0x3ff) as u16
    }
}

/// Why a device could not be identified.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IdentError {
    /// A boot register read all ones: the GPU is not answering on the bus.
    OffTheBus,
    /// Both boot registers read zero.
    NoId,
    /// The architecture code is not one nvrs has a table for (older than Maxwell, or newer
    /// than this build).
    UnknownArchitecture(u8),
    /// The architecture is known but the chip is not in its table.
    UnknownChipset(u16),
    /// The PCI device id is in no table (device-id fallback only).
    UnknownDeviceId(u16),
}

/// A chip revision, printed the way NVIDIA names steppings (`A1`, `B0`, ...).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Revision {
    /// Major revision: 0xa is `A`, 0xb is `B`.
    pub(crate) major: u8,
    /// Minor revision.
    pub(crate) minor: u8,
}

impl core::fmt::Display for Revision {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:X}{:X}", self.major, self.minor)
    }
}

/// How a chip was identified.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum IdentSource {
    /// From `PMC_BOOT_42`.
    Boot42,
    /// From `PMC_BOOT_0` (`PMC_BOOT_42` read zero).
    Boot0,
    /// From the PCI device id (registers could not be read).
    DeviceId,
}

/// An identified chip.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Identity {
    /// The chip.
    pub(crate) chipset: &'static Chipset,
    /// The family table the chip belongs to.
    pub(crate) table: &'static ArchTable,
    /// Stepping, when read from a register.
    pub(crate) revision: Option<Revision>,
    /// Where the identification came from.
    pub(crate) source: IdentSource,
}

fn lookup(arch: u8, chip_id: u16) -> Result<(&'static ArchTable, &'static Chipset), IdentError> {
    let table = table_for_arch(arch).ok_or(IdentError::UnknownArchitecture(arch))?;
    let chipset = table
        .chipset(chip_id)
        .ok_or(IdentError::UnknownChipset(chip_id))?;
    Ok((table, chipset))
}

/// Identifies a chip from the values of `PMC_BOOT_0` and `PMC_BOOT_42`.
pub(crate) fn identify(boot0: PmcBoot0, boot42: PmcBoot42) -> Result<Identity, IdentError> {
    if boot0.0 == u32::MAX || boot42.0 == u32::MAX {
        return Err(IdentError::OffTheBus);
    }
    let (arch, chip_id, revision, source) = if boot42.0 != 0 {
        let rev = Revision {
            major: boot42.major_revision(),
            minor: boot42.minor_revision(),
        };
        (
            boot42.architecture(),
            boot42.chip_id(),
            rev,
            IdentSource::Boot42,
        )
    } else if boot0.0 != 0 {
        let arch = boot0.architecture();
        let chip_id = (u16::from(arch) << 4) | u16::from(boot0.implementation());
        let rev = Revision {
            major: boot0.major_revision(),
            minor: boot0.minor_revision(),
        };
        (arch, chip_id, rev, IdentSource::Boot0)
    } else {
        return Err(IdentError::NoId);
    };
    let (table, chipset) = lookup(arch, chip_id)?;
    Ok(Identity {
        chipset,
        table,
        revision: Some(revision),
        source,
    })
}

/// Identifies a chip from its PCI device id (vendor 0x10de), for when registers cannot be read.
///
/// Returns the identity and whether the part is a coherent (C2C) one without a BAR1 aperture.
pub(crate) fn identify_by_device_id(device_id: u16) -> Result<(Identity, bool), IdentError> {
    for table in TABLES.iter() {
        for range in table.device_ids {
            if (range.first..=range.last).contains(&device_id) {
                let chipset = table
                    .chipset(range.chip)
                    .ok_or(IdentError::UnknownChipset(range.chip))?;
                let ident = Identity {
                    chipset,
                    table,
                    revision: None,
                    source: IdentSource::DeviceId,
                };
                return Ok((ident, range.coherent_c2c));
            }
        }
    }
    Err(IdentError::UnknownDeviceId(device_id))
}

/// Builds the `PMC_BOOT_0` value a chip reports (used to make emulated identities and tests).
pub(crate) const fn boot0_for(chip_id: u16, rev: Revision) -> PmcBoot0 {
    let arch = (chip_id >> 4) as u32;
    let imp = (chip_id & 0xf) as u32;
    PmcBoot0(
        ((arch & 0x1f) << 24)
            | (imp << 20)
            | (((arch >> 5) & 1) << 8)
            | (((rev.major & 0xf) as u32) << 4)
            | ((rev.minor & 0xf) as u32),
    )
}

/// Builds the `PMC_BOOT_42` value a chip reports.
pub(crate) const fn boot42_for(chip_id: u16, rev: Revision) -> PmcBoot42 {
    PmcBoot42(
        (((chip_id & 0x3ff) as u32) << 20)
            | (((rev.major & 0xf) as u32) << 16)
            | (((rev.minor & 0xf) as u32) << 12),
    )
}
