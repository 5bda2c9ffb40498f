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

use std::collections::HashMap;
use std::time::Instant;

use hwref::{PMM_CHUNKS_DEFAULT, SZ_2M, SZ_4K, SZ_64K};
use pmm::{AllocFlags, ChunkId, MemType, Pmm, Zero};
use std_storage::StdStorage;

/// splitmix64: a small seeded PRNG, identical for both allocators.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// What a trace needs from an allocator.
trait Allocator {
    type Handle: Copy;
    fn alloc(&mut self, size: u64) -> Option<Self::Handle>;
    fn free(&mut self, h: Self::Handle);
    fn largest_free(&self) -> u64;
}

/// The nvrs manager (kernel-type chunks, owned at once).
struct Nvrs(Pmm<StdStorage>);

impl Nvrs {
    fn new(bytes: u64) -> Self {
        Nvrs(Pmm::new(0, bytes, PMM_CHUNKS_DEFAULT).expect("pmm"))
    }
}

impl Allocator for Nvrs {
    type Handle = ChunkId;

    fn alloc(&mut self, size: u64) -> Option<ChunkId> {
        let mut out = [ChunkId::NIL];
        self.0
            .alloc(size, MemType::Kernel, AllocFlags::default(), &mut out)
            .ok()?;
        Some(out[0])
    }

    fn free(&mut self, h: ChunkId) {
        self.0.free(h, Zero::Dirty).expect("free");
    }

    fn largest_free(&self) -> u64 {
        self.0.largest_free()
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

/// One measurement: ns per operation and the largest free block at the end.
struct Result_ {
    ns_per_op: f64,
    largest_free: u64,
}

/// Random alloc/free with a live-set cap: each step frees a random live chunk or allocates.
fn churn<A: Allocator>(
    a: &mut A,
    seed: u64,
    ops: usize,
    cap: usize,
    size_of: impl Fn(&mut Rng) -> u64,
) -> Result_ {
    let mut rng = Rng(seed);
    let mut live: Vec<A::Handle> = Vec::with_capacity(cap);
    let t = Instant::now();
    for _ in 0..ops {
        if !live.is_empty() && (live.len() >= cap || rng.below(2) == 0) {
            let i = rng.below(live.len());
            let h = live.swap_remove(i);
            a.free(h);
        } else {
            let size = size_of(&mut rng);
            if let Some(h) = a.alloc(size) {
                live.push(h);
            }
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / ops as f64;
    Result_ {
        ns_per_op: ns,
        largest_free: a.largest_free(),
    }
}

/// Fill the whole pool with 4 KiB chunks, then free them all in random order.
fn fill_free<A: Allocator>(a: &mut A, seed: u64, bytes: u64) -> Result_ {
    let mut rng = Rng(seed);
    let n = (bytes / SZ_4K) as usize;
    let mut live = Vec::with_capacity(n);
    let t = Instant::now();
    for _ in 0..n {
        live.push(a.alloc(SZ_4K).expect("fill"));
    }
    for i in (1..live.len()).rev() {
        live.swap(i, rng.below(i + 1));
    }
    for h in live {
        a.free(h);
    }
    let ns = t.elapsed().as_nanos() as f64 / (2 * n) as f64;
    Result_ {
        ns_per_op: ns,
        largest_free: a.largest_free(),
    }
}

/// Fill with 4 KiB chunks, free every other one (a 50% checkerboard), then time 2 MiB requests
/// (which all fail: no 2 MiB extent is free).
fn checkerboard<A: Allocator>(a: &mut A, bytes: u64, requests: usize) -> Result_ {
    let n = (bytes / SZ_4K) as usize;
    let mut live = Vec::with_capacity(n);
    for _ in 0..n {
        live.push(a.alloc(SZ_4K).expect("fill"));
    }
    for h in live.iter().step_by(2) {
        a.free(*h);
    }
    let t = Instant::now();
    let mut got = 0;
    for _ in 0..requests {
        if let Some(h) = a.alloc(SZ_2M) {
            got += 1;
            a.free(h);
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / requests as f64;
    assert_eq!(got, 0, "a 2 MiB extent in a full checkerboard");
    Result_ {
        ns_per_op: ns,
        largest_free: a.largest_free(),
    }
}

fn report(trace: &str, nvrs: Result_, anchor: Result_) {
    println!(
        "bench: {trace} nvrs={:.1}ns anchor={:.1}ns ratio={:.2} largest_free_nvrs={} largest_free_anchor={}",
        nvrs.ns_per_op,
        anchor.ns_per_op,
        anchor.ns_per_op / nvrs.ns_per_op,
        nvrs.largest_free,
        anchor.largest_free
    );
}

const GIB: u64 = 1 << 30;
const SEED: u64 = 0x6e76_7273;

fn main() {
    // Uniform 64K: 1 GiB pool, up to 8192 live chunks (half the pool).
    let ops = 400_000;
    let f = |_: &mut Rng| SZ_64K;
    let n = churn(&mut Nvrs::new(GIB), SEED, ops, 8192, f);
    let a = churn(&mut NaiveBuddy::new(GIB), SEED, ops, 8192, f);
    report("uniform_64k_1G", n, a);

    // Mixed 4K (60%) / 64K (30%) / 2M (10%): 1 GiB pool, up to 4096 live chunks.
    let mixed = |r: &mut Rng| match r.below(10) {
        0..=5 => SZ_4K,
        6..=8 => SZ_64K,
        _ => SZ_2M,
    };
    let n = churn(&mut Nvrs::new(GIB), SEED, ops, 4096, mixed);
    let a = churn(&mut NaiveBuddy::new(GIB), SEED, ops, 4096, mixed);
    report("mixed_4k_64k_2m_1G", n, a);

    // Fill to full with 4K, free in random order: 256 MiB (65536 chunks).
    let pool = 256 << 20;
    let n = fill_free(&mut Nvrs::new(pool), SEED, pool);
    let a = fill_free(&mut NaiveBuddy::new(pool), SEED, pool);
    report("fill_4k_free_random_256M", n, a);

    // 50% checkerboard of 4K in 256 MiB, then 2 MiB requests.
    let n = checkerboard(&mut Nvrs::new(pool), pool, 100_000);
    let a = checkerboard(&mut NaiveBuddy::new(pool), pool, 100_000);
    report("checkerboard_then_2m_256M", n, a);

    // Initialising 1 TiB (524288 roots); one op = one initialisation.
    let t = Instant::now();
    let p = Nvrs::new(1 << 40);
    let n = Result_ {
        ns_per_op: t.elapsed().as_nanos() as f64,
        largest_free: p.largest_free(),
    };
    drop(p);
    let t = Instant::now();
    let b = NaiveBuddy::new(1 << 40);
    let a = Result_ {
        ns_per_op: t.elapsed().as_nanos() as f64,
        largest_free: b.largest_free(),
    };
    report("init_1T", n, a);
}
