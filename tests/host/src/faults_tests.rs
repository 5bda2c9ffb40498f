// SPDX-License-Identifier: GPL-2.0

//! Tests of the fault controls' parsing and decisions (`src/faults.rs`).

use crate::faults::{
    Action,
    FaultError,
    Faults,
    Op, //
};

#[test]
fn nth_fires_once_at_the_nth_call() {
    let mut f = Faults::default();
    assert_eq!(f.apply("fail get_pages EBUSY nth 3"), Ok(Action::None));
    assert_eq!(f.check(Op::GetPages), None);
    // Other operations are not counted.
    assert_eq!(f.check(Op::DmaMap), None);
    assert_eq!(f.check(Op::GetPages), None);
    assert_eq!(f.check(Op::GetPages), Some(16));
    assert_eq!(f.check(Op::GetPages), None);
    assert_eq!(f.injected, 1);
    assert!(!f.any());
}

#[test]
fn permille_is_reproducible_from_its_seed_and_near_its_rate() {
    let run = |seed: u64| {
        let mut f = Faults::default();
        f.apply(&format!("fail dma_map ENOMEM permille 250 seed {seed}"))
            .unwrap();
        (0..4000)
            .map(|_| f.check(Op::DmaMap).is_some())
            .collect::<Vec<_>>()
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert_ne!(a, run(8));
    let fired = a.iter().filter(|x| **x).count();
    assert!((800..1200).contains(&fired), "{fired} of 4000 at 25%");
    let mut f = Faults::default();
    f.apply("fail dma_map EIO permille 1000 seed 0").unwrap();
    assert!((0..100).all(|_| f.check(Op::DmaMap) == Some(5)));
    f.apply("fail dma_map EIO permille 0 seed 0").unwrap();
    assert!((0..100).all(|_| f.check(Op::DmaMap).is_none()));
}

#[test]
fn off_and_budget() {
    let mut f = Faults::default();
    f.apply("fail get_pages_persistent ENODEV nth 1").unwrap();
    f.apply("fail get_pages_persistent off").unwrap();
    assert_eq!(f.check(Op::GetPagesPersistent), None);
    f.apply("bar1 0x20000").unwrap();
    assert!(!f.over_budget(0, 0x10000));
    assert!(!f.over_budget(0x10000, 0x10000));
    assert!(f.over_budget(0x20000, 0x10000));
    assert_eq!(f.injected, 1);
    f.apply("bar1 0").unwrap();
    assert!(!f.over_budget(u64::MAX / 2, 0x10000));
    assert_eq!(f.apply("revoke now"), Ok(Action::RevokeNow));
}

#[test]
fn bad_commands_change_nothing() {
    let mut f = Faults::default();
    f.apply("fail dmabuf_map EINVAL nth 2").unwrap();
    f.apply("bar1 65536").unwrap();
    let before = f;
    for bad in [
        "",
        "fail",
        "fail nosuchop EIO nth 1",
        "fail get_pages EPERM nth 1",
        "fail get_pages EIO",
        "fail get_pages EIO nth 0",
        "fail get_pages EIO nth x",
        "fail get_pages EIO permille 1001 seed 1",
        "fail get_pages EIO permille 5",
        "fail get_pages EIO permille 5 seed",
        "fail get_pages EIO nth 1 extra",
        "fail dmabuf_map off extra",
        "bar1",
        "bar1 -1",
        "bar1 12 13",
        "revoke",
        "revoke later",
        "revoke now please",
        "revoke permille 5",
        "revoke permille 1001 seed 1",
        "revoke permille 5 seed 1 x",
        "revoke off now",
        "revoke every",
        "revoke every 0",
        "revoke every 60001",
        "revoke every 5 ms",
        "revoke every -5",
        "remove",
        "remove orderly",
        "remove surprise now",
        "callback",
        "callback delay",
        "callback delay 1000001",
        "callback delay 5 6",
        "callback context",
        "callback context softirq",
        "callback context thread extra",
    ] {
        assert_eq!(f.apply(bad), Err(FaultError), "{bad:?}");
        assert_eq!(f, before, "{bad:?} changed the controls");
    }
}

#[test]
fn renders_what_is_set() {
    let mut f = Faults::default();
    f.apply("fail get_pages ENOTSUPP permille 10 seed 42")
        .unwrap();
    let text = f.to_string();
    assert!(
        text.contains("fail get_pages ENOTSUPP permille 10 seed 42 (calls 0)"),
        "{text}"
    );
    assert!(
        text.contains("bar1 0\ncallback delay 0\ncallback context thread\ninjected 0\nrevoked 0\n"),
        "{text}"
    );
}

#[test]
fn random_revocation_replays() {
    let run = || {
        let mut f = Faults::default();
        f.apply("revoke permille 300 seed 11").unwrap();
        assert!(f.any());
        (0..2000).map(|_| f.roll_revoke()).collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    let n = a.iter().filter(|x| x.is_some()).count();
    assert!((450..750).contains(&n), "{n} of 2000 at 30%");
    let mut f = Faults::default();
    f.apply("revoke permille 1000 seed 1").unwrap();
    f.apply("revoke off").unwrap();
    assert_eq!(f.roll_revoke(), None);
    assert!(!f.any());
}

#[test]
fn callback_controls() {
    let mut f = Faults::default();
    f.apply("callback delay 250000").unwrap();
    f.apply("callback context workqueue").unwrap();
    assert_eq!((f.callback_delay_us, f.callback_in_worker), (250_000, true));
    assert!(f.any());
    f.apply("callback delay 0").unwrap();
    f.apply("callback context thread").unwrap();
    assert!(!f.any());
}

#[test]
fn periodic_revocation() {
    let mut f = Faults::default();
    assert_eq!(f.apply("revoke every 250"), Ok(Action::RevokeEvery(250)));
    assert_eq!(f.revoke_every_ms, 250);
    assert!(f.any());
    assert!(
        f.to_string().lines().any(|l| l == "revoke every 250"),
        "{f}"
    );
    assert_eq!(
        f.apply("revoke every 60000"),
        Ok(Action::RevokeEvery(60_000))
    );
    f.apply("revoke permille 5 seed 1").unwrap();
    // `revoke off` stops both kinds of revocation, and tells the caller to stop the timer.
    assert_eq!(f.apply("revoke off"), Ok(Action::RevokeEvery(0)));
    assert_eq!(f.revoke_every_ms, 0);
    assert_eq!(f.roll_revoke(), None);
    assert!(!f.any());
    assert!(!f.to_string().contains("revoke every"), "{f}");
}

#[test]
fn surprise_removal_is_an_action_not_a_setting() {
    let mut f = Faults::default();
    assert_eq!(f.apply("remove surprise"), Ok(Action::RemoveSurprise));
    assert_eq!(f, Faults::default());
}
