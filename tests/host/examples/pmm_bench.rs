// SPDX-License-Identifier: GPL-2.0

//! Host benchmark of the physical memory manager (`src/pmm`), not a test: it asserts nothing
//! about time.
//!
//! `cargo run --release --example pmm_bench` runs each trace on the nvrs manager and on an
//! anchor, with the same PRNG seed, and prints one line per trace:
//!
//! `bench: <trace> nvrs=<ns/op>ns anchor=<ns/op>ns ratio=<anchor/nvrs> largest_free_nvrs=<bytes> largest_free_anchor=<bytes>`
//!
//! The host has no kernel gpu_buddy, so the anchor is [`NaiveBuddy`]: a sorted-list buddy
//! allocator, the pre-RB-tree gpu_buddy (drm_buddy) algorithm, written here for the bench.
//! Its per-order free lists are kept sorted by offset with an O(n) insert (a walk to the insert
//! position), which is the behaviour the RB-tree rewrite removed after it took 52.7% of CPU and
//! caused soft lockups. It is *not* the kernel's current allocator.

#![allow(dead_code)]

#[path = "../../../hwref/mod.rs"]
mod hwref;
#[path = "../../../src/pmm/mod.rs"]
mod pmm;
#[path = "../src/std_storage.rs"]
mod std_storage;
/// The traces, shared with the in-kernel bench (`src/bench/`).
#[path = "../../../src/bench/traces.rs"]
mod traces;

use std::collections::HashMap;
use std::time::Instant;

use hwref::{PMM_CHUNKS_DEFAULT, SZ_4K};
use pmm::Pmm;
use std_storage::StdStorage;
use traces::{BenchAlloc as Allocator, Clock, Line};

/// `std::time::Instant` as the traces' clock.
struct HostClock(Instant);

impl Clock for HostClock {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// The nvrs manager (its `BenchAlloc` implementation is shared with the kernel bench).
struct Nvrs;

impl Nvrs {
    #[allow(clippy::new_ret_no_self)]
    fn new(bytes: u64) -> Pmm<StdStorage> {
        Pmm::new(0, bytes, PMM_CHUNKS_DEFAULT).expect("pmm")
    }
}

/// The anchor: a binary buddy allocator over 4 KiB pages whose roots are the power-of-two
/// decomposition of the size (as gpu_buddy), with per-order free lists kept sorted by offset
/// and an O(n) sorted insert (the pre-RB-tree gpu_buddy algorithm). Buddy state is found in
/// O(1) (a hash map standing in for gpu_buddy's block tree); only list maintenance is linear.
struct NaiveBuddy {
    /// Free blocks per order, sorted by offset.
    lists: Vec<Vec<u64>>,
    /// Order of each free block, by offset.
    free: HashMap<u64, u8>,
    /// Offset and order of each root.
    roots: Vec<(u64, u8)>,
}

const CHUNK_SHIFT: u32 = 12;

impl NaiveBuddy {
    fn new(bytes: u64) -> Self {
        let mut b = NaiveBuddy {
            lists: vec![Vec::new(); 52],
            free: HashMap::new(),
            roots: vec![],
        };
        let mut off = 0;
        let mut left = bytes & !(SZ_4K - 1);
        while left != 0 {
            let order = (63 - left.leading_zeros() - CHUNK_SHIFT) as u8;
            b.roots.push((off, order));
            b.insert(off, order);
            off += 1 << (order as u32 + CHUNK_SHIFT);
            left -= 1 << (order as u32 + CHUNK_SHIFT);
        }
        b
    }

    /// The O(n) sorted insert: walk from the head to the first larger offset.
    fn insert(&mut self, off: u64, order: u8) {
        let list = &mut self.lists[order as usize];
        let mut pos = 0;
        while pos < list.len() && list[pos] < off {
            pos += 1;
        }
        list.insert(pos, off);
        self.free.insert(off, order);
    }

    fn remove(&mut self, off: u64, order: u8) {
        let list = &mut self.lists[order as usize];
        let pos = list.binary_search(&off).expect("free block on its list");
        list.remove(pos);
        self.free.remove(&off);
    }

    fn root_order_at(&self, off: u64) -> u8 {
        self.roots
            .iter()
            .find(|&&(o, ord)| off >= o && off < o + (1 << (ord as u32 + CHUNK_SHIFT)))
            .expect("root")
            .1
    }
}

impl Allocator for NaiveBuddy {
    type Handle = (u64, u8);

    fn alloc(&mut self, size: u64) -> Option<(u64, u8)> {
        let want = (size.trailing_zeros() - CHUNK_SHIFT) as u8;
        let from = (want as usize..self.lists.len()).find(|&o| !self.lists[o].is_empty())? as u8;
        // Highest offset of the smallest non-empty order, as gpu_buddy's default allocation.
        let off = *self.lists[from as usize].last()?;
        self.remove(off, from);
        let mut order = from;
        let mut off = off;
        while order > want {
            order -= 1;
            // Keep the right half (gpu_buddy descends right), free the left one.
            self.insert(off, order);
            off += 1 << (order as u32 + CHUNK_SHIFT);
        }
        Some((off, want))
    }

    fn free(&mut self, (mut off, mut order): (u64, u8)) {
        loop {
            let root_order = self.root_order_at(off);
            if order >= root_order {
                break;
            }
            let buddy = off ^ (1 << (order as u32 + CHUNK_SHIFT));
            if self.free.get(&buddy) != Some(&order) {
                break;
            }
            self.remove(buddy, order);
            off = off.min(buddy);
            order += 1;
        }
        self.insert(off, order);
    }

    fn largest_free(&self) -> u64 {
        self.free
            .values()
            .map(|&o| 1u64 << (o as u32 + CHUNK_SHIFT))
            .max()
            .unwrap_or(0)
    }
}

fn main() {
    let scale = traces::Scale {
        ops: 400_000,
        requests: 100_000,
    };
    let _ = traces::run_suite::<StdStorage, _, _, _, ()>(
        &HostClock(Instant::now()),
        scale,
        |bytes| Some(Nvrs::new(bytes)),
        |bytes| Some(NaiveBuddy::new(bytes)),
        |trace, result| {
            let (nvrs, anchor) = result.expect("bookkeeping memory");
            print!(
                "{}",
                Line {
                    trace,
                    nvrs,
                    anchor
                }
            );
            Ok(())
        },
    );
}
