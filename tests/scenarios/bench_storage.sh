# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench_storage" (make bench, not make check): 64 MiB O_DIRECT reads
# and writes between an NVMe file and GPU memory. nvrs: straight into and out
# of an NVRS_ALLOC_P2PDMA allocation (the controller DMAs to the GPU's BAR).
# Anchor: what a user does without P2PDMA pages, the bounce path: O_DIRECT
# into a pre-faulted, page-aligned buffer of system memory, then memcpy into
# the allocation's CPU mapping (for writes the reverse). Same file, same
# allocation, same process; ROUNDS rounds, nvrs first in odd rounds and the
# anchor first in even ones; medians, and the fastest and slowest round.
# Prints "bench:" lines; asserts nothing about time.

. /scenarios/lib.sh
M=/lib/modules
ROUNDS=5

check "insmod nvrs" insmod $M/nvrs.ko emulated=1
check "the NVMe disk mounted" storage_setup

# measure NAME NVRS_CMD ANCHOR_CMD: ROUNDS alternated rounds of two
# nvrs-tool commands (dio/bounce read|write ...) on one 64 MiB allocation,
# and one bench line of their medians.
measure() {
	_cmds=
	_i=1
	while [ $_i -le $ROUNDS ]; do
		if [ $((_i % 2)) = 1 ]; then
			_cmds="$_cmds ; $2 ; $3"
		else
			_cmds="$_cmds ; $3 ; $2"
		fi
		_i=$((_i + 1))
	done
	# shellcheck disable=SC2086 # the words are nvrs-tool's arguments
	nvrs-tool alloc A 0 64M contig p2pdma $_cmds \; free A >/tmp/b.txt 2>&1
	check "$1: $((2 * ROUNDS)) rounds ran" test "$(grep -cE '^(dio|bounce) ' /tmp/b.txt)" = $((2 * ROUNDS))
	awk -v t="$1" -v want=$ROUNDS '
		/^dio (read|write) 67108864 bytes ns / { n[++nn] = $6 }
		/^bounce (read|write) 67108864 bytes ns / { a[++na] = $6 }
		function sort(x, k,   i, j, v) {
			for (i = 2; i <= k; i++) {
				v = x[i]
				for (j = i - 1; j >= 1 && x[j] > v; j--) x[j + 1] = x[j]
				x[j + 1] = v
			}
		}
		END {
			if (nn != want || na != want) exit 1
			sort(n, nn); sort(a, na)
			m = n[int((nn + 1) / 2)]; ma = a[int((na + 1) / 2)]
			printf "bench: %s nvrs=%.1fns anchor=%.1fns ratio=%.2f rounds=%d nvrs_min=%.1fns nvrs_max=%.1fns anchor_min=%.1fns anchor_max=%.1fns mib_per_s_nvrs=%.1f mib_per_s_anchor=%.1f\n",
			       t, m, ma, (m > 0 ? ma / m : 0), want, n[1], n[nn], a[1], a[na],
			       64e9 / m, 64e9 / ma
		}' /tmp/b.txt
}

measure storage_read_64M "dio read A /mnt/s64m 0 64M" "bounce read A /mnt/s64m 0 64M"
measure storage_write_64M "dio write A /mnt/w64m 0 64M" "bounce write A /mnt/w64m 0 64M"
check "umount" umount /mnt
check "rmmod nvrs" rmmod nvrs
done_testing
