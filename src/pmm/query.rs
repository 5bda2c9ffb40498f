// SPDX-License-Identifier: GPL-2.0

//! Read-only queries: a chunk's state, address, size, pins, zeroed mark and children, and the
//! chunk that holds an address.

use super::chunk::{Node, CONTIG_TAIL, ZEROED};
use super::compact::sort_by_key;
use super::{ChunkId, Pmm, PmmError, State, Storage};
use crate::hwref::ROOT_CHUNK_SIZE;

/// Sub-chunks [`Pmm::sort_by_addr`] sorts by keys it looks up once: the 64 KiB chunks of less
/// than a root, the tail of a buffer.
pub(crate) const SORT_BY_ADDR_KEYED: usize = 32;

impl<S: Storage> Pmm<S> {
    /// The chunk's state.
    pub(crate) fn state(&self, id: ChunkId) -> Result<State, PmmError> {
        Ok(self.node(id)?.state)
    }

    /// The chunk's framebuffer offset.
    pub(crate) fn addr(&self, id: ChunkId) -> Result<u64, PmmError> {
        let n = self.node(id)?;
        let root = u64::from(id.root()) << ROOT_CHUNK_SIZE.trailing_zeros();
        Ok(self.base + root + u64::from(n.offset))
    }

    /// Sorts chunk identifiers into address order, cheaply where it can: roots by identifier
    /// (a root's identifier grows with its address), up to [`SORT_BY_ADDR_KEYED`] sub-chunks by
    /// addresses looked up once each, more by addresses looked up at each comparison. An
    /// identifier that names no chunk sorts last.
    pub(crate) fn sort_by_addr(&self, ids: &mut [ChunkId]) {
        if ids.iter().all(|id| id.sub() == 0) {
            sort_by_key(ids, |id| *id);
            return;
        }
        let addr = |id: &ChunkId| self.addr(*id).unwrap_or(u64::MAX);
        if ids.len() > SORT_BY_ADDR_KEYED {
            sort_by_key(ids, addr);
            return;
        }
        let mut keyed = [(0u64, ChunkId::NIL); SORT_BY_ADDR_KEYED];
        for (k, id) in keyed.iter_mut().zip(ids.iter()) {
            *k = (addr(id), *id);
        }
        let keyed = keyed.get_mut(..ids.len()).unwrap_or(&mut []);
        sort_by_key(keyed, |k| *k);
        for (id, k) in ids.iter_mut().zip(keyed.iter()) {
            *id = k.1;
        }
    }

    /// The chunk's size in bytes (for the first root of a contiguous run: the whole run).
    pub(crate) fn size(&self, id: ChunkId) -> Result<u64, PmmError> {
        let n = self.node(id)?;
        if id.sub() == 0 {
            let run = u64::from(self.root_ref(id)?.run);
            return Ok(run.saturating_mul(ROOT_CHUNK_SIZE));
        }
        Ok(self.size_of_level(n.level))
    }

    /// Live P2P pins of the chunk.
    pub(crate) fn pins(&self, id: ChunkId) -> Result<u32, PmmError> {
        Ok(self.node(id)?.pins)
    }

    /// Whether the chunk's memory is known to be zero (valid for a chunk just handed out); for
    /// the first root of a contiguous run, whether every root of the run is.
    pub(crate) fn is_zeroed(&self, id: ChunkId) -> Result<bool, PmmError> {
        let n = self.node(id)?;
        let run = if id.sub() == 0 && !n.has(CONTIG_TAIL) {
            self.root_ref(id)?.run.max(1)
        } else {
            1
        };
        for i in 0..run {
            if !self
                .node(ChunkId::new(id.root() + i, id.sub()))?
                .has(ZEROED)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// How many children a split chunk has (see [`Pmm::nth_child`]).
    pub(crate) fn children(&self, id: ChunkId) -> Result<u16, PmmError> {
        let n = self.node(id)?;
        if n.state != State::IsSplit {
            return Err(PmmError::NotSplit);
        }
        self.fanout(n.level).ok_or(PmmError::Corrupt)
    }

    /// Child `k` of a split chunk.
    pub(crate) fn nth_child(&self, id: ChunkId, k: u16) -> Result<ChunkId, PmmError> {
        if k >= self.children(id)? {
            return Err(PmmError::InvalidId);
        }
        self.child(id, k)
    }

    /// The unsplit chunk holding framebuffer offset `addr` (O(depth)); for a root inside a
    /// contiguous run, the run's first root.
    pub(crate) fn lookup(&self, addr: u64) -> Result<ChunkId, PmmError> {
        let off = addr.checked_sub(self.base).ok_or(PmmError::InvalidId)?;
        let r = u32::try_from(off >> ROOT_CHUNK_SIZE.trailing_zeros())
            .map_err(|_| PmmError::InvalidId)?;
        let mut id = ChunkId::new(r, 0);
        let mut n = self.node(id)?;
        if n.has(CONTIG_TAIL) {
            let mut head = r;
            while self.node(ChunkId::new(head, 0))?.has(CONTIG_TAIL) {
                head = head.checked_sub(1).ok_or(PmmError::Corrupt)?;
            }
            return Ok(ChunkId::new(head, 0));
        }
        let within = off & (ROOT_CHUNK_SIZE - 1);
        while n.state == State::IsSplit {
            id = self.child(id, self.child_index(n, within)?)?;
            n = self.node(id)?;
        }
        Ok(id)
    }

    /// Which child of the split chunk `n` holds offset `within` of the root.
    pub(super) fn child_index(&self, n: &Node, within: u64) -> Result<u16, PmmError> {
        let child = self.size_of_level(n.level.checked_sub(1).ok_or(PmmError::Corrupt)?);
        within
            .checked_sub(u64::from(n.offset))
            .and_then(|d| d.checked_div(child))
            .and_then(|k| u16::try_from(k).ok())
            .ok_or(PmmError::Corrupt)
    }
}
