# SPDX-License-Identifier: GPL-2.0
#
# Scenario "vaspace": what a process leaves behind cannot take the GPU VA
# space (shared by all processes) from others. The VA space is shrunk to
# 16 MiB (va_space_mib), eight 2 MiB allocations.

. /scenarios/lib.sh
M=/lib/modules
D=/sys/kernel/debug/nvrs

check "insmod nvrs (16 MiB VA space)" insmod $M/nvrs.ko emulated=1 peer_device=0x123411e8 va_space_mib=16
check "insmod consumer" insmod $M/nvrs_consumer.ko

# --- A CPU mapping left after FREE keeps no VAs -----------------------------
# 40 x (ALLOC 2 MiB, mmap, FREE) without munmap: at fe5c205 each VMA kept its
# allocation, VAs included, and the ninth ALLOC failed (ENOMEM).
tool "40 x (ALLOC 2 MiB, mmap, FREE without munmap) in a VA space that holds 8; each mapping faults; a new allocation at an old mapping's VAs is never reached through it" \
	mapleak 0 2M 40
check "  the VA allocator wrapped around" grep -qE "^va_ranges: [0-9]+ wraps [1-9]" $D/p2p
check "  no VA range is left (va_ranges: 0)" grep -qE "^va_ranges: 0 " $D/p2p

# --- The owner's exit releases its memory outside the MMU notifier ---------
# The notifier's release runs in the exiting task inside the notifier's SRCU
# read section (exit_mmap -> mmu_notifier_release): a free callback run from
# there cannot wait for SRCU, and scrubbing GiBs there delays every notifier
# user. At fe5c205 the callback ran in the exiting task (exiting 1 worker 0).
# A child holds the file, so the release is not the last close's.
tool "an owner exits with a pinned allocation while a child holds its file" \
	alloc A 0 2M \; ctl pin 6 @A 0x10000 \; forkhold 2000
tool "  its pin's free callback fired" sleep 500 \; ctl status 6
check "  callbacks 1" grep -qE "callbacks 1$" /tmp/tool.out
tool "  where the callback ran" ctl cbctx 6
check "  in a workqueue worker, not in the exiting task" grep -qx "cbctx exiting 0 worker 1" /tmp/tool.out
check "  the child exits" sh -c "sleep 2"

check "rmmod consumer" rmmod nvrs_consumer
check_all_returned
check "rmmod nvrs" rmmod nvrs

# --- An exited owner's memory is back once it has exited --------------------
# The release runs in the exit work; the last close (in the exiting task,
# before its parent sees it end) waits for it. The test delay holds the exit
# work's release 1500 ms after it took the allocation out, so a close that did
# not wait would leave the next process ENOMEM (seen once in make check, after
# the isolation scenario's hog exited).
check "insmod nvrs (exit release delayed 1500 ms)" insmod $M/nvrs.ko emulated=1 \
	test_delay_points=4 test_delay_ms=1500
G1=$(nvrs_bound | sed -n 2p)
FB1=$(fb_total "$G1")
for i in 1 2 3; do
	tool "round $i: a process fills all of GPU1 and exits" alloc A 1 "$FB1" \; fill A 0x0e11e11e
	tool "  the next process gets all of GPU1 at once" alloc B 1 "$FB1" \; free B
done
check "  the exit work's release was delayed" sh -c "dmesg | grep -q 'test delay: 1500 ms at exit-release'"
check_all_returned
check "rmmod nvrs" rmmod nvrs
done_testing
