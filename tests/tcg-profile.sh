#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tests/tcg-profile.sh pmm [TRACE] | pin: where nvrs's time goes under TCG,
# counted rather than sampled. The bench kernel boots with a QEMU plugin
# (tests/vm/tcg_profile/tb_count.c) that counts every translation block's
# executions, instructions and memory accesses (TCG's cost is mostly memory
# accesses: each goes through the softmmu TLB), then
# tests/vm/tcg_profile/symbolize.py prints them per function and operation.
#   pmm [TRACE]: one trace of the memory-manager benchmark (default
#                uniform_64k_1G; both nvrs and gpu_buddy run it), per step;
#   pin [LEN]:   nvidia_p2p_get_pages + put_pages of the LEN pieces
#                (default 0x10000, 64 KiB) of 1 GiB in turn, and its make
#                bench anchor, pin_user_pages_fast(FOLL_LONGTERM) +
#                unpin_user_pages of LEN pieces of 1 GiB in huge pages, per
#                pair. Each side
#                boots twice, with 1000 and 101000 pairs, and the first
#                boot's counts are subtracted from the second's function by
#                function: the tables are the pairs' own cost, boot and setup
#                cancelled out, with its total.
# The pmm table covers the whole run (boot, setup) divided by the operations,
# so only the functions the operations call read as per-operation costs.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

die() { echo "tcg-profile: $*" >&2; exit 1; }

what=${1:-pmm}
trace=${2:-uniform_64k_1G}
[ "$what" = pin ] && trace=${2:-0x10000}
case $what in
pmm)
	case $trace in
	uniform_64k_1G | mixed_4k_64k_2m_1G) per=400000 ;;
	buffers_128k_1m_6m_100m_1G) per=50000 ;;
	fill_4k_free_random_256M) per=131072 ;;
	checkerboard_then_2m_256M) per=20000 ;;
	init_1T) per=9 ;;
	*) die "unknown trace $trace" ;;
	esac ;;
pin) per=100000 ;;
*) die "usage: $0 pmm [TRACE] | pin [LEN]" ;;
esac

nvrs_bootstrap bench
NVRS_BENCH=1 nvrs_build
mkdir -p "$OUT"
plugin=$OUT/tb_count.so
gcc -Wall -O2 -shared -fPIC -o "$plugin" "$TESTS/vm/tcg_profile/tb_count.c" ||
	die "cannot build the QEMU plugin"
# boot NAME APPEND: one profiled boot; its counts in $OUT/NAME.txt, its
# modules' load addresses as symbolize.py's --module arguments in $OUT/NAME.mods.
boot() {
	local log=$OUT/tcg-profile-$1-console.log
	python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario "tcgprofile_$what" \
		--append "nvrs_profile=$2" --plugin "$plugin,out=$OUT/$1.txt" --mem 3072 \
		--mem-prealloc --gpu GH100:2048 --gpu GA100:2048 --timeout 900 --log "$log" \
		>/dev/null || die "the profiled VM run failed (log: $log)"
	sed -n 's/.*tcg-profile: module \([a-z_]*\) \(0x[0-9a-f]*\).*/\1 \2/p' "$log" |
		while read -r name addr; do
			case $name in
			nvrs) echo "$ROOT/nvrs.ko@$addr" ;;
			nvrs_consumer) echo "$ROOT/tests/consumer/nvrs_consumer.ko@$addr" ;;
			esac
		done >"$OUT/$1.mods"
	[ -s "$OUT/$1.mods" ] || die "no module addresses in $log"
}
# mods NAME FLAG: the --module (or --base-module) arguments of boot NAME.
mods() {
	sed "s/^/$2 /" "$OUT/$1.mods"
}
symbolize() {
	python3 "$TESTS/vm/tcg_profile/symbolize.py" --system-map "$KDIR/System.map" "$@"
}
if [ "$what" = pin ]; then
	for side in nvrs gup; do
		boot "$side-base" "$side:1000:$trace"
		boot "$side" "$side:101000:$trace"
		echo "== pin: $side, per pin + unpin of $trace bytes under TCG (101000 - 1000 boots) =="
		# shellcheck disable=SC2046 # one argument per word
		symbolize "$OUT/$side.txt" $(mods "$side" --module) --base "$OUT/$side-base.txt" \
			$(mods "$side-base" --base-module) --per "$per" --top 40
	done
	exit 0
fi
boot "$what" "$trace"
echo "== $what ${2:+$trace }under TCG: per operation ($per), whole run =="
# shellcheck disable=SC2046
symbolize "$OUT/$what.txt" $(mods "$what" --module) --per "$per"
