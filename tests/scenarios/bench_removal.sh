# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench_removal" (make bench, not make check): how GPU removal grows
# with the number of allocations it releases, against the same number released
# by process exit.
#
#   nvrs:   four processes each hold N/4 64 KiB allocations on GPU0, then N/4
#           on GPU1 (so that GPU1's come after GPU0's in every VA space, as in
#           a process using both), every one mapped for the CPU and touched,
#           and one 2 MiB allocation of GPU1 pinned by the consumer; the write
#           to GPU1's unbind file is timed (it releases GPU1's N allocations,
#           revokes the four pins and unmaps N CPU mappings).
#   anchor: four processes each hold N/4 mapped 64 KiB allocations on GPU1
#           and exit; the time from letting them go to the last one reaped
#           (nvrs-tool exitbench) is the same N released by the path every
#           process takes.
#
# N = 0, 1000, 5000, 10000 and 20000, three rounds, each round in a shuffled
# order, the two sides alternating which goes first. Prints one "bench:" line
# per N (medians, min-max) and one "gpu_removal_slope" line: the least-squares
# slope in ns per allocation of each side over every sample, with the
# intercepts and the ratio of the slopes. Asserts nothing about time.

. /scenarios/lib.sh
M=/lib/modules
PROCS=4
ROUNDS=3
SIZES="0 1000 5000 10000 20000"
SAMPLES=/tmp/removal.samples
: >$SAMPLES

load() {
	check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	GPU1=$(nvrs_bound | sed -n 2p)
	expect_eq "two GPUs bound" 2 "$(nvrs_bound | wc -l)"
}

unload() {
	check "rmmod consumer" rmmod nvrs_consumer
	check "rmmod nvrs" rmmod nvrs
}

# side_unbind N: one nvrs sample.
side_unbind() {
	local n=$1 each=$(($1 / PROCS)) i=0 ns
	load
	touch /tmp/hold
	rm -f /tmp/ready.* /tmp/ended.*
	while [ $i -lt $PROCS ]; do
		(nvrs-tool many 0 $each map \; many 1 $each map \; alloc P 1 2M \; \
			ctl pin $i @P 0x200000 \; sh "touch /tmp/ready.$i" \; \
			sh "while [ -e /tmp/hold ]; do sleep 0.2; done" >/tmp/hold.$i.txt 2>&1
		 touch /tmp/ended.$i) &
		i=$((i + 1))
	done
	# Each process either says it is ready or ends early (and fails below).
	while [ "$(ls /tmp/ready.* /tmp/ended.* 2>/dev/null | wc -l)" -lt $PROCS ]; do
		sleep 0.2
	done
	expect_eq "$n allocations held by $PROCS processes" $PROCS "$(ls /tmp/ready.* 2>/dev/null | wc -l)"
	nvrs-tool benchwrite /sys/bus/pci/drivers/nvrs/unbind $GPU1 >/tmp/b.txt 2>&1
	ns=$(sed -n 's/^benchwrite ns \([0-9]*\)$/\1/p' /tmp/b.txt)
	check "unbind with $n allocations measured" test -n "$ns" -a "$(grep -c '^FAIL' /tmp/b.txt)" = 0
	rm -f /tmp/hold
	wait
	check "the holders ran without failures" sh -c "! grep -q '^FAIL' /tmp/hold.*.txt"
	grep -h '^FAIL' /tmp/hold.*.txt | sort | uniq -c | while read -r l; do diag "$l"; done
	[ -n "$ns" ] && echo "nvrs $n $ns" >>$SAMPLES
	unload
}

# side_exit N: one anchor sample.
side_exit() {
	local n=$1 ns
	load
	nvrs-tool exitbench 1 $n $PROCS map >/tmp/e.txt 2>&1
	ns=$(sed -n 's/^exitbench ns \([0-9]*\)$/\1/p' /tmp/e.txt)
	check "exit with $n allocations measured" test -n "$ns" -a "$(grep -c '^FAIL' /tmp/e.txt)" = 0
	[ -n "$ns" ] || head -n 5 /tmp/e.txt | while read -r l; do diag "$l"; done
	check_all_returned
	[ -n "$ns" ] && echo "anchor $n $ns" >>$SAMPLES
	unload
}

round=0
while [ $round -lt $ROUNDS ]; do
	order=$(for n in $SIZES; do echo $n; done |
		awk -v seed=$((round + 1)) 'BEGIN { srand(seed) } { print rand(), $0 }' |
		sort -n | awk '{ print $2 }')
	diag "round $round: N in the order $(echo $order)"
	k=0
	for n in $order; do
		if [ $(((round + k) % 2)) -eq 0 ]; then
			side_unbind $n
			side_exit $n
		else
			side_exit $n
			side_unbind $n
		fi
		k=$((k + 1))
	done
	round=$((round + 1))
done

expect_eq "every sample measured" $((2 * ROUNDS * $(echo $SIZES | wc -w))) "$(wc -l <$SAMPLES)"

# Medians per N, then the least-squares slope of each side.
for n in $SIZES; do
	awk -v n=$n -v procs=$PROCS '
	function median(v, k,   i, j, t) {
		for (i = 1; i <= k; i++)
			for (j = i + 1; j <= k; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
	}
	$2 == n && $1 == "nvrs" { a[++na] = $3 }
	$2 == n && $1 == "anchor" { b[++nb] = $3 }
	END {
		if (!na || !nb) exit 1
		mn = median(a, na); mb = median(b, nb)
		printf "bench: gpu_removal_%d_allocs nvrs=%.1fns anchor=%.1fns ratio=%.2f nvrs_min=%.1f nvrs_max=%.1f anchor_min=%.1f anchor_max=%.1f rounds=%d procs=%d anchor_is=process_exit\n",
		       n, mn, mb, mb / mn, a[1], a[na], b[1], b[nb], na, procs
	}' $SAMPLES
done
slope=$(awk '
function fit(side,   i, sx, sy, sxx, sxy, k, d) {
	for (i = 1; i <= cnt; i++) {
		if (s[i] != side) continue
		k++; sx += x[i]; sy += y[i]; sxx += x[i] * x[i]; sxy += x[i] * y[i]
	}
	d = k * sxx - sx * sx
	if (k < 2 || d == 0) return 0
	slope[side] = (k * sxy - sx * sy) / d
	icpt[side] = (sy - slope[side] * sx) / k
	return 1
}
{ cnt++; s[cnt] = $1; x[cnt] = $2; y[cnt] = $3 }
END {
	if (!fit("nvrs") || !fit("anchor") || slope["nvrs"] <= 0) exit 1
	printf "bench: gpu_removal_slope nvrs=%.1fns anchor=%.1fns ratio=%.2f per=allocation nvrs_intercept_ms=%.1f anchor_intercept_ms=%.1f samples=%d anchor_is=process_exit\n",
	       slope["nvrs"], slope["anchor"], slope["anchor"] / slope["nvrs"],
	       icpt["nvrs"] / 1e6, icpt["anchor"] / 1e6, cnt
}' $SAMPLES)
check "the slope of both sides was fitted" test -n "$slope"
echo "$slope"
done_testing
