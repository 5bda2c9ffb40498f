// SPDX-License-Identifier: GPL-2.0

//! A bound GPU's fault controls as the driver carries them out: the debugfs file `faults`, the
//! module parameters that set them at probe, and the two controls that need more than a
//! setting, the periodic revocation (`revoke every`, a [`Ticker`]) and the surprise removal.
//!
//! The controls themselves, their parsing and their decisions, are [`crate::faults`]; the
//! memory layer keeps them ([`crate::mem::faults`]). The timer lives here, in the driver,
//! because what it does (revoking pins) belongs to a layer above the memory, and because the
//! driver's unbind must stop it before it tears the GPU down.
//!
//! Built only into test builds (`--cfg nvrs_testing`, see [`crate::faults`]); a production
//! build has `faults_off.rs` instead, with no file and nothing to stop.

use kernel::{
    debugfs,
    prelude::*,
    str::CString,
    sync::Arc, //
};

use crate::{
    faults::Action,
    gpu::GpuInfo,
    helpers::Ticker,
    mem::fb::FbMemory, //
};

/// A bound GPU's fault controls: its debugfs file `faults` and what the file refers to.
#[pin_data]
pub(crate) struct FaultCtl {
    #[pin]
    _file: debugfs::File<Arc<Controls>>,
    controls: Arc<Controls>,
}

/// What the `faults` file of one GPU refers to.
///
/// Fields drop in declaration order: the ticker (stopped, its running call waited for) before
/// the GPU it calls into.
struct Controls {
    ticker: Ticker,
    info: Arc<GpuInfo>,
}

impl FaultCtl {
    /// The controls of `info`'s GPU, set as the module parameters ask, with the file `faults`
    /// in `dir`.
    pub(crate) fn new<'a>(
        info: Arc<GpuInfo>,
        dir: &'a debugfs::Dir,
    ) -> impl PinInit<Self, Error> + 'a {
        pin_init::pin_init_scope(move || {
            // SAFETY: The ticker is a field of the object that keeps `info` alive, declared
            // before it, so it is stopped before `info` can go.
            let ticker = unsafe { Ticker::new(Arc::as_ptr(&info).cast()) }?;
            let controls = Arc::new(Controls { ticker, info }, GFP_KERNEL)?;
            controls.apply_params()?;
            let data = controls.clone();
            Ok(try_pin_init!(Self {
                _file <- dir.read_write_callback_file(c"faults", data, &render, &write),
                controls,
            }))
        })
    }

    /// Stops the periodic revocation for good (the driver's unbind, before the teardown).
    pub(crate) fn stop(&self) {
        self.controls.ticker.stop();
    }
}

impl Controls {
    /// Sets the controls the module parameters ask for (`fault_*`) on a GPU being probed, with
    /// one dmesg line if any; a value a control refuses fails the probe.
    fn apply_params(&self) -> Result {
        let Some(mem) = &self.info.mem else {
            return Ok(());
        };
        let p = crate::fault_params();
        if p.bar1_mib == 0
            && p.callback_delay_us == 0
            && !p.callback_workqueue
            && p.revoke_every_ms == 0
        {
            return Ok(());
        }
        let mut commands = KVec::new();
        commands.push(
            CString::try_from_fmt(fmt!("bar1 {}", u64::from(p.bar1_mib) << 20))?,
            GFP_KERNEL,
        )?;
        commands.push(
            CString::try_from_fmt(fmt!("callback delay {}", p.callback_delay_us))?,
            GFP_KERNEL,
        )?;
        commands.push(
            CString::try_from_fmt(fmt!(
                "callback context {}",
                if p.callback_workqueue {
                    "workqueue"
                } else {
                    "thread"
                }
            ))?,
            GFP_KERNEL,
        )?;
        if p.revoke_every_ms != 0 {
            commands.push(
                CString::try_from_fmt(fmt!("revoke every {}", p.revoke_every_ms))?,
                GFP_KERNEL,
            )?;
        }
        let pdev = self.info.pdev.as_ref();
        for c in &commands {
            let text = c.to_str().map_err(|_| EINVAL)?;
            let action = mem.faults.apply(text).map_err(|_| {
                dev_err!(
                    pdev,
                    "fault control from the module parameters refused: {}\n",
                    text
                );
                EINVAL
            })?;
            if let Action::RevokeEvery(ms) = action {
                self.ticker.set(ms);
            }
        }
        dev_info!(
            pdev,
            "fault controls from the module parameters: BAR1 budget {} MiB, callbacks {} us late, from {}, revocation every {} ms\n",
            p.bar1_mib,
            p.callback_delay_us,
            if p.callback_workqueue {
                "the workqueue"
            } else {
                "the releasing thread"
            },
            p.revoke_every_ms
        );
        Ok(())
    }
}

/// Revokes every live non-persistent pin of `mem` now (`revoke now` and each tick of
/// `revoke every`), counted; returns how many.
fn revoke_now(mem: &FbMemory) -> u64 {
    let n = crate::p2p::pin::revoke_on(mem);
    mem.faults.count_revoked(n);
    n
}

/// Called by the ticker of `revoke every`, from nvrs's work queue.
///
/// # Safety
///
/// `owner` is the `GpuInfo` of a [`FaultCtl`] whose ticker has not been stopped (the ticker
/// stops, waiting for this call, before the `GpuInfo` can go).
#[no_mangle]
unsafe extern "C" fn nvrs_ticker_fire_rs(owner: *mut c_void) {
    // SAFETY: By the function's safety requirements `owner` points to a live `GpuInfo`.
    let info = unsafe { &*owner.cast::<GpuInfo>().cast_const() };
    if let Some(mem) = &info.mem {
        if !mem.is_gone() {
            revoke_now(mem);
        }
    }
}
crate::helpers::same_signature!(nvrs_ticker_fire_rs);

/// debugfs `faults`: the GPU's fault controls and what they did ([`crate::faults`]).
fn render(ctl: &Arc<Controls>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    match &ctl.info.mem {
        Some(mem) => mem.faults.render(f),
        None => writeln!(f, "no memory"),
    }
}

/// debugfs `faults`: writing a command sets a fault control (logged once), revokes the GPU's
/// live non-persistent pins (`revoke now`), starts or stops their periodic revocation, or takes
/// the GPU off the bus (`remove surprise`); `-EINVAL` for anything else, which changes nothing.
fn write(ctl: &Arc<Controls>, reader: &mut kernel::uaccess::UserSliceReader) -> Result {
    let mut buf = [0u8; 96];
    // A longer command would be cut into another one.
    if reader.len() > buf.len() {
        return Err(EINVAL);
    }
    let text = crate::text::written_text(reader, &mut buf)?;
    let info = &ctl.info;
    let mem = info.mem.as_ref().ok_or(ENODEV)?;
    let pdev = info.pdev.as_ref();
    match mem.faults.apply(text).map_err(|_| EINVAL)? {
        Action::None => dev_info!(pdev, "fault control: {}\n", text),
        Action::RevokeNow => {
            let n = revoke_now(mem);
            dev_info!(
                pdev,
                "fault control: revoking {} live non-persistent pins\n",
                n
            );
        }
        Action::RevokeEvery(ms) => {
            ctl.ticker.set(ms);
            dev_info!(pdev, "fault control: {}\n", text);
        }
        Action::RemoveSurprise => {
            dev_warn!(
                pdev,
                "fault control: surprise removal, the GPU falls off the bus now\n"
            );
            crate::helpers::pci_surprise_remove(&info.pdev)?;
        }
    }
    Ok(())
}
