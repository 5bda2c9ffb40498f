// SPDX-License-Identifier: GPL-2.0

//! The pure part of `src/vaspace/`.

#[path = "../../../src/vaspace/layout.rs"]
pub(crate) mod layout;
#[path = "../../../src/vaspace/range.rs"]
pub(crate) mod range;
