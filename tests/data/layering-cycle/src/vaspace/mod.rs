// SPDX-License-Identifier: GPL-2.0
//! Fixture for make check (see ../p2p/mod.rs).
use crate::p2p::pin::next_revocable;
