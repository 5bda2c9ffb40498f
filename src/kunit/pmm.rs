// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `nvrs_pmm`: the memory manager inside the kernel, with its kernel metadata
//! storage: on the emulated GPUs' own managers, and on private ones.

use kernel::prelude::*;

#[kunit_tests(nvrs_pmm)]
mod tests {
    use kernel::prelude::*;

    use crate::{
        gpu,
        hwref::{
            PMM_CHUNKS_DEFAULT,
            ROOT_CHUNK_SIZE,
            SZ_4K,
            SZ_64K, //
        },
        kstorage::KernelStorage,
        mem::{fb, reach::Reach},
        pmm::{
            transition,
            AllocFlags,
            ChunkId,
            Event,
            FreeOutcome,
            MemType,
            Pmm,
            PmmError,
            State,
            Zero, //
        },
    };

    fn err(_: PmmError) -> Error {
        EINVAL
    }

    #[test]
    fn live_managers_are_consistent() -> Result {
        for g in gpu::all()?.iter() {
            let Some(mem) = &g.mem else { continue };
            let pmm = mem.pmm.lock();
            assert!(pmm.check().is_ok());
            assert_eq!(pmm.base(), g.fb.offset);
            assert_eq!(
                u64::try_from(pmm.root_count())? * ROOT_CHUNK_SIZE,
                g.fb.size
            );
            let s = pmm.stats();
            assert_eq!(
                s.free_bytes + s.allocated_bytes + s.temp_pinned_bytes,
                s.total_bytes
            );
        }
        Ok(())
    }

    #[test]
    fn split_lookup_merge() -> Result {
        let mut pmm =
            Pmm::<KernelStorage>::new(0, 8 * ROOT_CHUNK_SIZE, PMM_CHUNKS_DEFAULT).map_err(err)?;
        let mut ids = [ChunkId::default(); 1];
        pmm.alloc(
            ROOT_CHUNK_SIZE,
            MemType::Kernel,
            AllocFlags::default(),
            &mut ids,
        )
        .map_err(err)?;
        let root = ids[0];
        assert_eq!(pmm.state(root).map_err(err)?, State::Allocated);
        let first = pmm.split(root).map_err(err)?;
        assert_eq!(pmm.children(root).map_err(err)?, 32);
        let last = pmm.nth_child(root, 31).map_err(err)?;
        assert_eq!(pmm.size(last).map_err(err)?, SZ_64K);
        assert_eq!(pmm.state(first).map_err(err)?, State::Allocated);
        let addr = pmm.addr(last).map_err(err)?;
        assert_eq!(pmm.lookup(addr).map_err(err)?.raw(), last.raw());
        assert_eq!(pmm.pins(last).map_err(err)?, 0);
        assert!(!pmm.is_zeroed(last).map_err(err)?);
        assert!(pmm.check().is_ok());
        pmm.merge(root).map_err(err)?;
        assert_eq!(pmm.state(root).map_err(err)?, State::Allocated);
        assert_eq!(
            pmm.free(root, Zero::Zeroed).map_err(err)?,
            FreeOutcome::Freed
        );
        assert!(pmm.check().is_ok());
        assert_eq!(pmm.stats().free_bytes, 8 * ROOT_CHUNK_SIZE);
        Ok(())
    }

    #[test]
    fn pins_block_free_and_split() -> Result {
        let mut pmm =
            Pmm::<KernelStorage>::new(0, 2 * ROOT_CHUNK_SIZE, PMM_CHUNKS_DEFAULT).map_err(err)?;
        let mut ids = [ChunkId::default(); 2];
        pmm.alloc(SZ_4K, MemType::Kernel, AllocFlags::default(), &mut ids)
            .map_err(err)?;
        assert_eq!(pmm.p2p_pin(ids[0]).map_err(err)?, 1);
        assert_eq!(
            pmm.free(ids[0], Zero::Dirty).map_err(err)?,
            FreeOutcome::Revoke { pins: 1 }
        );
        assert_eq!(pmm.p2p_pin(ids[0]).err(), Some(PmmError::Revoking));
        assert_eq!(pmm.p2p_unpin(ids[0]).map_err(err)?, 0);
        assert_eq!(
            pmm.free(ids[0], Zero::Dirty).map_err(err)?,
            FreeOutcome::Freed
        );
        assert_eq!(
            pmm.free(ids[1], Zero::Dirty).map_err(err)?,
            FreeOutcome::Freed
        );
        let mut big = [ChunkId::default(); 1];
        pmm.alloc(
            ROOT_CHUNK_SIZE,
            MemType::Kernel,
            AllocFlags::default(),
            &mut big,
        )
        .map_err(err)?;
        pmm.p2p_pin(big[0]).map_err(err)?;
        assert_eq!(pmm.split(big[0]).err(), Some(PmmError::Pinned));
        pmm.p2p_unpin(big[0]).map_err(err)?;
        assert_eq!(
            pmm.free(big[0], Zero::Dirty).map_err(err)?,
            FreeOutcome::Freed
        );
        assert!(pmm.check().is_ok());
        Ok(())
    }

    #[test]
    fn exact_offsets() -> Result {
        let mut pmm =
            Pmm::<KernelStorage>::new(0, 4 * ROOT_CHUNK_SIZE, PMM_CHUNKS_DEFAULT).map_err(err)?;
        let at = ROOT_CHUNK_SIZE + 3 * SZ_64K;
        let id = pmm.alloc_at(at, SZ_64K, MemType::Kernel).map_err(err)?;
        assert_eq!(pmm.addr(id).map_err(err)?, at);
        // The same place again is taken; a misaligned one is refused.
        assert_eq!(
            pmm.alloc_at(at, SZ_64K, MemType::Kernel).err(),
            Some(PmmError::NoSpace)
        );
        assert_eq!(
            pmm.alloc_at(at + SZ_4K, SZ_64K, MemType::Kernel).err(),
            Some(PmmError::Misaligned)
        );
        assert_eq!(pmm.free(id, Zero::Dirty).map_err(err)?, FreeOutcome::Freed);
        assert_eq!(pmm.largest_free(), 4 * ROOT_CHUNK_SIZE);
        assert!(pmm.check().is_ok());
        Ok(())
    }

    #[test]
    fn high_alloc_at_touches_one_page() -> Result {
        // A 1 TiB manager: an allocation at its top root gives metadata to that root's page of
        // 512 roots and the directory of pages (in KVVecs), not to the 524287 roots below.
        let size = 1u64 << 40;
        let mut pmm = Pmm::<KernelStorage>::new(0, size, PMM_CHUNKS_DEFAULT).map_err(err)?;
        assert_eq!(pmm.metadata_bytes(), 0);
        let top = pmm
            .alloc_at(size - ROOT_CHUNK_SIZE, SZ_64K, MemType::Kernel)
            .map_err(err)?;
        assert!(pmm.metadata_bytes() < 128 << 10);
        assert!(pmm.check().is_ok());
        let s = pmm.stats();
        assert_eq!(s.free_bytes, size - SZ_64K);
        assert_eq!(s.largest_free, size - ROOT_CHUNK_SIZE);
        assert_eq!(pmm.free(top, Zero::Dirty).map_err(err)?, FreeOutcome::Freed);
        assert_eq!(pmm.largest_free(), size);
        assert!(pmm.check().is_ok());
        Ok(())
    }

    #[test]
    fn transition_table() {
        let mut legal = 0;
        for from in State::ALL {
            for e in Event::ALL {
                if let Ok(to) = transition(from, e) {
                    legal += 1;
                    assert!(to != from);
                }
            }
        }
        // The ten arrows of the table in src/pmm/chunk.rs.
        assert_eq!(legal, 10);
        assert_eq!(
            transition(State::IsSplit, Event::MergeAllocated).ok(),
            Some(State::Allocated)
        );
        assert!(transition(State::TempPinned, Event::Split).is_err());
    }

    /// Two retired managers overlap one GPU being probed (the first by its range, the second
    /// by range and UUID): the new manager refuses allocations until both hold no memory, not
    /// just the first one found.
    #[test]
    fn every_overlapping_retired_manager_blocks() -> Result {
        let table = crate::hwref::TABLES[0];
        // Far above any real aperture, so nothing but this test overlaps it.
        let phys = 0x7f00_0000_0000;
        let uuid = [0xa5; 16];
        fb::reserve_retired(2)?;
        let flat = || Reach::Flat { base: phys };
        let first = fb::FbMemory::new(
            table,
            flat(),
            0,
            ROOT_CHUNK_SIZE,
            0,
            [0x5a; 16],
            KVec::new(),
        )?;
        let second = fb::FbMemory::new(
            table,
            flat(),
            ROOT_CHUNK_SIZE,
            ROOT_CHUNK_SIZE,
            1,
            uuid,
            KVec::new(),
        )?;
        first.add_held(SZ_64K);
        second.add_held(SZ_64K);
        fb::retire(first.clone());
        fb::retire(second.clone());
        let (new, held) = fb::new_blocked(table, flat(), 0, 2 * ROOT_CHUNK_SIZE, 2, uuid)?;
        let both = held == 2 * SZ_64K && new.blocked().is_err();
        first.sub_held(SZ_64K);
        let still = new.blocked().is_err();
        second.sub_held(SZ_64K);
        let free = new.blocked().is_ok();
        // Counted back and dropped before asserting (a failed assertion ends the test right
        // there): the retired list forgets both either way, and nothing leaks.
        drop((new, first, second));
        assert!(both);
        assert!(still);
        assert!(free);
        Ok(())
    }
}
