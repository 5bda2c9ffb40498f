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
#   pin:         108200 64 KiB nvidia_p2p_get_pages + put_pages (8200 fill the
#                quarantine ring), per pair.
# The table covers the whole run (boot, setup) divided by the operations, so
# only the functions the operations call read as per-operation costs.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

die() { echo "tcg-profile: $*" >&2; exit 1; }

what=${1:-pmm}
trace=${2:-uniform_64k_1G}
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
pin) per=108200 ;;
*) die "usage: $0 pmm [TRACE] | pin" ;;
esac

nvrs_bootstrap bench
NVRS_BENCH=1 nvrs_build
mkdir -p "$OUT"
plugin=$OUT/tb_count.so
counts=$OUT/tb_count.txt
log=$OUT/tcg-profile-console.log
gcc -Wall -O2 -shared -fPIC -o "$plugin" "$TESTS/vm/tcg_profile/tb_count.c" ||
	die "cannot build the QEMU plugin"
python3 "$TESTS/vm/run.py" "${VM_MODULES[@]}" --scenario "tcgprofile_$what" \
	--append "nvrs_profile=$trace" --plugin "$plugin,out=$counts" --mem 3072 --mem-prealloc \
	--gpu GH100:2048 --gpu GA100:2048 --timeout 900 --log "$log" >/dev/null ||
	die "the profiled VM run failed (log: $log)"
modules=()
while read -r name addr; do
	case $name in
	nvrs) modules+=(--module "$ROOT/nvrs.ko@$addr") ;;
	nvrs_consumer) modules+=(--module "$ROOT/tests/consumer/nvrs_consumer.ko@$addr") ;;
	esac
done < <(sed -n 's/.*tcg-profile: module \([a-z_]*\) \(0x[0-9a-f]*\).*/\1 \2/p' "$log")
echo "== $what ${2:+$trace }under TCG: per operation ($per), whole run =="
python3 "$TESTS/vm/tcg_profile/symbolize.py" "$counts" --system-map "$KDIR/System.map" \
	"${modules[@]}" --per "$per"
