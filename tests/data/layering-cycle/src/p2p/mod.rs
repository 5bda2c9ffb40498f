// SPDX-License-Identifier: GPL-2.0
//! Fixture for make check: tests/layering.py --strict must fail on this tree (p2p and vaspace
//! import each other, as src/ did before the memory layer).
use crate::vaspace::Allocation;
