// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `nvrs_gpus`: the GPUs bound in the running kernel.
//!
//! Runs right after module init, when probe has run for every matching device. In the test VM
//! that is the two emulated GPUs; `tests/scenarios/` cross-checks their identities against what
//! the runner wrote.

use kernel::prelude::*;

#[kunit_tests(nvrs_gpus)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        exports::nvrs_gpu_count,
        gpu::{
            self,
            Backend, //
        },
        hwref::ROOT_CHUNK_SIZE,
    };

    #[test]
    fn apertures_hold_their_memory() -> Result {
        for g in gpu::all()?.iter() {
            assert!(g.aperture.len.is_power_of_two());
            assert!(g.aperture.phys != 0);
            let end = g.fb.offset.checked_add(g.fb.size).ok_or(EINVAL)?;
            // Memory behind BAR1 lies in VRAM, below BAR1's tables; otherwise in the aperture.
            match &g.bar1 {
                Some(b) => assert!(end <= b.usable()),
                None => assert!(end <= g.aperture.len),
            }
            if g.backend == Backend::Emulated {
                // The identity block is never part of GPU memory.
                assert!(g.fb.offset >= ROOT_CHUNK_SIZE);
                assert!(g.emu_index.is_some());
            }
        }
        Ok(())
    }

    #[test]
    fn identities_match_their_tables() -> Result {
        for g in gpu::all()?.iter() {
            assert_eq!(g.ident.chipset.arch_code(), g.ident.table.arch.code());
            assert!(g.ident.table.chipset(g.ident.chipset.id).is_some());
        }
        Ok(())
    }

    #[test]
    fn exported_count_matches_registry() -> Result {
        assert_eq!(usize::try_from(nvrs_gpu_count())?, gpu::all()?.len());
        Ok(())
    }
}
