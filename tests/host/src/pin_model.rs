// SPDX-License-Identifier: GPL-2.0

//! A model of the pin / callback / put / free / unbind protocol, explored by `loom`.
//!
//! The model follows `src/p2p/pin.rs` and `src/mem/allocation.rs` step by step, with `loom`'s
//! mutexes, condition variables and atomics in place of the kernel's:
//!
//! * a pin's life-cycle state (`Live` → `Revoking` | `Putting` → `Dead`), an atomic claimed by
//!   compare-and-exchange by whoever moves it out of `Live` (`P2pPin::claim`); the others wait
//!   until it is `Dead` (`P2pPin::wait_dead`: count themselves in `waiters`, then sleep on `done`
//!   under the pin's `dma` lock);
//! * `finish`: the pin leaves the registry, drops its chunk pins, tells its allocation
//!   (`pin_gone`, which may return the memory) and dies (`P2pPin::die`: `Dead` with a full
//!   barrier, then, only if `waiters` is not zero, the `dma` lock taken and released and `done`
//!   notified);
//! * `release` (FREE, process exit): mark released, revoke the non-persistent pins one at a
//!   time through the registry, return the memory when no pin is left (`give_back_if_unused`);
//! * GPU removal (`drain_gpu`): revoke live non-persistent pins, wait for pins being revoked or
//!   put elsewhere.
//!
//! What it abstracts: memory is a flag and a chunk-pin count; the registry is a vector; DMA
//! mappings and the free callback are counters; there is one allocation with one
//! non-persistent and one persistent pin. Bounds: three threads (the consumer putting both
//! pins, the owner freeing, the GPU being removed), explored exhaustively by `loom` with at
//! most three preemptions per execution.
//!
//! Checked in every interleaving: the callback runs at most once and never after the
//! consumer's put returned; a pin ends exactly once (by its put or by revocation); the memory
//! returns exactly once, and only when no chunk is pinned and no pin is registered; nothing
//! deadlocks and no wake-up is lost (`loom` fails on a thread that sleeps for ever); at the end
//! every pin is dead and the memory is back.

use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PinState {
    Live,
    Revoking,
    Putting,
    Dead,
}

struct Pin {
    persistent: bool,
    /// A `PinState` as `usize`.
    state: AtomicUsize,
    waiters: AtomicUsize,
    /// The pin's `dma` lock (its mappings are abstracted away).
    dma: Mutex<()>,
    done: Condvar,
    callbacks: AtomicUsize,
    ended: AtomicUsize,
    put_returned: AtomicBool,
}

struct Alloc {
    /// (released, pins)
    state: Mutex<(bool, usize)>,
    /// `Backing::returned`.
    give_back_flag: AtomicBool,
    /// Times the memory actually went back.
    returned: AtomicUsize,
    chunk_pins: AtomicUsize,
}

struct World {
    alloc: Alloc,
    registry: Mutex<Vec<Arc<Pin>>>,
}

impl Pin {
    fn new(persistent: bool) -> Arc<Self> {
        Arc::new(Pin {
            persistent,
            state: AtomicUsize::new(PinState::Live as usize),
            waiters: AtomicUsize::new(0),
            dma: Mutex::new(()),
            done: Condvar::new(),
            callbacks: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            put_returned: AtomicBool::new(false),
        })
    }

    fn state(&self) -> PinState {
        match self.state.load(SeqCst) {
            0 => PinState::Live,
            1 => PinState::Revoking,
            2 => PinState::Putting,
            _ => PinState::Dead,
        }
    }

    fn claim(&self, to: PinState) -> bool {
        self.state
            .compare_exchange(PinState::Live as usize, to as usize, SeqCst, SeqCst)
            .is_ok()
    }

    fn wait_dead(&self) {
        self.waiters.fetch_add(1, SeqCst);
        // The kernel's fully ordered read-modify-writes (`Full`) are full barriers; `loom`
        // gives `SeqCst` accesses no total order (tokio-rs/loom#180), but models the fence.
        fence(SeqCst);
        let mut g = self.dma.lock().unwrap();
        while self.state() != PinState::Dead {
            g = self.done.wait(g).unwrap();
        }
        drop(g);
        self.waiters.fetch_sub(1, SeqCst);
    }

    fn die(&self) {
        self.state.swap(PinState::Dead as usize, SeqCst);
        fence(SeqCst);
        if self.waiters.load(SeqCst) != 0 {
            drop(self.dma.lock().unwrap());
            self.done.notify_all();
        }
    }
}

impl World {
    fn finish(&self, pin: &Arc<Pin>) {
        self.registry
            .lock()
            .unwrap()
            .retain(|p| !Arc::ptr_eq(p, pin));
        self.alloc.chunk_pins.fetch_sub(1, SeqCst);
        assert_eq!(pin.ended.fetch_add(1, SeqCst), 0, "a pin ended twice");
        // pin_gone
        self.alloc.state.lock().unwrap().1 -= 1;
        self.give_back_if_unused();
        pin.die();
    }

    fn put(&self, pin: &Arc<Pin>) {
        if pin.claim(PinState::Putting) {
            self.finish(pin);
        } else {
            pin.wait_dead();
        }
        pin.put_returned.store(true, SeqCst);
    }

    fn revoke(&self, pin: &Arc<Pin>) {
        if !pin.claim(PinState::Revoking) {
            pin.wait_dead();
            return;
        }
        // The consumer's callback: never after its put returned, never twice.
        assert!(
            !pin.put_returned.load(SeqCst),
            "callback after put returned"
        );
        assert_eq!(
            pin.callbacks.fetch_add(1, SeqCst),
            0,
            "callback fired twice"
        );
        self.finish(pin);
    }

    fn give_back_if_unused(&self) {
        let st = self.alloc.state.lock().unwrap();
        if !st.0 || st.1 != 0 {
            return;
        }
        drop(st);
        // Backing::give_back: its `returned` flag lets only the first call through, and that
        // one must find nothing pinned and no pin registered.
        if self.alloc.give_back_flag.swap(true, SeqCst) {
            return;
        }
        self.alloc.returned.fetch_add(1, SeqCst);
        assert_eq!(
            self.alloc.chunk_pins.load(SeqCst),
            0,
            "memory returned while pinned"
        );
        assert!(
            self.registry.lock().unwrap().is_empty(),
            "memory returned while a pin is registered"
        );
    }

    fn release(&self) {
        {
            let mut st = self.alloc.state.lock().unwrap();
            if st.0 {
                return;
            }
            st.0 = true;
        }
        while self.alloc.state.lock().unwrap().1 != 0 {
            let next = self
                .registry
                .lock()
                .unwrap()
                .iter()
                .find(|p| !p.persistent)
                .cloned();
            match next {
                Some(p) => self.revoke(&p),
                None => break,
            }
        }
        self.give_back_if_unused();
    }

    fn drain(&self) {
        loop {
            let next = self
                .registry
                .lock()
                .unwrap()
                .iter()
                .find(|p| !(p.persistent && p.state() == PinState::Live))
                .cloned();
            let Some(p) = next else { break };
            match p.state() {
                PinState::Live => self.revoke(&p),
                _ => p.wait_dead(),
            }
        }
    }
}

fn world() -> (Arc<World>, Arc<Pin>, Arc<Pin>) {
    let a = Pin::new(false);
    let b = Pin::new(true);
    let w = Arc::new(World {
        alloc: Alloc {
            state: Mutex::new((false, 2)),
            give_back_flag: AtomicBool::new(false),
            returned: AtomicUsize::new(0),
            chunk_pins: AtomicUsize::new(2),
        },
        registry: Mutex::new(vec![a.clone(), b.clone()]),
    });
    (w, a, b)
}

fn explore(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// The consumer puts both pins while the owner frees the memory and the GPU is removed.
#[test]
fn pin_put_free_unbind_race() {
    explore(|| {
        let (w, a, b) = world();
        let (w1, a1, b1) = (w.clone(), a.clone(), b.clone());
        let consumer = thread::spawn(move || {
            w1.put(&a1);
            w1.put(&b1);
        });
        let w2 = w.clone();
        let owner = thread::spawn(move || w2.release());
        w.drain();
        consumer.join().unwrap();
        owner.join().unwrap();
        for p in [&a, &b] {
            assert_eq!(p.state(), PinState::Dead);
            assert_eq!(p.ended.load(SeqCst), 1);
        }
        assert!(
            b.callbacks.load(SeqCst) == 0,
            "a persistent pin got a callback"
        );
        assert_eq!(
            w.alloc.returned.load(SeqCst),
            1,
            "memory not returned exactly once"
        );
    });
}

/// Free and removal race with no put: the non-persistent pin is revoked exactly once, and the
/// persistent one keeps the memory until its put.
#[test]
fn free_and_unbind_revoke_once_persistent_holds_memory() {
    explore(|| {
        let (w, a, b) = world();
        let w2 = w.clone();
        let owner = thread::spawn(move || w2.release());
        w.drain();
        owner.join().unwrap();
        assert_eq!(a.callbacks.load(SeqCst), 1, "lost or double callback");
        assert_eq!(
            w.alloc.returned.load(SeqCst),
            0,
            "memory returned under a persistent pin"
        );
        w.put(&b);
        assert_eq!(w.alloc.returned.load(SeqCst), 1);
    });
}
