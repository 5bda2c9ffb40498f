// SPDX-License-Identifier: GPL-2.0

//! The pure part of `src/p2p/`.

#[path = "../../../src/p2p/abi.rs"]
pub(crate) mod abi;
#[path = "../../../src/p2p/coalesce.rs"]
pub(crate) mod coalesce;
