# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench_dma" (make bench, not make check): nvidia_p2p_dma_map_pages
# + dma_unmap_pages of a pinned allocation for edu, through the emulated
# IOMMU in the mode this boot runs it in (NVRS_IOMMU_MODE: strict, as
# iommu.strict=1, or lazy, Debian's default IOMMU_DEFAULT_DMA_LAZY), on a
# fresh GPU (the allocation is a few physically contiguous runs) and on a
# fragmented one (a checkerboard of 2 MiB roots: every 2 MiB of the
# allocation is a run of its own).
#
#   nvrs:   p2p_coalesce=1 (the default): one dma_map_resource per
#           physically contiguous run of the table.
#   anchor: the same module loaded with p2p_coalesce=0, one per 64 KiB entry,
#           as NVIDIA's nvidia_p2p_dma_map_pages does on a PCIe GPU: the same
#           code, only the policy differs.
#
# The two sides need different module loads, so a round is one load of each,
# alternating which goes first; each load measures every size on both
# layouts. A line gives each side's median and min-max and the median and
# min-max of the per-round ratios (ratio_paired). The direct DMA API lines
# (nvrs against its own dma_map_resource calls) stay in scenario "bench".
# Asserts nothing about time.

. /scenarios/lib.sh
M=/lib/modules
MODE=${NVRS_IOMMU_MODE:-strict}
ROUNDS=5
SAMPLES=/tmp/dma.samples
: >$SAMPLES
# SIZE:LEN:N: bytes pinned and mapped, and mappings a measurement times. On
# the fragmented GPU the allocation is 128 MiB (64 of the checkerboard's
# 2 MiB holes; below 2 MiB the layout changes nothing).
FRESH="64K:0x10000:2000 2M:0x200000:200 16M:0x1000000:20 128M:0x8000000:5 1G:0x40000000:2"
FRAG="16M:0x1000000:20 128M:0x8000000:5"

# measure COALESCE: one load of nvrs with p2p_coalesce=COALESCE (and no
# compaction, so the checkerboard stays one), every size on both layouts, one
# process a layout; samples "LAYOUT SIZE COALESCE ROUND NS ENTRIES RUNS".
measure() {
	local c=$1 layout specs cmds spec size len n
	check "insmod nvrs p2p_coalesce=$c" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 \
		p2p_coalesce=$c compact_on_alloc=0
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	for layout in fresh frag; do
		if [ $layout = fresh ]; then
			specs=$FRESH
			cmds="alloc A 0 1G"
		else
			specs=$FRAG
			cmds="holes 0 2M ; alloc A 0 128M"
		fi
		for spec in $specs; do
			len=$(echo $spec | cut -d: -f2)
			n=$(echo $spec | cut -d: -f3)
			cmds="$cmds ; ctl pin 0 @A $len ; ctl benchmap 0 $n nvrs ; ctl put 0"
		done
		# shellcheck disable=SC2086 # the words are nvrs-tool's commands
		nvrs-tool $cmds >/tmp/d.txt 2>&1
		for spec in $specs; do
			size=${spec%%:*}
			len=$(($(echo $spec | cut -d: -f2)))
			set -- $(sed -n "s/^benchmap len $len what nvrs ns_per_op \([0-9]*\) entries \([0-9]*\) runs \([0-9]*\)\$/\1 \2 \3/p" /tmp/d.txt)
			check "dma map $layout $size (p2p_coalesce=$c) measured" \
				test -n "$3" -a "$(grep -c '^FAIL' /tmp/d.txt)" = 0
			[ -n "$3" ] || grep -v '^ok ' /tmp/d.txt | head -n 5 |
				while read -r l; do diag "$l"; done
			[ -n "$3" ] && echo "$layout $size $c $ROUND $1 $2 $3" >>$SAMPLES
		done
	done
	check "rmmod consumer" rmmod nvrs_consumer
	check "rmmod nvrs" rmmod nvrs
}

ROUND=1
while [ $ROUND -le $ROUNDS ]; do
	if [ $((ROUND % 2)) = 1 ]; then order="1 0"; else order="0 1"; fi
	for COALESCE in $order; do
		measure $COALESCE
	done
	ROUND=$((ROUND + 1))
done

expect_eq "every sample measured" "$((2 * ROUNDS * ($(echo $FRESH | wc -w) + $(echo $FRAG | wc -w))))" \
	"$(wc -l <$SAMPLES)"

for layout in fresh frag; do
	[ $layout = fresh ] && specs=$FRESH || specs=$FRAG
	for spec in $specs; do
		size=${spec%%:*}
		awk -v l=$layout -v s=$size -v mode=$MODE -v rounds=$ROUNDS '
		function median(v, k,   i, j, t) {
			for (i = 1; i <= k; i++)
				for (j = i + 1; j <= k; j++)
					if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
		}
		$1 == l && $2 == s && $3 == 1 { on[$4] = $5; e = $6; r = $7 }
		$1 == l && $2 == s && $3 == 0 { off[$4] = $5 }
		END {
			for (i = 1; i <= rounds; i++) {
				if (!(i in on) || !(i in off) || on[i] <= 0) exit 1
				a[i] = on[i]; b[i] = off[i]; q[i] = off[i] / on[i]
			}
			mn = median(a, rounds); mb = median(b, rounds); mq = median(q, rounds)
			printf "bench: p2p_dma_map_%s_iommu_%s_%s nvrs=%.1fns anchor=%.1fns ratio=%.2f ratio_paired=%.2f ratio_paired_min=%.2f ratio_paired_max=%.2f nvrs_min=%.1fns nvrs_max=%.1fns anchor_min=%.1fns anchor_max=%.1fns rounds=%d entries=%d runs=%d anchor_is=p2p_coalesce=0\n",
			       s, mode, l, mn, mb, mb / mn, mq, q[1], q[rounds], a[1], a[rounds], b[1], b[rounds], rounds, e, r
		}' $SAMPLES || diag "no line for $layout $size"
	done
done
done_testing
