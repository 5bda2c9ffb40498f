# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench_removal" (make bench, not make check): the unbind of a GPU
# that holds N allocations, for N = 1000, 5000 and 10000. Four processes each
# hold N/4 64 KiB allocations on GPU0, then N/4 on GPU1 (so that GPU1's come
# after GPU0's in every VA space, as in a process using both) and one 2 MiB
# pin of GPU1 through the consumer; the write to GPU1's unbind file is timed.
# Prints "bench:" lines (no anchor: the figure to compare is nvrs's own
# before and after a change, and how it grows with N); asserts nothing about
# time.

. /scenarios/lib.sh
M=/lib/modules
PROCS=4

for n in 1000 5000 10000; do
	check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
	check "insmod consumer" insmod $M/nvrs_consumer.ko
	GPU1=$(nvrs_bound | sed -n 2p)
	expect_eq "two GPUs bound" 2 "$(nvrs_bound | wc -l)"
	each=$((n / PROCS))
	touch /tmp/hold
	rm -f /tmp/ready.* /tmp/ended.*
	i=0
	while [ $i -lt $PROCS ]; do
		(nvrs-tool many 0 $each \; many 1 $each \; alloc P 1 2M \; \
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
	[ -n "$ns" ] && awk -v n="$n" -v t="$ns" 'BEGIN {
		printf "bench: gpu_removal_%d_allocs nvrs=%.1fns anchor=0.0ns ratio=0.00 allocs_gpu1=%d allocs_gpu0=%d pins=%d ns_per_alloc=%.1f\n",
		       n, t, n, n, '$PROCS', t / n }'
	check "rmmod consumer" rmmod nvrs_consumer
	check "rmmod nvrs" rmmod nvrs
done
done_testing
