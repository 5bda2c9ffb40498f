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
for t in uniform_64k_1G mixed_4k_64k_2m_1G buffers_128k_1m_6m_100m_1G fill_4k_free_random_256M \
	checkerboard_then_2m_256M init_1T first_alloc_at_top_1T frag_1G; do
	echo $t >$B
	cat $B >/tmp/pmm.txt
	check "PMM benchmark $t ran" sh -c 'grep -q "^bench: " /tmp/pmm.txt && ! grep -q "failed: out of memory" /tmp/pmm.txt'
	cat /tmp/pmm.txt
done
echo all >$B

. /scenarios/benchlib.sh

check "quarantine filled" nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 8200

# pin NAME SIZE LEN N [SPAN]: get_pages + put_pages of LEN bytes of GPU memory
# against pin_user_pages + unpin of as many bytes of anonymous system memory
# (FOLL_LONGTERM), N times a round; with SPAN, the pins take the LEN pieces of
# a SPAN-byte allocation (GPU and system) in turn, else the same LEN bytes
# every time. nvrs's entries are 64 KiB GPU pages, pin_user_pages' are 4 KiB
# pages (16 times as many for the same bytes): the line gives the cost per
# entry and per MiB of each side, besides the ratio per call.
pin() {
	pin_size=$2
	[ -n "$5" ] && pin_size=$5
	nvrs-tool alloc A 0 1G \; anon U $pin_size \
		$(rounds "ctl benchpin @A $3 $4 $5" "ctl benchgup @U $3 $4 $5") >/tmp/b.txt 2>&1
	sed -n 's/^benchpin len [0-9]* ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt >/tmp/b.nvrs
	sed -n 's/^benchgup len [0-9]* ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt >/tmp/b.anchor
	pin_n=$(spread </tmp/b.nvrs)
	pin_a=$(spread </tmp/b.anchor)
	pin_paired=$(paired /tmp/b.nvrs /tmp/b.anchor)
	pin_shape=$(sed -n 's/^benchpin len [0-9]* ns_per_op [0-9]* entries \([0-9]*\) runs \([0-9]*\)/\1 \2/p' \
		/tmp/b.txt | sed -n 1p)
	pin_pages=$(sed -n 's/^benchgup len [0-9]* ns_per_op [0-9]* pages \([0-9]*\)/\1/p' /tmp/b.txt |
		sed -n 1p)
	check "p2p pin $1 measured" test -n "$pin_n" -a -n "$pin_a" -a -n "$pin_shape" \
		-a -n "$pin_pages" -a -n "$pin_paired" -a "$(grep -c '^FAIL' /tmp/b.txt)" = 0
	[ -n "$pin_n" ] && [ -n "$pin_a" ] && [ -n "$pin_shape" ] && [ -n "$pin_pages" ] &&
		[ -n "$pin_paired" ] || return 0
	set -- "$1" "$3" $pin_n $pin_a $pin_shape $pin_pages
	# $1 name, $2 bytes, $3-$5 nvrs median min max, $6-$8 anchor median
	# min max, $9 entries, $10 runs, $11 anchor entries.
	line "$1" "$3" "$6" "rounds=$ROUNDS $pin_paired $(minmax nvrs $4 $5) $(minmax anchor $7 $8) $(
		awk -v n="$3" -v a="$6" -v len="$(($2))" -v e="$9" -v r="${10}" -v p="${11}" 'BEGIN {
		printf "entries=%d runs=%d anchor_entries=%d ns_per_run=%.1f nvrs_ns_per_entry=%.1f anchor_ns_per_entry=%.2f nvrs_ns_per_mib=%.1f anchor_ns_per_mib=%.1f",
		       e, r, p, n / r, n / e, a / p, n * 1048576 / len, a * 1048576 / len }')"
}

# 64 KiB of the same VA every time (a best case: the table block the full
# quarantine ring gives back already describes that memory).
pin p2p_get_put_pages_64K_same_va 64K 0x10000 20000
# 64 KiB of a different VA every time: the 16384 64 KiB pieces of 1 GiB in
# turn, on both sides, more than the ring's 8192 tables.
pin p2p_get_put_pages_64K_16384_vas 64K 0x10000 16384 0x40000000
# 256 KiB ... 1 GiB, the same VA every time.
for spec in "256K 0x40000 5000" "1M 0x100000 1000" "2M 0x200000 500" \
	    "16M 0x1000000 50" "128M 0x8000000 8" "1G 0x40000000 3"; do
	set -- $spec
	pin "p2p_get_put_pages_$1" $1 $2 $3
done

# Where the time of a 64 KiB get_pages + put_pages of the same VA goes
# (debugfs p2p_profile; the profiled run is slower by its clock reads).
P=/sys/kernel/debug/nvrs/p2p_profile
echo 1 >$P
nvrs-tool alloc A 0 1G \; ctl benchpin @A 0x10000 20000 >/tmp/b.txt 2>&1
echo 0 >$P
n=$(sed -n 's/^benchpin len [0-9]* ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt)
check "pin phases measured" grep -q "^get_table calls [1-9]" $P
echo "phases: p2p_get_put_pages_64K_same_va profiled_ns_per_op=$n" \
	$(awk '$2 == "calls" { printf "%s=%sns ", $1, $5 }' $P)

# dma_map_pages + dma_unmap_pages of a pinned 64 KiB ... 1 GiB for edu
# (IOMMU on) against the same mapping made with the DMA API directly: one
# dma_map_resource per physically contiguous run of the page table (anchor;
# nvrs makes the same calls), and one per 64 KiB entry (anchor_per64k; what
# NVIDIA's rm_p2p_dma_map_pages does for a PCIe GPU). Each side fills one DMA
# address per 64 KiB entry.
for spec in "64K 0x10000 2000" "2M 0x200000 200" "16M 0x1000000 20" \
	    "128M 0x8000000 5" "1G 0x40000000 2"; do
	set -- $spec
	nvrs-tool alloc A 0 1G \; ctl pin 0 @A $2 \
		$(rounds "ctl benchmap 0 $3 nvrs" "ctl benchmap 0 $3 runs ; ctl benchmap 0 $3 pages") \
		\; ctl put 0 >/tmp/b.txt 2>&1
	sed -n 's/^benchmap len [0-9]* what nvrs ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt >/tmp/b.nvrs
	sed -n 's/^benchmap len [0-9]* what runs ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt >/tmp/b.anchor
	n=$(spread </tmp/b.nvrs)
	r=$(spread </tmp/b.anchor)
	pr=$(paired /tmp/b.nvrs /tmp/b.anchor)
	p=$(sed -n 's/^benchmap len [0-9]* what pages ns_per_op \([0-9]*\) .*/\1/p' /tmp/b.txt | spread)
	shape=$(sed -n 's/^benchmap len [0-9]* what nvrs ns_per_op [0-9]* entries \([0-9]*\) runs \([0-9]*\)/\1 \2/p' \
		/tmp/b.txt | sed -n 1p)
	check "dma map $1 measured" test -n "$n" -a -n "$r" -a -n "$p" -a -n "$shape" \
		-a -n "$pr" -a "$(grep -c '^FAIL' /tmp/b.txt)" = 0
	[ -n "$n" ] && [ -n "$r" ] && [ -n "$p" ] && [ -n "$shape" ] && [ -n "$pr" ] || continue
	set -- "$1" $n $r $p $shape
	# $2-$4 nvrs median min max, $5-$7 per-run anchor, $8-$10 per-64K
	# anchor, $11 entries, $12 runs.
	line "p2p_dma_map_$1_iommu" "$2" "$5" "rounds=$ROUNDS $pr $(minmax nvrs $3 $4) $(minmax anchor $6 $7) $(
		awk -v n="$2" -v p="$8" -v lo="$9" -v hi="${10}" -v e="${11}" -v r="${12}" 'BEGIN {
		printf "anchor_per64k=%.1fns ratio_per64k=%.2f anchor_per64k_min=%.1fns anchor_per64k_max=%.1fns entries=%d runs=%d ns_per_entry=%.1f ns_per_run=%.1f",
		       p, (n > 0 ? p / n : 0), lo, hi, e, r, n / e, n / r }')"
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
