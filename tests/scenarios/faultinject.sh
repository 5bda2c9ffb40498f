# SPDX-License-Identifier: GPL-2.0
#
# Scenario "faultinject" (sanitizer kernel only): every path that allocates
# is run with its N-th allocation failing (fault injection through
# /proc/thread-self/fail-nth, slab and page allocations), for N = 1, 2, ...
# until the path succeeds with nothing injected. Each injected failure must
# give a documented errno and leave nothing behind: the runner fails the run
# on a WARN, a KASAN report or a leak, and at the end every pin and byte of
# GPU memory must be back.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs
F=/sys/kernel/debug

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU1=$(nvrs_bound | sed -n 2p)
# Without fault injection in the kernel every sweep would end at N = 1 with
# "nothing injected": the scenario must fail then, not pass with 0 points.
check "fault injection available (/proc/thread-self/fail-nth)" test -w /proc/thread-self/fail-nth
# knob FILE VALUE: writes a fault-injection attribute and reads it back.
knob() {
	echo "$2" >"$1" && [ "$(cat "$1")" = "$2" ]
}
# Fail sleeping allocations too, of any order, and quietly.
for f in failslab fail_page_alloc; do
	check "$f: sleeping allocations fail too (ignore-gfp-wait N)" knob $F/$f/ignore-gfp-wait N
	check "$f: quiet (verbose 0)" knob $F/$f/verbose 0
done
check "fail_page_alloc: allocations of every order (min-order 0)" knob $F/fail_page_alloc/min-order 0
POINTS=0

# sweep NAME ALLOWED SETUP CMD CLEANUP: runs
#   nvrs-tool SETUP ; fail N CMD ; CLEANUP
# for N = 1, 2, ... until CMD succeeds with no fault injected. ALLOWED lists
# the results (0 or negative errnos) a run with an injected failure may give
# (0: the failure was absorbed, e.g. kvmalloc falling back to vmalloc); "0"
# alone: CMD must succeed whatever fails inside it. SETUP, CMD and CLEANUP
# are word lists, with ";" between commands.
sweep() {
	_iame=$1 _allowed=$2 _setup=$3 _cmd=$4 _cleanup=$5
	_i=1
	_bad=
	while [ $_i -le 600 ]; do
		# shellcheck disable=SC2086
		nvrs-tool $_setup \; fail $_i $_cmd \; $_cleanup >/tmp/fi.out 2>&1
		_line=$(grep "^fail $_i injected" /tmp/fi.out)
		_inj=$(echo "$_line" | awk '{print $4}')
		_res=$(echo "$_line" | awk '{print $6}')
		if [ -z "$_line" ]; then
			# e.g. "fail N unavailable: fail-nth: ..." (nvrs-tool)
			_bad="N=$_i: no result: $(grep "^fail $_i " /tmp/fi.out)"
			break
		fi
		if [ "$_inj" = 0 ]; then
			[ "$_res" = 0 ] || _bad="N=$_i: failed ($_res) with nothing injected"
			break
		fi
		case " $_allowed " in
		*" $_res "*) ;;
		*) _bad="$_bad N=$_i:$_res" ;;
		esac
		_i=$((_i + 1))
	done
	_pts=$((_i - 1))
	POINTS=$((POINTS + _pts))
	# Every path allocates: a sweep that injected nothing tested nothing.
	[ $_pts -gt 0 ] || _bad="$_bad nothing was injected"
	if [ -z "$_bad" ] && [ $_i -le 600 ]; then
		ok "$_iame: $_pts injection points, each failed cleanly"
	else
		not_ok "$_iame: $_pts injection points; unexpected: $_bad"
		while IFS= read -r l; do diag "  $l"; done </tmp/fi.out
	fi
}

sweep "ALLOC of 4 MiB" "0 -12" "count" "alloc A 0 4M" "free A"
sweep "ALLOC of 4 MiB contiguous" "0 -12" "count" "alloc A 0 4M contig" "free A"
sweep "mmap and first touch" "0 -12" "alloc A 0 2M" "mapall A" "free A"
sweep "nvidia_p2p_get_pages" "0 -12" "alloc A 0 2M" "ctl pin 0 @A 0x200000" "ctl put 0 ; free A"
sweep "nvidia_p2p_get_pages_persistent" "0 -12" "alloc A 0 2M" "ctl ppin 1 @A 0x200000" \
	"ctl put 1 ; free A"
sweep "nvidia_p2p_dma_map_pages" "0 -12 -5" "alloc A 0 4M ; ctl pin 2 @A 0x400000" "ctl map 2" \
	"ctl put 2 ; free A"
sweep "EXPORT_DMABUF" "0 -12" "alloc A 0 2M" "export A 0 2M" "close A ; free A"
sweep "dma-buf import through the RDMA core (pinned)" "0 -12 -5" "alloc A 0 2M ; export A 0 2M" \
	"ctl dbget 0 %A 0 0x200000 pinned" "ctl dbput 0 ; close A ; free A"
sweep "dma-buf import through the RDMA core (dynamic)" "0 -12 -5" "alloc A 0 2M ; export A 0 2M" \
	"ctl dbget 1 %A 0 0x200000 dynamic" "ctl dbput 1 ; close A ; free A"
# Teardown cannot fail: FREE of mapped, pinned memory succeeds whatever allocation
# fails inside it.
sweep "FREE of a mapped and pinned allocation" "0" \
	"alloc A 0 2M ; ctl pin 3 @A 0x10000 ; ctl map 3 ; mapall A" "free A" "ctl put 3"
# FREE of an exported allocation allocates nothing (a sweep of it injects
# nothing): the dma-buf holds the memory, and closing it gives the memory back.
sweep "close of the dma-buf of a freed allocation" "0" "alloc A 0 2M ; export A 0 2M ; free A" \
	"close A" "count"
check "no pins left" grep -qx "pins: 0" $D/p2p
# Probe: bind GPU1 with its N-th allocation failing (unbound again before each try).
# Without P2PDMA struct pages (p2pdma=0): the kernel's memory hotplug, which
# creates them at the end of probe, makes hundreds of allocations of its own,
# and warns (add_pages(): WARN_ON_ONCE) when one of them fails; nvrs then only
# logs that the GPU has no provider.
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
check "insmod nvrs p2pdma=0" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 p2pdma=0
check "insmod consumer" insmod $M/nvrs_consumer.ko
GPU1=$(nvrs_bound | sed -n 2p)
sweep "probe (bind)" "0 -12 -19" "write /sys/bus/pci/drivers/nvrs/unbind $GPU1" \
	"write /sys/bus/pci/drivers/nvrs/bind $GPU1" "count"
check "GPU1 bound again" test -e /sys/bus/pci/drivers/nvrs/$GPU1
diag "fault injection: $POINTS injection points exercised"
echo "nvrs-faultinject: points $POINTS"

# Nothing failed for good: a clean pass works, and everything came back.
tool "a clean pass afterwards" alloc A 1 4M \; mapall A \; ctl pin 4 @A 0x400000 \; ctl map 4 \; \
	ctl put 4 \; free A
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
