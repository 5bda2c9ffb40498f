// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `nvrs_topology`: link classification and the P2P gate inside the kernel, on
//! synthetic topologies (the live ones are checked by `tests/scenarios/topology.sh`), and the
//! invalidation rule of the remembered P2PDMA distances.

use kernel::prelude::*;

#[kunit_tests(nvrs_topology)]
mod tests {
    use kernel::prelude::*;

    use crate::topology::cache::{
        DistanceCache,
        Entry,
        Lookup, //
    };
    use crate::topology::link::{
        classify,
        p2p_allowed,
        Endpoint,
        GateOverride,
        Hop,
        Link,
        NvLinkEnd,
        PortKind, //
    };

    fn hop(id: u64, kind: PortKind) -> Hop {
        Hop { id, kind }
    }

    fn ep(id: u64, hb: u32, numa: Option<u16>, hops: &[Hop]) -> Result<Endpoint> {
        Endpoint::new(id, hb, numa, hops).map_err(|_| E2BIG)
    }

    #[test]
    fn switch_root_and_nvlink() -> Result {
        let rp = hop(0xe0, PortKind::RootPort);
        let up = hop(0x100, PortKind::SwitchUpstream);
        let mut a = ep(
            0x300,
            0,
            Some(0),
            &[rp, up, hop(0x200, PortKind::SwitchDownstream)],
        )?;
        let mut b = ep(
            0x400,
            0,
            Some(0),
            &[rp, up, hop(0x208, PortKind::SwitchDownstream)],
        )?;
        assert_eq!(classify(&a, &b), Link::Pix);
        assert_eq!(
            classify(&ep(0x10, 0, None, &[])?, &ep(0x18, 0, None, &[])?),
            Link::Phb
        );
        a.nvlink = Some(NvLinkEnd {
            index: 0,
            peers: 2,
            links: 4,
        });
        b.nvlink = Some(NvLinkEnd {
            index: 1,
            peers: 1,
            links: 4,
        });
        assert_eq!(classify(&a, &b), Link::Nv(4));
        Ok(())
    }

    #[test]
    fn numa_and_gate() -> Result {
        let a = ep(0x100, 0x00, Some(0), &[hop(0xe0, PortKind::RootPort)])?;
        let b = ep(0x8100, 0x80, Some(1), &[hop(0x80e0, PortKind::RootPort)])?;
        assert_eq!(classify(&a, &b), Link::Sys);
        assert!(!p2p_allowed(Link::Sys, 0, GateOverride::Auto));
        assert!(!p2p_allowed(Link::Phb, -1, GateOverride::Auto));
        assert!(p2p_allowed(Link::Phb, -1, GateOverride::AllowAll));
        Ok(())
    }

    #[test]
    fn distance_cache_generation() -> Result {
        let e = Entry {
            provider: 0x300,
            client: 0x700,
            distance: 4,
        };
        let mut c = DistanceCache::new();
        let Lookup::Miss(g) = c.lookup(e.provider, e.client) else {
            return Err(EINVAL);
        };
        // A hotplug event while the kernel was asked: the answer is not stored.
        c.invalidate();
        assert!(!c.store(g, e));
        assert_eq!(c.stats().dropped, 1);
        let Lookup::Miss(g2) = c.lookup(e.provider, e.client) else {
            return Err(EINVAL);
        };
        assert!(g != g2);
        assert!(c.store(g2, e));
        assert_eq!(c.lookup(e.provider, e.client), Lookup::Hit(4));
        // The next event forgets the pair.
        c.invalidate();
        assert_eq!(c.stats().entries, 0);
        assert!(matches!(c.lookup(e.provider, e.client), Lookup::Miss(_)));
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.invalidations), (1, 3, 2));
        Ok(())
    }
}
