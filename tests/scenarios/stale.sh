# SPDX-License-Identifier: GPL-2.0
#
# Scenario "stale": pointers a consumer keeps after nvrs ended their pin, and
# repeated mappings of the same memory.
#
# A revoked pin's table pointer is the normal stale pointer of the
# nvidia_p2p protocol: the free callback fired, the consumer still holds the
# table and puts it later. However many pins end in between (the table
# quarantine ring holds 8192), that pointer must not name a newer pin: a put
# through it must not end another pin, a dma_map through it must not map one.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

# A VA space of 2 MiB: a 2 MiB allocation after a free gets the freed VA.
check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 va_space_mib=2
check "insmod consumer" insmod $M/nvrs_consumer.ko

# Three times the ring's capacity, and more: on a ring alone the kept table
# comes back within 8192 pins.
N=$((3 * 8192 + 100))
tool "a revoked pin's table, kept past $N pins of its VA, reaches no newer pin" \
	alloc A 0 2M \; ctl pin 1 @A 0x10000 \; ctl keep 1 \; free A \; ctl status 1 \; \
	alloc A 0 2M \; ctl stalewrap 1 @A 0x10000 $N \; free A
check "  the revocation fired the callback" \
	grep -q "^slot 1 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  no new pin got the kept table; the stale calls left the newest pin alone" \
	grep -qE "^stalewrap pins $N same_table 0 stale_map -22 stale_put 0 newest_map 0 callbacks 0$" \
	/tmp/tool.out
check "no pins left" grep -qx "pins: 0" $D/p2p

# DMA-API debug counts the mappings of a cacheline and warns past 7; the
# runner fails the run on a WARNING.
tool "one pin mapped 9 times at once for edu" \
	alloc A 0 2M \; ctl pin 0 @A 0x20000 \; ctl map 0 \; ctl mapmany 0 8 \; \
	ctl pin 2 @A 0x20000 \; ctl mapmany 2 8 \; ctl put 2 \; ctl put 0 \; free A
check "  all mappings made" sh -c "test \$(grep -c '^mapmany 8 of 8$' /tmp/tool.out) = 2"
check "no pins left" grep -qx "pins: 0" $D/p2p

check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

# Tombs are bounded (here to 16, test_tombs_max), and consumers that follow
# NVIDIA's protocol (the free callback frees the table, nothing puts it) must
# not use them up: nvidia_p2p_free_page_table() ends a revoked pin's tomb.
# Otherwise the set fills for good and each revocation evicts a tomb that is
# still wanted, here the kept table of a consumer that puts late, whose
# address then comes back in the ring once 8192 more tables ended after it.
check "insmod nvrs (16 tombs at most)" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 \
	va_space_mib=2 test_tombs_max=16
check "insmod consumer" insmod $M/nvrs_consumer.ko
FLOOD=$((16 + 8192 + 100))
tool "a kept revoked table, then $FLOOD pins revoked from NVIDIA-protocol consumers" \
	alloc A 0 2M \; ctl pin 1 @A 0x10000 \; ctl keep 1 \; free A \; ctl status 1 \; \
	tombflood 0 2M $FLOOD 2
check "  the kept pin's revocation fired its callback" \
	grep -q "^slot 1 pinned 0 mapped 0 persistent 0 callbacks 1$" /tmp/tool.out
check "  every pin of the flood was revoked" grep -qx "tombflood $FLOOD revoked" /tmp/tool.out
check "  only the kept pin's tomb is left (the flood's tables were freed)" grep -qx "tombs: 1" $D/p2p
tool "stale calls with the kept table after the flood" \
	alloc A 0 2M \; ctl stalewrap 1 @A 0x10000 $N \; free A
check "  no new pin got the kept table; the stale calls left the newest pin alone" \
	grep -qE "^stalewrap pins $N same_table 0 stale_map -22 stale_put 0 newest_map 0 callbacks 0$" \
	/tmp/tool.out
check "no pins left" grep -qx "pins: 0" $D/p2p
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
