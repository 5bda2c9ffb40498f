# SPDX-License-Identifier: GPL-2.0
#
# Shared by the benchmark scenarios (make bench): alternated rounds of two
# measurements, their medians and spreads, and the "bench:" line format that
# tests/bench.sh tabulates. Asserts nothing about time.

# line NAME NVRS_NS ANCHOR_NS [EXTRA]: one bench line for a p2p measurement.
line() {
	awk -v t="$1" -v n="$2" -v a="$3" -v x="$4" 'BEGIN {
		printf "bench: %s nvrs=%.1fns anchor=%.1fns ratio=%.2f%s\n",
		       t, n, a, (n > 0 ? a / n : 0), (x == "" ? "" : " " x) }'
}

# The p2p measurements below run ROUNDS times in one process, nvrs first in
# odd rounds and its anchors first in even ones; a line gives the median of
# the rounds per side, and the smallest and largest round (spread).
ROUNDS=5

# rounds A B: ROUNDS rounds of the nvrs-tool commands A and B (a ctl command
# each), A first in odd rounds and B first in even ones, as nvrs-tool
# arguments ("\;"-separated words).
rounds() {
	rounds_i=1
	while [ $rounds_i -le $ROUNDS ]; do
		if [ $((rounds_i % 2)) = 1 ]; then
			echo "; $1 ; $2"
		else
			echo "; $2 ; $1"
		fi
		rounds_i=$((rounds_i + 1))
	done
}

# spread: the median, smallest and largest of the numbers on stdin (one a
# line), or nothing if there are none.
spread() {
	awk '{ v[n++] = $1 + 0 } END {
		if (!n)
			exit
		for (i = 1; i < n; i++) {
			x = v[i]
			for (j = i - 1; j >= 0 && v[j] > x; j--)
				v[j + 1] = v[j]
			v[j + 1] = x
		}
		print (n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2), v[0], v[n - 1] }'
}

# paired NVRS ANCHOR: the fields of the per-round ratios anchor / nvrs of two
# files of one number a line (round i of each side on line i): their median
# and smallest and largest, "ratio_paired=R ratio_paired_min=LO
# ratio_paired_max=HI"; nothing unless both have the same number of rounds.
paired() {
	[ -s "$1" ] && [ "$(wc -l <"$1")" = "$(wc -l <"$2")" ] || return 0
	paste "$1" "$2" | awk '$1 > 0 { print $2 / $1 }' | spread |
		awk 'NF == 3 { printf "ratio_paired=%.2f ratio_paired_min=%.2f ratio_paired_max=%.2f", $1, $2, $3 }'
}

# minmax SIDE MIN MAX: the spread fields of one side.
minmax() {
	awk -v s="$1" -v lo="$2" -v hi="$3" 'BEGIN {
		printf "%s_min=%.1fns %s_max=%.1fns", s, lo, s, hi }'
}

# Pins end in the quarantine ring (8192 page tables), and a table is reused
# once the ring is full; fill it first so that every size below measures the
# steady state of a long-running host.
