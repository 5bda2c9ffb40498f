# SPDX-License-Identifier: GPL-2.0
#
# Scenario "bench_storage" (make bench, not make check): 64 MiB O_DIRECT reads
# and writes between an NVMe file and GPU memory. nvrs: straight into and out
# of an NVRS_ALLOC_P2PDMA allocation (the controller DMAs to the GPU's BAR).
# Anchors, what a user does without P2PDMA pages:
#   bounce      O_DIRECT into a staging buffer of system memory, then memcpy
#               into the allocation's CPU mapping (writes: the reverse); its
#               transfer and copy phases are printed too
#   pipelined   the same in 4 MiB chunks through two staging buffers, a second
#               thread (the VM's second vCPU) copying one while the other is
#               transferred: what a careful user writes
#   transfer    the O_DIRECT transfer to or from system memory alone: the
#               bounce path with a copy that costs nothing, the best any
#               bounce can do
# Staging buffers are pre-faulted and in 4 KiB pages, as the P2PDMA pages of
# the direct path are. Same file, same allocation, same process; ROUNDS
# rounds, the four sides in a rotated order each round; each line gives the
# medians, each side's fastest and slowest round, and the median and range of
# the rounds' paired ratios. QEMU traces no NVMe DMA while this runs
# (bench.sh: run.py --nvme-trace off). Prints "bench:" and "phases:" lines;
# asserts nothing about time.

. /scenarios/lib.sh
M=/lib/modules
ROUNDS=5

check "insmod nvrs" insmod $M/nvrs.ko emulated=1
check "the NVMe disk mounted" storage_setup

# measure NAME DIR FILE: ROUNDS rounds of the four sides (DIR read or write
# of FILE) on one 64 MiB allocation, then their lines.
measure() {
	set -- "$1" "$2" "$3" \
		"dio $2 A $3 0 64M" "bounce $2 A $3 0 64M" \
		"bounce2 $2 A $3 0 64M 4M" "ramdio $2 $3 0 64M"
	_cmds=
	_i=0
	while [ $_i -lt $ROUNDS ]; do
		# Rotate: side (i + j) mod 4 goes j-th in round i.
		_j=0
		while [ $_j -lt 4 ]; do
			case $(((_i + _j) % 4)) in
			0) _cmds="$_cmds ; $4" ;;
			1) _cmds="$_cmds ; $5" ;;
			2) _cmds="$_cmds ; $6" ;;
			3) _cmds="$_cmds ; $7" ;;
			esac
			_j=$((_j + 1))
		done
		_i=$((_i + 1))
	done
	# shellcheck disable=SC2086 # the words are nvrs-tool's arguments
	nvrs-tool alloc A 0 64M contig p2pdma $_cmds \; free A >/tmp/b.txt 2>&1
	check "$1: $((4 * ROUNDS)) transfers ran" \
		test "$(grep -cE "^(dio|bounce|bounce2|ramdio) $2 67108864 bytes ns " /tmp/b.txt)" = $((4 * ROUNDS))
	awk -v t="$1" -v want=$ROUNDS '
		$3 == 67108864 && $5 == "ns" {
			k = $1; c[k]++; ns[k, c[k]] = $6
			if (k == "bounce") { io[c[k]] = $8; cp[c[k]] = $10 }
		}
		function sort(x, k,   i, j, v) {
			for (i = 2; i <= k; i++) {
				v = x[i]
				for (j = i - 1; j >= 1 && x[j] > v; j--) x[j + 1] = x[j]
				x[j + 1] = v
			}
		}
		function med(x, k) { sort(x, k); return x[int((k + 1) / 2)] }
		# One line: nvrs (dio) against the side named a.
		function line(name, a,   i, n, m, r, lo, hi, nm, am) {
			for (i = 1; i <= want; i++) {
				n[i] = ns["dio", i]; m[i] = ns[a, i]; r[i] = m[i] / n[i]
			}
			sort(r, want); lo = r[1]; hi = r[want]
			rm = r[int((want + 1) / 2)]
			nm = med(n, want); am = med(m, want)
			printf "bench: %s nvrs=%.1fns anchor=%.1fns ratio=%.2f rounds=%d nvrs_min=%.1fns nvrs_max=%.1fns anchor_min=%.1fns anchor_max=%.1fns ratio_paired=%.2f ratio_paired_min=%.2f ratio_paired_max=%.2f mib_per_s_nvrs=%.1f mib_per_s_anchor=%.1f\n",
			       name, nm, am, am / nm, want, n[1], n[want], m[1], m[want],
			       rm, lo, hi, 64e9 / nm, 64e9 / am
		}
		END {
			if (c["dio"] != want || c["bounce"] != want || c["bounce2"] != want ||
			    c["ramdio"] != want)
				exit 1
			line(t, "bounce")
			line(t "_pipelined", "bounce2")
			line(t "_transfer_only", "ramdio")
			printf "phases: %s bounce transfer=%.1fns copy=%.1fns (medians of %d rounds)\n",
			       t, med(io, want), med(cp, want), want
		}' /tmp/b.txt
}

measure storage_read_64M read /mnt/s64m
measure storage_write_64M write /mnt/w64m
check "umount" umount /mnt
check "rmmod nvrs" rmmod nvrs
done_testing
