// SPDX-License-Identifier: GPL-2.0

//! The operations a fault control can make fail ([`crate::faults`], built only into test
//! builds of nvrs).
//!
//! The calls that may fail on purpose name their operation wherever they ask the memory
//! layer's fault hook ([`crate::mem::faults`]); in a production build the hook always answers
//! "no fault", so only this list of names is common to both builds.

/// An operation a control can make fail.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Op {
    /// `nvidia_p2p_get_pages()`.
    GetPages = 0,
    /// `nvidia_p2p_get_pages_persistent()`.
    GetPagesPersistent = 1,
    /// `nvidia_p2p_dma_map_pages()`.
    DmaMap = 2,
    /// A dma-buf importer's attach.
    DmabufAttach = 3,
    /// A dma-buf importer's map.
    DmabufMap = 4,
}
