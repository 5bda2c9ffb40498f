# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bar1": nvrs hands out the GPU model's memory through BAR1, as
# NVIDIA's driver does. nvidia_p2p_get_pages maps the pinned 64 KiB pages into
# BAR1 and returns BAR1 addresses; edu, the DMA peer, writes and reads them
# through the IOMMU, and the runner's walker (tests/vm/gmmu.py, reading the
# VRAM file) finds each pattern in VRAM where BAR1's tables translate the
# address, and exactly the pinned pages mapped. A put unmaps them (the old
# address reads all-ones and the model counts the fault); a BAR1 smaller than
# the memory runs out (ENOMEM, counted) and recovers once pins are put; the
# GPU's unbind revokes a pin and leaves nothing mapped. CPU mappings and
# dma-bufs go through BAR1 as well: an export maps its range at a BAR1 run of
# its own, importers get those addresses, and the run is unmapped once the
# export stops holding the memory (its importers and file are gone, or the
# unbind revoked it). Compaction copies with the copy engine and points the
# moved pages' BAR1 entries at the copies.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

# nvrs lines at warning level or above (0-4), from the raw log's priority
# prefixes, but the one the unbind below prints on purpose.
loud() {
	dmesg -r | grep -E "^<[0-4]>" | grep -v "taints kernel" |
		grep -v "persistent pins hold" | grep -c nvrs
}

set -- $NVRS_MODEL_GPUS
expect_eq "the runner described GPU models" yes "$([ $# -gt 0 ] && echo yes || echo no)"
loud0=$(loud)
check "insmod nvrs bind_nvidia=1" insmod $M/nvrs.ko bind_nvidia=1
check "insmod consumer" insmod $M/nvrs_consumer.ko
i=0
for spec in "$@"; do
	model_fields "$spec"
	bdf=$(pci_functions 0x10de 0x$dev | head -n1)
	info=$D/$bdf/info
	if [ -z "$bdf" ] || ! [ -e "$info" ]; then
		not_ok "model $i ($chip): bound to nvrs"
		i=$((i + 1))
		continue
	fi
	inst=$(sed -n 's/^bar1_instance_block: //p' $info)
	# BAR1 is resource 1; its guest physical address is what peers use.
	base=$(sed -n 2p /sys/bus/pci/devices/$bdf/resource | cut -d' ' -f1)
	base=$(printf '0x%x' $((base)))
	echo "nvrs-hostcheck: bar1 $i $base $inst"
	expect_eq "$bdf: nvrs manages the VRAM below BAR1's tables" \
		$(((vram - 2) * 1024 * 1024)) "$(fb_total $bdf)"

	# Pin 4 MiB: 64 pages in BAR1; edu DMAs at two of them.
	tool "$bdf: 4 MiB pinned through BAR1, DMAed by edu" \
		alloc A $i 4M \; ctl pin 0 @A 0x400000 \; ctl map 0 \; \
		ctl dma 0 0 0x11110000 \; ctl dma 0 0x210000 0x22220000 \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 64 >\$NVRS_OUT; echo nvrs-hostcheck: bar1-patterns $i 2 >\$NVRS_OUT; $HOSTSYNC" \; \
		sh "nvrs-smi -q -i $bdf > /tmp/smi-q.txt 2>&1" \; \
		ctl status 0 \; ctl put 0 \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 0 >\$NVRS_OUT; $HOSTSYNC" \; free A
	# nvrs-smi -q, while pinned: BAR1's size, and what is mapped as its use.
	expect_eq "$bdf: nvrs-smi -q BAR1 Memory Usage while 4 MiB are pinned" \
		"Total : $bar1 MiB|Used : 4 MiB|" \
		"$(sed -n '/BAR1 Memory Usage/,/Free/p' /tmp/smi-q.txt | sed -nE 's/^ *(Total|Used) *: /\1 : /p' | tr '\n' '|')"
	phys=$(sed -n 's/.*dma ok phys \(0x[0-9a-f]*\) .*/\1/p' /tmp/tool.out | head -n1)
	expect_eq "$bdf: get_pages returned BAR1 addresses" yes \
		"$([ -n "$phys" ] && [ $((phys)) -ge $((base)) ] &&
			[ $((phys)) -lt $((base + bar1 * 1024 * 1024)) ] && echo yes || echo no)"
	# The old address no longer translates: it reads all-ones, and counts.
	if [ -n "$phys" ]; then
		off=$(printf '0x%x' $((phys - base)))
		nvrs-model-test $bdf unmapped $off 2>/tmp/model.err
		expect_eq "$bdf: after the put, BAR1 offset $off reads all-ones and faults" 0 $?
		while IFS= read -r l; do diag "  $l"; done </tmp/model.err
	fi
	expect_eq "$bdf: nothing of BAR1 handed out after the put" "0 B" \
		"$(sed -n 's/^bar1_mapped: //p' $info)"

	# BAR1 runs are taken next fit: a pin does not get the run the last one
	# released (a peer still holding the old address finds it unmapped, not
	# someone else's memory) until BAR1 has gone round.
	tool "$bdf: a new pin does not reuse the BAR1 run the last one released" \
		alloc A $i 2M \; ctl pin 0 @A 0x200000 \; ctl put 0 \; \
		ctl pin 1 @A 0x200000 \; ctl put 1 \; free A
	expect_eq "$bdf: two BAR1 addresses, different" 2 \
		"$(sed -n 's/^pinned .* phys0 \(0x[0-9a-f]*\) .*/\1/p' /tmp/tool.out | sort -u | wc -l)"

	# BAR1 smaller than memory: pin it all in 2 MiB pins until it runs out.
	n=$((bar1 / 2))
	tool "$bdf: $n pins of 2 MiB fill the $bar1 MiB BAR1 but its scrub slot" \
		alloc A $i 2M \; ctl pinmany @A 0x200000 $((n - 1)) \; \
		!ENOMEM ctl pin 0 @A 0x200000 \; ctl putmany \; ctl pin 0 @A 0x200000 \; \
		ctl put 0 \; free A
	expect_eq "$bdf: the refusal was counted" 1 "$(sed -n 's/^bar1_exhausted: //p' $info)"
	expect_eq "$bdf: BAR1 is free again" "0 B" "$(sed -n 's/^bar1_mapped: //p' $info)"

	# The GPU's unbind revokes a pin: its free callback runs. A persistent pin
	# survives it but loses BAR1 (the device keeps decoding BAR1 after the
	# unbind, so nothing may stay mapped): nothing is mapped once the unbind
	# returned (walked after it), and the later put is clean. The GPU binds
	# again with an empty BAR1.
	dmesg_mark
	tool "$bdf: the GPU's unbind revokes a pin and unmaps a persistent one" \
		alloc A $i 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; \
		alloc B $i 2M \; ctl ppin 1 @B 0x200000 \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 64 >\$NVRS_OUT; $HOSTSYNC" \; \
		sh "echo $bdf > /sys/bus/pci/drivers/nvrs/unbind" \; ctl status 0 \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 0 >\$NVRS_OUT; $HOSTSYNC" \; ctl put 1
	check "$bdf: the revocation called the free callback" \
		grep -qE "slot 0 pinned 0 mapped [01] persistent 0 callbacks 1" /tmp/tool.out
	expect_eq "$bdf: one line names the persistent pin left past the unbind" 1 \
		"$(dmesg_new | grep -c '1 persistent pins hold 2 MiB of GPU memory past removal')"
	check "$bdf: binds again" sh -c "echo $bdf > /sys/bus/pci/drivers/nvrs/bind"
	expect_eq "$bdf: with nothing of BAR1 handed out" "0 B" "$(sed -n 's/^bar1_mapped: //p' $info)"

	# CPU mappings go through BAR1 too: the CPU reads what edu wrote through the
	# pin's addresses, and its own write. BAR1 maps the 32 pages twice (the
	# pin's run and the allocation's CPU run); the free unmaps both.
	tool "$bdf: a CPU mapping through BAR1 reads edu's DMA and its own write" \
		alloc A $i 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; \
		ctl dma 0 0x30000 0x33330000 \; rd A 0x30000 0x33330000 \; \
		wr A 0x50000 0x5a5a5a5a \; rd A 0x50000 0x5a5a5a5a \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 64 32 >\$NVRS_OUT; echo nvrs-hostcheck: bar1-patterns $i 1 >\$NVRS_OUT; $HOSTSYNC" \; \
		ctl put 0 \; free A \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 0 >\$NVRS_OUT; $HOSTSYNC"
	expect_eq "$bdf: nothing of BAR1 handed out after the free" "0 B" \
		"$(sed -n 's/^bar1_mapped: //p' $info)"
	# A CPU mapping needs BAR1 room as a pin does.
	tool "$bdf: with BAR1 full of pins, mmap fails with ENOMEM" \
		alloc A $i 2M \; alloc B $i 2M \; ctl pinmany @A 0x200000 $((n - 1)) \; \
		!ENOMEM wr B 0x0 0x1 \; ctl putmany \; wr B 0x0 0x1 \; free A \; free B

	# dma-bufs: an export of 2 MiB of a 4 MiB allocation maps its 32 pages at
	# a BAR1 run; a pinned importer (the RDMA core's path) gets BAR1 addresses
	# and edu DMAs through them, which the walker finds in VRAM where BAR1's
	# tables translate them (32 pages mapped, before the CPU maps anything);
	# the dma-buf's CPU mapping and the allocation's read what edu wrote. Put,
	# closed and freed, nothing is left mapped.
	tool "$bdf: a dma-buf export imported by edu through BAR1" \
		alloc A $i 4M \; export A 0x200000 2M \; ctl dbget 0 %A 0 0x200000 pinned \; \
		ctl dbdma 0 0x10000 0x61610000 \; ctl dbdma 0 0x1f0000 0x62620000 \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 32 >\$NVRS_OUT; echo nvrs-hostcheck: bar1-patterns $i 2 >\$NVRS_OUT; $HOSTSYNC" \; \
		rd A 0x210000 0x61610000 \; dbrd A 0x1f0000 0x62620000 \; \
		dbwr A 0x30000 0x63630000 \; rd A 0x230000 0x63630000 \; \
		ctl dbput 0 \; close A \; free A \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 0 >\$NVRS_OUT; $HOSTSYNC"
	check "$bdf: one sg entry per 64 KiB page of BAR1 (edu's maximum segment)" \
		grep -q '^dbget pinned entries 32 ' /tmp/tool.out
	expect_eq "$bdf: nothing of BAR1 handed out after the dma-buf's release" "0 B" \
		"$(sed -n 's/^bar1_mapped: //p' $info)"
	# BAR1 full: the export fails with ENOMEM and holds nothing.
	tool "$bdf: with BAR1 full of pins, an export fails with ENOMEM" \
		alloc A $i 2M \; alloc B $i 2M \; ctl pinmany @A 0x200000 $((n - 1)) \; \
		!ENOMEM export B 0 2M \; ctl putmany \; export B 0 2M \; close B \; \
		free A \; free B
	expect_eq "$bdf: BAR1 is free again" "0 B" "$(sed -n 's/^bar1_mapped: //p' $info)"
	# Scrubbing: the copy engine zeroes what a CPU mapping wrote before the
	# memory is handed out again.
	expect_eq "$bdf: nvrs uses the model's copy engine" model \
		"$(sed -n 's/^copy_engine: \([a-z]*\).*/\1/p' $info)"
	l0=$(sed -n 's/^copy_engine: model, \([0-9]*\) launches.*/\1/p' $info)
	# nvrs-smi dmon -s e watches it (NVRS_IOCTL_GPU_COPY_ENGINE): its one
	# interval spans the scrubs.
	tool "$bdf: memory written through BAR1 comes back zeroed" \
		sh "nvrs-smi dmon -c 1 -d 3 -s e --format csv -i $bdf >/tmp/dmon-e.txt 2>&1 &" \; \
		sh "sleep 1" \; \
		alloc A $i 2M \; wr A 0x10000 0x5a5a5a5a \; free A \; \
		alloc B $i 2M \; rd B 0x10000 0 \; free B \; sh "sleep 3"
	l1=$(sed -n 's/^copy_engine: model, \([0-9]*\) launches.*/\1/p' $info)
	expect_eq "$bdf: the copy engine scrubbed it" yes \
		"$([ -n "$l0" ] && [ "${l1:-0}" -gt "$l0" ] && echo yes || echo no)"
	while IFS= read -r l; do diag "  $l"; done </tmp/dmon-e.txt
	check "$bdf: dmon -s e counts the engine's transfers and MiB in the interval" \
		grep -qE "^$i, [1-9][0-9]*, [1-9][0-9.]*$" /tmp/dmon-e.txt
	# Compaction: 64 allocations of 64 KiB, each mapped for the CPU (one BAR1
	# page each) with a needle, every other one freed: two roots half used,
	# the rest free. Asking for all roots but one to be free moves the kept
	# allocations of one root into the other's holes with the copy engine,
	# points their BAR1 entries at the copies and scrubs the old chunks, so
	# each needle must read back through its old mapping (a stale entry would
	# read the scrubbed chunk) and be in the VRAM file, and BAR1 must map just
	# the 32 pages.
	roots=$(($(fb_total $bdf) / 2097152 - 1))
	dmesg_mark
	tool "$bdf: compaction moves CPU-mapped memory with the copy engine" \
		frag $i 64 \; sh "echo $roots > $D/$bdf/compact" \; fragcheck \; stats $i \; \
		sh "echo nvrs-hostcheck: bar1-pages $i 32 32 >\$NVRS_OUT; $HOSTSYNC"
	check "$bdf: every kept allocation reads its needle after the move" \
		grep -qE "^fragcheck 32 kept, 0 wrong$" /tmp/tool.out
	check "$bdf: one compaction moved memory" grep -qE \
		"^stats gpu $i version 4 .* compactions 1 compacted_bytes [1-9][0-9]*$" /tmp/tool.out
	expect_eq "$bdf: one dmesg line tells what it moved, all it planned" 1 \
		"$(dmesg_new | grep -cE "compaction for $roots free roots: moved ([1-9][0-9]*) of \\1 planned chunks")"
	# A contiguous allocation smaller than its root moves as the whole root,
	# but its CPU run in BAR1 is one slot: only that slot may be remapped, not
	# the 31 after it, which the next CPU mapping's run takes (next fit). C
	# sits in root 2 after a freed root 0 and D's root 1, so asking for all
	# roots but two to be free in one piece moves C into root 0; D, mapped
	# after C, must still read its own word.
	tool "$bdf: compaction moves a 64 KiB contiguous allocation; the next CPU run stays D's" \
		alloc F $i 2M \; alloc D $i 64K \; alloc C $i 64K contig \; free F \; \
		wr C 0x100 0x0c0c0c0c \; wr D 0x100 0x0d0d0d0d \; \
		sh "echo $((roots - 1)) > $D/$bdf/compact" \; stats $i \; \
		rd C 0x100 0x0c0c0c0c \; rd D 0x100 0x0d0d0d0d \; alloc E $i 64K \; \
		free C \; free D \; free E
	check "$bdf: the compaction moved C's root" grep -qE \
		"^stats gpu $i version 4 .* compactions 2 compacted_bytes $((1048576 + 2097152))$" /tmp/tool.out
	l2=$(sed -n 's/^copy_engine: model, \([0-9]*\) launches.*/\1/p' $info)
	expect_eq "$bdf: with the copy engine" yes \
		"$([ -n "$l1" ] && [ "${l2:-0}" -gt "$l1" ] && echo yes || echo no)"
	expect_eq "$bdf: nothing of BAR1 handed out once the process exited" "0 B" \
		"$(sed -n 's/^bar1_mapped: //p' $info)"
	echo "nvrs-hostcheck: gmmu-empty $i $inst $mmu $((bar1 / 2))"
	sh /scenarios/hostsync.sh
	i=$((i + 1))
done
# Storage (run.py --nvme switch: the NVMe controller under the models' PCIe
# switch): BAR1 has struct pages, and a P2PDMA allocation maps itself at a
# BAR1 run for its life, so O_DIRECT reads and writes go between the
# controller and BAR1, which translates them into VRAM: the file's bytes are
# found in the VRAM file, the controller's DMA (QEMU's trace) reached BAR1,
# the write lands on the disk, and the run is unmapped once the free let go of
# the pages.
if [ "$NVRS_NVME" = switch ]; then
	check "NVMe: the disk mounted" storage_setup
	i=0
	for spec in "$@"; do
		model_fields "$spec"
		bdf=$(pci_functions 0x10de 0x$dev | head -n1)
		info=$D/$bdf/info
		check "$bdf is a P2PDMA provider (BAR1's struct pages)" \
			grep -q "^p2pdma: provider, 0 B in allocations" $info
		tool "$bdf: O_DIRECT read() and write of 1 MiB through BAR1's struct pages" \
			alloc P $i 4M contig p2pdma \; dio read P /mnt/s1m 0 1M \; dcmp P /mnt/s1m 0 1M \; \
			sh "echo nvrs-hostcheck: storage-in s1m >\$NVRS_OUT; echo nvrs-hostcheck: bar1-pages $i 64 >\$NVRS_OUT; $HOSTSYNC" \; \
			dio write P /mnt/model$i 0 1M \; free P \; \
			sh "echo nvrs-hostcheck: bar1-pages $i 0 >\$NVRS_OUT; $HOSTSYNC"
		echo "nvrs-hostcheck: storage-out model$i s1m"
		check "$bdf: the allocation counted and let go of" \
			grep -q "^p2pdma: provider, 0 B in allocations, 0 B stuck" $info
		i=$((i + 1))
	done
	echo "nvrs-hostcheck: storage-direct $((2 * 1024 * 1024))"
	check "umount" umount /mnt
fi

# Without the copy engine the CPU scrubs through BAR1's scrub slot.
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
check "insmod nvrs bind_nvidia=1 test_no_copy_engine=1" \
	insmod $M/nvrs.ko bind_nvidia=1 test_no_copy_engine=1
check "insmod consumer" insmod $M/nvrs_consumer.ko
i=0
for spec in "$@"; do
	model_fields "$spec"
	bdf=$(pci_functions 0x10de 0x$dev | head -n1)
	info=$D/$bdf/info
	expect_eq "$bdf: no copy engine used" none \
		"$(sed -n 's/^copy_engine: \([a-z]*\).*/\1/p' $info 2>/dev/null)"
	nvrs-smi dmon -c 1 -d 1 -s e --format csv -i $bdf >/tmp/dmon-e.txt 2>&1
	expect_eq "$bdf: dmon -s e prints '-' for a GPU nvrs uses no engine of" \
		"#gpu, ce, cemov|#Idx, #, MiB|$i, -, -|" "$(tr '\n' '|' </tmp/dmon-e.txt)"
	tool "$bdf: the CPU scrubs through BAR1 what a CPU mapping wrote" \
		alloc A $i 2M \; wr A 0x10000 0x5a5a5a5a \; free A \; \
		alloc B $i 2M \; rd B 0x10000 0 \; free B
	expect_eq "$bdf: nothing of BAR1 handed out after it" "0 B" \
		"$(sed -n 's/^bar1_mapped: //p' $info)"
	i=$((i + 1))
done
check "rmmod consumer" rmmod nvrs_consumer
check "no pins left" grep -qx "pins: 0" $D/p2p
check "rmmod nvrs" rmmod nvrs
expect_eq "no nvrs message at warning level or above" 0 $(($(loud) - loud0))

# A BAR1 unmap that fails (test_fail_bar1_unmap=2: the first after the bind's
# self-test), as a GPU that stopped answering would fail it: the pin's put
# cannot clear its entries, so BAR1 may still reach its pages. They must never
# go back to the memory manager (the free leaves them allocated, the walker
# still finds them mapped), the GPU refuses new allocations with EIO, and one
# line says so. GPU removal then clears BAR1.
check "insmod nvrs bind_nvidia=1 test_fail_bar1_unmap=2" \
	insmod $M/nvrs.ko bind_nvidia=1 test_fail_bar1_unmap=2
check "insmod consumer" insmod $M/nvrs_consumer.ko
model_fields "$1"
bdf=$(pci_functions 0x10de 0x$dev | head -n1)
info=$D/$bdf/info
dmesg_mark
loud1=$(loud)
tool "$bdf: a failed BAR1 unmap keeps the pin's memory and stops allocations" \
	alloc A 0 2M \; ctl pin 0 @A 0x200000 \; ctl map 0 \; ctl put 0 \; \
	!EIO alloc B 0 64K \; free A \; stats 0 \; \
	sh "echo nvrs-hostcheck: bar1-pages 0 32 >\$NVRS_OUT; $HOSTSYNC"
expect_eq "$bdf: one line says BAR1 could not unmap and the memory is kept" 1 \
	"$(dmesg_new | grep -c 'unmapping 32 pages at BAR1 offset 0x[0-9a-f]*: [A-Za-z0-9()]*; the GPU.s memory is not handed out any more')"
check "$bdf: the freed allocation's 2 MiB stay allocated" grep -qE \
	"^stats gpu 0 version 4 fb_total [0-9]+ fb_used 2097152 " /tmp/tool.out
check "$bdf: the GPU's unbind clears BAR1" sh -c "echo $bdf > /sys/bus/pci/drivers/nvrs/unbind"
echo "nvrs-hostcheck: bar1-pages 0 0"
sh /scenarios/hostsync.sh
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
dmesg_new | grep -E "nvrs|WARN|BUG" | while IFS= read -r l; do diag "  $l"; done
expect_eq "and no other message at warning level or above" 1 $(($(loud) - loud1))

done_testing
