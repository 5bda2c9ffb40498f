// SPDX-License-Identifier: GPL-2.0

//! The GPU model's copy engine: scrubbing and copying GPU memory without the CPU.
//!
//! A real GPU moves memory with a copy engine (CE): the driver pushes the methods of the DMA
//! copy class (`clc1b5.h` and later, which keep these offsets) into a channel and waits on a
//! semaphore the engine releases when the copy is done. nvrs boots no firmware and runs no
//! channels, so it drives the CE only on the test-bed's GPU model (`tests/model/nvrs-gpu.c`),
//! which takes the same methods written straight to a window of BAR0. Every launch is a
//! physical, pitch-layout, one-line transfer: a copy, or a memset (the class's remap with a
//! constant component), within VRAM or between VRAM and system memory (a DMA address, through
//! the IOMMU); it ends with a one-word semaphore release into a coherent buffer, which nvrs
//! polls. The model also raises an interrupt if asked; nvrs does not ask (a poll of a word in
//! memory costs less than an interrupt for copies this short).
//!
//! [`ModelCe::new`] checks the engine at probe: it saves a page of VRAM to system memory, fills
//! it, reads it back through a copy to system memory, and restores it. A GPU whose engine fails
//! that is used without one (the CPU scrubs through BAR1, [`crate::bar1::Bar1Space::zero`]).

use kernel::{
    device::{Bound, Core},
    dma::{Coherent, DmaAddress},
    io::Io,
    new_mutex, pci,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    time::{delay::fsleep, Delta},
};

use crate::bar1::Bar1Space;

/// The model's method window in BAR0.
const CE_BASE: usize = 0xff_1000;
/// `NVC1B5_*` methods.
const SET_SEMAPHORE_A: usize = 0x240;
const SET_SEMAPHORE_B: usize = 0x244;
const SET_SEMAPHORE_PAYLOAD: usize = 0x248;
const SET_SRC_PHYS_MODE: usize = 0x260;
const SET_DST_PHYS_MODE: usize = 0x264;
const LAUNCH_DMA: usize = 0x300;
const OFFSET_IN_UPPER: usize = 0x400;
const OFFSET_IN_LOWER: usize = 0x404;
const OFFSET_OUT_UPPER: usize = 0x408;
const OFFSET_OUT_LOWER: usize = 0x40c;
const LINE_LENGTH_IN: usize = 0x418;
const LINE_COUNT: usize = 0x41c;
const SET_REMAP_CONST_A: usize = 0x700;
const SET_REMAP_COMPONENTS: usize = 0x708;
/// `SET_*_PHYS_MODE_TARGET`.
const TARGET_LOCAL_FB: u32 = 0;
const TARGET_COHERENT_SYSMEM: u32 = 1;
/// `LAUNCH_DMA`: `DATA_TRANSFER_TYPE_NON_PIPELINED`, `FLUSH_ENABLE` (the data lands before
/// the semaphore), `SEMAPHORE_TYPE_RELEASE_ONE_WORD`, `SRC_`/`DST_MEMORY_LAYOUT_PITCH`,
/// `SRC_`/`DST_TYPE_PHYSICAL`; `REMAP_ENABLE` for a memset (whose `LINE_LENGTH_IN` then counts
/// 4-byte components, not bytes).
const LAUNCH: u32 = 2 | (1 << 2) | (1 << 3) | (1 << 7) | (1 << 8) | (1 << 12) | (1 << 13);
const LAUNCH_REMAP: u32 = 1 << 10;
/// `SET_REMAP_COMPONENTS`: `DST_X_CONST_A`, `COMPONENT_SIZE_FOUR`, `NUM_DST_COMPONENTS_ONE`.
const REMAP_MEMSET32: u32 = 4 | (3 << 16);
/// The model's status of the last launch (0: done) and its counters.
const MODEL_CE_LAUNCHES: usize = 0xff_0034;
const MODEL_CE_BYTES: usize = 0xff_0038;
const MODEL_CE_ERROR: usize = 0xff_0040;
/// The longest line one launch moves.
const MAX_LINE: u64 = 1 << 30;
/// How long a launch is waited for: polls a microsecond apart, then 10 µs apart.
const SPIN_POLLS: u32 = 100;
const SLEEP_POLLS: u32 = 100_000;
/// The self-test's page (bytes) and its pattern.
const TEST_LEN: usize = 4096;
const TEST_WORD: u32 = 0xce5e_1f7e;

/// Where a transfer reads or writes.
#[derive(Clone, Copy)]
pub(crate) enum Target {
    /// A VRAM address.
    Vram(u64),
    /// System memory at a DMA address of the GPU.
    Sys(DmaAddress),
}

impl Target {
    fn split(self) -> (u32, u64) {
        match self {
            Target::Vram(a) => (TARGET_LOCAL_FB, a),
            Target::Sys(a) => (TARGET_COHERENT_SYSMEM, a),
        }
    }

    fn at(self, off: u64) -> Self {
        match self {
            Target::Vram(a) => Target::Vram(a + off),
            Target::Sys(a) => Target::Sys(a + off),
        }
    }
}

/// What one launch does.
enum Op {
    Copy(Target),
    Fill(u32),
}

/// What `ModelCe::launch` guards.
struct Launch {
    /// The payload of the last launch.
    payload: u32,
    /// The semaphore the engine releases after each launch; freed when the GPU is unbound
    /// ([`ModelCe::shutdown`]), since the engine may outlive the binding (a memory manager
    /// retired with pins left holds it).
    sem: Option<Coherent<u32>>,
}

/// The model's copy engine, one launch at a time.
#[pin_data]
pub(crate) struct ModelCe {
    bar1: Arc<Bar1Space>,
    /// Held across a launch and its wait.
    #[pin]
    launch: Mutex<Launch>,
    /// A launch did not complete in time: it may still write, so the engine is not used again
    /// and the GPU's memory is not handed out any more ([`Self::is_wedged`]).
    wedged: Atomic<bool>,
}

impl ModelCe {
    /// The GPU model's engine, checked ([`self_test`](Self)); the GPU must be a bus master
    /// with a DMA mask set. `ENODEV` (and one dmesg line) if the check fails.
    pub(crate) fn new(pdev: &pci::Device<Core<'_>>, bar1: Arc<Bar1Space>) -> Result<Arc<Self>> {
        let dev: &kernel::device::Device<Bound> = pdev.as_ref();
        let sem = Coherent::<u32>::zeroed(dev, GFP_KERNEL)?;
        let ce = Arc::pin_init(
            pin_init!(Self {
                bar1,
                launch <- new_mutex!(Launch { payload: 0, sem: Some(sem) }, "ModelCe::launch"),
                wedged: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        let buf = Coherent::<u32>::zeroed_slice(dev, 2 * TEST_LEN / 4, GFP_KERNEL)?;
        ce.self_test(&buf).inspect_err(|e| {
            dev_err!(
                pdev,
                "GPU model: copy engine self-test failed ({e:?}); scrubbing with the CPU\n"
            );
        })?;
        Ok(ce)
    }

    /// Saves a page below BAR1's tables to `buf`, fills it, copies it back into the second
    /// half of `buf` and checks it, and restores the page. Runs before the GPU is registered.
    fn self_test(&self, buf: &Coherent<[u32]>) -> Result {
        let page = self
            .bar1
            .usable()
            .checked_sub(2 * TEST_LEN as u64)
            .ok_or(ENODEV)?;
        let (save, check) = (buf.dma_address(), buf.dma_address() + TEST_LEN as u64);
        let len = TEST_LEN as u64;
        self.copy(Target::Sys(save), Target::Vram(page), len)?;
        let tested = (|| -> Result {
            self.fill(page, len, TEST_WORD)?;
            self.copy(Target::Sys(check), Target::Vram(page), len)?;
            let words = buf.as_ptr().cast::<u32>();
            for i in TEST_LEN / 4..TEST_LEN / 2 {
                // SAFETY: `i` is inside the buffer (2 * TEST_LEN bytes); the engine's writes
                // completed (the semaphore was released after them) and none is in flight.
                if unsafe { core::ptr::read_volatile(words.add(i)) } != TEST_WORD {
                    return Err(EIO);
                }
            }
            Ok(())
        })();
        let restored = self.copy(Target::Vram(page), Target::Sys(save), len);
        // The saved page may be someone's data (a retired manager's pinned memory): not left
        // in freed system memory.
        // SAFETY: No launch is in flight (each completed or failed before returning), so the
        // engine does not write the buffer; `buf` is `2 * TEST_LEN` bytes.
        unsafe { core::ptr::write_bytes(buf.as_mut_ptr().cast::<u8>(), 0, 2 * TEST_LEN) };
        restored.and(tested)
    }

    /// Whether a launch timed out ([`Self::wedged`]).
    pub(crate) fn is_wedged(&self) -> bool {
        self.wedged.load(Relaxed)
    }

    /// `EINVAL` unless `[fb, fb + len)` lies in VRAM below BAR1's tables.
    fn check_vram(&self, t: Target, len: u64) -> Result {
        match t {
            Target::Vram(fb) => match fb.checked_add(len) {
                Some(end) if end <= self.bar1.layout().instance_block() => Ok(()),
                _ => Err(EINVAL),
            },
            Target::Sys(_) => Ok(()),
        }
    }

    /// Fills `[fb, fb + len)` of VRAM below BAR1's tables with the 32-bit `value` (both 4-byte
    /// aligned).
    pub(crate) fn fill(&self, fb: u64, len: u64, value: u32) -> Result {
        if fb % 4 != 0 || len % 4 != 0 {
            return Err(EINVAL);
        }
        self.check_vram(Target::Vram(fb), len)?;
        self.transfer(Target::Vram(fb), Op::Fill(value), len)
    }

    /// Copies `len` bytes from `src` to `dst` (VRAM below BAR1's tables, or system memory).
    pub(crate) fn copy(&self, dst: Target, src: Target, len: u64) -> Result {
        self.check_vram(dst, len)?;
        self.check_vram(src, len)?;
        self.transfer(dst, Op::Copy(src), len)
    }

    /// Launches and waits, a line of at most [`MAX_LINE`] bytes at a time.
    fn transfer(&self, dst: Target, op: Op, len: u64) -> Result {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(MAX_LINE);
            let op = match op {
                Op::Copy(src) => Op::Copy(src.at(done)),
                Op::Fill(v) => Op::Fill(v),
            };
            self.launch_one(dst.at(done), &op, n)?;
            done += n;
        }
        Ok(())
    }

    fn launch_one(&self, dst: Target, op: &Op, len: u64) -> Result {
        let mut st = self.launch.lock();
        if self.is_wedged() {
            return Err(EIO);
        }
        st.payload = st.payload.wrapping_add(1);
        let want = st.payload;
        let Some(sem_buf) = st.sem.as_ref() else {
            return Err(ENODEV);
        };
        let sem = sem_buf.dma_address();
        let (dst_t, dst_a) = dst.split();
        let (src_t, src_a, launch, value, line) = match *op {
            Op::Copy(src) => {
                let (t, a) = src.split();
                (t, a, LAUNCH, 0, len)
            }
            // With the remap, the line is counted in 4-byte components.
            Op::Fill(v) => (TARGET_LOCAL_FB, 0, LAUNCH | LAUNCH_REMAP, v, len / 4),
        };
        let lo = |a: u64| (a & 0xffff_ffff) as u32;
        let hi = |a: u64| ((a >> 32) & 0x1_ffff) as u32;
        self.bar1.with_bar0(|bar0| {
            for (m, v) in [
                (SET_SEMAPHORE_A, hi(sem)),
                (SET_SEMAPHORE_B, lo(sem)),
                (SET_SEMAPHORE_PAYLOAD, want),
                (SET_SRC_PHYS_MODE, src_t),
                (SET_DST_PHYS_MODE, dst_t),
                (OFFSET_IN_UPPER, hi(src_a)),
                (OFFSET_IN_LOWER, lo(src_a)),
                (OFFSET_OUT_UPPER, hi(dst_a)),
                (OFFSET_OUT_LOWER, lo(dst_a)),
                (LINE_LENGTH_IN, u32::try_from(line)?),
                (LINE_COUNT, 1),
                (SET_REMAP_CONST_A, value),
                (SET_REMAP_COMPONENTS, REMAP_MEMSET32),
                (LAUNCH_DMA, launch),
            ] {
                bar0.try_write32(v, CE_BASE + m)?;
            }
            Ok(())
        })?;
        for i in 0..SPIN_POLLS + SLEEP_POLLS {
            // SAFETY: The semaphore is a coherent word the engine writes; reading it races with
            // nothing but that write, which is what is polled for.
            if unsafe { core::ptr::read_volatile(sem_buf.as_ptr()) } == want {
                return Ok(());
            }
            // A refused launch never releases the semaphore.
            if self
                .bar1
                .with_bar0(|bar0| bar0.try_read32(MODEL_CE_ERROR))?
                != 0
            {
                return Err(EIO);
            }
            fsleep(Delta::from_micros(if i < SPIN_POLLS { 1 } else { 10 }));
        }
        self.wedged.store(true, Relaxed);
        pr_err!("GPU model: a copy-engine launch did not complete; the engine is not used again\n");
        Err(ETIMEDOUT)
    }

    /// Frees the semaphore: GPU removal, when the device's DMA allocations must go. Later
    /// launches fail with `ENODEV`.
    pub(crate) fn shutdown(&self) {
        let sem = self.launch.lock().sem.take();
        drop(sem);
    }

    /// Launches carried out and bytes moved, as the model counts them.
    pub(crate) fn counters(&self) -> Result<(u32, u64)> {
        self.bar1.with_bar0(|bar0| {
            let launches = bar0.try_read32(MODEL_CE_LAUNCHES)?;
            // The high word again after the low one: a carry between them is read whole.
            let mut hi = bar0.try_read32(MODEL_CE_BYTES + 4)?;
            let mut lo = bar0.try_read32(MODEL_CE_BYTES)?;
            let again = bar0.try_read32(MODEL_CE_BYTES + 4)?;
            if again != hi {
                hi = again;
                lo = bar0.try_read32(MODEL_CE_BYTES)?;
            }
            Ok((launches, u64::from(lo) | (u64::from(hi) << 32)))
        })
    }
}
