# SPDX-License-Identifier: GPL-2.0
#
# Scenario "compact": compaction moves movable GPU memory instead of failing
# an allocation that would fit. A process fills GPU0 with 64 KiB allocations,
# each mapped for the CPU and marked with a needle, and frees every other one:
# half the memory is free, none of it in a whole 2 MiB root. Some of the rest
# is pinned for edu (edu DMAs into it) and one is exported as a dma-buf. A
# 64 MiB contiguous allocation then succeeds only by compaction; every moved
# allocation must read its needle through its old mapping and be found in the
# backing file, and every pinned one must keep its physical address and data,
# with edu's DMA still landing in it.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU0=$(nvrs_bound | sed -n 1p)
GPU1=$(nvrs_bound | sed -n 2p)
announce_apertures

# pinned phys before and after, in slot order, from the consumer's "dma ok" lines.
pinned_phys() {
	sed -n 's/^dma ok phys \(0x[0-9a-f]*\) .*/\1/p' /tmp/tool.out
}

tool "fragment GPU0, pin and export some of it, then allocate 64 MiB contiguous" \
	frag 0 \; fragpin 10 0 \; fragpin 11 700 \; fragpin 12 1400 \; fragpin 13 2100 \; \
	fragexport 2800 \; \
	ctl map 10 \; ctl map 11 \; ctl map 12 \; ctl map 13 \; \
	ctl dma 10 0x8000 0x61610000 \; ctl dma 11 0x8000 0x61620000 \; \
	ctl dma 12 0x8000 0x61630000 \; ctl dma 13 0x8000 0x61640000 \; sh "$HOSTSYNC" \; \
	stats 0 \; sh "cat $D/$GPU0/pmm/stats" \; \
	alloc Z 0 64M contig \; stats 0 \; sh "cat $D/$GPU0/pmm/stats" \; fragcheck \; \
	ctl dma 10 0x8000 0x62610000 \; ctl dma 11 0x8000 0x62620000 \; \
	ctl dma 12 0x8000 0x62630000 \; ctl dma 13 0x8000 0x62640000 \; sh "$HOSTSYNC" \; \
	zero Z \; wr Z 0x3ff0000 0x64646464 \; rd Z 0x3ff0000 0x64646464 \; \
	ctl put 10 \; ctl put 11 \; ctl put 12 \; ctl put 13
check "  half of GPU0 was free, in 64 KiB pieces only" grep -qE \
	"^stats gpu 0 version 4 .* largest_free 65536 .* compactions 0 " /tmp/tool.out
check "  the 64 MiB allocation succeeded" grep -qE "^alloc Z va 0x[0-9a-f]+ size 67108864" /tmp/tool.out
check "  by one compaction that moved 32 MiB (the used half of 32 roots)" grep -qE \
	"^stats gpu 0 version 4 .* compactions 1 compacted_bytes 33554432$" /tmp/tool.out
check "  every kept allocation reads its needle through its mapping" \
	grep -qE "^fragcheck [0-9]+ kept, 0 wrong$" /tmp/tool.out
# Eight DMAs (four pins, before and after): two empty lists would compare equal.
expect_eq "  eight DMAs into the pinned chunks" 8 "$(pinned_phys | wc -l)"
before=$(pinned_phys | sed -n 1,4p)
after=$(pinned_phys | sed -n 5,8p)
if [ "$(echo $before | wc -w)" = 4 ] && [ "$before" = "$after" ]; then
	ok "  pinned chunks kept their physical addresses"
else
	not_ok "  pinned chunks kept their physical addresses (before: $(echo $before); after: $(echo $after))"
fi
check "  pmm/stats reports the compaction" grep -qE \
	"^compactions: 1 moved_chunks: 512 moved_bytes: 33554432$" /tmp/tool.out
check "  and the largest free block before and after it" grep -qE \
	"^last_compaction: largest_free 65536 -> [0-9]+," /tmp/tool.out
check_all_returned

# --- The debugfs trigger, and the policy switch --------------------------------
tool "debugfs compact on GPU1: fragment it, ask for 16 free roots, then allocate 32 MiB" \
	frag 1 \; sh "echo 16 > $D/$GPU1/compact" \; stats 1 \; alloc Z 1 32M contig \; stats 1 \; \
	fragcheck \; sh "$HOSTSYNC"
check "  the trigger compacted once and the allocation needed no second compaction" sh -c \
	"grep -qE '^stats gpu 1 .* compactions 1 ' /tmp/tool.out && \
	 ! grep -qE '^stats gpu 1 .* compactions 2 ' /tmp/tool.out"
check "  one dmesg line tells what it moved" sh -c \
	"dmesg | grep -q 'compaction for 16 free roots: moved 256 of 256 planned chunks, 16 MiB'"
# A missing file refuses every write too: it must be there.
check "  compact refuses anything but a positive number" sh -c \
	"test -w $D/$GPU1/compact && ! echo abc > $D/$GPU1/compact && ! echo 0 > $D/$GPU1/compact"
check "  and a goal no plan can reach" sh -c \
	"test -w $D/$GPU1/compact && ! echo 100000 > $D/$GPU1/compact"
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
check "insmod nvrs compact_on_alloc=0" insmod $M/nvrs.ko emulated=1 compact_on_alloc=0
tool "without compaction the same request fails (-ENOMEM)" \
	frag 0 \; !ENOMEM alloc Z 0 64M contig \; sh "echo 32 > $D/$GPU0/compact" \; \
	alloc Z 0 64M contig \; fragcheck \; sh "$HOSTSYNC"
check_all_returned
check "rmmod nvrs" rmmod nvrs
done_testing
