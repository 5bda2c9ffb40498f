// SPDX-License-Identifier: GPL-2.0

//! Fault controls: what a consumer's author tells nvrs to get wrong, on purpose.
//!
//! A consumer of GPU memory (an RDMA driver, a GDRCopy-style module) must survive what NVIDIA's
//! driver does on a bad day: a `get_pages` or `dma_map_pages` that fails, a BAR1 aperture that
//! is full. Each GPU has a set of controls ([`Faults`]), written as text to its debugfs file
//! `faults` (one command per write):
//!
//! * `fail OP ERRNO nth N`: the `N`th call of `OP` from now fails with `-ERRNO`, once;
//! * `fail OP ERRNO permille P seed S`: each call of `OP` fails with probability `P`/1000,
//!   drawn from a generator seeded with `S` (the same seed gives the same calls);
//! * `fail OP off`: `OP` works again;
//! * `bar1 BYTES`: a BAR1 budget: a pin that would take the bytes of live pins on the GPU past
//!   `BYTES` fails with `-ENOMEM`, as NVIDIA's driver maps a BAR1 that cannot hold the mapping
//!   (`NV_ERR_NO_MEMORY` or `NV_ERR_INSUFFICIENT_RESOURCES`, both `-ENOMEM` in the status table
//!   of its `nv-p2p.c`); `bar1 0` lifts it;
//! * `revoke now`: every live non-persistent pin on the GPU is revoked (free callbacks run in
//!   work items, as when NVIDIA's driver revokes on its own);
//! * `revoke permille P seed S`: at each `get_pages` or `get_pages_persistent` call on the GPU,
//!   with probability `P`/1000 (seeded as above), one live non-persistent pin of the GPU,
//!   picked at random, is revoked as by `revoke now`;
//! * `revoke every MS`: every `MS` milliseconds (1 to 60000) every live non-persistent pin on
//!   the GPU is revoked as by `revoke now`, from a timer, whatever the consumer is doing;
//!   `revoke off` stops this and `revoke permille`;
//! * `callback delay US`: each free callback nvrs calls is called `US` microseconds late (at
//!   most one second; 0: at once), as when NVIDIA's driver is slow to revoke;
//! * `callback context workqueue`: a release (a free, the owner's exit) revokes its pins from
//!   nvrs's workqueue and waits for them, so the free callback runs in a worker instead of the
//!   releasing thread, as NVIDIA's driver may call it; `callback context thread` is the
//!   default;
//! * `remove surprise`: the GPU falls off the bus. It is marked disconnected at once, as the
//!   PCI core marks a function whose slot lost its link (config and MMIO accesses fail from
//!   then on), and the PCI core then removes it as pciehp does after a surprise removal: the
//!   driver's unbind runs with the device already gone, and the function leaves the bus until a
//!   rescan finds it again.
//!
//! `OP` is `get_pages`, `get_pages_persistent`, `dma_map`, `dmabuf_attach` or `dmabuf_map`;
//! `ERRNO` is one of the errnos NVIDIA's driver returns from them (`EINVAL`, `ENOMEM`, `EBUSY`,
//! `EIO`, `ENODEV`, `ENOTSUPP`). Anything else is refused whole ([`FaultError`], `-EINVAL` to
//! the writer) and changes nothing. This file holds the parsing and the decisions, free of
//! `kernel::` so that the host tests run it; the module keeps one [`Faults`] per GPU behind a
//! lock ([`crate::mem::faults`]).
//!
//! # Test builds only
//!
//! A root debugfs write here can revoke every pin every few milliseconds or take a GPU off the
//! bus, so none of it is in a production module: the controls, their debugfs file, their
//! module parameters and `rust/faults.c` are built only with `make NVRS_TESTING=1`
//! (`--cfg nvrs_testing`; `make check`, `make consumer` and `make bench` pass it, DKMS and a
//! plain `make` do not). A production build keeps the hooks, which then answer "no fault"
//! ([`crate::mem::faults`]).

use core::fmt;

pub(crate) use crate::fault_op::Op;

/// The operations, in the order [`Faults`] keeps their rules.
const OPS: [(Op, &str); 5] = [
    (Op::GetPages, "get_pages"),
    (Op::GetPagesPersistent, "get_pages_persistent"),
    (Op::DmaMap, "dma_map"),
    (Op::DmabufAttach, "dmabuf_attach"),
    (Op::DmabufMap, "dmabuf_map"),
];

/// The errnos a control may inject: those NVIDIA's driver returns from the `nvidia_p2p`
/// functions (its `nv-p2p.c` status table), by name and value.
const ERRNOS: [(&str, i32); 6] = [
    ("EINVAL", 22),
    ("ENOMEM", 12),
    ("EBUSY", 16),
    ("EIO", 5),
    ("ENODEV", 19),
    ("ENOTSUPP", 524),
];

/// A command that could not be understood; nothing was changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FaultError;

/// When a rule fires.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum When {
    /// At this call from when the rule was set (1 = the next), once.
    Nth(u64),
    /// With this probability in 1/1000, from a generator in this state.
    Permille {
        permille: u32,
        seed: u64,
        state: u64,
    },
}

/// One operation's rule.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Rule {
    /// The errno (positive) it fails with.
    errno: i32,
    when: When,
    /// Calls seen since the rule was set.
    calls: u64,
}

/// What a command asks besides changing the controls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Action {
    /// Nothing more: the controls changed.
    None,
    /// Revoke every live non-persistent pin on the GPU now.
    RevokeNow,
    /// Revoke every live non-persistent pin every this many milliseconds (0: stop).
    RevokeEvery(u32),
    /// Take the GPU off the bus, without an orderly unbind.
    RemoveSurprise,
}

/// One GPU's fault controls and what they did.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct Faults {
    rules: [Option<Rule>; 5],
    /// The BAR1 budget in bytes (0: none).
    pub(crate) bar1_budget: u64,
    /// Calls a control made fail (rules and the BAR1 budget).
    pub(crate) injected: u64,
    /// Pins revoked by `revoke now`.
    pub(crate) revoked: u64,
    /// Microseconds each free callback is called late.
    pub(crate) callback_delay_us: u32,
    /// Releases revoke their pins from the workqueue.
    pub(crate) callback_in_worker: bool,
    /// Random revocations at pinning: probability in 1/1000, seed, generator state.
    revoke_rule: Option<(u32, u64, u64)>,
    /// Milliseconds between periodic revocations (0: none).
    pub(crate) revoke_every_ms: u32,
}

/// The longest callback delay a control may set (one second).
const MAX_CALLBACK_DELAY_US: u64 = 1_000_000;

/// The longest period of `revoke every` (one minute).
pub(crate) const MAX_REVOKE_EVERY_MS: u32 = 60_000;

/// The next value of a xorshift64* generator (never 0 once seeded with a non-zero state).
fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn parse_op(word: &str) -> Result<Op, FaultError> {
    OPS.iter()
        .find(|(_, name)| *name == word)
        .map(|(op, _)| *op)
        .ok_or(FaultError)
}

fn parse_errno(word: &str) -> Result<i32, FaultError> {
    ERRNOS
        .iter()
        .find(|(name, _)| *name == word)
        .map(|(_, e)| *e)
        .ok_or(FaultError)
}

fn errno_name(errno: i32) -> &'static str {
    ERRNOS
        .iter()
        .find(|(_, e)| *e == errno)
        .map_or("?", |(name, _)| *name)
}

fn parse_u64(word: Option<&str>) -> Result<u64, FaultError> {
    word.and_then(|w| match w.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => w.parse().ok(),
    })
    .ok_or(FaultError)
}

impl Faults {
    /// Applies one command (see the module documentation); on error nothing changed.
    pub(crate) fn apply(&mut self, text: &str) -> Result<Action, FaultError> {
        let mut w = text.split_ascii_whitespace();
        match (w.next(), w.next()) {
            (Some("revoke"), Some("now")) if w.next().is_none() => Ok(Action::RevokeNow),
            (Some("revoke"), Some("off")) if w.next().is_none() => {
                self.revoke_rule = None;
                self.revoke_every_ms = 0;
                Ok(Action::RevokeEvery(0))
            }
            (Some("revoke"), Some("every")) => {
                let ms = u32::try_from(parse_u64(w.next())?).map_err(|_| FaultError)?;
                if ms == 0 || ms > MAX_REVOKE_EVERY_MS || w.next().is_some() {
                    return Err(FaultError);
                }
                self.revoke_every_ms = ms;
                Ok(Action::RevokeEvery(ms))
            }
            (Some("remove"), Some("surprise")) if w.next().is_none() => Ok(Action::RemoveSurprise),
            (Some("revoke"), Some("permille")) => {
                let permille = u32::try_from(parse_u64(w.next())?).map_err(|_| FaultError)?;
                if permille > 1000 || w.next() != Some("seed") {
                    return Err(FaultError);
                }
                let seed = parse_u64(w.next())?;
                if w.next().is_some() {
                    return Err(FaultError);
                }
                self.revoke_rule = Some((permille, seed, seed ^ 0x9e37_79b9_7f4a_7c15));
                Ok(Action::None)
            }
            (Some("bar1"), budget) => {
                let budget = parse_u64(budget)?;
                if w.next().is_some() {
                    return Err(FaultError);
                }
                self.bar1_budget = budget;
                Ok(Action::None)
            }
            (Some("callback"), Some(what)) => {
                let (what, value) = (what, w.next());
                if w.next().is_some() {
                    return Err(FaultError);
                }
                match (what, value) {
                    ("delay", us) => {
                        let us = parse_u64(us)?;
                        if us > MAX_CALLBACK_DELAY_US {
                            return Err(FaultError);
                        }
                        self.callback_delay_us = u32::try_from(us).map_err(|_| FaultError)?;
                    }
                    ("context", Some("thread")) => self.callback_in_worker = false,
                    ("context", Some("workqueue")) => self.callback_in_worker = true,
                    _ => return Err(FaultError),
                }
                Ok(Action::None)
            }
            (Some("fail"), Some(op)) => {
                let op = parse_op(op)?;
                let rule = match w.next() {
                    Some("off") => None,
                    Some(errno) => Some(Self::parse_rule(parse_errno(errno)?, &mut w)?),
                    None => return Err(FaultError),
                };
                if w.next().is_some() {
                    return Err(FaultError);
                }
                if let Some(slot) = self.rules.get_mut(op as usize) {
                    *slot = rule;
                }
                Ok(Action::None)
            }
            _ => Err(FaultError),
        }
    }

    fn parse_rule<'a>(
        errno: i32,
        w: &mut impl Iterator<Item = &'a str>,
    ) -> Result<Rule, FaultError> {
        let when = match w.next() {
            Some("nth") => match parse_u64(w.next())? {
                0 => return Err(FaultError),
                n => When::Nth(n),
            },
            Some("permille") => {
                let permille = u32::try_from(parse_u64(w.next())?).map_err(|_| FaultError)?;
                if permille > 1000 || w.next() != Some("seed") {
                    return Err(FaultError);
                }
                let seed = parse_u64(w.next())?;
                When::Permille {
                    permille,
                    seed,
                    // xorshift needs a non-zero state; seed 0 is as good a seed as any other.
                    state: seed ^ 0x9e37_79b9_7f4a_7c15,
                }
            }
            _ => return Err(FaultError),
        };
        Ok(Rule {
            errno,
            when,
            calls: 0,
        })
    }

    /// Called at each call of `op`: the errno (positive) it must fail with, if a rule says so.
    pub(crate) fn check(&mut self, op: Op) -> Option<i32> {
        let slot = self.rules.get_mut(op as usize)?;
        let rule = slot.as_mut()?;
        rule.calls = rule.calls.saturating_add(1);
        let fire = match &mut rule.when {
            When::Nth(n) => rule.calls == *n,
            When::Permille {
                permille, state, ..
            } => next_random(state) % 1000 < u64::from(*permille),
        };
        let errno = rule.errno;
        if matches!(rule.when, When::Nth(_)) && fire {
            // Once: the rule is spent.
            *slot = None;
        }
        fire.then(|| {
            self.injected = self.injected.saturating_add(1);
            errno
        })
    }

    /// Called when a pin of `len` bytes would raise the bytes pinned on the GPU from `pinned`:
    /// whether the BAR1 budget refuses it (counted).
    pub(crate) fn over_budget(&mut self, pinned: u64, len: u64) -> bool {
        let over = self.bar1_budget != 0 && pinned.saturating_add(len) > self.bar1_budget;
        if over {
            self.injected = self.injected.saturating_add(1);
        }
        over
    }

    /// Called at each pinning call: a random number to pick the pin to revoke with, if the
    /// `revoke permille` rule says one is revoked now.
    pub(crate) fn roll_revoke(&mut self) -> Option<u64> {
        let (permille, _, state) = self.revoke_rule.as_mut()?;
        (next_random(state) % 1000 < u64::from(*permille)).then(|| next_random(state))
    }

    /// Whether any control is set (the rules and the budget; the counters aside).
    pub(crate) fn any(&self) -> bool {
        self.revoke_rule.is_some()
            || self.revoke_every_ms != 0
            || self.bar1_budget != 0
            || self.callback_delay_us != 0
            || self.callback_in_worker
            || self.rules.iter().any(Option::is_some)
    }
}

/// The controls as the debugfs file reads: one line per rule set, then the budget and the
/// counters.
impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for ((_, name), rule) in OPS.iter().zip(self.rules.iter()) {
            let Some(r) = rule else { continue };
            match r.when {
                When::Nth(n) => writeln!(
                    f,
                    "fail {name} {} nth {n} (calls {})",
                    errno_name(r.errno),
                    r.calls
                )?,
                When::Permille { permille, seed, .. } => writeln!(
                    f,
                    "fail {name} {} permille {permille} seed {seed} (calls {})",
                    errno_name(r.errno),
                    r.calls
                )?,
            }
        }
        if let Some((permille, seed, _)) = self.revoke_rule {
            writeln!(f, "revoke permille {permille} seed {seed}")?;
        }
        if self.revoke_every_ms != 0 {
            writeln!(f, "revoke every {}", self.revoke_every_ms)?;
        }
        writeln!(f, "bar1 {}", self.bar1_budget)?;
        writeln!(f, "callback delay {}", self.callback_delay_us)?;
        writeln!(
            f,
            "callback context {}",
            if self.callback_in_worker {
                "workqueue"
            } else {
                "thread"
            }
        )?;
        writeln!(f, "injected {}", self.injected)?;
        writeln!(f, "revoked {}", self.revoked)
    }
}
