# SPDX-License-Identifier: GPL-2.0
#
# Scenario "p2p": the nvidia_p2p API end to end. A process allocates GPU
# memory through /dev/nvrs; the C consumer (an RDMA-driver stand-in bound to
# edu) pins it in that process's context, DMA-maps it for edu through the
# IOMMU, and has edu DMA patterns into it, checked by DMA readback, through
# the guest CPU mapping and, after the VM, in the GPU's backing file.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
check "/dev/nvrs exists" test -c /dev/nvrs
GPU1=$(nvrs_bound | sed -n 2p)
EDU=$(pci_functions 0x1234 0x11e8)
announce_apertures

# pins_phys: the physical address of the first page of each pin the last
# tool run made, one a line (the consumer's "pinned ... phys0 P" replies).
pins_phys() {
	sed -n 's/^pinned va .* phys0 \(0x[0-9a-f]*\) .*/\1/p' /tmp/tool.out
}

# same_memory DESCRIPTION: the last tool run made exactly two pins, and both
# start at the same physical address: the second allocation got the memory
# the first one freed. Without this, reading zeros proves nothing: memory
# never handed out before reads zero too.
same_memory() {
	_pp=$(pins_phys)
	if [ "$(echo "$_pp" | wc -w)" = 2 ] && [ "$(echo "$_pp" | sort -u | wc -l)" = 1 ]; then
		ok "$1 (phys $(echo "$_pp" | sed -n 1p))"
	else
		not_ok "$1 (pins at: $(echo $_pp))"
	fi
}

tool "pin, map for edu, DMA and verify on GPU0 (2 KiB at two offsets)" \
	count \; info 0 \; alloc A 0 4M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; \
	ctl dma 0 0 0x11110000 \; ctl dma 0 0x110000 0x22220000 \; sh "$HOSTSYNC" \; \
	rd A 0 0x11110000 \; rd A 0x110004 0x22220001 \; \
	ctl status 0 \; ctl unmap 0 \; ctl put 0 \; free A
check "  pinned: 2 MiB in 32 entries of 64 KiB" grep -qE "^pinned va 0x[0-9a-f]+ len 0x200000 entries 32 " /tmp/tool.out
check "  mapped for edu ($EDU): 32 entries" grep -qE "^mapped for $EDU entries 32 " /tmp/tool.out
check "  the status while mapped" grep -qx "slot 0 pinned 1 mapped 1 persistent 0 callbacks 0" /tmp/tool.out
GPU0=$(nvrs_bound | sed -n 1p)
tool "NVRS_IOCTL_GPU_STATS: memory, pins and mappings as nvrs holds them" \
	stats 0 \; alloc A 0 4M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; stats 0 \; \
	ctl put 0 \; free A \; stats 0 \; !ENODEV stats 9 \; !EFAULT raw 0xc138e504 0x10
check "  total as in pmm/stats, all free before" grep -q \
	"^stats gpu 0 version 4 fb_total $(fb_total $GPU0) fb_used 0 fb_free $(fb_total $GPU0) " /tmp/tool.out
check "  while pinned: 4 MiB used, one 2 MiB pin with one mapping" grep -qE \
	"^stats gpu 0 version 4 fb_total [0-9]+ fb_used 4194304 .* bar1_pinned 2097152 pins 1 dma_mappings 1 " \
	/tmp/tool.out
check "  per-size counts: 2 MiB chunks, two of them allocated" grep -qE \
	"^stats size 2097152 free [0-9]+ allocated 2 split 0 temp_pinned 0$" /tmp/tool.out
check "  after put and free: nothing used or pinned" sh -c \
	"sed -n '/^ok free/,\$p' /tmp/tool.out | grep -qE '^stats gpu 0 .* fb_used 0 .* bar1_pinned 0 pins 0 dma_mappings 0 '"
# A freed root goes back at the head of the free list, so the next 2 MiB
# allocation gets the same memory; a pin of each tells where it is.
tool "freed memory is scrubbed before reuse" \
	alloc A 1 2M \; wr A 0x20000 0xdeadbeef \; ctl pin 0 @A 0x200000 \; ctl put 0 \; free A \; \
	alloc B 1 2M \; ctl pin 0 @B 0x200000 \; rd B 0x20000 0 \; ctl put 0 \; free B
same_memory "  the second allocation got the memory the first one wrote"
tool "  NVRS_ALLOC_ZERO is accepted (all memory is zeroed)" \
	alloc A 1 2M \; wr A 0x20000 0xdeadbeef \; ctl pin 0 @A 0x200000 \; ctl put 0 \; free A \; \
	alloc C 1 2M zero \; ctl pin 0 @C 0x200000 \; rd C 0x20000 0 \; ctl put 0 \; free C
same_memory "  again the memory the first allocation wrote"
tool "freeing removes the CPU mappings: a stale one faults" alloc A 1 2M \; !EFAULT usefree A
tool "  so does process exit with the memory still mapped" alloc A 1 2M \; wr A 0 1
check "  and the exit gave the memory back" \
	grep -q "^free_bytes: $(fb_total $GPU1)\$" $D/$GPU1/pmm/stats
tool "the same on GPU1" \
	alloc A 1 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; \
	ctl dma 0 0x1f0000 0x33330000 \; sh "$HOSTSYNC" \; rd A 0x1f0000 0x33330000 \; ctl put 0 \; free A
# A pin that starts inside a piece and crosses into the next ones: a 2 MiB
# root then two 64 KiB pieces, pinned from the root's last page on. Each
# entry must be its own page, wherever in its piece it lies.
tool "a pin from inside a root across two 64 KiB pieces maps its own pages" \
	alloc A 0 0x220000 \; ctl pin 0 @A+0x1f0000 0x30000 \; ctl map 0 \; \
	ctl dma 0 0x1000 0x77770000 \; ctl dma 0 0x11000 0x78780000 \; \
	ctl dma 0 0x21000 0x79790000 \; sh "$HOSTSYNC" \; \
	rd A 0x1f1000 0x77770000 \; rd A 0x201000 0x78780000 \; rd A 0x211000 0x79790000 \; \
	rd A 0x1000 0 \; ctl put 0 \; free A
check "  pinned: 3 entries" grep -qE "^pinned va 0x[0-9a-f]+ len 0x30000 entries 3 " /tmp/tool.out
# 8200 pins fill the quarantine ring (8192 tables), so the next tables are
# reused ones: they must describe their own memory, not their last pin's.
tool "a table reused from the full quarantine ring maps its own memory" \
	alloc B 0 2M \; alloc A 0 2M \; ctl benchpin @B 0x10000 8200 \; \
	ctl pin 0 @A 0x10000 \; ctl map 0 \; ctl dma 0 0x1000 0x66660000 \; sh "$HOSTSYNC" \; \
	rd A 0x1000 0x66660000 \; rd B 0x1000 0 \; ctl put 0 \; free A \; free B
check "  the 8200 pins were made" grep -qE "^benchpin len 65536 ns_per_op [0-9]+ entries 1 " /tmp/tool.out
tool "CPU writes through mmap are seen by the peer's DMA" \
	alloc A 0 2M \; wr A 0x10000 0x5a5a5a5a \; ctl pin 0 @A 0x20000 \; ctl map 0 \; \
	ctl dma 0 0x1000 0x44440000 \; sh "$HOSTSYNC" \; rd A 0x10000 0x5a5a5a5a \; ctl put 0 \; free A
tool "GPU0 memory mapped for GPU1 as the peer" \
	alloc A 0 2M \; ctl pin 0 @A 0x100000 \; ctl map 0 $GPU1 \; ctl unmap 0 \; ctl put 0 \; free A
check "  mapped for GPU1 ($GPU1): 16 entries" grep -qE "^mapped for $GPU1 entries 16 " /tmp/tool.out
tool "a contiguous 8 MiB allocation maps as one run" \
	alloc A 0 8M contig \; ctl pin 0 @A 0x800000 \; ctl map 0 \; ctl put 0 \; free A
check "  mapped for edu: 128 entries" grep -qE "^mapped for $EDU entries 128 " /tmp/tool.out
if [ "$NVRS_IOMMU" = on ]; then
	# Per-page mapping would hand out 128 separate IOVAs; coalesced, it is one.
	check "contiguous mapping reported one run" grep -qE "^mapped for $EDU entries 128 .* runs 1$" /tmp/tool.out
fi
# Freed roots go back on the free list newest first, so the next allocation
# gets them in reverse; its pieces are put back in address order, so that a
# pin of it still maps as one run.
tool "memory freed and allocated again maps as one run" \
	alloc A 0 8M contig \; free A \; alloc B 0 8M \; ctl pin 0 @B 0x800000 \; ctl map 0 \; \
	ctl put 0 \; free B
check "  mapped for edu: 128 entries" grep -qE "^mapped for $EDU entries 128 " /tmp/tool.out
if [ "$NVRS_IOMMU" = on ]; then
	check "  one run, not four" grep -qE "^mapped for $EDU entries 128 .* runs 1$" /tmp/tool.out
fi

tool "free while pinned fires the callback once and tears the mapping down" \
	alloc A 0 2M \; ctl pin 1 @A 0x100000 \; ctl map 1 \; free A \; ctl status 1 \; \
	ctl unmap 1 \; ctl put 1
check "callback fired exactly once" grep -q "slot 1 pinned 0 mapped 1 persistent 0 callbacks 1" /tmp/tool.out
# An ended pin's object is kept and reused by the next pin: the new pin must
# call its own callback with its own data, and the old one none.
tool "a pin reusing an ended pin's object is revoked through its own callback" \
	alloc A 0 2M \; ctl pin 8 @A 0x10000 \; ctl put 8 \; ctl pin 9 @A 0x10000 \; \
	free A \; ctl status 8 \; ctl status 9 \; ctl put 9
check "  the ended pin's callback did not fire" grep -q "slot 8 pinned 0 mapped 0 persistent 0 callbacks 0" /tmp/tool.out
check "  the new pin's callback fired once" grep -q "slot 9 pinned 0 mapped 0 persistent 0 callbacks 1" /tmp/tool.out
tool "process exit revokes its pins" alloc A 0 2M \; ctl pin 2 @A 0x10000
tool "the exit's callback fired" ctl status 2
check "callbacks 1 after exit" grep -qE "callbacks 1$" /tmp/tool.out

tool "a persistent pin survives free, keeps working, and is put" \
	alloc A 0 2M \; ctl ppin 3 @A 0x200000 \; ctl map 3 \; free A \; \
	ctl dma 3 0x2000 0x66660000 \; sh "$HOSTSYNC" \; ctl status 3 \; ctl put 3
check "no callback for the persistent pin" grep -q "persistent 1 callbacks 0" /tmp/tool.out

tool "bad-input matrix" \
	alloc A 0 2M \; ctl pin 15 @A 0x100000 \; ctl badinput @A 0x100000 \; \
	!EINVAL child ctl pin 4 @A 0x10000 \; \
	ctl put 15 \; ctl put 15 \; free A \; !EINVAL ctl pin 5 @A 0x10000
tool "ioctl bad inputs" \
	!EINVAL alloc B 0 0 \; !EINVAL alloc B 0 4096 \; !ENODEV alloc B 9 64K \; \
	!EINVAL alloc B 0 64K 0x80 \; !ENOMEM alloc B 0 1G \; !ENOMEM alloc B 0 0x7fffffffffff0000 \; \
	!ENOMEM alloc B 0 0xffffffffffff0000 \; !ENOENT freeva 0x1234 \; \
	!ENOTTY raw 0x1234 0 \; !EFAULT raw 0xc018e502 0x10 \; !ENODEV info 7
tool "the whole memory can be pinned; then allocation fails cleanly" \
	alloc A 1 $(( $(fb_total $GPU1) / 1024 ))K \; ctl pin 6 @A $(fb_total $GPU1) \; \
	!ENOMEM alloc B 1 64K \; ctl put 6 \; free A
check "  the pin covers all of it" grep -qE \
	"^pinned va 0x[0-9a-f]+ len $(printf 0x%x $(fb_total $GPU1)) entries $(($(fb_total $GPU1) / 65536)) " \
	/tmp/tool.out

GPU0=$(nvrs_bound | sed -n 1p)
dmesg_mark
tool "8 threads race pin/put/free/callback for 5 s" race 0 5
check "  they raced (operations done, none failed)" grep -qE "^race: [1-9][0-9]* operations, 0 errors$" /tmp/tool.out
check "no pins left" grep -qx "pins: 0" $D/p2p
check "GPU0 memory all free again" sh -c \
	"grep -q \"^free_bytes: $(fb_total $GPU0)\$\" $D/$GPU0/pmm/stats"

# Hot-unplug of a GPU with a pin outstanding revokes it.
tool "hot-unplug GPU1 with a pin outstanding" \
	alloc A 1 2M \; ctl pin 7 @A 0x100000 \; ctl map 7 \; \
	sh "echo 1 > /sys/bus/pci/devices/$GPU1/remove" \; ctl status 7 \; ctl put 7
check "unplug fired the callback" grep -q "slot 7 pinned 0 mapped 1 persistent 0 callbacks 1" /tmp/tool.out
check "rescan brings GPU1 back" sh -c "echo 1 > /sys/bus/pci/rescan; test -e /sys/bus/pci/drivers/nvrs/$GPU1"

check "rmmod consumer" rmmod nvrs_consumer
check "no pins left at the end" grep -qx "pins: 0" $D/p2p
check "rmmod nvrs" rmmod nvrs

# The other side of the coalescing check: without it, one mapping per 64 KiB page.
if [ "$NVRS_IOMMU" = on ]; then
	check "insmod nvrs p2p_coalesce=0" insmod $M/nvrs.ko emulated=1 p2p_coalesce=0
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	tool "a contiguous 8 MiB allocation, mapped page by page" \
		alloc A 0 8M contig \; ctl pin 0 @A 0x800000 \; ctl map 0 \; \
		sh "grep -q 'mappings 1 runs 128' $D/p2p" \; ctl put 0 \; free A
	check "rmmod consumer" rmmod nvrs_consumer
	check "rmmod nvrs" rmmod nvrs
fi
done_testing
