// SPDX-License-Identifier: GPL-2.0

//! The memory manager's errors.

use super::{Event, OutOfMemory, State};

/// Why an operation failed. Every error leaves the manager unchanged, except
/// [`PmmError::Corrupt`], which reports a broken internal invariant (a bug).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PmmError {
    /// `base` is not a multiple of the root size.
    Misaligned,
    /// The range holds no whole root.
    Empty,
    /// The range holds more roots than a [`ChunkId`](super::ChunkId) can name, or ends past `u64::MAX`.
    TooLarge,
    /// The size mask lacks the root size, has a size below 4 KiB or above the root, or has more
    /// than [`MAX_SIZES`](super::MAX_SIZES) sizes.
    BadSizes,
    /// The requested size is not one of the manager's sizes (or cannot be split further).
    BadSize,
    /// Not enough free memory for the request.
    NoSpace,
    /// Metadata could not be allocated.
    OutOfMemory,
    /// No such chunk (never allocated, or already freed or merged).
    InvalidId,
    /// The event is not legal in the chunk's state.
    IllegalTransition {
        /// The chunk's state.
        from: State,
        /// The refused event.
        event: Event,
    },
    /// The chunk is not [`State::Allocated`] (P2P pins need an owned chunk).
    NotAllocated,
    /// The chunk carries P2P pins, so it cannot be split or merged.
    Pinned,
    /// The chunk is being revoked: no new P2P pins.
    Revoking,
    /// No P2P pin to drop.
    NotPinned,
    /// Too many P2P pins.
    PinOverflow,
    /// A root inside a contiguous run: use the run's first root.
    NotHead,
    /// The chunk is not split.
    NotSplit,
    /// An internal invariant is broken.
    Corrupt,
}

impl From<OutOfMemory> for PmmError {
    fn from(_: OutOfMemory) -> Self {
        PmmError::OutOfMemory
    }
}
