// SPDX-License-Identifier: GPL-2.0

//! The pure part of `src/topology/`.

#[path = "../../../src/topology/cache.rs"]
pub(crate) mod cache;
#[path = "../../../src/topology/link.rs"]
pub(crate) mod link;
