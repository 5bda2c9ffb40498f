// SPDX-License-Identifier: GPL-2.0

//! Host tests of link classification on several topologies.

use crate::topology::link::{
    classify, Endpoint, Hop, Link, Matrix, NvLinkEnd, P2pPath, PortKind, MAX_HOPS,
};

const RP: PortKind = PortKind::RootPort;
const UP: PortKind = PortKind::SwitchUpstream;
const DP: PortKind = PortKind::SwitchDownstream;

fn hop(id: u64, kind: PortKind) -> Hop {
    Hop { id, kind }
}

fn ep(id: u64, host_bridge: u32, numa: Option<u16>, hops: &[Hop]) -> Endpoint {
    Endpoint::new(id, host_bridge, numa, hops).unwrap()
}

/// The default test VM: root port 00:1c.0, switch 01:00.0 (up) with downstream ports
/// 02:00.0/02:01.0/02:02.0, GPUs at 03:00.0 and 04:00.0, edu at 05:00.0.
fn switch_vm() -> (Endpoint, Endpoint, Endpoint) {
    let rp = hop(0x00e0, RP);
    let up = hop(0x0100, UP);
    let g0 = ep(0x0300, 0, Some(0), &[rp, up, hop(0x0200, DP)]);
    let g1 = ep(0x0400, 0, Some(0), &[rp, up, hop(0x0208, DP)]);
    let edu = ep(0x0500, 0, Some(0), &[rp, up, hop(0x0210, DP)]);
    (g0, g1, edu)
}

#[test]
fn same_switch_is_pix() {
    let (g0, g1, edu) = switch_vm();
    assert_eq!(classify(&g0, &g1), Link::Pix);
    assert_eq!(classify(&g0, &edu), Link::Pix);
    assert_eq!(classify(&g0, &g0), Link::Itself);
    assert_eq!(P2pPath::of(Link::Pix), P2pPath::PcieSwitch);
}

#[test]
fn root_bus_is_phb() {
    // --topology root: every endpoint on bus 0, no bridges.
    let g0 = ep(0x0010, 0, None, &[]);
    let g1 = ep(0x0018, 0, None, &[]);
    assert_eq!(classify(&g0, &g1), Link::Phb);
    // Two root ports of one root complex.
    let a = ep(0x0100, 0, Some(0), &[hop(0x00e0, RP)]);
    let b = ep(0x0200, 0, Some(0), &[hop(0x00e8, RP)]);
    assert_eq!(classify(&a, &b), Link::Phb);
    assert_eq!(P2pPath::of(Link::Phb), P2pPath::HostBridge);
}

#[test]
fn nested_switches_are_pxb() {
    let rp = hop(0x00e0, RP);
    let up1 = hop(0x0100, UP);
    let a = ep(
        0x0400,
        0,
        Some(0),
        &[rp, up1, hop(0x0200, DP), hop(0x0300, UP), hop(0x0400, DP)],
    );
    let b = ep(0x0600, 0, Some(0), &[rp, up1, hop(0x0208, DP)]);
    assert_eq!(classify(&a, &b), Link::Pxb);
    assert_eq!(classify(&b, &a), Link::Pxb);
    // Both below the same inner switch: one switch.
    let c = ep(
        0x0500,
        0,
        Some(0),
        &[rp, up1, hop(0x0200, DP), hop(0x0300, UP), hop(0x0408, DP)],
    );
    assert_eq!(classify(&a, &c), Link::Pix);
}

#[test]
fn host_bridges_and_numa() {
    let a = ep(0x0100, 0x00, Some(0), &[hop(0x00e0, RP)]);
    let b = ep(0x4100, 0x40, Some(0), &[hop(0x40e0, RP)]);
    let c = ep(0x8100, 0x80, Some(1), &[hop(0x80e0, RP)]);
    assert_eq!(classify(&a, &b), Link::Node);
    assert_eq!(classify(&a, &c), Link::Sys);
    assert_eq!(P2pPath::of(Link::Sys), P2pPath::Unsupported);
    assert_eq!(P2pPath::of(Link::Node), P2pPath::Unsupported);
}

#[test]
fn nvlink_needs_both_ends() {
    let (mut g0, mut g1, edu) = switch_vm();
    g0.nvlink = Some(NvLinkEnd {
        index: 0,
        peers: 0b10,
        links: 4,
    });
    assert_eq!(
        classify(&g0, &g1),
        Link::Pix,
        "one-sided declaration is not a link"
    );
    g1.nvlink = Some(NvLinkEnd {
        index: 1,
        peers: 0b01,
        links: 4,
    });
    assert_eq!(classify(&g0, &g1), Link::Nv(4));
    assert_eq!(classify(&g1, &g0), Link::Nv(4));
    assert_eq!(classify(&g0, &edu), Link::Pix);
    assert_eq!(P2pPath::of(Link::Nv(4)), P2pPath::NvLink);
    // An index past the mask width never matches.
    g1.nvlink = Some(NvLinkEnd {
        index: 40,
        peers: 0b01,
        links: 4,
    });
    assert_eq!(classify(&g0, &g1), Link::Pix);
}

#[test]
fn bridge_chains_are_bounded() {
    let hops = [hop(0, RP); MAX_HOPS + 1];
    assert!(Endpoint::new(0, 0, None, &hops).is_err());
    assert_eq!(
        Endpoint::new(0, 0, None, &hops[..MAX_HOPS])
            .unwrap()
            .hops()
            .len(),
        MAX_HOPS
    );
}

#[test]
fn matrix_matches_nvidia_smi_layout() {
    let (mut g0, mut g1, edu) = switch_vm();
    g0.nvlink = Some(NvLinkEnd {
        index: 0,
        peers: 0b10,
        links: 4,
    });
    g1.nvlink = Some(NvLinkEnd {
        index: 1,
        peers: 0b01,
        links: 4,
    });
    let gpus = [g0, g1];
    let peers = [edu];
    let m = Matrix {
        gpus: &gpus,
        peers: &peers,
        cpu_affinity: &["0-1", "0-1"],
    };
    let text = m.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>()[..3],
        ["GPU0", "GPU1", "NIC0"]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["GPU0", "X", "NV4", "PIX", "0-1", "0", "N/A"]
    );
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>()[..4],
        ["GPU1", "NV4", "X", "PIX"]
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        ["NIC0", "PIX", "PIX", "X"]
    );
    assert!(text.contains("NIC0: 0000:05:00.0"));
    assert!(text.contains("NV#  = Connection traversing a bonded set of # NVLinks"));
}

#[test]
fn p2p_gate() {
    use crate::topology::link::{p2p_allowed, GateOverride::*};
    assert!(
        p2p_allowed(Link::Pix, -1, Auto),
        "switch paths do not need the kernel's allow-list"
    );
    assert!(p2p_allowed(Link::Nv(2), -1, Auto));
    assert!(!p2p_allowed(Link::Phb, -1, Auto));
    assert!(p2p_allowed(Link::Phb, 2, Auto));
    assert!(!p2p_allowed(Link::Sys, 10, Auto));
    assert!(p2p_allowed(Link::Sys, -1, AllowAll));
    assert!(!p2p_allowed(Link::Nv(18), 0, DenyAll));
    assert_eq!(crate::topology::link::GateOverride::from_param(7), Auto);
}

#[test]
fn wide_pci_domains_are_told_apart() {
    use crate::topology::link::Bdf;
    // VMD puts devices in domains 0x10000 and up: they must not alias domain 0.
    let vmd = ep(
        0x1_0000_0300,
        0x1_0000 << 8,
        Some(0),
        &[hop(0x1_0000_00e0, RP)],
    );
    let dom0 = ep(0x0300, 0, Some(0), &[hop(0x00e0, RP)]);
    assert_ne!(classify(&vmd, &dom0), Link::Itself);
    assert_eq!(Bdf(0x1_0000_0300).to_string(), "10000:03:00.0");
}

mod distance_cache {
    use proptest::prelude::*;

    use crate::topology::cache::{DistanceCache, Entry, Lookup, SLOTS};

    fn entry(pair: u8, distance: i32) -> Entry {
        Entry {
            provider: 0x0300 + u64::from(pair % 2) * 0x100,
            client: 0x0700 + u64::from(pair),
            distance,
        }
    }

    /// The race the generation closes: a lookup misses, a function is removed (the notifier
    /// empties the table), then the kernel's answer from before the removal arrives.
    #[test]
    fn answer_from_before_an_invalidation_is_dropped() {
        let mut c = DistanceCache::new();
        let e = entry(0, 4);
        let Lookup::Miss(g) = c.lookup(e.provider, e.client) else {
            panic!("an empty table hit");
        };
        c.invalidate();
        assert!(!c.store(g, e));
        assert!(matches!(c.lookup(e.provider, e.client), Lookup::Miss(_)));
        let s = c.stats();
        assert_eq!(
            (s.hits, s.misses, s.invalidations, s.dropped, s.entries),
            (0, 2, 1, 1, 0)
        );
    }

    #[test]
    fn same_pair_stored_twice_takes_one_slot() {
        let mut c = DistanceCache::new();
        let e = entry(1, 4);
        let (Lookup::Miss(g1), Lookup::Miss(g2)) = (
            c.lookup(e.provider, e.client),
            c.lookup(e.provider, e.client),
        ) else {
            panic!("an empty table hit");
        };
        assert!(c.store(g1, e));
        assert!(c.store(g2, Entry { distance: 6, ..e }));
        assert_eq!(c.stats().entries, 1);
        assert_eq!(c.lookup(e.provider, e.client), Lookup::Hit(6));
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A lookup of pair `n` starts (and, on a miss, asks the kernel).
        Start(u8),
        /// The oldest lookup still asking the kernel gets its answer.
        Finish,
        /// A PCI function is added or removed.
        Hotplug,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..24).prop_map(Op::Start),
            Just(Op::Finish),
            Just(Op::Hotplug),
        ]
    }

    proptest! {
        /// Every remembered distance was asked of the kernel after the last hotplug event,
        /// whatever the interleaving; the table holds at most `SLOTS` pairs and its counters add up.
        #[test]
        fn nothing_survives_a_hotplug(ops in prop::collection::vec(op(), 1..200)) {
            let mut c = DistanceCache::new();
            // The hierarchy's epoch: the distance the kernel answers encodes it.
            let mut epoch = 0i32;
            let mut asking: Vec<(u8, u64, i32)> = Vec::new();
            let (mut lookups, mut hotplugs) = (0u64, 0u64);
            for o in ops {
                match o {
                    Op::Start(n) => {
                        lookups += 1;
                        let e = entry(n, 0);
                        match c.lookup(e.provider, e.client) {
                            Lookup::Hit(d) => prop_assert_eq!(d, epoch, "stale distance"),
                            Lookup::Miss(g) => asking.push((n, g, epoch)),
                        }
                    }
                    Op::Finish => {
                        if !asking.is_empty() {
                            let (n, g, asked_in) = asking.remove(0);
                            let stored = c.store(g, entry(n, asked_in));
                            prop_assert_eq!(stored, asked_in == epoch);
                        }
                    }
                    Op::Hotplug => {
                        hotplugs += 1;
                        epoch += 1;
                        c.invalidate();
                    }
                }
                prop_assert!(c.entries().all(|e| e.distance == epoch));
                prop_assert!(c.stats().entries <= SLOTS);
            }
            let s = c.stats();
            prop_assert_eq!(s.hits + s.misses, lookups);
            prop_assert_eq!(s.invalidations, hotplugs);
        }
    }
}
