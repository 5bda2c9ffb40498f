# SPDX-License-Identifier: GPL-2.0
#
# Scenario "fuzz": a bounded, seeded fuzzer (tests/tools/nvrs-fuzz.c) of the
# /dev/nvrs ioctls and mmap and, through the consumer, of the nvidia_p2p_*
# functions with random, foreign and stale pointers; stale tables kept past
# the quarantine ring's wrap, and a second run in a 16 MiB VA space whose
# freed allocations stay mapped (issue 20); a third run with the fault controls
# on at random (issue 22). The runner fails the run on any
# splat; here the fuzzer's counts must show each case ran without a
# violation, and every pin and byte of GPU memory must come back.

. /scenarios/lib.sh
M=/lib/modules
SEED=${NVRS_FUZZ_SEED:-20261202}
OPS=${NVRS_FUZZ_OPS:-100000}
# The small-VA block's share (the sanitizer VM runs fewer of both).
VA_OPS=${NVRS_FUZZ_VA_OPS:-$((OPS / 5))}
VA_MIB=16

# fuzz OPS [VA_MIB]: one run, its output as diagnostics, and its counts.
fuzz() {
	if nvrs-fuzz "$SEED" "$@" >/tmp/fuzz.out 2>&1; then
		ok "fuzzer ran $1 operations (seed $SEED${2:+, VA space $2 MiB})"
	else
		not_ok "fuzzer ran $1 operations (seed $SEED${2:+, VA space $2 MiB}): exit status or violations"
	fi
	while IFS= read -r l; do diag "  $l"; done </tmp/fuzz.out
	count=$(sed -n 's/.*: \([0-9]*\) operations; results.*/\1/p' /tmp/fuzz.out)
	# Exit status 0 alone is no proof that it ran: its own count must say so.
	check "  it reported $1 operations or more (${count:-none})" test "${count:-0}" -ge "$1"
	# Stale tables: kept across more pin ends than the quarantine ring holds.
	set -- $(sed -n 's/^nvrs-fuzz: stale tables: \([0-9]*\) kept, \([0-9]*\) checks, \([0-9]*\) pins .*violations: named \([0-9]*\) mapped \([0-9]*\) put_failed \([0-9]*\) ended \([0-9]*\)$/\1 \2 \3 \4 \5 \6 \7/p' /tmp/fuzz.out)
	check "  stale tables kept (${1:-none}) and checked (${2:-none})" \
		sh -c "test ${1:-0} -gt 0 && test ${2:-0} -gt 0"
	check "  more pins compared with them than the ring holds (${3:-none} > 8192)" \
		test "${3:-0}" -gt 8192
	check "  no stale table was a new pin's, mapped, or ended a pin (${4:-?} ${5:-?} ${6:-?} ${7:-?})" \
		test "${4:-1}${5:-1}${6:-1}${7:-1}" = 0000
}

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
fuzz "$OPS"
echo "nvrs-fuzz-count: $count"
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

# VA retention: in a 16 MiB VA space, 64 MiB of ALLOC + mmap + FREE with the
# mappings kept, then the mix.
check "insmod nvrs va_space_mib=$VA_MIB" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 \
	va_space_mib=$VA_MIB
check "insmod consumer" insmod $M/nvrs_consumer.ko
fuzz "$VA_OPS" "$VA_MIB"
rounds=$((4 * VA_MIB * 16))
check "  $rounds ALLOCs in a $VA_MIB MiB VA space with the freed mappings kept: none failed" \
	grep -q "^nvrs-fuzz: VA retention: $rounds rounds of 64 KiB in a $VA_MIB MiB VA space, 0 failed ALLOCs$" /tmp/fuzz.out
check "  and each of those mappings faults at the end" \
	grep -q "^nvrs-fuzz: VA retention: $rounds of $rounds kept mappings fault$" /tmp/fuzz.out
echo "nvrs-fuzz-count-va: $count"
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs

# Under the fault controls (issue 22): every call that can be made to fail
# fails now and then, pins are revoked at random while others are made and by
# a timer every 50 ms, and callbacks run late from the workqueue; the fuzzer's
# properties must hold and
# every pin and byte must come back all the same.
FAULT_OPS=${NVRS_FUZZ_FAULT_OPS:-$((OPS / 5))}
check "insmod nvrs with the callback controls" insmod $M/nvrs.ko emulated=1 \
	peer_device=0x123411e8 fault_callback_workqueue=1 fault_callback_delay_us=100
check "insmod consumer" insmod $M/nvrs_consumer.ko
for g in $(nvrs_bound); do
	F=/sys/kernel/debug/nvrs/$g/faults
	check "  $g: controls on at random (seed $SEED)" sh -c "
		echo 'fail get_pages EIO permille 30 seed $SEED' >$F &&
		echo 'fail get_pages_persistent ENOMEM permille 30 seed $SEED' >$F &&
		echo 'fail dma_map ENOMEM permille 30 seed $SEED' >$F &&
		echo 'fail dmabuf_attach EBUSY permille 30 seed $SEED' >$F &&
		echo 'fail dmabuf_map EIO permille 30 seed $SEED' >$F &&
		echo 'revoke permille 20 seed $SEED' >$F &&
		echo 'revoke every 50' >$F"
done
fuzz "$FAULT_OPS"
echo "nvrs-fuzz-count-faults: $count"
injected=0
for g in $(nvrs_bound); do
	injected=$((injected + $(sed -n 's/^injected //p' /sys/kernel/debug/nvrs/$g/faults)))
	diag "$g: $(tr '\n' ' ' </sys/kernel/debug/nvrs/$g/faults)"
done
check "  the controls made calls fail ($injected)" test "$injected" -gt 0
revoked=0
for g in $(nvrs_bound); do
	revoked=$((revoked + $(sed -n 's/^revoked //p' /sys/kernel/debug/nvrs/$g/faults)))
done
check "  the controls revoked pins ($revoked)" test "$revoked" -gt 0
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
