# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench" (make bench, not make check): in one VM boot, the memory
# manager against the kernel's gpu_buddy, the nvidia_p2p paths and scrubbing
# against their anchors. Prints "bench:" lines; asserts nothing about time.

. /scenarios/lib.sh
M=/lib/modules

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
# One trace per read: a read renders into one seq_file buffer, which the
# kernel renders again, from the start, if the text outgrows it.
B=/sys/kernel/debug/nvrs/bench_pmm
for t in uniform_64k_1G mixed_4k_64k_2m_1G fill_4k_free_random_256M \
	checkerboard_then_2m_256M init_1T first_alloc_at_top_1T frag_1G; do
	echo $t >$B
	cat $B >/tmp/pmm.txt
	check "PMM benchmark $t ran" sh -c 'grep -q "^bench: " /tmp/pmm.txt && ! grep -q "failed: out of memory" /tmp/pmm.txt'
	cat /tmp/pmm.txt
done
echo all >$B

# line NAME NVRS_NS ANCHOR_NS [EXTRA]: one bench line for a p2p measurement.
line() {
	awk -v t="$1" -v n="$2" -v a="$3" -v x="$4" 'BEGIN {
		printf "bench: %s nvrs=%.1fns anchor=%.1fns ratio=%.2f largest_free_nvrs=- largest_free_anchor=-%s\n",
		       t, n, a, (n > 0 ? a / n : 0), (x == "" ? "" : " " x) }'
}

# shape NS ENTRIES RUNS: how the cost grows, per 64 KiB entry and per
# physically contiguous run.
shape() {
	awk -v n="$1" -v e="$2" -v r="$3" 'BEGIN {
		printf "entries=%d runs=%d ns_per_entry=%.1f ns_per_run=%.1f",
		       e, r, (e > 0 ? n / e : 0), (r > 0 ? n / r : 0) }'
}

# Pins end in the quarantine ring (8192 page tables), and a table is reused
# once the ring is full; fill it first so that every size below measures the
# steady state of a long-running host.
check "quarantine filled" nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 8200

# get_pages + put_pages vs pin_user_pages + unpin of system memory, same size,
# 64 KiB ... 1 GiB.
for spec in "64K 0x10000 20000" "256K 0x40000 5000" "1M 0x100000 1000" \
	    "2M 0x200000 500" "16M 0x1000000 50" "128M 0x8000000 8" \
	    "1G 0x40000000 3"; do
	set -- $spec
	nvrs-tool alloc A 0 1G \; anon U $1 \; ctl benchpin @A $2 $3 \; \
		ctl benchgup @U $2 $3 >/tmp/b.txt 2>&1
	set -- $1 $(sed -n 's/^benchpin len [0-9]* ns_per_op \([0-9]*\) entries \([0-9]*\) runs \([0-9]*\)/\1 \2 \3/p' /tmp/b.txt)
	a=$(sed -n 's/^benchgup len [0-9]* ns_per_op //p' /tmp/b.txt)
	check "p2p pin $1 measured" test -n "$4" -a -n "$a"
	line "p2p_get_put_pages_$1" "$2" "$a" "$(shape $2 $3 $4)"
done

# Where the time of a 64 KiB get_pages + put_pages goes (debugfs p2p_profile;
# the profiled run is slower by its clock reads).
P=/sys/kernel/debug/nvrs/p2p_profile
echo 1 >$P
nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 20000 >/tmp/b.txt 2>&1
echo 0 >$P
n=$(sed -n 's/^benchpin len [0-9]* ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt)
check "pin phases measured" grep -q "^get_table calls [1-9]" $P
echo "phases: p2p_get_put_pages_64K profiled_ns_per_op=$n" \
	$(awk '$2 == "calls" { printf "%s=%sns ", $1, $5 }' $P)

# dma_map_pages (coalesced runs) vs one dma_map_resource per 64 KiB page,
# 64 KiB ... 1 GiB.
for spec in "64K 0x10000 2000" "2M 0x200000 200" "16M 0x1000000 20" \
	    "128M 0x8000000 5" "1G 0x40000000 2"; do
	set -- $spec
	nvrs-tool alloc A 0 1G \; ctl pin 0 @A $2 \; ctl benchmap 0 $3 \; ctl put 0 \
		>/tmp/b.txt 2>&1
	set -- $1 $(sed -n 's/^benchmap len [0-9]* nvrs_ns \([0-9]*\) anchor_ns \([0-9]*\) entries \([0-9]*\) runs \([0-9]*\)/\1 \2 \3 \4/p' /tmp/b.txt)
	check "dma map $1 measured" test -n "$5"
	line "p2p_dma_map_$1_iommu" "$2" "$3" "$(shape $2 $4 $5)"
done
# dma-buf registration (export + the RDMA core's pinned import, which maps for
# edu) vs nvidia_p2p_get_pages + dma_map_pages of the same memory, IOMMU on.
# A short untimed round first: the first registrations after boot pay for
# cold paths (tens of microseconds under TCG), which 50 rounds do not average out.
nvrs-tool alloc A 0 2M \; benchexport A 2M 5 \; export A 0 2M \; \
	ctl dbbench %A @A 0x200000 5 >/dev/null 2>&1
for spec in "2M 0x200000 200" "1G 0x40000000 10"; do
	set -- $spec
	nvrs-tool alloc A 0 $1 \; benchexport A $1 $3 \; export A 0 $1 \; \
		ctl dbbench %A @A $2 $3 >/tmp/b.txt 2>&1
	e=$(sed -n 's/^benchexport len [0-9]* ns_per_op //p' /tmp/b.txt)
	i=$(sed -n 's/^dbbench len [0-9]* import_ns \([0-9]*\) .*/\1/p' /tmp/b.txt)
	a=$(sed -n 's/^dbbench len [0-9]* import_ns [0-9]* p2p_ns \([0-9]*\)/\1/p' /tmp/b.txt)
	check "dma-buf registration $1 measured" test -n "$e" -a -n "$i" -a -n "$a"
	line "dmabuf_export_import_map_$1_iommu" "$((e + i))" "$a"
done
# Compaction: GPU0 filled with 64 KiB allocations, every other one freed (the
# checkerboard), then compacted until 64 MiB are free in one piece; moved bytes
# per second against a memcpy of as many bytes in the guest, and the largest
# free block before (the checkerboard leaves 64 KiB) and after.
G0=$(nvrs_bound | sed -n 1p)
nvrs-tool frag 0 \; stats 0 \; benchcompact /sys/kernel/debug/nvrs/$G0/compact 32 0 \; stats 0 \
	>/tmp/b.txt 2>&1
set -- $(sed -n 's/^benchcompact bytes \([0-9]*\) ns \([0-9]*\) memcpy_ns \([0-9]*\) .*/\1 \2 \3/p' /tmp/b.txt)
lb=$(sed -n 's/^stats gpu 0 .* largest_free \([0-9]*\) .*/\1/p' /tmp/b.txt | sed -n 1p)
la=$(sed -n 's/^stats gpu 0 .* largest_free \([0-9]*\) .*/\1/p' /tmp/b.txt | sed -n 2p)
check "compaction measured" test -n "$1" -a -n "$2" -a -n "$3" -a -n "$lb" -a -n "$la"
awk -v b="$1" -v n="$2" -v a="$3" -v lb="$lb" -v la="$la" 'BEGIN {
	printf "bench: compact_checkerboard_64M nvrs=%.1fns anchor=%.1fns ratio=%.2f mib_per_s_nvrs=%.1f mib_per_s_anchor=%.1f largest_free_before=%d largest_free_after=%d\n",
	       n, a, (n > 0 ? a / n : 0), (n > 0 ? b / n * 1e9 / 1048576 : 0), (a > 0 ? b / a * 1e9 / 1048576 : 0), lb, la }'
# Scrubbing: freeing 1 GiB that a mapping touched zeroes it through the
# aperture; the anchor is a memset of as much system memory, same process.
nvrs-tool benchscrub 0 1G 3 >/tmp/b.txt 2>&1
n=$(sed -n 's/^benchscrub size [0-9]* free_ns \([0-9]*\) .*/\1/p' /tmp/b.txt)
a=$(sed -n 's/^benchscrub size [0-9]* free_ns [0-9]* memset_ns \([0-9]*\)/\1/p' /tmp/b.txt)
check "scrub 1G measured" test -n "$n" -a -n "$a"
awk -v n="$n" -v a="$a" 'BEGIN {
	printf "bench: scrub_on_free_1G nvrs=%.1fns anchor=%.1fns ratio=%.2f gib_per_s_nvrs=%.2f gib_per_s_anchor=%.2f\n",
	       n, a, (n > 0 ? a / n : 0), (n > 0 ? 1e9 / n : 0), (a > 0 ? 1e9 / a : 0) }'
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
