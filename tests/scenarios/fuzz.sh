# SPDX-License-Identifier: GPL-2.0
#
# Scenario "fuzz": a bounded, seeded fuzzer (tests/tools/nvrs-fuzz.c) of the
# /dev/nvrs ioctls and mmap and, through the consumer, of the nvidia_p2p_*
# functions with random, foreign and stale pointers. The runner fails the run
# on any splat; here every pin and byte of GPU memory must come back.

. /scenarios/lib.sh
M=/lib/modules
SEED=${NVRS_FUZZ_SEED:-20261202}
OPS=${NVRS_FUZZ_OPS:-100000}

check "insmod nvrs" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8
check "insmod consumer" insmod $M/nvrs_consumer.ko
if nvrs-fuzz "$SEED" "$OPS" >/tmp/fuzz.out 2>&1; then
	ok "fuzzer ran $OPS operations (seed $SEED)"
else
	not_ok "fuzzer ran $OPS operations (seed $SEED)"
fi
while IFS= read -r l; do diag "  $l"; done </tmp/fuzz.out
count=$(sed -n 's/.*: \([0-9]*\) operations; results.*/\1/p' /tmp/fuzz.out)
# Exit status 0 alone is no proof that it ran: its own count must say so.
check "  it reported $OPS operations or more (${count:-none})" test "${count:-0}" -ge "$OPS"
echo "nvrs-fuzz-count: $count"
check_all_returned
check "rmmod consumer" rmmod nvrs_consumer
check "rmmod nvrs" rmmod nvrs
done_testing
